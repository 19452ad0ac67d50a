//! Where the GPU answers come from: the real NVML, a fixture file, or the demo fixture built
//! into the binary.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use clap::Args;
use gpu_backend::{BackendError, Fixture, SourceError};
use gpu_devices::Context;
use gpu_processes::ProcessCollector;

use crate::error::{NoDriver, UsageError};

/// The demo fixture, gzipped by build.rs: an 8-GPU H100 SXM box with NVLink and training jobs
/// (`fixtures/h100-sxm-8gpu.json`).
const DEMO_FIXTURE_GZ: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/demo.json.gz"));

/// The real recording built in (`--demo h100-real`), gzipped by build.rs: one H100 80GB HBM3
/// recorded with `cargo xtask record-fixture` (`fixtures/h100-real.json`, and
/// fixtures/h100-real/README.md).
const REAL_H100_FIXTURE_GZ: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/h100-real.json.gz"));

/// A real H200 under load, recorded the same way (`fixtures/h200-real.json`).
const REAL_H200_FIXTURE_GZ: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/h200-real.json.gz"));

/// Options that choose the source of GPU answers; shared by every command.
#[derive(Debug, Clone, Args)]
pub struct SourceArgs {
    /// Replay a fixture file instead of asking the real GPUs.
    #[arg(
        long,
        value_name = "FILE",
        env = "GPUSCOPE_FIXTURE",
        conflicts_with = "demo"
    )]
    pub fixture: Option<PathBuf>,

    /// Replay a recording built into gpuscope, which needs no GPU: the 8-GPU H100 box
    /// (`--demo`, `--demo h100-sxm-8gpu`) or a real H100 or H200 as recorded (`--demo h100-real`, `--demo h200-real`).
    /// `--demo=auto` uses the real GPUs when there is a driver, and the 8-GPU demo otherwise.
    #[arg(
        long,
        value_enum,
        value_name = "NAME",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "always"
    )]
    pub demo: Option<DemoMode>,

    /// With --fixture or --demo: serve this frame of the recording only, instead of replaying
    /// it on wall time.
    #[arg(long, value_name = "N")]
    pub frame: Option<usize>,

    /// Path of the NVML library to load (default: the system's libnvidia-ml.so.1).
    #[arg(long, value_name = "PATH", env = "GPUSCOPE_NVML_LIB")]
    pub nvml_lib: Option<PathBuf>,

    /// With the real GPUs: read this directory as /proc (the host's /proc mounted elsewhere,
    /// for a monitor in a container). Default /proc.
    #[arg(long, value_name = "DIR", env = "GPUSCOPE_PROC_ROOT")]
    pub proc_root: Option<PathBuf>,

    /// With the real GPUs: the kubelet's container-log directory, whose entry names tell each
    /// pod's name, namespace and container name (docs/containers.md). Default
    /// /var/log/containers.
    #[arg(long, value_name = "DIR", env = "GPUSCOPE_CONTAINER_LOGS")]
    pub container_logs: Option<PathBuf>,
}

/// Which built-in recording to replay, and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DemoMode {
    /// The 8-GPU H100 demo, always (what `--demo` alone means).
    #[value(hide = true)]
    Always,
    /// The 8-GPU H100 demo, only when no NVIDIA driver can be reached.
    Auto,
    /// The 8-GPU H100 SXM box with NVLink and training jobs (a scenario built from real dumps).
    #[value(name = "h100-sxm-8gpu")]
    H100Sxm8gpu,
    /// One real H100 80GB HBM3, as `record-fixture` recorded it (fixtures/h100-real.json).
    #[value(name = "h100-real")]
    H100Real,
    /// One real H200, idle then under load, as `record-fixture` recorded it
    /// (fixtures/h200-real.json).
    #[value(name = "h200-real")]
    H200Real,
}

impl DemoMode {
    /// The built-in recording this mode replays (when it does), its name for errors, and the
    /// source's label.
    fn recording(self) -> (&'static [u8], &'static str, &'static str) {
        match self {
            DemoMode::H100Real => (
                REAL_H100_FIXTURE_GZ,
                "<built-in h100-real recording>",
                "demo h100-real",
            ),
            DemoMode::H200Real => (
                REAL_H200_FIXTURE_GZ,
                "<built-in h200-real recording>",
                "demo h200-real",
            ),
            DemoMode::Always | DemoMode::Auto | DemoMode::H100Sxm8gpu => {
                (DEMO_FIXTURE_GZ, "<built-in demo fixture>", "demo")
            }
        }
    }
}

/// What answers: the real GPUs, or a recording (a fixture file, or one built into gpuscope).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// The real GPUs, through NVML.
    Nvml,
    /// A fixture file (`--fixture`).
    Fixture,
    /// A recording built into gpuscope (`--demo`, or `--demo=auto` with no driver).
    Demo,
}

impl SourceKind {
    /// Whether the processes listed run on this machine now, so that one may be sent a signal:
    /// only with the real GPUs. A replay's PIDs were another machine's, or this one's at
    /// another time, and may now name any process.
    pub fn is_live(self) -> bool {
        self == SourceKind::Nvml
    }
}

/// An opened source: the devices with their processes and host facts, and a name for people.
pub struct Source {
    /// Devices, processes and the host facts that go with them.
    pub collector: ProcessCollector,
    /// What answers; what may be done to the processes it lists follows from it.
    pub kind: SourceKind,
    /// `nvml`, `demo` or `fixture <path>`, for people: never a decision's input (that is
    /// [`Source::kind`]).
    pub label: String,
}

impl Source {
    /// Ends a one-shot command's use of the source without shutting NVML down: the process is
    /// about to exit, and the driver frees a process's session when it does, so waiting for
    /// `nvmlShutdown`, which tears the driver's session down (milliseconds; docs/benchmarks.md,
    /// "Real costs"), would only delay the exit. With
    /// NVML's calls logged (`-vv`) the source is dropped as usual, so that the log shows the
    /// shutdown.
    pub fn end_one_shot(self) {
        if gpu_backend::cost::calls_logged() {
            drop(self);
        } else {
            std::mem::forget(self);
        }
    }
}

impl SourceArgs {
    /// Opens the chosen source. A fixture replays on wall time, looping. Logged at `info`:
    /// what was opened, its devices and driver, and the time it took (NVML's initialisation
    /// and the devices' identity, for the real GPUs).
    pub fn open(&self) -> Result<Source> {
        self.open_listening(&gpu_backend::EventKind::HEALTH)
    }

    /// [`SourceArgs::open`] for a command that shows no events (`smi`, `stat`, `select`, a
    /// one-shot `snapshot`): the
    /// NVML backend starts no event listener, which spares the driver the event set's set-up
    /// (`nvmlEventSetCreate`, each GPU's supported kinds and registration) and the listener's
    /// thread. Events read as N/A from such a source; a recording still serves its own.
    pub fn open_without_events(&self) -> Result<Source> {
        self.open_listening(&[])
    }

    fn open_listening(&self, events: &[gpu_backend::EventKind]) -> Result<Source> {
        let started = std::time::Instant::now();
        let source = self.open_chosen(events)?;
        // Asked only when logged: the driver's version is one more backend call.
        if tracing::enabled!(tracing::Level::INFO) {
            let context = source.collector.context();
            let driver = context.driver_version().to_string();
            tracing::info!(
                source = %gpu_devices::text::Escaped(&source.label),
                gpus = context.device_count(),
                mig_devices = context.mig_device_count(),
                driver = %gpu_devices::text::Escaped(&driver),
                took_ms = started.elapsed().as_micros() as f64 / 1000.0,
                "source opened"
            );
        }
        Ok(source)
    }

    fn open_chosen(&self, events: &[gpu_backend::EventKind]) -> Result<Source> {
        match self.choose()? {
            Choice::Replay(source, kind, label) => {
                replay(&source, kind, label).map_err(|e| self.name_fixture(e))
            }
            Choice::Nvml(roots) => match open_nvml(self.nvml_lib.as_ref(), roots, events) {
                Err(NvmlOpenError::NoDriver(e)) => {
                    self.no_driver(e, |source, label| replay(&source, SourceKind::Demo, label))
                }
                Err(NvmlOpenError::Other(e)) => Err(e.context("cannot initialise NVML")),
                Ok(source) => Ok(source),
            },
        }
    }

    /// Opens the chosen source's backend bare and as what it is (no call log, no devices read
    /// yet), by the same rules as [`SourceArgs::open`]; the NVML backend listens for `events`.
    /// For `doctor`, which times every call itself.
    pub fn open_bare(&self, events: &[gpu_backend::EventKind]) -> Result<BareSource> {
        let bare = |source: gpu_backend::Source, label: String| -> Result<BareSource> {
            let (backend, _) = source.open_backend(events).map_err(usage_error)?;
            Ok(BareSource {
                backend,
                label,
                proc_root: None,
            })
        };
        match self.choose()? {
            Choice::Replay(source, _, label) => {
                bare(source, label).map_err(|e| self.name_fixture(e))
            }
            Choice::Nvml(roots) => {
                let source = gpu_backend::Source::Nvml {
                    library: self.nvml_lib.clone(),
                };
                match source.open_backend(events) {
                    Ok((backend, label)) => Ok(BareSource {
                        backend,
                        label,
                        proc_root: Some(roots.proc),
                    }),
                    Err(e) => match nvml_open_error(e) {
                        NvmlOpenError::NoDriver(e) => self.no_driver(e, bare),
                        NvmlOpenError::Other(e) => Err(e.context("cannot initialise NVML")),
                    },
                }
            }
        }
    }

    /// What the options choose: a recording to replay, or the real GPUs with these host roots.
    fn choose(&self) -> Result<Choice> {
        if self.frame.is_some() && self.fixture.is_none() && self.demo.is_none() {
            return Err(UsageError("--frame needs --fixture or --demo".into()).into());
        }
        if let Some(mode) = self.demo.filter(|&m| m != DemoMode::Auto) {
            let (source, label) = demo(mode, self.frame)?;
            return Ok(Choice::Replay(source, SourceKind::Demo, label));
        }
        if let Some(path) = &self.fixture {
            let source = gpu_backend::Source::FixtureFile {
                path: path.clone(),
                frame: self.frame,
            };
            return Ok(Choice::Replay(
                source,
                SourceKind::Fixture,
                format!("fixture {}", path.display()),
            ));
        }
        Ok(Choice::Nvml(self.host_roots()))
    }

    /// Where this machine's host facts are read with the real GPUs: `--proc-root` and
    /// `--container-logs`, or their defaults.
    pub fn host_roots(&self) -> gpu_backend::HostRoots {
        let defaults = gpu_backend::HostRoots::default();
        gpu_backend::HostRoots {
            proc: self.proc_root.clone().unwrap_or(defaults.proc),
            container_logs: self
                .container_logs
                .clone()
                .unwrap_or(defaults.container_logs),
        }
    }

    /// A fixture file that does not load, said with where its name came from: `--fixture FILE`
    /// or `GPUSCOPE_FIXTURE=FILE` (the environment's value, when the option was not given
    /// another). Other errors as they are.
    fn name_fixture(&self, e: anyhow::Error) -> anyhow::Error {
        let Some(path) = &self.fixture else { return e };
        let Some(UsageError(text)) = e.downcast_ref::<UsageError>() else {
            return e;
        };
        let shown = path.display().to_string();
        // The fixture's error starts with its file's name (escaped): said once, after the
        // option or variable that named it.
        let escaped = gpu_devices::text::escape_control(&shown);
        let Some(rest) = text.strip_prefix(&format!("{escaped}: ")) else {
            return e;
        };
        let (_, named) = named_by(
            path,
            gpu_backend::source::FIXTURE_ENV_VAR,
            "--fixture",
            &escaped,
        );
        UsageError(format!("{named}: {rest}")).into()
    }

    /// No driver here: the demo with `--demo=auto`, else an error that says what to try.
    fn no_driver<T>(
        &self,
        e: gpu_backend::nvml::OpenError,
        open_demo: impl FnOnce(gpu_backend::Source, String) -> Result<T>,
    ) -> Result<T> {
        if self.demo != Some(DemoMode::Auto) {
            let message = match self.library_not_there(&e) {
                Some(named) => named,
                None => format!(
                    "cannot reach the GPUs: {}.\n\
                     No NVIDIA driver on this machine? Try `--demo` to see a recorded 8-GPU \
                     machine, or `--fixture FILE` to replay a recording.",
                    gpu_devices::text::Escaped(&e.to_string())
                ),
            };
            return Err(NoDriver {
                library_missing: e.error == BackendError::LibraryNotFound,
                message,
            }
            .into());
        }
        eprintln!(
            "gpuscope: no NVIDIA driver here ({}); showing the built-in demo fixture",
            gpu_devices::text::Escaped(&e.to_string())
        );
        let (source, label) = demo(DemoMode::Auto, self.frame)?;
        open_demo(source, label)
    }
}

impl SourceArgs {
    /// The error for an NVML library named by `--nvml-lib` or `GPUSCOPE_NVML_LIB` that could not
    /// be loaded, naming the option or variable and the path (not a missing driver); `None`
    /// when the library was the system's, or it was loaded and NVML failed after.
    fn library_not_there(&self, e: &gpu_backend::nvml::OpenError) -> Option<String> {
        let lib = self.nvml_lib.as_ref()?;
        if e.error != BackendError::LibraryNotFound {
            return None;
        }
        let shown = gpu_devices::text::Escaped(&lib.display().to_string()).to_string();
        let (from_env, named) = named_by(
            lib,
            gpu_backend::source::NVML_LIB_ENV_VAR,
            "--nvml-lib",
            &shown,
        );
        // A bare file name is searched for by the loader; a path is looked at only there.
        let searched = lib.components().count() == 1;
        let what = if searched {
            "the dynamic loader could not load a library of that name"
        } else if lib.symlink_metadata().is_err() {
            "no library was found at that path"
        } else {
            "the library there could not be loaded"
        };
        let loader = e
            .loader_message
            .as_deref()
            .map(|m| format!(" ({})", gpu_devices::text::Escaped(m)))
            .unwrap_or_default();
        let leave_out = if from_env {
            format!("unset {}", gpu_backend::source::NVML_LIB_ENV_VAR)
        } else {
            "leave --nvml-lib out".to_string()
        };
        Some(format!(
            "cannot reach the GPUs: {named}: {what}{loader}.\n\
             Give the path of an NVML library, {leave_out} to load the system's, or try \
             `--demo` to see a recorded 8-GPU machine."
        ))
    }
}

/// Where a path given by an option or a variable came from, and its name for an error:
/// `VAR=PATH` when the environment's `var` holds it (the option was not given another), else
/// `OPTION PATH`; `shown` is the path as the error prints it.
fn named_by(path: &Path, var: &str, option: &str, shown: &str) -> (bool, String) {
    let from_env = std::env::var_os(var).is_some_and(|v| !v.is_empty() && Path::new(&v) == path);
    let named = if from_env {
        format!("{var}={shown}")
    } else {
        format!("{option} {shown}")
    };
    (from_env, named)
}

/// What the source options choose.
enum Choice {
    /// A fixture or the demo, with its kind and label.
    Replay(gpu_backend::Source, SourceKind, String),
    /// The real GPUs, with these host roots.
    Nvml(gpu_backend::HostRoots),
}

/// A source's backend bare, as [`SourceArgs::open_bare`] opens it.
pub struct BareSource {
    /// The backend: NVML or a replay.
    pub backend: gpu_backend::SourceBackend,
    /// `nvml`, `demo` or `fixture <path>`.
    pub label: String,
    /// With the real GPUs: the directory read as /proc (`--proc-root`, default /proc).
    pub proc_root: Option<PathBuf>,
}

/// The built-in recording `mode` names, as a source, with its label.
fn demo(mode: DemoMode, frame: Option<usize>) -> Result<(gpu_backend::Source, String)> {
    let (gz, name, label) = mode.recording();
    let mut json = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(gz), &mut json)
        .with_context(|| format!("cannot decompress the {name}"))?;
    let fixture = Fixture::from_json_str(&json, name)?;
    let source = gpu_backend::Source::Recording {
        fixture: Box::new(fixture),
        frame,
    };
    Ok((source, label.into()))
}

enum NvmlOpenError {
    /// No driver or library: the machine has no usable NVIDIA GPU. Names the library and
    /// keeps the loader's reason.
    NoDriver(gpu_backend::nvml::OpenError),
    /// NVML is there but failed.
    Other(anyhow::Error),
}

/// A fixture or the demo, by `gpu_backend::Source`'s rules; what the user named wrong (a fixture
/// that does not load, a frame out of range) is a usage error.
fn replay(source: &gpu_backend::Source, kind: SourceKind, label: String) -> Result<Source> {
    let opened = source.open().map_err(usage_error)?;
    let context = Context::from_backend(opened.backend).context("cannot replay the fixture")?;
    Ok(Source {
        collector: ProcessCollector::new(context, opened.host),
        kind,
        label,
    })
}

/// A fixture's or the demo's failure to open, as a usage error.
fn usage_error(e: SourceError) -> UsageError {
    match e {
        SourceError::FrameOutOfRange { .. } => UsageError(format!("--{e}")),
        other => UsageError(other.to_string()),
    }
}

/// NVML's failure to open: no driver, or something else.
fn nvml_open_error(e: SourceError) -> NvmlOpenError {
    match e {
        SourceError::Nvml(e)
            if matches!(
                e.error,
                BackendError::LibraryNotFound | BackendError::DriverNotLoaded
            ) =>
        {
            NvmlOpenError::NoDriver(e)
        }
        SourceError::Nvml(e) => NvmlOpenError::Other(e.into()),
        other => NvmlOpenError::Other(other.into()),
    }
}

fn open_nvml(
    lib: Option<&PathBuf>,
    roots: gpu_backend::HostRoots,
    events: &[gpu_backend::EventKind],
) -> Result<Source, NvmlOpenError> {
    let source = gpu_backend::Source::Nvml {
        library: lib.cloned(),
    };
    let opened = source.open_with_events(events).map_err(nvml_open_error)?;
    let context = Context::from_backend(opened.backend).map_err(|e| {
        NvmlOpenError::Other(match e {
            // Its Display already holds the source: the backend's error alone says it once.
            gpu_devices::Error::Backend { source, .. } => source.into(),
            other => other.into(),
        })
    })?;
    // The live host facts, from the roots the command line or environment names.
    let host = std::sync::Arc::new(gpu_backend::host::LiveHost::with_roots(roots));
    Ok(Source {
        collector: ProcessCollector::new(context, host),
        kind: SourceKind::Nvml,
        label: opened.label,
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn args(fixture: Option<PathBuf>, demo: Option<DemoMode>) -> SourceArgs {
        SourceArgs {
            fixture,
            demo,
            frame: Some(0),
            nvml_lib: None,
            proc_root: None,
            container_logs: None,
        }
    }

    /// `top` decided whether it may send a signal by the source's label for people
    /// (`label == "nvml"`); it follows the source's kind now, and no recording is live, whatever
    /// its file is called.
    #[test]
    fn only_the_real_gpus_are_live_whatever_a_recording_is_called() {
        let demo = args(None, Some(DemoMode::Always)).open().unwrap();
        assert_eq!(demo.kind, SourceKind::Demo);
        let dir = tempfile::tempdir().unwrap();
        let named_nvml = dir.path().join("nvml");
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/h100-mig.json");
        std::fs::copy(fixture, &named_nvml).unwrap();
        let file = args(Some(named_nvml), None).open().unwrap();
        assert_eq!(file.kind, SourceKind::Fixture);
        for kind in [demo.kind, file.kind] {
            assert!(!kind.is_live(), "{kind:?}");
        }
        assert!(SourceKind::Nvml.is_live());
    }
}
