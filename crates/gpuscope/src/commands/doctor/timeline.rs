//! The timeline of one one-shot (issue 36): doctor runs a one-shot command (by default
//! `gpuscope snapshot --json`) as a child of this same program, with
//! `crate::timeline::REPORT_ENV` naming a file in a private directory of its own; the child
//! records its steps (the marks of `gpu_backend::timeline`) and writes them there once it has
//! printed. Doctor times what the child cannot see: from spawning it to its `main`
//! (`exec` and dynamic linking), and from its report to its exit; and reads the report as
//! hostile input: bounded in size and count, typed, every figure checked against the child's
//! own wall time. The result is a `gpu_backend::cost::OneshotTimeline`, in the report and in
//! `--json`'s cost profile.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::process::{Command, Stdio};
use std::time::Duration;

use gpu_backend::cost::{CpuClock, OneshotTimeline, TimelineStep};
use gpu_devices::text::Escaped;

use crate::source::SourceArgs;
use crate::timeline::{monotonic_ns, ChildReport, REPORT_ENV, REPORT_MAX_BYTES};

/// For tests: the program run as the one-shot instead of this one (a stand-in that hands back
/// a hostile report).
const ONESHOT_EXE_ENV: &str = "GPUSCOPE_DOCTOR_ONESHOT_EXE";

/// The command timed when `--timeline-of` does not name one.
pub const DEFAULT_COMMAND: &str = "snapshot --json";

/// `--timeline-of`'s value that times nothing.
pub const NONE: &str = "none";

/// The longest a timed one-shot may run before it is killed.
const ONESHOT_TIMEOUT: Duration = Duration::from_secs(60);

/// The most words `--timeline-of` takes.
const MAX_WORDS: usize = 32;

/// The most bytes of the child's stderr kept for a message.
const STDERR_KEPT: usize = 4096;

/// The longest thread name or device a report may hold.
const MAX_NAME: usize = 64;

/// The step doctor measures before the child's `main`: from `spawn` to `main`.
pub const PROCESS_START: &str = "exec and dynamic linking";
/// The step doctor measures after the child's report: until it has exited.
pub const EXIT: &str = "exit";

/// What the child ended with, as the parent saw it.
struct Ended {
    /// `CLOCK_MONOTONIC` when it had exited, nanoseconds.
    exit_ns: u64,
    /// Its exit status (`None`: a signal).
    code: Option<i32>,
    /// Its CPU time, all threads, from `wait4`'s resource usage, nanoseconds.
    cpu_ns: Option<u64>,
}

/// The commands `--timeline-of` may name: those that print once and end (not `doctor`, which
/// would time itself without end, nor the continuous `top`, `export`, `record`).
const ONE_SHOTS: [&str; 5] = ["snapshot", "info", "select", "stat", "smi"];

/// Checks `--timeline-of`'s value: `none`, or 1 to [`MAX_WORDS`] words naming a one-shot
/// command; the message says what is wrong.
pub fn check_command(command: &str) -> Result<(), String> {
    let words: Vec<&str> = command.split_whitespace().collect();
    if words == [NONE] {
        return Ok(());
    }
    if words.is_empty() || words.len() > MAX_WORDS {
        return Err(format!(
            "--timeline-of takes a gpuscope command of 1 to {MAX_WORDS} words, or `none`"
        ));
    }
    if !ONE_SHOTS.contains(&words[0]) {
        return Err(format!(
            "--timeline-of {}: not a one-shot command; it times one of {}",
            Escaped(words[0]),
            ONE_SHOTS.join(", ")
        ));
    }
    Ok(())
}

/// Times one one-shot: `command` (gpuscope's words, `snapshot --json`) run as a child over
/// the source `source` chose. `Ok(None)` when nothing is timed (`none`, or `--demo`, which
/// the child's environment cannot name); an error, for people, when it could not be timed.
pub fn measure(command: &str, source: &SourceArgs) -> Result<Option<OneshotTimeline>, String> {
    let words: Vec<&str> = command.split_whitespace().collect();
    if words == [NONE] {
        return Ok(None);
    }
    if source.demo.is_some() {
        return Ok(None);
    }
    check_command(command)?;
    let shown = format!("gpuscope {}", words.join(" "));
    let exe = std::env::var_os(ONESHOT_EXE_ENV)
        .filter(|v| !v.is_empty())
        .map(Ok)
        .unwrap_or_else(|| std::env::current_exe().map(OsString::from))
        .map_err(|e| format!("cannot tell where this program is: {e}"))?;
    // A private directory (mode 0700) of its own: no other user can put a report there.
    let dir = tempfile::Builder::new()
        .prefix("gpuscope-timeline-")
        .tempdir()
        .map_err(|e| format!("cannot make a private directory for the timeline: {e}"))?;
    let report_path = dir.path().join("report.json");
    let mut cmd = Command::new(&exe);
    cmd.args(&words)
        .env(REPORT_ENV, &report_path)
        // The one-shot as a user runs it: without the log, which would cost time of its own.
        .env_remove("GPUSCOPE_LOG")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // The source doctor was given, by the variables every command reads, so that any
    // command's grammar (nvidia-smi's too) takes it.
    for (var, value) in [
        ("GPUSCOPE_FIXTURE", &source.fixture),
        ("GPUSCOPE_NVML_LIB", &source.nvml_lib),
        ("GPUSCOPE_PROC_ROOT", &source.proc_root),
        ("GPUSCOPE_CONTAINER_LOGS", &source.container_logs),
    ] {
        if let Some(value) = value {
            cmd.env(var, value);
        }
    }
    let spawn_ns = monotonic_ns().ok_or("the monotonic clock cannot be read")?;
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot run `{shown}`: {e}"))?;
    let ended = wait(child)?;
    let ended = match ended {
        Some(ended) => ended,
        None => {
            return Err(format!(
                "`{shown}` did not end within {} s and was stopped",
                ONESHOT_TIMEOUT.as_secs()
            ))
        }
    };
    let (ended, stderr) = ended;
    let bytes = match gpu_backend::files::read_regular(&report_path, REPORT_MAX_BYTES) {
        Ok(bytes) => bytes,
        Err(e) if !is_not_found(&e) => {
            return Err(format!("the timeline report `{shown}` handed back {e}"))
        }
        Err(_) => {
            let why = stderr.lines().next().unwrap_or("").trim().to_string();
            return Err(format!(
                "`{shown}` left no timeline report; it {}{}",
                match ended.code {
                    Some(code) => format!("exited with {code}"),
                    None => "was ended by a signal".to_string(),
                },
                if why.is_empty() {
                    String::new()
                } else {
                    format!(": {}", Escaped(&why))
                }
            ));
        }
    };
    let report: ChildReport = serde_json::from_slice(&bytes)
        .map_err(|e| format!("the timeline `{shown}` handed back is not valid: {e}"))?;
    timeline(shown.clone(), &report, spawn_ns, &ended)
        .map(Some)
        .map_err(|e| format!("the timeline `{shown}` handed back is not valid: {e}"))
}

/// Whether the child wrote no report at all.
fn is_not_found(e: &gpu_backend::files::FileError) -> bool {
    matches!(e, gpu_backend::files::FileError::Io(io) if io.kind() == std::io::ErrorKind::NotFound)
}

/// Waits for `child` to exit (at most [`ONESHOT_TIMEOUT`]; then it is killed and `None`
/// comes back), draining its stdout (the output is not doctor's) and keeping the start of its
/// stderr.
fn wait(mut child: std::process::Child) -> Result<Option<(Ended, String)>, String> {
    let out = drain(child.stdout.take(), 0);
    let err = drain(child.stderr.take(), STDERR_KEPT);
    let pid = libc::pid_t::try_from(child.id()).map_err(|e| e.to_string())?;
    // The exit is seen without reaping the child (WNOWAIT), so that it can still be killed
    // safely on a timeout: its PID cannot be anyone else's before it is reaped.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // SAFETY: a zeroed siginfo_t is a valid out-parameter.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        loop {
            // SAFETY: waits for our own child; `info` is writable.
            let rc = unsafe {
                libc::waitid(
                    libc::P_PID,
                    pid as libc::id_t,
                    &mut info,
                    libc::WEXITED | libc::WNOWAIT,
                )
            };
            if rc == 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
            {
                break;
            }
        }
        let _ = tx.send(monotonic_ns());
    });
    let exit_ns = match rx.recv_timeout(ONESHOT_TIMEOUT) {
        Ok(ns) => ns,
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
    };
    // Reaped now, with its resource usage: the CPU time of every thread it had.
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid out-parameter.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: our own child, which has exited and is not reaped yet.
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let code = (rc == pid && libc::WIFEXITED(status)).then(|| libc::WEXITSTATUS(status));
    let tv_ns = |tv: libc::timeval| -> Option<u64> {
        let s = u64::try_from(tv.tv_sec).ok()?;
        let us = u64::try_from(tv.tv_usec).ok()?;
        Some(s * 1_000_000_000 + us * 1000)
    };
    let cpu_ns = if rc == pid {
        tv_ns(usage.ru_utime)
            .zip(tv_ns(usage.ru_stime))
            .map(|(u, s)| u + s)
    } else {
        None
    };
    let _ = out.join();
    let stderr = err.join().unwrap_or_default();
    let exit_ns = exit_ns.ok_or("the monotonic clock cannot be read")?;
    Ok(Some((
        Ended {
            exit_ns,
            code,
            cpu_ns,
        },
        String::from_utf8_lossy(&stderr).into_owned(),
    )))
}

/// Reads `pipe` to its end on a thread of its own (a child blocked on a full pipe would never
/// exit), keeping its first `keep` bytes.
fn drain<R: std::io::Read + Send + 'static>(
    pipe: Option<R>,
    keep: usize,
) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let Some(mut pipe) = pipe else {
            return kept;
        };
        let mut buf = [0u8; 16 * 1024];
        loop {
            match pipe.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let room = keep.saturating_sub(kept.len());
                    kept.extend_from_slice(&buf[..n.min(room)]);
                }
            }
        }
        kept
    })
}

/// Nanoseconds to microseconds, to the nanosecond.
fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// The timeline from the child's report and the parent's readings, every figure checked: the
/// clock readings in order (spawn, main, report, exit), each step a known one that starts and
/// ends within the child's run, on a thread and a device of a sane name, with CPU time at most
/// its wall time; at most `gpu_backend::timeline::STEPS_MAX` steps. An error says what was
/// wrong, where.
fn timeline(
    command: String,
    report: &ChildReport,
    spawn_ns: u64,
    ended: &Ended,
) -> Result<OneshotTimeline, String> {
    if report.steps.len() > gpu_backend::timeline::STEPS_MAX {
        return Err(format!(
            "{} steps, more than the {} a one-shot takes",
            report.steps.len(),
            gpu_backend::timeline::STEPS_MAX
        ));
    }
    if !(spawn_ns <= report.main_ns
        && report.main_ns <= report.end_ns
        && report.end_ns <= ended.exit_ns)
    {
        return Err(
            "its clock readings are out of order (spawned, main, report, exit)".to_string(),
        );
    }
    let before_main = report.main_ns - spawn_ns;
    let in_main = report.end_ns - report.main_ns;
    let mut steps = vec![TimelineStep {
        step: PROCESS_START.to_string(),
        device: None,
        thread: "main".to_string(),
        start_us: 0.0,
        wall_us: us(before_main),
        cpu_us: report.main_cpu_ns.map(us),
        cpu_clock: CpuClock::Process,
        parallel: false,
    }];
    for (i, s) in report.steps.iter().enumerate() {
        let at = |what: String| format!("step {} ({}): {what}", i + 1, Escaped(&s.step));
        if !gpu_backend::timeline::STEPS.contains(&s.step.as_str()) {
            return Err(at("not a step a one-shot takes".into()));
        }
        let name_ok = |n: &str| n.len() <= MAX_NAME && !n.chars().any(char::is_control);
        if !name_ok(&s.thread) || s.thread.is_empty() {
            return Err(at("its thread's name is empty, too long or not text".into()));
        }
        if let Some(d) = &s.device {
            if d.is_empty()
                || d.len() > MAX_NAME
                || !d.chars().all(|c| c.is_ascii_digit() || c == ':')
            {
                return Err(at(format!("`{}` is not a device", Escaped(d))));
            }
        }
        let end = s.start_ns.checked_add(s.wall_ns);
        if end.is_none_or(|end| end > in_main) {
            return Err(at("it ends after the one-shot's report".into()));
        }
        if s.cpu_ns.is_some_and(|c| c > s.wall_ns) {
            return Err(at("more CPU time than wall time on one thread".into()));
        }
        steps.push(TimelineStep {
            step: s.step.clone(),
            device: s.device.clone(),
            thread: s.thread.clone(),
            start_us: us(before_main + s.start_ns),
            wall_us: us(s.wall_ns),
            cpu_us: s.cpu_ns.map(us),
            cpu_clock: CpuClock::Thread,
            parallel: false,
        });
    }
    steps.push(TimelineStep {
        step: EXIT.to_string(),
        device: None,
        thread: "main".to_string(),
        start_us: us(report.end_ns - spawn_ns),
        wall_us: us(ended.exit_ns - report.end_ns),
        cpu_us: ended
            .cpu_ns
            .zip(report.end_cpu_ns)
            .map(|(all, before)| us(all.saturating_sub(before))),
        cpu_clock: CpuClock::Process,
        parallel: false,
    });
    steps.sort_by(|a, b| a.start_us.total_cmp(&b.start_us));
    mark_parallel(&mut steps);
    let wall_us = us(ended.exit_ns - spawn_ns);
    let covered = covered_us(&steps);
    Ok(OneshotTimeline {
        command,
        exit_code: ended.code,
        wall_us,
        cpu_us: ended.cpu_ns.map(us),
        unaccounted_us: ((wall_us - covered).max(0.0) * 1000.0).round() / 1000.0,
        steps,
    })
}

/// Marks each step that overlaps a step of another thread.
fn mark_parallel(steps: &mut [TimelineStep]) {
    let spans: Vec<(f64, f64, String)> = steps
        .iter()
        .map(|s| (s.start_us, s.start_us + s.wall_us, s.thread.clone()))
        .collect();
    for (i, s) in steps.iter_mut().enumerate() {
        let (a0, a1, thread) = &spans[i];
        s.parallel = spans
            .iter()
            .any(|(b0, b1, t)| t != thread && b0 < a1 && a0 < b1);
    }
}

/// How much of the run the steps cover together (their union).
fn covered_us(steps: &[TimelineStep]) -> f64 {
    let mut spans: Vec<(f64, f64)> = steps
        .iter()
        .map(|s| (s.start_us, s.start_us + s.wall_us))
        .collect();
    spans.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut total = 0.0;
    let mut current: Option<(f64, f64)> = None;
    for (a, b) in spans {
        current = match current {
            Some((c0, c1)) if a <= c1 => Some((c0, c1.max(b))),
            Some((c0, c1)) => {
                total += c1 - c0;
                Some((a, b))
            }
            None => Some((a, b)),
        };
    }
    if let Some((c0, c1)) = current {
        total += c1 - c0;
    }
    total
}

/// How deep a step is, for the indent: how many steps of its own thread hold it, one more
/// for a step of a thread other than `main` (it runs within the step of `main` that started
/// its thread; which one, time alone cannot say).
fn depth(steps: &[TimelineStep], i: usize) -> usize {
    let s = &steps[i];
    let (a0, a1) = (s.start_us, s.start_us + s.wall_us);
    let own = steps
        .iter()
        .enumerate()
        .filter(|&(j, o)| {
            let (b0, b1) = (o.start_us, o.start_us + o.wall_us);
            o.thread == s.thread && j != i && b0 <= a0 && a1 <= b1 && (b1 - b0 > a1 - a0 || j < i)
        })
        .count();
    own + usize::from(s.thread != "main")
}

/// The "One-shot timeline" section of the report.
pub fn render(out: &mut String, timeline: &Result<Option<OneshotTimeline>, String>) {
    let t = match timeline {
        Ok(Some(t)) => t,
        Ok(None) => {
            out.push_str(
                "\nOne-shot timeline: not measured (--timeline-of none, or a replay of --demo)\n",
            );
            return;
        }
        Err(e) => {
            let _ = writeln!(out, "\nOne-shot timeline: not measured: {}", Escaped(e));
            return;
        }
    };
    let ms = |us: f64| us / 1000.0;
    let cpu = |c: Option<f64>| c.map_or_else(|| "-".to_string(), |c| format!("{:.3}", ms(c)));
    let _ = writeln!(
        out,
        "\nOne-shot timeline (`{}` run by doctor: {:.3} ms, CPU {} ms, {}; ms after it was \
         spawned)",
        Escaped(&t.command),
        ms(t.wall_us),
        cpu(t.cpu_us),
        match t.exit_code {
            Some(c) => format!("exit {c}"),
            None => "ended by a signal".to_string(),
        }
    );
    let _ = writeln!(
        out,
        "  {:>9} {:>9} {:>9}  {:<10} STEP",
        "AT ms", "WALL ms", "CPU ms", "THREAD"
    );
    for (i, s) in t.steps.iter().enumerate() {
        let mut name = "  ".repeat(depth(&t.steps, i));
        name.push_str(&Escaped(&s.step).to_string());
        if let Some(d) = &s.device {
            let _ = write!(name, " {}", Escaped(d));
        }
        if s.cpu_clock == CpuClock::Process {
            name.push_str(" (CPU: the process's)");
        }
        if s.parallel {
            name.push_str("  [parallel]");
        }
        let _ = writeln!(
            out,
            "  {:>9.3} {:>9.3} {:>9}  {:<10} {name}",
            ms(s.start_us),
            ms(s.wall_us),
            cpu(s.cpu_us),
            Escaped(&s.thread).to_string(),
        );
    }
    let _ = writeln!(
        out,
        "  {:>9} {:>9.3} {:>9}  {:<10} unaccounted (no step)",
        "",
        ms(t.unaccounted_us),
        "",
        ""
    );
}

/// The verdict's line: how long the one-shot took and its longest steps.
pub fn summary(t: &OneshotTimeline) -> String {
    // The steps no other holds, longest first: where the time went.
    let mut top: Vec<&TimelineStep> = t
        .steps
        .iter()
        .enumerate()
        .filter(|&(i, _)| depth(&t.steps, i) == 0)
        .map(|(_, s)| s)
        .collect();
    top.sort_by(|a, b| b.wall_us.total_cmp(&a.wall_us));
    let longest: Vec<String> = top
        .iter()
        .take(3)
        .map(|s| format!("{} {:.1} ms", s.step, s.wall_us / 1000.0))
        .collect();
    format!(
        "`{}` took {:.1} ms: {}",
        Escaped(&t.command),
        t.wall_us / 1000.0,
        longest.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::ChildStep;
    use proptest::prelude::*;

    fn step(name: &str, thread: &str, start_ns: u64, wall_ns: u64) -> ChildStep {
        ChildStep {
            step: name.into(),
            device: None,
            thread: thread.into(),
            start_ns,
            wall_ns,
            cpu_ns: Some(wall_ns / 2),
        }
    }

    fn report(steps: Vec<ChildStep>) -> ChildReport {
        ChildReport {
            main_ns: 2_000_000,
            main_cpu_ns: Some(500_000),
            end_ns: 12_000_000,
            end_cpu_ns: Some(6_000_000),
            steps,
        }
    }

    const ENDED: Ended = Ended {
        exit_ns: 13_000_000,
        code: Some(0),
        cpu_ns: Some(7_000_000),
    };

    #[test]
    fn the_steps_the_parent_measures_frame_the_childs_and_parallel_ones_are_marked() {
        let r = report(vec![
            step("nvmlInit", "main", 1_000_000, 3_000_000),
            step("refresh", "main", 4_000_000, 4_000_000),
            step("refresh device", "main", 4_100_000, 3_000_000),
            step("refresh device", "thread 1", 4_200_000, 3_500_000),
        ]);
        let t = timeline("gpuscope snapshot".into(), &r, 1_000_000, &ENDED).unwrap();
        let names: Vec<_> = t.steps.iter().map(|s| s.step.as_str()).collect();
        assert_eq!(
            names,
            [
                PROCESS_START,
                "nvmlInit",
                "refresh",
                "refresh device",
                "refresh device",
                EXIT
            ]
        );
        assert_eq!(t.steps[0].wall_us, 1000.0);
        assert_eq!(t.steps[1].start_us, 2000.0);
        assert_eq!(t.steps[5].cpu_us, Some(1000.0));
        let parallel: Vec<_> = t.steps.iter().map(|s| s.parallel).collect();
        assert_eq!(parallel, [false, false, true, true, true, false]);
        assert_eq!(t.wall_us, 12_000.0);
        // Covered: 0-1 ms (exec), 2-5 (nvmlInit), 5-9 (the refresh, its devices within), 11-12
        // (exit); the rest, 12 - 1 - 3 - 4 - 1 = 3 ms, unaccounted.
        assert!(
            (t.unaccounted_us - 3000.0).abs() < 1e-6,
            "{}",
            t.unaccounted_us
        );
        let mut text = String::new();
        render(&mut text, &Ok(Some(t.clone())));
        // The devices' steps are indented under the refresh that holds them.
        assert!(
            text.contains(" thread 1     refresh device  [parallel]"),
            "{text}"
        );
        assert!(text.contains("unaccounted"), "{text}");
        assert!(summary(&t).starts_with("`gpuscope snapshot` took 12.0 ms: "));
    }

    #[test]
    fn a_report_out_of_bounds_is_an_error_that_says_where() {
        let cases: Vec<(ChildReport, &str)> = vec![
            (report(vec![step("rm -rf", "main", 0, 1)]), "not a step"),
            (
                report(vec![step("refresh", "main", 9_000_000, 2_000_000)]),
                "ends after",
            ),
            (
                report(vec![step("refresh", "main", u64::MAX, u64::MAX)]),
                "ends after",
            ),
            (report(vec![step("refresh", "a\u{1b}[2J", 0, 1)]), "thread"),
            (
                report(vec![ChildStep {
                    cpu_ns: Some(10),
                    ..step("refresh", "main", 0, 5)
                }]),
                "more CPU",
            ),
            (
                report(vec![ChildStep {
                    device: Some("0; rm".into()),
                    ..step("open device", "main", 0, 5)
                }]),
                "not a device",
            ),
            (
                ChildReport {
                    main_ns: 0,
                    ..report(vec![])
                },
                "out of order",
            ),
            (
                report(vec![
                    step("refresh", "main", 0, 1);
                    gpu_backend::timeline::STEPS_MAX + 1
                ]),
                "steps, more than",
            ),
        ];
        for (r, expected) in cases {
            let e = timeline("x".into(), &r, 1_000_000, &ENDED).unwrap_err();
            assert!(e.contains(expected), "{e}");
        }
    }

    proptest! {
        /// Whatever the child hands back, the parser answers a timeline or an error.
        #[test]
        fn any_bytes_parse_to_a_timeline_or_an_error(text in ".{0,300}") {
            if let Ok(r) = serde_json::from_str::<ChildReport>(&text) {
                let _ = timeline("x".into(), &r, 0, &ENDED);
            }
        }

        #[test]
        fn any_figures_give_a_timeline_or_an_error(
            main in any::<u64>(), end in any::<u64>(), start in any::<u64>(), wall in any::<u64>(),
        ) {
            let r = ChildReport { main_ns: main, end_ns: end, ..report(vec![step("refresh", "main", start, wall)]) };
            if let Ok(t) = timeline("x".into(), &r, 0, &Ended { exit_ns: u64::MAX, ..ENDED }) {
                prop_assert!(t.steps.iter().all(|s| s.wall_us >= 0.0 && s.start_us + s.wall_us <= t.wall_us * (1.0 + 1e-12) + 1e-3));
            }
        }
    }
}
