//! Compresses the recordings built into gpuscope (`--demo`, `--demo h100-real`, `--demo h200-real`): gzip keeps
//! about a twentieth of the 8-GPU scenario's 3.8 MB, which keeps the binary, the container image
//! (at most 20 MB with its libraries) and the package small. The files in `demo/` link to the
//! fixtures in `fixtures/`, so the packaged crate carries the files themselves.

use std::io::Write as _;
use std::path::PathBuf;

/// Each built-in recording and the name of its gzipped copy in `OUT_DIR`.
const DEMOS: [(&str, &str); 3] = [
    ("demo/h100-sxm-8gpu.json", "demo.json.gz"),
    ("demo/h100-real.json", "h100-real.json.gz"),
    ("demo/h200-real.json", "h200-real.json.gz"),
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").ok_or("cargo sets OUT_DIR")?);
    for (file, gz_name) in DEMOS {
        println!("cargo::rerun-if-changed={file}");
        let json = std::fs::read(file).map_err(|e| format!("cannot read {file}: {e}"))?;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&json)?;
        std::fs::write(out.join(gz_name), gz.finish()?)?;
    }
    Ok(())
}
