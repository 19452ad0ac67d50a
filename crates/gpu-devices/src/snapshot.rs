//! Snapshots: every metric of a device (or of the system), each backend query asked once, as
//! plain serialisable data; and the value types the device getters share with them.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use gpu_backend::fixture::{DeviceDynamic, DeviceStatic, EccCounts, SystemAnswers};
use gpu_backend::recorder::Snapshot as RawSnapshot;
use gpu_backend::{
    Answer, Architecture, BackendError, Bar1MemoryInfo, Brand, CodecUtilization, ComputeCapability,
    ComputeMode, CurrentPending, DeviceId, DriverModel, GpmMetrics, GpuEvent, GpuOperationMode,
    LocationEccCounts, MemoryInfo, MemoryLocation, NvLinkCounters, NvLinkErrorCounters, PciInfo,
    PerClock, PowerLimits, ProcessInfo, ProcessUtilizationSample, RemappedRows, Utilization,
    VirtualizationMode,
};
use serde::{Deserialize, Serialize};

use crate::na::Na;
use crate::units::{bytes2human, cuda_version_text};

mod details;
pub use details::{detail_queries, DeviceDetails, DETAIL_DYNAMIC_FIELDS};

/// Current (or maximum) clocks, MHz.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ClockInfos {
    /// Graphics (shader) clock.
    pub graphics: Na<u32>,
    /// SM clock.
    pub sm: Na<u32>,
    /// Memory clock.
    pub memory: Na<u32>,
    /// Video encoder/decoder clock.
    pub video: Na<u32>,
}

/// Current and maximum clocks together (nvitop's `ClockSpeedInfos`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ClockSpeedInfos {
    /// Current clocks.
    pub current: ClockInfos,
    /// Maximum clocks.
    pub max: ClockInfos,
}

/// Utilization rates, percent (nvitop's `UtilizationRates`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct UtilizationRates {
    /// Time a kernel was running.
    pub gpu: Na<u32>,
    /// Time device memory was read or written.
    pub memory: Na<u32>,
    /// Encoder.
    pub encoder: Na<u32>,
    /// Decoder.
    pub decoder: Na<u32>,
}

/// A transmit / receive rate pair, KiB/s (nvitop's `ThroughputInfo`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ThroughputInfo {
    /// Transmitted, KiB/s.
    pub tx: Na<u64>,
    /// Received, KiB/s.
    pub rx: Na<u64>,
}

impl ThroughputInfo {
    /// `tx` as text: `12MiB/s`.
    pub fn tx_human(&self) -> Na<String> {
        self.tx.clone().map(kib_rate_human)
    }

    /// `rx` as text: `12MiB/s`.
    pub fn rx_human(&self) -> Na<String> {
        self.rx.clone().map(kib_rate_human)
    }
}

/// A rate in KiB/s as text: `bytes2human(kib * 1024) + "/s"`.
pub fn kib_rate_human(kib_per_s: u64) -> String {
    format!("{}/s", bytes2human(kib_per_s.saturating_mul(1024)))
}

/// ECC error counts.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct EccErrors {
    /// Corrected since the driver loaded.
    pub volatile_corrected: Na<u64>,
    /// Uncorrected since the driver loaded.
    pub volatile_uncorrected: Na<u64>,
    /// Corrected over the device's life.
    pub aggregate_corrected: Na<u64>,
    /// Uncorrected over the device's life.
    pub aggregate_uncorrected: Na<u64>,
}

/// ECC error counts per memory location (`nvmlDeviceGetMemoryErrorCounter`); a location the
/// device does not count is N/A.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct EccByLocation {
    /// L1 cache.
    pub l1_cache: Na<LocationEccCounts>,
    /// L2 cache.
    pub l2_cache: Na<LocationEccCounts>,
    /// Device memory (DRAM).
    pub device_memory: Na<LocationEccCounts>,
    /// Register file.
    pub register_file: Na<LocationEccCounts>,
    /// Texture memory.
    pub texture_memory: Na<LocationEccCounts>,
    /// Shared memory.
    pub texture_shm: Na<LocationEccCounts>,
    /// CBU.
    pub cbu: Na<LocationEccCounts>,
    /// On-chip SRAM.
    pub sram: Na<LocationEccCounts>,
}

impl EccByLocation {
    /// The counts of one location.
    pub fn get(&self, location: MemoryLocation) -> &Na<LocationEccCounts> {
        match location {
            MemoryLocation::L1Cache => &self.l1_cache,
            MemoryLocation::L2Cache => &self.l2_cache,
            MemoryLocation::DeviceMemory => &self.device_memory,
            MemoryLocation::RegisterFile => &self.register_file,
            MemoryLocation::TextureMemory => &self.texture_memory,
            MemoryLocation::TextureShm => &self.texture_shm,
            MemoryLocation::Cbu => &self.cbu,
            MemoryLocation::Sram => &self.sram,
        }
    }
}

/// Which contexts a process holds on a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ProcessKind {
    /// A compute context (`C`).
    #[serde(rename = "C")]
    Compute,
    /// A graphics context (`G`).
    #[serde(rename = "G")]
    Graphics,
    /// Both (`C+G`).
    #[serde(rename = "C+G")]
    ComputeGraphics,
}

impl ProcessKind {
    /// `C`, `G` or `C+G`, as nvidia-smi and nvitop print it.
    pub fn as_str(self) -> &'static str {
        match self {
            ProcessKind::Compute => "C",
            ProcessKind::Graphics => "G",
            ProcessKind::ComputeGraphics => "C+G",
        }
    }
}

/// A process on a device, from the device's compute and graphics lists merged by PID.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceProcess {
    /// Process id (host PID namespace).
    pub pid: u32,
    /// Compute, graphics or both.
    pub kind: ProcessKind,
    /// GPU memory used, bytes; N/A where the driver cannot tell (WDDM, MIG without privileges).
    pub used_gpu_memory: Na<u64>,
    /// GPU instance id on a MIG device.
    pub gpu_instance_id: Na<u32>,
    /// Compute instance id on a MIG device.
    pub compute_instance_id: Na<u32>,
}

/// Merges a device's compute and graphics process lists by PID, ordered by PID. N/A only when
/// both lists are; a failure of both is kept.
pub fn merge_processes(
    compute: &Na<Vec<ProcessInfo>>,
    graphics: &Na<Vec<ProcessInfo>>,
) -> Na<Vec<DeviceProcess>> {
    if let (Na::Failed(e), Na::Failed(_) | Na::NotAvailable) | (Na::NotAvailable, Na::Failed(e)) =
        (compute, graphics)
    {
        return Na::Failed(e.clone());
    }
    if compute.is_na() && graphics.is_na() {
        return Na::NotAvailable;
    }
    let mut by_pid: BTreeMap<u32, DeviceProcess> = BTreeMap::new();
    for (list, kind) in [
        (compute, ProcessKind::Compute),
        (graphics, ProcessKind::Graphics),
    ] {
        for p in list.value().into_iter().flatten() {
            by_pid
                .entry(p.pid)
                .and_modify(|e| {
                    if e.kind != kind {
                        e.kind = ProcessKind::ComputeGraphics;
                    }
                    if let (Na::NotAvailable, Some(m)) = (&e.used_gpu_memory, p.used_gpu_memory) {
                        e.used_gpu_memory = Na::Value(m);
                    }
                })
                .or_insert(DeviceProcess {
                    pid: p.pid,
                    kind,
                    used_gpu_memory: p.used_gpu_memory.into(),
                    gpu_instance_id: p.gpu_instance_id.into(),
                    compute_instance_id: p.compute_instance_id.into(),
                });
        }
    }
    Na::Value(by_pid.into_values().collect())
}

/// A GPU or compute instance id answer as every output shows it. A physical GPU has no GPU
/// or compute instance, whether or not it is in MIG mode (only its MIG devices do), and NVML
/// answers these two queries for its handle with `INVALID_ARGUMENT` (a real H100 80GB HBM3,
/// driver 580.159.04, MIG off: `fixtures/h100-real.json`). That answer is "cannot tell"
/// (N/A), not a failure; it stays a failure on a MIG device, which has both ids.
///
/// This is the one place the rule lives: device snapshots (and so `snapshot`, `info`, their
/// JSON `errors`, the exporter and `select`) and the device getters go through it. A
/// recording keeps what the driver answered.
///
/// ```
/// use gpu_backend::{BackendError, DeviceId};
/// use gpu_devices::{instance_id_answer, Na};
///
/// let gpu: Na<u32> = instance_id_answer(DeviceId::Gpu(0), Err(BackendError::InvalidArgument)).into();
/// assert_eq!(gpu, Na::NotAvailable);
/// let mig = DeviceId::Mig { parent: 0, index: 1 };
/// let failed: Na<u32> = instance_id_answer(mig, Err(BackendError::InvalidArgument)).into();
/// assert_eq!(failed, Na::Failed(BackendError::InvalidArgument));
/// ```
pub fn instance_id_answer(
    id: DeviceId,
    answer: Result<u32, BackendError>,
) -> Result<u32, BackendError> {
    match (id, answer) {
        (DeviceId::Gpu(_), Err(BackendError::InvalidArgument)) => Err(BackendError::NotSupported),
        (_, answer) => answer,
    }
}

/// A frame-buffer memory answer as every output shows it: one whose parts do not fit in its
/// total (used or free more than the total, or used and free together more than it) is a
/// failure, never a value, whether NVML or a fixture gave it. Which part is wrong cannot be
/// told, so none of them is shown: `snapshot`, `info`, their JSON (`null`, the reason in
/// `errors`), the exporter (which then says `gpuscope_device_up 0`, as for any failed memory
/// answer) and `select` (a device whose memory is unknown never qualifies) agree. The driver's
/// reserved memory is not added to the sum (NVML's v2 answer counts it apart, and some drivers
/// count it in `used` too), only held to the total. A recording keeps what was answered.
///
/// ```
/// use gpu_backend::{BackendError, MemoryInfo};
/// use gpu_devices::memory_answer;
///
/// let fine = MemoryInfo { total: 100, used: 30, free: 60, reserved: Some(10) };
/// assert_eq!(memory_answer(Ok(fine)), Ok(fine));
/// let broken = MemoryInfo { total: 100, used: 130, free: 0, reserved: None };
/// assert!(matches!(memory_answer(Ok(broken)), Err(BackendError::Other(_))));
/// ```
pub fn memory_answer(answer: Result<MemoryInfo, BackendError>) -> Result<MemoryInfo, BackendError> {
    let m = answer?;
    check_memory_parts("memory", m.total, m.used, m.free, m.reserved)?;
    Ok(m)
}

/// A BAR1 memory answer, held to the rule of [`memory_answer`].
pub fn bar1_memory_answer(
    answer: Result<Bar1MemoryInfo, BackendError>,
) -> Result<Bar1MemoryInfo, BackendError> {
    let m = answer?;
    check_memory_parts("BAR1 memory", m.total, m.used, m.free, None)?;
    Ok(m)
}

/// Whether `used`, `free` (and `reserved`) of `what` fit in `total`.
fn check_memory_parts(
    what: &str,
    total: u64,
    used: u64,
    free: u64,
    reserved: Option<u64>,
) -> Result<(), BackendError> {
    let wrong = |part: &str, bytes: u64| {
        Err(BackendError::Other(format!(
            "inconsistent {what} answer: {part} {bytes} bytes is more than the total {total} bytes"
        )))
    };
    if used > total {
        return wrong("used", used);
    }
    if free > total {
        return wrong("free", free);
    }
    if let Some(r) = reserved.filter(|&r| r > total) {
        return wrong("reserved", r);
    }
    match used.checked_add(free) {
        Some(sum) if sum <= total => Ok(()),
        sum => wrong("used + free", sum.unwrap_or(u64::MAX)),
    }
}

/// A field of a snapshot whose value is missing because the backend failed unexpectedly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldError {
    /// The field, as named in the snapshot (`memory`, `clocks.sm`, `nvlink_counters[3]`, ...).
    pub field: String,
    /// What the backend answered.
    pub error: BackendError,
}

/// Used percent of a total, rounded to one decimal as nvitop does; N/A for a zero total.
pub fn used_percent(used: u64, total: u64) -> Na<f64> {
    if total == 0 {
        return Na::NotAvailable;
    }
    Na::Value((1000.0 * used as f64 / total as f64).round() / 10.0)
}

/// `"<used> / <total>"` in human units, `N/A` for a missing side (nvitop's `memory_usage`).
pub fn usage_text(used: &Na<u64>, total: &Na<u64>) -> String {
    format!(
        "{} / {}",
        used.clone().map(bytes2human),
        total.clone().map(bytes2human)
    )
}

/// `"<usage>W / <limit>W"`, from milliwatts, `N/A` for a missing side (nvitop's
/// `power_status`).
pub fn power_status_text(usage_mw: &Na<u32>, limit_mw: &Na<u32>) -> String {
    let w = |v: &Na<u32>| {
        v.clone()
            .map(|mw| format!("{}W", (f64::from(mw) / 1000.0).round_ties_even() as u64))
    };
    format!("{} / {}", w(usage_mw), w(limit_mw))
}

/// NVLink counters of every link of a device, and when they were read.
#[derive(Debug, Clone)]
pub(crate) struct NvLinkReading {
    pub(crate) at: Instant,
    pub(crate) counters: Vec<Na<NvLinkCounters>>,
}

impl NvLinkReading {
    /// Rates per link from `earlier` to this reading.
    pub(crate) fn throughput_since(&self, earlier: &NvLinkReading) -> Vec<ThroughputInfo> {
        nvlink_throughput_between(
            &earlier.counters,
            &self.counters,
            self.at.saturating_duration_since(earlier.at),
        )
    }
}

/// NVLink throughput per link, KiB/s, from two readings of the cumulative counters taken
/// `elapsed` apart. A link missing in either reading, a counter that went backwards (reset), or
/// a zero interval gives N/A for that link.
pub fn nvlink_throughput_between(
    before: &[Na<NvLinkCounters>],
    after: &[Na<NvLinkCounters>],
    elapsed: Duration,
) -> Vec<ThroughputInfo> {
    let secs = elapsed.as_secs_f64();
    let rate = |a: u64, b: u64| -> Na<u64> {
        if secs <= 0.0 || b < a {
            Na::NotAvailable
        } else {
            Na::Value(((b - a) as f64 / secs).round() as u64)
        }
    };
    after
        .iter()
        .enumerate()
        .map(|(link, now)| {
            let then = before.get(link).cloned().unwrap_or_default();
            match (&then, now) {
                (Na::Value(a), Na::Value(b)) => ThroughputInfo {
                    tx: rate(a.tx_kib, b.tx_kib),
                    rx: rate(a.rx_kib, b.rx_kib),
                },
                (Na::Failed(e), _) | (_, Na::Failed(e)) => ThroughputInfo {
                    tx: Na::Failed(e.clone()),
                    rx: Na::Failed(e.clone()),
                },
                _ => ThroughputInfo::default(),
            }
        })
        .collect()
}

/// The mean over links of per-link throughputs; N/A when no link has a value.
pub fn mean_throughput(links: &[ThroughputInfo]) -> ThroughputInfo {
    let mean = |pick: fn(&ThroughputInfo) -> &Na<u64>| -> Na<u64> {
        let values: Vec<u64> = links
            .iter()
            .filter_map(|l| pick(l).value().copied())
            .collect();
        if values.is_empty() {
            Na::NotAvailable
        } else {
            Na::Value(values.iter().sum::<u64>() / values.len() as u64)
        }
    };
    ThroughputInfo {
        tx: mean(|l| &l.tx),
        rx: mean(|l| &l.rx),
    }
}

/// Every metric of one device at one moment, each backend query asked once (nvitop's
/// `as_snapshot` / `oneshot`). Plain data: fields are public, N/A values are [`Na`], JSON
/// `null`. Derived forms (human text, percents) are methods.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceSnapshot {
    /// The device: `"3"` for GPU 3, `"3:1"` for its MIG slot 1.
    pub id: DeviceId,
    /// The CUDA ordinal, when the snapshot was taken through a [`crate::CudaDevice`].
    pub cuda_index: Option<u32>,
    /// Product name.
    pub name: Na<String>,
    /// `GPU-...` or `MIG-...`.
    pub uuid: Na<String>,
    /// Board serial number.
    pub serial: Na<String>,
    /// PCI identity.
    pub pci: Na<PciInfo>,
    /// Minor number of `/dev/nvidiaN`.
    pub minor_number: Na<u32>,
    /// VBIOS version.
    pub vbios_version: Na<String>,
    /// Board part number.
    pub board_part_number: Na<String>,
    /// Inforom image version.
    pub inforom_image_version: Na<String>,
    /// Memory bus width, bits.
    pub memory_bus_width: Na<u32>,
    /// Architecture.
    pub architecture: Na<Architecture>,
    /// Brand.
    pub brand: Na<Brand>,
    /// Frame-buffer memory, bytes.
    pub memory: Na<MemoryInfo>,
    /// BAR1 memory, bytes.
    pub bar1_memory: Na<Bar1MemoryInfo>,
    /// GPU and memory utilization, percent.
    pub utilization: Na<Utilization>,
    /// Encoder utilization.
    pub encoder: Na<CodecUtilization>,
    /// Decoder utilization.
    pub decoder: Na<CodecUtilization>,
    /// Current clocks, MHz.
    pub clocks: ClockInfos,
    /// Maximum clocks, MHz.
    pub max_clocks: ClockInfos,
    /// Number of fans.
    pub num_fans: Na<u32>,
    /// Intended fan speed, percent.
    pub fan_speed: Na<u32>,
    /// Intended speed of each fan, percent.
    pub fan_speeds: Vec<Na<u32>>,
    /// The speed each fan is driven towards, percent.
    #[serde(default)]
    pub fan_target_speeds: Vec<Na<u32>>,
    /// Core temperature, °C.
    pub temperature: Na<u32>,
    /// Slowdown threshold, °C.
    pub temperature_slowdown: Na<u32>,
    /// Shutdown threshold, °C.
    pub temperature_shutdown: Na<u32>,
    /// Highest GPU temperature the board is rated for, °C.
    pub temperature_gpu_max: Na<u32>,
    /// Highest memory temperature, °C.
    pub temperature_memory_max: Na<u32>,
    /// Whether power management (and so power readings) is enabled.
    pub power_management_mode: Na<bool>,
    /// Power draw, mW.
    pub power_usage: Na<u32>,
    /// Power-management (software) limit, mW.
    pub power_limit: Na<u32>,
    /// Default power-management limit (the limit the board starts with), mW.
    pub power_default_limit: Na<u32>,
    /// The limit in force, mW.
    pub enforced_power_limit: Na<u32>,
    /// Range the limit may be set in, mW.
    pub power_limit_constraints: Na<PowerLimits>,
    /// Energy since the driver loaded, mJ.
    pub total_energy_consumption: Na<u64>,
    /// Current PCIe generation.
    pub pcie_link_generation: Na<u32>,
    /// Highest PCIe generation.
    pub max_pcie_link_generation: Na<u32>,
    /// Current PCIe width, lanes.
    pub pcie_link_width: Na<u32>,
    /// Widest PCIe link, lanes.
    pub max_pcie_link_width: Na<u32>,
    /// PCIe transmit throughput, KiB/s.
    pub pcie_tx_throughput: Na<u32>,
    /// PCIe receive throughput, KiB/s.
    pub pcie_rx_throughput: Na<u32>,
    /// Whether each NVLink is active, link 0 up to the last link that answers.
    pub nvlink_state: Vec<Na<bool>>,
    /// Cumulative NVLink data counters of the same links, KiB.
    pub nvlink_counters: Vec<Na<NvLinkCounters>>,
    /// NVLink error counters of the same links.
    #[serde(default)]
    pub nvlink_errors: Vec<Na<NvLinkErrorCounters>>,
    /// A display is connected.
    pub display_mode: Na<bool>,
    /// A display is initialised.
    pub display_active: Na<bool>,
    /// Persistence mode.
    pub persistence_mode: Na<bool>,
    /// Windows driver model, current and pending.
    pub driver_model: Na<CurrentPending<DriverModel>>,
    /// Performance state: 0 (P0) to 15; 32 is unknown.
    pub performance_state: Na<u32>,
    /// ECC mode, current and pending.
    pub ecc_mode: Na<CurrentPending<bool>>,
    /// ECC error counts.
    pub ecc_errors: EccErrors,
    /// ECC error counts per memory location.
    #[serde(default)]
    pub ecc_by_location: EccByLocation,
    /// Compute mode.
    pub compute_mode: Na<ComputeMode>,
    /// CUDA compute capability.
    pub cuda_compute_capability: Na<ComputeCapability>,
    /// MIG mode, current and pending.
    pub mig_mode: Na<CurrentPending<bool>>,
    /// Most MIG devices the GPU can hold.
    pub max_mig_device_count: Na<u32>,
    /// MIG slots in use (physical GPUs).
    pub mig_device_indices: Na<Vec<u32>>,
    /// GPU instance id (MIG devices; N/A on a physical GPU, see [`instance_id_answer`]).
    pub gpu_instance_id: Na<u32>,
    /// Compute instance id (MIG devices; N/A on a physical GPU, see [`instance_id_answer`]).
    pub compute_instance_id: Na<u32>,
    /// Applications clocks, MHz.
    #[serde(default)]
    pub applications_clocks: ClockInfos,
    /// Default applications clocks, MHz.
    #[serde(default)]
    pub default_applications_clocks: ClockInfos,
    /// Highest PCIe transfer rate, per lane, Mbps (MT/s): 32000 for PCIe 5.
    #[serde(default)]
    pub pcie_link_max_speed: Na<u32>,
    /// Number of CUDA cores.
    #[serde(default)]
    pub num_gpu_cores: Na<u32>,
    /// Board id (GPUs on one board share it).
    #[serde(default)]
    pub board_id: Na<u32>,
    /// Whether the board holds more than one GPU.
    #[serde(default)]
    pub multi_gpu_board: Na<bool>,
    /// Virtualization mode.
    #[serde(default)]
    pub virtualization_mode: Na<VirtualizationMode>,
    /// Accounting mode (per-process accounting statistics kept by the driver).
    #[serde(default)]
    pub accounting_mode: Na<bool>,
    /// GPU operation mode, current and pending.
    #[serde(default)]
    pub gpu_operation_mode: Na<CurrentPending<GpuOperationMode>>,
    /// Clock event (throttle) reasons, NVML's bit mask.
    pub clock_event_reasons: Na<u64>,
    /// The clock event reasons the device can report, NVML's bit mask.
    pub supported_clock_event_reasons: Na<u64>,
    /// PCIe replays since the driver loaded.
    pub pcie_replay_counter: Na<u32>,
    /// Addresses of the pages retired for multiple single-bit ECC errors.
    pub retired_pages_single_bit: Na<Vec<u64>>,
    /// Addresses of the pages retired for a double-bit ECC error.
    pub retired_pages_double_bit: Na<Vec<u64>>,
    /// Whether a page retirement waits for the next reset.
    pub retired_pages_pending: Na<bool>,
    /// Remapped memory rows.
    pub remapped_rows: Na<RemappedRows>,
    /// Memory temperature, °C.
    #[serde(default)]
    pub memory_temperature: Na<u32>,
    /// GPM activity since the previous refresh (Hopper and newer; N/A on a first refresh).
    #[serde(default)]
    pub gpm: Na<GpmMetrics>,
    /// What `nvidia-smi -q` and `--query-gpu` show beyond the everyday answers.
    #[serde(default)]
    pub details: DeviceDetails,
    /// Processes with a compute context.
    pub compute_processes: Na<Vec<ProcessInfo>>,
    /// Processes with a graphics context.
    pub graphics_processes: Na<Vec<ProcessInfo>>,
    /// Per-process utilization samples the driver held.
    pub process_utilization: Na<Vec<ProcessUtilizationSample>>,
    /// The events received since the backend started, oldest first.
    pub events: Na<Vec<GpuEvent>>,
    /// The fields whose value is missing because the backend failed unexpectedly (not the
    /// "cannot tell" answers, which are plain N/A).
    pub errors: Vec<FieldError>,
    /// Why each process list that could not be read was not (`compute_processes`,
    /// `graphics_processes`), with every error, including the "cannot tell" ones (no
    /// permission, not supported) that the lists hold as plain N/A: a process list that cannot
    /// be read is unknown, not empty, and callers say why (gpu-processes does).
    #[serde(default)]
    pub process_list_errors: Vec<FieldError>,
}

/// Turns answers into [`Na`]s, noting unexpected failures.
struct Collect {
    errors: Vec<FieldError>,
}

impl Collect {
    #[inline(always)]
    fn take<T>(&mut self, field: &'static str, a: Answer<T>) -> Na<T> {
        self.take_with(a, || field.to_string())
    }

    /// As `take`, naming the field only when it is needed (an unexpected failure).
    #[inline(always)]
    fn take_with<T>(&mut self, a: Answer<T>, field: impl FnOnce() -> String) -> Na<T> {
        let na = Na::from(a);
        if let Na::Failed(e) = &na {
            self.errors.push(FieldError {
                field: field(),
                error: e.clone(),
            });
        }
        na
    }

    fn clocks(&mut self, prefix: &'static str, c: PerClock<Answer<u32>>) -> ClockInfos {
        let PerClock {
            graphics,
            sm,
            memory,
            video,
        } = c;
        ClockInfos {
            graphics: self.take_with(graphics, || format!("{prefix}.graphics")),
            sm: self.take_with(sm, || format!("{prefix}.sm")),
            memory: self.take_with(memory, || format!("{prefix}.memory")),
            video: self.take_with(video, || format!("{prefix}.video")),
        }
    }

    /// A trimmed per-link list (see the fixture format) expanded to `n` links.
    fn links<T: Clone>(
        &mut self,
        field: &'static str,
        mut list: Vec<Answer<T>>,
        n: usize,
    ) -> Vec<Na<T>> {
        let fill = if list.len() < n {
            Some(
                list.last()
                    .cloned()
                    .unwrap_or(Answer::Err(BackendError::NotSupported)),
            )
        } else {
            list.truncate(n);
            None
        };
        // A plain map collects in place, reusing the list's allocation.
        let mut out: Vec<Na<T>> = list.into_iter().map(Na::from).collect();
        if let Some(a) = fill {
            out.resize_with(n, || Na::from(a.clone()));
        }
        self.note_failures(field, &out);
        out
    }

    /// One answer per fan, each noted as `field[i]` when it failed unexpectedly.
    fn list<T>(&mut self, field: &'static str, list: Vec<Answer<T>>) -> Vec<Na<T>> {
        let out: Vec<Na<T>> = list.into_iter().map(Na::from).collect();
        self.note_failures(field, &out);
        out
    }

    /// The four ECC error counts, as `ecc_errors.volatile_corrected`, ...
    fn ecc_errors(&mut self, counts: EccCounts) -> EccErrors {
        let EccCounts {
            volatile_corrected,
            volatile_uncorrected,
            aggregate_corrected,
            aggregate_uncorrected,
        } = counts;
        EccErrors {
            volatile_corrected: self.take("ecc_errors.volatile_corrected", volatile_corrected),
            volatile_uncorrected: self
                .take("ecc_errors.volatile_uncorrected", volatile_uncorrected),
            aggregate_corrected: self.take("ecc_errors.aggregate_corrected", aggregate_corrected),
            aggregate_uncorrected: self
                .take("ecc_errors.aggregate_uncorrected", aggregate_uncorrected),
        }
    }

    /// Notes the failures of a list's entries, as `field[i]`.
    fn note_failures<T>(&mut self, field: &'static str, list: &[Na<T>]) {
        for (i, v) in list.iter().enumerate() {
            if let Na::Failed(e) = v {
                self.errors.push(FieldError {
                    field: format!("{field}[{i}]"),
                    error: e.clone(),
                });
            }
        }
    }
}

/// Names every answer of a device (no `..`), so that a query added to the table does not
/// compile until [`DeviceSnapshot::from_answers`], just above, takes it into the snapshot.
#[inline(always)]
fn every_answer_has_a_place(st: &DeviceStatic, dy: &DeviceDynamic) {
    let DeviceStatic {
        name: _,
        uuid: _,
        serial: _,
        pci_info: _,
        minor_number: _,
        vbios_version: _,
        board_part_number: _,
        inforom_image_version: _,
        memory_bus_width: _,
        supported_clock_event_reasons: _,
        architecture: _,
        brand: _,
        max_clocks: _,
        num_fans: _,
        temperature_slowdown: _,
        temperature_shutdown: _,
        temperature_gpu_max: _,
        temperature_memory_max: _,
        power_management_mode: _,
        power_management_limit: _,
        power_management_default_limit: _,
        power_management_limit_constraints: _,
        enforced_power_limit: _,
        max_pcie_link_generation: _,
        max_pcie_link_width: _,
        nvlink_state: _,
        display_mode: _,
        display_active: _,
        persistence_mode: _,
        ecc_mode: _,
        compute_mode: _,
        cuda_compute_capability: _,
        driver_model: _,
        mig_mode: _,
        max_mig_device_count: _,
        mig_device_indices: _,
        gpu_instance_id: _,
        compute_instance_id: _,
        applications_clocks: _,
        default_applications_clocks: _,
        pcie_link_max_speed: _,
        num_gpu_cores: _,
        board_id: _,
        multi_gpu_board: _,
        virtualization_mode: _,
        accounting_mode: _,
        gpu_operation_mode: _,
        // DeviceDetails (snapshot/details.rs) takes these:
        temperature_target_min: _,
        temperature_target: _,
        temperature_target_max: _,
        addressing_mode: _,
        accounting_buffer_size: _,
        inforom_oem_version: _,
        inforom_ecc_version: _,
        inforom_power_version: _,
        inforom_valid: _,
        pdi: _,
        platform_info: _,
        c2c_mode: _,
        host_vgpu_mode: _,
        vgpu_heterogeneous_mode: _,
        vgpu_fractional_multi_vgpu: _,
        vgpu_heterogeneous_timeslice_profiles: _,
        vgpu_heterogeneous_timeslice_sizes: _,
        vgpu_homogeneous_placements: _,
        vgpu_mig_timeslicing_supported: _,
        vgpu_mig_timeslicing_enabled: _,
        gsp_firmware_version: _,
        gsp_firmware_mode: _,
        pci_class: _,
        gpu_max_pcie_link_generation: _,
        pcie_atomics_outbound: _,
        pcie_atomics_inbound: _,
        bridge_chips: _,
        max_customer_boost_clocks: _,
        auto_boosted_clocks: _,
        tlimit_shutdown: _,
        tlimit_slowdown: _,
        tlimit_gpu_max: _,
        tlimit_memory_max: _,
        module_power_limits: _,
        power_smoothing: _,
        dram_encryption_mode: _,
        capabilities: _,
        hostname: _,
        device_attributes: _,
    } = st;
    every_changing_answer_has_a_place(dy);
}

/// [`every_answer_has_a_place`] for the changing answers.
#[inline(always)]
fn every_changing_answer_has_a_place(dy: &DeviceDynamic) {
    let DeviceDynamic {
        memory_info: _,
        bar1_memory_info: _,
        utilization_rates: _,
        encoder_utilization: _,
        decoder_utilization: _,
        clocks: _,
        fan_speed: _,
        fan_speeds: _,
        fan_target_speeds: _,
        temperature: _,
        memory_temperature: _,
        power_usage: _,
        total_energy_consumption: _,
        performance_state: _,
        current_pcie_link_generation: _,
        current_pcie_link_width: _,
        pcie_tx_throughput: _,
        pcie_rx_throughput: _,
        nvlink_throughput: _,
        nvlink_error_counters: _,
        ecc_errors: _,
        ecc_l1_cache: _,
        ecc_l2_cache: _,
        ecc_device_memory: _,
        ecc_register_file: _,
        ecc_texture_memory: _,
        ecc_texture_shm: _,
        ecc_cbu: _,
        ecc_sram: _,
        clock_event_reasons: _,
        pcie_replay_counter: _,
        retired_pages_single_bit: _,
        retired_pages_double_bit: _,
        retired_pages_pending: _,
        remapped_rows: _,
        compute_processes: _,
        graphics_processes: _,
        process_utilization: _,
        gpm_metrics: _,
        events: _,
        // DeviceDetails (snapshot/details.rs) takes these:
        gpu_recovery_action: _,
        pcie_replay_rollover_counter: _,
        clock_event_time_sw_power_cap: _,
        clock_event_time_sync_boost: _,
        clock_event_time_sw_thermal_slowdown: _,
        clock_event_time_hw_thermal_slowdown: _,
        clock_event_time_hw_power_brake: _,
        jpeg_utilization: _,
        ofa_utilization: _,
        encoder_stats: _,
        fbc_stats: _,
        sram_ecc_status: _,
        repair_status: _,
        inactive_remapped_rows: _,
        row_remapper_histogram: _,
        margin_temperature: _,
        protected_memory: _,
        fabric_info: _,
        bbx_flush: _,
        power_average_gpu: _,
        power_average_module: _,
        power_average_memory: _,
        power_instant_gpu: _,
        power_instant_module: _,
        power_instant_memory: _,
    } = dy;
}

/// Why each process list that could not be read was not: every error, the "cannot tell" ones
/// included ([`DeviceSnapshot::process_list_errors`]).
fn process_list_errors(
    compute: &Answer<Vec<ProcessInfo>>,
    graphics: &Answer<Vec<ProcessInfo>>,
) -> Vec<FieldError> {
    [
        ("compute_processes", compute),
        ("graphics_processes", graphics),
    ]
    .into_iter()
    .filter_map(|(field, a)| match a {
        Answer::Err(e) => Some(FieldError {
            field: field.to_string(),
            error: e.clone(),
        }),
        Answer::Ok(_) => None,
    })
    .collect()
}

impl DeviceSnapshot {
    /// Whether any of the device's process lists was read, and the failures worth reporting:
    /// every failed list when none was read; when one was, the other's failure unless the
    /// device merely does not support that list (a MIG device has no graphics list). A list
    /// that failed is never an empty list: whoever shows [`DeviceSnapshot::processes`] shows
    /// these beside it.
    pub fn process_list_outcome(&self) -> (bool, Vec<FieldError>) {
        let read = self.compute_processes.is_value() || self.graphics_processes.is_value();
        let mut failed = self.process_list_errors.clone();
        // A snapshot that does not carry the reasons (one deserialised from an older form) still
        // has its unexpected failures in `errors`.
        for list in ["compute_processes", "graphics_processes"] {
            if let Some(e) = self.errors.iter().find(|e| e.field == list) {
                if !failed.iter().any(|f| f.field == list) {
                    failed.push(e.clone());
                }
            }
        }
        if read {
            failed.retain(|f| f.error != BackendError::NotSupported);
        } else if failed.is_empty() {
            // Both lists N/A, and the snapshot does not say why.
            failed.push(FieldError {
                field: "compute_processes".to_string(),
                error: BackendError::Other("not available, reason not recorded".into()),
            });
        }
        (read, failed)
    }

    /// The snapshot of device `id` from its static and changing answers, as the recorder
    /// captures them (`gpu_backend::recorder::capture_static` / `capture_dynamic`).
    #[inline]
    pub fn from_answers(
        id: DeviceId,
        mut st: DeviceStatic,
        mut dy: DeviceDynamic,
    ) -> DeviceSnapshot {
        every_answer_has_a_place(&st, &dy);
        // The details' failures are listed after the other answers'.
        let mut detail_errors = Collect { errors: Vec::new() };
        let details = details::take_details(&mut detail_errors, &mut st, &mut dy);
        let mut c = Collect { errors: Vec::new() };
        // NVLink lists hold links up to the last one that answers.
        let links = st
            .nvlink_state
            .iter()
            .rposition(|a| !a.is_err())
            .map_or(0, |i| i + 1);
        let process_utilization = match dy.process_utilization {
            // NVML's "not found" here means "no samples yet".
            Answer::Err(BackendError::NotFound) => Na::Value(Vec::new()),
            other => c.take("process_utilization", other),
        };
        let fan_speeds = c.list("fan_speeds", dy.fan_speeds);
        let fan_target_speeds = c.list("fan_target_speeds", dy.fan_target_speeds);
        let process_list_errors =
            process_list_errors(&dy.compute_processes, &dy.graphics_processes);
        // Each answer taken in the order of the fields, so that `errors` lists the failures
        // in that order.
        DeviceSnapshot {
            id,
            cuda_index: None,
            name: c.take("name", st.name),
            uuid: c.take("uuid", st.uuid),
            serial: c.take("serial", st.serial),
            pci: c.take("pci", st.pci_info),
            minor_number: c.take("minor_number", st.minor_number),
            vbios_version: c.take("vbios_version", st.vbios_version),
            board_part_number: c.take("board_part_number", st.board_part_number),
            inforom_image_version: c.take("inforom_image_version", st.inforom_image_version),
            memory_bus_width: c.take("memory_bus_width", st.memory_bus_width),
            architecture: c.take("architecture", st.architecture),
            brand: c.take("brand", st.brand),
            memory: c.take("memory", memory_answer(dy.memory_info.get()).into()),
            bar1_memory: c.take(
                "bar1_memory",
                bar1_memory_answer(dy.bar1_memory_info.get()).into(),
            ),
            utilization: c.take("utilization", dy.utilization_rates),
            encoder: c.take("encoder", dy.encoder_utilization),
            decoder: c.take("decoder", dy.decoder_utilization),
            clocks: c.clocks("clocks", dy.clocks),
            max_clocks: c.clocks("max_clocks", st.max_clocks),
            num_fans: c.take("num_fans", st.num_fans),
            fan_speed: c.take("fan_speed", dy.fan_speed),
            fan_speeds,
            fan_target_speeds,
            temperature: c.take("temperature", dy.temperature),
            memory_temperature: c.take("memory_temperature", dy.memory_temperature),
            temperature_slowdown: c.take("temperature_slowdown", st.temperature_slowdown),
            temperature_shutdown: c.take("temperature_shutdown", st.temperature_shutdown),
            temperature_gpu_max: c.take("temperature_gpu_max", st.temperature_gpu_max),
            temperature_memory_max: c.take("temperature_memory_max", st.temperature_memory_max),
            power_management_mode: c.take("power_management_mode", st.power_management_mode),
            power_usage: c.take("power_usage", dy.power_usage),
            power_limit: c.take("power_limit", st.power_management_limit),
            power_default_limit: c.take("power_default_limit", st.power_management_default_limit),
            enforced_power_limit: c.take("enforced_power_limit", st.enforced_power_limit),
            power_limit_constraints: c.take(
                "power_limit_constraints",
                st.power_management_limit_constraints,
            ),
            total_energy_consumption: c
                .take("total_energy_consumption", dy.total_energy_consumption),
            pcie_link_generation: c.take("pcie_link_generation", dy.current_pcie_link_generation),
            max_pcie_link_generation: c
                .take("max_pcie_link_generation", st.max_pcie_link_generation),
            pcie_link_width: c.take("pcie_link_width", dy.current_pcie_link_width),
            max_pcie_link_width: c.take("max_pcie_link_width", st.max_pcie_link_width),
            pcie_tx_throughput: c.take("pcie_tx_throughput", dy.pcie_tx_throughput),
            pcie_rx_throughput: c.take("pcie_rx_throughput", dy.pcie_rx_throughput),
            nvlink_state: c.links("nvlink_state", st.nvlink_state, links),
            nvlink_counters: c.links("nvlink_counters", dy.nvlink_throughput, links),
            nvlink_errors: c.links("nvlink_errors", dy.nvlink_error_counters, links),
            display_mode: c.take("display_mode", st.display_mode),
            display_active: c.take("display_active", st.display_active),
            persistence_mode: c.take("persistence_mode", st.persistence_mode),
            driver_model: c.take("driver_model", st.driver_model),
            performance_state: c.take("performance_state", dy.performance_state),
            ecc_mode: c.take("ecc_mode", st.ecc_mode),
            ecc_errors: c.ecc_errors(dy.ecc_errors),
            ecc_by_location: EccByLocation {
                l1_cache: c.take("ecc_by_location.l1_cache", dy.ecc_l1_cache),
                l2_cache: c.take("ecc_by_location.l2_cache", dy.ecc_l2_cache),
                device_memory: c.take("ecc_by_location.device_memory", dy.ecc_device_memory),
                register_file: c.take("ecc_by_location.register_file", dy.ecc_register_file),
                texture_memory: c.take("ecc_by_location.texture_memory", dy.ecc_texture_memory),
                texture_shm: c.take("ecc_by_location.texture_shm", dy.ecc_texture_shm),
                cbu: c.take("ecc_by_location.cbu", dy.ecc_cbu),
                sram: c.take("ecc_by_location.sram", dy.ecc_sram),
            },
            compute_mode: c.take("compute_mode", st.compute_mode),
            cuda_compute_capability: c.take("cuda_compute_capability", st.cuda_compute_capability),
            mig_mode: c.take("mig_mode", st.mig_mode),
            max_mig_device_count: c.take("max_mig_device_count", st.max_mig_device_count),
            mig_device_indices: c.take("mig_device_indices", st.mig_device_indices),
            gpu_instance_id: c.take(
                "gpu_instance_id",
                instance_id_answer(id, st.gpu_instance_id.get()).into(),
            ),
            compute_instance_id: c.take(
                "compute_instance_id",
                instance_id_answer(id, st.compute_instance_id.get()).into(),
            ),
            applications_clocks: c.clocks("applications_clocks", st.applications_clocks),
            default_applications_clocks: c.clocks(
                "default_applications_clocks",
                st.default_applications_clocks,
            ),
            pcie_link_max_speed: c.take("pcie_link_max_speed", st.pcie_link_max_speed),
            num_gpu_cores: c.take("num_gpu_cores", st.num_gpu_cores),
            board_id: c.take("board_id", st.board_id),
            multi_gpu_board: c.take("multi_gpu_board", st.multi_gpu_board),
            virtualization_mode: c.take("virtualization_mode", st.virtualization_mode),
            accounting_mode: c.take("accounting_mode", st.accounting_mode),
            gpu_operation_mode: c.take("gpu_operation_mode", st.gpu_operation_mode),
            clock_event_reasons: c.take("clock_event_reasons", dy.clock_event_reasons),
            supported_clock_event_reasons: c.take(
                "supported_clock_event_reasons",
                st.supported_clock_event_reasons,
            ),
            pcie_replay_counter: c.take("pcie_replay_counter", dy.pcie_replay_counter),
            retired_pages_single_bit: c
                .take("retired_pages_single_bit", dy.retired_pages_single_bit),
            retired_pages_double_bit: c
                .take("retired_pages_double_bit", dy.retired_pages_double_bit),
            retired_pages_pending: c.take("retired_pages_pending", dy.retired_pages_pending),
            remapped_rows: c.take("remapped_rows", dy.remapped_rows),
            gpm: c.take("gpm", dy.gpm_metrics),
            details,
            process_list_errors,
            compute_processes: c.take("compute_processes", dy.compute_processes),
            graphics_processes: c.take("graphics_processes", dy.graphics_processes),
            process_utilization,
            events: c.take("events", dy.events),
            errors: c.errors.into_iter().chain(detail_errors.errors).collect(),
        }
    }

    /// NVLink throughput per link, KiB/s, since an `earlier` snapshot of the same device taken
    /// `elapsed` before this one.
    pub fn nvlink_throughput_since(
        &self,
        earlier: &DeviceSnapshot,
        elapsed: Duration,
    ) -> Vec<ThroughputInfo> {
        nvlink_throughput_between(&earlier.nvlink_counters, &self.nvlink_counters, elapsed)
    }
}

/// Everything about the system and all its devices at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SystemSnapshot {
    /// Driver version.
    pub driver_version: Na<String>,
    /// NVML version.
    pub nvml_version: Na<String>,
    /// Highest CUDA version the driver supports, `"12.2"`.
    pub cuda_driver_version: Na<String>,
    /// Number of physical GPUs.
    pub device_count: Na<u32>,
    /// The backend's CUDA order (UUIDs), if it has one.
    pub cuda_device_order: Na<Vec<String>>,
    /// Whether the driver lets one virtual machine mix vGPU profiles of different types.
    #[serde(default)]
    pub vgpu_heterogeneous_multi_vgpu: Na<bool>,
    /// Every device: each physical GPU, then its MIG devices.
    pub devices: Vec<DeviceSnapshot>,
    /// System fields missing because the backend failed unexpectedly.
    pub system_errors: Vec<FieldError>,
}

impl SystemSnapshot {
    /// The snapshot of the recorder's full reading.
    pub fn from_recorder(raw: RawSnapshot) -> SystemSnapshot {
        let mut dynamics = raw.dynamics;
        let mut devices = Vec::with_capacity(raw.statics.len());
        for (id, st) in raw.statics {
            if let Some(dy) = dynamics.remove(&id) {
                devices.push(DeviceSnapshot::from_answers(id, st, dy));
            }
        }
        // Each GPU, then its MIG devices.
        devices.sort_by_key(|d| match d.id {
            DeviceId::Gpu(i) => (i, 0, 0),
            DeviceId::Mig { parent, index } => (parent, 1, index),
        });
        SystemSnapshot::from_parts(raw.system, devices)
    }

    /// The snapshot of the system answers and the devices' snapshots.
    pub fn from_parts(system: SystemAnswers, devices: Vec<DeviceSnapshot>) -> SystemSnapshot {
        let mut c = Collect { errors: Vec::new() };
        let s = system;
        let driver_version = c.take("driver_version", s.driver_version);
        let nvml_version = c.take("nvml_version", s.nvml_version);
        let cuda_driver_version = c
            .take("cuda_driver_version", s.cuda_driver_version)
            .map(cuda_version_text);
        let device_count = c.take("device_count", s.device_count);
        let cuda_device_order = c.take("cuda_device_order", s.cuda_device_order);
        let vgpu_heterogeneous_multi_vgpu = c.take(
            "vgpu_heterogeneous_multi_vgpu",
            s.vgpu_heterogeneous_multi_vgpu,
        );
        SystemSnapshot {
            driver_version,
            nvml_version,
            cuda_driver_version,
            device_count,
            cuda_device_order,
            vgpu_heterogeneous_multi_vgpu,
            devices,
            system_errors: c.errors,
        }
    }

    /// Every unexpected failure: the system's, then each device's, with the device.
    pub fn errors(&self) -> impl Iterator<Item = (Option<DeviceId>, &FieldError)> {
        self.system_errors.iter().map(|e| (None, e)).chain(
            self.devices
                .iter()
                .flat_map(|d| d.errors.iter().map(move |e| (Some(d.id), e))),
        )
    }

    /// The snapshot of one device.
    pub fn device(&self, id: DeviceId) -> Option<&DeviceSnapshot> {
        self.devices.iter().find(|d| d.id == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvlink_rates_come_from_two_readings() {
        let c = |tx, rx| {
            Na::Value(NvLinkCounters {
                tx_kib: tx,
                rx_kib: rx,
            })
        };
        let before = vec![c(1000, 2000), c(500, 500), Na::NotAvailable];
        let after = vec![c(3000, 2000), c(400, 900), c(1, 1)];
        let r = nvlink_throughput_between(&before, &after, Duration::from_secs(2));
        assert_eq!(r[0].tx, Na::Value(1000));
        assert_eq!(r[0].rx, Na::Value(0));
        assert_eq!(r[1].tx, Na::NotAvailable, "a counter that went back");
        assert_eq!(r[1].rx, Na::Value(200));
        assert_eq!(r[2], ThroughputInfo::default());
        let m = mean_throughput(&r);
        assert_eq!(m.tx, Na::Value(1000));
        assert_eq!(m.rx, Na::Value(100));
        assert!(
            nvlink_throughput_between(&before, &after, Duration::ZERO)[0]
                .tx
                .is_na()
        );
    }

    #[test]
    fn trimmed_link_lists_expand_and_note_failures() {
        let c = NvLinkCounters {
            tx_kib: 1,
            rx_kib: 2,
        };
        let mut col = Collect { errors: Vec::new() };
        let out = col.links(
            "nvlink_counters",
            vec![Answer::Ok(c), Answer::Err(BackendError::GpuLost)],
            4,
        );
        assert_eq!(out[0], Na::Value(c));
        assert!(out[1..]
            .iter()
            .all(|v| *v == Na::Failed(BackendError::GpuLost)));
        assert_eq!(
            col.errors
                .iter()
                .map(|e| e.field.as_str())
                .collect::<Vec<_>>(),
            [
                "nvlink_counters[1]",
                "nvlink_counters[2]",
                "nvlink_counters[3]"
            ]
        );
        let mut col = Collect { errors: Vec::new() };
        let out: Vec<Na<bool>> = col.links("nvlink_state", Vec::new(), 2);
        assert_eq!(out, [Na::NotAvailable, Na::NotAvailable]);
        assert!(col.errors.is_empty());
        let out = col.links("nvlink_state", vec![Answer::Ok(true); 5], 3);
        assert_eq!(out.len(), 3);
    }

    #[test]
    fn percents_and_status_texts() {
        assert_eq!(used_percent(1, 3), Na::Value(33.3));
        assert_eq!(used_percent(1, 0), Na::NotAvailable);
        assert_eq!(
            power_status_text(&Na::Value(681_194), &Na::Value(700_000)),
            "681W / 700W"
        );
        assert_eq!(
            power_status_text(&Na::NotAvailable, &Na::NotAvailable),
            "N/A / N/A"
        );
        assert_eq!(
            usage_text(&Na::Value(1024), &Na::NotAvailable),
            "1KiB / N/A"
        );
        assert_eq!(kib_rate_human(2790), "3MiB/s");
    }

    /// The process lists hold "cannot tell" answers as plain N/A, but a process list that
    /// cannot be read must say why: `process_list_errors` keeps every reason.
    #[test]
    fn process_list_errors_keep_the_reasons_plain_na_drops() {
        let st = DeviceStatic::all_failing(&BackendError::NotSupported);
        let mut dy = DeviceDynamic::all_failing(&BackendError::NotSupported);
        dy.compute_processes = Answer::Err(BackendError::NoPermission);
        dy.graphics_processes = Answer::Ok(Vec::new());
        let s = DeviceSnapshot::from_answers(DeviceId::Gpu(0), st, dy);
        assert_eq!(s.compute_processes, Na::NotAvailable);
        assert!(s.errors.iter().all(|e| e.field != "compute_processes"));
        assert_eq!(
            s.process_list_errors,
            [FieldError {
                field: "compute_processes".into(),
                error: BackendError::NoPermission
            }]
        );
    }

    #[test]
    fn processes_merge_by_pid() {
        let p = |pid, mem: Option<u64>| ProcessInfo {
            pid,
            used_gpu_memory: mem,
            gpu_instance_id: None,
            compute_instance_id: None,
        };
        let merged = merge_processes(
            &Na::Value(vec![p(2, Some(5)), p(1, None)]),
            &Na::Value(vec![p(2, None), p(3, Some(7))]),
        );
        let merged = merged.into_option().unwrap();
        assert_eq!(
            merged.iter().map(|p| (p.pid, p.kind)).collect::<Vec<_>>(),
            [
                (1, ProcessKind::Compute),
                (2, ProcessKind::ComputeGraphics),
                (3, ProcessKind::Graphics)
            ]
        );
        assert_eq!(merged[1].used_gpu_memory, Na::Value(5));
        assert_eq!(
            merge_processes(&Na::NotAvailable, &Na::Failed(BackendError::GpuLost)),
            Na::Failed(BackendError::GpuLost)
        );
        assert_eq!(
            merge_processes(&Na::NotAvailable, &Na::NotAvailable),
            Na::NotAvailable
        );
    }
}
