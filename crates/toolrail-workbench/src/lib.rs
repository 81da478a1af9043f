//! The app's UI-free state and logic: the persisted workspace, the analysis job (tool set or
//! schema → grammar → lint findings → test-input verdict and stacks), the actions keyboard
//! shortcuts and buttons queue, the run controller, and transcripts.
//!
//! Layer: above `toolrail-llm` (see ARCHITECTURE.md); no egui, so everything here is tested
//! without a window. Invariants: the UI never waits (analysis and generation run on background
//! threads, results are polled); files are written atomically and an unreadable workspace is
//! kept aside, never overwritten.

use std::sync::Arc;

pub mod actions;
pub mod analysis;
pub mod example;
pub mod fsutil;
pub mod jsonpos;
pub mod pasted;
pub mod paths;
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
