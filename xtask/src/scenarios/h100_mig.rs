//! `h100-mig`: one H100 80GB HBM3 with MIG enabled (3g.40gb, 2g.20gb, 2x 1g.10gb) and compute
//! processes inside the GPU instances.

use std::collections::BTreeMap;

use gpu_backend::{DeviceAttributes, DeviceId, Fixture, ProcessInfo, VirtualizationMode};

use super::common::*;
use super::h100_sxm_8gpu::{h100, h100_mig_mode, h100_static};

pub const STEM: &str = "h100-mig";
const FRAMES: usize = 36;

/// A MIG device of utku__linux-x86_64__nvidia-h100-mig__590.48.01.txt.
struct Mig {
    profile: &'static str,
    gi: u32,
    ci: u32,
    mem_total_mib: u64,
    bar1_total_mib: u64,
    /// Used with no process (the load-state figure less its processes), MiB.
    baseline_mib: u64,
    /// Streaming multiprocessors, and the copy, decoder and JPEG engines it shares (it has no
    /// encoder or OFA): the dump's "Device Attributes".
    engines: [u32; 4],
}

const MIGS: [Mig; 4] = [
    Mig {
        profile: "3g.40gb",
        gi: 2,
        ci: 0,
        mem_total_mib: 40448,
        bar1_total_mib: 24739,
        baseline_mib: 39,
        engines: [60, 3, 3, 3],
    },
    Mig {
        profile: "2g.20gb",
        gi: 3,
        ci: 0,
        mem_total_mib: 20096,
        bar1_total_mib: 12369,
        baseline_mib: 17,
        engines: [32, 2, 2, 2],
    },
    Mig {
        profile: "1g.10gb",
        gi: 9,
        ci: 0,
        mem_total_mib: 9984,
        bar1_total_mib: 6184,
        baseline_mib: 9,
        engines: [16, 1, 1, 1],
    },
    Mig {
        profile: "1g.10gb",
        gi: 10,
        ci: 0,
        mem_total_mib: 9984,
        bar1_total_mib: 6184,
        baseline_mib: 9,
        engines: [16, 1, 1, 1],
    },
];

/// A process inside a MIG device.
struct Proc {
    pid: u32,
    slot: u32,
    mem_mib: u64,
    start_frame: usize,
    warm_frames: usize,
}

const PROCS: [Proc; 4] = [
    // From the dump's load state: two memhogs and gpu_burn in GI 2 / CI 0.
    Proc {
        pid: 21180,
        slot: 0,
        mem_mib: 2296,
        start_frame: 3,
        warm_frames: 1,
    },
    Proc {
        pid: 21181,
        slot: 0,
        mem_mib: 1272,
        start_frame: 3,
        warm_frames: 1,
    },
    Proc {
        pid: 21198,
        slot: 0,
        mem_mib: 7484,
        start_frame: 5,
        warm_frames: 3,
    },
    // Added: a small inference service in the 2g.20gb instance (GI 3).
    Proc {
        pid: 21230,
        slot: 1,
        mem_mib: 3180,
        start_frame: 8,
        warm_frames: 6,
    },
];

pub fn build() -> Fixture {
    let mut rng = Rng::new(0x4810_0619);
    let uuid = rng.uuid("GPU");
    let serial = "1654223017722".to_string();
    let mut devices = BTreeMap::new();
    let mut parent = h100_static(uuid.clone(), serial, 0x00, 0x09, 0);
    h100_mig_mode(&mut parent, vec![0, 1, 2, 3]);
    // The dump's GPU is passed through to a virtual machine.
    parent.virtualization_mode = ok(VirtualizationMode::PassThrough);
    devices.insert(DeviceId::Gpu(0), parent);
    for (slot, m) in MIGS.iter().enumerate() {
        let mut s = static_unsupported();
        s.name = ok(format!("{} MIG {}", h100::NAME, m.profile));
        s.uuid = ok(rng.uuid("MIG"));
        s.gpu_instance_id = ok(m.gi);
        s.compute_instance_id = ok(m.ci);
        let [sm, ce, dec, jpg] = m.engines;
        s.device_attributes = ok(DeviceAttributes {
            multiprocessor_count: sm,
            shared_copy_engine_count: ce,
            shared_decoder_count: dec,
            shared_encoder_count: 0,
            shared_jpeg_count: jpg,
            shared_ofa_count: 0,
            // nvidia-smi does not print these.
            gpu_instance_slice_count: None,
            compute_instance_slice_count: None,
            memory_size_mib: None,
        });
        devices.insert(
            DeviceId::Mig {
                parent: 0,
                index: slot as u32,
            },
            s,
        );
    }

    let mut host_procs = BTreeMap::new();
    let s = START_S;
    host_procs.insert(
        21180,
        host_proc(
            "memhog",
            &["/root/tools/memhog", "2296"],
            "root",
            21170,
            s + 3,
        ),
    );
    host_procs.insert(
        21181,
        host_proc(
            "memhog",
            &["/root/tools/memhog", "1272"],
            "root",
            21170,
            s + 3,
        ),
    );
    host_procs.insert(
        21198,
        host_proc(
            "gpu_burn",
            &["./gpu_burn", "-m", "20%", "600"],
            "root",
            21170,
            s + 5,
        ),
    );
    host_procs.insert(
        21230,
        host_proc(
            "python3",
            &[
                "/srv/infer/.venv/bin/python3",
                "-m",
                "uvicorn",
                "serve:app",
                "--port",
                "9000",
            ],
            "svc-infer",
            1,
            s + 8,
        ),
    );

    let mut temp: f64 = 42.0;
    let mut energy: u64 = 1_372_000_000;
    let mut machine = Host::new("h100-mig-vm", 20, (240 * GIB, 0)).with_load([0.4, 0.3, 0.2]);
    let mut frames = Vec::new();
    // GPM readings draw from their own generator, so the other values stay as they were.
    let mut gpm_rng = Rng::new(0x6770_0007);
    for f in 0..FRAMES {
        let mut devs = BTreeMap::new();
        let mut host = BTreeMap::new();
        let mut per_slot: Vec<Vec<ProcessInfo>> = vec![Vec::new(); MIGS.len()];
        let mut burn = false;
        for p in PROCS.iter().filter(|p| f >= p.start_frame) {
            let m = &MIGS[p.slot as usize];
            let mib = ramp(
                f,
                p.start_frame,
                p.warm_frames,
                (p.mem_mib / 4) as f64,
                p.mem_mib as f64,
            ) as u64;
            per_slot[p.slot as usize].push(ProcessInfo {
                pid: p.pid,
                used_gpu_memory: Some(mib * MIB),
                gpu_instance_id: Some(m.gi),
                compute_instance_id: Some(m.ci),
            });
            burn |= p.pid == 21198;
            let (cpu, rss, status) = match p.pid {
                21198 => (rng.rangef(99.0, 101.0), 412 * MIB, "running"),
                21230 => (rng.rangef(3.0, 25.0), 1_840 * MIB, "sleeping"),
                _ => (rng.rangef(0.0, 0.3), 38 * MIB, "sleeping"),
            };
            host.insert(p.pid, host_sample(cpu, rss, status));
        }
        let mut parent_used = 0;
        let mut all_procs = Vec::new();
        for (slot, m) in MIGS.iter().enumerate() {
            let used = m.baseline_mib * MIB
                + per_slot[slot]
                    .iter()
                    .filter_map(|p| p.used_gpu_memory)
                    .sum::<u64>();
            parent_used += used;
            let mut dy = dynamic_unsupported();
            dy.memory_info = ok(memory(m.mem_total_mib * MIB, Some(0), used));
            dy.bar1_memory_info = ok(bar1(m.bar1_total_mib * MIB, 0));
            dy.compute_processes = ok(per_slot[slot].clone());
            // GPM per instance: gpu_burn keeps its instance's SMs busy, a working instance a
            // little, an idle one not at all.
            let slot_busy = if per_slot[slot].iter().any(|p| p.pid == 21198) {
                97.0
            } else if per_slot[slot].is_empty() {
                0.0
            } else {
                18.0
            };
            dy.gpm_metrics = gpm_reading(f, slot_busy, 0.55, false, &mut gpm_rng);
            all_procs.extend(per_slot[slot].iter().copied());
            devs.insert(
                DeviceId::Mig {
                    parent: 0,
                    index: slot as u32,
                },
                dy,
            );
        }
        let active = !all_procs.is_empty();
        // Power and temperature as in the dump: ~98 W / 42 °C idle, ~438 W / 55 °C under gpu_burn.
        let target_w = if burn {
            438.0
        } else if active {
            128.0
        } else {
            98.0
        };
        let power_w = rng.jitter(target_w, 3.0, 60.0, 699.0);
        temp += (target_w / 700.0 * 30.0 + 36.0 - temp) * 0.3;
        let power_mw = (power_w * 1000.0) as u32;
        energy += u64::from(power_mw);
        let mut dy = dynamic_unsupported();
        // The GPU's event listener is up and nothing has happened (MIG devices have no events
        // of their own: not supported).
        dy.events = ok(Vec::new());
        dy.memory_info = ok(memory(
            h100::MEM_TOTAL,
            Some(h100::MEM_RESERVED),
            parent_used,
        ));
        dy.bar1_memory_info = ok(bar1(h100::BAR1_TOTAL, 81081 * MIB));
        let (graphics, video) = if active {
            (h100::MAX_GRAPHICS, h100::MAX_VIDEO)
        } else {
            (h100::IDLE_GRAPHICS, h100::IDLE_VIDEO)
        };
        dy.clocks = clocks(graphics, graphics, h100::MAX_MEMORY, video);
        gpu_state(&mut dy, temp.round() as u32, power_mw, 0);
        dy.total_energy_consumption = ok(energy);
        let (tx, rx) = if burn {
            (rng.range(8_200, 9_900), rng.range(17_500, 20_500))
        } else {
            (rng.range(300, 420), rng.range(280, 400))
        };
        pcie_link(&mut dy, (5, 16), (tx as u32, rx as u32));
        dy.ecc_errors = ecc_all(ok(0));
        dy.clock_event_reasons = ok(if active { 0 } else { reasons::GPU_IDLE });
        dy.memory_temperature = ok((temp + 5.0).round() as u32);
        dy.ecc_device_memory = location_ecc_zero();
        dy.ecc_sram = location_ecc_zero();
        // The dump: "Replays Since Reset: 9"; "Remapped Rows: N/A" in MIG mode.
        dy.pcie_replay_counter = ok(9);
        let whole_busy = if burn {
            97.0 * 3.0 / 7.0
        } else if active {
            6.0
        } else {
            0.0
        };
        dy.gpm_metrics = gpm_reading(f, whole_busy, 0.55, false, &mut gpm_rng);
        all_procs.sort_by_key(|p| p.pid);
        dy.compute_processes = ok(all_procs);
        dy.graphics_processes = ok(Vec::new());
        devs.insert(DeviceId::Gpu(0), dy);
        frames.push(machine.frame_of_processes(f, devs, (0.2, 14 * GIB + 310 * MIB, 0), host));
    }

    fixture(
        meta(
            STEM,
            "One H100 80GB HBM3 in MIG mode with four MIG devices (3g.40gb, 2g.20gb, \
                          2x 1g.10gb); memhog and gpu_burn start inside GPU instance 2 and an \
                          inference service inside GPU instance 3. Queries NVML does not answer \
                          for MIG handles are not_supported.",
            "Values (MIG profiles, GPU/compute instance ids, per-instance memory and BAR1 \
                     totals, process PIDs, names and memory 2296/1272/7484 MiB, power and \
                     temperatures, PCIe throughput, BAR1 use, NVLink not supported in MIG mode, \
                     driver 590.48.01 / CUDA 13.1) from \
                     shared/reference-dumps/utku__linux-x86_64__nvidia-h100-mig__590.48.01.txt; \
                     what the dump does not show as the real H100 of fixtures/h100-real.json \
                     answered; UUIDs, serial, the GI 3 process, the host and the frames are \
                     synthesised.",
        ),
        system((h100::DRIVER, h100::NVML, h100::CUDA), 1, ok(vec![uuid])),
        devices,
        machine.facts(host_procs),
        frames,
    )
}
