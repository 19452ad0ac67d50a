//! `gpuscope snapshot` end to end, through the binary.

use serde_json::Value;

use crate::support::{cli, edited_fixture};
use cli::{assert_null, each, fixture, run as gpuscope, strip_sgr, HOST_FACTS};
use edited_fixture::{fail_process_lists, forget_host_facts, EditedFixture};

fn json(args: &[&str]) -> Value {
    cli::json(&mut cli::command(args))
}

/// `snapshot --json` of the fixture file `path` at `frame`.
fn frame_json(path: &str, frame: &str) -> Value {
    json(&["snapshot", "--fixture", path, "--frame", frame, "--json"])
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
    // Nothing to show: exit 4 (docs/exit-codes.md), as `--prometheus` to a dead server.
    assert_eq!(out.status.code(), Some(4));
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

/// The errors a process list may fail with, in the fixture's words, and the reason shown.
const PROCESS_LIST_FAILURES: [(&str, &str); 3] = [
    ("no_permission", "insufficient permissions"),
    ("not_supported", "not supported"),
    ("function_not_found", "function"),
];

/// Regression: a process list that failed with NO_PERMISSION (the usual answer inside a
/// container), NOT_SUPPORTED or FUNCTION_NOT_FOUND showed as `processes: []` and "No running GPU
/// processes.". It is `null` with the query and reason in the device's `errors`, and "N/A" with
/// the reason in text.
#[test]
fn a_process_list_that_cannot_be_read_is_null_and_na_not_empty() {
    for (error, reason) in PROCESS_LIST_FAILURES {
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
        let v = frame_json(&fx.path(), "5");
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
    let v = frame_json(&fx.path(), "5");
    let devices = v["devices"].as_array().unwrap();
    // GPU 3: the graphics list (Xorg, PID 675) was read; its compute list was not.
    let gpu3 = &devices[3];
    assert_eq!(each(&gpu3["processes"], "pid"), [675]);
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
    let v = frame_json(&fx.path(), "5");
    let procs: Vec<&Value> = v["devices"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|d| d["processes"].as_array().unwrap())
        .collect();
    assert_eq!(procs.len(), 5);
    for p in procs {
        assert_null(p, &HOST_FACTS);
        assert_null(p, &["running_time_seconds"]);
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

/// Regression: the header's "Memory" sat over the memory percentage. Each right-aligned
/// column's label ends where its values end, on every fixture (MIG rows and N/A included).
#[test]
fn text_table_headers_sit_over_their_values() {
    let right_aligned = ["Temp", "Fan", "Power", "Memory-Usage", "Mem", "Util", "MIG"];
    for stem in [
        "h100-sxm-8gpu",
        "h100-mig",
        "old-driver",
        "windows-wddm",
        "gpu-lost",
    ] {
        let out = gpuscope(&["snapshot", "--fixture", &fixture(stem), "--frame", "0"]);
        let text = String::from_utf8(out.stdout).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let h = lines
            .iter()
            .position(|l| l.starts_with("GPU ") && l.contains("Bus-Id"))
            .unwrap_or_else(|| panic!("{stem}: no header: {text}"));
        let header: Vec<char> = lines[h].chars().collect();
        let ends: Vec<(&str, usize)> = right_aligned
            .iter()
            .map(|label| {
                let at = format!(" {label}");
                // The label as a whole word: " Mem" is also the start of " Memory-Usage".
                let start = lines[h]
                    .match_indices(&at)
                    .map(|(i, _)| i)
                    .find(|i| {
                        lines[h][i + at.len()..]
                            .chars()
                            .next()
                            .is_none_or(|c| c == ' ')
                    })
                    .unwrap_or_else(|| panic!("{stem}: no {label}"));
                // Byte and char positions agree: the header is ASCII.
                assert!(header.iter().all(char::is_ascii));
                (*label, start + at.len())
            })
            .collect();
        let rows: Vec<&str> = lines[h + 1..]
            .iter()
            .take_while(|l| !l.is_empty())
            .filter(|l| !l.trim_start().starts_with("error:"))
            .copied()
            .collect();
        assert!(!rows.is_empty(), "{stem}: {text}");
        for row in rows {
            let chars: Vec<char> = row.chars().collect();
            for (label, end) in &ends {
                assert!(
                    chars.get(end - 1).is_some_and(|c| !c.is_whitespace())
                        && chars.get(*end).is_none_or(|c| c.is_whitespace()),
                    "{stem}: the value under {label} does not end at column {end}:\n{}\n{row}",
                    lines[h]
                );
            }
        }
    }
}

/// The JSON says which host and when: the recorded machine's name and the recorded time of the
/// frame served, for a replay.
#[test]
fn json_names_the_host_and_the_time_of_the_sample() {
    let raw: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("h100-sxm-8gpu")).unwrap()).unwrap();
    let recorded = raw["meta"]["recorded_at"].as_str().unwrap();
    let recorded_ms = humantime::parse_rfc3339(recorded)
        .unwrap()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    for frame in [0usize, 5] {
        let doc = frame_json(&fixture("h100-sxm-8gpu"), &frame.to_string());
        assert_eq!(doc["hostname"], raw["host"]["hostname"]);
        let want = recorded_ms + raw["frames"][frame]["t_ms"].as_u64().unwrap();
        assert_eq!(doc["time_unix_ms"].as_u64(), Some(want), "frame {frame}");
        let time = doc["time"].as_str().unwrap();
        assert!(time.ends_with('Z'), "{time}");
        let parsed = humantime::parse_rfc3339(time)
            .unwrap()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        assert_eq!(parsed, want, "{time}");
    }
    // A fixture without a host name: null, not a guess.
    let mut edited = raw.clone();
    edited["host"]["hostname"] = Value::Null;
    let dir = std::env::temp_dir().join(format!("gpuscope-snap-host-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("no-hostname.json");
    std::fs::write(&path, edited.to_string()).unwrap();
    let doc = json(&["snapshot", "--fixture", path.to_str().unwrap(), "--json"]);
    std::fs::remove_dir_all(&dir).ok();
    assert!(doc["hostname"].is_null(), "{}", doc["hostname"]);
}

/// `--query ... --format csv` writes what `nvidia-smi --query-gpu=... --format=csv` writes:
/// the header with units in brackets, ", " between cells, units after values, `[N/A]`,
/// Enabled/Disabled. (A real line of nvidia-smi 590.48.01 on an H100, from
/// utkuozdemir/nvidia_gpu_exporter's capture `linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01`:
/// `..., fan.speed [%], ..., memory.total [MiB], ...` over `..., [N/A], ..., 81559 MiB, ...`,
/// `69.85 W`, `Enabled`.) Values are those of the fixture.
#[test]
fn query_csv_is_what_nvidia_smi_query_gpu_writes() {
    let raw: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("h100-sxm-8gpu")).unwrap()).unwrap();
    let out = gpuscope(&[
        "snapshot",
        "--fixture",
        &fixture("h100-sxm-8gpu"),
        "--frame",
        "3",
        "--query",
        "timestamp,index,name,memory.used,memory.total,power.draw,fan.speed,persistence_mode,utilization.gpu",
        "--format",
        "csv",
    ]);
    cli::assert_ok(&out, "gpuscope");
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "timestamp, index, name, memory.used [MiB], memory.total [MiB], power.draw [W], \
         fan.speed [%], persistence_mode, utilization.gpu [%]"
    );
    assert_eq!(lines.len(), 9, "{text}");
    for (i, line) in lines[1..].iter().enumerate() {
        let cells: Vec<&str> = line.split(", ").collect();
        let d = &raw["devices"][i.to_string()];
        let f = &raw["frames"][3]["devices"][i.to_string()];
        assert_eq!(cells.len(), 9, "{line}");
        assert_eq!(cells[0], "2026/11/01 10:00:03.000", "{line}");
        assert_eq!(cells[1], i.to_string());
        assert_eq!(cells[2], d["name"]["ok"].as_str().unwrap());
        // Rounded to the nearest MiB, as nvidia-smi does (docs/smi.md).
        let mib = |v: &Value| {
            let mib = (v.as_u64().unwrap() as f64 / (1u64 << 20) as f64).round_ties_even();
            format!("{mib} MiB")
        };
        assert_eq!(cells[3], mib(&f["memory_info"]["ok"]["used"]));
        assert_eq!(cells[4], mib(&f["memory_info"]["ok"]["total"]));
        let mw = f["power_usage"]["ok"].as_u64().unwrap();
        assert_eq!(cells[5], format!("{:.2} W", mw as f64 / 1000.0));
        assert_eq!(cells[6], "[N/A]", "the H100 SXM has no fans");
        let persist = d["persistence_mode"]["ok"]
            .as_bool()
            .or_else(|| f["persistence_mode"]["ok"].as_bool())
            .unwrap();
        assert_eq!(cells[7], if persist { "Enabled" } else { "Disabled" });
        assert_eq!(
            cells[8],
            format!(
                "{} %",
                f["utilization_rates"]["ok"]["gpu"].as_u64().unwrap()
            )
        );
    }
    // noheader,nounits: bare values for scripts.
    let out = gpuscope(&[
        "snapshot",
        "--demo",
        "--frame",
        "3",
        "--query",
        "index,memory.used",
        "--format",
        "csv,noheader,nounits",
    ]);
    let text = String::from_utf8(out.stdout).unwrap();
    let first = text.lines().next().unwrap();
    let used = raw["frames"][3]["devices"]["0"]["memory_info"]["ok"]["used"]
        .as_u64()
        .unwrap();
    let used = (used as f64 / (1u64 << 20) as f64).round_ties_even();
    assert_eq!(first, format!("0, {used}"));
}

#[test]
fn query_bad_input_is_a_usage_error_that_names_it() {
    for (args, needle) in [
        (&["--query", "index,bogus.field"][..], "\"bogus.field\""),
        (&["--query", "index,,name"][..], "empty field name"),
        (&["--query", "index", "--format", "tsv"][..], "\"tsv\""),
        (
            &["--query", "index", "--format", "csv,loud"][..],
            "\"loud\"",
        ),
        (&["--format", "csv"][..], "--query"),
        (&["--query", "index", "--json"][..], "--json"),
    ] {
        let out = gpuscope(&[&["snapshot", "--demo"][..], args].concat());
        cli::assert_usage_error(&out, args, needle);
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    // Escaped: a field name is typed by the user but echoed to a terminal.
    let out = gpuscope(&["snapshot", "--demo", "--query", "index,\x1b]0;x\x07"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!out.stderr.contains(&0x1b), "raw ESC echoed");
    // `--query help` lists every field with its unit.
    let out = gpuscope(&["snapshot", "--query", "help"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success());
    assert!(text.contains("memory.used [MiB]"), "{text}");
    assert!(text.contains("pci.bus_id"), "{text}");
}

/// `snapshot --compact` (gpustat's view): a line per device with the figures of `--json`, then
/// a line per process with its user and GPU memory; PID and command on request.
#[test]
fn compact_shows_each_device_and_its_processes_beneath() {
    let base = ["snapshot", "--demo", "--frame", "4"];
    let doc = json(&[&base[..], &["--json"]].concat());
    let out = gpuscope(&[&base[..], &["--compact", "--show-pid", "--show-cmd"]].concat());
    cli::assert_ok(&out, "gpuscope");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains('\x1b'), "no colour off a terminal: {text}");
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with(doc["hostname"].as_str().unwrap()),
        "{}",
        lines[0]
    );
    let mut at = 1;
    for d in doc["devices"].as_array().unwrap() {
        let line = lines[at];
        assert!(
            line.starts_with(&format!("[{}]", d["id"].as_str().unwrap())),
            "{line}"
        );
        let used = d["memory_used_bytes"].as_u64().unwrap() >> 20;
        let total = d["memory_total_bytes"].as_u64().unwrap() >> 20;
        assert!(line.contains(&format!("{used} /  {total} MiB")), "{line}");
        assert!(
            line.contains(&format!("{}°C", d["temperature_celsius"])),
            "{line}"
        );
        assert!(
            line.contains(&format!("{} %", d["gpu_utilization_percent"])),
            "{line}"
        );
        at += 1;
        for p in d["processes"].as_array().unwrap() {
            let line = lines[at];
            let mem = p["used_memory_bytes"].as_u64().unwrap() >> 20;
            let want = format!(
                "  └ {}/{}({mem}M) {}",
                p["user"].as_str().unwrap(),
                p["pid"],
                p["command"].as_str().unwrap()
            );
            assert_eq!(line, want);
            at += 1;
        }
    }
    assert_eq!(at, lines.len(), "{text}");

    // --only keeps the devices named; the header can go.
    let out = gpuscope(&[&base[..], &["--compact", "--no-header", "--only", "2", "5"]].concat());
    let text = String::from_utf8(out.stdout).unwrap();
    let devices: Vec<&str> = text.lines().filter(|l| l.starts_with('[')).collect();
    assert_eq!(devices.len(), 2, "{text}");
    assert!(
        devices[0].starts_with("[2]") && devices[1].starts_with("[5]"),
        "{text}"
    );
    assert!(
        text.lines().next().unwrap().starts_with("[2]"),
        "no header: {text}"
    );

    // Colour when asked.
    let out = gpuscope(&[&base[..], &["--compact", "--color", "always"]].concat());
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .contains("\x1b[36m[0]"));
}

#[test]
fn compact_bad_input_is_a_usage_error() {
    for (args, needle) in [
        (
            &["--compact", "--only", "9"][..],
            "--only 9: no such device",
        ),
        (&["--compact", "--json"][..], "--json"),
        (&["--show-pid"][..], "--compact"),
        (&["--compact", "--color", "sometimes"][..], "sometimes"),
    ] {
        cli::assert_usage_error(
            &gpuscope(&[&["snapshot", "--demo"][..], args].concat()),
            args,
            needle,
        );
    }
}

/// On a terminal, `--compact` fits the terminal's width (lines cut with `…`) and is in colour
/// unless NO_COLOR is set. `script` (util-linux) gives it a pseudo-terminal of 60 columns.
#[cfg(target_os = "linux")]
#[test]
fn compact_on_a_terminal_fits_its_width() {
    let exe = env!("CARGO_BIN_EXE_gpuscope");
    for (no_color, coloured) in [("", true), ("1", false)] {
        let inner =
            format!("stty cols 60 rows 40 && {exe} snapshot --demo --frame 4 --compact --show-cmd");
        let out = std::process::Command::new("script")
            .args(["-qec", &inner, "/dev/null"])
            .env_remove("GPUSCOPE_FIXTURE")
            .env("NO_COLOR", no_color)
            .output()
            .expect("script(1) from util-linux runs");
        assert!(out.status.success());
        let screen = String::from_utf8(out.stdout).unwrap().replace('\r', "");
        assert_eq!(
            screen.contains('\x1b'),
            coloured,
            "NO_COLOR={no_color:?}: {screen}"
        );
        // Width counted without the colour codes.
        let plain = strip_sgr(&screen);
        let widest = plain.lines().map(|l| l.chars().count()).max().unwrap();
        assert_eq!(widest, 60, "{plain}");
        assert!(plain.lines().any(|l| l.ends_with('…')), "{plain}");
    }
}

/// `--watch` prints the snapshot again every interval until stopped.
#[test]
fn watch_repeats_the_snapshot() {
    let args = ["snapshot", "--demo", "--compact", "--watch", "100ms"];
    let headers = watched_lines(&args, 3, |line| line.starts_with("hgx-h100-07"));
    assert_eq!(headers.len(), 3);
}

/// Starts gpuscope with `args` (a `--watch`), reads its stdout until `n` lines that `pick`
/// takes have come (or it ends), stops it and returns them.
fn watched_lines(args: &[&str], n: usize, pick: impl Fn(&str) -> bool) -> Vec<String> {
    use std::io::{BufRead, BufReader};
    let mut child = cli::command(args)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("gpuscope runs");
    let reader = BufReader::new(child.stdout.take().unwrap());
    let lines = reader
        .lines()
        .map(Result::unwrap)
        .filter(|line| pick(line))
        .take(n)
        .collect();
    child.kill().ok();
    child.wait().ok();
    lines
}

/// `--json --watch` writes JSON Lines: every line one whole document, a line each interval.
#[test]
fn json_watch_writes_json_lines() {
    let lines = watched_lines(
        &["snapshot", "--demo", "--json", "--watch", "100ms"],
        3,
        |_| true,
    );
    assert_eq!(lines.len(), 3);
    for line in &lines {
        let doc: Value = serde_json::from_str(line).expect("each line is a JSON document");
        assert_eq!(doc["schema"], "gpuscope.snapshot/1");
        assert_eq!(doc["devices"].as_array().unwrap().len(), 8);
    }
}

/// The 8-GPU recording's XID 79 on GPU 2 (frame 14) in the JSON and in `info`: its code among
/// `xid_errors`, the event with its time, kind, code and meaning among `recent_events`, and
/// `xid_79` among the reasons for attention; absent the frame before. Where events cannot be
/// known (Windows: no event sets) both are `null`.
#[test]
fn an_xid_since_start_is_in_the_health_of_its_gpu() {
    let path = fixture("h100-sxm-8gpu");
    let health =
        |frame: &str, gpu: usize| frame_json(&path, frame)["devices"][gpu]["health"].clone();
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

/// The recorded per-process samples of GPU 0 in frame `frame` of `fx`: PID -> the newest
/// (timestamp µs, sm).
fn recorded_newest(fx: &Value, frame: usize) -> std::collections::BTreeMap<u64, (u64, u64)> {
    let mut newest = std::collections::BTreeMap::new();
    let samples = fx["frames"][frame]["devices"]["0"]["process_utilization"]["ok"]
        .as_array()
        .unwrap();
    for s in samples {
        let (t, sm) = (
            s["timestamp_us"].as_u64().unwrap(),
            s["sm"].as_u64().unwrap(),
        );
        let e = newest.entry(s["pid"].as_u64().unwrap()).or_insert((t, sm));
        if t >= e.0 {
            *e = (t, sm);
        }
    }
    newest
}

/// Regression: on real H100s a process sampled less often than another showed SM `N/A`.
/// `snapshot --json` over the real recording, frame by frame where PIDs 512 and 541 run
/// (19-55): each process has the SM of its own newest recorded sample, with that sample's age
/// measured to the snapshot's time; PID 541 has a value in every frame from its first sample
/// (20) on, though its sample stood still for seconds while PID 512 ran.
#[test]
fn each_process_shows_its_own_newest_sample_and_its_age_over_the_real_recording() {
    let path = fixture("h100-real");
    let fx: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let mut oldest_shown = 0;
    for frame in 19..=55 {
        let f = frame.to_string();
        let v = frame_json(&path, &f);
        let now_ms = v["time_unix_ms"].as_u64().unwrap();
        let newest = recorded_newest(&fx, frame);
        let procs = v["devices"][0]["processes"].as_array().unwrap();
        let pids: Vec<u64> = procs.iter().map(|p| p["pid"].as_u64().unwrap()).collect();
        assert!(pids.contains(&541), "frame {frame}: {pids:?}");
        for p in procs {
            let pid = p["pid"].as_u64().unwrap();
            match newest.get(&pid) {
                Some(&(t_us, sm)) => {
                    let age = now_ms.saturating_sub(t_us / 1000);
                    assert_eq!(p["sm_utilization_percent"], sm, "frame {frame}: {p}");
                    assert_eq!(p["utilization_sample_age_ms"], age, "frame {frame}: {p}");
                    oldest_shown = oldest_shown.max(age);
                }
                None => {
                    // Only PID 541 in frame 19, before the driver had sampled it.
                    assert_eq!((frame, pid), (19, 541), "{p}");
                    assert!(p["sm_utilization_percent"].is_null(), "{p}");
                    assert!(p["utilization_sample_age_ms"].is_null(), "{p}");
                }
            }
        }
    }
    // PID 541's sample stood still: its age reached seconds, and it still had a value.
    assert!(oldest_shown > 5000, "{oldest_shown}");
}

/// `--only` keeps the devices named in every form of the snapshot, not only `--compact`.
#[test]
fn only_applies_to_every_form() {
    // The table: `--only 0` alone is enough (no --compact needed) and shows GPU 0 only.
    let out = gpuscope(&["snapshot", "--demo", "--only", "0"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.lines().next().unwrap().ends_with(" 1 GPU"), "{text}");
    let rows: Vec<&str> = text.lines().skip(2).take_while(|l| !l.is_empty()).collect();
    assert_eq!(rows.len(), 1, "{text}");
    assert!(rows[0].starts_with("0 "), "{text}");
    assert!(
        text.lines()
            .filter(|l| l.contains(" C "))
            .all(|l| l.starts_with("0 ")),
        "only GPU 0's processes: {text}"
    );

    // JSON, both separators.
    let v = json(&["snapshot", "--demo", "--json", "--only", "2,5"]);
    let ids = cli::device_ids(&v);
    assert_eq!(ids, ["2", "5"]);

    // --query.
    let out = gpuscope(&[
        "snapshot",
        "--demo",
        "--query",
        "index",
        "--format",
        "csv,noheader",
        "--only",
        "3",
        "5",
    ]);
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "3\n5\n");

    // A GPU brings its MIG devices; a MIG device comes alone.
    let mig = fixture("h100-mig");
    let ids = |only: &str| -> Vec<String> {
        let v = json(&[
            "snapshot",
            "--fixture",
            &mig,
            "--frame",
            "5",
            "--json",
            "--only",
            only,
        ]);
        cli::device_ids(&v).into_iter().map(String::from).collect()
    };
    let with_migs = ids("0");
    assert!(with_migs.len() > 1, "{with_migs:?}");
    assert!(with_migs.iter().all(|id| id == "0" || id.starts_with("0:")));
    assert_eq!(ids("0:1"), ["0:1"]);
}

#[test]
fn only_that_names_no_device_is_a_usage_error_in_every_form() {
    for form in [
        &[][..],
        &["--json"][..],
        &["--query", "index"][..],
        &["--compact"][..],
    ] {
        for bad in ["99", "x"] {
            let out = gpuscope(&[&["snapshot", "--demo", "--only", bad][..], form].concat());
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{form:?} {bad}: {err}");
            assert!(out.stdout.is_empty(), "{form:?} {bad}");
            assert!(
                err.contains(&format!(
                    "--only {bad}: no such device; there are 0, 1, 2, 3, 4, 5, 6, 7"
                )),
                "{form:?} {bad}: {err}"
            );
        }
    }
    // It names this machine's devices: not with a fleet.
    let out = gpuscope(&[
        "snapshot",
        "--prometheus",
        "http://127.0.0.1:9",
        "--only",
        "0",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--filter gpu:ID"));
}

/// Every command's `--help` says where its exit codes are written down.
#[test]
fn every_help_points_at_the_exit_codes() {
    for command in [
        "snapshot", "info", "top", "select", "record", "export", "smi",
    ] {
        let out = gpuscope(&[command, "--help"]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{command}");
        assert!(
            text.contains("3 partial") && text.contains("docs/exit-codes.md"),
            "{command}: {text}"
        );
    }
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/exit-codes.md"
    ))
    .unwrap();
    assert!(doc.contains("| 3 | partial"));
}
