//! Commands the user can give from anywhere (keyboard shortcuts, menu, buttons). The UI queues
//! them in [`toolrail_app::Shared::actions`]; the workbench and the run controller take out the ones
//! they handle, once per frame.

/// A command of the app.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Start a generation run (constrained by the current grammar).
    Run,
    /// Generate one token.
    Step,
    /// Continue a paused run to its end.
    Continue,
    /// Cancel the current run.
    Cancel,
    /// Export the current grammar as a `.gbnf` file.
    ExportGrammar,
    /// Export the current transcript (JSON and Markdown).
    ExportTranscript,
    /// Save the workspace now.
    SaveWorkspace,
}

impl Action {
    /// Every action, in menu order.
    pub const ALL: [Action; 7] = [
        Action::Run,
        Action::Step,
        Action::Continue,
        Action::Cancel,
        Action::ExportGrammar,
        Action::ExportTranscript,
        Action::SaveWorkspace,
    ];

    /// A short label for menus and tooltips.
    pub fn label(self) -> &'static str {
        match self {
            Action::Run => "Run",
            Action::Step => "Step",
            Action::Continue => "Continue",
            Action::Cancel => "Cancel",
            Action::ExportGrammar => "Export grammar…",
            Action::ExportTranscript => "Export transcript…",
            Action::SaveWorkspace => "Save workspace",
        }
    }
}
