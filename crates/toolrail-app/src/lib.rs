//! The desktop app (eframe/egui): six panes in an egui_tiles layout over the workbench state.
//!
//! Layer: the top library (see ARCHITECTURE.md), the only crate with egui and eframe.
//! Invariant: the app draws; it decides nothing. Every pane is a struct in [`panes`] with
//! `fn ui(&mut self, ui: &mut egui::Ui, shared: &mut Shared)`; [`Shared`] is what panes share:
//! the workspace, the latest analysis, the run state, the action queue and the grammar focus.
//! The grammar, tools and model logic live in [`toolrail_workbench`] and below.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dialogs::{FileDialogs, FileRequest};
use toolrail_workbench::Repaint;
use toolrail_workbench::actions::Action;
use toolrail_workbench::analysis::{Analysis, AnalysisInput};
use toolrail_workbench::analyzer::{Analyzer, Job, LoadedModel, PreviewInput};
use toolrail_workbench::run::{RunError, RunState};
use toolrail_workbench::tasks::{self, Done, Task, Tasks};
use toolrail_workbench::workspace::{
    self, Autosave, GrammarSource, LiveRefresh, RecentKind, Theme, Workspace,
};

pub mod conversation_view;
pub mod dialogs;
pub mod editor;
pub mod highlight;
pub mod icon;
pub mod large_text;
pub mod panes;
pub mod renderer;
pub mod run_history;
pub mod run_speed;
pub mod screenshot;
pub mod shared;
pub mod shortcuts;
pub mod stack_tree;
pub mod token_view;

pub use shared::{ERROR_SHOWN, GrammarFocus, INFO_SHOWN, MessageKind, Shared, StatusMessage};

/// The panes of the layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum PaneKind {
    /// Tools / Schema editor.
    Tools,
    /// The GBNF grammar.
    Grammar,
    /// Test input against the grammar.
    TestInput,
    /// Model generation.
    Generation,
    /// Validation of the model's output.
    Validator,
    /// Transcripts.
    Transcript,
}

impl PaneKind {
    /// The tab title.
    pub fn title(self) -> &'static str {
        match self {
            PaneKind::Tools => "Tools / Schema",
            PaneKind::Grammar => "Grammar",
            PaneKind::TestInput => "Test input",
            PaneKind::Generation => "Generation",
            PaneKind::Validator => "Validator",
            PaneKind::Transcript => "Transcript",
        }
    }
}

/// The pane structs.
#[derive(Default)]
pub struct Panes {
    /// Tools / Schema.
    pub tools: panes::tools::ToolsPane,
    /// Grammar.
    pub grammar: panes::grammar::GrammarPane,
    /// Test input.
    pub test_input: panes::test_input::TestInputPane,
    /// Generation.
    pub generation: panes::generation::GenerationPane,
    /// Validator.
    pub validator: panes::validator::ValidatorPane,
    /// Transcript.
    pub transcript: panes::transcript::TranscriptPane,
}

impl Panes {
    /// Draws one pane.
    pub fn ui(&mut self, kind: PaneKind, ui: &mut egui::Ui, shared: &mut Shared) {
        match kind {
            PaneKind::Tools => self.tools.ui(ui, shared),
            PaneKind::Grammar => self.grammar.ui(ui, shared),
            PaneKind::TestInput => self.test_input.ui(ui, shared),
            PaneKind::Generation => self.generation.ui(ui, shared),
            PaneKind::Validator => self.validator.ui(ui, shared),
            PaneKind::Transcript => self.transcript.ui(ui, shared),
        }
    }
}

/// The default layout: schema and grammar on the left, test input and generation in the middle,
/// validator and transcript on the right.
pub fn default_layout() -> egui_tiles::Tree<PaneKind> {
    let mut tiles = egui_tiles::Tiles::default();
    let tools = tiles.insert_pane(PaneKind::Tools);
    let grammar = tiles.insert_pane(PaneKind::Grammar);
    let test = tiles.insert_pane(PaneKind::TestInput);
    let generation = tiles.insert_pane(PaneKind::Generation);
    let validator = tiles.insert_pane(PaneKind::Validator);
    let transcript = tiles.insert_pane(PaneKind::Transcript);
    let left = tiles.insert_vertical_tile(vec![tools, grammar]);
    // The schema editor sits below the source and option rows: the Tools pane gets the larger
    // share so the editor is in view in small windows too.
    if let Some(egui_tiles::Tile::Container(egui_tiles::Container::Linear(linear))) =
        tiles.get_mut(left)
    {
        linear.shares.set_share(tools, 1.5);
    }
    let middle = tiles.insert_vertical_tile(vec![test, generation]);
    let right = tiles.insert_tab_tile(vec![validator, transcript]);
    let root = tiles.insert_horizontal_tile(vec![left, middle, right]);
    egui_tiles::Tree::new(egui::Id::unique("toolrail-layout"), root, tiles)
}

struct Behavior<'a> {
    panes: &'a mut Panes,
    shared: &'a mut Shared,
}

impl egui_tiles::Behavior<PaneKind> for Behavior<'_> {
    fn pane_ui(
        &mut self,
        ui: &mut egui::Ui,
        _tile_id: egui_tiles::TileId,
        pane: &mut PaneKind,
    ) -> egui_tiles::UiResponse {
        egui::Frame::new().inner_margin(6.0).show(ui, |ui| {
            self.panes.ui(*pane, ui, self.shared);
        });
        egui_tiles::UiResponse::None
    }

    fn tab_title_for_pane(&mut self, pane: &PaneKind) -> egui::WidgetText {
        pane.title().into()
    }

    fn simplification_options(&self) -> egui_tiles::SimplificationOptions {
        egui_tiles::SimplificationOptions {
            all_panes_must_have_tabs: true,
            ..Default::default()
        }
    }
}

/// How the app is started.
#[derive(Debug, Clone)]
pub struct AppOptions {
    /// The workspace file (never the user's real one in tests).
    pub workspace_path: PathBuf,
    /// Save the workspace (debounced and on exit).
    pub autosave: bool,
    /// Take a screenshot to this PNG once the UI has settled, report into the outcome, then close.
    pub screenshot: Option<(PathBuf, screenshot::Outcome)>,
    /// Wait for each analysis on the UI thread (deterministic frames for tests and screenshots).
    pub settle: bool,
    /// Replay the recorded demo run in a workspace that remembers no transcript.
    pub demo_run: bool,
}

impl AppOptions {
    /// Interactive use with this workspace file.
    pub fn interactive(workspace_path: PathBuf) -> Self {
        Self {
            workspace_path,
            autosave: true,
            screenshot: None,
            settle: false,
            demo_run: true,
        }
    }
}

/// The eframe app.
pub struct ToolrailApp {
    /// The shared state (public for tests).
    pub shared: Shared,
    /// The panes (public for tests).
    pub panes: Panes,
    tree: egui_tiles::Tree<PaneKind>,
    analyzer: Analyzer,
    /// File reads and writes (the workspace's autosave among them), off the UI thread.
    tasks: Tasks,
    /// The workspace as last handed to the autosave (`None`: saving is off).
    sent: Option<Workspace>,
    /// Another workspace is being opened: autosave hears of no change until it is.
    opening: bool,
    options: AppOptions,
    screenshot: Option<screenshot::Screenshot>,
    applied_theme: Option<Theme>,
    autosave_checked: Instant,
    /// The Conversation window (public for tests).
    pub conversation: conversation_view::ConversationView,
}

/// How often autosave compares the workspace with what is on disk.
const AUTOSAVE_CHECK: Duration = Duration::from_millis(250);

impl ToolrailApp {
    /// Creates the app: loads the workspace (or defaults, with a message if the file was bad) and
    /// starts the analysis thread.
    pub fn new(ctx: &egui::Context, options: AppOptions) -> Self {
        let loaded = workspace::load(&options.workspace_path);
        let repaint_ctx = ctx.clone();
        let repaint: Repaint = Arc::new(move || repaint_ctx.request_repaint());
        let saved_layout = loaded
            .workspace
            .layout
            .as_ref()
            .and_then(|v| serde_json::from_value(v.clone()).ok());
        let fresh_layout = saved_layout.is_none();
        let mut tree = saved_layout.unwrap_or_else(default_layout);
        let autosave = options
            .autosave
            .then(|| Autosave::new(loaded.save_path.clone(), &loaded.workspace, tasks::DELAY));
        let sent = options.autosave.then(|| loaded.workspace.clone());
        let mut shared = Shared {
            workspace: loaded.workspace,
            analysis: Arc::new(Analysis::default()),
            run: RunState::default(),
            actions: Vec::new(),
            test_cursor: usize::MAX,
            grammar_focus: GrammarFocus::default(),
            messages: Vec::new(),
            dialogs: FileDialogs::default(),
            renderer: renderer::Renderer::Unknown,
            open_conversation: false,
            pasted_output: String::new(),
            pasted_check: None,
            preview_wanted: false,
            preview: None,
            repaint: Arc::clone(&repaint),
        };
        shared.run.demo = options.demo_run;
        // Reopen the last transcript (or the demo run) now, so the first frame shows it; with
        // the default layout, its Transcript tab is brought to the front.
        shared.run.load_settings(&shared.workspace.run);
        if fresh_layout && shared.run.controller.replay().is_some() {
            tree.make_active(|_, tile| {
                matches!(tile, egui_tiles::Tile::Pane(PaneKind::Transcript))
            });
        }
        if let Some(notice) = loaded.notice {
            shared.error(notice);
        }
        let screenshot = options
            .screenshot
            .clone()
            .map(|(path, outcome)| screenshot::Screenshot::new(path, outcome));
        Self {
            shared,
            panes: Panes::default(),
            tree,
            analyzer: Analyzer::start(Duration::from_millis(150), Arc::clone(&repaint)),
            tasks: Tasks::start(autosave, repaint),
            sent,
            opening: false,
            options,
            screenshot,
            applied_theme: None,
            autosave_checked: Instant::now(),
            conversation: Default::default(),
        }
    }

    /// Creates the app in the window `cc` describes: as [`ToolrailApp::new`], and knowing the
    /// window's renderer (runs refresh the view less often where frames are drawn on the CPU).
    pub fn in_window(cc: &eframe::CreationContext<'_>, options: AppOptions) -> Self {
        let mut app = Self::new(&cc.egui_ctx, options);
        app.shared.renderer = renderer::Renderer::of(cc);
        app
    }

    /// Submits what the panes show (the workspace, the pasted output, the prompt preview while
    /// it is shown) to the analysis thread and takes any finished result.
    fn analyse(&mut self) {
        let shared = &mut self.shared;
        let mut input = AnalysisInput::from_workspace(&shared.workspace, shared.test_cursor);
        let model = shared.run.controller.model();
        input.model = model.map(|m| m.info().path.clone());
        let preview = std::mem::take(&mut shared.preview_wanted).then(|| {
            let mut setup = shared.run.setup(&shared.analysis);
            setup.user.clone_from(&shared.workspace.prompt);
            PreviewInput {
                setup,
                model: model.cloned().map(LoadedModel),
            }
        });
        let job = Job {
            input,
            pasted: shared.pasted_output.clone(),
            preview,
        };
        let submitted = self.analyzer.submit(job);
        let result = if submitted && self.options.settle {
            self.analyzer.wait_settled(Duration::from_secs(60))
        } else {
            self.analyzer.poll()
        };
        if let Some(done) = result {
            shared.analysis = Arc::new(done.analysis);
            shared.pasted_check = done.pasted.map(|check| (done.job.pasted, check));
            shared.preview = done.preview;
        }
    }

    fn apply_theme(&mut self, ctx: &egui::Context) {
        let theme = self.shared.workspace.theme;
        if self.applied_theme != Some(theme) {
            ctx.set_theme(match theme {
                Theme::Dark => egui::Theme::Dark,
                Theme::Light => egui::Theme::Light,
            });
            self.applied_theme = Some(theme);
        }
    }

    /// Keeps the window's inner size in the workspace (restored at the next start).
    fn remember_window_size(&mut self, ctx: &egui::Context) {
        // The native window's inner size; where the integration gives none, egui's view of it.
        let rect = ctx.input(|i| i.viewport().inner_rect.unwrap_or(i.viewport_rect()));
        let size = workspace::WindowSize {
            width: rect.width().round(),
            height: rect.height().round(),
        };
        if size.width >= 1.0 && size.height >= 1.0 && self.shared.workspace.window != Some(size) {
            self.shared.workspace.window = Some(size);
        }
    }

    fn store_layout(&mut self) {
        self.shared.workspace.layout = serde_json::to_value(&self.tree).ok();
    }

    /// Applies the actions this layer owns (saving, exports, pausing, chosen files) and leaves
    /// the run actions for the run state.
    fn handle_actions(&mut self) {
        let actions = std::mem::take(&mut self.shared.actions);
        for action in actions {
            match action {
                Action::SaveWorkspace => self.save_now(),
                Action::ExportGrammar => panes::grammar::export_grammar(&mut self.shared),
                Action::Pause => self.shared.run.controller.pause(),
                Action::FileChosen(request, path) => self.file_chosen(request, path),
                other => self.shared.actions.push(other),
            }
        }
    }

    /// The one place a chosen file is handled: remembered among the recent files when opened,
    /// then read or written by the file tasks (or handed to what owns it: the model loader,
    /// the replay, the Conversation window).
    fn file_chosen(&mut self, request: FileRequest, path: PathBuf) {
        let shared = &mut self.shared;
        if let Some(kind) = recent_kind(request) {
            shared.workspace.remember_recent(kind, &path);
        }
        match request {
            FileRequest::OpenWorkspace => {
                self.store_layout();
                self.opening = true;
                let current = Box::new(self.shared.workspace.clone());
                self.tasks.send(Task::OpenWorkspace { path, current });
            }
            FileRequest::SaveWorkspaceAs => {
                self.store_layout();
                let ws = self.shared.workspace.clone();
                self.tasks.send(Task::SaveWorkspaceAs(path, Box::new(ws)));
            }
            FileRequest::SaveConversation => match self.conversation.to_save() {
                Some(conversation) => self.tasks.send(Task::SaveConversation {
                    conversation: Box::new(conversation),
                    markdown: path.with_extension("md"),
                    json: path,
                }),
                None => shared.error("no conversation to save: start one first"),
            },
            FileRequest::OpenConversation => self.tasks.send(Task::OpenConversation(path)),
            FileRequest::OpenGguf => panes::generation::open_gguf(shared, path),
            FileRequest::OpenTranscript => self.tasks.send(Task::OpenTranscript(path)),
            FileRequest::OpenSchema | FileRequest::OpenTemplate | FileRequest::ImportGrammar => {
                self.tasks.send(Task::Read { path, request });
            }
            FileRequest::SaveSchema => self.tasks.send(Task::Write {
                path,
                bytes: shared.workspace.schema.text.clone().into_bytes(),
                request,
            }),
            FileRequest::ExportGrammar => self.tasks.send(Task::Write {
                path,
                bytes: shared.analysis.grammar_text.clone().into_bytes(),
                request,
            }),
            FileRequest::ExportTranscript => {
                let Some(id) = shared.run.export_target() else {
                    shared.error("no run has ended yet: nothing to export");
                    return;
                };
                match shared.run.controller.run(id) {
                    Some(run) if run.finish.is_some() => {
                        let transcript = Box::new(run.transcript());
                        let markdown = path.with_extension("md");
                        self.tasks.send(Task::ExportTranscript {
                            transcript,
                            run: id,
                            json: path,
                            markdown,
                        });
                    }
                    Some(_) => shared.error(RunError::NotFinished(id).to_string()),
                    None => shared.error(RunError::UnknownRun(id).to_string()),
                }
            }
        }
    }

    /// Takes the file tasks' outcomes (waiting for them when the app settles) and applies them.
    fn take_task_outcomes(&mut self) {
        let outcomes = if self.options.settle && self.tasks.busy() {
            self.tasks.wait_idle(Duration::from_secs(60))
        } else {
            self.tasks.poll()
        };
        for done in outcomes {
            self.task_done(done);
        }
    }

    /// Applies one file task's outcome to the state the panes show.
    fn task_done(&mut self, done: Done) {
        let shared = &mut self.shared;
        match done {
            Done::WorkspaceSaved {
                path: None,
                asked: true,
                ..
            } => shared.message("the workspace is not saved in this session (saving is off)"),
            Done::WorkspaceSaved {
                path: Some(path),
                asked: true,
                result: Ok(()),
            } => shared.message(format!("workspace saved to {}", path.display())),
            Done::WorkspaceSaved { result: Err(e), .. } => shared.error(e),
            Done::WorkspaceSaved { .. } => {}
            Done::WorkspaceSavedAs { path, result } => match result {
                Ok(()) => {
                    if self.sent.is_none() {
                        self.sent = Some(shared.workspace.clone());
                    }
                    shared
                        .workspace
                        .remember_recent(RecentKind::Workspace, &path);
                    shared.message(format!("workspace saved to {}", path.display()));
                }
                Err(e) => shared.error(e),
            },
            Done::WorkspaceOpened {
                path,
                loaded,
                saved,
            } => {
                self.opening = false;
                if let Err(e) = saved {
                    shared.error(e);
                }
                let loaded = *loaded;
                // The autosave now holds the opened file's workspace.
                self.sent = Some(loaded.workspace.clone());
                let recent = std::mem::take(&mut shared.workspace.recent);
                shared.workspace = loaded.workspace;
                // The recent files are the user's, not the file's: keep the list being used.
                shared.workspace.recent = recent;
                shared.run.settings_loaded = false;
                if let Some(layout) = (shared.workspace.layout.as_ref())
                    .and_then(|v| serde_json::from_value(v.clone()).ok())
                {
                    self.tree = layout;
                }
                match loaded.notice {
                    Some(notice) => {
                        shared.workspace.forget_recent(RecentKind::Workspace, &path);
                        shared.error(notice);
                    }
                    None => shared.message(format!("opened workspace {}", path.display())),
                }
            }
            Done::Written {
                path,
                request,
                result,
            } => match result {
                Ok(()) if request == FileRequest::SaveSchema => {
                    shared.message(format!("saved {}", path.display()));
                    shared.workspace.schema.source = path.display().to_string();
                }
                Ok(()) => shared.message(format!("exported {}", path.display())),
                Err(e) => shared.error(e),
            },
            Done::Read {
                path,
                request,
                result,
            } => match result {
                Ok(text) => match request {
                    FileRequest::OpenSchema => {
                        let schema = &mut shared.workspace.schema;
                        schema.text = text;
                        schema.source = path.display().to_string();
                        schema.disabled_tools.clear();
                    }
                    FileRequest::OpenTemplate => {
                        let template = &mut shared.workspace.template;
                        template.text = text;
                        template.file = Some(path);
                        template.on = true;
                    }
                    FileRequest::ImportGrammar => {
                        shared.workspace.grammar.text = text;
                        (shared.workspace).set_grammar_source(GrammarSource::HandEdited);
                        shared.message(format!("imported {}", path.display()));
                    }
                    _ => {}
                },
                Err(e) => {
                    if let Some(kind) = recent_kind(request) {
                        shared.workspace.forget_recent(kind, &path);
                    }
                    shared.error(e);
                }
            },
            Done::TranscriptExported {
                run,
                json,
                markdown,
                result,
            } => match result {
                Ok(()) => {
                    shared.message(format!(
                        "Run {run} written to {} and {}",
                        json.display(),
                        markdown.display()
                    ));
                    shared.run.settings.last_transcript = Some(json);
                }
                Err(e) => shared.error(e),
            },
            Done::ConversationSaved {
                json,
                markdown,
                result,
            } => match result {
                Ok(()) => shared.message(format!(
                    "conversation written to {} and {}",
                    json.display(),
                    markdown.display()
                )),
                Err(e) => shared.error(e),
            },
            Done::TranscriptOpened { path, result } => {
                panes::transcript::opened(shared, &path, result.map(|replay| *replay));
            }
            Done::ConversationOpened { path, result } => {
                self.conversation.opened(&path, result, shared);
            }
        }
    }

    /// Saves the workspace now (Ctrl+S, closing); the outcome comes back as a task's.
    fn save_now(&mut self) {
        self.store_layout();
        let ws = self.shared.workspace.clone();
        if self.sent.is_some() {
            self.sent = Some(ws.clone());
        }
        self.tasks.send(Task::SaveWorkspace(Box::new(ws)));
    }

    /// Hands the workspace to the autosave when it changed (looked at every
    /// [`AUTOSAVE_CHECK`]: comparing a large schema on every frame would cost frame time); the
    /// file task writes it once it has settled.
    fn autosave(&mut self, ctx: &egui::Context) {
        if self.sent.is_none() || self.opening {
            return;
        }
        let now = Instant::now();
        if now.duration_since(self.autosave_checked) < AUTOSAVE_CHECK {
            ctx.request_repaint_after(AUTOSAVE_CHECK);
            return;
        }
        self.autosave_checked = now;
        self.store_layout();
        if self.sent.as_ref() != Some(&self.shared.workspace) {
            let ws = self.shared.workspace.clone();
            self.sent = Some(ws.clone());
            self.tasks.send(Task::WorkspaceChanged(Box::new(ws)));
        }
    }
}

impl ToolrailApp {
    /// One frame's logic, before any pane draws: theme, shortcuts, actions, the run controller,
    /// the analysis job, autosave and the screenshot. (eframe calls it through
    /// [`eframe::App::logic`]; tests that draw single panes call it directly.)
    pub fn tick(&mut self, ctx: &egui::Context) {
        self.apply_theme(ctx);
        self.remember_window_size(ctx);
        let pace =
            (self.shared.workspace.live_refresh).interval(self.shared.renderer.is_software());
        self.shared.run.controller.refresh_pace().set(pace);
        let now = self.shared.situation();
        shortcuts::collect(ctx, &now, &mut self.shared.actions);
        if let Some((request, path)) = self.shared.dialogs.poll() {
            self.shared.queue(Action::FileChosen(request, path));
        }
        self.handle_actions();
        self.take_task_outcomes();
        // A shown status message is cleared when it expires, without waiting for input.
        if let Some(left) = self
            .shared
            .current_message(Instant::now())
            .and_then(|m| m.remaining(Instant::now()))
        {
            ctx.request_repaint_after(left + Duration::from_millis(50));
        }
        let repaint = self.shared.repaint_handle();
        let Shared {
            run,
            actions,
            analysis,
            ..
        } = &mut self.shared;
        run.logic(actions, analysis, &repaint);
        if let Some(due) = run.frame_due {
            ctx.request_repaint_after(due);
        }
        // Actions nobody handled this frame are dropped, so they do not fire later by surprise.
        self.shared.actions.clear();
        self.analyse();
        self.autosave(ctx);
        if let Some(shot) = &mut self.screenshot {
            shot.logic(ctx);
        }
    }

    /// Draws one pane (tests snapshot panes one by one).
    pub fn pane_ui(&mut self, kind: PaneKind, ui: &mut egui::Ui) {
        self.panes.ui(kind, ui, &mut self.shared);
    }

    /// Saves the workspace now and waits for the file to be written (what closing the app
    /// does).
    pub fn save(&mut self) {
        self.save_now();
        for done in self.tasks.wait_idle(Duration::from_secs(30)) {
            self.task_done(done);
        }
    }
}

impl eframe::App for ToolrailApp {
    fn logic(&mut self, ctx: &egui::Context, _frame: &mut eframe::Frame) {
        self.tick(ctx);
    }

    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        egui::Panel::top("toolrail-menu").show(ui, |ui| {
            menu_bar(ui, &mut self.shared);
        });
        egui::Panel::bottom("toolrail-status").show(ui, |ui| {
            status_bar(ui, &self.shared);
        });
        egui::CentralPanel::default().show(ui, |ui| {
            let mut behavior = Behavior {
                panes: &mut self.panes,
                shared: &mut self.shared,
            };
            self.tree.ui(&mut behavior, ui);
        });
        if let Some((request, path)) = self.shared.dialogs.prompt_ui(ui.ctx()) {
            self.shared.file_chosen(request, path);
        }
        self.conversation.open |= std::mem::take(&mut self.shared.open_conversation);
        self.conversation.show(ui.ctx(), &mut self.shared);
    }

    fn on_exit(&mut self) {
        self.save();
        self.shared.run.shutdown();
    }
}

/// What the View menu's live refresh choices do.
const LIVE_REFRESH_HELP: &str = "How often the window redraws while tokens stream in. Every \
    redraw shows all tokens since the last one. Where no GPU draws the window (software \
    rendering), each redraw takes CPU time from the model: Auto then redraws once a second.";

fn menu_bar(ui: &mut egui::Ui, shared: &mut Shared) {
    egui::MenuBar::new().ui(ui, |ui| {
        ui.menu_button("File", |ui| {
            if ui.button("Open tool set or schema…").clicked() {
                panes::tools::pick_schema(shared);
            }
            ui.menu_button("Open recent", |ui| recent_menu(ui, shared));
            ui.separator();
            for action in [
                Action::ExportGrammar,
                Action::ExportTranscript,
                Action::SaveWorkspace,
            ] {
                action_item(ui, shared, action);
            }
            if ui.button("Save workspace as…").clicked() {
                shared.save_file(
                    FileRequest::SaveWorkspaceAs,
                    rfd::AsyncFileDialog::new()
                        .add_filter("Workspace", &["json"])
                        .set_file_name("workspace.json"),
                );
            }
            if ui.button("Open workspace…").clicked() {
                shared.pick_file(
                    FileRequest::OpenWorkspace,
                    rfd::AsyncFileDialog::new().add_filter("Workspace", &["json"]),
                );
            }
        });
        ui.menu_button("Run", |ui| {
            for action in [
                Action::Run,
                Action::Step,
                Action::Continue,
                Action::Pause,
                Action::Cancel,
            ] {
                action_item(ui, shared, action);
            }
            ui.separator();
            if ui
                .button("Conversation…")
                .on_hover_text(
                    "A multi-turn run: tool results and validator feedback go back to the model",
                )
                .clicked()
            {
                shared.open_conversation = true;
            }
        });
        ui.menu_button("View", |ui| {
            let theme = &mut shared.workspace.theme;
            ui.radio_value(theme, Theme::Dark, "Dark theme");
            ui.radio_value(theme, Theme::Light, "Light theme");
            ui.separator();
            ui.label("Refresh while generating")
                .on_hover_text(LIVE_REFRESH_HELP);
            for choice in LiveRefresh::ALL {
                ui.radio_value(&mut shared.workspace.live_refresh, choice, choice.label())
                    .on_hover_text(LIVE_REFRESH_HELP);
            }
        });
        ui.menu_button("Help", |ui| {
            ui.label(egui::RichText::new("Keyboard shortcuts").strong());
            egui::Grid::new("help-shortcuts")
                .num_columns(2)
                .striped(true)
                .show(ui, |ui| {
                    for (keys, what) in shortcuts::help(ui.ctx()) {
                        ui.label(egui::RichText::new(keys).monospace());
                        ui.label(what);
                        ui.end_row();
                    }
                });
        });
    });
}

/// A menu item for `action`: its label and shortcut, greyed out when the action is not
/// enabled now (its shortcut then does nothing either); a click queues it.
fn action_item(ui: &mut egui::Ui, shared: &mut Shared, action: Action) {
    let mut button = egui::Button::new(action.label());
    let keys = shortcuts::text(ui.ctx(), &action);
    if !keys.is_empty() {
        button = button.shortcut_text(keys);
    }
    let mut response = ui.add_enabled(shared.enabled(&action), button);
    if action == Action::Pause {
        response = response.on_hover_text("Pause the running generation after its current token");
    }
    if response.clicked() {
        shared.queue(action);
    }
}

/// The kind of recent file a request opens (`None`: it writes, or is not remembered).
fn recent_kind(request: FileRequest) -> Option<RecentKind> {
    match request {
        FileRequest::OpenGguf => Some(RecentKind::Model),
        FileRequest::OpenSchema => Some(RecentKind::Schema),
        FileRequest::OpenTranscript => Some(RecentKind::Transcript),
        FileRequest::ImportGrammar => Some(RecentKind::Grammar),
        FileRequest::OpenWorkspace => Some(RecentKind::Workspace),
        _ => None,
    }
}

/// The recent files, newest first; clicking one opens it again as what it was opened as.
fn recent_menu(ui: &mut egui::Ui, shared: &mut Shared) {
    if shared.workspace.recent.is_empty() {
        ui.label(egui::RichText::new("no recent files").weak());
        return;
    }
    let mut chosen = None;
    for entry in &shared.workspace.recent {
        let kind = match entry.kind {
            RecentKind::Schema => "tools",
            RecentKind::Grammar => "grammar",
            RecentKind::Transcript => "transcript",
            RecentKind::Model => "model",
            RecentKind::Workspace => "workspace",
        };
        let name = entry.path.file_name().map_or_else(
            || entry.path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        if ui
            .button(format!("{name}  ({kind})"))
            .on_hover_text(entry.path.display().to_string())
            .clicked()
        {
            chosen = Some(entry.clone());
        }
    }
    if let Some(entry) = chosen {
        let request = match entry.kind {
            RecentKind::Schema => FileRequest::OpenSchema,
            RecentKind::Grammar => FileRequest::ImportGrammar,
            RecentKind::Transcript => FileRequest::OpenTranscript,
            RecentKind::Model => FileRequest::OpenGguf,
            RecentKind::Workspace => FileRequest::OpenWorkspace,
        };
        shared.file_chosen(request, entry.path);
    }
}

fn status_bar(ui: &mut egui::Ui, shared: &Shared) {
    ui.horizontal(|ui| {
        let a = &shared.analysis;
        let grammar = if a.grammar.is_some() {
            format!(
                "grammar: {} rules",
                a.grammar.as_ref().map_or(0, |g| g.rule_count())
            )
        } else {
            "grammar: none".to_owned()
        };
        ui.label(grammar).on_hover_text(format!(
            "last analysis: grammar {:.1} ms, test input {:.1} ms",
            a.grammar_time.as_secs_f64() * 1e3,
            a.test_time.as_secs_f64() * 1e3
        ));
        // where the last in-process run decoded: its threads and why, its backend
        if let Some(settings) = shared
            .run
            .controller
            .latest()
            .and_then(|run| run.settings.as_ref())
            && let Some(choice) = settings.thread_choice
        {
            ui.separator();
            let placement = settings
                .placement
                .as_ref()
                .map_or_else(|| "CPU".to_owned(), |p| p.backend());
            ui.label(format!("{placement}, {}", choice.count()))
                .on_hover_text(format!(
                    "the last run decoded on {}; {}",
                    settings
                        .placement
                        .as_ref()
                        .map_or_else(|| "the CPU".to_owned(), |p| p.summary()),
                    choice.describe()
                ));
        }
        if let Some(current) = shared.current_message(Instant::now()) {
            ui.separator();
            let text = egui::RichText::new(&current.text);
            let text = match current.kind {
                MessageKind::Info => text,
                MessageKind::Error => text.color(ui.visuals().error_fg_color),
            };
            ui.add(egui::Label::new(text).truncate())
                .on_hover_ui(|ui| message_history(ui, shared));
        } else if !shared.messages.is_empty() {
            ui.separator();
            ui.label(egui::RichText::new("messages").weak())
                .on_hover_ui(|ui| message_history(ui, shared));
        }
    });
}

/// The recent status messages, newest first.
fn message_history(ui: &mut egui::Ui, shared: &Shared) {
    for m in shared.messages.iter().rev() {
        let text = egui::RichText::new(&m.text);
        ui.label(match m.kind {
            MessageKind::Info => text,
            MessageKind::Error => text.color(ui.visuals().error_fg_color),
        });
    }
}
