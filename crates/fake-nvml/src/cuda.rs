//! The exported CUDA driver entry points, for the same library installed as `libcuda.so.1`.
//!
//! They answer from the fixture's `system.cuda_device_order` (UUIDs in CUDA's ordinal order),
//! after `CUDA_VISIBLE_DEVICES` in its simple forms (see the crate docs): enough for tools that
//! map CUDA ordinals to NVML devices (nvitop's `CudaDevice`, igpu) to run without a GPU.

#![allow(non_snake_case)]

use std::ffi::{c_char, c_int, c_uint};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use gpu_backend::GpuBackend;

use crate::abi::cuda::*;
use crate::abi::{CUdevice, CUresult, CUuuid};
use crate::state::{self, CudaServed};

fn guarded(body: impl FnOnce() -> CUresult) -> CUresult {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(CUDA_ERROR_UNKNOWN)
}

/// Runs a body that needs `cuInit`, with the panic guard.
fn with_cuda(body: impl FnOnce(&CudaServed) -> CUresult) -> CUresult {
    guarded(|| match state::cuda_served() {
        Some(served) => body(&served),
        None => CUDA_ERROR_NOT_INITIALIZED,
    })
}

/// The visible device of an ordinal.
fn visible(served: &CudaServed, dev: CUdevice) -> Option<&(String, Option<gpu_backend::DeviceId>)> {
    usize::try_from(dev)
        .ok()
        .and_then(|i| served.visible.get(i))
}

/// The 16 bytes of a `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` (or `MIG-...`) UUID.
pub fn uuid_bytes(uuid: &str) -> Option<[u8; 16]> {
    let hex: Vec<u8> = uuid
        .split_once('-')
        .map_or(uuid, |(_, rest)| rest)
        .bytes()
        .filter(|&b| b != b'-')
        .collect();
    if hex.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, pair) in hex.chunks(2).enumerate() {
        let text = std::str::from_utf8(pair).ok()?;
        out[i] = u8::from_str_radix(text, 16).ok()?;
    }
    Some(out)
}

/// Writes a NUL-terminated string, truncated to `len` bytes as CUDA does.
///
/// # Safety
/// `buf` must be valid for `len` bytes of writes.
unsafe fn put_str_truncated(buf: *mut c_char, len: c_int, s: &str) -> CUresult {
    let Ok(len) = usize::try_from(len) else {
        return CUDA_ERROR_INVALID_VALUE;
    };
    if buf.is_null() || len == 0 {
        return CUDA_ERROR_INVALID_VALUE;
    }
    let n = s.len().min(len - 1);
    std::ptr::copy_nonoverlapping(s.as_ptr(), buf.cast::<u8>(), n);
    buf.add(n).write(0);
    CUDA_SUCCESS
}

/// `cuInit`: loads the fixture named by `GPUSCOPE_FAKE_NVML_FIXTURE` and applies
/// `CUDA_VISIBLE_DEVICES`. Flags must be 0. `CUDA_ERROR_NO_DEVICE` when the fixture cannot be
/// read (one line on stderr says why), has no CUDA order, or no device is visible.
#[no_mangle]
pub extern "C" fn cuInit(flags: c_uint) -> CUresult {
    guarded(|| {
        if flags != 0 {
            return CUDA_ERROR_INVALID_VALUE;
        }
        if state::cuda_init().is_err() {
            return CUDA_ERROR_NO_DEVICE;
        }
        match state::cuda_served() {
            Some(s) if !s.visible.is_empty() => CUDA_SUCCESS,
            _ => CUDA_ERROR_NO_DEVICE,
        }
    })
}

/// `cuDriverGetVersion`: the fixture's `system.cuda_driver_version` (works before `cuInit`).
///
/// # Safety
///
/// `version` must be null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn cuDriverGetVersion(version: *mut c_int) -> CUresult {
    guarded(|| {
        if version.is_null() {
            return CUDA_ERROR_INVALID_VALUE;
        }
        let Some(fixture) = state::cuda_fixture() else {
            return CUDA_ERROR_NOT_INITIALIZED;
        };
        match fixture.system.cuda_driver_version.ok() {
            Some(&v) => {
                version.write_unaligned(v);
                CUDA_SUCCESS
            }
            None => CUDA_ERROR_NOT_INITIALIZED,
        }
    })
}

/// `cuDeviceGetCount`: the number of visible devices.
///
/// # Safety
///
/// `count` must be null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetCount(count: *mut c_int) -> CUresult {
    with_cuda(|served| {
        if count.is_null() {
            return CUDA_ERROR_INVALID_VALUE;
        }
        count.write_unaligned(c_int::try_from(served.visible.len()).unwrap_or(c_int::MAX));
        CUDA_SUCCESS
    })
}

/// `cuDeviceGet`: the device of an ordinal (the ordinal itself).
///
/// # Safety
///
/// `device` must be null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGet(device: *mut CUdevice, ordinal: c_int) -> CUresult {
    with_cuda(|served| {
        if device.is_null() {
            return CUDA_ERROR_INVALID_VALUE;
        }
        if visible(served, ordinal).is_none() {
            return CUDA_ERROR_INVALID_DEVICE;
        }
        device.write_unaligned(ordinal);
        CUDA_SUCCESS
    })
}

unsafe fn device_uuid(uuid: *mut CUuuid, dev: CUdevice) -> CUresult {
    with_cuda(|served| {
        if uuid.is_null() {
            return CUDA_ERROR_INVALID_VALUE;
        }
        let Some((text, _)) = visible(served, dev) else {
            return CUDA_ERROR_INVALID_DEVICE;
        };
        let Some(bytes) = uuid_bytes(text) else {
            return CUDA_ERROR_UNKNOWN;
        };
        uuid.write_unaligned(CUuuid {
            bytes: bytes.map(|b| b as c_char),
        });
        CUDA_SUCCESS
    })
}

/// `cuDeviceGetUuid`: the 16 bytes of the device's UUID.
///
/// # Safety
///
/// `uuid` must be null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetUuid(uuid: *mut CUuuid, dev: CUdevice) -> CUresult {
    device_uuid(uuid, dev)
}

/// `cuDeviceGetUuid_v2`: as [`cuDeviceGetUuid`].
///
/// # Safety
///
/// `uuid` must be null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetUuid_v2(uuid: *mut CUuuid, dev: CUdevice) -> CUresult {
    device_uuid(uuid, dev)
}

/// `cuDeviceGetPCIBusId`: `dddd:bb:dd.0` (CUDA's form, 4-digit domain), from the NVML device
/// with the same UUID; truncated to `len` bytes.
///
/// # Safety
///
/// `bus_id` must be null or valid for `len` bytes of writes.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetPCIBusId(
    bus_id: *mut c_char,
    len: c_int,
    dev: CUdevice,
) -> CUresult {
    with_cuda(|served| {
        let Some((_, nvml)) = visible(served, dev) else {
            return CUDA_ERROR_INVALID_DEVICE;
        };
        let Some(pci) = nvml.and_then(|id| served.backend.pci_info(id).ok()) else {
            return CUDA_ERROR_INVALID_DEVICE;
        };
        let text = format!("{:04x}:{:02x}:{:02x}.0", pci.domain, pci.bus, pci.device);
        put_str_truncated(bus_id, len, &text)
    })
}

/// `cuDeviceGetName`: the NVML name of the device with the same UUID; truncated to `len` bytes.
///
/// # Safety
///
/// `name` must be null or valid for `len` bytes of writes.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetName(name: *mut c_char, len: c_int, dev: CUdevice) -> CUresult {
    with_cuda(|served| {
        let Some((_, nvml)) = visible(served, dev) else {
            return CUDA_ERROR_INVALID_DEVICE;
        };
        let backend: &Arc<gpu_backend::ReplayBackend> = &served.backend;
        let Some(text) = nvml.and_then(|id| backend.name(id).ok()) else {
            return CUDA_ERROR_INVALID_DEVICE;
        };
        put_str_truncated(name, len, &text)
    })
}
