//! The floor of a one-shot snapshot, for `cargo xtask bench-oneshot`: the same NVML calls as
//! `gpuscope snapshot` (the recorder's snapshot: every query once per device, which
//! `gpu_devices::Device::snapshot` is tested to match) and one read each of
//! `/proc/PID/{stat,status,cmdline}` per GPU process, with nothing else: no device model, no
//! user names, no output but one line of counts.
//!
//! Usage: `oneshot-floor [LIBNVIDIA-ML]` (default: the system's `libnvidia-ml.so.1`).

use std::collections::BTreeSet;
use std::io::Read;
use std::process::ExitCode;

use gpu_backend::{Answer, NvmlBackend};

fn main() -> ExitCode {
    let lib = std::env::args_os().nth(1);
    let backend = match NvmlBackend::open(lib.as_deref()) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("oneshot-floor: {e}");
            return ExitCode::FAILURE;
        }
    };
    let snap = gpu_backend::recorder::snapshot(&backend);
    let mut pids = BTreeSet::new();
    for d in snap.dynamics.values() {
        for list in [&d.compute_processes, &d.graphics_processes] {
            if let Answer::Ok(ps) = list {
                pids.extend(ps.iter().map(|p| p.pid));
            }
        }
    }
    let mut buf = Vec::with_capacity(8192);
    let mut bytes = 0;
    for pid in &pids {
        for file in ["stat", "status", "cmdline"] {
            buf.clear();
            if let Ok(mut f) = std::fs::File::open(format!("/proc/{pid}/{file}")) {
                bytes += f.read_to_end(&mut buf).unwrap_or(0);
            }
        }
    }
    println!(
        "{} devices, {} GPU processes, {bytes} bytes of /proc read",
        snap.statics.len(),
        pids.len()
    );
    ExitCode::SUCCESS
}
