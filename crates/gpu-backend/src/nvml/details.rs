//! The NVML bodies of the queries `nvidia-smi -q` shows beyond the everyday ones (the table's
//! "beyond the everyday" rows): versioned structs, field values by scope, and the entry point
//! of NVML API 13 that nvml-wrapper-sys does not bind, looked up by name (`newer`). Each is a
//! function of the backend and the device, which `mod.rs`'s trait implementation calls.

use std::mem;
use std::os::raw::{c_char, c_uint, c_ulong, c_ulonglong};

use nvml_wrapper_sys::bindings as sys;

use super::conv::{self, check, symbol};
use super::NvmlBackend;
use crate::error::{nvml_codes, optional_parts, BackendError, Result};
use crate::types::{
    field_ids, hex_digits, AddressingMode, BbxFlush, BridgeChip, ClockEventCounter, ClockType,
    CodecUtilization, CurrentDefault, CurrentPending, DeviceAttributes, DeviceId, FabricInfo,
    GpuRecoveryAction, HostVgpuMode, InactiveRemappedRows, InforomObject, PciClass, PcieDirection,
    PlatformInfo, PowerScope, PowerSmoothing, ProtectedMemory, RepairStatus, RowRemapperHistogram,
    ScopedPowerLimits, SessionStats, SramEccStatus, TemperatureThreshold, VgpuCapability,
};

/// `NVML_STRUCT_VERSION(name, version)`: the struct's size with the version in the top byte,
/// what a versioned struct's first field must hold.
const fn struct_version<T>(version: u32) -> c_uint {
    (mem::size_of::<T>() as c_uint) | (version << 24)
}

/// A zeroed value of an NVML struct of plain data.
fn zeroed<T: Copy>() -> T {
    // SAFETY: only called with NVML's C structs of integers and arrays of integers, for which
    // all zeroes is a valid value.
    unsafe { mem::zeroed() }
}

/// Calls a raw device query that fills one struct, with its version set first when it has one.
macro_rules! query_struct {
    ($b:expr, $id:expr, $func:ident, $ty:ty $(, version $v:literal)?) => {{
        let handle = $b.handle($id)?;
        let func = symbol(&$b.lib().$func)?;
        let mut out: $ty = zeroed();
        $(out.version = struct_version::<$ty>($v);)?
        // SAFETY: a live handle and a writable struct of exactly the type the signature names.
        check(unsafe { func(handle, &mut out) })?;
        out
    }};
}

/// One requested field value: its id and scope.
#[derive(Clone, Copy)]
struct Field {
    id: u32,
    scope: u32,
}

/// The values of `fields`, in one `nvmlDeviceGetFieldValues` call; each field's own return code
/// is its answer.
fn field_values(
    b: &NvmlBackend,
    id: DeviceId,
    fields: &[Field],
) -> Result<Vec<sys::nvmlFieldValue_t>> {
    let handle = b.handle(id)?;
    let func = symbol(&b.lib().nvmlDeviceGetFieldValues)?;
    let mut values: Vec<sys::nvmlFieldValue_t> = fields
        .iter()
        .map(|f| {
            let mut v: sys::nvmlFieldValue_t = zeroed();
            v.fieldId = f.id;
            v.scopeId = f.scope;
            v
        })
        .collect();
    let count = i32::try_from(values.len())
        .map_err(|_| BackendError::Other("too many NVML fields in one call".into()))?;
    // SAFETY: a live handle and a buffer of exactly `count` entries.
    check(unsafe { func(handle, count, values.as_mut_ptr()) })?;
    Ok(values)
}

/// One field value, device-wide, as an unsigned number.
fn field_u64(b: &NvmlBackend, id: DeviceId, field: u32, scope: u32) -> Result<u64> {
    let values = field_values(b, id, &[Field { id: field, scope }])?;
    values
        .first()
        .ok_or_else(|| BackendError::Other("NVML returned no field value".into()))
        .and_then(conv::field_value_u64)
}

/// A number NVML gave that must fit 32 bits.
fn fits_u32(value: u64, what: &str) -> Result<u32> {
    u32::try_from(value)
        .map_err(|_| BackendError::Other(format!("NVML reported {value} for {what}")))
}

/// Fields read together, each `None` when the device does not report it ("cannot tell"); when
/// none answers, the first one's error; any other failure at once.
fn optional_fields<const N: usize>(
    b: &NvmlBackend,
    id: DeviceId,
    ids: [u32; N],
    scope: u32,
) -> Result<[Option<u64>; N]> {
    let fields = ids.map(|id| Field { id, scope });
    let values = field_values(b, id, &fields)?;
    optional_parts(values.iter().map(conv::field_value_u64))
}

/// The text of a NUL-terminated byte array NVML filled.
fn text_of(bytes: &[u8]) -> Result<String> {
    let end = bytes.iter().position(|&c| c == 0).unwrap_or(bytes.len());
    String::from_utf8(bytes[..end].to_vec())
        .map_err(|_| BackendError::Other("NVML returned text that is not UTF-8".into()))
}

/// Whether an NVML on/off number is on.
fn on(value: c_uint) -> bool {
    value != 0
}

pub(super) fn addressing_mode(b: &NvmlBackend, id: DeviceId) -> Result<AddressingMode> {
    let mode = query_struct!(b, id, nvmlDeviceGetAddressingMode, sys::nvmlDeviceAddressingMode_v1_t, version 1);
    Ok(AddressingMode::from_nvml(mode.value))
}

pub(super) fn inforom_version(
    b: &NvmlBackend,
    id: DeviceId,
    object: InforomObject,
) -> Result<String> {
    let handle = b.handle(id)?;
    let func = symbol(&b.lib().nvmlDeviceGetInforomVersion)?;
    let len = sys::NVML_DEVICE_INFOROM_VERSION_BUFFER_SIZE;
    let mut buffer: Vec<c_char> = vec![0; len as usize];
    // SAFETY: a live handle, NVML's object number and a buffer of exactly `len` bytes.
    check(unsafe { func(handle, object.nvml_code(), buffer.as_mut_ptr(), len) })?;
    conv::string_from_c(&buffer)
}

/// `NVML_ERROR_CORRUPTED_INFOROM` is the answer "not valid", not a failure.
pub(super) fn inforom_valid(b: &NvmlBackend, id: DeviceId) -> Result<bool> {
    let handle = b.handle(id)?;
    let func = symbol(&b.lib().nvmlDeviceValidateInforom)?;
    // SAFETY: a live handle.
    match check(unsafe { func(handle) }) {
        Ok(()) => Ok(true),
        Err(BackendError::Unknown(nvml_codes::CORRUPTED_INFOROM)) => Ok(false),
        Err(e) => Err(e),
    }
}

pub(super) fn pdi(b: &NvmlBackend, id: DeviceId) -> Result<u64> {
    Ok(query_struct!(b, id, nvmlDeviceGetPdi, sys::nvmlPdi_v1_t, version 1).value)
}

pub(super) fn platform_info(b: &NvmlBackend, id: DeviceId) -> Result<PlatformInfo> {
    let p = query_struct!(b, id, nvmlDeviceGetPlatformInfo, sys::nvmlPlatformInfo_v2_t, version 2);
    Ok(PlatformInfo {
        ib_guid: hex_digits(&p.ibGuid),
        chassis_serial_number: text_of(&p.chassisSerialNumber)?,
        slot_number: p.slotNumber.into(),
        tray_index: p.trayIndex.into(),
        host_id: p.hostId.into(),
        peer_type: p.peerType.into(),
        module_id: p.moduleId.into(),
    })
}

pub(super) fn c2c_mode(b: &NvmlBackend, id: DeviceId) -> Result<bool> {
    let info = query_struct!(b, id, nvmlDeviceGetC2cModeInfoV, sys::nvmlC2cModeInfo_v1_t);
    Ok(on(info.isC2cEnabled))
}

pub(super) fn host_vgpu_mode(b: &NvmlBackend, id: DeviceId) -> Result<HostVgpuMode> {
    let code: sys::nvmlHostVgpuMode_t = query_one!(b, id, nvmlDeviceGetHostVgpuMode);
    Ok(HostVgpuMode::from_nvml(code))
}

pub(super) fn vgpu_heterogeneous_mode(b: &NvmlBackend, id: DeviceId) -> Result<bool> {
    let mode = query_struct!(b, id, nvmlDeviceGetVgpuHeterogeneousMode, sys::nvmlVgpuHeterogeneousMode_v1_t, version 1);
    Ok(on(mode.mode))
}

pub(super) fn vgpu_capability(
    b: &NvmlBackend,
    id: DeviceId,
    capability: VgpuCapability,
) -> Result<u32> {
    Ok(query_one!(
        b,
        id,
        nvmlDeviceGetVgpuCapabilities,
        capability.nvml_code()
    ))
}

pub(super) fn vgpu_heterogeneous_multi_vgpu(b: &NvmlBackend) -> Result<bool> {
    let func = symbol(&b.lib().nvmlGetVgpuDriverCapabilities)?;
    let mut result: c_uint = 0;
    // SAFETY: NVML's capability number and a writable out-pointer.
    check(unsafe {
        func(
            sys::nvmlVgpuDriverCapability_enum_NVML_VGPU_DRIVER_CAP_HETEROGENEOUS_MULTI_VGPU,
            &mut result,
        )
    })?;
    Ok(on(result))
}

pub(super) fn gsp_firmware_version(b: &NvmlBackend, id: DeviceId) -> Result<String> {
    let handle = b.handle(id)?;
    let func = symbol(&b.lib().nvmlDeviceGetGspFirmwareVersion)?;
    // NVML_GSP_FIRMWARE_VERSION_BUF_SIZE: the call takes no length; the buffer is the size
    // nvml.h promises is enough.
    let mut buffer: Vec<c_char> = vec![0; sys::NVML_GSP_FIRMWARE_VERSION_BUF_SIZE as usize];
    // SAFETY: a live handle and a buffer of NVML_GSP_FIRMWARE_VERSION_BUF_SIZE bytes.
    check(unsafe { func(handle, buffer.as_mut_ptr()) })?;
    conv::string_from_c(&buffer)
}

pub(super) fn gsp_firmware_mode(b: &NvmlBackend, id: DeviceId) -> Result<CurrentDefault<bool>> {
    let (enabled, default): (c_uint, c_uint) = query_two!(b, id, nvmlDeviceGetGspFirmwareMode);
    Ok(CurrentDefault {
        current: on(enabled),
        default: on(default),
    })
}

pub(super) fn pci_class(b: &NvmlBackend, id: DeviceId) -> Result<PciClass> {
    let p = query_struct!(b, id, nvmlDeviceGetPciInfoExt, sys::nvmlPciInfoExt_v1_t, version 1);
    Ok(PciClass {
        base_class: p.baseClass,
        sub_class: p.subClass,
    })
}

pub(super) fn pcie_atomics(b: &NvmlBackend, id: DeviceId, direction: PcieDirection) -> Result<u32> {
    let field = match direction {
        PcieDirection::Tx => field_ids::PCIE_OUTBOUND_ATOMICS_MASK,
        PcieDirection::Rx => field_ids::PCIE_INBOUND_ATOMICS_MASK,
    };
    fits_u32(field_u64(b, id, field, 0)?, "a PCIe atomics mask")
}

/// At most `nvmlBridgeChipHierarchy_t`'s 128 entries, whatever count NVML says.
pub(super) fn bridge_chips(b: &NvmlBackend, id: DeviceId) -> Result<Vec<BridgeChip>> {
    let h = query_struct!(
        b,
        id,
        nvmlDeviceGetBridgeChipInfo,
        sys::nvmlBridgeChipHierarchy_t
    );
    Ok(h.bridgeChipInfo
        .iter()
        .take(usize::from(h.bridgeCount))
        .map(|c| BridgeChip {
            kind: c.type_,
            firmware: c.fwVersion,
        })
        .collect())
}

pub(super) fn max_customer_boost_clock(
    b: &NvmlBackend,
    id: DeviceId,
    clock: ClockType,
) -> Result<u32> {
    Ok(query_one!(
        b,
        id,
        nvmlDeviceGetMaxCustomerBoostClock,
        clock.nvml_code()
    ))
}

pub(super) fn auto_boosted_clocks(b: &NvmlBackend, id: DeviceId) -> Result<CurrentDefault<bool>> {
    let (current, default): (sys::nvmlEnableState_t, sys::nvmlEnableState_t) =
        query_two!(b, id, nvmlDeviceGetAutoBoostedClocksEnabled);
    Ok(CurrentDefault {
        current: conv::enable_state(current)?,
        default: conv::enable_state(default)?,
    })
}

/// The T.Limit thresholds have no field for the target temperatures: those are not supported.
pub(super) fn temperature_tlimit(
    b: &NvmlBackend,
    id: DeviceId,
    threshold: TemperatureThreshold,
) -> Result<i32> {
    let field = threshold.tlimit_field().ok_or(BackendError::NotSupported)?;
    let values = field_values(
        b,
        id,
        &[Field {
            id: field,
            scope: 0,
        }],
    )?;
    let value = values
        .first()
        .ok_or_else(|| BackendError::Other("NVML returned no field value".into()))?;
    let t = conv::field_value_i64(value)?;
    i32::try_from(t)
        .map_err(|_| BackendError::Other(format!("NVML reported a T.Limit threshold of {t} °C")))
}

pub(super) fn module_power_limits(b: &NvmlBackend, id: DeviceId) -> Result<ScopedPowerLimits> {
    let values = optional_fields(
        b,
        id,
        field_ids::POWER_LIMITS,
        PowerScope::Module.nvml_code(),
    )?;
    let mut limits = [None; 5];
    for (slot, v) in limits.iter_mut().zip(values) {
        *slot = v.map(|v| fits_u32(v, "a module power limit")).transpose()?;
    }
    Ok(ScopedPowerLimits::from_values(limits))
}

pub(super) fn power_smoothing(b: &NvmlBackend, id: DeviceId) -> Result<PowerSmoothing> {
    Ok(PowerSmoothing::from_values(optional_fields(
        b,
        id,
        field_ids::POWER_SMOOTHING,
        0,
    )?))
}

pub(super) fn dram_encryption_mode(b: &NvmlBackend, id: DeviceId) -> Result<CurrentPending<bool>> {
    let handle = b.handle(id)?;
    let func = symbol(&b.lib().nvmlDeviceGetDramEncryptionMode)?;
    let mut current: sys::nvmlDramEncryptionInfo_v1_t = zeroed();
    let mut pending: sys::nvmlDramEncryptionInfo_v1_t = zeroed();
    current.version = struct_version::<sys::nvmlDramEncryptionInfo_v1_t>(1);
    pending.version = current.version;
    // SAFETY: a live handle and two writable, versioned structs.
    check(unsafe { func(handle, &mut current, &mut pending) })?;
    Ok(CurrentPending {
        current: conv::enable_state(current.encryptionState)?,
        pending: conv::enable_state(pending.encryptionState)?,
    })
}

pub(super) fn capabilities(b: &NvmlBackend, id: DeviceId) -> Result<u32> {
    Ok(query_struct!(b, id, nvmlDeviceGetCapabilities, sys::nvmlDeviceCapabilities_v1_t, version 1).capMask)
}

pub(super) fn hostname(b: &NvmlBackend, id: DeviceId) -> Result<String> {
    let handle = b.handle(id)?;
    let func = b.newer.hostname.ok_or(BackendError::FunctionNotFound)?;
    let mut name = newer::Hostname { value: [0; 64] };
    // SAFETY: the library's own entry point, looked up by its name, with a live handle and a
    // writable struct of the layout nvml.h gives it.
    check(unsafe { func(handle, &mut name) })?;
    text_of(&name.value)
}

pub(super) fn device_attributes(b: &NvmlBackend, id: DeviceId) -> Result<DeviceAttributes> {
    let a = query_struct!(
        b,
        id,
        nvmlDeviceGetAttributes_v2,
        sys::nvmlDeviceAttributes_t
    );
    Ok(DeviceAttributes {
        multiprocessor_count: a.multiprocessorCount,
        shared_copy_engine_count: a.sharedCopyEngineCount,
        shared_decoder_count: a.sharedDecoderCount,
        shared_encoder_count: a.sharedEncoderCount,
        shared_jpeg_count: a.sharedJpegCount,
        shared_ofa_count: a.sharedOfaCount,
        gpu_instance_slice_count: Some(a.gpuInstanceSliceCount),
        compute_instance_slice_count: Some(a.computeInstanceSliceCount),
        memory_size_mib: Some(a.memorySizeMB),
    })
}

// ---- Changing ----

pub(super) fn gpu_recovery_action(b: &NvmlBackend, id: DeviceId) -> Result<GpuRecoveryAction> {
    let code = field_u64(b, id, field_ids::GPU_RECOVERY_ACTION, 0)?;
    Ok(GpuRecoveryAction::from_nvml(fits_u32(
        code,
        "the recovery action",
    )?))
}

pub(super) fn pcie_replay_rollover_counter(b: &NvmlBackend, id: DeviceId) -> Result<u32> {
    let n = field_u64(b, id, field_ids::PCIE_REPLAY_ROLLOVER_COUNTER, 0)?;
    fits_u32(n, "the PCIe replay rollovers")
}

pub(super) fn clock_event_time(
    b: &NvmlBackend,
    id: DeviceId,
    reason: ClockEventCounter,
) -> Result<u64> {
    field_u64(b, id, reason.nvml_code(), 0)
}

/// `nvmlDeviceGetJpgUtilization` or `nvmlDeviceGetOfaUtilization`: a percentage and a period.
pub(super) fn engine_utilization(
    b: &NvmlBackend,
    id: DeviceId,
    jpeg: bool,
) -> Result<CodecUtilization> {
    let (utilization, sampling_period_us): (c_uint, c_uint) = if jpeg {
        query_two!(b, id, nvmlDeviceGetJpgUtilization)
    } else {
        query_two!(b, id, nvmlDeviceGetOfaUtilization)
    };
    Ok(CodecUtilization {
        utilization,
        sampling_period_us,
    })
}

pub(super) fn encoder_stats(b: &NvmlBackend, id: DeviceId) -> Result<SessionStats> {
    let handle = b.handle(id)?;
    let func = symbol(&b.lib().nvmlDeviceGetEncoderStats)?;
    let (mut sessions, mut fps, mut latency): (c_uint, c_uint, c_uint) = (0, 0, 0);
    // SAFETY: a live handle and three writable out-pointers.
    check(unsafe { func(handle, &mut sessions, &mut fps, &mut latency) })?;
    Ok(SessionStats {
        sessions,
        average_fps: fps,
        average_latency_us: latency,
    })
}

pub(super) fn fbc_stats(b: &NvmlBackend, id: DeviceId) -> Result<SessionStats> {
    let s = query_struct!(b, id, nvmlDeviceGetFBCStats, sys::nvmlFBCStats_t);
    Ok(SessionStats {
        sessions: s.sessionsCount,
        average_fps: s.averageFPS,
        average_latency_us: s.averageLatency,
    })
}

pub(super) fn sram_ecc_status(b: &NvmlBackend, id: DeviceId) -> Result<SramEccStatus> {
    let s = query_struct!(b, id, nvmlDeviceGetSramEccErrorStatus, sys::nvmlEccSramErrorStatus_v1_t, version 1);
    Ok(SramEccStatus {
        aggregate_uncorrectable_parity: s.aggregateUncParity,
        aggregate_uncorrectable_sec_ded: s.aggregateUncSecDed,
        aggregate_correctable: s.aggregateCor,
        volatile_uncorrectable_parity: s.volatileUncParity,
        volatile_uncorrectable_sec_ded: s.volatileUncSecDed,
        volatile_correctable: s.volatileCor,
        aggregate_uncorrectable_l2: s.aggregateUncBucketL2,
        aggregate_uncorrectable_sm: s.aggregateUncBucketSm,
        aggregate_uncorrectable_pcie: s.aggregateUncBucketPcie,
        aggregate_uncorrectable_mcu: s.aggregateUncBucketMcu,
        aggregate_uncorrectable_other: s.aggregateUncBucketOther,
        threshold_exceeded: on(s.bThresholdExceeded),
    })
}

pub(super) fn repair_status(b: &NvmlBackend, id: DeviceId) -> Result<RepairStatus> {
    let s = query_struct!(b, id, nvmlDeviceGetRepairStatus, sys::nvmlRepairStatus_v1_t, version 1);
    Ok(RepairStatus {
        channel_repair_pending: on(s.bChannelRepairPending),
        tpc_repair_pending: on(s.bTpcRepairPending),
    })
}

pub(super) fn inactive_remapped_rows(
    b: &NvmlBackend,
    id: DeviceId,
) -> Result<InactiveRemappedRows> {
    let values = field_values(
        b,
        id,
        &[
            Field {
                id: field_ids::REMAPPED_ROWS_COR_INACTIVE,
                scope: 0,
            },
            Field {
                id: field_ids::REMAPPED_ROWS_UNC_INACTIVE,
                scope: 0,
            },
        ],
    )?;
    match values.as_slice() {
        [cor, unc] => Ok(InactiveRemappedRows {
            correctable: conv::field_value_u64(cor)?,
            uncorrectable: conv::field_value_u64(unc)?,
        }),
        _ => Err(BackendError::Other(
            "NVML returned too few field values".into(),
        )),
    }
}

pub(super) fn row_remapper_histogram(
    b: &NvmlBackend,
    id: DeviceId,
) -> Result<RowRemapperHistogram> {
    let h = query_struct!(
        b,
        id,
        nvmlDeviceGetRowRemapperHistogram,
        sys::nvmlRowRemapperHistogramValues_t
    );
    Ok(RowRemapperHistogram {
        max: h.max,
        high: h.high,
        partial: h.partial,
        low: h.low,
        none: h.none,
    })
}

pub(super) fn margin_temperature(b: &NvmlBackend, id: DeviceId) -> Result<i32> {
    Ok(query_struct!(b, id, nvmlDeviceGetMarginTemperature, sys::nvmlMarginTemperature_v1_t, version 1).marginTemperature)
}

pub(super) fn protected_memory(b: &NvmlBackend, id: DeviceId) -> Result<ProtectedMemory> {
    let m = query_struct!(
        b,
        id,
        nvmlDeviceGetConfComputeProtectedMemoryUsage,
        sys::nvmlMemory_t
    );
    Ok(ProtectedMemory {
        total: m.total,
        used: m.used,
        free: m.free,
    })
}

pub(super) fn fabric_info(b: &NvmlBackend, id: DeviceId) -> Result<FabricInfo> {
    let f =
        query_struct!(b, id, nvmlDeviceGetGpuFabricInfoV, sys::nvmlGpuFabricInfo_v3_t, version 3);
    Ok(FabricInfo {
        cluster_uuid: hex_digits(&f.clusterUuid),
        status: f.status as i32,
        clique_id: f.cliqueId,
        state: f.state.into(),
        health_mask: f.healthMask,
        health_summary: f.healthSummary.into(),
    })
}

pub(super) fn bbx_flush(b: &NvmlBackend, id: DeviceId) -> Result<BbxFlush> {
    let handle = b.handle(id)?;
    let func = symbol(&b.lib().nvmlDeviceGetLastBBXFlushTime)?;
    let mut timestamp: c_ulonglong = 0;
    let mut duration: c_ulong = 0;
    // SAFETY: a live handle and two writable out-pointers of the types the signature names.
    check(unsafe { func(handle, &mut timestamp, &mut duration) })?;
    #[allow(clippy::useless_conversion)]
    Ok(BbxFlush {
        timestamp_us: timestamp,
        duration_us: u64::from(duration),
    })
}

/// `NVML_FI_DEV_POWER_AVERAGE` or `_INSTANT` of one scope, mW.
pub(super) fn scoped_power(
    b: &NvmlBackend,
    id: DeviceId,
    scope: PowerScope,
    instant: bool,
) -> Result<u32> {
    let field = if instant {
        field_ids::POWER_INSTANT
    } else {
        field_ids::POWER_AVERAGE
    };
    fits_u32(
        field_u64(b, id, field, scope.nvml_code())?,
        "a power reading",
    )
}

/// The entry points of NVML API 13 (driver 580) that nvml-wrapper-sys does not bind, looked up
/// by name in the same library; a library without them answers `FunctionNotFound` for their
/// queries.
pub(super) mod newer {
    use std::ffi::OsStr;

    use nvml_wrapper_sys::bindings as sys;

    /// `nvmlHostname_v1_t`.
    #[repr(C)]
    pub(crate) struct Hostname {
        pub(crate) value: [u8; 64],
    }

    type HostnameFn = unsafe extern "C" fn(sys::nvmlDevice_t, *mut Hostname) -> sys::nvmlReturn_t;

    /// The library, opened again (the loader hands back the one already loaded), and the entry
    /// points found in it.
    #[derive(Default)]
    pub(crate) struct Symbols {
        /// Kept so that the entry points stay valid.
        _library: Option<libloading::Library>,
        /// `nvmlDeviceGetHostname_v1`.
        pub(crate) hostname: Option<HostnameFn>,
    }

    impl Symbols {
        /// Looks the entry points up in the library at `path` (the loader's search for
        /// `default` without one); none found when it cannot be opened.
        pub(crate) fn open(path: Option<&OsStr>, default: &str) -> Symbols {
            let name = path.unwrap_or_else(|| OsStr::new(default));
            // SAFETY: the NVML library, already loaded and initialised by nvml-wrapper; opening
            // it again runs no initialisers.
            let Ok(library) = (unsafe { libloading::Library::new(name) }) else {
                return Symbols::default();
            };
            // SAFETY: the symbols are NVML's entry points of these names, whose signatures
            // nvml.h (NVML API 13) gives as the types above.
            let hostname = unsafe { library.get::<HostnameFn>(b"nvmlDeviceGetHostname_v1\0") }
                .ok()
                .map(|f| *f);
            Symbols {
                _library: Some(library),
                hostname,
            }
        }
    }
}
