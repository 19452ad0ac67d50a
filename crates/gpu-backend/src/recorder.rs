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
    /// Milliseconds since the timeline's start (when frame 0 was due), asked once a frame's
    /// device answers are in: the frame's time, which none of its samples or events is newer
    /// than.
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

    /// Frames `interval` apart, counted from `start` (frame 0 is due then): for a recording
    /// whose `meta.recorded_at` is that instant.
    pub fn starting_at(start: Instant, interval: Duration) -> WallTimeline {
        WallTimeline {
            start: Some(start),
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

    /// Rounded up, so that the frame's time is never before what it read.
    fn elapsed_ms(&self) -> u64 {
        self.start
            .map(|s| u64::try_from(s.elapsed().as_micros().div_ceil(1000)).unwrap_or(u64::MAX))
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

/// Where a recording goes as it is taken: the head once, then each frame. A
/// [`FixtureWriter`] streams them to a file; [`record`] keeps them in memory.
pub trait RecordSink {
    /// What is known before the first frame.
    fn begin(&mut self, head: &FixtureHead<'_>) -> std::io::Result<()>;
    /// One frame, as soon as it is taken.
    fn frame(&mut self, frame: Frame) -> std::io::Result<()>;
}

impl<W: std::io::Write> RecordSink for FixtureWriter<W> {
    fn begin(&mut self, head: &FixtureHead<'_>) -> std::io::Result<()> {
        FixtureWriter::begin(self, head)
    }

    fn frame(&mut self, frame: Frame) -> std::io::Result<()> {
        FixtureWriter::frame(self, &frame)
    }
}

/// What a recording knows only at its end, returned by [`record_to`].
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    /// The host facts that do not change, with those of every PID seen on a GPU: the tail of
    /// the fixture ([`FixtureWriter::end`]).
    pub host: HostStatic,
    /// How many frames were taken.
    pub frames: usize,
    /// Whether the recording was stopped before it had all the frames asked for.
    pub stopped: bool,
}

/// Records `options.frames` frames from `backend` and `host` into `sink`, handing it each frame
/// as soon as it is taken, so that nothing grows with the length of the recording but the host
/// facts of the PIDs seen.
///
/// Static answers are asked once, before the first frame; each frame asks every changing query
/// once per device. Events are a log: a frame keeps only those newer than the device's events
/// in earlier frames. Host facts are kept for every PID seen on a GPU: its static facts when it
/// is first seen, and its changing facts in every later frame in which it is alive. `progress`
/// is called after each frame with (frames done, frames asked). If `stop` becomes true the
/// recording ends early with the frames taken so far (at least one).
///
/// # Errors
///
/// The sink's first error; the frames before it were handed over.
pub fn record_to(
    backend: &dyn GpuBackend,
    host: &dyn HostSource,
    timeline: &mut dyn Timeline,
    options: RecordOptions,
    stop: Option<&AtomicBool>,
    progress: &mut dyn FnMut(usize, usize),
    sink: &mut dyn RecordSink,
) -> std::io::Result<Recorded> {
    let wanted = options.frames.max(1);
    timeline.wait_for_frame(0);
    let system = capture_system(backend);
    let devices = capture_all_static(backend, &system.device_count);
    sink.begin(&FixtureHead {
        schema_version: SCHEMA_VERSION,
        meta: &options.meta,
        system: &system,
        nvml_missing_functions: &options.nvml_missing_functions,
        devices: &devices,
    })?;
    let machine = host.machine();
    let mut host_static = HostStatic {
        hostname: machine.hostname,
        cpu_count: machine.cpu_count,
        memory_total: machine.memory_total,
        swap_total: machine.swap_total,
        processes: BTreeMap::new(),
    };
    let mut tracked: BTreeSet<u32> = BTreeSet::new();
    // Each device's newest event recorded so far: a frame keeps only newer ones.
    let mut newest_event: BTreeMap<DeviceId, u64> = BTreeMap::new();
    let mut taken = 0;
    let mut stopped = false;
    for index in 0..wanted {
        if index > 0 {
            if stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
                stopped = true;
                break;
            }
            timeline.wait_for_frame(index);
        }
        let mut dynamics: BTreeMap<DeviceId, DeviceDynamic> = devices
            .iter()
            .map(|(&id, st)| (id, capture_dynamic(backend, id, &st.num_fans)))
            .collect();
        // Once the answers are in: no sample or event of the frame is newer than its time.
        let t_ms = timeline.elapsed_ms();
        for (id, dy) in &mut dynamics {
            if let Answer::Ok(events) = &mut dy.events {
                let newest = newest_event.entry(*id).or_insert(0);
                events.retain(|e| e.timestamp_us > *newest);
                if let Some(last) = events.last() {
                    *newest = last.timestamp_us;
                }
            }
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
        sink.frame(Frame {
            t_ms,
            devices: dynamics,
            host: host_frame,
        })?;
        taken += 1;
        progress(taken, wanted);
    }
    Ok(Recorded {
        host: host_static,
        frames: taken,
        stopped,
    })
}

/// A [`RecordSink`] that keeps everything, for [`record`].
#[derive(Default)]
struct InMemory {
    head: Option<Head>,
    frames: Vec<Frame>,
}

/// What [`InMemory`] keeps of the head: meta, system, missing functions, static answers.
type Head = (
    Meta,
    SystemAnswers,
    Vec<String>,
    BTreeMap<DeviceId, DeviceStatic>,
);

impl RecordSink for InMemory {
    fn begin(&mut self, head: &FixtureHead<'_>) -> std::io::Result<()> {
        self.head = Some((
            head.meta.clone(),
            head.system.clone(),
            head.nvml_missing_functions.to_vec(),
            head.devices.clone(),
        ));
        Ok(())
    }

    fn frame(&mut self, frame: Frame) -> std::io::Result<()> {
        self.frames.push(frame);
        Ok(())
    }
}

/// Records `options.frames` frames from `backend` and `host` into a fixture in memory; see
/// [`record_to`], which streams them instead.
pub fn record(
    backend: &dyn GpuBackend,
    host: &dyn HostSource,
    timeline: &mut dyn Timeline,
    options: RecordOptions,
    stop: Option<&AtomicBool>,
    progress: &mut dyn FnMut(usize, usize),
) -> Fixture {
    let mut sink = InMemory::default();
    let fallback_meta = options.meta.clone();
    // The in-memory sink never fails, so there is always a result.
    let host_static = record_to(backend, host, timeline, options, stop, progress, &mut sink)
        .map(|r| r.host)
        .unwrap_or_default();
    let (meta, system, nvml_missing_functions, devices) = sink.head.unwrap_or_else(|| {
        (
            fallback_meta,
            SystemAnswers::all_failing(&crate::error::BackendError::NotRecorded),
            Vec::new(),
            BTreeMap::new(),
        )
    });
    Fixture {
        schema_version: SCHEMA_VERSION,
        meta,
        system,
        nvml_missing_functions,
        devices,
        frames: sink.frames,
        host: host_static,
        nvml_costs: None,
    }
}

/// Records a replay of `fixture`, frame by frame, with its own host facts and times (and its
/// description and call costs, which a replay does not answer). The recorder's guarantee is
/// that this gives `fixture` back; it also puts a hand-edited fixture into the form the
/// recorder writes (trimmed link lists and so on).
pub fn rerecord(fixture: &Fixture) -> Fixture {
    let replay = std::sync::Arc::new(crate::ReplayBackend::new(fixture.clone()));
    let host = crate::host::ReplayHost::new(replay.clone());
    let options = RecordOptions {
        frames: fixture.frames.len(),
        meta: fixture.meta.clone(),
        nvml_missing_functions: fixture.nvml_missing_functions.clone(),
    };
    let mut timeline = ReplayTimeline::new(&replay);
    let recorded = record(
        &*replay,
        &host,
        &mut timeline,
        options,
        None,
        &mut |_, _| {},
    );
    // What the calls cost is not an answer a replay gives: it is kept as the fixture has it,
    // like its description.
    Fixture {
        nvml_costs: fixture.nvml_costs.clone(),
        ..recorded
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::fixture::scenario as load;
    use crate::host::ReplayHost;
    use crate::ReplayBackend;

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
