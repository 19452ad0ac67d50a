//! `cargo xtask record-fixture`: records a fixture from the real NVML on a GPU machine.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use gpu_backend::fixture::Meta;
use gpu_backend::host::LiveHost;
use gpu_backend::nvml::NvmlBackend;
use gpu_backend::recorder::{record, RecordOptions, WallTimeline};
use gpu_backend::BackendError;

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
    /// The fixture file to write.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// How many frames to record.
    #[arg(long, default_value_t = 30)]
    pub frames: usize,
    /// Time between frames, e.g. `1s`, `500ms`.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    pub interval: Duration,
    /// Path of the NVML library to load (default: the system's libnvidia-ml.so.1).
    #[arg(long, value_name = "PATH", env = "GPUSCOPE_NVML_LIB")]
    pub nvml_lib: Option<PathBuf>,
    /// Scenario name kept in the fixture (default: the file's stem).
    #[arg(long)]
    pub name: Option<String>,
    /// Description kept in the fixture.
    #[arg(long)]
    pub description: Option<String>,
}

/// Records, writing the fixture even when interrupted with Ctrl+C (with the frames taken so far).
pub fn run(args: RecordArgs) -> Result<()> {
    if args.frames == 0 {
        bail!("--frames must be at least 1");
    }
    let backend = match &args.nvml_lib {
        Some(p) => NvmlBackend::with_library(p),
        None => NvmlBackend::new(),
    };
    let backend = match backend {
        Ok(b) => b,
        Err(e @ (BackendError::LibraryNotFound | BackendError::DriverNotLoaded)) => bail!(
            "no NVIDIA driver here: {e}. record-fixture needs a machine with an NVIDIA GPU and \
             driver (or --nvml-lib pointing at an NVML library)"
        ),
        Err(e) => return Err(e).context("cannot initialise NVML"),
    };
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
    let stem = args
        .out
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "recording".into());
    let meta = Meta {
        name: args.name.unwrap_or(stem),
        description: args
            .description
            .unwrap_or_else(|| "Recorded with cargo xtask record-fixture.".into()),
        source: format!("recorded from NVML ({})", lib_name.to_string_lossy()),
        recorded_at: Some(
            humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        ),
    };
    let options = RecordOptions {
        frames: args.frames,
        meta,
        nvml_missing_functions: missing,
    };
    let host = LiveHost::new();
    let mut timeline = WallTimeline::new(args.interval);
    let fixture = record(
        &backend,
        &host,
        &mut timeline,
        options,
        Some(&stop),
        &mut |done, total| {
            eprint!("\rrecording frame {done}/{total}");
            let _ = std::io::stderr().flush();
        },
    );
    eprintln!();
    if stop.load(Ordering::Relaxed) {
        eprintln!(
            "interrupted: keeping the {} frames recorded so far",
            fixture.frames.len()
        );
    }
    write_atomically(&args.out, &(fixture.to_json_pretty() + "\n"))?;
    eprintln!(
        "wrote {} ({} devices, {} frames)",
        args.out.display(),
        fixture.devices.len(),
        fixture.frames.len()
    );
    Ok(())
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

/// Writes through a temporary file beside `path`, so an interrupted write leaves no half file.
fn write_atomically(path: &Path, text: &str) -> Result<()> {
    let tmp = path.with_extension("json.partial");
    std::fs::write(&tmp, text).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}
