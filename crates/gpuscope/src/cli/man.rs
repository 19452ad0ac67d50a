//! Man pages (`gpuscope __man DIR`, run by `cargo xtask man`), shell completions (`gpuscope
//! completions <shell>`), and the tables of docs/cli.md, all made from the parser itself.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use clap::CommandFactory;

use super::defs::Cli;
#[cfg(test)]
use super::grammar::FRONT_DOOR_COMMANDS;

/// The directory of `gpuscope __man DIR` (default `man`), `None` for any other command line.
///
/// This is read before clap parses, so that the command stays out of `--help` and of the
/// completion scripts (clap_complete lists hidden commands too).
pub fn man_dir(args: &[OsString]) -> Option<PathBuf> {
    (args.get(1)? == "__man").then(|| args.get(2).map_or_else(|| "man".into(), PathBuf::from))
}

/// Writes the completion script for `shell` to stdout.
pub fn completions(shell: clap_complete::Shell) -> Result<()> {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "gpuscope", &mut out);
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
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    write_pages(cmd, dir)
}

#[cfg(test)]
/// Commands without options of their own worth a row.
const NOT_IN_TABLE: &[&str] = &["completions", "install-links", "help"];

#[cfg(test)]
/// docs/cli.md's table of options: every option of gpuscope's own commands with its letter and
/// the commands that take it, then each front door's options. Made from the parser itself, so
/// the page cannot drift from the program (a test compares them).
pub fn option_table() -> String {
    use std::collections::BTreeMap;
    let mut root = Cli::command();
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
    use crate::cli::command_line as args;

    /// `man_pages` writes each page itself (never through a link) and must still write the
    /// pages `clap_mangen::generate_to` writes, byte for byte, under the same names.
    #[test]
    fn man_pages_are_the_ones_clap_mangen_writes() {
        let (ours, theirs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        man_pages(ours.path()).unwrap();
        clap_mangen::generate_to(Cli::command(), theirs.path()).unwrap();
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
    fn only_the_first_argument_asks_for_man_pages() {
        assert_eq!(
            man_dir(&args(&["gpuscope", "__man", "out"])),
            Some(PathBuf::from("out"))
        );
        assert_eq!(man_dir(&args(&["gpuscope", "__man"])), Some("man".into()));
        assert_eq!(man_dir(&args(&["gpuscope", "info", "__man"])), None);
        assert_eq!(man_dir(&args(&["gpuscope"])), None);
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
