//! gpuscope: watch and choose NVIDIA GPUs.

mod args;
mod compact;
mod doctor;
mod export;
mod fleet;
mod front_doors;
mod info;
mod log;
mod output;
mod query;
mod record;
mod select;
mod shell;
mod smi;
mod snapshot;
mod source;
mod stat;
mod top;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::output::{escape_lines, write_stdout};
use crate::source::SourceArgs;

/// Watch and choose NVIDIA GPUs.
#[derive(Parser)]
#[command(name = "gpuscope", version, propagate_version = true, about, long_about = None, after_help = shell::DEFAULT_COMMAND_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log what gpuscope does to stderr: -v what it opened, -vv also every
    /// refresh, HTTP request and Prometheus query with its time, -vvv everything.
    /// GPUSCOPE_LOG (else RUST_LOG) takes tracing filter directives, such as
    /// `gpuscope::export=debug`; docs/logging.md.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
}

#[derive(Subcommand)]
enum Command {
    /// Print every device (and MIG device) with its main figures and processes, once.
    #[command(after_help = source::EXIT_CODES_HELP)]
    Snapshot {
        #[command(flatten)]
        source: SourceArgs,
        /// Print JSON (documented in docs/snapshot-json.md; docs/fleet.md with --prometheus)
        /// instead of a table.
        #[arg(long)]
        json: bool,
        /// Print only these fields of every GPU as CSV, e.g. `index,name,memory.used`, with
        /// nvidia-smi's `--query-gpu` names; `--query help` lists them.
        #[arg(long, value_name = "FIELDS", conflicts_with = "json")]
        query: Option<String>,
        /// With --query: `csv`, optionally with `noheader` and/or `nounits`
        /// (`csv,noheader,nounits`), as nvidia-smi's `--format`.
        #[arg(long, value_name = "FORMAT", requires = "query", value_parser = query::parse_format)]
        format: Option<query::Format>,
        #[command(flatten)]
        compact: compact::CompactArgs,
        #[command(flatten)]
        fleet: fleet::FleetArgs,
        #[command(flatten)]
        view: fleet::ViewArgs,
    },
    /// The interactive process viewer.
    Top(top::Args),
    /// A readable multi-section view of one device, or all.
    Info(info::Args),
    /// Choose devices by free memory, utilization and more; prints a CUDA_VISIBLE_DEVICES value.
    Select(select::Args),
    /// Record memory use (and more) over time until Ctrl+C, then save a plot.
    Record(record::Args),
    /// Serve Prometheus metrics for the host, every device and (optionally) every GPU process.
    Export(export::Args),
    /// Check what NVML costs and tells here, and what hides processes: each query's time, what
    /// is not supported or denied, versions, events, /proc's hidepid and the PID namespace,
    /// each with a verdict (exit 1 on a failure). `--json` prints the cost profile.
    Doctor(doctor::Args),
    /// gpustat's options and JSON over the compact view (`-cpu`, `-a`, `-e`, `-f`, `--id`,
    /// `--no-processes`, `-i`, `--json`); also what a link named `gpustat` runs.
    Stat(stat::Args),
    /// Make links named nvidia-smi, gpustat, nvitop and nvisel that run gpuscope as those
    /// tools (gpuscope smi, stat, top, select with the tool's spellings).
    InstallLinks(front_doors::InstallArgs),
    /// nvidia-smi's read-only options over any source (its table, `-L`, `-q [-d ...] [-x]`, `-i`,
    /// `-l`/`-lms`, `--query-gpu=...`, `--query-compute-apps=...`, `--format=csv,...`), printing
    /// what nvidia-smi prints; `gpuscope smi --help` lists them (docs/smi.md).
    #[command(disable_help_flag = true)]
    Smi {
        /// nvidia-smi's options, and gpuscope's --fixture, --frame, --demo, --nvml-lib.
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "NVIDIA-SMI OPTIONS"
        )]
        args: Vec<std::ffi::OsString>,
    },
    /// Print a completion script for a shell, e.g. `gpuscope completions bash >
    /// ~/.local/share/bash-completion/completions/gpuscope`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

fn main() -> ExitCode {
    let args: Vec<_> = std::env::args_os().collect();
    let result = match shell::man_dir(&args) {
        Some(dir) => shell::man_pages(&dir),
        None => {
            let args = front_doors::route(args);
            if let Some(why) = front_doors::peer_short_refused(&args) {
                eprintln!("gpuscope: {why}");
                return ExitCode::from(2);
            }
            run(shell::parse(shell::with_default_command(
                shell::with_demo_value(args),
                shell::on_terminal(),
            )))
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // The message can echo outside text (a fixture's or the driver's error text, a
            // device or process name): control characters are escaped, our own line breaks
            // kept.
            eprintln!("gpuscope: {}", escape_lines(&format!("{e:#}")));
            if e.downcast_ref::<source::UsageError>().is_some() {
                ExitCode::from(2)
            } else if let Some(short) = e.downcast_ref::<source::Shortfall>() {
                ExitCode::from(short.code)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    log::init(cli.verbose)?;
    match cli.command {
        Command::Snapshot {
            source,
            json,
            query,
            format,
            compact,
            fleet,
            view,
        } => {
            if query.as_deref().map(str::trim) == Some("help") {
                return write_stdout(&query::help());
            }
            if query.is_some() && fleet.is_set() {
                return Err(source::UsageError(
                    "--query reads this machine's GPUs; it does not go with --prometheus or --remote"
                        .into(),
                )
                .into());
            }
            if !compact.only.is_empty() && fleet.is_set() {
                return Err(source::UsageError(
                    "--only names this machine's devices; with --prometheus or --remote use \
                     --filter gpu:ID"
                        .into(),
                )
                .into());
            }
            if fleet.is_set() {
                return fleet::snapshot(&fleet, &view, json);
            }
            if compact.compact && fleet.is_set() {
                return Err(source::UsageError(
                    "--compact reads this machine's GPUs; it does not go with --prometheus or \
                     --remote"
                        .into(),
                )
                .into());
            }
            if view.filter.is_some() || view.sort != Default::default() {
                return Err(source::UsageError(
                    "--sort and --filter go with --prometheus or --remote".into(),
                )
                .into());
            }
            let src = source.open()?;
            // --json --watch writes JSON Lines: one compact document a line.
            let json_lines = view.every(false).is_some();
            let render = |view: &snapshot::SnapshotView,
                          raw: &[gpu_devices::DeviceSnapshot]|
             -> anyhow::Result<String> {
                Ok(if let Some(q) = &query {
                    query::render(view, raw, q, format.unwrap_or_default())?
                } else if compact.compact {
                    compact::render(view, &compact, compact.width(), compact.colour())
                } else if json && json_lines {
                    serde_json::to_string(view)? + "\n"
                } else if json {
                    serde_json::to_string_pretty(view)? + "\n"
                } else {
                    snapshot::render_text(view)
                })
            };
            // --watch: the whole output again every interval until Ctrl+C; on a terminal the
            // screen is cleared first.
            use std::io::IsTerminal as _;
            let clear = std::io::stdout().is_terminal() && !json && query.is_none();
            snapshot::print_each(src, view.every(false), clear, |v| compact.keep_only(v), render)
        }
        Command::Top(args) => top::run(args),
        Command::Info(args) => info::run(args),
        Command::Select(args) => select::run(args),
        Command::Record(args) => record::run(args),
        Command::Export(args) => export::run(args),
        Command::Doctor(args) => doctor::run(args),
        Command::Stat(args) => stat::run(args),
        Command::InstallLinks(args) => front_doors::install_links(args),
        Command::Smi { args } => smi::run(args),
        Command::Completions { shell } => shell::completions(shell),
    }
}
