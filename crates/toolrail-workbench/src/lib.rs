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
pub mod conversation;
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

/// A [`Repaint`] that never makes its caller wait: calls only leave a mark, and a relay thread
/// calls `inner` once per mark it finds (marks left while `inner` runs collapse into one call,
/// so no request is lost and none repeats). The generation worker calls its callback after
/// every token; egui's `request_repaint` takes the context's lock, which the UI thread holds
/// while it lays out and tessellates a frame, so called directly it would stall decoding for
/// most of every frame. The relay thread ends when the returned callback is dropped.
pub fn relayed(inner: Repaint) -> Repaint {
    let (mark, marks) = crossbeam_channel::bounded::<()>(1);
    let relay_inner = Arc::clone(&inner);
    let relay = std::thread::Builder::new()
        .name("toolrail-repaint-relay".into())
        .spawn(move || {
            while marks.recv().is_ok() {
                relay_inner();
            }
        });
    match relay {
        Ok(_) => Arc::new(move || {
            // Full means a call is already due: this one is covered by it.
            let _ = mark.try_send(());
        }),
        // No thread to relay on: call directly (slower, never wrong).
        Err(_) => inner,
    }
}
