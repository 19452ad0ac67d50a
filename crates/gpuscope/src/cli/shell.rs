//! What a newcomer meets first: the command `gpuscope` runs when given none, shell completions
//! (`gpuscope completions <shell>`) and man pages (`gpuscope __man DIR`, run by
//! `cargo xtask man`).

use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use clap::CommandFactory;

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

/// The directory of `gpuscope __man DIR` (default `man`), `None` for any other command line.
///
/// This is read before clap parses, so that the command stays out of `--help` and of the
/// completion scripts (clap_complete lists hidden commands too).
pub fn man_dir(args: &[OsString]) -> Option<PathBuf> {
    (args.get(1)? == "__man").then(|| args.get(2).map_or_else(|| "man".into(), PathBuf::from))
}

/// True when stdin and stdout are both a terminal, so the viewer can run.
pub fn on_terminal() -> bool {
    std::io::stdin().is_terminal() && std::io::stdout().is_terminal()
}

/// Writes the completion script for `shell` to stdout.
pub fn completions(shell: clap_complete::Shell) -> Result<()> {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut crate::cli::Cli::command(), "gpuscope", &mut out);
    crate::output::write_stdout(&String::from_utf8_lossy(&out))
}

/// Writes `gpuscope.1` and one page per command (`gpuscope-top.1`, ...) into `dir`, made if
/// missing: the pages of `clap_mangen::generate_to`, each written by
/// `gpu_backend::files::create`, so that a page replaces an earlier one but is never written
/// through a symbolic link planted at its name.
pub fn man_pages(dir: &Path) -> Result<()> {
    fn write_pages(cmd: clap::Command, dir: &Path) -> Result<()> {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned() {
            write_pages(sub, dir)?;
        }
        let man = clap_mangen::Man::new(cmd);
        let path = dir.join(man.get_filename());
        let mut page = Vec::new();
        man.render(&mut page)?;
        let mut file = gpu_backend::files::create(&path, gpu_backend::files::IfExists::Truncate)
            .with_context(|| format!("cannot write the man page {}", path.display()))?;
        std::io::Write::write_all(&mut file, &page)
            .with_context(|| format!("cannot write the man page {}", path.display()))
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut cmd = crate::cli::Cli::command().disable_help_subcommand(true);
    cmd.build();
    write_pages(cmd, dir)
}

#[cfg(test)]
/// The commands that speak a peer's grammar (front doors: docs/cli.md) rather than gpuscope's
/// own: their letters may mean what the peer means.
pub const FRONT_DOOR_COMMANDS: &[&str] = &["stat", "smi"];

#[cfg(test)]
/// Commands without options of their own worth a row.
const NOT_IN_TABLE: &[&str] = &["completions", "install-links", "help"];

#[cfg(test)]
/// docs/cli.md's table of options: every option of gpuscope's own commands with its letter and
/// the commands that take it, then each front door's options. Made from the parser itself, so
/// the page cannot drift from the program (a test compares them).
pub fn option_table() -> String {
    use std::collections::BTreeMap;
    let mut root = crate::cli::Cli::command();
    root.build();
    let own: Vec<&clap::Command> = root
        .get_subcommands()
        .filter(|c| {
            !FRONT_DOOR_COMMANDS.contains(&c.get_name()) && !NOT_IN_TABLE.contains(&c.get_name())
        })
        .collect();
    // (long, letter) -> (aliases, first sentence of help, commands): two options that share a
    // long name but not a letter (snapshot's and select's --format) are two rows.
    type Row = (Vec<String>, String, Vec<String>);
    let mut rows: BTreeMap<(String, Option<char>), Row> = BTreeMap::new();
    for cmd in &own {
        for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
            let Some(long) = arg.get_long() else { continue };
            if ["help", "version"].contains(&long) {
                continue;
            }
            let help = arg
                .get_help()
                .map(|h| first_sentence(&h.to_string()))
                .unwrap_or_default();
            let entry = rows
                .entry((long.to_string(), arg.get_short()))
                .or_insert_with(|| (Vec::new(), help, Vec::new()));
            for alias in arg.get_visible_aliases().unwrap_or_default() {
                if !entry.0.iter().any(|a| a == alias) {
                    entry.0.push(alias.to_string());
                }
            }
            entry.2.push(cmd.get_name().to_string());
        }
    }
    let mut out = String::from(
        "| option | letter | also spelled | commands | what (as the first command's help says) |\n|---|---|---|---|---|\n",
    );
    for ((long, short), (aliases, help, commands)) in &rows {
        let commands = if commands.len() == own.len() {
            "all".to_string()
        } else {
            commands.join(", ")
        };
        out += &format!(
            "| `--{long}` | {} | {} | {commands} | {} |\n",
            short.map(|c| format!("`-{c}`")).unwrap_or_default(),
            aliases
                .iter()
                .map(|a| format!("`--{a}`"))
                .collect::<Vec<_>>()
                .join(", "),
            help.replace('|', "\\|")
        );
    }
    for name in FRONT_DOOR_COMMANDS {
        let Some(cmd) = root.find_subcommand(name) else {
            continue;
        };
        let letters: Vec<String> = cmd
            .get_arguments()
            .filter(|a| !a.is_hide_set() && !a.is_global_set())
            .filter_map(|a| Some(format!("`-{}` `--{}`", a.get_short()?, a.get_long()?)))
            .collect();
        if !letters.is_empty() {
            out += &format!("\n`gpuscope {name}`'s letters: {}.\n", letters.join(", "));
        }
    }
    out
}

#[cfg(test)]
/// docs/cli.md's table of metric names, made from [`gpu_devices::vocabulary::METRICS`].
pub fn vocabulary_table() -> String {
    let mut out = String::from(
        "| name | also | unit | what | `snapshot --json` key | `export` family |\n|---|---|---|---|---|---|\n",
    );
    let code = |v: Option<&str>| v.map(|v| format!("`{v}`")).unwrap_or_default();
    for m in gpu_devices::vocabulary::METRICS {
        out += &format!(
            "| `{}` | {} | {} | {} | {} | {} |\n",
            m.name,
            m.aliases
                .iter()
                .map(|a| format!("`{a}`"))
                .collect::<Vec<_>>()
                .join(", "),
            m.unit,
            m.help,
            code(m.json),
            code(m.exporter)
        );
    }
    out
}

#[cfg(test)]
fn first_sentence(help: &str) -> String {
    let flat = help.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.find(". ") {
        Some(i) => flat[..=i].to_string(),
        None => flat,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<OsString> {
        a.iter().map(OsString::from).collect()
    }

    /// `man_pages` writes each page itself (never through a link) and must still write the
    /// pages `clap_mangen::generate_to` writes, byte for byte, under the same names.
    #[test]
    fn man_pages_are_the_ones_clap_mangen_writes() {
        let (ours, theirs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        man_pages(ours.path()).unwrap();
        clap_mangen::generate_to(crate::cli::Cli::command(), theirs.path()).unwrap();
        let pages = |dir: &Path| {
            let mut pages: Vec<(OsString, Vec<u8>)> = std::fs::read_dir(dir)
                .unwrap()
                .map(|e| {
                    let e = e.unwrap();
                    (e.file_name(), std::fs::read(e.path()).unwrap())
                })
                .collect();
            pages.sort();
            pages
        };
        let ours = pages(ours.path());
        assert!(ours.len() > 10, "{} pages", ours.len());
        assert!(ours == pages(theirs.path()));
    }

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

    #[test]
    fn only_the_first_argument_asks_for_man_pages() {
        assert_eq!(
            man_dir(&args(&["gpuscope", "__man", "out"])),
            Some(PathBuf::from("out"))
        );
        assert_eq!(man_dir(&args(&["gpuscope", "__man"])), Some("man".into()));
        assert_eq!(man_dir(&args(&["gpuscope", "info", "__man"])), None);
        assert_eq!(man_dir(&args(&["gpuscope"])), None);
    }

    /// Every subcommand is in the parser the completions and man pages are made from.
    #[test]
    fn the_cli_definition_is_consistent() {
        crate::cli::Cli::command().debug_assert();
    }

    /// One grammar: in gpuscope's own commands a letter is one option, the same long option
    /// wherever it appears (front doors excepted: they speak their peer's).
    #[test]
    fn each_letter_is_one_option_in_every_command() {
        use std::collections::BTreeMap;
        let mut root = crate::cli::Cli::command();
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

    /// docs/cli.md holds the tables [`option_table`] and [`vocabulary_table`] make;
    /// `UPDATE_DOCS=1` rewrites them.
    #[test]
    fn docs_cli_md_has_the_table_of_every_option() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/cli.md");
        let mut page = std::fs::read_to_string(&path).expect("docs/cli.md");
        let mut stale = Vec::new();
        for (name, table) in [
            ("options", option_table()),
            ("vocabulary", vocabulary_table()),
        ] {
            let (begin, end) = (
                format!("<!-- {name}:begin -->\n"),
                format!("<!-- {name}:end -->"),
            );
            let start = page.find(&begin).expect("the begin marker") + begin.len();
            let stop = page.find(&end).expect("the end marker");
            if page[start..stop] != table {
                stale.push(name);
                page = format!("{}{table}{}", &page[..start], &page[stop..]);
            }
        }
        if !stale.is_empty() {
            if std::env::var_os("UPDATE_DOCS").is_some() {
                std::fs::write(&path, page).unwrap();
            } else {
                panic!(
                    "docs/cli.md's {stale:?} table is not the program's; run `UPDATE_DOCS=1 \
                     cargo test -p gpuscope --bin gpuscope docs_cli_md` and read the change"
                );
            }
        }
    }
}
