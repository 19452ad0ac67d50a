//! Terminal escape injection: outside text (device names and UUIDs, process names, command
//! lines and users, fixture error text) reaches the terminal with its control characters
//! escaped, in every text for people: `snapshot`, `info`, `select --explain`, `record`'s
//! summary, and error messages.

use std::path::PathBuf;
use std::process::Output;

use serde_json::Value;

mod cli;

/// Retitles the terminal window, then clears the screen.
const HOSTILE: &str = "\u{1b}]0;TITLE\u{7}\u{1b}[2J";

/// A fresh folder for one test's files.
fn out_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gpuscope-escape-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
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
    let fixture = hostile_fixture(&dir);
    let fixture = fixture.to_str().expect("UTF-8 path");
    let plot = dir.join("memory.svg");
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
    std::fs::remove_dir_all(&dir).ok();
}

/// JSON output is left to serde, which escapes control characters as JSON requires: the name
/// comes back whole when parsed.
#[test]
fn hostile_names_in_json_round_trip() {
    let dir = out_dir("json");
    let fixture = hostile_fixture(&dir);
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
    std::fs::remove_dir_all(&dir).ok();
}

/// An error message that echoes a fixture's text (here serde's "unknown variant" naming the
/// hostile error code) is escaped too.
#[test]
fn hostile_fixture_error_text_is_escaped_in_the_error_message() {
    let dir = out_dir("error");
    let mut f = scenario();
    f["frames"][0]["devices"]["0"]["temperature"] = serde_json::json!({ "err": HOSTILE });
    let path = dir.join("bad.json");
    std::fs::write(&path, serde_json::to_string(&f).expect("JSON")).expect("write fixture");
    let out = run(&["snapshot", "--fixture", path.to_str().expect("UTF-8")]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_inert("a fixture error", &out);
    std::fs::remove_dir_all(&dir).ok();
}
