//! `gpuscope snapshot` end to end, through the binary.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

mod edited_fixture;
use edited_fixture::{fail_process_lists, forget_host_facts, EditedFixture};

fn gpuscope(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gpuscope"))
        .args(args)
        .env_remove("GPUSCOPE_FIXTURE")
        .env_remove("GPUSCOPE_NVML_LIB")
        .output()
        .expect("gpuscope runs")
}

fn fixture(stem: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(format!("../../fixtures/{stem}.json"))
        .display()
        .to_string()
}

fn json(args: &[&str]) -> Value {
    let out = gpuscope(args);
    assert!(
        out.status.success(),
        "gpuscope {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

#[test]
fn demo_json_lists_every_device_with_na_as_null() {
    let v = json(&["snapshot", "--demo", "--json"]);
    assert_eq!(v["schema"], "gpuscope.snapshot/1");
    assert_eq!(v["driver_version"], "590.48.01");
    let devices = v["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 8);
    let procs: usize = devices
        .iter()
        .map(|d| d["processes"].as_array().unwrap().len())
        .sum();
    assert_eq!(procs, 64, "the demo box runs 64 GPU processes");
    for d in devices {
        assert_eq!(d["name"], "NVIDIA H100 80GB HBM3");
        // H100 SXM has no fans: N/A is null, not 0, and not an error.
        assert!(d["fan_speed_percent"].is_null());
        assert_eq!(d["errors"].as_array().unwrap().len(), 0, "{d}");
        let used = d["memory_used_bytes"].as_u64().unwrap();
        let total = d["memory_total_bytes"].as_u64().unwrap();
        assert!(used <= total);
        for p in d["processes"].as_array().unwrap() {
            assert!(
                p["user"].is_string(),
                "host facts come from the fixture: {p}"
            );
            assert_eq!(p["type"], "C");
        }
    }
}

#[test]
fn mig_devices_follow_their_parent_with_instance_ids() {
    let v = json(&[
        "snapshot",
        "--fixture",
        &fixture("h100-mig"),
        "--json",
        "--frame",
        "5",
    ]);
    let devices = v["devices"].as_array().unwrap();
    assert_eq!(devices[0]["id"], "0");
    assert_eq!(devices[0]["mig_mode"], true);
    let migs: Vec<&Value> = devices
        .iter()
        .filter(|d| !d["mig_index"].is_null())
        .collect();
    assert_eq!(migs.len(), 4);
    for m in &migs {
        assert_eq!(m["index"], 0);
        assert!(m["gpu_instance_id"].is_u64());
        assert!(m["uuid"].as_str().unwrap().starts_with("MIG-"));
        // Temperature is a property of the whole GPU: N/A on a MIG device.
        assert!(m["temperature_celsius"].is_null());
    }
    let in_instances: usize = migs
        .iter()
        .map(|m| m["processes"].as_array().unwrap().len())
        .sum();
    assert!(in_instances > 0, "processes run inside the instances");
    // NVML lists them on the parent too; the snapshot shows each one once, in its instance.
    assert!(devices[0]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["gpu_instance_id"].is_null()));
}

#[test]
fn wddm_process_memory_is_null() {
    let v = json(&[
        "snapshot",
        "--fixture",
        &fixture("windows-wddm"),
        "--json",
        "--frame",
        "0",
    ]);
    let procs = v["devices"][0]["processes"].as_array().unwrap();
    assert!(!procs.is_empty());
    assert!(procs.iter().all(|p| p["used_memory_bytes"].is_null()));
    assert!(procs.iter().any(|p| p["type"] == "C+G"));
}

#[test]
fn a_lost_gpu_reports_its_errors_and_the_others_still_answer() {
    let v = json(&[
        "snapshot",
        "--fixture",
        &fixture("gpu-lost"),
        "--json",
        "--frame",
        "29",
    ]);
    let devices = v["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 4);
    let lost = &devices[2];
    assert!(lost["memory_used_bytes"].is_null());
    let errors = lost["errors"].as_array().unwrap();
    assert!(errors
        .iter()
        .any(|e| e["field"] == "memory" && e["error"].as_str().unwrap().contains("lost")));
    // Static identity was recorded before the loss and still shows.
    assert_eq!(lost["name"], "Tesla T4");
    for (i, d) in devices.iter().enumerate().filter(|(i, _)| *i != 2) {
        assert!(d["memory_used_bytes"].is_u64(), "GPU {i} still answers");
        assert!(d["errors"].as_array().unwrap().is_empty(), "GPU {i}");
    }
}

#[test]
fn text_table_shows_every_gpu_and_na() {
    let out = gpuscope(&["snapshot", "--demo", "--frame", "3"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.matches("NVIDIA H100 80GB HBM3").count(), 8, "{text}");
    assert!(text.contains("N/A"), "fans show as N/A: {text}");
    assert!(text.contains("Command"));
}

#[test]
fn no_driver_says_so_and_points_at_demo() {
    let out = gpuscope(&["snapshot", "--nvml-lib", "/nonexistent/libnvidia-ml.so.1"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot reach the GPUs"), "{err}");
    assert!(err.contains("--demo"), "{err}");
}

#[test]
fn demo_auto_falls_back_to_the_demo_without_a_driver() {
    let out = gpuscope(&[
        "snapshot",
        "--demo=auto",
        "--json",
        "--nvml-lib",
        "/nonexistent/libnvidia-ml.so.1",
    ]);
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["source"], "demo");
    assert!(String::from_utf8_lossy(&out.stderr).contains("demo fixture"));
}

#[test]
fn a_broken_fixture_is_a_usage_error_naming_the_file() {
    let dir = std::env::temp_dir().join(format!("gpuscope-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.json");
    std::fs::write(&bad, "{\"schema_version\": 1, \"meta\": 3}").unwrap();
    let out = gpuscope(&["snapshot", "--fixture", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.json"), "{err}");
    assert!(err.contains("meta"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_frame_out_of_range_is_a_usage_error() {
    let out = gpuscope(&["snapshot", "--demo", "--frame", "100000"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("out of range"));
}

#[test]
fn an_unknown_flag_is_a_usage_error() {
    let out = gpuscope(&["snapshot", "--no-such-flag"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_fixture_without_a_query_shows_it_as_na_and_null() {
    // A fixture recorded before a query existed loads; the query is "not recorded": N/A in the
    // table, null in JSON, and not an error.
    let fx = EditedFixture::new("old-driver", "not-recorded", |v| {
        v["devices"]["0"]
            .as_object_mut()
            .unwrap()
            .remove("enforced_power_limit");
        for frame in v["frames"].as_array_mut().unwrap() {
            frame["devices"]["0"]
                .as_object_mut()
                .unwrap()
                .remove("memory_info");
        }
    });
    let path = fx.path();

    let out = json(&["snapshot", "--json", "--fixture", &path]);
    let d = &out["devices"][0];
    assert!(d["memory_used_bytes"].is_null(), "{d}");
    assert!(d["memory_total_bytes"].is_null(), "{d}");
    assert!(d["power_limit_watts"].is_null(), "{d}");
    assert!(
        d["power_usage_watts"].is_number(),
        "the rest is as recorded: {d}"
    );
    assert_eq!(d["errors"].as_array().unwrap().len(), 0, "{d}");

    let table = gpuscope(&["snapshot", "--fixture", &path]);
    assert!(table.status.success());
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.contains("N/A / N/A"), "memory is N/A:\n{text}");
}

/// Regression: a process list that failed with NO_PERMISSION (the usual answer inside a
/// container), NOT_SUPPORTED or FUNCTION_NOT_FOUND showed as `processes: []` and "No running GPU
/// processes.". It is `null` with the query and reason in the device's `errors`, and "N/A" with
/// the reason in text.
#[test]
fn a_process_list_that_cannot_be_read_is_null_and_na_not_empty() {
    for (error, reason) in [
        ("no_permission", "insufficient permissions"),
        ("not_supported", "not supported"),
        ("function_not_found", "function"),
    ] {
        let fx = EditedFixture::new("gpu-lost", error, |fx| {
            for id in ["0", "1", "2", "3"] {
                fail_process_lists(
                    fx,
                    5,
                    id,
                    &["compute_processes", "graphics_processes"],
                    error,
                );
            }
        });
        let v = json(&[
            "snapshot",
            "--fixture",
            &fx.path(),
            "--frame",
            "5",
            "--json",
        ]);
        for d in v["devices"].as_array().unwrap() {
            assert!(d["processes"].is_null(), "{error}: {d}");
            let errors = d["errors"].as_array().unwrap();
            for list in ["compute_processes", "graphics_processes"] {
                assert!(
                    errors.iter().any(
                        |e| e["field"] == list && e["error"].as_str().unwrap().contains(reason)
                    ),
                    "{error}: {list} is not in {errors:?}"
                );
            }
        }
        let out = gpuscope(&["snapshot", "--fixture", &fx.path(), "--frame", "5"]);
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            !text.contains("No running GPU processes"),
            "{error}: {text}"
        );
        let line = text
            .lines()
            .find(|l| l.starts_with("Processes: N/A ("))
            .unwrap_or_else(|| panic!("{error}: no N/A line in {text}"));
        assert!(line.contains(reason), "{error}: {line}");
    }
}

/// When one list is read and the other cannot be, the processes read are shown and the failure
/// is listed beside them; other devices are not affected.
#[test]
fn one_process_list_failing_shows_the_other_and_its_error() {
    let fx = EditedFixture::new("gpu-lost", "partial", |fx| {
        fail_process_lists(fx, 5, "3", &["compute_processes"], "no_permission");
        fail_process_lists(
            fx,
            5,
            "0",
            &["compute_processes", "graphics_processes"],
            "no_permission",
        );
    });
    let v = json(&[
        "snapshot",
        "--fixture",
        &fx.path(),
        "--frame",
        "5",
        "--json",
    ]);
    let devices = v["devices"].as_array().unwrap();
    // GPU 3: the graphics list (Xorg, PID 675) was read; its compute list was not.
    let gpu3 = &devices[3];
    let pids: Vec<u64> = gpu3["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pid"].as_u64().unwrap())
        .collect();
    assert_eq!(pids, [675]);
    assert_eq!(
        gpu3["errors"],
        serde_json::json!([{"field": "compute_processes", "error": "insufficient permissions"}])
    );
    assert!(devices[0]["processes"].is_null());
    assert_eq!(devices[1]["processes"].as_array().unwrap().len(), 1);
    assert!(devices[1]["errors"].as_array().unwrap().is_empty());
    let out = gpuscope(&["snapshot", "--fixture", &fx.path(), "--frame", "5"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("Processes of GPU 0: N/A (insufficient permissions)"),
        "{text}"
    );
    assert!(text.contains("Xorg"), "{text}");
}

/// Regression: host facts that are not known (an imported `nvidia-smi -q -x` dump has none
/// beyond the process name) came out as `cpu_percent: 0.0`, `host_memory_bytes: 0` and
/// `name: ""`. They are `null`, and "N/A" in text.
#[test]
fn unknown_host_facts_are_null_not_zero_or_empty() {
    let fx = EditedFixture::new("gpu-lost", "no-host-facts", forget_host_facts);
    let v = json(&[
        "snapshot",
        "--fixture",
        &fx.path(),
        "--frame",
        "5",
        "--json",
    ]);
    let procs: Vec<&Value> = v["devices"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|d| d["processes"].as_array().unwrap())
        .collect();
    assert_eq!(procs.len(), 5);
    for p in procs {
        for field in [
            "cpu_percent",
            "host_memory_bytes",
            "name",
            "user",
            "command",
            "running_time_seconds",
        ] {
            assert!(p[field].is_null(), "{field} of {p}");
        }
        // The GPU side is still known.
        assert!(p["used_memory_bytes"].is_u64(), "{p}");
    }
    let out = gpuscope(&["snapshot", "--fixture", &fx.path(), "--frame", "5"]);
    let text = String::from_utf8(out.stdout).unwrap();
    let row = text
        .lines()
        .find(|l| l.contains(" 5759 "))
        .unwrap_or_else(|| panic!("PID 5759 in {text}"));
    assert!(row.trim_end().ends_with("N/A"), "{row}");
}

/// The 8-GPU recording's XID 79 on GPU 2 (frame 14) in the JSON and in `info`: its code among
/// `xid_errors`, the event with its time, kind, code and meaning among `recent_events`, and
/// `xid_79` among the reasons for attention; absent the frame before. Where events cannot be
/// known (Windows: no event sets) both are `null`.
#[test]
fn an_xid_since_start_is_in_the_health_of_its_gpu() {
    let path = fixture("h100-sxm-8gpu");
    let health = |frame: &str, gpu: usize| {
        json(&["snapshot", "--fixture", &path, "--frame", frame, "--json"])["devices"][gpu]
            ["health"]
            .clone()
    };
    let before = health("13", 2);
    assert_eq!(before["xid_errors"], serde_json::json!([]));
    assert_eq!(before["recent_events"], serde_json::json!([]));
    let h = health("14", 2);
    assert_eq!(h["xid_errors"], serde_json::json!([79]));
    let events = h["recent_events"].as_array().unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["kind"], "xid");
    assert_eq!(events[0]["data"], 79);
    assert_eq!(events[0]["description"], "GPU has fallen off the bus");
    let us = events[0]["timestamp_us"].as_u64().unwrap();
    let time: std::time::SystemTime =
        humantime::parse_rfc3339(events[0]["time"].as_str().unwrap()).unwrap();
    assert_eq!(
        time.duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_micros(),
        u128::from(us)
    );
    assert!(h["needs_attention"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!("xid_79")));
    assert_eq!(health("14", 0)["xid_errors"], serde_json::json!([]));

    let out = gpuscope(&["info", "--fixture", &path, "--frame", "14"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Events           : XID 79 since start"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "        {}  XID 79: GPU has fallen off the bus",
            events[0]["time"].as_str().unwrap()
        )),
        "{text}"
    );

    let wddm = json(&["snapshot", "--fixture", &fixture("windows-wddm"), "--json"]);
    assert_eq!(wddm["devices"][0]["health"]["xid_errors"], Value::Null);
    assert_eq!(wddm["devices"][0]["health"]["recent_events"], Value::Null);
}
