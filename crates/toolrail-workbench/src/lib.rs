//! The app's UI-free state and logic: the persisted workspace, the analysis job (tool set or
//! schema → grammar → lint findings → test-input verdict and stacks), the actions keyboard
//! shortcuts and buttons queue, the run controller, and transcripts.
//!
//! Layer: above `toolrail-llm` (see ARCHITECTURE.md); no egui, so everything here is tested
//! without a window. Invariants: the UI never waits (analysis and generation run on background
//! threads, results are polled); files are written atomically and an unreadable workspace is
//! kept aside, never overwritten.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

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

/// The shortest time between two frames that a relayed background job (see [`relayed`]) may
/// cause. Shared: the UI changes it while the job runs (e.g. when the user picks another live
/// refresh rate). Zero means a frame after every event.
#[derive(Clone, Debug, Default)]
pub struct RefreshPace(Arc<AtomicU64>);

impl RefreshPace {
    /// A pace of `interval` between frames.
    pub fn new(interval: Duration) -> RefreshPace {
        let pace = RefreshPace::default();
        pace.set(interval);
        pace
    }

    /// Changes the interval (takes effect from the next frame asked for).
    pub fn set(&self, interval: Duration) {
        let micros = u64::try_from(interval.as_micros()).unwrap_or(u64::MAX);
        self.0.store(micros, Ordering::Relaxed);
    }

    /// The interval now.
    pub fn get(&self) -> Duration {
        Duration::from_micros(self.0.load(Ordering::Relaxed))
    }
}

/// A [`Repaint`] that never makes its caller wait and asks for frames at most once per `pace`:
/// calls only leave a mark, and a relay thread calls `inner` once per mark it finds. Marks
/// left while `inner` runs or while the pace holds the relay back collapse into one call, so
/// no request is lost (the last events always get a frame, at most one interval late) and none
/// repeats; after a quiet spell the first mark is relayed at once.
///
/// The generation worker calls its callback after every token. Called directly, egui's
/// `request_repaint` would stall decoding (it takes the context's lock, which the UI thread
/// holds while it lays out a frame); and a frame per token costs more than the token itself
/// where frames are drawn on the CPU (software rendering on the same cores as the model).
/// The relay thread ends when the returned callback is dropped.
pub fn relayed(inner: Repaint, pace: RefreshPace) -> Repaint {
    let (mark, marks) = crossbeam_channel::bounded::<()>(1);
    let relay_inner = Arc::clone(&inner);
    let relay = std::thread::Builder::new()
        .name("toolrail-repaint-relay".into())
        .spawn(move || {
            let mut last_call: Option<Instant> = None;
            while marks.recv().is_ok() {
                if let Some(last) = last_call {
                    let due = last + pace.get();
                    let now = Instant::now();
                    if due > now {
                        std::thread::sleep(due - now);
                    }
                }
                relay_inner();
                last_call = Some(Instant::now());
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
