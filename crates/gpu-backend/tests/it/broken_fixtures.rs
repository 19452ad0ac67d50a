//! A broken or newer fixture is refused with a message that names the file, the path inside it
//! and what was expected.

use crate::common;

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
    // A missing query loads as "not recorded" (compat.rs); the fields that are not
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
    v["schema_version"] = serde_json::json!(gpu_backend::fixture::SCHEMA_VERSION + 1);
    let err = refuse(&v.to_string());
    check(&err, "schema_version", &["newer", "upgrade gpuscope"]);
}

#[test]
fn a_missing_schema_version_is_refused() {
    let mut v = base();
    v.as_object_mut().unwrap().remove("schema_version");
    let err = refuse(&v.to_string());
    check(&err, "schema_version", &["missing field", "2"]);
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

/// A missing file was said as "at `.`: cannot read the file: No such file or directory (os
/// error 2)" (issue 34): a JSON path for a file that is not there. Now the file and "no such
/// file", and no path.
#[test]
fn a_missing_file_is_refused_with_its_name() {
    let err = Fixture::load("/nonexistent/fixture.json").unwrap_err();
    assert_eq!(err.file, "/nonexistent/fixture.json");
    assert_eq!(err.to_string(), "/nonexistent/fixture.json: no such file");
}

/// nvidia-smi's XML given as a fixture is named as such, with the command that imports it.
#[test]
fn nvidia_smi_xml_given_as_a_fixture_points_at_import_smi() {
    let xml = "<?xml version=\"1.0\" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM \"nvsmi_device_v12.dtd\">\n<nvidia_smi_log>\n</nvidia_smi_log>\n";
    for text in [
        xml,
        "<nvidia_smi_log><driver_version>580</driver_version></nvidia_smi_log>",
    ] {
        let err = refuse(text);
        let msg = err.to_string();
        assert!(msg.contains("nvidia-smi's XML"), "{msg}");
        assert!(msg.contains("cargo xtask import-smi"), "{msg}");
        assert!(!msg.contains("at `.`"), "{msg}");
    }
}

#[test]
fn fixture_time_that_overflows_is_refused_not_a_panic() {
    // A frame time of 17985575471866812826 ms made every command panic ("attempt to divide by
    // zero") in the replay clock's loop arithmetic.
    let mut v = base();
    let last = v["frames"].as_array().unwrap().len() - 1;
    v["frames"][last]["t_ms"] = serde_json::json!(17_985_575_471_866_812_826_u64);
    let err = refuse(&v.to_string());
    check(
        &err,
        &format!("frames[{last}].t_ms"),
        &["17985575471866812826", "above the bound", "100 years"],
    );
}

#[test]
fn sizes_counts_and_timestamps_beyond_their_bounds_are_refused_with_their_path() {
    // Each number below was taken as is and could overflow the arithmetic done on it.
    type Case = (&'static str, fn(&mut serde_json::Value), &'static str);
    let cases: Vec<Case> = vec![
        (
            "memory total",
            |v| v["frames"][1]["devices"]["0"]["memory_info"]["ok"]["total"] = u64::MAX.into(),
            "frames[1].devices.0.memory_info.total",
        ),
        (
            "host memory",
            |v| v["host"]["memory_total"] = (1u64 << 51).into(),
            "host.memory_total",
        ),
        (
            "fans",
            |v| v["devices"]["0"]["num_fans"] = serde_json::json!({"ok": 4_294_967_295u32}),
            "devices.0.num_fans",
        ),
        (
            "MIG slots",
            |v| v["devices"]["0"]["max_mig_device_count"] = serde_json::json!({"ok": 100_000}),
            "devices.0.max_mig_device_count",
        ),
        (
            "GPM percentage",
            |v| {
                v["frames"][1]["devices"]["0"]["gpm_metrics"] =
                    serde_json::json!({"ok": {"sm_activity": 250.0}})
            },
            "frames[1].devices.0.gpm_metrics.sm_activity",
        ),
        (
            "GPM bandwidth",
            |v| {
                v["frames"][1]["devices"]["0"]["gpm_metrics"] =
                    serde_json::json!({"ok": {"pcie_tx": 1e300}})
            },
            "frames[1].devices.0.gpm_metrics.pcie_tx",
        ),
        (
            "negative GPM value",
            |v| {
                v["frames"][1]["devices"]["0"]["gpm_metrics"] =
                    serde_json::json!({"ok": {"dram_activity": -1.0}})
            },
            "frames[1].devices.0.gpm_metrics.dram_activity",
        ),
        (
            "sample timestamp",
            |v| {
                v["frames"][0]["devices"]["0"]["process_utilization"] = serde_json::json!({"ok": [
                    {"pid": 1, "timestamp_us": u64::MAX, "sm": 0, "memory": 0, "encoder": 0, "decoder": 0}
                ]})
            },
            "frames[0].devices.0.process_utilization[0].timestamp_us",
        ),
        (
            "event timestamp",
            |v| {
                v["frames"][2]["devices"]["0"]["events"] = serde_json::json!({"ok": [
                    {"timestamp_us": u64::MAX, "kind": "xid", "data": 79}
                ]})
            },
            "frames[2].devices.0.events[0].timestamp_us",
        ),
        (
            "events",
            |v| {
                let one = serde_json::json!({"timestamp_us": 1, "kind": "clock", "data": 0});
                let many: Vec<serde_json::Value> = (0..257)
                    .map(|i| {
                        let mut e = one.clone();
                        e["timestamp_us"] = (i + 1).into();
                        e
                    })
                    .collect();
                v["frames"][2]["devices"]["0"]["events"] = serde_json::json!({ "ok": many });
            },
            "frames[2].devices.0.events",
        ),
    ];
    for (what, mutate, path) in cases {
        let mut v = base();
        mutate(&mut v);
        let err = refuse(&v.to_string());
        assert_eq!(err.path, path, "{what}: {err}");
        assert!(err.to_string().contains("bound"), "{what}: {err}");
    }
}

/// A device's events are listed oldest first, each at its own time, so that "newer than" (what
/// replay and fake-nvml deliver) never skips or repeats one; an unknown kind is refused.
#[test]
fn events_out_of_order_or_of_an_unknown_kind_are_refused() {
    let mut v = base();
    v["frames"][1]["devices"]["0"]["events"] = serde_json::json!({"ok": [
        {"timestamp_us": 2_000, "kind": "xid", "data": 79},
        {"timestamp_us": 2_000, "kind": "double_bit_ecc", "data": 0}
    ]});
    let err = refuse(&v.to_string());
    check(
        &err,
        "frames[1].devices.0.events[1].timestamp_us",
        &["not after the event before it", "oldest first"],
    );
    // Events are a log: a later frame that repeats an event, or holds one older than an
    // earlier frame's, is refused.
    let xid = |t: u64, data: u64| serde_json::json!([t, "xid", data]);
    for later in [xid(2_000, 79), xid(1_500, 48)] {
        let mut v = base();
        v["frames"][1]["devices"]["0"]["events"] = serde_json::json!({ "ok": [xid(2_000, 79)] });
        v["frames"][2]["devices"]["0"]["events"] = serde_json::json!({ "ok": [later] });
        let err = refuse(&v.to_string());
        check(
            &err,
            "frames[2].devices.0.events[0]",
            &[
                "not after the device's last event of an earlier frame",
                "a log",
            ],
        );
    }
    // Schema version 1 listed every event so far in each frame: a later frame that rewrites
    // an event, or forgets one, is refused there.
    let xid = |data: u64| serde_json::json!({"timestamp_us": 2_000, "kind": "xid", "data": data});
    for later in [serde_json::json!([xid(48)]), serde_json::json!([])] {
        let mut v = base();
        v["schema_version"] = serde_json::json!(1);
        v["frames"][1]["devices"]["0"]["events"] = serde_json::json!({ "ok": [xid(79)] });
        v["frames"][2]["devices"]["0"]["events"] = serde_json::json!({ "ok": later });
        let err = refuse(&v.to_string());
        check(
            &err,
            "frames[2].devices.0.events",
            &["do not continue those of the device's previous frame"],
        );
    }
    // An event array of another length than two or three is refused where it is.
    for (bad, at) in [
        (
            serde_json::json!([2_000]),
            "frames[1].devices.0.events.ok[0]",
        ),
        (
            serde_json::json!([2_000, "xid", 79, 1]),
            "frames[1].devices.0.events.ok[0]",
        ),
        (
            serde_json::json!([2_000, "meltdown"]),
            "frames[1].devices.0.events.ok[0]",
        ),
    ] {
        let mut v = base();
        v["frames"][1]["devices"]["0"]["events"] = serde_json::json!({ "ok": [bad] });
        let err = refuse(&v.to_string());
        assert!(err.path.starts_with(at), "{err}");
    }
    let mut v = base();
    v["frames"][1]["devices"]["0"]["events"] =
        serde_json::json!({"ok": [{"timestamp_us": 2_000, "kind": "meltdown", "data": 0}]});
    let err = refuse(&v.to_string());
    check(
        &err,
        "frames[1].devices.0.events.ok[0].kind",
        &["unknown variant", "xid"],
    );
}

#[test]
fn fixture_with_a_leading_byte_order_mark_is_read() {
    // A UTF-8 BOM (as Windows editors write) gave a generic "not valid JSON" error.
    let text = format!("\u{feff}{}", base());
    let fixture = Fixture::from_json_str(&text, FILE).expect("a BOM is ignored");
    assert_eq!(
        fixture,
        Fixture::from_json_str(&base().to_string(), FILE).unwrap()
    );
}

#[test]
fn fixture_wrapped_in_an_array_is_refused_without_echoing_it() {
    // `[ fixture ]` printed the whole document back (957 KB for the demo fixture).
    let text = format!("[{}]", base());
    let err = refuse(&text);
    check(&err, ".", &["expected a JSON object", "found an array"]);
    assert!(err.to_string().len() < 200, "{err}");
}

#[test]
fn not_json_names_its_location_once() {
    // serde_json's message already ends in "at line 1 column 1"; the error added it again.
    let err = refuse("# gpuscope\n");
    let msg = err.to_string();
    check(&err, ".", &["not valid JSON", "line 1 column 1"]);
    assert_eq!(msg.matches("line").count(), 1, "{msg}");
}

#[test]
fn a_huge_value_in_an_error_is_summarised() {
    let mut v = base();
    v["schema_version"] = serde_json::json!("x".repeat(1_000_000));
    let err = refuse(&v.to_string());
    check(&err, "schema_version", &["more bytes not shown"]);
    assert!(
        err.to_string().len() < 1000,
        "{} bytes",
        err.to_string().len()
    );
}

#[test]
fn fixture_error_text_escapes_control_characters() {
    // An unknown field named with terminal escapes was echoed raw in the error. (An unknown
    // field is ignored since fixtures keep loading; an unknown error name is still refused and
    // echoed, so it carries the escapes here.)
    let mut v = base();
    v["devices"]["0"]["name"] = serde_json::json!({"err": "\u{1b}]0;TITLE\u{7}\u{1b}[2J"});
    let err = refuse(&v.to_string());
    let msg = err.to_string();
    assert!(!msg.contains('\u{1b}') && !msg.contains('\u{7}'), "{msg:?}");
    assert!(msg.contains("\\x1b]0;TITLE\\x07"), "{msg}");
}

#[test]
fn deep_nesting_is_refused_by_the_recursion_limit() {
    let text = format!(
        "{{\"schema_version\": {}{}}}",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let err = refuse(&text);
    assert_eq!(err.file, FILE);
    assert!(err.to_string().contains("recursion limit"), "{err}");
}

#[test]
fn a_directory_is_refused_as_not_a_regular_file() {
    let err = Fixture::load(common::fixtures_dir()).unwrap_err();
    assert_eq!(err.path, ".");
    assert!(
        err.to_string()
            .contains("is a directory, not a regular file"),
        "{err}"
    );
}

#[cfg(unix)]
#[test]
fn fixture_from_dev_zero_is_refused() {
    // `--fixture /dev/zero` read until memory ran out.
    let err = Fixture::load("/dev/zero").unwrap_err();
    assert!(
        err.to_string()
            .contains("a character device, not a regular file"),
        "{err}"
    );
}

#[test]
fn a_million_levels_of_nesting_anywhere_are_refused_without_overflowing_the_stack() {
    let deep = format!("{}{}", "[".repeat(1_000_000), "]".repeat(1_000_000));
    for text in [
        deep.clone(),
        format!("{{\"a\": {deep}}}"),
        format!("{{\"schema_version\": 1, \"meta\": {{\"name\": {deep}}}}}"),
        format!("{{\"schema_version\": {deep}}}"),
    ] {
        let err = refuse(&text);
        assert_eq!(err.file, FILE);
        assert!(err.to_string().len() < 1000, "{err}");
    }
}
