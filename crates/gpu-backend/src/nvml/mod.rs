//! The NVML backend: [`NvmlBackend`] answers every [`GpuBackend`] query from the NVIDIA driver's
//! management library (`libnvidia-ml.so.1`), which nvml-wrapper loads at run time.
//!
//! Most queries go through nvml-wrapper's safe API. The ones where that API would lose
//! information or call only one version of an entry point go straight to the library's raw
//! functions (nvml-wrapper-sys): strings are read from bounded buffers, enums are read as NVML's
//! numbers, process lists fall back from `_v3` to `_v2` to v1, memory info falls back from v2 to
//! v1, and NVLink counters are read as field values with a link scope.

pub mod conv;
mod events;
mod gpm;
pub mod libcuda;

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fmt;
use std::mem::{self, ManuallyDrop};
use std::os::raw::{c_char, c_uint};
use std::path::PathBuf;
use std::ptr;
use std::sync::{Arc, OnceLock, PoisonError, RwLock};

use nvml_wrapper::enum_wrappers::device::TemperatureSensor;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings as sys;

use crate::backend::GpuBackend;
use crate::error::{nvml_codes, BackendError, Result};
use crate::types::{
    pcie_link_max_speed_from_nvml, AddressingMode, Architecture, Bar1MemoryInfo, BbxFlush, Brand,
    BridgeChip, ClockEventCounter, ClockType, CodecUtilization, ComputeCapability, ComputeMode,
    CurrentDefault, CurrentPending, DeviceAttributes, DeviceId, DriverModel, EccCounter,
    EccErrorKind, EventKind, FabricInfo, GpmMetrics, GpuEvent, GpuOperationMode, GpuRecoveryAction,
    HostVgpuMode, InactiveRemappedRows, InforomObject, LocationEccCounts, MemoryInfo,
    MemoryLocation, NvLinkCounters, NvLinkErrorCounters, PciAddress, PciClass, PciInfo,
    PcieDirection, PlatformInfo, PowerLimits, PowerScope, PowerSmoothing, ProcessInfo,
    ProcessUtilizationSample, ProtectedMemory, RemappedRows, RepairStatus, RetirementCause,
    RowRemapperHistogram, ScopedPowerLimits, SessionStats, SramEccStatus, TemperatureThreshold,
    Utilization, VgpuCapability, VirtualizationMode, MAX_DEVICE_COUNT, MAX_FANS, NVLINK_MAX_LINKS,
};
use conv::{check, error_from_return, error_from_wrapper, first_found, symbol};
use libcuda::{LibcudaError, LibcudaReport};

/// The environment variable [`NvmlBackend::from_env`] reads the library path from.
pub const LIBRARY_ENV_VAR: &str = "GPUSCOPE_NVML_LIB";

/// Extra entries allocated beyond the count NVML reported, so that a list that grows between the
/// two calls of the count protocol usually still fits.
const LIST_HEADROOM: c_uint = 8;

/// Entries of the buffer a list is first asked for with (see `read_list`).
const LIST_FIRST_CAPACITY: c_uint = 64;

/// How many times a list is asked for again when it keeps outgrowing the buffer.
const LIST_ATTEMPTS: usize = 4;

/// The longest list believed from NVML. A larger count is a broken library, and allocating for
/// it could exhaust memory.
const LIST_MAX_LEN: c_uint = 1 << 16;

/// How long dropping the backend waits for the event listener to end when calls are logged
/// (its wait in progress lasts at most 250 ms; a wait stuck in a hung driver is not waited
/// for longer).
const LOGGED_LISTENER_WAIT: std::time::Duration = std::time::Duration::from_millis(600);

/// The most MIG slots probed under one GPU, whatever `nvmlDeviceGetMaxMigDeviceCount` says.
/// Real GPUs have at most seven.
const MIG_SLOTS_MAX: c_uint = 64;

/// `NVML_STRUCT_VERSION(Memory, 2)`: the size of `nvmlMemory_v2_t` with the version in the top
/// byte.
const MEMORY_V2_VERSION: c_uint = (mem::size_of::<sys::nvmlMemory_v2_t>() as c_uint) | (2 << 24);

/// The signature shared by NVML's device string queries (name, UUID, serial, ...).
type DeviceStringFn =
    unsafe extern "C" fn(sys::nvmlDevice_t, *mut c_char, c_uint) -> sys::nvmlReturn_t;

/// The signature shared by NVML's system string queries (driver and NVML versions).
type SystemStringFn = unsafe extern "C" fn(*mut c_char, c_uint) -> sys::nvmlReturn_t;

/// The signature shared by the `_v2` and `_v3` process-list queries, which both fill
/// `nvmlProcessInfo_v2_t`.
type ProcessListFn = unsafe extern "C" fn(
    sys::nvmlDevice_t,
    *mut c_uint,
    *mut sys::nvmlProcessInfo_v2_t,
) -> sys::nvmlReturn_t;

/// The most retired pages believed from NVML per cause. NVML documents no maximum; a GPU is
/// replaced long before it retires this many, and a larger count is refused as an error.
const MAX_RETIRED_PAGES: c_uint = 4096;

/// Calls a raw NVML device query that takes the device handle, an argument by value if given
/// (NVML's number of a clock, a threshold, ...), and one out-parameter, and yields what NVML
/// wrote there. Returns early from the enclosing function on any error.
macro_rules! query_one {
    ($self:expr, $id:expr, $func:ident $(, $arg:expr)?) => {{
        let handle = $self.handle($id)?;
        let func = symbol(&$self.lib().$func)?;
        let mut out = Default::default();
        // SAFETY: `func` is the entry point of that name in the loaded library, `handle` is a
        // live device handle from the same library, the argument is a plain number passed by
        // value, and `out` is a writable value of exactly the type the signature's out-pointer
        // names.
        check(unsafe { func(handle, $($arg,)? &mut out) })?;
        out
    }};
}

/// Like `query_one!` for queries with two out-parameters (current and pending state).
macro_rules! query_two {
    ($self:expr, $id:expr, $func:ident) => {{
        let handle = $self.handle($id)?;
        let func = symbol(&$self.lib().$func)?;
        let mut first = Default::default();
        let mut second = Default::default();
        // SAFETY: as in `query_one!`; both out-parameters are writable values of the types the
        // signature names.
        check(unsafe { func(handle, &mut first, &mut second) })?;
        (first, second)
    }};
}

/// Writes the [`GpuBackend`] methods whose body is one call of a common form, a row each, so
/// that the impl below spells out only where NVML is irregular. The rows come in groups, one
/// per form, and a row may carry attributes (its doc comment):
///
/// * `string { METHOD = FUNC, SIZE; }`: NVML's device string `FUNC` read into a buffer of
///   `sys::SIZE` bytes, the size NVML documents for it;
/// * `raw { METHOD -> TYPE = FUNC; }`: the one out-parameter of the raw `FUNC` (`query_one!`);
/// * `code { METHOD -> TYPE = FUNC; }`: the same, NVML's number read as `TYPE::from_nvml`;
/// * `enable { METHOD = FUNC; }`: the same, an `nvmlEnableState_t` read as a bool;
/// * `newer_or_older { METHOD -> TYPE = FUNC or OLDER; }`: `FUNC`'s one out-parameter,
///   through `OLDER` on drivers without `FUNC`;
/// * `per_fan { METHOD = FUNC; }`: the raw `FUNC` of one fan (NVML checks the fan index);
/// * `wrapper { METHOD -> TYPE = CALL(ARGS); }`: nvml-wrapper's `Device::CALL`;
/// * `converted { METHOD -> TYPE = CALL() => CONVERT; }`: the same, its answer passed by
///   reference to `CONVERT`;
/// * `clock { METHOD = CALL; }`: nvml-wrapper's `Device::CALL` of one clock domain;
/// * `details { METHOD(ARG: TYPE, ...) -> TYPE; }`: the function of that name in `details.rs`.
macro_rules! nvml_getters {
    () => {};
    (string { $($(#[$attr:meta])* $method:ident = $func:ident, $size:ident;)* }
        $($rest:tt)*) => {
        $(
            $(#[$attr])*
            fn $method(&self, id: DeviceId) -> Result<String> {
                self.device_string(id, &self.lib().$func, sys::$size)
            }
        )*
        nvml_getters! { $($rest)* }
    };
    (raw { $($(#[$attr:meta])* $method:ident -> $ty:ty = $func:ident;)* } $($rest:tt)*) => {
        $(
            $(#[$attr])*
            fn $method(&self, id: DeviceId) -> Result<$ty> {
                Ok(query_one!(self, id, $func))
            }
        )*
        nvml_getters! { $($rest)* }
    };
    (code { $($(#[$attr:meta])* $method:ident -> $ty:ident = $func:ident;)* } $($rest:tt)*) => {
        $(
            $(#[$attr])*
            fn $method(&self, id: DeviceId) -> Result<$ty> {
                Ok($ty::from_nvml(query_one!(self, id, $func)))
            }
        )*
        nvml_getters! { $($rest)* }
    };
    (enable { $($(#[$attr:meta])* $method:ident = $func:ident;)* } $($rest:tt)*) => {
        $(
            $(#[$attr])*
            fn $method(&self, id: DeviceId) -> Result<bool> {
                conv::enable_state(query_one!(self, id, $func))
            }
        )*
        nvml_getters! { $($rest)* }
    };
    (newer_or_older {
        $($(#[$attr:meta])* $method:ident -> $ty:ty = $func:ident or $older:ident;)*
    } $($rest:tt)*) => {
        $(
            $(#[$attr])*
            fn $method(&self, id: DeviceId) -> Result<$ty> {
                let handle = self.handle(id)?;
                let lib = self.lib();
                first_found(&[&lib.$func, &lib.$older], |func| {
                    let mut out = Default::default();
                    // SAFETY: a live handle and a writable out-pointer of the type both entry
                    // points name.
                    check(unsafe { func(handle, &mut out) }).map(|()| out)
                })
            }
        )*
        nvml_getters! { $($rest)* }
    };
    (per_fan { $($(#[$attr:meta])* $method:ident = $func:ident;)* } $($rest:tt)*) => {
        $(
            $(#[$attr])*
            fn $method(&self, id: DeviceId, fan: u32) -> Result<u32> {
                let handle = self.handle(id)?;
                let func = symbol(&self.lib().$func)?;
                let mut speed: c_uint = 0;
                // SAFETY: a live handle and a writable out-pointer; NVML checks the fan index
                // itself.
                check(unsafe { func(handle, fan, &mut speed) })?;
                Ok(speed)
            }
        )*
        nvml_getters! { $($rest)* }
    };
    (wrapper {
        $($(#[$attr:meta])* $method:ident -> $ty:ty = $call:ident($($arg:expr),*);)*
    } $($rest:tt)*) => {
        $(
            $(#[$attr])*
            fn $method(&self, id: DeviceId) -> Result<$ty> {
                self.with_device(id, |d| d.$call($($arg),*))
            }
        )*
        nvml_getters! { $($rest)* }
    };
    (converted {
        $($(#[$attr:meta])* $method:ident -> $ty:ty = $call:ident() => $convert:path;)*
    } $($rest:tt)*) => {
        $(
            $(#[$attr])*
            fn $method(&self, id: DeviceId) -> Result<$ty> {
                let answer = self.with_device(id, |d| d.$call())?;
                Ok($convert(&answer))
            }
        )*
        nvml_getters! { $($rest)* }
    };
    (clock { $($(#[$attr:meta])* $method:ident = $call:ident;)* } $($rest:tt)*) => {
        $(
            $(#[$attr])*
            fn $method(&self, id: DeviceId, clock: ClockType) -> Result<u32> {
                self.with_device(id, |d| d.$call(conv::clock_to_wrapper(clock)))
            }
        )*
        nvml_getters! { $($rest)* }
    };
    (details {
        $($(#[$attr:meta])* $method:ident($($arg:ident: $argty:ty),*) -> $ty:ty;)*
    } $($rest:tt)*) => {
        $(
            $(#[$attr])*
            fn $method(&self, id: DeviceId $(, $arg: $argty)*) -> Result<$ty> {
                details::$method(self, id $(, $arg)*)
            }
        )*
        nvml_getters! { $($rest)* }
    };
}

mod details;

/// A raw NVML device handle, kept so that a physical GPU is looked up only once.
#[derive(Clone, Copy)]
struct RawDevice(sys::nvmlDevice_t);

// SAFETY: an `nvmlDevice_t` is an opaque token that NVML hands out and interprets itself; this
// crate never dereferences it. NVML is documented as thread safe, and a handle stays valid on any
// thread until `nvmlShutdown`, which only happens when the owning `NvmlBackend` is dropped.
unsafe impl Send for RawDevice {}
// SAFETY: see `Send` above; sharing the token between threads only copies the pointer value.
unsafe impl Sync for RawDevice {}

/// Which process list to read.
#[derive(Debug, Clone, Copy)]
enum ProcessList {
    Compute,
    Graphics,
}

/// The NVML backend: every [`GpuBackend`] query answered by the NVIDIA driver.
///
/// NVML is initialised once, when the backend is made, and shut down when it is dropped.
/// Physical GPU handles are looked up once and kept; MIG device handles are looked up on every
/// call, because a MIG reconfiguration can invalidate them.
///
/// ```no_run
/// use gpu_backend::{GpuBackend, NvmlBackend};
///
/// let backend = NvmlBackend::from_env()?;
/// println!("{} GPUs", backend.device_count()?);
/// # Ok::<(), gpu_backend::BackendError>(())
/// ```
pub struct NvmlBackend {
    /// The initialised library, shared with the event thread: whichever lets go last shuts
    /// NVML down and unloads it (see [`Session`]).
    nvml: Arc<Session>,
    /// Handles of physical GPUs by NVML index, filled on first use.
    handles: RwLock<HashMap<u32, RawDevice>>,
    /// The libcuda to ask for CUDA's order; `None`: the loader's default.
    cuda_library: Option<PathBuf>,
    /// libcuda's answer, asked once (in a child process) on first use.
    cuda: OnceLock<Result<LibcudaReport>>,
    /// Each device's GPM state: whether it supports GPM and its last sample.
    gpm: gpm::GpmSamples,
    /// The event listener started with the backend, or why it could not start.
    listener: Result<events::Listener>,
    /// What loading and initialising the library cost.
    init_timing: crate::cost::Timing,
    /// The entry points of NVML API 13 that nvml-wrapper-sys does not bind.
    newer: details::newer::Symbols,
}

/// How an [`NvmlBackend`] is opened ([`NvmlBackend::open_with`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NvmlOptions {
    /// The kinds of event the listener registers for (those a GPU supports among them). By
    /// default [`EventKind::HEALTH`]: not clock or P-state changes, which a power-capped GPU
    /// sends by the dozen each second, each waking the listener, and which a refresh reads
    /// anyway. A recording asks for [`EventKind::ALL`], to keep
    /// what the driver sent. None (an empty list) starts no listener: no event set is made
    /// nor any GPU registered (set-up calls that cost the driver milliseconds), and the
    /// `events` query answers not supported: for a one-shot, which cannot show events that
    /// come after it has printed.
    pub events: Vec<EventKind>,
}

impl Default for NvmlOptions {
    fn default() -> NvmlOptions {
        NvmlOptions {
            events: EventKind::HEALTH.to_vec(),
        }
    }
}

impl NvmlOptions {
    /// Listens for `kinds` instead of the default.
    pub fn events(mut self, kinds: &[EventKind]) -> NvmlOptions {
        self.events = kinds.to_vec();
        self
    }
}

const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<NvmlBackend>();
};

impl fmt::Debug for NvmlBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NvmlBackend").finish_non_exhaustive()
    }
}

impl Drop for NvmlBackend {
    fn drop(&mut self) {
        // The listener is told to stop; its thread frees the event set and lets go of the
        // session when its wait in progress returns. Dropping does not wait for it, unless
        // calls are logged: then it waits a little, so that the log holds the listener's last
        // calls and `nvmlShutdown` (made here, as the last holder of the session), not cut
        // off by a one-shot command's exit.
        let listener = mem::replace(&mut self.listener, Err(BackendError::Uninitialized));
        if let Ok(listener) = listener {
            if crate::cost::calls_logged() {
                listener.stop_and_wait_at_most(LOGGED_LISTENER_WAIT);
            }
        }
        // GPM samples are freed while the library is still loaded (the session outlives this).
        self.gpm.free_all(self.nvml.lib());
    }
}

/// An initialised NVML library. The backend and its event thread each hold one reference: the
/// thread may be inside `nvmlEventSetWait_v2` for up to its timeout after the backend is
/// dropped, and the library must stay up until that wait returns, without the backend's owner
/// waiting for it (a one-shot command would otherwise spend that timeout at exit).
struct Session(ManuallyDrop<Nvml>);

impl Session {
    fn lib(&self) -> &sys::NvmlLib {
        self.0.lib()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if self.0.lib().nvmlShutdown.is_ok() {
            // nvml-wrapper's `Drop` calls `nvmlShutdown` and ignores its answer; the log says
            // what it took (with unloading the library).
            crate::cost::logged("nvmlShutdown", None, || {
                // SAFETY: `self.0` is not used again after this; dropping it calls
                // `nvmlShutdown` and unloads the library.
                unsafe { ManuallyDrop::drop(&mut self.0) };
                Ok(())
            })
            .ok();
        }
        // Otherwise the library stays loaded: it cannot be shut down, and nvml-wrapper's own
        // `Drop` would panic on the missing symbol.
    }
}

/// While a one-shot's timeline is recorded ([`crate::timeline`]): loads the library first, as
/// a step of its own, so that nvml-wrapper's load finds it loaded and the `nvmlInit` step
/// is its function look-ups and `nvmlInit_v2`. The same flags as nvml-wrapper's (libloading's
/// default, lazy and local), so the work is the same; the library stays loaded, as it does
/// for a one-shot until it exits. Otherwise nothing.
fn preload_for_timeline(path: Option<&OsStr>) {
    #[cfg(unix)]
    if crate::timeline::recording() {
        use std::os::unix::ffi::OsStrExt as _;
        let name = path.map_or(DEFAULT_LIBRARY.as_bytes(), |p| p.as_bytes());
        let Ok(name) = std::ffi::CString::new(name) else {
            return;
        };
        let _step = crate::timeline::step(crate::timeline::LIBRARY_LOAD);
        // SAFETY: a NUL-terminated name; the handle is never closed (the library stays
        // loaded until the process exits), and a failure is nvml-wrapper's to report.
        unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) };
    }
    #[cfg(not(unix))]
    let _ = path;
}

/// Logs loading the library and `nvmlInit_v2` (see [`crate::cost::CallLog`]).
fn log_init(timing: crate::cost::Timing, outcome: std::result::Result<(), &BackendError>) {
    crate::cost::log_nvml_call(
        "nvmlInit_v2",
        None,
        timing,
        outcome.map(|()| &() as &dyn fmt::Debug),
    );
}

/// The libcuda [`NvmlBackend`] asks by default (see [`NvmlBackend::with_libcuda`]).
fn default_libcuda(nvml_path: Option<&OsStr>) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(libcuda::LIBRARY_ENV_VAR).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let dir = std::path::Path::new(nvml_path?).parent()?;
    let beside = dir.join("libcuda.so.1");
    (!dir.as_os_str().is_empty() && beside.is_file()).then_some(beside)
}

/// A failure to ask libcuda, as a backend error: no libcuda (or no `fork`) is "not supported",
/// like any query the machine cannot answer.
fn error_from_libcuda(e: LibcudaError) -> BackendError {
    match e {
        LibcudaError::NotFound { .. } | LibcudaError::Unsupported => BackendError::NotSupported,
        LibcudaError::MissingSymbol(_) => BackendError::FunctionNotFound,
        other => BackendError::Other(other.to_string()),
    }
}

/// The library [`NvmlBackend::new`] loads: nvml-wrapper's default name for this platform.
#[cfg(target_os = "windows")]
pub const DEFAULT_LIBRARY: &str = "nvml.dll";
/// The library [`NvmlBackend::new`] loads: nvml-wrapper's default name for this platform.
#[cfg(not(target_os = "windows"))]
pub const DEFAULT_LIBRARY: &str = "libnvidia-ml.so.1";

/// NVML could not be opened ([`NvmlBackend::open`]): which library, the [`BackendError`], and,
/// when the library itself could not be loaded, the dynamic loader's own message (for example
/// `/opt/x.so: cannot open shared object file: No such file or directory`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenError {
    /// The library asked for: the path or file name given, or [`DEFAULT_LIBRARY`].
    pub library: String,
    /// What went wrong, as the backend reports it: [`BackendError::LibraryNotFound`] when the
    /// library could not be loaded, [`BackendError::FunctionNotFound`] when it is not NVML,
    /// else what `nvmlInit_v2` returned.
    pub error: BackendError,
    /// The dynamic loader's message, when the library could not be loaded.
    pub loader_message: Option<String>,
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.error, &self.loader_message) {
            (BackendError::LibraryNotFound, Some(loader)) => write!(
                f,
                "the NVML library {} could not be loaded: {loader}",
                self.library
            ),
            (BackendError::LibraryNotFound, None) => {
                write!(f, "the NVML library {} could not be loaded", self.library)
            }
            (BackendError::FunctionNotFound, _) => write!(
                f,
                "{} is not an NVML library (it lacks NVML's entry points)",
                self.library
            ),
            (error, _) => write!(f, "NVML ({}) failed to start: {error}", self.library),
        }
    }
}

// No `source()`: the Display already says what `error` would, and a chain would say it twice.
impl std::error::Error for OpenError {}

impl NvmlBackend {
    /// Loads NVML from the default place (`libnvidia-ml.so.1` on Linux, `nvml.dll` on Windows)
    /// and initialises it.
    ///
    /// # Errors
    ///
    /// [`BackendError::LibraryNotFound`] when the library cannot be loaded,
    /// [`BackendError::FunctionNotFound`] when it lacks `nvmlInit_v2`, and whatever
    /// `nvmlInit_v2` returned otherwise (for example [`BackendError::DriverNotLoaded`]).
    /// [`NvmlBackend::open`] gives the same with the library's name and the loader's message.
    pub fn new() -> Result<Self> {
        Self::open(None).map_err(|e| e.error)
    }

    /// Loads NVML from `path` (a file name that the dynamic loader searches for, or a path) and
    /// initialises it. Errors as for [`NvmlBackend::new`].
    pub fn with_library(path: impl AsRef<OsStr>) -> Result<Self> {
        Self::open(Some(path.as_ref())).map_err(|e| e.error)
    }

    /// Loads NVML from `path`, or from [`DEFAULT_LIBRARY`] when `None`, and initialises it. The
    /// error names the library and keeps the dynamic loader's message, for people.
    pub fn open(path: Option<&OsStr>) -> std::result::Result<Self, OpenError> {
        Self::open_with(path, NvmlOptions::default())
    }

    /// [`NvmlBackend::open`] with `options`: which events to listen for.
    pub fn open_with(
        path: Option<&OsStr>,
        options: NvmlOptions,
    ) -> std::result::Result<Self, OpenError> {
        preload_for_timeline(path);
        let step = crate::timeline::step(crate::timeline::NVML_INIT);
        let (init, init_timing) = crate::cost::time(|| match path {
            Some(path) => Nvml::builder().lib_path(path).init(),
            None => Nvml::init(),
        });
        drop(step);
        let library = path.map_or_else(
            || DEFAULT_LIBRARY.to_string(),
            |p| p.to_string_lossy().into_owned(),
        );
        match init {
            Ok(nvml) => {
                log_init(init_timing, Ok(()));
                let mut backend = NvmlBackend {
                    nvml: Arc::new(Session(ManuallyDrop::new(nvml))),
                    handles: RwLock::new(HashMap::new()),
                    cuda_library: default_libcuda(path),
                    cuda: OnceLock::new(),
                    listener: Err(BackendError::Uninitialized),
                    gpm: gpm::GpmSamples::default(),
                    init_timing,
                    newer: details::newer::Symbols::open(path, DEFAULT_LIBRARY),
                };
                backend.listener = if options.events.is_empty() {
                    Err(BackendError::NotSupported)
                } else {
                    let _step = crate::timeline::step(crate::timeline::EVENTS_SETUP);
                    backend.start_listener(EventKind::bits_of(&options.events))
                };
                Ok(backend)
            }
            Err(e) => {
                let loader_message = match &e {
                    NvmlError::LibloadingError(inner) => Some(inner.to_string()),
                    _ => None,
                };
                let error = error_from_wrapper(e);
                log_init(init_timing, Err(&error));
                Err(OpenError {
                    library,
                    error,
                    loader_message,
                })
            }
        }
    }

    /// Like [`NvmlBackend::with_library`] with the path in the environment variable
    /// `GPUSCOPE_NVML_LIB` ([`LIBRARY_ENV_VAR`]) when it is set and not empty, and like
    /// [`NvmlBackend::new`] otherwise.
    pub fn from_env() -> Result<Self> {
        Self::from_setting(std::env::var_os(LIBRARY_ENV_VAR))
    }

    /// [`NvmlBackend::from_env`] with the variable's value given.
    fn from_setting(path: Option<std::ffi::OsString>) -> Result<Self> {
        match path {
            Some(path) if !path.is_empty() => Self::with_library(path),
            _ => Self::new(),
        }
    }

    /// Asks `library` for CUDA's order (`cuda_device_order`, `cuda_runtime_version`) instead
    /// of the default: `GPUSCOPE_CUDA_LIB` ([`libcuda::LIBRARY_ENV_VAR`]) when set and not
    /// empty, else `libcuda.so.1` beside the NVML library when NVML was loaded from a path and
    /// that file exists, else the dynamic loader's `libcuda.so.1` (then `libcuda.so`).
    pub fn with_libcuda(mut self, library: Option<PathBuf>) -> Self {
        self.cuda_library = library;
        self.cuda = OnceLock::new();
        self
    }

    /// libcuda's report, asked once in a child process (see [`libcuda`]).
    fn libcuda_report(&self) -> std::result::Result<&LibcudaReport, BackendError> {
        self.cuda
            .get_or_init(|| {
                libcuda::query(self.cuda_library.as_deref(), libcuda::DEFAULT_TIMEOUT)
                    .map_err(error_from_libcuda)
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The UUID of the physical GPU at PCI bus id `bus` (in libcuda's `0000:18:00.0` form or
    /// NVML's `00000000:18:00.0`).
    fn uuid_of_bus_id(&self, bus: &str) -> Result<String> {
        let want = PciAddress::parse(bus);
        for index in 0..self.device_count()? {
            let id = DeviceId::Gpu(index);
            if want.is_some() && PciAddress::parse(&self.pci_info(id)?.bus_id) == want {
                return self.uuid(id);
            }
        }
        Err(BackendError::Other(format!(
            "libcuda named a device at PCI bus id {bus:?}, which NVML does not list"
        )))
    }

    /// Shuts NVML down and returns when it is down: the event thread has ended and this
    /// session's `nvmlShutdown` has been called (other sessions of this process, and other
    /// processes, keep the library initialised for themselves).
    ///
    /// Dropping the backend does the same without waiting: the event thread, which may be
    /// inside a wait on the driver, ends within 250 ms and shuts the session down then. Call
    /// this when what comes next needs the library down, e.g. initialising it again afresh.
    pub fn shutdown(self) {
        let _ = self.shutdown_timed();
    }

    /// [`NvmlBackend::shutdown`], saying what `nvmlShutdown` (with unloading the library) cost
    /// once the event thread had ended; `None` when another holder of this session (a clone of
    /// it kept elsewhere) shut it down instead.
    pub fn shutdown_timed(mut self) -> Option<crate::cost::Timing> {
        if let Ok(listener) = mem::replace(&mut self.listener, Err(BackendError::Uninitialized)) {
            listener.stop_and_wait();
        }
        let session = Arc::clone(&self.nvml);
        drop(self);
        if Arc::strong_count(&session) != 1 {
            return None;
        }
        let ((), timing) = crate::cost::time(|| drop(session));
        Some(timing)
    }

    /// What loading the library and `nvmlInit_v2` cost when this backend was opened.
    pub fn init_timing(&self) -> crate::cost::Timing {
        self.init_timing
    }

    /// The kinds of event the listener listens for on physical GPU `index`: those asked for
    /// ([`NvmlOptions::events`]) that the GPU supports (`nvmlDeviceGetSupportedEventTypes`,
    /// asked when the backend was opened), in NVML's bit order. An error says why the GPU is
    /// not listened to: [`BackendError::NotSupported`] when it supports none of the kinds asked
    /// for, what NVML answered otherwise, or why the listener could not start. Asks nothing of
    /// the driver.
    pub fn event_kinds(&self, index: u32) -> Result<Vec<EventKind>> {
        self.listener.as_ref().map_err(Clone::clone)?.kinds(index)
    }

    /// Starts the event listener on every GPU for the kinds in `mask` (see [`events`]).
    fn start_listener(&self, mask: u64) -> Result<events::Listener> {
        let count = crate::cost::logged("nvmlDeviceGetCount_v2", None, || self.device_count())?;
        let gpus: Vec<(u32, RawDevice)> = (0..count)
            .filter_map(|i| self.gpu_handle(i).ok().map(|h| (i, RawDevice(h))))
            .collect();
        let session: Arc<dyn Send + Sync> = self.nvml.clone();
        events::Listener::start(self.lib(), &gpus, mask, session)
    }

    /// The raw function table of the loaded library.
    fn lib(&self) -> &sys::NvmlLib {
        self.nvml.lib()
    }

    /// The handle of physical GPU `index`, from the cache or from
    /// `nvmlDeviceGetHandleByIndex_v2`.
    fn gpu_handle(&self, index: u32) -> Result<sys::nvmlDevice_t> {
        let cached = self
            .handles
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&index)
            .copied();
        if let Some(RawDevice(handle)) = cached {
            return Ok(handle);
        }
        let func = symbol(&self.lib().nvmlDeviceGetHandleByIndex_v2)?;
        let mut handle: sys::nvmlDevice_t = ptr::null_mut();
        crate::cost::logged(
            "nvmlDeviceGetHandleByIndex_v2",
            Some(DeviceId::Gpu(index)),
            // SAFETY: the library's own entry point, with a writable out-pointer for the
            // handle.
            || check(unsafe { func(index, &mut handle) }),
        )?;
        let handle = non_null(handle)?;
        self.handles
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(index, RawDevice(handle));
        Ok(handle)
    }

    /// The handle of the device `id` names. A MIG device is looked up under its parent with
    /// `nvmlDeviceGetMigDeviceHandleByIndex` on every call.
    fn handle(&self, id: DeviceId) -> Result<sys::nvmlDevice_t> {
        match id {
            DeviceId::Gpu(index) => self.gpu_handle(index),
            DeviceId::Mig { parent, index } => {
                let parent = self.gpu_handle(parent)?;
                self.mig_handle(parent, index)
            }
        }
    }

    fn mig_handle(&self, parent: sys::nvmlDevice_t, index: u32) -> Result<sys::nvmlDevice_t> {
        let func = symbol(&self.lib().nvmlDeviceGetMigDeviceHandleByIndex)?;
        let mut handle: sys::nvmlDevice_t = ptr::null_mut();
        // SAFETY: `parent` is a live handle from this library and `handle` a writable
        // out-pointer.
        check(unsafe { func(parent, index, &mut handle) })?;
        non_null(handle)
    }

    /// Runs a query of nvml-wrapper's safe API on the device `id` names.
    fn with_device<T>(
        &self,
        id: DeviceId,
        query: impl FnOnce(&Device<'_>) -> std::result::Result<T, NvmlError>,
    ) -> Result<T> {
        let handle = self.handle(id)?;
        // SAFETY: `handle` came from this very `Nvml` instance and stays valid until it is shut
        // down, which cannot happen while `self` is borrowed.
        let device = unsafe { Device::new(handle, &self.nvml.0) };
        query(&device).map_err(error_from_wrapper)
    }

    /// Reads one of the device string queries into a buffer of `len` bytes (NVML's documented
    /// size for that string).
    fn device_string<E>(
        &self,
        id: DeviceId,
        func: &std::result::Result<DeviceStringFn, E>,
        len: c_uint,
    ) -> Result<String> {
        let handle = self.handle(id)?;
        let func = symbol(func)?;
        let mut buffer: Vec<c_char> = vec![0; len as usize];
        // SAFETY: the buffer holds exactly `len` bytes, which is the length passed.
        check(unsafe { func(handle, buffer.as_mut_ptr(), len) })?;
        conv::string_from_c(&buffer)
    }

    /// Reads one of the system string queries into a buffer of `len` bytes.
    fn system_string<E>(
        &self,
        func: &std::result::Result<SystemStringFn, E>,
        len: c_uint,
    ) -> Result<String> {
        let func = symbol(func)?;
        let mut buffer: Vec<c_char> = vec![0; len as usize];
        // SAFETY: the buffer holds exactly `len` bytes, which is the length passed.
        check(unsafe { func(buffer.as_mut_ptr(), len) })?;
        conv::string_from_c(&buffer)
    }

    /// A process list, from the newest entry point the library has: `_v3`, then `_v2`, then the
    /// original v1. A version is skipped when the library lacks its symbol or the call answers
    /// `NVML_ERROR_FUNCTION_NOT_FOUND`; any other answer is final.
    fn processes(&self, id: DeviceId, kind: ProcessList) -> Result<Vec<ProcessInfo>> {
        let handle = self.handle(id)?;
        let lib = self.lib();
        let (v3, v2, v1) = match kind {
            ProcessList::Compute => (
                &lib.nvmlDeviceGetComputeRunningProcesses_v3,
                &lib.nvmlDeviceGetComputeRunningProcesses_v2,
                &lib.nvmlDeviceGetComputeRunningProcesses,
            ),
            ProcessList::Graphics => (
                &lib.nvmlDeviceGetGraphicsRunningProcesses_v3,
                &lib.nvmlDeviceGetGraphicsRunningProcesses_v2,
                &lib.nvmlDeviceGetGraphicsRunningProcesses,
            ),
        };
        let versioned: [&std::result::Result<ProcessListFn, _>; 2] = [v3, v2];
        let answer = first_found(&versioned, |func| {
            let empty = sys::nvmlProcessInfo_v2_t {
                pid: 0,
                usedGpuMemory: 0,
                gpuInstanceId: 0,
                computeInstanceId: 0,
            };
            read_list(empty, |count, infos| {
                // SAFETY: `read_list` passes a writable count and either a null buffer with a
                // count of 0 or a buffer of exactly `*count` entries.
                unsafe { func(handle, count, infos) }
            })
        });
        match answer {
            Err(BackendError::FunctionNotFound) => {}
            other => return other.map(|list| list.iter().map(conv::process_from_v2).collect()),
        }
        let func = symbol(v1)?;
        let empty = sys::nvmlProcessInfo_v1_t {
            pid: 0,
            usedGpuMemory: 0,
        };
        let list = read_list(empty, |count, infos| {
            // SAFETY: as for the versioned calls above.
            unsafe { func(handle, count, infos) }
        })?;
        Ok(list.iter().map(conv::process_from_v1).collect())
    }
}

/// A handle NVML reported success for but left null is a broken library, not a device.
fn non_null(handle: sys::nvmlDevice_t) -> Result<sys::nvmlDevice_t> {
    if handle.is_null() {
        Err(BackendError::Other(
            "NVML returned success with a null device handle".to_string(),
        ))
    } else {
        Ok(handle)
    }
}

/// Reads a list through NVML's count protocol, in one call when the list fits.
///
/// `call(count, buffer)` must make the NVML call with the in/out count and the buffer. The list
/// is first asked for with a buffer of [`LIST_FIRST_CAPACITY`] entries: most lists (processes
/// on a GPU, their utilization samples) fit, and a list call can cost milliseconds of the
/// driver's time (`nvmlDeviceGetProcessUtilization` works through the driver's samples;
/// docs/benchmarks.md, "Real costs"), so sizing it first with a null buffer would double that. `NVML_ERROR_INSUFFICIENT_SIZE` means NVML wrote the
/// length it needs into the count: a buffer of that length plus some headroom is then passed;
/// should the list have grown past it in the meantime, it is asked for again, a few times at
/// most. Any other answer is the list's error.
fn read_list<T: Copy>(
    empty: T,
    mut call: impl FnMut(&mut c_uint, *mut T) -> sys::nvmlReturn_t,
) -> Result<Vec<T>> {
    const SUCCESS: sys::nvmlReturn_t = sys::nvmlReturn_enum_NVML_SUCCESS;
    const INSUFFICIENT_SIZE: sys::nvmlReturn_t = sys::nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE;

    let mut capacity: c_uint = LIST_FIRST_CAPACITY;
    for _ in 0..LIST_ATTEMPTS {
        let mut buffer = vec![empty; capacity as usize];
        let mut count = capacity;
        match call(&mut count, buffer.as_mut_ptr()) {
            SUCCESS => {
                buffer.truncate(count.min(capacity) as usize);
                return Ok(buffer);
            }
            INSUFFICIENT_SIZE => {
                let wanted = if count > capacity {
                    count
                } else {
                    capacity.saturating_mul(2)
                };
                if wanted > LIST_MAX_LEN {
                    return Err(BackendError::Other(format!(
                        "NVML reported a list of {wanted} entries, more than the {LIST_MAX_LEN} believed"
                    )));
                }
                capacity = wanted.saturating_add(LIST_HEADROOM);
            }
            code => return Err(error_from_return(code)),
        }
    }
    Err(BackendError::InsufficientSize)
}

/// `count` (of `what`) as NVML reported it, when it is at most `max`. A larger count is a broken
/// library: it is an error, before anything is allocated or looped over for it.
fn believed_count(count: u32, max: u32, what: &str) -> Result<u32> {
    if count > max {
        return Err(BackendError::Other(format!(
            "NVML reported {count} {what}, more than the {max} believed (a broken NVML library?)"
        )));
    }
    Ok(count)
}

/// Our `u32` for a value NVML gives as a C `int` that cannot meaningfully be negative.
fn non_negative(value: i32, what: &str) -> Result<u32> {
    u32::try_from(value)
        .map_err(|_| BackendError::Other(format!("NVML returned a negative {what}: {value}")))
}

/// Rejects NVLink indices NVML does not have, before asking it.
fn check_link(link: u32) -> Result<()> {
    if link < NVLINK_MAX_LINKS {
        Ok(())
    } else {
        Err(BackendError::InvalidArgument)
    }
}

impl GpuBackend for NvmlBackend {
    // The methods of a common form (see `nvml_getters!`), a group per form.
    nvml_getters! {
        string {
            name = nvmlDeviceGetName, NVML_DEVICE_NAME_V2_BUFFER_SIZE;
            uuid = nvmlDeviceGetUUID, NVML_DEVICE_UUID_V2_BUFFER_SIZE;
            serial = nvmlDeviceGetSerial, NVML_DEVICE_SERIAL_BUFFER_SIZE;
            vbios_version = nvmlDeviceGetVbiosVersion, NVML_DEVICE_VBIOS_VERSION_BUFFER_SIZE;
            board_part_number = nvmlDeviceGetBoardPartNumber, NVML_DEVICE_PART_NUMBER_BUFFER_SIZE;
            inforom_image_version = nvmlDeviceGetInforomImageVersion,
                NVML_DEVICE_INFOROM_VERSION_BUFFER_SIZE;
        }
        raw {
            minor_number -> u32 = nvmlDeviceGetMinorNumber;
            memory_bus_width -> u32 = nvmlDeviceGetMemoryBusWidth;
            gpu_instance_id -> u32 = nvmlDeviceGetGpuInstanceId;
            compute_instance_id -> u32 = nvmlDeviceGetComputeInstanceId;
            accounting_buffer_size -> u32 = nvmlDeviceGetAccountingBufferSize;
            gpu_max_pcie_link_generation -> u32 = nvmlDeviceGetGpuMaxPcieLinkGeneration;
            fan_speed -> u32 = nvmlDeviceGetFanSpeed;
            // Read as NVML's number, which is the trait's answer (32 for unknown).
            performance_state -> u32 = nvmlDeviceGetPerformanceState;
            pcie_replay_counter -> u32 = nvmlDeviceGetPcieReplayCounter;
        }
        // Read as NVML's number: nvml-wrapper's enums reject codes they do not know (or, the
        // architecture's, fold them into one), and it offers the virtualization mode on Linux
        // only.
        code {
            architecture -> Architecture = nvmlDeviceGetArchitecture;
            brand -> Brand = nvmlDeviceGetBrand;
            virtualization_mode -> VirtualizationMode = nvmlDeviceGetVirtualizationMode;
        }
        enable {
            power_management_mode = nvmlDeviceGetPowerManagementMode;
            display_mode = nvmlDeviceGetDisplayMode;
            display_active = nvmlDeviceGetDisplayActive;
            persistence_mode = nvmlDeviceGetPersistenceMode;
            retired_pages_pending = nvmlDeviceGetRetiredPagesPendingStatus;
        }
        // The newer name of the call, or the older on drivers without it; the whole mask,
        // including bits this version does not name.
        newer_or_older {
            supported_clock_event_reasons -> u64 = nvmlDeviceGetSupportedClocksEventReasons
                or nvmlDeviceGetSupportedClocksThrottleReasons;
            clock_event_reasons -> u64 = nvmlDeviceGetCurrentClocksEventReasons
                or nvmlDeviceGetCurrentClocksThrottleReasons;
        }
        per_fan {
            fan_speed_of = nvmlDeviceGetFanSpeed_v2;
            fan_target_speed_of = nvmlDeviceGetTargetFanSpeed;
        }
        wrapper {
            power_management_limit -> u32 = power_management_limit();
            power_management_default_limit -> u32 = power_management_limit_default();
            enforced_power_limit -> u32 = enforced_power_limit();
            max_pcie_link_generation -> u32 = max_pcie_link_gen();
            max_pcie_link_width -> u32 = max_pcie_link_width();
            num_gpu_cores -> u32 = num_cores();
            board_id -> u32 = board_id();
            multi_gpu_board -> bool = is_multi_gpu_board();
            accounting_mode -> bool = is_accounting_enabled();
            max_mig_device_count -> u32 = mig_device_count();
            temperature -> u32 = temperature(TemperatureSensor::Gpu);
            power_usage -> u32 = power_usage();
            total_energy_consumption -> u64 = total_energy_consumption();
            current_pcie_link_generation -> u32 = current_pcie_link_gen();
            current_pcie_link_width -> u32 = current_pcie_link_width();
        }
        converted {
            bar1_memory_info -> Bar1MemoryInfo = bar1_memory_info() => conv::bar1_from_wrapper;
            utilization_rates -> Utilization = utilization_rates()
                => conv::utilization_from_wrapper;
            encoder_utilization -> CodecUtilization = encoder_utilization()
                => conv::codec_from_wrapper;
            decoder_utilization -> CodecUtilization = decoder_utilization()
                => conv::codec_from_wrapper;
        }
        clock {
            max_clock = max_clock_info;
            applications_clock = applications_clock;
            default_applications_clock = default_applications_clock;
            clock = clock_info;
        }
        // What nvidia-smi -q shows beyond the everyday.
        details {
            addressing_mode() -> AddressingMode;
            inforom_version(object: InforomObject) -> String;
            inforom_valid() -> bool;
            pdi() -> u64;
            platform_info() -> PlatformInfo;
            c2c_mode() -> bool;
            host_vgpu_mode() -> HostVgpuMode;
            vgpu_heterogeneous_mode() -> bool;
            vgpu_capability(capability: VgpuCapability) -> u32;
            gsp_firmware_version() -> String;
            gsp_firmware_mode() -> CurrentDefault<bool>;
            pci_class() -> PciClass;
            pcie_atomics(direction: PcieDirection) -> u32;
            bridge_chips() -> Vec<BridgeChip>;
            max_customer_boost_clock(clock: ClockType) -> u32;
            auto_boosted_clocks() -> CurrentDefault<bool>;
            temperature_tlimit(threshold: TemperatureThreshold) -> i32;
            module_power_limits() -> ScopedPowerLimits;
            power_smoothing() -> PowerSmoothing;
            dram_encryption_mode() -> CurrentPending<bool>;
            capabilities() -> u32;
            hostname() -> String;
            device_attributes() -> DeviceAttributes;
            gpu_recovery_action() -> GpuRecoveryAction;
            pcie_replay_rollover_counter() -> u32;
            clock_event_time(reason: ClockEventCounter) -> u64;
            encoder_stats() -> SessionStats;
            fbc_stats() -> SessionStats;
            sram_ecc_status() -> SramEccStatus;
            repair_status() -> RepairStatus;
            inactive_remapped_rows() -> InactiveRemappedRows;
            row_remapper_histogram() -> RowRemapperHistogram;
            margin_temperature() -> i32;
            protected_memory() -> ProtectedMemory;
            fabric_info() -> FabricInfo;
            bbx_flush() -> BbxFlush;
        }
    }

    // ---- The rest, written out where NVML or nvml-wrapper is irregular ----

    // ---- System ----

    fn driver_version(&self) -> Result<String> {
        self.system_string(
            &self.lib().nvmlSystemGetDriverVersion,
            sys::NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE,
        )
    }

    fn nvml_version(&self) -> Result<String> {
        self.system_string(
            &self.lib().nvmlSystemGetNVMLVersion,
            sys::NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE,
        )
    }

    fn cuda_driver_version(&self) -> Result<i32> {
        let lib = self.lib();
        let versions = [
            &lib.nvmlSystemGetCudaDriverVersion_v2,
            &lib.nvmlSystemGetCudaDriverVersion,
        ];
        first_found(&versions, |func| {
            let mut version = 0;
            // SAFETY: the library's own entry point with a writable out-pointer.
            check(unsafe { func(&mut version) }).map(|()| version)
        })
    }

    fn device_count(&self) -> Result<u32> {
        believed_count(
            self.nvml.0.device_count().map_err(error_from_wrapper)?,
            MAX_DEVICE_COUNT,
            "devices",
        )
    }

    /// NVML cannot tell CUDA's ordinal order: libcuda is asked, once, in a child process (see
    /// [`libcuda`]). A device libcuda names without a UUID is found by its PCI bus id.
    fn cuda_device_order(&self) -> Result<Vec<String>> {
        let report = self.libcuda_report()?;
        report
            .devices
            .iter()
            .map(|dev| match (&dev.uuid, &dev.bus_id) {
                (Some(uuid), _) => Ok(format!("GPU-{uuid}")),
                (None, Some(bus)) => self.uuid_of_bus_id(bus),
                (None, None) => Err(BackendError::Other(
                    "libcuda named a device by neither UUID nor PCI bus id".into(),
                )),
            })
            .collect()
    }

    /// The CUDA runtime libcuda's child found (see [`libcuda`]); not supported when none was.
    fn cuda_runtime_version(&self) -> Result<i32> {
        self.libcuda_report()?
            .runtime_version
            .ok_or(BackendError::NotSupported)
    }

    fn vgpu_heterogeneous_multi_vgpu(&self) -> Result<bool> {
        details::vgpu_heterogeneous_multi_vgpu(self)
    }

    // ---- Identity and configuration ----

    fn pci_info(&self, id: DeviceId) -> Result<PciInfo> {
        let handle = self.handle(id)?;
        let lib = self.lib();
        let versions = [
            &lib.nvmlDeviceGetPciInfo_v3,
            &lib.nvmlDeviceGetPciInfo_v2,
            &lib.nvmlDeviceGetPciInfo,
        ];
        let pci = first_found(&versions, |func| {
            // SAFETY: `nvmlPciInfo_t` is plain old data; all zeroes is a valid value.
            let mut pci: sys::nvmlPciInfo_t = unsafe { mem::zeroed() };
            // SAFETY: a live handle and a writable struct of the type the signature names.
            check(unsafe { func(handle, &mut pci) }).map(|()| pci)
        })?;
        conv::pci_from_nvml(&pci)
    }

    fn num_fans(&self, id: DeviceId) -> Result<u32> {
        believed_count(self.with_device(id, |d| d.num_fans())?, MAX_FANS, "fans")
    }

    /// Read raw, by NVML's number: nvml-wrapper's enum has no target (acoustic) thresholds.
    fn temperature_threshold(&self, id: DeviceId, threshold: TemperatureThreshold) -> Result<u32> {
        Ok(query_one!(
            self,
            id,
            nvmlDeviceGetTemperatureThreshold,
            threshold.nvml_code()
        ))
    }

    fn power_management_limit_constraints(&self, id: DeviceId) -> Result<PowerLimits> {
        let limits = self.with_device(id, |d| d.power_management_limit_constraints())?;
        Ok(PowerLimits {
            min_mw: limits.min_limit,
            max_mw: limits.max_limit,
        })
    }

    /// Read raw: nvml-wrapper's enum has no PCIe 6 rate and rejects codes it does not know.
    fn pcie_link_max_speed(&self, id: DeviceId) -> Result<u32> {
        let code: c_uint = query_one!(self, id, nvmlDeviceGetPcieLinkMaxSpeed);
        pcie_link_max_speed_from_nvml(code).ok_or_else(|| {
            BackendError::Other(format!(
                "NVML returned the PCIe link max speed code {code}, which names no speed"
            ))
        })
    }

    fn nvlink_state(&self, id: DeviceId, link: u32) -> Result<bool> {
        check_link(link)?;
        let handle = self.handle(id)?;
        let func = symbol(&self.lib().nvmlDeviceGetNvLinkState)?;
        let mut state: sys::nvmlEnableState_t = 0;
        // SAFETY: a live handle, an in-range link and a writable out-pointer.
        check(unsafe { func(handle, link, &mut state) })?;
        conv::enable_state(state)
    }

    fn ecc_mode(&self, id: DeviceId) -> Result<CurrentPending<bool>> {
        let (current, pending) = query_two!(self, id, nvmlDeviceGetEccMode);
        Ok(CurrentPending {
            current: conv::enable_state(current)?,
            pending: conv::enable_state(pending)?,
        })
    }

    fn compute_mode(&self, id: DeviceId) -> Result<ComputeMode> {
        conv::compute_mode_from_nvml(query_one!(self, id, nvmlDeviceGetComputeMode))
    }

    fn cuda_compute_capability(&self, id: DeviceId) -> Result<ComputeCapability> {
        let cc = self.with_device(id, |d| d.cuda_compute_capability())?;
        Ok(ComputeCapability {
            major: non_negative(cc.major, "compute capability")?,
            minor: non_negative(cc.minor, "compute capability")?,
        })
    }

    /// Read raw, as NVML's numbers: nvml-wrapper's enum rejects codes it does not know.
    fn gpu_operation_mode(&self, id: DeviceId) -> Result<CurrentPending<GpuOperationMode>> {
        let (current, pending): (sys::nvmlGpuOperationMode_t, sys::nvmlGpuOperationMode_t) =
            query_two!(self, id, nvmlDeviceGetGpuOperationMode);
        Ok(CurrentPending {
            current: GpuOperationMode::from_nvml(current),
            pending: GpuOperationMode::from_nvml(pending),
        })
    }

    /// `nvmlDeviceGetDriverModel_v2`, or the original `nvmlDeviceGetDriverModel` on drivers
    /// without it. Read raw: nvml-wrapper offers this query on Windows only, and a stand-in
    /// library may answer it on Linux too.
    fn driver_model(&self, id: DeviceId) -> Result<CurrentPending<DriverModel>> {
        let handle = self.handle(id)?;
        let lib = self.lib();
        let func = symbol(&lib.nvmlDeviceGetDriverModel_v2)
            .or_else(|_| symbol(&lib.nvmlDeviceGetDriverModel))?;
        let mut current: sys::nvmlDriverModel_t = 0;
        let mut pending: sys::nvmlDriverModel_t = 0;
        // SAFETY: a live handle and two writable out-pointers.
        check(unsafe { func(handle, &mut current, &mut pending) })?;
        Ok(CurrentPending {
            current: conv::driver_model_from_nvml(current)?,
            pending: conv::driver_model_from_nvml(pending)?,
        })
    }

    fn mig_mode(&self, id: DeviceId) -> Result<CurrentPending<bool>> {
        let mode = self.with_device(id, |d| d.mig_mode())?;
        Ok(CurrentPending {
            current: conv::enable_state(mode.current)?,
            pending: conv::enable_state(mode.pending)?,
        })
    }

    /// Empty when MIG is off; otherwise every slot below `nvmlDeviceGetMaxMigDeviceCount` (at
    /// most 64) whose handle lookup succeeds. Empty slots (`NVML_ERROR_NOT_FOUND`) are skipped;
    /// any other error is the answer.
    fn mig_device_indices(&self, id: DeviceId) -> Result<Vec<u32>> {
        if !self.mig_mode(id)?.current {
            return Ok(Vec::new());
        }
        // A call of its own when no plan asked the count as a query: logged and costed as one.
        let max = crate::cost::logged("nvmlDeviceGetMaxMigDeviceCount", Some(id), || {
            self.max_mig_device_count(id)
        })?
        .min(MIG_SLOTS_MAX);
        let parent = self.handle(id)?;
        let mut indices = Vec::new();
        for index in 0..max {
            match self.mig_handle(parent, index) {
                Ok(_) => indices.push(index),
                Err(BackendError::NotFound) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(indices)
    }

    // ---- Readings that change over time ----

    /// `nvmlDeviceGetMemoryInfo_v2` (with `reserved`), falling back to the v1 call (without)
    /// when the library lacks v2, or it answers not supported or a struct-version mismatch.
    fn memory_info(&self, id: DeviceId) -> Result<MemoryInfo> {
        let handle = self.handle(id)?;
        let lib = self.lib();
        let v2 = symbol(&lib.nvmlDeviceGetMemoryInfo_v2).and_then(|func| {
            let mut memory = sys::nvmlMemory_v2_t {
                version: MEMORY_V2_VERSION,
                total: 0,
                reserved: 0,
                free: 0,
                used: 0,
            };
            // SAFETY: a live handle and a writable, versioned v2 struct.
            check(unsafe { func(handle, &mut memory) })?;
            Ok(conv::memory_from_v2(&memory))
        });
        match v2 {
            Err(BackendError::FunctionNotFound | BackendError::NotSupported) => {}
            Err(BackendError::Unknown(nvml_codes::ARGUMENT_VERSION_MISMATCH)) => {}
            answer => return answer,
        }
        let func = symbol(&lib.nvmlDeviceGetMemoryInfo)?;
        let mut memory = sys::nvmlMemory_t {
            total: 0,
            free: 0,
            used: 0,
        };
        // SAFETY: a live handle and a writable v1 struct.
        check(unsafe { func(handle, &mut memory) })?;
        Ok(conv::memory_from_v1(&memory))
    }

    /// The field value `NVML_FI_DEV_MEMORY_TEMP`; its own return code is its error.
    fn memory_temperature(&self, id: DeviceId) -> Result<u32> {
        let handle = self.handle(id)?;
        let func = symbol(&self.lib().nvmlDeviceGetFieldValues)?;
        // SAFETY: `nvmlFieldValue_t` is plain old data; all zeroes is a valid value.
        let mut value: sys::nvmlFieldValue_t = unsafe { mem::zeroed() };
        value.fieldId = sys::field_id::NVML_FI_DEV_MEMORY_TEMP;
        // SAFETY: a live handle and one entry, the count passed.
        check(unsafe { func(handle, 1, &mut value) })?;
        let t = conv::field_value_u64(&value)?;
        u32::try_from(t).map_err(|_| {
            BackendError::Other(format!("NVML reported a memory temperature of {t} °C"))
        })
    }

    fn pcie_throughput(&self, id: DeviceId, direction: PcieDirection) -> Result<u32> {
        self.with_device(id, |d| d.pcie_throughput(conv::pcie_to_wrapper(direction)))
    }

    /// The field values `NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX` and `_RX` with the link as
    /// scope, in one `nvmlDeviceGetFieldValues` call. Each field's own return code is its
    /// error.
    fn nvlink_throughput(&self, id: DeviceId, link: u32) -> Result<NvLinkCounters> {
        check_link(link)?;
        let handle = self.handle(id)?;
        let func = symbol(&self.lib().nvmlDeviceGetFieldValues)?;
        // SAFETY: `nvmlFieldValue_t` is plain old data; all zeroes is a valid value.
        let mut values: [sys::nvmlFieldValue_t; 2] = unsafe { mem::zeroed() };
        values[0].fieldId = sys::field_id::NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX;
        values[1].fieldId = sys::field_id::NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX;
        for value in &mut values {
            value.scopeId = link;
        }
        // SAFETY: a live handle and an array of exactly as many entries as the count passed.
        check(unsafe { func(handle, values.len() as i32, values.as_mut_ptr()) })?;
        Ok(NvLinkCounters {
            tx_kib: conv::field_value_u64(&values[0])?,
            rx_kib: conv::field_value_u64(&values[1])?,
        })
    }

    /// Four `nvmlDeviceGetNvLinkErrorCounter` calls: DL replay, recovery, CRC flit, CRC data.
    fn nvlink_error_counters(&self, id: DeviceId, link: u32) -> Result<NvLinkErrorCounters> {
        check_link(link)?;
        let handle = self.handle(id)?;
        let func = symbol(&self.lib().nvmlDeviceGetNvLinkErrorCounter)?;
        let read = |counter: sys::nvmlNvLinkErrorCounter_t| -> Result<u64> {
            let mut value = 0;
            // SAFETY: a live handle, a link below NVML's maximum and a writable out-pointer.
            check(unsafe { func(handle, link, counter, &mut value) })?;
            Ok(value)
        };
        Ok(NvLinkErrorCounters {
            replay: read(sys::nvmlNvLinkErrorCounter_enum_NVML_NVLINK_ERROR_DL_REPLAY)?,
            recovery: read(sys::nvmlNvLinkErrorCounter_enum_NVML_NVLINK_ERROR_DL_RECOVERY)?,
            crc_flit: read(sys::nvmlNvLinkErrorCounter_enum_NVML_NVLINK_ERROR_DL_CRC_FLIT)?,
            crc_data: read(sys::nvmlNvLinkErrorCounter_enum_NVML_NVLINK_ERROR_DL_CRC_DATA)?,
        })
    }

    /// `nvmlDeviceGetMemoryErrorCounter` for each (kind, counter) pair of the location: a pair
    /// the device does not count ("cannot tell") is `None`; when no pair answers, the first
    /// pair's error is the answer; any other failure is the answer at once.
    fn memory_errors(&self, id: DeviceId, location: MemoryLocation) -> Result<LocationEccCounts> {
        let handle = self.handle(id)?;
        let func = symbol(&self.lib().nvmlDeviceGetMemoryErrorCounter)?;
        let mut counts = LocationEccCounts::default();
        let mut first_error = None;
        let mut any = false;
        for counter in [EccCounter::Volatile, EccCounter::Aggregate] {
            for kind in [EccErrorKind::Corrected, EccErrorKind::Uncorrected] {
                let mut value = 0;
                let error_type = match kind {
                    EccErrorKind::Corrected => {
                        sys::nvmlMemoryErrorType_enum_NVML_MEMORY_ERROR_TYPE_CORRECTED
                    }
                    EccErrorKind::Uncorrected => {
                        sys::nvmlMemoryErrorType_enum_NVML_MEMORY_ERROR_TYPE_UNCORRECTED
                    }
                };
                let counter_type = match counter {
                    EccCounter::Volatile => sys::nvmlEccCounterType_enum_NVML_VOLATILE_ECC,
                    EccCounter::Aggregate => sys::nvmlEccCounterType_enum_NVML_AGGREGATE_ECC,
                };
                // SAFETY: a live handle, NVML's enum numbers and a writable out-pointer.
                match check(unsafe {
                    func(
                        handle,
                        error_type,
                        counter_type,
                        location.nvml_code(),
                        &mut value,
                    )
                }) {
                    Ok(()) => {
                        *counts.get_mut(kind, counter) = Some(value);
                        any = true;
                    }
                    Err(e) if e.is_not_available() => {
                        first_error.get_or_insert(e);
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        match first_error {
            Some(e) if !any => Err(e),
            _ => Ok(counts),
        }
    }

    fn ecc_errors(&self, id: DeviceId, kind: EccErrorKind, counter: EccCounter) -> Result<u64> {
        self.with_device(id, |d| {
            d.total_ecc_errors(
                conv::ecc_kind_to_wrapper(kind),
                conv::ecc_counter_to_wrapper(counter),
            )
        })
    }

    /// `nvmlDeviceGetRetiredPages`: asked once for the count, then for the addresses (at most
    /// `MAX_RETIRED_PAGES` believed).
    fn retired_pages(&self, id: DeviceId, cause: RetirementCause) -> Result<Vec<u64>> {
        let handle = self.handle(id)?;
        let func = symbol(&self.lib().nvmlDeviceGetRetiredPages)?;
        let cause = match cause {
            RetirementCause::SingleBit => {
                sys::nvmlPageRetirementCause_enum_NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS
            }
            RetirementCause::DoubleBit => {
                sys::nvmlPageRetirementCause_enum_NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
            }
        };
        let mut count: c_uint = 0;
        // SAFETY: a live handle; a null address buffer with a count of 0 asks for the count.
        let code = unsafe { func(handle, cause, &mut count, ptr::null_mut()) };
        if code != sys::nvmlReturn_enum_NVML_SUCCESS
            && code != sys::nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE
        {
            check(code)?;
        }
        if count == 0 {
            return Ok(Vec::new());
        }
        if count > MAX_RETIRED_PAGES {
            return Err(BackendError::Other(format!(
                "NVML reported {count} retired pages, more than the {MAX_RETIRED_PAGES} believed"
            )));
        }
        let mut addresses = vec![0u64; count as usize];
        // SAFETY: the buffer holds `count` addresses, the count passed.
        check(unsafe { func(handle, cause, &mut count, addresses.as_mut_ptr()) })?;
        addresses.truncate(count as usize);
        Ok(addresses)
    }

    fn remapped_rows(&self, id: DeviceId) -> Result<RemappedRows> {
        let handle = self.handle(id)?;
        let func = symbol(&self.lib().nvmlDeviceGetRemappedRows)?;
        let (mut corr, mut unc, mut pending, mut failure): (c_uint, c_uint, c_uint, c_uint) =
            (0, 0, 0, 0);
        // SAFETY: a live handle and four writable out-pointers.
        check(unsafe { func(handle, &mut corr, &mut unc, &mut pending, &mut failure) })?;
        Ok(RemappedRows {
            correctable: corr,
            uncorrectable: unc,
            pending: pending != 0,
            failure: failure != 0,
        })
    }

    /// GPM: one sample of the device now (`nvmlGpmSampleGet`, or `nvmlGpmMigSampleGet` under
    /// the parent for a MIG device), measured against the sample the previous call took; the
    /// first call only takes the sample and answers [`BackendError::NoData`]. See `gpm.rs`.
    fn gpm_metrics(&self, id: DeviceId) -> Result<GpmMetrics> {
        let device = self.handle(id)?;
        let target = match id {
            DeviceId::Gpu(_) => gpm::Target::Gpu { device },
            DeviceId::Mig { parent, .. } => gpm::Target::Mig {
                parent: self.gpu_handle(parent)?,
                mig: device,
            },
        };
        self.gpm.metrics(self.lib(), id, target)
    }

    fn jpeg_utilization(&self, id: DeviceId) -> Result<CodecUtilization> {
        details::engine_utilization(self, id, true)
    }

    fn ofa_utilization(&self, id: DeviceId) -> Result<CodecUtilization> {
        details::engine_utilization(self, id, false)
    }

    fn power_average(&self, id: DeviceId, scope: PowerScope) -> Result<u32> {
        details::scoped_power(self, id, scope, false)
    }

    fn power_instant(&self, id: DeviceId, scope: PowerScope) -> Result<u32> {
        details::scoped_power(self, id, scope, true)
    }

    fn compute_processes(&self, id: DeviceId) -> Result<Vec<ProcessInfo>> {
        self.processes(id, ProcessList::Compute)
    }

    fn graphics_processes(&self, id: DeviceId) -> Result<Vec<ProcessInfo>> {
        self.processes(id, ProcessList::Graphics)
    }

    /// From the listener's buffer: never waits on the driver. A MIG device has no events of
    /// its own (NVML delivers them on the parent GPU).
    fn events(&self, id: DeviceId, since_us: u64) -> Result<Vec<GpuEvent>> {
        self.handle(id)?;
        match id {
            DeviceId::Gpu(index) => self
                .listener
                .as_ref()
                .map_err(Clone::clone)?
                .events(index, since_us),
            DeviceId::Mig { .. } => Err(BackendError::NotSupported),
        }
    }

    /// `nvmlDeviceGetProcessUtilization` with `since_us` as the last-seen timestamp. No samples
    /// (`NVML_ERROR_NOT_FOUND`) is an empty list.
    fn process_utilization(
        &self,
        id: DeviceId,
        since_us: u64,
    ) -> Result<Vec<ProcessUtilizationSample>> {
        let handle = self.handle(id)?;
        let func = symbol(&self.lib().nvmlDeviceGetProcessUtilization)?;
        let empty = sys::nvmlProcessUtilizationSample_t {
            pid: 0,
            timeStamp: 0,
            smUtil: 0,
            memUtil: 0,
            encUtil: 0,
            decUtil: 0,
        };
        let samples = read_list(empty, |count, samples| {
            // SAFETY: `read_list` passes a writable count and either a null buffer with a count
            // of 0 or a buffer of exactly `*count` entries.
            unsafe { func(handle, samples, count, since_us) }
        });
        match samples {
            Ok(samples) => Ok(samples.iter().map(conv::process_sample_from_nvml).collect()),
            Err(BackendError::NotFound) => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    const SUCCESS: sys::nvmlReturn_t = sys::nvmlReturn_enum_NVML_SUCCESS;
    const INSUFFICIENT_SIZE: sys::nvmlReturn_t = sys::nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE;

    #[test]
    fn no_libcuda_is_not_supported_and_a_failed_child_is_an_error() {
        let missing = LibcudaError::NotFound {
            library: "libcuda.so.1".into(),
            reason: "no such file".into(),
        };
        assert_eq!(error_from_libcuda(missing), BackendError::NotSupported);
        let late = LibcudaError::Child("no answer in time".into());
        assert!(
            matches!(error_from_libcuda(late), BackendError::Other(t) if t.contains("no answer"))
        );
    }

    /// Asserts that opening the backend failed, with `expected`.
    #[track_caller]
    fn assert_open_fails(result: Result<NvmlBackend>, expected: BackendError) {
        match result {
            Err(e) => assert_eq!(e, expected),
            Ok(backend) => panic!("opened {backend:?}, expected {expected}"),
        }
    }

    #[test]
    fn a_missing_library_is_library_not_found() {
        assert_open_fails(
            NvmlBackend::with_library("/nonexistent/libnvidia-ml.so.1"),
            BackendError::LibraryNotFound,
        );
    }

    #[test]
    fn nvml_lib_that_does_not_exist_is_named_in_the_error() {
        // `--nvml-lib /nonexistent.so` said "the NVML library (libnvidia-ml.so.1) was not
        // found": the wrong file, and the loader's reason dropped.
        let err = NvmlBackend::open(Some(OsStr::new("/nonexistent/gpuscope-test.so"))).unwrap_err();
        assert_eq!(err.error, BackendError::LibraryNotFound);
        assert_eq!(err.library, "/nonexistent/gpuscope-test.so");
        let msg = err.to_string();
        assert!(msg.contains("/nonexistent/gpuscope-test.so"), "{msg}");
        assert!(!msg.contains("libnvidia-ml.so.1"), "{msg}");
        #[cfg(target_os = "linux")]
        assert!(
            msg.contains("No such file or directory"),
            "the loader's reason: {msg}"
        );
    }

    #[test]
    fn the_environment_setting_names_the_library() {
        assert_open_fails(
            NvmlBackend::from_setting(Some("/nonexistent/libnvidia-ml.so.1".into())),
            BackendError::LibraryNotFound,
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_library_that_is_not_nvml_is_function_not_found() {
        // The C library loads on every Linux system and has no `nvmlInit_v2`.
        assert_open_fails(
            NvmlBackend::with_library("libc.so.6"),
            BackendError::FunctionNotFound,
        );
    }

    #[test]
    fn nvml_device_count_that_is_absurd_is_an_error_not_an_allocation() {
        // A device count of 4294967295 aborted in `Vec::with_capacity`; 100,000 cost 2 GB.
        for n in [u32::MAX, 100_000, MAX_DEVICE_COUNT + 1] {
            let err = believed_count(n, MAX_DEVICE_COUNT, "devices").unwrap_err();
            let msg = err.to_string();
            assert!(msg.contains(&format!("NVML reported {n} devices")), "{msg}");
            assert!(msg.contains(&MAX_DEVICE_COUNT.to_string()), "{msg}");
        }
        assert_eq!(believed_count(8, MAX_DEVICE_COUNT, "devices"), Ok(8));
        assert_eq!(
            believed_count(MAX_DEVICE_COUNT, MAX_DEVICE_COUNT, "devices"),
            Ok(MAX_DEVICE_COUNT)
        );
    }

    #[test]
    fn memory_v2_version_matches_nvml_struct_version() {
        assert_eq!(MEMORY_V2_VERSION, 40 | (2 << 24));
    }

    /// A stand-in for one NVML list call: it holds `len` entries (which may change between calls,
    /// as a process list does) and follows the count protocol.
    fn fake_list(lens: &[u32]) -> impl FnMut(&mut c_uint, *mut u32) -> sys::nvmlReturn_t + '_ {
        let calls = RefCell::new(0usize);
        move |count, buffer| {
            let call = {
                let mut c = calls.borrow_mut();
                *c += 1;
                *c - 1
            };
            let len = lens[call.min(lens.len() - 1)];
            if buffer.is_null() || *count < len {
                let was_zero = *count == 0;
                *count = len;
                return if len == 0 && was_zero {
                    SUCCESS
                } else {
                    INSUFFICIENT_SIZE
                };
            }
            for i in 0..len {
                // SAFETY: the caller passed a buffer of at least `*count >= len` entries.
                unsafe { *buffer.add(i as usize) = 100 + i };
            }
            *count = len;
            SUCCESS
        }
    }

    /// `fake_list`, counting its calls in `calls`.
    fn counted<'a>(
        lens: &'a [u32],
        calls: &'a std::cell::Cell<u32>,
    ) -> impl FnMut(&mut c_uint, *mut u32) -> sys::nvmlReturn_t + 'a {
        let mut inner = fake_list(lens);
        move |count, buffer| {
            calls.set(calls.get() + 1);
            inner(count, buffer)
        }
    }

    #[test]
    fn an_empty_list_is_one_call() {
        let calls = std::cell::Cell::new(0);
        assert_eq!(read_list(0u32, counted(&[0], &calls)), Ok(vec![]));
        assert_eq!(calls.get(), 1);
    }

    #[test]
    fn a_list_that_fits_the_first_buffer_is_one_call() {
        let calls = std::cell::Cell::new(0);
        assert_eq!(
            read_list(0u32, counted(&[3], &calls)),
            Ok(vec![100, 101, 102])
        );
        assert_eq!(calls.get(), 1);
        let calls = std::cell::Cell::new(0);
        let full = read_list(0u32, counted(&[LIST_FIRST_CAPACITY], &calls));
        assert_eq!(full.map(|v| v.len()), Ok(LIST_FIRST_CAPACITY as usize));
        assert_eq!(calls.get(), 1);
    }

    #[test]
    fn a_longer_list_is_sized_then_read() {
        let calls = std::cell::Cell::new(0);
        let list = read_list(0u32, counted(&[100], &calls)).unwrap();
        assert_eq!(list.len(), 100);
        assert_eq!((list[0], list[99]), (100, 199));
        assert_eq!(calls.get(), 2);
    }

    #[test]
    fn a_list_that_grows_within_the_headroom_fits() {
        assert_eq!(
            read_list(0u32, fake_list(&[100, 105])).map(|v| v.len()),
            Ok(105)
        );
    }

    #[test]
    fn a_list_that_outgrows_the_headroom_is_asked_for_again() {
        assert_eq!(
            read_list(0u32, fake_list(&[100, 120, 121])).map(|v| v.len()),
            Ok(121)
        );
    }

    #[test]
    fn a_list_that_keeps_growing_gives_up() {
        assert_eq!(
            read_list(0u32, fake_list(&[100, 200, 400, 800, 1600])),
            Err(BackendError::InsufficientSize)
        );
    }

    #[test]
    fn a_list_that_shrinks_is_truncated() {
        assert_eq!(read_list(0u32, fake_list(&[100, 1])), Ok(vec![100]));
    }

    #[test]
    fn list_errors_are_kept() {
        let mut gpu_lost = |_: &mut c_uint, _: *mut u32| 15;
        assert_eq!(read_list(0u32, &mut gpu_lost), Err(BackendError::GpuLost));
        let mut not_found = |_: &mut c_uint, _: *mut u32| 6;
        assert_eq!(read_list(0u32, &mut not_found), Err(BackendError::NotFound));
    }

    #[test]
    fn an_absurd_count_is_refused_not_allocated() {
        let mut huge = |count: &mut c_uint, _: *mut u32| {
            *count = u32::MAX;
            INSUFFICIENT_SIZE
        };
        assert!(matches!(
            read_list(0u32, &mut huge),
            Err(BackendError::Other(_))
        ));
    }

    #[test]
    fn links_past_the_nvml_maximum_are_invalid() {
        assert_eq!(check_link(0), Ok(()));
        assert_eq!(check_link(17), Ok(()));
        assert_eq!(check_link(18), Err(BackendError::InvalidArgument));
        assert_eq!(check_link(u32::MAX), Err(BackendError::InvalidArgument));
    }
}
