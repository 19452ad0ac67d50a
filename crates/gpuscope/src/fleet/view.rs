//! What the fleet's views share (the table of `snapshot`, the viewer of `top`, `select`'s
//! warnings): the `--sort` keys as options (filtering and sorting are gpu-fleet's), the lines on
//! values out of range, and how a host's and a device's states are told.

use gpu_devices::text::escape_control;
use gpu_fleet::{Fleet, FleetDevice, Host, HostState, OutOfRange, SortKey};

use crate::present::value::{counted, na, whole};

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
        escape_control(&d.identity.id),
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

/// How a host's state is told in a table.
pub fn state_text(h: &Host) -> String {
    match (h.state, h.sample_age_seconds) {
        (HostState::Up, _) => "up".into(),
        (HostState::Down, _) => "DOWN".into(),
        (HostState::Stale, Some(age)) => format!("STALE {}", na(whole(age, "s"))),
        (HostState::Stale, None) => "STALE".into(),
    }
}
