//! The library's one global state: the fixture served through NVML (with its reference-counted
//! init), the fixture served through CUDA, and the last load error.

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use gpu_backend::{DeviceId, Fixture, GpuBackend, ReplayBackend, ReplayClock};

use crate::abi::nvmlReturn_t;
use crate::abi::ret;

/// The environment variable naming the fixture JSON file to serve (required).
pub const FIXTURE_ENV: &str = "GPUSCOPE_FAKE_NVML_FIXTURE";

/// The environment variable that pins the served frame (an index, clamped to the last frame).
/// Without it, frames follow wall time from the first init, looping.
pub const FRAME_ENV: &str = "GPUSCOPE_FAKE_NVML_FRAME";

/// The environment variable that overrides the device count `nvmlDeviceGetCount[_v2]` answers
/// (a `u32`), to test how clients treat a broken library that reports an absurd count. Only the
/// count changes: handles past the fixture's devices still answer
/// `NVML_ERROR_INVALID_ARGUMENT`.
pub const DEVICE_COUNT_ENV: &str = "GPUSCOPE_FAKE_NVML_DEVICE_COUNT";

/// The device count [`DEVICE_COUNT_ENV`] sets, if it is set to a `u32`.
pub(crate) fn device_count_override() -> Option<u32> {
    std::env::var(DEVICE_COUNT_ENV).ok()?.trim().parse().ok()
}

/// The environment variable naming a file: while it exists, every NVML call after init waits,
/// as a call into a hung driver does (for tests of callers that must not wait on one). A call
/// that starts waiting first creates the same path with `.waiting` appended, so a test knows
/// a call is stuck.
pub const HANG_ENV: &str = "GPUSCOPE_FAKE_NVML_HANG_WHILE";

/// The environment variable naming a file to which every NVML call served is appended, one
/// line each: `fake-nvml served FUNCTION device=DEVICE return=CODE` (`DEVICE` as gpuscope
/// writes a device, `0` or `0:1`, or `-` when the call names none), so that a test can count
/// the calls a client made. The line is written when the call returns, in one `write` to a
/// file opened for appending: a client's own log appended to the same file interleaves with it
/// in the order things happened. With call costs asked for ([`crate::costs::COSTS_ENV`]), the
/// line is written after the cost is spent.
pub const CALL_LOG_ENV: &str = "GPUSCOPE_FAKE_NVML_CALL_LOG";

thread_local! {
    /// Set by an init or shutdown that only counted (NVML was already initialised, or is still
    /// initialised after it, or was not initialised): such a call costs nothing on a real
    /// driver either.
    static ONLY_COUNTED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Every NVML call served passes through here as it returns: it spends what the call costs on
/// real hardware ([`crate::costs`], when [`crate::costs::COSTS_ENV`] asks), then appends it to
/// the call log ([`log_served`]).
pub(crate) fn served(function: &str, device: Option<DeviceId>, code: nvmlReturn_t) {
    if !ONLY_COUNTED.with(|c| c.replace(false)) {
        crate::costs::spend(function, device);
    }
    log_served(function, device, code);
}

/// Appends one served call to the file [`CALL_LOG_ENV`] names; nothing when it is unset. A
/// file that cannot be opened or written is given up on silently: the log is for tests, and
/// serving the call matters more.
fn log_served(function: &str, device: Option<DeviceId>, code: nvmlReturn_t) {
    static FILE: OnceLock<Option<Mutex<std::fs::File>>> = OnceLock::new();
    let Some(file) = FILE.get_or_init(|| {
        let path = std::env::var_os(CALL_LOG_ENV).filter(|p| !p.is_empty())?;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .ok()
            .map(Mutex::new)
    }) else {
        return;
    };
    let device = device.map_or_else(|| "-".to_string(), |d| d.to_string());
    let line = format!("fake-nvml served {function} device={device} return={code}\n");
    let mut file = file.lock().unwrap_or_else(PoisonError::into_inner);
    let _ = file.write_all(line.as_bytes());
}

/// Waits while the file named by [`HANG_ENV`] exists (see there); returns at once when the
/// variable is unset, as it is outside such tests.
pub(crate) fn hang_while_asked() {
    static PATH: OnceLock<Option<PathBuf>> = OnceLock::new();
    let Some(path) = PATH.get_or_init(|| {
        std::env::var_os(HANG_ENV)
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
    }) else {
        return;
    };
    if !path.exists() {
        return;
    }
    let mut waiting = path.clone().into_os_string();
    waiting.push(".waiting");
    let _ = std::fs::write(&waiting, b"");
    while path.exists() {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// What NVML calls are served from.
struct NvmlServed {
    backend: Arc<ReplayBackend>,
    /// True when the frame is chosen by hand (pinned or stepped), false on the wall clock.
    manual: bool,
    /// How the recording's clock maps onto this machine's.
    time: ReplayTime,
}

/// How the recording's clock (its sample and event timestamps) maps onto this machine's wall
/// clock, so that a client that asks by wall clock ("the samples of the last second") sees
/// what it would have seen live.
///
/// On the wall clock, the replay's start is the recording's start (its time 0), and both clocks
/// run together. On a frame chosen by hand, the moment the frame was chosen is that frame's
/// time in the recording. A fixture that does not say when it was recorded keeps its
/// timestamps as they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReplayTime {
    /// Wall microseconds minus recorded microseconds; `None`: served as recorded.
    offset_us: Option<i64>,
    /// Whether the replay follows the wall clock (events are then due at their own times).
    wall: bool,
}

/// Microseconds since the Unix epoch now.
pub(crate) fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

impl ReplayTime {
    /// The mapping for `backend`, whose frame has just been chosen (by hand) or whose wall
    /// clock has just started.
    fn now_for(backend: &ReplayBackend, wall: bool) -> ReplayTime {
        let start = gpu_backend::replay::recording_start_us(backend.fixture());
        let offset_us = start.map(|start| {
            let frame_ms = if wall { 0 } else { backend.frame().t_ms };
            let recorded = start.saturating_add(frame_ms.saturating_mul(1000));
            let diff = i128::from(now_us()) - i128::from(recorded);
            i64::try_from(diff).unwrap_or(if diff < 0 { i64::MIN } else { i64::MAX })
        });
        ReplayTime { offset_us, wall }
    }

    /// A recorded timestamp on this machine's clock (1 at the least: NVML's timestamps are
    /// above 0).
    pub(crate) fn to_wall(self, recorded_us: u64) -> u64 {
        match self.offset_us {
            None => recorded_us,
            Some(o) => clamp(i128::from(recorded_us) + i128::from(o)).max(1),
        }
    }

    /// A wall-clock timestamp a client passed, on the recording's clock; 0 (everything) stays
    /// 0.
    pub(crate) fn to_recorded(self, wall_us: u64) -> u64 {
        match self.offset_us {
            _ if wall_us == 0 => 0,
            None => wall_us,
            Some(o) => clamp(i128::from(wall_us) - i128::from(o)),
        }
    }

    /// The recording's time now, when the replay follows the wall clock and the recording
    /// says when it was made; `None` otherwise (events are then due with their frame).
    pub(crate) fn recorded_now(self) -> Option<u64> {
        self.wall
            .then_some(self.offset_us)
            .flatten()
            .map(|_| self.to_recorded(now_us().max(1)))
    }
}

fn clamp(v: i128) -> u64 {
    u64::try_from(v.max(0)).unwrap_or(u64::MAX)
}

/// What CUDA calls are served from, fixed at `cuInit`.
pub(crate) struct CudaServed {
    /// The fixture's replay.
    pub backend: Arc<ReplayBackend>,
    /// The devices CUDA shows, by ordinal: their UUID and the NVML device with that UUID.
    pub visible: Vec<(String, Option<DeviceId>)>,
}

struct State {
    nvml_refs: u32,
    nvml: Option<NvmlServed>,
    cuda: Option<Arc<CudaServed>>,
    last_error: Option<String>,
}

static STATE: Mutex<State> = Mutex::new(State {
    nvml_refs: 0,
    nvml: None,
    cuda: None,
    last_error: None,
});

fn lock() -> MutexGuard<'static, State> {
    // A panic is caught at the ABI boundary; the state it may have left is still usable.
    STATE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Reads the fixture named by [`FIXTURE_ENV`], or says why not in one line.
fn load_fixture() -> Result<Arc<Fixture>, String> {
    let Some(path) = std::env::var_os(FIXTURE_ENV) else {
        return Err(format!(
            "fake-nvml: {FIXTURE_ENV} is not set; set it to the path of a gpuscope fixture JSON file"
        ));
    };
    if path.is_empty() {
        return Err(format!(
            "fake-nvml: {FIXTURE_ENV} is empty; set it to the path of a gpuscope fixture JSON file"
        ));
    }
    Fixture::load(&path)
        .map(Arc::new)
        .map_err(|e| format!("fake-nvml: cannot serve the fixture named by {FIXTURE_ENV}: {e}"))
}

/// Reads [`FRAME_ENV`]: `Ok(None)` when unset.
fn pinned_frame() -> Result<Option<usize>, String> {
    match std::env::var(FRAME_ENV) {
        Err(std::env::VarError::NotPresent) => Ok(None),
        Ok(s) if s.trim().is_empty() => Ok(None),
        Ok(s) => s.trim().parse::<usize>().map(Some).map_err(|_| {
            format!("fake-nvml: {FRAME_ENV}={s:?} is not a frame index (a non-negative integer)")
        }),
        Err(std::env::VarError::NotUnicode(s)) => Err(format!(
            "fake-nvml: {FRAME_ENV}={s:?} is not a frame index (a non-negative integer)"
        )),
    }
}

fn report(st: &mut State, message: String) {
    // Never panic on a closed stderr.
    let _ = writeln!(std::io::stderr(), "{message}");
    st.last_error = Some(message);
}

/// `nvmlInit*`: the first init loads the fixture; later ones only count.
pub(crate) fn nvml_init() -> nvmlReturn_t {
    let mut st = lock();
    if st.nvml_refs > 0 {
        st.nvml_refs = st.nvml_refs.saturating_add(1);
        ONLY_COUNTED.with(|c| c.set(true));
        return ret::SUCCESS;
    }
    let loaded = load_fixture().and_then(|f| {
        let frame = pinned_frame()?;
        let path = std::env::var_os(FIXTURE_ENV).unwrap_or_default();
        let costs = crate::costs::load(&f, &path.to_string_lossy())?;
        Ok((f, frame, costs))
    });
    let loaded = match loaded {
        Ok((fixture, frame, costs)) => {
            crate::costs::install(costs);
            Ok((fixture, frame))
        }
        Err(e) => {
            crate::costs::install(None);
            Err(e)
        }
    };
    match loaded {
        Ok((fixture, Some(frame))) => {
            let backend = ReplayBackend::new(fixture);
            backend.set_frame(frame);
            let time = ReplayTime::now_for(&backend, false);
            st.nvml = Some(NvmlServed {
                backend: Arc::new(backend),
                manual: true,
                time,
            });
        }
        Ok((fixture, None)) => {
            let backend = ReplayBackend::with_clock(fixture, ReplayClock::wall(true));
            let time = ReplayTime::now_for(&backend, true);
            st.nvml = Some(NvmlServed {
                backend: Arc::new(backend),
                manual: false,
                time,
            });
        }
        Err(message) => {
            report(&mut st, message);
            return ret::DRIVER_NOT_LOADED;
        }
    }
    st.nvml_refs = 1;
    st.last_error = None;
    ret::SUCCESS
}

/// `nvmlShutdown`: the last shutdown lets the fixture go.
pub(crate) fn nvml_shutdown() -> nvmlReturn_t {
    let mut st = lock();
    if st.nvml_refs == 0 {
        // Nothing to end: no cost either.
        ONLY_COUNTED.with(|c| c.set(true));
        return ret::UNINITIALIZED;
    }
    st.nvml_refs -= 1;
    if st.nvml_refs == 0 {
        st.nvml = None;
    } else {
        ONLY_COUNTED.with(|c| c.set(true));
    }
    ret::SUCCESS
}

/// The replay NVML calls are served from, and how its clock maps onto this machine's, if NVML
/// is initialised.
pub(crate) fn nvml_served() -> Option<(Arc<ReplayBackend>, ReplayTime)> {
    let st = lock();
    if st.nvml_refs == 0 {
        return None;
    }
    st.nvml.as_ref().map(|s| (Arc::clone(&s.backend), s.time))
}

/// Counts the frames set by hand, so that a waiting call wakes when one is (see
/// [`wait_for_frame_change`]).
static FRAMES_SET: (Mutex<u64>, Condvar) = (Mutex::new(0), Condvar::new());

/// Waits up to `timeout` for the served frame to change: until a frame is set by hand, or
/// until a wall-clock replay's next frame is due, whichever comes first.
pub(crate) fn wait_for_frame_change(backend: &ReplayBackend, timeout: Duration) {
    let timeout = backend.next_frame_in().map_or(timeout, |d| d.min(timeout));
    wait_for_frame_set(timeout);
}

/// Waits up to `timeout`, or until a frame is set by hand.
pub(crate) fn wait_for_frame_set(timeout: Duration) {
    let (count, changed) = &FRAMES_SET;
    let guard = count.lock().unwrap_or_else(PoisonError::into_inner);
    let seen = *guard;
    let _ = changed
        .wait_timeout_while(guard, timeout, |now| *now == seen)
        .unwrap_or_else(PoisonError::into_inner);
}

/// Serves frame `index` from now on (switching a wall clock to a manual one).
pub(crate) fn set_frame(index: usize) -> nvmlReturn_t {
    let mut st = lock();
    let Some(served) = st.nvml.as_mut() else {
        return ret::UNINITIALIZED;
    };
    if !served.manual {
        served.backend = Arc::new(ReplayBackend::new(Arc::clone(served.backend.fixture())));
        served.manual = true;
    }
    served.backend.set_frame(index);
    served.time = ReplayTime::now_for(&served.backend, false);
    drop(st);
    let (count, changed) = &FRAMES_SET;
    *count.lock().unwrap_or_else(PoisonError::into_inner) += 1;
    changed.notify_all();
    ret::SUCCESS
}

/// `cuInit`: the first call loads the fixture and fixes the visible devices.
pub(crate) fn cuda_init() -> Result<(), String> {
    let mut st = lock();
    if st.cuda.is_some() {
        return Ok(());
    }
    let fixture = match load_fixture() {
        Ok(f) => f,
        Err(message) => {
            report(&mut st, message.clone());
            return Err(message);
        }
    };
    let backend = Arc::new(ReplayBackend::new(fixture));
    let order = backend.cuda_device_order().unwrap_or_default();
    let visible_env = std::env::var("CUDA_VISIBLE_DEVICES").ok();
    let visible = visible_devices(&order, visible_env.as_deref())
        .into_iter()
        .map(|uuid| {
            let nvml = backend
                .fixture()
                .physical_ids()
                .find(|&id| backend.uuid(id).is_ok_and(|u| u == uuid));
            (uuid, nvml)
        })
        .collect();
    st.cuda = Some(Arc::new(CudaServed { backend, visible }));
    Ok(())
}

/// What CUDA calls are served from, if `cuInit` succeeded.
pub(crate) fn cuda_served() -> Option<Arc<CudaServed>> {
    lock().cuda.clone()
}

/// The fixture for `cuDriverGetVersion`, which works before `cuInit`.
pub(crate) fn cuda_fixture() -> Option<Arc<Fixture>> {
    if let Some(c) = cuda_served() {
        return Some(Arc::clone(c.backend.fixture()));
    }
    load_fixture().ok()
}

/// Applies `CUDA_VISIBLE_DEVICES` to the CUDA order, as CUDA does for the simple forms: a comma
/// list of ordinals or (prefixes of) `GPU-` UUIDs. The list ends at the first entry that is
/// none of these, out of range, ambiguous or repeated. Unset means every device.
pub(crate) fn visible_devices(order: &[String], env: Option<&str>) -> Vec<String> {
    let Some(env) = env else {
        return order.to_vec();
    };
    let mut out: Vec<String> = Vec::new();
    for entry in env.split(',') {
        let entry = entry.trim();
        let found = if !entry.is_empty() && entry.bytes().all(|b| b.is_ascii_digit()) {
            entry.parse::<usize>().ok().and_then(|i| order.get(i))
        } else if entry.starts_with("GPU-") {
            let mut matches = order.iter().filter(|u| u.starts_with(entry));
            match (matches.next(), matches.next()) {
                (Some(u), None) => Some(u),
                _ => None,
            }
        } else {
            None
        };
        match found {
            Some(u) if !out.contains(u) => out.push(u.clone()),
            _ => break,
        }
    }
    out
}

/// The message of the last failed init (NVML or CUDA), if the last attempt failed.
pub fn last_init_error() -> Option<String> {
    lock().last_error.clone()
}

#[cfg(test)]
mod tests {
    use super::visible_devices;

    #[test]
    fn cuda_visible_devices_simple_forms() {
        let order: Vec<String> = ["GPU-aaaa-1", "GPU-bbbb-2", "GPU-abcd-3"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(visible_devices(&order, None), order);
        assert!(visible_devices(&order, Some("")).is_empty());
        assert_eq!(
            visible_devices(&order, Some("2,0")),
            vec!["GPU-abcd-3", "GPU-aaaa-1"]
        );
        // The list ends at the first bad entry: out of range, repeated, ambiguous or unknown.
        assert_eq!(visible_devices(&order, Some("1,7,0")), vec!["GPU-bbbb-2"]);
        assert_eq!(visible_devices(&order, Some("1,1,0")), vec!["GPU-bbbb-2"]);
        assert_eq!(
            visible_devices(&order, Some("GPU-bb, GPU-a")),
            vec!["GPU-bbbb-2"]
        );
        assert_eq!(
            visible_devices(&order, Some("GPU-ab,0")),
            vec!["GPU-abcd-3", "GPU-aaaa-1"]
        );
        assert!(visible_devices(&order, Some("MIG-x,0")).is_empty());
        assert!(visible_devices(&order, Some("-1")).is_empty());
    }
}
