//! Project workflows that plain cargo cannot do. Run as `cargo xtask <command>`.

mod scenarios;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "gpuscope project workflows")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Writes the scenario fixtures of fixtures/ from their generators (see xtask/src/scenarios).
    GenFixtures {
        /// Directory to write to.
        #[arg(long, default_value = "fixtures")]
        out_dir: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::GenFixtures { out_dir } => scenarios::write_all(&out_dir),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
