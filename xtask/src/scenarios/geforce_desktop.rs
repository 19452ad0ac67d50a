//! `geforce-desktop`: a Linux desktop with two GeForce GTX 1080 cards: fans, a display on GPU 0,
//! graphics processes, a miner on both cards and a process that is both compute and graphics.

use std::collections::BTreeMap;

use gpu_backend::{Architecture, Brand, DeviceId, Fixture, Utilization, VirtualizationMode};

use super::common::*;

pub const STEM: &str = "geforce-desktop";
const FRAMES: usize = 40;

/// One GTX 1080 of a0s-exporter__nvidia-smi-3.xml.
struct Card {
    uuid: &'static str,
    bus: u32,
    subsystem: u32,
    vbios: &'static str,
    mem_total_mib: u64,
    max_graphics: u32,
    graphics: u32,
    video: u32,
    fan: u32,
    temp: f64,
    power_w: f64,
    xorg_mib: u64,
}

const CARDS: [Card; 2] = [
    Card {
        uuid: "GPU-683c6e09-3969-31a5-b7ca-cc88252b7fce",
        bus: 0x01,
        subsystem: 0x3702_1458,
        vbios: "86.04.60.00.B4",
        mem_total_mib: 8116,
        max_graphics: 1999,
        graphics: 1784,
        video: 1594,
        fan: 53,
        temp: 67.0,
        power_w: 211.86,
        xorg_mib: 12,
    },
    Card {
        uuid: "GPU-90e3dab0-b59d-8bf6-d909-d4fab8d2f29b",
        bus: 0x03,
        subsystem: 0x3717_1458,
        vbios: "86.04.60.00.BD",
        mem_total_mib: 8119,
        max_graphics: 1936,
        graphics: 1657,
        video: 1480,
        fan: 58,
        temp: 70.0,
        power_w: 211.06,
        xorg_mib: 5,
    },
];

const XORG: u32 = 450;
const XORG_ARGS: &str = "vt2 -displayfd 3 -auth /run/user/1000/gdm/Xauthority -nolisten tcp \
                         -background none -noreset -keeptty -verbose 3";
const MINER: u32 = 8991;
const SHELL: u32 = 1312;
const BLENDER: u32 = 23110;
const BLENDER_START: usize = 12;

pub fn build() -> Fixture {
    let mut rng = Rng::new(0x1080_0460);
    let mut devices = BTreeMap::new();
    for (i, c) in CARDS.iter().enumerate() {
        let mut s = static_unsupported();
        s.name = ok("GeForce GTX 1080".to_string());
        s.uuid = ok(c.uuid.to_string());
        s.pci_info = ok(pci(c.bus, 0, 0x1B80_10DE, c.subsystem));
        s.minor_number = ok(i as u32);
        s.vbios_version = ok(c.vbios.to_string());
        s.architecture = ok(Architecture::Pascal);
        s.brand = ok(Brand::GeForce);
        s.max_clocks = clocks(c.max_graphics, c.max_graphics, 5005, 1708);
        s.num_fans = ok(1);
        board_limits(&mut s, (93, 96), (216_000, 100_000, 216_000), (3, 16));
        board_modes(&mut s, (i == 0, i == 0), Some(true), false, (6, 1));
        // The dump: board 0x100 / 0x300, virtualization None, applications clocks N/A.
        board_config(&mut s, (c.bus, 0), VirtualizationMode::None);
        s.applications_clocks = app_clocks(ns(), ns());
        s.default_applications_clocks = app_clocks(ns(), ns());
        devices.insert(DeviceId::Gpu(i as u32), s);
    }

    let s = START_S;
    let mut host_procs = BTreeMap::new();
    host_procs.insert(XORG, xorg(XORG_ARGS, "alex", 441, s - 86_400));
    host_procs.insert(
        SHELL,
        host_proc(
            "gnome-shell",
            &["/usr/bin/gnome-shell"],
            "alex",
            1190,
            s - 86_380,
        ),
    );
    host_procs.insert(
        MINER,
        host_proc(
            "nbminer",
            &[
                "/opt/nbminer/nbminer",
                "-a",
                "ethash",
                "-o",
                "stratum+tcp://eu1.ethermine.org:4444",
                "-u",
                "0x3f1c0b2e9a4d7e55a0c2d9e41b7f3a9c6d2e8b10.rig1",
            ],
            "alex",
            8980,
            s - 52_000,
        ),
    );
    host_procs.insert(
        BLENDER,
        host_proc(
            "blender",
            &["/usr/bin/blender", "/home/alex/scenes/kitchen.blend"],
            "alex",
            1312,
            s + BLENDER_START as u64 - 1,
        ),
    );

    let mut temps: Vec<f64> = CARDS.iter().map(|c| c.temp).collect();
    let mut machine = Host::new("rig-1080", 8, (16 * GIB, 2 * GIB)).with_load([1.9, 1.7, 1.6]);
    let mut blender_rss = 410 * MIB;
    let mut frames = Vec::new();
    for f in 0..FRAMES {
        let mut devs = BTreeMap::new();
        let blender_on = f >= BLENDER_START;
        let blender_mib = ramp(f, BLENDER_START, 8, 180.0, 1240.0) as u64 / 2 * 2;
        for (i, c) in CARDS.iter().enumerate() {
            let mut graphics = vec![proc_info(XORG, Some(c.xorg_mib * MIB))];
            let mut compute = vec![proc_info(MINER, Some(2883 * MIB))];
            let mut samples = vec![util_sample(
                MINER,
                f,
                rng.range(50_000, 800_000),
                rng.range(97, 100) as u32,
                rng.range(92, 100) as u32,
                0,
                0,
            )];
            if i == 0 {
                graphics.push(proc_info(SHELL, Some(96 * MIB)));
                samples.push(util_sample(
                    SHELL,
                    f,
                    rng.range(50_000, 800_000),
                    rng.range(0, 3) as u32,
                    rng.range(0, 2) as u32,
                    0,
                    0,
                ));
                if blender_on {
                    graphics.push(proc_info(BLENDER, Some(blender_mib * MIB)));
                    compute.push(proc_info(BLENDER, Some(blender_mib * MIB)));
                    samples.push(util_sample(
                        BLENDER,
                        f,
                        rng.range(50_000, 800_000),
                        rng.range(4, 30) as u32,
                        rng.range(2, 12) as u32,
                        0,
                        0,
                    ));
                }
            }
            graphics.sort_by_key(|p| p.pid);
            compute.sort_by_key(|p| p.pid);
            samples.sort_by_key(|p| p.pid);
            // A C+G process counts once towards used memory.
            let mut seen = std::collections::BTreeSet::new();
            let used: u64 = graphics
                .iter()
                .chain(compute.iter())
                .filter(|p| seen.insert(p.pid))
                .filter_map(|p| p.used_gpu_memory)
                .sum::<u64>()
                + 5 * MIB;
            let power_w = rng.jitter(c.power_w, 3.5, 150.0, 216.0);
            temps[i] += (c.temp + (power_w - c.power_w) * 0.3 - temps[i]) * 0.3;
            let fan = (c.fan as f64 + (temps[i] - c.temp) * 1.5).round() as u32;
            let bin = rng.range(0, 2) as u32; // Pascal boost bins are ~13 MHz
            let g = c.graphics - 13 + 13 * bin;
            let mut dy = dynamic_unsupported();
            // The event listener is up and nothing has happened.
            dy.events = ok(Vec::new());
            dy.memory_info = ok(memory(c.mem_total_mib * MIB, None, used));
            dy.bar1_memory_info = ok(bar1(256 * MIB, 5 * MIB));
            dy.utilization_rates = ok(Utilization {
                gpu: 100,
                memory: rng.range(98, 100) as u32,
            });
            codecs(&mut dy, (0, 0), 167_000);
            dy.clocks = clocks(g, g, 5514, c.video);
            dy.fan_speed = ok(fan);
            dy.fan_speeds = vec![ok(fan)];
            dy.fan_target_speeds = vec![ok(fan)];
            gpu_state(
                &mut dy,
                temps[i].round() as u32,
                (power_w * 1000.0) as u32,
                2,
            );
            pcie_link(
                &mut dy,
                (3, 1),
                (
                    1000 * rng.range(9, 13) as u32,
                    1000 * rng.range(28, 34) as u32,
                ),
            );
            dy.ecc_errors = ecc_all(ns());
            dy.clock_event_reasons = ok(reasons::SW_POWER_CAP);
            gpu_processes(&mut dy, compute, graphics, samples);
            devs.insert(DeviceId::Gpu(i as u32), dy);
        }
        let mut host = BTreeMap::new();
        host.insert(
            XORG,
            host_sample(rng.rangef(1.0, 6.0), 96 * MIB, "sleeping"),
        );
        host.insert(
            SHELL,
            host_sample(rng.rangef(2.0, 9.0), 412 * MIB, "sleeping"),
        );
        host.insert(
            MINER,
            host_sample(rng.rangef(18.0, 32.0), 1_130 * MIB, "sleeping"),
        );
        if blender_on {
            blender_rss = (blender_rss + rng.range(20, 140) * MIB).min(2_600 * MIB);
            host.insert(
                BLENDER,
                host_sample(rng.rangef(90.0, 360.0), blender_rss, "running"),
            );
        }
        frames.push(machine.frame_of_processes(f, devs, (0.3, 3 * GIB, 112 * MIB), host));
    }

    let mut fx = fixture(
        meta(
            STEM,
            "A Linux desktop with two GeForce GTX 1080 cards: Xorg on both, \
             gnome-shell on GPU 0 which drives the display, a miner (compute) on both, \
             and Blender starting at frame 12 as a compute-and-graphics process.",
            "Values (names, UUIDs, PCI ids, VBIOS, memory totals, clocks and max clocks, \
             power limits 216 W / 100-216 W, temperature thresholds 96/93 °C, fans 53/58 %, \
             PCIe gen 3 x1, Xorg 12/5 MiB and nbminer 2883 MiB, driver 460.27.04 / \
             CUDA 11.2) from shared/reference-dumps/a0s-exporter__nvidia-smi-3.xml; \
             gnome-shell, Blender, the host and the frames are synthesised.",
        ),
        system(
            ("460.27.04", "11.460.27.04", 11020),
            2,
            ok(CARDS.iter().map(|c| c.uuid.to_string()).collect()),
        ),
        devices,
        machine.facts(host_procs),
        frames,
    );
    fx.nvml_missing_functions = [
        "nvmlDeviceGetComputeRunningProcesses_v3",
        "nvmlDeviceGetGraphicsRunningProcesses_v3",
        "nvmlDeviceGetMPSComputeRunningProcesses_v3",
        "nvmlDeviceGetMemoryInfo_v2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    fx
}
