//! A looping replay driven across its loop boundaries by a clock set by hand: the host's "now"
//! (what `top`'s header, `snapshot` and `info` measure times to) and the times of the events and
//! process samples served move on together, loop after loop. Issue 25: on the demo's second
//! loop an XID was dated 20 s after the header's clock.

use std::sync::Arc;
use std::time::Duration;

use gpu_backend::host::{HostSource, ReplayHost};
use gpu_backend::{DeviceId, EventKind, GpuBackend, ReplayBackend, ReplayClock};

use crate::common;

use common::fixture;

#[test]
fn events_and_samples_are_never_dated_after_now_on_any_loop() {
    let fixture = fixture("h100-sxm-8gpu");
    let frames = fixture.frames.len();
    let backend = Arc::new(ReplayBackend::with_clock(
        fixture,
        ReplayClock::elapsed(true),
    ));
    let host = ReplayHost::new(backend.clone());
    let devices: Vec<DeviceId> = backend.fixture().devices.keys().copied().collect();
    let gpu2 = DeviceId::Gpu(2);
    // (loop, frame) -> how long before "now" the newest XID of GPU 2 arrived, in ms.
    let mut xid_age: std::collections::BTreeMap<(u32, usize), u64> = Default::default();
    let (mut last_now, mut last_frame, mut loops) = (0u64, 0usize, 0u32);
    let mut ms = 0u64;
    // Four whole loops, a quarter of a second at a time.
    loop {
        backend.set_elapsed(Duration::from_millis(ms));
        let frame = backend.frame_index();
        if frame < last_frame {
            loops += 1;
            if loops == 4 {
                break;
            }
        }
        last_frame = frame;
        let now_ms = host.now_unix_ms();
        assert!(
            now_ms >= last_now,
            "{ms} ms: now went back from {last_now} to {now_ms}"
        );
        last_now = now_ms;
        for &d in &devices {
            let not_after_now = |what: String, timestamp_us: u64| {
                assert!(
                    timestamp_us / 1000 <= now_ms,
                    "{ms} ms (loop {loops}, frame {frame}): {d} {what} at {} after now {now_ms}",
                    timestamp_us / 1000
                );
            };
            for e in backend.events(d, 0).unwrap_or_default() {
                not_after_now(format!("event {:?}", e.kind), e.timestamp_us);
                if d == gpu2 && e.kind == EventKind::Xid {
                    xid_age.insert((loops, frame), now_ms - e.timestamp_us / 1000);
                }
            }
            for s in backend.process_utilization(d, 0).unwrap_or_default() {
                not_after_now(format!("sample of {}", s.pid), s.timestamp_us);
            }
        }
        ms += 250;
        assert!(ms < 10 * 60 * 1000, "the replay loops ({frames} frames)");
    }
    // The XID (frame 14) is served on every loop, and at each frame it is as old on the
    // header's clock as it was on the first loop.
    let first: Vec<_> = xid_age.iter().filter(|((l, _), _)| *l == 0).collect();
    assert!(!first.is_empty(), "GPU 2's XID is served on the first loop");
    for later in 1..=3 {
        for ((_, frame), age) in &first {
            assert_eq!(
                xid_age.get(&(later, *frame)),
                Some(*age),
                "loop {later}, frame {frame}"
            );
        }
    }
}

#[test]
fn the_elapsed_clock_goes_as_wall_time_would() {
    let backend = ReplayBackend::with_clock(fixture("h100-sxm-8gpu"), ReplayClock::elapsed(true));
    let last = backend.fixture().frames.len() - 1;
    let t = |i: usize| backend.fixture().frames[i].t_ms;
    assert_eq!(backend.frame_index(), 0);
    assert_eq!(backend.recording_time_ms(), 0);
    backend.set_elapsed(Duration::from_millis(t(3) + 1));
    assert_eq!(backend.frame_index(), 3);
    assert_eq!(backend.recording_time_ms(), t(3));
    // Past the last frame: the second loop's frame 0, one loop's length on.
    let mut ms = t(last);
    while backend.frame_index() != 0 {
        ms += 1;
        backend.set_elapsed(Duration::from_millis(ms));
    }
    assert_eq!(backend.recording_time_ms(), ms);
    assert!(ms > t(last));
    // Setting the time does nothing to a manual clock.
    let manual = ReplayBackend::new(fixture("h100-sxm-8gpu"));
    manual.set_elapsed(Duration::from_secs(5));
    assert_eq!(manual.frame_index(), 0);
}
