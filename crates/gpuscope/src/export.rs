//! `gpuscope export`: a Prometheus exporter. A sampler thread takes a snapshot of the host,
//! every device and MIG device (and, when asked, every GPU process) at each interval, and
//! encodes it once; HTTP connections serve the latest encoding and never wait on the GPUs.
//! Metric and label names: docs/exporter.md.

mod exposition;
mod families;
mod server;

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use gpu_processes::ProcessCollector;

use crate::source::{SourceArgs, UsageError};
use families::Options;
use server::{Exposition, Shared};

/// Command-line arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    source: SourceArgs,

    /// Address to listen on. The default serves this machine only; `--listen 0.0.0.0:9445`
    /// serves the network. Port 0 picks a free port (the address is printed).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9445")]
    listen: String,

    /// Time between samples: seconds (`2`, `0.5`) or with a unit (`500ms`, `1s`, `2m`); 50ms
    /// (faster only burns CPU) to 1h. A scrape serves the latest sample.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = crate::args::duration(crate::args::EXPORT_INTERVAL))]
    interval: Duration,

    /// Publish per-process metrics (GPU memory, utilization, CPU, RSS, running time).
    #[arg(long)]
    processes: bool,

    /// With --processes: add each process's command line as a `command` label. Off by default:
    /// command lines can hold secrets.
    #[arg(long, requires = "processes")]
    process_command: bool,

    /// The `hostname` label (default: the host's name, or the name recorded in a fixture).
    #[arg(long, value_name = "NAME")]
    hostname: Option<String>,
}

/// Runs the command: serves until killed.
pub fn run(args: Args) -> anyhow::Result<()> {
    let listen: SocketAddr = args.listen.parse().map_err(|e| {
        UsageError(format!(
            "--listen {:?}: {e}; expected an address and port such as 127.0.0.1:9445",
            args.listen
        ))
    })?;
    let interval = args.interval;
    if args.hostname.as_deref() == Some("") {
        return Err(UsageError("--hostname must not be empty".into()).into());
    }
    let source = args.source.open()?;
    let collector = source.collector;
    let hostname = args
        .hostname
        .clone()
        .or_else(|| collector.host().machine().hostname)
        .unwrap_or_else(|| "unknown".to_string());
    let options = Options {
        hostname,
        processes: args.processes,
        process_command: args.process_command,
    };

    let listener =
        TcpListener::bind(listen).with_context(|| format!("cannot listen on {listen}"))?;
    let bound = listener
        .local_addr()
        .context("cannot read the bound address")?;

    let shared = Arc::new(Shared::default());
    // The first sample is taken before the first connection is accepted, so that no scrape sees
    // an empty exposition.
    let mut sampler = Sampler {
        collector,
        options,
        shared: shared.clone(),
    };
    sampler.sample_once()?;
    std::thread::Builder::new()
        .name("gpuscope-sampler".into())
        .spawn(move || sampler.run(interval))
        .context("cannot start the sampler thread")?;

    eprintln!(
        "gpuscope: listening on http://{bound}/metrics ({}, every {})",
        gpu_devices::text::Escaped(&source.label),
        humantime::format_duration(interval)
    );
    server::serve(listener, shared).context("the HTTP server stopped")
}

/// Takes samples and publishes their encodings.
struct Sampler {
    collector: ProcessCollector,
    options: Options,
    shared: Arc<Shared>,
}

impl Sampler {
    fn run(mut self, interval: Duration) {
        let mut next = Instant::now() + interval;
        loop {
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
            if let Err(e) = self.sample_once() {
                eprintln!(
                    "gpuscope: cannot encode a sample: {}",
                    gpu_devices::text::Escaped(&e.to_string())
                );
            }
            next += interval;
            // After a stall (a suspended machine, a slow NVML) start afresh instead of catching
            // up with a burst of samples.
            let now = Instant::now();
            if next < now {
                next = now + interval;
            }
        }
    }

    fn sample_once(&mut self) -> anyhow::Result<()> {
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
            snapshots: &snapshots,
            machine: &machine,
            host: &frame,
            sample_duration_s,
            sample_time_s,
        };
        let families = families::build(&inputs, &self.options);
        let text = exposition::encode_text(&families);
        let openmetrics =
            exposition::encode_openmetrics(families).context("cannot encode OpenMetrics text")?;
        self.shared.publish(Exposition {
            text: text.into_bytes(),
            openmetrics: openmetrics.into_bytes(),
        });
        Ok(())
    }
}
