//! Validator: the parsed call(s), schema errors with pointers, the feedback message.

use crate::app::Shared;

/// The validator pane's own UI state.
#[derive(Default)]
pub struct ValidatorPane {}

impl ValidatorPane {
    /// Draws the pane.
    pub fn ui(&mut self, ui: &mut egui::Ui, shared: &mut Shared) {
        let _ = shared;
        ui.label("Not built yet.");
    }
}
