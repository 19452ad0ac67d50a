//! The parser's definitions: gpuscope's commands and the options they all take. Each
//! command's own options are its `Args`, beside the command.

use clap::{Parser, Subcommand};

use crate::commands::{doctor, export, info, record, select, snapshot, stat, top};

use super::front_doors;
use super::grammar;

/// Watch and choose NVIDIA GPUs.
#[derive(Parser)]
#[command(name = "gpuscope", version, propagate_version = true, about, long_about = None, after_help = grammar::DEFAULT_COMMAND_HELP)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Log what gpuscope does to stderr: -v what it opened, -vv also every
    /// refresh, HTTP request and Prometheus query with its time, -vvv everything.
    /// GPUSCOPE_LOG (else RUST_LOG) takes tracing filter directives, such as
    /// `gpuscope::export=debug`; docs/logging.md.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
}

/// The commands.
#[derive(Subcommand)]
pub enum Command {
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
    /// Make links named nvidia-smi, gpustat, nvitop, nvisel and gpulink that run gpuscope as
    /// those tools (gpuscope smi, stat, top, select, record with the tool's spellings).
    InstallLinks(front_doors::InstallArgs),
    /// nvidia-smi's read-only options over any source (its table, `-L`, `-q [-d ...] [-x]`, `-i`,
    /// `-l`/`-lms`, `--query-gpu=...`, `--query-compute-apps=...`, `--format=csv,...`), printing
    /// what nvidia-smi prints; `gpuscope smi --help` lists them (docs/smi.md).
    #[command(disable_help_flag = true, disable_version_flag = true)]
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
