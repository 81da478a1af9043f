//! The app's UI-free state and logic: the persisted workspace, the analysis job (tool set or
//! schema → grammar → lint findings → test-input verdict and stacks), the actions keyboard
//! shortcuts and buttons queue, the run controller, and transcripts.
//!
//! Layer: above `toolrail-llm` (see ARCHITECTURE.md); no egui, so everything here is tested
//! without a window. Invariants: the UI never waits (analysis, generation and file reads and
//! writes run on background threads, results are polled); files are written atomically and an
//! unreadable workspace is kept aside, never overwritten.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub mod actions;
pub mod analysis;
pub mod analyzer;
pub mod conversation;
pub mod example;
pub mod fsutil;
pub mod jsonpos;
pub mod pasted;
pub mod paths;
pub mod run;
pub mod samples;
pub mod tasks;
pub mod template_info;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits for the first relayed call made at or after `since`, returning every call seen
    /// (older ones included) in order. Panics if none comes within a generous limit.
    fn calls_until_one_after(
        rx: &crossbeam_channel::Receiver<Instant>,
        since: Instant,
    ) -> Vec<Instant> {
        let mut seen = Vec::new();
        loop {
            let at = rx
                .recv_timeout(Duration::from_secs(60))
                .expect("a mark is relayed");
            seen.push(at);
            if at >= since {
                return seen;
            }
        }
    }

    /// However the threads are scheduled: a burst of marks collapses into calls at least one
    /// pace apart, the last mark of the burst is followed by a call (none is lost), and a
    /// lone mark after a quiet spell gets its call too.
    #[test]
    fn relayed_calls_follow_the_pace_and_none_is_lost() {
        let (tx, rx) = crossbeam_channel::unbounded::<Instant>();
        let inner: Repaint = Arc::new(move || {
            let _ = tx.send(Instant::now());
        });
        let pace = Duration::from_millis(100);
        let relay = relayed(inner, RefreshPace::new(pace));
        let burst_start = Instant::now();
        for _ in 0..1000 {
            relay();
        }
        let last_mark = Instant::now();
        let mut calls = calls_until_one_after(&rx, last_mark);
        let span = *calls.last().expect("one call at least") - burst_start;
        // Spacing bounds the count: a burst is never a call per mark.
        let most = 1 + (span.as_micros() / pace.as_micros()) as usize;
        assert!(calls.len() <= most, "{} calls in {span:?}", calls.len());

        let lone_mark = Instant::now();
        relay();
        calls.extend(calls_until_one_after(&rx, lone_mark));
        for pair in calls.windows(2) {
            assert!(
                pair[1] - pair[0] >= pace,
                "relayed {:?} apart",
                pair[1] - pair[0]
            );
        }
    }

    #[test]
    fn a_pace_reads_back_what_was_set() {
        let pace = RefreshPace::new(Duration::from_millis(250));
        assert_eq!(pace.get(), Duration::from_millis(250));
        pace.set(Duration::ZERO);
        assert_eq!(pace.get(), Duration::ZERO);
    }
}
