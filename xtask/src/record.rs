//! `cargo xtask record-fixture`: records a fixture from the real NVML on a GPU machine,
//! streaming it to the file, with what each NVML call cost.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use gpu_backend::cost::{CostCollector, TimedBackend};
use gpu_backend::fixture::{FixtureWriter, Meta, Style};
use gpu_backend::host::LiveHost;
use gpu_backend::nvml::{NvmlBackend, NvmlOptions};
use gpu_backend::recorder::{record_to, RecordOptions, WallTimeline};
use gpu_backend::{BackendError, EventKind, GpuBackend};

/// Versioned NVML entry points whose absence changes what a client must do. Recorded in the
/// fixture's `nvml_missing_functions` when the library lacks them.
const PROBED_FUNCTIONS: &[&str] = &[
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetComputeRunningProcesses_v2",
    "nvmlDeviceGetGraphicsRunningProcesses_v3",
    "nvmlDeviceGetGraphicsRunningProcesses_v2",
    "nvmlDeviceGetMemoryInfo_v2",
    "nvmlDeviceGetArchitecture",
    "nvmlDeviceGetMigMode",
    "nvmlDeviceGetNumFans",
    "nvmlDeviceGetFanSpeed_v2",
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetProcessUtilization",
    "nvmlDeviceGetTotalEnergyConsumption",
    "nvmlSystemGetCudaDriverVersion_v2",
];

/// What to record.
#[derive(clap::Args)]
pub struct RecordArgs {
    /// The fixture file to write: plain JSON, or compressed by its name (`.json.gz`,
    /// `.json.zst`). Written as the recording goes (to FILE.partial, renamed at the end).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// How many frames to record (default 30 unless --duration is given).
    #[arg(long, conflicts_with = "duration")]
    pub frames: Option<usize>,
    /// How long to record, e.g. `60s`, `1h`: as many frames as fit at --interval.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub duration: Option<Duration>,
    /// Time between frames, e.g. `1s`, `500ms`.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    pub interval: Duration,
    /// Path of the NVML library to load (default: the system's libnvidia-ml.so.1).
    #[arg(long, value_name = "PATH", env = "GPUSCOPE_NVML_LIB")]
    pub nvml_lib: Option<PathBuf>,
    /// Scenario name kept in the fixture (default: the file's name without its extensions).
    #[arg(long)]
    pub name: Option<String>,
    /// Description kept in the fixture.
    #[arg(long)]
    pub description: Option<String>,
}

impl RecordArgs {
    /// The frames asked for, directly or as a duration.
    fn frames(&self) -> Result<usize> {
        match (self.frames, self.duration) {
            (Some(0), _) => bail!("--frames must be at least 1"),
            (Some(n), _) => Ok(n),
            (None, Some(d)) => {
                if self.interval.is_zero() {
                    bail!("--interval must be above 0 with --duration");
                }
                let n = d.as_nanos().div_ceil(self.interval.as_nanos()).max(1);
                let max = gpu_backend::fixture::limits::MAX_FRAMES;
                match usize::try_from(n) {
                    Ok(n) if n <= max => Ok(n),
                    _ => bail!(
                        "--duration {} at --interval {} is more than {max} frames, the most a \
                         fixture holds",
                        humantime::format_duration(d),
                        humantime::format_duration(self.interval)
                    ),
                }
            }
            (None, None) => Ok(30),
        }
    }
}

/// Records, streaming each frame to the file as it is taken (memory stays flat however long the
/// recording), and ends the file properly when interrupted with Ctrl+C: a fixture with the
/// frames taken so far.
///
/// The NVML backend listens for every kind of event (clock changes included), so that the
/// recording keeps what the driver sent; every query goes through [`TimedBackend`], and the
/// median cost of each NVML function called, with `nvmlInit_v2`'s and `nvmlShutdown`'s, is
/// written into the fixture's `nvml_costs`, with how the driver runs calls from several
/// threads at once (`concurrency`, measured after the last frame:
/// [`gpu_backend::concurrency::measure`]).
pub fn run(args: RecordArgs) -> Result<()> {
    let frames = args.frames()?;
    let options = NvmlOptions::default().events(&EventKind::ALL);
    let backend =
        match NvmlBackend::open_with(args.nvml_lib.as_deref().map(|p| p.as_os_str()), options) {
            Ok(b) => b,
            Err(e)
                if matches!(
                    e.error,
                    BackendError::LibraryNotFound | BackendError::DriverNotLoaded
                ) =>
            {
                bail!(
                    "no NVIDIA driver here: {}. record-fixture needs a machine with an NVIDIA GPU \
                 and driver (or --nvml-lib pointing at an NVML library)",
                    e.error
                )
            }
            Err(e) => return Err(anyhow::anyhow!("{e}")).context("cannot initialise NVML"),
        };
    let costs = Arc::new(CostCollector::new());
    costs.add("nvmlInit_v2", backend.init_timing());
    let lib_name: OsString = args
        .nvml_lib
        .as_ref()
        .map(|p| p.clone().into_os_string())
        .unwrap_or_else(|| "libnvidia-ml.so.1".into());
    let missing = missing_functions(&lib_name);

    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        ctrlc::set_handler(move || stop.store(true, Ordering::Relaxed))
            .context("cannot install the Ctrl+C handler")?;
    }
    // The recording's time 0: `meta.recorded_at`, to the millisecond, and the instant the
    // frames' `t_ms` count from (the same instant on the two clocks).
    let (started_at, started) = whole_millisecond_now();
    let meta = Meta {
        name: args.name.clone().unwrap_or_else(|| file_stem(&args.out)),
        description: args
            .description
            .clone()
            .unwrap_or_else(|| "Recorded with cargo xtask record-fixture.".into()),
        source: format!("recorded from NVML ({})", lib_name.to_string_lossy()),
        recorded_at: Some(humantime::format_rfc3339_millis(started_at).to_string()),
    };
    let options = RecordOptions {
        frames,
        meta,
        nvml_missing_functions: missing,
    };
    let host = LiveHost::new();
    let mut timeline = WallTimeline::starting_at(started, args.interval);
    let mut writer = FixtureWriter::create(&args.out, Style::Compact)
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    let timed = TimedBackend::new(backend, costs.clone());
    let recorded = record_to(
        &timed,
        &host,
        &mut timeline,
        options,
        Some(&stop),
        &mut |done, total| {
            eprint!("\rrecording frame {done}/{total}");
            let _ = std::io::stderr().flush();
        },
        &mut writer,
    )
    .with_context(|| format!("cannot write {}", args.out.display()))?;
    eprintln!();
    if recorded.stopped {
        eprintln!(
            "interrupted: keeping the {} frames recorded so far",
            recorded.frames
        );
    }
    let devices = timed.inner().device_count().unwrap_or(0);
    // Whether the driver runs calls from several threads at once, measured on the bare
    // backend (its calls are not the recording's) and kept beside the costs.
    eprintln!("measuring the driver's concurrency");
    let probe = gpu_backend::concurrency::measure(timed.inner());
    let (backend, _) = timed.into_parts();
    if let Some(t) = backend.shutdown_timed() {
        costs.add("nvmlShutdown", t);
    }
    let mut profile = costs.profile();
    if let Some(probe) = probe {
        profile.set_concurrency(probe);
    }
    writer
        .end(&recorded.host, Some(&profile))
        .and_then(|()| {
            let text = writer.text_bytes();
            writer.finish().map(|()| text)
        })
        .map(|text| {
            let on_disk = std::fs::metadata(&args.out).map_or(0, |m| m.len());
            let per = |bytes: u64| bytes / (recorded.frames as u64 * u64::from(devices.max(1)));
            eprintln!(
                "wrote {} ({devices} GPUs, {} frames; {text} bytes of JSON, {on_disk} on disk: \
                 {} bytes of JSON and {} on disk per GPU per frame)",
                args.out.display(),
                recorded.frames,
                per(text),
                per(on_disk)
            );
        })
        .with_context(|| format!("cannot write {}", args.out.display()))
}

/// The file's name without its extensions (`my` for `my.json.zst`).
/// Now, moved back to a whole millisecond, on the wall clock and on the monotonic clock.
fn whole_millisecond_now() -> (std::time::SystemTime, std::time::Instant) {
    let (wall, mono) = (std::time::SystemTime::now(), std::time::Instant::now());
    let sub_ms = wall
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(Duration::ZERO, |d| {
            Duration::from_nanos(u64::from(d.subsec_nanos() % 1_000_000))
        });
    (wall - sub_ms, mono.checked_sub(sub_ms).unwrap_or(mono))
}

fn file_stem(path: &Path) -> String {
    path.file_name()
        .map(|s| s.to_string_lossy())
        .and_then(|s| s.split('.').next().map(str::to_string))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "recording".into())
}

/// The probed NVML functions that the library lacks.
fn missing_functions(lib: &OsString) -> Vec<String> {
    // SAFETY: loading the NVML library runs its initialisers, which NVML clients do anyway; the
    // symbols are only looked up, never called.
    let Ok(lib) = (unsafe { libloading::Library::new(lib) }) else {
        return Vec::new();
    };
    PROBED_FUNCTIONS
        .iter()
        .filter(|name| {
            // SAFETY: the symbol is looked up as an untyped pointer and never called.
            unsafe { lib.get::<*const ()>(name.as_bytes()) }.is_err()
        })
        .map(|s| s.to_string())
        .collect()
}
