//! Marks of a one-shot's steps, for `gpuscope doctor`'s timeline of one one-shot (issue 36).
//!
//! Each step a one-shot command takes (loading the NVML library, `nvmlInit`, opening each
//! device, the refresh with each device's part on its own thread, the host's process table,
//! the print) holds a [`Step`] guard while it runs. While a recording is on ([`start`] to
//! [`Recording::finish`]) the guard keeps, when dropped, the step's start, wall time, the CPU time of the
//! thread that ran it ([`crate::cost::thread_cpu_time`]) and that thread; while it is off, a
//! mark is one relaxed atomic load and nothing else, so the marks cost nothing in a command
//! that is not being timed.
//!
//! Why marks and not `tracing` spans: the libraries emit no spans today, and the log's
//! subscriber (the CLI's `log.rs`) would then have to become a registry with a filter per
//! layer (else every `-v` line gains the step's span as a prefix); a step's CPU time is read
//! on its own thread either way.
//!
//! ```
//! use gpu_backend::timeline;
//!
//! let recording = timeline::start();
//! {
//!     let _step = timeline::step(timeline::REFRESH);
//!     // ... the refresh ...
//! }
//! let steps = recording.finish();
//! assert_eq!(steps[0].name, timeline::REFRESH);
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use crate::cost::Stopwatch;
use crate::DeviceId;

/// Parsing the command line (and routing a front door), before the command runs.
pub const COMMAND_LINE: &str = "command line";
/// Reading a recording (`--fixture`): the file read, decompressed, parsed and checked.
pub const FIXTURE_LOAD: &str = "recording load";
/// Loading the NVML library (`dlopen`: the loader maps it and runs its constructors).
pub const LIBRARY_LOAD: &str = "library load";
/// `nvmlInit_v2`, with nvml-wrapper looking up the library's functions first.
pub const NVML_INIT: &str = "nvmlInit";
/// Starting the event listener: the event set made, each GPU registered on it, the thread
/// started.
pub const EVENTS_SETUP: &str = "event listener start";
/// Opening one GPU: its handle and the facts that identify it (UUID, PCI address, MIG mode
/// and MIG devices).
pub const DEVICE_OPEN: &str = "open device";
/// The refresh: every device asked, one thread per device beyond the first.
pub const REFRESH: &str = "refresh";
/// One device's part of the refresh (its static facts on the first refresh, then its
/// readings), on the thread that asked it.
pub const DEVICE_REFRESH: &str = "refresh device";
/// The host's process table: each GPU process looked up in /proc.
pub const HOST_TABLE: &str = "host process table";
/// Making the output and writing it.
pub const PRINT: &str = "print";

/// Every step a mark names, in the order a one-shot takes them.
pub const STEPS: [&str; 10] = [
    COMMAND_LINE,
    FIXTURE_LOAD,
    LIBRARY_LOAD,
    NVML_INIT,
    EVENTS_SETUP,
    DEVICE_OPEN,
    REFRESH,
    DEVICE_REFRESH,
    HOST_TABLE,
    PRINT,
];

/// The most steps one recording keeps (a 64-GPU machine's one-shot takes a few hundred);
/// those past it are dropped.
pub const STEPS_MAX: usize = 4096;

static ON: AtomicBool = AtomicBool::new(false);
static KEPT: Mutex<Vec<Kept>> = Mutex::new(Vec::new());

/// A step as kept, before its thread is named.
#[derive(Debug, Clone)]
struct Kept {
    name: &'static str,
    device: Option<DeviceId>,
    thread: ThreadId,
    thread_name: Option<String>,
    start: Instant,
    wall: Duration,
    cpu: Option<Duration>,
}

/// One step of a recording: what ran, on which thread, when, and for how long.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepRecord {
    /// The step, one of [`STEPS`].
    pub name: &'static str,
    /// The device it was about, for a device's step.
    pub device: Option<DeviceId>,
    /// The thread that ran it: its name (`main`), or `thread N` for an unnamed one, numbered
    /// in the order the recording first saw it.
    pub thread: String,
    /// When it started.
    pub start: Instant,
    /// Its wall time.
    pub wall: Duration,
    /// The CPU time of its thread while it ran; `None` where the platform cannot tell.
    pub cpu: Option<Duration>,
}

/// `CLOCK_MONOTONIC` now: the one clock every process of the machine reads alike, so that a
/// parent and the child it times can set their readings side by side; `None` where the
/// platform has no such clock.
pub fn monotonic_now() -> Option<Duration> {
    #[cfg(unix)]
    {
        crate::cost::clock_time(libc::CLOCK_MONOTONIC)
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// The CPU time this process has used so far, all its threads (`CLOCK_PROCESS_CPUTIME_ID`);
/// `None` where the platform has no such clock.
pub fn process_cpu_time() -> Option<Duration> {
    #[cfg(unix)]
    {
        crate::cost::clock_time(libc::CLOCK_PROCESS_CPUTIME_ID)
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// A recording of the marks, from [`start`] until [`Recording::finish`] (or its drop).
/// Process-wide, as the marks are in every layer; one recording at a time.
#[derive(Debug)]
pub struct Recording {
    _private: (),
}

/// Starts recording the marks (forgetting any kept before).
pub fn start() -> Recording {
    KEPT.lock().unwrap_or_else(PoisonError::into_inner).clear();
    ON.store(true, Ordering::Relaxed);
    Recording { _private: () }
}

/// True while a recording is on: a step that costs something to mark (loading the library
/// apart from `nvmlInit`) is marked only then.
pub fn recording() -> bool {
    ON.load(Ordering::Relaxed)
}

impl Recording {
    /// Stops recording, and gives the steps kept, in the order they started.
    pub fn finish(self) -> Vec<StepRecord> {
        ON.store(false, Ordering::Relaxed);
        let mut kept = std::mem::take(&mut *KEPT.lock().unwrap_or_else(PoisonError::into_inner));
        kept.sort_by_key(|k| k.start);
        let mut unnamed: Vec<ThreadId> = Vec::new();
        kept.into_iter()
            .map(|k| {
                let thread = k.thread_name.unwrap_or_else(|| {
                    let n = match unnamed.iter().position(|t| *t == k.thread) {
                        Some(i) => i + 1,
                        None => {
                            unnamed.push(k.thread);
                            unnamed.len()
                        }
                    };
                    format!("thread {n}")
                });
                StepRecord {
                    name: k.name,
                    device: k.device,
                    thread,
                    start: k.start,
                    wall: k.wall,
                    cpu: k.cpu,
                }
            })
            .collect()
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        ON.store(false, Ordering::Relaxed);
    }
}

/// A step while it runs: kept when dropped, if a recording is on (see [the module](self)).
#[must_use = "a step is timed until its guard is dropped"]
#[derive(Debug)]
pub struct Step(Option<Open>);

#[derive(Debug)]
struct Open {
    name: &'static str,
    device: Option<DeviceId>,
    watch: Stopwatch,
}

/// Marks a step, from now until the guard is dropped.
pub fn step(name: &'static str) -> Step {
    open(name, None)
}

/// Marks one device's step (opening it, its part of the refresh).
pub fn device_step(name: &'static str, device: DeviceId) -> Step {
    open(name, Some(device))
}

fn open(name: &'static str, device: Option<DeviceId>) -> Step {
    if !recording() {
        return Step(None);
    }
    Step(Some(Open {
        name,
        device,
        watch: Stopwatch::start(),
    }))
}

impl Drop for Step {
    fn drop(&mut self) {
        let Some(open) = self.0.take() else {
            return;
        };
        let timing = open.watch.stop();
        let current = std::thread::current();
        let kept = Kept {
            name: open.name,
            device: open.device,
            thread: current.id(),
            thread_name: current.name().map(str::to_string),
            start: open.watch.started(),
            wall: timing.wall,
            cpu: timing.cpu,
        };
        let mut all = KEPT.lock().unwrap_or_else(PoisonError::into_inner);
        if all.len() < STEPS_MAX && recording() {
            all.push(kept);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One test only: the recording is process-wide (other tests of this crate may open NVML
    /// meanwhile, whose marks are left out by name).
    #[test]
    fn a_recording_keeps_each_step_with_its_thread_and_nothing_outside_it() {
        {
            let _before = step(REFRESH);
        }
        let recording = start();
        {
            let _outer = step(REFRESH);
            std::thread::scope(|s| {
                s.spawn(|| {
                    let _gpu = device_step(DEVICE_REFRESH, DeviceId::Gpu(1));
                });
            });
        }
        let ours = |s: &StepRecord| [REFRESH, DEVICE_REFRESH, PRINT].contains(&s.name);
        let steps: Vec<_> = recording.finish().into_iter().filter(ours).collect();
        {
            let _after = step(PRINT);
        }
        assert!(!start().finish().iter().any(ours));
        let names: Vec<_> = steps.iter().map(|s| (s.name, s.device)).collect();
        assert_eq!(
            names,
            [(REFRESH, None), (DEVICE_REFRESH, Some(DeviceId::Gpu(1)))]
        );
        assert_ne!(steps[0].thread, steps[1].thread);
        assert_eq!(steps[1].thread, "thread 1");
        let end = |s: &StepRecord| s.start + s.wall;
        assert!(steps[1].start >= steps[0].start && end(&steps[1]) <= end(&steps[0]));
        for s in &steps {
            assert!(s.cpu.is_none_or(|c| c <= s.wall), "{s:?}");
        }
    }
}
