//! `gpuscope doctor` when NVML cannot be opened (issue 34, item 8): over a prepared root (the
//! hidden `--host-root`, which stands for `/`), the verdicts on the kernel module, the device
//! nodes, where `libnvidia-ml.so.1` was looked for, the library's version against the module's,
//! a container without the GPU, WSL and the container toolkit's mounts; each in the text and
//! in `--json`, with exit 4.

use crate::support::cli;

use std::path::PathBuf;

use serde_json::Value;

/// A directory standing for a machine's `/`.
struct Root {
    dir: tempfile::TempDir,
}

impl Root {
    fn new() -> Root {
        let root = Root {
            dir: tempfile::tempdir().expect("a temporary directory"),
        };
        for dir in ["proc/self", "dev", "etc", "usr/lib"] {
            std::fs::create_dir_all(root.path(dir)).unwrap();
        }
        root
    }

    fn path(&self, inside: &str) -> PathBuf {
        self.dir.path().join(inside)
    }

    fn file(&self, inside: &str, text: &str) -> &Root {
        let path = self.path(inside);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        self
    }

    /// The kernel module of this version, loaded.
    fn module(&self, version: &str) -> &Root {
        self.file(
            "proc/driver/nvidia/version",
            &format!(
                "NVRM version: NVIDIA UNIX x86_64 Kernel Module  {version}  Tue Sep 23 09:55:41 UTC 2025\n\
                 GCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04)\n"
            ),
        )
    }

    /// Device nodes (plain files: a test cannot make character devices).
    fn nodes(&self, names: &[&str]) -> &Root {
        for name in names {
            self.file(&format!("dev/{name}"), "");
        }
        self
    }

    /// The library of this version in `dir`, and `libnvidia-ml.so.1` leading to it when
    /// `linked` (what ldconfig makes).
    fn library(&self, dir: &str, version: &str, linked: bool) -> &Root {
        let versioned = format!("libnvidia-ml.so.{version}");
        self.file(&format!("{dir}/{versioned}"), "not an ELF file");
        if linked {
            std::os::unix::fs::symlink(&versioned, self.path(&format!("{dir}/libnvidia-ml.so.1")))
                .unwrap();
        }
        self
    }

    /// `gpuscope doctor` over this root, with `LD_LIBRARY_PATH` as given (else none), and
    /// `extra` arguments.
    fn doctor(&self, ld_library_path: Option<&str>, extra: &[&str]) -> std::process::Output {
        let root = self.dir.path().to_str().unwrap();
        let mut args = vec!["doctor", "--host-root", root];
        args.extend_from_slice(extra);
        let mut command = cli::command(&args);
        command.env_remove("LD_LIBRARY_PATH");
        if let Some(dirs) = ld_library_path {
            command.env("LD_LIBRARY_PATH", dirs);
        }
        command.output().expect("gpuscope runs")
    }
}

/// One verdict as the text and the JSON both say it: the verdict word, the summary, the hint.
#[derive(Debug, PartialEq)]
struct Verdict {
    verdict: String,
    summary: String,
    hint: Option<String>,
}

/// The verdicts of a report, by topic, from the text's Verdicts section.
fn text_verdicts(stdout: &str) -> Vec<(String, Verdict)> {
    let mut out: Vec<(String, Verdict)> = Vec::new();
    let section = stdout
        .split("\nVerdicts\n")
        .nth(1)
        .expect("a Verdicts section")
        .split("\n\n")
        .next()
        .unwrap();
    for line in section.lines() {
        let (word, rest) = (line[2..7].trim(), &line[8..]);
        let (topic, text) = (rest[..14].trim(), &rest[15..]);
        if word.is_empty() && topic.is_empty() {
            let hint = text.strip_prefix("hint: ").expect("a hint line");
            out.last_mut().unwrap().1.hint = Some(hint.to_string());
        } else {
            out.push((
                topic.to_string(),
                Verdict {
                    verdict: word.to_lowercase(),
                    summary: text.to_string(),
                    hint: None,
                },
            ));
        }
    }
    out
}

fn json_verdicts(doc: &Value) -> Vec<(String, Verdict)> {
    doc["verdicts"]
        .as_array()
        .expect("a verdicts list")
        .iter()
        .map(|v| {
            (
                v["topic"].as_str().unwrap().to_string(),
                Verdict {
                    verdict: v["verdict"].as_str().unwrap().to_string(),
                    summary: v["summary"].as_str().unwrap().to_string(),
                    hint: v["hint"].as_str().map(str::to_string),
                },
            )
        })
        .collect()
}

/// Doctor over `root` in text and JSON: both exit 4 and say the same verdicts; the text, the
/// verdicts and the JSON document.
fn examine(root: &Root, ld_library_path: Option<&str>) -> (String, Vec<(String, Verdict)>, Value) {
    examine_with(root, ld_library_path, &[])
}

/// [`examine`] with `extra` arguments.
fn examine_with(
    root: &Root,
    ld_library_path: Option<&str>,
    extra: &[&str],
) -> (String, Vec<(String, Verdict)>, Value) {
    let text = root.doctor(ld_library_path, extra);
    let stdout = String::from_utf8(text.stdout.clone()).unwrap();
    let stderr = String::from_utf8(text.stderr.clone()).unwrap();
    assert_eq!(text.status.code(), Some(4), "{stdout}\n{stderr}");
    assert!(stderr.contains("NVML cannot be opened"), "{stderr}");
    let json = root.doctor(ld_library_path, &[extra, &["--json"]].concat());
    assert_eq!(json.status.code(), Some(4), "{:?}", json);
    let doc: Value = serde_json::from_slice(&json.stdout).expect("JSON on stdout");
    let verdicts = text_verdicts(&stdout);
    assert_eq!(verdicts, json_verdicts(&doc), "{stdout}");
    assert_eq!(
        doc["failed"].as_u64(),
        Some(verdicts.iter().filter(|(_, v)| v.verdict == "fail").count() as u64)
    );
    (stdout, verdicts, doc)
}

/// The verdict on `topic`; fails the test when there is none.
fn on<'a>(verdicts: &'a [(String, Verdict)], topic: &str) -> &'a Verdict {
    &verdicts
        .iter()
        .find(|(t, _)| t == topic)
        .unwrap_or_else(|| panic!("no verdict on {topic}: {verdicts:#?}"))
        .1
}

/// A failed verdict whose summary and hint say what is asked.
fn assert_fails(verdicts: &[(String, Verdict)], topic: &str, says: &str, hint: &str) {
    let v = on(verdicts, topic);
    assert_eq!(v.verdict, "fail", "{topic}: {v:?}");
    assert!(v.summary.contains(says), "{topic}: {v:?}");
    let h = v
        .hint
        .as_deref()
        .unwrap_or_else(|| panic!("{topic}: no hint"));
    assert!(h.contains(hint), "{topic}: {v:?}");
}

fn assert_ok(verdicts: &[(String, Verdict)], topic: &str, says: &str) {
    let v = on(verdicts, topic);
    assert_eq!(v.verdict, "ok", "{topic}: {v:?}");
    assert!(v.summary.contains(says), "{topic}: {v:?}");
}

#[test]
fn without_a_driver_doctor_names_the_missing_module_nodes_and_library_and_exits_4() {
    let root = Root::new();
    let (stdout, verdicts, doc) = examine(&root, Some("/opt/cuda/lib64"));
    assert_fails(&verdicts, "NVML", "cannot be opened", "fix the first FAIL");
    assert_fails(&verdicts, "kernel module", "not loaded", "modprobe nvidia");
    assert_fails(
        &verdicts,
        "device nodes",
        "no /dev/nvidia*",
        "load it first",
    );
    assert_fails(&verdicts, "library", "none of the", "install the driver");
    assert_ok(&verdicts, "container", "not in a container");
    // Every place looked for, LD_LIBRARY_PATH's first, in the text and the JSON alike.
    let searched = doc["library"]["searched"].as_array().unwrap();
    assert_eq!(
        searched[0]["path"], "/opt/cuda/lib64/libnvidia-ml.so.1",
        "{searched:?}"
    );
    assert_eq!(searched[0]["from"], "ld_library_path");
    for dir in [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib64",
        "/usr/local/nvidia/lib64",
        "/usr/lib/wsl/lib",
    ] {
        let path = format!("{dir}/libnvidia-ml.so.1");
        assert!(
            searched.iter().any(|p| p["path"] == path.as_str()),
            "{path}"
        );
        assert!(stdout.contains(&format!("{path}: not there")), "{stdout}");
    }
    assert!(searched.iter().all(|p| p["found"] == false));
    assert!(doc["library"]["loaded"].is_null());
    assert!(doc["kernel_module"].is_null());
}

#[test]
fn a_library_of_another_version_than_the_module_is_the_version_mismatch() {
    let root = Root::new();
    root.module("580.95.05")
        .nodes(&["nvidiactl", "nvidia0", "nvidia-uvm"])
        .library("usr/lib/x86_64-linux-gnu", "575.57.08", true);
    let (_, verdicts, doc) = examine(&root, None);
    assert_ok(&verdicts, "kernel module", "580.95.05");
    assert_ok(&verdicts, "device nodes", "/dev/nvidiactl");
    assert_ok(
        &verdicts,
        "library",
        "libnvidia-ml.so.575.57.08 (575.57.08)",
    );
    assert_fails(
        &verdicts,
        "versions",
        "library 575.57.08 against kernel module 580.95.05",
        "reboot",
    );
    assert!(on(&verdicts, "versions")
        .summary
        .contains("Driver/library version mismatch"));
    assert_eq!(doc["kernel_module"], "580.95.05");
    assert_eq!(
        doc["library"]["loaded"],
        "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"
    );

    // The same library as the module's: the versions agree (NVML still fails: the file is no
    // library).
    let same = Root::new();
    same.module("580.95.05")
        .nodes(&["nvidiactl", "nvidia0", "nvidia-uvm"])
        .library("usr/lib/x86_64-linux-gnu", "580.95.05", true);
    let (_, verdicts, _) = examine(&same, None);
    assert_ok(&verdicts, "versions", "both 580.95.05");
}

#[test]
fn a_container_started_without_the_gpu_is_named_with_the_gpus_all_hint() {
    let root = Root::new();
    let id = "3f4e5d6c7b8a99887766554433221100ffeeddccbbaa99887766554433221100";
    root.file(
        "proc/self/cgroup",
        &format!("0::/system.slice/docker-{id}.scope\n"),
    );
    let (_, verdicts, doc) = examine(&root, None);
    assert_fails(
        &verdicts,
        "container",
        "started without the GPU",
        "--gpus all",
    );
    assert!(on(&verdicts, "container")
        .summary
        .contains("docker 3f4e5d6c7b8a"));
    assert_fails(&verdicts, "device nodes", "no /dev/nvidia*", "--gpus all");
    assert_eq!(on(&verdicts, "toolkit").verdict, "warn");
    assert_eq!(doc["container"], "docker 3f4e5d6c7b8a");

    // The container's nodes handed in: the container is fine, the rest is the library's.
    let with_nodes = Root::new();
    with_nodes
        .file(
            "proc/self/cgroup",
            &format!("0::/system.slice/docker-{id}.scope\n"),
        )
        .nodes(&["nvidiactl", "nvidia0"]);
    let (_, verdicts, _) = examine(&with_nodes, None);
    assert_ok(&verdicts, "container", "with the GPU's device nodes");
    assert_eq!(
        on(&verdicts, "device nodes").verdict,
        "warn",
        "no nvidia-uvm"
    );
}

#[test]
fn the_toolkit_mounting_the_library_without_its_loader_link_says_run_ldconfig() {
    let root = Root::new();
    let lib = "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.580.95.05";
    root.file(
        "proc/self/cgroup",
        "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1b2c3d4e_5f60_4a1b_8c2d_3e4f5a6b7c8d.slice/cri-containerd-3f4e5d6c7b8a99887766554433221100ffeeddccbbaa99887766554433221100.scope\n",
    )
    .file(
        "proc/self/mountinfo",
        &format!(
            "1 0 0:50 / / rw,relatime - overlay overlay rw\n\
             2 1 0:5 /nvidiactl /dev/nvidiactl ro,nosuid - devtmpfs udev rw\n\
             3 1 0:5 /nvidia0 /dev/nvidia0 ro,nosuid - devtmpfs udev rw\n\
             4 1 8:1 {lib} {lib} ro,nosuid,nodev - ext4 /dev/sda1 rw\n"
        ),
    )
    .module("580.95.05")
    .nodes(&["nvidiactl", "nvidia0", "nvidia-uvm"])
    .library("usr/lib/x86_64-linux-gnu", "580.95.05", false);
    let (_, verdicts, doc) = examine(&root, None);
    assert_fails(&verdicts, "toolkit", lib, "ldconfig");
    assert!(on(&verdicts, "toolkit").summary.contains("2 device nodes"));
    assert_fails(&verdicts, "library", "none of the", "container toolkit");
    assert_ok(&verdicts, "container", "containerd 3f4e5d6c7b8a");
    assert_eq!(doc["toolkit_mounts"].as_array().unwrap().len(), 3);
}

#[test]
fn under_wsl_the_library_folder_outside_the_loaders_search_is_named() {
    let root = Root::new();
    root.file(
        "proc/sys/kernel/osrelease",
        "5.15.167.4-microsoft-standard-WSL2\n",
    )
    .file("dev/dxg", "")
    .file("usr/lib/wsl/lib/libnvidia-ml.so.1", "not an ELF file");
    let (_, verdicts, _) = examine(&root, None);
    assert_ok(&verdicts, "kernel module", "WSL");
    assert_ok(&verdicts, "device nodes", "/dev/dxg");
    assert_fails(
        &verdicts,
        "WSL",
        "does not look in /usr/lib/wsl/lib",
        "LD_LIBRARY_PATH=/usr/lib/wsl/lib",
    );
    assert_fails(
        &verdicts,
        "library",
        "is not where the loader looks",
        "add /usr/lib/wsl/lib to LD_LIBRARY_PATH",
    );

    // With the folder in LD_LIBRARY_PATH the loader finds it; NVML itself is what fails.
    let (_, verdicts, _) = examine(&root, Some("/usr/lib/wsl/lib"));
    assert_ok(
        &verdicts,
        "WSL",
        "/dev/dxg and /usr/lib/wsl/lib/libnvidia-ml.so.1",
    );
    assert_ok(&verdicts, "library", "from LD_LIBRARY_PATH");

    // No /dev/dxg: WSL 1, or a driver without WSL support.
    let wsl1 = Root::new();
    wsl1.file("proc/version", "Linux version 4.4.0-19041-Microsoft\n");
    let (_, verdicts, _) = examine(&wsl1, None);
    assert_fails(&verdicts, "WSL", "without /dev/dxg", "wsl --set-version");
}

#[test]
fn text_from_the_machines_files_reaches_the_terminal_escaped() {
    let root = Root::new();
    root.file(
        "proc/self/mountinfo",
        "4 1 8:1 / /usr/lib/\x1b[2Jlibnvidia-ml.so.1 ro - ext4 /dev/sda1 rw\n",
    );
    let out = root.doctor(Some("/opt/\u{202e}evil"), &[]);
    assert_eq!(out.status.code(), Some(4));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(!stdout.contains('\x1b'), "{stdout}");
    assert!(!stdout.contains('\u{202e}'), "{stdout}");
    assert!(stdout.contains("libnvidia-ml.so.1"), "{stdout}");
}

#[test]
fn a_library_named_by_nvml_lib_is_the_only_place_looked_at() {
    let root = Root::new();
    root.module("580.95.05")
        .library("usr/lib/x86_64-linux-gnu", "580.95.05", true);
    let (_, verdicts, doc) = examine_with(
        &root,
        None,
        &["--nvml-lib", "/opt/nvidia/libnvidia-ml.so.1"],
    );
    let searched = doc["library"]["searched"].as_array().unwrap();
    assert_eq!(searched.len(), 1, "{searched:?}");
    assert_eq!(searched[0]["from"], "nvml_lib");
    assert_eq!(searched[0]["path"], "/opt/nvidia/libnvidia-ml.so.1");
    // The one in the loader's folders is not what was asked for.
    assert_fails(
        &verdicts,
        "library",
        "none of the places looked at (1,",
        "--nvml-lib PATH",
    );
    assert!(on(&verdicts, "NVML")
        .summary
        .contains("/opt/nvidia/libnvidia-ml.so.1"));
}

#[test]
fn a_replay_is_examined_as_before_whatever_the_host_root() {
    // Doctor's driver checks are for the real GPUs only: a recording still gets its report.
    let root = Root::new();
    let out = root.doctor(
        None,
        &[
            "--demo",
            "--frame",
            "0",
            "--repeat",
            "1",
            "--events-for",
            "0",
        ],
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("NVML call costs"), "{stdout}");
    assert!(!stdout.contains("kernel module"), "{stdout}");
}
