//! The gpuscope binary as the CLI tests run it: with none of the caller's own settings, so a
//! developer's `GPUSCOPE_FIXTURE`, `GPUSCOPE_TOP_ASCII` or `CUDA_VISIBLE_DEVICES` cannot change
//! what a test sees. A test that wants one sets it on the command.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

/// The environment variables that change what gpuscope does and are not `GPUSCOPE_*`.
const OTHER_SETTINGS: [&str; 5] = [
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "NO_COLOR",
    "RUST_LOG",
    "JOURNAL_STREAM",
];

/// A command that runs gpuscope with `args`, without the caller's settings ([`without_settings`]).
pub fn command(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gpuscope"));
    c.args(args);
    without_settings(&mut c);
    c
}

/// Leaves the caller's `GPUSCOPE_*` variables and [`OTHER_SETTINGS`] out of `c`'s environment
/// (and so out of gpuscope's, when `c` starts it, directly or through a terminal server).
pub fn without_settings(c: &mut Command) -> &mut Command {
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("GPUSCOPE_") {
            c.env_remove(name);
        }
    }
    for name in OTHER_SETTINGS {
        c.env_remove(name);
    }
    c
}

/// Runs gpuscope with `args` ([`command`]) and returns what it wrote and how it ended.
pub fn run(args: &[&str]) -> Output {
    command(args).output().expect("gpuscope runs")
}

/// Checks that `out` ended with exit 0; else fails naming `what`, the exit code and the stderr.
pub fn assert_ok(out: &Output, what: impl std::fmt::Debug) {
    assert!(
        out.status.success(),
        "{what:?} exited {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// [`assert_ok`], then the stdout, which must be UTF-8.
pub fn ok_stdout(out: Output, what: impl std::fmt::Debug) -> String {
    assert_ok(&out, what);
    String::from_utf8(out.stdout).expect("UTF-8 stdout")
}

/// Checks that `out` ended with exit `code` (docs/exit-codes.md), else fails with the exit code
/// and the stderr; then the stdout, which must be UTF-8.
pub fn exited(code: i32, out: &Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(code),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("UTF-8 stdout")
}

/// Runs `command` (gpuscope or any other program), checks that it exits 0 ([`assert_ok`]) and
/// returns what it wrote.
pub fn output_ok(command: &mut Command) -> Output {
    let out = command.output().expect("the command runs");
    assert_ok(&out, &command);
    out
}

/// Runs gpuscope with `args` ([`run`]), checks that it exits 0 and returns its stdout (UTF-8).
pub fn stdout(args: &[&str]) -> String {
    ok_stdout(run(args), args)
}

/// Checks that `out` is a usage error: exit 2 and a stderr that says `says`; else fails naming
/// `what` and the stderr.
pub fn assert_usage_error(out: &Output, what: impl std::fmt::Debug, says: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{what:?}: {stderr}");
    assert!(stderr.contains(says), "{what:?}: {stderr}");
}

/// Runs `command`, checks that it exits 0 (else fails with its stderr) and returns its stdout
/// parsed as JSON.
pub fn json(command: &mut Command) -> Value {
    serde_json::from_slice(&output_ok(command).stdout).expect("stdout is JSON")
}

/// The `id` of each device of a snapshot document (`--json`), in order.
pub fn device_ids(doc: &Value) -> Vec<&str> {
    let devices = doc["devices"].as_array().expect("a list of devices");
    devices.iter().map(|d| d["id"].as_str().unwrap()).collect()
}

/// The host facts of a process that an imported `nvidia-smi` dump does not know.
pub const HOST_FACTS: [&str; 5] = [
    "cpu_percent",
    "host_memory_bytes",
    "name",
    "user",
    "command",
];

/// Checks that each of `fields` of the JSON object `v` is `null`.
pub fn assert_null(v: &Value, fields: &[&str]) {
    for field in fields {
        assert!(v[field].is_null(), "{field} of {v}");
    }
}

/// The `key` of each item of the JSON list `list`, in order.
pub fn each<'a>(list: &'a Value, key: &str) -> Vec<&'a Value> {
    let items = list.as_array().unwrap_or_else(|| panic!("a list: {list}"));
    items.iter().map(|item| &item[key]).collect()
}

/// The path of the scenario fixture `fixtures/<stem>.json`, as an argument.
pub fn fixture(stem: &str) -> String {
    format!("{}/../../fixtures/{stem}.json", env!("CARGO_MANIFEST_DIR"))
}

/// fake-nvml installed as `libnvidia-ml.so.1` in a temporary directory of the caller's own:
/// the directory (removed when dropped; a test may put its own files in it) and the library.
pub fn install_fake_nvml() -> (tempfile::TempDir, PathBuf) {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_gpuscope"));
    let lib = fake_nvml::find_cdylib(&exe).expect("fake-nvml's cdylib, built as a dev-dependency");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let installed = fake_nvml::install(&lib, &dir.path().join("lib")).expect("install fake-nvml");
    (dir, installed.nvml)
}

/// An NVML function without its version, and under its newer name: a query that falls back
/// from `_v3` to `_v2`, or from the clock event reasons to the older throttle reasons, is
/// logged under the function the query table names.
pub fn unversioned(function: &str) -> String {
    // R535 renamed the clock "throttle" reasons' calls to "event" reasons: one function under
    // two names, the older what a driver before R535 serves.
    let function = function.replace("ClocksThrottleReasons", "ClocksEventReasons");
    match function.rsplit_once("_v") {
        Some((base, v)) if v.bytes().all(|b| b.is_ascii_digit()) => base.to_string(),
        _ => function,
    }
}

/// How many calls of each NVML function (its versions as one) fake-nvml served, from its call log
/// (`fake-nvml served FUNCTION device=D return=CODE`), and how many of them succeeded.
pub fn served_calls(text: &str) -> HashMap<String, (usize, usize)> {
    let mut calls: HashMap<String, (usize, usize)> = HashMap::new();
    for line in text.lines() {
        let rest = line
            .strip_prefix("fake-nvml served ")
            .unwrap_or_else(|| panic!("not a served call: {line}"));
        let function = unversioned(rest.split(' ').next().expect("a function"));
        let entry = calls.entry(function).or_default();
        entry.0 += 1;
        entry.1 += usize::from(rest.ends_with(" return=0"));
    }
    calls
}

/// Text with its `ESC [ ... m` sequences removed.
pub fn strip_sgr(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}
