//! `gpuscope record`: record memory (or another metric) of every device over time, gpulink-style:
//! until Ctrl+C or for a set duration, streaming samples to CSV / NDJSON if asked, then save a
//! plot and print one summary line per device.
//!
//! The plot is written when `--output` names it, or when no other output was named (no `--csv`,
//! `--ndjson` or `--no-plot`): then it is `memory.png`, or the first of `memory-1.png`,
//! `memory-2.png`, ... that does not exist, so that a plot nobody named never stops a
//! recording. A file that is named wrong (its folder missing, a directory, a symbolic link, a
//! file that exists without `--overwrite`) is refused before anything is recorded, with exit
//! code 2, whichever option named it; a file that cannot be written (no permission, a full
//! disk) is exit code 1.
//!
//! A sample that cannot be written to the CSV or NDJSON file (a full disk) stops the recording:
//! the file keeps its whole lines, the plot is still saved and the summary printed from what was
//! recorded, and the command exits 1 saying which file failed. The plot is written whole or not
//! at all (a temporary file renamed into place). Outputs naming the same file are refused
//! (exit 2), and so is an output that is a symbolic link: nothing is written through a link.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use gpu_metrics::{
    plot, CsvSink, DeviceMetric, IfExists, NdjsonSink, PlotFormat, PlotOptions, Record, Recorder,
};

use crate::cli::args;
use crate::error::UsageError;
use crate::present::value::counted;
use crate::source::SourceArgs;

/// Command-line arguments.
#[derive(Debug, clap::Args)]
#[command(after_help = crate::error::EXIT_CODES_HELP)]
pub struct Args {
    #[command(flatten)]
    source: SourceArgs,

    /// Where to save the plot; `.png` or `.svg`. Without it the plot is memory.png (or
    /// memory-1.png, ... when that exists) unless --csv, --ndjson or --no-plot is given.
    /// (gpulink's `-o FILE`, which the `gpulink` front door takes; in gpuscope's commands -o is
    /// --only.)
    #[arg(long, value_name = "FILE")]
    output: Option<PathBuf>,

    /// Write no plot: only the summary, and the --csv or --ndjson file when named.
    #[arg(long, conflicts_with = "output")]
    no_plot: bool,

    /// Record only these devices: `0`, `3` (a GPU with its MIG devices), `0:1` (one MIG
    /// device), space- or comma-separated. An id that names no device is a usage error.
    #[arg(short = 'o', long, visible_alias = "id", value_name = "ID", num_args = 1.., value_delimiter = ',')]
    only: Vec<String>,

    /// Time between samples: seconds (`2`, `0.5`) or with a unit (`100ms`, `2s`, `1m`);
    /// 10ms to 1h. The default, 100ms, catches a memory peak that lasts a tenth of a second
    /// (NVML reads memory use at the instant asked, so a peak between two samples is missed;
    /// gpulink samples back to back) for well under 1% of a core.
    #[arg(short = 'i', long, value_name = "DURATION", default_value = "100ms", value_parser = args::duration(args::RECORD_INTERVAL))]
    interval: Duration,

    /// Stop after this long (`30s`, `10m`, `2h`) instead of waiting for Ctrl+C; 10ms to 30
    /// days.
    #[arg(long, value_name = "DURATION", value_parser = args::duration(args::RECORD_DURATION))]
    duration: Option<Duration>,

    /// Also write every sample to this CSV file as it is taken (not the file of --ndjson or
    /// --output).
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,

    /// Also write every sample to this newline-delimited JSON file as it is taken (not the file
    /// of --csv or --output).
    #[arg(long, value_name = "FILE")]
    ndjson: Option<PathBuf>,

    /// What to record, by its name in gpuscope's vocabulary (nvidia-smi's) or another of its
    /// names: memory.used (memory_used), utilization.gpu (gpu_utilization), utilization.memory
    /// (memory bandwidth; memory_utilization), temperature.gpu (temperature) or power.draw
    /// (power_usage); several, comma-separated, draw one panel each in the plot (--csv and
    /// --ndjson take one metric). docs/cli.md lists every name.
    #[arg(long, value_name = "METRIC", value_delimiter = ',', num_args = 1.., default_value = "memory_used")]
    metric: Vec<DeviceMetric>,

    /// Plot width in pixels, 200 to 7680.
    #[arg(long, value_name = "PX", default_value_t = 1280, value_parser = args::whole::<u32>(args::PLOT_WIDTH))]
    width: u32,

    /// Plot height in pixels, 150 to 4320.
    #[arg(long, value_name = "PX", default_value_t = 720, value_parser = args::whole::<u32>(args::PLOT_HEIGHT))]
    height: u32,

    /// The summary printed at the end: `human` (min, mean and max in the plot's unit: MiB below
    /// 100 GiB, GiB from there, as gpuscope prints memory everywhere; the CSV and NDJSON files
    /// keep bytes) or `gpulink` (gpulink's line, `min=1729.236992[MB] / max=...`, in
    /// megabytes of 10^6 bytes, for scripts that parse it).
    #[arg(long, value_enum, value_name = "STYLE", default_value = "human")]
    summary: SummaryStyle,

    /// Replace the plot, CSV or NDJSON file when it exists (without it, an existing file is
    /// refused with exit code 2 before anything is recorded). A symbolic link there is refused
    /// either way: gpuscope never writes through a link.
    #[arg(long)]
    overwrite: bool,
}

/// The `--summary` styles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum SummaryStyle {
    /// Min, mean and max in gpuscope's units.
    Human,
    /// gpulink's summary line, as gpulink prints it.
    Gpulink,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let plot = plot_path(&args)?;
    check_outputs(&args, plot.as_deref())?;
    refuse_colliding_outputs(&args, plot.as_deref())?;
    refuse_existing_outputs(&args, plot.as_deref())?;
    let src = args.source.open()?;
    // Every GPU and each MIG device after its GPU, as `snapshot` lists them.
    let devices = args::keep_only(&args.only, src.collector.context().all_devices(), |d| {
        d.id()
    })?;
    if devices.is_empty() {
        return Err(
            crate::error::Shortfall::nothing(format!("no GPU to record ({})", src.label)).into(),
        );
    }
    let (mut recorders, metrics) = recorders(&args, &devices)?;
    let failure = sample(&args, &mut recorders, &metrics, devices.len())?;
    finish(&args, plot.as_deref(), &recorders, failure)
}

/// The plot's name when no output was named.
const DEFAULT_PLOT: &str = "memory.png";

/// How many numbered names ([`DEFAULT_PLOT`] as `memory-N.png`) are tried before giving up.
const DEFAULT_PLOT_TRIES: u32 = 1000;

/// Where the plot goes: `--output`; else, when no other output was named, [`DEFAULT_PLOT`] in
/// the current folder, or the first `memory-N.png` that does not exist (a plot nobody named
/// never makes the command fail for being there; with `--overwrite`, `memory.png` is replaced);
/// else none.
fn plot_path(args: &Args) -> anyhow::Result<Option<PathBuf>> {
    if let Some(path) = &args.output {
        return Ok(Some(path.clone()));
    }
    if args.no_plot || args.csv.is_some() || args.ndjson.is_some() {
        return Ok(None);
    }
    let default = PathBuf::from(DEFAULT_PLOT);
    if args.overwrite || default.symlink_metadata().is_err() {
        return Ok(Some(default));
    }
    (1..=DEFAULT_PLOT_TRIES)
        .map(|n| PathBuf::from(format!("memory-{n}.png")))
        .find(|p| p.symlink_metadata().is_err())
        .map(Some)
        .ok_or_else(|| {
            UsageError(format!(
                "memory.png and memory-1.png to memory-{DEFAULT_PLOT_TRIES}.png all exist here; \
                 name the plot with --output FILE"
            ))
            .into()
        })
}

/// The outputs named: the plot (`--output`, or the default one), `--csv` and `--ndjson`, each
/// with the option that names it.
fn outputs<'a>(args: &'a Args, plot: Option<&'a Path>) -> Vec<(&'static str, &'a Path)> {
    [
        ("--output", plot),
        ("--csv", args.csv.as_deref()),
        ("--ndjson", args.ndjson.as_deref()),
    ]
    .into_iter()
    .filter_map(|(option, path)| path.map(|p| (option, p)))
    .collect()
}

/// Refuses a plot's file that is neither `.png` nor `.svg`, and any output whose folder does
/// not exist or that is a directory: a file named wrong, exit code 2 whichever option named it
/// (docs/exit-codes.md).
fn check_outputs(args: &Args, plot: Option<&Path>) -> anyhow::Result<()> {
    if let Some(plot) = plot {
        if PlotFormat::from_path(plot).is_none() {
            return Err(UsageError(format!(
                "--output {}: the plot's file name must end in .png or .svg",
                shown(plot)
            ))
            .into());
        }
    }
    for (option, path) in outputs(args, plot) {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !dir.is_dir() {
                return Err(UsageError(format!(
                    "{option} {}: the folder {} does not exist",
                    shown(path),
                    shown(dir)
                ))
                .into());
            }
        }
        if path.is_dir() {
            return Err(UsageError(format!(
                "{option} {}: is a directory; name a file in it",
                shown(path)
            ))
            .into());
        }
    }
    Ok(())
}

/// A path for a message: control characters escaped.
fn shown(path: &Path) -> String {
    gpu_devices::text::Escaped(&path.display().to_string()).to_string()
}

/// One recorder per metric asked (each once, in the order given), the first streaming to the
/// `--csv` and `--ndjson` files, which take one metric only; and the metrics.
fn recorders(
    args: &Args,
    devices: &[gpu_devices::Device],
) -> anyhow::Result<(Vec<Recorder>, Vec<DeviceMetric>)> {
    let mut metrics: Vec<DeviceMetric> = Vec::new();
    for m in &args.metric {
        if !metrics.contains(m) {
            metrics.push(*m);
        }
    }
    if metrics.len() > 1 && (args.csv.is_some() || args.ndjson.is_some()) {
        return Err(UsageError(format!(
            "--csv and --ndjson write one metric; {} were asked for (record them in separate runs, \
             or leave the sample files out)",
            metrics.len()
        ))
        .into());
    }
    let mut recorders: Vec<Recorder> = metrics
        .iter()
        .map(|&m| Recorder::new(devices.to_vec(), m))
        .collect();
    // Checked above, and again by the opening itself (a link or a file may have appeared
    // since): a symbolic link is never followed, and without --overwrite a file is not replaced.
    let if_exists = if args.overwrite {
        IfExists::Truncate
    } else {
        IfExists::KeepFile
    };
    if let Some(path) = &args.csv {
        let sink = CsvSink::create_with(path, if_exists).map_err(|e| refused("--csv", e))?;
        let r = recorders.remove(0);
        recorders.insert(0, r.with_sink(Box::new(sink))?);
    }
    if let Some(path) = &args.ndjson {
        let sink = NdjsonSink::create_with(path, if_exists).map_err(|e| refused("--ndjson", e))?;
        let r = recorders.remove(0);
        recorders.insert(0, r.with_sink(Box::new(sink))?);
    }
    Ok((recorders, metrics))
}

/// Samples every `--interval` until Ctrl+C or `--duration`, showing the progress on a
/// terminal. A sample that cannot be written (a full disk) stops the recording, and is
/// returned: what was recorded is still plotted and summarised.
fn sample(
    args: &Args,
    recorders: &mut [Recorder],
    metrics: &[DeviceMetric],
    devices: usize,
) -> anyhow::Result<Option<gpu_metrics::Error>> {
    let (tx, rx) = mpsc::channel();
    ctrlc::set_handler(move || {
        let _ = tx.send(());
    })
    .context("cannot install the Ctrl+C handler")?;

    let progress = std::io::stderr().is_terminal();
    let start = Instant::now();
    let deadline = args.duration.map(|d| start + d);
    let mut next = start;
    let mut failure = None;
    'sampling: loop {
        let mut first = None;
        let started = Instant::now();
        for recorder in recorders.iter_mut() {
            match recorder.record(true) {
                Ok(sample) => {
                    first.get_or_insert(sample);
                }
                Err(e) => {
                    failure = Some(e);
                    break 'sampling;
                }
            }
        }
        tracing::debug!(
            devices,
            metrics = recorders.len(),
            total_ms = started.elapsed().as_micros() as f64 / 1000.0,
            "refresh"
        );
        if let (true, Some(sample)) = (progress, &first) {
            show_progress(&recorders[0], sample, metrics[0]);
        }
        next += args.interval;
        let now = Instant::now();
        if next < now {
            // Sampling took longer than the interval: skip the ticks missed.
            next = now;
        }
        if deadline.is_some_and(|d| next > d) {
            break;
        }
        match rx.recv_timeout(next.saturating_duration_since(now)) {
            Err(RecvTimeoutError::Timeout) => continue,
            Ok(()) | Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    if progress {
        eprint!("\r\x1b[K");
    }
    Ok(failure)
}

/// Saves the plot and prints the summary of what was recorded, then says how the recording
/// ended: the sample file that failed, or the plot that could not be saved, is the error.
fn finish(
    args: &Args,
    plot_to: Option<&Path>,
    recorders: &[Recorder],
    failure: Option<gpu_metrics::Error>,
) -> anyhow::Result<()> {
    let recorder = &recorders[0];
    let records: Vec<Record> = recorders.iter().flat_map(Recorder::records).collect();
    let options = PlotOptions {
        width: args.width,
        height: args.height,
        title: None,
    };
    let plotted = plot_to.map(|path| plot(&records, path, &options).map(|()| path));
    // People's outputs, the summary and the plot, show memory in one unit (MiB below 100 GiB,
    // GiB from there); the CSV and NDJSON files keep bytes.
    let lines = match args.summary {
        SummaryStyle::Human => gpu_metrics::human_summaries(&records),
        SummaryStyle::Gpulink => records.iter().map(Record::summary).collect(),
    };
    let text: String = lines.into_iter().map(|l| l + "\n").collect();
    // The summary comes out even when the plot or a sample file cannot be written: the
    // recording is not lost.
    crate::output::write_stdout(&text)?;
    let samples = format!(
        "{} sample{} over {:.1}s",
        recorder.len(),
        if recorder.len() == 1 { "" } else { "s" },
        records.first().map_or(0.0, |r| r.duration),
    );
    let saved = |path: &Path| format!("plot saved to {}", shown(path));
    match (failure, plotted) {
        (None, None) => {
            eprintln!("gpuscope: {samples}");
            Ok(())
        }
        (None, Some(Ok(path))) => {
            eprintln!("gpuscope: {samples}; {}", saved(path));
            Ok(())
        }
        (None, Some(Err(plot_error))) => Err(plot_error.into()),
        (Some(write_error), None) => Err(anyhow::anyhow!(
            "{write_error}; recording stopped after {samples}"
        )),
        (Some(write_error), Some(Ok(path))) => Err(anyhow::anyhow!(
            "{write_error}; recording stopped after {samples}; {}",
            saved(path)
        )),
        (Some(write_error), Some(Err(plot_error))) => Err(anyhow::anyhow!(
            "{write_error}; recording stopped after {samples}; and {plot_error}"
        )),
    }
}

/// Refuses `--csv`, `--ndjson` and `--output` naming the same file (they would overwrite each other):
/// compared as canonical paths where the file exists, else by their canonical folder and name.
fn refuse_colliding_outputs(args: &Args, plot: Option<&Path>) -> anyhow::Result<()> {
    let named: Vec<(&str, &Path, PathBuf)> = outputs(args, plot)
        .into_iter()
        .map(|(option, p)| (option, p, same_file_key(p)))
        .collect();
    for (i, (a, a_path, a_key)) in named.iter().enumerate() {
        for (b, _, b_key) in &named[i + 1..] {
            if a_key == b_key {
                return Err(UsageError(format!(
                    "{a} and {b} name the same file ({}): each output needs its own file",
                    a_path.display()
                ))
                .into());
            }
        }
    }
    Ok(())
}

/// Refuses an output that is a symbolic link, dangling or not, with or without `--overwrite`
/// (gpuscope never writes through a link: docs/security.md), and without `--overwrite` one
/// that names an existing regular file (a device such as /dev/null, or a pipe, is written to
/// as before).
fn refuse_existing_outputs(args: &Args, plot: Option<&Path>) -> anyhow::Result<()> {
    for (option, path) in outputs(args, plot) {
        if let Err(e) = gpu_backend::files::refuse_link(path) {
            return Err(UsageError(format!("{option} {}: {e}", shown(path))).into());
        }
        if !args.overwrite && std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
            return Err(UsageError(format!(
                "{option} {}: the file exists; --overwrite replaces it",
                shown(path)
            ))
            .into());
        }
    }
    Ok(())
}

/// A sample file that could not be opened: a usage error when it was refused for what is at
/// its path (a symbolic link, a file that exists, a directory) or its folder is missing (gone
/// since [`check_outputs`]), as for the plot; else the system's error.
fn refused(option: &str, e: gpu_metrics::Error) -> anyhow::Error {
    use gpu_backend::files::FileError;
    if let gpu_metrics::Error::Io { path, error } = &e {
        if error.kind() == std::io::ErrorKind::NotFound {
            return UsageError(format!(
                "{option} {}: its folder does not exist",
                shown(path)
            ))
            .into();
        }
        let why = error.get_ref().and_then(|e| e.downcast_ref::<FileError>());
        if let Some(
            why @ (FileError::SymbolicLink | FileError::Exists | FileError::NotRegular { .. }),
        ) = why
        {
            let hint = match why {
                FileError::Exists => "; --overwrite replaces it",
                _ => "",
            };
            return UsageError(format!(
                "{option} {}: {why}{hint}",
                gpu_devices::text::Escaped(&path.display().to_string())
            ))
            .into();
        }
    }
    e.into()
}

/// What `path` names, for comparing: its canonical form where it exists, else its folder's
/// canonical form joined with its name, else the path as given.
fn same_file_key(path: &Path) -> PathBuf {
    if let Ok(p) = path.canonicalize() {
        return p;
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    match (dir.canonicalize(), path.file_name()) {
        (Ok(d), Some(name)) => d.join(name),
        _ => path.to_path_buf(),
    }
}

/// One line on stderr, rewritten in place: samples, time, and the metric summed over devices.
fn show_progress(recorder: &Recorder, sample: &gpu_metrics::Sample, metric: DeviceMetric) {
    let values: Vec<f64> = sample.values.iter().flatten().copied().collect();
    let now = match metric {
        DeviceMetric::MemoryUsed => format!(
            "{} used on {}",
            gpu_devices::units::bytes2human(values.iter().sum::<f64>() as u64),
            counted(sample.values.len() as u64, "GPU", "GPUs")
        ),
        m => {
            let mean = values.iter().sum::<f64>() / values.len().max(1) as f64;
            format!(
                "{} {mean:.1}{} (mean of {})",
                m.title(),
                m.unit(),
                counted(sample.values.len() as u64, "GPU", "GPUs")
            )
        }
    };
    let mut err = std::io::stderr().lock();
    let _ = write!(
        err,
        "\r\x1b[Krecording: {}, {}, {now}; Ctrl+C to stop",
        counted(recorder.len(), "sample", "samples"),
        gpu_devices::units::timedelta2human(Duration::from_secs_f64(sample.elapsed_s)),
    );
    let _ = err.flush();
}
