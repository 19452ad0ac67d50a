//! `gpuscope stat --json`: gpustat's JSON document.

use serde_json::{json, Value};

use crate::present::json::{DeviceView, SnapshotView};

/// A snapshot as gpustat's `--json` writes it: `hostname`, `driver_version`, `query_time`
/// (ISO 8601 without a zone; gpustat writes local time, gpuscope UTC) and `gpus`, one per
/// physical GPU with nvidia-smi's field names: memory in MiB (2^20 bytes, rounded down) and
/// power in whole watts (rounded down), as gpustat computes them. A value not known is null.
pub fn gpustat_json(view: &SnapshotView, processes: bool) -> Value {
    let gpus: Vec<Value> = view
        .devices
        .iter()
        .filter(|d| d.identity.mig_index.is_none())
        .map(|d| gpu_json(d, processes))
        .collect();
    json!({
        "hostname": view.hostname,
        "driver_version": view.driver_version,
        "query_time": view.time.trim_end_matches('Z'),
        "gpus": gpus,
    })
}

fn gpu_json(d: &DeviceView, processes: bool) -> Value {
    const MIB: u64 = 1024 * 1024;
    let watts = |w: Option<f64>| {
        w.filter(|w| w.is_finite() && *w >= 0.0)
            .map(|w| w.floor().min(1e9) as u64)
    };
    let procs = match (&d.processes, processes) {
        (_, false) => Value::Array(Vec::new()),
        (None, true) => Value::Null,
        (Some(list), true) => Value::Array(
            list.iter()
                .map(|p| {
                    // gpustat's: the command line as its words, the command the first
                    // word's last part.
                    let full: Vec<&str> = match &p.argv {
                        Some(argv) => argv.iter().map(String::as_str).collect(),
                        None => p
                            .command
                            .as_deref()
                            .map(|c| c.split_whitespace().collect())
                            .unwrap_or_default(),
                    };
                    let command = full
                        .first()
                        .map(|c| c.rsplit('/').next().unwrap_or(c).to_string())
                        .or_else(|| p.name.clone());
                    json!({
                        "username": p.user,
                        "command": command,
                        "full_command": full,
                        "gpu_memory_usage": p.used_memory_bytes.map(|b| b / MIB),
                        "cpu_percent": p.cpu_percent,
                        "cpu_memory_usage": p.host_memory_bytes,
                        "pid": p.pid,
                    })
                })
                .collect(),
        ),
    };
    json!({
        "index": d.identity.index,
        "uuid": d.identity.uuid,
        "name": d.identity.name,
        "temperature.gpu": d.temperature_celsius,
        "fan.speed": d.fan_speed_percent,
        "utilization.gpu": d.gpu_utilization_percent,
        "utilization.enc": d.encoder_utilization_percent,
        "utilization.dec": d.decoder_utilization_percent,
        "power.draw": watts(d.power_usage_watts),
        "enforced.power.limit": watts(d.power_limit_watts),
        "memory.used": d.memory_used_bytes.map(|b| b / MIB),
        "memory.total": d.memory_total_bytes.map(|b| b / MIB),
        "processes": procs,
    })
}
