//! What the unit tests of several modules build: one recorded machine, sampled as the exporter
//! samples it.

#![cfg(test)]

use std::sync::Arc;
use std::time::Instant;

use gpu_processes::ProcessCollector;

use crate::{Exposition, Inputs, Options};

/// The recorded 8-GPU H100 box at frame 0.
pub fn h100_box() -> ProcessCollector {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/h100-sxm-8gpu.json"
    );
    ProcessCollector::from_fixture(path, Some(0)).expect("the 8-GPU fixture loads")
}

/// Options for `collector` on host `box`, with per-process families.
pub fn options(collector: &ProcessCollector) -> Options {
    Options {
        hostname: "box".into(),
        processes: true,
        ..Options::of(collector)
    }
}

/// A sample of [`h100_box`] as the exporter's sampler takes it, published with [`options`].
pub fn exposition() -> Exposition {
    let collector = h100_box();
    let mut inputs = Inputs::take(&collector);
    inputs.sample_duration_s = 0.001;
    inputs.sample_time_s = 1.0;
    Exposition::new(inputs, Arc::new(options(&collector)), Instant::now())
}

/// Asserts that `text` (an encoding of [`exposition`]'s sample, or of [`h100_box`] with
/// [`options`]) has every GPU of the recording, with host `box`, and per-process samples.
pub fn assert_every_device_and_process(text: &str) {
    for i in 0..8 {
        let up = format!(
            "{}{{hostname=\"box\",index=\"{i}\"",
            crate::names::DEVICE_UP
        );
        assert!(text.contains(&up), "GPU {i} in {text}");
    }
    let process = format!("{}{{", crate::names::PROCESS_GPU_MEMORY_BYTES);
    assert!(text.contains(&process), "{text}");
}
