//! gpuscope's one grammar: the command line parsed as clap does with a refused value from the
//! environment named by its variable, the command `gpuscope` runs when given none, and
//! `--demo NAME` read as `--demo=NAME`.

use std::ffi::OsString;
use std::io::IsTerminal;

/// Parses the command line as clap does, except that a value refused when it came from an
/// environment variable (`GPUSCOPE_TOP_INTERVAL=1ms`) is reported naming the variable, not only
/// the option the user never typed. Exits as clap does (status 2 for a usage error).
pub fn parse<P: clap::Parser>(args: Vec<OsString>) -> P {
    match P::try_parse_from(&args) {
        Ok(parsed) => parsed,
        Err(e) => match from_environment(&P::command(), &args, &e) {
            Some(text) => {
                eprint!("{text}");
                std::process::exit(2);
            }
            None => e.exit(),
        },
    }
}

/// The error text of `e` naming the environment variable its value came from, when it came
/// from one: the refused option has `env`, the variable holds the refused value, and the option
/// is not on the command line.
fn from_environment(cmd: &clap::Command, args: &[OsString], e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if !matches!(
        e.kind(),
        ErrorKind::InvalidValue | ErrorKind::ValueValidation
    ) {
        return None;
    }
    let Some(ContextValue::String(shown)) = e.get(ContextKind::InvalidArg) else {
        return None;
    };
    let long = shown.split_whitespace().next()?.strip_prefix("--")?;
    // The option of the command given (its subcommand, when one is named), else of the top.
    let words: Vec<String> = args
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let sub = words.iter().find_map(|w| cmd.find_subcommand(w));
    let arg = sub
        .into_iter()
        .chain([cmd])
        .flat_map(|c| c.get_arguments())
        .find(|a| a.get_long() == Some(long))?;
    let variable = arg.get_env()?;
    let typed = words.iter().any(|w| {
        w == &format!("--{long}")
            || w.starts_with(&format!("--{long}="))
            || arg
                .get_short()
                .is_some_and(|s| w.starts_with(&format!("-{s}")) && !w.starts_with("--"))
    });
    if typed || std::env::var_os(variable).is_none() {
        return None;
    }
    let variable = variable.to_string_lossy();
    Some(e.to_string().replacen(
        &format!("'{shown}'"),
        &format!("{variable} (the environment's value for '{shown}')"),
        1,
    ))
}

/// What `gpuscope` alone does, for `--help`.
pub const DEFAULT_COMMAND_HELP: &str = "With no command, gpuscope runs `top` (the viewer) when \
    its input and output are a terminal, and `snapshot` otherwise (a pipe, a file, cron); \
    options given without a command go to that one, as in `gpuscope --demo`.";

/// The arguments with the default command put in when none is given: `top` on a terminal,
/// `snapshot` otherwise. Help and version flags are left to the top level; `-v`, which every
/// command takes, may come before the command (`gpuscope -vv export`).
pub fn with_default_command(mut args: Vec<OsString>, terminal: bool) -> Vec<OsString> {
    let is_verbose = |a: &str| {
        a == "--verbose" || (a.len() > 1 && a.starts_with('-') && a[1..].bytes().all(|b| b == b'v'))
    };
    let first = args
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy())
        .find(|a| !is_verbose(a));
    let needs_one = match first {
        None => true,
        Some(a) => a.starts_with('-') && !["-h", "--help", "-V", "--version"].contains(&a.as_ref()),
    };
    if needs_one {
        let command = if terminal { "top" } else { "snapshot" };
        let at = args.len().min(1);
        args.insert(at, command.into());
    }
    args
}

/// The arguments with `--demo NAME` written as `--demo=NAME`, so that a built-in recording can
/// be named either way (`--demo h100-real`) while `--demo` alone keeps its meaning before a
/// device index (`gpuscope info --demo 3`). The word after `--demo` is taken as its value unless
/// it is an option (`-...`) or a device index (`3`, `0:1`); a name that is no demo is then
/// refused by the parser with the list of names (exit code 2).
pub fn with_demo_value(args: Vec<OsString>) -> Vec<OsString> {
    let is_index = |a: &str| {
        !a.is_empty()
            && a.split(':').count() <= 2
            && a.split(':')
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
    };
    let mut out = Vec::with_capacity(args.len());
    let mut args = args.into_iter().peekable();
    while let Some(arg) = args.next() {
        let value = match args.peek().map(|v| v.to_string_lossy()) {
            Some(v) if arg == "--demo" && !v.starts_with('-') && !is_index(&v) => {
                Some(v.into_owned())
            }
            _ => None,
        };
        match value {
            Some(v) => {
                args.next();
                out.push(format!("--demo={v}").into());
            }
            None => out.push(arg),
        }
        if out.last().is_some_and(|a| a == "--") {
            out.extend(args);
            break;
        }
    }
    out
}

/// True when stdin and stdout are both a terminal, so the viewer can run.
pub fn on_terminal() -> bool {
    std::io::stdin().is_terminal() && std::io::stdout().is_terminal()
}

#[cfg(test)]
/// The commands that speak a peer's grammar (front doors: docs/cli.md) rather than gpuscope's
/// own: their letters may mean what the peer means.
pub const FRONT_DOOR_COMMANDS: &[&str] = &["stat", "smi"];

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;
    use crate::cli::command_line as args;

    #[test]
    fn no_command_runs_the_viewer_on_a_terminal_and_the_snapshot_elsewhere() {
        assert_eq!(
            with_default_command(args(&["gpuscope"]), true),
            args(&["gpuscope", "top"])
        );
        assert_eq!(
            with_default_command(args(&["gpuscope"]), false),
            args(&["gpuscope", "snapshot"])
        );
        assert_eq!(
            with_default_command(args(&["gpuscope", "--demo", "--json"]), false),
            args(&["gpuscope", "snapshot", "--demo", "--json"])
        );
        assert_eq!(
            with_default_command(args(&["gpuscope", "-vv"]), false),
            args(&["gpuscope", "snapshot", "-vv"])
        );
        assert_eq!(
            with_default_command(args(&["gpuscope", "-v", "--demo"]), true),
            args(&["gpuscope", "top", "-v", "--demo"])
        );
        for kept in [
            &["gpuscope", "info", "0"][..],
            &["gpuscope", "--help"],
            &["gpuscope", "-V"],
            &["gpuscope", "-vv", "export"],
            &["gpuscope", "--verbose", "-v", "info", "0"],
        ] {
            assert_eq!(with_default_command(args(kept), true), args(kept));
        }
    }

    #[test]
    fn a_demo_is_named_with_or_without_an_equals_sign() {
        for (given, meant) in [
            (
                &["gpuscope", "snapshot", "--demo", "h100-real"][..],
                &["gpuscope", "snapshot", "--demo=h100-real"][..],
            ),
            (
                &["gpuscope", "--demo", "auto", "--json"],
                &["gpuscope", "--demo=auto", "--json"],
            ),
            (
                &["gpuscope", "top", "--demo", "nope"],
                &["gpuscope", "top", "--demo=nope"],
            ),
        ] {
            assert_eq!(with_demo_value(args(given)), args(meant));
        }
        // `--demo` alone stays alone before an option, a device index, the end, or `--`.
        for kept in [
            &["gpuscope", "info", "--demo", "3"][..],
            &["gpuscope", "info", "--demo", "0:1"],
            &["gpuscope", "snapshot", "--demo", "--json"],
            &["gpuscope", "snapshot", "--demo=auto"],
            &["gpuscope", "--demo"],
            &["gpuscope", "info", "--", "--demo", "x"],
        ] {
            assert_eq!(with_demo_value(args(kept)), args(kept));
        }
    }

    /// Every subcommand is in the parser the completions and man pages are made from.
    #[test]
    fn the_cli_definition_is_consistent() {
        crate::cli::defs::Cli::command().debug_assert();
    }

    /// One grammar: in gpuscope's own commands a letter is one option, the same long option
    /// wherever it appears (front doors excepted: they speak their peer's).
    #[test]
    fn each_letter_is_one_option_in_every_command() {
        use std::collections::BTreeMap;
        let mut root = crate::cli::defs::Cli::command();
        root.build();
        let mut meaning: BTreeMap<char, BTreeMap<String, Vec<String>>> = BTreeMap::new();
        for cmd in root
            .get_subcommands()
            .filter(|c| !FRONT_DOOR_COMMANDS.contains(&c.get_name()))
        {
            for arg in cmd.get_arguments() {
                if let (Some(short), Some(long)) = (arg.get_short(), arg.get_long()) {
                    meaning
                        .entry(short)
                        .or_default()
                        .entry(long.to_string())
                        .or_default()
                        .push(cmd.get_name().to_string());
                }
            }
        }
        let clashes: Vec<String> = meaning
            .iter()
            .filter(|(_, longs)| longs.len() > 1)
            .map(|(c, longs)| format!("-{c}: {longs:?}"))
            .collect();
        assert!(
            clashes.is_empty(),
            "letters with two meanings: {clashes:#?}"
        );
        // The ones the issue named, as they now are.
        assert_eq!(meaning[&'i'].keys().collect::<Vec<_>>(), ["interval"]);
        assert_eq!(meaning[&'o'].keys().collect::<Vec<_>>(), ["only"]);
        assert_eq!(meaning[&'c'].keys().collect::<Vec<_>>(), ["compute"]);
    }
}
