//! The Conversation window (Run ▸ Conversation…): a multi-turn run over the workspace's tool
//! set. Type a user message and send it; after the model's call, type the tool's result (or pick
//! one of the tool's canned `x-toolrail-result` results) and continue. Every attempt shows, with
//! the validator's feedback sent back on a blocked call; each answer is a generation run (its
//! tokens in the Generation pane). The logic is `toolrail_workbench::conversation`.

use egui::RichText;
use toolrail_workbench::conversation::{
    CallMode, Conversation, ConversationSession, ConversationSettings, Next, Turn,
};
use toolrail_workbench::run::prompt_family;
use toolrail_workbench::tasks::OpenedConversation;

use crate::dialogs::FileRequest;
use crate::shared::Shared;

/// The window's state.
#[derive(Default)]
pub struct ConversationView {
    /// The window is open.
    pub open: bool,
    /// The conversation under way (public for tests).
    pub session: Option<ConversationSession>,
    /// The text being typed (public for tests).
    pub input: String,
    prompt_only: bool,
    few_shot: bool,
    max_blocked: Option<u32>,
    /// What replaying the conversation last opened found, in words (public for tests).
    pub replay_summary: Option<String>,
    /// New conversation was pressed while one is under way: asking before discarding it.
    confirm_new: bool,
}

impl ConversationView {
    /// Draws the window when open, and moves the conversation on when its run has ended.
    pub fn show(&mut self, ctx: &egui::Context, shared: &mut Shared) {
        if let Some(session) = &mut self.session {
            let analysis = std::sync::Arc::clone(&shared.analysis);
            if let Some(error) = session.poll(&mut shared.run, &analysis) {
                shared.error(error);
            }
        }
        if !self.open {
            return;
        }
        let mut open = self.open;
        egui::Window::new("Conversation")
            .open(&mut open)
            .default_size([520.0, 560.0])
            .show(ctx, |ui| self.ui(ui, shared));
        self.open = open;
    }

    fn ui(&mut self, ui: &mut egui::Ui, shared: &mut Shared) {
        ui.horizontal_wrapped(|ui| {
            ui.checkbox(&mut self.prompt_only, "Prompt only (no grammar)")
                .on_hover_text("Read the call from the free text instead of constraining it");
            ui.checkbox(&mut self.few_shot, "Few-shot example");
            let mut limit = self.max_blocked.unwrap_or(3);
            ui.label("Blocked calls before stopping:");
            ui.add(egui::DragValue::new(&mut limit).range(1..=20));
            self.max_blocked = Some(limit);
            if ui.button("New conversation").clicked() {
                let under_way = self
                    .session
                    .as_ref()
                    .is_some_and(|s| !s.conversation.turns().is_empty());
                if under_way {
                    self.confirm_new = true;
                } else {
                    self.start(shared);
                }
            }
            if ui
                .button("Open…")
                .on_hover_text("Open a saved conversation and replay it turn by turn")
                .clicked()
            {
                shared.pick_file(
                    FileRequest::OpenConversation,
                    rfd::AsyncFileDialog::new().add_filter("toolrail conversation", &["json"]),
                );
            }
            if ui
                .add_enabled(self.session.is_some(), egui::Button::new("Save…"))
                .on_hover_text("Save the conversation as JSON, with a Markdown rendering beside it")
                .clicked()
            {
                shared.save_file(
                    FileRequest::SaveConversation,
                    rfd::AsyncFileDialog::new()
                        .add_filter("toolrail conversation", &["json"])
                        .set_file_name("conversation.json"),
                );
            }
        });
        if self.confirm_new {
            ui.horizontal_wrapped(|ui| {
                ui.label(
                    RichText::new("Discard the conversation under way (save it first to keep it)?")
                        .color(ui.visuals().warn_fg_color),
                );
                if ui.button("Discard and start a new one").clicked() {
                    self.confirm_new = false;
                    self.start(shared);
                }
                if ui.button("Keep it").clicked() {
                    self.confirm_new = false;
                }
            });
        }
        if let Some(summary) = &self.replay_summary {
            ui.label(RichText::new(summary).weak());
        }
        let Some(session) = &mut self.session else {
            ui.label(
                RichText::new("New conversation starts one over the tool set of the Tools pane.")
                    .weak(),
            );
            return;
        };
        ui.separator();
        let c = &session.conversation;
        egui::ScrollArea::vertical()
            .max_height(360.0)
            .stick_to_bottom(true)
            .show(ui, |ui| turns_ui(ui, c));
        ui.separator();
        let next = c.next();
        let waiting = session.is_waiting();
        let label = match (&next, waiting) {
            (_, true) => "The model is answering…".to_owned(),
            (Next::ToolResult { tool }, _) => format!("Result of {tool}:"),
            (Next::User, _) if c.stopped_at_limit() => {
                "Stopped at the blocked-call limit. Your message:".to_owned()
            }
            _ => "Your message:".to_owned(),
        };
        ui.label(label);
        if let Next::ToolResult { tool } = &next {
            let canned = c.canned_results(tool);
            if !canned.is_empty() {
                ui.horizontal_wrapped(|ui| {
                    ui.label("Canned:");
                    for result in canned {
                        if ui
                            .button(drawable(ui, &result, egui::TextStyle::Button))
                            .clicked()
                        {
                            self.input = result;
                        }
                    }
                });
            }
        }
        let id = egui::Id::unique("conversation-input");
        let input = crate::large_text::Text::Editable(&mut self.input);
        if crate::large_text::fits(ui, id, input, &crate::large_text::View::with_rows(6)) {
            ui.add_enabled(
                !waiting,
                egui::TextEdit::multiline(&mut self.input)
                    .id(id)
                    .desired_rows(2)
                    .desired_width(f32::INFINITY),
            );
        }
        let can_send = !waiting && next != Next::Model && !self.input.trim().is_empty();
        if next == Next::Model
            && !waiting
            && ui
                .button("Ask the model")
                .on_hover_text("The model's answer did not start (see the status bar): try again")
                .clicked()
        {
            let analysis = std::sync::Arc::clone(&shared.analysis);
            if let Err(e) = session.ask_model(&mut shared.run, &analysis) {
                shared.error(e);
            }
        }
        if ui
            .add_enabled(can_send, egui::Button::new("Send"))
            .clicked()
        {
            let analysis = std::sync::Arc::clone(&shared.analysis);
            match session.send(self.input.trim(), &mut shared.run, &analysis) {
                Ok(()) => self.input.clear(),
                Err(e) => shared.error(e),
            }
        }
    }

    /// The conversation under way, to save (`None`: there is none).
    pub fn to_save(&self) -> Option<Conversation> {
        self.session.as_ref().map(|s| s.conversation.clone())
    }

    /// Shows a conversation read from `path` (the file task replayed it: each assistant turn's
    /// pool and grammar rebuilt and compared with what was recorded), or says why it could not
    /// be read.
    pub fn opened(
        &mut self,
        path: &std::path::Path,
        result: Result<OpenedConversation, String>,
        shared: &mut Shared,
    ) {
        match result {
            Ok((conversation, replay)) => {
                self.replay_summary = Some(match replay {
                    Ok(steps) => replay_words(&steps),
                    Err(e) => format!("replay failed: {e}"),
                });
                self.session = Some(ConversationSession::new(*conversation));
                self.open = true;
                self.input.clear();
                shared.message(format!("conversation opened from {}", path.display()));
            }
            Err(e) => shared.error(e),
        }
    }

    fn start(&mut self, shared: &mut Shared) {
        let Some(tools) = shared.analysis.tool_set.clone() else {
            shared.error("the Tools pane holds no tool set: a conversation needs tools");
            return;
        };
        let format = shared.analysis.input.schema.envelope;
        let document =
            serde_json::from_str::<serde_json::Value>(&shared.workspace.schema.source).ok();
        // The prompts of Start run: the same family and system text.
        let setup = shared.run.setup(&shared.analysis);
        let spec = shared.run.controller.model().map(|m| m.spec());
        let settings = ConversationSettings {
            family: prompt_family(setup.style, format, spec),
            format,
            mode: if self.prompt_only {
                CallMode::PromptOnly
            } else {
                CallMode::Grammar
            },
            few_shot: self.few_shot,
            max_blocked: self.max_blocked.unwrap_or(3),
            pool_filter: shared.workspace.schema.pool_filter,
            system: setup.system,
        };
        self.session = Some(ConversationSession::new(Conversation::new(
            tools,
            document.as_ref(),
            settings,
        )));
        self.replay_summary = None;
        self.input.clear();
    }
}

/// A replay in words: how many answers were replayed and where the rebuilt grammar or the
/// verdict differs from what was recorded.
pub fn replay_words(steps: &[toolrail_workbench::conversation::ReplayStep]) -> String {
    let differing: Vec<String> = steps
        .iter()
        .filter(|s| !s.grammar_matches || !s.same_verdict || s.output_in_grammar == Some(false))
        .map(|s| {
            let mut what = Vec::new();
            if !s.grammar_matches {
                what.push("grammar differs");
            }
            if s.output_in_grammar == Some(false) {
                what.push("output outside the grammar");
            }
            if !s.same_verdict {
                what.push("verdict differs");
            }
            format!("turn {}: {}", s.turn, what.join(", "))
        })
        .collect();
    if differing.is_empty() {
        format!(
            "replayed {} answers: every grammar and verdict as recorded",
            steps.len()
        )
    } else {
        format!("replayed {} answers; {}", steps.len(), differing.join("; "))
    }
}

/// `text` with every character the fonts of `style` cannot draw (emoji, rare scripts, controls
/// other than newline and tab) written as `\u{…}`, so any model output can be shown.
fn drawable(ui: &egui::Ui, text: &str, style: egui::TextStyle) -> String {
    let font = style.resolve(ui.style());
    ui.fonts_mut(|fonts| {
        let mut out = String::with_capacity(text.len());
        for c in text.chars() {
            let control = c.is_control() && c != '\n' && c != '\t';
            if !control && (c == '\n' || c == '\t' || fonts.has_glyph(&font, c)) {
                out.push(c);
            } else {
                out.push_str(&format!("\\u{{{:04x}}}", c as u32));
            }
        }
        out
    })
}

/// The messages, one block each.
fn turns_ui(ui: &mut egui::Ui, c: &Conversation) {
    let mut attempt = 0;
    for (index, turn) in c.turns().iter().enumerate() {
        match turn {
            Turn::User { content } => {
                attempt = 0;
                ui.label(RichText::new("User").strong());
                ui.label(drawable(ui, content, egui::TextStyle::Body));
            }
            Turn::Assistant(a) => {
                attempt += 1;
                ui.label(RichText::new(format!("Assistant, attempt {attempt}")).strong());
                ui.label(
                    RichText::new(drawable(ui, &a.output, egui::TextStyle::Monospace)).monospace(),
                );
                let verdict = match (&a.call, a.valid) {
                    (Some(call), true) => format!("valid call of {}", call.name),
                    (Some(call), false) => format!("blocked call of {} (not run)", call.name),
                    (None, _) => "no call found (blocked)".to_owned(),
                };
                let color = if a.valid {
                    ui.visuals().text_color()
                } else {
                    ui.visuals().warn_fg_color
                };
                ui.label(
                    RichText::new(format!(
                        "{verdict} · {} tokens · pool: {}",
                        a.tokens,
                        drawable(ui, &a.pool.join(", "), egui::TextStyle::Small)
                    ))
                    .color(color)
                    .small(),
                );
                if let Some(grammar) = &a.grammar {
                    egui::CollapsingHeader::new("this turn's grammar")
                        .id_salt(("conversation-grammar", index))
                        .show(ui, |ui| {
                            ui.label(RichText::new(grammar).monospace().small())
                        });
                }
            }
            Turn::Tool { content, tool } => {
                let who = match tool {
                    Some(tool) => {
                        attempt = 0;
                        format!("Tool {tool} (result)")
                    }
                    None => "Tool (validator feedback)".to_owned(),
                };
                ui.label(RichText::new(who).strong());
                ui.label(
                    RichText::new(drawable(ui, content, egui::TextStyle::Monospace)).monospace(),
                );
            }
        }
        ui.add_space(4.0);
    }
}
