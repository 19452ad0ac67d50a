//! `gpuscope smi --query-gpu` against nvidia-smi's own answer on a real H200: nvidia-smi was
//! asked every field of its `--help-query-gpu` at frame 24 of `fixtures/h200-real.json`
//! (fixtures/h200-real/README.md). Over that recording, for every field gpuscope answers, the
//! header (nvidia-smi's canonical name and unit) must be nvidia-smi's, and the value too unless
//! the field changes from one moment to the next or is a named difference below.

use std::collections::BTreeMap;
use std::process::Output;

use crate::support::cli;

fn repo(path: &str) -> String {
    format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR"))
}

fn smi(args: &[&str]) -> Output {
    let fixture = repo("fixtures/h200-real.json");
    cli::command(&["smi", "--fixture", &fixture, "--frame", "24"])
        .args(args)
        .output()
        .expect("gpuscope runs")
}

/// One CSV line of nvidia-smi's (cells separated by ", ", none holding a comma here).
fn cells(line: &str) -> Vec<String> {
    line.split(", ").map(str::to_string).collect()
}

/// The field name of a header cell: `memory.used [MiB]` is `memory.used`.
fn field(header: &str) -> &str {
    header.split(" [").next().unwrap_or(header)
}

/// Fields whose value moves between two moments half a second apart (nvidia-smi's answer and
/// the recorded frame), so only their header is compared.
const DYNAMIC: &[&str] = &[
    "timestamp",
    "temperature.gpu",
    "temperature.memory",
    "power.draw",
    "power.draw.average",
    "power.draw.instant",
    "utilization.gpu",
    "utilization.memory",
    "clocks.current.graphics",
    "clocks.current.sm",
    "clocks.current.memory",
    "clocks.current.video",
    "clocks_event_reasons.active",
    "clocks_event_reasons.sw_power_cap",
    "clocks_event_reasons.hw_slowdown",
    "clocks_event_reasons.sw_thermal_slowdown",
    "clocks_event_reasons.gpu_idle",
    "clocks_event_reasons_counters.sw_power_cap",
    "clocks_event_reasons_counters.sync_boost",
    "clocks_event_reasons_counters.sw_thermal_slowdown",
    "clocks_event_reasons_counters.hw_thermal_slowdown",
    "clocks_event_reasons_counters.hw_power_brake_slowdown",
    "pcie.link.gen.current",
    "pcie.link.gen.gpucurrent",
    "pcie.link.width.current",
    "memory.used",
    "memory.free",
    "pstate",
    "fan.speed",
];

/// Values that differ for a reason, each named (a difference listed here that stops being one
/// fails the test, so the list cannot go stale).
const DIFFERENT: &[(&str, &str)] = &[(
    "hostname",
    "nvidia-smi 580 answers [N/A] on this machine (the field is for vGPU hosts); gpuscope \
         prints the host's name, which is what the field is named for",
)];

#[test]
fn query_gpu_prints_what_nvidia_smi_printed_on_the_real_h200() {
    let theirs =
        std::fs::read_to_string(repo("fixtures/h200-real/nvidia-smi-query-gpu-all.load.csv"))
            .unwrap();
    let mut lines = theirs.lines();
    let header = cells(lines.next().unwrap());
    let values = cells(lines.next().unwrap());
    assert_eq!(header.len(), values.len());
    // The fields gpuscope answers: each asked alone, an unknown one is a usage error.
    let known: Vec<&str> = header
        .iter()
        .map(|h| field(h))
        .filter(|f| {
            let out = smi(&[&format!("--query-gpu={f}"), "--format=csv"]);
            match out.status.code() {
                Some(0) => true,
                Some(2) => false,
                other => panic!(
                    "{f}: exit {other:?}: {}",
                    String::from_utf8_lossy(&out.stderr)
                ),
            }
        })
        .collect();
    assert!(
        known.len() >= 60,
        "gpuscope smi answers only {} of nvidia-smi's {} fields",
        known.len(),
        header.len()
    );
    let out = smi(&[&format!("--query-gpu={}", known.join(",")), "--format=csv"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ours = String::from_utf8(out.stdout).unwrap();
    let mut our_lines = ours.lines();
    let our_header = cells(our_lines.next().unwrap());
    let our_values = cells(our_lines.next().unwrap());
    let theirs: BTreeMap<&str, (&String, &String)> = header
        .iter()
        .zip(&values)
        .map(|(h, v)| (field(h), (h, v)))
        .collect();
    let mut problems = Vec::new();
    let mut compared = 0;
    for ((h, v), f) in our_header.iter().zip(&our_values).zip(&known) {
        let (their_h, their_v) = theirs[f];
        if h != their_h {
            problems.push(format!("{f}: header {h:?}, nvidia-smi {their_h:?}"));
        }
        if DYNAMIC.contains(f) {
            continue;
        }
        compared += 1;
        let listed = DIFFERENT.iter().any(|(name, _)| name == f);
        if listed && v == their_v {
            problems.push(format!("{f}: listed as different, but equal ({v:?})"));
        } else if !listed && v != their_v {
            problems.push(format!("{f}: {v:?}, nvidia-smi {their_v:?}"));
        }
    }
    assert!(
        problems.is_empty(),
        "{} of {} fields ({compared} values compared):\n{}",
        problems.len(),
        known.len(),
        problems.join("\n")
    );
    assert!(compared >= 40, "{compared}");
}
