//! `gpuscope select --prometheus URL`: gpu-select's choice over the fleet's devices.
//!
//! Each leaf device of every host that is up (a GPU, or the MIG devices of a GPU that has
//! them) becomes a [`gpu_select::Figures`]; the selection is gpu-select's own, so the checks,
//! tolerance, order and MIG rule are those of `gpuscope select` on one machine.

use gpu_backend::DeviceId;
use gpu_select::{Criteria, Figures, Selection, Unusable};

use crate::model::{Fleet, FleetDevice, Host, HostState};
use gpu_export::names;

/// A selection over the fleet, and what each candidate is.
#[derive(Debug, Clone)]
pub struct FleetSelection {
    /// gpu-select's answer; its candidates are in the order of `names`.
    pub selection: Selection,
    /// `host:index` of each candidate, the host named as [`Fleet::host_names`] says (by its
    /// instance when its hostname is shared).
    pub names: Vec<String>,
    /// Hosts left out because they are not up, with their state.
    pub skipped: Vec<(String, HostState)>,
}

impl FleetSelection {
    /// The chosen devices' names, best first: `host:index`, or the UUID with `uuid` (a MIG
    /// device is always named by UUID, as on one machine).
    pub fn identifiers(&self, uuid: bool) -> Vec<String> {
        let uuid = uuid || self.selection.mig;
        self.selection
            .selected
            .iter()
            .map(|&i| match (&self.selection.candidates[i].uuid, uuid) {
                (Some(u), true) => u.clone(),
                _ => self.names[i].clone(),
            })
            .collect()
    }
}

/// The leaf devices of a host: MIG devices stand for their GPU.
fn leaves(h: &Host) -> impl Iterator<Item = &FleetDevice> {
    h.devices.iter().filter(move |d| {
        d.identity.mig_index.is_some()
            || !h
                .devices
                .iter()
                .any(|m| m.identity.mig_index.is_some() && m.identity.index == d.identity.index)
    })
}

/// Why a device's memory is N/A when the exporter sent a value out of range: the first such
/// note of a memory family, as an error `select --explain` shows.
fn memory_refused(d: &FleetDevice) -> Option<gpu_backend::BackendError> {
    let memory = [
        names::DEVICE_MEMORY_TOTAL_BYTES,
        names::DEVICE_MEMORY_USED_BYTES,
        names::DEVICE_MEMORY_FREE_BYTES,
    ];
    let note = d
        .out_of_range
        .iter()
        .find(|n| n.pid.is_none() && memory.contains(&n.family))?;
    Some(gpu_backend::BackendError::Other(format!(
        "{} {} is out of range ({})",
        note.family, note.value, note.expected
    )))
}

/// Chooses devices across the fleet's hosts that are up.
///
/// # Errors
///
/// gpu-select's, for contradictory criteria.
pub fn select(fleet: &Fleet, criteria: &Criteria) -> Result<FleetSelection, gpu_select::Error> {
    let mut figures = Vec::new();
    let mut names = Vec::new();
    let mut skipped = Vec::new();
    for (h, host_name) in fleet.hosts.iter().zip(fleet.host_names()) {
        if h.state != HostState::Up {
            skipped.push((host_name.to_string(), h.state));
            continue;
        }
        for d in leaves(h) {
            let id = match d.identity.mig_index {
                Some(index) => DeviceId::Mig {
                    parent: d.identity.index,
                    index,
                },
                None => DeviceId::Gpu(d.identity.index),
            };
            let memory_as_free = d
                .processes
                .iter()
                .filter(|p| {
                    criteria.free_accounts.iter().any(|a| {
                        gpu_select::account_matches(
                            a,
                            p.user.as_deref(),
                            p.namespace.as_deref(),
                            p.pod.as_deref(),
                        )
                    })
                })
                .filter_map(|p| p.used_memory_bytes)
                .fold(0u64, u64::saturating_add);
            // A lost device, or one whose memory is not exported or was out of range, is
            // never chosen.
            let unusable = if d.up == Some(false) {
                Some(Unusable::Lost)
            } else if d.memory_free_bytes.is_none() {
                Some(Unusable::MemoryUnreadable(memory_refused(d)))
            } else {
                None
            };
            figures.push(Figures {
                id,
                cuda_index: None,
                uuid: d.identity.uuid.clone(),
                memory_total: d.memory_total_bytes,
                memory_used: d.memory_used_bytes,
                memory_free: d.memory_free_bytes,
                memory_as_free,
                gpu_utilization: d.gpu_utilization_percent,
                memory_utilization: d.memory_utilization_percent,
                unusable,
                // The exporter does not publish health yet: unknown.
                attention: None,
            });
            names.push(format!("{host_name}:{}", d.identity.id));
        }
    }
    Ok(FleetSelection {
        selection: gpu_select::select_from_figures(figures, criteria)?,
        names,
        skipped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::FleetProcess;
    use crate::testkit::{self, host};

    /// A device with `free_gib` GiB free (its UUID `GPU-<id>-<free_gib>`, which the tests'
    /// identifiers show), 10% busy, with one process of `user` holding 30 GiB.
    fn device(id: &str, free_gib: u64, user: &str) -> FleetDevice {
        let mut d = testkit::device(id, Some(free_gib << 30), Some(10));
        d.identity.uuid = Some(format!("GPU-{id}-{free_gib}"));
        d.memory_utilization_percent = Some(10);
        d.processes = vec![FleetProcess {
            used_memory_bytes: Some(30 << 30),
            ..testkit::process(1, user)
        }];
        d
    }

    fn fleet() -> Fleet {
        testkit::fleet(vec![
            host(
                "a",
                HostState::Up,
                vec![device("0", 5, "x"), device("1", 40, "x")],
            ),
            host(
                "b",
                HostState::Up,
                vec![device("0", 25, "me"), device("3", 70, "x")],
            ),
            host("c", HostState::Down, vec![]),
            host("d", HostState::Stale, vec![device("0", 79, "x")]),
        ])
    }

    #[test]
    fn picks_by_free_memory_across_hosts_and_leaves_out_hosts_not_up() {
        let criteria = Criteria::new().count(2).min_free_memory(20u64 << 30);
        let s = select(&fleet(), &criteria).unwrap();
        assert_eq!(s.identifiers(false), ["b:3", "a:1"]);
        assert_eq!(s.identifiers(true), ["GPU-3-70", "GPU-1-40"]);
        assert_eq!(
            s.skipped,
            [
                ("c".to_string(), HostState::Down),
                ("d".into(), HostState::Stale)
            ]
        );
        assert!(!s.selection.is_short());
    }

    #[test]
    fn free_accounts_memory_counts_as_free_on_the_remote_host() {
        let criteria = Criteria::new()
            .count(1)
            .min_free_memory(50u64 << 30)
            .free_accounts(["me"]);
        let s = select(&fleet(), &criteria).unwrap();
        // b:0 has 25 GiB free + 30 GiB of "me": 55 GiB, behind b:3's 70 GiB.
        let c = &s.selection.candidates[2];
        assert_eq!(c.memory_free, Some(55 << 30));
        assert_eq!(s.identifiers(false), ["b:3"]);
    }

    #[test]
    fn a_pods_memory_counts_as_free_on_the_remote_host() {
        // "me"'s processes run in pod ml/trainer-0.
        let mut f = fleet();
        for p in f
            .hosts
            .iter_mut()
            .flat_map(|h| std::sync::Arc::make_mut(&mut h.devices).iter_mut())
            .flat_map(|d| d.processes.iter_mut())
            .filter(|p| p.user.as_deref() == Some("me"))
        {
            p.pod = Some("trainer-0".into());
            p.namespace = Some("ml".into());
        }
        let free_b0 = |account: &str| {
            let criteria = Criteria::new()
                .count(1)
                .min_free_memory(50u64 << 30)
                .free_accounts([account]);
            let s = select(&f, &criteria).unwrap();
            // b:0, with 25 GiB free of its own.
            let b0 = s
                .selection
                .candidates
                .iter()
                .find(|c| c.uuid.as_deref() == Some("GPU-0-25"))
                .expect("b:0 is a candidate");
            b0.memory_free
        };
        assert_eq!(free_b0("pod:trainer-0"), Some(55 << 30));
        assert_eq!(free_b0("pod:ml/trainer-0"), Some(55 << 30));
        assert_eq!(free_b0("pod:web/trainer-0"), Some(25 << 30));
        assert_eq!(free_b0("pod:me"), Some(25 << 30), "a user is no pod");
    }

    #[test]
    fn a_gpu_with_mig_devices_is_chosen_as_its_mig_devices_named_by_uuid() {
        let mut f = fleet();
        f.hosts = vec![host(
            "m",
            HostState::Up,
            vec![
                device("0", 10, "x"),
                device("0:0", 9, "x"),
                device("0:1", 3, "x"),
            ],
        )];
        let s = select(&f, &Criteria::new().count(1)).unwrap();
        assert_eq!(s.names, ["m:0:0", "m:0:1"]);
        assert_eq!(s.identifiers(false), ["GPU-0:0-9"]);
    }
}
