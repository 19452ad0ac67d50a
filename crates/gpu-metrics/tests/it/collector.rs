//! The collector over a replayed fixture on a manual clock: nvitop's examples as they read
//! (background sampling from activation, `collect()` after 5 s, reset, nested tags,
//! `collect_in_background`), the time-weighted mean computed by hand, nvitop's keys (`gpu:M`,
//! `cuda:N (gpu:M)`, MIG devices), the metric tables, per-process metrics of the root PIDs'
//! descendants, and background threads that stop promptly.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gpu_backend::{Fixture, ReplayBackend};
use gpu_devices::CudaDeviceOrder;
use gpu_metrics::{
    collect_in_background, DaemonOptions, Error, ManualClock, Metrics, ResourceMetricCollector,
};
use gpu_processes::ProcessCollector;
use serde_json::Value;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../fixtures/h100-sxm-8gpu.json"
);
const MIG_FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/h100-mig.json");

type Cache = Mutex<Vec<(&'static str, Arc<Fixture>)>>;

/// A fixture, loaded once for all the tests of this file.
fn fixture(path: &'static str) -> Arc<Fixture> {
    static F: std::sync::OnceLock<Cache> = std::sync::OnceLock::new();
    let mut cache = F.get_or_init(Mutex::default).lock().unwrap();
    if let Some((_, f)) = cache.iter().find(|(p, _)| *p == path) {
        return f.clone();
    }
    let f = Arc::new(Fixture::load(path).unwrap());
    cache.push((path, f.clone()));
    f
}
const MIB: f64 = 1024.0 * 1024.0;
const SECOND: Duration = Duration::from_secs(1);

struct Setup {
    backend: Arc<ReplayBackend>,
    source: Arc<ProcessCollector>,
    clock: ManualClock,
    /// The fixture as plain JSON, to compute expectations independently of the code.
    json: Value,
}

fn setup_from(path: &'static str) -> Setup {
    let backend = Arc::new(ReplayBackend::new(fixture(path)));
    let source = Arc::new(ProcessCollector::from_replay(backend.clone()).unwrap());
    let json = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    Setup {
        backend,
        source,
        clock: ManualClock::new(1_700_000_000.0),
        json,
    }
}

/// The 8-GPU fixture with GPUs 3 and 1 as CUDA shows them under `CUDA_VISIBLE_DEVICES=3,1`
/// (nvitop's `ResourceMetricCollector(Device.cuda.all())`), every GPU process, one-second
/// interval, on the manual clock.
fn setup(root_pids: &[u32]) -> (Setup, ResourceMetricCollector) {
    let s = setup_from(FIXTURE);
    let cuda = s
        .source
        .context()
        .cuda_devices_for(Some("3,1"), CudaDeviceOrder::PciBusId);
    let c = ResourceMetricCollector::builder(s.source.clone())
        .cuda_devices(cuda)
        .root_pids(root_pids.iter().copied())
        .clock(Arc::new(s.clock.clone()))
        .build();
    (s, c)
}

impl Setup {
    /// Lets the clock run one second per frame: frame `f` is served while the clock moves to
    /// the next second, so the background sample taken then reads it. Threads just started
    /// (activation's first sample) finish before the frame changes.
    fn run_frames(&self, frames: impl IntoIterator<Item = usize>) {
        for f in frames {
            self.clock.settle();
            self.backend.set_frame(f);
            self.clock.advance(SECOND);
        }
    }

    fn mem_used_mib(&self, frame: usize, gpu: &str) -> f64 {
        self.json["frames"][frame]["devices"][gpu]["memory_info"]["ok"]["used"]
            .as_f64()
            .unwrap()
            / MIB
    }

    fn host_cpu(&self, frame: usize) -> f64 {
        self.json["frames"][frame]["host"]["cpu_percent"]
            .as_f64()
            .unwrap()
    }
}

/// The time-weighted mean over `[start, end]` of values taken at the given times, computed the
/// plain way: the first value holds back to `start`, straight lines between samples, the last
/// value holds up to `end`.
fn trapezoid_mean(points: &[(f64, f64)], start: f64, end: f64) -> f64 {
    let mut area = points[0].1 * (points[0].0 - start);
    for w in points.windows(2) {
        let ((t0, v0), (t1, v1)) = (w[0], w[1]);
        area += (v0 + v1) / 2.0 * (t1 - t0);
    }
    let (tn, vn) = points[points.len() - 1];
    area += vn * (end - tn);
    area / (end - start)
}

fn close(got: f64, want: f64) -> bool {
    (got - want).abs() <= 1e-9 * want.abs().max(1.0)
}

fn get(m: &Metrics, k: &str) -> f64 {
    *m.get(k)
        .unwrap_or_else(|| panic!("missing {k}; have {:?}", m.keys().collect::<Vec<_>>()))
}

/// Mean (time-weighted over `[start, end]`), min, max and last of `key` sampled once a second
/// from `first_t`.
fn assert_series(m: &Metrics, key: &str, first_t: f64, values: &[f64], start: f64, end: f64) {
    let points: Vec<(f64, f64)> = values
        .iter()
        .enumerate()
        .map(|(i, &v)| (first_t + i as f64, v))
        .collect();
    let want = [
        ("mean", trapezoid_mean(&points, start, end)),
        ("min", values.iter().copied().fold(f64::INFINITY, f64::min)),
        (
            "max",
            values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        ),
        ("last", values[values.len() - 1]),
    ];
    for (stat, want) in want {
        let k = format!("{key}/{stat}");
        let got = get(m, &k);
        assert!(close(got, want), "{k}: got {got}, want {want}");
    }
}

/// nvitop's `clear()` example as it reads, on the manual clock:
///
/// ```python
/// with collector(tag='train'):
///     time.sleep(5.0); collector.collect()  # metrics within the 5.0s interval
///     time.sleep(5.0); collector.collect()  # metrics within the cumulative 10.0s interval
///     collector.reset(); time.sleep(5.0); collector.collect()  # within the 5.0s interval
///     with collector(tag='batch'):
///         collector.reset(tag='train')      # reset both 'train' and 'train/batch'
/// ```
///
/// Regression: activation took no samples in the background, so the first `collect()` gave the
/// mean, min and max of one sample; and the mean was the plain mean of the samples.
#[test]
fn the_seed_reset_example_collects_the_background_samples_of_each_window() {
    let (s, collector) = setup(&[1]);
    let gpu3 = "cuda:0 (gpu:3)/memory_used (MiB)";
    let mem = |frames: std::ops::RangeInclusive<usize>| -> Vec<f64> {
        frames.map(|f| s.mem_used_mib(f, "3")).collect()
    };
    // GPU 3's memory series under `tag`: the samples of `frames` (frame n taken at n s), over
    // the window from `start` to the last frame.
    let assert_gpu3 = |m: &Metrics, tag: &str, frames: std::ops::RangeInclusive<usize>, start| {
        let (first, last) = (*frames.start() as f64, *frames.end() as f64);
        assert_series(
            m,
            &format!("{tag}/{gpu3}"),
            first,
            &mem(frames),
            start,
            last,
        );
    };
    s.backend.set_frame(0);
    let train = collector.scope("train").unwrap();
    // Samples at 0 s (activation), 1 s, ... 5 s read frames 0..=5.
    s.run_frames(1..=5);
    let m = train.collector().collect().unwrap();
    assert_gpu3(&m, "train", 0..=5, 0.0);
    let cpu: Vec<f64> = (0..=5).map(|f| s.host_cpu(f)).collect();
    assert_series(&m, "train/host/cpu_percent (%)", 0.0, &cpu, 0.0, 5.0);
    assert_eq!(m["train/duration (s)"], 5.0);
    assert_eq!(m["train/timestamp"], 1_700_000_005.0);
    assert_eq!(m["train/last_timestamp"], 1_700_000_005.0);
    let distinct: std::collections::BTreeSet<u64> =
        mem(0..=5).iter().map(|v| v.to_bits()).collect();
    assert!(distinct.len() > 2, "the frames differ, so the window shows");

    // Five seconds more: the cumulative ten seconds.
    s.run_frames(6..=10);
    let m = collector.collect().unwrap();
    assert_gpu3(&m, "train", 0..=10, 0.0);
    assert_eq!(m["train/duration (s)"], 10.0);

    // Reset, five seconds: only those. The first sample after the reset (at 11 s) holds back
    // to the reset (10 s).
    collector.reset(None).unwrap();
    s.run_frames(11..=15);
    let m = collector.collect().unwrap();
    assert_gpu3(&m, "train", 11..=15, 10.0);
    assert_eq!(m["train/duration (s)"], 5.0);

    // A nested tag; resetting the outer one resets both.
    let batch = collector.scope("batch").unwrap();
    s.run_frames(16..=17);
    collector.reset(Some("train")).unwrap();
    s.run_frames(18..=19);
    let inner = collector.collect().unwrap();
    assert_gpu3(&inner, "train/batch", 18..=19, 17.0);
    assert!(inner.keys().all(|k| k.starts_with("train/batch/")));
    drop(batch);
    let outer = collector.collect().unwrap();
    assert_gpu3(&outer, "train", 18..=19, 17.0);
    assert_eq!(outer["train/duration (s)"], 2.0);
}

/// nvitop's time-weighted mean on samples at uneven times (0 s, 1 s, 4 s), collected at 5 s:
/// `((v0+v1)/2·1 + (v1+v2)/2·3 + v2·1) / 5`, which differs from the plain mean of the samples.
#[test]
fn the_mean_of_unevenly_spaced_samples_is_the_trapezoid_value() {
    let s = setup_from(FIXTURE);
    let c = ResourceMetricCollector::builder(s.source.clone())
        .background_sampling(false)
        .interval(Duration::from_secs(10))
        .clock(Arc::new(s.clock.clone()))
        .build();
    c.activate("uneven").unwrap();
    for (frame, at) in [(0, 0), (8, 1), (16, 4)] {
        s.clock.set(Duration::from_secs(at));
        s.backend.set_frame(frame);
        c.take_sample();
    }
    s.clock.set(Duration::from_secs(5));
    let m = c.collect().unwrap();
    let [v0, v1, v2] = [0, 8, 16].map(|f| s.mem_used_mib(f, "0"));
    let want = ((v0 + v1) / 2.0 + (v1 + v2) / 2.0 * 3.0 + v2) / 5.0;
    let got = get(&m, "uneven/gpu:0/memory_used (MiB)/mean");
    assert!(close(got, want), "got {got}, want {want}");
    assert!(
        !close(got, (v0 + v1 + v2) / 3.0),
        "the frames make the two means differ"
    );
}

/// Regression: every device was labelled `cuda:N (gpu:M)` when CUDA could see it, so keys
/// changed with `CUDA_VISIBLE_DEVICES`; nvitop uses `gpu:M` unless given CUDA devices.
#[test]
fn devices_are_named_gpu_m_unless_given_as_cuda_devices() {
    let s = setup_from(FIXTURE);
    let ctx = s.source.context();
    let plain = ResourceMetricCollector::builder(s.source.clone())
        .devices(vec![ctx.device(3).unwrap(), ctx.device(1).unwrap()])
        .background_sampling(false)
        .clock(Arc::new(s.clock.clone()))
        .build();
    plain.activate("t").unwrap();
    let m = plain.collect().unwrap();
    assert!(m.contains_key("t/gpu:3/memory_used (MiB)/mean"));
    assert!(m.contains_key("t/gpu:1/memory_used (MiB)/mean"));
    assert!(!m.keys().any(|k| k.contains("cuda:")), "{m:?}");
    assert!(
        !m.keys().any(|k| k.contains("gpu:0/")),
        "GPU 0 is not watched"
    );

    let (_, cuda) = setup(&[1]);
    cuda.activate("t").unwrap();
    let m = cuda.collect().unwrap();
    assert!(m.contains_key("t/cuda:0 (gpu:3)/memory_used (MiB)/mean"));
    assert!(m.contains_key("t/cuda:1 (gpu:1)/memory_used (MiB)/mean"));
}

/// Regression: MIG devices were left out and their processes counted on the parent. As
/// nvitop: a GPU in MIG mode brings its MIG devices (`gpu:(0, 1)`), and processes are read from
/// the leaf devices.
#[test]
fn mig_devices_are_collected_and_carry_their_processes() {
    let s = setup_from(MIG_FIXTURE);
    s.backend.set_frame(20);
    let c = ResourceMetricCollector::builder(s.source.clone())
        .root_pids([1])
        .background_sampling(false)
        .clock(Arc::new(s.clock.clone()))
        .build();
    let ids = |d: &[gpu_devices::Device]| d.iter().map(|d| d.id().to_string()).collect::<Vec<_>>();
    assert_eq!(ids(c.devices()), ["0"]);
    assert_eq!(ids(c.all_devices()), ["0", "0:0", "0:1", "0:2", "0:3"]);
    assert_eq!(ids(c.leaf_devices()), ["0:0", "0:1", "0:2", "0:3"]);

    c.activate("mig").unwrap();
    let m = c.collect().unwrap();
    let used = |dev: &str| {
        s.json["frames"][20]["devices"][dev]["memory_info"]["ok"]["used"]
            .as_f64()
            .unwrap()
            / MIB
    };
    assert_eq!(m["mig/gpu:0/memory_used (MiB)/mean"], used("0"));
    assert_eq!(m["mig/gpu:(0, 1)/memory_used (MiB)/mean"], used("0:1"));
    // PID 21230 (a child of PID 1) runs on MIG device 1, GPU instance 3.
    assert_eq!(
        m["mig/pid:21230/gpu:(0, 1)/gpu_memory (MiB)/mean"],
        3334471680.0 / MIB
    );
    assert!(
        !m.keys().any(|k| k.contains("/gpu:0/gpu_memory")),
        "processes are not counted on the parent: {:?}",
        m.keys().filter(|k| k.contains("pid:")).collect::<Vec<_>>()
    );
}

/// The public tables name exactly the metrics emitted: every device and process key is
/// `<scope>/<name>` for a name in the tables, and a device and a process with every fact known
/// show every name.
#[test]
fn the_metric_tables_name_exactly_what_is_emitted() {
    let (s, c) = setup(&[1]);
    s.backend.set_frame(3);
    c.activate("t").unwrap();
    let m = c.collect().unwrap();
    let device_names: Vec<&str> = ResourceMetricCollector::DEVICE_METRICS
        .iter()
        .map(|d| d.name)
        .collect();
    assert_eq!(
        device_names,
        [
            "memory_used (MiB)",
            "memory_free (MiB)",
            "memory_total (MiB)",
            "memory_percent (%)",
            "gpu_utilization (%)",
            "memory_utilization (%)",
            "fan_speed (%)",
            "temperature (C)",
            "power_usage (W)",
        ]
    );
    let mut seen_device = std::collections::BTreeSet::new();
    let mut seen_process = std::collections::BTreeSet::new();
    for key in m.keys() {
        let rest = key.strip_prefix("t/").unwrap();
        if let Some(d) = rest.strip_prefix("cuda:0 (gpu:3)/") {
            let name = d.rsplit_once('/').unwrap().0;
            assert!(device_names.contains(&name), "{key}");
            seen_device.insert(name.to_string());
        } else if rest.starts_with("pid:") {
            let (_, tail) = rest.split_once('/').unwrap();
            let (scope, tail) = if let Some(t) = tail.strip_prefix("host/") {
                (Some("host"), t)
            } else {
                (None, tail.split_once(")/").unwrap().1)
            };
            let name = if tail == "running_time (min)" {
                tail
            } else {
                tail.rsplit_once('/').unwrap().0
            };
            assert!(
                ResourceMetricCollector::PROCESS_METRICS
                    .iter()
                    .any(|p| p.scope == scope && p.name == name),
                "{key}"
            );
            seen_process.insert(name.to_string());
        }
    }
    // An H100 has no fan: the other eight device metrics show.
    assert_eq!(seen_device.len(), device_names.len() - 1, "{seen_device:?}");
    assert!(!seen_device.contains("fan_speed (%)"));
    assert_eq!(
        seen_process.len(),
        ResourceMetricCollector::PROCESS_METRICS.len(),
        "{seen_process:?}"
    );
    let power = ResourceMetricCollector::DEVICE_METRICS[8];
    assert_eq!((power.attribute, power.unit), ("power_usage", 1000.0));
    let mw = s.json["frames"][3]["devices"]["3"]["power_usage"]["ok"]
        .as_f64()
        .unwrap();
    assert_eq!(m["t/cuda:0 (gpu:3)/power_usage (W)/max"], mw / 1000.0);
}

/// nvitop's `activate` example as it reads:
///
/// ```python
/// collector.activate(tag='train')  # key prefix -> 'train'
/// collector.activate(tag='batch')  # key prefix -> 'train/batch'
/// collector.deactivate()           # key prefix -> 'train'
/// collector.deactivate()           # the collector has been stopped
/// collector.activate(tag='test')   # key prefix -> 'test'
/// ```
#[test]
fn the_seed_activate_example_gives_its_prefixes() {
    let (s, c) = setup(&[1]);
    c.activate("train").unwrap();
    assert_eq!(c.prefix().as_deref(), Some("train"));
    c.activate("batch").unwrap();
    assert_eq!(c.prefix().as_deref(), Some("train/batch"));
    c.deactivate(None).unwrap();
    assert_eq!(c.prefix().as_deref(), Some("train"));
    c.deactivate(None).unwrap();
    assert_eq!(c.prefix(), None);
    assert!(matches!(c.collect(), Err(Error::NotStarted)));
    // Stopping or resetting a stopped collector does nothing, as nvitop's.
    c.deactivate(None).unwrap();
    c.reset(None).unwrap();
    c.activate("test").unwrap();
    assert_eq!(c.prefix().as_deref(), Some("test"));
    s.clock.settle();
    assert!(c
        .collect()
        .unwrap()
        .contains_key("test/cuda:0 (gpu:3)/memory_used (MiB)/mean"));
}

#[test]
fn deactivating_an_outer_tag_removes_the_inner_ones_and_tags_are_checked() {
    let (s, c) = setup(&[1]);
    c.activate("a").unwrap();
    c.activate("b").unwrap();
    assert!(matches!(c.activate("a"), Err(Error::TagActive(_))));
    assert!(matches!(c.activate("x/y"), Err(Error::InvalidTag(_))));
    assert!(matches!(
        c.deactivate(Some("nope")),
        Err(Error::NoSuchTag(_))
    ));
    c.deactivate(Some("a")).unwrap();
    assert_eq!(c.prefix(), None);
    assert!(matches!(c.collect(), Err(Error::NotStarted)));
    // A tag used before can start again, at the top level.
    c.activate("b").unwrap();
    assert_eq!(c.prefix().as_deref(), Some("b"));
    s.clock.settle();
}

#[test]
fn the_scope_guard_deactivates_its_tag() {
    let (_, c) = setup(&[1]);
    {
        let guard = c.scope("train").unwrap();
        assert_eq!(guard.collector().prefix().as_deref(), Some("train"));
        let _inner = c.scope("step").unwrap();
        assert_eq!(c.prefix().as_deref(), Some("train/step"));
    }
    assert_eq!(c.prefix(), None);
}

/// Sampling runs while a tag is active, and stops with the last one: the backend is asked
/// nothing once the clock moves on with no tag.
#[test]
fn background_sampling_stops_when_the_last_tag_is_deactivated() {
    let (s, c) = setup(&[1]);
    s.backend.count_calls(true);
    c.activate("a").unwrap();
    c.activate("b").unwrap();
    s.run_frames([1, 2]);
    c.deactivate(Some("b")).unwrap();
    s.run_frames([3]);
    assert!(s.backend.take_call_counts().total() > 0);
    // Three samples so far (0 s, 1 s, 2 s) and one more with the outer tag (3 s).
    let m = c.collect().unwrap();
    assert_eq!(m["a/duration (s)"], 3.0);
    c.deactivate(None).unwrap();
    s.backend.take_call_counts();
    s.run_frames([4, 5, 6]);
    assert_eq!(s.backend.take_call_counts().total(), 0);
    // And it starts again with a new tag.
    c.activate("again").unwrap();
    s.clock.settle();
    assert!(s.backend.take_call_counts().total() > 0);
}

#[test]
fn only_descendants_of_the_root_pids_are_reported() {
    // PID 22000 is the parent of the eight python3 workers in the fixture; the tritonserver
    // processes (parent 1) do not descend from it.
    let (s, c) = setup(&[22000]);
    let host = &s.json["host"]["processes"];
    let children: Vec<u64> = host
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, p)| p["ppid"] == 22000)
        .map(|(pid, _)| pid.parse().unwrap())
        .collect();
    assert!(!children.is_empty());
    c.activate("job").unwrap();
    let m = c.collect().unwrap();
    let pids: std::collections::BTreeSet<u64> = m
        .keys()
        .filter_map(|k| k.strip_prefix("job/pid:"))
        .filter_map(|k| k.split('/').next()?.parse().ok())
        .collect();
    assert!(!pids.is_empty(), "some workers are on GPUs 3 and 1");
    assert!(
        pids.iter().all(|p| children.contains(p)),
        "{pids:?} not all children of 22000"
    );
    assert!(!m.keys().any(|k| k.starts_with("job/pid:2841/")));

    // Per-process keys in nvitop's form, with the values of the fixture.
    let pid = *pids.iter().next().unwrap();
    let rss = s.json["frames"][0]["host"]["processes"][pid.to_string()]["rss"]
        .as_f64()
        .unwrap();
    assert_eq!(
        m[&format!("job/pid:{pid}/host/host_memory (MiB)/mean")],
        rss / MIB
    );
    // The running time is one value, with no mean/min/max.
    assert!(m.contains_key(&format!("job/pid:{pid}/host/running_time (min)")));
    assert!(!m.contains_key(&format!("job/pid:{pid}/host/running_time (min)/mean")));
    assert!(m
        .keys()
        .any(|k| k.starts_with(&format!("job/pid:{pid}/cuda:"))
            && k.ends_with("/gpu_memory (MiB)/mean")));

    // Root PID 1: every GPU process on the watched devices, the tritonservers too.
    let (_, all) = setup(&[1]);
    all.activate("all").unwrap();
    let m = all.collect().unwrap();
    assert!(m.keys().any(|k| k.starts_with("all/pid:2841/")
        || k.starts_with("all/pid:2844/")
        || k.starts_with("all/pid:2842/")));
}

/// nvitop's `collect_in_background` example, on the manual clock: every 5 s, `on_collect`
/// logs that interval's mean/min/max; once the logger is closed by the user it returns false,
/// the daemon ends and `on_stop` (called once) would close it.
#[test]
fn the_seed_collect_in_background_example_logs_each_five_second_window() {
    let (s, collector) = setup(&[1]);
    let logged: Arc<Mutex<Vec<Metrics>>> = Arc::default();
    let closed = Arc::new(AtomicUsize::new(0));
    let stops = Arc::new(AtomicUsize::new(0));
    let (log, is_closed, stopped) = (logged.clone(), closed.clone(), stops.clone());
    s.backend.set_frame(0);
    let daemon = collect_in_background(
        move |metrics| {
            if is_closed.load(Ordering::SeqCst) > 0 {
                return false;
            }
            log.lock().unwrap().push(metrics.clone());
            true
        },
        Some(&collector),
        DaemonOptions::new()
            .interval(Duration::from_secs(5))
            .on_stop(move |_| {
                stopped.fetch_add(1, Ordering::SeqCst);
            }),
    )
    .unwrap();
    assert!(daemon.is_started());
    s.clock.settle();
    s.run_frames(1..=10);
    let key = "metrics-daemon/cuda:0 (gpu:3)/memory_used (MiB)";
    {
        let logged = logged.lock().unwrap();
        assert_eq!(logged.len(), 2, "called at 5 s and 10 s");
        let mem: Vec<f64> = (0..=10).map(|f| s.mem_used_mib(f, "3")).collect();
        assert_series(&logged[0], key, 0.0, &mem[0..=5], 0.0, 5.0);
        assert_eq!(logged[0]["metrics-daemon/duration (s)"], 5.0);
        // The second window starts over at 5 s: samples 6..=10 s.
        assert_series(&logged[1], key, 6.0, &mem[6..=10], 5.0, 10.0);
        assert_eq!(logged[1]["metrics-daemon/duration (s)"], 5.0);
    }
    // The daemon's tags are its own: the caller's collector has none.
    assert_eq!(collector.prefix(), None);
    assert_eq!(stops.load(Ordering::SeqCst), 0);

    closed.store(1, Ordering::SeqCst);
    s.run_frames(11..=15);
    assert_eq!(logged.lock().unwrap().len(), 2);
    daemon.stop().unwrap();
    assert_eq!(stops.load(Ordering::SeqCst), 1, "on_stop once, at the end");
}

/// `start(false)` returns a daemon that does nothing until started, as nvitop's `start=False`.
#[test]
fn a_daemon_made_with_start_false_runs_only_once_started() {
    let (s, collector) = setup(&[1]);
    let calls = Arc::new(AtomicUsize::new(0));
    let started = Arc::new(AtomicUsize::new(0));
    let (c, st) = (calls.clone(), started.clone());
    let mut daemon = collector
        .daemonize(
            move |_| {
                c.fetch_add(1, Ordering::SeqCst);
                true
            },
            DaemonOptions::new()
                .tag("bg")
                .start(false)
                .on_start(move |_| {
                    st.fetch_add(1, Ordering::SeqCst);
                }),
        )
        .unwrap();
    s.run_frames(1..=3);
    assert!(!daemon.is_started());
    assert_eq!(
        (calls.load(Ordering::SeqCst), started.load(Ordering::SeqCst)),
        (0, 0)
    );
    daemon.start().unwrap();
    s.clock.settle();
    assert_eq!(started.load(Ordering::SeqCst), 1);
    s.run_frames(4..=6);
    assert_eq!(calls.load(Ordering::SeqCst), 3, "one call per second");
    daemon.stop().unwrap();
}

#[test]
fn the_daemon_calls_back_until_told_to_stop_on_the_system_clock() {
    let s = setup_from(FIXTURE);
    let collector = ResourceMetricCollector::builder(s.source.clone())
        .root_pids([1])
        .interval(Duration::from_millis(10))
        .build();
    let calls = Arc::new(AtomicUsize::new(0));
    let seen: Arc<Mutex<Vec<Metrics>>> = Arc::default();
    let (c, v) = (calls.clone(), seen.clone());
    let daemon = collector
        .daemonize(
            move |m| {
                v.lock().unwrap().push(m.clone());
                c.fetch_add(1, Ordering::SeqCst) + 1 < 3
            },
            DaemonOptions::new()
                .interval(Duration::from_millis(20))
                .tag("bg"),
        )
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !daemon.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        daemon.is_finished(),
        "the callback's `false` ends the daemon"
    );
    daemon.stop().unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    let seen = seen.lock().unwrap();
    assert!(seen[0].contains_key("bg/gpu:3/memory_used (MiB)/mean"));
    assert!(seen[0].contains_key("bg/duration (s)"));
}

#[test]
fn stopping_background_threads_is_prompt_with_an_hour_long_interval() {
    let s = setup_from(FIXTURE);
    let stopped = Arc::new(AtomicUsize::new(0));
    let sp = stopped.clone();
    let slow = ResourceMetricCollector::builder(s.source.clone())
        .interval(Duration::from_secs(3600))
        .build();
    let daemon = slow
        .daemonize(
            |_| true,
            DaemonOptions::new().on_stop(move |_| {
                sp.fetch_add(1, Ordering::SeqCst);
            }),
        )
        .unwrap();
    let scope = slow.scope("hour").unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let asked = Instant::now();
    daemon.stop().unwrap();
    // Deactivating the last tag stops and joins the sampler.
    drop(scope);
    // Far less than the hour-long interval: the threads wake up for the stop.
    assert!(asked.elapsed() < Duration::from_secs(30));
    assert_eq!(stopped.load(Ordering::SeqCst), 1, "joined after on_stop");
}
