//! `cargo xtask bench-export`: load on `gpuscope export`.
//!
//! Builds `gpuscope` and fake-nvml in release mode, cuts frame 0 of
//! fixtures/h100-sxm-8gpu.json (8 GPUs, 64 GPU processes) into a one-frame fixture, starts one
//! live `sleep` process per GPU process and puts their PIDs in the cut fixture, and starts
//! `gpuscope export --nvml-lib <fake-nvml> --processes --interval 1s` with fake-nvml serving
//! the cut fixture: the NVML backend and the live host source, as on a real machine, with host
//! look-ups of processes that exist. It then measures, one phase after the other:
//!
//! 1. idle: no scrapes for `--idle`; the exporter's CPU (utime + stime from `/proc/<pid>/stat`)
//!    over that time, as a share of one core; then, when strace is there, the exporter's
//!    system calls over `--strace-window` (attached with `strace -f -y -p`), per refresh and
//!    per GPU process: all of them, and those on the live processes' `/proc/PID` files;
//! 2. paced: `--clients` threads, each on its own kept-alive connection, scraping `/metrics`
//!    as Prometheus asks for it (OpenMetrics) at a total of `--rate` scrapes per second for
//!    `--duration`; latency from sending a request to having read the whole answer;
//! 3. flat out: the same clients scraping back to back for `--flat-out`: the most scrapes per
//!    second, and the latency at that load.
//!
//! 4. one scrape per sample: one client scraping every 1.1 s for `--fresh`, so that each scrape
//!    is the first of its sample and pays for turning it into families and encoding them (what
//!    a Prometheus scraping every 15 s costs per scrape): the CPU of the exporter's serving
//!    thread (its main thread) per scrape, beyond what it spends idle.
//!
//! With `--gzip` the clients also send `Accept-Encoding: gzip`, as Prometheus does. Before the
//! phases it fetches one scrape with and one without `Accept-Encoding: gzip` and reports the
//! bytes of each on the wire. `--names` publishes under other names (`dcgm`, `nvidia-smi`,
//! `gpuscope,dcgm`, ...: `gpuscope export --names`), to measure what each door costs.
//!
//! For each phase it reports scrapes per second, p50 / p99 / max latency, the exporter's CPU
//! and its resident set size at the start and end of the phase (`VmRSS`), so that growth shows.
//! For comparison it also gives the RSS of `gpuscope export --demo --processes`, which holds the
//! whole 30-frame recording.
//!
//! Then, beside it, nvitop-exporter (pinned, in a virtualenv) over the same library, idle at its
//! 1 s interval for the same `--idle`: its CPU as a share of one core, and by thread for both
//! (`/proc/PID/task/*/stat`), with gpuscope's share over nvitop-exporter's.
//!
//! Each NVML call costs what it cost on a real H100 (`--costs`, default
//! fixtures/costs/h100-load.json, exported as `GPUSCOPE_FAKE_NVML_COSTS` to both exporters;
//! `--costs none`: the old behaviour); `--fixture`/`--frame` choose what is served (default
//! frame 0 of fixtures/h100-sxm-8gpu.json); `--real` runs both over this machine's real
//! driver; `--idle-only` skips the scraping phases and the system-call count.
//!
//! `--idle-only` measures each exporter afresh, idle for `--idle` after 3 s of warm-up, per
//! thread from `/proc/PID/task/*/schedstat` (nanoseconds of CPU, and wake-ups: the times each
//! thread was run) beside the process's ticks, for `--rounds` rounds of: this build, the
//! `--baseline-bin` build (an older one, in the same run), nvitop-exporter.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::bench_setup::{self, SourceArgs};
use crate::live;

/// Command-line arguments.
#[derive(clap::Args)]
pub struct Args {
    /// Concurrent clients.
    #[arg(long, default_value_t = 8)]
    clients: usize,
    /// Total scrapes per second in the paced phase.
    #[arg(long, default_value_t = 200)]
    rate: u32,
    /// Length of the paced phase.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Length of the flat-out phase.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    flat_out: Duration,
    /// Length of the idle phase.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    idle: Duration,
    /// Length of the system-call count (idle, no scrapes).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    strace_window: Duration,
    /// Scrape with `Accept-Encoding: gzip`, as Prometheus does.
    #[arg(long)]
    gzip: bool,
    /// The fixture to cut one frame from: fixtures/h100-sxm-8gpu.json (8 GPUs, 64 GPU
    /// processes) or fixtures/h100-real.json (the real H100, 1 GPU; e.g. `--frame 30`).
    #[arg(long, default_value = "fixtures/h100-sxm-8gpu.json")]
    fixture: PathBuf,
    /// The frame to cut.
    #[arg(long, default_value_t = 0)]
    frame: usize,
    /// Only the idle phases (gpuscope's and nvitop-exporter's): no scraping phases, no
    /// system-call count.
    #[arg(long)]
    idle_only: bool,
    /// Skip nvitop-exporter.
    #[arg(long)]
    no_peer: bool,
    /// The names the exporter publishes under (`gpuscope export --names`).
    #[arg(long, default_value = "gpuscope")]
    names: String,
    /// With `--idle-only`: measure this gpuscope binary too (an older build), idle in the same
    /// run, each round after this workspace's (or `--gpuscope-bin`'s).
    #[arg(long, value_name = "PATH")]
    baseline_bin: Option<PathBuf>,
    /// With `--idle-only`: rounds, each measuring every exporter once, one after another.
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// Length of the one-scrape-per-sample phase (0s: none).
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    fresh: Duration,
    #[command(flatten)]
    source: SourceArgs,
}

/// The name of the phase that scrapes each sample once.
const FRESH_PHASE: &str = "one scrape per sample";

/// What one phase measured.
struct Phase {
    name: &'static str,
    seconds: f64,
    latencies: Vec<Duration>,
    errors: usize,
    cpu_share: f64,
    rss_start_kib: u64,
    rss_end_kib: u64,
    /// % of a core by thread name (the idle phase only).
    threads: Vec<(String, f64)>,
    /// CPU seconds of the exporter's main thread, which serves every connection (its HTTP
    /// runtime runs there) and so turns a sample into families and encodes it on the first
    /// scrape that asks; the sampler is a thread of its own.
    serving_cpu_s: f64,
}

/// CPU seconds of `pid`'s main thread so far: from its `schedstat` (nanoseconds on a CPU),
/// else from its `stat` (10 ms ticks).
fn serving_seconds(pid: u32) -> f64 {
    let task = format!("/proc/{pid}/task/{pid}");
    std::fs::read_to_string(format!("{task}/schedstat"))
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .map(|ns| ns as f64 / 1e9)
        .or_else(|| {
            let sample = bench_setup::cpu_sample(pid).ok()?;
            sample.threads.get(&pid).map(|(_, t)| *t)
        })
        .unwrap_or(0.0)
}

/// Runs the benchmark and prints a markdown table.
pub fn run(args: Args) -> Result<()> {
    let bin = args.source.gpuscope()?;
    let (cut, alive) = if args.source.real {
        (None, None)
    } else {
        let (cut, alive) = cut_fixture(&args.fixture, args.frame)?;
        (Some(cut), Some(alive))
    };
    let pids = alive.as_ref().map(|a| a.pids()).unwrap_or_default();
    let nvml = args.source.nvml(&work_dir()?, cut.as_deref(), Some(0))?;
    let env = nvml.env.clone();
    let nvml_args: Vec<String> = nvml
        .gpuscope_args()
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let nvml_args: Vec<&str> = nvml_args.iter().map(String::as_str).collect();
    let venv = bench_setup::target_dir().join("bench-venv");
    if !args.no_peer {
        args.source.venv(&venv)?;
    }
    if args.idle_only {
        let baseline = match &args.baseline_bin {
            Some(b) if !b.is_file() => bail!("--baseline-bin {}: no such file", b.display()),
            b => b.clone(),
        };
        let report = idle_rounds(&args, &bin, baseline.as_deref(), &nvml_args, &env, &venv);
        drop(alive);
        println!(
            "Idle exporters, no scrapes, over {} ({} live GPU processes); NVML call costs: {}; \
             {}, commit {}\n",
            served_by(&args),
            pids.len(),
            nvml.costs,
            crate::bench_oneshot::machine(),
            bench_setup::commit(),
        );
        return report;
    }
    if args.baseline_bin.is_some() || args.rounds != 1 {
        bail!("--baseline-bin and --rounds go with --idle-only");
    }
    let mut demo = start(&bin, &["--demo"], &[])?;
    std::thread::sleep(Duration::from_secs(3));
    let demo_rss = rss_kib(demo.pid);
    let _ = demo.child.kill();
    let _ = demo.child.wait();
    let load_before = load_average();
    let mut exporter_args = nvml_args.clone();
    exporter_args.extend(["--names", args.names.as_str()]);
    let mut exporter = start(&bin, &exporter_args, &env)?;
    let wire = wire_bytes(&exporter.addr);
    let result = wire.and_then(|w| Ok((w, phases(&args, &exporter, &pids)?)));
    let _ = exporter.child.kill();
    let _ = exporter.child.wait();
    let peer = if args.no_peer {
        None
    } else {
        Some(peer_idle(&venv, &env, args.idle))
    };
    drop(alive);
    let ((plain, gzipped), (phases, syscalls)) = result?;
    println!(
        "gpuscope export --processes --interval 1s --names {} over {} ({}), {} live GPU \
         processes{}; NVML call costs: {}; {}, commit {}\n",
        args.names,
        served_by(&args),
        bin.display(),
        pids.len(),
        match (args.idle_only, args.gzip) {
            (true, _) => String::new(),
            (false, gzip) => format!(
                ", {} clients{}",
                args.clients,
                if gzip { ", asking for gzip" } else { "" }
            ),
        },
        nvml.costs,
        crate::bench_oneshot::machine(),
        bench_setup::commit(),
    );
    if let Some(peer) = peer {
        let peer = peer?;
        let ours = &phases[0];
        println!(
            "Idle at a 1 s interval, no scrapes, over {:.0} s: CPU as % of one core\n",
            ours.seconds
        );
        println!("| exporter | CPU | gpuscope / this | by thread | RSS |");
        println!("|---|---|---|---|---|");
        println!(
            "| `gpuscope export --processes --interval 1s` | {:.2}% | 1.00x | {} | {:.1} MiB |",
            ours.cpu_share * 100.0,
            bench_setup::threads_text(&ours.threads, 4),
            ours.rss_end_kib as f64 / 1024.0
        );
        println!(
            "| `nvitop-exporter --interval 1` | {:.2}% | {:.2}x | {} | {:.1} MiB |\n",
            peer.cpu,
            ours.cpu_share * 100.0 / peer.cpu.max(1e-6),
            bench_setup::threads_text(&peer.threads, 4),
            peer.rss_kib as f64 / 1024.0
        );
    }
    println!(
        "Bytes on the wire per scrape (OpenMetrics body): {plain} plain; {} with \
         Accept-Encoding: gzip\n",
        match gzipped {
            Some(n) => format!("{n} gzipped"),
            None => "not compressed (the server ignores it)".to_string(),
        }
    );
    println!("| phase | scrapes/s | p50 | p99 | max | errors | exporter CPU (one core) | RSS start → end |");
    println!("|---|---|---|---|---|---|---|---|");
    for p in &phases {
        let mut l = p.latencies.clone();
        l.sort();
        let pick = |q: usize| -> String {
            if l.is_empty() {
                "-".into()
            } else {
                ms(l[(l.len() * q / 100).min(l.len() - 1)])
            }
        };
        println!(
            "| {} | {:.1} | {} | {} | {} | {} | {:.2}% | {:.1} → {:.1} MiB |",
            p.name,
            l.len() as f64 / p.seconds,
            pick(50),
            pick(99),
            l.last().map_or("-".into(), |d| ms(*d)),
            p.errors,
            p.cpu_share * 100.0,
            p.rss_start_kib as f64 / 1024.0,
            p.rss_end_kib as f64 / 1024.0,
        );
    }
    if let (Some(idle), Some(fresh)) = (
        phases.first(),
        phases.iter().find(|p| p.name == FRESH_PHASE),
    ) {
        let scrapes = fresh.latencies.len().max(1) as f64;
        // What the serving thread spends anyway (its health ticks), taken off.
        let ticking = idle.serving_cpu_s / idle.seconds.max(1e-9) * fresh.seconds;
        let per_scrape = (fresh.serving_cpu_s - ticking).max(0.0) / scrapes;
        println!(
            "\nCPU per scrape of a sample no scrape had asked for (turning it into families, \
             encoding{}, serving: the serving thread's CPU time): {:.2} ms over {} \
             scrapes",
            if args.gzip { ", gzip" } else { "" },
            per_scrape * 1000.0,
            fresh.latencies.len(),
        );
    }
    println!(
        "\nMachine load average (1 min) before: {load_before}, after: {}",
        load_average()
    );
    if let Some((s, secs)) = syscalls {
        let refreshes = secs.max(1.0);
        let n = pids.len().max(1) as f64;
        println!(
            "\nSystem calls while idle over {secs:.0} s (strace -f -y -p, about {refreshes:.0} \
             refreshes): {} in all, {:.0} per refresh, {:.1} per refresh per GPU process; on the \
             GPU processes' /proc/PID files: {:.1} per refresh per GPU process",
            s.total,
            s.total as f64 / refreshes,
            s.total as f64 / refreshes / n,
            s.on_pids as f64 / refreshes / n,
        );
    }
    println!(
        "\nFor comparison, `gpuscope export --demo --processes` (the whole 30-frame recording \
         in memory) after 3 s: RSS {:.1} MiB",
        demo_rss? as f64 / 1024.0
    );
    Ok(())
}

/// `<target>/bench-export`, made if missing.
fn work_dir() -> Result<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let dir = target.join("bench-export");
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Frame `frame` of the fixture alone, its GPU PIDs replaced by live processes, written under
/// the target directory; and the live processes.
fn cut_fixture(fixture: &Path, frame: usize) -> Result<(PathBuf, live::LiveProcesses)> {
    let mut f = gpu_backend::Fixture::load(bench_setup::in_root(fixture))?;
    bench_setup::keep_one_frame(&mut f, frame, fixture)?;
    // Host facts of the recording's other frames' processes: a fixture keeps facts only for
    // PIDs alive in some frame (fake-nvml refuses it otherwise), and a cut frame of
    // fixtures/h200-real.json with no process (frame 2, idle) has none.
    let kept = &f.frames[0].host.processes;
    f.host.processes.retain(|pid, _| kept.contains_key(pid));
    let alive = live::LiveProcesses::spawn(live::gpu_pids(&f).len())?;
    live::adopt_pids(&mut f, &alive.pids())?;
    let path = work_dir()?.join("export-fixture-live.json");
    std::fs::write(&path, f.to_json_pretty())?;
    Ok((path, alive))
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

struct Exporter {
    child: Child,
    addr: String,
    pid: u32,
}

fn start(bin: &Path, source: &[&str], env: &[(&str, std::ffi::OsString)]) -> Result<Exporter> {
    let mut command = Command::new(bin);
    command
        .arg("export")
        .args(source)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .args(["--processes", "--interval", "1s"])
        .args(["--listen", "127.0.0.1:0"]);
    let (mut child, listening) =
        bench_setup::start_listening(&mut command, Duration::from_secs(30))?;
    let bench_setup::Listening::On(addr) = listening else {
        let _ = child.kill();
        let _ = child.wait();
        bail!("the exporter did not say where it listens");
    };
    let pid = child.id();
    Ok(Exporter { child, addr, pid })
}

/// The system calls counted while idle, and over how many seconds.
type IdleSyscalls = (live::Syscalls, f64);

/// The phases, and the idle system-call count with its length in seconds (when strace is
/// there).
fn phases(args: &Args, e: &Exporter, pids: &[u32]) -> Result<(Vec<Phase>, Option<IdleSyscalls>)> {
    // Let the first samples settle.
    std::thread::sleep(Duration::from_secs(2));
    let mut out = Vec::new();

    let (cpu0, rss0) = (bench_setup::cpu_sample(e.pid)?, rss_kib(e.pid)?);
    let serving0 = serving_seconds(e.pid);
    let t0 = Instant::now();
    std::thread::sleep(args.idle);
    let secs = t0.elapsed().as_secs_f64();
    let cpu1 = bench_setup::cpu_sample(e.pid)?;
    let (share, threads) = bench_setup::cpu_share(&cpu0, &cpu1, secs);
    out.push(Phase {
        name: "idle, 1 s interval",
        seconds: secs,
        latencies: Vec::new(),
        errors: 0,
        cpu_share: share / 100.0,
        rss_start_kib: rss0,
        rss_end_kib: rss_kib(e.pid)?,
        threads,
        serving_cpu_s: serving_seconds(e.pid) - serving0,
    });
    if args.idle_only {
        return Ok((out, None));
    }
    let syscalls = match live::strace() {
        Some(strace) => Some(trace_idle(strace, e.pid, args.strace_window, pids)?),
        None => None,
    };

    if !args.fresh.is_zero() {
        // Every 1.1 s against samples every 1 s: each scrape is its sample's first.
        let period = Some(Duration::from_millis(1100));
        out.push(load(FRESH_PHASE, e, 1, args.fresh, period, args.gzip)?);
    }
    let per_client = Duration::from_secs_f64(args.clients as f64 / f64::from(args.rate.max(1)));
    out.push(load(
        "paced",
        e,
        args.clients,
        args.duration,
        Some(per_client),
        args.gzip,
    )?);
    out.push(load(
        "flat out",
        e,
        args.clients,
        args.flat_out,
        None,
        args.gzip,
    )?);
    Ok((out, syscalls))
}

/// Attaches `strace -f -y` to the exporter for `window` and counts its system calls.
fn trace_idle(strace: &str, pid: u32, window: Duration, pids: &[u32]) -> Result<IdleSyscalls> {
    let log = work_dir()?.join("strace-idle.log");
    let mut tracer = Command::new(strace)
        .args(["-f", "-y", "-qq", "-o"])
        .arg(&log)
        .args(["-p", &pid.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("cannot run strace")?;
    let t0 = Instant::now();
    std::thread::sleep(window);
    // SIGINT detaches strace cleanly.
    // SAFETY: kill with a PID of our own child and a valid signal.
    unsafe { libc::kill(tracer.id() as libc::pid_t, libc::SIGINT) };
    let _ = tracer.wait();
    let secs = t0.elapsed().as_secs_f64();
    Ok((live::count_syscalls(&log, pids)?, secs))
}

fn load(
    name: &'static str,
    e: &Exporter,
    clients: usize,
    duration: Duration,
    period: Option<Duration>,
    gzip: bool,
) -> Result<Phase> {
    let (cpu0, rss0) = (bench_setup::cpu_seconds(e.pid)?, rss_kib(e.pid)?);
    let serving0 = serving_seconds(e.pid);
    let start = Instant::now();
    let end = start + duration;
    let handles: Vec<_> = (0..clients)
        .map(|i| {
            let addr = e.addr.clone();
            // Spread the clients' start times over one period.
            let offset = period.map_or(Duration::ZERO, |p| p * i as u32 / clients as u32);
            std::thread::spawn(move || client(&addr, start + offset, end, period, gzip))
        })
        .collect();
    let mut latencies = Vec::new();
    let mut errors = 0;
    for h in handles {
        match h.join() {
            Ok((l, n)) => {
                latencies.extend(l);
                errors += n;
            }
            Err(_) => errors += 1,
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let serving = serving_seconds(e.pid) - serving0;
    Ok(Phase {
        name,
        seconds: secs,
        latencies,
        errors,
        cpu_share: (bench_setup::cpu_seconds(e.pid)? - cpu0) / secs,
        rss_start_kib: rss0,
        rss_end_kib: rss_kib(e.pid)?,
        threads: Vec::new(),
        serving_cpu_s: serving,
    })
}

/// Scrapes until `end`, every `period` from `first` (or back to back); latencies and errors.
fn client(
    addr: &str,
    first: Instant,
    end: Instant,
    period: Option<Duration>,
    gzip: bool,
) -> (Vec<Duration>, usize) {
    let mut latencies = Vec::new();
    let mut errors = 0;
    let mut conn: Option<BufReader<TcpStream>> = None;
    let mut next = first;
    let mut body = Vec::new();
    while Instant::now() < end {
        if let Some(p) = period {
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
            next += p;
        }
        if conn.is_none() {
            conn = TcpStream::connect(addr).ok().map(|s| {
                let _ = s.set_nodelay(true);
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                BufReader::with_capacity(256 * 1024, s)
            });
        }
        let Some(s) = conn.as_mut() else {
            errors += 1;
            continue;
        };
        let t = Instant::now();
        match scrape(s, &mut body, gzip) {
            Ok(_) => latencies.push(t.elapsed()),
            Err(_) => {
                errors += 1;
                conn = None;
            }
        }
    }
    (latencies, errors)
}

/// The body length of one scrape without and one with `Accept-Encoding: gzip`; the second is
/// `None` when the answer is not gzipped.
fn wire_bytes(addr: &str) -> Result<(usize, Option<usize>)> {
    let s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut s = BufReader::new(s);
    let mut body = Vec::new();
    scrape(&mut s, &mut body, false)?;
    let plain = body.len();
    let gzipped = scrape(&mut s, &mut body, true)?;
    Ok((plain, gzipped.then_some(body.len())))
}

/// One kept-alive scrape, as Prometheus asks (with `Accept-Encoding: gzip` when `gzip`);
/// whether the answer was gzipped.
fn scrape(s: &mut BufReader<TcpStream>, body: &mut Vec<u8>, gzip: bool) -> std::io::Result<bool> {
    let encoding: &[u8] = if gzip {
        b"Accept-Encoding: gzip\r\n"
    } else {
        b""
    };
    let request = [
        &b"GET /metrics HTTP/1.1\r\nHost: bench\r\nAccept: application/openmetrics-text;\
          version=1.0.0,text/plain;version=0.0.4;q=0.5\r\n"[..],
        encoding,
        b"\r\n",
    ]
    .concat();
    s.get_mut().write_all(&request)?;
    let mut gzipped = false;
    let mut len = None;
    let mut line = String::new();
    let mut first = true;
    loop {
        line.clear();
        if s.read_line(&mut line)? == 0 {
            return Err(std::io::Error::other("closed"));
        }
        if first && !line.starts_with("HTTP/1.1 200") {
            return Err(std::io::Error::other(format!("answer: {line}")));
        }
        first = false;
        if line == "\r\n" {
            break;
        }
        let lower = line.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length: ") {
            len = v.trim().parse::<usize>().ok();
        }
        if lower.starts_with("content-encoding: gzip") {
            gzipped = true;
        }
    }
    let len = len.ok_or_else(|| std::io::Error::other("no Content-Length"))?;
    body.resize(len, 0);
    s.read_exact(body)?;
    Ok(gzipped)
}

/// The 1-minute load average of the machine.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split(' ').next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

/// Resident set size of a process, KiB.
fn rss_kib(pid: u32) -> Result<u64> {
    bench_setup::status_kib(pid, "VmRSS").context("no VmRSS in /proc/pid/status")
}

/// What the exporters ran over, for the report's heading.
fn served_by(args: &Args) -> String {
    if args.source.real {
        "this machine's real NVML".to_string()
    } else {
        format!(
            "fake-nvml serving frame {} of {}",
            args.frame,
            args.fixture.display()
        )
    }
}

/// What nvitop-exporter used, idle.
struct PeerIdle {
    /// % of one core.
    cpu: f64,
    threads: Vec<(String, f64)>,
    rss_kib: u64,
    /// The same window by thread, from schedstat.
    idle: Idle,
}

/// Starts nvitop-exporter (from the virtualenv, with `env`) at its 1 s interval, checks that it
/// answers a scrape with GPU metrics, lets it settle, and measures its CPU over `idle` with no
/// scrapes.
fn peer_idle(venv: &Path, env: &[(&str, std::ffi::OsString)], idle: Duration) -> Result<PeerIdle> {
    let port = bench_setup::free_port()?;
    let log = work_dir()?.join("nvitop-exporter.log");
    let mut child = Command::new(venv.join("bin/nvitop-exporter"))
        .args(["--bind-address", "127.0.0.1", "--interval", "1"])
        .args(["--port", &port.to_string()])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .spawn()
        .context("cannot start nvitop-exporter")?;
    let result = (|| -> Result<PeerIdle> {
        let addr = format!("127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(60);
        let body = loop {
            if let Some(b) = plain_get(&addr) {
                break b;
            }
            if let Ok(Some(status)) = child.try_wait() {
                bail!(
                    "nvitop-exporter exited ({status}): {}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            if Instant::now() > deadline {
                bail!("nvitop-exporter did not answer on {addr} within 60 s");
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        if !body.contains("gpu_") {
            bail!("nvitop-exporter's scrape has no GPU metrics:\n{body}");
        }
        std::thread::sleep(Duration::from_secs(2));
        let pid = child.id();
        let a = bench_setup::cpu_sample(pid)?;
        let sched0 = sched(pid)?;
        let t0 = Instant::now();
        std::thread::sleep(idle);
        let secs = t0.elapsed().as_secs_f64();
        let (cpu, threads) = bench_setup::cpu_share(&a, &bench_setup::cpu_sample(pid)?, secs);
        let sched1 = sched(pid)?;
        Ok(PeerIdle {
            cpu,
            threads,
            rss_kib: rss_kib(pid)?,
            idle: idle_between(&sched0, &sched1, secs, cpu),
        })
    })();
    let _ = child.kill();
    let _ = child.wait();
    result
}

/// The body of `GET /metrics` on a fresh connection closed by the server, if it answers 200.
fn plain_get(addr: &str) -> Option<String> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: bench\r\n\r\n")
        .ok()?;
    let mut all = Vec::new();
    s.read_to_end(&mut all).ok()?;
    let text = String::from_utf8_lossy(&all).into_owned();
    let (head, body) = text.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.").then_some(())?;
    head.split(' ').nth(1).filter(|c| *c == "200")?;
    Some(body.to_string())
}

/// Per thread id: name, nanoseconds on a CPU, times run.
type Sched = BTreeMap<u32, (String, u64, u64)>;

/// CPU time and runs of each thread of a process so far, from `/proc/PID/task/*/schedstat`:
/// by thread id, (name, nanoseconds on a CPU, times run). A thread that sleeps between its
/// turns is run once per wake-up, so the runs count its wake-ups.
fn sched(pid: u32) -> Result<Sched> {
    let dir = std::fs::read_dir(format!("/proc/{pid}/task"))
        .with_context(|| format!("process {pid} is gone"))?;
    let mut threads = BTreeMap::new();
    for entry in dir.flatten() {
        let Some(tid) = entry.file_name().to_str().and_then(|t| t.parse().ok()) else {
            continue;
        };
        let name = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        let Ok(stat) = std::fs::read_to_string(entry.path().join("schedstat")) else {
            continue;
        };
        let mut fields = stat.split_whitespace().map(|f| f.parse::<u64>().ok());
        let (Some(Some(ns)), _, Some(Some(runs))) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        threads.insert(tid, (name.trim().to_string(), ns, runs));
    }
    Ok(threads)
}

/// What one exporter used idle over a window.
struct Idle {
    /// % of one core, from `/proc/PID/stat` (10 ms ticks; threads that ended included).
    cpu_ticks: f64,
    /// By thread name (threads of one name summed), dearest first: ms of CPU a second and
    /// wake-ups a second, from schedstat (threads that ended within the window left out).
    threads: Vec<(String, f64, f64)>,
}

impl Idle {
    fn thread_ms(&self) -> f64 {
        self.threads.iter().map(|t| t.1).sum()
    }

    fn wakeups(&self) -> f64 {
        self.threads.iter().map(|t| t.2).sum()
    }

    fn threads_text(&self) -> String {
        self.threads
            .iter()
            .filter(|t| t.1 >= 0.005 || t.2 >= 0.05)
            .map(|(name, ms, w)| format!("{name} {ms:.2} ms/s {w:.1}/s"))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// Measures `pid` idle for `window` (after it has settled).
fn measure_idle(pid: u32, window: Duration) -> Result<Idle> {
    let (ticks0, sched0) = (bench_setup::cpu_seconds(pid)?, sched(pid)?);
    let t0 = Instant::now();
    std::thread::sleep(window);
    let (ticks1, sched1) = (bench_setup::cpu_seconds(pid)?, sched(pid)?);
    let secs = t0.elapsed().as_secs_f64().max(1e-9);
    Ok(idle_between(
        &sched0,
        &sched1,
        secs,
        (ticks1 - ticks0) / secs * 100.0,
    ))
}

/// Threads' schedstat figures `secs` apart, by name, with the process's CPU from ticks.
fn idle_between(sched0: &Sched, sched1: &Sched, secs: f64, cpu_ticks: f64) -> Idle {
    let secs = secs.max(1e-9);
    let mut by_name: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for (tid, (name, ns1, runs1)) in sched1 {
        let (ns0, runs0) = sched0.get(tid).map_or((0, 0), |(_, n, r)| (*n, *r));
        let e = by_name.entry(name.clone()).or_default();
        e.0 += ns1.saturating_sub(ns0) as f64 / 1e6 / secs;
        e.1 += runs1.saturating_sub(runs0) as f64 / secs;
    }
    let mut threads: Vec<(String, f64, f64)> =
        by_name.into_iter().map(|(n, (ms, w))| (n, ms, w)).collect();
    threads.sort_by(|x, y| y.1.total_cmp(&x.1));
    Idle { cpu_ticks, threads }
}

/// `gpuscope export` of `bin` idle: started, settled 3 s, measured over `window`, stopped.
fn gpuscope_idle(
    bin: &Path,
    nvml_args: &[&str],
    env: &[(&str, std::ffi::OsString)],
    names: &str,
    window: Duration,
) -> Result<Idle> {
    let mut source = nvml_args.to_vec();
    source.extend(["--names", names]);
    let mut e = start(bin, &source, env)?;
    std::thread::sleep(Duration::from_secs(3));
    let idle = measure_idle(e.pid, window);
    let _ = e.child.kill();
    let _ = e.child.wait();
    idle
}

/// `--idle-only`: `--rounds` rounds of this build idle, the baseline build idle (when given)
/// and nvitop-exporter idle (unless `--no-peer`), one after another; prints a table.
fn idle_rounds(
    args: &Args,
    bin: &Path,
    baseline: Option<&Path>,
    nvml_args: &[&str],
    env: &[(&str, std::ffi::OsString)],
    venv: &Path,
) -> Result<()> {
    let mut rows: Vec<(usize, String, Idle)> = Vec::new();
    let load_before = load_average();
    for round in 1..=args.rounds.max(1) {
        let idle = gpuscope_idle(bin, nvml_args, env, &args.names, args.idle)?;
        rows.push((round, format!("gpuscope `{}`", bin.display()), idle));
        if let Some(b) = baseline {
            let idle = gpuscope_idle(b, nvml_args, env, &args.names, args.idle)?;
            rows.push((round, format!("baseline `{}`", b.display()), idle));
        }
        if !args.no_peer {
            let peer = peer_idle(venv, env, args.idle)?;
            rows.push((round, "nvitop-exporter --interval 1".into(), peer.idle));
        }
    }
    println!(
        "`export --processes --interval 1s --names {}` and nvitop-exporter, idle, no scrapes, \
         {:.0} s each after 3 s of warm-up; CPU as % of one core from /proc/PID/stat (10 ms \
         ticks, ended threads included); by thread from /proc/PID/task/*/schedstat: ms of CPU \
         a second and wake-ups (times run) a second\n",
        args.names,
        args.idle.as_secs_f64()
    );
    println!("| round | exporter | CPU (ticks) | threads: ms/s | wake-ups/s | / nvitop-exporter (ms/s) | by thread |");
    println!("|---|---|---|---|---|---|---|");
    for (round, name, idle) in &rows {
        let peer = rows
            .iter()
            .find(|(r, n, _)| r == round && n.starts_with("nvitop"))
            .map(|(_, _, p)| p.thread_ms());
        println!(
            "| {round} | {name} | {:.3}% | {:.3} | {:.2} | {} | {} |",
            idle.cpu_ticks,
            idle.thread_ms(),
            idle.wakeups(),
            peer.map_or("-".into(), |p| format!(
                "{:.2}x",
                idle.thread_ms() / p.max(1e-9)
            )),
            idle.threads_text()
        );
    }
    println!(
        "\nMachine load average (1 min) before: {load_before}, after: {}\n",
        load_average()
    );
    Ok(())
}
