//! The doors over recorded machines: names, types, units and labels as the real exporters
//! publish them, N/A left out, MIG GPU instances, pods, several doors at once, and
//! docs/exporter.md's tables made from the doors' tables.

use std::collections::BTreeMap;
use std::sync::Arc;

use gpu_processes::ProcessCollector;

use super::*;
use crate::exposition::{encode_openmetrics, encode_text};
use crate::names;

fn fixture(stem: &str) -> String {
    format!("{}/../../fixtures/{stem}.json", env!("CARGO_MANIFEST_DIR"))
}

/// The fixture file's JSON, for the expected values.
fn json(stem: &str) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(fixture(stem)).expect("fixture")).expect("JSON")
}

/// `stem` at `frame`, published under `names` as host `box`, with processes.
fn families_of(stem: &str, frame: usize, names: &str) -> Vec<Family> {
    let collector = ProcessCollector::from_fixture(fixture(stem), Some(frame)).expect("loads");
    let options = Options {
        hostname: "box".into(),
        processes: true,
        names: names.parse().expect("names"),
        ..Options::of(&collector)
    };
    let mut inputs = Inputs::take(&collector);
    inputs.sample_duration_s = 0.25;
    inputs.sample_time_s = 1_800_000_000.5;
    build(&inputs, &options)
}

/// One sample line of the text format.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// The samples of a text exposition (a strict enough reader for what the encoder writes).
fn samples(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|line| {
            let (head, value) = line.rsplit_once(' ').expect("a value");
            let (name, labels) = match head.split_once('{') {
                Some((name, rest)) => (name, parse_labels(rest.strip_suffix('}').expect("}"))),
                None => (head, BTreeMap::new()),
            };
            Sample {
                name: name.to_string(),
                labels,
                value: value.parse().expect("a number"),
            }
        })
        .collect()
}

fn parse_labels(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = text;
    while !rest.is_empty() {
        let (name, after) = rest.split_once("=\"").expect("name=\"");
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next().expect("a closing quote") {
                (_, '\\') => match chars.next().expect("an escape") {
                    (_, 'n') => value.push('\n'),
                    (_, c) => value.push(c),
                },
                (i, '"') => break i,
                (_, c) => value.push(c),
            }
        };
        out.insert(name.to_string(), value);
        rest = after[end + 1..].trim_start_matches(',');
    }
    out
}

/// The samples of `name` whose labels include `with`.
fn find<'a>(all: &'a [Sample], name: &str, with: &[(&str, &str)]) -> Vec<&'a Sample> {
    all.iter()
        .filter(|s| s.name == name)
        .filter(|s| {
            with.iter()
                .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .collect()
}

fn one<'a>(all: &'a [Sample], name: &str, with: &[(&str, &str)]) -> &'a Sample {
    let found = find(all, name, with);
    assert_eq!(found.len(), 1, "{name} {with:?}: {found:#?}");
    found[0]
}

fn ok(v: &serde_json::Value) -> Option<&serde_json::Value> {
    v.get("ok")
}

/// The MIG recording (`h100-mig`) at frame 5 under the door names `names`: its JSON, and the
/// samples.
fn mig_frame_5(names: &str) -> (serde_json::Value, Vec<Sample>) {
    let all = samples(&encode_text(&families_of("h100-mig", 5, names)));
    (json("h100-mig"), all)
}

/// Device `id`'s UUID in recording `fx` as nvidia_gpu_exporter writes it: without its `GPU-`
/// or `MIG-`, in lower case.
fn smi_uuid(fx: &serde_json::Value, id: &str) -> String {
    let uuid = ok(&fx["devices"][id]["uuid"])
        .and_then(|v| v.as_str())
        .expect("uuid");
    let bare = uuid
        .strip_prefix("GPU-")
        .or_else(|| uuid.strip_prefix("MIG-"))
        .expect("GPU- or MIG-");
    bare.to_ascii_lowercase()
}

const MIB: f64 = 1048576.0;

#[test]
fn names_parse_as_the_option_takes_them() {
    assert_eq!("gpuscope".parse::<Doors>(), Ok(Doors::GPUSCOPE));
    let all: Doors = "gpuscope, dcgm,NVIDIA-SMI".parse().expect("three");
    assert_eq!(all.iter().collect::<Vec<_>>(), Door::ALL);
    assert_eq!(all.to_string(), "gpuscope,dcgm,nvidia-smi");
    assert_eq!(
        "nvidia_smi,dcgm".parse::<Doors>().map(|d| d.to_string()),
        Ok("dcgm,nvidia-smi".into())
    );
    assert!(matches!("".parse::<Doors>(), Err(DoorsError::Empty(_))));
    assert!(matches!(
        "dcgm,".parse::<Doors>(),
        Err(DoorsError::Empty(_))
    ));
    assert_eq!(
        "dcgm,dcgm".parse::<Doors>(),
        Err(DoorsError::Twice(Door::Dcgm))
    );
    let err = "dcgm,prometheus\n"
        .parse::<Doors>()
        .unwrap_err()
        .to_string();
    assert!(err.contains("\"prometheus\""), "{err}");
    assert!(err.contains("nvidia-smi"), "{err}");
}

#[test]
fn by_default_only_gpuscope_names_are_published() {
    let families = families_of("h100-sxm-8gpu", 20, "gpuscope");
    let declared: Vec<&str> = families.iter().map(|f| f.name).collect();
    assert_eq!(declared, names::ALL);
}

#[test]
fn dcgm_names_types_units_and_labels_are_dcgm_exporters() {
    let fx = json("h100-sxm-8gpu");
    let frame = &fx["frames"][20]["devices"];
    let families = families_of("h100-sxm-8gpu", 20, "dcgm");
    let text = encode_text(&families);
    let all = samples(&text);
    // dcgm-exporter's counters keep their names: no `_total`, typed counter in the text format.
    assert!(text.contains("# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n"));
    assert!(text.contains("# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"));
    assert!(!text.contains("_total"), "{text}");
    for i in 0..8u32 {
        let dev = &fx["devices"][i.to_string()];
        let dynamic = &frame[i.to_string()];
        let gpu = i.to_string();
        let util = one(&all, "DCGM_FI_DEV_GPU_UTIL", &[("gpu", &gpu)]);
        let uuid = ok(&dev["uuid"]).and_then(|v| v.as_str()).expect("uuid");
        let labels: Vec<(&str, &str)> = util
            .labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            labels,
            [
                (
                    "DCGM_FI_DRIVER_VERSION",
                    ok(&fx["system"]["driver_version"])
                        .and_then(|v| v.as_str())
                        .expect("driver")
                ),
                ("Hostname", "box"),
                ("UUID", uuid),
                ("device", &format!("nvidia{i}")),
                ("gpu", &gpu),
                ("modelName", "NVIDIA H100 80GB HBM3"),
                (
                    "pci_bus_id",
                    ok(&dev["pci_info"])
                        .and_then(|p| p["bus_id"].as_str())
                        .expect("bus id")
                ),
            ],
            "GPU {i}"
        );
        // Units: percent, MiB, MHz, W, mJ, ratios of GPM, bytes per second.
        let want = |v: Option<&serde_json::Value>| v.and_then(serde_json::Value::as_f64);
        assert_eq!(
            Some(util.value),
            want(ok(&dynamic["utilization_rates"]).map(|u| &u["gpu"]))
        );
        let mem = ok(&dynamic["memory_info"]).expect("memory");
        let used = one(&all, "DCGM_FI_DEV_FB_USED", &[("gpu", &gpu)]).value;
        assert_eq!(used, (mem["used"].as_f64().expect("used") / MIB).floor());
        assert_eq!(
            Some(one(&all, "DCGM_FI_DEV_SM_CLOCK", &[("gpu", &gpu)]).value),
            want(ok(&dynamic["clocks"]["sm"]))
        );
        let power = one(&all, "DCGM_FI_DEV_POWER_USAGE", &[("gpu", &gpu)]).value;
        assert_eq!(Some(power * 1000.0), want(ok(&dynamic["power_usage"])));
        let energy = one(
            &all,
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
            &[("gpu", &gpu)],
        )
        .value;
        assert_eq!(Some(energy), want(ok(&dynamic["total_energy_consumption"])));
        let gpm = ok(&dynamic["gpm_metrics"]).expect("GPM at frame 20");
        let tensor = one(&all, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", &[("gpu", &gpu)]).value;
        assert!((tensor - gpm["tensor_activity"].as_f64().expect("tensor") / 100.0).abs() < 1e-12);
        let tx = one(&all, "DCGM_FI_PROF_PCIE_TX_BYTES", &[("gpu", &gpu)]).value;
        assert!((tx - gpm["pcie_tx"].as_f64().expect("pcie") * MIB).abs() < 1e-6);
    }
    // XID: the last code with its err_code; 0 and "No Error" where none came.
    let xid = one(&all, "DCGM_FI_DEV_XID_ERRORS", &[("gpu", "2")]);
    assert_eq!(xid.value, 79.0);
    assert_eq!(xid.labels["err_code"], "79");
    assert_eq!(xid.labels["err_msg"], "GPU has fallen off the bus");
    let none = one(&all, "DCGM_FI_DEV_XID_ERRORS", &[("gpu", "0")]);
    assert_eq!(
        (none.value, none.labels["err_msg"].as_str()),
        (0.0, "No Error")
    );
    // Every sample is one of the table's names.
    for s in &all {
        assert!(dcgm::table().metric(&s.name).is_some(), "{}", s.name);
    }
}

#[test]
fn dcgm_counters_keep_their_names_in_openmetrics_too() {
    let families = families_of("h100-sxm-8gpu", 20, "dcgm");
    let om = encode_openmetrics(Arc::from(families)).expect("encodes");
    assert!(
        om.contains("# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION unknown\n"),
        "{om}"
    );
    assert!(
        om.contains("\nDCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"0\","),
        "{om}"
    );
    assert!(!om.contains("_total"), "{om}");
    assert!(om.ends_with("# EOF\n"));
}

#[test]
fn a_value_that_is_na_has_no_sample_in_either_door() {
    // Frame 0 of the 8-GPU box: GPM has no measure yet (the first sample); the board has no
    // fan. The desktop GeForce: no memory temperature, no GPM at all.
    let both_doors = |fixture, frame| {
        samples(&encode_text(&families_of(
            fixture,
            frame,
            "dcgm,nvidia-smi",
        )))
    };
    let all = both_doors("h100-sxm-8gpu", 0);
    assert!(find(&all, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", &[]).is_empty());
    assert!(find(&all, "DCGM_FI_PROF_PCIE_TX_BYTES", &[]).is_empty());
    assert!(find(&all, "nvidia_smi_fan_speed_ratio", &[]).is_empty());
    assert_eq!(find(&all, "DCGM_FI_DEV_GPU_TEMP", &[]).len(), 8);
    let desktop = both_doors("geforce-desktop", 7);
    assert!(find(&desktop, "DCGM_FI_DEV_MEMORY_TEMP", &[]).is_empty());
    assert!(find(&desktop, "nvidia_smi_temperature_memory", &[]).is_empty());
    assert!(find(&desktop, "nvidia_smi_mig_info", &[]).is_empty());
    assert!(!find(&desktop, "nvidia_smi_fan_speed_ratio", &[]).is_empty());
    assert!(desktop.iter().all(|s| s.value.is_finite()));
}

#[test]
fn dcgm_publishes_a_mig_gpu_through_its_gpu_instances() {
    let (fx, all) = mig_frame_5("dcgm");
    let frame = &fx["frames"][5]["devices"];
    let temps = find(&all, "DCGM_FI_DEV_GPU_TEMP", &[("gpu", "0")]);
    let parent_uuid = ok(&fx["devices"]["0"]["uuid"])
        .and_then(|v| v.as_str())
        .expect("uuid");
    let mut instances: Vec<(String, String)> = temps
        .iter()
        .map(|s| {
            (
                s.labels["GPU_I_ID"].clone(),
                s.labels["GPU_I_PROFILE"].clone(),
            )
        })
        .collect();
    instances.sort_by_key(|(id, _)| id.parse::<u32>().unwrap_or(0));
    assert_eq!(
        instances,
        [
            ("2", "3g.40gb"),
            ("3", "2g.20gb"),
            ("9", "1g.10gb"),
            ("10", "1g.10gb")
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    for t in &temps {
        // A device-wide reading is the GPU's, on each instance; the UUID is the GPU's.
        assert_eq!(Some(t.value), frame["0"]["temperature"]["ok"].as_f64());
        assert_eq!(t.labels["UUID"], parent_uuid);
        assert_eq!(t.labels["modelName"], "NVIDIA H100 80GB HBM3");
    }
    // Memory and activity are the instance's own.
    for (slot, gi) in [("0:0", "2"), ("0:1", "3"), ("0:2", "9")] {
        let used = one(&all, "DCGM_FI_DEV_FB_USED", &[("GPU_I_ID", gi)]).value;
        let want = frame[slot]["memory_info"]["ok"]["used"]
            .as_f64()
            .expect("used");
        assert_eq!(used, (want / MIB).floor(), "{slot}");
        let active = one(&all, "DCGM_FI_PROF_SM_ACTIVE", &[("GPU_I_ID", gi)]).value;
        let want = frame[slot]["gpm_metrics"]["ok"]["sm_activity"]
            .as_f64()
            .expect("GPM");
        assert!((active - want / 100.0).abs() < 1e-12, "{slot}");
    }
    // No series of the GPU itself besides its instances', as dcgm-exporter watches a MIG GPU.
    assert!(all.iter().all(|s| s.labels.contains_key("GPU_I_ID")));
}

#[test]
fn dcgm_labels_each_series_with_the_pods_gpuscope_attributes_to_the_device() {
    let all = samples(&encode_text(&families_of("k8s-time-slicing", 4, "dcgm")));
    // GPU 0 is time-sliced by three pods: one series each, as dcgm-exporter's shared-GPU mode.
    let util = find(&all, "DCGM_FI_DEV_GPU_UTIL", &[("gpu", "0")]);
    let pods: Vec<(&str, &str, &str)> = util
        .iter()
        .map(|s| {
            (
                s.labels["pod"].as_str(),
                s.labels["namespace"].as_str(),
                s.labels["container"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        pods,
        [
            ("finetune-a-0", "ml-research", "trainer"),
            ("finetune-b-0", "ml-research", "trainer"),
            ("notebook-7f9c", "data-science", "jupyter"),
        ]
    );
    assert!(util.iter().all(|s| s.value == 85.0));
    // The MIG GPU: the pod on its 3g instance; the 1g instance's process is in no pod.
    let temps = find(&all, "DCGM_FI_DEV_GPU_TEMP", &[("gpu", "1")]);
    assert_eq!(temps.len(), 2, "{temps:#?}");
    let with_pod: Vec<_> = temps
        .iter()
        .filter(|s| s.labels.contains_key("pod"))
        .collect();
    assert_eq!(with_pod.len(), 1);
    assert_eq!(with_pod[0].labels["pod"], "triton-0");
    assert_eq!(with_pod[0].labels["GPU_I_PROFILE"], "3g.40gb");
}

#[test]
fn nvidia_smi_names_and_units_are_nvidia_gpu_exporters() {
    // Names as nvidia_gpu_exporter v1.14.0 published them over a real H100 (its
    // internal/integration/testdata captures) and as its dashboard queries them.
    let table = nvidia_smi::table();
    for name in [
        "nvidia_smi_gpu_info",
        "nvidia_smi_index",
        "nvidia_smi_memory_used_bytes",
        "nvidia_smi_memory_total_bytes",
        "nvidia_smi_utilization_gpu_ratio",
        "nvidia_smi_utilization_memory_ratio",
        "nvidia_smi_temperature_gpu",
        "nvidia_smi_power_draw_watts",
        "nvidia_smi_enforced_power_limit_watts",
        "nvidia_smi_power_default_limit_watts",
        "nvidia_smi_pstate",
        "nvidia_smi_fan_speed_ratio",
        "nvidia_smi_clocks_current_graphics_clock_hz",
        "nvidia_smi_clocks_max_sm_clock_hz",
        "nvidia_smi_clocks_event_reasons_sw_power_cap",
        "nvidia_smi_clocks_event_reasons_hw_thermal_slowdown",
        "nvidia_smi_ecc_errors_uncorrected_aggregate_total",
        "nvidia_smi_retired_pages_single_bit_ecc_count",
        "nvidia_smi_energy_joules",
        "nvidia_smi_xid_errors",
        "nvidia_smi_mig_memory_used_bytes",
        "nvidia_smi_mig_sm_activity_ratio",
    ] {
        assert!(table.metric(name).is_some(), "{name}");
    }
    assert_eq!(
        nvidia_smi::field_name("memory.used [MiB]"),
        Some(("nvidia_smi_memory_used_bytes".into(), MIB))
    );
    assert_eq!(
        nvidia_smi::field_name("encoder.stats.sessionCount"),
        Some(("nvidia_smi_encoder_stats_session_count".into(), 1.0))
    );
    assert_eq!(
        nvidia_smi::field_name("fabric.cliqueId").map(|(n, _)| n),
        Some("nvidia_smi_fabric_clique_id".into())
    );
    assert_eq!(
        nvidia_smi::field_name("clocks.current.sm [MHz]"),
        Some(("nvidia_smi_clocks_current_sm_clock_hz".into(), 1e6))
    );
    assert_eq!(nvidia_smi::field_name("power.draw [kW]"), None);
}

#[test]
fn nvidia_smi_values_are_what_nvidia_smi_prints_in_base_units() {
    let fx = json("h100-sxm-8gpu");
    let frame = &fx["frames"][20]["devices"];
    let text = encode_text(&families_of("h100-sxm-8gpu", 20, "nvidia-smi"));
    let all = samples(&text);
    assert!(text.contains("# TYPE nvidia_smi_energy_joules_total counter\n"));
    assert!(text.contains("# TYPE nvidia_smi_memory_used_bytes gauge\n"));
    for i in 0..8 {
        let dev = &fx["devices"][i.to_string()];
        let d = &frame[i.to_string()];
        let uuid = ok(&dev["uuid"]).and_then(|v| v.as_str()).expect("uuid");
        let bare = uuid
            .strip_prefix("GPU-")
            .expect("GPU-")
            .to_ascii_lowercase();
        let sel = [("uuid", bare.as_str())];
        let info = one(&all, "nvidia_smi_gpu_info", &sel);
        assert_eq!(info.labels["index"], i.to_string());
        assert_eq!(info.labels["name"], "NVIDIA H100 80GB HBM3");
        assert_eq!(info.labels["driver_model_current"], "[N/A]");
        assert_eq!(info.labels["compute_cap"], "9.0");
        assert_eq!(
            Some(info.labels["driver_version"].as_str()),
            ok(&fx["system"]["driver_version"]).and_then(|v| v.as_str())
        );
        assert_eq!(one(&all, "nvidia_smi_index", &sel).value, f64::from(i));
        // Every field series has the one label uuid.
        let used = one(&all, "nvidia_smi_memory_used_bytes", &sel);
        assert_eq!(used.labels.len(), 1);
        let mem = ok(&d["memory_info"]).expect("memory");
        let want = (mem["used"].as_f64().expect("used") / MIB).ceil() * MIB;
        assert_eq!(
            used.value, want,
            "GPU {i}: nvidia-smi's MiB, a part counting whole"
        );
        let util = one(&all, "nvidia_smi_utilization_gpu_ratio", &sel).value;
        let want = ok(&d["utilization_rates"])
            .and_then(|u| u["gpu"].as_f64())
            .expect("util");
        assert!((util - want / 100.0).abs() < 1e-12);
        let power = one(&all, "nvidia_smi_power_draw_watts", &sel).value;
        let mw = ok(&d["power_usage"])
            .and_then(serde_json::Value::as_f64)
            .expect("power");
        assert_eq!(
            power,
            (mw / 10.0).round() / 100.0,
            "two decimals, as printed"
        );
        let clock = one(&all, "nvidia_smi_clocks_current_graphics_clock_hz", &sel).value;
        let mhz = ok(&d["clocks"]["graphics"]).and_then(serde_json::Value::as_f64);
        assert_eq!(Some(clock / 1e6), mhz);
        let pstate = one(&all, "nvidia_smi_pstate", &sel).value;
        assert_eq!(
            Some(pstate),
            ok(&d["performance_state"]).and_then(serde_json::Value::as_f64)
        );
        let energy = one(&all, "nvidia_smi_energy_joules_total", &sel).value;
        let mj = ok(&d["total_energy_consumption"])
            .and_then(serde_json::Value::as_f64)
            .expect("mJ");
        assert_eq!(energy, mj / 1000.0);
    }
    // XIDs per code: GPU 2's 79.
    let gpu2 = fx["devices"]["2"]["uuid"]["ok"].as_str().expect("uuid")[4..].to_string();
    let xid = one(&all, "nvidia_smi_xid_errors_total", &[("uuid", &gpu2)]);
    assert_eq!((xid.labels["xid"].as_str(), xid.value), ("79", 1.0));
    let when = one(
        &all,
        "nvidia_smi_xid_last_timestamp_seconds",
        &[("uuid", &gpu2)],
    )
    .value;
    assert_eq!(when, 1_793_527_213.588);
    // The exporter's collection: one sample served, when, how long.
    assert_eq!(one(&all, "nvidia_smi_last_collect_success", &[]).value, 1.0);
    assert_eq!(
        one(
            &all,
            "nvidia_smi_last_collect_success_timestamp_seconds",
            &[]
        )
        .value,
        1_800_000_000.0
    );
    assert_eq!(
        one(&all, "nvidia_smi_last_collect_duration_seconds", &[]).value,
        0.25
    );
}

#[test]
fn nvidia_smi_compute_apps_are_each_gpus_compute_processes() {
    let (fx, all) = mig_frame_5("nvidia-smi");
    let frame = &fx["frames"][5]["devices"];
    let uuid = smi_uuid(&fx, "0");
    // The MIG GPU lists its instances' processes once each, on the GPU.
    let listed = frame["0"]["compute_processes"]["ok"]
        .as_array()
        .expect("list");
    let apps = find(&all, "nvidia_smi_compute_app_info", &[("uuid", &uuid)]);
    assert_eq!(apps.len(), listed.len());
    assert_eq!(
        one(&all, "nvidia_smi_compute_apps", &[("uuid", &uuid)]).value,
        listed.len() as f64
    );
    let burn = one(&all, "nvidia_smi_compute_app_info", &[("pid", "21198")]);
    assert_eq!(burn.labels["process_name"], "./gpu_burn");
    let memory = one(
        &all,
        "nvidia_smi_compute_app_used_memory_bytes",
        &[("pid", "21198")],
    )
    .value;
    assert_eq!(memory % MIB, 0.0, "whole MiB, as nvidia-smi prints it");
    assert_eq!(
        one(&all, "nvidia_smi_compute_apps_last_collect_success", &[]).value,
        1.0
    );
    // Without --processes: none of them.
    let collector = ProcessCollector::from_fixture(fixture("h100-mig"), Some(5)).expect("loads");
    let options = Options {
        names: Doors::only(Door::NvidiaSmi),
        ..Options::of(&collector)
    };
    let quiet = samples(&encode_text(&build(&Inputs::take(&collector), &options)));
    assert!(quiet
        .iter()
        .all(|s| !s.name.starts_with("nvidia_smi_compute_app")));
}

#[test]
fn nvidia_smi_mig_families_are_per_mig_device_and_gpu_instance() {
    let (fx, all) = mig_frame_5("nvidia-smi");
    let frame = &fx["frames"][5]["devices"];
    let parent = smi_uuid(&fx, "0");
    let infos = find(&all, "nvidia_smi_mig_info", &[("uuid", &parent)]);
    assert_eq!(infos.len(), 4);
    let first = one(&all, "nvidia_smi_mig_info", &[("gpu_instance_id", "2")]);
    assert_eq!(first.labels["mig_uuid"], smi_uuid(&fx, "0:0"));
    assert_eq!(first.labels["profile"], "3g.40gb");
    assert_eq!(first.labels["compute_instance_id"], "0");
    for (slot, gi) in [("0:0", "2"), ("0:1", "3"), ("0:2", "9"), ("0:3", "10")] {
        let sel = [("uuid", parent.as_str()), ("gpu_instance_id", gi)];
        let used = one(&all, "nvidia_smi_mig_memory_used_bytes", &sel);
        assert_eq!(
            Some(used.value),
            frame[slot]["memory_info"]["ok"]["used"].as_f64()
        );
        let sm = one(&all, "nvidia_smi_mig_sm_activity_ratio", &sel).value;
        let want = frame[slot]["gpm_metrics"]["ok"]["sm_activity"]
            .as_f64()
            .expect("GPM");
        assert!((sm - want / 100.0).abs() < 1e-12);
    }
    // MIG devices are not `--query-gpu` rows: the field series are the GPU's alone.
    assert_eq!(find(&all, "nvidia_smi_memory_used_bytes", &[]).len(), 1);
}

#[test]
fn several_doors_publish_one_sample_under_each_set_of_names() {
    let families = families_of("h100-sxm-8gpu", 20, "gpuscope,dcgm,nvidia-smi");
    let mut seen = std::collections::BTreeSet::new();
    for f in &families {
        assert!(seen.insert(f.name), "{} declared twice", f.name);
    }
    let all = samples(&encode_text(&families));
    for name in [
        names::DEVICE_UP,
        "DCGM_FI_DEV_GPU_UTIL",
        "nvidia_smi_utilization_gpu_ratio",
    ] {
        assert_eq!(
            find(&all, name, &[]).len(),
            8,
            "{name}: one series per GPU in each door"
        );
    }
    // The same sample: each door's GPU utilization is the same reading.
    let ours = one(&all, names::DEVICE_UTILIZATION_RATIO, &[("index", "3")]).value;
    let dcgm = one(&all, "DCGM_FI_DEV_GPU_UTIL", &[("gpu", "3")]).value;
    assert!((ours - dcgm / 100.0).abs() < 1e-12);
}

#[test]
fn each_door_table_is_consistent() {
    for door in [Door::Dcgm, Door::NvidiaSmi] {
        let table = door.table().expect("a table");
        let mut seen = std::collections::BTreeSet::new();
        for m in &table.metrics {
            assert!(seen.insert(m.name), "{}: {} twice", door, m.name);
            assert!(!names::ALL.contains(&m.name), "{} is gpuscope's", m.name);
            if let Some(same) = m.same_as {
                assert!(
                    names::ALL.contains(&same.family),
                    "{}: {}",
                    m.name,
                    same.family
                );
                assert!(same.factor > 0.0);
            }
            assert!(!m.help.is_empty() && !m.source.is_empty(), "{}", m.name);
        }
        // The samples the door writes are of its table's metrics (a counter's with `_total`).
        let all = samples(&encode_text(&families_of("h100-mig", 5, door.as_str())));
        for s in &all {
            let family = s
                .name
                .strip_suffix("_total")
                .filter(|base| table.metric(base).is_some_and(|m| m.kind == Kind::Counter));
            assert!(
                table.metric(family.unwrap_or(&s.name)).is_some(),
                "{}",
                s.name
            );
        }
    }
    // The nvidia-smi fields are gpuscope's vocabulary's, by canonical name, each named as
    // nvidia_gpu_exporter names the field nvidia-smi heads with that name and unit.
    let mut fields = 0;
    for m in &nvidia_smi::table().metrics {
        let Some(v) = gpu_devices::vocabulary::find(m.source).filter(|v| v.name == m.source) else {
            continue;
        };
        fields += 1;
        let unit = match v.unit {
            "°C" | "" => String::new(),
            u => format!(" [{u}]"),
        };
        let derived = nvidia_smi::field_name(&format!("{}{unit}", v.name)).map(|(n, _)| n);
        assert_eq!(derived.as_deref(), Some(m.name), "{}", v.name);
    }
    assert!(fields >= 60, "{fields} fields");
}

/// docs/exporter.md's table of a door, made from the door's table.
fn door_markdown(table: &DoorTable) -> String {
    let mut out = format!(
        "As {}.\n\n| metric | type | unit | from | gpuscope's family | differs |\n|---|---|---|---|---|---|\n",
        table.copies,
    );
    for m in &table.metrics {
        let name = match m.kind {
            Kind::Counter => format!("`{}_total`", m.name),
            _ => format!("`{}`", m.name),
        };
        let extra = if m.extra_labels.is_empty() {
            String::new()
        } else {
            format!(
                " ({})",
                m.extra_labels
                    .iter()
                    .map(|l| format!("`{l}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        let kind = match m.kind {
            Kind::Gauge => "gauge",
            Kind::Counter | Kind::LegacyCounter => "counter",
        };
        let same = m
            .same_as
            .map(|s| {
                let labels = s
                    .labels
                    .iter()
                    .map(|(k, v)| format!("{k}=\"{v}\""))
                    .collect::<Vec<_>>()
                    .join(",");
                let labels = if labels.is_empty() {
                    String::new()
                } else {
                    format!("{{{labels}}}")
                };
                let factor = if s.factor == 1.0 {
                    String::new()
                } else {
                    format!(" = value × {}", s.factor)
                };
                format!("`{}{labels}`{factor}", s.family)
            })
            .unwrap_or_default();
        out += &format!(
            "| {name}{extra} | {kind} | {} | {} | {same} | {} |\n",
            m.unit,
            m.source,
            m.differs.replace('|', "\\|")
        );
    }
    for (names, why) in table.not_published {
        let names = if names.starts_with("the ") {
            names.to_string()
        } else {
            names
                .split(' ')
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        out += &format!("| {names} | | | not published | | {why} |\n");
    }
    out
}

/// docs/exporter.md holds each door's table as [`door_markdown`] makes it; `UPDATE_DOCS=1`
/// rewrites them.
#[test]
fn docs_exporter_md_has_each_door_table() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/exporter.md");
    let mut page = std::fs::read_to_string(&path).expect("docs/exporter.md");
    let mut stale = Vec::new();
    for door in [Door::Dcgm, Door::NvidiaSmi] {
        let table = door_markdown(door.table().expect("a table"));
        let (begin, end) = (
            format!("<!-- door {}:begin -->\n", door.as_str()),
            format!("<!-- door {}:end -->", door.as_str()),
        );
        let start = page.find(&begin).expect("the begin marker") + begin.len();
        let stop = page.find(&end).expect("the end marker");
        if page[start..stop] != table {
            stale.push(door.as_str());
            page = format!("{}{table}{}", &page[..start], &page[stop..]);
        }
    }
    if !stale.is_empty() {
        if std::env::var_os("UPDATE_DOCS").is_some() {
            std::fs::write(&path, page).expect("write docs/exporter.md");
        } else {
            panic!(
                "docs/exporter.md's {stale:?} tables are not the doors'; run `UPDATE_DOCS=1 \
                 cargo test -p gpu-export docs_exporter_md` and read the change"
            );
        }
    }
}
