//! `gpuscope snapshot`: its arguments, and which form of the snapshot it prints (table,
//! `--compact`, `--json`, `--query` CSV, or the fleet's), once or every `-i` interval.

mod fleet;
mod table;

use crate::error::UsageError;
use crate::fleet::{FleetArgs, ViewArgs};
use crate::output::write_stdout;
use crate::present::json::SnapshotView;
use crate::present::{compact, query};
use crate::source::SourceArgs;

/// `gpuscope snapshot`'s arguments.
#[derive(Debug, clap::Args)]
#[command(after_help = crate::error::EXIT_CODES_HELP)]
pub struct Args {
    #[command(flatten)]
    source: SourceArgs,
    /// Print JSON (documented in docs/snapshot-json.md; docs/fleet.md with --prometheus)
    /// instead of a table.
    #[arg(long)]
    json: bool,
    /// Print only these fields of every GPU as CSV, e.g. `index,name,memory.used`, with
    /// nvidia-smi's `--query-gpu` names; `--query help` lists them.
    #[arg(long, value_name = "FIELDS", conflicts_with = "json")]
    query: Option<String>,
    /// With --query: `csv`, optionally with `noheader` and/or `nounits`
    /// (`csv,noheader,nounits`), as nvidia-smi's `--format`.
    #[arg(long, value_name = "FORMAT", requires = "query", value_parser = query::parse_format)]
    format: Option<query::Format>,
    #[command(flatten)]
    compact: compact::CompactArgs,
    #[command(flatten)]
    fleet: FleetArgs,
    #[command(flatten)]
    view: ViewArgs,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let Args {
        source,
        json,
        query,
        format,
        compact,
        fleet,
        view,
    } = args;
    if query.as_deref().map(str::trim) == Some("help") {
        return write_stdout(&query::help());
    }
    if query.is_some() && fleet.is_set() {
        return Err(UsageError(
            "--query reads this machine's GPUs; it does not go with --prometheus or --remote"
                .into(),
        )
        .into());
    }
    if !compact.only.is_empty() && fleet.is_set() {
        return Err(UsageError(
            "--only names this machine's devices; with --prometheus or --remote use \
             --filter gpu:ID"
                .into(),
        )
        .into());
    }
    if fleet.is_set() {
        return fleet::snapshot(&fleet, &view, json);
    }
    if compact.compact && fleet.is_set() {
        return Err(UsageError(
            "--compact reads this machine's GPUs; it does not go with --prometheus or \
             --remote"
                .into(),
        )
        .into());
    }
    if view.filter.is_some() || view.sort != Default::default() {
        return Err(
            UsageError("--sort and --filter go with --prometheus or --remote".into()).into(),
        );
    }
    // A one-shot opens no event listener: in the few milliseconds it lives it could only
    // see an event by chance, and an empty list would read as "no XID happened" where it
    // means "none seen this instant"; its events are N/A (`null`). The listener's set-up and
    // teardown are the driver's (an event set, each GPU's registration). --watch listens.
    let src = if view.every(false).is_some() {
        source.open()?
    } else {
        source.open_without_events()?
    };
    // Ask only what the output shows (issue 36): a --query CSV its fields, the JSON every
    // reading and the static facts it shows, the table and --compact less what they leave out.
    src.collector.context().set_query_plan(match &query {
        Some(q) => crate::present::plan::for_gpu_fields(q),
        None if json => crate::present::plan::snapshot_json(),
        None => crate::present::plan::snapshot_table(),
    });
    // --json --watch writes JSON Lines: one compact document a line.
    let json_lines = view.every(false).is_some();
    let render =
        |view: &SnapshotView, raw: &[gpu_devices::DeviceSnapshot]| -> anyhow::Result<String> {
            Ok(if let Some(q) = &query {
                query::render(view, raw, q, format.unwrap_or_default())?
            } else if compact.compact {
                compact::render(view, &compact, compact.width(), compact.colour())
            } else if json && json_lines {
                crate::output::json(view, false)?
            } else if json {
                crate::output::json(view, true)?
            } else {
                table::render_text(view, compact.colour())
            })
        };
    // --watch: the whole output again every interval until Ctrl+C; on a terminal the
    // screen is cleared first.
    use std::io::IsTerminal as _;
    let clear = std::io::stdout().is_terminal() && !json && query.is_none();
    crate::watch::print_each(
        src,
        view.every(false),
        clear,
        |v| compact.keep_only(v),
        render,
    )
}

#[cfg(test)]
mod tests {
    use crate::present::plan::snapshot_table;

    /// The table under its plan is the table printed when everything is asked, over every kind
    /// of recording (issue 36).
    #[test]
    fn the_table_plan_leaves_out_nothing_the_table_shows() {
        for (fixture, frame) in [
            ("h100-real", 30),
            ("h100-mig", 0),
            ("gpu-lost", 0),
            ("windows-wddm", 0),
        ] {
            let text = |plan: Option<gpu_devices::QueryPlan>| {
                let path = format!(
                    "{}/../../fixtures/{fixture}.json",
                    env!("CARGO_MANIFEST_DIR")
                );
                let c = gpu_processes::ProcessCollector::from_fixture(path, Some(frame)).unwrap();
                if let Some(plan) = plan {
                    c.context().set_query_plan(plan);
                }
                let devices = c.context().all_devices();
                let (mut view, _) =
                    crate::present::json::take_with_raw(&c, "test".into(), &devices);
                view.time = String::new();
                view.time_unix_ms = 0;
                super::table::render_text(&view, false)
            };
            assert_eq!(text(Some(snapshot_table())), text(None), "{fixture}");
        }
    }
}
