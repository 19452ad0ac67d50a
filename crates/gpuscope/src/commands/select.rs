//! `gpuscope select`: choose devices, nvisel-style, and print a value for
//! `CUDA_VISIBLE_DEVICES`.
//!
//! The options are nvisel's (same long and short names); the differences are listed in the
//! help of each option and in crates/gpu-select/README.md. Exit status: 0, or 4 when fewer
//! devices than `--min-count` qualify (`select` then prints none; the `nvisel` front door prints
//! those that do, as nvisel does), 2 for bad input, 1 when the GPUs cannot be read.

use std::fmt::Write as _;
use std::io::IsTerminal;

use gpu_devices::text::{escape_control, Escaped};
use gpu_devices::units::bytes2human;
use gpu_devices::CudaDeviceOrder;
use gpu_select::{Candidate, Criteria, Fate, Format, Outcome, Pool, Selection};

use crate::cli::args;
use crate::error::UsageError;
use crate::source::SourceArgs;

/// Command-line arguments (nvisel's).
#[derive(Debug, clap::Args)]
#[command(after_help = after_help())]
pub struct Args {
    #[command(flatten)]
    source: SourceArgs,

    #[command(flatten)]
    fleet: crate::fleet::FleetArgs,

    /// Choose among the devices this CUDA_VISIBLE_DEVICES value shows (the environment's when
    /// the value is omitted), and print their CUDA ordinals. (nvisel's -i: through the `nvisel`
    /// front door, which prints each device's own index, as nvisel; here -i is --interval in
    /// every command.)
    #[arg(long, value_name = "CUDA_VISIBLE_DEVICES", num_args = 0..=1)]
    inherit: Option<Option<String>>,

    /// Count the GPU memory of these users' processes as free; without a name, $USER.
    /// `pod:NAME` (or `pod:NAMESPACE/NAME`) names a Kubernetes pod's processes instead.
    #[arg(long = "account-as-free", visible_alias = "free-accounts", value_name = "USERNAME", num_args = 0..)]
    account_as_free: Option<Vec<String>>,

    /// Fewest devices to choose (0 to 1024); when fewer qualify, print none and exit with status 4.
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = args::whole::<usize>(args::COUNT))]
    min_count: usize,

    /// Most devices to choose, 0 to 1024 (default: all that qualify).
    #[arg(long, value_name = "N", value_parser = args::whole::<usize>(args::COUNT))]
    max_count: Option<usize>,

    /// Both --min-count N and --max-count N (0 to 1024).
    #[arg(short = 'n', long, value_name = "N", value_parser = args::whole::<usize>(args::COUNT))]
    count: Option<usize>,

    /// Least free memory, e.g. 4GiB, 5000M, or bytes; at most 1PiB.
    #[arg(short = 'f', long, value_name = "SIZE", value_parser = args::size())]
    min_free_memory: Option<u64>,

    /// Least total memory, e.g. 10GiB; at most 1PiB.
    #[arg(short = 't', long, value_name = "SIZE", value_parser = args::size())]
    min_total_memory: Option<u64>,

    /// Highest GPU utilization, percent (0 to 100). A device that cannot tell (a MIG device)
    /// does not qualify.
    #[arg(long, value_name = "RATE", value_parser = args::whole::<u32>(args::PERCENT))]
    max_gpu_utilization: Option<u32>,

    /// Highest memory-bandwidth utilization, percent (0 to 100).
    #[arg(short = 'M', long, value_name = "RATE", value_parser = args::whole::<u32>(args::PERCENT))]
    max_memory_utilization: Option<u32>,

    /// Loosen every constraint by this many percent: --tolerance 20 accepts 4GiB free for
    /// --min-free-memory 5GiB, and 70% for --max-gpu-utilization 50 (0 to 100; default: 0,
    /// strict).
    #[arg(long, visible_alias = "tol", value_name = "TOL", default_value_t = 0, value_parser = args::whole::<u32>(args::PERCENT))]
    tolerance: u32,

    /// How to name the devices: `index` or `uuid`. A chosen MIG device is always named by UUID.
    #[arg(short = 'O', long, value_name = "FORMAT", value_enum, default_value_t = OutputFormat::Index)]
    format: OutputFormat,

    /// Separator between identifiers.
    #[arg(short = 's', long, visible_alias = "separator", value_name = "SEP", default_value = ",", conflicts_with_all = ["newline", "null"])]
    sep: String,

    /// One identifier per line (the same as --sep $'\n').
    #[arg(long, conflicts_with = "null")]
    newline: bool,

    /// Separate identifiers with NUL, and end with one (for `xargs -0`).
    #[arg(short = '0', long)]
    null: bool,

    /// Keep the devices' own order instead of best first (most free memory, least utilization).
    #[arg(short = 'S', long)]
    no_sort: bool,

    /// Skip GPUs that need attention: a page retirement or row remap pending, a failed row
    /// remap, uncorrected ECC errors since the driver loaded, clocks held down by the hardware
    /// (HW slowdown, thermal slowdown, power brake), or an XID error since the recording
    /// started (a replay; live, only one reported while gpuscope runs is known).
    #[arg(long)]
    healthy: bool,

    /// Also tell, on standard error, why each device was chosen or not.
    #[arg(long)]
    explain: bool,

    /// Set by the `nvisel` front door: when fewer than --min-count qualify, print those that
    /// do (and exit 4), as nvisel does, instead of none.
    #[arg(long, hide = true)]
    as_nvisel: bool,
}

/// The `--format` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum OutputFormat {
    /// The index (the CUDA ordinal with --inherit).
    Index,
    /// The UUID.
    Uuid,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let criteria = criteria(&args)?;
    if args.fleet.is_set() {
        return run_fleet(&args, &criteria);
    }
    let src = args.source.open_without_events()?;
    let pool;
    let collector;
    match &args.inherit {
        None => {
            collector = src.collector;
            pool = Pool::All;
        }
        Some(value) => {
            let value = match value {
                Some(v) => Some(v.clone()),
                None => gpu_devices::cuda::visible_devices_from_env(),
            };
            collector = src.collector;
            pool = Pool::Cuda(
                collector
                    .context()
                    .cuda_devices_for(value.as_deref(), CudaDeviceOrder::from_env()),
            );
        }
    }
    let started = std::time::Instant::now();
    let selection = gpu_select::select_devices(&collector, pool, &criteria)
        .map_err(|e| UsageError(e.to_string()))?;
    tracing::debug!(
        devices = selection.candidates.len(),
        selected = selection.selected.len(),
        total_ms = started.elapsed().as_micros() as f64 / 1000.0,
        "refresh"
    );
    let format = match args.format {
        OutputFormat::Index => Format::Index,
        OutputFormat::Uuid => Format::Uuid,
    };
    if args.explain {
        eprint!(
            "{}",
            crate::present::text::escape_lines(&explain(&selection, &criteria, args.as_nvisel))
        );
    }
    // Only this machine's devices are CUDA's to see.
    let cuda_hint = true;
    // nvisel names an inherited device by its own index (NVML's), not its CUDA ordinal under
    // the inherited CUDA_VISIBLE_DEVICES: `CUDA_VISIBLE_DEVICES=$(nvisel -i ...)` sets the
    // variable anew, where CUDA reads indices of every device. The door prints what nvisel
    // prints; `select --inherit` keeps the CUDA ordinals.
    let ids = if args.as_nvisel
        && args.inherit.is_some()
        && selection.format(format, false) == Format::Index
    {
        selection.ids().iter().map(ToString::to_string).collect()
    } else {
        selection.identifiers(format, false)
    };
    print_chosen(
        &args,
        ids,
        selection.is_short(),
        criteria.min_count,
        cuda_hint,
    )
}

/// The examples and exit codes under `--help`.
fn after_help() -> String {
    format!(
        "Examples:\n  \
         devices=$(gpuscope select -c 1 -f 10GiB) || exit\n  \
         export CUDA_VISIBLE_DEVICES=\"$devices\"\n  \
         gpuscope select -n 2 -O uuid\n  \
         gpuscope select -0 -O uuid -c 2 -f 4GiB | xargs -0 -I {{}} echo {{}}\n  \
         gpuscope select -i -S        # normalise CUDA_VISIBLE_DEVICES to ordinals\n\n{}",
        crate::error::EXIT_CODES_HELP
    )
}

/// Prints the chosen devices' identifiers on stdout, separated as `--sep`, `--newline` or
/// `--null` say (escaped: a UUID comes from the driver, a fixture or an exporter; a real one is
/// unchanged). When fewer than `--min-count` qualify (`short`), prints none and exits with
/// status 4: a partial list on stdout would slip into `CUDA_VISIBLE_DEVICES=$(gpuscope select
/// ...)` unnoticed by a script that does not check the exit code. Through the `nvisel` front
/// door (`--as-nvisel`), prints those that qualify and exits 4, as nvisel does: scripts written
/// for nvisel get nvisel's answer. `cuda_hint`: also say the `CUDA_VISIBLE_DEVICES` setting on
/// stderr when stdout is not a terminal.
fn print_chosen(
    args: &Args,
    ids: Vec<String>,
    short: bool,
    min_count: usize,
    cuda_hint: bool,
) -> anyhow::Result<()> {
    let ids: Vec<String> = ids
        .iter()
        .map(|id| gpu_devices::text::escape_control(id).into_owned())
        .collect();
    let (sep, end) = if args.null {
        ("\0", "\0")
    } else if args.newline {
        ("\n", "\n")
    } else {
        (args.sep.as_str(), "\n")
    };
    let not_enough = || {
        format!(
            "not enough devices found: {} qualify, --min-count is {min_count}",
            ids.len(),
        )
    };
    if short && !args.as_nvisel {
        eprintln!("gpuscope: {}", not_enough());
        std::process::exit(4);
    }
    if cuda_hint && !std::io::stdout().is_terminal() {
        eprintln!("CUDA_VISIBLE_DEVICES=\"{}\"", ids.join(","));
    }
    crate::output::write_stdout(&(ids.join(sep) + end))?;
    if short {
        return Err(crate::error::Shortfall::nothing(not_enough()).into());
    }
    Ok(())
}

/// `select --prometheus URL`: the same choice over every host that is up; devices are named
/// `host:index` (or by UUID).
fn run_fleet(args: &Args, criteria: &Criteria) -> anyhow::Result<()> {
    if args.inherit.is_some() {
        return Err(UsageError(
            "--inherit names this machine's CUDA devices; it does not go with --prometheus".into(),
        )
        .into());
    }
    // A fleet that cannot be read leaves nothing to choose from (exit 4, docs/exit-codes.md).
    let fleet = args
        .fleet
        .open()?
        .refresh()
        .map_err(|e| crate::error::Shortfall::nothing(crate::fleet::one_line(&e)))?;
    let chosen = gpu_fleet::select(&fleet, criteria).map_err(|e| UsageError(e.to_string()))?;
    // A value out of range is N/A, which can change the choice: always said.
    crate::fleet::warn_out_of_range(&fleet);
    if args.explain {
        // Host names, devices' names and Prometheus's errors come from outside: each is
        // escaped where it is put, so that a line break in one cannot start a line of its own.
        let mut text = String::new();
        for e in &fleet.errors {
            let _ = writeln!(text, "query {}: {}", Escaped(&e.query), Escaped(&e.error));
        }
        for (host, state) in &chosen.skipped {
            let _ = writeln!(
                text,
                "{}: left out, its exporter is {}",
                Escaped(host),
                state.as_str()
            );
        }
        let names: Vec<String> = chosen
            .names
            .iter()
            .map(|n| escape_control(n).into_owned())
            .collect();
        text += &explain_named(&chosen.selection, criteria, &names, args.as_nvisel);
        // The table's own line breaks kept; anything missed above is still made inert.
        eprint!("{}", crate::present::text::escape_lines(&text));
    }
    // Devices of other hosts: no CUDA_VISIBLE_DEVICES for this one.
    let cuda_hint = false;
    print_chosen(
        args,
        chosen.identifiers(args.format == OutputFormat::Uuid),
        chosen.selection.is_short(),
        criteria.min_count,
        cuda_hint,
    )?;
    // Chosen without what the failed queries would have said (docs/exit-codes.md): the
    // devices are printed, and the exit code says partial.
    match crate::fleet::failed_queries(&fleet) {
        Some(failed) => Err(crate::error::Shortfall::partial(format!(
            "chosen from part of the fleet's data: {failed}"
        ))
        .into()),
        None => Ok(()),
    }
}

/// The criteria the options ask for; a contradiction is a usage error.
fn criteria(args: &Args) -> anyhow::Result<Criteria> {
    let (min_count, max_count) = match args.count {
        Some(n) => (n, Some(n)),
        None => (args.min_count, args.max_count),
    };
    if let Some(max) = max_count {
        if max < min_count {
            return Err(UsageError(format!(
                "--max-count {max} is below --min-count {min_count}"
            ))
            .into());
        }
    }
    let free_accounts = match &args.account_as_free {
        None => Vec::new(),
        Some(users) if users.is_empty() => {
            let user = std::env::var("USER")
                .or_else(|_| std::env::var("LOGNAME"))
                .map_err(|_| {
                    UsageError(
                        "--account-as-free without a name needs $USER (or $LOGNAME) to be set"
                            .into(),
                    )
                })?;
            vec![user]
        }
        Some(users) => users.clone(),
    };
    Ok(Criteria {
        min_count,
        max_count,
        min_free_memory: args.min_free_memory,
        min_total_memory: args.min_total_memory,
        max_gpu_utilization: args.max_gpu_utilization,
        max_memory_utilization: args.max_memory_utilization,
        tolerance: args.tolerance,
        free_accounts,
        sort: !args.no_sort,
        healthy: args.healthy,
    })
}

/// Why each device was chosen or not, one line each. `partial_printed`: the devices that
/// qualify are printed even when too few do (the `nvisel` door).
fn explain(s: &Selection, criteria: &Criteria, partial_printed: bool) -> String {
    let names: Vec<String> = s.candidates.iter().map(|c| c.id.to_string()).collect();
    explain_named(s, criteria, &names, partial_printed)
}

/// [`explain`] with each candidate called by its name in `names` (`host:index` in a fleet),
/// which the caller has escaped; the backend's and the exporters' text in each verdict is
/// escaped here, line breaks included, so that each device keeps its one line.
fn explain_named(
    s: &Selection,
    criteria: &Criteria,
    names: &[String],
    partial_printed: bool,
) -> String {
    let mut out = String::new();
    let width = names
        .iter()
        .map(|n| n.chars().count())
        .max()
        .unwrap_or(0)
        .max(6);
    let _ = writeln!(
        out,
        "{:<width$} {:>11} {:>11} {:>4} {:>6}  verdict",
        "device", "free", "total", "gpu", "mem-bw"
    );
    for (pos, c) in s.candidates.iter().enumerate() {
        let rank = s.selected.iter().position(|&i| i == pos);
        let bytes = |v: Option<u64>| v.map_or_else(|| "N/A".to_string(), bytes2human);
        let pct = |v: Option<u32>| v.map_or_else(|| "N/A".to_string(), |v| format!("{v}%"));
        let _ = writeln!(
            out,
            "{:<width$} {:>11} {:>11} {:>4} {:>6}  {}",
            names.get(pos).cloned().unwrap_or_else(|| c.id.to_string()),
            bytes(c.memory_free),
            bytes(c.memory_total),
            pct(c.gpu_utilization),
            pct(c.memory_utilization),
            verdict(
                c,
                rank,
                s.is_short().then_some(s.selected.len()),
                criteria,
                partial_printed
            )
        );
    }
    out
}

/// `short`: how many qualify, when that is fewer than --min-count asks (then none is selected,
/// or, with `partial_printed`, those that qualify are printed all the same).
fn verdict(
    c: &Candidate,
    rank: Option<usize>,
    short: Option<usize>,
    criteria: &Criteria,
    partial_printed: bool,
) -> String {
    let limit = |k: &gpu_select::Check| match k.constraint {
        gpu_select::Constraint::Healthy => {
            format!(
                "needs attention ({})",
                escape_control(&c.attention.join(", "))
            )
        }
        gpu_select::Constraint::MinFreeMemory | gpu_select::Constraint::MinTotalMemory => {
            format!(
                "{} {} < {}",
                k.constraint.as_str(),
                k.value.map_or_else(|| "N/A".into(), bytes2human),
                bytes2human(k.limit)
            )
        }
        _ => format!(
            "{} {} > {}%",
            k.constraint.as_str(),
            k.value.map_or_else(|| "N/A".into(), |v| format!("{v}%")),
            k.limit
        ),
    };
    let mut text = match c.fate {
        Fate::Selected if short.is_some() => format!(
            "qualifies (#{}), but only {} qualify and --min-count is {}: {}",
            rank.map_or(0, |r| r + 1),
            short.unwrap_or(0),
            criteria.min_count,
            if partial_printed {
                "printed all the same, as nvisel does (exit 4)"
            } else {
                "none selected"
            }
        ),
        Fate::Selected => format!("selected #{}", rank.map_or(0, |r| r + 1)),
        Fate::Unusable => format!(
            "refused: {}",
            c.unusable.as_ref().map_or_else(
                || "cannot be used".to_string(),
                |u| escape_control(&u.to_string()).into_owned()
            )
        ),
        Fate::Rejected => {
            let failed: Vec<String> = c.failed().map(limit).collect();
            format!("rejected: {}", failed.join(", "))
        }
        Fate::MigRule => "qualifies, but MIG devices and whole GPUs are not mixed, and CUDA shows one MIG device at most".into(),
        Fate::OverMaxCount => format!(
            "qualifies, but --max-count {} better devices were chosen",
            criteria.max_count.unwrap_or(0)
        ),
    };
    let tolerated: Vec<String> = c
        .checks
        .iter()
        .filter(|k| k.outcome == Outcome::Tolerated)
        .map(limit)
        .collect();
    if !tolerated.is_empty() && c.fate != Fate::Rejected {
        let _ = write!(text, " (within tolerance: {})", tolerated.join(", "));
    }
    if c.memory_as_free > 0 {
        let _ = write!(
            text,
            " ({} of free accounts counted as free)",
            bytes2human(c.memory_as_free)
        );
    }
    text
}
