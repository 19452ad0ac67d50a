//! Copies the built fake-nvml library into a directory as `libnvidia-ml.so.1` (and
//! `libcuda.so.1`), for clients to load with `LD_LIBRARY_PATH=<dir>`.
//!
//! Usage: `cargo run -p fake-nvml --bin fake-nvml-install -- <dir>`; prints the directory.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let (Some(dir), None) = (args.next(), args.next()) else {
        eprintln!("usage: fake-nvml-install <dir>");
        return ExitCode::from(2);
    };
    match fake_nvml::install_as(&PathBuf::from(dir)) {
        Ok(installed) => {
            println!("{}", installed.dir.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("fake-nvml-install: {e}");
            ExitCode::FAILURE
        }
    }
}
