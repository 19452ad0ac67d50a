//! What one GPU process is: the GPU side (per device) and the host side (per PID).

use gpu_backend::{ContainerFacts, DeviceId};
use gpu_devices::ProcessKind;
use serde::{Deserialize, Serialize};

/// Per-process utilization, percent, from the newest of the driver's samples of this process.
///
/// NVML samples each process at its own pace: while one process's newest sample advances every
/// second, another's can stand still for several seconds and then jump (a light process beside
/// a busy job; [`crate::SAMPLE_MAX_AGE`] says how long). So a process
/// keeps the values of its own newest sample, counted by its own timestamps, for
/// [`crate::SAMPLE_MAX_AGE`] (15 s); past that age, or before its first sample, the values are
/// N/A (`None`). A process never flips between a value and N/A from one refresh to the next:
/// the age of the sample it shows only grows until a newer one replaces it. See
/// [`crate::UtilizationTracker`] for the whole rule.
///
/// nvitop's `GpuProcess.gpu_sm_utilization()` and its siblings are [`ProcessUtilization::sm`]
/// and the others; [`ProcessUtilization::sample_age_ms`] says how old the sample behind them is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ProcessUtilization {
    /// SM (streaming multiprocessor) utilization.
    pub sm: Option<u32>,
    /// Memory-bandwidth utilization.
    pub memory: Option<u32>,
    /// Encoder utilization.
    pub encoder: Option<u32>,
    /// Decoder utilization.
    pub decoder: Option<u32>,
    /// When the driver took the sample the values come from: its CPU timestamp, microseconds
    /// since the Unix epoch. `None` when the process has no sample yet. Kept (with
    /// [`ProcessUtilization::sample_age_ms`]) when the sample is too old for its values.
    #[serde(default)]
    pub sample_time_us: Option<u64>,
    /// How old that sample was at this refresh, milliseconds: the host's "now" (the wall clock
    /// live; a replay's recorded time of the frame) minus the sample's timestamp, 0 for a sample
    /// stamped after it. The values are N/A once this is over [`crate::SAMPLE_MAX_AGE`].
    #[serde(default)]
    pub sample_age_ms: Option<u64>,
}

/// A process as the host sees it. Every field is N/A (`None`) when the process could not be
/// read: it ended between the GPU's list and the look-up, it lives in another PID namespace, or
/// the caller may not read it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct HostProcess {
    /// Whether the host could see the process at all.
    pub visible: bool,
    /// Owner's user name.
    pub user: Option<String>,
    /// Executable name.
    pub name: Option<String>,
    /// Command line, one entry per argument.
    pub cmdline: Option<Vec<String>>,
    /// The command line as one string for reading, joined as nvitop joins it
    /// ([`crate::command_join`]); [`crate::shell_join`] of [`HostProcess::cmdline`] gives one a
    /// shell splits back into the same arguments.
    pub command: Option<String>,
    /// CPU use, percent of one CPU.
    pub cpu_percent: Option<f64>,
    /// Resident memory, bytes.
    pub rss: Option<u64>,
    /// Resident memory, percent of the host's physical memory.
    pub memory_percent: Option<f64>,
    /// Start time, seconds since the Unix epoch.
    pub create_time_s: Option<u64>,
    /// How long the process has run, seconds.
    pub running_time_s: Option<u64>,
    /// The running time for people (`"3:04:05"`, `"2 days"`).
    pub running_time_human: Option<String>,
    /// Process state (`running`, `sleeping`, ...).
    pub status: Option<String>,
    /// Parent PID.
    pub ppid: Option<u32>,
    /// The PID in the innermost PID namespace of the process (its PID inside its container),
    /// when that differs from the host PID and the kernel tells it.
    pub ns_pid: Option<u32>,
    /// The container and Kubernetes pod the process runs in; `None` (N/A) for a process
    /// outside any container, or one whose cgroup could not be read. Each field inside is N/A
    /// where it cannot be told.
    pub container: Option<ContainerFacts>,
}

/// One process on one device, with its host facts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuProcess {
    /// Process id, as the driver sees it (the host's PID namespace).
    pub pid: u32,
    /// The device (physical GPU or MIG device).
    pub device: DeviceId,
    /// Compute, graphics or both; `None` only for a process asked for by
    /// [`crate::ProcessCollector::take_process_snapshots`] with `failsafe` that is no longer on
    /// its device (nvitop's `type` N/A): nothing says which list it was on.
    #[serde(rename = "type")]
    pub kind: Option<ProcessKind>,
    /// GPU memory used, bytes; N/A where the driver cannot tell (WDDM, MIG without privileges).
    pub gpu_memory: Option<u64>,
    /// GPU memory used, percent of the device's memory.
    pub gpu_memory_percent: Option<f64>,
    /// The GPU memory for people (`"1.5GiB"`).
    pub gpu_memory_human: Option<String>,
    /// GPU-instance id (MIG).
    pub gpu_instance_id: Option<u32>,
    /// Compute-instance id (MIG).
    pub compute_instance_id: Option<u32>,
    /// Utilization from the process's newest per-process sample, with its age
    /// ([`ProcessUtilization`] says for how long a sample counts).
    pub utilization: ProcessUtilization,
    /// Host facts, shared by every device the PID uses.
    pub host: HostProcess,
}

impl GpuProcess {
    /// The kind as nvitop prints it (`C`, `G`, `C+G`), or `N/A` when unknown (see
    /// [`GpuProcess::kind`]).
    pub fn kind_str(&self) -> &'static str {
        self.kind.map_or("N/A", |k| k.as_str())
    }
}
