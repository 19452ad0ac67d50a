//! `gpuscope doctor` when NVML cannot be opened: what on this machine stands between gpuscope
//! and the driver (docs/doctor.md, "Without a driver"). Each piece the driver needs is checked
//! and gets a verdict with a hint: the kernel module (`/proc/driver/nvidia/version`), the device
//! nodes (`/dev/nvidia*` and whether this user may open them), every place the dynamic loader
//! looks for `libnvidia-ml.so.1` and what is there, the library's version against the module's
//! (the classic "Driver/library version mismatch"), a container started without the GPU, WSL,
//! and the NVIDIA container toolkit's mounts (`/proc/self/mountinfo`).
//!
//! Every file is read through `gpu_backend::files` within a cap, and every path under a root
//! (`/` by default; a prepared directory for tests, doctor's hidden `--host-root`), so the
//! checks are a function of that directory, `LD_LIBRARY_PATH` and the NVML error. What comes
//! from files is escaped before it is printed.

use std::ffi::OsStr;
use std::fmt::Write as _;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};

use anyhow::Result;
use gpu_devices::text::Escaped;
use serde::Serialize;

use super::{Finding, Verdict};
use crate::error::{Shortfall, UsageError};
use crate::source::{BareSource, SourceArgs};

/// The name NVML is loaded by.
const LIBRARY: &str = "libnvidia-ml.so.1";

/// The most bytes read from a small text file of /proc (the module's version, a cgroup list).
const MAX_PROC_TEXT: u64 = 64 << 10;

/// The most bytes read from `/proc/self/mountinfo`: a host with thousands of mounts (a
/// Kubernetes node) writes a few hundred kilobytes.
pub(super) const MAX_MOUNTINFO: u64 = 4 << 20;

/// The most bytes read from `/etc/ld.so.cache`: a distribution's is 50 to 200 KB.
const MAX_LD_CACHE: u64 = 16 << 20;

/// The most entries of `/dev` looked at, and the most links followed from one place.
const MAX_DEV_ENTRIES: usize = 4096;
const MAX_LINKS: usize = 16;

/// The most places listed from `LD_LIBRARY_PATH` and from the loader's cache each.
const MAX_PLACES: usize = 64;

/// Opens `source`'s backend for doctor. When the options choose the real GPUs and NVML cannot
/// be opened, the driver's pieces are checked and reported instead (text or JSON on stdout),
/// and the error returned is exit 4 ([`Shortfall::NOTHING`]). `root`: where the machine's
/// files are read (`None`: `/`); under a prepared root the library loaded is the one found
/// there, as the loader would find it. A usage error stays one.
pub fn open(
    source: &SourceArgs,
    root: Option<&Path>,
    events: &[gpu_backend::EventKind],
    json: bool,
) -> Result<BareSource> {
    let live = source.fixture.is_none() && source.demo.is_none();
    if !live {
        return source.open_bare(events);
    }
    let host = Host::new(root.unwrap_or(Path::new("/")));
    let ld_library_path = std::env::var_os("LD_LIBRARY_PATH");
    let search = search_library(
        &host,
        source.nvml_lib.as_deref(),
        ld_library_path.as_deref(),
    );
    let error = if root.is_some() && source.nvml_lib.is_none() {
        // The prepared root is the machine: its library, or none.
        match search.loaded() {
            Some(place) => {
                let library = Some(host.at(&place.path));
                match (gpu_backend::Source::Nvml { library }).open_backend(events) {
                    Ok((backend, label)) => {
                        let proc_root = source
                            .proc_root
                            .clone()
                            .unwrap_or_else(|| gpu_backend::HostRoots::default().proc);
                        return Ok(BareSource {
                            backend,
                            label,
                            proc_root: Some(proc_root),
                        });
                    }
                    Err(e) => anyhow::Error::from(e),
                }
            }
            None => anyhow::anyhow!("{LIBRARY} is in none of the places the loader looks"),
        }
    } else {
        match source.open_bare(events) {
            Ok(opened) => return Ok(opened),
            Err(e) => e,
        }
    };
    if error.downcast_ref::<UsageError>().is_some() {
        return Err(error);
    }
    let shown = format!("{error:#}");
    let first = shown.lines().next().unwrap_or("").trim_end_matches('.');
    let report = examine(&host, &search, &Escaped(first).to_string());
    let fails = report.count(Verdict::Fail);
    if json {
        crate::output::write_stdout(&crate::output::json(&report.json(), true)?)?;
    } else {
        crate::output::write_stdout(&report.render())?;
    }
    Err(Shortfall::nothing(format!(
        "doctor: NVML cannot be opened; {fails} failed (the verdicts on stdout)"
    ))
    .into())
}

/// The machine's files, under a root.
struct Host {
    root: PathBuf,
}

impl Host {
    fn new(root: &Path) -> Host {
        Host { root: root.into() }
    }

    /// Where `shown` (an absolute path on the machine) is under the root.
    fn at(&self, shown: &Path) -> PathBuf {
        self.root.join(shown.strip_prefix("/").unwrap_or(shown))
    }

    /// The text of a small file, bounded; `None` when it cannot be read.
    fn read(&self, shown: &str, max: u64) -> Option<String> {
        let bytes = gpu_backend::files::read_regular(&self.at(Path::new(shown)), max).ok()?;
        Some(String::from_utf8_lossy(&bytes).into_owned())
    }

    fn exists(&self, shown: &str) -> bool {
        self.at(Path::new(shown)).symlink_metadata().is_ok()
    }
}

/// Where a place to look for the library was named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum From {
    /// `--nvml-lib` or `GPUSCOPE_NVML_LIB`.
    NvmlLib,
    /// `LD_LIBRARY_PATH`.
    LdLibraryPath,
    /// `/etc/ld.so.cache`.
    LdSoCache,
    /// A folder the loader always searches.
    Default,
    /// A folder the driver's packages or the container toolkit use, which the loader searches
    /// only when it is in `LD_LIBRARY_PATH` or the cache.
    Usual,
}

impl From {
    fn word(self) -> &'static str {
        match self {
            From::NvmlLib => "--nvml-lib",
            From::LdLibraryPath => "LD_LIBRARY_PATH",
            From::LdSoCache => "ld.so.cache",
            From::Default => "loader default",
            From::Usual => "usual folder",
        }
    }

    /// Whether the loader looks there.
    fn searched(self) -> bool {
        self != From::Usual
    }
}

/// One place the library was looked for, and what is there.
#[derive(Debug, Clone, Serialize)]
struct Place {
    /// The path, as on the machine.
    path: PathBuf,
    from: From,
    /// Whether a file (or a link to one) is there.
    found: bool,
    /// Where the links lead, when the path is a link.
    target: Option<PathBuf>,
    /// The version in the file name it leads to (`libnvidia-ml.so.580.95.05`).
    version: Option<String>,
}

/// The loader's search for the library, in its order.
struct Search {
    name: String,
    places: Vec<Place>,
}

impl Search {
    /// What the loader would load: the first place it searches that holds the library.
    fn loaded(&self) -> Option<&Place> {
        self.places.iter().find(|p| p.found && p.from.searched())
    }
}

/// The places the loader looks for NVML, in its order (`--nvml-lib` with a path: only there),
/// then the usual folders it does not search by itself.
fn search_library(host: &Host, nvml_lib: Option<&Path>, ld_library_path: Option<&OsStr>) -> Search {
    let mut name = LIBRARY.to_string();
    let mut wanted: Vec<(PathBuf, From)> = Vec::new();
    if let Some(lib) = nvml_lib {
        if lib.components().count() > 1 {
            let place = look(host, lib, From::NvmlLib);
            return Search {
                name: lib.display().to_string(),
                places: vec![place],
            };
        }
        name = lib.display().to_string();
    }
    if let Some(list) = ld_library_path {
        for dir in list
            .as_bytes()
            .split(|&b| b == b':')
            .filter(|d| !d.is_empty())
            .take(MAX_PLACES)
        {
            wanted.push((
                Path::new(OsStr::from_bytes(dir)).join(&name),
                From::LdLibraryPath,
            ));
        }
    }
    if let Ok(cache) =
        gpu_backend::files::read_regular(&host.at(Path::new("/etc/ld.so.cache")), MAX_LD_CACHE)
    {
        for path in cache_entries(&cache, &name).into_iter().take(MAX_PLACES) {
            wanted.push((path, From::LdSoCache));
        }
    }
    let arch = format!("{}-linux-gnu", std::env::consts::ARCH);
    for dir in [
        format!("/lib/{arch}"),
        format!("/usr/lib/{arch}"),
        "/lib64".into(),
        "/usr/lib64".into(),
        "/lib".into(),
        "/usr/lib".into(),
    ] {
        wanted.push((Path::new(&dir).join(&name), From::Default));
    }
    for dir in [
        "/usr/local/nvidia/lib64",
        "/usr/local/nvidia/lib",
        "/usr/lib/wsl/lib",
    ] {
        wanted.push((Path::new(dir).join(&name), From::Usual));
    }
    let mut places: Vec<Place> = Vec::new();
    for (path, from) in wanted {
        if places.iter().any(|p| p.path == path) {
            continue;
        }
        places.push(look(host, &path, from));
    }
    Search { name, places }
}

/// What is at `path` under the root: a file, through up to [`MAX_LINKS`] links, whose
/// resolved name may carry the version.
fn look(host: &Host, path: &Path, from: From) -> Place {
    let mut at = path.to_path_buf();
    let mut target = None;
    let mut found = false;
    for _ in 0..MAX_LINKS {
        let Ok(meta) = host.at(&at).symlink_metadata() else {
            break;
        };
        if meta.file_type().is_symlink() {
            let Ok(link) = std::fs::read_link(host.at(&at)) else {
                break;
            };
            at = if link.is_absolute() {
                link
            } else {
                at.parent().unwrap_or(Path::new("/")).join(link)
            };
            target = Some(at.clone());
            continue;
        }
        found = meta.is_file();
        break;
    }
    let version = if found {
        at.file_name()
            .and_then(|n| n.to_str())
            .and_then(library_version)
    } else {
        None
    };
    Place {
        path: path.to_path_buf(),
        from,
        found,
        target,
        version,
    }
}

/// The version in a library's file name: `libnvidia-ml.so.580.95.05` is `580.95.05`; `None`
/// for `libnvidia-ml.so.1` and anything that is not `digits.digits[...]`.
fn library_version(file_name: &str) -> Option<String> {
    let (_, version) = file_name.split_once(".so.")?;
    looks_like_version(version).then(|| version.to_string())
}

/// `580`, `.` and more digits: a driver's version.
fn looks_like_version(text: &str) -> bool {
    let mut parts = text.split('.');
    let all_digits =
        |p: &str| !p.is_empty() && p.len() <= 8 && p.bytes().all(|b| b.is_ascii_digit());
    parts.clone().count() >= 2 && parts.all(all_digits)
}

/// The paths of `name` among the strings of a `/etc/ld.so.cache` (its string table holds each
/// library's full path, NUL-terminated, in either of glibc's formats).
fn cache_entries(cache: &[u8], name: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for chunk in cache.split(|&b| b == 0) {
        let Ok(text) = std::str::from_utf8(chunk) else {
            continue;
        };
        // A string may follow the header's bytes in the same chunk: from its first '/'.
        let Some(start) = text.find('/') else {
            continue;
        };
        let path = Path::new(&text[start..]);
        if path.file_name() == Some(OsStr::new(name)) && !out.iter().any(|p| p == path) {
            out.push(path.to_path_buf());
        }
    }
    out
}

/// The kernel module's version in `/proc/driver/nvidia/version`'s first line (`NVRM version:
/// NVIDIA UNIX x86_64 Kernel Module  580.95.05  Tue Sep 23 ...`, or `... Open Kernel Module
/// for x86_64  580.95.05  Release Build ...`).
fn module_version(text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.starts_with("NVRM version:"))?;
    line.split_whitespace()
        .find(|w| looks_like_version(w))
        .map(str::to_string)
}

/// A device node and whether this user may open it for reading and writing.
#[derive(Debug, Clone, Serialize)]
struct Node {
    path: String,
    /// Whether this user may read and write it.
    access: bool,
    /// `crw-rw-rw- 0:0`, as the file says.
    mode: String,
}

/// The `/dev/nvidia*` nodes (not `nvidia-caps`, a folder), by name.
fn device_nodes(host: &Host) -> Vec<Node> {
    let Ok(dir) = std::fs::read_dir(host.at(Path::new("/dev"))) else {
        return Vec::new();
    };
    let mut out: Vec<Node> = dir
        .take(MAX_DEV_ENTRIES)
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            if !name.starts_with("nvidia") || name == "nvidia-caps" {
                return None;
            }
            let path = e.path();
            let meta = std::fs::metadata(&path).ok()?;
            let kind = if meta.file_type().is_char_device() {
                'c'
            } else {
                '-'
            };
            Some(Node {
                path: format!("/dev/{name}"),
                access: may_read_write(&path),
                mode: format!("{kind}{} {}:{}", rwx(meta.mode()), meta.uid(), meta.gid()),
            })
        })
        .collect();
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// `rw-rw----` of a mode.
fn rwx(mode: u32) -> String {
    (0..9)
        .map(|i| {
            let bit = 1 << (8 - i);
            if mode & bit == 0 {
                '-'
            } else {
                ['r', 'w', 'x'][i % 3]
            }
        })
        .collect()
}

/// Whether this process may open `path` for reading and writing (`access(2)`, by the real
/// user, as a device open is checked).
fn may_read_write(path: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a NUL-terminated path that lives across the call.
    unsafe { libc::access(c.as_ptr(), libc::R_OK | libc::W_OK) == 0 }
}

/// A mount the NVIDIA container toolkit makes: its library or a device node.
fn toolkit_mounts(mountinfo: &str) -> Vec<String> {
    mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(unescape_mount)
        .filter(|m| m.contains("libnvidia-ml.so") || m.starts_with("/dev/nvidia"))
        .fold(Vec::new(), |mut out, m| {
            if !out.contains(&m) {
                out.push(m);
            }
            out
        })
}

/// mountinfo's `\040`-style escapes (space, tab, newline, backslash) undone.
fn unescape_mount(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            let digits = bytes
                .get(i + 1..i + 4)
                .filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)))
                .and_then(|d| std::str::from_utf8(d).ok());
            if let Some(b) = digits.and_then(|d| u8::from_str_radix(d, 8).ok()) {
                out.push(b);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Which container runs this process, as far as it tells: the cgroup's runtime and id, or the
/// runtime's marker file; `None` outside one.
fn container(host: &Host) -> Option<String> {
    for file in ["/proc/self/cgroup", "/proc/1/cgroup"] {
        if let Some(facts) = host
            .read(file, MAX_PROC_TEXT)
            .as_deref()
            .and_then(gpu_backend::container::parse_cgroup)
        {
            let runtime = facts.runtime.as_deref().unwrap_or("container");
            let id = facts.id.as_deref().map(|id| &id[..id.len().min(12)]);
            return Some(match (id, facts.pod_uid.as_deref()) {
                (Some(id), _) => format!("{runtime} {id}"),
                (None, Some(pod)) => format!("Kubernetes pod {pod}"),
                (None, None) => runtime.to_string(),
            });
        }
    }
    if host.exists("/.dockerenv") {
        return Some("docker, by /.dockerenv".into());
    }
    if host.exists("/run/.containerenv") {
        return Some("podman, by /run/.containerenv".into());
    }
    None
}

/// What WSL shows: the kernel says so, `/dev/dxg`, and the Windows driver's library folder.
struct Wsl {
    dxg: bool,
    library: bool,
}

fn wsl(host: &Host) -> Option<Wsl> {
    let kernel = ["/proc/sys/kernel/osrelease", "/proc/version"]
        .iter()
        .filter_map(|f| host.read(f, MAX_PROC_TEXT))
        .any(|t| {
            let t = t.to_ascii_lowercase();
            t.contains("microsoft") || t.contains("wsl")
        });
    let dxg = host.exists("/dev/dxg");
    let library = host.exists("/usr/lib/wsl/lib/libnvidia-ml.so.1");
    (kernel || dxg || host.exists("/usr/lib/wsl/lib")).then_some(Wsl { dxg, library })
}

/// What doctor found without NVML.
struct Report {
    nvml_error: String,
    module: Option<String>,
    search: Search,
    nodes: Vec<Node>,
    container: Option<String>,
    mounts: Vec<String>,
    findings: Vec<Finding>,
}

/// Every check, in the order a reader fixes them.
fn examine(host: &Host, search: &Search, nvml_error: &str) -> Report {
    let module_text = host.read("/proc/driver/nvidia/version", MAX_PROC_TEXT);
    let module = module_text.as_deref().and_then(module_version);
    let nodes = device_nodes(host);
    let container = container(host);
    let mounts = host
        .read("/proc/self/mountinfo", MAX_MOUNTINFO)
        .map(|m| toolkit_mounts(&m))
        .unwrap_or_default();
    let wsl = wsl(host);
    let mut findings = vec![Finding::new(
        Verdict::Fail,
        "NVML",
        format!("cannot be opened: {nvml_error}"),
    )
    .hint("the verdicts below say what is missing; fix the first FAIL, then run `gpuscope doctor` again")];
    findings.push(module_finding(
        module_text.is_some(),
        module.as_deref(),
        wsl.is_some(),
    ));
    findings.push(nodes_finding(
        &nodes,
        module_text.is_some(),
        container.is_some(),
        wsl.is_some(),
    ));
    findings.push(library_finding(search, wsl.is_some()));
    findings.push(version_finding(search, module.as_deref(), wsl.is_some()));
    findings.push(container_finding(container.as_deref(), &nodes));
    if let Some(f) = toolkit_finding(host, search, &mounts, container.is_some()) {
        findings.push(f);
    }
    if let Some(w) = &wsl {
        findings.push(wsl_finding(w, search));
    }
    Report {
        nvml_error: nvml_error.to_string(),
        module,
        search: Search {
            name: search.name.clone(),
            places: search.places.clone(),
        },
        nodes,
        container,
        mounts,
        findings,
    }
}

fn module_finding(read: bool, version: Option<&str>, wsl: bool) -> Finding {
    match (read, version) {
        (_, Some(v)) => Finding::new(
            Verdict::Ok,
            "kernel module",
            format!(
                "nvidia {} is loaded (/proc/driver/nvidia/version)",
                Escaped(v)
            ),
        ),
        (true, None) => Finding::new(
            Verdict::Warn,
            "kernel module",
            "loaded, but /proc/driver/nvidia/version names no version",
        )
        .hint("`cat /proc/driver/nvidia/version` shows what the module says"),
        (false, None) if wsl => Finding::new(
            Verdict::Ok,
            "kernel module",
            "none, as under WSL: the Windows driver serves the GPU through /dev/dxg",
        ),
        (false, None) => Finding::new(
            Verdict::Fail,
            "kernel module",
            "not loaded: there is no /proc/driver/nvidia/version",
        )
        .hint(
            "install the NVIDIA driver, or load it (`sudo modprobe nvidia`; `dmesg` says why it \
             fails, e.g. Secure Boot refusing an unsigned module); in a container, the host's \
             driver serves it",
        ),
    }
}

fn nodes_finding(nodes: &[Node], module: bool, container: bool, wsl: bool) -> Finding {
    let ctl = nodes.iter().any(|n| n.path == "/dev/nvidiactl");
    let gpus: Vec<&Node> = nodes
        .iter()
        .filter(|n| {
            n.path["/dev/nvidia".len()..]
                .bytes()
                .all(|b| b.is_ascii_digit())
                && n.path.len() > "/dev/nvidia".len()
        })
        .collect();
    if nodes.is_empty() {
        if wsl {
            return Finding::new(
                Verdict::Ok,
                "device nodes",
                "none, as under WSL: the GPU is /dev/dxg",
            );
        }
        let hint = if container {
            "this container was started without the GPU: `docker run --gpus all` (the NVIDIA \
             container toolkit), or a `nvidia.com/gpu` limit in Kubernetes"
        } else if module {
            "the module is loaded but made no nodes: `sudo nvidia-modprobe -c=0 -u` (or running \
             `nvidia-smi` as root) creates them"
        } else {
            "the nodes come with the kernel module: load it first"
        };
        return Finding::new(Verdict::Fail, "device nodes", "no /dev/nvidia* device node")
            .hint(hint);
    }
    let denied: Vec<String> = nodes
        .iter()
        .filter(|n| !n.access)
        .map(|n| format!("{} ({})", Escaped(&n.path), n.mode))
        .collect();
    if !denied.is_empty() {
        return Finding::new(
            Verdict::Fail,
            "device nodes",
            format!("this user may not read and write {}", denied.join(", ")),
        )
        .hint(
            "run as root, or add this user to the nodes' group (often `video`) and log in again",
        );
    }
    if !ctl || gpus.is_empty() {
        let missing = if ctl {
            "/dev/nvidia0 (a GPU's node)"
        } else {
            "/dev/nvidiactl"
        };
        return Finding::new(
            Verdict::Fail,
            "device nodes",
            format!("no {missing}; there are {}", list_paths(nodes)),
        )
        .hint(if container {
            "the container got only some of the nodes: start it with `--gpus all` (or \
             `--device /dev/nvidiactl --device /dev/nvidia0`)"
        } else {
            "`sudo nvidia-modprobe -c=0` creates them"
        });
    }
    if !nodes.iter().any(|n| n.path == "/dev/nvidia-uvm") {
        return Finding::new(
            Verdict::Warn,
            "device nodes",
            format!("{}; no /dev/nvidia-uvm", list_paths(nodes)),
        )
        .hint("NVML needs none, CUDA programs do: `sudo nvidia-modprobe -u -c=0` (or `modprobe nvidia-uvm`)");
    }
    Finding::new(
        Verdict::Ok,
        "device nodes",
        format!("{}: this user may read and write them", list_paths(nodes)),
    )
}

fn list_paths(nodes: &[Node]) -> String {
    nodes
        .iter()
        .map(|n| Escaped(&n.path).to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn show(path: &Path) -> String {
    Escaped(&path.display().to_string()).to_string()
}

fn place_text(p: &Place) -> String {
    let mut s = show(&p.path);
    if let Some(t) = &p.target {
        let _ = write!(s, " -> {}", show(t));
    }
    if let Some(v) = &p.version {
        let _ = write!(s, " ({})", Escaped(v));
    }
    s
}

fn library_finding(search: &Search, wsl: bool) -> Finding {
    let name = Escaped(&search.name).to_string();
    if let Some(p) = search.loaded() {
        return Finding::new(
            Verdict::Ok,
            "library",
            format!("{name}: {}, from {}", place_text(p), p.from.word()),
        );
    }
    let looked = search.places.iter().filter(|p| p.from.searched()).count();
    if let Some(p) = search.places.iter().find(|p| p.found) {
        let dir = p.path.parent().map(show).unwrap_or_default();
        return Finding::new(
            Verdict::Fail,
            "library",
            format!(
                "{name} is not where the loader looks ({looked} places, listed below); it is at {}",
                place_text(p)
            ),
        )
        .hint(format!(
            "add {dir} to LD_LIBRARY_PATH, or list it in a file of /etc/ld.so.conf.d and run \
             `sudo ldconfig`{}",
            if wsl {
                " (WSL's own /etc/ld.so.conf.d/ld.wsl.conf lists it)"
            } else {
                ""
            }
        ));
    }
    Finding::new(
        Verdict::Fail,
        "library",
        format!(
            "{name} is in none of the places looked at ({}, listed below)",
            search.places.len()
        ),
    )
    .hint(
        "install the driver's user-space libraries of the module's version (e.g. the \
         libnvidia-compute package); in a container, start it with the NVIDIA container \
         toolkit (`--gpus all`), which mounts the host's; `--nvml-lib PATH` names one elsewhere",
    )
}

fn version_finding(search: &Search, module: Option<&str>, wsl: bool) -> Finding {
    let library = search.loaded().and_then(|p| p.version.as_deref());
    match (library, module) {
        (Some(l), Some(m)) if l == m => Finding::new(
            Verdict::Ok,
            "versions",
            format!("library and kernel module are both {}", Escaped(m)),
        ),
        (Some(l), Some(m)) => Finding::new(
            Verdict::Fail,
            "versions",
            format!(
                "library {} against kernel module {}: NVML refuses to start (\"Failed to \
                 initialize NVML: Driver/library version mismatch\")",
                Escaped(l),
                Escaped(m)
            ),
        )
        .hint(
            "the driver was upgraded while the old module stayed loaded: reboot (or unload \
             the nvidia modules and load them again); else install the libraries of the \
             module's version",
        ),
        _ if wsl => Finding::new(
            Verdict::Ok,
            "versions",
            "not compared: under WSL the Windows driver provides both",
        ),
        (None, Some(_)) if search.loaded().is_some() => Finding::new(
            Verdict::Warn,
            "versions",
            "not compared: the library's file name carries no version",
        )
        .hint("`ls -l` on the library shows which versioned file it is"),
        _ => Finding::new(
            Verdict::Warn,
            "versions",
            format!(
                "not compared: {}",
                if module.is_none() {
                    "no kernel module"
                } else {
                    "no library"
                }
            ),
        )
        .hint(
            "the library's version must be the kernel module's; compare them once both are there",
        ),
    }
}

fn container_finding(container: Option<&str>, nodes: &[Node]) -> Finding {
    match container {
        None => Finding::new(Verdict::Ok, "container", "not in a container (cgroup)"),
        Some(c) if nodes.is_empty() => Finding::new(
            Verdict::Fail,
            "container",
            format!(
                "in a container ({}) started without the GPU: no /dev/nvidia*",
                Escaped(c)
            ),
        )
        .hint(
            "start it with the NVIDIA container toolkit: `docker run --gpus all` (or \
             `--runtime nvidia`), `podman run --device nvidia.com/gpu=all`, or in Kubernetes \
             a `nvidia.com/gpu` resource limit",
        ),
        Some(c) => Finding::new(
            Verdict::Ok,
            "container",
            format!(
                "in a container ({}), with the GPU's device nodes",
                Escaped(c)
            ),
        ),
    }
}

fn toolkit_finding(
    host: &Host,
    search: &Search,
    mounts: &[String],
    container: bool,
) -> Option<Finding> {
    let libs: Vec<&String> = mounts
        .iter()
        .filter(|m| m.contains("libnvidia-ml.so"))
        .collect();
    let devices = mounts.len() - libs.len();
    if mounts.is_empty() {
        return container.then(|| {
            Finding::new(
                Verdict::Warn,
                "toolkit",
                "the NVIDIA container toolkit mounted nothing here (no libnvidia-ml or \
                 /dev/nvidia* in /proc/self/mountinfo)",
            )
            .hint("start the container with `--gpus all` (or `--runtime nvidia`)")
        });
    }
    let libraries = if libs.is_empty() {
        "no libnvidia-ml".to_string()
    } else {
        libs.iter()
            .map(|m| Escaped(m).to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let summary = format!(
        "the NVIDIA container toolkit mounted {libraries} and {}",
        match devices {
            1 => "1 device node".to_string(),
            n => format!("{n} device nodes"),
        }
    );
    if search.loaded().is_some() {
        return Some(Finding::new(Verdict::Ok, "toolkit", summary));
    }
    let absent: Vec<String> = libs
        .iter()
        .filter(|m| !host.exists(m))
        .map(|m| Escaped(m).to_string())
        .collect();
    let f = Finding::new(
        Verdict::Fail,
        "toolkit",
        format!(
            "{summary}, but the loader finds no {}",
            Escaped(&search.name)
        ),
    );
    Some(if !absent.is_empty() {
        f.hint(format!(
            "{} is mounted but not there: the container's root changed after the toolkit's \
             hook ran; restart the container",
            absent.join(", ")
        ))
    } else if libs.is_empty() {
        f.hint("the toolkit was asked for devices only: add the `utility` capability (NVIDIA_DRIVER_CAPABILITIES=compute,utility)")
    } else {
        f.hint(format!(
            "the toolkit's hook did not make {} and the loader's cache: run `ldconfig` in the \
             container (the image's /etc/ld.so.conf.d must list the folder)",
            Escaped(&search.name)
        ))
    })
}

fn wsl_finding(w: &Wsl, search: &Search) -> Finding {
    if !w.dxg {
        return Finding::new(Verdict::Fail, "WSL", "WSL without /dev/dxg: the GPU is not shared with this distribution")
            .hint("WSL 2 is needed (`wsl --set-version DISTRO 2`), with a Windows NVIDIA driver that supports WSL, and `wsl --update`");
    }
    if !w.library {
        return Finding::new(Verdict::Fail, "WSL", "/dev/dxg is there, /usr/lib/wsl/lib/libnvidia-ml.so.1 is not")
            .hint("the Windows NVIDIA driver provides /usr/lib/wsl/lib: install or update it, then `wsl --shutdown`");
    }
    if search.loaded().is_none() {
        return Finding::new(Verdict::Fail, "WSL", "/dev/dxg and /usr/lib/wsl/lib/libnvidia-ml.so.1 are there, but the loader does not look in /usr/lib/wsl/lib")
            .hint("`export LD_LIBRARY_PATH=/usr/lib/wsl/lib`, or `sudo ldconfig` with /etc/ld.so.conf.d/ld.wsl.conf listing it");
    }
    Finding::new(
        Verdict::Ok,
        "WSL",
        "/dev/dxg and /usr/lib/wsl/lib/libnvidia-ml.so.1 are there",
    )
}

impl Report {
    fn count(&self, v: Verdict) -> usize {
        self.findings.iter().filter(|f| f.verdict == v).count()
    }

    /// The report for people.
    fn render(&self) -> String {
        let mut out = String::from("gpuscope doctor: NVML cannot be opened; the driver's pieces on this machine\n\nVerdicts\n");
        super::write_verdicts(&mut out, &self.findings);
        let _ = writeln!(
            out,
            "\nWhere {} was looked for (in the loader's order)",
            Escaped(&self.search.name)
        );
        for p in &self.search.places {
            let what = if p.found {
                place_text(p)
            } else {
                format!("{}: not there", show(&p.path))
            };
            let searched = if p.from.searched() {
                ""
            } else {
                " (the loader does not look here by itself)"
            };
            let _ = writeln!(out, "  {:<15} {what}{searched}", p.from.word());
        }
        let _ = writeln!(
            out,
            "\n{} failed, {} warning{}",
            self.count(Verdict::Fail),
            self.count(Verdict::Warn),
            if self.count(Verdict::Warn) == 1 {
                ""
            } else {
                "s"
            }
        );
        out
    }

    /// The report as JSON: the verdicts and what they were made from.
    fn json(&self) -> serde_json::Value {
        let verdicts: Vec<serde_json::Value> = self
            .findings
            .iter()
            .map(|f| {
                serde_json::json!({
                    "verdict": match f.verdict {
                        Verdict::Ok => "ok",
                        Verdict::Warn => "warn",
                        Verdict::Fail => "fail",
                    },
                    "topic": f.topic,
                    "summary": f.summary,
                    "hint": f.hint,
                })
            })
            .collect();
        serde_json::json!({
            "nvml": { "error": self.nvml_error },
            "verdicts": verdicts,
            "kernel_module": self.module,
            "library": {
                "name": self.search.name,
                "loaded": self.search.loaded().map(|p| &p.path),
                "searched": self.search.places,
            },
            "device_nodes": self.nodes,
            "container": self.container,
            "toolkit_mounts": self.mounts,
            "failed": self.count(Verdict::Fail),
            "warnings": self.count(Verdict::Warn),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_module_version_is_read_from_both_kinds_of_module() {
        let closed = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Tue Sep 23 09:55:41 UTC 2025\nGCC version:  gcc version 13.3.0\n";
        assert_eq!(module_version(closed).as_deref(), Some("580.95.05"));
        let open = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  575.57.08  Release Build  (dvs-builder@U16-I3-B03-4-3)  Wed May 21 2025\n";
        assert_eq!(module_version(open).as_deref(), Some("575.57.08"));
        assert_eq!(module_version("GCC version: 13.3.0\n"), None);
    }

    #[test]
    fn the_library_version_is_in_its_file_name_only_when_versioned() {
        assert_eq!(
            library_version("libnvidia-ml.so.580.95.05").as_deref(),
            Some("580.95.05")
        );
        assert_eq!(library_version("libnvidia-ml.so.1"), None);
        assert_eq!(library_version("libnvidia-ml.so"), None);
    }

    #[test]
    fn the_loader_cache_names_the_library_in_either_format() {
        let mut cache = b"ld.so-1.7.0\0\0\0\x02".to_vec();
        cache.extend(b"libnvidia-ml.so.1\0/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1\0");
        cache.extend(b"glibc-ld.so.cache1.1\x01\0libc.so.6\0/lib/x86_64-linux-gnu/libc.so.6\0");
        cache.extend(b"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1\0");
        assert_eq!(
            cache_entries(&cache, "libnvidia-ml.so.1"),
            [PathBuf::from("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1")]
        );
    }

    #[test]
    fn toolkit_mounts_are_the_library_and_the_device_nodes() {
        let mountinfo = "\
1 0 0:1 / / rw - overlay overlay rw
2 1 0:5 /nvidia0 /dev/nvidia0 rw,nosuid - devtmpfs udev rw
3 1 8:1 /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.580.95.05 /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.580.95.05 ro - ext4 /dev/sda1 rw
4 1 8:1 /x /my\\040dir rw - ext4 /dev/sda1 rw
";
        assert_eq!(
            toolkit_mounts(mountinfo),
            [
                "/dev/nvidia0",
                "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.580.95.05"
            ]
        );
        assert_eq!(unescape_mount("/my\\040dir"), "/my dir");
    }

    #[test]
    fn ld_library_path_comes_first_and_empty_entries_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let host = Host::new(dir.path());
        let search = search_library(&host, None, Some(OsStr::new("::/opt/a:/opt/b")));
        let first: Vec<_> = search
            .places
            .iter()
            .take(2)
            .map(|p| (p.path.clone(), p.from))
            .collect();
        assert_eq!(
            first,
            [
                (
                    PathBuf::from("/opt/a/libnvidia-ml.so.1"),
                    From::LdLibraryPath
                ),
                (
                    PathBuf::from("/opt/b/libnvidia-ml.so.1"),
                    From::LdLibraryPath
                ),
            ]
        );
        assert!(search.loaded().is_none());
    }

    proptest! {
        #[test]
        fn the_parsers_never_panic(text in ".{0,300}", bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = module_version(&text);
            let _ = library_version(&text);
            let _ = toolkit_mounts(&text);
            let _ = unescape_mount(&text);
            let _ = cache_entries(&bytes, "libnvidia-ml.so.1");
        }
    }
}
