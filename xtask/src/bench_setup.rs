//! What `bench-oneshot`, `bench-export` and `bench-viewer` share: where the NVML answers come
//! from (fake-nvml over a fixture, each call costing what a real GPU's did, or with `--real`
//! this machine's own driver), the binaries under test, the Python tools' virtualenv, and the
//! CPU time of a running process and of each of its threads.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{ensure, Context, Result};

/// The Python tools, pinned (the versions the real-hardware sessions ran).
pub const PIP_PINS: &[&str] = &[
    "nvidia-ml-py==13.615.71",
    "nvitop==1.7.2",
    "gpustat==1.1.1",
    "nvitop-exporter==1.7.2",
];

/// Where the answers come from and what is measured, for every bench alike.
#[derive(clap::Args, Clone)]
pub struct SourceArgs {
    /// Run over this machine's real NVML (its own libnvidia-ml): no fake-nvml, no costs, no
    /// fixture. For a GPU machine.
    #[arg(long, conflicts_with_all = ["costs", "fixture"])]
    pub real: bool,
    /// The NVML call costs fake-nvml spends for every tool alike
    /// (`GPUSCOPE_FAKE_NVML_COSTS`): a cost profile file, `recorded` (the fixture's own), or
    /// `none` (every call as fast as the fake library answers, the old behaviour).
    #[arg(
        long,
        value_name = "FILE|recorded|none",
        default_value = "fixtures/costs/h100-load.json"
    )]
    pub costs: String,
    /// The gpuscope binary to measure (default: build this workspace's in release mode).
    /// fake-nvml is always this workspace's own, built in release mode. (`--bin` is the old
    /// name.)
    #[arg(long, alias = "bin", value_name = "PATH")]
    pub gpuscope_bin: Option<PathBuf>,
    /// Install the Python tools from the wheels in this directory, offline (`pip install
    /// --no-index --find-links DIR`), for a machine with no network.
    #[arg(long, value_name = "DIR")]
    pub wheels: Option<PathBuf>,
    /// The Python that makes the virtualenv.
    #[arg(long, default_value = "python3")]
    pub python: PathBuf,
}

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from(".."), Path::to_path_buf)
}

/// Cargo's target directory.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"))
}

/// A path given relative to the workspace root (as the defaults are), or as it is.
pub fn in_root(p: &Path) -> PathBuf {
    if p.is_absolute() || p.exists() {
        p.to_path_buf()
    } else {
        root().join(p)
    }
}

fn cargo() -> OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into())
}

/// `cargo build --release` of `args` in the workspace.
pub fn cargo_release(args: &[&str]) -> Result<()> {
    let status = Command::new(cargo())
        .current_dir(root())
        .args(["build", "--release", "--quiet"])
        .args(args)
        .status()
        .context("cannot run cargo")?;
    ensure!(
        status.success(),
        "cargo build --release {} failed",
        args.join(" ")
    );
    Ok(())
}

/// How every tool of a bench reaches NVML.
pub struct Nvml {
    /// The environment every tool runs with.
    pub env: Vec<(&'static str, OsString)>,
    /// The library to name to gpuscope (`--nvml-lib`) and the floor program; `None` with
    /// `--real` (the system's).
    pub lib: Option<PathBuf>,
    /// What the costs were, for the report.
    pub costs: String,
}

impl Nvml {
    /// `--nvml-lib LIB` for gpuscope, nothing with `--real`.
    pub fn gpuscope_args(&self) -> Vec<OsString> {
        match &self.lib {
            Some(l) => vec!["--nvml-lib".into(), l.clone().into_os_string()],
            None => vec![],
        }
    }
}

impl SourceArgs {
    /// The gpuscope binary: `--gpuscope-bin`, else this workspace's, built in release mode.
    pub fn gpuscope(&self) -> Result<PathBuf> {
        match &self.gpuscope_bin {
            Some(b) => {
                ensure!(b.is_file(), "--gpuscope-bin {}: no such file", b.display());
                Ok(b.clone())
            }
            None => {
                cargo_release(&["-p", "gpuscope"])?;
                Ok(target_dir().join("release/gpuscope"))
            }
        }
    }

    /// Sets up NVML for the tools: with `--real` nothing (the system's library); else this
    /// workspace's fake-nvml, built and installed under `work`, serving `fixture` (frame
    /// pinned to `frame`, or on the wall clock, looping) with the costs asked for.
    pub fn nvml(&self, work: &Path, fixture: Option<&Path>, frame: Option<usize>) -> Result<Nvml> {
        if self.real {
            return Ok(Nvml {
                env: vec![],
                lib: None,
                costs: "the real driver's".into(),
            });
        }
        let fixture = fixture.context("a fixture is needed without --real")?;
        cargo_release(&["-p", "fake-nvml"])?;
        let lib = fake_nvml::install(
            &target_dir()
                .join("release")
                .join(fake_nvml::CDYLIB_FILE_NAME),
            &work.join("lib"),
        )
        .context("cannot install the fake library")?;
        let mut env: Vec<(&'static str, OsString)> = vec![
            ("LD_LIBRARY_PATH", lib.dir.clone().into_os_string()),
            (fake_nvml::FIXTURE_ENV, fixture.as_os_str().to_owned()),
        ];
        if let Some(f) = frame {
            env.push((fake_nvml::FRAME_ENV, f.to_string().into()));
        }
        let costs = match self.costs.as_str() {
            "none" => "none (fake-nvml answers at once)".to_string(),
            fake_nvml::RECORDED => {
                env.push((fake_nvml::COSTS_ENV, fake_nvml::RECORDED.into()));
                "the fixture's own (`recorded`)".to_string()
            }
            file => {
                let path = in_root(Path::new(file));
                ensure!(path.is_file(), "--costs {file}: no such file");
                env.push((fake_nvml::COSTS_ENV, path.clone().into_os_string()));
                format!("`{file}`")
            }
        };
        Ok(Nvml {
            env,
            lib: Some(lib.nvml),
            costs,
        })
    }

    /// Makes the virtualenv at `venv` (the benches share `<target dir>/bench-venv`) with
    /// [`PIP_PINS`] unless it already has them (from `--wheels` when given).
    pub fn venv(&self, venv: &Path) -> Result<()> {
        let stamp = venv.join("bench-pins.txt");
        let want = PIP_PINS.join("\n");
        if std::fs::read_to_string(&stamp).is_ok_and(|s| s == want) {
            return Ok(());
        }
        eprintln!("== virtualenv with {}", PIP_PINS.join(" "));
        if !venv.join("bin/python").is_file() {
            let status = Command::new(&self.python)
                .arg("-m")
                .arg("venv")
                .arg(venv)
                .status()
                .with_context(|| format!("cannot run {}", self.python.display()))?;
            ensure!(
                status.success(),
                "`{} -m venv` failed (on Debian: apt-get install python3-venv)",
                self.python.display()
            );
        }
        let mut pip = Command::new(venv.join("bin/python"));
        pip.args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ]);
        if let Some(w) = &self.wheels {
            ensure!(w.is_dir(), "--wheels {}: no such directory", w.display());
            pip.arg("--no-index").arg("--find-links").arg(w);
        }
        let status = pip.args(PIP_PINS).status().context("cannot run pip")?;
        ensure!(
            status.success(),
            "pip install failed{}",
            if self.wheels.is_some() {
                " (the wheels directory needs every pin and its dependencies as wheels: `python3 \
                 -m pip wheel -w DIR` them on a machine with network; see docs/benchmarks.md)"
            } else {
                ""
            }
        );
        std::fs::write(&stamp, want)?;
        Ok(())
    }
}

/// `nvidia-smi` on the PATH, if there is one.
pub fn nvidia_smi() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("nvidia-smi"))
        .find(|p| p.is_file())
}

/// Clock ticks per second of `/proc/*/stat`.
fn hz() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as f64
    } else {
        100.0
    }
}

/// User plus system CPU seconds of a `/proc/.../stat` text, with its command name.
fn stat_cpu(stat: &str) -> Option<(String, f64)> {
    let (head, after) = stat.rsplit_once(") ")?;
    let name = head.split_once(" (").map_or("?", |(_, n)| n).to_string();
    let fields: Vec<&str> = after.split(' ').collect();
    let u: f64 = fields.get(11)?.parse().ok()?;
    let s: f64 = fields.get(12)?.parse().ok()?;
    Some((name, (u + s) / hz()))
}

/// User plus system CPU seconds a process has used so far.
pub fn cpu_seconds(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("process {pid} is gone"))?;
    let (_, total) = stat_cpu(&stat).context("odd /proc/PID/stat")?;
    Ok(total)
}

/// A `kB` field of a process's `/proc/PID/status` (`VmRSS`, `VmHWM`), KiB; `None` where the
/// process is gone or the field is missing.
pub fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?;
    line.split_whitespace().next()?.parse().ok()
}

/// Keeps frame `frame` of `f` alone, at time 0; `path` names the fixture in the error.
pub fn keep_one_frame(f: &mut gpu_backend::Fixture, frame: usize, path: &Path) -> Result<()> {
    ensure!(
        frame < f.frames.len(),
        "{} has frames 0 to {}",
        path.display(),
        f.frames.len().saturating_sub(1)
    );
    let mut one = f.frames.swap_remove(frame);
    one.t_ms = 0;
    f.frames = vec![one];
    Ok(())
}

/// CPU seconds used so far by a process, and by each of its threads (by thread id, with the
/// thread's name).
pub struct CpuSample {
    /// The whole process.
    pub total: f64,
    /// Each live thread: id -> (name, seconds).
    pub threads: BTreeMap<u32, (String, f64)>,
}

/// Reads a process's CPU time and its threads'.
pub fn cpu_sample(pid: u32) -> Result<CpuSample> {
    let total = cpu_seconds(pid)?;
    let mut threads = BTreeMap::new();
    if let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for entry in dir.flatten() {
            let Some(tid) = entry.file_name().to_str().and_then(|t| t.parse().ok()) else {
                continue;
            };
            if let Some(t) = std::fs::read_to_string(entry.path().join("stat"))
                .ok()
                .as_deref()
                .and_then(stat_cpu)
            {
                threads.insert(tid, t);
            }
        }
    }
    Ok(CpuSample { total, threads })
}

/// What a process used between two samples `secs` apart, as % of one core: in all, and by
/// thread name (threads of one name summed), dearest first.
pub fn cpu_share(a: &CpuSample, b: &CpuSample, secs: f64) -> (f64, Vec<(String, f64)>) {
    let secs = secs.max(1e-9);
    let total = (b.total - a.total) / secs * 100.0;
    let mut by_name: BTreeMap<String, f64> = BTreeMap::new();
    for (tid, (name, t1)) in &b.threads {
        let t0 = a.threads.get(tid).map_or(0.0, |(_, t)| *t);
        *by_name.entry(name.clone()).or_default() += (t1 - t0) / secs * 100.0;
    }
    let mut threads: Vec<(String, f64)> = by_name.into_iter().collect();
    threads.sort_by(|x, y| y.1.total_cmp(&x.1));
    (total, threads)
}

/// The dearest threads as text: `name 1.2%, name 0.4%` (at most `n`, those above 0.05 %).
pub fn threads_text(threads: &[(String, f64)], n: usize) -> String {
    let shown: Vec<String> = threads
        .iter()
        .filter(|(_, p)| *p >= 0.05)
        .take(n)
        .map(|(name, p)| format!("{name} {p:.1}%"))
        .collect();
    if shown.is_empty() {
        "-".into()
    } else {
        shown.join(", ")
    }
}

/// A free TCP port on 127.0.0.1 (bound, then let go).
pub fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").context("cannot bind 127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// This checkout's commit, for the report.
pub fn commit() -> String {
    Command::new("git")
        .current_dir(root())
        .args(["rev-parse", "--short", "HEAD"])
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or_else(
            || "?".into(),
            |o| String::from_utf8_lossy(&o.stdout).trim().to_string(),
        )
}

/// How a started exporter's wait for its address ended.
pub enum Listening {
    /// It said `listening on http://ADDR/`: `ADDR`.
    On(String),
    /// Its stderr closed before it said where it listens: it exited.
    Exited,
    /// It said neither within the time given.
    Silent,
}

/// Starts `command` (a `gpuscope export`, its stdout dropped) with its stderr read line by line
/// on a thread of its own; waits up to `timeout` for the line that says where it listens.
pub fn start_listening(
    command: &mut Command,
    timeout: std::time::Duration,
) -> Result<(std::process::Child, Listening)> {
    use std::io::{BufRead, BufReader};
    use std::sync::mpsc;
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start {}", command.get_program().to_string_lossy()))?;
    let stderr = child.stderr.take().context("no stderr")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                if let Some(rest) = line.split("listening on http://").nth(1) {
                    let addr = rest.split('/').next().unwrap_or_default().to_string();
                    return Ok((child, Listening::On(addr)));
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => return Ok((child, Listening::Exited)),
            Err(mpsc::RecvTimeoutError::Timeout) => return Ok((child, Listening::Silent)),
        }
    }
}
