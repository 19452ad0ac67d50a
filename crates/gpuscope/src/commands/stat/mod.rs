//! `gpuscope stat`: gpustat's front door. gpustat's options, spelled as gpustat spells them
//! (`-cpu`, `-a`, `-e`, `-f`, `-P`, `-F`, `--id`, `--no-processes`, `-i`, `--json`,
//! `--gpuname-width`, `--no-header`, `--color`/`--force-color`, `--no-color`, `-v`), printing
//! gpustat's lines ([`text`]: byte for byte what gpustat 1.1.1 prints for the same GPUs, but
//! for the header's host and time) or, with `--json`, gpustat's own document ([`json`]: its
//! keys, nvidia-smi's field names, memory in MiB, power in whole watts), so scripts written
//! for gpustat read either unchanged. Invoked through a link named `gpustat`, gpuscope runs
//! this command (docs/cli.md, "Front doors").
//!
//! Where gpustat's letters mean something else in gpuscope's own commands (`-c` is top's
//! `--compute`, `-p` top's `--pid`, `-u` top's `--user`), they mean gpustat's here: this command
//! is the one place they do.

use std::io::IsTerminal as _;
use std::time::Duration;

use crate::cli::args::{self, ColorArgs, ColorWhen};
use crate::source::SourceArgs;

pub mod json;
pub mod text;

/// What `gpustat -v` prints: the gpustat release whose text and JSON this command prints,
/// and gpuscope's own version.
const VERSION_LINE: &str = concat!("gpustat 1.1.1 (gpuscope ", env!("CARGO_PKG_VERSION"), ")");

/// gpustat's options.
#[derive(Debug, clap::Args)]
#[command(after_help = crate::error::EXIT_CODES_HELP)]
pub struct Args {
    #[command(flatten)]
    source: SourceArgs,

    /// Only these GPUs (gpustat's --id): `0`, `0,2`, `3` with its MIG devices, `0:1`.
    #[arg(long, visible_alias = "only", short = 'o', value_name = "ID", num_args = 1.., value_delimiter = ',')]
    id: Vec<String>,

    /// Everything: command, PID, fan, encoder and decoder, power draw and limit (gpustat -a).
    #[arg(short = 'a', long)]
    show_all: bool,

    /// Each process's program name (gpustat -c).
    #[arg(short = 'c', long)]
    show_cmd: bool,

    /// A line per process with its PID, CPU%, resident memory and full command line (gpustat
    /// -f).
    #[arg(short = 'f', long)]
    show_full_cmd: bool,

    /// Each process's user (gpustat -u; shown unless -c is given alone).
    #[arg(short = 'u', long)]
    show_user: bool,

    /// Each process's PID (gpustat -p).
    #[arg(short = 'p', long)]
    show_pid: bool,

    /// Fan speed (gpustat -F).
    #[arg(short = 'F', long, visible_alias = "show-fan")]
    show_fan_speed: bool,

    /// Encoder and decoder utilization (gpustat -e): `enc`, `dec` or both (the default).
    #[arg(short = 'e', long, value_name = "WHICH", num_args = 0..=1, default_missing_value = "enc,dec", require_equals = false)]
    show_codec: Option<String>,

    /// Power draw and limit (gpustat -P): `draw`, `limit` or both (the default).
    #[arg(short = 'P', long, value_name = "WHICH", num_args = 0..=1, default_missing_value = "draw,limit")]
    show_power: Option<String>,

    /// gpustat's JSON document (its keys; docs/cli.md) instead of lines.
    #[arg(long)]
    json: bool,

    /// Print again every DURATION (gpustat's -i SECONDS; 1 s when no value is given) until
    /// Ctrl+C; 50ms to 1h.
    #[arg(short = 'i', long, visible_alias = "watch", value_name = "DURATION", num_args = 0..=1,
          default_missing_value = "1s", value_parser = args::duration(args::INTERVAL))]
    interval: Option<Duration>,

    /// Leave out the header line (host, time, driver).
    #[arg(long)]
    no_header: bool,

    /// Cut or pad GPU names to this many characters (0 leaves names out), as gpustat.
    #[arg(long, value_name = "N", value_parser = args::whole::<usize>((0, 256)))]
    gpuname_width: Option<usize>,

    /// No processes (gpustat --no-processes).
    #[arg(long)]
    no_processes: bool,

    /// Taken for gpustat's sake; gpuscope's log is -v/-vv.
    #[arg(long, hide = true)]
    debug: bool,

    /// `--color WHEN`, `--no-color`, `--force-color` (gpustat's bare `--color` is
    /// `--force-color`).
    #[command(flatten)]
    color: ColorArgs,

    /// gpustat's `-v`/`--version` (the front door's translation): print the version and end.
    #[arg(long, hide = true)]
    gpustat_version: bool,
}

impl Args {
    /// The lines' options, `-a` spread into the others as gpustat spreads it.
    fn text_options(&self) -> text::Options {
        let codec = self
            .show_codec
            .as_deref()
            .or(self.show_all.then_some("enc,dec"))
            .unwrap_or("");
        let power = self
            .show_power
            .as_deref()
            .or(self.show_all.then_some("draw,limit"))
            .unwrap_or("");
        text::Options {
            show_cmd: self.show_cmd || self.show_all,
            show_full_cmd: self.show_full_cmd,
            show_user: self.show_user || self.show_all,
            show_pid: self.show_pid || self.show_all,
            show_fan: self.show_fan_speed || self.show_all,
            show_enc: codec.contains("enc"),
            show_dec: codec.contains("dec"),
            show_power: !power.is_empty(),
            power_limit: power.contains("limit"),
            no_processes: self.no_processes,
            name_width: self.gpuname_width,
            header: !self.no_header,
        }
    }

    /// How the lines are coloured: gpustat's `--force-color` (and `--color always`) resets
    /// with its own sequence, colour chosen for a terminal with the terminal's.
    fn colour(&self) -> text::Colour {
        let terminal = std::io::stdout().is_terminal();
        match (self.color.when(), self.color.colour(terminal)) {
            (_, false) => text::Colour::Off,
            (ColorWhen::Always, true) => text::Colour::Forced,
            (_, true) => text::Colour::Terminal,
        }
    }
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    for (option, value, allowed) in [
        ("--show-codec", &args.show_codec, ["enc", "dec"]),
        ("--show-power", &args.show_power, ["draw", "limit"]),
    ] {
        if let Some(v) = value {
            if let Some(bad) = v.split(',').find(|w| !w.is_empty() && !allowed.contains(w)) {
                return Err(crate::error::UsageError(format!(
                    "{option} {}: {} is none of {}",
                    gpu_devices::text::escape_control(v),
                    gpu_devices::text::escape_control(bad),
                    allowed.join(", ")
                ))
                .into());
            }
        }
    }
    if args.gpustat_version {
        return crate::output::write_stdout(&format!("{VERSION_LINE}\n"));
    }
    let options = args.text_options();
    let colour = args.colour();
    let src = args.source.open_without_events()?;
    let clear = std::io::stdout().is_terminal() && !args.json;
    let json = args.json;
    let watching = args.interval.is_some();
    let only = args.id.clone();
    crate::watch::print_each(
        src,
        args.interval,
        clear,
        |v| {
            // Each id must name a device; gpustat shows whole GPUs, so a MIG device's id
            // keeps its GPU.
            let ids: Vec<gpu_backend::DeviceId> = v.devices.iter().map(|d| d.device).collect();
            let named = args::keep_only(&only, ids, |&d| d)?;
            if !only.is_empty() {
                v.devices.retain(|d| {
                    named
                        .iter()
                        .any(|n| n.physical_index() == d.device.physical_index())
                });
            }
            Ok(())
        },
        |view, raw| {
            Ok(if json {
                let doc = json::gpustat_json(view, !args.no_processes);
                crate::output::json(&doc, !watching)?
            } else {
                text::render(view, raw, &options, colour)
            })
        },
    )
}
