//! `cargo xtask bench-viewer`: what the interactive viewers cost while they sit on screen,
//! `gpuscope top --interval 1s` beside `nvitop --interval 1`.
//!
//! Each runs alone in its own tmux server at 200x60, over the same NVML: fake-nvml serving a
//! recording on the wall clock (looping), each NVML call costing what it cost on a real H100
//! (`--costs`, default fixtures/costs/h100-load.json, as `GPUSCOPE_FAKE_NVML_COSTS`); or, with
//! `--real`, this machine's own driver. After a warm-up, its CPU over `--window` (utime + stime
//! from `/proc/PID/stat`, as % of one core) and by thread (`/proc/PID/task/*/stat`).
//!
//! Two phases from the fixture (default fixtures/h100-real.json, the real H100's recording):
//! **idle**, the longest run of frames in which no GPU has a process; **loaded**, the longest
//! run in which one has (on the real recording its jobs, with clock events flowing). Each is cut
//! into a fixture of its own (its times and samples as recorded), its GPU PIDs replaced by live
//! `sleep` processes. A fixture with no such run skips that phase (fixtures/h100-sxm-8gpu.json
//! has processes in every frame: loaded only).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use gpu_backend::{Answer, Fixture};

use crate::bench_setup::{self, SourceArgs};
use crate::live;

/// Command-line arguments.
#[derive(clap::Args)]
pub struct Args {
    /// How long each viewer's CPU is measured, per phase.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    window: Duration,
    /// How long each viewer runs before it is measured.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    warmup: Duration,
    /// The recording to cut the phases from: fixtures/h100-real.json (the real H100, 1 GPU,
    /// idle then two jobs) or fixtures/h100-sxm-8gpu.json (8 GPUs, loaded only).
    #[arg(long, default_value = "fixtures/h100-real.json")]
    fixture: PathBuf,
    /// The phases to run.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Phase::Idle, Phase::Loaded])]
    phases: Vec<Phase>,
    /// Skip nvitop.
    #[arg(long)]
    no_peer: bool,
    /// Measure each phase this many times (the viewers one after another in each round), for
    /// a target that must hold in every run.
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// A second gpuscope build (e.g. main's, for "before") measured in the same rounds.
    #[arg(long, value_name = "PATH")]
    baseline_bin: Option<PathBuf>,
    /// Where the library and the cut fixtures go (default:
    /// `<target dir>/bench-viewer`). The virtualenv is `<target dir>/bench-venv`, kept.
    #[arg(long, value_name = "DIR")]
    work_dir: Option<PathBuf>,
    #[command(flatten)]
    source: SourceArgs,
}

/// A phase of the recording.
#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
pub enum Phase {
    /// Frames where no GPU has a process.
    Idle,
    /// Frames where a GPU has one.
    Loaded,
}

/// What one viewer used over the window.
struct Measured {
    cpu: f64,
    threads: Vec<(String, f64)>,
    rss_mib: f64,
}

/// Runs the benchmark and prints a markdown table.
pub fn run(args: Args) -> Result<()> {
    ensure!(!args.window.is_zero(), "--window must be above 0");
    ensure!(!args.phases.is_empty(), "--phases names none");
    ensure!(args.rounds > 0, "--rounds must be at least 1");
    if let Some(b) = &args.baseline_bin {
        ensure!(b.is_file(), "--baseline-bin {}: no such file", b.display());
    }
    let work = args
        .work_dir
        .clone()
        .unwrap_or_else(|| bench_setup::target_dir().join("bench-viewer"));
    std::fs::create_dir_all(&work).with_context(|| format!("cannot create {}", work.display()))?;
    let gpuscope = args.source.gpuscope()?;
    let venv = bench_setup::target_dir().join("bench-venv");
    if !args.no_peer {
        args.source.venv(&venv)?;
    }

    let mut rows: Vec<(String, String, Measured)> = Vec::new();
    let builds: Vec<(&str, &Path)> = std::iter::once(("", gpuscope.as_path()))
        .chain(
            args.baseline_bin
                .iter()
                .map(|b| (" (baseline)", b.as_path())),
        )
        .collect();
    let phases: Vec<Option<Phase>> = if args.source.real {
        vec![None]
    } else {
        args.phases.iter().copied().map(Some).collect()
    };
    let mut notes = Vec::new();
    let mut header: Option<String> = None;
    for phase in phases {
        let (label, cut, alive) = match phase {
            None => ("as it is".to_string(), None, None),
            Some(p) => {
                let f = Fixture::load(bench_setup::in_root(&args.fixture))?;
                let Some((range, mut cut)) = cut_phase(&f, p) else {
                    notes.push(format!(
                        "{} has no {p:?} frames: phase skipped",
                        args.fixture.display()
                    ));
                    continue;
                };
                let alive = live::LiveProcesses::spawn(live::gpu_pids(&cut).len())?;
                live::adopt_pids(&mut cut, &alive.pids())?;
                let path = work.join(format!("viewer-{p:?}.json").to_lowercase());
                std::fs::write(&path, cut.to_json_pretty())
                    .with_context(|| format!("cannot write {}", path.display()))?;
                let label = format!(
                    "{} (frames {}-{}, {} GPU processes)",
                    format!("{p:?}").to_lowercase(),
                    range.start,
                    range.end - 1,
                    alive.pids().len()
                );
                (label, Some((path, cut)), Some(alive))
            }
        };
        let nvml = args
            .source
            .nvml(&work, cut.as_ref().map(|(p, _)| p.as_path()), None)?;
        let mut top_args: Vec<OsString> = vec!["top".into(), "--interval".into(), "1s".into()];
        top_args.extend(nvml.gpuscope_args());
        for round in 1..=args.rounds {
            let label = if args.rounds > 1 {
                format!("{label}, run {round}")
            } else {
                label.clone()
            };
            for &(build, program) in &builds {
                let m = in_tmux(program, &top_args, &nvml.env, &args, "gpuscope top", &work)
                    .context("gpuscope top")?;
                rows.push((
                    label.clone(),
                    format!("`gpuscope top --interval 1s`{build}"),
                    m,
                ));
            }
            if !args.no_peer {
                let nvitop_args: Vec<OsString> = vec!["--interval".into(), "1".into()];
                let m = in_tmux(
                    &venv.join("bin/nvitop"),
                    &nvitop_args,
                    &nvml.env,
                    &args,
                    "NVITOP",
                    &work,
                )
                .context("nvitop")?;
                rows.push((label, "`nvitop --interval 1`".into(), m));
            }
        }
        drop(alive);
        if header.is_none() {
            header =
                Some(format!(
                "Viewers in tmux at 200x60 over {}, NVML call costs: {}; {} s each after a {} s \
                 warm-up; {}, commit {}\n",
                if args.source.real {
                    "this machine's real NVML".to_string()
                } else {
                    format!("fake-nvml replaying {} on the wall clock", args.fixture.display())
                },
                nvml.costs,
                args.window.as_secs_f64(),
                args.warmup.as_secs_f64(),
                crate::bench_oneshot::machine(),
                bench_setup::commit()
            ));
        }
    }
    if let Some(h) = header {
        println!("{h}");
    }
    println!("| phase | viewer | CPU, % of one core | gpuscope / this | by thread | RSS |");
    println!("|---|---|---|---|---|---|");
    let mut base = f64::NAN;
    for (phase, viewer, m) in &rows {
        if viewer.contains("gpuscope") && !viewer.contains("(baseline)") {
            base = m.cpu;
        }
        println!(
            "| {phase} | {viewer} | {:.2}% | {:.2}x | {} | {:.1} MiB |",
            m.cpu,
            base / m.cpu.max(1e-6),
            bench_setup::threads_text(&m.threads, 4),
            m.rss_mib
        );
    }
    if !args.no_peer {
        println!();
        println!("{}", against_nvitop(&rows));
    }
    for n in notes {
        println!("\n{n}");
    }
    Ok(())
}

/// Each gpuscope build against nvitop in the same phase and run, with issue 36's target (at
/// most a third of nvitop's CPU, in every run).
fn against_nvitop(rows: &[(String, String, Measured)]) -> String {
    let mut s = String::from(
        "| phase | viewer | gpuscope / nvitop, CPU | target: at most 1/3 |\n|---|---|---|---|",
    );
    for (phase, viewer, m) in rows.iter().filter(|(_, v, _)| v.contains("gpuscope")) {
        let Some((_, _, peer)) = rows
            .iter()
            .find(|(p, v, _)| p == phase && v.contains("nvitop"))
        else {
            continue;
        };
        let ratio = m.cpu / peer.cpu.max(1e-6);
        s += &format!(
            "\n| {phase} | {viewer} | {ratio:.2}x | {} |",
            if ratio <= 1.0 / 3.0 { "met" } else { "MISSED" }
        );
    }
    s
}

/// Whether any GPU of the frame has a process.
fn has_processes(frame: &gpu_backend::fixture::Frame) -> bool {
    frame.devices.values().any(|d| {
        [&d.compute_processes, &d.graphics_processes]
            .iter()
            .any(|l| matches!(l, Answer::Ok(ps) if !ps.is_empty()))
    })
}

/// The longest run of frames of the phase, cut into a fixture of its own: times from 0, and
/// the recording's start moved to the run's first frame, so that its samples and events keep
/// their times relative to the frames.
fn cut_phase(f: &Fixture, phase: Phase) -> Option<(std::ops::Range<usize>, Fixture)> {
    let want = phase == Phase::Loaded;
    let mut best: Option<std::ops::Range<usize>> = None;
    let mut start = None;
    for i in 0..=f.frames.len() {
        let inside = f.frames.get(i).is_some_and(|fr| has_processes(fr) == want);
        match (inside, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                if best.as_ref().is_none_or(|b| i - s > b.len()) {
                    best = Some(s..i);
                }
                start = None;
            }
            _ => {}
        }
    }
    let range = best?;
    // Two frames at least, so that the wall clock moves through something.
    if range.len() < 2 {
        return None;
    }
    let mut cut = f.clone();
    let t0 = f.frames[range.start].t_ms;
    cut.frames = f.frames[range.clone()].to_vec();
    for fr in &mut cut.frames {
        fr.t_ms -= t0;
    }
    // Only the host facts of processes alive in the cut.
    let alive: std::collections::BTreeSet<u32> = cut
        .frames
        .iter()
        .flat_map(|fr| fr.host.processes.keys().copied())
        .collect();
    cut.host.processes.retain(|pid, _| alive.contains(pid));
    if let Some(start_us) = gpu_backend::replay::recording_start_us(f) {
        let at = std::time::UNIX_EPOCH
            + Duration::from_micros(start_us.saturating_add(t0.saturating_mul(1000)));
        cut.meta.recorded_at = Some(humantime::format_rfc3339_millis(at).to_string());
    }
    Some((range, cut))
}

/// Single-quotes a word for the shell.
fn quote(s: &std::ffi::OsStr) -> String {
    format!("'{}'", s.to_string_lossy().replace('\'', "'\\''"))
}

/// Runs `program args` alone in a tmux server of its own at 200x60, with `env`; after the
/// warm-up checks that its screen shows `expect` (its title: it is up and showing GPUs) and
/// measures its CPU over the window.
fn in_tmux(
    program: &Path,
    args: &[OsString],
    env: &[(&str, OsString)],
    bench: &Args,
    expect: &str,
    work: &Path,
) -> Result<Measured> {
    // A server of its own each time: a new one on the socket of one just killed can fail.
    static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let socket = format!("gpuscope-bench-viewer-{}-{run}", std::process::id());
    let tmux = |a: &[&str]| -> Result<std::process::Output> {
        Command::new("tmux")
            .args(["-L", &socket, "-f", "/dev/null"])
            .args(a)
            .stdin(Stdio::null())
            .output()
            .context("cannot run tmux (is it installed?)")
    };
    let mut line = String::from("exec env");
    for (k, v) in env {
        line += &format!(" {k}={}", quote(v));
    }
    line += &format!(" {}", quote(program.as_os_str()));
    for a in args {
        line += &format!(" {}", quote(a));
    }
    // Its error output (not its screen) to a file, to show if it ends early.
    let name = program
        .file_name()
        .map_or("viewer".into(), |n| n.to_string_lossy().into_owned());
    let stderr = work.join(format!("{name}.stderr.txt"));
    line += &format!(" 2>{}", quote(stderr.as_os_str()));
    let out = tmux(&[
        "new-session",
        "-d",
        "-s",
        "bench",
        "-x",
        "200",
        "-y",
        "60",
        &line,
    ])?;
    ensure!(
        out.status.success(),
        "tmux new-session failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result = (|| -> Result<Measured> {
        let out = tmux(&["display-message", "-p", "-t", "bench", "#{pane_pid}"])?;
        let pid: u32 = String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .with_context(|| {
                format!(
                    "{} ended at once; its error output:\n{}",
                    program.display(),
                    std::fs::read_to_string(&stderr).unwrap_or_default()
                )
            })?;
        std::thread::sleep(bench.warmup);
        let screen = tmux(&["capture-pane", "-p", "-t", "bench"])
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let _ = std::fs::write(work.join(format!("{name}.screen.txt")), &screen);
        if !Path::new(&format!("/proc/{pid}")).exists() {
            bail!(
                "{} exited during the warm-up; its error output:\n{}",
                program.display(),
                std::fs::read_to_string(&stderr).unwrap_or_default()
            );
        }
        ensure!(
            screen.contains(expect),
            "{} does not show {expect:?} after the warm-up; its screen:\n{screen}",
            program.display()
        );
        let a = bench_setup::cpu_sample(pid)?;
        let t0 = Instant::now();
        std::thread::sleep(bench.window);
        let b = bench_setup::cpu_sample(pid)?;
        let (cpu, threads) = bench_setup::cpu_share(&a, &b, t0.elapsed().as_secs_f64());
        let rss_mib = bench_setup::status_kib(pid, "VmRSS").map_or(f64::NAN, |k| k as f64 / 1024.0);
        Ok(Measured {
            cpu,
            threads,
            rss_mib,
        })
    })();
    let _ = tmux(&["kill-server"]);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_real_recording_cuts_into_an_idle_and_a_loaded_run_with_their_times_kept() {
        let f = Fixture::load(bench_setup::root().join("fixtures/h100-real.json")).unwrap();
        let start = gpu_backend::replay::recording_start_us(&f).unwrap();
        for phase in [Phase::Idle, Phase::Loaded] {
            let (range, cut) = cut_phase(&f, phase).unwrap();
            assert!(range.len() >= 10, "{phase:?}: {range:?}");
            assert_eq!(cut.frames.len(), range.len());
            assert!(cut
                .frames
                .iter()
                .all(|fr| has_processes(fr) == (phase == Phase::Loaded)));
            // Frames before and after the run are of the other kind (or none).
            for i in [range.start.checked_sub(1), Some(range.end)]
                .into_iter()
                .flatten()
            {
                if let Some(fr) = f.frames.get(i) {
                    assert_ne!(has_processes(fr), phase == Phase::Loaded, "{phase:?} {i}");
                }
            }
            assert_eq!(cut.frames[0].t_ms, 0);
            // It is a fixture fake-nvml serves.
            let back = Fixture::from_json_str(&cut.to_json_pretty(), "cut")
                .unwrap_or_else(|e| panic!("{phase:?}: {e}"));
            assert_eq!(back.frames.len(), range.len());
            let t0 = f.frames[range.start].t_ms;
            let cut_start = gpu_backend::replay::recording_start_us(&cut).unwrap();
            // The cut starts where its first frame was recorded (to the millisecond).
            let want = start + t0 * 1000;
            assert!(
                cut_start.abs_diff(want) < 1000,
                "{phase:?}: {cut_start} vs {want}"
            );
        }
        // The 8-GPU scenario has processes in every frame: no idle run.
        let eight = Fixture::load(bench_setup::root().join("fixtures/h100-sxm-8gpu.json")).unwrap();
        assert!(cut_phase(&eight, Phase::Idle).is_none());
        assert!(cut_phase(&eight, Phase::Loaded).is_some());
    }
}
