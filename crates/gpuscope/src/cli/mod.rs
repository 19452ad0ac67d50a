//! The command line: what `main` does (the front doors' routing, the grammar, the default
//! command, the log, the command run, and the exit code of an error), the parser's definitions
//! (`defs.rs`), the options every command shares and their bounds (`args.rs`), the front doors
//! (`front_doors.rs`), and the man pages and completions made from the parser (`man.rs`).

use std::process::ExitCode;

use crate::commands::{doctor, export, info, record, select, smi, snapshot, stat, top};
use crate::present::text::escape_lines;
use crate::{error, log};
use defs::{Cli, Command};

pub mod args;
mod defs;
pub mod front_doors;
mod grammar;
mod man;

/// What `gpuscope` does: parses its command line (or the tool's a link stands in for), runs the
/// command, and says how it ended.
pub fn main() -> ExitCode {
    let args: Vec<_> = std::env::args_os().collect();
    let result = match man::man_dir(&args) {
        Some(dir) => man::man_pages(&dir),
        None => {
            let step = gpu_backend::timeline::step(gpu_backend::timeline::COMMAND_LINE);
            let args = front_doors::route(args);
            if let Some(why) = front_doors::peer_short_refused(&args) {
                eprintln!("gpuscope: {why}");
                return ExitCode::from(2);
            }
            let cli = grammar::parse(grammar::with_default_command(
                grammar::with_demo_value(args),
                grammar::on_terminal(),
            ));
            drop(step);
            run(cli)
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // The message can echo outside text (a fixture's or the driver's error text, a
            // device or process name): control characters are escaped, our own line breaks
            // kept.
            eprintln!("gpuscope: {}", escape_lines(&format!("{e:#}")));
            if e.downcast_ref::<error::UsageError>().is_some() {
                ExitCode::from(2)
            } else if let Some(short) = e.downcast_ref::<error::Shortfall>() {
                ExitCode::from(short.code)
            } else if e.downcast_ref::<error::NoDriver>().is_some() {
                ExitCode::from(error::Shortfall::NOTHING)
            } else if let Some(peer) = e.downcast_ref::<error::PeerExit>() {
                ExitCode::from(peer.code)
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
        Command::Completions { shell } => man::completions(shell),
    }
}

/// A command line from its words, as the tests write one.
#[cfg(test)]
fn command_line(words: &[&str]) -> Vec<std::ffi::OsString> {
    words.iter().map(std::ffi::OsString::from).collect()
}
