//! gpuscope: watch and choose NVIDIA GPUs.

mod cli;
mod commands;
mod error;
mod fleet;
mod log;
mod output;
mod present;
mod source;
mod watch;

fn main() -> std::process::ExitCode {
    cli::main()
}
