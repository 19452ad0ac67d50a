//! `gpuscope snapshot --query FIELD,... --format csv[,noheader][,nounits]`: chosen fields of
//! every physical GPU as CSV, for scripts, with the field names, units and layout that
//! `nvidia-smi --query-gpu=... --format=csv` users already parse.
//!
//! One row per physical GPU (as `--query-gpu`: MIG devices are not rows). A value the GPU or
//! driver cannot give is `[N/A]`, as nvidia-smi writes it. Text from the driver or a fixture
//! has its control characters escaped, and a value holding a comma or a double quote is quoted
//! (RFC 4180), so a row always splits into as many cells as the header.

use std::fmt::Write as _;

use gpu_devices::text::escape_control;

use crate::snapshot::{DeviceView, SnapshotView};
use crate::source::UsageError;

/// One field: its name (and other names nvidia-smi accepts for it), its unit for the header
/// and the cells, what it means, and how to read it off a device.
struct Field {
    names: &'static [&'static str],
    unit: Option<&'static str>,
    help: &'static str,
    value: fn(&SnapshotView, &DeviceView) -> Option<String>,
}

/// `2026-11-01T10:00:00.000Z` as nvidia-smi's `2026/11/01 10:00:00.000`.
fn smi_time(rfc3339: &str) -> String {
    rfc3339
        .trim_end_matches('Z')
        .replacen('-', "/", 2)
        .replacen('T', " ", 1)
}

fn yes_no(v: Option<bool>) -> Option<String> {
    v.map(|b| if b { "Enabled" } else { "Disabled" }.to_string())
}

fn mib(v: Option<u64>) -> Option<String> {
    v.map(|b| (b / (1024 * 1024)).to_string())
}

fn watts(v: Option<f64>) -> Option<String> {
    v.filter(|w| w.is_finite()).map(|w| format!("{w:.2}"))
}

fn num<T: ToString>(v: Option<T>) -> Option<String> {
    v.map(|v| v.to_string())
}

/// Every field `--query` knows, in the order `--query help` lists them.
const FIELDS: &[Field] = &[
    Field {
        names: &["timestamp"],
        unit: None,
        help:
            "when the sample was taken, as nvidia-smi writes it (YYYY/MM/DD HH:MM:SS.mmm), in UTC",
        value: |s, _| Some(smi_time(&s.time)),
    },
    Field {
        names: &["hostname"],
        unit: None,
        help: "the host's name (gpuscope's; nvidia-smi has none)",
        value: |s, _| s.hostname.clone(),
    },
    Field {
        names: &["driver_version"],
        unit: None,
        help: "NVIDIA driver version",
        value: |s, _| s.driver_version.clone(),
    },
    Field {
        names: &["count"],
        unit: None,
        help: "number of GPUs",
        value: |s, _| {
            Some(
                s.devices
                    .iter()
                    .filter(|d| d.mig_index.is_none())
                    .count()
                    .to_string(),
            )
        },
    },
    Field {
        names: &["index"],
        unit: None,
        help: "NVML index of the GPU",
        value: |_, d| Some(d.index.to_string()),
    },
    Field {
        names: &["name", "gpu_name"],
        unit: None,
        help: "product name",
        value: |_, d| d.name.clone(),
    },
    Field {
        names: &["uuid", "gpu_uuid"],
        unit: None,
        help: "UUID",
        value: |_, d| d.uuid.clone(),
    },
    Field {
        names: &["serial"],
        unit: None,
        help: "board serial number",
        value: |_, d| d.health.serial.clone(),
    },
    Field {
        names: &["pci.bus_id", "gpu_bus_id"],
        unit: None,
        help: "PCI bus id, domain:bus:device.function",
        value: |_, d| d.bus_id.clone(),
    },
    Field {
        names: &["vbios_version"],
        unit: None,
        help: "VBIOS version",
        value: |_, d| d.health.vbios_version.clone(),
    },
    Field {
        names: &["persistence_mode"],
        unit: None,
        help: "Enabled or Disabled",
        value: |_, d| yes_no(d.persistence_mode),
    },
    Field {
        names: &["display_active"],
        unit: None,
        help: "Enabled or Disabled",
        value: |_, d| yes_no(d.display_active),
    },
    Field {
        names: &["mig.mode.current"],
        unit: None,
        help: "current MIG mode, Enabled or Disabled",
        value: |_, d| yes_no(d.mig_mode),
    },
    Field {
        names: &["pstate"],
        unit: None,
        help: "performance state, P0 to P15",
        value: |_, d| d.performance_state.clone(),
    },
    Field {
        names: &["fan.speed"],
        unit: Some("%"),
        help: "intended fan speed",
        value: |_, d| num(d.fan_speed_percent),
    },
    Field {
        names: &["memory.total"],
        unit: Some("MiB"),
        help: "frame-buffer memory in all",
        value: |_, d| mib(d.memory_total_bytes),
    },
    Field {
        names: &["memory.reserved"],
        unit: Some("MiB"),
        help: "memory reserved by the driver and firmware",
        value: |_, d| mib(d.memory_reserved_bytes),
    },
    Field {
        names: &["memory.used"],
        unit: Some("MiB"),
        help: "memory in use",
        value: |_, d| mib(d.memory_used_bytes),
    },
    Field {
        names: &["memory.free"],
        unit: Some("MiB"),
        help: "memory free",
        value: |_, d| mib(d.memory_free_bytes),
    },
    Field {
        names: &["utilization.gpu"],
        unit: Some("%"),
        help: "share of time a kernel ran, over the driver's last sample period",
        value: |_, d| num(d.gpu_utilization_percent),
    },
    Field {
        names: &["utilization.memory"],
        unit: Some("%"),
        help: "share of time memory was read or written",
        value: |_, d| num(d.memory_utilization_percent),
    },
    Field {
        names: &["utilization.encoder"],
        unit: Some("%"),
        help: "video encoder utilization",
        value: |_, d| num(d.encoder_utilization_percent),
    },
    Field {
        names: &["utilization.decoder"],
        unit: Some("%"),
        help: "video decoder utilization",
        value: |_, d| num(d.decoder_utilization_percent),
    },
    Field {
        names: &["temperature.gpu"],
        unit: None,
        help: "GPU core temperature, degrees C (no unit, as nvidia-smi writes it)",
        value: |_, d| num(d.temperature_celsius),
    },
    Field {
        names: &["power.draw"],
        unit: Some("W"),
        help: "power draw",
        value: |_, d| watts(d.power_usage_watts),
    },
    Field {
        names: &["power.limit", "enforced.power.limit"],
        unit: Some("W"),
        help: "enforced power limit",
        value: |_, d| watts(d.power_limit_watts),
    },
    Field {
        names: &["power.default_limit"],
        unit: Some("W"),
        help: "default power-management limit",
        value: |_, d| watts(d.power_default_limit_watts),
    },
    Field {
        names: &["clocks.gr", "clocks.current.graphics"],
        unit: Some("MHz"),
        help: "graphics clock",
        value: |_, d| num(d.graphics_clock_mhz),
    },
    Field {
        names: &["clocks.sm", "clocks.current.sm"],
        unit: Some("MHz"),
        help: "SM clock",
        value: |_, d| num(d.sm_clock_mhz),
    },
    Field {
        names: &["clocks.mem", "clocks.current.memory"],
        unit: Some("MHz"),
        help: "memory clock",
        value: |_, d| num(d.memory_clock_mhz),
    },
    Field {
        names: &["ecc.mode.current"],
        unit: None,
        help: "current ECC mode, Enabled or Disabled",
        value: |_, d| yes_no(d.health.ecc_mode_current),
    },
    Field {
        names: &["ecc.errors.uncorrected.volatile.total"],
        unit: None,
        help: "uncorrected ECC errors since the driver loaded",
        value: |_, d| num(d.health.ecc_errors_volatile_uncorrected),
    },
    Field {
        names: &["ecc.errors.uncorrected.aggregate.total"],
        unit: None,
        help: "uncorrected ECC errors over the GPU's life",
        value: |_, d| num(d.health.ecc_errors_aggregate_uncorrected),
    },
    Field {
        names: &["retired_pages.pending"],
        unit: None,
        help: "a page retirement waits for the next driver reload, Yes or No",
        value: |_, d| {
            d.health
                .retired_pages_pending
                .map(|p| if p { "Yes" } else { "No" }.to_string())
        },
    },
    Field {
        names: &["pcie.replay_counter"],
        unit: None,
        help: "PCIe replays",
        value: |_, d| num(d.health.pcie_replay_counter),
    },
];

/// What `--format` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Format {
    /// Leave out the header line.
    pub noheader: bool,
    /// Leave the units out of the cells (the header still names them).
    pub nounits: bool,
}

/// Parses `--format`: `csv`, then `noheader` and/or `nounits`, comma-separated (nvidia-smi's
/// syntax).
pub fn parse_format(text: &str) -> Result<Format, String> {
    let mut parts = text.split(',').map(str::trim);
    match parts.next() {
        Some("csv") => {}
        Some(other) => {
            return Err(format!(
                "{other:?} is not a format: use csv, optionally with noheader and/or nounits \
                 (csv,noheader,nounits)"
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
                    "{other:?} is not a csv option: noheader or nounits"
                ))
            }
        }
    }
    Ok(f)
}

/// The fields `--query` names, checked. An unknown name is a usage error that names it and
/// says how to list the known ones.
fn fields(query: &str) -> Result<Vec<(&'static str, &'static Field)>, UsageError> {
    let mut out = Vec::new();
    for name in query.split(',').map(str::trim) {
        if name.is_empty() {
            return Err(UsageError(format!(
                "--query {query:?}: an empty field name (two commas, or one at an end)"
            )));
        }
        let field = FIELDS
            .iter()
            .find(|f| f.names.contains(&name))
            .ok_or_else(|| {
                UsageError(format!(
                    "--query: unknown field {:?}; `gpuscope snapshot --query help` lists them",
                    escape_control(name)
                ))
            })?;
        out.push((field.names[0], field));
    }
    Ok(out)
}

/// `--query help`: every field, its other names, unit and meaning.
pub fn help() -> String {
    let mut out = String::from(
        "Fields for `gpuscope snapshot --query F1,F2,... [--format csv[,noheader][,nounits]]`\n\
         (one row per physical GPU; [N/A] where the GPU or driver cannot tell):\n\n",
    );
    for f in FIELDS {
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

/// The CSV for `--query` over a snapshot.
pub fn render(view: &SnapshotView, query: &str, format: Format) -> Result<String, UsageError> {
    let fields = fields(query)?;
    let mut out = String::new();
    if !format.noheader {
        let header: Vec<String> = fields
            .iter()
            .map(|(name, f)| match f.unit {
                Some(u) => format!("{name} [{u}]"),
                None => (*name).to_string(),
            })
            .collect();
        out += &header.join(", ");
        out.push('\n');
    }
    for d in view.devices.iter().filter(|d| d.mig_index.is_none()) {
        let row: Vec<String> = fields
            .iter()
            .map(|(_, f)| match (f.value)(view, d) {
                None => "[N/A]".to_string(),
                Some(v) => match f.unit {
                    Some(u) if !format.nounits => cell(&format!("{v} {u}")),
                    _ => cell(&v),
                },
            })
            .collect();
        out += &row.join(", ");
        out.push('\n');
    }
    Ok(out)
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

    #[test]
    fn every_field_name_is_unique() {
        let mut seen = std::collections::BTreeSet::new();
        for f in FIELDS {
            for n in f.names {
                assert!(seen.insert(*n), "{n} twice");
            }
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
        fn any_query_text_is_parsed_or_refused_without_panic(s in ".{0,60}") {
            let _ = fields(&s);
        }
    }
}
