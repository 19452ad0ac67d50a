//! gpu-backend: the bottom layer of gpuscope.
#![warn(missing_docs)]

pub mod backend;
pub mod error;
pub mod fixture;
pub mod replay;
pub mod types;

pub use backend::{all_device_ids, GpuBackend};
pub use error::{BackendError, Result};
pub use fixture::{Answer, Fixture, FixtureError};
pub use replay::{CallCounts, ReplayBackend, ReplayClock};
pub use types::*;
