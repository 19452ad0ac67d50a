//! `gpuscope export`: a Prometheus exporter. A sampler thread takes a snapshot of the host,
//! every device and MIG device (and, when asked, every GPU process) at each interval, and
//! encodes it once; HTTP connections serve the latest encoding and never wait on the GPUs.
//! Metric and label names: docs/exporter.md.

mod exposition;
mod families;
mod server;
mod shared;
mod web_config;

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use gpu_processes::ProcessCollector;

use crate::source::{SourceArgs, UsageError};
use families::Options;
use shared::{Exposition, Health, Shared};
use web_config::WebConfig;

/// Command-line arguments.
#[derive(Debug, clap::Args)]
#[command(after_help = crate::source::EXIT_CODES_HELP)]
pub struct Args {
    #[command(flatten)]
    source: SourceArgs,

    /// Address to listen on: ADDRESS:PORT, :PORT (every IPv4 address) or HOST:PORT (resolved).
    /// The default serves this machine only; `--listen :9445` serves the network. Port 0
    /// picks a free port (the address is printed).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9445")]
    listen: String,

    /// Time between samples: seconds (`2`, `0.5`) or with a unit (`500ms`, `1s`, `2m`); 50ms
    /// (faster only burns CPU) to 1h. A scrape serves the latest sample.
    #[arg(short = 'i', long, value_name = "DURATION", default_value = "1s", value_parser = crate::args::duration(crate::args::INTERVAL))]
    interval: Duration,

    /// Publish per-process metrics (GPU memory, utilization, CPU, RSS, running time).
    #[arg(long)]
    processes: bool,

    /// With --processes: add each process's command line as a `command` label. Off by default:
    /// command lines can hold secrets.
    #[arg(long, requires = "processes")]
    process_command: bool,

    /// Publish NVLink traffic and error counters per link, with a `link` label. By default each
    /// is summed over the device's links: an 8-GPU H100 box has 18 links a GPU and 6 such
    /// counters a link, 864 series a scrape that most fleets only ever sum (dcgm-exporter
    /// leaves its per-link fields out by default).
    #[arg(long)]
    nvlink_per_link: bool,

    /// The `hostname` label (default: the host's name, or the name recorded in a fixture).
    #[arg(long, value_name = "NAME")]
    hostname: Option<String>,

    /// TLS and basic auth, in the Prometheus exporter-toolkit's web configuration format
    /// (`tls_server_config`, `basic_auth_users`; see docs/exporter.md).
    #[arg(long = "web.config.file", value_name = "FILE")]
    web_config_file: Option<PathBuf>,

    /// For tests: the sampler thread panics after this many samples.
    #[arg(long, hide = true, value_name = "N")]
    test_stop_sampler_after: Option<u64>,
}

/// Runs the command: serves until killed.
pub fn run(args: Args) -> anyhow::Result<()> {
    let listen: SocketAddr =
        crate::args::parse_listen(&args.listen).map_err(|e| UsageError(format!("--listen {e}")))?;
    let interval = args.interval;
    if args.hostname.as_deref() == Some("") {
        return Err(UsageError("--hostname must not be empty".into()).into());
    }
    let web = match &args.web_config_file {
        Some(path) => WebConfig::load(path)?,
        None => WebConfig::none(),
    };
    let source = args.source.open()?;
    let collector = source.collector;
    collector.context().set_query_plan(query_plan());
    let hostname = args
        .hostname
        .clone()
        .or_else(|| collector.host().machine().hostname)
        .unwrap_or_else(|| "unknown".to_string());
    let options = Options {
        hostname,
        processes: args.processes,
        process_command: args.process_command,
        nvlink_per_link: args.nvlink_per_link,
        driver_version: collector.context().driver_version().value().cloned(),
        cuda_driver_version: collector.context().cuda_driver_version().value().cloned(),
    };

    let listener =
        TcpListener::bind(listen).with_context(|| format!("cannot listen on {listen}"))?;
    let bound = listener
        .local_addr()
        .context("cannot read the bound address")?;
    listener
        .set_nonblocking(true)
        .context("cannot make the listening socket non-blocking")?;

    // The first sample is taken before the first connection is accepted, so that no scrape sees
    // an empty exposition.
    let mut sampler = Sampler {
        collector,
        options: Arc::new(options),
        shared: None,
        stop_after: args.test_stop_sampler_after,
        taken: 0,
    };
    let first = sampler.sample()?;
    let shared = Arc::new(Shared::new(first, interval));
    sampler.shared = Some(shared.clone());
    let on_exit = shared.clone();
    std::thread::Builder::new()
        .name("gpuscope-sampler".into())
        .spawn(move || {
            // A panic (or a return) ends sampling: say so, so that /health and /metrics turn
            // to 503 at once instead of serving the last sample for ever.
            let why = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                sampler.run(interval)
            })) {
                Ok(()) => "the sampler thread returned".to_string(),
                Err(panic) => {
                    let message = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "no message".into());
                    format!("the sampler thread panicked: {message}")
                }
            };
            on_exit.set_stopped(why);
        })
        .context("cannot start the sampler thread")?;

    // One thread serves every connection: with work-stealing workers, a scrape woken on one
    // worker and run on another waits for a cross-thread wake-up, which measured a p99 of
    // 2.4 to 4 ms at 200 scrapes/s against 0.34 ms for a current-thread runtime
    // (docs/benchmarks.md). bcrypt checks still run off this thread, on the blocking pool.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .max_blocking_threads(2)
        .thread_name("gpuscope-http")
        .enable_io()
        .enable_time()
        .build()
        .context("cannot start the HTTP runtime")?;
    let server = Arc::new(server::Server::new(shared.clone(), web, server::LIMITS));
    eprintln!(
        "gpuscope: listening on {}://{bound}/metrics ({}, every {})",
        server.scheme(),
        gpu_devices::text::Escaped(&source.label),
        humantime::format_duration(interval)
    );
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener)
            .context("cannot hand the listening socket to the runtime")?;
        tokio::spawn(watch_health(shared));
        server::serve(listener, server).await;
        Ok(())
    })
}

/// Logs each change of health to stderr, once per change.
async fn watch_health(shared: Arc<Shared>) {
    let tick = (shared.interval() / 2).clamp(Duration::from_millis(25), Duration::from_secs(1));
    let mut last = Health::Fresh;
    loop {
        tokio::time::sleep(tick).await;
        let now = shared.health();
        if !now.same_kind(&last) {
            match now.reason() {
                Some(why) => {
                    eprintln!("gpuscope: unhealthy, /health and /metrics answer 503: {why}")
                }
                None => eprintln!("gpuscope: healthy again"),
            }
        }
        last = now;
    }
}

/// Takes samples and publishes their encodings.
struct Sampler {
    collector: ProcessCollector,
    options: Arc<Options>,
    shared: Option<Arc<Shared>>,
    stop_after: Option<u64>,
    taken: u64,
}

impl Sampler {
    fn run(mut self, interval: Duration) {
        let mut next = Instant::now() + interval;
        loop {
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
            match self.sample() {
                Ok(e) => {
                    if let Some(shared) = &self.shared {
                        shared.publish(e);
                    }
                }
                Err(e) => eprintln!(
                    "gpuscope: cannot encode a sample: {}",
                    gpu_devices::text::Escaped(&e.to_string())
                ),
            }
            if self.stop_after.is_some_and(|n| self.taken >= n) {
                panic!(
                    "stopped after {} samples, as --test-stop-sampler-after asked",
                    self.taken
                );
            }
            // After a stall (a suspended machine, a slow NVML) start afresh instead of catching
            // up with a burst of samples.
            let now = Instant::now();
            next = next.checked_add(interval).unwrap_or(now);
            if next < now {
                next = now + interval;
            }
        }
    }

    fn sample(&mut self) -> anyhow::Result<Exposition> {
        let started = Instant::now();
        let snapshots = self.collector.take_all();
        let host = self.collector.host();
        let machine = host.machine();
        let frame = host.sample();
        let sample_duration_s = started.elapsed().as_secs_f64();
        let sample_time_s = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let inputs = families::Inputs {
            snapshots,
            machine,
            host: frame,
            sample_duration_s,
            sample_time_s,
        };
        self.taken += 1;
        // Turned into families and encoded when a scrape asks (see `Exposition`).
        Ok(Exposition::new(inputs, Arc::clone(&self.options), started))
    }
}

/// How often the exporter asks the queries that cost most of a call on a real GPU (an H100:
/// PCIe throughput 20.8 ms asleep each way, energy 2.5-3.2 ms, GPM metrics 1.2-2.1 ms, BAR1
/// 0.2-0.7 ms, the PCIe replay counter 0.2-0.4 ms, the current PCIe link 0.1 ms): every 10 s,
/// whatever the interval. Energy and the replay counter are counters, so Prometheus' `rate()`
/// over them is as good; GPM figures are then the activity over 10 s; PCIe throughput is
/// NVML's 20 ms sample, taken every 10 s.
pub(crate) const COSTLY_EVERY: Duration = Duration::from_secs(10);

/// How often the exporter asks per-process utilization (1.4-2.2 ms a call on an H100) while a
/// GPU has processes: each process's SM share is then at most this old (under the 15 s after
/// which a sample is dropped).
pub(crate) const PROCESS_UTILIZATION_EVERY: Duration = Duration::from_secs(5);

/// What a refresh of the exporter asks: every family it exports, the costly ones every
/// [`COSTLY_EVERY`], per-process utilization (for the process and pod families) every
/// [`PROCESS_UTILIZATION_EVERY`] while a GPU has processes.
pub(crate) fn query_plan() -> gpu_devices::QueryPlan {
    use gpu_devices::Cadence;
    let costly = Cadence::Every(COSTLY_EVERY);
    gpu_devices::QueryPlan::everything()
        .with("total_energy_consumption", costly)
        .with("pcie_throughput", costly)
        .with("gpm_metrics", costly)
        .with("bar1_memory_info", costly)
        .with("pcie_replay_counter", costly)
        .with("current_pcie_link_generation", costly)
        .with("current_pcie_link_width", costly)
        .with(
            "process_utilization",
            Cadence::Every(PROCESS_UTILIZATION_EVERY),
        )
}
