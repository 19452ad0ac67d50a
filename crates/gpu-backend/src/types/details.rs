//! The values of the queries that `nvidia-smi -q` and `--query-gpu` show beyond the everyday
//! ones: identity details (PDI, platform, inforom objects, GSP firmware), power by scope,
//! T.Limit temperatures, clock-event counters, SRAM ECC detail, row-remapper histogram,
//! fabric, MIG device attributes, ... Units are NVML's own, as in the rest of this module.

use serde::{Deserialize, Serialize};

/// NVML's field ids (`NVML_FI_*`) that the queries below read with `nvmlDeviceGetFieldValues`,
/// as `nvml.h` of NVML API 13 (the driver 580 and 590 headers) numbers them. Some differ from
/// the numbers of older headers (the clock-event counters moved from 251-253 to 269-271), so
/// they are written here once, for the NVML backend and fake-nvml alike.
pub mod field_ids {
    /// PCIe replay counter rollovers.
    pub const PCIE_REPLAY_ROLLOVER_COUNTER: u32 = 95;
    /// Power averaged over one second, mW; the scope (`scopeId`) is a [`super::PowerScope`].
    pub const POWER_AVERAGE: u32 = 185;
    /// Power now, mW; the scope is a [`super::PowerScope`].
    pub const POWER_INSTANT: u32 = 186;
    /// Lowest power limit, mW.
    pub const POWER_MIN_LIMIT: u32 = 187;
    /// Highest power limit, mW.
    pub const POWER_MAX_LIMIT: u32 = 188;
    /// Default power limit, mW.
    pub const POWER_DEFAULT_LIMIT: u32 = 189;
    /// Power limit enforced, mW.
    pub const POWER_CURRENT_LIMIT: u32 = 190;
    /// Power limit requested, mW.
    pub const POWER_REQUESTED_LIMIT: u32 = 192;
    /// Atomic operations the GPU may issue on PCIe (`NVML_PCIE_ATOMICS_CAP_*` bits).
    pub const PCIE_OUTBOUND_ATOMICS_MASK: u32 = 228;
    /// Atomic operations the GPU completes for PCIe requesters.
    pub const PCIE_INBOUND_ATOMICS_MASK: u32 = 229;
    /// What the driver says should be done to recover the GPU.
    pub const GPU_RECOVERY_ACTION: u32 = 230;
    /// Power smoothing: primary power floor, W.
    pub const PWR_SMOOTHING_PRIMARY_POWER_FLOOR: u32 = 275;
    /// Power smoothing: secondary power floor, W.
    pub const PWR_SMOOTHING_SECONDARY_POWER_FLOOR: u32 = 276;
    /// Power smoothing: minimum primary floor activation offset, W.
    pub const PWR_SMOOTHING_MIN_PRIMARY_FLOOR_ACT_OFFSET: u32 = 277;
    /// Power smoothing: minimum primary floor activation point, W.
    pub const PWR_SMOOTHING_MIN_PRIMARY_FLOOR_ACT_POINT: u32 = 278;
    /// Power smoothing: window multiplier, ms.
    pub const PWR_SMOOTHING_WINDOW_MULTIPLIER: u32 = 279;
    /// Power smoothing: whether delayed power smoothing is supported.
    pub const PWR_SMOOTHING_DELAYED_PWR_SMOOTHING_SUPPORTED: u32 = 280;
    /// Power smoothing, current profile: secondary power floor, W.
    pub const PWR_SMOOTHING_PROFILE_SECONDARY_POWER_FLOOR: u32 = 281;
    /// Power smoothing, current profile: primary floor activation window multiplier.
    pub const PWR_SMOOTHING_PROFILE_PRIMARY_FLOOR_ACT_WIN_MULT: u32 = 282;
    /// Power smoothing, current profile: primary floor target window multiplier.
    pub const PWR_SMOOTHING_PROFILE_PRIMARY_FLOOR_TAR_WIN_MULT: u32 = 283;
    /// Power smoothing, current profile: primary floor activation offset, W.
    pub const PWR_SMOOTHING_PROFILE_PRIMARY_FLOOR_ACT_OFFSET: u32 = 284;
    /// Power smoothing, admin override: secondary power floor, W.
    pub const PWR_SMOOTHING_ADMIN_OVERRIDE_SECONDARY_POWER_FLOOR: u32 = 285;
    /// Power smoothing, admin override: primary floor activation window multiplier.
    pub const PWR_SMOOTHING_ADMIN_OVERRIDE_PRIMARY_FLOOR_ACT_WIN_MULT: u32 = 286;
    /// Power smoothing, admin override: primary floor target window multiplier.
    pub const PWR_SMOOTHING_ADMIN_OVERRIDE_PRIMARY_FLOOR_TAR_WIN_MULT: u32 = 287;
    /// Power smoothing, admin override: primary floor activation offset, W.
    pub const PWR_SMOOTHING_ADMIN_OVERRIDE_PRIMARY_FLOOR_ACT_OFFSET: u32 = 288;
    /// Inactive row remappings for correctable errors.
    pub const REMAPPED_ROWS_COR_INACTIVE: u32 = 301;
    /// Inactive row remappings for uncorrectable errors.
    pub const REMAPPED_ROWS_UNC_INACTIVE: u32 = 302;

    /// The power-smoothing fields in [`super::PowerSmoothing`]'s order.
    pub const POWER_SMOOTHING: [u32; 14] = [
        PWR_SMOOTHING_DELAYED_PWR_SMOOTHING_SUPPORTED,
        PWR_SMOOTHING_PRIMARY_POWER_FLOOR,
        PWR_SMOOTHING_SECONDARY_POWER_FLOOR,
        PWR_SMOOTHING_MIN_PRIMARY_FLOOR_ACT_OFFSET,
        PWR_SMOOTHING_MIN_PRIMARY_FLOOR_ACT_POINT,
        PWR_SMOOTHING_WINDOW_MULTIPLIER,
        PWR_SMOOTHING_PROFILE_SECONDARY_POWER_FLOOR,
        PWR_SMOOTHING_PROFILE_PRIMARY_FLOOR_ACT_WIN_MULT,
        PWR_SMOOTHING_PROFILE_PRIMARY_FLOOR_TAR_WIN_MULT,
        PWR_SMOOTHING_PROFILE_PRIMARY_FLOOR_ACT_OFFSET,
        PWR_SMOOTHING_ADMIN_OVERRIDE_SECONDARY_POWER_FLOOR,
        PWR_SMOOTHING_ADMIN_OVERRIDE_PRIMARY_FLOOR_ACT_WIN_MULT,
        PWR_SMOOTHING_ADMIN_OVERRIDE_PRIMARY_FLOOR_TAR_WIN_MULT,
        PWR_SMOOTHING_ADMIN_OVERRIDE_PRIMARY_FLOOR_ACT_OFFSET,
    ];

    /// The module power limits in [`super::ScopedPowerLimits`]'s order.
    pub const POWER_LIMITS: [u32; 5] = [
        POWER_CURRENT_LIMIT,
        POWER_REQUESTED_LIMIT,
        POWER_DEFAULT_LIMIT,
        POWER_MIN_LIMIT,
        POWER_MAX_LIMIT,
    ];

    /// The T.Limit thresholds (`NVML_FI_DEV_TEMPERATURE_*_TLIMIT`), °C relative to T.Limit.
    pub const TEMPERATURE_SHUTDOWN_TLIMIT: u32 = 193;
    /// See [`TEMPERATURE_SHUTDOWN_TLIMIT`].
    pub const TEMPERATURE_SLOWDOWN_TLIMIT: u32 = 194;
    /// See [`TEMPERATURE_SHUTDOWN_TLIMIT`].
    pub const TEMPERATURE_MEM_MAX_TLIMIT: u32 = 195;
    /// See [`TEMPERATURE_SHUTDOWN_TLIMIT`].
    pub const TEMPERATURE_GPU_MAX_TLIMIT: u32 = 196;
}

/// nvidia-smi's "current" and "default" of a setting (GSP firmware mode, auto boost).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CurrentDefault<T> {
    /// In force now.
    pub current: T,
    /// What the device starts with.
    pub default: T,
}

/// How the GPU shares addresses with the CPU (`nvmlDeviceAddressingModeType_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AddressingMode {
    /// No shared addressing (nvidia-smi's `None`).
    None,
    /// Heterogeneous Memory Management.
    Hmm,
    /// Address Translation Services.
    Ats,
    /// A mode code without a name here.
    Other(u32),
}

nvml_codes!(labelled AddressingMode {
    None = 0 => "None", Hmm = 1 => "HMM", Ats = 2 => "ATS",
} else Other(code) => "mode {}");

/// An inforom object whose version NVML tells (`nvmlInforomObject_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InforomObject {
    /// The object the board maker defines (nvidia-smi's `OEM Object`).
    Oem,
    /// The ECC object.
    Ecc,
    /// The power-management object.
    Power,
}

nvml_codes!(InforomObject { Oem = 0, Ecc = 1, Power = 2 });

/// The host side of vGPU (`nvmlHostVgpuMode_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostVgpuMode {
    /// vGPU without SR-IOV.
    NonSriov,
    /// vGPU over SR-IOV.
    Sriov,
    /// A mode code without a name here.
    Other(u32),
}

nvml_codes!(labelled HostVgpuMode {
    NonSriov = 0 => "Non SR-IOV", Sriov = 1 => "SR-IOV",
} else Other(code) => "mode {}");

/// What the driver says should be done for the GPU to work again
/// (`nvmlDeviceGpuRecoveryAction_t`, field `NVML_FI_DEV_GET_GPU_RECOVERY_ACTION`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuRecoveryAction {
    /// Nothing to do.
    None,
    /// Reset the GPU.
    GpuReset,
    /// Reboot the node.
    NodeReboot,
    /// Drain peer-to-peer traffic.
    DrainP2p,
    /// Drain peer-to-peer traffic, then reset the GPU.
    DrainAndReset,
    /// Recover the IMEX domain.
    RecoverImexDomain,
    /// An action code without a name here.
    Other(u32),
}

nvml_codes!(labelled GpuRecoveryAction {
    None = 0 => "None", GpuReset = 1 => "Reset", NodeReboot = 2 => "Reboot",
    DrainP2p = 3 => "Drain P2P", DrainAndReset = 4 => "Drain and Reset",
    RecoverImexDomain = 5 => "Recover IMEX Domain",
} else Other(code) => "action {}");

/// A vGPU capability of a device (`nvmlDeviceVgpuCapability_t`), the ones `--query-gpu`
/// names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VgpuCapability {
    /// Fractional vGPU profiles usable in multi-vGPU configurations.
    FractionalMultiVgpu,
    /// Timesliced vGPU profiles of differing types run concurrently.
    HeterogeneousTimesliceProfiles,
    /// Timesliced vGPU profiles of differing framebuffer sizes run concurrently.
    HeterogeneousTimesliceSizes,
    /// Placements of timesliced profiles of identical framebuffer sizes are reported.
    HomogeneousPlacements,
    /// Timesliced vGPU on MIG is supported.
    MigTimeslicingSupported,
    /// Timesliced vGPU on MIG is enabled.
    MigTimeslicingEnabled,
}

nvml_codes!(VgpuCapability {
    FractionalMultiVgpu = 0, HeterogeneousTimesliceProfiles = 1, HeterogeneousTimesliceSizes = 2,
    HomogeneousPlacements = 9, MigTimeslicingSupported = 10, MigTimeslicingEnabled = 11,
});

/// What a power reading or limit covers (`NVML_POWER_SCOPE_*`, a field value's `scopeId`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PowerScope {
    /// The GPU alone.
    Gpu,
    /// The whole module (GPU and CPU of a Grace Hopper or Blackwell module).
    Module,
    /// The GPU's memory.
    Memory,
}

nvml_codes!(PowerScope { Gpu = 0, Module = 1, Memory = 2 });

/// A clock event (throttle) reason whose time NVML counts; its NVML code is the field id
/// (`NVML_FI_DEV_CLOCKS_EVENT_REASON_*`, nanoseconds since the driver loaded).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClockEventCounter {
    /// Held under the software power cap.
    SwPowerCap,
    /// Held to the sync-boost group's clock.
    SyncBoost,
    /// Held down by the driver for temperature.
    SwThermalSlowdown,
    /// Held down by the hardware for temperature.
    HwThermalSlowdown,
    /// Held down by the external power brake.
    HwPowerBrake,
}

nvml_codes!(ClockEventCounter {
    SwPowerCap = 74, SyncBoost = 76, SwThermalSlowdown = 269, HwThermalSlowdown = 270,
    HwPowerBrake = 271,
});

/// Where the GPU sits in its platform (`nvmlPlatformInfo_v2_t`); each part as NVML answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlatformInfo {
    /// The Infiniband GUID the platform reports, as 32 hex digits (16 bytes, in order).
    pub ib_guid: String,
    /// The serial number of the chassis; empty outside a chassis.
    pub chassis_serial_number: String,
    /// The slot in the chassis.
    pub slot_number: u32,
    /// The tray within the chassis's compute slots.
    pub tray_index: u32,
    /// The node within the slot.
    pub host_id: u32,
    /// The NVLink peer type (switch present or not), NVML's number.
    pub peer_type: u32,
    /// The GPU within the node.
    pub module_id: u32,
}

/// The name nvidia-smi prints for a platform's peer type. 0 is `Direct Connected` (what
/// nvidia-smi 580 printed for a GPU without NVSwitch); other numbers are printed as they are,
/// NVML documenting no names.
pub fn peer_type_label(peer_type: u32) -> String {
    match peer_type {
        0 => "Direct Connected".into(),
        other => other.to_string(),
    }
}

/// The PCI class of the device (`nvmlPciInfoExt_v1_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PciClass {
    /// PCI base class (3: display controller).
    pub base_class: u32,
    /// PCI sub class (2: 3D controller).
    pub sub_class: u32,
}

/// One bridge chip between the GPU and the host (`nvmlBridgeChipInfo_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BridgeChip {
    /// The chip's type: 0 PLX, 1 BR04 (`nvmlBridgeChipType_t`).
    pub kind: u32,
    /// Its firmware version, as NVML's number.
    pub firmware: u32,
}

/// Declares a struct of NVML field values read together, each `Option<T>` (`None`: the device
/// does not report it), with `values()` and `from_values()` in the order of the field ids of
/// [`field_ids`] named: the struct's fields are listed once, in that order.
macro_rules! field_values_struct {
    (
        $(#[doc = $doc:expr])*
        pub struct $name:ident([Option<$ty:ty>; $n:literal] in field_ids::$ids:ident) {
            $( $(#[doc = $field_doc:expr])* $field:ident, )*
        }
    ) => {
        $(#[doc = $doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            $( $(#[doc = $field_doc])* pub $field: Option<$ty>, )*
        }

        impl $name {
            #[doc = concat!("The values in [`field_ids::", stringify!($ids), "`]'s order.")]
            pub fn values(&self) -> [Option<$ty>; $n] {
                [$(self.$field),*]
            }

            #[doc = concat!("The values from an array in [`field_ids::", stringify!($ids), "`]'s order.")]
            pub fn from_values(values: [Option<$ty>; $n]) -> $name {
                let [$($field),*] = values;
                $name { $($field),* }
            }
        }
    };
}

field_values_struct! {
    /// The power readings and limits NVML keeps for one [`PowerScope`] beyond the GPU's own; a
    /// part the device does not report is `None`.
    pub struct ScopedPowerLimits([Option<u32>; 5] in field_ids::POWER_LIMITS) {
        /// The limit enforced, mW.
        current,
        /// The limit requested, mW.
        requested,
        /// The default limit, mW.
        default,
        /// The lowest settable limit, mW.
        min,
        /// The highest settable limit, mW.
        max,
    }
}

field_values_struct! {
    /// The power-smoothing settings (`NVML_FI_PWR_SMOOTHING_*`), each as NVML answered it
    /// (watts, milliseconds or a multiplier); a setting the device does not report is `None`.
    pub struct PowerSmoothing([Option<u64>; 14] in field_ids::POWER_SMOOTHING) {
        /// Whether delayed power smoothing is supported (0 or 1).
        delayed_power_smoothing_supported,
        /// Primary power floor, W.
        primary_power_floor,
        /// Secondary power floor, W.
        secondary_power_floor,
        /// Minimum primary floor activation offset, W.
        min_primary_floor_activation_offset,
        /// Minimum primary floor activation point, W.
        min_primary_floor_activation_point,
        /// Window multiplier, ms.
        window_multiplier,
        /// Current profile: secondary power floor, W.
        profile_secondary_power_floor,
        /// Current profile: primary floor activation window multiplier.
        profile_primary_floor_act_window_multiplier,
        /// Current profile: primary floor target window multiplier.
        profile_primary_floor_tar_window_multiplier,
        /// Current profile: primary floor activation offset, W.
        profile_primary_floor_act_offset,
        /// Admin override: secondary power floor, W.
        admin_secondary_power_floor,
        /// Admin override: primary floor activation window multiplier.
        admin_primary_floor_act_window_multiplier,
        /// Admin override: primary floor target window multiplier.
        admin_primary_floor_tar_window_multiplier,
        /// Admin override: primary floor activation offset, W.
        admin_primary_floor_act_offset,
    }
}

/// Encoder or frame-buffer-capture sessions (`nvmlDeviceGetEncoderStats`,
/// `nvmlDeviceGetFBCStats`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionStats {
    /// Sessions running.
    pub sessions: u32,
    /// Frames a second, averaged over the sessions.
    pub average_fps: u32,
    /// Latency, microseconds, averaged over the sessions.
    pub average_latency_us: u32,
}

/// The SRAM ECC detail of a device (`nvmlEccSramErrorStatus_v1_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SramEccStatus {
    /// Uncorrectable parity errors over the device's life.
    pub aggregate_uncorrectable_parity: u64,
    /// Uncorrectable SEC-DED errors over the device's life.
    pub aggregate_uncorrectable_sec_ded: u64,
    /// Corrected errors over the device's life.
    pub aggregate_correctable: u64,
    /// Uncorrectable parity errors since the driver loaded.
    pub volatile_uncorrectable_parity: u64,
    /// Uncorrectable SEC-DED errors since the driver loaded.
    pub volatile_uncorrectable_sec_ded: u64,
    /// Corrected errors since the driver loaded.
    pub volatile_correctable: u64,
    /// Uncorrectable errors over the device's life in the L2 cache.
    pub aggregate_uncorrectable_l2: u64,
    /// ... in the SMs.
    pub aggregate_uncorrectable_sm: u64,
    /// ... in the PCIe interface.
    pub aggregate_uncorrectable_pcie: u64,
    /// ... in the microcontrollers.
    pub aggregate_uncorrectable_mcu: u64,
    /// ... elsewhere.
    pub aggregate_uncorrectable_other: u64,
    /// Whether the SRAM error threshold was exceeded.
    pub threshold_exceeded: bool,
}

/// Repairs waiting for the next reset (`nvmlRepairStatus_v1_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepairStatus {
    /// A memory channel repair is pending.
    pub channel_repair_pending: bool,
    /// A TPC repair is pending.
    pub tpc_repair_pending: bool,
}

/// Inactive row remappings (`NVML_FI_DEV_REMAPPED_ROWS_*_INACTIVE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InactiveRemappedRows {
    /// For correctable errors.
    pub correctable: u64,
    /// For uncorrectable errors.
    pub uncorrectable: u64,
}

/// How many memory banks have how many spare rows left (`nvmlRowRemapperHistogramValues_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RowRemapperHistogram {
    /// Banks with every spare row left.
    pub max: u32,
    /// Banks with many left.
    pub high: u32,
    /// Banks with some left.
    pub partial: u32,
    /// Banks with few left.
    pub low: u32,
    /// Banks with none left.
    pub none: u32,
}

/// Memory set aside for confidential computing (`nvmlDeviceGetConfComputeProtectedMemoryUsage`),
/// bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProtectedMemory {
    /// Total, bytes.
    pub total: u64,
    /// Used, bytes.
    pub used: u64,
    /// Free, bytes.
    pub free: u64,
}

/// The GPU's place in an NVLink fabric (`nvmlGpuFabricInfo_v3_t`), as NVML answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FabricInfo {
    /// The cluster's UUID, as 32 hex digits.
    pub cluster_uuid: String,
    /// NVML's return code of the registration (0 success), meaningful once `state` is 3.
    pub status: i32,
    /// The fabric clique.
    pub clique_id: u32,
    /// Registration: 0 not supported, 1 not started, 2 in progress, 3 completed.
    pub state: u32,
    /// The health bits (`NVML_GPU_FABRIC_HEALTH_MASK_*`).
    pub health_mask: u32,
    /// The health summary: 0 not supported, 1 healthy, 2 unhealthy, 3 limited capacity.
    pub health_summary: u32,
}

/// One part of a fabric's health mask: its shift and width, as `nvml.h` defines them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FabricHealthPart {
    /// Bandwidth degraded.
    DegradedBandwidth,
    /// Route recovery in progress.
    RouteRecovery,
    /// Route unhealthy.
    RouteUnhealthy,
    /// Access timeout recovery.
    AccessTimeoutRecovery,
    /// Incorrect configuration (a reason code, not a yes/no).
    IncorrectConfiguration,
    /// Partition assigned.
    PartitionAssigned,
}

impl FabricHealthPart {
    /// The part's value in a health mask: for the yes/no parts 0 not supported, 1 true,
    /// 2 false; for the configuration 0 not supported, 1 none, 2 and up a reason.
    pub fn get(self, mask: u32) -> u32 {
        let (shift, width) = match self {
            FabricHealthPart::DegradedBandwidth => (0, 0x3),
            FabricHealthPart::RouteRecovery => (2, 0x3),
            FabricHealthPart::RouteUnhealthy => (4, 0x3),
            FabricHealthPart::AccessTimeoutRecovery => (6, 0x3),
            FabricHealthPart::IncorrectConfiguration => (8, 0xf),
            FabricHealthPart::PartitionAssigned => (12, 0x3),
        };
        (mask >> shift) & width
    }
}

/// The inforom's last black-box flush (`nvmlDeviceGetLastBBXFlushTime`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BbxFlush {
    /// When, as NVML's timestamp (microseconds since the Unix epoch).
    pub timestamp_us: u64,
    /// How long it took, microseconds.
    pub duration_us: u64,
}

/// What a MIG device (or a GPU) is made of (`nvmlDeviceAttributes_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceAttributes {
    /// Streaming multiprocessors.
    pub multiprocessor_count: u32,
    /// Copy engines shared by the instance.
    pub shared_copy_engine_count: u32,
    /// Decoders shared by the instance.
    pub shared_decoder_count: u32,
    /// Encoders shared by the instance.
    pub shared_encoder_count: u32,
    /// JPEG engines shared by the instance.
    pub shared_jpeg_count: u32,
    /// Optical-flow accelerators shared by the instance.
    pub shared_ofa_count: u32,
    /// GPU-instance slices; `None` where a recording does not hold it (nvidia-smi does not
    /// print it, so an import of `-q -x` cannot know it).
    pub gpu_instance_slice_count: Option<u32>,
    /// Compute-instance slices; `None` as above.
    pub compute_instance_slice_count: Option<u32>,
    /// Memory, MiB; `None` as above.
    pub memory_size_mib: Option<u64>,
}

/// Hex digits of a byte array, in order (`"00ff..."`), the form fixtures keep GUIDs in.
pub fn hex_digits(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes of [`hex_digits`]' text, at most `N` of them (the rest zero); `None` for text
/// that is not hex digits in pairs or holds more than `N` bytes.
pub fn bytes_of_hex<const N: usize>(text: &str) -> Option<[u8; N]> {
    let digits = text.as_bytes();
    if !digits.len().is_multiple_of(2) || digits.len() / 2 > N {
        return None;
    }
    let mut out = [0u8; N];
    for (slot, pair) in out.iter_mut().zip(digits.chunks(2)) {
        let pair = std::str::from_utf8(pair).ok()?;
        *slot = u8::from_str_radix(pair, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_refuses_what_is_not_hex() {
        let bytes = [0u8, 1, 0xab, 0xff];
        assert_eq!(hex_digits(&bytes), "0001abff");
        assert_eq!(bytes_of_hex::<4>("0001abff"), Some(bytes));
        assert_eq!(
            bytes_of_hex::<6>("0001abff"),
            Some([0, 1, 0xab, 0xff, 0, 0])
        );
        assert_eq!(bytes_of_hex::<2>("0001abff"), None);
        assert_eq!(bytes_of_hex::<4>("0g"), None);
        assert_eq!(bytes_of_hex::<4>("abc"), None);
    }

    #[test]
    fn fabric_health_parts_read_nvml_h_shifts() {
        // Partition assigned false (2 << 12), incorrect configuration none (1 << 8),
        // route unhealthy false (2 << 4).
        let mask = (2 << 12) | (1 << 8) | (2 << 4);
        assert_eq!(FabricHealthPart::PartitionAssigned.get(mask), 2);
        assert_eq!(FabricHealthPart::IncorrectConfiguration.get(mask), 1);
        assert_eq!(FabricHealthPart::RouteUnhealthy.get(mask), 2);
        assert_eq!(FabricHealthPart::DegradedBandwidth.get(mask), 0);
    }

    proptest::proptest! {
        /// Every NVML code of the enums kept with their unknown codes comes back as itself.
        #[test]
        fn nvml_codes_round_trip(code in 0u32..64) {
            proptest::prop_assert_eq!(AddressingMode::from_nvml(code).nvml_code(), code);
            proptest::prop_assert_eq!(HostVgpuMode::from_nvml(code).nvml_code(), code);
            proptest::prop_assert_eq!(GpuRecoveryAction::from_nvml(code).nvml_code(), code);
        }
    }
}
