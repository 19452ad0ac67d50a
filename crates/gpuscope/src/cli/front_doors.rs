//! Front doors: gpuscope answering as the tools people already type. Invoked through a link
//! named `nvidia-smi`, `gpustat`, `nvitop`, `nvisel` or `gpulink` (or as `gpuscope nvitop ...`), gpuscope
//! runs the command that stands in for that tool, with the tool's spellings translated where
//! they differ from gpuscope's one grammar (a busybox-style multi-call binary).
//! `gpuscope install-links DIR` makes the links.
//!
//! | link | runs | spellings translated |
//! |---|---|---|
//! | `nvidia-smi` | `gpuscope smi` | none: `smi` parses nvidia-smi's own grammar |
//! | `gpustat` | `gpuscope stat` | a bare `--color` (gpustat's "force colour"), `-v` (its version) |
//! | `nvitop` | `gpuscope top` | `-ov` (`--only-visible`) |
//! | `nvisel` | `gpuscope select` | `-i` `--inherit`, `-c` `--min-count`, `-C` `--max-count`, `-G` `--max-gpu-utilization`; `--as-nvisel` (a partial list printed, as nvisel) |
//! | `gpulink` | `gpuscope record` | `-o FILE` `--output FILE` (with `--overwrite`, as gpulink replaces its plot); without it `--no-plot` (gpulink plots only when asked); `--summary gpulink` unless `--summary` is given |

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::error::UsageError;

/// One tool gpuscope stands in for.
pub struct FrontDoor {
    /// The tool's name: the link's name.
    pub name: &'static str,
    /// The gpuscope command that answers for it.
    pub command: &'static str,
}

/// Every front door, in the order `install-links` makes them.
pub const FRONT_DOORS: &[FrontDoor] = &[
    FrontDoor {
        name: "nvidia-smi",
        command: "smi",
    },
    FrontDoor {
        name: "gpustat",
        command: "stat",
    },
    FrontDoor {
        name: "nvitop",
        command: "top",
    },
    FrontDoor {
        name: "nvisel",
        command: "select",
    },
    FrontDoor {
        name: "gpulink",
        command: "record",
    },
];

/// The command line gpuscope runs: `args` as given when gpuscope was invoked by its own name
/// with one of its commands; else, when the program's name (or the first word) is a tool's,
/// the command standing in for it, with the tool's spellings translated.
pub fn route(args: Vec<OsString>) -> Vec<OsString> {
    let program = args
        .first()
        .map(|a| Path::new(a).file_name().unwrap_or(a.as_os_str()).to_owned())
        .unwrap_or_default();
    let (door, rest) = match door_named(&program) {
        Some(door) => (door, args.get(1..).unwrap_or_default()),
        None => match args.get(1).and_then(|a| door_named(a)) {
            Some(door) => (door, args.get(2..).unwrap_or_default()),
            None => {
                // `gpuscope top -ov`, `gpuscope stat --color`: the commands that are a tool's
                // front door take its spellings under their own name too.
                let tool = match args.get(1).and_then(|a| a.to_str()) {
                    Some("top") => "nvitop",
                    Some("stat") => "gpustat",
                    _ => return args,
                };
                let mut out = args[..2].to_vec();
                out.extend(translate(tool, &args[2..]));
                return out;
            }
        },
    };
    let mut out: Vec<OsString> = vec!["gpuscope".into(), door.command.into()];
    out.extend(translate(door.name, rest));
    out
}

fn door_named(name: &OsStr) -> Option<&'static FrontDoor> {
    FRONT_DOORS.iter().find(|d| name == d.name)
}

/// nvisel's short options that gpuscope's grammar gives other meanings (or none in `select`),
/// and the long option each is: the `nvisel` door translates them, and `select` refuses them
/// naming the long one.
const NVISEL_SHORTS: &[(char, &str)] = &[
    ('i', "--inherit"),
    ('c', "--min-count"),
    ('C', "--max-count"),
    ('G', "--max-gpu-utilization"),
];

/// gpustat's short options that `snapshot --compact` has only long (`stat` takes them as
/// gpustat does): `snapshot` refuses them naming the long one.
const GPUSTAT_SHORTS_IN_SNAPSHOT: &[(char, &str)] = &[('c', "--show-cmd"), ('p', "--show-pid")];

/// The words after the command, with `tool`'s spellings put in gpuscope's. Everything after
/// `--` is left as it is.
fn translate(tool: &str, words: &[OsString]) -> Vec<OsString> {
    if tool == "gpulink" {
        return gpulink_words(words);
    }
    let mut out = Vec::with_capacity(words.len() + 1);
    if tool == "nvisel" {
        // nvisel prints the devices that qualify even when fewer than --min-count do.
        out.push("--as-nvisel".into());
    }
    for (i, word) in words.iter().enumerate() {
        if word == "--" {
            out.extend(words[i..].iter().cloned());
            break;
        }
        let Some(w) = word.to_str() else {
            out.push(word.clone());
            continue;
        };
        let next_is_when = || {
            words
                .get(i + 1)
                .and_then(|n| n.to_str())
                .is_some_and(|n| ["auto", "always", "never"].contains(&n))
        };
        match tool {
            "nvitop" if w == "-ov" => out.push("--only-visible".into()),
            "nvisel" => out.push(nvisel_word(w).into()),
            // gpustat's bare `--color` forces colour; gpuscope's takes WHEN.
            "gpustat" if w == "--color" && !next_is_when() => out.push("--force-color".into()),
            // gpustat's `-v` is its version; gpuscope's, the log.
            "gpustat" if w == "-v" || w == "--version" => out.push("--gpustat-version".into()),
            _ => out.push(word.clone()),
        }
    }
    out
}

/// One of nvisel's words in `select`'s spelling: its [`NVISEL_SHORTS`], with their value
/// attached (`-c2`, `-c=2`) or not.
fn nvisel_word(w: &str) -> String {
    let mut chars = w.chars();
    if chars.next() != Some('-') {
        return w.to_string();
    }
    let Some(letter) = chars.next() else {
        return w.to_string();
    };
    let Some((_, long)) = NVISEL_SHORTS.iter().find(|(s, _)| *s == letter) else {
        return w.to_string();
    };
    let value = chars.as_str();
    match value.strip_prefix('=').unwrap_or(value) {
        "" => long.to_string(),
        v => format!("{long}={v}"),
    }
}

/// gpulink's command line (`gpulink [-o OUTPUT]`) as `record`'s: `-o FILE` (`-oFILE`,
/// `-o=FILE`) is `--output FILE`, and, as gpulink replaces its plot, `--overwrite` unless a
/// sample file (`--csv`, `--ndjson`: gpuscope's options, under gpuscope's rules) is named too;
/// without an output, `--no-plot`, as gpulink plots only when asked; and gpulink's summary line
/// (`--summary gpulink`) unless `--summary` is given. The other words are `record`'s own
/// options, passed as they are. Everything after `--` is left as it is.
fn gpulink_words(words: &[OsString]) -> Vec<OsString> {
    let mut out = Vec::with_capacity(words.len() + 3);
    let (mut output, mut summary, mut samples) = (false, false, false);
    let mut rest = words.iter();
    while let Some(word) = rest.next() {
        let w = word.to_str().unwrap_or_default();
        if w == "--" {
            out.push(word.clone());
            out.extend(rest.by_ref().cloned());
            break;
        }
        output |= w.starts_with("--output");
        summary |= w.starts_with("--summary");
        samples |= w.starts_with("--csv") || w.starts_with("--ndjson") || w == "--overwrite";
        match w.strip_prefix("-o") {
            Some("") => {
                output = true;
                out.push("--output".into());
            }
            Some(value) if !w.starts_with("--") => {
                output = true;
                out.push(format!("--output={}", value.strip_prefix('=').unwrap_or(value)).into());
            }
            _ => out.push(word.clone()),
        }
    }
    let mut added: Vec<OsString> = Vec::new();
    if !output {
        added.push("--no-plot".into());
    } else if !samples {
        added.push("--overwrite".into());
    }
    if !summary {
        added.extend(["--summary".into(), "gpulink".into()]);
    }
    added.extend(out);
    added
}

/// Why the command line is refused, when it uses a peer's short option in a gpuscope command
/// that does not have it (`gpuscope select -c 2`): the message names the long option and the
/// front door where the letter means what was meant. `args` as routed.
pub fn peer_short_refused(args: &[OsString]) -> Option<String> {
    let command = args.get(1)?.to_str()?;
    let (shorts, door) = match command {
        "select" => (NVISEL_SHORTS, "nvisel"),
        "snapshot" => (GPUSTAT_SHORTS_IN_SNAPSHOT, "gpustat (gpuscope stat)"),
        _ => return None,
    };
    for word in args.iter().skip(2) {
        let w = word.to_str()?;
        if w == "--" {
            return None;
        }
        let Some(letter) = w.strip_prefix('-').and_then(|r| r.chars().next()) else {
            continue;
        };
        if w.starts_with("--") {
            continue;
        }
        if let Some((_, long)) = shorts.iter().find(|(l, _)| *l == letter) {
            return Some(format!(
                "{command}: -{letter} is {door}'s spelling of {long}; gpuscope's commands spell \
                 it {long} (one meaning for each letter in every command: docs/cli.md), and \
                 the `{}` front door takes -{letter} as {door} does",
                door.split_whitespace().next().unwrap_or(door)
            ));
        }
    }
    None
}

/// `gpuscope install-links`.
#[derive(Debug, clap::Args)]
pub struct InstallArgs {
    /// The folder to put the links in (made if missing), e.g. ~/.local/bin. A folder before
    /// the real tools in PATH makes gpuscope answer for them.
    dir: PathBuf,

    /// Only these tools: nvidia-smi, gpustat, nvitop, nvisel, gpulink (default: all five).
    #[arg(value_name = "TOOL")]
    tools: Vec<String>,

    /// Replace a file or link already there.
    #[arg(long)]
    force: bool,
}

/// Makes the links: each a symbolic link to this program, named as the tool.
pub fn install_links(args: InstallArgs) -> anyhow::Result<()> {
    let doors: Vec<&FrontDoor> = if args.tools.is_empty() {
        FRONT_DOORS.iter().collect()
    } else {
        let mut doors = Vec::new();
        for t in &args.tools {
            let door = FRONT_DOORS.iter().find(|d| d.name == t).ok_or_else(|| {
                UsageError(format!(
                    "install-links: {} is not a tool gpuscope answers for; those are {}",
                    gpu_devices::text::escape_control(t),
                    FRONT_DOORS
                        .iter()
                        .map(|d| d.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?;
            doors.push(door);
        }
        doors
    };
    let exe = std::env::current_exe().context("cannot tell where this program is")?;
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("cannot create {}", args.dir.display()))?;
    // Refuse before making any, so that a refusal leaves the folder as it was.
    for door in &doors {
        let link = args.dir.join(door.name);
        if link.symlink_metadata().is_ok() && !args.force && !points_to(&link, &exe) {
            return Err(UsageError(format!(
                "install-links: {} is already there (--force replaces it)",
                link.display()
            ))
            .into());
        }
    }
    let mut out = String::new();
    for door in &doors {
        let link = args.dir.join(door.name);
        if points_to(&link, &exe) {
            out += &format!(
                "{} already runs gpuscope {}\n",
                link.display(),
                door.command
            );
            continue;
        }
        if link.symlink_metadata().is_ok() {
            std::fs::remove_file(&link)
                .with_context(|| format!("cannot replace {}", link.display()))?;
        }
        std::os::unix::fs::symlink(&exe, &link)
            .with_context(|| format!("cannot make the link {}", link.display()))?;
        out += &format!(
            "{} -> {} (gpuscope {})\n",
            link.display(),
            exe.display(),
            door.command
        );
    }
    for door in &doors {
        if let Some(real) = first_in_path_after(&args.dir, door.name) {
            out += &format!(
                "note: {} is in PATH too; where {} comes first in PATH, gpuscope answers for it{}\n",
                real.display(),
                args.dir.display(),
                if door.name == "nvidia-smi" {
                    " (read-only options; the others are refused)"
                } else {
                    ""
                }
            );
        }
    }
    crate::output::write_stdout(&out)
}

fn points_to(link: &Path, exe: &Path) -> bool {
    std::fs::read_link(link).is_ok_and(|target| target == exe)
}

/// The first `name` in PATH outside `dir`: the real tool a link would stand in front of.
fn first_in_path_after(dir: &Path, name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|p| p != dir)
        .map(|p| p.join(name))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<OsString> {
        line.split_whitespace().map(OsString::from).collect()
    }

    fn routed(line: &str) -> String {
        route(words(line))
            .iter()
            .map(|w| w.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn a_link_runs_the_command_standing_in_for_its_tool() {
        assert_eq!(routed("/usr/local/bin/nvidia-smi -L"), "gpuscope smi -L");
        assert_eq!(
            routed("gpustat -cpu --color"),
            "gpuscope stat -cpu --force-color"
        );
        assert_eq!(
            routed("gpustat --color never"),
            "gpuscope stat --color never"
        );
        assert_eq!(routed("nvitop -1 -ov"), "gpuscope top -1 --only-visible");
        assert_eq!(
            routed("nvisel -c 2 -C3 -i -G=50 -n 1 -f 4GiB"),
            "gpuscope select --as-nvisel --min-count 2 --max-count=3 --inherit --max-gpu-utilization=50 -n 1 -f 4GiB"
        );
    }

    #[test]
    fn gpulink_o_is_the_plot_and_without_it_no_plot_is_written() {
        assert_eq!(
            routed("/opt/bin/gpulink -o memory_consumption.png"),
            "gpuscope record --overwrite --summary gpulink --output memory_consumption.png"
        );
        assert_eq!(
            routed("gpulink -om.svg --interval 10ms"),
            "gpuscope record --overwrite --summary gpulink --output=m.svg --interval 10ms"
        );
        assert_eq!(
            routed("gpuscope gpulink --output=m.png --summary human"),
            "gpuscope record --overwrite --output=m.png --summary human"
        );
        // A sample file named too: gpuscope's option, gpuscope's rule (no replacing unasked).
        assert_eq!(
            routed("gpulink -o m.png --csv m.csv"),
            "gpuscope record --summary gpulink --output m.png --csv m.csv"
        );
        assert_eq!(
            routed("gpulink"),
            "gpuscope record --no-plot --summary gpulink"
        );
        // After `--`, nothing is read as gpulink's.
        assert_eq!(
            routed("gpulink -o a.png -- -o"),
            "gpuscope record --overwrite --summary gpulink --output a.png -- -o"
        );
    }

    #[test]
    fn a_tool_named_as_the_first_word_is_the_same_door() {
        assert_eq!(
            routed("gpuscope nvisel -i 3,5"),
            "gpuscope select --as-nvisel --inherit 3,5"
        );
        assert_eq!(routed("gpuscope gpustat --json"), "gpuscope stat --json");
    }

    #[test]
    fn a_peer_short_in_a_command_without_it_is_refused_naming_the_long_option() {
        let refused = |line: &str| peer_short_refused(&route(words(line)));
        let msg = refused("gpuscope select -c 2").expect("refused");
        assert!(
            msg.contains("--min-count") && msg.contains("nvisel"),
            "{msg}"
        );
        let msg = refused("gpuscope snapshot --compact -cp").expect("refused");
        assert!(
            msg.contains("--show-cmd") && msg.contains("gpuscope stat"),
            "{msg}"
        );
        // Through the door, or spelled long, or a letter select has: taken.
        assert_eq!(refused("nvisel -c 2"), None);
        assert_eq!(refused("gpuscope select --min-count 2 -n 1"), None);
        assert_eq!(refused("gpuscope select -- -c"), None);
    }

    #[test]
    fn gpuscope_own_commands_are_left_as_they_are() {
        assert_eq!(routed("gpuscope select -n 2"), "gpuscope select -n 2");
        assert_eq!(routed("gpuscope snapshot -o 1"), "gpuscope snapshot -o 1");
        assert_eq!(routed("gpuscope top -ov"), "gpuscope top --only-visible");
        assert_eq!(
            routed("gpuscope stat --color"),
            "gpuscope stat --force-color"
        );
        assert_eq!(routed("gpuscope"), "gpuscope");
        // After `--` nothing is translated.
        assert_eq!(routed("nvisel -- -c"), "gpuscope select --as-nvisel -- -c");
        assert_eq!(routed("gpustat -- --color"), "gpuscope stat -- --color");
    }
}
