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

const MIB: u64 = 1024 * 1024;

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
    let major = r
        .view
        .driver_version
        .as_deref()
        .and_then(|v| v.split('.').next())
        .and_then(|m| m.parse::<u32>().ok());
    match major {
        Some(m) if m >= 580 => Na::Value("[Requested functionality has been deprecated]".into()),
        _ => mode(&r.dev.display_mode),
    }
}

fn mode(v: &Na<bool>) -> Na<String> {
    v.clone().map(enabled)
}

fn yn(v: &Na<bool>) -> Na<String> {
    v.clone().map(yes_no)
}

/// Bytes in MiB, rounded to the nearest (a half to the even one), as nvidia-smi rounds: it does
/// not truncate, so its used, free and reserved can add up to one MiB more than its total
/// (docs/smi.md has the captures, and the recorded frame every still value of which the nearest
/// matches).
pub(crate) fn to_mib(bytes: u64) -> u64 {
    let (q, r) = (bytes / MIB, bytes % MIB);
    if r > MIB / 2 || (r == MIB / 2 && q % 2 == 1) {
        q + 1
    } else {
        q
    }
}

/// Frame-buffer memory (total, reserved, used, free) in MiB as nvidia-smi 580 prints it: a
/// part of a MiB counts as a whole one, where the nearest would print one less (docs/smi.md
/// has the captures, with the memory standing still). BAR1 memory nvidia-smi rounds to the
/// nearest ([`to_mib`]).
pub(crate) fn to_mib_up(bytes: u64) -> u64 {
    bytes.div_ceil(MIB)
}

/// [`to_mib_up`] of a value that may be N/A, as text.
pub(crate) fn fb_mib(v: Na<u64>) -> Na<String> {
    v.map(|b| to_mib_up(b).to_string())
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
    field!(["count"], None, "number of GPUs in the system (whichever are shown)", |r| Na::Value(r.count.to_string())),
    field!(["name", "gpu_name"], None, "product name", |r| text(&r.dev.name)),
    field!(["serial", "gpu_serial"], None, "board serial number", |r| text(&r.dev.serial)),
    field!(["uuid", "gpu_uuid"], None, "UUID", |r| text(&r.dev.uuid)),
    field!(["pci.bus_id", "gpu_bus_id"], None, "PCI bus id, domain:bus:device.function", |r| r.dev.pci.clone().map(|p| p.bus_id)),
    field!(["pci.domain"], None, "PCI domain, hexadecimal", |r| r.dev.pci.clone().map(|p| format!("0x{:04X}", p.domain))),
    field!(["pci.bus"], None, "PCI bus, hexadecimal", |r| r.dev.pci.clone().map(|p| format!("0x{:02X}", p.bus))),
    field!(["pci.device"], None, "PCI device, hexadecimal", |r| r.dev.pci.clone().map(|p| format!("0x{:02X}", p.device))),
    field!(["pci.device_id"], None, "PCI vendor and device id, hexadecimal", |r| r.dev.pci.clone().map(|p| format!("0x{:08X}", p.pci_device_id))),
    field!(["pci.sub_device_id"], None, "PCI subsystem id, hexadecimal", |r| r.dev.pci.clone().map(|p| format!("0x{:08X}", p.pci_subsystem_id))),
    field!(["pcie.link.gen.current"], None, "current PCIe link generation", |r| num(&r.dev.pcie_link_generation)),
    field!(["pcie.link.gen.max"], None, "maximum PCIe link generation of the GPU and system", |r| num(&r.dev.max_pcie_link_generation)),
    field!(["pcie.link.width.current"], None, "current PCIe link width (lanes)", |r| num(&r.dev.pcie_link_width)),
    field!(["pcie.link.width.max"], None, "maximum PCIe link width (lanes)", |r| num(&r.dev.max_pcie_link_width)),
    field!(["index"], None, "NVML index of the GPU", |r| Na::Value(r.dev.id.physical_index().to_string())),
    field!(["display_mode"], None, "a display is attached, Enabled or Disabled; from driver 580 on, deprecated as nvidia-smi says (display_attached tells)", |r| display_mode(r)),
    field!(["display_attached"], None, "a display is attached, Yes or No", |r| yn(&r.dev.display_mode)),
    field!(["display_active"], None, "a display is initialised, Enabled or Disabled", |r| mode(&r.dev.display_active)),
    field!(["persistence_mode"], None, "Enabled or Disabled", |r| mode(&r.dev.persistence_mode)),
    field!(["accounting.mode"], None, "process accounting, Enabled or Disabled", |r| mode(&r.dev.accounting_mode)),
    field!(["driver_model.current"], None, "Windows driver model: WDDM, TCC or MCDM", |r| r.dev.driver_model.clone().map(|m| driver_model(m.current).to_string())),
    field!(["driver_model.pending"], None, "Windows driver model after the next reboot", |r| r.dev.driver_model.clone().map(|m| driver_model(m.pending).to_string())),
    field!(["vbios_version"], None, "VBIOS version", |r| text(&r.dev.vbios_version)),
    field!(["inforom.img", "inforom.image"], None, "InfoROM image version", |r| text(&r.dev.inforom_image_version)),
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
    field!(["ecc.mode.current"], None, "current ECC mode, Enabled or Disabled", |r| r.dev.ecc_mode.clone().map(|m| enabled(m.current))),
    field!(["ecc.mode.pending"], None, "ECC mode after the next reboot", |r| r.dev.ecc_mode.clone().map(|m| enabled(m.pending))),
    field!(["ecc.errors.corrected.volatile.device_memory"], None, "corrected ECC errors in device memory since the driver loaded", |r| ecc_at(&r.dev.ecc_by_location.device_memory, |c| c.volatile_corrected)),
    field!(["ecc.errors.corrected.volatile.register_file"], None, "corrected ECC errors in the register file since the driver loaded", |r| ecc_at(&r.dev.ecc_by_location.register_file, |c| c.volatile_corrected)),
    field!(["ecc.errors.corrected.volatile.l1_cache"], None, "corrected ECC errors in L1 since the driver loaded", |r| ecc_at(&r.dev.ecc_by_location.l1_cache, |c| c.volatile_corrected)),
    field!(["ecc.errors.corrected.volatile.l2_cache"], None, "corrected ECC errors in L2 since the driver loaded", |r| ecc_at(&r.dev.ecc_by_location.l2_cache, |c| c.volatile_corrected)),
    field!(["ecc.errors.corrected.volatile.texture_memory"], None, "corrected ECC errors in texture memory since the driver loaded", |r| ecc_at(&r.dev.ecc_by_location.texture_memory, |c| c.volatile_corrected)),
    field!(["ecc.errors.corrected.volatile.cbu"], None, "corrected ECC errors in the CBU since the driver loaded", |r| ecc_at(&r.dev.ecc_by_location.cbu, |c| c.volatile_corrected)),
    field!(["ecc.errors.corrected.volatile.sram"], None, "corrected ECC errors in SRAM since the driver loaded", |r| ecc_at(&r.dev.ecc_by_location.sram, |c| c.volatile_corrected)),
    field!(["ecc.errors.corrected.volatile.total"], None, "corrected ECC errors since the driver loaded", |r| num(&r.dev.ecc_errors.volatile_corrected)),
    field!(["ecc.errors.corrected.aggregate.device_memory"], None, "corrected ECC errors in device memory over the GPU's life", |r| ecc_at(&r.dev.ecc_by_location.device_memory, |c| c.aggregate_corrected)),
    field!(["ecc.errors.corrected.aggregate.sram"], None, "corrected ECC errors in SRAM over the GPU's life", |r| ecc_at(&r.dev.ecc_by_location.sram, |c| c.aggregate_corrected)),
    field!(["ecc.errors.corrected.aggregate.total"], None, "corrected ECC errors over the GPU's life", |r| num(&r.dev.ecc_errors.aggregate_corrected)),
    field!(["ecc.errors.uncorrected.volatile.device_memory"], None, "uncorrected ECC errors in device memory since the driver loaded", |r| ecc_at(&r.dev.ecc_by_location.device_memory, |c| c.volatile_uncorrected)),
    field!(["ecc.errors.uncorrected.volatile.sram"], None, "uncorrected ECC errors in SRAM since the driver loaded", |r| ecc_at(&r.dev.ecc_by_location.sram, |c| c.volatile_uncorrected)),
    field!(["ecc.errors.uncorrected.volatile.total"], None, "uncorrected ECC errors since the driver loaded", |r| num(&r.dev.ecc_errors.volatile_uncorrected)),
    field!(["ecc.errors.uncorrected.aggregate.device_memory"], None, "uncorrected ECC errors in device memory over the GPU's life", |r| ecc_at(&r.dev.ecc_by_location.device_memory, |c| c.aggregate_uncorrected)),
    field!(["ecc.errors.uncorrected.aggregate.sram"], None, "uncorrected ECC errors in SRAM over the GPU's life", |r| ecc_at(&r.dev.ecc_by_location.sram, |c| c.aggregate_uncorrected)),
    field!(["ecc.errors.uncorrected.aggregate.total"], None, "uncorrected ECC errors over the GPU's life", |r| num(&r.dev.ecc_errors.aggregate_uncorrected)),
    field!(["retired_pages.single_bit_ecc.count", "retired_pages.sbe"], None, "pages retired for single-bit ECC errors", |r| r.dev.retired_pages_single_bit.clone().map(|p| p.len().to_string())),
    field!(["retired_pages.double_bit.count", "retired_pages.dbe"], None, "pages retired for double-bit ECC errors", |r| r.dev.retired_pages_double_bit.clone().map(|p| p.len().to_string())),
    field!(["retired_pages.pending"], None, "a page retirement waits for the next driver reload, Yes or No", |r| yn(&r.dev.retired_pages_pending)),
    field!(["remapped_rows.correctable", "remapped_rows.sbe"], None, "rows remapped for correctable errors", |r| r.dev.remapped_rows.clone().map(|m| m.correctable.to_string())),
    field!(["remapped_rows.uncorrectable", "remapped_rows.dbe"], None, "rows remapped for uncorrectable errors", |r| r.dev.remapped_rows.clone().map(|m| m.uncorrectable.to_string())),
    field!(["remapped_rows.pending"], None, "a row remapping waits for a GPU reset, Yes or No", |r| r.dev.remapped_rows.clone().map(|m| yes_no(m.pending))),
    field!(["remapped_rows.failure"], None, "a row remapping failed, Yes or No", |r| r.dev.remapped_rows.clone().map(|m| yes_no(m.failure))),
    field!(["temperature.gpu"], None, "GPU core temperature, degrees C (no unit, as nvidia-smi writes it)", |r| num(&r.dev.temperature)),
    field!(["temperature.memory"], None, "HBM memory temperature, degrees C", |r| num(&r.dev.memory_temperature)),
    field!(["power.management"], None, "power management, Enabled or Disabled", |r| mode(&r.dev.power_management_mode)),
    field!(["power.draw"], Some("W"), "power draw", |r| w(&r.dev.power_usage)),
    field!(["power.limit", "gpu.power.requested_limit"], Some("W"), "the power-management limit set", |r| w(&r.dev.power_limit)),
    field!(["enforced.power.limit", "gpu.power.current_limit"], Some("W"), "the power limit enforced (the lowest of every limit)", |r| w(&r.dev.enforced_power_limit)),
    field!(["power.default_limit", "gpu.power.default_limit"], Some("W"), "default power-management limit", |r| w(&r.dev.power_default_limit)),
    field!(["power.min_limit", "gpu.power.min_limit"], Some("W"), "lowest power-management limit that can be set", |r| r.dev.power_limit_constraints.clone().map(|c| watts(c.min_mw))),
    field!(["power.max_limit", "gpu.power.max_limit"], Some("W"), "highest power-management limit that can be set", |r| r.dev.power_limit_constraints.clone().map(|c| watts(c.max_mw))),
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
    field!(["hostname"], None, "the host's name", |r| opt(&r.view.hostname)),
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
            Some(b) => Na::Value(to_mib(b).to_string()),
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
        .filter(|d| d.mig_index.is_none())
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
        .filter(|d| d.mig_index.is_none())
        .map(|d| d.index)
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
    fn mebibytes_are_rounded_to_the_nearest_as_nvidia_smi_does() {
        // Frame 47 of fixtures/h100-real.json, and what nvidia-smi -q printed then.
        assert_eq!(to_mib(85_520_809_984), 81559);
        assert_eq!(to_mib(503_316_480), 480);
        assert_eq!(to_mib(7_091_322_880), 6763);
        assert_eq!(to_mib(7_093_092_352), 6764, "a half goes to the even");
        assert_eq!(to_mib(MIB / 2 - 1), 0);
        // Frame-buffer memory: a part of a MiB is a whole one (fixtures/h200-real/ and
        // fixtures/h100-real/, memory standing still).
        assert_eq!(
            to_mib_up(140_965_445_632),
            134_436,
            "H200 free, 134,435.13 MiB"
        );
        assert_eq!(to_mib_up(644_939_776), 616, "H200 reserved, 615.06 MiB");
        assert_eq!(
            to_mib_up(77_926_170_624),
            74_317,
            "H100 free, 74,316.19 MiB"
        );
        assert_eq!(
            to_mib_up(150_754_820_096),
            143_771,
            "a whole number of MiB stays"
        );
        assert_eq!(to_mib_up(u64::MAX), u64::MAX / MIB + 1);
        assert_eq!(to_mib(MIB * 3 + MIB / 2), 4);
        assert_eq!(to_mib(u64::MAX), u64::MAX / MIB + 1);
    }

    #[test]
    fn watts_have_two_decimals_as_nvidia_smi_writes_them() {
        assert_eq!(watts(700_000), "700.00");
        assert_eq!(watts(69_851), "69.85");
        assert_eq!(watts(162_969), "162.97");
        assert_eq!(watts(4), "0.00");
        assert_eq!(watts(0), "0.00");
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
