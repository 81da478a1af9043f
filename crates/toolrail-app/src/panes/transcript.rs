//! Transcript: export the shown run as JSON and Markdown; open a transcript and replay it step by
//! step (back, forward, a slider), with the same token strip and details as the Generation pane.

use crate::dialogs::FileRequest;
use std::path::{Path, PathBuf};

use egui::RichText;

use crate::shared::Shared;
use crate::token_view::{DEMO_LABEL, TokenStrip, explanation, long_text, mask_plot, token_details};
use toolrail_workbench::run::{Replay, RunSettings};
use toolrail_workbench::transcript::explain::stop_words;
use toolrail_workbench::workspace::RecentKind;

/// The transcript pane's own UI state.
#[derive(Default)]
pub struct TranscriptPane {
    strip: TokenStrip,
    saved_settings: Option<RunSettings>,
    history: crate::run_history::RunHistory,
}

/// Exports the run [`RunState::export_target`](toolrail_workbench::run::RunState::export_target)
/// names (the shown run if it has ended, else the latest ended one) as `json` and the Markdown
/// next to it (same name, `.md`), and remembers it as the last transcript. Errors go to the
/// status bar. It writes at once, on the calling thread (scripts and tests); the app's Export
/// hands the writing to its file tasks instead.
pub fn export_to(shared: &mut Shared, json: &Path) -> Option<PathBuf> {
    let Some(id) = shared.run.export_target() else {
        shared.error("no run has ended yet: nothing to export");
        return None;
    };
    let markdown = json.with_extension("md");
    match shared.run.controller.export(id, json, Some(&markdown)) {
        Ok(_) => {
            shared.run.settings.last_transcript = Some(json.to_path_buf());
            shared.message(format!(
                "Run {id} written to {} and {}",
                json.display(),
                markdown.display()
            ));
            Some(markdown)
        }
        Err(e) => {
            shared.error(e.to_string());
            None
        }
    }
}

/// Opens a transcript file for replay and remembers it as the last transcript, reading it here
/// (the app reads a transcript the user opens in its file tasks, then calls [`opened`]).
pub fn open_from(shared: &mut Shared, path: &Path) {
    let replay = Replay::open(path).map_err(|e| e.to_string());
    opened(shared, path, replay);
}

/// Shows a transcript read from `path` for replay and remembers it as the last transcript; a
/// file that did not open is said and leaves Open recent.
pub fn opened(shared: &mut Shared, path: &Path, replay: Result<Replay, String>) {
    match replay {
        Ok(replay) => {
            shared.run.controller.show_replay(replay);
            shared.run.settings.last_transcript = Some(path.to_path_buf());
            // Replays show in the Generation and Validator panes when no live run is selected.
            shared.run.shown = None;
        }
        Err(e) => {
            (shared.workspace).forget_recent(RecentKind::Transcript, path);
            shared.error(e);
        }
    }
}

impl TranscriptPane {
    /// Draws the pane.
    pub fn ui(&mut self, ui: &mut egui::Ui, shared: &mut Shared) {
        shared.sync_run_settings(&mut self.saved_settings);
        let target = shared.run.export_target();
        let requested = std::mem::take(&mut shared.run.export_requested);
        if requested && target.is_none() {
            shared.error("no run has ended yet: nothing to export");
        }
        let mut export = requested && target.is_some();
        ui.horizontal_wrapped(|ui| {
            let (label, hover) = match target.and_then(|id| shared.run.controller.run(id)) {
                Some(run) => (
                    format!("Export Run {} (JSON + Markdown)…", run.id),
                    format!(
                        "Writes Run {}: engine {}, {} tokens",
                        run.id,
                        run.request.engine.name(),
                        run.tokens.len()
                    ),
                ),
                None => (
                    "Export JSON + Markdown…".to_owned(),
                    "No run of this session has ended yet: runs are exported, replays are \
                     already files"
                        .to_owned(),
                ),
            };
            let action = toolrail_workbench::actions::Action::ExportTranscript;
            if ui
                .add_enabled(shared.enabled(&action), egui::Button::new(label))
                .on_hover_text(hover)
                .on_disabled_hover_text(
                    "No run of this session has ended yet (a replayed file is already saved)",
                )
                .clicked()
            {
                export = true;
            }
            if ui.button("Open transcript…").clicked() {
                shared.pick_file(
                    FileRequest::OpenTranscript,
                    rfd::AsyncFileDialog::new().add_filter("toolrail transcript", &["json"]),
                );
            }
            if let Some(replay) = shared.run.controller.replay()
                && ui.button("Close replay").clicked()
            {
                if replay.demo {
                    shared.run.settings.demo_closed = true;
                }
                shared.run.controller.close_replay();
            }
        });
        if export {
            shared.save_file(
                FileRequest::ExportTranscript,
                rfd::AsyncFileDialog::new()
                    .add_filter("toolrail transcript", &["json"])
                    .set_file_name("transcript.json"),
            );
        }
        if let Some(path) = &shared.run.settings.last_transcript {
            ui.label(RichText::new(format!("last transcript: {}", path.display())).weak());
        }
        egui::CollapsingHeader::new(format!(
            "Run history ({})",
            shared.run.controller.runs().len()
        ))
        .id_salt("transcript-history")
        .show(ui, |ui| self.history.ui(ui, shared));
        ui.separator();
        let Some(replay) = shared.run.controller.replay_mut() else {
            ui.label(RichText::new("Open a transcript to replay it step by step.").weak());
            return;
        };
        let t = &replay.transcript;
        if replay.demo {
            ui.label(
                RichText::new(DEMO_LABEL)
                    .strong()
                    .color(ui.visuals().warn_fg_color),
            );
        } else if let Some(id) = replay.run {
            ui.label(RichText::new(format!("Shown: Run {id} of this session")).strong());
        } else if let Some(path) = &replay.path {
            ui.label(
                RichText::new(format!("Shown: the transcript file {}", path.display())).strong(),
            );
        }
        ui.label(
            RichText::new(format!(
                "{} · engine {} · {} tokens · {}",
                t.model.name,
                t.engine,
                t.tokens.len(),
                stop_words(&t.stop)
            ))
            .strong(),
        );
        ui.horizontal(|ui| {
            if ui.button("Back").clicked() {
                replay.back();
            }
            if ui.button("Forward").clicked() {
                replay.forward();
            }
            let mut position = replay.position();
            let len = replay.len();
            if ui
                .add(egui::Slider::new(&mut position, 0..=len).text("step"))
                .changed()
            {
                replay.seek(position);
            }
        });
        egui::CollapsingHeader::new("Prompt")
            .id_salt("transcript-prompt")
            .show(ui, |ui| {
                long_text(ui, &replay.transcript.prompt, true);
            });
        ui.label(RichText::new("Output so far").strong());
        let text = replay.text();
        if text.is_empty() {
            ui.label(RichText::new("(nothing yet)").monospace());
        } else {
            long_text(ui, &text, true);
        }
        let so_far = replay.text();
        let shown = replay.shown();
        if replay.stop().is_some() {
            // the whole run shown: what it says about itself (the timeline among it)
            explanation(ui, replay.explanation());
        } else {
            crate::token_view::timeline_line(
                ui,
                replay.transcript.template.as_ref(),
                shown,
                &so_far,
            );
        }
        let current = shown.len().checked_sub(1);
        let clicked = self.strip.ui(ui, shown, current, "transcript");
        if let Some(token) = replay.current() {
            // Replays cannot branch: there is no model behind them.
            let _ = token_details(ui, token, replay.transcript.grammar.as_deref(), false);
        }
        mask_plot(
            ui,
            replay.shown(),
            replay.transcript.engine,
            "transcript-mask-plot",
        );
        if let Some(i) = clicked {
            replay.seek(i + 1);
        }
    }
}
