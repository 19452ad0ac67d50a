//! One grammar and one vocabulary (issue 25), through the binary: each letter means one option
//! in gpuscope's own commands, a peer's letter typed where it means nothing is refused naming
//! the option meant, the front doors (`stat`, `nvisel`, `nvitop`, links made by
//! `install-links`) speak their tools' spellings, and a metric answers to each of its names.

use std::path::Path;

use serde_json::Value;

use crate::support::cli;

use cli::{each, run, stdout as ok};

fn usage_error(args: &[&str]) -> String {
    let out = run(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "gpuscope {args:?}: {err}");
    err
}

/// `record` over the demo from `frame`, every 20 ms for `duration`, of the GPUs `only`, its
/// plot written to `svg`, with `extra` arguments: its stdout.
fn record_demo(frame: &str, duration: &str, only: &str, svg: &Path, extra: &[&str]) -> String {
    let svg = svg.to_str().unwrap();
    let mut args = vec!["record", "--demo", "--frame", frame, "-i", "20ms"];
    args.extend(["--duration", duration, "-o", only, "--output", svg]);
    args.extend_from_slice(extra);
    ok(&args)
}

fn json(args: &[&str]) -> Value {
    serde_json::from_str(&ok(args)).expect("JSON")
}

const MIB: u64 = 1024 * 1024;

#[test]
fn a_peer_letter_where_it_means_nothing_is_refused_naming_the_option() {
    // record's plot is --output; -o is --only, and a file name there says so.
    let cases: [(&[&str], &[&str]); 4] = [
        (&["select", "--demo", "-c", "2"], &["--min-count", "nvisel"]),
        (&["select", "--demo", "-i", "0,1"], &["--inherit"]),
        (
            &["snapshot", "--demo", "--compact", "-cp"],
            &["--show-cmd", "gpuscope stat"],
        ),
        (
            &["record", "--demo", "-o", "memory.png"],
            &["--output FILE"],
        ),
    ];
    for (args, says) in cases {
        let err = usage_error(args);
        for s in says {
            assert!(err.contains(s), "{args:?}: {err}");
        }
    }
}

#[test]
fn nvisel_letters_through_its_front_door_choose_what_select_chooses() {
    let base = ["--demo", "--frame", "5"];
    let own = ok(&[
        &["select"][..],
        &base,
        &["--min-count", "2", "--max-count", "3"],
    ]
    .concat());
    let door = ok(&[&["nvisel"][..], &base, &["-c", "2", "-C3"]].concat());
    assert_eq!(own, door);
    assert_eq!(own.trim().split(',').count(), 3, "{own}");
    // -G is nvisel's --max-gpu-utilization: 0 % leaves only idle GPUs.
    let own = ok(&[&["select"][..], &base, &["--max-gpu-utilization", "30"]].concat());
    let door = ok(&[&["nvisel"][..], &base, &["-G", "30"]].concat());
    assert_eq!(own, door);
}

#[test]
fn the_interval_and_only_letters_are_the_same_in_every_command() {
    // -o: only these devices, in snapshot, stat, top and record alike.
    let doc = json(&["snapshot", "--demo", "--frame", "3", "--json", "-o", "2"]);
    let ids = cli::device_ids(&doc);
    assert_eq!(ids, ["2"]);
    let stat = json(&["stat", "--demo", "--frame", "3", "--json", "-o", "2"]);
    assert_eq!(stat["gpus"].as_array().unwrap().len(), 1);
    let top = ok(&["top", "--demo", "--frame", "3", "--once", "-o", "2"]);
    assert!(top.lines().any(|l| l.starts_with("2 ")), "{top}");
    assert!(!top.lines().any(|l| l.starts_with("0 ")), "{top}");
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("m.svg");
    let out = record_demo("3", "60ms", "2", &svg, &[]);
    let summaries: Vec<&str> = out.lines().filter(|l| l.contains(" -> ")).collect();
    assert_eq!(summaries.len(), 1, "{out}");
    assert!(summaries[0].contains("[2]"), "{out}");
    // -i takes a duration in every command that refreshes, with one bound.
    for command in ["snapshot", "stat", "top", "export"] {
        let err = usage_error(&[command, "--demo", "-i", "10ms"]);
        assert!(err.contains("50ms"), "{command}: {err}");
    }
}

#[test]
fn nvitop_spellings_work_in_top() {
    let env_only = |visible: &str| {
        let out = cli::command(&["top", "--demo", "--frame", "3", "-1", "-ov"])
            .env("CUDA_VISIBLE_DEVICES", visible)
            .output()
            .unwrap();
        cli::assert_ok(&out, "gpuscope");
        String::from_utf8(out.stdout).unwrap()
    };
    let screen = env_only("5");
    assert!(screen.lines().any(|l| l.starts_with("5 ")), "{screen}");
    assert!(!screen.lines().any(|l| l.starts_with("4 ")), "{screen}");
    // -m MODE is the layout; with --once it is a usage error (a monitor is not a one-shot).
    usage_error(&["top", "--demo", "-m", "full", "--once"]);
    usage_error(&["top", "--demo", "-m", "sideways"]);
    // -C: compute-only processes (C, not C+G); the demo's processes are all compute.
    let all = ok(&["top", "--demo", "--frame", "3", "-1"]);
    let compute = ok(&["top", "--demo", "--frame", "3", "-1", "-C"]);
    let graphics = ok(&["top", "--demo", "--frame", "3", "-1", "-G"]);
    let pids = |s: &str| s.lines().filter(|l| l.contains(" C ")).count();
    assert!(pids(&all) > 0);
    assert_eq!(pids(&compute), pids(&all));
    assert_eq!(pids(&graphics), 0, "{graphics}");
}

#[test]
fn stat_json_is_gpustat_document_of_the_same_gpus() {
    let base = ["--demo", "--frame", "7"];
    let snap = json(&[&["snapshot", "--json"][..], &base].concat());
    let stat = json(&[&["stat", "--json"][..], &base].concat());
    for key in ["hostname", "driver_version", "query_time", "gpus"] {
        assert!(stat.get(key).is_some(), "{key}: {stat}");
    }
    let gpus = stat["gpus"].as_array().unwrap();
    let physical: Vec<&Value> = snap["devices"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["mig_index"].is_null())
        .collect();
    assert_eq!(gpus.len(), physical.len());
    for (g, d) in gpus.iter().zip(physical) {
        assert_eq!(g["uuid"], d["uuid"]);
        assert_eq!(
            g["memory.used"].as_u64(),
            d["memory_used_bytes"].as_u64().map(|b| b / MIB)
        );
        assert_eq!(
            g["power.draw"].as_u64(),
            d["power_usage_watts"].as_f64().map(|w| w.floor() as u64)
        );
        assert_eq!(g["utilization.gpu"], d["gpu_utilization_percent"]);
        assert_eq!(each(&g["processes"], "pid"), each(&d["processes"], "pid"));
    }
    // --no-processes: an empty list, as gpustat's.
    let bare = json(&[&["stat", "--json", "--no-processes"][..], &base].concat());
    assert!(bare["gpus"][0]["processes"].as_array().unwrap().is_empty());
}

#[test]
fn stat_takes_gpustat_letters() {
    let base = [
        "stat",
        "--demo",
        "--frame",
        "7",
        "--no-header",
        "--color",
        "never",
    ];
    let plain = ok(&base);
    let cpu = ok(&[&base[..], &["-cpu"]].concat());
    // -p adds each PID; -c each command.
    assert!(cpu.contains("/2841("), "{cpu}");
    assert!(!plain.contains("/2841("), "{plain}");
    assert!(cpu.contains("tritonserver") && !plain.contains("tritonserver"));
    let no_procs = ok(&[&base[..], &["--no-processes"]].concat());
    assert!(
        no_procs.lines().all(|l| l.ends_with(" MB")) && no_procs.lines().count() == 8,
        "{no_procs}"
    );
    let power_draw = ok(&[&base[..], &["-P", "draw"]].concat());
    assert!(
        power_draw.contains(" W |") && !power_draw.contains("/ 700 W"),
        "{power_draw}"
    );
    let all = ok(&[&base[..], &["-a"]].concat());
    assert!(
        all.contains("E:") && all.contains("D:") && all.contains("/ 700 W"),
        "{all}"
    );
    // gpustat shortens a name from the left.
    let narrow = ok(&[&base[..], &["--gpuname-width", "6"]].concat());
    assert!(
        narrow.lines().next().unwrap().contains("… HBM3 |"),
        "{narrow}"
    );
    // gpustat's bare --color forces colour.
    let coloured = ok(&["stat", "--demo", "--frame", "7", "--color"]);
    assert!(coloured.contains('\x1b'), "{coloured}");
    let err = usage_error(&["stat", "--demo", "-e", "video"]);
    assert!(err.contains("video"), "{err}");
}

#[test]
fn install_links_makes_each_front_door_a_link_that_works() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    let out = ok(&["install-links", bin.to_str().unwrap()]);
    for tool in ["nvidia-smi", "gpustat", "nvitop", "nvisel", "gpulink"] {
        let link = bin.join(tool);
        let target = std::fs::read_link(&link).unwrap_or_else(|e| panic!("{tool}: {e}"));
        assert_eq!(target, Path::new(env!("CARGO_BIN_EXE_gpuscope")), "{tool}");
        assert!(out.contains(&link.display().to_string()), "{out}");
    }
    // Run as nvisel and as gpustat.
    let mut nvisel = std::process::Command::new(bin.join("nvisel"));
    cli::without_settings(&mut nvisel);
    let chose = nvisel
        .args(["--demo", "--frame", "5", "-c", "1", "-C", "1"])
        .output()
        .unwrap();
    cli::assert_ok(&chose, "nvisel");
    assert_eq!(String::from_utf8(chose.stdout).unwrap().trim().len(), 1);
    let mut gpustat = std::process::Command::new(bin.join("gpustat"));
    cli::without_settings(&mut gpustat);
    let doc = gpustat.args(["--demo", "--json"]).output().unwrap();
    let doc: Value = serde_json::from_slice(&doc.stdout).expect("gpustat's JSON");
    assert_eq!(doc["gpus"].as_array().unwrap().len(), 8);
    // Again: nothing to do. A file of another program is kept unless --force.
    let again = ok(&["install-links", bin.to_str().unwrap()]);
    assert!(again.contains("already"), "{again}");
    std::fs::remove_file(bin.join("nvitop")).unwrap();
    std::fs::write(bin.join("nvitop"), "#!/bin/sh\n").unwrap();
    let err = usage_error(&["install-links", bin.to_str().unwrap()]);
    assert!(err.contains("--force"), "{err}");
    assert_eq!(
        std::fs::read_to_string(bin.join("nvitop")).unwrap(),
        "#!/bin/sh\n"
    );
    ok(&["install-links", bin.to_str().unwrap(), "nvitop", "--force"]);
    assert!(std::fs::read_link(bin.join("nvitop")).is_ok());
    let err = usage_error(&["install-links", bin.to_str().unwrap(), "htop"]);
    assert!(err.contains("htop") && err.contains("nvidia-smi"), "{err}");
}

#[test]
fn a_metric_answers_to_each_of_its_names() {
    use gpu_devices::vocabulary::METRICS;
    // The snapshot JSON has every key the vocabulary gives.
    let doc = json(&["snapshot", "--demo", "--frame", "2", "--json"]);
    let device = &doc["devices"][0];
    for m in METRICS {
        if let Some(key) = m.json {
            assert!(
                device.get(key).is_some(),
                "{}: no {key} in {device}",
                m.name
            );
        }
    }
    // record takes every name of the metrics it samples, and they are the same recording.
    let dir = tempfile::tempdir().unwrap();
    let summary = |metric: &str| {
        let svg = dir.path().join("r.svg");
        let out = record_demo("2", "40ms", "0", &svg, &["--overwrite", "--metric", metric]);
        out.lines()
            .find(|l| l.contains(" -> "))
            .unwrap_or_else(|| panic!("{metric}: {out}"))
            .to_string()
    };
    for (canonical, other) in [
        ("memory.used", "memory_used"),
        ("utilization.memory", "mem-bw"),
        ("temperature.gpu", "TEMPERATURE"),
        ("power.draw", "power_usage"),
    ] {
        assert_eq!(summary(canonical), summary(other), "{canonical} / {other}");
    }
    assert!(summary("utilization.memory").contains("memory bandwidth utilization"));
    let err = usage_error(&["record", "--demo", "--metric", "clocks.sm"]);
    assert!(
        err.contains("clocks.current.sm is a metric, but not one a recording"),
        "{err}"
    );
}

#[test]
fn the_built_in_h200_recording_is_a_demo() {
    let doc = json(&["snapshot", "--demo", "h200-real", "--frame", "24", "--json"]);
    assert_eq!(doc["devices"][0]["name"], "NVIDIA H200");
    assert_eq!(doc["devices"][0]["processes"][0]["pid"], 531);
}
