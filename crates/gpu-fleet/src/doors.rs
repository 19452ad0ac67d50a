//! The other exporters' names the fleet reads: dcgm-exporter's (`DCGM_FI_DEV_FB_USED`, ...) and
//! nvidia_gpu_exporter's (`nvidia_smi_memory_used_bytes`, ...), taken from gpu-export's public
//! door tables ([`gpu_export::doors::Door::table`]), never written a second time here: for each
//! gpuscope family the fleet reads, the door metric the table says holds the same measure
//! (`same_as`), and the factor that turns the door's unit into the family's (MiB into bytes,
//! percent into a ratio).
//!
//! Which names a host serves is learnt from the first query of a refresh ([`sample_time_query`]):
//! besides gpuscope's sample times, one series per host that has the door's names, labelled
//! [`NAMES_LABEL`] with the door. A host that serves gpuscope's names is read through them
//! alone; one that serves only a door's, through that door (dcgm-exporter's before
//! nvidia_gpu_exporter's when it serves both).

use std::sync::LazyLock;

use gpu_export::doors::{Door, DoorLabels, Scope};

use gpu_export::names;

/// The label the first query gives each door's host series: `dcgm` or `nvidia-smi`.
pub const NAMES_LABEL: &str = "gpuscope_names";

/// One door metric the fleet reads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DoorField {
    /// The door whose name it is.
    pub door: Door,
    /// The door's metric name (`DCGM_FI_DEV_FB_USED`).
    pub name: &'static str,
    /// The gpuscope family that holds the same measure (`gpuscope_device_memory_used_bytes`).
    pub family: &'static str,
    /// The door's value times this is the family's (1048576 from MiB to bytes).
    pub factor: f64,
}

/// The device families the fleet reads, in gpuscope's names.
const FAMILIES: &[&str] = &[
    names::DEVICE_UP,
    names::DEVICE_MEMORY_TOTAL_BYTES,
    names::DEVICE_MEMORY_USED_BYTES,
    names::DEVICE_MEMORY_FREE_BYTES,
    names::DEVICE_UTILIZATION_RATIO,
    names::DEVICE_MEMORY_BANDWIDTH_UTILIZATION_RATIO,
    names::DEVICE_TEMPERATURE_CELSIUS,
    names::DEVICE_FAN_SPEED_RATIO,
    names::DEVICE_POWER_USAGE_WATTS,
    names::DEVICE_POWER_LIMIT_WATTS,
    names::DEVICE_INFO,
];

/// The doors the fleet reads besides gpuscope's own names, in the order a host serving several
/// is read through.
pub const DOORS: [Door; 2] = [Door::Dcgm, Door::NvidiaSmi];

/// Every door metric the fleet reads: for each door and each family of `FAMILIES`, the first
/// metric of a physical GPU (or its GPU instance) that the door's table says holds the same
/// measure, with no labels picking a series out of the family. A family with none is N/A
/// through that door (docs/fleet.md).
pub fn fields() -> &'static [DoorField] {
    static FIELDS: LazyLock<Vec<DoorField>> = LazyLock::new(|| {
        let mut out = Vec::new();
        for door in DOORS {
            let Some(table) = door.table() else { continue };
            for &family in FAMILIES {
                let found = table.metrics.iter().find_map(|m| {
                    let same = m.same_as?;
                    let per_gpu = matches!(m.scope, Scope::Gpu | Scope::GpuOrGpuInstance);
                    (per_gpu && same.family == family && same.labels.is_empty()).then_some(
                        DoorField {
                            door,
                            name: m.name,
                            family,
                            factor: same.factor,
                        },
                    )
                });
                out.extend(found);
            }
        }
        out
    });
    &FIELDS
}

/// The door metric named `name`, if the fleet reads it.
pub fn field(name: &str) -> Option<&'static DoorField> {
    fields().iter().find(|f| f.name == name)
}

/// A door's labels (which label holds the index, the UUID, the name...).
pub fn labels(door: Door) -> Option<&'static DoorLabels> {
    door.table().map(|t| &t.labels)
}

/// The door a host series of the first query names in [`NAMES_LABEL`]; `None` for a label that
/// names no door the fleet reads.
pub fn door_named(text: &str) -> Option<Door> {
    DOORS.into_iter().find(|d| d.as_str() == text)
}

/// The timestamps of the series that say a host serves `door`'s names: its info series where it
/// has one (without it, none of its GPUs can be named), else every name of it the fleet reads,
/// each under its own `timestamp()` and the names `or`-ed (`timestamp()` drops the metric name,
/// so over several names at once two GPUs' series would have the same labels, which
/// Prometheus refuses; `or` keeps one of each).
fn timestamps(door: Door) -> String {
    let names: Vec<&str> = match labels(door).and_then(|l| l.info) {
        Some(info) => vec![info],
        None => fields()
            .iter()
            .filter(|f| f.door == door)
            .map(|f| f.name)
            .collect(),
    };
    let each: Vec<String> = names.iter().map(|n| format!("timestamp({n})")).collect();
    each.join(" or ")
}

/// The first query of a refresh: each gpuscope exporter's latest sample time over the lookback,
/// and for each door one series per host (`instance`, `job`, the door's hostname label where it
/// has one) that serves its names, valued the time of the host's latest scrape, labelled
/// [`NAMES_LABEL`]. A fleet of gpuscope exporters only gets the same answer as from the first
/// branch alone: the doors' branches match no series.
pub fn sample_time_query(lookback: &str) -> String {
    let mut q = format!(
        "last_over_time({}[{lookback}])",
        names::EXPORTER_SAMPLE_TIMESTAMP_SECONDS
    );
    for door in DOORS {
        let Some(labels) = labels(door) else { continue };
        let by = match labels.hostname {
            Some(h) => format!("instance, job, {h}"),
            None => "instance, job".to_string(),
        };
        q.push_str(&format!(
            " or label_replace(max by ({by}) ({}), \"{NAMES_LABEL}\", \"{}\", \"\", \"\")",
            timestamps(door),
            door.as_str()
        ));
    }
    q
}

/// The query of the doors' device series for the hosts matching `selector` (a regular
/// expression of their instances, already a PromQL string's contents): every door metric of
/// `doors` the fleet reads, nvidia_gpu_exporter's `nvidia_smi_gpu_info` left out when
/// `info` is false (it is asked first, on its own: its labels say which GPU each `uuid` is).
pub fn device_query(doors: &[Door], info: bool, selector: &str) -> String {
    let names: Vec<&str> = fields()
        .iter()
        .filter(|f| doors.contains(&f.door))
        .filter(|f| (f.family == names::DEVICE_INFO) == info)
        .map(|f| f.name)
        .collect();
    format!(
        "{{__name__=~\"{}\", instance=~\"{selector}\"}}",
        names.join("|")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(door: Door, family: &str) -> Option<(&'static str, f64)> {
        fields()
            .iter()
            .find(|f| f.door == door && f.family == family)
            .map(|f| (f.name, f.factor))
    }

    #[test]
    fn every_door_gives_memory_utilization_temperature_and_power() {
        for door in DOORS {
            for family in [
                names::DEVICE_MEMORY_USED_BYTES,
                names::DEVICE_MEMORY_FREE_BYTES,
                names::DEVICE_UTILIZATION_RATIO,
                names::DEVICE_TEMPERATURE_CELSIUS,
                names::DEVICE_POWER_USAGE_WATTS,
            ] {
                assert!(name(door, family).is_some(), "{door}: {family}");
            }
        }
    }

    #[test]
    fn units_are_turned_into_the_fleets() {
        assert_eq!(
            name(Door::Dcgm, names::DEVICE_MEMORY_USED_BYTES),
            Some(("DCGM_FI_DEV_FB_USED", 1024.0 * 1024.0))
        );
        assert_eq!(
            name(Door::Dcgm, names::DEVICE_UTILIZATION_RATIO),
            Some(("DCGM_FI_DEV_GPU_UTIL", 0.01))
        );
        assert_eq!(
            name(Door::NvidiaSmi, names::DEVICE_MEMORY_USED_BYTES),
            Some(("nvidia_smi_memory_used_bytes", 1.0))
        );
        assert_eq!(
            name(Door::NvidiaSmi, names::DEVICE_INFO),
            Some(("nvidia_smi_gpu_info", 1.0))
        );
        // What dcgm-exporter's default counters do not hold.
        assert_eq!(name(Door::Dcgm, names::DEVICE_MEMORY_TOTAL_BYTES), None);
        assert_eq!(name(Door::Dcgm, names::DEVICE_UP), None);
    }

    #[test]
    fn the_first_query_names_each_doors_hosts() {
        let q = sample_time_query("15m");
        assert!(q.starts_with(
            "last_over_time(gpuscope_exporter_sample_timestamp_seconds[15m]) or label_replace("
        ));
        assert!(
            q.contains("max by (instance, job, Hostname) (timestamp(DCGM_FI_DEV_FB_USED) or timestamp(DCGM_FI_DEV_FB_FREE) or "),
            "{q}"
        );
        assert!(
            q.ends_with("or label_replace(max by (instance, job) (timestamp(nvidia_smi_gpu_info)), \"gpuscope_names\", \"nvidia-smi\", \"\", \"\")"),
            "{q}"
        );
    }
}
