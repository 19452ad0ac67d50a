//! The collector over a replayed fixture on a manual clock: exact aggregates for known frames,
//! nested tags, reset, per-process metrics of the root PIDs' descendants, and the background
//! threads (sampler and daemon) that stop promptly.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gpu_backend::{Fixture, ReplayBackend};
use gpu_devices::CudaDeviceOrder;
use gpu_metrics::{DaemonOptions, Error, ManualClock, Metrics, ResourceMetricCollector};
use gpu_processes::ProcessCollector;
use serde_json::Value;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../fixtures/h100-sxm-8gpu.json"
);

/// The fixture, loaded once for all the tests of this file.
fn fixture() -> Arc<Fixture> {
    static F: std::sync::OnceLock<Arc<Fixture>> = std::sync::OnceLock::new();
    F.get_or_init(|| Arc::new(Fixture::load(FIXTURE).unwrap()))
        .clone()
}
const MIB: f64 = 1024.0 * 1024.0;

struct Setup {
    backend: Arc<ReplayBackend>,
    clock: ManualClock,
    collector: ResourceMetricCollector,
    /// The fixture as plain JSON, to compute expectations independently of the code.
    json: Value,
}

/// GPUs 3 and 1 as CUDA shows them under `CUDA_VISIBLE_DEVICES=3,1`, every GPU process.
fn setup(root_pids: &[u32]) -> Setup {
    let backend = Arc::new(ReplayBackend::new(fixture()));
    let source = Arc::new(ProcessCollector::from_replay(backend.clone()).unwrap());
    let cuda = source
        .context()
        .cuda_devices_for(Some("3,1"), CudaDeviceOrder::PciBusId);
    let clock = ManualClock::new(1_700_000_000.0);
    let collector = ResourceMetricCollector::builder(source)
        .cuda_devices(cuda)
        .root_pids(root_pids.iter().copied())
        .clock(Arc::new(clock.clone()))
        .build();
    let json = serde_json::from_str(&std::fs::read_to_string(FIXTURE).unwrap()).unwrap();
    Setup {
        backend,
        clock,
        collector,
        json,
    }
}

impl Setup {
    /// Serves `frame`, samples, and moves the clock one second on (except after the last).
    fn sample_frames(&self, frames: &[usize]) {
        for (i, &f) in frames.iter().enumerate() {
            if i > 0 {
                self.clock.advance(Duration::from_secs(1));
            }
            self.backend.set_frame(f);
            self.collector.take_sample();
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

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

fn min(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::INFINITY, f64::min)
}

fn max(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::NEG_INFINITY, f64::max)
}

fn close(got: f64, want: f64) -> bool {
    (got - want).abs() <= 1e-9 * want.abs().max(1.0)
}

fn assert_stats(m: &Metrics, key: &str, values: &[f64]) {
    for (stat, want) in [
        ("mean", mean(values)),
        ("min", min(values)),
        ("max", max(values)),
    ] {
        let k = format!("{key}/{stat}");
        let got = *m
            .get(&k)
            .unwrap_or_else(|| panic!("missing {k}; have {:?}", m.keys().collect::<Vec<_>>()));
        assert!(close(got, want), "{k}: got {got}, want {want}");
    }
}

#[test]
fn collect_gives_exact_mean_min_max_of_the_frames_sampled() {
    let s = setup(&[1]);
    s.collector.activate("train").unwrap();
    s.sample_frames(&[0, 1, 2, 3]);
    let m = s.collector.collect().unwrap();

    let frames = [0, 1, 2, 3];
    let gpu3: Vec<f64> = frames.iter().map(|&f| s.mem_used_mib(f, "3")).collect();
    let gpu1: Vec<f64> = frames.iter().map(|&f| s.mem_used_mib(f, "1")).collect();
    let cpu: Vec<f64> = frames.iter().map(|&f| s.host_cpu(f)).collect();
    // CUDA_VISIBLE_DEVICES=3,1: CUDA 0 is GPU 3, CUDA 1 is GPU 1.
    assert_stats(&m, "train/cuda:0 (gpu:3)/memory_used (MiB)", &gpu3);
    assert_stats(&m, "train/cuda:1 (gpu:1)/memory_used (MiB)", &gpu1);
    assert_stats(&m, "train/host/cpu_percent (%)", &cpu);
    assert!(
        !m.keys().any(|k| k.contains("(gpu:0)")),
        "GPU 0 is not watched"
    );
    // Sampled for three seconds of the manual clock; the timestamp is the clock's.
    assert_eq!(m["train/duration (s)"], 3.0);
    assert_eq!(m["train/timestamp"], 1_700_000_003.0);
    // Memory total never changes: its min and max agree.
    assert_eq!(
        m["train/cuda:0 (gpu:3)/memory_total (MiB)/min"],
        m["train/cuda:0 (gpu:3)/memory_total (MiB)/max"]
    );
}

#[test]
fn nested_tags_prefix_keys_and_aggregate_from_their_own_start() {
    let s = setup(&[1]);
    s.collector.activate("train").unwrap();
    s.sample_frames(&[0]);
    s.collector.activate("batch").unwrap();
    assert_eq!(s.collector.prefix().as_deref(), Some("train/batch"));
    s.clock.advance(Duration::from_secs(1));
    s.sample_frames(&[5, 6]);

    let inner = s.collector.collect().unwrap();
    let key = "train/batch/cuda:0 (gpu:3)/memory_used (MiB)";
    assert_stats(
        &inner,
        key,
        &[s.mem_used_mib(5, "3"), s.mem_used_mib(6, "3")],
    );
    assert_eq!(inner["train/batch/duration (s)"], 2.0);
    assert!(
        inner.keys().all(|k| k.starts_with("train/batch/")),
        "only the innermost tag is collected"
    );

    s.collector.deactivate(None).unwrap();
    let outer = s.collector.collect().unwrap();
    let all: Vec<f64> = [0, 5, 6].iter().map(|&f| s.mem_used_mib(f, "3")).collect();
    assert_stats(&outer, "train/cuda:0 (gpu:3)/memory_used (MiB)", &all);
    assert_eq!(outer["train/duration (s)"], 2.0);

    s.collector.deactivate(Some("train")).unwrap();
    assert!(matches!(s.collector.collect(), Err(Error::NotStarted)));
}

#[test]
fn deactivating_an_outer_tag_removes_the_inner_ones_and_tags_are_checked() {
    let s = setup(&[1]);
    s.collector.activate("a").unwrap();
    s.collector.activate("b").unwrap();
    assert!(matches!(
        s.collector.activate("a"),
        Err(Error::TagActive(_))
    ));
    assert!(matches!(
        s.collector.activate("x/y"),
        Err(Error::InvalidTag(_))
    ));
    assert!(matches!(
        s.collector.deactivate(Some("nope")),
        Err(Error::NoSuchTag(_))
    ));
    s.collector.deactivate(Some("a")).unwrap();
    assert_eq!(s.collector.prefix(), None);
    // A tag used before can start again, at the top level.
    s.collector.activate("b").unwrap();
    assert_eq!(s.collector.prefix().as_deref(), Some("b"));
}

#[test]
fn reset_starts_the_tag_and_its_inner_tags_over() {
    let s = setup(&[1]);
    s.collector.activate("train").unwrap();
    s.sample_frames(&[0, 1]);
    s.collector.activate("batch").unwrap();
    s.clock.advance(Duration::from_secs(1));
    s.sample_frames(&[2]);

    s.collector.reset(Some("train")).unwrap();
    s.clock.advance(Duration::from_secs(1));
    s.sample_frames(&[9, 10]);
    let key = "cuda:1 (gpu:1)/memory_used (MiB)";
    let want = [s.mem_used_mib(9, "1"), s.mem_used_mib(10, "1")];
    let inner = s.collector.collect().unwrap();
    assert_stats(&inner, &format!("train/batch/{key}"), &want);
    assert_eq!(inner["train/batch/duration (s)"], 2.0);
    s.collector.deactivate(None).unwrap();
    let outer = s.collector.collect().unwrap();
    assert_stats(&outer, &format!("train/{key}"), &want);
    assert_eq!(outer["train/duration (s)"], 2.0);

    // Reset of the innermost tag leaves the outer one alone.
    s.collector.activate("eval").unwrap();
    s.clock.advance(Duration::from_secs(1));
    s.sample_frames(&[11]);
    s.collector.reset(None).unwrap();
    s.collector.deactivate(None).unwrap();
    let outer = s.collector.collect().unwrap();
    let want = [9, 10, 11].map(|f| s.mem_used_mib(f, "1"));
    assert_stats(&outer, &format!("train/{key}"), &want);
}

#[test]
fn the_scope_guard_deactivates_its_tag() {
    let s = setup(&[1]);
    {
        let guard = s.collector.scope("train").unwrap();
        assert_eq!(guard.collector().prefix().as_deref(), Some("train"));
        let _inner = s.collector.scope("step").unwrap();
        assert_eq!(s.collector.prefix().as_deref(), Some("train/step"));
    }
    assert_eq!(s.collector.prefix(), None);
}

#[test]
fn only_descendants_of_the_root_pids_are_reported() {
    // PID 22000 is the parent of the eight python3 workers in the fixture; the tritonserver
    // processes (parent 1) do not descend from it.
    let s = setup(&[22000]);
    let host = &s.json["host"]["processes"];
    let children: Vec<u64> = host
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, p)| p["ppid"] == 22000)
        .map(|(pid, _)| pid.parse().unwrap())
        .collect();
    assert!(!children.is_empty());
    s.collector.activate("job").unwrap();
    s.sample_frames(&[0]);
    let m = s.collector.collect().unwrap();
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
    assert!(m.contains_key(&format!("job/pid:{pid}/host/running_time (min)")));
    assert!(m
        .keys()
        .any(|k| k.starts_with(&format!("job/pid:{pid}/cuda:"))
            && k.ends_with("/gpu_memory (MiB)/mean")));

    // Root PID 1: every GPU process on the watched devices, the tritonservers too.
    let all = setup(&[1]);
    all.collector.activate("all").unwrap();
    all.sample_frames(&[0]);
    let m = all.collector.collect().unwrap();
    assert!(m.keys().any(|k| k.starts_with("all/pid:2841/")
        || k.starts_with("all/pid:2844/")
        || k.starts_with("all/pid:2842/")));
}

#[test]
fn the_daemon_calls_back_each_interval_until_told_to_stop_with_hooks() {
    let s = setup(&[1]);
    let calls = Arc::new(AtomicUsize::new(0));
    let seen: Arc<Mutex<Vec<Metrics>>> = Arc::default();
    let started = Arc::new(AtomicUsize::new(0));
    let stopped = Arc::new(AtomicUsize::new(0));
    let (c, v, st, sp) = (
        calls.clone(),
        seen.clone(),
        started.clone(),
        stopped.clone(),
    );
    let daemon = s
        .collector
        .daemonize(
            move |m| {
                v.lock().unwrap().push(m.clone());
                c.fetch_add(1, Ordering::SeqCst) + 1 < 3
            },
            DaemonOptions::new()
                .interval(Duration::from_millis(20))
                .tag("bg")
                .on_start(move |_| {
                    st.fetch_add(1, Ordering::SeqCst);
                })
                .on_stop(move |_| {
                    sp.fetch_add(1, Ordering::SeqCst);
                }),
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
    assert_eq!(started.load(Ordering::SeqCst), 1);
    assert_eq!(stopped.load(Ordering::SeqCst), 1);
    let seen = seen.lock().unwrap();
    assert!(seen[0].contains_key("bg/cuda:0 (gpu:3)/memory_used (MiB)/mean"));
    assert!(seen[0].contains_key("bg/duration (s)"));
    // The daemon's tags are its own: the caller's collector has none.
    assert_eq!(s.collector.prefix(), None);
}

#[test]
fn stopping_the_daemon_is_prompt_and_runs_on_stop() {
    let s = setup(&[1]);
    let stopped = Arc::new(AtomicUsize::new(0));
    let sp = stopped.clone();
    let daemon = s
        .collector
        .daemonize(
            |_| true,
            DaemonOptions::new()
                .interval(Duration::from_secs(3600))
                .on_stop(move |_| {
                    sp.fetch_add(1, Ordering::SeqCst);
                }),
        )
        .unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let asked = Instant::now();
    daemon.stop().unwrap();
    // Far less than the hour-long interval: the thread wakes up for the stop.
    assert!(asked.elapsed() < Duration::from_secs(30));
    assert_eq!(stopped.load(Ordering::SeqCst), 1, "joined after on_stop");
}

#[test]
fn the_background_sampler_samples_and_stops_within_an_interval() {
    let s = setup(&[1]);
    let c = ResourceMetricCollector::builder(Arc::new(
        ProcessCollector::from_replay(s.backend.clone()).unwrap(),
    ))
    .cuda_devices(
        ProcessCollector::from_replay(s.backend.clone())
            .unwrap()
            .context()
            .cuda_devices_for(Some("3"), CudaDeviceOrder::PciBusId),
    )
    .root_pids([1])
    .interval(Duration::from_millis(10))
    .clock(Arc::new(s.clock.clone()))
    .build();
    c.activate("bg").unwrap();
    s.backend.set_frame(0);
    c.take_sample();
    let sampler = c.spawn_sampler().unwrap();
    // Only the background thread samples now: the manual clock stands still, so collect()
    // finds the last sample fresh and takes none itself.
    s.backend.set_frame(20);
    let want = s.mem_used_mib(20, "3");
    let key = "bg/cuda:0 (gpu:3)/memory_used (MiB)/max";
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut got = 0.0;
    while Instant::now() < deadline {
        got = c.collect().unwrap()[key];
        if got == want.max(s.mem_used_mib(0, "3")) {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(got, want.max(s.mem_used_mib(0, "3")));
    assert_ne!(s.mem_used_mib(0, "3"), want, "the frames differ");

    // A sampler with an hour-long interval stops at once.
    let slow = ResourceMetricCollector::builder(Arc::new(
        ProcessCollector::from_replay(s.backend.clone()).unwrap(),
    ))
    .interval(Duration::from_secs(3600))
    .build();
    let sampler2 = slow.spawn_sampler().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let asked = Instant::now();
    sampler2.stop().unwrap();
    sampler.stop().unwrap();
    assert!(asked.elapsed() < Duration::from_secs(30));
}
