//! Filtering and sorting a [`Fleet`].

use std::cmp::Ordering;
use std::sync::Arc;

use crate::model::{Fleet, FleetDevice, FleetProcess, Host, HostState};

/// The orders of a fleet (gpuscope's `--sort`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
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

impl SortKey {
    /// Every key, in the order a viewer cycles through them.
    pub const ALL: [SortKey; 4] = [
        SortKey::Host,
        SortKey::Gpu,
        SortKey::FreeMemory,
        SortKey::Utilization,
    ];

    /// `host`, `gpu`, `free-memory` or `utilization`.
    pub fn as_str(self) -> &'static str {
        match self {
            SortKey::Host => "host",
            SortKey::Gpu => "gpu",
            SortKey::FreeMemory => "free-memory",
            SortKey::Utilization => "utilization",
        }
    }
}

/// Why a filter's text does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    /// `pid:` followed by something that is not a whole number.
    #[error("pid:{0}: a PID is a whole number")]
    Pid(String),
    /// `state:` followed by something that is not `up`, `down` or `stale`.
    #[error("state:{0}: a state is up, down or stale")]
    State(String),
}

/// A parsed filter (gpuscope's `--filter`): every term must match.
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
    pub fn parse(text: &str) -> Result<FleetFilter, FilterError> {
        let mut terms = Vec::new();
        for word in text.split_whitespace() {
            terms.push(match word.split_once(':') {
                Some(("host", v)) => Term::Host(v.to_string()),
                Some(("gpu", v)) => Term::Device(v.to_string()),
                Some(("user", v)) => Term::User(v.to_string()),
                Some(("pid", v)) => {
                    Term::Pid(v.parse().map_err(|_| FilterError::Pid(v.to_string()))?)
                }
                Some(("state", v)) if matches!(v, "up" | "down" | "stale") => {
                    Term::State(v.to_string())
                }
                Some(("state", v)) => return Err(FilterError::State(v.to_string())),
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
            Term::Device(id) => d.identity.id == *id,
            Term::Text(w) => {
                let hay = [
                    Some(host),
                    d.identity.name.as_deref(),
                    d.identity.uuid.as_deref(),
                    Some(d.identity.id.as_str()),
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
    let by_index =
        (a.identity.index, a.identity.mig_index).cmp(&(b.identity.index, b.identity.mig_index));
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

/// Every device of the fleet with its host, in the order of `key` (a table's rows): with
/// `host`, host by host as [`sort`] left them; with every other key, devices across the fleet,
/// host breaking ties.
pub fn rows(fleet: &Fleet, key: SortKey) -> Vec<(&Host, &FleetDevice)> {
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

#[cfg(test)]
mod tests {
    use super::*;

    use crate::testkit::three_hosts as fleet;

    fn order(f: &Fleet, key: SortKey) -> Vec<String> {
        rows(f, key)
            .iter()
            .map(|(h, d)| format!("{}:{}", h.host, d.identity.id))
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
                    .map(move |d| format!("{}:{}", h.host, d.identity.id))
            })
            .collect();
        assert_eq!(kept, ["b:1", "a:1"]);
        assert!(FleetFilter::parse("pid:x").is_err());
        assert!(FleetFilter::parse("state:sleepy").is_err());
    }
}
