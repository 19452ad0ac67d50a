//! The scenario fixtures, mutated (dropped fields, wrong types, extreme numbers, odd strings,
//! truncation, deep nesting, frame times that overflow), fed to what every command does with a
//! fixture: `Fixture::from_json_str`, then a replay and a `ProcessCollector` snapshot of every
//! device and process over every frame, and the igpu-style view of every device. Nothing may
//! panic; a fixture that is refused is refused with an error naming the file and a JSON path.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use gpu_backend::{Fixture, ReplayBackend};
use gpu_processes::ProcessCollector;
use proptest::prelude::*;
use serde_json::Value;

/// Every scenario fixture of fixtures/, as (file name, parsed JSON), read once.
fn scenarios() -> &'static [(String, Value)] {
    static ALL: OnceLock<Vec<(String, Value)>> = OnceLock::new();
    ALL.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
        let mut all: Vec<(String, Value)> = std::fs::read_dir(&dir)
            .expect("fixtures/ is readable")
            .map(|e| e.expect("directory entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .map(|p| {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                let v = serde_json::from_slice(&std::fs::read(&p).expect("read")).expect("JSON");
                (name, v)
            })
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        assert!(all.len() >= 6, "expected the six scenario fixtures");
        all
    })
}

/// The JSON pointer of every node of `v`, in document order.
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    out.push(at.clone());
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let key = k.replace('~', "~0").replace('/', "~1");
                pointers(x, format!("{at}/{key}"), out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                pointers(x, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// One change to a fixture's JSON.
#[derive(Debug, Clone)]
enum Mutation {
    /// Remove the node (an object's field or an array's element).
    Drop,
    /// Replace the node by this value.
    Set(Value),
    /// Cut the text at this byte (modulo its length).
    Truncate(usize),
    /// Set frame `i`'s (modulo the number of frames) `t_ms`.
    FrameTime(usize, u64),
}

fn odd_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        // Extreme numbers.
        Just(Value::from(u64::MAX)),
        Just(Value::from(u32::MAX)),
        Just(Value::from(i64::MIN)),
        Just(Value::from(i32::MIN)),
        Just(Value::from(1e308)),
        Just(Value::from(-1e308)),
        Just(Value::from(-1)),
        Just(Value::from(0)),
        Just(Value::from((1u64 << 50) + 1)),
        any::<u64>().prop_map(Value::from),
        any::<u32>().prop_map(Value::from),
        // Wrong types.
        Just(Value::Null),
        Just(Value::Bool(true)),
        Just(serde_json::json!([])),
        Just(serde_json::json!({})),
        Just(serde_json::json!({"ok": null})),
        Just(serde_json::json!({"err": "gpu_lost"})),
        // Odd strings: control characters, huge, non-ASCII.
        Just(Value::from("\u{1b}]0;TITLE\u{7}\u{1b}[2J\u{9b}\u{0}")),
        Just(Value::from("x".repeat(200_000))),
        Just(Value::from("")),
        "\\PC{0,40}".prop_map(Value::from),
        // Deep nesting, past serde_json's recursion limit.
        (100usize..400).prop_map(|depth| {
            let mut v = Value::from(1);
            for _ in 0..depth {
                v = Value::Array(vec![v]);
            }
            v
        }),
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        2 => Just(Mutation::Drop),
        4 => odd_value().prop_map(Mutation::Set),
        1 => any::<usize>().prop_map(Mutation::Truncate),
        1 => (
            any::<usize>(),
            prop_oneof![
                Just(u64::MAX),
                Just(17_985_575_471_866_812_826_u64),
                Just(gpu_backend::fixture::limits::MAX_FRAME_TIME_MS),
                any::<u64>(),
            ]
        )
            .prop_map(|(i, t)| Mutation::FrameTime(i, t)),
    ]
}

/// `doc` with `m` applied at the node `pick` chooses, as JSON text.
fn apply(doc: &Value, pick: usize, m: &Mutation) -> String {
    let mut all = Vec::new();
    pointers(doc, String::new(), &mut all);
    let at = &all[pick % all.len()];
    let mut v = doc.clone();
    match m {
        Mutation::Truncate(n) => {
            let text = doc.to_string();
            let mut cut = n % text.len();
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            return text[..cut].to_string();
        }
        Mutation::Drop => {
            if let Some((parent, key)) = at.rsplit_once('/') {
                match v.pointer_mut(parent) {
                    Some(Value::Object(o)) => {
                        o.remove(&key.replace("~1", "/").replace("~0", "~"));
                    }
                    Some(Value::Array(a)) => {
                        if let Some(i) = key.parse::<usize>().ok().filter(|&i| i < a.len()) {
                            a.remove(i);
                        }
                    }
                    _ => {}
                }
            }
        }
        Mutation::Set(x) => {
            if let Some(slot) = v.pointer_mut(at) {
                *slot = x.clone();
            }
        }
        Mutation::FrameTime(i, t) => {
            if let Some(frames) = v["frames"].as_array_mut() {
                let n = frames.len();
                frames[i % n]["t_ms"] = Value::from(*t);
            }
        }
    }
    v.to_string()
}

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
            prop_assert!(shown.contains(&format!("at `{}`", e.path)), "{}", shown);
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
