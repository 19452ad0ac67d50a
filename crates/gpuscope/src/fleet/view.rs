//! Filtering, sorting and the text table of a [`Fleet`].

use std::cmp::Ordering;
use std::fmt::Write as _;
use std::sync::Arc;

use gpu_devices::text::{escape_control, Escaped};

use super::model::{Fleet, FleetDevice, FleetProcess, Host, HostState};
use crate::snapshot::{mib, na, text, truncate};

/// The `--sort` keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum SortKey {
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

/// A parsed `--filter`: every term must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FleetFilter {
    terms: Vec<Term>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Term {
    /// `host:NAME`, or `host:PREFIX*`.
    Host(String),
    /// `gpu:ID`.
    Device(String),
    /// `user:NAME`.
    User(String),
    /// `pid:N`.
    Pid(u32),
    /// `state:up|down|stale`.
    State(String),
    /// A word matched, ignoring case, against host, device name, UUID, user and command.
    Text(String),
}

impl FleetFilter {
    /// Parses `host:NAME` (`host:gpu-*` for a prefix), `gpu:ID`, `user:NAME`, `pid:N`,
    /// `state:up|down|stale` and plain words, separated by spaces.
    ///
    /// # Errors
    ///
    /// A `pid:` that is not a number, or a `state:` that is not a state.
    pub fn parse(text: &str) -> Result<FleetFilter, String> {
        let mut terms = Vec::new();
        for word in text.split_whitespace() {
            terms.push(match word.split_once(':') {
                Some(("host", v)) => Term::Host(v.to_string()),
                Some(("gpu", v)) => Term::Device(v.to_string()),
                Some(("user", v)) => Term::User(v.to_string()),
                Some(("pid", v)) => Term::Pid(
                    v.parse()
                        .map_err(|_| format!("pid:{v}: a PID is a whole number"))?,
                ),
                Some(("state", v)) if matches!(v, "up" | "down" | "stale") => {
                    Term::State(v.to_string())
                }
                Some(("state", v)) => {
                    return Err(format!("state:{v}: a state is up, down or stale"))
                }
                _ => Term::Text(word.to_lowercase()),
            });
        }
        Ok(FleetFilter { terms })
    }

    fn host_matches(&self, h: &Host) -> bool {
        self.terms.iter().all(|t| match t {
            Term::Host(want) => match want.strip_suffix('*') {
                Some(prefix) => h.host.starts_with(prefix),
                None => h.host == *want || h.instance.as_deref() == Some(want.as_str()),
            },
            Term::State(s) => h.state.as_str() == s,
            _ => true,
        })
    }

    /// Whether the filter asks anything of devices or processes.
    fn about_devices(&self) -> bool {
        self.terms
            .iter()
            .any(|t| !matches!(t, Term::Host(_) | Term::State(_)))
    }

    fn process_matches(&self, p: &FleetProcess) -> bool {
        self.terms.iter().all(|t| match t {
            Term::User(u) => p.user.as_deref() == Some(u.as_str()),
            Term::Pid(pid) => p.pid == *pid,
            _ => true,
        })
    }

    fn asks_processes(&self) -> bool {
        self.terms
            .iter()
            .any(|t| matches!(t, Term::User(_) | Term::Pid(_)))
    }

    fn device_matches(&self, host: &str, d: &FleetDevice) -> bool {
        self.terms.iter().all(|t| match t {
            Term::Device(id) => d.id == *id,
            Term::Text(w) => {
                let hay = [
                    Some(host),
                    d.name.as_deref(),
                    d.uuid.as_deref(),
                    Some(d.id.as_str()),
                ];
                hay.iter()
                    .flatten()
                    .any(|s| s.to_lowercase().contains(w.as_str()))
                    || d.processes.iter().any(|p| {
                        p.pid.to_string() == *w
                            || [p.user.as_deref(), p.command.as_deref()]
                                .iter()
                                .flatten()
                                .any(|s| s.to_lowercase().contains(w.as_str()))
                    })
            }
            _ => true,
        })
    }

    /// Keeps the hosts, devices and processes that match. A host kept by its own terms but
    /// left with no device stays when it is not up (a down host is never dropped silently)
    /// or when the filter asks nothing of devices.
    pub fn apply(&self, fleet: &mut Fleet) {
        if self.terms.is_empty() {
            return;
        }
        let about_devices = self.about_devices();
        fleet.hosts.retain_mut(|h| {
            if !self.host_matches(h) {
                return false;
            }
            // Changes this fleet's own copy of the list: a fleet sharing it keeps it whole.
            let host = h.host.clone();
            Arc::make_mut(&mut h.devices).retain_mut(|d| {
                if !self.device_matches(&host, d) {
                    return false;
                }
                if self.asks_processes() {
                    d.processes.retain(|p| self.process_matches(p));
                    return !d.processes.is_empty();
                }
                true
            });
            !h.devices.is_empty() || h.state != HostState::Up || !about_devices
        });
    }
}

/// Orders the hosts and their devices. With `free-memory` or `utilization`, devices are
/// ordered within each host and hosts by their best device; the text table then lists every
/// device of the fleet in that order.
pub fn sort(fleet: &mut Fleet, key: SortKey) {
    for h in &mut fleet.hosts {
        // Devices already in order (by index, as a refresh gives them) stay shared.
        if !h
            .devices
            .is_sorted_by(|a, b| device_order(key, a, b).is_le())
        {
            Arc::make_mut(&mut h.devices).sort_by(|a, b| device_order(key, a, b));
        }
    }
    fleet.hosts.sort_by(|a, b| {
        let by_device = match (a.devices.first(), b.devices.first()) {
            (Some(x), Some(y)) if !matches!(key, SortKey::Host) => device_order(key, x, y),
            (Some(_), None) if !matches!(key, SortKey::Host) => Ordering::Less,
            (None, Some(_)) if !matches!(key, SortKey::Host) => Ordering::Greater,
            _ => Ordering::Equal,
        };
        by_device
            .then_with(|| a.host.cmp(&b.host))
            .then_with(|| a.instance.cmp(&b.instance))
    });
}

/// The order of two devices for `key` (N/A last), index breaking ties.
pub fn device_order(key: SortKey, a: &FleetDevice, b: &FleetDevice) -> Ordering {
    let by_index = (a.index, a.mig_index).cmp(&(b.index, b.mig_index));
    match key {
        SortKey::Host | SortKey::Gpu => by_index,
        // N/A last.
        SortKey::FreeMemory => b
            .memory_free_bytes
            .map(|v| v as i128)
            .unwrap_or(-1)
            .cmp(&a.memory_free_bytes.map(|v| v as i128).unwrap_or(-1))
            .then(by_index),
        SortKey::Utilization => a
            .gpu_utilization_percent
            .unwrap_or(u32::MAX)
            .cmp(&b.gpu_utilization_percent.unwrap_or(u32::MAX))
            .then(by_index),
    }
}

/// Every device of the fleet with its host, in the order of `key` (the table's rows).
fn rows(fleet: &Fleet, key: SortKey) -> Vec<(&Host, &FleetDevice)> {
    let mut rows: Vec<(&Host, &FleetDevice)> = fleet
        .hosts
        .iter()
        .flat_map(|h| h.devices.iter().map(move |d| (h, d)))
        .collect();
    // Hosts are already in host order; every other key sorts devices, host breaking ties.
    if !matches!(key, SortKey::Host) {
        rows.sort_by(|a, b| device_order(key, a.1, b.1).then_with(|| a.0.host.cmp(&b.0.host)));
    }
    rows
}

/// How a host's state is told in the table.
fn state_text(h: &Host) -> String {
    match (h.state, h.sample_age_seconds) {
        (HostState::Up, _) => "up".into(),
        (HostState::Down, _) => "DOWN".into(),
        (HostState::Stale, Some(age)) => format!("STALE {}s", age.round() as u64),
        (HostState::Stale, None) => "STALE".into(),
    }
}

/// The fleet as a table for people: one line per device (`host:index`), hosts that are down
/// or stale with a line of their own, then the processes. Outside text is escaped.
pub fn render_text(fleet: &Fleet, key: SortKey) -> String {
    let mut out = String::new();
    let devices: usize = fleet.hosts.iter().map(|h| h.devices.len()).sum();
    let down = fleet
        .hosts
        .iter()
        .filter(|h| h.state == HostState::Down)
        .count();
    let stale = fleet
        .hosts
        .iter()
        .filter(|h| h.state == HostState::Stale)
        .count();
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
    let width = fleet
        .hosts
        .iter()
        .map(|h| escape_control(&h.host).chars().count().min(24))
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
    let hostname = |h: &Host| truncate(&escape_control(&h.host), width);
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
        let state = match (h.state, d.up) {
            (HostState::Up, Some(false)) => "LOST".to_string(),
            _ => state_text(h),
        };
        let power = match (d.power_usage_watts, d.power_limit_watts) {
            (None, None) => "N/A".to_string(),
            (u, l) => format!(
                "{} / {}",
                na(u.map(|w| format!("{}W", w.round() as u64))),
                na(l.map(|w| format!("{}W", w.round() as u64)))
            ),
        };
        let _ = writeln!(
            out,
            "{:<w$} {:<5} {:<8} {:<28} {:>5} {:>4} {:>15} {:>24} {:>10} {:>5}",
            hostname(h),
            label,
            state,
            truncate(&text(d.name.as_deref()), 28),
            na(d.temperature_celsius.map(|t| format!("{t}C"))),
            na(d.fan_speed_percent.map(|f| format!("{f}%"))),
            power,
            format!(
                "{} / {}",
                mib(d.memory_used_bytes),
                mib(d.memory_total_bytes)
            ),
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
    use crate::fleet::testkit::{self, host};

    /// A device with one process, `user<N>`'s PID 100 + N on GPU N (the user filter's test
    /// relies on it).
    fn device(id: &str, free: Option<u64>, util: Option<u32>) -> FleetDevice {
        let mut d = testkit::device(id, free, util);
        d.processes = vec![testkit::process(100 + d.index, &format!("user{}", d.index))];
        d
    }

    fn fleet() -> Fleet {
        testkit::fleet(vec![
            host(
                "b",
                HostState::Up,
                vec![
                    device("0", Some(10 << 30), Some(90)),
                    device("1", Some(70 << 30), Some(5)),
                ],
            ),
            host("c", HostState::Down, vec![]),
            host(
                "a",
                HostState::Up,
                vec![
                    device("0", Some(30 << 30), Some(50)),
                    device("1", None, None),
                ],
            ),
        ])
    }

    fn order(f: &Fleet, key: SortKey) -> Vec<String> {
        rows(f, key)
            .iter()
            .map(|(h, d)| format!("{}:{}", h.host, d.id))
            .collect()
    }

    #[test]
    fn sorting_by_free_memory_orders_devices_across_hosts_with_na_last() {
        let mut f = fleet();
        sort(&mut f, SortKey::FreeMemory);
        assert_eq!(order(&f, SortKey::FreeMemory), ["b:1", "a:0", "b:0", "a:1"]);
        sort(&mut f, SortKey::Utilization);
        assert_eq!(
            order(&f, SortKey::Utilization),
            ["b:1", "a:0", "b:0", "a:1"]
        );
        sort(&mut f, SortKey::Host);
        assert_eq!(order(&f, SortKey::Host), ["a:0", "a:1", "b:0", "b:1"]);
        sort(&mut f, SortKey::Gpu);
        assert_eq!(order(&f, SortKey::Gpu), ["a:0", "b:0", "a:1", "b:1"]);
    }

    #[test]
    fn ordering_or_filtering_a_copy_leaves_the_fleet_it_shares_devices_with_alone() {
        // The viewer orders and filters the fleet it shows, which shares its hosts' devices
        // with the sampler's copy (the next refresh keeps unchanged hosts from it).
        let mut kept = fleet();
        sort(&mut kept, SortKey::Host);
        let mut shown = kept.clone();
        sort(&mut shown, SortKey::Host);
        assert!(
            Arc::ptr_eq(&kept.hosts[0].devices, &shown.hosts[0].devices),
            "devices already in order are not copied"
        );
        sort(&mut shown, SortKey::FreeMemory);
        assert_eq!(order(&shown, SortKey::Host), ["b:1", "b:0", "a:0", "a:1"]);
        assert_eq!(order(&kept, SortKey::Host), ["a:0", "a:1", "b:0", "b:1"]);
        let mut filtered = kept.clone();
        FleetFilter::parse("user:user1")
            .unwrap()
            .apply(&mut filtered);
        assert_eq!(order(&filtered, SortKey::Host), ["a:1", "b:1"]);
        assert_eq!(order(&kept, SortKey::Host), ["a:0", "a:1", "b:0", "b:1"]);
    }

    #[test]
    fn a_down_host_is_listed_even_when_it_has_no_devices() {
        let mut f = fleet();
        sort(&mut f, SortKey::Host);
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
    fn host_filter_keeps_that_host_and_a_down_one_is_kept_by_its_name() {
        let mut f = fleet();
        FleetFilter::parse("host:a").unwrap().apply(&mut f);
        assert_eq!(f.hosts.len(), 1);
        assert_eq!(f.hosts[0].host, "a");
        let mut f = fleet();
        FleetFilter::parse("host:c gpu:0").unwrap().apply(&mut f);
        assert_eq!(f.hosts.len(), 1, "the down host stays: {:?}", f.hosts);
        let mut f = fleet();
        FleetFilter::parse("state:down").unwrap().apply(&mut f);
        assert_eq!(f.hosts.iter().map(|h| &h.host).collect::<Vec<_>>(), ["c"]);
    }

    #[test]
    fn user_and_word_filters_keep_matching_devices() {
        let mut f = fleet();
        FleetFilter::parse("user:user1").unwrap().apply(&mut f);
        let kept: Vec<String> = f
            .hosts
            .iter()
            .flat_map(|h| {
                h.devices
                    .iter()
                    .map(move |d| format!("{}:{}", h.host, d.id))
            })
            .collect();
        assert_eq!(kept, ["b:1", "a:1"]);
        assert!(FleetFilter::parse("pid:x").is_err());
        assert!(FleetFilter::parse("state:sleepy").is_err());
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
