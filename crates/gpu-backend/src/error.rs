//! The one error type every backend returns, mapped one to one from NVML's return codes.

use serde::{Deserialize, Serialize};

/// What a backend answered instead of a value.
///
/// Each variant keeps what NVML said, so nothing is lost between the driver and the layers
/// above. Seven of them mean "cannot tell" rather than a failure:
/// [`BackendError::NotSupported`], [`BackendError::NoPermission`],
/// [`BackendError::FunctionNotFound`], [`BackendError::Deprecated`], [`BackendError::NoData`],
/// [`BackendError::NotReady`] and a fixture's
/// [`BackendError::NotRecorded`];
/// [`BackendError::is_not_available`] groups them so that the upper layers can turn them into
/// N/A values and keep going.
///
/// In a fixture an error is written as its snake_case name (`"not_supported"`), or as
/// `{"unknown": 999}` / `{"other": "text"}` for the two variants that carry data.
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum BackendError {
    /// NVML_ERROR_NOT_SUPPORTED (3): the device or driver does not support the query.
    #[error("not supported by this device or driver")]
    NotSupported,
    /// NVML_ERROR_NO_PERMISSION (4): the caller lacks the privileges for the query.
    #[error("insufficient permissions")]
    NoPermission,
    /// NVML_ERROR_NOT_FOUND (6): the object asked for does not exist (e.g. an empty MIG slot).
    #[error("not found")]
    NotFound,
    /// NVML_ERROR_GPU_IS_LOST (15): the GPU has fallen off the bus or is otherwise inaccessible.
    #[error("the GPU is lost (fell off the bus or is otherwise inaccessible)")]
    GpuLost,
    /// NVML_ERROR_FUNCTION_NOT_FOUND (13): the loaded driver library lacks the entry point,
    /// usually because the driver is older than the call.
    #[error("function not found in the NVML library (driver too old?)")]
    FunctionNotFound,
    /// NVML_ERROR_INSUFFICIENT_SIZE (7): a buffer was too small.
    #[error("insufficient buffer size")]
    InsufficientSize,
    /// NVML_ERROR_TIMEOUT (10): the driver timed out.
    #[error("timed out")]
    Timeout,
    /// NVML_ERROR_UNINITIALIZED (1): NVML was not initialised.
    #[error("NVML is not initialized")]
    Uninitialized,
    /// NVML_ERROR_DRIVER_NOT_LOADED (9): the NVIDIA kernel driver is not running.
    #[error("the NVIDIA driver is not loaded")]
    DriverNotLoaded,
    /// NVML_ERROR_LIBRARY_NOT_FOUND (12): the NVML library could not be found or loaded.
    /// [`crate::nvml::OpenError`] names the library and gives the loader's reason.
    #[error("the NVML library could not be loaded")]
    LibraryNotFound,
    /// NVML_ERROR_INVALID_ARGUMENT (2): an argument was out of range (e.g. a fan or link index).
    #[error("invalid argument")]
    InvalidArgument,
    /// NVML_ERROR_DEPRECATED (26): the driver no longer provides the query (nvidia-smi prints
    /// "Requested functionality has been deprecated"). Shown as N/A.
    #[error("deprecated by this driver")]
    Deprecated,
    /// NVML_ERROR_NO_DATA (21): nothing to tell yet. GPM metrics answer it on a device's first
    /// refresh, before there is an earlier sample to measure from. Shown as N/A.
    #[error("no data yet")]
    NoData,
    /// NVML_ERROR_NOT_READY (27): the driver has no answer yet. An H100 answers it to
    /// `nvmlDeviceGetLastBBXFlushTime` while the inforom's black box has not been flushed;
    /// nvidia-smi -q prints N/A there. Shown as N/A.
    #[error("not ready yet")]
    NotReady,
    /// Not an NVML code: the fixture being replayed has no answer for this query (it was
    /// recorded before the query existed, or the field was left out). Shown as N/A, like
    /// [`BackendError::NotSupported`], but kept apart from it: the device may well support the
    /// query. A stand-in NVML library serves it as `NVML_ERROR_NOT_SUPPORTED`.
    #[error("not recorded in this fixture")]
    NotRecorded,
    /// Any other NVML return code, kept as the number NVML gave.
    #[error("NVML error code {0}")]
    Unknown(i32),
    /// A failure that did not come from NVML as a code (for example a string that was not UTF-8).
    #[error("{0}")]
    Other(String),
}

/// NVML's numeric return codes, as in `nvml.h`.
pub mod nvml_codes {
    #![allow(missing_docs)]
    pub const SUCCESS: i32 = 0;
    pub const UNINITIALIZED: i32 = 1;
    pub const INVALID_ARGUMENT: i32 = 2;
    pub const NOT_SUPPORTED: i32 = 3;
    pub const NO_PERMISSION: i32 = 4;
    pub const ALREADY_INITIALIZED: i32 = 5;
    pub const NOT_FOUND: i32 = 6;
    pub const INSUFFICIENT_SIZE: i32 = 7;
    pub const INSUFFICIENT_POWER: i32 = 8;
    pub const DRIVER_NOT_LOADED: i32 = 9;
    pub const TIMEOUT: i32 = 10;
    pub const IRQ_ISSUE: i32 = 11;
    pub const LIBRARY_NOT_FOUND: i32 = 12;
    pub const FUNCTION_NOT_FOUND: i32 = 13;
    pub const CORRUPTED_INFOROM: i32 = 14;
    pub const GPU_IS_LOST: i32 = 15;
    pub const RESET_REQUIRED: i32 = 16;
    pub const OPERATING_SYSTEM: i32 = 17;
    pub const LIB_RM_VERSION_MISMATCH: i32 = 18;
    pub const IN_USE: i32 = 19;
    pub const MEMORY: i32 = 20;
    pub const NO_DATA: i32 = 21;
    pub const ARGUMENT_VERSION_MISMATCH: i32 = 25;
    pub const DEPRECATED: i32 = 26;
    pub const NOT_READY: i32 = 27;
    pub const UNKNOWN: i32 = 999;
}

/// The parts of one answer that are each a value or "cannot tell" (a device that reports some
/// of a struct's fields and not others): `None` for a part that cannot be told
/// ([`BackendError::is_not_available`]); the first such error when no part is told; any other
/// failure as it is. NVML's field values and nvidia-smi's printed readings both come this way.
pub fn optional_parts<const N: usize, T: Copy>(
    parts: impl IntoIterator<Item = Result<T>>,
) -> Result<[Option<T>; N]> {
    let mut out = [None; N];
    let mut first_error = None;
    for (slot, part) in out.iter_mut().zip(parts) {
        match part {
            Ok(v) => *slot = Some(v),
            Err(e) if e.is_not_available() => {
                first_error.get_or_insert(e);
            }
            Err(e) => return Err(e),
        }
    }
    match first_error {
        Some(e) if out.iter().all(Option::is_none) => Err(e),
        _ => Ok(out),
    }
}

impl BackendError {
    /// True for the answers that mean "this GPU or driver cannot tell": not supported, no
    /// permission, function not found, deprecated, no data or not ready yet, and a fixture's
    /// "not recorded". The layers above show these as N/A.
    pub fn is_not_available(&self) -> bool {
        matches!(
            self,
            BackendError::NotSupported
                | BackendError::NoPermission
                | BackendError::FunctionNotFound
                | BackendError::NotRecorded
                | BackendError::Deprecated
                | BackendError::NoData
                | BackendError::NotReady
        )
    }

    /// The error for an NVML return code. `0` (success) has no error and maps to
    /// `Unknown(0)`; callers only use this for failures.
    pub fn from_nvml_code(code: i32) -> BackendError {
        use nvml_codes::*;
        match code {
            NOT_SUPPORTED => BackendError::NotSupported,
            NO_PERMISSION => BackendError::NoPermission,
            NOT_FOUND => BackendError::NotFound,
            GPU_IS_LOST => BackendError::GpuLost,
            FUNCTION_NOT_FOUND => BackendError::FunctionNotFound,
            INSUFFICIENT_SIZE => BackendError::InsufficientSize,
            TIMEOUT => BackendError::Timeout,
            UNINITIALIZED => BackendError::Uninitialized,
            DRIVER_NOT_LOADED => BackendError::DriverNotLoaded,
            LIBRARY_NOT_FOUND => BackendError::LibraryNotFound,
            INVALID_ARGUMENT => BackendError::InvalidArgument,
            DEPRECATED => BackendError::Deprecated,
            NO_DATA => BackendError::NoData,
            NOT_READY => BackendError::NotReady,
            other => BackendError::Unknown(other),
        }
    }

    /// The NVML return code that stands for this error (`Other` maps to NVML_ERROR_UNKNOWN).
    pub fn nvml_code(&self) -> i32 {
        use nvml_codes::*;
        match self {
            BackendError::NotSupported | BackendError::NotRecorded => NOT_SUPPORTED,
            BackendError::NoPermission => NO_PERMISSION,
            BackendError::NotFound => NOT_FOUND,
            BackendError::GpuLost => GPU_IS_LOST,
            BackendError::FunctionNotFound => FUNCTION_NOT_FOUND,
            BackendError::InsufficientSize => INSUFFICIENT_SIZE,
            BackendError::Timeout => TIMEOUT,
            BackendError::Uninitialized => UNINITIALIZED,
            BackendError::DriverNotLoaded => DRIVER_NOT_LOADED,
            BackendError::LibraryNotFound => LIBRARY_NOT_FOUND,
            BackendError::InvalidArgument => INVALID_ARGUMENT,
            BackendError::Deprecated => DEPRECATED,
            BackendError::NoData => NO_DATA,
            BackendError::NotReady => NOT_READY,
            BackendError::Unknown(code) => *code,
            BackendError::Other(_) => UNKNOWN,
        }
    }
}

/// Shorthand for a backend answer.
pub type Result<T, E = BackendError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvml_codes_round_trip_for_every_named_error() {
        for code in [1, 2, 3, 4, 6, 7, 9, 10, 12, 13, 15, 999, 25, 17, 26, 21, 27] {
            assert_eq!(
                BackendError::from_nvml_code(code).nvml_code(),
                code,
                "code {code}"
            );
        }
    }

    #[test]
    fn not_available_covers_exactly_the_na_kinds() {
        assert!(BackendError::NotSupported.is_not_available());
        assert!(BackendError::NoPermission.is_not_available());
        assert!(BackendError::FunctionNotFound.is_not_available());
        assert!(BackendError::NotRecorded.is_not_available());
        assert!(BackendError::Deprecated.is_not_available());
        assert!(BackendError::NoData.is_not_available());
        assert!(BackendError::NotReady.is_not_available());
        assert!(!BackendError::GpuLost.is_not_available());
        assert!(!BackendError::Unknown(999).is_not_available());
    }

    #[test]
    fn errors_serialize_as_snake_case_names() {
        assert_eq!(
            serde_json::to_string(&BackendError::GpuLost).unwrap(),
            "\"gpu_lost\""
        );
        assert_eq!(
            serde_json::to_string(&BackendError::Unknown(42)).unwrap(),
            "{\"unknown\":42}"
        );
    }
}
