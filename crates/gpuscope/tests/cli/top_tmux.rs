//! `gpuscope top` in a real terminal: tmux runs it, `send-keys` types, `capture-pane` reads the
//! screen, and tmux's pane flags tell the terminal's modes. The tests sort, filter, open the
//! detail and help screens; terminate a process this test spawned through the UI (live NVML,
//! served by fake-nvml) and check that a replay never signals one; end the viewer with `q` and
//! every quitting signal, also while its sampler is stuck in a hung driver call, and a panic
//! (a test hook of debug builds); suspend it and resume it (the fleet viewer too); and check
//! each time that the terminal was restored. tmux is required in CI
//! (.ci/run installs it); elsewhere the tests say why they skip.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// A private tmux server, killed on drop.
struct Tmux {
    socket: String,
}

/// A [`Tmux`] server for this test named `$name`, or a return from the test (skipped, after
/// saying why) when tmux is missing outside CI.
macro_rules! tmux_or_skip {
    ($name:expr) => {
        match Tmux::new($name) {
            Some(t) => t,
            None => return,
        }
    };
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
        // The server that the first call starts passes its environment on to the viewer.
        let out = cli::without_settings(&mut Command::new("tmux"))
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .expect("tmux runs");
        cli::assert_ok(&out, ("tmux", args));
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

/// The shell command of `top` over live NVML: fake-nvml serving frame `frame` of `fixture`,
/// then `args`.
fn over_fake_nvml(fixture: &Path, frame: usize, args: &str) -> String {
    shell_command_env(
        &format!(
            "{}={} {}={frame}",
            fake_nvml::FIXTURE_ENV,
            fixture.display(),
            fake_nvml::FRAME_ENV
        ),
        &format!("--nvml-lib {} {args}", fake_nvml().display()),
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
            fake_nvml::install_per_process(&lib, &std::env::temp_dir(), "gpuscope-top-nvml")
                .expect("install")
                .nvml
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

/// Quits the viewer with `q` and checks that the terminal was restored.
fn quit(t: &Tmux) {
    t.keys(&["q"]);
    assert_restored(t);
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
    let t = tmux_or_skip!("screens");
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

    quit(&t);
}

/// old-driver.json with `pid` (a `sleep 1000`) on GPU 0 in every frame, its host facts (with
/// its true command line) recorded.
fn fixture_with(pid: u32, path: &Path) {
    let mut f: Value = serde_json::from_str(
        &std::fs::read_to_string(edited_fixture::scenario("old-driver")).unwrap(),
    )
    .unwrap();
    f["host"]["processes"][pid.to_string()] = json!({
        "name": "sleep",
        "cmdline": ["sleep", "1000"],
        "user": "tester",
        "ppid": std::process::id(),
        "start_time_s": 1793527000u64,
    });
    edited_fixture::add_compute_process(&mut f, pid, 100 << 20);
    for frame in f["frames"].as_array_mut().unwrap() {
        frame["host"]["processes"][pid.to_string()] =
            json!({"cpu_percent": 0.0, "rss": 1048576u64, "status": "sleeping"});
    }
    edited_fixture::write(&f, path);
}

/// A `sleep 1000` of this test's own, and a copy of old-driver.json at `path` that lists it on
/// GPU 0 ([`fixture_with`]), removed when dropped.
struct Listed {
    child: Child,
    pid: u32,
    path: PathBuf,
}

impl Listed {
    fn new(tag: &str) -> Listed {
        let child = Child::spawn();
        let pid = child.0.id();
        let path = std::env::temp_dir().join(format!("gpuscope-top-{tag}-{pid}.json"));
        fixture_with(pid, &path);
        Listed { child, pid, path }
    }
}

impl Drop for Listed {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[test]
fn a_tagged_process_is_terminated_through_the_ui() {
    let t = tmux_or_skip!("signal");
    let mut local = Listed::new("signal");
    let (pid, path) = (local.pid, &local.path);

    // Live NVML (fake-nvml serving the fixture): the process is this machine's.
    t.start(&over_fake_nvml(path, 0, ""), 120, 30);
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
    assert!(local.child.alive(), "nothing is sent before y");
    t.keys(&["y"]);
    t.wait_text(&format!("SIGTERM sent to PID {pid}"));

    let start = Instant::now();
    let status = loop {
        if let Some(status) = local.child.0.try_wait().unwrap() {
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

    quit(&t);
}

// Regression: `top --fixture crafted.json` listing a local `sleep 1000` with its true command
// line, then K and y, killed the real process.
#[test]
fn a_replay_never_signals_a_local_process() {
    let t = tmux_or_skip!("replay-signal");
    let mut local = Listed::new("replay-signal");
    let (pid, path) = (local.pid, &local.path);
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
    assert!(local.child.alive(), "the local process survives");
    quit(&t);
    assert!(local.child.alive(), "the local process survives");
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
        let t = tmux_or_skip!(name);
        t.start(&shell_command("--demo"), 100, 30);
        t.wait_text("of 64 shown");
        assert_viewer_modes(&t);
        kill(t.viewer(), sig);
        assert_restored(&t);
    }
}

/// Suspends the viewer in `t` by SIGTSTP and then by Ctrl+Z, checking each time that it stops
/// with the shell's modes back, and resumes it by SIGCONT until `shown` is drawn again.
fn assert_suspends_and_resumes(t: &Tmux, shown: &str) {
    let viewer = t.viewer();
    let tty = t.pane("pane_tty");
    for how in ["SIGTSTP", "Ctrl+Z"] {
        assert_viewer_modes(t);
        match how {
            "SIGTSTP" => kill(viewer, libc::SIGTSTP),
            _ => t.keys(&["C-z"]),
        }
        wait_until("the viewer to stop", || state(viewer) == 'T');
        assert_shell_modes(t, how);
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
        t.wait_text(shown);
    }
}

// Regression: SIGTSTP left the alternate screen on.
#[test]
fn sigtstp_and_ctrl_z_suspend_and_sigcont_redraws() {
    let t = tmux_or_skip!("suspend");
    t.start(&shell_command("--demo"), 100, 30);
    t.wait_text("of 64 shown");
    assert_suspends_and_resumes(&t, "of 64 shown");
    quit(&t);
}

/// The viewer on live NVML (fake-nvml serving the 8-GPU recording at frame 14, the frame of GPU
/// 2's XID 79): the backend's listener receives the XID through `nvmlEventSetWait_v2`, and GPU
/// 2's row is marked `!` with the reason and the XID's meaning; GPU 0's is not.
#[test]
fn an_xid_marks_its_gpu_with_the_detail() {
    let fixture =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/h100-sxm-8gpu.json");
    let t = tmux_or_skip!("xid");
    t.start(&over_fake_nvml(&fixture, 14, "--interval 0.2s"), 220, 50);
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
    quit(&t);
}

/// How many times all of `pid`'s threads have gone to sleep and woken since they started.
fn wake_ups(pid: i32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .map(|t| {
            let status = std::fs::read_to_string(t.unwrap().path().join("status")).unwrap();
            status
                .lines()
                .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
                .and_then(|n| n.trim().parse::<u64>().ok())
                .unwrap_or(0)
        })
        .sum()
}

// Regression (after issue 13's merge): an idle viewer woke 30 times a second: its event loop
// every 100 ms to look for samples, the NVML event listener every 50 ms, and fake-nvml's event
// wait every 10 ms; that was most of its CPU at a 1 s refresh. The loop now sleeps until a key,
// a sample or a signal wakes it, the listener waits 250 ms per call, and fake-nvml's wait sleeps
// until its frame can change. Counted, not timed: the threads' voluntary context switches.
#[test]
fn an_idle_viewer_sleeps_until_something_happens() {
    let fixture =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/h100-sxm-8gpu.json");
    let t = tmux_or_skip!("idle");
    t.start(
        // No refresh during the count: what is left is the loop's and the listener's own.
        &over_fake_nvml(&fixture, 3, "--interval 1h"),
        160,
        50,
    );
    t.wait_text("NVIDIA H100");
    let viewer = t.viewer();
    let before = wake_ups(viewer);
    let window = Duration::from_secs(4);
    std::thread::sleep(window);
    let woke = wake_ups(viewer) - before;
    // Per second: the loop's fallback timeout (1) and the listener's waits (4); twice that as
    // slack for stray wake-ups (the pipe, tmux's own traffic). It was about 30.
    let per_second = woke as f64 / window.as_secs_f64();
    eprintln!("the idle viewer woke {woke} times in {window:?}");
    assert!(
        per_second <= 10.0,
        "the idle viewer woke {woke} times in {window:?} ({per_second:.1} a second)"
    );
    quit(&t);
}

// Regression: `q` waited for a sampling call in progress, so a hung driver hung quitting; and
// SIGTERM then fell back to leaving raw mode only.
#[test]
fn quitting_never_waits_on_a_stuck_sampler() {
    let lib = fake_nvml();
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/old-driver.json");
    for how in ["q", "SIGTERM"] {
        let t = tmux_or_skip!(&format!("stuck-{}", how.to_lowercase()));
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
    let t = tmux_or_skip!("panic");
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

use crate::support::{cli, edited_fixture, fleet_support, sleeping_child};
use sleeping_child::Child;

/// A stub Prometheus with three hosts: gpu-a (two GPUs, a process on GPU 1), gpu-b (one GPU)
/// up, and gpu-c, whose exporter is down. `slow`: every device family waits this long.
fn fleet_stub(slow: Option<Duration>) -> fleet_support::Stub {
    use fleet_support::{vector, Reply};
    let t = 1000.0;
    let dev = |h: &str, i: &str| {
        json!({"instance": format!("{h}:9445"), "job": "gpu", "hostname": h, "index": i,
               "uuid": format!("GPU-{h}-{i}"), "name": "NVIDIA H100 80GB HBM3"})
    };
    let mut r = std::collections::HashMap::new();
    fleet_support::hosts(
        &mut r,
        t,
        &[
            ("gpu-a", "gpu-a:9445", "999.5", "1"),
            ("gpu-b", "gpu-b:9445", "999.5", "1"),
            ("gpu-c", "gpu-c:9445", "900", "0"),
        ],
        &[],
    );
    let gib = 1u64 << 30;
    // gpu-a:0 has 10 GiB free, gpu-a:1 70 GiB, gpu-b:0 40 GiB.
    let free = [("gpu-a", "0", 10), ("gpu-a", "1", 70), ("gpu-b", "0", 40)];
    r.insert(
        "gpuscope_device_memory_free_bytes".into(),
        Reply::Body(vector(
            t,
            &free
                .iter()
                .map(|(h, i, f)| (dev(h, i), (f * gib).to_string()))
                .collect::<Vec<_>>(),
        )),
    );
    r.insert(
        "gpuscope_device_memory_total_bytes".into(),
        Reply::Body(vector(
            t,
            &free
                .iter()
                .map(|(h, i, _)| (dev(h, i), (80 * gib).to_string()))
                .collect::<Vec<_>>(),
        )),
    );
    let mut p = dev("gpu-a", "1");
    p["pid"] = json!("4242");
    p["username"] = json!("alice");
    p["command"] = json!("python train.py \u{1b}[2J");
    r.insert(
        "gpuscope_process_gpu_memory_bytes".into(),
        Reply::Body(vector(t, &[(p, (5 * gib).to_string())])),
    );
    if let Some(d) = slow {
        r.insert("gpuscope_device_up".into(), Reply::Slow(d));
    }
    fleet_support::start(r, None)
}

/// The host of each line that starts with one, in order.
fn fleet_hosts(screen: &str) -> Vec<String> {
    screen
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| w.starts_with("gpu-"))
        .map(str::to_string)
        .collect()
}

#[test]
fn top_prometheus_shows_every_host_sorts_filters_and_quits() {
    let t = tmux_or_skip!("fleet");
    let stub = fleet_stub(None);
    t.start(
        &shell_command(&format!(
            "--prometheus {} --interval 0.5s --prometheus-timeout 5s",
            stub.url
        )),
        170,
        30,
    );
    let s = t.wait_text("3 hosts  3 devices  2 up  1 down");
    assert_viewer_modes(&t);
    assert_eq!(fleet_hosts(&s), ["gpu-a", "gpu-b", "gpu-c"], "{s}");
    let down = s.lines().find(|l| l.starts_with("gpu-c")).unwrap();
    assert!(
        down.contains("DOWN") && down.contains("no current samples"),
        "{s}"
    );
    // The process beneath gpu-a's GPU 1, its command's escape sequence shown escaped.
    assert!(s.contains("└─ PID 4242") && s.contains("alice"), "{s}");
    assert!(s.contains("python train.py \\x1b[2J"), "{s}");
    // It refreshes on its own thread, every interval: three refreshes of the same 15 queries.
    wait_until("three refreshes", || {
        stub.asked
            .lock()
            .unwrap()
            .iter()
            .filter(|q| *q == "up")
            .count()
            >= 3
    });
    let asked = stub.asked.lock().unwrap().clone();
    let distinct: std::collections::HashSet<&String> = asked.iter().collect();
    assert_eq!(distinct.len(), 15, "{distinct:?}");

    // Most free memory first: gpu-a (70 GiB on GPU 1) before gpu-b (40 GiB).
    t.keys(&["s", "s"]);
    let s = t.wait_text("sort: free-memory");
    assert_eq!(fleet_hosts(&s), ["gpu-a", "gpu-b", "gpu-c"], "{s}");
    // One list across hosts: gpu-a:1, gpu-b:0, gpu-a:0.
    t.keys(&["g", "p"]);
    let s = t.wait_text("(across hosts)");
    let order: Vec<String> = s
        .lines()
        .skip(2)
        .filter(|l| l.starts_with("gpu-") && !l.contains("DOWN"))
        .map(|l| l.split_whitespace().take(2).collect::<Vec<_>>().join(":"))
        .collect();
    assert_eq!(order, ["gpu-a:1", "gpu-b:0", "gpu-a:0"], "{s}");
    t.keys(&["g", "p"]);

    // A host filter keeps that host; a down host is found by its state.
    t.keys(&["/", "host:gpu-b", "Enter"]);
    let s = t.wait_for("only gpu-b", |s| {
        s.contains("filter: host:gpu-b") && fleet_hosts(s) == ["gpu-b"]
    });
    assert!(s.contains("1 host  1 device"), "{s}");
    t.keys(&["/"]);
    for _ in 0.."host:gpu-b".len() {
        t.run(&["send-keys", "-t", "t", "BSpace"]);
    }
    t.keys(&["state:down", "Enter"]);
    t.wait_for("only gpu-c", |s| fleet_hosts(s) == ["gpu-c"]);
    quit(&t);
}

#[test]
fn a_slow_prometheus_never_freezes_the_fleet_viewer() {
    let t = tmux_or_skip!("fleet-slow");
    // One family takes 20 s to answer: the first refresh is far away.
    let stub = fleet_stub(Some(Duration::from_secs(20)));
    t.start(
        &shell_command(&format!(
            "--prometheus {} --prometheus-timeout 30s",
            stub.url
        )),
        170,
        30,
    );
    t.wait_text("reading the fleet...");
    wait_until("the slow query", || {
        stub.asked
            .lock()
            .unwrap()
            .iter()
            .any(|q| q == "gpuscope_device_up")
    });
    // Keys are still handled while the refresh waits.
    t.keys(&["s"]);
    t.wait_text("sort: gpu");
    let started = Instant::now();
    quit(&t);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "quitting waited {:?} on the refresh",
        started.elapsed()
    );
}

/// The fleet viewer runs in the same event loop as this machine's: it suspends and resumes,
/// and a quitting signal (the terminal hanging up) leaves the terminal as it was.
#[test]
fn the_fleet_viewer_suspends_resumes_and_quits_on_a_signal() {
    let t = tmux_or_skip!("fleet-signals");
    let stub = fleet_stub(None);
    t.start(
        &shell_command(&format!("--prometheus {} --interval 0.5s", stub.url)),
        170,
        30,
    );
    let shown = "3 hosts  3 devices  2 up  1 down";
    t.wait_text(shown);
    assert_suspends_and_resumes(&t, shown);
    kill(t.viewer(), libc::SIGHUP);
    assert_restored(&t);
}

#[test]
fn nvitop_style_options_and_local_time_in_a_real_terminal() {
    let t = tmux_or_skip!("nvitop-options");
    t.start(
        &shell_command_env("TZ=IST-5:30", "--demo --frame 5 --only 0 3 -U"),
        160,
        50,
    );
    let s = t.wait_for("the demo's devices", |s| s.contains("NVIDIA H100"));
    // Local time, in the zone TZ names.
    let header = s.lines().next().unwrap_or("");
    assert!(
        header.trim_end().ends_with(" IST") || header.contains(" IST "),
        "{header}"
    );
    // Only GPUs 0 and 3, and no character outside ASCII.
    let devices: Vec<&str> = s
        .lines()
        .filter(|l| l.contains("NVIDIA H100"))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(devices, ["0", "3"], "{s}");
    assert!(s.is_ascii(), "{s}");
    quit(&t);
}

#[test]
fn nvitop_startup_filters_in_a_real_terminal() {
    let t = tmux_or_skip!("nvitop-filters");
    t.start(&shell_command("--demo --frame 5 --user eve -c"), 160, 50);
    let s = t.wait_for("only eve's processes", |s| {
        let rows = table(s);
        !rows.is_empty() && rows.iter().all(|(_, u)| u == "eve")
    });
    assert!(s.contains("filter: user:eve type:compute"), "{s}");
    // Esc clears it like a typed filter: every user again.
    t.keys(&["Escape"]);
    t.wait_for("other users", |s| table(s).iter().any(|(_, u)| u != "eve"));
    quit(&t);
}

#[test]
fn the_tree_view_draws_nvitop_branches_in_a_real_terminal() {
    let t = tmux_or_skip!("tree");
    let f = format!(
        "{}/../../fixtures/geforce-desktop.json",
        env!("CARGO_MANIFEST_DIR")
    );
    t.start(&shell_command(&format!("--fixture {f} --frame 5")), 160, 40);
    t.wait_text("nbminer");
    t.keys(&["t"]);
    // nbminer runs on both GPUs under one parent: the first row's branch goes on, the last
    // one ends it.
    let s = t.wait_text("(tree,");
    let rows: Vec<&str> = s.lines().filter(|l| l.contains("nbminer")).collect();
    assert_eq!(rows.len(), 2, "{s}");
    assert!(rows[0].contains("├─ /opt/nbminer"), "{s}");
    assert!(rows[1].contains("└─ /opt/nbminer"), "{s}");
    quit(&t);
}

#[test]
fn the_tree_shows_a_live_parents_command_and_user() {
    let t = tmux_or_skip!("tree-parent");
    let local = Listed::new("parent");
    let (pid, path) = (local.pid, &local.path);
    // Live NVML (fake-nvml): the child's parent is this test, which is on no GPU.
    t.start(&over_fake_nvml(path, 0, &format!("--pid {pid}")), 200, 30);
    t.wait_text(&pid.to_string());
    t.keys(&["t"]);
    let me = std::process::id().to_string();
    let s = t.wait_text("(not on a GPU)");
    let parent = s
        .lines()
        .find(|l| l.split_whitespace().any(|w| w == me) && l.contains("(not on a GPU)"))
        .unwrap_or_else(|| panic!("no row for the parent {me}:\n{s}"));
    // The words after the PID: the user, then the other columns.
    let after_pid: Vec<&str> = parent
        .split_whitespace()
        .skip_while(|w| *w != me)
        .skip(1)
        .collect();
    let exe = std::env::current_exe().unwrap();
    let name = exe.file_name().unwrap().to_str().unwrap();
    assert!(
        parent.contains(&name[..name.len().min(20)]),
        "the parent's command: {parent}"
    );
    // Its user, as the host's user database names the owner of this process.
    let uid = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().next().map(str::to_string))
        .unwrap();
    let user = std::fs::read_to_string("/etc/passwd")
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.len() > 2 && f[2] == uid).then(|| f[0].to_string())
        })
        .unwrap_or(uid);
    assert_eq!(after_pid.first(), Some(&user.as_str()), "{parent}");
    // The child's row below it.
    let child_row = s.lines().find(|l| l.contains(&format!(" {pid} "))).unwrap();
    assert!(child_row.contains("└─ sleep 1000"), "{child_row}");
    quit(&t);
}

/// `top -vv` on a terminal would write its log over the viewer: refused with the way out; with
/// stderr sent to a file the viewer runs and the file gets the log.
#[test]
fn the_log_never_writes_over_the_viewer() {
    let t = tmux_or_skip!("log");
    t.start(&shell_command("--demo -vv"), 200, 30);
    let s = t.wait_text("exit=2");
    assert!(s.contains("would write over the viewer"), "{s}");
    assert!(s.contains("2> gpuscope.log"), "{s}");

    let log = tempfile::NamedTempFile::new().unwrap();
    let u = Tmux::new("log-file").unwrap();
    u.start(
        &shell_command(&format!(
            "--demo -vv --interval 0.25s 2> {}",
            log.path().display()
        )),
        120,
        30,
    );
    u.wait_text("gpuscope top (demo)");
    wait_until("a refresh in the log file", || {
        std::fs::read_to_string(log.path())
            .is_ok_and(|l| l.contains("DEBUG") && l.contains("refresh"))
    });
    u.keys(&["q"]);
    assert_restored(&u);
}
