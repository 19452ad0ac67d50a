//! A newcomer's first commands, through the binary: `gpuscope` with no command (the snapshot
//! in a pipe, the viewer on a terminal), `gpuscope completions <shell>`, and the man pages that
//! `cargo xtask man` writes with `gpuscope __man DIR`.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::cli;
use cli::fixture;

const COMMANDS: [&str; 11] = [
    "snapshot",
    "top",
    "info",
    "select",
    "record",
    "export",
    "doctor",
    "stat",
    "install-links",
    "smi",
    "completions",
];

fn gpuscope(args: &[&str], env: &[(&str, String)]) -> Output {
    let mut cmd = cli::command(args);
    cmd.stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("gpuscope runs")
}

fn stdout_of(args: &[&str], env: &[(&str, String)]) -> String {
    let out = gpuscope(args, env);
    cli::assert_ok(&out, args);
    String::from_utf8(out.stdout).expect("UTF-8")
}

/// The device lines of a snapshot (those naming the GPU model), which do not change with time.
fn device_lines(text: &str, model: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.contains(model))
        .map(str::to_string)
        .collect()
}

/// Regression: `gpuscope` alone was a usage error. Outside a terminal it prints the snapshot,
/// and options without a command go to it.
#[test]
fn gpuscope_alone_prints_the_snapshot_when_not_on_a_terminal() {
    let env = [("GPUSCOPE_FIXTURE", fixture("geforce-desktop"))];
    let alone = stdout_of(&[], &env);
    let snapshot = stdout_of(&["snapshot"], &env);
    let lines = device_lines(&snapshot, "GeForce");
    assert!(!lines.is_empty(), "{snapshot}");
    assert_eq!(device_lines(&alone, "GeForce"), lines);

    let with_options = stdout_of(&["--demo", "--frame", "0"], &[]);
    let snapshot = stdout_of(&["snapshot", "--demo", "--frame", "0"], &[]);
    assert_eq!(
        device_lines(&with_options, "H100"),
        device_lines(&snapshot, "H100")
    );
    assert_eq!(device_lines(&snapshot, "H100").len(), 8, "{snapshot}");

    // Help and version stay the program's own, and say what no command does.
    let help = stdout_of(&["--help"], &[]);
    assert!(
        help.contains("With no command, gpuscope runs `top`"),
        "{help}"
    );
    assert!(stdout_of(&["-V"], &[]).starts_with("gpuscope "));
}

#[test]
fn completions_for_bash_zsh_and_fish_cover_every_command() {
    for shell in ["bash", "zsh", "fish"] {
        let script = stdout_of(&["completions", shell], &[]);
        for command in COMMANDS {
            assert!(
                script.contains(command),
                "{shell} completions miss {command}"
            );
        }
        // Options of the commands complete too.
        assert!(script.contains("--demo"), "{shell}: --demo");
        assert!(
            !script.contains("__man"),
            "{shell}: the hidden command shows"
        );
    }
    let out = gpuscope(&["completions", "tcsh"], &[]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "an unknown shell is a usage error"
    );
}

#[test]
fn man_pages_are_written_for_gpuscope_and_each_command() {
    let dir = std::env::temp_dir().join(format!("gpuscope-man-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let sub = dir.join("man1");
    stdout_of(&["__man", sub.to_str().unwrap()], &[]);
    let mut names: Vec<String> = std::fs::read_dir(&sub)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut want: Vec<String> = COMMANDS.iter().map(|c| format!("gpuscope-{c}.1")).collect();
    want.push("gpuscope.1".into());
    want.sort();
    assert_eq!(names, want);
    let main = std::fs::read_to_string(sub.join("gpuscope.1")).unwrap();
    assert!(main.contains(".TH gpuscope 1"), "{main}");
    for command in COMMANDS {
        assert!(
            main.contains(&format!("gpuscope\\-{}(1)", command.replace('-', "\\-"))),
            "{command}"
        );
    }
    let top = std::fs::read_to_string(sub.join("gpuscope-top.1")).unwrap();
    assert!(top.contains("\\-\\-demo"), "{top}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `gpuscope --demo` in a terminal is the viewer (tmux gives it one). Skipped, saying why,
/// when tmux is missing outside CI.
#[test]
fn gpuscope_alone_runs_the_viewer_on_a_terminal() {
    let found = Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "tmux is required for this test in CI (.ci/run installs it)"
        );
        eprintln!("skipping: tmux is not installed");
        return;
    }
    let socket = format!("gpuscope-alone-{}", std::process::id());
    let tmux = |args: &[&str]| {
        Command::new("tmux")
            .args(["-L", &socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .expect("tmux runs")
    };
    let command = format!("{} --demo", env!("CARGO_BIN_EXE_gpuscope"));
    let started = tmux(&[
        "new-session",
        "-d",
        "-s",
        "t",
        "-x",
        "160",
        "-y",
        "50",
        &command,
    ]);
    assert!(started.status.success());
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut screen = String::new();
    while Instant::now() < deadline {
        screen =
            String::from_utf8_lossy(&tmux(&["capture-pane", "-p", "-t", "t"]).stdout).into_owned();
        if screen.contains("gpuscope top (demo)") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = tmux(&["send-keys", "-t", "t", "q"]);
    let socket_path = tmux(&["display-message", "-p", "#{socket_path}"]).stdout;
    let _ = tmux(&["kill-server"]);
    let socket_path = String::from_utf8_lossy(&socket_path).trim().to_string();
    if !socket_path.is_empty() {
        let _ = std::fs::remove_file(socket_path);
    }
    assert!(
        screen.contains("gpuscope top (demo)"),
        "no viewer; the screen:\n{screen}"
    );
}
