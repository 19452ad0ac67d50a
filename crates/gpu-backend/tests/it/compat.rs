//! Fixtures recorded by older versions keep loading, forever.
//!
//! `tests/compat/v1/` holds the six scenario fixtures exactly as schema version 1 first wrote
//! them (copied byte for byte from fixtures/ before the query table existed), and
//! `tests/compat/real/` the real H100 recording exactly as `record-fixture` wrote it (schema
//! version 1, every frame repeating the events so far). They must load, and a replay of each
//! must answer every query it recorded with the value the file holds (the events of a frame:
//! every event so far, as version 1 lists them), and every query it lacks with "not recorded".
//! (The scenarios in fixtures/ are free to change: their story grows as queries are added;
//! these copies are what an old recording looks like.)

use crate::common;

use std::path::PathBuf;
use std::sync::Arc;

use gpu_backend::fixture::DeviceStatic;
use gpu_backend::recorder::rerecord;
use gpu_backend::{BackendError, DeviceId, Fixture, GpuBackend, ReplayBackend};
use serde_json::Value;

const FROZEN: [&str; 6] = [
    "geforce-desktop",
    "gpu-lost",
    "h100-mig",
    "h100-sxm-8gpu",
    "old-driver",
    "windows-wddm",
];

fn frozen_path(stem: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/compat/v1/{stem}.json"))
}

/// The real H100 recording as it was recorded (schema version 1).
fn real_as_recorded() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/compat/real/h100-real.json")
}

fn frozen_text(stem: &str) -> String {
    std::fs::read_to_string(frozen_path(stem)).unwrap_or_else(|e| panic!("{stem}: {e}"))
}

/// True if every answer inside `v` is the error `not_recorded`.
fn all_not_recorded(v: &Value) -> bool {
    match v {
        Value::Object(m) if m.contains_key("err") => m["err"] == "not_recorded",
        Value::Object(m) => m.values().all(all_not_recorded),
        Value::Array(a) => !a.is_empty() && a.iter().all(all_not_recorded),
        _ => false,
    }
}

/// A per-fan list (a `per_fan` query of the table) that is empty: the device has no fans to
/// ask, so there is nothing to answer "not recorded" with.
fn no_fans_to_ask(field: &str, v: &Value) -> bool {
    v.as_array().is_some_and(|a| a.is_empty())
        && gpu_backend::query::QUERIES
            .iter()
            .any(|q| q.shape == "per_fan" && q.fields.contains(&field))
}

/// An object that is a record of fields, not an answer (`{"ok": ...}` / `{"err": ...}`).
fn is_record(v: &Value) -> bool {
    v.as_object()
        .is_some_and(|o| !o.contains_key("ok") && !o.contains_key("err"))
}

/// Walks the frozen JSON (`raw`) and what a replay of it records (`replayed`) together: what
/// the frozen file holds, the replay gives back; what it lacks, the replay answers as "not
/// recorded".
fn compare(raw: &Value, replayed: &Value, path: &str) {
    match (raw, replayed) {
        (Value::Object(r), Value::Object(p)) if !r.contains_key("ok") && !r.contains_key("err") => {
            for (k, pv) in p {
                let here = format!("{path}.{k}");
                match r.get(k) {
                    Some(rv) => compare(rv, pv, &here),
                    None => assert!(
                        all_not_recorded(pv) || no_fans_to_ask(k, pv),
                        "{here}: absent from the frozen fixture, so it must replay as \
                         not_recorded, not {pv}"
                    ),
                }
            }
        }
        // Frames: each one walked the same way, so a dynamic query added later is checked as
        // "not recorded" there too.
        (Value::Array(r), Value::Array(p)) if r.len() == p.len() && r.iter().all(is_record) => {
            for (i, (rv, pv)) in r.iter().zip(p).enumerate() {
                compare(rv, pv, &format!("{path}[{i}]"));
            }
        }
        _ => {
            assert_eq!(
                raw, replayed,
                "{path}: the replay does not give the frozen value"
            );
        }
    }
}

/// What a replay of `fixture` records, as JSON in schema version 1's form: each frame's
/// `events` is what the replay answers there when asked for every event (`events(id, 0)`), each
/// event an object, as version 1 listed them.
fn replayed_as_v1(fixture: &Fixture) -> Value {
    let mut replayed = serde_json::to_value(rerecord(fixture)).unwrap();
    replayed["schema_version"] = serde_json::json!(1);
    let replay = ReplayBackend::new(fixture.clone());
    for (i, frame) in replayed["frames"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .enumerate()
    {
        replay.set_frame(i);
        for (id, dy) in frame["devices"].as_object_mut().unwrap() {
            let id: DeviceId = id.parse().unwrap();
            if dy["events"].get("ok").is_some() {
                let events = replay.events(id, 0).unwrap();
                dy["events"] = serde_json::json!({ "ok": events });
            }
        }
    }
    replayed
}

fn check_loads_and_replays(text: &str, name: &str) -> Fixture {
    let loaded = Fixture::from_json_str(text, name).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        loaded.schema_version,
        gpu_backend::fixture::SCHEMA_VERSION,
        "{name}: held in memory in the current form"
    );
    let raw: Value = serde_json::from_str(text).unwrap();
    compare(&raw, &replayed_as_v1(&loaded), name);
    loaded
}

#[test]
fn every_frozen_v1_fixture_loads_and_replays_the_values_it_recorded() {
    for stem in FROZEN {
        check_loads_and_replays(&frozen_text(stem), stem);
    }
}

/// The real recording, rewritten into the current layout by `cargo xtask rewrite-fixture`, is
/// the same recording: read, the file as it was recorded and the rewritten one are equal, so
/// that every replay of them answers the same; and the one as recorded replays what it holds.
#[test]
fn the_real_recording_as_recorded_loads_and_replays_as_the_rewritten_one() {
    let text = std::fs::read_to_string(real_as_recorded()).unwrap();
    let as_recorded = check_loads_and_replays(&text, "h100-real as recorded");
    let rewritten = common::fixture("h100-real");
    if let Some(at) = rewritten.first_difference(&as_recorded) {
        panic!("fixtures/h100-real.json differs from the recording at {at}");
    }
    // Its clock events were recorded; the log holds each once.
    let events: usize = rewritten
        .frames
        .iter()
        .filter_map(|f| f.devices[&DeviceId::Gpu(0)].events.ok())
        .map(Vec::len)
        .sum();
    assert!(events > 5000, "{events} events");
}

#[test]
fn a_frozen_fixture_without_a_query_loads_and_the_query_is_not_recorded() {
    let mut v: Value = serde_json::from_str(&frozen_text("geforce-desktop")).unwrap();
    // One static query (with both fields of a split query), one changing query in every
    // frame, and the per-fan list.
    let st = v["devices"]["0"].as_object_mut().unwrap();
    st.remove("enforced_power_limit");
    st.remove("temperature_slowdown");
    st.remove("temperature_shutdown");
    for frame in v["frames"].as_array_mut().unwrap() {
        let dy = frame["devices"]["0"].as_object_mut().unwrap();
        dy.remove("memory_info");
        dy.remove("fan_speeds");
    }
    let fixture =
        Fixture::from_json_str(&v.to_string(), "trimmed").unwrap_or_else(|e| panic!("{e}"));
    let fans = fixture.devices[&DeviceId::Gpu(0)]
        .num_fans
        .ok()
        .copied()
        .unwrap();
    assert!(fans > 0, "the scenario's GPU 0 has fans");

    let replay = Arc::new(ReplayBackend::new(fixture));
    let gpu = DeviceId::Gpu(0);
    let not_recorded = Err(BackendError::NotRecorded);
    assert_eq!(replay.enforced_power_limit(gpu), not_recorded);
    assert_eq!(
        replay.temperature_threshold(gpu, gpu_backend::TemperatureThreshold::Slowdown),
        not_recorded
    );
    assert_eq!(
        replay.memory_info(gpu).map(|_| ()),
        Err(BackendError::NotRecorded)
    );
    for fan in 0..fans {
        assert_eq!(replay.fan_speed_of(gpu, fan), not_recorded);
    }
    assert!(BackendError::NotRecorded.is_not_available(), "shown as N/A");
    // The rest of the device is as recorded, and so is the other GPU.
    assert!(replay.power_management_limit(gpu).is_ok());
    assert!(replay.memory_info(DeviceId::Gpu(1)).is_ok());
    // And recording the replay keeps the gaps as "not recorded".
    let again = rerecord(replay.fixture());
    assert_eq!(&again, &**replay.fixture());
}

/// A query a fixture lacks is served through NVML (fake-nvml) as NOT_SUPPORTED, so a recording
/// made through it holds `not_supported` there; every other answer is kept, and a failure NVML
/// has no code for reads back as NVML_ERROR_UNKNOWN.
#[test]
fn a_fixture_served_through_nvml_reads_back_not_recorded_as_not_supported() {
    let mut v: Value = serde_json::from_str(&frozen_text("old-driver")).unwrap();
    v["devices"]["0"]["vbios_version"] = serde_json::json!({"err": {"other": "garbled"}});
    let fixture = Fixture::from_json_str(&v.to_string(), "old").unwrap();
    let served = fixture.as_served_through_nvml();
    let (was, now) = (
        &fixture.devices[&DeviceId::Gpu(0)],
        &served.devices[&DeviceId::Gpu(0)],
    );
    assert_eq!(
        was.board_id,
        gpu_backend::Answer::Err(BackendError::NotRecorded)
    );
    assert_eq!(
        now.board_id,
        gpu_backend::Answer::Err(BackendError::NotSupported)
    );
    assert_eq!(
        now.vbios_version,
        gpu_backend::Answer::Err(BackendError::Unknown(999))
    );
    assert_eq!(now.name, was.name);
    assert_eq!(served.frames.len(), fixture.frames.len());
    // Nothing is left "not recorded", and serving it again changes nothing.
    assert!(!served.to_json_pretty().contains("not_recorded"));
    assert!(fixture.to_json_pretty().contains("not_recorded"));
    assert_eq!(served.as_served_through_nvml(), served);
}

#[test]
fn fields_of_a_newer_minor_version_are_ignored() {
    let mut v: Value = serde_json::from_str(&frozen_text("old-driver")).unwrap();
    v["devices"]["0"]["a_query_from_the_future"] = serde_json::json!({"ok": 42});
    v["frames"][0]["devices"]["0"]["another_one"] = serde_json::json!({"err": "not_supported"});
    v["system"]["yet_another"] = serde_json::json!({"ok": "x"});
    v["meta"]["recorded_with"] = serde_json::json!("gpuscope 9.9");
    let loaded = Fixture::from_json_str(&v.to_string(), "newer").unwrap_or_else(|e| panic!("{e}"));
    let plain = Fixture::from_json_str(&frozen_text("old-driver"), "plain").unwrap();
    assert_eq!(loaded, plain);
}

#[test]
fn a_fixture_of_another_major_version_is_refused_with_a_message() {
    let mut v: Value = serde_json::from_str(&frozen_text("old-driver")).unwrap();
    v["schema_version"] = serde_json::json!(gpu_backend::fixture::SCHEMA_VERSION + 1);
    let err = Fixture::from_json_str(&v.to_string(), "v3").unwrap_err();
    assert_eq!(err.path, "schema_version");
    assert!(err.message.contains("newer"), "{err}");
}

#[test]
fn an_all_failing_device_has_an_answer_for_every_query_of_the_table() {
    // Every static field of the table is there, failing as asked.
    let st = serde_json::to_value(DeviceStatic::all_failing(&BackendError::GpuLost)).unwrap();
    for q in gpu_backend::query::QUERIES
        .iter()
        .filter(|q| q.section == "static")
    {
        for field in q.fields {
            assert!(st.get(field).is_some(), "{} has no field {field}", q.name);
        }
    }
}
