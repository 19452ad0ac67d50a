//! Which container, and which Kubernetes pod, a process belongs to, told without cluster
//! credentials: from the process's `/proc/<pid>/cgroup` (runtime, container id, pod UID, QoS
//! class) and from the names of the kubelet's `/var/log/containers` entries (pod name,
//! namespace, container name). docs/containers.md says how each runtime and cgroup driver is
//! recognised.
//!
//! Everything here is a pure function of texts, except [`find_pod_names`], which lists one
//! directory. The live host source ([`crate::host::LiveHost`]) reads both once per process
//! lifetime and keeps the answer in [`crate::fixture::HostProcessFacts::container`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Environment variable naming the directory read as `/proc` (default `/proc`): for a monitor
/// in a container that mounts the host's `/proc` elsewhere.
pub const PROC_ROOT_ENV_VAR: &str = "GPUSCOPE_PROC_ROOT";
/// Environment variable naming the kubelet's container-log directory (default
/// `/var/log/containers`).
pub const CONTAINER_LOGS_ENV_VAR: &str = "GPUSCOPE_CONTAINER_LOGS";

/// Where host facts are read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRoots {
    /// The directory read as `/proc`.
    pub proc: PathBuf,
    /// The kubelet's container-log directory, whose entry names tell pods' names.
    pub container_logs: PathBuf,
}

impl Default for HostRoots {
    /// `/proc` and `/var/log/containers`.
    fn default() -> Self {
        HostRoots {
            proc: PathBuf::from("/proc"),
            container_logs: PathBuf::from("/var/log/containers"),
        }
    }
}

impl HostRoots {
    /// The defaults, each replaced by its environment variable ([`PROC_ROOT_ENV_VAR`],
    /// [`CONTAINER_LOGS_ENV_VAR`]) when that is set and not empty.
    pub fn from_env() -> HostRoots {
        let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
        let d = HostRoots::default();
        HostRoots {
            proc: var(PROC_ROOT_ENV_VAR).map_or(d.proc, PathBuf::from),
            container_logs: var(CONTAINER_LOGS_ENV_VAR).map_or(d.container_logs, PathBuf::from),
        }
    }
}

/// The container and pod of a process. A process outside any container has none (`None` in
/// [`crate::fixture::HostProcessFacts::container`]); inside one, each field is `None` where
/// it cannot be told (never guessed).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ContainerFacts {
    /// The runtime: `docker`, `containerd`, `cri-o` or `podman`; `None` where the cgroup path
    /// does not say (the cgroupfs driver under Kubernetes names the container by id alone).
    #[serde(default)]
    pub runtime: Option<String>,
    /// The container id, 64 lowercase hex digits.
    #[serde(default)]
    pub id: Option<String>,
    /// The Kubernetes pod UID, with dashes (`8e9a7fc0-4e11-...`).
    #[serde(default)]
    pub pod_uid: Option<String>,
    /// The pod's QoS class as Kubernetes names it: `Guaranteed`, `Burstable` or `BestEffort`.
    #[serde(default)]
    pub qos_class: Option<String>,
    /// The pod's name.
    #[serde(default)]
    pub pod: Option<String>,
    /// The pod's namespace.
    #[serde(default)]
    pub namespace: Option<String>,
    /// The container's name inside its pod.
    #[serde(default)]
    pub container: Option<String>,
}

/// A pod's names, from a kubelet container-log entry name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodNames {
    /// The pod's name.
    pub pod: String,
    /// The pod's namespace.
    pub namespace: String,
    /// The container's name.
    pub container: String,
    /// The container id the entry is for.
    pub container_id: String,
}

/// Whether `s` is a container id: 64 lowercase hex digits (Docker, containerd, CRI-O and
/// Podman all use such ids).
fn is_container_id(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A pod UID as a cgroup path writes it (dashes with cgroupfs, underscores with systemd; a
/// static pod's UID is 32 hex digits without either), with dashes.
fn pod_uid(s: &str) -> Option<String> {
    let ok = (32..=36).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_hexdigit() || b == b'-' || b == b'_')
        && s.bytes().filter(u8::is_ascii_hexdigit).count() == 32;
    ok.then(|| s.replace('_', "-").to_ascii_lowercase())
}

/// The runtime and id of a container named by one cgroup path segment, if it names one.
fn container_segment(
    segment: &str,
    parent: Option<&str>,
) -> Option<(Option<&'static str>, String)> {
    // The systemd driver in a cgroup v1 hierarchy that containerd manages itself:
    // `kubepods-burstable-pod<uid>.slice:cri-containerd:<id>` ("slice:prefix:name").
    if let [_, prefix, id] = segment.split(':').collect::<Vec<_>>()[..] {
        if is_container_id(id) {
            return Some((prefix_runtime(prefix), id.to_string()));
        }
    }
    let name = segment.strip_suffix(".scope").unwrap_or(segment);
    if is_container_id(name) {
        // A bare id: `/docker/<id>` is Docker's cgroupfs driver; under `kubepods` the
        // runtime is not named.
        let runtime = (parent == Some("docker")).then_some("docker");
        return Some((runtime, name.to_string()));
    }
    let (prefix, id) = name.rsplit_once('-')?;
    if !is_container_id(id) {
        return None;
    }
    let runtime = match prefix {
        // conmon's own cgroup is beside the container's, not the container.
        "crio-conmon" | "libpod-conmon" => return None,
        "libpod-payload" => Some("podman"),
        other => Some(prefix_runtime(other)?),
    };
    Some((runtime, id.to_string()))
}

/// The runtime named by a scope prefix.
fn prefix_runtime(prefix: &str) -> Option<&'static str> {
    Some(match prefix {
        "docker" => "docker",
        "cri-containerd" | "containerd" | "nerdctl" => "containerd",
        "crio" => "cri-o",
        "libpod" => "podman",
        _ => return None,
    })
}

/// The container facts one cgroup path tells (runtime, id, pod UID, QoS class); `None` when it
/// names neither a container nor a pod.
pub fn parse_cgroup_path(path: &str) -> Option<ContainerFacts> {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let mut facts = ContainerFacts::default();
    let mut in_kubepods = false;
    let mut qos = None;
    for (i, segment) in segments.iter().enumerate() {
        let parent = i.checked_sub(1).map(|p| segments[p]);
        let slice = segment.strip_suffix(".slice").unwrap_or(segment);
        // `kubepods`, `kubepods.slice`, and kind's `kubelet-kubepods.slice`.
        if slice == "kubepods" || slice.ends_with("-kubepods") || slice.contains("kubepods-") {
            in_kubepods = true;
        }
        if in_kubepods {
            // QoS: cgroupfs `kubepods/burstable`, systemd `kubepods-burstable.slice`; a
            // Guaranteed pod sits right under kubepods.
            let class = slice.rsplit('-').next().unwrap_or(slice);
            match class {
                "burstable" => qos = Some("Burstable"),
                "besteffort" => qos = Some("BestEffort"),
                _ => {}
            }
            // The pod: cgroupfs `pod<uid>`, systemd `kubepods-<qos>-pod<uid>.slice`.
            let pod = if segment.ends_with(".slice") {
                slice.rsplit_once("-pod").map(|(_, uid)| uid)
            } else {
                segment.strip_prefix("pod")
            };
            if let Some(uid) = pod.and_then(pod_uid) {
                facts.pod_uid = Some(uid);
                facts.qos_class = Some(qos.unwrap_or("Guaranteed").to_string());
            }
        }
        if let Some((runtime, id)) = container_segment(segment, parent) {
            facts.runtime = runtime.map(str::to_string);
            facts.id = Some(id);
        }
    }
    (facts.id.is_some() || facts.pod_uid.is_some()).then_some(facts)
}

/// The container facts of a `/proc/<pid>/cgroup` text (cgroup v1, v2 or both): the first line
/// that names a container, the cgroup v2 line (`0::PATH`) first; else the first that names a
/// pod. `None` for a process outside any container (or a text that is not such a file).
pub fn parse_cgroup(text: &str) -> Option<ContainerFacts> {
    let mut paths: Vec<(bool, &str)> = text
        .lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            Some((id == "0" && controllers.is_empty(), path))
        })
        .collect();
    // Stable: the v2 line first, then the v1 lines in file order.
    paths.sort_by_key(|(v2, _)| !v2);
    let found: Vec<ContainerFacts> = paths
        .iter()
        .filter_map(|(_, p)| parse_cgroup_path(p))
        .collect();
    found
        .iter()
        .find(|f| f.id.is_some())
        .or_else(|| found.first())
        .cloned()
}

/// The names in a kubelet container-log entry name,
/// `<pod>_<namespace>_<container>-<container id>.log`. Pod names, namespaces and container
/// names are DNS names, which hold no `_`, so the split is unambiguous. `None` for any other
/// name (such as one the kubelet cut at 255 bytes).
pub fn parse_container_log_name(name: &str) -> Option<PodNames> {
    let stem = name.strip_suffix(".log")?;
    let (head, id) = stem.rsplit_once('-')?;
    if !is_container_id(id) {
        return None;
    }
    let mut parts = head.split('_');
    let (pod, namespace, container) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || [pod, namespace, container].iter().any(|s| s.is_empty()) {
        return None;
    }
    Some(PodNames {
        pod: pod.to_string(),
        namespace: namespace.to_string(),
        container: container.to_string(),
        container_id: id.to_string(),
    })
}

/// The pod names of every container the kubelet's container-log directory `dir` has an entry
/// for, by container id (one listing; the entries are not opened). Empty when the directory
/// cannot be read.
pub fn list_pod_names(dir: &Path) -> HashMap<String, PodNames> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return HashMap::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        .filter_map(|n| parse_container_log_name(&n))
        .map(|names| (names.container_id.clone(), names))
        .collect()
}

/// The names of container `id`'s pod, from one listing of the kubelet's container-log
/// directory `dir`. `None` when the directory cannot be read or has no entry for the container.
pub fn find_pod_names(dir: &Path, id: &str) -> Option<PodNames> {
    list_pod_names(dir).remove(id)
}

impl ContainerFacts {
    /// Fills in the pod's name, namespace and container name from `names`.
    pub fn set_names(&mut self, names: &PodNames) {
        self.pod = Some(names.pod.clone());
        self.namespace = Some(names.namespace.clone());
        self.container = Some(names.container.clone());
    }
}
