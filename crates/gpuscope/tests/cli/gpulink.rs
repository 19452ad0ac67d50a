//! The `gpulink` front door (issue 34): `gpulink -o FILE` records until Ctrl+C, then saves the
//! plot and prints gpulink's summary line per device, as the seed's command line; without `-o`
//! it writes no plot, as gpulink. Reached through the link `install-links` makes by default, and
//! as `gpuscope gpulink`.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::support::cli;

const WAIT: Duration = Duration::from_secs(60);

/// The 8-GPU H100 scenario, as an argument.
fn fixture() -> String {
    cli::fixture("h100-sxm-8gpu")
}

/// Checks one of gpulink's summary lines, `NAME[i] -> memory used: min=X[MB] / max=Y[MB]`:
/// its index, and min <= max in megabytes.
fn assert_gpulink_line(line: &str, index: usize) {
    let (dev, rest) = line.split_once(" -> memory used: min=").expect(line);
    assert!(dev.ends_with(&format!("[{index}]")), "{line}");
    let (min, rest) = rest.split_once("[MB] / max=").expect(line);
    let max = rest.strip_suffix("[MB]").expect(line);
    let (min, max): (f64, f64) = (min.parse().expect(line), max.parse().expect(line));
    assert!(0.0 < min && min <= max, "{line}");
}

/// `install-links` makes `gpulink` with the others; run through it, `gpulink -o FILE` records
/// until SIGINT (Ctrl+C), then exits 0 with the plot saved and one gpulink line per GPU.
#[test]
fn gpulink_o_records_until_ctrl_c_then_plots_and_summarises() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    let made = cli::stdout(&["install-links", bin.to_str().unwrap()]);
    assert!(
        made.contains(&bin.join("gpulink").display().to_string()),
        "{made}"
    );
    let plot = dir.path().join("memory_consumption.png");
    let mut gpulink = Command::new(bin.join("gpulink"));
    cli::without_settings(&mut gpulink);
    // -vv logs each sample as it is taken ("refresh"), after the Ctrl+C handler is in place:
    // the signal is sent only then.
    let mut child = gpulink
        .args(["-o", plot.to_str().unwrap(), "--fixture", &fixture(), "-vv"])
        .args(["--interval", "20ms"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("gpulink runs");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("refresh") {
                let _ = tx.send(());
            }
            all += &line;
            all.push('\n');
        }
        all
    });
    let deadline = Instant::now() + WAIT;
    let mut samples = 0;
    while samples < 3 {
        let left = deadline.saturating_duration_since(Instant::now());
        rx.recv_timeout(left)
            .expect("gpulink samples within a minute");
        samples += 1;
    }
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: kill(2) with the PID of our own child and a valid signal number.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let out = child.wait_with_output().expect("gpulink ends");
    let stderr = reader.join().unwrap();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!("plot saved to {}", plot.display())),
        "{stderr}"
    );
    let png = std::fs::read(&plot).expect("the plot is written");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 8, "{stdout}");
    for (i, line) in lines.iter().enumerate() {
        assert_gpulink_line(line, i);
    }
}

/// Without `-o`, gpulink writes no plot, and neither does the door: only the summary.
#[test]
fn gpulink_without_o_writes_no_plot() {
    let dir = tempfile::tempdir().unwrap();
    let out = cli::command(&["gpulink", "--demo", "--frame", "4", "--duration", "100ms"])
        .current_dir(dir.path())
        .output()
        .expect("gpuscope runs");
    cli::assert_ok(&out, "gpuscope gpulink");
    let stdout = String::from_utf8(out.stdout).unwrap();
    for (i, line) in stdout.lines().enumerate() {
        assert_gpulink_line(line, i);
    }
    assert_eq!(stdout.lines().count(), 8, "{stdout}");
    let left: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(left, Vec::<PathBuf>::new(), "no file written");
    // The seed's check: a plot format it cannot write is refused before recording (exit 2).
    let bad = cli::run(&["gpulink", "--demo", "-o", "plot.jpg"]);
    cli::assert_usage_error(&bad, "-o plot.jpg", ".png or .svg");
}

/// The seed's line run twice: gpulink replaces its plot, and so does the door (a script that
/// runs `gpulink -o memory_consumption.png` in a loop keeps working). `record` itself refuses
/// an existing file without `--overwrite`.
#[test]
fn gpulink_o_twice_replaces_the_plot_as_gpulink_does() {
    let dir = tempfile::tempdir().unwrap();
    let plot = dir.path().join("memory_consumption.png");
    std::fs::write(&plot, "an earlier plot").unwrap();
    let p = plot.to_str().unwrap();
    let line = [
        "gpulink",
        "-o",
        p,
        "--demo",
        "--frame",
        "4",
        "--duration",
        "100ms",
    ];
    for _ in 0..2 {
        cli::assert_ok(&cli::run(&line), "gpuscope gpulink -o");
        assert!(
            std::fs::read(&plot).unwrap().starts_with(b"\x89PNG"),
            "replaced"
        );
    }
    let record = cli::run(&["record", "--output", p, "--demo", "--duration", "100ms"]);
    cli::assert_usage_error(&record, "record --output", "--overwrite replaces it");
}
