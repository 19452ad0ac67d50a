//! A `sleep 1000` child of the test's own, for tests that signal a process through gpuscope:
//! killed when dropped, so a test that ends early leaves nothing behind. Shared by the unit
//! tests of `top` (src/top/tests.rs) and the terminal tests (tests/cli/top_tmux.rs).

#![allow(dead_code)]

/// A `sleep 1000` child, killed if the test ends early.
pub struct Child(pub std::process::Child);

impl Child {
    /// Starts `sleep 1000` and waits (15 s at most) until the kernel shows its command line:
    /// right after exec it may not have set the new one yet.
    pub fn spawn() -> Child {
        Child(test_support::process::spawn_exec(
            std::process::Command::new("sleep").arg("1000"),
            b"sleep\0",
        ))
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
