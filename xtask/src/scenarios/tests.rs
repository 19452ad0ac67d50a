//! Checks of the scenario generators and of the files they wrote to fixtures/.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use gpu_backend::fixture::{DeviceDynamic, Frame};
use gpu_backend::{
    Answer, Architecture, BackendError, Brand, ClockType, DeviceId, DriverModel, Fixture,
    ProcessInfo,
};

use super::common::{MIB, RECORDED_AT};
use super::*;

fn scenario(stem: &str) -> Fixture {
    all()
        .into_iter()
        .find(|(s, _)| *s == stem)
        .map(|(_, f)| f)
        .unwrap_or_else(|| panic!("no scenario {stem}"))
}

fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures")
}

fn dy(frame: &Frame, id: DeviceId) -> &DeviceDynamic {
    &frame.devices[&id]
}

/// The compute process `pid` of device `id` in `frame`.
fn compute_process(frame: &Frame, id: DeviceId, pid: u32) -> ProcessInfo {
    dy(frame, id)
        .compute_processes
        .ok()
        .unwrap()
        .iter()
        .find(|p| p.pid == pid)
        .copied()
        .unwrap_or_else(|| panic!("no compute process {pid} on {id}"))
}

#[test]
fn the_scenarios_exist_with_their_names() {
    let stems: Vec<_> = all()
        .iter()
        .map(|(s, f)| {
            assert_eq!(f.meta.name, *s);
            assert_eq!(f.meta.recorded_at.as_deref(), Some(RECORDED_AT));
            assert!(!f.meta.description.is_empty() && f.meta.source.contains("reference-dumps"));
            *s
        })
        .collect();
    assert_eq!(
        stems,
        [
            "h100-sxm-8gpu",
            "h100-mig",
            "geforce-desktop",
            "windows-wddm",
            "old-driver",
            "gpu-lost",
            "k8s-time-slicing"
        ]
    );
}

#[test]
fn generators_are_deterministic() {
    for ((s1, a), (_, b)) in all().into_iter().zip(all()) {
        assert_eq!(a, b, "{s1} differs between two runs");
    }
}

#[test]
fn every_scenario_validates_and_round_trips() {
    for (stem, f) in all() {
        f.validate().unwrap_or_else(|e| panic!("{stem}: {e:?}"));
        let back = Fixture::from_json_str(&f.to_json_pretty(), stem).unwrap();
        assert_eq!(back, f, "{stem} does not round-trip");
    }
}

#[test]
fn fixture_files_equal_the_generators() {
    for (stem, f) in all() {
        let path = fixtures_dir().join(format!("{stem}.json"));
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}; run `cargo xtask gen-fixtures`", path.display()));
        assert!(
            text == f.to_json_pretty() + "\n",
            "{} is out of date; run `cargo xtask gen-fixtures`",
            path.display()
        );
        // A bound on the repository's size: the 8-GPU scenario, with 18 NVLink error
        // counters and GPM per GPU per frame, is the largest (4.3 MB).
        assert!(text.len() < 4_500_000, "{stem} is {} bytes", text.len());
        Fixture::load(&path).unwrap();
    }
}

/// fixtures/ holds the scenarios, which the generators write (and the test above keeps equal
/// to them), and real recordings, which no generator writes: a `*-real.json` recorded from NVML,
/// with the session's other files and their story beside it in `<stem>/README.md`. Any other
/// file would be a scenario whose generator is gone.
#[test]
fn every_fixture_file_is_a_scenario_or_a_real_recording() {
    let generated: BTreeSet<String> = all().iter().map(|(s, _)| s.to_string()).collect();
    let mut real = 0;
    for entry in std::fs::read_dir(fixtures_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        if generated.contains(&stem) {
            continue;
        }
        assert!(
            stem.ends_with("-real"),
            "{}: no generator writes it",
            path.display()
        );
        let f = Fixture::load(&path).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            f.meta.source.starts_with("recorded from NVML"),
            "{}: a real recording says so: {}",
            path.display(),
            f.meta.source
        );
        assert!(
            fixtures_dir().join(&stem).join("README.md").is_file(),
            "{}: its session's README",
            path.display()
        );
        real += 1;
    }
    assert!(real >= 1, "fixtures/h100-real.json is there");
}

#[test]
fn every_scenario_has_30_frames_one_second_apart() {
    for (stem, f) in all() {
        assert!(f.frames.len() >= 30, "{stem}: {} frames", f.frames.len());
        for (i, frame) in f.frames.iter().enumerate() {
            assert_eq!(frame.t_ms, i as u64 * 1000, "{stem} frame {i}");
        }
    }
}

/// Rules every scenario keeps: memory adds up, counters only grow, process samples move
/// forward, every GPU process is known to the host table, per-link lists are trimmed.
#[test]
fn every_scenario_is_internally_consistent() {
    for (stem, f) in all() {
        assert_eq!(
            f.system.device_count,
            Answer::Ok(f.physical_ids().count() as u32)
        );
        let mut last_energy: BTreeMap<DeviceId, u64> = BTreeMap::new();
        let mut last_sample: BTreeMap<(DeviceId, u32), u64> = BTreeMap::new();
        for (i, frame) in f.frames.iter().enumerate() {
            for (&id, d) in &frame.devices {
                if let Answer::Ok(m) = d.memory_info {
                    assert_eq!(
                        m.total,
                        m.used + m.free + m.reserved.unwrap_or(0),
                        "{stem} {i} {id}"
                    );
                }
                if let Answer::Ok(b) = d.bar1_memory_info {
                    assert_eq!(b.total, b.used + b.free, "{stem} {i} {id}");
                }
                if let Answer::Ok(e) = d.total_energy_consumption {
                    if let Some(&prev) = last_energy.get(&id) {
                        assert!(e > prev, "{stem} {i} {id}: energy {e} after {prev}");
                    }
                    last_energy.insert(id, e);
                }
                if let Answer::Ok(samples) = &d.process_utilization {
                    for s in samples {
                        let t0 = common::START_US;
                        assert!(
                            s.timestamp_us > t0 - 1_000_000
                                && s.timestamp_us <= t0 + frame.t_ms * 1000
                        );
                        if let Some(&prev) = last_sample.get(&(id, s.pid)) {
                            assert!(s.timestamp_us > prev, "{stem} {i} {id} pid {}", s.pid);
                        }
                        last_sample.insert((id, s.pid), s.timestamp_us);
                    }
                }
                let procs = d
                    .compute_processes
                    .ok()
                    .into_iter()
                    .chain(d.graphics_processes.ok())
                    .flatten();
                for p in procs {
                    assert!(
                        f.host.processes.contains_key(&p.pid),
                        "{stem}: pid {} has no host entry",
                        p.pid
                    );
                    assert!(
                        frame.host.processes.contains_key(&p.pid),
                        "{stem} {i}: pid {} not in host frame",
                        p.pid
                    );
                }
                if let (Answer::Ok(used), Answer::Ok(m)) = (&d.compute_processes, &d.memory_info) {
                    let sum: u64 = used.iter().filter_map(|p| p.used_gpu_memory).sum();
                    assert!(sum <= m.used, "{stem} {i} {id}");
                }
            }
            for pid in frame.host.processes.keys() {
                assert!(
                    f.host.processes.contains_key(pid),
                    "{stem} {i}: pid {pid} unknown"
                );
            }
        }
    }
}

#[test]
fn h100_sxm_8gpu_facts() {
    let f = scenario("h100-sxm-8gpu");
    assert_eq!(f.system.driver_version, Answer::Ok("590.48.01".into()));
    assert_eq!(f.system.nvml_version, Answer::Ok("13.590.48.01".into()));
    assert_eq!(f.system.cuda_driver_version, Answer::Ok(13010));
    assert_eq!(f.system.device_count, Answer::Ok(8));
    let mut uuids = Vec::new();
    let mut buses = BTreeSet::new();
    let mut serials = BTreeSet::new();
    for g in 0..8 {
        let s = &f.devices[&DeviceId::Gpu(g)];
        assert_eq!(s.name, Answer::Ok("NVIDIA H100 80GB HBM3".into()));
        assert_eq!(s.architecture, Answer::Ok(Architecture::Hopper));
        let pci = s.pci_info.ok().unwrap();
        assert_eq!(pci.pci_device_id, 0x2330_10DE);
        assert!(pci.bus_id.starts_with("00000000:") && pci.bus_id.ends_with(":00.0"));
        buses.insert(pci.bus_id.clone());
        uuids.push(s.uuid.ok().unwrap().clone());
        serials.insert(s.serial.ok().unwrap().clone());
        assert_eq!(s.power_management_limit, Answer::Ok(700_000));
        assert_eq!(s.max_clocks.graphics, Answer::Ok(1980));
        assert_eq!(s.nvlink_state, vec![Answer::Ok(true); 18]);
        assert_eq!(s.mig_device_indices, Answer::Ok(vec![]));
        assert_eq!(s.mig_mode.ok().map(|m| m.current), Some(false));
        // As the real H100 of fixtures/h100-real.json answered: no fans, no MIG slot with MIG
        // off, and no instance ids on the GPU's own handle.
        assert_eq!(s.num_fans, Answer::Ok(0));
        assert_eq!(s.max_mig_device_count, Answer::Ok(0));
        assert_eq!(
            s.gpu_instance_id,
            Answer::Err(BackendError::InvalidArgument)
        );
    }
    assert_eq!(buses.len(), 8);
    assert_eq!(serials.len(), 8);
    assert_eq!(f.system.cuda_device_order, Answer::Ok(uuids));
    let mut first_rank_mem = None;
    for (i, frame) in f.frames.iter().enumerate() {
        let mut pids = BTreeSet::new();
        let mut entries = 0;
        for g in 0..8 {
            let d = dy(frame, DeviceId::Gpu(g));
            let procs = d.compute_processes.ok().unwrap();
            assert!(
                procs.len() >= 5,
                "frame {i} GPU {g}: {} processes",
                procs.len()
            );
            entries += procs.len();
            pids.extend(procs.iter().map(|p| p.pid));
            assert!(procs.iter().all(|p| p.used_gpu_memory.is_some()));
            assert_eq!(d.nvlink_throughput.len(), 18);
            assert!(d.fan_speeds.is_empty());
            assert_eq!(d.fan_speed, Answer::Err(BackendError::NotSupported));
            let m = d.memory_info.ok().unwrap();
            let sum: u64 = procs.iter().filter_map(|p| p.used_gpu_memory).sum();
            assert_eq!(m.used, sum + 20 * MIB);
            assert_eq!(m.reserved, Some(479 * MIB));
            if i > 0 {
                let prev = dy(&f.frames[i - 1], DeviceId::Gpu(g));
                for (a, b) in prev.nvlink_throughput.iter().zip(&d.nvlink_throughput) {
                    let (a, b) = (a.ok().unwrap(), b.ok().unwrap());
                    assert!(b.tx_kib >= a.tx_kib && b.rx_kib >= a.rx_kib);
                }
            }
        }
        assert_eq!(pids.len(), 64, "frame {i}");
        assert_eq!(entries, 64, "frame {i}");
        let rank0 = compute_process(frame, DeviceId::Gpu(0), 40117)
            .used_gpu_memory
            .unwrap();
        first_rank_mem.get_or_insert(rank0);
        if i == f.frames.len() - 1 {
            assert!(
                rank0 > 25 * first_rank_mem.unwrap(),
                "training warm-up grows memory"
            );
            assert!(rank0 > 60 * 1024 * MIB);
        }
    }
    let users: BTreeSet<_> = f
        .host
        .processes
        .values()
        .filter_map(|p| p.user.clone())
        .collect();
    assert!(users.len() >= 3 && users.contains("alice") && users.contains("svc-infer"));
    assert!((40117..40125).all(|pid| f.host.processes[&pid].ppid == Some(40100)));
    assert_eq!(f.host.cpu_count, Some(224));
    assert_eq!(f.host.memory_total, Some(2 << 40));
}

#[test]
fn h100_mig_facts() {
    let f = scenario("h100-mig");
    let p = &f.devices[&DeviceId::Gpu(0)];
    assert_eq!(f.system.device_count, Answer::Ok(1));
    assert_eq!(
        p.mig_mode.ok().map(|m| (m.current, m.pending)),
        Some((true, true))
    );
    assert_eq!(p.mig_device_indices, Answer::Ok(vec![0, 1, 2, 3]));
    assert!(p.nvlink_state.is_empty());
    let expect = [
        ("3g.40gb", 2, 40448),
        ("2g.20gb", 3, 20096),
        ("1g.10gb", 9, 9984),
        ("1g.10gb", 10, 9984),
    ];
    for (slot, (profile, gi, mib)) in expect.into_iter().enumerate() {
        let id = DeviceId::Mig {
            parent: 0,
            index: slot as u32,
        };
        let s = &f.devices[&id];
        assert!(s.name.ok().unwrap().ends_with(profile));
        assert!(s.uuid.ok().unwrap().starts_with("MIG-"));
        assert_eq!(s.gpu_instance_id, Answer::Ok(gi));
        assert_eq!(s.compute_instance_id, Answer::Ok(0));
        assert_eq!(s.pci_info, Answer::Err(BackendError::NotSupported));
        for frame in &f.frames {
            let d = dy(frame, id);
            assert_eq!(d.memory_info.ok().unwrap().total, mib * MIB);
            assert!(d.bar1_memory_info.ok().is_some());
            assert_eq!(d.utilization_rates, Answer::Err(BackendError::NotSupported));
            assert_eq!(d.temperature, Answer::Err(BackendError::NotSupported));
            assert_eq!(d.power_usage, Answer::Err(BackendError::NotSupported));
            assert_eq!(
                *d.clocks.get(ClockType::Sm),
                Answer::Err(BackendError::NotSupported)
            );
            assert!(d.nvlink_throughput.is_empty());
            for pr in d.compute_processes.ok().unwrap() {
                assert_eq!(pr.gpu_instance_id, Some(gi));
                let parent = dy(frame, DeviceId::Gpu(0)).compute_processes.ok().unwrap();
                assert!(
                    parent.contains(pr),
                    "a MIG process is on the parent's list too"
                );
            }
        }
    }
    let last = f.frames.last().unwrap();
    let burn = compute_process(last, DeviceId::Gpu(0), 21198);
    assert_eq!(
        (
            burn.gpu_instance_id,
            burn.compute_instance_id,
            burn.used_gpu_memory
        ),
        (Some(2), Some(0), Some(7484 * MIB))
    );
    let parent = dy(last, DeviceId::Gpu(0));
    assert_eq!(
        parent.utilization_rates,
        Answer::Err(BackendError::NotSupported)
    );
    assert!(parent.nvlink_throughput.is_empty());
    assert!(parent.temperature.ok().is_some());
}

#[test]
fn geforce_desktop_facts() {
    let f = scenario("geforce-desktop");
    assert_eq!(f.system.driver_version, Answer::Ok("460.27.04".into()));
    assert_eq!(f.system.cuda_driver_version, Answer::Ok(11020));
    let mut both = false;
    for g in 0..2 {
        let s = &f.devices[&DeviceId::Gpu(g)];
        assert_eq!(s.name, Answer::Ok("GeForce GTX 1080".into()));
        assert_eq!(s.architecture, Answer::Ok(Architecture::Pascal));
        assert_eq!(s.brand, Answer::Ok(Brand::GeForce));
        assert_eq!(s.num_fans, Answer::Ok(1));
        assert_eq!(s.display_mode, Answer::Ok(g == 0));
        assert_eq!(s.display_active, Answer::Ok(g == 0));
        for frame in &f.frames {
            let d = dy(frame, DeviceId::Gpu(g));
            assert_eq!(d.fan_speeds.len(), 1);
            assert_eq!(d.fan_speeds[0], d.fan_speed);
            assert_eq!(d.memory_info.ok().unwrap().reserved, None);
            let gr = d.graphics_processes.ok().unwrap();
            let co = d.compute_processes.ok().unwrap();
            assert!(!gr.is_empty() && !co.is_empty());
            both |= gr.iter().any(|p| co.iter().any(|c| c.pid == p.pid));
        }
    }
    assert!(both, "a process is both compute and graphics at least once");
    let fans: Vec<_> = (0..2)
        .map(|g| dy(&f.frames[0], DeviceId::Gpu(g)).fan_speed.clone())
        .collect();
    assert_eq!(fans, [Answer::Ok(53), Answer::Ok(58)]);
}

#[test]
fn windows_wddm_facts() {
    let f = scenario("windows-wddm");
    let s = &f.devices[&DeviceId::Gpu(0)];
    assert_eq!(s.name, Answer::Ok("NVIDIA GeForce RTX 2080 SUPER".into()));
    assert_eq!(
        s.driver_model.ok().map(|m| (m.current, m.pending)),
        Some((DriverModel::Wddm, DriverModel::Wddm))
    );
    assert_eq!(s.persistence_mode, Answer::Err(BackendError::NotSupported));
    assert_eq!(s.minor_number, Answer::Err(BackendError::NotSupported));
    assert_eq!(f.system.driver_version, Answer::Ok("591.86".into()));
    let mut names = BTreeSet::new();
    for frame in &f.frames {
        let d = dy(frame, DeviceId::Gpu(0));
        let gr = d.graphics_processes.ok().unwrap();
        let co = d.compute_processes.ok().unwrap();
        assert_eq!(gr.len(), 10);
        assert!(gr.iter().chain(co).all(|p| p.used_gpu_memory.is_none()));
        assert!(gr.iter().all(|p| co.contains(p)), "desktop apps are C+G");
        names.extend(
            co.iter()
                .filter_map(|p| f.host.processes[&p.pid].name.clone()),
        );
    }
    assert!(
        names.contains("dwm.exe") && names.contains("ffmpeg.exe") && names.contains("NZXT CAM.exe")
    );
    assert!(f
        .host
        .processes
        .values()
        .all(|p| p.user.as_deref().is_some_and(|u| u.contains('\\'))));
    assert_eq!(
        dy(f.frames.last().unwrap(), DeviceId::Gpu(0)).fan_speed,
        Answer::Ok(38)
    );
}

#[test]
fn old_driver_facts() {
    let f = scenario("old-driver");
    let s = &f.devices[&DeviceId::Gpu(0)];
    assert_eq!(s.name, Answer::Ok("Graphics Device".into()));
    assert_eq!(s.architecture, Answer::Err(BackendError::FunctionNotFound));
    assert_eq!(s.num_fans, Answer::Err(BackendError::FunctionNotFound));
    assert!(s.mig_mode.is_err());
    assert_eq!(
        f.system.cuda_device_order,
        Answer::Err(BackendError::NotSupported)
    );
    assert_eq!(f.system.cuda_driver_version, Answer::Ok(10010));
    for name in [
        "nvmlDeviceGetComputeRunningProcesses_v3",
        "nvmlDeviceGetComputeRunningProcesses_v2",
        "nvmlDeviceGetGraphicsRunningProcesses_v3",
        "nvmlDeviceGetGraphicsRunningProcesses_v2",
        "nvmlDeviceGetMemoryInfo_v2",
        "nvmlDeviceGetArchitecture",
        "nvmlDeviceGetMigMode",
        "nvmlDeviceGetFanSpeed_v2",
        "nvmlDeviceGetNumFans",
    ] {
        assert!(f.nvml_missing_functions.iter().any(|m| m == name), "{name}");
    }
    let mut saw_process = false;
    for frame in &f.frames {
        let d = dy(frame, DeviceId::Gpu(0));
        assert!(d.fan_speeds.is_empty());
        assert!(d.fan_speed.ok().is_some());
        assert_eq!(d.memory_info.ok().unwrap().reserved, None);
        assert_eq!(
            d.total_energy_consumption,
            Answer::Err(BackendError::NotSupported)
        );
        assert!(d.nvlink_throughput.is_empty());
        for p in d.compute_processes.ok().unwrap() {
            saw_process = true;
            assert_eq!((p.gpu_instance_id, p.compute_instance_id), (None, None));
        }
    }
    assert!(saw_process);
}

#[test]
fn gpu_lost_facts() {
    let f = scenario("gpu-lost");
    assert_eq!(f.system.device_count, Answer::Ok(4));
    let lost = DeviceId::Gpu(gpu_lost::LOST_GPU);
    let worker = f.frames[0].devices[&lost].compute_processes.ok().unwrap()[0].pid;
    assert!(f.devices[&lost].name.ok().is_some(), "static answers stay");
    for (i, frame) in f.frames.iter().enumerate() {
        for g in 0..4 {
            let d = dy(frame, DeviceId::Gpu(g));
            if DeviceId::Gpu(g) == lost && i >= gpu_lost::LOST_AT {
                assert_eq!(*d, common::dynamic_all(BackendError::GpuLost), "frame {i}");
            } else {
                assert!(
                    d.memory_info.ok().is_some()
                        && d.temperature.ok().is_some()
                        && d.power_usage.ok().is_some()
                );
                assert!(d.compute_processes.ok().is_some_and(|p| !p.is_empty()));
            }
        }
        let alive = frame.host.processes.contains_key(&worker);
        assert_eq!(
            alive,
            i < gpu_lost::LOST_AT + gpu_lost::GONE_AFTER,
            "frame {i}"
        );
    }
}
