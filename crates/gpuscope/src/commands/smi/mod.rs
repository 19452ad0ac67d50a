//! `gpuscope smi`: nvidia-smi's read-only options over any source gpuscope reads (the real
//! GPUs, `--fixture FILE [--frame N]`, `--demo`), printing what nvidia-smi prints for them.
//! docs/smi.md says what is supported and where the output differs from nvidia-smi's.

mod args;
mod table;
mod tree;

use std::ffi::OsString;
use std::io::Write as _;

use anyhow::Context as _;
use clap::Parser;
use gpu_backend::DeviceId;
use gpu_devices::DeviceSnapshot;

use crate::error::{PeerExit, UsageError};
use crate::present::json::{DeviceView, SnapshotView};
use crate::source::SourceArgs;

pub use args::{parse, Mode, SmiArgs};

/// gpuscope's own source options, parsed by clap as every other command parses them (so
/// `GPUSCOPE_FIXTURE` and the rest apply).
#[derive(Parser)]
#[command(name = "gpuscope smi", no_binary_name = true)]
struct SourceOnly {
    #[command(flatten)]
    source: SourceArgs,
}

/// Runs `gpuscope smi` with its arguments (those after `smi`, or all of them after the
/// program's name when gpuscope is run as `nvidia-smi`).
pub fn run(args: Vec<OsString>) -> anyhow::Result<()> {
    let a = parse(&args)?;
    match &a.mode {
        Mode::Help => return emit(&a, &help(), true),
        Mode::HelpQueryGpu => return emit(&a, &crate::present::query::help_gpu(), true),
        Mode::HelpQueryApps => return emit(&a, &crate::present::query::help_apps(), true),
        _ => {}
    }
    if let Mode::QueryGpu(q) = &a.mode {
        if let Some((bad, why)) = crate::present::query::unknown_gpu_field(q) {
            let bad = gpu_devices::text::escape_control(&bad).into_owned();
            emit(
                &a,
                &format!("Field \"{bad}\" is not a valid field to query.\n\n"),
                true,
            )?;
            return Err(PeerExit {
                code: exit::USAGE,
                message: why.0,
            }
            .into());
        }
    }
    let source = SourceOnly::try_parse_from(&a.source)
        .map_err(|e| UsageError(e.render().to_string().trim_end().to_string()))?
        .source;
    let src = source
        .open_without_events()
        .map_err(|e| fail_as_nvidia_smi(&a, e))?;
    if a.mode == Mode::Version {
        let text = version(src.collector.context());
        src.end_one_shot();
        return emit(&a, &text, true);
    }
    if let Some(plan) = query_plan(&a.mode) {
        src.collector.context().set_query_plan(plan);
    }
    let mut printed = 0u64;
    loop {
        let started = std::time::Instant::now();
        let devices = src.collector.context().all_devices();
        let (view, snaps) =
            crate::present::json::take_with_raw(&src.collector, src.label.clone(), &devices);
        let view = keep_ids(view, &a.ids).map_err(|e| fail_as_nvidia_smi(&a, e.into()))?;
        let first = printed == 0;
        let step = gpu_backend::timeline::step(gpu_backend::timeline::PRINT);
        let text = render(&a, &view, &snaps, first)?;
        emit(&a, &text, first)?;
        drop(step);
        printed += 1;
        let Some(every) = a.every else { break };
        if a.count.is_some_and(|c| printed >= c) {
            break;
        }
        std::thread::sleep(every.saturating_sub(started.elapsed()));
    }
    src.end_one_shot();
    Ok(())
}

/// nvidia-smi's sentence when it cannot talk to the driver (its exit code 9).
pub const NO_DRIVER: &str = "NVIDIA-SMI has failed because it couldn't communicate with the \
    NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.";

/// nvidia-smi's words when it cannot find the NVML library (its exit code 12).
pub const NO_LIBRARY: &str = "NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. \
    Please make sure that the NVIDIA Display Driver is properly installed and present in your \
    system.\nPlease also try adding directory that contains libnvidia-ml.so to your system PATH.";

/// nvidia-smi's words when `-i` names no GPU (its exit code 6).
pub const NOT_FOUND: &str = "No devices were found";

/// nvidia-smi's exit codes (its manual's RETURN VALUE) for the failures gpuscope smi tells
/// apart; docs/smi.md has the table.
pub mod exit {
    /// A supplied argument or flag is invalid.
    pub const USAGE: u8 = 2;
    /// A query to find an object was unsuccessful (`-i` names no GPU).
    pub const NOT_FOUND: u8 = 6;
    /// The NVIDIA driver is not loaded.
    pub const DRIVER_NOT_LOADED: u8 = 9;
    /// The NVML library could not be found or loaded.
    pub const LIBRARY_NOT_FOUND: u8 = 12;
}

/// A failure as nvidia-smi fails: no driver (9) or no library (12), and an `-i` that names no
/// GPU (6), with nvidia-smi's words on stdout (where nvidia-smi prints them, so a script that
/// reads them finds them) and gpuscope's why on stderr; anything else as it is.
fn fail_as_nvidia_smi(a: &SmiArgs, e: anyhow::Error) -> anyhow::Error {
    let (code, words, why) = if let Some(no) = e.downcast_ref::<crate::error::NoDriver>() {
        if no.library_missing {
            (exit::LIBRARY_NOT_FOUND, NO_LIBRARY, no.message.clone())
        } else {
            (exit::DRIVER_NOT_LOADED, NO_DRIVER, no.message.clone())
        }
    } else if let Some(UsageError(why)) = e.downcast_ref::<UsageError>() {
        if !why.starts_with(NOT_FOUND) {
            return e;
        }
        (exit::NOT_FOUND, NOT_FOUND, why.clone())
    } else {
        return e;
    };
    if let Err(write) = emit(a, &format!("{words}\n\n"), true) {
        return write;
    }
    PeerExit { code, message: why }.into()
}

/// `--version`: nvidia-smi's four lines, from the source's versions. NVML's version is its
/// driver part (`580.159` of NVML's `13.580.159.04`), as nvidia-smi prints it.
fn version(context: &gpu_devices::Context) -> String {
    let na = |v: gpu_devices::Na<String>| v.value().cloned().unwrap_or_else(|| "N/A".into());
    let driver = na(context.driver_version());
    let nvml = na(context.nvml_version());
    let parts: Vec<&str> = nvml.split('.').collect();
    let nvml = match parts.as_slice() {
        [_cuda, major, minor, ..] => format!("{major}.{minor}"),
        _ => nvml.clone(),
    };
    let cuda = na(context.cuda_driver_version());
    let e = |v: &str| gpu_devices::text::escape_control(v).into_owned();
    format!(
        "NVIDIA-SMI version  : {driver}\nNVML version        : {nvml}\n\
         DRIVER version      : {driver}\nCUDA Version        : {cuda}\n",
        driver = e(&driver),
        nvml = e(&nvml),
        cuda = e(&cuda),
    )
}

/// What a print asks NVML, when less than everything (issue 36): `-L` each GPU's name and
/// UUID, `--query-gpu` its fields' queries and no other (`crate::present::plan`), the table
/// and `--query-compute-apps` leave out the costly readings none of their fields shows (PCIe
/// throughput, which waits 20 ms in the driver each way, energy, per-process utilization and
/// GPM) and the details nvidia-smi -q shows. docs/benchmarks.md, "A one-shot asks only what
/// it prints", has the counts. `-q` shows nearly
/// everything and asks everything.
fn query_plan(mode: &Mode) -> Option<gpu_devices::QueryPlan> {
    let everything = gpu_devices::QueryPlan::everything();
    match mode {
        Mode::List => Some(crate::present::plan::list()),
        Mode::QueryGpu(fields) => Some(crate::present::plan::for_gpu_fields(fields)),
        // The table and the processes' CSV show none of the details either.
        Mode::Bare | Mode::QueryApps(_) => Some(
            everything
                .without(&gpu_devices::detail_queries())
                .without(&unshown()),
        ),
        _ => None,
    }
}

/// Dear calls none of the table's and CSV's fields shows.
fn unshown() -> Vec<gpu_devices::Query> {
    use gpu_devices::Query;
    vec![
        Query::pcie_throughput,
        Query::total_energy_consumption,
        Query::bar1_memory_info,
        Query::nvlink_throughput,
        Query::nvlink_error_counters,
        Query::process_utilization,
        Query::gpm_metrics,
    ]
}

/// Writes `text` to stdout, or to `-f`'s file: made anew by the `first` print, appended to by
/// the loop's next ones. A symbolic link at the file's path is refused (exit 2), never
/// followed (gpu_backend::files), at every print.
fn emit(a: &SmiArgs, text: &str, first: bool) -> anyhow::Result<()> {
    use gpu_backend::files::{create, FileError, IfExists};
    match &a.filename {
        None => crate::output::write_stdout(text),
        Some(path) => {
            let if_exists = if first {
                IfExists::Truncate
            } else {
                IfExists::Append
            };
            let mut f = create(path, if_exists).map_err(|e| match e {
                FileError::SymbolicLink | FileError::NotRegular { .. } => UsageError(format!(
                    "-f {}: {e}",
                    gpu_devices::text::Escaped(&path.display().to_string())
                ))
                .into(),
                e => anyhow::Error::new(e).context(format!("cannot write {}", path.display())),
            })?;
            f.write_all(text.as_bytes())
                .with_context(|| format!("cannot write {}", path.display()))
        }
    }
}

/// `-h`.
fn help() -> String {
    format!(
        "gpuscope smi: nvidia-smi's read-only options over any gpuscope source.\n\n\
         Supported: {}.\n\n\
         (no option)                     nvidia-smi's summary table (with -i, -l, -f)\n\
         -L, --list-gpus                 one line per GPU (and MIG device) with its UUID\n\
         --version                       nvidia-smi's version lines (driver, NVML, CUDA)\n\
         -q, --query                     every GPU's answers, as nvidia-smi -q lays them out\n\
         -d, --display=SECTIONS          with -q: only these ({})\n\
         -x, --xml-format                with -q: XML\n\
         -i, --id=ID[,ID...]             only these GPUs: index, UUID or PCI bus id\n\
         -l, --loop[=SEC]                print again every SEC seconds (default 5, 1..86400)\n\
         -lms, --loop-ms=MS              print again every MS milliseconds (10..86400000)\n\
         --count=N                       gpuscope's own: with -l/-lms, stop after N prints\n\
         -f, --filename=FILE             write to FILE instead of stdout (a loop appends)\n\
         --query-gpu=FIELDS              CSV of these fields per GPU (--help-query-gpu)\n\
         --query-compute-apps=FIELDS     CSV per compute process (--help-query-compute-apps)\n\
         --format=csv[,noheader][,nounits]\n\
         --fixture FILE, --frame N, --demo[=NAME], --nvml-lib PATH: gpuscope's sources\n\n\
         Options that change a GPU (-pm, -r, -mig, -lgc, ...) are refused: gpuscope smi is \
         read-only. Differences from nvidia-smi: docs/smi.md.\n\n{}\n",
        args::SUPPORTED,
        args::SECTIONS.join(","),
        crate::error::EXIT_CODES_HELP
    )
}

/// `view` kept to the GPUs `-i` names (with their MIG devices), in the order named; every id
/// must name one.
fn keep_ids(mut view: SnapshotView, ids: &[String]) -> Result<SnapshotView, UsageError> {
    if ids.is_empty() {
        return Ok(view);
    }
    let mut keep: Vec<u32> = Vec::new();
    for id in ids {
        let found = view
            .devices
            .iter()
            .filter(|d| d.identity.mig_index.is_none())
            .find(|d| matches_id(d, id))
            .map(|d| d.identity.index)
            .ok_or_else(|| {
                UsageError(format!(
                    "No devices were found: no GPU has the id {:?} (an index, a UUID or a PCI \
                     bus id)",
                    gpu_devices::text::escape_control(id)
                ))
            })?;
        if !keep.contains(&found) {
            keep.push(found);
        }
    }
    view.devices.retain(|d| keep.contains(&d.identity.index));
    view.devices.sort_by_key(|d| {
        (
            keep.iter().position(|&k| k == d.identity.index),
            d.identity.mig_index,
        )
    });
    Ok(view)
}

/// Whether `id` names this GPU: its index, its UUID (case aside) or its PCI bus id (with or
/// without the domain's leading zeros, case aside).
fn matches_id(d: &crate::present::json::DeviceView, id: &str) -> bool {
    if id.bytes().all(|b| b.is_ascii_digit()) {
        return id.parse::<u32>().is_ok_and(|i| i == d.identity.index);
    }
    if d.identity
        .uuid
        .as_deref()
        .is_some_and(|u| u.eq_ignore_ascii_case(id))
    {
        return true;
    }
    let norm = |b: &str| -> Option<(u64, String)> {
        let (domain, rest) = b.split_once(':')?;
        Some((
            u64::from_str_radix(domain, 16).ok()?,
            rest.to_ascii_lowercase(),
        ))
    };
    match (d.identity.bus_id.as_deref().and_then(norm), norm(id)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// What the mode prints, once. A CSV's header goes with the `first` print only, so that a loop
/// (`-l`, `-f out.csv`) writes one CSV.
fn render(
    a: &SmiArgs,
    view: &SnapshotView,
    snaps: &gpu_processes::Snapshots,
    first: bool,
) -> anyhow::Result<String> {
    let mut format = a.format.unwrap_or_default();
    format.noheader |= !first;
    Ok(match &a.mode {
        Mode::List => list(view, &snaps.devices),
        Mode::QueryGpu(q) => crate::present::query::render_as(
            view,
            &snaps.devices,
            q,
            format,
            "--query-gpu",
            "gpuscope smi --help-query-gpu",
        )?,
        Mode::QueryApps(q) => crate::present::query::render_apps(view, snaps, q, format)?,
        Mode::Query if a.xml => query_xml(a, view, snaps),
        Mode::Query => query_text(a, view, snaps),
        Mode::Bare => summary(view, snaps),
        Mode::Help | Mode::HelpQueryGpu | Mode::HelpQueryApps | Mode::Version => String::new(),
    })
}

fn raw_of(snaps: &[DeviceSnapshot], id: DeviceId) -> Option<&DeviceSnapshot> {
    snaps.iter().find(|d| d.id == id)
}

/// The snapshots of `view`'s devices that `keep` picks, in the view's order.
fn raws_of<'a>(
    view: &SnapshotView,
    snaps: &'a [DeviceSnapshot],
    keep: impl Fn(&DeviceView) -> bool,
) -> Vec<&'a DeviceSnapshot> {
    view.devices
        .iter()
        .filter(|d| keep(d))
        .filter_map(|d| raw_of(snaps, d.device))
        .collect()
}

/// `-L`: `GPU 0: NAME (UUID: GPU-...)`, and under each GPU its MIG devices as
/// `  MIG 3g.40gb     Device  0: (UUID: MIG-...)`.
fn list(view: &SnapshotView, raw: &[DeviceSnapshot]) -> String {
    let mut out = String::new();
    for d in &view.devices {
        let uuid = d.identity.uuid.as_deref().unwrap_or("N/A");
        let name = d.identity.name.as_deref().unwrap_or("N/A");
        let line = match d.identity.mig_index {
            None => format!("GPU {}: {name} (UUID: {uuid})", d.identity.index),
            Some(m) => {
                // A MIG device's name is "NVIDIA H100 80GB HBM3 MIG 3g.40gb": its profile is
                // the name's last word.
                let profile = raw_of(raw, d.device)
                    .and_then(|r| r.name.value().cloned())
                    .and_then(|n| n.rsplit_once(" MIG ").map(|(_, p)| p.to_string()))
                    .unwrap_or_else(|| "N/A".into());
                format!("  MIG {profile:<11} Device {m:>2}: (UUID: {uuid})")
            }
        };
        out += &gpu_devices::text::escape_control(&line);
        out.push('\n');
    }
    out
}

/// The processes of one GPU (and its MIG devices) for `-q`; `None` when they cannot be read.
fn process_lines(snaps: &gpu_processes::Snapshots, index: u32) -> Option<Vec<tree::ProcessLine>> {
    if snaps.unknown_processes.contains(&DeviceId::Gpu(index)) {
        return None;
    }
    Some(
        snaps
            .processes
            .iter()
            .filter(|p| p.device.physical_index() == index)
            .map(|p| tree::ProcessLine {
                gpu_instance_id: p.gpu_instance_id,
                compute_instance_id: p.compute_instance_id,
                pid: p.pid,
                kind: p.kind_str(),
                name: crate::present::query::process_name(p),
                used_memory: p.gpu_memory,
            })
            .collect(),
    )
}

/// The physical GPUs of `view` with their trees.
fn gpu_trees(
    a: &SmiArgs,
    view: &SnapshotView,
    snaps: &gpu_processes::Snapshots,
) -> Vec<(String, Vec<tree::Node>)> {
    view.devices
        .iter()
        .filter(|d| d.identity.mig_index.is_none())
        .filter_map(|d| {
            let raw = raw_of(&snaps.devices, d.device)?;
            let procs = process_lines(snaps, d.identity.index);
            let migs = raws_of(view, &snaps.devices, |m| {
                m.identity.index == d.identity.index && m.identity.mig_index.is_some()
            });
            let nodes = tree::keep_sections(
                tree::gpu(raw, &migs, procs.as_deref(), view.driver_version.as_deref()),
                &a.display,
            );
            Some((
                d.identity.bus_id.clone().unwrap_or_else(|| "N/A".into()),
                nodes,
            ))
        })
        .collect()
}

/// `Tue Nov 24 14:02:49 2026`, nvidia-smi's timestamp (in UTC here).
fn ctime(unix_ms: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let t = crate::present::time::rfc3339_ms(unix_ms);
    // `YYYY-MM-DDTHH:MM:SS.mmmZ`, bounded to year 9999 by rfc3339_ms.
    let (date, time) = t.split_once('T').unwrap_or((&t, ""));
    let mut parts = date.split('-');
    let year = parts.next().unwrap_or("");
    let month: usize = parts.next().and_then(|m| m.parse().ok()).unwrap_or(1);
    let day: u32 = parts.next().and_then(|d| d.parse().ok()).unwrap_or(1);
    let days = (unix_ms.min(253_402_300_799_999) / 86_400_000) as usize;
    format!(
        "{} {} {day:>2} {} {year}",
        DAYS[days % 7],
        MONTHS[month.clamp(1, 12) - 1],
        time.get(..8).unwrap_or("")
    )
}

fn cuda_version(view: &SnapshotView) -> String {
    view.cuda_driver_version
        .clone()
        .unwrap_or_else(|| "N/A".into())
}

fn attached(snaps: &gpu_processes::Snapshots) -> usize {
    crate::present::query::gpu_count(&snaps.devices)
}

/// No option: nvidia-smi's summary table.
fn summary(view: &SnapshotView, snaps: &gpu_processes::Snapshots) -> String {
    let gpus = raws_of(view, &snaps.devices, |d| d.identity.mig_index.is_none());
    let mut rows = Vec::new();
    let mut unknown = false;
    for d in &gpus {
        let index = d.id.physical_index();
        match process_lines(snaps, index) {
            None => unknown = true,
            Some(list) => rows.extend(list.into_iter().map(|process| table::ProcessRow {
                gpu: index,
                process,
            })),
        }
    }
    let migs = raws_of(view, &snaps.devices, |d| d.identity.mig_index.is_some());
    table::render(
        &ctime(view.time_unix_ms),
        view.driver_version.as_deref().unwrap_or("N/A"),
        &cuda_version(view),
        &gpus,
        &migs,
        (!unknown).then_some(&rows[..]),
    )
}

/// `-q` as text.
fn query_text(a: &SmiArgs, view: &SnapshotView, snaps: &gpu_processes::Snapshots) -> String {
    use std::fmt::Write as _;
    let mut out = String::from("\n==============NVSMI LOG==============\n\n");
    let line = |out: &mut String, k: &str, v: &str| {
        let _ = writeln!(out, "{k:<55}: {}", gpu_devices::text::escape_control(v));
    };
    line(&mut out, "Timestamp", &ctime(view.time_unix_ms));
    line(
        &mut out,
        "Driver Version",
        view.driver_version.as_deref().unwrap_or("N/A"),
    );
    line(&mut out, "CUDA Version", &cuda_version(view));
    out.push('\n');
    line(&mut out, "Attached GPUs", &attached(snaps).to_string());
    for (bus, nodes) in gpu_trees(a, view, snaps) {
        let _ = writeln!(out, "GPU {}", gpu_devices::text::escape_control(&bus));
        tree::text(&mut out, &nodes, 1);
        out.push('\n');
    }
    out
}

/// `-q -x`: nvidia-smi's XML (its element names; DTD not checked).
fn query_xml(a: &SmiArgs, view: &SnapshotView, snaps: &gpu_processes::Snapshots) -> String {
    use std::fmt::Write as _;
    let e = tree::escape;
    let mut out = String::from(
        "<?xml version=\"1.0\" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM \"nvsmi_device_v13.dtd\">\n<nvidia_smi_log>\n",
    );
    let _ = writeln!(out, "\t<timestamp>{}</timestamp>", ctime(view.time_unix_ms));
    let _ = writeln!(
        out,
        "\t<driver_version>{}</driver_version>",
        e(view.driver_version.as_deref().unwrap_or("N/A"))
    );
    let _ = writeln!(
        out,
        "\t<cuda_version>{}</cuda_version>",
        e(&cuda_version(view))
    );
    let _ = writeln!(out, "\t<attached_gpus>{}</attached_gpus>", attached(snaps));
    for (bus, nodes) in gpu_trees(a, view, snaps) {
        let _ = writeln!(out, "\t<gpu id=\"{}\">", e(&bus));
        tree::xml(&mut out, &nodes, 2);
        out += "\t</gpu>\n";
    }
    out += "</nvidia_smi_log>\n";
    out
}
