//! `info`'s HEALTH section: what says whether a device needs attention, from the JSON view's
//! `health` (docs/snapshot-json.md); N/A for what the device cannot tell.

use std::fmt::Write as _;

use gpu_devices::text::Escaped;

use crate::present::json::HealthView;
use crate::present::value::{counted, na};

/// The HEALTH section of one device.
pub fn render(out: &mut String, h: &HealthView) {
    let attention = if h.needs_attention.is_empty() {
        "no".to_string()
    } else {
        format!("YES: {}", h.needs_attention.join(", "))
    };
    let _ = writeln!(out, "HEALTH:");
    let _ = writeln!(out, "    Needs attention  : {attention}");
    memory_errors(out, h);
    limits(out, h);
    interconnect(out, h);
    events(out, h);
    let _ = writeln!(out);
}

/// A list of names, `none` when empty.
fn list(v: &Option<Vec<String>>) -> String {
    match v {
        None => "N/A".to_string(),
        Some(l) if l.is_empty() => "none".to_string(),
        Some(l) => l.join(", "),
    }
}

fn yes(v: Option<bool>) -> String {
    na(v.map(|b| if b { "yes" } else { "no" }))
}

fn celsius(v: Option<u32>) -> String {
    na(v.map(|c| format!("{c} C")))
}

/// ECC, retired pages, remapped rows and PCIe replays.
fn memory_errors(out: &mut String, h: &HealthView) {
    let pages = |v: &Option<Vec<String>>| match v {
        None => "N/A".to_string(),
        Some(l) if l.is_empty() => "0".to_string(),
        Some(l) => format!("{} ({})", l.len(), l.join(", ")),
    };
    let _ = writeln!(
        out,
        "    ECC mode         : current {}, pending {}",
        na(h.ecc_mode_current.map(|b| if b { "on" } else { "off" })),
        na(h.ecc_mode_pending.map(|b| if b { "on" } else { "off" }))
    );
    let _ = writeln!(
        out,
        "    ECC volatile     : corrected {}, uncorrected {}",
        na(h.ecc_errors_volatile_corrected),
        na(h.ecc_errors_volatile_uncorrected)
    );
    let _ = writeln!(
        out,
        "    ECC aggregate    : corrected {}, uncorrected {}",
        na(h.ecc_errors_aggregate_corrected),
        na(h.ecc_errors_aggregate_uncorrected)
    );
    let _ = writeln!(
        out,
        "    Retired pages    : single-bit {}, double-bit {}, pending {}",
        pages(&h.retired_pages_single_bit),
        pages(&h.retired_pages_double_bit),
        yes(h.retired_pages_pending)
    );
    let _ = writeln!(
        out,
        "    Remapped rows    : correctable {}, uncorrectable {}, pending {}, failure {}",
        na(h.remapped_rows_correctable),
        na(h.remapped_rows_uncorrectable),
        yes(h.remapped_rows_pending),
        yes(h.remapped_rows_failure)
    );
    let _ = writeln!(out, "    PCIe replays     : {}", na(h.pcie_replay_counter));
}

/// Clock events, thresholds, energy, power limits, versions, memory and fans.
fn limits(out: &mut String, h: &HealthView) {
    let _ = writeln!(
        out,
        "    Clock events     : {}",
        list(&h.clock_event_reasons)
    );
    let _ = writeln!(
        out,
        "    Supported events : {}",
        list(&h.supported_clock_event_reasons)
    );
    let _ = writeln!(
        out,
        "    Temp thresholds  : shutdown {}, slowdown {}, GPU max {}, memory max {}",
        celsius(h.temperature_shutdown_celsius),
        celsius(h.temperature_slowdown_celsius),
        celsius(h.temperature_gpu_max_celsius),
        celsius(h.temperature_memory_max_celsius)
    );
    let _ = writeln!(
        out,
        "    Energy           : {}",
        na(h.total_energy_consumption_millijoules
            .map(|mj| format!("{:.3} kJ", mj as f64 / 1e6)))
    );
    let _ = writeln!(
        out,
        "    Power limits     : enforced {}, min {}, max {}",
        na(h.power_enforced_limit_watts.map(|w| format!("{w:.2} W"))),
        na(h.power_min_limit_watts.map(|w| format!("{w:.2} W"))),
        na(h.power_max_limit_watts.map(|w| format!("{w:.2} W")))
    );
    let _ = writeln!(
        out,
        "    Versions         : VBIOS {}, inforom {}, part {}, serial {}",
        Escaped(&na(h.vbios_version.as_deref())),
        Escaped(&na(h.inforom_image_version.as_deref())),
        Escaped(&na(h.board_part_number.as_deref())),
        Escaped(&na(h.serial.as_deref()))
    );
    let _ = writeln!(
        out,
        "    Memory bus       : {}",
        na(h.memory_bus_width_bits.map(|b| format!("{b} bits")))
    );
    let _ = writeln!(
        out,
        "    Memory temp      : {}",
        celsius(h.memory_temperature_celsius)
    );
    let fans: Vec<String> = h
        .fan_target_speeds_percent
        .iter()
        .map(|f| na(f.map(|p| format!("{p} %"))))
        .collect();
    let _ = writeln!(
        out,
        "    Fan targets      : {}",
        if fans.is_empty() {
            "N/A".to_string()
        } else {
            fans.join(", ")
        }
    );
}

/// NVLink's error counts (summed over the links) and ECC counts by memory location.
fn interconnect(out: &mut String, h: &HealthView) {
    let links: Vec<&gpu_backend::NvLinkErrorCounters> = h.nvlink_errors.iter().flatten().collect();
    if links.is_empty() {
        let _ = writeln!(out, "    NVLink errors    : N/A");
    } else {
        let sum = |f: fn(&gpu_backend::NvLinkErrorCounters) -> u64| {
            links.iter().map(|c| f(c)).fold(0u64, u64::saturating_add)
        };
        let _ = writeln!(
            out,
            "    NVLink errors    : replay {}, recovery {}, CRC flit {}, CRC data {} ({})",
            sum(|c| c.replay),
            sum(|c| c.recovery),
            sum(|c| c.crc_flit),
            sum(|c| c.crc_data),
            counted(links.len() as u64, "link", "links")
        );
    }
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
    let _ = writeln!(
        out,
        "    ECC by location  : {}",
        if by_location.is_empty() {
            "N/A".to_string()
        } else {
            format!("corrected/uncorrected: {}", by_location.join(", "))
        }
    );
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
