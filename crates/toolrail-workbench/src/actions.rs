//! What the user can ask the app to do, from anywhere (keyboard shortcuts, menus, buttons, a
//! file dialog's answer): one [`Action`] enum. Panes and menus only queue actions; the shell
//! applies them once per frame (the run controller takes the run ones). Whether an action can
//! be taken now is [`Action::enabled`], which the menu items, the buttons and the shortcuts all
//! ask, so that a disabled menu item and its shortcut agree.

use std::path::PathBuf;

use crate::paths::PathUse;

/// A command of the app.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Action {
    /// Start a generation run (constrained by the current grammar).
    Run,
    /// Generate one token.
    Step,
    /// Continue a paused run to its end.
    Continue,
    /// Pause the running generation after its current token.
    Pause,
    /// Cancel the current run.
    Cancel,
    /// Export the current grammar as a `.gbnf` file (asks where).
    ExportGrammar,
    /// Export the current transcript, JSON and Markdown (asks where).
    ExportTranscript,
    /// Save the workspace now.
    SaveWorkspace,
    /// A file was chosen for what a dialog (or the recent files) was opened for.
    FileChosen(FileRequest, PathBuf),
}

/// What decides which actions can be taken now (read from the run state and the analysis by
/// the app, once per frame).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Situation {
    /// A model is loading (a run cannot start until it is ready).
    pub loading: bool,
    /// A run is under way (running, queued or paused).
    pub active: bool,
    /// The active run is paused.
    pub paused: bool,
    /// The active run is running (or queued).
    pub running: bool,
    /// There is a grammar in force to export.
    pub grammar: bool,
    /// A run of this session has ended, to export.
    pub exportable_run: bool,
}

impl Action {
    /// Every action that has a menu item and may have a shortcut, in menu order.
    pub const ALL: [Action; 8] = [
        Action::Run,
        Action::Step,
        Action::Continue,
        Action::Pause,
        Action::Cancel,
        Action::ExportGrammar,
        Action::ExportTranscript,
        Action::SaveWorkspace,
    ];

    /// A short label for menus and tooltips.
    pub fn label(&self) -> &'static str {
        match self {
            Action::Run => "Run",
            Action::Step => "Step",
            Action::Continue => "Continue",
            Action::Pause => "Pause",
            Action::Cancel => "Cancel",
            Action::ExportGrammar => "Export grammar…",
            Action::ExportTranscript => "Export transcript…",
            Action::SaveWorkspace => "Save workspace",
            Action::FileChosen(request, _) => request.title(),
        }
    }

    /// Whether the action can be taken in `now` (menus grey it out, shortcuts do nothing).
    /// Step is always enabled: a press while the model loads or a step is being taken is
    /// counted and taken when the run pauses, and one during a free run says to pause first.
    pub fn enabled(&self, now: &Situation) -> bool {
        match self {
            Action::Run => !now.loading && !now.active,
            Action::Continue => now.paused,
            Action::Pause => now.running,
            Action::Cancel => now.active,
            Action::ExportGrammar => now.grammar,
            Action::ExportTranscript => now.exportable_run,
            Action::Step | Action::SaveWorkspace | Action::FileChosen(..) => true,
        }
    }
}

/// What a file dialog was opened for: decides what happens to the chosen path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileRequest {
    /// Load a GGUF model.
    OpenGguf,
    /// Open a tool set or JSON Schema into the editor.
    OpenSchema,
    /// Save the editor's JSON.
    SaveSchema,
    /// Open a transcript for replay.
    OpenTranscript,
    /// Export the transcript (JSON and Markdown).
    ExportTranscript,
    /// Import a `.gbnf` as the hand-edited grammar.
    ImportGrammar,
    /// Export the grammar in force as `.gbnf`.
    ExportGrammar,
    /// Switch to another workspace file.
    OpenWorkspace,
    /// Save the workspace to a new file and keep saving there.
    SaveWorkspaceAs,
    /// Save the Conversation window's conversation (JSON; Markdown beside it).
    SaveConversation,
    /// Open a saved conversation into the Conversation window (and replay it).
    OpenConversation,
    /// Open a chat template file for the llama.cpp template source.
    OpenTemplate,
}

impl FileRequest {
    /// Whether the path is read (an existing file) or written.
    pub fn path_use(self) -> PathUse {
        match self {
            FileRequest::OpenGguf
            | FileRequest::OpenSchema
            | FileRequest::OpenTranscript
            | FileRequest::ImportGrammar
            | FileRequest::OpenWorkspace
            | FileRequest::OpenConversation
            | FileRequest::OpenTemplate => PathUse::Open,
            FileRequest::SaveSchema
            | FileRequest::ExportTranscript
            | FileRequest::ExportGrammar
            | FileRequest::SaveWorkspaceAs
            | FileRequest::SaveConversation => PathUse::Save,
        }
    }

    /// What the user is asked for, as a title.
    pub fn title(self) -> &'static str {
        match self {
            FileRequest::OpenGguf => "Open a GGUF model",
            FileRequest::OpenSchema => "Open a tool set or JSON Schema",
            FileRequest::SaveSchema => "Save the editor's JSON",
            FileRequest::OpenTranscript => "Open a transcript",
            FileRequest::ExportTranscript => "Export the transcript (JSON; Markdown beside it)",
            FileRequest::ImportGrammar => "Import a .gbnf grammar",
            FileRequest::ExportGrammar => "Export the grammar as .gbnf",
            FileRequest::OpenWorkspace => "Open a workspace",
            FileRequest::SaveWorkspaceAs => "Save the workspace as",
            FileRequest::SaveConversation => "Save the conversation (JSON; Markdown beside it)",
            FileRequest::OpenConversation => "Open a conversation",
            FileRequest::OpenTemplate => "Open a chat template (.jinja)",
        }
    }

    /// The file name a save starts from.
    pub fn default_name(self) -> &'static str {
        match self {
            FileRequest::SaveSchema => "tools.json",
            FileRequest::ExportTranscript => "transcript.json",
            FileRequest::ExportGrammar => "grammar.gbnf",
            FileRequest::SaveWorkspaceAs => "workspace.json",
            FileRequest::SaveConversation => "conversation.json",
            _ => "",
        }
    }
}
