//! Child processes for the tests that read a live process's facts from `/proc`: a spawned
//! child is the test's own at once, but shows its program's command line only once it has
//! exec'd it, which a real GPU process has long since done.

use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// How long a child may take to exec before the test fails: generous, for a busy machine.
const EXEC_WAIT: Duration = Duration::from_secs(15);

/// Spawns `cmd` and waits until its `/proc/PID/cmdline` starts with `prefix` (it has exec'd
/// its program). Fails the test, the child killed, if `cmd` does not start or has not exec'd
/// within 15 s.
pub fn spawn_exec(cmd: &mut Command, prefix: &[u8]) -> Child {
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("{cmd:?} does not start: {e}"));
    let cmdline = format!("/proc/{}/cmdline", child.id());
    let start = Instant::now();
    while !std::fs::read(&cmdline).is_ok_and(|c| c.starts_with(prefix)) {
        if start.elapsed() > EXEC_WAIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{cmd:?} has not exec'd {:?} after {EXEC_WAIT:?}",
                String::from_utf8_lossy(prefix)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn the_child_has_exec_d_its_program_when_spawn_exec_returns() {
        let mut child = spawn_exec(Command::new("sleep").arg("30"), b"sleep\0");
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", child.id())).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(cmdline, b"sleep\x0030\0");
    }

    #[test]
    #[should_panic(expected = "does not start")]
    fn a_program_that_is_not_there_fails_the_test() {
        let mut never = spawn_exec(
            &mut Command::new("/nonexistent/gpuscope-test-program"),
            b"x",
        );
        // Not reached: the spawn fails. Were it to start, the child is reaped.
        let _ = never.kill();
        let _ = never.wait();
    }
}
