//! Sending signals to processes, and reading a live process's environment.

use gpu_backend::fixture::HostProcess;

use super::app::Sig;

impl Sig {
    fn number(self) -> libc::c_int {
        match self {
            Sig::Int => libc::SIGINT,
            Sig::Term => libc::SIGTERM,
            Sig::Kill => libc::SIGKILL,
        }
    }
}

/// Sends `sig` to `pid`. With `recorded` (a replayed recording), the signal is sent only when the
/// process with that PID on this machine has the recorded command line: a recording's PIDs
/// belong to another machine, and must never hit an unrelated local process.
///
/// Returns a message for the status line saying what happened; a refusal by the OS (another
/// user's process, a process that has ended) is a message, not an error.
pub fn send(pid: u32, sig: Sig, recorded: Option<&HostProcess>) -> String {
    let Ok(raw) = libc::pid_t::try_from(pid) else {
        return format!("PID {pid}: not a valid PID");
    };
    if raw <= 0 {
        return format!("PID {pid}: not a valid PID");
    }
    if let Some(facts) = recorded {
        match std::fs::read(format!("/proc/{pid}/cmdline")) {
            Err(_) => return format!("PID {pid}: no such process on this machine"),
            Ok(bytes) => {
                let live: Vec<String> = bytes
                    .split(|&b| b == 0)
                    .filter(|a| !a.is_empty())
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect();
                if live != facts.cmdline {
                    return format!(
                        "PID {pid} on this machine is not the recorded process; {} not sent",
                        sig.name()
                    );
                }
            }
        }
    }
    // SAFETY: kill(2) takes plain integers and has no memory effects in this process.
    let rc = unsafe { libc::kill(raw, sig.number()) };
    if rc == 0 {
        return format!("{} sent to PID {pid}", sig.name());
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EPERM) => format!(
            "PID {pid}: not permitted to send {} (another user's process?)",
            sig.name()
        ),
        Some(libc::ESRCH) => format!("PID {pid}: no such process (it has ended)"),
        _ => format!("PID {pid}: {} failed: {err}", sig.name()),
    }
}

/// The environment of a live process, one `KEY=VALUE` per entry, or why it cannot be read.
pub fn environment(pid: u32) -> Result<Vec<String>, String> {
    match std::fs::read(format!("/proc/{pid}/environ")) {
        Ok(bytes) => Ok(bytes
            .split(|&b| b == 0)
            .filter(|e| !e.is_empty())
            .map(|e| String::from_utf8_lossy(e).into_owned())
            .collect()),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            Err("N/A (no permission to read it)".into())
        }
        Err(_) => Err("N/A (the process cannot be read)".into()),
    }
}
