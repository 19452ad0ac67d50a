//! nvidia-smi's argument list, parsed by hand: its grammar is not clap's (`-lms 500`,
//! `--query-gpu=a,b`, `-i 0,1`, `-d MEMORY,UTILIZATION`). Options that change a GPU are
//! refused as such; anything else unknown is refused with the list of what is supported.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use gpu_devices::text::escape_control;

use crate::error::UsageError;
use crate::present::query::{parse_format, Format};

/// What `gpuscope smi` is asked to print.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// No option (or only `-i`, `-l`, `-f`): nvidia-smi's summary table.
    Bare,
    /// `-h`, `--help`.
    Help,
    /// `-L`, `--list-gpus`.
    List,
    /// `-q`, `--query`.
    Query,
    /// `--query-gpu=FIELDS`.
    QueryGpu(String),
    /// `--query-compute-apps=FIELDS`.
    QueryApps(String),
    /// `--help-query-gpu`.
    HelpQueryGpu,
    /// `--help-query-compute-apps`.
    HelpQueryApps,
    /// `--version`: nvidia-smi's four version lines.
    Version,
}

/// `-d`/`--display` sections, nvidia-smi's names.
pub const SECTIONS: &[&str] = &[
    "MEMORY",
    "UTILIZATION",
    "ECC",
    "TEMPERATURE",
    "POWER",
    "CLOCK",
    "COMPUTE",
    "PIDS",
    "PERFORMANCE",
    "SUPPORTED_CLOCKS",
    "PAGE_RETIREMENT",
    "ACCOUNTING",
    "ENCODER_STATS",
    "SUPPORTED_GPU_TARGET_TEMP",
    "VOLTAGE",
    "FBC_STATS",
    "ROW_REMAPPER",
    "RESET_STATUS",
    "GSP_FIRMWARE_VERSION",
    "POWER_SMOOTHING",
    "POWER_PROFILES",
];

/// The longest loop interval, one day.
pub const MAX_LOOP: Duration = Duration::from_secs(86_400);
/// The shortest `-lms` interval.
pub const MIN_LOOP_MS: u64 = 10;

/// `gpuscope smi`'s options, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmiArgs {
    /// What to print.
    pub mode: Mode,
    /// `-x`: XML instead of text (with `-q`).
    pub xml: bool,
    /// `-d`: only these sections (with `-q`); empty is all.
    pub display: Vec<String>,
    /// `-i`: only these GPUs (index, UUID or PCI bus id); empty is all.
    pub ids: Vec<String>,
    /// `-l`/`-lms`: print again at this interval until Ctrl+C.
    pub every: Option<Duration>,
    /// gpuscope's `--count N`: with `-l`/`-lms`, stop after N prints.
    pub count: Option<u64>,
    /// `-f`/`--filename`: write to this file instead of stdout.
    pub filename: Option<PathBuf>,
    /// `--format`.
    pub format: Option<Format>,
    /// gpuscope's source options (`--fixture`, `--frame`, `--demo`, ...), for clap.
    pub source: Vec<OsString>,
}

/// nvidia-smi's options that change a GPU or the driver, short and long.
const WRITE_OPTIONS: &[&str] = &[
    "-pm",
    "--persistence-mode",
    "-e",
    "--ecc-config",
    "-p",
    "--reset-ecc-errors",
    "-c",
    "--compute-mode",
    "-dm",
    "--driver-model",
    "-fdm",
    "--force-driver-model",
    "--gom",
    "-r",
    "--gpu-reset",
    "-vm",
    "--virt-mode",
    "-lgc",
    "--lock-gpu-clocks",
    "-rgc",
    "--reset-gpu-clocks",
    "-lmc",
    "--lock-memory-clocks",
    "-rmc",
    "--reset-memory-clocks",
    "-lmcd",
    "--lock-memory-clocks-deferred",
    "-ac",
    "--applications-clocks",
    "-rac",
    "--reset-applications-clocks",
    "-pl",
    "--power-limit",
    "-cc",
    "--cuda-clocks",
    "-am",
    "--accounting-mode",
    "-caa",
    "--clear-accounted-apps",
    "--auto-boost-default",
    "--auto-boost-permission",
    "-mig",
    "--multi-instance-gpu",
    "-gtt",
    "--gpu-target-temp",
    "-gtu",
    "--gpu-target-temp-unset",
    "-pdr",
    "--power-dynamic-range",
    "-csg",
    "--compute-sync-gpu",
    "--conf-compute",
];

/// nvidia-smi's read-only options and subcommands that gpuscope smi does not (yet) answer.
const UNSUPPORTED: &[&str] = &[
    "-u",
    "--unit",
    "--query-supported-clocks",
    "--query-accounted-apps",
    "--query-retired-pages",
    "--query-remapped-rows",
    "--help-query-supported-clocks",
    "--help-query-accounted-apps",
    "--help-query-retired-pages",
    "--help-query-remapped-rows",
    "-B",
    "--filter-by-board",
    "-t",
    "--debug",
    "--dtd",
    "--compat",
    "topo",
    "nvlink",
    "clocks",
    "vgpu",
    "mig",
    "boost-slider",
    "power-hint",
    "conf-compute",
    "power-smoothing",
    "power-profiles",
    "encodersessions",
    "fbcsessions",
    "drain",
    "pmon",
    "dmon",
    "c2c",
];

/// gpuscope's own options that take a value, passed on to clap (`SourceArgs`).
const SOURCE_WITH_VALUE: &[&str] = &[
    "--fixture",
    "--frame",
    "--nvml-lib",
    "--proc-root",
    "--container-logs",
];

/// The one-line list of what `gpuscope smi` supports, for errors and the bare command.
pub const SUPPORTED: &str =
    "no option (the summary table), -L, -q [-d SECTIONS] [-x], -i ID[,ID...], -l SEC, -lms MS, \
    -f FILE, --version, --query-gpu=FIELDS, --query-compute-apps=FIELDS, --format=csv[,noheader][,nounits], \
    --help-query-gpu, --help-query-compute-apps (and gpuscope's --fixture FILE, --frame N, \
    --demo[=NAME], --count N)";

fn usage(text: String) -> UsageError {
    UsageError(text)
}

fn shown(a: &str) -> String {
    escape_control(a).into_owned()
}

/// Parses `gpuscope smi`'s arguments (without the program and `smi`).
pub fn parse(args: &[OsString]) -> Result<SmiArgs, UsageError> {
    let mut out = SmiArgs {
        mode: Mode::Bare,
        xml: false,
        display: Vec::new(),
        ids: Vec::new(),
        every: None,
        count: None,
        filename: None,
        format: None,
        source: Vec::new(),
    };
    let words: Vec<String> = args
        .iter()
        .map(|a| {
            a.to_str()
                .map(str::to_string)
                .ok_or_else(|| usage(format!("{:?} is not UTF-8", a.to_string_lossy())))
        })
        .collect::<Result<_, _>>()?;
    let set_mode = |out: &mut SmiArgs, m: Mode, opt: &str| -> Result<(), UsageError> {
        if out.mode != Mode::Bare && out.mode != m {
            return Err(usage(format!(
                "{} does not go with another of -L, -q, --query-gpu, --query-compute-apps, \
                 --help-query-*, --version",
                shown(opt)
            )));
        }
        out.mode = m;
        Ok(())
    };
    let mut i = 0;
    while i < words.len() {
        let word = words[i].as_str();
        i += 1;
        let (name, inline) = match word.split_once('=') {
            Some((n, v)) if n.starts_with('-') => (n, Some(v.to_string())),
            _ => (word, None),
        };
        // The option's value: after `=`, else the next word.
        let mut value = |what: &str| -> Result<String, UsageError> {
            if let Some(v) = &inline {
                return Ok(v.clone());
            }
            match words.get(i) {
                Some(v) => {
                    i += 1;
                    Ok(v.clone())
                }
                None => Err(usage(format!("{} needs {what}", shown(name)))),
            }
        };
        match name {
            "-h" | "--help" => set_mode(&mut out, Mode::Help, name)?,
            "-L" | "--list-gpus" => set_mode(&mut out, Mode::List, name)?,
            "--version" => set_mode(&mut out, Mode::Version, name)?,
            "-q" | "--query" => set_mode(&mut out, Mode::Query, name)?,
            "-x" | "--xml-format" => out.xml = true,
            "--help-query-gpu" => set_mode(&mut out, Mode::HelpQueryGpu, name)?,
            "--help-query-compute-apps" => set_mode(&mut out, Mode::HelpQueryApps, name)?,
            "--query-gpu" => {
                let v = value("a list of fields")?;
                set_mode(&mut out, Mode::QueryGpu(v), name)?
            }
            "--query-compute-apps" => {
                let v = value("a list of fields")?;
                set_mode(&mut out, Mode::QueryApps(v), name)?
            }
            "--format" => {
                let v = value("csv[,noheader][,nounits]")?;
                out.format = Some(parse_format(&v).map_err(|e| usage(format!("--format: {e}")))?);
            }
            "-d" | "--display" => sections(&value("a list of sections")?, &mut out.display)?,
            "-i" | "--id" => ids(&value("a GPU index, UUID or PCI bus id")?, &mut out.ids)?,
            "-l" | "--loop" => {
                // nvidia-smi's -l takes an optional number of seconds (default 5).
                let secs = match (&inline, words.get(i)) {
                    (Some(v), _) => Some(v.clone()),
                    (None, Some(v)) if v.bytes().all(|b| b.is_ascii_digit()) && !v.is_empty() => {
                        i += 1;
                        Some(v.clone())
                    }
                    _ => None,
                };
                out.every = Some(loop_seconds(name, secs)?);
            }
            "-lms" | "--loop-ms" => {
                out.every = Some(loop_ms(name, &value("a number of milliseconds")?)?);
            }
            "--count" => out.count = Some(count(&value("a number of prints")?)?),
            "-f" | "--filename" => out.filename = Some(PathBuf::from(value("a file name")?)),
            "--demo" => out.source.push(word.into()),
            n if SOURCE_WITH_VALUE.contains(&n) => {
                let v = value("a value")?;
                out.source.push(format!("{n}={v}").into());
            }
            n => return Err(refused(n)),
        }
    }
    check(&out)?;
    Ok(out)
}

/// `-d`'s sections, added to `display` once each, in capitals.
fn sections(value: &str, display: &mut Vec<String>) -> Result<(), UsageError> {
    for s in value.split(',').map(str::trim) {
        let upper = s.to_ascii_uppercase();
        if !SECTIONS.contains(&upper.as_str()) {
            return Err(usage(format!(
                "-d: unknown section {:?}; one of {}",
                shown(s),
                SECTIONS.join(", ")
            )));
        }
        if !display.contains(&upper) {
            display.push(upper);
        }
    }
    Ok(())
}

/// `-i`'s ids, added to `ids`.
fn ids(value: &str, ids: &mut Vec<String>) -> Result<(), UsageError> {
    for id in value.split(',').map(str::trim) {
        if id.is_empty() {
            return Err(usage(
                "-i: an empty id (two commas, or one at an end)".into(),
            ));
        }
        ids.push(id.to_string());
    }
    Ok(())
}

/// `-l`'s seconds (`name` as typed), 5 when none is given.
fn loop_seconds(name: &str, secs: Option<String>) -> Result<Duration, UsageError> {
    let secs = match secs {
        None => 5,
        Some(s) => s
            .parse::<u64>()
            .ok()
            .filter(|s| (1..=MAX_LOOP.as_secs()).contains(s))
            .ok_or_else(|| {
                usage(format!(
                    "{}: {:?} is not a number of seconds from 1 to {}",
                    shown(name),
                    shown(&s),
                    MAX_LOOP.as_secs()
                ))
            })?,
    };
    Ok(Duration::from_secs(secs))
}

/// `-lms`'s milliseconds (`name` as typed).
fn loop_ms(name: &str, s: &str) -> Result<Duration, UsageError> {
    let ms = s
        .parse::<u64>()
        .ok()
        .filter(|ms| (MIN_LOOP_MS..=MAX_LOOP.as_millis() as u64).contains(ms))
        .ok_or_else(|| {
            usage(format!(
                "{}: {:?} is not a number of milliseconds from {MIN_LOOP_MS} to {}",
                shown(name),
                shown(s),
                MAX_LOOP.as_millis()
            ))
        })?;
    Ok(Duration::from_millis(ms))
}

/// `--count`: how many prints, at least one.
fn count(s: &str) -> Result<u64, UsageError> {
    s.parse::<u64>().ok().filter(|&n| n >= 1).ok_or_else(|| {
        usage(format!(
            "--count: {:?} is not a whole number from 1",
            shown(s)
        ))
    })
}

/// Why an option that gpuscope smi does not take is refused: one that changes the GPU, one
/// of nvidia-smi's it does not support, or one nvidia-smi does not have either.
fn refused(n: &str) -> UsageError {
    if WRITE_OPTIONS.contains(&n) {
        usage(format!(
            "{} changes the GPU: gpuscope smi is read-only; run nvidia-smi itself",
            shown(n)
        ))
    } else if UNSUPPORTED.contains(&n) {
        usage(format!(
            "{} is not supported by gpuscope smi; it supports {SUPPORTED}",
            shown(n)
        ))
    } else {
        usage(format!(
            "unknown option {:?}; gpuscope smi supports {SUPPORTED}",
            shown(n)
        ))
    }
}

/// The rules between options, as nvidia-smi has them.
fn check(a: &SmiArgs) -> Result<(), UsageError> {
    let query = a.mode == Mode::Query;
    let csv = matches!(a.mode, Mode::QueryGpu(_) | Mode::QueryApps(_));
    if a.xml && !query {
        return Err(usage("-x goes with -q".into()));
    }
    if !a.display.is_empty() && !query {
        return Err(usage("-d goes with -q".into()));
    }
    if csv && a.format.is_none() {
        return Err(usage(
            "--query-gpu and --query-compute-apps need --format=csv[,noheader][,nounits]".into(),
        ));
    }
    if a.format.is_some() && !csv {
        return Err(usage(
            "--format goes with --query-gpu or --query-compute-apps".into(),
        ));
    }
    if a.every.is_some() && !(query || csv || a.mode == Mode::Bare) {
        return Err(usage(
            "-l and -lms go with the summary table, -q, --query-gpu or --query-compute-apps".into(),
        ));
    }
    if a.count.is_some() && a.every.is_none() {
        return Err(usage("--count goes with -l or -lms".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn p(args: &[&str]) -> Result<SmiArgs, UsageError> {
        parse(&args.iter().map(OsString::from).collect::<Vec<_>>())
    }

    #[test]
    fn nvidia_smi_spellings_parse() {
        let a = p(&[
            "-q",
            "-d",
            "MEMORY,utilization",
            "-i",
            "0,GPU-1",
            "-lms",
            "500",
        ])
        .unwrap();
        assert_eq!(a.mode, Mode::Query);
        assert_eq!(a.display, ["MEMORY", "UTILIZATION"]);
        assert_eq!(a.ids, ["0", "GPU-1"]);
        assert_eq!(a.every, Some(Duration::from_millis(500)));
        let a = p(&[
            "--query-gpu=index,clocks.sm",
            "--format=csv,noheader",
            "--id=1",
        ])
        .unwrap();
        assert_eq!(a.mode, Mode::QueryGpu("index,clocks.sm".into()));
        assert_eq!(
            a.format,
            Some(Format {
                noheader: true,
                nounits: false
            })
        );
        assert_eq!(
            p(&["-q", "-l"]).unwrap().every,
            Some(Duration::from_secs(5))
        );
        assert_eq!(
            p(&["-q", "-l", "2"]).unwrap().every,
            Some(Duration::from_secs(2))
        );
        assert_eq!(p(&["--demo", "-L"]).unwrap().source, ["--demo"]);
        assert_eq!(p(&["--version"]).unwrap().mode, Mode::Version);
        assert_eq!(
            p(&["-L", "--fixture", "x.json", "--frame", "3"])
                .unwrap()
                .source,
            ["--fixture=x.json", "--frame=3"]
        );
    }

    #[test]
    fn write_options_are_refused_as_read_only() {
        for opt in ["-pm", "-r", "-mig", "-lgc", "--power-limit=300", "-c"] {
            let e = p(&[opt, "1"]).unwrap_err().0;
            assert!(e.contains("read-only"), "{opt}: {e}");
        }
        let e = p(&["--bogus"]).unwrap_err().0;
        assert!(e.contains("unknown option \"--bogus\""), "{e}");
        let e = p(&["topo", "-m"]).unwrap_err().0;
        assert!(e.contains("not supported"), "{e}");
    }

    #[test]
    fn combinations_nvidia_smi_refuses_are_refused() {
        for (args, needle) in [
            (&["-x"][..], "-x goes with -q"),
            (&["-L", "-q"][..], "does not go with"),
            (&["--query-gpu=index"][..], "need --format"),
            (&["-q", "-lms", "5"][..], "from 10"),
            (&["-q", "-l", "0"][..], "from 1 to 86400"),
            (&["-q", "-l", "86401"][..], "from 1 to 86400"),
            (&["-q", "-d", "BOGUS"][..], "unknown section"),
            (&["-L", "--count", "2"][..], "--count goes with"),
            (&["-i"][..], "needs"),
        ] {
            let e = p(args).unwrap_err().0;
            assert!(e.contains(needle), "{args:?}: {e}");
        }
    }

    proptest! {
        #[test]
        fn any_argv_is_parsed_or_refused_without_panic(
            args in proptest::collection::vec(
                prop_oneof![
                    Just("-q".to_string()), Just("-L".to_string()), Just("-x".to_string()),
                    Just("-i".to_string()), Just("-l".to_string()), Just("-lms".to_string()),
                    Just("-d".to_string()), Just("--format=csv".to_string()),
                    Just("--query-gpu=index".to_string()), Just("--count".to_string()),
                    Just("--demo".to_string()), Just("-pm".to_string()),
                    ".{0,12}",
                ],
                0..8,
            )
        ) {
            let _ = parse(&args.iter().map(OsString::from).collect::<Vec<_>>());
        }

        #[test]
        fn a_format_round_trips_through_the_argument_list(noheader: bool, nounits: bool) {
            let f = Format { noheader, nounits };
            let a = p(&["--query-gpu=index", &format!("--format={f}")]).unwrap();
            prop_assert_eq!(a.format, Some(f));
        }
    }
}
