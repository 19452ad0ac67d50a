//! nvitop's `ResourceMetricCollector`: nested tags, time-weighted mean, min, max and last value
//! since each tag started, host, device and per-process metrics, sampling in the background
//! while a tag is active, and `collect_in_background` with callbacks.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gpu_backend::host::HostMachine;
use gpu_backend::DeviceId;
use gpu_devices::{CudaDevice, Device, DeviceSnapshot};
use gpu_processes::{GpuProcess, ProcessCollector};

use crate::clock::{Clock, SystemClock, Waiter};
use crate::error::{Error, Result};
use crate::stats::TimeWeighted;
use crate::worker::{next_tick, Worker};

/// Metrics as `collect()` gives them: key (`<tag>/<scope>/<metric (unit)>/<mean|min|max|last>`)
/// to value, sorted by key.
pub type Metrics = BTreeMap<String, f64>;

const MIB: f64 = 1024.0 * 1024.0;
const GIB: f64 = 1024.0 * MIB;

/// One device metric the collector emits (nvitop's `DEVICE_METRICS`): under
/// `<tag>/<device>/<name>/<mean|min|max|last>`, the device's `attribute` divided by `unit`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DeviceMetricSpec {
    /// The device attribute, as nvitop names it (`memory_used`: bytes; `power_usage`: mW).
    pub attribute: &'static str,
    /// The name in the key, with its unit: `memory_used (MiB)`.
    pub name: &'static str,
    /// What the attribute is divided by to get the unit of `name` (1 MiB, 1000 mW, or 1).
    pub unit: f64,
}

/// One per-process metric the collector emits (nvitop's `PROCESS_METRICS`): under
/// `<tag>/pid:<pid>/<scope>/<name>/<mean|min|max|last>`, where the scope is `host` or, for
/// `None`, the process's device; the process's `attribute` divided by `unit`.
/// `running_time (min)` is reported as its latest value only, with no suffix.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcessMetricSpec {
    /// The process attribute, as nvitop names it (`host_memory`: bytes).
    pub attribute: &'static str,
    /// `Some("host")` for host facts, `None` for facts on the process's device.
    pub scope: Option<&'static str>,
    /// The name in the key, with its unit.
    pub name: &'static str,
    /// What the attribute is divided by to get the unit of `name`.
    pub unit: f64,
}

const fn dm(attribute: &'static str, name: &'static str, unit: f64) -> DeviceMetricSpec {
    DeviceMetricSpec {
        attribute,
        name,
        unit,
    }
}

const fn pm(
    attribute: &'static str,
    scope: Option<&'static str>,
    name: &'static str,
    unit: f64,
) -> ProcessMetricSpec {
    ProcessMetricSpec {
        attribute,
        scope,
        name,
        unit,
    }
}

/// The key of a process's running time, reported as its latest value only.
const RUNNING_TIME: &str = "host/running_time (min)";

/// Collects host, device and process metrics over time, under nested tags (nvitop's
/// `ResourceMetricCollector`).
///
/// Activating the first tag ([`ResourceMetricCollector::activate`] or
/// [`ResourceMetricCollector::scope`]) starts a background thread that takes a sample at once
/// and then every [`ResourceMetricCollector::interval`]; deactivating the last one stops it.
/// Each sample adds one value per metric to every active tag, and
/// [`ResourceMetricCollector::collect`] gives, for each metric since the innermost tag started
/// (or was reset), nvitop's aggregates: the *time-weighted* mean (trapezoids between samples,
/// the last value held up to now), the min, the max and the last value.
///
/// The thread sleeps on the collector's [`Clock`]: on a [`crate::ManualClock`] it samples
/// exactly when the clock is moved past each interval, so tests are deterministic.
///
/// Devices are named `gpu:<index>` (a MIG device `gpu:(<parent>, <index>)`), or
/// `cuda:<ordinal> (gpu:<index>)` when given as CUDA devices
/// ([`CollectorBuilder::cuda_devices`]). A GPU in MIG mode brings its MIG devices along
/// ([`ResourceMetricCollector::all_devices`]), and processes are read from the leaf devices
/// ([`ResourceMetricCollector::leaf_devices`]), as nvitop does.
///
/// Clones share the same tags.
#[derive(Clone)]
pub struct ResourceMetricCollector {
    shared: Arc<Shared>,
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for ResourceMetricCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceMetricCollector")
            .field("devices", &self.shared.labels)
            .field("root_pids", &self.shared.root_pids)
            .field("interval", &self.shared.interval)
            .finish_non_exhaustive()
    }
}

struct Shared {
    source: Arc<ProcessCollector>,
    /// The devices as given.
    devices: Vec<Device>,
    /// The devices as given, each GPU in MIG mode followed by its MIG devices.
    all_devices: Vec<Device>,
    /// The devices processes run on: MIG devices of GPUs in MIG mode, other devices themselves.
    leaf_devices: Vec<Device>,
    /// The scope name of each device: `gpu:3`, `gpu:(0, 1)`, or `cuda:0 (gpu:3)`.
    labels: HashMap<DeviceId, String>,
    root_pids: BTreeSet<u32>,
    interval: Duration,
    clock: Arc<dyn Clock>,
    machine: HostMachine,
}

struct State {
    stack: Vec<Buffer>,
    /// Whether activating the first tag starts the background sampler.
    background: bool,
    sampler: Option<Worker>,
}

impl State {
    fn new(background: bool) -> State {
        State {
            stack: Vec::new(),
            background,
            sampler: None,
        }
    }
}

struct Buffer {
    tag: String,
    prefix: String,
    /// Clock seconds when the tag started (or was reset).
    start: f64,
    /// Clock seconds of the last sample, `start` before the first one.
    last_time: f64,
    /// The clock of the last sample, for `collect()` to know whether it is fresh.
    last_sample: Option<Duration>,
    /// Unix time of the last sample (of the start before the first).
    last_unix: f64,
    series: BTreeMap<String, TimeWeighted>,
}

impl Buffer {
    fn new(tag: &str, prefix: String, now: Duration, unix: f64) -> Buffer {
        Buffer {
            tag: tag.to_string(),
            prefix,
            start: now.as_secs_f64(),
            last_time: now.as_secs_f64(),
            last_sample: None,
            last_unix: unix,
            series: BTreeMap::new(),
        }
    }

    fn clear(&mut self, now: Duration, unix: f64) {
        self.start = now.as_secs_f64();
        self.last_time = self.start;
        self.last_sample = None;
        self.last_unix = unix;
        self.series.clear();
    }

    /// Adds one sample taken at `now`. A metric this tag has seen but the sample lacks is a
    /// gap; a metric new to the tag starts its series at the tag's previous sample.
    fn add(&mut self, sample: &Sample, now: Duration, unix: f64) {
        let t = now.as_secs_f64();
        for (key, series) in &mut self.series {
            if !sample.contains_key(key) {
                series.add(f64::NAN, t);
            }
        }
        for (key, &value) in sample {
            let since = self.last_time;
            self.series
                .entry(key.clone())
                .or_insert_with(|| TimeWeighted::new(since))
                .add(value, t);
        }
        self.last_time = t;
        self.last_sample = Some(now);
        self.last_unix = unix;
    }

    fn collect(&self, now: Duration, unix: f64) -> Metrics {
        let t = now.as_secs_f64();
        let p = &self.prefix;
        let mut out = Metrics::new();
        for (key, s) in &self.series {
            let plain = s.plain();
            if key.ends_with(RUNNING_TIME) {
                if plain.count > 0 {
                    out.insert(format!("{p}/{key}"), plain.max);
                }
                continue;
            }
            let (Some(mean), Some((min, max))) = (s.mean(t), plain.range()) else {
                continue;
            };
            out.insert(format!("{p}/{key}/mean"), mean);
            out.insert(format!("{p}/{key}/min"), min);
            out.insert(format!("{p}/{key}/max"), max);
            out.insert(format!("{p}/{key}/last"), plain.last);
        }
        out.insert(format!("{p}/duration (s)"), (t - self.start).max(0.0));
        out.insert(format!("{p}/timestamp"), unix);
        out.insert(format!("{p}/last_timestamp"), self.last_unix);
        out
    }
}

/// One sample: metric key (without tag) to value.
type Sample = BTreeMap<String, f64>;

/// Chooses what a [`ResourceMetricCollector`] watches.
pub struct CollectorBuilder {
    source: Arc<ProcessCollector>,
    devices: Option<Vec<(Device, Option<u32>)>>,
    root_pids: Option<BTreeSet<u32>>,
    interval: Duration,
    clock: Arc<dyn Clock>,
    background: bool,
}

impl CollectorBuilder {
    /// The devices to watch (default: every physical device), named `gpu:<index>`. A GPU in
    /// MIG mode brings its MIG devices along.
    pub fn devices(mut self, devices: Vec<Device>) -> CollectorBuilder {
        self.devices = Some(devices.into_iter().map(|d| (d, None)).collect());
        self
    }

    /// The devices to watch, named by their CUDA ordinals (`cuda:0 (gpu:3)`), as nvitop's
    /// `devices=Device.cuda.all()`. A CUDA device is a leaf: its MIG devices are not added.
    pub fn cuda_devices(mut self, devices: Vec<CudaDevice>) -> CollectorBuilder {
        self.devices = Some(
            devices
                .into_iter()
                .map(|d| {
                    let cuda = d.cuda_index();
                    (d.into_device(), Some(cuda))
                })
                .collect(),
        );
        self
    }

    /// Only the GPU processes descending from these PIDs (or being one) are reported (default:
    /// this process). `[1]` reports every GPU process, also one whose chain of parents cannot
    /// be read all the way up.
    pub fn root_pids(mut self, pids: impl IntoIterator<Item = u32>) -> CollectorBuilder {
        self.root_pids = Some(pids.into_iter().collect());
        self
    }

    /// The interval of the background sampling (default: one second; at least 1 ms).
    pub fn interval(mut self, interval: Duration) -> CollectorBuilder {
        self.interval = interval.max(Duration::from_millis(1));
        self
    }

    /// The clock durations and timestamps are read from, and the background thread sleeps on
    /// (default: the system clock).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> CollectorBuilder {
        self.clock = clock;
        self
    }

    /// Whether activating a tag starts sampling in the background (default: yes, as nvitop).
    /// Without it, samples are taken only by [`ResourceMetricCollector::take_sample`] and by
    /// `collect()` when the last sample is older than half an interval.
    pub fn background_sampling(mut self, on: bool) -> CollectorBuilder {
        self.background = on;
        self
    }

    /// The collector.
    pub fn build(self) -> ResourceMetricCollector {
        let chosen = self.devices.unwrap_or_else(|| {
            self.source
                .context()
                .devices()
                .into_iter()
                .map(|d| (d, None))
                .collect()
        });
        let mut labels = HashMap::new();
        let mut all_devices = Vec::new();
        let mut leaf_devices = Vec::new();
        for (d, cuda) in &chosen {
            let label = match cuda {
                Some(c) => format!("cuda:{c} ({})", gpu_label(d.id())),
                None => gpu_label(d.id()),
            };
            if labels.insert(d.id(), label).is_some() {
                continue;
            }
            all_devices.push(d.clone());
            let migs = if cuda.is_none() && !d.is_mig_device() && d.is_mig_mode_enabled() {
                d.mig_devices()
            } else {
                Vec::new()
            };
            if migs.is_empty() {
                leaf_devices.push(d.clone());
            }
            for m in migs {
                if labels.insert(m.id(), gpu_label(m.id())).is_none() {
                    all_devices.push(m.clone());
                    leaf_devices.push(m);
                }
            }
        }
        let devices = chosen.into_iter().map(|(d, _)| d).collect();
        let machine = self.source.host().machine();
        ResourceMetricCollector {
            shared: Arc::new(Shared {
                devices,
                all_devices,
                leaf_devices,
                labels,
                root_pids: self
                    .root_pids
                    .unwrap_or_else(|| BTreeSet::from([std::process::id()])),
                interval: self.interval,
                clock: self.clock,
                machine,
                source: self.source,
            }),
            state: Arc::new(Mutex::new(State::new(self.background))),
        }
    }
}

/// nvitop's name of a device: `gpu:3`, or `gpu:(0, 1)` for MIG device 1 of GPU 0 (Python's
/// tuple).
fn gpu_label(id: DeviceId) -> String {
    match id {
        DeviceId::Gpu(i) => format!("gpu:{i}"),
        DeviceId::Mig { parent, index } => format!("gpu:({parent}, {index})"),
    }
}

impl ResourceMetricCollector {
    /// nvitop's `DEVICE_METRICS`: the device metrics emitted, in order, with their units.
    pub const DEVICE_METRICS: [DeviceMetricSpec; 9] = [
        dm("memory_used", "memory_used (MiB)", MIB),
        dm("memory_free", "memory_free (MiB)", MIB),
        dm("memory_total", "memory_total (MiB)", MIB),
        dm("memory_percent", "memory_percent (%)", 1.0),
        dm("gpu_utilization", "gpu_utilization (%)", 1.0),
        dm("memory_utilization", "memory_utilization (%)", 1.0),
        dm("fan_speed", "fan_speed (%)", 1.0),
        dm("temperature", "temperature (C)", 1.0),
        dm("power_usage", "power_usage (W)", 1000.0),
    ];

    /// nvitop's `PROCESS_METRICS`: the per-process metrics emitted, in order, with their scope
    /// and units.
    pub const PROCESS_METRICS: [ProcessMetricSpec; 8] = [
        pm("cpu_percent", Some("host"), "cpu_percent (%)", 1.0),
        pm("host_memory", Some("host"), "host_memory (MiB)", MIB),
        pm(
            "host_memory_percent",
            Some("host"),
            "host_memory_percent (%)",
            1.0,
        ),
        pm(
            "running_time_in_seconds",
            Some("host"),
            "running_time (min)",
            60.0,
        ),
        pm("gpu_memory", None, "gpu_memory (MiB)", MIB),
        pm("gpu_memory_percent", None, "gpu_memory_percent (%)", 1.0),
        pm(
            "gpu_memory_utilization",
            None,
            "gpu_memory_utilization (%)",
            1.0,
        ),
        pm("gpu_sm_utilization", None, "gpu_sm_utilization (%)", 1.0),
    ];

    /// A collector of every physical device and of this process's GPU descendants, sampling
    /// every second on the system clock.
    pub fn new(source: Arc<ProcessCollector>) -> ResourceMetricCollector {
        ResourceMetricCollector::builder(source).build()
    }

    /// Chooses devices, root PIDs, interval and clock.
    pub fn builder(source: Arc<ProcessCollector>) -> CollectorBuilder {
        CollectorBuilder {
            source,
            devices: None,
            root_pids: None,
            interval: Duration::from_secs(1),
            clock: Arc::new(SystemClock::new()),
            background: true,
        }
    }

    /// The background sampling interval.
    pub fn interval(&self) -> Duration {
        self.shared.interval
    }

    /// The devices watched, as given.
    pub fn devices(&self) -> &[Device] {
        &self.shared.devices
    }

    /// The devices whose metrics are reported: those given, each GPU in MIG mode followed by
    /// its MIG devices.
    pub fn all_devices(&self) -> &[Device] {
        &self.shared.all_devices
    }

    /// The devices processes are read from: the MIG devices of GPUs in MIG mode, the other
    /// devices themselves.
    pub fn leaf_devices(&self) -> &[Device] {
        &self.shared.leaf_devices
    }

    /// The root PIDs.
    pub fn root_pids(&self) -> &BTreeSet<u32> {
        &self.shared.root_pids
    }

    /// The key prefix now (`train/batch`), `None` when no tag is active.
    pub fn prefix(&self) -> Option<String> {
        self.lock().stack.last().map(|b| b.prefix.clone())
    }

    /// Starts a collection named `tag`, nested in the active one: keys are then prefixed with
    /// `<outer>/<tag>`. The first tag starts the background sampling (a sample now, then one
    /// every interval).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidTag`] for an empty tag or one with `/`; [`Error::TagActive`] when the tag
    /// is active already; [`Error::Spawn`] when the sampling thread cannot be started (the tag
    /// is then not active).
    #[doc(alias = "start")]
    pub fn activate(&self, tag: &str) -> Result<&Self> {
        if tag.is_empty() || tag.contains('/') {
            return Err(Error::InvalidTag(tag.to_string()));
        }
        let now = self.shared.clock.elapsed();
        let unix = self.shared.clock.unix_time();
        let mut state = self.lock();
        if state.stack.iter().any(|b| b.tag == tag) {
            return Err(Error::TagActive(tag.to_string()));
        }
        if state.stack.is_empty() && state.background && state.sampler.is_none() {
            state.sampler = Some(self.spawn_sampler(now)?);
        }
        let prefix = match state.stack.last() {
            Some(outer) => format!("{}/{tag}", outer.prefix),
            None => tag.to_string(),
        };
        state.stack.push(Buffer::new(tag, prefix, now, unix));
        Ok(self)
    }

    /// Stops the collection `tag` (the innermost one when `None`) and every one nested in it.
    /// When no tag is left, the background sampling stops (and its thread is joined). With
    /// `None` and no tag active it does nothing, as nvitop's.
    ///
    /// # Errors
    ///
    /// [`Error::NoSuchTag`] when `tag` is not active.
    #[doc(alias = "stop")]
    pub fn deactivate(&self, tag: Option<&str>) -> Result<&Self> {
        let sampler = {
            let mut state = self.lock();
            let at = position(&state.stack, tag)?;
            state.stack.truncate(at);
            if state.stack.is_empty() {
                state.sampler.take()
            } else {
                None
            }
        };
        if let Some(mut s) = sampler {
            // A panic in the sampler was reported by the panic hook; the tags are gone anyway.
            let _ = s.stop();
        }
        Ok(self)
    }

    /// Starts the collection `tag` for as long as the returned guard lives (nvitop's
    /// `with collector(tag=...)`).
    ///
    /// # Errors
    ///
    /// As [`ResourceMetricCollector::activate`].
    #[doc(alias = "context")]
    pub fn scope(&self, tag: &str) -> Result<TagGuard> {
        self.activate(tag)?;
        Ok(TagGuard {
            collector: self.clone(),
            tag: tag.to_string(),
        })
    }

    /// Starts the collection `tag` (the innermost when `None`), and every one nested in it,
    /// over: what was collected is dropped and durations count from now.
    ///
    /// # Errors
    ///
    /// As [`ResourceMetricCollector::deactivate`].
    #[doc(alias = "clear")]
    pub fn reset(&self, tag: Option<&str>) -> Result<()> {
        let now = self.shared.clock.elapsed();
        let unix = self.shared.clock.unix_time();
        let mut state = self.lock();
        let at = position(&state.stack, tag)?;
        for b in &mut state.stack[at..] {
            b.clear(now, unix);
        }
        Ok(())
    }

    /// Takes one sample of every metric now and adds it to every active tag. Does nothing when
    /// no tag is active.
    pub fn take_sample(&self) {
        take_sample(&self.shared, &self.state);
    }

    /// For each metric since the innermost tag started: the time-weighted mean, min, max and
    /// last value (a process's running time: its latest value only), with
    /// `<prefix>/duration (s)`, `<prefix>/timestamp` and `<prefix>/last_timestamp` (of the last
    /// sample). A sample is taken first unless the last one is less than half an interval old.
    /// A metric never read (N/A) is left out.
    ///
    /// # Errors
    ///
    /// [`Error::NotStarted`] when no tag is active.
    pub fn collect(&self) -> Result<Metrics> {
        let stale = {
            let state = self.lock();
            let b = state.stack.last().ok_or(Error::NotStarted)?;
            let now = self.shared.clock.elapsed();
            b.last_sample
                .is_none_or(|t| now.saturating_sub(t) >= self.shared.interval / 2)
        };
        if stale {
            self.take_sample();
        }
        let now = self.shared.clock.elapsed();
        let unix = self.shared.clock.unix_time();
        let state = self.lock();
        let b = state.stack.last().ok_or(Error::NotStarted)?;
        Ok(b.collect(now, unix))
    }

    /// Collects in the background, as [`collect_in_background`] with this collector.
    ///
    /// # Errors
    ///
    /// [`Error::Spawn`] when the thread cannot be started.
    pub fn daemonize<F>(&self, on_collect: F, options: DaemonOptions) -> Result<Daemon>
    where
        F: FnMut(&Metrics) -> bool + Send + 'static,
    {
        collect_in_background(on_collect, Some(self), options)
    }

    /// The sampler thread: a sample at `start`, then one every interval on the clock, until
    /// stopped or the collector is gone.
    fn spawn_sampler(&self, start: Duration) -> Result<Worker> {
        let shared = self.shared.clone();
        let state = Arc::downgrade(&self.state);
        let waiter = shared.clock.waiter();
        Worker::spawn("gpu-metrics-sampler", waiter, move |waiter| {
            let mut tick = start;
            loop {
                if waiter.is_stopped() {
                    break;
                }
                let Some(state) = state.upgrade() else {
                    break;
                };
                take_sample(&shared, &state);
                drop(state);
                tick = next_tick(tick, shared.interval, shared.clock.elapsed());
                if waiter.sleep_until(shared.clock.as_ref(), tick) {
                    break;
                }
            }
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        lock(&self.state)
    }
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

fn take_sample(shared: &Shared, state: &Mutex<State>) {
    if lock(state).stack.is_empty() {
        return;
    }
    let sample = read_sample(shared);
    let mut state = lock(state);
    // Read under the lock, so that the samples of concurrent callers are added in time order.
    let now = shared.clock.elapsed();
    let unix = shared.clock.unix_time();
    for b in &mut state.stack {
        b.add(&sample, now, unix);
    }
}

/// Reads every metric once.
fn read_sample(sh: &Shared) -> Sample {
    let mut out = Sample::new();
    let mut put = |key: String, v: Option<f64>| {
        if let Some(v) = v.filter(|v| v.is_finite()) {
            out.insert(key, v);
        }
    };

    let host = sh.source.host().sample();
    let pct = |used: Option<u64>, total: Option<u64>| match (used, total) {
        (Some(u), Some(t)) if t > 0 => Some(u as f64 * 100.0 / t as f64),
        _ => None,
    };
    put("host/cpu_percent (%)".into(), host.cpu_percent);
    put(
        "host/memory_percent (%)".into(),
        pct(host.memory_used, sh.machine.memory_total),
    );
    put(
        "host/swap_percent (%)".into(),
        pct(host.swap_used, sh.machine.swap_total),
    );
    put(
        "host/memory_used (GiB)".into(),
        host.memory_used.map(|b| b as f64 / GIB),
    );
    for (i, minutes) in [1, 5, 15].into_iter().enumerate() {
        put(
            format!("host/load_average (%) ({minutes} min)"),
            host.load_average.map(|l| l[i]),
        );
    }

    let snapshots = sh.source.take_snapshots(&sh.all_devices);
    for d in &snapshots.devices {
        let Some(label) = sh.labels.get(&d.id) else {
            continue;
        };
        for spec in &ResourceMetricCollector::DEVICE_METRICS {
            put(
                format!("{label}/{}", spec.name),
                device_attribute(d, spec.attribute).map(|v| v / spec.unit),
            );
        }
    }

    let leaves: BTreeSet<DeviceId> = sh.leaf_devices.iter().map(Device::id).collect();
    let mut ancestry = Ancestry::new(&sh.root_pids, sh.source.host().as_ref());
    for p in &snapshots.processes {
        if !leaves.contains(&p.device) || !ancestry.descends(p.pid, p.host.ppid) {
            continue;
        }
        let Some(label) = sh.labels.get(&p.device) else {
            continue;
        };
        for spec in &ResourceMetricCollector::PROCESS_METRICS {
            let scope = spec.scope.unwrap_or(label);
            put(
                format!("pid:{}/{scope}/{}", p.pid, spec.name),
                process_attribute(p, spec.attribute).map(|v| v / spec.unit),
            );
        }
    }
    out
}

/// A device attribute of [`ResourceMetricCollector::DEVICE_METRICS`], in the device's own unit.
fn device_attribute(d: &DeviceSnapshot, attribute: &str) -> Option<f64> {
    let mem = d.memory.value();
    let util = d.utilization.value();
    match attribute {
        "memory_used" => mem.map(|m| m.used as f64),
        "memory_free" => mem.map(|m| m.free as f64),
        "memory_total" => mem.map(|m| m.total as f64),
        "memory_percent" => d.memory_percent().value().copied(),
        "gpu_utilization" => util.map(|u| f64::from(u.gpu)),
        "memory_utilization" => util.map(|u| f64::from(u.memory)),
        "fan_speed" => d.fan_speed.value().map(|&v| f64::from(v)),
        "temperature" => d.temperature.value().map(|&v| f64::from(v)),
        "power_usage" => d.power_usage.value().map(|&mw| f64::from(mw)),
        _ => None,
    }
}

/// A process attribute of [`ResourceMetricCollector::PROCESS_METRICS`], in its own unit.
fn process_attribute(p: &GpuProcess, attribute: &str) -> Option<f64> {
    let h = &p.host;
    match attribute {
        "cpu_percent" => h.cpu_percent,
        "host_memory" => h.rss.map(|b| b as f64),
        "host_memory_percent" => h.memory_percent,
        "running_time_in_seconds" => h.running_time_s.map(|s| s as f64),
        "gpu_memory" => p.gpu_memory.map(|b| b as f64),
        "gpu_memory_percent" => p.gpu_memory_percent,
        "gpu_memory_utilization" => p.utilization.memory.map(f64::from),
        "gpu_sm_utilization" => p.utilization.sm.map(f64::from),
        _ => None,
    }
}

/// The PID of init, the ancestor of every process.
const INIT_PID: u32 = 1;

/// Which PIDs descend from the roots, following parents on the host; remembered for one sample.
struct Ancestry<'a> {
    roots: &'a BTreeSet<u32>,
    host: &'a dyn gpu_backend::host::HostSource,
    known: HashMap<u32, bool>,
}

impl<'a> Ancestry<'a> {
    fn new(roots: &'a BTreeSet<u32>, host: &'a dyn gpu_backend::host::HostSource) -> Self {
        Ancestry {
            roots,
            host,
            known: HashMap::new(),
        }
    }

    fn descends(&mut self, pid: u32, ppid: Option<u32>) -> bool {
        // Every process descends from PID 1 (init, or a PID namespace's own init), even when
        // a parent between them cannot be read (ended and reparented late, another user's, or
        // not kept in a recording): nvitop's `root_pids={1}` is every GPU process.
        if self.roots.contains(&INIT_PID) {
            return true;
        }
        let mut chain = vec![pid];
        let mut next = ppid;
        let mut answer = false;
        // Bounded, in case the host reports a cycle.
        for _ in 0..128 {
            let cur = *chain.last().unwrap_or(&0);
            if self.roots.contains(&cur) {
                answer = true;
                break;
            }
            if let Some(&k) = self.known.get(&cur) {
                answer = k;
                break;
            }
            let parent = match next.take() {
                Some(p) => Some(p),
                None => self.host.process(cur).and_then(|f| f.ppid),
            };
            match parent {
                Some(p) if p != cur && p != 0 => chain.push(p),
                _ => break,
            }
        }
        for p in chain {
            self.known.insert(p, answer);
        }
        answer
    }
}

fn position(stack: &[Buffer], tag: Option<&str>) -> Result<usize> {
    match tag {
        // Nothing to stop or reset: a no-op, as nvitop's.
        None if stack.is_empty() => Ok(0),
        None => Ok(stack.len() - 1),
        Some(t) => stack
            .iter()
            .position(|b| b.tag == t)
            .ok_or_else(|| Error::NoSuchTag(t.to_string())),
    }
}

/// Keeps a tag active while it lives; see [`ResourceMetricCollector::scope`].
#[derive(Debug)]
pub struct TagGuard {
    collector: ResourceMetricCollector,
    tag: String,
}

impl TagGuard {
    /// The collector, to call `collect()` inside the scope.
    pub fn collector(&self) -> &ResourceMetricCollector {
        &self.collector
    }
}

impl Drop for TagGuard {
    fn drop(&mut self) {
        // The tag may have been deactivated by hand already (with an outer tag); that is fine.
        let _ = self.collector.deactivate(Some(&self.tag));
    }
}

type Hook = Box<dyn FnOnce(&ResourceMetricCollector) + Send>;

/// How [`collect_in_background`] runs.
pub struct DaemonOptions {
    interval: Option<Duration>,
    tag: String,
    on_start: Option<Hook>,
    on_stop: Option<Hook>,
    start: bool,
}

impl Default for DaemonOptions {
    fn default() -> Self {
        DaemonOptions {
            interval: None,
            tag: "metrics-daemon".into(),
            on_start: None,
            on_stop: None,
            start: true,
        }
    }
}

impl std::fmt::Debug for DaemonOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DaemonOptions")
            .field("interval", &self.interval)
            .field("tag", &self.tag)
            .field("start", &self.start)
            .finish_non_exhaustive()
    }
}

impl DaemonOptions {
    /// Defaults: the collector's interval, tag `metrics-daemon`, no hooks, started at once.
    pub fn new() -> DaemonOptions {
        DaemonOptions::default()
    }

    /// How often `on_collect` is called (default: the collector's interval; at least 1 ms).
    pub fn interval(mut self, interval: Duration) -> DaemonOptions {
        self.interval = Some(interval.max(Duration::from_millis(1)));
        self
    }

    /// The tag the metrics are collected under (default `metrics-daemon`).
    pub fn tag(mut self, tag: impl Into<String>) -> DaemonOptions {
        self.tag = tag.into();
        self
    }

    /// Runs on the thread before the first sample (nvitop: "to initialize the daemon thread
    /// and collector").
    pub fn on_start(mut self, f: impl FnOnce(&ResourceMetricCollector) + Send + 'static) -> Self {
        self.on_start = Some(Box::new(f));
        self
    }

    /// Runs once on the thread after the last sample, however the daemon ends (nvitop: "some
    /// necessary cleanup after the daemon thread is stopped").
    pub fn on_stop(mut self, f: impl FnOnce(&ResourceMetricCollector) + Send + 'static) -> Self {
        self.on_stop = Some(Box::new(f));
        self
    }

    /// Whether the thread starts on return (default: yes); if not, [`Daemon::start`] starts it.
    pub fn start(mut self, start: bool) -> DaemonOptions {
        self.start = start;
        self
    }
}

/// Collects in the background (nvitop's `collect_in_background`): a thread that activates
/// `options.tag`, samples every collector interval, and every `options.interval` calls
/// `on_collect` with that interval's metrics (mean, min and max over it), then starts the tag
/// over. It ends when `on_collect` returns `false` or the [`Daemon`] is stopped or dropped;
/// `on_start` runs first and `on_stop` last, on the thread.
///
/// `collector` gives the devices, root PIDs, interval and clock; `None` is every GPU and this
/// process's descendants, as nvitop's default. The daemon's tags are its own: they do not
/// appear in `collector.collect()`. The thread sleeps on the collector's clock, so on a
/// [`crate::ManualClock`] each call comes exactly when the clock passes it.
///
/// # Errors
///
/// [`Error::Open`] when `collector` is `None` and the GPUs cannot be opened; [`Error::Spawn`]
/// when the thread cannot be started.
pub fn collect_in_background<F>(
    on_collect: F,
    collector: Option<&ResourceMetricCollector>,
    options: DaemonOptions,
) -> Result<Daemon>
where
    F: FnMut(&Metrics) -> bool + Send + 'static,
{
    let shared = match collector {
        Some(c) => c.shared.clone(),
        None => {
            ResourceMetricCollector::new(Arc::new(ProcessCollector::open().map_err(Error::Open)?))
                .shared
        }
    };
    // Its own tags, and no sampler of its own: the daemon thread samples.
    let c = ResourceMetricCollector {
        state: Arc::new(Mutex::new(State::new(false))),
        shared,
    };
    let every = options.interval.unwrap_or(c.shared.interval);
    let start = options.start;
    let launch: Launch = Box::new(move || {
        let waiter = c.shared.clock.waiter();
        Worker::spawn("gpu-metrics-daemon", waiter, move |waiter| {
            run_daemon(c, every, options, on_collect, &waiter);
        })
    });
    let mut daemon = Daemon {
        launch: Some(launch),
        worker: None,
    };
    if start {
        daemon.start()?;
    }
    Ok(daemon)
}

type Launch = Box<dyn FnOnce() -> Result<Worker> + Send>;

/// A collecting thread; see [`collect_in_background`]. Dropping it stops the thread.
pub struct Daemon {
    launch: Option<Launch>,
    worker: Option<Worker>,
}

impl std::fmt::Debug for Daemon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Daemon")
            .field("started", &self.is_started())
            .field("finished", &self.is_finished())
            .finish()
    }
}

impl Daemon {
    /// Starts the thread of a daemon made with `DaemonOptions::start(false)`; does nothing if
    /// it was started already.
    ///
    /// # Errors
    ///
    /// [`Error::Spawn`] when the thread cannot be started.
    pub fn start(&mut self) -> Result<()> {
        if let Some(launch) = self.launch.take() {
            self.worker = Some(launch()?);
        }
        Ok(())
    }

    /// True once the thread was started.
    pub fn is_started(&self) -> bool {
        self.worker.is_some()
    }

    /// True when the thread ran and has ended (its callback returned `false`).
    pub fn is_finished(&self) -> bool {
        self.worker.as_ref().is_some_and(Worker::is_finished)
    }

    /// Stops the daemon now (it does not wait for the interval to end), runs `on_stop` and
    /// joins the thread. A daemon never started is dropped.
    ///
    /// # Errors
    ///
    /// [`Error::ThreadPanicked`] when a callback panicked.
    pub fn stop(mut self) -> Result<()> {
        match self.worker.take() {
            Some(mut w) => w.stop(),
            None => Ok(()),
        }
    }
}

fn run_daemon<F>(
    c: ResourceMetricCollector,
    every: Duration,
    options: DaemonOptions,
    mut on_collect: F,
    waiter: &Waiter,
) where
    F: FnMut(&Metrics) -> bool,
{
    let DaemonOptions {
        tag,
        on_start,
        on_stop,
        ..
    } = options;
    if let Some(f) = on_start {
        f(&c);
    }
    let clock = c.shared.clock.clone();
    if !waiter.is_stopped() && c.activate(&tag).is_ok() {
        let sample_every = every.min(c.shared.interval);
        let start = clock.elapsed();
        let mut next_sample = start + sample_every;
        let mut next_collect = start + every;
        c.take_sample();
        while !waiter.sleep_until(clock.as_ref(), next_sample.min(next_collect)) {
            let now = clock.elapsed();
            if now >= next_sample {
                c.take_sample();
                next_sample = next_tick(next_sample, sample_every, now);
            }
            if now >= next_collect {
                next_collect = next_tick(next_collect, every, now);
                let go_on = match c.collect() {
                    Ok(m) => on_collect(&m),
                    Err(_) => false,
                };
                if !go_on {
                    break;
                }
                let _ = c.reset(Some(&tag));
            }
        }
        let _ = c.deactivate(Some(&tag));
    }
    if let Some(f) = on_stop {
        f(&c);
    }
}
