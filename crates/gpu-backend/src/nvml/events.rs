//! The event listener: one thread per [`super::NvmlBackend`] that waits on an NVML event set
//! (`nvmlEventSetCreate`, `nvmlDeviceRegisterEvents`, `nvmlEventSetWait_v2`,
//! `nvmlEventSetFree`) and keeps what it receives, so that [`crate::GpuBackend::events`] reads
//! a buffer and never waits on the driver.
//!
//! nvml-wrapper's `EventSet` borrows its `Nvml` for its whole life, which a thread owned by the
//! backend beside that `Nvml` cannot hold; so the listener calls the same four entry points
//! through the raw function table. It registers each GPU for the kinds it is asked for that the
//! GPU supports (`nvmlDeviceGetSupportedEventTypes`): by default those that tell about health
//! ([`EventKind::HEALTH`]: XID, ECC, power source, DRAM retirement, poison, GPU unavailable,
//! recovery action, MIG configuration), not clock or P-state changes, which a power-capped GPU
//! sends by the dozen each second, each waking the thread (docs/fixture-format.md, "Events",
//! says what that cost).
//! It stamps each event with the time it arrived (NVML's event carries none) and keeps the
//! newest [`MAX_EVENTS`] per GPU.

use std::collections::{HashMap, VecDeque};
use std::os::raw::c_uint;
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nvml_wrapper_sys::bindings as sys;

use super::conv::{check, error_from_return, make_object, symbol};
use super::RawDevice;
use crate::cost::logged;
use crate::error::{BackendError, Result};
use crate::types::{DeviceId, EventKind, GpuEvent, MAX_EVENTS};

/// How long one `nvmlEventSetWait_v2` waits before the thread looks whether it should stop: the
/// thread ends (and frees its set) at most this long after the backend is dropped, which does
/// not wait for it. Each timeout is a wake-up of an idle process: 250 ms is four a second.
const WAIT_MS: c_uint = 250;

/// An event set, an opaque token of NVML's.
#[derive(Clone, Copy)]
struct RawSet(sys::nvmlEventSet_t);

// SAFETY: like `RawDevice`: a token NVML interprets itself, never dereferenced here. NVML's
// event calls are thread safe; the set is used and freed by the one thread that waits on it.
unsafe impl Send for RawSet {}

/// The events received so far, per GPU index.
type Received = Mutex<HashMap<u32, VecDeque<GpuEvent>>>;

/// A running listener. Dropping it tells the thread to stop without waiting for it: the thread
/// frees the event set when its wait in progress returns, then lets go of the library.
pub(super) struct Listener {
    stop: Arc<AtomicBool>,
    received: Arc<Received>,
    /// Why a GPU could not be registered, by index; a GPU absent here is registered.
    refused: HashMap<u32, BackendError>,
    /// The kinds each registered GPU listens for (NVML's bits), by index.
    registered: HashMap<u32, u64>,
    thread: Option<JoinHandle<()>>,
    /// Closed by the thread once it has freed the set and let go of the library (in a mutex
    /// only to be `Sync`).
    done: Mutex<mpsc::Receiver<()>>,
}

impl Listener {
    /// Creates an event set, registers `gpus` (index and handle) on it for the event kinds in
    /// `mask` (NVML's bits) that each supports, and starts the thread,
    /// which holds `library` (what keeps `lib` initialised and loaded) until it has freed the
    /// set. An error when the library has no event set (an old driver, or no event functions).
    pub(super) fn start(
        lib: &sys::NvmlLib,
        gpus: &[(u32, RawDevice)],
        mask: u64,
        library: Arc<dyn Send + Sync>,
    ) -> Result<Listener> {
        let create = symbol(&lib.nvmlEventSetCreate)?;
        let register = symbol(&lib.nvmlDeviceRegisterEvents)?;
        let supported = symbol(&lib.nvmlDeviceGetSupportedEventTypes)?;
        let wait = symbol(&lib.nvmlEventSetWait_v2)?;
        let free = symbol(&lib.nvmlEventSetFree)?;
        let set: sys::nvmlEventSet_t = make_object(
            "nvmlEventSetCreate",
            "NVML returned success with a null event set",
            // SAFETY: the library's own entry point with a writable out-pointer.
            |out| unsafe { create(out) },
        )?;
        let mut refused = HashMap::new();
        let mut registered = HashMap::new();
        for &(index, RawDevice(handle)) in gpus {
            let device = Some(DeviceId::Gpu(index));
            let mut supported_mask: std::os::raw::c_ulonglong = 0;
            let answer = logged("nvmlDeviceGetSupportedEventTypes", device, || {
                // SAFETY: a live handle of this library and a writable out-pointer.
                check(unsafe { supported(handle, &mut supported_mask) })
                    .map(|()| Bits(supported_mask))
            })
            .and_then(|Bits(supported_mask)| {
                let wanted = supported_mask & mask & EventKind::all_bits();
                if wanted == 0 {
                    return Err(BackendError::NotSupported);
                }
                logged("nvmlDeviceRegisterEvents", device, || {
                    // SAFETY: a live handle and the set created above.
                    check(unsafe { register(handle, wanted, set) })
                })
                .map(|()| wanted)
            });
            match answer {
                Ok(wanted) => {
                    registered.insert(index, wanted);
                }
                Err(e) => {
                    refused.insert(index, e);
                }
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let received: Arc<Received> = Arc::default();
        let handles: Vec<(usize, u32)> = gpus
            .iter()
            .map(|&(index, RawDevice(h))| (h as usize, index))
            .collect();
        let (finished, done) = mpsc::channel::<()>();
        let thread = {
            let stop = Arc::clone(&stop);
            let received = Arc::clone(&received);
            let set = RawSet(set);
            std::thread::Builder::new()
                .name("gpuscope-nvml-events".into())
                .spawn(move || {
                    listen(set, wait, &handles, &stop, &received);
                    // SAFETY: the set created in `start`; this thread was its only user.
                    let _ = logged("nvmlEventSetFree", None, || check(unsafe { free(set.0) }));
                    drop(library);
                    drop(finished);
                })
                .map_err(|e| BackendError::Other(format!("cannot start the event thread: {e}")))
        };
        let thread = match thread {
            Ok(t) => t,
            Err(e) => {
                // SAFETY: the set created above, which nothing waits on (the thread never ran).
                unsafe { free(set) };
                return Err(e);
            }
        };
        Ok(Listener {
            stop,
            received,
            refused,
            registered,
            thread: Some(thread),
            done: Mutex::new(done),
        })
    }

    /// The kinds GPU `index` is registered for (those asked for that it supports), in NVML's
    /// bit order, or why it could not be registered.
    pub(super) fn kinds(&self, index: u32) -> Result<Vec<EventKind>> {
        if let Some(e) = self.refused.get(&index) {
            return Err(e.clone());
        }
        let mask = self
            .registered
            .get(&index)
            .copied()
            .ok_or(BackendError::InvalidArgument)?;
        Ok(EventKind::ALL
            .into_iter()
            .filter(|k| k.nvml_bit() & mask != 0)
            .collect())
    }

    /// The events received about GPU `index` newer than `since_us`, oldest first.
    pub(super) fn events(&self, index: u32, since_us: u64) -> Result<Vec<GpuEvent>> {
        if let Some(e) = self.refused.get(&index) {
            return Err(e.clone());
        }
        let received = self.received.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(received
            .get(&index)
            .map(|list| {
                list.iter()
                    .filter(|e| e.timestamp_us > since_us)
                    .copied()
                    .collect()
            })
            .unwrap_or_default())
    }
}

impl Listener {
    /// Stops the thread and waits until it has freed the set and let go of the library: at
    /// most `WAIT_MS`.
    pub(super) fn stop_and_wait(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }

    /// Stops the thread and waits until it has freed the set and let go of the library, or
    /// `limit` has passed (a wait stuck in a hung driver never returns): true when it ended.
    pub(super) fn stop_and_wait_at_most(self, limit: Duration) -> bool {
        self.stop.store(true, Ordering::Relaxed);
        // The sender is dropped, never used: the receive ends when the thread does.
        let done = self.done.lock().unwrap_or_else(PoisonError::into_inner);
        done.recv_timeout(limit) == Err(mpsc::RecvTimeoutError::Disconnected)
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        // The thread looks at `stop` at least every `WAIT_MS`, then frees the set; nobody waits
        // for it here (see `stop_and_wait`).
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Microseconds since the Unix epoch now, 1 at the least.
fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(1, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .max(1)
}

/// The thread's body: waits for events until told to stop.
fn listen(
    set: RawSet,
    wait: unsafe extern "C" fn(
        sys::nvmlEventSet_t,
        *mut sys::nvmlEventData_t,
        c_uint,
    ) -> sys::nvmlReturn_t,
    handles: &[(usize, u32)],
    stop: &AtomicBool,
    received: &Received,
) {
    while !stop.load(Ordering::Relaxed) {
        let mut data = sys::nvmlEventData_t {
            device: ptr::null_mut(),
            eventType: 0,
            eventData: 0,
            gpuInstanceId: 0,
            computeInstanceId: 0,
        };
        let logging = crate::cost::calls_logged();
        // SAFETY: the set stays alive until this thread frees it after the loop, the library
        // stays up while the thread holds its session, and `data` is a writable
        // `nvmlEventData_t`.
        let (code, timing) = crate::cost::time(|| unsafe { wait(set.0, &mut data, WAIT_MS) });
        if logging {
            log_wait(code, &data, handles, timing);
        }
        if code != sys::nvmlReturn_enum_NVML_SUCCESS {
            if error_from_return(code) != BackendError::Timeout {
                // A failing wait (a GPU lost, the driver gone) must not spin: pause as long as
                // a wait would have.
                std::thread::sleep(std::time::Duration::from_millis(WAIT_MS.into()));
            }
            continue;
        }
        let Some(&(_, index)) = handles.iter().find(|(h, _)| *h == data.device as usize) else {
            continue;
        };
        let Some(kind) = EventKind::from_nvml_bit(data.eventType) else {
            continue;
        };
        let mut received = received.lock().unwrap_or_else(PoisonError::into_inner);
        let list = received.entry(index).or_default();
        // Strictly increasing per GPU, so that "newer than" never loses an event.
        let after = list.back().map_or(0, |e| e.timestamp_us.saturating_add(1));
        list.push_back(GpuEvent {
            timestamp_us: now_us().max(after),
            kind,
            data: data.eventData,
        });
        while list.len() > MAX_EVENTS {
            list.pop_front();
        }
    }
}

/// An event mask as the log writes it, in hexadecimal as NVML documents its bits.
struct Bits(u64);

impl std::fmt::Debug for Bits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// Logs one `nvmlEventSetWait_v2` (see [`crate::cost::CallLog`]): the event received, with its
/// GPU, or the error (`timeout` when none came).
fn log_wait(
    code: sys::nvmlReturn_t,
    data: &sys::nvmlEventData_t,
    handles: &[(usize, u32)],
    timing: crate::cost::Timing,
) {
    let error = (code != sys::nvmlReturn_enum_NVML_SUCCESS).then(|| error_from_return(code));
    let device = error
        .is_none()
        .then(|| handles.iter().find(|(h, _)| *h == data.device as usize))
        .flatten()
        .map(|&(_, index)| DeviceId::Gpu(index));
    let received = (Bits(data.eventType), data.eventData);
    crate::cost::log_nvml_call(
        "nvmlEventSetWait_v2",
        device,
        timing,
        match &error {
            None => Ok(&received),
            Some(e) => Err(e),
        },
    );
}
