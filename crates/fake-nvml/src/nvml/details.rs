//! The exported entry points of the queries `nvidia-smi -q` shows beyond the everyday ones
//! (the query table's "beyond the everyday" rows with `abi: custom`), and the field values they
//! read ([`field_answer`], for `nvmlDeviceGetFieldValues`).

use std::ffi::{c_char, c_uint, c_ulong, c_ulonglong};

use gpu_backend::{
    bytes_of_hex, field_ids, BackendError, ClockEventCounter, DeviceId, GpuBackend, InforomObject,
    PcieDirection, PowerScope, ReplayBackend, TemperatureThreshold, VgpuCapability,
};

use super::{call, enable, fill_array, nn, put, put_str, Code, Ctx, INVALID};
use crate::abi::*;

/// A versioned struct whose version word is not the one this library serves answers
/// `NVML_ERROR_ARGUMENT_VERSION_MISMATCH`, as NVML does.
fn version(got: c_uint, expected: c_uint) -> Result<(), Code> {
    if got == expected {
        Ok(())
    } else {
        Err(Code(ret::ARGUMENT_VERSION_MISMATCH))
    }
}

/// A number NVML's struct holds in a byte; a larger one answers `NVML_ERROR_UNKNOWN`.
fn byte(v: u32) -> Result<u8, Code> {
    u8::try_from(v).map_err(|_| Code(ret::UNKNOWN))
}

/// The value of one field (`NVML_FI_*` with its scope) and its `nvmlValueType_t`, or the error
/// the field alone answers: what `nvmlDeviceGetFieldValues` serves beside NVLink throughput and
/// memory temperature.
pub(super) fn field_answer(
    b: &ReplayBackend,
    id: DeviceId,
    field: c_uint,
    scope: c_uint,
) -> Option<Result<(c_uint, nvmlValue_t), BackendError>> {
    let unsigned = |v: Result<u64, BackendError>| {
        v.map(|v| {
            (
                NVML_VALUE_TYPE_UNSIGNED_LONG_LONG,
                nvmlValue_t { ullVal: v },
            )
        })
    };
    let scope_of = || PowerScope::from_nvml(scope).ok_or(BackendError::NotSupported);
    let answer = match field {
        field_ids::PCIE_REPLAY_ROLLOVER_COUNTER => {
            unsigned(b.pcie_replay_rollover_counter(id).map(u64::from))
        }
        field_ids::POWER_AVERAGE => unsigned(
            scope_of()
                .and_then(|s| b.power_average(id, s))
                .map(u64::from),
        ),
        field_ids::POWER_INSTANT => unsigned(
            scope_of()
                .and_then(|s| b.power_instant(id, s))
                .map(u64::from),
        ),
        f if field_ids::POWER_LIMITS.contains(&f) => unsigned(power_limit(b, id, f, scope)),
        f if field_ids::POWER_SMOOTHING.contains(&f) => {
            unsigned(b.power_smoothing(id).and_then(|p| {
                let i = field_ids::POWER_SMOOTHING.iter().position(|&x| x == f);
                i.and_then(|i| p.values()[i])
                    .ok_or(BackendError::NotSupported)
            }))
        }
        field_ids::PCIE_OUTBOUND_ATOMICS_MASK => {
            unsigned(b.pcie_atomics(id, PcieDirection::Tx).map(u64::from))
        }
        field_ids::PCIE_INBOUND_ATOMICS_MASK => {
            unsigned(b.pcie_atomics(id, PcieDirection::Rx).map(u64::from))
        }
        field_ids::GPU_RECOVERY_ACTION => {
            unsigned(b.gpu_recovery_action(id).map(|a| u64::from(a.nvml_code())))
        }
        field_ids::REMAPPED_ROWS_COR_INACTIVE => {
            unsigned(b.inactive_remapped_rows(id).map(|r| r.correctable))
        }
        field_ids::REMAPPED_ROWS_UNC_INACTIVE => {
            unsigned(b.inactive_remapped_rows(id).map(|r| r.uncorrectable))
        }
        f => {
            if let Some(reason) = ClockEventCounter::from_nvml(f) {
                unsigned(b.clock_event_time(id, reason))
            } else if let Some(t) = [
                TemperatureThreshold::Shutdown,
                TemperatureThreshold::Slowdown,
                TemperatureThreshold::MemoryMax,
                TemperatureThreshold::GpuMax,
            ]
            .into_iter()
            .find(|t| t.tlimit_field() == Some(f))
            {
                b.temperature_tlimit(id, t)
                    .map(|v| (NVML_VALUE_TYPE_SIGNED_INT, nvmlValue_t { siVal: v }))
            } else {
                return None;
            }
        }
    };
    Some(answer)
}

/// A power limit field: the module's from `module_power_limits`, the GPU's from the GPU's own
/// limit queries; memory has none.
fn power_limit(
    b: &ReplayBackend,
    id: DeviceId,
    field: c_uint,
    scope: c_uint,
) -> Result<u64, BackendError> {
    let i = field_ids::POWER_LIMITS
        .iter()
        .position(|&x| x == field)
        .ok_or(BackendError::NotSupported)?;
    let mw = match PowerScope::from_nvml(scope) {
        Some(PowerScope::Module) => b.module_power_limits(id)?.values()[i],
        Some(PowerScope::Gpu) => Some(match i {
            0 => b.enforced_power_limit(id)?,
            1 => b.power_management_limit(id)?,
            2 => b.power_management_default_limit(id)?,
            3 => b.power_management_limit_constraints(id)?.min_mw,
            _ => b.power_management_limit_constraints(id)?.max_mw,
        }),
        _ => None,
    };
    mw.map(u64::from).ok_or(BackendError::NotSupported)
}

nvml_value_getters! {
    /// `nvmlDeviceGetAddressingMode`.
    fn nvmlDeviceGetAddressingMode(*mut nvmlDeviceAddressingMode_v1_t, version 1).value = |b, id| b.addressing_mode(id)?.nvml_code();
    /// `nvmlDeviceGetPdi`.
    fn nvmlDeviceGetPdi(*mut nvmlPdi_v1_t, version 1).value = |b, id| b.pdi(id)?;
    /// `nvmlDeviceGetVgpuHeterogeneousMode`.
    fn nvmlDeviceGetVgpuHeterogeneousMode(*mut nvmlVgpuHeterogeneousMode_v1_t, version 1).mode = |b, id| c_uint::from(b.vgpu_heterogeneous_mode(id)?);
    /// `nvmlDeviceGetCapabilities`.
    fn nvmlDeviceGetCapabilities(*mut nvmlDeviceCapabilities_v1_t, version 1).capMask = |b, id| b.capabilities(id)?;
    /// `nvmlDeviceGetMarginTemperature`.
    fn nvmlDeviceGetMarginTemperature(*mut nvmlMarginTemperature_v1_t, version 1).marginTemperature = |b, id| b.margin_temperature(id)?;
}

nvml_api! {
    /// `nvmlGetVgpuDriverCapabilities`: only `NVML_VGPU_DRIVER_CAP_HETEROGENEOUS_MULTI_VGPU` (0).
    fn nvmlGetVgpuDriverCapabilities(capability: c_uint, result: *mut c_uint) |ctx| {
        nn(result)?;
        if capability != 0 {
            return Err(Code(ret::NOT_SUPPORTED));
        }
        put(result, c_uint::from(ctx.b.vgpu_heterogeneous_multi_vgpu()?))
    }
    /// `nvmlDeviceGetInforomVersion`: objects 0 OEM, 1 ECC, 2 power.
    fn nvmlDeviceGetInforomVersion(device: nvmlDevice_t, object: c_uint, buf: *mut c_char, length: c_uint) |ctx| {
        let id = ctx.dev(device)?;
        let object = InforomObject::from_nvml(object).ok_or(INVALID)?;
        put_str(buf, length, &ctx.b.inforom_version(id, object)?)
    }
    /// `nvmlDeviceValidateInforom`: `NVML_ERROR_CORRUPTED_INFOROM` when recorded as not valid.
    fn nvmlDeviceValidateInforom(device: nvmlDevice_t) |ctx| {
        let id = ctx.dev(device)?;
        if ctx.b.inforom_valid(id)? {
            Ok(())
        } else {
            Err(Code(gpu_backend::error::nvml_codes::CORRUPTED_INFOROM as nvmlReturn_t))
        }
    }
    /// `nvmlDeviceGetVgpuCapabilities`: the capabilities `--query-gpu` names; others answer
    /// `NVML_ERROR_NOT_SUPPORTED`.
    fn nvmlDeviceGetVgpuCapabilities(device: nvmlDevice_t, capability: c_uint, result: *mut c_uint) |ctx| {
        let id = ctx.dev(device)?;
        nn(result)?;
        let cap = VgpuCapability::from_nvml(capability).ok_or(Code(ret::NOT_SUPPORTED))?;
        put(result, ctx.b.vgpu_capability(id, cap)?)
    }
    /// `nvmlDeviceGetGspFirmwareVersion`: into the caller's buffer of
    /// `NVML_GSP_FIRMWARE_VERSION_BUF_SIZE` (64) bytes.
    fn nvmlDeviceGetGspFirmwareVersion(device: nvmlDevice_t, buf: *mut c_char) |ctx| {
        let id = ctx.dev(device)?;
        put_str(buf, 64, &ctx.b.gsp_firmware_version(id)?)
    }
    /// `nvmlDeviceGetPciInfoExt`: the PCI identity with its classes.
    fn nvmlDeviceGetPciInfoExt(device: nvmlDevice_t, pci: *mut nvmlPciInfoExt_v1_t) |ctx| {
        let id = ctx.dev(device)?;
        nn(pci)?;
        version((*pci).version, struct_version::<nvmlPciInfoExt_v1_t>(1))?;
        let p = ctx.b.pci_info(id)?;
        let class = ctx.b.pci_class(id)?;
        let mut out = nvmlPciInfoExt_v1_t {
            version: (*pci).version,
            domain: p.domain,
            bus: p.bus,
            device: p.device,
            pciDeviceId: p.pci_device_id,
            pciSubSystemId: p.pci_subsystem_id,
            baseClass: class.base_class,
            subClass: class.sub_class,
            busId: [0; 32],
        };
        fill_array(&mut out.busId, &p.bus_id);
        put(pci, out)
    }
    /// `nvmlDeviceGetBridgeChipInfo`: at most 128 chips.
    fn nvmlDeviceGetBridgeChipInfo(device: nvmlDevice_t, hierarchy: *mut nvmlBridgeChipHierarchy_t) |ctx| {
        let id = ctx.dev(device)?;
        nn(hierarchy)?;
        let chips = ctx.b.bridge_chips(id)?;
        let mut out = nvmlBridgeChipHierarchy_t {
            bridgeCount: u8::try_from(chips.len().min(128)).unwrap_or(128),
            bridgeChipInfo: [nvmlBridgeChipInfo_t::default(); 128],
        };
        for (slot, chip) in out.bridgeChipInfo.iter_mut().zip(&chips) {
            *slot = nvmlBridgeChipInfo_t { type_: chip.kind, fwVersion: chip.firmware };
        }
        put(hierarchy, out)
    }
    /// `nvmlDeviceGetDramEncryptionMode`: current and pending.
    fn nvmlDeviceGetDramEncryptionMode(device: nvmlDevice_t, current: *mut nvmlDramEncryptionInfo_v1_t, pending: *mut nvmlDramEncryptionInfo_v1_t) |ctx| {
        let id = ctx.dev(device)?;
        nn(current)?;
        nn(pending)?;
        let v = struct_version::<nvmlDramEncryptionInfo_v1_t>(1);
        version((*current).version, v)?;
        version((*pending).version, v)?;
        let m = ctx.b.dram_encryption_mode(id)?;
        (*current).encryptionState = enable(m.current);
        (*pending).encryptionState = enable(m.pending);
        Ok(())
    }
    /// `nvmlDeviceGetHostname_v1`.
    fn nvmlDeviceGetHostname_v1(device: nvmlDevice_t, name: *mut nvmlHostname_v1_t) |ctx| {
        let id = ctx.dev(device)?;
        nn(name)?;
        let mut out = nvmlHostname_v1_t { value: [0; 64] };
        fill_array(&mut out.value, &ctx.b.hostname(id)?);
        put(name, out)
    }
    /// `nvmlDeviceGetAttributes_v2` (and the original name): what a MIG device or GPU is made
    /// of.
    fn nvmlDeviceGetAttributes_v2(device: nvmlDevice_t, attributes: *mut nvmlDeviceAttributes_t) |ctx| {
        attributes_of(ctx, device, attributes)
    }
    /// `nvmlDeviceGetAttributes`: as `nvmlDeviceGetAttributes_v2`.
    fn nvmlDeviceGetAttributes(device: nvmlDevice_t, attributes: *mut nvmlDeviceAttributes_t) |ctx| {
        attributes_of(ctx, device, attributes)
    }
    /// `nvmlDeviceGetSramEccErrorStatus`.
    fn nvmlDeviceGetSramEccErrorStatus(device: nvmlDevice_t, status: *mut nvmlEccSramErrorStatus_v1_t) |ctx| {
        let id = ctx.dev(device)?;
        nn(status)?;
        version((*status).version, struct_version::<nvmlEccSramErrorStatus_v1_t>(1))?;
        let s = ctx.b.sram_ecc_status(id)?;
        put(status, nvmlEccSramErrorStatus_v1_t {
            version: (*status).version,
            aggregateUncParity: s.aggregate_uncorrectable_parity,
            aggregateUncSecDed: s.aggregate_uncorrectable_sec_ded,
            aggregateCor: s.aggregate_correctable,
            volatileUncParity: s.volatile_uncorrectable_parity,
            volatileUncSecDed: s.volatile_uncorrectable_sec_ded,
            volatileCor: s.volatile_correctable,
            aggregateUncBucketL2: s.aggregate_uncorrectable_l2,
            aggregateUncBucketSm: s.aggregate_uncorrectable_sm,
            aggregateUncBucketPcie: s.aggregate_uncorrectable_pcie,
            aggregateUncBucketMcu: s.aggregate_uncorrectable_mcu,
            aggregateUncBucketOther: s.aggregate_uncorrectable_other,
            bThresholdExceeded: c_uint::from(s.threshold_exceeded),
        })
    }
    /// `nvmlDeviceGetRepairStatus`.
    fn nvmlDeviceGetRepairStatus(device: nvmlDevice_t, status: *mut nvmlRepairStatus_v1_t) |ctx| {
        let id = ctx.dev(device)?;
        nn(status)?;
        version((*status).version, struct_version::<nvmlRepairStatus_v1_t>(1))?;
        let s = ctx.b.repair_status(id)?;
        (*status).bChannelRepairPending = c_uint::from(s.channel_repair_pending);
        (*status).bTpcRepairPending = c_uint::from(s.tpc_repair_pending);
        Ok(())
    }
}

nvml_value_getters! {
    /// `nvmlDeviceGetPlatformInfo` (v2).
    fn nvmlDeviceGetPlatformInfo(*mut nvmlPlatformInfo_v2_t, version 2) = |b, id| {
        let p = b.platform_info(id)?;
        let mut serial = [0u8; 16];
        let text = p.chassis_serial_number.as_bytes();
        let n = text.len().min(16);
        serial[..n].copy_from_slice(&text[..n]);
        nvmlPlatformInfo_v2_t {
            version: struct_version::<nvmlPlatformInfo_v2_t>(2),
            ibGuid: bytes_of_hex::<16>(&p.ib_guid).ok_or(Code(ret::UNKNOWN))?,
            chassisSerialNumber: serial,
            slotNumber: byte(p.slot_number)?,
            trayIndex: byte(p.tray_index)?,
            hostId: byte(p.host_id)?,
            peerType: byte(p.peer_type)?,
            moduleId: byte(p.module_id)?,
        }
    };
    /// `nvmlDeviceGetGpuFabricInfoV` (v3).
    fn nvmlDeviceGetGpuFabricInfoV(*mut nvmlGpuFabricInfo_v3_t, version 3) = |b, id| {
        let f = b.fabric_info(id)?;
        nvmlGpuFabricInfo_v3_t {
            version: struct_version::<nvmlGpuFabricInfo_v3_t>(3),
            clusterUuid: bytes_of_hex::<16>(&f.cluster_uuid).ok_or(Code(ret::UNKNOWN))?,
            status: f.status as nvmlReturn_t,
            cliqueId: f.clique_id,
            state: byte(f.state)?,
            healthMask: f.health_mask,
            healthSummary: byte(f.health_summary)?,
        }
    };
    /// `nvmlDeviceGetC2cModeInfoV`.
    fn nvmlDeviceGetC2cModeInfoV(*mut nvmlC2cModeInfo_v1_t) = |b, id| {
        nvmlC2cModeInfo_v1_t { isC2cEnabled: c_uint::from(b.c2c_mode(id)?) }
    };
    /// `nvmlDeviceGetFBCStats`.
    fn nvmlDeviceGetFBCStats(*mut nvmlFBCStats_t) = |b, id| {
        let s = b.fbc_stats(id)?;
        nvmlFBCStats_t { sessionsCount: s.sessions, averageFPS: s.average_fps, averageLatency: s.average_latency_us }
    };
    /// `nvmlDeviceGetRowRemapperHistogram`.
    fn nvmlDeviceGetRowRemapperHistogram(*mut nvmlRowRemapperHistogramValues_t) = |b, id| {
        let h = b.row_remapper_histogram(id)?;
        nvmlRowRemapperHistogramValues_t { max: h.max, high: h.high, partial: h.partial, low: h.low, none: h.none }
    };
    /// `nvmlDeviceGetConfComputeProtectedMemoryUsage`.
    fn nvmlDeviceGetConfComputeProtectedMemoryUsage(*mut nvmlMemory_t) = |b, id| {
        let m = b.protected_memory(id)?;
        nvmlMemory_t { total: m.total, free: m.free, used: m.used }
    };
}

nvml_clock_getters! {
    /// `nvmlDeviceGetMaxCustomerBoostClock`, MHz.
    fn nvmlDeviceGetMaxCustomerBoostClock = max_customer_boost_clock;
}

nvml_out_getters! {
    /// `nvmlDeviceGetGspFirmwareMode`: enabled now and by default.
    fn nvmlDeviceGetGspFirmwareMode(enabled: *mut c_uint, default: *mut c_uint)
        = |b, id| b.gsp_firmware_mode(id)? => |m| (enabled: c_uint::from(m.current), default: c_uint::from(m.default));
    /// `nvmlDeviceGetAutoBoostedClocksEnabled`: now and by default.
    fn nvmlDeviceGetAutoBoostedClocksEnabled(enabled: *mut nvmlEnableState_t, default: *mut nvmlEnableState_t)
        = |b, id| b.auto_boosted_clocks(id)? => |m| (enabled: enable(m.current), default: enable(m.default));
    /// `nvmlDeviceGetEncoderStats`.
    fn nvmlDeviceGetEncoderStats(sessions: *mut c_uint, fps: *mut c_uint, latency: *mut c_uint)
        = |b, id| b.encoder_stats(id)? => |s| (sessions: s.sessions, fps: s.average_fps, latency: s.average_latency_us);
    /// `nvmlDeviceGetLastBBXFlushTime`.
    fn nvmlDeviceGetLastBBXFlushTime(timestamp: *mut c_ulonglong, duration_us: *mut c_ulong)
        = |b, id| b.bbx_flush(id)? => |f| (
            timestamp: f.timestamp_us,
            duration_us: c_ulong::try_from(f.duration_us).map_err(|_| Code(ret::UNKNOWN))?
        );
}

nvml_utilization_getters! {
    /// `nvmlDeviceGetJpgUtilization`: percent and sampling period.
    fn nvmlDeviceGetJpgUtilization = jpeg_utilization;
    /// `nvmlDeviceGetOfaUtilization`: percent and sampling period.
    fn nvmlDeviceGetOfaUtilization = ofa_utilization;
}

/// `nvmlDeviceGetAttributes_v2`'s body.
///
/// # Safety
/// `attributes` must be null or valid for a write.
unsafe fn attributes_of(
    ctx: &Ctx,
    device: nvmlDevice_t,
    attributes: *mut nvmlDeviceAttributes_t,
) -> Result<(), Code> {
    let id = ctx.dev(device)?;
    nn(attributes)?;
    let a = ctx.b.device_attributes(id)?;
    put(
        attributes,
        nvmlDeviceAttributes_t {
            multiprocessorCount: a.multiprocessor_count,
            sharedCopyEngineCount: a.shared_copy_engine_count,
            sharedDecoderCount: a.shared_decoder_count,
            sharedEncoderCount: a.shared_encoder_count,
            sharedJpegCount: a.shared_jpeg_count,
            sharedOfaCount: a.shared_ofa_count,
            // A part the recording does not hold (an import of nvidia-smi's XML) is served
            // as 0, the struct having no way to say "unknown".
            gpuInstanceSliceCount: a.gpu_instance_slice_count.unwrap_or(0),
            computeInstanceSliceCount: a.compute_instance_slice_count.unwrap_or(0),
            memorySizeMB: a.memory_size_mib.unwrap_or(0),
        },
    )
}
