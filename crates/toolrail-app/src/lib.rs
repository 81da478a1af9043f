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
use toolrail_workbench::analysis::{Analysis, AnalysisInput, Analyzer};
use toolrail_workbench::run::{RunSettings, RunState};
use toolrail_workbench::workspace::{self, Autosave, LiveRefresh, RecentKind, Theme, Workspace};

pub mod conversation_view;
pub mod dialogs;
pub mod editor;
pub mod highlight;
pub mod icon;
pub mod panes;
pub mod renderer;
pub mod run_history;
pub mod run_speed;
pub mod screenshot;
pub mod shortcuts;
pub mod stack_tree;
pub mod token_view;

/// How the grammar pane should show some grammar spans (stacks of the test input or of a token).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GrammarFocus {
    /// Byte ranges of the grammar text to highlight (e.g. the elements on the stacks).
    pub highlights: Vec<std::ops::Range<usize>>,
    /// A byte range to select and scroll to once (a clicked finding or frame).
    pub select: Option<std::ops::Range<usize>>,
    /// The grammar text these ranges belong to (ignored when the grammar has changed since).
    pub grammar_text: Arc<str>,
}

/// Whether a status message reports an error (shown longer, in the error colour).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageKind {
    /// Something done (saved, exported): shown for [`INFO_SHOWN`].
    Info,
    /// Something that failed: shown for [`ERROR_SHOWN`].
    Error,
}

/// How long an info message stays in the status bar.
pub const INFO_SHOWN: Duration = Duration::from_secs(8);
/// How long an error message stays in the status bar.
pub const ERROR_SHOWN: Duration = Duration::from_secs(30);

/// One status bar message, with when it was given (messages clear themselves: a message that
/// stays after what it reports has changed misleads).
#[derive(Debug, Clone)]
pub struct StatusMessage {
    /// The words.
    pub text: String,
    /// Info or error.
    pub kind: MessageKind,
    /// When it was given.
    pub at: Instant,
}

impl StatusMessage {
    /// How long it is still shown at `now` (`None`: expired).
    pub fn remaining(&self, now: Instant) -> Option<Duration> {
        let shown = match self.kind {
            MessageKind::Info => INFO_SHOWN,
            MessageKind::Error => ERROR_SHOWN,
        };
        shown.checked_sub(now.duration_since(self.at))
    }
}

/// What every pane can read and change.
pub struct Shared {
    /// The persisted workspace (edit it directly; the app saves and re-analyses on change).
    pub workspace: Workspace,
    /// The latest finished analysis (tool set, grammar, findings, test verdict and stacks).
    pub analysis: Arc<Analysis>,
    /// The run controller's state (Generation, Validator, Transcript panes).
    pub run: RunState,
    /// Actions queued this frame (shortcuts, menus, buttons); taken by whoever handles them.
    pub actions: Vec<Action>,
    /// The byte offset of the cursor in the test input (whose stacks are shown).
    pub test_cursor: usize,
    /// Grammar spans to highlight or select in the grammar pane.
    pub grammar_focus: GrammarFocus,
    /// Messages for the status bar (outcomes and errors of saves, loads, exports), newest last;
    /// each is shown until it expires (see [`StatusMessage`]) and listed on hover after.
    pub messages: Vec<StatusMessage>,
    /// The file dialog that may be open (answers arrive on a later frame).
    pub dialogs: FileDialogs,
    /// A workspace file to switch to or save as, handled by the app (which owns autosave).
    pub workspace_file: Option<(FileRequest, PathBuf)>,
    /// What draws the window's frames (decides the live refresh's pace under Auto).
    pub renderer: renderer::Renderer,
    /// Run ▸ Conversation… was chosen: the app opens the Conversation window.
    pub open_conversation: bool,
    /// A conversation file chosen to save to or open, handled by the Conversation window.
    pub conversation_file: Option<(FileRequest, PathBuf)>,
    repaint: Repaint,
}

impl Shared {
    /// Asks for another frame (from any thread, through [`Shared::repaint_handle`]).
    pub fn request_repaint(&self) {
        (self.repaint)();
    }

    /// A handle background work can keep to ask for frames.
    pub fn repaint_handle(&self) -> Repaint {
        Arc::clone(&self.repaint)
    }

    /// Queues an action.
    pub fn queue(&mut self, action: Action) {
        if !self.actions.contains(&action) {
            self.actions.push(action);
        }
    }

    /// Opens a dialog to pick an existing file for `request`, off the UI thread; the answer is
    /// handled on the frame it arrives.
    pub fn pick_file(&mut self, request: FileRequest, dialog: rfd::AsyncFileDialog) {
        let repaint = self.repaint_handle();
        if !self.dialogs.pick(request, dialog, move || repaint()) {
            self.message("a file dialog is already open");
        }
    }

    /// Opens a dialog to choose where to save for `request` (see [`Shared::pick_file`]).
    pub fn save_file(&mut self, request: FileRequest, dialog: rfd::AsyncFileDialog) {
        let repaint = self.repaint_handle();
        if !self.dialogs.save(request, dialog, move || repaint()) {
            self.message("a file dialog is already open");
        }
    }

    /// Does what the chosen file was asked for (files opened go to the recent files).
    pub fn file_chosen(&mut self, request: FileRequest, path: PathBuf) {
        let recent = match request {
            FileRequest::OpenGguf => Some(RecentKind::Model),
            FileRequest::OpenSchema => Some(RecentKind::Schema),
            FileRequest::OpenTranscript => Some(RecentKind::Transcript),
            FileRequest::ImportGrammar => Some(RecentKind::Grammar),
            FileRequest::OpenWorkspace => Some(RecentKind::Workspace),
            _ => None,
        };
        if let Some(kind) = recent {
            self.workspace.remember_recent(kind, &path);
        }
        match request {
            FileRequest::OpenWorkspace | FileRequest::SaveWorkspaceAs => {
                self.workspace_file = Some((request, path));
            }
            FileRequest::SaveConversation | FileRequest::OpenConversation => {
                self.conversation_file = Some((request, path));
            }
            FileRequest::OpenGguf => panes::generation::open_gguf(self, path),
            FileRequest::OpenSchema => panes::tools::open_schema(self, path),
            FileRequest::OpenTemplate => panes::tools::open_template(self, path),
            FileRequest::SaveSchema => panes::tools::save_schema(self, path),
            FileRequest::OpenTranscript => panes::transcript::open_from(self, &path),
            FileRequest::ExportTranscript => {
                panes::transcript::export_to(self, &path);
            }
            FileRequest::ImportGrammar => panes::grammar::import_grammar(self, path),
            FileRequest::ExportGrammar => panes::grammar::export_grammar_to(self, &path),
        }
    }

    /// Reads the run settings from the workspace once, and writes them back when they change.
    pub fn sync_run_settings(&mut self, saved: &mut Option<RunSettings>) {
        if !self.run.settings_loaded {
            self.run.load_settings(&self.workspace.run);
        }
        if saved.as_ref() != Some(&self.run.settings) {
            self.workspace.run = self.run.settings.clone();
            *saved = Some(self.run.settings.clone());
        }
        for message in std::mem::take(&mut self.run.messages) {
            self.error(message);
        }
    }

    /// Shows a message in the status bar (for [`INFO_SHOWN`]).
    pub fn message(&mut self, text: impl Into<String>) {
        self.push_message(text.into(), MessageKind::Info);
    }

    /// Shows an error in the status bar (for [`ERROR_SHOWN`], in the error colour).
    pub fn error(&mut self, text: impl Into<String>) {
        self.push_message(text.into(), MessageKind::Error);
    }

    fn push_message(&mut self, text: String, kind: MessageKind) {
        self.messages.push(StatusMessage {
            text,
            kind,
            at: Instant::now(),
        });
        if self.messages.len() > 20 {
            self.messages.remove(0);
        }
    }

    /// The message the status bar shows now (the newest, unless it has expired).
    pub fn current_message(&self, now: Instant) -> Option<&StatusMessage> {
        self.messages.last().filter(|m| m.remaining(now).is_some())
    }

    /// Highlights these grammar byte ranges (and optionally selects one) in the grammar pane.
    pub fn focus_grammar(
        &mut self,
        highlights: Vec<std::ops::Range<usize>>,
        select: Option<std::ops::Range<usize>>,
    ) {
        self.grammar_focus = GrammarFocus {
            highlights,
            select,
            grammar_text: Arc::from(self.analysis.grammar_text.as_str()),
        };
    }
}

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
    autosave: Option<Autosave>,
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
        let autosave = options.autosave.then(|| {
            Autosave::new(
                loaded.save_path.clone(),
                &loaded.workspace,
                Duration::from_secs(1),
            )
        });
        let mut shared = Shared {
            workspace: loaded.workspace,
            analysis: Arc::new(Analysis::default()),
            run: RunState::default(),
            actions: Vec::new(),
            test_cursor: usize::MAX,
            grammar_focus: GrammarFocus::default(),
            messages: Vec::new(),
            dialogs: FileDialogs::default(),
            workspace_file: None,
            renderer: renderer::Renderer::Unknown,
            open_conversation: false,
            conversation_file: None,
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
            analyzer: Analyzer::start(Duration::from_millis(150), repaint),
            autosave,
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

    /// Submits the current workspace to the analysis thread and takes any finished analysis.
    fn analyse(&mut self) {
        let mut input =
            AnalysisInput::from_workspace(&self.shared.workspace, self.shared.test_cursor);
        input.model = (self.shared.run.controller.model()).map(|m| m.info().path.clone());
        let submitted = self.analyzer.submit(input);
        let result = if submitted && self.options.settle {
            self.analyzer.wait_settled(Duration::from_secs(60))
        } else {
            self.analyzer.poll()
        };
        if let Some(analysis) = result {
            self.shared.analysis = Arc::new(analysis);
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

    /// Handles the actions this layer owns (workspace saving, grammar export).
    fn handle_actions(&mut self) {
        let actions = std::mem::take(&mut self.shared.actions);
        for action in actions {
            match action {
                Action::SaveWorkspace => self.save_now(),
                Action::ExportGrammar => {
                    panes::grammar::export_grammar(&mut self.shared);
                }
                other => self.shared.actions.push(other),
            }
        }
    }

    /// Opens another workspace file (saving this one first), or saves this one under a new
    /// name; either way autosave writes to the new file from then on.
    fn workspace_file(&mut self, request: FileRequest, path: &std::path::Path) {
        self.store_layout();
        match request {
            FileRequest::OpenWorkspace => {
                self.save_now();
                let recent = self.shared.workspace.recent.clone();
                let loaded = workspace::load(path);
                self.shared.workspace = loaded.workspace;
                // The recent files are the user's, not the file's: keep the list being used.
                self.shared.workspace.recent = recent;
                self.shared.run.settings_loaded = false;
                if let Some(layout) = self
                    .shared
                    .workspace
                    .layout
                    .as_ref()
                    .and_then(|v| serde_json::from_value(v.clone()).ok())
                {
                    self.tree = layout;
                }
                self.autosave = Some(Autosave::new(
                    loaded.save_path,
                    &self.shared.workspace,
                    Duration::from_secs(1),
                ));
                match loaded.notice {
                    Some(notice) => self.shared.error(notice),
                    None => self
                        .shared
                        .message(format!("opened workspace {}", path.display())),
                }
            }
            FileRequest::SaveWorkspaceAs => {
                let mut auto = Autosave::new(
                    path.to_path_buf(),
                    &Workspace::default(),
                    Duration::from_secs(1),
                );
                match auto.flush(&self.shared.workspace) {
                    Ok(()) => {
                        self.autosave = Some(auto);
                        self.shared
                            .workspace
                            .remember_recent(RecentKind::Workspace, path);
                        self.shared
                            .message(format!("workspace saved to {}", path.display()));
                    }
                    Err(e) => self.shared.error(e.to_string()),
                }
            }
            _ => {}
        }
    }

    /// Saves the workspace now (Ctrl+S, closing) and says where (or why not).
    fn save_now(&mut self) {
        self.store_layout();
        match &mut self.autosave {
            Some(auto) => match auto.flush(&self.shared.workspace) {
                Ok(()) => {
                    let path = auto.path().display().to_string();
                    self.shared.message(format!("workspace saved to {path}"));
                }
                Err(e) => self.shared.error(e.to_string()),
            },
            None => self
                .shared
                .message("the workspace is not saved in this session (saving is off)"),
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
        shortcuts::collect(ctx, &mut self.shared.actions);
        self.handle_actions();
        if let Some((request, path)) = self.shared.dialogs.poll() {
            self.shared.file_chosen(request, path);
        }
        if let Some((request, path)) = self.shared.workspace_file.take() {
            self.workspace_file(request, &path);
        }
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
        // Autosave looks at the workspace at most every 250 ms (serialising a large schema on
        // every frame would cost frame time); a change is written once it has settled for 1 s.
        let now = Instant::now();
        if let Some(auto) = &mut self.autosave {
            if now.duration_since(self.autosave_checked) >= AUTOSAVE_CHECK {
                self.autosave_checked = now;
                self.shared.workspace.layout = serde_json::to_value(&self.tree).ok();
                if let Err(e) = auto.tick(&self.shared.workspace, now) {
                    self.shared.error(e.to_string());
                }
                if auto.pending() {
                    ctx.request_repaint_after(Duration::from_millis(500));
                }
            } else {
                ctx.request_repaint_after(AUTOSAVE_CHECK);
            }
        }
        if let Some(shot) = &mut self.screenshot {
            shot.logic(ctx);
        }
    }

    /// Draws one pane (tests snapshot panes one by one).
    pub fn pane_ui(&mut self, kind: PaneKind, ui: &mut egui::Ui) {
        self.panes.ui(kind, ui, &mut self.shared);
    }

    /// Saves the workspace now (what closing the app does).
    pub fn save(&mut self) {
        self.save_now();
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
        self.save_now();
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
                let button = egui::Button::new(action.label())
                    .shortcut_text(shortcuts::text(ui.ctx(), action));
                if ui.add(button).clicked() {
                    shared.queue(action);
                }
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
            for action in [Action::Run, Action::Step, Action::Continue] {
                let button = egui::Button::new(action.label())
                    .shortcut_text(shortcuts::text(ui.ctx(), action));
                if ui.add(button).clicked() {
                    shared.queue(action);
                }
            }
            let running = matches!(
                shared.run.controller.active().map(|r| r.phase),
                Some(toolrail_workbench::run::RunPhase::Running)
            );
            if ui
                .add_enabled(running, egui::Button::new("Pause"))
                .on_hover_text("Pause the running generation after its current token")
                .clicked()
            {
                shared.run.controller.pause();
            }
            let action = Action::Cancel;
            let button =
                egui::Button::new(action.label()).shortcut_text(shortcuts::text(ui.ctx(), action));
            if ui.add(button).clicked() {
                shared.queue(action);
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
