//! `cargo xtask bench-oneshot`: one-shot snapshot tools timed over the same fake NVML library.
//!
//! Builds `gpuscope`, fake-nvml and the floor program (`oneshot-floor`, an xtask binary) in
//! release mode, cuts one frame of an 8-GPU fixture (by default frame 0 of
//! fixtures/h100-sxm-8gpu.json, which has 64 GPU processes; one frame keeps the fake library's
//! own start-up, which parses the fixture, small and the same for every tool), starts one live
//! `sleep` process per GPU process and puts their PIDs in the cut fixture in place of the
//! recorded ones (so every tool's host look-ups find real processes and do real work), makes a
//! virtualenv with nvitop and gpustat, and then runs, interleaved, N times each:
//!
//! * `gpuscope snapshot --json --nvml-lib <fake>`
//! * `nvitop -1`
//! * `gpustat --json`
//! * three floors: `true` (spawning a process), `python -c pass` (starting the interpreter the
//!   Python tools run on) and `oneshot-floor` (the same NVML calls as gpuscope, and one read
//!   each of `/proc/PID/{stat,status,cmdline}` per GPU process, nothing else)
//!
//! It then runs gpuscope, the floor program and `nvitop -1` once each under `strace -f -y`
//! and counts their system calls, per GPU process: all of them, and those on the live
//! processes' `/proc/PID` files.
//!
//! Each NVML call costs what it cost on a real H100 (`--costs`, by default
//! fixtures/costs/h100-load.json, exported as `GPUSCOPE_FAKE_NVML_COSTS` to every tool alike;
//! `--costs none` for calls at fake-nvml's own speed). With `--real` the tools run over this
//! machine's real driver instead (no fixture, no live stand-ins), and `nvidia-smi` is a row of
//! its own when there is one. `--gpuscope-bin` measures another build of gpuscope.
//!
//! every one with the same environment (`LD_LIBRARY_PATH` at the fake library, the fixture, the
//! frame pinned). Each timed run is spawned as any program starts one and reaped with `wait4`,
//! which gives its user and system CPU time; wall time is measured around spawn and reap (see
//! [`time_plain`]). Its peak resident set size comes from a second, untimed run of the same
//! command: the kernel's `VmHWM`, read when it stops at its exit under ptrace (see
//! [`time_once`]), whose stops and fork would add their own milliseconds to a wall time. Prints the medians as a
//! markdown table (see docs/benchmarks.md).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use gpu_backend::Fixture;

use crate::bench_setup::{self, SourceArgs};
use crate::live;

/// Command-line arguments.
#[derive(clap::Args)]
pub struct Args {
    /// Timed runs of each command (after one warm-up run each).
    #[arg(long, default_value_t = 20)]
    runs: usize,
    /// The fixture to cut one frame from: fixtures/h100-sxm-8gpu.json (8 GPUs, 64 GPU
    /// processes) or the real H100's recording, fixtures/h100-real.json (1 GPU; frames 19-40
    /// have both its jobs, e.g. `--frame 30`).
    #[arg(long, default_value = "fixtures/h100-sxm-8gpu.json")]
    fixture: PathBuf,
    /// The frame to cut.
    #[arg(long, default_value_t = 0)]
    frame: usize,
    /// Where the library and the cut fixture go (default:
    /// `<target dir>/bench-oneshot`). The virtualenv is `<target dir>/bench-venv`, kept.
    #[arg(long, value_name = "DIR")]
    work_dir: Option<PathBuf>,
    /// Skip the system-call counts under strace.
    #[arg(long)]
    no_strace: bool,
    /// A second gpuscope build (e.g. main's, for "before") whose one-shots are timed in the
    /// same rounds, interleaved with this one's.
    #[arg(long, value_name = "PATH")]
    baseline_bin: Option<PathBuf>,
    #[command(flatten)]
    source: SourceArgs,
}

/// One command to time.
pub(crate) struct Tool {
    pub(crate) label: &'static str,
    pub(crate) program: PathBuf,
    pub(crate) args: Vec<OsString>,
}

/// What `wait4` and the clock said about one run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Run {
    pub(crate) wall: Duration,
    pub(crate) cpu: Duration,
    pub(crate) max_rss_kib: u64,
}

/// Runs the benchmark.
pub fn run(args: Args) -> Result<()> {
    ensure!(args.runs > 0, "--runs must be at least 1");
    let target = bench_setup::target_dir();
    let work = args
        .work_dir
        .clone()
        .unwrap_or_else(|| target.join("bench-oneshot"));
    std::fs::create_dir_all(&work).with_context(|| format!("cannot create {}", work.display()))?;

    eprintln!("== building gpuscope, fake-nvml and oneshot-floor (release)");
    let gpuscope = args.source.gpuscope()?;
    bench_setup::cargo_release(&["-p", "xtask", "--bin", "oneshot-floor"])?;
    let release = target.join("release");

    // The fixture's frame, its GPU PIDs replaced by live processes; nothing with --real.
    let (cut, alive) = if args.source.real {
        (None, None)
    } else {
        let fixture_path = bench_setup::in_root(&args.fixture);
        let (mut cut, devices, processes) = cut_fixture(&fixture_path, args.frame)?;
        let alive = live::LiveProcesses::spawn(live::gpu_pids(&cut).len())?;
        live::adopt_pids(&mut cut, &alive.pids())?;
        let cut_path = work.join("oneshot-fixture.json");
        std::fs::write(&cut_path, cut.to_json_pretty())
            .with_context(|| format!("cannot write {}", cut_path.display()))?;
        eprintln!(
            "== fixture: frame {} of {} ({devices} devices, {processes} GPU processes, served \
             as {} live `sleep` processes) -> {}",
            args.frame,
            args.fixture.display(),
            alive.pids().len(),
            cut_path.display()
        );
        (Some((cut, cut_path, devices)), Some(alive))
    };
    let live_pids = alive.as_ref().map(|a| a.pids()).unwrap_or_default();
    let nvml = args
        .source
        .nvml(&work, cut.as_ref().map(|(_, p, _)| p.as_path()), Some(0))?;

    let venv = bench_setup::target_dir().join("bench-venv");
    args.source.venv(&venv)?;

    let mut gpuscope_args: Vec<OsString> = vec!["snapshot".into(), "--json".into()];
    gpuscope_args.extend(nvml.gpuscope_args());
    let mut tools = vec![
        Tool {
            label: "`gpuscope snapshot --json`",
            program: gpuscope.clone(),
            args: gpuscope_args,
        },
        Tool {
            label: "`nvitop -1`",
            program: venv.join("bin/nvitop"),
            args: vec!["-1".into()],
        },
        Tool {
            label: "`gpustat --json`",
            program: venv.join("bin/gpustat"),
            args: vec!["--json".into()],
        },
        Tool {
            label: "floor: `true`",
            program: "true".into(),
            args: vec![],
        },
        Tool {
            label: "floor: `python -c pass`",
            program: venv.join("bin/python"),
            args: vec!["-c".into(), "pass".into()],
        },
        Tool {
            label: "floor: `oneshot-floor` (same NVML calls, /proc/PID/{stat,status,cmdline})",
            program: release.join("oneshot-floor"),
            args: nvml
                .lib
                .iter()
                .map(|l| l.clone().into_os_string())
                .collect(),
        },
    ];
    // The `smi` one-shots (issue 36), after the floors, and the same of a baseline build.
    let builds: Vec<(&'static str, PathBuf)> = std::iter::once(("", gpuscope.clone()))
        .chain(args.baseline_bin.iter().map(|b| (" (baseline)", b.clone())))
        .collect();
    if let Some(b) = &args.baseline_bin {
        ensure!(b.is_file(), "--baseline-bin {}: no such file", b.display());
    }
    let mut oneshots: Vec<OneShot> = Vec::new();
    for (build, program) in &builds {
        for &(command, words, _) in &ONE_SHOTS {
            let index = if build.is_empty() && command == ONE_SHOTS[0].0 {
                0
            } else {
                let mut a: Vec<OsString> = words.iter().map(OsString::from).collect();
                a.extend(nvml.gpuscope_args());
                tools.push(Tool {
                    label: leak(format!("`gpuscope {}`{build}", words.join(" "))),
                    program: program.clone(),
                    args: a,
                });
                tools.len() - 1
            };
            oneshots.push(OneShot {
                command,
                baseline: !build.is_empty(),
                index,
            });
        }
    }
    let mut smi_rows = Vec::new();
    if let Some(smi) = bench_setup::nvidia_smi().filter(|_| args.source.real) {
        for words in [
            &["-L"][..],
            &[
                "--query-gpu=index,memory.used,utilization.gpu",
                "--format=csv",
            ],
            &["-q"],
        ] {
            tools.push(Tool {
                label: leak(format!("`nvidia-smi {}`", words.join(" "))),
                program: smi.clone(),
                args: words.iter().map(OsString::from).collect(),
            });
            smi_rows.push(tools.len() - 1);
        }
    }
    let env = nvml.env.clone();

    // Each tool must work, and see every GPU and process, before it is timed.
    eprintln!("== checking each tool's output");
    match &cut {
        Some((cut, _, devices)) => check_outputs(&tools, &env, *devices, cut, live_pids.len())?,
        None => {
            for tool in &tools {
                time_plain(tool, &env)?;
            }
        }
    }
    println!(
        "{} on {}, commit {}, NVML: {}; call costs: {}\n",
        if args.source.real {
            "this machine's GPUs".to_string()
        } else {
            format!("frame {} of {}", args.frame, args.fixture.display())
        },
        machine(),
        bench_setup::commit(),
        if args.source.real {
            "the real driver".to_string()
        } else {
            "fake-nvml".to_string()
        },
        nvml.costs
    );

    eprintln!("== timing: {} runs of each, interleaved", args.runs);
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); tools.len()];
    for round in 0..=args.runs {
        for (tool, record) in tools.iter().zip(&mut runs) {
            let (wall, cpu) = time_plain(tool, &env)?;
            let r = Run {
                wall,
                cpu,
                max_rss_kib: time_once(tool, &env)?.max_rss_kib,
            };
            // Round 0 is the warm-up.
            if round > 0 {
                record.push(r);
            }
        }
    }

    println!("{}", table(&tools, &runs));
    let gpuscope = median(runs[0].iter().map(|r| r.wall.as_secs_f64()));
    let nvitop = median(runs[1].iter().map(|r| r.wall.as_secs_f64()));
    let floor = FLOOR_TOOL;
    // Paired: each round ran every tool once, back to back.
    let paired = median(
        runs[0]
            .iter()
            .zip(&runs[floor])
            .map(|(g, f)| g.wall.as_secs_f64() / f.wall.as_secs_f64()),
    );
    let paired_cpu = median(
        runs[0]
            .iter()
            .zip(&runs[floor])
            .map(|(g, f)| g.cpu.as_secs_f64() / f.cpu.as_secs_f64().max(1e-6)),
    );
    println!();
    println!(
        "gpuscope vs the floor program, median of {} paired runs: {paired:.2}x the wall time \
         (target: at most 1.5x: {}), {paired_cpu:.2}x the CPU time",
        runs[0].len(),
        if paired <= 1.5 { "met" } else { "MISSED" }
    );
    println!();
    println!(
        "{}",
        one_shots_against(&oneshots, &tools, &runs, floor, &smi_rows)
    );
    let rss = median(runs[0].iter().map(|r| r.max_rss_kib as f64)) / 1024.0;
    println!();
    println!(
        "gpuscope vs `nvitop -1`, median wall time: {:.1}x faster (target: at least 20x: {})",
        nvitop / gpuscope,
        if nvitop / gpuscope >= 20.0 {
            "met"
        } else {
            "MISSED"
        }
    );
    println!(
        "gpuscope median peak RSS: {rss:.1} MiB (target: at most 6 MB: {})",
        if rss * 1024.0 * 1024.0 <= 6e6 {
            "met"
        } else {
            "MISSED"
        }
    );
    if let Some(strace) = live::strace().filter(|_| !args.no_strace) {
        println!();
        println!(
            "System calls of one run, under `strace -f -y`, per GPU process ({} live):",
            live_pids.len()
        );
        println!();
        println!("| command | all calls | per GPU process | on /proc/PID of the GPU processes | per GPU process |");
        println!("|---|---|---|---|---|");
        for i in [0, floor, 1] {
            let s = count_syscalls(strace, &tools[i], &env, &work, &live_pids)?;

            let n = live_pids.len().max(1) as f64;
            println!(
                "| {} | {} | {:.1} | {} | {:.1} |",
                tools[i].label,
                s.total,
                s.total as f64 / n,
                s.on_pids,
                s.on_pids as f64 / n
            );
        }
    }
    drop(alive);
    Ok(())
}

/// Index of the `oneshot-floor` tool in the list.
const FLOOR_TOOL: usize = 5;

/// The one-shots issue 36 holds to the floor program: a name, the arguments, and the most
/// their wall time may be over the floor's (paired runs, median).
const ONE_SHOTS: [(&str, &[&str], f64); 3] = [
    ("snapshot --json", &["snapshot", "--json"], 1.3),
    (
        "smi --query-gpu",
        &[
            "smi",
            "--query-gpu=index,memory.used,utilization.gpu",
            "--format=csv",
        ],
        0.8,
    ),
    ("smi -L", &["smi", "-L"], 0.7),
];

/// One of [`ONE_SHOTS`] of one build, and where it is in the tool list.
struct OneShot {
    command: &'static str,
    baseline: bool,
    index: usize,
}

/// A label made at run time, for the tool list's `&'static str` (a handful per run).
fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// Each one-shot against the floor program (paired runs: each round ran every tool once,
/// back to back), with issue 36's target; with the real driver, against nvidia-smi's same
/// command too (`-L` and the CSV at most 1.2x, `snapshot --json` at most `nvidia-smi -q`).
fn one_shots_against(
    oneshots: &[OneShot],
    tools: &[Tool],
    runs: &[Vec<Run>],
    floor: usize,
    smi_rows: &[usize],
) -> String {
    let paired = |a: usize, b: usize| {
        median(
            runs[a]
                .iter()
                .zip(&runs[b])
                .map(|(x, y)| x.wall.as_secs_f64() / y.wall.as_secs_f64()),
        )
    };
    let verdict = |ratio: f64, most: f64| if ratio <= most { "met" } else { "MISSED" };
    let mut s = String::from(
        "| one-shot | build | wall, median | / the floor, paired | target (issue 36) |",
    );
    let real = smi_rows.len() == 3;
    if real {
        s += " / nvidia-smi's, paired | target |";
    }
    s += "\n|---|---|---|---|---|";
    if real {
        s += "---|---|";
    }
    for o in oneshots {
        let most = ONE_SHOTS
            .iter()
            .find(|(c, _, _)| *c == o.command)
            .map_or(f64::NAN, |&(_, _, m)| m);
        let ratio = paired(o.index, floor);
        let wall = median(runs[o.index].iter().map(|r| r.wall.as_secs_f64())) * 1e3;
        s += &format!(
            "\n| `{}` | {} | {wall:.1} ms | {ratio:.2}x | at most {most}x: {} |",
            o.command,
            if o.baseline { "baseline" } else { "this" },
            verdict(ratio, most)
        );
        if real {
            // nvidia-smi's rows: -L, the CSV, -q.
            let (row, most) = match o.command {
                "smi -L" => (smi_rows[0], 1.2),
                "smi --query-gpu" => (smi_rows[1], 1.2),
                _ => (smi_rows[2], 1.0),
            };
            let ratio = paired(o.index, row);
            s += &format!(
                " {ratio:.2}x ({}) | at most {most}x: {} |",
                tools[row].label,
                verdict(ratio, most)
            );
        }
    }
    s
}

/// Runs `tool` once under `strace -f -y` and counts its system calls.
fn count_syscalls(
    strace: &str,
    tool: &Tool,
    env: &[(&str, OsString)],
    work: &Path,
    pids: &[u32],
) -> Result<live::Syscalls> {
    let log = work.join("strace.log");
    let mut cmd = Command::new(strace);
    cmd.args(["-f", "-y", "-qq", "-o"])
        .arg(&log)
        .arg(&tool.program);
    let status = quietly(&mut cmd, tool, env)
        .status()
        .context("cannot run strace")?;
    ensure!(status.success(), "{} failed under strace", tool.label);
    live::count_syscalls(&log, pids)
}

/// The machine in a few words: CPU model and cores.
pub(crate) fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or("unknown CPU", |(_, m)| m.trim())
        .to_string();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{model}, {cores} cores")
}

/// Frame `frame` of the fixture alone, at time 0; with its device and GPU process counts.
fn cut_fixture(path: &Path, frame: usize) -> Result<(Fixture, usize, usize)> {
    let mut f = Fixture::load(path)?;
    bench_setup::keep_one_frame(&mut f, frame, path)?;
    let processes = f.frames[0]
        .devices
        .values()
        .map(|d| {
            let mut pids = std::collections::BTreeSet::new();
            for list in [&d.compute_processes, &d.graphics_processes] {
                if let gpu_backend::Answer::Ok(ps) = list {
                    pids.extend(ps.iter().map(|p| p.pid));
                }
            }
            pids.len()
        })
        .sum();
    let devices = f.devices.len();
    Ok((f, devices, processes))
}

/// Runs each tool once with its output captured, and checks that it saw every device (and, for
/// the JSON tools, every process).
fn check_outputs(
    tools: &[Tool],
    env: &[(&str, OsString)],
    devices: usize,
    cut: &Fixture,
    live: usize,
) -> Result<()> {
    let physical = cut
        .devices
        .keys()
        .filter(|id| matches!(id, gpu_backend::DeviceId::Gpu(_)))
        .count();
    let gpu_name = cut
        .devices
        .get(&gpu_backend::DeviceId::Gpu(0))
        .and_then(|d| d.name.ok())
        .map_or("H100", |n| {
            n.trim_start_matches("NVIDIA ")
                .split(' ')
                .next()
                .unwrap_or(n)
        })
        .to_string();
    for tool in tools.iter().take(3) {
        let out = output_of(tool, env)?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            bail!(
                "{} failed ({}):\n{stdout}{}",
                tool.label,
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let seen = match tool.label {
            l if l.contains("gpuscope") => {
                let v: serde_json::Value = serde_json::from_str(&stdout)?;
                // Every GPU process is a live one, seen on the host (its user is known).
                let visible = v["devices"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|d| d["processes"].as_array())
                    .flatten()
                    .filter(|p| p["user"].is_string())
                    .map(|p| p["pid"].as_u64())
                    .collect::<std::collections::BTreeSet<_>>()
                    .len();
                ensure!(
                    visible == live,
                    "gpuscope saw {visible} live GPU processes, {live} are running"
                );
                v["devices"].as_array().map_or(0, Vec::len)
            }
            l if l.contains("gpustat") => {
                let v: serde_json::Value = serde_json::from_str(&stdout)?;
                v["gpus"].as_array().map_or(0, Vec::len)
            }
            // nvitop -1 prints one row per GPU, each with the GPU's index and name (nvitop
            // leaves out NVIDIA's prefix).
            _ => stdout.lines().filter(|l| l.contains(&gpu_name)).count(),
        };
        let want = if tool.label.contains("nvitop") || tool.label.contains("gpustat") {
            physical
        } else {
            devices
        };
        ensure!(
            seen == want,
            "{} showed {seen} devices, the fixture has {want}:\n{stdout}",
            tool.label
        );
    }
    let floor = &tools[FLOOR_TOOL];
    let out = Command::new(&floor.program)
        .args(&floor.args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .context("cannot run oneshot-floor")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    ensure!(
        out.status.success() && stdout.contains(&format!("{live} GPU processes")),
        "oneshot-floor did not see the {live} GPU processes: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The smi one-shots: a line per GPU (`-L`), a header and a row per GPU (the CSV).
    for tool in tools.iter().filter(|t| t.label.contains("gpuscope smi")) {
        let out = output_of(tool, env)?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let rows = if tool.label.contains(" -L") {
            stdout.lines().filter(|l| l.starts_with("GPU ")).count()
        } else {
            stdout.lines().count().saturating_sub(1)
        };
        ensure!(
            out.status.success() && rows == physical,
            "{} showed {rows} GPUs, the fixture has {physical}:\n{stdout}{}",
            tool.label,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// The tool's output, run with `env` and no input.
fn output_of(tool: &Tool, env: &[(&str, OsString)]) -> Result<std::process::Output> {
    Command::new(&tool.program)
        .args(&tool.args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {}", tool.program.display()))
}

/// `cmd` (the tool's program, or a tracer before it) given the tool's arguments and `env`, no
/// input, and its output thrown away.
fn quietly<'a>(cmd: &'a mut Command, tool: &Tool, env: &[(&str, OsString)]) -> &'a mut Command {
    cmd.args(&tool.args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
}

/// Spawns the tool with its output thrown away as a shell would (no tracing), and reaps it with
/// `wait4`: its wall time, spawn to reap, and its user and system CPU time.
pub(crate) fn time_plain(tool: &Tool, env: &[(&str, OsString)]) -> Result<(Duration, Duration)> {
    let mut cmd = Command::new(&tool.program);
    let start = Instant::now();
    let child = quietly(&mut cmd, tool, env)
        .spawn()
        .with_context(|| format!("cannot run {}", tool.program.display()))?;
    let pid = libc::pid_t::try_from(child.id()).context("pid out of range")?;
    let (status, usage) = wait4(pid)?;
    let wall = start.elapsed();
    drop(child);
    exited_cleanly(status, tool)?;
    Ok((wall, cpu_of(&usage)))
}

/// Fails unless a reaped child's wait status says it exited with 0.
fn exited_cleanly(status: libc::c_int, tool: &Tool) -> Result<()> {
    ensure!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{} failed (wait status {status})",
        tool.label
    );
    Ok(())
}

/// User plus system CPU time of a reaped child.
fn cpu_of(usage: &libc::rusage) -> Duration {
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Spawns the tool with its output thrown away, reads its peak RSS just before it exits, and
/// reaps it with `wait4` for its CPU time.
///
/// The peak RSS is the kernel's high-water mark of the program's own address space (`VmHWM`),
/// read while the process is stopped at its exit under ptrace (`PTRACE_O_TRACEEXIT`): the
/// `ru_maxrss` that `wait4` gives would also count the RSS of this process at the fork, which
/// exec carries over. The child asks to be traced itself, so it stops only at its exec and at
/// its exit; signals are passed on.
pub(crate) fn time_once(tool: &Tool, env: &[(&str, OsString)]) -> Result<Run> {
    use std::os::unix::process::CommandExt;

    let mut cmd = Command::new(&tool.program);
    quietly(&mut cmd, tool, env);
    // SAFETY: the closure runs in the forked child before exec and calls only ptrace, which is
    // async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            if libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let start = Instant::now();
    let child = cmd
        .spawn()
        .with_context(|| format!("cannot run {}", tool.program.display()))?;
    let pid = libc::pid_t::try_from(child.id()).context("pid out of range")?;
    let mut hwm_kib = None;
    let mut first_stop = true;
    let (status, usage) = loop {
        let (status, usage) = wait4(pid)?;
        if !libc::WIFSTOPPED(status) {
            break (status, usage);
        }
        let mut signal = libc::WSTOPSIG(status);
        if first_stop && signal == libc::SIGTRAP {
            // Stopped at exec: from now on, stop at the exit too; kill it if we die.
            first_stop = false;
            let options = libc::PTRACE_O_TRACEEXIT | libc::PTRACE_O_EXITKILL;
            // SAFETY: `pid` is our traced, stopped child.
            unsafe { libc::ptrace(libc::PTRACE_SETOPTIONS, pid, 0, options) };
            signal = 0;
        } else if status >> 8 == (libc::SIGTRAP | (libc::PTRACE_EVENT_EXIT << 8)) {
            hwm_kib = read_hwm_kib(pid);
            signal = 0;
        }
        // SAFETY: `pid` is our traced, stopped child; `signal` is the one it stopped with (or 0).
        unsafe { libc::ptrace(libc::PTRACE_CONT, pid, 0, signal) };
    };
    let wall = start.elapsed();
    drop(child);
    exited_cleanly(status, tool)?;
    Ok(Run {
        wall,
        cpu: cpu_of(&usage),
        max_rss_kib: hwm_kib.with_context(|| format!("no VmHWM of {} at its exit", tool.label))?,
    })
}

/// `wait4` on our child, retried on EINTR.
fn wait4(pid: libc::pid_t) -> Result<(libc::c_int, libc::rusage)> {
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero `rusage` is a valid value of that plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `pid` is our own child, never waited on through std; `status` and `usage`
        // are valid, writable out-parameters.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            return Ok((status, usage));
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            bail!("wait4 failed: {e}");
        }
    }
}

/// `VmHWM` of a live process, in KiB.
fn read_hwm_kib(pid: libc::pid_t) -> Option<u64> {
    bench_setup::status_kib(u32::try_from(pid).ok()?, "VmHWM")
}

fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.collect();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The medians as a markdown table, with each tool's wall time relative to gpuscope's.
fn table(tools: &[Tool], runs: &[Vec<Run>]) -> String {
    let base = median(runs[0].iter().map(|r| r.wall.as_secs_f64()));
    let base_cpu = median(runs[0].iter().map(|r| r.cpu.as_secs_f64()));
    let mut s = String::from(
        "| command | runs | wall, median (min-max) | gpuscope / this, wall | user+sys CPU, median \
         | gpuscope / this, CPU | peak RSS, median |\n|---|---|---|---|---|---|---|\n",
    );
    for (tool, rs) in tools.iter().zip(runs) {
        let wall = median(rs.iter().map(|r| r.wall.as_secs_f64()));
        let min = rs.iter().map(|r| r.wall).min().unwrap_or_default();
        let max = rs.iter().map(|r| r.wall).max().unwrap_or_default();
        let cpu = median(rs.iter().map(|r| r.cpu.as_secs_f64()));
        let rss = median(rs.iter().map(|r| r.max_rss_kib as f64)) / 1024.0;
        s += &format!(
            "| {} | {} | {:.1} ms ({:.1}-{:.1}) | {:.2}x | {:.1} ms | {:.2}x | {:.1} MiB |\n",
            tool.label,
            rs.len(),
            wall * 1e3,
            min.as_secs_f64() * 1e3,
            max.as_secs_f64() * 1e3,
            base / wall,
            cpu * 1e3,
            base_cpu / cpu.max(1e-6),
            rss,
        );
    }
    s.trim_end().to_string()
}
