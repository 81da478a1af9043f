//! The run controller: loads a model, runs generation on the worker and keeps the tokens, masks
//! and stacks the Generation, Validator and Transcript panes show. (Stub: owned and filled in by
//! the Generation/Validator/Transcript work.)

use crate::workbench::Repaint;
use crate::workbench::actions::Action;
use crate::workbench::analysis::Analysis;

/// State of model loading and generation runs.
#[derive(Default)]
pub struct RunState {}

impl RunState {
    /// Called once per frame before the panes draw: takes the run actions (run, step, continue,
    /// cancel, export transcript) out of `actions`, drains worker events and asks for a repaint
    /// while work is under way. Actions it does not handle stay in the queue.
    pub fn logic(&mut self, actions: &mut Vec<Action>, analysis: &Analysis, repaint: &Repaint) {
        let _ = (actions, analysis, repaint);
    }

    /// Called when the app closes: stops the worker.
    pub fn shutdown(&mut self) {}
}
