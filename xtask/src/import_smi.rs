//! `cargo xtask import-smi`: turns `nvidia-smi -q -x` output into a one-frame fixture.

/// Command-line arguments.
#[derive(clap::Args)]
pub struct Args {}

/// Runs the import.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("import-smi is not implemented yet")
}
