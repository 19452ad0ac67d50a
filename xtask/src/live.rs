//! Live processes for the benchmarks: real `sleep` processes whose PIDs replace a fixture's GPU
//! PIDs, so that fake-nvml serves PIDs that exist on this machine and every tool's host
//! look-ups do real work (a PID that does not exist is found missing at once, by every tool
//! alike, which hides what the look-ups cost). Also the system-call counting with strace.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use anyhow::{bail, Context, Result};
use gpu_backend::{Answer, Fixture};

/// `sleep` processes, killed and reaped when dropped.
pub struct LiveProcesses {
    children: Vec<Child>,
}

impl LiveProcesses {
    /// Spawns `n` `sleep 3600` processes and waits (bounded) until each has exec'd.
    pub fn spawn(n: usize) -> Result<LiveProcesses> {
        let mut live = LiveProcesses {
            children: Vec::with_capacity(n),
        };
        for _ in 0..n {
            let child = Command::new("sleep")
                .arg("3600")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .context("cannot run sleep")?;
            live.children.push(child);
        }
        for pid in live.pids() {
            let cmdline = format!("/proc/{pid}/cmdline");
            let mut ok = false;
            for _ in 0..500 {
                if std::fs::read(&cmdline).is_ok_and(|c| c.starts_with(b"sleep\0")) {
                    ok = true;
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            if !ok {
                bail!("sleep (PID {pid}) did not start");
            }
        }
        Ok(live)
    }

    /// Their PIDs, in the order spawned.
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(Child::id).collect()
    }
}

impl Drop for LiveProcesses {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
        }
        for c in &mut self.children {
            let _ = c.wait();
        }
    }
}

/// The distinct GPU PIDs of a fixture (process lists of every frame), in order of first
/// appearance.
pub fn gpu_pids(f: &Fixture) -> Vec<u32> {
    let mut seen = Vec::new();
    for frame in &f.frames {
        for d in frame.devices.values() {
            for list in [&d.compute_processes, &d.graphics_processes] {
                if let Answer::Ok(ps) = list {
                    for p in ps {
                        if !seen.contains(&p.pid) {
                            seen.push(p.pid);
                        }
                    }
                }
            }
        }
    }
    seen
}

/// Renames the fixture's GPU PIDs to `pids` (the first GPU PID to `pids[0]`, ...) everywhere
/// they appear: process lists, per-process samples and the host facts. There must be at least
/// as many `pids` as GPU PIDs.
pub fn adopt_pids(f: &mut Fixture, pids: &[u32]) -> Result<()> {
    let old = gpu_pids(f);
    if old.len() > pids.len() {
        bail!("{} GPU PIDs, only {} live processes", old.len(), pids.len());
    }
    let map: BTreeMap<u32, u32> = old.into_iter().zip(pids.iter().copied()).collect();
    let re = |pid: &mut u32| {
        if let Some(&new) = map.get(pid) {
            *pid = new;
        }
    };
    for frame in &mut f.frames {
        for d in frame.devices.values_mut() {
            for list in [&mut d.compute_processes, &mut d.graphics_processes] {
                if let Answer::Ok(ps) = list {
                    ps.iter_mut().for_each(|p| re(&mut p.pid));
                }
            }
            if let Answer::Ok(samples) = &mut d.process_utilization {
                samples.iter_mut().for_each(|s| re(&mut s.pid));
            }
        }
        let host = std::mem::take(&mut frame.host.processes);
        frame.host.processes = host
            .into_iter()
            .map(|(pid, p)| (map.get(&pid).copied().unwrap_or(pid), p))
            .collect();
    }
    let host = std::mem::take(&mut f.host.processes);
    f.host.processes = host
        .into_iter()
        .map(|(pid, p)| (map.get(&pid).copied().unwrap_or(pid), p))
        .collect();
    Ok(())
}

/// strace, installed with apt-get when it is missing and we are root; `None` (with a message)
/// when it cannot be had.
pub fn strace() -> Option<&'static str> {
    let have = || {
        Command::new("strace")
            .arg("-V")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if have() {
        return Some("strace");
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        eprintln!("== installing strace (apt-get)");
        let _ = Command::new("apt-get")
            .args(["install", "-y", "-qq", "strace"])
            .stdout(Stdio::null())
            .status();
        if have() {
            return Some("strace");
        }
    }
    eprintln!("== strace is not available: system calls are not counted");
    None
}

/// What one strace log says: every system call, and those on `/proc/<pid>` of the given PIDs
/// (strace `-y` names each descriptor's file, so reads and closes count as well as opens).
#[derive(Debug, Clone, Copy, Default)]
pub struct Syscalls {
    /// All system calls.
    pub total: u64,
    /// Those on the files of the live PIDs.
    pub on_pids: u64,
}

/// Counts the calls in an `strace -f -y -o LOG` log (an interrupted call's `resumed` half is
/// not counted twice).
pub fn count_syscalls(log: &Path, pids: &[u32]) -> Result<Syscalls> {
    let text = std::fs::read_to_string(log)
        .with_context(|| format!("cannot read the strace log {}", log.display()))?;
    let prefixes: std::collections::HashSet<String> =
        pids.iter().map(|p| format!("/proc/{p}/")).collect();
    let mut s = Syscalls::default();
    for line in text.lines() {
        if line.contains("resumed>") || line.contains("+++ exited") || line.contains("--- SIG") {
            continue;
        }
        s.total += 1;
        // The path of an open, or a descriptor's file as strace -y shows it.
        let on = line.match_indices("/proc/").any(|(i, _)| {
            let rest = &line[i..];
            let end = rest[6..]
                .find(|c: char| !c.is_ascii_digit())
                .map_or(rest.len(), |e| e + 6);
            rest.get(..=end).is_some_and(|p| prefixes.contains(p))
        });
        if on {
            s.on_pids += 1;
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syscalls_on_the_live_pids_are_told_apart_from_the_rest() {
        let dir = std::env::temp_dir().join(format!("xtask-live-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("strace.log");
        std::fs::write(
            &log,
            "10 openat(AT_FDCWD, \"/proc/42/stat\", O_RDONLY|O_CLOEXEC) = 3</proc/42/stat>\n\
             10 read(3</proc/42/stat>, \"42 (sleep) S\"..., 1024) = 300\n\
             10 read(3</proc/42/stat>, \"\", 724) = 0\n\
             10 close(3</proc/42/stat>) = 0\n\
             10 openat(AT_FDCWD, \"/proc/421/stat\", O_RDONLY) = 3</proc/421/stat>\n\
             10 openat(AT_FDCWD, \"/proc/meminfo\", O_RDONLY) = 4</proc/meminfo>\n\
             11 futex(0x1, FUTEX_WAIT, 0, NULL <unfinished ...>\n\
             11 <... futex resumed>) = 0\n\
             11 +++ exited with 0 +++\n",
        )
        .unwrap();
        let s = count_syscalls(&log, &[42]).unwrap();
        std::fs::remove_dir_all(&dir).ok();
        assert_eq!(s.total, 7);
        // /proc/421 is another PID, /proc/meminfo no PID at all.
        assert_eq!(s.on_pids, 4);
    }

    #[test]
    fn adopted_pids_replace_the_recorded_ones_everywhere() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut f = Fixture::load(root.join("fixtures/h100-sxm-8gpu.json")).unwrap();
        let old = gpu_pids(&f);
        let new: Vec<u32> = (0..old.len() as u32).map(|i| 4_000_000 + i).collect();
        adopt_pids(&mut f, &new).unwrap();
        assert_eq!(gpu_pids(&f), new);
        assert!(f.host.processes.keys().all(|p| new.contains(p)));
        // Still a valid fixture.
        let text = f.to_json_pretty();
        let path = std::env::temp_dir().join(format!("xtask-adopt-{}.json", std::process::id()));
        std::fs::write(&path, text).unwrap();
        let loaded = Fixture::load(&path);
        std::fs::remove_file(&path).ok();
        assert!(loaded.is_ok(), "{:?}", loaded.err());
        assert!(
            adopt_pids(&mut f, &new[..1]).is_err(),
            "too few live processes"
        );
    }
}
