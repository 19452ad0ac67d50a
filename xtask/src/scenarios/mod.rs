//! Generators of the scenario fixtures in fixtures/.

use std::path::Path;

use gpu_backend::Fixture;

/// Every scenario, by file stem.
pub fn all() -> Vec<(&'static str, Fixture)> {
    Vec::new()
}

/// Writes every scenario as `<dir>/<stem>.json`.
pub fn write_all(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    for (stem, fixture) in all() {
        let path = dir.join(format!("{stem}.json"));
        std::fs::write(&path, fixture.to_json_pretty() + "\n")?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
