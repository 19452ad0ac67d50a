//! A broken or newer fixture is refused with a message that names the file, the path inside it
//! and what was expected.

mod common;

use gpu_backend::{Fixture, FixtureError};

const FILE: &str = "fixtures/broken.json";

fn base() -> serde_json::Value {
    let text = std::fs::read_to_string(common::fixtures_dir().join("old-driver.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn refuse(text: &str) -> FixtureError {
    match Fixture::from_json_str(text, FILE) {
        Ok(_) => panic!("the broken fixture was accepted"),
        Err(e) => e,
    }
}

fn check(err: &FixtureError, path: &str, expected: &[&str]) {
    let msg = err.to_string();
    assert_eq!(err.file, FILE, "{msg}");
    assert_eq!(err.path, path, "{msg}");
    assert!(msg.starts_with(FILE), "{msg}");
    assert!(msg.contains(path), "{msg}");
    for e in expected {
        assert!(msg.contains(e), "{msg:?} should mention {e:?}");
    }
}

#[test]
fn text_that_is_not_json_is_refused_with_its_line() {
    let text = base().to_string();
    let err = refuse(&text[..text.len() / 2]);
    check(&err, ".", &["not valid JSON", "line 1"]);
}

#[test]
fn a_missing_field_is_refused_with_its_path() {
    // A missing query loads as "not recorded" (tests/compat.rs); the fields that are not
    // answers stay required.
    let mut v = base();
    v["frames"][3].as_object_mut().unwrap().remove("t_ms");
    let err = refuse(&v.to_string());
    check(&err, "frames[3]", &["missing field `t_ms`"]);
}

#[test]
fn a_wrong_type_is_refused_with_its_path() {
    let mut v = base();
    v["frames"][3]["devices"]["0"]["memory_info"] =
        serde_json::json!({"ok": {"total": "lots", "free": 1, "used": 1, "reserved": null}});
    let err = refuse(&v.to_string());
    check(
        &err,
        "frames[3].devices.0.memory_info.ok.total",
        &["invalid type", "u64"],
    );
}

#[test]
fn an_unknown_error_name_is_refused() {
    let mut v = base();
    v["devices"]["0"]["serial"] = serde_json::json!({"err": "on_fire"});
    let err = refuse(&v.to_string());
    check(
        &err,
        "devices.0.serial.err",
        &["unknown variant `on_fire`", "not_supported"],
    );
}

#[test]
fn a_newer_schema_version_is_refused_with_advice() {
    let mut v = base();
    v["schema_version"] = serde_json::json!(2);
    let err = refuse(&v.to_string());
    check(&err, "schema_version", &["newer", "upgrade gpuscope"]);
}

#[test]
fn a_missing_schema_version_is_refused() {
    let mut v = base();
    v.as_object_mut().unwrap().remove("schema_version");
    let err = refuse(&v.to_string());
    check(&err, "schema_version", &["missing field", "1"]);
}

#[test]
fn a_device_count_that_disagrees_with_the_devices_is_refused() {
    let mut v = base();
    v["system"]["device_count"] = serde_json::json!({"ok": 5});
    let err = refuse(&v.to_string());
    check(&err, "system.device_count", &["5 devices"]);
}

#[test]
fn a_frame_without_a_device_is_refused() {
    let mut v = base();
    v["frames"][7]["devices"]
        .as_object_mut()
        .unwrap()
        .remove("0");
    let err = refuse(&v.to_string());
    check(&err, "frames[7].devices", &["missing", "\"0\""]);
}

#[test]
fn frames_that_go_back_in_time_are_refused() {
    let mut v = base();
    v["frames"][2]["t_ms"] = serde_json::json!(0);
    v["frames"][1]["t_ms"] = serde_json::json!(5000);
    let err = refuse(&v.to_string());
    check(&err, "frames[2].t_ms", &["goes back"]);
}

#[test]
fn a_missing_file_is_refused_with_its_name() {
    let err = Fixture::load("/nonexistent/fixture.json").unwrap_err();
    assert_eq!(err.file, "/nonexistent/fixture.json");
    assert!(err.to_string().contains("cannot read the file"), "{err}");
}
