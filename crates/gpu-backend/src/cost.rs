//! What each call costs: a decorator that times every query of any backend, and the cost
//! profile a recording keeps.
//!
//! [`TimedBackend`] wraps any [`GpuBackend`] and, for each call, measures its wall time and the
//! calling thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), then hands a [`CallRecord`] (the
//! query, its NVML function from the query table, the device, the other arguments, both times
//! and the outcome) to a [`CallObserver`]. It is generated from the query table, so every
//! query is timed and a new one is timed without a line here. What an observer does with the
//! records is its own business: [`CostCollector`] keeps the median cost of each NVML function
//! (what `cargo xtask record-fixture` writes into a fixture's `nvml_costs`); [`CallLog`] logs
//! each call as a `tracing` event (target [`CALLS_TARGET`], what `gpuscope -vv` shows);
//! `gpuscope doctor` feeds both from one observer.
//!
//! A [`CostProfile`] maps an NVML function's exported name to its [`CallCost`], the median wall
//! and thread-CPU microseconds of one call: in JSON `{"nvmlDeviceGetPowerUsage": {"wall_us":
//! 3.4, "cpu_us": 2.7}, ...}`. A fixture's `nvml_costs` has this form, and so can a profile
//! file of its own.
//!
//! ```
//! use std::sync::Arc;
//! use gpu_backend::cost::{CallObserver, CallRecord, CostCollector, TimedBackend};
//! use gpu_backend::{DeviceId, GpuBackend, ReplayBackend};
//!
//! # let fixture = gpu_backend::Fixture::from_json_str(include_str!("../../../fixtures/old-driver.json"), "x").unwrap();
//! let costs = Arc::new(CostCollector::new());
//! let timed = TimedBackend::new(ReplayBackend::new(fixture), costs.clone());
//! timed.power_usage(DeviceId::Gpu(0)).ok();
//! let profile = costs.profile();
//! assert!(profile.contains_key("nvmlDeviceGetPowerUsage"));
//!
//! // Any observer: here, one that counts failed calls.
//! struct Failures(std::sync::atomic::AtomicUsize);
//! impl CallObserver for Failures {
//!     fn observe(&self, call: &CallRecord<'_>) {
//!         if call.outcome.is_err() {
//!             self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
//!         }
//!     }
//! }
//! ```

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::backend::GpuBackend;
use crate::concurrency::{Concurrency, ConcurrencyProbe};
use crate::error::{BackendError, Result};
use crate::query::Query;
use crate::types::*;

/// What one call of an NVML function costs: the median wall and thread-CPU time, microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CallCost {
    /// Wall-clock time, microseconds.
    pub wall_us: f64,
    /// CPU time of the calling thread, microseconds (at most `wall_us` but for rounding; 0
    /// where the platform cannot tell).
    pub cpu_us: f64,
}

/// Costs by NVML function, by the function's exported name (`nvmlDeviceGetPowerUsage`,
/// `nvmlInit_v2`), sorted so that a written profile is stable; and, where it was measured, how
/// the driver runs calls made at the same time ([`Concurrency`]).
///
/// In JSON the calls are the object's members and the concurrency two more beside them:
/// `{"nvmlDeviceGetPowerUsage": {"wall_us": 3.4, "cpu_us": 2.7}, ..., "concurrency":
/// "per-device", "concurrency_probe": {...}}` (a profile without them reads as before). A
/// profile is used as the map of its calls (it dereferences to it), with the concurrency
/// beside.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CostProfile {
    /// How the driver runs calls from several threads at once; `None`: not measured (fake-nvml
    /// then lets them run in parallel, each on its own thread).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<Concurrency>,
    /// What the measure of the concurrency found ([`crate::concurrency::measure`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency_probe: Option<ConcurrencyProbe>,
    /// Where one one-shot command's time went, step by step (`gpuscope doctor`); `None`: not
    /// measured. A profile's user that spends costs (fake-nvml) ignores it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oneshot_timeline: Option<OneshotTimeline>,
    /// Each NVML function's cost, by its exported name.
    #[serde(flatten)]
    pub calls: BTreeMap<String, CallCost>,
}

/// One one-shot command's timeline, as `gpuscope doctor` measured it by running the command
/// as a child (docs/doctor.md): from the moment it was spawned until it had exited, each step
/// with its start, wall and CPU time and its thread. In a [`CostProfile`] as
/// `oneshot_timeline`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OneshotTimeline {
    /// The command timed, as typed (`gpuscope snapshot --json`).
    pub command: String,
    /// Its exit status; `None` when a signal ended it.
    pub exit_code: Option<i32>,
    /// From spawning it until it had exited, microseconds.
    pub wall_us: f64,
    /// The CPU time of the whole process, all threads, user and system, microseconds; `None`
    /// where the platform cannot tell.
    pub cpu_us: Option<f64>,
    /// The part of `wall_us` that no step covers, microseconds.
    pub unaccounted_us: f64,
    /// The steps, in the order they started.
    pub steps: Vec<TimelineStep>,
}

/// One step of a [`OneshotTimeline`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimelineStep {
    /// What ran (`nvmlInit`, `refresh device`; the names of [`crate::timeline::STEPS`], and
    /// `exec and dynamic linking` and `exit`, which the parent measures).
    pub step: String,
    /// The device it was about (`0`, `0:1` for a MIG device), for a device's step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// The thread that ran it: `main`, or `thread N`.
    pub thread: String,
    /// When it started, microseconds after the command was spawned.
    pub start_us: f64,
    /// Its wall time, microseconds.
    pub wall_us: f64,
    /// Its CPU time, microseconds, on the clock `cpu_clock` names; `None` where the platform
    /// cannot tell.
    pub cpu_us: Option<f64>,
    /// Whose CPU time `cpu_us` is.
    pub cpu_clock: CpuClock,
    /// Whether it overlapped a step of another thread.
    pub parallel: bool,
}

/// Whose CPU time a [`TimelineStep`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CpuClock {
    /// The thread that ran the step (`CLOCK_THREAD_CPUTIME_ID`): at most the step's wall time.
    Thread,
    /// The whole process (before `main`, and exiting, where one thread runs but no mark can).
    Process,
}

impl CostProfile {
    /// An empty profile.
    pub fn new() -> CostProfile {
        CostProfile::default()
    }

    /// Sets the concurrency from a probe: its verdict, and the probe itself.
    pub fn set_concurrency(&mut self, probe: ConcurrencyProbe) {
        self.concurrency = probe.concurrency();
        self.concurrency_probe = Some(probe);
    }
}

impl std::ops::Deref for CostProfile {
    type Target = BTreeMap<String, CallCost>;

    fn deref(&self) -> &Self::Target {
        &self.calls
    }
}

impl std::ops::DerefMut for CostProfile {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.calls
    }
}

impl FromIterator<(String, CallCost)> for CostProfile {
    fn from_iter<I: IntoIterator<Item = (String, CallCost)>>(iter: I) -> CostProfile {
        CostProfile {
            calls: iter.into_iter().collect(),
            ..CostProfile::default()
        }
    }
}

impl<'a> IntoIterator for &'a CostProfile {
    type Item = (&'a String, &'a CallCost);
    type IntoIter = std::collections::btree_map::Iter<'a, String, CallCost>;

    fn into_iter(self) -> Self::IntoIter {
        self.calls.iter()
    }
}

/// How long something took: wall time, and the calling thread's CPU time where the platform
/// tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// Wall-clock time.
    pub wall: Duration,
    /// CPU time of the calling thread, user and system (`CLOCK_THREAD_CPUTIME_ID`); `None`
    /// where the platform has no such clock.
    pub cpu: Option<Duration>,
}

/// The CPU time the calling thread has used so far (`CLOCK_THREAD_CPUTIME_ID`); `None` where
/// the platform has no such clock.
pub fn thread_cpu_time() -> Option<Duration> {
    #[cfg(unix)]
    {
        clock_time(libc::CLOCK_THREAD_CPUTIME_ID)
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// `clock_gettime(clock)`; `None` where it fails.
#[cfg(unix)]
pub(crate) fn clock_time(clock: libc::clockid_t) -> Option<Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a writable timespec.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return None;
    }
    let secs = u64::try_from(ts.tv_sec).ok()?;
    let nanos = u32::try_from(ts.tv_nsec).ok()?;
    Some(Duration::new(secs, nanos))
}

/// A wall clock and this thread's CPU clock started together: [`Stopwatch::stop`] gives the
/// [`Timing`] since, for work that is not one closure (a guard's lifetime).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stopwatch {
    wall: Instant,
    cpu: Option<Duration>,
}

impl Stopwatch {
    /// Starts both clocks. The CPU clock is read inside the wall clock's interval (here after
    /// it, in [`Stopwatch::stop`] before it), so that the CPU time does not count the reading
    /// of the wall clock and stays within the wall time.
    pub(crate) fn start() -> Stopwatch {
        let wall = Instant::now();
        Stopwatch {
            wall,
            cpu: thread_cpu_time(),
        }
    }

    /// When it was started.
    pub(crate) fn started(&self) -> Instant {
        self.wall
    }

    /// The time since [`Stopwatch::start`], on the thread that started it.
    pub(crate) fn stop(&self) -> Timing {
        let cpu = match (self.cpu, thread_cpu_time()) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        };
        Timing {
            wall: self.wall.elapsed(),
            cpu,
        }
    }
}

/// Runs `f` and says how long it took, in wall time and in this thread's CPU time.
pub fn time<R>(f: impl FnOnce() -> R) -> (R, Timing) {
    let watch = Stopwatch::start();
    let out = f();
    (out, watch.stop())
}

/// One call made through a [`TimedBackend`], as its observer sees it.
#[derive(Clone, Copy)]
pub struct CallRecord<'a> {
    /// The query (the [`GpuBackend`] method: `power_usage`).
    pub query: Query,
    /// The NVML function the query table names for it (`nvmlDeviceGetPowerUsage`); a few are
    /// not NVML's (`cuDeviceGetUuid` for libcuda's order), see [`crate::query::QUERIES`].
    pub nvml: &'static str,
    /// The device asked about; `None` for a system query.
    pub device: Option<DeviceId>,
    /// The other arguments (clock domain, link, fan, `since_us`, ...), in the method's order.
    pub args: &'a [&'a dyn fmt::Debug],
    /// How long the call took.
    pub timing: Timing,
    /// What it answered: the value, or the error.
    pub outcome: std::result::Result<&'a dyn fmt::Debug, &'a BackendError>,
}

impl fmt::Debug for CallRecord<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallRecord")
            .field("query", &self.query)
            .field("nvml", &self.nvml)
            .field("device", &self.device)
            .field("args", &self.args)
            .field("timing", &self.timing)
            .field("outcome", &self.outcome)
            .finish()
    }
}

/// Receives a [`CallRecord`] for every call made through a [`TimedBackend`], on the calling
/// thread, after the call returned.
pub trait CallObserver: Send + Sync {
    /// One call, with its times and outcome.
    fn observe(&self, call: &CallRecord<'_>);
}

impl<O: CallObserver + ?Sized> CallObserver for Arc<O> {
    fn observe(&self, call: &CallRecord<'_>) {
        (**self).observe(call)
    }
}

impl<O: CallObserver + ?Sized> CallObserver for &O {
    fn observe(&self, call: &CallRecord<'_>) {
        (**self).observe(call)
    }
}

/// A backend whose every call is timed and reported to an observer (see [the module](self)).
/// Answers exactly what the backend it wraps answers.
pub struct TimedBackend<B, O> {
    inner: B,
    observer: O,
}

impl<B, O> TimedBackend<B, O> {
    /// Wraps `inner`, reporting each call to `observer`.
    pub fn new(inner: B, observer: O) -> TimedBackend<B, O> {
        TimedBackend { inner, observer }
    }

    /// The backend wrapped.
    pub fn inner(&self) -> &B {
        &self.inner
    }

    /// The observer.
    pub fn observer(&self) -> &O {
        &self.observer
    }

    /// The backend and the observer back.
    pub fn into_parts(self) -> (B, O) {
        (self.inner, self.observer)
    }
}

impl<B, O> fmt::Debug for TimedBackend<B, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimedBackend").finish_non_exhaustive()
    }
}

impl<B: GpuBackend, O: CallObserver> TimedBackend<B, O> {
    fn report<T: fmt::Debug>(
        &self,
        query: Query,
        nvml: &'static str,
        device: Option<DeviceId>,
        args: &[&dyn fmt::Debug],
        call: impl FnOnce() -> Result<T>,
    ) -> Result<T> {
        let (answer, timing) = time(call);
        self.observer.observe(&CallRecord {
            query,
            nvml,
            device,
            args,
            timing,
            outcome: answer.as_ref().map(|value| value as &dyn fmt::Debug),
        });
        answer
    }
}

/// One query's timed method (a row as [`crate::for_each_query_row!`] hands it).
macro_rules! timed_query {
    (system $shape:ident $m:ident () ($($ty:tt)+) $store:tt $nvml:ident $($row:tt)*) => {
        fn $m(&self) -> Result<$($ty)+> {
            self.report(Query::$m, stringify!($nvml), None, &[], || self.inner.$m())
        }
    };
    ($section:ident $shape:ident $m:ident ($id:ident : DeviceId $(, $a:ident : $aty:ident)*)
        ($($ty:tt)+) $store:tt $nvml:ident $($row:tt)*) => {
        fn $m(&self, $id: DeviceId $(, $a: $aty)*) -> Result<$($ty)+> {
            self.report(
                Query::$m,
                stringify!($nvml),
                Some($id),
                &[$(&$a as &dyn fmt::Debug),*],
                || self.inner.$m($id $(, $a)*),
            )
        }
    };
}

impl<B: GpuBackend, O: CallObserver> GpuBackend for TimedBackend<B, O> {
    crate::for_each_query_row!(timed_query);
}

/// The `tracing` target of the calls [`CallLog`] logs, and of the NVML backend's own calls
/// outside a query (loading and initialising the library, finding the GPUs, the event
/// listener, shutting down).
pub const CALLS_TARGET: &str = "gpu_backend::calls";

/// The longest answer a logged call writes, in bytes: a longer one is cut (at a character
/// boundary) and ends with `…`, so that a process list or an event buffer does not flood the
/// log.
pub const LOGGED_ANSWER_MAX: usize = 160;

/// True when calls are logged: the `tracing` subscriber takes `debug` events of
/// [`CALLS_TARGET`]. [`crate::Source::open`] wraps the backend in a [`TimedBackend`] with a
/// [`CallLog`] only then, so that a backend opened while the log is off costs nothing more.
pub fn calls_logged() -> bool {
    tracing::enabled!(target: CALLS_TARGET, tracing::Level::DEBUG)
}

/// A [`CallObserver`] that logs every call as a `debug` event of target [`CALLS_TARGET`]:
/// message `call`, then `query` (the method, with its other arguments: `clock(Sm)`), `nvml`
/// (the NVML function; `-` for `events`, which reads the listener's buffer), `device` (`0`, or `0:1` for a MIG device; `-` for a system query),
/// `took_us` and `cpu_us` (wall and thread-CPU microseconds), and last the `answer` (the
/// value as Rust's `Debug` writes it, at most [`LOGGED_ANSWER_MAX`] bytes) or the `error`.
/// Control characters of outside text (a device name from a fixture) are escaped, so a line
/// stays one line.
///
/// ```
/// use gpu_backend::cost::{CallLog, TimedBackend};
/// use gpu_backend::{DeviceId, GpuBackend, ReplayBackend};
///
/// # let fixture = gpu_backend::Fixture::from_json_str(include_str!("../../../fixtures/old-driver.json"), "x").unwrap();
/// // With a subscriber that takes `gpu_backend::calls=debug`, each call is one line.
/// let logged = TimedBackend::new(ReplayBackend::new(fixture), CallLog);
/// assert!(logged.power_usage(DeviceId::Gpu(0)).is_ok());
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct CallLog;

impl CallObserver for CallLog {
    fn observe(&self, call: &CallRecord<'_>) {
        log_call(call);
    }
}

/// Logs one call as [`CallLog`] does.
pub(crate) fn log_call(call: &CallRecord<'_>) {
    // `events` reads the listener's buffer and makes no NVML call: its line says so (`nvml=-`);
    // the listener's own `nvmlEventSetWait_v2` calls have lines of their own.
    let nvml = if call.query == Query::events {
        "-"
    } else {
        call.nvml
    };
    log_line(
        Some(LoggedQuery(call.query, call.args)),
        nvml,
        call.device,
        call.timing,
        call.outcome,
    );
}

/// Logs a call the NVML backend makes outside a query (loading and initialising the library,
/// the event listener's waits, shutting down) as [`CallLog`] logs a query's: the line has no
/// `query` field.
#[cfg(feature = "nvml")]
pub(crate) fn log_nvml_call(
    nvml: &str,
    device: Option<DeviceId>,
    timing: Timing,
    outcome: std::result::Result<&dyn fmt::Debug, &BackendError>,
) {
    log_line(None, nvml, device, timing, outcome);
}

/// One line of the call log; `query` is `None` for a call the NVML backend makes outside a
/// query, whose line has no `query` field.
fn log_line(
    query: Option<LoggedQuery<'_>>,
    nvml: &str,
    device: Option<DeviceId>,
    timing: Timing,
    outcome: std::result::Result<&dyn fmt::Debug, &BackendError>,
) {
    use tracing::field::display;
    let device = LoggedDevice(device);
    let took_us = micros(timing.wall);
    let cpu_us = timing.cpu.map(micros);
    // A field that is `None` is left out of the line.
    let query = query.map(display);
    let error = outcome.err().map(ToString::to_string);
    let answer = outcome.ok().map(|value| display(LoggedAnswer(value)));
    let error = error.as_ref().map(|e| display(LoggedAnswer(e)));
    tracing::debug!(
        target: CALLS_TARGET,
        query,
        nvml = %nvml,
        device = %device,
        took_us,
        cpu_us,
        answer,
        error,
        "call"
    );
}

/// Runs `call`, one NVML call the backend makes outside a query, and logs it (see
/// [`log_call`]) when calls are logged, and keeps it while an [`OutsideCalls`] recorder is
/// on; otherwise only runs it.
#[cfg(feature = "nvml")]
pub(crate) fn logged<T: fmt::Debug>(
    nvml: &'static str,
    device: Option<DeviceId>,
    call: impl FnOnce() -> Result<T>,
) -> Result<T> {
    let keep = OUTSIDE_ON.load(std::sync::atomic::Ordering::Relaxed);
    let log = calls_logged();
    if !log && !keep {
        return call();
    }
    let started = Instant::now();
    let (answer, timing) = time(call);
    if log {
        log_nvml_call(
            nvml,
            device,
            timing,
            answer.as_ref().map(|value| value as &dyn fmt::Debug),
        );
    }
    if keep {
        keep_outside_call(OutsideCall {
            nvml,
            device,
            started,
            timing,
            ok: answer.is_ok(),
            thread: std::thread::current().name().map(str::to_string),
        });
    }
    answer
}

/// One call the NVML backend made outside a query (finding the GPUs, the event set, GPM
/// support and samples, field-value set-up, shutting down), as an [`OutsideCalls`] recorder
/// keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutsideCall {
    /// The NVML function (`nvmlDeviceGetHandleByIndex_v2`, `nvmlEventSetCreate`).
    pub nvml: &'static str,
    /// The device it was about; `None` for none.
    pub device: Option<DeviceId>,
    /// When it started.
    pub started: Instant,
    /// How long it took.
    pub timing: Timing,
    /// Whether it succeeded.
    pub ok: bool,
    /// The name of the thread that made it (`gpuscope-nvml-events` for the listener); `None`
    /// for an unnamed one.
    pub thread: Option<String>,
}

/// The most calls an [`OutsideCalls`] recorder keeps: the set-up of a 64-GPU machine is a few
/// hundred; the listener's waits and GPM samples past it are dropped.
pub const OUTSIDE_CALLS_MAX: usize = 4096;

static OUTSIDE_ON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static OUTSIDE: Mutex<Vec<OutsideCall>> = Mutex::new(Vec::new());

#[cfg_attr(not(feature = "nvml"), allow(dead_code))]
fn keep_outside_call(call: OutsideCall) {
    let mut kept = OUTSIDE.lock().unwrap_or_else(PoisonError::into_inner);
    if kept.len() < OUTSIDE_CALLS_MAX {
        kept.push(call);
    }
}

/// Keeps, from [`OutsideCalls::start`] until [`OutsideCalls::finish`], every call the NVML
/// backends of this process make outside a query, in the order made, whether or not calls are
/// logged: what `gpuscope doctor` reports as set-up calls. Process-wide, as the set-up of a
/// backend happens before its owner could hand it an observer; one recorder at a time.
#[derive(Debug)]
pub struct OutsideCalls {
    _private: (),
}

impl OutsideCalls {
    /// Starts keeping the calls (forgetting any kept before).
    pub fn start() -> OutsideCalls {
        OUTSIDE
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        OUTSIDE_ON.store(true, std::sync::atomic::Ordering::Relaxed);
        OutsideCalls { _private: () }
    }

    /// The calls kept so far, in the order they started.
    pub fn so_far(&self) -> Vec<OutsideCall> {
        let mut calls = OUTSIDE
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        calls.sort_by_key(|c| c.started);
        calls
    }

    /// Stops keeping them, and gives those kept, in the order they started.
    pub fn finish(self) -> Vec<OutsideCall> {
        let calls = self.so_far();
        drop(self);
        calls
    }
}

impl Drop for OutsideCalls {
    fn drop(&mut self) {
        OUTSIDE_ON.store(false, std::sync::atomic::Ordering::Relaxed);
        OUTSIDE
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

/// Microseconds to a tenth.
fn micros(d: Duration) -> f64 {
    (d.as_nanos() as f64 / 100.0).round() / 10.0
}

/// A device as the log writes it: `0`, `0:1`, or `-` for none.
struct LoggedDevice(Option<DeviceId>);

impl fmt::Display for LoggedDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(id) => write!(f, "{id}"),
            None => f.write_str("-"),
        }
    }
}

/// A query as the log writes it: `power_usage`, or `clock(Sm)` with its other arguments.
struct LoggedQuery<'a>(Query, &'a [&'a dyn fmt::Debug]);

impl fmt::Display for LoggedQuery<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.as_str())?;
        if self.1.is_empty() {
            return Ok(());
        }
        f.write_str("(")?;
        for (i, arg) in self.1.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{}", LoggedAnswer(*arg))?;
        }
        f.write_str(")")
    }
}

/// A value as the log writes it: its `Debug` text, cut at [`LOGGED_ANSWER_MAX`] bytes (then
/// `…`), control characters escaped. Formatting stops at the limit, so a long list costs no
/// more than its first bytes.
struct LoggedAnswer<'a>(&'a dyn fmt::Debug);

impl fmt::Display for LoggedAnswer<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut bounded = Bounded::default();
        // An error here is the limit reached, which `bounded.cut` says.
        let _ = fmt::write(&mut bounded, format_args!("{:?}", self.0));
        f.write_str(&crate::text::escape_control(&bounded.text))?;
        if bounded.cut {
            f.write_str("…")?;
        }
        Ok(())
    }
}

/// Text written up to [`LOGGED_ANSWER_MAX`] bytes; a write past it keeps what fits and fails,
/// which stops the formatting.
#[derive(Default)]
struct Bounded {
    text: String,
    cut: bool,
}

impl fmt::Write for Bounded {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = LOGGED_ANSWER_MAX.saturating_sub(self.text.len());
        if s.len() <= room {
            self.text.push_str(s);
            return Ok(());
        }
        let mut end = room;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.text.push_str(&s[..end]);
        self.cut = true;
        Err(fmt::Error)
    }
}

/// How many calls of its NVML function one call of `query` makes, when that is known and the
/// same every time; `None` for the queries whose cost is not that of one NVML function: the
/// event buffer (`events` reads what the listener received, no NVML call), libcuda's answers
/// (asked in a child process), the MIG slot scan and GPM (a varying number of calls of several
/// functions). A list query (processes, samples, retired pages) counts as one call although it
/// may make two (the count, then the list), as pynvml's wrappers do.
fn nvml_calls(query: Query, nvml: &str, ok: bool) -> Option<u32> {
    if !nvml.starts_with("nvml") {
        return None;
    }
    match query {
        Query::events | Query::mig_device_indices | Query::gpm_metrics => None,
        // Four counters (volatile and aggregate, corrected and uncorrected), each asked.
        Query::memory_errors => Some(4),
        // Four counters asked in turn; a link that fails, fails at the first.
        Query::nvlink_error_counters => Some(if ok { 4 } else { 1 }),
        _ => Some(1),
    }
}

/// The most samples kept per function: enough for a median to about 3% of the distribution,
/// however long the recording.
const RESERVOIR: usize = 1024;

/// A uniform sample of the costs seen (Vitter's algorithm R with a fixed-seed generator, so
/// that memory stays flat over a recording of any length).
#[derive(Debug, Default)]
struct Reservoir {
    seen: u64,
    rng: u64,
    wall_ns: Vec<u64>,
    cpu_ns: Vec<u64>,
}

impl Reservoir {
    fn add(&mut self, wall_ns: u64, cpu_ns: Option<u64>) {
        self.seen += 1;
        let slot = if self.wall_ns.len() < RESERVOIR {
            self.wall_ns.push(wall_ns);
            if let Some(c) = cpu_ns {
                self.cpu_ns.push(c);
            }
            return;
        } else {
            // xorshift64*, seeded once.
            if self.rng == 0 {
                self.rng = 0x9E37_79B9_7F4A_7C15;
            }
            self.rng ^= self.rng >> 12;
            self.rng ^= self.rng << 25;
            self.rng ^= self.rng >> 27;
            self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D) % self.seen
        };
        if let Ok(i) = usize::try_from(slot) {
            if i < RESERVOIR {
                self.wall_ns[i] = wall_ns;
                if let (Some(c), Some(slot)) = (cpu_ns, self.cpu_ns.get_mut(i)) {
                    *slot = c;
                }
            }
        }
    }

    fn cost(&self) -> CallCost {
        fn median_us(values: &[u64]) -> f64 {
            if values.is_empty() {
                return 0.0;
            }
            let mut v = values.to_vec();
            v.sort_unstable();
            let n = v.len();
            let mid = if n % 2 == 1 {
                v[n / 2] as f64
            } else {
                (v[n / 2 - 1] as f64 + v[n / 2] as f64) / 2.0
            };
            // Microseconds to a tenth: finer is noise.
            (mid / 100.0).round() / 10.0
        }
        CallCost {
            wall_us: median_us(&self.wall_ns),
            cpu_us: median_us(&self.cpu_ns),
        }
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// A [`CallObserver`] that keeps, per NVML function, a bounded sample of what each call cost,
/// and gives the medians as a [`CostProfile`]. A query that makes a known number of calls of
/// its function counts as that many calls of a share each (four ECC counters per
/// `memory_errors`); the queries whose cost is not that of one NVML function (the event
/// buffer, libcuda's answers, the MIG slot scan, GPM) are left out. Memory stays flat: at most
/// 1024 samples per function (`RESERVOIR`), a uniform sample of every call.
#[derive(Debug, Default)]
pub struct CostCollector {
    by_function: Mutex<HashMap<&'static str, Reservoir>>,
}

impl CostCollector {
    /// An empty collector.
    pub fn new() -> CostCollector {
        CostCollector::default()
    }

    /// Adds one call of `function` (for the calls made outside a [`TimedBackend`], such as
    /// `nvmlInit_v2` and `nvmlShutdown`).
    pub fn add(&self, function: &'static str, timing: Timing) {
        self.add_share(function, timing, 1);
    }

    fn add_share(&self, function: &'static str, timing: Timing, calls: u32) {
        let calls = u64::from(calls.max(1));
        let mut map = self
            .by_function
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        map.entry(function).or_default().add(
            nanos(timing.wall) / calls,
            timing.cpu.map(|c| nanos(c) / calls),
        );
    }

    /// The median cost of each function seen.
    pub fn profile(&self) -> CostProfile {
        let map = self
            .by_function
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        map.iter()
            .map(|(name, r)| (name.to_string(), r.cost()))
            .collect()
    }

    /// How many calls of `function` were seen.
    pub fn calls(&self, function: &str) -> u64 {
        let map = self
            .by_function
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        map.get(function).map_or(0, |r| r.seen)
    }
}

impl CallObserver for CostCollector {
    fn observe(&self, call: &CallRecord<'_>) {
        if let Some(n) = nvml_calls(call.query, call.nvml, call.outcome.is_ok()) {
            self.add_share(call.nvml, call.timing, n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One call as an observer saw it: (query, NVML function, device, arguments as written,
    /// value or error).
    type Seen = (String, String, Option<DeviceId>, String, bool);

    /// Every call of a snapshot.
    #[derive(Default)]
    struct Log(Mutex<Vec<Seen>>);

    impl CallObserver for Log {
        fn observe(&self, call: &CallRecord<'_>) {
            assert!(call
                .timing
                .cpu
                .is_none_or(|c| c <= call.timing.wall + Duration::from_millis(1)));
            self.0.lock().unwrap().push((
                call.query.as_str().into(),
                call.nvml.into(),
                call.device,
                format!("{:?}", call.args),
                call.outcome.is_ok(),
            ));
        }
    }

    #[test]
    fn the_timed_backend_answers_as_its_backend_and_reports_every_call() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/h100-mig.json");
        let fixture = crate::Fixture::load(path).unwrap();
        let replay = crate::ReplayBackend::new(fixture.clone());
        replay.count_calls(true);
        let log = Log::default();
        let timed = TimedBackend::new(crate::ReplayBackend::new(fixture), &log);
        // The same answers, with or without the decorator.
        assert_eq!(
            crate::recorder::snapshot(&timed),
            crate::recorder::snapshot(&replay)
        );
        let calls = log.0.lock().unwrap();
        assert_eq!(calls.len() as u64, replay.take_call_counts().total());
        // A system query has no device; a per-clock one names its domain; a MIG device that
        // does not answer a query reports the error.
        assert!(calls.contains(&(
            "driver_version".into(),
            "nvmlSystemGetDriverVersion".into(),
            None,
            "[]".into(),
            true
        )));
        assert!(calls.contains(&(
            "clock".into(),
            "nvmlDeviceGetClockInfo".into(),
            Some(DeviceId::Gpu(0)),
            "[Sm]".into(),
            true
        )));
        let mig = DeviceId::Mig {
            parent: 0,
            index: 0,
        };
        assert!(calls
            .iter()
            .any(|c| c.0 == "power_usage" && c.2 == Some(mig) && !c.4));
    }

    #[test]
    fn the_median_of_a_reservoir_is_the_middle_value_in_tenths_of_a_microsecond() {
        let mut r = Reservoir::default();
        for us in [5u64, 1, 3, 1000] {
            r.add(us * 1000, Some(us * 500));
        }
        // Even count: the mean of the two middle values.
        assert_eq!(
            r.cost(),
            CallCost {
                wall_us: 4.0,
                cpu_us: 2.0
            }
        );
        r.add(2_345, None);
        assert_eq!(r.cost().wall_us, 3.0);
    }

    #[test]
    fn a_reservoir_keeps_a_bounded_sample_of_a_long_run() {
        let mut r = Reservoir::default();
        for i in 0..100_000u64 {
            r.add(i, Some(i));
        }
        assert_eq!(r.seen, 100_000);
        assert_eq!(r.wall_ns.len(), RESERVOIR);
        // A uniform sample of 0..100000 has its median near 50000.
        let median_ns = r.cost().wall_us * 1000.0;
        assert!((40_000.0..60_000.0).contains(&median_ns), "{median_ns}");
    }

    #[test]
    fn only_calls_of_one_nvml_function_count_and_shares_are_split() {
        assert_eq!(nvml_calls(Query::events, "nvmlEventSetWait_v2", true), None);
        assert_eq!(
            nvml_calls(Query::cuda_device_order, "cuDeviceGetUuid", true),
            None
        );
        assert_eq!(
            nvml_calls(Query::power_usage, "nvmlDeviceGetPowerUsage", true),
            Some(1)
        );
        assert_eq!(
            nvml_calls(
                Query::memory_errors,
                "nvmlDeviceGetMemoryErrorCounter",
                false
            ),
            Some(4)
        );
    }

    #[test]
    fn a_profile_keeps_its_concurrency_beside_its_calls_and_an_old_one_reads_as_before() {
        let old = r#"{"nvmlInit_v2": {"wall_us": 9875.5, "cpu_us": 9817.2}}"#;
        let p: CostProfile = serde_json::from_str(old).unwrap();
        assert_eq!(p.concurrency, None);
        assert_eq!(p.len(), 1);
        assert_eq!(p["nvmlInit_v2"].wall_us, 9875.5);
        assert_eq!(serde_json::to_string(&p).unwrap(), old.replace(' ', ""));

        let new = r#"{"concurrency": "per-device", "nvmlInit_v2": {"wall_us": 1, "cpu_us": 1}}"#;
        let p: CostProfile = serde_json::from_str(new).unwrap();
        assert_eq!(p.concurrency, Some(Concurrency::PerDevice));
        assert_eq!(p.keys().collect::<Vec<_>>(), ["nvmlInit_v2"]);
        let again: CostProfile = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
        assert_eq!(again, p);

        let bad = r#"{"concurrency": "sometimes", "nvmlInit_v2": {"wall_us": 1, "cpu_us": 1}}"#;
        assert!(serde_json::from_str::<CostProfile>(bad).is_err());
    }

    /// The timeline is a typed member beside the calls: read back as itself, never as a call
    /// (the calls are flattened, so an untyped member would have been read as one and failed).
    #[test]
    fn a_profile_keeps_its_oneshot_timeline_beside_its_calls() {
        let mut p: CostProfile = [(
            "nvmlInit_v2".to_string(),
            CallCost {
                wall_us: 2.0,
                cpu_us: 1.0,
            },
        )]
        .into_iter()
        .collect();
        p.oneshot_timeline = Some(OneshotTimeline {
            command: "gpuscope snapshot --json".into(),
            exit_code: Some(0),
            wall_us: 30.0,
            cpu_us: Some(20.0),
            unaccounted_us: 1.0,
            steps: vec![TimelineStep {
                step: "nvmlInit".into(),
                device: None,
                thread: "main".into(),
                start_us: 1.0,
                wall_us: 28.0,
                cpu_us: Some(19.0),
                cpu_clock: CpuClock::Thread,
                parallel: false,
            }],
        });
        let text = serde_json::to_string(&p).unwrap();
        assert!(text.contains(r#""cpu_clock":"thread""#), "{text}");
        let again: CostProfile = serde_json::from_str(&text).unwrap();
        assert_eq!(again, p);
        assert_eq!(again.keys().collect::<Vec<_>>(), ["nvmlInit_v2"]);
        let wrong = text.replace(r#""cpu_clock":"thread""#, r#""cpu_clock":"wall""#);
        assert!(serde_json::from_str::<CostProfile>(&wrong).is_err());
    }
}
