//! The error type of this crate.

use gpu_backend::{BackendError, DeviceId, FixtureError};

/// What went wrong opening a context or finding a device.
///
/// Metrics never fail this way: a metric that cannot be read is an [`crate::Na`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The backend failed at something the context cannot do without.
    #[error("{doing}: {source}")]
    Backend {
        /// What the context was doing, e.g. `"opening NVML"`.
        doing: &'static str,
        /// What the backend answered.
        source: BackendError,
    },
    /// A fixture could not be read.
    #[error(transparent)]
    Fixture(#[from] FixtureError),
    /// A source could not be opened (a frame out of range, NVML that cannot be opened).
    #[error(transparent)]
    Source(#[from] gpu_backend::SourceError),
    /// This build has no NVML backend (the `nvml` feature is off) and no fixture was named.
    #[error(
        "this build of gpu-devices has no NVML backend (feature \"nvml\"); \
         name a fixture with GPUSCOPE_FIXTURE"
    )]
    NoNvml,
    /// No physical GPU has this index.
    #[error("no GPU with index {index}: {}", machine_has(*.count, "GPU"))]
    NoSuchGpu {
        /// The index asked for.
        index: u32,
        /// How many GPUs there are.
        count: u32,
    },
    /// The GPU has no MIG device with this index.
    #[error(
        "GPU {parent} has no MIG device with index {index}: {}",
        mig_devices(available)
    )]
    NoSuchMigDevice {
        /// The parent GPU's index.
        parent: u32,
        /// The MIG index asked for.
        index: u32,
        /// The MIG indices it has.
        available: Vec<u32>,
    },
    /// No device has this id.
    #[error("no device with id {0}")]
    NoSuchDevice(DeviceId),
    /// No device has a UUID that is, or starts with, this text.
    #[error("no device with UUID {0:?}")]
    UuidNotFound(String),
    /// More than one device's UUID starts with this text.
    #[error("the UUID prefix {prefix:?} is ambiguous: it matches {matches:?}")]
    AmbiguousUuid {
        /// The text given.
        prefix: String,
        /// The UUIDs it matches.
        matches: Vec<String>,
    },
    /// No GPU sits at this PCI bus id.
    #[error("no GPU with PCI bus id {0:?}")]
    BusIdNotFound(String),
    /// No CUDA device has this ordinal under the current `CUDA_VISIBLE_DEVICES`.
    #[error("no CUDA device with index {index}: {}", cuda_shows(*.count))]
    NoSuchCudaDevice {
        /// The CUDA ordinal asked for.
        index: u32,
        /// How many CUDA devices are visible.
        count: u32,
    },
    /// CUDA does not show this device under the current `CUDA_VISIBLE_DEVICES`.
    #[error("device {device} is not visible to CUDA: {}", cuda_shows(*.count))]
    NotVisibleToCuda {
        /// The device asked about.
        device: DeviceId,
        /// How many CUDA devices are visible.
        count: u32,
    },
}

/// "this machine has 8 GPUs (0-7)", "this machine has 1 GPU (0)", "this machine has no GPUs".
fn machine_has(count: u32, what: &str) -> String {
    match count {
        0 => format!("this machine has no {what}s"),
        1 => format!("this machine has 1 {what} (0)"),
        n => format!("this machine has {n} {what}s (0-{})", n - 1),
    }
}

/// "it has no MIG devices (MIG mode is off, or no instance is made)" or "its MIG devices are
/// 0, 1, 3".
fn mig_devices(available: &[u32]) -> String {
    if available.is_empty() {
        return "it has no MIG devices (MIG mode is off, or no instance is made)".to_string();
    }
    let list: Vec<String> = available.iter().map(u32::to_string).collect();
    format!("its MIG devices are {}", list.join(", "))
}

/// "CUDA shows 2 devices (0-1)".
fn cuda_shows(count: u32) -> String {
    match count {
        0 => "CUDA shows no devices".to_string(),
        1 => "CUDA shows 1 device (0)".to_string(),
        n => format!("CUDA shows {n} devices (0-{})", n - 1),
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The error of a source that could not be opened: a fixture's as [`Error::Fixture`],
    /// NVML's as [`Error::Backend`], a build without NVML as [`Error::NoNvml`], the rest (a
    /// frame out of range) as [`Error::Source`].
    pub fn from_source(e: gpu_backend::SourceError) -> Error {
        match e {
            gpu_backend::SourceError::Fixture(e) => Error::Fixture(e),
            #[cfg(feature = "nvml")]
            gpu_backend::SourceError::Nvml(e) => Error::Backend {
                doing: "opening NVML",
                source: e.error,
            },
            gpu_backend::SourceError::NoNvml => Error::NoNvml,
            other => Error::Source(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_gpu_says_what_there_is() {
        let e = Error::NoSuchGpu { index: 9, count: 8 };
        assert_eq!(
            e.to_string(),
            "no GPU with index 9: this machine has 8 GPUs (0-7)"
        );
        let e = Error::NoSuchGpu { index: 1, count: 1 };
        assert_eq!(
            e.to_string(),
            "no GPU with index 1: this machine has 1 GPU (0)"
        );
        let e = Error::NoSuchGpu { index: 0, count: 0 };
        assert_eq!(
            e.to_string(),
            "no GPU with index 0: this machine has no GPUs"
        );
    }
}
