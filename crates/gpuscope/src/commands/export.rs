//! `gpuscope export`: a Prometheus exporter. The arguments, then a call into `gpu-export`,
//! which does the work: a sampler thread takes a snapshot of the host, every device and MIG
//! device (and, when asked, every GPU process) at each interval, and encodes it once; HTTP
//! connections serve the latest encoding and never wait on the GPUs. Metric and label names:
//! docs/exporter.md.

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use gpu_export::{Config, Exporter, Options, WebConfig};

use crate::error::UsageError;
use crate::source::SourceArgs;

/// Command-line arguments.
#[derive(Debug, clap::Args)]
#[command(after_help = crate::error::EXIT_CODES_HELP)]
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
    #[arg(short = 'i', long, value_name = "DURATION", default_value = "1s", value_parser = crate::cli::args::duration(crate::cli::args::INTERVAL))]
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

    /// The names to publish under, comma-separated: gpuscope (gpuscope's own), dcgm
    /// (dcgm-exporter's DCGM_FI_*), nvidia-smi (nvidia_gpu_exporter's nvidia_smi_*), or several
    /// at once during a migration (gpuscope,dcgm). docs/exporter.md lists each door's names.
    #[arg(long, value_name = "LIST", default_value = "gpuscope", env = "GPUSCOPE_EXPORT_NAMES", value_parser = parse_names)]
    names: gpu_export::Doors,

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

/// `--names`: gpu-export's doors, or why not.
fn parse_names(list: &str) -> Result<gpu_export::Doors, String> {
    list.parse()
        .map_err(|e: gpu_export::DoorsError| e.to_string())
}

/// A listening socket on `addr` with [`gpu_export::LISTEN_BACKLOG`] (std's `bind` asks for
/// 128, which a flood of reconnecting clients fills), `SO_REUSEADDR` set as std's `bind`
/// sets it (a restarted exporter listens at once on a port whose old connections linger in
/// `TIME_WAIT`), close-on-exec.
fn listen_on(addr: SocketAddr) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    #[cfg(unix)]
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(gpu_export::LISTEN_BACKLOG)?;
    Ok(socket.into())
}

/// Runs the command: serves until killed.
pub fn run(args: Args) -> anyhow::Result<()> {
    let listen: SocketAddr = crate::cli::args::parse_listen(&args.listen)
        .map_err(|e| UsageError(format!("--listen {e}")))?;
    let interval = args.interval;
    if args.hostname.as_deref() == Some("") {
        return Err(UsageError("--hostname must not be empty".into()).into());
    }
    let web = match &args.web_config_file {
        Some(path) => {
            WebConfig::load(path).map_err(|e| UsageError(format!("--web.config.file {e}")))?
        }
        None => WebConfig::none(),
    };
    let source = args.source.open()?;
    let collector = source.collector;
    collector.context().set_query_plan(gpu_export::query_plan());
    let defaults = Options::of(&collector);
    let options = Options {
        hostname: args.hostname.clone().unwrap_or(defaults.hostname),
        processes: args.processes,
        process_command: args.process_command,
        nvlink_per_link: args.nvlink_per_link,
        names: args.names,
        ..defaults
    };

    let listener = listen_on(listen).with_context(|| format!("cannot listen on {listen}"))?;
    let bound = listener
        .local_addr()
        .context("cannot read the bound address")?;

    // The first sample is taken before the first connection is accepted, so that no scrape sees
    // an empty exposition.
    let config = Config {
        stop_sampler_after: args.test_stop_sampler_after,
        web,
        ..Config::new(interval)
    };
    let exporter = Exporter::start(collector, options, config)?;
    eprintln!(
        "gpuscope: listening on {}://{bound}/metrics ({}, every {}, names {})",
        exporter.scheme(),
        gpu_devices::text::Escaped(&source.label),
        humantime::format_duration(interval),
        args.names
    );
    // Each change of health, to stderr, once per change.
    exporter.run(listener, |health| match health.reason() {
        Some(why) => eprintln!(
            "gpuscope: unhealthy, /health and /metrics answer 503: {}",
            gpu_devices::text::Escaped(why)
        ),
        None => eprintln!("gpuscope: healthy again"),
    })?;
    Ok(())
}
