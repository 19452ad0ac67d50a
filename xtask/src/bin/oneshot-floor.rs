//! The floor of a one-shot snapshot, for `cargo xtask bench-oneshot`: the same NVML calls as
//! `gpuscope snapshot` (the versions, the count, and every static and changing query once per
//! device, one device after another; not CUDA's order, which gpuscope's snapshot does not ask)
//! and one read each of
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
    // What `gpuscope snapshot --json` asks: the system's versions and count (not CUDA's
    // order, which needs libcuda in a forked child whose `cuInit` starts the whole CUDA
    // driver, hundreds of milliseconds: docs/benchmarks.md, "On a real H100"), each device's
    // static and changing answers.
    use gpu_backend::recorder::{capture_dynamic, capture_statics_in_order};
    use gpu_backend::GpuBackend as _;
    let versions = (
        backend.driver_version().is_ok(),
        backend.nvml_version().is_ok(),
        backend.cuda_driver_version().is_ok(),
    );
    let count: Answer<u32> = backend.device_count().into();
    let statics = capture_statics_in_order(&backend, &count);
    let dynamics: Vec<_> = statics
        .iter()
        .map(|(id, st)| capture_dynamic(&backend, *id, &st.num_fans))
        .collect();
    let mut pids = BTreeSet::new();
    for d in &dynamics {
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
        "{} devices, {} GPU processes, {bytes} bytes of /proc read, versions read: {versions:?}",
        statics.len(),
        pids.len()
    );
    ExitCode::SUCCESS
}
