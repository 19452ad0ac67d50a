//! Choosing devices: every leaf device is measured once, checked against each constraint (with
//! the tolerance), sorted, then MIG devices and whole GPUs are kept apart and the count capped.

use std::cmp::Ordering;

use gpu_backend::BackendError;
use gpu_devices::{CudaDevice, Device, DeviceId, DeviceSnapshot, Na};
use gpu_processes::{ProcessCollector, Snapshots};
use serde::Serialize;

use crate::criteria::{Criteria, Error};

/// The devices to choose from.
#[derive(Debug, Clone, Default)]
pub enum Pool {
    /// Every GPU of the collector's context (nvitop's `devices=None`).
    #[default]
    All,
    /// These devices. A GPU in MIG mode stands for its MIG devices.
    Devices(Vec<Device>),
    /// These CUDA devices (for example the context's `cuda_devices()`, which honour
    /// `CUDA_VISIBLE_DEVICES`): each is a leaf already, and its index is its CUDA ordinal.
    Cuda(Vec<CudaDevice>),
}

/// How to name the chosen devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// The index: the CUDA ordinal for a [`Pool::Cuda`] device, else the NVML index (`"3"`),
    /// `"<gpu>:<mig>"` for a MIG device.
    Index,
    /// The UUID (`GPU-...`, `MIG-...`).
    Uuid,
    /// The device itself ([`Selection::devices`]); as text, the same as [`Format::Index`].
    Device,
}

/// A constraint of [`Criteria`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Constraint {
    /// [`Criteria::min_free_memory`].
    MinFreeMemory,
    /// [`Criteria::min_total_memory`].
    MinTotalMemory,
    /// [`Criteria::max_gpu_utilization`].
    MaxGpuUtilization,
    /// [`Criteria::max_memory_utilization`].
    MaxMemoryUtilization,
    /// [`Criteria::healthy`]: the value is the number of reasons the device needs attention
    /// (named in [`Candidate::attention`]), the limit 0.
    Healthy,
}

impl Constraint {
    /// The constraint's name, as the command-line option spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Constraint::MinFreeMemory => "min-free-memory",
            Constraint::MinTotalMemory => "min-total-memory",
            Constraint::MaxGpuUtilization => "max-gpu-utilization",
            Constraint::MaxMemoryUtilization => "max-memory-utilization",
            Constraint::Healthy => "healthy",
        }
    }
}

/// How a device fared against one constraint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Met strictly.
    Met,
    /// Missed, but within the tolerance.
    Tolerated,
    /// Missed by more than the tolerance.
    Failed,
    /// The device cannot tell the value (N/A): the constraint is not met.
    Unknown,
}

impl Outcome {
    /// Whether the device may still be chosen.
    pub fn passes(self) -> bool {
        matches!(self, Outcome::Met | Outcome::Tolerated)
    }
}

/// One constraint checked on one device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// Which constraint.
    pub constraint: Constraint,
    /// The device's value (bytes or percent); `None` for N/A.
    pub value: Option<u64>,
    /// The limit asked for (bytes or percent).
    pub limit: u64,
    /// How it fared.
    pub outcome: Outcome,
}

/// Why a device is never chosen, whatever the criteria (even none at all): a job given it
/// would fail.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unusable {
    /// The GPU is lost: it has fallen off the bus or is otherwise inaccessible (a query
    /// answered NVML's GPU_IS_LOST).
    Lost,
    /// Its memory cannot be read: N/A, with the backend's error when it gave one other than
    /// "cannot tell" (`None`: not supported or no permission).
    MemoryUnreadable(Option<BackendError>),
}

impl Unusable {
    /// Whether `d` can be used at all, from its snapshot.
    pub fn of(d: &DeviceSnapshot) -> Option<Unusable> {
        let lost = d.errors.iter().any(|e| e.error == BackendError::GpuLost)
            || d.memory.error() == Some(&BackendError::GpuLost);
        if lost {
            return Some(Unusable::Lost);
        }
        match &d.memory {
            Na::Value(_) => None,
            Na::NotAvailable => Some(Unusable::MemoryUnreadable(None)),
            Na::Failed(e) => Some(Unusable::MemoryUnreadable(Some(e.clone()))),
        }
    }
}

impl std::fmt::Display for Unusable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unusable::Lost => {
                f.write_str("lost (the GPU fell off the bus or is otherwise inaccessible)")
            }
            Unusable::MemoryUnreadable(Some(e)) => write!(f, "memory: N/A ({e})"),
            Unusable::MemoryUnreadable(None) => {
                f.write_str("memory: N/A (the device or driver cannot tell)")
            }
        }
    }
}

/// What became of a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Fate {
    /// Chosen.
    Selected,
    /// Never chosen: the device is lost or its memory cannot be read (see
    /// [`Candidate::unusable`]).
    Unusable,
    /// A constraint failed (see [`Candidate::checks`]).
    Rejected,
    /// Qualified, but MIG devices and whole GPUs are not chosen together, and at most one MIG
    /// device is chosen (CUDA shows only one).
    MigRule,
    /// Qualified, but [`Criteria::max_count`] better devices were chosen.
    OverMaxCount,
}

/// A leaf device as the selection saw it.
#[derive(Debug, Clone, Serialize)]
pub struct Candidate {
    /// The device.
    pub id: DeviceId,
    /// Its CUDA ordinal, for a [`Pool::Cuda`] device.
    pub cuda_index: Option<u32>,
    /// Its UUID.
    pub uuid: Option<String>,
    /// Free memory, bytes, with the memory of [`Criteria::free_accounts`] added.
    pub memory_free: Option<u64>,
    /// Used memory, bytes, with the memory of [`Criteria::free_accounts`] taken off.
    pub memory_used: Option<u64>,
    /// Total memory, bytes.
    pub memory_total: Option<u64>,
    /// Memory of the free accounts' processes on this device, bytes, counted as free.
    pub memory_as_free: u64,
    /// GPU utilization, percent.
    pub gpu_utilization: Option<u32>,
    /// Memory-bandwidth utilization, percent.
    pub memory_utilization: Option<u32>,
    /// Why the device needs attention (`DeviceSnapshot::attention`); empty when nothing does.
    pub attention: Vec<String>,
    /// Each constraint asked for, in the order of [`Constraint`].
    pub checks: Vec<Check>,
    /// Why it cannot be chosen at all, whatever the criteria; `None` for a usable device.
    pub unusable: Option<Unusable>,
    /// What became of it.
    pub fate: Fate,
}

impl Candidate {
    /// True for a MIG device.
    pub fn is_mig_device(&self) -> bool {
        self.id.is_mig()
    }

    /// How many constraints it met only thanks to the tolerance.
    pub fn loosened(&self) -> usize {
        self.checks
            .iter()
            .filter(|c| c.outcome == Outcome::Tolerated)
            .count()
    }

    /// Whether it may be chosen: usable, and every constraint met (or within the tolerance).
    pub fn qualifies(&self) -> bool {
        self.unusable.is_none() && self.checks.iter().all(|c| c.outcome.passes())
    }

    /// The constraints it failed (missed beyond the tolerance, or N/A).
    pub fn failed(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| !c.outcome.passes())
    }

    /// Its identifier in `format`: see [`Format`]. A device whose UUID is N/A is named by its
    /// index.
    pub fn identifier(&self, format: Format) -> String {
        match (format, &self.uuid) {
            (Format::Uuid, Some(uuid)) => uuid.clone(),
            _ => match self.cuda_index {
                Some(c) => c.to_string(),
                None => self.id.to_string(),
            },
        }
    }
}

/// The outcome of a selection.
#[derive(Debug, Clone, Serialize)]
pub struct Selection {
    /// Every leaf device considered, in the order given, with its figures and fate.
    pub candidates: Vec<Candidate>,
    /// Indices into `candidates` of the chosen devices, best first (or in the order given,
    /// without sorting).
    pub selected: Vec<usize>,
    /// True when the chosen device is a MIG device; then [`Selection::format`] names it by UUID
    /// rather than index, as CUDA cannot address a MIG device by ordinal.
    pub mig: bool,
    /// [`Criteria::min_count`], to tell whether the selection fell short.
    pub min_count: usize,
}

impl Selection {
    /// The chosen candidates, best first.
    pub fn chosen(&self) -> impl Iterator<Item = &Candidate> {
        self.selected.iter().map(|&i| &self.candidates[i])
    }

    /// The chosen device ids, best first.
    pub fn ids(&self) -> Vec<DeviceId> {
        self.chosen().map(|c| c.id).collect()
    }

    /// Fewer devices were chosen than [`Criteria::min_count`] asked for (nvisel then exits with
    /// status 4).
    pub fn is_short(&self) -> bool {
        self.selected.len() < self.min_count
    }

    /// The format the identifiers are given in when `requested` is asked for: a chosen MIG
    /// device turns [`Format::Index`] into [`Format::Uuid`] unless `force_index`.
    pub fn format(&self, requested: Format, force_index: bool) -> Format {
        if self.mig && requested == Format::Index && !force_index {
            Format::Uuid
        } else {
            requested
        }
    }

    /// The chosen devices' identifiers in [`Selection::format`]`(requested, force_index)`,
    /// best first: join them with `,` for `CUDA_VISIBLE_DEVICES`.
    pub fn identifiers(&self, requested: Format, force_index: bool) -> Vec<String> {
        let format = self.format(requested, force_index);
        self.chosen().map(|c| c.identifier(format)).collect()
    }

    /// The chosen devices, best first ([`Format::Device`]), from `context`, which must be the
    /// one selected from.
    pub fn devices(&self, context: &gpu_devices::Context) -> Vec<Device> {
        self.chosen()
            .filter_map(|c| context.device_by_id(c.id).ok())
            .collect()
    }
}

/// Chooses devices from `pool` that meet `criteria` (nvitop's `select_devices`).
///
/// Each leaf device of the pool (a GPU, or the MIG devices of a GPU in MIG mode) is measured
/// once through `collector` (its snapshot, and its processes joined with their users when
/// [`Criteria::free_accounts`] is set), then:
///
/// 1. the memory of the free accounts' processes counts as free;
/// 2. a device that is lost, or whose memory cannot be read, is never chosen, even with no
///    constraint at all ([`Unusable`], [`Fate::Unusable`]);
///    each constraint is checked, loosened by [`Criteria::tolerance`]; a device whose value is
///    N/A does not meet the constraint; devices failing one are rejected;
/// 3. with [`Criteria::sort`], the rest are sorted best first (fewest constraints loosened,
///    most free memory, most used memory, lowest GPU utilization, lowest memory utilization,
///    highest physical index, so that GPU 0 stays free; N/A sorts last);
/// 4. if MIG devices qualified, whole GPUs and MIG devices are not mixed: the whole GPUs are
///    kept when there are at least `min_count > 0` of them, or when the best device is a whole
///    GPU; otherwise only the best MIG device is kept (CUDA shows one MIG device at most);
/// 5. at most [`Criteria::max_count`] are kept.
///
/// `min_count` is not enforced: [`Selection::is_short`] tells whether it was met.
///
/// # Errors
///
/// [`Error::CountRange`] when `max_count < min_count`.
pub fn select_devices(
    collector: &ProcessCollector,
    pool: Pool,
    criteria: &Criteria,
) -> Result<Selection, Error> {
    criteria.validate()?;
    let snapshots: Vec<DeviceSnapshot> = match pool {
        Pool::All => leaves(collector.context().devices())
            .iter()
            .map(Device::snapshot)
            .collect(),
        Pool::Devices(devices) => leaves(devices).iter().map(Device::snapshot).collect(),
        Pool::Cuda(devices) => devices.iter().map(CudaDevice::snapshot).collect(),
    };
    let snapshots = if criteria.free_accounts.is_empty() {
        Snapshots::without_processes(snapshots)
    } else {
        collector.join(snapshots)
    };
    select_from_snapshots(&snapshots, criteria)
}

fn leaves(devices: Vec<Device>) -> Vec<Device> {
    devices.iter().flat_map(Device::to_leaf_devices).collect()
}

/// [`select_devices`] over snapshots already taken: `snapshots.devices` are the leaf devices to
/// choose from (their `cuda_index` names them when set), and `snapshots.processes` their
/// processes with host users, used for [`Criteria::free_accounts`].
///
/// # Errors
///
/// [`Error::CountRange`] when `max_count < min_count`.
pub fn select_from_snapshots(
    snapshots: &Snapshots,
    criteria: &Criteria,
) -> Result<Selection, Error> {
    let figures = snapshots
        .devices
        .iter()
        .map(|d| figures(d, snapshots, criteria))
        .collect();
    select_from_figures(figures, criteria)
}

/// A leaf device's figures, as measured for a selection: what [`select_from_figures`] needs
/// of a device that is not on this machine (one read from a fleet's Prometheus, for example).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Figures {
    /// The device; its MIG-ness matters for the MIG rule, its index for the tie-break and
    /// the identifier. A caller naming devices of several hosts numbers them itself.
    pub id: DeviceId,
    /// Its CUDA ordinal, which names it when set.
    pub cuda_index: Option<u32>,
    /// Its UUID.
    pub uuid: Option<String>,
    /// Total memory, bytes.
    pub memory_total: Option<u64>,
    /// Used memory, bytes.
    pub memory_used: Option<u64>,
    /// Free memory, bytes.
    pub memory_free: Option<u64>,
    /// Memory of [`Criteria::free_accounts`]' processes on it, bytes, counted as free.
    pub memory_as_free: u64,
    /// GPU utilization, percent.
    pub gpu_utilization: Option<u32>,
    /// Memory-bandwidth utilization, percent.
    pub memory_utilization: Option<u32>,
    /// Why it cannot be chosen at all; `None` for a usable device.
    pub unusable: Option<Unusable>,
    /// Why it needs attention (`DeviceSnapshot::attention`), empty when nothing does; `None`
    /// when its health is not known (then [`Criteria::healthy`] is not met).
    pub attention: Option<Vec<String>>,
}

/// [`select_from_snapshots`] over figures already measured, in the order given: the same
/// checks, order, MIG rule and count cap.
///
/// # Errors
///
/// [`Error::CountRange`] when `max_count < min_count`.
pub fn select_from_figures(figures: Vec<Figures>, criteria: &Criteria) -> Result<Selection, Error> {
    criteria.validate()?;
    let mut candidates: Vec<Candidate> =
        figures.into_iter().map(|f| measure(f, criteria)).collect();

    let mut order: Vec<usize> = (0..candidates.len())
        .filter(|&i| candidates[i].qualifies())
        .collect();
    for c in candidates.iter_mut() {
        if c.unusable.is_some() {
            c.fate = Fate::Unusable;
        } else if !c.qualifies() {
            c.fate = Fate::Rejected;
        }
    }
    if criteria.sort {
        order.sort_by(|&a, &b| better(&candidates[a], &candidates[b]));
    }

    let mut mig = false;
    if order.iter().any(|&i| candidates[i].is_mig_device()) {
        let whole: Vec<usize> = order
            .iter()
            .copied()
            .filter(|&i| !candidates[i].is_mig_device())
            .collect();
        let best_is_whole = order
            .first()
            .is_some_and(|&i| !candidates[i].is_mig_device());
        let kept = if (criteria.min_count > 0 && whole.len() >= criteria.min_count) || best_is_whole
        {
            whole
        } else {
            mig = true;
            order
                .iter()
                .copied()
                .filter(|&i| candidates[i].is_mig_device())
                .take(1)
                .collect()
        };
        for &i in &order {
            if !kept.contains(&i) {
                candidates[i].fate = Fate::MigRule;
            }
        }
        order = kept;
    }

    if let Some(max) = criteria.max_count {
        for &i in order.iter().skip(max) {
            candidates[i].fate = Fate::OverMaxCount;
        }
        order.truncate(max);
    }
    Ok(Selection {
        candidates,
        selected: order,
        mig,
        min_count: criteria.min_count,
    })
}

/// Whether a process of `user`, in Kubernetes pod `pod` of `namespace` (each `None` when not
/// known, or outside any pod), belongs to the free account `account` ([`Criteria::free_accounts`]):
/// `pod:NAME` (or `pod:NAMESPACE/NAME`) names a pod, anything else a user. A process whose user
/// or pod is not known belongs to none. (A user name cannot hold `:`, so `pod:` never hides
/// one.)
pub fn account_matches(
    account: &str,
    user: Option<&str>,
    namespace: Option<&str>,
    pod: Option<&str>,
) -> bool {
    match account.strip_prefix("pod:") {
        Some(want) => {
            let (want_ns, want_pod) = match want.split_once('/') {
                Some((ns, name)) => (Some(ns), name),
                None => (None, want),
            };
            pod == Some(want_pod) && want_ns.is_none_or(|ns| namespace == Some(ns))
        }
        None => user == Some(account),
    }
}

/// [`account_matches`] for a process's host facts.
fn host_matches(account: &str, host: &gpu_processes::HostProcess) -> bool {
    let c = host.container.as_ref();
    account_matches(
        account,
        host.user.as_deref(),
        c.and_then(|c| c.namespace.as_deref()),
        c.and_then(|c| c.pod.as_deref()),
    )
}

/// A snapshot's figures, with the free accounts' memory.
fn figures(d: &DeviceSnapshot, snapshots: &Snapshots, criteria: &Criteria) -> Figures {
    let memory = d.memory.value().copied();
    let utilization = d.utilization.value().copied();
    let memory_as_free: u64 = snapshots
        .processes
        .iter()
        .filter(|p| p.device == d.id)
        .filter(|p| {
            criteria
                .free_accounts
                .iter()
                .any(|a| host_matches(a, &p.host))
        })
        .filter_map(|p| p.gpu_memory)
        .sum();
    Figures {
        id: d.id,
        cuda_index: d.cuda_index,
        uuid: d.uuid.value().cloned(),
        memory_total: memory.map(|m| m.total),
        memory_used: memory.map(|m| m.used),
        memory_free: memory.map(|m| m.free),
        memory_as_free,
        unusable: Unusable::of(d),
        attention: Some(d.attention()),
        gpu_utilization: utilization.map(|u| u.gpu),
        memory_utilization: utilization.map(|u| u.memory),
    }
}

/// A device's checks.
fn measure(f: Figures, criteria: &Criteria) -> Candidate {
    let memory_as_free = f.memory_as_free;
    let memory_free = f.memory_free.map(|m| m.saturating_add(memory_as_free));
    let memory_used = f.memory_used.map(|m| m.saturating_sub(memory_as_free));
    let memory_total = f.memory_total;
    let gpu_utilization = f.gpu_utilization;
    let memory_utilization = f.memory_utilization;

    let tol = u64::from(criteria.tolerance);
    let mut checks = Vec::new();
    let at_least = |value: Option<u64>, min: u64| -> Outcome {
        match value {
            None => Outcome::Unknown,
            Some(v) if v >= min => Outcome::Met,
            // v >= min * (1 - tol / 100), exactly, in integers.
            Some(v)
                if tol >= 100 || u128::from(v) * 100 >= u128::from(min) * u128::from(100 - tol) =>
            {
                Outcome::Tolerated
            }
            Some(_) => Outcome::Failed,
        }
    };
    let at_most = |value: Option<u64>, max: u64| -> Outcome {
        match value {
            None => Outcome::Unknown,
            Some(v) if v <= max => Outcome::Met,
            Some(v) if v <= max.saturating_add(tol) => Outcome::Tolerated,
            Some(_) => Outcome::Failed,
        }
    };
    if let Some(min) = criteria.min_free_memory {
        checks.push(Check {
            constraint: Constraint::MinFreeMemory,
            value: memory_free,
            limit: min,
            outcome: at_least(memory_free, min),
        });
    }
    if let Some(min) = criteria.min_total_memory {
        checks.push(Check {
            constraint: Constraint::MinTotalMemory,
            value: memory_total,
            limit: min,
            outcome: at_least(memory_total, min),
        });
    }
    if let Some(max) = criteria.max_gpu_utilization {
        let v = gpu_utilization.map(u64::from);
        checks.push(Check {
            constraint: Constraint::MaxGpuUtilization,
            value: v,
            limit: u64::from(max),
            outcome: at_most(v, u64::from(max)),
        });
    }
    if let Some(max) = criteria.max_memory_utilization {
        let v = memory_utilization.map(u64::from);
        checks.push(Check {
            constraint: Constraint::MaxMemoryUtilization,
            value: v,
            limit: u64::from(max),
            outcome: at_most(v, u64::from(max)),
        });
    }
    let attention = f.attention;
    if criteria.healthy {
        checks.push(Check {
            constraint: Constraint::Healthy,
            value: attention.as_ref().map(|a| a.len() as u64),
            limit: 0,
            outcome: match &attention {
                None => Outcome::Unknown,
                Some(a) if a.is_empty() => Outcome::Met,
                Some(_) => Outcome::Failed,
            },
        });
    }
    Candidate {
        id: f.id,
        cuda_index: f.cuda_index,
        attention: attention.unwrap_or_default(),
        uuid: f.uuid,
        memory_free,
        memory_used,
        memory_total,
        memory_as_free,
        gpu_utilization,
        memory_utilization,
        checks,
        unusable: f.unusable,
        fate: Fate::Selected,
    }
}

/// The sort order: `Less` when `a` is the better device.
fn better(a: &Candidate, b: &Candidate) -> Ordering {
    a.loosened()
        .cmp(&b.loosened())
        .then_with(|| more(a.memory_free, b.memory_free))
        .then_with(|| more(a.memory_used, b.memory_used))
        .then_with(|| less(a.gpu_utilization, b.gpu_utilization))
        .then_with(|| less(a.memory_utilization, b.memory_utilization))
        .then_with(|| b.id.physical_index().cmp(&a.id.physical_index()))
}

/// Larger first, N/A last.
fn more<T: Ord>(a: Option<T>, b: Option<T>) -> Ordering {
    match (a, b) {
        (Some(a), Some(b)) => b.cmp(&a),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    }
}

/// Smaller first, N/A last.
fn less<T: Ord>(a: Option<T>, b: Option<T>) -> Ordering {
    match (a, b) {
        (Some(a), Some(b)) => a.cmp(&b),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    }
}
