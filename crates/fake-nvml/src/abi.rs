//! The C types and constants of the NVML and CUDA driver ABIs that this library serves, laid out
//! exactly as `nvml.h` and `cuda.h` lay them out (sizes are checked at compile time).
//!
//! They are public so that tests and other Rust callers can call the exported functions
//! directly through the rlib.

#![allow(non_camel_case_types, non_snake_case)]

use std::ffi::{c_char, c_int, c_uint, c_ulonglong, CStr};

/// NVML's return code (`nvmlReturn_t`, a C enum: 0 is success).
pub type nvmlReturn_t = c_uint;

/// NVML's opaque device handle (`nvmlDevice_t`). This library never dereferences it.
pub type nvmlDevice_t = *mut nvmlDevice_st;

/// The opaque target of [`nvmlDevice_t`].
#[repr(C)]
pub struct nvmlDevice_st {
    _private: [u8; 0],
}

/// `nvmlEnableState_t`: 0 disabled, 1 enabled.
pub type nvmlEnableState_t = c_uint;

/// NVML's return codes, as `nvmlReturn_t` (the same numbers as
/// [`gpu_backend::error::nvml_codes`]).
pub mod ret {
    #![allow(missing_docs)]
    use super::nvmlReturn_t;
    use gpu_backend::error::nvml_codes as c;

    /// Each code under its `gpu_backend` name, as `nvmlReturn_t`.
    macro_rules! codes {
        ($($name:ident),* $(,)?) => {
            $(pub const $name: nvmlReturn_t = c::$name as nvmlReturn_t;)*
        };
    }

    codes!(
        SUCCESS,
        UNINITIALIZED,
        INVALID_ARGUMENT,
        NOT_SUPPORTED,
        NO_PERMISSION,
        ALREADY_INITIALIZED,
        NOT_FOUND,
        INSUFFICIENT_SIZE,
        DRIVER_NOT_LOADED,
        LIBRARY_NOT_FOUND,
        FUNCTION_NOT_FOUND,
        GPU_IS_LOST,
        ARGUMENT_VERSION_MISMATCH,
        TIMEOUT,
        UNKNOWN,
    );
}

/// `NVML_VALUE_NOT_AVAILABLE` as an unsigned long long: "the driver cannot tell" in process
/// lists (used memory under WDDM, for example).
pub const NVML_VALUE_NOT_AVAILABLE_ULL: c_ulonglong = c_ulonglong::MAX;

/// "No instance" in the `gpuInstanceId` / `computeInstanceId` fields of process lists.
pub const NVML_NO_INSTANCE_ID: c_uint = 0xFFFF_FFFF;

/// `NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX`: KiB of data sent over a link (`scopeId` = link).
pub const NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX: c_uint = 138;
/// `NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX`: KiB of data received over a link.
pub const NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX: c_uint = 139;
/// `NVML_VALUE_TYPE_UNSIGNED_LONG_LONG`.
pub const NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: c_uint = 3;

/// `nvmlPciInfo_t` (the layout of the `_v2` and `_v3` calls).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct nvmlPciInfo_t {
    /// `"%04X:%02X:%02X.0"`, the legacy short form.
    pub busIdLegacy: [c_char; 16],
    /// PCI domain.
    pub domain: c_uint,
    /// PCI bus.
    pub bus: c_uint,
    /// PCI device (slot).
    pub device: c_uint,
    /// Combined device and vendor id.
    pub pciDeviceId: c_uint,
    /// Combined subsystem device and vendor id.
    pub pciSubSystemId: c_uint,
    /// `"%08X:%02X:%02X.0"`.
    pub busId: [c_char; 32],
}

/// `nvmlMemory_t` (v1): used includes the memory the driver reserves.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct nvmlMemory_t {
    /// Bytes.
    pub total: c_ulonglong,
    /// Bytes.
    pub free: c_ulonglong,
    /// Bytes.
    pub used: c_ulonglong,
}

/// `nvmlMemory_v2_t`: `version` must be [`NVML_MEMORY_V2`].
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct nvmlMemory_v2_t {
    /// Struct version, set by the caller.
    pub version: c_uint,
    /// Bytes.
    pub total: c_ulonglong,
    /// Bytes reserved by the driver and firmware.
    pub reserved: c_ulonglong,
    /// Bytes.
    pub free: c_ulonglong,
    /// Bytes.
    pub used: c_ulonglong,
}

/// `nvmlMemory_v2` = `NVML_STRUCT_VERSION(Memory, 2)` = `sizeof(nvmlMemory_v2_t) | 2 << 24`.
pub const NVML_MEMORY_V2: c_uint = (std::mem::size_of::<nvmlMemory_v2_t>() as c_uint) | (2 << 24);

/// `nvmlBAR1Memory_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct nvmlBAR1Memory_t {
    /// Bytes.
    pub bar1Total: c_ulonglong,
    /// Bytes.
    pub bar1Free: c_ulonglong,
    /// Bytes.
    pub bar1Used: c_ulonglong,
}

/// `nvmlUtilization_t`, percent.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct nvmlUtilization_t {
    /// GPU (kernel) utilization.
    pub gpu: c_uint,
    /// Memory utilization.
    pub memory: c_uint,
}

/// `nvmlProcessInfo_v1_t`: the struct of the unversioned running-process calls (16 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct nvmlProcessInfo_v1_t {
    /// Process id.
    pub pid: c_uint,
    /// Bytes, or [`NVML_VALUE_NOT_AVAILABLE_ULL`].
    pub usedGpuMemory: c_ulonglong,
}

/// `nvmlProcessInfo_t` = `nvmlProcessInfo_v2_t`: the struct of the `_v2` and `_v3`
/// running-process calls (24 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct nvmlProcessInfo_t {
    /// Process id.
    pub pid: c_uint,
    /// Bytes, or [`NVML_VALUE_NOT_AVAILABLE_ULL`].
    pub usedGpuMemory: c_ulonglong,
    /// GPU-instance id, or [`NVML_NO_INSTANCE_ID`].
    pub gpuInstanceId: c_uint,
    /// Compute-instance id, or [`NVML_NO_INSTANCE_ID`].
    pub computeInstanceId: c_uint,
}

/// `nvmlProcessUtilizationSample_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct nvmlProcessUtilizationSample_t {
    /// Process id.
    pub pid: c_uint,
    /// CPU timestamp, microseconds since the Unix epoch.
    pub timeStamp: c_ulonglong,
    /// SM utilization, percent.
    pub smUtil: c_uint,
    /// Frame-buffer utilization, percent.
    pub memUtil: c_uint,
    /// Encoder utilization, percent.
    pub encUtil: c_uint,
    /// Decoder utilization, percent.
    pub decUtil: c_uint,
}

/// `nvmlValue_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union nvmlValue_t {
    /// Double.
    pub dVal: f64,
    /// Signed int.
    pub siVal: c_int,
    /// Unsigned int.
    pub uiVal: c_uint,
    /// Unsigned long.
    pub ulVal: std::ffi::c_ulong,
    /// Unsigned long long.
    pub ullVal: c_ulonglong,
    /// Signed long long.
    pub sllVal: std::ffi::c_longlong,
    /// Unsigned short.
    pub usVal: std::ffi::c_ushort,
}

/// `nvmlFieldValue_t`: the caller fills `fieldId` and `scopeId`; the library fills the rest.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct nvmlFieldValue_t {
    /// Which field (`NVML_FI_*`).
    pub fieldId: c_uint,
    /// Link or other scope of the field.
    pub scopeId: c_uint,
    /// When the value was read, microseconds since the Unix epoch.
    pub timestamp: std::ffi::c_longlong,
    /// How long the read took, microseconds.
    pub latencyUsec: std::ffi::c_longlong,
    /// `nvmlValueType_t` of `value`.
    pub valueType: c_uint,
    /// The return code for this field alone.
    pub nvmlReturn: nvmlReturn_t,
    /// The value.
    pub value: nvmlValue_t,
}

impl Default for nvmlFieldValue_t {
    fn default() -> Self {
        nvmlFieldValue_t {
            fieldId: 0,
            scopeId: 0,
            timestamp: 0,
            latencyUsec: 0,
            valueType: 0,
            nvmlReturn: 0,
            value: nvmlValue_t { ullVal: 0 },
        }
    }
}

/// `NVML_FI_DEV_MEMORY_TEMP`: memory temperature, °C.
pub const NVML_FI_DEV_MEMORY_TEMP: c_uint = 82;

/// NVML's opaque GPM sample (`nvmlGpmSample_t`). This library hands out numbers dressed as
/// pointers and never dereferences them.
pub type nvmlGpmSample_t = *mut nvmlGpmSample_st;

/// The opaque target of [`nvmlGpmSample_t`].
#[repr(C)]
pub struct nvmlGpmSample_st {
    _private: [u8; 0],
}

/// `NVML_GPM_METRICS_GET_VERSION`.
pub const NVML_GPM_METRICS_GET_VERSION: c_uint = 1;
/// `NVML_GPM_SUPPORT_VERSION`.
pub const NVML_GPM_SUPPORT_VERSION: c_uint = 1;
/// `NVML_GPM_METRIC_MAX`: the length of `nvmlGpmMetricsGet_t::metrics`.
pub const NVML_GPM_METRIC_MAX: usize = 210;

/// The names of one GPM metric (`nvmlGpmMetric_t::metricInfo`), filled by the library.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct nvmlGpmMetricInfo_t {
    /// Short name.
    pub shortName: *mut c_char,
    /// Long name.
    pub longName: *mut c_char,
    /// Unit.
    pub unit: *mut c_char,
}

/// `nvmlGpmMetric_t`: the caller fills `metricId`; the library the rest.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct nvmlGpmMetric_t {
    /// `NVML_GPM_METRIC_*`.
    pub metricId: c_uint,
    /// The return code for this metric alone.
    pub nvmlReturn: nvmlReturn_t,
    /// The value.
    pub value: f64,
    /// Its names.
    pub metricInfo: nvmlGpmMetricInfo_t,
}

/// `nvmlGpmMetricsGet_t`: version, how many metrics, the two samples, the metrics.
#[repr(C)]
pub struct nvmlGpmMetricsGet_t {
    /// [`NVML_GPM_METRICS_GET_VERSION`].
    pub version: c_uint,
    /// How many entries of `metrics` are asked for.
    pub numMetrics: c_uint,
    /// The earlier sample.
    pub sample1: nvmlGpmSample_t,
    /// The later sample.
    pub sample2: nvmlGpmSample_t,
    /// The metrics.
    pub metrics: [nvmlGpmMetric_t; NVML_GPM_METRIC_MAX],
}

/// `nvmlGpmSupport_t`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct nvmlGpmSupport_t {
    /// [`NVML_GPM_SUPPORT_VERSION`].
    pub version: c_uint,
    /// 1 when the device has GPM.
    pub isSupportedDevice: c_uint,
}

/// NVML's opaque event set (`nvmlEventSet_t`). This library never dereferences it.
pub type nvmlEventSet_t = *mut nvmlEventSet_st;

/// The opaque target of [`nvmlEventSet_t`].
#[repr(C)]
pub struct nvmlEventSet_st {
    _private: [u8; 0],
}

/// `nvmlEventData_t`: one event, as `nvmlEventSetWait_v2` fills it.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct nvmlEventData_t {
    /// The device the event happened on.
    pub device: nvmlDevice_t,
    /// Its type: one `nvmlEventType*` bit.
    pub eventType: c_ulonglong,
    /// Its data: the XID code for an XID critical error.
    pub eventData: c_ulonglong,
    /// The GPU instance, or [`NVML_NO_INSTANCE_ID`].
    pub gpuInstanceId: c_uint,
    /// The compute instance, or [`NVML_NO_INSTANCE_ID`].
    pub computeInstanceId: c_uint,
}

/// CUDA's return code (`CUresult`).
pub type CUresult = c_int;
/// A CUDA device ordinal (`CUdevice`).
pub type CUdevice = c_int;

/// `CUuuid`: the 16 bytes of a device UUID.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CUuuid {
    /// The UUID's bytes, in the order they are printed.
    pub bytes: [c_char; 16],
}

/// CUDA driver return codes used here.
pub mod cuda {
    #![allow(missing_docs)]
    use super::CUresult;
    pub const CUDA_SUCCESS: CUresult = 0;
    pub const CUDA_ERROR_INVALID_VALUE: CUresult = 1;
    pub const CUDA_ERROR_NOT_INITIALIZED: CUresult = 3;
    pub const CUDA_ERROR_NO_DEVICE: CUresult = 100;
    pub const CUDA_ERROR_INVALID_DEVICE: CUresult = 101;
    pub const CUDA_ERROR_UNKNOWN: CUresult = 999;
}

/// `NVML_STRUCT_VERSION(name, version)` of a versioned struct: its size with the version in the
/// top byte.
pub const fn struct_version<T>(version: c_uint) -> c_uint {
    (std::mem::size_of::<T>() as c_uint) | (version << 24)
}

/// `NVML_VALUE_TYPE_SIGNED_INT`, the type of a field value that may be below zero.
pub const NVML_VALUE_TYPE_SIGNED_INT: c_uint = 5;

/// `nvmlDeviceAddressingMode_v1_t`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct nvmlDeviceAddressingMode_v1_t {
    /// `struct_version::<Self>(1)`.
    pub version: c_uint,
    /// `nvmlDeviceAddressingModeType_t`.
    pub value: c_uint,
}

/// `nvmlPdi_v1_t`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct nvmlPdi_v1_t {
    /// `struct_version::<Self>(1)`.
    pub version: c_uint,
    /// The 64-bit per-device identifier.
    pub value: c_ulonglong,
}

/// `nvmlPlatformInfo_v2_t`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct nvmlPlatformInfo_v2_t {
    /// `struct_version::<Self>(2)`.
    pub version: c_uint,
    /// Infiniband GUID.
    pub ibGuid: [u8; 16],
    /// Chassis serial number, NUL-terminated when shorter than 16 bytes.
    pub chassisSerialNumber: [u8; 16],
    /// Slot in the chassis.
    pub slotNumber: u8,
    /// Tray in the chassis.
    pub trayIndex: u8,
    /// Node within the slot.
    pub hostId: u8,
    /// NVLink peer type.
    pub peerType: u8,
    /// GPU within the node.
    pub moduleId: u8,
}

/// `nvmlC2cModeInfo_v1_t`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct nvmlC2cModeInfo_v1_t {
    /// 1 when the C2C link is enabled.
    pub isC2cEnabled: c_uint,
}

/// `nvmlVgpuHeterogeneousMode_v1_t`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct nvmlVgpuHeterogeneousMode_v1_t {
    /// `struct_version::<Self>(1)`.
    pub version: c_uint,
    /// 1 when heterogeneous mode is on.
    pub mode: c_uint,
}

/// `nvmlPciInfoExt_v1_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct nvmlPciInfoExt_v1_t {
    /// `struct_version::<Self>(1)`.
    pub version: c_uint,
    /// PCI domain.
    pub domain: c_uint,
    /// PCI bus.
    pub bus: c_uint,
    /// PCI device.
    pub device: c_uint,
    /// Device and vendor id.
    pub pciDeviceId: c_uint,
    /// Subsystem id.
    pub pciSubSystemId: c_uint,
    /// PCI base class.
    pub baseClass: c_uint,
    /// PCI sub class.
    pub subClass: c_uint,
    /// Bus id text.
    pub busId: [c_char; 32],
}

/// `nvmlBridgeChipInfo_t`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct nvmlBridgeChipInfo_t {
    /// `nvmlBridgeChipType_t`.
    pub type_: c_uint,
    /// Firmware version.
    pub fwVersion: c_uint,
}

/// `nvmlBridgeChipHierarchy_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct nvmlBridgeChipHierarchy_t {
    /// How many entries of `bridgeChipInfo` hold a chip.
    pub bridgeCount: u8,
    /// The chips.
    pub bridgeChipInfo: [nvmlBridgeChipInfo_t; 128],
}

/// `nvmlDramEncryptionInfo_v1_t`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct nvmlDramEncryptionInfo_v1_t {
    /// `struct_version::<Self>(1)`.
    pub version: c_uint,
    /// `nvmlEnableState_t`.
    pub encryptionState: nvmlEnableState_t,
}

/// `nvmlDeviceCapabilities_v1_t`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct nvmlDeviceCapabilities_v1_t {
    /// `struct_version::<Self>(1)`.
    pub version: c_uint,
    /// `NVML_DEV_CAP_*` bits.
    pub capMask: c_uint,
}

/// `nvmlHostname_v1_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct nvmlHostname_v1_t {
    /// NUL-terminated host name.
    pub value: [c_char; 64],
}

/// `nvmlDeviceAttributes_t`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct nvmlDeviceAttributes_t {
    /// Streaming multiprocessors.
    pub multiprocessorCount: c_uint,
    /// Shared copy engines.
    pub sharedCopyEngineCount: c_uint,
    /// Shared decoders.
    pub sharedDecoderCount: c_uint,
    /// Shared encoders.
    pub sharedEncoderCount: c_uint,
    /// Shared JPEG engines.
    pub sharedJpegCount: c_uint,
    /// Shared OFA engines.
    pub sharedOfaCount: c_uint,
    /// GPU-instance slices.
    pub gpuInstanceSliceCount: c_uint,
    /// Compute-instance slices.
    pub computeInstanceSliceCount: c_uint,
    /// Memory, MiB.
    pub memorySizeMB: c_ulonglong,
}

/// `nvmlFBCStats_t`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct nvmlFBCStats_t {
    /// Sessions.
    pub sessionsCount: c_uint,
    /// Average frames a second.
    pub averageFPS: c_uint,
    /// Average latency, microseconds.
    pub averageLatency: c_uint,
}

/// `nvmlEccSramErrorStatus_v1_t`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct nvmlEccSramErrorStatus_v1_t {
    /// `struct_version::<Self>(1)`.
    pub version: c_uint,
    /// Aggregate uncorrectable parity errors.
    pub aggregateUncParity: c_ulonglong,
    /// Aggregate uncorrectable SEC-DED errors.
    pub aggregateUncSecDed: c_ulonglong,
    /// Aggregate corrected errors.
    pub aggregateCor: c_ulonglong,
    /// Volatile uncorrectable parity errors.
    pub volatileUncParity: c_ulonglong,
    /// Volatile uncorrectable SEC-DED errors.
    pub volatileUncSecDed: c_ulonglong,
    /// Volatile corrected errors.
    pub volatileCor: c_ulonglong,
    /// Aggregate uncorrectable errors in L2.
    pub aggregateUncBucketL2: c_ulonglong,
    /// ... in the SMs.
    pub aggregateUncBucketSm: c_ulonglong,
    /// ... in PCIe.
    pub aggregateUncBucketPcie: c_ulonglong,
    /// ... in microcontrollers.
    pub aggregateUncBucketMcu: c_ulonglong,
    /// ... elsewhere.
    pub aggregateUncBucketOther: c_ulonglong,
    /// 1 when the threshold was exceeded.
    pub bThresholdExceeded: c_uint,
}

/// `nvmlRepairStatus_v1_t`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct nvmlRepairStatus_v1_t {
    /// `struct_version::<Self>(1)`.
    pub version: c_uint,
    /// 1 when a channel repair is pending.
    pub bChannelRepairPending: c_uint,
    /// 1 when a TPC repair is pending.
    pub bTpcRepairPending: c_uint,
}

/// `nvmlRowRemapperHistogramValues_t`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct nvmlRowRemapperHistogramValues_t {
    /// Banks with every spare row left.
    pub max: c_uint,
    /// Many left.
    pub high: c_uint,
    /// Some left.
    pub partial: c_uint,
    /// Few left.
    pub low: c_uint,
    /// None left.
    pub none: c_uint,
}

/// `nvmlMarginTemperature_v1_t`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct nvmlMarginTemperature_v1_t {
    /// `struct_version::<Self>(1)`.
    pub version: c_uint,
    /// °C below T.Limit.
    pub marginTemperature: c_int,
}

/// `nvmlGpuFabricInfo_v3_t`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct nvmlGpuFabricInfo_v3_t {
    /// `struct_version::<Self>(3)`.
    pub version: c_uint,
    /// Cluster UUID.
    pub clusterUuid: [u8; 16],
    /// Registration's return code.
    pub status: nvmlReturn_t,
    /// Clique.
    pub cliqueId: c_uint,
    /// `NVML_GPU_FABRIC_STATE_*`.
    pub state: u8,
    /// `NVML_GPU_FABRIC_HEALTH_MASK_*` bits.
    pub healthMask: c_uint,
    /// `NVML_GPU_FABRIC_HEALTH_SUMMARY_*`.
    pub healthSummary: u8,
}

const _: () = {
    assert!(std::mem::size_of::<nvmlPciInfo_t>() == 68);
    assert!(std::mem::size_of::<nvmlEventData_t>() == 32);
    assert!(std::mem::size_of::<nvmlMemory_t>() == 24);
    assert!(std::mem::size_of::<nvmlMemory_v2_t>() == 40);
    assert!(NVML_MEMORY_V2 == 0x0200_0028);
    assert!(std::mem::size_of::<nvmlBAR1Memory_t>() == 24);
    assert!(std::mem::size_of::<nvmlProcessInfo_v1_t>() == 16);
    assert!(std::mem::size_of::<nvmlProcessInfo_t>() == 24);
    assert!(std::mem::size_of::<nvmlProcessUtilizationSample_t>() == 32);
    assert!(std::mem::size_of::<nvmlFieldValue_t>() == 40);
    assert!(std::mem::size_of::<nvmlGpmMetric_t>() == 40);
    assert!(std::mem::size_of::<nvmlGpmMetricsGet_t>() == 24 + 40 * NVML_GPM_METRIC_MAX);
    assert!(std::mem::size_of::<nvmlGpmSupport_t>() == 8);
    assert!(std::mem::size_of::<CUuuid>() == 16);
    // The sizes nvml.h's layouts give (the version words NVML checks are built from them).
    assert!(std::mem::size_of::<nvmlPdi_v1_t>() == 16);
    assert!(std::mem::size_of::<nvmlPlatformInfo_v2_t>() == 44);
    assert!(std::mem::size_of::<nvmlPciInfoExt_v1_t>() == 64);
    assert!(std::mem::size_of::<nvmlBridgeChipHierarchy_t>() == 4 + 8 * 128);
    assert!(std::mem::size_of::<nvmlDeviceAttributes_t>() == 40);
    assert!(std::mem::size_of::<nvmlEccSramErrorStatus_v1_t>() == 104);
    assert!(std::mem::size_of::<nvmlGpuFabricInfo_v3_t>() == 40);
    assert!(std::mem::size_of::<nvmlHostname_v1_t>() == 64);
};

/// NVML's text for a return code, as `nvmlErrorString` gives it.
pub fn error_string(code: nvmlReturn_t) -> &'static CStr {
    match code {
        0 => c"Success",
        1 => c"Uninitialized",
        2 => c"Invalid Argument",
        3 => c"Not Supported",
        4 => c"Insufficient Permissions",
        5 => c"Already Initialized",
        6 => c"Not Found",
        7 => c"Insufficient Size",
        8 => c"Insufficient External Power",
        9 => c"Driver Not Loaded",
        10 => c"Timeout",
        11 => c"Interrupt request issue",
        12 => c"NVML Shared Library Not Found",
        13 => c"Function Not Found",
        14 => c"Corrupted infoROM",
        15 => c"GPU is lost",
        16 => c"GPU requires restart",
        17 => c"The operating system has blocked the request",
        18 => c"RM has detected an NVML/RM version mismatch",
        19 => c"In use by another client",
        20 => c"Insufficient Memory",
        21 => c"No data",
        22 => c"The requested vgpu operation is not available on target device, because ECC is enabled",
        23 => c"Insufficient resources for request",
        24 => c"Frequency not supported",
        25 => c"Argument version mismatch",
        26 => c"Deprecated",
        27 => c"Not Ready",
        28 => c"GPU not found",
        29 => c"Invalid state",
        _ => c"Unknown Error",
    }
}
