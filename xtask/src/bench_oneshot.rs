//! `cargo xtask bench-oneshot`: one-shot snapshot tools timed over the same fake NVML library.

/// Command-line arguments.
#[derive(clap::Args)]
pub struct Args {}

/// Runs the benchmark.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("bench-oneshot is not implemented yet")
}
