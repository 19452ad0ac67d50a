//! The text table of a [`Fleet`]; the `--sort` keys as options (filtering and sorting are
//! gpu-fleet's).

use std::fmt::Write as _;

use gpu_devices::text::{escape_control, Escaped};
use gpu_fleet::filter::rows;
use gpu_fleet::{Fleet, FleetDevice, FleetProcess, Host, HostState, OutOfRange, SortKey};

use crate::snapshot::{counted, device_cells, mib, na, power_cell, text, truncate, whole};

/// The `--sort` keys: gpu-fleet's [`SortKey`], for clap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum SortArg {
    /// Hosts by name, devices by index.
    #[default]
    Host,
    /// Devices by GPU index, then host.
    Gpu,
    /// Most free memory first, across the fleet.
    FreeMemory,
    /// Least GPU utilization first, across the fleet.
    Utilization,
}

impl From<SortArg> for SortKey {
    fn from(key: SortArg) -> SortKey {
        match key {
            SortArg::Host => SortKey::Host,
            SortArg::Gpu => SortKey::Gpu,
            SortArg::FreeMemory => SortKey::FreeMemory,
            SortArg::Utilization => SortKey::Utilization,
        }
    }
}

/// The most lines of values out of range the table, stderr and `select` show; the rest are
/// counted (`--json` has every one a device kept).
pub const MAX_WARNINGS: usize = 10;

/// The values the hosts sent out of range (docs/security.md, "Values"), one line each for
/// people with the outside text escaped: at most `max`, then a line that counts the others.
pub fn out_of_range_lines(fleet: &Fleet, max: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut more = 0u64;
    for h in &fleet.hosts {
        for d in h.devices.iter() {
            for n in &d.out_of_range {
                if lines.len() < max {
                    lines.push(out_of_range_line(h, d, n));
                } else {
                    more += 1;
                }
            }
            more += u64::from(d.out_of_range_not_kept);
        }
    }
    if more > 0 {
        lines.push(format!(
            "{} out of range (--json lists those each device kept)",
            counted(more, "more value", "more values")
        ));
    }
    lines
}

/// How many values the hosts sent out of range.
pub fn out_of_range_count(fleet: &Fleet) -> u64 {
    fleet
        .hosts
        .iter()
        .flat_map(|h| h.devices.iter())
        .map(|d| d.out_of_range.len() as u64 + u64::from(d.out_of_range_not_kept))
        .sum()
}

/// One value out of range for people: which host, device and family, what was sent and what
/// the family takes: `node-a:0: gpuscope_device_power_usage_watts -5 is out of range (0 to
/// 10000 W): shown as N/A`.
pub fn out_of_range_line(h: &Host, d: &FleetDevice, n: &OutOfRange) -> String {
    let what = match (n.label, n.pid) {
        (Some(label), _) => format!("{} label {label}", n.family),
        (None, Some(pid)) => format!("{} of PID {pid}", n.family),
        (None, None) => n.family.to_string(),
    };
    let value = match n.value.as_str() {
        "" => "\"\"".into(),
        v => escape_control(v),
    };
    let outcome = match n.label {
        Some(_) => "its series is left out",
        None => "shown as N/A",
    };
    format!(
        "{}:{}: {what} {value} is out of range ({}): {outcome}",
        escape_control(&h.host),
        escape_control(&d.id),
        n.expected
    )
}

/// How a device's state is told beside its host's: `LOST` when its exporter says so, `N/A`
/// when it sent no `gpuscope_device_up` that is 0 or 1; `None` when the host's state tells.
pub fn device_state(h: &Host, d: &FleetDevice) -> Option<&'static str> {
    match (h.state, d.up) {
        (HostState::Up, Some(false)) => Some("LOST"),
        (HostState::Up, None) => Some("N/A"),
        _ => None,
    }
}

/// How a host's state is told in the table.
fn state_text(h: &Host) -> String {
    match (h.state, h.sample_age_seconds) {
        (HostState::Up, _) => "up".into(),
        (HostState::Down, _) => "DOWN".into(),
        (HostState::Stale, Some(age)) => format!("STALE {}", na(whole(age, "s"))),
        (HostState::Stale, None) => "STALE".into(),
    }
}

/// The fleet as a table for people: one line per device (`host:index`), hosts that are down
/// or stale with a line of their own, then the processes. Hosts are named as
/// [`Fleet::host_names`] says (by their instance when two share a hostname). Outside text is
/// escaped.
pub fn render_text(fleet: &Fleet, key: SortKey) -> String {
    let mut out = String::new();
    let devices: usize = fleet.hosts.iter().map(|h| h.devices.len()).sum();
    let count = |state: HostState| fleet.hosts.iter().filter(|h| h.state == state).count();
    let (down, stale) = (count(HostState::Down), count(HostState::Stale));
    let _ = writeln!(
        out,
        "gpuscope fleet ({})  {} host{}  {} device{}  {} down  {} stale",
        Escaped(&fleet.source),
        fleet.hosts.len(),
        if fleet.hosts.len() == 1 { "" } else { "s" },
        devices,
        if devices == 1 { "" } else { "s" },
        down,
        stale
    );
    for e in &fleet.errors {
        let _ = writeln!(out, "error: {}: {}", Escaped(&e.query), Escaped(&e.error));
    }
    for line in out_of_range_lines(fleet, MAX_WARNINGS) {
        let _ = writeln!(out, "warning: {line}");
    }
    let names: std::collections::HashMap<*const Host, String> = fleet
        .hosts
        .iter()
        .zip(fleet.host_names())
        .map(|(h, name)| (h as *const Host, escape_control(name).into_owned()))
        .collect();
    let width = names
        .values()
        .map(|name| name.chars().count().min(24))
        .max()
        .unwrap_or(4)
        .max(4);
    let _ = writeln!(
        out,
        "{:<w$} {:<5} {:<8} {:<28} {:>5} {:>4} {:>15} {:>24} {:>10} {:>5}",
        "Host",
        "GPU",
        "State",
        "Name",
        "Temp",
        "Fan",
        "Power",
        "Memory",
        "Free",
        "Util",
        w = width
    );
    let hostname = |h: &Host| truncate(&names[&(h as *const Host)], width);
    for h in &fleet.hosts {
        if h.devices.is_empty() {
            let _ = writeln!(
                out,
                "{:<w$} {:<5} {:<8} {}",
                hostname(h),
                "-",
                state_text(h),
                if h.state == HostState::Up {
                    "no devices"
                } else {
                    "no current samples"
                },
                w = width
            );
        }
    }
    for (h, d) in rows(fleet, key) {
        let label = match d.mig_index {
            None => d.id.clone(),
            Some(_) => format!(" {}", d.id),
        };
        let state = device_state(h, d).map_or_else(|| state_text(h), str::to_string);
        let [temperature, fan, memory] = device_cells(
            d.temperature_celsius,
            d.fan_speed_percent,
            d.memory_used_bytes,
            d.memory_total_bytes,
        );
        let _ = writeln!(
            out,
            "{:<w$} {:<5} {:<8} {:<28} {:>5} {:>4} {:>15} {:>24} {:>10} {:>5}",
            hostname(h),
            label,
            state,
            truncate(&text(d.name.as_deref()), 28),
            temperature,
            fan,
            power_cell(d.power_usage_watts, d.power_limit_watts),
            memory,
            mib(d.memory_free_bytes),
            na(d.gpu_utilization_percent.map(|u| format!("{u}%"))),
            w = width
        );
    }
    let procs: Vec<(&Host, &FleetDevice, &FleetProcess)> = fleet
        .hosts
        .iter()
        .flat_map(|h| {
            h.devices
                .iter()
                .flat_map(move |d| d.processes.iter().map(move |p| (h, d, p)))
        })
        .collect();
    if !procs.is_empty() {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "{:<w$} {:<5} {:>8} {:>10} {:<12} Command",
            "Host",
            "GPU",
            "PID",
            "GPU-Mem",
            "User",
            w = width
        );
        for (h, d, p) in procs {
            let _ = writeln!(
                out,
                "{:<w$} {:<5} {:>8} {:>10} {:<12} {}",
                hostname(h),
                d.id,
                p.pid,
                mib(p.used_memory_bytes),
                truncate(&text(p.user.as_deref()), 12),
                truncate(&text(p.command.as_deref()), 60),
                w = width
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_fleet::testkit::three_hosts as fleet;
    use std::sync::Arc;

    #[test]
    fn a_down_host_is_listed_even_when_it_has_no_devices() {
        let mut f = fleet();
        gpu_fleet::sort(&mut f, SortKey::Host);
        let text = render_text(&f, SortKey::Host);
        assert!(
            text.contains("3 hosts  4 devices  1 down  0 stale"),
            "{text}"
        );
        let line = text.lines().find(|l| l.starts_with("c ")).unwrap();
        assert!(
            line.contains("DOWN") && line.contains("no current samples"),
            "{line}"
        );
    }

    #[test]
    fn outside_text_is_escaped_in_the_table() {
        let mut f = fleet();
        f.hosts[0].host = "evil\u{1b}[2J".into();
        Arc::make_mut(&mut f.hosts[0].devices)[0].processes[0].command = Some("x\u{7}".into());
        let text = render_text(&f, SortKey::Host);
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}'),
            "{text:?}"
        );
    }
}
