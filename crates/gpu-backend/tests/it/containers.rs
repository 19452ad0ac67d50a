//! Container and pod attribution from real `/proc/<pid>/cgroup` contents and real kubelet
//! `/var/log/containers` names, one case per runtime, cgroup driver and cgroup version.
//!
//! Where each text comes from (public sources; the lines are kept as published, shortened to
//! the lines that matter where a file repeats one path for every v1 controller):
//!
//! * [neuvector] neuvector/neuvector, `share/system/cgroup_test.go`: Docker cgroupfs on Debian
//!   and Ubuntu, Docker systemd on CentOS, host and session processes, Kubernetes with Docker
//!   (cgroupfs and systemd), kube-proxy, Bottlerocket (containerd, systemd, v1).
//! * [kepler] sustainable-computing-io/kepler, container cgroup tests: containerd's own
//!   `slice:cri-containerd:id` form, Podman rootless and rootful (`.../container`), Podman
//!   quadlet `libpod-payload-`, kind (containerd, systemd, v2).
//! * [rt-operator] CJLove/rt-operator, `notes/cgroupv1_notes.md`: CRI-O with the systemd
//!   driver, Guaranteed pods right under `kubepods.slice`.
//! * [container-info] Qard/container-info, `test/fixtures/result.js`: BestEffort cgroupfs.
//! * [origin] openshift/origin#13212: a `/var/log/containers` name
//!   (`synthetic-logger-0.25lps-pod_default_synth-lgr-<id>.log`).
//! * [kubelet] kubernetes/kubernetes `pkg/kubelet/kuberuntime/legacy.go`:
//!   `<pod>_<namespace>_<container>-<id>.log`, cut to 255 bytes.

use gpu_backend::container::{
    find_pod_names, parse_cgroup, parse_container_log_name, ContainerFacts, PodNames,
};

/// What one case expects: runtime, id, pod UID, QoS class.
type Expect<'a> = Option<(
    Option<&'a str>,
    Option<&'a str>,
    Option<&'a str>,
    Option<&'a str>,
)>;

fn check(name: &str, text: &str, expect: Expect) {
    let got = parse_cgroup(text);
    let want = expect.map(|(runtime, id, uid, qos)| ContainerFacts {
        runtime: runtime.map(str::to_string),
        id: id.map(str::to_string),
        pod_uid: uid.map(str::to_string),
        qos_class: qos.map(str::to_string),
        ..ContainerFacts::default()
    });
    assert_eq!(got, want, "case {name}:\n{text}");
}

const NEUVECTOR_DEBIAN: &str = "\
10:net_prio:/4f797c539e6c745de61a93ca3ff892358ecbcaccd8414d5db545c38428142970
4:memory:/4f797c539e6c745de61a93ca3ff892358ecbcaccd8414d5db545c38428142970
2:cpu:/4f797c539e6c745de61a93ca3ff892358ecbcaccd8414d5db545c38428142970
";

#[test]
fn every_runtime_driver_and_cgroup_version_is_recognised() {
    let cases: &[(&str, &str, Expect)] = &[
        (
            "Docker, cgroupfs, v1 [neuvector Ubuntu]",
            "12:name=systemd:/docker/31cb02944da7a12196a193cf0e0f6c226d7c453a1db62e65ba98287593a2ee30\n\
             4:memory:/docker/31cb02944da7a12196a193cf0e0f6c226d7c453a1db62e65ba98287593a2ee30\n\
             1:cpuset:/docker/31cb02944da7a12196a193cf0e0f6c226d7c453a1db62e65ba98287593a2ee30\n",
            Some((Some("docker"), Some("31cb02944da7a12196a193cf0e0f6c226d7c453a1db62e65ba98287593a2ee30"), None, None)),
        ),
        (
            // A bare id at the root names no runtime: N/A, not a guess.
            "a bare id at the root [neuvector Debian]",
            NEUVECTOR_DEBIAN,
            Some((None, Some("4f797c539e6c745de61a93ca3ff892358ecbcaccd8414d5db545c38428142970"), None, None)),
        ),
        (
            "Docker, systemd, v1 [neuvector CentOS]",
            "8:memory:/system.slice/docker-9ec39b91f3d70e1beff50a308f77067065ea6be0d91a3378375056cd4422cf3d.scope\n\
             1:name=systemd:/system.slice/docker-9ec39b91f3d70e1beff50a308f77067065ea6be0d91a3378375056cd4422cf3d.scope\n",
            Some((Some("docker"), Some("9ec39b91f3d70e1beff50a308f77067065ea6be0d91a3378375056cd4422cf3d"), None, None)),
        ),
        (
            "Docker in Docker: the innermost [neuvector RancherOS]",
            "8:memory:/docker/a9a5ad238e59234193ee7ec3fcff5e735b3708ea1068826952255b69e3cfa413/docker/ec08435e04266c5ba381fccbb829f626d11d8ddf5f8f547263c7a2d79ab4787a\n",
            Some((Some("docker"), Some("ec08435e04266c5ba381fccbb829f626d11d8ddf5f8f547263c7a2d79ab4787a"), None, None)),
        ),
        (
            "Kubernetes, cgroupfs, v1, BestEffort [neuvector Kubepods]",
            "10:memory:/kubepods/besteffort/pod74ba62da-1a3d-11e7-bb11-080027cb0e22/cb1eadb7abe3a6545e9856411207073277838e1bdc003337c2f8685faeedc32c\n\
             1:name=systemd:/kubepods/besteffort/pod74ba62da-1a3d-11e7-bb11-080027cb0e22/cb1eadb7abe3a6545e9856411207073277838e1bdc003337c2f8685faeedc32c\n",
            Some((None, Some("cb1eadb7abe3a6545e9856411207073277838e1bdc003337c2f8685faeedc32c"), Some("74ba62da-1a3d-11e7-bb11-080027cb0e22"), Some("BestEffort"))),
        ),
        (
            "Kubernetes, cgroupfs, v1, merged controllers [neuvector Kubepods3]",
            "3:rdma:/\n\
             2:cpuset,cpu,cpuacct,memory,net_cls,net_prio,hugetlb:/kubepods/besteffort/pod1fe19bf5-e8ef-11e8-900c-52daee5a874d/da31e536c8d61304a6d5998d163d12400a7a9a1003e1d86369e8fadb022fc17d\n",
            Some((None, Some("da31e536c8d61304a6d5998d163d12400a7a9a1003e1d86369e8fadb022fc17d"), Some("1fe19bf5-e8ef-11e8-900c-52daee5a874d"), Some("BestEffort"))),
        ),
        (
            "Kubernetes, cgroupfs, v1, Burstable [kepler]",
            "11:blkio:/kubepods/burstable/podf6adb0af-0855-4bab-b25b-c853f18d0ce2/35b97177dada20362ab90d90ac63cd54e8a41cf87bea34f270631b6da17f4a93\n",
            Some((None, Some("35b97177dada20362ab90d90ac63cd54e8a41cf87bea34f270631b6da17f4a93"), Some("f6adb0af-0855-4bab-b25b-c853f18d0ce2"), Some("Burstable"))),
        ),
        (
            "a process in a sub-cgroup of its container [neuvector kube-proxy]",
            "10:memory:/kubepods/besteffort/podf8a694f2-7c08-11e9-98da-000c29077430/c04e0a88a1de067f25bece337d4dbb897396e0b623c2a65330850fc9823f1903/kube-proxy\n",
            Some((None, Some("c04e0a88a1de067f25bece337d4dbb897396e0b623c2a65330850fc9823f1903"), Some("f8a694f2-7c08-11e9-98da-000c29077430"), Some("BestEffort"))),
        ),
        (
            "Kubernetes with Docker, systemd, v1 [neuvector Kubepods2]",
            "11:cpuset:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod045b1e35_7f13_11e7_ac42_0050568ffca0.slice/docker-b5b6f2da8008be266864f896f93789762b2ce50792114a5c5f2cc3315af0bc70.scope\n",
            Some((Some("docker"), Some("b5b6f2da8008be266864f896f93789762b2ce50792114a5c5f2cc3315af0bc70"), Some("045b1e35-7f13-11e7-ac42-0050568ffca0"), Some("BestEffort"))),
        ),
        (
            "containerd, systemd, v1 [neuvector Bottlerocket]",
            "11:cpuset:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-poddd1bf9d1_241d_47f5_8e25_12de83135812.slice/cri-containerd-f45298cd514d1930c4fe3afc4412e59547f7e3148fddd22ca33cefce046eb830.scope\n",
            Some((Some("containerd"), Some("f45298cd514d1930c4fe3afc4412e59547f7e3148fddd22ca33cefce046eb830"), Some("dd1bf9d1-241d-47f5-8e25-12de83135812"), Some("BestEffort"))),
        ),
        (
            "containerd's own systemd form, v1 [kepler]",
            "13:memory:/system.slice/containerd.service/kubepods-besteffort-pod0043435f_1854_4327_b76b_730f681a781d.slice:cri-containerd:01fd96f7ad292b02a8317cde4ecb8c7ef3cc06ffdd113f13410e0837eb2b2a20\n",
            Some((Some("containerd"), Some("01fd96f7ad292b02a8317cde4ecb8c7ef3cc06ffdd113f13410e0837eb2b2a20"), None, None)),
        ),
        (
            "containerd, systemd, v2, nested slices [kepler kind]",
            "0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-burstable.slice/kubelet-kubepods-burstable-pod3cae2e45_052c_4b11_80d3_4d7b2d2d3464.slice/cri-containerd-2b180104511194aab36fd295d3e217439f3ddb5bc88277f37b4952abee85c40e.scope\n",
            Some((Some("containerd"), Some("2b180104511194aab36fd295d3e217439f3ddb5bc88277f37b4952abee85c40e"), Some("3cae2e45-052c-4b11-80d3-4d7b2d2d3464"), Some("Burstable"))),
        ),
        (
            // rt-operator's notes give the layout with placeholders; the ids are filled in.
            "CRI-O, systemd, Guaranteed right under kubepods.slice [rt-operator]",
            "0::/kubepods.slice/kubepods-pod0a1b2c3d_4e5f_4a6b_8c7d_9e0f1a2b3c4d.slice/crio-1f2e3d4c5b6a79881f2e3d4c5b6a79881f2e3d4c5b6a79881f2e3d4c5b6a7988.scope\n",
            Some((Some("cri-o"), Some("1f2e3d4c5b6a79881f2e3d4c5b6a79881f2e3d4c5b6a79881f2e3d4c5b6a7988"), Some("0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"), Some("Guaranteed"))),
        ),
        (
            "Podman rootless, systemd, v2 [kepler]",
            "0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-3f05ee050f82c0145f1d88c94269c39dff0f07dbf8bba20aafd54b3a75dcaecc.scope/container\n",
            Some((Some("podman"), Some("3f05ee050f82c0145f1d88c94269c39dff0f07dbf8bba20aafd54b3a75dcaecc"), None, None)),
        ),
        (
            "Podman rootful, systemd, v2 [kepler]",
            "0::/machine.slice/libpod-06dc5f321aad8726aa26559f16ec203bc099245bc44894b14a89fc02b022d1d5.scope/container\n",
            Some((Some("podman"), Some("06dc5f321aad8726aa26559f16ec203bc099245bc44894b14a89fc02b022d1d5"), None, None)),
        ),
        (
            "Podman quadlet [kepler]",
            "0::/system.slice/kepler.service/libpod-payload-8e363eb2287da4ccc9f52ffc5de11252ac5fe707e3ddb917a3c0bdf9bb64165b\n",
            Some((Some("podman"), Some("8e363eb2287da4ccc9f52ffc5de11252ac5fe707e3ddb917a3c0bdf9bb64165b"), None, None)),
        ),
        (
            "BestEffort, cgroupfs [container-info]",
            "11:devices:/kubepods/besteffort/pod74c13223-5a00-11e9-b385-42010a80018d/34dc0b5e626f2c5c4c5170e34b10e7654ce36f0fcd532739f4445baabea03376\n",
            Some((None, Some("34dc0b5e626f2c5c4c5170e34b10e7654ce36f0fcd532739f4445baabea03376"), Some("74c13223-5a00-11e9-b385-42010a80018d"), Some("BestEffort"))),
        ),
        (
            "a host process, v1 [neuvector]",
            "13:name=systemd:/\n12:pids:/\n5:memory:/\n1:cpuset:/\n",
            None,
        ),
        (
            "a login session, v1 [neuvector NsEnter]",
            "13:name=systemd:/user/1000.user/c2.session\n12:pids:/\n1:cpuset:/\n",
            None,
        ),
        (
            "a systemd service, v2",
            "0::/system.slice/sshd.service\n",
            None,
        ),
        ("an empty file", "", None),
    ];
    for (name, text, expect) in cases {
        check(name, text, *expect);
    }
}

#[test]
fn the_cgroup_v2_line_wins_over_v1_lines_and_a_container_over_a_pod_alone() {
    // Hybrid: v1 controllers at the root, the container in the unified hierarchy.
    check(
        "hybrid",
        "4:memory:/\n1:name=systemd:/\n0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod3cae2e45_052c_4b11_80d3_4d7b2d2d3464.slice/cri-containerd-2b180104511194aab36fd295d3e217439f3ddb5bc88277f37b4952abee85c40e.scope\n",
        Some((
            Some("containerd"),
            Some("2b180104511194aab36fd295d3e217439f3ddb5bc88277f37b4952abee85c40e"),
            Some("3cae2e45-052c-4b11-80d3-4d7b2d2d3464"),
            Some("Burstable"),
        )),
    );
    // conmon sits beside the container, and is not it.
    check(
        "conmon",
        "0::/machine.slice/libpod-conmon-24fce7291bc6d7f8a5965a5920740b0df25dda9bb4e84ffb889d8ea2927acec5.scope\n",
        None,
    );
    // A pod's own cgroup, with no container: the pod, and no container id.
    check(
        "pod only",
        "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-poddd1bf9d1_241d_47f5_8e25_12de83135812.slice\n",
        Some((
            None,
            None,
            Some("dd1bf9d1-241d-47f5-8e25-12de83135812"),
            Some("BestEffort"),
        )),
    );
    // Something that only looks like an id (too short) is no container.
    check("short id", "0::/docker/31cb02944da7\n", None);
}

#[test]
fn kubelet_log_names_give_pod_namespace_and_container() {
    let id = "997599971ee6366d4a5920d25b79286ad45ff37a74494f262e3bc98d909d0a7b";
    // [origin]: a pod name with dots and dashes.
    assert_eq!(
        parse_container_log_name(&format!(
            "synthetic-logger-0.25lps-pod_default_synth-lgr-{id}.log"
        )),
        Some(PodNames {
            pod: "synthetic-logger-0.25lps-pod".into(),
            namespace: "default".into(),
            container: "synth-lgr".into(),
            container_id: id.into(),
        })
    );
    for bad in [
        format!("default_synth-lgr-{id}.log"),
        format!("a_b_c_d-{id}.log"),
        format!("pod__c-{id}.log"),
        format!("pod_ns_c-{id}.txt"),
        "pod_ns_c-31cb02944da7.log".to_string(),
        // The kubelet cuts a name longer than 255 bytes: the id is lost, so is the match.
        format!("pod_ns_c-{}.log", &id[..40]),
        String::new(),
    ] {
        assert_eq!(parse_container_log_name(&bad), None, "{bad}");
    }
}

#[test]
fn the_log_directory_is_listed_for_the_container_asked_for() {
    let dir = std::env::temp_dir().join(format!("gpuscope-logs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let a = "a".repeat(64);
    let b = "b".repeat(64);
    for name in [
        format!("trainer-0_ml_worker-{a}.log"),
        format!("web-7d9_default_nginx-{b}.log"),
        "README".to_string(),
    ] {
        std::fs::write(dir.join(name), "").unwrap();
    }
    let names = find_pod_names(&dir, &b).expect("found");
    assert_eq!(
        (
            names.pod.as_str(),
            names.namespace.as_str(),
            names.container.as_str()
        ),
        ("web-7d9", "default", "nginx")
    );
    assert_eq!(find_pod_names(&dir, &"c".repeat(64)), None);
    assert_eq!(find_pod_names(&dir.join("missing"), &a), None);
    std::fs::remove_dir_all(&dir).unwrap();
}

proptest::proptest! {
    /// Any DNS-style names and any id round-trip through a log entry name.
    #[test]
    fn log_names_round_trip(
        pod in "[a-z0-9]([-a-z0-9.]{0,40}[a-z0-9])?",
        ns in "[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?",
        container in "[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?",
        id in "[0-9a-f]{64}",
    ) {
        let names = parse_container_log_name(&format!("{pod}_{ns}_{container}-{id}.log"));
        proptest::prop_assert_eq!(names, Some(PodNames {
            pod, namespace: ns, container, container_id: id,
        }));
    }

    /// Any text at all: an answer or `None`, never a panic.
    #[test]
    fn any_text_never_panics_the_parsers(text in "\\PC{0,300}") {
        let _ = parse_cgroup(&text);
        let _ = parse_container_log_name(&text);
    }

    /// A Kubernetes path built from any pod UID and container id reads back.
    #[test]
    fn systemd_kubepods_paths_read_back(
        uid in "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        id in "[0-9a-f]{64}",
        qos in proptest::sample::select(vec![("burstable", "Burstable"), ("besteffort", "BestEffort")]),
    ) {
        let text = format!(
            "0::/kubepods.slice/kubepods-{q}.slice/kubepods-{q}-pod{u}.slice/crio-{id}.scope\n",
            q = qos.0,
            u = uid.replace('-', "_"),
        );
        let facts = parse_cgroup(&text).expect("a container");
        proptest::prop_assert_eq!(facts.id.as_deref(), Some(id.as_str()));
        proptest::prop_assert_eq!(facts.pod_uid.as_deref(), Some(uid.as_str()));
        proptest::prop_assert_eq!(facts.qos_class.as_deref(), Some(qos.1));
        proptest::prop_assert_eq!(facts.runtime.as_deref(), Some("cri-o"));
    }
}

#[cfg(feature = "host-live")]
/// A directory laid out like `/proc` with one process, and a container-log directory.
struct FakeHost {
    root: std::path::PathBuf,
}

#[cfg(feature = "host-live")]
impl FakeHost {
    const PID: u32 = 4242;

    fn new(tag: &str) -> FakeHost {
        let root =
            std::env::temp_dir().join(format!("gpuscope-fakehost-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(root.join("proc").join(Self::PID.to_string())).unwrap();
        std::fs::create_dir_all(root.join("logs")).unwrap();
        std::fs::write(
            root.join("proc/stat"),
            "cpu  1 2 3 4 5 6 7\nbtime 1700000000\n",
        )
        .unwrap();
        let host = FakeHost { root };
        host.write("cmdline", "python3\0train.py\0");
        host.write("status", "Name:\tpython3\nUid:\t0\t0\t0\t0\n");
        host.start(100);
        host
    }

    fn write(&self, file: &str, text: &str) {
        std::fs::write(
            self.root
                .join("proc")
                .join(Self::PID.to_string())
                .join(file),
            text,
        )
        .unwrap();
    }

    /// The process now has this start time (a new process when it changes).
    fn start(&self, ticks: u64) {
        self.write(
            "stat",
            &format!(
                "{} (python3) S 1 1 1 0 -1 0 0 0 0 0 5 5 0 0 20 0 1 0 {ticks} 1000 100\n",
                Self::PID
            ),
        );
    }

    fn roots(&self) -> gpu_backend::HostRoots {
        gpu_backend::HostRoots {
            proc: self.root.join("proc"),
            container_logs: self.root.join("logs"),
        }
    }
}

#[cfg(feature = "host-live")]
impl Drop for FakeHost {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.root).ok();
    }
}

#[cfg(feature = "host-live")]
#[test]
fn the_live_host_reads_container_facts_once_per_process_lifetime_from_its_roots() {
    use gpu_backend::host::{HostSource, LiveHost};
    let fake = FakeHost::new("once");
    let id = "f45298cd514d1930c4fe3afc4412e59547f7e3148fddd22ca33cefce046eb830";
    fake.write(
        "cgroup",
        &format!("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-poddd1bf9d1_241d_47f5_8e25_12de83135812.slice/cri-containerd-{id}.scope\n"),
    );
    let entry = fake
        .root
        .join("logs")
        .join(format!("trainer-0_ml_worker-{id}.log"));
    std::fs::write(&entry, "").unwrap();
    let host = LiveHost::with_roots(fake.roots());
    let container = |host: &LiveHost| host.lookup(FakeHost::PID).expect("seen").facts.container;
    let first = container(&host).expect("in a container");
    assert_eq!(
        (
            first.pod.as_deref(),
            first.namespace.as_deref(),
            first.container.as_deref()
        ),
        (Some("trainer-0"), Some("ml"), Some("worker"))
    );
    assert_eq!(
        first.pod_uid.as_deref(),
        Some("dd1bf9d1-241d-47f5-8e25-12de83135812")
    );
    // A refresh reads /proc/PID/stat only: what the cgroup file or log directory say now does
    // not matter while the process lives.
    fake.write("cgroup", "0::/\n");
    std::fs::remove_file(&entry).unwrap();
    assert_eq!(container(&host).as_ref(), Some(&first));
    // Another process under the same PID (another start time) is read afresh: outside any
    // container now, so N/A.
    fake.start(200);
    assert_eq!(container(&host), None);
    // A pod started since the directory was listed: its entry is found by listing again.
    let other = "9ec39b91f3d70e1beff50a308f77067065ea6be0d91a3378375056cd4422cf3d";
    fake.write(
        "cgroup",
        &format!("0::/kubepods.slice/kubepods-pod0a1b2c3d_4e5f_4a6b_8c7d_9e0f1a2b3c4d.slice/crio-{other}.scope\n"),
    );
    std::fs::write(
        fake.root
            .join("logs")
            .join(format!("infer-1_serving_server-{other}.log")),
        "",
    )
    .unwrap();
    fake.start(300);
    let c = container(&host).expect("in a container");
    assert_eq!(
        (
            c.runtime.as_deref(),
            c.qos_class.as_deref(),
            c.pod.as_deref(),
            c.namespace.as_deref()
        ),
        (
            Some("cri-o"),
            Some("Guaranteed"),
            Some("infer-1"),
            Some("serving")
        )
    );
}
