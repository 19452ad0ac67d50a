//! gpuscope: watch and choose NVIDIA GPUs.

mod args;
mod cli;
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

fn main() -> std::process::ExitCode {
    cli::main()
}
