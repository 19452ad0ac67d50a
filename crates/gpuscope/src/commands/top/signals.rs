//! Sending signals to live processes, and reading a live process's environment.
//!
//! A signal goes only to the process the screen showed: its identity (start time in clock ticks
//! and owner, [`ProcIdentity`]) is read when the sample is taken and read again at send time; a
//! PID that now names another process is refused. On Linux the check and the signal go through
//! a pidfd, so the PID cannot be reused between the check and the signal. A replay never gets
//! here: its PIDs belong to the machine it was recorded on.

use std::os::unix::fs::MetadataExt as _;

use super::app::{ProcIdentity, Sig};

impl Sig {
    fn number(self) -> libc::c_int {
        match self {
            Sig::Int => libc::SIGINT,
            Sig::Term => libc::SIGTERM,
            Sig::Kill => libc::SIGKILL,
        }
    }
}

/// The start time (field 22, clock ticks after boot) of a `/proc/PID/stat` line. The command
/// name (field 2) is in parentheses and may hold spaces and `)`, so fields are counted from the
/// last `)`.
pub fn parse_start_ticks(stat: &str) -> Option<u64> {
    let (_, rest) = stat.rsplit_once(')')?;
    // Field 3 (the state) is the first after the name: field 22 is the 20th.
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Who `pid` is on this machine now, or `None` when it does not exist or cannot be read.
pub fn identity(pid: u32) -> Option<ProcIdentity> {
    let dir = format!("/proc/{pid}");
    let uid = std::fs::metadata(&dir).ok()?.uid();
    let stat = std::fs::read_to_string(format!("{dir}/stat")).ok()?;
    let start_ticks = parse_start_ticks(&stat)?;
    // The directory read first may belong to a process that ended in between: read its owner
    // again, so both facts are of the process whose stat was read.
    (std::fs::metadata(&dir).ok()?.uid() == uid).then_some(ProcIdentity { start_ticks, uid })
}

/// Sends `sig` to `pid`, which the screen showed as `shown` (`None`: its identity could not be
/// read then). The signal goes only when the process with that PID now has the same start time
/// and owner; otherwise, or when it cannot be told, it is refused.
///
/// Returns a message for the status line saying what happened; a refusal (by this check or by
/// the OS: another user's process, a process that has ended) is a message, not an error.
pub fn send(pid: u32, sig: Sig, shown: Option<&ProcIdentity>) -> String {
    let name = sig.name();
    let raw = match libc::pid_t::try_from(pid) {
        Ok(raw) if raw > 0 => raw,
        _ => return format!("PID {pid}: not a valid PID"),
    };
    let Some(shown) = shown else {
        return format!(
            "PID {pid}: its start time and owner could not be read when it was shown, so it \
             cannot be told from a process that reused its PID; {name} not sent"
        );
    };
    // Pin the process first, then check it: a pidfd names one process for good.
    let pidfd = match PidFd::open(raw) {
        Ok(fd) => fd,
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {
            return format!("PID {pid}: no such process (it has ended); {name} not sent")
        }
        Err(e) => return format!("PID {pid}: cannot open it ({e}); {name} not sent"),
    };
    let Some(now) = identity(pid) else {
        return format!("PID {pid}: it has ended or cannot be read; {name} not sent");
    };
    if now.start_ticks != shown.start_ticks {
        return format!(
            "PID {pid} is now another process (it started at another time than the one shown); \
             {name} not sent"
        );
    }
    if now.uid != shown.uid {
        return format!(
            "PID {pid} now belongs to another user than the process shown; {name} not sent"
        );
    }
    match pidfd.signal(raw, sig.number()) {
        Ok(()) => format!("{name} sent to PID {pid}"),
        Err(e) => match e.raw_os_error() {
            Some(libc::EPERM) => {
                format!("PID {pid}: not permitted to send {name} (another user's process?)")
            }
            Some(libc::ESRCH) => format!("PID {pid}: no such process (it has ended)"),
            _ => format!("PID {pid}: {name} failed: {e}"),
        },
    }
}

/// A process pinned by a pidfd (Linux 5.3 and later); `None` inside where the kernel has none,
/// and then `kill(2)` is used.
struct PidFd(Option<std::os::fd::OwnedFd>);

impl PidFd {
    #[cfg(target_os = "linux")]
    fn open(pid: libc::pid_t) -> std::io::Result<PidFd> {
        use std::os::fd::FromRawFd as _;
        // SAFETY: pidfd_open takes a PID and flags and returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ENOSYS) {
                return Ok(PidFd(None));
            }
            return Err(e);
        }
        let fd = libc::c_int::try_from(fd).map_err(|_| std::io::Error::other("bad pidfd"))?;
        // SAFETY: the descriptor was just returned by the kernel and is owned by no one else.
        Ok(PidFd(Some(unsafe {
            std::os::fd::OwnedFd::from_raw_fd(fd)
        })))
    }

    #[cfg(not(target_os = "linux"))]
    fn open(_pid: libc::pid_t) -> std::io::Result<PidFd> {
        Ok(PidFd(None))
    }

    fn signal(&self, pid: libc::pid_t, sig: libc::c_int) -> std::io::Result<()> {
        let rc = match &self.0 {
            #[cfg(target_os = "linux")]
            Some(fd) => {
                use std::os::fd::AsRawFd as _;
                // SAFETY: pidfd_send_signal takes a descriptor we own, a signal number, a null
                // siginfo and flags.
                let rc = unsafe {
                    libc::syscall(
                        libc::SYS_pidfd_send_signal,
                        fd.as_raw_fd(),
                        sig,
                        std::ptr::null::<libc::siginfo_t>(),
                        0,
                    )
                };
                if rc == 0 {
                    0
                } else {
                    -1
                }
            }
            #[cfg(not(target_os = "linux"))]
            Some(_) => -1,
            // SAFETY: kill(2) takes plain integers and has no memory effects in this process.
            None => unsafe { libc::kill(pid, sig) },
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn start_time_is_field_22_even_with_odd_names() {
        let stat = "4242 (a) b (c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 \
                    1000 50 18446744073709551615";
        assert_eq!(parse_start_ticks(stat), Some(987654));
        assert_eq!(parse_start_ticks("4242 (x) S 1 2"), None);
        assert_eq!(parse_start_ticks("no parenthesis"), None);
        assert_eq!(parse_start_ticks(""), None);
        let me = std::fs::read_to_string("/proc/self/stat").unwrap();
        assert!(parse_start_ticks(&me).is_some(), "{me}");
    }

    proptest! {
        #[test]
        fn start_time_parses_back_whatever_the_name(
            name in "[ -~]{0,16}",
            ticks in any::<u64>(),
            rest in proptest::collection::vec(any::<i64>(), 18),
        ) {
            let mut stat = format!("123 ({name}) R");
            for v in &rest {
                stat.push_str(&format!(" {v}"));
            }
            stat.push_str(&format!(" {ticks} 4096 12"));
            prop_assert_eq!(parse_start_ticks(&stat), Some(ticks));
        }

        #[test]
        fn parsing_never_panics(s in any::<String>()) {
            let _ = parse_start_ticks(&s);
        }
    }
}
