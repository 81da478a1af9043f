//! The app's UI-free state and logic: the persisted workspace, the analysis job (tool set or
//! schema → grammar → lint findings → test-input verdict and stacks), the actions keyboard
//! shortcuts and buttons queue, and the run controller. Nothing here depends on egui, so it can be
//! tested and reused without a window.

use std::sync::Arc;

pub mod actions;
pub mod analysis;
pub mod fsutil;
pub mod jsonpos;
pub mod run;
pub mod samples;
pub mod transcript;
pub mod workspace;

/// A callback that asks the UI for a new frame; background jobs call it when they have a result.
pub type Repaint = Arc<dyn Fn() + Send + Sync>;

/// A [`Repaint`] that does nothing (tests and headless use).
pub fn no_repaint() -> Repaint {
    Arc::new(|| {})
}
