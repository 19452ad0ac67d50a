//! Containers and pods end to end on this machine: a live child process is moved into a real
//! cgroup under a kubepods-style path, given a kubelet container-log entry in a temporary
//! directory, and served as a GPU process through fake-nvml; `snapshot --json` and the
//! exporter's `/metrics` must name its pod, namespace and container.
//!
//! Needs to create cgroups (root, as CI runs). Where the kernel refuses (no cgroup mount, no
//! permission, a read-only hierarchy), the test says why on stderr and passes without checking.

use crate::support::{edited_fixture, export_support};

use std::path::{Path, PathBuf};
use std::process::Command;

use export_support::{cli, Exporter};
use serde_json::{json, Value};

/// A cgroup this test made, removed (after its process is killed) when dropped.
struct Cgroup {
    /// The directories made, outermost first.
    made: Vec<PathBuf>,
    child: std::process::Child,
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for dir in self.made.iter().rev() {
            // A cgroup is removed once empty; the killed child may take a moment to leave.
            for _ in 0..100 {
                if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    }
}

/// The mount point of the cgroup v2 hierarchy, else of a v1 hierarchy, from
/// `/proc/self/mountinfo`, and which version it is.
fn cgroup_mount() -> Option<(PathBuf, &'static str)> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mounts: Vec<(String, String)> = info
        .lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let point = left.split_whitespace().nth(4)?.to_string();
            let fstype = right.split_whitespace().next()?.to_string();
            Some((point, fstype))
        })
        .collect();
    if let Some((p, _)) = mounts.iter().find(|(_, t)| t == "cgroup2") {
        return Some((PathBuf::from(p), "v2"));
    }
    mounts
        .iter()
        .find(|(_, t)| t == "cgroup")
        .map(|(p, _)| (PathBuf::from(p), "v1"))
}

/// Makes `path` under the cgroup mount and moves a new `sleep 1000` into it; `Err(reason)`
/// where the kernel refuses.
fn cgroup_with_child(root: &Path, path: &str) -> Result<Cgroup, String> {
    let mut made = Vec::new();
    let mut dir = root.to_path_buf();
    for part in path.split('/') {
        dir.push(part);
        if !dir.exists() {
            std::fs::create_dir(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
            made.push(dir.clone());
        }
    }
    let child = Command::new("sleep")
        .arg("1000")
        .spawn()
        .map_err(|e| format!("sleep: {e}"))?;
    let pid = child.id();
    let group = Cgroup { made, child };
    std::fs::write(dir.join("cgroup.procs"), pid.to_string())
        .map_err(|e| format!("moving PID {pid} into {}: {e}", dir.display()))?;
    // The child is `sleep` once it has exec'd.
    for _ in 0..200 {
        if std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c.starts_with(b"sleep")) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    Ok(group)
}

/// old-driver.json with `pid` on GPU 0 (200 MiB, 37% of the SMs) in every frame.
fn fixture_with(pid: u32, path: &Path) {
    let mut f: Value = serde_json::from_str(
        &std::fs::read_to_string(edited_fixture::scenario("old-driver")).unwrap(),
    )
    .unwrap();
    edited_fixture::add_compute_process(&mut f, pid, 200 << 20);
    edited_fixture::write(&f, path);
}

/// fake-nvml's library, installed as `libnvidia-ml.so.1` in `dir`.
fn fake_nvml(dir: &Path) -> PathBuf {
    let exe = std::env::current_exe().expect("test exe");
    let lib = fake_nvml::find_cdylib(&exe).expect("cargo builds fake-nvml as a dev-dependency");
    fake_nvml::install(&lib, dir).expect("install").nvml
}

#[test]
fn a_process_in_a_kubepods_cgroup_shows_its_pod_in_snapshot_and_metrics() {
    let Some((root, version)) = cgroup_mount() else {
        eprintln!("SKIPPED: no cgroup hierarchy is mounted here");
        return;
    };
    // A pod UID and container id of this run, so that runs never collide.
    let me = std::process::id();
    let uid = format!("{me:08x}-0000-4000-8000-00000000abcd");
    let id = format!("{me:08x}{}", "c".repeat(56));
    let path = format!(
        "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/cri-containerd-{id}.scope",
        uid.replace('-', "_")
    );
    let group = match cgroup_with_child(&root, &path) {
        Ok(g) => g,
        Err(reason) => {
            eprintln!(
                "SKIPPED: the kernel refused a cgroup ({version} at {}): {reason}",
                root.display()
            );
            return;
        }
    };
    eprintln!("cgroup {version} at {}", root.display());
    let pid = group.child.id();
    let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    assert!(
        cgroup.contains(&path),
        "the child is in the cgroup: {cgroup}"
    );

    let tmp = std::env::temp_dir().join(format!("gpuscope-pods-live-{me}"));
    let logs = tmp.join("containers");
    std::fs::create_dir_all(&logs).unwrap();
    std::fs::write(logs.join(format!("trainer-0_ml-team_worker-{id}.log")), "").unwrap();
    // Another pod's entry, which must not be taken for this one.
    std::fs::write(
        logs.join(format!("web-1_default_nginx-{}.log", "d".repeat(64))),
        "",
    )
    .unwrap();
    let fixture = tmp.join("fixture.json");
    fixture_with(pid, &fixture);
    let lib = fake_nvml(&tmp.join("lib"));
    let env = [
        (fake_nvml::FIXTURE_ENV, fixture.to_str().unwrap()),
        (fake_nvml::FRAME_ENV, "0"),
    ];
    let common = [
        "--nvml-lib",
        lib.to_str().unwrap(),
        "--container-logs",
        logs.to_str().unwrap(),
    ];

    let v = cli::json(cli::command(&["snapshot", "--json"]).args(common).envs(env));
    let procs = v["devices"][0]["processes"].as_array().expect("a list");
    let p = procs
        .iter()
        .find(|p| p["pid"] == pid)
        .expect("the child is served");
    assert_eq!(p["pod"], "trainer-0", "{p}");
    assert_eq!(p["namespace"], "ml-team", "{p}");
    assert_eq!(p["container"], "worker", "{p}");
    assert_eq!(p["container_id"], id.as_str(), "{p}");
    assert_eq!(p["container_runtime"], "containerd", "{p}");
    assert_eq!(p["pod_uid"], uid.as_str(), "{p}");
    assert_eq!(p["qos_class"], "Burstable", "{p}");
    // The recording's other processes are not this machine's: never a guessed pod.
    for other in procs.iter().filter(|p| p["pid"] != pid) {
        assert!(other["pod"].is_null(), "{other}");
    }

    let exp = Exporter::start_with_env(&[&common[..], &["--processes"]].concat(), &env);
    let m = exp.scrape();
    let pid_s = pid.to_string();
    let series = m.find(
        "gpuscope_process_gpu_memory_bytes",
        &[
            ("pid", &pid_s),
            ("pod", "trainer-0"),
            ("namespace", "ml-team"),
            ("container", "worker"),
        ],
    );
    assert_eq!(series.len(), 1, "the process series carries its pod");
    let pod = [
        ("index", "0"),
        ("pod", "trainer-0"),
        ("namespace", "ml-team"),
    ];
    assert_eq!(
        m.value("gpuscope_pod_gpu_memory_bytes", &pod),
        Some(209_715_200.0)
    );
    assert_eq!(m.value("gpuscope_pod_processes", &pod), Some(1.0));
    drop(exp);
    drop(group);
    std::fs::remove_dir_all(&tmp).ok();
}

/// A monitor in a container sees the host's `/proc` and container-log directory where they are
/// mounted: `--proc-root` / `GPUSCOPE_PROC_ROOT` and `--container-logs` /
/// `GPUSCOPE_CONTAINER_LOGS` name them. Here the "host" is a directory laid out like `/proc`
/// holding a PID that does not exist on this machine.
#[test]
fn the_proc_root_and_container_logs_are_read_where_the_options_say() {
    // Above PID_MAX_LIMIT (2^22): no process of this machine has it.
    const PID: u32 = 4_194_400;
    let tmp = std::env::temp_dir().join(format!("gpuscope-pods-roots-{}", std::process::id()));
    let proc = tmp.join("host-proc");
    let logs = tmp.join("host-logs");
    let dir = proc.join(PID.to_string());
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::create_dir_all(&logs).unwrap();
    let id = "2b180104511194aab36fd295d3e217439f3ddb5bc88277f37b4952abee85c40e";
    std::fs::write(proc.join("stat"), "cpu  1 2 3 4 5 6 7\nbtime 1700000000\n").unwrap();
    std::fs::write(
        dir.join("stat"),
        format!("{PID} (python3) S 1 1 1 0 -1 0 0 0 0 0 5 5 0 0 20 0 1 0 100 1000 100\n"),
    )
    .unwrap();
    std::fs::write(dir.join("cmdline"), "python3\0serve.py\0").unwrap();
    std::fs::write(dir.join("status"), "Name:\tpython3\nUid:\t0\t0\t0\t0\n").unwrap();
    std::fs::write(
        dir.join("cgroup"),
        format!("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod3cae2e45_052c_4b11_80d3_4d7b2d2d3464.slice/cri-containerd-{id}.scope\n"),
    )
    .unwrap();
    std::fs::write(logs.join(format!("web-0_shop_api-{id}.log")), "").unwrap();
    let fixture = tmp.join("fixture.json");
    fixture_with(PID, &fixture);
    let lib = fake_nvml(&tmp.join("lib"));
    let snapshot = |args: &[&str], env: &[(&str, &str)]| -> Value {
        let v = cli::json(
            cli::command(&["snapshot", "--json", "--nvml-lib", lib.to_str().unwrap()])
                .args(args)
                .env(fake_nvml::FIXTURE_ENV, &fixture)
                .env(fake_nvml::FRAME_ENV, "0")
                .envs(env.iter().copied()),
        );
        v["devices"][0]["processes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["pid"] == PID)
            .expect("the PID is served")
            .clone()
    };
    let (proc_s, logs_s) = (proc.to_str().unwrap(), logs.to_str().unwrap());
    for p in [
        snapshot(&["--proc-root", proc_s, "--container-logs", logs_s], &[]),
        snapshot(
            &[],
            &[
                ("GPUSCOPE_PROC_ROOT", proc_s),
                ("GPUSCOPE_CONTAINER_LOGS", logs_s),
            ],
        ),
    ] {
        assert_eq!(p["command"], "python3 serve.py", "{p}");
        assert_eq!(
            (&p["pod"], &p["namespace"], &p["container"], &p["qos_class"]),
            (
                &json!("web-0"),
                &json!("shop"),
                &json!("api"),
                &json!("BestEffort")
            ),
            "{p}"
        );
    }
    // Without the options, this machine's /proc: no such process, so nothing is known about
    // it, its pod least of all.
    let p = snapshot(&[], &[]);
    assert!(p["command"].is_null() && p["pod"].is_null(), "{p}");
    std::fs::remove_dir_all(&tmp).ok();
}
