//! `select_devices` over the 8-GPU fixture: the cost of choosing, beside the device snapshots
//! it takes (its floor), and with free accounts (which adds the host join).
//!
//! Run with `cargo bench -p gpu-select --bench select`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use gpu_processes::ProcessCollector;
use gpu_select::{select_devices, Criteria, Pool};

fn bench(c: &mut Criterion) {
    let path = format!(
        "{}/../../fixtures/h100-sxm-8gpu.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let collector =
        ProcessCollector::from_fixture(path, Some(10)).unwrap_or_else(|e| panic!("{e}"));
    let devices = collector.context().devices();
    let strict = Criteria::new()
        .min_count(2)
        .min_free_memory(10u64 << 30)
        .max_gpu_utilization(90)
        .max_memory_utilization(90);
    let accounts = strict.clone().free_accounts(["alice", "bob"]);

    c.bench_function("device-snapshots-only/h100-sxm-8gpu", |b| {
        b.iter(|| black_box(devices.iter().map(|d| d.snapshot()).collect::<Vec<_>>()))
    });
    c.bench_function("select_devices/h100-sxm-8gpu", |b| {
        b.iter(|| black_box(select_devices(&collector, Pool::All, black_box(&strict))))
    });
    c.bench_function("select_devices+free_accounts/h100-sxm-8gpu", |b| {
        b.iter(|| black_box(select_devices(&collector, Pool::All, black_box(&accounts))))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
