//! The replay backend: serves a [`Fixture`] through [`GpuBackend`].
//!
//! Replay is a pure function of (fixture, frame). A [`ReplayClock`] chooses the frame: stepped by
//! hand in tests ([`ReplayClock::Manual`]), or by wall time, looping, in the CLI's demo
//! ([`ReplayClock::wall`]). It can also count the calls made to it, per query and device, which
//! the performance work uses to prove that one refresh asks each query at most once per device.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::backend::GpuBackend;
use crate::error::{BackendError, Result};
use crate::fixture::{link_answer, DeviceDynamic, DeviceStatic, Fixture, Frame};
use crate::query::Query;
use crate::types::*;

/// Chooses which frame of a fixture is served.
#[derive(Debug)]
pub enum ReplayClock {
    /// The frame is set by hand ([`ReplayBackend::set_frame`], [`ReplayBackend::step`]).
    Manual(AtomicUsize),
    /// The frame follows wall time from `start`, using the frames' `t_ms`; with `looping`, the
    /// recording starts over after its last frame, else the last frame stays.
    Wall {
        /// When replay started.
        start: Instant,
        /// Start over after the last frame.
        looping: bool,
    },
    /// As [`ReplayClock::Wall`], but the time since replay started is set by hand
    /// ([`ReplayBackend::set_elapsed`]): a wall-clock replay, looping or not, that a test
    /// drives across frames and loops without waiting.
    Elapsed {
        /// Milliseconds since replay started.
        ms: AtomicU64,
        /// Start over after the last frame.
        looping: bool,
    },
}

impl ReplayClock {
    /// A manual clock at frame 0.
    pub fn manual() -> ReplayClock {
        ReplayClock::Manual(AtomicUsize::new(0))
    }

    /// A wall clock starting now.
    pub fn wall(looping: bool) -> ReplayClock {
        ReplayClock::Wall {
            start: Instant::now(),
            looping,
        }
    }

    /// A clock that goes as [`ReplayClock::wall`]'s would, but only when set
    /// ([`ReplayBackend::set_elapsed`]); at its start.
    pub fn elapsed(looping: bool) -> ReplayClock {
        ReplayClock::Elapsed {
            ms: AtomicU64::new(0),
            looping,
        }
    }

    /// How long replay has run and whether it loops, for the clocks that go by time.
    fn run_time(&self) -> Option<(Duration, bool)> {
        match self {
            ReplayClock::Manual(_) => None,
            ReplayClock::Wall { start, looping } => Some((start.elapsed(), *looping)),
            ReplayClock::Elapsed { ms, looping } => {
                Some((Duration::from_millis(ms.load(Ordering::Relaxed)), *looping))
            }
        }
    }
}

/// One query as asked: the trait method, its extra argument if any (clock domain, link, fan,
/// direction, ... as a number), and the device (none for system queries).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CallKey {
    /// The query (the trait method).
    pub query: Query,
    /// The method's extra argument, as a number, if it has one.
    pub arg: Option<u32>,
    /// The device asked about.
    pub device: Option<DeviceId>,
}

/// How many times each query was asked since counting was last reset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallCounts {
    /// Calls per query.
    pub by_query: HashMap<CallKey, u64>,
}

impl CallCounts {
    /// Total number of calls.
    pub fn total(&self) -> u64 {
        self.by_query.values().sum()
    }

    /// The queries that were asked more than once (same method, argument and device), with
    /// their counts, sorted.
    pub fn repeated(&self) -> Vec<(CallKey, u64)> {
        let mut v: Vec<_> = self
            .by_query
            .iter()
            .filter(|(_, &n)| n > 1)
            .map(|(k, &n)| (*k, n))
            .collect();
        v.sort();
        v
    }
}

/// A backend that serves a fixture. Cheap to share: wrap it in an `Arc`.
#[derive(Debug)]
pub struct ReplayBackend {
    fixture: Arc<Fixture>,
    /// The frames with events, per device, ascending: where to look for the events up to a
    /// frame without walking every frame before it.
    event_frames: HashMap<DeviceId, Vec<usize>>,
    clock: ReplayClock,
    counting: AtomicBool,
    counts: Mutex<CallCounts>,
}

impl ReplayBackend {
    /// Serves `fixture` from frame 0 with a manual clock.
    pub fn new(fixture: impl Into<Arc<Fixture>>) -> ReplayBackend {
        ReplayBackend::with_clock(fixture, ReplayClock::manual())
    }

    /// Serves `fixture` with the given clock.
    pub fn with_clock(fixture: impl Into<Arc<Fixture>>, clock: ReplayClock) -> ReplayBackend {
        let fixture = fixture.into();
        let mut event_frames: HashMap<DeviceId, Vec<usize>> = HashMap::new();
        for (i, frame) in fixture.frames.iter().enumerate() {
            for (id, dy) in &frame.devices {
                if dy.events.ok().is_some_and(|e| !e.is_empty()) {
                    event_frames.entry(*id).or_default().push(i);
                }
            }
        }
        ReplayBackend {
            fixture,
            event_frames,
            clock,
            counting: AtomicBool::new(false),
            counts: Mutex::new(CallCounts::default()),
        }
    }

    /// The fixture served.
    pub fn fixture(&self) -> &Arc<Fixture> {
        &self.fixture
    }

    /// The index of the frame served now.
    pub fn frame_index(&self) -> usize {
        self.position().0
    }

    /// The frame served now, and how many whole loops of a looping wall-clock replay came
    /// before it (always 0 on a manual clock).
    fn position(&self) -> (usize, u64) {
        let frames = &self.fixture.frames;
        match &self.clock {
            ReplayClock::Manual(i) => (
                i.load(Ordering::Relaxed)
                    .min(frames.len().saturating_sub(1)),
                0,
            ),
            clock => match clock.run_time() {
                Some((elapsed, looping)) => position_at(frames, elapsed, looping),
                None => (0, 0),
            },
        }
    }

    /// The time of the frame served now on the recording's clock, in milliseconds from the
    /// recording's start: the frame's `t_ms`, plus one loop's length for each whole loop a
    /// looping replay has made. Sample and event timestamps are moved on by the same loops, so
    /// a "now" made from it ([`crate::host::ReplayHost`]'s) is never behind them.
    pub fn recording_time_ms(&self) -> u64 {
        let (index, loops) = self.position();
        let frames = &self.fixture.frames;
        loops
            .saturating_mul(loop_period_ms(frames))
            .saturating_add(frames.get(index).map_or(0, |f| f.t_ms))
    }

    /// Sets how long an [`ReplayClock::Elapsed`] replay has run. Has no effect on another
    /// clock.
    pub fn set_elapsed(&self, elapsed: Duration) {
        if let ReplayClock::Elapsed { ms, .. } = &self.clock {
            ms.store(
                u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
                Ordering::Relaxed,
            );
        }
    }

    /// How long until a wall-clock replay serves another frame; `None` on a manual clock
    /// (whose frame changes only when set) and on a wall clock that has reached its last frame
    /// without looping.
    pub fn next_frame_in(&self) -> Option<Duration> {
        let (run_time, looping) = self.clock.run_time()?;
        let frames = &self.fixture.frames;
        let elapsed = u64::try_from(run_time.as_millis()).unwrap_or(u64::MAX);
        let (index, loops) = position_at(frames, run_time, looping);
        let next_t = match frames.get(index + 1) {
            Some(next) => next.t_ms,
            None if looping => loop_period_ms(frames),
            None => return None,
        };
        let loop_start = if looping {
            loops.saturating_mul(loop_period_ms(frames))
        } else {
            0
        };
        let due = loop_start.saturating_add(next_t);
        // At least a millisecond: `elapsed` is read twice, and a frame due now is due next.
        Some(Duration::from_millis(due.saturating_sub(elapsed).max(1)))
    }

    /// The frame served now.
    pub fn frame(&self) -> &Frame {
        &self.fixture.frames[self.frame_index()]
    }

    /// Serves frame `index` (clamped to the last frame). Has no effect on a wall clock.
    pub fn set_frame(&self, index: usize) {
        if let ReplayClock::Manual(i) = &self.clock {
            i.store(
                index.min(self.fixture.frames.len().saturating_sub(1)),
                Ordering::Relaxed,
            );
        }
    }

    /// Moves a manual clock one frame on, wrapping after the last. Returns the new index.
    pub fn step(&self) -> usize {
        let next = (self.frame_index() + 1)
            .checked_rem(self.fixture.frames.len())
            .unwrap_or(0);
        self.set_frame(next);
        next
    }

    /// Starts (or stops) counting calls. Counting costs a lock per call; it is off by default.
    pub fn count_calls(&self, on: bool) {
        self.counting.store(on, Ordering::Relaxed);
    }

    /// The calls counted so far, and resets the count.
    pub fn take_call_counts(&self) -> CallCounts {
        match self.counts.lock() {
            Ok(mut c) => std::mem::take(&mut *c),
            Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
        }
    }

    fn note(&self, query: Query, id: Option<DeviceId>) {
        self.note_arg(query, None, id);
    }

    fn note_arg(&self, query: Query, arg: Option<u32>, device: Option<DeviceId>) {
        if self.counting.load(Ordering::Relaxed) {
            let mut c = match self.counts.lock() {
                Ok(c) => c,
                Err(poisoned) => poisoned.into_inner(),
            };
            *c.by_query
                .entry(CallKey { query, arg, device })
                .or_default() += 1;
        }
    }

    fn stat_arg(&self, query: Query, arg: Option<u32>, id: DeviceId) -> Result<&DeviceStatic> {
        self.note_arg(query, arg, Some(id));
        self.fixture.devices.get(&id).ok_or(BackendError::NotFound)
    }

    fn dynamic_arg(&self, query: Query, arg: Option<u32>, id: DeviceId) -> Result<&DeviceDynamic> {
        self.note_arg(query, arg, Some(id));
        self.frame().devices.get(&id).ok_or(BackendError::NotFound)
    }
}

/// How long one loop of a looping replay lasts: until the last frame plus one typical interval.
/// At least 1 ms. Saturating: a loaded fixture's times are bounded
/// ([`crate::fixture::limits::MAX_FRAME_TIME_MS`]), but a fixture built in code need not be.
fn loop_period_ms(frames: &[Frame]) -> u64 {
    let Some(last_frame) = frames.last() else {
        return 1000;
    };
    let last = frames.len() - 1;
    let step = if last > 0 {
        (last_frame.t_ms / last as u64).max(1)
    } else {
        1000
    };
    last_frame.t_ms.saturating_add(step).max(1)
}

/// The frame shown `elapsed` after the start of replay, and how many whole loops came before.
fn position_at(frames: &[Frame], elapsed: Duration, looping: bool) -> (usize, u64) {
    let last = frames.len().saturating_sub(1);
    let mut t = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
    let mut loops = 0;
    if looping {
        let period = loop_period_ms(frames);
        loops = t / period;
        t %= period;
    }
    // The last frame whose time has come.
    let index = frames
        .partition_point(|f| f.t_ms <= t)
        .saturating_sub(1)
        .min(last);
    (index, loops)
}

/// One query's replay method (a row as [`crate::for_each_query_row!`] hands it): the recorded
/// answer of the fixture field the table names, at the frame served now. `samples` queries are
/// written by hand.
macro_rules! replay_query {
    (system value $m:ident () ($($ty:tt)+) $f:ident $($row:tt)*) => {
        fn $m(&self) -> Result<$($ty)+> {
            self.note(Query::$m, None);
            self.fixture.system.$f.get()
        }
    };
    (static $($rest:tt)*) => {
        replay_query!(@from stat_arg $($rest)*);
    };
    (dynamic $($rest:tt)*) => {
        replay_query!(@from dynamic_arg $($rest)*);
    };
    (@from $get:ident value $m:ident ($id:ident : $idty:ty) ($($ty:tt)+) $f:ident $($row:tt)*) => {
        fn $m(&self, $id: $idty) -> Result<$($ty)+> {
            self.$get(Query::$m, None, $id)?.$f.get()
        }
    };
    (@from $get:ident per_clock $m:ident ($id:ident : $idty:ty, $c:ident : $cty:ty) ($($ty:tt)+)
        $f:ident $($row:tt)*) => {
        fn $m(&self, $id: $idty, $c: $cty) -> Result<$($ty)+> {
            self.$get(Query::$m, Some($c as u32), $id)?.$f.get($c).get()
        }
    };
    (@from $get:ident per_link $m:ident ($id:ident : $idty:ty, $l:ident : $lty:ty) ($($ty:tt)+)
        $f:ident $($row:tt)*) => {
        fn $m(&self, $id: $idty, $l: $lty) -> Result<$($ty)+> {
            link_answer(&self.$get(Query::$m, Some($l), $id)?.$f, $l)
        }
    };
    (@from $get:ident per_fan $m:ident ($id:ident : $idty:ty, $n:ident : $nty:ty) ($($ty:tt)+)
        $f:ident $($row:tt)*) => {
        fn $m(&self, $id: $idty, $n: $nty) -> Result<$($ty)+> {
            match self.$get(Query::$m, Some($n), $id)?.$f.get($n as usize) {
                Some(a) => a.get(),
                None => Err(BackendError::InvalidArgument),
            }
        }
    };
    (@from $get:ident per_ecc $m:ident
        ($id:ident : $idty:ty, $k:ident : $kty:ty, $c:ident : $cty:ty) ($($ty:tt)+) $f:ident $($row:tt)*) => {
        fn $m(&self, $id: $idty, $k: $kty, $c: $cty) -> Result<$($ty)+> {
            self.$get(Query::$m, Some($k as u32 * 2 + $c as u32), $id)?
                .$f
                .get($k, $c)
                .get()
        }
    };
    (@from $get:ident split $m:ident ($id:ident : $idty:ty, $a:ident : $aty:ty) ($($ty:tt)+)
        { $($variant:path => $f:ident),+ } $($row:tt)*) => {
        fn $m(&self, $id: $idty, $a: $aty) -> Result<$($ty)+> {
            let answers = self.$get(Query::$m, Some($a as u32), $id)?;
            // A split over some of its argument's values answers "not supported" for the
            // others (the T.Limit thresholds have no target temperatures).
            #[allow(unreachable_patterns)]
            match $a {
                $($variant => answers.$f.get(),)+
                _ => Err(BackendError::NotSupported),
            }
        }
    };
    (@from $get:ident samples $($rest:tt)*) => {};
}

impl GpuBackend for ReplayBackend {
    crate::for_each_query_row!(replay_query);

    fn process_utilization(
        &self,
        id: DeviceId,
        since_us: u64,
    ) -> Result<Vec<ProcessUtilizationSample>> {
        // In a looping wall-clock replay each loop moves the sample timestamps on by one loop's
        // length, so that time keeps going forward for a caller that asks for samples newer than
        // the last it saw.
        self.note(Query::process_utilization, Some(id));
        let (index, loops) = self.position();
        let frame = &self.fixture.frames[index];
        let shift = self.loop_shift_us(loops);
        match &frame
            .devices
            .get(&id)
            .ok_or(BackendError::NotFound)?
            .process_utilization
        {
            crate::fixture::Answer::Ok(samples) => Ok(samples
                .iter()
                .map(|s| ProcessUtilizationSample {
                    timestamp_us: s.timestamp_us.saturating_add(shift),
                    ..*s
                })
                .filter(|s| s.timestamp_us > since_us)
                .collect()),
            crate::fixture::Answer::Err(e) => Err(e.clone()),
        }
    }

    fn events(&self, id: DeviceId, since_us: u64) -> Result<Vec<GpuEvent>> {
        // Every event delivered up to the frame served (the newest MAX_EVENTS, as a backend
        // keeps them): the log of this frame and the frames before. A looping wall-clock replay
        // starts each loop with no events yet and moves their times on by one loop's length, as
        // for the process samples.
        self.note(Query::events, Some(id));
        let (index, loops) = self.position();
        self.events_through(id, index, loops, since_us, None)
    }
}

impl ReplayBackend {
    /// How far the timestamps of a looping wall-clock replay are moved on after `loops` whole
    /// loops, in microseconds: so that time keeps going forward for a caller that asks for
    /// what is newer than the last it saw.
    fn loop_shift_us(&self, loops: u64) -> u64 {
        loops
            .saturating_mul(loop_period_ms(&self.fixture.frames))
            .saturating_mul(1000)
    }

    /// The events frame `j` logs for `id`: none when it answered an error.
    fn logged(&self, id: DeviceId, j: usize) -> &[GpuEvent] {
        self.fixture.frames[j]
            .devices
            .get(&id)
            .and_then(|d| d.events.ok())
            .map_or(&[][..], Vec::as_slice)
    }

    /// The events of `id` newer than `since_us` (on the clock `events` serves), oldest first,
    /// the newest [`MAX_EVENTS`] at most, from the log up to frame `index` and, when `until_us`
    /// is given, also the later frames' events whose time is at most `until_us`.
    fn events_through(
        &self,
        id: DeviceId,
        index: usize,
        loops: u64,
        since_us: u64,
        until_us: Option<u64>,
    ) -> Result<Vec<GpuEvent>> {
        let frame = &self.fixture.frames[index];
        if let crate::fixture::Answer::Err(e) =
            &frame.devices.get(&id).ok_or(BackendError::NotFound)?.events
        {
            return Err(e.clone());
        }
        let shift = self.loop_shift_us(loops);
        let served = |e: &GpuEvent| GpuEvent {
            timestamp_us: e.timestamp_us.saturating_add(shift),
            ..*e
        };
        let frames = self.event_frames.get(&id).map_or(&[][..], Vec::as_slice);
        let events_of = |j: usize| self.logged(id, j);
        let upto = frames.partition_point(|&j| j <= index);
        let mut out = Vec::new();
        // Later frames first (only with `until_us`): those whose events have come by then.
        if let Some(until) = until_us {
            let mut later: Vec<GpuEvent> = Vec::new();
            'frames: for &j in &frames[upto..] {
                for e in events_of(j).iter().map(served) {
                    if e.timestamp_us > until {
                        break 'frames;
                    }
                    if e.timestamp_us > since_us {
                        later.push(e);
                    }
                }
            }
            later.reverse();
            out.extend(later);
        }
        // Then back through this frame and the earlier ones, newest first, until the callers'
        // time or the bound.
        'back: for &j in frames[..upto].iter().rev() {
            for e in events_of(j).iter().rev().map(served) {
                if e.timestamp_us <= since_us || out.len() >= MAX_EVENTS {
                    break 'back;
                }
                out.push(e);
            }
        }
        out.truncate(MAX_EVENTS);
        out.reverse();
        Ok(out)
    }

    /// The events `events(id, since_us)` would serve now, and also those of later frames that
    /// arrived by `until_us` (microseconds since the Unix epoch, on the clock `events`
    /// serves): what a client listening live would have received by that moment. For a
    /// stand-in NVML library that delivers events at the times they were recorded rather than
    /// when the replay reaches their frame.
    pub fn events_until(
        &self,
        id: DeviceId,
        since_us: u64,
        until_us: u64,
    ) -> Result<Vec<GpuEvent>> {
        let (index, loops) = self.position();
        self.events_through(id, index, loops, since_us, Some(until_us))
    }

    /// The time of the first event of `id` newer than `after_us` (on the clock `events`
    /// serves), in the current loop of the replay, whichever frame holds it; `None` when there
    /// is none. With [`ReplayBackend::events_until`], for a stand-in library that sleeps until
    /// the next event is due.
    pub fn next_event_after(&self, id: DeviceId, after_us: u64) -> Option<u64> {
        let (_, loops) = self.position();
        let shift = self.loop_shift_us(loops);
        let frames = self.event_frames.get(&id)?;
        let events_of = |j: usize| self.logged(id, j);
        // Events grow along the log: the first frame whose last event is newer holds it.
        let at = frames.partition_point(|&j| {
            events_of(j)
                .last()
                .is_none_or(|e| e.timestamp_us.saturating_add(shift) <= after_us)
        });
        let j = *frames.get(at)?;
        events_of(j)
            .iter()
            .map(|e| e.timestamp_us.saturating_add(shift))
            .find(|&t| t > after_us)
    }
}

/// When the recording's time 0 (the `t_ms` of its frames counts from it) was, in microseconds
/// since the Unix epoch on the clock of its sample and event timestamps; `None` when the
/// fixture says nothing of it (no `meta.recorded_at`, and no sample or event).
///
/// Recordings before issue 26 wrote `meta.recorded_at` in whole seconds, so the recording may
/// have started up to a second later: the start is moved on until no frame holds a sample or an
/// event newer than the frame's own time. A recording to the millisecond, whose frame times
/// are taken once the frame's answers are in, needs no move.
pub fn recording_start_us(fixture: &Fixture) -> Option<u64> {
    let mut start = recorded_at_us(fixture);
    for frame in &fixture.frames {
        for dy in frame.devices.values() {
            let newest_event = dy
                .events
                .ok()
                .and_then(|e| e.last())
                .map(|e| e.timestamp_us);
            let newest_sample = dy
                .process_utilization
                .ok()
                .and_then(|s| s.iter().map(|s| s.timestamp_us).max());
            for t in [newest_event, newest_sample].into_iter().flatten() {
                let earliest = t.saturating_sub(frame.t_ms.saturating_mul(1000));
                start = Some(start.map_or(earliest, |s| s.max(earliest)));
            }
        }
    }
    start
}

/// `meta.recorded_at` in microseconds since the Unix epoch, if the fixture has one that parses.
fn recorded_at_us(fixture: &Fixture) -> Option<u64> {
    let at = fixture.meta.recorded_at.as_deref()?;
    let t = humantime::parse_rfc3339_weak(at).ok()?;
    let d = t.duration_since(std::time::UNIX_EPOCH).ok()?;
    u64::try_from(d.as_micros()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::{scenario as load, Answer};

    fn frames_at(times: &[u64]) -> Vec<Frame> {
        let base = load("old-driver").frames[0].clone();
        times
            .iter()
            .map(|&t_ms| Frame {
                t_ms,
                ..base.clone()
            })
            .collect()
    }

    /// Where wall time falls in frames 1 s apart: the last frame whose time has come; without
    /// looping the last frame stays; with looping the last frame lasts one interval, then the
    /// frames start again, and each loop is counted so that sample times keep going forward.
    #[test]
    fn wall_time_picks_a_frame_and_counts_the_loops() {
        let frames = frames_at(&[0, 1000, 2000, 3000]);
        assert_eq!(loop_period_ms(&frames), 4000);
        // (elapsed ms, looping, (frame, loops))
        let cases: &[(u64, bool, (usize, u64))] = &[
            (0, false, (0, 0)),
            (999, false, (0, 0)),
            (1000, false, (1, 0)),
            (2500, false, (2, 0)),
            (60_000, false, (3, 0)),
            (100_000, false, (3, 0)),
            (500, true, (0, 0)),
            (3999, true, (3, 0)),
            (4000, true, (0, 1)),
            (4500, true, (0, 1)),
            (5500, true, (1, 1)),
            (3 * 4000 + 3500, true, (3, 3)),
            (4000 * 10 + 2000, true, (2, 10)),
        ];
        for &(ms, looping, want) in cases {
            assert_eq!(
                position_at(&frames, Duration::from_millis(ms), looping),
                want,
                "{ms} ms, looping {looping}"
            );
        }
    }

    #[test]
    fn next_frame_in_counts_down_to_the_next_frame_and_over_the_loop() {
        let mut fixture = load("old-driver");
        fixture.frames = frames_at(&[0, 1000, 2000]);
        let started_ago = |ms: u64, looping: bool| {
            let clock = ReplayClock::Wall {
                start: Instant::now() - Duration::from_millis(ms),
                looping,
            };
            ReplayBackend::with_clock(fixture.clone(), clock)
        };
        let within = |r: ReplayBackend, lo: u64, hi: u64| {
            let d = r.next_frame_in().expect("a next frame");
            assert!(
                d >= Duration::from_millis(lo) && d <= Duration::from_millis(hi),
                "{d:?} not in {lo}..={hi} ms"
            );
        };
        // 1.5 s in: frame 1, frame 2 due at 2 s.
        within(started_ago(1500, false), 400, 500);
        // 2.5 s in, looping: the last frame lasts one step (1 s), then frame 0 again at 3 s.
        within(started_ago(2500, true), 400, 500);
        // 3.2 s in, looping: the second loop's frame 0; its frame 1 is due at 4 s.
        within(started_ago(3200, true), 700, 800);
        // Not looping, past the last frame: nothing more comes.
        assert_eq!(started_ago(2500, false).next_frame_in(), None);
        // A manual clock changes only when set.
        assert_eq!(ReplayBackend::new(fixture.clone()).next_frame_in(), None);
    }

    #[test]
    fn replay_clock_with_a_time_that_overflows_never_panics() {
        // A last frame at 17985575471866812826 ms overflowed `t_ms + step` (then divided by a
        // period of 0). Loaded fixtures are bounded now; one built in code may still hold it.
        for times in [
            vec![0, u64::MAX],
            vec![u64::MAX],
            vec![0, 17_985_575_471_866_812_826],
        ] {
            let frames = frames_at(&times);
            assert!(loop_period_ms(&frames) >= 1);
            let (index, _) = position_at(&frames, Duration::MAX, true);
            assert!(index < frames.len());
            let backend = ReplayBackend::with_clock(
                Fixture {
                    frames,
                    ..load("old-driver")
                },
                ReplayClock::wall(true),
            );
            let _ = backend.process_utilization(DeviceId::Gpu(0), 0);
        }
    }

    #[test]
    fn manual_clock_steps_and_wraps() {
        let f = load("old-driver");
        let n = f.frames.len();
        let r = ReplayBackend::new(f);
        assert_eq!(r.frame_index(), 0);
        assert_eq!(r.step(), 1);
        r.set_frame(n + 100);
        assert_eq!(r.frame_index(), n - 1, "set_frame clamps to the last frame");
        assert_eq!(r.step(), 0, "stepping past the last frame wraps");
    }

    #[test]
    fn an_unknown_device_is_not_found() {
        let r = ReplayBackend::new(load("old-driver"));
        assert_eq!(r.name(DeviceId::Gpu(7)), Err(BackendError::NotFound));
        assert_eq!(
            r.memory_info(DeviceId::Mig {
                parent: 0,
                index: 0
            }),
            Err(BackendError::NotFound)
        );
    }

    #[test]
    fn links_beyond_a_trimmed_list_answer_as_its_last_entry() {
        let f = load("h100-sxm-8gpu");
        let r = ReplayBackend::new(f);
        let gpu = DeviceId::Gpu(0);
        for link in 0..NVLINK_MAX_LINKS {
            assert_eq!(r.nvlink_state(gpu, link), Ok(true), "link {link}");
            assert!(r.nvlink_throughput(gpu, link).is_ok());
        }
        assert_eq!(
            r.nvlink_state(gpu, NVLINK_MAX_LINKS),
            Err(BackendError::InvalidArgument)
        );

        // A GPU without NVLink has an empty list: every link is not supported.
        let r = ReplayBackend::new(load("old-driver"));
        assert_eq!(
            r.nvlink_state(DeviceId::Gpu(0), 3),
            Err(BackendError::NotSupported)
        );
    }

    #[test]
    fn a_fan_beyond_num_fans_is_an_invalid_argument() {
        let f = load("geforce-desktop");
        let fans = f.devices[&DeviceId::Gpu(0)].num_fans.get().unwrap();
        let r = ReplayBackend::new(f);
        assert!(r.fan_speed_of(DeviceId::Gpu(0), fans - 1).is_ok());
        assert_eq!(
            r.fan_speed_of(DeviceId::Gpu(0), fans),
            Err(BackendError::InvalidArgument)
        );
    }

    #[test]
    fn process_samples_are_served_newer_than_the_callers_timestamp() {
        let f = load("h100-sxm-8gpu");
        let gpu = DeviceId::Gpu(0);
        let Answer::Ok(all) = f.frames[5].devices[&gpu].process_utilization.clone() else {
            panic!("the 8-GPU scenario records process samples");
        };
        assert!(all.len() >= 2);
        let r = ReplayBackend::new(f);
        r.set_frame(5);
        assert_eq!(r.process_utilization(gpu, 0).unwrap(), all);
        let newest = all.iter().map(|s| s.timestamp_us).max().unwrap();
        let oldest = all.iter().map(|s| s.timestamp_us).min().unwrap();
        assert!(r.process_utilization(gpu, newest).unwrap().is_empty());
        let newer = r.process_utilization(gpu, oldest).unwrap();
        assert!(newer.iter().all(|s| s.timestamp_us > oldest));
        assert_eq!(
            newer.len(),
            all.iter().filter(|s| s.timestamp_us > oldest).count()
        );
    }

    #[test]
    fn events_are_served_from_their_frame_on_and_newer_than_the_callers_time() {
        let r = ReplayBackend::new(load("h100-sxm-8gpu"));
        let gpu = DeviceId::Gpu(2);
        r.set_frame(13);
        assert_eq!(r.events(gpu, 0), Ok(vec![]));
        r.set_frame(14);
        let events = r.events(gpu, 0).unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!((events[0].kind, events[0].data), (EventKind::Xid, 79));
        r.set_frame(29);
        assert_eq!(
            r.events(gpu, 0).unwrap(),
            events,
            "an event stays in later frames"
        );
        assert_eq!(r.events(gpu, events[0].timestamp_us), Ok(vec![]));
        assert_eq!(r.events(gpu, events[0].timestamp_us - 1).unwrap(), events);
        // Events the device cannot report (Windows): N/A, not "none".
        let r = ReplayBackend::new(load("windows-wddm"));
        assert!(r
            .events(DeviceId::Gpu(0), 0)
            .is_err_and(|e| e.is_not_available()));
    }

    /// A replay of `frames` frames whose GPU 0 logs `per_frame` clock events in each frame from
    /// frame 1 on, 10 ms apart, and answers `not_supported` at frame `gap`.
    fn replaying_event_log(frames: usize, per_frame: usize, gap: usize) -> ReplayBackend {
        let mut f = load("old-driver");
        let times: Vec<u64> = (0..frames as u64).map(|i| i * 1000).collect();
        f.frames = frames_at(&times);
        for (i, frame) in f.frames.iter_mut().enumerate() {
            let dy = frame.devices.get_mut(&DeviceId::Gpu(0)).unwrap();
            dy.events = if i == gap {
                Answer::Err(BackendError::NotSupported)
            } else {
                Answer::Ok(
                    (0..if i == 0 { 0 } else { per_frame })
                        .map(|k| GpuEvent {
                            timestamp_us: 1_000_000_000 + (i * 1000 + k * 10) as u64 * 1000,
                            kind: EventKind::Clock,
                            data: 0,
                        })
                        .collect(),
                )
            };
        }
        ReplayBackend::new(f)
    }

    #[test]
    fn events_are_every_logged_one_up_to_the_frame_the_newest_256_at_most() {
        let r = replaying_event_log(20, 40, 12);
        let gpu = DeviceId::Gpu(0);
        r.set_frame(0);
        assert_eq!(r.events(gpu, 0), Ok(vec![]));
        r.set_frame(3);
        let three = r.events(gpu, 0).unwrap();
        assert_eq!(three.len(), 120, "frames 1 to 3, 40 each");
        assert!(three
            .windows(2)
            .all(|w| w[0].timestamp_us < w[1].timestamp_us));
        // Newer than a time: only those after it, from whichever frame they were logged in.
        let since = three[50].timestamp_us;
        assert_eq!(r.events(gpu, since).unwrap(), three[51..].to_vec());
        // Past 256, the newest 256, as a backend keeps them.
        r.set_frame(10);
        let ten = r.events(gpu, 0).unwrap();
        assert_eq!(ten.len(), MAX_EVENTS);
        assert_eq!(
            ten.last(),
            r.fixture().frames[10].devices[&gpu]
                .events
                .ok()
                .unwrap()
                .last()
        );
        // A frame whose answer is an error answers it; the next one continues the log.
        r.set_frame(12);
        assert_eq!(r.events(gpu, 0), Err(BackendError::NotSupported));
        r.set_frame(13);
        let thirteen = r.events(gpu, ten.last().unwrap().timestamp_us).unwrap();
        assert_eq!(
            thirteen.len(),
            40 * 2,
            "frames 11 and 13 after frame 10, 12 failing"
        );
    }

    #[test]
    fn events_until_a_time_include_those_of_later_frames_that_have_come() {
        let r = replaying_event_log(5, 4, 99);
        let gpu = DeviceId::Gpu(0);
        r.set_frame(1);
        let now = r.events(gpu, 0).unwrap();
        assert_eq!(now.len(), 4);
        let last = now.last().unwrap().timestamp_us;
        // Frame 2's first two events (at +0 and +10 ms of its second) have come by +15 ms.
        let second = 1_000_000_000 + 2_000_000;
        let until = r.events_until(gpu, last, second + 15_000).unwrap();
        assert_eq!(
            until.iter().map(|e| e.timestamp_us).collect::<Vec<_>>(),
            vec![second, second + 10_000]
        );
        assert_eq!(
            r.events_until(gpu, 0, 0).unwrap(),
            now,
            "nothing later before its time"
        );
    }

    #[test]
    fn call_counts_tell_queries_apart_by_argument() {
        let r = ReplayBackend::new(load("old-driver"));
        let gpu = DeviceId::Gpu(0);
        r.count_calls(true);
        let _ = r.clock(gpu, ClockType::Graphics);
        let _ = r.clock(gpu, ClockType::Memory);
        assert!(r.take_call_counts().repeated().is_empty());
        let _ = r.clock(gpu, ClockType::Sm);
        let _ = r.clock(gpu, ClockType::Sm);
        let counts = r.take_call_counts();
        assert_eq!(counts.total(), 2);
        assert_eq!(counts.repeated().len(), 1);
        assert_eq!(counts.repeated()[0].0.query, Query::clock);
        r.count_calls(false);
        let _ = r.clock(gpu, ClockType::Sm);
        assert_eq!(
            r.take_call_counts().total(),
            0,
            "counting off counts nothing"
        );
    }
}
