//! `gpuscope top` in a real terminal: tmux runs it, `send-keys` types, `capture-pane` reads the
//! screen, and tmux's pane flags tell the terminal's modes. The tests sort, filter, open the
//! detail and help screens; terminate a process this test spawned through the UI (live NVML,
//! served by fake-nvml) and check that a replay never signals one; end the viewer with `q` and
//! every quitting signal, also while its sampler is stuck in a hung driver call, and a panic
//! (a test hook of debug builds); suspend it and resume it; and check each time that the
//! terminal was restored. tmux is required in CI
//! (.ci/run installs it); elsewhere the tests say why they skip.

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
            if ["Enter", "Escape", "Space", "Up", "Down", "Home", "C-z"].contains(k) {
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

    /// A pane format variable: `alternate_on`, `cursor_flag`, `mouse_any_flag`, `pane_tty`...
    fn pane(&self, name: &str) -> String {
        self.run(&["display-message", "-p", "-t", "t", &format!("#{{{name}}}")])
            .trim()
            .to_string()
    }

    /// The PID of the viewer: the child of the pane's `sh`.
    fn viewer(&self) -> i32 {
        let sh: u32 = self.pane("pane_pid").parse().unwrap();
        let children = std::fs::read_to_string(format!("/proc/{sh}/task/{sh}/children")).unwrap();
        let viewer: i32 = children.split_whitespace().next().unwrap().parse().unwrap();
        let exe = std::fs::read_link(format!("/proc/{viewer}/exe")).unwrap();
        assert!(exe.ends_with("gpuscope"), "{exe:?}");
        viewer
    }
}

/// Sends `sig` to `pid`, a viewer this test started.
fn kill(pid: i32, sig: libc::c_int) {
    // SAFETY: kill(2) with plain integers.
    assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
}

/// The state letter of `/proc/PID/stat` (`T` when stopped).
fn state(pid: i32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next())
        .unwrap_or('?')
}

/// Waits (up to 15 s) for `ok`.
fn wait_until(what: &str, ok: impl Fn() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The viewer's modes are on: alternate screen, hidden cursor, mouse capture.
fn assert_viewer_modes(t: &Tmux) {
    assert_eq!(t.pane("alternate_on"), "1");
    assert_eq!(t.pane("cursor_flag"), "0");
    assert_eq!(t.pane("mouse_any_flag"), "1");
}

/// The terminal is as a shell left it: main screen, cursor shown, no mouse capture.
fn assert_shell_modes(t: &Tmux, after: &str) {
    assert_eq!(
        t.pane("alternate_on"),
        "0",
        "alternate screen left on after {after}"
    );
    assert_eq!(
        t.pane("cursor_flag"),
        "1",
        "cursor left hidden after {after}"
    );
    assert_eq!(
        t.pane("mouse_any_flag"),
        "0",
        "mouse capture left on after {after}"
    );
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
    shell_command_env("", args)
}

/// [`shell_command`] with environment assignments (`NAME=value ...`, no quotes) before it.
fn shell_command_env(env: &str, args: &str) -> String {
    format!(
        "sh -c '{env} {} top {args}; echo exit=$?; echo modes: $(stty -a | tr \" ;\" \"\\n\\n\" | grep -E \"^-?(icanon|echo|isig)$\") :end; sleep 120'",
        env!("CARGO_BIN_EXE_gpuscope")
    )
}

/// fake-nvml's library, installed as `libnvidia-ml.so.1` once for this test binary.
// Regression: each test installed it into the same directory, and two tests doing so at once
// (the tests run in parallel) failed with "install: No such file or directory".
fn fake_nvml() -> PathBuf {
    static INSTALLED: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            let exe = std::env::current_exe().expect("test exe");
            let lib = fake_nvml::find_cdylib(&exe).unwrap_or_else(|| {
                panic!(
                    "no {} near {}: cargo builds it as a dev-dependency",
                    fake_nvml::CDYLIB_FILE_NAME,
                    exe.display()
                )
            });
            let dir =
                std::env::temp_dir().join(format!("gpuscope-top-nvml-{}", std::process::id()));
            fake_nvml::install(&lib, &dir).expect("install").nvml
        })
        .clone()
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
    assert_shell_modes(t, "the viewer ended");
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
    assert_viewer_modes(&t);

    // Sort by PID: three columns to the left of GPU-MEM, ascending (20 rows fit under the
    // history graphs, which show from the second sample on).
    t.keys(&["<", "<", "<"]);
    t.wait_for("rows in ascending PID order", |s| {
        let pids: Vec<u32> = table(s).iter().map(|(p, _)| *p).collect();
        s.contains("PID▲") && pids.len() >= 20 && pids.windows(2).all(|w| w[0] <= w[1])
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

/// old-driver.json with `pid` (a `sleep 1000`) on GPU 0 in every frame, its host facts (with
/// its true command line) recorded.
fn fixture_with(pid: u32, path: &Path) {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/old-driver.json");
    let mut f: Value = serde_json::from_str(&std::fs::read_to_string(src).unwrap()).unwrap();
    f["host"]["processes"][pid.to_string()] = json!({
        "name": "sleep",
        "cmdline": ["sleep", "1000"],
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

/// A `sleep 1000` child, killed if the test ends early.
struct Child(std::process::Child);

impl Child {
    fn spawn() -> Child {
        let child = Child(Command::new("sleep").arg("1000").spawn().unwrap());
        let pid = child.0.id();
        // Right after exec the kernel may not have set the new command line yet.
        wait_until("the child's exec", || {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c.starts_with(b"sleep"))
        });
        child
    }

    fn alive(&mut self) -> bool {
        self.0.try_wait().unwrap().is_none()
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_tagged_process_is_terminated_through_the_ui() {
    let Some(t) = Tmux::new("signal") else {
        return;
    };
    let mut child = Child::spawn();
    let pid = child.0.id();
    let path = std::env::temp_dir().join(format!("gpuscope-top-signal-{pid}.json"));
    fixture_with(pid, &path);

    // Live NVML (fake-nvml serving the fixture): the process is this machine's.
    t.start(
        &shell_command_env(
            &format!(
                "{}={} {}=0",
                fake_nvml::FIXTURE_ENV,
                path.display(),
                fake_nvml::FRAME_ENV
            ),
            &format!("--nvml-lib {}", fake_nvml().display()),
        ),
        120,
        30,
    );
    t.wait_text("gpuscope top (nvml)");
    t.wait_text(&pid.to_string());
    t.keys(&["/", &format!("pid:{pid}"), "Enter"]);
    let s = t.wait_text(&format!("filter: pid:{pid}"));
    assert_eq!(table(&s).len(), 1, "{s}");
    t.keys(&["Space"]);
    t.wait_text("1 tagged");
    t.keys(&["T"]);
    let s = t.wait_text("Send SIGTERM to 1 process?");
    assert!(s.contains(&format!("PID {pid} (sleep)")), "{s}");
    assert!(child.alive(), "nothing is sent before y");
    t.keys(&["y"]);
    t.wait_text(&format!("SIGTERM sent to PID {pid}"));

    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.0.try_wait().unwrap() {
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

// Regression: `top --fixture crafted.json` listing a local `sleep 1000` with its true command
// line, then K and y, killed the real process.
#[test]
fn a_replay_never_signals_a_local_process() {
    let Some(t) = Tmux::new("replay-signal") else {
        return;
    };
    let mut child = Child::spawn();
    let pid = child.0.id();
    let path = std::env::temp_dir().join(format!("gpuscope-top-replay-signal-{pid}.json"));
    fixture_with(pid, &path);
    t.start(
        &shell_command(&format!("--fixture {} --frame 0", path.display())),
        160,
        30,
    );
    t.wait_text(&pid.to_string());
    t.keys(&["/", &format!("pid:{pid}"), "Enter"]);
    let s = t.wait_text(&format!("filter: pid:{pid}"));
    assert_eq!(table(&s).len(), 1, "{s}");
    assert!(s.contains("(signals off: a replay)"), "{s}");
    t.keys(&["K"]);
    let s = t.wait_text("signals are off: this is a replay of a recording");
    assert!(!s.contains("Send SIGKILL"), "{s}");
    t.keys(&["y"]);
    // y is handled (the status line gives way to the hints) and nothing was sent.
    t.wait_for("the hints after y", |s| {
        s.contains("(signals off: a replay)") && !s.contains("signals are off: this")
    });
    assert!(child.alive(), "the local process survives");
    t.keys(&["q"]);
    assert_restored(&t);
    assert!(child.alive(), "the local process survives");
    let _ = std::fs::remove_file(&path);
}

// Regression: SIGQUIT left the alternate screen on, and the 1-second fallback after SIGTERM
// left only raw mode (alternate screen, mouse capture and hidden cursor stayed).
#[test]
fn every_quitting_signal_restores_the_terminal() {
    for (name, sig) in [
        ("sigint", libc::SIGINT),
        ("sigterm", libc::SIGTERM),
        ("sighup", libc::SIGHUP),
        ("sigquit", libc::SIGQUIT),
    ] {
        let Some(t) = Tmux::new(name) else {
            return;
        };
        t.start(&shell_command("--demo"), 100, 30);
        t.wait_text("of 64 shown");
        assert_viewer_modes(&t);
        kill(t.viewer(), sig);
        assert_restored(&t);
    }
}

// Regression: SIGTSTP left the alternate screen on.
#[test]
fn sigtstp_and_ctrl_z_suspend_and_sigcont_redraws() {
    let Some(t) = Tmux::new("suspend") else {
        return;
    };
    t.start(&shell_command("--demo"), 100, 30);
    t.wait_text("of 64 shown");
    let viewer = t.viewer();
    let tty = t.pane("pane_tty");
    for how in ["SIGTSTP", "Ctrl+Z"] {
        assert_viewer_modes(&t);
        match how {
            "SIGTSTP" => kill(viewer, libc::SIGTSTP),
            _ => t.keys(&["C-z"]),
        }
        wait_until("the viewer to stop", || state(viewer) == 'T');
        assert_shell_modes(&t, how);
        // Raw mode is off while it is stopped: the shell's line editing is back.
        let modes = Command::new("stty")
            .args(["-F", &tty, "-a"])
            .output()
            .unwrap();
        let modes = String::from_utf8_lossy(&modes.stdout).replace(';', " ");
        for mode in ["icanon", "echo", "isig"] {
            assert!(
                modes.split_whitespace().any(|w| w == mode),
                "{mode} off while suspended by {how}: {modes}"
            );
        }
        // `fg` sends SIGCONT: the viewer takes the terminal again and redraws all of it.
        kill(viewer, libc::SIGCONT);
        wait_until("the viewer's modes", || t.pane("alternate_on") == "1");
        t.wait_text("of 64 shown");
    }
    t.keys(&["q"]);
    assert_restored(&t);
}

/// The viewer on live NVML (fake-nvml serving the 8-GPU recording at frame 14, the frame of GPU
/// 2's XID 79): the backend's listener receives the XID through `nvmlEventSetWait_v2`, and GPU
/// 2's row is marked `!` with the reason and the XID's meaning; GPU 0's is not.
#[test]
fn an_xid_marks_its_gpu_with_the_detail() {
    let lib = fake_nvml();
    let fixture =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/h100-sxm-8gpu.json");
    let Some(t) = Tmux::new("xid") else {
        return;
    };
    t.start(
        &shell_command_env(
            &format!(
                "{}={} {}=14",
                fake_nvml::FIXTURE_ENV,
                fixture.display(),
                fake_nvml::FRAME_ENV
            ),
            &format!("--nvml-lib {} --interval 0.2s", lib.display()),
        ),
        220,
        50,
    );
    let screen = t.wait_text("GPU has fallen off the bus");
    let row = |gpu: &str| {
        screen
            .lines()
            .map(|l| l.trim_start_matches('│').trim_start())
            .find(|l| l.starts_with(gpu) && l.contains("NVIDIA H100"))
            .unwrap_or_else(|| panic!("no row for GPU {gpu}:\n{screen}"))
            .to_string()
    };
    let gpu2 = row("2!");
    assert!(gpu2.contains("! xid_79"), "{screen}");
    assert!(gpu2.contains("XID 79 at "), "{screen}");
    assert!(!row("0 ").contains('!'), "{screen}");
    t.keys(&["q"]);
    assert_restored(&t);
}

// Regression: `q` waited for a sampling call in progress, so a hung driver hung quitting; and
// SIGTERM then fell back to leaving raw mode only.
#[test]
fn quitting_never_waits_on_a_stuck_sampler() {
    let lib = fake_nvml();
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/old-driver.json");
    for how in ["q", "SIGTERM"] {
        let Some(t) = Tmux::new(&format!("stuck-{}", how.to_lowercase())) else {
            return;
        };
        let hang =
            std::env::temp_dir().join(format!("gpuscope-top-hang-{}-{how}", std::process::id()));
        let waiting = PathBuf::from(format!("{}.waiting", hang.display()));
        let _ = std::fs::remove_file(&hang);
        let _ = std::fs::remove_file(&waiting);
        t.start(
            &shell_command_env(
                &format!(
                    "{}={} {}={}",
                    fake_nvml::FIXTURE_ENV,
                    fixture.display(),
                    fake_nvml::HANG_ENV,
                    hang.display()
                ),
                &format!("--nvml-lib {} --interval 0.1s", lib.display()),
            ),
            120,
            30,
        );
        t.wait_text("gpuscope top (nvml)");
        t.wait_text("GPU-MEM");
        // From now on every NVML call hangs: the sampler gets stuck inside one.
        std::fs::write(&hang, b"").unwrap();
        wait_until("a stuck NVML call", || waiting.exists());
        match how {
            "q" => t.keys(&["q"]),
            _ => kill(t.viewer(), libc::SIGTERM),
        }
        assert_restored(&t);
        let _ = std::fs::remove_file(&hang);
        let _ = std::fs::remove_file(&waiting);
    }
}

#[test]
fn a_panic_restores_the_terminal_before_its_message() {
    if !cfg!(debug_assertions) {
        eprintln!("skipping: the panic test hook is in debug builds only");
        return;
    }
    let Some(t) = Tmux::new("panic") else {
        return;
    };
    t.start(
        &shell_command_env("GPUSCOPE_TOP_TEST_PANIC=1", "--demo"),
        100,
        30,
    );
    let s = t.wait_text(":end");
    assert!(s.contains("exit=101"), "{s}");
    // The message is on the shell's screen, not lost with the alternate one.
    assert!(s.contains("GPUSCOPE_TOP_TEST_PANIC is set"), "{s}");
    for mode in ["icanon", "echo", "isig"] {
        assert!(
            s.split_whitespace().any(|w| w == mode),
            "terminal mode {mode} not restored:\n{s}"
        );
    }
    assert_shell_modes(&t, "a panic");
}
