#![doc = include_str!("../README.md")]

mod collect;
mod handle;
mod process;
mod utilization;

pub use collect::{
    command_join, shell_join, ProcessCollector, ProcessGone, ProcessQueryError, Snapshots,
};
pub use gpu_devices::ProcessKind;
pub use handle::ProcessHandle;
pub use process::{GpuProcess, HostProcess, ProcessUtilization};
pub use utilization::{TrackedProcess, UtilizationTracker, SAMPLE_MAX_AGE};
