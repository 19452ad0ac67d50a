//! [`Device`]: a physical GPU or a MIG device, with every metric of nvitop's `Device`.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gpu_backend::{
    recorder, Architecture, Bar1MemoryInfo, Brand, ClockType, CodecUtilization, ComputeCapability,
    ComputeMode, CurrentPending, DeviceId, DriverModel, EccCounter, EccErrorKind, GpuBackend,
    MemoryInfo, NvLinkCounters, PciInfo, PcieDirection, PowerLimits, ProcessInfo,
    ProcessUtilizationSample, TemperatureThreshold, NVLINK_MAX_LINKS,
};

use crate::context::Context;
use crate::error::{Error, Result};
use crate::na::Na;
use crate::snapshot::{
    mean_throughput, merge_processes, nvlink_throughput_between, power_status_text, usage_text,
    used_percent, ClockInfos, ClockSpeedInfos, DeviceProcess, DeviceSnapshot, ThroughputInfo,
    UtilizationRates,
};
use crate::units::bytes2human;

/// Whether a device is a physical GPU or a MIG device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeviceKind {
    /// A physical GPU.
    Physical,
    /// A MIG device (a GPU instance's compute instance).
    Mig,
}

/// A physical GPU or a MIG device of a [`Context`]: nvitop's `PhysicalDevice` and `MigDevice`.
///
/// Cheap to clone (a context handle and a [`DeviceId`]). Each getter asks the backend when
/// called and answers an [`Na`]; [`Device::snapshot`] asks everything once. `Display` prints
/// the multi-section view of [`DeviceSnapshot`].
///
/// ```
/// let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/h100-sxm-8gpu.json");
/// let ctx = gpu_devices::Context::from_fixture(path)?;
/// let gpu = ctx.device(0)?;
/// assert_eq!(gpu.name().to_string(), "NVIDIA H100 80GB HBM3");
/// assert_eq!(gpu.memory_total_human().to_string(), "81559MiB");
/// assert_eq!(gpu.fan_speed().to_string(), "N/A"); // SXM boards have no fans
/// assert_eq!(gpu.performance_state().map(|p| format!("P{p}")).to_string(), "P0");
/// # Ok::<(), gpu_devices::Error>(())
/// ```
#[derive(Clone)]
pub struct Device {
    ctx: Context,
    id: DeviceId,
}

impl PartialEq for Device {
    fn eq(&self, other: &Device) -> bool {
        self.id == other.id && Arc::ptr_eq(&self.ctx.inner, &other.ctx.inner)
    }
}

impl Eq for Device {}

impl std::hash::Hash for Device {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.id.hash(state);
    }
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Device")
            .field("id", &self.id)
            .field("kind", &self.kind())
            .finish()
    }
}

/// The multi-section view of a fresh [`Device::snapshot`] (as igpu prints a device).
impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.snapshot().fmt(f)
    }
}

macro_rules! live {
    ($($(#[$doc:meta])* $name:ident -> $ty:ty = $call:ident;)*) => {$(
        $(#[$doc])*
        pub fn $name(&self) -> Na<$ty> {
            self.b().$call(self.id).into()
        }
    )*};
}

macro_rules! clocks {
    ($($(#[$doc:meta])* $name:ident = $call:ident($clock:expr);)*) => {$(
        $(#[$doc])*
        pub fn $name(&self) -> Na<u32> {
            self.b().$call(self.id, $clock).into()
        }
    )*};
}

impl Device {
    pub(crate) fn new(ctx: Context, id: DeviceId) -> Device {
        Device { ctx, id }
    }

    fn b(&self) -> &dyn GpuBackend {
        &*self.ctx.inner.backend
    }

    // ---- Identity ----

    /// The device's id: `Gpu(i)` or `Mig { parent, index }` (nvitop's `index` / `nvml_index`).
    pub fn id(&self) -> DeviceId {
        self.id
    }

    /// Physical or MIG.
    pub fn kind(&self) -> DeviceKind {
        if self.id.is_mig() {
            DeviceKind::Mig
        } else {
            DeviceKind::Physical
        }
    }

    /// True for a MIG device.
    pub fn is_mig_device(&self) -> bool {
        self.id.is_mig()
    }

    /// The index of the physical GPU this device is or lives on.
    pub fn physical_index(&self) -> u32 {
        self.id.physical_index()
    }

    /// The MIG index under the parent, for a MIG device.
    pub fn mig_index(&self) -> Option<u32> {
        match self.id {
            DeviceId::Mig { index, .. } => Some(index),
            DeviceId::Gpu(_) => None,
        }
    }

    /// The context the device belongs to.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The parent GPU of a MIG device.
    pub fn parent(&self) -> Option<Device> {
        match self.id {
            DeviceId::Mig { parent, .. } => Some(self.ctx.make(DeviceId::Gpu(parent))),
            DeviceId::Gpu(_) => None,
        }
    }

    /// The position of the device in CUDA's ordinals under the environment's
    /// `CUDA_VISIBLE_DEVICES` and `CUDA_DEVICE_ORDER`; `None` when CUDA does not show it.
    pub fn cuda_index(&self) -> Option<u32> {
        self.ctx
            .parse_cuda_visible_devices(crate::cuda::visible_devices_from_env().as_deref())
            .iter()
            .position(|&id| id == self.id)
            .map(|p| p as u32)
    }

    live! {
        /// Product name.
        name -> String = name;
        /// UUID: `GPU-...` or `MIG-...`.
        uuid -> String = uuid;
        /// Board serial number.
        serial -> String = serial;
        /// PCI identity.
        pci_info -> PciInfo = pci_info;
        /// Minor number of `/dev/nvidiaN`.
        minor_number -> u32 = minor_number;
        /// VBIOS version.
        vbios_version -> String = vbios_version;
        /// Board part number.
        board_part_number -> String = board_part_number;
        /// Architecture.
        architecture -> Architecture = architecture;
        /// Brand.
        brand -> Brand = brand;
    }

    /// PCI bus id, `00000000:18:00.0`.
    pub fn bus_id(&self) -> Na<String> {
        self.pci_info().map(|p| p.bus_id)
    }

    // ---- Memory ----

    live! {
        /// Frame-buffer memory, bytes.
        memory_info -> MemoryInfo = memory_info;
        /// BAR1 memory, bytes.
        bar1_memory_info -> Bar1MemoryInfo = bar1_memory_info;
    }

    /// Total memory, bytes.
    pub fn memory_total(&self) -> Na<u64> {
        self.memory_info().map(|m| m.total)
    }
    /// Used memory, bytes.
    pub fn memory_used(&self) -> Na<u64> {
        self.memory_info().map(|m| m.used)
    }
    /// Free memory, bytes.
    pub fn memory_free(&self) -> Na<u64> {
        self.memory_info().map(|m| m.free)
    }
    /// Memory reserved by the driver and firmware, bytes (N/A where only NVML's v1 memory
    /// call answers).
    pub fn memory_reserved(&self) -> Na<u64> {
        self.memory_info()
            .and_then(|m| m.reserved.map_or(Na::NotAvailable, Na::Value))
    }
    /// Total memory as text, `81559MiB`.
    pub fn memory_total_human(&self) -> Na<String> {
        self.memory_total().map(bytes2human)
    }
    /// Used memory as text.
    pub fn memory_used_human(&self) -> Na<String> {
        self.memory_used().map(bytes2human)
    }
    /// Free memory as text.
    pub fn memory_free_human(&self) -> Na<String> {
        self.memory_free().map(bytes2human)
    }
    /// Used over total memory, percent, one decimal.
    pub fn memory_percent(&self) -> Na<f64> {
        self.memory_info()
            .and_then(|m| used_percent(m.used, m.total))
    }
    /// `"<used> / <total>"` in human units (`N/A / N/A` when unknown).
    pub fn memory_usage(&self) -> String {
        let m = self.memory_info();
        usage_text(&m.clone().map(|m| m.used), &m.map(|m| m.total))
    }

    /// Total BAR1 memory, bytes.
    pub fn bar1_memory_total(&self) -> Na<u64> {
        self.bar1_memory_info().map(|m| m.total)
    }
    /// Used BAR1 memory, bytes.
    pub fn bar1_memory_used(&self) -> Na<u64> {
        self.bar1_memory_info().map(|m| m.used)
    }
    /// Free BAR1 memory, bytes.
    pub fn bar1_memory_free(&self) -> Na<u64> {
        self.bar1_memory_info().map(|m| m.free)
    }
    /// Total BAR1 memory as text.
    pub fn bar1_memory_total_human(&self) -> Na<String> {
        self.bar1_memory_total().map(bytes2human)
    }
    /// Used BAR1 memory as text.
    pub fn bar1_memory_used_human(&self) -> Na<String> {
        self.bar1_memory_used().map(bytes2human)
    }
    /// Free BAR1 memory as text.
    pub fn bar1_memory_free_human(&self) -> Na<String> {
        self.bar1_memory_free().map(bytes2human)
    }
    /// Used over total BAR1 memory, percent, one decimal.
    pub fn bar1_memory_percent(&self) -> Na<f64> {
        self.bar1_memory_info()
            .and_then(|m| used_percent(m.used, m.total))
    }
    /// `"<used> / <total>"` of BAR1.
    pub fn bar1_memory_usage(&self) -> String {
        let m = self.bar1_memory_info();
        usage_text(&m.clone().map(|m| m.used), &m.map(|m| m.total))
    }

    // ---- Utilization ----

    /// GPU, memory, encoder and decoder utilization, percent.
    pub fn utilization_rates(&self) -> UtilizationRates {
        let u: Na<_> = self.b().utilization_rates(self.id).into();
        UtilizationRates {
            gpu: u.clone().map(|u| u.gpu),
            memory: u.map(|u| u.memory),
            encoder: self.encoder_utilization(),
            decoder: self.decoder_utilization(),
        }
    }
    /// GPU utilization, percent.
    pub fn gpu_utilization(&self) -> Na<u32> {
        Na::from(self.b().utilization_rates(self.id)).map(|u| u.gpu)
    }
    /// GPU utilization, percent (nvitop's alias of [`Device::gpu_utilization`]).
    pub fn gpu_percent(&self) -> Na<u32> {
        self.gpu_utilization()
    }
    /// Memory (bandwidth) utilization, percent.
    pub fn memory_utilization(&self) -> Na<u32> {
        Na::from(self.b().utilization_rates(self.id)).map(|u| u.memory)
    }
    /// Encoder utilization, percent.
    pub fn encoder_utilization(&self) -> Na<u32> {
        self.encoder_utilization_info().map(|u| u.utilization)
    }
    /// Decoder utilization, percent.
    pub fn decoder_utilization(&self) -> Na<u32> {
        self.decoder_utilization_info().map(|u| u.utilization)
    }
    live! {
        /// Encoder utilization with its sampling period.
        encoder_utilization_info -> CodecUtilization = encoder_utilization;
        /// Decoder utilization with its sampling period.
        decoder_utilization_info -> CodecUtilization = decoder_utilization;
    }

    // ---- Clocks ----

    /// Current clocks, MHz (nvitop's `clock_infos` / `clocks`).
    pub fn clock_infos(&self) -> ClockInfos {
        ClockInfos {
            graphics: self.graphics_clock(),
            sm: self.sm_clock(),
            memory: self.memory_clock(),
            video: self.video_clock(),
        }
    }
    /// Maximum clocks, MHz (nvitop's `max_clock_infos` / `max_clocks`).
    pub fn max_clock_infos(&self) -> ClockInfos {
        ClockInfos {
            graphics: self.max_graphics_clock(),
            sm: self.max_sm_clock(),
            memory: self.max_memory_clock(),
            video: self.max_video_clock(),
        }
    }
    /// Current and maximum clocks.
    pub fn clock_speed_infos(&self) -> ClockSpeedInfos {
        ClockSpeedInfos {
            current: self.clock_infos(),
            max: self.max_clock_infos(),
        }
    }
    clocks! {
        /// Current graphics clock, MHz.
        graphics_clock = clock(ClockType::Graphics);
        /// Current SM clock, MHz.
        sm_clock = clock(ClockType::Sm);
        /// Current memory clock, MHz.
        memory_clock = clock(ClockType::Memory);
        /// Current video clock, MHz.
        video_clock = clock(ClockType::Video);
        /// Maximum graphics clock, MHz.
        max_graphics_clock = max_clock(ClockType::Graphics);
        /// Maximum SM clock, MHz.
        max_sm_clock = max_clock(ClockType::Sm);
        /// Maximum memory clock, MHz.
        max_memory_clock = max_clock(ClockType::Memory);
        /// Maximum video clock, MHz.
        max_video_clock = max_clock(ClockType::Video);
    }

    // ---- Fans, temperature, power ----

    live! {
        /// Intended fan speed, percent (may exceed 100).
        fan_speed -> u32 = fan_speed;
        /// Number of fans.
        num_fans -> u32 = num_fans;
        /// Core temperature, °C.
        temperature -> u32 = temperature;
        /// Power draw, mW.
        power_usage -> u32 = power_usage;
        /// Power-management (software) limit, mW.
        power_limit -> u32 = power_management_limit;
        /// Default power-management limit (the limit the board starts with), mW.
        power_default_limit -> u32 = power_management_default_limit;
        /// The power limit in force, mW.
        enforced_power_limit -> u32 = enforced_power_limit;
        /// Range the power limit may be set in, mW.
        power_limit_constraints -> PowerLimits = power_management_limit_constraints;
        /// Whether power management (and so power readings) is enabled.
        power_management_mode -> bool = power_management_mode;
        /// Energy since the driver loaded, mJ.
        total_energy_consumption -> u64 = total_energy_consumption;
    }

    /// Intended speed of each fan, percent.
    pub fn fan_speeds(&self) -> Vec<Na<u32>> {
        let n = self.num_fans().unwrap_or(0);
        (0..n)
            .map(|fan| self.b().fan_speed_of(self.id, fan).into())
            .collect()
    }
    /// Power draw, mW (nvitop's alias of [`Device::power_usage`]).
    pub fn power_draw(&self) -> Na<u32> {
        self.power_usage()
    }
    /// `"<usage>W / <limit>W"` (`N/A / N/A` when unknown).
    pub fn power_status(&self) -> String {
        power_status_text(&self.power_usage(), &self.power_limit())
    }
    /// Slowdown temperature threshold, °C.
    pub fn temperature_slowdown(&self) -> Na<u32> {
        self.b()
            .temperature_threshold(self.id, TemperatureThreshold::Slowdown)
            .into()
    }
    /// Shutdown temperature threshold, °C.
    pub fn temperature_shutdown(&self) -> Na<u32> {
        self.b()
            .temperature_threshold(self.id, TemperatureThreshold::Shutdown)
            .into()
    }

    // ---- PCIe ----

    /// PCIe throughput over the last 20 ms, KiB/s.
    pub fn pcie_throughput(&self) -> ThroughputInfo {
        ThroughputInfo {
            tx: self.pcie_tx_throughput(),
            rx: self.pcie_rx_throughput(),
        }
    }
    /// PCIe transmit throughput, KiB/s.
    pub fn pcie_tx_throughput(&self) -> Na<u64> {
        Na::from(self.b().pcie_throughput(self.id, PcieDirection::Tx)).map(u64::from)
    }
    /// PCIe receive throughput, KiB/s.
    pub fn pcie_rx_throughput(&self) -> Na<u64> {
        Na::from(self.b().pcie_throughput(self.id, PcieDirection::Rx)).map(u64::from)
    }
    /// PCIe transmit throughput as text, `3MiB/s`.
    pub fn pcie_tx_throughput_human(&self) -> Na<String> {
        self.pcie_tx_throughput()
            .map(crate::snapshot::kib_rate_human)
    }
    /// PCIe receive throughput as text.
    pub fn pcie_rx_throughput_human(&self) -> Na<String> {
        self.pcie_rx_throughput()
            .map(crate::snapshot::kib_rate_human)
    }
    live! {
        /// Current PCIe generation.
        pcie_link_generation -> u32 = current_pcie_link_generation;
        /// Highest PCIe generation.
        max_pcie_link_generation -> u32 = max_pcie_link_generation;
        /// Current PCIe width, lanes.
        pcie_link_width -> u32 = current_pcie_link_width;
        /// Widest PCIe link, lanes.
        max_pcie_link_width -> u32 = max_pcie_link_width;
    }

    // ---- NVLink ----

    /// Whether each NVLink is active, link 0 up to the last link that answers.
    pub fn nvlink_states(&self) -> Vec<Na<bool>> {
        let all: Vec<Na<bool>> = (0..NVLINK_MAX_LINKS)
            .map(|l| self.b().nvlink_state(self.id, l).into())
            .collect();
        let n = all.iter().rposition(Na::is_value).map_or(0, |i| i + 1);
        all.into_iter().take(n).collect()
    }
    /// The number of NVLinks that answer.
    pub fn nvlink_link_count(&self) -> u32 {
        self.nvlink_states().iter().filter(|s| s.is_value()).count() as u32
    }
    /// Cumulative data counters of each NVLink, KiB.
    pub fn nvlink_counters(&self) -> Vec<Na<NvLinkCounters>> {
        self.nvlink_counters_of(self.nvlink_states().len() as u32)
    }
    fn nvlink_counters_of(&self, links: u32) -> Vec<Na<NvLinkCounters>> {
        (0..links)
            .map(|l| self.b().nvlink_throughput(self.id, l).into())
            .collect()
    }
    /// NVLink throughput of each link over `interval`, KiB/s: reads the counters, sleeps
    /// `interval`, reads them again (nvitop's `nvlink_throughput(interval)`). See
    /// [`crate::snapshot::nvlink_throughput_between`] to compute rates from readings of your own.
    pub fn nvlink_throughput(&self, interval: Duration) -> Vec<ThroughputInfo> {
        let links = self.nvlink_states().len() as u32;
        let start = Instant::now();
        let before = self.nvlink_counters_of(links);
        std::thread::sleep(interval);
        let after = self.nvlink_counters_of(links);
        nvlink_throughput_between(&before, &after, start.elapsed())
    }
    /// The mean NVLink throughput over all links over `interval`, KiB/s.
    pub fn nvlink_mean_throughput(&self, interval: Duration) -> ThroughputInfo {
        mean_throughput(&self.nvlink_throughput(interval))
    }

    // ---- Modes and states ----

    live! {
        /// Whether a display is initialised (nvitop shows `Enabled`/`Disabled`).
        display_active -> bool = display_active;
        /// Whether a display is connected.
        display_mode -> bool = display_mode;
        /// Persistence mode.
        persistence_mode -> bool = persistence_mode;
        /// Windows driver model, current and pending (N/A on Linux).
        driver_model -> CurrentPending<DriverModel> = driver_model;
        /// Performance state: 0 (P0, most) to 15; 32 is unknown.
        performance_state -> u32 = performance_state;
        /// ECC mode, current and pending.
        ecc_mode -> CurrentPending<bool> = ecc_mode;
        /// Compute mode.
        compute_mode -> ComputeMode = compute_mode;
        /// CUDA compute capability.
        cuda_compute_capability -> ComputeCapability = cuda_compute_capability;
        /// MIG mode, current and pending.
        mig_mode -> CurrentPending<bool> = mig_mode;
        /// Clock event (throttle) reasons, NVML's bit mask.
        clock_event_reasons -> u64 = clock_event_reasons;
        /// GPU instance id of a MIG device.
        gpu_instance_id -> u32 = gpu_instance_id;
        /// Compute instance id of a MIG device.
        compute_instance_id -> u32 = compute_instance_id;
    }

    /// The driver model in use now.
    pub fn current_driver_model(&self) -> Na<DriverModel> {
        self.driver_model().map(|m| m.current)
    }
    /// An ECC error count.
    pub fn ecc_errors(&self, kind: EccErrorKind, counter: EccCounter) -> Na<u64> {
        self.b().ecc_errors(self.id, kind, counter).into()
    }
    /// Volatile uncorrected ECC errors.
    pub fn total_volatile_uncorrected_ecc_errors(&self) -> Na<u64> {
        self.ecc_errors(EccErrorKind::Uncorrected, EccCounter::Volatile)
    }

    // ---- MIG ----

    /// True when MIG mode is on now (false when off or unsupported).
    pub fn is_mig_mode_enabled(&self) -> bool {
        self.mig_mode().value().is_some_and(|m| m.current)
    }
    /// Most MIG devices the GPU can hold; 0 when MIG is unsupported.
    pub fn max_mig_device_count(&self) -> u32 {
        Na::from(self.b().max_mig_device_count(self.id)).unwrap_or(0)
    }
    /// The MIG devices of a physical GPU, asked now; empty when MIG is off or unsupported.
    pub fn mig_devices(&self) -> Vec<Device> {
        let DeviceId::Gpu(parent) = self.id else {
            return Vec::new();
        };
        self.b()
            .mig_device_indices(self.id)
            .unwrap_or_default()
            .into_iter()
            .map(|index| self.ctx.make(DeviceId::Mig { parent, index }))
            .collect()
    }
    /// The MIG device at `index` under this GPU.
    ///
    /// # Errors
    ///
    /// [`Error::NoSuchMigDevice`] when there is none (or this is a MIG device itself).
    pub fn mig_device(&self, index: u32) -> Result<Device> {
        let found = self
            .mig_devices()
            .into_iter()
            .find(|d| d.mig_index() == Some(index));
        found.ok_or_else(|| Error::NoSuchMigDevice {
            parent: self.physical_index(),
            index,
            available: self
                .mig_devices()
                .iter()
                .filter_map(Device::mig_index)
                .collect(),
        })
    }
    /// True for a MIG device or a GPU not in MIG mode: a device work runs on.
    pub fn is_leaf_device(&self) -> bool {
        self.is_mig_device() || !self.is_mig_mode_enabled()
    }
    /// The leaf devices of this device: itself if it is one, else its MIG devices.
    pub fn to_leaf_devices(&self) -> Vec<Device> {
        if self.is_leaf_device() {
            vec![self.clone()]
        } else {
            self.mig_devices()
        }
    }

    // ---- Processes ----

    live! {
        /// Processes with a compute context, as the driver lists them.
        compute_processes -> Vec<ProcessInfo> = compute_processes;
        /// Processes with a graphics context, as the driver lists them.
        graphics_processes -> Vec<ProcessInfo> = graphics_processes;
    }

    /// The processes on the device, compute and graphics merged by PID, ordered by PID.
    pub fn processes(&self) -> Na<Vec<DeviceProcess>> {
        merge_processes(&self.compute_processes(), &self.graphics_processes())
    }

    /// Per-process utilization samples newer than `since_us` (µs since the Unix epoch; 0 for
    /// all). NVML's "not found" (no samples) is an empty list.
    pub fn process_utilization(&self, since_us: u64) -> Na<Vec<ProcessUtilizationSample>> {
        match self.b().process_utilization(self.id, since_us) {
            Err(gpu_backend::BackendError::NotFound) => Na::Value(Vec::new()),
            other => other.into(),
        }
    }

    // ---- Snapshot ----

    /// Every metric at once, each backend query asked once (nvitop's `as_snapshot` and
    /// `oneshot`).
    pub fn snapshot(&self) -> DeviceSnapshot {
        let st = recorder::capture_static(self.b(), self.id);
        let dy = recorder::capture_dynamic(self.b(), self.id, &st.num_fans);
        DeviceSnapshot::from_answers(self.id, st, dy)
    }
}
