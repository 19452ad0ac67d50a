//! `info`'s HEALTH section: what says whether a device needs attention, from the JSON view's
//! `health` (docs/snapshot-json.md); N/A for what the device cannot tell.

use std::fmt::Write as _;

use super::{escaped, on, write_lines, yes, Line};
use crate::present::json::HealthView;
use crate::present::value::{counted, na};

/// The HEALTH section of one device.
pub fn render(out: &mut String, h: &HealthView) {
    let _ = writeln!(out, "HEALTH:");
    write_lines(out, h, LINES);
    events(out, h);
    let _ = writeln!(out);
}

/// The section's lines, but its events: what needs attention; ECC, retired pages, remapped rows
/// and PCIe replays; clock events, thresholds, energy, power limits, versions, memory and fans;
/// NVLink's errors and ECC by location.
#[rustfmt::skip]
const LINES: &[Line<HealthView>] = &[
    ("Needs attention", attention),
    ("ECC mode", |h| format!("current {}, pending {}", on(h.ecc_mode_current), on(h.ecc_mode_pending))),
    ("ECC volatile", |h| format!("corrected {}, uncorrected {}", na(h.ecc_errors_volatile_corrected), na(h.ecc_errors_volatile_uncorrected))),
    ("ECC aggregate", |h| format!("corrected {}, uncorrected {}", na(h.ecc_errors_aggregate_corrected), na(h.ecc_errors_aggregate_uncorrected))),
    ("Retired pages", |h| format!("single-bit {}, double-bit {}, pending {}", pages(&h.retired_pages_single_bit), pages(&h.retired_pages_double_bit), yes(h.retired_pages_pending))),
    ("Remapped rows", |h| format!("correctable {}, uncorrectable {}, pending {}, failure {}", na(h.remapped_rows_correctable), na(h.remapped_rows_uncorrectable), yes(h.remapped_rows_pending), yes(h.remapped_rows_failure))),
    ("PCIe replays", |h| na(h.pcie_replay_counter)),
    ("Clock events", |h| list(&h.clock_event_reasons)),
    ("Supported events", |h| list(&h.supported_clock_event_reasons)),
    ("Temp thresholds", |h| format!("shutdown {}, slowdown {}, GPU max {}, memory max {}", celsius(h.temperature_shutdown_celsius), celsius(h.temperature_slowdown_celsius), celsius(h.temperature_gpu_max_celsius), celsius(h.temperature_memory_max_celsius))),
    ("Energy", |h| na(h.total_energy_consumption_millijoules.map(|mj| format!("{:.3} kJ", mj as f64 / 1e6)))),
    ("Power limits", |h| format!("enforced {}, min {}, max {}", limit(h.power_enforced_limit_watts), limit(h.power_min_limit_watts), limit(h.power_max_limit_watts))),
    ("Versions", |h| format!("VBIOS {}, inforom {}, part {}, serial {}", escaped(&h.vbios_version), escaped(&h.inforom_image_version), escaped(&h.board_part_number), escaped(&h.serial))),
    ("Memory bus", |h| na(h.memory_bus_width_bits.map(|b| format!("{b} bits")))),
    ("Memory temp", |h| celsius(h.memory_temperature_celsius)),
    ("Fan targets", fan_targets),
    ("NVLink errors", nvlink_errors),
    ("ECC by location", ecc_by_location),
];

/// What needs attention: `no`, or `YES` and why.
fn attention(h: &HealthView) -> String {
    if h.needs_attention.is_empty() {
        "no".to_string()
    } else {
        format!("YES: {}", h.needs_attention.join(", "))
    }
}

/// A list of names, `none` when empty.
fn list(v: &Option<Vec<String>>) -> String {
    match v {
        None => "N/A".to_string(),
        Some(l) if l.is_empty() => "none".to_string(),
        Some(l) => l.join(", "),
    }
}

/// Retired pages: how many, and their addresses.
fn pages(v: &Option<Vec<String>>) -> String {
    match v {
        None => "N/A".to_string(),
        Some(l) if l.is_empty() => "0".to_string(),
        Some(l) => format!("{} ({})", l.len(), l.join(", ")),
    }
}

/// `items` joined, `N/A` when there are none.
fn joined_or_na(items: &[String], joined: impl FnOnce(String) -> String) -> String {
    if items.is_empty() {
        "N/A".to_string()
    } else {
        joined(items.join(", "))
    }
}

fn celsius(v: Option<u32>) -> String {
    na(v.map(|c| format!("{c} C")))
}

fn limit(v: Option<f64>) -> String {
    na(v.map(|w| format!("{w:.2} W")))
}

/// The fans' target speeds.
fn fan_targets(h: &HealthView) -> String {
    let fans: Vec<String> = h
        .fan_target_speeds_percent
        .iter()
        .map(|f| na(f.map(|p| format!("{p} %"))))
        .collect();
    joined_or_na(&fans, |fans| fans)
}

/// NVLink's error counts, summed over the links.
fn nvlink_errors(h: &HealthView) -> String {
    let links: Vec<&gpu_backend::NvLinkErrorCounters> = h.nvlink_errors.iter().flatten().collect();
    if links.is_empty() {
        return "N/A".to_string();
    }
    let sum = |f: fn(&gpu_backend::NvLinkErrorCounters) -> u64| {
        links.iter().map(|c| f(c)).fold(0u64, u64::saturating_add)
    };
    format!(
        "replay {}, recovery {}, CRC flit {}, CRC data {} ({})",
        sum(|c| c.replay),
        sum(|c| c.recovery),
        sum(|c| c.crc_flit),
        sum(|c| c.crc_data),
        counted(links.len() as u64, "link", "links")
    )
}

/// ECC counts by memory location.
fn ecc_by_location(h: &HealthView) -> String {
    let mut by_location = Vec::new();
    for (name, v) in &h.ecc_errors_by_location {
        let Some(c) = v.as_object() else { continue };
        let n = |k: &str| na(c.get(k).and_then(serde_json::Value::as_u64));
        by_location.push(format!(
            "{name} {}/{} (aggregate {}/{})",
            n("volatile_corrected"),
            n("volatile_uncorrected"),
            n("aggregate_corrected"),
            n("aggregate_uncorrected")
        ));
    }
    joined_or_na(&by_location, |l| format!("corrected/uncorrected: {l}"))
}

/// The XID errors since start and the newest events.
fn events(out: &mut String, h: &HealthView) {
    match &h.recent_events {
        None => {
            let _ = writeln!(out, "    Events           : N/A");
        }
        Some(events) if events.is_empty() => {
            let _ = writeln!(out, "    Events           : none since start");
        }
        Some(events) => {
            let xids = match h.xid_errors.as_deref() {
                Some([]) | None => "no XID".to_string(),
                Some(codes) => {
                    let codes: Vec<String> = codes.iter().map(u64::to_string).collect();
                    format!("XID {}", codes.join(", "))
                }
            };
            let _ = writeln!(
                out,
                "    Events           : {xids} since start; the last {}, newest last:",
                events.len()
            );
            for e in events {
                let what = match (e.kind, e.description) {
                    ("xid", Some(d)) => format!("XID {}: {d}", e.data),
                    ("xid", None) => format!("XID {}", e.data),
                    (kind, _) => kind.replace('_', " "),
                };
                let _ = writeln!(out, "        {}  {what}", e.time);
            }
        }
    }
}
