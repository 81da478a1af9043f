//! Generation: the model picker and load progress, the prompt (with its builder and a preview),
//! sampling and engine, Run / Step / Continue / Pause / Cancel, the token stream as chips, the
//! selected token's candidates before and after the mask, its timings and the grammar stacks after
//! it, Force (a branch from that step), and a plot of mask time per token.
//!
//! Everything here draws [`toolrail_workbench::run`] state and calls its actions; no model or
//! grammar logic lives in this file. The token strip and the token details live in
//! [`crate::token_view`], shared with the Transcript pane.

use crate::dialogs::FileRequest;
use crate::large_text;
use std::ops::Range;
use toolrail_llm::settings::ServerFlags;

use egui::{Color32, RichText};

use crate::renderer::Renderer;
use crate::shared::Shared;
use crate::token_view::{TokenStrip, mask_plot, phase_text, token_details};
use toolrail_llm::Models;
use toolrail_llm::worker::EngineKind;
use toolrail_workbench::run::{
    LoadState, Run, RunPhase, RunSettings, RunState, ServerRequestChoice, ServerState,
};
use toolrail_workbench::run::{PromptStyle, prompt_notes};
use toolrail_workbench::transcript::{ServerRequest, Stop, TokenRecord};
use toolrail_workbench::workspace::LiveRefresh;

/// The generation pane's own UI state.
#[derive(Default)]
pub struct GenerationPane {
    strip: TokenStrip,
    selected: Option<usize>,
    models: Option<Result<Models, String>>,
    saved_settings: Option<RunSettings>,
    /// The "Connect to server…" form is open.
    connect_open: bool,
    /// The URL typed into it.
    server_url: String,
    /// The environment variable holding the server's API key (empty: none).
    server_key_env: String,
    /// The flags the server was started with, as typed (it does not report those that change
    /// logits).
    server_flags: String,
}

/// A server to connect to: from a `[[server]]` entry or the form.
struct ConnectTo {
    url: String,
    key_env: Option<String>,
    name: Option<String>,
    /// The flags it was started with (`-fa on -ub 256`), as written.
    flags: Result<ServerFlags, String>,
}

impl GenerationPane {
    /// Draws the pane.
    pub fn ui(&mut self, ui: &mut egui::Ui, shared: &mut Shared) {
        shared.sync_run_settings(&mut self.saved_settings);
        egui::ScrollArea::vertical()
            .id_salt("generation-scroll")
            .show(ui, |ui| {
                self.model_row(ui, shared);
                // The run buttons right under the model, so they are in view in a small window
                // (the prompt and sampling settings below them scroll).
                controls(ui, shared);
                ui.separator();
                prompt_section(ui, shared);
                sampling_section(ui, &mut shared.run);
                ui.separator();
                self.tokens_section(ui, shared);
            });
        shared.sync_run_settings(&mut self.saved_settings);
    }

    fn model_row(&mut self, ui: &mut egui::Ui, shared: &mut Shared) {
        let mut open_gguf = false;
        let mut open_connect = false;
        let mut connect_to: Option<ConnectTo> = None;
        let run = &mut shared.run;
        let models = self.models.get_or_insert_with(|| {
            Models::load(run.settings.models_file.as_deref()).map_err(|e| e.to_string())
        });
        ui.horizontal_wrapped(|ui| {
            let mut label = ui.label("Model");
            if let Ok(models) = models {
                label = label.on_hover_text(format!("models from {}", models.source));
            }
            // A GGUF path can be any length: the list shows its file name (elided), the full
            // path is in the tooltip, so the buttons beside it are never pushed out of view.
            let (selected, full) = match &run.settings.gguf {
                Some(path) => (elided_file_name(path, 28), path.display().to_string()),
                None => (run.settings.model.clone(), run.settings.model.clone()),
            };
            egui::ComboBox::from_id_salt("generation-model")
                .selected_text(selected)
                .width(190.0)
                .truncate()
                .show_ui(ui, |ui| {
                    if let Ok(models) = models {
                        for spec in &models.specs {
                            let chosen =
                                run.settings.gguf.is_none() && run.settings.model == spec.name;
                            if ui.selectable_label(chosen, &spec.name).clicked() {
                                run.settings.model = spec.name.clone();
                                run.settings.gguf = None;
                            }
                        }
                        if !models.servers.is_empty() {
                            ui.separator();
                        }
                        for server in &models.servers {
                            let connected = run
                                .controller
                                .server()
                                .is_some_and(|c| c.name.as_deref() == Some(&server.name));
                            if ui
                                .selectable_label(
                                    connected,
                                    format!("server: {} ({})", server.name, server.url),
                                )
                                .clicked()
                            {
                                // Its `vocab` entry is the model whose vocabulary follows the
                                // server's tokens: select it (loaded by Start run).
                                if let Some(vocab) = &server.vocab {
                                    run.settings.model.clone_from(vocab);
                                    run.settings.gguf = None;
                                }
                                connect_to = Some(ConnectTo {
                                    url: server.url.clone(),
                                    key_env: server.api_key_env.clone(),
                                    name: Some(server.name.clone()),
                                    flags: Ok(server.flags.clone()),
                                });
                            }
                        }
                    }
                    ui.separator();
                    if ui.selectable_label(false, "Connect to server…").clicked() {
                        open_connect = true;
                    }
                })
                .response
                .labelled_by(label.id)
                .on_hover_text(full);
            let loading = matches!(run.controller.load_state(), LoadState::Loading { .. });
            let busy = run.controller.is_busy();
            if ui
                .add_enabled(!loading && !busy, egui::Button::new("Load model"))
                .clicked()
            {
                match run.settings.model_spec() {
                    Ok(spec) => {
                        if let Err(e) = run.controller.load(spec) {
                            run.messages.push(e.to_string());
                        }
                    }
                    Err(e) => run.messages.push(e),
                }
            }
            open_gguf = ui
                .add_enabled(!loading && !busy, egui::Button::new("Open GGUF…"))
                .clicked();
            if loading && ui.button("Cancel load").clicked() {
                run.controller.cancel_load();
            }
        });
        // The models file matters only while the model comes from it: once a GGUF is chosen
        // or a model is loaded, its error is stale.
        if let Err(e) = models
            && run.settings.gguf.is_none()
            && !matches!(run.controller.load_state(), LoadState::Ready { .. })
        {
            ui.add(
                egui::Label::new(RichText::new(format!("models file: {e}")).color(error_color(ui)))
                    .wrap(),
            );
        }
        match run.controller.load_state() {
            LoadState::Empty => {
                ui.label(RichText::new("No model loaded.").weak());
            }
            LoadState::Loading { name, fraction } => {
                ui.add(
                    egui::ProgressBar::new(*fraction)
                        .show_percentage()
                        .text(format!("loading {name}: {:.0}%", fraction * 100.0)),
                );
            }
            LoadState::Ready { name } => {
                if let Some(model) = run.controller.model() {
                    let info = model.info();
                    ui.add(
                        egui::Label::new(format!(
                            "{name}: {}, {} tokens, {:.0} MB, on {}",
                            info.architecture,
                            info.vocab_size,
                            info.file_size as f64 / 1e6,
                            info.placement.summary()
                        ))
                        .wrap(),
                    );
                }
            }
            LoadState::Failed { name, message } => {
                ui.add(
                    egui::Label::new(
                        RichText::new(format!("{name}: {message}")).color(error_color(ui)),
                    )
                    .wrap(),
                );
            }
        }
        let entry = match (&run.settings.gguf, &*models) {
            (None, Ok(models)) => models
                .find(&run.settings.model)
                .map_or(0, |spec| spec.gpu_layers),
            _ => 0,
        };
        gpu_layers_row(ui, &mut run.settings, entry);
        if open_connect {
            self.connect_open = true;
        }
        if self.connect_open {
            self.connect_form(ui, &mut connect_to);
        }
        if let Some(ConnectTo {
            url,
            key_env,
            name,
            flags,
        }) = connect_to
        {
            let run = &mut shared.run;
            match flags {
                Ok(flags) => run.controller.set_server_flags(flags),
                Err(e) => {
                    run.messages
                        .push(format!("Started with: {e} (connecting without the flags)"));
                    run.controller.set_server_flags(ServerFlags::default());
                }
            }
            let key = match key_env.as_deref().map(str::trim).filter(|k| !k.is_empty()) {
                Some(var) => match std::env::var(var) {
                    Ok(key) => Some(key),
                    Err(_) => {
                        run.messages.push(format!(
                            "the API key variable {var} is not set: connecting without a key"
                        ));
                        None
                    }
                },
                None => None,
            };
            if let Err(e) = run.controller.connect_server(&url, key, name) {
                run.messages.push(e.to_string());
            } else {
                self.connect_open = false;
            }
        }
        server_section(ui, &mut shared.run);
        if open_gguf {
            shared.pick_file(
                FileRequest::OpenGguf,
                rfd::AsyncFileDialog::new().add_filter("GGUF model", &["gguf"]),
            );
        }
    }

    /// The "Connect to server…" form: URL, the API key's variable, Connect and Close.
    fn connect_form(&mut self, ui: &mut egui::Ui, connect_to: &mut Option<ConnectTo>) {
        ui.horizontal_wrapped(|ui| {
            let label = ui.label("Server URL");
            let url = ui
                .add(
                    egui::TextEdit::singleline(&mut self.server_url)
                        .hint_text("http://127.0.0.1:8080")
                        .desired_width(200.0),
                )
                .labelled_by(label.id);
            let label = ui.label("API key variable");
            ui.add(
                egui::TextEdit::singleline(&mut self.server_key_env)
                    .hint_text("none")
                    .desired_width(110.0),
            )
            .labelled_by(label.id)
            .on_hover_text("The name of an environment variable holding the server's API key");
            let label = ui.label("Started with");
            ui.add(
                egui::TextEdit::singleline(&mut self.server_flags)
                    .hint_text("-fa on -ub 256")
                    .desired_width(140.0),
            )
            .labelled_by(label.id)
            .on_hover_text(
                "The flags the server was started with that change its logits (-fa, -b, -ub, \
                 -ctk, -ctv, -t, -ngl, -c): llama-server does not report them, and each run \
                 records them to compare with in-process runs",
            );
            let enter = url.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
            let typed = !self.server_url.trim().is_empty();
            let connect = ui
                .add_enabled(typed, egui::Button::new("Connect"))
                .on_disabled_hover_text("Type the server's URL first");
            if typed && (connect.clicked() || enter) {
                *connect_to = Some(ConnectTo {
                    url: self.server_url.trim().to_owned(),
                    key_env: Some(self.server_key_env.clone()),
                    name: None,
                    flags: ServerFlags::parse(&self.server_flags),
                });
            }
            if ui.button("Close").clicked() {
                self.connect_open = false;
            }
        });
    }

    fn tokens_section(&mut self, ui: &mut egui::Ui, shared: &mut Shared) {
        let shown = shared
            .run
            .shown
            .and_then(|id| shared.run.controller.run(id))
            .or_else(|| shared.run.controller.latest());
        let Some(run) = shown else {
            match shared.run.controller.replay() {
                Some(replay) => {
                    if replay.demo {
                        ui.label(
                            RichText::new(crate::token_view::DEMO_LABEL)
                                .strong()
                                .color(ui.visuals().warn_fg_color),
                        );
                    }
                    ui.label(
                        RichText::new(format!(
                            "Replay: {} of {} tokens (Transcript pane)",
                            replay.position(),
                            replay.len()
                        ))
                        .weak(),
                    );
                    let tokens = replay.shown();
                    let at_end = replay.stop().is_some();
                    if !at_end {
                        crate::token_view::timeline_line(
                            ui,
                            replay.transcript.template.as_ref(),
                            tokens,
                            &replay.transcript.output,
                        );
                    }
                    let selected = self
                        .selected
                        .filter(|&i| i < tokens.len())
                        .or(tokens.len().checked_sub(1));
                    if let Some(i) = self.strip.ui(ui, tokens, selected, "generation") {
                        self.selected = Some(i);
                    }
                    if at_end {
                        crate::token_view::explanation(ui, replay.explanation());
                    }
                    if let Some(t) = selected.and_then(|i| tokens.get(i)) {
                        let grammar = replay.transcript.grammar.as_deref();
                        token_details(ui, t, grammar, false);
                    }
                    let engine = replay.transcript.engine;
                    mask_plot(ui, tokens, engine, "generation-replay-plot");
                }
                None => {
                    ui.label(
                        RichText::new(
                            "No run yet: press Start run (it loads the selected model first).",
                        )
                        .weak(),
                    );
                }
            }
            return;
        };
        run_status(ui, run);
        if run.finish.is_none()
            && let Some(Ok(template)) = &run.inputs.template
        {
            crate::token_view::timeline_line(ui, Some(template), &run.tokens, &run.text);
        }
        if matches!(run.phase, RunPhase::Running) {
            refresh_note(ui, shared);
        }
        if self.selected.is_some_and(|i| i >= run.tokens.len()) {
            self.selected = None;
        }
        let run_id = run.id;
        if let Some(i) = self.strip.ui(ui, &run.tokens, self.selected, "generation") {
            self.selected = Some(i);
            if let Some(t) = run.tokens.get(i).cloned() {
                let grammar = run.request.grammar.clone();
                focus_stacks(shared, &t, grammar.as_deref());
            }
        }
        // Borrow the run again after the focus change.
        let Some(run) = shared.run.controller.run(run_id) else {
            return;
        };
        // ended: what it says about itself (the trigger timeline among it), under its tokens
        crate::token_view::explanation(ui, &run.explanation);
        let mut force = None;
        if let Some(i) = self.selected
            && let Some(t) = run.tokens.get(i)
        {
            // A llama-server run cannot be branched: no Force buttons on its tokens.
            let can_force = run.server_run.is_none();
            force = token_details(ui, t, run.request.grammar.as_deref(), can_force);
        }
        mask_plot(ui, &run.tokens, run.request.engine, "generation-mask-plot");
        if let (Some(step), Some(token)) = (self.selected, force) {
            match shared.run.controller.branch(run_id, step, token, false) {
                Ok(id) => {
                    shared.run.shown = Some(id);
                    self.selected = Some(step);
                }
                Err(e) => shared.error(e.to_string()),
            }
        }
    }
}

/// The file name of `path`, elided in the middle to at most `max` characters.
fn elided_file_name(path: &std::path::Path, max: usize) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    let chars: Vec<char> = name.chars().collect();
    if chars.len() <= max {
        return name;
    }
    let head = max / 2;
    let tail = max - head - 1;
    let mut out: String = chars[..head].iter().collect();
    out.push('…');
    out.extend(&chars[chars.len() - tail..]);
    out
}

/// Highlights the top frames of `token`'s stacks in the grammar pane, if the run's grammar is the
/// one on display.
fn focus_stacks(shared: &mut Shared, token: &TokenRecord, grammar: Option<&str>) {
    let (Some(stacks), Some(grammar)) = (&token.stacks, grammar) else {
        return;
    };
    if grammar != shared.analysis.grammar_text {
        return;
    }
    let highlights: Vec<Range<usize>> = stacks
        .stacks
        .iter()
        .filter_map(|s| s.frames.last())
        .map(|f| f.span.start as usize..f.span.end as usize)
        .collect();
    let select = highlights.first().cloned();
    shared.focus_grammar(highlights, select);
}

fn error_color(ui: &egui::Ui) -> Color32 {
    ui.visuals().error_fg_color
}

fn prompt_section(ui: &mut egui::Ui, shared: &mut Shared) {
    let label = ui.label("Prompt");
    let id = egui::Id::unique("generation-prompt");
    let prompt = large_text::Text::Editable(&mut shared.workspace.prompt);
    if large_text::fits(ui, id, prompt, &large_text::View::with_rows(6)) {
        ui.add(
            egui::TextEdit::multiline(&mut shared.workspace.prompt)
                .id(id)
                .desired_rows(2)
                .desired_width(f32::INFINITY),
        )
        .labelled_by(label.id);
    }
    let template = shared.workspace.template.on;
    let settings = &mut shared.run.settings;
    ui.horizontal(|ui| {
        if template {
            ui.label(
                RichText::new(
                    "Prompt format: the llama.cpp template's (the grammar source in the Tools pane)",
                )
                .weak(),
            );
            return;
        }
        let label = ui.label("Prompt format");
        egui::ComboBox::from_id_salt("generation-prompt-style")
            .selected_text(settings.prompt_style.name())
            .show_ui(ui, |ui| {
                for style in PromptStyle::all() {
                    ui.selectable_value(&mut settings.prompt_style, style, style.name());
                }
            })
            .response
            .labelled_by(label.id);
    });
    egui::CollapsingHeader::new("System text")
        .id_salt("generation-system")
        .show(ui, |ui| {
            let label = ui.label("System");
            let id = egui::Id::unique("generation-system-text");
            let system = large_text::Text::Editable(&mut settings.system);
            if large_text::fits(ui, id, system, &large_text::View::with_rows(6)) {
                ui.add(
                    egui::TextEdit::multiline(&mut settings.system)
                        .id(id)
                        .desired_rows(2)
                        .desired_width(f32::INFINITY),
                )
                .labelled_by(label.id);
            }
        });
    // Whether the prompt asks for what the grammar allows (no prompt is built for this).
    let mut setup = shared.run.setup(&shared.analysis);
    setup.user.clone_from(&shared.workspace.prompt);
    let notes = prompt_notes(
        &setup,
        shared.analysis.input.schema.envelope,
        shared.analysis.tool_set.is_some(),
        shared.analysis.template.is_some(),
        shared.run.controller.model().map(|m| m.spec()),
    );
    for note in &notes {
        let text = RichText::new(note.text());
        ui.label(if note.is_warning() {
            text.color(ui.visuals().warn_fg_color)
        } else {
            text.weak()
        });
    }
    egui::CollapsingHeader::new("Prompt preview")
        .id_salt("generation-preview")
        .show(ui, |ui| {
            // Built on the analysis thread (a GGUF template is applied by llama.cpp).
            shared.preview_wanted = true;
            match &shared.preview {
                Some(Ok(preview)) => {
                    ui.label(RichText::new(format!("from the {}", preview.source)).weak());
                    let label = ui.label("Prompt text");
                    let id = egui::Id::unique("generation-prompt-preview");
                    if let Some(editor) = large_text::read_only_code(ui, id, &preview.text, 4) {
                        editor.labelled_by(label.id);
                    }
                }
                Some(Err(e)) => {
                    ui.label(RichText::new(e).color(error_color(ui)));
                }
                None => {
                    ui.label(RichText::new("building the preview…").weak());
                }
            }
        });
}

fn sampling_section(ui: &mut egui::Ui, run: &mut RunState) {
    let settings = &mut run.settings;
    ui.horizontal(|ui| {
        let label = ui.label("Engine");
        egui::ComboBox::from_id_salt("generation-engine")
            .selected_text(settings.engine.name())
            .show_ui(ui, |ui| {
                for engine in [
                    EngineKind::Toolrail,
                    EngineKind::Llama,
                    EngineKind::Llguidance,
                    EngineKind::None,
                ] {
                    ui.selectable_value(&mut settings.engine, engine, engine.name());
                }
            })
            .response
            .labelled_by(label.id);
    });
    ui.horizontal(|ui| {
        ui.label("Compare with").on_hover_text(
            "Also compute these engines' masks at every step, timed and compared with \
             toolrail's over the whole vocabulary: the mask-time plot shows one line per engine",
        );
        for (engine, text) in [
            (EngineKind::Llama, "llama.cpp masks"),
            (EngineKind::Llguidance, "llguidance masks"),
        ] {
            let mut on = settings.compare.contains(&engine);
            let own = settings.engine == engine;
            let usable = !own && settings.engine != EngineKind::None;
            let response = ui
                .add_enabled(usable, egui::Checkbox::new(&mut on, text))
                .on_disabled_hover_text(if own {
                    "the run's own engine: its mask is compared with toolrail's already"
                } else {
                    "runs without a grammar compare no masks"
                });
            if response.changed() {
                if on {
                    settings.compare.push(engine);
                } else {
                    settings.compare.retain(|&e| e != engine);
                }
            }
        }
    });
    egui::CollapsingHeader::new("Sampling")
        .id_salt("generation-sampling")
        .show(ui, |ui| {
            let s = &mut settings.sampling;
            ui.add(egui::Slider::new(&mut s.temperature, 0.0..=2.0).text("temperature"));
            ui.add(egui::Slider::new(&mut s.top_k, 0..=200).text("top-k"));
            ui.add(egui::Slider::new(&mut s.top_p, 0.0..=1.0).text("top-p"));
            ui.add(egui::Slider::new(&mut s.min_p, 0.0..=1.0).text("min-p"));
            ui.add(egui::Slider::new(&mut s.repeat_penalty, 1.0..=2.0).text("repeat penalty"))
                .on_hover_text("Lowers the tokens among the last 64 generated (1: off)");
            ui.add(
                egui::Slider::new(&mut s.max_tokens, 1..=4096)
                    .logarithmic(true)
                    .text("max tokens"),
            );
            ui.checkbox(&mut s.finish_in_budget, "Finish within max tokens")
                .on_hover_text(
                    "Near the limit, take the most likely token that still lets the grammar \
                     finish in the tokens left (constrained runs)",
                );
            ui.horizontal(|ui| {
                let label = ui.label("seed");
                ui.add(egui::DragValue::new(&mut s.seed))
                    .labelled_by(label.id);
            });
        });
}

fn controls(ui: &mut egui::Ui, shared: &mut Shared) {
    use toolrail_workbench::actions::Action;
    let ready = shared.run.controller.model().is_some();
    let now = shared.situation();
    let mut queue = Vec::new();
    let mut pair = false;
    ui.horizontal_wrapped(|ui| {
        // With no model loaded, Start run and Step load the selected one first, then start.
        for (action, label) in [
            (Action::Run, "Start run"),
            (Action::Step, "Step"),
            (Action::Continue, "Continue"),
            (Action::Pause, "Pause"),
            (Action::Cancel, "Cancel"),
        ] {
            if ui
                .add_enabled(action.enabled(&now), egui::Button::new(label))
                .clicked()
            {
                queue.push(action);
            }
        }
        if ui
            .add_enabled(
                ready && !now.active,
                egui::Button::new("Run with and without grammar"),
            )
            .on_hover_text(
                "The same prompt constrained and unconstrained; compare in the Validator pane",
            )
            .clicked()
        {
            pair = true;
        }
    });
    // Buttons queue actions as the shortcuts and menus do: applied next frame by the shell.
    for action in queue {
        shared.queue(action);
        shared.request_repaint();
    }
    if pair {
        let setup = shared.run.setup(&shared.analysis);
        let inputs = RunState::inputs(&shared.analysis);
        match shared.run.controller.start_pair(&setup, &inputs) {
            Ok(p) => shared.run.shown = Some(p.constrained),
            Err(e) => shared.error(e.to_string()),
        }
    }
}

/// Says why the view refreshes slowly while tokens stream, where it does.
fn refresh_note(ui: &mut egui::Ui, shared: &Shared) {
    let choice = shared.workspace.live_refresh;
    let pace = choice.interval(shared.renderer.is_software());
    if pace < std::time::Duration::from_millis(250) {
        return;
    }
    let why = match (&shared.renderer, choice) {
        (Renderer::Software(name), LiveRefresh::Auto) => {
            format!(" (no GPU draws this window: {name})")
        }
        _ => String::new(),
    };
    ui.label(
        RichText::new(format!(
            "Refreshing every {:.2} s while generating{why}; see Refresh while generating in the View menu",
            pace.as_secs_f64()
        ))
        .weak(),
    );
}

fn run_status(ui: &mut egui::Ui, run: &Run) {
    let phase = phase_text(run);
    ui.horizontal_wrapped(|ui| {
        ui.label(RichText::new(format!("Run {}", run.id)).strong());
        ui.label(format!("{} · {}", run.request.engine.name(), phase));
        if let Some(server) = &run.server_run {
            ui.label(format!(
                "on {} ({})",
                server.url,
                match server.request {
                    ServerRequest::Grammar => "grammar",
                    ServerRequest::JsonSchema { .. } => "json_schema",
                    ServerRequest::Tools { .. } => "tools",
                }
            ));
        }
        if let Some((n, ms)) = run.prompt_decode {
            ui.label(match run.prompt_reused {
                0 => format!("prompt {n} tokens in {ms:.0} ms"),
                reused => format!("prompt {n} tokens in {ms:.0} ms, {reused} reused"),
            });
        }
        if let Some(f) = &run.finish {
            ui.label(format!(
                "{} tokens, {:.1} tokens/s, mask {:.1} ms total",
                f.totals.tokens, f.totals.tokens_per_s, f.totals.mask_ms
            ));
        }
    });
    for r in &run.refusals {
        ui.label(
            RichText::new(format!(
                "step {}: token {} refused: {}",
                r.step, r.token, r.reason
            ))
            .color(error_color(ui)),
        );
    }
    if let Some(f) = &run.finish
        && run.server_run.is_some()
        && matches!(f.stop, Stop::Error { .. })
        && !run.tokens.is_empty()
    {
        ui.label(
            RichText::new(format!(
                "partial run: the stream was cut after {} tokens; they are kept (and in its \
                 transcript, which records the stop)",
                run.tokens.len()
            ))
            .color(ui.visuals().warn_fg_color),
        );
    }
    for e in &run.errors {
        ui.add(egui::Label::new(RichText::new(e).color(error_color(ui))).wrap());
    }
}

/// The connected llama-server (or the attempt): `/health`, `/props` (model, context, chat
/// template, build), what runs ask it for, and Disconnect; a failed attempt in words.
fn server_section(ui: &mut egui::Ui, run: &mut RunState) {
    let mut disconnect = false;
    match run.controller.server_state() {
        ServerState::Disconnected => return,
        ServerState::Connecting { url } => {
            ui.horizontal(|ui| {
                ui.spinner();
                ui.label(format!("connecting to {url}…"));
            });
        }
        ServerState::Failed { url, message } => {
            ui.add(
                egui::Label::new(
                    RichText::new(format!("server {url}: {message}")).color(error_color(ui)),
                )
                .wrap(),
            );
        }
        ServerState::Connected(connection) => {
            let props = &connection.props;
            ui.horizontal_wrapped(|ui| {
                ui.label(RichText::new("Server").strong());
                ui.label(match &connection.name {
                    Some(name) => format!("{name} ({})", connection.url()),
                    None => connection.url().to_owned(),
                });
                ui.label(format!("health: {}", connection.health));
                disconnect = ui
                    .add_enabled(!run.controller.is_busy(), egui::Button::new("Disconnect"))
                    .on_hover_text("Run in-process again")
                    .clicked();
            });
            egui::Grid::new("generation-server-props")
                .num_columns(2)
                .show(ui, |ui| {
                    ui.label("model");
                    ui.label(connection.model_name());
                    ui.end_row();
                    ui.label("context");
                    ui.label(match (props.n_ctx, props.total_slots) {
                        (Some(n), Some(slots)) => format!("{n} tokens per slot, {slots} slot(s)"),
                        (Some(n), None) => format!("{n} tokens per slot"),
                        _ => "not reported".to_owned(),
                    });
                    ui.end_row();
                    ui.label("build");
                    ui.label(props.build_info.as_deref().unwrap_or("not reported"));
                    ui.end_row();

                    ui.label("tools");
                    ui.label(match props.supports_tools {
                        Some(true) => "its chat template takes tools",
                        Some(false) => "its chat template does not take tools",
                        None => "not reported",
                    });
                    ui.end_row();
                });
            // Outside the grid, so that it wraps in a narrow pane.
            ui.add(
                egui::Label::new(format!(
                    "started with: {}",
                    run.controller.server_flags().summary().unwrap_or_else(|| {
                        "flags not stated (llama-server's defaults are assumed for flash \
                         attention, batch sizes and cache types)"
                            .to_owned()
                    })
                ))
                .wrap(),
            )
            .on_hover_text(
                "llama-server does not report these; they are recorded with each run to compare \
                 it with in-process runs (Connect to server… > Started with, or `flags` in its \
                 models.toml entry)",
            );
            egui::CollapsingHeader::new("Chat template")
                .id_salt("generation-server-template")
                .show(ui, |ui| {
                    let text = props.chat_template.as_deref().unwrap_or("(none reported)");
                    let id = egui::Id::unique("generation-server-template-text");
                    large_text::read_only_code(ui, id, text, 4);
                });
            ui.horizontal(|ui| {
                let label = ui.label("Ask the server for");
                let choice = &mut run.settings.server_request;
                egui::ComboBox::from_id_salt("generation-server-request")
                    .selected_text(choice.name())
                    .show_ui(ui, |ui| {
                        for c in ServerRequestChoice::all() {
                            ui.selectable_value(choice, c, c.name())
                                .on_hover_text(c.describe());
                        }
                    })
                    .response
                    .labelled_by(label.id)
                    .on_hover_text(choice.describe());
            });
            let vocab = match run.controller.model() {
                Some(model) => format!("the loaded model ({})", model.spec().name),
                None => "the selected model (loaded at Start run)".to_owned(),
            };
            ui.add(
                egui::Label::new(
                    RichText::new(format!(
                        "Runs go to this server. toolrail builds the prompt and follows every \
                         token with the vocabulary of {vocab}: it must be the server's model's \
                         GGUF (or one with the same tokenizer)."
                    ))
                    .weak(),
                )
                .wrap(),
            );
        }
    }
    if disconnect && let Err(e) = run.controller.disconnect_server() {
        run.messages.push(e.to_string());
    }
}

/// Loads the GGUF the user picked (the answer of the Open GGUF… dialog).
pub fn open_gguf(shared: &mut Shared, path: std::path::PathBuf) {
    shared.run.open_gguf(path);
}

/// GPU layers for the next load (over the models.toml entry's): a number in a build with a
/// GPU backend, else disabled, saying how to get one.
/// `entry` is the layers the model's entry asks for.
fn gpu_layers_row(
    ui: &mut egui::Ui,
    settings: &mut toolrail_workbench::run::RunSettings,
    entry: u32,
) {
    let gpu = !toolrail_llm::device::GPU_BACKENDS.is_empty();
    ui.horizontal(|ui| {
        let label = ui.label("GPU layers");
        let mut layers = settings.gpu_layers.unwrap_or(entry);
        let changed = ui
            .add_enabled(gpu, egui::DragValue::new(&mut layers).range(0..=999))
            .labelled_by(label.id)
            .on_hover_text(if gpu {
                format!(
                    "layers llama.cpp puts on the GPU ({}) when the model is next loaded; \
                     999: all. The model's entry says {entry}.",
                    toolrail_llm::device::GPU_BACKENDS.join(", ")
                )
            } else {
                "this build has no GPU backend: build toolrail with --features vulkan, cuda \
                 or metal to offload layers"
                    .to_owned()
            })
            .on_disabled_hover_text(
                "this build has no GPU backend: build toolrail with --features vulkan, cuda \
                 or metal to offload layers",
            )
            .changed();
        if changed {
            settings.gpu_layers = Some(layers);
        }
        if settings.gpu_layers.is_some()
            && ui
                .small_button("entry's")
                .on_hover_text(format!("use the model entry's gpu_layers ({entry})"))
                .clicked()
        {
            settings.gpu_layers = None;
        }
    });
}
