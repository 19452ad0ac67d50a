#![doc = include_str!("../README.md")]
// The query table is turned into the fixture structs one row at a time, up to three nested
// expansions a row (`fixture/answers.rs`); the limit leaves the table room to grow.
#![recursion_limit = "512"]

pub mod backend;
pub mod concurrency;
pub mod container;
pub mod cost;
pub mod error;
pub mod files;
pub mod fixture;
pub mod host;
#[cfg(feature = "nvml")]
pub mod nvml;
pub mod query;
pub mod recorder;
pub mod replay;
pub mod source;
pub mod text;
pub mod timeline;
pub mod types;

#[cfg(feature = "mock")]
pub use backend::MockGpuBackend;
pub use backend::{all_device_ids, GpuBackend, NotSupportedBase};
pub use container::{ContainerFacts, HostRoots};
pub use error::{BackendError, Result};
pub use fixture::{Answer, Fixture, FixtureError};
#[cfg(feature = "nvml")]
pub use nvml::NvmlBackend;
pub use query::Query;
pub use replay::{CallCounts, CallKey, ReplayBackend, ReplayClock};
pub use source::{OpenedSource, Source, SourceBackend, SourceError};
pub use types::*;
