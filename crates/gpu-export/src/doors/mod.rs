//! The exporter's doors: the names a fleet already uses. Besides gpuscope's own families
//! ([`crate::names`]), the exporter can publish the same sample under dcgm-exporter's names
//! (`DCGM_FI_DEV_GPU_UTIL`, ...; [`dcgm`]) and nvidia_gpu_exporter's (`nvidia_smi_*`;
//! [`nvidia_smi`]), so that the dashboards and alerts written for those exporters work
//! unchanged, and several at once (`gpuscope,dcgm`) during a migration. Every door is built from
//! the same device snapshots as gpuscope's families; a value that is N/A has no sample in any
//! door.
//!
//! Each door's metrics and labels are one public table ([`Door::table`]): the name, type, unit
//! and help of each metric, where its value comes from, which gpuscope family holds the same
//! measure and by what factor, and what still differs from the real exporter. The exporter
//! builds its families from the table, docs/exporter.md's tables are made from it (a test
//! compares them), and a program that reads these names from Prometheus can use it too.

use std::collections::BTreeSet;

use gpu_backend::DeviceId;
use gpu_devices::DeviceSnapshot;
use gpu_processes::Snapshots;

use crate::families::{Family, Inputs, Kind, LabelledValue, Labels, Options};

pub mod dcgm;
pub mod nvidia_smi;
pub(crate) mod set;

pub use set::{Door, Doors, DoorsError};

impl Door {
    /// The table of the door's metrics and labels; `None` for gpuscope's own names, which are
    /// [`crate::names`] and docs/exporter.md's "Metrics".
    pub fn table(self) -> Option<&'static DoorTable> {
        match self {
            Door::Gpuscope => None,
            Door::Dcgm => Some(dcgm::table()),
            Door::NvidiaSmi => Some(nvidia_smi::table()),
        }
    }
}

/// One door's metrics and labels.
#[derive(Debug, Clone, PartialEq)]
pub struct DoorTable {
    /// The door.
    pub door: Door,
    /// The exporter it answers for, and the version its names were taken from.
    pub copies: &'static str,
    /// Every metric it publishes, in the order it publishes them.
    pub metrics: Vec<DoorMetric>,
    /// The labels of its device series.
    pub labels: DoorLabels,
    /// What the real exporter publishes by default that the door does not, and why.
    pub not_published: &'static [(&'static str, &'static str)],
}

impl DoorTable {
    /// The metric named `name`, if the door publishes it (a counter by its family name, as
    /// [`DoorMetric::name`] holds it).
    pub fn metric(&self, name: &str) -> Option<&DoorMetric> {
        self.metrics.iter().find(|m| m.name == name)
    }
}

/// One metric of a door.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DoorMetric {
    /// Its family name. A [`Kind::Counter`]'s samples are named with `_total` appended (as the
    /// real exporter names them); a [`Kind::LegacyCounter`]'s are named as the family.
    pub name: &'static str,
    /// Gauge or counter.
    pub kind: Kind,
    /// The unit of its value as the real exporter documents it (`MiB`, `%`, `mJ`, `MHz`, `W`,
    /// `°C`, `bytes`, `ratio`, `bytes/s`, ...); empty for a count, a flag or an enum.
    pub unit: &'static str,
    /// Its `# HELP` text.
    pub help: &'static str,
    /// Where gpuscope reads the value: its `--query-gpu` name in gpuscope's vocabulary, or the
    /// NVML query and field.
    pub source: &'static str,
    /// Which series it has.
    pub scope: Scope,
    /// The labels its series have besides the door's device labels ([`DoorLabels`]): `err_code`
    /// on dcgm-exporter's XID field, `xid` on nvidia_gpu_exporter's XID counters, ...
    pub extra_labels: &'static [&'static str],
    /// The gpuscope family that holds the same measure, where one does.
    pub same_as: Option<SameAs>,
    /// What still differs from the real exporter's metric; empty when nothing known does.
    pub differs: &'static str,
}

/// Which series a door metric has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Scope {
    /// One per physical GPU.
    Gpu,
    /// One per physical GPU, and on a GPU in MIG mode one per GPU instance instead, with the
    /// door's GPU-instance labels (dcgm-exporter's default: a GPU in MIG mode is watched
    /// through its GPU instances).
    GpuOrGpuInstance,
    /// One per MIG GPU instance (its compute instances share its memory and activity).
    GpuInstance,
    /// One per MIG device (compute instance).
    MigDevice,
    /// One per GPU process with a compute context (with `--processes`).
    Process,
    /// One for the exporter itself.
    Exporter,
}

/// A gpuscope family holding the same measure as a door metric: the door's value times
/// `factor` is the family's value for the series that has `labels` (besides the device's).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SameAs {
    /// The gpuscope family (a counter by its family name, without `_total`).
    pub family: &'static str,
    /// The labels that pick the series out of the family (`clock="sm"`).
    pub labels: &'static [(&'static str, &'static str)],
    /// What turns the door's unit into the family's (1048576 from MiB to bytes).
    pub factor: f64,
}

/// How a door writes a GPU's UUID in its labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum UuidForm {
    /// As NVML gives it: `GPU-8f6c0b2e-...`.
    Nvml,
    /// Lower case, without the `GPU-` (or a MIG device's `MIG-`) prefix, as
    /// nvidia_gpu_exporter writes it: `8f6c0b2e-...`.
    Bare,
}

impl UuidForm {
    /// `uuid` (as NVML gives it) written in this form.
    pub fn write(self, uuid: &str) -> String {
        match self {
            UuidForm::Nvml => uuid.to_string(),
            UuidForm::Bare => {
                let lower = uuid.trim().to_ascii_lowercase();
                let bare = lower
                    .strip_prefix("gpu-")
                    .or_else(|| lower.strip_prefix("mig-"));
                bare.map_or_else(|| lower.clone(), str::to_string)
            }
        }
    }

    /// A GPU's UUID as NVML gives it, from a label written in this form.
    pub fn read(self, label: &str) -> String {
        match self {
            UuidForm::Nvml => label.to_string(),
            UuidForm::Bare => format!("GPU-{label}"),
        }
    }
}

/// The labels a door gives its device series: which label says what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DoorLabels {
    /// The label holding the GPU's UUID (a MIG GPU instance's series hold its parent's), on
    /// every device series.
    pub uuid: &'static str,
    /// How the UUID is written there.
    pub uuid_form: UuidForm,
    /// The series whose labels say what each GPU is, joined to the others by `uuid`, where the
    /// door has one (`nvidia_smi_gpu_info`); `None` when every series carries them.
    pub info: Option<&'static str>,
    /// The label holding the GPU's NVML index (on the info series where there is one).
    pub index: &'static str,
    /// The label holding the GPU's product name (on the info series where there is one).
    pub name: &'static str,
    /// The label holding the GPU's PCI bus id (on the info series where there is one).
    pub bus_id: &'static str,
    /// The label holding the host's name, where the door has one; else the scrape's `instance`
    /// tells the host.
    pub hostname: Option<&'static str>,
    /// The label holding a MIG GPU instance's id.
    pub gpu_instance_id: &'static str,
    /// The label holding a MIG GPU instance's profile (`3g.40gb`).
    pub mig_profile: &'static str,
    /// The labels naming the Kubernetes pod, namespace and container a series is for, where the
    /// door has them.
    pub pod: Option<[&'static str; 3]>,
}

/// The families of one sample under every door `options.names` holds: gpuscope's first, then
/// dcgm-exporter's, then nvidia_gpu_exporter's. Families with no sample are still listed; the
/// encoders leave them out.
pub fn build(inputs: &Inputs, options: &Options) -> Vec<Family> {
    let mut out = Vec::new();
    for door in options.names.iter() {
        match door {
            Door::Gpuscope => out.extend(crate::families::build(inputs, options)),
            Door::Dcgm => out.extend(dcgm::families(inputs, options)),
            Door::NvidiaSmi => out.extend(nvidia_smi::families(inputs, options)),
        }
    }
    out
}

/// A door metric, one argument per field (for the doors' tables).
#[allow(clippy::too_many_arguments)]
const fn metric(
    name: &'static str,
    kind: Kind,
    unit: &'static str,
    help: &'static str,
    source: &'static str,
    scope: Scope,
    extra_labels: &'static [&'static str],
    same_as: Option<SameAs>,
    differs: &'static str,
) -> DoorMetric {
    DoorMetric {
        name,
        kind,
        unit,
        help,
        source,
        scope,
        extra_labels,
        same_as,
        differs,
    }
}

/// The gpuscope family `family` holds the same measure, times `factor`.
const fn same(family: &'static str, factor: f64) -> Option<SameAs> {
    same_where(family, &[], factor)
}

/// The series of gpuscope family `family` with `labels` holds the same measure, times
/// `factor`.
const fn same_where(
    family: &'static str,
    labels: &'static [(&'static str, &'static str)],
    factor: f64,
) -> Option<SameAs> {
    Some(SameAs {
        family,
        labels,
        factor,
    })
}

/// The families of a door's metrics, empty, in the table's order; filled by index.
fn empty_families(metrics: &[DoorMetric]) -> Vec<Family> {
    metrics
        .iter()
        .map(|m| Family {
            name: m.name,
            help: m.help,
            unit: openmetrics_unit(m.name),
            kind: m.kind,
            samples: Vec::new(),
        })
        .collect()
}

/// The OpenMetrics unit a door name ends with, as gpuscope's own families give theirs (so that
/// OpenMetrics' `# UNIT` line says it); none for names without a base-unit suffix, such as
/// dcgm-exporter's.
fn openmetrics_unit(name: &str) -> Option<&'static str> {
    [
        "bytes_per_second",
        "bytes",
        "seconds",
        "watts",
        "joules",
        "ratio",
        "celsius",
        "hertz",
    ]
    .into_iter()
    .find(|u| {
        name.strip_suffix(u)
            .is_some_and(|rest| rest.ends_with('_') && rest.len() > 1)
    })
}

/// Adds a sample to `family` when `value` is known: a value that is N/A has no sample.
fn put(family: &mut Family, labels: Labels, value: Option<f64>) {
    if let Some(value) = value.filter(|v| v.is_finite()) {
        family.samples.push(LabelledValue { labels, value });
    }
}

/// A MIG device's profile from its name (`NVIDIA H100 80GB HBM3 MIG 1c.3g.40gb` is
/// `1c.3g.40gb`), as NVML names MIG devices; the whole name when it has no ` MIG `.
fn mig_profile(name: &str) -> &str {
    name.split_once(" MIG ")
        .map_or(name, |(_, profile)| profile)
        .trim()
}

/// The GPU instance's profile of a MIG device's profile: a compute instance smaller than its
/// GPU instance is named `1c.3g.40gb`, its GPU instance `3g.40gb`.
fn gpu_instance_profile(profile: &str) -> &str {
    match profile.split_once('.') {
        Some((first, rest))
            if first.ends_with('c') && first[..first.len() - 1].parse::<u32>().is_ok() =>
        {
            rest
        }
        _ => profile,
    }
}

/// One MIG GPU instance: its first MIG device (its compute instances share the instance's
/// memory and activity) and every MIG device in it.
struct GpuInstance<'a> {
    parent: u32,
    id: u32,
    first: &'a DeviceSnapshot,
    members: Vec<DeviceId>,
}

/// The MIG devices of `devices` grouped by GPU instance, in the order their first devices
/// come. A MIG device whose GPU instance id is N/A is in none: its series could not be told
/// from another's.
fn gpu_instances(devices: &[DeviceSnapshot]) -> Vec<GpuInstance<'_>> {
    let mut groups: Vec<GpuInstance<'_>> = Vec::new();
    for d in devices {
        let (DeviceId::Mig { parent, .. }, Some(&id)) = (d.id, d.gpu_instance_id.value()) else {
            continue;
        };
        match groups.iter_mut().find(|g| g.parent == parent && g.id == id) {
            Some(g) => g.members.push(d.id),
            None => groups.push(GpuInstance {
                parent,
                id,
                first: d,
                members: vec![d.id],
            }),
        }
    }
    groups
}

/// The (pod, namespace, container) of every process in a Kubernetes pod on one of `devices`,
/// each once, sorted; the parts gpuscope could not tell are `None`.
fn pods_on(snapshots: &Snapshots, devices: &[DeviceId]) -> Vec<[Option<String>; 3]> {
    let mut pods = BTreeSet::new();
    for p in &snapshots.processes {
        if !devices.contains(&p.device) {
            continue;
        }
        let Some(c) = &p.host.container else { continue };
        if c.pod.is_none() && c.pod_uid.is_none() {
            continue;
        }
        pods.insert([c.pod.clone(), c.namespace.clone(), c.container.clone()]);
    }
    pods.into_iter().collect()
}

/// `labels` with `pod`'s labels added under `names` (each part that is known).
fn with_pod(labels: &Labels, names: [&'static str; 3], pod: &[Option<String>; 3]) -> Labels {
    let mut l = labels.clone();
    for (name, value) in names.into_iter().zip(pod) {
        if let Some(v) = value {
            l.push((name, v.clone()));
        }
    }
    l
}

#[cfg(test)]
mod tests;
