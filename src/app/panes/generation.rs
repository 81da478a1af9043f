//! Generation: the model picker, prompt, sampling controls, Run / Step / Cancel and the token stream.

use crate::app::Shared;

/// The generation pane's own UI state.
#[derive(Default)]
pub struct GenerationPane {}

impl GenerationPane {
    /// Draws the pane.
    pub fn ui(&mut self, ui: &mut egui::Ui, shared: &mut Shared) {
        let _ = shared;
        ui.label("Not built yet.");
    }
}
