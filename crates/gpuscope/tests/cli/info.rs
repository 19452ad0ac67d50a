//! `gpuscope info` end to end, through the binary: the sections, the values of the fixture,
//! MIG devices, N/A, a lost GPU, errors; and the JSON, which is `gpuscope snapshot --json`'s
//! document, checked field by field against docs/snapshot-json.md.

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde_json::Value;

use crate::support::{cli, edited_fixture};
use cli::{assert_null, fixture, run as gpuscope, stdout as ok_text, HOST_FACTS};
use edited_fixture::{fail_process_lists, forget_host_facts, EditedFixture};
use test_support::igpu::SECTIONS;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixture_json(stem: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture(stem)).unwrap()).unwrap()
}

/// The text of one device's block, from its `==== <title>` line to the next.
fn block<'a>(text: &'a str, title: &str) -> &'a str {
    let start = text
        .find(&format!("==== {title} ="))
        .unwrap_or_else(|| panic!("no block {title}: {text}"));
    let rest = &text[start + 5..];
    let end = rest.find("\n==== ").map_or(rest.len(), |e| e + 1);
    &rest[..end]
}

#[test]
fn one_gpu_shows_every_section_with_the_fixture_values_and_its_processes() {
    let fx = fixture_json("h100-sxm-8gpu");
    let text = ok_text(&["info", "--demo", "--frame", "5", "3"]);
    assert_eq!(text.matches("==== GPU").count(), 1, "only GPU 3: {text}");
    let b = block(&text, "GPU 3");
    for s in SECTIONS {
        assert!(b.contains(s), "{s} missing: {b}");
    }
    let uuid = fx["devices"]["3"]["uuid"]["ok"].as_str().unwrap();
    assert!(b.contains(&format!("UUID         : {uuid}")), "{b}");
    let mem = &fx["frames"][5]["devices"]["3"]["memory_info"]["ok"];
    let mib = |k: &str| format!("{:.2} MiB", mem[k].as_u64().unwrap() as f64 / 1048576.0);
    let line = |label: &str| {
        b.lines()
            .find(|l| l.trim_start().starts_with(label))
            .unwrap()
    };
    assert!(line("Free  :").contains(&mib("free")), "{b}");
    assert!(line("Used  :").contains(&mib("used")), "{b}");
    let util = fx["frames"][5]["devices"]["3"]["utilization_rates"]["ok"]["gpu"]
        .as_u64()
        .unwrap();
    assert!(b.contains(&format!("{util}.00%")), "{b}");

    // Every process of GPU 3 at frame 5, with its user and command from the host facts.
    let procs = fx["frames"][5]["devices"]["3"]["compute_processes"]["ok"]
        .as_array()
        .unwrap();
    assert!(!procs.is_empty());
    for p in procs {
        let pid = p["pid"].as_u64().unwrap().to_string();
        let host = &fx["host"]["processes"][&pid];
        let line = b
            .lines()
            .find(|l| l.split_whitespace().next() == Some(pid.as_str()))
            .unwrap_or_else(|| panic!("no line for PID {pid}: {b}"));
        assert!(line.contains(host["user"].as_str().unwrap()), "{line}");
        assert!(line.contains(host["name"].as_str().unwrap()), "{line}");
        let gpu_mem = format!("{}MiB", p["used_gpu_memory"].as_u64().unwrap() >> 20);
        assert!(line.contains(&gpu_mem), "{line} lacks {gpu_mem}");
    }
}

#[test]
fn without_an_index_every_gpu_is_shown() {
    let text = ok_text(&["info", "--demo", "--frame", "5"]);
    for i in 0..8 {
        block(&text, &format!("GPU {i}"));
    }
    assert_eq!(text.matches("GPU MEMORY:").count(), 8);
}

#[test]
fn an_index_that_does_not_exist_is_a_usage_error() {
    let out = gpuscope(&["info", "--demo", "9"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("no GPU with index 9: this machine has 8 GPUs (0-7)"),
        "{err}"
    );
    for bad in ["x", "-1", "1:2:3"] {
        let out = gpuscope(&["info", "--demo", "--", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(String::from_utf8(out.stderr).unwrap().contains(bad));
    }
    let out = gpuscope(&["info", "--fixture", &fixture("h100-mig"), "0:7"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("no MIG device with index 7"), "{err}");
    // Names the ones there are, as a user would type them.
    assert!(err.contains("its MIG devices are 0, 1"), "{err}");
    // Regression: a GPU not in MIG mode said "(it has [])".
    let out = gpuscope(&["info", "--demo", "0:9"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("GPU 0 has no MIG device with index 9: it has no MIG devices"),
        "{err}"
    );
    assert!(!err.contains("[]"), "{err}");
}

#[test]
fn a_gpu_in_mig_mode_shows_its_mig_devices_with_their_processes() {
    let fx = fixture_json("h100-mig");
    let text = info_text("h100-mig", 20, &["0"]);
    let parent = block(&text, "GPU 0");
    assert!(parent.contains("listed under its MIG devices"), "{parent}");
    for mig in ["0:0", "0:1", "0:2", "0:3"] {
        let b = block(&text, &format!("MIG DEVICE {mig}"));
        let uuid = fx["devices"][mig]["uuid"]["ok"].as_str().unwrap();
        assert!(b.contains(uuid), "{b}");
        let procs = fx["frames"][20]["devices"][mig]["compute_processes"]["ok"]
            .as_array()
            .unwrap();
        if procs.is_empty() {
            assert!(b.contains("No running processes"), "{b}");
        }
        for p in procs {
            let pid = p["pid"].as_u64().unwrap().to_string();
            assert!(
                b.lines()
                    .any(|l| l.split_whitespace().next() == Some(pid.as_str())),
                "{pid} not under {mig}: {b}"
            );
            assert!(!parent.contains(&pid), "{pid} also under the parent");
        }
    }
    // One MIG device alone.
    let text = info_text("h100-mig", 20, &["0:1"]);
    assert_eq!(text.matches("==== ").count(), 1);
    assert!(text.contains("21230"), "{text}");
}

#[test]
fn process_memory_the_driver_cannot_tell_is_na() {
    let text = info_text("windows-wddm", 0, &[]);
    let b = block(&text, "GPU 0");
    let procs: Vec<&str> = b
        .lines()
        .skip_while(|l| !l.contains("PID"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .collect();
    assert!(procs.len() >= 5, "{b}");
    for line in procs {
        // PID | NAME | USER | PARENT | CREATION TIME | TYPE | GPU MEM | COMMAND
        let cols: Vec<&str> = line.split(" | ").map(str::trim).collect();
        assert_eq!(cols[5], "C+G", "{line}");
        assert_eq!(cols[6], "N/A", "{line}");
    }
}

#[test]
fn a_lost_gpu_says_so_and_the_others_still_show() {
    let fx = fixture_json("gpu-lost");
    let text = ok_text(&["info", "--fixture", &fixture("gpu-lost"), "--frame", "31"]);
    let lost = block(&text, "GPU 2");
    assert!(lost.contains("Total : N/A"), "{lost}");
    assert!(lost.contains("ERRORS:") && lost.contains("lost"), "{lost}");
    for i in ["0", "1", "3"] {
        let b = block(&text, &format!("GPU {i}"));
        let free = fx["frames"][31]["devices"][i]["memory_info"]["ok"]["free"]
            .as_u64()
            .unwrap();
        assert!(
            b.contains(&format!("{:.2} MiB", free as f64 / 1048576.0)),
            "{b}"
        );
        assert!(!b.contains("ERRORS:"), "{b}");
    }
}

/// `info --json` of frame `frame` of the fixture at `path`: of `device`, or of every device.
fn info_json(path: &str, frame: usize, device: Option<&str>) -> Value {
    let frame = frame.to_string();
    let mut args = vec!["info", "--fixture", path, "--frame", &frame, "--json"];
    args.extend(device);
    json(&args)
}

/// `info` of `devices` (all where none) in the scenario fixture `stem` at `frame`, as text.
fn info_text(stem: &str, frame: usize, devices: &[&str]) -> String {
    let (path, frame) = (fixture(stem), frame.to_string());
    ok_text(
        &[
            &["info", "--fixture", &path, "--frame", &frame][..],
            devices,
        ]
        .concat(),
    )
}

fn json(args: &[&str]) -> Value {
    serde_json::from_str(&ok_text(args)).expect("stdout is JSON")
}

#[test]
fn info_json_is_the_snapshot_document_of_those_devices() {
    let snap = json(&["snapshot", "--demo", "--frame", "5", "--json"]);
    let info = json(&["info", "--demo", "--frame", "5", "3", "--json"]);
    assert_eq!(info["schema"], "gpuscope.snapshot/1");
    assert_eq!(info["driver_version"], snap["driver_version"]);
    let devices = info["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 1);
    assert_eq!(devices[0], snap["devices"][3]);

    let mig = info_json(&fixture("h100-mig"), 20, Some("0"));
    let ids = cli::device_ids(&mig);
    assert_eq!(ids, ["0", "0:0", "0:1", "0:2", "0:3"]);
    let all = info_json(&fixture("gpu-lost"), 31, None);
    let lost = &all["devices"][2];
    assert!(lost["memory_free_bytes"].is_null());
    assert!(!lost["errors"].as_array().unwrap().is_empty());
}

/// The field names of a documentation table under `heading`: the backticked names of the
/// first column.
fn documented(doc: &str, heading: &str) -> BTreeSet<String> {
    let start = doc.find(heading).unwrap_or_else(|| panic!("no {heading}"));
    let section = &doc[start + heading.len()..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .flat_map(|l| {
            let first = l.split('|').nth(1).unwrap_or("");
            first
                .split(',')
                .map(|f| f.trim().trim_matches('`').to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object().unwrap().keys().cloned().collect()
}

/// docs/snapshot-json.md lists every field, and nothing else, of `snapshot --json` and of
/// `info --json`: a field added, renamed or dropped without the document fails here.
#[test]
fn snapshot_and_info_json_have_exactly_the_documented_fields() {
    let doc = std::fs::read_to_string(root().join("docs/snapshot-json.md")).unwrap();
    let top = documented(&doc, "## Top level");
    let device = documented(&doc, "## `devices[]`");
    let process = documented(&doc, "## `devices[].processes[]`");
    let health = documented(&doc, "## `devices[].health`");
    let activity = documented(&doc, "## `devices[].activity`");
    let config = documented(&doc, "## `devices[].config`");
    let mut activities = 0;
    assert!(top.contains("schema") && device.contains("memory_free_bytes"));
    for args in [
        &["snapshot", "--demo", "--frame", "5", "--json"][..],
        &["info", "--demo", "--frame", "5", "--json", "0"][..],
        &[
            "snapshot",
            "--fixture",
            &fixture("geforce-desktop"),
            "--json",
        ][..],
    ] {
        let v = json(args);
        assert_eq!(keys(&v), top, "{args:?}");
        for d in v["devices"].as_array().unwrap() {
            assert_eq!(keys(d), device, "{args:?}");
            assert_eq!(keys(&d["health"]), health, "{args:?}");
            assert_eq!(keys(&d["config"]), config, "{args:?}");
            if d["activity"].is_object() {
                assert_eq!(keys(&d["activity"]), activity, "{args:?}");
                activities += 1;
            }
            for p in d["processes"].as_array().into_iter().flatten() {
                assert_eq!(keys(p), process, "{args:?}");
            }
        }
    }
    assert!(activities > 0, "the demo's H100s give GPM activity");
}

/// Regression: `info` showed "N/A" without a reason, or "No running processes", for a process
/// list that failed with NO_PERMISSION; `info --json` gave `processes: []`. The text is "N/A"
/// with the reason, the JSON `null` with the query and reason in `errors`.
#[test]
fn a_process_list_without_permission_is_na_with_its_reason() {
    let fx = EditedFixture::new("gpu-lost", "info-no-permission", |fx| {
        fail_process_lists(
            fx,
            5,
            "1",
            &["compute_processes", "graphics_processes"],
            "no_permission",
        );
        fail_process_lists(fx, 5, "3", &["compute_processes"], "no_permission");
    });
    let text = ok_text(&["info", "--fixture", &fx.path(), "--frame", "5"]);
    let gpu1 = block(&text, "GPU 1");
    let procs = &gpu1[gpu1.find("PROCESSES:").unwrap()..];
    assert!(
        procs.starts_with("PROCESSES:\n    N/A (insufficient permissions)\n"),
        "{procs}"
    );
    assert!(!gpu1.contains("No running processes"), "{gpu1}");
    // GPU 3: the graphics list was read (Xorg), the compute list was not.
    let gpu3 = block(&text, "GPU 3");
    assert!(gpu3.contains("Xorg"), "{gpu3}");
    assert!(
        gpu3.contains("compute_processes: N/A (insufficient permissions)"),
        "{gpu3}"
    );
    // The other GPUs list their processes as before.
    assert!(block(&text, "GPU 0").contains("5759"), "{text}");

    let v = info_json(&fx.path(), 5, Some("1"));
    let d = &v["devices"][0];
    assert!(d["processes"].is_null(), "{d}");
    assert_eq!(
        d["errors"],
        serde_json::json!([
            {"field": "compute_processes", "error": "insufficient permissions"},
            {"field": "graphics_processes", "error": "insufficient permissions"}
        ])
    );
}

/// Regression: unknown host facts (an imported `nvidia-smi` dump) read as 0 and "" in
/// `info --json` too; they are `null`, and "N/A" in the text.
#[test]
fn unknown_host_facts_are_null_in_info() {
    let fx = EditedFixture::new("gpu-lost", "info-no-host-facts", forget_host_facts);
    let v = info_json(&fx.path(), 5, Some("0"));
    let p = &v["devices"][0]["processes"][0];
    assert_eq!(p["pid"], 5759);
    assert_null(p, &HOST_FACTS);
    let text = ok_text(&["info", "--fixture", &fx.path(), "--frame", "5", "0"]);
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with("5759 "))
        .unwrap_or_else(|| panic!("PID 5759 in {text}"));
    // PID | NAME | USER | PARENT | CREATION TIME | TYPE | GPU MEM | COMMAND: the host facts
    // N/A, the GPU's own known.
    let cols: Vec<&str> = row.split(" | ").map(str::trim).collect();
    assert_eq!(cols[1..5], ["N/A", "N/A", "N/A", "N/A"], "{row}");
    assert_eq!(cols[7], "N/A", "{row}");
    assert_ne!(cols[6], "N/A", "{row}");
}

/// The GPM metrics of a fixture's device at a frame, as `{field: number}` (absent: N/A).
fn recorded_gpm(stem: &str, frame: usize, device: &str) -> Option<serde_json::Map<String, Value>> {
    fixture_json(stem)["frames"][frame]["devices"][device]["gpm_metrics"]["ok"]
        .as_object()
        .cloned()
}

/// GPM activity (issue 13): `info --json` gives every metric the fixture recorded, under its
/// documented key, for a whole GPU and for each MIG instance, and the text's ACTIVITY section
/// shows SM and tensor activity; a GPU without GPM (old driver) and a first frame (no earlier
/// sample) are N/A.
#[test]
fn info_shows_the_recorded_gpm_activity_of_gpus_and_mig_instances() {
    for (stem, frame, device) in [
        ("h100-sxm-8gpu", 5, "0"),
        ("h100-sxm-8gpu", 20, "5"),
        ("h100-mig", 12, "0:0"),
        ("h100-mig", 12, "0:1"),
        ("h100-mig", 12, "0"),
    ] {
        let recorded = recorded_gpm(stem, frame, device)
            .unwrap_or_else(|| panic!("{stem} frame {frame} device {device} records GPM"));
        let v = info_json(&fixture(stem), frame, Some(device));
        let d = v["devices"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["id"] == device)
            .unwrap_or_else(|| panic!("{device} in {v}"));
        let activity = d["activity"].as_object().expect("activity is an object");
        for (name, value) in &recorded {
            let key = if name.starts_with("pcie_") || name.starts_with("nvlink_") {
                format!("{name}_mib_per_second")
            } else {
                format!("{name}_percent")
            };
            assert_eq!(
                &activity[&key], value,
                "{stem} {device} frame {frame}: {key}"
            );
        }
        let unrecorded = activity.values().filter(|v| v.is_null()).count();
        assert_eq!(
            unrecorded + recorded.len(),
            activity.len(),
            "{stem} {device}"
        );
        let text = info_text(stem, frame, &[device]);
        let sm = recorded["sm_activity"].as_f64().unwrap();
        let tensor = recorded["tensor_activity"].as_f64().unwrap();
        assert!(
            text.contains(&format!("SM               : active {sm:.1} %")),
            "{stem} {device}: {text}"
        );
        assert!(
            text.contains(&format!("Tensor           : any {tensor:.1} %")),
            "{text}"
        );
    }
    // The first frame of a recording has no earlier sample; the old driver has no GPM at all.
    for (stem, frame) in [
        ("h100-sxm-8gpu", 0),
        ("old-driver", 3),
        ("geforce-desktop", 3),
    ] {
        let v = info_json(&fixture(stem), frame, Some("0"));
        assert!(
            v["devices"][0]["activity"].is_null(),
            "{stem}: {}",
            v["devices"][0]["activity"]
        );
        let text = info_text(stem, frame, &["0"]);
        // With why: the H100's recording has one sample so far at its first frame; the others
        // are GPUs before Hopper, which have no GPM.
        let why = if stem.starts_with("h100") {
            "ACTIVITY (GPM):\n    N/A (GPM measures activity between two samples"
        } else {
            "ACTIVITY (GPM):\n    N/A (no GPM on this GPU: it needs Hopper or newer)\n"
        };
        assert!(text.contains(why), "{stem}: {text}");
    }
}

/// The remaining health queries (issue 13 item 1) reach `info --json` with the fixture's
/// values: memory temperature, fans' target speeds, NVLink error counters per link and ECC
/// counts per memory location.
#[test]
fn info_json_has_the_recorded_health_values() {
    for (stem, frame, device) in [("h100-sxm-8gpu", 24, "2"), ("geforce-desktop", 4, "0")] {
        let f = fixture_json(stem);
        let dy = &f["frames"][frame]["devices"][device];
        let v = info_json(&fixture(stem), frame, Some(device));
        let h = &v["devices"][0]["health"];
        assert_eq!(
            h["memory_temperature_celsius"], dy["memory_temperature"]["ok"],
            "{stem}"
        );
        // The recorded values of a list of results.
        let oks = |key: &str| -> Value {
            let list = dy[key].as_array().unwrap();
            list.iter().map(|a| a["ok"].clone()).collect()
        };
        assert_eq!(
            h["fan_target_speeds_percent"],
            oks("fan_target_speeds"),
            "{stem}"
        );
        assert_eq!(h["nvlink_errors"], oks("nvlink_error_counters"), "{stem}");
        for (field, key) in [
            ("ecc_device_memory", "device_memory"),
            ("ecc_sram", "sram"),
            ("ecc_l1_cache", "l1_cache"),
        ] {
            assert_eq!(
                h["ecc_errors_by_location"][key], dy[field]["ok"],
                "{stem}: {key}"
            );
        }
    }
    // GPU 2 of the 8-GPU box takes NVLink replays on link 7 as the recording goes on.
    let v = info_json(&fixture("h100-sxm-8gpu"), 24, Some("2"));
    assert_eq!(v["devices"][0]["health"]["nvlink_errors"][7]["replay"], 6);
}

/// igpu's PROCESSES table: PID, NAME, USER, PARENT (with its name when the host knows it),
/// CREATION TIME as local date and time text, GPU MEM; then our TYPE and COMMAND.
#[test]
fn processes_show_name_parent_and_creation_time_as_igpu_does() {
    // The trainer's parent is made another process the recording knows (a launcher).
    let fx = fixture_json("h100-sxm-8gpu");
    let procs = fx["frames"][5]["devices"]["0"]["compute_processes"]["ok"]
        .as_array()
        .unwrap();
    let (child, parent) = (
        procs[0]["pid"].as_u64().unwrap(),
        procs[1]["pid"].as_u64().unwrap(),
    );
    let edited = EditedFixture::new("h100-sxm-8gpu", "igpu-parent", |f| {
        f["host"]["processes"][child.to_string()]["ppid"] = parent.into();
    });
    let out = cli::command(&["info", "0", "--fixture", &edited.path(), "--frame", "5"])
        .env("TZ", "UTC")
        .output()
        .expect("gpuscope runs");
    let text = cli::ok_stdout(out, "info 0");
    let header = text
        .lines()
        .find(|l| l.trim_start().starts_with("PID "))
        .unwrap_or_else(|| panic!("{text}"));
    let columns: Vec<&str> = header.split('|').map(str::trim).collect();
    assert_eq!(
        columns,
        [
            "PID",
            "NAME",
            "USER",
            "PARENT",
            "CREATION TIME",
            "TYPE",
            "GPU MEM",
            "COMMAND"
        ]
    );
    let row = |pid: u64| -> Vec<String> {
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{pid} ")))
            .unwrap_or_else(|| panic!("no row for {pid}: {text}"));
        line.split(" | ").map(|c| c.trim().to_string()).collect()
    };
    let facts = &fx["host"]["processes"];
    for pid in [child, parent] {
        let r = row(pid);
        let f = &facts[pid.to_string()];
        assert_eq!(r[1], f["name"].as_str().unwrap(), "{r:?}");
        assert_eq!(r[2], f["user"].as_str().unwrap(), "{r:?}");
        // Start time as UTC text (TZ=UTC), as igpu's `create_time` prints.
        let start = f["start_time_s"].as_u64().unwrap();
        let when = humantime::format_rfc3339_seconds(
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(start),
        )
        .to_string();
        assert_eq!(
            r[4],
            when.trim_end_matches('Z').replacen('T', " ", 1),
            "{r:?}"
        );
    }
    let parent_name = facts[parent.to_string()]["name"].as_str().unwrap();
    assert_eq!(row(child)[3], format!("{parent} ({parent_name})"));
    // A parent the host does not know is its PID alone.
    let ppid = facts[parent.to_string()]["ppid"].as_u64().unwrap();
    assert_eq!(row(parent)[3], ppid.to_string());
}
