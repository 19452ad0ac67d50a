//! One full snapshot through the trait over the 8-GPU fixture: time, and backend calls made.
//!
//! Run with `cargo bench -p gpu-backend --bench snapshot`.

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{criterion_group, criterion_main, Criterion};
use gpu_backend::{recorder, Fixture, ReplayBackend};

fn load(stem: &str) -> Fixture {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../../fixtures/{stem}.json"));
    Fixture::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

fn snapshot(c: &mut Criterion) {
    for stem in ["h100-sxm-8gpu", "h100-mig"] {
        let backend = ReplayBackend::new(load(stem));
        backend.set_frame(10);

        // Calls per snapshot, counted once outside the timed loop.
        backend.count_calls(true);
        let snap = recorder::snapshot(&backend);
        let counts = backend.take_call_counts();
        backend.count_calls(false);
        println!(
            "{stem}: {} devices, {} backend calls per snapshot, {} asked more than once for a device",
            snap.statics.len(),
            counts.total(),
            counts.repeated().len()
        );

        c.bench_function(&format!("snapshot/{stem}"), |b| {
            b.iter(|| black_box(recorder::snapshot(black_box(&backend))))
        });

        // The floor to compare with: the same owned answers cloned straight out of the
        // fixture, with no trait calls at all.
        let fixture = backend.fixture().clone();
        c.bench_function(&format!("clone-answers/{stem}"), |b| {
            b.iter(|| {
                let f = black_box(&fixture);
                black_box((
                    f.system.clone(),
                    f.devices.clone(),
                    f.frames[10].devices.clone(),
                ))
            })
        });
    }
}

criterion_group!(benches, snapshot);
criterion_main!(benches);
