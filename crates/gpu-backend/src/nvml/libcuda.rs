//! Asking libcuda for CUDA's default device order, without leaving CUDA state in this process.
//!
//! NVML numbers GPUs by PCI bus; CUDA, by default, puts the fastest first. Only libcuda knows
//! its order, and the only way to learn it is `cuInit` then `cuDeviceGet*`. `cuInit` is not free
//! to call in someone else's process: it creates driver state (threads, file descriptors, memory
//! mappings) that lives until the process ends, it reads `CUDA_VISIBLE_DEVICES` once and for
//! all, and it does not survive a later `fork`. So [`query`] does it in a child process:
//!
//! 1. the parent makes a pipe and `fork`s;
//! 2. the child arms `alarm` as a watchdog, sets `CUDA_VISIBLE_DEVICES` unset and
//!    `CUDA_DEVICE_ORDER=FASTEST_FIRST` (so that libcuda lists every GPU in its default order),
//!    loads libcuda with libloading, asks it, writes the answer to the pipe as text and leaves
//!    with `_exit` (no destructors, no atexit handlers, no flushing of the parent's buffers);
//! 3. the parent reads the pipe with a deadline, kills the child if it is late, and reaps it.
//!
//! A library cannot re-exec its host program, so the child is a fork rather than a fresh
//! process. After a fork in a multi-threaded program only async-signal-safe calls are
//! guaranteed; loading a library is not one. glibc keeps `malloc` and the loader usable in a
//! forked child, and the parent's deadline and the child's watchdog bound the damage if some
//! lock was held at the fork: the query then fails, [`crate::NvmlBackend`] answers
//! `cuda_device_order` with an error, and gpu-devices falls back to PCI bus order. On platforms
//! without `fork` the query is not made.
//!
//! [`crate::NvmlBackend`] asks once, on the first `cuda_device_order` or `cuda_runtime_version`
//! query, and keeps the answer.

use std::ffi::{c_char, c_int, c_uint};
use std::path::Path;
use std::time::Duration;

/// The environment variable that overrides the libcuda loaded.
pub const LIBRARY_ENV_VAR: &str = "GPUSCOPE_CUDA_LIB";

/// How long [`query`] waits for the child by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(20);

/// What libcuda (and libcudart, when found) said.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LibcudaReport {
    /// The devices in CUDA's FASTEST_FIRST order.
    pub devices: Vec<LibcudaDevice>,
    /// `cuDriverGetVersion`, e.g. `12020`.
    pub driver_version: Option<i32>,
    /// `cudaRuntimeGetVersion` of the libcudart found, e.g. `12020`.
    pub runtime_version: Option<i32>,
}

/// One CUDA device as libcuda names it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LibcudaDevice {
    /// The UUID's hex form without a `GPU-`/`MIG-` prefix
    /// (`d7e97d99-d3fa-bb12-9045-c105fedb45bd`), if `cuDeviceGetUuid` answered.
    pub uuid: Option<String>,
    /// The PCI bus id (`0000:18:00.0`), if `cuDeviceGetPCIBusId` answered.
    pub bus_id: Option<String>,
}

/// Why libcuda could not be asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LibcudaError {
    /// The library could not be loaded.
    #[error("cannot load {library}: {reason}")]
    NotFound {
        /// The library tried.
        library: String,
        /// What the loader said.
        reason: String,
    },
    /// The library lacks an entry point.
    #[error("the library has no {0}")]
    MissingSymbol(&'static str),
    /// A call answered a CUDA error code.
    #[error("{call} answered CUDA error {code}")]
    Call {
        /// The call.
        call: &'static str,
        /// `CUresult`.
        code: i32,
    },
    /// The child process could not be started or did not answer in time.
    #[error("the libcuda child process failed: {0}")]
    Child(String),
    /// This platform has no `fork`, so libcuda is not asked.
    #[error("asking libcuda needs fork(), which this platform does not have")]
    Unsupported,
}

/// Asks libcuda for its FASTEST_FIRST order in a child process (see the module's notes),
/// waiting at most `timeout`. `library` overrides the library loaded (default `libcuda.so.1`,
/// then `libcuda.so`).
///
/// # Errors
///
/// [`LibcudaError`] when the library is absent, a call fails, or the child fails or is late.
pub fn query(library: Option<&Path>, timeout: Duration) -> Result<LibcudaReport, LibcudaError> {
    imp::query(library, timeout)
}

#[cfg(unix)]
mod imp {
    use super::*;
    use std::time::Instant;

    pub(super) fn query(
        library: Option<&Path>,
        timeout: Duration,
    ) -> Result<LibcudaReport, LibcudaError> {
        let child_err = |what: &str| {
            LibcudaError::Child(format!("{what}: {}", std::io::Error::last_os_error()))
        };
        let mut fds = [0 as c_int; 2];
        // SAFETY: `fds` is a valid array of two ints for pipe() to fill.
        if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
            return Err(child_err("pipe"));
        }
        let [read_fd, write_fd] = fds;
        // Everything the child needs is prepared before the fork.
        let watchdog = timeout.as_secs().clamp(1, u32::MAX as u64) as c_uint;
        let library = library.map(Path::to_path_buf);

        // SAFETY: fork() has no preconditions; the child only runs `child_main`, which ends
        // with _exit and never returns into the caller's code.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            // SAFETY: both descriptors are ours and open.
            unsafe {
                libc::close(read_fd);
                libc::close(write_fd);
            }
            return Err(child_err("fork"));
        }
        if pid == 0 {
            // SAFETY: in the child; see `child_main`.
            unsafe { child_main(read_fd, write_fd, watchdog, library.as_deref()) }
        }
        // SAFETY: the write end belongs to the child now.
        unsafe { libc::close(write_fd) };
        let read = read_with_deadline(read_fd, Instant::now() + timeout);
        // SAFETY: closing our read end, then reaping our own child (killed first if late).
        unsafe {
            libc::close(read_fd);
            if read.is_err() {
                libc::kill(pid, libc::SIGKILL);
            }
            let mut status = 0;
            libc::waitpid(pid, &mut status, 0);
        }
        decode(&read?)
    }

    /// Reads until end of file or the deadline.
    fn read_with_deadline(fd: c_int, deadline: Instant) -> Result<Vec<u8>, LibcudaError> {
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(LibcudaError::Child("no answer in time".into()));
            }
            let mut pfd = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            let ms = left.as_millis().min(i32::MAX as u128) as c_int;
            // SAFETY: one valid pollfd.
            let r = unsafe { libc::poll(&mut pfd, 1, ms) };
            if r < 0 {
                if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(LibcudaError::Child(format!(
                    "poll: {}",
                    std::io::Error::last_os_error()
                )));
            }
            if r == 0 {
                continue;
            }
            // SAFETY: `buf` is valid for `buf.len()` bytes.
            let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
            match n {
                0 => return Ok(out),
                n if n > 0 => out.extend_from_slice(&buf[..n as usize]),
                _ => {
                    if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                        return Err(LibcudaError::Child(format!(
                            "read: {}",
                            std::io::Error::last_os_error()
                        )));
                    }
                }
            }
        }
    }

    /// The child: query libcuda, write the answer, `_exit`.
    ///
    /// # Safety
    ///
    /// Only to be called in the child right after `fork`.
    unsafe fn child_main(
        read_fd: c_int,
        write_fd: c_int,
        watchdog: c_uint,
        library: Option<&Path>,
    ) -> ! {
        // SAFETY: in the child of a fork, as the caller promises: it owns its copy of the
        // descriptors and the environment, and no other thread runs here to read either; the
        // names are NUL-terminated literals.
        unsafe {
            libc::close(read_fd);
            libc::alarm(watchdog);
            libc::unsetenv(c"CUDA_VISIBLE_DEVICES".as_ptr());
            libc::setenv(c"CUDA_DEVICE_ORDER".as_ptr(), c"FASTEST_FIRST".as_ptr(), 1);
        }
        let text = std::panic::catch_unwind(|| encode(&query_in_process(library)))
            .unwrap_or_else(|_| "error panicked in the child\n".to_string());
        let mut bytes = text.as_bytes();
        while !bytes.is_empty() {
            // SAFETY: `bytes` is valid for `bytes.len()` bytes; `write_fd` is the pipe's end
            // the child keeps.
            let n = unsafe { libc::write(write_fd, bytes.as_ptr().cast(), bytes.len()) };
            if n <= 0 {
                break;
            }
            bytes = &bytes[n as usize..];
        }
        // SAFETY: ends the child at once, without running the parent's atexit handlers or
        // destructors, which belong to the parent.
        unsafe { libc::_exit(0) }
    }
}

#[cfg(not(unix))]
mod imp {
    use super::*;

    pub(super) fn query(
        _library: Option<&Path>,
        _timeout: Duration,
    ) -> Result<LibcudaReport, LibcudaError> {
        Err(LibcudaError::Unsupported)
    }
}

type CuInit = unsafe extern "C" fn(c_uint) -> c_int;
type CuIntOut = unsafe extern "C" fn(*mut c_int) -> c_int;
type CuDeviceGet = unsafe extern "C" fn(*mut c_int, c_int) -> c_int;
type CuDeviceGetUuid = unsafe extern "C" fn(*mut [u8; 16], c_int) -> c_int;
type CuDeviceGetPciBusId = unsafe extern "C" fn(*mut c_char, c_int, c_int) -> c_int;

/// The libcudart file names tried, newest first.
const CUDART_NAMES: &[&str] = &[
    "libcudart.so",
    "libcudart.so.13",
    "libcudart.so.12",
    "libcudart.so.11.0",
    "libcudart.so.10.2",
    "libcudart.so.10.1",
    "libcudart.so.10.0",
];

/// Asks libcuda in this process. This leaves CUDA's state in the process: only the child of
/// [`query`] calls it.
#[cfg_attr(not(unix), allow(dead_code))]
fn query_in_process(library: Option<&Path>) -> Result<LibcudaReport, LibcudaError> {
    let candidates: Vec<std::ffi::OsString> = match library {
        Some(p) => vec![p.as_os_str().to_owned()],
        None => vec!["libcuda.so.1".into(), "libcuda.so".into()],
    };
    let mut last_error = None;
    let mut lib = None;
    for name in &candidates {
        // SAFETY: loading libcuda runs its initialisers, which is what this child is for.
        match unsafe { libloading::Library::new(name) } {
            Ok(l) => {
                lib = Some(l);
                break;
            }
            Err(e) => {
                last_error = Some(LibcudaError::NotFound {
                    library: name.to_string_lossy().into_owned(),
                    reason: e.to_string(),
                })
            }
        }
    }
    let Some(lib) = lib else {
        return Err(last_error.unwrap_or(LibcudaError::MissingSymbol("library")));
    };

    // SAFETY: the symbol types are the CUDA driver API's documented signatures.
    unsafe {
        let get = |name: &'static str| -> Result<*mut std::ffi::c_void, LibcudaError> {
            let sym: libloading::Symbol<*mut std::ffi::c_void> = lib
                .get(name.as_bytes())
                .map_err(|_| LibcudaError::MissingSymbol(name))?;
            Ok(*sym)
        };
        let cu_init: CuInit = std::mem::transmute(get("cuInit")?);
        let count_fn: CuIntOut = std::mem::transmute(get("cuDeviceGetCount")?);
        let device_get: CuDeviceGet = std::mem::transmute(get("cuDeviceGet")?);
        let uuid_fn: Option<CuDeviceGetUuid> = get("cuDeviceGetUuid_v2")
            .or_else(|_| get("cuDeviceGetUuid"))
            .ok()
            .map(|p| std::mem::transmute::<*mut std::ffi::c_void, CuDeviceGetUuid>(p));
        let bus_fn: Option<CuDeviceGetPciBusId> = get("cuDeviceGetPCIBusId")
            .ok()
            .map(|p| std::mem::transmute::<*mut std::ffi::c_void, CuDeviceGetPciBusId>(p));
        let version_fn: Option<CuIntOut> = get("cuDriverGetVersion")
            .ok()
            .map(|p| std::mem::transmute::<*mut std::ffi::c_void, CuIntOut>(p));

        let mut report = LibcudaReport::default();
        if let Some(f) = version_fn {
            let mut v = 0;
            if f(&mut v) == 0 {
                report.driver_version = Some(v);
            }
        }
        let code = cu_init(0);
        if code != 0 {
            return Err(LibcudaError::Call {
                call: "cuInit",
                code,
            });
        }
        let mut count = 0;
        let code = count_fn(&mut count);
        if code != 0 {
            return Err(LibcudaError::Call {
                call: "cuDeviceGetCount",
                code,
            });
        }
        for ordinal in 0..count.max(0) {
            let mut dev = 0;
            let code = device_get(&mut dev, ordinal);
            if code != 0 {
                return Err(LibcudaError::Call {
                    call: "cuDeviceGet",
                    code,
                });
            }
            let mut entry = LibcudaDevice::default();
            if let Some(f) = uuid_fn {
                let mut bytes = [0u8; 16];
                if f(&mut bytes, dev) == 0 {
                    entry.uuid = Some(uuid_text(&bytes));
                }
            }
            if let Some(f) = bus_fn {
                let mut buf = [0 as c_char; 64];
                if f(buf.as_mut_ptr(), buf.len() as c_int, dev) == 0 {
                    buf[buf.len() - 1] = 0;
                    let text = std::ffi::CStr::from_ptr(buf.as_ptr());
                    entry.bus_id = Some(text.to_string_lossy().into_owned());
                }
            }
            report.devices.push(entry);
        }
        report.runtime_version = runtime_version();
        Ok(report)
    }
}

/// `cudaRuntimeGetVersion` of the first libcudart found.
#[cfg_attr(not(unix), allow(dead_code))]
fn runtime_version() -> Option<i32> {
    for name in CUDART_NAMES {
        // SAFETY: as for libcuda; the symbol has the CUDA runtime's documented signature.
        unsafe {
            let Ok(lib) = libloading::Library::new(*name) else {
                continue;
            };
            let Ok(f) = lib.get::<CuIntOut>(b"cudaRuntimeGetVersion") else {
                continue;
            };
            let mut v = 0;
            if f(&mut v) == 0 {
                return Some(v);
            }
        }
    }
    None
}

/// 16 UUID bytes as `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
fn uuid_text(b: &[u8; 16]) -> String {
    let hex =
        |r: std::ops::Range<usize>| b[r].iter().map(|x| format!("{x:02x}")).collect::<String>();
    format!(
        "{}-{}-{}-{}-{}",
        hex(0..4),
        hex(4..6),
        hex(6..8),
        hex(8..10),
        hex(10..16)
    )
}

/// The child's answer as text: `driver N`, `runtime N`, `device UUID BUS` (`-` for none), or
/// one `error ...` line.
#[cfg_attr(not(unix), allow(dead_code))]
fn encode(r: &Result<LibcudaReport, LibcudaError>) -> String {
    match r {
        Err(LibcudaError::NotFound { library, reason }) => {
            format!("notfound {}\t{}\n", library, reason.replace('\n', " "))
        }
        Err(LibcudaError::Call { call, code }) => format!("call {call} {code}\n"),
        Err(e) => format!("error {}\n", e.to_string().replace('\n', " ")),
        Ok(rep) => {
            let mut s = String::new();
            let opt = |v: Option<i32>| v.map_or("-".to_string(), |v| v.to_string());
            s.push_str(&format!("driver {}\n", opt(rep.driver_version)));
            s.push_str(&format!("runtime {}\n", opt(rep.runtime_version)));
            for d in &rep.devices {
                s.push_str(&format!(
                    "device {} {}\n",
                    d.uuid.as_deref().unwrap_or("-"),
                    d.bus_id.as_deref().unwrap_or("-")
                ));
            }
            s
        }
    }
}

/// Reads the child's answer.
#[cfg_attr(not(unix), allow(dead_code))]
fn decode(bytes: &[u8]) -> Result<LibcudaReport, LibcudaError> {
    let text = String::from_utf8_lossy(bytes);
    let mut report = LibcudaReport::default();
    let mut any = false;
    let num = |s: &str| s.parse::<i32>().ok();
    for line in text.lines() {
        any = true;
        let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
        match word {
            "notfound" => {
                let (library, reason) = rest.split_once('\t').unwrap_or((rest, ""));
                return Err(LibcudaError::NotFound {
                    library: library.to_string(),
                    reason: reason.to_string(),
                });
            }
            "call" => {
                let (call, code) = rest.split_once(' ').unwrap_or((rest, ""));
                let call = match call {
                    "cuInit" => "cuInit",
                    "cuDeviceGetCount" => "cuDeviceGetCount",
                    "cuDeviceGet" => "cuDeviceGet",
                    _ => "a CUDA call",
                };
                return Err(LibcudaError::Call {
                    call,
                    code: num(code).unwrap_or(-1),
                });
            }
            "error" => return Err(LibcudaError::Child(rest.to_string())),
            "driver" => report.driver_version = num(rest),
            "runtime" => report.runtime_version = num(rest),
            "device" => {
                let (uuid, bus) = rest.split_once(' ').unwrap_or((rest, "-"));
                let some = |s: &str| (s != "-" && !s.is_empty()).then(|| s.to_string());
                report.devices.push(LibcudaDevice {
                    uuid: some(uuid),
                    bus_id: some(bus),
                });
            }
            _ => return Err(LibcudaError::Child(format!("unexpected answer {line:?}"))),
        }
    }
    if !any {
        return Err(LibcudaError::Child(
            "the child ended without an answer".into(),
        ));
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_print_in_cudas_groups() {
        let b = [
            0xd7, 0xe9, 0x7d, 0x99, 0xd3, 0xfa, 0xbb, 0x12, 0x90, 0x45, 0xc1, 0x05, 0xfe, 0xdb,
            0x45, 0xbd,
        ];
        assert_eq!(uuid_text(&b), "d7e97d99-d3fa-bb12-9045-c105fedb45bd");
    }

    #[test]
    fn answers_round_trip_through_the_pipe_format() {
        let rep = LibcudaReport {
            devices: vec![
                LibcudaDevice {
                    uuid: Some("ab-cd".into()),
                    bus_id: Some("0000:18:00.0".into()),
                },
                LibcudaDevice::default(),
            ],
            driver_version: Some(12020),
            runtime_version: None,
        };
        assert_eq!(decode(encode(&Ok(rep.clone())).as_bytes()), Ok(rep));
        let err = LibcudaError::Call {
            call: "cuInit",
            code: 100,
        };
        assert_eq!(decode(encode(&Err(err.clone())).as_bytes()), Err(err));
        assert!(decode(b"").is_err());
        assert!(decode(b"garbage here").is_err());
    }

    #[cfg(unix)]
    #[test]
    fn a_missing_library_is_an_error_from_the_child_and_the_parent_goes_on() {
        let missing = Path::new("/nonexistent/libcuda-for-gpu-backend-tests.so.1");
        let r = query(Some(missing), Duration::from_secs(20));
        match r {
            Err(LibcudaError::NotFound { library, .. }) => {
                assert!(library.contains("libcuda-for-gpu-backend-tests"))
            }
            other => panic!("expected NotFound, got {other:?}"),
        }
    }
}
