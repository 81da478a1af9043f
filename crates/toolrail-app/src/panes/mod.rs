//! The six panes of the app, one file each. Every pane is a struct with
//! `fn ui(&mut self, ui: &mut egui::Ui, shared: &mut crate::shared::Shared)`.

pub mod generation;
pub mod grammar;
pub mod test_input;
pub mod tools;
pub mod transcript;
pub mod validator;
