//! nvidia_gpu_exporter's names (`gpuscope export --names nvidia-smi`): `nvidia_smi_gpu_info`
//! labelled with each GPU's identity, one `nvidia_smi_*` gauge per `--query-gpu` field labelled
//! `uuid` (named as nvidia_gpu_exporter names a field: `memory.used [MiB]` is
//! `nvidia_smi_memory_used_bytes`, in bytes), and the families its NVML backend adds: energy,
//! PCIe throughput, XID errors, MIG instances, and with `--processes` the compute processes.
//!
//! The fields are those of gpuscope's one vocabulary ([`gpu_devices::vocabulary`]) that
//! nvidia-smi prints as a number or as a word nvidia_gpu_exporter turns into one (`Enabled`,
//! `Active`, `Yes`, `P2`); each is named from the vocabulary's canonical name and unit, so a
//! field is declared once, there, and the door only says how to read its value.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use gpu_backend::{
    ClockEventReasons, ComputeMode, DeviceId, GpmMetrics, MemoryInfo, PerformanceState,
};
use gpu_devices::{vocabulary, DeviceSnapshot, Na, ProcessKind};

use super::{
    empty_families, gpu_instances, metric, mig_profile, put, same, same_where, Door, DoorLabels,
    DoorMetric, DoorTable, SameAs, Scope, UuidForm,
};
use crate::families::{Family, Inputs, Kind, Labels, Options};
use crate::names as n;

/// The prefix of every name (nvidia_gpu_exporter's default).
pub const PREFIX: &str = "nvidia_smi";

/// The table: every metric of the door and its labels.
pub fn table() -> &'static DoorTable {
    static TABLE: LazyLock<DoorTable> = LazyLock::new(|| DoorTable {
        door: Door::NvidiaSmi,
        copies: "nvidia_gpu_exporter v1.14.0 (utkuozdemir/nvidia_gpu_exporter), its NVML backend",
        metrics: rows().iter().map(|r| r.metric).collect(),
        labels: LABELS,
        not_published: NOT_PUBLISHED,
    });
    &TABLE
}

/// What nvidia_gpu_exporter publishes that this door does not, and why.
pub const NOT_PUBLISHED: &[(&str, &str)] = &[
    (
        "nvidia_smi_gpu_recovery_action",
        "gpuscope does not read NVML's recovery action as a value (only its events); a dashboard shows its \"no data\" there",
    ),
    (
        "the other `--query-gpu` fields",
        "a field outside gpuscope's vocabulary (docs/cli.md's table of names) is not published: identity fields nvidia_gpu_exporter also publishes as numbers (`pci.*`, `count`, `serial`), applications clocks, `encoder.stats.*`, the clock-event counters, fabric and platform fields",
    ),
    (
        "nvidia_smi_failed_scrapes_total nvidia_smi_command_exit_code nvidia_smi_nvml_return_code",
        "gpuscope's sampler does not fail as a whole (a device's failed queries are `gpuscope_device_failed_fields`); `/health` answers 503 when sampling stops",
    ),
];

/// nvidia_gpu_exporter's labels: a `uuid` on every series; the rest on `nvidia_smi_gpu_info`.
pub const LABELS: DoorLabels = DoorLabels {
    uuid: "uuid",
    uuid_form: UuidForm::Bare,
    info: Some("nvidia_smi_gpu_info"),
    index: "index",
    name: "name",
    bus_id: "pci_bus_id",
    hostname: None,
    gpu_instance_id: "gpu_instance_id",
    mig_profile: "profile",
    pod: None,
};

/// nvidia_gpu_exporter's name for the field nvidia-smi heads `header` (`memory.used [MiB]`),
/// and the factor from the number nvidia-smi prints to the metric's value (1048576 from MiB to
/// bytes); `None` for a unit it has no name for.
pub fn field_name(header: &str) -> Option<(String, f64)> {
    let (base, unit) = match header.split_once(" [") {
        Some((base, rest)) => (base, Some(rest.strip_suffix(']')?)),
        None => (header, None),
    };
    let (suffix, factor) = match unit {
        None => ("", 1.0),
        Some("W") => ("_watts", 1.0),
        Some("MHz") => ("_clock_hz", 1e6),
        Some("MiB") => ("_bytes", 1024.0 * 1024.0),
        Some("%") => ("_ratio", 0.01),
        Some("us") => ("_seconds", 1e-6),
        Some("ms") => ("_seconds", 1e-3),
        Some("seconds") => ("_seconds", 1.0),
        Some(_) => return None,
    };
    Some((
        format!("{PREFIX}_{}{suffix}", snake_case(&base.replace('.', "_"))),
        factor,
    ))
}

/// `sessionCount` as `session_count`: an underscore before a capital that starts a word
/// (`xY` or `XYz`), then all lower case.
fn snake_case(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        if i > 0 && c.is_ascii_uppercase() {
            let before = chars[i - 1];
            let after = chars.get(i + 1).copied();
            let starts_word = before.is_ascii_lowercase()
                || before.is_ascii_digit()
                || (after.is_some_and(|a| a.is_ascii_lowercase()) && before != '_');
            if starts_word {
                out.push('_');
            }
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// nvidia-smi's unit in a `--query-gpu` header for a unit of gpuscope's vocabulary: none for
/// temperatures (nvidia-smi heads them `temperature.gpu`), counts and words.
fn header_unit(vocabulary_unit: &str) -> Option<Option<&'static str>> {
    match vocabulary_unit {
        "MiB" => Some(Some("MiB")),
        "%" => Some(Some("%")),
        "W" => Some(Some("W")),
        "MHz" => Some(Some("MHz")),
        "°C" | "" => Some(None),
        _ => None,
    }
}

/// The `--query-gpu` header of a vocabulary metric, as nvidia-smi prints it.
fn header(m: &vocabulary::Metric) -> Option<String> {
    Some(match header_unit(m.unit)? {
        Some(u) => format!("{} [{u}]", m.name),
        None => m.name.to_string(),
    })
}

/// One `--query-gpu` field: its canonical name in gpuscope's vocabulary, its value as the
/// number nvidia_gpu_exporter reads from what nvidia-smi prints, and the gpuscope family with
/// the same measure.
struct Field {
    name: &'static str,
    value: fn(&DeviceSnapshot) -> Option<f64>,
    same_as: Option<SameAs>,
    differs: &'static str,
}

const MIB: u64 = 1024 * 1024;

fn flag(v: bool) -> f64 {
    if v {
        1.0
    } else {
        0.0
    }
}

fn count<T: Copy + Into<f64>>(v: &Na<T>) -> Option<f64> {
    v.value().map(|&x| x.into())
}

fn mode(v: &Na<bool>) -> Option<f64> {
    v.value().map(|&b| flag(b))
}

/// Frame-buffer memory as nvidia-smi prints it: MiB, a part of one counting as a whole.
fn fb_mib(bytes: Option<u64>) -> Option<f64> {
    bytes.map(|b| b.div_ceil(MIB) as f64)
}

/// Milliwatts as nvidia-smi's watts with two decimals.
fn watts(mw: Option<u32>) -> Option<f64> {
    mw.map(|mw| (f64::from(mw) / 10.0).round() / 100.0)
}

/// Whether clock event reason `reason` holds the clocks now (nvidia-smi's `Active`).
fn reason(d: &DeviceSnapshot, reason: ClockEventReasons) -> Option<f64> {
    let mask = *d.clock_event_reasons.value()?;
    Some(flag(
        ClockEventReasons::from_bits_retain(mask).contains(reason),
    ))
}

fn ecc_at(
    v: &Na<gpu_backend::LocationEccCounts>,
    pick: fn(&gpu_backend::LocationEccCounts) -> Option<u64>,
) -> Option<f64> {
    v.value().and_then(pick).map(|n| n as f64)
}

const fn f(
    name: &'static str,
    value: fn(&DeviceSnapshot) -> Option<f64>,
    same_as: Option<SameAs>,
) -> Field {
    Field {
        name,
        value,
        same_as,
        differs: "",
    }
}

/// The fields, in nvidia-smi's `--help-query-gpu` order.
#[rustfmt::skip]
const FIELDS: &[Field] = &[
    f("index", |d| Some(f64::from(d.id.physical_index())), None),
    f("pcie.link.gen.current", |d| count(&d.pcie_link_generation), None),
    f("pcie.link.gen.max", |d| count(&d.max_pcie_link_generation), None),
    f("pcie.link.width.current", |d| count(&d.pcie_link_width), None),
    f("pcie.link.width.max", |d| count(&d.max_pcie_link_width), None),
    f("persistence_mode", |d| mode(&d.persistence_mode), None),
    f("fan.speed", |d| count(&d.fan_speed), same(n::DEVICE_FAN_SPEED_RATIO, 1.0)),
    Field {
        name: "pstate",
        value: |d| d.performance_state.value().and_then(|&p| PerformanceState::known(p)).map(|s| f64::from(s.nvml_code())),
        same_as: same(n::DEVICE_PERFORMANCE_STATE, 1.0),
        differs: "",
    },
    f("clocks_event_reasons.supported", |d| d.supported_clock_event_reasons.value().map(|&m| m as f64), None),
    f("clocks_event_reasons.active", |d| d.clock_event_reasons.value().map(|&m| m as f64), None),
    f("clocks_event_reasons.gpu_idle", |d| reason(d, ClockEventReasons::GPU_IDLE), same_where(n::DEVICE_CLOCK_EVENT_REASON, &[("reason", "gpu_idle")], 1.0)),
    f("clocks_event_reasons.applications_clocks_setting", |d| reason(d, ClockEventReasons::APPLICATIONS_CLOCKS_SETTING), same_where(n::DEVICE_CLOCK_EVENT_REASON, &[("reason", "applications_clocks_setting")], 1.0)),
    f("clocks_event_reasons.sw_power_cap", |d| reason(d, ClockEventReasons::SW_POWER_CAP), same_where(n::DEVICE_CLOCK_EVENT_REASON, &[("reason", "sw_power_cap")], 1.0)),
    f("clocks_event_reasons.hw_slowdown", |d| reason(d, ClockEventReasons::HW_SLOWDOWN), same_where(n::DEVICE_CLOCK_EVENT_REASON, &[("reason", "hw_slowdown")], 1.0)),
    f("clocks_event_reasons.hw_thermal_slowdown", |d| reason(d, ClockEventReasons::HW_THERMAL_SLOWDOWN), same_where(n::DEVICE_CLOCK_EVENT_REASON, &[("reason", "hw_thermal_slowdown")], 1.0)),
    f("clocks_event_reasons.hw_power_brake_slowdown", |d| reason(d, ClockEventReasons::HW_POWER_BRAKE_SLOWDOWN), same_where(n::DEVICE_CLOCK_EVENT_REASON, &[("reason", "hw_power_brake_slowdown")], 1.0)),
    f("clocks_event_reasons.sw_thermal_slowdown", |d| reason(d, ClockEventReasons::SW_THERMAL_SLOWDOWN), same_where(n::DEVICE_CLOCK_EVENT_REASON, &[("reason", "sw_thermal_slowdown")], 1.0)),
    f("clocks_event_reasons.sync_boost", |d| reason(d, ClockEventReasons::SYNC_BOOST), same_where(n::DEVICE_CLOCK_EVENT_REASON, &[("reason", "sync_boost")], 1.0)),
    f("memory.total", |d| fb_mib(d.memory.value().map(|m| m.total)), same(n::DEVICE_MEMORY_TOTAL_BYTES, 1.0)),
    f("memory.reserved", |d| fb_mib(d.memory.value().and_then(|m| m.reserved)), None),
    f("memory.used", |d| fb_mib(d.memory.value().map(|m| m.used)), same(n::DEVICE_MEMORY_USED_BYTES, 1.0)),
    f("memory.free", |d| fb_mib(d.memory.value().map(|m| m.free)), same(n::DEVICE_MEMORY_FREE_BYTES, 1.0)),
    Field {
        name: "compute_mode",
        value: |d| d.compute_mode.value().map(|m| match m {
            ComputeMode::Default => 0.0,
            ComputeMode::ExclusiveThread => 1.0,
            ComputeMode::Prohibited => 2.0,
            ComputeMode::ExclusiveProcess => 3.0,
        }),
        same_as: None,
        differs: "",
    },
    f("utilization.gpu", |d| count(&d.utilization.clone().map(|u| u.gpu)), same(n::DEVICE_UTILIZATION_RATIO, 1.0)),
    f("utilization.memory", |d| count(&d.utilization.clone().map(|u| u.memory)), same(n::DEVICE_MEMORY_BANDWIDTH_UTILIZATION_RATIO, 1.0)),
    f("utilization.encoder", |d| count(&d.encoder.clone().map(|c| c.utilization)), same(n::DEVICE_ENCODER_UTILIZATION_RATIO, 1.0)),
    f("utilization.decoder", |d| count(&d.decoder.clone().map(|c| c.utilization)), same(n::DEVICE_DECODER_UTILIZATION_RATIO, 1.0)),
    f("ecc.mode.current", |d| d.ecc_mode.value().map(|m| flag(m.current)), None),
    f("ecc.errors.corrected.volatile.device_memory", |d| ecc_at(&d.ecc_by_location.device_memory, |c| c.volatile_corrected), same_where(n::DEVICE_ECC_ERRORS_BY_LOCATION, &[("location", "device_memory"), ("counter", "volatile"), ("kind", "corrected")], 1.0)),
    f("ecc.errors.corrected.volatile.sram", |d| ecc_at(&d.ecc_by_location.sram, |c| c.volatile_corrected), same_where(n::DEVICE_ECC_ERRORS_BY_LOCATION, &[("location", "sram"), ("counter", "volatile"), ("kind", "corrected")], 1.0)),
    f("ecc.errors.corrected.volatile.total", |d| count_u64(&d.ecc_errors.volatile_corrected), same_where(n::DEVICE_ECC_ERRORS, &[("error", "corrected"), ("counter", "volatile")], 1.0)),
    f("ecc.errors.corrected.aggregate.device_memory", |d| ecc_at(&d.ecc_by_location.device_memory, |c| c.aggregate_corrected), same_where(n::DEVICE_ECC_ERRORS_BY_LOCATION, &[("location", "device_memory"), ("counter", "aggregate"), ("kind", "corrected")], 1.0)),
    f("ecc.errors.corrected.aggregate.sram", |d| ecc_at(&d.ecc_by_location.sram, |c| c.aggregate_corrected), same_where(n::DEVICE_ECC_ERRORS_BY_LOCATION, &[("location", "sram"), ("counter", "aggregate"), ("kind", "corrected")], 1.0)),
    f("ecc.errors.corrected.aggregate.total", |d| count_u64(&d.ecc_errors.aggregate_corrected), same_where(n::DEVICE_ECC_ERRORS, &[("error", "corrected"), ("counter", "aggregate")], 1.0)),
    f("ecc.errors.uncorrected.volatile.device_memory", |d| ecc_at(&d.ecc_by_location.device_memory, |c| c.volatile_uncorrected), same_where(n::DEVICE_ECC_ERRORS_BY_LOCATION, &[("location", "device_memory"), ("counter", "volatile"), ("kind", "uncorrected")], 1.0)),
    f("ecc.errors.uncorrected.volatile.sram", |d| ecc_at(&d.ecc_by_location.sram, |c| c.volatile_uncorrected), same_where(n::DEVICE_ECC_ERRORS_BY_LOCATION, &[("location", "sram"), ("counter", "volatile"), ("kind", "uncorrected")], 1.0)),
    f("ecc.errors.uncorrected.volatile.total", |d| count_u64(&d.ecc_errors.volatile_uncorrected), same_where(n::DEVICE_ECC_ERRORS, &[("error", "uncorrected"), ("counter", "volatile")], 1.0)),
    f("ecc.errors.uncorrected.aggregate.device_memory", |d| ecc_at(&d.ecc_by_location.device_memory, |c| c.aggregate_uncorrected), same_where(n::DEVICE_ECC_ERRORS_BY_LOCATION, &[("location", "device_memory"), ("counter", "aggregate"), ("kind", "uncorrected")], 1.0)),
    f("ecc.errors.uncorrected.aggregate.sram", |d| ecc_at(&d.ecc_by_location.sram, |c| c.aggregate_uncorrected), same_where(n::DEVICE_ECC_ERRORS_BY_LOCATION, &[("location", "sram"), ("counter", "aggregate"), ("kind", "uncorrected")], 1.0)),
    f("ecc.errors.uncorrected.aggregate.total", |d| count_u64(&d.ecc_errors.aggregate_uncorrected), same_where(n::DEVICE_ECC_ERRORS, &[("error", "uncorrected"), ("counter", "aggregate")], 1.0)),
    f("retired_pages.single_bit_ecc.count", |d| d.retired_pages_single_bit.value().map(|p| p.len() as f64), same_where(n::DEVICE_RETIRED_PAGES, &[("cause", "single_bit")], 1.0)),
    f("retired_pages.double_bit.count", |d| d.retired_pages_double_bit.value().map(|p| p.len() as f64), same_where(n::DEVICE_RETIRED_PAGES, &[("cause", "double_bit")], 1.0)),
    f("retired_pages.pending", |d| mode(&d.retired_pages_pending), same(n::DEVICE_RETIRED_PAGES_PENDING, 1.0)),
    f("remapped_rows.correctable", |d| d.remapped_rows.value().map(|r| f64::from(r.correctable)), same_where(n::DEVICE_REMAPPED_ROWS, &[("cause", "correctable")], 1.0)),
    f("remapped_rows.uncorrectable", |d| d.remapped_rows.value().map(|r| f64::from(r.uncorrectable)), same_where(n::DEVICE_REMAPPED_ROWS, &[("cause", "uncorrectable")], 1.0)),
    f("remapped_rows.pending", |d| d.remapped_rows.value().map(|r| flag(r.pending)), same(n::DEVICE_ROW_REMAP_PENDING, 1.0)),
    f("remapped_rows.failure", |d| d.remapped_rows.value().map(|r| flag(r.failure)), same(n::DEVICE_ROW_REMAP_FAILURE, 1.0)),
    f("temperature.gpu", |d| count(&d.temperature), same(n::DEVICE_TEMPERATURE_CELSIUS, 1.0)),
    f("temperature.memory", |d| count(&d.memory_temperature), same(n::DEVICE_MEMORY_TEMPERATURE_CELSIUS, 1.0)),
    f("power.draw", |d| watts(d.power_usage.value().copied()), same(n::DEVICE_POWER_USAGE_WATTS, 1.0)),
    f("power.limit", |d| watts(d.power_limit.value().copied()), same(n::DEVICE_POWER_LIMIT_WATTS, 1.0)),
    f("enforced.power.limit", |d| watts(d.enforced_power_limit.value().copied()), same(n::DEVICE_POWER_ENFORCED_LIMIT_WATTS, 1.0)),
    f("power.default_limit", |d| watts(d.power_default_limit.value().copied()), same(n::DEVICE_POWER_DEFAULT_LIMIT_WATTS, 1.0)),
    f("power.min_limit", |d| watts(d.power_limit_constraints.value().map(|c| c.min_mw)), same(n::DEVICE_POWER_MIN_LIMIT_WATTS, 1.0)),
    f("power.max_limit", |d| watts(d.power_limit_constraints.value().map(|c| c.max_mw)), same(n::DEVICE_POWER_MAX_LIMIT_WATTS, 1.0)),
    f("clocks.current.graphics", |d| count(&d.clocks.graphics), same_where(n::DEVICE_CLOCK_HERTZ, &[("clock", "graphics")], 1.0)),
    f("clocks.current.sm", |d| count(&d.clocks.sm), same_where(n::DEVICE_CLOCK_HERTZ, &[("clock", "sm")], 1.0)),
    f("clocks.current.memory", |d| count(&d.clocks.memory), same_where(n::DEVICE_CLOCK_HERTZ, &[("clock", "memory")], 1.0)),
    f("clocks.current.video", |d| count(&d.clocks.video), same_where(n::DEVICE_CLOCK_HERTZ, &[("clock", "video")], 1.0)),
    f("clocks.max.graphics", |d| count(&d.max_clocks.graphics), same_where(n::DEVICE_CLOCK_MAX_HERTZ, &[("clock", "graphics")], 1.0)),
    f("clocks.max.sm", |d| count(&d.max_clocks.sm), same_where(n::DEVICE_CLOCK_MAX_HERTZ, &[("clock", "sm")], 1.0)),
    f("clocks.max.memory", |d| count(&d.max_clocks.memory), same_where(n::DEVICE_CLOCK_MAX_HERTZ, &[("clock", "memory")], 1.0)),
    f("mig.mode.current", |d| d.mig_mode.value().map(|m| flag(m.current)), None),
];

fn count_u64(v: &Na<u64>) -> Option<f64> {
    v.value().map(|&n| n as f64)
}

/// How a row's samples are made.
#[derive(Clone, Copy)]
enum Value {
    /// A `--query-gpu` field: what nvidia-smi prints, times the factor of its unit.
    Field(fn(&DeviceSnapshot) -> Option<f64>, f64),
    /// `nvidia_smi_gpu_info`.
    GpuInfo,
    /// Energy since the driver loaded, joules.
    Energy,
    /// PCIe throughput, one direction.
    Pcie(fn(&DeviceSnapshot) -> Option<u32>),
    /// XID errors per code.
    XidCount,
    /// When each XID code was last seen.
    XidLast,
    /// `nvidia_smi_mig_info`.
    MigInfo,
    /// A GPU instance's memory.
    MigMemory(fn(&MemoryInfo) -> Option<u64>),
    /// A GPU instance's GPM activity.
    MigActivity(fn(&GpmMetrics) -> Option<f64>),
    /// Compute processes: info, memory, count per GPU, whether the lists were read.
    AppInfo,
    AppMemory,
    AppCount,
    AppsRead,
    /// The exporter's sample: read, when, how long.
    CollectSuccess,
    CollectTimestamp,
    CollectDuration,
}

/// One metric and how its samples are made.
struct Row {
    metric: DoorMetric,
    value: Value,
}

/// A row that is not a `--query-gpu` field.
const fn special(metric: DoorMetric, value: Value) -> Row {
    Row { metric, value }
}

/// The labels of `nvidia_smi_gpu_info` besides `uuid`, in nvidia_gpu_exporter's order.
const INFO_LABELS: &[&str] = &[
    "name",
    "driver_model_current",
    "driver_model_pending",
    "vbios_version",
    "driver_version",
    "pci_bus_id",
    "serial",
    "compute_cap",
    "pci_sub_device_id",
    "index",
    "cuda_version",
];

const MIG_INFO_LABELS: &[&str] = &[
    "mig_uuid",
    "gpu_instance_id",
    "compute_instance_id",
    "profile",
];
const GI_LABELS: &[&str] = &["gpu_instance_id"];
const APP_LABELS: &[&str] = &["pid", "process_name"];

/// The rows that are not `--query-gpu` fields.
#[rustfmt::skip]
fn specials() -> Vec<Row> {
    use Scope::{Exporter, Gpu, GpuInstance, MigDevice, Process};
    use Kind::{Counter, Gauge};
    vec![
        special(metric("nvidia_smi_gpu_info", Gauge, "", "A metric with a constant '1' value labeled by gpu uuid, name, driver_model_current, driver_model_pending, vbios_version, driver_version, pci_bus_id, serial, compute_cap, pci_sub_device_id, index, cuda_version.", "name, uuid, driver model, VBIOS, driver and CUDA versions, PCI, serial, compute capability, index", Gpu, INFO_LABELS, same(n::DEVICE_INFO, 1.0), "a value gpuscope cannot read is `[N/A]`, as nvidia-smi prints it; `cuda_version` is left out where the driver does not say it"), Value::GpuInfo),
        special(metric("nvidia_smi_energy_joules", Counter, "joules", "Total energy consumed by the GPU in joules since the driver was last loaded.", "total_energy_consumption (mJ)", Gpu, &[], same(n::DEVICE_ENERGY_CONSUMPTION_JOULES, 1.0), "read every 30 s, as gpuscope reads its costly queries"), Value::Energy),
        special(metric("nvidia_smi_pcie_throughput_tx_bytes_per_second", Gauge, "bytes/s", "PCIe traffic transmitted by the GPU, sampled by the driver over a dedicated 20ms window.", "pcie_throughput (TX, KB/s)", Gpu, &[], None, "always published (nvidia_gpu_exporter: with `--collect.pcie-throughput`); read every 30 s; NVML's KB taken as 1000 bytes as nvidia_gpu_exporter does (gpuscope's own family takes 1024)"), Value::Pcie(|d| d.pcie_tx_throughput.value().copied())),
        special(metric("nvidia_smi_pcie_throughput_rx_bytes_per_second", Gauge, "bytes/s", "PCIe traffic received by the GPU, sampled by the driver over a dedicated 20ms window.", "pcie_throughput (RX, KB/s)", Gpu, &[], None, "as the TX one"), Value::Pcie(|d| d.pcie_rx_throughput.value().copied())),
        special(metric("nvidia_smi_xid_errors", Counter, "", "Number of XID errors observed on the GPU since the exporter started.", "events (NVML's event set, XID kind)", Gpu, &["xid"], same(n::DEVICE_XID_ERRORS, 1.0), "counted among the newest 256 events kept per GPU"), Value::XidCount),
        special(metric("nvidia_smi_xid_last_timestamp_seconds", Gauge, "seconds", "Unix timestamp of the most recently observed XID error.", "events: the time the event was received", Gpu, &["xid"], None, ""), Value::XidLast),
        special(metric("nvidia_smi_mig_info", Gauge, "", "A metric with a constant '1' value labeled by the identity of a MIG device.", "MIG device: UUID, GPU and compute instance ids, profile from its name", MigDevice, MIG_INFO_LABELS, None, ""), Value::MigInfo),
        special(metric("nvidia_smi_mig_memory_total_bytes", Gauge, "bytes", "Memory of the GPU instance (total).", "memory_info of the GPU instance's first MIG device", GpuInstance, GI_LABELS, same(n::DEVICE_MEMORY_TOTAL_BYTES, 1.0), ""), Value::MigMemory(|m| Some(m.total))),
        special(metric("nvidia_smi_mig_memory_used_bytes", Gauge, "bytes", "Memory of the GPU instance (used).", "memory_info of the GPU instance's first MIG device", GpuInstance, GI_LABELS, same(n::DEVICE_MEMORY_USED_BYTES, 1.0), ""), Value::MigMemory(|m| Some(m.used))),
        special(metric("nvidia_smi_mig_memory_free_bytes", Gauge, "bytes", "Memory of the GPU instance (free).", "memory_info of the GPU instance's first MIG device", GpuInstance, GI_LABELS, same(n::DEVICE_MEMORY_FREE_BYTES, 1.0), ""), Value::MigMemory(|m| Some(m.free))),
        special(metric("nvidia_smi_mig_memory_reserved_bytes", Gauge, "bytes", "Memory of the GPU instance (reserved).", "memory_info of the GPU instance's first MIG device", GpuInstance, GI_LABELS, None, ""), Value::MigMemory(|m| m.reserved)),
        special(metric("nvidia_smi_mig_graphics_activity_ratio", Gauge, "ratio", "Fraction of time the GPU instance's graphics/compute engines were active.", "gpm_metrics: graphics_activity", GpuInstance, GI_LABELS, same(n::DEVICE_GPM_GRAPHICS_ENGINE_ACTIVE_RATIO, 1.0), "the activity over gpuscope's GPM window (30 s)"), Value::MigActivity(|m| m.graphics_activity.map(|p| p / 100.0))),
        special(metric("nvidia_smi_mig_sm_activity_ratio", Gauge, "ratio", "Fraction of time the GPU instance's SMs were active.", "gpm_metrics: sm_activity", GpuInstance, GI_LABELS, same(n::DEVICE_GPM_SM_ACTIVE_RATIO, 1.0), "as above"), Value::MigActivity(|m| m.sm_activity.map(|p| p / 100.0))),
        special(metric("nvidia_smi_mig_sm_occupancy_ratio", Gauge, "ratio", "Fraction of the GPU instance's resident warp slots that were occupied.", "gpm_metrics: sm_occupancy", GpuInstance, GI_LABELS, same(n::DEVICE_GPM_SM_OCCUPANCY_RATIO, 1.0), "as above"), Value::MigActivity(|m| m.sm_occupancy.map(|p| p / 100.0))),
        special(metric("nvidia_smi_mig_tensor_activity_ratio", Gauge, "ratio", "Fraction of time the GPU instance's tensor pipes were active.", "gpm_metrics: tensor_activity", GpuInstance, GI_LABELS, same_where(n::DEVICE_GPM_PIPE_ACTIVE_RATIO, &[("pipe", "tensor")], 1.0), "as above"), Value::MigActivity(|m| m.tensor_activity.map(|p| p / 100.0))),
        special(metric("nvidia_smi_mig_pcie_throughput_tx_bytes_per_second", Gauge, "bytes/s", "PCIe traffic transmitted by the GPU instance.", "gpm_metrics: pcie_tx (MiB/s)", GpuInstance, GI_LABELS, same(n::DEVICE_GPM_PCIE_TRANSMIT_BYTES_PER_SECOND, 1.0), "as above"), Value::MigActivity(|m| m.pcie_tx.map(|r| r * MIB as f64))),
        special(metric("nvidia_smi_mig_pcie_throughput_rx_bytes_per_second", Gauge, "bytes/s", "PCIe traffic received by the GPU instance.", "gpm_metrics: pcie_rx (MiB/s)", GpuInstance, GI_LABELS, same(n::DEVICE_GPM_PCIE_RECEIVE_BYTES_PER_SECOND, 1.0), "as above"), Value::MigActivity(|m| m.pcie_rx.map(|r| r * MIB as f64))),
        special(metric("nvidia_smi_compute_app_info", Gauge, "", "A metric with a constant '1' value labeled by the identity of a process with a compute context on a GPU.", "compute processes, with --processes", Process, APP_LABELS, None, "`process_name` is the process's program as gpuscope reads it from /proc (nvidia-smi's when the driver lets it read the name)"), Value::AppInfo),
        special(metric("nvidia_smi_compute_app_used_memory_bytes", Gauge, "bytes", "GPU memory used by the process.", "compute processes: used GPU memory, in nvidia-smi's whole MiB", Process, APP_LABELS, same(n::PROCESS_GPU_MEMORY_BYTES, 1.0), ""), Value::AppMemory),
        special(metric("nvidia_smi_compute_apps", Gauge, "", "Number of processes with a compute context on the GPU.", "compute processes, with --processes", Gpu, &[], None, ""), Value::AppCount),
        special(metric("nvidia_smi_compute_apps_last_collect_success", Gauge, "", "Whether the most recent per-process collection succeeded (1) or not (0).", "whether every GPU's compute process list was read", Exporter, &[], None, ""), Value::AppsRead),
        special(metric("nvidia_smi_last_collect_success", Gauge, "", "Whether the most recent collection succeeded (1) or not (0).", "the sample served (1: the exporter serves only samples it took)", Exporter, &[], None, "always 1: a sample gpuscope cannot take makes `/metrics` answer 503 instead"), Value::CollectSuccess),
        special(metric("nvidia_smi_last_collect_success_timestamp_seconds", Gauge, "seconds", "Unix timestamp of the most recent successful collection.", "when the sample served was taken", Exporter, &[], same(n::EXPORTER_SAMPLE_TIMESTAMP_SECONDS, 1.0), ""), Value::CollectTimestamp),
        special(metric("nvidia_smi_last_collect_duration_seconds", Gauge, "seconds", "Duration of the most recent collection.", "how long taking the sample served took", Exporter, &[], same(n::EXPORTER_SAMPLE_DURATION_SECONDS, 1.0), ""), Value::CollectDuration),
    ]
}

/// Each `--query-gpu` field's name, header and factor (kept for the process's life, so that the
/// table's names are `'static`); `None` for a field that is not a canonical name of the
/// vocabulary with a unit nvidia-smi writes, which a test rules out.
static FIELD_NAMES: LazyLock<Vec<Option<(String, String, f64)>>> = LazyLock::new(|| {
    FIELDS
        .iter()
        .map(|f| {
            let m = vocabulary::find(f.name).filter(|m| m.name == f.name)?;
            let head = header(m)?;
            let (name, factor) = field_name(&head)?;
            Some((name, head, factor))
        })
        .collect()
});

/// Every row: `nvidia_smi_gpu_info`, the `--query-gpu` fields, then the others.
fn rows() -> &'static [Row] {
    static ROWS: LazyLock<Vec<Row>> = LazyLock::new(|| {
        let mut specials = specials();
        let info = specials.remove(0);
        let fields = FIELDS
            .iter()
            .zip(FIELD_NAMES.iter())
            .filter_map(|(f, named)| {
                let (name, head, factor) = named.as_ref()?;
                Some(Row {
                    metric: DoorMetric {
                        name,
                        kind: Kind::Gauge,
                        unit: published_unit(name),
                        help: head,
                        source: f.name,
                        scope: Scope::Gpu,
                        extra_labels: &[],
                        same_as: f.same_as,
                        differs: f.differs,
                    },
                    value: Value::Field(f.value, *factor),
                })
            });
        std::iter::once(info)
            .chain(fields)
            .chain(specials)
            .collect()
    });
    &ROWS
}

/// The unit of a field's value as published.
fn published_unit(name: &str) -> &'static str {
    [
        ("_bytes", "bytes"),
        ("_ratio", "ratio"),
        ("_watts", "W"),
        ("_clock_hz", "Hz"),
        ("_seconds", "seconds"),
    ]
    .into_iter()
    .find(|(suffix, _)| name.ends_with(suffix))
    .map_or(
        if name.contains("temperature") {
            "°C"
        } else {
            ""
        },
        |(_, unit)| unit,
    )
}

/// `uuid`'s label value for a physical GPU, `None` when its UUID is N/A (such a GPU has no
/// series: nothing would tell them apart).
fn uuid_label(d: &DeviceSnapshot) -> Option<String> {
    d.uuid.value().map(|u| LABELS.uuid_form.write(u))
}

/// A value of `nvidia_smi_gpu_info`, `[N/A]` where gpuscope cannot tell (as nvidia-smi prints it).
fn or_na(v: Option<String>) -> String {
    v.unwrap_or_else(|| "[N/A]".to_string())
}

fn driver_model(m: gpu_backend::DriverModel) -> &'static str {
    match m {
        gpu_backend::DriverModel::Wddm => "WDDM",
        gpu_backend::DriverModel::Wdm => "TCC",
        gpu_backend::DriverModel::Mcdm => "MCDM",
    }
}

/// `nvidia_smi_gpu_info`'s labels of `d`.
fn info_labels(d: &DeviceSnapshot, uuid: &str, options: &Options) -> Labels {
    let models = d.driver_model.value();
    let values = [
        or_na(d.name.value().cloned()),
        or_na(models.map(|m| driver_model(m.current).to_string())),
        or_na(models.map(|m| driver_model(m.pending).to_string())),
        or_na(d.vbios_version.value().cloned()),
        or_na(options.driver_version.clone()),
        or_na(d.pci.value().map(|p| p.bus_id.clone())),
        or_na(d.serial.value().cloned()),
        or_na(
            d.cuda_compute_capability
                .value()
                .map(|c| format!("{}.{}", c.major, c.minor)),
        ),
        or_na(
            d.pci
                .value()
                .map(|p| format!("0x{:08X}", p.pci_subsystem_id)),
        ),
        d.id.physical_index().to_string(),
        options.cuda_driver_version.clone().unwrap_or_default(),
    ];
    let mut labels: Labels = vec![(LABELS.uuid, uuid.to_string())];
    labels.extend(INFO_LABELS.iter().copied().zip(values));
    labels
}

/// The door's families of one sample.
pub(crate) fn families(inputs: &Inputs, options: &Options) -> Vec<Family> {
    let rows = rows();
    let mut out = empty_families(&table().metrics);
    let devices = &inputs.snapshots.devices;
    let gpus: Vec<(&DeviceSnapshot, String)> = devices
        .iter()
        .filter(|d| !d.id.is_mig())
        .filter_map(|d| Some((d, uuid_label(d)?)))
        .collect();
    let uuid_of = |index: u32| {
        gpus.iter()
            .find(|(d, _)| d.id.physical_index() == index)
            .map(|(_, u)| u.clone())
    };
    let apps = compute_apps(inputs, options, &uuid_of);
    for (family, row) in out.iter_mut().zip(rows) {
        match row.value {
            Value::Field(value, factor) => {
                for (d, uuid) in &gpus {
                    let v = value(d).map(|v| v * factor);
                    put(family, vec![(LABELS.uuid, uuid.clone())], v);
                }
            }
            Value::GpuInfo => {
                for (d, uuid) in &gpus {
                    put(family, info_labels(d, uuid, options), Some(1.0));
                }
            }
            Value::Energy => {
                for (d, uuid) in &gpus {
                    let j = d
                        .total_energy_consumption
                        .value()
                        .map(|&mj| mj as f64 / 1000.0);
                    put(family, vec![(LABELS.uuid, uuid.clone())], j);
                }
            }
            Value::Pcie(pick) => {
                for (d, uuid) in &gpus {
                    // NVML's KB/s, taken as 1000 bytes as nvidia_gpu_exporter does.
                    let v = pick(d).map(|kb| f64::from(kb) * 1000.0);
                    put(family, vec![(LABELS.uuid, uuid.clone())], v);
                }
            }
            Value::XidCount | Value::XidLast => {
                for (d, uuid) in &gpus {
                    xids(family, d, uuid, matches!(row.value, Value::XidLast));
                }
            }
            Value::MigInfo => {
                for m in devices {
                    let DeviceId::Mig { parent, .. } = m.id else {
                        continue;
                    };
                    let (Some(uuid), Some(mig_uuid)) = (uuid_of(parent), m.uuid.value()) else {
                        continue;
                    };
                    let values = [
                        LABELS.uuid_form.write(mig_uuid),
                        m.gpu_instance_id
                            .value()
                            .map_or(String::new(), u32::to_string),
                        m.compute_instance_id
                            .value()
                            .map_or(String::new(), u32::to_string),
                        m.name
                            .value()
                            .map_or(String::new(), |n| mig_profile(n).to_string()),
                    ];
                    let mut labels: Labels = vec![(LABELS.uuid, uuid)];
                    labels.extend(MIG_INFO_LABELS.iter().copied().zip(values));
                    put(family, labels, Some(1.0));
                }
            }
            Value::MigMemory(_) | Value::MigActivity(_) => {
                for gi in gpu_instances(devices) {
                    let Some(uuid) = uuid_of(gi.parent) else {
                        continue;
                    };
                    let first = gi.first;
                    let v = match row.value {
                        Value::MigMemory(pick) => {
                            first.memory.value().and_then(pick).map(|b| b as f64)
                        }
                        Value::MigActivity(pick) => first.gpm.value().and_then(pick),
                        _ => None,
                    };
                    let labels = vec![
                        (LABELS.uuid, uuid),
                        (LABELS.gpu_instance_id, gi.id.to_string()),
                    ];
                    put(family, labels, v);
                }
            }
            Value::AppInfo | Value::AppMemory => {
                if let Some(apps) = &apps {
                    for a in &apps.processes {
                        let v = match row.value {
                            Value::AppInfo => Some(1.0),
                            _ => a.memory_mib.map(|m| (m * MIB) as f64),
                        };
                        let labels = vec![
                            (LABELS.uuid, a.uuid.clone()),
                            ("pid", a.pid.to_string()),
                            ("process_name", a.name.clone()),
                        ];
                        put(family, labels, v);
                    }
                }
            }
            Value::AppCount => {
                if let Some(apps) = &apps {
                    for (_, uuid) in &gpus {
                        let n = apps.processes.iter().filter(|a| &a.uuid == uuid).count();
                        put(family, vec![(LABELS.uuid, uuid.clone())], Some(n as f64));
                    }
                }
            }
            Value::AppsRead => {
                if options.processes {
                    put(family, Vec::new(), Some(flag(apps.is_some())));
                }
            }
            Value::CollectSuccess => put(family, Vec::new(), Some(1.0)),
            Value::CollectTimestamp => put(family, Vec::new(), Some(inputs.sample_time_s.floor())),
            Value::CollectDuration => put(family, Vec::new(), Some(inputs.sample_duration_s)),
        }
    }
    out
}

/// `family`'s XID samples of one GPU: per code among its events, how many (`last` false) or
/// when the newest came, seconds since the Unix epoch (`last` true). None where events are N/A.
fn xids(family: &mut Family, d: &DeviceSnapshot, uuid: &str, last: bool) {
    let Some(events) = d.events.value() else {
        return;
    };
    for code in d.xid_codes() {
        let of_code = events
            .iter()
            .filter(|e| e.kind == gpu_backend::EventKind::Xid && e.data == code);
        let v = if last {
            of_code
                .map(|e| e.timestamp_us)
                .max()
                .map(|us| us as f64 / 1e6)
        } else {
            Some(of_code.count() as f64)
        };
        let labels = vec![(LABELS.uuid, uuid.to_string()), ("xid", code.to_string())];
        put(family, labels, v);
    }
}

/// One compute process as nvidia-smi lists it.
struct App {
    uuid: String,
    pid: u32,
    name: String,
    /// Used GPU memory in whole MiB (nvidia-smi's, to the nearest); `None` when N/A.
    memory_mib: Option<u64>,
}

/// The compute processes of every GPU (a process in a MIG device on its GPU), each (GPU, PID)
/// once.
struct Apps {
    processes: Vec<App>,
}

/// The compute processes, with `--processes`; `None` without it, or when a GPU's compute
/// process list could not be read (then no per-process series, as nvidia_gpu_exporter does:
/// a list that cannot be read is not an idle GPU).
fn compute_apps(
    inputs: &Inputs,
    options: &Options,
    uuid_of: &dyn Fn(u32) -> Option<String>,
) -> Option<Apps> {
    if !options.processes {
        return None;
    }
    let unread = inputs.snapshots.devices.iter().any(|d| {
        d.process_list_errors
            .iter()
            .any(|e| e.field == "compute_processes")
    });
    if unread {
        return None;
    }
    let mut seen = BTreeSet::new();
    let mut processes = Vec::new();
    for p in &inputs.snapshots.processes {
        if !matches!(
            p.kind,
            Some(ProcessKind::Compute | ProcessKind::ComputeGraphics)
        ) {
            continue;
        }
        let index = p.device.physical_index();
        let Some(uuid) = uuid_of(index) else { continue };
        if !seen.insert((index, p.pid)) {
            continue;
        }
        let name = p
            .host
            .cmdline
            .as_ref()
            .and_then(|c| c.first())
            .filter(|a| !a.is_empty())
            .or(p.host.name.as_ref())
            .cloned()
            .unwrap_or_else(|| "[N/A]".to_string());
        processes.push(App {
            uuid,
            pid: p.pid,
            name,
            memory_mib: p.gpu_memory.map(nearest_mib),
        });
    }
    Some(Apps { processes })
}

/// Bytes in MiB to the nearest, a half to the even one, as nvidia-smi prints a process's memory.
fn nearest_mib(bytes: u64) -> u64 {
    let (q, r) = (bytes / MIB, bytes % MIB);
    if r > MIB / 2 || (r == MIB / 2 && q % 2 == 1) {
        q + 1
    } else {
        q
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A field the vocabulary does not name, or names with a unit nvidia-smi does not write,
    /// would silently be left out of the door.
    #[test]
    fn every_field_is_a_vocabulary_metric_with_a_unit_nvidia_smi_writes() {
        for (f, named) in FIELDS.iter().zip(FIELD_NAMES.iter()) {
            assert!(named.is_some(), "{}", f.name);
        }
        let names: Vec<&str> = FIELDS.iter().map(|f| f.name).collect();
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "a field twice");
        assert_eq!(rows()[0].metric.name, "nvidia_smi_gpu_info");
    }
}
