//! `gpuscope top` in a real terminal: tmux runs it, `send-keys` types, `capture-pane` reads the
//! screen. One test sorts, filters, opens the detail and help screens, quits and checks that the
//! terminal was restored; the other tags a process this test spawned and terminates it through
//! the UI. tmux is required in CI (.ci/run installs it); elsewhere the tests say why they skip.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// A private tmux server, killed on drop.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// A server for this test, or `None` (after saying why) when tmux is missing outside CI.
    fn new(name: &str) -> Option<Tmux> {
        let found = Command::new("tmux")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            if std::env::var_os("CI").is_some() {
                panic!("tmux is required for this test in CI (.ci/run installs it)");
            }
            eprintln!("skipping {name}: tmux is not installed (CI installs it and runs this)");
            return None;
        }
        Some(Tmux {
            socket: format!("gpuscope-{name}-{}", std::process::id()),
        })
    }

    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .expect("tmux runs");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Starts `command` (a shell command line) in a `width` x `height` window.
    fn start(&self, command: &str, width: u16, height: u16) {
        self.run(&[
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            &width.to_string(),
            "-y",
            &height.to_string(),
            command,
        ]);
    }

    /// Types keys: tmux key names (`Enter`, `Escape`, `Space`) or literal text.
    fn keys(&self, keys: &[&str]) {
        for k in keys {
            if ["Enter", "Escape", "Space", "Up", "Down", "Home"].contains(k) {
                self.run(&["send-keys", "-t", "t", k]);
            } else {
                self.run(&["send-keys", "-t", "t", "-l", k]);
            }
        }
    }

    fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "t"])
    }

    /// Waits (up to 15 s) until the screen satisfies `ok`, and returns it.
    fn wait_for(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if ok(&s) {
                return s;
            }
            if start.elapsed() > Duration::from_secs(15) {
                panic!("timed out waiting for {what}; the screen:\n{s}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn wait_text(&self, text: &str) -> String {
        self.wait_for(text, |s| s.contains(text))
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let tmux = |args: &[&str]| {
            Command::new("tmux")
                .args(["-L", &self.socket])
                .args(args)
                .output()
        };
        let socket = tmux(&["display-message", "-p", "#{socket_path}"])
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        let _ = tmux(&["kill-server"]);
        if !socket.is_empty() {
            let _ = std::fs::remove_file(socket);
        }
    }
}

/// The shell command that runs gpuscope with `args`, then reports its exit code and the
/// terminal modes it left behind, and stays open for `capture-pane`.
fn shell_command(args: &str) -> String {
    format!(
        "sh -c '{} top {args}; echo exit=$?; echo modes: $(stty -a | tr \" ;\" \"\\n\\n\" | grep -E \"^-?(icanon|echo|isig)$\") :end; sleep 120'",
        env!("CARGO_BIN_EXE_gpuscope")
    )
}

/// The table rows of a screen: (PID, user). A row is two mark characters, then the device, the
/// PID and the user.
fn table(screen: &str) -> Vec<(u32, String)> {
    let lines: Vec<&str> = screen.lines().collect();
    let Some(h) = lines
        .iter()
        .position(|l| l.contains("PID") && l.contains("COMMAND"))
    else {
        return Vec::new();
    };
    lines[h + 1..]
        .iter()
        .filter_map(|l| {
            let rest: String = l.chars().skip(2).collect();
            let mut words = rest.split_whitespace();
            let _device = words.next()?;
            let pid = words.next()?.parse().ok()?;
            Some((pid, words.next()?.to_string()))
        })
        .collect()
}

fn assert_restored(t: &Tmux) {
    let s = t.wait_text(":end");
    assert!(s.contains("exit=0"), "{s}");
    // Raw mode is off again: line editing, echo and Ctrl+C signals are back.
    for mode in ["icanon", "echo", "isig"] {
        assert!(
            s.split_whitespace().any(|w| w == mode),
            "terminal mode {mode} not restored:\n{s}"
        );
    }
    // The alternate screen is left.
    assert_eq!(
        t.run(&["display-message", "-p", "-t", "t", "#{alternate_on}"])
            .trim(),
        "0"
    );
}

#[test]
fn sort_filter_detail_help_and_quit_in_a_real_terminal() {
    let Some(t) = Tmux::new("screens") else {
        return;
    };
    t.start(&shell_command("--demo --interval 0.25s"), 160, 50);
    let s = t.wait_text("of 64 shown");
    assert!(s.contains("gpuscope top (demo)"), "{s}");
    assert!(s.contains("GPU-MEM▼"), "{s}");
    assert_eq!(
        t.run(&["display-message", "-p", "-t", "t", "#{alternate_on}"])
            .trim(),
        "1"
    );

    // Sort by PID: three columns to the left of GPU-MEM, ascending.
    t.keys(&["<", "<", "<"]);
    t.wait_for("rows in ascending PID order", |s| {
        let pids: Vec<u32> = table(s).iter().map(|(p, _)| *p).collect();
        s.contains("PID▲") && pids.len() > 20 && pids.windows(2).all(|w| w[0] <= w[1])
    });

    // Filter by user.
    t.keys(&["/", "user:eve", "Enter"]);
    let s = t.wait_for("only eve's processes", |s| {
        let rows = table(s);
        s.contains("filter: user:eve") && !rows.is_empty() && rows.iter().all(|(_, u)| u == "eve")
    });
    let rows = table(&s);

    // The detail screen of the first of them.
    let first = rows[0].0;
    t.keys(&["Enter"]);
    t.wait_for("the detail screen", |s| {
        s.contains(&format!("Process {first}"))
            && s.contains("── environment")
            && s.contains("N/A (not recorded")
            && s.contains("GPU memory")
    });
    t.keys(&["Escape"]);
    t.wait_text("filter: user:eve");

    // Help, closed by any key.
    t.keys(&["?"]);
    t.wait_text("keys (any key closes this)");
    t.keys(&["x"]);
    t.wait_text("filter: user:eve");

    t.keys(&["q"]);
    assert_restored(&t);
}

/// old-driver.json with `pid` (a `sleep 300`) on GPU 0 in every frame, its host facts recorded.
fn fixture_with(pid: u32, path: &Path) {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/old-driver.json");
    let mut f: Value = serde_json::from_str(&std::fs::read_to_string(src).unwrap()).unwrap();
    f["host"]["processes"][pid.to_string()] = json!({
        "name": "sleep",
        "cmdline": ["sleep", "300"],
        "user": "tester",
        "ppid": std::process::id(),
        "start_time_s": 1793527000u64,
    });
    for frame in f["frames"].as_array_mut().unwrap() {
        frame["devices"]["0"]["compute_processes"]["ok"]
            .as_array_mut()
            .expect("old-driver's process lists are values")
            .push(json!({
                "pid": pid,
                "used_gpu_memory": 104857600u64,
                "gpu_instance_id": null,
                "compute_instance_id": null,
            }));
        frame["host"]["processes"][pid.to_string()] =
            json!({"cpu_percent": 0.0, "rss": 1048576u64, "status": "sleeping"});
    }
    std::fs::write(path, serde_json::to_string(&f).unwrap()).unwrap();
}

#[test]
fn a_tagged_process_is_terminated_through_the_ui() {
    let Some(t) = Tmux::new("signal") else {
        return;
    };
    /// The child, killed if the test ends early.
    struct Child(std::process::Child);
    impl Drop for Child {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut guard = Child(Command::new("sleep").arg("300").spawn().unwrap());
    let child = &mut guard.0;
    let pid = child.id();
    let path = std::env::temp_dir().join(format!("gpuscope-top-signal-{pid}.json"));
    fixture_with(pid, &path);

    t.start(
        &shell_command(&format!("--fixture {} --frame 0", path.display())),
        120,
        30,
    );
    t.wait_text(&pid.to_string());
    t.keys(&["/", &format!("pid:{pid}"), "Enter"]);
    let s = t.wait_text(&format!("filter: pid:{pid}"));
    assert_eq!(table(&s).len(), 1, "{s}");
    t.keys(&["Space"]);
    t.wait_text("1 tagged");
    t.keys(&["T"]);
    let s = t.wait_text("Send SIGTERM to 1 process?");
    assert!(s.contains(&format!("PID {pid} (sleep)")), "{s}");
    assert!(
        child.try_wait().unwrap().is_none(),
        "nothing is sent before y"
    );
    t.keys(&["y"]);
    t.wait_text(&format!("SIGTERM sent to PID {pid}"));

    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the child did not end"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    use std::os::unix::process::ExitStatusExt as _;
    assert_eq!(status.signal(), Some(libc::SIGTERM));

    t.keys(&["q"]);
    assert_restored(&t);
    let _ = std::fs::remove_file(&path);
}

#[test]
fn sigterm_to_the_viewer_restores_the_terminal() {
    let Some(t) = Tmux::new("sigterm") else {
        return;
    };
    t.start(&shell_command("--demo"), 100, 30);
    t.wait_text("of 64 shown");
    // The pane runs `sh`, whose child is gpuscope.
    let sh: u32 = t
        .run(&["display-message", "-p", "-t", "t", "#{pane_pid}"])
        .trim()
        .parse()
        .unwrap();
    let children = std::fs::read_to_string(format!("/proc/{sh}/task/{sh}/children")).unwrap();
    let viewer: i32 = children.split_whitespace().next().unwrap().parse().unwrap();
    let exe = std::fs::read_link(format!("/proc/{viewer}/exe")).unwrap();
    assert!(exe.ends_with("gpuscope"), "{exe:?}");
    // SAFETY: kill(2) with plain integers; the PID is the viewer this test started.
    assert_eq!(unsafe { libc::kill(viewer, libc::SIGTERM) }, 0);
    assert_restored(&t);
}
