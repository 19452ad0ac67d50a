//! `cargo xtask man`: the man pages of gpuscope (gpuscope.1 and one per command), written by
//! the binary itself (`gpuscope __man DIR`, clap_mangen over its own parser), so that xtask
//! does not depend on the binary crate.

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context as _, Result};

/// Builds gpuscope and has it write its man pages into `out_dir`.
pub fn run(out_dir: &Path) -> Result<()> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args(["run", "--quiet", "--package", "gpuscope", "--", "__man"])
        .arg(out_dir)
        .status()
        .context("cannot run cargo")?;
    if !status.success() {
        bail!("gpuscope __man {} failed: {status}", out_dir.display());
    }
    let mut pages: Vec<String> = std::fs::read_dir(out_dir)
        .with_context(|| format!("cannot read {}", out_dir.display()))?
        .filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.ends_with(".1"))
        .collect();
    pages.sort();
    println!(
        "wrote {} man pages into {}: {}",
        pages.len(),
        out_dir.display(),
        pages.join(" ")
    );
    Ok(())
}
