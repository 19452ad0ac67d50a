//! A limit on the tasks (processes and threads) of one gpuscope command, for the tests that
//! run it where threads cannot all start (a container's `pids.max`): a pids cgroup where one
//! can be made, else `RLIMIT_NPROC` as a user of its own. Root only; `TaskLimit::new` says
//! `None` elsewhere. One limit at a time in the test process: `RLIMIT_NPROC` counts every task
//! of that user, so two limited commands at once would count each other's.

#![allow(dead_code)]

use std::process::Command;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::cli;

/// Held by each [`TaskLimit`] for its life.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The pids cgroup (v2 or v1) or the RLIMIT_NPROC that a test's gpuscope runs under; removed
/// when dropped.
pub struct TaskLimit {
    how: How,
    _alone: MutexGuard<'static, ()>,
}

/// How a [`TaskLimit`] limits.
enum How {
    /// A cgroup directory (its `pids.max` set), which the command joins before it execs.
    Cgroup(std::path::PathBuf),
    /// A user that owns no process, as whom the command runs with `RLIMIT_NPROC` set (root
    /// only: RLIMIT_NPROC counts every task of the user).
    Rlimit(u32),
}

impl TaskLimit {
    /// At most `tasks` tasks (threads included) for one command: a pids cgroup where one can
    /// be made, else RLIMIT_NPROC for a user of its own; `None` when neither can (not root,
    /// or no cgroup and a binary that another user cannot reach).
    pub fn new(tasks: u32) -> Option<TaskLimit> {
        if !is_root() {
            return None;
        }
        let alone = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
        let name = format!("gpuscope-test-{}-{tasks}", std::process::id());
        for parent in ["/sys/fs/cgroup", "/sys/fs/cgroup/pids"] {
            let parent = std::path::Path::new(parent);
            // A cgroup hierarchy (not the tmpfs that holds v1's hierarchies), whose new
            // directories the kernel fills with pids.max.
            if !parent.join("cgroup.procs").is_file() {
                continue;
            }
            let dir = parent.join(&name);
            if std::fs::create_dir(&dir).is_err() {
                continue;
            }
            if dir.join("pids.max").is_file()
                && std::fs::write(dir.join("pids.max"), tasks.to_string()).is_ok()
            {
                return Some(TaskLimit {
                    how: How::Cgroup(dir),
                    _alone: alone,
                });
            }
            let _ = std::fs::remove_dir(&dir);
        }
        if !runnable_by_anyone(std::path::Path::new(env!("CARGO_BIN_EXE_gpuscope"))) {
            eprintln!("no pids cgroup can be made here, and another user cannot run gpuscope");
            return None;
        }
        eprintln!("no pids cgroup can be made here: RLIMIT_NPROC as a user of its own instead");
        Some(TaskLimit {
            how: How::Rlimit(tasks),
            _alone: alone,
        })
    }

    /// `gpuscope ARGS` under the limit.
    pub fn command(&self, args: &[&str]) -> Command {
        let bin = env!("CARGO_BIN_EXE_gpuscope");
        match self.how {
            How::Cgroup(ref dir) => {
                let mut c = Command::new("sh");
                c.arg("-c")
                    .arg("echo $$ > \"$0\" && exec \"$@\"")
                    .arg(dir.join("cgroup.procs"))
                    .arg(bin)
                    .args(args);
                cli::without_settings(&mut c);
                c
            }
            How::Rlimit(tasks) => {
                use std::os::unix::process::CommandExt as _;
                let mut c = cli::command(args);
                // A uid that no account uses, so that the limit counts gpuscope's tasks only.
                const UID: u32 = 3_210_987;
                // SAFETY: only async-signal-safe system calls between fork and exec.
                unsafe {
                    c.pre_exec(move || {
                        let limit = libc::rlimit {
                            rlim_cur: tasks.into(),
                            rlim_max: tasks.into(),
                        };
                        if libc::setgroups(0, std::ptr::null()) != 0
                            || libc::setgid(UID) != 0
                            || libc::setrlimit(libc::RLIMIT_NPROC, &limit) != 0
                            || libc::setuid(UID) != 0
                        {
                            return Err(std::io::Error::last_os_error());
                        }
                        Ok(())
                    });
                }
                c
            }
        }
    }
}

impl Drop for TaskLimit {
    fn drop(&mut self) {
        if let How::Cgroup(dir) = &self.how {
            // Its one process has ended; the kernel may take a moment to let it go.
            for _ in 0..100 {
                if std::fs::remove_dir(dir).is_ok() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// Whether any user may run `bin`: it and every directory above it open to others.
fn runnable_by_anyone(bin: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    let open = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.permissions().mode() & 0o001 != 0)
    };
    open(bin) && bin.ancestors().skip(1).all(open)
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}
