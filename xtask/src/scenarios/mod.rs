//! Generators of the scenario fixtures in fixtures/.
//!
//! Each scenario is built from the values of a real nvidia-smi dump (shared/reference-dumps/)
//! with frames synthesised around them by a small deterministic PRNG, so the same code always
//! writes the same files. `cargo xtask gen-fixtures` writes them; the tests below keep the files
//! in fixtures/ equal to what the generators produce.

mod common;
mod geforce_desktop;
mod gpu_lost;
mod h100_mig;
mod h100_sxm_8gpu;
mod k8s_time_slicing;
mod old_driver;
mod windows_wddm;

use std::path::Path;

use gpu_backend::Fixture;

/// Every scenario, by file stem.
pub fn all() -> Vec<(&'static str, Fixture)> {
    vec![
        (h100_sxm_8gpu::STEM, h100_sxm_8gpu::build()),
        (h100_mig::STEM, h100_mig::build()),
        (geforce_desktop::STEM, geforce_desktop::build()),
        (windows_wddm::STEM, windows_wddm::build()),
        (old_driver::STEM, old_driver::build()),
        (gpu_lost::STEM, gpu_lost::build()),
        (k8s_time_slicing::STEM, k8s_time_slicing::build()),
    ]
}

/// Writes every scenario as `<dir>/<stem>.json`, refusing one that is not a valid fixture.
pub fn write_all(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    for (stem, fixture) in all() {
        if let Err(gpu_backend::fixture::InvalidFixture { path, message }) = fixture.validate() {
            anyhow::bail!("scenario {stem} is not a valid fixture: at `{path}`: {message}");
        }
        let path = dir.join(format!("{stem}.json"));
        std::fs::write(&path, fixture.to_json_pretty() + "\n")?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests;
