//! GPM (GPU Performance Monitoring, Hopper and newer) through NVML's raw entry points.
//!
//! GPM metrics are measured between two samples. The backend takes one sample per device on
//! each `gpm_metrics` call and measures it against the sample the previous call took, so a
//! refresh never sleeps and asks GPM once: the first call per device only takes a sample and
//! answers [`BackendError::NoData`]. Support (`nvmlGpmQueryDeviceSupport`, on the physical GPU)
//! and a MIG device's GPU-instance id are asked until the device says it has GPM, then kept
//! until a sample fails (then asked again on the next call).
//!
//! nvml-wrapper's `gpm` module ties a sample's lifetime to a borrow of `Nvml`, which a sample
//! kept inside the backend between calls cannot have; the raw calls are used instead, with the
//! same structs (`nvmlGpmMetricsGet_t`, `nvmlGpmSupport_t`).

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::mem;
use std::ptr;
use std::sync::{Mutex, PoisonError};

use nvml_wrapper_sys::bindings as sys;

use super::conv::{check, make_object, symbol};
use crate::cost::logged;
use crate::error::{BackendError, Result};
use crate::types::{gpm_value_bounded, DeviceId, GpmMetrics, GPM_METRICS};

/// Which device a sample is taken of.
pub(super) enum Target {
    /// A physical GPU.
    Gpu {
        /// Its handle.
        device: sys::nvmlDevice_t,
    },
    /// A MIG device: sampled under its parent by GPU-instance id.
    Mig {
        /// The parent GPU's handle.
        parent: sys::nvmlDevice_t,
        /// The MIG device's handle (to read its GPU-instance id).
        mig: sys::nvmlDevice_t,
    },
}

/// A GPM sample allocated by NVML.
struct Sample(sys::nvmlGpmSample_t);

// SAFETY: a GPM sample is an opaque buffer owned by NVML; it is only used under the
// `GpmSamples` mutex, so never from two threads at once.
unsafe impl Send for Sample {}

/// What is kept per device that has GPM.
struct DeviceGpm {
    /// A MIG device's GPU-instance id.
    gpu_instance: Option<u32>,
    /// The sample the previous call took.
    previous: Option<Sample>,
}

/// Every device's GPM state.
#[derive(Default)]
pub(super) struct GpmSamples {
    devices: Mutex<HashMap<DeviceId, DeviceGpm>>,
}

impl GpmSamples {
    /// The metrics since the previous call for `id` (see the module).
    pub(super) fn metrics(
        &self,
        lib: &sys::NvmlLib,
        id: DeviceId,
        target: Target,
    ) -> Result<GpmMetrics> {
        let mut devices = self.devices.lock().unwrap_or_else(PoisonError::into_inner);
        let state = match devices.entry(id) {
            Entry::Occupied(e) => e.into_mut(),
            // Asked again on every call until the device says it has GPM: a device without
            // it still answers what NVML says of it now (a lost GPU is lost, not unsupported).
            Entry::Vacant(e) => {
                e.insert(first_look(lib, id, &target)?.ok_or(BackendError::NotSupported)?)
            }
        };
        let DeviceGpm {
            gpu_instance,
            previous,
        } = state;
        let sample = match take_sample(lib, id, &target, *gpu_instance) {
            Ok(sample) => sample,
            Err(e) => {
                // Forget the device (a MIG reconfiguration may have moved its GPU instance, a
                // lost GPU may come back): the next call asks support and the id again.
                if let Some(DeviceGpm {
                    previous: Some(earlier),
                    ..
                }) = devices.remove(&id)
                {
                    let _ = free(lib, earlier);
                }
                return Err(e);
            }
        };
        match previous.replace(sample) {
            None => Err(BackendError::NoData),
            Some(earlier) => {
                let now = previous.as_ref().map_or(ptr::null_mut(), |s| s.0);
                let answer = measure(lib, earlier.0, now);
                let _ = free(lib, earlier);
                answer
            }
        }
    }

    /// Frees every kept sample (before NVML shuts down).
    pub(super) fn free_all(&self, lib: &sys::NvmlLib) {
        let mut devices = self.devices.lock().unwrap_or_else(PoisonError::into_inner);
        for (_, state) in devices.drain() {
            if let Some(sample) = state.previous {
                let _ = free(lib, sample);
            }
        }
    }
}

/// Support, and a MIG device's GPU-instance id, asked until a device says it has GPM; `None`
/// for a device without GPM.
fn first_look(lib: &sys::NvmlLib, id: DeviceId, target: &Target) -> Result<Option<DeviceGpm>> {
    let gpu = Some(DeviceId::Gpu(id.physical_index()));
    let physical = match target {
        Target::Gpu { device } => *device,
        Target::Mig { parent, .. } => *parent,
    };
    let query = symbol(&lib.nvmlGpmQueryDeviceSupport)?;
    let mut support = sys::nvmlGpmSupport_t {
        version: sys::NVML_GPM_SUPPORT_VERSION,
        isSupportedDevice: 0,
    };
    // The calls inside a query are logged on their own too (see `crate::cost::logged`): the
    // query's line names only `nvmlGpmMetricsGet`.
    match logged("nvmlGpmQueryDeviceSupport", gpu, || {
        // SAFETY: a live handle and a writable struct with its version set.
        check(unsafe { query(physical, &mut support) }).map(|()| support.isSupportedDevice)
    }) {
        Ok(_) => {}
        Err(BackendError::NotSupported) => return Ok(None),
        Err(e) => return Err(e),
    }
    if support.isSupportedDevice == 0 {
        return Ok(None);
    }
    let gpu_instance = match target {
        Target::Gpu { .. } => None,
        Target::Mig { mig, .. } => {
            let func = symbol(&lib.nvmlDeviceGetGpuInstanceId)?;
            let mut gi = 0;
            logged("nvmlDeviceGetGpuInstanceId", Some(id), || {
                // SAFETY: a live MIG handle and a writable out-pointer.
                check(unsafe { func(*mig, &mut gi) }).map(|()| gi)
            })?;
            Some(gi)
        }
    };
    Ok(Some(DeviceGpm {
        gpu_instance,
        previous: None,
    }))
}

/// A new sample of the device, taken now.
fn take_sample(
    lib: &sys::NvmlLib,
    id: DeviceId,
    target: &Target,
    gpu_instance: Option<u32>,
) -> Result<Sample> {
    let gpu = Some(DeviceId::Gpu(id.physical_index()));
    let alloc = symbol(&lib.nvmlGpmSampleAlloc)?;
    let raw: sys::nvmlGpmSample_t = make_object(
        "nvmlGpmSampleAlloc",
        "nvmlGpmSampleAlloc gave a null sample",
        // SAFETY: a writable out-pointer for the new sample.
        |out| unsafe { alloc(out) },
    )?;
    let sample = Sample(raw);
    let taken = match (target, gpu_instance) {
        (Target::Mig { parent, .. }, Some(gi)) => {
            symbol(&lib.nvmlGpmMigSampleGet).and_then(|get| {
                logged("nvmlGpmMigSampleGet", gpu, || {
                    // SAFETY: a live parent handle and a sample this library allocated.
                    check(unsafe { get(*parent, gi, sample.0) })
                })
            })
        }
        (Target::Gpu { device }, _) | (Target::Mig { parent: device, .. }, None) => {
            symbol(&lib.nvmlGpmSampleGet).and_then(|get| {
                logged("nvmlGpmSampleGet", gpu, || {
                    // SAFETY: a live handle and a sample this library allocated.
                    check(unsafe { get(*device, sample.0) })
                })
            })
        }
    };
    match taken {
        Ok(()) => Ok(sample),
        Err(e) => {
            let _ = free(lib, sample);
            Err(e)
        }
    }
}

/// `nvmlGpmMetricsGet` between two samples, every metric of [`GPM_METRICS`]; a metric NVML
/// does not give, or gives out of bounds, is `None`.
fn measure(
    lib: &sys::NvmlLib,
    earlier: sys::nvmlGpmSample_t,
    now: sys::nvmlGpmSample_t,
) -> Result<GpmMetrics> {
    let get = symbol(&lib.nvmlGpmMetricsGet)?;
    // SAFETY: `nvmlGpmMetricsGet_t` is plain old data (numbers and pointers); all zeroes is a
    // valid value. Boxed: it holds 210 metrics.
    let mut request: Box<sys::nvmlGpmMetricsGet_t> = Box::new(unsafe { mem::zeroed() });
    request.version = sys::NVML_GPM_METRICS_GET_VERSION;
    request.numMetrics = GPM_METRICS.len() as u32;
    request.sample1 = earlier;
    request.sample2 = now;
    for (slot, (_, id, _)) in request.metrics.iter_mut().zip(GPM_METRICS) {
        slot.metricId = *id;
    }
    // SAFETY: a request with its version, count and two samples of this library set.
    check(unsafe { get(&mut *request) })?;
    let mut metrics = GpmMetrics::default();
    for (slot, (_, id, unit)) in request.metrics.iter().zip(GPM_METRICS) {
        if slot.metricId != *id || slot.nvmlReturn != sys::nvmlReturn_enum_NVML_SUCCESS {
            continue;
        }
        if let Some(field) = metrics.slot_by_id(*id) {
            *field = gpm_value_bounded(unit, slot.value);
        }
    }
    Ok(metrics)
}

/// Frees a sample, logged on its own (see `crate::cost::logged`). What it answers is only for
/// the log: nothing could be done about a failure to free.
fn free(lib: &sys::NvmlLib, sample: Sample) -> Result<()> {
    let func = symbol(&lib.nvmlGpmSampleFree)?;
    // SAFETY: a sample this library allocated, freed once (it is consumed here).
    logged("nvmlGpmSampleFree", None, || {
        check(unsafe { func(sample.0) })
    })
}
