//! `gpuscope info [INDEX]`: the igpu-style readable view of one device (with its MIG devices),
//! or of every device; `--json` gives the `gpuscope snapshot --json` document of the same
//! devices (docs/info-json.md).

mod health;

use std::fmt::{self, Write as _};
use std::str::FromStr;
use std::time::Duration;

use gpu_backend::{Architecture, GpmMetrics};
use gpu_devices::text::{escape_control, Escaped};
use gpu_devices::{Device, DeviceSnapshot, Na, Section};
use gpu_processes::Snapshots;

use crate::error::UsageError;
use crate::present::json::ConfigView;
use crate::present::value::na;
use crate::source::SourceArgs;

/// Command-line arguments.
#[derive(Debug, clap::Args)]
#[command(after_help = crate::error::EXIT_CODES_HELP)]
pub struct Args {
    #[command(flatten)]
    source: SourceArgs,

    /// The GPU to show (its NVML index, as `nvidia-smi` numbers them; with its MIG devices), or
    /// one MIG device as GPU:MIG (`0:1`). Every GPU when omitted.
    #[arg(value_name = "INDEX")]
    index: Option<Target>,

    /// Print JSON (the document of `gpuscope snapshot --json`, for these devices only; see
    /// docs/info-json.md).
    #[arg(long)]
    json: bool,

    /// GPM (Hopper and newer) measures activity between two samples: take the first this long
    /// before the one shown, so that ACTIVITY is the activity over that time (0: take one,
    /// and ACTIVITY is N/A). At most 5s.
    #[arg(long, value_name = "DURATION", default_value = "100ms", value_parser = crate::cli::args::duration(crate::cli::args::INFO_GPM_WINDOW))]
    gpm_window: Duration,
}

/// Which device(s) to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A GPU and its MIG devices.
    Gpu(u32),
    /// One MIG device: (GPU index, MIG index).
    Mig(u32, u32),
}

impl FromStr for Target {
    type Err = String;

    fn from_str(text: &str) -> Result<Target, String> {
        let number = |part: &str| {
            part.parse::<u32>().map_err(|_| {
                format!("{text:?} is not a device index: expected a GPU index such as 3, or GPU:MIG such as 0:1")
            })
        };
        match text.split_once(':') {
            None => Ok(Target::Gpu(number(text)?)),
            Some((gpu, mig)) => Ok(Target::Mig(number(gpu)?, number(mig)?)),
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Gpu(i) => write!(f, "{i}"),
            Target::Mig(g, m) => write!(f, "{g}:{m}"),
        }
    }
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let src = args.source.open()?;
    let ctx = src.collector.context();
    let devices: Vec<Device> = match args.index {
        None => ctx.all_devices(),
        Some(Target::Gpu(i)) => {
            let gpu = ctx.device(i).map_err(|e| UsageError(e.to_string()))?;
            let mut list = vec![gpu.clone()];
            if gpu.is_mig_mode_enabled() {
                list.extend(gpu.mig_devices());
            }
            list
        }
        Some(Target::Mig(g, m)) => {
            vec![ctx
                .mig_device(g, m)
                .map_err(|e| UsageError(e.to_string()))?]
        }
    };
    if !args.gpm_window.is_zero() {
        first_gpm_sample(&src.collector, &devices, args.gpm_window);
    }
    if args.json {
        let view = crate::present::json::take_devices(&src.collector, src.label, &devices);
        return crate::output::write_stdout(&crate::output::json(&view, true)?);
    }
    let snaps = src.collector.take_snapshots(&devices);
    // A process's parent by name, as igpu shows it: the host asked once per parent.
    let host = src.collector.host().clone();
    let parent_name = |ppid: u32| host.process(ppid).and_then(|f| f.name);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "gpuscope info ({})  driver {}  CUDA {}",
        Escaped(&src.label),
        Escaped(&ctx.driver_version().to_string()),
        Escaped(&ctx.cuda_driver_version().to_string())
    );
    for d in &snaps.devices {
        out.push_str(&render_device(d, &snaps, &parent_name));
    }
    crate::output::write_stdout(&out)
}

/// One line of a section: its label, and its value from the section's view.
type Line<T> = (&'static str, fn(&T) -> String);

/// Writes `lines` of `view`, each `    Label            : value` (the values in one column).
fn write_lines<T>(out: &mut String, view: &T, lines: &[Line<T>]) {
    for (label, value) in lines {
        let _ = writeln!(out, "    {label:<17}: {}", value(view));
    }
}

/// The CONFIGURATION section of one device: what `nvidia-smi -q` shows of its configuration
/// (the JSON's `devices[].config`); N/A for what the device cannot tell.
fn render_config(out: &mut String, c: &ConfigView) {
    let _ = writeln!(out, "CONFIGURATION:");
    write_lines(out, c, CONFIG);
    let _ = writeln!(out);
}

/// The CONFIGURATION section's lines.
#[rustfmt::skip]
const CONFIG: &[Line<ConfigView>] = &[
    ("Board ID", |c| format!("{} (multi-GPU board: {})", na(c.board_id.map(|id| format!("{id:#x}"))), yes(c.multi_gpu_board))),
    ("Virtualization", |c| escaped(&c.virtualization_mode)),
    ("Accounting mode", |c| on(c.accounting_mode)),
    ("Operation mode", |c| format!("current {}, pending {}", escaped(&c.gpu_operation_mode_current), escaped(&c.gpu_operation_mode_pending))),
    ("App clocks", |c| format!("graphics {}, memory {} (default: graphics {}, memory {})", mhz(c.applications_clock_graphics_mhz), mhz(c.applications_clock_memory_mhz), mhz(c.default_applications_clock_graphics_mhz), mhz(c.default_applications_clock_memory_mhz))),
];

fn mhz(v: Option<u32>) -> String {
    na(v.map(|m| format!("{m} MHz")))
}

fn yes(v: Option<bool>) -> String {
    na(v.map(|b| if b { "yes" } else { "no" }))
}

fn on(v: Option<bool>) -> String {
    na(v.map(|b| if b { "on" } else { "off" }))
}

/// Outside text (a version, a mode's name), control characters escaped; or N/A.
fn escaped(v: &Option<String>) -> String {
    Escaped(&na(v.as_deref())).to_string()
}

/// Takes the first of the two GPM samples that `info`'s ACTIVITY measures between, `window`
/// before the refresh shown: a refresh of `devices` that asks GPM only (the backend keeps the
/// sample), then a sleep. A GPU without GPM answers at once that it has none.
fn first_gpm_sample(
    collector: &gpu_processes::ProcessCollector,
    devices: &[Device],
    window: Duration,
) {
    let ctx = collector.context();
    let only_gpm: Vec<gpu_devices::Query> = gpu_backend::fixture::DeviceDynamic::FIELDS
        .iter()
        .map(|&(_, q)| q)
        .filter(|&q| q != gpu_devices::Query::gpm_metrics)
        .collect();
    let everything = ctx.query_plan();
    ctx.set_query_plan(gpu_devices::QueryPlan::everything().without(&only_gpm));
    for d in devices {
        d.snapshot();
    }
    ctx.set_query_plan((*everything).clone());
    std::thread::sleep(window);
}

/// The ACTIVITY section: GPM metrics over `--gpm-window`; N/A where GPM cannot tell, with why.
fn render_activity(out: &mut String, d: &DeviceSnapshot) {
    let _ = writeln!(out, "ACTIVITY (GPM):");
    let Some(m) = d.gpm.value() else {
        let gpm_generation = matches!(
            d.architecture.value(),
            Some(Architecture::Hopper | Architecture::Blackwell | Architecture::Unknown(_))
        );
        let why = match &d.gpm {
            Na::Failed(e) => format!("N/A ({e})"),
            _ if gpm_generation => "N/A (GPM measures activity between two samples, and there \
                 is only one so far: `--gpm-window` sets the time between them; `gpuscope top` \
                 and `export` show it as they run)"
                .to_string(),
            _ => "N/A (no GPM on this GPU: it needs Hopper or newer)".to_string(),
        };
        let _ = writeln!(out, "    {why}");
        let _ = writeln!(out);
        return;
    };
    write_lines(out, m, ACTIVITY);
    let _ = writeln!(out);
}

/// The ACTIVITY section's lines, when GPM tells.
#[rustfmt::skip]
const ACTIVITY: &[Line<GpmMetrics>] = &[
    ("SM", |m| format!("active {}, occupancy {}", pct(m.sm_activity), pct(m.sm_occupancy))),
    ("Tensor", |m| format!("any {}, DFMA {}, HMMA {}, IMMA {}", pct(m.tensor_activity), pct(m.tensor_dfma_activity), pct(m.tensor_hmma_activity), pct(m.tensor_imma_activity))),
    ("Pipes", |m| format!("FP64 {}, FP32 {}, FP16 {}, integer {}", pct(m.fp64_activity), pct(m.fp32_activity), pct(m.fp16_activity), pct(m.integer_activity))),
    ("DRAM bandwidth", |m| format!("{}; graphics engine {}", pct(m.dram_activity), pct(m.graphics_activity))),
    ("PCIe", |m| format!("tx {}, rx {}", rate(m.pcie_tx), rate(m.pcie_rx))),
    ("NVLink", |m| format!("tx {}, rx {}", rate(m.nvlink_tx), rate(m.nvlink_rx))),
    ("Media engines", |m| format!("NVDEC {}, NVJPG {}, NVOFA {} (mean of the engines)", pct(m.engine_mean("nvdec")), pct(m.engine_mean("nvjpg")), pct(m.engine_mean("nvofa")))),
];

fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "N/A".to_string(), |v| format!("{v:.1} %"))
}

fn rate(v: Option<f64>) -> String {
    v.map_or_else(|| "N/A".to_string(), |v| format!("{v:.1} MiB/s"))
}

/// One device: gpu-devices' sections, then its processes joined with their host facts.
fn render_device(
    d: &DeviceSnapshot,
    snaps: &Snapshots,
    parent_name: &dyn Fn(u32) -> Option<String>,
) -> String {
    let mut out = String::new();
    let title = if d.id.is_mig() {
        format!("MIG DEVICE {}", d.id)
    } else {
        format!("GPU {}", d.id)
    };
    let _ = writeln!(
        out,
        "\n==== {title} {}",
        "=".repeat(60 - title.len().min(55))
    );
    for section in Section::ALL {
        if section != Section::Processes {
            let _ = write!(out, "{}", d.section(section));
            let _ = writeln!(out);
        }
    }
    health::render(&mut out, &crate::present::json::health_view(d));
    render_config(&mut out, &crate::present::json::config_view(d));
    render_activity(&mut out, d);
    let _ = writeln!(out, "PROCESSES:");
    let mig_children = snaps
        .devices
        .iter()
        .any(|c| c.id.is_mig() && c.id.physical_index() == d.id.physical_index());
    match snaps.processes_of(d.id) {
        _ if !d.id.is_mig() && mig_children => {
            let _ = writeln!(out, "    (listed under its MIG devices below)");
        }
        // A process list that cannot be read is unknown, not empty.
        Err(e) => {
            let _ = writeln!(out, "    N/A ({})", Escaped(&e.error.to_string()));
        }
        Ok(mine) if mine.is_empty() => {
            let _ = writeln!(out, "    No running processes");
        }
        Ok(mine) => {
            // igpu's columns (PID, NAME, USER, PARENT, CREATION TIME, GPU MEM), then the type
            // and the command line.
            let _ = writeln!(
                out,
                "    {:<8} | {:<16} | {:<12} | {:<18} | {:<19} | {:<4} | {:>10} | COMMAND",
                "PID", "NAME", "USER", "PARENT", "CREATION TIME", "TYPE", "GPU MEM"
            );
            for p in mine {
                let text = crate::present::text::text;
                let parent = match p.host.ppid {
                    Some(ppid) => match parent_name(ppid) {
                        Some(name) => format!("{ppid} ({})", escape_control(&name)),
                        None => ppid.to_string(),
                    },
                    None => "N/A".to_string(),
                };
                let created = p
                    .host
                    .create_time_s
                    .and_then(crate::present::time::local_datetime)
                    .unwrap_or_else(|| "N/A".to_string());
                let _ = writeln!(
                    out,
                    "    {:<8} | {:<16} | {:<12} | {:<18} | {:<19} | {:<4} | {:>10} | {}",
                    p.pid,
                    crate::present::text::truncate(&text(p.host.name.as_deref()), 16),
                    crate::present::text::truncate(&text(p.host.user.as_deref()), 12),
                    crate::present::text::truncate(&parent, 18),
                    created,
                    p.kind_str(),
                    p.gpu_memory_human.as_deref().unwrap_or("N/A"),
                    Escaped(
                        p.host
                            .command
                            .as_deref()
                            .filter(|c| !c.is_empty())
                            .or(p.host.name.as_deref())
                            .unwrap_or("N/A")
                    ),
                );
            }
        }
    }
    if snaps.processes_of(d.id).is_ok() {
        // One list read, the other not: say which is missing.
        for e in snaps.errors_of(d.id) {
            let _ = writeln!(
                out,
                "    {}: N/A ({})",
                e.query,
                Escaped(&e.error.to_string())
            );
        }
    }
    if !d.errors.is_empty() {
        let _ = writeln!(out, "\nERRORS:");
        let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
        for e in &d.errors {
            let msg = e.error.to_string();
            match groups.iter_mut().find(|(m, _)| *m == msg) {
                Some((_, fields)) => fields.push(&e.field),
                None => groups.push((msg, vec![&e.field])),
            }
        }
        for (msg, fields) in groups {
            let what = match fields.len() {
                0..=4 => fields.join(", "),
                n => format!("{} and {} more", fields[..3].join(", "), n - 3),
            };
            let _ = writeln!(out, "    {} ({})", Escaped(&msg), escape_control(&what));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn targets_parse() {
        assert_eq!("3".parse(), Ok(Target::Gpu(3)));
        assert_eq!("0:1".parse(), Ok(Target::Mig(0, 1)));
        for bad in ["", "x", "-1", "1:", ":1", "1:2:3", "GPU0"] {
            let e = bad.parse::<Target>().unwrap_err();
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
    }

    proptest! {
        #[test]
        fn targets_round_trip(gpu in any::<u32>(), mig in proptest::option::of(any::<u32>())) {
            let t = match mig {
                Some(m) => Target::Mig(gpu, m),
                None => Target::Gpu(gpu),
            };
            prop_assert_eq!(t.to_string().parse::<Target>(), Ok(t));
        }

        #[test]
        fn any_text_parses_or_is_refused_without_panic(text in "\\PC{0,12}") {
            let _ = text.parse::<Target>();
        }
    }
}
