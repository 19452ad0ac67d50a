//! The recorder: asks any backend everything, and writes the answers down as a [`Fixture`].
//!
//! [`capture_system`], [`capture_static`] and [`capture_dynamic`] each ask every query once;
//! [`snapshot`] uses them for one full reading of every device, and [`record`] for N frames at an
//! interval. Recording a [`crate::ReplayBackend`] gives its fixture back, value for value.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::backend::GpuBackend;
use crate::fixture::*;
use crate::host::HostSource;
use crate::types::*;

/// The system-wide answers, each query asked once ([`SystemAnswers::capture`]).
pub fn capture_system(backend: &dyn GpuBackend) -> SystemAnswers {
    SystemAnswers::capture(backend)
}

/// Every static answer about one device, each query asked once ([`DeviceStatic::capture`]).
pub fn capture_static(b: &dyn GpuBackend, id: DeviceId) -> DeviceStatic {
    DeviceStatic::capture(b, id)
}

/// Every changing answer about one device, each query asked once
/// ([`DeviceDynamic::capture`]). `num_fans` is the device's static answer, which says how many
/// fans to ask about.
pub fn capture_dynamic(b: &dyn GpuBackend, id: DeviceId, num_fans: &Answer<u32>) -> DeviceDynamic {
    // Bounded whatever the backend says: the NVML backend refuses more fans, a fixture cannot
    // hold more.
    let fans = match num_fans {
        Answer::Ok(n) => (*n).min(MAX_FANS),
        Answer::Err(_) => 0,
    };
    DeviceDynamic::capture(b, id, fans)
}

/// The static answers of every device, in the order they are asked: each physical GPU, then the
/// MIG devices its `mig_device_indices` names. `device_count` is the system answer already
/// asked.
pub fn capture_statics_in_order(
    b: &dyn GpuBackend,
    device_count: &Answer<u32>,
) -> Vec<(DeviceId, DeviceStatic)> {
    let count = device_count.ok().copied().unwrap_or(0);
    let mut devices = Vec::with_capacity(count.min(MAX_DEVICE_COUNT) as usize);
    for parent in 0..count {
        let st = capture_static(b, DeviceId::Gpu(parent));
        let children = st.mig_device_indices.ok().cloned().unwrap_or_default();
        devices.push((DeviceId::Gpu(parent), st));
        for index in children {
            let id = DeviceId::Mig { parent, index };
            devices.push((id, capture_static(b, id)));
        }
    }
    devices
}

/// [`capture_statics_in_order`], keyed by device.
pub fn capture_all_static(
    b: &dyn GpuBackend,
    device_count: &Answer<u32>,
) -> BTreeMap<DeviceId, DeviceStatic> {
    capture_statics_in_order(b, device_count)
        .into_iter()
        .collect()
}

/// One full reading of everything a backend can tell: the system, and every device's static and
/// changing answers. Each query is asked once per device.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// System-wide answers.
    pub system: SystemAnswers,
    /// Static answers per device.
    pub statics: BTreeMap<DeviceId, DeviceStatic>,
    /// Changing answers per device.
    pub dynamics: BTreeMap<DeviceId, DeviceDynamic>,
}

/// Takes a [`Snapshot`].
pub fn snapshot(b: &dyn GpuBackend) -> Snapshot {
    let system = capture_system(b);
    let statics = capture_all_static(b, &system.device_count);
    let dynamics = statics
        .iter()
        .map(|(&id, st)| (id, capture_dynamic(b, id, &st.num_fans)))
        .collect();
    Snapshot {
        system,
        statics,
        dynamics,
    }
}

/// Decides when each frame is taken and what time it carries.
pub trait Timeline {
    /// Waits until frame `index` is due (and, for a replay, moves the replay to it).
    fn wait_for_frame(&mut self, index: usize);
    /// Milliseconds since frame 0 was due.
    fn elapsed_ms(&self) -> u64;
}

/// Frames at a fixed interval of wall time.
#[derive(Debug, Clone)]
pub struct WallTimeline {
    start: Option<Instant>,
    interval: Duration,
}

impl WallTimeline {
    /// Frames `interval` apart, starting with the first call.
    pub fn new(interval: Duration) -> WallTimeline {
        WallTimeline {
            start: None,
            interval,
        }
    }
}

impl Timeline for WallTimeline {
    fn wait_for_frame(&mut self, index: usize) {
        let start = *self.start.get_or_insert_with(Instant::now);
        let due = start + self.interval.saturating_mul(index as u32);
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
    }

    fn elapsed_ms(&self) -> u64 {
        self.start
            .map(|s| s.elapsed().as_millis() as u64)
            .unwrap_or(0)
    }
}

/// Steps a [`crate::ReplayBackend`] through its own frames, carrying their recorded times.
#[derive(Debug)]
pub struct ReplayTimeline<'a> {
    backend: &'a crate::ReplayBackend,
}

impl<'a> ReplayTimeline<'a> {
    /// Steps `backend` (which should have a manual clock).
    pub fn new(backend: &'a crate::ReplayBackend) -> ReplayTimeline<'a> {
        ReplayTimeline { backend }
    }
}

impl Timeline for ReplayTimeline<'_> {
    fn wait_for_frame(&mut self, index: usize) {
        self.backend.set_frame(index);
    }

    fn elapsed_ms(&self) -> u64 {
        self.backend.frame().t_ms
    }
}

/// What to record.
#[derive(Debug, Clone)]
pub struct RecordOptions {
    /// How many frames.
    pub frames: usize,
    /// The fixture's description.
    pub meta: Meta,
    /// NVML entry points the driver lacks, if known (see [`Fixture::nvml_missing_functions`]).
    pub nvml_missing_functions: Vec<String>,
}

/// Records `options.frames` frames from `backend` and `host` into a fixture.
///
/// Static answers are asked once, before the first frame; each frame asks every changing query
/// once per device. Host facts are kept for every PID seen on a GPU: its static facts when it is
/// first seen, and its changing facts in every later frame in which it is alive. `progress` is
/// called after each frame with (frames done, frames asked). If `stop` becomes true the
/// recording ends early with the frames taken so far (at least one).
pub fn record(
    backend: &dyn GpuBackend,
    host: &dyn HostSource,
    timeline: &mut dyn Timeline,
    options: RecordOptions,
    stop: Option<&AtomicBool>,
    progress: &mut dyn FnMut(usize, usize),
) -> Fixture {
    let wanted = options.frames.max(1);
    timeline.wait_for_frame(0);
    let system = capture_system(backend);
    let devices = capture_all_static(backend, &system.device_count);
    let machine = host.machine();
    let mut host_static = HostStatic {
        hostname: machine.hostname,
        cpu_count: machine.cpu_count,
        memory_total: machine.memory_total,
        swap_total: machine.swap_total,
        processes: BTreeMap::new(),
    };
    let mut tracked: BTreeSet<u32> = BTreeSet::new();
    let mut frames = Vec::with_capacity(wanted);
    for index in 0..wanted {
        if index > 0 {
            if stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
                break;
            }
            timeline.wait_for_frame(index);
        }
        let t_ms = timeline.elapsed_ms();
        let dynamics: BTreeMap<DeviceId, DeviceDynamic> = devices
            .iter()
            .map(|(&id, st)| (id, capture_dynamic(backend, id, &st.num_fans)))
            .collect();
        for dy in dynamics.values() {
            for list in [&dy.compute_processes, &dy.graphics_processes] {
                if let Answer::Ok(procs) = list {
                    tracked.extend(procs.iter().map(|p| p.pid));
                }
            }
        }
        let mut host_frame = host.sample();
        for &pid in &tracked {
            if let std::collections::btree_map::Entry::Vacant(slot) =
                host_static.processes.entry(pid)
            {
                if let Some(facts) = host.process(pid) {
                    slot.insert(facts);
                }
            }
            if let Some(sample) = host.process_sample(pid) {
                host_frame.processes.insert(pid, sample);
            }
        }
        frames.push(Frame {
            t_ms,
            devices: dynamics,
            host: host_frame,
        });
        progress(frames.len(), wanted);
    }
    Fixture {
        schema_version: SCHEMA_VERSION,
        meta: options.meta,
        system,
        nvml_missing_functions: options.nvml_missing_functions,
        devices,
        host: host_static,
        frames,
    }
}

/// Records a replay of `fixture`, frame by frame, with its own host facts and times. The
/// recorder's guarantee is that this gives `fixture` back; it also puts a hand-edited fixture
/// into the form the recorder writes (trimmed link lists and so on).
pub fn rerecord(fixture: &Fixture) -> Fixture {
    let replay = std::sync::Arc::new(crate::ReplayBackend::new(fixture.clone()));
    let host = crate::host::ReplayHost::new(replay.clone());
    let options = RecordOptions {
        frames: fixture.frames.len(),
        meta: fixture.meta.clone(),
        nvml_missing_functions: fixture.nvml_missing_functions.clone(),
    };
    let mut timeline = ReplayTimeline::new(&replay);
    record(
        &*replay,
        &host,
        &mut timeline,
        options,
        None,
        &mut |_, _| {},
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::host::ReplayHost;
    use crate::ReplayBackend;

    fn load(stem: &str) -> Fixture {
        let path = format!("{}/../../fixtures/{stem}.json", env!("CARGO_MANIFEST_DIR"));
        Fixture::load(path).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_stop_request_ends_the_recording_with_the_frames_taken_so_far() {
        let fixture = load("gpu-lost");
        let replay = Arc::new(ReplayBackend::new(fixture.clone()));
        let host = ReplayHost::new(replay.clone());
        let stop = AtomicBool::new(false);
        let mut seen = Vec::new();
        let recorded = record(
            &*replay,
            &host,
            &mut ReplayTimeline::new(&replay),
            RecordOptions {
                frames: 20,
                meta: fixture.meta.clone(),
                nvml_missing_functions: vec![],
            },
            Some(&stop),
            &mut |done, total| {
                seen.push((done, total));
                if done == 3 {
                    stop.store(true, Ordering::Relaxed);
                }
            },
        );
        assert_eq!(seen, vec![(1, 20), (2, 20), (3, 20)]);
        assert_eq!(recorded.frames.len(), 3);
        assert_eq!(recorded.frames[..], fixture.frames[..3]);
        assert!(recorded.validate().is_ok());
    }

    #[test]
    fn wall_timeline_spaces_frames_by_the_interval() {
        let mut t = WallTimeline::new(Duration::from_millis(20));
        t.wait_for_frame(0);
        t.wait_for_frame(3);
        assert!(t.elapsed_ms() >= 60, "frame 3 is due 60 ms after frame 0");
    }
}
