//! Helpers shared by the integration tests: the scenario fixtures of fixtures/, served by a
//! replay backend on a manual clock.

#![allow(dead_code)]

use std::sync::Arc;

use gpu_backend::{Fixture, ReplayBackend};
use gpu_devices::Context;

pub use fixture_mutations::fixtures_dir;

/// The stems of every scenario fixture, sorted.
pub fn all_stems() -> Vec<String> {
    fixture_mutations::scenario_paths()
        .iter()
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect()
}

/// One scenario fixture by file stem.
pub fn fixture(stem: &str) -> Fixture {
    let p = fixtures_dir().join(format!("{stem}.json"));
    Fixture::load(&p).unwrap_or_else(|e| panic!("{e}"))
}

/// A context on a fixture, with the replay backend kept to move its frame.
pub fn open(stem: &str) -> (Context, Arc<ReplayBackend>) {
    open_fixture(fixture(stem))
}

/// A context on a fixture value.
pub fn open_fixture(f: Fixture) -> (Context, Arc<ReplayBackend>) {
    let backend = Arc::new(ReplayBackend::new(f));
    let ctx = Context::from_backend(backend.clone()).unwrap_or_else(|e| panic!("{e}"));
    (ctx, backend)
}
