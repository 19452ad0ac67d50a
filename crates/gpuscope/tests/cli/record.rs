//! `gpuscope record` end to end, through the binary: Ctrl+C (SIGINT) writes the plot and the
//! summary, kill -9 leaves a CSV of whole samples, `--duration` stops by itself, and bad input
//! exits 2.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::cli;
use cli::{command, run};

const WAIT: Duration = Duration::from_secs(60);

/// The 8-GPU H100 scenario, as an argument.
fn fixture_path() -> String {
    cli::fixture("h100-sxm-8gpu")
}

fn fixture_json() -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture_path()).unwrap()).unwrap()
}

/// A fresh folder for one test's files.
fn out_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gpuscope-record-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn spawn_recording(csv: &Path, png: &Path) -> Child {
    command(&[
        "record",
        "--fixture",
        &fixture_path(),
        "--interval",
        "50ms",
        "--csv",
        csv.to_str().unwrap(),
        "--output",
        png.to_str().unwrap(),
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("gpuscope runs")
}

/// Waits until `path` holds at least `n` complete lines (newline-terminated).
fn wait_for_lines(child: &mut Child, path: &Path, n: usize) {
    let deadline = Instant::now() + WAIT;
    loop {
        let lines = std::fs::read(path)
            .map(|b| b.iter().filter(|&&c| c == b'\n').count())
            .unwrap_or(0);
        if lines >= n {
            return;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("gpuscope ended early with {status}");
        }
        assert!(
            Instant::now() < deadline,
            "only {lines} lines after {WAIT:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(child: &Child, sig: libc::c_int) {
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: kill(2) with a PID of our own child and a valid signal number.
    let rc = unsafe { libc::kill(pid, sig) };
    assert_eq!(rc, 0, "kill: {}", std::io::Error::last_os_error());
}

fn wait_exit(child: &mut Child) -> ExitStatus {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "gpuscope did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every memory-used value the fixture holds for GPU `gpu`.
fn fixture_values(json: &Value, gpu: usize) -> Vec<u64> {
    json["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            f["devices"][gpu.to_string()]["memory_info"]["ok"]["used"]
                .as_u64()
                .unwrap()
        })
        .collect()
}

/// The data lines of a CSV written by `record`: each `(elapsed_s, values per GPU)`.
fn csv_rows(text: &str) -> Vec<(f64, Vec<u64>)> {
    text.lines()
        .skip(1)
        .map(|line| {
            let cells: Vec<&str> = line.split(',').collect();
            assert_eq!(cells.len(), 10, "a whole sample: {line:?}");
            let values = cells[2..].iter().map(|c| c.parse().unwrap()).collect();
            (cells[0].parse().unwrap(), values)
        })
        .collect()
}

/// Parses gpulink's line, `NAME[i] -> memory used: min=X[MB] / max=Y[MB]`.
fn parse_gpulink_summary(line: &str) -> (String, usize, f64, f64) {
    let (dev, rest) = line.split_once(" -> memory used: min=").expect(line);
    let (min, rest) = rest.split_once("[MB] / max=").expect(line);
    let max = rest.strip_suffix("[MB]").expect(line);
    let (name, index) = dev.strip_suffix(']').unwrap().rsplit_once('[').unwrap();
    (
        name.to_string(),
        index.parse().unwrap(),
        min.parse().unwrap(),
        max.parse().unwrap(),
    )
}

/// Parses the default line, `NAME[i] -> memory used: min XMiB / mean YMiB / max ZMiB (of
/// TMiB)`, into (name, index, min, mean, max) in MiB.
fn parse_summary(line: &str) -> (String, usize, u64, u64, u64) {
    let (dev, rest) = line.split_once(" -> memory used: min ").expect(line);
    let (min, rest) = rest.split_once("MiB / mean ").expect(line);
    let (mean, rest) = rest.split_once("MiB / max ").expect(line);
    let (max, _total) = rest.split_once("MiB (of ").expect(line);
    let (name, index) = dev.strip_suffix(']').unwrap().rsplit_once('[').unwrap();
    (
        name.to_string(),
        index.parse().unwrap(),
        min.parse().expect(line),
        mean.parse().expect(line),
        max.parse().expect(line),
    )
}

/// Bytes in MiB, rounded as gpuscope prints them.
fn mib(bytes: u64) -> u64 {
    (bytes as f64 / (1024.0 * 1024.0)).round_ties_even() as u64
}

/// What is left to read of a child's pipe, as text.
fn read_all(pipe: Option<impl Read>) -> String {
    let mut text = String::new();
    pipe.expect("a piped stream")
        .read_to_string(&mut text)
        .unwrap();
    text
}

fn is_png(path: &Path) -> bool {
    std::fs::read(path).is_ok_and(|b| b.starts_with(b"\x89PNG\r\n\x1a\n") && b.len() > 10_000)
}

/// A recording ([`spawn_recording`]) into `out_dir(name)`: the directory, its `memory.csv` and
/// `memory.png`, and the recording.
fn recording(name: &str) -> (PathBuf, PathBuf, PathBuf, Child) {
    let dir = out_dir(name);
    let (csv, png) = (dir.join("memory.csv"), dir.join("memory.png"));
    let child = spawn_recording(&csv, &png);
    (dir, csv, png, child)
}

/// Sends `sig` to `child` once its CSV at `csv` has `lines` lines; how it ended.
fn stop_at(child: &mut Child, csv: &Path, lines: usize, sig: libc::c_int) -> ExitStatus {
    wait_for_lines(child, csv, lines);
    signal(child, sig);
    wait_exit(child)
}

#[test]
fn ctrl_c_saves_the_plot_and_prints_one_summary_line_per_device() {
    let (dir, csv, png, mut child) = recording("sigint");
    let status = stop_at(&mut child, &csv, 6, libc::SIGINT);
    let stdout = read_all(child.stdout.take());
    let stderr = read_all(child.stderr.take());
    assert!(status.success(), "exit {status}: {stderr}");
    assert!(is_png(&png), "the plot is written");
    assert!(stderr.contains("plot saved to"), "{stderr}");

    // One line per device, whose min and max are those of the samples written to the CSV, in
    // MiB as gpuscope prints memory everywhere (not gpulink's megabytes with six decimals).
    let rows = csv_rows(&std::fs::read_to_string(&csv).unwrap());
    let json = fixture_json();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 8, "{stdout}");
    for (i, line) in lines.iter().enumerate() {
        let (name, index, min, mean, max) = parse_summary(line);
        assert_eq!(index, i);
        assert_eq!(name, json["devices"][i.to_string()]["name"]["ok"]);
        let col: Vec<u64> = rows.iter().map(|r| r.1[i]).collect();
        assert_eq!(min, mib(*col.iter().min().unwrap()), "{line}");
        assert_eq!(max, mib(*col.iter().max().unwrap()), "{line}");
        assert!(min <= mean && mean <= max, "{line}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn kill_9_leaves_a_csv_of_whole_samples_but_the_last_at_most() {
    let (dir, csv, png, mut child) = recording("kill9");
    // The header and at least 8 samples, all on disk while the recording runs.
    let status = stop_at(&mut child, &csv, 9, libc::SIGKILL);
    assert!(!status.success());
    assert!(!png.exists(), "killed before it could plot");

    let text = std::fs::read_to_string(&csv).unwrap();
    let complete = match text.rfind('\n') {
        Some(end) => &text[..=end],
        None => "",
    };
    let partial = &text[complete.len()..];
    let rows = csv_rows(complete);
    assert!(rows.len() >= 8, "{} samples", rows.len());
    // At most the sample being written is cut short, and nothing else is lost.
    assert!(!partial.contains('\n'));
    let json = fixture_json();
    for gpu in 0..8 {
        let known = fixture_values(&json, gpu);
        for (t, values) in &rows {
            assert!(
                known.contains(&values[gpu]),
                "GPU {gpu} at {t}s: {} is a value of the fixture",
                values[gpu]
            );
        }
    }
    assert!(
        rows.windows(2).all(|w| w[0].0 < w[1].0),
        "time goes forward"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn duration_stops_by_itself_with_svg_and_ndjson() {
    let dir = out_dir("duration");
    let (nd, svg) = (dir.join("memory.ndjson"), dir.join("memory.svg"));
    let out = run(&[
        "record",
        "--demo",
        "--frame",
        "7",
        "--interval",
        "20ms",
        "--duration",
        "200ms",
        "--ndjson",
        nd.to_str().unwrap(),
        "--output",
        svg.to_str().unwrap(),
        "--summary",
        "gpulink",
    ]);
    cli::assert_ok(&out, "gpuscope");
    let text = std::fs::read_to_string(&svg).unwrap();
    let json = fixture_json();
    let name = json["devices"]["0"]["name"]["ok"].as_str().unwrap();
    for i in 0..8 {
        assert!(
            text.contains(&format!("GPU {i}: {name}")),
            "the legend names GPU {i}"
        );
    }
    // Frame 7 only: min and max are that frame's value, in gpulink's megabytes (10^6 bytes),
    // written as Python writes floats.
    let stdout = String::from_utf8(out.stdout).unwrap();
    let summaries: BTreeMap<usize, (f64, f64)> = stdout
        .lines()
        .map(|l| {
            let (_, i, min, max) = parse_gpulink_summary(l);
            assert!(l.matches("[MB]").count() == 2, "{l}");
            (i, (min, max))
        })
        .collect();
    let used = fixture_values(&json, 3)[7] as f64 / 1e6;
    assert_eq!(summaries[&3], (used, used));
    let lines: Vec<Value> = std::fs::read_to_string(&nd)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["metric"], "memory_used");
    // 200 ms at 20 ms: about ten samples, however busy the machine (ticks can be skipped).
    assert!(
        (2..=12).contains(&(lines.len() - 1)),
        "{} samples",
        lines.len() - 1
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_input_exits_2_and_says_what_is_wrong() {
    let cases: [(&[&str], &str); 6] = [
        (
            &["record", "--demo", "--output", "memory.jpg"],
            ".png or .svg",
        ),
        (
            &[
                "record",
                "--demo",
                "--metric",
                "memory_used,temperature",
                "--csv",
                "m.csv",
            ],
            "--csv and --ndjson write one metric; 2 were asked for",
        ),
        (
            &["record", "--demo", "--metric", "memory_used,speed"],
            "speed",
        ),
        (
            &["record", "--demo", "--interval", "0s"],
            "--interval <DURATION>': must be between 10ms and 1h",
        ),
        (&["record", "--demo", "--metric", "speed"], "unknown metric"),
        (
            &[
                "record",
                "--demo",
                "--output",
                "/nonexistent-gpuscope/m.png",
            ],
            "does not exist",
        ),
    ];
    for (args, says) in cases {
        cli::assert_usage_error(&run(args), args, says);
    }
}

/// Several metrics in one run: one summary line per device and metric, one panel per metric.
#[test]
fn several_metrics_in_one_run() {
    let dir = out_dir("metrics");
    let svg = dir.join("m.svg");
    let out = run(&[
        "record",
        "--demo",
        "--frame",
        "2",
        "--interval",
        "20ms",
        "--duration",
        "100ms",
        "--metric",
        "memory_used,gpu_utilization",
        "--metric",
        "temperature",
        "--output",
        svg.to_str().unwrap(),
    ]);
    cli::assert_ok(&out, "gpuscope");
    let stdout = String::from_utf8(out.stdout).unwrap();
    for metric in ["memory used", "gpu utilization", "temperature"] {
        let n = stdout
            .lines()
            .filter(|l| l.contains(&format!(" -> {metric}: ")))
            .count();
        assert_eq!(n, 8, "{metric}: {stdout}");
    }
    let text = std::fs::read_to_string(&svg).unwrap();
    for caption in ["Memory used", "GPU utilization", "Temperature"] {
        assert!(text.contains(&format!("\n{caption}\n</text>")), "{caption}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Files other than `keep` left in `dir` (a temporary plot would show here).
fn leftovers(dir: &Path, keep: &[&Path]) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !keep.contains(&p.as_path()))
        .collect()
}

/// On a full disk the CSV ended in a half-written line and no plot or summary was written,
/// even with `-o` on a healthy disk. Now: the plot is written, the summary printed, and the
/// command exits 1 saying which file failed.
#[test]
fn record_csv_on_a_full_disk_still_plots_and_summarises() {
    if !Path::new("/dev/full").exists() {
        eprintln!("skipped: no /dev/full on this system");
        return;
    }
    let dir = out_dir("devfull");
    let png = dir.join("memory.png");
    let out = run(&[
        "record",
        "--fixture",
        &fixture_path(),
        "--interval",
        "10ms",
        "--duration",
        "30s",
        "--csv",
        "/dev/full",
        "--output",
        png.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("recording stopped after 1 sample")
            && stderr.contains("cannot write /dev/full: No space left on device"),
        "{stderr}"
    );
    assert!(stderr.contains("plot saved to"), "{stderr}");
    assert!(is_png(&png), "the plot is written");
    assert_eq!(leftovers(&dir, &[&png]), Vec::<PathBuf>::new());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 8, "{stdout}");
    for line in stdout.lines() {
        let (_, _, min, mean, max) = parse_summary(line);
        assert_eq!((min, mean), (max, max), "one sample: {line}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// A CSV that hits a file size limit part-way through a line (as a full disk does) is cut back
/// to its last whole line; the plot, which cannot be written either, leaves no truncated or
/// temporary file; the summary still comes out. The limit is the shell's `ulimit -f` (no root
/// needed), with SIGXFSZ ignored so that writes fail with EFBIG instead of killing gpuscope.
#[test]
fn record_csv_cut_by_a_file_size_limit_ends_in_a_whole_line() {
    let dir = out_dir("fsize");
    let (csv, png) = (dir.join("memory.csv"), dir.join("memory.png"));
    let script = format!(
        "trap '' XFSZ; ulimit -f 1 || exit 97; exec '{}' record --fixture '{}' --interval 10ms \
         --duration 30s --csv '{}' --output '{}'",
        env!("CARGO_BIN_EXE_gpuscope"),
        fixture_path(),
        csv.display(),
        png.display()
    );
    let out = Command::new("sh")
        .args(["-c", &script])
        .env_remove("GPUSCOPE_FIXTURE")
        .env_remove("GPUSCOPE_NVML_LIB")
        .output()
        .expect("sh runs");
    if out.status.code() == Some(97) {
        eprintln!("skipped: this shell cannot set a file size limit");
        return;
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot write {}", csv.display())),
        "{stderr}"
    );
    assert!(stderr.contains("recording stopped after"), "{stderr}");
    let text = std::fs::read_to_string(&csv).unwrap();
    assert!(text.ends_with('\n'), "the last line is whole: {text:?}");
    let rows = csv_rows(&text);
    assert!(!rows.is_empty(), "{text}");
    // Every sample recorded is in the CSV but the one that did not fit.
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 8, "{stdout}");
    assert!(!png.exists(), "no truncated plot");
    assert_eq!(leftovers(&dir, &[&csv]), Vec::<PathBuf>::new());
    std::fs::remove_dir_all(&dir).ok();
}

/// `--csv` equal to `--ndjson` or `-o` was accepted, and the files overwrote each other.
#[test]
fn record_colliding_output_paths_exit_2_naming_both_options() {
    let dir = out_dir("collide");
    let a = dir.join("a.csv");
    let a_dot = dir.join(".").join("a.csv");
    let png = dir.join("memory.png");
    std::fs::write(&png, b"an earlier plot").unwrap();
    let link = dir.join("link.png");
    std::os::unix::fs::symlink(&png, &link).unwrap();
    fn text(p: &std::path::Path) -> &str {
        p.to_str().unwrap()
    }
    let (a_text, a_dot, png_text, link) = (text(&a), text(&a_dot), text(&png), text(&link));
    let cases = [
        (
            ["--csv", a_text, "--ndjson", a_dot],
            "--csv and --ndjson name the same file",
        ),
        (
            ["--csv", png_text, "--output", png_text],
            "--output and --csv name the same file",
        ),
        (
            ["--ndjson", link, "--output", png_text],
            "--output and --ndjson name the same file",
        ),
    ];
    for (args, says) in cases {
        cli::assert_usage_error(
            &run(&[&["record", "--demo", "--duration", "1s"][..], &args].concat()),
            args,
            says,
        );
    }
    assert!(!a.exists(), "refused before any file is created");
    assert_eq!(std::fs::read(&png).unwrap(), b"an earlier plot");
    std::fs::remove_dir_all(&dir).ok();
}

/// An existing plot or sample file is not replaced silently: exit 2 naming the option and the
/// path, the file untouched, until `--overwrite` says so.
#[test]
fn existing_outputs_are_refused_unless_overwrite() {
    let dir = out_dir("overwrite");
    let png = dir.join("memory.png");
    let csv = dir.join("memory.csv");
    let (png_s, csv_s) = (png.to_str().unwrap(), csv.to_str().unwrap());
    let record = |extra: &[&str]| {
        let mut args = vec![
            "record",
            "--demo",
            "--interval",
            "10ms",
            "--duration",
            "50ms",
            "--output",
            png_s,
            "--csv",
            csv_s,
        ];
        args.extend_from_slice(extra);
        run(&args)
    };
    for (existing, option) in [(&png, "--output"), (&csv, "--csv")] {
        std::fs::write(existing, "keep me").unwrap();
        let out = record(&[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains(&format!(
                "{option} {}: the file exists; --overwrite replaces it",
                existing.display()
            )),
            "{err}"
        );
        assert_eq!(std::fs::read_to_string(existing).unwrap(), "keep me");
        std::fs::remove_file(existing).unwrap();
    }
    std::fs::write(&png, "old").unwrap();
    std::fs::write(&csv, "old").unwrap();
    let out = record(&["--overwrite"]);
    cli::assert_ok(&out, "gpuscope");
    assert!(is_png(&png), "the plot is replaced");
    assert!(std::fs::read_to_string(&csv).unwrap().lines().count() > 1);
    std::fs::remove_dir_all(&dir).ok();
}

/// Runs `record` over `source` (its arguments) at one frame for a moment, into an SVG plot and
/// a CSV file in `dir`; returns (stdout, the plot's text, the CSV's header).
fn record_one_frame(dir: &Path, source: &[&str]) -> (String, String, String) {
    let (svg, csv) = (dir.join("m.svg"), dir.join("m.csv"));
    let mut args = vec!["record"];
    args.extend_from_slice(source);
    args.extend_from_slice(&[
        "--interval",
        "20ms",
        "--duration",
        "100ms",
        "--output",
        svg.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
    ]);
    let out = run(&args);
    cli::assert_ok(&out, "gpuscope");
    let csv = std::fs::read_to_string(&csv).unwrap();
    (
        String::from_utf8(out.stdout).unwrap(),
        std::fs::read_to_string(&svg).unwrap(),
        csv.lines().next().unwrap().to_string(),
    )
}

/// Issue 25: the summary was in MiB, the plot's axis in GiB. People's outputs (the summary and
/// the plot) now speak one unit, chosen from the largest memory recorded (the total): MiB below
/// 100 GiB (an H100's 80 GiB), GiB from there (an H200's 141 GiB); the CSV keeps bytes and
/// says so in its header.
#[test]
fn the_summary_and_the_plot_show_memory_in_one_unit() {
    for (source, unit, other) in [
        (&["--demo", "--frame", "7"][..], "MiB", "GiB"),
        (&["--demo", "h200-real", "--frame", "30"][..], "GiB", "MiB"),
    ] {
        let dir = out_dir(&format!("unit-{unit}"));
        let (stdout, svg, csv_header) = record_one_frame(&dir, source);
        assert!(!stdout.is_empty());
        for line in stdout.lines() {
            let (_, values) = line.split_once(" -> memory used: ").expect(line);
            assert_eq!(values.matches(unit).count(), 4, "{source:?}: {line}");
            assert!(!values.contains(other), "{source:?}: {line}");
        }
        assert!(svg.contains(&format!("({unit})")), "{source:?}: the axis");
        assert!(!svg.contains(&format!("({other})")), "{source:?}: the axis");
        // The dashed total is named as the summary names it.
        let first = stdout.lines().next().unwrap();
        let total = first
            .rsplit_once("(of ")
            .and_then(|(_, t)| t.strip_suffix(')'))
            .expect(first);
        assert!(
            svg.contains(&format!("total {total}")),
            "{source:?}: {total}"
        );
        assert!(csv_header.contains("memory_used (B)"), "{csv_header}");
        std::fs::remove_dir_all(&dir).ok();
    }
}

/// A recording over the MIG fixture records and plots each MIG device after its GPU: the
/// legend names each by its id (`GPU 0:1: ...`) and the summary has a line for each.
#[test]
fn a_recording_of_a_mig_gpu_plots_and_summarises_its_mig_devices() {
    let dir = out_dir("mig");
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/h100-mig.json");
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&fixture).unwrap()).unwrap();
    let (stdout, svg, csv_header) = record_one_frame(
        &dir,
        &["--fixture", fixture.to_str().unwrap(), "--frame", "10"],
    );
    let devices = json["devices"].as_object().unwrap();
    let migs: Vec<&String> = devices.keys().filter(|k| k.contains(':')).collect();
    assert!(migs.len() >= 2, "{migs:?}");
    assert_eq!(stdout.lines().count(), devices.len(), "{stdout}");
    for (id, d) in devices {
        let name = d["name"]["ok"].as_str().unwrap();
        assert!(
            svg.contains(&format!("GPU {id}: {name}")),
            "the legend names {id}"
        );
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("{name}[{id}] -> memory used: ")))
            .unwrap_or_else(|| panic!("no summary of {id}: {stdout}"));
        // A MIG device's memory is its own slice's, read in the recorded frame.
        let used = d.get("memory_info").map_or_else(
            || json["frames"][10]["devices"][id]["memory_info"]["ok"]["used"].as_u64(),
            |m| m["ok"]["used"].as_u64(),
        );
        let used = used.unwrap_or_else(|| panic!("{id}: memory used is recorded"));
        assert!(line.contains(&format!("max {}", mib_text(used))), "{line}");
        assert!(
            csv_header.contains(&format!("[{id}] memory_used")),
            "{csv_header}"
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Bytes as the human summary writes them in MiB.
fn mib_text(bytes: u64) -> String {
    format!("{}MiB", mib(bytes))
}

/// `record` in `dir` (its working folder) over one frame of the demo, for a moment.
fn record_in(dir: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "record",
        "--demo",
        "--frame",
        "3",
        "--interval",
        "20ms",
        "--duration",
        "100ms",
    ];
    args.extend_from_slice(extra);
    command(&args)
        .current_dir(dir)
        .output()
        .expect("gpuscope runs")
}

/// Issue 34: `record --csv m.csv` failed because a `memory.png` nobody named was there (a plot
/// was always written). A plot is written only when `--output` names it or no other output was
/// named: with `--csv` (or `--ndjson`) alone there is none, and an earlier `memory.png` is
/// left alone.
#[test]
fn record_csv_alone_writes_no_plot_and_ignores_an_existing_memory_png() {
    let dir = out_dir("csv-alone");
    let png = dir.join("memory.png");
    std::fs::write(&png, "an earlier plot").unwrap();
    for (option, file) in [("--csv", "m.csv"), ("--ndjson", "m.ndjson")] {
        let out = record_in(&dir, &[option, file]);
        cli::assert_ok(&out, option);
        assert!(
            std::fs::read_to_string(dir.join(file))
                .unwrap()
                .lines()
                .count()
                > 1,
            "{option}: samples written"
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("plot saved"), "{option}: {stderr}");
        assert_eq!(String::from_utf8(out.stdout).unwrap().lines().count(), 8);
    }
    assert_eq!(std::fs::read_to_string(&png).unwrap(), "an earlier plot");
    let written: Vec<PathBuf> = leftovers(&dir, &[&png, &dir.join("m.csv"), &dir.join("m.ndjson")]);
    assert_eq!(written, Vec::<PathBuf>::new(), "no plot, no temporary file");
    std::fs::remove_dir_all(&dir).ok();
}

/// With no output named, the plot is `memory.png`; when that exists (the same line run twice),
/// the next free `memory-N.png`, never a failure for a file nobody named. `--no-plot` writes
/// none.
#[test]
fn record_with_no_output_named_plots_to_the_first_free_memory_png() {
    let dir = out_dir("default-plot");
    let first = record_in(&dir, &[]);
    cli::assert_ok(&first, "first run");
    assert!(is_png(&dir.join("memory.png")), "memory.png written");
    let before = std::fs::read(dir.join("memory.png")).unwrap();
    let second = record_in(&dir, &[]);
    cli::assert_ok(&second, "second run");
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(stderr.contains("plot saved to memory-1.png"), "{stderr}");
    assert!(is_png(&dir.join("memory-1.png")));
    assert_eq!(std::fs::read(dir.join("memory.png")).unwrap(), before);
    let none = record_in(&dir, &["--no-plot"]);
    cli::assert_ok(&none, "--no-plot");
    assert!(
        !dir.join("memory-2.png").exists(),
        "--no-plot writes no plot"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// Issue 34: a missing folder was exit 1 for `--csv` and 2 for `--output`. A file named wrong
/// is exit 2, refused before anything is recorded, whichever option names it: a missing folder,
/// a directory.
#[test]
fn a_missing_folder_or_a_directory_is_exit_2_for_every_output() {
    let dir = out_dir("missing-folder");
    let d = dir.to_str().unwrap();
    for option in ["--csv", "--ndjson", "--output"] {
        let file = if option == "--output" {
            "m.png"
        } else {
            "m.txt"
        };
        let missing = format!("/nonexistent-gpuscope/{file}");
        let out = record_in(&dir, &[option, &missing]);
        cli::assert_usage_error(
            &out,
            option,
            &format!("{option} {missing}: the folder /nonexistent-gpuscope does not exist"),
        );
        let folder = dir.join(format!(
            "folder.{}",
            if option == "--output" { "png" } else { "csv" }
        ));
        std::fs::create_dir_all(&folder).unwrap();
        let out = record_in(&dir, &[option, folder.to_str().unwrap()]);
        cli::assert_usage_error(&out, option, "is a directory");
    }
    assert_eq!(
        leftovers(&dir, &[&dir.join("folder.png"), &dir.join("folder.csv")]),
        Vec::<PathBuf>::new(),
        "{d}: nothing written"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// gpulink's `-o memory.png` typed to `record`, where -o is --only, says what was meant.
#[test]
fn record_o_with_a_plot_name_points_at_output_and_the_gpulink_door() {
    let out = run(&["record", "--demo", "-o", "memory.png"]);
    cli::assert_usage_error(&out, "-o memory.png", "--output FILE");
    cli::assert_usage_error(&out, "-o memory.png", "gpuscope gpulink -o FILE");
}
