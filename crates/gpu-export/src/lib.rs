#![doc = include_str!("../README.md")]

#[cfg(feature = "server")]
mod auth;
mod collector;
pub mod doors;
#[cfg(feature = "server")]
mod exporter;
mod exposition;
mod families;
#[cfg(feature = "server")]
mod limits;
pub mod names;
mod plan;
#[cfg(feature = "server")]
mod server;
#[cfg(feature = "server")]
mod shared;
#[cfg(feature = "server")]
mod slots;
#[cfg(test)]
mod test_support;
#[cfg(feature = "server")]
mod web_config;

pub use collector::GpuCollector;
pub use doors::{build, Door, Doors, DoorsError};
pub use exposition::{
    encode_families, encode_openmetrics, encode_text, gzip, Exposition, OPENMETRICS_CONTENT_TYPE,
    TEXT_CONTENT_TYPE,
};
pub use families::{device_up, Family, Inputs, Kind, LabelledValue, Labels, Options};
pub use plan::{query_plan, COSTLY_EVERY, PROCESS_UTILIZATION_EVERY};

#[cfg(feature = "server")]
pub use auth::{PASSED_KEPT, SUSPECTS_KEPT, SUSPECT_FOR};
#[cfg(feature = "server")]
pub use exporter::{Config, Exporter, ServeError};
#[cfg(feature = "server")]
pub use server::{Limits, LIMITS, LISTEN_BACKLOG};
#[cfg(feature = "server")]
pub use shared::{Health, STALE_AFTER_INTERVALS};
#[cfg(feature = "server")]
pub use web_config::{WebConfig, WebConfigError, BCRYPT_COSTS};
