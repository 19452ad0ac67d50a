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
