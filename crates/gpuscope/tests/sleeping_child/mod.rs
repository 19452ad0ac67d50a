//! A `sleep 1000` child of the test's own, for tests that signal a process through gpuscope:
//! killed when dropped, so a test that ends early leaves nothing behind. Shared by the unit
//! tests of `top` (src/top/tests.rs) and the terminal tests (tests/cli/top_tmux.rs).

#![allow(dead_code)]

use std::time::{Duration, Instant};

/// A `sleep 1000` child, killed if the test ends early.
pub struct Child(pub std::process::Child);

impl Child {
    /// Starts `sleep 1000` and waits (15 s at most) until the kernel shows its command line:
    /// right after exec it may not have set the new one yet.
    pub fn spawn() -> Child {
        let child = Child(
            std::process::Command::new("sleep")
                .arg("1000")
                .spawn()
                .unwrap(),
        );
        let cmdline = format!("/proc/{}/cmdline", child.0.id());
        let start = Instant::now();
        while !std::fs::read(&cmdline).is_ok_and(|c| c.starts_with(b"sleep\0")) {
            assert!(
                start.elapsed() < Duration::from_secs(15),
                "timed out waiting for the child's exec"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        child
    }

    /// Whether the child still runs.
    pub fn alive(&mut self) -> bool {
        self.0.try_wait().unwrap().is_none()
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
