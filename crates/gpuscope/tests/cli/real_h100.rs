//! gpuscope over the real H100 recording (`fixtures/h100-real.json`, kept as recorded): what a
//! real GPU answered must read right in every output. `fixtures/h100-real/README.md` tells the
//! session; frame 50 is the moment of the session's other files.

use crate::support::export_support;

use export_support::cli;

use serde_json::Value;

/// The frame pynvml's answers and nvidia-smi's dumps of the session were taken at.
const FRAME: &str = "50";

fn real() -> String {
    cli::fixture("h100-real")
}

fn stdout_of(args: &[&str]) -> String {
    let out = cli::run(args);
    assert!(
        out.status.success(),
        "{args:?} exited {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("invalid argument"),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn json_of(args: &[&str]) -> Value {
    serde_json::from_str(&stdout_of(args)).expect("stdout is JSON")
}

/// Regression (issue 22): NVML answers the GPU and compute instance id queries of a GPU not in
/// MIG mode with INVALID_ARGUMENT (recorded so), and `snapshot` printed `error: invalid argument
/// (gpu_instance_id, compute_instance_id)` under the GPU, its JSON two entries in `errors`. They
/// are N/A: `null`, and no error.
#[test]
fn instance_ids_of_a_gpu_not_in_mig_mode_are_na_not_errors_in_snapshot() {
    let fx = real();
    let text = stdout_of(&["snapshot", "--fixture", &fx, "--frame", FRAME]);
    assert!(!text.contains("error"), "{text}");
    assert!(text.contains("NVIDIA H100 80GB HBM3"), "{text}");
    let compact = stdout_of(&["snapshot", "--fixture", &fx, "--frame", FRAME, "--compact"]);
    assert!(!compact.contains("invalid"), "{compact}");
    for frame in ["0", "30", FRAME, "59"] {
        let v = json_of(&["snapshot", "--fixture", &fx, "--frame", frame, "--json"]);
        let d = &v["devices"][0];
        assert_eq!(d["errors"], serde_json::json!([]), "frame {frame}: {d}");
        assert!(d["gpu_instance_id"].is_null() && d["compute_instance_id"].is_null());
        assert_eq!(d["mig_mode"], false);
    }
}

/// Regression (issue 22): `info` printed an ERRORS section with `invalid argument
/// (gpu_instance_id, compute_instance_id)` for a GPU not in MIG mode.
#[test]
fn instance_ids_of_a_gpu_not_in_mig_mode_are_na_not_errors_in_info() {
    let fx = real();
    let text = stdout_of(&["info", "--fixture", &fx, "--frame", FRAME, "0"]);
    assert!(!text.contains("ERRORS"), "{text}");
    assert!(!text.contains("invalid argument"), "{text}");
    let v = json_of(&["info", "--fixture", &fx, "--frame", FRAME, "--json", "0"]);
    assert_eq!(v["devices"][0]["errors"], serde_json::json!([]));
}

/// Regression (issue 22): the exporter counted the two instance id answers of a GPU not in MIG
/// mode as failed fields (`gpuscope_device_failed_fields 2` on the real H100).
#[test]
fn instance_ids_of_a_gpu_not_in_mig_mode_are_na_not_errors_in_the_exporter() {
    let fx = real();
    let exp = export_support::Exporter::start(&["--fixture", &fx, "--frame", FRAME]);
    let m = exp.scrape();
    let gpu = [("index", "0")];
    assert_eq!(m.value("gpuscope_device_failed_fields", &gpu), Some(0.0));
    assert_eq!(m.value("gpuscope_device_up", &gpu), Some(1.0));
    let labels = &m.find("gpuscope_device_up", &gpu)[0].labels;
    assert!(!labels.contains_key("gpu_instance_id"), "{labels:?}");
}

/// `select` never acted on these answers (it sets a device aside only when it is lost or its
/// memory cannot be read): it chooses the real H100 and its explanation says nothing of them.
#[test]
fn select_chooses_the_real_h100_and_says_nothing_of_its_instance_ids() {
    let fx = real();
    let out = cli::run(&["select", "--fixture", &fx, "--frame", FRAME, "--explain"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "0");
    let why = String::from_utf8_lossy(&out.stderr);
    assert!(why.contains("selected"), "{why}");
    assert!(!why.contains("invalid") && !why.contains("error"), "{why}");
}

/// The real recording is built in: `--demo h100-real` (or `--demo=h100-real`) replays it as
/// `--fixture fixtures/h100-real.json` does; `--demo` alone is still the 8-GPU demo.
#[test]
fn demo_h100_real_replays_the_real_recording() {
    let fx = real();
    let from_file = json_of(&["snapshot", "--fixture", &fx, "--frame", FRAME, "--json"]);
    for args in [
        &[
            "snapshot",
            "--demo",
            "h100-real",
            "--frame",
            FRAME,
            "--json",
        ][..],
        &["snapshot", "--demo=h100-real", "--frame", FRAME, "--json"],
    ] {
        let built_in = json_of(args);
        assert_eq!(built_in["source"], "demo h100-real", "{args:?}");
        assert_eq!(built_in["devices"], from_file["devices"], "{args:?}");
        assert_eq!(built_in["time"], from_file["time"], "{args:?}");
    }
    let demo = json_of(&["snapshot", "--demo", "--frame", "0", "--json"]);
    assert_eq!(demo["devices"].as_array().map(Vec::len), Some(8));
    let named = json_of(&[
        "snapshot",
        "--demo",
        "h100-sxm-8gpu",
        "--frame",
        "0",
        "--json",
    ]);
    assert_eq!(named["devices"], demo["devices"]);
}

/// A demo name that does not exist is a usage error (exit code 2) that lists the names.
#[test]
fn an_unknown_demo_is_a_usage_error_listing_the_names() {
    for args in [
        &["snapshot", "--demo", "h100-fake"][..],
        &["info", "--demo=h100-fake"],
    ] {
        let out = cli::run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("h100-fake"), "{err}");
        for name in ["auto", "h100-sxm-8gpu", "h100-real"] {
            assert!(err.contains(name), "{args:?}: {err}");
        }
    }
}
