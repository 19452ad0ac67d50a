//! `cargo xtask cost-profile --from-jsonl FILE --out FILE`: turns measured NVML call costs
//! (one JSON object a line, as the real-hardware sessions wrote them through pynvml) into a
//! cost profile (`gpu_backend::cost::CostProfile`), the form `GPUSCOPE_FAKE_NVML_COSTS` reads.
//!
//! A line is `{"call": "DeviceGetMaxClockInfo(SM)", "us": 1349.6, "cpu_us": 1347.9, "err":
//! null}`: the call as pynvml names it, with what was asked in brackets, and its median wall
//! and thread-CPU microseconds. It becomes the exported NVML function (`nvmlDeviceGetMaxClockInfo`),
//! unsuffixed so that it covers the `_v2`/`_v3` forms clients call. The times are kept as
//! measured: they include pynvml's ctypes (about 2 us a call), and a call that answered an
//! error still cost what it cost. Special lines:
//!
//! * `nvmlInit (fresh process)` with `shutdown_us`/`shutdown_cpu_us`: `nvmlInit` (which covers
//!   `nvmlInit_v2`) and `nvmlInitWithFlags` (what pynvml calls) cost the init, `nvmlShutdown`
//!   the shutdown.
//! * a line with no `us` (the event rates, `events/s ...`) is not a call and is skipped.
//! * `Device{Current,Supported}ClocksEventReasons` also cost their older names
//!   (`...ClocksThrottleReasons`), which some clients call instead.
//!
//! Several lines of one function (`DeviceGetFieldValues(memtemp=82)` and `(nvlink tx/rx)`)
//! give it the dearest of them.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use gpu_backend::cost::{CallCost, CostProfile};

/// The most a measured cost may be, microseconds: fake-nvml's own bound.
const MAX_US: f64 = fake_nvml::MAX_COST_US;

/// Command-line arguments.
#[derive(clap::Args)]
pub struct Args {
    /// The measured costs, one JSON object a line (e.g.
    /// fixtures/h100-real/nvml-call-costs.load.jsonl).
    #[arg(long, value_name = "FILE")]
    from_jsonl: PathBuf,
    /// Where to write the profile (e.g. fixtures/costs/h100-load.json).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
}

/// Reads, converts, writes; says how many functions it wrote.
pub fn run(args: Args) -> Result<()> {
    let text = std::fs::read_to_string(&args.from_jsonl)
        .with_context(|| format!("cannot read {}", args.from_jsonl.display()))?;
    let profile =
        parse_jsonl(&text).with_context(|| format!("in {}", args.from_jsonl.display()))?;
    let mut json = serde_json::to_string_pretty(&profile)?;
    json.push('\n');
    if let Some(dir) = args.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    // Replaces a file at --out, never writes through a symbolic link there.
    gpu_backend::files::create(&args.out, gpu_backend::files::IfExists::Truncate)
        .map_err(std::io::Error::from)
        .and_then(|mut f| std::io::Write::write_all(&mut f, json.as_bytes()))
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    eprintln!(
        "wrote {} NVML functions' costs to {}",
        profile.len(),
        args.out.display()
    );
    Ok(())
}

/// The profile of a JSON-lines file of measured costs (see the module's documentation); an
/// error names the line.
pub fn parse_jsonl(text: &str) -> Result<CostProfile> {
    let mut profile = CostProfile::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value =
            serde_json::from_str(line).with_context(|| format!("line {n} is not JSON"))?;
        let call = v["call"]
            .as_str()
            .with_context(|| format!("line {n} has no \"call\" name"))?;
        if v.get("us").is_none() {
            // Not a call: the event rates.
            continue;
        }
        let cost = |wall: &str, cpu: &str| -> Result<CallCost> {
            Ok(CallCost {
                wall_us: micros(&v, wall).with_context(|| format!("line {n} ({call})"))?,
                cpu_us: micros(&v, cpu).with_context(|| format!("line {n} ({call})"))?,
            })
        };
        if call.starts_with("nvmlInit") {
            let init = cost("us", "cpu_us")?;
            add(&mut profile, "nvmlInit", init);
            add(&mut profile, "nvmlInitWithFlags", init);
            if v.get("shutdown_us").is_some() {
                add(
                    &mut profile,
                    "nvmlShutdown",
                    cost("shutdown_us", "shutdown_cpu_us")?,
                );
            }
            continue;
        }
        let function = exported_name(call).with_context(|| format!("line {n}"))?;
        let c = cost("us", "cpu_us")?;
        for alias in aliases(&function) {
            add(&mut profile, alias, c);
        }
        add(&mut profile, &function, c);
    }
    Ok(profile)
}

/// A field's microseconds, checked: a number from 0 to [`MAX_US`].
fn micros(v: &serde_json::Value, field: &str) -> Result<f64> {
    let us = v[field]
        .as_f64()
        .with_context(|| format!("\"{field}\" is not a number"))?;
    if !(us.is_finite() && (0.0..=MAX_US).contains(&us)) {
        bail!("\"{field}\" is {us}, not a number of microseconds from 0 to {MAX_US}");
    }
    Ok(us)
}

/// Keeps the dearer cost of a function seen twice.
fn add(profile: &mut CostProfile, function: &str, cost: CallCost) {
    let entry = profile.entry(function.to_string()).or_insert(cost);
    if cost.wall_us > entry.wall_us {
        *entry = cost;
    }
}

/// The exported NVML name of a call as pynvml's measurement names it:
/// `DeviceGetMaxClockInfo(SM)` -> `nvmlDeviceGetMaxClockInfo`.
fn exported_name(call: &str) -> Result<String> {
    let bare = call.split('(').next().unwrap_or_default().trim();
    let bare = bare.strip_prefix("nvml").unwrap_or(bare);
    if bare.is_empty()
        || !bare.starts_with(|c: char| c.is_ascii_uppercase())
        || !bare.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        bail!("{call:?} does not name an NVML function (e.g. \"DeviceGetPowerUsage\")");
    }
    Ok(format!("nvml{bare}"))
}

/// Older exported names of the same call.
fn aliases(function: &str) -> Vec<&'static str> {
    match function {
        "nvmlDeviceGetCurrentClocksEventReasons" => {
            vec!["nvmlDeviceGetCurrentClocksThrottleReasons"]
        }
        "nvmlDeviceGetSupportedClocksEventReasons" => {
            vec!["nvmlDeviceGetSupportedClocksThrottleReasons"]
        }
        _ => vec![],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SAMPLE: &str = r#"{"call": "nvmlInit (fresh process)", "us": 11709, "cpu_us": 11643, "shutdown_us": 9284, "shutdown_cpu_us": 4052}
{"call": "DeviceGetMaxClockInfo(SM)", "us": 1349.6, "cpu_us": 1347.9, "err": null}
{"call": "DeviceGetPcieThroughput(TX)", "us": 20836.8, "cpu_us": 750.7, "err": null}
{"call": "DeviceGetRetiredPagesPendingStatus", "us": 4.0, "cpu_us": 3.3, "err": 3}
{"call": "DeviceGetFieldValues(memtemp=82)", "us": 5.7, "cpu_us": 5.0, "err": null}
{"call": "DeviceGetFieldValues(nvlink tx/rx)", "us": 11.1, "cpu_us": 10.5, "err": null}
{"call": "DeviceGetCurrentClocksEventReasons", "us": 3.0, "cpu_us": 2.3, "err": null}
{"call": "GpmSampleGet", "us": 40.3, "cpu_us": 39.6, "err": null}

{"call": "events/s (all supported, mask 0xff9f)", "per_s": 46.3, "cpu_pct": 2.16}
"#;

    fn cost(p: &CostProfile, f: &str) -> (f64, f64) {
        let c = p.get(f).unwrap_or_else(|| panic!("{f} missing from {p:?}"));
        (c.wall_us, c.cpu_us)
    }

    #[test]
    fn measured_calls_become_exported_functions() {
        let p = parse_jsonl(SAMPLE).unwrap();
        assert_eq!(cost(&p, "nvmlInit"), (11709.0, 11643.0));
        assert_eq!(cost(&p, "nvmlInitWithFlags"), (11709.0, 11643.0));
        assert_eq!(cost(&p, "nvmlShutdown"), (9284.0, 4052.0));
        assert_eq!(cost(&p, "nvmlDeviceGetMaxClockInfo"), (1349.6, 1347.9));
        assert_eq!(cost(&p, "nvmlDeviceGetPcieThroughput"), (20836.8, 750.7));
        // An err'd call costs what it cost.
        assert_eq!(
            cost(&p, "nvmlDeviceGetRetiredPagesPendingStatus"),
            (4.0, 3.3)
        );
        // The dearer of two measurements of one function.
        assert_eq!(cost(&p, "nvmlDeviceGetFieldValues"), (11.1, 10.5));
        assert_eq!(
            cost(&p, "nvmlDeviceGetCurrentClocksEventReasons"),
            (3.0, 2.3)
        );
        assert_eq!(
            cost(&p, "nvmlDeviceGetCurrentClocksThrottleReasons"),
            (3.0, 2.3)
        );
        assert_eq!(cost(&p, "nvmlGpmSampleGet"), (40.3, 39.6));
        assert_eq!(p.len(), 10, "{p:?}");
    }

    #[test]
    fn bad_lines_are_named() {
        for (text, why) in [
            (
                "{\"call\": \"DeviceGetName\", \"us\": -1, \"cpu_us\": 1}",
                "\"us\" is -1",
            ),
            (
                "{\"call\": \"DeviceGetName\", \"us\": 1}",
                "\"cpu_us\" is not a number",
            ),
            ("{\"us\": 1, \"cpu_us\": 1}", "no \"call\""),
            ("not json", "is not JSON"),
            (
                "{\"call\": \"rm -rf\", \"us\": 1, \"cpu_us\": 1}",
                "does not name",
            ),
            (
                "{\"call\": \"DeviceGetName\", \"us\": 2e7, \"cpu_us\": 1}",
                "\"us\" is 20000000",
            ),
        ] {
            let e = format!("{:#}", parse_jsonl(&format!("\n{text}")).unwrap_err());
            assert!(e.contains(why), "{text}: {e}");
            assert!(e.contains("line 2"), "{text}: {e}");
        }
    }

    proptest! {
        #[test]
        fn any_text_gives_a_bounded_profile_or_an_error(text in "\\PC{0,200}") {
            if let Ok(p) = parse_jsonl(&text) {
                for c in p.values() {
                    prop_assert!((0.0..=MAX_US).contains(&c.wall_us));
                    prop_assert!((0.0..=MAX_US).contains(&c.cpu_us));
                }
            }
        }

        #[test]
        fn any_measured_line_round_trips(
            name in "[A-Z][A-Za-z]{0,30}",
            arg in "[A-Za-z0-9 =,/]{0,12}",
            wall in 0.0..MAX_US,
            cpu in 0.0..MAX_US,
        ) {
            let line = serde_json::json!({"call": format!("{name}({arg})"), "us": wall, "cpu_us": cpu});
            let p = parse_jsonl(&line.to_string()).unwrap();
            let c = p.get(&format!("nvml{name}")).copied();
            prop_assert_eq!(c, Some(CallCost { wall_us: wall, cpu_us: cpu }));
        }
    }
}
