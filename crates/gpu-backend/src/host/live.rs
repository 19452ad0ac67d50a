//! [`LiveHost`]: this machine's host facts, read from `/proc`.

use std::collections::HashMap;
use std::io::Read;
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use super::procfs::{
    parse_boot_time, parse_cmdline, parse_loadavg, parse_meminfo_bytes, parse_passwd,
    parse_proc_stat, parse_stat_cpu_ticks, process_name, state_name, ProcStatus,
};
use super::{HostMachine, HostRoots, HostSource, ProcessLookup};
use crate::fixture::{HostFrame, HostProcessFacts, HostProcessSample};

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
        let rc =
            unsafe { libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut result) };
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
                    let used = ticks.saturating_sub(e.cpu_ticks) as f64 / statics.clk_tck as f64;
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
            let status = status.as_deref().map(ProcStatus::parse).unwrap_or_default();
            let uid = status.uid;
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
                        let passwd =
                            passwd.get_or_insert_with(|| read_passwd(std::path::Path::new(PASSWD)));
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
                    ns_pid: status.namespace_pid(),
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

/// How many PID namespaces deep this process is (1 on the host), from the `NSpid:` line of
/// `/proc/self/status`; `None` where the kernel does not say (before Linux 4.1) or the file
/// cannot be read.
pub fn own_pid_namespace_depth() -> Option<usize> {
    let mut buf = Vec::new();
    std::fs::File::open("/proc/self/status")
        .and_then(|f| f.take(STATUS_MAX_BYTES).read_to_end(&mut buf))
        .ok()?;
    ProcStatus::parse(&String::from_utf8_lossy(&buf)).namespace_depth()
}

/// The most of `/proc/self/status` read: the file is a few KiB.
const STATUS_MAX_BYTES: u64 = 64 * 1024;

/// The file of local users read for their names.
const PASSWD: &str = "/etc/passwd";

/// User names by uid from the passwd file at `path`, read through [`crate::files`]: only a
/// regular file of at most [`MAX_PASSWD_BYTES`](crate::files::MAX_PASSWD_BYTES) (a FIFO would block, a device or a huge file
/// would be read without end). One that is refused or unreadable gives no names, and each uid
/// is then asked of `getpwuid_r`, as one that is not in the file is.
pub(crate) fn read_passwd(path: &std::path::Path) -> HashMap<u32, String> {
    match crate::files::read_regular(path, crate::files::MAX_PASSWD_BYTES) {
        Ok(bytes) => parse_passwd(&String::from_utf8_lossy(&bytes)),
        Err(e) => {
            let path = crate::text::escape_control(&path.to_string_lossy()).into_owned();
            tracing::debug!(%path, error = %e, "user names not read from the passwd file");
            HashMap::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_support::process::spawn_exec;

    /// Loose end of issue 32: `/etc/passwd` was read whole, whatever it was (a device or a
    /// huge file read without end, a FIFO blocking the first user look-up). It is read as a
    /// regular file within a cap; anything else gives no names (each uid goes to
    /// `getpwuid_r`).
    #[test]
    fn the_passwd_file_is_read_only_as_a_regular_file_within_its_cap() {
        /// A scratch directory, removed when dropped.
        struct Scratch(std::path::PathBuf);
        impl Drop for Scratch {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
        let dir = Scratch(
            std::env::temp_dir().join(format!("gpuscope-passwd-test-{}", std::process::id())),
        );
        std::fs::create_dir_all(&dir.0).expect("a scratch directory");
        let dir = &dir.0;
        let good = dir.join("passwd");
        std::fs::write(
            &good,
            "root:x:0:0:root:/root:/bin/sh\nalice:x:1000:1000::/home/a:/bin/sh\n",
        )
        .expect("writes");
        let names = read_passwd(&good);
        assert_eq!(names.get(&1000).map(String::as_str), Some("alice"));
        assert_eq!(names.len(), 2);

        let huge = dir.join("huge");
        let f = std::fs::File::create(&huge).expect("creates");
        f.set_len(crate::files::MAX_PASSWD_BYTES + 1)
            .expect("a sparse file");
        let fifo = dir.join("fifo");
        let c_path = std::ffi::CString::new(fifo.to_string_lossy().as_bytes()).expect("a path");
        // SAFETY: a NUL-terminated path and a mode.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        for refused in [std::path::Path::new("/dev/zero"), &huge, &fifo, dir] {
            let (tx, rx) = std::sync::mpsc::channel();
            let path = refused.to_path_buf();
            std::thread::spawn(move || tx.send(read_passwd(&path)));
            let names = rx
                .recv_timeout(std::time::Duration::from_secs(10))
                .unwrap_or_else(|_| panic!("{} still being read after 10 s", refused.display()));
            assert!(names.is_empty(), "{}", refused.display());
        }
    }

    #[test]
    fn live_host_reads_a_real_child_process() {
        // The child is ours as soon as it is spawned, but it is `sleep` only once it has
        // exec'd: wait for that (bounded), as a real GPU process has long since.
        let mut child = spawn_exec(std::process::Command::new("sleep").arg("30"), b"sleep");
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

    #[test]
    fn the_namespace_pid_of_a_live_process_is_read() {
        let host = LiveHost::new();
        assert!(host.namespace_pid(std::process::id()).is_some());
        assert_eq!(host.namespace_pid(u32::MAX - 3), None);
        assert!(own_pid_namespace_depth().is_some_and(|n| n >= 1));
    }
}
