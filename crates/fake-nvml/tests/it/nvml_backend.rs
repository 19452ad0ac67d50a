//! gpuscope's own NVML backend (on nvml-wrapper), loaded over the installed library, records
//! back exactly what the fixture holds: `gpu_backend::recorder::record` over `NvmlBackend`, with
//! a timeline that steps the library's frames by hand, gives the fixture back value for value
//! (system answers, every static answer of every device, every changing answer in every frame,
//! and the frames' times), the CUDA device order included (the backend asks the same library,
//! installed as `libcuda.so.1` beside it, in a child process), with two exceptions: the CUDA
//! runtime version (the machine's libcudart, which fake-nvml does not stand in for) and the host
//! facts (the host's; they are served from the fixture by `ReplayHost`, on the same frame).
//!
//! Events come through the backend's listener thread, which waits on fake-nvml's
//! `nvmlEventSetWait_v2`: they arrive in the frame that records them, with the same kind and
//! data in the same order, but stamped with the time the listener received them (NVML's events
//! carry no time). Process samples come with their timestamps moved onto the replay's clock,
//! one shift per frame. And the listener registers each GPU once, when the backend starts: a GPU
//! that could not be registered answers the error it gave then, and one lost later answers the
//! events received before (the GPU's other queries say it is lost).

#![cfg(target_os = "linux")]

use crate::common;

use std::ffi::c_uint;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gpu_backend::host::ReplayHost;
use gpu_backend::nvml::NvmlOptions;
use gpu_backend::recorder::{record, RecordOptions, ReplayTimeline, Timeline};
use gpu_backend::{Answer, EventKind, Fixture, GpuBackend, GpuEvent, NvmlBackend, ReplayBackend};
use libloading::{Library, Symbol};

use common::*;

/// The built library, installed once per test process.
fn installed() -> &'static std::path::Path {
    static SO: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    SO.get_or_init(|| {
        let exe = std::env::current_exe().expect("test exe");
        let lib = fake_nvml::find_cdylib(&exe).expect("the built cdylib");
        fake_nvml::install_per_process(&lib, &std::env::temp_dir(), "fake-nvml-rt")
            .expect("install")
            .nvml
    })
}

/// Moves the loaded fake library and a replay of the same fixture (for the host facts) to each
/// frame, and carries the fixture's frame times. After each step it waits (at most 5 s) until
/// the backend's listener has received as many new events of each GPU as the frame logs.
struct FakeTimeline<'a> {
    set_frame: Symbol<'a, unsafe extern "C" fn(c_uint) -> c_uint>,
    replay: ReplayTimeline<'a>,
    backend: &'a NvmlBackend,
    fixture: &'a Fixture,
    /// Each GPU's newest event received by the frame before.
    seen: std::collections::HashMap<gpu_backend::DeviceId, u64>,
}

impl FakeTimeline<'_> {
    fn wait_for_events(&mut self, index: usize) {
        let deadline = Instant::now() + Duration::from_secs(5);
        for (&id, dy) in &self.fixture.frames[index].devices {
            let Answer::Ok(want) = &dy.events else {
                continue;
            };
            let since = self.seen.get(&id).copied().unwrap_or(0);
            loop {
                let got = self.backend.events(id, since).unwrap_or_default();
                if got.len() >= want.len() {
                    if let Some(last) = got.last() {
                        self.seen.insert(id, last.timestamp_us);
                    }
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "frame {index} device {id}: the listener did not receive {} events",
                    want.len()
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
}

impl Timeline for FakeTimeline<'_> {
    fn wait_for_frame(&mut self, index: usize) {
        let index_c = c_uint::try_from(index).expect("frame index");
        // SAFETY: `fakeNvmlSetFrame` takes a frame number and returns an NVML code.
        assert_eq!(
            unsafe { (self.set_frame)(index_c) },
            0,
            "fakeNvmlSetFrame({index})"
        );
        self.replay.wait_for_frame(index);
        self.wait_for_events(index);
    }

    fn elapsed_ms(&self) -> u64 {
        self.replay.elapsed_ms()
    }
}

fn check_round_trip(fixture: &Fixture, tag: &str) {
    let so = installed();
    let path = write_temp(fixture, tag);
    set_env(Some(&path), Some(0));

    // Listening for every kind of event, as a recording does (record-fixture), so that the
    // clock changes the fixture logs come back too.
    let backend = NvmlBackend::open_with(
        Some(so.as_os_str()),
        NvmlOptions::default().events(&EventKind::ALL),
    )
    .expect("the NVML backend inits over fake-nvml");
    // The same file is the same loaded library: step its frames by hand.
    // SAFETY: loading the library the backend has already loaded runs no new initialisers.
    let handle = unsafe { Library::new(so) }.expect("dlopen");
    // SAFETY: the symbol has this signature (see the crate's README).
    let set_frame = unsafe { handle.get(b"fakeNvmlSetFrame") }.expect("fakeNvmlSetFrame");
    let replay = Arc::new(ReplayBackend::new(fixture.clone()));
    let host = ReplayHost::new(replay.clone());
    let mut timeline = FakeTimeline {
        set_frame,
        replay: ReplayTimeline::new(&replay),
        backend: &backend,
        fixture,
        seen: std::collections::HashMap::new(),
    };
    let options = RecordOptions {
        frames: fixture.frames.len(),
        meta: fixture.meta.clone(),
        nvml_missing_functions: fixture.nvml_missing_functions.clone(),
    };
    let mut recorded = record(
        &backend,
        &host,
        &mut timeline,
        options,
        None,
        &mut |_, _| {},
    );
    backend.shutdown();
    if let gpu_backend::Answer::Ok(order) = &fixture.system.cuda_device_order {
        assert_eq!(
            recorded.system.cuda_device_order,
            gpu_backend::Answer::Ok(order.clone()),
            "{tag}: the NVML backend gives libcuda's CUDA order"
        );
    }
    recorded.system.cuda_device_order = fixture.system.cuda_device_order.clone();
    recorded.system.cuda_runtime_version = fixture.system.cuda_runtime_version.clone();
    // A query the fixture does not record is served, and so recorded, as not supported.
    let served = fixture.as_served_through_nvml();
    for (frame, (got, want)) in recorded.frames.iter_mut().zip(&served.frames).enumerate() {
        for (id, want) in &want.devices {
            let Some(got) = got.devices.get_mut(id) else {
                continue;
            };
            let at = format!("{tag} frame {frame} device {id} events");
            match (&got.events, &want.events) {
                (Answer::Ok(g), Answer::Ok(w)) => {
                    let kinds = |l: &[GpuEvent]| -> Vec<(EventKind, u64)> {
                        l.iter().map(|e| (e.kind, e.data)).collect()
                    };
                    assert_eq!(kinds(g), kinds(w), "{at}");
                    assert!(
                        g.windows(2).all(|p| p[0].timestamp_us < p[1].timestamp_us),
                        "{at}: times not increasing: {g:?}"
                    );
                }
                (Answer::Err(_), Answer::Err(_))
                | (Answer::Ok(_), Answer::Err(gpu_backend::BackendError::GpuLost)) => {}
                (g, w) => panic!("{at}: {g:?}, the fixture has {w:?}"),
            }
            got.events = want.events.clone();
            // The process samples are served on the replay's clock: the recorded timestamps
            // moved by one shift (the moment the frame was set, less its recorded time), the
            // same for every sample of the frame.
            if let (Answer::Ok(g), Answer::Ok(w)) =
                (&mut got.process_utilization, &want.process_utilization)
            {
                let shifts: std::collections::BTreeSet<i128> = g
                    .iter()
                    .zip(w)
                    .map(|(g, w)| i128::from(g.timestamp_us) - i128::from(w.timestamp_us))
                    .collect();
                assert!(
                    shifts.len() <= 1 && g.len() == w.len(),
                    "{tag} frame {frame} device {id}: samples not moved by one shift: {shifts:?}"
                );
                for (g, w) in g.iter_mut().zip(w) {
                    g.timestamp_us = w.timestamp_us;
                }
            }
        }
    }
    recorded.system.cuda_runtime_version = served.system.cuda_runtime_version.clone();
    // What each NVML call cost is measured on the machine that recorded (a real recording such
    // as fixtures/h200-real.json keeps its GPU's), not served back through the ABI.
    recorded.nvml_costs.clone_from(&served.nvml_costs);
    assert_same(tag, &recorded, &served);
}

#[test]
fn the_nvml_backend_reads_back_the_fixture() {
    let _guard = lock();
    check_round_trip(&fixture(), "plain");
}

#[test]
fn the_nvml_backend_falls_back_on_an_old_driver() {
    let _guard = lock();
    let mut f = fixture();
    f.nvml_missing_functions = vec![
        "nvmlDeviceGetComputeRunningProcesses_v3".into(),
        "nvmlDeviceGetGraphicsRunningProcesses_v3".into(),
        "nvmlDeviceGetMemoryInfo_v2".into(),
    ];
    // What a driver without the v2 memory call tells: no reserved memory figure.
    for frame in &mut f.frames {
        for dy in frame.devices.values_mut() {
            if let gpu_backend::Answer::Ok(m) = &mut dy.memory_info {
                m.used += m.reserved.take().unwrap_or(0);
            }
        }
    }
    check_round_trip(&f, "old-driver");
}

/// Every scenario in the workspace's fixtures/ (none yet is fine), or in the directory named by
/// `FAKE_NVML_FIXTURES_DIR`.
#[test]
fn the_nvml_backend_reads_back_every_scenario_fixture() {
    let _guard = lock();
    let dir = std::env::var_os("FAKE_NVML_FIXTURES_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures"));
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    let mut paths: Vec<_> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    for path in paths {
        let fixture = Fixture::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let stem = path
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        eprintln!("round trip of {}", path.display());
        check_round_trip(&fixture, &stem);
    }
}

/// Issue 13: gpuscope's NVML backend asks GPM once per device per refresh and never waits for
/// a second sample: refresh k measures between refresh k-1's sample and its own. Over the MIG
/// scenario (GPM on the whole GPU and on each instance), three refreshes of the five devices
/// take 15 samples and compute 10 metric sets: the first refresh answers `no_data`, the next
/// ones the fixture's values of their frame.
#[test]
fn gpm_takes_one_sample_per_device_per_refresh() {
    use gpu_backend::{all_device_ids, BackendError, GpuBackend};
    let _guard = lock();
    let so = installed();
    let fixture = Fixture::load(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/h100-mig.json"),
    )
    .unwrap();
    let path = write_temp(&fixture, "gpm-count");
    set_env(Some(&path), Some(3));
    let backend = NvmlBackend::with_library(so).expect("init");
    // SAFETY: loading the library the backend has already loaded runs no new initialisers.
    let lib = unsafe { Library::new(so) }.expect("dlopen");
    // SAFETY: the symbols have these signatures (see the crate's README).
    let set_frame: Symbol<unsafe extern "C" fn(c_uint) -> c_uint> =
        unsafe { lib.get(b"fakeNvmlSetFrame") }.unwrap();
    let counts: Symbol<unsafe extern "C" fn(*mut u64, *mut u64) -> c_uint> =
        unsafe { lib.get(b"fakeNvmlGpmCallCounts") }.unwrap();
    let read = || {
        let (mut s, mut m) = (0u64, 0u64);
        // SAFETY: two writable counters.
        assert_eq!(unsafe { counts(&mut s, &mut m) }, 0);
        (s, m)
    };
    let ids = all_device_ids(&backend).unwrap();
    assert_eq!(ids.len(), 5);
    let (s0, m0) = read();
    for (k, frame) in [3u32, 4, 5].into_iter().enumerate() {
        // SAFETY: a frame number.
        assert_eq!(unsafe { set_frame(frame) }, 0);
        for &id in &ids {
            let got = backend.gpm_metrics(id);
            if k == 0 {
                assert_eq!(got, Err(BackendError::NoData), "{id}");
            } else {
                let want = fixture.frames[frame as usize].devices[&id]
                    .gpm_metrics
                    .get();
                assert_eq!(got, want, "frame {frame} {id}");
            }
        }
    }
    let (s1, m1) = read();
    assert_eq!((s1 - s0, m1 - m0), (15, 10));
    backend.shutdown();
}

/// Issue 22 (3c): the event listener registered every GPU for clock changes, which a
/// power-capped H100 sends 25-48 times a second (5-6% of a core for the thread that woke for
/// each), although a refresh reads the clocks and their reasons anyway. It now registers for
/// what tells about health. Over the fixture's frame 1, where GPU 0 logged a clock change
/// before an XID and a double-bit ECC error: gpuscope's backend receives the XID and the ECC
/// error and never the clock change (delivered first, had it been asked for); a recording's
/// backend, which asks for every kind, receives all three.
#[test]
fn the_event_listener_does_not_register_for_clock_changes() {
    let _guard = lock();
    let so = installed();
    set_env(Some(&write_temp(&fixture(), "health-events")), Some(1));
    let gpu0 = gpu_backend::DeviceId::Gpu(0);
    let kinds_received = |backend: &NvmlBackend, want: usize| -> Vec<EventKind> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let got = backend.events(gpu0, 0).unwrap_or_default();
            if got.len() >= want {
                return got.iter().map(|e| e.kind).collect();
            }
            assert!(
                Instant::now() < deadline,
                "received {got:?}, waiting for {want}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    let backend = NvmlBackend::with_library(so).expect("init");
    assert_eq!(
        kinds_received(&backend, 2),
        [EventKind::Xid, EventKind::DoubleBitEcc]
    );
    backend.shutdown();
    let recording = NvmlBackend::open_with(
        Some(so.as_os_str()),
        NvmlOptions::default().events(&EventKind::ALL),
    )
    .expect("init");
    assert_eq!(
        kinds_received(&recording, 3),
        [EventKind::Clock, EventKind::Xid, EventKind::DoubleBitEcc]
    );
    recording.shutdown();
}
