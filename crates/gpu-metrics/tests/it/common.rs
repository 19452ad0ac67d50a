//! What the recorder's and the plot's tests share: the 8-GPU H100 fixture they replay.

use std::sync::Arc;

use gpu_backend::Fixture;

/// The fixture's path.
pub const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../fixtures/h100-sxm-8gpu.json"
);

/// The fixture, loaded once for all the tests of a file.
pub fn fixture() -> Arc<Fixture> {
    static F: std::sync::OnceLock<Arc<Fixture>> = std::sync::OnceLock::new();
    F.get_or_init(|| Arc::new(Fixture::load(FIXTURE).unwrap()))
        .clone()
}
