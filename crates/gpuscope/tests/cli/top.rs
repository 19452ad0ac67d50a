//! `gpuscope top` through the binary, without a terminal: `--once`, options and bad input.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

use crate::support::{cli, edited_fixture};
use cli::fixture;
use edited_fixture::{fail_process_lists, EditedFixture};

fn gpuscope(args: &[&str]) -> Output {
    once_with_env(args, &[])
}

fn stdout_of(args: &[&str]) -> String {
    cli::ok_stdout(gpuscope(args), args)
}

/// The lines of a `--once` screen below the process table's header (the line with PID and
/// COMMAND).
fn table_lines(screen: &str) -> impl Iterator<Item = &str> {
    let mut lines = screen.lines();
    lines
        .by_ref()
        .find(|l| l.contains("PID") && l.contains("COMMAND"));
    lines
}

/// (device, PID) of every process row of a `--once` screen: rows start with two mark
/// characters, then the device and the PID.
fn process_rows(screen: &str) -> Vec<(String, u32)> {
    let mut rows = Vec::new();
    for line in table_lines(screen) {
        if line.len() < 3 {
            continue;
        }
        let mut words = line[2..].split_whitespace();
        if let (Some(dev), Some(pid)) = (words.next(), words.next()) {
            if let Ok(pid) = pid.parse() {
                rows.push((dev.to_string(), pid));
            }
        }
    }
    rows
}

/// (device, PID) of every process of `gpuscope snapshot --json` over the same source.
fn snapshot_processes(args: &[&str]) -> Vec<(String, u32)> {
    let mut all = vec!["snapshot", "--json"];
    all.extend_from_slice(args);
    let v: Value = serde_json::from_str(&stdout_of(&all)).expect("JSON");
    let mut out = Vec::new();
    for d in v["devices"].as_array().expect("devices") {
        for p in d["processes"].as_array().expect("processes") {
            out.push((
                d["id"].as_str().expect("id").to_string(),
                p["pid"].as_u64().expect("pid") as u32,
            ));
        }
    }
    out.sort();
    out
}

#[test]
fn once_prints_every_device_and_every_process_of_the_demo() {
    let screen = stdout_of(&["top", "--demo", "--frame", "5", "--once"]);
    assert!(screen.starts_with("gpuscope top (demo)"), "{screen}");
    for i in 0..8 {
        assert!(
            screen
                .lines()
                .any(|l| l.starts_with(&format!("{i}    NVIDIA H100 80GB HBM3"))),
            "GPU {i} missing:\n{screen}"
        );
    }
    let mut rows = process_rows(&screen);
    // Largest GPU memory first by default.
    assert!(!rows.is_empty());
    rows.sort();
    assert_eq!(
        rows,
        snapshot_processes(&["--demo", "--frame", "5"]),
        "{screen}"
    );
    // Plain text: no escape sequences, no key hints.
    assert!(!screen.contains('\x1b'));
    assert!(!screen.contains("q quit"));
    assert!(screen.lines().all(|l| l.chars().count() <= 140));
}

#[test]
fn once_honours_only_and_ascii() {
    let screen = stdout_of(&[
        "top", "--demo", "--frame", "5", "--once", "--only", "0,3", "--ascii",
    ]);
    assert!(screen.is_ascii(), "{screen}");
    let devices: Vec<&str> = screen
        .lines()
        .filter(|l| l.contains("NVIDIA H100"))
        .map(|l| l.split_whitespace().next().unwrap_or(""))
        .collect();
    assert_eq!(devices, ["0", "3"]);
    let mut rows = process_rows(&screen);
    rows.sort();
    let want: Vec<(String, u32)> = snapshot_processes(&["--demo", "--frame", "5"])
        .into_iter()
        .filter(|(d, _)| d == "0" || d == "3")
        .collect();
    assert_eq!(rows, want);
}

#[test]
fn once_shows_mig_devices_and_their_processes() {
    let f = fixture("h100-mig");
    let screen = stdout_of(&["top", "--fixture", &f, "--frame", "20", "--once"]);
    for id in ["0:0", "0:1", "0:2", "0:3"] {
        assert!(
            screen
                .lines()
                .any(|l| l.starts_with(&format!(" {id} NVIDIA H100"))),
            "{id} missing:\n{screen}"
        );
    }
    assert!(screen.contains("MIG On"));
    let mut rows = process_rows(&screen);
    rows.sort();
    assert_eq!(
        rows,
        snapshot_processes(&["--fixture", &f, "--frame", "20"])
    );
    // `--only 0:1` keeps that MIG device alone.
    let screen = stdout_of(&[
        "top",
        "--fixture",
        &f,
        "--frame",
        "20",
        "--once",
        "--only",
        "0:1",
    ]);
    assert!(!screen.contains(" 0:0 "), "{screen}");
    assert!(process_rows(&screen).iter().all(|(d, _)| d == "0:1"));
}

#[test]
fn bad_options_are_usage_errors() {
    for (args, says) in [
        (vec!["--only", "9"], "no device 9; the devices are 0, 1"),
        (vec!["--only", "x"], "--only"),
        (vec!["--interval", "0"], "must be between 50ms and 1h"),
        (
            vec!["--interval", "fast"],
            "write seconds (2, 0.5) or a number with a unit",
        ),
        // Extremes: never a panic, always exit 2 naming the option (and the bounds, for a
        // number out of them). docs/cli-bounds.md; cli_bounds.rs tries many more.
        (
            vec!["--interval", "18446744073709551615s"],
            "must be between 50ms and 1h",
        ),
        (vec!["--interval", "1e308"], "must be between 50ms and 1h"),
        (vec!["--interval=-1"], "must be between 50ms and 1h"),
        (vec!["--interval", "3601"], "must be between 50ms and 1h"),
        (vec!["--interval", "inf"], "for '--interval <DURATION>'"),
        (vec!["--interval", "NaN"], "for '--interval <DURATION>'"),
    ] {
        let mut all = vec!["top", "--demo", "--once"];
        all.extend_from_slice(&args);
        cli::assert_usage_error(&gpuscope(&all), args, says);
    }
}

#[test]
fn without_a_terminal_it_says_to_use_once() {
    let out = gpuscope(&["top", "--demo"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--once"));
}

#[test]
fn help_lists_the_keys_and_options() {
    let help = stdout_of(&["top", "--help"]);
    for want in [
        "Keys:",
        "SIGTERM",
        "filter",
        "tree view",
        "--readonly",
        "--interval",
        "--only",
        "--once",
        "--ascii",
        "--no-color",
    ] {
        assert!(help.contains(want), "{want} missing:\n{help}");
    }
}

/// old-driver.json with `hostile` as the name, command line and user of its process, and as
/// the name of its GPU, written to a temporary file.
fn hostile_fixture(hostile: &str) -> PathBuf {
    let mut f: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("old-driver")).unwrap()).unwrap();
    let p = &mut f["host"]["processes"]["3127"];
    p["name"] = hostile.into();
    p["cmdline"] = serde_json::json!([hostile, "--title", hostile]);
    p["user"] = hostile.into();
    f["devices"]["0"]["name"]["ok"] = hostile.into();
    let path =
        std::env::temp_dir().join(format!("gpuscope-top-hostile-{}.json", std::process::id()));
    std::fs::write(&path, serde_json::to_string(&f).unwrap()).unwrap();
    path
}

// Regression: a process named `ESC ]0;TITLE BEL ESC [2J` (as `exec -a` makes one) retitled the
// terminal and cleared the screen when its name reached the terminal raw.
#[test]
fn outside_text_reaches_the_output_escaped() {
    let path = hostile_fixture("evil\u{1b}]0;TITLE\u{7}\u{1b}[2J\u{9b}");
    let p = path.display().to_string();
    for layout in ["full", "compact"] {
        let screen = stdout_of(&[
            "top",
            "--fixture",
            &p,
            "--frame",
            "6",
            "--once",
            "--layout",
            layout,
        ]);
        assert!(!screen.contains('\u{1b}'), "{screen:?}");
        assert!(
            !screen.contains('\u{7}') && !screen.contains('\u{9b}'),
            "{screen:?}"
        );
        // Shown, escaped: the user sees what the name holds.
        assert!(screen.contains(r"evil\x1b]0;TITLE\x07"), "{screen}");
        assert_eq!(process_rows(&screen), [("0".to_string(), 3127)], "{screen}");
    }
    let _ = std::fs::remove_file(&path);
}

// Regression: the width of `--once` (the terminal's, else COLUMNS) sized its buffers without a
// bound.
#[test]
fn once_width_is_bounded() {
    let out = cli::command(&["top", "--demo", "--frame", "5", "--once"])
        .env("COLUMNS", "65535")
        .output()
        .expect("gpuscope runs");
    assert!(out.status.success());
    let screen = String::from_utf8(out.stdout).unwrap();
    assert!(screen.contains("64 of 64 shown"), "{screen}");
    let widest = screen.lines().map(|l| l.chars().count()).max().unwrap();
    assert!(widest <= 1000, "{widest} columns");
}

/// Regression: on a terminal that reports 0x0 (a serial console, some CI runners) `--once` cut
/// every line at 40 columns. It now takes COLUMNS, as with no terminal. `script` (util-linux)
/// gives gpuscope a real pseudo-terminal whose size is set to 0x0.
#[cfg(target_os = "linux")]
#[test]
fn once_on_a_terminal_of_size_zero_uses_columns() {
    let exe = env!("CARGO_BIN_EXE_gpuscope");
    let inner = format!("stty cols 0 rows 0 && {exe} top --demo --frame 5 --once");
    let out = Command::new("script")
        .args(["-qec", &inner, "/dev/null"])
        .env_remove("GPUSCOPE_FIXTURE")
        .env("COLUMNS", "140")
        // On a terminal `--once` is in colour; the width is counted on the plain text.
        .env("NO_COLOR", "1")
        .output()
        .expect("script(1) from util-linux runs");
    cli::assert_ok(&out, "script(1)");
    let screen = String::from_utf8(out.stdout).unwrap().replace('\r', "");
    assert!(screen.contains("64 of 64 shown"), "{screen}");
    let widest = screen.lines().map(|l| l.chars().count()).max().unwrap();
    assert_eq!(widest, 140, "{screen}");
}

/// Regression: a process list that failed with NO_PERMISSION (the usual answer inside a
/// container) read as "No running GPU processes." in the viewer. It is N/A with its reason, and
/// the devices whose lists were read still show their processes.
#[test]
fn a_process_list_that_cannot_be_read_is_na_in_the_viewer_not_empty() {
    // The screen of frame 5 where the process lists of the GPUs `ids` could not be read.
    let screen_failing = |name: &str, ids: &[&str]| {
        let edited = EditedFixture::new("gpu-lost", name, |fx| {
            for id in ids {
                fail_process_lists(
                    fx,
                    5,
                    id,
                    &["compute_processes", "graphics_processes"],
                    "no_permission",
                );
            }
        });
        stdout_of(&["top", "--once", "--fixture", &edited.path(), "--frame", "5"])
    };
    let screen = screen_failing("top-all", &["0", "1", "2", "3"]);
    assert!(
        screen.contains("Processes of GPU 0, 1, 2, 3: N/A (insufficient permissions)"),
        "{screen}"
    );
    assert!(!screen.contains("No running GPU processes"), "{screen}");
    assert!(process_rows(&screen).is_empty(), "{screen}");

    let screen = screen_failing("top-one", &["1"]);
    assert!(
        screen.contains("Processes of GPU 1: N/A (insufficient permissions)"),
        "{screen}"
    );
    let rows = process_rows(&screen);
    assert!(!rows.is_empty(), "{screen}");
    assert!(rows.iter().all(|(dev, _)| dev != "1"), "{screen}");
}

#[test]
fn nvitop_style_options_only_with_spaces_no_unicode_and_version() {
    // `--only 0 3` (nvitop's space-separated form) and `-U` are `--only 0,3 --ascii`.
    let nvitop = stdout_of(&[
        "top", "--demo", "--frame", "5", "--once", "--only", "0", "3", "-U",
    ]);
    let ours = stdout_of(&[
        "top", "--demo", "--frame", "5", "--once", "--only", "0,3", "--ascii",
    ]);
    assert_eq!(nvitop, ours);
    assert!(nvitop.is_ascii());
    let long = stdout_of(&[
        "top",
        "--demo",
        "--frame",
        "5",
        "--once",
        "--only",
        "0",
        "3",
        "--no-unicode",
    ]);
    assert_eq!(long, ours);
    // `top -V` prints the version, as `nvitop -V` does.
    let v = stdout_of(&["top", "-V"]);
    assert!(v.contains(env!("CARGO_PKG_VERSION")), "{v}");
    // --force-color and --no-color contradict each other.
    let out = gpuscope(&["top", "--demo", "--once", "--force-color", "--no-color"]);
    assert_eq!(out.status.code(), Some(2));
}

/// The header's time of a `--once` screen over the demo's frame 5, under time zone `tz`.
fn header_time(tz: &str) -> String {
    let out = cli::command(&["top", "--demo", "--frame", "5", "--once"])
        .env("COLUMNS", "140")
        .env("TZ", tz)
        .output()
        .unwrap();
    let screen = String::from_utf8(out.stdout).unwrap();
    let header = screen.lines().next().unwrap_or("").to_string();
    header
        .split("  ")
        .find(|p| p.len() >= 8 && p.as_bytes()[2] == b':' && p.as_bytes()[5] == b':')
        .unwrap_or_else(|| panic!("no time in {header:?}"))
        .to_string()
}

#[test]
fn the_header_shows_local_time_in_the_time_zone() {
    // POSIX time-zone strings need no tz database: "IST-5:30" is 5 h 30 ahead of UTC.
    let utc = header_time("UTC0");
    let ist = header_time("IST-5:30");
    assert!(utc.ends_with(" UTC"), "{utc}");
    assert!(ist.ends_with(" IST"), "{ist}");
    let minutes = |t: &str| -> i32 {
        let h: i32 = t[0..2].parse().unwrap();
        let m: i32 = t[3..5].parse().unwrap();
        h * 60 + m
    };
    assert_eq!(
        (minutes(&ist) - minutes(&utc)).rem_euclid(24 * 60),
        5 * 60 + 30
    );
    assert_eq!(ist[6..8], utc[6..8], "the seconds are the same");
}

/// (PID, user, type) of every process row of a `--once` screen.
fn typed_rows(screen: &str) -> Vec<(u32, String, String)> {
    let mut rows = Vec::new();
    for line in table_lines(screen) {
        let rest: String = line.chars().skip(2).collect();
        let w: Vec<&str> = rest.split_whitespace().collect();
        if let (Some(pid), Some(user), Some(kind)) = (w.get(1), w.get(2), w.get(3)) {
            if let Ok(pid) = pid.parse() {
                rows.push((pid, user.to_string(), kind.to_string()));
            }
        }
    }
    rows.sort();
    rows
}

fn once_rows(extra: &[&str], env: &[(&str, &str)]) -> Vec<(u32, String, String)> {
    let f = fixture("geforce-desktop");
    let mut args = vec!["top", "--fixture", f.as_str(), "--frame", "5", "--once"];
    args.extend_from_slice(extra);
    let mut cmd = cli::command(&args);
    cmd.env("COLUMNS", "200");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    cli::assert_ok(&out, args);
    typed_rows(&String::from_utf8(out.stdout).unwrap())
}

#[test]
fn nvitop_startup_filters_user_pid_compute_graphics() {
    let all = once_rows(&[], &[]);
    assert!(all.len() >= 3, "{all:?}");
    // --user NAME: exactly that user's rows.
    let user = all[0].1.clone();
    let want: Vec<_> = all.iter().filter(|r| r.1 == user).cloned().collect();
    assert_eq!(once_rows(&["--user", &user], &[]), want);
    // --user alone: the current user ($LOGNAME first, as nvitop's getpass).
    assert_eq!(once_rows(&["--user"], &[("LOGNAME", &user)]), want);
    // --pid A B: those two.
    let pids = [all[0].0.to_string(), all[all.len() - 1].0.to_string()];
    let got: Vec<u32> = once_rows(&["--pid", &pids[0], &pids[1]], &[])
        .iter()
        .map(|r| r.0)
        .collect();
    // (A process on two GPUs has a row on each.)
    let want_pids: Vec<u32> = all
        .iter()
        .map(|r| r.0)
        .filter(|&p| p == all[0].0 || p == all[all.len() - 1].0)
        .collect();
    assert_eq!(got, want_pids);
    // -c: C and C+G; -g: G and C+G.
    let c = once_rows(&["-c"], &[]);
    let g = once_rows(&["-g"], &[]);
    assert_eq!(
        c,
        all.iter()
            .filter(|r| r.2 == "C" || r.2 == "C+G")
            .cloned()
            .collect::<Vec<_>>()
    );
    assert_eq!(
        g,
        all.iter()
            .filter(|r| r.2 == "G" || r.2 == "C+G")
            .cloned()
            .collect::<Vec<_>>()
    );
    assert!(!c.is_empty() && !g.is_empty() && c != g, "{c:?} {g:?}");
    // They are for this machine's processes, not the fleet's.
    let out = gpuscope(&["top", "--prometheus", "http://127.0.0.1:9", "-c", "--once"]);
    assert_eq!(out.status.code(), Some(2));
}

fn once_with_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = cli::command(args);
    cmd.env("COLUMNS", "140");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn device_lines(screen: &str) -> Vec<String> {
    screen
        .lines()
        .filter(|l| l.contains("NVIDIA H100"))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

#[test]
fn only_visible_follows_cuda_visible_devices() {
    let out = once_with_env(
        &["top", "--demo", "--frame", "5", "--once", "--only-visible"],
        &[
            ("CUDA_VISIBLE_DEVICES", "5,2"),
            ("CUDA_DEVICE_ORDER", "PCI_BUS_ID"),
        ],
    );
    assert!(out.status.success());
    assert_eq!(
        device_lines(&String::from_utf8_lossy(&out.stdout)),
        ["2", "5"]
    );
    // Unset: every device.
    let out = once_with_env(
        &["top", "--demo", "--frame", "5", "--once", "--only-visible"],
        &[],
    );
    assert_eq!(device_lines(&String::from_utf8_lossy(&out.stdout)).len(), 8);
}

#[test]
fn environment_variables_set_the_defaults() {
    let screen = |env: &[(&str, &str)], extra: &[&str]| {
        let mut args = vec!["top", "--demo", "--frame", "5", "--once"];
        args.extend_from_slice(extra);
        let out = once_with_env(&args, env);
        cli::assert_ok(&out, env);
        String::from_utf8(out.stdout).unwrap()
    };
    let plain = screen(&[], &[]);
    assert!(!plain.is_ascii());
    assert_eq!(
        screen(&[("GPUSCOPE_TOP_ASCII", "1")], &[]),
        screen(&[], &["--ascii"])
    );
    assert_eq!(screen(&[("GPUSCOPE_TOP_ASCII", "0")], &[]), plain);
    assert!(screen(&[("GPUSCOPE_TOP_READONLY", "yes")], &[])
        .lines()
        .next()
        .unwrap()
        .ends_with("read-only"));
    assert_eq!(
        screen(&[("GPUSCOPE_TOP_LAYOUT", "compact")], &[]),
        screen(&[], &["--layout", "compact"])
    );
    assert_eq!(
        screen(
            &[
                ("CUDA_VISIBLE_DEVICES", "1"),
                ("GPUSCOPE_TOP_ONLY_VISIBLE", "true")
            ],
            &[]
        ),
        screen(&[], &["--only", "1"])
    );
    // A bad value is a usage error, as on the command line.
    let out = once_with_env(
        &["top", "--demo", "--once"],
        &[("GPUSCOPE_TOP_INTERVAL", "soon")],
    );
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn utilization_thresholds_are_two_ordered_percents() {
    let ok = gpuscope(&[
        "top",
        "--demo",
        "--once",
        "--gpu-util-thresh",
        "20",
        "90",
        "--mem-util-thresh",
        "5",
        "50",
    ]);
    cli::assert_ok(&ok, "gpuscope");
    for bad in [["90", "20"], ["20", "101"], ["x", "50"]] {
        let out = gpuscope(&[
            "top",
            "--demo",
            "--once",
            "--gpu-util-thresh",
            bad[0],
            bad[1],
        ]);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("gpu-util-thresh"), "{bad:?}: {err}");
    }
}

/// The SM% cell of each process row of a `--once` screen (PID -> cell), read under the
/// header's `SM%` (the column is right-aligned, four cells wide).
fn sm_cells(screen: &str) -> std::collections::BTreeMap<u32, String> {
    let mut cells = std::collections::BTreeMap::new();
    let mut end = None;
    for line in screen.lines() {
        let chars: Vec<char> = line.chars().collect();
        if line.contains("PID") && line.contains("SM%") {
            end = line.split("SM%").next().map(|b| b.chars().count() + 3);
            continue;
        }
        let Some(end) = end else { continue };
        let pid = chars
            .get(2..)
            .map(String::from_iter)
            .and_then(|rest| rest.split_whitespace().nth(1).and_then(|p| p.parse().ok()));
        if let (Some(pid), Some(cell)) = (pid, chars.get(end - 4..end)) {
            cells.insert(pid, String::from_iter(cell).trim().to_string());
        }
    }
    cells
}

/// Regression: on real H100s `top` showed SM% `N/A` for PID 541, whose samples came less often
/// than PID 512's. `top --once` over the real recording, frames 19-55: each process's SM% is
/// that of its newest recorded sample in the frame (all under 15 s old), and PID 541 has a
/// value from its first sample (frame 20) on.
#[test]
fn once_shows_the_sm_of_a_process_sampled_less_often_over_the_real_recording() {
    let path = fixture("h100-real");
    let fx: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for frame in 19..=55 {
        let f = frame.to_string();
        let screen = stdout_of(&["top", "--fixture", &path, "--frame", &f, "--once"]);
        let cells = sm_cells(&screen);
        let dy = &fx["frames"][frame]["devices"]["0"];
        let listed = dy["compute_processes"]["ok"].as_array().unwrap();
        assert_eq!(cells.len(), listed.len(), "frame {frame}\n{screen}");
        let samples = dy["process_utilization"]["ok"].as_array().unwrap();
        for p in listed {
            let pid = p["pid"].as_u64().unwrap();
            let want = samples
                .iter()
                .filter(|s| s["pid"] == pid)
                .max_by_key(|s| s["timestamp_us"].as_u64())
                .map_or("N/A".to_string(), |s| s["sm"].to_string());
            assert_eq!(
                cells[&(pid as u32)],
                want,
                "frame {frame} pid {pid}\n{screen}"
            );
        }
        if frame >= 20 {
            assert_ne!(cells[&541], "N/A", "frame {frame}\n{screen}");
        }
    }
}

/// A value refused when it came from a `GPUSCOPE_*` variable is reported naming the variable;
/// the same value typed on the command line names the option, as before.
#[test]
fn a_bad_value_from_the_environment_names_the_variable() {
    // The stderr of `top ARGS` with GPUSCOPE_TOP_INTERVAL set to `value`, a usage error.
    let refused = |args: &[&str], value: &str| {
        let out = cli::command(&[&["top", "--demo", "--once"][..], args].concat())
            .env("GPUSCOPE_TOP_INTERVAL", value)
            .output()
            .expect("gpuscope runs");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{err}");
        err
    };
    let err = refused(&[], "1ms");
    assert!(
        err.contains("invalid value '1ms' for GPUSCOPE_TOP_INTERVAL")
            && err.contains("between 50ms and 1h"),
        "{err}"
    );
    let err = refused(&["--interval", "1ms"], "2s");
    assert!(
        err.contains("'--interval <DURATION>'") && !err.contains("GPUSCOPE_TOP_INTERVAL"),
        "{err}"
    );
}
