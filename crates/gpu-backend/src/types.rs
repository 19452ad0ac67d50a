//! The values a backend answers with. Units are NVML's own: bytes, milliwatts, millijoules,
//! MHz, percent, KB/s, °C.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// `from_nvml` and `nvml_code` of an enum NVML numbers, from one list of its variants with
/// NVML's numbers: the one place each code is written (the NVML backend, fake-nvml and the
/// importer map through them). Three forms, by what a code NVML does not define becomes:
///
/// * `Enum { A = 0, B = 1 }`: `None` (`from_nvml` answers an `Option`);
/// * `Enum { A = 0, B = 1 } else Other(code)`: kept in the variant holding NVML's number;
/// * `Enum { A = 0, B = 32 } else B`: that variant (NVML's own "unknown").
///
/// `labelled Enum { A = 0 => "A Name", ... } else Other(code) => "mode {}"` also gives `label`,
/// the name nvidia-smi prints.
macro_rules! nvml_codes {
    (labelled $ty:ident { $($variant:ident = $code:literal => $label:literal),+ $(,)? }
        else $other:ident(code) => $other_label:literal) => {
        nvml_codes!($ty { $($variant = $code),+ } else $other(code));

        impl $ty {
            /// The name nvidia-smi prints, or NVML's number for a code without one.
            pub fn label(self) -> String {
                match self {
                    $($ty::$variant => $label.into(),)+
                    $ty::$other(code) => format!($other_label, code),
                }
            }
        }
    };
    ($ty:ident { $($variant:ident = $code:literal),+ $(,)? }) => {
        impl $ty {
            /// The variant of NVML's numeric code; `None` for a code NVML does not define.
            pub const fn from_nvml(code: u32) -> Option<$ty> {
                match code {
                    $($code => Some($ty::$variant),)+
                    _ => None,
                }
            }

            /// NVML's numeric code.
            pub const fn nvml_code(self) -> u32 {
                match self {
                    $($ty::$variant => $code,)+
                }
            }
        }
    };
    ($ty:ident { $($variant:ident = $code:literal),+ $(,)? } else $other:ident(code)) => {
        impl $ty {
            /// From NVML's numeric code; a code without a name here is kept as it is.
            pub const fn from_nvml(code: u32) -> $ty {
                match code {
                    $($code => $ty::$variant,)+
                    other => $ty::$other(other),
                }
            }

            /// NVML's numeric code.
            pub const fn nvml_code(self) -> u32 {
                match self {
                    $($ty::$variant => $code,)+
                    $ty::$other(code) => code,
                }
            }
        }
    };
    ($ty:ident { $($variant:ident = $code:literal),+ $(,)? } else $fallback:ident) => {
        impl $ty {
            #[doc = concat!("From NVML's numeric code; a code NVML does not define is [`", stringify!($ty), "::", stringify!($fallback), "`].")]
            pub const fn from_nvml(code: u32) -> $ty {
                match code {
                    $($code => $ty::$variant,)+
                    _ => $ty::$fallback,
                }
            }

            /// NVML's numeric code.
            pub const fn nvml_code(self) -> u32 {
                match self {
                    $($ty::$variant => $code,)+
                }
            }
        }
    };
}

mod details;
pub use details::*;

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

/// A PCI address, `DOMAIN:BUS:DEVICE.FUNCTION`, as numbers: what NVML's bus id
/// (`00000000:18:00.0`), libcuda's (`0000:18:00.0`) and a person's shorter form (`18:00.0`)
/// name alike. Ordered by domain, bus, device and function: PCI bus order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PciAddress {
    /// PCI domain.
    pub domain: u32,
    /// PCI bus.
    pub bus: u32,
    /// PCI device (slot).
    pub device: u32,
    /// PCI function.
    pub function: u32,
}

impl PciAddress {
    /// The address of a bus id text: `DOMAIN:BUS:DEVICE.FUNCTION` or `BUS:DEVICE.FUNCTION`
    /// (domain 0), each part 1 to 8 hex digits of either case; spaces around it and the NULs
    /// of a C buffer after it are ignored. `None` for anything else: the one parser of bus ids.
    pub fn parse(text: &str) -> Option<PciAddress> {
        let text = text.trim().trim_end_matches('\0');
        let (head, function) = text.rsplit_once('.')?;
        let hex = |s: &str| {
            if s.is_empty() || s.len() > 8 {
                None
            } else {
                u32::from_str_radix(s, 16).ok()
            }
        };
        let parts: Vec<&str> = head.split(':').collect();
        let (domain, bus, device) = match parts.as_slice() {
            [d, b, s] => (hex(d)?, hex(b)?, hex(s)?),
            [b, s] => (0, hex(b)?, hex(s)?),
            _ => return None,
        };
        Some(PciAddress {
            domain,
            bus,
            device,
            function: hex(function)?,
        })
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

nvml_codes!(ClockType { Graphics = 0, Sm = 1, Memory = 2, Video = 3 });

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
    /// The lowest target temperature that may be set
    /// (`NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MIN`).
    TargetMin,
    /// The temperature the GPU is kept at or under, nvidia-smi's `GPU Target Temperature`
    /// (`NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_CURR`).
    Target,
    /// The highest target temperature that may be set
    /// (`NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MAX`).
    TargetMax,
}

nvml_codes!(TemperatureThreshold {
    Shutdown = 0, Slowdown = 1, MemoryMax = 2, GpuMax = 3, TargetMin = 4, Target = 5,
    TargetMax = 6,
});

impl TemperatureThreshold {
    /// The field id of the threshold measured against T.Limit
    /// (`NVML_FI_DEV_TEMPERATURE_*_TLIMIT`); `None` for the target temperatures, which have
    /// none.
    pub const fn tlimit_field(self) -> Option<u32> {
        match self {
            TemperatureThreshold::Shutdown => Some(field_ids::TEMPERATURE_SHUTDOWN_TLIMIT),
            TemperatureThreshold::Slowdown => Some(field_ids::TEMPERATURE_SLOWDOWN_TLIMIT),
            TemperatureThreshold::MemoryMax => Some(field_ids::TEMPERATURE_MEM_MAX_TLIMIT),
            TemperatureThreshold::GpuMax => Some(field_ids::TEMPERATURE_GPU_MAX_TLIMIT),
            TemperatureThreshold::TargetMin
            | TemperatureThreshold::Target
            | TemperatureThreshold::TargetMax => None,
        }
    }
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

nvml_codes!(RetirementCause { SingleBit = 0, DoubleBit = 1 });

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

bitflags::bitflags! {
    /// NVML's clock event (throttle) reasons, a bit mask (`nvmlClocksEventReason*`), as
    /// nvml-wrapper's `ThrottleReasons` declares them. The queries answer NVML's `u64` as it
    /// came (`clock_event_reasons`, `supported_clock_event_reasons`: a fixture keeps a bit a
    /// later driver adds); this type reads it, `ClockEventReasons::from_bits_retain(mask)`.
    /// The flags' names in snake case (`sw_power_cap`) are the names gpuscope writes
    /// ([`ClockEventReasons::names`], the exporter's `reason` label).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct ClockEventReasons: u64 {
        /// Nothing is running on the GPU.
        const GPU_IDLE = 0x1;
        /// The clocks are held by the applications clocks setting.
        const APPLICATIONS_CLOCKS_SETTING = 0x2;
        /// The software power cap (the power limit) is reducing the clocks.
        const SW_POWER_CAP = 0x4;
        /// The hardware is slowing the clocks by half or more: too hot, a power brake, a power
        /// draw too high.
        const HW_SLOWDOWN = 0x8;
        /// Another GPU of the sync boost group holds this one's clocks down.
        const SYNC_BOOST = 0x10;
        /// The software slows the clocks for the GPU's or the memory's temperature.
        const SW_THERMAL_SLOWDOWN = 0x20;
        /// The hardware slows the clocks because the GPU is too hot.
        const HW_THERMAL_SLOWDOWN = 0x40;
        /// The hardware slows the clocks because an external power brake (the power supply)
        /// asks it to.
        const HW_POWER_BRAKE_SLOWDOWN = 0x80;
        /// The clocks are held by the display clocks setting.
        const DISPLAY_CLOCK_SETTING = 0x100;
    }
}

impl ClockEventReasons {
    /// The reasons that mean the hardware is slowing the GPU: HW slowdown, HW thermal
    /// slowdown, HW power brake and SW thermal slowdown (what `DeviceSnapshot::attention`
    /// reports).
    pub const ATTENTION: ClockEventReasons = ClockEventReasons::HW_SLOWDOWN
        .union(ClockEventReasons::SW_THERMAL_SLOWDOWN)
        .union(ClockEventReasons::HW_THERMAL_SLOWDOWN)
        .union(ClockEventReasons::HW_POWER_BRAKE_SLOWDOWN);

    /// The "unknown reason" bit of older NVML headers (`nvmlClocksThrottleReasonUnknown`),
    /// which older nvidia-smi prints as a reason of its own. Not a named flag: today's NVML
    /// no longer declares it, so lists write it as any unnamed bit (`bit_63`).
    pub const UNKNOWN: ClockEventReasons = ClockEventReasons::from_bits_retain(1 << 63);

    /// The names of the reasons set, in bit order: each flag's name in snake case
    /// (`sw_power_cap`), `bit_N` for a set bit this version does not name.
    pub fn names(self) -> Vec<String> {
        (0..64)
            .map(|b| 1u64 << b)
            .filter(|bit| self.bits() & bit != 0)
            .map(|bit| {
                ClockEventReasons::from_bits(bit)
                    .and_then(|flag| flag.iter_names().next())
                    .map_or_else(
                        || format!("bit_{}", bit.trailing_zeros()),
                        |(name, _)| name.to_ascii_lowercase(),
                    )
            })
            .collect()
    }
}

/// A performance state (`nvmlPstates_t`), as nvml-wrapper declares it: P0 (most performance)
/// to P15 (least), or NVML's unknown (32). The `performance_state` query answers NVML's number
/// as it came; this type reads it ([`PerformanceState::from_nvml`]).
///
/// Written `P0` to `P15`; [`PerformanceState::Unknown`] is written `N/A`, as every view writes
/// a value NVML cannot tell (and so is any code NVML does not define).
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PerformanceState {
    /// Most performance.
    P0,
    P1,
    P2,
    P3,
    P4,
    P5,
    P6,
    P7,
    P8,
    P9,
    P10,
    P11,
    P12,
    P13,
    P14,
    /// Least performance.
    P15,
    /// NVML cannot tell (`NVML_PSTATE_UNKNOWN`, 32).
    Unknown,
}

nvml_codes!(PerformanceState {
    P0 = 0, P1 = 1, P2 = 2, P3 = 3, P4 = 4, P5 = 5, P6 = 6, P7 = 7,
    P8 = 8, P9 = 9, P10 = 10, P11 = 11, P12 = 12, P13 = 13, P14 = 14, P15 = 15,
    Unknown = 32,
} else Unknown);

impl PerformanceState {
    /// The state of NVML's code when NVML can tell it (P0 to P15); `None` for NVML's unknown
    /// (32) and any code NVML does not define: what a view shows as N/A.
    pub const fn known(code: u32) -> Option<PerformanceState> {
        match PerformanceState::from_nvml(code) {
            PerformanceState::Unknown => None,
            state => Some(state),
        }
    }
}

impl fmt::Display for PerformanceState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PerformanceState::Unknown => f.write_str("N/A"),
            state => write!(f, "P{}", state.nvml_code()),
        }
    }
}

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

nvml_codes!(PcieDirection { Tx = 0, Rx = 1 });

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

/// NVLink error counters of one link (`nvmlDeviceGetNvLinkErrorCounter`), counts since the
/// driver loaded (or the counters were reset).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvLinkErrorCounters {
    /// Data-link replays (`NVML_NVLINK_ERROR_DL_REPLAY`).
    pub replay: u64,
    /// Data-link recoveries (`NVML_NVLINK_ERROR_DL_RECOVERY`).
    pub recovery: u64,
    /// Flow-control CRC errors (`NVML_NVLINK_ERROR_DL_CRC_FLIT`).
    pub crc_flit: u64,
    /// Data CRC errors (`NVML_NVLINK_ERROR_DL_CRC_DATA`).
    pub crc_data: u64,
}

/// Where in the GPU's memory an ECC error was counted (`nvmlMemoryLocation_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryLocation {
    /// L1 cache.
    L1Cache,
    /// L2 cache.
    L2Cache,
    /// Device memory (DRAM; nvidia-smi's `device_memory` or `dram_*`).
    DeviceMemory,
    /// Register file.
    RegisterFile,
    /// Texture memory.
    TextureMemory,
    /// Shared memory.
    TextureShm,
    /// CBU.
    Cbu,
    /// On-chip SRAM (Ampere and newer; nvidia-smi's `sram_*`).
    Sram,
}

nvml_codes!(MemoryLocation {
    L1Cache = 0, L2Cache = 1, DeviceMemory = 2, RegisterFile = 3,
    TextureMemory = 4, TextureShm = 5, Cbu = 6, Sram = 7,
});

impl MemoryLocation {
    /// Every location, in NVML's order.
    pub const ALL: [MemoryLocation; 8] = [
        MemoryLocation::L1Cache,
        MemoryLocation::L2Cache,
        MemoryLocation::DeviceMemory,
        MemoryLocation::RegisterFile,
        MemoryLocation::TextureMemory,
        MemoryLocation::TextureShm,
        MemoryLocation::Cbu,
        MemoryLocation::Sram,
    ];

    /// The snake_case name used in fixtures and JSON (`"device_memory"`).
    pub fn name(self) -> &'static str {
        match self {
            MemoryLocation::L1Cache => "l1_cache",
            MemoryLocation::L2Cache => "l2_cache",
            MemoryLocation::DeviceMemory => "device_memory",
            MemoryLocation::RegisterFile => "register_file",
            MemoryLocation::TextureMemory => "texture_memory",
            MemoryLocation::TextureShm => "texture_shm",
            MemoryLocation::Cbu => "cbu",
            MemoryLocation::Sram => "sram",
        }
    }
}

/// The ECC error counts of one memory location (`nvmlDeviceGetMemoryErrorCounter`); a count
/// the device does not keep for that location is `None`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LocationEccCounts {
    /// Corrected errors since the driver loaded.
    pub volatile_corrected: Option<u64>,
    /// Uncorrected errors since the driver loaded.
    pub volatile_uncorrected: Option<u64>,
    /// Corrected errors over the device's life.
    pub aggregate_corrected: Option<u64>,
    /// Uncorrected errors over the device's life.
    pub aggregate_uncorrected: Option<u64>,
}

impl LocationEccCounts {
    /// The count of one (kind, counter) pair.
    pub fn get(&self, kind: EccErrorKind, counter: EccCounter) -> Option<u64> {
        match (counter, kind) {
            (EccCounter::Volatile, EccErrorKind::Corrected) => self.volatile_corrected,
            (EccCounter::Volatile, EccErrorKind::Uncorrected) => self.volatile_uncorrected,
            (EccCounter::Aggregate, EccErrorKind::Corrected) => self.aggregate_corrected,
            (EccCounter::Aggregate, EccErrorKind::Uncorrected) => self.aggregate_uncorrected,
        }
    }

    /// A mutable reference to the count of one (kind, counter) pair.
    pub fn get_mut(&mut self, kind: EccErrorKind, counter: EccCounter) -> &mut Option<u64> {
        match (counter, kind) {
            (EccCounter::Volatile, EccErrorKind::Corrected) => &mut self.volatile_corrected,
            (EccCounter::Volatile, EccErrorKind::Uncorrected) => &mut self.volatile_uncorrected,
            (EccCounter::Aggregate, EccErrorKind::Corrected) => &mut self.aggregate_corrected,
            (EccCounter::Aggregate, EccErrorKind::Uncorrected) => &mut self.aggregate_uncorrected,
        }
    }
}

macro_rules! gpm_metrics {
    ($( $(#[doc = $doc:literal])* $field:ident = $id:literal, $unit:literal; )*) => {
        /// GPU Performance Monitoring metrics (`nvmlGpmMetricsGet`, Hopper and newer): what the
        /// GPU did between two samples. Percentages are 0-100; bandwidths are MiB/s. A metric
        /// the device or driver cannot give is `None`.
        #[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
        pub struct GpmMetrics {
            $(
                $(#[doc = $doc])*
                #[serde(default, skip_serializing_if = "Option::is_none")]
                pub $field: Option<f64>,
            )*
        }

        /// Every GPM metric gpuscope asks for: the [`GpmMetrics`] field, NVML's metric id
        /// (`NVML_GPM_METRIC_*`) and its unit.
        pub const GPM_METRICS: &[(&str, u32, &str)] = &[$((stringify!($field), $id, $unit),)*];

        impl GpmMetrics {
            /// The value of the metric with NVML id `id`, if it is one of [`GPM_METRICS`].
            pub fn by_id(&self, id: u32) -> Option<Option<f64>> {
                match id {
                    $($id => Some(self.$field),)*
                    _ => None,
                }
            }

            /// The slot of the metric with NVML id `id`, if it is one of [`GPM_METRICS`].
            pub fn slot_by_id(&mut self, id: u32) -> Option<&mut Option<f64>> {
                match id {
                    $($id => Some(&mut self.$field),)*
                    _ => None,
                }
            }

            /// Every metric as (field name, value), in [`GPM_METRICS`] order.
            pub fn fields(&self) -> [(&'static str, Option<f64>); GPM_METRICS.len()] {
                [$((stringify!($field), self.$field),)*]
            }
        }
    };
}

gpm_metrics! {
    /// Graphics engine activity, percent (`NVML_GPM_METRIC_GRAPHICS_UTIL`).
    graphics_activity = 1, "%";
    /// SM activity: share of time at least one warp was resident on an SM, averaged over the
    /// SMs, percent (`NVML_GPM_METRIC_SM_UTIL`).
    sm_activity = 2, "%";
    /// SM occupancy: resident warps over the most an SM can hold, percent
    /// (`NVML_GPM_METRIC_SM_OCCUPANCY`).
    sm_occupancy = 3, "%";
    /// Integer pipe activity, percent (`NVML_GPM_METRIC_INTEGER_UTIL`).
    integer_activity = 4, "%";
    /// Any tensor pipe activity, percent (`NVML_GPM_METRIC_ANY_TENSOR_UTIL`).
    tensor_activity = 5, "%";
    /// DFMA (FP64) tensor pipe activity, percent (`NVML_GPM_METRIC_DFMA_TENSOR_UTIL`).
    tensor_dfma_activity = 6, "%";
    /// HMMA (FP16/BF16) tensor pipe activity, percent (`NVML_GPM_METRIC_HMMA_TENSOR_UTIL`).
    tensor_hmma_activity = 7, "%";
    /// IMMA (integer) tensor pipe activity, percent (`NVML_GPM_METRIC_IMMA_TENSOR_UTIL`).
    tensor_imma_activity = 9, "%";
    /// DRAM bandwidth used, percent of the peak (`NVML_GPM_METRIC_DRAM_BW_UTIL`).
    dram_activity = 10, "%";
    /// FP64 pipe activity, percent (`NVML_GPM_METRIC_FP64_UTIL`).
    fp64_activity = 11, "%";
    /// FP32 pipe activity, percent (`NVML_GPM_METRIC_FP32_UTIL`).
    fp32_activity = 12, "%";
    /// FP16 pipe activity, percent (`NVML_GPM_METRIC_FP16_UTIL`).
    fp16_activity = 13, "%";
    /// PCIe transmit, MiB/s (`NVML_GPM_METRIC_PCIE_TX_PER_SEC`).
    pcie_tx = 20, "MiB/s";
    /// PCIe receive, MiB/s (`NVML_GPM_METRIC_PCIE_RX_PER_SEC`).
    pcie_rx = 21, "MiB/s";
    /// NVDEC 0 activity, percent (`NVML_GPM_METRIC_NVDEC_0_UTIL`).
    nvdec0_activity = 30, "%";
    /// NVDEC 1 activity, percent.
    nvdec1_activity = 31, "%";
    /// NVDEC 2 activity, percent.
    nvdec2_activity = 32, "%";
    /// NVDEC 3 activity, percent.
    nvdec3_activity = 33, "%";
    /// NVDEC 4 activity, percent.
    nvdec4_activity = 34, "%";
    /// NVDEC 5 activity, percent.
    nvdec5_activity = 35, "%";
    /// NVDEC 6 activity, percent.
    nvdec6_activity = 36, "%";
    /// NVDEC 7 activity, percent.
    nvdec7_activity = 37, "%";
    /// NVJPG 0 activity, percent (`NVML_GPM_METRIC_NVJPG_0_UTIL`).
    nvjpg0_activity = 40, "%";
    /// NVJPG 1 activity, percent.
    nvjpg1_activity = 41, "%";
    /// NVJPG 2 activity, percent.
    nvjpg2_activity = 42, "%";
    /// NVJPG 3 activity, percent.
    nvjpg3_activity = 43, "%";
    /// NVJPG 4 activity, percent.
    nvjpg4_activity = 44, "%";
    /// NVJPG 5 activity, percent.
    nvjpg5_activity = 45, "%";
    /// NVJPG 6 activity, percent.
    nvjpg6_activity = 46, "%";
    /// NVJPG 7 activity, percent.
    nvjpg7_activity = 47, "%";
    /// NVOFA 0 (optical flow) activity, percent (`NVML_GPM_METRIC_NVOFA_0_UTIL`).
    nvofa0_activity = 50, "%";
    /// NVOFA 1 activity, percent.
    nvofa1_activity = 51, "%";
    /// NVLink receive over all links, MiB/s (`NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC`).
    nvlink_rx = 60, "MiB/s";
    /// NVLink transmit over all links, MiB/s (`NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC`).
    nvlink_tx = 61, "MiB/s";
}

/// The largest GPM bandwidth believed, MiB/s (1 PiB/s): a larger value is not a reading.
pub const GPM_MAX_MIB_PER_S: f64 = 1024.0 * 1024.0 * 1024.0;

/// A GPM value as gpuscope keeps it: `None` unless finite and not negative; a percentage
/// above 100 (rounding in the driver) is 100; a bandwidth above [`GPM_MAX_MIB_PER_S`] is
/// `None`. `unit` is the unit of [`GPM_METRICS`].
pub fn gpm_value_bounded(unit: &str, value: f64) -> Option<f64> {
    if !value.is_finite() || value < 0.0 {
        return None;
    }
    if unit == "%" {
        Some(value.min(100.0))
    } else {
        (value <= GPM_MAX_MIB_PER_S).then_some(value)
    }
}

impl GpmMetrics {
    /// The mean activity of the NVDEC, NVJPG or NVOFA engines that answered (`prefix` is
    /// `"nvdec"`, `"nvjpg"` or `"nvofa"`), `None` when none did.
    pub fn engine_mean(&self, prefix: &str) -> Option<f64> {
        let values: Vec<f64> = self
            .fields()
            .iter()
            .filter(|(name, _)| name.starts_with(prefix))
            .filter_map(|(_, v)| *v)
            .collect();
        (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
    }
}

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

nvml_codes!(EccErrorKind { Corrected = 0, Uncorrected = 1 });

/// Which ECC counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EccCounter {
    /// Since the last driver load.
    Volatile,
    /// Over the life of the device.
    Aggregate,
}

nvml_codes!(EccCounter { Volatile = 0, Aggregate = 1 });

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

nvml_codes!(ComputeMode {
    Default = 0,
    ExclusiveThread = 1,
    Prohibited = 2,
    ExclusiveProcess = 3,
});

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

nvml_codes!(DriverModel { Wddm = 0, Wdm = 1, Mcdm = 2 });

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

nvml_codes!(Architecture {
    Kepler = 2, Maxwell = 3, Pascal = 4, Volta = 5, Turing = 6,
    Ampere = 7, Ada = 8, Hopper = 9, Blackwell = 10,
} else Unknown(code));

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

nvml_codes!(Brand {
    Unknown = 0, Quadro = 1, Tesla = 2, Nvs = 3, Grid = 4, GeForce = 5, Titan = 6,
    QuadroRtx = 12, NvidiaRtx = 13, Nvidia = 14, GeForceRtx = 15, TitanRtx = 16,
} else Other(code));

/// How the GPU is virtualized (`nvmlGpuVirtualizationMode_t`), kept as NVML's number with a
/// name for the known ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VirtualizationMode {
    /// Bare metal: no virtualization (nvidia-smi's `None`).
    None,
    /// The whole GPU is passed through to a virtual machine (nvidia-smi's `Pass-Through`).
    PassThrough,
    /// A vGPU inside a virtual machine (`VGPU`).
    Vgpu,
    /// The hypervisor side of vGPU (`Host VGPU`).
    HostVgpu,
    /// The hypervisor side of vSGA (`Host VSGA`).
    HostVsga,
    /// A mode code without a name here.
    Other(u32),
}

nvml_codes!(labelled VirtualizationMode {
    None = 0 => "None", PassThrough = 1 => "Pass-Through", Vgpu = 2 => "VGPU",
    HostVgpu = 3 => "Host VGPU", HostVsga = 4 => "Host VSGA",
} else Other(code) => "mode {}");

/// A GPU operation mode (`nvmlGpuOperationMode_t`): which parts of the chip are turned on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuOperationMode {
    /// Everything on, at full speed (nvidia-smi's `All On`).
    AllOn,
    /// Compute only: graphics turned off (`Compute`).
    Compute,
    /// Graphics without fast double precision (`Low Double Precision`).
    LowDoublePrecision,
    /// A mode code without a name here.
    Other(u32),
}

nvml_codes!(labelled GpuOperationMode {
    AllOn = 0 => "All On", Compute = 1 => "Compute", LowDoublePrecision = 2 => "Low Double Precision",
} else Other(code) => "mode {}");

/// The PCIe transfer rates `nvmlDeviceGetPcieLinkMaxSpeed` can answer, per lane, as NVML
/// names them (`NVML_PCIE_LINK_MAX_SPEED_2500MBPS` ... `_64000MBPS`: megatransfers a second,
/// PCIe generations 1 to 6), indexed by NVML's code less one.
pub const PCIE_LINK_MAX_SPEEDS_MBPS: [u32; 6] = [2500, 5000, 8000, 16000, 32000, 64000];

/// The transfer rate, per lane, that a `nvmlDeviceGetPcieLinkMaxSpeed` code names; `None` for
/// `NVML_PCIE_LINK_MAX_SPEED_INVALID` (0) and codes NVML does not define.
pub fn pcie_link_max_speed_from_nvml(code: u32) -> Option<u32> {
    let index = usize::try_from(code.checked_sub(1)?).ok()?;
    PCIE_LINK_MAX_SPEEDS_MBPS.get(index).copied()
}

/// The `nvmlDeviceGetPcieLinkMaxSpeed` code of a transfer rate per lane; `None` for a rate
/// NVML has no code for.
pub fn pcie_link_max_speed_nvml_code(mbps: u32) -> Option<u32> {
    let index = PCIE_LINK_MAX_SPEEDS_MBPS.iter().position(|&s| s == mbps)?;
    u32::try_from(index + 1).ok()
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

/// The kinds of NVML event (`nvmlEventType*`), with NVML's bit for each.
///
/// Which ones a listener registers for is its choice: the NVML backend listens for the ones
/// that tell about the GPU's health ([`EventKind::HEALTH`]) and not for clock or P-state
/// changes, which a GPU under a power cap sends dozens of times a second and which a refresh
/// reads anyway (`clock`, `clock_event_reasons`, `performance_state`); a recording asks for
/// every kind ([`EventKind::ALL`]) so that it keeps what the driver sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A single-bit ECC error (`nvmlEventTypeSingleBitEccError`, bit 0x1).
    SingleBitEcc,
    /// A double-bit ECC error (`nvmlEventTypeDoubleBitEccError`, bit 0x2).
    DoubleBitEcc,
    /// A P-state change (`nvmlEventTypePState`, bit 0x4).
    Pstate,
    /// An XID critical error (`nvmlEventTypeXidCriticalError`, bit 0x8); the event's data is the
    /// XID code.
    Xid,
    /// A clock change (`nvmlEventTypeClock`, bit 0x10).
    Clock,
    /// A power-source change, AC or battery (`nvmlEventTypePowerSourceChange`, bit 0x80).
    PowerSource,
    /// A MIG configuration change (`nvmlEventMigConfigChange`, bit 0x100).
    MigConfigChange,
    /// A storm of single-bit ECC errors (`nvmlEventTypeSingleBitEccErrorStorm`, bit 0x200).
    SingleBitEccStorm,
    /// A DRAM page retirement or row remap (`nvmlEventTypeDramRetirementEvent`, bit 0x400).
    DramRetirement,
    /// A DRAM retirement or remap that failed (`nvmlEventTypeDramRetirementFailure`, bit
    /// 0x800).
    DramRetirementFailure,
    /// A non-fatal poison error (`nvmlEventTypeNonFatalPoisonError`, bit 0x1000).
    NonFatalPoison,
    /// A fatal poison error (`nvmlEventTypeFatalPoisonError`, bit 0x2000).
    FatalPoison,
    /// The GPU became unavailable (`nvmlEventTypeGpuUnavailableError`, bit 0x4000).
    GpuUnavailable,
    /// The driver asks for a recovery action (`nvmlEventTypeGpuRecoveryAction`, bit 0x8000);
    /// the event's data is the action.
    GpuRecoveryAction,
}

impl EventKind {
    /// Every kind, in NVML's bit order: what NVML calls `nvmlEventTypeAll` (0xff9f).
    pub const ALL: [EventKind; 14] = [
        EventKind::SingleBitEcc,
        EventKind::DoubleBitEcc,
        EventKind::Pstate,
        EventKind::Xid,
        EventKind::Clock,
        EventKind::PowerSource,
        EventKind::MigConfigChange,
        EventKind::SingleBitEccStorm,
        EventKind::DramRetirement,
        EventKind::DramRetirementFailure,
        EventKind::NonFatalPoison,
        EventKind::FatalPoison,
        EventKind::GpuUnavailable,
        EventKind::GpuRecoveryAction,
    ];

    /// The kinds that tell about the GPU's health: every kind but [`EventKind::Clock`] and
    /// [`EventKind::Pstate`], which tell about performance, arrive by the dozen each second on
    /// a power-capped GPU (a listener woken for each costs 5-6% of a core), and are read at
    /// every refresh anyway (`clock`, `clock_event_reasons`, `performance_state`).
    pub const HEALTH: [EventKind; 12] = {
        // ALL in its order, less the two performance kinds; a wrong length fails to compile.
        let mut health = [EventKind::SingleBitEcc; 12];
        let (mut from, mut to) = (0, 0);
        while from < Self::ALL.len() {
            if !matches!(Self::ALL[from], EventKind::Clock | EventKind::Pstate) {
                health[to] = Self::ALL[from];
                to += 1;
            }
            from += 1;
        }
        assert!(to == health.len(), "HEALTH is ALL less Clock and Pstate");
        health
    };

    /// NVML's bit for this kind (`nvmlEventType*`).
    pub const fn nvml_bit(self) -> u64 {
        match self {
            EventKind::SingleBitEcc => 0x1,
            EventKind::DoubleBitEcc => 0x2,
            EventKind::Pstate => 0x4,
            EventKind::Xid => 0x8,
            EventKind::Clock => 0x10,
            EventKind::PowerSource => 0x80,
            EventKind::MigConfigChange => 0x100,
            EventKind::SingleBitEccStorm => 0x200,
            EventKind::DramRetirement => 0x400,
            EventKind::DramRetirementFailure => 0x800,
            EventKind::NonFatalPoison => 0x1000,
            EventKind::FatalPoison => 0x2000,
            EventKind::GpuUnavailable => 0x4000,
            EventKind::GpuRecoveryAction => 0x8000,
        }
    }

    /// The kind whose NVML bit is exactly `bits`; `None` for any other value.
    pub fn from_nvml_bit(bits: u64) -> Option<EventKind> {
        EventKind::ALL.into_iter().find(|k| k.nvml_bit() == bits)
    }

    /// Every kind's bit together (`nvmlEventTypeAll`).
    pub fn all_bits() -> u64 {
        Self::bits_of(&EventKind::ALL)
    }

    /// The bits of the kinds of [`EventKind::HEALTH`]: the mask the NVML backend registers for.
    pub fn health_bits() -> u64 {
        Self::bits_of(&EventKind::HEALTH)
    }

    /// The bits of `kinds` together.
    pub fn bits_of(kinds: &[EventKind]) -> u64 {
        kinds.iter().fold(0, |m, k| m | k.nvml_bit())
    }

    /// The kind's name as it is written in fixtures and JSON (`"xid"`, `"double_bit_ecc"`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            EventKind::SingleBitEcc => "single_bit_ecc",
            EventKind::DoubleBitEcc => "double_bit_ecc",
            EventKind::Pstate => "pstate",
            EventKind::Xid => "xid",
            EventKind::Clock => "clock",
            EventKind::PowerSource => "power_source",
            EventKind::MigConfigChange => "mig_config_change",
            EventKind::SingleBitEccStorm => "single_bit_ecc_storm",
            EventKind::DramRetirement => "dram_retirement",
            EventKind::DramRetirementFailure => "dram_retirement_failure",
            EventKind::NonFatalPoison => "non_fatal_poison",
            EventKind::FatalPoison => "fatal_poison",
            EventKind::GpuUnavailable => "gpu_unavailable",
            EventKind::GpuRecoveryAction => "gpu_recovery_action",
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
    fn event_kinds_are_nvmls_and_health_leaves_out_clock_and_pstate_changes() {
        // nvmlEventTypeAll, what an H100 reports as supported.
        assert_eq!(EventKind::all_bits(), 0xff9f);
        assert_eq!(
            EventKind::health_bits(),
            0xff9f & !(EventKind::Clock.nvml_bit() | EventKind::Pstate.nvml_bit())
        );
        for k in EventKind::ALL {
            assert_eq!(EventKind::from_nvml_bit(k.nvml_bit()), Some(k));
            // The name a fixture writes is serde's.
            assert_eq!(
                serde_json::to_value(k).unwrap(),
                serde_json::json!(k.name()),
                "{k:?}"
            );
        }
        assert_eq!(EventKind::from_nvml_bit(0x18), None, "one kind at a time");
    }

    #[test]
    fn pci_bus_ids_parse_in_nvml_cuda_and_short_forms() {
        let at = |domain, bus, device, function| {
            Some(PciAddress {
                domain,
                bus,
                device,
                function,
            })
        };
        let parse = PciAddress::parse;
        assert_eq!(parse("00000000:18:00.0"), at(0, 0x18, 0, 0));
        assert_eq!(parse("0000:18:00.0"), parse("00000000:18:00.0"));
        assert_eq!(parse("0000:DB:00.1"), at(0, 0xdb, 0, 1));
        assert_eq!(parse("0000:AF:00.1"), parse("00000000:af:00.1"));
        assert_ne!(parse("0000:18:00.0"), parse("0000:19:00.0"));
        assert_eq!(parse("db:1f.0"), at(0, 0xdb, 0x1f, 0));
        assert_eq!(parse("af:01.0"), at(0, 0xaf, 1, 0));
        assert_eq!(parse(" 00000000:18:00.0\0\0"), at(0, 0x18, 0, 0));
        for bad in [
            "nonsense",
            "junk",
            "garbage",
            "1:2:3:4.0",
            "0:1:2:3.0",
            "18:00",
            "18:00.",
            ":00.0",
            "000000000:18:00.0",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }

    proptest::proptest! {
        /// Any text: an address or `None`, never a panic; an address written back reads the same.
        #[test]
        fn any_bus_id_text_parses_or_is_refused(text in ".{0,40}", d: u32, b: u8, s: u8, f: u8) {
            let _ = PciAddress::parse(&text);
            let written = format!("{d:08x}:{b:02x}:{s:02x}.{f:x}");
            proptest::prop_assert_eq!(
                PciAddress::parse(&written),
                Some(PciAddress { domain: d, bus: b.into(), device: s.into(), function: f.into() })
            );
        }
    }

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

    proptest::proptest! {
        /// Every NVML code of the new enums and of the PCIe max speed comes back as itself.
        #[test]
        fn nvml_codes_round_trip(code in 0u32..64) {
            proptest::prop_assert_eq!(VirtualizationMode::from_nvml(code).nvml_code(), code);
            proptest::prop_assert_eq!(GpuOperationMode::from_nvml(code).nvml_code(), code);
            if let Some(mbps) = pcie_link_max_speed_from_nvml(code) {
                proptest::prop_assert_eq!(pcie_link_max_speed_nvml_code(mbps), Some(code));
            } else {
                proptest::prop_assert!(code == 0 || code > 6, "code {} has a speed", code);
            }
        }
    }

    #[test]
    fn each_enum_maps_nvmls_numbers_both_ways() {
        for c in ClockType::ALL {
            assert_eq!(ClockType::from_nvml(c.nvml_code()), Some(c));
        }
        for l in MemoryLocation::ALL {
            assert_eq!(MemoryLocation::from_nvml(l.nvml_code()), Some(l));
        }
        // Each variant is NVML's number, both ways.
        macro_rules! nvml_numbers {
            ($($ty:ident::$variant:ident = $code:literal,)*) => {$(
                assert_eq!($ty::$variant.nvml_code(), $code, stringify!($ty::$variant));
                assert_eq!($ty::from_nvml($code), Some($ty::$variant), stringify!($code));
            )*};
        }
        nvml_numbers! {
            // nvml.h: NVML_TEMPERATURE_THRESHOLD_SHUTDOWN 0, _SLOWDOWN 1, _MEM_MAX 2, _GPU_MAX 3,
            // _ACOUSTIC_MIN 4, _ACOUSTIC_CURR 5, _ACOUSTIC_MAX 6.
            TemperatureThreshold::Shutdown = 0,
            TemperatureThreshold::GpuMax = 3,
            TemperatureThreshold::Target = 5,
            // nvml.h: NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN 269 in NVML API 13.
            ClockEventCounter::SwThermalSlowdown = 269,
            VgpuCapability::HomogeneousPlacements = 9,
            PowerScope::Memory = 2,
            ComputeMode::ExclusiveProcess = 3,
            DriverModel::Mcdm = 2,
            RetirementCause::DoubleBit = 1,
            EccErrorKind::Uncorrected = 1,
            EccCounter::Volatile = 0,
        }
        // Numbers NVML does not define for the enum.
        assert_eq!(TemperatureThreshold::from_nvml(7), None);
        assert_eq!(ComputeMode::from_nvml(4), None);
        assert_eq!(PcieDirection::from_nvml(2), None);
        assert_eq!(Architecture::from_nvml(9), Architecture::Hopper);
        assert_eq!(Brand::from_nvml(99), Brand::Other(99));
        assert_eq!(Brand::Other(99).nvml_code(), 99);
    }

    #[test]
    fn a_performance_state_nvml_cannot_tell_is_written_na() {
        assert_eq!(PerformanceState::from_nvml(0), PerformanceState::P0);
        assert_eq!(PerformanceState::from_nvml(15), PerformanceState::P15);
        assert_eq!(PerformanceState::from_nvml(32), PerformanceState::Unknown);
        assert_eq!(PerformanceState::from_nvml(16), PerformanceState::Unknown);
        assert_eq!(PerformanceState::Unknown.nvml_code(), 32);
        assert_eq!(PerformanceState::known(8), Some(PerformanceState::P8));
        assert_eq!(PerformanceState::known(32), None);
        assert_eq!(PerformanceState::known(u32::MAX), None);
        assert_eq!(PerformanceState::P8.to_string(), "P8");
        assert_eq!(PerformanceState::Unknown.to_string(), "N/A");
    }

    #[test]
    fn clock_event_reasons_are_named_in_bit_order() {
        assert_eq!(ClockEventReasons::all().bits(), 0x1ff);
        assert_eq!(
            ClockEventReasons::ATTENTION.bits(),
            0x8 | 0x20 | 0x40 | 0x80
        );
        let set = ClockEventReasons::from_bits_retain(0x4 | 0x100 | (1 << 40));
        assert_eq!(
            set.names(),
            ["sw_power_cap", "display_clock_setting", "bit_40"]
        );
        assert_eq!(ClockEventReasons::UNKNOWN.names(), ["bit_63"]);
        assert!(ClockEventReasons::empty().names().is_empty());
    }

    #[test]
    fn pcie_max_speed_codes_name_nvmls_rates() {
        // nvml.h: NVML_PCIE_LINK_MAX_SPEED_32000MBPS is 0x5; the real H100 answered 5.
        assert_eq!(pcie_link_max_speed_from_nvml(5), Some(32_000));
        assert_eq!(pcie_link_max_speed_from_nvml(0), None);
        assert_eq!(pcie_link_max_speed_nvml_code(2_500), Some(1));
        assert_eq!(pcie_link_max_speed_nvml_code(12_345), None);
    }

    proptest::proptest! {
        /// Whatever NVML or a fixture gives, a kept GPM value is finite, not negative and within
        /// its unit's bound, and a value already within bounds is kept unchanged.
        #[test]
        fn gpm_values_are_bounded(v in proptest::num::f64::ANY, percent in proptest::bool::ANY) {
            let unit = if percent { "%" } else { "MiB/s" };
            let max = if percent { 100.0 } else { GPM_MAX_MIB_PER_S };
            match gpm_value_bounded(unit, v) {
                Some(x) => {
                    proptest::prop_assert!(x.is_finite() && (0.0..=max).contains(&x));
                    if v <= max {
                        proptest::prop_assert_eq!(x, v);
                    }
                }
                None => proptest::prop_assert!(!v.is_finite() || v < 0.0 || (!percent && v > max)),
            }
        }

        /// GPM metrics keep every value through JSON (fixtures), metrics left out read as
        /// `None`, and `by_id` finds each by NVML's id.
        #[test]
        fn gpm_metrics_round_trip_through_json(values in proptest::collection::vec(proptest::option::of(0.0f64..100.0), GPM_METRICS.len())) {
            let mut m = GpmMetrics::default();
            for ((_, id, _), v) in GPM_METRICS.iter().zip(&values) {
                *m.slot_by_id(*id).expect("a known id") = *v;
            }
            let json = serde_json::to_string(&m).expect("serialises");
            let back: GpmMetrics = serde_json::from_str(&json).expect("parses");
            proptest::prop_assert_eq!(back, m);
            for ((_, id, _), v) in GPM_METRICS.iter().zip(&values) {
                proptest::prop_assert_eq!(back.by_id(*id), Some(*v));
            }
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
