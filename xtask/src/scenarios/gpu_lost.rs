//! `gpu-lost`: a 4x Tesla T4 inference server where GPU 2 falls off the bus at frame 15.

use std::collections::BTreeMap;

use gpu_backend::{
    Architecture, BackendError, Brand, DeviceId, Fixture, Utilization, VirtualizationMode,
};

use super::common::*;

pub const STEM: &str = "gpu-lost";
const FRAMES: usize = 32;
const GPUS: u32 = 4;
/// The GPU that falls off the bus, and when.
pub const LOST_GPU: u32 = 2;
pub const LOST_AT: usize = 15;
/// Its processes leave the host process table this many frames later.
pub const GONE_AFTER: usize = 2;
/// The dump's GPU (bus 00:1E.0), kept with its UUID, Xorg and python process.
const DUMP_UUID: &str = "GPU-d37e67a5-91dd-3774-a5cb-99096249601a";
const XORG: u32 = 675;
const XORG_ARGS: &str =
    "-core :0 -seat seat0 -auth /var/run/lightdm/root/:0 -nolisten tcp vt7 -novtswitch";

/// The inference worker on GPU `g`; GPU 3's is the dump's PID 5762.
fn worker_pid(g: u32) -> u32 {
    5759 + g
}

pub fn build() -> Fixture {
    let mut rng = Rng::new(0x7e57_0515);
    let uuids: Vec<String> = (0..GPUS)
        .map(|g| {
            if g == 3 {
                DUMP_UUID.to_string()
            } else {
                rng.uuid("GPU")
            }
        })
        .collect();
    let mut devices = BTreeMap::new();
    for g in 0..GPUS {
        let mut s = static_unsupported();
        s.name = ok("Tesla T4".to_string());
        s.uuid = ok(uuids[g as usize].clone());
        s.serial = ok(format!("13223210{:05}", 4_410 + rng.range(0, 5_000)));
        s.pci_info = ok(pci(0x00, 0x1B + g, 0x1EB8_10DE, 0x12A2_10DE));
        s.minor_number = ok(g);
        s.vbios_version = ok("90.04.84.00.06".to_string());
        s.board_part_number = ok("900-2G183-0000-001".to_string());
        s.architecture = ok(Architecture::Turing);
        s.brand = ok(Brand::Nvidia);
        s.max_clocks = clocks(1590, 1590, 5001, 1470);
        board_limits(&mut s, (93, 96), (70_000, 60_000, 70_000), (3, 16));
        board_modes(&mut s, (false, false), Some(false), true, (7, 5));
        // The dump: a T4 passed through to a virtual machine (board 0x1e at 00:1E.0),
        // applications clocks 585 / 5001 MHz, the defaults the same.
        board_config(&mut s, (0x00, 0x1B + g), VirtualizationMode::PassThrough);
        s.applications_clocks = app_clocks(ok((585, 5001)), ns());
        s.default_applications_clocks = app_clocks(ok((585, 5001)), ns());
        devices.insert(DeviceId::Gpu(g), s);
    }

    let st = START_S;
    let mut host_procs = BTreeMap::new();
    host_procs.insert(XORG, xorg(XORG_ARGS, "root", 662, st - 604_800));
    for g in 0..GPUS {
        host_procs.insert(
            worker_pid(g),
            host_proc(
                "python",
                &[
                    "/opt/serving/venv/bin/python",
                    "-m",
                    "serving.worker",
                    "--model",
                    "bert-base-ner",
                    &format!("--device=cuda:{g}"),
                    "--port",
                    &format!("{}", 7100 + g),
                ],
                "svc-infer",
                5740,
                st - 9_000 + u64::from(g),
            ),
        );
    }

    let mut temps: Vec<f64> = (0..GPUS).map(|_| rng.rangef(39.0, 42.0)).collect();
    let mut energy: Vec<u64> = (0..GPUS)
        .map(|_| 820_000_000 + rng.range(0, 90_000_000))
        .collect();
    let mut worker_mib: Vec<u64> = (0..GPUS)
        .map(|g| {
            if g == 3 {
                1005
            } else {
                1_003 + 2 * rng.range(0, 3)
            }
        })
        .collect();
    let mut machine = Host::new("ip-10-0-3-117", 48, (192 * GIB, 0)).with_load([3.1, 2.9, 2.8]);
    let mut frames = Vec::new();
    for f in 0..FRAMES {
        // Requests arrive in bursts; every GPU sees its share.
        let demand = (0.45 + 0.35 * ((f as f64) / 4.0).sin()).clamp(0.05, 1.0);
        let mut devs = BTreeMap::new();
        let mut host = BTreeMap::new();
        for g in 0..GPUS {
            let gi = g as usize;
            let pid = worker_pid(g);
            if g == LOST_GPU && f >= LOST_AT {
                devs.insert(DeviceId::Gpu(g), dynamic_all(BackendError::GpuLost));
                if f < LOST_AT + GONE_AFTER {
                    // The worker hangs in the driver before it dies.
                    host.insert(pid, host_sample(0.0, 2_310 * MIB, "disk-sleep"));
                }
                continue;
            }
            let sm = (demand * rng.rangef(60.0, 95.0)).round() as u32;
            if rng.unit() < 0.3 && worker_mib[gi] < 2_400 {
                worker_mib[gi] += 64;
            }
            let mut compute = vec![proc_info(pid, Some(worker_mib[gi] * MIB))];
            let mut graphics = Vec::new();
            let samples = vec![util_sample(
                pid,
                f,
                rng.range(50_000, 900_000),
                sm,
                sm * 2 / 5,
                0,
                0,
            )];
            let mut used = worker_mib[gi] * MIB + 5 * MIB;
            if g == 3 {
                graphics.push(proc_info(XORG, Some(22 * MIB)));
                used += 22 * MIB;
            }
            compute.sort_by_key(|p| p.pid);
            let util = sm.min(100);
            let power_w =
                (26.78 + f64::from(util) * 0.45 + rng.rangef(-1.5, 1.5)).clamp(20.0, 70.0);
            let capped = power_w > 66.0;
            temps[gi] += (38.0 + power_w * 0.33 - temps[gi]) * 0.2;
            let power_mw = (power_w * 1000.0) as u32;
            energy[gi] += u64::from(power_mw);
            let graphics_clk = if util < 3 {
                585
            } else if capped {
                1_290 + 15 * rng.range(0, 8) as u32
            } else {
                1_590
            };
            let mut dy = dynamic_unsupported();
            // The event listener is up and nothing has happened (a lost GPU answers gpu_lost).
            dy.events = ok(Vec::new());
            dy.memory_info = ok(memory(15_360 * MIB, Some(388 * MIB), used));
            dy.bar1_memory_info = ok(bar1(256 * MIB, 5 * MIB));
            dy.utilization_rates = ok(Utilization {
                gpu: util,
                memory: util * 2 / 5,
            });
            codecs(&mut dy, (0, 0), 167_000);
            dy.clocks = clocks(
                graphics_clk,
                graphics_clk,
                5_000,
                if util < 3 { 810 } else { 1_470 },
            );
            gpu_state(&mut dy, temps[gi].round() as u32, power_mw, 0);
            dy.total_energy_consumption = ok(energy[gi]);
            let load = 1 + u32::from(util > 10);
            pcie_link(
                &mut dy,
                (3, 8),
                (
                    rng.range(100, 900) as u32 * load,
                    rng.range(1_000, 6_000) as u32 * load,
                ),
            );
            dy.ecc_errors = ecc_all(ok(0));
            dy.clock_event_reasons = ok(if capped { reasons::SW_POWER_CAP } else { 0 });
            gpu_processes(&mut dy, compute, graphics, samples);
            devs.insert(DeviceId::Gpu(g), dy);
            host.insert(
                pid,
                host_sample(
                    rng.rangef(20.0, 110.0) * demand + 3.0,
                    (2_300 + worker_mib[gi] / 8) * MIB,
                    if demand > 0.3 { "running" } else { "sleeping" },
                ),
            );
        }
        host.insert(
            XORG,
            host_sample(rng.rangef(0.0, 0.4), 61 * MIB, "sleeping"),
        );
        frames.push(machine.frame_of_processes(f, devs, (1.5, 21 * GIB, 0), host));
    }

    fixture(
        meta(
            STEM,
            "A 4x Tesla T4 inference server where GPU 2 falls off the bus at frame 15: \
                          from then on every changing answer of GPU 2 is gpu_lost, and its worker \
                          process leaves the host table two frames later; the other GPUs keep \
                          answering.",
            "Values (name, PCI ids, VBIOS, board part number, memory total/reserved, \
                     BAR1, clocks and max clocks, power 26.78 W idle and limits 70 W / 60-70 W, \
                     thresholds 96/93 °C, PCIe gen 3 x8, ECC, Xorg 22 MiB and python 1005 MiB, \
                     UUID of GPU 3, driver 515.105.01 / CUDA 11.7) from \
                     shared/reference-dumps/telegraf__tesla-t4.xml; the other three GPUs, the \
                     workers, host and frames are synthesised.",
        ),
        system(("515.105.01", "11.515.105.01", 11070), GPUS, ok(uuids)),
        devices,
        machine.facts(host_procs),
        frames,
    )
}
