//! What each command makes NVML do (issue 23), counted by fake-nvml's call log: a one-shot asks
//! everything it prints and does not wait for `nvmlShutdown`; the viewer does not ask what its
//! screens do not show; the exporter asks the costly queries every 30 s, not every interval;
//! nothing asks again what the GPU answered it does not have.

#![cfg(target_os = "linux")]

use crate::support::export_support;

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use export_support::{cli, Exporter};

/// fake-nvml installed in a temporary directory: (the directory, the library's path).
fn fake_nvml() -> (tempfile::TempDir, String) {
    let (dir, nvml) = cli::install_fake_nvml();
    let nvml = nvml.to_str().expect("a UTF-8 path").to_string();
    (dir, nvml)
}

/// Calls served per NVML function (versions as one), from fake-nvml's call log: nothing yet
/// when there is no log yet.
fn served(log: &Path) -> HashMap<String, (usize, usize)> {
    cli::served_calls(&std::fs::read_to_string(log).unwrap_or_default())
}

fn count(calls: &HashMap<String, (usize, usize)>, function: &str) -> usize {
    calls.get(function).map_or(0, |&(served, _)| served)
}

/// Checks that `what` asked each of the device getters `nvmlDeviceGet{getter}` `times` times,
/// naming the function if not.
fn assert_asked(
    calls: &HashMap<String, (usize, usize)>,
    getters: &[&str],
    times: usize,
    what: &str,
) {
    for getter in getters {
        let f = format!("nvmlDeviceGet{getter}");
        assert_eq!(count(calls, &f), times, "{what} asks {f}: {calls:?}");
    }
}

/// Runs `args` over the real H100 recording at a frame where two jobs are on the GPU, with
/// fake-nvml's call log; the calls it served.
fn one_shot(args: &[&str]) -> HashMap<String, (usize, usize)> {
    let (dir, nvml) = fake_nvml();
    let log = dir.path().join("served.log");
    let mut all = args.to_vec();
    all.extend(["--nvml-lib", &nvml]);
    let out = cli::command(&all)
        .env(fake_nvml::FIXTURE_ENV, export_support::fixture("h100-real"))
        .env(fake_nvml::FRAME_ENV, "30")
        .env(fake_nvml::CALL_LOG_ENV, &log)
        .output()
        .expect("gpuscope runs");
    cli::assert_ok(&out, args);
    served(&log)
}

#[test]
fn a_one_shot_asks_everything_it_prints_once_and_does_not_wait_for_nvml_shutdown() {
    let calls = one_shot(&["snapshot", "--json"]);
    // Its document shows GPM's PCIe traffic, not NVML's 20 ms sample, nor BAR1 (`smi -q`
    // shows those, and asks them: smi_asks_only_what_its_output_shows).
    assert_eq!(count(&calls, "nvmlDeviceGetPcieThroughput"), 0);
    assert_eq!(count(&calls, "nvmlDeviceGetBAR1MemoryInfo"), 0);
    assert_eq!(count(&calls, "nvmlDeviceGetTotalEnergyConsumption"), 1);
    // One call each: a list is first asked for with a buffer it fits in, not sized first.
    assert_eq!(count(&calls, "nvmlDeviceGetProcessUtilization"), 1);
    assert_eq!(count(&calls, "nvmlDeviceGetComputeRunningProcesses"), 1);
    assert_eq!(count(&calls, "nvmlDeviceGetMemoryInfo"), 1);
    assert_eq!(count(&calls, "nvmlInit"), 1);
    assert_eq!(
        count(&calls, "nvmlShutdown"),
        0,
        "the process exits without waiting for NVML to shut down"
    );
}

/// `gpuscope smi`: `-L` asks no changing query, `--query-gpu` not the dear ones no field
/// shows (PCIe throughput, energy, per-process utilization), `-q` everything it prints.
#[test]
fn smi_asks_only_what_its_output_shows() {
    let list = one_shot(&["smi", "-L"]);
    let unasked = ["MemoryInfo", "PcieThroughput", "UtilizationRates"];
    assert_asked(&list, &unasked, 0, "-L");
    assert!(count(&list, "nvmlDeviceGetUUID") >= 1);
    let csv = one_shot(&[
        "smi",
        "--query-gpu=index,memory.used,utilization.gpu",
        "--format=csv",
    ]);
    assert_eq!(count(&csv, "nvmlDeviceGetMemoryInfo"), 1);
    assert_eq!(count(&csv, "nvmlDeviceGetUtilizationRates"), 1);
    let unasked = [
        "PcieThroughput",
        "TotalEnergyConsumption",
        "ProcessUtilization",
    ];
    assert_asked(&csv, &unasked, 0, "--query-gpu");
    let q = one_shot(&["smi", "-q"]);
    // -q prints TX and RX.
    assert_asked(&q, &["PcieThroughput"], 2, "-q");
}

#[test]
fn the_viewer_does_not_ask_what_its_screens_do_not_show() {
    let calls = one_shot(&["top", "--once"]);
    let hidden = [
        "PcieThroughput",
        "TotalEnergyConsumption",
        "BAR1MemoryInfo",
        "PcieReplayCounter",
    ];
    assert_asked(&calls, &hidden, 0, "top --once");
    let shown = [
        "MemoryInfo",
        "UtilizationRates",
        "PowerUsage",
        "ComputeRunningProcesses",
        // Two jobs on the GPU at frame 30: their SM% comes from the samples.
        "ProcessUtilization",
    ];
    assert_asked(&calls, &shown, 1, "top --once");
}

#[test]
fn the_exporter_asks_energy_and_pcie_throughput_every_30_s_not_every_interval() {
    let (dir, nvml) = fake_nvml();
    let log = dir.path().join("served.log");
    let fixture = export_support::fixture("h100-real");
    let log_text = log.to_str().expect("UTF-8").to_string();
    let exporter = Exporter::start_with_env(
        &["--nvml-lib", &nvml, "--interval", "100ms"],
        &[
            (fake_nvml::FIXTURE_ENV, fixture.as_str()),
            (fake_nvml::FRAME_ENV, "30"),
            (fake_nvml::CALL_LOG_ENV, log_text.as_str()),
        ],
    );
    // Wait for five refreshes (one power reading each), at most 20 s.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut calls = served(&log);
    while count(&calls, "nvmlDeviceGetPowerUsage") < 5 {
        assert!(
            Instant::now() < deadline,
            "five refreshes in 20 s: {calls:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
        calls = served(&log);
    }
    let scrape = exporter.scrape();
    drop(exporter);
    let refreshes = count(&calls, "nvmlDeviceGetPowerUsage");
    assert!(refreshes >= 5);
    assert_eq!(
        count(&calls, "nvmlDeviceGetTotalEnergyConsumption"),
        1,
        "{refreshes} refreshes, energy asked at the first"
    );
    assert_eq!(
        count(&calls, "nvmlDeviceGetPcieThroughput"),
        2,
        "TX and RX, once"
    );
    for every_30_s in [
        "nvmlDeviceGetBAR1MemoryInfo",
        "nvmlDeviceGetPcieReplayCounter",
        "nvmlDeviceGetCurrPcieLinkWidth",
    ] {
        assert_eq!(count(&calls, every_30_s), 1, "{every_30_s}: {calls:?}");
    }
    // Two jobs on the GPU: their utilization every 5 s, so once in this short run.
    assert_eq!(count(&calls, "nvmlDeviceGetProcessUtilization"), 1);
    // The H100 has no fans and no NVLink: asked once, not at each refresh.
    assert_eq!(count(&calls, "nvmlDeviceGetFanSpeed"), 1);
    assert_eq!(
        count(&calls, "nvmlDeviceGetNvLinkErrorCounter"),
        18,
        "each link once"
    );
    // What the exporter exports of them: the answer asked at the first refresh.
    assert!(
        scrape
            .value("gpuscope_device_energy_consumption_joules_total", &[])
            .is_some_and(|j| j > 0.0),
        "the energy counter is exported"
    );
}

#[test]
fn info_measures_gpm_over_its_window_and_says_why_not_without_one() {
    // The real H100 through fake-nvml, a frame with its matmul job running.
    let activity = |window: &str| -> String {
        let (_dir, nvml) = fake_nvml();
        let out = cli::command(&["info", "0", "--nvml-lib", &nvml, "--gpm-window", window])
            .env(fake_nvml::FIXTURE_ENV, export_support::fixture("h100-real"))
            .env(fake_nvml::FRAME_ENV, "30")
            .output()
            .expect("gpuscope runs");
        cli::assert_ok(&out, "gpuscope");
        let text = String::from_utf8(out.stdout).expect("UTF-8");
        let at = text.find("ACTIVITY (GPM):").expect("an ACTIVITY section");
        text[at..]
            .lines()
            .nth(1)
            .expect("a line")
            .trim()
            .to_string()
    };
    let measured = activity("50ms");
    assert!(measured.starts_with("SM "), "{measured}");
    assert!(
        measured.contains("active") && measured.contains('%'),
        "{measured}"
    );
    let one_sample = activity("0");
    assert!(
        one_sample.starts_with("N/A (GPM measures activity between two samples"),
        "{one_sample}"
    );
    // Bounded: more than 5 s is a usage error.
    let out = cli::command(&["info", "--demo", "--gpm-window", "6s"])
        .output()
        .expect("gpuscope runs");
    assert_eq!(out.status.code(), Some(2));
}

/// The static facts no one-shot below prints, each of which costs a real GPU's driver up to a
/// millisecond and a half a call (issue 36).
const UNSHOWN_STATICS: [&str; 4] = [
    "MaxClockInfo",
    "DefaultApplicationsClock",
    "ComputeMode",
    "CudaComputeCapability",
];

/// Checks that `what` asked none of the device getters `nvmlDeviceGet{getter}` of `getters`,
/// and none of [`UNSHOWN_STATICS`].
fn assert_asks_none(calls: &HashMap<String, (usize, usize)>, getters: &[&str], what: &str) {
    assert_asked(calls, getters, 0, what);
    assert_asked(calls, &UNSHOWN_STATICS, 0, what);
}

/// `smi -L` prints each GPU's name and UUID: it asks those and nothing else of a device, no
/// static fact (clocks, serial, limits) and no reading (issue 36, item 2).
#[test]
fn smi_list_asks_each_gpus_name_and_uuid_and_nothing_else() {
    let calls = one_shot(&["smi", "-L"]);
    assert_asked(&calls, &["Name", "UUID"], 1, "-L");
    let unasked = [
        "Serial",
        "VbiosVersion",
        "ApplicationsClock",
        "PowerManagementLimit",
        "EnforcedPowerLimit",
        "MemoryInfo",
        "UtilizationRates",
        "Temperature",
        "ComputeRunningProcesses",
        "ProcessUtilization",
    ];
    assert_asks_none(&calls, &unasked, "-L");
}

/// `smi --query-gpu` asks its fields' queries, once each, and no other: no name, no clocks,
/// no process list (issue 36, item 2); a field that is a static fact is asked as its field
/// says.
#[test]
fn smi_query_gpu_asks_its_fields_queries_and_no_other() {
    let calls = one_shot(&[
        "smi",
        "--query-gpu=index,memory.used,utilization.gpu",
        "--format=csv",
    ]);
    assert_asked(
        &calls,
        &["MemoryInfo", "UtilizationRates"],
        1,
        "--query-gpu",
    );
    let unasked = [
        "Name",
        "Serial",
        "VbiosVersion",
        "ApplicationsClock",
        "PowerManagementLimit",
        "PowerUsage",
        "Temperature",
        "ComputeRunningProcesses",
        "PcieThroughput",
    ];
    assert_asks_none(&calls, &unasked, "--query-gpu");

    let clocks = one_shot(&[
        "smi",
        "--query-gpu=clocks.max.sm,compute_cap",
        "--format=csv",
    ]);
    assert!(
        count(&clocks, "nvmlDeviceGetMaxClockInfo") >= 1,
        "{clocks:?}"
    );
    assert_asked(
        &clocks,
        &["CudaComputeCapability"],
        1,
        "clocks.max.sm,compute_cap",
    );
    assert_asked(
        &clocks,
        &["MemoryInfo", "Name"],
        0,
        "clocks.max.sm,compute_cap",
    );
}

/// `snapshot --json` asks the static facts its document shows (serial, VBIOS, application
/// clocks, limits) once and not the others (maximum clocks, compute mode and capability: `info`
/// and `smi -q` show those); `snapshot --query` asks its fields' queries (issue 36, item 2).
#[test]
fn snapshot_asks_the_static_facts_it_shows_and_not_the_others() {
    let calls = one_shot(&["snapshot", "--json"]);
    assert_asked(
        &calls,
        &["Name", "Serial", "VbiosVersion", "EnforcedPowerLimit"],
        1,
        "snapshot --json",
    );
    assert!(
        count(&calls, "nvmlDeviceGetApplicationsClock") >= 1,
        "{calls:?}"
    );
    let unshown = ["MaxClockInfo", "ComputeMode", "CudaComputeCapability"];
    assert_asked(&calls, &unshown, 0, "snapshot --json");

    // The table shows no PCIe, energy or BAR1 figure: it does not wait 20 ms for PCIe.
    let table = one_shot(&["snapshot"]);
    assert_asked(&table, &["MemoryInfo", "Name"], 1, "snapshot");
    let unasked = ["PcieThroughput", "TotalEnergyConsumption", "BAR1MemoryInfo"];
    assert_asked(&table, &unasked, 0, "snapshot");
    assert_asked(&table, &unshown, 0, "snapshot");

    let csv = one_shot(&[
        "snapshot",
        "--query",
        "index,temperature.gpu",
        "--format",
        "csv",
    ]);
    assert_asked(&csv, &["Temperature"], 1, "snapshot --query");
    let unasked = ["Name", "MemoryInfo", "ApplicationsClock"];
    assert_asks_none(&csv, &unasked, "snapshot --query");
}

/// `smi`, `stat` and `select` show no events, so they make no event set: the NVML backend used
/// to start its listener for every command (an event set, each GPU's supported kinds and its
/// registration) though only `snapshot`, `info`, `top`, `export` and `record` show events.
#[test]
fn commands_that_show_no_events_make_no_event_set() {
    const SET_UP: [&str; 3] = [
        "nvmlEventSetCreate",
        "nvmlDeviceGetSupportedEventTypes",
        "nvmlDeviceRegisterEvents",
    ];
    for args in [
        &["smi", "-L"][..],
        &["smi", "--query-gpu=index,memory.used", "--format=csv"],
        &["smi", "-q"],
        &["stat", "--json"],
        &["select", "--count", "1"],
        // A one-shot snapshot shows its events as N/A: it lives too briefly to see any.
        &["snapshot", "--json"],
        &["snapshot"],
    ] {
        let calls = one_shot(args);
        for f in SET_UP {
            assert_eq!(count(&calls, f), 0, "{args:?} calls {f}: {calls:?}");
        }
    }
    let calls = one_shot(&["info", "--gpm-window", "100ms"]);
    assert!(
        count(&calls, "nvmlEventSetCreate") == 1 && count(&calls, "nvmlDeviceRegisterEvents") >= 1,
        "info shows events over its GPM window, so it listens for them: {calls:?}"
    );
}

/// `nvmlDeviceValidateInforom` has the driver checksum the whole inforom (tens of milliseconds
/// of its CPU, more than the rest of a one-shot's queries together on a real H100): only the
/// `--query-gpu` field that shows it asks it.
#[test]
fn only_the_field_that_shows_the_inforom_checksum_asks_for_it() {
    for args in [
        &["snapshot", "--json"][..],
        &["smi", "-q"],
        &["smi", "-q", "-x"],
        &["smi"],
        &["info", "--gpm-window", "100ms"],
    ] {
        let calls = one_shot(args);
        assert_eq!(
            count(&calls, "nvmlDeviceValidateInforom"),
            0,
            "{args:?}: {calls:?}"
        );
        assert!(
            count(&calls, "nvmlDeviceGetMemoryInfo") >= 1,
            "{args:?} asked nothing?"
        );
    }
    let calls = one_shot(&[
        "smi",
        "--query-gpu=index,inforom.checksum_validation",
        "--format=csv",
    ]);
    assert_eq!(count(&calls, "nvmlDeviceValidateInforom"), 1, "{calls:?}");
}

/// `--query-gpu` fields that only nvidia-smi's detailed views show (issue 34's, issue 36 item
/// 2) ask their own queries, once each, and not everything: they used to ask every query of the
/// device, as a field the plans did not know does.
#[test]
fn smi_query_gpu_asks_a_detail_fields_own_query_and_not_everything() {
    let fields = "temperature.gpu.tlimit,utilization.jpeg,\
                  ecc.errors.uncorrected.aggregate.sram.parity,remapped_rows.histogram.low,\
                  platform.module_id";
    let calls = one_shot(&["smi", &format!("--query-gpu={fields}"), "--format=csv"]);
    assert_asked(
        &calls,
        &[
            "MarginTemperature",
            "JpgUtilization",
            "SramEccErrorStatus",
            "RowRemapperHistogram",
            "PlatformInfo",
        ],
        1,
        fields,
    );
    let unasked = [
        "Name",
        "Serial",
        "MemoryInfo",
        "UtilizationRates",
        "PowerUsage",
        "Temperature",
        "ComputeRunningProcesses",
        "PcieThroughput",
        "GpuFabricInfoV",
    ];
    assert_asked(&calls, &unasked, 0, fields);
    assert_asked(&calls, &UNSHOWN_STATICS, 0, fields);
}

/// A PCIe throughput sample counts the link's bytes over 20 ms, and this process's own queries
/// of the same GPU cross that link: it is asked after the device's other queries, never beside
/// them (beside them, a live H100's idle link read about 50 MB/s each way where nvidia-smi read
/// 1). Over fake-nvml with costs that make the rest of the refresh outlast one sample, every
/// other query of the GPU is served before the first PCIe sample ends.
#[test]
fn pcie_throughput_is_sampled_after_the_devices_other_queries() {
    let (dir, nvml) = fake_nvml();
    let log = dir.path().join("served.log");
    let costs = dir.path().join("costs.json");
    // The sample waits 20 ms; eight maximum and application clocks at 8 ms each make the rest
    // of the refresh 64 ms or more, so a sample taken beside them would end among them.
    let ms = |wall: u32| serde_json::json!({"wall_us": wall * 1000, "cpu_us": 0});
    std::fs::write(
        &costs,
        serde_json::json!({
            "nvmlDeviceGetPcieThroughput": ms(20),
            "nvmlDeviceGetMaxClockInfo": ms(8),
            "nvmlDeviceGetApplicationsClock": ms(8),
        })
        .to_string(),
    )
    .unwrap();
    let out = cli::command(&["smi", "-q", "--nvml-lib", &nvml])
        .env(fake_nvml::FIXTURE_ENV, export_support::fixture("h100-real"))
        .env(fake_nvml::FRAME_ENV, "30")
        .env(fake_nvml::CALL_LOG_ENV, &log)
        .env(fake_nvml::COSTS_ENV, &costs)
        .output()
        .expect("gpuscope runs");
    cli::assert_ok(&out, ["smi", "-q"]);
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let is_pcie = |l: &str| l.contains("nvmlDeviceGetPcieThroughput");
    let first_sample = lines
        .iter()
        .position(|l| is_pcie(l))
        .expect("smi -q samples PCIe");
    assert_eq!(lines.iter().filter(|l| is_pcie(l)).count(), 2, "TX and RX");
    let clocks_after: Vec<&&str> = lines[first_sample..]
        .iter()
        .filter(|l| l.contains("ClockInfo") || l.contains("ApplicationsClock"))
        .collect();
    assert!(
        clocks_after.is_empty(),
        "queries served after a PCIe sample ended, so asked while it sampled: {clocks_after:?}\n{text}"
    );
}
