//! Recording a replay of a fixture gives the fixture back, value for value; and every answer a
//! fixture holds comes back through the trait.

use crate::common;

use gpu_backend::{Fixture, ReplayBackend};
use proptest::prelude::*;

fn record_replay(fixture: &Fixture) -> Fixture {
    gpu_backend::recorder::rerecord(fixture)
}

/// Compares two fixtures and, if they differ, names the first JSON path where they do.
fn assert_same(name: &str, got: &Fixture, want: &Fixture) {
    if let Some(at) = got.first_difference(want) {
        panic!("{name}: recording differs from the fixture at {at}");
    }
}

#[test]
fn recording_a_replay_gives_every_fixture_back() {
    for (name, fixture) in common::all_fixtures() {
        assert_same(&name, &record_replay(&fixture), &fixture);
    }
}

/// Turns the answer at `index` (counting the `{"ok": ...}` objects of a fixture's JSON in
/// document order) into the error `err`.
fn replace_answer(v: &mut serde_json::Value, index: &mut usize, err: &serde_json::Value) -> bool {
    use serde_json::Value::*;
    match v {
        Object(map) => {
            if map.len() == 1 && map.contains_key("ok") {
                if *index == 0 {
                    map.clear();
                    map.insert("err".into(), err.clone());
                    return true;
                }
                *index -= 1;
            }
            map.values_mut().any(|c| replace_answer(c, index, err))
        }
        Array(items) => items.iter_mut().any(|c| replace_answer(c, index, err)),
        _ => false,
    }
}

fn error_strategy() -> impl Strategy<Value = serde_json::Value> {
    prop_oneof![
        Just(serde_json::json!("not_supported")),
        Just(serde_json::json!("no_permission")),
        Just(serde_json::json!("gpu_lost")),
        Just(serde_json::json!("function_not_found")),
        Just(serde_json::json!("timeout")),
        (0i32..1000).prop_map(|c| serde_json::json!({ "unknown": c })),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Whatever answers of a real scenario turn into whatever errors, recording a replay of the
    /// result still gives it back (fixtures that the change makes inconsistent are skipped).
    #[test]
    fn any_answers_turned_into_errors_still_round_trip(
        which in 0usize..6,
        picks in proptest::collection::vec((any::<proptest::sample::Index>(), error_strategy()), 1..12),
    ) {
        let fixtures = common::fixtures_once();
        let (name, base) = &fixtures[which % fixtures.len()];
        let mut json = serde_json::to_value(base).unwrap();
        let total = count_answers(&json);
        for (at, err) in &picks {
            let mut i = at.index(total);
            replace_answer(&mut json, &mut i, err);
        }
        let text = json.to_string();
        let changed = Fixture::from_json_str(&text, name);
        prop_assume!(changed.is_ok());
        let changed = changed.unwrap();
        let got = record_replay(&changed);
        prop_assert!(got == changed, "{}", got.first_difference(&changed).unwrap_or_default());
    }
}

fn count_answers(v: &serde_json::Value) -> usize {
    use serde_json::Value::*;
    match v {
        Object(map) => {
            let own = usize::from(map.len() == 1 && map.contains_key("ok"));
            own + map.values().map(count_answers).sum::<usize>()
        }
        Array(items) => items.iter().map(count_answers).sum(),
        _ => 0,
    }
}

#[test]
fn a_snapshot_asks_no_query_twice_for_the_same_device() {
    for (name, fixture) in common::all_fixtures() {
        let replay = ReplayBackend::new(fixture);
        replay.count_calls(true);
        let snap = gpu_backend::recorder::snapshot(&replay);
        let counts = replay.take_call_counts();
        assert!(
            counts.repeated().is_empty(),
            "{name}: asked twice: {:?}",
            counts.repeated()
        );
        assert_eq!(snap.statics.len(), replay.fixture().devices.len(), "{name}");
        assert!(counts.total() > 0);
    }
}

#[test]
fn first_difference_names_the_path_and_both_values() {
    let (_, a) = common::all_fixtures().remove(0);
    assert_eq!(a.first_difference(&a), None);
    let mut b = a.clone();
    b.frames[2].t_ms += 1;
    let at = a.first_difference(&b).expect("they differ");
    assert!(at.starts_with("$.frames[2].t_ms: "), "{at}");
    assert!(
        at.contains(&format!("{} vs {}", a.frames[2].t_ms, b.frames[2].t_ms)),
        "{at}"
    );
}
