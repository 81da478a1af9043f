//! Grammar: the GBNF in force (generated live from the schema, or hand-edited), highlighted with
//! syntect, with its lint findings listed (click one to select its span) and `.gbnf` import and
//! export.

use crate::dialogs::FileRequest;

use crate::highlight::{self, Mark, MarkKind};
use crate::large_text;
use crate::shared::Shared;
use toolrail_gbnf::Severity;
use toolrail_workbench::workspace::GrammarSource;

/// The grammar pane's own UI state.
#[derive(Default)]
pub struct GrammarPane {
    /// The last selection request applied (so it is applied once).
    applied: Option<(std::ops::Range<usize>, std::sync::Arc<str>)>,
    /// The highlighted grammar's layout.
    galleys: highlight::GalleyCache,
    /// The template prompt last tokenized and its tokens (id, piece), so that it is tokenized
    /// once, not every frame.
    prompt_tokens: Option<(String, Vec<(u32, String)>)>,
    /// The last grammar generated from a schema without error, shown (greyed, under the
    /// error) while the schema has an error, instead of a blank pane.
    last_good: String,
    /// The search bar (Ctrl+F).
    search: crate::editor::Search,
    /// Replacements of the hand-edited text from outside the editor, as undo steps.
    external: crate::editor::ExternalEdits,
}

/// The id of the grammar text view (tests find it by its label "Grammar text").
pub const GRAMMAR_VIEW_ID: &str = "grammar-text";

impl GrammarPane {
    /// Draws the pane.
    pub fn ui(&mut self, ui: &mut egui::Ui, shared: &mut Shared) {
        toolbar(ui, shared);
        let analysis = std::sync::Arc::clone(&shared.analysis);
        if shared.workspace.template.on {
            if !self.template_section(ui, shared) {
                return;
            }
        } else if !shared.workspace.grammar.hand_edited {
            if analysis.schema_issue.is_none() && !analysis.generated.is_empty() {
                if self.last_good != analysis.generated {
                    self.last_good = analysis.generated.clone();
                }
            } else if let Some(issue) = &analysis.schema_issue {
                self.stale_view(ui, &issue.message);
                return;
            }
        }
        findings(ui, shared);
        self.view(ui, shared);
    }

    /// What llama-server would build from the chat template: the source, lazy or not, the
    /// triggers, preserved tokens, generation prompt, stops, format and parser, the prompt with
    /// its tokens, and a way to copy the grammar into the hand-edited GBNF. Returns whether a
    /// grammar follows (false: an error or no grammar, said here).
    fn template_section(&mut self, ui: &mut egui::Ui, shared: &mut Shared) -> bool {
        let analysis = std::sync::Arc::clone(&shared.analysis);
        let Some(view) = &analysis.template else {
            ui.label(egui::RichText::new("llama.cpp template: analysing…").weak());
            return false;
        };
        ui.label(egui::RichText::new(format!("llama.cpp template: {}", view.source)).strong());
        let result = match &view.result {
            Ok(result) => result,
            Err(e) => {
                ui.add(
                    egui::Label::new(
                        egui::RichText::new(format!("error: {e}"))
                            .color(ui.visuals().error_fg_color),
                    )
                    .wrap(),
                );
                return false;
            }
        };
        let info = toolrail_workbench::template_info::describe(result);
        // at most half the pane, scrolled: the grammar below keeps its room in a small pane
        let max_height = (ui.available_height() * 0.5).max(120.0);
        egui::CollapsingHeader::new(egui::RichText::new(&info.summary).strong())
            .id_salt("grammar-template-info")
            .default_open(true)
            .show(ui, |ui| {
                egui::ScrollArea::vertical()
                    .id_salt("grammar-template-info-scroll")
                    .max_height(max_height)
                    .auto_shrink([false, true])
                    .show(ui, |ui| {
                        self.template_details(ui, shared, view, result, &info)
                    });
            });

        if result.grammar.is_empty() {
            ui.label(
                egui::RichText::new(
                    "No grammar: llama.cpp builds none for this request, so runs are unconstrained.",
                )
                .weak(),
            );
            return false;
        }
        if ui
            .button("Copy into hand-edited GBNF")
            .on_hover_text("Make this grammar the hand-edited GBNF (the grammar source switches)")
            .clicked()
        {
            shared.workspace.grammar.text = result.grammar.clone();
            shared
                .workspace
                .set_grammar_source(GrammarSource::HandEdited);
        }
        true
    }

    /// The template result's details: its rows, warnings, the reading notes and the prompt.
    fn template_details(
        &mut self,
        ui: &mut egui::Ui,
        shared: &Shared,
        view: &toolrail_workbench::analysis::TemplateView,
        result: &toolrail_llm::template::TemplateResult,
        info: &toolrail_workbench::template_info::TemplateInfo,
    ) {
        egui::Grid::new("grammar-template-grid")
            .num_columns(2)
            .striped(true)
            .show(ui, |ui| {
                for (name, value) in &info.rows {
                    ui.label(egui::RichText::new(*name).weak());
                    ui.add(egui::Label::new(egui::RichText::new(value).monospace()).wrap())
                        .on_hover_text(value.as_str());
                    ui.end_row();
                }
            });
        for warning in &result.warnings {
            ui.add(
                egui::Label::new(
                    egui::RichText::new(format!("warning: {warning}"))
                        .color(ui.visuals().warn_fg_color),
                )
                .wrap(),
            );
        }
        if !view.reading_differences.is_empty() {
            ui.label(
                egui::RichText::new(
                    "The prompt shows the tools as a client sends them (as written); \
                     toolrail's grammar and validator read them differently here:",
                )
                .weak(),
            );
            for difference in &view.reading_differences {
                ui.add(egui::Label::new(egui::RichText::new(format!("note: {difference}"))).wrap());
            }
        }
        self.prompt_view(ui, shared, &result.prompt);
    }

    /// The template's prompt, with its token count and tokens when a model is loaded.
    fn prompt_view(&mut self, ui: &mut egui::Ui, shared: &Shared, prompt: &str) {
        if self.prompt_tokens.as_ref().is_none_or(|(p, _)| p != prompt) {
            self.prompt_tokens = shared
                .run
                .controller
                .prompt_tokens(prompt)
                .map(|tokens| (prompt.to_owned(), tokens));
        }
        let tokens = self
            .prompt_tokens
            .as_ref()
            .filter(|(p, _)| p == prompt)
            .map(|(_, t)| t);
        let title = match tokens {
            Some(t) => format!("Prompt ({} bytes, {} tokens)", prompt.len(), t.len()),
            None => format!("Prompt ({} bytes)", prompt.len()),
        };
        egui::CollapsingHeader::new(title)
            .id_salt("grammar-template-prompt")
            .show(ui, |ui| {
                crate::token_view::long_text(ui, prompt, true);
                if let Some(tokens) = tokens {
                    let list: Vec<String> = tokens
                        .iter()
                        .map(|(id, piece)| format!("{id}:{}", crate::token_view::chip_text(piece)))
                        .collect();
                    ui.label(egui::RichText::new("Tokens").weak());
                    crate::token_view::long_text(ui, &list.join(" "), true);
                }
            });
    }

    /// The schema has an error: say so on top, and show the last good grammar greyed below
    /// (read-only, not in force).
    fn stale_view(&mut self, ui: &mut egui::Ui, error: &str) {
        ui.add(
            egui::Label::new(
                egui::RichText::new(format!("No grammar: the schema has an error: {error}"))
                    .color(ui.visuals().error_fg_color),
            )
            .wrap(),
        );
        if self.last_good.is_empty() {
            return;
        }
        ui.label(
            egui::RichText::new(
                "The last grammar generated (not in force until the schema is fixed):",
            )
            .weak(),
        );
        egui::ScrollArea::both()
            .id_salt("grammar-scroll")
            .auto_shrink([false, false])
            .show(ui, |ui| {
                let label = ui.label("Grammar text");
                let id = egui::Id::unique(GRAMMAR_VIEW_ID);
                let shown = large_text::Text::Shown(&self.last_good);
                if !large_text::fits(ui, id, shown, &large_text::View::default()) {
                    return;
                }
                let mut view: &str = &self.last_good;
                let grey = ui.visuals().weak_text_color();
                ui.add(
                    egui::TextEdit::multiline(&mut view)
                        .id(id)
                        .code_editor()
                        .text_color(grey)
                        .desired_width(f32::INFINITY)
                        .desired_rows(24),
                )
                .labelled_by(label.id);
            });
    }

    fn view(&mut self, ui: &mut egui::Ui, shared: &mut Shared) {
        let analysis = std::sync::Arc::clone(&shared.analysis);
        let hand = shared.workspace.grammar.hand_edited && !shared.workspace.template.on;
        // The text shown: the hand-edited text as typed, else the generated grammar in force.
        // Borrowed when generated (no copy of a large grammar each frame); copied only when hand
        // edited, because the editor below borrows the workspace text mutably.
        let current_text: std::borrow::Cow<'_, str> = if hand {
            std::borrow::Cow::Owned(shared.workspace.grammar.text.clone())
        } else {
            std::borrow::Cow::Borrowed(analysis.grammar_text.as_str())
        };
        let up_to_date = analysis.grammar_text == *current_text;
        let mut marks = Vec::new();
        if up_to_date {
            for f in &analysis.findings {
                marks.push(Mark {
                    range: f.span.start as usize..f.span.end as usize,
                    kind: if f.severity == Severity::Error {
                        MarkKind::Error
                    } else {
                        MarkKind::Warning
                    },
                });
            }
        }
        let focus = &shared.grammar_focus;
        if *focus.grammar_text == *current_text {
            marks.extend(focus.highlights.iter().map(|r| Mark {
                range: r.clone(),
                kind: MarkKind::Focus,
            }));
        }
        let select = focus
            .select
            .clone()
            .filter(|_| *focus.grammar_text == *current_text)
            .filter(|r| {
                self.applied.as_ref()
                    != Some(&(r.clone(), std::sync::Arc::clone(&focus.grammar_text)))
            });
        let id = egui::Id::unique(GRAMMAR_VIEW_ID);
        self.search.open_on_shortcut(ui, id);
        let found = self.search.ui(ui, id, &current_text);
        let select = found.or(select);
        let galleys = &mut self.galleys;
        let mut layouter = |ui: &egui::Ui, buf: &dyn egui::TextBuffer, wrap: f32| {
            galleys.layout(ui, buf.as_str(), "GBNF", &marks, wrap)
        };
        let mut go_to = None;
        if hand {
            self.external
                .before(ui.ctx(), id, &shared.workspace.grammar.text);
        }
        let bounded = {
            let view = large_text::View {
                marks: &marks,
                scroll_to: select.as_ref().map(|r| r.start),
                rows: None,
            };
            let text = if hand {
                large_text::Text::Editable(&mut shared.workspace.grammar.text)
            } else {
                large_text::Text::Shown(&current_text)
            };
            !large_text::fits(ui, id, text, &view)
        };
        if bounded {
            if let Some(range) = select {
                self.applied = Some((
                    range,
                    std::sync::Arc::clone(&shared.grammar_focus.grammar_text),
                ));
            }
        } else {
            egui::ScrollArea::both()
                .id_salt("grammar-scroll")
                .auto_shrink([false, false])
                .show(ui, |ui| {
                    let label = ui.label("Grammar text");
                    let gutter =
                        crate::editor::gutter_width(ui, crate::editor::line_count(&current_text));
                    ui.horizontal_top(|ui| {
                        ui.add_space(gutter);
                        // Hand-edited: the workspace's text, editable; generated: a read-only view.
                        let mut view: &str = &current_text;
                        let buffer: &mut dyn egui::TextBuffer = if hand {
                            &mut shared.workspace.grammar.text
                        } else {
                            &mut view
                        };
                        let mut output = egui::TextEdit::multiline(buffer)
                            .id(id)
                            .code_editor()
                            .desired_width(f32::INFINITY)
                            .desired_rows(24)
                            .layouter(&mut layouter)
                            .show(ui);
                        crate::editor::paint_line_numbers(
                            ui,
                            &output.galley,
                            output.galley_pos,
                            gutter,
                        );
                        output.response.response = output.response.response.labelled_by(label.id);
                        // Go to definition: F12 with the cursor on a rule name, or Ctrl+click on it.
                        let response = &output.response.response;
                        let f12 = response.has_focus()
                            && ui.input_mut(|i| {
                                i.consume_key(egui::Modifiers::NONE, egui::Key::F12)
                            });
                        let ctrl_click = response.clicked() && ui.input(|i| i.modifiers.command);
                        if (f12 || ctrl_click)
                            && let Some(range) = output.cursor_range
                            && analysis.grammar_text == *current_text
                        {
                            let at = highlight::byte_index(&current_text, range.primary.index.0);
                            go_to = Some(definition_at(&analysis, at));
                        }
                        if let Some(range) = select {
                            crate::editor::select(
                                ui,
                                &mut output,
                                id,
                                &current_text,
                                range.clone(),
                            );
                            self.applied = Some((
                                range,
                                std::sync::Arc::clone(&shared.grammar_focus.grammar_text),
                            ));
                        }
                    });
                });
        }
        if hand {
            self.external.after(&shared.workspace.grammar.text);
        }
        match go_to {
            Some(Some(span)) => {
                let highlights = shared.grammar_focus.highlights.clone();
                shared.focus_grammar(highlights, Some(span));
            }
            Some(None) => {
                shared.message("no rule name at the cursor (F12 goes to a rule's definition)")
            }
            None => {}
        }
    }
}

/// The span of the name in the definition of the rule named at byte `at` of the grammar in
/// force (a reference or a definition's own name); llama.cpp keeps a rule's last definition.
pub fn definition_at(
    analysis: &toolrail_workbench::analysis::Analysis,
    at: usize,
) -> Option<std::ops::Range<usize>> {
    // The compiled grammar's parse; a grammar that does not build is parsed for its names.
    let reparsed;
    let parsed = match &analysis.grammar {
        Some(g) => g.parsed(),
        None => {
            reparsed = toolrail_gbnf::parse(&analysis.grammar_text).ok()?;
            &reparsed
        }
    };
    let inside =
        |span: &toolrail_gbnf::Span| (span.start as usize) <= at && at <= span.end as usize;
    let symbol = parsed
        .references
        .iter()
        .find(|r| inside(&r.span))
        .map(|r| r.symbol)
        .or_else(|| {
            parsed
                .definitions
                .iter()
                .find(|d| inside(&d.name_span))
                .map(|d| d.symbol)
        })?;
    let definition = parsed
        .definitions
        .iter()
        .rev()
        .find(|d| d.symbol == symbol)?;
    Some(definition.name_span.start as usize..definition.name_span.end as usize)
}

fn toolbar(ui: &mut egui::Ui, shared: &mut Shared) {
    ui.horizontal_wrapped(|ui| {
        let was = shared.workspace.grammar_source() == GrammarSource::HandEdited;
        let mut hand = was;
        ui.checkbox(&mut hand, "Hand-edited GBNF")
            .on_hover_text("Edit the grammar by hand instead of generating it from the schema");
        if hand != was {
            let grammar = &mut shared.workspace.grammar;
            if hand && grammar.text.trim().is_empty() {
                grammar.text = shared.analysis.grammar_text.clone();
            }
            shared.workspace.set_grammar_source(if hand {
                GrammarSource::HandEdited
            } else {
                GrammarSource::Tools
            });
        }
        if ui.button("Import .gbnf…").clicked() {
            shared.pick_file(
                FileRequest::ImportGrammar,
                rfd::AsyncFileDialog::new().add_filter("GBNF", &["gbnf"]),
            );
        }
        let export = toolrail_workbench::actions::Action::ExportGrammar;
        if ui
            .add_enabled(shared.enabled(&export), egui::Button::new("Export .gbnf…"))
            .clicked()
        {
            shared.queue(export);
        }
        if let Some(g) = &shared.analysis.grammar {
            ui.label(egui::RichText::new(format!("{} rules", g.rule_count())).weak());
        }
    });
}

fn findings(ui: &mut egui::Ui, shared: &mut Shared) {
    let analysis = std::sync::Arc::clone(&shared.analysis);
    for w in &analysis.warnings {
        ui.label(egui::RichText::new(format!("warning: {w}")).color(ui.visuals().warn_fg_color));
    }
    if analysis.findings.is_empty() {
        return;
    }
    egui::ScrollArea::vertical()
        .id_salt("grammar-findings")
        .max_height(120.0)
        .show(ui, |ui| {
            for f in &analysis.findings {
                let color = match f.severity {
                    Severity::Error => ui.visuals().error_fg_color,
                    _ => ui.visuals().warn_fg_color,
                };
                let text = format!("{} {} {}: {}", f.severity, f.code, f.position, f.message);
                let response = ui
                    .add(
                        egui::Label::new(egui::RichText::new(text).color(color))
                            .wrap()
                            .sense(egui::Sense::click()),
                    )
                    .on_hover_text("Click to select it in the grammar");
                if let Some(hint) = &f.hint {
                    // The hint, inline under its finding (indented, in the hint's own words).
                    ui.horizontal(|ui| {
                        ui.add_space(16.0);
                        ui.add(
                            egui::Label::new(
                                egui::RichText::new(format!("hint: {hint}"))
                                    .weak()
                                    .italics(),
                            )
                            .wrap(),
                        );
                    });
                }
                if response.clicked() {
                    let span = f.span.start as usize..f.span.end as usize;
                    shared.focus_grammar(Vec::new(), Some(span));
                }
            }
        });
}

/// Asks where to export the grammar in force (the answer comes back as a chosen file).
pub fn export_grammar(shared: &mut Shared) {
    shared.save_file(
        FileRequest::ExportGrammar,
        rfd::AsyncFileDialog::new()
            .add_filter("GBNF", &["gbnf"])
            .set_file_name("grammar.gbnf"),
    );
}
