//! nvitop's `ResourceMetricCollector`: nested tags, mean/min/max since each tag started, host,
//! device and per-process metrics, a background sampler and a daemon with callbacks.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gpu_backend::host::HostMachine;
use gpu_backend::DeviceId;
use gpu_devices::{CudaDevice, Device};
use gpu_processes::{GpuProcess, ProcessCollector};

use crate::clock::{Clock, SystemClock};
use crate::error::{Error, Result};
use crate::stats::Stats;
use crate::worker::{next_tick, StopSignal, Worker};

/// Metrics as `collect()` gives them: key (`<tag>/<scope>/<metric (unit)>/<mean|min|max>`) to
/// value, sorted by key.
pub type Metrics = BTreeMap<String, f64>;

const MIB: f64 = 1024.0 * 1024.0;
const GIB: f64 = 1024.0 * MIB;

/// Collects host, device and process metrics over time, under nested tags (nvitop's
/// `ResourceMetricCollector`).
///
/// Each sample ([`ResourceMetricCollector::take_sample`], or the background
/// [`Sampler`]) adds one value per metric to every active tag; [`ResourceMetricCollector::collect`]
/// gives the mean, min and max of the values since the innermost tag started (or was reset).
/// Clones share the same tags. The mean is the mean of the samples, not a time-weighted mean:
/// sampled at a steady interval the two agree.
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
    devices: Vec<Device>,
    /// The scope name of each device: `cuda:0 (gpu:3)`, or `gpu:3` when CUDA does not show it.
    labels: HashMap<DeviceId, String>,
    root_pids: BTreeSet<u32>,
    interval: Duration,
    clock: Arc<dyn Clock>,
    machine: HostMachine,
}

#[derive(Default)]
struct State {
    stack: Vec<Buffer>,
}

struct Buffer {
    tag: String,
    prefix: String,
    start: Duration,
    last_sample: Option<Duration>,
    stats: BTreeMap<String, Stats>,
    /// Metrics reported as their last value only (running times).
    last: BTreeMap<String, f64>,
}

impl Buffer {
    fn new(tag: &str, prefix: String, now: Duration) -> Buffer {
        Buffer {
            tag: tag.to_string(),
            prefix,
            start: now,
            last_sample: None,
            stats: BTreeMap::new(),
            last: BTreeMap::new(),
        }
    }

    fn clear(&mut self, now: Duration) {
        self.start = now;
        self.last_sample = None;
        self.stats.clear();
        self.last.clear();
    }
}

/// One sample: `(key, value, last-value-only)` per metric.
type Sample = Vec<(String, f64, bool)>;

/// Chooses what a [`ResourceMetricCollector`] watches.
pub struct CollectorBuilder {
    source: Arc<ProcessCollector>,
    devices: Option<Vec<(Device, Option<u32>)>>,
    root_pids: Option<BTreeSet<u32>>,
    interval: Duration,
    clock: Arc<dyn Clock>,
}

impl CollectorBuilder {
    /// The devices to watch (default: every physical device).
    pub fn devices(mut self, devices: Vec<Device>) -> CollectorBuilder {
        self.devices = Some(
            devices
                .into_iter()
                .map(|d| {
                    let cuda = d.cuda_index();
                    (d, cuda)
                })
                .collect(),
        );
        self
    }

    /// The devices to watch, named by these CUDA ordinals (`cuda:0 (gpu:3)`) rather than by
    /// the environment's `CUDA_VISIBLE_DEVICES` (nvitop's `devices=Device.cuda.all()`).
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
    /// this process). `[1]` reports every GPU process.
    pub fn root_pids(mut self, pids: impl IntoIterator<Item = u32>) -> CollectorBuilder {
        self.root_pids = Some(pids.into_iter().collect());
        self
    }

    /// The interval of the background sampler (default: one second).
    pub fn interval(mut self, interval: Duration) -> CollectorBuilder {
        self.interval = interval;
        self
    }

    /// The clock durations and timestamps are read from (default: the system clock).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> CollectorBuilder {
        self.clock = clock;
        self
    }

    /// The collector.
    pub fn build(self) -> ResourceMetricCollector {
        let chosen = self.devices.unwrap_or_else(|| {
            self.source
                .context()
                .devices()
                .into_iter()
                .map(|d| {
                    let cuda = d.cuda_index();
                    (d, cuda)
                })
                .collect()
        });
        let labels = chosen
            .iter()
            .map(|(d, cuda)| {
                let label = match cuda {
                    Some(c) => format!("cuda:{c} (gpu:{})", d.id()),
                    None => format!("gpu:{}", d.id()),
                };
                (d.id(), label)
            })
            .collect();
        let devices = chosen.into_iter().map(|(d, _)| d).collect();
        let machine = self.source.host().machine();
        ResourceMetricCollector {
            shared: Arc::new(Shared {
                devices,
                labels,
                root_pids: self
                    .root_pids
                    .unwrap_or_else(|| BTreeSet::from([std::process::id()])),
                interval: self.interval,
                clock: self.clock,
                machine,
                source: self.source,
            }),
            state: Arc::new(Mutex::new(State::default())),
        }
    }
}

impl ResourceMetricCollector {
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
        }
    }

    /// The background sampler's interval.
    pub fn interval(&self) -> Duration {
        self.shared.interval
    }

    /// The devices watched.
    pub fn devices(&self) -> &[Device] {
        &self.shared.devices
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
    /// `<outer>/<tag>`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidTag`] for an empty tag or one with `/`; [`Error::TagActive`] when the tag
    /// is active already.
    pub fn activate(&self, tag: &str) -> Result<&Self> {
        if tag.is_empty() || tag.contains('/') {
            return Err(Error::InvalidTag(tag.to_string()));
        }
        let now = self.shared.clock.elapsed();
        let mut state = self.lock();
        if state.stack.iter().any(|b| b.tag == tag) {
            return Err(Error::TagActive(tag.to_string()));
        }
        let prefix = match state.stack.last() {
            Some(outer) => format!("{}/{tag}", outer.prefix),
            None => tag.to_string(),
        };
        state.stack.push(Buffer::new(tag, prefix, now));
        Ok(self)
    }

    /// Stops the collection `tag` (the innermost one when `None`) and every one nested in it.
    ///
    /// # Errors
    ///
    /// [`Error::NoSuchTag`] when `tag` is not active; [`Error::NotStarted`] when none is.
    pub fn deactivate(&self, tag: Option<&str>) -> Result<&Self> {
        let mut state = self.lock();
        let at = position(&state.stack, tag)?;
        state.stack.truncate(at);
        Ok(self)
    }

    /// Starts the collection `tag` for as long as the returned guard lives (nvitop's
    /// `with collector(tag=...)`).
    ///
    /// # Errors
    ///
    /// As [`ResourceMetricCollector::activate`].
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
    pub fn reset(&self, tag: Option<&str>) -> Result<()> {
        let now = self.shared.clock.elapsed();
        let mut state = self.lock();
        let at = position(&state.stack, tag)?;
        for b in &mut state.stack[at..] {
            b.clear(now);
        }
        Ok(())
    }

    /// Takes one sample of every metric and adds it to every active tag. Does nothing when no
    /// tag is active.
    pub fn take_sample(&self) {
        if self.lock().stack.is_empty() {
            return;
        }
        let sample = self.read_sample();
        let now = self.shared.clock.elapsed();
        let mut state = self.lock();
        for b in &mut state.stack {
            for (key, value, last_only) in &sample {
                if *last_only {
                    b.last.insert(key.clone(), *value);
                } else {
                    b.stats.entry(key.clone()).or_default().add(*value);
                }
            }
            b.last_sample = Some(now);
        }
    }

    /// The mean, min and max of every metric since the innermost tag started, with
    /// `<prefix>/duration (s)` and `<prefix>/timestamp`. A sample is taken first unless the
    /// last one is less than half an interval old.
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
        let state = self.lock();
        let b = state.stack.last().ok_or(Error::NotStarted)?;
        let mut out = Metrics::new();
        for (key, s) in &b.stats {
            if let (Some(mean), Some((min, max))) = (s.mean(), s.range()) {
                out.insert(format!("{}/{key}/mean", b.prefix), mean);
                out.insert(format!("{}/{key}/min", b.prefix), min);
                out.insert(format!("{}/{key}/max", b.prefix), max);
            }
        }
        for (key, v) in &b.last {
            out.insert(format!("{}/{key}", b.prefix), *v);
        }
        out.insert(
            format!("{}/duration (s)", b.prefix),
            now.saturating_sub(b.start).as_secs_f64(),
        );
        out.insert(
            format!("{}/timestamp", b.prefix),
            self.shared.clock.unix_time(),
        );
        Ok(out)
    }

    /// Takes a sample every [`ResourceMetricCollector::interval`] on a background thread until
    /// the returned [`Sampler`] is stopped or dropped.
    ///
    /// # Errors
    ///
    /// [`Error::Spawn`] when the thread cannot be started.
    pub fn spawn_sampler(&self) -> Result<Sampler> {
        let c = self.clone();
        let every = self.shared.interval;
        let worker = Worker::spawn("gpu-metrics-sampler", move |stop| {
            let mut tick = Instant::now();
            loop {
                tick = next_tick(tick, every);
                if stop.wait_until(tick) {
                    break;
                }
                c.take_sample();
            }
        })?;
        Ok(Sampler { worker })
    }

    /// Collects in the background (nvitop's `daemonize` / `collect_in_background`): a thread
    /// with its own tags (independent of this collector's) activates `options.tag`, samples
    /// every collector interval, and every `options.interval` calls `on_collect` with the
    /// metrics of that interval, then resets the tag. It ends when `on_collect` returns
    /// `false` or the [`Daemon`] is stopped or dropped; `on_start` runs first and `on_stop`
    /// last, on the thread.
    ///
    /// # Errors
    ///
    /// [`Error::Spawn`] when the thread cannot be started.
    pub fn daemonize<F>(&self, on_collect: F, options: DaemonOptions) -> Result<Daemon>
    where
        F: FnMut(&Metrics) -> bool + Send + 'static,
    {
        let c = ResourceMetricCollector {
            shared: self.shared.clone(),
            state: Arc::new(Mutex::new(State::default())),
        };
        let every = options.interval.unwrap_or(self.shared.interval);
        let worker = Worker::spawn("gpu-metrics-daemon", move |stop| {
            run_daemon(c, every, options, on_collect, &stop);
        })?;
        Ok(Daemon { worker })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reads every metric once.
    fn read_sample(&self) -> Sample {
        let sh = &self.shared;
        let mut out: Sample = Vec::new();
        let mut put = |key: String, v: Option<f64>| {
            if let Some(v) = v.filter(|v| v.is_finite()) {
                out.push((key, v, false));
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

        let snapshots = sh.source.take_snapshots(&sh.devices);
        for d in &snapshots.devices {
            let Some(label) = sh.labels.get(&d.id) else {
                continue;
            };
            let mem = d.memory.value();
            let util = d.utilization.value();
            let mut dev = |name: &str, v: Option<f64>| put(format!("{label}/{name}"), v);
            dev("memory_used (MiB)", mem.map(|m| m.used as f64 / MIB));
            dev("memory_free (MiB)", mem.map(|m| m.free as f64 / MIB));
            dev("memory_total (MiB)", mem.map(|m| m.total as f64 / MIB));
            dev("memory_percent (%)", d.memory_percent().value().copied());
            dev("gpu_utilization (%)", util.map(|u| f64::from(u.gpu)));
            dev("memory_utilization (%)", util.map(|u| f64::from(u.memory)));
            dev("fan_speed (%)", d.fan_speed.value().map(|&v| f64::from(v)));
            dev(
                "temperature (C)",
                d.temperature.value().map(|&v| f64::from(v)),
            );
            dev(
                "power_usage (W)",
                d.power_usage.value().map(|&mw| f64::from(mw) / 1000.0),
            );
        }

        let mut ancestry = Ancestry::new(&sh.root_pids, sh.source.host().as_ref());
        for p in &snapshots.processes {
            if !ancestry.descends(p.pid, p.host.ppid) {
                continue;
            }
            let Some(label) = sh.labels.get(&p.device) else {
                continue;
            };
            process_metrics(p, label, &mut out);
        }
        out
    }
}

fn process_metrics(p: &GpuProcess, label: &str, out: &mut Sample) {
    let pid = p.pid;
    let mut put = |key: String, v: Option<f64>, last_only: bool| {
        if let Some(v) = v.filter(|v| v.is_finite()) {
            out.push((key, v, last_only));
        }
    };
    let h = &p.host;
    put(
        format!("pid:{pid}/host/cpu_percent (%)"),
        h.cpu_percent,
        false,
    );
    put(
        format!("pid:{pid}/host/host_memory (MiB)"),
        h.rss.map(|b| b as f64 / MIB),
        false,
    );
    put(
        format!("pid:{pid}/host/host_memory_percent (%)"),
        h.memory_percent,
        false,
    );
    put(
        format!("pid:{pid}/host/running_time (min)"),
        h.running_time_s.map(|s| s as f64 / 60.0),
        true,
    );
    put(
        format!("pid:{pid}/{label}/gpu_memory (MiB)"),
        p.gpu_memory.map(|b| b as f64 / MIB),
        false,
    );
    put(
        format!("pid:{pid}/{label}/gpu_memory_percent (%)"),
        p.gpu_memory_percent,
        false,
    );
    put(
        format!("pid:{pid}/{label}/gpu_memory_utilization (%)"),
        p.utilization.memory.map(f64::from),
        false,
    );
    put(
        format!("pid:{pid}/{label}/gpu_sm_utilization (%)"),
        p.utilization.sm.map(f64::from),
        false,
    );
}

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
        None if stack.is_empty() => Err(Error::NotStarted),
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

/// A background thread sampling a collector; stopped promptly and joined on
/// [`Sampler::stop`] or drop.
#[derive(Debug)]
pub struct Sampler {
    worker: Worker,
}

impl Sampler {
    /// Stops sampling now (without waiting for the interval to end) and joins the thread.
    ///
    /// # Errors
    ///
    /// [`Error::ThreadPanicked`].
    pub fn stop(mut self) -> Result<()> {
        self.worker.stop()
    }
}

type Hook = Box<dyn FnOnce(&ResourceMetricCollector) + Send>;

/// How [`ResourceMetricCollector::daemonize`] runs.
pub struct DaemonOptions {
    interval: Option<Duration>,
    tag: String,
    on_start: Option<Hook>,
    on_stop: Option<Hook>,
}

impl Default for DaemonOptions {
    fn default() -> Self {
        DaemonOptions {
            interval: None,
            tag: "metrics-daemon".into(),
            on_start: None,
            on_stop: None,
        }
    }
}

impl std::fmt::Debug for DaemonOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DaemonOptions")
            .field("interval", &self.interval)
            .field("tag", &self.tag)
            .finish_non_exhaustive()
    }
}

impl DaemonOptions {
    /// Defaults: the collector's interval, tag `metrics-daemon`, no hooks.
    pub fn new() -> DaemonOptions {
        DaemonOptions::default()
    }

    /// How often `on_collect` is called (default: the collector's interval).
    pub fn interval(mut self, interval: Duration) -> DaemonOptions {
        self.interval = Some(interval);
        self
    }

    /// The tag the metrics are collected under.
    pub fn tag(mut self, tag: impl Into<String>) -> DaemonOptions {
        self.tag = tag.into();
        self
    }

    /// Runs on the thread before the first sample.
    pub fn on_start(mut self, f: impl FnOnce(&ResourceMetricCollector) + Send + 'static) -> Self {
        self.on_start = Some(Box::new(f));
        self
    }

    /// Runs on the thread after the last sample, however the daemon ends.
    pub fn on_stop(mut self, f: impl FnOnce(&ResourceMetricCollector) + Send + 'static) -> Self {
        self.on_stop = Some(Box::new(f));
        self
    }
}

/// A collecting thread; see [`ResourceMetricCollector::daemonize`].
#[derive(Debug)]
pub struct Daemon {
    worker: Worker,
}

impl Daemon {
    /// True when the thread has ended (its callback returned `false`).
    pub fn is_finished(&self) -> bool {
        self.worker.is_finished()
    }

    /// Stops the daemon now (it does not wait for the interval to end), runs `on_stop` and
    /// joins the thread.
    ///
    /// # Errors
    ///
    /// [`Error::ThreadPanicked`] when a callback panicked.
    pub fn stop(mut self) -> Result<()> {
        self.worker.stop()
    }
}

fn run_daemon<F>(
    c: ResourceMetricCollector,
    every: Duration,
    options: DaemonOptions,
    mut on_collect: F,
    stop: &StopSignal,
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
    if c.activate(&tag).is_ok() {
        let sample_every = every.min(c.shared.interval).max(Duration::from_millis(1));
        let mut next_sample = Instant::now();
        let mut next_collect = Instant::now() + every;
        c.take_sample();
        loop {
            next_sample = next_tick(next_sample, sample_every);
            if stop.wait_until(next_sample.min(next_collect)) {
                break;
            }
            c.take_sample();
            if Instant::now() >= next_collect {
                next_collect = next_tick(next_collect, every);
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
