//! `k8s-time-slicing`: a Kubernetes node with two H100s. GPU 0 is shared by time-slicing
//! between three pods, each with its own memory and SM share; together they are the device's
//! whole memory use and utilization, so per-pod figures must sum to the device's. GPU 1 is in
//! MIG mode: a fourth pod runs inside MIG device 0, and a process outside any container inside
//! MIG device 1.

use std::collections::BTreeMap;

use gpu_backend::fixture::{Frame, HostFrame, HostProcessFacts};
use gpu_backend::{CodecUtilization, ContainerFacts, DeviceId, Fixture, ProcessInfo, Utilization};

use super::common::*;
use super::h100_sxm_8gpu::{h100, h100_health, h100_mig_mode, h100_static};

pub const STEM: &str = "k8s-time-slicing";
const FRAMES: usize = 30;

/// One GPU process of the scenario, and the pod it runs in (if any).
struct Proc {
    pid: u32,
    /// `None`: GPU 0; `Some(slot)`: MIG device `slot` of GPU 1.
    mig_slot: Option<u32>,
    mem_mib: u64,
    /// Mean SM share, percent (GPU 0 only: MIG devices give no per-process samples).
    sm: f64,
    cmdline: &'static [&'static str],
    user: &'static str,
    /// `None` outside any container.
    pod: Option<Pod>,
}

/// A process's container: (pod, namespace, container, pod UID, QoS class, container id).
type Pod = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
);

/// The notebook container, which runs two kernels.
const NOTEBOOK: Pod = (
    "notebook-7f9c",
    "data-science",
    "jupyter",
    "b1c2d3e4-f5a6-4b7c-8d9e-0f1a2b3c4d5e",
    "BestEffort",
    "5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b",
);

const PROCS: [Proc; 6] = [
    Proc {
        pid: 40101,
        mig_slot: None,
        mem_mib: 20_480,
        sm: 42.0,
        cmdline: &["python3", "train.py", "--model", "llama-7b", "--lora"],
        user: "1000",
        pod: Some((
            "finetune-a-0",
            "ml-research",
            "trainer",
            "6f1d2a9e-3b4c-4d5e-8f60-718293a4b5c6",
            "Burstable",
            "3c5e7a9b1d2f4a6c8e0b2d4f6a8c0e2b4d6f8a0c2e4b6d8f0a2c4e6b8d0f2a4c",
        )),
    },
    Proc {
        pid: 40202,
        mig_slot: None,
        mem_mib: 12_288,
        sm: 27.0,
        cmdline: &["python3", "train.py", "--model", "resnet50"],
        user: "1000",
        pod: Some((
            "finetune-b-0",
            "ml-research",
            "trainer",
            "0a9b8c7d-6e5f-4a3b-9c1d-2e3f4a5b6c7d",
            "Guaranteed",
            "9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1a0f9e8d",
        )),
    },
    // Two kernels of one notebook container: the pod's figures are their sums.
    Proc {
        pid: 40303,
        mig_slot: None,
        mem_mib: 4_096,
        sm: 9.0,
        cmdline: &["python3", "-m", "ipykernel_launcher", "-f", "kernel-1.json"],
        user: "jovyan",
        pod: Some(NOTEBOOK),
    },
    Proc {
        pid: 40304,
        mig_slot: None,
        mem_mib: 2_048,
        sm: 6.0,
        cmdline: &["python3", "-m", "ipykernel_launcher", "-f", "kernel-2.json"],
        user: "jovyan",
        pod: Some(NOTEBOOK),
    },
    Proc {
        pid: 40404,
        mig_slot: Some(0),
        mem_mib: 8_192,
        sm: 0.0,
        cmdline: &["tritonserver", "--model-repository=/models"],
        user: "1000",
        pod: Some((
            "triton-0",
            "serving",
            "server",
            "c3d4e5f6-a7b8-4c9d-8e0f-1a2b3c4d5e6f",
            "Guaranteed",
            "7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a1f0e9d8c7b6a",
        )),
    },
    // A process outside any container: its container fields are N/A.
    Proc {
        pid: 40505,
        mig_slot: Some(1),
        mem_mib: 1_024,
        sm: 0.0,
        cmdline: &["./gpu_burn", "-m", "10%", "60"],
        user: "root",
        pod: None,
    },
];

/// MIG devices of GPU 1: (profile, GPU instance id, memory MiB, BAR1 MiB).
const MIGS: [(&str, u32, u64, u64); 2] =
    [("3g.40gb", 2, 40_448, 24_739), ("1g.10gb", 9, 9_984, 6_184)];

pub fn build() -> Fixture {
    let mut rng = Rng::new(0x8500_1ce5);
    let uuids = [rng.uuid("GPU"), rng.uuid("GPU")];
    let mut devices = BTreeMap::new();
    devices.insert(
        DeviceId::Gpu(0),
        h100_static(uuids[0].clone(), "1654223017801".into(), 0x18, 0x00, 0),
    );
    let mut parent = h100_static(uuids[1].clone(), "1654223017802".into(), 0x2a, 0x00, 1);
    h100_mig_mode(&mut parent, vec![0, 1]);
    devices.insert(DeviceId::Gpu(1), parent);
    for (slot, (profile, gi, _, _)) in MIGS.iter().enumerate() {
        let mut s = static_unsupported();
        s.name = ok(format!("{} MIG {profile}", h100::NAME));
        s.uuid = ok(rng.uuid("MIG"));
        s.gpu_instance_id = ok(*gi);
        s.compute_instance_id = ok(0);
        devices.insert(
            DeviceId::Mig {
                parent: 1,
                index: slot as u32,
            },
            s,
        );
    }

    let mut host_procs = BTreeMap::new();
    for p in &PROCS {
        let name = p.cmdline[0].rsplit('/').next().unwrap_or(p.cmdline[0]);
        let facts = HostProcessFacts {
            container: p
                .pod
                .map(|(pod, namespace, container, uid, qos, id)| ContainerFacts {
                    runtime: Some("containerd".into()),
                    id: Some(id.into()),
                    pod_uid: Some(uid.into()),
                    qos_class: Some(qos.into()),
                    pod: Some(pod.into()),
                    namespace: Some(namespace.into()),
                    container: Some(container.into()),
                }),
            ..host_proc(name, p.cmdline, p.user, 1, START_S - 600)
        };
        host_procs.insert(p.pid, facts);
    }

    let mut frames = Vec::new();
    // Energy since the driver loaded, mJ, per GPU; GPM readings from their own generator.
    let mut energy: [u64; 2] = [4_210_000_000, 3_870_000_000];
    let mut gpm_rng = Rng::new(0x6770_0ce5);
    for f in 0..FRAMES {
        let mut devs = BTreeMap::new();
        let mut host = BTreeMap::new();
        let mut gpu0 = Vec::new();
        let mut samples = Vec::new();
        let mut per_slot: Vec<Vec<ProcessInfo>> = vec![Vec::new(); MIGS.len()];
        let (mut sm_sum, mut mem_util_sum) = (0u32, 0u32);
        for p in &PROCS {
            let used = Some(p.mem_mib * MIB);
            match p.mig_slot {
                None => {
                    gpu0.push(proc_info(p.pid, used));
                    // Each pod's slice of time varies from frame to frame; the shares never
                    // add up to more than the whole device.
                    let sm = (p.sm * rng.rangef(0.85, 1.15)).round() as u32;
                    let mem_u = (f64::from(sm) * rng.rangef(0.4, 0.6)).round() as u32;
                    sm_sum += sm;
                    mem_util_sum += mem_u;
                    samples.push(util_sample(
                        p.pid,
                        f,
                        rng.range(40_000, 900_000),
                        sm,
                        mem_u,
                        0,
                        0,
                    ));
                }
                Some(slot) => per_slot[slot as usize].push(ProcessInfo {
                    pid: p.pid,
                    used_gpu_memory: used,
                    gpu_instance_id: Some(MIGS[slot as usize].1),
                    compute_instance_id: Some(0),
                }),
            }
            let cpu = rng.rangef(20.0, 100.0);
            host.insert(
                p.pid,
                host_sample(cpu, rng.range(900, 4000) * MIB, "running"),
            );
        }
        let used: u64 = gpu0.iter().filter_map(|p| p.used_gpu_memory).sum();
        let mut dy = dynamic_unsupported();
        dy.memory_info = ok(memory(h100::MEM_TOTAL, Some(h100::MEM_RESERVED), used));
        dy.bar1_memory_info = ok(bar1(h100::BAR1_TOTAL, used / 4));
        dy.utilization_rates = ok(Utilization {
            gpu: sm_sum.min(100),
            memory: mem_util_sum.min(100),
        });
        dy.encoder_utilization = ok(CodecUtilization {
            utilization: 0,
            sampling_period_us: h100::ENCODER_PERIOD_US,
        });
        dy.clocks = clocks(
            h100::MAX_GRAPHICS,
            h100::MAX_GRAPHICS,
            h100::MAX_MEMORY,
            h100::MAX_VIDEO,
        );
        gpu_state(&mut dy, 58, 95_000 + sm_sum * 5_900, 0);
        energy[0] += u64::from(95_000 + sm_sum * 5_900); // mW x 1 s = mJ
        h100_health(&mut dy, 58, energy[0], true, false);
        dy.gpm_metrics = gpm_reading(f, f64::from(sm_sum.min(100)), 0.5, false, &mut gpm_rng);
        samples.sort_by_key(|s| s.pid);
        gpu_processes(&mut dy, gpu0, Vec::new(), samples);
        devs.insert(DeviceId::Gpu(0), dy);

        let mut parent_used = 0;
        let mut all = Vec::new();
        for (slot, (_, _, mem_mib, bar1_mib)) in MIGS.iter().enumerate() {
            let used: u64 = per_slot[slot]
                .iter()
                .filter_map(|p| p.used_gpu_memory)
                .sum();
            parent_used += used;
            let mut dy = dynamic_unsupported();
            dy.memory_info = ok(memory(mem_mib * MIB, Some(0), used));
            dy.bar1_memory_info = ok(bar1(bar1_mib * MIB, 0));
            dy.compute_processes = ok(per_slot[slot].clone());
            all.extend(per_slot[slot].iter().copied());
            devs.insert(
                DeviceId::Mig {
                    parent: 1,
                    index: slot as u32,
                },
                dy,
            );
        }
        let mut dy = dynamic_unsupported();
        dy.memory_info = ok(memory(
            h100::MEM_TOTAL,
            Some(h100::MEM_RESERVED),
            parent_used,
        ));
        dy.bar1_memory_info = ok(bar1(h100::BAR1_TOTAL, 0));
        gpu_state(&mut dy, 47, 180_000, 0);
        // The MIG dump: clocks, PCIe and ECC answer on a GPU in MIG mode.
        dy.clocks = clocks(
            h100::MAX_GRAPHICS,
            h100::MAX_GRAPHICS,
            h100::MAX_MEMORY,
            h100::MAX_VIDEO,
        );
        energy[1] += 180_000;
        h100_health(&mut dy, 47, energy[1], true, true);
        all.sort_by_key(|p| p.pid);
        dy.compute_processes = ok(all);
        dy.graphics_processes = ok(Vec::new());
        devs.insert(DeviceId::Gpu(1), dy);

        // The node's CPU use and load come from the pods' other work, outside this story.
        frames.push(Frame {
            t_ms: f as u64 * FRAME_MS,
            devices: devs,
            host: HostFrame {
                cpu_percent: Some(round1(rng.rangef(10.0, 20.0))),
                memory_used: Some(96 * GIB),
                swap_used: Some(0),
                load_average: Some([4.0, 3.5, 3.0]),
                processes: host,
            },
        });
    }

    let node = Host::new("gpu-node-7", 64, (512 * GIB, 0));
    fixture(
        meta(
            STEM,
            "A Kubernetes node with two H100 80GB HBM3. GPU 0 is time-sliced between three pods \
             (finetune-a-0, finetune-b-0, and notebook-7f9c with two kernels), whose memory and \
             SM shares sum to the device's; GPU 1 is in MIG mode with triton-0 inside MIG \
             device 0 and gpu_burn, outside any container, inside MIG device 1.",
            "H100 identity, limits and MIG profiles as in the h100-sxm-8gpu and h100-mig \
             scenarios (shared/reference-dumps/), health answers as the real H100 of \
             fixtures/h100-real.json gave them; pods, containers, processes and frames are \
             synthesised.",
        ),
        system(
            (h100::DRIVER, h100::NVML, h100::CUDA),
            2,
            ok(uuids.to_vec()),
        ),
        devices,
        node.facts(host_procs),
        frames,
    )
}
