//! The fleet: hosts, their devices and processes, folded from one answer per metric family.
//!
//! Hosts are told apart by Prometheus's `instance` label (one scrape target each) and named by
//! the exporter's `hostname` label, or by the instance when there is none. A host is listed
//! when Prometheus scrapes it in a job that has served gpuscope metrics within the lookback,
//! so an exporter that is down stays in the view, marked down.

use foldhash::{HashMap, HashSet};
use std::sync::Arc;

use serde::Serialize;

use crate::names;
use crate::prom::Series;
use crate::values::{self, OutOfRange};

/// Version of the JSON document's shape.
pub const JSON_SCHEMA: &str = "gpuscope.fleet/1";

/// Hosts (and `up` targets) kept in one fleet, ten times the fleets gpuscope is measured
/// with; the series of further hosts are counted, not kept.
pub const MAX_HOSTS: usize = 10_000;

/// What the fleet's model may take in memory, bytes, as [`FleetBuilder`] counts it (each
/// host, device and process at twice its size, for the vectors' and maps' slack, plus every
/// text it keeps). A fleet of 1,000 hosts with 8 GPUs and 64 processes each counts about
/// 25 MB. Series that would need more are counted, not kept.
pub const MAX_MODEL_BYTES: usize = 64 << 20;

/// How far in the future (Prometheus's clock ahead of the exporter's) a sample time may be
/// and still count as fresh, seconds: clocks kept by NTP differ by milliseconds, this allows
/// a few seconds of drift. A sample time further ahead, or not a finite number, is unusable:
/// the host is stale.
pub const CLOCK_SKEW_SECONDS: f64 = 5.0;

/// The bounds of one fleet's model: [`MAX_HOSTS`] and [`MAX_MODEL_BYTES`] by default, smaller
/// ones for tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelLimits {
    /// Hosts kept, and targets of `up`.
    pub hosts: usize,
    /// Bytes the model may take, as counted by [`FleetBuilder`].
    pub bytes: usize,
}

impl Default for ModelLimits {
    /// [`MAX_HOSTS`], [`MAX_MODEL_BYTES`].
    fn default() -> ModelLimits {
        ModelLimits {
            hosts: MAX_HOSTS,
            bytes: MAX_MODEL_BYTES,
        }
    }
}

/// The whole fleet at one refresh.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Fleet {
    /// [`JSON_SCHEMA`].
    pub schema: &'static str,
    /// Where the answers came from (the Prometheus URL, or the exporters' URLs).
    pub source: String,
    /// When Prometheus evaluated the queries, Unix seconds.
    pub evaluated_at: Option<f64>,
    /// Hosts, in the order asked for (`--sort`).
    pub hosts: Vec<Host>,
    /// Queries that failed or answered in part: the view lacks what they would have given.
    pub errors: Vec<FamilyError>,
}

impl Fleet {
    /// Each host's name for people and for `select`, in the order of `hosts`: its `host` (the
    /// hostname), or its instance when another host of this fleet has the same hostname, so
    /// that no two hosts of a fleet this crate read (their instances unique) are spelled
    /// alike. Hosts are told apart by their instance (the scrape target); two exporters that
    /// report one hostname (a cloned machine, two exporters on one) are still two hosts.
    pub fn host_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.hosts.iter().map(|h| h.host.as_str()).collect();
        // Until no spelling is shared: a host whose hostname another host also has is named
        // by its instance. Instances are unique, and a host without one is keyed by its
        // hostname, so this ends with every spelling unique (each round renames at least one
        // host, and a renamed host is never renamed again).
        loop {
            let mut count: HashMap<&str, usize> = HashMap::default();
            for n in &names {
                *count.entry(n).or_default() += 1;
            }
            let mut renamed = false;
            for (name, h) in names.iter_mut().zip(&self.hosts) {
                if count[name] > 1 && *name == h.host.as_str() {
                    if let Some(instance) = h.instance.as_deref().filter(|i| *i != h.host) {
                        *name = instance;
                        renamed = true;
                    }
                }
            }
            if !renamed {
                return names;
            }
        }
    }
}

/// A metric family whose query failed or warned.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FamilyError {
    /// The query.
    pub query: String,
    /// What went wrong.
    pub error: String,
}

/// How a host's exporter is doing.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum HostState {
    /// Scraped, with a fresh sample.
    Up,
    /// Prometheus cannot scrape it (`up == 0`).
    Down,
    /// Scraped, but the exporter's sample is older than the stale limit, or Prometheus no
    /// longer scrapes it at all (only old samples are left).
    Stale,
}

impl HostState {
    /// `up`, `down` or `stale`.
    pub fn as_str(self) -> &'static str {
        match self {
            HostState::Up => "up",
            HostState::Down => "down",
            HostState::Stale => "stale",
        }
    }
}

/// One host (one exporter).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Host {
    /// The `hostname` label, else the instance.
    pub host: String,
    /// Prometheus's `instance` label (the scrape target), or the exporter's URL.
    pub instance: Option<String>,
    /// Prometheus's `job` label.
    pub job: Option<String>,
    /// How its exporter is doing.
    pub state: HostState,
    /// Age of the exporter's latest sample when the queries ran, seconds.
    pub sample_age_seconds: Option<f64>,
    /// Driver version (from `gpuscope_device_info`, when exported).
    pub driver_version: Option<String>,
    /// The exporter's latest sample time (Unix seconds, its own clock), which tells whether
    /// the host's data changed since an earlier refresh. Not in the JSON.
    #[serde(skip)]
    pub sample_time: Option<f64>,
    /// Physical devices, each followed by its MIG devices. Shared between refreshes: a host
    /// whose data did not change keeps the very same list (no copy of its devices and
    /// processes), so change it through `Arc::make_mut`.
    pub devices: Arc<Vec<FleetDevice>>,
}

/// One device of a host.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FleetDevice {
    /// `"3"` or `"3:1"`.
    pub id: String,
    /// Index of the physical GPU.
    pub index: u32,
    /// MIG slot, for a MIG device.
    pub mig_index: Option<u32>,
    /// The product name (`name` label).
    pub name: Option<String>,
    /// The UUID (`uuid` label).
    pub uuid: Option<String>,
    /// The PCI bus id (`gpuscope_device_info`'s `bus_id` label).
    pub bus_id: Option<String>,
    /// `gpuscope_device_up`: false when the GPU is lost or its memory cannot be read; `None`
    /// when not sent, or sent as anything but 0 or 1 (an [`OutOfRange`] note says so).
    pub up: Option<bool>,
    /// Total memory, bytes.
    pub memory_total_bytes: Option<u64>,
    /// Used memory, bytes.
    pub memory_used_bytes: Option<u64>,
    /// Free memory, bytes.
    pub memory_free_bytes: Option<u64>,
    /// GPU utilization, percent.
    pub gpu_utilization_percent: Option<u32>,
    /// Memory-bandwidth utilization, percent.
    pub memory_utilization_percent: Option<u32>,
    /// Temperature, °C.
    pub temperature_celsius: Option<u32>,
    /// Fan speed, percent.
    pub fan_speed_percent: Option<u32>,
    /// Power draw, watts.
    pub power_usage_watts: Option<f64>,
    /// Power limit, watts.
    pub power_limit_watts: Option<f64>,
    /// A MIG device's GPU instance id.
    pub gpu_instance_id: Option<u32>,
    /// A MIG device's compute instance id.
    pub compute_instance_id: Option<u32>,
    /// Processes (exported with `export --processes`), by PID.
    pub processes: Vec<FleetProcess>,
    /// The values sent for this device (or its processes) that are out of their family's
    /// range ([`crate::values::RANGES`]), each `null` above; in the JSON only when there is
    /// one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub out_of_range: Vec<OutOfRange>,
    /// How many more were out of range than [`values::MAX_NOTES_PER_DEVICE`] kept; in the
    /// JSON only when not 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub out_of_range_not_kept: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl FleetDevice {
    /// Notes a value out of range, within [`values::MAX_NOTES_PER_DEVICE`].
    pub fn note_out_of_range(&mut self, note: OutOfRange) {
        if self.out_of_range.len() < values::MAX_NOTES_PER_DEVICE {
            self.out_of_range.push(note);
        } else {
            self.out_of_range_not_kept = self.out_of_range_not_kept.saturating_add(1);
        }
    }

    /// Which memory value does not fit in the total sent with it, if one does not: used or
    /// free more than the total, or both together (then used is named).
    fn memory_misfit(&self) -> Option<(&'static str, u64)> {
        let total = self.memory_total_bytes?;
        let (used, free) = (self.memory_used_bytes, self.memory_free_bytes);
        match (used, free) {
            (Some(u), _) if u > total => Some((names::DEVICE_MEMORY_USED, u)),
            (_, Some(f)) if f > total => Some((names::DEVICE_MEMORY_FREE, f)),
            (Some(u), Some(f)) if u.checked_add(f).is_none_or(|sum| sum > total) => {
                Some((names::DEVICE_MEMORY_USED, u))
            }
            _ => None,
        }
    }

    /// Makes the three memory values N/A, with a note on `family`'s `value`: a broken
    /// exporter's, and which of the three is wrong cannot be told.
    fn refuse_memory(&mut self, family: &'static str, value: u64) {
        self.memory_total_bytes = None;
        self.memory_used_bytes = None;
        self.memory_free_bytes = None;
        self.note_out_of_range(OutOfRange {
            family,
            pid: None,
            label: None,
            value: value.to_string(),
            expected: MEMORY_FITS,
        });
    }
}

/// The note of a used or free memory that does not fit in the total sent with it.
const MEMORY_FITS: &str = "at most the total memory, used and free together too";

/// One process on one device of a host.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FleetProcess {
    /// The process id (in the host's PID namespace).
    pub pid: u32,
    /// The user name, shared by every process of the fleet that has it.
    pub user: Option<Arc<str>>,
    /// The shell-quoted command line (exported with `--process-command` only), shared by
    /// every process of the fleet that has the same one (a job's ranks, its workers).
    pub command: Option<Arc<str>>,
    /// The Kubernetes pod, its namespace and the container's name (docs/containers.md),
    /// shared as the user and command are (a pod's processes on all its GPUs).
    pub pod: Option<Arc<str>>,
    /// The pod's namespace.
    pub namespace: Option<Arc<str>>,
    /// The container's name.
    pub container: Option<Arc<str>>,
    /// GPU memory, bytes.
    pub used_memory_bytes: Option<u64>,
    /// SM utilization, percent.
    pub sm_utilization_percent: Option<u32>,
}

/// A device value a family gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceField {
    /// `gpuscope_device_up`.
    Up,
    /// Total memory.
    MemoryTotal,
    /// Used memory.
    MemoryUsed,
    /// Free memory.
    MemoryFree,
    /// GPU utilization ratio.
    Utilization,
    /// Memory-bandwidth utilization ratio.
    MemoryUtilization,
    /// Temperature.
    Temperature,
    /// Fan speed ratio.
    FanSpeed,
    /// Power draw.
    PowerUsage,
    /// Power limit.
    PowerLimit,
    /// `gpuscope_device_info`: identity labels only.
    Info,
}

/// A process value a family gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessField {
    /// GPU memory.
    Memory,
    /// SM utilization ratio.
    SmUtilization,
}

impl DeviceField {
    /// The family that gives it.
    pub fn family(self) -> &'static str {
        match self {
            DeviceField::Up => names::DEVICE_UP,
            DeviceField::MemoryTotal => names::DEVICE_MEMORY_TOTAL,
            DeviceField::MemoryUsed => names::DEVICE_MEMORY_USED,
            DeviceField::MemoryFree => names::DEVICE_MEMORY_FREE,
            DeviceField::Utilization => names::DEVICE_UTILIZATION,
            DeviceField::MemoryUtilization => names::DEVICE_MEMORY_UTILIZATION,
            DeviceField::Temperature => names::DEVICE_TEMPERATURE,
            DeviceField::FanSpeed => names::DEVICE_FAN_SPEED,
            DeviceField::PowerUsage => names::DEVICE_POWER_USAGE,
            DeviceField::PowerLimit => names::DEVICE_POWER_LIMIT,
            DeviceField::Info => names::DEVICE_INFO,
        }
    }
}

impl ProcessField {
    /// The family that gives it.
    pub fn family(self) -> &'static str {
        match self {
            ProcessField::Memory => names::PROCESS_GPU_MEMORY,
            ProcessField::SmUtilization => names::PROCESS_SM_UTILIZATION,
        }
    }
}

/// The device families asked, one query each per refresh.
pub const DEVICE_FAMILIES: &[(&str, DeviceField)] = &[
    (names::DEVICE_UP, DeviceField::Up),
    (names::DEVICE_MEMORY_TOTAL, DeviceField::MemoryTotal),
    (names::DEVICE_MEMORY_USED, DeviceField::MemoryUsed),
    (names::DEVICE_MEMORY_FREE, DeviceField::MemoryFree),
    (names::DEVICE_UTILIZATION, DeviceField::Utilization),
    (
        names::DEVICE_MEMORY_UTILIZATION,
        DeviceField::MemoryUtilization,
    ),
    (names::DEVICE_TEMPERATURE, DeviceField::Temperature),
    (names::DEVICE_FAN_SPEED, DeviceField::FanSpeed),
    (names::DEVICE_POWER_USAGE, DeviceField::PowerUsage),
    (names::DEVICE_POWER_LIMIT, DeviceField::PowerLimit),
    (names::DEVICE_INFO, DeviceField::Info),
];

/// The process families asked, one query each per refresh.
pub const PROCESS_FAMILIES: &[(&str, ProcessField)] = &[
    (names::PROCESS_GPU_MEMORY, ProcessField::Memory),
    (names::PROCESS_SM_UTILIZATION, ProcessField::SmUtilization),
];

/// Builds a [`Fleet`] from the answers of one refresh, fed in any order, within
/// [`ModelLimits`]: what does not fit is counted and said in the fleet's errors (see
/// [`FleetBuilder::take_notes`]).
#[derive(Debug, Default)]
pub struct FleetBuilder {
    hosts: Vec<Host>,
    by_instance: HashMap<String, usize>,
    /// (host, GPU index, MIG slot) -> device position (parsed, so that finding a series'
    /// device allocates nothing).
    devices: HashMap<(usize, u32, Option<u32>), usize>,
    /// (host, device position, pid) -> process position.
    processes: HashMap<(usize, usize, u32), usize>,
    /// `up` of each instance, with its job.
    up: HashMap<String, (bool, Option<String>)>,
    /// Jobs that served gpuscope metrics.
    jobs: HashSet<String>,
    evaluated_at: Option<f64>,
    errors: Vec<FamilyError>,
    /// User names, command lines and pods seen, each kept once (64,000 processes of a large
    /// fleet have a few hundred distinct ones).
    texts: HashSet<Arc<str>>,
    limits: ModelLimits,
    /// What the model takes so far, as [`FleetBuilder::afford`] counts it.
    bytes: usize,
    /// Series of hosts (or `up` targets) beyond [`ModelLimits::hosts`], since the last notes.
    beyond_hosts: usize,
    /// Series not kept (or kept without some of their labels) for want of memory, since the
    /// last notes.
    beyond_bytes: usize,
    /// Hosts whose sample time is unusable, since the last notes: the first few, each with
    /// why, and how many in all.
    bad_times: (Vec<String>, usize),
}

/// What the model is charged for a host, device or process besides its texts: twice the
/// struct (a vector grows by doubling) and a map entry.
fn item_cost<T>() -> usize {
    2 * std::mem::size_of::<T>() + 64
}

/// What the model is charged for a text it keeps (the allocation's own overhead included).
fn text_cost(text: &str) -> usize {
    text.len() + 16
}

/// `text`, shared with the equal text seen before.
fn intern(texts: &mut HashSet<Arc<str>>, text: &str) -> Arc<str> {
    if let Some(t) = texts.get(text) {
        return t.clone();
    }
    let t: Arc<str> = Arc::from(text);
    texts.insert(t.clone());
    t
}

/// A ratio (0 to 1, or up to 2 for a fan: already in its family's range) as a whole percent.
fn percent(ratio: f64) -> Option<u32> {
    whole(ratio * 100.0).and_then(|v| u32::try_from(v).ok())
}

/// A non-negative number (bytes, °C: already in its family's range) to the nearest whole one.
fn whole(v: f64) -> Option<u64> {
    (v.is_finite() && v >= 0.0 && v <= u64::MAX as f64).then_some(v.round() as u64)
}

fn small(v: f64) -> Option<u32> {
    whole(v).and_then(|v| u32::try_from(v).ok())
}

fn finite(v: f64) -> Option<f64> {
    v.is_finite().then_some(v)
}

/// The value of series `s` of `family` when it is in the family's range
/// ([`values::RANGES`]); else `None`, and the note that says so.
fn in_range(family: &'static str, s: &Series<'_>, pid: Option<u32>) -> Result<f64, OutOfRange> {
    let v = s.number().unwrap_or(f64::NAN);
    match values::range(family) {
        Some(r) if !r.accepts(v) => Err(OutOfRange {
            family,
            pid,
            label: None,
            value: values::kept_text(&s.value.1),
            expected: r.shown,
        }),
        _ => Ok(v),
    }
}

/// Parses a device's `index` label: `3` or `3:1`.
fn parse_index(text: &str) -> Option<(u32, Option<u32>)> {
    match text.split_once(':') {
        None => Some((text.parse().ok()?, None)),
        Some((gpu, mig)) => Some((gpu.parse().ok()?, Some(mig.parse().ok()?))),
    }
}

impl FleetBuilder {
    /// An empty fleet, within the default [`ModelLimits`].
    pub fn new() -> FleetBuilder {
        FleetBuilder::within(ModelLimits::default())
    }

    /// An empty fleet within `limits`.
    pub fn within(limits: ModelLimits) -> FleetBuilder {
        FleetBuilder {
            limits,
            ..FleetBuilder::default()
        }
    }

    /// Charges `bytes` to the model if they fit within its limit.
    fn afford(&mut self, bytes: usize) -> bool {
        let total = self.bytes.saturating_add(bytes);
        if total > self.limits.bytes {
            return false;
        }
        self.bytes = total;
        true
    }

    /// Notes, as errors of `query`, what the answers folded since the last call left out:
    /// series of hosts beyond the limit, series that did not fit in memory, hosts whose sample
    /// time is unusable. A reader calls it after each answer; [`FleetBuilder::finish`] notes
    /// what is left under the query `fleet`.
    pub fn take_notes(&mut self, query: &str) {
        if self.beyond_hosts > 0 {
            let note = format!(
                "{} series of hosts beyond the first {} not kept",
                std::mem::take(&mut self.beyond_hosts),
                self.limits.hosts
            );
            self.error(query, note);
        }
        if self.beyond_bytes > 0 {
            let note = format!(
                "{} series not kept whole: the fleet's model reached its {} MiB",
                std::mem::take(&mut self.beyond_bytes),
                self.limits.bytes >> 20
            );
            self.error(query, note);
        }
        let (named, count) = std::mem::take(&mut self.bad_times);
        if count > 0 {
            let more = match count - named.len() {
                0 => String::new(),
                n => format!(" and {n} more"),
            };
            let note = format!(
                "unusable sample time (more than {CLOCK_SKEW_SECONDS} s in the future, or not a \
                 number) of {}{more}: shown stale",
                named.join(", ")
            );
            self.error(query, note);
        }
    }

    /// How many series the model's bounds have refused since the last notes: (beyond the
    /// hosts, beyond the bytes). A mark for [`FleetBuilder::bound_reached_since`].
    pub(crate) fn refused(&self) -> (usize, usize) {
        (self.beyond_hosts, self.beyond_bytes)
    }

    /// Which bound refused series since `mark` (a [`FleetBuilder::refused`] taken before, with
    /// no notes taken in between), for people: what made an answer's host go unkept.
    pub(crate) fn bound_reached_since(&self, mark: (usize, usize)) -> Option<String> {
        if self.beyond_hosts > mark.0 {
            Some(format!(
                "the fleet's model holds {} hosts, its most",
                self.limits.hosts
            ))
        } else if self.beyond_bytes > mark.1 {
            Some(format!(
                "the fleet's model reached its {} MiB",
                self.limits.bytes >> 20
            ))
        } else {
            None
        }
    }

    /// Notes a query that failed or warned.
    pub fn error(&mut self, query: &str, error: String) {
        self.errors.push(FamilyError {
            query: query.to_string(),
            error,
        });
    }

    /// Notes when the queries were evaluated.
    pub fn evaluated_at(&mut self, t: Option<f64>) {
        if self.evaluated_at.is_none() {
            self.evaluated_at = t;
        }
    }

    /// The host of a series, created when first seen; `None` beyond the limits (counted). A
    /// series read from an exporter directly (`--remote`) belongs to the URL it was read from,
    /// `fallback`, whatever its labels say; a series from Prometheus to its `instance`, or
    /// without one, its `hostname`.
    fn host_of(&mut self, s: &Series<'_>, fallback: Option<&str>) -> Option<usize> {
        // An exporter's answer cannot name another host: its `instance` label is not read.
        // Without an instance (relabelled away, or a federated series), the hostname tells
        // hosts apart.
        let real = fallback.or_else(|| s.label("instance"));
        let instance = real.or_else(|| s.label("hostname")).unwrap_or("");
        if let Some(&i) = self.by_instance.get(instance) {
            if self.hosts[i].host == instance {
                if let Some(name) = s.label("hostname") {
                    if self.afford(text_cost(name)) {
                        self.hosts[i].host = name.to_string();
                    } else {
                        self.beyond_bytes += 1;
                    }
                }
            }
            return Some(i);
        }
        let name = s.label("hostname").unwrap_or(instance);
        if self.hosts.len() >= self.limits.hosts {
            self.beyond_hosts += 1;
            return None;
        }
        let cost = item_cost::<Host>()
            + 2 * text_cost(instance)
            + text_cost(name)
            + s.label("job").map_or(0, text_cost);
        if !self.afford(cost) {
            self.beyond_bytes += 1;
            return None;
        }
        let name = name.to_string();
        self.hosts.push(Host {
            host: name,
            instance: real.map(str::to_string),
            job: s.label("job").map(str::to_string),
            state: HostState::Stale,
            sample_age_seconds: None,
            driver_version: None,
            sample_time: None,
            devices: Arc::default(),
        });
        self.by_instance
            .insert(instance.to_string(), self.hosts.len() - 1);
        Some(self.hosts.len() - 1)
    }

    /// One series of [`names::SAMPLE_TIME_FAMILY`] (over the lookback). A sample time more
    /// than [`CLOCK_SKEW_SECONDS`] after the evaluation time, or not a finite number, is
    /// unusable: the host has no sample age (it is stale), and the next notes say so.
    pub fn sample_time(&mut self, s: &Series<'_>, fallback: Option<&str>) {
        let Some(h) = self.host_of(s, fallback) else {
            return;
        };
        if let Some(job) = s.label("job") {
            if !self.jobs.contains(job) {
                if self.afford(text_cost(job) + 64) {
                    self.jobs.insert(job.to_string());
                } else {
                    self.beyond_bytes += 1;
                }
            }
        }
        let t = s.number();
        let age = t.map(|t| s.value.0 - t);
        let host = &mut self.hosts[h];
        match (t, age) {
            (Some(t), Some(age)) if age.is_finite() && age >= -CLOCK_SKEW_SECONDS => {
                host.sample_age_seconds = Some(age.max(0.0));
                host.sample_time = Some(t);
            }
            _ => {
                host.sample_age_seconds = None;
                host.sample_time = None;
                let why = match age {
                    Some(age) if age.is_finite() => format!("{} s ahead", (-age).round()),
                    _ => format!("{:?}", s.value.1.chars().take(24).collect::<String>()),
                };
                let (named, count) = &mut self.bad_times;
                if named.len() < 5 {
                    named.push(format!("{} ({why})", host.host));
                }
                *count += 1;
            }
        }
    }

    /// Holds every device's memory values to each other, once all families are in: used or
    /// free memory that does not fit in the total makes all three N/A, with a note. A kept
    /// host's devices, consistent since they were read, are not copied.
    fn refuse_inconsistent_memory(&mut self) {
        for host in &mut self.hosts {
            if host.devices.iter().all(|d| d.memory_misfit().is_none()) {
                continue;
            }
            for d in Arc::make_mut(&mut host.devices) {
                if let Some((family, value)) = d.memory_misfit() {
                    d.refuse_memory(family, value);
                }
            }
        }
    }

    /// The hosts seen so far that Prometheus scrapes now (`up == 1`), by instance, with their
    /// sample time: after the sample-time and `up` answers, what an incremental refresh
    /// compares with the previous fleet.
    pub fn scraped_hosts(&self) -> Vec<(String, Option<f64>)> {
        self.hosts
            .iter()
            .filter_map(|h| {
                let i = h.instance.as_ref()?;
                matches!(self.up.get(i), Some((true, _))).then(|| (i.clone(), h.sample_time))
            })
            .collect()
    }

    /// Whether a host of this instance (or, read directly, this URL) has been seen.
    pub fn has_host(&self, instance: &str) -> bool {
        self.by_instance.contains_key(instance)
    }

    /// Whether every host seen so far has an instance (an incremental refresh selects hosts
    /// by it).
    pub fn all_have_instances(&self) -> bool {
        self.hosts.iter().all(|h| h.instance.is_some())
    }

    /// Takes a host's devices (and driver version) from an earlier refresh: its data did not
    /// change, so its families were not asked again. The devices are shared with `from`, not
    /// copied.
    pub fn keep_devices(&mut self, instance: &str, from: &Host) {
        if let Some(&h) = self.by_instance.get(instance) {
            self.hosts[h].devices = Arc::clone(&from.devices);
            self.hosts[h].driver_version = from.driver_version.clone();
        }
    }

    /// One series of `up`. Once the sample times have named gpuscope's jobs, the targets of
    /// other jobs are not kept (a large Prometheus scrapes many more targets than it has GPU
    /// hosts).
    pub fn up(&mut self, s: &Series<'_>) {
        let Some(instance) = s.label("instance") else {
            return;
        };
        let job = s.label("job");
        if !self.jobs.is_empty() && !job.is_some_and(|j| self.jobs.contains(j)) {
            return;
        }
        let up = s.number() == Some(1.0);
        if let Some(entry) = self.up.get_mut(instance) {
            entry.0 = up;
            return;
        }
        if self.up.len() >= self.limits.hosts {
            self.beyond_hosts += 1;
            return;
        }
        if !self.afford(64 + text_cost(instance) + job.map_or(0, text_cost)) {
            self.beyond_bytes += 1;
            return;
        }
        self.up
            .insert(instance.to_string(), (up, job.map(str::to_string)));
    }

    /// The device of a series, created when first seen; `None` without a good `index`.
    fn device_of(&mut self, s: &Series<'_>, fallback: Option<&str>) -> Option<(usize, usize)> {
        let id = s.label("index")?;
        let (index, mig_index) = parse_index(id)?;
        let h = self.host_of(s, fallback)?;
        let key = (h, index, mig_index);
        if let Some(&d) = self.devices.get(&key) {
            return Some((h, d));
        }
        if !self.afford(item_cost::<FleetDevice>() + text_cost(id)) {
            self.beyond_bytes += 1;
            return None;
        }
        let devices = Arc::make_mut(&mut self.hosts[h].devices);
        devices.push(FleetDevice {
            id: id.to_string(),
            index,
            mig_index,
            name: None,
            uuid: None,
            bus_id: None,
            up: None,
            memory_total_bytes: None,
            memory_used_bytes: None,
            memory_free_bytes: None,
            gpu_utilization_percent: None,
            memory_utilization_percent: None,
            temperature_celsius: None,
            fan_speed_percent: None,
            power_usage_watts: None,
            power_limit_watts: None,
            gpu_instance_id: None,
            compute_instance_id: None,
            processes: Vec::new(),
            out_of_range: Vec::new(),
            out_of_range_not_kept: 0,
        });
        let d = devices.len() - 1;
        self.devices.insert(key, d);
        Some((h, d))
    }

    /// One series of a device family.
    pub fn device(&mut self, field: DeviceField, s: &Series<'_>, fallback: Option<&str>) {
        let Some((h, d)) = self.device_of(s, fallback) else {
            return;
        };
        // The texts a series may add to the model, charged before any is kept.
        let dev = &self.hosts[h].devices[d];
        let mut cost = 0;
        if field == DeviceField::Info {
            cost += s.label("driver_version").map_or(0, text_cost);
            cost += s.label("bus_id").map_or(0, text_cost);
        }
        if dev.name.is_none() {
            cost += s.label("name").map_or(0, text_cost);
        }
        if dev.uuid.is_none() {
            cost += s.label("uuid").map_or(0, text_cost);
        }
        if !self.afford(cost) {
            self.beyond_bytes += 1;
            return;
        }
        if field == DeviceField::Info {
            if let Some(driver) = s.label("driver_version") {
                self.hosts[h].driver_version = Some(driver.to_string());
            }
        }
        let dev = &mut Arc::make_mut(&mut self.hosts[h].devices)[d];
        let text = |name: &str| s.label(name).map(str::to_string);
        if dev.name.is_none() {
            dev.name = text("name");
        }
        if dev.uuid.is_none() {
            dev.uuid = text("uuid");
        }
        if dev.gpu_instance_id.is_none() {
            dev.gpu_instance_id = s.label("gpu_instance_id").and_then(|v| v.parse().ok());
        }
        if dev.compute_instance_id.is_none() {
            dev.compute_instance_id = s.label("compute_instance_id").and_then(|v| v.parse().ok());
        }
        if field == DeviceField::Info {
            dev.bus_id = text("bus_id");
            return;
        }
        // Out of range is NaN from here: every conversion below makes it N/A.
        let v = match in_range(field.family(), s, None) {
            Ok(v) => v,
            Err(note) => {
                dev.note_out_of_range(note);
                f64::NAN
            }
        };
        match field {
            DeviceField::Up => dev.up = (v == 1.0 || v == 0.0).then_some(v == 1.0),
            DeviceField::MemoryTotal => dev.memory_total_bytes = whole(v),
            DeviceField::MemoryUsed => dev.memory_used_bytes = whole(v),
            DeviceField::MemoryFree => dev.memory_free_bytes = whole(v),
            DeviceField::Utilization => dev.gpu_utilization_percent = percent(v),
            DeviceField::MemoryUtilization => dev.memory_utilization_percent = percent(v),
            DeviceField::Temperature => dev.temperature_celsius = small(v),
            DeviceField::FanSpeed => dev.fan_speed_percent = percent(v),
            DeviceField::PowerUsage => dev.power_usage_watts = finite(v),
            DeviceField::PowerLimit => dev.power_limit_watts = finite(v),
            DeviceField::Info => {}
        }
    }

    /// One series of a process family.
    pub fn process(&mut self, field: ProcessField, s: &Series<'_>, fallback: Option<&str>) {
        let Some(pid_label) = s.label("pid") else {
            return;
        };
        let Some((h, d)) = self.device_of(s, fallback) else {
            return;
        };
        let Some(pid) = values::pid(pid_label) else {
            // No process without an identity: the series is left out, and its device says so.
            Arc::make_mut(&mut self.hosts[h].devices)[d].note_out_of_range(OutOfRange {
                family: field.family(),
                pid: None,
                label: Some("pid"),
                value: values::kept_text(pid_label),
                expected: values::PID_SHOWN,
            });
            return;
        };
        let key = (h, d, pid);
        if !self.processes.contains_key(&key) {
            // The process and the texts it adds to the model (those not seen before).
            let new_text = |name: &str| {
                s.label(name)
                    .filter(|t| !self.texts.contains(*t))
                    .map_or(0, |t| text_cost(t) + 48)
            };
            let cost = item_cost::<FleetProcess>()
                + ["username", "command", "pod", "namespace", "container"]
                    .into_iter()
                    .map(new_text)
                    .sum::<usize>();
            if !self.afford(cost) {
                self.beyond_bytes += 1;
                return;
            }
        }
        let texts = &mut self.texts;
        let processes = &mut Arc::make_mut(&mut self.hosts[h].devices)[d].processes;
        let p = match self.processes.get(&key) {
            Some(&p) => p,
            None => {
                processes.push(FleetProcess {
                    pid,
                    user: s.label("username").map(|u| intern(texts, u)),
                    command: s.label("command").map(|c| intern(texts, c)),
                    pod: s.label("pod").map(|t| intern(texts, t)),
                    namespace: s.label("namespace").map(|t| intern(texts, t)),
                    container: s.label("container").map(|t| intern(texts, t)),
                    used_memory_bytes: None,
                    sm_utilization_percent: None,
                });
                self.processes.insert(key, processes.len() - 1);
                processes.len() - 1
            }
        };
        let v = match in_range(field.family(), s, Some(pid)) {
            Ok(v) => v,
            Err(note) => {
                Arc::make_mut(&mut self.hosts[h].devices)[d].note_out_of_range(note);
                f64::NAN
            }
        };
        let processes = &mut Arc::make_mut(&mut self.hosts[h].devices)[d].processes;
        match field {
            ProcessField::Memory => processes[p].used_memory_bytes = whole(v),
            ProcessField::SmUtilization => processes[p].sm_utilization_percent = percent(v),
        }
    }

    /// Adds a host read directly (`--remote`) that could not be read: down, with no devices.
    pub fn unreachable(&mut self, url: &str) {
        self.hosts.push(Host {
            host: url.to_string(),
            instance: Some(url.to_string()),
            job: None,
            state: HostState::Down,
            sample_age_seconds: None,
            driver_version: None,
            sample_time: None,
            devices: Arc::default(),
        });
    }

    /// The fleet: each host's state from `up` and its sample's age (older than `stale_after`
    /// seconds is stale); hosts scraped in a gpuscope job that never served a sample are
    /// added, down or stale.
    pub fn finish(mut self, source: String, stale_after: f64, direct: bool) -> Fleet {
        self.take_notes("fleet");
        self.refuse_inconsistent_memory();
        let mut extra: Vec<(String, Option<String>, bool)> = self
            .up
            .iter()
            .filter(|(instance, (_, job))| {
                !self.by_instance.contains_key(*instance)
                    && job.as_ref().is_some_and(|j| self.jobs.contains(j))
            })
            .map(|(i, (up, job))| (i.clone(), job.clone(), *up))
            .collect();
        extra.sort();
        for (instance, job, _) in extra {
            self.by_instance.insert(instance.clone(), self.hosts.len());
            self.hosts.push(Host {
                host: instance.clone(),
                instance: Some(instance),
                job,
                state: HostState::Stale,
                sample_age_seconds: None,
                driver_version: None,
                sample_time: None,
                devices: Arc::default(),
            });
        }
        for host in &mut self.hosts {
            if direct {
                if host.state != HostState::Down {
                    // No usable sample time (none served, or unusable): never up.
                    host.state = match host.sample_age_seconds {
                        Some(age) if age <= stale_after => HostState::Up,
                        _ => HostState::Stale,
                    };
                }
                continue;
            }
            let up = host
                .instance
                .as_ref()
                .and_then(|i| self.up.get(i))
                .map(|(up, _)| *up);
            host.state = match up {
                Some(false) => HostState::Down,
                // No `up` series (Prometheus no longer scrapes it, or the series carry no
                // instance to join on): the sample's age decides.
                None => match host.sample_age_seconds {
                    Some(age) if age <= stale_after => HostState::Up,
                    _ => HostState::Stale,
                },
                // Scraped, but without a usable sample time (none served, or one in the
                // future or not a number) nothing says the data is current: stale.
                Some(true) => match host.sample_age_seconds {
                    Some(age) if age <= stale_after => HostState::Up,
                    _ => HostState::Stale,
                },
            };
            // A down host's series are marked stale by Prometheus: any device left over is
            // not shown as if current.
            if host.state == HostState::Down {
                host.devices = Arc::default();
            }
        }
        for host in &mut self.hosts {
            // A kept host's devices are in order already and stay shared.
            let in_order = host.devices.is_sorted_by_key(|d| (d.index, d.mig_index))
                && host
                    .devices
                    .iter()
                    .all(|d| d.processes.is_sorted_by_key(|p| p.pid));
            if !in_order {
                let devices = Arc::make_mut(&mut host.devices);
                devices.sort_by_key(|d| (d.index, d.mig_index));
                for d in devices {
                    d.processes.sort_by_key(|p| p.pid);
                }
            }
        }
        self.hosts
            .sort_by(|a, b| a.host.cmp(&b.host).then(a.instance.cmp(&b.instance)));
        Fleet {
            schema: JSON_SCHEMA,
            source,
            evaluated_at: self.evaluated_at,
            hosts: self.hosts,
            errors: self.errors,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    fn series<'a>(labels: &[(&'a str, &'a str)], t: f64, v: &'a str) -> Series<'a> {
        Series {
            metric: labels
                .iter()
                .map(|&(k, v)| (Cow::Borrowed(k), Cow::Borrowed(v)))
                .collect(),
            value: (t, Cow::Borrowed(v)),
        }
    }

    #[test]
    fn series_without_an_instance_are_told_apart_by_hostname_and_judged_by_age() {
        // Series relabelled without `instance` (federation): hosts by hostname, no `up` to
        // join, so the sample's age decides.
        let mut b = FleetBuilder::new();
        b.sample_time(&series(&[("hostname", "a")], 100.0, "99"), None);
        b.sample_time(&series(&[("hostname", "b")], 100.0, "10"), None);
        for h in ["a", "b"] {
            b.device(
                DeviceField::MemoryFree,
                &series(&[("hostname", h), ("index", "0")], 100.0, "5"),
                None,
            );
        }
        let f = b.finish("x".into(), 30.0, false);
        let states: Vec<(&str, HostState, Option<&str>)> = f
            .hosts
            .iter()
            .map(|h| (h.host.as_str(), h.state, h.instance.as_deref()))
            .collect();
        assert_eq!(
            states,
            [("a", HostState::Up, None), ("b", HostState::Stale, None)]
        );
        assert_eq!(f.hosts[0].devices[0].memory_free_bytes, Some(5));
    }

    /// One refresh of hosts `a` and `b` (one GPU each, one process), `b`'s GPU with `free_b`
    /// bytes free; after `previous`, `a` keeps its devices (as an unchanged host does).
    fn refresh(free_b: &str, previous: Option<&Fleet>) -> Fleet {
        let mut b = FleetBuilder::new();
        for h in ["a", "b"] {
            let host = [("instance", h), ("job", "gpu"), ("hostname", h)];
            b.sample_time(&series(&host, 100.0, "99"), None);
            b.up(&series(&host, 100.0, "1"));
        }
        for h in ["a", "b"] {
            if h == "a" && previous.is_some() {
                continue;
            }
            let free = if h == "b" { free_b } else { "7" };
            let dev = [("instance", h), ("job", "gpu"), ("index", "0")];
            b.device(DeviceField::MemoryFree, &series(&dev, 100.0, free), None);
            let proc = [("instance", h), ("index", "0"), ("pid", "42"), ("pod", "p")];
            b.process(ProcessField::Memory, &series(&proc, 100.0, "1"), None);
        }
        if let Some(prev) = previous {
            b.keep_devices("a", &prev.hosts[0]);
        }
        b.finish("x".into(), 30.0, false)
    }

    #[test]
    fn a_kept_host_shares_its_devices_with_the_previous_refresh() {
        let first = refresh("5", None);
        let second = refresh("6", Some(&first));
        let free: Vec<Option<u64>> = second
            .hosts
            .iter()
            .map(|h| h.devices[0].memory_free_bytes)
            .collect();
        assert_eq!(free, [Some(7), Some(6)], "a kept, b read again");
        assert_eq!(
            second.hosts[0].devices[0].processes[0].pod.as_deref(),
            Some("p")
        );
        assert!(
            Arc::ptr_eq(&first.hosts[0].devices, &second.hosts[0].devices),
            "a's devices are the previous refresh's, not a copy"
        );
        assert!(!Arc::ptr_eq(
            &first.hosts[1].devices,
            &second.hosts[1].devices
        ));
        // Changing the new fleet's shared devices copies them: the previous fleet stays.
        let mut third = second.clone();
        Arc::make_mut(&mut third.hosts[0].devices)[0].memory_free_bytes = Some(1);
        assert_eq!(first.hosts[0].devices[0].memory_free_bytes, Some(7));
        assert_eq!(second.hosts[0].devices[0].memory_free_bytes, Some(7));
    }

    /// The errors' texts of `f`.
    fn notes(f: &Fleet) -> Vec<(&str, &str)> {
        f.errors
            .iter()
            .map(|e| (e.query.as_str(), e.error.as_str()))
            .collect()
    }

    #[test]
    fn hosts_beyond_the_limit_are_counted_with_a_note() {
        let mut b = FleetBuilder::within(ModelLimits {
            hosts: 3,
            ..ModelLimits::default()
        });
        for i in 0..5 {
            let instance = format!("10.0.0.{i}:9445");
            let host = [("instance", instance.as_str()), ("job", "gpu")];
            b.sample_time(&series(&host, 100.0, "99"), None);
            b.up(&series(&host, 100.0, "1"));
        }
        b.take_notes("q");
        // A later series of a host not kept is counted too; one of a kept host is not.
        let dev = |i: &'static str| [("instance", i), ("index", "0")];
        b.device(
            DeviceField::MemoryFree,
            &series(&dev("10.0.0.4:9445"), 100.0, "1"),
            None,
        );
        b.device(
            DeviceField::MemoryFree,
            &series(&dev("10.0.0.0:9445"), 100.0, "1"),
            None,
        );
        let f = b.finish("x".into(), 30.0, false);
        assert_eq!(f.hosts.len(), 3);
        assert_eq!(f.hosts[0].devices.len(), 1);
        assert_eq!(
            notes(&f),
            [
                ("q", "4 series of hosts beyond the first 3 not kept"),
                ("fleet", "1 series of hosts beyond the first 3 not kept")
            ]
        );
    }

    /// `n` distinct processes on host `h`'s GPU 0, each with its own command line; PIDs 1 to
    /// `n` (0 is no PID: it would be refused).
    fn processes(b: &mut FleetBuilder, h: &str, n: u32) {
        for pid in 1..=n {
            let pid = pid.to_string();
            let command = format!("python train.py --seed {pid}");
            let labels = [
                ("instance", h),
                ("index", "0"),
                ("pid", pid.as_str()),
                ("command", command.as_str()),
            ];
            b.process(ProcessField::Memory, &series(&labels, 1.0, "1"), None);
        }
    }

    #[test]
    fn the_model_stops_at_its_memory_bound_with_a_note() {
        let limit = 1 << 20;
        let mut b = FleetBuilder::within(ModelLimits {
            bytes: limit,
            ..ModelLimits::default()
        });
        processes(&mut b, "a", 100_000);
        assert!(b.bytes <= limit, "{} counted", b.bytes);
        let kept = |b: &FleetBuilder| b.processes.len();
        let first = kept(&b);
        assert!(first > 1000 && first < 100_000, "{first} kept");
        b.take_notes("gpuscope_process_gpu_memory_bytes");
        // Values of what was kept still come; nothing new is kept.
        processes(&mut b, "a", 10);
        processes(&mut b, "b", 10);
        assert_eq!(kept(&b), first);
        let f = b.finish("x".into(), 30.0, false);
        assert_eq!(f.hosts.len(), 1, "no room for host b");
        assert_eq!(
            notes(&f),
            [
                (
                    "gpuscope_process_gpu_memory_bytes",
                    &*format!(
                        "{} series not kept whole: the fleet's model reached its 1 MiB",
                        100_000 - first
                    )
                ),
                (
                    "fleet",
                    "10 series not kept whole: the fleet's model reached its 1 MiB"
                )
            ]
        );
    }

    #[test]
    fn a_fleet_of_1000_hosts_with_every_process_fits_the_model_bound() {
        // The scale gpuscope is measured at (docs/benchmarks.md): 1,000 hosts x 8 GPUs x 8
        // processes, each device with its name and UUID, each process with a user and one
        // of 64 command lines.
        let mut b = FleetBuilder::new();
        for h in 0..1000 {
            let instance = format!("10.0.{}.{}:9445", h / 256, h % 256);
            let name = format!("gpu-node-{h:04}");
            let host = [
                ("instance", instance.as_str()),
                ("job", "gpuscope"),
                ("hostname", name.as_str()),
            ];
            b.sample_time(&series(&host, 100.0, "99"), None);
            b.up(&series(&host, 100.0, "1"));
            for g in 0..8 {
                let index = g.to_string();
                let uuid = format!("GPU-{h:08x}-{g:04x}-4a3b-9c2d-1e0f2a3b4c5d");
                let dev = [
                    ("instance", instance.as_str()),
                    ("index", index.as_str()),
                    ("uuid", uuid.as_str()),
                    ("name", "NVIDIA H100 80GB HBM3"),
                ];
                for field in [DeviceField::MemoryFree, DeviceField::MemoryUsed] {
                    b.device(field, &series(&dev, 100.0, "1e9"), None);
                }
                for p in 0..8 {
                    let pid = (1000 + g * 8 + p).to_string();
                    let command = format!("python train.py --rank {}", (g * 8 + p) % 64);
                    let user = format!("user{}", h % 4);
                    let labels = [
                        ("instance", instance.as_str()),
                        ("index", index.as_str()),
                        ("pid", pid.as_str()),
                        ("username", user.as_str()),
                        ("command", command.as_str()),
                    ];
                    b.process(ProcessField::Memory, &series(&labels, 100.0, "1e9"), None);
                }
            }
        }
        let f = b.finish("x".into(), 30.0, false);
        assert!(f.errors.is_empty(), "{:?}", notes(&f));
        let processes: usize = f
            .hosts
            .iter()
            .flat_map(|h| h.devices.iter())
            .map(|d| d.processes.len())
            .sum();
        assert_eq!(processes, 64_000);
    }

    #[test]
    fn sample_times_in_the_future_or_not_numbers_are_unusable() {
        let mut b = FleetBuilder::new();
        for (host, t) in [
            ("ok", "99"),
            ("skewed", "104"),
            ("ahead", "106"),
            ("nan", "NaN"),
            ("inf", "+Inf"),
            ("minus-inf", "-Inf"),
            ("text", "soon"),
            ("later", "1e12"),
        ] {
            let labels = [("instance", host), ("job", "gpu"), ("hostname", host)];
            b.sample_time(&series(&labels, 100.0, t), None);
            b.up(&series(&labels, 100.0, "1"));
            let dev = [("instance", host), ("index", "0")];
            b.device(DeviceField::MemoryFree, &series(&dev, 100.0, "5"), None);
        }
        let f = b.finish("x".into(), 30.0, false);
        let states: Vec<(&str, HostState, Option<f64>)> = f
            .hosts
            .iter()
            .map(|h| (h.host.as_str(), h.state, h.sample_age_seconds))
            .collect();
        assert_eq!(
            states,
            [
                ("ahead", HostState::Stale, None),
                ("inf", HostState::Stale, None),
                ("later", HostState::Stale, None),
                ("minus-inf", HostState::Stale, None),
                ("nan", HostState::Stale, None),
                ("ok", HostState::Up, Some(1.0)),
                ("skewed", HostState::Up, Some(0.0)),
                ("text", HostState::Stale, None),
            ]
        );
        assert_eq!(
            notes(&f),
            [(
                "fleet",
                "unusable sample time (more than 5 s in the future, or not a number) of ahead \
                 (6 s ahead), nan (\"NaN\"), inf (\"+Inf\"), minus-inf (\"-Inf\"), text \
                 (\"soon\") and 1 more: shown stale"
            )]
        );
    }

    #[test]
    fn a_scraped_host_without_a_sample_time_is_stale_not_up() {
        let mut b = FleetBuilder::new();
        let host = [("instance", "i"), ("job", "gpu"), ("hostname", "h")];
        b.up(&series(&host, 100.0, "1"));
        let dev = [("instance", "i"), ("index", "0")];
        b.device(DeviceField::MemoryFree, &series(&dev, 100.0, "5"), None);
        let f = b.finish("x".into(), 30.0, false);
        assert_eq!(f.hosts[0].state, HostState::Stale);
    }

    #[test]
    fn up_targets_of_other_jobs_are_not_kept() {
        let mut b = FleetBuilder::within(ModelLimits {
            hosts: 2,
            ..ModelLimits::default()
        });
        let host = [("instance", "i"), ("job", "gpu"), ("hostname", "h")];
        b.sample_time(&series(&host, 100.0, "99"), None);
        // A large Prometheus's other targets fill no limit.
        for i in 0..100 {
            let instance = format!("node-exporter-{i}");
            let other = [("instance", instance.as_str()), ("job", "node")];
            b.up(&series(&other, 100.0, "1"));
        }
        b.up(&series(&host, 100.0, "1"));
        let f = b.finish("x".into(), 30.0, false);
        assert!(f.errors.is_empty(), "{:?}", notes(&f));
        assert_eq!(f.hosts.len(), 1);
        assert_eq!(f.hosts[0].state, HostState::Up);
    }

    #[test]
    fn host_names_tell_apart_hosts_sharing_a_hostname() {
        use crate::testkit::{fleet, host};
        let mut f = fleet(vec![
            host("a", HostState::Up, vec![]),
            host("a", HostState::Up, vec![]),
            host("b", HostState::Down, vec![]),
            // A hostname that is another host's instance, once that one is named by it.
            host("x", HostState::Up, vec![]),
        ]);
        f.hosts[0].instance = Some("10.0.0.1:9445".into());
        f.hosts[1].instance = Some("10.0.0.2:9445".into());
        f.hosts[3].host = "10.0.0.1:9445".into();
        assert_eq!(
            f.host_names(),
            ["10.0.0.1:9445", "10.0.0.2:9445", "b", "x:9445"]
        );
        // Unshared hostnames are the names.
        f.hosts.truncate(3);
        f.hosts[1].host = "c".into();
        assert_eq!(f.host_names(), ["a", "c", "b"]);
    }

    #[test]
    fn garbage_values_and_labels_are_left_out_not_a_panic() {
        let mut b = FleetBuilder::new();
        for (index, v) in [
            ("0", "-1"),
            ("1", "NaN"),
            ("x", "1"),
            ("2:y", "1"),
            ("3", "1e30"),
        ] {
            b.device(
                DeviceField::MemoryFree,
                &series(&[("instance", "i"), ("index", index)], 1.0, v),
                None,
            );
            b.device(
                DeviceField::Temperature,
                &series(&[("instance", "i"), ("index", index)], 1.0, v),
                None,
            );
        }
        b.process(
            ProcessField::Memory,
            &series(
                &[("instance", "i"), ("index", "0"), ("pid", "-3")],
                1.0,
                "1",
            ),
            None,
        );
        let f = b.finish("x".into(), 30.0, false);
        let d = &f.hosts[0].devices;
        assert_eq!(d.len(), 3, "only good indices: {d:?}");
        assert_eq!(d[0].memory_free_bytes, None);
        assert_eq!(d[1].memory_free_bytes, None);
        assert_eq!(d[2].memory_free_bytes, None, "1e30 bytes is beyond u64");
        assert_eq!(d[2].temperature_celsius, None, "1e30 is no temperature");
        assert!(d[0].processes.is_empty());
    }

    /// One device `0` of host `i` with `field` sent as `v`, and what became of it.
    fn one(field: DeviceField, v: &str) -> FleetDevice {
        let mut b = FleetBuilder::new();
        b.device(
            field,
            &series(&[("instance", "i"), ("index", "0")], 1.0, v),
            None,
        );
        let f = b.finish("x".into(), 30.0, false);
        f.hosts[0].devices[0].clone()
    }

    #[test]
    fn garbage_in_device_up_is_unknown_with_a_note_never_lost() {
        assert_eq!(one(DeviceField::Up, "1").up, Some(true));
        assert_eq!(one(DeviceField::Up, "0").up, Some(false));
        for v in ["2", "-1", "NaN", "0.5", "+Inf", "yes"] {
            let d = one(DeviceField::Up, v);
            assert_eq!(d.up, None, "{v}");
            assert_eq!(
                d.out_of_range,
                [OutOfRange {
                    family: names::DEVICE_UP,
                    pid: None,
                    label: None,
                    value: v.to_string(),
                    expected: "0 or 1",
                }],
                "{v}"
            );
        }
    }

    #[test]
    fn values_out_of_range_are_na_with_a_note_never_clamped() {
        // (field, value sent, whether the device shows it N/A)
        type Case = (DeviceField, &'static str, fn(&FleetDevice) -> bool);
        let cases: &[Case] = &[
            (DeviceField::PowerUsage, "-5", |d| {
                d.power_usage_watts.is_none()
            }),
            (DeviceField::PowerUsage, "1e308", |d| {
                d.power_usage_watts.is_none()
            }),
            (DeviceField::PowerLimit, "10001", |d| {
                d.power_limit_watts.is_none()
            }),
            (DeviceField::Temperature, "-300", |d| {
                d.temperature_celsius.is_none()
            }),
            (DeviceField::Temperature, "1e9", |d| {
                d.temperature_celsius.is_none()
            }),
            (DeviceField::Utilization, "2.5", |d| {
                d.gpu_utilization_percent.is_none()
            }),
            (DeviceField::MemoryUtilization, "-0.1", |d| {
                d.memory_utilization_percent.is_none()
            }),
            (DeviceField::FanSpeed, "3", |d| {
                d.fan_speed_percent.is_none()
            }),
            (DeviceField::MemoryFree, "-1", |d| {
                d.memory_free_bytes.is_none()
            }),
            (DeviceField::MemoryTotal, "1e30", |d| {
                d.memory_total_bytes.is_none()
            }),
            (DeviceField::MemoryUsed, "NaN", |d| {
                d.memory_used_bytes.is_none()
            }),
        ];
        for &(field, v, na) in cases {
            let d = one(field, v);
            assert!(na(&d), "{field:?} {v}: {d:?}");
            assert_eq!(d.out_of_range.len(), 1, "{field:?} {v}");
            assert_eq!(d.out_of_range[0].family, field.family());
            assert_eq!(d.out_of_range[0].value, v);
        }
        // In range, as sent: a fan may run above 100 %.
        assert_eq!(
            one(DeviceField::FanSpeed, "1.1").fan_speed_percent,
            Some(110)
        );
        assert_eq!(
            one(DeviceField::PowerUsage, "612.5").power_usage_watts,
            Some(612.5)
        );
        assert_eq!(
            one(DeviceField::Utilization, "1").gpu_utilization_percent,
            Some(100)
        );
        assert!(one(DeviceField::Temperature, "61").out_of_range.is_empty());
    }

    #[test]
    fn memory_used_more_than_total_makes_the_memory_na_with_a_note() {
        let mut b = FleetBuilder::new();
        let dev = |index| [("instance", "i"), ("index", index)];
        for (index, total, used, free) in [
            ("0", "100", "130", "0"),
            ("1", "100", "60", "60"),
            ("2", "100", "30", "60"),
        ] {
            for (field, v) in [
                (DeviceField::MemoryTotal, total),
                (DeviceField::MemoryUsed, used),
                (DeviceField::MemoryFree, free),
            ] {
                b.device(field, &series(&dev(index), 1.0, v), None);
            }
        }
        let f = b.finish("x".into(), 30.0, false);
        let d = &f.hosts[0].devices;
        for broken in &d[..2] {
            let memory = (
                broken.memory_total_bytes,
                broken.memory_used_bytes,
                broken.memory_free_bytes,
            );
            assert_eq!(memory, (None, None, None), "{}", broken.id);
            assert_eq!(broken.out_of_range.len(), 1);
            assert_eq!(broken.out_of_range[0].family, names::DEVICE_MEMORY_USED);
        }
        assert_eq!(d[0].out_of_range[0].value, "130");
        assert_eq!(d[2].memory_free_bytes, Some(60), "fits: kept");
        assert!(d[2].out_of_range.is_empty());
    }

    #[test]
    fn a_pid_that_is_no_positive_integer_leaves_its_series_out_with_a_note() {
        let mut b = FleetBuilder::new();
        for pid in ["0", "-3", "+7", "x", "42"] {
            let labels = [("instance", "i"), ("index", "0"), ("pid", pid)];
            b.process(ProcessField::Memory, &series(&labels, 1.0, "1024"), None);
        }
        let labels = [("instance", "i"), ("index", "0"), ("pid", "42")];
        b.process(
            ProcessField::SmUtilization,
            &series(&labels, 1.0, "7"),
            None,
        );
        let f = b.finish("x".into(), 30.0, false);
        let d = &f.hosts[0].devices[0];
        let pids: Vec<u32> = d.processes.iter().map(|p| p.pid).collect();
        assert_eq!(pids, [42]);
        assert_eq!(d.processes[0].used_memory_bytes, Some(1024));
        assert_eq!(d.processes[0].sm_utilization_percent, None, "700 %");
        let refused: Vec<(Option<&str>, Option<u32>, &str)> = d
            .out_of_range
            .iter()
            .map(|n| (n.label, n.pid, n.value.as_str()))
            .collect();
        assert_eq!(
            refused,
            [
                (Some("pid"), None, "0"),
                (Some("pid"), None, "-3"),
                (Some("pid"), None, "+7"),
                (Some("pid"), None, "x"),
                (None, Some(42), "7"),
            ]
        );
    }

    #[test]
    fn a_device_keeps_a_bounded_number_of_notes_and_counts_the_rest() {
        let mut b = FleetBuilder::new();
        for pid in 0..100 {
            let pid = format!("-{pid}");
            let labels = [("instance", "i"), ("index", "0"), ("pid", pid.as_str())];
            b.process(ProcessField::Memory, &series(&labels, 1.0, "1"), None);
        }
        let f = b.finish("x".into(), 30.0, false);
        let d = &f.hosts[0].devices[0];
        assert_eq!(d.out_of_range.len(), crate::values::MAX_NOTES_PER_DEVICE);
        assert_eq!(
            d.out_of_range_not_kept as usize,
            100 - crate::values::MAX_NOTES_PER_DEVICE
        );
    }
}
