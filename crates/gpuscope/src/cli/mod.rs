//! The command line: the parser of every command (`Cli`), and what `main` does with it: the
//! front doors' routing, the default command, the log, and the exit code of an error.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::commands::{doctor, export, info, record, select, smi, snapshot, stat, top};
use crate::present::text::escape_lines;
use crate::{log, source};

pub mod args;
pub mod front_doors;
pub mod shell;

/// Watch and choose NVIDIA GPUs.
#[derive(Parser)]
#[command(name = "gpuscope", version, propagate_version = true, about, long_about = None, after_help = shell::DEFAULT_COMMAND_HELP)]
pub struct Cli {
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
    Snapshot(snapshot::Args),
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

/// What `gpuscope` does: parses its command line (or the tool's a link stands in for), runs the
/// command, and says how it ended.
pub fn main() -> ExitCode {
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
        Command::Snapshot(args) => snapshot::run(args),
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
