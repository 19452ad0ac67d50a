//! `take_snapshots` over the 8-GPU fixture with 64 processes: time, backend calls and host
//! look-ups per snapshot, beside a bare device snapshot of the same devices; and over the
//! k8s-time-slicing fixture with live host facts, with and without container attribution.
//!
//! Run with `cargo bench -p gpu-processes --bench take_snapshots`.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use gpu_backend::host::{HostSource, LiveHost};
use gpu_backend::{Fixture, HostRoots, ReplayBackend};
use gpu_devices::Context;
use gpu_processes::ProcessCollector;

fn bench(c: &mut Criterion) {
    let path = format!(
        "{}/../../fixtures/h100-sxm-8gpu.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let fixture = Fixture::load(path).unwrap_or_else(|e| panic!("{e}"));
    let backend = Arc::new(ReplayBackend::new(fixture));
    backend.set_frame(10);
    let collector =
        ProcessCollector::from_replay(backend.clone()).unwrap_or_else(|e| panic!("{e}"));
    let devices = collector.context().all_devices();

    backend.count_calls(true);
    let snap = collector.take_snapshots(&devices);
    let calls = backend.take_call_counts();
    backend.count_calls(false);
    println!(
        "h100-sxm-8gpu: {} devices, {} processes, {} backend calls ({} asked twice), {} host look-ups per snapshot",
        snap.devices.len(),
        snap.processes.len(),
        calls.total(),
        calls.repeated().len(),
        snap.host_lookups
    );

    c.bench_function("take_snapshots/h100-sxm-8gpu", |b| {
        b.iter(|| black_box(collector.take_snapshots(black_box(&devices))))
    });
    c.bench_function("device-snapshots-only/h100-sxm-8gpu", |b| {
        b.iter(|| black_box(devices.iter().map(|d| d.snapshot()).collect::<Vec<_>>()))
    });
}

/// Lays out `root` like `/proc` for the host processes of `fixture` (in their recorded pods, or
/// all outside containers when `pods` is false) and a container-log directory with their
/// entries among 250 others.
fn lay_out_host(fixture: &Fixture, root: &std::path::Path, pods: bool) -> HostRoots {
    let write = |path: std::path::PathBuf, text: &str| {
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    };
    let proc = root.join("proc");
    let logs = root.join("containers");
    write(
        proc.join("meminfo"),
        "MemTotal: 16000000 kB\nMemAvailable: 8000000 kB\n",
    );
    write(
        proc.join("stat"),
        "cpu  1 2 3 4 5 6 7 0 0 0\nbtime 1700000000\n",
    );
    for i in 0..250 {
        write(logs.join(format!("pod-{i}_ns_c-{:064x}.log", i + 1)), "");
    }
    for (pid, facts) in &fixture.host.processes {
        let dir = proc.join(pid.to_string());
        write(
            dir.join("stat"),
            &format!("{pid} (python3) S 1 {pid} {pid} 0 -1 0 0 0 0 0 31 7 0 0 20 0 1 0 123456 1000 321\n"),
        );
        write(dir.join("cmdline"), &(facts.cmdline.join("\0") + "\0"));
        write(
            dir.join("status"),
            &format!("Name:\tpython3\nUid:\t0\t0\t0\t0\nNSpid:\t{pid}\t7\n"),
        );
        let cgroup = match facts.container.as_ref().filter(|_| pods) {
            Some(c) => {
                let qos = c.qos_class.as_deref().unwrap_or("").to_ascii_lowercase();
                let slice = if qos == "guaranteed" {
                    String::new()
                } else {
                    format!("-{qos}")
                };
                let uid = c.pod_uid.as_deref().unwrap_or("").replace('-', "_");
                let id = c.id.as_deref().unwrap_or("");
                let (pod, ns, name) = (
                    c.pod.as_deref().unwrap_or(""),
                    c.namespace.as_deref().unwrap_or(""),
                    c.container.as_deref().unwrap_or(""),
                );
                write(logs.join(format!("{pod}_{ns}_{name}-{id}.log")), "");
                format!("0::/kubepods.slice/kubepods{slice}.slice/kubepods{slice}-pod{uid}.slice/cri-containerd-{id}.scope\n")
            }
            None => "0::/user.slice/user-1000.slice/session-2.scope\n".to_string(),
        };
        write(dir.join("cgroup"), &cgroup);
    }
    HostRoots {
        proc,
        container_logs: logs,
    }
}

/// `take_snapshots` over k8s-time-slicing (3 devices with processes, 6 processes, 4 pods) with
/// live host facts from a laid-out `/proc`: the first refresh (every process's facts read, its
/// cgroup and, in pods, one container-log listing) and later ones, with the processes in their
/// pods and all outside containers. The difference is what attribution costs.
fn bench_live(c: &mut Criterion) {
    let path = format!(
        "{}/../../fixtures/k8s-time-slicing.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let fixture = Fixture::load(path).unwrap_or_else(|e| panic!("{e}"));
    let root = std::env::temp_dir().join(format!("gpuscope-bench-k8s-{}", std::process::id()));
    let mut g = c.benchmark_group("take_snapshots/k8s-time-slicing-live-host");
    for (pods, label) in [(true, "in-pods"), (false, "no-containers")] {
        let roots = lay_out_host(&fixture, &root.join(label), pods);
        let backend = Arc::new(ReplayBackend::new(fixture.clone()));
        backend.set_frame(4);
        let collector = || {
            let context = Context::from_backend(backend.clone()).unwrap_or_else(|e| panic!("{e}"));
            let host = Arc::new(LiveHost::with_roots(roots.clone()));
            host.machine();
            ProcessCollector::new(context, host)
        };
        let first = collector();
        let devices = first.context().all_devices();
        let snap = first.take_snapshots(&devices);
        let in_pods = snap
            .processes
            .iter()
            .filter(|p| p.host.container.as_ref().is_some_and(|c| c.pod.is_some()))
            .count();
        assert_eq!(in_pods, if pods { 5 } else { 0 }, "{label}");
        g.bench_function(format!("first-refresh/{label}"), |b| {
            b.iter_batched_ref(
                collector,
                |c| black_box(c.take_snapshots(black_box(&devices))),
                BatchSize::SmallInput,
            )
        });
        g.bench_function(format!("later-refresh/{label}"), |b| {
            b.iter(|| black_box(first.take_snapshots(black_box(&devices))))
        });
    }
    g.finish();
    std::fs::remove_dir_all(&root).ok();
}

criterion_group!(benches, bench, bench_live);
criterion_main!(benches);
