//! Writes the small fixture the tests of this crate use (two GPUs, MIG, fans, a lost GPU) to a
//! file, for trying clients by hand and for `tests/pynvml_check.py`.
//!
//! Usage: `cargo run -p fake-nvml --example write-test-fixture -- /tmp/fake-nvml-test.json`

#[path = "../tests/it/common.rs"]
mod common;

fn main() -> std::process::ExitCode {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: write-test-fixture <file.json>");
        return std::process::ExitCode::from(2);
    };
    match std::fs::write(&path, common::fixture().to_json_pretty() + "\n") {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!(
                "write-test-fixture: {}: {e}",
                std::path::Path::new(&path).display()
            );
            std::process::ExitCode::FAILURE
        }
    }
}
