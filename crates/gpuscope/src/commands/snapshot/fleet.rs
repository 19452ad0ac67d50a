//! `gpuscope snapshot --prometheus URL` / `--remote URL...`: the fleet's table (or JSON), once
//! or every `-i` interval.

use std::fmt::Write as _;

use gpu_devices::text::{escape_control, Escaped};
use gpu_fleet::filter::rows;
use gpu_fleet::{Fleet, FleetDevice, FleetProcess, FleetSource, Host, HostState, SortKey};

use crate::error::Shortfall;
use crate::fleet::view::{device_state, out_of_range_lines, state_text, MAX_WARNINGS};
use crate::fleet::{one_line, release_large_blocks, shortfall, warn_out_of_range, write_json};
use crate::fleet::{FleetArgs, ViewArgs};
use crate::output::write_stdout;
use crate::present::text::{text, truncate};
use crate::present::value::{device_cells, mib, na, power_cell, process_mib};

/// `gpuscope snapshot --prometheus URL` / `--remote URL...`: the fleet once, or every
/// `--watch` interval.
pub fn snapshot(fleet: &FleetArgs, view: &ViewArgs, json: bool) -> anyhow::Result<()> {
    let source = fleet.open()?;
    let one = |source: &FleetSource, previous: &mut Option<Fleet>| -> anyhow::Result<Fleet> {
        let mut f = source.refresh_after(previous.as_ref())?;
        if view.every(true).is_some() {
            *previous = Some(f.clone());
        }
        if let Some(filter) = &view.filter {
            filter.apply(&mut f);
        }
        gpu_fleet::sort(&mut f, view.sort.into());
        Ok(f)
    };
    let mut previous = None;
    let Some(every) = view.every(true) else {
        // Whether the whole fleet could be shown (docs/exit-codes.md), judged on every host
        // asked for, before --filter: no fleet at all, or no host up, is nothing to show.
        let mut f = source
            .refresh_after(None)
            .map_err(|e| Shortfall::nothing(one_line(&e)))?;
        let short = shortfall(&f);
        if json {
            warn_out_of_range(&f);
        }
        if let Some(filter) = &view.filter {
            filter.apply(&mut f);
        }
        gpu_fleet::sort(&mut f, view.sort.into());
        if json {
            write_json(&f, false)?;
        } else {
            write_stdout(&render_text(&f, view.sort.into()))?;
        }
        return short.map_or(Ok(()), |s| Err(s.into()));
    };
    release_large_blocks();
    loop {
        let started = std::time::Instant::now();
        match one(&source, &mut previous) {
            Ok(f) if json => {
                warn_out_of_range(&f);
                write_json(&f, true)?
            }
            Ok(f) => write_stdout(&format!(
                "\x1b[H\x1b[2J{}",
                render_text(&f, view.sort.into())
            ))?,
            // A refresh that fails is shown, and the next one tried; with --json on stderr, so
            // that stdout stays JSON Lines.
            Err(e) if json => eprintln!("gpuscope: {}", one_line(&e)),
            Err(e) => write_stdout(&format!("gpuscope: {}\n", one_line(&e)))?,
        }
        std::thread::sleep(every.saturating_sub(started.elapsed()));
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
        let label = match d.identity.mig_index {
            None => d.identity.id.clone(),
            Some(_) => format!(" {}", d.identity.id),
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
            truncate(&text(d.identity.name.as_deref()), 28),
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
                d.identity.id,
                p.pid,
                process_mib(p.used_memory_bytes),
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
