//! One model of a device: the accessors that a live [`Device`] and a [`DeviceSnapshot`] both
//! answer, declared once here.
//!
//! `fields!` declares each metric once, with how a live device reads it (asking the backend
//! now) and how a snapshot reads it (from the answers it took); `derived!` declares what is
//! computed from those (totals, percents, human text) once, for both. A `Device` getter and the
//! snapshot accessor of the same name therefore cannot drift apart, and a metric added here is
//! on both.

use gpu_backend::ClockEventReasons;
use gpu_backend::{
    Architecture, Bar1MemoryInfo, Brand, ClockType, CodecUtilization, ComputeCapability,
    ComputeMode, CurrentPending, DeviceId, DriverModel, EccCounter, EccErrorKind, EventKind,
    GpmMetrics, GpuEvent, MemoryInfo, MemoryLocation, NvLinkCounters, NvLinkErrorCounters, PciInfo,
    PcieDirection, PowerLimits, ProcessInfo, RemappedRows, RetirementCause, TemperatureThreshold,
    Utilization, NVLINK_MAX_LINKS,
};
use gpu_backend::{GpuOperationMode, VirtualizationMode};

use crate::device::Device;
use crate::na::Na;
use crate::snapshot::{
    merge_processes, power_status_text, usage_text, used_percent, ClockInfos, ClockSpeedInfos,
    DeviceProcess, DeviceSnapshot, EccByLocation, ThroughputInfo, UtilizationRates,
};
use crate::units::bytes2human;

/// Declares metrics both types answer: a plain row `getter -> T = query / field;` asks the
/// backend's `query` live and clones the snapshot's `field`.
macro_rules! fields {
    ($(
        $(#[doc = $doc:literal])*
        $getter:ident -> $ty:ty = $query:ident / $field:ident;
    )*) => {
        fields_with! {
            pairs: plain_field_pairs;
            $(
                $(#[doc = $doc])*
                $getter -> $ty {
                    live: |d| d.backend().$query(d.id()).into(),
                    snapshot: |s| s.$field.clone(),
                }
            )*
        }
    };
}

/// Declares metrics both types answer, each with its live and its snapshot body. With
/// `pairs: NAME;` first, it also writes the test helper `NAME` that reads every such metric
/// both ways.
macro_rules! fields_with {
    (pairs: $pairs:ident; $(
        $(#[doc = $doc:literal])*
        $getter:ident -> $ty:ty { live: |$d:ident| $live:expr, snapshot: |$s:ident| $snap:expr $(,)? }
    )*) => {
        fields_with! {$(
            $(#[doc = $doc])*
            $getter -> $ty { live: |$d| $live, snapshot: |$s| $snap }
        )*}

        /// Each field as (name, live answer, snapshot answer), for the test below.
        #[cfg(test)]
        fn $pairs(d: &Device, s: &DeviceSnapshot) -> Vec<(&'static str, String, String)> {
            vec![$((stringify!($getter), format!("{:?}", d.$getter()), format!("{:?}", s.$getter()))),*]
        }
    };
    ($(
        $(#[doc = $doc:literal])*
        $getter:ident -> $ty:ty { live: |$d:ident| $live:expr, snapshot: |$s:ident| $snap:expr $(,)? }
    )*) => {
        impl Device {
            $(
                $(#[doc = $doc])*
                pub fn $getter(&self) -> $ty {
                    let $d = self;
                    $live
                }
            )*
        }
        impl DeviceSnapshot {
            $(
                $(#[doc = $doc])*
                pub fn $getter(&self) -> $ty {
                    let $s = self;
                    $snap
                }
            )*
        }
    };
}

/// Declares what is computed from the fields, once, for both types: the same body serves a
/// live device and a snapshot, through the accessors they share.
macro_rules! derived {
    ($(
        $(#[doc = $doc:literal])*
        $name:ident -> $ty:ty = |$d:ident| $body:expr;
    )*) => {
        fields_with! {$(
            $(#[doc = $doc])*
            $name -> $ty { live: |$d| $body, snapshot: |$d| $body }
        )*}
    };
}

fields! {
    /// Product name.
    name -> Na<String> = name / name;
    /// UUID: `GPU-...` or `MIG-...`.
    uuid -> Na<String> = uuid / uuid;
    /// Board serial number.
    serial -> Na<String> = serial / serial;
    /// PCI identity.
    pci_info -> Na<PciInfo> = pci_info / pci;
    /// Minor number of `/dev/nvidiaN`.
    minor_number -> Na<u32> = minor_number / minor_number;
    /// VBIOS version.
    vbios_version -> Na<String> = vbios_version / vbios_version;
    /// Board part number.
    board_part_number -> Na<String> = board_part_number / board_part_number;
    /// Inforom image version.
    inforom_image_version -> Na<String> = inforom_image_version / inforom_image_version;
    /// Memory bus width, bits.
    memory_bus_width -> Na<u32> = memory_bus_width / memory_bus_width;
    /// The clock event reasons the device can report, NVML's bit mask.
    supported_clock_event_reasons -> Na<u64> =
        supported_clock_event_reasons / supported_clock_event_reasons;
    /// PCIe replays since the driver loaded.
    pcie_replay_counter -> Na<u32> = pcie_replay_counter / pcie_replay_counter;
    /// Whether a page retirement waits for the next reset.
    retired_pages_pending -> Na<bool> = retired_pages_pending / retired_pages_pending;
    /// Remapped memory rows.
    remapped_rows -> Na<RemappedRows> = remapped_rows / remapped_rows;
    /// Memory temperature, °C.
    memory_temperature -> Na<u32> = memory_temperature / memory_temperature;
    /// GPM activity since the previous refresh (Hopper and newer; N/A on a first refresh).
    gpm -> Na<GpmMetrics> = gpm_metrics / gpm;
    /// Architecture.
    architecture -> Na<Architecture> = architecture / architecture;
    /// Brand.
    brand -> Na<Brand> = brand / brand;
    /// GPU and memory utilization, percent.
    utilization_info -> Na<Utilization> = utilization_rates / utilization;
    /// Encoder utilization with its sampling period.
    encoder_utilization_info -> Na<CodecUtilization> = encoder_utilization / encoder;
    /// Decoder utilization with its sampling period.
    decoder_utilization_info -> Na<CodecUtilization> = decoder_utilization / decoder;
    /// Intended fan speed, percent (may exceed 100).
    fan_speed -> Na<u32> = fan_speed / fan_speed;
    /// Number of fans.
    num_fans -> Na<u32> = num_fans / num_fans;
    /// Core temperature, °C.
    temperature -> Na<u32> = temperature / temperature;
    /// Power draw, mW.
    power_usage -> Na<u32> = power_usage / power_usage;
    /// Power-management (software) limit, mW.
    power_limit -> Na<u32> = power_management_limit / power_limit;
    /// Default power-management limit (the limit the board starts with), mW.
    power_default_limit -> Na<u32> = power_management_default_limit / power_default_limit;
    /// The power limit in force, mW.
    enforced_power_limit -> Na<u32> = enforced_power_limit / enforced_power_limit;
    /// Range the power limit may be set in, mW.
    power_limit_constraints -> Na<PowerLimits> =
        power_management_limit_constraints / power_limit_constraints;
    /// Whether power management (and so power readings) is enabled.
    power_management_mode -> Na<bool> = power_management_mode / power_management_mode;
    /// Energy since the driver loaded, mJ.
    total_energy_consumption -> Na<u64> = total_energy_consumption / total_energy_consumption;
    /// Current PCIe generation.
    pcie_link_generation -> Na<u32> = current_pcie_link_generation / pcie_link_generation;
    /// Highest PCIe generation.
    max_pcie_link_generation -> Na<u32> = max_pcie_link_generation / max_pcie_link_generation;
    /// Current PCIe width, lanes.
    pcie_link_width -> Na<u32> = current_pcie_link_width / pcie_link_width;
    /// Widest PCIe link, lanes.
    max_pcie_link_width -> Na<u32> = max_pcie_link_width / max_pcie_link_width;
    /// Whether a display is initialised (nvitop shows `Enabled`/`Disabled`).
    display_active -> Na<bool> = display_active / display_active;
    /// Whether a display is connected.
    display_mode -> Na<bool> = display_mode / display_mode;
    /// Persistence mode.
    persistence_mode -> Na<bool> = persistence_mode / persistence_mode;
    /// Windows driver model, current and pending (N/A on Linux).
    driver_model -> Na<CurrentPending<DriverModel>> = driver_model / driver_model;
    /// Performance state: 0 (P0, most) to 15; 32 is unknown.
    performance_state -> Na<u32> = performance_state / performance_state;
    /// ECC mode, current and pending.
    ecc_mode -> Na<CurrentPending<bool>> = ecc_mode / ecc_mode;
    /// Compute mode.
    compute_mode -> Na<ComputeMode> = compute_mode / compute_mode;
    /// CUDA compute capability.
    cuda_compute_capability -> Na<ComputeCapability> =
        cuda_compute_capability / cuda_compute_capability;
    /// MIG mode, current and pending.
    mig_mode -> Na<CurrentPending<bool>> = mig_mode / mig_mode;
    /// Clock event (throttle) reasons, NVML's bit mask.
    clock_event_reasons -> Na<u64> = clock_event_reasons / clock_event_reasons;
    /// Highest PCIe transfer rate, per lane, Mbps (MT/s): 32000 for PCIe 5.
    pcie_link_max_speed -> Na<u32> = pcie_link_max_speed / pcie_link_max_speed;
    /// Number of CUDA cores.
    num_gpu_cores -> Na<u32> = num_gpu_cores / num_gpu_cores;
    /// Board id (GPUs on one board share it).
    board_id -> Na<u32> = board_id / board_id;
    /// Whether the board holds more than one GPU.
    multi_gpu_board -> Na<bool> = multi_gpu_board / multi_gpu_board;
    /// Virtualization mode (bare metal, pass-through, vGPU, ...).
    virtualization_mode -> Na<VirtualizationMode> = virtualization_mode / virtualization_mode;
    /// Accounting mode.
    accounting_mode -> Na<bool> = accounting_mode / accounting_mode;
    /// GPU operation mode, current and pending.
    gpu_operation_mode -> Na<CurrentPending<GpuOperationMode>> =
        gpu_operation_mode / gpu_operation_mode;
    /// Processes with a compute context, as the driver lists them.
    compute_processes -> Na<Vec<ProcessInfo>> = compute_processes / compute_processes;
    /// Processes with a graphics context, as the driver lists them.
    graphics_processes -> Na<Vec<ProcessInfo>> = graphics_processes / graphics_processes;
}

fields_with! {
    pairs: computed_field_pairs;
    /// GPU instance id of a MIG device; N/A on a physical GPU ([`crate::instance_id_answer`]).
    gpu_instance_id -> Na<u32> {
        live: |d| crate::instance_id_answer(d.id(), d.backend().gpu_instance_id(d.id())).into(),
        snapshot: |s| s.gpu_instance_id.clone(),
    }
    /// Compute instance id of a MIG device; N/A on a physical GPU
    /// ([`crate::instance_id_answer`]).
    compute_instance_id -> Na<u32> {
        live: |d| crate::instance_id_answer(d.id(), d.backend().compute_instance_id(d.id())).into(),
        snapshot: |s| s.compute_instance_id.clone(),
    }
    /// Frame-buffer memory, bytes; a failure when its parts do not fit in its total
    /// ([`crate::memory_answer`]).
    memory_info -> Na<MemoryInfo> {
        live: |d| crate::memory_answer(d.backend().memory_info(d.id())).into(),
        snapshot: |s| s.memory.clone(),
    }
    /// BAR1 memory, bytes; a failure when its parts do not fit in its total
    /// ([`crate::bar1_memory_answer`]).
    bar1_memory_info -> Na<Bar1MemoryInfo> {
        live: |d| crate::bar1_memory_answer(d.backend().bar1_memory_info(d.id())).into(),
        snapshot: |s| s.bar1_memory.clone(),
    }
    /// Current clocks, MHz (nvitop's `clock_infos` / `clocks`).
    clock_infos -> ClockInfos {
        live: |d| ClockInfos::from_fn(|c| d.backend().clock(d.id(), c).into()),
        snapshot: |s| s.clocks.clone(),
    }
    /// Maximum clocks, MHz (nvitop's `max_clock_infos` / `max_clocks`).
    max_clock_infos -> ClockInfos {
        live: |d| ClockInfos::from_fn(|c| d.backend().max_clock(d.id(), c).into()),
        snapshot: |s| s.max_clocks.clone(),
    }
    /// Applications clocks, MHz.
    applications_clock_infos -> ClockInfos {
        live: |d| ClockInfos::from_fn(|c| d.backend().applications_clock(d.id(), c).into()),
        snapshot: |s| s.applications_clocks.clone(),
    }
    /// Default applications clocks, MHz.
    default_applications_clock_infos -> ClockInfos {
        live: |d| {
            ClockInfos::from_fn(|c| d.backend().default_applications_clock(d.id(), c).into())
        },
        snapshot: |s| s.default_applications_clocks.clone(),
    }
    /// Intended speed of each fan, percent.
    fan_speeds -> Vec<Na<u32>> {
        live: |d| {
            let n = d.num_fans().unwrap_or(0);
            (0..n).map(|fan| d.backend().fan_speed_of(d.id(), fan).into()).collect()
        },
        snapshot: |s| s.fan_speeds.clone(),
    }
    /// The speed each fan is driven towards, percent.
    fan_target_speeds -> Vec<Na<u32>> {
        live: |d| {
            let n = d.num_fans().unwrap_or(0);
            (0..n).map(|fan| d.backend().fan_target_speed_of(d.id(), fan).into()).collect()
        },
        snapshot: |s| s.fan_target_speeds.clone(),
    }
    /// Slowdown temperature threshold, °C.
    temperature_slowdown -> Na<u32> {
        live: |d| d.backend().temperature_threshold(d.id(), TemperatureThreshold::Slowdown).into(),
        snapshot: |s| s.temperature_slowdown.clone(),
    }
    /// Shutdown temperature threshold, °C.
    temperature_shutdown -> Na<u32> {
        live: |d| d.backend().temperature_threshold(d.id(), TemperatureThreshold::Shutdown).into(),
        snapshot: |s| s.temperature_shutdown.clone(),
    }
    /// Highest GPU temperature the board is rated for, °C.
    temperature_gpu_max -> Na<u32> {
        live: |d| d.backend().temperature_threshold(d.id(), TemperatureThreshold::GpuMax).into(),
        snapshot: |s| s.temperature_gpu_max.clone(),
    }
    /// Highest memory temperature, °C.
    temperature_memory_max -> Na<u32> {
        live: |d| d.backend().temperature_threshold(d.id(), TemperatureThreshold::MemoryMax).into(),
        snapshot: |s| s.temperature_memory_max.clone(),
    }
    /// Addresses of the pages retired for multiple single-bit ECC errors.
    retired_pages_single_bit -> Na<Vec<u64>> {
        live: |d| d.backend().retired_pages(d.id(), RetirementCause::SingleBit).into(),
        snapshot: |s| s.retired_pages_single_bit.clone(),
    }
    /// Addresses of the pages retired for a double-bit ECC error.
    retired_pages_double_bit -> Na<Vec<u64>> {
        live: |d| d.backend().retired_pages(d.id(), RetirementCause::DoubleBit).into(),
        snapshot: |s| s.retired_pages_double_bit.clone(),
    }
    /// The events the backend received about the device since it started (for a replay: since
    /// the recording started), oldest first: XID errors, single- and double-bit ECC errors,
    /// clock and power-source changes.
    events -> Na<Vec<GpuEvent>> {
        live: |d| d.backend().events(d.id(), 0).into(),
        snapshot: |s| s.events.clone(),
    }
    /// PCIe transmit throughput, KiB/s.
    pcie_tx_throughput -> Na<u64> {
        live: |d| Na::from(d.backend().pcie_throughput(d.id(), PcieDirection::Tx)).map(u64::from),
        snapshot: |s| s.pcie_tx_throughput.clone().map(u64::from),
    }
    /// PCIe receive throughput, KiB/s.
    pcie_rx_throughput -> Na<u64> {
        live: |d| Na::from(d.backend().pcie_throughput(d.id(), PcieDirection::Rx)).map(u64::from),
        snapshot: |s| s.pcie_rx_throughput.clone().map(u64::from),
    }
    /// Whether each NVLink is active, link 0 up to the last link that answers.
    nvlink_states -> Vec<Na<bool>> {
        live: |d| {
            let all: Vec<Na<bool>> = (0..NVLINK_MAX_LINKS)
                .map(|l| d.backend().nvlink_state(d.id(), l).into())
                .collect();
            let n = all.iter().rposition(Na::is_value).map_or(0, |i| i + 1);
            all.into_iter().take(n).collect()
        },
        snapshot: |s| s.nvlink_state.clone(),
    }
    /// Cumulative data counters of each NVLink, KiB.
    nvlink_counters -> Vec<Na<NvLinkCounters>> {
        live: |d| {
            let links = d.nvlink_states().len() as u32;
            (0..links).map(|l| d.backend().nvlink_throughput(d.id(), l).into()).collect()
        },
        snapshot: |s| s.nvlink_counters.clone(),
    }
    /// Error counters of each NVLink.
    nvlink_errors -> Vec<Na<NvLinkErrorCounters>> {
        live: |d| {
            let links = d.nvlink_states().len() as u32;
            (0..links).map(|l| d.backend().nvlink_error_counters(d.id(), l).into()).collect()
        },
        snapshot: |s| s.nvlink_errors.clone(),
    }
    /// ECC error counts per memory location.
    ecc_by_location -> EccByLocation {
        live: |d| {
            let at = |l| Na::from(d.backend().memory_errors(d.id(), l));
            EccByLocation {
                l1_cache: at(MemoryLocation::L1Cache),
                l2_cache: at(MemoryLocation::L2Cache),
                device_memory: at(MemoryLocation::DeviceMemory),
                register_file: at(MemoryLocation::RegisterFile),
                texture_memory: at(MemoryLocation::TextureMemory),
                texture_shm: at(MemoryLocation::TextureShm),
                cbu: at(MemoryLocation::Cbu),
                sram: at(MemoryLocation::Sram),
            }
        },
        snapshot: |s| s.ecc_by_location.clone(),
    }
}

impl Device {
    /// An ECC error count.
    pub fn ecc_errors(&self, kind: EccErrorKind, counter: EccCounter) -> Na<u64> {
        self.backend().ecc_errors(self.id(), kind, counter).into()
    }
}

impl DeviceSnapshot {
    /// Why the device needs attention, empty when nothing does: a page retirement or row
    /// remap pending, a failed row remap, uncorrected ECC errors since the driver loaded,
    /// clocks held down by the hardware (HW slowdown, HW or SW thermal slowdown, HW power
    /// brake; named as [`ClockEventReasons::names`] names them), or an XID error since the
    /// backend started (`xid_79`, each code once, in the order they came). Values that are N/A
    /// raise nothing: with no event listener (an old driver, a fixture without events) an XID
    /// cannot be known.
    pub fn attention(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.retired_pages_pending.value() == Some(&true) {
            out.push("retired_page_pending".to_string());
        }
        if let Some(rows) = self.remapped_rows.value() {
            if rows.pending {
                out.push("row_remap_pending".to_string());
            }
            if rows.failure {
                out.push("row_remap_failure".to_string());
            }
        }
        let uncorrected = self.ecc_error(EccErrorKind::Uncorrected, EccCounter::Volatile);
        if uncorrected.value().is_some_and(|n| *n > 0) {
            out.push("uncorrected_ecc_errors".to_string());
        }
        if let Some(&mask) = self.clock_event_reasons.value() {
            let reasons = ClockEventReasons::from_bits_retain(mask);
            out.extend((reasons & ClockEventReasons::ATTENTION).names());
        }
        for code in self.xid_codes() {
            out.push(format!("xid_{code}"));
        }
        out
    }

    /// The codes of the XID errors among [`DeviceSnapshot::events`], each once, in the order
    /// they came; empty when there were none or events are N/A.
    pub fn xid_codes(&self) -> Vec<u64> {
        let mut codes: Vec<u64> = Vec::new();
        for e in self.events.value().into_iter().flatten() {
            if e.kind == EventKind::Xid && !codes.contains(&e.data) {
                codes.push(e.data);
            }
        }
        codes
    }

    /// The device: `"3"` for GPU 3, `"3:1"` for its MIG slot 1.
    pub fn id(&self) -> DeviceId {
        self.id
    }

    /// An ECC error count.
    pub fn ecc_error(&self, kind: EccErrorKind, counter: EccCounter) -> Na<u64> {
        let e = &self.ecc_errors;
        match (counter, kind) {
            (EccCounter::Volatile, EccErrorKind::Corrected) => e.volatile_corrected.clone(),
            (EccCounter::Volatile, EccErrorKind::Uncorrected) => e.volatile_uncorrected.clone(),
            (EccCounter::Aggregate, EccErrorKind::Corrected) => e.aggregate_corrected.clone(),
            (EccCounter::Aggregate, EccErrorKind::Uncorrected) => e.aggregate_uncorrected.clone(),
        }
    }
}

impl ClockInfos {
    /// One entry per clock domain.
    fn from_fn(mut f: impl FnMut(ClockType) -> Na<u32>) -> ClockInfos {
        ClockInfos {
            graphics: f(ClockType::Graphics),
            sm: f(ClockType::Sm),
            memory: f(ClockType::Memory),
            video: f(ClockType::Video),
        }
    }
}

derived! {
    /// True for a MIG device.
    is_mig_device -> bool = |d| d.id().is_mig();
    /// PCI bus id, `00000000:18:00.0`.
    bus_id -> Na<String> = |d| d.pci_info().map(|p| p.bus_id);
    /// Total memory, bytes.
    memory_total -> Na<u64> = |d| d.memory_info().map(|m| m.total);
    /// Used memory, bytes.
    memory_used -> Na<u64> = |d| d.memory_info().map(|m| m.used);
    /// Free memory, bytes.
    memory_free -> Na<u64> = |d| d.memory_info().map(|m| m.free);
    /// Memory reserved by the driver and firmware, bytes (N/A where only NVML's v1 memory
    /// call answers).
    memory_reserved -> Na<u64> =
        |d| d.memory_info().and_then(|m| m.reserved.map_or(Na::NotAvailable, Na::Value));
    /// Total memory as text, `81559MiB`.
    memory_total_human -> Na<String> = |d| d.memory_total().map(bytes2human);
    /// Used memory as text.
    memory_used_human -> Na<String> = |d| d.memory_used().map(bytes2human);
    /// Free memory as text.
    memory_free_human -> Na<String> = |d| d.memory_free().map(bytes2human);
    /// Used over total memory, percent, one decimal.
    memory_percent -> Na<f64> = |d| d.memory_info().and_then(|m| used_percent(m.used, m.total));
    /// `"<used> / <total>"` in human units (`N/A / N/A` when unknown).
    memory_usage -> String = |d| {
        let m = d.memory_info();
        usage_text(&m.clone().map(|m| m.used), &m.map(|m| m.total))
    };
    /// Total BAR1 memory, bytes.
    bar1_memory_total -> Na<u64> = |d| d.bar1_memory_info().map(|m| m.total);
    /// Used BAR1 memory, bytes.
    bar1_memory_used -> Na<u64> = |d| d.bar1_memory_info().map(|m| m.used);
    /// Free BAR1 memory, bytes.
    bar1_memory_free -> Na<u64> = |d| d.bar1_memory_info().map(|m| m.free);
    /// Total BAR1 memory as text.
    bar1_memory_total_human -> Na<String> = |d| d.bar1_memory_total().map(bytes2human);
    /// Used BAR1 memory as text.
    bar1_memory_used_human -> Na<String> = |d| d.bar1_memory_used().map(bytes2human);
    /// Free BAR1 memory as text.
    bar1_memory_free_human -> Na<String> = |d| d.bar1_memory_free().map(bytes2human);
    /// Used over total BAR1 memory, percent, one decimal.
    bar1_memory_percent -> Na<f64> =
        |d| d.bar1_memory_info().and_then(|m| used_percent(m.used, m.total));
    /// `"<used> / <total>"` of BAR1.
    bar1_memory_usage -> String = |d| {
        let m = d.bar1_memory_info();
        usage_text(&m.clone().map(|m| m.used), &m.map(|m| m.total))
    };
    /// GPU, memory, encoder and decoder utilization, percent.
    utilization_rates -> UtilizationRates = |d| {
        let u = d.utilization_info();
        UtilizationRates {
            gpu: u.clone().map(|u| u.gpu),
            memory: u.map(|u| u.memory),
            encoder: d.encoder_utilization(),
            decoder: d.decoder_utilization(),
        }
    };
    /// GPU utilization, percent.
    gpu_utilization -> Na<u32> = |d| d.utilization_info().map(|u| u.gpu);
    /// Memory (bandwidth) utilization, percent.
    memory_utilization -> Na<u32> = |d| d.utilization_info().map(|u| u.memory);
    /// Encoder utilization, percent.
    encoder_utilization -> Na<u32> = |d| d.encoder_utilization_info().map(|u| u.utilization);
    /// Decoder utilization, percent.
    decoder_utilization -> Na<u32> = |d| d.decoder_utilization_info().map(|u| u.utilization);
    /// Current and maximum clocks.
    clock_speed_infos -> ClockSpeedInfos = |d| ClockSpeedInfos {
        current: d.clock_infos(),
        max: d.max_clock_infos(),
    };
    /// igpu's memory view: MiB as floats with their unit (`memory_mib().total`,
    /// `.unit == "MiB"`), beside the bytes of [`Self::memory_total`] and the rest.
    memory_mib -> Na<crate::units::MemoryMib> = |d| d
        .memory_info()
        .map(|m| crate::units::MemoryMib::from_bytes(m.total, m.used, m.free));
    /// igpu's power view: watts as floats with their unit, beside the milliwatts of
    /// [`Self::power_usage`] and [`Self::power_limit`].
    power_watts -> crate::units::PowerWatts = |d| {
        let limits = d.power_limit_constraints();
        crate::units::PowerWatts {
            management: d.power_management_mode(),
            draw: crate::units::watts(d.power_usage()),
            limit: crate::units::watts(d.power_limit()),
            min_limit: crate::units::watts(limits.clone().map(|l| l.min_mw)),
            max_limit: crate::units::watts(limits.map(|l| l.max_mw)),
            unit: "W",
        }
    };
    /// `"<usage>W / <limit>W"` (`N/A / N/A` when unknown).
    power_status -> String = |d| power_status_text(&d.power_usage(), &d.power_limit());
    /// PCIe throughput over the last 20 ms, KiB/s.
    pcie_throughput -> ThroughputInfo = |d| ThroughputInfo {
        tx: d.pcie_tx_throughput(),
        rx: d.pcie_rx_throughput(),
    };
    /// PCIe transmit throughput as text, `3MiB/s`.
    pcie_tx_throughput_human -> Na<String> =
        |d| d.pcie_tx_throughput().map(crate::snapshot::kib_rate_human);
    /// PCIe receive throughput as text.
    pcie_rx_throughput_human -> Na<String> =
        |d| d.pcie_rx_throughput().map(crate::snapshot::kib_rate_human);
    /// The number of NVLinks that answer.
    nvlink_link_count -> u32 = |d| d.nvlink_states().iter().filter(|s| s.is_value()).count() as u32;
    /// The driver model in use now.
    current_driver_model -> Na<DriverModel> = |d| d.driver_model().map(|m| m.current);
    /// True when MIG mode is on now (false when off or unsupported).
    is_mig_mode_enabled -> bool = |d| d.mig_mode().value().is_some_and(|m| m.current);
    /// The processes on the device, compute and graphics merged by PID, ordered by PID.
    processes -> Na<Vec<DeviceProcess>> =
        |d| merge_processes(&d.compute_processes(), &d.graphics_processes());
}

/// Volatile uncorrected ECC errors, for both types (their ECC accessors take arguments).
impl Device {
    /// Volatile uncorrected ECC errors.
    pub fn total_volatile_uncorrected_ecc_errors(&self) -> Na<u64> {
        self.ecc_errors(EccErrorKind::Uncorrected, EccCounter::Volatile)
    }
}

impl DeviceSnapshot {
    /// Volatile uncorrected ECC errors.
    pub fn total_volatile_uncorrected_ecc_errors(&self) -> Na<u64> {
        self.ecc_error(EccErrorKind::Uncorrected, EccCounter::Volatile)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use gpu_backend::{Answer, BackendError, EccCounter, EccErrorKind, Fixture, ReplayBackend};

    use super::*;
    use crate::Context;

    /// The only thing written twice in this module is how each field is read (live, and from a
    /// snapshot's answers); this checks the two readings agree, field by field as declared,
    /// on every device of every fixture at three frames.
    #[test]
    fn every_declared_field_reads_the_same_live_and_from_a_snapshot() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures");
        let mut paths: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        paths.sort();
        assert!(
            paths.len() >= 6,
            "the scenario fixtures and the real recording"
        );
        for path in paths {
            let fixture = Fixture::load(&path).unwrap_or_else(|e| panic!("{e}"));
            let last = fixture.frames.len() - 1;
            let backend = Arc::new(ReplayBackend::new(fixture));
            let ctx = Context::from_backend(backend.clone()).unwrap();
            for frame in [0, last / 2, last] {
                backend.set_frame(frame);
                for d in ctx.all_devices() {
                    let s = d.snapshot();
                    let at = format!("{} frame {frame} device {}", path.display(), d.id());
                    let mut pairs = plain_field_pairs(&d, &s);
                    pairs.extend(computed_field_pairs(&d, &s));
                    for (name, live, snap) in pairs {
                        assert_eq!(live, snap, "{at}: {name}");
                    }
                    // The irregular ones, read by hand on a live device.
                    assert_eq!(d.process_utilization(0), s.process_utilization, "{at}");
                    let max_mig = s.max_mig_device_count.clone().unwrap_or(0);
                    assert_eq!(d.max_mig_device_count(), max_mig, "{at}");
                    let children: Vec<u32> = d
                        .mig_devices()
                        .iter()
                        .filter_map(Device::mig_index)
                        .collect();
                    let listed = s.mig_device_indices.clone().unwrap_or_default();
                    assert_eq!(children, listed, "{at}");
                    for kind in [EccErrorKind::Corrected, EccErrorKind::Uncorrected] {
                        for counter in [EccCounter::Volatile, EccCounter::Aggregate] {
                            assert_eq!(
                                d.ecc_errors(kind, counter),
                                s.ecc_error(kind, counter),
                                "{at}: ecc {kind:?} {counter:?}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// A recording whose GPU 0 said it used more memory than it has was shown as a value
    /// (`11032MiB / 5912MiB`) and chosen by `select`; it is a failure, live and in a snapshot.
    #[test]
    fn memory_used_more_than_total_is_a_failure_live_and_in_a_snapshot() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/old-driver.json"
        );
        let mut fixture = Fixture::load(path).unwrap_or_else(|e| panic!("{e}"));
        for frame in &mut fixture.frames {
            let dy = frame.devices.get_mut(&DeviceId::Gpu(0)).unwrap();
            let Answer::Ok(m) = &mut dy.memory_info else {
                panic!("GPU 0 answers its memory")
            };
            m.used = m.total + (5 << 30);
            m.free = 0;
        }
        let backend = Arc::new(ReplayBackend::new(fixture));
        let ctx = Context::from_backend(backend).unwrap();
        let d = &ctx.all_devices()[0];
        let s = d.snapshot();
        for (what, memory) in [("live", d.memory_info()), ("snapshot", s.memory_info())] {
            let Na::Failed(BackendError::Other(why)) = memory else {
                panic!("{what}: {memory:?}")
            };
            assert!(why.contains("used"), "{what}: {why}");
        }
        assert_eq!(s.memory_used(), d.memory_used());
        assert!(s.memory_free().is_na() && s.memory_total().is_na());
        assert_eq!(s.memory_usage(), "N/A / N/A");
        assert!(
            s.errors.iter().any(|e| e.field == "memory"),
            "{:?}",
            s.errors
        );
    }
}
