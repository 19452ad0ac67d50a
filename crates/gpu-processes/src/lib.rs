#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

mod collect;
mod process;

pub use collect::{
    command_join, shell_join, ProcessCollector, ProcessQueryError, Snapshots, UtilizationTracker,
};
pub use gpu_devices::ProcessKind;
pub use process::{GpuProcess, HostProcess, ProcessUtilization};
