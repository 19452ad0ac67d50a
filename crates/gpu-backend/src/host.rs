//! Host-side facts about processes and the machine, behind a small abstraction.
//!
//! NVML tells which PIDs use a GPU; the host tells who they are (user, command line, CPU, RSS,
//! start time). [`HostSource`] has a live implementation on sysinfo ([`LiveHost`], feature
//! `host-live`) and a replay implementation ([`ReplayHost`]) that serves the host facts kept in a
//! fixture on the same clock as a [`ReplayBackend`], so a replayed fixture shows the same process
//! table as the machine it was recorded on.

use std::sync::Arc;

use crate::fixture::{HostFrame, HostProcess, HostProcessSample, HostStatic};
use crate::replay::ReplayBackend;

/// The machine-wide facts that do not change: [`HostStatic`] without its processes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HostMachine {
    /// Host name.
    pub hostname: Option<String>,
    /// Logical CPUs.
    pub cpu_count: Option<u32>,
    /// Physical memory, bytes.
    pub memory_total: Option<u64>,
    /// Swap, bytes.
    pub swap_total: Option<u64>,
}

/// Where host facts come from. `None` for a process means it could not be seen: it ended, it
/// lives in another PID namespace, or it may not be read.
pub trait HostSource: Send + Sync {
    /// Facts about the machine.
    fn machine(&self) -> HostMachine;
    /// Machine-wide readings now; the `processes` map of the answer is left empty.
    fn sample(&self) -> HostFrame;
    /// What does not change about a process.
    fn process(&self, pid: u32) -> Option<HostProcess>;
    /// What changes about a process, now.
    fn process_sample(&self, pid: u32) -> Option<HostProcessSample>;
    /// The PID of `pid` inside the innermost PID namespace it belongs to (its PID inside its
    /// container), where the host can tell. `None` by default, and for replayed fixtures, which
    /// do not record it.
    fn namespace_pid(&self, pid: u32) -> Option<u32> {
        let _ = pid;
        None
    }
    /// The host's "now", milliseconds since the Unix epoch: the wall clock for a live host, the
    /// recorded time of the current frame for a replay. Running times are measured to it.
    fn now_unix_ms(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    }
}

/// Serves a fixture's host facts, following the frame of a [`ReplayBackend`].
#[derive(Debug, Clone)]
pub struct ReplayHost {
    backend: Arc<ReplayBackend>,
}

impl ReplayHost {
    /// Host facts of `backend`'s fixture, at `backend`'s current frame.
    pub fn new(backend: Arc<ReplayBackend>) -> ReplayHost {
        ReplayHost { backend }
    }

    fn statics(&self) -> &HostStatic {
        &self.backend.fixture().host
    }
}

impl HostSource for ReplayHost {
    fn machine(&self) -> HostMachine {
        let h = self.statics();
        HostMachine {
            hostname: h.hostname.clone(),
            cpu_count: h.cpu_count,
            memory_total: h.memory_total,
            swap_total: h.swap_total,
        }
    }

    fn sample(&self) -> HostFrame {
        let f = &self.backend.frame().host;
        HostFrame {
            processes: Default::default(),
            ..f.clone()
        }
    }

    fn process(&self, pid: u32) -> Option<HostProcess> {
        // A process is visible only while it is alive in the current frame.
        self.backend.frame().host.processes.get(&pid)?;
        self.statics().processes.get(&pid).cloned()
    }

    fn process_sample(&self, pid: u32) -> Option<HostProcessSample> {
        self.backend.frame().host.processes.get(&pid).cloned()
    }

    /// `meta.recorded_at` plus the current frame's `t_ms`; the wall clock when the fixture does
    /// not say when it was recorded.
    fn now_unix_ms(&self) -> u64 {
        let recorded = self
            .backend
            .fixture()
            .meta
            .recorded_at
            .as_deref()
            .and_then(|t| humantime::parse_rfc3339_weak(t).ok())
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
        match recorded {
            Some(start) => u64::try_from(start.as_millis())
                .unwrap_or(u64::MAX)
                .saturating_add(self.backend.frame().t_ms),
            None => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
        }
    }
}

#[cfg(feature = "host-live")]
pub use live::LiveHost;

/// The last PID of the `NSpid:` line of a `/proc/<pid>/status` text: the process's PID in the
/// innermost PID namespace it belongs to.
pub fn parse_nspid(status: &str) -> Option<u32> {
    let line = status.lines().find_map(|l| l.strip_prefix("NSpid:"))?;
    line.split_whitespace().last()?.parse().ok()
}

#[cfg(feature = "host-live")]
mod live {
    use std::sync::{Mutex, OnceLock};

    use sysinfo::{
        MemoryRefreshKind, Pid, ProcessRefreshKind, ProcessesToUpdate, System, UpdateKind, Users,
    };

    use super::*;

    /// Host facts of this machine, read with sysinfo. Only the PIDs asked for are read, never the
    /// whole process table; the user list is read the first time a live process is looked up.
    pub struct LiveHost {
        sys: Mutex<System>,
        /// Read on first use: listing users loads the system's NSS modules, which a one-shot
        /// snapshot with no live GPU process never needs.
        users: OnceLock<Users>,
    }

    impl std::fmt::Debug for LiveHost {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("LiveHost").finish_non_exhaustive()
        }
    }

    impl Default for LiveHost {
        fn default() -> Self {
            LiveHost::new()
        }
    }

    impl LiveHost {
        /// A source for this machine.
        pub fn new() -> LiveHost {
            LiveHost {
                sys: Mutex::new(System::new()),
                users: OnceLock::new(),
            }
        }

        fn with_process<T>(&self, pid: u32, f: impl FnOnce(&sysinfo::Process) -> T) -> Option<T> {
            let mut sys = self.sys.lock().unwrap_or_else(|p| p.into_inner());
            let pid = Pid::from_u32(pid);
            sys.refresh_processes_specifics(
                ProcessesToUpdate::Some(&[pid]),
                true,
                ProcessRefreshKind::nothing()
                    .with_memory()
                    .with_cpu()
                    .with_cmd(UpdateKind::OnlyIfNotSet)
                    .with_user(UpdateKind::OnlyIfNotSet),
            );
            sys.process(pid).map(f)
        }
    }

    impl HostSource for LiveHost {
        fn machine(&self) -> HostMachine {
            let mut sys = self.sys.lock().unwrap_or_else(|p| p.into_inner());
            sys.refresh_memory_specifics(MemoryRefreshKind::everything());
            let cpus = std::thread::available_parallelism()
                .ok()
                .and_then(|n| u32::try_from(n.get()).ok());
            HostMachine {
                hostname: System::host_name(),
                cpu_count: cpus,
                memory_total: Some(sys.total_memory()),
                swap_total: Some(sys.total_swap()),
            }
        }

        fn sample(&self) -> HostFrame {
            let mut sys = self.sys.lock().unwrap_or_else(|p| p.into_inner());
            sys.refresh_memory_specifics(MemoryRefreshKind::everything());
            sys.refresh_cpu_usage();
            let load = System::load_average();
            HostFrame {
                cpu_percent: Some(f64::from(sys.global_cpu_usage())),
                memory_used: Some(sys.used_memory()),
                swap_used: Some(sys.used_swap()),
                load_average: Some([load.one, load.five, load.fifteen]),
                processes: Default::default(),
            }
        }

        fn process(&self, pid: u32) -> Option<HostProcess> {
            let users = &self.users;
            self.with_process(pid, |p| HostProcess {
                name: p.name().to_string_lossy().into_owned(),
                cmdline: p
                    .cmd()
                    .iter()
                    .map(|a| a.to_string_lossy().into_owned())
                    .collect(),
                user: p
                    .user_id()
                    .and_then(|uid| {
                        users
                            .get_or_init(Users::new_with_refreshed_list)
                            .get_user_by_id(uid)
                    })
                    .map(|u| u.name().to_string()),
                ppid: p.parent().map(|p| p.as_u32()),
                start_time_s: Some(p.start_time()),
            })
        }

        /// From the `NSpid:` line of `/proc/<pid>/status` (Linux 4.1 and later).
        fn namespace_pid(&self, pid: u32) -> Option<u32> {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
            parse_nspid(&status)
        }

        fn process_sample(&self, pid: u32) -> Option<HostProcessSample> {
            self.with_process(pid, |p| HostProcessSample {
                cpu_percent: f64::from(p.cpu_usage()),
                rss: p.memory(),
                status: p.status().to_string().to_lowercase(),
            })
        }
    }
}

#[cfg(all(test, feature = "host-live"))]
mod tests {
    use super::*;

    #[test]
    fn live_host_reads_a_real_child_process() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep runs");
        // The child is ours as soon as it is spawned, but it is `sleep` only once it has
        // exec'd: wait for that (bounded), as a real GPU process has long since.
        let cmdline = format!("/proc/{}/cmdline", child.id());
        for _ in 0..200 {
            if std::fs::read(&cmdline).is_ok_and(|c| c.starts_with(b"sleep")) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let host = LiveHost::new();
        let facts = host.process(child.id());
        let sample = host.process_sample(child.id());
        child.kill().ok();
        child.wait().ok();
        let facts = facts.expect("the child is visible");
        assert_eq!(facts.name, "sleep");
        assert_eq!(facts.cmdline, vec!["sleep".to_string(), "30".to_string()]);
        assert_eq!(facts.ppid, Some(std::process::id()));
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let start = facts.start_time_s.expect("start time");
        assert!(
            start <= now && now - start < 120,
            "started just now: {start} vs {now}"
        );
        assert!(facts.user.is_some());
        assert!(sample.expect("a sample").rss > 0);
    }

    #[test]
    fn replay_now_is_the_recording_time_of_the_current_frame() {
        let path = format!(
            "{}/../../fixtures/old-driver.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let fixture = crate::Fixture::load(path).unwrap();
        let backend = Arc::new(ReplayBackend::new(fixture));
        let host = ReplayHost::new(backend.clone());
        // The scenario says it was recorded at 2026-11-01T10:00:00Z.
        assert_eq!(host.now_unix_ms(), 1_793_527_200_000);
        backend.set_frame(3);
        assert_eq!(host.now_unix_ms(), 1_793_527_200_000 + backend.frame().t_ms);
    }

    #[test]
    fn the_innermost_namespace_pid_is_the_last_on_the_nspid_line() {
        assert_eq!(
            parse_nspid("Name:\tpython\nNSpid:\t48213\t7\nNSpgid:\t1\n"),
            Some(7)
        );
        assert_eq!(parse_nspid("NSpid:\t1234\n"), Some(1234));
        assert_eq!(parse_nspid("Name:\tx\n"), None);
        assert_eq!(parse_nspid("NSpid:\tgarbage\n"), None);
        assert_eq!(parse_nspid("NSpid:\n"), None);
        let host = LiveHost::new();
        assert!(host.namespace_pid(std::process::id()).is_some());
        assert_eq!(host.namespace_pid(u32::MAX - 3), None);
    }

    #[test]
    fn live_host_answers_none_for_a_pid_that_does_not_exist() {
        let host = LiveHost::new();
        // PIDs are below 2^22 on Linux.
        assert!(host.process(u32::MAX - 7).is_none());
        assert!(host.process_sample(u32::MAX - 7).is_none());
        let machine = host.machine();
        assert!(machine.memory_total.unwrap_or(0) > 0);
    }
}
