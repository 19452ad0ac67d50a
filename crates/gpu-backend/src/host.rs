//! Host-side facts about processes and the machine, behind a small abstraction.
//!
//! NVML tells which PIDs use a GPU; the host tells who they are (user, command line, CPU, RSS,
//! start time). [`HostSource`] has a live implementation reading `/proc` ([`LiveHost`], feature
//! `host-live`) and a replay implementation ([`ReplayHost`]) that serves the host facts kept in a
//! fixture on the same clock as a [`ReplayBackend`], so a replayed fixture shows the same process
//! table as the machine it was recorded on.

use std::sync::Arc;

use crate::fixture::{HostFrame, HostProcessFacts, HostProcessSample, HostStatic};
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
    fn process(&self, pid: u32) -> Option<HostProcessFacts>;
    /// What changes about a process, now.
    fn process_sample(&self, pid: u32) -> Option<HostProcessSample>;
    /// The PID of `pid` inside the innermost PID namespace it belongs to (its PID inside its
    /// container), where the host can tell. `None` by default, and for replayed fixtures, which
    /// do not record it.
    fn namespace_pid(&self, pid: u32) -> Option<u32> {
        let _ = pid;
        None
    }
    /// Everything about a process in one look-up: its facts, a sample and its namespace PID.
    /// By default the three methods above; a live host answers all three from one reading.
    fn lookup(&self, pid: u32) -> Option<ProcessLookup> {
        Some(ProcessLookup {
            facts: self.process(pid)?,
            sample: self.process_sample(pid),
            ns_pid: self.namespace_pid(pid),
        })
    }
    /// Forgets what is kept between look-ups about every PID not in `pids` (sorted ascending):
    /// a refresh says which processes are still on the GPUs. Nothing by default.
    fn keep_only(&self, pids: &[u32]) {
        let _ = pids;
    }
    /// Every PID the host can see now, ascending (to find a process's children). Empty by
    /// default; a live host lists `/proc`, a replay the processes alive in its frame.
    fn pids(&self) -> Vec<u32> {
        Vec::new()
    }
    /// The host's "now", milliseconds since the Unix epoch: the wall clock for a live host, the
    /// recorded time of the current frame for a replay. Running times are measured to it.
    fn now_unix_ms(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    }
}

/// The answer of [`HostSource::lookup`].
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessLookup {
    /// What does not change about the process.
    pub facts: HostProcessFacts,
    /// What changes, now; `None` when it could not be read.
    pub sample: Option<HostProcessSample>,
    /// The PID inside its innermost PID namespace, where known.
    pub ns_pid: Option<u32>,
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

    fn process(&self, pid: u32) -> Option<HostProcessFacts> {
        // A process is visible only while it is alive in the current frame.
        self.backend.frame().host.processes.get(&pid)?;
        self.statics().processes.get(&pid).cloned()
    }

    fn process_sample(&self, pid: u32) -> Option<HostProcessSample> {
        self.backend.frame().host.processes.get(&pid).cloned()
    }

    fn pids(&self) -> Vec<u32> {
        // A BTreeMap: already ascending.
        self.backend
            .frame()
            .host
            .processes
            .keys()
            .copied()
            .collect()
    }

    /// `meta.recorded_at` plus the current frame's `t_ms` and, in a looping replay, one loop's
    /// length per loop made ([`ReplayBackend::recording_time_ms`]), as the replay's sample and
    /// event times are moved on; the wall clock when the fixture does not say when it was
    /// recorded.
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
                .saturating_add(self.backend.recording_time_ms()),
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

/// The fields of a `/proc/<pid>/stat` line that host facts use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcStat {
    /// The executable name as the kernel keeps it (at most 15 bytes; any bytes, spaces and
    /// parentheses included).
    pub comm: String,
    /// The state letter (`R`, `S`, `D`, `Z`, ...).
    pub state: char,
    /// Parent PID; 0 for a process with no parent in this namespace.
    pub ppid: u32,
    /// CPU time in user mode, clock ticks.
    pub utime: u64,
    /// CPU time in kernel mode, clock ticks.
    pub stime: u64,
    /// Start time, clock ticks after boot.
    pub start_ticks: u64,
    /// Resident set, pages.
    pub rss_pages: u64,
}

/// Parses a `/proc/<pid>/stat` text. The name (`comm`) may hold spaces and parentheses, so it
/// runs from the first `(` to the *last* `)`; the numbers after it are parsed within their
/// types' bounds. `None` for a text that is not such a line.
pub fn parse_proc_stat(text: &[u8]) -> Option<ProcStat> {
    let open = text.iter().position(|&b| b == b'(')?;
    let close = text.iter().rposition(|&b| b == b')')?;
    if close < open {
        return None;
    }
    let comm = String::from_utf8_lossy(&text[open + 1..close]).into_owned();
    let rest = std::str::from_utf8(&text[close + 1..]).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    // Fields after the name, counted from 0: 0 state, 1 ppid, 11 utime, 12 stime,
    // 19 starttime, 21 rss (proc(5) numbers them 3, 4, 14, 15, 22 and 24).
    let mut state_chars = fields.next()?.chars();
    let state = state_chars.next()?;
    if state_chars.next().is_some() {
        return None;
    }
    let ppid = fields.next()?.parse().ok()?;
    let mut nth = |skip: usize| -> Option<u64> { fields.nth(skip)?.parse().ok() };
    let utime = nth(9)?;
    let stime = nth(0)?;
    let start_ticks = nth(6)?;
    // rss is signed in the kernel's format; a negative count is not a size.
    let rss_pages = nth(1)?;
    Some(ProcStat {
        comm,
        state,
        ppid,
        utime,
        stime,
        start_ticks,
        rss_pages,
    })
}

/// A state letter of `/proc/<pid>/stat` as psutil (and so nvitop and the fixtures) names it.
pub fn state_name(state: char) -> Option<&'static str> {
    Some(match state {
        'R' => "running",
        'S' => "sleeping",
        'D' => "disk-sleep",
        'T' => "stopped",
        't' => "tracing-stop",
        'Z' => "zombie",
        'X' | 'x' => "dead",
        'K' => "wake-kill",
        'W' => "waking",
        'I' => "idle",
        'P' => "parked",
        _ => return None,
    })
}

/// The real user id (first number of the `Uid:` line) of a `/proc/<pid>/status` text.
pub fn parse_status_uid(status: &str) -> Option<u32> {
    let line = status.lines().find_map(|l| l.strip_prefix("Uid:"))?;
    line.split_whitespace().next()?.parse().ok()
}

/// Values in kB of a `/proc/meminfo` text, by key (`MemTotal`, `MemAvailable`, ...), in bytes.
pub fn parse_meminfo_bytes(meminfo: &str, key: &str) -> Option<u64> {
    let rest = meminfo
        .lines()
        .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(':')))?;
    let kb: u64 = rest.split_whitespace().next()?.parse().ok()?;
    kb.checked_mul(1024)
}

/// The three load averages of a `/proc/loadavg` text.
pub fn parse_loadavg(text: &str) -> Option<[f64; 3]> {
    let mut it = text.split_whitespace().map(|v| v.parse::<f64>().ok());
    let load = [it.next()??, it.next()??, it.next()??];
    load.iter()
        .all(|v| v.is_finite() && *v >= 0.0)
        .then_some(load)
}

/// The busy and total clock ticks of all CPUs, from the `cpu ` line of a `/proc/stat` text
/// (busy: everything but idle and iowait).
pub fn parse_stat_cpu_ticks(stat: &str) -> Option<(u64, u64)> {
    let line = stat.lines().find_map(|l| l.strip_prefix("cpu "))?;
    let values: Vec<u64> = line
        .split_whitespace()
        .take(8)
        .map(|v| v.parse().ok())
        .collect::<Option<_>>()?;
    if values.len() < 4 {
        return None;
    }
    let total = values.iter().try_fold(0u64, |a, v| a.checked_add(*v))?;
    let idle = values[3].checked_add(values.get(4).copied().unwrap_or(0))?;
    Some((total.checked_sub(idle)?, total))
}

/// The boot time (`btime`, seconds since the Unix epoch) of a `/proc/stat` text.
pub fn parse_boot_time(stat: &str) -> Option<u64> {
    let line = stat.lines().find_map(|l| l.strip_prefix("btime"))?;
    line.trim().parse().ok()
}

/// The arguments of a `/proc/<pid>/cmdline` text: NUL-separated, the last one NUL-terminated.
pub fn parse_cmdline(raw: &[u8]) -> Vec<String> {
    let raw = raw.strip_suffix(&[0]).unwrap_or(raw);
    if raw.is_empty() {
        return Vec::new();
    }
    raw.split(|&b| b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// User names by uid from an `/etc/passwd` text (`name:password:uid:...`); lines that are not
/// such entries are skipped, and of two entries for one uid the first counts (as getpwuid).
pub fn parse_passwd(text: &str) -> std::collections::HashMap<u32, String> {
    let mut users = std::collections::HashMap::new();
    for line in text.lines() {
        let mut fields = line.split(':');
        let (Some(name), Some(_), Some(uid)) = (fields.next(), fields.next(), fields.next()) else {
            continue;
        };
        if name.is_empty() || name.starts_with(['#', '+', '-']) {
            continue;
        }
        if let Ok(uid) = uid.parse::<u32>() {
            users.entry(uid).or_insert_with(|| name.to_string());
        }
    }
    users
}

/// The executable name: the kernel's `comm`, or, when that was cut at 15 bytes, the file name
/// of the first argument that it begins (as psutil does).
pub fn process_name(comm: &str, cmdline: &[String]) -> Option<String> {
    if comm.len() >= 15 {
        if let Some(first) = cmdline.first() {
            let base = first.rsplit('/').next().unwrap_or(first);
            if base.starts_with(comm) {
                return Some(base.to_string());
            }
        }
    }
    Some(comm.to_string()).filter(|c| !c.is_empty())
}

pub use crate::container::HostRoots;

#[cfg(feature = "host-live")]
mod live {
    use std::collections::HashMap;
    use std::io::Read;
    use std::sync::{Mutex, OnceLock};
    use std::time::Instant;

    use super::*;

    /// What is read once per session.
    #[derive(Debug)]
    struct Statics {
        machine: HostMachine,
        /// Clock ticks per second (`sysconf(_SC_CLK_TCK)`).
        clk_tck: u64,
        page_size: u64,
        boot_time_s: Option<u64>,
    }

    /// What is kept about one process between refreshes: its facts, read once per (PID, start
    /// time), and its last CPU reading.
    #[derive(Debug)]
    struct Entry {
        start_ticks: u64,
        facts: HostProcessFacts,
        ns_pid: Option<u32>,
        cpu_ticks: u64,
        read_at: Instant,
        cpu_percent: Option<f64>,
    }

    #[derive(Debug, Default)]
    struct State {
        buf: Vec<u8>,
        path: String,
        processes: HashMap<u32, Entry>,
        users: HashMap<u32, Option<String>>,
        /// `/etc/passwd` by uid, read the first time a user is looked up.
        passwd: Option<HashMap<u32, String>>,
        /// Busy and total ticks of all CPUs at the last [`HostSource::sample`].
        cpu: Option<(u64, u64)>,
        /// Pod names by container id, from the last listing of the container-log directory.
        pod_names: HashMap<String, crate::container::PodNames>,
    }

    /// Host facts of this machine, read from `/proc`. Only the PIDs asked for are read, never
    /// the whole process table: one read of `/proc/<pid>/stat` per look-up (state, parent,
    /// CPU times, resident memory); the command line, user, start time, namespace PID and
    /// container (`/proc/<pid>/cgroup`; for a process in a pod, its names from the kept
    /// listing of the kubelet's container-log directory, listed again only for a container it
    /// does not know) once per (PID, start time), kept until the process ends. CPU percent is
    /// measured between look-ups, so the first look-up of a process has none (N/A). The clock-tick rate, page
    /// size, boot time and machine facts are read once; user names once per uid.
    pub struct LiveHost {
        state: Mutex<State>,
        statics: OnceLock<Statics>,
        /// The directory read as `/proc`, without a trailing `/`.
        proc_root: String,
        /// The kubelet's container-log directory.
        container_logs: std::path::PathBuf,
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

    /// Reads a whole file into `buf` (cleared first) with plain `open`/`read`/`close`: no
    /// `statx` or `lseek` for a size hint, which `std::fs::read` makes and a procfs file does
    /// not need. Four system calls for a small file.
    fn read_into(path: &str, buf: &mut Vec<u8>) -> std::io::Result<()> {
        let mut file = std::fs::File::open(path)?;
        buf.clear();
        loop {
            if buf.capacity() - buf.len() < 1024 {
                buf.reserve(4096);
            }
            let len = buf.len();
            buf.resize(buf.capacity(), 0);
            match file.read(&mut buf[len..]) {
                Ok(0) => {
                    buf.truncate(len);
                    return Ok(());
                }
                Ok(n) => buf.truncate(len + n),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => buf.truncate(len),
                Err(e) => {
                    buf.truncate(len);
                    return Err(e);
                }
            }
        }
    }

    fn sysconf(name: libc::c_int) -> Option<u64> {
        // SAFETY: sysconf takes a plain integer and has no memory effects.
        let v = unsafe { libc::sysconf(name) };
        u64::try_from(v).ok().filter(|&v| v > 0)
    }

    /// The name of user `uid`: from `/etc/passwd` (read once, by the caller) when it is there,
    /// else through the system's user database (NSS: LDAP, systemd, ...), which loads the NSS
    /// modules into the process (some 600 KiB, and their start-up) only when needed; the uid's
    /// number when it has no name (a container's user unknown to the host).
    fn user_name(uid: u32, passwd: &HashMap<u32, String>) -> Option<String> {
        if let Some(name) = passwd.get(&uid) {
            return Some(name.clone());
        }
        // SAFETY: a zeroed passwd is a valid out-parameter (plain pointers and integers).
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut buf: Vec<libc::c_char> = vec![0; 4096];
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        loop {
            // SAFETY: every pointer is valid for the call, `buf` for `buf.len()` bytes.
            let rc = unsafe {
                libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut result)
            };
            if rc == libc::ERANGE && buf.len() < (1 << 20) {
                buf.resize(buf.len() * 2, 0);
                continue;
            }
            break;
        }
        if result.is_null() || pwd.pw_name.is_null() {
            return Some(uid.to_string());
        }
        // SAFETY: getpwuid_r succeeded, so pw_name is a NUL-terminated string inside `buf`.
        let name = unsafe { std::ffi::CStr::from_ptr(pwd.pw_name) };
        Some(name.to_string_lossy().into_owned()).filter(|n| !n.is_empty())
    }

    impl LiveHost {
        /// A source for this machine, reading the roots [`HostRoots::from_env`] names
        /// (`/proc` and `/var/log/containers` unless `GPUSCOPE_PROC_ROOT` or
        /// `GPUSCOPE_CONTAINER_LOGS` say otherwise).
        pub fn new() -> LiveHost {
            LiveHost::with_roots(HostRoots::from_env())
        }

        /// A source for this machine that reads `roots.proc` as `/proc` and finds pods' names
        /// in `roots.container_logs`: for tests, and for a monitor in a container that mounts
        /// the host's directories at other paths.
        pub fn with_roots(roots: HostRoots) -> LiveHost {
            let proc_root = roots.proc.to_string_lossy();
            LiveHost {
                state: Mutex::new(State::default()),
                statics: OnceLock::new(),
                proc_root: proc_root.trim_end_matches('/').to_string(),
                container_logs: roots.container_logs,
            }
        }

        /// `<proc root>/<name>`.
        fn proc_path(&self, name: &str) -> String {
            format!("{}/{name}", self.proc_root)
        }

        fn lock(&self) -> std::sync::MutexGuard<'_, State> {
            self.state.lock().unwrap_or_else(|p| p.into_inner())
        }

        fn statics(&self) -> &Statics {
            self.statics.get_or_init(|| {
                let mut buf = Vec::new();
                let text = |path: &str, buf: &mut Vec<u8>| {
                    read_into(path, buf)
                        .ok()
                        .map(|()| String::from_utf8_lossy(buf).into_owned())
                };
                let meminfo = text(&self.proc_path("meminfo"), &mut buf).unwrap_or_default();
                let boot_time_s =
                    text(&self.proc_path("stat"), &mut buf).and_then(|s| parse_boot_time(&s));
                let hostname = text(&self.proc_path("sys/kernel/hostname"), &mut buf)
                    .map(|h| h.trim().to_string())
                    .filter(|h| !h.is_empty());
                Statics {
                    machine: HostMachine {
                        hostname,
                        cpu_count: std::thread::available_parallelism()
                            .ok()
                            .and_then(|n| u32::try_from(n.get()).ok()),
                        memory_total: parse_meminfo_bytes(&meminfo, "MemTotal"),
                        swap_total: parse_meminfo_bytes(&meminfo, "SwapTotal"),
                    },
                    clk_tck: sysconf(libc::_SC_CLK_TCK).unwrap_or(100),
                    page_size: sysconf(libc::_SC_PAGESIZE).unwrap_or(4096),
                    boot_time_s,
                }
            })
        }

        /// Reads `/proc/<pid>/stat` and brings the process's entry up to date: its facts are
        /// read afresh when the PID is new or now names another process (another start time);
        /// the entry is dropped when the process has ended. The sample of this reading.
        fn refresh(&self, state: &mut State, pid: u32) -> Option<HostProcessSample> {
            let statics = self.statics();
            let State {
                buf,
                path,
                processes,
                users,
                passwd,
                pod_names,
                ..
            } = state;
            path.clear();
            {
                use std::fmt::Write;
                let _ = write!(path, "{}/{pid}/stat", self.proc_root);
            }
            let Some(stat) = read_into(path, buf)
                .ok()
                .and_then(|()| parse_proc_stat(buf))
            else {
                processes.remove(&pid);
                return None;
            };
            let now = Instant::now();
            let ticks = stat.utime.saturating_add(stat.stime);
            let known = processes
                .get(&pid)
                .is_some_and(|e| e.start_ticks == stat.start_ticks);
            if known {
                if let Some(e) = processes.get_mut(&pid) {
                    let elapsed = now.duration_since(e.read_at).as_secs_f64();
                    // Closer than one clock tick, the last measurement stands.
                    if elapsed >= 1.0 / statics.clk_tck as f64 {
                        let used =
                            ticks.saturating_sub(e.cpu_ticks) as f64 / statics.clk_tck as f64;
                        e.cpu_percent = Some(used * 100.0 / elapsed);
                        e.cpu_ticks = ticks;
                        e.read_at = now;
                    }
                    e.facts.ppid = Some(stat.ppid).filter(|&p| p != 0);
                }
            } else {
                let base = &path[..path.len() - "stat".len()];
                let mut file = String::with_capacity(base.len() + 8);
                file.push_str(base);
                file.push_str("cmdline");
                let cmdline = read_into(&file, buf)
                    .ok()
                    .map(|()| parse_cmdline(buf))
                    .unwrap_or_default();
                file.truncate(base.len());
                file.push_str("status");
                let status = read_into(&file, buf)
                    .ok()
                    .map(|()| String::from_utf8_lossy(buf).into_owned());
                let uid = status.as_deref().and_then(parse_status_uid);
                file.truncate(base.len());
                file.push_str("cgroup");
                let mut container = read_into(&file, buf)
                    .ok()
                    .and_then(|()| crate::container::parse_cgroup(&String::from_utf8_lossy(buf)));
                if let Some(c) = container.as_mut().filter(|c| c.pod_uid.is_some()) {
                    if let Some(id) = c.id.as_deref() {
                        // The kept listing first; a container it does not know lists the
                        // directory again (a new pod's entry appears when it starts).
                        if !pod_names.contains_key(id) {
                            *pod_names = crate::container::list_pod_names(&self.container_logs);
                        }
                        if let Some(names) = pod_names.get(id) {
                            c.set_names(names);
                        }
                    }
                }
                let user = uid.and_then(|uid| {
                    users
                        .entry(uid)
                        .or_insert_with(|| {
                            let passwd = passwd.get_or_insert_with(|| {
                                std::fs::read_to_string("/etc/passwd")
                                    .map(|t| parse_passwd(&t))
                                    .unwrap_or_default()
                            });
                            user_name(uid, passwd)
                        })
                        .clone()
                });
                let facts = HostProcessFacts {
                    name: process_name(&stat.comm, &cmdline),
                    cmdline,
                    user,
                    ppid: Some(stat.ppid).filter(|&p| p != 0),
                    start_time_s: statics
                        .boot_time_s
                        .map(|b| b.saturating_add(stat.start_ticks / statics.clk_tck)),
                    container,
                };
                processes.insert(
                    pid,
                    Entry {
                        start_ticks: stat.start_ticks,
                        facts,
                        ns_pid: status.as_deref().and_then(parse_nspid),
                        cpu_ticks: ticks,
                        read_at: now,
                        cpu_percent: None,
                    },
                );
            }
            let cpu_percent = processes.get(&pid).and_then(|e| e.cpu_percent);
            Some(HostProcessSample {
                cpu_percent,
                rss: stat.rss_pages.checked_mul(statics.page_size),
                status: state_name(stat.state).map(str::to_string),
            })
        }
    }

    impl HostSource for LiveHost {
        fn machine(&self) -> HostMachine {
            self.statics().machine.clone()
        }

        fn pids(&self) -> Vec<u32> {
            let mut pids: Vec<u32> = std::fs::read_dir("/proc")
                .map(|entries| {
                    entries
                        .flatten()
                        .filter_map(|e| e.file_name().to_str()?.parse().ok())
                        .collect()
                })
                .unwrap_or_default();
            pids.sort_unstable();
            pids
        }

        fn sample(&self) -> HostFrame {
            let mut state = self.lock();
            let State { buf, cpu, .. } = &mut *state;
            let meminfo = read_into(&self.proc_path("meminfo"), buf)
                .ok()
                .map(|()| String::from_utf8_lossy(buf).into_owned())
                .unwrap_or_default();
            let mem = |key| parse_meminfo_bytes(&meminfo, key);
            let used = |total: Option<u64>, free: Option<u64>| total?.checked_sub(free?);
            let memory_used = used(mem("MemTotal"), mem("MemAvailable"));
            let swap_used = used(mem("SwapTotal"), mem("SwapFree"));
            let load_average = read_into(&self.proc_path("loadavg"), buf)
                .ok()
                .and_then(|()| parse_loadavg(&String::from_utf8_lossy(buf)));
            let ticks = read_into(&self.proc_path("stat"), buf)
                .ok()
                .and_then(|()| parse_stat_cpu_ticks(&String::from_utf8_lossy(buf)));
            // Measured between samples: the first has none.
            let cpu_percent = match (*cpu, ticks) {
                (Some((busy0, total0)), Some((busy, total))) if total > total0 => {
                    Some(busy.saturating_sub(busy0) as f64 * 100.0 / (total - total0) as f64)
                }
                _ => None,
            };
            if ticks.is_some() {
                *cpu = ticks;
            }
            HostFrame {
                cpu_percent,
                memory_used,
                swap_used,
                load_average,
                processes: Default::default(),
            }
        }

        fn process(&self, pid: u32) -> Option<HostProcessFacts> {
            let mut state = self.lock();
            self.refresh(&mut state, pid)?;
            state.processes.get(&pid).map(|e| e.facts.clone())
        }

        fn process_sample(&self, pid: u32) -> Option<HostProcessSample> {
            let mut state = self.lock();
            self.refresh(&mut state, pid)
        }

        /// From the `NSpid:` line of `/proc/<pid>/status` (Linux 4.1 and later), read once per
        /// process.
        fn namespace_pid(&self, pid: u32) -> Option<u32> {
            let mut state = self.lock();
            if !state.processes.contains_key(&pid) {
                self.refresh(&mut state, pid)?;
            }
            state.processes.get(&pid).and_then(|e| e.ns_pid)
        }

        fn lookup(&self, pid: u32) -> Option<ProcessLookup> {
            let mut state = self.lock();
            let sample = self.refresh(&mut state, pid)?;
            let entry = state.processes.get(&pid)?;
            Some(ProcessLookup {
                facts: entry.facts.clone(),
                sample: Some(sample),
                ns_pid: entry.ns_pid,
            })
        }

        fn keep_only(&self, pids: &[u32]) {
            self.lock()
                .processes
                .retain(|pid, _| pids.binary_search(pid).is_ok());
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
        assert_eq!(facts.name.as_deref(), Some("sleep"));
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
        assert!(sample.expect("a sample").rss.is_some_and(|r| r > 0));
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

    /// Spawns `cmd` and waits (bounded) until it has exec'd `prefix`.
    fn spawn_exec(cmd: &mut std::process::Command, prefix: &[u8]) -> std::process::Child {
        let child = cmd.spawn().expect("the command runs");
        let cmdline = format!("/proc/{}/cmdline", child.id());
        for _ in 0..500 {
            if std::fs::read(&cmdline).is_ok_and(|c| c.starts_with(prefix)) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        child
    }

    #[test]
    fn a_stat_line_with_spaces_and_parens_in_the_name_is_split_at_the_last_paren() {
        let line = b"4242 (my (odd) name) S 17 4242 4242 0 -1 4194560 150 0 0 0 \
            31 7 0 0 20 0 1 0 123456 10000000 321 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0\n";
        let stat = parse_proc_stat(line).expect("parses");
        assert_eq!(
            stat,
            ProcStat {
                comm: "my (odd) name".into(),
                state: 'S',
                ppid: 17,
                utime: 31,
                stime: 7,
                start_ticks: 123_456,
                rss_pages: 321,
            }
        );
        assert_eq!(parse_proc_stat(b"4242 (x) S"), None);
        assert_eq!(parse_proc_stat(b""), None);
        // A negative resident count is not a size.
        assert_eq!(
            parse_proc_stat(b"1 (x) R 0 0 0 0 0 0 0 0 0 0 1 1 0 0 0 0 1 0 5 0 -3"),
            None
        );
        assert_eq!(state_name('D'), Some("disk-sleep"));
        assert_eq!(state_name('?'), None);
    }

    proptest::proptest! {
        /// Whatever the name (any bytes but NUL, parentheses and spaces included) and numbers,
        /// the fields read back are the ones written.
        #[test]
        fn any_stat_line_reads_back(
            comm in proptest::collection::vec(1u8..=255, 0..32),
            state in proptest::sample::select(vec!['R', 'S', 'D', 'Z', 'T', 'I']),
            ppid: u32,
            utime: u64,
            stime: u64,
            start: u64,
            rss: u64,
        ) {
            let mut line = b"77 (".to_vec();
            line.extend_from_slice(&comm);
            line.extend_from_slice(format!(
                ") {state} {ppid} 1 1 0 -1 0 0 0 0 0 {utime} {stime} 0 0 20 0 1 0 {start} 999 {rss} 5 6\n"
            ).as_bytes());
            let stat = parse_proc_stat(&line).expect("parses");
            proptest::prop_assert_eq!(stat.comm, String::from_utf8_lossy(&comm).into_owned());
            proptest::prop_assert_eq!(
                (stat.state, stat.ppid, stat.utime, stat.stime, stat.start_ticks, stat.rss_pages),
                (state, ppid, utime, stime, start, rss)
            );
        }

        /// Any bytes at all: an answer or `None`, never a panic.
        #[test]
        fn any_bytes_never_panic_the_stat_parser(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            let _ = parse_proc_stat(&bytes);
        }
    }

    #[test]
    fn host_wide_texts_parse() {
        let meminfo = "MemTotal:       16303412 kB\nMemFree:  1 kB\nMemAvailable:   8000000 kB\nSwapTotal: 0 kB\n";
        assert_eq!(
            parse_meminfo_bytes(meminfo, "MemTotal"),
            Some(16_303_412 * 1024)
        );
        assert_eq!(parse_meminfo_bytes(meminfo, "Mem"), None);
        assert_eq!(parse_meminfo_bytes(meminfo, "SwapFree"), None);
        assert_eq!(
            parse_loadavg("0.50 1.25 2.00 1/234 5678\n"),
            Some([0.5, 1.25, 2.0])
        );
        assert_eq!(parse_loadavg("0.50 nan 2.00"), None);
        assert_eq!(
            parse_stat_cpu_ticks("cpu  10 0 5 100 5 0 0 0 0 0\ncpu0 1 1 1 1\nbtime 1700000000\n"),
            Some((15, 120))
        );
        assert_eq!(
            parse_boot_time("cpu 1 2 3 4\nbtime 1700000000\n"),
            Some(1_700_000_000)
        );
        assert_eq!(parse_cmdline(b"python3\0-c\0\0"), vec!["python3", "-c", ""]);
        assert!(parse_cmdline(b"").is_empty());
        assert_eq!(
            parse_status_uid("Name:\tx\nUid:\t1000\t1000\t1000\t1000\n"),
            Some(1000)
        );
        assert_eq!(
            process_name("python3.11-confi", &["/usr/bin/python3.11-config-x".into()]).as_deref(),
            Some("python3.11-config-x")
        );
        assert_eq!(process_name("", &[]), None);
        let passwd = parse_passwd(
            "root:x:0:0:root:/root:/bin/bash\n# comment\nbad line\n+nis\n\
             nobody:x:65534:65534::/:/usr/sbin/nologin\nshadow:x:0:0::/:/bin/sh\n",
        );
        assert_eq!(passwd.len(), 2);
        assert_eq!(passwd[&0], "root", "the first entry of a uid counts");
        assert_eq!(passwd[&65534], "nobody");
    }

    #[test]
    fn a_process_that_ends_reads_as_none_and_is_forgotten() {
        let mut child = spawn_exec(std::process::Command::new("sleep").arg("30"), b"sleep");
        let pid = child.id();
        let host = LiveHost::new();
        assert!(host.lookup(pid).is_some());
        child.kill().ok();
        child.wait().ok();
        assert_eq!(host.lookup(pid), None);
        assert_eq!(host.process(pid), None);
        assert_eq!(host.process_sample(pid), None);
    }

    #[test]
    fn cpu_percent_is_unknown_at_first_and_higher_for_a_child_that_burns_cpu() {
        let mut burner = spawn_exec(
            std::process::Command::new("sh").args(["-c", "while :; do :; done"]),
            b"sh",
        );
        let mut sleeper = spawn_exec(std::process::Command::new("sleep").arg("30"), b"sleep");
        let host = LiveHost::new();
        let first = host.lookup(burner.id()).and_then(|l| l.sample);
        assert_eq!(
            first.and_then(|s| s.cpu_percent),
            None,
            "nothing measured yet"
        );
        host.lookup(sleeper.id());
        // Until the burner has used some CPU time (bounded: the machine may be busy).
        let mut burn = None;
        let mut rest = None;
        for _ in 0..100 {
            std::thread::sleep(std::time::Duration::from_millis(50));
            burn = host.lookup(burner.id()).and_then(|l| l.sample?.cpu_percent);
            rest = host
                .lookup(sleeper.id())
                .and_then(|l| l.sample?.cpu_percent);
            if burn.is_some_and(|b| b > 0.0) {
                break;
            }
        }
        burner.kill().ok();
        sleeper.kill().ok();
        burner.wait().ok();
        sleeper.wait().ok();
        let (burn, rest) = (burn.expect("measured"), rest.expect("measured"));
        assert!(burn > rest, "burner {burn}% vs sleeper {rest}%");
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
