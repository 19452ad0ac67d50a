//! Host-side facts about processes and the machine, behind a small abstraction.
//!
//! NVML tells which PIDs use a GPU; the host tells who they are (user, command line, CPU, RSS,
//! start time). [`HostSource`] has a live implementation reading `/proc` ([`LiveHost`], feature
//! `host-live`; `live.rs`, with its parsers of `/proc`'s texts private to it in `procfs.rs`)
//! and a replay implementation ([`ReplayHost`], `replay.rs`) that serves the host facts kept
//! in a fixture on the same clock as a [`crate::ReplayBackend`], so a replayed fixture shows
//! the same process table as the machine it was recorded on.

use crate::fixture::{HostFrame, HostProcessFacts, HostProcessSample};

#[cfg(feature = "host-live")]
mod live;
#[cfg(feature = "host-live")]
mod procfs;
mod replay;

pub use crate::container::HostRoots;
#[cfg(feature = "host-live")]
pub use live::{own_pid_namespace_depth, LiveHost};
pub use replay::ReplayHost;

/// The machine-wide facts that do not change: [`crate::fixture::HostStatic`] without its processes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HostMachine {
    /// Host name.
    pub hostname: Option<String>,
    /// Logical CPUs.
    pub cpu_count: Option<u32>,
    /// Physical memory, bytes.
    pub memory_total: Option<u64>,
    /// Swap, bytes.
    pub swap_total: Option<u64>,
}

/// Where host facts come from. `None` for a process means it could not be seen: it ended, it
/// lives in another PID namespace, or it may not be read.
pub trait HostSource: Send + Sync {
    /// Facts about the machine.
    fn machine(&self) -> HostMachine;
    /// Machine-wide readings now; the `processes` map of the answer is left empty.
    fn sample(&self) -> HostFrame;
    /// What does not change about a process.
    fn process(&self, pid: u32) -> Option<HostProcessFacts>;
    /// What changes about a process, now.
    fn process_sample(&self, pid: u32) -> Option<HostProcessSample>;
    /// The PID of `pid` inside the innermost PID namespace it belongs to (its PID inside its
    /// container), where the host can tell. `None` by default, and for replayed fixtures, which
    /// do not record it.
    fn namespace_pid(&self, pid: u32) -> Option<u32> {
        let _ = pid;
        None
    }
    /// Everything about a process in one look-up: its facts, a sample and its namespace PID.
    /// By default the three methods above; a live host answers all three from one reading.
    fn lookup(&self, pid: u32) -> Option<ProcessLookup> {
        Some(ProcessLookup {
            facts: self.process(pid)?,
            sample: self.process_sample(pid),
            ns_pid: self.namespace_pid(pid),
        })
    }
    /// Forgets what is kept between look-ups about every PID not in `pids` (sorted ascending):
    /// a refresh says which processes are still on the GPUs. Nothing by default.
    fn keep_only(&self, pids: &[u32]) {
        let _ = pids;
    }
    /// Every PID the host can see now, ascending (to find a process's children). Empty by
    /// default; a live host lists `/proc`, a replay the processes alive in its frame.
    fn pids(&self) -> Vec<u32> {
        Vec::new()
    }
    /// The host's "now", milliseconds since the Unix epoch: the wall clock for a live host, the
    /// recorded time of the current frame for a replay. Running times are measured to it.
    fn now_unix_ms(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    }
}

/// The answer of [`HostSource::lookup`].
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessLookup {
    /// What does not change about the process.
    pub facts: HostProcessFacts,
    /// What changes, now; `None` when it could not be read.
    pub sample: Option<HostProcessSample>,
    /// The PID inside its innermost PID namespace, where known.
    pub ns_pid: Option<u32>,
}
