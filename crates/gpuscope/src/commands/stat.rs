//! `gpuscope stat`: gpustat's front door. gpustat's options, spelled as gpustat spells them
//! (`-cpu`, `-a`, `-e`, `-f`, `-P`, `-F`, `--id`, `--no-processes`, `-i`, `--json`,
//! `--gpuname-width`, `--no-header`, `--color`/`--force-color`, `--no-color`), over gpuscope's
//! compact view (`snapshot --compact`), and `--json` in gpustat's own document (its keys,
//! nvidia-smi's field names, memory in MiB, power in whole watts), so scripts written for
//! `gpustat --json` read it unchanged. Invoked through a link named `gpustat`, gpuscope runs
//! this command (docs/cli.md, "Front doors").
//!
//! Where gpustat's letters mean something else in gpuscope's own commands (`-c` is top's
//! `--compute`, `-p` top's `--pid`, `-u` top's `--user`), they mean gpustat's here: this command
//! is the one place they do.

use std::io::IsTerminal as _;
use std::time::Duration;

use serde_json::{json, Value};

use crate::cli::args::{self, ColorArgs};
use crate::present::compact::CompactArgs;
use crate::present::json::{DeviceView, SnapshotView};
use crate::source::SourceArgs;

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

    /// Each process's command (gpustat -c).
    #[arg(short = 'c', long)]
    show_cmd: bool,

    /// Each process's full command line (gpustat -f).
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
}

impl Args {
    /// The compact view's options for what was asked.
    fn compact(&self) -> CompactArgs {
        let codec = self
            .show_codec
            .as_deref()
            .or(self.show_all.then_some("enc,dec"));
        let power = self
            .show_power
            .as_deref()
            .or(self.show_all.then_some("draw,limit"));
        let show_cmd = self.show_cmd || self.show_full_cmd || self.show_all;
        CompactArgs {
            compact: true,
            show_cmd,
            show_pid: self.show_pid || self.show_all,
            // gpustat: `-c` alone shows the command instead of the user; `-cu` both.
            no_user: show_cmd && !self.show_user && !self.show_all,
            show_power: power.is_some(),
            show_fan: self.show_fan_speed || self.show_all,
            no_header: self.no_header,
            only: self.id.clone(),
            color: self.color.clone(),
            show_encoder: codec.is_some_and(|c| c.contains("enc")),
            show_decoder: codec.is_some_and(|c| c.contains("dec")),
            power_limit: power.is_none_or(|p| p.contains("limit")),
            no_processes: self.no_processes,
            name_width: self.gpuname_width,
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
    let compact = args.compact();
    let src = args.source.open()?;
    let clear = std::io::stdout().is_terminal() && !args.json;
    let json = args.json;
    let watching = args.interval.is_some();
    crate::watch::print_each(
        src,
        args.interval,
        clear,
        |v| compact.keep_only(v),
        |view, _| {
            Ok(if json {
                let doc = gpustat_json(view, !args.no_processes);
                crate::output::json(&doc, !watching)?
            } else {
                crate::present::compact::render(view, &compact, compact.width(), compact.colour())
            })
        },
    )
}

/// A snapshot as gpustat's `--json` writes it: `hostname`, `driver_version`, `query_time`
/// (ISO 8601 without a zone; gpustat writes local time, gpuscope UTC) and `gpus`, one per
/// physical GPU with nvidia-smi's field names: memory in MiB (2^20 bytes, rounded down) and
/// power in whole watts (rounded down), as gpustat computes them. A value not known is null.
pub fn gpustat_json(view: &SnapshotView, processes: bool) -> Value {
    let gpus: Vec<Value> = view
        .devices
        .iter()
        .filter(|d| d.mig_index.is_none())
        .map(|d| gpu_json(d, processes))
        .collect();
    json!({
        "hostname": view.hostname,
        "driver_version": view.driver_version,
        "query_time": view.time.trim_end_matches('Z'),
        "gpus": gpus,
    })
}

fn gpu_json(d: &DeviceView, processes: bool) -> Value {
    const MIB: u64 = 1024 * 1024;
    let watts = |w: Option<f64>| {
        w.filter(|w| w.is_finite() && *w >= 0.0)
            .map(|w| w.floor().min(1e9) as u64)
    };
    let procs = match (&d.processes, processes) {
        (_, false) => Value::Array(Vec::new()),
        (None, true) => Value::Null,
        (Some(list), true) => Value::Array(
            list.iter()
                .map(|p| {
                    let full: Vec<&str> = p
                        .command
                        .as_deref()
                        .map(|c| c.split_whitespace().collect())
                        .unwrap_or_default();
                    let command = full
                        .first()
                        .map(|c| c.rsplit('/').next().unwrap_or(c).to_string())
                        .or_else(|| p.name.clone());
                    json!({
                        "username": p.user,
                        "command": command,
                        "full_command": full,
                        "gpu_memory_usage": p.used_memory_bytes.map(|b| b / MIB),
                        "cpu_percent": p.cpu_percent,
                        "cpu_memory_usage": p.host_memory_bytes,
                        "pid": p.pid,
                    })
                })
                .collect(),
        ),
    };
    json!({
        "index": d.index,
        "uuid": d.uuid,
        "name": d.name,
        "temperature.gpu": d.temperature_celsius,
        "fan.speed": d.fan_speed_percent,
        "utilization.gpu": d.gpu_utilization_percent,
        "utilization.enc": d.encoder_utilization_percent,
        "utilization.dec": d.decoder_utilization_percent,
        "power.draw": watts(d.power_usage_watts),
        "enforced.power.limit": watts(d.power_limit_watts),
        "memory.used": d.memory_used_bytes.map(|b| b / MIB),
        "memory.total": d.memory_total_bytes.map(|b| b / MIB),
        "processes": procs,
    })
}
