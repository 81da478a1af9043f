//! Validator: the parsed call(s) of a run's output, schema errors with their JSON pointers, the
//! feedback message for the model; for an unconstrained run the calls extraction found in the free
//! text; and the constrained and unconstrained runs of one prompt side by side. A replayed
//! transcript shows the validation it was saved with.

use egui::RichText;

use crate::shared::Shared;
use crate::token_view::{long_text, ok_color, phase_text};
use toolrail_tools::validate::{CallCheck, Report};
use toolrail_workbench::run::{
    Outcome, Run, RunSettings, RunState, ServerCallCheck, TemplateParse,
};

/// The validator pane's own UI state.
#[derive(Default)]
pub struct ValidatorPane {
    saved_settings: Option<RunSettings>,
}

impl ValidatorPane {
    /// Draws the pane.
    pub fn ui(&mut self, ui: &mut egui::Ui, shared: &mut Shared) {
        shared.sync_run_settings(&mut self.saved_settings);
        let ready = shared.run.controller.model().is_some() && !shared.run.controller.is_busy();
        if ui
            .add_enabled(ready, egui::Button::new("Compare with and without grammar"))
            .on_hover_text("Runs the prompt constrained, then unconstrained, and shows both here")
            .clicked()
        {
            let setup = shared.run.setup(&shared.analysis);
            let inputs = RunState::inputs(&shared.analysis);
            match shared.run.controller.start_pair(&setup, &inputs) {
                Ok(pair) => shared.run.shown = Some(pair.constrained),
                Err(e) => shared.error(e.to_string()),
            }
        }
        self.pasted_ui(ui, shared);
        ui.separator();
        let controller = &shared.run.controller;
        egui::ScrollArea::vertical()
            .id_salt("validator-scroll")
            .show(ui, |ui| {
                if let Some(pair) = controller.pair()
                    && let (Some(c), Some(u)) = (
                        controller.run(pair.constrained),
                        controller.run(pair.unconstrained),
                    )
                {
                    ui.label(RichText::new("Side by side: the same prompt").strong());
                    // Columns lay out justified; the outputs must show exactly as written (a
                    // justified row spreads JSON's characters apart), so each column is plain.
                    ui.columns(2, |cols| {
                        let plain = egui::Layout::top_down(egui::Align::Min);
                        cols[0].with_layout(plain, |ui| run_view(ui, c, "With the grammar"));
                        cols[1].with_layout(plain, |ui| run_view(ui, u, "Without the grammar"));
                    });
                    ui.separator();
                }
                let shown = shared
                    .run
                    .shown
                    .and_then(|id| controller.run(id))
                    .or_else(|| controller.latest());
                match shown {
                    Some(run) if !is_pair_member(controller.pair(), run) => {
                        run_view(ui, run, &format!("Run {}", run.id));
                    }
                    Some(_) => {}
                    None => match controller.replay() {
                        Some(replay) => {
                            ui.label(RichText::new("Replayed transcript").strong());
                            long_text(ui, &replay.transcript.output, true);
                            if let Some(template) = &replay.transcript.template {
                                replayed_parse_view(ui, template);
                            }
                            match &replay.transcript.validation {
                                Some(v) => {
                                    let text = serde_json::to_string_pretty(v).unwrap_or_default();
                                    long_text(ui, &text, true);
                                }
                                None => {
                                    ui.label(RichText::new("saved without validation").weak());
                                }
                            }
                        }
                        None => {
                            ui.label(
                                RichText::new("Nothing to validate yet: run the model first.")
                                    .weak(),
                            );
                        }
                    },
                }
            });
    }
}

impl ValidatorPane {
    /// A box to paste a model output, checked by the validator and the grammar (on the
    /// analysis thread) as it is typed.
    fn pasted_ui(&mut self, ui: &mut egui::Ui, shared: &mut Shared) {
        egui::CollapsingHeader::new("Check a pasted output")
            .id_salt("validator-paste")
            .default_open(true)
            .show(ui, |ui| {
                let label = ui.label("Model output to check");
                let id = egui::Id::unique("validator-pasted-output");
                let text = crate::large_text::Text::Editable(&mut shared.pasted_output);
                let view = crate::large_text::View {
                    rows: Some(6),
                    ..Default::default()
                };
                if crate::large_text::fits(ui, id, text, &view) {
                    ui.add(
                        egui::TextEdit::multiline(&mut shared.pasted_output)
                            .id(id)
                            .code_editor()
                            .hint_text("paste what a model wrote")
                            .desired_rows(3)
                            .desired_width(f32::INFINITY),
                    )
                    .labelled_by(label.id);
                }
                if shared.pasted_output.is_empty() {
                    return;
                }
                let check = match &shared.pasted_check {
                    Some((text, check)) if *text == shared.pasted_output => check,
                    _ => {
                        ui.label(RichText::new("checking…").weak());
                        return;
                    }
                };
                if let Some(content) = &check.response_content {
                    ui.label(RichText::new("A chat response; its message's content:").weak());
                    if content.is_empty() {
                        ui.label(RichText::new("(empty)").monospace().weak());
                    } else {
                        long_text(ui, content, true);
                    }
                }
                if let Some(outcome) = &check.outcome {
                    outcome_view(ui, outcome);
                }
                let color = if check.grammar_accepts {
                    ok_color(ui)
                } else {
                    ui.visuals().warn_fg_color
                };
                ui.add(egui::Label::new(RichText::new(&check.grammar).color(color)).wrap());
            });
    }
}

fn is_pair_member(pair: Option<toolrail_workbench::run::Pair>, run: &Run) -> bool {
    pair.is_some_and(|p| p.constrained == run.id || p.unconstrained == run.id)
}

fn run_view(ui: &mut egui::Ui, run: &Run, title: &str) {
    ui.label(RichText::new(title).strong());
    ui.label(RichText::new(format!("engine {}", run.request.engine.name())).weak());
    let output = match &run.finish {
        Some(f) => f.output.as_str(),
        None => run.text.as_str(),
    };
    ui.label(RichText::new("Output").strong());
    if output.is_empty() {
        ui.label(RichText::new("(empty)").monospace());
    } else {
        long_text(ui, output, true);
    }
    match &run.outcome {
        Some(outcome) => outcome_view(ui, outcome),
        None => {
            ui.label(RichText::new(format!("not validated yet: {}", phase_text(run))).weak());
        }
    }
}

fn outcome_view(ui: &mut egui::Ui, outcome: &Outcome) {
    if let Some(failure) = &outcome.failure {
        ui.label(
            RichText::new("invalid: the run failed")
                .color(ui.visuals().error_fg_color)
                .strong(),
        );
        ui.add(egui::Label::new(RichText::new(failure).color(ui.visuals().error_fg_color)).wrap());
    }
    if let Some(error) = &outcome.error {
        ui.label(RichText::new(error).color(ui.visuals().error_fg_color));
    }
    if let Some(report) = &outcome.report {
        report_view(ui, report, outcome.failure.is_some());
    }
    if let Some(calls) = &outcome.server_calls {
        server_calls_view(ui, calls);
    }
    if let Some(parse) = &outcome.template {
        template_parse_view(ui, parse);
    }
    if let Some(extraction) = &outcome.extraction {
        ui.label(RichText::new(format!("Extracted calls: {}", extraction.calls.len())).strong());
        for (i, call) in extraction.calls.iter().enumerate() {
            ui.label(
                RichText::new(format!(
                    "{} ({}, bytes {}..{})",
                    call.call.name,
                    call.pattern.label(),
                    call.span.start,
                    call.span.end
                ))
                .monospace(),
            );
            ui.label(
                RichText::new(serde_json::to_string(&call.call.arguments).unwrap_or_default())
                    .monospace(),
            );
            if let Some(check) = outcome.extracted_checks.get(i) {
                check_issues(ui, check);
            }
        }
        for d in &extraction.diagnostics {
            ui.label(
                RichText::new(format!(
                    "not a call ({}) at byte {}: {}",
                    d.pattern.label(),
                    d.at,
                    d.message
                ))
                .weak(),
            );
        }
        if !extraction.prose.is_empty() {
            ui.label(RichText::new("Prose").strong());
            ui.label(RichText::new(&extraction.prose).italics());
        }
    }
}

/// The validator's report; `failed`: the run failed, so no verdict is shown as a success.
fn report_view(ui: &mut egui::Ui, report: &Report, failed: bool) {
    let verdict = if failed {
        RichText::new("the output so far, read in the envelope:").weak()
    } else if report.is_valid_call() {
        RichText::new(format!("valid {} call", report.format)).color(ok_color(ui))
    } else if report.is_valid() {
        RichText::new("valid (no call)").color(ok_color(ui))
    } else {
        RichText::new(format!(
            "invalid ({})",
            report.category().unwrap_or("unknown")
        ))
        .color(ui.visuals().error_fg_color)
    };
    ui.label(verdict.strong());
    if let Some(e) = &report.parse_error {
        ui.label(
            RichText::new(format!("parse error at byte {}: {}", e.offset, e.message))
                .color(ui.visuals().error_fg_color),
        );
    }
    for issue in &report.output_issues {
        ui.label(RichText::new(issue).color(ui.visuals().error_fg_color));
    }
    for call in &report.calls {
        ui.label(RichText::new(format!("call {}: {}", call.index, call.name)).monospace());
        ui.label(
            RichText::new(serde_json::to_string(&call.arguments).unwrap_or_default()).monospace(),
        );
        check_issues(ui, call);
    }
    if let Some(feedback) = report.feedback() {
        ui.label(RichText::new("Feedback for the model").strong());
        ui.label(RichText::new(feedback).monospace());
    }
}

/// llama.cpp's parse of a template run's output (content, reasoning, tool calls, as
/// llama-server would return them), each call beside toolrail's check of it, and where the two
/// disagree.
fn template_parse_view(ui: &mut egui::Ui, parse: &TemplateParse) {
    ui.label(RichText::new("llama.cpp's parse (common_chat_parse)").strong());
    match &parse.parsed {
        Err(e) => {
            ui.add(
                egui::Label::new(
                    RichText::new(format!("llama.cpp's parser refused the output: {e}"))
                        .color(ui.visuals().error_fg_color),
                )
                .wrap(),
            );
        }
        Ok(message) => {
            for (name, text) in [
                ("content", &message.content),
                ("reasoning", &message.reasoning_content),
            ] {
                ui.label(RichText::new(name).weak());
                if text.is_empty() {
                    ui.label(RichText::new("(empty)").monospace().weak());
                } else {
                    long_text(ui, text, true);
                }
            }
            ui.label(
                RichText::new(format!(
                    "Tool calls llama.cpp parsed: {}",
                    parse.calls.len()
                ))
                .strong(),
            );
            for (i, call) in parse.calls.iter().enumerate() {
                ui.label(
                    RichText::new(format!("{i}: {}({})", call.name, call.arguments)).monospace(),
                );
                ui.label(RichText::new("toolrail's schema check:").weak());
                match &call.check {
                    Ok(check) => check_issues(ui, check),
                    Err(e) => {
                        ui.label(RichText::new(e).color(ui.visuals().error_fg_color));
                    }
                }
            }
        }
    }
    if parse.disagreements.is_empty() {
        if parse.parsed.is_ok() {
            ui.label(
                RichText::new("llama.cpp's parse and toolrail's schema check agree")
                    .color(ok_color(ui)),
            );
        }
    } else {
        ui.label(RichText::new("Where they disagree").strong());
        for line in &parse.disagreements {
            ui.add(egui::Label::new(RichText::new(line).color(ui.visuals().error_fg_color)).wrap());
        }
    }
}

/// The calls a llama-server parsed from a `tools` run's output, each checked against its tool.
fn server_calls_view(ui: &mut egui::Ui, calls: &[ServerCallCheck]) {
    ui.label(RichText::new(format!("Calls the server parsed: {}", calls.len())).strong());
    if calls.is_empty() {
        ui.label(
            RichText::new(
                "The server parsed no tool call from the output (the run says why, in the \
                 Generation pane).",
            )
            .color(ui.visuals().error_fg_color),
        );
    }
    for (i, call) in calls.iter().enumerate() {
        ui.label(RichText::new(format!("{i}: {}({})", call.name, call.arguments)).monospace());
        match &call.check {
            Ok(check) => check_issues(ui, check),
            Err(e) => {
                ui.label(RichText::new(e).color(ui.visuals().error_fg_color));
            }
        }
    }
}

fn check_issues(ui: &mut egui::Ui, check: &CallCheck) {
    if check.is_valid() {
        ui.label(RichText::new("arguments valid").color(ok_color(ui)));
    }
    for issue in &check.issues {
        let pointer = if issue.pointer.is_empty() {
            "(arguments)"
        } else {
            issue.pointer.as_str()
        };
        ui.label(
            RichText::new(format!("{pointer} [{}] {}", issue.keyword, issue.message))
                .monospace()
                .color(ui.visuals().error_fg_color),
        );
    }
}

/// llama.cpp's parse as a replayed transcript recorded it.
fn replayed_parse_view(ui: &mut egui::Ui, template: &toolrail_workbench::transcript::TemplateRun) {
    ui.label(
        RichText::new(format!(
            "llama.cpp's parse (template {}, format {})",
            template.source, template.result.format
        ))
        .strong(),
    );
    match (&template.parsed, &template.parse_error) {
        (Some(message), _) => {
            ui.label(
                RichText::new(format!(
                    "content {:?}, reasoning {:?}",
                    message.content, message.reasoning_content
                ))
                .monospace(),
            );
            for (i, call) in message.tool_calls.iter().enumerate() {
                ui.label(
                    RichText::new(format!("{i}: {}({})", call.name, call.arguments)).monospace(),
                );
            }
        }
        (None, Some(e)) => {
            ui.label(
                RichText::new(format!("llama.cpp's parser refused the output: {e}"))
                    .color(ui.visuals().error_fg_color),
            );
        }
        (None, None) => {
            ui.label(RichText::new("not parsed").weak());
        }
    }
}
