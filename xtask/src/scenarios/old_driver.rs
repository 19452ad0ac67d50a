//! `old-driver`: a GeForce GTX 1660 Ti under driver 418.43 (CUDA 10.1), too old to know the
//! board's name, without the `_v2`/`_v3` process calls, the v2 memory call, MIG, architecture and
//! per-fan calls.

use std::collections::BTreeMap;

use gpu_backend::{Brand, DeviceId, Fixture, Utilization, VirtualizationMode};

use super::common::*;

pub const STEM: &str = "old-driver";
const FRAMES: usize = 36;
const UUID: &str = "GPU-304a277d-3545-63b8-3a36-dfde3c992989";
const TRAIN: u32 = 3127;
const TRAIN_START: usize = 6;

/// NVML entry points that libnvidia-ml 418.43 does not export (all came with R450 or later;
/// GPM with R520, the clock event reasons' names with R535).
const MISSING: [&str; 24] = [
    "nvmlDeviceGetArchitecture",
    // R535 renamed the clock "throttle" reasons to "event" reasons; R418 has only the old names.
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetSupportedClocksEventReasons",
    "nvmlDeviceGetComputeInstanceId",
    "nvmlDeviceGetComputeRunningProcesses_v2",
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetFanSpeed_v2",
    "nvmlDeviceGetGpuInstanceId",
    "nvmlDeviceGetGraphicsRunningProcesses_v2",
    "nvmlDeviceGetGraphicsRunningProcesses_v3",
    "nvmlDeviceGetMaxMigDeviceCount",
    "nvmlDeviceGetMemoryInfo_v2",
    "nvmlDeviceGetMigDeviceHandleByIndex",
    "nvmlDeviceGetMigMode",
    "nvmlDeviceGetNumFans",
    "nvmlDeviceIsMigDeviceHandle",
    "nvmlDeviceGetMPSComputeRunningProcesses_v3",
    "nvmlDeviceGetTargetFanSpeed",
    "nvmlGpmMetricsGet",
    "nvmlGpmMigSampleGet",
    "nvmlGpmQueryDeviceSupport",
    "nvmlGpmSampleAlloc",
    "nvmlGpmSampleFree",
    "nvmlGpmSampleGet",
];

pub fn build() -> Fixture {
    let mut rng = Rng::new(0x1660_0418);
    let mut s = static_unsupported();
    s.name = ok("Graphics Device".to_string());
    s.uuid = ok(UUID.to_string());
    s.pci_info = ok(pci(0x43, 0x00, 0x2184_10DE, 0x3FC8_1458));
    s.minor_number = ok(0);
    s.vbios_version = ok("90.16.25.00.4C".to_string());
    s.architecture = fnf();
    s.brand = ok(Brand::GeForce);
    s.max_clocks = clocks(2145, 2145, 4001, 1950);
    s.num_fans = fnf();
    board_limits(&mut s, (93, 96), (130_000, 70_000, 130_000), (3, 16));
    board_modes(&mut s, (false, false), Some(false), false, (7, 5));
    s.mig_mode = fnf();
    s.max_mig_device_count = fnf();
    s.mig_device_indices = fnf();
    s.gpu_instance_id = fnf();
    s.compute_instance_id = fnf();
    // The dump: board 0x4300, virtualization None, applications clocks N/A. R418 has no core
    // count or PCIe max speed call.
    board_config(&mut s, (0x43, 0x00), VirtualizationMode::None);
    s.applications_clocks = app_clocks(ns(), ns());
    s.default_applications_clocks = app_clocks(ns(), ns());
    s.num_gpu_cores = fnf();
    s.pcie_link_max_speed = fnf();
    let mut devices = BTreeMap::new();
    devices.insert(DeviceId::Gpu(0), s);

    let mut host_procs = BTreeMap::new();
    host_procs.insert(
        TRAIN,
        host_proc(
            "python3",
            &[
                "/home/lena/venv/bin/python3",
                "train.py",
                "--model",
                "resnet50",
                "--batch-size",
                "48",
                "--epochs",
                "30",
            ],
            "lena",
            3090,
            START_S + TRAIN_START as u64,
        ),
    );

    let mut temp: f64 = 40.0;
    let mut rss = 0;
    let mut machine =
        Host::new("tr-workstation", 32, (64 * GIB, 2 * GIB)).with_load([0.08, 0.05, 0.01]);
    let mut frames = Vec::new();
    for f in 0..FRAMES {
        let on = f >= TRAIN_START;
        let mut dy = dynamic_unsupported();
        // Events are as old as NVML: the listener is up and nothing has happened.
        dy.events = ok(Vec::new());
        let mut host = BTreeMap::new();
        let (used, procs, samples);
        if on {
            let mib = (ramp(f, TRAIN_START, 10, 301.0, 4_087.0) as u64) / 2 * 2;
            used = mib * MIB;
            procs = vec![proc_info(TRAIN, Some(used))];
            let sm = if f < TRAIN_START + 3 {
                rng.range(20, 60)
            } else {
                rng.range(90, 99)
            } as u32;
            samples = vec![util_sample(
                TRAIN,
                f,
                rng.range(60_000, 800_000),
                sm,
                sm / 2,
                0,
                0,
            )];
            rss = (rss.max(1_900 * MIB) + rng.range(10, 90) * MIB).min(5_200 * MIB);
            host.insert(TRAIN, host_sample(rng.rangef(95.0, 190.0), rss, "running"));
        } else {
            used = 0;
            procs = Vec::new();
            samples = Vec::new();
        }
        let busy = on && f >= TRAIN_START + 2;
        let power_w = if busy {
            rng.jitter(121.0, 8.0, 20.0, 130.0)
        } else if on {
            62.0
        } else {
            rng.jitter(8.93, 0.3, 5.0, 20.0)
        };
        temp += ((if busy {
            68.0
        } else if on {
            46.0
        } else {
            40.0
        }) - temp)
            * 0.2;
        // Fan stop below 50 °C, then the curve of a typical two-fan GTX 1660 Ti.
        let fan = if temp < 50.0 {
            0
        } else {
            (30.0 + (temp - 50.0) * 1.2).round() as u32
        };
        let graphics = if busy {
            1_890 + 15 * rng.range(0, 4) as u32
        } else if on {
            1_365
        } else {
            300
        };
        dy.memory_info = ok(memory(5912 * MIB, None, used));
        dy.bar1_memory_info = ok(bar1(256 * MIB, if on { 6 * MIB } else { 2 * MIB }));
        dy.utilization_rates = ok(if busy {
            Utilization {
                gpu: rng.range(93, 99) as u32,
                memory: rng.range(38, 52) as u32,
            }
        } else if on {
            Utilization { gpu: 31, memory: 9 }
        } else {
            Utilization { gpu: 0, memory: 1 }
        });
        codecs(&mut dy, (0, 0), 167_000);
        dy.clocks = if on {
            clocks(graphics, graphics, 3_801, 1_695)
        } else {
            clocks(300, 300, 405, 540)
        };
        dy.fan_speed = ok(fan);
        gpu_state(
            &mut dy,
            temp.round() as u32,
            (power_w * 1000.0) as u32,
            if on { 2 } else { 8 },
        );
        let throughput = if on {
            (
                1000 * rng.range(4, 15) as u32,
                1000 * rng.range(60, 190) as u32,
            )
        } else {
            (0, 0)
        };
        pcie_link(&mut dy, (if on { 3 } else { 1 }, 16), throughput);
        dy.ecc_errors = ecc_all(ns());
        dy.gpm_metrics = fnf();
        dy.clock_event_reasons = ok(if on { 0 } else { reasons::GPU_IDLE });
        gpu_processes(&mut dy, procs, Vec::new(), samples);
        let mut devs = BTreeMap::new();
        devs.insert(DeviceId::Gpu(0), dy);
        frames.push(machine.frame_of_processes(f, devs, (0.05, 5 * GIB + 220 * MIB, 0), host));
    }

    let mut fx = fixture(
        meta(
            STEM,
            "A GeForce GTX 1660 Ti under driver 418.43 (CUDA 10.1), which names it \
                          \"Graphics Device\" and lacks the _v2/_v3 process calls, memory info v2, \
                          the architecture, MIG and per-fan calls; a training run starts on the \
                          idle card at frame 6.",
            "Values (name, UUID, PCI ids, VBIOS, memory total, BAR1, idle clocks and max \
                     clocks, power 8.93 W idle and limits 130 W / 70-130 W, thresholds 96/93 °C, \
                     fan 0 %, N/A fields, driver 418.43 / CUDA 10.1) from \
                     shared/reference-dumps/telegraf__gtx-1660-ti.xml (idle); the training \
                     process, load figures, host and frames are synthesised.",
        ),
        system(("418.43", "10.418.43", 10010), 1, ns()),
        devices,
        machine.facts(host_procs),
        frames,
    );
    fx.nvml_missing_functions = MISSING.iter().map(|s| s.to_string()).collect();
    fx.nvml_missing_functions.sort();
    fx
}
