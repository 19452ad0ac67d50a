//! Processes over the scenario fixtures: MIG attribution, WDDM N/A memory, C+G, a vanished
//! process, a process whose host facts cannot be read, and the one-look-up-per-PID rule.

use std::sync::Arc;

use gpu_backend::fixture::Answer;
use gpu_backend::host::{HostSource, LiveHost};
use gpu_backend::{DeviceId, Fixture, ReplayBackend};
use gpu_devices::Context;
use gpu_processes::{GpuProcess, ProcessCollector, ProcessKind, Snapshots};
use test_support::process::spawn_exec;

fn load(stem: &str) -> Fixture {
    let path = format!("{}/../../fixtures/{stem}.json", env!("CARGO_MANIFEST_DIR"));
    Fixture::load(path).unwrap_or_else(|e| panic!("{e}"))
}

fn collector_at(f: Fixture, frame: usize) -> (Arc<ReplayBackend>, ProcessCollector) {
    let backend = Arc::new(ReplayBackend::new(f));
    backend.set_frame(frame);
    let collector = ProcessCollector::from_replay(backend.clone()).unwrap();
    (backend, collector)
}

fn snapshot_at(f: Fixture, frame: usize) -> Snapshots {
    collector_at(f, frame).1.take_all()
}

fn find(s: &Snapshots, pid: u32) -> &GpuProcess {
    s.processes
        .iter()
        .find(|p| p.pid == pid)
        .unwrap_or_else(|| {
            panic!(
                "pid {pid} in {:?}",
                s.processes.iter().map(|p| p.pid).collect::<Vec<_>>()
            )
        })
}

#[test]
fn mig_processes_are_attributed_to_their_instance_once() {
    let f = load("h100-mig");
    let frame = 10;
    let s = snapshot_at(f.clone(), frame);
    // Every process that runs in an instance is listed on that instance, not on the parent.
    for p in &s.processes {
        if let Some(gi) = p.gpu_instance_id {
            assert!(p.device.is_mig(), "pid {} listed on the parent", p.pid);
            let st = &f.devices[&p.device];
            assert_eq!(
                st.gpu_instance_id,
                Answer::Ok(gi),
                "pid {} on the wrong instance",
                p.pid
            );
        }
    }
    let burn = find(&s, 21198);
    assert_eq!(
        burn.device,
        DeviceId::Mig {
            parent: 0,
            index: 0
        }
    );
    assert_eq!(burn.gpu_instance_id, Some(2));
    assert_eq!(burn.compute_instance_id, Some(0));
    assert_eq!(burn.gpu_memory, Some(7484 * 1024 * 1024));
    let total = f.frames[frame].devices[&burn.device]
        .memory_info
        .ok()
        .unwrap()
        .total;
    let pct = burn.gpu_memory_percent.unwrap();
    assert!((pct - 7484.0 * 1048576.0 * 100.0 / total as f64).abs() < 1e-9);
    assert_eq!(s.processes.iter().filter(|p| p.pid == 21198).count(), 1);
}

#[test]
fn wddm_process_memory_is_na_and_the_rest_still_comes() {
    let s = snapshot_at(load("windows-wddm"), 5);
    assert!(!s.processes.is_empty());
    for p in &s.processes {
        assert_eq!(p.gpu_memory, None);
        assert_eq!(p.gpu_memory_percent, None);
        assert_eq!(p.gpu_memory_human, None);
        assert!(p.host.visible);
        assert!(p.host.name.is_some());
    }
    assert!(s.errors.is_empty(), "{:?}", s.errors);
}

#[test]
fn a_process_in_both_lists_is_one_c_plus_g_entry() {
    let f = load("geforce-desktop");
    // Find a frame and PID where the same PID is in the compute and graphics lists.
    let (frame, id, pid) = f
        .frames
        .iter()
        .enumerate()
        .find_map(|(i, fr)| {
            fr.devices.iter().find_map(|(&id, dy)| {
                let c = dy.compute_processes.ok()?;
                let g = dy.graphics_processes.ok()?;
                c.iter()
                    .find(|p| g.iter().any(|q| q.pid == p.pid))
                    .map(|p| (i, id, p.pid))
            })
        })
        .expect("the desktop scenario has a C+G process");
    let s = snapshot_at(f, frame);
    let entries: Vec<&GpuProcess> = s
        .processes
        .iter()
        .filter(|p| p.pid == pid && p.device == id)
        .collect();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].kind, Some(ProcessKind::ComputeGraphics));
    assert_eq!(entries[0].kind_str(), "C+G");
    assert!(s
        .processes
        .iter()
        .any(|p| p.kind == Some(ProcessKind::Graphics)));
    assert!(s
        .processes
        .iter()
        .any(|p| p.kind == Some(ProcessKind::Compute)));
}

#[test]
fn a_process_that_vanished_before_the_host_look_up_has_na_host_fields() {
    let mut f = load("h100-sxm-8gpu");
    let frame = 4;
    let victim = f.frames[frame].devices[&DeviceId::Gpu(3)]
        .compute_processes
        .ok()
        .unwrap()[0]
        .pid;
    f.frames[frame].host.processes.remove(&victim);
    let s = snapshot_at(f, frame);
    let gone = find(&s, victim);
    assert!(!gone.host.visible);
    assert_eq!(gone.host.user, None);
    assert_eq!(gone.host.command, None);
    assert_eq!(gone.host.running_time_s, None);
    // Its GPU side and every other process are still there.
    assert!(gone.gpu_memory.is_some());
    assert_eq!(s.processes.len(), 64);
    assert_eq!(s.processes.iter().filter(|p| p.host.visible).count(), 63);
}

#[test]
fn a_process_whose_owner_cannot_be_read_keeps_its_other_facts() {
    let mut f = load("h100-sxm-8gpu");
    let pid = *f.host.processes.keys().next().unwrap();
    let facts = f.host.processes.get_mut(&pid).unwrap();
    facts.user = None;
    facts.start_time_s = None;
    let s = snapshot_at(f, 2);
    let p = find(&s, pid);
    assert!(p.host.visible);
    assert_eq!(p.host.user, None);
    assert_eq!(p.host.running_time_human, None);
    assert!(p.host.command.is_some());
}

#[test]
fn host_facts_are_those_of_the_recording() {
    let f = load("h100-sxm-8gpu");
    let frame = 7;
    let pid = 40117;
    let facts = f.host.processes[&pid].clone();
    let sample = f.frames[frame].host.processes[&pid].clone();
    let recorded_at_s = 1_793_527_200 + f.frames[frame].t_ms / 1000;
    let s = snapshot_at(f, frame);
    let p = find(&s, pid);
    assert_eq!(p.host.user, facts.user);
    assert_eq!(p.host.cmdline.as_ref(), Some(&facts.cmdline));
    assert_eq!(p.host.ppid, facts.ppid);
    assert!(sample.cpu_percent.is_some() && sample.rss.is_some());
    assert_eq!(p.host.cpu_percent, sample.cpu_percent);
    assert_eq!(p.host.rss, sample.rss);
    assert_eq!(
        p.host.running_time_s,
        Some(recorded_at_s - facts.start_time_s.unwrap())
    );
    assert_eq!(p.host.status.as_deref(), Some("running"));
    assert_eq!(p.host.status, sample.status);
    let cmd = p.host.command.as_deref().unwrap();
    assert!(
        cmd.starts_with("/home/alice/.venv/bin/python3 -u train.py"),
        "{cmd}"
    );
}

#[test]
fn each_pid_is_looked_up_once_and_only_gpu_pids_are_read() {
    let f = load("h100-sxm-8gpu");
    let pids: std::collections::BTreeSet<u32> = f.frames[3]
        .devices
        .values()
        .flat_map(|d| d.compute_processes.ok().cloned().unwrap_or_default())
        .map(|p| p.pid)
        .collect();
    let s = snapshot_at(f, 3);
    assert_eq!(s.host_lookups, pids.len());
}

#[test]
fn a_lost_gpu_reports_its_error_and_the_other_gpus_still_list_processes() {
    let s = snapshot_at(load("gpu-lost"), 25);
    assert!(s
        .errors
        .iter()
        .any(|e| e.device == DeviceId::Gpu(2) && e.error == gpu_backend::BackendError::GpuLost));
    assert!(s.processes.iter().all(|p| p.device != DeviceId::Gpu(2)));
    assert!(s.processes.iter().any(|p| p.device == DeviceId::Gpu(3)));
    // Its processes are unknown, not none.
    assert_eq!(s.unknown_processes, [DeviceId::Gpu(2)]);
    let e = s.processes_of(DeviceId::Gpu(2)).unwrap_err();
    assert_eq!(e.error, gpu_backend::BackendError::GpuLost);
    assert!(s
        .processes_of(DeviceId::Gpu(3))
        .is_ok_and(|l| !l.is_empty()));
}

/// Regression: a process list that failed with NO_PERMISSION (the usual answer inside a
/// container), NOT_SUPPORTED or FUNCTION_NOT_FOUND read as "no processes". It is unknown, with
/// its reason, and the other devices' processes still come.
#[test]
fn a_process_list_that_cannot_be_read_is_unknown_not_empty() {
    use gpu_backend::BackendError;
    for error in [
        BackendError::NoPermission,
        BackendError::NotSupported,
        BackendError::FunctionNotFound,
        BackendError::Unknown(999),
    ] {
        let mut f = load("h100-sxm-8gpu");
        let frame = 4;
        let d = f.frames[frame].devices.get_mut(&DeviceId::Gpu(3)).unwrap();
        d.compute_processes = Answer::Err(error.clone());
        d.graphics_processes = Answer::Err(error.clone());
        let s = snapshot_at(f, frame);
        assert_eq!(s.unknown_processes, [DeviceId::Gpu(3)], "{error:?}");
        let e = s.processes_of(DeviceId::Gpu(3)).unwrap_err();
        assert_eq!((e.query.as_str(), &e.error), ("compute_processes", &error));
        let reasons: Vec<(&str, &BackendError)> = s
            .errors_of(DeviceId::Gpu(3))
            .map(|e| (e.query.as_str(), &e.error))
            .collect();
        assert_eq!(
            reasons,
            [
                ("compute_processes", &error),
                ("graphics_processes", &error)
            ]
        );
        assert!(s.processes.iter().all(|p| p.device != DeviceId::Gpu(3)));
        assert!(s
            .processes_of(DeviceId::Gpu(4))
            .is_ok_and(|l| !l.is_empty()));
    }
}

/// When one list is read and the other fails, the processes read are listed and the failure
/// is reported beside them; a list the device does not support (graphics on a MIG device) is
/// not a failure.
#[test]
fn one_list_failing_keeps_the_processes_of_the_other_and_reports_it() {
    use gpu_backend::BackendError;
    let mut f = load("h100-sxm-8gpu");
    let frame = 4;
    let d = f.frames[frame].devices.get_mut(&DeviceId::Gpu(3)).unwrap();
    d.graphics_processes = Answer::Err(BackendError::NoPermission);
    let s = snapshot_at(f, frame);
    assert!(s.unknown_processes.is_empty());
    assert!(s
        .processes_of(DeviceId::Gpu(3))
        .is_ok_and(|l| !l.is_empty()));
    let reasons: Vec<(DeviceId, &str, &BackendError)> = s
        .errors
        .iter()
        .map(|e| (e.device, e.query.as_str(), &e.error))
        .collect();
    assert_eq!(
        reasons,
        [(
            DeviceId::Gpu(3),
            "graphics_processes",
            &BackendError::NoPermission
        )]
    );

    // h100-mig: every MIG device answers not_supported for graphics, and that is no failure.
    let s = snapshot_at(load("h100-mig"), 10);
    assert!(s.errors.is_empty(), "{:?}", s.errors);
    assert!(s.unknown_processes.is_empty());
}

/// Regression: host facts that are not known (an imported `nvidia-smi -q -x` dump has none
/// beyond the process name) came out as CPU 0.0, RSS 0 and name "": they are N/A.
#[test]
fn unknown_host_facts_are_na_not_zero_or_empty() {
    let mut f = load("h100-sxm-8gpu");
    let frame = 4;
    for facts in f.host.processes.values_mut() {
        facts.name = None;
        facts.cmdline = Vec::new();
    }
    for sample in f.frames[frame].host.processes.values_mut() {
        sample.cpu_percent = None;
        sample.rss = None;
        sample.status = None;
    }
    // And a name recorded as "" is no name either.
    let pid = 40117;
    f.host.processes.get_mut(&pid).unwrap().name = Some(String::new());
    let s = snapshot_at(f, frame);
    assert!(!s.processes.is_empty());
    for p in &s.processes {
        assert!(p.host.visible, "{}", p.pid);
        assert_eq!(p.host.name, None, "{}", p.pid);
        assert_eq!(p.host.cmdline, None, "{}", p.pid);
        assert_eq!(p.host.command, None, "{}", p.pid);
        assert_eq!(p.host.cpu_percent, None, "{}", p.pid);
        assert_eq!(p.host.rss, None, "{}", p.pid);
        assert_eq!(p.host.memory_percent, None, "{}", p.pid);
        assert_eq!(p.host.status, None, "{}", p.pid);
    }
    // What is known still comes.
    assert!(find(&s, pid).host.user.is_some());
}

/// Each process shows its own newest sample: asking the same frame again shows the same
/// figures (nothing newer came, and the kept sample is not dropped), and the next frame shows
/// that frame's samples.
#[test]
fn utilization_is_each_process_newest_sample_kept_between_refreshes() {
    let f = load("h100-sxm-8gpu");
    let newest = |frame: usize, device: DeviceId, pid: u32| -> Option<u32> {
        let Answer::Ok(samples) = &f.frames[frame].devices[&device].process_utilization else {
            return None;
        };
        samples
            .iter()
            .filter(|s| s.pid == pid)
            .max_by_key(|s| s.timestamp_us)
            .map(|s| s.sm)
    };
    let (backend, collector) = collector_at(f.clone(), 5);
    let first = collector.take_all();
    assert!(first.processes.iter().any(|p| p.utilization.sm.is_some()));
    for p in &first.processes {
        assert_eq!(
            p.utilization.sm,
            newest(5, p.device, p.pid),
            "pid {}",
            p.pid
        );
    }
    // The same frame again: the same figures, the same ages.
    let again = collector.take_all();
    assert_eq!(again.processes, first.processes);
    // The next frame brings new samples.
    backend.set_frame(6);
    let next = collector.take_all();
    let mut changed = 0;
    for p in &next.processes {
        let want = newest(6, p.device, p.pid).or_else(|| newest(5, p.device, p.pid));
        assert_eq!(p.utilization.sm, want, "pid {}", p.pid);
        changed += usize::from(newest(6, p.device, p.pid).is_some());
    }
    assert!(changed > 0);
}

#[test]
fn a_snapshot_asks_each_query_once_per_device() {
    // Counted from before the collector is made: the devices' identity (UUIDs, PCI addresses,
    // MIG layout) read when its context is made is kept as their static answers, not asked
    // again by the first snapshot.
    let backend = Arc::new(ReplayBackend::new(load("h100-sxm-8gpu")));
    backend.set_frame(9);
    backend.count_calls(true);
    let collector = ProcessCollector::from_replay(backend.clone()).unwrap();
    let s = collector.take_all();
    let counts = backend.take_call_counts();
    assert_eq!(s.devices.len(), 8);
    assert_eq!(s.processes.len(), 64);
    assert!(counts.repeated().is_empty(), "{:?}", counts.repeated());
    // The events too, once per device (on NVML they are read from the listener's buffer).
    for &id in backend.fixture().devices.keys() {
        let key = gpu_backend::CallKey {
            query: gpu_backend::Query::events,
            arg: None,
            device: Some(id),
        };
        assert_eq!(counts.by_query.get(&key), Some(&1), "events of {id}");
    }
    // Exactly the calls of a bare device snapshot: processes cost no extra backend query, and
    // the identity read with the context is asked once.
    let raw = Arc::new(ReplayBackend::new(backend.fixture().as_ref().clone()));
    raw.set_frame(9);
    raw.count_calls(true);
    let _ = gpu_backend::recorder::snapshot(&*raw);
    // The system's queries (versions, counts, the CUDA order, vGPU modes) are not a device's:
    // the collector asks those elsewhere. The recorder asks everything, the on-request
    // queries too (the inforom's checksum), which a snapshot asks only when its plan names them.
    let device_calls = |c: &gpu_backend::CallCounts| {
        c.by_query
            .iter()
            .filter(|(k, _)| {
                k.device.is_some() && !gpu_devices::ON_REQUEST_QUERIES.contains(&k.query)
            })
            .map(|(_, n)| n)
            .sum::<u64>()
    };
    assert_eq!(device_calls(&counts), device_calls(&raw.take_call_counts()));
}

/// What does not change (the query table's static rows: names, UUIDs, limits, modes, max
/// clocks, MIG layout) is asked on the first refresh only; every later refresh asks only the
/// changing queries, each once per device.
#[test]
fn static_answers_are_read_once_per_session_not_every_refresh() {
    let section = |query: &str| {
        gpu_backend::query::QUERIES
            .iter()
            .find(|q| q.name == query)
            .map_or("hand-written", |q| q.section)
    };
    // Whether `counts` holds a query of the table's `wanted` section.
    let asks = |counts: &gpu_backend::CallCounts, wanted: &str| {
        counts
            .by_query
            .keys()
            .any(|k| section(k.query.as_str()) == wanted)
    };
    for stem in ["h100-sxm-8gpu", "h100-mig"] {
        let (backend, collector) = collector_at(load(stem), 3);
        backend.count_calls(true);
        let first = collector.take_all();
        let on_first = backend.take_call_counts();
        assert!(
            asks(&on_first, "static"),
            "{stem}: the first refresh reads the static answers"
        );
        backend.set_frame(4);
        let later = collector.take_all();
        let on_later = backend.take_call_counts();
        let statics: Vec<_> = on_later
            .by_query
            .keys()
            .filter(|k| section(k.query.as_str()) == "static")
            .collect();
        assert!(statics.is_empty(), "{stem}: asked again: {statics:?}");
        assert!(on_later.repeated().is_empty(), "{stem}");
        assert!(
            asks(&on_later, "dynamic"),
            "{stem}: the changing answers are asked every refresh"
        );
        // The kept answers are the same ones: the devices look the same.
        let names = |s: &gpu_processes::Snapshots| {
            s.devices
                .iter()
                .map(|d| format!("{:?}", d.name))
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&first), names(&later), "{stem}");
    }
}

/// A live test: a real child process, named in a fixture's GPU process list, gets its host
/// facts from this machine (/proc), not from the fixture.
#[test]
fn live_host_facts_of_a_real_child_process() {
    // The child is ours as soon as it is spawned, but it is `sleep` only once it has
    // exec'd: wait for that (bounded), as a real GPU process has long since.
    let mut child = spawn_exec(std::process::Command::new("sleep").arg("30"), b"sleep");
    let pid = child.id();
    let s = live_snapshot(old_driver_running(&[pid], 512 << 20));
    child.kill().ok();
    child.wait().ok();
    let p = find(&s, pid);
    assert!(p.host.visible);
    assert_eq!(p.host.name.as_deref(), Some("sleep"));
    let cmdline = p.host.cmdline.clone().unwrap();
    assert_eq!(cmdline[0], "sleep");
    assert_eq!(cmdline[1], "30");
    assert_eq!(p.host.ppid, Some(std::process::id()));
    let me = std::env::var("USER").ok();
    if let Some(me) = me {
        assert_eq!(p.host.user.as_deref(), Some(me.as_str()));
    } else {
        assert!(p.host.user.is_some());
    }
    let running = p.host.running_time_s.expect("running time");
    assert!(running < 120, "the child started just now: {running} s");
    assert_eq!(p.gpu_memory, Some(512 << 20));
}

/// The frame of the "old-driver" fixture that the live tests add their processes to.
const LIVE_FRAME: usize = 10;

/// The "old-driver" fixture with `pids` added to GPU 0's compute processes at [`LIVE_FRAME`],
/// each using `used_gpu_memory` bytes.
fn old_driver_running(pids: &[u32], used_gpu_memory: u64) -> Fixture {
    let mut f = load("old-driver");
    if let Answer::Ok(list) = &mut f.frames[LIVE_FRAME]
        .devices
        .get_mut(&DeviceId::Gpu(0))
        .unwrap()
        .compute_processes
    {
        list.extend(pids.iter().map(|&pid| gpu_backend::ProcessInfo {
            pid,
            used_gpu_memory: Some(used_gpu_memory),
            gpu_instance_id: None,
            compute_instance_id: None,
        }));
    }
    f
}

/// The processes of `f` at [`LIVE_FRAME`], with their host facts read from this machine's /proc.
fn live_snapshot(f: Fixture) -> Snapshots {
    let backend = Arc::new(ReplayBackend::new(f));
    backend.set_frame(LIVE_FRAME);
    let host: Arc<dyn HostSource> = Arc::new(LiveHost::new());
    ProcessCollector::new(Context::from_backend(backend).unwrap(), host).take_all()
}

/// Whether this test runs as root (who alone may start a process as another user or in a new
/// PID namespace).
fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    // /proc/self belongs to the process's user.
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// A live table: our own child, a PID that has ended, a process of another user and one in
/// another PID namespace. The ended one has N/A facts (`null`, never 0 or ""); the others keep
/// theirs; no row is lost.
#[test]
fn vanished_other_user_and_other_namespace_pids_keep_the_table() {
    let mut mine = spawn_exec(std::process::Command::new("sleep").arg("30"), b"sleep");
    let mut gone = std::process::Command::new("true")
        .spawn()
        .expect("true runs");
    let vanished = gone.id();
    gone.wait().ok();
    let mut others = Vec::new();
    let mut other_user = None;
    let mut other_ns = None;
    if is_root() {
        let child = spawn_exec(
            std::process::Command::new("setpriv").args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "sleep",
                "31",
            ]),
            b"sleep",
        );
        other_user = Some(child.id());
        others.push(child);
        // unshare forks: the sleep inside is PID 1 of the new namespace, a child of unshare.
        let child = std::process::Command::new("unshare")
            .args(["--pid", "--fork", "sleep", "32"])
            .spawn()
            .expect("unshare runs");
        let children = format!("/proc/{0}/task/{0}/children", child.id());
        for _ in 0..500 {
            let inner = std::fs::read_to_string(&children)
                .ok()
                .and_then(|c| c.split_whitespace().next()?.parse::<u32>().ok());
            if let Some(inner) = inner {
                if std::fs::read(format!("/proc/{inner}/cmdline"))
                    .is_ok_and(|c| c.starts_with(b"sleep"))
                {
                    other_ns = Some(inner);
                    break;
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        others.push(child);
        if other_ns.is_none() {
            eprintln!("no new PID namespace could be made here: skipping that process");
        }
    } else {
        eprintln!("not root: skipping the other-user and other-namespace processes");
    }
    let pids: Vec<u32> = [Some(mine.id()), Some(vanished), other_user, other_ns]
        .into_iter()
        .flatten()
        .collect();
    let f = old_driver_running(&pids, 256 << 20);
    let s = live_snapshot(f.clone());
    mine.kill().ok();
    mine.wait().ok();
    for mut c in others {
        c.kill().ok();
        c.wait().ok();
    }
    // Every row is there: the fixture's own processes and ours.
    let recorded = match &f.frames[LIVE_FRAME].devices[&DeviceId::Gpu(0)].compute_processes {
        Answer::Ok(list) => list.len(),
        _ => 0,
    };
    assert_eq!(
        s.processes
            .iter()
            .filter(|p| p.device == DeviceId::Gpu(0))
            .count(),
        recorded
    );
    let p = find(&s, mine.id());
    assert!(p.host.visible);
    assert_eq!(p.host.name.as_deref(), Some("sleep"));
    let p = find(&s, vanished);
    assert_eq!(p.gpu_memory, Some(256 << 20), "the GPU side is kept");
    assert_eq!(p.host, gpu_processes::HostProcess::default(), "all N/A");
    let json = serde_json::to_value(&p.host).unwrap();
    assert_eq!(json["user"], serde_json::Value::Null);
    assert_eq!(json["rss"], serde_json::Value::Null);
    if let Some(pid) = other_user {
        let p = find(&s, pid);
        assert!(p.host.visible);
        // /proc/<pid>/stat, status and cmdline are world-readable: another user's process is
        // fully known, under its own name (or uid, when it has no name).
        let user = p.host.user.as_deref().expect("a user");
        assert_ne!(user, "root");
        assert!(user == "nobody" || user == "65534", "{user}");
        assert_eq!(
            p.host.cmdline.as_ref().map(|c| c[0].as_str()),
            Some("sleep")
        );
    }
    if let Some(pid) = other_ns {
        let p = find(&s, pid);
        assert!(p.host.visible);
        assert_eq!(p.host.ns_pid, Some(1), "PID 1 of its own namespace");
        assert_eq!(p.host.name.as_deref(), Some("sleep"));
    }
}

fn gpu_lost() -> &'static Fixture {
    static FIXTURE: std::sync::OnceLock<Fixture> = std::sync::OnceLock::new();
    FIXTURE.get_or_init(|| load("gpu-lost"))
}

/// What a process list answers in a property test: the recorded list (`None`) or an error.
fn list_answer() -> impl proptest::strategy::Strategy<Value = Option<gpu_backend::BackendError>> {
    use gpu_backend::BackendError;
    proptest::option::of(proptest::sample::select(vec![
        BackendError::NoPermission,
        BackendError::NotSupported,
        BackendError::FunctionNotFound,
        BackendError::GpuLost,
        BackendError::Unknown(999),
    ]))
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    /// Whatever each device's compute and graphics lists answer: its processes are unknown
    /// exactly when neither list was read; every list that failed is reported with its query
    /// and error, except `not_supported` beside a list that was read; and the processes of the
    /// lists read are all listed, those of the others not.
    #[test]
    fn a_failed_process_list_never_reads_as_no_processes(
        answers in proptest::collection::vec((list_answer(), list_answer()), 4)
    ) {
        use std::collections::BTreeSet;
        let frame = 5;
        let mut f = gpu_lost().clone();
        let recorded = f.frames[frame].devices.clone();
        for (i, (compute, graphics)) in answers.iter().enumerate() {
            let d = f.frames[frame].devices.get_mut(&DeviceId::Gpu(i as u32)).unwrap();
            if let Some(e) = compute {
                d.compute_processes = Answer::Err(e.clone());
            }
            if let Some(e) = graphics {
                d.graphics_processes = Answer::Err(e.clone());
            }
        }
        let s = snapshot_at(f, frame);
        for (i, (compute, graphics)) in answers.iter().enumerate() {
            let id = DeviceId::Gpu(i as u32);
            let unknown = compute.is_some() && graphics.is_some();
            proptest::prop_assert_eq!(s.unknown_processes.contains(&id), unknown);
            let mut want_errors = Vec::new();
            let mut want_pids = BTreeSet::new();
            for (query, answer, list) in [
                ("compute_processes", compute, &recorded[&id].compute_processes),
                ("graphics_processes", graphics, &recorded[&id].graphics_processes),
            ] {
                match answer {
                    None => want_pids.extend(list.ok().unwrap().iter().map(|p| p.pid)),
                    Some(e) if unknown || *e != gpu_backend::BackendError::NotSupported => {
                        want_errors.push((query, e.clone()));
                    }
                    Some(_) => {}
                }
            }
            let got_errors: Vec<(&str, gpu_backend::BackendError)> = s
                .errors_of(id)
                .map(|e| (e.query.as_str(), e.error.clone()))
                .collect();
            proptest::prop_assert_eq!(got_errors, want_errors);
            match s.processes_of(id) {
                Ok(list) => {
                    proptest::prop_assert!(!unknown);
                    let got: BTreeSet<u32> = list.iter().map(|p| p.pid).collect();
                    proptest::prop_assert_eq!(got, want_pids);
                }
                Err(e) => {
                    proptest::prop_assert!(unknown);
                    proptest::prop_assert_eq!(e.query.as_str(), "compute_processes");
                    proptest::prop_assert_eq!(Some(&e.error), compute.as_ref());
                }
            }
        }
    }
}
