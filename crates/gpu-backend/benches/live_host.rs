//! The cost of container and pod attribution in the live host source: the first look-up of a
//! process (which reads its facts and cgroup file and, for a process in a pod the host has no
//! listing for, lists the kubelet's container-log directory) without a container, in a pod,
//! and in a pod whose listing is kept; and a later look-up (a refresh), which reads
//! `/proc/<pid>/stat` only whatever the process's container.
//!
//! The roots are a temporary directory laid out like `/proc` and `/var/log/containers`
//! (`LiveHost::with_roots`), so the figures do not depend on this machine's processes.
//!
//! Run with `cargo bench -p gpu-backend --bench live_host`.

use std::hint::black_box;
use std::path::Path;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use gpu_backend::host::{HostSource, LiveHost};
use gpu_backend::HostRoots;

const NO_CONTAINER: u32 = 1001;
/// A process looked up before each measurement, so that what is read once per session (the
/// machine facts, `/etc/passwd` for user names) is not measured.
const WARM: u32 = 1000;
const IN_POD: u32 = 1002;
/// Another process of the same container.
const IN_POD_TOO: u32 = 1003;
/// Entries in the container-log directory: a busy node.
const LOG_ENTRIES: usize = 250;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

fn lay_out(root: &Path) -> HostRoots {
    let proc = root.join("proc");
    write(
        &proc.join("meminfo"),
        "MemTotal: 16000000 kB\nMemAvailable: 8000000 kB\n",
    );
    write(
        &proc.join("stat"),
        "cpu  1 2 3 4 5 6 7 0 0 0\nbtime 1700000000\n",
    );
    write(&proc.join("sys/kernel/hostname"), "bench\n");
    let id = "3c5e7a9b1d2f4a6c8e0b2d4f6a8c0e2b4d6f8a0c2e4b6d8f0a2c4e6b8d0f2a4c";
    let in_pod = format!(
        "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6f1d2a9e_3b4c_4d5e_8f60_718293a4b5c6.slice/cri-containerd-{id}.scope\n"
    );
    for (pid, cgroup) in [
        (
            WARM,
            "0::/user.slice/user-1000.slice/session-1.scope\n".to_string(),
        ),
        (
            NO_CONTAINER,
            "0::/user.slice/user-1000.slice/session-2.scope\n".to_string(),
        ),
        (IN_POD, in_pod.clone()),
        (IN_POD_TOO, in_pod),
    ] {
        let dir = proc.join(pid.to_string());
        write(
            &dir.join("stat"),
            &format!("{pid} (python3) S 1 {pid} {pid} 0 -1 4194560 150 0 0 0 31 7 0 0 20 0 1 0 123456 10000000 321 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0\n"),
        );
        write(&dir.join("cmdline"), "python3\0train.py\0--epochs\x0030\0");
        write(
            &dir.join("status"),
            &format!("Name:\tpython3\nUid:\t0\t0\t0\t0\nNSpid:\t{pid}\t7\n"),
        );
        write(&dir.join("cgroup"), &cgroup);
    }
    let logs = root.join("containers");
    for i in 0..LOG_ENTRIES {
        write(
            &logs.join(format!("pod-{i}_ns-{i}_c-{:064x}.log", i + 1)),
            "",
        );
    }
    write(&logs.join(format!("finetune-a-0_ml_trainer-{id}.log")), "");
    HostRoots {
        proc,
        container_logs: logs,
    }
}

fn bench(c: &mut Criterion) {
    let root =
        std::env::temp_dir().join(format!("gpuscope-bench-live-host-{}", std::process::id()));
    let roots = lay_out(&root);
    let fresh = || {
        let host = LiveHost::with_roots(roots.clone());
        black_box(host.lookup(WARM));
        host
    };
    let pod = fresh().lookup(IN_POD).and_then(|l| l.facts.container);
    assert_eq!(
        pod.as_ref().and_then(|c| c.pod.as_deref()),
        Some("finetune-a-0"),
        "the bench reads a pod"
    );
    assert!(fresh()
        .lookup(NO_CONTAINER)
        .is_some_and(|l| l.facts.container.is_none()));

    let mut g = c.benchmark_group("live-host");
    g.bench_function("first-lookup/no-container", |b| {
        b.iter_batched_ref(
            fresh,
            |h| black_box(h.lookup(NO_CONTAINER)),
            BatchSize::SmallInput,
        )
    });
    g.bench_function("first-lookup/in-pod-250-log-entries", |b| {
        b.iter_batched_ref(
            fresh,
            |h| black_box(h.lookup(IN_POD)),
            BatchSize::SmallInput,
        )
    });
    // A second process of a pod whose entry the host's kept listing has: no listing.
    g.bench_function("first-lookup/in-pod-listing-kept", |b| {
        b.iter_batched_ref(
            || {
                let h = fresh();
                h.lookup(IN_POD);
                h
            },
            |h| black_box(h.lookup(IN_POD_TOO)),
            BatchSize::SmallInput,
        )
    });
    let warm = fresh();
    warm.lookup(IN_POD);
    g.bench_function("refresh/in-pod", |b| {
        b.iter(|| black_box(warm.lookup(IN_POD)))
    });
    let warm = fresh();
    warm.lookup(NO_CONTAINER);
    g.bench_function("refresh/no-container", |b| {
        b.iter(|| black_box(warm.lookup(NO_CONTAINER)))
    });
    g.finish();
    std::fs::remove_dir_all(&root).ok();
}

criterion_group!(benches, bench);
criterion_main!(benches);
