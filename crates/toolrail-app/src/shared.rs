//! What every pane shares, the state the shell owns and hands to each pane while it draws:
//! the workspace, the latest analysis, the run state, the action queue, the file dialogs, the
//! status messages and the grammar focus. Kept apart from the shell (`lib.rs`), which names the
//! panes, so that the panes and the shell never import each other.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::dialogs::{FileDialogs, FileRequest};
use crate::renderer;
use toolrail_workbench::Repaint;
use toolrail_workbench::actions::{Action, Situation};
use toolrail_workbench::analysis::Analysis;
use toolrail_workbench::pasted::PastedCheck;
use toolrail_workbench::run::PromptPreview;
use toolrail_workbench::run::{LoadState, RunPhase, RunSettings, RunState};
use toolrail_workbench::workspace::Workspace;

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
    /// The file dialog that may be open (its answer is queued as [`Action::FileChosen`]).
    pub dialogs: FileDialogs,
    /// What draws the window's frames (decides the live refresh's pace under Auto).
    pub renderer: renderer::Renderer,
    /// Run ▸ Conversation… was chosen: the app opens the Conversation window.
    pub open_conversation: bool,
    /// A model output pasted into the Validator pane (checked on the analysis thread).
    pub pasted_output: String,
    /// The verdicts on a pasted output, with the text they are for.
    pub pasted_check: Option<(String, PastedCheck)>,
    /// Set by the Generation pane on every frame it shows the prompt preview: the next
    /// analysis builds the preview too.
    pub preview_wanted: bool,
    /// The prompt preview from the analysis thread (when it was wanted), or why there is none.
    pub preview: Option<Result<PromptPreview, String>>,
    pub(crate) repaint: Repaint,
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

    /// Queues what a chosen file was asked for (the shell applies it on the next frame, in
    /// [`ToolrailApp`]'s one place for chosen files).
    pub fn file_chosen(&mut self, request: FileRequest, path: PathBuf) {
        self.queue(Action::FileChosen(request, path));
        self.request_repaint();
    }

    /// What decides which actions can be taken now ([`Action::enabled`]).
    pub fn situation(&self) -> Situation {
        let controller = &self.run.controller;
        let active = controller.active().map(|r| r.phase);
        Situation {
            loading: matches!(controller.load_state(), LoadState::Loading { .. }),
            active: active.is_some(),
            paused: matches!(active, Some(RunPhase::Paused { .. })),
            running: matches!(active, Some(RunPhase::Running | RunPhase::Queued)),
            grammar: !self.analysis.grammar_text.is_empty(),
            exportable_run: self.run.export_target().is_some(),
        }
    }

    /// Whether `action` can be taken now (buttons, menu items and shortcuts all ask this).
    pub fn enabled(&self, action: &Action) -> bool {
        action.enabled(&self.situation())
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
        if let Some(failed) = self.run.failed_gguf.take() {
            (self.workspace)
                .forget_recent(toolrail_workbench::workspace::RecentKind::Model, &failed);
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
