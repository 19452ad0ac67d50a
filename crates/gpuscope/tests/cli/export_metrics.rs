//! `gpuscope export` end to end: the binary on a free port, scraped over HTTP, every value
//! checked against the fixture file it replays.

use crate::support::{edited_fixture, export_support};

use edited_fixture::EditedFixture;

use export_support::{fixture, fixture_json, get, Exporter, Exposition};
use serde_json::Value;

fn ok(v: &Value) -> Option<&Value> {
    v.get("ok")
}

fn ok_f64(v: &Value) -> Option<f64> {
    ok(v).and_then(Value::as_f64)
}

/// The exporter's scrape over the fixture `fixtures/<stem>.json` at `frame` with `extra`
/// options, and the fixture.
fn scrape_fixture(stem: &str, frame: &str, extra: &[&str]) -> (Exposition, Value) {
    let path = fixture(stem);
    let exp = Exporter::start(&[&["--fixture", &path, "--frame", frame][..], extra].concat());
    (exp.scrape(), fixture_json(stem))
}

/// A series (its family and labels) and the value it should have.
type Want<'a> = (&'a str, &'a [(&'a str, &'a str)], f64);

/// Checks that each series of `m` has its value.
fn assert_values(m: &Exposition, want: &[Want]) {
    for (name, labels, value) in want {
        assert_eq!(m.value(name, labels), Some(*value), "{name} {labels:?}");
    }
}

#[test]
fn every_device_of_the_8_gpu_box_matches_its_fixture_frame() {
    let frame = 5;
    let (m, fx) = scrape_fixture("h100-sxm-8gpu", "5", &[]);
    let host = fx["host"]["hostname"].as_str().unwrap();
    let devices = fx["devices"].as_object().unwrap();
    assert_eq!(m.find("gpuscope_device_up", &[]).len(), devices.len());
    for (index, st) in devices {
        let dy = &fx["frames"][frame]["devices"][index];
        let l = [("hostname", host), ("index", index.as_str())];
        let up = m.find("gpuscope_device_up", &l);
        assert_eq!(up.len(), 1, "GPU {index}");
        assert_eq!(up[0].value, 1.0);
        assert_eq!(
            up[0].labels["uuid"],
            ok(&st["uuid"]).unwrap().as_str().unwrap()
        );
        assert_eq!(
            up[0].labels["name"],
            ok(&st["name"]).unwrap().as_str().unwrap()
        );
        let mem = ok(&dy["memory_info"]).unwrap();
        let check = |name: &str, want: Option<f64>| {
            assert_eq!(m.value(name, &l), want, "{name} of GPU {index}");
        };
        check("gpuscope_device_memory_used_bytes", mem["used"].as_f64());
        check("gpuscope_device_memory_free_bytes", mem["free"].as_f64());
        check("gpuscope_device_memory_total_bytes", mem["total"].as_f64());
        let util = ok(&dy["utilization_rates"]).unwrap();
        check(
            "gpuscope_device_utilization_ratio",
            util["gpu"].as_f64().map(|p| p / 100.0),
        );
        check(
            "gpuscope_device_memory_bandwidth_utilization_ratio",
            util["memory"].as_f64().map(|p| p / 100.0),
        );
        check(
            "gpuscope_device_temperature_celsius",
            ok_f64(&dy["temperature"]),
        );
        check(
            "gpuscope_device_power_usage_watts",
            ok_f64(&dy["power_usage"]).map(|mw| mw / 1000.0),
        );
        check(
            "gpuscope_device_power_limit_watts",
            ok_f64(&st["power_management_limit"]).map(|mw| mw / 1000.0),
        );
        check(
            "gpuscope_device_pcie_receive_bytes_per_second",
            ok_f64(&dy["pcie_rx_throughput"]).map(|k| k * 1024.0),
        );
        check(
            "gpuscope_device_energy_consumption_joules_total",
            ok_f64(&dy["total_energy_consumption"]).map(|mj| mj / 1000.0),
        );
        // SXM boards have no fans: N/A is left out, not published as 0.
        assert!(dy["fan_speed"].get("err").is_some());
        check("gpuscope_device_fan_speed_ratio", None);
        let sm = [("index", index.as_str()), ("clock", "sm")];
        assert_eq!(
            m.value("gpuscope_device_clock_hertz", &sm),
            ok_f64(&dy["clocks"]["sm"]).map(|mhz| mhz * 1e6)
        );
        // NVLink traffic summed over the device's links (per link with --nvlink-per-link).
        let links = dy["nvlink_throughput"].as_array().unwrap();
        assert!(!links.is_empty());
        let tx_kib: f64 = links
            .iter()
            .filter_map(|c| ok(c).and_then(|c| c["tx_kib"].as_f64()))
            .sum();
        assert_eq!(
            m.value(
                "gpuscope_device_nvlink_transmit_bytes_total",
                &[("index", index.as_str())]
            ),
            Some(tx_kib * 1024.0),
            "GPU {index}"
        );
    }
    let host_frame = &fx["frames"][frame]["host"];
    assert_eq!(
        m.value("gpuscope_host_memory_used_bytes", &[("hostname", host)]),
        host_frame["memory_used"].as_f64()
    );
    assert_eq!(
        m.value("gpuscope_host_load1", &[]),
        host_frame["load_average"][0].as_f64()
    );
    // No process families unless asked.
    assert!(m.find("gpuscope_process_gpu_memory_bytes", &[]).is_empty());
    assert_eq!(
        m.types["gpuscope_device_nvlink_transmit_bytes_total"],
        "counter"
    );
    assert_eq!(m.types["gpuscope_device_memory_used_bytes"], "gauge");
}

#[test]
fn processes_are_published_with_pid_and_user_and_no_command_by_default() {
    let frame = 5;
    let (m, fx) = scrape_fixture("h100-sxm-8gpu", "5", &["--processes"]);
    let mut expected = 0;
    for (index, dy) in fx["frames"][frame]["devices"].as_object().unwrap() {
        for p in ok(&dy["compute_processes"]).unwrap().as_array().unwrap() {
            expected += 1;
            let pid = p["pid"].to_string();
            let l = [("index", index.as_str()), ("pid", pid.as_str())];
            let found = m.find("gpuscope_process_gpu_memory_bytes", &l);
            assert_eq!(found.len(), 1, "pid {pid} on GPU {index}");
            assert_eq!(Some(found[0].value), p["used_gpu_memory"].as_f64());
            let user = fx["host"]["processes"][&pid]["user"].as_str().unwrap();
            assert_eq!(found[0].labels["username"], user);
            assert!(!found[0].labels.contains_key("command"));
            let rss = fx["frames"][frame]["host"]["processes"][&pid]["rss"].as_f64();
            assert_eq!(m.value("gpuscope_process_resident_memory_bytes", &l), rss);
        }
    }
    assert_eq!(expected, 64);
    assert_eq!(
        m.find("gpuscope_process_gpu_memory_bytes", &[]).len(),
        expected
    );
    assert!(!m.samples.iter().any(|s| s.labels.contains_key("command")));
}

#[test]
fn process_command_label_is_there_only_when_asked() {
    let (m, fx) = scrape_fixture("h100-sxm-8gpu", "5", &["--processes", "--process-command"]);
    let samples = m.find("gpuscope_process_gpu_memory_bytes", &[]);
    assert_eq!(samples.len(), 64);
    for s in samples {
        let pid = &s.labels["pid"];
        let cmdline: Vec<&str> = fx["host"]["processes"][pid]["cmdline"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        let command = &s.labels["command"];
        assert!(
            command.starts_with(cmdline[0]) && cmdline.iter().all(|a| command.contains(a)),
            "pid {pid}: {command:?} vs {cmdline:?}"
        );
    }
}

#[test]
fn mig_devices_carry_parent_and_instance_ids() {
    let (m, fx) = scrape_fixture("h100-mig", "3", &[]);
    let mut migs = 0;
    for (index, st) in fx["devices"].as_object().unwrap() {
        let up = m.find("gpuscope_device_up", &[("index", index.as_str())]);
        assert_eq!(up.len(), 1, "device {index}");
        let labels = &up[0].labels;
        match index.split_once(':') {
            Some((parent, _)) => {
                migs += 1;
                assert_eq!(labels["parent_index"], parent);
                assert_eq!(
                    labels["gpu_instance_id"],
                    ok(&st["gpu_instance_id"]).unwrap().to_string()
                );
                assert_eq!(
                    labels["compute_instance_id"],
                    ok(&st["compute_instance_id"]).unwrap().to_string()
                );
                let used = ok(&fx["frames"][3]["devices"][index]["memory_info"])
                    .and_then(|m| m["used"].as_f64());
                assert_eq!(
                    m.value(
                        "gpuscope_device_memory_used_bytes",
                        &[("index", index.as_str())]
                    ),
                    used
                );
            }
            None => assert!(!labels.contains_key("parent_index")),
        }
    }
    assert_eq!(migs, 4);
}

#[test]
fn a_lost_gpu_is_down_and_the_others_still_answer() {
    let frame = 20;
    let (m, fx) = scrape_fixture("gpu-lost", "20", &[]);
    let mut lost = 0;
    for (index, dy) in fx["frames"][frame]["devices"].as_object().unwrap() {
        let l = [("index", index.as_str())];
        let is_lost = dy["memory_info"]["err"] == "gpu_lost";
        let up = m.value("gpuscope_device_up", &l);
        if is_lost {
            lost += 1;
            assert_eq!(up, Some(0.0), "GPU {index}");
            assert!(m.value("gpuscope_device_failed_fields", &l).unwrap() > 0.0);
            assert_eq!(m.value("gpuscope_device_memory_used_bytes", &l), None);
            assert_eq!(m.value("gpuscope_device_temperature_celsius", &l), None);
        } else {
            assert_eq!(up, Some(1.0), "GPU {index}");
            assert_eq!(m.value("gpuscope_device_failed_fields", &l), Some(0.0));
            assert_eq!(
                m.value("gpuscope_device_memory_used_bytes", &l),
                ok(&dy["memory_info"]).and_then(|m| m["used"].as_f64())
            );
        }
    }
    assert_eq!(lost, 1);
}

#[test]
fn hostname_comes_from_the_fixture_or_the_flag() {
    let fx = fixture_json("geforce-desktop");
    let recorded = fx["host"]["hostname"].as_str().unwrap();
    let exp = Exporter::start(&["--fixture", &fixture("geforce-desktop"), "--frame", "0"]);
    let m = exp.scrape();
    assert!(!m.samples.is_empty());
    assert!(m.samples.iter().all(|s| s.labels["hostname"] == recorded));
    // A desktop board has fans: its fan speed is published.
    let fan = ok_f64(&fx["frames"][0]["devices"]["0"]["fan_speed"]).unwrap();
    assert_eq!(
        m.value("gpuscope_device_fan_speed_ratio", &[("index", "0")]),
        Some(fan / 100.0)
    );
    drop(exp);

    let exp = Exporter::start(&[
        "--fixture",
        &fixture("geforce-desktop"),
        "--hostname",
        "node-b",
    ]);
    let m = exp.scrape();
    assert!(m.samples.iter().all(|s| s.labels["hostname"] == "node-b"));
}

#[test]
fn openmetrics_is_served_to_those_who_ask_with_the_same_samples() {
    let exp = Exporter::start(&["--demo", "--frame", "2", "--processes"]);
    let text = exp.get("/metrics");
    assert_eq!(
        text.headers["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let om = get(
        &exp.addr,
        "/metrics",
        Some("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"),
    );
    assert!(om.headers["content-type"].starts_with("application/openmetrics-text"));
    assert!(om.body.ends_with("# EOF\n"));
    let samples = |body: &str| -> Vec<String> {
        let mut v: Vec<String> = body
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            // The timestamp of the sample may differ between two scrapes; values are compared
            // as numbers, since OpenMetrics writes `12.0` where the text format writes `12`.
            .filter(|l| !l.starts_with("gpuscope_exporter_"))
            .map(|l| {
                let (series, value) = l.rsplit_once(' ').unwrap();
                format!("{series} {}", value.parse::<f64>().unwrap())
            })
            .collect();
        v.sort();
        v
    };
    assert_eq!(samples(&text.body), samples(&om.body));
    assert!(om
        .body
        .contains("# UNIT gpuscope_device_memory_used_bytes bytes\n"));
}

#[test]
fn samples_follow_the_replay_when_no_frame_is_pinned() {
    let exp = Exporter::start(&["--demo", "--interval", "100ms"]);
    let first = exp
        .scrape()
        .value("gpuscope_exporter_sample_timestamp_seconds", &[])
        .unwrap();
    let mut later = first;
    for _ in 0..50 {
        std::thread::sleep(std::time::Duration::from_millis(50));
        later = exp
            .scrape()
            .value("gpuscope_exporter_sample_timestamp_seconds", &[])
            .unwrap();
        if later > first {
            break;
        }
    }
    assert!(later > first, "the sampler did not take a new sample");
}

#[test]
fn the_root_page_links_to_metrics_and_other_paths_are_404() {
    let exp = Exporter::start(&["--demo", "--frame", "0"]);
    let root = exp.get("/");
    assert_eq!(root.status, 200);
    assert!(root.body.contains("href=\"/metrics\""));
    assert_eq!(exp.get("/nope").status, 404);
    assert_eq!(exp.get("/metrics?x=1").status, 200);
}

#[test]
fn bad_flags_are_usage_errors() {
    for (args, what) in [
        (
            &["--listen", "localhost"][..],
            "--listen \"localhost\" has no port",
        ),
        (
            &["--listen", "bad host:1"][..],
            "neither an IP address nor a host name",
        ),
        (&["--interval", "soon"][..], "--interval"),
        (&["--interval", "1ms"][..], "--interval"),
        // Regression: an interval so long that the sampler's next deadline overflowed killed
        // the sampler thread while /metrics went on serving its first sample.
        (&["--interval", "200000years"][..], "--interval"),
        (&["--interval", "25h"][..], "--interval"),
        (&["--hostname", ""][..], "--hostname"),
        (&["--process-command"][..], "--processes"),
        (&["--names", "dcgm,prometheus"][..], "\"prometheus\""),
        (&["--names", ""][..], "--names"),
        (&["--names", "dcgm,,gpuscope"][..], "an empty name"),
        (&["--names", "dcgm,dcgm"][..], "dcgm is named twice"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_gpuscope"))
            .args(["export", "--demo"])
            .args(args)
            .output()
            .unwrap();
        export_support::cli::assert_usage_error(&out, args, what);
    }
}

/// Metric names (`gpuscope_...`) in a text.
fn metric_names(text: &str) -> std::collections::BTreeSet<String> {
    let mut names = std::collections::BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("gpuscope_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        names.insert(tail[..end].to_string());
        rest = &tail[end..];
    }
    names
}

#[test]
fn every_published_family_is_documented_and_the_dashboard_uses_only_published_ones() {
    // Between them these publish every family: NVLink and processes on the H100 box, fans on
    // the desktop.
    let mut published = std::collections::BTreeSet::new();
    for args in [
        &["--demo", "--frame", "3", "--processes"][..],
        &["--fixture", &fixture("geforce-desktop"), "--frame", "3"][..],
    ] {
        let exp = Exporter::start(args);
        published.extend(exp.scrape().types.into_keys());
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let doc = std::fs::read_to_string(root.join("docs/exporter.md")).unwrap();
    let documented = metric_names(&doc);
    let undocumented: Vec<_> = published.difference(&documented).collect();
    assert!(
        undocumented.is_empty(),
        "not in docs/exporter.md: {undocumented:?}"
    );

    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("docs/grafana-dashboard.json")).unwrap(),
    )
    .expect("the dashboard is JSON");
    let mut exprs = String::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            exprs.push_str(target["expr"].as_str().unwrap());
            exprs.push('\n');
        }
    }
    let used = metric_names(&exprs);
    assert!(used.len() >= 15, "{used:?}");
    let unknown: Vec<_> = used.difference(&published).collect();
    assert!(
        unknown.is_empty(),
        "the dashboard uses unpublished {unknown:?}"
    );
}

#[test]
fn the_info_series_carries_each_devices_identity_from_the_fixture() {
    let (m, fx) = scrape_fixture("h100-sxm-8gpu", "5", &[]);
    let driver = ok(&fx["system"]["driver_version"])
        .unwrap()
        .as_str()
        .unwrap();
    let devices = fx["devices"].as_object().unwrap();
    assert_eq!(m.find("gpuscope_device_info", &[]).len(), devices.len());
    for (index, st) in devices {
        let info = m.find("gpuscope_device_info", &[("index", index.as_str())]);
        assert_eq!(info.len(), 1, "GPU {index}");
        assert_eq!(info[0].value, 1.0);
        let l = &info[0].labels;
        let want = |key: &str| ok(&st[key]).unwrap().as_str().unwrap().to_string();
        assert_eq!(l["uuid"], want("uuid"));
        assert_eq!(l["serial"], want("serial"));
        assert_eq!(l["vbios_version"], want("vbios_version"));
        assert_eq!(l["board_part_number"], want("board_part_number"));
        assert_eq!(
            l["bus_id"],
            ok(&st["pci_info"]).unwrap()["bus_id"].as_str().unwrap()
        );
        assert_eq!(l["driver_version"], driver);
        assert_eq!(l["cuda_driver_version"], "13.1");
        // P-state from the frame: P0 is 0.
        assert_eq!(
            m.value(
                "gpuscope_device_performance_state",
                &[("index", index.as_str())]
            ),
            ok_f64(&fx["frames"][5]["devices"][index]["performance_state"])
        );
    }
    // SXM boards have no fans: no per-fan series either.
    assert!(m
        .find("gpuscope_device_fan_speed_per_fan_ratio", &[])
        .is_empty());
}

#[test]
fn a_desktop_board_publishes_each_fan_and_leaves_its_missing_serial_out() {
    let (m, fx) = scrape_fixture("geforce-desktop", "3", &[]);
    for (index, st) in fx["devices"].as_object().unwrap() {
        let dy = &fx["frames"][3]["devices"][index];
        let fans = dy["fan_speeds"].as_array().unwrap();
        assert!(!fans.is_empty());
        for (fan, speed) in fans.iter().enumerate() {
            let fan = fan.to_string();
            assert_eq!(
                m.value(
                    "gpuscope_device_fan_speed_per_fan_ratio",
                    &[("index", index.as_str()), ("fan", fan.as_str())]
                ),
                ok_f64(speed).map(|p| p / 100.0),
                "fan {fan} of GPU {index}"
            );
        }
        let info = m.find("gpuscope_device_info", &[("index", index.as_str())]);
        assert_eq!(info.len(), 1);
        // N/A identity (a GeForce has no serial) is left out, not published empty.
        assert!(st["serial"].get("err").is_some());
        assert!(!info[0].labels.contains_key("serial"), "{info:?}");
        assert_eq!(
            info[0].labels["vbios_version"],
            ok(&st["vbios_version"]).unwrap().as_str().unwrap()
        );
    }
}

/// Issue 13: the exporter publishes GPM activity for the whole GPU and each MIG instance, and
/// the remaining health values, with the fixture's values; a device without GPM publishes no
/// GPM series.
#[test]
fn gpm_activity_and_health_series_match_the_fixture() {
    let frame = 12;
    let (m, fx) = scrape_fixture("h100-mig", "12", &[]);
    for (index, dy) in fx["frames"][frame]["devices"].as_object().unwrap() {
        let l = [("index", index.as_str())];
        let gpm = ok(&dy["gpm_metrics"]).expect("GPM recorded");
        let ratio = |k: &str| gpm[k].as_f64().map(|p| p / 100.0);
        let close = |name: &str, with: &[(&str, &str)], want: Option<f64>| {
            let got = m.value(name, with);
            match (got, want) {
                (Some(g), Some(w)) => assert!((g - w).abs() < 1e-9, "{name} {with:?}: {g} vs {w}"),
                _ => assert_eq!(got, want, "{name} {with:?}"),
            }
        };
        close(
            "gpuscope_device_gpm_sm_active_ratio",
            &l,
            ratio("sm_activity"),
        );
        close(
            "gpuscope_device_gpm_sm_occupancy_ratio",
            &l,
            ratio("sm_occupancy"),
        );
        close(
            "gpuscope_device_gpm_dram_active_ratio",
            &l,
            ratio("dram_activity"),
        );
        close(
            "gpuscope_device_gpm_pipe_active_ratio",
            &[("index", index.as_str()), ("pipe", "tensor")],
            ratio("tensor_activity"),
        );
        close(
            "gpuscope_device_gpm_pcie_transmit_bytes_per_second",
            &l,
            gpm["pcie_tx"].as_f64().map(|r| r * 1024.0 * 1024.0),
        );
        close(
            "gpuscope_device_gpm_engine_active_ratio",
            &[
                ("index", index.as_str()),
                ("engine", "nvdec"),
                ("engine_index", "0"),
            ],
            ratio("nvdec0_activity"),
        );
        // No NVLink inside a MIG instance: the series is absent, not 0.
        assert!(gpm.get("nvlink_tx").is_none());
        assert!(m
            .find("gpuscope_device_gpm_nvlink_transmit_bytes_per_second", &l)
            .is_empty());
    }
    let whole = &fx["frames"][frame]["devices"]["0"];
    assert_eq!(
        m.value(
            "gpuscope_device_memory_temperature_celsius",
            &[("index", "0")]
        ),
        ok_f64(&whole["memory_temperature"])
    );
    assert_eq!(
        m.value(
            "gpuscope_device_ecc_errors_by_location",
            &[
                ("index", "0"),
                ("location", "sram"),
                ("counter", "aggregate"),
                ("kind", "uncorrected")
            ]
        ),
        ok(&whole["ecc_sram"]).and_then(|c| c["aggregate_uncorrected"].as_f64())
    );

    // The 8-GPU box: NVLink counters per link with --nvlink-per-link, summed over each
    // device's links by default; an old driver has no GPM.
    let args = ["--fixture", &fixture("h100-sxm-8gpu"), "--frame", "24"];
    let per_link = Exporter::start(&[&args[..], &["--nvlink-per-link"]].concat()).scrape();
    assert_eq!(
        per_link.value(
            "gpuscope_device_nvlink_errors_total",
            &[("index", "2"), ("link", "7"), ("counter", "replay")]
        ),
        Some(6.0)
    );
    assert_eq!(
        per_link
            .find(
                "gpuscope_device_nvlink_errors_total",
                &[("counter", "replay")]
            )
            .len(),
        8 * 18
    );
    let totals = Exporter::start(&args).scrape();
    for family in [
        "gpuscope_device_nvlink_errors_total",
        "gpuscope_device_nvlink_transmit_bytes_total",
        "gpuscope_device_nvlink_receive_bytes_total",
    ] {
        let summed = totals.find(family, &[]);
        assert!(
            summed.iter().all(|s| !s.labels.contains_key("link")),
            "{family}: no link label by default"
        );
        // One series per device (and per counter for the errors).
        let per_device = if family.contains("errors") { 8 * 4 } else { 8 };
        assert_eq!(summed.len(), per_device, "{family}");
        for s in summed {
            let with: Vec<(&str, &str)> = s
                .labels
                .iter()
                .filter(|(k, _)| *k != "hostname")
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            let links: f64 = per_link.find(family, &with).iter().map(|l| l.value).sum();
            assert_eq!(s.value, links, "{family} {with:?}: the sum of its links");
        }
    }
    assert_eq!(
        totals.value(
            "gpuscope_device_nvlink_errors_total",
            &[("index", "2"), ("counter", "replay")]
        ),
        Some(6.0),
        "GPU 2's replays are all on link 7"
    );
    let exp = Exporter::start(&["--fixture", &fixture("old-driver"), "--frame", "3"]);
    let m = exp.scrape();
    assert!(m
        .find("gpuscope_device_gpm_sm_active_ratio", &[])
        .is_empty());
    assert!(m
        .value("gpuscope_device_temperature_celsius", &[])
        .is_some());
}

/// The health families over the 8-GPU recording at frame 25: GPU 2's XID 79 (frame 14) as the
/// last XID and per code, GPU 5's XID 63 and pending row remap, GPU 3's HW slowdown, every
/// other GPU at 0; the reasons for attention as `top` and `select --healthy` see them. The same
/// recording before the XID (frame 13) has GPU 2's last XID at 0.
#[test]
fn health_families_publish_the_xids_remaps_and_throttling_of_the_8_gpu_box() {
    let exp = Exporter::start(&["--fixture", &fixture("h100-sxm-8gpu"), "--frame", "25"]);
    let m = exp.scrape();
    let gpu = |i: &'static str| [("index", i)];
    for (index, last, attention) in [
        ("0", 0.0, 0.0),
        ("1", 0.0, 0.0),
        ("2", 79.0, 1.0),
        ("3", 0.0, 1.0),
        ("4", 0.0, 0.0),
        ("5", 63.0, 2.0),
        ("6", 0.0, 0.0),
        ("7", 0.0, 0.0),
    ] {
        assert_eq!(
            m.value("gpuscope_device_last_xid", &gpu(index)),
            Some(last),
            "GPU {index}"
        );
        assert_eq!(
            m.value("gpuscope_device_needs_attention", &gpu(index)),
            Some(attention),
            "GPU {index}"
        );
    }
    assert_eq!(
        m.value(
            "gpuscope_device_xid_errors",
            &[("index", "2"), ("xid", "79")]
        ),
        Some(1.0)
    );
    assert_eq!(m.find("gpuscope_device_xid_errors", &[]).len(), 2);
    assert_values(
        &m,
        &[
            (
                "gpuscope_device_attention_reason",
                &[("index", "2"), ("reason", "xid_79")],
                1.0,
            ),
            (
                "gpuscope_device_clock_event_reason",
                &[("index", "3"), ("reason", "hw_slowdown")],
                1.0,
            ),
            (
                "gpuscope_device_clock_event_reason",
                &[("index", "4"), ("reason", "hw_slowdown")],
                0.0,
            ),
            ("gpuscope_device_row_remap_pending", &gpu("5"), 1.0),
            (
                "gpuscope_device_remapped_rows",
                &[("index", "5"), ("cause", "uncorrectable")],
                1.0,
            ),
            (
                "gpuscope_device_ecc_errors_total",
                &[
                    ("index", "0"),
                    ("error", "uncorrected"),
                    ("counter", "volatile"),
                ],
                0.0,
            ),
            ("gpuscope_device_pcie_replays_total", &gpu("0"), 0.0),
            (
                "gpuscope_device_temperature_threshold_celsius",
                &[("index", "0"), ("threshold", "slowdown")],
                89.0,
            ),
            ("gpuscope_device_power_min_limit_watts", &gpu("0"), 200.0),
        ],
    );
    // An H100 remaps rows instead of retiring pages: no retired-page series, not 0.
    assert!(m.find("gpuscope_device_retired_pages", &[]).is_empty());
    assert_eq!(m.types["gpuscope_device_ecc_errors_total"], "counter");
    assert_eq!(m.types["gpuscope_device_last_xid"], "gauge");

    let before = Exporter::start(&["--fixture", &fixture("h100-sxm-8gpu"), "--frame", "13"]);
    assert_eq!(
        before.scrape().value("gpuscope_device_last_xid", &gpu("2")),
        Some(0.0)
    );
}

/// Retired pages (a Turing-era board: the old-driver scenario's GPU 0, given two single-bit
/// retirements, one pending, and a double-bit one) are published per cause with the pending
/// flag; its event listener saw no XID (0), and a board whose events cannot be known
/// (Windows) has no XID series at all.
#[test]
fn retired_pages_are_published_per_cause_with_the_pending_flag() {
    let edited = EditedFixture::new("old-driver", "retired", |fx| {
        for frame in fx["frames"].as_array_mut().unwrap() {
            let d = &mut frame["devices"]["0"];
            d["retired_pages_single_bit"] = serde_json::json!({"ok": [4096, 8192]});
            d["retired_pages_double_bit"] = serde_json::json!({"ok": [12288]});
            d["retired_pages_pending"] = serde_json::json!({"ok": true});
        }
    });
    let exp = Exporter::start(&["--fixture", &edited.path(), "--frame", "1"]);
    let m = exp.scrape();
    let l = |cause: &'static str| [("index", "0"), ("cause", cause)];
    assert_values(
        &m,
        &[
            ("gpuscope_device_retired_pages", &l("single_bit"), 2.0),
            ("gpuscope_device_retired_pages", &l("double_bit"), 1.0),
            (
                "gpuscope_device_retired_pages_pending",
                &[("index", "0")],
                1.0,
            ),
            (
                "gpuscope_device_attention_reason",
                &[("index", "0"), ("reason", "retired_page_pending")],
                1.0,
            ),
            ("gpuscope_device_last_xid", &[("index", "0")], 0.0),
        ],
    );
    let wddm = Exporter::start(&["--fixture", &fixture("windows-wddm"), "--frame", "1"]);
    assert!(wddm
        .scrape()
        .find("gpuscope_device_last_xid", &[])
        .is_empty());
}

/// Regression: on real H100s a process sampled less often than another had no SM figure. The
/// exporter over the real recording at frame 26, where PID 541's newest sample has stood still
/// for seconds beside PID 512's: both have their own newest sample's share, and the age of
/// that sample, measured to the frame's recorded time.
#[test]
fn a_process_sampled_less_often_keeps_its_sm_share_with_its_sample_age() {
    let frame = 26;
    let (m, fx) = scrape_fixture("h100-real", "26", &["--processes", "--interval", "1h"]);
    let recorded_at = humantime::parse_rfc3339(fx["meta"]["recorded_at"].as_str().unwrap())
        .unwrap()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let now_ms = recorded_at + fx["frames"][frame]["t_ms"].as_u64().unwrap();
    let samples = fx["frames"][frame]["devices"]["0"]["process_utilization"]["ok"]
        .as_array()
        .unwrap();
    let mut ages = Vec::new();
    for pid in [512, 541] {
        let s = samples
            .iter()
            .filter(|s| s["pid"] == pid)
            .max_by_key(|s| s["timestamp_us"].as_u64())
            .unwrap();
        let pid = pid.to_string();
        let l = [("index", "0"), ("pid", pid.as_str())];
        let sm = s["sm"].as_f64().unwrap() / 100.0;
        assert_eq!(
            m.value("gpuscope_process_gpu_sm_utilization_ratio", &l),
            Some(sm),
            "pid {pid}"
        );
        let age_ms = now_ms.saturating_sub(s["timestamp_us"].as_u64().unwrap() / 1000);
        assert_eq!(
            m.value("gpuscope_process_gpu_utilization_sample_age_seconds", &l),
            Some(age_ms as f64 / 1000.0),
            "pid {pid}"
        );
        ages.push(age_ms);
    }
    assert!(ages[1] > 5000, "PID 541's sample stood still: {ages:?}");
}

/// `--listen :PORT` serves every IPv4 address; `--listen HOST:PORT` resolves the name. Each is
/// read from the exporter's own "listening on" line, then the exporter is stopped.
#[test]
fn listen_takes_a_bare_port_and_a_host_name() {
    use std::io::{BufRead, BufReader};
    for (listen, host) in [(":0", "0.0.0.0:"), ("localhost:0", "127.0.0.1:")] {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_gpuscope"))
            .args(["export", "--demo", "--listen", listen])
            .env_remove("GPUSCOPE_FIXTURE")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let line = BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .find(|l| l.contains("listening on"));
        let _ = child.kill();
        let _ = child.wait();
        let line = line.unwrap_or_else(|| panic!("{listen}: no listening line"));
        // localhost may resolve to IPv6 only on some hosts; then its address is [::1].
        assert!(
            line.contains(&format!("http://{host}"))
                || (listen.starts_with("localhost") && line.contains("http://[::1]:")),
            "{listen}: {line}"
        );
    }
}

/// Issue 35: `--names` chooses the names the exporter publishes under (gpuscope's,
/// dcgm-exporter's, nvidia_gpu_exporter's); several at once publish the one sample under each,
/// in the text format and in OpenMetrics (where dcgm-exporter's counters keep their names, as
/// `unknown`); `GPUSCOPE_EXPORT_NAMES` chooses when the option is not given.
#[test]
fn names_choose_the_doors_and_several_publish_each() {
    let exp = Exporter::start(&[
        "--demo",
        "--frame",
        "20",
        "--names",
        "gpuscope,dcgm,nvidia-smi",
    ]);
    let m = exp.scrape();
    for name in [
        "gpuscope_device_up",
        "DCGM_FI_DEV_GPU_UTIL",
        "nvidia_smi_gpu_info",
        "nvidia_smi_utilization_gpu_ratio",
    ] {
        assert_eq!(m.find(name, &[]).len(), 8, "{name}");
    }
    assert_eq!(m.types["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"], "counter");
    assert_eq!(m.types["nvidia_smi_energy_joules_total"], "counter");
    // One sample: the same reading under each name.
    let ours = m.value("gpuscope_device_utilization_ratio", &[("index", "4")]);
    let dcgm = m.value("DCGM_FI_DEV_GPU_UTIL", &[("gpu", "4")]);
    assert_eq!(ours.map(|r| (r * 100.0).round()), dcgm);
    let om = get(
        &exp.addr,
        "/metrics",
        Some("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"),
    );
    assert!(om
        .body
        .contains("# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION unknown\n"));
    assert!(om
        .body
        .contains("# TYPE nvidia_smi_energy_joules counter\n"));
    let door_lines = |body: &str| -> Vec<String> {
        let mut v: Vec<String> = body
            .lines()
            .filter(|l| l.starts_with("DCGM_") || l.starts_with("nvidia_smi_gpu_info"))
            .map(|l| {
                let (series, value) = l.rsplit_once(' ').unwrap();
                format!("{series} {}", value.parse::<f64>().unwrap())
            })
            .collect();
        v.sort();
        v
    };
    let text = exp.get("/metrics").body;
    assert!(!door_lines(&text).is_empty());
    assert_eq!(door_lines(&text), door_lines(&om.body));

    // The environment chooses when the option is not given; the option wins over it.
    let env = [("GPUSCOPE_EXPORT_NAMES", "dcgm")];
    let m = Exporter::start_with_env(&["--demo", "--frame", "20"], &env).scrape();
    assert!(m.samples.iter().all(|s| s.name.starts_with("DCGM_FI_")));
    assert_eq!(
        m.find("DCGM_FI_DEV_XID_ERRORS", &[("gpu", "2")])[0].value,
        79.0
    );
    let m = Exporter::start_with_env(&["--demo", "--frame", "20", "--names", "nvidia-smi"], &env)
        .scrape();
    assert!(m.samples.iter().all(|s| s.name.starts_with("nvidia_smi_")));
}
