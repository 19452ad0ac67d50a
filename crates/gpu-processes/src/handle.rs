//! A process on the host, followed by PID and start time (nvitop's `HostProcess`): its parent,
//! its children, whether it still runs, and its facts now.
//!
//! A PID alone names a process only until it ends: the kernel hands the number to the next
//! process. A handle keeps the start time it saw first, and every question checks it, so a
//! handle never answers for another process that took the PID over.

use std::sync::Arc;

use gpu_backend::host::HostSource;

use crate::collect::host_process;
use crate::HostProcess;

/// A process on the host: a PID and the start time it had when the handle was made.
#[derive(Clone)]
pub struct ProcessHandle {
    host: Arc<dyn HostSource>,
    pid: u32,
    start_time_s: Option<u64>,
}

impl std::fmt::Debug for ProcessHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessHandle")
            .field("pid", &self.pid)
            .field("start_time_s", &self.start_time_s)
            .finish_non_exhaustive()
    }
}

impl PartialEq for ProcessHandle {
    fn eq(&self, other: &Self) -> bool {
        self.pid == other.pid && self.start_time_s == other.start_time_s
    }
}

impl ProcessHandle {
    /// The process `pid` as `host` sees it now; `None` when it sees none.
    pub fn new(host: Arc<dyn HostSource>, pid: u32) -> Option<ProcessHandle> {
        let facts = host.process(pid)?;
        Some(ProcessHandle {
            host,
            pid,
            start_time_s: facts.start_time_s,
        })
    }

    /// This process (nvitop's `HostProcess()` with no PID). On a replayed fixture, the
    /// fixture's process with this PID, if it has one.
    pub fn current(host: Arc<dyn HostSource>) -> Option<ProcessHandle> {
        ProcessHandle::new(host, std::process::id())
    }

    /// The PID.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The start time, seconds since the Unix epoch, when the host tells it.
    pub fn start_time_s(&self) -> Option<u64> {
        self.start_time_s
    }

    /// Whether the process still runs: asked again now, the PID is there with the same start
    /// time (a new process that took the PID over is not this one). A zombie still runs (it
    /// has not been reaped), as psutil counts it.
    pub fn is_running(&self) -> bool {
        self.host
            .process(self.pid)
            .is_some_and(|f| f.start_time_s == self.start_time_s)
    }

    /// The parent, asked now; `None` when the process ended, has no parent the host can see
    /// (PID 0, another PID namespace), or the parent ended.
    pub fn parent(&self) -> Option<ProcessHandle> {
        let facts = self
            .host
            .process(self.pid)
            .filter(|f| f.start_time_s == self.start_time_s)?;
        let ppid = facts.ppid.filter(|&p| p != 0)?;
        ProcessHandle::new(self.host.clone(), ppid)
    }

    /// The children, asked now, by PID; with `recursive`, their children too, down the whole
    /// tree (each process once). Empty when the process ended. Asks the host about every PID
    /// it sees, so it costs a read per process on the machine.
    pub fn children(&self, recursive: bool) -> Vec<ProcessHandle> {
        if !self.is_running() {
            return Vec::new();
        }
        let all: Vec<(u32, u32, Option<u64>)> = self
            .host
            .pids()
            .into_iter()
            .filter_map(|pid| {
                let f = self.host.process(pid)?;
                Some((pid, f.ppid?, f.start_time_s))
            })
            .collect();
        let mut out = Vec::new();
        let mut parents = vec![self.pid];
        while let Some(parent) = parents.pop() {
            for &(pid, ppid, start) in &all {
                // A child started no earlier than its parent: a PID reused since cannot be
                // mistaken for a child of this process.
                let younger = match (start, self.start_time_s) {
                    (Some(c), Some(p)) => c >= p,
                    _ => true,
                };
                if ppid == parent
                    && pid != parent
                    && younger
                    && !out.iter().any(|h: &ProcessHandle| h.pid == pid)
                {
                    out.push(ProcessHandle {
                        host: self.host.clone(),
                        pid,
                        start_time_s: start,
                    });
                    if recursive {
                        parents.push(pid);
                    }
                }
            }
        }
        out.sort_by_key(|h| h.pid);
        out
    }

    /// What the host says of the process now (user, command, CPU, memory, running time, ...);
    /// `None` once it has ended.
    #[doc(alias = "as_snapshot")]
    #[doc(alias = "oneshot")]
    pub fn snapshot(&self) -> Option<HostProcess> {
        if !self.is_running() {
            return None;
        }
        let memory_total = self.host.machine().memory_total;
        let p = host_process(&*self.host, self.pid, self.host.now_unix_ms(), memory_total);
        p.visible.then_some(p)
    }

    /// Resident memory for people (`"1.5GiB"`), nvitop's `host_memory_human`; N/A when it
    /// cannot be read.
    pub fn host_memory_human(&self) -> String {
        self.snapshot()
            .and_then(|p| p.rss)
            .map_or_else(|| "N/A".to_string(), gpu_devices::bytes2human)
    }
}
