//! Terminal escape injection: outside text (device names and UUIDs, process names, command
//! lines and users, fixture error text; host names, labels and error text from a fleet's
//! peers) reaches the terminal with its control characters, bidirectional controls and line
//! breaks escaped, in every text for people: `snapshot`, `info`, `select --explain`, `record`'s
//! summary, the fleet's table and viewer, warnings and error messages; and JSON carries no raw
//! C1 or bidirectional control (issue 32, item 8).

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Output;

use serde_json::{json, Value};

use crate::support::{cli, fleet_support};

/// Retitles the terminal window, then clears the screen.
const HOSTILE: &str = "\u{1b}]0;TITLE\u{7}\u{1b}[2J";

/// A fresh folder for one test's files, removed when dropped.
fn out_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("gpuscope-escape-{name}-"))
        .tempdir()
        .expect("temp dir")
}

fn scenario() -> Value {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/geforce-desktop.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("JSON")
}

/// The desktop scenario with GPU 0's name and UUID, and the name, command line and user of the
/// compute process on it (PID 8991), holding [`HOSTILE`].
fn hostile_fixture(dir: &std::path::Path) -> PathBuf {
    let mut f = scenario();
    f["devices"]["0"]["name"] = serde_json::json!({ "ok": format!("GeForce{HOSTILE}") });
    f["devices"]["0"]["uuid"] = serde_json::json!({ "ok": format!("GPU-{HOSTILE}") });
    let p = &mut f["host"]["processes"]["8991"];
    p["name"] = Value::from(format!("miner{HOSTILE}"));
    p["cmdline"] = serde_json::json!([format!("miner{HOSTILE}"), "-a"]);
    p["user"] = Value::from(format!("alex{HOSTILE}"));
    let path = dir.join("hostile.json");
    std::fs::write(&path, serde_json::to_string(&f).expect("JSON")).expect("write fixture");
    path
}

fn run(args: &[&str]) -> Output {
    cli::command(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("gpuscope runs")
}

/// No ESC or BEL byte in either stream.
fn assert_inert(what: &str, out: &Output) {
    for (stream, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        assert!(
            !bytes.contains(&0x1b) && !bytes.contains(&0x07),
            "{what}: a raw control byte on {stream}: {:?}",
            String::from_utf8_lossy(bytes)
        );
    }
}

/// `gpuscope snapshot` and `gpuscope info 0` wrote a process's and a device's name raw: the
/// terminal's title changed and the screen was cleared.
#[test]
fn hostile_names_reach_snapshot_info_select_and_record_escaped() {
    let dir = out_dir("names");
    let fixture = hostile_fixture(dir.path());
    let fixture = fixture.to_str().expect("UTF-8 path");
    let plot = dir.path().join("memory.svg");
    let plot = plot.to_str().expect("UTF-8 path");
    // Each view over the hostile fixture's frame 0: what, its command, then its other options.
    let cases: [(&str, &[&str], &[&str]); 6] = [
        ("snapshot", &["snapshot"], &[]),
        (
            "snapshot --compact",
            &["snapshot"],
            &["--compact", "--show-cmd"],
        ),
        (
            "snapshot --query",
            &["snapshot"],
            &["--query", "index,name"],
        ),
        ("info 0", &["info", "0"], &[]),
        (
            "select --explain",
            &["select"],
            &["--explain", "-O", "uuid"],
        ),
        (
            "record",
            &["record"],
            &["--interval", "10ms", "--duration", "30ms", "--output", plot],
        ),
    ];
    for (what, command, options) in cases {
        let args = [command, &["--fixture", fixture, "--frame", "0"], options].concat();
        let out = run(&args);
        cli::assert_ok(&out, what);
        assert_inert(what, &out);
        let shown = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(
            shown.contains("\\x1b]0;TITLE\\x07\\x1b[2J"),
            "{what}: the escaped form is missing: {shown}"
        );
    }
    // What each view shows of the hostile text, escaped.
    let snapshot =
        String::from_utf8(run(&["snapshot", "--fixture", fixture, "--frame", "0"]).stdout)
            .expect("UTF-8");
    assert!(snapshot.contains("GeForce\\x1b]0;TITLE"), "{snapshot}");
    assert!(snapshot.contains("miner\\x1b]0;TITLE"), "{snapshot}");
    let info = String::from_utf8(run(&["info", "0", "--fixture", fixture, "--frame", "0"]).stdout)
        .expect("UTF-8");
    for shown in [
        "BOARD NAME   : GeForce\\x1b]0;TITLE",
        "UUID         : GPU-\\x1b]0;TITLE",
        "miner\\x1b]0;TITLE",
    ] {
        assert!(info.contains(shown), "{shown}: {info}");
    }
}

/// JSON output is left to serde, which escapes control characters as JSON requires: the name
/// comes back whole when parsed.
#[test]
fn hostile_names_in_json_round_trip() {
    let dir = out_dir("json");
    let fixture = hostile_fixture(dir.path());
    let out = run(&[
        "snapshot",
        "--json",
        "--fixture",
        fixture.to_str().expect("UTF-8"),
        "--frame",
        "0",
    ]);
    assert_inert("snapshot --json", &out);
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["devices"][0]["name"], format!("GeForce{HOSTILE}"));
}

/// An error message that echoes a fixture's text (here serde's "unknown variant" naming the
/// hostile error code) is escaped too.
#[test]
fn hostile_fixture_error_text_is_escaped_in_the_error_message() {
    let dir = out_dir("error");
    let mut f = scenario();
    f["frames"][0]["devices"]["0"]["temperature"] = serde_json::json!({ "err": HOSTILE });
    let path = dir.path().join("bad.json");
    std::fs::write(&path, serde_json::to_string(&f).expect("JSON")).expect("write fixture");
    let out = run(&["snapshot", "--fixture", path.to_str().expect("UTF-8")]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_inert("a fixture error", &out);
}

/// The bidirectional controls (the Arabic letter mark, the left-to-right and right-to-left
/// marks, embeddings, overrides and isolates) and the line and paragraph separators, one by one.
const BIDI_AND_SEPARATORS: [char; 14] = [
    '\u{61c}', '\u{200e}', '\u{200f}', '\u{202a}', '\u{202b}', '\u{202c}', '\u{202d}', '\u{202e}',
    '\u{2028}', '\u{2029}', '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}',
];

/// Characters that must not reach a terminal raw from outside text: the controls (Unicode's
/// Cc: C0, DEL and C1) but the line feed (a line break of gpuscope's own), and
/// [`BIDI_AND_SEPARATORS`]. Spelt apart from gpu-backend's `text::is_control`, which it checks,
/// so that a character left out there is not left out here too.
fn raw_special(c: char) -> bool {
    (c.is_control() && c != '\n') || BIDI_AND_SEPARATORS.contains(&c)
}

/// No raw special character on either stream of `out`.
fn assert_no_raw_special(what: &str, out: &Output) {
    for (stream, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        let text = String::from_utf8_lossy(bytes);
        let raw: Vec<char> = text.chars().filter(|&c| raw_special(c)).collect();
        assert!(raw.is_empty(), "{what}: {raw:?} raw on {stream}: {text}");
    }
}

/// Reorders what follows it, C1's CSI (as `ESC [`), a line separator, a right-to-left mark.
const BIDI_C1: &str = "\u{202e}txt.exe\u{9b}2J\u{2028}x\u{200f}";

/// The desktop scenario with GPU 0's name and the user and command line of PID 8991 holding
/// [`BIDI_C1`], written into `dir`: its path, as an argument.
fn bidi_fixture(dir: &std::path::Path) -> String {
    let mut f = scenario();
    f["devices"]["0"]["name"] = json!({ "ok": format!("GeForce{BIDI_C1}") });
    let p = &mut f["host"]["processes"]["8991"];
    p["cmdline"] = json!([format!("miner{BIDI_C1}"), "-a"]);
    p["user"] = Value::from(format!("alex{BIDI_C1}"));
    let path = dir.join("bidi.json");
    std::fs::write(&path, serde_json::to_string(&f).expect("JSON")).expect("write fixture");
    path.to_str().expect("a UTF-8 path").to_string()
}

/// `command` over frame 0 of `fixture`, checked to exit 0 and to write no raw special
/// character on either stream.
fn inert_over(fixture: &str, what: &str, command: &[&str]) -> Output {
    let args = [command, &["--fixture", fixture, "--frame", "0"]].concat();
    let out = run(&args);
    cli::assert_ok(&out, what);
    assert_no_raw_special(what, &out);
    out
}

/// U+202E in a device's name reached the terminal raw (it reorders what follows), as did a line
/// separator; C1 was escaped already.
#[test]
fn bidi_controls_and_line_separators_in_a_fixture_are_escaped_in_every_view() {
    let dir = out_dir("bidi");
    let fixture = &bidi_fixture(dir.path());
    let cases: [(&str, &[&str]); 6] = [
        ("snapshot", &["snapshot"]),
        ("stat -cuf", &["stat", "-cuf"]),
        (
            "snapshot --compact",
            &["snapshot", "--compact", "--show-cmd"],
        ),
        ("info 0", &["info", "0"]),
        ("select --explain", &["select", "--explain", "-O", "uuid"]),
        ("top --once", &["top", "--once"]),
    ];
    for (what, command) in cases {
        inert_over(fixture, what, command);
    }
    let snapshot =
        String::from_utf8(run(&["snapshot", "--fixture", fixture, "--frame", "0"]).stdout)
            .expect("UTF-8");
    assert!(
        snapshot.contains("miner\\u{202e}txt.exe\\u{9b}2J\\u{2028}x\\u{200f} -a"),
        "{snapshot}"
    );
}

/// Every JSON document wrote C1 controls (U+009B, a terminal's CSI) and bidirectional controls
/// raw: serde_json escapes only C0.
#[test]
fn json_carries_no_raw_c1_or_bidi_control_and_reads_back_the_same() {
    let dir = out_dir("json-c1");
    let fixture = &bidi_fixture(dir.path());
    let cases: [(&str, &[&str]); 3] = [
        ("snapshot --json", &["snapshot", "--json"]),
        ("info --json", &["info", "--json"]),
        ("stat --json", &["stat", "--json"]),
    ];
    for (what, command) in cases {
        let out = inert_over(fixture, what, command);
        let text = String::from_utf8(out.stdout).expect("UTF-8");
        assert!(
            text.contains("\\u202e") && text.contains("\\u009b"),
            "{what}: {text}"
        );
        let v: Value = serde_json::from_str(&text).expect("JSON");
        let names = v.to_string();
        assert!(
            names.contains(&format!("GeForce{BIDI_C1}")),
            "{what}: the name reads back whole"
        );
    }
    // record's NDJSON file: its header names the devices.
    let ndjson = dir.path().join("memory.ndjson");
    let plot = dir.path().join("memory.svg");
    let out = run(&[
        "record",
        "--fixture",
        fixture,
        "--interval",
        "10ms",
        "--duration",
        "30ms",
        "--ndjson",
        ndjson.to_str().expect("UTF-8"),
        "--output",
        plot.to_str().expect("UTF-8"),
    ]);
    cli::assert_ok(&out, "record --ndjson");
    let text = std::fs::read_to_string(&ndjson).expect("NDJSON written");
    let header = text.lines().next().expect("a header line");
    assert!(!header.chars().any(raw_special), "{header}");
    let v: Value = serde_json::from_str(header).expect("JSON");
    assert_eq!(
        v["devices"][0]["name"],
        format!("GeForce{BIDI_C1}"),
        "{header}"
    );
}

/// A stub Prometheus whose one host, up, is named `hostname` and has GPU 0 named `gpu_name`
/// with a process of `user` running `command`; a second host, `down_host`, is down.
fn hostile_prometheus(
    hostname: &str,
    gpu_name: &str,
    user: &str,
    command: &str,
    down_host: &str,
) -> fleet_support::Stub {
    let mut r = HashMap::new();
    fleet_support::hosts(
        &mut r,
        1000.0,
        &[
            (hostname, "10.0.0.1:9445", "999.5", "1"),
            (down_host, "10.0.0.2:9445", "900", "0"),
        ],
        &[],
    );
    let labels = json!({
        "instance": "10.0.0.1:9445", "job": "gpu", "hostname": hostname, "index": "0",
        "uuid": "GPU-x", "name": gpu_name,
    });
    for (family, v) in [
        ("gpuscope_device_up", "1"),
        ("gpuscope_device_memory_total_bytes", "85899345920"),
        ("gpuscope_device_memory_used_bytes", "0"),
        ("gpuscope_device_memory_free_bytes", "85899345920"),
    ] {
        let series = fleet_support::vector(1000.0, &[(labels.clone(), v.to_string())]);
        r.insert(family.to_string(), fleet_support::Reply::Body(series));
    }
    let mut process = labels.clone();
    process["pid"] = json!("4242");
    process["username"] = json!(user);
    process["command"] = json!(command);
    r.insert(
        "gpuscope_process_gpu_memory_bytes".into(),
        fleet_support::Reply::Body(fleet_support::vector(1000.0, &[(process, "1024".into())])),
    );
    fleet_support::start(r, None)
}

/// A line feed in a host name split `select --explain`'s lines (the rest of the name read as a
/// line of its own, here a forged verdict) and the stderr of the exit-3 message.
#[test]
fn a_line_break_in_a_hostname_stays_on_its_line_in_select_explain_and_on_stderr() {
    let stub = hostile_prometheus(
        "evil\nnode-z:0 selected #1",
        "H100",
        "alice",
        "python",
        "gone\nFORGED",
    );
    let out = run(&["select", "--prometheus", &stub.url, "--explain", "-n", "1"]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{err}");
    for forged in ["node-z", "FORGED"] {
        assert!(
            !err.lines().any(|l| l.starts_with(forged)),
            "a line of its own: {err}"
        );
    }
    assert!(err.contains("evil\\x0anode-z:0 selected #1:0"), "{err}");
    assert!(err.contains("gone\\x0aFORGED: left out"), "{err}");
    assert_no_raw_special("select --explain", &out);

    let out = run(&["snapshot", "--prometheus", &stub.url]);
    assert_eq!(out.status.code(), Some(3), "one host is down");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        err.contains("gone\\x0aFORGED (down)") && err.lines().count() == 1,
        "{err}"
    );
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        !table
            .lines()
            .any(|l| l.starts_with("node-z") || l.starts_with("FORGED")),
        "{table}"
    );
    assert_no_raw_special("snapshot --prometheus", &out);
}

/// U+202E in a host name reached the terminal raw; U+009B (C1 CSI) in a label reached `--json`
/// raw.
#[test]
fn bidi_overrides_and_c1_controls_from_a_peer_never_reach_the_terminal_raw() {
    let stub = hostile_prometheus(
        "node\u{202e}exe.txt",
        "H100\u{9b}2J",
        "al\u{200f}ice",
        "python\u{2028}train.py\u{85}",
        "down\u{2066}host",
    );
    let views: [(&str, &[&str]); 4] = [
        ("snapshot", &["snapshot"]),
        ("select --explain", &["select", "--explain", "-O", "uuid"]),
        ("top --once", &["top", "--once"]),
        ("snapshot --json", &["snapshot", "--json"]),
    ];
    for (what, command) in views {
        let args = [command, &["--prometheus", stub.url.as_str()]].concat();
        let out = run(&args);
        assert!(matches!(out.status.code(), Some(0 | 3)), "{what}: {out:?}");
        assert_no_raw_special(what, &out);
        let shown = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(
            shown.contains("node\\u{202e}exe.txt") || shown.contains("node\\u202eexe.txt"),
            "{what}: {shown}"
        );
    }
    let out = run(&["snapshot", "--json", "--prometheus", &stub.url]);
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let host = doc["hosts"]
        .as_array()
        .expect("hosts")
        .iter()
        .find(|h| h["state"] == "up")
        .expect("the host that is up");
    assert_eq!(host["host"], "node\u{202e}exe.txt");
    assert_eq!(host["devices"][0]["name"], "H100\u{9b}2J");
    assert_eq!(
        host["devices"][0]["processes"][0]["command"],
        "python\u{2028}train.py\u{85}"
    );
}
