//! nvitop's API reference, example by example, for this crate (docs/nvitop-api.md is the
//! table): `select_devices`' example, which puts the chosen devices' UUIDs in
//! `CUDA_VISIBLE_DEVICES`:
//!
//! ```python
//! os.environ['CUDA_VISIBLE_DEVICES'] = ','.join(
//!     select_devices(format='uuid', min_count=4, min_free_memory='8GiB')
//! )
//! ```
//!
//! The devices expected are worked out from the fixture files, read here as plain JSON.

use std::collections::BTreeSet;
use std::path::PathBuf;

use gpu_devices::{CudaDeviceOrder, DeviceId};
use gpu_processes::ProcessCollector;
use gpu_select::{select_devices, Criteria, Format, Pool, Size};
use serde_json::Value;

fn path(stem: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../../fixtures/{stem}.json"))
}

/// The UUIDs of the GPUs with at least `min_free` bytes free at `frame`, from the JSON.
fn with_free_memory(stem: &str, frame: usize, min_free: u64) -> BTreeSet<String> {
    let j: Value = serde_json::from_slice(&std::fs::read(path(stem)).unwrap()).unwrap();
    j["frames"][frame]["devices"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, d)| {
            d["memory_info"]["ok"]["free"]
                .as_u64()
                .is_some_and(|f| f >= min_free)
        })
        .map(|(k, _)| j["devices"][k]["uuid"]["ok"].as_str().unwrap().to_string())
        .collect()
}

/// The seed's example as it reads, on two machines: the 8-GPU box at a frame where every GPU
/// has 8 GiB free (all eight are chosen), and the four T4s after one is lost, where three
/// qualify: fewer than `min_count`, which nvitop returns as they are and we mark as short.
/// The value set in `CUDA_VISIBLE_DEVICES` names exactly the chosen devices, best first.
#[test]
fn select_devices_examples() {
    let criteria = Criteria::new()
        .min_count(4)
        .min_free_memory("8GiB".parse::<Size>().unwrap());
    let eight_gib = 8 << 30;
    for (stem, frame, short) in [("h100-sxm-8gpu", 10, false), ("gpu-lost", 20, true)] {
        let collector = ProcessCollector::from_fixture(path(stem), Some(frame)).unwrap();
        let selection = select_devices(&collector, Pool::All, &criteria).unwrap();
        let value = selection.identifiers(Format::Uuid, false).join(",");

        let want = with_free_memory(stem, frame, eight_gib);
        let got: BTreeSet<String> = value.split(',').map(str::to_string).collect();
        assert_eq!(got, want, "{stem}");
        assert_eq!(selection.is_short(), short, "{stem}: {} chosen", want.len());

        // What CUDA would then show: the chosen devices, in the order chosen.
        let shown = collector
            .context()
            .parse_cuda_visible_devices_with(Some(&value), CudaDeviceOrder::PciBusId);
        let chosen: Vec<DeviceId> = selection.chosen().map(|c| c.id).collect();
        assert_eq!(shown, chosen, "{stem}");
    }
}
