//! The scenario fixtures, mutated (dropped fields, wrong types, extreme numbers, odd strings,
//! truncation, deep nesting, frame times that overflow), fed to what every command does with a
//! fixture: `Fixture::from_json_str`, then a replay and a `ProcessCollector` snapshot of every
//! device and process over every frame, and the igpu-style view of every device. Nothing may
//! panic; a fixture that is refused is refused with an error naming the file and a JSON path.

use std::sync::Arc;

use fixture_mutations::{apply, mutation, scenarios};
use gpu_backend::{Fixture, ReplayBackend};
use gpu_processes::ProcessCollector;
use proptest::prelude::*;
use serde_json::Value;

/// What every command does with a fixture, over every frame: each device's snapshot, every
/// process joined with its host facts, and the igpu-style view of each device.
fn use_every_frame(fixture: Fixture) {
    let frames = fixture.frames.len();
    let backend = Arc::new(ReplayBackend::new(fixture));
    let Ok(collector) = ProcessCollector::from_replay(backend.clone()) else {
        return; // The fixture cannot say how many GPUs there are: an error, not a panic.
    };
    for frame in 0..frames {
        backend.set_frame(frame);
        let snapshots = collector.take_all();
        let _ = format!("{snapshots:?}");
        for device in collector.context().all_devices() {
            let _ = device.to_string();
        }
    }
}

/// Loads the mutated text and checks the outcome: an error names the file and a JSON path,
/// and a fixture that loads can be used over every frame without a panic.
fn check(name: &str, text: &str) -> Result<(), TestCaseError> {
    let origin = format!("fixtures/{name}");
    match Fixture::from_json_str(text, &origin) {
        Err(e) => {
            prop_assert_eq!(&e.file, &origin);
            prop_assert!(!e.path.is_empty(), "no JSON path: {}", e);
            let shown = e.to_string();
            prop_assert!(shown.starts_with(&origin), "{}", shown);
            // Where inside: a JSON path, or for a text that is no longer JSON its line and
            // column (a fault of the whole file is said without the path `.`).
            if e.path == "." {
                prop_assert!(shown.contains(" at line "), "{}", shown);
            } else {
                prop_assert!(shown.contains(&format!("at `{}`", e.path)), "{}", shown);
            }
            prop_assert!(shown.len() < 2000, "a {}-byte message", shown.len());
            prop_assert!(!shown.contains('\u{1b}'), "a raw ESC: {:?}", shown);
        }
        Ok(fixture) => use_every_frame(fixture),
    }
    Ok(())
}

proptest! {
    // Each case parses a whole fixture and snapshots every frame of it: a few dozen cases stay
    // fast on two cores.
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn a_mutated_scenario_fixture_is_refused_with_its_path_or_used_without_panic(
        which in any::<usize>(),
        pick in any::<usize>(),
        m in mutation(),
    ) {
        let all = scenarios();
        let (name, doc) = &all[which % all.len()];
        check(name, &apply(doc, pick, &m))?;
    }

    #[test]
    fn two_mutations_at_once_are_refused_with_their_path_or_used_without_panic(
        which in any::<usize>(),
        first in (any::<usize>(), mutation()),
        second in (any::<usize>(), mutation()),
    ) {
        let all = scenarios();
        let (name, doc) = &all[which % all.len()];
        let once = apply(doc, first.0, &first.1);
        if let Ok(v) = serde_json::from_str::<Value>(&once) {
            check(name, &apply(&v, second.0, &second.1))?;
        }
    }
}

#[test]
fn every_scenario_fixture_unmutated_is_used_over_every_frame() {
    for (name, doc) in scenarios() {
        let fixture =
            Fixture::from_json_str(&doc.to_string(), name).unwrap_or_else(|e| panic!("{e}"));
        use_every_frame(fixture);
    }
}
