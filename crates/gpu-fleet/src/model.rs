//! The fleet: hosts, their devices and processes, folded from one answer per metric family.
//!
//! Hosts are told apart by Prometheus's `instance` label (one scrape target each) and named by
//! the exporter's `hostname` label, or by the instance when there is none. A host is listed
//! when Prometheus scrapes it in a job that has served gpuscope metrics within the lookback,
//! so an exporter that is down stays in the view, marked down.

use foldhash::{HashMap, HashSet};
use std::sync::Arc;

use serde::Serialize;

use gpu_export::doors::{Door, Doors};

use crate::doors::{self as door_names, NAMES_LABEL};
use crate::prom::Series;
use crate::values::{self, OutOfRange};
use gpu_devices::DeviceIdentity;
use gpu_export::names;

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
    /// The names its values were read under when they are another exporter's: `dcgm`
    /// (dcgm-exporter's) or `nvidia-smi` (nvidia_gpu_exporter's); `None` (and not in the
    /// JSON) for gpuscope's own. What those names cannot say is N/A (docs/fleet.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub names: Option<&'static str>,
    /// The exporter's latest sample time (Unix seconds, its own clock), which tells whether
    /// the host's data changed since an earlier refresh. Not in the JSON.
    #[serde(skip)]
    pub sample_time: Option<f64>,
    /// Physical devices, each followed by its MIG devices. Shared between refreshes: a host
    /// whose data did not change keeps the very same list (no copy of its devices and
    /// processes), so change it through `Arc::make_mut`.
    pub devices: Arc<Vec<FleetDevice>>,
}

impl Host {
    /// A host in `state` of which nothing is known yet but its names: no sample, driver
    /// version or devices, read under gpuscope's own metric names.
    fn unheard(
        host: String,
        instance: Option<String>,
        job: Option<String>,
        state: HostState,
    ) -> Host {
        Host {
            host,
            instance,
            job,
            state,
            sample_age_seconds: None,
            driver_version: None,
            names: None,
            sample_time: None,
            devices: Arc::default(),
        }
    }
}

/// One device of a host.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FleetDevice {
    /// Who the device is: `id` and `index`/`mig_index` from the `index` label, `name` and
    /// `uuid` from those labels, `bus_id` from `gpuscope_device_info`'s.
    #[serde(flatten)]
    pub identity: DeviceIdentity,
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
            (Some(u), _) if u > total => Some((names::DEVICE_MEMORY_USED_BYTES, u)),
            (_, Some(f)) if f > total => Some((names::DEVICE_MEMORY_FREE_BYTES, f)),
            (Some(u), Some(f)) if u.checked_add(f).is_none_or(|sum| sum > total) => {
                Some((names::DEVICE_MEMORY_USED_BYTES, u))
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
            DeviceField::MemoryTotal => names::DEVICE_MEMORY_TOTAL_BYTES,
            DeviceField::MemoryUsed => names::DEVICE_MEMORY_USED_BYTES,
            DeviceField::MemoryFree => names::DEVICE_MEMORY_FREE_BYTES,
            DeviceField::Utilization => names::DEVICE_UTILIZATION_RATIO,
            DeviceField::MemoryUtilization => names::DEVICE_MEMORY_BANDWIDTH_UTILIZATION_RATIO,
            DeviceField::Temperature => names::DEVICE_TEMPERATURE_CELSIUS,
            DeviceField::FanSpeed => names::DEVICE_FAN_SPEED_RATIO,
            DeviceField::PowerUsage => names::DEVICE_POWER_USAGE_WATTS,
            DeviceField::PowerLimit => names::DEVICE_POWER_LIMIT_WATTS,
            DeviceField::Info => names::DEVICE_INFO,
        }
    }
}

impl ProcessField {
    /// The family that gives it.
    pub fn family(self) -> &'static str {
        match self {
            ProcessField::Memory => names::PROCESS_GPU_MEMORY_BYTES,
            ProcessField::SmUtilization => names::PROCESS_GPU_SM_UTILIZATION_RATIO,
        }
    }
}

/// The device families asked, one query each per refresh.
pub const DEVICE_FAMILIES: &[(&str, DeviceField)] = &[
    (names::DEVICE_UP, DeviceField::Up),
    (names::DEVICE_MEMORY_TOTAL_BYTES, DeviceField::MemoryTotal),
    (names::DEVICE_MEMORY_USED_BYTES, DeviceField::MemoryUsed),
    (names::DEVICE_MEMORY_FREE_BYTES, DeviceField::MemoryFree),
    (names::DEVICE_UTILIZATION_RATIO, DeviceField::Utilization),
    (
        names::DEVICE_MEMORY_BANDWIDTH_UTILIZATION_RATIO,
        DeviceField::MemoryUtilization,
    ),
    (names::DEVICE_TEMPERATURE_CELSIUS, DeviceField::Temperature),
    (names::DEVICE_FAN_SPEED_RATIO, DeviceField::FanSpeed),
    (names::DEVICE_POWER_USAGE_WATTS, DeviceField::PowerUsage),
    (names::DEVICE_POWER_LIMIT_WATTS, DeviceField::PowerLimit),
    (names::DEVICE_INFO, DeviceField::Info),
];

/// The process families asked, one query each per refresh.
pub const PROCESS_FAMILIES: &[(&str, ProcessField)] = &[
    (names::PROCESS_GPU_MEMORY_BYTES, ProcessField::Memory),
    (
        names::PROCESS_GPU_SM_UTILIZATION_RATIO,
        ProcessField::SmUtilization,
    ),
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
    /// Which names each host serves, as the first query said (hosts read directly: none).
    doors: HashMap<usize, Doors>,
    /// (host, UUID as nvidia_gpu_exporter writes it) -> the GPU index its
    /// `nvidia_smi_gpu_info` gives.
    uuids: HashMap<(usize, String), u32>,
    /// (host, device position) of devices two identities claim (one index, two UUIDs; one
    /// UUID, two indices): which series is the GPU's cannot be told, so their values are N/A.
    contested: HashSet<(usize, usize)>,
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

/// Sets `field` of `dev` to `v`, in the family's unit and already held to its range (NaN for
/// a value refused: N/A).
fn set_value(dev: &mut FleetDevice, field: DeviceField, v: f64) {
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

/// The note of a device two identities claim.
const ONE_IDENTITY: &str = "one UUID per GPU, and one GPU per UUID";

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
        self.host_named(s, fallback, "hostname")
    }

    /// [`FleetBuilder::host_of`], the host's name for people read from label `hostname`
    /// (dcgm-exporter's is `Hostname`): a name only, never what tells hosts apart when there is
    /// an instance.
    fn host_named(
        &mut self,
        s: &Series<'_>,
        fallback: Option<&str>,
        hostname: &str,
    ) -> Option<usize> {
        // An exporter's answer cannot name another host: its `instance` label is not read.
        // Without an instance (relabelled away, or a federated series), the hostname tells
        // hosts apart.
        let real = fallback.or_else(|| s.label("instance"));
        let instance = real.or_else(|| s.label(hostname)).unwrap_or("");
        if let Some(&i) = self.by_instance.get(instance) {
            if self.hosts[i].host == instance {
                if let Some(name) = s.label(hostname) {
                    if self.afford(text_cost(name)) {
                        self.hosts[i].host = name.to_string();
                    } else {
                        self.beyond_bytes += 1;
                    }
                }
            }
            return Some(i);
        }
        let name = s.label(hostname).unwrap_or(instance);
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
        self.hosts.push(Host::unheard(
            name,
            real.map(str::to_string),
            s.label("job").map(str::to_string),
            HostState::Stale,
        ));
        self.by_instance
            .insert(instance.to_string(), self.hosts.len() - 1);
        Some(self.hosts.len() - 1)
    }

    /// One series of [`names::EXPORTER_SAMPLE_TIMESTAMP_SECONDS`] (over the lookback), or from Prometheus a
    /// host series of another exporter's names ([`crate::doors::sample_time_query`]: labelled
    /// [`NAMES_LABEL`], valued its latest scrape's time). A sample time more than
    /// [`CLOCK_SKEW_SECONDS`] after the evaluation time, or not a finite number, is unusable:
    /// the host has no sample age (it is stale), and the next notes say so. A host that serves
    /// several sets of names is read through one: gpuscope's, else dcgm-exporter's, else
    /// nvidia_gpu_exporter's; only that one's time counts.
    pub fn sample_time(&mut self, s: &Series<'_>, fallback: Option<&str>) {
        // Read directly, an exporter's text is gpuscope's names whatever its labels say.
        let door = match (fallback, s.label(NAMES_LABEL)) {
            (None, Some(text)) => match door_names::door_named(text) {
                Some(d) => d,
                None => return,
            },
            _ => Door::Gpuscope,
        };
        // A door's host is its instance: without one, its series could not be joined.
        if door != Door::Gpuscope && s.label("instance").is_none() {
            return;
        }
        let hostname = door_names::labels(door)
            .and_then(|l| l.hostname)
            .unwrap_or("hostname");
        let Some(h) = self.host_named(s, fallback, hostname) else {
            return;
        };
        let doors = match self.doors.get(&h) {
            Some(d) => d.with(door),
            None => Doors::only(door),
        };
        self.doors.insert(h, doors);
        let read = doors.iter().next().unwrap_or(Door::Gpuscope);
        self.hosts[h].names = (read != Door::Gpuscope).then(|| read.as_str());
        if door != read {
            return;
        }
        // Named by another exporter's series first: gpuscope's hostname is the one read.
        let renamed = door == Door::Gpuscope && doors != Doors::GPUSCOPE;
        if let Some(name) = s.label("hostname").filter(|_| renamed) {
            if self.afford(text_cost(name)) {
                self.hosts[h].host = name.to_string();
            } else {
                self.beyond_bytes += 1;
            }
        }
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

    /// The hosts seen so far that are read through another exporter's names, by instance,
    /// with the door they are read through (after the first query).
    pub fn door_hosts(&self) -> Vec<(String, Door)> {
        let mut out: Vec<(String, Door)> = self
            .doors
            .iter()
            .filter_map(|(&h, doors)| {
                let door = doors.iter().next().filter(|d| *d != Door::Gpuscope)?;
                Some((self.hosts[h].instance.clone()?, door))
            })
            .collect();
        out.sort();
        out
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
            self.hosts[h].names = from.names;
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
        self.device_at(h, index, mig_index, id)
    }

    /// Device `index` (`mig_index`) of host `h`, named `id`, created when first seen.
    fn device_at(
        &mut self,
        h: usize,
        index: u32,
        mig_index: Option<u32>,
        id: &str,
    ) -> Option<(usize, usize)> {
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
            identity: DeviceIdentity {
                id: id.to_string(),
                index,
                mig_index,
                name: None,
                uuid: None,
                bus_id: None,
            },
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
        if dev.identity.name.is_none() {
            cost += s.label("name").map_or(0, text_cost);
        }
        if dev.identity.uuid.is_none() {
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
        if dev.identity.name.is_none() {
            dev.identity.name = text("name");
        }
        if dev.identity.uuid.is_none() {
            dev.identity.uuid = text("uuid");
        }
        if dev.gpu_instance_id.is_none() {
            dev.gpu_instance_id = s.label("gpu_instance_id").and_then(|v| v.parse().ok());
        }
        if dev.compute_instance_id.is_none() {
            dev.compute_instance_id = s.label("compute_instance_id").and_then(|v| v.parse().ok());
        }
        if field == DeviceField::Info {
            dev.identity.bus_id = text("bus_id");
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
        set_value(dev, field, v);
    }

    /// One series of the doors' device query ([`crate::doors::device_query`]), read as
    /// the field of the gpuscope family the door's table says holds the same measure, in that
    /// family's unit and held to its range. Kept only for a host the first query said serves
    /// the door's names and not a set read before them; a series of any other host, or of no
    /// GPU the series can be joined to, is left out.
    ///
    /// Read directly (`--remote`), `fallback` is the URL read and the series' name is given
    /// as `name` (the text format's samples carry it apart from their labels); from Prometheus
    /// both are `None` and the series' `__name__` and `instance` say them.
    pub fn door_device(&mut self, s: &Series<'_>, name: Option<&str>, fallback: Option<&str>) {
        let Some(field) = name
            .or_else(|| s.label("__name__"))
            .and_then(door_names::field)
        else {
            return;
        };
        let instance = fallback.or_else(|| s.label("instance"));
        let Some(&h) = instance.and_then(|i| self.by_instance.get(i)) else {
            return;
        };
        let read = self.doors.get(&h).and_then(|d| d.iter().next());
        let (Some(labels), true) = (door_names::labels(field.door), read == Some(field.door))
        else {
            return;
        };
        let Some(kind) = DEVICE_FAMILIES
            .iter()
            .find(|(f, _)| *f == field.family)
            .map(|&(_, k)| k)
        else {
            return;
        };
        let Some(uuid) = s.label(labels.uuid) else {
            return;
        };
        // The GPU: its index on the series (dcgm-exporter), or the one its UUID's info gave
        // (nvidia_gpu_exporter, whose value series carry the UUID alone).
        let on_info = labels.info.is_some_and(|i| i == field.name);
        let index = if labels.info.is_none() || on_info {
            match s.label(labels.index).and_then(|i| i.parse::<u32>().ok()) {
                Some(i) => i,
                None => return,
            }
        } else {
            match self.uuids.get(&(h, uuid.to_string())) {
                Some(&i) => i,
                None => return,
            }
        };
        // dcgm-exporter watches a GPU in MIG mode through its GPU instances.
        let gi = if labels.info.is_none() {
            s.label(labels.gpu_instance_id)
                .and_then(|g| g.parse::<u32>().ok())
        } else {
            None
        };
        let id = match gi {
            Some(g) => format!("{index}:{g}"),
            None => index.to_string(),
        };
        let Some((h, d)) = self.device_at(h, index, gi, &id) else {
            return;
        };
        if self.contested.contains(&(h, d)) {
            return;
        }
        let nvml_uuid = labels.uuid_form.read(uuid);
        let name = s.label(labels.name);
        let bus_id = s.label(labels.bus_id);
        // One GPU, one UUID: a device claimed by two (or a UUID by two GPUs) is a broken or
        // spoofed answer, and which series is the GPU's cannot be told.
        let clash = match &self.hosts[h].devices[d].identity.uuid {
            Some(u) if *u != nvml_uuid => Some(d),
            _ if on_info => self
                .uuids
                .get(&(h, uuid.to_string()))
                .filter(|&&i| i != index)
                .and_then(|&i| self.devices.get(&(h, i, None)).copied()),
            _ => None,
        };
        if let Some(other) = clash {
            for at in [d, other] {
                self.contest(h, at, field.name, labels.uuid, uuid);
            }
            return;
        }
        let dev = &self.hosts[h].devices[d];
        let mut cost = 0;
        if dev.identity.uuid.is_none() {
            cost += text_cost(&nvml_uuid);
        }
        if dev.identity.name.is_none() {
            cost += name.map_or(0, text_cost);
        }
        if dev.identity.bus_id.is_none() {
            cost += bus_id.map_or(0, text_cost);
        }
        if on_info {
            cost += text_cost(uuid) + 64;
        }
        if !self.afford(cost) {
            self.beyond_bytes += 1;
            return;
        }
        if on_info {
            self.uuids.insert((h, uuid.to_string()), index);
        }
        let dev = &mut Arc::make_mut(&mut self.hosts[h].devices)[d];
        dev.identity.uuid = Some(nvml_uuid);
        if dev.identity.name.is_none() {
            dev.identity.name = name.map(str::to_string);
        }
        if dev.identity.bus_id.is_none() {
            dev.identity.bus_id = bus_id.map(str::to_string);
        }
        if gi.is_some() {
            dev.gpu_instance_id = gi;
        }
        if kind == DeviceField::Info {
            return;
        }
        let raw = s.number().unwrap_or(f64::NAN);
        let v = raw * field.factor;
        let v = match values::range(field.family) {
            Some(r) if !r.accepts(v) => {
                dev.note_out_of_range(OutOfRange {
                    family: field.name,
                    pid: None,
                    label: None,
                    value: values::kept_text(&s.value.1),
                    expected: r.shown,
                });
                f64::NAN
            }
            _ => v,
        };
        set_value(dev, kind, v);
    }

    /// Makes device `d` of host `h` contested: every value N/A, with a note of the
    /// identity label that clashed; its later series are left out.
    fn contest(
        &mut self,
        h: usize,
        d: usize,
        family: &'static str,
        label: &'static str,
        value: &str,
    ) {
        if !self.contested.insert((h, d)) {
            return;
        }
        let dev = &mut Arc::make_mut(&mut self.hosts[h].devices)[d];
        for field in DEVICE_FAMILIES.iter().map(|&(_, f)| f) {
            set_value(dev, field, f64::NAN);
        }
        dev.note_out_of_range(OutOfRange {
            family,
            pid: None,
            label: Some(label),
            value: values::kept_text(value),
            expected: ONE_IDENTITY,
        });
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

    /// Adds a host read directly (`--remote`) at `url` whose answer holds `door`'s names and no
    /// gpuscope samples: read through that door, its sample time `now` (when it was read:
    /// those exporters publish no sample time of their own). `false` when the model cannot
    /// keep it (beyond its bounds, counted).
    pub fn door_host(&mut self, url: &str, door: Door, now: f64) -> bool {
        let nothing = Series {
            metric: Default::default(),
            value: (now, std::borrow::Cow::Borrowed("")),
        };
        let Some(h) = self.host_of(&nothing, Some(url)) else {
            return false;
        };
        self.doors.insert(h, Doors::only(door));
        let host = &mut self.hosts[h];
        host.names = (door != Door::Gpuscope).then(|| door.as_str());
        host.sample_time = Some(now);
        host.sample_age_seconds = Some(0.0);
        true
    }

    /// Adds a host read directly (`--remote`) that could not be read: down, with no devices.
    pub fn unreachable(&mut self, url: &str) {
        self.hosts.push(Host::unheard(
            url.to_string(),
            Some(url.to_string()),
            None,
            HostState::Down,
        ));
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
            self.hosts.push(Host::unheard(
                instance.clone(),
                Some(instance),
                job,
                HostState::Stale,
            ));
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
            let in_order = host
                .devices
                .is_sorted_by_key(|d| (d.identity.index, d.identity.mig_index))
                && host
                    .devices
                    .iter()
                    .all(|d| d.processes.is_sorted_by_key(|p| p.pid));
            if !in_order {
                let devices = Arc::make_mut(&mut host.devices);
                devices.sort_by_key(|d| (d.identity.index, d.identity.mig_index));
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

    /// A host whose exporter Prometheus scrapes (`up` is 1), its latest sample taken at
    /// `sample_time` (Unix seconds, as the exporter sends it); both series read at time 100.
    fn scraped(b: &mut FleetBuilder, host: &[(&str, &str)], sample_time: &str) {
        b.sample_time(&series(host, 100.0, sample_time), None);
        b.up(&series(host, 100.0, "1"));
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
            scraped(&mut b, &host, "99");
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
            scraped(&mut b, &host, "99");
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
            scraped(&mut b, &host, "99");
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
            scraped(&mut b, &labels, t);
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

    /// Whether `d` shows a value for `field` (`Info` carries labels only).
    fn shows(d: &FleetDevice, field: DeviceField) -> bool {
        match field {
            DeviceField::Up => d.up.is_some(),
            DeviceField::MemoryTotal => d.memory_total_bytes.is_some(),
            DeviceField::MemoryUsed => d.memory_used_bytes.is_some(),
            DeviceField::MemoryFree => d.memory_free_bytes.is_some(),
            DeviceField::Utilization => d.gpu_utilization_percent.is_some(),
            DeviceField::MemoryUtilization => d.memory_utilization_percent.is_some(),
            DeviceField::Temperature => d.temperature_celsius.is_some(),
            DeviceField::FanSpeed => d.fan_speed_percent.is_some(),
            DeviceField::PowerUsage => d.power_usage_watts.is_some(),
            DeviceField::PowerLimit => d.power_limit_watts.is_some(),
            DeviceField::Info => unreachable!("gpuscope_device_info has no value to show"),
        }
    }

    #[test]
    fn values_out_of_range_are_na_with_a_note_never_clamped() {
        // (field, value sent): the device shows the field N/A
        let cases = [
            (DeviceField::PowerUsage, "-5"),
            (DeviceField::PowerUsage, "1e308"),
            (DeviceField::PowerLimit, "10001"),
            (DeviceField::Temperature, "-300"),
            (DeviceField::Temperature, "1e9"),
            (DeviceField::Utilization, "2.5"),
            (DeviceField::MemoryUtilization, "-0.1"),
            (DeviceField::FanSpeed, "3"),
            (DeviceField::MemoryFree, "-1"),
            (DeviceField::MemoryTotal, "1e30"),
            (DeviceField::MemoryUsed, "NaN"),
        ];
        for (field, v) in cases {
            let d = one(field, v);
            assert!(!shows(&d, field), "{field:?} {v}: {d:?}");
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
            assert_eq!(memory, (None, None, None), "{}", broken.identity.id);
            assert_eq!(broken.out_of_range.len(), 1);
            assert_eq!(
                broken.out_of_range[0].family,
                names::DEVICE_MEMORY_USED_BYTES
            );
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

    /// The first query's host series of `door` for instance `i` (job `gpu`), latest scrape at
    /// 99 (evaluated at 100), with dcgm-exporter's `Hostname`.
    fn door_host(b: &mut FleetBuilder, i: &str, door: &str) {
        let labels = [
            ("instance", i),
            ("job", "gpu"),
            ("Hostname", "node"),
            (NAMES_LABEL, door),
        ];
        b.sample_time(&series(&labels, 100.0, "99"), None);
        b.up(&series(&[("instance", i), ("job", "gpu")], 100.0, "1"));
    }

    /// A dcgm-exporter series of GPU `gpu` (UUID `GPU-<uuid>`) on instance `i`.
    fn dcgm(b: &mut FleetBuilder, i: &str, name: &str, gpu: &str, uuid: &str, v: &str) {
        let uuid = format!("GPU-{uuid}");
        let labels = [
            ("__name__", name),
            ("instance", i),
            ("job", "gpu"),
            ("gpu", gpu),
            ("UUID", uuid.as_str()),
            ("pci_bus_id", "00000000:18:00.0"),
            ("modelName", "NVIDIA H100 80GB HBM3"),
            ("Hostname", "node"),
        ];
        b.door_device(&series(&labels, 100.0, v), None, None);
    }

    /// A nvidia_gpu_exporter series on instance `i`: its info of GPU `index` (UUID `uuid`,
    /// written bare as it writes it), or a value of `uuid`'s GPU.
    fn smi(b: &mut FleetBuilder, i: &str, name: &str, uuid: &str, index: &str, v: &str) {
        let mut labels = vec![("__name__", name), ("instance", i), ("uuid", uuid)];
        if name == "nvidia_smi_gpu_info" {
            labels.extend([
                ("index", index),
                ("name", "Tesla T4"),
                ("pci_bus_id", "00000000:3B:00.0"),
            ]);
        }
        b.door_device(&series(&labels, 100.0, v), None, None);
    }

    const DCGM_ALL: [(&str, &str); 6] = [
        ("DCGM_FI_DEV_FB_USED", "1024"),
        ("DCGM_FI_DEV_FB_FREE", "80000"),
        ("DCGM_FI_DEV_GPU_UTIL", "37"),
        ("DCGM_FI_DEV_MEM_COPY_UTIL", "12"),
        ("DCGM_FI_DEV_GPU_TEMP", "45"),
        ("DCGM_FI_DEV_POWER_USAGE", "312.5"),
    ];

    #[test]
    fn a_host_of_dcgm_exporter_names_is_read_in_the_fleets_units() {
        let mut b = FleetBuilder::new();
        door_host(&mut b, "n1:9400", "dcgm");
        for (gpu, uuid) in [("0", "a"), ("1", "b")] {
            for (name, v) in DCGM_ALL {
                dcgm(&mut b, "n1:9400", name, gpu, uuid, v);
            }
        }
        let f = b.finish("x".into(), 30.0, false);
        let h = &f.hosts[0];
        assert_eq!(
            (h.host.as_str(), h.state, h.names),
            ("node", HostState::Up, Some("dcgm"))
        );
        assert_eq!(h.sample_age_seconds, Some(1.0));
        assert_eq!(h.devices.len(), 2);
        let d = &h.devices[1];
        assert_eq!(d.identity.id, "1");
        assert_eq!(d.identity.uuid.as_deref(), Some("GPU-b"));
        assert_eq!(d.identity.name.as_deref(), Some("NVIDIA H100 80GB HBM3"));
        assert_eq!(d.identity.bus_id.as_deref(), Some("00000000:18:00.0"));
        assert_eq!(d.memory_used_bytes, Some(1024 << 20));
        assert_eq!(d.memory_free_bytes, Some(80000 << 20));
        assert_eq!(d.gpu_utilization_percent, Some(37));
        assert_eq!(d.memory_utilization_percent, Some(12));
        assert_eq!(d.temperature_celsius, Some(45));
        assert_eq!(d.power_usage_watts, Some(312.5));
        // What dcgm-exporter's default counters cannot say.
        assert_eq!(
            (
                d.up,
                d.memory_total_bytes,
                d.fan_speed_percent,
                d.power_limit_watts
            ),
            (None, None, None, None)
        );
        assert!(d.processes.is_empty() && d.out_of_range.is_empty());
    }

    #[test]
    fn a_dcgm_gpu_in_mig_mode_is_its_gpu_instances() {
        let mut b = FleetBuilder::new();
        door_host(&mut b, "n1:9400", "dcgm");
        for gi in ["1", "2"] {
            let labels = [
                ("__name__", "DCGM_FI_DEV_FB_USED"),
                ("instance", "n1:9400"),
                ("gpu", "0"),
                ("UUID", "GPU-a"),
                ("GPU_I_ID", gi),
                ("GPU_I_PROFILE", "3g.40gb"),
            ];
            b.door_device(&series(&labels, 100.0, gi), None, None);
        }
        let f = b.finish("x".into(), 30.0, false);
        let ids: Vec<(&str, Option<u32>, Option<u64>)> = f.hosts[0]
            .devices
            .iter()
            .map(|d| {
                (
                    d.identity.id.as_str(),
                    d.gpu_instance_id,
                    d.memory_used_bytes,
                )
            })
            .collect();
        assert_eq!(
            ids,
            [
                ("0:1", Some(1), Some(1 << 20)),
                ("0:2", Some(2), Some(2 << 20))
            ]
        );
    }

    #[test]
    fn a_host_of_nvidia_smi_names_joins_its_values_to_their_gpus_by_uuid() {
        let mut b = FleetBuilder::new();
        door_host(&mut b, "n2:9835", "nvidia-smi");
        smi(&mut b, "n2:9835", "nvidia_smi_gpu_info", "c0ffee", "3", "1");
        for (name, v) in [
            ("nvidia_smi_memory_total_bytes", "16106127360"),
            ("nvidia_smi_memory_used_bytes", "1073741824"),
            ("nvidia_smi_utilization_gpu_ratio", "0.5"),
            ("nvidia_smi_temperature_gpu", "61"),
            ("nvidia_smi_power_draw_watts", "70.25"),
        ] {
            smi(&mut b, "n2:9835", name, "c0ffee", "", v);
        }
        // A value of a UUID no info names has no GPU to go to.
        smi(
            &mut b,
            "n2:9835",
            "nvidia_smi_temperature_gpu",
            "unknown",
            "",
            "99",
        );
        let f = b.finish("x".into(), 30.0, false);
        let h = &f.hosts[0];
        assert_eq!((h.host.as_str(), h.names), ("n2:9835", Some("nvidia-smi")));
        assert_eq!(h.devices.len(), 1);
        let d = &h.devices[0];
        assert_eq!(
            (
                d.identity.id.as_str(),
                d.identity.uuid.as_deref(),
                d.identity.name.as_deref()
            ),
            ("3", Some("GPU-c0ffee"), Some("Tesla T4"))
        );
        assert_eq!(d.memory_total_bytes, Some(15 << 30));
        assert_eq!(d.memory_used_bytes, Some(1 << 30));
        assert_eq!(d.gpu_utilization_percent, Some(50));
        assert_eq!(d.temperature_celsius, Some(61));
        assert_eq!(d.power_usage_watts, Some(70.25));
    }

    #[test]
    fn a_host_serving_gpuscope_and_dcgm_names_is_read_through_gpuscopes() {
        let mut b = FleetBuilder::new();
        // The dcgm series first: the host's own sample time still wins.
        door_host(&mut b, "n1:9445", "dcgm");
        let host = [
            ("instance", "n1:9445"),
            ("job", "gpu"),
            ("hostname", "node-1"),
        ];
        b.sample_time(&series(&host, 100.0, "97"), None);
        let dev = [("instance", "n1:9445"), ("index", "0")];
        b.device(DeviceField::Temperature, &series(&dev, 100.0, "40"), None);
        for (name, v) in DCGM_ALL {
            dcgm(&mut b, "n1:9445", name, "0", "a", v);
            dcgm(&mut b, "n1:9445", name, "7", "z", v);
        }
        assert!(b.door_hosts().is_empty(), "its dcgm names are not asked");
        let f = b.finish("x".into(), 30.0, false);
        let h = &f.hosts[0];
        assert_eq!(
            (h.host.as_str(), h.names, h.sample_age_seconds),
            ("node-1", None, Some(3.0))
        );
        assert_eq!(
            h.devices.len(),
            1,
            "one GPU, not the same one twice: {:?}",
            h.devices
        );
        assert_eq!(h.devices[0].temperature_celsius, Some(40));
        assert_eq!(h.devices[0].memory_used_bytes, None);
    }

    #[test]
    fn door_series_of_a_host_not_serving_that_door_are_left_out() {
        let mut b = FleetBuilder::new();
        door_host(&mut b, "n1:9400", "dcgm");
        // A label naming no door: no host.
        door_host(&mut b, "n3:9400", "dcgm-exporter");
        // nvidia-smi names on a dcgm host, dcgm names on an unknown host.
        smi(&mut b, "n1:9400", "nvidia_smi_gpu_info", "a", "0", "1");
        dcgm(&mut b, "n3:9400", "DCGM_FI_DEV_GPU_TEMP", "0", "a", "45");
        dcgm(&mut b, "n4:9400", "DCGM_FI_DEV_GPU_TEMP", "0", "a", "45");
        // A name the fleet does not read.
        dcgm(&mut b, "n1:9400", "DCGM_FI_DEV_SM_CLOCK", "0", "a", "1980");
        let f = b.finish("x".into(), 30.0, false);
        let hosts: Vec<(&str, usize)> = f
            .hosts
            .iter()
            .map(|h| (h.host.as_str(), h.devices.len()))
            .collect();
        // n3 is a target of the job, listed without devices as any such target is.
        assert_eq!(hosts, [("n3:9400", 0), ("node", 0)]);
        assert_eq!(f.hosts[0].names, None);
    }

    #[test]
    fn spoofed_dcgm_values_out_of_range_are_na_with_a_note_never_clamped() {
        for (name, v, expected) in [
            ("DCGM_FI_DEV_GPU_TEMP", "1e9", "0 to 200 °C"),
            ("DCGM_FI_DEV_GPU_UTIL", "250", "0 to 1 (0 to 100 %)"),
            ("DCGM_FI_DEV_POWER_USAGE", "-5", "0 to 10000 W"),
            (
                "DCGM_FI_DEV_FB_USED",
                "NaN",
                "0 to 16 TiB, and at most the total",
            ),
            (
                "DCGM_FI_DEV_FB_FREE",
                "1e30",
                "0 to 16 TiB, and at most the total",
            ),
        ] {
            let mut b = FleetBuilder::new();
            door_host(&mut b, "n1:9400", "dcgm");
            for (other, ok) in DCGM_ALL {
                dcgm(
                    &mut b,
                    "n1:9400",
                    other,
                    "0",
                    "a",
                    if other == name { v } else { ok },
                );
            }
            let f = b.finish("x".into(), 30.0, false);
            let d = &f.hosts[0].devices[0];
            let values = (
                d.memory_used_bytes,
                d.memory_free_bytes,
                d.gpu_utilization_percent,
                d.temperature_celsius,
                d.power_usage_watts,
            );
            let na = match name {
                "DCGM_FI_DEV_GPU_TEMP" => (
                    Some(1024 << 20),
                    Some(80000 << 20),
                    Some(37),
                    None,
                    Some(312.5),
                ),
                "DCGM_FI_DEV_GPU_UTIL" => (
                    Some(1024 << 20),
                    Some(80000 << 20),
                    None,
                    Some(45),
                    Some(312.5),
                ),
                "DCGM_FI_DEV_POWER_USAGE" => (
                    Some(1024 << 20),
                    Some(80000 << 20),
                    Some(37),
                    Some(45),
                    None,
                ),
                "DCGM_FI_DEV_FB_USED" => (None, Some(80000 << 20), Some(37), Some(45), Some(312.5)),
                _ => (Some(1024 << 20), None, Some(37), Some(45), Some(312.5)),
            };
            assert_eq!(values, na, "{name}={v}");
            assert_eq!(
                d.out_of_range,
                [OutOfRange {
                    family: name,
                    pid: None,
                    label: None,
                    value: v.to_string(),
                    expected
                }],
                "{name}={v}"
            );
        }
    }

    #[test]
    fn one_gpu_claimed_by_two_uuids_is_na_with_a_note() {
        // dcgm-exporter: GPU 0 under two UUIDs, whichever comes first.
        for first in ["a", "b"] {
            let second = if first == "a" { "b" } else { "a" };
            let mut b = FleetBuilder::new();
            door_host(&mut b, "n1:9400", "dcgm");
            dcgm(&mut b, "n1:9400", "DCGM_FI_DEV_GPU_TEMP", "0", first, "45");
            dcgm(&mut b, "n1:9400", "DCGM_FI_DEV_GPU_TEMP", "0", second, "46");
            dcgm(&mut b, "n1:9400", "DCGM_FI_DEV_GPU_UTIL", "0", first, "10");
            let f = b.finish("x".into(), 30.0, false);
            let d = &f.hosts[0].devices[0];
            assert_eq!(
                (d.temperature_celsius, d.gpu_utilization_percent),
                (None, None)
            );
            assert_eq!(d.out_of_range.len(), 1);
            assert_eq!(d.out_of_range[0].label, Some("UUID"));
            assert_eq!(d.out_of_range[0].expected, ONE_IDENTITY);
        }
        // nvidia_gpu_exporter: one UUID's info under two indices; then an index under two.
        let mut b = FleetBuilder::new();
        door_host(&mut b, "n2:9835", "nvidia-smi");
        smi(&mut b, "n2:9835", "nvidia_smi_gpu_info", "x", "0", "1");
        smi(&mut b, "n2:9835", "nvidia_smi_gpu_info", "x", "1", "1");
        smi(&mut b, "n2:9835", "nvidia_smi_gpu_info", "y", "2", "1");
        smi(&mut b, "n2:9835", "nvidia_smi_gpu_info", "w", "2", "1");
        smi(&mut b, "n2:9835", "nvidia_smi_gpu_info", "v", "3", "1");
        for u in ["x", "y", "w", "v"] {
            smi(&mut b, "n2:9835", "nvidia_smi_temperature_gpu", u, "", "50");
        }
        let f = b.finish("x".into(), 30.0, false);
        let temps: Vec<(&str, Option<u32>, usize)> = f.hosts[0]
            .devices
            .iter()
            .map(|d| {
                (
                    d.identity.id.as_str(),
                    d.temperature_celsius,
                    d.out_of_range.len(),
                )
            })
            .collect();
        assert_eq!(
            temps,
            [
                ("0", None, 1),
                ("1", None, 1),
                ("2", None, 1),
                ("3", Some(50), 0)
            ]
        );
    }
}
