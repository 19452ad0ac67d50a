//! fake-nvml: a stand-in `libnvidia-ml.so.1` that serves a gpuscope fixture through the real
//! NVML C ABI, so that NVML clients (gpuscope's NVML backend on nvml-wrapper, pynvml, nvitop,
//! gpustat) run on a machine without a GPU and see what a recorded machine showed.
//!
//! **What it is for:** tests and demos. The answers come from a [`gpu_backend::ReplayBackend`]
//! over the fixture, so the fake library and gpuscope's replay backend cannot disagree. The
//! same library also answers a few CUDA driver calls (`cuInit`, `cuDeviceGetCount`,
//! `cuDeviceGet`, `cuDeviceGetUuid[_v2]`, `cuDeviceGetPCIBusId`, `cuDeviceGetName`,
//! `cuDriverGetVersion`) when installed as `libcuda.so.1`, from the fixture's CUDA order.
//!
//! **What it is not for:** it is not a GPU emulator and changes nothing: no setters, no vGPU,
//! no accounting, no CUDA contexts. Entry points it does not export are simply absent
//! (a client's symbol lookup fails as on an old driver). It serves only what a fixture records.
//!
//! # Environment
//!
//! * `GPUSCOPE_FAKE_NVML_FIXTURE` (required): path of the fixture file (plain JSON,
//!   `.json.gz` or `.json.zst`). Read at the first
//!   `nvmlInit*` (again after the last `nvmlShutdown`) and at `cuInit`. Unset, unreadable or
//!   broken: init answers `NVML_ERROR_DRIVER_NOT_LOADED` (9) (`cuInit`:
//!   `CUDA_ERROR_NO_DEVICE`) and prints one line on stderr naming the variable, the file and
//!   the [`gpu_backend::FixtureError`]. It never crashes the caller.
//! * `GPUSCOPE_FAKE_NVML_FRAME` (optional): pins the served frame to this index (clamped to the
//!   last frame). Without it, frames follow wall time from init using the frames' `t_ms`,
//!   looping. A value that is not a non-negative integer fails init like a broken fixture.
//! * `GPUSCOPE_FAKE_NVML_DEVICE_COUNT` (optional, for tests): the count
//!   `nvmlDeviceGetCount[_v2]` answers instead of the fixture's (a `u32`, e.g. `4294967295`),
//!   to see how a client treats a broken library. Nothing else changes.
//! * `GPUSCOPE_FAKE_NVML_HANG_WHILE` (optional, for tests): a file path. While that file
//!   exists, every NVML call after init waits, as a call into a hung driver does; a call that
//!   starts waiting first creates the path with `.waiting` appended. Unset: no call waits.
//! * `GPUSCOPE_FAKE_NVML_CALL_LOG` (optional, for tests): a file to which each NVML call
//!   served is appended as one line, `fake-nvml served FUNCTION device=DEVICE return=CODE`
//!   ([`CALL_LOG_ENV`]), so that a test can count what a client asked.
//! * `GPUSCOPE_FAKE_NVML_COSTS` (optional): spends real hardware's call costs ([`COSTS_ENV`]):
//!   a cost profile file (`{"nvmlDeviceGetPowerUsage": {"wall_us": 3.4, "cpu_us": 2.7}, ...}`,
//!   a [`gpu_backend::cost::CostProfile`]) or `recorded` (the fixture's `nvml_costs`). A
//!   profiled call busy-spins its `cpu_us` on the calling thread's CPU clock and sleeps out the
//!   rest of `wall_us`; an unsuffixed name covers its `_vN` forms; `nvmlInit*`/`nvmlShutdown`
//!   cost when they start and end NVML. A bad file (or a cost outside 0 to 10 s) fails init like
//!   a broken fixture.
//! * `CUDA_VISIBLE_DEVICES`: the CUDA calls honour its simple forms (ordinals and `GPU-` UUID
//!   prefixes, ending at the first entry that is neither); `MIG-` entries end the list too.
//!
//! Tests can also step frames with the exported non-NVML functions `fakeNvmlSetFrame(unsigned
//! int)`, `fakeNvmlGetFrame(unsigned int *)` and `fakeNvmlGetFrameCount(unsigned int *)`.
//!
//! # Semantics
//!
//! * Init is reference counted; every call before init answers `NVML_ERROR_UNINITIALIZED`.
//! * Handles are stable, non-null, never dereferenced; a handle the fixture does not hold answers
//!   `NVML_ERROR_INVALID_ARGUMENT`, as do null output pointers.
//! * Lists follow NVML's count protocol (a null or short buffer answers
//!   `NVML_ERROR_INSUFFICIENT_SIZE` with the count needed); strings honour the length argument
//!   (`NVML_ERROR_INSUFFICIENT_SIZE` when too short) and are always NUL-terminated.
//! * A recorded error is answered as its NVML code ([`gpu_backend::BackendError::nvml_code`]).
//! * An entry point named in the fixture's `nvml_missing_functions` answers
//!   `NVML_ERROR_FUNCTION_NOT_FOUND` (13). A real old driver lacks the symbol instead; clients
//!   that look symbols up one by one (nvml-wrapper: `FailedToLoadSymbol`; pynvml:
//!   `NVMLError_FunctionNotFound`) should treat both alike.
//! * The replay's clock: process-utilization samples are served with their timestamps moved
//!   onto this machine's clock (and `lastSeenTimeStamp` read on it), so that a client asking by
//!   wall clock (nvitop: the samples of the last second) sees what it would have seen live. On
//!   a wall-clock replay the replay's start is the recording's start; on a frame pinned or set
//!   by hand, the moment it was chosen is that frame's time.
//! * Events (`nvmlEventSetCreate`, `nvmlDeviceGetSupportedEventTypes`,
//!   `nvmlDeviceRegisterEvents`, `nvmlEventSetWait[_v2]`, `nvmlEventSetFree`) come from the
//!   fixture's `events` log: a set delivers each event of a registered device and kind once,
//!   oldest first, on a wall-clock replay at the time it was recorded (the recording's event
//!   rate), on a frame chosen by hand from the frame that logs it on; a wait with nothing to
//!   deliver sleeps until an event is due or its timeout and answers `NVML_ERROR_TIMEOUT`. A
//!   device whose fixture records no events answers the recorded error (not recorded:
//!   `NVML_ERROR_NOT_SUPPORTED`).
//! * No panic crosses the ABI: every entry point catches it and answers `NVML_ERROR_UNKNOWN`
//!   (CUDA: `CUDA_ERROR_UNKNOWN`). All state is behind one mutex; calls are thread safe.
//!
//! # Installing
//!
//! Clients load the library by file name, so put a copy named `libnvidia-ml.so.1` (and
//! `libcuda.so.1`) in a directory and point `LD_LIBRARY_PATH` at it:
//!
//! ```text
//! cargo run -p fake-nvml --bin fake-nvml-install -- /tmp/fake-nvml-lib
//! GPUSCOPE_FAKE_NVML_FIXTURE=fixtures/h100-sxm-8gpu.json LD_LIBRARY_PATH=/tmp/fake-nvml-lib nvitop -1
//! ```
//!
//! From Rust (for example in a test that has just been built next to the library), use
//! [`find_cdylib`] and [`install`]:
//!
//! ```no_run
//! let exe = std::env::current_exe().unwrap();
//! let lib = fake_nvml::find_cdylib(&exe).expect("build fake-nvml first");
//! let installed = fake_nvml::install(&lib, std::path::Path::new("/tmp/fake-nvml-lib")).unwrap();
//! assert!(installed.nvml.ends_with("libnvidia-ml.so.1"));
//! ```

#![warn(missing_docs)]
// The exported entry points are `unsafe extern "C"` by NVML's contract (raw pointers from C),
// their bodies run under the one guard `call`, and the helpers they use state their contract
// in `# Safety`: the workspace's `unsafe_op_in_unsafe_fn` would wrap each of some 190 such
// operations in a block of its own, which this crate does not take yet.
#![allow(unsafe_op_in_unsafe_fn)]

pub mod abi;
mod costs;
pub mod cuda;
pub mod nvml;
mod state;

use std::io;
use std::path::{Path, PathBuf};

pub use costs::{COSTS_ENV, MAX_COST_US, RECORDED};
pub use nvml::{device_of, handle_of};
pub use state::{
    last_init_error, CALL_LOG_ENV, DEVICE_COUNT_ENV, FIXTURE_ENV, FRAME_ENV, HANG_ENV,
};

/// The file name cargo gives the built cdylib on this platform.
pub const CDYLIB_FILE_NAME: &str = if cfg!(target_os = "macos") {
    "libfake_nvml.dylib"
} else if cfg!(windows) {
    "fake_nvml.dll"
} else {
    "libfake_nvml.so"
};

/// Finds the built cdylib near an executable of the same cargo build: in `deps/` beside it or in
/// its own directory (a binary in `target/<profile>/`, a test in `target/<profile>/deps/`), else
/// the directory above.
///
/// `deps/` comes first because cargo writes the library there on every build that needs it; the
/// copy in `target/<profile>/` is refreshed only when fake-nvml itself is built as a root
/// package, so it can be stale, or missing when fake-nvml was built only as a dependency.
pub fn find_cdylib(exe: &Path) -> Option<PathBuf> {
    let dir = exe.parent()?;
    [
        Some(dir.join("deps")),
        Some(dir.to_path_buf()),
        dir.parent().map(Path::to_path_buf),
    ]
    .into_iter()
    .flatten()
    .map(|d| d.join(CDYLIB_FILE_NAME))
    .find(|p| p.is_file())
}

/// Where [`install`] put the copies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    /// The directory to put on `LD_LIBRARY_PATH`.
    pub dir: PathBuf,
    /// `<dir>/libnvidia-ml.so.1`.
    pub nvml: PathBuf,
    /// `<dir>/libcuda.so.1`.
    pub cuda: PathBuf,
}

/// Copies the built library `lib` into `dir` (created if needed) as `libnvidia-ml.so.1`, with
/// `libnvidia-ml.so`, `libcuda.so.1` and `libcuda.so` beside it (relative symlinks on Unix,
/// copies elsewhere), replacing older ones.
pub fn install(lib: &Path, dir: &Path) -> io::Result<Installed> {
    std::fs::create_dir_all(dir)?;
    let main = dir.join("libnvidia-ml.so.1");
    // Copy to a temporary name and rename, so a process that has the old copy mapped keeps a
    // consistent file.
    let tmp = dir.join(format!(".libnvidia-ml.so.1.tmp{}", std::process::id()));
    std::fs::copy(lib, &tmp)?;
    std::fs::rename(&tmp, &main)?;
    for name in ["libnvidia-ml.so", "libcuda.so.1", "libcuda.so"] {
        let dest = dir.join(name);
        match std::fs::symlink_metadata(&dest) {
            Ok(_) => std::fs::remove_file(&dest)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        #[cfg(unix)]
        std::os::unix::fs::symlink("libnvidia-ml.so.1", &dest)?;
        #[cfg(not(unix))]
        std::fs::copy(&main, &dest)?;
    }
    Ok(Installed {
        dir: dir.to_path_buf(),
        nvml: main,
        cuda: dir.join("libcuda.so.1"),
    })
}

/// [`install`] into `<base>/<prefix>-<this PID>`, for a test process that installs the library
/// once and cannot tell when its last user is done with it. So that such copies (37 MB each with
/// debug info) do not pile up, the `<prefix>-<PID>` directories of processes that have ended
/// are removed first (on Linux, where `/proc` tells which are running).
pub fn install_per_process(lib: &Path, base: &Path, prefix: &str) -> io::Result<Installed> {
    #[cfg(target_os = "linux")]
    if let Ok(entries) = std::fs::read_dir(base) {
        for entry in entries.flatten() {
            let name = entry.file_name();
            let pid = name
                .to_str()
                .and_then(|n| n.strip_prefix(prefix))
                .and_then(|n| n.strip_prefix('-'))
                .and_then(|n| n.parse::<u32>().ok());
            if let Some(pid) = pid {
                let running = Path::new("/proc").join(pid.to_string()).exists();
                if !running && entry.file_type().is_ok_and(|t| t.is_dir()) {
                    // Best effort: another process may be removing it too.
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
    }
    install(lib, &base.join(format!("{prefix}-{}", std::process::id())))
}

/// [`install`] of the cdylib that [`find_cdylib`] finds next to the running executable.
pub fn install_as(dir: &Path) -> io::Result<Installed> {
    let exe = std::env::current_exe()?;
    let lib = find_cdylib(&exe).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "no {CDYLIB_FILE_NAME} next to {} (build it with `cargo build -p fake-nvml`)",
                exe.display()
            ),
        )
    })?;
    install(&lib, dir)
}
