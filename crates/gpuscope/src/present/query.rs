//! `gpuscope snapshot --query FIELD,... --format csv[,noheader][,nounits]` and
//! `gpuscope smi --query-gpu=... / --query-compute-apps=...`: chosen fields of every physical
//! GPU (or of every compute process) as CSV, for scripts, with the field names, units and layout
//! that `nvidia-smi --query-gpu=... --format=csv` users already parse.
//!
//! One row per physical GPU (as `--query-gpu`: MIG devices are not rows). Each field's first
//! name is nvidia-smi's canonical one, which heads its column whichever name was asked
//! (`clocks.sm` is headed `clocks.current.sm [MHz]`, as nvidia-smi does). A value the GPU or
//! driver cannot give is `[N/A]`, a failed query `[GPU is lost]` or `[Unknown Error]`, as
//! nvidia-smi writes them. Text from the driver or a fixture has its control characters
//! escaped, and a value holding a comma or a double quote is quoted (RFC 4180), so a row always
//! splits into as many cells as the header.

use std::fmt::Write as _;

use gpu_backend::{BackendError, ComputeMode, DeviceId};
use gpu_devices::text::escape_control;
use gpu_devices::{DeviceSnapshot, Na};

use crate::error::UsageError;
use crate::present::json::SnapshotView;
use crate::present::value;

/// One GPU's row: the snapshot it belongs to and the device's answers.
pub struct Row<'a> {
    /// The whole snapshot (time, host, driver, device count).
    pub view: &'a SnapshotView,
    /// The GPU.
    pub dev: &'a DeviceSnapshot,
    /// How many GPUs the system has (`count`), those not shown included.
    pub count: usize,
}

/// One compute process's row (`--query-compute-apps`).
pub struct AppRow<'a> {
    /// The whole snapshot (time).
    pub view: &'a SnapshotView,
    /// The physical GPU the process runs on (its parent, for a process in a MIG device).
    pub gpu: &'a DeviceSnapshot,
    /// The process.
    pub process: &'a gpu_processes::GpuProcess,
}

/// One field: its names (nvidia-smi's canonical name first, then the other names it accepts),
/// its unit for the header and the cells, what it means, and how to read it off a row.
pub struct Field<F> {
    names: &'static [&'static str],
    unit: Option<&'static str>,
    help: &'static str,
    value: F,
}

#[cfg(test)]
impl<F> Field<F> {
    /// The field's canonical name (nvidia-smi's), which heads its column.
    pub(crate) fn canonical(&self) -> &'static str {
        self.names[0]
    }
}

/// `2026-11-01T10:00:00.000Z` as nvidia-smi's `2026/11/01 10:00:00.000`.
fn smi_time(rfc3339: &str) -> String {
    rfc3339
        .trim_end_matches('Z')
        .replacen('-', "/", 2)
        .replacen('T', " ", 1)
}

fn opt(v: &Option<String>) -> Na<String> {
    match v {
        Some(v) => Na::Value(v.clone()),
        None => Na::NotAvailable,
    }
}

fn text(v: &Na<String>) -> Na<String> {
    v.clone()
}

fn num<T: ToString + Clone>(v: &Na<T>) -> Na<String> {
    v.clone().map(|v| v.to_string())
}

/// `Enabled` or `Disabled`, as nvidia-smi writes a mode.
pub(crate) fn enabled(v: bool) -> String {
    if v { "Enabled" } else { "Disabled" }.to_string()
}

/// `Yes` or `No`.
pub(crate) fn yes_no(v: bool) -> String {
    if v { "Yes" } else { "No" }.to_string()
}

/// `display_mode` as nvidia-smi prints it: from driver 580 on, nvidia-smi prints `[Requested
/// functionality has been deprecated]` for it while NVML still answers Enabled (the captures
/// are in docs/smi.md); before, Enabled or Disabled.
fn display_mode(r: &Row) -> Na<String> {
    if display_mode_deprecated(r.view.driver_version.as_deref()) {
        Na::Value(format!("[{DISPLAY_MODE_DEPRECATED}]"))
    } else {
        mode(&r.dev.display_mode)
    }
}

/// What nvidia-smi 580 prints for the display mode.
pub(crate) const DISPLAY_MODE_DEPRECATED: &str = "Requested functionality has been deprecated";

/// Whether the driver `version` is 580 or later, where nvidia-smi prints the display mode as
/// deprecated.
pub(crate) fn display_mode_deprecated(version: Option<&str>) -> bool {
    version
        .and_then(|v| v.split('.').next())
        .and_then(|m| m.parse::<u32>().ok())
        .is_some_and(|m| m >= 580)
}

fn mode(v: &Na<bool>) -> Na<String> {
    v.clone().map(enabled)
}

fn yn(v: &Na<bool>) -> Na<String> {
    v.clone().map(yes_no)
}

/// Frame-buffer memory in MiB ([`value::fb_mib`], nvidia-smi's rule) of a value that may be
/// N/A, as text.
pub(crate) fn fb_mib(v: Na<u64>) -> Na<String> {
    v.map(|b| value::fb_mib(b).to_string())
}

/// Milliwatts as nvidia-smi's watts with two decimals (rounded, as C's `%.2f`).
pub(crate) fn watts(mw: u32) -> String {
    format!("{:.2}", f64::from(mw) / 1000.0)
}

fn w(v: &Na<u32>) -> Na<String> {
    v.clone().map(watts)
}

/// nvidia-smi's name for a compute mode.
pub(crate) fn compute_mode(m: ComputeMode) -> &'static str {
    match m {
        ComputeMode::Default => "Default",
        ComputeMode::ExclusiveThread => "Exclusive_Thread",
        ComputeMode::Prohibited => "Prohibited",
        ComputeMode::ExclusiveProcess => "Exclusive_Process",
    }
}

/// Whether clock event reason `bit` is active: `Active` or `Not Active`.
fn reason(d: &DeviceSnapshot, bit: u64) -> Na<String> {
    d.clock_event_reasons
        .clone()
        .map(|r| if r & bit != 0 { "Active" } else { "Not Active" }.to_string())
}

/// An ECC counter of one memory location.
fn ecc_at(
    v: &Na<gpu_backend::LocationEccCounts>,
    pick: fn(&gpu_backend::LocationEccCounts) -> Option<u64>,
) -> Na<String> {
    v.clone()
        .and_then(|c| pick(&c).map_or(Na::NotAvailable, |n| Na::Value(n.to_string())))
}

/// A clock-event counter, NVML's nanoseconds as nvidia-smi's whole microseconds.
fn micros(v: &Na<u64>) -> Na<String> {
    v.clone().map(|ns| (ns / 1000).to_string())
}

/// One count of the SRAM ECC detail.
fn sram(r: &Row, pick: fn(&gpu_backend::SramEccStatus) -> u64) -> Na<String> {
    r.dev
        .details
        .sram_ecc_status
        .clone()
        .map(|s| pick(&s).to_string())
}

/// One of the module's power limits, in watts.
fn module_limit(r: &Row, pick: fn(&gpu_backend::ScopedPowerLimits) -> Option<u32>) -> Na<String> {
    r.dev
        .details
        .module_power_limits
        .clone()
        .and_then(|l| pick(&l).map_or(Na::NotAvailable, |mw| Na::Value(watts(mw))))
}

/// One power-smoothing setting, as NVML answered it (watts, milliseconds or a multiplier).
fn smoothing(r: &Row, pick: fn(&gpu_backend::PowerSmoothing) -> Option<u64>) -> Na<String> {
    r.dev
        .details
        .power_smoothing
        .clone()
        .and_then(|s| pick(&s).map_or(Na::NotAvailable, |v| Na::Value(v.to_string())))
}

/// A part of the NVLink fabric's answer. Without a fabric (NVML's "not supported", or the
/// registration's state 0) nvidia-smi 580 writes `N/A` in these cells, not `[N/A]` (the
/// capture is in docs/smi.md); a part that has no value yet is `N/A` too.
fn fabric(r: &Row, part: fn(&gpu_backend::FabricInfo) -> Option<String>) -> Na<String> {
    match fabric_part(&r.dev.details.fabric_info, part) {
        Na::NotAvailable => Na::Value("N/A".to_string()),
        other => other,
    }
}

/// A part of the NVLink fabric's answer: N/A without a fabric (NVML's "not supported", or the
/// registration's state 0) or while the part has no value.
pub(crate) fn fabric_part(
    v: &Na<gpu_backend::FabricInfo>,
    part: fn(&gpu_backend::FabricInfo) -> Option<String>,
) -> Na<String> {
    match v {
        Na::Value(f) if f.state != 0 => part(f).map_or(Na::NotAvailable, Na::Value),
        Na::Value(_) | Na::NotAvailable => Na::NotAvailable,
        Na::Failed(e) => Na::Failed(e.clone()),
    }
}

/// A yes/no part of the fabric's health (`True`/`False`), by [`fabric_part`]'s rules.
pub(crate) fn fabric_health(
    v: &Na<gpu_backend::FabricInfo>,
    part: gpu_backend::FabricHealthPart,
) -> Na<String> {
    match v {
        Na::Value(f) if f.state != 0 => health(f, part).map_or(Na::NotAvailable, Na::Value),
        Na::Value(_) | Na::NotAvailable => Na::NotAvailable,
        Na::Failed(e) => Na::Failed(e.clone()),
    }
}

/// The fabric registration's state as nvidia-smi names it.
pub(crate) fn fabric_state(f: &gpu_backend::FabricInfo) -> Option<String> {
    Some(match f.state {
        1 => "Not Started".into(),
        2 => "In Progress".into(),
        3 => "Completed".into(),
        other => other.to_string(),
    })
}

/// The registration's outcome, once it completed: `Success`, else NVML's return code.
pub(crate) fn fabric_status(f: &gpu_backend::FabricInfo) -> Option<String> {
    (f.state == 3).then(|| match f.status {
        0 => "Success".to_string(),
        code => code.to_string(),
    })
}

/// The fabric's health summary.
pub(crate) fn health_summary(summary: u32) -> Option<String> {
    match summary {
        0 => None,
        1 => Some("Healthy".into()),
        2 => Some("Unhealthy".into()),
        3 => Some("Limited Capacity".into()),
        other => Some(other.to_string()),
    }
}

/// A yes/no part of the fabric's health: `True` or `False`.
fn health(f: &gpu_backend::FabricInfo, part: gpu_backend::FabricHealthPart) -> Option<String> {
    match part.get(f.health_mask) {
        1 => Some("True".into()),
        2 => Some("False".into()),
        _ => None,
    }
}

/// The fabric's configuration check: `None`, or NVML's reason number.
pub(crate) fn incorrect_configuration(f: &gpu_backend::FabricInfo) -> Option<String> {
    match gpu_backend::FabricHealthPart::IncorrectConfiguration.get(f.health_mask) {
        0 => None,
        1 => Some("None".into()),
        reason => Some(reason.to_string()),
    }
}

/// The platform's GUID as nvidia-smi writes it, `0x` and 16 hex digits: the first 8 bytes of
/// NVML's 16-byte Infiniband GUID (inferred, not seen in a capture: docs/smi.md).
fn fabric_guid(ib_guid: &str) -> String {
    format!(
        "0x{}",
        ib_guid.get(..16).unwrap_or(ib_guid).to_ascii_uppercase()
    )
}

macro_rules! field {
    ([$($name:literal),+], $unit:expr, $help:literal, $value:expr) => {
        Field { names: &[$($name),+], unit: $unit, help: $help, value: $value }
    };
}

/// Every GPU field, in the order `--query help` and `--help-query-gpu` list them (nvidia-smi's
/// order, then gpuscope's own).
pub const FIELDS: &[GpuField] = &[
    field!(["timestamp"], None, "when the sample was taken, as nvidia-smi writes it (YYYY/MM/DD HH:MM:SS.mmm), in UTC", |r| Na::Value(smi_time(&r.view.time))),
    field!(["driver_version"], None, "NVIDIA driver version", |r| opt(&r.view.driver_version)),
    field!(["vgpu_driver_capability.heterogenous_multivGPU"], None, "the driver lets vGPUs of different profiles share a GPU (not asked: always [N/A], docs/smi.md)", |_| Na::NotAvailable),
    field!(["count"], None, "number of GPUs in the system (whichever are shown)", |r| Na::Value(r.count.to_string())),
    field!(["name", "gpu_name"], None, "product name", |r| text(&r.dev.name)),
    field!(["serial", "gpu_serial"], None, "board serial number", |r| text(&r.dev.serial)),
    field!(["uuid", "gpu_uuid"], None, "UUID", |r| text(&r.dev.uuid)),
    field!(["pci.bus_id", "gpu_bus_id"], None, "PCI bus id, domain:bus:device.function", |r| r.dev.pci.clone().map(|p| p.bus_id)),
    field!(["pci.domain"], None, "PCI domain, hexadecimal", |r| r.dev.pci.clone().map(|p| format!("0x{:04X}", p.domain))),
    field!(["pci.bus"], None, "PCI bus, hexadecimal", |r| r.dev.pci.clone().map(|p| format!("0x{:02X}", p.bus))),
    field!(["pci.device"], None, "PCI device, hexadecimal", |r| r.dev.pci.clone().map(|p| format!("0x{:02X}", p.device))),
    field!(["pci.baseClass"], None, "PCI base class code, hexadecimal", |r| r.dev.details.pci_class.clone().map(|c| format!("0x{:X}", c.base_class))),
    field!(["pci.subClass"], None, "PCI sub class code, hexadecimal", |r| r.dev.details.pci_class.clone().map(|c| format!("0x{:X}", c.sub_class))),
    field!(["pci.device_id"], None, "PCI vendor and device id, hexadecimal", |r| r.dev.pci.clone().map(|p| format!("0x{:08X}", p.pci_device_id))),
    field!(["pci.sub_device_id"], None, "PCI subsystem id, hexadecimal", |r| r.dev.pci.clone().map(|p| format!("0x{:08X}", p.pci_subsystem_id))),
    field!(["vgpu_device_capability.fractional_multiVgpu"], None, "vGPU capability: fractional profiles in multi-vGPU configurations, as NVML answers it", |r| num(&r.dev.details.vgpu_fractional_multi_vgpu)),
    field!(["vgpu_device_capability.heterogeneous_timeSlice_profile"], None, "vGPU capability: timesliced profiles of differing types, as NVML answers it", |r| num(&r.dev.details.vgpu_heterogeneous_timeslice_profiles)),
    field!(["vgpu_device_capability.heterogeneous_timeSlice_sizes"], None, "vGPU capability: timesliced profiles of differing sizes, as NVML answers it", |r| num(&r.dev.details.vgpu_heterogeneous_timeslice_sizes)),
    field!(["vgpu_device_capability.homogeneous_placements"], None, "vGPU capability: placements of identical timesliced profiles, as NVML answers it", |r| num(&r.dev.details.vgpu_homogeneous_placements)),
    field!(["vgpu_device_capability.mig_timeSlicing"], None, "vGPU capability: timesliced vGPU on MIG supported, as NVML answers it", |r| num(&r.dev.details.vgpu_mig_timeslicing_supported)),
    field!(["vgpu_device_capability.mig_timeSlicing_mode"], None, "vGPU capability: timesliced vGPU on MIG enabled, as NVML answers it", |r| num(&r.dev.details.vgpu_mig_timeslicing_enabled)),
    field!(["pcie.link.gen.current"], None, "current PCIe link generation", |r| num(&r.dev.pcie_link_generation)),
    field!(["pcie.link.gen.gpucurrent"], None, "current PCIe link generation of the GPU", |r| num(&r.dev.pcie_link_generation)),
    field!(["pcie.link.gen.max"], None, "maximum PCIe link generation of the GPU and system", |r| num(&r.dev.max_pcie_link_generation)),
    field!(["pcie.link.gen.gpumax"], None, "highest PCIe generation the GPU supports", |r| num(&r.dev.details.gpu_max_pcie_link_generation)),
    field!(["pcie.link.gen.hostmax"], None, "highest PCIe generation of the host side (not asked: always [N/A], docs/smi.md)", |_| Na::NotAvailable),
    field!(["pcie.link.width.current"], None, "current PCIe link width (lanes)", |r| num(&r.dev.pcie_link_width)),
    field!(["pcie.link.width.max"], None, "maximum PCIe link width (lanes)", |r| num(&r.dev.max_pcie_link_width)),
    field!(["index"], None, "NVML index of the GPU", |r| Na::Value(r.dev.id.physical_index().to_string())),
    field!(["display_mode"], None, "a display is attached, Enabled or Disabled; from driver 580 on, deprecated as nvidia-smi says (display_attached tells)", |r| display_mode(r)),
    field!(["display_attached"], None, "a display is attached, Yes or No", |r| yn(&r.dev.display_mode)),
    field!(["display_active"], None, "a display is initialised, Enabled or Disabled", |r| mode(&r.dev.display_active)),
    field!(["persistence_mode"], None, "Enabled or Disabled", |r| mode(&r.dev.persistence_mode)),
    field!(["addressing_mode"], None, "how the GPU shares addresses with the CPU: None, HMM or ATS", |r| r.dev.details.addressing_mode.clone().map(|m| m.label())),
    field!(["accounting.mode"], None, "process accounting, Enabled or Disabled", |r| mode(&r.dev.accounting_mode)),
    field!(["accounting.buffer_size"], None, "how many processes' accounting statistics the driver keeps", |r| num(&r.dev.details.accounting_buffer_size)),
    field!(["driver_model.current"], None, "Windows driver model: WDDM, TCC or MCDM", |r| r.dev.driver_model.clone().map(|m| driver_model(m.current).to_string())),
    field!(["driver_model.pending"], None, "Windows driver model after the next reboot", |r| r.dev.driver_model.clone().map(|m| driver_model(m.pending).to_string())),
    field!(["vbios_version"], None, "VBIOS version", |r| text(&r.dev.vbios_version)),
    field!(["inforom.img", "inforom.image"], None, "InfoROM image version", |r| text(&r.dev.inforom_image_version)),
    field!(["inforom.oem"], None, "version of the inforom's OEM object", |r| text(&r.dev.details.inforom_oem_version)),
    field!(["inforom.ecc"], None, "version of the inforom's ECC object", |r| text(&r.dev.details.inforom_ecc_version)),
    field!(["inforom.pwr", "inforom.power"], None, "version of the inforom's power-management object", |r| text(&r.dev.details.inforom_power_version)),
    field!(["inforom.checksum_validation"], None, "the inforom's checksum: valid or invalid", |r| r.dev.details.inforom_valid.clone().map(|v| if v { "valid" } else { "invalid" }.to_string())),
    field!(["gpu_recovery_action"], None, "what should be done for the GPU to work again: None, Reset, Reboot, Drain P2P, Drain and Reset", |r| r.dev.details.gpu_recovery_action.clone().map(|a| a.label())),
    field!(["gom.current", "gpu_operation_mode.current"], None, "GPU operation mode", |r| r.dev.gpu_operation_mode.clone().map(|m| gom(m.current))),
    field!(["gom.pending", "gpu_operation_mode.pending"], None, "GPU operation mode after the next reboot", |r| r.dev.gpu_operation_mode.clone().map(|m| gom(m.pending))),
    field!(["fan.speed"], Some("%"), "intended fan speed", |r| num(&r.dev.fan_speed)),
    field!(["pstate"], None, "performance state, P0 to P15", |r| r.dev.performance_state.clone().and_then(|p| gpu_backend::PerformanceState::known(p).map_or(Na::NotAvailable, |p| Na::Value(p.to_string())))),
    field!(["clocks_event_reasons.supported", "clocks_throttle_reasons.supported"], None, "clock event reasons the GPU can report, a bit mask", |r| r.dev.supported_clock_event_reasons.clone().map(|m| format!("0x{m:016X}"))),
    field!(["clocks_event_reasons.active", "clocks_throttle_reasons.active"], None, "clock event reasons active now, a bit mask", |r| r.dev.clock_event_reasons.clone().map(|m| format!("0x{m:016X}"))),
    field!(["clocks_event_reasons.gpu_idle", "clocks_throttle_reasons.gpu_idle"], None, "nothing runs, clocks are low: Active or Not Active", |r| reason(r.dev, 0x1)),
    field!(["clocks_event_reasons.applications_clocks_setting", "clocks_throttle_reasons.applications_clocks_setting"], None, "clocks held by the applications clocks setting", |r| reason(r.dev, 0x2)),
    field!(["clocks_event_reasons.sw_power_cap", "clocks_throttle_reasons.sw_power_cap"], None, "clocks lowered by the software power cap", |r| reason(r.dev, 0x4)),
    field!(["clocks_event_reasons.hw_slowdown", "clocks_throttle_reasons.hw_slowdown"], None, "clocks lowered by hardware slowdown", |r| reason(r.dev, 0x8)),
    field!(["clocks_event_reasons.hw_thermal_slowdown", "clocks_throttle_reasons.hw_thermal_slowdown"], None, "clocks lowered by hardware thermal slowdown", |r| reason(r.dev, 0x40)),
    field!(["clocks_event_reasons.hw_power_brake_slowdown", "clocks_throttle_reasons.hw_power_brake_slowdown"], None, "clocks lowered by the external power brake", |r| reason(r.dev, 0x80)),
    field!(["clocks_event_reasons.sw_thermal_slowdown", "clocks_throttle_reasons.sw_thermal_slowdown"], None, "clocks lowered by software thermal slowdown", |r| reason(r.dev, 0x20)),
    field!(["clocks_event_reasons.sync_boost", "clocks_throttle_reasons.sync_boost"], None, "clocks lowered by sync boost", |r| reason(r.dev, 0x10)),
    field!(["clocks_event_reasons_counters.sw_power_cap"], Some("us"), "time held under the software power cap since the driver loaded", |r| micros(&r.dev.details.clock_event_time_sw_power_cap)),
    field!(["clocks_event_reasons_counters.sync_boost"], Some("us"), "time held to the sync-boost group's clock since the driver loaded", |r| micros(&r.dev.details.clock_event_time_sync_boost)),
    field!(["clocks_event_reasons_counters.sw_thermal_slowdown"], Some("us"), "time held down by the driver for temperature since the driver loaded", |r| micros(&r.dev.details.clock_event_time_sw_thermal_slowdown)),
    field!(["clocks_event_reasons_counters.hw_thermal_slowdown"], Some("us"), "time held down by the hardware for temperature since the driver loaded", |r| micros(&r.dev.details.clock_event_time_hw_thermal_slowdown)),
    field!(["clocks_event_reasons_counters.hw_power_brake_slowdown"], Some("us"), "time held down by the power brake since the driver loaded", |r| micros(&r.dev.details.clock_event_time_hw_power_brake)),
    field!(["memory.total"], Some("MiB"), "frame-buffer memory in all", |r| fb_mib(r.dev.memory.clone().map(|m| m.total))),
    field!(["memory.reserved"], Some("MiB"), "memory reserved by the driver and firmware", |r| fb_mib(r.dev.memory.clone().and_then(|m| m.reserved.map_or(Na::NotAvailable, Na::Value)))),
    field!(["memory.used"], Some("MiB"), "memory in use", |r| fb_mib(r.dev.memory.clone().map(|m| m.used))),
    field!(["memory.free"], Some("MiB"), "memory free", |r| fb_mib(r.dev.memory.clone().map(|m| m.free))),
    field!(["compute_mode"], None, "Default, Exclusive_Thread, Prohibited or Exclusive_Process", |r| r.dev.compute_mode.clone().map(|m| compute_mode(m).to_string())),
    field!(["compute_cap"], None, "CUDA compute capability, major.minor", |r| r.dev.cuda_compute_capability.clone().map(|c| format!("{}.{}", c.major, c.minor))),
    field!(["utilization.gpu"], Some("%"), "share of time a kernel ran, over the driver's last sample period", |r| num(&r.dev.utilization.clone().map(|u| u.gpu))),
    field!(["utilization.memory"], Some("%"), "share of time memory was read or written (memory bandwidth, not memory used)", |r| num(&r.dev.utilization.clone().map(|u| u.memory))),
    field!(["utilization.encoder"], Some("%"), "video encoder utilization", |r| num(&r.dev.encoder.clone().map(|c| c.utilization))),
    field!(["utilization.decoder"], Some("%"), "video decoder utilization", |r| num(&r.dev.decoder.clone().map(|c| c.utilization))),
    field!(["utilization.jpeg"], Some("%"), "JPEG decoder utilization", |r| num(&r.dev.details.jpeg_utilization.clone().map(|u| u.utilization))),
    field!(["utilization.ofa"], Some("%"), "optical-flow accelerator utilization", |r| num(&r.dev.details.ofa_utilization.clone().map(|u| u.utilization))),
    field!(["encoder.stats.sessionCount"], None, "encoder sessions running", |r| num(&r.dev.details.encoder_stats.clone().map(|s| s.sessions))),
    field!(["encoder.stats.averageFps"], None, "encoder frames a second, averaged over the sessions", |r| num(&r.dev.details.encoder_stats.clone().map(|s| s.average_fps))),
    field!(["encoder.stats.averageLatency"], None, "encoder latency, microseconds, averaged over the sessions", |r| num(&r.dev.details.encoder_stats.clone().map(|s| s.average_latency_us))),
    field!(["dramEncryption.mode.current"], None, "DRAM encryption now, Enabled or Disabled", |r| r.dev.details.dram_encryption_mode.clone().map(|m| enabled(m.current))),
    field!(["dramEncryption.mode.pending"], None, "DRAM encryption after the next reboot", |r| r.dev.details.dram_encryption_mode.clone().map(|m| enabled(m.pending))),
    field!(["ecc.mode.current"], None, "current ECC mode, Enabled or Disabled", |r| r.dev.ecc_mode.clone().map(|m| enabled(m.current))),
    field!(["ecc.mode.pending"], None, "ECC mode after the next reboot", |r| r.dev.ecc_mode.clone().map(|m| enabled(m.pending))),
    field!(["ecc.errors.corrected.volatile.device_memory"], None, "corrected ECC errors in device memory since the driver loaded", |r| ecc_at(&r.dev.ecc_by_location.device_memory, |c| c.volatile_corrected)),
    field!(["ecc.errors.corrected.volatile.dram"], None, "corrected ECC errors in DRAM since the driver loaded", |r| ecc_at(&r.dev.ecc_by_location.device_memory, |c| c.volatile_corrected)),
    field!(["ecc.errors.corrected.volatile.register_file"], None, "corrected ECC errors in the register file since the driver loaded", |r| ecc_at(&r.dev.ecc_by_location.register_file, |c| c.volatile_corrected)),
    field!(["ecc.errors.corrected.volatile.l1_cache"], None, "corrected ECC errors in L1 since the driver loaded", |r| ecc_at(&r.dev.ecc_by_location.l1_cache, |c| c.volatile_corrected)),
    field!(["ecc.errors.corrected.volatile.l2_cache"], None, "corrected ECC errors in L2 since the driver loaded", |r| ecc_at(&r.dev.ecc_by_location.l2_cache, |c| c.volatile_corrected)),
    field!(["ecc.errors.corrected.volatile.texture_memory"], None, "corrected ECC errors in texture memory since the driver loaded", |r| ecc_at(&r.dev.ecc_by_location.texture_memory, |c| c.volatile_corrected)),
    field!(["ecc.errors.corrected.volatile.cbu"], None, "corrected ECC errors in the CBU since the driver loaded", |r| ecc_at(&r.dev.ecc_by_location.cbu, |c| c.volatile_corrected)),
    field!(["ecc.errors.corrected.volatile.sram"], None, "corrected ECC errors in SRAM since the driver loaded", |r| ecc_at(&r.dev.ecc_by_location.sram, |c| c.volatile_corrected)),
    field!(["ecc.errors.corrected.volatile.total"], None, "corrected ECC errors since the driver loaded", |r| num(&r.dev.ecc_errors.volatile_corrected)),
    field!(["ecc.errors.corrected.aggregate.device_memory"], None, "corrected ECC errors in device memory over the GPU's life", |r| ecc_at(&r.dev.ecc_by_location.device_memory, |c| c.aggregate_corrected)),
    field!(["ecc.errors.corrected.aggregate.dram"], None, "corrected ECC errors in DRAM over the GPU's life", |r| ecc_at(&r.dev.ecc_by_location.device_memory, |c| c.aggregate_corrected)),
    field!(["ecc.errors.corrected.aggregate.register_file"], None, "corrected ECC errors in the register file over the GPU's life", |r| ecc_at(&r.dev.ecc_by_location.register_file, |c| c.aggregate_corrected)),
    field!(["ecc.errors.corrected.aggregate.l1_cache"], None, "corrected ECC errors in L1 over the GPU's life", |r| ecc_at(&r.dev.ecc_by_location.l1_cache, |c| c.aggregate_corrected)),
    field!(["ecc.errors.corrected.aggregate.l2_cache"], None, "corrected ECC errors in L2 over the GPU's life", |r| ecc_at(&r.dev.ecc_by_location.l2_cache, |c| c.aggregate_corrected)),
    field!(["ecc.errors.corrected.aggregate.texture_memory"], None, "corrected ECC errors in texture memory over the GPU's life", |r| ecc_at(&r.dev.ecc_by_location.texture_memory, |c| c.aggregate_corrected)),
    field!(["ecc.errors.corrected.aggregate.cbu"], None, "corrected ECC errors in the CBU over the GPU's life", |r| ecc_at(&r.dev.ecc_by_location.cbu, |c| c.aggregate_corrected)),
    field!(["ecc.errors.corrected.aggregate.sram"], None, "corrected ECC errors in SRAM over the GPU's life", |r| ecc_at(&r.dev.ecc_by_location.sram, |c| c.aggregate_corrected)),
    field!(["ecc.errors.corrected.aggregate.total"], None, "corrected ECC errors over the GPU's life", |r| num(&r.dev.ecc_errors.aggregate_corrected)),
    field!(["ecc.errors.uncorrected.volatile.device_memory"], None, "uncorrected ECC errors in device memory since the driver loaded", |r| ecc_at(&r.dev.ecc_by_location.device_memory, |c| c.volatile_uncorrected)),
    field!(["ecc.errors.uncorrected.volatile.dram"], None, "uncorrected ECC errors in DRAM since the driver loaded", |r| ecc_at(&r.dev.ecc_by_location.device_memory, |c| c.volatile_uncorrected)),
    field!(["ecc.errors.uncorrected.volatile.register_file"], None, "uncorrected ECC errors in the register file since the driver loaded", |r| ecc_at(&r.dev.ecc_by_location.register_file, |c| c.volatile_uncorrected)),
    field!(["ecc.errors.uncorrected.volatile.l1_cache"], None, "uncorrected ECC errors in L1 since the driver loaded", |r| ecc_at(&r.dev.ecc_by_location.l1_cache, |c| c.volatile_uncorrected)),
    field!(["ecc.errors.uncorrected.volatile.l2_cache"], None, "uncorrected ECC errors in L2 since the driver loaded", |r| ecc_at(&r.dev.ecc_by_location.l2_cache, |c| c.volatile_uncorrected)),
    field!(["ecc.errors.uncorrected.volatile.texture_memory"], None, "uncorrected ECC errors in texture memory since the driver loaded", |r| ecc_at(&r.dev.ecc_by_location.texture_memory, |c| c.volatile_uncorrected)),
    field!(["ecc.errors.uncorrected.volatile.cbu"], None, "uncorrected ECC errors in the CBU since the driver loaded", |r| ecc_at(&r.dev.ecc_by_location.cbu, |c| c.volatile_uncorrected)),
    field!(["ecc.errors.uncorrected.volatile.sram"], None, "uncorrected ECC errors in SRAM since the driver loaded", |r| ecc_at(&r.dev.ecc_by_location.sram, |c| c.volatile_uncorrected)),
    field!(["ecc.errors.uncorrected.volatile.total"], None, "uncorrected ECC errors since the driver loaded", |r| num(&r.dev.ecc_errors.volatile_uncorrected)),
    field!(["ecc.errors.uncorrected.aggregate.device_memory"], None, "uncorrected ECC errors in device memory over the GPU's life", |r| ecc_at(&r.dev.ecc_by_location.device_memory, |c| c.aggregate_uncorrected)),
    field!(["ecc.errors.uncorrected.aggregate.dram"], None, "uncorrected ECC errors in DRAM over the GPU's life", |r| ecc_at(&r.dev.ecc_by_location.device_memory, |c| c.aggregate_uncorrected)),
    field!(["ecc.errors.uncorrected.aggregate.register_file"], None, "uncorrected ECC errors in the register file over the GPU's life", |r| ecc_at(&r.dev.ecc_by_location.register_file, |c| c.aggregate_uncorrected)),
    field!(["ecc.errors.uncorrected.aggregate.l1_cache"], None, "uncorrected ECC errors in L1 over the GPU's life", |r| ecc_at(&r.dev.ecc_by_location.l1_cache, |c| c.aggregate_uncorrected)),
    field!(["ecc.errors.uncorrected.aggregate.l2_cache"], None, "uncorrected ECC errors in L2 over the GPU's life", |r| ecc_at(&r.dev.ecc_by_location.l2_cache, |c| c.aggregate_uncorrected)),
    field!(["ecc.errors.uncorrected.aggregate.texture_memory"], None, "uncorrected ECC errors in texture memory over the GPU's life", |r| ecc_at(&r.dev.ecc_by_location.texture_memory, |c| c.aggregate_uncorrected)),
    field!(["ecc.errors.uncorrected.aggregate.cbu"], None, "uncorrected ECC errors in the CBU over the GPU's life", |r| ecc_at(&r.dev.ecc_by_location.cbu, |c| c.aggregate_uncorrected)),
    field!(["ecc.errors.uncorrected.aggregate.sram"], None, "uncorrected ECC errors in SRAM over the GPU's life", |r| ecc_at(&r.dev.ecc_by_location.sram, |c| c.aggregate_uncorrected)),
    field!(["ecc.errors.uncorrected.aggregate.total"], None, "uncorrected ECC errors over the GPU's life", |r| num(&r.dev.ecc_errors.aggregate_uncorrected)),
    field!(["ecc.errors.uncorrected.volatile.sram.parity"], None, "uncorrected SRAM parity errors since the driver loaded", |r| sram(r, |s| s.volatile_uncorrectable_parity)),
    field!(["ecc.errors.uncorrected.volatile.sram.secded"], None, "uncorrected SRAM SEC-DED errors since the driver loaded", |r| sram(r, |s| s.volatile_uncorrectable_sec_ded)),
    field!(["ecc.errors.uncorrected.aggregate.sram.parity"], None, "uncorrected SRAM parity errors over the GPU's life", |r| sram(r, |s| s.aggregate_uncorrectable_parity)),
    field!(["ecc.errors.uncorrected.aggregate.sram.secded"], None, "uncorrected SRAM SEC-DED errors over the GPU's life", |r| sram(r, |s| s.aggregate_uncorrectable_sec_ded)),
    field!(["ecc.errors.uncorrected.aggregate.sram.thresholdExceeded"], None, "the SRAM error threshold was exceeded, Yes or No", |r| r.dev.details.sram_ecc_status.clone().map(|s| yes_no(s.threshold_exceeded))),
    field!(["ecc.errors.uncorrected.aggregate.sram.l2"], None, "uncorrected SRAM errors in L2 over the GPU's life", |r| sram(r, |s| s.aggregate_uncorrectable_l2)),
    field!(["ecc.errors.uncorrected.aggregate.sram.sm"], None, "uncorrected SRAM errors in the SMs over the GPU's life", |r| sram(r, |s| s.aggregate_uncorrectable_sm)),
    field!(["ecc.errors.uncorrected.aggregate.sram.mcu"], None, "uncorrected SRAM errors in the microcontrollers over the GPU's life", |r| sram(r, |s| s.aggregate_uncorrectable_mcu)),
    field!(["ecc.errors.uncorrected.aggregate.sram.pcie"], None, "uncorrected SRAM errors in the PCIe interface over the GPU's life", |r| sram(r, |s| s.aggregate_uncorrectable_pcie)),
    field!(["ecc.errors.uncorrected.aggregate.sram.other"], None, "uncorrected SRAM errors elsewhere over the GPU's life", |r| sram(r, |s| s.aggregate_uncorrectable_other)),
    field!(["retired_pages.single_bit_ecc.count", "retired_pages.sbe"], None, "pages retired for single-bit ECC errors", |r| r.dev.retired_pages_single_bit.clone().map(|p| p.len().to_string())),
    field!(["retired_pages.double_bit.count", "retired_pages.dbe"], None, "pages retired for double-bit ECC errors", |r| r.dev.retired_pages_double_bit.clone().map(|p| p.len().to_string())),
    field!(["retired_pages.pending"], None, "a page retirement waits for the next driver reload, Yes or No", |r| yn(&r.dev.retired_pages_pending)),
    field!(["remapped_rows.correctable", "remapped_rows.sbe"], None, "rows remapped for correctable errors", |r| r.dev.remapped_rows.clone().map(|m| m.correctable.to_string())),
    field!(["remapped_rows.correctable_inactive"], None, "row remappings for correctable errors not in force yet", |r| num(&r.dev.details.inactive_remapped_rows.clone().map(|m| m.correctable))),
    field!(["remapped_rows.uncorrectable", "remapped_rows.dbe"], None, "rows remapped for uncorrectable errors", |r| r.dev.remapped_rows.clone().map(|m| m.uncorrectable.to_string())),
    field!(["remapped_rows.uncorrectable_inactive"], None, "row remappings for uncorrectable errors not in force yet", |r| num(&r.dev.details.inactive_remapped_rows.clone().map(|m| m.uncorrectable))),
    field!(["remapped_rows.pending"], None, "a row remapping waits for a GPU reset, Yes or No", |r| r.dev.remapped_rows.clone().map(|m| yes_no(m.pending))),
    field!(["remapped_rows.failure"], None, "a row remapping failed, Yes or No", |r| r.dev.remapped_rows.clone().map(|m| yes_no(m.failure))),
    field!(["remapped_rows.histogram.max"], None, "memory banks with every spare row left", |r| num(&r.dev.details.row_remapper_histogram.clone().map(|h| h.max))),
    field!(["remapped_rows.histogram.high"], None, "memory banks with many spare rows left", |r| num(&r.dev.details.row_remapper_histogram.clone().map(|h| h.high))),
    field!(["remapped_rows.histogram.partial"], None, "memory banks with some spare rows left", |r| num(&r.dev.details.row_remapper_histogram.clone().map(|h| h.partial))),
    field!(["remapped_rows.histogram.low"], None, "memory banks with few spare rows left", |r| num(&r.dev.details.row_remapper_histogram.clone().map(|h| h.low))),
    field!(["remapped_rows.histogram.none"], None, "memory banks with no spare row left", |r| num(&r.dev.details.row_remapper_histogram.clone().map(|h| h.none))),
    field!(["temperature.gpu"], None, "GPU core temperature, degrees C (no unit, as nvidia-smi writes it)", |r| num(&r.dev.temperature)),
    field!(["temperature.gpu.tlimit"], None, "how far the GPU is below its T.Limit, degrees C", |r| num(&r.dev.details.margin_temperature)),
    field!(["temperature.memory"], None, "HBM memory temperature, degrees C", |r| num(&r.dev.memory_temperature)),
    field!(["power.management"], None, "power management, Enabled or Disabled", |r| mode(&r.dev.power_management_mode)),
    field!(["power.draw"], Some("W"), "power draw", |r| w(&r.dev.power_usage)),
    field!(["power.draw.average", "gpu.power.draw.average"], Some("W"), "GPU power averaged over a second", |r| w(&r.dev.details.power_average_gpu)),
    field!(["power.draw.instant", "gpu.power.draw.instant"], Some("W"), "GPU power now", |r| w(&r.dev.details.power_instant_gpu)),
    field!(["power.limit", "gpu.power.requested_limit"], Some("W"), "the power-management limit set", |r| w(&r.dev.power_limit)),
    field!(["enforced.power.limit", "gpu.power.current_limit"], Some("W"), "the power limit enforced (the lowest of every limit)", |r| w(&r.dev.enforced_power_limit)),
    field!(["power.default_limit", "gpu.power.default_limit"], Some("W"), "default power-management limit", |r| w(&r.dev.power_default_limit)),
    field!(["power.min_limit", "gpu.power.min_limit"], Some("W"), "lowest power-management limit that can be set", |r| r.dev.power_limit_constraints.clone().map(|c| watts(c.min_mw))),
    field!(["power.max_limit", "gpu.power.max_limit"], Some("W"), "highest power-management limit that can be set", |r| r.dev.power_limit_constraints.clone().map(|c| watts(c.max_mw))),
    field!(["module.power.draw.average"], Some("W"), "module power averaged over a second", |r| w(&r.dev.details.power_average_module)),
    field!(["module.power.draw.instant"], Some("W"), "module power now", |r| w(&r.dev.details.power_instant_module)),
    field!(["module.power.limit", "module.power.requested_limit"], Some("W"), "the module's power limit set", |r| module_limit(r, |l| l.requested)),
    field!(["module.enforced.power.limit", "module.power.current_limit"], Some("W"), "the module's power limit enforced", |r| module_limit(r, |l| l.current)),
    field!(["module.power.default_limit"], Some("W"), "the module's default power limit", |r| module_limit(r, |l| l.default)),
    field!(["module.power.min_limit"], Some("W"), "the lowest module power limit that can be set", |r| module_limit(r, |l| l.min)),
    field!(["module.power.max_limit"], Some("W"), "the highest module power limit that can be set", |r| module_limit(r, |l| l.max)),
    field!(["power_smoothing.delayed_power_smoothing_supported"], None, "delayed power smoothing is supported, as NVML answers it", |r| smoothing(r, |s| s.delayed_power_smoothing_supported)),
    field!(["power_smoothing.primary_power_floor"], Some("W"), "power smoothing: primary power floor", |r| smoothing(r, |s| s.primary_power_floor)),
    field!(["power_smoothing.secondary_power_floor"], Some("W"), "power smoothing: secondary power floor", |r| smoothing(r, |s| s.secondary_power_floor)),
    field!(["power_smoothing.min_primary_floor_activation_offset"], Some("W"), "power smoothing: minimum primary floor activation offset", |r| smoothing(r, |s| s.min_primary_floor_activation_offset)),
    field!(["power_smoothing.min_primary_floor_activation_point"], Some("W"), "power smoothing: minimum primary floor activation point", |r| smoothing(r, |s| s.min_primary_floor_activation_point)),
    field!(["power_smoothing.window_multiplier"], Some("ms"), "power smoothing: window multiplier", |r| smoothing(r, |s| s.window_multiplier)),
    field!(["power_smoothing.curr_profile.secondary_power_floor"], Some("W"), "power smoothing, current profile: secondary power floor", |r| smoothing(r, |s| s.profile_secondary_power_floor)),
    field!(["power_smoothing.curr_profile.primary_floor_act_window_multiplier"], None, "power smoothing, current profile: primary floor activation window multiplier", |r| smoothing(r, |s| s.profile_primary_floor_act_window_multiplier)),
    field!(["power_smoothing.curr_profile.primary_floor_tar_window_multiplier"], None, "power smoothing, current profile: primary floor target window multiplier", |r| smoothing(r, |s| s.profile_primary_floor_tar_window_multiplier)),
    field!(["power_smoothing.curr_profile.primary_floor_act_offset"], Some("W"), "power smoothing, current profile: primary floor activation offset", |r| smoothing(r, |s| s.profile_primary_floor_act_offset)),
    field!(["power_smoothing.admin_override.secondary_power_floor"], Some("W"), "power smoothing, admin override: secondary power floor", |r| smoothing(r, |s| s.admin_secondary_power_floor)),
    field!(["power_smoothing.admin_override.primary_floor_act_window_multiplier"], None, "power smoothing, admin override: primary floor activation window multiplier", |r| smoothing(r, |s| s.admin_primary_floor_act_window_multiplier)),
    field!(["power_smoothing.admin_override.primary_floor_tar_window_multiplier"], None, "power smoothing, admin override: primary floor target window multiplier", |r| smoothing(r, |s| s.admin_primary_floor_tar_window_multiplier)),
    field!(["power_smoothing.admin_override.primary_floor_act_offset"], Some("W"), "power smoothing, admin override: primary floor activation offset", |r| smoothing(r, |s| s.admin_primary_floor_act_offset)),
    field!(["clocks.current.graphics", "clocks.gr"], Some("MHz"), "graphics clock", |r| num(&r.dev.clocks.graphics)),
    field!(["clocks.current.sm", "clocks.sm"], Some("MHz"), "SM clock", |r| num(&r.dev.clocks.sm)),
    field!(["clocks.current.memory", "clocks.mem"], Some("MHz"), "memory clock", |r| num(&r.dev.clocks.memory)),
    field!(["clocks.current.video", "clocks.video"], Some("MHz"), "video clock", |r| num(&r.dev.clocks.video)),
    field!(["clocks.applications.graphics", "clocks.applications.gr"], Some("MHz"), "graphics clock applications run at", |r| num(&r.dev.applications_clocks.graphics)),
    field!(["clocks.applications.memory", "clocks.applications.mem"], Some("MHz"), "memory clock applications run at", |r| num(&r.dev.applications_clocks.memory)),
    field!(["clocks.default_applications.graphics", "clocks.default_applications.gr"], Some("MHz"), "default applications graphics clock", |r| num(&r.dev.default_applications_clocks.graphics)),
    field!(["clocks.default_applications.memory", "clocks.default_applications.mem"], Some("MHz"), "default applications memory clock", |r| num(&r.dev.default_applications_clocks.memory)),
    field!(["clocks.max.graphics", "clocks.max.gr"], Some("MHz"), "maximum graphics clock", |r| num(&r.dev.max_clocks.graphics)),
    field!(["clocks.max.sm"], Some("MHz"), "maximum SM clock", |r| num(&r.dev.max_clocks.sm)),
    field!(["clocks.max.memory", "clocks.max.mem"], Some("MHz"), "maximum memory clock", |r| num(&r.dev.max_clocks.memory)),
    field!(["mig.mode.current"], None, "current MIG mode, Enabled or Disabled", |r| r.dev.mig_mode.clone().map(|m| enabled(m.current))),
    field!(["mig.mode.pending"], None, "MIG mode after the next GPU reset", |r| r.dev.mig_mode.clone().map(|m| enabled(m.pending))),
    field!(["gsp.mode.current"], None, "the driver runs on the GSP now, Enabled or Disabled", |r| r.dev.details.gsp_firmware_mode.clone().map(|m| enabled(m.current))),
    field!(["gsp.mode.default"], None, "the driver runs on the GSP by default", |r| r.dev.details.gsp_firmware_mode.clone().map(|m| enabled(m.default))),
    field!(["c2c.mode"], None, "the chip-to-chip link, Enabled or Disabled", |r| mode(&r.dev.details.c2c_mode)),
    field!(["protected_memory.total"], Some("MiB"), "confidential-computing protected memory in all", |r| fb_mib(r.dev.details.protected_memory.clone().map(|m| m.total))),
    field!(["protected_memory.used"], Some("MiB"), "confidential-computing protected memory in use", |r| fb_mib(r.dev.details.protected_memory.clone().map(|m| m.used))),
    field!(["protected_memory.free"], Some("MiB"), "confidential-computing protected memory free", |r| fb_mib(r.dev.details.protected_memory.clone().map(|m| m.free))),
    field!(["fabric.state"], None, "NVLink fabric registration: Not Started, In Progress, Completed (N/A without a fabric)", |r| fabric(r, fabric_state)),
    field!(["fabric.status"], None, "NVLink fabric registration's outcome once completed", |r| fabric(r, fabric_status)),
    field!(["fabric.cliqueId"], None, "NVLink fabric clique", |r| fabric(r, |f| Some(f.clique_id.to_string()))),
    field!(["fabric.clusterUuid"], None, "NVLink fabric cluster UUID", |r| fabric(r, |f| Some(f.cluster_uuid.clone()))),
    field!(["fabric.health.summary"], None, "NVLink fabric health: Healthy, Unhealthy or Limited Capacity", |r| fabric(r, |f| health_summary(f.health_summary))),
    field!(["fabric.health.bandwidth"], None, "NVLink fabric bandwidth degraded, True or False", |r| fabric(r, |f| health(f, gpu_backend::FabricHealthPart::DegradedBandwidth))),
    field!(["fabric.health.route_recovery_in_progress"], None, "NVLink fabric route recovery in progress, True or False", |r| fabric(r, |f| health(f, gpu_backend::FabricHealthPart::RouteRecovery))),
    field!(["fabric.health.route_unhealthy"], None, "NVLink fabric route unhealthy, True or False", |r| fabric(r, |f| health(f, gpu_backend::FabricHealthPart::RouteUnhealthy))),
    field!(["fabric.health.access_timeout_recovery"], None, "NVLink fabric access timeout recovery, True or False", |r| fabric(r, |f| health(f, gpu_backend::FabricHealthPart::AccessTimeoutRecovery))),
    field!(["fabric.health.incorrect_configuration"], None, "NVLink fabric configuration: None, or NVML's reason number", |r| fabric(r, incorrect_configuration)),
    field!(["fabric.health.partition_assigned"], None, "NVLink fabric partition assigned, True or False", |r| fabric(r, |f| health(f, gpu_backend::FabricHealthPart::PartitionAssigned))),
    field!(["platform.chassis_serial_number"], None, "serial number of the chassis the GPU sits in", |r| r.dev.details.platform_info.clone().map(|p| p.chassis_serial_number)),
    field!(["platform.slot_number"], None, "slot of the chassis", |r| r.dev.details.platform_info.clone().map(|p| p.slot_number.to_string())),
    field!(["platform.tray_index"], None, "tray of the chassis's compute slots", |r| r.dev.details.platform_info.clone().map(|p| p.tray_index.to_string())),
    field!(["platform.host_id"], None, "node within the slot", |r| r.dev.details.platform_info.clone().map(|p| p.host_id.to_string())),
    field!(["platform.peer_type"], None, "NVLink peer type (Direct Connected without an NVSwitch)", |r| r.dev.details.platform_info.clone().map(|p| gpu_backend::peer_type_label(p.peer_type))),
    field!(["platform.module_id"], None, "GPU within the node", |r| r.dev.details.platform_info.clone().map(|p| p.module_id.to_string())),
    field!(["platform.gpu_fabric_guid"], None, "the platform's GUID, hexadecimal (the first 8 bytes of NVML's Infiniband GUID)", |r| r.dev.details.platform_info.clone().map(|p| fabric_guid(&p.ib_guid))),
    field!(["hostname"], None, "the host name set on the device, as NVML answers it (vGPU hosts; [N/A] elsewhere, as nvidia-smi 580 prints it)", |r| text(&r.dev.details.hostname)),
    field!(["pcie.replay_counter"], None, "gpuscope's own: PCIe replays since the driver loaded (nvidia-smi -q's \"Replays Since Reset\")", |r| num(&r.dev.pcie_replay_counter)),
];

/// Every `--query-compute-apps` field, nvidia-smi's names.
pub const APP_FIELDS: &[AppField] = &[
    field!(
        ["timestamp"],
        None,
        "when the sample was taken (YYYY/MM/DD HH:MM:SS.mmm), in UTC",
        |r| Na::Value(smi_time(&r.view.time))
    ),
    field!(
        ["gpu_name"],
        None,
        "product name of the GPU the process runs on",
        |r| text(&r.gpu.name)
    ),
    field!(
        ["gpu_bus_id"],
        None,
        "PCI bus id of the GPU the process runs on",
        |r| r.gpu.pci.clone().map(|p| p.bus_id)
    ),
    field!(
        ["gpu_serial"],
        None,
        "board serial number of the GPU the process runs on",
        |r| text(&r.gpu.serial)
    ),
    field!(
        ["gpu_uuid"],
        None,
        "UUID of the GPU the process runs on",
        |r| text(&r.gpu.uuid)
    ),
    field!(["pid"], None, "process id", |r| Na::Value(
        r.process.pid.to_string()
    )),
    field!(
        ["process_name", "name"],
        None,
        "the process's program, as its command line starts",
        |r| process_name(r.process)
    ),
    field!(
        ["used_gpu_memory", "used_memory"],
        Some("MiB"),
        "GPU memory the process uses",
        |r| match r.process.gpu_memory {
            Some(b) => Na::Value(value::nearest_mib(b).to_string()),
            None => Na::NotAvailable,
        }
    ),
];

fn driver_model(m: gpu_backend::DriverModel) -> &'static str {
    match m {
        gpu_backend::DriverModel::Wddm => "WDDM",
        gpu_backend::DriverModel::Wdm => "TCC",
        gpu_backend::DriverModel::Mcdm => "MCDM",
    }
}

/// nvidia-smi's name for a GPU operation mode.
pub(crate) fn gom(m: gpu_backend::GpuOperationMode) -> String {
    match m {
        gpu_backend::GpuOperationMode::AllOn => "All On".into(),
        gpu_backend::GpuOperationMode::Compute => "Compute".into(),
        gpu_backend::GpuOperationMode::LowDoublePrecision => "Low Double Precision".into(),
        gpu_backend::GpuOperationMode::Other(n) => n.to_string(),
    }
}

/// A process's program as nvidia-smi names it: the first word of its command line (a path,
/// where it was started by one), else the kernel's short name.
pub(crate) fn process_name(p: &gpu_processes::GpuProcess) -> Na<String> {
    let first = p
        .host
        .cmdline
        .as_ref()
        .and_then(|c| c.first())
        .filter(|a| !a.is_empty());
    match first.or(p.host.name.as_ref()) {
        Some(n) => Na::Value(n.clone()),
        None => Na::NotAvailable,
    }
}

/// A GPU's fields.
pub type GpuField = Field<fn(&Row<'_>) -> Na<String>>;
/// A compute process's fields.
pub type AppField = Field<fn(&AppRow<'_>) -> Na<String>>;

/// What `--format` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Format {
    /// Leave out the header line.
    pub noheader: bool,
    /// Leave the units out of the cells (the header still names them).
    pub nounits: bool,
}

impl std::fmt::Display for Format {
    /// As nvidia-smi's `--format` takes it: `csv`, `csv,noheader,nounits`, ...
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("csv")?;
        if self.noheader {
            f.write_str(",noheader")?;
        }
        if self.nounits {
            f.write_str(",nounits")?;
        }
        Ok(())
    }
}

/// Parses `--format`: `csv`, then `noheader` and/or `nounits`, comma-separated (nvidia-smi's
/// syntax).
pub fn parse_format(text: &str) -> Result<Format, String> {
    let mut parts = text.split(',').map(str::trim);
    match parts.next() {
        Some("csv") => {}
        Some(other) => {
            return Err(format!(
                "{:?} is not a format: use csv, optionally with noheader and/or nounits \
                 (csv,noheader,nounits)",
                escape_control(other)
            ))
        }
        None => return Err("empty format".into()),
    }
    let mut f = Format::default();
    for part in parts {
        match part {
            "noheader" => f.noheader = true,
            "nounits" => f.nounits = true,
            other => {
                return Err(format!(
                    "{:?} is not a csv option: noheader or nounits",
                    escape_control(other)
                ))
            }
        }
    }
    Ok(f)
}

/// The fields `query` names, checked against `table`. An unknown name is a usage error that
/// names it, the option (`option`) and how to list the known ones (`help`).
fn fields<'t, F>(
    table: &'t [Field<F>],
    query: &str,
    option: &str,
    help: &str,
) -> Result<Vec<&'t Field<F>>, UsageError> {
    let mut out = Vec::new();
    for name in query.split(',').map(str::trim) {
        if name.is_empty() {
            return Err(UsageError(format!(
                "{option} {:?}: an empty field name (two commas, or one at an end)",
                escape_control(query)
            )));
        }
        // nvidia-smi's names first; then any other name of the metric in gpuscope's one
        // vocabulary (`memory_used` for `memory.used`), as every command takes them.
        let field = table
            .iter()
            .find(|f| f.names.contains(&name))
            .or_else(|| {
                let metric = gpu_devices::vocabulary::find(name)?;
                table.iter().find(|f| f.names.first() == Some(&metric.name))
            })
            .ok_or_else(|| {
                UsageError(format!(
                    "{option}: unknown field {:?}; `{help}` lists them",
                    escape_control(name)
                ))
            })?;
        out.push(field);
    }
    Ok(out)
}

/// The canonical names (nvidia-smi's, each field's first) of the GPU fields `query` names, as
/// [`render_as`] reads them: for the query plan that asks only what they show.
pub(crate) fn gpu_field_names(query: &str) -> Result<Vec<&'static str>, UsageError> {
    Ok(fields(FIELDS, query, "--query-gpu", "--help-query-gpu")?
        .into_iter()
        .map(|f| f.names[0])
        .collect())
}

/// The first name of `query` that names no `--query-gpu` field (nvidia-smi's names, the other
/// names it accepts, and gpuscope's vocabulary), if any, with gpuscope's why: what `gpuscope
/// smi` refuses before it opens anything, as nvidia-smi does.
pub fn unknown_gpu_field(query: &str) -> Option<(String, UsageError)> {
    let why = fields(
        FIELDS,
        query,
        "--query-gpu",
        "gpuscope smi --help-query-gpu",
    )
    .err()?;
    let bad = query
        .split(',')
        .map(str::trim)
        .find(|name| fields(FIELDS, name, "", "").is_err())
        .unwrap_or_default()
        .to_string();
    Some((bad, why))
}

/// Every field of `table`, its other names, unit and meaning, after `intro`.
fn list<F>(intro: &str, table: &[Field<F>]) -> String {
    let mut out = String::from(intro);
    for f in table {
        let mut name = f.names[0].to_string();
        if let Some(u) = f.unit {
            let _ = write!(name, " [{u}]");
        }
        let _ = write!(out, "  {name:<44} {}", f.help);
        if f.names.len() > 1 {
            let _ = write!(out, " (also: {})", f.names[1..].join(", "));
        }
        out.push('\n');
    }
    out
}

/// `snapshot --query help`: every field, its other names, unit and meaning.
pub fn help() -> String {
    list(
        "Fields for `gpuscope snapshot --query F1,F2,... [--format csv[,noheader][,nounits]]`\n\
         (one row per physical GPU; [N/A] where the GPU or driver cannot tell):\n\n",
        FIELDS,
    )
}

/// `smi --help-query-gpu`.
pub fn help_gpu() -> String {
    list(
        "Fields for `gpuscope smi --query-gpu=F1,F2,... --format=csv[,noheader][,nounits]`\n\
         (nvidia-smi's names; one row per physical GPU; [N/A] where the GPU or driver cannot \
         tell):\n\n",
        FIELDS,
    )
}

/// `smi --help-query-compute-apps`.
pub fn help_apps() -> String {
    list(
        "Fields for `gpuscope smi --query-compute-apps=F1,F2,... --format=csv[,noheader][,nounits]`\n\
         (nvidia-smi's names; one row per compute process):\n\n",
        APP_FIELDS,
    )
}

/// One CSV cell: control characters escaped; quoted when it holds a comma, a quote or leading
/// or trailing space.
fn cell(text: &str) -> String {
    let text = escape_control(text);
    if text.contains([',', '"']) || text.starts_with(' ') || text.ends_with(' ') {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.into_owned()
    }
}

/// A missing value as nvidia-smi writes it in a CSV cell.
pub(crate) fn missing(e: Option<&BackendError>) -> &'static str {
    match e {
        None => "[N/A]",
        Some(BackendError::GpuLost) => "[GPU is lost]",
        Some(_) => "[Unknown Error]",
    }
}

/// How many physical GPUs `raw` holds (a device snapshot of every device, before `-i` or
/// `--only` chose some).
pub(crate) fn gpu_count(raw: &[DeviceSnapshot]) -> usize {
    raw.iter()
        .filter(|d| matches!(d.id, DeviceId::Gpu(_)))
        .count()
}

/// The CSV of `fields` over `rows`.
fn csv<R, F: Fn(&Field<G>, &R) -> Na<String>, G>(
    fields: &[&Field<G>],
    rows: &[R],
    format: Format,
    value: F,
) -> String {
    let mut out = String::new();
    if !format.noheader {
        let header: Vec<String> = fields
            .iter()
            .map(|f| match f.unit {
                Some(u) => format!("{} [{u}]", f.names[0]),
                None => f.names[0].to_string(),
            })
            .collect();
        out += &header.join(", ");
        out.push('\n');
    }
    for r in rows {
        let row: Vec<String> = fields
            .iter()
            .map(|f| match value(f, r) {
                Na::Value(v) => match f.unit {
                    Some(u) if !format.nounits => cell(&format!("{v} {u}")),
                    _ => cell(&v),
                },
                other => missing(other.error()).to_string(),
            })
            .collect();
        out += &row.join(", ");
        out.push('\n');
    }
    out
}

/// The CSV for `snapshot --query` (`option` names the option for errors) over a snapshot: one
/// row per physical GPU of `view`, read off its snapshot in `raw`.
pub fn render(
    view: &SnapshotView,
    raw: &[DeviceSnapshot],
    query: &str,
    format: Format,
) -> Result<String, UsageError> {
    render_as(
        view,
        raw,
        query,
        format,
        "--query",
        "gpuscope snapshot --query help",
    )
}

/// [`render`] with the option's name and its help command given.
pub fn render_as(
    view: &SnapshotView,
    raw: &[DeviceSnapshot],
    query: &str,
    format: Format,
    option: &str,
    help: &str,
) -> Result<String, UsageError> {
    let fields = fields(FIELDS, query, option, help)?;
    let count = gpu_count(raw);
    let rows: Vec<Row<'_>> = view
        .devices
        .iter()
        .filter(|d| d.identity.mig_index.is_none())
        .filter_map(|d| raw.iter().find(|r| r.id == d.device))
        .map(|dev| Row { view, dev, count })
        .collect();
    Ok(csv(&fields, &rows, format, |f, r| (f.value)(r)))
}

/// The CSV for `smi --query-compute-apps`: one row per compute process of the physical GPUs
/// of `view` (and of their MIG devices), in device order.
pub fn render_apps(
    view: &SnapshotView,
    snaps: &gpu_processes::Snapshots,
    query: &str,
    format: Format,
) -> Result<String, UsageError> {
    let fields = fields(
        APP_FIELDS,
        query,
        "--query-compute-apps",
        "gpuscope smi --help-query-compute-apps",
    )?;
    let gpus: Vec<u32> = view
        .devices
        .iter()
        .filter(|d| d.identity.mig_index.is_none())
        .map(|d| d.identity.index)
        .collect();
    let rows: Vec<AppRow<'_>> = snaps
        .processes
        .iter()
        .filter(|p| {
            matches!(
                p.kind,
                Some(gpu_devices::ProcessKind::Compute | gpu_devices::ProcessKind::ComputeGraphics)
            )
        })
        .filter(|p| gpus.contains(&p.device.physical_index()))
        .filter_map(|p| {
            let gpu = snaps
                .devices
                .iter()
                .find(|d| d.id == DeviceId::Gpu(p.device.physical_index()))?;
            Some(AppRow {
                view,
                gpu,
                process: p,
            })
        })
        .collect();
    Ok(csv(&fields, &rows, format, |f, r| (f.value)(r)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn formats_parse_as_nvidia_smi_writes_them() {
        assert_eq!(parse_format("csv"), Ok(Format::default()));
        assert_eq!(
            parse_format("csv,noheader,nounits"),
            Ok(Format {
                noheader: true,
                nounits: true
            })
        );
        assert_eq!(
            parse_format("csv, nounits"),
            Ok(Format {
                noheader: false,
                nounits: true
            })
        );
        assert!(parse_format("json").unwrap_err().contains("\"json\""));
        assert!(parse_format("csv,bold").unwrap_err().contains("\"bold\""));
    }

    /// One vocabulary: each metric's canonical name is the first name of a `--query-gpu`
    /// field, and each of its other names reaches that field.
    #[test]
    fn every_metric_of_the_vocabulary_is_a_query_field_by_every_name() {
        for m in gpu_devices::vocabulary::METRICS {
            for name in m.names() {
                let found = fields(FIELDS, name, "--query", "help")
                    .unwrap_or_else(|e| panic!("{name} ({}): {e:?}", m.name));
                assert_eq!(found[0].names[0], m.name, "{name}");
            }
        }
    }

    #[test]
    fn every_field_name_is_unique() {
        for names in [
            FIELDS.iter().map(|f| f.names).collect::<Vec<_>>(),
            APP_FIELDS.iter().map(|f| f.names).collect(),
        ] {
            let mut seen = std::collections::BTreeSet::new();
            for n in names.into_iter().flatten() {
                assert!(seen.insert(*n), "{n} twice");
            }
        }
    }

    #[test]
    fn watts_have_two_decimals_as_nvidia_smi_writes_them() {
        let cases = [
            (700_000, "700.00"),
            (69_851, "69.85"),
            (162_969, "162.97"),
            (4, "0.00"),
            (0, "0.00"),
        ];
        for (milliwatts, shown) in cases {
            assert_eq!(watts(milliwatts), shown, "{milliwatts} mW");
        }
    }

    #[test]
    fn cells_that_would_split_a_row_are_quoted() {
        assert_eq!(cell("NVIDIA H100"), "NVIDIA H100");
        assert_eq!(cell("a, b"), "\"a, b\"");
        assert_eq!(cell("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(cell("\x1b[2J"), "\\x1b[2J");
    }

    proptest! {
        #[test]
        fn any_format_text_is_parsed_or_refused_without_panic(s in ".{0,40}") {
            let _ = parse_format(&s);
        }

        #[test]
        fn a_format_written_back_parses_to_itself(noheader: bool, nounits: bool) {
            let f = Format { noheader, nounits };
            prop_assert_eq!(parse_format(&f.to_string()), Ok(f));
        }

        #[test]
        fn any_query_text_is_parsed_or_refused_without_panic(s in ".{0,60}") {
            let _ = fields(FIELDS, &s, "--query", "help");
            let _ = fields(APP_FIELDS, &s, "--query-compute-apps", "help");
        }
    }
}
