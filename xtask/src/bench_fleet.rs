//! `cargo xtask bench-fleet`: one refresh of the fleet view over a synthetic fleet.
//!
//! Writes the answers a Prometheus would give for `--hosts` hosts (default 1,000) with 8 GPUs
//! and 8 processes on each GPU (each process with a user and a command line), serves them from
//! a stub HTTP server on 127.0.0.1 (a std `TcpListener`, keep-alive, answers held in memory),
//! and runs `gpuscope snapshot --prometheus URL` (text) and `--json` against it `--runs` times,
//! output thrown away. For each run it reports:
//!
//! - wall time of the whole refresh (15 queries);
//! - the time gpuscope spends after answers arrive: for each query, from the moment the stub
//!   has written the last byte of the answer to the moment the next query arrives (or the
//!   process exits, for the last one), summed; that is parsing, folding and, at the end,
//!   rendering and writing the output;
//! - the peak RSS (`VmHWM` at exit, as bench-oneshot reads it) and CPU time.
//!
//! The same for the viewer printing its screen once (`top --prometheus URL --once`: the same
//! refresh, then ordering and drawing its rows). Then the viewer itself runs in a terminal
//! (a private tmux server, `--viewer-seconds` long, default 30) at `--viewer-interval`
//! (default 2 s): its CPU over that time (from `/proc/PID/stat`, after the first refresh), as
//! a share of one core, its peak RSS, and how many refreshes the stub served meanwhile.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};

use crate::bench_oneshot::{time_once, Tool};
use crate::bench_setup;

/// Command-line arguments.
#[derive(clap::Args)]
pub struct Args {
    /// Hosts in the synthetic fleet.
    #[arg(long, default_value_t = 1000)]
    hosts: usize,
    /// GPUs per host.
    #[arg(long, default_value_t = 8)]
    gpus: usize,
    /// Processes per GPU.
    #[arg(long, default_value_t = 8)]
    processes: usize,
    /// Runs of each form.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// The gpuscope binary (default: build it in release mode).
    #[arg(long, value_name = "PATH")]
    bin: Option<PathBuf>,
    /// How long the interactive viewer is measured, seconds (0: not run).
    #[arg(long, default_value_t = 30)]
    viewer_seconds: u64,
    /// The interactive viewer's refresh interval, seconds.
    #[arg(long, default_value_t = 2.0)]
    viewer_interval: f64,
    /// Each host's exporter sample moves every this many seconds (Prometheus's scrape
    /// interval), the hosts spread evenly over it: what the viewer's refreshes after the first
    /// ask again.
    #[arg(long, default_value_t = 15.0)]
    scrape_interval: f64,
}

/// What the stub saw: (time the request arrived, time its answer was written, whether it
/// was a refresh's first query).
type Log = Arc<Mutex<Vec<(Instant, Instant, bool)>>>;

const T: f64 = 1_763_800_000.0;

/// gpuscope's `--prometheus-timeout` here: far above any refresh measured.
const REFRESH_LIMIT: &str = "120s";

/// One family's answer, host by host: each host's series as JSON objects joined by commas,
/// so that an answer for any set of hosts is their pieces joined.
type Family = Vec<String>;

fn series_json(labels: &str, value: &str, at: f64) -> String {
    format!(r#"{{"metric":{{{labels}}},"value":[{at},"{value}"]}}"#)
}

/// The answer made of these hosts' pieces of `family`.
fn vector_of<'a>(pieces: impl Iterator<Item = &'a String>) -> String {
    let mut out = String::from(r#"{"status":"success","data":{"resultType":"vector","result":["#);
    let mut first = true;
    for p in pieces.filter(|p| !p.is_empty()) {
        if !first {
            out.push(',');
        }
        first = false;
        out.push_str(p);
    }
    out.push_str("]}}");
    out
}

/// The labels that tell host `h` apart.
fn host_labels(h: usize) -> String {
    format!(
        r#""instance":"{}","job":"gpuscope","hostname":"gpu-node-{h:04}""#,
        instance(h)
    )
}

fn instance(h: usize) -> String {
    format!("10.{}.{}.{}:9445", h / 65536, (h / 256) % 256, h % 256)
}

/// Every family of one refresh but the sample times (made per request), by query.
fn answers(args: &Args) -> Vec<(String, Family)> {
    let device = |h: usize, g: usize| {
        format!(
            r#"{},"index":"{g}","uuid":"GPU-{h:08x}-{g:04x}-4e8f-9a3c-1b2d3e4f5a6b","name":"NVIDIA H100 80GB HBM3""#,
            host_labels(h)
        )
    };
    let devices = |value: &dyn Fn(usize, usize) -> String| -> Family {
        (0..args.hosts)
            .map(|h| {
                (0..args.gpus)
                    .map(|g| series_json(&device(h, g), &value(h, g), T))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .collect()
    };
    let processes = |value: &dyn Fn(usize) -> String| -> Family {
        (0..args.hosts)
            .map(|h| {
                (0..args.gpus)
                    .flat_map(|g| (0..args.processes).map(move |p| (g, p)))
                    .map(|(g, p)| {
                        series_json(
                            &format!(
                                r#"{},"pid":"{}","username":"user{}","command":"python train.py --config configs/run-{p}.yaml --rank {g}""#,
                                device(h, g),
                                10_000 + g * 100 + p,
                                p % 4
                            ),
                            &value(p),
                            T,
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .collect()
    };
    let gib = 1u64 << 30;
    vec![
        (
            "up".into(),
            (0..args.hosts)
                .map(|h| series_json(&host_labels(h), "1", T))
                .collect(),
        ),
        ("gpuscope_device_up".into(), devices(&|_, _| "1".into())),
        (
            "gpuscope_device_memory_total_bytes".into(),
            devices(&|_, _| (80 * gib).to_string()),
        ),
        (
            "gpuscope_device_memory_used_bytes".into(),
            devices(&|h, g| (((h + g) as u64 % 80) * gib).to_string()),
        ),
        (
            "gpuscope_device_memory_free_bytes".into(),
            devices(&|h, g| ((80 - (h + g) as u64 % 80) * gib).to_string()),
        ),
        (
            "gpuscope_device_utilization_ratio".into(),
            devices(&|h, g| format!("{}", ((h * 7 + g) % 101) as f64 / 100.0)),
        ),
        (
            "gpuscope_device_memory_bandwidth_utilization_ratio".into(),
            devices(&|h, g| format!("{}", ((h * 3 + g) % 101) as f64 / 100.0)),
        ),
        (
            "gpuscope_device_temperature_celsius".into(),
            devices(&|h, g| (30 + (h + g) % 50).to_string()),
        ),
        (
            "gpuscope_device_fan_speed_ratio".into(),
            (0..args.hosts).map(|_| String::new()).collect(),
        ),
        (
            "gpuscope_device_power_usage_watts".into(),
            devices(&|h, g| format!("{}.{}", 100 + (h + g) % 600, g)),
        ),
        (
            "gpuscope_device_power_limit_watts".into(),
            devices(&|_, _| "700".into()),
        ),
        ("gpuscope_device_info".into(), devices(&|_, _| "1".into())),
        (
            "gpuscope_process_gpu_memory_bytes".into(),
            processes(&|p| ((p as u64 + 1) * gib).to_string()),
        ),
        (
            "gpuscope_process_gpu_sm_utilization_ratio".into(),
            processes(&|p| format!("{}", p as f64 / 10.0)),
        ),
    ]
}

const SAMPLE_TIMES: &str = "last_over_time(gpuscope_exporter_sample_timestamp_seconds[15m])";

/// How the stub answers: the families, and the clock of the exporters' samples.
struct Stub {
    families: Vec<(String, Family)>,
    /// Host by instance, for selectors.
    by_instance: std::collections::HashMap<String, usize>,
    started: Instant,
    /// Each host's exporter takes a new sample every this many seconds (Prometheus's scrape
    /// interval), the hosts spread evenly over it.
    scrape: f64,
}

impl Stub {
    /// The answer to `query`: the sample times as of now; a family for every host, or for
    /// the hosts an `{instance=~"a|b"}` selector names.
    fn answer(&self, query: &str) -> Option<String> {
        let n = self.by_instance.len();
        if query == SAMPLE_TIMES {
            let elapsed = self.started.elapsed().as_secs_f64();
            let now = T + elapsed;
            let pieces: Vec<String> = (0..n)
                .map(|h| {
                    let phase = self.scrape * h as f64 / n.max(1) as f64;
                    let scrapes = ((elapsed + phase) / self.scrape).floor();
                    let t = T + scrapes * self.scrape - phase;
                    series_json(&host_labels(h), &format!("{t:.3}"), now)
                })
                .collect();
            return Some(vector_of(pieces.iter()));
        }
        let (family, hosts) = match query.split_once("{instance=~\"") {
            None => (query, None),
            Some((family, rest)) => {
                let regex = rest.strip_suffix("\"}")?.replace("\\\\", "\\");
                let mut hosts = Vec::new();
                for alt in regex.split('|') {
                    hosts.push(*self.by_instance.get(&alt.replace('\\', ""))?);
                }
                (family, Some(hosts))
            }
        };
        let (_, pieces) = self.families.iter().find(|(q, _)| q == family)?;
        Some(match hosts {
            None => vector_of(pieces.iter()),
            Some(hosts) => vector_of(hosts.iter().filter_map(|&h| pieces.get(h))),
        })
    }
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                out.push(u8::from_str_radix(hex, 16).unwrap_or(b'?'));
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn serve(stream: TcpStream, stub: &Stub, log: &Log) -> Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let arrived = Instant::now();
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h)? == 0 || h.trim_end().is_empty() {
                break;
            }
        }
        let target = line.split_whitespace().nth(1).unwrap_or("");
        let query = target
            .split_once('?')
            .and_then(|(_, q)| q.split('&').find_map(|kv| kv.strip_prefix("query=")))
            .map(decode)
            .unwrap_or_default();
        let body = stub.answer(&query).unwrap_or_else(|| {
            r#"{"status":"error","errorType":"bad_data","error":"unknown"}"#.to_string()
        });
        let mut w = &stream;
        write!(
            w,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )?;
        w.write_all(body.as_bytes())?;
        w.flush()?;
        if let Ok(mut l) = log.lock() {
            l.push((arrived, Instant::now(), query == SAMPLE_TIMES));
        }
    }
}

/// Runs the benchmark.
pub fn run(args: Args) -> Result<()> {
    ensure!(args.runs > 0, "--runs must be at least 1");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("xtask has a parent directory")?
        .to_path_buf();
    let bin = match args.bin.clone() {
        Some(b) => b,
        None => {
            let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
                .args(["build", "--release", "-p", "gpuscope"])
                .current_dir(&root)
                .status()?;
            ensure!(status.success(), "cargo build --release -p gpuscope failed");
            let target = std::env::var_os("CARGO_TARGET_DIR")
                .map_or_else(|| root.join("target"), PathBuf::from);
            target.join("release/gpuscope")
        }
    };
    let families = answers(&args);
    let stub = Arc::new(Stub {
        by_instance: (0..args.hosts).map(|h| (instance(h), h)).collect(),
        families,
        started: Instant::now(),
        scrape: args.scrape_interval,
    });
    let queries = stub.families.len() + 1;
    let bytes: usize = stub
        .families
        .iter()
        .map(|(q, _)| stub.answer(q).map_or(0, |b| b.len()))
        .sum::<usize>()
        + stub.answer(SAMPLE_TIMES).map_or(0, |b| b.len());
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://{}", listener.local_addr()?);
    let log: Log = Arc::default();
    {
        let stub = stub.clone();
        let log = log.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let stub = stub.clone();
                let log = log.clone();
                std::thread::spawn(move || {
                    let _ = serve(stream, &stub, &log);
                });
            }
        });
    }
    println!(
        "bench-fleet: {} hosts x {} GPUs x {} processes; {} queries, {:.1} MB of answers per refresh",
        args.hosts,
        args.gpus,
        args.processes,
        queries,
        bytes as f64 / 1e6
    );
    for form in ["text", "json", "top --once"] {
        for _ in 0..args.runs {
            if let Ok(mut l) = log.lock() {
                l.clear();
            }
            let mut tool_args: Vec<std::ffi::OsString> = match form {
                "top --once" => vec!["top".into(), "--once".into()],
                _ => vec!["snapshot".into()],
            };
            // A whole refresh is measured, however slow the build or the machine: the
            // refresh's time limit (5 s by default) would cut a debug build's short.
            tool_args.extend([
                "--prometheus".into(),
                url.clone().into(),
                "--prometheus-timeout".into(),
                REFRESH_LIMIT.into(),
            ]);
            if form == "json" {
                tool_args.push("--json".into());
            }
            let tool = Tool {
                label: "gpuscope",
                program: bin.clone(),
                args: tool_args,
            };
            let start = Instant::now();
            let run = time_once(&tool, &[])?;
            let end = start + run.wall;
            let l = log.lock().map(|l| l.clone()).unwrap_or_default();
            ensure!(
                l.len() == queries,
                "{} queries asked, expected {}",
                l.len(),
                queries
            );
            let mut after = Duration::ZERO;
            for (i, &(_, written, _)) in l.iter().enumerate() {
                let next = l.get(i + 1).map_or(end, |&(arrived, _, _)| arrived);
                after += next.saturating_duration_since(written);
            }
            let last = end.saturating_duration_since(l.last().map_or(end, |&(_, w, _)| w));
            println!(
                "{:<10} wall {:>6.0} ms  after answers {:>6.0} ms (after the last {:>5.0} ms)  cpu {:>6.0} ms  peak RSS {:>5.1} MB",
                form,
                run.wall.as_secs_f64() * 1e3,
                after.as_secs_f64() * 1e3,
                last.as_secs_f64() * 1e3,
                run.cpu.as_secs_f64() * 1e3,
                run.max_rss_kib as f64 / 1024.0,
            );
        }
    }
    if args.viewer_seconds > 0 {
        viewer(&bin, &url, &args, &log)?;
    }
    Ok(())
}

/// CPU time (user + system) of `pid` so far.
fn cpu_time(pid: u32) -> Result<Duration> {
    Ok(Duration::from_secs_f64(bench_setup::cpu_seconds(pid)?))
}

/// `VmHWM` of `pid`, KiB.
fn peak_rss_kib(pid: u32) -> Result<u64> {
    bench_setup::status_kib(pid, "VmHWM").context("VmHWM in /proc/PID/status")
}

/// The interactive viewer in a private tmux server: CPU share and peak RSS over
/// `--viewer-seconds` at `--viewer-interval`.
fn viewer(bin: &Path, url: &str, args: &Args, log: &Log) -> Result<()> {
    let socket = format!("gpuscope-bench-fleet-{}", std::process::id());
    let tmux = |a: &[&str]| -> Result<String> {
        let out = Command::new("tmux")
            .args(["-L", &socket, "-f", "/dev/null"])
            .args(a)
            .output()
            .context("tmux runs (the viewer is measured in a terminal)")?;
        ensure!(
            out.status.success(),
            "tmux {a:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let command = format!(
        "exec {} top --prometheus {url} --prometheus-timeout {REFRESH_LIMIT} --interval {}s",
        bin.display(),
        args.viewer_interval
    );
    tmux(&[
        "new-session",
        "-d",
        "-s",
        "b",
        "-x",
        "200",
        "-y",
        "50",
        &command,
    ])?;
    let measured = (|| -> Result<()> {
        let pid: u32 = tmux(&["display-message", "-p", "-t", "b", "#{pane_pid}"])?
            .trim()
            .parse()
            .context("the pane's PID")?;
        // The first refresh on the screen.
        let started = Instant::now();
        loop {
            let screen = tmux(&["capture-pane", "-p", "-t", "b"])?;
            if screen.contains(&format!("{} hosts", args.hosts)) {
                break;
            }
            ensure!(
                started.elapsed() < Duration::from_secs(60),
                "the viewer showed no fleet within 60 s:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        println!(
            "viewer: first screen {:.0} ms after start",
            started.elapsed().as_secs_f64() * 1e3
        );
        let count = |log: &Log| {
            log.lock()
                .map(|l| (l.len(), l.iter().filter(|e| e.2).count()))
                .unwrap_or((0, 0))
        };
        let (served_before, refreshes_before) = count(log);
        let cpu0 = cpu_time(pid)?;
        let t0 = Instant::now();
        std::thread::sleep(Duration::from_secs(args.viewer_seconds));
        let cpu = cpu_time(pid)?.saturating_sub(cpu0);
        let wall = t0.elapsed();
        let (served, refreshes) = count(log);
        let served = served - served_before;
        let refreshes = refreshes - refreshes_before;
        println!(
            "viewer at a {}s refresh (samples moving every {}s) over {:.1} s: cpu {:.0} ms = {:.1}% of a core, {} refreshes ({} queries), {:.0} ms cpu per refresh, peak RSS {:.1} MB",
            args.viewer_interval,
            args.scrape_interval,
            wall.as_secs_f64(),
            cpu.as_secs_f64() * 1e3,
            100.0 * cpu.as_secs_f64() / wall.as_secs_f64(),
            refreshes,
            served,
            cpu.as_secs_f64() * 1e3 / (refreshes as f64).max(1.0),
            peak_rss_kib(pid)? as f64 / 1024.0
        );
        Ok(())
    })();
    let _ = tmux(&["kill-server"]);
    measured
}
