#![doc = include_str!("../README.md")]

pub mod context;
pub mod cuda;
pub mod device;
pub mod display;
pub mod error;
mod identity;
mod inventory;
mod model;
pub mod na;
pub mod plan;
pub mod snapshot;
pub mod text;
pub mod units;
pub mod vocabulary;

use std::sync::Mutex;

pub use context::{Context, ContextBuilder, FIXTURE_ENV_VAR};
pub use cuda::{CudaDevice, CudaDeviceOrder, CudaOrder, CudaOrderOrigin, CudaOrderSource};
pub use device::{Device, DeviceKind};
pub use display::Section;
pub use error::{Error, Result};
pub use gpu_backend::{DeviceId, Query};
pub use identity::DeviceIdentity;
pub use na::Na;
pub use plan::{Cadence, QueryPlan, ON_REQUEST_QUERIES};
pub use snapshot::{bar1_memory_answer, instance_id_answer, memory_answer};
pub use snapshot::{detail_queries, DeviceDetails, DETAIL_DYNAMIC_FIELDS};
pub use snapshot::{
    ClockInfos, ClockSpeedInfos, DeviceProcess, DeviceSnapshot, EccByLocation, EccErrors,
    FieldError, ProcessKind, SystemSnapshot, ThroughputInfo, UtilizationRates,
};
pub use units::{bytes2human, human2bytes, timedelta2human, utilization2string};

// ---- The igpu-style surface: one shared context, opened on first use ----

static DEFAULT_CONTEXT: Mutex<Option<Context>> = Mutex::new(None);

/// The context the functions below share: [`Context::open`] on first use (the real GPUs, or
/// the fixture named by `GPUSCOPE_FIXTURE`), kept for the life of the process. A failure is not
/// kept: the next call tries again.
///
/// # Errors
///
/// As [`Context::open`].
pub fn default_context() -> Result<Context> {
    let mut slot = match DEFAULT_CONTEXT.lock() {
        Ok(s) => s,
        Err(poisoned) => poisoned.into_inner(),
    };
    if let Some(ctx) = slot.as_ref() {
        return Ok(ctx.clone());
    }
    let ctx = Context::open()?;
    *slot = Some(ctx.clone());
    Ok(ctx)
}

/// Number of GPUs on this machine (igpu's `count_devices`).
///
/// # Errors
///
/// As [`Context::open`].
pub fn count_devices() -> Result<u32> {
    Ok(default_context()?.device_count())
}

/// The NVML index of every GPU (igpu's `devices_index`).
///
/// # Errors
///
/// As [`Context::open`].
pub fn devices_index() -> Result<Vec<u32>> {
    Ok((0..count_devices()?).collect())
}

/// Every GPU (igpu's `devices`).
///
/// # Errors
///
/// As [`Context::open`].
pub fn devices() -> Result<Vec<Device>> {
    Ok(default_context()?.devices())
}

/// GPU `index` (igpu's `get_device`).
///
/// # Errors
///
/// As [`Context::open`], and [`Error::NoSuchGpu`] ("no GPU with index 9: this machine has 8
/// GPUs (0-7)") for an index that does not exist.
pub fn get_device(index: u32) -> Result<Device> {
    default_context()?.device(index)
}

/// The devices `CUDA_VISIBLE_DEVICES` shows, in CUDA order (igpu's `visible_devices`).
///
/// # Errors
///
/// As [`Context::open`].
pub fn visible_devices() -> Result<Vec<Device>> {
    Ok(default_context()?
        .cuda_devices()
        .into_iter()
        .map(CudaDevice::into_device)
        .collect())
}

/// The ids of the devices `CUDA_VISIBLE_DEVICES` shows (igpu's `visible_devices_index`).
///
/// # Errors
///
/// As [`Context::open`].
pub fn visible_devices_index() -> Result<Vec<DeviceId>> {
    Ok(default_context()?.parse_cuda_visible_devices(cuda::visible_devices_from_env().as_deref()))
}

/// Number of devices `CUDA_VISIBLE_DEVICES` shows (igpu's `count_visible_devices`).
///
/// # Errors
///
/// As [`Context::open`].
pub fn count_visible_devices() -> Result<u32> {
    Ok(visible_devices_index()?.len() as u32)
}

/// [`Context::parse_cuda_visible_devices`] on the shared context (nvitop's function of the same
/// name; `None` means unset).
///
/// # Errors
///
/// As [`Context::open`].
pub fn parse_cuda_visible_devices(value: Option<&str>) -> Result<Vec<DeviceId>> {
    Ok(default_context()?.parse_cuda_visible_devices(value))
}

/// [`Context::normalize_cuda_visible_devices`] on the shared context.
///
/// # Errors
///
/// As [`Context::open`].
pub fn normalize_cuda_visible_devices(value: Option<&str>) -> Result<String> {
    Ok(default_context()?.normalize_cuda_visible_devices(value))
}
