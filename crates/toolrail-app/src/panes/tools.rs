//! Tools / Schema: the JSON editor with inline errors, the sample picker, open and save, the tool
//! list (per-tool enable, pool-filter markers) and the envelope options.

use crate::dialogs::FileRequest;

use crate::highlight::{self, Mark, MarkKind};
use crate::large_text;
use crate::shared::Shared;
use toolrail_tools::envelope::Format;
use toolrail_workbench::samples::SAMPLES;
use toolrail_workbench::transcript::ThinkingBudget;
use toolrail_workbench::workspace::{
    GrammarSource, ReasoningFormat, SchemaMode, ServerSwitch, ToolChoice,
};

/// The thinking budget a newly ticked "thinking budget" box starts at.
const DEFAULT_THINKING_BUDGET: u32 = 256;
/// The largest thinking budget the field takes (a run's context is far smaller).
const MAX_THINKING_BUDGET: u32 = 1_000_000;

/// The Tools / Schema pane's own UI state.
#[derive(Default)]
pub struct ToolsPane {
    /// A cursor position (char index) to move the editor to on the next frame.
    goto: Option<usize>,
    /// The highlighted editor text's layout.
    galleys: highlight::GalleyCache,
    /// The search bar (Ctrl+F).
    search: crate::editor::Search,
    /// Replacements of the document from outside the editor, as undo steps.
    external: crate::editor::ExternalEdits,
}

impl ToolsPane {
    /// Draws the pane.
    pub fn ui(&mut self, ui: &mut egui::Ui, shared: &mut Shared) {
        source_row(ui, shared);
        grammar_source_row(ui, shared);
        if shared.workspace.template.on {
            // the envelope and its options are toolrail's: the template decides its own
            template_row(ui, shared);
            if shared.workspace.schema.mode != SchemaMode::ToolSet
                && ui
                    .button("Switch to tool-set mode")
                    .on_hover_text("The template source sends the document's tools to llama.cpp")
                    .clicked()
            {
                shared.workspace.schema.mode = SchemaMode::ToolSet;
            }
        } else {
            options_row(ui, shared);
        }
        let description = shared.analysis.description.clone().unwrap_or_default();
        if !description.is_empty() {
            // One line (the whole text on hover), so the editor stays in view in small windows.
            ui.add(egui::Label::new(egui::RichText::new(&description).weak()).truncate())
                .on_hover_text(&description);
        }
        egui::ScrollArea::vertical()
            .id_salt("tools-scroll")
            .auto_shrink([false, false])
            .show(ui, |ui| {
                if shared.workspace.schema.mode == SchemaMode::ToolSet {
                    tool_list(ui, shared);
                    ui.separator();
                }
                self.issue(ui, shared);
                self.editor(ui, shared);
            });
    }

    fn issue(&mut self, ui: &mut egui::Ui, shared: &mut Shared) {
        let analysis = std::sync::Arc::clone(&shared.analysis);
        // Only show an issue that belongs to the text being edited.
        if analysis.input.schema.text != shared.workspace.schema.text {
            return;
        }
        if let Some(tools) = analysis.plain_schema_is_tool_set
            && shared.workspace.schema.mode == SchemaMode::PlainSchema
        {
            let noun = if tools == 1 { "tool" } else { "tools" };
            ui.add(
                egui::Label::new(
                    egui::RichText::new(format!(
                        "warning: this document is a tool set ({tools} {noun}), not a JSON \
                         Schema: read as a plain schema it constrains almost nothing"
                    ))
                    .color(ui.visuals().warn_fg_color),
                )
                .wrap(),
            );
            if ui
                .button("Switch to tool-set mode")
                .on_hover_text("Read the document as tool definitions (the Tool set option)")
                .clicked()
            {
                shared.workspace.schema.mode = SchemaMode::ToolSet;
            }
        }
        if let Some(issue) = &analysis.schema_issue {
            let text = egui::RichText::new(format!("error: {}", issue.message))
                .color(ui.visuals().error_fg_color);
            let clicked = ui
                .add(egui::Label::new(text).wrap().sense(egui::Sense::click()))
                .on_hover_text("Click to move the cursor there")
                .clicked();
            if clicked && let Some(span) = &issue.span {
                self.goto = Some(highlight::char_index(
                    &shared.workspace.schema.text,
                    span.start,
                ));
            }
        }
        for warning in &analysis.warnings {
            ui.add(
                egui::Label::new(
                    egui::RichText::new(format!("warning: {warning}"))
                        .color(ui.visuals().warn_fg_color),
                )
                .wrap(),
            );
        }
    }

    fn editor(&mut self, ui: &mut egui::Ui, shared: &mut Shared) {
        let marks: Vec<Mark> = match &shared.analysis.schema_issue {
            Some(issue) if shared.analysis.input.schema.text == shared.workspace.schema.text => {
                issue
                    .span
                    .iter()
                    .map(|r| Mark {
                        range: r.clone(),
                        kind: MarkKind::Error,
                    })
                    .collect()
            }
            _ => Vec::new(),
        };
        let galleys = &mut self.galleys;
        let mut layouter = |ui: &egui::Ui, buf: &dyn egui::TextBuffer, wrap: f32| {
            galleys.layout(ui, buf.as_str(), "JSON", &marks, wrap)
        };
        let label = ui.label("Schema JSON");
        let id = egui::Id::unique("tools-schema-editor");
        self.search.open_on_shortcut(ui, id);
        let found = self.search.ui(ui, id, &shared.workspace.schema.text);
        {
            let text = &mut shared.workspace.schema.text;
            let scroll_to = (found.as_ref().map(|r| r.start))
                .or_else(|| self.goto.map(|chars| highlight::byte_index(text, chars)));
            let view = large_text::View {
                marks: &marks,
                scroll_to,
                rows: Some(20),
            };
            let before = text.len();
            let fits = large_text::fits(ui, id, large_text::Text::Editable(text), &view);
            if text.len() != before {
                shared.workspace.schema.source.clear();
            }
            if !fits {
                self.goto = None;
                self.external.after(&shared.workspace.schema.text);
                return;
            }
        }
        let gutter = crate::editor::gutter_width(
            ui,
            crate::editor::line_count(&shared.workspace.schema.text),
        );
        self.external
            .before(ui.ctx(), id, &shared.workspace.schema.text);
        ui.horizontal_top(|ui| {
            ui.add_space(gutter);
            let mut output = egui::TextEdit::multiline(&mut shared.workspace.schema.text)
                .id(id)
                .code_editor()
                .desired_width(f32::INFINITY)
                .desired_rows(20)
                .layouter(&mut layouter)
                .show(ui);
            crate::editor::paint_line_numbers(ui, &output.galley, output.galley_pos, gutter);
            output.response.response = output.response.response.labelled_by(label.id);
            if output.response.response.changed() {
                shared.workspace.schema.source.clear();
            }
            if let Some(range) = found {
                let text = shared.workspace.schema.text.clone();
                crate::editor::select(ui, &mut output, id, &text, range);
            }
            if let Some(at) = self.goto.take() {
                let cursor = egui::text::CCursor::new(at);
                output
                    .state
                    .cursor
                    .set_char_range(Some(egui::text::CCursorRange::one(cursor)));
                output.state.store(ui.ctx(), id);
                ui.memory_mut(|m| m.request_focus(id));
                let rect = output
                    .galley
                    .pos_from_cursor(cursor)
                    .translate(output.galley_pos.to_vec2());
                ui.scroll_to_rect(rect, Some(egui::Align::Center));
            }
        });
        self.external.after(&shared.workspace.schema.text);
    }
}

/// The grammar source picker: toolrail's grammar for the tool set, the hand-edited GBNF, or
/// what llama.cpp builds from a chat template.
fn grammar_source_row(ui: &mut egui::Ui, shared: &mut Shared) {
    ui.horizontal_wrapped(|ui| {
        let label = ui.label("Grammar from");
        let mut source = shared.workspace.grammar_source();
        egui::ComboBox::from_id_salt("tools-grammar-source")
            .selected_text(source.label())
            .show_ui(ui, |ui| {
                for choice in GrammarSource::ALL {
                    ui.selectable_value(&mut source, choice, choice.label());
                }
            })
            .response
            .labelled_by(label.id)
            .on_hover_text(
                "tool set: toolrail's grammar for the tools; hand-edited GBNF: the Grammar \
                 pane's text; llama.cpp template: the prompt, lazy grammar and triggers \
                 llama-server builds from a chat template for the tools",
            );
        if source != shared.workspace.grammar_source() {
            if source == GrammarSource::HandEdited
                && shared.workspace.grammar.text.trim().is_empty()
            {
                shared.workspace.grammar.text = shared.analysis.grammar_text.clone();
            }
            shared.workspace.set_grammar_source(source);
        }
    });
}

/// Asks for a chat template file (`.jinja`) to use instead of the model's own.
pub fn pick_template(shared: &mut Shared) {
    shared.pick_file(
        FileRequest::OpenTemplate,
        rfd::AsyncFileDialog::new().add_filter("Chat template", &["jinja", "j2", "txt"]),
    );
}

/// The template source's settings: which template, `tool_choice`, parallel calls, thinking,
/// reasoning format.
fn template_row(ui: &mut egui::Ui, shared: &mut Shared) {
    let tool_names: Vec<String> = shared
        .analysis
        .tools
        .iter()
        .filter(|t| t.in_grammar)
        .map(|t| t.name.clone())
        .collect();
    ui.horizontal_wrapped(|ui| {
        let template = &mut shared.workspace.template;
        let current = match &template.file {
            Some(file) => file.file_name().map_or_else(
                || file.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            ),
            None => "model's template".to_owned(),
        };
        let label = ui.label("Template");
        let mut use_model = template.file.is_none();
        egui::ComboBox::from_id_salt("tools-template")
            .selected_text(current)
            .width(180.0)
            .truncate()
            .show_ui(ui, |ui| {
                ui.selectable_value(&mut use_model, true, "model's template")
                    .on_hover_text("The loaded model's GGUF chat template");
            })
            .response
            .labelled_by(label.id)
            .on_hover_text(
                template
                    .file
                    .as_ref()
                    .map_or("The loaded model's GGUF chat template".to_owned(), |f| {
                        f.display().to_string()
                    }),
            );
        if use_model && template.file.is_some() {
            template.file = None;
            template.text.clear();
        }
        let open = ui
            .button("Open template file…")
            .on_hover_text("Use a chat template file (.jinja) instead of the model's own")
            .clicked();
        let label = ui.label("tool_choice");
        egui::ComboBox::from_id_salt("tools-template-tool-choice")
            .selected_text(template.tool_choice.label().to_owned())
            .show_ui(ui, |ui| {
                for choice in [
                    ToolChoice::Auto,
                    ToolChoice::Required,
                    ToolChoice::None,
                ] {
                    let text = choice.label().to_owned();
                    ui.selectable_value(&mut template.tool_choice, choice, text);
                }
                for name in &tool_names {
                    ui.selectable_value(
                        &mut template.tool_choice,
                        ToolChoice::Named(name.clone()),
                        name,
                    );
                }
            })
            .response
            .labelled_by(label.id)
            .on_hover_text("auto, required, none, or a tool the model must call");
        let label =
            ui.add(egui::Label::new("parallel calls").wrap_mode(egui::TextWrapMode::Extend));
        egui::ComboBox::from_id_salt("tools-template-parallel")
            .selected_text(template.parallel.label())
            .show_ui(ui, |ui| {
                for choice in ServerSwitch::ALL {
                    ui.selectable_value(&mut template.parallel, choice, choice.label());
                }
            })
            .response
            .labelled_by(label.id)
            .on_hover_text(
                "parallel_tool_calls: left to the server (the Grammar pane shows what it chose), on or off",
            );
        let label = ui.label("thinking");
        egui::ComboBox::from_id_salt("tools-template-thinking")
            .selected_text(template.thinking.label())
            .show_ui(ui, |ui| {
                for choice in ServerSwitch::ALL {
                    ui.selectable_value(&mut template.thinking, choice, choice.label());
                }
            })
            .response
            .labelled_by(label.id);
        let label =
            ui.add(egui::Label::new("reasoning format").wrap_mode(egui::TextWrapMode::Extend));
        egui::ComboBox::from_id_salt("tools-template-reasoning")
            .selected_text(template.reasoning_format.label())
            .show_ui(ui, |ui| {
                for choice in ReasoningFormat::ALL {
                    ui.selectable_value(&mut template.reasoning_format, choice, choice.label());
                }
            })
            .response
            .labelled_by(label.id);
        let mut limited = template.budget.is_some();
        if ui
            .checkbox(&mut limited, "thinking budget")
            .on_hover_text(
                "llama-server's --reasoning-budget: at most this many thinking tokens, then the \
                 message and the end tag are forced (templates without thinking tags ignore it)",
            )
            .changed()
        {
            template.budget = limited.then(|| ThinkingBudget {
                tokens: DEFAULT_THINKING_BUDGET,
                message: String::new(),
            });
        }
        if let Some(budget) = template.budget.as_mut() {
            ui.add(
                egui::DragValue::new(&mut budget.tokens)
                    .range(0..=MAX_THINKING_BUDGET)
                    .suffix(" tokens"),
            )
            .on_hover_text("The most thinking tokens (0: the end is forced at once)");
            let label = ui.label("message");
            ui.add(
                egui::TextEdit::singleline(&mut budget.message)
                    .desired_width(160.0)
                    .hint_text("forced before the end tag"),
            )
            .labelled_by(label.id)
            .on_hover_text("--reasoning-budget-message: text forced when the budget runs out");
        }
        if open {
            pick_template(shared);
        }
    });
}

/// Asks for a tool set or schema file to open into the editor.
pub fn pick_schema(shared: &mut Shared) {
    shared.pick_file(
        FileRequest::OpenSchema,
        rfd::AsyncFileDialog::new().add_filter("JSON", &["json"]),
    );
}

fn source_row(ui: &mut egui::Ui, shared: &mut Shared) {
    ui.horizontal_wrapped(|ui| {
        let current = if shared.workspace.schema.source.is_empty() {
            "(edited)".to_owned()
        } else {
            shared.workspace.schema.source.clone()
        };
        let label = ui.label("Sample");
        egui::ComboBox::from_id_salt("tools-sample")
            .selected_text(current)
            .width(150.0)
            .truncate()
            .show_ui(ui, |ui| {
                for sample in &SAMPLES {
                    let selected = shared.workspace.schema.source == sample.file;
                    let response = ui
                        .selectable_label(selected, sample.file)
                        .on_hover_text(sample.description());
                    if response.clicked() {
                        let schema = &mut shared.workspace.schema;
                        schema.text = sample.text.to_owned();
                        schema.source = sample.file.to_owned();
                        schema.mode = SchemaMode::ToolSet;
                        schema.envelope = sample.format;
                        schema.disabled_tools.clear();
                    }
                }
            })
            .response
            .labelled_by(label.id);
        if ui
            .button("Open…")
            .on_hover_text("Open a tool set or JSON Schema file")
            .clicked()
        {
            pick_schema(shared);
        }
        if ui
            .button("Save…")
            .on_hover_text("Save the editor's JSON to a file")
            .clicked()
        {
            shared.save_file(
                FileRequest::SaveSchema,
                rfd::AsyncFileDialog::new()
                    .add_filter("JSON", &["json"])
                    .set_file_name("tools.json"),
            );
        }
    });
}

fn options_row(ui: &mut egui::Ui, shared: &mut Shared) {
    let schema = &mut shared.workspace.schema;
    // Every widget is added to the wrapping row itself (no nested enabled scopes, whose child
    // rows do not wrap with it): each keeps its place at any width.
    ui.horizontal_wrapped(|ui| {
        ui.radio_value(&mut schema.mode, SchemaMode::ToolSet, "Tool set");
        ui.radio_value(&mut schema.mode, SchemaMode::PlainSchema, "Plain schema");
        ui.separator();
        let tool_set = schema.mode == SchemaMode::ToolSet;
        let mut format = schema.envelope;
        // The envelope applies to tool sets only, so it is shown in tool-set mode only. The
        // combo box is added to the wrapping row itself, with its own label: inside a nested
        // scope (to disable it) it did not wrap, overflowed the pane and widened its content,
        // and a combo box's own label wraps mid-word.
        if tool_set {
            let label = ui.label("Envelope");
            egui::ComboBox::from_id_salt("tools-envelope")
                .selected_text(format.as_str())
                .show_ui(ui, |ui| {
                    for f in Format::ALL {
                        ui.selectable_value(&mut format, f, f.as_str());
                    }
                })
                .response
                .labelled_by(label.id)
                .on_hover_text("How calls are wrapped");
        }
        if format != schema.envelope {
            schema.envelope = format;
        }
        ui.add_enabled(
            tool_set,
            egui::Checkbox::new(&mut schema.parallel, "parallel"),
        )
        .on_hover_text("Allow several calls");
        ui.add_enabled(tool_set, egui::Checkbox::new(&mut schema.auto, "auto"))
            .on_hover_text("Allow plain text instead of calls");
        ui.checkbox(&mut schema.compact, "compact")
            .on_hover_text("No whitespace between JSON tokens");
        ui.checkbox(&mut schema.lenient, "lenient")
            .on_hover_text("Unsupported keywords become warnings instead of errors");
        ui.add_enabled(
            tool_set,
            egui::Checkbox::new(&mut schema.pool_filter, "pool filter"),
        )
        .on_hover_text(
            "Fallback tools (such as asking the user) leave the grammar unless the prompt asks for them",
        );
    });
}

fn tool_list(ui: &mut egui::Ui, shared: &mut Shared) {
    let tools = shared.analysis.tools.clone();
    if tools.is_empty() {
        return;
    }
    let in_grammar = tools.iter().filter(|t| t.in_grammar).count();
    let noun = if tools.len() == 1 { "tool" } else { "tools" };
    // how the tool set was read (its shape, the keys not needed); warnings are listed below
    let notes = shared.analysis.tool_set_notes();
    // Open at first for a few tools; a long list starts folded so the editor stays in view.
    let list = egui::CollapsingHeader::new(
        egui::RichText::new(format!(
            "{} {noun}, {in_grammar} in the grammar",
            tools.len()
        ))
        .strong(),
    )
    .id_salt("tools-list")
    .default_open(tools.len() <= SHOWN_TOOLS)
    .show(ui, |ui| tool_rows(ui, shared, &tools));
    if !notes.is_empty() {
        list.header_response.on_hover_text(notes.join("\n"));
    }
}

/// How many tools the tool list shows open at first.
const SHOWN_TOOLS: usize = 3;

fn tool_rows(
    ui: &mut egui::Ui,
    shared: &mut Shared,
    tools: &[toolrail_workbench::analysis::ToolEntry],
) {
    for tool in tools {
        ui.horizontal(|ui| {
            let mut enabled = tool.enabled;
            let response = ui
                .checkbox(&mut enabled, egui::RichText::new(&tool.name).monospace())
                .on_hover_text(if tool.description.is_empty() {
                    "(no description)"
                } else {
                    &tool.description
                });
            if response.changed() {
                let disabled = &mut shared.workspace.schema.disabled_tools;
                if enabled {
                    disabled.retain(|n| n != &tool.name);
                } else if !disabled.contains(&tool.name) {
                    disabled.push(tool.name.clone());
                }
            }
            if let Some(decision) = &tool.pool {
                let (mark, color) = if decision.kept {
                    ("pool: kept", ui.visuals().weak_text_color())
                } else {
                    ("pool: dropped", ui.visuals().warn_fg_color)
                };
                ui.label(egui::RichText::new(mark).small().color(color))
                    .on_hover_text(decision.reason.to_string());
            }
        });
    }
}
