//! Per-process utilization over the real H100 recording (`fixtures/h100-real.json`), replayed
//! on a manual clock one frame per refresh (the recording's 1 s interval): PID 512, a matrix
//! product whose samples advance every second (frames 12-40), and PID 541, a light process
//! whose newest sample stood still for up to 7 s beside it (frames 19-40), then alone (41-55).
//! Live `gpuscope top` showed SM% N/A for PID 541 on three real GPUs: the tracker kept one
//! "newest seen" timestamp per device, so the slower process's samples always looked old.
//!
//! Every expected figure is read from the recording itself, and from `nvidia-smi pmon`'s
//! output taken in the same session (`fixtures/h100-real/nvidia-smi-pmon.load.txt`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use gpu_backend::fixture::{HostFrame, HostProcessFacts, HostProcessSample};
use gpu_backend::host::{HostMachine, HostSource, ReplayHost};
use gpu_backend::{
    DeviceId, Fixture, NotSupportedBase, ProcessInfo, ProcessUtilizationSample, ReplayBackend,
    ReplayClock, Result,
};
use gpu_devices::Context;
use gpu_processes::{ProcessCollector, ProcessUtilization, SAMPLE_MAX_AGE};
use serde_json::Value;

const MATMUL: u32 = 512;
const HOG: u32 = 541;

fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn recording() -> (Fixture, Value) {
    let path = root().join("fixtures/h100-real.json");
    let fixture = Fixture::load(&path).unwrap();
    let json = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    (fixture, json)
}

/// What one refresh showed of a process: its utilization, and the host's "now" (ms).
#[derive(Debug, Clone, Copy)]
struct Shown {
    util: ProcessUtilization,
    now_ms: u64,
}

/// Every frame of the recording, in order, through one collector (one refresh per frame):
/// per frame, what each listed PID of GPU 0 showed.
fn replay_every_frame(fixture: Fixture) -> Vec<BTreeMap<u32, Shown>> {
    let frames = fixture.frames.len();
    let backend = Arc::new(ReplayBackend::with_clock(fixture, ReplayClock::manual()));
    let host = ReplayHost::new(backend.clone());
    let collector = ProcessCollector::from_replay(backend.clone()).unwrap();
    (0..frames)
        .map(|f| {
            backend.set_frame(f);
            let now_ms = host.now_unix_ms();
            let snap = collector.take_all();
            snap.processes
                .iter()
                .filter(|p| p.device == DeviceId::Gpu(0))
                .map(|p| {
                    (
                        p.pid,
                        Shown {
                            util: p.utilization,
                            now_ms,
                        },
                    )
                })
                .collect()
        })
        .collect()
}

/// The recorded samples of `pid` in frame `f`: (timestamp µs, sm).
fn recorded_samples(json: &Value, f: usize, pid: u32) -> Vec<(u64, u32)> {
    json["frames"][f]["devices"]["0"]["process_utilization"]["ok"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|s| s["pid"] == pid)
                .map(|s| {
                    (
                        s["timestamp_us"].as_u64().unwrap(),
                        s["sm"].as_u64().unwrap() as u32,
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The sample a process should show at frame `f`: the newest by its own timestamp among the
/// samples recorded for it up to `f` (a later frame's sample wins a tie).
fn newest_up_to(json: &Value, f: usize, pid: u32) -> Option<(u64, u32)> {
    (0..=f).flat_map(|g| recorded_samples(json, g, pid)).fold(
        None,
        |best: Option<(u64, u32)>, s| match best {
            Some(b) if b.0 > s.0 => Some(b),
            _ => Some(s),
        },
    )
}

/// Regression: PID 541 showed SM% N/A in `gpuscope top` while PID 512's samples came faster.
#[test]
fn a_process_sampled_less_often_than_another_keeps_its_sm_value() {
    let (fixture, json) = recording();
    let shown = replay_every_frame(fixture);
    let max_age_ms = SAMPLE_MAX_AGE.as_millis() as u64;

    // Frames 19-40, both running: each shows its own newest sample, with its age.
    let mut hog_ages = Vec::new();
    for (f, frame) in shown.iter().enumerate().take(41).skip(19) {
        for pid in [MATMUL, HOG] {
            let s = frame
                .get(&pid)
                .unwrap_or_else(|| panic!("frame {f}: {pid} is listed"));
            match newest_up_to(&json, f, pid) {
                None => {
                    // PID 541 has no sample before frame 20: N/A, with no age.
                    assert_eq!(s.util, ProcessUtilization::default(), "frame {f} pid {pid}");
                }
                Some((t_us, sm)) => {
                    let age = s.now_ms.saturating_sub(t_us / 1000);
                    assert!(age <= max_age_ms, "frame {f} pid {pid}: {age} ms");
                    assert_eq!(s.util.sm, Some(sm), "frame {f} pid {pid}");
                    assert_eq!(s.util.sample_time_us, Some(t_us), "frame {f} pid {pid}");
                    assert_eq!(s.util.sample_age_ms, Some(age), "frame {f} pid {pid}");
                    if pid == HOG {
                        hog_ages.push(age);
                    }
                }
            }
        }
    }
    assert_eq!(hog_ages.len(), 21, "PID 541 has a value in frames 20-40");
    // Its sample really stood still for seconds at a time; the age says so.
    assert!(hog_ages.iter().any(|&a| a >= 5000), "{hog_ages:?}");

    // Frames 41-55, PID 541 alone: its recorded sample of the frame, under a second old.
    for (f, frame) in shown.iter().enumerate().take(56).skip(41) {
        let s = frame[&HOG];
        let recorded = recorded_samples(&json, f, HOG);
        assert_eq!(recorded.len(), 1, "frame {f}");
        assert_eq!(s.util.sm, Some(recorded[0].1), "frame {f}");
        assert!(s.util.sample_age_ms.unwrap() < 1000, "frame {f}: {s:?}");
    }
}

/// No process goes from a value back to N/A and again from one refresh to the next: over the
/// whole recording, each process is N/A until its first sample, then has a value while listed.
#[test]
fn no_process_flips_between_a_value_and_na_over_the_real_recording() {
    let (fixture, _) = recording();
    let shown = replay_every_frame(fixture);
    let mut seen: BTreeMap<u32, Vec<bool>> = BTreeMap::new();
    for frame in &shown {
        for (&pid, s) in frame {
            seen.entry(pid).or_default().push(s.util.sm.is_some());
        }
    }
    assert_eq!(seen.keys().copied().collect::<Vec<_>>(), [MATMUL, HOG]);
    for (pid, values) in &seen {
        let first = values
            .iter()
            .position(|&v| v)
            .expect("a value at some point");
        assert!(values[first..].iter().all(|&v| v), "pid {pid}: {values:?}");
    }
}

/// PID 541 alone, as `nvidia-smi pmon` showed it in the same session (about frame 48, once
/// its figure had settled): the SM figure gpuscope shows in frames 48-55 is within 3 points of
/// pmon's.
#[test]
fn the_process_alone_shows_what_nvidia_smi_pmon_showed() {
    let pmon = std::fs::read_to_string(root().join("fixtures/h100-real/nvidia-smi-pmon.load.txt"))
        .unwrap();
    // `# gpu pid type sm mem ...` rows: the SM column of PID 541.
    let pmon_sm: Vec<u32> = pmon
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|w| w.get(1) == Some(&"541"))
        .map(|w| w[3].parse().unwrap())
        .collect();
    assert_eq!(pmon_sm.len(), 3);
    let (fixture, _) = recording();
    let shown = replay_every_frame(fixture);
    for (f, frame) in shown.iter().enumerate().take(56).skip(48) {
        let ours = frame[&HOG].util.sm.unwrap();
        for &p in &pmon_sm {
            assert!(ours.abs_diff(p) <= 3, "frame {f}: {ours} vs pmon {p}");
        }
    }
}

/// A one-GPU driver that answers as NVML does: the process list, and the utilization samples
/// stamped after the caller's "last seen" timestamp. The test scripts what it holds.
struct Driver {
    processes: Vec<u32>,
    samples: Mutex<Vec<ProcessUtilizationSample>>,
}

impl NotSupportedBase for Driver {
    fn device_count(&self) -> Result<u32> {
        Ok(1)
    }
    fn compute_processes(&self, _id: DeviceId) -> Result<Vec<ProcessInfo>> {
        Ok(self
            .processes
            .iter()
            .map(|&pid| ProcessInfo {
                pid,
                used_gpu_memory: Some(1 << 30),
                gpu_instance_id: None,
                compute_instance_id: None,
            })
            .collect())
    }
    fn process_utilization(
        &self,
        _id: DeviceId,
        since_us: u64,
    ) -> Result<Vec<ProcessUtilizationSample>> {
        let samples = self.samples.lock().unwrap();
        Ok(samples
            .iter()
            .filter(|s| s.timestamp_us > since_us)
            .copied()
            .collect())
    }
}

/// A host that knows no process, at a fixed time.
struct Clock(u64);

impl HostSource for Clock {
    fn machine(&self) -> HostMachine {
        HostMachine::default()
    }
    fn sample(&self) -> HostFrame {
        HostFrame::default()
    }
    fn process(&self, _pid: u32) -> Option<HostProcessFacts> {
        None
    }
    fn process_sample(&self, _pid: u32) -> Option<HostProcessSample> {
        None
    }
    fn now_unix_ms(&self) -> u64 {
        self.0
    }
}

/// NVML answers only samples newer than the "last seen" timestamp it is given. A slow
/// process's new sample can be stamped before a faster process's newest already seen (PID
/// 541's samples were, by up to 0.8 s, on the real H100): asking for samples newer than the
/// device's newest would hide it at the driver. The collector asks for every sample, so the
/// slow process's new figure shows.
#[test]
fn a_sample_stamped_before_another_process_newest_still_reaches_its_process() {
    let now_ms = 1_795_528_960_000;
    let sample = |pid, t_ms: u64, sm| ProcessUtilizationSample {
        pid,
        timestamp_us: t_ms * 1000,
        sm,
        memory: 0,
        encoder: 0,
        decoder: 0,
    };
    let driver = Arc::new(Driver {
        processes: vec![MATMUL, HOG],
        samples: Mutex::new(vec![
            sample(HOG, now_ms - 3000, 3),
            sample(MATMUL, now_ms - 500, 95),
        ]),
    });
    let collector = ProcessCollector::new(
        Context::from_backend(driver.clone()).unwrap(),
        Arc::new(Clock(now_ms)),
    );
    let sm = |c: &ProcessCollector| -> BTreeMap<u32, Option<u32>> {
        c.take_all()
            .processes
            .iter()
            .map(|p| (p.pid, p.utilization.sm))
            .collect()
    };
    assert_eq!(
        sm(&collector),
        BTreeMap::from([(MATMUL, Some(95)), (HOG, Some(3))])
    );
    // The next refresh: the hog's new sample is stamped before the matmul's newest seen.
    *driver.samples.lock().unwrap() = vec![
        sample(HOG, now_ms - 800, 6),
        sample(MATMUL, now_ms + 500, 96),
    ];
    assert_eq!(
        sm(&collector),
        BTreeMap::from([(MATMUL, Some(96)), (HOG, Some(6))])
    );
}
