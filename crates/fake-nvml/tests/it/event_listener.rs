//! gpuscope's NVML backend receives events on its own listener thread (over fake-nvml's
//! `nvmlEventSetWait_v2`), and reading them never waits on the driver: with every NVML call
//! hung (`GPUSCOPE_FAKE_NVML_HANG_WHILE`), the listener is stuck inside the library, and
//! `events` still answers at once from what it received. It listens for what tells about the
//! GPU's health, not for clock changes. The library reads the hang variable once per loaded
//! copy, so the test loads a copy of its own, installed in a directory named for it.

#![cfg(target_os = "linux")]

use crate::common;

use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use gpu_backend::{BackendError, DeviceId, EventKind, GpuBackend, NvmlBackend};

use common::*;

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn reading_events_never_waits_on_the_driver() {
    let _guard = lock();
    let exe = std::env::current_exe().expect("test exe");
    let lib = fake_nvml::find_cdylib(&exe).expect("the built cdylib");
    let dir = std::env::temp_dir().join(format!("fake-nvml-events-{}", std::process::id()));
    let so = fake_nvml::install(&lib, &dir).expect("install").nvml;
    let hang = dir.join("hang");
    let waiting = dir.join("hang.waiting");
    let _ = std::fs::remove_file(&hang);
    let _ = std::fs::remove_file(&waiting);
    // Frame 1: GPU 0 has had a clock change, XID 79 and a double-bit ECC error.
    set_env(Some(&write_temp(&fixture(), "events")), Some(1));
    std::env::set_var(fake_nvml::HANG_ENV, &hang);

    let gpu0 = DeviceId::Gpu(0);
    let kinds = |events: &[gpu_backend::GpuEvent]| -> Vec<(EventKind, u64)> {
        events.iter().map(|e| (e.kind, e.data)).collect()
    };
    // gpuscope's backend listens for health: the XID and the ECC error, not the clock change
    // (see `the_event_listener_does_not_register_for_clock_changes` in nvml_backend.rs).
    let backend = Arc::new(NvmlBackend::with_library(&so).expect("init over fake-nvml"));
    wait_until("GPU 0's two health events", || {
        backend.events(gpu0, 0).map_or(0, |e| e.len()) == 2
    });
    let events = backend.events(gpu0, 0).unwrap();
    assert_eq!(
        kinds(&events),
        [(EventKind::Xid, 79), (EventKind::DoubleBitEcc, 0)]
    );
    assert_eq!(backend.events(DeviceId::Gpu(1), 0), Ok(vec![]));
    let mig = DeviceId::Mig {
        parent: 0,
        index: 0,
    };
    assert_eq!(backend.events(mig, 0), Err(BackendError::NotSupported));
    assert_eq!(
        backend.events(gpu0, events[0].timestamp_us).unwrap(),
        events[1..],
        "newer than a time: only what came after it"
    );

    // Every NVML call hangs from now on; the listener's next wait is stuck in the library.
    std::fs::write(&hang, b"").unwrap();
    wait_until("the listener stuck in a call", || waiting.exists());
    let (tx, rx) = mpsc::channel();
    let reader = Arc::clone(&backend);
    let thread = std::thread::spawn(move || {
        let _ = tx.send(reader.events(gpu0, 0));
    });
    let answer = rx.recv_timeout(Duration::from_secs(5));
    // Let the stuck calls go before judging, so that the test ends either way.
    std::fs::remove_file(&hang).unwrap();
    thread.join().unwrap();
    assert_eq!(
        answer.expect("events waited on a hung driver"),
        Ok(events),
        "the events read while the driver hangs"
    );
    std::env::remove_var(fake_nvml::HANG_ENV);
    drop(backend);
    let _ = std::fs::remove_dir_all(&dir);
}
