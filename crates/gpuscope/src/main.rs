//! gpuscope: watch and choose NVIDIA GPUs.

mod cli;
mod commands;
mod error;
mod fleet;
mod log;
mod output;
mod present;
mod source;
mod timeline;
mod watch;

fn main() -> std::process::ExitCode {
    // Only when `gpuscope doctor` runs this as the one-shot it times (docs/doctor.md).
    let timeline = timeline::Child::from_env();
    let code = cli::main();
    if let Some(timeline) = timeline {
        timeline.finish();
    }
    code
}
