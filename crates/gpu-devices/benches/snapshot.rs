//! The device layer's cost: `Context::snapshot_all` over the 8-GPU fixture against the raw
//! backend calls it makes (`gpu_backend::recorder::snapshot` over the same backend), and the
//! backend calls per snapshot.
//!
//! Run with `cargo bench -p gpu-devices --bench snapshot`.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use gpu_backend::fixture::{DeviceDynamic, DeviceStatic, SystemAnswers};
use gpu_backend::{recorder, DeviceId, Fixture, GpuBackend, ReplayBackend};
use gpu_devices::{Context, SystemSnapshot};

fn load(stem: &str) -> Fixture {
    let path = fixture_mutations::fixtures_dir().join(format!("{stem}.json"));
    Fixture::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

fn snapshot(c: &mut Criterion) {
    for stem in ["h100-sxm-8gpu", "h100-mig"] {
        let backend = Arc::new(ReplayBackend::new(load(stem)));
        backend.set_frame(10);
        let ctx = Context::from_backend(backend.clone()).unwrap_or_else(|e| panic!("{e}"));

        // Calls per snapshot, counted once outside the timed loop.
        backend.count_calls(true);
        let snap = ctx.snapshot_all();
        let counts = backend.take_call_counts();
        let _ = recorder::snapshot(&*backend);
        let raw_counts = backend.take_call_counts();
        backend.count_calls(false);
        println!(
            "{stem}: {} devices; snapshot_all makes {} backend calls ({} asked more than once \
             for a device); the raw recorder snapshot makes {}",
            snap.devices.len(),
            counts.total(),
            counts.repeated().len(),
            raw_counts.total()
        );

        c.bench_function(&format!("snapshot_all/{stem}"), |b| {
            b.iter(|| black_box(black_box(&ctx).snapshot_all()))
        });
        c.bench_function(&format!("raw-backend-calls/{stem}"), |b| {
            b.iter(|| black_box(recorder::snapshot(black_box(&*backend))))
        });

        // The same walk as `snapshot_all`, keeping the backend's answers as they are: the
        // difference from `snapshot_all` is the cost of the conversion into snapshots.
        c.bench_function(&format!("same-walk-unconverted/{stem}"), |b| {
            b.iter(|| black_box(walk_unconverted(black_box(&*backend))))
        });

        // The conversion alone: answers already taken by the recorder, turned into snapshots
        // (the input's drop is timed, the output's is not).
        let raw = recorder::snapshot(&*backend);
        c.bench_function(&format!("convert-recorder-snapshot/{stem}"), |b| {
            b.iter_batched(
                || raw.clone(),
                |r| black_box(SystemSnapshot::from_recorder(r)),
                BatchSize::SmallInput,
            )
        });
    }
}

/// `Context::snapshot_all`'s walk over the devices, without the conversion.
fn walk_unconverted(
    b: &dyn GpuBackend,
) -> (SystemAnswers, Vec<(DeviceId, DeviceStatic, DeviceDynamic)>) {
    let system = recorder::capture_system(b);
    let devices = recorder::capture_statics_in_order(b, &system.device_count)
        .into_iter()
        .map(|(id, st)| {
            let dy = recorder::capture_dynamic(b, id, &st.num_fans);
            (id, st, dy)
        })
        .collect();
    (system, devices)
}

criterion_group!(benches, snapshot);
criterion_main!(benches);
