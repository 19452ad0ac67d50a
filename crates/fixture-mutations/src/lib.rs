//! Test support for gpuscope's crates (not published): the scenario fixtures, and proptest
//! strategies that mutate a fixture's JSON, for the tests that check that nothing which reads a
//! fixture panics on a hostile one.
//!
//! What it is not: a fixture generator (that is `cargo xtask gen-fixtures`), nor a checker of
//! the outcome; each test says what a mutated fixture must give in its own layer.

use std::path::PathBuf;
use std::sync::OnceLock;

use proptest::prelude::*;
use serde_json::Value;

/// The repository's `fixtures/` folder.
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// The paths of every scenario fixture of `fixtures/` (its `.json` files), sorted.
///
/// # Panics
/// When `fixtures/` cannot be read or holds fewer than six fixtures: the tests cannot run.
pub fn scenario_paths() -> Vec<PathBuf> {
    let dir = fixtures_dir();
    let entries = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{} is not readable: {e}", dir.display()));
    let mut paths: Vec<PathBuf> = entries
        .map(|e| {
            e.unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .path()
        })
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    assert!(
        paths.len() >= 6,
        "expected the scenario fixtures and the real recording in {}",
        dir.display()
    );
    paths
}

/// Every scenario fixture of `fixtures/` ([`scenario_paths`]), as (file name, parsed JSON)
/// sorted by name, read once per test process.
///
/// # Panics
/// When `fixtures/` cannot be read or holds a file that is not JSON: the tests cannot run.
pub fn scenarios() -> &'static [(String, Value)] {
    static ALL: OnceLock<Vec<(String, Value)>> = OnceLock::new();
    ALL.get_or_init(|| {
        scenario_paths()
            .into_iter()
            .map(|p| {
                let name = p
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned();
                let bytes = std::fs::read(&p)
                    .unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()));
                let v = serde_json::from_slice(&bytes)
                    .unwrap_or_else(|e| panic!("{} is not JSON: {e}", p.display()));
                (name, v)
            })
            .collect()
    })
}

/// The scenario fixture `fixtures/<stem>.json`, parsed.
///
/// # Panics
/// When there is no such fixture.
pub fn scenario(stem: &str) -> &'static Value {
    let name = format!("{stem}.json");
    scenarios()
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("no fixture {name} in {}", fixtures_dir().display()))
}

/// One change to a fixture's JSON.
#[derive(Debug, Clone)]
pub enum Mutation {
    /// Remove the node (an object's field or an array's element).
    Drop,
    /// Replace the node by this value.
    Set(Value),
    /// Cut the text at this byte (modulo its length, back to a character boundary).
    Truncate(usize),
    /// Set frame `i`'s (modulo the number of frames) `t_ms`.
    FrameTime(usize, u64),
}

/// Odd values to put in a fixture: extreme numbers, wrong types, odd strings (control
/// characters, huge, empty, any printable text) and nesting past serde_json's recursion limit.
pub fn odd_value() -> impl Strategy<Value = Value> {
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
        // A frame time that once overflowed a division (it is a number like any other here).
        Just(Value::from(17_985_575_471_866_812_826_u64)),
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

/// One mutation: mostly odd values set somewhere, then dropped nodes, truncated text and frame
/// times at and past the loader's bound.
pub fn mutation() -> impl Strategy<Value = Mutation> {
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

/// The JSON pointer of every node of `doc`, in document order (the root is `""`).
pub fn pointers(doc: &Value) -> Vec<String> {
    fn walk(v: &Value, at: String, out: &mut Vec<String>) {
        out.push(at.clone());
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    let key = k.replace('~', "~0").replace('/', "~1");
                    walk(x, format!("{at}/{key}"), out);
                }
            }
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    walk(x, format!("{at}/{i}"), out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(doc, String::new(), &mut out);
    out
}

/// `doc` with `m` applied at the node `pick` chooses (modulo the number of nodes), as JSON
/// text. A change that does not apply (a frame time in a document with no frames) leaves the
/// document as it was.
pub fn apply(doc: &Value, pick: usize, m: &Mutation) -> String {
    let all = pointers(doc);
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
            if let Some(frames) = v.get_mut("frames").and_then(Value::as_array_mut) {
                let n = frames.len();
                if let Some(frame) = frames.get_mut(i % n.max(1)).and_then(Value::as_object_mut) {
                    frame.insert("t_ms".into(), Value::from(*t));
                }
            }
        }
    }
    v.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc() -> Value {
        json!({"a/b": [1, {"c": 2}], "frames": [{"t_ms": 0}, {"t_ms": 5}]})
    }

    #[test]
    fn pointers_name_every_node_escaped_in_document_order() {
        let p = pointers(&doc());
        assert_eq!(
            p,
            [
                "",
                "/a~1b",
                "/a~1b/0",
                "/a~1b/1",
                "/a~1b/1/c",
                "/frames",
                "/frames/0",
                "/frames/0/t_ms",
                "/frames/1",
                "/frames/1/t_ms"
            ]
        );
        for at in &p {
            assert!(doc().pointer(at).is_some(), "{at}");
        }
    }

    #[test]
    fn each_mutation_changes_the_node_it_picks() {
        let d = doc();
        let at = |p: &str| pointers(&d).iter().position(|x| x == p).unwrap();
        let v = |text: String| serde_json::from_str::<Value>(&text).unwrap();
        assert_eq!(
            v(apply(&d, at("/a~1b/1/c"), &Mutation::Drop))["a/b"][1],
            json!({})
        );
        assert_eq!(
            v(apply(&d, at("/a~1b/0"), &Mutation::Drop))["a/b"],
            json!([{"c": 2}])
        );
        assert_eq!(
            v(apply(&d, at("/frames/1/t_ms"), &Mutation::Set(json!(null))))["frames"][1],
            json!({"t_ms": null})
        );
        // The pick wraps round the number of nodes.
        let n = pointers(&d).len();
        assert_eq!(
            apply(&d, n + at("/a~1b"), &Mutation::Set(json!(7))),
            apply(&d, at("/a~1b"), &Mutation::Set(json!(7)))
        );
        assert_eq!(
            v(apply(&d, 0, &Mutation::FrameTime(3, u64::MAX)))["frames"][1]["t_ms"],
            json!(u64::MAX)
        );
        let cut = apply(&d, 0, &Mutation::Truncate(10));
        assert_eq!(cut, d.to_string()[..10]);
    }

    #[test]
    fn a_frame_time_in_a_document_without_frames_changes_nothing() {
        for d in [json!(3), json!({"frames": []}), json!({"frames": [1]})] {
            assert_eq!(apply(&d, 0, &Mutation::FrameTime(2, 9)), d.to_string());
        }
    }

    #[test]
    fn truncation_cuts_at_a_character_boundary() {
        let d = json!("ééé");
        for n in 0..20 {
            let cut = apply(&d, 0, &Mutation::Truncate(n));
            assert!(d.to_string().starts_with(&cut), "{n}: {cut}");
        }
    }
}
