//! Every NVML function a query calls has a real GPU's price: fake-nvml charges a function what
//! the cost profile says and nothing for one it does not name, so a query without a price looks
//! free in every benchmark over the fake. `nvmlDeviceValidateInforom` went so for weeks while
//! it cost a real H100 69 ms a call (docs/benchmarks.md, "On a real H100, 2026-11-28").
//!
//! The profile is `fixtures/costs/h100-doctor-full.json` (`gpuscope doctor --json` on an H100,
//! every call priced). A function it cannot hold is listed in [`UNPRICED`] with why; a new
//! query's function must be measured on a GPU (`bash xtask/device/oneshots.sh`) or listed there.
#![cfg(test)]

use std::collections::BTreeSet;
use std::path::PathBuf;

/// The query table's functions that the H100's profile has no price for, and why.
const UNPRICED: &[(&str, &str)] = &[
    ("nvmlDeviceGetFanSpeed_v2", "per fan; the H100 has no fans, so it was never called"),
    ("nvmlDeviceGetTargetFanSpeed", "per fan; the H100 has no fans"),
    ("nvmlDeviceGetMigDeviceHandleByIndex", "the H100 measured was not in MIG mode"),
    ("nvmlEventSetWait_v2", "the listener's wait: a sleep, not a cost of a refresh"),
    ("nvmlGpmMetricsGet", "computed from two samples; doctor prices the samples (nvmlGpmSampleGet) and fixtures/costs/README.md gives its measured cost"),
];

fn profile() -> serde_json::Map<String, serde_json::Value> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/costs/h100-doctor-full.json");
    let text = std::fs::read_to_string(&path).expect("the H100's full cost profile is there");
    match serde_json::from_str(&text).expect("the profile is JSON") {
        serde_json::Value::Object(map) => map,
        other => panic!("{}: not an object: {other}", path.display()),
    }
}

#[test]
fn every_function_a_query_calls_has_a_real_gpus_price_or_says_why_not() {
    let profile = profile();
    let listed: BTreeSet<&str> = UNPRICED.iter().map(|&(f, _)| f).collect();
    let called: BTreeSet<&str> = gpu_backend::Query::ALL
        .iter()
        .map(|q| q.info().nvml)
        .filter(|f| f.starts_with("nvml"))
        .collect();
    assert!(called.len() > 100, "read the query table: {}", called.len());
    let unpriced: Vec<&str> = called
        .iter()
        .copied()
        .filter(|f| !profile.contains_key(*f) && !listed.contains(f))
        .collect();
    assert!(
        unpriced.is_empty(),
        "no real GPU's price for {unpriced:?}: fake-nvml would charge them nothing. Measure them \
         on a GPU (bash xtask/device/oneshots.sh writes doctor.json) or list them in UNPRICED \
         (xtask/src/tidy/costs.rs) with why"
    );
    // The list names only what needs naming: a function priced since, or no longer called,
    // leaves it.
    for f in &listed {
        assert!(
            called.contains(f),
            "{f} is in UNPRICED but no query calls it"
        );
        assert!(
            !profile.contains_key(*f),
            "{f} is priced now: take it out of UNPRICED"
        );
    }
}
