//! The log: what gpuscope did and how long it took, on stderr, for a person finding out why a
//! value is N/A or a refresh is slow. Off unless asked for, so that a command's output and its
//! cost are the same as without it; never on stdout, so `--json`, `--query` and the other
//! outputs stay clean.
//!
//! - `-v` logs gpuscope's own crates at `info`, `-vv` at `debug`, `-vvv` at `trace`.
//! - `GPUSCOPE_LOG`, else `RUST_LOG`: tracing-subscriber `EnvFilter` directives
//!   (`gpuscope::export=debug`, `gpu_processes=debug,gpuscope=info`), added after `-v`'s: a
//!   directive for a crate or module sets its level whatever `-v` gave (EnvFilter keeps the
//!   last directive of a target, and the most specific target wins). A directive that does not
//!   parse is a usage error that names the variable.
//! - Under systemd, when stderr is the journal (`JOURNAL_STREAM` names stderr's device and
//!   inode, as systemd.exec(5) says to check), each line starts with its syslog priority
//!   (`<7>` for debug, sd-daemon(3)) and carries no time of its own: journald stamps and ranks
//!   it. Elsewhere a line is `TIME LEVEL TARGET: message fields`.
//!
//! The libraries emit events through `tracing`; only this module installs a subscriber. What is
//! logged, at which level and under which target: docs/logging.md. At `-vv` that includes
//! every NVML call (target `gpu_backend::calls`, `gpu_backend::cost::CallLog`), which
//! `gpu_backend::Source::open` installs only when the subscriber takes that target as the
//! source opens: [`init`] runs before any source is opened.

use std::io::IsTerminal as _;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::EnvFilter;

use crate::error::UsageError;

/// The crates whose events `-v` turns on (tracing targets start with the crate's name).
const OWN_CRATES: [&str; 7] = [
    "gpuscope",
    "gpu_fleet",
    "gpu_backend",
    "gpu_devices",
    "gpu_processes",
    "gpu_metrics",
    "gpu_select",
];

/// The environment variables read for filter directives, the first one set winning.
const ENV_VARS: [&str; 2] = ["GPUSCOPE_LOG", "RUST_LOG"];

/// Turns the log on when `-v` was given (`verbose` times) or `GPUSCOPE_LOG` / `RUST_LOG` is
/// set; otherwise installs nothing, so that every event costs one relaxed load.
///
/// # Errors
///
/// A [`UsageError`] when the variable's directives do not parse.
pub fn init(verbose: u8) -> Result<(), UsageError> {
    let env = ENV_VARS.iter().find_map(|name| {
        std::env::var(name)
            .ok()
            .filter(|v| !v.trim().is_empty())
            .map(|v| (*name, v))
    });
    let Some(directives) = directives(verbose, env.as_ref().map(|(_, v)| v.as_str())) else {
        return Ok(());
    };
    let filter = EnvFilter::builder().parse(&directives).map_err(|e| {
        // Only the variable's part can be wrong: `-v`'s directives are ours.
        let (name, value) = env.as_ref().map_or(("-v", ""), |(n, v)| (*n, v.as_str()));
        UsageError(format!(
            "{name}={value:?}: {e}; expected tracing directives such as `gpuscope=debug` or \
             `gpuscope::export=debug,gpu_processes=info`"
        ))
    })?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false);
    // Installing fails only when a subscriber is already set, which cannot happen: this runs
    // once, first thing in main.
    let _ = if stderr_is_journal() {
        builder.event_format(Journal).try_init()
    } else {
        builder.try_init()
    };
    Ok(())
}

/// True when the log is on and stderr is a terminal: lines written there would tear a
/// full-screen viewer drawn on the same terminal.
pub fn writes_to_terminal() -> bool {
    tracing::level_filters::LevelFilter::current() != tracing::level_filters::LevelFilter::OFF
        && std::io::stderr().is_terminal()
}

/// The filter directives for `-v` given `verbose` times and the environment's `env`; `None`
/// when the log stays off.
fn directives(verbose: u8, env: Option<&str>) -> Option<String> {
    let level = match verbose {
        0 => None,
        1 => Some("info"),
        2 => Some("debug"),
        _ => Some("trace"),
    };
    let mut all: Vec<String> = level
        .map(|l| OWN_CRATES.iter().map(|c| format!("{c}={l}")).collect())
        .unwrap_or_default();
    if let Some(env) = env {
        all.push(env.trim().to_string());
    }
    (!all.is_empty()).then(|| all.join(","))
}

/// True when stderr is the systemd journal's stream: `JOURNAL_STREAM` is `DEVICE:INODE` of the
/// stream systemd connected, which a child may have inherited while pointing stderr elsewhere,
/// so stderr's own device and inode are compared.
fn stderr_is_journal() -> bool {
    use std::os::fd::AsFd as _;
    use std::os::unix::fs::MetadataExt as _;
    let Some(stream) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Some((dev, ino)) = stream.to_str().and_then(|s| s.split_once(':')) else {
        return false;
    };
    let stderr = std::io::stderr();
    if stderr.is_terminal() {
        return false;
    }
    let Ok(fd) = stderr.as_fd().try_clone_to_owned() else {
        return false;
    };
    let Ok(meta) = std::fs::File::from(fd).metadata() else {
        return false;
    };
    dev.parse() == Ok(meta.dev()) && ino.parse() == Ok(meta.ino())
}

/// Lines for journald: `<PRIORITY>target: message fields`, the priority as sd-daemon(3)
/// writes it (3 error, 4 warning, 6 info, 7 debug and trace), no time (journald adds it).
struct Journal;

impl<S, N> FormatEvent<S, N> for Journal
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let meta = event.metadata();
        let priority = match *meta.level() {
            Level::ERROR => 3,
            Level::WARN => 4,
            Level::INFO => 6,
            Level::DEBUG | Level::TRACE => 7,
        };
        write!(writer, "<{priority}>{}: ", meta.target())?;
        ctx.format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

#[cfg(test)]
mod tests {
    use super::directives;

    #[test]
    fn the_log_is_off_without_v_or_a_variable() {
        assert_eq!(directives(0, None), None);
    }

    #[test]
    fn v_turns_on_gpuscopes_own_crates_only_and_the_variable_refines_it() {
        let one = directives(1, None).unwrap();
        assert!(one.contains("gpuscope=info") && one.contains("gpu_backend=info"));
        assert!(!one.contains("hyper") && !one.contains("debug"));
        assert!(directives(2, None).unwrap().contains("gpu_processes=debug"));
        assert!(directives(5, None).unwrap().contains("gpuscope=trace"));
        let both = directives(1, Some(" gpuscope::export=debug ")).unwrap();
        assert!(both.ends_with(",gpuscope::export=debug"), "{both}");
        assert_eq!(
            directives(0, Some("gpu_processes=debug")).as_deref(),
            Some("gpu_processes=debug")
        );
    }
}
