//! `gpuscope snapshot`'s table for people; in colour (a terminal, or `--color always`), each
//! device's row in nvitop's colour of its load, the headings bold and errors red.

use std::fmt::Write as _;

use anstyle::{AnsiColor, Style};
use gpu_devices::text::{escape_control, Escaped};

use crate::present::json::{DeviceView, JsonFieldError, ProcessView, SnapshotView};
use crate::present::text::{text, truncate};
use crate::present::value::{device_cells, na, power_cell, process_mib};

/// nvitop's thresholds of GPU utilization and of memory use, percent: light (green) under the
/// first, moderate (yellow) from it, heavy (red) from the second.
const GPU_THRESHOLDS: (f64, f64) = (10.0, 75.0);
const MEMORY_THRESHOLDS: (f64, f64) = (10.0, 80.0);

/// A device row's colour as nvitop colours its device rows: the heavier of its GPU
/// utilization and memory use; a value not known counts as moderate, as in nvitop.
fn load_colour(d: &DeviceView) -> AnsiColor {
    let level = |pct: Option<f64>, (low, high): (f64, f64)| match pct {
        None => 1,
        Some(p) if p >= high => 2,
        Some(p) if p >= low => 1,
        Some(_) => 0,
    };
    let memory = match (d.memory_used_bytes, d.memory_total_bytes) {
        (Some(u), Some(t)) if t > 0 => Some(u as f64 * 100.0 / t as f64),
        _ => None,
    };
    let util = d.gpu_utilization_percent.map(f64::from);
    match level(util, GPU_THRESHOLDS).max(level(memory, MEMORY_THRESHOLDS)) {
        0 => AnsiColor::Green,
        1 => AnsiColor::Yellow,
        _ => AnsiColor::Red,
    }
}

/// Writes `line` and a newline to `out`, in `style` when `colour`.
fn put(out: &mut String, line: std::fmt::Arguments<'_>, style: Style, colour: bool) {
    if colour {
        let _ = writeln!(out, "{}{line}{}", style.render(), style.render_reset());
    } else {
        let _ = writeln!(out, "{line}");
    }
}

/// The snapshot as text for people, in colour when `colour`. Every string from outside (the
/// backend, the host, a fixture) has its control characters escaped.
pub fn render_text(s: &SnapshotView, colour: bool) -> String {
    let bold = Style::new().bold();
    let red = Style::new().fg_color(Some(AnsiColor::Red.into()));
    let mut out = String::new();
    let gpus = s
        .devices
        .iter()
        .filter(|d| d.identity.mig_index.is_none())
        .count();
    let _ = writeln!(
        out,
        "gpuscope snapshot ({})  driver {}  CUDA {}  {} GPU{}",
        Escaped(&s.source),
        text(s.driver_version.as_deref()),
        text(s.cuda_driver_version.as_deref()),
        gpus,
        if gpus == 1 { "" } else { "s" }
    );
    for e in &s.errors {
        put(
            &mut out,
            format_args!("error: {}: {}", Escaped(&e.field), Escaped(&e.error)),
            red,
            colour,
        );
    }
    put(
        &mut out,
        format_args!(
            "{:<5} {:<34} {:<17} {:>5} {:>4} {:>15} {:>24} {:>4} {:>5} {:>4}",
            "GPU", "Name", "Bus-Id", "Temp", "Fan", "Power", "Memory-Usage", "Mem", "Util", "MIG"
        ),
        bold,
        colour,
    );
    for d in &s.devices {
        let label = match d.identity.mig_index {
            None => d.identity.id.clone(),
            Some(_) => format!(" {}", d.identity.id),
        };
        let mem_pct = match (d.memory_used_bytes, d.memory_total_bytes) {
            (Some(u), Some(t)) if t > 0 && u <= t => format!("{}%", (u * 100 + t / 2) / t),
            _ => "N/A".to_string(),
        };
        let [temperature, fan, memory] = device_cells(
            d.temperature_celsius,
            d.fan_speed_percent,
            d.memory_used_bytes,
            d.memory_total_bytes,
        );
        let mig = match (d.identity.mig_index, d.mig_mode) {
            (Some(_), _) => format!("{}/{}", na(d.gpu_instance_id), na(d.compute_instance_id)),
            (None, Some(true)) => "On".into(),
            (None, Some(false)) => "Off".into(),
            (None, None) => "N/A".into(),
        };
        put(
            &mut out,
            format_args!(
                "{:<5} {:<34} {:<17} {:>5} {:>4} {:>15} {:>24} {:>4} {:>5} {:>4}",
                label,
                truncate(&text(d.identity.name.as_deref()), 34),
                text(d.identity.bus_id.as_deref()),
                temperature,
                fan,
                power_cell(d.power_usage_watts, d.power_limit_watts),
                memory,
                mem_pct,
                na(d.gpu_utilization_percent.map(|u| format!("{u}%"))),
                mig,
            ),
            Style::new().fg_color(Some(load_colour(d).into())),
            colour,
        );
        for (error, fields) in group_errors(&d.errors) {
            let what = match fields.len() {
                0..=4 => fields.join(", "),
                n => format!("{} and {} more", fields[..3].join(", "), n - 3),
            };
            put(
                &mut out,
                format_args!(
                    "      error: {} ({})",
                    Escaped(error),
                    escape_control(&what)
                ),
                red,
                colour,
            );
        }
    }
    let procs: Vec<(&DeviceView, &ProcessView)> = s
        .devices
        .iter()
        .flat_map(|d| d.processes.iter().flatten().map(move |p| (d, p)))
        .collect();
    let _ = writeln!(out);
    let unknown = unknown_process_lists(s);
    if procs.is_empty() && unknown.is_empty() {
        let _ = writeln!(out, "No running GPU processes.");
        return out;
    }
    for (reason, ids) in &unknown {
        if ids.len() == s.devices.len() {
            let _ = writeln!(out, "Processes: N/A ({})", Escaped(reason));
        } else {
            let _ = writeln!(
                out,
                "Processes of GPU {}: N/A ({})",
                ids.join(", "),
                Escaped(reason)
            );
        }
    }
    if procs.is_empty() {
        return out;
    }
    put(
        &mut out,
        format_args!(
            "{:<5} {:>8} {:<4} {:>10} {:<12} Command",
            "GPU", "PID", "Type", "GPU-Mem", "User"
        ),
        bold,
        colour,
    );
    for (d, p) in procs {
        let _ = writeln!(
            out,
            "{:<5} {:>8} {:<4} {:>10} {:<12} {}",
            d.identity.id,
            p.pid,
            p.kind,
            process_mib(p.used_memory_bytes),
            truncate(&text(p.user.as_deref()), 12),
            truncate(
                &text(
                    p.command
                        .as_deref()
                        .filter(|c| !c.is_empty())
                        .or(p.name.as_deref())
                ),
                60
            ),
        );
    }
    out
}

/// The devices whose processes are unknown (`processes: null`), grouped by the reason their
/// first process list gave, in first-seen order.
fn unknown_process_lists(s: &SnapshotView) -> Vec<(String, Vec<String>)> {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for d in s.devices.iter().filter(|d| d.processes.is_none()) {
        let reason = d
            .errors
            .iter()
            .find(|e| e.field.ends_with("_processes"))
            .map_or("unknown reason", |e| e.error.as_str());
        match groups.iter_mut().find(|(r, _)| r == reason) {
            Some((_, ids)) => ids.push(d.identity.id.clone()),
            None => groups.push((reason.to_string(), vec![d.identity.id.clone()])),
        }
    }
    groups
}

/// Errors grouped by what was said, each with the queries that said it, in first-seen order.
fn group_errors(errors: &[JsonFieldError]) -> Vec<(&str, Vec<&str>)> {
    let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
    for e in errors {
        match groups.iter_mut().find(|(msg, _)| *msg == e.error) {
            Some((_, fields)) => fields.push(&e.field),
            None => groups.push((&e.error, vec![&e.field])),
        }
    }
    groups
}
