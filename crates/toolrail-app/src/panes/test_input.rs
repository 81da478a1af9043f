//! Test input: text matched live against the grammar; its verdict (accepted, incomplete, or
//! rejected at line:column with the expected characters) and the stacks at the cursor, whose
//! elements are highlighted in the grammar pane.

use crate::highlight::{self, Mark, MarkKind};
use crate::shared::Shared;
use crate::stack_tree::{StackNode, stack_tree};
use toolrail_engine::check::VerdictKind;

/// The test input pane's own UI state.
#[derive(Default)]
pub struct TestInputPane {
    /// The analysis revision whose stacks were last sent to the grammar pane.
    focused_revision: u64,
    /// Frames (element positions) shown whole rather than cut.
    whole: std::collections::HashSet<u32>,
    /// The seed of the next valid example (each click shows another one).
    example_seed: u64,
}

impl TestInputPane {
    /// Draws the pane.
    pub fn ui(&mut self, ui: &mut egui::Ui, shared: &mut Shared) {
        let analysis = std::sync::Arc::clone(&shared.analysis);
        let fresh = analysis.input.test_input == shared.workspace.test_input;
        let report = analysis.test.as_ref().filter(|_| fresh);
        let marks: Vec<Mark> = report
            .and_then(|r| r.verdict.offset)
            .map(|off| {
                let text = &shared.workspace.test_input;
                let end = text[off..]
                    .chars()
                    .next()
                    .map_or(off, |c| off + c.len_utf8());
                vec![Mark {
                    range: off..end,
                    kind: MarkKind::Error,
                }]
            })
            .unwrap_or_default();
        let mut layouter = |ui: &egui::Ui, buf: &dyn egui::TextBuffer, wrap: f32| {
            let text = buf.as_str();
            let job = egui::text::LayoutJob::simple(
                text.to_owned(),
                egui::TextStyle::Monospace.resolve(ui.style()),
                ui.visuals().text_color(),
                wrap,
            );
            let job = highlight::apply_marks(job, &marks, ui.visuals().dark_mode);
            ui.fonts_mut(|f| f.layout_job(job))
        };
        let label = ui.horizontal(|ui| {
            let label = ui.label("Text to check");
            let ready = shared.analysis.grammar.is_some();
            if ui
                .add_enabled(ready, egui::Button::new("Valid example"))
                .on_hover_text(
                    "Replace the text with a random example the grammar accepts (in a tool set: \
                     a call the validator finds valid); click again for another",
                )
                .clicked()
            {
                self.example_seed = self.example_seed.wrapping_add(1000);
                match toolrail_workbench::example::valid_example(&shared.analysis, self.example_seed)
                {
                    Ok(text) => {
                        shared.workspace.test_input = text;
                        shared.test_cursor = usize::MAX;
                        shared.message("a valid example (accepted by the grammar and the validator)");
                    }
                    Err(e) => shared.error(e.to_string()),
                }
            }
            label
        })
        .inner;
        let id = egui::Id::unique("test-input-editor");
        let text = crate::large_text::Text::Editable(&mut shared.workspace.test_input);
        let view = crate::large_text::View {
            marks: &marks,
            scroll_to: marks.first().map(|m| m.range.start),
            rows: Some(8),
        };
        if !crate::large_text::fits(ui, id, text, &view) {
            shared.test_cursor = shared.test_cursor.min(shared.workspace.test_input.len());
            verdict(ui, shared);
            self.stacks(ui, shared);
            return;
        }
        let output = egui::TextEdit::multiline(&mut shared.workspace.test_input)
            .id(id)
            .code_editor()
            .desired_width(f32::INFINITY)
            .desired_rows(4)
            .layouter(&mut layouter)
            .show(ui);
        let changed = output.response.response.changed();
        let _ = output.response.response.labelled_by(label.id);
        if let Some(range) = output.cursor_range {
            let chars = range.primary.index.0;
            shared.test_cursor = highlight::byte_index(&shared.workspace.test_input, chars);
        } else if changed || shared.test_cursor > shared.workspace.test_input.len() {
            shared.test_cursor = shared.workspace.test_input.len();
        }

        verdict(ui, shared);
        self.stacks(ui, shared);
    }

    fn stacks(&mut self, ui: &mut egui::Ui, shared: &mut Shared) {
        let analysis = std::sync::Arc::clone(&shared.analysis);
        let Some(report) = &analysis.test else {
            return;
        };
        let text = &analysis.input.test_input;
        let at = toolrail_gbnf::source::line_col(text.as_bytes(), report.stacks_at);
        ui.separator();
        ui.label(
            egui::RichText::new(format!(
                "{} stack(s) at {at} (byte {})",
                report.stacks.stacks.len(),
                report.stacks_at
            ))
            .strong(),
        );
        // Highlight the elements on the stacks in the grammar pane whenever a new analysis arrives.
        if self.focused_revision != analysis.revision {
            self.focused_revision = analysis.revision;
            let highlights = report
                .stacks
                .stacks
                .iter()
                .flat_map(|s| s.frames.iter())
                .map(|f| f.span.start as usize..f.span.end as usize)
                .collect();
            shared.focus_grammar(highlights, None);
        }
        let (tree, empty) = stack_tree(&report.stacks.stacks);
        egui::ScrollArea::vertical()
            .id_salt("test-stacks")
            .auto_shrink([false, false])
            .show(ui, |ui| {
                if empty > 0 {
                    ui.label(
                        egui::RichText::new("(an empty stack: the grammar may end here)").weak(),
                    );
                }
                for node in &tree {
                    self.node(ui, shared, &analysis.grammar_text, node, 0);
                }
            });
    }

    /// One frame of the stack tree and, indented under it, the frames above it. Click a frame
    /// to select its span in the grammar and to show its whole text.
    fn node(
        &mut self,
        ui: &mut egui::Ui,
        shared: &mut Shared,
        grammar_text: &str,
        node: &StackNode,
        depth: usize,
    ) {
        let frame = &node.frame;
        let source = grammar_text
            .get(frame.span.start as usize..frame.span.end as usize)
            .unwrap_or("");
        let whole = self.whole.contains(&frame.pos);
        let shown = if whole {
            source.to_owned()
        } else {
            let (short, cut) = crate::token_view::cut_text(source, FRAME_CHARS);
            if cut {
                format!("{short}…")
            } else {
                short.to_owned()
            }
        };
        ui.horizontal_wrapped(|ui| {
            ui.add_space(depth as f32 * 14.0);
            let mut label = egui::RichText::new(format!("{}: {shown}", frame.rule_name)).monospace();
            if node.top {
                label = label.strong();
            }
            let response = ui
                .add(egui::Label::new(label).wrap().sense(egui::Sense::click()))
                .on_hover_text(format!(
                    "rule {} alternative {} element {}{}; {} stack(s) run through it. Click: select it in the grammar{}",
                    frame.rule_name,
                    frame.alternative,
                    frame.index,
                    if node.top { " (expected next)" } else { "" },
                    node.stacks,
                    if source.chars().count() > FRAME_CHARS {
                        " and show it whole"
                    } else {
                        ""
                    }
                ));
            if response.clicked() {
                if whole {
                    self.whole.remove(&frame.pos);
                } else {
                    self.whole.insert(frame.pos);
                }
                let span = frame.span.start as usize..frame.span.end as usize;
                let highlights = shared.grammar_focus.highlights.clone();
                shared.focus_grammar(highlights, Some(span));
            }
        });
        for child in &node.children {
            self.node(ui, shared, grammar_text, child, depth + 1);
        }
    }
}

/// Characters of a frame's grammar text shown before it is clicked open.
pub const FRAME_CHARS: usize = 40;

fn verdict(ui: &mut egui::Ui, shared: &Shared) {
    let analysis = &shared.analysis;
    if analysis.grammar.is_none() {
        let why = match analysis.template.as_ref().map(|view| &view.result) {
            Some(Ok(_)) => {
                "No grammar: the template builds none here (tool_choice none, or a format \
                 without tool calls), so runs are not constrained."
            }
            Some(Err(_)) => "No grammar: the template could not be built (see the Grammar pane).",
            None => "No grammar: fix the schema or the GBNF first.",
        };
        ui.label(egui::RichText::new(why).weak());
        return;
    }
    let Some(report) = &analysis.test else {
        return;
    };
    let v = &report.verdict;
    let expected = report.expected.join(", ");
    let (text, color) = match v.kind {
        VerdictKind::Accepted => (
            "accepted: the whole text matches".to_owned(),
            egui::Color32::from_rgb(80, 180, 90),
        ),
        VerdictKind::Incomplete => (
            format!("incomplete at {}: next may be {expected}", v.position),
            ui.visuals().warn_fg_color,
        ),
        VerdictKind::Rejected => (
            format!(
                "rejected at {} (byte {}): expected {expected}",
                v.position,
                v.offset.unwrap_or(0)
            ),
            ui.visuals().error_fg_color,
        ),
        VerdictKind::TooAmbiguous => (
            format!(
                "too ambiguous at {}: following the grammar takes more work than toolrail allows (its stacks multiply; llama.cpp would crawl and run out of memory)",
                v.position
            ),
            ui.visuals().error_fg_color,
        ),
    };
    ui.add(egui::Label::new(egui::RichText::new(text).color(color)).wrap());
}
