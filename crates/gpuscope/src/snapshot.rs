//! `gpuscope snapshot`: every device and MIG device with its main figures and processes, once.
//!
//! The JSON form is documented in docs/snapshot-json.md and kept stable: N/A is `null`, and an
//! answer that failed for another reason is `null` too, with the failure listed in the device's
//! `errors`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use gpu_backend::fixture::{Answer, DeviceDynamic, DeviceStatic};
use gpu_backend::host::HostSource;
use gpu_backend::recorder;
use gpu_backend::{BackendError, DeviceId, GpuBackend, ProcessInfo};
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
    /// Driver version.
    pub driver_version: Option<String>,
    /// CUDA driver version, `major.minor`.
    pub cuda_driver_version: Option<String>,
    /// NVML version.
    pub nvml_version: Option<String>,
    /// Failures of system-wide queries, other than N/A.
    pub errors: Vec<FieldError>,
    /// Physical devices, each followed by its MIG devices.
    pub devices: Vec<DeviceView>,
}

/// A query that failed with something other than "not available".
#[derive(Debug, Serialize, PartialEq)]
pub struct FieldError {
    /// Which query.
    pub field: &'static str,
    /// What the backend said.
    pub error: String,
}

/// One device.
#[derive(Debug, Serialize)]
pub struct DeviceView {
    /// `"3"` or `"3:1"`.
    pub id: String,
    /// Index of the physical GPU.
    pub index: u32,
    /// MIG slot, for a MIG device.
    pub mig_index: Option<u32>,
    pub name: Option<String>,
    pub uuid: Option<String>,
    pub bus_id: Option<String>,
    pub memory_total_bytes: Option<u64>,
    pub memory_used_bytes: Option<u64>,
    pub memory_free_bytes: Option<u64>,
    pub gpu_utilization_percent: Option<u32>,
    pub memory_utilization_percent: Option<u32>,
    pub encoder_utilization_percent: Option<u32>,
    pub decoder_utilization_percent: Option<u32>,
    pub temperature_celsius: Option<u32>,
    pub fan_speed_percent: Option<u32>,
    pub power_usage_watts: Option<f64>,
    pub power_limit_watts: Option<f64>,
    pub performance_state: Option<String>,
    pub graphics_clock_mhz: Option<u32>,
    pub sm_clock_mhz: Option<u32>,
    pub memory_clock_mhz: Option<u32>,
    pub persistence_mode: Option<bool>,
    pub display_active: Option<bool>,
    pub mig_mode: Option<bool>,
    pub gpu_instance_id: Option<u32>,
    pub compute_instance_id: Option<u32>,
    pub processes: Vec<ProcessView>,
    /// Failures other than N/A, with the query that failed.
    pub errors: Vec<FieldError>,
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
    pub user: Option<String>,
    pub name: Option<String>,
    pub command: Option<String>,
}

/// Collects N/A-aware values, noting failures that are not "not available".
struct Reader<'a> {
    errors: &'a mut Vec<FieldError>,
}

impl Reader<'_> {
    fn get<T: Clone>(&mut self, field: &'static str, answer: &Answer<T>) -> Option<T> {
        match answer {
            Answer::Ok(v) => Some(v.clone()),
            Answer::Err(e) => {
                self.note(field, e);
                None
            }
        }
    }

    fn note(&mut self, field: &'static str, e: &BackendError) {
        if !e.is_not_available() {
            self.errors.push(FieldError {
                field,
                error: e.to_string(),
            });
        }
    }
}

/// Takes a snapshot of every device: each backend query once per device, and each PID looked up
/// on the host once.
pub fn take(backend: &dyn GpuBackend, host: &dyn HostSource, source: String) -> SnapshotView {
    let snap = recorder::snapshot(backend);
    let mut errors = Vec::new();
    let mut r = Reader {
        errors: &mut errors,
    };
    let driver_version = r.get("driver_version", &snap.system.driver_version);
    let nvml_version = r.get("nvml_version", &snap.system.nvml_version);
    let cuda_driver_version = r
        .get("cuda_driver_version", &snap.system.cuda_driver_version)
        .map(|v| format!("{}.{}", v / 1000, (v % 1000) / 10));
    if let Answer::Err(e) = &snap.system.device_count {
        r.note("device_count", e);
    }
    let mut hosts: BTreeMap<u32, Option<gpu_backend::fixture::HostProcess>> = BTreeMap::new();
    let mut devices: Vec<DeviceView> = snap
        .statics
        .iter()
        .filter_map(|(id, st)| {
            let dy = snap.dynamics.get(id)?;
            Some(device_view(*id, st, dy, host, &mut hosts))
        })
        .collect();
    // With MIG on, NVML lists a process both on the GPU and on its instance: keep it only on the
    // instance, where it runs.
    let parents: Vec<u32> = devices
        .iter()
        .filter(|d| d.mig_index.is_some())
        .map(|d| d.index)
        .collect();
    for d in devices.iter_mut() {
        if d.mig_index.is_none() && parents.contains(&d.index) {
            d.processes.retain(|p| p.gpu_instance_id.is_none());
        }
    }
    // Physical devices in index order, each followed by its MIG devices.
    devices.sort_by_key(|d| (d.index, d.mig_index.map_or(0, |m| m + 1)));
    SnapshotView {
        schema: JSON_SCHEMA,
        source,
        driver_version,
        cuda_driver_version,
        nvml_version,
        errors,
        devices,
    }
}

fn device_view(
    id: DeviceId,
    st: &DeviceStatic,
    dy: &DeviceDynamic,
    host: &dyn HostSource,
    hosts: &mut BTreeMap<u32, Option<gpu_backend::fixture::HostProcess>>,
) -> DeviceView {
    let mut errors = Vec::new();
    let mut r = Reader {
        errors: &mut errors,
    };
    let memory = r.get("memory_info", &dy.memory_info);
    let util = r.get("utilization_rates", &dy.utilization_rates);
    let clocks = &dy.clocks;
    let mut view = DeviceView {
        id: id.to_string(),
        index: id.physical_index(),
        mig_index: match id {
            DeviceId::Mig { index, .. } => Some(index),
            DeviceId::Gpu(_) => None,
        },
        name: r.get("name", &st.name),
        uuid: r.get("uuid", &st.uuid),
        bus_id: r.get("pci_info", &st.pci_info).map(|p| p.bus_id),
        memory_total_bytes: memory.map(|m| m.total),
        memory_used_bytes: memory.map(|m| m.used),
        memory_free_bytes: memory.map(|m| m.free),
        gpu_utilization_percent: util.map(|u| u.gpu),
        memory_utilization_percent: util.map(|u| u.memory),
        encoder_utilization_percent: r
            .get("encoder_utilization", &dy.encoder_utilization)
            .map(|c| c.utilization),
        decoder_utilization_percent: r
            .get("decoder_utilization", &dy.decoder_utilization)
            .map(|c| c.utilization),
        temperature_celsius: r.get("temperature", &dy.temperature),
        fan_speed_percent: r.get("fan_speed", &dy.fan_speed),
        power_usage_watts: r
            .get("power_usage", &dy.power_usage)
            .map(|mw| f64::from(mw) / 1000.0),
        power_limit_watts: r
            .get("enforced_power_limit", &st.enforced_power_limit)
            .map(|mw| f64::from(mw) / 1000.0),
        performance_state: r
            .get("performance_state", &dy.performance_state)
            .filter(|&p| p <= 15)
            .map(|p| format!("P{p}")),
        graphics_clock_mhz: r.get("clock.graphics", &clocks.graphics),
        sm_clock_mhz: r.get("clock.sm", &clocks.sm),
        memory_clock_mhz: r.get("clock.memory", &clocks.memory),
        persistence_mode: r.get("persistence_mode", &st.persistence_mode),
        display_active: r.get("display_active", &st.display_active),
        mig_mode: r.get("mig_mode", &st.mig_mode).map(|m| m.current),
        gpu_instance_id: r.get("gpu_instance_id", &st.gpu_instance_id),
        compute_instance_id: r.get("compute_instance_id", &st.compute_instance_id),
        processes: Vec::new(),
        errors: Vec::new(),
    };
    let compute = r
        .get("compute_processes", &dy.compute_processes)
        .unwrap_or_default();
    let graphics = r
        .get("graphics_processes", &dy.graphics_processes)
        .unwrap_or_default();
    view.processes = merge_processes(&compute, &graphics)
        .into_iter()
        .map(|(p, kind)| {
            let facts = hosts.entry(p.pid).or_insert_with(|| host.process(p.pid));
            ProcessView {
                pid: p.pid,
                kind,
                used_memory_bytes: p.used_gpu_memory,
                gpu_instance_id: p.gpu_instance_id,
                compute_instance_id: p.compute_instance_id,
                user: facts.as_ref().and_then(|f| f.user.clone()),
                name: facts.as_ref().map(|f| f.name.clone()),
                command: facts.as_ref().map(|f| f.cmdline.join(" ")),
            }
        })
        .collect();
    view.errors = errors;
    view
}

/// Merges compute and graphics lists: a PID in both is one `C+G` entry (memory from the compute
/// entry, as NVML reports the same context in both). Order: as first seen.
fn merge_processes(
    compute: &[ProcessInfo],
    graphics: &[ProcessInfo],
) -> Vec<(ProcessInfo, &'static str)> {
    let mut out: Vec<(ProcessInfo, &'static str)> = compute.iter().map(|p| (*p, "C")).collect();
    for g in graphics {
        match out.iter_mut().find(|(p, _)| p.pid == g.pid) {
            Some(entry) => entry.1 = "C+G",
            None => out.push((*g, "G")),
        }
    }
    out
}

fn na<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "N/A".to_string(), |v| v.to_string())
}

fn mib(bytes: Option<u64>) -> String {
    bytes.map_or_else(
        || "N/A".to_string(),
        |b| format!("{}MiB", b / (1024 * 1024)),
    )
}

/// The snapshot as text for people.
pub fn render_text(s: &SnapshotView) -> String {
    let mut out = String::new();
    let gpus = s.devices.iter().filter(|d| d.mig_index.is_none()).count();
    let _ = writeln!(
        out,
        "gpuscope snapshot ({})  driver {}  CUDA {}  {} GPU{}",
        s.source,
        na(s.driver_version.as_deref()),
        na(s.cuda_driver_version.as_deref()),
        gpus,
        if gpus == 1 { "" } else { "s" }
    );
    for e in &s.errors {
        let _ = writeln!(out, "error: {}: {}", e.field, e.error);
    }
    let _ = writeln!(
        out,
        "{:<5} {:<34} {:<17} {:>5} {:>4} {:>15} {:>29} {:>5} {:>4}",
        "GPU", "Name", "Bus-Id", "Temp", "Fan", "Power", "Memory", "Util", "MIG"
    );
    for d in &s.devices {
        let label = match d.mig_index {
            None => d.id.clone(),
            Some(_) => format!(" {}", d.id),
        };
        let mem_pct = match (d.memory_used_bytes, d.memory_total_bytes) {
            (Some(u), Some(t)) if t > 0 => format!(" {:>3}%", (u * 100 + t / 2) / t),
            _ => String::new(),
        };
        let power = match (d.power_usage_watts, d.power_limit_watts) {
            (None, None) => "N/A".to_string(),
            (u, l) => format!(
                "{} / {}",
                na(u.map(|w| format!("{}W", w.round() as u64))),
                na(l.map(|w| format!("{}W", w.round() as u64)))
            ),
        };
        let mig = match (d.mig_index, d.mig_mode) {
            (Some(_), _) => format!("{}/{}", na(d.gpu_instance_id), na(d.compute_instance_id)),
            (None, Some(true)) => "On".into(),
            (None, Some(false)) => "Off".into(),
            (None, None) => "N/A".into(),
        };
        let _ = writeln!(
            out,
            "{:<5} {:<34} {:<17} {:>5} {:>4} {:>15} {:>29} {:>5} {:>4}",
            label,
            truncate(d.name.as_deref().unwrap_or("N/A"), 34),
            na(d.bus_id.as_deref()),
            na(d.temperature_celsius.map(|t| format!("{t}C"))),
            na(d.fan_speed_percent.map(|f| format!("{f}%"))),
            power,
            format!(
                "{} / {}{}",
                mib(d.memory_used_bytes),
                mib(d.memory_total_bytes),
                mem_pct
            ),
            na(d.gpu_utilization_percent.map(|u| format!("{u}%"))),
            mig,
        );
        for (error, fields) in group_errors(&d.errors) {
            let _ = writeln!(out, "      error: {error} ({})", fields.join(", "));
        }
    }
    let procs: Vec<(&DeviceView, &ProcessView)> = s
        .devices
        .iter()
        .flat_map(|d| d.processes.iter().map(move |p| (d, p)))
        .collect();
    let _ = writeln!(out);
    if procs.is_empty() {
        let _ = writeln!(out, "No running GPU processes.");
        return out;
    }
    let _ = writeln!(
        out,
        "{:<5} {:>8} {:<4} {:>10} {:<12} Command",
        "GPU", "PID", "Type", "GPU-Mem", "User"
    );
    for (d, p) in procs {
        let _ = writeln!(
            out,
            "{:<5} {:>8} {:<4} {:>10} {:<12} {}",
            d.id,
            p.pid,
            p.kind,
            mib(p.used_memory_bytes),
            truncate(p.user.as_deref().unwrap_or("N/A"), 12),
            truncate(
                p.command
                    .as_deref()
                    .filter(|c| !c.is_empty())
                    .or(p.name.as_deref())
                    .unwrap_or("N/A"),
                60
            ),
        );
    }
    out
}

/// Errors grouped by what was said, each with the queries that said it, in first-seen order.
fn group_errors(errors: &[FieldError]) -> Vec<(&str, Vec<&str>)> {
    let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
    for e in errors {
        match groups.iter_mut().find(|(msg, _)| *msg == e.error) {
            Some((_, fields)) => fields.push(e.field),
            None => groups.push((&e.error, vec![e.field])),
        }
    }
    groups
}

fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}
