//! The exported NVML entry points.
//!
//! Every entry point runs its body inside [`std::panic::catch_unwind`] (a panic answers
//! `NVML_ERROR_UNKNOWN`), answers `NVML_ERROR_UNINITIALIZED` before init, answers
//! `NVML_ERROR_FUNCTION_NOT_FOUND` when the fixture lists it in `nvml_missing_functions`, and then
//! asks the fixture's [`ReplayBackend`], turning a recorded error into its NVML code.

#![allow(non_snake_case)]

use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, c_uint, c_ulonglong, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use gpu_backend::{
    pcie_link_max_speed_nvml_code, Answer, BackendError, ClockType, DeviceId, EccCounter,
    EccErrorKind, EventKind, GpuBackend, MemoryLocation, PciAddress, PcieDirection, ProcessInfo,
    ReplayBackend, RetirementCause, TemperatureThreshold, GPM_METRICS,
};

use crate::abi::*;
use crate::state;

/// An NVML return code on its way out.
pub(crate) struct Code(pub nvmlReturn_t);

impl From<BackendError> for Code {
    fn from(e: BackendError) -> Code {
        Code(e.nvml_code() as nvmlReturn_t)
    }
}

const INVALID: Code = Code(ret::INVALID_ARGUMENT);

/// What a call is served from.
pub(crate) struct Ctx {
    b: Arc<ReplayBackend>,
    /// How the recording's clock maps onto this machine's.
    time: state::ReplayTime,
}

// Handles are small numbers dressed as pointers: never null, never dereferenced, the same for a
// device across init/shutdown cycles. GPU `p` is `BASE + p * GPU_STRIDE`; its MIG slot `s` adds
// `(s + 1) * MIG_STRIDE`.
const HANDLE_BASE: usize = 0x6E76_0000;
const GPU_STRIDE: usize = 0x1_0000;
const MIG_STRIDE: usize = 0x100;

/// The handle of a device.
pub fn handle_of(id: DeviceId) -> nvmlDevice_t {
    let (parent, slot) = match id {
        DeviceId::Gpu(p) => (p as usize, 0),
        DeviceId::Mig { parent, index } => (parent as usize, index as usize + 1),
    };
    (HANDLE_BASE + parent * GPU_STRIDE + slot * MIG_STRIDE) as nvmlDevice_t
}

/// The device a handle stands for, whether or not the fixture holds it.
pub fn device_of(handle: nvmlDevice_t) -> Option<DeviceId> {
    let off = (handle as usize).checked_sub(HANDLE_BASE)?;
    if off % MIG_STRIDE != 0 {
        return None;
    }
    let parent = u32::try_from(off / GPU_STRIDE).ok()?;
    match (off % GPU_STRIDE) / MIG_STRIDE {
        0 => Some(DeviceId::Gpu(parent)),
        slot => Some(DeviceId::Mig {
            parent,
            index: slot as u32 - 1,
        }),
    }
}

thread_local! {
    /// The device the entry point running on this thread was asked about, for the call log
    /// ([`state::served`]): the first handle it looked at, or the GPU of an index.
    static CALL_DEVICE: std::cell::Cell<Option<DeviceId>> = const { std::cell::Cell::new(None) };
}

/// Notes `id` as the device of the call in progress, unless one is noted already.
fn note_device(id: Option<DeviceId>) {
    CALL_DEVICE.with(|d| {
        if d.get().is_none() {
            d.set(id);
        }
    });
}

impl Ctx {
    /// The device of a handle the fixture holds.
    fn dev(&self, handle: nvmlDevice_t) -> Result<DeviceId, Code> {
        note_device(device_of(handle));
        match device_of(handle) {
            Some(id) if self.b.fixture().devices.contains_key(&id) => Ok(id),
            _ => Err(INVALID),
        }
    }

    /// The physical device of a handle.
    fn gpu(&self, handle: nvmlDevice_t) -> Result<DeviceId, Code> {
        match self.dev(handle)? {
            id @ DeviceId::Gpu(_) => Ok(id),
            DeviceId::Mig { .. } => Err(INVALID),
        }
    }
}

/// Runs one entry point's body with the guards every entry point has.
fn call(name: &'static str, body: impl FnOnce(&Ctx) -> Result<(), Code>) -> nvmlReturn_t {
    CALL_DEVICE.with(|d| d.set(None));
    let code = serve(name, body);
    state::served(name, CALL_DEVICE.with(|d| d.take()), code);
    code
}

/// [`call`] without the call log.
fn serve(name: &'static str, body: impl FnOnce(&Ctx) -> Result<(), Code>) -> nvmlReturn_t {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let Some((b, time)) = state::nvml_served() else {
            return Err(Code(ret::UNINITIALIZED));
        };
        state::hang_while_asked();
        if b.fixture().nvml_missing_functions.iter().any(|f| f == name) {
            return Err(Code(ret::FUNCTION_NOT_FOUND));
        }
        body(&Ctx { b, time })
    }));
    match outcome {
        Ok(Ok(())) => ret::SUCCESS,
        Ok(Err(Code(code))) => code,
        Err(_) => ret::UNKNOWN,
    }
}

/// Runs a body that needs no init, with the panic guard.
fn guarded(body: impl FnOnce() -> nvmlReturn_t) -> nvmlReturn_t {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(ret::UNKNOWN)
}

/// [`guarded`] for an NVML entry point that needs no init (init and shutdown), in the call
/// log.
fn guarded_nvml(name: &'static str, body: impl FnOnce() -> nvmlReturn_t) -> nvmlReturn_t {
    let code = guarded(body);
    state::served(name, None, code);
    code
}

/// Fails on a null pointer.
fn nn<T>(p: *const T) -> Result<(), Code> {
    if p.is_null() {
        Err(INVALID)
    } else {
        Ok(())
    }
}

/// Writes through a pointer already checked by [`nn`].
///
/// # Safety
/// `p` must be valid for a write of `T`.
unsafe fn put<T>(p: *mut T, value: T) -> Result<(), Code> {
    nn(p)?;
    p.write_unaligned(value);
    Ok(())
}

/// Writes a NUL-terminated string into a buffer of `len` bytes: `INSUFFICIENT_SIZE` (and an empty
/// string, if there is room for one) when it does not fit.
///
/// # Safety
/// `buf` must be valid for `len` bytes of writes.
unsafe fn put_str(buf: *mut c_char, len: c_uint, s: &str) -> Result<(), Code> {
    nn(buf)?;
    let bytes = s.as_bytes();
    if bytes.len() >= len as usize {
        if len > 0 {
            buf.write(0);
        }
        return Err(Code(ret::INSUFFICIENT_SIZE));
    }
    std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), bytes.len());
    buf.add(bytes.len()).write(0);
    Ok(())
}

/// Copies a string into a fixed C array, truncating, always NUL-terminated.
fn fill_array<const N: usize>(dst: &mut [c_char; N], s: &str) {
    let n = s.len().min(N.saturating_sub(1));
    for (d, &b) in dst.iter_mut().zip(&s.as_bytes()[..n]) {
        *d = b as c_char;
    }
    if let Some(last) = dst.get_mut(n) {
        *last = 0;
    }
}

/// The count protocol of list queries: a buffer smaller than the list (or none, with a list
/// that is not empty) gives `INSUFFICIENT_SIZE` with `*count` set to the length needed.
///
/// # Safety
/// `count` must be valid for reads and writes; `buf` for `*count` elements.
unsafe fn put_list<T: Copy>(count: *mut c_uint, buf: *mut T, items: &[T]) -> Result<(), Code> {
    nn(count)?;
    let needed = c_uint::try_from(items.len()).map_err(|_| Code(ret::UNKNOWN))?;
    let room = count.read_unaligned();
    if needed > room || (needed > 0 && buf.is_null()) {
        count.write_unaligned(needed);
        return Err(Code(ret::INSUFFICIENT_SIZE));
    }
    for (i, item) in items.iter().enumerate() {
        buf.add(i).write_unaligned(*item);
    }
    count.write_unaligned(needed);
    Ok(())
}

fn enable(on: bool) -> nvmlEnableState_t {
    c_uint::from(on)
}

/// NVML's `nvmlMemoryErrorType_t` (0 corrected, 1 uncorrected) and `nvmlEccCounterType_t`
/// (0 volatile, 1 aggregate), as the ECC calls take them.
fn ecc_kind_and_counter(
    error_type: c_uint,
    counter_type: c_uint,
) -> Result<(EccErrorKind, EccCounter), Code> {
    let kind = EccErrorKind::from_nvml(error_type).ok_or(INVALID)?;
    let counter = EccCounter::from_nvml(counter_type).ok_or(INVALID)?;
    Ok((kind, counter))
}

fn clock_type(t: c_uint) -> Result<ClockType, Code> {
    ClockType::from_nvml(t).ok_or(INVALID)
}

fn no_id(id: Option<u32>) -> c_uint {
    id.unwrap_or(NVML_NO_INSTANCE_ID)
}

fn proc_v1(p: &ProcessInfo) -> nvmlProcessInfo_v1_t {
    nvmlProcessInfo_v1_t {
        pid: p.pid,
        usedGpuMemory: p.used_gpu_memory.unwrap_or(NVML_VALUE_NOT_AVAILABLE_ULL),
    }
}

fn proc_v2(p: &ProcessInfo) -> nvmlProcessInfo_t {
    nvmlProcessInfo_t {
        pid: p.pid,
        usedGpuMemory: p.used_gpu_memory.unwrap_or(NVML_VALUE_NOT_AVAILABLE_ULL),
        gpuInstanceId: no_id(p.gpu_instance_id),
        computeInstanceId: no_id(p.compute_instance_id),
    }
}

/// Reads a C string argument.
///
/// # Safety
/// `p` must be null or point to a NUL-terminated string.
unsafe fn arg_str(p: *const c_char) -> Result<String, Code> {
    nn(p)?;
    Ok(CStr::from_ptr(p).to_string_lossy().into_owned())
}

fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Defines exported NVML entry points whose bodies run under [`call`].
macro_rules! nvml_api {
    ($(
        $(#[doc = $doc:expr])*
        fn $name:ident($($arg:ident : $ty:ty),* $(,)?) |$ctx:ident| $body:block
    )*) => {$(
        $(#[doc = $doc])*
        ///
        /// # Safety
        ///
        /// Pointer arguments must be null or valid for the reads and writes NVML documents for
        /// this call.
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> nvmlReturn_t {
            call(stringify!($name), |$ctx: &Ctx| -> Result<(), Code> { $body })
        }
    )*};
}

/// Defines device getters of one plain value: `fn(device, *mut T)`. A row with `, version N`
/// first checks the caller's `version` against version N of `T` (nvml.h's `_vN_t` structs),
/// and one with `.field` fills only that field of the caller's struct.
macro_rules! nvml_value_getters {
    ($(
        $(#[doc = $doc:expr])*
        fn $name:ident(*mut $ty:ty $(, version $v:literal)?) $(.$field:ident)? = |$b:ident, $id:ident| $value:expr;
    )*) => {
        nvml_api! {$(
            $(#[doc = $doc])*
            fn $name(device: nvmlDevice_t, out: *mut $ty) |ctx| {
                let $id = ctx.dev(device)?;
                nn(out)?;
                $(version((*out).version, struct_version::<$ty>($v))?;)?
                let $b = &ctx.b;
                nvml_value_getters!(@store out $(.$field)? = $value)
            }
        )*}
    };
    (@store $out:ident = $value:expr) => {
        put($out, $value)
    };
    (@store $out:ident.$field:ident = $value:expr) => {{
        (*$out).$field = $value;
        Ok(())
    }};
}

/// Defines device getters of one string: `fn(device, *mut c_char, length)`.
macro_rules! nvml_string_getters {
    ($( $(#[doc = $doc:expr])* fn $name:ident = $method:ident; )*) => {
        nvml_api! {$(
            $(#[doc = $doc])*
            fn $name(device: nvmlDevice_t, buf: *mut c_char, length: c_uint) |ctx| {
                let id = ctx.dev(device)?;
                nn(buf)?;
                put_str(buf, length, &ctx.b.$method(id)?)
            }
        )*}
    };
}

/// Defines device getters of an engine's utilization: `fn(device, *mut percent, *mut
/// sampling period in µs)`.
macro_rules! nvml_utilization_getters {
    ($( $(#[doc = $doc:expr])* fn $name:ident = $method:ident; )*) => {
        nvml_api! {$(
            $(#[doc = $doc])*
            fn $name(device: nvmlDevice_t, utilization: *mut c_uint, sampling_period_us: *mut c_uint) |ctx| {
                let id = ctx.dev(device)?;
                nn(utilization)?;
                nn(sampling_period_us)?;
                let u = ctx.b.$method(id)?;
                put(utilization, u.utilization)?;
                put(sampling_period_us, u.sampling_period_us)
            }
        )*}
    };
}

/// Defines device getters of a process list in NVML's count protocol: `fn(device, *mut count,
/// *mut T)`, each process as `$to_nvml` makes it.
macro_rules! nvml_process_lists {
    ($( $(#[doc = $doc:expr])* fn $name:ident(*mut $ty:ty) = $method:ident, $to_nvml:ident; )*) => {
        nvml_api! {$(
            $(#[doc = $doc])*
            fn $name(device: nvmlDevice_t, count: *mut c_uint, infos: *mut $ty) |ctx| {
                let id = ctx.dev(device)?;
                nn(count)?;
                let list: Vec<_> = ctx.b.$method(id)?.iter().map($to_nvml).collect();
                put_list(count, infos, &list)
            }
        )*}
    };
}

/// Defines device getters of several values, each into its own out-parameter:
/// `fn(device, *mut A, *mut B, ...)` (current and pending, a range, counters). `$query` asks the
/// backend once; each out-parameter then gets its expression of the answer.
macro_rules! nvml_out_getters {
    ($(
        $(#[doc = $doc:expr])*
        fn $name:ident($($out:ident: *mut $ty:ty),+)
            = |$b:ident, $id:ident| $query:expr => |$v:ident| ($($put:ident: $value:expr),+);
    )*) => {
        nvml_api! {$(
            $(#[doc = $doc])*
            fn $name(device: nvmlDevice_t, $($out: *mut $ty),+) |ctx| {
                let $id = ctx.dev(device)?;
                $(nn($out)?;)+
                let $b = &ctx.b;
                let $v = $query;
                $(put($put, $value)?;)+
                Ok(())
            }
        )*}
    };
}

/// Defines device getters of one clock domain's MHz: `fn(device, clock type, *mut c_uint)`,
/// clock types 0..=3 (graphics, SM, memory, video).
macro_rules! nvml_clock_getters {
    ($( $(#[doc = $doc:expr])* fn $name:ident = $method:ident; )*) => {
        nvml_api! {$(
            $(#[doc = $doc])*
            fn $name(device: nvmlDevice_t, clock_type: c_uint, clock: *mut c_uint) |ctx| {
                let id = ctx.dev(device)?;
                nn(clock)?;
                put(clock, ctx.b.$method(id, crate::nvml::clock_type(clock_type)?)?)
            }
        )*}
    };
}

// ---- Init, shutdown, errors ----

/// `nvmlInit` (the old name of `nvmlInit_v2`): loads the fixture named by
/// `GPUSCOPE_FAKE_NVML_FIXTURE` on the first call; counts later calls. A missing or broken
/// fixture answers `NVML_ERROR_DRIVER_NOT_LOADED` and prints one line on stderr.
#[no_mangle]
pub extern "C" fn nvmlInit() -> nvmlReturn_t {
    guarded_nvml("nvmlInit", state::nvml_init)
}

/// `nvmlInit_v2`: see [`nvmlInit`].
#[no_mangle]
pub extern "C" fn nvmlInit_v2() -> nvmlReturn_t {
    guarded_nvml("nvmlInit_v2", state::nvml_init)
}

/// `nvmlInitWithFlags`: see [`nvmlInit`]; the flags are accepted and ignored.
#[no_mangle]
pub extern "C" fn nvmlInitWithFlags(flags: c_uint) -> nvmlReturn_t {
    let _ = flags;
    guarded_nvml("nvmlInitWithFlags", state::nvml_init)
}

/// `nvmlShutdown`: undoes one init; the last one lets the fixture go. `NVML_ERROR_UNINITIALIZED`
/// when not initialised.
#[no_mangle]
pub extern "C" fn nvmlShutdown() -> nvmlReturn_t {
    guarded_nvml("nvmlShutdown", state::nvml_shutdown)
}

/// `nvmlErrorString`: a static NUL-terminated text for every return code.
#[no_mangle]
pub extern "C" fn nvmlErrorString(result: nvmlReturn_t) -> *const c_char {
    state::served("nvmlErrorString", None, ret::SUCCESS);
    error_string(result).as_ptr()
}

// ---- Not NVML: manual frame stepping for tests ----

/// Not an NVML call: serves frame `frame` (clamped to the last) from now on, switching the
/// wall clock to a manual one. `NVML_ERROR_UNINITIALIZED` before `nvmlInit`.
#[no_mangle]
pub extern "C" fn fakeNvmlSetFrame(frame: c_uint) -> nvmlReturn_t {
    guarded(|| state::set_frame(frame as usize))
}

/// Not an NVML call: the index of the frame served now.
///
/// # Safety
///
/// `frame` must be null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn fakeNvmlGetFrame(frame: *mut c_uint) -> nvmlReturn_t {
    call("fakeNvmlGetFrame", |ctx| {
        put(frame, ctx.b.frame_index() as c_uint)
    })
}

/// Not an NVML call: the number of frames in the fixture.
///
/// # Safety
///
/// `count` must be null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn fakeNvmlGetFrameCount(count: *mut c_uint) -> nvmlReturn_t {
    call("fakeNvmlGetFrameCount", |ctx| {
        put(count, ctx.b.fixture().frames.len() as c_uint)
    })
}

// ---- System ----

nvml_api! {
    /// `nvmlSystemGetDriverVersion`.
    fn nvmlSystemGetDriverVersion(version: *mut c_char, length: c_uint) |ctx| {
        nn(version)?;
        put_str(version, length, &ctx.b.driver_version()?)
    }
    /// `nvmlSystemGetNVMLVersion`.
    fn nvmlSystemGetNVMLVersion(version: *mut c_char, length: c_uint) |ctx| {
        nn(version)?;
        put_str(version, length, &ctx.b.nvml_version()?)
    }
    /// `nvmlSystemGetCudaDriverVersion`, e.g. 12020 for CUDA 12.2.
    fn nvmlSystemGetCudaDriverVersion(version: *mut c_int) |ctx| {
        nn(version)?;
        put(version, ctx.b.cuda_driver_version()?)
    }
    /// `nvmlSystemGetCudaDriverVersion_v2`: as [`nvmlSystemGetCudaDriverVersion`].
    fn nvmlSystemGetCudaDriverVersion_v2(version: *mut c_int) |ctx| {
        nn(version)?;
        put(version, ctx.b.cuda_driver_version()?)
    }

    // ---- Handles ----

    /// `nvmlDeviceGetCount` (the old name of `nvmlDeviceGetCount_v2`).
    fn nvmlDeviceGetCount(count: *mut c_uint) |ctx| {
        nn(count)?;
        match crate::state::device_count_override() {
            Some(n) => put(count, n),
            None => put(count, ctx.b.device_count()?),
        }
    }
    /// `nvmlDeviceGetCount_v2`: the number of physical GPUs.
    fn nvmlDeviceGetCount_v2(count: *mut c_uint) |ctx| {
        nn(count)?;
        match crate::state::device_count_override() {
            Some(n) => put(count, n),
            None => put(count, ctx.b.device_count()?),
        }
    }
    /// `nvmlDeviceGetHandleByIndex` (the old name of `_v2`).
    fn nvmlDeviceGetHandleByIndex(index: c_uint, device: *mut nvmlDevice_t) |ctx| {
        handle_by_index(ctx, index, device)
    }
    /// `nvmlDeviceGetHandleByIndex_v2`: `NVML_ERROR_INVALID_ARGUMENT` past the last GPU.
    fn nvmlDeviceGetHandleByIndex_v2(index: c_uint, device: *mut nvmlDevice_t) |ctx| {
        handle_by_index(ctx, index, device)
    }
    /// `nvmlDeviceGetHandleByUUID`: physical (`GPU-...`) and MIG (`MIG-...`) UUIDs;
    /// `NVML_ERROR_NOT_FOUND` for an unknown one.
    fn nvmlDeviceGetHandleByUUID(uuid: *const c_char, device: *mut nvmlDevice_t) |ctx| {
        let wanted = arg_str(uuid)?;
        nn(device)?;
        let found = ctx
            .b
            .fixture()
            .devices
            .keys()
            .copied()
            .find(|&id| ctx.b.uuid(id).is_ok_and(|u| u == wanted));
        put(device, handle_of(found.ok_or(Code(ret::NOT_FOUND))?))
    }
    /// `nvmlDeviceGetHandleByPciBusId` (the old name of `_v2`).
    fn nvmlDeviceGetHandleByPciBusId(bus_id: *const c_char, device: *mut nvmlDevice_t) |ctx| {
        handle_by_bus_id(ctx, bus_id, device)
    }
    /// `nvmlDeviceGetHandleByPciBusId_v2`: accepts `domain:bus:device.function` with a 4- or
    /// 8-digit domain, or `bus:device.function`; `NVML_ERROR_NOT_FOUND` for an unknown one.
    fn nvmlDeviceGetHandleByPciBusId_v2(bus_id: *const c_char, device: *mut nvmlDevice_t) |ctx| {
        handle_by_bus_id(ctx, bus_id, device)
    }
    /// `nvmlDeviceGetIndex`: the NVML index of a physical GPU (`NVML_ERROR_NOT_SUPPORTED` for a
    /// MIG device handle).
    fn nvmlDeviceGetIndex(device: nvmlDevice_t, index: *mut c_uint) |ctx| {
        let id = ctx.dev(device)?;
        nn(index)?;
        match id {
            DeviceId::Gpu(i) => put(index, i),
            DeviceId::Mig { .. } => Err(Code(ret::NOT_SUPPORTED)),
        }
    }

    // ---- Identity ----

    /// `nvmlDeviceGetPciInfo_v3`.
    fn nvmlDeviceGetPciInfo_v3(device: nvmlDevice_t, pci: *mut nvmlPciInfo_t) |ctx| {
        pci_info(ctx, device, pci)
    }
    /// `nvmlDeviceGetPciInfo_v2`: the same struct as `_v3`.
    fn nvmlDeviceGetPciInfo_v2(device: nvmlDevice_t, pci: *mut nvmlPciInfo_t) |ctx| {
        pci_info(ctx, device, pci)
    }
    /// `nvmlDeviceGetFanSpeed_v2`: one fan's intended speed, percent.
    fn nvmlDeviceGetFanSpeed_v2(device: nvmlDevice_t, fan: c_uint, speed: *mut c_uint) |ctx| {
        let id = ctx.dev(device)?;
        nn(speed)?;
        put(speed, ctx.b.fan_speed_of(id, fan)?)
    }
    /// `nvmlDeviceGetTemperature`: only sensor 0 (`NVML_TEMPERATURE_GPU`) exists.
    fn nvmlDeviceGetTemperature(device: nvmlDevice_t, sensor: c_uint, temp: *mut c_uint) |ctx| {
        let id = ctx.dev(device)?;
        nn(temp)?;
        if sensor != 0 {
            return Err(INVALID);
        }
        put(temp, ctx.b.temperature(id)?)
    }
    /// `nvmlDeviceGetTemperatureThreshold`: 0 shutdown, 1 slowdown, 2 memory max, 3 GPU max;
    /// the other thresholds NVML knows answer `NVML_ERROR_NOT_SUPPORTED`.
    fn nvmlDeviceGetTemperatureThreshold(device: nvmlDevice_t, threshold: c_uint, temp: *mut c_uint) |ctx| {
        let id = ctx.dev(device)?;
        nn(temp)?;
        let which = match TemperatureThreshold::from_nvml(threshold) {
            Some(which) => which,
            None if threshold <= 15 => return Err(Code(ret::NOT_SUPPORTED)),
            None => return Err(INVALID),
        };
        put(temp, ctx.b.temperature_threshold(id, which)?)
    }
    /// `nvmlDeviceGetPcieThroughput`, KB/s; counter 0 TX, 1 RX.
    fn nvmlDeviceGetPcieThroughput(device: nvmlDevice_t, counter: c_uint, value: *mut c_uint) |ctx| {
        let id = ctx.dev(device)?;
        nn(value)?;
        let direction = PcieDirection::from_nvml(counter).ok_or(INVALID)?;
        put(value, ctx.b.pcie_throughput(id, direction)?)
    }
    /// `nvmlDeviceGetNvLinkState`.
    fn nvmlDeviceGetNvLinkState(device: nvmlDevice_t, link: c_uint, is_active: *mut nvmlEnableState_t) |ctx| {
        let id = ctx.dev(device)?;
        nn(is_active)?;
        put(is_active, enable(ctx.b.nvlink_state(id, link)?))
    }
    /// `nvmlDeviceGetFieldValues`: fields 138/139 (`NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX/RX`,
    /// KiB, `scopeId` = link), 82 (`NVML_FI_DEV_MEMORY_TEMP`, °C) and those of the details
    /// (`details::field_answer`: power by scope, T.Limit thresholds, clock-event counters, ...)
    /// are served; every other field answers `NVML_ERROR_NOT_SUPPORTED` in its own `nvmlReturn`.
    /// The call itself succeeds.
    fn nvmlDeviceGetFieldValues(device: nvmlDevice_t, values_count: c_int, values: *mut nvmlFieldValue_t) |ctx| {
        let id = ctx.dev(device)?;
        let n = usize::try_from(values_count).map_err(|_| INVALID)?;
        if n > 0 {
            nn(values)?;
        }
        let now = now_us();
        for i in 0..n {
            let v = &mut *values.add(i);
            v.timestamp = now;
            v.latencyUsec = 0;
            let unsigned = |x: u64| (NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, nvmlValue_t { ullVal: x });
            let answer = match v.fieldId {
                NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX => ctx.b.nvlink_throughput(id, v.scopeId).map(|c| unsigned(c.tx_kib)),
                NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX => ctx.b.nvlink_throughput(id, v.scopeId).map(|c| unsigned(c.rx_kib)),
                NVML_FI_DEV_MEMORY_TEMP => ctx.b.memory_temperature(id).map(|t| unsigned(u64::from(t))),
                field => details::field_answer(&ctx.b, id, field, v.scopeId)
                    .unwrap_or(Err(BackendError::NotSupported)),
            };
            match answer {
                Ok((kind, x)) => {
                    v.nvmlReturn = ret::SUCCESS;
                    v.valueType = kind;
                    v.value = x;
                }
                Err(e) => {
                    v.nvmlReturn = Code::from(e).0;
                    v.valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
                    v.value = nvmlValue_t { ullVal: 0 };
                }
            }
        }
        Ok(())
    }
    /// `nvmlDeviceGetTotalEccErrors`: error type 0 corrected, 1 uncorrected; counter 0 volatile,
    /// 1 aggregate.
    fn nvmlDeviceGetTotalEccErrors(device: nvmlDevice_t, error_type: c_uint, counter_type: c_uint, ecc_counts: *mut c_ulonglong) |ctx| {
        let id = ctx.dev(device)?;
        nn(ecc_counts)?;
        let (kind, counter) = ecc_kind_and_counter(error_type, counter_type)?;
        put(ecc_counts, ctx.b.ecc_errors(id, kind, counter)?)
    }
    /// `nvmlDeviceGetTargetFanSpeed`: the speed one fan is driven towards, percent.
    fn nvmlDeviceGetTargetFanSpeed(device: nvmlDevice_t, fan: c_uint, target_speed: *mut c_uint) |ctx| {
        let id = ctx.dev(device)?;
        nn(target_speed)?;
        put(target_speed, ctx.b.fan_target_speed_of(id, fan)?)
    }
    /// `nvmlDeviceGetNvLinkErrorCounter`: counter 0 DL replay, 1 DL recovery, 2 DL CRC flit,
    /// 3 DL CRC data; 4 (DL ECC data) answers `NVML_ERROR_NOT_SUPPORTED`.
    fn nvmlDeviceGetNvLinkErrorCounter(device: nvmlDevice_t, link: c_uint, counter: c_uint, counter_value: *mut c_ulonglong) |ctx| {
        let id = ctx.dev(device)?;
        nn(counter_value)?;
        if counter == 4 {
            return Err(Code(ret::NOT_SUPPORTED));
        }
        if counter > 4 {
            return Err(INVALID);
        }
        let c = ctx.b.nvlink_error_counters(id, link)?;
        put(counter_value, [c.replay, c.recovery, c.crc_flit, c.crc_data][counter as usize])
    }
    /// `nvmlDeviceGetMemoryErrorCounter`: error type 0 corrected, 1 uncorrected; counter 0
    /// volatile, 1 aggregate; location 0-7 (`nvmlMemoryLocation_t`). A count the fixture
    /// records as absent answers `NVML_ERROR_NOT_SUPPORTED`.
    fn nvmlDeviceGetMemoryErrorCounter(device: nvmlDevice_t, error_type: c_uint, counter_type: c_uint, location: c_uint, count: *mut c_ulonglong) |ctx| {
        let id = ctx.dev(device)?;
        nn(count)?;
        let (kind, counter) = ecc_kind_and_counter(error_type, counter_type)?;
        let location = MemoryLocation::from_nvml(location).ok_or(INVALID)?;
        let counts = ctx.b.memory_errors(id, location)?;
        put(count, counts.get(kind, counter).ok_or(Code(ret::NOT_SUPPORTED))?)
    }
    /// `nvmlDeviceGetRetiredPages`: cause 0 multiple single-bit, 1 double-bit; the addresses
    /// with the count protocol of the other lists.
    fn nvmlDeviceGetRetiredPages(device: nvmlDevice_t, cause: c_uint, page_count: *mut c_uint, addresses: *mut c_ulonglong) |ctx| {
        let id = ctx.dev(device)?;
        nn(page_count)?;
        let cause = RetirementCause::from_nvml(cause).ok_or(INVALID)?;
        put_list(page_count, addresses, &ctx.b.retired_pages(id, cause)?)
    }
    /// `nvmlDeviceGetSupportedEventTypes`: every kind of `nvmlEventTypeAll` (0xff9f, what an
    /// H100 reports) on a device whose fixture records events; the recorded error (not
    /// recorded: not supported) otherwise.
    fn nvmlDeviceGetSupportedEventTypes(device: nvmlDevice_t, event_types: *mut c_ulonglong) |ctx| {
        let id = ctx.dev(device)?;
        nn(event_types)?;
        ctx.b.events(id, 0)?;
        put(event_types, EventKind::all_bits())
    }
    /// `nvmlEventSetCreate`: a new, empty event set.
    fn nvmlEventSetCreate(set: *mut nvmlEventSet_t) |_ctx| {
        nn(set)?;
        put(set, event_sets::create())
    }
    /// `nvmlDeviceRegisterEvents`: adds the device's events of the kinds in `event_types` to the
    /// set; a kind the device does not support answers `NVML_ERROR_NOT_SUPPORTED`, as NVML does.
    fn nvmlDeviceRegisterEvents(device: nvmlDevice_t, event_types: c_ulonglong, set: nvmlEventSet_t) |ctx| {
        let id = ctx.dev(device)?;
        ctx.b.events(id, 0)?;
        if event_types & !EventKind::all_bits() != 0 {
            return Err(Code(ret::NOT_SUPPORTED));
        }
        event_sets::register(set, id, event_types)
    }
    /// `nvmlEventSetWait_v2`: the oldest event of the set not delivered yet among those the
    /// fixture records up to the frame served, waiting up to `timeoutms` for the frame that
    /// holds one; `NVML_ERROR_TIMEOUT` when none comes.
    fn nvmlEventSetWait_v2(set: nvmlEventSet_t, data: *mut nvmlEventData_t, timeoutms: c_uint) |_ctx| {
        nn(data)?;
        let event = event_sets::wait(set, timeoutms)?;
        note_device(device_of(event.device));
        put(data, event)
    }
    /// `nvmlEventSetWait`, the first version: as `nvmlEventSetWait_v2`.
    fn nvmlEventSetWait(set: nvmlEventSet_t, data: *mut nvmlEventData_t, timeoutms: c_uint) |_ctx| {
        nn(data)?;
        put(data, event_sets::wait(set, timeoutms)?)
    }
    /// `nvmlEventSetFree`: forgets the set; a set it does not know answers
    /// `NVML_ERROR_INVALID_ARGUMENT`.
    fn nvmlEventSetFree(set: nvmlEventSet_t) |_ctx| {
        event_sets::free(set)
    }
    /// `nvmlDeviceGetDriverModel`: 0 WDDM, 1 WDM (TCC), 2 MCDM.
    fn nvmlDeviceGetDriverModel(device: nvmlDevice_t, current: *mut c_uint, pending: *mut c_uint) |ctx| {
        driver_model(ctx, device, current, pending)
    }
    /// `nvmlDeviceGetDriverModel_v2`: as [`nvmlDeviceGetDriverModel`].
    fn nvmlDeviceGetDriverModel_v2(device: nvmlDevice_t, current: *mut c_uint, pending: *mut c_uint) |ctx| {
        driver_model(ctx, device, current, pending)
    }

    // ---- MIG ----

    /// `nvmlDeviceGetMigDeviceHandleByIndex`: `NVML_ERROR_INVALID_ARGUMENT` for a MIG handle or
    /// an index past `nvmlDeviceGetMaxMigDeviceCount`, `NVML_ERROR_NOT_FOUND` for an empty slot.
    fn nvmlDeviceGetMigDeviceHandleByIndex(device: nvmlDevice_t, index: c_uint, mig_device: *mut nvmlDevice_t) |ctx| {
        let id = ctx.gpu(device)?;
        nn(mig_device)?;
        if let Ok(max) = ctx.b.max_mig_device_count(id) {
            if index >= max {
                return Err(INVALID);
            }
        }
        let slots = ctx.b.mig_device_indices(id)?;
        let mig = DeviceId::Mig { parent: id.physical_index(), index };
        if !slots.contains(&index) || !ctx.b.fixture().devices.contains_key(&mig) {
            return Err(Code(ret::NOT_FOUND));
        }
        put(mig_device, handle_of(mig))
    }
    /// `nvmlDeviceGetDeviceHandleFromMigDeviceHandle`: the parent GPU of a MIG device.
    fn nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig_device: nvmlDevice_t, device: *mut nvmlDevice_t) |ctx| {
        let id = ctx.dev(mig_device)?;
        nn(device)?;
        match id {
            DeviceId::Mig { parent, .. } => put(device, handle_of(DeviceId::Gpu(parent))),
            DeviceId::Gpu(_) => Err(INVALID),
        }
    }
    /// `nvmlDeviceIsMigDeviceHandle`: 1 for a MIG device handle.
    fn nvmlDeviceIsMigDeviceHandle(device: nvmlDevice_t, is_mig: *mut c_uint) |ctx| {
        let id = ctx.dev(device)?;
        put(is_mig, c_uint::from(id.is_mig()))
    }

    // ---- Readings ----

    /// `nvmlDeviceGetMemoryInfo_v2`: `memory->version` must be `nvmlMemory_v2` (0x02000028),
    /// else `NVML_ERROR_ARGUMENT_VERSION_MISMATCH`. A recording without `reserved` serves 0.
    fn nvmlDeviceGetMemoryInfo_v2(device: nvmlDevice_t, memory: *mut nvmlMemory_v2_t) |ctx| {
        let id = ctx.dev(device)?;
        nn(memory)?;
        let version = std::ptr::addr_of!((*memory).version).read_unaligned();
        if version != NVML_MEMORY_V2 {
            return Err(Code(ret::ARGUMENT_VERSION_MISMATCH));
        }
        let m = ctx.b.memory_info(id)?;
        put(memory, nvmlMemory_v2_t {
            version,
            total: m.total,
            reserved: m.reserved.unwrap_or(0),
            free: m.free,
            used: m.used,
        })
    }
}

nvml_utilization_getters! {
    /// `nvmlDeviceGetEncoderUtilization`: percent and sampling period (µs).
    fn nvmlDeviceGetEncoderUtilization = encoder_utilization;
    /// `nvmlDeviceGetDecoderUtilization`: percent and sampling period (µs).
    fn nvmlDeviceGetDecoderUtilization = decoder_utilization;
}

// ---- Processes ----

nvml_process_lists! {
    /// `nvmlDeviceGetComputeRunningProcesses` (v1 struct, 16 bytes), count protocol.
    fn nvmlDeviceGetComputeRunningProcesses(*mut nvmlProcessInfo_v1_t) = compute_processes, proc_v1;
    /// `nvmlDeviceGetComputeRunningProcesses_v2` (24-byte struct), count protocol.
    fn nvmlDeviceGetComputeRunningProcesses_v2(*mut nvmlProcessInfo_t) = compute_processes, proc_v2;
    /// `nvmlDeviceGetComputeRunningProcesses_v3` (24-byte struct), count protocol.
    fn nvmlDeviceGetComputeRunningProcesses_v3(*mut nvmlProcessInfo_t) = compute_processes, proc_v2;
    /// `nvmlDeviceGetGraphicsRunningProcesses` (v1 struct, 16 bytes), count protocol.
    fn nvmlDeviceGetGraphicsRunningProcesses(*mut nvmlProcessInfo_v1_t) = graphics_processes, proc_v1;
    /// `nvmlDeviceGetGraphicsRunningProcesses_v2` (24-byte struct), count protocol.
    fn nvmlDeviceGetGraphicsRunningProcesses_v2(*mut nvmlProcessInfo_t) = graphics_processes, proc_v2;
    /// `nvmlDeviceGetGraphicsRunningProcesses_v3` (24-byte struct), count protocol.
    fn nvmlDeviceGetGraphicsRunningProcesses_v3(*mut nvmlProcessInfo_t) = graphics_processes, proc_v2;
}

nvml_api! {
    /// `nvmlDeviceGetProcessUtilization`: the samples newer than `last_seen_time_stamp` (µs since
    /// the Unix epoch), with their timestamps moved onto the replay's clock (see
    /// `state::ReplayTime`): a sample taken 300 ms before a frame is 300 ms old when that
    /// frame is served, so a client that asks for the samples of the last second by wall clock
    /// gets what it would have got live. No such sample: `NVML_ERROR_NOT_FOUND`; a null or
    /// short buffer: `NVML_ERROR_INSUFFICIENT_SIZE` with the count needed.
    fn nvmlDeviceGetProcessUtilization(device: nvmlDevice_t, utilization: *mut nvmlProcessUtilizationSample_t, count: *mut c_uint, last_seen_time_stamp: c_ulonglong) |ctx| {
        let id = ctx.dev(device)?;
        nn(count)?;
        let samples: Vec<_> = ctx
            .b
            .process_utilization(id, ctx.time.to_recorded(last_seen_time_stamp))?
            .iter()
            .map(|s| nvmlProcessUtilizationSample_t {
                pid: s.pid,
                timeStamp: ctx.time.to_wall(s.timestamp_us),
                smUtil: s.sm,
                memUtil: s.memory,
                encUtil: s.encoder,
                decUtil: s.decoder,
            })
            .collect();
        if samples.is_empty() {
            return Err(Code(ret::NOT_FOUND));
        }
        put_list(count, utilization, &samples)
    }
}

// ---- GPM ----

/// The first GPM sample handle; later ones follow at [`GPM_SAMPLE_STRIDE`]. Like device
/// handles, samples are numbers dressed as pointers, never dereferenced.
const GPM_SAMPLE_BASE: usize = 0x6770_0000;
const GPM_SAMPLE_STRIDE: usize = 0x10;
/// The most GPM samples alive at once; an allocation beyond it answers `NVML_ERROR_MEMORY`.
const GPM_SAMPLES_MAX: usize = 1 << 16;

/// The GPM samples alive: handle number -> what it holds (the device and the frame it was
/// taken at), `None` until `nvmlGpmSampleGet` fills it.
struct GpmSamples {
    next: usize,
    live: BTreeMap<usize, Option<(DeviceId, usize)>>,
}

static GPM_SAMPLES: Mutex<GpmSamples> = Mutex::new(GpmSamples {
    next: 0,
    live: BTreeMap::new(),
});

/// GPM samples taken (`nvmlGpmSampleGet` and `nvmlGpmMigSampleGet` that succeeded) and
/// `nvmlGpmMetricsGet` calls that succeeded, since the library was loaded.
static GPM_SAMPLES_TAKEN: AtomicU64 = AtomicU64::new(0);
static GPM_METRICS_GOT: AtomicU64 = AtomicU64::new(0);

/// Not an NVML call: how many GPM samples were taken and how many metric sets computed since
/// the library was loaded, so that a test can tell how often a client asks GPM.
///
/// # Safety
///
/// Both pointers must be null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn fakeNvmlGpmCallCounts(
    samples_taken: *mut c_ulonglong,
    metrics_got: *mut c_ulonglong,
) -> nvmlReturn_t {
    guarded(|| {
        if samples_taken.is_null() || metrics_got.is_null() {
            return ret::INVALID_ARGUMENT;
        }
        samples_taken.write_unaligned(GPM_SAMPLES_TAKEN.load(Ordering::Relaxed));
        metrics_got.write_unaligned(GPM_METRICS_GOT.load(Ordering::Relaxed));
        ret::SUCCESS
    })
}

fn gpm_samples() -> MutexGuard<'static, GpmSamples> {
    GPM_SAMPLES.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The short names and units of [`GPM_METRICS`], NUL-terminated, for `metricInfo`.
fn gpm_labels() -> &'static [(CString, CString)] {
    static LABELS: OnceLock<Vec<(CString, CString)>> = OnceLock::new();
    LABELS.get_or_init(|| {
        GPM_METRICS
            .iter()
            .map(|(name, _, unit)| {
                let c = |s: &str| CString::new(s).unwrap_or_default();
                (c(name), c(unit))
            })
            .collect()
    })
}

impl Ctx {
    /// The GPM answer of a device at a frame.
    fn gpm_at(&self, id: DeviceId, frame: usize) -> Result<gpu_backend::GpmMetrics, BackendError> {
        match self
            .b
            .fixture()
            .frames
            .get(frame)
            .and_then(|f| f.devices.get(&id))
        {
            Some(dy) => dy.gpm_metrics.get(),
            None => Err(BackendError::NotFound),
        }
    }

    /// Records a sample of `id` at the current frame: a device whose GPM answer there is an
    /// error other than `no_data` answers that error.
    fn gpm_sample(&self, id: DeviceId, sample: nvmlGpmSample_t) -> Result<(), Code> {
        let frame = self.b.frame_index();
        match self.gpm_at(id, frame) {
            Ok(_) | Err(BackendError::NoData) => {}
            Err(e) => return Err(e.into()),
        }
        let mut samples = gpm_samples();
        match samples.live.get_mut(&(sample as usize)) {
            Some(slot) => {
                *slot = Some((id, frame));
                GPM_SAMPLES_TAKEN.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            None => Err(INVALID),
        }
    }
}

nvml_api! {
    /// `nvmlGpmQueryDeviceSupport`: supported when the device's (or one of its MIG devices')
    /// GPM answer at the current frame is a value or `no_data`; "cannot tell" answers are
    /// "not supported"; any other recorded error is returned.
    fn nvmlGpmQueryDeviceSupport(device: nvmlDevice_t, gpm_support: *mut nvmlGpmSupport_t) |ctx| {
        let id = ctx.dev(device)?;
        nn(gpm_support)?;
        if (*gpm_support).version != NVML_GPM_SUPPORT_VERSION {
            return Err(Code(ret::ARGUMENT_VERSION_MISMATCH));
        }
        let frame = ctx.b.frame_index();
        let family = ctx.b.fixture().devices.keys().copied().filter(|d| {
            *d == id || (!id.is_mig() && d.is_mig() && d.physical_index() == id.physical_index())
        }).collect::<Vec<_>>();
        let mut supported = false;
        for d in family {
            match ctx.gpm_at(d, frame) {
                Ok(_) | Err(BackendError::NoData) => supported = true,
                Err(e) if e.is_not_available() => {}
                Err(e) => return Err(e.into()),
            }
        }
        (*gpm_support).isSupportedDevice = c_uint::from(supported);
        Ok(())
    }
    /// `nvmlGpmSampleAlloc`.
    fn nvmlGpmSampleAlloc(gpm_sample: *mut nvmlGpmSample_t) |_ctx| {
        nn(gpm_sample)?;
        let mut samples = gpm_samples();
        if samples.live.len() >= GPM_SAMPLES_MAX {
            return Err(Code(gpu_backend::error::nvml_codes::MEMORY as nvmlReturn_t));
        }
        let handle = loop {
            let n = samples.next % GPM_SAMPLES_MAX;
            samples.next = samples.next.wrapping_add(1);
            let handle = GPM_SAMPLE_BASE + n * GPM_SAMPLE_STRIDE;
            if !samples.live.contains_key(&handle) {
                break handle;
            }
        };
        samples.live.insert(handle, None);
        put(gpm_sample, handle as nvmlGpmSample_t)
    }
    /// `nvmlGpmSampleFree`: a sample that is not alive answers `NVML_ERROR_INVALID_ARGUMENT`.
    fn nvmlGpmSampleFree(gpm_sample: nvmlGpmSample_t) |_ctx| {
        match gpm_samples().live.remove(&(gpm_sample as usize)) {
            Some(_) => Ok(()),
            None => Err(INVALID),
        }
    }
    /// `nvmlGpmSampleGet`: samples a physical GPU at the current frame.
    fn nvmlGpmSampleGet(device: nvmlDevice_t, gpm_sample: nvmlGpmSample_t) |ctx| {
        let id = ctx.gpu(device)?;
        ctx.gpm_sample(id, gpm_sample)
    }
    /// `nvmlGpmMigSampleGet`: samples the MIG device of GPU instance `gpu_instance_id` under a
    /// physical GPU at the current frame.
    fn nvmlGpmMigSampleGet(device: nvmlDevice_t, gpu_instance_id: c_uint, gpm_sample: nvmlGpmSample_t) |ctx| {
        let parent = ctx.gpu(device)?;
        let mig = ctx.b.fixture().devices.iter().find(|(d, st)| {
            d.is_mig()
                && d.physical_index() == parent.physical_index()
                && st.gpu_instance_id == Answer::Ok(gpu_instance_id)
        });
        let Some((&id, _)) = mig else {
            return Err(Code(ret::NOT_FOUND));
        };
        ctx.gpm_sample(id, gpm_sample)
    }
    /// `nvmlGpmMetricsGet`: the metrics the fixture recorded for the later sample's device at
    /// the later sample's frame (a recording holds what was measured up to each frame). Both
    /// samples must be alive, filled and of the same device. A metric the fixture does not
    /// hold answers `NVML_ERROR_NOT_SUPPORTED` in its own `nvmlReturn`.
    fn nvmlGpmMetricsGet(metrics_get: *mut nvmlGpmMetricsGet_t) |ctx| {
        nn(metrics_get)?;
        let m = &mut *metrics_get;
        if m.version != NVML_GPM_METRICS_GET_VERSION {
            return Err(Code(ret::ARGUMENT_VERSION_MISMATCH));
        }
        let n = m.numMetrics as usize;
        if n > NVML_GPM_METRIC_MAX {
            return Err(INVALID);
        }
        let (first, second) = {
            let samples = gpm_samples();
            let get = |s: nvmlGpmSample_t| samples.live.get(&(s as usize)).copied().flatten();
            (get(m.sample1), get(m.sample2))
        };
        let (Some((id1, _)), Some((id, frame))) = (first, second) else {
            return Err(INVALID);
        };
        if id1 != id {
            return Err(INVALID);
        }
        let values = ctx.gpm_at(id, frame)?;
        let labels = gpm_labels();
        for metric in m.metrics.iter_mut().take(n) {
            let known = GPM_METRICS.iter().position(|(_, mid, _)| *mid == metric.metricId);
            let value = values.by_id(metric.metricId).flatten();
            metric.nvmlReturn = if value.is_some() { ret::SUCCESS } else { ret::NOT_SUPPORTED };
            metric.value = value.unwrap_or(0.0);
            let name = known.map_or(std::ptr::null_mut(), |i| labels[i].0.as_ptr() as *mut c_char);
            let unit = known.map_or(std::ptr::null_mut(), |i| labels[i].1.as_ptr() as *mut c_char);
            metric.metricInfo = nvmlGpmMetricInfo_t { shortName: name, longName: name, unit };
        }
        GPM_METRICS_GOT.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

nvml_clock_getters! {
    /// `nvmlDeviceGetClockInfo`, MHz.
    fn nvmlDeviceGetClockInfo = clock;
    /// `nvmlDeviceGetMaxClockInfo`, MHz.
    fn nvmlDeviceGetMaxClockInfo = max_clock;
    /// `nvmlDeviceGetApplicationsClock`, MHz.
    fn nvmlDeviceGetApplicationsClock = applications_clock;
    /// `nvmlDeviceGetDefaultApplicationsClock`, MHz.
    fn nvmlDeviceGetDefaultApplicationsClock = default_applications_clock;
}

nvml_out_getters! {
    /// `nvmlDeviceGetCudaComputeCapability`: major and minor.
    fn nvmlDeviceGetCudaComputeCapability(major: *mut c_int, minor: *mut c_int)
        = |b, id| b.cuda_compute_capability(id)? => |cc| (major: cc.major as c_int, minor: cc.minor as c_int);
    /// `nvmlDeviceGetPowerManagementLimitConstraints`, mW.
    fn nvmlDeviceGetPowerManagementLimitConstraints(min_limit: *mut c_uint, max_limit: *mut c_uint)
        = |b, id| b.power_management_limit_constraints(id)? => |l| (min_limit: l.min_mw, max_limit: l.max_mw);
    /// `nvmlDeviceGetEccMode`: current and pending.
    fn nvmlDeviceGetEccMode(current: *mut nvmlEnableState_t, pending: *mut nvmlEnableState_t)
        = |b, id| b.ecc_mode(id)? => |m| (current: enable(m.current), pending: enable(m.pending));
    /// `nvmlDeviceGetMigMode`: 1 enabled, 0 disabled.
    fn nvmlDeviceGetMigMode(current: *mut c_uint, pending: *mut c_uint)
        = |b, id| b.mig_mode(id)? => |m| (current: enable(m.current), pending: enable(m.pending));
    /// `nvmlDeviceGetGpuOperationMode`: current and pending, NVML's numbers.
    fn nvmlDeviceGetGpuOperationMode(current: *mut c_uint, pending: *mut c_uint)
        = |b, id| b.gpu_operation_mode(id)? => |m| (current: m.current.nvml_code(), pending: m.pending.nvml_code());
    /// `nvmlDeviceGetRemappedRows`: correctable, uncorrectable, pending, failure.
    fn nvmlDeviceGetRemappedRows(corr_rows: *mut c_uint, unc_rows: *mut c_uint, is_pending: *mut c_uint, failure_occurred: *mut c_uint)
        = |b, id| b.remapped_rows(id)? => |rows| (
            corr_rows: rows.correctable,
            unc_rows: rows.uncorrectable,
            is_pending: c_uint::from(rows.pending),
            failure_occurred: c_uint::from(rows.failure)
        );
}

nvml_value_getters! {
    /// `nvmlDeviceGetPowerState` (the deprecated name of the performance state).
    fn nvmlDeviceGetPowerState(*mut c_uint) = |b, id| b.performance_state(id)?;
    /// `nvmlDeviceGetComputeMode`: 0 default, 1 exclusive thread, 2 prohibited, 3 exclusive
    /// process.
    fn nvmlDeviceGetComputeMode(*mut c_uint) = |b, id| b.compute_mode(id)?.nvml_code();
    /// `nvmlDeviceGetBAR1MemoryInfo`.
    fn nvmlDeviceGetBAR1MemoryInfo(*mut nvmlBAR1Memory_t) = |b, id| {
        let m = b.bar1_memory_info(id)?;
        nvmlBAR1Memory_t { bar1Total: m.total, bar1Free: m.free, bar1Used: m.used }
    };
    /// `nvmlDeviceGetUtilizationRates`.
    fn nvmlDeviceGetUtilizationRates(*mut nvmlUtilization_t) = |b, id| {
        let u = b.utilization_rates(id)?;
        nvmlUtilization_t { gpu: u.gpu, memory: u.memory }
    };
    /// `nvmlDeviceGetMemoryInfo` (v1 struct): `used` includes the reserved memory.
    fn nvmlDeviceGetMemoryInfo(*mut nvmlMemory_t) = |b, id| {
        let m = b.memory_info(id)?;
        nvmlMemory_t { total: m.total, free: m.free, used: m.used.saturating_add(m.reserved.unwrap_or(0)) }
    };
    /// `nvmlDeviceGetPcieLinkMaxSpeed`: the code (`NVML_PCIE_LINK_MAX_SPEED_*MBPS`) of the
    /// recorded rate; a rate NVML has no code for answers `NVML_ERROR_UNKNOWN`.
    fn nvmlDeviceGetPcieLinkMaxSpeed(*mut c_uint) = |b, id| {
        pcie_link_max_speed_nvml_code(b.pcie_link_max_speed(id)?).ok_or(Code(ret::UNKNOWN))?
    };
    /// `nvmlDeviceGetCurrentClocksThrottleReasons`: NVML's bit mask.
    fn nvmlDeviceGetCurrentClocksThrottleReasons(*mut c_ulonglong) = |b, id| b.clock_event_reasons(id)?;
    /// `nvmlDeviceGetSupportedClocksThrottleReasons`: the older name, what a driver before
    /// R535 exports (the `old-driver` scenario lacks the newer one).
    fn nvmlDeviceGetSupportedClocksThrottleReasons(*mut c_ulonglong) = |b, id| b.supported_clock_event_reasons(id)?;
}

/// Exports a query of the table whose NVML call has a regular form (`abi` other than `custom`
/// in `gpu_backend::for_each_query!`), a row as `gpu_backend::for_each_query_row!` hands it.
macro_rules! table_export {
    ($section:ident $shape:ident $m:ident $args:tt $ty:tt $store:tt
        $nvml:ident $note:tt $unit:literal $mig:ident $abi:ident $doc:literal) => {
        table_export! { @$abi $nvml $m $doc $ty }
    };
    (@plain $nvml:ident $m:ident $doc:literal ($($ty:tt)+)) => {
        nvml_value_getters! {
            #[doc = concat!("`", stringify!($nvml), "`: ", $doc)]
            fn $nvml(*mut $($ty)+) = |b, id| b.$m(id)?;
        }
    };
    (@enable $nvml:ident $m:ident $doc:literal ($($ty:tt)+)) => {
        nvml_value_getters! {
            #[doc = concat!("`", stringify!($nvml), "`: ", $doc)]
            fn $nvml(*mut nvmlEnableState_t) = |b, id| enable(b.$m(id)?);
        }
    };
    (@code $nvml:ident $m:ident $doc:literal ($($ty:tt)+)) => {
        nvml_value_getters! {
            #[doc = concat!("`", stringify!($nvml), "`: ", $doc, " NVML's number.")]
            fn $nvml(*mut c_uint) = |b, id| b.$m(id)?.nvml_code();
        }
    };
    (@string $nvml:ident $m:ident $doc:literal ($($ty:tt)+)) => {
        nvml_string_getters! {
            #[doc = concat!("`", stringify!($nvml), "`: ", $doc)]
            fn $nvml = $m;
        }
    };
    (@custom $($rest:tt)*) => {};
}

gpu_backend::for_each_query_row!(table_export);

mod details;

unsafe fn handle_by_index(ctx: &Ctx, index: c_uint, device: *mut nvmlDevice_t) -> Result<(), Code> {
    nn(device)?;
    let id = DeviceId::Gpu(index);
    note_device(Some(id));
    let count = ctx.b.device_count()?;
    if index >= count || !ctx.b.fixture().devices.contains_key(&id) {
        return Err(INVALID);
    }
    put(device, handle_of(id))
}

unsafe fn handle_by_bus_id(
    ctx: &Ctx,
    bus_id: *const c_char,
    device: *mut nvmlDevice_t,
) -> Result<(), Code> {
    let text = arg_str(bus_id)?;
    nn(device)?;
    let wanted = PciAddress::parse(&text).ok_or(INVALID)?;
    let found = ctx.b.fixture().physical_ids().find(|&id| {
        ctx.b.pci_info(id).is_ok_and(|p| {
            (p.domain, p.bus, p.device) == (wanted.domain, wanted.bus, wanted.device)
        })
    });
    put(device, handle_of(found.ok_or(Code(ret::NOT_FOUND))?))
}

unsafe fn pci_info(ctx: &Ctx, device: nvmlDevice_t, out: *mut nvmlPciInfo_t) -> Result<(), Code> {
    let id = ctx.dev(device)?;
    nn(out)?;
    let p = ctx.b.pci_info(id)?;
    let mut info = nvmlPciInfo_t {
        domain: p.domain,
        bus: p.bus,
        device: p.device,
        pciDeviceId: p.pci_device_id,
        pciSubSystemId: p.pci_subsystem_id,
        ..nvmlPciInfo_t::default()
    };
    let legacy = format!("{:04X}:{:02X}:{:02X}.0", p.domain & 0xFFFF, p.bus, p.device);
    fill_array(&mut info.busIdLegacy, &legacy);
    fill_array(&mut info.busId, &p.bus_id);
    put(out, info)
}

unsafe fn driver_model(
    ctx: &Ctx,
    device: nvmlDevice_t,
    current: *mut c_uint,
    pending: *mut c_uint,
) -> Result<(), Code> {
    let id = ctx.dev(device)?;
    nn(current)?;
    nn(pending)?;
    let m = ctx.b.driver_model(id)?;
    put(current, m.current.nvml_code())?;
    put(pending, m.pending.nvml_code())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_round_trip_and_are_never_null() {
        for id in [
            DeviceId::Gpu(0),
            DeviceId::Gpu(7),
            DeviceId::Mig {
                parent: 0,
                index: 0,
            },
            DeviceId::Mig {
                parent: 3,
                index: 6,
            },
        ] {
            let h = handle_of(id);
            assert!(!h.is_null());
            assert_eq!(device_of(h), Some(id));
        }
        assert_eq!(device_of(std::ptr::null_mut()), None);
        assert_eq!(device_of((HANDLE_BASE + 1) as nvmlDevice_t), None);
    }
}

/// The event sets handed out, and what each has delivered.
mod event_sets {
    use std::collections::{BTreeMap, HashMap};
    use std::sync::{Mutex, PoisonError};
    use std::time::{Duration, Instant};

    use gpu_backend::{DeviceId, EventKind, GpuBackend};

    use super::{handle_of, Code, INVALID};
    use crate::abi::*;
    use crate::state;

    /// Sets are small numbers dressed as pointers, like device handles.
    const SET_BASE: usize = 0x6576_0000;

    #[derive(Default)]
    struct Set {
        /// Registered kinds (NVML's bits) per device.
        kinds: BTreeMap<DeviceId, u64>,
        /// The time of the newest event delivered, per device.
        delivered: HashMap<DeviceId, u64>,
        /// Per device, the recorded time up to which every event has been looked at and none
        /// of a registered kind was left: a wait looks only at newer ones.
        scanned: HashMap<DeviceId, u64>,
    }

    #[derive(Default)]
    struct Sets {
        next: usize,
        live: HashMap<usize, Set>,
    }

    static SETS: Mutex<Option<Sets>> = Mutex::new(None);

    fn with<T>(f: impl FnOnce(&mut Sets) -> T) -> T {
        let mut guard = SETS.lock().unwrap_or_else(PoisonError::into_inner);
        f(guard.get_or_insert_with(Sets::default))
    }

    pub(super) fn create() -> nvmlEventSet_t {
        with(|sets| {
            sets.next = sets.next.wrapping_add(1);
            let key = SET_BASE + sets.next * 16;
            sets.live.insert(key, Set::default());
            key as nvmlEventSet_t
        })
    }

    pub(super) fn register(set: nvmlEventSet_t, id: DeviceId, kinds: u64) -> Result<(), Code> {
        with(|sets| {
            let set = sets.live.get_mut(&(set as usize)).ok_or(INVALID)?;
            *set.kinds.entry(id).or_default() |= kinds;
            Ok(())
        })
    }

    pub(super) fn free(set: nvmlEventSet_t) -> Result<(), Code> {
        with(|sets| sets.live.remove(&(set as usize)).map(|_| ()).ok_or(INVALID))
    }

    /// The next event of `set`, waiting up to `timeout_ms` for one to come. On a wall-clock
    /// replay an event comes at its own time in the recording (moved onto this machine's clock,
    /// see [`state::ReplayTime`]), so that a listener sees the recording's event rate, not a
    /// burst at each frame; on a frame chosen by hand, with the frame that holds it.
    pub(super) fn wait(set: nvmlEventSet_t, timeout_ms: u32) -> Result<nvmlEventData_t, Code> {
        let deadline = Instant::now() + Duration::from_millis(timeout_ms.into());
        loop {
            // The frame may change while waiting (wall clock, or a test stepping it).
            let (b, time) = state::nvml_served().ok_or(Code(ret::UNINITIALIZED))?;
            let now = time.recorded_now();
            let left_us = u64::try_from(
                deadline
                    .saturating_duration_since(Instant::now())
                    .as_micros(),
            )
            .unwrap_or(u64::MAX);
            let mut next_due: Option<u64> = None;
            let found = with(|sets| -> Result<_, Code> {
                let set = sets.live.get_mut(&(set as usize)).ok_or(INVALID)?;
                let mut oldest: Option<(DeviceId, gpu_backend::GpuEvent)> = None;
                for (&id, &kinds) in &set.kinds {
                    let since = set.delivered.get(&id).copied().unwrap_or(0);
                    let since = since.max(set.scanned.get(&id).copied().unwrap_or(0));
                    let events = match now {
                        Some(now) => b.events_until(id, since, now),
                        None => b.events(id, since),
                    };
                    let Ok(events) = events else {
                        continue;
                    };
                    if let Some(e) = events.into_iter().find(|e| kinds & e.kind.nvml_bit() != 0) {
                        if oldest.is_none_or(|(_, o)| e.timestamp_us < o.timestamp_us) {
                            oldest = Some((id, e));
                        }
                    } else if let Some(now) = now {
                        // Nothing yet: none of these is looked at again, and the wait sleeps
                        // until the device's next event of a registered kind within the
                        // wait's time (a power-capped GPU sends dozens of clock events a second
                        // that a listener for health events never wakes for, as in NVML).
                        let last = now.max(since);
                        set.scanned.insert(id, last);
                        let ahead = b
                            .events_until(id, last, last.saturating_add(left_us))
                            .unwrap_or_default();
                        if let Some(e) = ahead.iter().find(|e| kinds & e.kind.nvml_bit() != 0) {
                            let t = e.timestamp_us;
                            next_due = Some(next_due.map_or(t, |n| n.min(t)));
                        }
                    }
                }
                if let Some((id, e)) = oldest {
                    set.delivered.insert(id, e.timestamp_us);
                }
                Ok(oldest)
            })?;
            if let Some((id, e)) = found {
                return Ok(nvmlEventData_t {
                    device: handle_of(id),
                    eventType: e.kind.nvml_bit(),
                    eventData: e.data,
                    gpuInstanceId: NVML_NO_INSTANCE_ID,
                    computeInstanceId: NVML_NO_INSTANCE_ID,
                });
            }
            let wall_now = Instant::now();
            if wall_now >= deadline {
                return Err(Code(ret::TIMEOUT));
            }
            // Asleep until an event can be due, as NVML's wait sleeps in the driver: a waiting
            // thread costs its process nothing between events.
            let left = deadline - wall_now;
            match (now, next_due) {
                (Some(now), Some(due)) => state::wait_for_frame_change(
                    &b,
                    left.min(Duration::from_micros(due.saturating_sub(now).max(1))),
                ),
                _ => state::wait_for_frame_change(&b, left),
            }
        }
    }

    /// Kept so that the kinds' bits stay NVML's (checked by the ABI test as well).
    const _: () = assert!(EventKind::Xid.nvml_bit() == 0x8);
}
