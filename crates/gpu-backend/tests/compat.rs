//! Fixtures recorded by older versions keep loading, forever.
//!
//! `tests/compat/v1/` holds the six scenario fixtures exactly as schema version 1 first wrote
//! them (copied byte for byte from fixtures/ before the query table existed). They must load,
//! and a replay of each must answer every query it recorded with the value the file holds, and
//! every query it lacks with "not recorded". (The scenarios in fixtures/ are free to change:
//! their story grows as queries are added; these copies are what an old recording looks like.)

mod common;

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

#[test]
fn every_frozen_v1_fixture_loads_and_replays_the_values_it_recorded() {
    for stem in FROZEN {
        let text = frozen_text(stem);
        let loaded = Fixture::from_json_str(&text, stem).unwrap_or_else(|e| panic!("{e}"));
        let raw: Value = serde_json::from_str(&text).unwrap();
        let replayed = serde_json::to_value(rerecord(&loaded)).unwrap();
        compare(&raw, &replayed, stem);
    }
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
    v["schema_version"] = serde_json::json!(2);
    let err = Fixture::from_json_str(&v.to_string(), "v2").unwrap_err();
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
