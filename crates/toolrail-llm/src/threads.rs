//! How many threads decode when nobody said. llama.cpp's workers spin-wait at every barrier,
//! so one thread more than the cores that are free makes every token wait for a thread the
//! system has descheduled (measured on a 2-core machine at load 5: 2 threads made 1.2–5.3
//! tokens/s, 1 thread 23–59). toolrail counts the physical cores (hyper-threads share one
//! core's units) and the work already running, decodes on the cores left (at least one), and
//! leaves one to a window when there is one. The choice and why are shown (the app's status
//! bar, the CLI's stderr) and recorded with the run.

use serde::{Deserialize, Serialize};

/// A decoding thread count and where it came from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ThreadChoice {
    /// The threads.
    pub threads: u32,
    /// Why this many.
    pub reason: ThreadReason,
}

/// Why a run decodes on the threads it does.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ThreadReason {
    /// The user set it (`--threads`, the models.toml entry, the app's settings).
    Set,
    /// toolrail chose it from the machine.
    Chosen {
        /// Physical cores this process may use.
        physical_cores: u32,
        /// Runnable threads of other work when the run started (None: the platform does not
        /// say; every core is taken as free).
        busy: Option<f32>,
        /// One core was left to the app's window.
        window: bool,
    },
}

impl ThreadChoice {
    /// `1 thread` or `N threads`.
    pub fn count(&self) -> String {
        match self.threads {
            1 => "1 thread".to_owned(),
            n => format!("{n} threads"),
        }
    }

    /// `2 threads (set)` or `1 thread (chosen: 2 physical cores, 3.0 busy, 1 left to the
    /// window)`.
    pub fn describe(&self) -> String {
        let n = self.count();
        match self.reason {
            ThreadReason::Set => format!("{n} (set)"),
            ThreadReason::Chosen {
                physical_cores,
                busy,
                window,
            } => {
                let busy =
                    busy.map_or_else(|| "load not known".to_owned(), |b| format!("{b:.1} busy"));
                let window = if window { ", 1 left to the window" } else { "" };
                format!("{n} (chosen: {physical_cores} physical cores, {busy}{window})")
            }
        }
    }
}

/// The threads to decode on: `set` when given, else the physical cores not busy with other
/// work (one fewer beside a `window`), at least 1.
pub fn choose(set: Option<u32>, window: bool) -> ThreadChoice {
    if let Some(threads) = set {
        return ThreadChoice {
            threads,
            reason: ThreadReason::Set,
        };
    }
    let physical_cores = physical_cores();
    let busy = busy_threads();
    ThreadChoice {
        threads: threads_for(physical_cores, busy, window),
        reason: ThreadReason::Chosen {
            physical_cores,
            busy,
            window,
        },
    }
}

/// The rule [`choose`] applies: free cores (physical minus busy, rounded), one fewer beside a
/// window, at least 1.
pub fn threads_for(physical_cores: u32, busy: Option<f32>, window: bool) -> u32 {
    let busy = busy.unwrap_or(0.0).max(0.0).round() as u32;
    let free = physical_cores.saturating_sub(busy);
    let free = if window { free.saturating_sub(1) } else { free };
    free.max(1)
}

/// The physical cores this process may use: the machine's physical cores, at most the
/// logical CPUs it is allowed (affinity, container quota).
pub fn physical_cores() -> u32 {
    let allowed = crate::cores();
    physical_cores_of_machine()
        .map_or(allowed, |p| p.min(allowed))
        .max(1)
}

#[cfg(target_os = "linux")]
fn physical_cores_of_machine() -> Option<u32> {
    // each distinct (physical id, core id) pair is one core
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let mut cores = std::collections::BTreeSet::new();
    let (mut package, mut core) = (None, None);
    for line in text.lines().chain(std::iter::once("")) {
        let value = |l: &str| l.split(':').nth(1).map(|v| v.trim().to_owned());
        if line.starts_with("physical id") {
            package = value(line);
        } else if line.starts_with("core id") {
            core = value(line);
        } else if line.trim().is_empty() {
            if let Some(c) = core.take() {
                cores.insert((package.take(), c));
            }
            package = None;
        }
    }
    u32::try_from(cores.len()).ok().filter(|&n| n > 0)
}

#[cfg(target_os = "macos")]
#[allow(unsafe_code)]
fn physical_cores_of_machine() -> Option<u32> {
    let mut value: libc::c_int = 0;
    let mut size = std::mem::size_of::<libc::c_int>();
    // SAFETY: a NUL-terminated name, and an out-pointer to an int with its size.
    let rc = unsafe {
        libc::sysctlbyname(
            c"hw.physicalcpu".as_ptr(),
            (&mut value as *mut libc::c_int).cast(),
            &mut size,
            std::ptr::null_mut(),
            0,
        )
    };
    (rc == 0 && value > 0).then_some(value as u32)
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
fn physical_cores_of_machine() -> Option<u32> {
    None
}

/// Runnable threads of other work now: Linux's count of running tasks (`procs_running`, read
/// five times over 20 ms, the median, less this reader), elsewhere on Unix the one-minute load
/// average; None where the platform does not say.
pub fn busy_threads() -> Option<f32> {
    #[cfg(target_os = "linux")]
    {
        let mut samples: Vec<u32> = Vec::new();
        for i in 0..5 {
            if i > 0 {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            let stat = std::fs::read_to_string("/proc/stat").ok()?;
            let running = stat
                .lines()
                .find_map(|l| l.strip_prefix("procs_running "))
                .and_then(|v| v.trim().parse::<u32>().ok())?;
            samples.push(running);
        }
        samples.sort_unstable();
        Some(samples[samples.len() / 2].saturating_sub(1) as f32)
    }
    #[cfg(all(unix, not(target_os = "linux")))]
    {
        let mut loads = [0f64; 3];
        // SAFETY: a buffer of three doubles, as getloadavg asks.
        #[allow(unsafe_code)]
        let n = unsafe { libc::getloadavg(loads.as_mut_ptr(), 1) };
        (n == 1).then_some(loads[0] as f32)
    }
    #[cfg(not(unix))]
    {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_cores_decide_and_one_thread_is_the_floor() {
        assert_eq!(threads_for(2, Some(0.0), false), 2);
        assert_eq!(threads_for(2, Some(0.0), true), 1);
        assert_eq!(threads_for(2, Some(5.0), false), 1);
        assert_eq!(threads_for(8, Some(2.4), false), 6);
        assert_eq!(threads_for(8, Some(2.6), true), 4);
        assert_eq!(threads_for(4, None, false), 4);
        assert_eq!(threads_for(1, Some(0.0), true), 1);
    }

    #[test]
    fn the_choice_says_why() {
        let set = choose(Some(3), true);
        assert_eq!(set.threads, 3);
        assert_eq!(set.describe(), "3 threads (set)");
        let chosen = choose(None, false);
        assert!(chosen.threads >= 1 && chosen.threads <= crate::cores());
        assert!(
            chosen.describe().contains("physical cores"),
            "{}",
            chosen.describe()
        );
        assert!(physical_cores() >= 1);
    }
}
