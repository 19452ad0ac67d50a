//! `take_snapshots` over the 8-GPU fixture with 64 processes: time, backend calls and host
//! look-ups per snapshot, beside a bare device snapshot of the same devices.
//!
//! Run with `cargo bench -p gpu-processes --bench take_snapshots`.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use gpu_backend::{Fixture, ReplayBackend};
use gpu_processes::ProcessCollector;

fn bench(c: &mut Criterion) {
    let path = format!(
        "{}/../../fixtures/h100-sxm-8gpu.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let fixture = Fixture::load(path).unwrap_or_else(|e| panic!("{e}"));
    let backend = Arc::new(ReplayBackend::new(fixture));
    backend.set_frame(10);
    let collector =
        ProcessCollector::from_replay(backend.clone()).unwrap_or_else(|e| panic!("{e}"));
    let devices = collector.context().all_devices();

    backend.count_calls(true);
    let snap = collector.take_snapshots(&devices);
    let calls = backend.take_call_counts();
    backend.count_calls(false);
    println!(
        "h100-sxm-8gpu: {} devices, {} processes, {} backend calls ({} asked twice), {} host look-ups per snapshot",
        snap.devices.len(),
        snap.processes.len(),
        calls.total(),
        calls.repeated().len(),
        snap.host_lookups
    );

    c.bench_function("take_snapshots/h100-sxm-8gpu", |b| {
        b.iter(|| black_box(collector.take_snapshots(black_box(&devices))))
    });
    c.bench_function("device-snapshots-only/h100-sxm-8gpu", |b| {
        b.iter(|| black_box(devices.iter().map(|d| d.snapshot()).collect::<Vec<_>>()))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
