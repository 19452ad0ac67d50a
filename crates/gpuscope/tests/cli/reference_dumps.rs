//! Issue 13: for each real `nvidia-smi -q -x` dump of xtask/tests/data/reference-dumps, every
//! health value the XML carries (ECC mode and counts, totals and per memory location, retired
//! pages with their addresses, remapped rows, clock event reasons, temperature thresholds and
//! memory temperature, PCIe replays, reserved memory, versions) appears in `gpuscope info
//! --json` with the XML's value. The dumps are imported (`cargo xtask import-smi`) into
//! xtask/tests/data/imported/, which xtask's `imported_reference_dumps_are_up_to_date` keeps
//! current; the expected values are read here from the XML text with small string helpers that
//! share no code with the importer. A value the XML prints as a placeholder (`N/A`,
//! `[N/A]`, deprecated) must be `null`.

use std::path::PathBuf;

use serde_json::Value;
use test_support::smi_xml::{self, block, blocks, without};

use crate::support::cli;

const MIB: u64 = 1024 * 1024;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

// ---- Independent readers of the XML text (no XML parser), beside test_support::smi_xml's ----

/// The trimmed text of the first `<tag>value</tag>` in `s`, unless it is a placeholder.
/// (A block of elements, `<` in its text, is not a value either.)
fn value(s: &str, tag: &str) -> Option<String> {
    smi_xml::value(s, tag).filter(|v| !smi_xml::is_placeholder(v) && !v.contains('<'))
}

/// The number before the unit in `"33 C"`, `"869 MiB"`, `"0"`.
fn number(s: &str, tag: &str) -> Option<u64> {
    value(s, tag).map(|v| {
        v.split_whitespace()
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("<{tag}> is not a number: {v:?}"))
    })
}

/// A temperature threshold: absolute (`<absolute>`), or worked out from nvidia-smi 575's form
/// relative to T.Limit: `gpu_temp` + `gpu_temp_tlimit` - `<relative>`.
fn threshold(temp: &str, absolute: &str, relative: &str) -> Option<u64> {
    if let Some(v) = number(temp, absolute) {
        return Some(v);
    }
    let signed = |tag: &str| {
        value(temp, tag).map(|v| {
            v.trim_end_matches(" C")
                .parse::<i64>()
                .unwrap_or_else(|_| panic!("<{tag}> is not a temperature: {v:?}"))
        })
    };
    let t_limit = signed("gpu_temp")? + signed("gpu_temp_tlimit")?;
    u64::try_from(t_limit - signed(relative)?).ok()
}

/// The children `<name>value</name>` of a block, in order.
fn children(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(lt) = rest.find('<') {
        let after = &rest[lt + 1..];
        let Some(gt) = after.find('>') else { break };
        let name = after[..gt].to_string();
        if name.starts_with('/') || name.ends_with('/') {
            rest = &after[gt + 1..];
            continue;
        }
        let close = format!("</{name}>");
        let body = &after[gt + 1..];
        let Some(end) = body.find(&close) else { break };
        out.push((name, body[..end].trim().to_string()));
        rest = &body[end + close.len()..];
    }
    out
}

// ---- The check ----

fn info_json(stem: &str) -> Value {
    let fixture = root().join(format!("xtask/tests/data/imported/{stem}.json"));
    cli::json(cli::command(&["info", "--json", "--fixture"]).arg(&fixture))
}

/// Compares one JSON value with what the XML says (`None`: the XML has no value there).
fn same(what: &str, got: &Value, want: Option<Value>) -> usize {
    match want {
        Some(w) => {
            assert_eq!(got, &w, "{what}");
            1
        }
        None => {
            assert!(
                got.is_null(),
                "{what}: the XML has no value, info says {got}"
            );
            0
        }
    }
}

/// nvidia-smi's clock event reason tags, as gpuscope names them.
fn reason_name(tag: &str) -> String {
    let name = tag
        .trim_start_matches("clocks_event_reason_")
        .trim_start_matches("clocks_throttle_reason_");
    match name {
        "display_clocks_setting" => "display_clock_setting".to_string(),
        other => other.to_string(),
    }
}

/// The ECC counts of one counter group: (total corrected, total uncorrected, per location
/// `(location, corrected, uncorrected)`), as the XML prints them.
type GroupCounts = (
    Option<u64>,
    Option<u64>,
    Vec<(&'static str, Option<u64>, Option<u64>)>,
);

fn ecc_group(group: &str) -> GroupCounts {
    let single = block(group, "single_bit");
    let double = block(group, "double_bit");
    if !single.is_empty() || !double.is_empty() {
        // Before R525: single_bit / double_bit, each per location and a total.
        let locations = [
            "l1_cache",
            "l2_cache",
            "device_memory",
            "register_file",
            "texture_memory",
            "texture_shm",
            "cbu",
        ]
        .into_iter()
        .map(|l| (l, number(single, l), number(double, l)))
        .collect();
        return (number(single, "total"), number(double, "total"), locations);
    }
    // R525 and later: sram_* and dram_*, totals are their sums; Blackwell splits SRAM's
    // uncorrectable count into parity and SEC-DED.
    let kids = children(group);
    let sum = |pick: &dyn Fn(&str) -> bool| -> Option<u64> {
        let values: Vec<u64> = kids
            .iter()
            .filter(|(n, _)| pick(n))
            .filter_map(|(n, _)| number(group, n))
            .collect();
        (!values.is_empty()).then(|| values.iter().sum())
    };
    let corrected = |n: &str| n.ends_with("_correctable") && !n.contains("uncorrectable");
    let uncorrected = |n: &str| n.contains("_uncorrectable");
    (
        sum(&corrected),
        sum(&uncorrected),
        vec![
            (
                "sram",
                sum(&|n| n.starts_with("sram") && corrected(n)),
                sum(&|n| n.starts_with("sram") && uncorrected(n)),
            ),
            (
                "device_memory",
                sum(&|n| n.starts_with("dram") && corrected(n)),
                sum(&|n| n.starts_with("dram") && uncorrected(n)),
            ),
        ],
    )
}

/// Checks every physical GPU of one dump; returns how many values were compared.
fn check_dump(stem: &str) -> usize {
    let xml = std::fs::read_to_string(
        root().join(format!("xtask/tests/data/reference-dumps/{stem}.xml")),
    )
    .unwrap();
    let info = info_json(stem);
    let devices = info["devices"].as_array().unwrap();
    let mut checked = 0;
    for (i, g) in blocks(&xml, "gpu").iter().enumerate() {
        let top = without(&without(g, "mig_devices"), "processes");
        let d = devices
            .iter()
            .find(|d| d["id"].as_str() == Some(i.to_string().as_str()))
            .unwrap_or_else(|| panic!("{stem}: no GPU {i} in info --json"));
        let h = &d["health"];
        let at = |what: &str| format!("{stem} GPU {i}: {what}");
        let n = |v: Option<u64>| v.map(Value::from);
        // A value of the XML as JSON: its text, or whether it is one of `on`.
        let text = |s: &str, tag: &str| value(s, tag).map(Value::from);
        let flag = |s: &str, tag: &str, on: &[&str]| {
            value(s, tag).map(|v| Value::from(on.contains(&v.as_str())))
        };

        // Versions.
        for (field, tag) in [
            ("vbios_version", "vbios_version"),
            ("serial", "serial"),
            ("board_part_number", "board_part_number"),
        ] {
            checked += same(&at(field), &h[field], text(&top, tag));
        }
        checked += same(
            &at("inforom"),
            &h["inforom_image_version"],
            text(block(&top, "inforom_version"), "img_version"),
        );
        // Temperatures.
        let temp = block(&top, "temperature");
        for (field, tag) in [
            ("memory_temperature_celsius", "memory_temp"),
            // The memory maximum has no absolute form in dumps that print T.Limit ones.
            (
                "temperature_memory_max_celsius",
                "gpu_temp_max_mem_threshold",
            ),
        ] {
            checked += same(&at(field), &h[field], n(number(temp, tag)));
        }
        for (field, absolute, relative) in [
            (
                "temperature_shutdown_celsius",
                "gpu_temp_max_threshold",
                "gpu_temp_max_tlimit_threshold",
            ),
            (
                "temperature_slowdown_celsius",
                "gpu_temp_slow_threshold",
                "gpu_temp_slow_tlimit_threshold",
            ),
            (
                "temperature_gpu_max_celsius",
                "gpu_temp_max_gpu_threshold",
                "gpu_temp_max_gpu_tlimit_threshold",
            ),
        ] {
            checked += same(
                &at(field),
                &h[field],
                n(threshold(temp, absolute, relative)),
            );
        }
        // Configuration, as nvidia-smi -q prints it.
        let c = &d["config"];
        checked += same(
            &at("board id"),
            &c["board_id"],
            value(&top, "board_id").map(|v| {
                u64::from_str_radix(v.trim_start_matches("0x"), 16)
                    .unwrap()
                    .into()
            }),
        );
        for (field, tag) in [
            ("multi_gpu_board", "multigpu_board"),
            ("accounting_mode", "accounting_mode"),
        ] {
            checked += same(&at(field), &c[field], flag(&top, tag, &["Yes", "Enabled"]));
        }
        checked += same(
            &at("virtualization"),
            &c["virtualization_mode"],
            text(
                block(&top, "gpu_virtualization_mode"),
                "virtualization_mode",
            ),
        );
        for (field, tag) in [
            ("gpu_operation_mode_current", "current_gom"),
            ("gpu_operation_mode_pending", "pending_gom"),
        ] {
            let mode = block(&top, "gpu_operation_mode");
            checked += same(&at(field), &c[field], text(mode, tag));
        }
        for (prefix, tag) in [
            ("applications_clock", "applications_clocks"),
            ("default_applications_clock", "default_applications_clocks"),
        ] {
            let clocks = block(&top, tag);
            checked += same(
                &at(prefix),
                &c[format!("{prefix}_graphics_mhz")],
                n(number(clocks, "graphics_clock")),
            );
            checked += same(
                &at(prefix),
                &c[format!("{prefix}_memory_mhz")],
                n(number(clocks, "mem_clock")),
            );
        }
        // PCIe replays, reserved memory.
        checked += same(
            &at("replays"),
            &h["pcie_replay_counter"],
            n(number(block(&top, "pci"), "replay_counter")),
        );
        checked += same(
            &at("reserved"),
            &d["memory_reserved_bytes"],
            n(number(block(&top, "fb_memory_usage"), "reserved").map(|m| m * MIB)),
        );
        // ECC mode and counts.
        let mode = block(&top, "ecc_mode");
        for (field, tag) in [
            ("ecc_mode_current", "current_ecc"),
            ("ecc_mode_pending", "pending_ecc"),
        ] {
            checked += same(&at(field), &h[field], flag(mode, tag, &["Enabled"]));
        }
        let errors = block(&top, "ecc_errors");
        for counter in ["volatile", "aggregate"] {
            let group = block(errors, counter);
            if group.is_empty() {
                continue;
            }
            let (corrected, uncorrected, locations) = ecc_group(group);
            for (kind, count) in [("corrected", corrected), ("uncorrected", uncorrected)] {
                checked += same(
                    &at(&format!("{counter} {kind}")),
                    &h[format!("ecc_errors_{counter}_{kind}")],
                    n(count),
                );
            }
            for (location, c, u) in locations {
                let got = &h["ecc_errors_by_location"][location];
                if c.is_none() && u.is_none() {
                    // A location with no count at all: null, or a record of nulls here when
                    // the other counter group has some.
                    assert!(
                        got.is_null()
                            || (got[format!("{counter}_corrected")].is_null()
                                && got[format!("{counter}_uncorrected")].is_null()),
                        "{}",
                        at(location)
                    );
                    continue;
                }
                for (kind, count) in [("corrected", c), ("uncorrected", u)] {
                    checked += same(
                        &at(&format!("{location} {counter} {kind}")),
                        &got[format!("{counter}_{kind}")],
                        n(count),
                    );
                }
            }
        }
        // Retired pages.
        let retired = block(&top, "retired_pages");
        for (field, tag) in [
            ("retired_pages_single_bit", "multiple_single_bit_retirement"),
            ("retired_pages_double_bit", "double_bit_retirement"),
        ] {
            let cause = block(retired, tag);
            let want = number(cause, "retired_count").map(|count| {
                let addresses: Vec<Value> = blocks(cause, "retired_page_address")
                    .iter()
                    .map(|a| {
                        let a = u64::from_str_radix(a.trim().trim_start_matches("0x"), 16)
                            .unwrap_or_else(|e| panic!("{}: {a:?}: {e}", at(tag)));
                        Value::from(format!("{a:#018x}"))
                    })
                    .collect();
                assert_eq!(addresses.len() as u64, count, "{}", at(tag));
                Value::Array(addresses)
            });
            checked += same(&at(field), &h[field], want);
        }
        checked += same(
            &at("pending retirement"),
            &h["retired_pages_pending"],
            flag(retired, "pending_retirement", &["Yes"]),
        );
        // Remapped rows.
        let rows = block(&top, "remapped_rows");
        for (field, tag) in [
            ("remapped_rows_correctable", "remapped_row_corr"),
            ("remapped_rows_uncorrectable", "remapped_row_unc"),
        ] {
            checked += same(&at(field), &h[field], n(number(rows, tag)));
        }
        for (field, tag) in [
            ("remapped_rows_pending", "remapped_row_pending"),
            ("remapped_rows_failure", "remapped_row_failure"),
        ] {
            checked += same(&at(field), &h[field], flag(rows, tag, &["Yes"]));
        }
        // Clock event reasons: the ones printed "Active", by name.
        let reasons = [
            block(&top, "clocks_event_reasons"),
            block(&top, "clocks_throttle_reasons"),
        ]
        .into_iter()
        .find(|b| !b.is_empty())
        .unwrap_or("");
        let printed: Vec<(String, String)> = children(reasons)
            .into_iter()
            .filter(|(n, _)| {
                n != "clocks_event_reasons_active" && n != "clocks_throttle_reasons_active"
            })
            .collect();
        if printed
            .iter()
            .any(|(_, v)| v == "Active" || v == "Not Active")
        {
            let mut want: Vec<String> = printed
                .iter()
                .filter(|(_, v)| v == "Active")
                .map(|(n, _)| reason_name(n))
                .collect();
            want.sort();
            let mut got: Vec<String> = h["clock_event_reasons"]
                .as_array()
                .unwrap_or_else(|| panic!("{}", at("clock events")))
                .iter()
                .map(|v| v.as_str().unwrap().to_string())
                .collect();
            got.sort();
            assert_eq!(got, want, "{}", at("clock events"));
            checked += 1;
        }
    }
    checked
}

/// Each dump's test, with the number of values its XML carries and the test compares (the GT 730 dump of a 2018
/// driver prints none of them: every one must be null there).
macro_rules! dump_tests {
    ($($test:ident => $stem:literal, values $min:literal;)*) => {$(
        #[test]
        fn $test() {
            let checked = check_dump($stem);
            assert_eq!(checked, $min, "{}: values compared", $stem);
        }
    )*};
}

dump_tests! {
    a0s_exporter_nvidia_smi_3 => "a0s-exporter__nvidia-smi-3", values 20;
    pai_nvidia_smi_outdated_gpu => "pai__nvidia_smi_outdated_gpu", values 0;
    pai_nvidia_smi_retired_pages => "pai__nvidia_smi_retired_pages", values 45;
    pai_nvidia_smi_sample => "pai__nvidia_smi_sample", values 20;
    rai_nvidia_smi_example2 => "rai-nvidia-smi__example2", values 10;
    telegraf_a100_sxm4_v12 => "telegraf__a100-sxm4-v12", values 34;
    telegraf_gtx_1660_ti => "telegraf__gtx-1660-ti", values 11;
    telegraf_pro_6000_maxq_blackwell_v13 => "telegraf__pro-6000-maxq-blackwell-v13", values 20;
    telegraf_rtx_3080_v12 => "telegraf__rtx-3080-v12", values 12;
    telegraf_tesla_t4 => "telegraf__tesla-t4", values 34;
    telegraf_tesla_t4_b => "telegraf__tesla_t4", values 34;
}

/// Every dump of the directory has its test above.
#[test]
fn every_reference_dump_has_a_test() {
    let dir = root().join("xtask/tests/data/reference-dumps");
    let mut stems: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| {
            let p = e.ok()?.path();
            let stem = p.file_stem()?.to_string_lossy().into_owned();
            (p.extension()? == "xml").then_some(stem)
        })
        .collect();
    stems.sort();
    // This file's own text, taken in when the test is built: no path to find when it runs.
    let this = include_str!("reference_dumps.rs");
    for stem in stems {
        assert!(
            this.contains(&format!("=> \"{stem}\"")),
            "{stem}.xml has no test in reference_dumps.rs"
        );
    }
}
