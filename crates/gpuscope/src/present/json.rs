//! The view of a snapshot that `snapshot --json` writes (docs/snapshot-json.md), and that the
//! text views of `snapshot`, `info`, `stat`, `smi` and `--query` are made from.
//!
//! The JSON form is kept stable: N/A is `null`, and an answer that failed for another reason is
//! `null` too, with the failure listed in the device's `errors`.

use gpu_backend::DeviceId;
use gpu_devices::{DeviceIdentity, DeviceSnapshot, Na};
use gpu_processes::{GpuProcess, ProcessCollector};
use serde::Serialize;

/// Version of the JSON document's shape.
pub const JSON_SCHEMA: &str = "gpuscope.snapshot/1";

/// The whole snapshot.
#[derive(Debug, Serialize)]
pub struct SnapshotView {
    /// [`JSON_SCHEMA`].
    pub schema: &'static str,
    /// Where the answers came from.
    pub source: String,
    /// The host's name (the recorded machine's, for a replay); `None` when it cannot be read.
    pub hostname: Option<String>,
    /// When the sample was taken, RFC 3339 in UTC with milliseconds (the recorded time of the
    /// frame, for a replay).
    pub time: String,
    /// The same instant, milliseconds since the Unix epoch.
    pub time_unix_ms: u64,
    /// Driver version.
    pub driver_version: Option<String>,
    /// CUDA driver version, `major.minor`.
    pub cuda_driver_version: Option<String>,
    /// NVML version.
    pub nvml_version: Option<String>,
    /// Failures of system-wide queries, other than N/A.
    pub errors: Vec<JsonFieldError>,
    /// Physical devices, each followed by its MIG devices.
    pub devices: Vec<DeviceView>,
}

/// A query that failed with something other than "not available", as `snapshot --json` writes
/// it (the CLI's JSON form of `gpu_devices::FieldError`).
#[derive(Debug, Serialize, PartialEq)]
pub struct JsonFieldError {
    /// Which query.
    pub field: String,
    /// What the backend said.
    pub error: String,
}

/// One device.
#[derive(Debug, Serialize)]
pub struct DeviceView {
    /// The device, for joining processes; not printed.
    #[serde(skip)]
    pub device: DeviceId,
    /// Who the device is: `id`, `index`, `mig_index`, `name`, `uuid`, `bus_id`.
    #[serde(flatten)]
    pub identity: DeviceIdentity,
    pub memory_total_bytes: Option<u64>,
    pub memory_used_bytes: Option<u64>,
    pub memory_free_bytes: Option<u64>,
    pub memory_reserved_bytes: Option<u64>,
    pub gpu_utilization_percent: Option<u32>,
    pub memory_utilization_percent: Option<u32>,
    pub encoder_utilization_percent: Option<u32>,
    pub decoder_utilization_percent: Option<u32>,
    pub temperature_celsius: Option<u32>,
    pub fan_speed_percent: Option<u32>,
    pub power_usage_watts: Option<f64>,
    pub power_limit_watts: Option<f64>,
    pub power_default_limit_watts: Option<f64>,
    pub performance_state: Option<String>,
    pub graphics_clock_mhz: Option<u32>,
    pub sm_clock_mhz: Option<u32>,
    pub memory_clock_mhz: Option<u32>,
    pub persistence_mode: Option<bool>,
    pub display_active: Option<bool>,
    pub mig_mode: Option<bool>,
    pub gpu_instance_id: Option<u32>,
    pub compute_instance_id: Option<u32>,
    /// Health: ECC, retired pages, remapped rows, throttling, thresholds, versions.
    pub health: HealthView,
    /// Configuration as `nvidia-smi -q` shows it: board, virtualization, accounting and
    /// operation modes, applications clocks.
    pub config: ConfigView,
    /// GPM activity since the previous refresh, one key per metric (`activity_view`); `null`
    /// where GPM cannot tell (before Hopper, an old driver, a first refresh).
    pub activity: Option<serde_json::Map<String, serde_json::Value>>,
    /// Processes with a context on this device; `None` (JSON `null`) when no process list
    /// could be read, with the reason in `errors`.
    pub processes: Option<Vec<ProcessView>>,
    /// Failures other than N/A, with the query that failed; and every process list that could
    /// not be read, whatever the reason.
    pub errors: Vec<JsonFieldError>,
}

/// A device's health (docs/snapshot-json.md); every value `null` when N/A.
#[derive(Debug, Serialize)]
pub struct HealthView {
    /// Why the device needs attention; empty when nothing does (`DeviceSnapshot::attention`).
    pub needs_attention: Vec<String>,
    pub serial: Option<String>,
    pub vbios_version: Option<String>,
    pub inforom_image_version: Option<String>,
    pub board_part_number: Option<String>,
    pub memory_bus_width_bits: Option<u32>,
    pub ecc_mode_current: Option<bool>,
    pub ecc_mode_pending: Option<bool>,
    pub ecc_errors_volatile_corrected: Option<u64>,
    pub ecc_errors_volatile_uncorrected: Option<u64>,
    pub ecc_errors_aggregate_corrected: Option<u64>,
    pub ecc_errors_aggregate_uncorrected: Option<u64>,
    /// Addresses, `0x` and 16 hex digits as nvidia-smi prints them.
    pub retired_pages_single_bit: Option<Vec<String>>,
    pub retired_pages_double_bit: Option<Vec<String>>,
    pub retired_pages_pending: Option<bool>,
    pub remapped_rows_correctable: Option<u32>,
    pub remapped_rows_uncorrectable: Option<u32>,
    pub remapped_rows_pending: Option<bool>,
    pub remapped_rows_failure: Option<bool>,
    pub pcie_replay_counter: Option<u32>,
    /// The reasons set now, by name (`gpu_backend::ClockEventReasons::names`).
    pub clock_event_reasons: Option<Vec<String>>,
    /// The reasons the device can report, by name.
    pub supported_clock_event_reasons: Option<Vec<String>>,
    pub temperature_shutdown_celsius: Option<u32>,
    pub temperature_slowdown_celsius: Option<u32>,
    pub temperature_gpu_max_celsius: Option<u32>,
    pub temperature_memory_max_celsius: Option<u32>,
    pub total_energy_consumption_millijoules: Option<u64>,
    pub fan_speeds_percent: Vec<Option<u32>>,
    pub power_min_limit_watts: Option<f64>,
    pub power_max_limit_watts: Option<f64>,
    pub power_enforced_limit_watts: Option<f64>,
    pub memory_temperature_celsius: Option<u32>,
    pub fan_target_speeds_percent: Vec<Option<u32>>,
    /// Per NVLink link, as far as the device's links go.
    pub nvlink_errors: Vec<Option<gpu_backend::NvLinkErrorCounters>>,
    /// Per memory location (`l1_cache`, `l2_cache`, `device_memory`, ...).
    pub ecc_errors_by_location: serde_json::Map<String, serde_json::Value>,
    /// The codes of the XID errors since the backend started (a replay: since the recording
    /// started), each once, in the order they came; `null` when events are N/A.
    pub xid_errors: Option<Vec<u64>>,
    /// The newest events since the backend started ([`RECENT_EVENTS`] at most), oldest first;
    /// `null` when events are N/A.
    pub recent_events: Option<Vec<EventView>>,
}

/// A device's configuration, as `nvidia-smi -q` shows it (docs/snapshot-json.md); every value
/// `null` when N/A.
#[derive(Debug, Serialize)]
pub struct ConfigView {
    pub board_id: Option<u32>,
    pub multi_gpu_board: Option<bool>,
    /// nvidia-smi's name: `None` (bare metal), `Pass-Through`, `VGPU`, `Host VGPU`, `Host VSGA`.
    pub virtualization_mode: Option<String>,
    pub accounting_mode: Option<bool>,
    /// nvidia-smi's name: `All On`, `Compute`, `Low Double Precision`.
    pub gpu_operation_mode_current: Option<String>,
    pub gpu_operation_mode_pending: Option<String>,
    pub applications_clock_graphics_mhz: Option<u32>,
    pub applications_clock_memory_mhz: Option<u32>,
    pub default_applications_clock_graphics_mhz: Option<u32>,
    pub default_applications_clock_memory_mhz: Option<u32>,
}

/// The configuration part of a device's view.
pub fn config_view(d: &DeviceSnapshot) -> ConfigView {
    let gom = d.gpu_operation_mode.value();
    ConfigView {
        board_id: d.board_id.value().copied(),
        multi_gpu_board: d.multi_gpu_board.value().copied(),
        virtualization_mode: d.virtualization_mode.value().map(|m| m.label()),
        accounting_mode: d.accounting_mode.value().copied(),
        gpu_operation_mode_current: gom.map(|m| m.current.label()),
        gpu_operation_mode_pending: gom.map(|m| m.pending.label()),
        applications_clock_graphics_mhz: d.applications_clocks.graphics.value().copied(),
        applications_clock_memory_mhz: d.applications_clocks.memory.value().copied(),
        default_applications_clock_graphics_mhz: d
            .default_applications_clocks
            .graphics
            .value()
            .copied(),
        default_applications_clock_memory_mhz: d
            .default_applications_clocks
            .memory
            .value()
            .copied(),
    }
}

/// The JSON key of a GPM metric: its name and its unit (`sm_activity_percent`,
/// `pcie_tx_mib_per_second`).
pub fn activity_key(name: &str, unit: &str) -> String {
    if unit == "%" {
        format!("{name}_percent")
    } else {
        format!("{name}_mib_per_second")
    }
}

/// The activity part of a device's view: every GPM metric by [`activity_key`], `null` for one
/// the device does not give; `None` when GPM itself cannot tell.
pub fn activity_view(d: &DeviceSnapshot) -> Option<serde_json::Map<String, serde_json::Value>> {
    let m = d.gpm.value()?;
    Some(
        m.fields()
            .iter()
            .zip(gpu_backend::GPM_METRICS)
            .map(|((name, v), (_, _, unit))| (activity_key(name, unit), serde_json::json!(v)))
            .collect(),
    )
}

/// How many of a device's newest events the JSON and `info` show.
pub const RECENT_EVENTS: usize = 16;

/// One event (docs/snapshot-json.md).
#[derive(Debug, Serialize)]
pub struct EventView {
    /// When it was received, RFC 3339 UTC with microseconds.
    pub time: String,
    /// The same, microseconds since the Unix epoch.
    pub timestamp_us: u64,
    /// The kind's name (`gpu_backend::EventKind::name`): `xid`, `single_bit_ecc`,
    /// `double_bit_ecc`, `power_source`, ... (docs/snapshot-json.md).
    pub kind: &'static str,
    /// The event's data: the XID code for `xid`.
    pub data: u64,
    /// What the XID code means, for the well-known codes; `null` otherwise.
    pub description: Option<&'static str>,
}

impl EventView {
    /// The view of one event.
    pub fn of(e: &gpu_backend::GpuEvent) -> EventView {
        EventView {
            time: super::time::event_time(e.timestamp_us),
            timestamp_us: e.timestamp_us,
            kind: e.kind.name(),
            data: e.data,
            description: (e.kind == gpu_backend::EventKind::Xid)
                .then(|| gpu_backend::xid_description(e.data))
                .flatten(),
        }
    }
}

/// The health part of a device's view.
pub fn health_view(d: &DeviceSnapshot) -> HealthView {
    let watts = |mw: Option<u32>| mw.map(|mw| f64::from(mw) / 1000.0);
    let addresses = |v: &Na<Vec<u64>>| {
        v.value()
            .map(|list| list.iter().map(|a| format!("{a:#018x}")).collect())
    };
    let reasons = |v: &Na<u64>| {
        v.value()
            .map(|&m| gpu_backend::ClockEventReasons::from_bits_retain(m).names())
    };
    let ecc = &d.ecc_errors;
    let rows = d.remapped_rows.value();
    let limits = d.power_limit_constraints.value();
    HealthView {
        needs_attention: d.attention(),
        serial: d.serial.value().cloned(),
        vbios_version: d.vbios_version.value().cloned(),
        inforom_image_version: d.inforom_image_version.value().cloned(),
        board_part_number: d.board_part_number.value().cloned(),
        memory_bus_width_bits: d.memory_bus_width.value().copied(),
        ecc_mode_current: d.ecc_mode.value().map(|m| m.current),
        ecc_mode_pending: d.ecc_mode.value().map(|m| m.pending),
        ecc_errors_volatile_corrected: ecc.volatile_corrected.value().copied(),
        ecc_errors_volatile_uncorrected: ecc.volatile_uncorrected.value().copied(),
        ecc_errors_aggregate_corrected: ecc.aggregate_corrected.value().copied(),
        ecc_errors_aggregate_uncorrected: ecc.aggregate_uncorrected.value().copied(),
        retired_pages_single_bit: addresses(&d.retired_pages_single_bit),
        retired_pages_double_bit: addresses(&d.retired_pages_double_bit),
        retired_pages_pending: d.retired_pages_pending.value().copied(),
        remapped_rows_correctable: rows.map(|r| r.correctable),
        remapped_rows_uncorrectable: rows.map(|r| r.uncorrectable),
        remapped_rows_pending: rows.map(|r| r.pending),
        remapped_rows_failure: rows.map(|r| r.failure),
        pcie_replay_counter: d.pcie_replay_counter.value().copied(),
        clock_event_reasons: reasons(&d.clock_event_reasons),
        supported_clock_event_reasons: reasons(&d.supported_clock_event_reasons),
        temperature_shutdown_celsius: d.temperature_shutdown.value().copied(),
        temperature_slowdown_celsius: d.temperature_slowdown.value().copied(),
        temperature_gpu_max_celsius: d.temperature_gpu_max.value().copied(),
        temperature_memory_max_celsius: d.temperature_memory_max.value().copied(),
        total_energy_consumption_millijoules: d.total_energy_consumption.value().copied(),
        fan_speeds_percent: d.fan_speeds.iter().map(|f| f.value().copied()).collect(),
        power_min_limit_watts: watts(limits.map(|l| l.min_mw)),
        power_max_limit_watts: watts(limits.map(|l| l.max_mw)),
        power_enforced_limit_watts: watts(d.enforced_power_limit.value().copied()),
        memory_temperature_celsius: d.memory_temperature.value().copied(),
        fan_target_speeds_percent: d
            .fan_target_speeds
            .iter()
            .map(|f| f.value().copied())
            .collect(),
        nvlink_errors: d.nvlink_errors.iter().map(|l| l.value().copied()).collect(),
        ecc_errors_by_location: gpu_backend::MemoryLocation::ALL
            .iter()
            .map(|&l| {
                (
                    l.name().to_string(),
                    serde_json::json!(d.ecc_by_location.get(l).value()),
                )
            })
            .collect(),
        xid_errors: d.events.value().map(|_| d.xid_codes()),
        recent_events: d.events.value().map(|list| {
            let skip = list.len().saturating_sub(RECENT_EVENTS);
            list.iter().skip(skip).map(EventView::of).collect()
        }),
    }
}

/// One process on one device.
#[derive(Debug, Serialize)]
pub struct ProcessView {
    pub pid: u32,
    /// `C` (compute), `G` (graphics) or `C+G`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub used_memory_bytes: Option<u64>,
    pub gpu_instance_id: Option<u32>,
    pub compute_instance_id: Option<u32>,
    /// SM utilization from the process's newest per-process sample (N/A once that sample is
    /// older than `gpu_processes::SAMPLE_MAX_AGE`, or before its first).
    pub sm_utilization_percent: Option<u32>,
    /// How old that sample is, milliseconds; null when the process has no sample.
    pub utilization_sample_age_ms: Option<u64>,
    pub user: Option<String>,
    pub name: Option<String>,
    /// The command line joined for reading, as nvitop joins it (`gpu_processes::command_join`).
    pub command: Option<String>,
    /// The command line, one entry per argument (gpustat's `-c` and `-f` read it); not in the
    /// JSON, which has `command`.
    #[serde(skip)]
    pub argv: Option<Vec<String>>,
    /// CPU use, percent of one CPU.
    pub cpu_percent: Option<f64>,
    /// Resident host memory, bytes.
    pub host_memory_bytes: Option<u64>,
    /// How long the process has run.
    pub running_time_seconds: Option<u64>,
    /// The container runtime (`docker`, `containerd`, `cri-o`, `podman`).
    pub container_runtime: Option<String>,
    /// The container id.
    pub container_id: Option<String>,
    /// The container's name in its Kubernetes pod.
    pub container: Option<String>,
    /// The Kubernetes pod's name.
    pub pod: Option<String>,
    /// The pod's namespace.
    pub namespace: Option<String>,
    /// The pod's UID.
    pub pod_uid: Option<String>,
    /// The pod's QoS class (`Guaranteed`, `Burstable`, `BestEffort`).
    pub qos_class: Option<String>,
}

/// The value, noting a failure that is not "not available" under `field`.
fn keep<T: Clone>(errors: &mut Vec<JsonFieldError>, field: &str, value: &Na<T>) -> Option<T> {
    if let Na::Failed(e) = value {
        errors.push(JsonFieldError {
            field: field.to_string(),
            error: e.to_string(),
        });
    }
    value.value().cloned()
}

/// A snapshot of some devices and their processes (each backend query once per device, and
/// each PID looked up on the host once) (`gpuscope info INDEX --json`): the same document, with
/// `devices` holding just these, in the order given.
pub fn take_devices(
    collector: &ProcessCollector,
    source: String,
    devices: &[gpu_devices::Device],
) -> SnapshotView {
    take_with_raw(collector, source, devices).0
}

/// [`take_devices`], with the device snapshots and processes the view was made from (for
/// `--query` and `gpuscope smi`, which tell what the view leaves out: N/A from a failure,
/// max clocks, compute mode, ...).
pub fn take_with_raw(
    collector: &ProcessCollector,
    source: String,
    devices: &[gpu_devices::Device],
) -> (SnapshotView, gpu_processes::Snapshots) {
    let ctx = collector.context();
    let mut errors = Vec::new();
    let driver_version = keep(&mut errors, "driver_version", &ctx.driver_version());
    let nvml_version = keep(&mut errors, "nvml_version", &ctx.nvml_version());
    let cuda_driver_version = keep(
        &mut errors,
        "cuda_driver_version",
        &ctx.cuda_driver_version(),
    );
    let snap = collector.take_snapshots(devices);
    let host = collector.host();
    let hostname = host.machine().hostname;
    let time_unix_ms = host.now_unix_ms();
    let mut devices: Vec<DeviceView> = snap.devices.iter().map(device_view).collect();
    for d in devices.iter_mut() {
        // A process list that cannot be read is unknown (null), not empty, and says why.
        for e in snap.errors_of(d.device) {
            let entry = JsonFieldError {
                field: e.query.clone(),
                error: e.error.to_string(),
            };
            if !d.errors.contains(&entry) {
                d.errors.push(entry);
            }
        }
        d.processes = match snap.processes_of(d.device) {
            Ok(list) => Some(list.into_iter().map(process_view).collect()),
            Err(_) => None,
        };
    }
    let view = SnapshotView {
        schema: JSON_SCHEMA,
        source,
        hostname,
        time: super::time::rfc3339_ms(time_unix_ms),
        time_unix_ms,
        driver_version,
        cuda_driver_version,
        nvml_version,
        errors,
        devices,
    };
    (view, snap)
}

fn device_view(d: &DeviceSnapshot) -> DeviceView {
    let errors: Vec<JsonFieldError> = d
        .errors
        .iter()
        .map(|e| JsonFieldError {
            field: e.field.clone(),
            error: e.error.to_string(),
        })
        .collect();
    let memory = d.memory.value().copied();
    let util = d.utilization.value().copied();
    DeviceView {
        device: d.id,
        identity: DeviceIdentity::of(d),
        memory_total_bytes: memory.map(|m| m.total),
        memory_used_bytes: memory.map(|m| m.used),
        memory_free_bytes: memory.map(|m| m.free),
        memory_reserved_bytes: memory.and_then(|m| m.reserved),
        gpu_utilization_percent: util.map(|u| u.gpu),
        memory_utilization_percent: util.map(|u| u.memory),
        encoder_utilization_percent: d.encoder.value().map(|c| c.utilization),
        decoder_utilization_percent: d.decoder.value().map(|c| c.utilization),
        temperature_celsius: d.temperature.value().copied(),
        fan_speed_percent: d.fan_speed.value().copied(),
        power_usage_watts: d.power_usage.value().map(|&mw| f64::from(mw) / 1000.0),
        power_limit_watts: d
            .enforced_power_limit
            .value()
            .map(|&mw| f64::from(mw) / 1000.0),
        power_default_limit_watts: d
            .power_default_limit
            .value()
            .map(|&mw| f64::from(mw) / 1000.0),
        performance_state: d
            .performance_state
            .value()
            .and_then(|&p| gpu_backend::PerformanceState::known(p))
            .map(|p| p.to_string()),
        graphics_clock_mhz: d.clocks.graphics.value().copied(),
        sm_clock_mhz: d.clocks.sm.value().copied(),
        memory_clock_mhz: d.clocks.memory.value().copied(),
        persistence_mode: d.persistence_mode.value().copied(),
        display_active: d.display_active.value().copied(),
        mig_mode: d.mig_mode.value().map(|m| m.current),
        gpu_instance_id: d.gpu_instance_id.value().copied(),
        compute_instance_id: d.compute_instance_id.value().copied(),
        health: health_view(d),
        config: config_view(d),
        activity: activity_view(d),
        processes: Some(Vec::new()),
        errors,
    }
}

fn process_view(p: &GpuProcess) -> ProcessView {
    ProcessView {
        pid: p.pid,
        kind: p.kind_str(),
        used_memory_bytes: p.gpu_memory,
        gpu_instance_id: p.gpu_instance_id,
        compute_instance_id: p.compute_instance_id,
        sm_utilization_percent: p.utilization.sm,
        utilization_sample_age_ms: p.utilization.sample_age_ms,
        user: p.host.user.clone(),
        name: p.host.name.clone(),
        command: p.host.command.clone(),
        argv: p.host.cmdline.clone(),
        cpu_percent: p.host.cpu_percent,
        host_memory_bytes: p.host.rss,
        running_time_seconds: p.host.running_time_s,
        container_runtime: container_field(p, |c| &c.runtime),
        container_id: container_field(p, |c| &c.id),
        container: container_field(p, |c| &c.container),
        pod: container_field(p, |c| &c.pod),
        namespace: container_field(p, |c| &c.namespace),
        pod_uid: container_field(p, |c| &c.pod_uid),
        qos_class: container_field(p, |c| &c.qos_class),
    }
}

/// One container fact of a process; `None` outside a container or where it is not known.
fn container_field(
    p: &GpuProcess,
    field: impl Fn(&gpu_backend::ContainerFacts) -> &Option<String>,
) -> Option<String> {
    p.host.container.as_ref().and_then(|c| field(c).clone())
}
