//! nvitop's API reference, example by example, for this crate (docs/nvitop-api.md is the
//! table): `HostProcess`, `HostProcess.oneshot`, `GpuProcess.failsafe`, `take_snapshots` and the
//! quick start's process table, over the scenario fixtures (and this test's own process for
//! `HostProcess()`). Each test is named after the example it shows; the values come from the
//! fixture files, read here as plain JSON.

use std::path::PathBuf;
use std::sync::Arc;

use gpu_backend::host::{HostSource, LiveHost};
use gpu_backend::DeviceId;
use gpu_devices::{bytes2human, CudaDeviceOrder, Na};
use gpu_processes::{command_join, ProcessCollector, ProcessGone, ProcessHandle};
use serde_json::Value;

fn path(stem: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../../fixtures/{stem}.json"))
}

/// A fixture file as plain JSON, to take expectations from independently of the code.
fn json(stem: &str) -> Value {
    serde_json::from_slice(&std::fs::read(path(stem)).unwrap()).unwrap()
}

/// The PIDs each device lists in a frame (compute and graphics lists merged), from the JSON.
fn listed(j: &Value, frame: usize, device: &str) -> Vec<u64> {
    let mut pids: Vec<u64> = ["compute_processes", "graphics_processes"]
        .iter()
        .filter_map(|list| j["frames"][frame]["devices"][device][list]["ok"].as_array())
        .flatten()
        .map(|p| p["pid"].as_u64().unwrap())
        .collect();
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// A recorded process's command line, from the JSON.
fn cmdline_of(facts: &Value) -> Vec<String> {
    facts["cmdline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

/// `HostProcess`'s examples. `HostProcess()` is this process, read live; the others a
/// recorded process: the same PID gives equal handles (nvitop: the same instance), and its
/// command line is joined as nvitop joins it (`python3 -c "import IPython; ..."` in the seed;
/// the fixture has a Dask worker started with `python -c "..."`).
#[test]
fn host_process_examples() {
    // HostProcess(): the current process.
    let live: Arc<dyn HostSource> = Arc::new(LiveHost::new());
    let me = ProcessHandle::current(live).expect("this process is seen");
    assert_eq!(me.pid(), std::process::id());
    let mine = me.snapshot().expect("this process runs");
    assert_eq!(mine.cmdline, Some(std::env::args().collect::<Vec<_>>()));

    let stem = "h100-sxm-8gpu";
    let j = json(stem);
    let frame = 3;
    let collector = ProcessCollector::from_fixture(path(stem), Some(frame)).unwrap();
    let pid = 33021;
    let facts = &j["host"]["processes"][pid.to_string()];

    // p1 = HostProcess(12345); p2 = HostProcess(12345); p1 is p2; copy.deepcopy(p1) is p1
    let p1 = ProcessHandle::new(collector.host().clone(), pid).unwrap();
    let p2 = ProcessHandle::new(collector.host().clone(), pid).unwrap();
    assert_eq!(p1, p2);
    assert_eq!(p1.clone(), p1);
    assert_eq!(p1.start_time_s(), facts["start_time_s"].as_u64());

    // p.cmdline(); p.command()  (shell-escaped, as nvitop joins it)
    let snap = p1.snapshot().unwrap(); // p.as_snapshot()
    let cmdline = cmdline_of(facts);
    assert_eq!(snap.cmdline.as_ref(), Some(&cmdline));
    assert_eq!(cmdline[1], "-c");
    assert!(cmdline[2].contains(' ') && !cmdline[2].contains('"'));
    let want = format!(
        "{} -c \"{}\" {}",
        cmdline[0],
        cmdline[2],
        cmdline[3..].join(" ")
    );
    assert_eq!(snap.command.as_deref(), Some(want.as_str()));

    // p.as_snapshot(): the rest of the facts, at the frame.
    let now = &j["frames"][frame]["host"]["processes"][pid.to_string()];
    assert_eq!(snap.name.as_deref(), facts["name"].as_str());
    assert_eq!(snap.user.as_deref(), facts["user"].as_str());
    assert_eq!(snap.status.as_deref(), now["status"].as_str());
    assert_eq!(snap.cpu_percent, now["cpu_percent"].as_f64());
    assert_eq!(snap.create_time_s, facts["start_time_s"].as_u64());
    assert_eq!(snap.ppid, facts["ppid"].as_u64().map(|p| p as u32));
}

/// `HostProcess.oneshot`: `name()`, `cpu_times()`, `cpu_percent()`, `create_time()` from one
/// read. A handle's `snapshot()` is that read; its fields ask nothing more. (psutil's
/// `cpu_times` split is not kept; CPU percent and running time are.)
#[test]
fn host_process_oneshot_examples() {
    let stem = "geforce-desktop";
    let j = json(stem);
    let frame = j["frames"].as_array().unwrap().len() - 1;
    let collector = ProcessCollector::from_fixture(path(stem), Some(frame)).unwrap();
    let pid = 23110; // blender
    let p = ProcessHandle::new(collector.host().clone(), pid).unwrap();
    let facts = &j["host"]["processes"][pid.to_string()];
    let now = &j["frames"][frame]["host"]["processes"][pid.to_string()];

    let once = p.snapshot().unwrap(); // with p.oneshot():
    assert_eq!(once.name.as_deref(), facts["name"].as_str()); // p.name()
    assert_eq!(once.cpu_percent, now["cpu_percent"].as_f64()); // p.cpu_percent()
    let created = facts["start_time_s"].as_u64().unwrap();
    assert_eq!(once.create_time_s, Some(created)); // p.create_time()
    assert!(once.running_time_s.is_some() && once.running_time_human.is_some());
}

/// `GpuProcess.failsafe`: a process that does not exist on device 0. Asking for it is an
/// error naming it (nvitop raises `NoSuchProcess`); with failsafe its values are N/A, which
/// print `N/A`, are NaN as floats and 0 as integers.
#[test]
fn gpu_process_failsafe_examples() {
    let stem = "geforce-desktop";
    let j = json(stem);
    let collector = ProcessCollector::from_fixture(path(stem), Some(0)).unwrap();
    let pid = 10000;
    assert!(!listed(&j, 0, "0").contains(&u64::from(pid)));
    assert!(j["host"]["processes"][pid.to_string()].is_null());
    let wanted = [(DeviceId::Gpu(0), pid)];

    // p.cpu_percent() -> NoSuchProcess
    let err = collector
        .take_process_snapshots(&wanted, false)
        .unwrap_err();
    assert_eq!(
        err,
        ProcessGone {
            device: DeviceId::Gpu(0),
            pid
        }
    );

    // with GpuProcess.failsafe(): ...
    let p = collector
        .take_process_snapshots(&wanted, true)
        .unwrap()
        .remove(0);
    let cpu: Na<f64> = p.host.cpu_percent.into();
    assert_eq!(
        format!("fallback:              {cpu}"),
        "fallback:              N/A"
    );
    assert!(cpu.to_f64().is_nan()); // float(p.cpu_percent())
    assert_eq!(cpu.unwrap_or_default(), 0.0); // int(p.cpu_percent())
    let memory: Na<u64> = p.gpu_memory.into();
    assert_eq!(memory.to_string(), "N/A"); // gpu_memory=N/A in the repr
    assert_eq!(p.kind_str(), "N/A"); // type=N/A in the repr
    assert!(!p.host.visible);
}

/// `take_snapshots`' examples: every device and its processes; devices only; CUDA's devices
/// under `CUDA_VISIBLE_DEVICES=1,0` (PCI order), and CUDA device 1 only.
#[test]
fn take_snapshots_examples() {
    let stem = "h100-sxm-8gpu";
    let j = json(stem);
    let frame = 3;
    let collector = ProcessCollector::from_fixture(path(stem), Some(frame)).unwrap();
    let ctx = collector.context();

    // take_snapshots(): every device and every GPU process on it.
    let all = collector.take_all();
    assert_eq!(all.devices.len(), j["devices"].as_object().unwrap().len());
    for d in &all.devices {
        let key = d.id.to_string();
        let mut pids: Vec<u64> = all
            .processes
            .iter()
            .filter(|p| p.device == d.id)
            .map(|p| u64::from(p.pid))
            .collect();
        pids.sort_unstable();
        assert_eq!(pids, listed(&j, frame, &key), "device {key}");
    }

    // device_snapshots, _ = take_snapshots(gpu_processes=False)
    let devices_only = ctx.snapshot_all().devices;
    let ids: Vec<DeviceId> = devices_only.iter().map(|d| d.id).collect();
    assert_eq!(ids, all.devices.iter().map(|d| d.id).collect::<Vec<_>>());

    // take_snapshots(Device.cuda.all()) with CUDA_VISIBLE_DEVICES=1,0
    let cuda = ctx.cuda_devices_for(Some("1,0"), CudaDeviceOrder::PciBusId);
    let s = collector.take_cuda_snapshots(&cuda);
    let shown: Vec<(Option<u32>, DeviceId)> =
        s.devices.iter().map(|d| (d.cuda_index, d.id)).collect();
    assert_eq!(
        shown,
        [(Some(0), DeviceId::Gpu(1)), (Some(1), DeviceId::Gpu(0))]
    );
    let expected = listed(&j, frame, "1").len() + listed(&j, frame, "0").len();
    assert_eq!(s.processes.len(), expected);

    // take_snapshots(Device.cuda(1)): <CUDA 1> only, which is GPU 0.
    let one = collector.take_cuda_snapshots(&cuda[1..]);
    assert_eq!(one.devices.len(), 1);
    assert_eq!(
        (one.devices[0].cuda_index, one.devices[0].id),
        (Some(1), DeviceId::Gpu(0))
    );
    let mut pids: Vec<u64> = one.processes.iter().map(|p| u64::from(p.pid)).collect();
    pids.sort_unstable();
    assert_eq!(pids, listed(&j, frame, "0"));
}

/// The quick start's second script: per CUDA device, its processes as failsafe snapshots
/// sorted by (user, PID), with `WDDM:N/A` where the driver gives no per-process memory, over
/// the Windows fixture.
#[test]
fn quick_start_process_table() {
    let stem = "windows-wddm";
    let j = json(stem);
    let collector = ProcessCollector::from_fixture(path(stem), Some(0)).unwrap();
    let ctx = collector.context();
    let mut shown = 0;
    for device in ctx.cuda_devices_for(None, CudaDeviceOrder::PciBusId) {
        // processes = device.processes()
        let snap = device.snapshot();
        let listed_pids = listed(&j, 0, &device.id().to_string());
        let wanted: Vec<(DeviceId, u32)> = snap
            .processes()
            .into_option()
            .map(|ps| ps.iter().map(|p| (device.id(), p.pid)).collect())
            .unwrap_or_default();
        assert_eq!(wanted.len(), listed_pids.len());
        // GpuProcess.take_snapshots(processes.values(), failsafe=True), sorted.
        let mut rows = collector.take_process_snapshots(&wanted, true).unwrap();
        rows.sort_by(|a, b| (&a.host.user, a.pid).cmp(&(&b.host.user, b.pid)));
        let mut last: Option<(Option<String>, u32)> = None;
        for p in &rows {
            let key = (p.host.user.clone(), p.pid);
            assert!(last.as_ref().is_none_or(|l| *l <= key), "sorted");
            last = Some(key);

            // The script's row, from our values ...
            let user = p.host.user.as_deref().unwrap_or("N/A");
            let got = row(
                p.pid,
                user,
                Na::from(p.host.cpu_percent),
                Na::from(p.host.rss.map(bytes2human)),
                p.host.running_time_human.as_deref().unwrap_or("N/A"),
                p.gpu_memory_human.as_deref().unwrap_or("WDDM:N/A"),
                Na::from(p.utilization.sm),
                p.host.command.as_deref().unwrap_or("N/A"),
            );
            // ... and from the recording's.
            let facts = &j["host"]["processes"][p.pid.to_string()];
            let now = &j["frames"][0]["host"]["processes"][p.pid.to_string()];
            let rss = now["rss"].as_u64().unwrap();
            assert!((1 << 20..100 << 30).contains(&rss), "shown in MiB");
            let cmdline = cmdline_of(facts);
            let want = row(
                p.pid,
                facts["user"].as_str().unwrap(),
                Na::Value(now["cpu_percent"].as_f64().unwrap()),
                Na::Value(format!("{}MiB", (rss as f64 / 1048576.0).round())),
                p.host.running_time_human.as_deref().unwrap_or("N/A"),
                "WDDM:N/A", // WDDM gives no per-process memory
                Na::NotAvailable,
                // nvitop's joining, checked against nvitop's own output in gpu-processes.
                &command_join(&cmdline),
            );
            assert_eq!(got, want);
            shown += 1;
        }
    }
    assert!(shown > 0, "the Windows fixture has processes");
}

/// One row of the quick start's table: `'    {pid:<5}  {username:<8} {cpu:>5}  {host_memory:>8}
/// {time:>8}  {gpu_memory:>8}  {sm:>3}  {command:<}'`, the user name cut to eight characters
/// with `+` when longer.
#[allow(clippy::too_many_arguments)]
fn row(
    pid: u32,
    user: &str,
    cpu: Na<f64>,
    host_memory: Na<String>,
    time: &str,
    gpu_memory: &str,
    sm: Na<u32>,
    command: &str,
) -> String {
    let chars: Vec<char> = user.chars().collect();
    let user: String = if chars.len() > 8 {
        chars[..7].iter().chain(['+'].iter()).collect()
    } else {
        user.to_string()
    };
    let cpu = cpu.map(|c| format!("{c:.1}"));
    format!("    {pid:<5}  {user:<8} {cpu:>5}  {host_memory:>8} {time:>8}  {gpu_memory:>8}  {sm:>3}  {command}")
}
