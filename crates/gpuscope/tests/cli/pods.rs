//! Pods over the `k8s-time-slicing` scenario: three pods share GPU 0 by time-slicing, a fourth
//! runs in a MIG device of GPU 1, and one process runs outside any container. Every figure is
//! checked against the fixture file: per-pod series sum their processes, and the pods sharing
//! GPU 0 sum to the device's own memory use and utilization.

use crate::support::export_support;

use std::collections::BTreeMap;

use export_support::{cli, fixture, fixture_json, Exporter, Exposition};
use serde_json::Value;

const STEM: &str = "k8s-time-slicing";
const FRAME: usize = 4;

/// The recorded pods: pod UID -> (pod, namespace, [PIDs]).
fn recorded_pods(fx: &Value) -> BTreeMap<String, (String, String, Vec<u64>)> {
    let mut pods: BTreeMap<String, (String, String, Vec<u64>)> = BTreeMap::new();
    for (pid, facts) in fx["host"]["processes"].as_object().unwrap() {
        let c = &facts["container"];
        if c.is_null() {
            continue;
        }
        let e = pods
            .entry(c["pod_uid"].as_str().unwrap().to_string())
            .or_insert_with(|| {
                (
                    c["pod"].as_str().unwrap().to_string(),
                    c["namespace"].as_str().unwrap().to_string(),
                    Vec::new(),
                )
            });
        e.2.push(pid.parse().unwrap());
    }
    pods
}

/// The recorded processes of `device` at FRAME: PID -> (memory, SM percent if sampled).
fn recorded_processes(fx: &Value, device: &str) -> BTreeMap<u64, (f64, Option<f64>)> {
    let dy = &fx["frames"][FRAME]["devices"][device];
    let mut out = BTreeMap::new();
    for p in dy["compute_processes"]["ok"].as_array().unwrap() {
        let sm = dy["process_utilization"]["ok"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["pid"] == p["pid"]))
            .map(|s| s["sm"].as_f64().unwrap());
        out.insert(
            p["pid"].as_u64().unwrap(),
            (p["used_gpu_memory"].as_f64().unwrap(), sm),
        );
    }
    out
}

/// The exporter's scrape over the scenario at [`FRAME`], with `extra` arguments.
fn scrape(extra: &[&str]) -> Exposition {
    let (path, frame) = (fixture(STEM), FRAME.to_string());
    let args = [&["--fixture", &path, "--frame", &frame][..], extra].concat();
    Exporter::start(&args).scrape()
}

#[test]
fn time_sliced_pods_each_get_their_own_figures_summing_to_the_device() {
    let fx = fixture_json(STEM);
    let pods = recorded_pods(&fx);
    assert_eq!(pods.len(), 4, "four pods are recorded");
    // A long interval: the one sample taken sees the frame's per-process samples.
    let m = scrape(&["--interval", "1h"]);

    let gpu0 = recorded_processes(&fx, "0");
    let dy0 = &fx["frames"][FRAME]["devices"]["0"];
    let (mut mem_sum, mut sm_sum, mut pods_on_gpu0) = (0.0, 0.0, 0);
    for (uid, (pod, ns, pids)) in &pods {
        let on_gpu0: Vec<&(f64, Option<f64>)> =
            pids.iter().filter_map(|pid| gpu0.get(pid)).collect();
        if on_gpu0.is_empty() {
            continue;
        }
        pods_on_gpu0 += 1;
        let l = [
            ("index", "0"),
            ("pod_uid", uid.as_str()),
            ("pod", pod.as_str()),
            ("namespace", ns.as_str()),
        ];
        let mem: f64 = on_gpu0.iter().map(|p| p.0).sum();
        let sm: f64 = on_gpu0.iter().filter_map(|p| p.1).sum::<f64>() / 100.0;
        assert_eq!(
            m.value("gpuscope_pod_gpu_memory_bytes", &l),
            Some(mem),
            "{pod}"
        );
        let got_sm = m
            .value("gpuscope_pod_gpu_sm_utilization_ratio", &l)
            .unwrap();
        assert!((got_sm - sm).abs() < 1e-9, "{pod}: {got_sm} vs {sm}");
        assert_eq!(
            m.value("gpuscope_pod_processes", &l),
            Some(on_gpu0.len() as f64),
            "{pod}"
        );
        mem_sum += mem;
        sm_sum += sm;
    }
    assert_eq!(pods_on_gpu0, 3, "three pods share GPU 0");
    // With time-slicing, the pods' figures add up to the device's, not each to the whole.
    assert_eq!(mem_sum, dy0["memory_info"]["ok"]["used"].as_f64().unwrap());
    let util = dy0["utilization_rates"]["ok"]["gpu"].as_f64().unwrap() / 100.0;
    assert!((sm_sum - util).abs() < 1e-9, "{sm_sum} vs {util}");
    assert_eq!(
        m.value("gpuscope_device_memory_used_bytes", &[("index", "0")]),
        Some(mem_sum)
    );

    // MIG: the pod inside MIG device 0 of GPU 1 is attributed to that MIG device.
    let mig = recorded_processes(&fx, "1:0");
    let (uid, (pod, _, pids)) = pods
        .iter()
        .find(|(_, (_, _, pids))| pids.iter().any(|p| mig.contains_key(p)))
        .expect("a pod in a MIG device");
    let l = [
        ("index", "1:0"),
        ("pod_uid", uid.as_str()),
        ("pod", pod.as_str()),
    ];
    let mem: f64 = pids.iter().filter_map(|p| mig.get(p)).map(|p| p.0).sum();
    assert_eq!(m.value("gpuscope_pod_gpu_memory_bytes", &l), Some(mem));
    assert!(
        m.find("gpuscope_pod_processes", &[("index", "1")])
            .is_empty(),
        "not also on the parent GPU"
    );
    // No pod is made up for the process outside any container.
    assert_eq!(
        m.find("gpuscope_pod_processes", &[("index", "1:1")]).len(),
        0
    );
}

#[test]
fn process_series_carry_their_pod_and_a_process_outside_any_container_has_none() {
    let fx = fixture_json(STEM);
    let m = scrape(&["--processes"]);
    for (pid, facts) in fx["host"]["processes"].as_object().unwrap() {
        let series = m.find(
            "gpuscope_process_gpu_memory_bytes",
            &[("pid", pid.as_str())],
        );
        assert_eq!(series.len(), 1, "PID {pid}");
        let labels = &series[0].labels;
        let c = &facts["container"];
        for key in ["pod", "namespace", "container"] {
            assert_eq!(
                labels.get(key).map(String::as_str),
                c[key].as_str(),
                "PID {pid} label {key}"
            );
        }
    }
}

#[test]
fn snapshot_json_shows_each_process_pod_and_null_outside_containers() {
    let f = fixture(STEM);
    let v = cli::json(&mut cli::command(&[
        "snapshot",
        "--json",
        "--frame",
        "4",
        "--fixture",
        &f,
    ]));
    let fx = fixture_json(STEM);
    let mut seen = 0;
    for d in v["devices"].as_array().unwrap() {
        for p in d["processes"].as_array().unwrap() {
            let c = &fx["host"]["processes"][p["pid"].to_string()]["container"];
            for (json, fixture) in [
                ("pod", "pod"),
                ("namespace", "namespace"),
                ("container", "container"),
                ("container_id", "id"),
                ("container_runtime", "runtime"),
                ("pod_uid", "pod_uid"),
                ("qos_class", "qos_class"),
            ] {
                // A process outside any container: null, never a guess.
                let want = if c.is_null() {
                    &Value::Null
                } else {
                    &c[fixture]
                };
                assert_eq!(&p[json], want, "PID {} {json}", p["pid"]);
            }
            seen += 1;
        }
    }
    // Processes on a MIG device are listed there, not also on its GPU.
    assert_eq!(seen, 6);
}

#[test]
fn info_json_shows_the_same_pods_as_snapshot_json() {
    let json = |args: &[&str]| -> Value {
        cli::json(cli::command(args).args(["--json", "--frame", "4", "--fixture", &fixture(STEM)]))
    };
    let info = json(&["info", "0"]);
    let snapshot = json(&["snapshot"]);
    let procs = info["devices"][0]["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 4, "four processes time-slice GPU 0");
    assert_eq!(
        info["devices"][0]["processes"],
        snapshot["devices"][0]["processes"]
    );
    let pods: std::collections::BTreeSet<&str> =
        procs.iter().map(|p| p["pod"].as_str().unwrap()).collect();
    assert_eq!(
        pods,
        ["finetune-a-0", "finetune-b-0", "notebook-7f9c"].into()
    );
}
