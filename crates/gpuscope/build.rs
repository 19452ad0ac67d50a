//! Compresses the demo fixture built into gpuscope (`--demo`): gzip keeps about a twentieth of
//! its 3.8 MB, which keeps the binary, the container image (at most 20 MB with its libraries)
//! and the package small. `demo/h100-sxm-8gpu.json` links to the scenario in `fixtures/`, so
//! the packaged crate carries the file itself.

use std::io::Write as _;
use std::path::PathBuf;

const DEMO: &str = "demo/h100-sxm-8gpu.json";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo::rerun-if-changed={DEMO}");
    let json = std::fs::read(DEMO).map_err(|e| format!("cannot read {DEMO}: {e}"))?;
    let out = PathBuf::from(std::env::var_os("OUT_DIR").ok_or("cargo sets OUT_DIR")?);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&json)?;
    std::fs::write(out.join("demo.json.gz"), gz.finish()?)?;
    Ok(())
}
