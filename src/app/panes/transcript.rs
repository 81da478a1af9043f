//! Transcript: export JSON and Markdown; open a transcript and replay it.

use crate::app::Shared;

/// The transcript pane's own UI state.
#[derive(Default)]
pub struct TranscriptPane {}

impl TranscriptPane {
    /// Draws the pane.
    pub fn ui(&mut self, ui: &mut egui::Ui, shared: &mut Shared) {
        let _ = shared;
        ui.label("Not built yet.");
    }
}
