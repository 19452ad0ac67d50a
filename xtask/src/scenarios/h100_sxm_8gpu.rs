//! `h100-sxm-8gpu`: an 8x H100 80GB HBM3 SXM (HGX) box running a distributed training job and a
//! mix of smaller jobs: 64 GPU processes, NVLink traffic, no fans.

use std::collections::BTreeMap;

use gpu_backend::fixture::{DeviceDynamic, DeviceStatic};
use gpu_backend::{
    Answer, Architecture, BackendError, Brand, CurrentPending, DeviceId, EventKind, Fixture,
    GpuEvent, ProcessUtilizationSample, RemappedRows, Utilization, VirtualizationMode,
};

use super::common::*;

pub const STEM: &str = "h100-sxm-8gpu";
const DESCRIPTION: &str = "An 8x H100 80GB HBM3 SXM (HGX) server: an 8-rank torchrun training job \
                          warming up alongside evaluation, inference, notebook, Dask, LoRA and Ray \
                          jobs (64 GPU processes in all), with 18 active NVLinks per GPU and no fans.";
const SOURCE: &str = "Device values (name, PCI ids, VBIOS, board part number, memory total and \
                     reserved, BAR1, clocks and max clocks, power limit 700 W and its 200-700 W \
                     range, ECC, NVLink count, driver 590.48.01 / CUDA 13.1) from \
                     shared/reference-dumps/utku__linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt \
                     (a single-GPU VM); what the dump does not show (no fans, no MIG slot with \
                     MIG off, instance ids, bus width, thresholds, sampling periods, cores, PCIe \
                     max speed) as the real H100 of fixtures/h100-real.json answered; the 8-GPU \
                     topology, UUIDs, serials, processes, host and the frames are synthesised \
                     around those values.";
const FRAMES: usize = 30;
const GPUS: u32 = 8;
/// From this frame on, GPU 5 has a pending row remap (one row remapped for an uncorrectable
/// error).
pub const REMAP_FRAME: usize = 18;
/// The events of the recording: (GPU, frame it arrives in, kind, data, microseconds before that
/// frame's reading). GPU 2 reports XID 79 ("GPU has fallen off the bus") and keeps answering;
/// GPU 5 reports XID 63 (a row-remapping recording event) with its pending remap.
pub const EVENTS: &[(u32, usize, EventKind, u64, u64)] = &[
    (2, XID_FRAME, EventKind::Xid, 79, 412_000),
    (5, REMAP_FRAME, EventKind::Xid, 63, 250_000),
];
/// The frame in which GPU 2's XID 79 arrives.
pub const XID_FRAME: usize = 14;
/// GPU 3's clocks are cut by the hardware (HW slowdown) in these frames.
pub const HW_SLOWDOWN_FRAMES: std::ops::RangeInclusive<usize> = 22..=25;

/// Values of the H100 80GB HBM3 from utku__linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt.
pub mod h100 {
    use super::MIB;
    pub const NAME: &str = "NVIDIA H100 80GB HBM3";
    pub const DRIVER: &str = "590.48.01";
    pub const NVML: &str = "13.590.48.01";
    pub const CUDA: i32 = 13010;
    pub const PCI_DEVICE_ID: u32 = 0x2330_10DE;
    pub const PCI_SUBSYSTEM_ID: u32 = 0x16C1_10DE;
    pub const VBIOS: &str = "96.00.A5.00.01";
    pub const BOARD_PART: &str = "692-2G520-0200-000";
    pub const MEM_TOTAL: u64 = 81559 * MIB;
    pub const MEM_RESERVED: u64 = 479 * MIB;
    pub const BAR1_TOTAL: u64 = 131072 * MIB;
    pub const MAX_GRAPHICS: u32 = 1980;
    pub const MAX_MEMORY: u32 = 2619;
    pub const MAX_VIDEO: u32 = 1545;
    pub const IDLE_GRAPHICS: u32 = 345;
    pub const IDLE_VIDEO: u32 = 765;
    pub const POWER_LIMIT_MW: u32 = 700_000;
    pub const POWER_MIN_MW: u32 = 200_000;
    /// T.Limit 87 °C (idle: 41 °C current + 46 °C margin) plus the dump's -2 / -8 °C offsets.
    pub const SLOWDOWN_C: u32 = 89;
    pub const SHUTDOWN_C: u32 = 95;
    /// `nvlink -s`: 18 links at 26.562 GB/s.
    pub const NVLINKS: usize = 18;
    /// The encoder and decoder sampling period the real H100 answered in every frame of
    /// fixtures/h100-real.json.
    pub const ENCODER_PERIOD_US: u32 = 100_000;
    /// From here on the real H100 of fixtures/h100-real.json (driver 580.159.04), where the
    /// dump does not tell.
    pub const INFOROM: &str = "G520.0200.00.05";
    pub const MEMORY_BUS_WIDTH: u32 = 5120;
    /// Every reason NVML names, up to display clocks.
    pub const SUPPORTED_CLOCK_EVENT_REASONS: u64 = gpu_backend::ClockEventReasons::all().bits();
    /// T.Limit (87 °C) itself, and what NVML answered for the memory maximum.
    pub const GPU_MAX_C: u32 = 87;
    pub const MEMORY_MAX_C: u32 = 95;
    pub const CORES: u32 = 16_896;
    /// PCIe 5 (NVML's code 5, NVML_PCIE_LINK_MAX_SPEED_32000MBPS).
    pub const PCIE_MAX_SPEED_MBPS: u32 = 32_000;
}

/// Static answers of one H100 SXM at `bus`, not in MIG mode, on bare metal (the MIG scenarios
/// change what MIG mode changes).
pub fn h100_static(
    uuid: String,
    serial: String,
    bus: u32,
    device: u32,
    minor: u32,
) -> DeviceStatic {
    let mut s = static_unsupported();
    s.name = ok(h100::NAME.to_string());
    s.uuid = ok(uuid);
    s.serial = ok(serial);
    s.pci_info = ok(pci(
        bus,
        device,
        h100::PCI_DEVICE_ID,
        h100::PCI_SUBSYSTEM_ID,
    ));
    s.minor_number = ok(minor);
    s.vbios_version = ok(h100::VBIOS.to_string());
    s.board_part_number = ok(h100::BOARD_PART.to_string());
    s.architecture = ok(Architecture::Hopper);
    s.brand = ok(Brand::Nvidia);
    s.max_clocks = clocks(
        h100::MAX_GRAPHICS,
        h100::MAX_GRAPHICS,
        h100::MAX_MEMORY,
        h100::MAX_VIDEO,
    );
    board_limits(
        &mut s,
        (h100::SLOWDOWN_C, h100::SHUTDOWN_C),
        (
            h100::POWER_LIMIT_MW,
            h100::POWER_MIN_MW,
            h100::POWER_LIMIT_MW,
        ),
        (5, 16),
    );
    s.power_management_default_limit = ok(h100::POWER_LIMIT_MW);
    s.nvlink_state = vec![ok(true); h100::NVLINKS];
    // nvidia-smi 590 shows "Display Attached: Yes" (the display-mode query) and "Display
    // Active: Disabled".
    board_modes(&mut s, (true, false), Some(true), true, (9, 0));
    s.mig_mode = ok(CurrentPending {
        current: false,
        pending: false,
    });
    // MIG off: NVML counts no MIG slot, and a GPU's own handle has no GPU or compute instance
    // (the real H100: 0, and INVALID_ARGUMENT for both ids).
    s.max_mig_device_count = ok(0);
    s.mig_device_indices = ok(Vec::new());
    s.gpu_instance_id = Answer::Err(BackendError::InvalidArgument);
    s.compute_instance_id = Answer::Err(BackendError::InvalidArgument);
    s.inforom_image_version = ok(h100::INFOROM.to_string());
    s.memory_bus_width = ok(h100::MEMORY_BUS_WIDTH);
    s.supported_clock_event_reasons = ok(h100::SUPPORTED_CLOCK_EVENT_REASONS);
    // No fans: NVML counts 0 (and fan speed is not supported).
    s.num_fans = ok(0);
    s.temperature_gpu_max = ok(h100::GPU_MAX_C);
    s.temperature_memory_max = ok(h100::MEMORY_MAX_C);
    s.num_gpu_cores = ok(h100::CORES);
    s.pcie_link_max_speed = ok(h100::PCIE_MAX_SPEED_MBPS);
    board_config(&mut s, (bus, device), VirtualizationMode::None);
    // Driver 590 (the dump's): "Requested functionality has been deprecated".
    applications_clocks_deprecated(&mut s);
    s
}

/// The changing answers an H100 gives that a scenario's story does not set, as the real H100
/// of fixtures/h100-real.json gave them in every frame: PCIe 5 x16 with some traffic, ECC counts
/// of 0 in total and for device memory and SRAM (the other locations not supported), no PCIe
/// replay, the clock event reasons (idle when idle), no event, the memory temperature a degree
/// or two above the GPU's, and the energy counter. Without MIG, no remapped row; in MIG mode
/// remapped rows are N/A (the MIG dump's "Remapped Rows: N/A").
pub fn h100_health(
    dy: &mut DeviceDynamic,
    temperature_c: u32,
    energy_mj: u64,
    busy: bool,
    mig: bool,
) {
    dy.memory_temperature = ok(temperature_c + 1);
    dy.total_energy_consumption = ok(energy_mj);
    dy.current_pcie_link_generation = ok(5);
    dy.current_pcie_link_width = ok(16);
    dy.pcie_tx_throughput = ok(600);
    dy.pcie_rx_throughput = ok(450);
    dy.ecc_errors = ecc_all(ok(0));
    dy.ecc_device_memory = location_ecc_zero();
    dy.ecc_sram = location_ecc_zero();
    dy.clock_event_reasons = ok(if busy { 0 } else { reasons::GPU_IDLE });
    dy.pcie_replay_counter = ok(0);
    if !mig {
        dy.remapped_rows = ok(RemappedRows {
            correctable: 0,
            uncorrectable: 0,
            pending: false,
            failure: false,
        });
    }
    dy.events = ok(Vec::new());
}

/// What turning MIG mode on changes in an H100's static answers: MIG slots to hold up to 7 MIG
/// devices (those in `slots` in use), and no core count for the whole GPU ("On MIG-enabled
/// GPUs, querying the device's core count is currently not supported", nvmlDeviceGetNumGpuCores).
pub fn h100_mig_mode(s: &mut DeviceStatic, slots: Vec<u32>) {
    s.mig_mode = ok(CurrentPending {
        current: true,
        pending: true,
    });
    s.max_mig_device_count = ok(7);
    s.mig_device_indices = ok(slots);
    s.num_gpu_cores = ns();
    // "Nvlink queries are not supported for Devices in MIG mode".
    s.nvlink_state = Vec::new();
}

/// A job's process on one GPU.
struct Proc {
    pid: u32,
    gpu: u32,
    /// GPU memory at the first frame and after warm-up, bytes.
    mem_from: u64,
    mem_to: u64,
    /// Frames the warm-up takes (0: steady from the start).
    warm_frames: usize,
    /// Typical SM share, percent (0: no samples, an idle context).
    sm: f64,
    /// Typical host CPU use, percent of one CPU, and resident memory, bytes.
    cpu: f64,
    rss: u64,
}

impl Proc {
    /// A process of `(pid, gpu)` steady from the start: GPU memory `mem_mib` MiB plus up to
    /// `mem_spread` more, typical SM share and host CPU (percent), and resident memory `rss_gib`
    /// GiB plus up to `rss_spread` MiB (drawn from `rng` in that order).
    fn steady(
        rng: &mut Rng,
        (pid, gpu): (u32, u32),
        (mem_mib, mem_spread): (u64, u64),
        (sm, cpu): (f64, f64),
        (rss_gib, rss_spread): (u64, u64),
    ) -> Proc {
        Proc {
            pid,
            gpu,
            mem_from: 0,
            mem_to: (mem_mib + rng.range(0, mem_spread)) * MIB,
            warm_frames: 0,
            sm,
            cpu,
            rss: rss_gib * GIB + rng.range(0, rss_spread) * MIB,
        }
    }
}

/// A command line's words (none of them holds white space).
fn split(cmdline: &str) -> Vec<String> {
    cmdline.split_whitespace().map(str::to_string).collect()
}

/// The words as `&str`s.
fn words(cmdline: &[String]) -> Vec<&str> {
    cmdline.iter().map(String::as_str).collect()
}

pub fn build() -> Fixture {
    let mut rng = Rng::new(0x4810_0580);
    let buses: [u32; 8] = [0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB];
    let uuids: Vec<String> = (0..GPUS).map(|_| rng.uuid("GPU")).collect();

    let mut devices = BTreeMap::new();
    for g in 0..GPUS {
        let serial = format!(
            "16542230{:05}",
            10417 + rng.range(0, 900) * 7 + u64::from(g)
        );
        devices.insert(
            DeviceId::Gpu(g),
            h100_static(uuids[g as usize].clone(), serial, buses[g as usize], 0, g),
        );
    }

    // --- processes -------------------------------------------------------------------------
    let mut procs: Vec<Proc> = Vec::new();
    let mut host_procs = BTreeMap::new();
    // Each process with its host facts; it started `before` seconds before the recording.
    let mut add = |p: Proc, name: &str, cmdline: &[String], user: &str, ppid, before: u64| {
        let facts = host_proc(name, &words(cmdline), user, ppid, START_S - before);
        host_procs.insert(p.pid, facts);
        procs.push(p);
    };
    // The launchers (torchrun 40100 and 40300, raylet 31000, jupyter-lab 22000, the
    // dask-cuda-worker nanny 33000) hold no GPU context, so they appear only as parents.
    let mut ray_pid = 31120u32;
    for g in 0..GPUS {
        let gi = g as u64;
        // The job's process on this GPU.
        let steady =
            |rng: &mut Rng, pid, mem, load, rss| Proc::steady(rng, (pid, g), mem, load, rss);
        // 1. Training rank (alice), warming up during the recording.
        let mem_to = (61_440 + rng.range(0, 1_500)) * MIB;
        let p = Proc {
            pid: 40117 + g,
            gpu: g,
            mem_from: (2_100 + rng.range(0, 200)) * MIB,
            mem_to,
            warm_frames: 12 + (g as usize % 3),
            sm: 80.0,
            cpu: 140.0,
            rss: 21 * GIB + rng.range(0, 2048) * MIB,
        };
        let venv = "/home/alice/.venv/bin/python3 -u";
        let cmd = split(&format!(
            "{venv} train.py --config configs/llama-8b-sft.yaml --local-rank={g}"
        ));
        add(p, "python3", &cmd, "alice", 40100, 38);
        // 2. Evaluation rank of a second, smaller torchrun job.
        let p = steady(&mut rng, 40317 + g, (2_250, 500), (5.0, 95.0), (6, 1024));
        let cmd = split(&format!(
            "{venv} eval.py --ckpt runs/sft-0412/step-6000 --local-rank={g}"
        ));
        add(p, "python3", &cmd, "alice", 40300, 608);
        // 3. Inference server, one per GPU (svc-infer).
        let p = steady(&mut rng, 2841 + g, (3_600, 600), (4.0, 12.0), (3, 512));
        let port = 8000 + 10 * g;
        let cmd = split(&format!(
            "/opt/tritonserver/bin/tritonserver --model-repository=/srv/models \
             --http-port={port} --grpc-port={} --metrics-port={}",
            port + 1,
            port + 2
        ));
        add(p, "tritonserver", &cmd, "svc-infer", 1, 259_200 - gi * 3);
        // 4. A notebook kernel (carol), mostly idle.
        let p = steady(&mut rng, 22140 + 7 * g, (620, 700), (0.0, 0.5), (2, 1024));
        let kernel = rng.next_u64() >> 32;
        let cmd = split(&format!(
            "/opt/conda/bin/python3 -m ipykernel_launcher \
             -f /home/carol/.local/share/jupyter/runtime/kernel-{kernel:08x}.json"
        ));
        add(p, "python3", &cmd, "carol", 22000, 7_200 - gi * 311);
        // 5. A dask-cuda worker (bob).
        let p = steady(&mut rng, 33021 + g, (1_030, 200), (2.0, 35.0), (4, 1024));
        let cmd = [
            "/home/bob/miniconda3/envs/rapids/bin/python".to_string(),
            "-c".to_string(),
            "from distributed.nanny import Nanny; Nanny.run()".to_string(),
            format!("--name=dask-gpu-{g}"),
        ];
        add(p, "python", &cmd, "bob", 33000, 3_640);
        // 6. A LoRA fine-tune (eve), one per GPU.
        let p = steady(&mut rng, 45120 + g, (2_700, 700), (10.0, 100.0), (5, 1024));
        let cmd = split(&format!(
            "/home/eve/venvs/peft/bin/python finetune_lora.py --base mistral-7b --device=cuda:{g}"
        ));
        add(p, "python", &cmd, "eve", 44990, 1_200 - gi * 17);
        // 7. Ray rollout workers (bob): three on GPUs 0-3, one on 4-7.
        let workers = if g < 4 { 3 } else { 1 };
        for _ in 0..workers {
            let pid = ray_pid;
            ray_pid += 1;
            let p = steady(&mut rng, pid, (1_100, 500), (1.5, 60.0), (3, 1024));
            let cmd = ["ray::RolloutWorker".to_string()];
            add(
                p,
                "ray::RolloutWorker",
                &cmd,
                "bob",
                31000,
                1_790 - u64::from(pid % 7),
            );
        }
    }
    debug_assert_eq!(procs.len(), 64);

    // --- frames ----------------------------------------------------------------------------
    let mut temps: Vec<f64> = (0..GPUS).map(|_| rng.rangef(44.0, 48.0)).collect();
    let mut energy: Vec<u64> = (0..GPUS)
        .map(|_| 9_800_000_000 + rng.range(0, 400_000_000))
        .collect();
    let mut links: Vec<Vec<(u64, u64)>> = (0..GPUS)
        .map(|_| {
            (0..h100::NVLINKS)
                .map(|_| {
                    let base = 3_100_000_000 + rng.range(0, 60_000_000);
                    (base, base + rng.range(0, 2_000_000))
                })
                .collect()
        })
        .collect();
    let mut mem_now: Vec<u64> = procs
        .iter()
        .map(|p| {
            if p.warm_frames > 0 {
                p.mem_from
            } else {
                p.mem_to
            }
        })
        .collect();
    let mut rss_now: Vec<u64> = procs.iter().map(|p| p.rss).collect();
    let mut machine =
        Host::new("hgx-h100-07", 224, (2048 * GIB, 8 * GIB)).with_load([22.4, 17.9, 11.2]);
    let mut frames = Vec::new();

    // GPM readings draw from their own generator, so the other values stay as they were.
    let mut gpm_rng = Rng::new(0x6770_0008);
    for f in 0..FRAMES {
        let mut devs = BTreeMap::new();
        let mut host_samples = BTreeMap::new();
        let mut host_cpu_sum = 0.0;
        for g in 0..GPUS {
            let gi = g as usize;
            let mut compute = Vec::new();
            let mut samples: Vec<ProcessUtilizationSample> = Vec::new();
            let mut sm_sum = 0.0;
            let mut mem_util_sum = 0.0;
            for (i, p) in procs.iter().enumerate().filter(|(_, p)| p.gpu == g) {
                // Memory: training ranks grow in 2 MiB allocator blocks until warmed up.
                if p.warm_frames > 0 {
                    let target = ramp(f, 0, p.warm_frames, p.mem_from as f64, p.mem_to as f64);
                    let noisy = if f < p.warm_frames {
                        target * rng.rangef(0.97, 1.0)
                    } else {
                        target
                    };
                    let blocks = (noisy / (2 * MIB) as f64) as u64 * 2 * MIB;
                    mem_now[i] = blocks.max(mem_now[i]).min(p.mem_to);
                } else if rng.unit() < 0.15 {
                    mem_now[i] = (mem_now[i] as i64
                        + (rng.range(0, 4) as i64 - 2) * (2 * MIB) as i64)
                        as u64;
                }
                compute.push(proc_info(p.pid, Some(mem_now[i])));
                // SM share.
                let sm = if p.warm_frames > 0 {
                    ramp(f, 1, 9, 25.0, p.sm) + rng.rangef(-4.0, 4.0)
                } else {
                    p.sm * rng.rangef(0.4, 1.6)
                };
                if p.sm > 0.0 && sm >= 0.5 {
                    let sm_u = sm.round().clamp(1.0, 100.0) as u32;
                    let mem_u = (sm * rng.rangef(0.45, 0.65)).round() as u32;
                    sm_sum += f64::from(sm_u);
                    mem_util_sum += f64::from(mem_u);
                    samples.push(util_sample(
                        p.pid,
                        f,
                        rng.range(40_000, 900_000),
                        sm_u,
                        mem_u,
                        0,
                        0,
                    ));
                }
                // Host side.
                let busy = p.cpu * rng.rangef(0.7, 1.3);
                if p.warm_frames > 0 && f < p.warm_frames {
                    rss_now[i] += rng.range(40, 160) * MIB;
                }
                host_cpu_sum += busy;
                let status = if busy > 50.0 { "running" } else { "sleeping" };
                host_samples.insert(p.pid, host_sample(busy, rss_now[i], status));
            }
            let util = sm_sum.min(100.0);
            let mem_util = mem_util_sum.min(100.0);
            let used: u64 = compute
                .iter()
                .filter_map(|p| p.used_gpu_memory)
                .sum::<u64>()
                + 20 * MIB;
            // Power follows utilization; the board caps at its 700 W limit.
            let power_w = (95.0 + util * 5.9 + rng.rangef(-12.0, 12.0)).clamp(70.0, 699.0);
            let capped = power_w > 680.0;
            let power_mw = (power_w * 1000.0) as u32;
            temps[gi] += (36.0 + power_w / 700.0 * 30.0 - temps[gi]) * 0.25;
            energy[gi] += u64::from(power_mw); // mW x 1 s = mJ
            let slowdown = g == 3 && HW_SLOWDOWN_FRAMES.contains(&f);
            let graphics = if util < 2.0 {
                h100::IDLE_GRAPHICS
            } else if slowdown {
                // HW slowdown cuts the clocks by half or more.
                870 + 15 * rng.range(0, 4) as u32
            } else if capped {
                1_830 + 15 * rng.range(0, 6) as u32
            } else {
                h100::MAX_GRAPHICS
            };
            let video = if util < 2.0 {
                h100::IDLE_VIDEO
            } else {
                h100::MAX_VIDEO
            };
            for l in links[gi].iter_mut() {
                let per_s = util / 100.0 * rng.rangef(7.5e9, 10.5e9) / 1024.0;
                l.0 += per_s as u64;
                l.1 += (per_s * rng.rangef(0.96, 1.04)) as u64;
            }
            let mut dy: DeviceDynamic = dynamic_unsupported();
            dy.memory_info = ok(memory(h100::MEM_TOTAL, Some(h100::MEM_RESERVED), used));
            dy.bar1_memory_info = ok(bar1(h100::BAR1_TOTAL, used + MIB));
            dy.utilization_rates = ok(Utilization {
                gpu: util.round() as u32,
                memory: mem_util.round() as u32,
            });
            codecs(&mut dy, (0, 0), h100::ENCODER_PERIOD_US);
            dy.clocks = clocks(graphics, graphics, h100::MAX_MEMORY, video);
            dy.temperature = ok(temps[gi].round() as u32);
            dy.power_usage = ok(power_mw);
            dy.total_energy_consumption = ok(energy[gi]);
            dy.performance_state = ok(0);
            dy.current_pcie_link_generation = ok(5);
            dy.current_pcie_link_width = ok(16);
            dy.pcie_tx_throughput = ok(rng.range(2_400, 9_800) as u32);
            dy.pcie_rx_throughput = ok(rng.range(5_200, 21_000) as u32);
            dy.nvlink_throughput = nvlink_counters(&links[gi]);
            dy.nvlink_error_counters = nvlink_errors(
                links[gi].len(),
                // GPU 2's link 7 takes a replay now and then.
                (g == 2).then_some((7, f as u64 / 4)),
            );
            dy.memory_temperature = ok((temps[gi] + 6.0).round() as u32);
            dy.ecc_device_memory = location_ecc_zero();
            dy.ecc_sram = location_ecc_zero();
            dy.gpm_metrics = gpm_reading(f, util, 0.62, true, &mut gpm_rng);
            // The health story: GPU 5 waits for a row remap from frame REMAP_FRAME on; GPU 2
            // reports XID 79 at XID_FRAME; GPU 3 is in HW slowdown in HW_SLOWDOWN_FRAMES.
            let remap = g == 5 && f >= REMAP_FRAME;
            dy.ecc_errors = ecc_all(ok(0));
            dy.remapped_rows = ok(RemappedRows {
                correctable: 0,
                uncorrectable: u32::from(remap),
                pending: remap,
                failure: false,
            });
            dy.pcie_replay_counter = ok(0);
            let held = if slowdown { reasons::HW_SLOWDOWN } else { 0 };
            dy.clock_event_reasons = ok(held | if capped { reasons::SW_POWER_CAP } else { 0 });
            dy.events = ok(EVENTS
                .iter()
                .filter(|&&(gpu, frame, ..)| gpu == g && frame == f)
                .map(|&(_, frame, kind, data, before_us)| GpuEvent {
                    timestamp_us: frame_time_us(frame) - before_us,
                    kind,
                    data,
                })
                .collect());
            dy.compute_processes = ok(compute);
            dy.graphics_processes = ok(Vec::new());
            samples.sort_by_key(|s| s.pid);
            dy.process_utilization = ok(samples);
            devs.insert(DeviceId::Gpu(g), dy);
        }
        // The launchers and other host work keep a few more CPUs busy.
        host_cpu_sum += rng.rangef(150.0, 250.0);
        let busy_cpus = host_cpu_sum / 100.0 + 6.0;
        let rss_total: u64 = rss_now.iter().sum();
        frames.push(machine.frame(f, devs, busy_cpus, (212 * GIB + rss_total, 0), host_samples));
    }

    fixture(
        meta(STEM, DESCRIPTION, SOURCE),
        system((h100::DRIVER, h100::NVML, h100::CUDA), GPUS, ok(uuids)),
        devices,
        machine.facts(host_procs),
        frames,
    )
}
