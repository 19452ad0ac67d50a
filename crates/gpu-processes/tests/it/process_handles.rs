//! nvitop's live process API: a host process for any PID with its parent, its children and a
//! refreshing `is_running`, over live processes of this machine; and snapshots of chosen GPU
//! processes with and without `failsafe`, over a replayed fixture.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gpu_backend::host::{HostSource, LiveHost};
use gpu_backend::DeviceId;
use gpu_processes::{ProcessCollector, ProcessGone, ProcessHandle};

/// Waits until `cond` holds, for at most 10 s.
fn wait_until(mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[cfg(target_os = "linux")]
#[test]
fn parent_children_and_is_running_follow_live_processes() {
    let host: Arc<dyn HostSource> = Arc::new(LiveHost::new());
    // A shell with two sleeping children of its own.
    let shell = Killed(
        Command::new("sh")
            .args(["-c", "sleep 60 & sleep 60 & wait"])
            .stdout(Stdio::null())
            .spawn()
            .expect("sh runs"),
    );
    let sh = ProcessHandle::new(host.clone(), shell.0.id()).expect("the shell is seen");
    assert!(
        wait_until(|| sh.children(false).len() == 2),
        "{:?}",
        sh.children(false)
    );
    let sleeps = sh.children(false);

    // This test process is the shell's parent, and its descendants include the sleeps.
    let me = ProcessHandle::current(host.clone()).expect("this process is seen");
    assert_eq!(sh.parent(), Some(me.clone()));
    assert_eq!(sleeps[0].parent(), Some(sh.clone()));
    let direct = me.children(false);
    assert!(direct.contains(&sh), "{direct:?}");
    assert!(!direct.contains(&sleeps[0]), "a grandchild is not a child");
    let all = me.children(true);
    assert!(sleeps.iter().all(|s| all.contains(s)), "{all:?}");

    // Facts now, for people.
    let snap = sleeps[0].snapshot().expect("a running sleep");
    assert_eq!(snap.name.as_deref(), Some("sleep"));
    assert_eq!(
        snap.cmdline,
        Some(vec!["sleep".to_string(), "60".to_string()])
    );
    assert!(
        sleeps[0].host_memory_human().ends_with('B'),
        "{}",
        sleeps[0].host_memory_human()
    );

    // Killed and reaped by the shell: no longer running, no snapshot, no children.
    let victim = sleeps[0].pid();
    let killed = Command::new("kill")
        .args(["-KILL", &victim.to_string()])
        .status()
        .expect("kill(1) runs");
    assert!(killed.success());
    assert!(wait_until(|| !sleeps[0].is_running()));
    assert_eq!(sleeps[0].snapshot(), None);
    assert!(sleeps[0].children(true).is_empty());
    assert!(sleeps[1].is_running(), "the other one still runs");
    assert!(sh.is_running());
}

#[test]
fn a_pid_that_does_not_exist_has_no_handle() {
    let host: Arc<dyn HostSource> = Arc::new(LiveHost::new());
    // PIDs are at most 2^22 on Linux.
    assert!(ProcessHandle::new(host, 4_194_304 + 7).is_none());
}

#[test]
fn snapshots_of_chosen_gpu_processes_with_and_without_failsafe() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/h100-sxm-8gpu.json");
    let collector = ProcessCollector::from_fixture(&path, Some(3)).unwrap();
    let all = collector.take_all();
    let a = &all.processes[0];
    let b = all
        .processes
        .iter()
        .find(|p| p.device != a.device)
        .expect("processes on two devices");
    let wanted = [(b.device, b.pid), (a.device, a.pid)];
    let got = collector.take_process_snapshots(&wanted, false).unwrap();
    // In the order asked, each as the full snapshot has it.
    assert_eq!(got.len(), 2);
    assert_eq!((got[0].device, got[0].pid), (b.device, b.pid));
    assert_eq!(got[0].gpu_memory, b.gpu_memory);
    assert_eq!(got[0].host.user, b.host.user);
    assert_eq!(got[1].host.command, a.host.command);

    // A PID not on the device: an error naming it, or N/A with failsafe.
    let gone = (DeviceId::Gpu(0), 999_999);
    let err = collector
        .take_process_snapshots(&[wanted[0], gone], false)
        .unwrap_err();
    assert_eq!(
        err,
        ProcessGone {
            device: DeviceId::Gpu(0),
            pid: 999_999
        }
    );
    assert!(
        err.to_string().contains("no process 999999 on device 0"),
        "{err}"
    );
    let safe = collector
        .take_process_snapshots(&[wanted[0], gone], true)
        .unwrap();
    assert_eq!(safe[0].pid, b.pid);
    assert_eq!(safe[1].pid, 999_999);
    assert_eq!(safe[1].gpu_memory, None);
    assert_eq!(safe[1].host.user, None);
    // Which list it was on is not known either: N/A, not a made-up "C".
    assert_eq!(safe[1].kind, None);
    assert_eq!(safe[1].kind_str(), "N/A");
    assert_eq!(safe[0].kind, b.kind);
    assert!(!safe[1].host.visible);
    // A device that does not exist is an error even with failsafe.
    assert!(collector
        .take_process_snapshots(&[(DeviceId::Gpu(42), 1)], true)
        .is_err());
}
