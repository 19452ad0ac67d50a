//! Every number the command line takes is bounded: extreme values (zero where it is out of
//! bounds, u64::MAX, past u64, huge with units, negative, NaN and infinity, empty) given to any
//! numeric option of any command exit with status 2 and a message naming the option, never a
//! panic (status 101). clap refuses them before any work is done, so each case is quick.

use proptest::prelude::*;

use crate::support::cli;
use cli::run;

/// What an option takes, for choosing values out of its bounds.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// A duration whose lower bound is above zero.
    Duration,
    /// A duration whose range starts at zero.
    DurationFromZero,
    /// A size in bytes.
    Size,
    /// A whole number whose range starts at zero.
    FromZero,
    /// A whole number whose range starts above zero.
    AboveZero,
}

/// Every numeric option of every command: (command, option, what it takes).
const OPTIONS: &[(&str, &str, Kind)] = &[
    ("record", "--interval", Kind::Duration),
    ("record", "--duration", Kind::Duration),
    ("record", "--width", Kind::AboveZero),
    ("record", "--height", Kind::AboveZero),
    ("export", "--interval", Kind::Duration),
    ("top", "--interval", Kind::Duration),
    ("snapshot", "--interval", Kind::Duration),
    ("stat", "--interval", Kind::Duration),
    ("stat", "--gpuname-width", Kind::FromZero),
    ("snapshot", "--prometheus-timeout", Kind::Duration),
    ("snapshot", "--stale-after", Kind::Duration),
    ("top", "--prometheus-timeout", Kind::Duration),
    ("top", "--stale-after", Kind::Duration),
    ("select", "--prometheus-timeout", Kind::Duration),
    ("select", "--stale-after", Kind::Duration),
    ("select", "--min-count", Kind::FromZero),
    ("select", "--max-count", Kind::FromZero),
    ("select", "--count", Kind::FromZero),
    ("select", "--min-free-memory", Kind::Size),
    ("select", "--min-total-memory", Kind::Size),
    ("select", "--max-gpu-utilization", Kind::FromZero),
    ("select", "--max-memory-utilization", Kind::FromZero),
    ("select", "--tolerance", Kind::FromZero),
    ("doctor", "--repeat", Kind::AboveZero),
    ("doctor", "--events-for", Kind::DurationFromZero),
];

/// Values refused by every option.
const ALWAYS_REFUSED: &[&str] = &[
    "18446744073709551615",
    "18446744073709551616",
    "18446744073709551615s",
    "99999999999999999999h",
    "18446744073709551615PiB",
    "-1",
    "-18446744073709551615",
    "NaN",
    "inf",
    "-inf",
    "1e400",
    "",
    " ",
];

/// An extreme value for an option of `kind`: a fixed one, or a generated huge number (more
/// than 20 digits, past u64) with or without a unit.
fn extreme(kind: Kind) -> BoxedStrategy<String> {
    let mut fixed: Vec<String> = ALWAYS_REFUSED.iter().map(|s| s.to_string()).collect();
    if matches!(kind, Kind::Duration | Kind::AboveZero) {
        fixed.extend(["0", "0s", "0ms"].map(String::from));
    }
    let unit = match kind {
        Kind::Duration | Kind::DurationFromZero => {
            prop::sample::select(vec!["", "ns", "ms", "s", "m", "h", "d"])
        }
        Kind::Size => prop::sample::select(vec!["", "B", "K", "MiB", "GiB", "PiB"]),
        Kind::FromZero | Kind::AboveZero => prop::sample::select(vec!["", ".5"]),
    };
    prop_oneof![
        prop::sample::select(fixed),
        ("[1-9][0-9]{20,30}", unit).prop_map(|(n, u)| format!("{n}{u}")),
    ]
    .boxed()
}

fn case() -> impl Strategy<Value = (&'static str, &'static str, String)> {
    prop::sample::select(OPTIONS).prop_flat_map(|(command, option, kind)| {
        extreme(kind).prop_map(move |v| (command, option, v))
    })
}

proptest! {
    // The binary runs once per case: a modest count, over 16 options and ~20 value shapes.
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn extreme_numbers_exit_2_naming_the_option((command, option, value) in case()) {
        let arg = format!("{option}={value}");
        let out = run(&[command, &arg]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        prop_assert_eq!(out.status.code(), Some(2), "{} {}: {}", command, arg, stderr);
        prop_assert!(stderr.contains(option), "{} {}: {}", command, arg, stderr);
        prop_assert!(!stderr.contains("panicked"), "{} {}: {}", command, arg, stderr);
    }
}

/// Each option, once, with every fixed value: the property above samples, this covers all.
#[test]
fn every_option_refuses_u64_max_and_friends() {
    for (command, option, _) in OPTIONS {
        for value in ["18446744073709551615s", "-1", "NaN", ""] {
            let arg = format!("{option}={value}");
            let out = run(&[command, &arg]);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{command} {arg}: {stderr}");
            assert!(stderr.contains(option), "{command} {arg}: {stderr}");
        }
    }
}

/// docs/cli-bounds.md lists every bounded option under its command.
#[test]
fn the_bounds_table_lists_every_option() {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/cli-bounds.md"
    ))
    .unwrap();
    for (command, option, _) in OPTIONS {
        assert!(
            doc.lines().any(|l| l.starts_with("| ")
                && l.split('|')
                    .nth(1)
                    .unwrap()
                    .contains(&format!("`{command}`"))
                && l.contains(&format!("{option}`"))),
            "docs/cli-bounds.md has no row for {command} {option}"
        );
    }
}

/// `record --width 65535 --height 65535` tried to allocate 12.9 GB for the plot.
#[test]
fn record_plot_of_65535_pixels_square_is_refused() {
    let out = run(&["record", "--demo", "--width", "65535", "--height", "65535"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--width <PX>': must be a whole number from 200 to 7680"),
        "{stderr}"
    );
}

/// `record --interval 18446744073709551615s` (or `--duration`) panicked on an `Instant`
/// overflow; `export --interval` with it killed the sampler thread while /metrics kept serving.
#[test]
fn durations_of_u64_max_seconds_are_refused_with_the_bounds() {
    for (args, says) in [
        (
            &["record", "--demo", "--interval", "18446744073709551615s"][..],
            "'--interval <DURATION>': must be between 10ms and 1h",
        ),
        (
            &["record", "--demo", "--duration", "18446744073709551615s"][..],
            "'--duration <DURATION>': must be between 10ms and 30days",
        ),
        (
            &["export", "--demo", "--interval", "18446744073709551615s"][..],
            "'--interval <DURATION>': must be between 50ms and 1h",
        ),
    ] {
        cli::assert_usage_error(&run(args), args, says);
    }
}

/// The same syntax everywhere: bare seconds and units are accepted by every duration option
/// (`record` with `--interval` and `--duration` both bare and with units).
#[test]
fn bare_seconds_and_units_are_accepted() {
    for value in ["0.05", "50ms", "1"] {
        let out = run(&[
            "record",
            "--demo",
            "--interval",
            value,
            "--duration",
            value,
            // The same plot each time.
            "--overwrite",
            "--output",
            &std::env::temp_dir()
                .join(format!("gpuscope-bounds-{}.svg", std::process::id()))
                .display()
                .to_string(),
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{value}: {stderr}");
    }
    let _ = std::fs::remove_file(
        std::env::temp_dir().join(format!("gpuscope-bounds-{}.svg", std::process::id())),
    );
}
