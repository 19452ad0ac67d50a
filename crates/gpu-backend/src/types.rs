//! The values a backend answers with. Units are NVML's own: bytes, milliwatts, millijoules,
//! MHz, percent, KB/s, °C.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// How a device is named to a backend: a physical GPU by its NVML index, or a MIG device by its
/// parent's index and its MIG slot index. Small and `Copy`, so fixtures can name devices.
///
/// Written as text `"3"` for GPU 3 and `"3:1"` for MIG slot 1 of GPU 3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeviceId {
    /// A physical GPU, by NVML index.
    Gpu(u32),
    /// A MIG device: the parent GPU's NVML index and the MIG slot index under it.
    Mig {
        /// NVML index of the parent GPU.
        parent: u32,
        /// Index of the MIG device under its parent (as in `nvmlDeviceGetMigDeviceHandleByIndex`).
        index: u32,
    },
}

impl DeviceId {
    /// The index of the physical GPU this device is or lives on.
    pub fn physical_index(self) -> u32 {
        match self {
            DeviceId::Gpu(i) => i,
            DeviceId::Mig { parent, .. } => parent,
        }
    }

    /// True for a MIG device.
    pub fn is_mig(self) -> bool {
        matches!(self, DeviceId::Mig { .. })
    }
}

impl fmt::Display for DeviceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceId::Gpu(i) => write!(f, "{i}"),
            DeviceId::Mig { parent, index } => write!(f, "{parent}:{index}"),
        }
    }
}

/// The text was not a device id of the form `3` or `3:1`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid device id {0:?}: expected a GPU index like \"3\" or a MIG id like \"3:1\"")]
pub struct ParseDeviceIdError(pub String);

impl FromStr for DeviceId {
    type Err = ParseDeviceIdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || ParseDeviceIdError(s.to_string());
        let num = |t: &str| -> Result<u32, ParseDeviceIdError> {
            if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            t.parse().map_err(|_| bad())
        };
        match s.split_once(':') {
            None => Ok(DeviceId::Gpu(num(s)?)),
            Some((p, i)) => Ok(DeviceId::Mig {
                parent: num(p)?,
                index: num(i)?,
            }),
        }
    }
}

impl Serialize for DeviceId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for DeviceId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// PCI identity of a device (`nvmlPciInfo_t`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PciInfo {
    /// Bus id as NVML prints it, e.g. `00000000:18:00.0`.
    pub bus_id: String,
    /// PCI domain.
    pub domain: u32,
    /// PCI bus.
    pub bus: u32,
    /// PCI device (slot).
    pub device: u32,
    /// Combined device and vendor id, e.g. `0x233010DE` for an H100 SXM.
    pub pci_device_id: u32,
    /// Combined subsystem device and vendor id.
    pub pci_subsystem_id: u32,
}

/// Frame-buffer memory (`nvmlMemory_v2_t`; `reserved` is absent from the v1 struct).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryInfo {
    /// Total memory, bytes.
    pub total: u64,
    /// Free memory, bytes.
    pub free: u64,
    /// Used memory, bytes.
    pub used: u64,
    /// Memory reserved by the driver and firmware, bytes; `None` where only v1 is available.
    pub reserved: Option<u64>,
}

/// BAR1 memory (`nvmlBAR1Memory_t`), bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bar1MemoryInfo {
    /// Total BAR1 memory, bytes.
    pub total: u64,
    /// Free BAR1 memory, bytes.
    pub free: u64,
    /// Used BAR1 memory, bytes.
    pub used: u64,
}

/// Utilization over the last sample period (`nvmlUtilization_t`), percent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Utilization {
    /// Percent of time a kernel was running on the GPU.
    pub gpu: u32,
    /// Percent of time device memory was read or written.
    pub memory: u32,
}

/// Encoder or decoder utilization with its sampling period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CodecUtilization {
    /// Percent.
    pub utilization: u32,
    /// Sampling period, microseconds.
    pub sampling_period_us: u32,
}

/// A clock domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClockType {
    /// Graphics clock.
    Graphics,
    /// Streaming-multiprocessor clock.
    Sm,
    /// Memory clock.
    Memory,
    /// Video encoder/decoder clock.
    Video,
}

impl ClockType {
    /// All clock domains, in NVML's order.
    pub const ALL: [ClockType; 4] = [
        ClockType::Graphics,
        ClockType::Sm,
        ClockType::Memory,
        ClockType::Video,
    ];
}

/// One answer per clock domain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerClock<T> {
    /// Graphics clock.
    pub graphics: T,
    /// SM clock.
    pub sm: T,
    /// Memory clock.
    pub memory: T,
    /// Video clock.
    pub video: T,
}

impl<T> PerClock<T> {
    /// The entry for one clock domain.
    pub fn get(&self, clock: ClockType) -> &T {
        match clock {
            ClockType::Graphics => &self.graphics,
            ClockType::Sm => &self.sm,
            ClockType::Memory => &self.memory,
            ClockType::Video => &self.video,
        }
    }

    /// Builds one entry per clock domain.
    pub fn from_fn(mut f: impl FnMut(ClockType) -> T) -> Self {
        PerClock {
            graphics: f(ClockType::Graphics),
            sm: f(ClockType::Sm),
            memory: f(ClockType::Memory),
            video: f(ClockType::Video),
        }
    }
}

/// A temperature threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TemperatureThreshold {
    /// The temperature at which the GPU slows down.
    Slowdown,
    /// The temperature at which the GPU shuts down.
    Shutdown,
    /// The highest GPU temperature the board is rated for (`NVML_TEMPERATURE_THRESHOLD_GPU_MAX`).
    GpuMax,
    /// The highest memory temperature (`NVML_TEMPERATURE_THRESHOLD_MEM_MAX`).
    MemoryMax,
}

/// Why a memory page was retired (`nvmlPageRetirementCause_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RetirementCause {
    /// Multiple single-bit ECC errors.
    SingleBit,
    /// A double-bit ECC error.
    DoubleBit,
}

/// Row remapping (`nvmlDeviceGetRemappedRows`; Ampere and newer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemappedRows {
    /// Rows remapped for correctable errors.
    pub correctable: u32,
    /// Rows remapped for uncorrectable errors.
    pub uncorrectable: u32,
    /// A remapping is pending (applied at the next reset).
    pub pending: bool,
    /// A remapping failed (the GPU needs service).
    pub failure: bool,
}

/// NVML's clock event (throttle) reason bits, with the names nvidia-smi gives them, in bit
/// order.
pub const CLOCK_EVENT_REASONS: &[(u64, &str)] = &[
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
];

/// The names of the reasons set in an NVML clock event mask, in bit order; a set bit this
/// version does not name is `bit_N`.
pub fn clock_event_reason_names(mask: u64) -> Vec<String> {
    (0..64)
        .map(|b| 1u64 << b)
        .filter(|bit| mask & bit != 0)
        .map(|bit| {
            CLOCK_EVENT_REASONS
                .iter()
                .find(|(b, _)| *b == bit)
                .map_or_else(
                    || format!("bit_{}", bit.trailing_zeros()),
                    |(_, n)| (*n).to_string(),
                )
        })
        .collect()
}

/// The clock event bits that mean the GPU is being slowed by its hardware: HW slowdown, HW
/// thermal slowdown, HW power brake and SW thermal slowdown.
pub const CLOCK_EVENT_ATTENTION_MASK: u64 = 0x8 | 0x20 | 0x40 | 0x80;

/// Allowed range of the power-management limit, milliwatts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PowerLimits {
    /// Lowest settable limit, mW.
    pub min_mw: u32,
    /// Highest settable limit, mW.
    pub max_mw: u32,
}

/// Direction of PCIe traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PcieDirection {
    /// Transmitted by the GPU.
    Tx,
    /// Received by the GPU.
    Rx,
}

/// Cumulative NVLink data counters for one link, KiB since the driver started counting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvLinkCounters {
    /// KiB transmitted.
    pub tx_kib: u64,
    /// KiB received.
    pub rx_kib: u64,
}

/// The most NVLink links NVML knows of (`NVML_NVLINK_MAX_LINKS`).
pub const NVLINK_MAX_LINKS: u32 = 18;

/// The most physical devices believed from a backend. NVML documents no maximum; the largest
/// machines have a few dozen GPUs. A larger count from NVML is refused as an error (so nothing
/// allocates for it), and a fixture with more devices is refused when it is loaded.
pub const MAX_DEVICE_COUNT: u32 = 1024;

/// The most fans believed per device; a larger `num_fans` from NVML is an error.
pub const MAX_FANS: u32 = 64;

/// Current and pending state of an on/off setting (ECC, MIG).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CurrentPending<T> {
    /// In force now.
    pub current: T,
    /// In force after the next reset.
    pub pending: T,
}

/// Whether ECC errors were corrected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EccErrorKind {
    /// Single-bit, corrected.
    Corrected,
    /// Double-bit, uncorrected.
    Uncorrected,
}

/// Which ECC counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EccCounter {
    /// Since the last driver load.
    Volatile,
    /// Over the life of the device.
    Aggregate,
}

/// Compute mode (`nvmlComputeMode_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ComputeMode {
    /// Many contexts per device.
    Default,
    /// Deprecated exclusive-thread mode.
    ExclusiveThread,
    /// No contexts allowed.
    Prohibited,
    /// One context per device, usable from many threads.
    ExclusiveProcess,
}

/// CUDA compute capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComputeCapability {
    /// Major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

/// Windows driver model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DriverModel {
    /// Windows Display Driver Model.
    Wddm,
    /// Tesla Compute Cluster (WDM).
    Wdm,
    /// Microsoft Compute Driver Model.
    Mcdm,
}

/// GPU architecture (`nvmlDeviceArchitecture_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Architecture {
    #[allow(missing_docs)]
    Kepler,
    #[allow(missing_docs)]
    Maxwell,
    #[allow(missing_docs)]
    Pascal,
    #[allow(missing_docs)]
    Volta,
    #[allow(missing_docs)]
    Turing,
    #[allow(missing_docs)]
    Ampere,
    #[allow(missing_docs)]
    Ada,
    #[allow(missing_docs)]
    Hopper,
    #[allow(missing_docs)]
    Blackwell,
    /// An architecture code this version does not name.
    Unknown(u32),
}

impl Architecture {
    /// From NVML's numeric code.
    pub fn from_nvml(code: u32) -> Architecture {
        match code {
            2 => Architecture::Kepler,
            3 => Architecture::Maxwell,
            4 => Architecture::Pascal,
            5 => Architecture::Volta,
            6 => Architecture::Turing,
            7 => Architecture::Ampere,
            8 => Architecture::Ada,
            9 => Architecture::Hopper,
            10 => Architecture::Blackwell,
            other => Architecture::Unknown(other),
        }
    }

    /// NVML's numeric code.
    pub fn nvml_code(self) -> u32 {
        match self {
            Architecture::Kepler => 2,
            Architecture::Maxwell => 3,
            Architecture::Pascal => 4,
            Architecture::Volta => 5,
            Architecture::Turing => 6,
            Architecture::Ampere => 7,
            Architecture::Ada => 8,
            Architecture::Hopper => 9,
            Architecture::Blackwell => 10,
            Architecture::Unknown(c) => c,
        }
    }
}

/// Product brand (`nvmlBrandType_t`), kept as NVML's number with a name for the known ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Brand {
    #[allow(missing_docs)]
    Unknown,
    #[allow(missing_docs)]
    Quadro,
    #[allow(missing_docs)]
    Tesla,
    #[allow(missing_docs)]
    Nvs,
    #[allow(missing_docs)]
    Grid,
    #[allow(missing_docs)]
    GeForce,
    #[allow(missing_docs)]
    Titan,
    #[allow(missing_docs)]
    NvidiaRtx,
    #[allow(missing_docs)]
    Nvidia,
    #[allow(missing_docs)]
    GeForceRtx,
    #[allow(missing_docs)]
    TitanRtx,
    #[allow(missing_docs)]
    QuadroRtx,
    /// A brand code without a name here.
    Other(u32),
}

impl Brand {
    /// From NVML's numeric code.
    pub fn from_nvml(code: u32) -> Brand {
        match code {
            0 => Brand::Unknown,
            1 => Brand::Quadro,
            2 => Brand::Tesla,
            3 => Brand::Nvs,
            4 => Brand::Grid,
            5 => Brand::GeForce,
            6 => Brand::Titan,
            12 => Brand::QuadroRtx,
            13 => Brand::NvidiaRtx,
            14 => Brand::Nvidia,
            15 => Brand::GeForceRtx,
            16 => Brand::TitanRtx,
            other => Brand::Other(other),
        }
    }

    /// NVML's numeric code.
    pub fn nvml_code(self) -> u32 {
        match self {
            Brand::Unknown => 0,
            Brand::Quadro => 1,
            Brand::Tesla => 2,
            Brand::Nvs => 3,
            Brand::Grid => 4,
            Brand::GeForce => 5,
            Brand::Titan => 6,
            Brand::QuadroRtx => 12,
            Brand::NvidiaRtx => 13,
            Brand::Nvidia => 14,
            Brand::GeForceRtx => 15,
            Brand::TitanRtx => 16,
            Brand::Other(c) => c,
        }
    }
}

/// One process that holds a context on a device (`nvmlProcessInfo_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessInfo {
    /// Process id, as the driver sees it (the host PID namespace).
    pub pid: u32,
    /// GPU memory used by the process, bytes; `None` where the driver cannot tell
    /// (`NVML_VALUE_NOT_AVAILABLE`, as under WDDM or on MIG without privileges).
    pub used_gpu_memory: Option<u64>,
    /// GPU-instance id on a MIG device; `None` outside MIG or from the v1 struct.
    pub gpu_instance_id: Option<u32>,
    /// Compute-instance id on a MIG device; `None` outside MIG or from the v1 struct.
    pub compute_instance_id: Option<u32>,
}

/// One per-process utilization sample (`nvmlProcessUtilizationSample_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessUtilizationSample {
    /// Process id.
    pub pid: u32,
    /// CPU timestamp of the sample, microseconds since the Unix epoch.
    pub timestamp_us: u64,
    /// SM utilization, percent.
    pub sm: u32,
    /// Memory (frame buffer) utilization, percent.
    pub memory: u32,
    /// Encoder utilization, percent.
    pub encoder: u32,
    /// Decoder utilization, percent.
    pub decoder: u32,
}

/// The kinds of NVML event the backend listens for (`nvmlEventType*`), with NVML's bit for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A single-bit ECC error (`nvmlEventTypeSingleBitEccError`, bit 0x1).
    SingleBitEcc,
    /// A double-bit ECC error (`nvmlEventTypeDoubleBitEccError`, bit 0x2).
    DoubleBitEcc,
    /// An XID critical error (`nvmlEventTypeXidCriticalError`, bit 0x8); the event's data is the
    /// XID code.
    Xid,
    /// A clock change (`nvmlEventTypeClock`, bit 0x10).
    Clock,
    /// A power-source change, AC or battery (`nvmlEventTypePowerSourceChange`, bit 0x80).
    PowerSource,
}

impl EventKind {
    /// Every kind, in NVML's bit order.
    pub const ALL: [EventKind; 5] = [
        EventKind::SingleBitEcc,
        EventKind::DoubleBitEcc,
        EventKind::Xid,
        EventKind::Clock,
        EventKind::PowerSource,
    ];

    /// NVML's bit for this kind (`nvmlEventType*`).
    pub const fn nvml_bit(self) -> u64 {
        match self {
            EventKind::SingleBitEcc => 0x1,
            EventKind::DoubleBitEcc => 0x2,
            EventKind::Xid => 0x8,
            EventKind::Clock => 0x10,
            EventKind::PowerSource => 0x80,
        }
    }

    /// The kind whose NVML bit is exactly `bits`; `None` for any other value.
    pub fn from_nvml_bit(bits: u64) -> Option<EventKind> {
        EventKind::ALL.into_iter().find(|k| k.nvml_bit() == bits)
    }

    /// Every kind's bit together: the mask the backend registers for.
    pub fn all_bits() -> u64 {
        EventKind::ALL.iter().fold(0, |m, k| m | k.nvml_bit())
    }

    /// The kind's name as it is written in fixtures and JSON (`"xid"`, `"double_bit_ecc"`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            EventKind::SingleBitEcc => "single_bit_ecc",
            EventKind::DoubleBitEcc => "double_bit_ecc",
            EventKind::Xid => "xid",
            EventKind::Clock => "clock",
            EventKind::PowerSource => "power_source",
        }
    }
}

/// What an XID code means, in NVIDIA's words shortened, for the codes seen most in the field
/// (NVIDIA's "Xid Errors" catalog); `None` for the others, which people look up by number.
pub fn xid_description(code: u64) -> Option<&'static str> {
    Some(match code {
        13 => "Graphics engine exception",
        31 => "GPU memory page fault",
        32 => "Invalid or corrupted push buffer stream",
        43 => "GPU stopped processing",
        45 => "Preemptive cleanup, due to previous errors",
        48 => "Double-bit ECC error",
        61 => "Internal micro-controller breakpoint/warning",
        62 => "Internal micro-controller halt",
        63 => "ECC page retirement or row remapping recording event",
        64 => "ECC page retirement or row remapper recording failure",
        68 => "NVDEC0 exception",
        69 => "Graphics engine class error",
        74 => "NVLink error",
        79 => "GPU has fallen off the bus",
        92 => "High single-bit ECC error rate",
        94 => "Contained ECC error",
        95 => "Uncontained ECC error",
        109 => "Context switch timeout error",
        119 => "GSP RPC timeout",
        120 => "GSP error",
        _ => return None,
    })
}

/// The most events a backend keeps per device: the newest, older ones are dropped. The bound on
/// a fixture's `events` list too.
pub const MAX_EVENTS: usize = 256;

/// One event NVML delivered about a device (`nvmlEventData_t`), with the time it was received.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuEvent {
    /// When the event was received, microseconds since the Unix epoch. Strictly increasing
    /// among one device's events.
    pub timestamp_us: u64,
    /// What happened.
    pub kind: EventKind,
    /// The event's data (`eventData`): the XID code for [`EventKind::Xid`], else what NVML gave
    /// (usually 0).
    pub data: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_ids_print_and_parse() {
        for (text, id) in [
            ("0", DeviceId::Gpu(0)),
            ("7", DeviceId::Gpu(7)),
            (
                "3:1",
                DeviceId::Mig {
                    parent: 3,
                    index: 1,
                },
            ),
        ] {
            assert_eq!(text.parse::<DeviceId>().unwrap(), id);
            assert_eq!(id.to_string(), text);
        }
        for bad in ["", ":", "a", "1:", ":2", "1:2:3", "-1", "+1", "99999999999"] {
            assert!(bad.parse::<DeviceId>().is_err(), "{bad:?} should not parse");
        }
    }

    #[test]
    fn architecture_and_brand_codes_round_trip() {
        for code in 0..20 {
            assert_eq!(Architecture::from_nvml(code).nvml_code(), code);
            assert_eq!(Brand::from_nvml(code).nvml_code(), code);
        }
    }
}
