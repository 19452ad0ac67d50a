//! A one-shot's timeline, the side of the command being timed: `gpuscope doctor` runs a
//! one-shot command as a child with [`REPORT_ENV`] naming a file in a private directory;
//! the child records the marks of `gpu_backend::timeline` from the start of `main` and, once
//! it has printed, writes them there as a [`ChildReport`] (JSON). The parent
//! (`commands/doctor/timeline.rs`) reads that file as hostile input: bounded, typed, checked.
//!
//! With the variable unset (every other run), nothing is recorded and nothing written.

use std::path::PathBuf;
use std::time::Instant;

use serde::{Deserialize, Serialize};

/// The variable that asks a run to record its timeline into the file it names. Read and
/// removed first thing in `main`, so that nothing the command starts inherits it.
pub const REPORT_ENV: &str = "GPUSCOPE_ONESHOT_TIMELINE";

/// The largest report the parent reads: a 64-GPU machine's is a few tens of KiB.
pub const REPORT_MAX_BYTES: u64 = 1 << 20;

/// What the child hands back: its clock readings at the start of `main` and when it wrote
/// the report, and its steps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChildReport {
    /// `CLOCK_MONOTONIC` at the start of `main`, nanoseconds (the parent's clock too).
    pub main_ns: u64,
    /// The process's CPU time at the start of `main` (`CLOCK_PROCESS_CPUTIME_ID`: exec and
    /// dynamic linking), nanoseconds.
    pub main_cpu_ns: Option<u64>,
    /// `CLOCK_MONOTONIC` when the report was made, after the print, nanoseconds.
    pub end_ns: u64,
    /// The process's CPU time then, nanoseconds.
    pub end_cpu_ns: Option<u64>,
    /// The steps, in the order they started.
    pub steps: Vec<ChildStep>,
}

/// One step as the child hands it back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChildStep {
    /// One of `gpu_backend::timeline::STEPS`.
    pub step: String,
    /// The device (`0`, `0:1`), for a device's step.
    pub device: Option<String>,
    /// The thread: `main`, or `thread N`.
    pub thread: String,
    /// When it started, nanoseconds after `main_ns`.
    pub start_ns: u64,
    /// Its wall time, nanoseconds.
    pub wall_ns: u64,
    /// Its thread's CPU time, nanoseconds.
    pub cpu_ns: Option<u64>,
}

fn nanos(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// `CLOCK_MONOTONIC` in nanoseconds: one clock for the parent and the child.
pub fn monotonic_ns() -> Option<u64> {
    gpu_backend::timeline::monotonic_now().map(nanos)
}

/// This process's CPU time so far, all threads (`CLOCK_PROCESS_CPUTIME_ID`), nanoseconds.
pub fn process_cpu_ns() -> Option<u64> {
    gpu_backend::timeline::process_cpu_time().map(nanos)
}

/// A run being timed for doctor: where its report goes and what `main`'s start read.
#[derive(Debug)]
pub struct Child {
    path: PathBuf,
    main: Instant,
    main_ns: u64,
    main_cpu_ns: Option<u64>,
    recording: gpu_backend::timeline::Recording,
}

impl Child {
    /// When [`REPORT_ENV`] names a file: removes the variable and starts recording the marks.
    /// Call first thing in `main`, while it runs on one thread.
    pub fn from_env() -> Option<Child> {
        let path = std::env::var_os(REPORT_ENV)?;
        std::env::remove_var(REPORT_ENV);
        let main_cpu_ns = process_cpu_ns();
        let main = Instant::now();
        let main_ns = monotonic_ns()?;
        Some(Child {
            path: PathBuf::from(path),
            main,
            main_ns,
            main_cpu_ns,
            recording: gpu_backend::timeline::start(),
        })
    }

    /// Writes the report: a new file (never through a link, never over one there). A failure
    /// is said on stderr; the parent then reports that there is no timeline.
    pub fn finish(self) {
        let steps = self.recording.finish();
        let end_ns = monotonic_ns().unwrap_or(self.main_ns);
        let end_cpu_ns = process_cpu_ns();
        let report = ChildReport {
            main_ns: self.main_ns,
            main_cpu_ns: self.main_cpu_ns,
            end_ns,
            end_cpu_ns,
            steps: steps
                .into_iter()
                .map(|s| ChildStep {
                    step: s.name.to_string(),
                    device: s.device.map(|d| d.to_string()),
                    thread: s.thread,
                    start_ns: nanos(s.start.saturating_duration_since(self.main)),
                    wall_ns: nanos(s.wall),
                    cpu_ns: s.cpu.map(nanos),
                })
                .collect(),
        };
        let written = serde_json::to_vec(&report)
            .map_err(std::io::Error::other)
            .and_then(|bytes| {
                use std::io::Write as _;
                let mut file =
                    gpu_backend::files::create(&self.path, gpu_backend::files::IfExists::Refuse)
                        .map_err(std::io::Error::other)?;
                file.write_all(&bytes)
            });
        if let Err(e) = written {
            eprintln!(
                "gpuscope: cannot write the one-shot's timeline to {}: {e}",
                gpu_devices::text::Escaped(&self.path.display().to_string())
            );
        }
    }
}
