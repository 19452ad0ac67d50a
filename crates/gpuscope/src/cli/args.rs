//! The parsers of every number the command line takes, shared by every command so that the
//! same text means the same thing everywhere, and every value has documented bounds checked
//! when the arguments are parsed (clap then exits with status 2, naming the option).
//!
//! - Durations: bare seconds (`2`, `0.25`) or numbers with units as humantime reads them
//!   (`500ms`, `2s`, `1m`, `1h`, `1h30m`). [`duration`] with the option's [`DurationBounds`].
//! - Sizes: bytes (`1073741824`) or with a unit as `gpu_devices::units::human2bytes` reads them
//!   (`4GiB`, `5000M`). [`size`], at most [`MAX_SIZE`].
//! - Whole numbers (counts, percents, pixels): [`whole`] with a range.
//!
//! The bounds of each option are listed in docs/cli-bounds.md and in the option's `--help`.

use std::net::{SocketAddr, ToSocketAddrs as _};
use std::time::Duration;

/// `--color WHEN` with nvitop's and gpustat's spellings beside it (`--no-color`, `--force-color`):
/// one colour option, the same in every command that colours.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ColorArgs {
    /// Colour: auto (on a terminal, unless NO_COLOR is set), always or never.
    #[arg(long, value_enum, default_value = "auto", value_name = "WHEN")]
    pub color: ColorWhen,

    /// The same as --color never (nvitop's and gpustat's spelling).
    #[arg(long, conflicts_with_all = ["force_color"])]
    pub no_color: bool,

    /// The same as --color always, even when NO_COLOR is set (nvitop's and gpustat's spelling).
    #[arg(long)]
    pub force_color: bool,
}

/// `--color`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorWhen {
    /// On a terminal, unless NO_COLOR is set.
    #[default]
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

impl ColorArgs {
    /// What was asked, the spellings folded into one: `--force-color` is `always`,
    /// `--no-color` is `never`, else `--color`.
    pub fn when(&self) -> ColorWhen {
        if self.force_color {
            ColorWhen::Always
        } else if self.no_color {
            ColorWhen::Never
        } else {
            self.color
        }
    }

    /// Whether to colour output that goes to a terminal when `on_terminal`: `auto` colours
    /// there unless NO_COLOR is set (to anything but the empty string).
    pub fn colour(&self, on_terminal: bool) -> bool {
        match self.when() {
            ColorWhen::Always => true,
            ColorWhen::Never => false,
            ColorWhen::Auto => {
                on_terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
            }
        }
    }
}

/// `--only IDS` (`-o`), the same in every command that shows devices: keeps the items whose
/// device a given id names: a GPU id (`3`) names the GPU and its MIG devices, a MIG id (`3:1`)
/// that one device. An id that names none is a usage error listing the ids there are.
pub fn keep_only<T>(
    only: &[String],
    items: Vec<T>,
    id: impl Fn(&T) -> gpu_backend::DeviceId,
) -> Result<Vec<T>, crate::error::UsageError> {
    if only.is_empty() {
        return Ok(items);
    }
    let mut wanted = Vec::new();
    for text in only {
        let known = text
            .trim()
            .parse::<gpu_backend::DeviceId>()
            .ok()
            .filter(|w| items.iter().any(|i| id(i) == *w));
        let Some(w) = known else {
            let ids: Vec<String> = items.iter().map(|i| id(i).to_string()).collect();
            let hint = if text.ends_with(".png") || text.ends_with(".svg") {
                " (the plot's file is --output FILE: -o is --only in every command; the gpulink \
                 front door takes gpulink's -o FILE: `gpuscope gpulink -o FILE`)"
            } else {
                ""
            };
            return Err(crate::error::UsageError(format!(
                "--only {}: no such device; there are {}{hint}",
                gpu_devices::text::escape_control(text),
                ids.join(", ")
            )));
        };
        wanted.push(w);
    }
    Ok(items
        .into_iter()
        .filter(|i| {
            let d = id(i);
            wanted.iter().any(|&w| {
                w == d
                    || (matches!(w, gpu_backend::DeviceId::Gpu(_))
                        && w.physical_index() == d.physical_index())
            })
        })
        .collect())
}

/// The shortest and longest duration an option accepts, both included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DurationBounds {
    /// The shortest accepted.
    pub min: Duration,
    /// The longest accepted.
    pub max: Duration,
}

/// `record --interval`: 10 ms to 1 hour.
pub const RECORD_INTERVAL: DurationBounds = DurationBounds {
    min: Duration::from_millis(10),
    max: Duration::from_secs(3600),
};

/// `record --duration`: 10 ms to 30 days.
pub const RECORD_DURATION: DurationBounds = DurationBounds {
    min: Duration::from_millis(10),
    max: Duration::from_secs(30 * 24 * 3600),
};

/// Every refresh interval (`-i/--interval` of `snapshot`, `stat`, `top` and `export`): 50 ms
/// (faster only burns CPU) to 1 hour. `record`'s sampling interval has its own, shorter floor
/// ([`RECORD_INTERVAL`]).
pub const INTERVAL: DurationBounds = DurationBounds {
    min: Duration::from_millis(50),
    max: Duration::from_secs(3600),
};

/// The refresh of this machine's views when `-i` comes without a value (`snapshot -i`), and
/// `top`'s by default.
pub const LOCAL_INTERVAL: Duration = Duration::from_secs(1);
/// The refresh of the fleet's views (`--prometheus`, `--remote`) when `-i` comes without a
/// value, and `top`'s fleet view's by default.
pub const FLEET_INTERVAL: Duration = Duration::from_secs(2);

/// `doctor --events-for`: 0 (skip) to 1 minute.
pub const DOCTOR_EVENTS_FOR: DurationBounds = DurationBounds {
    min: Duration::ZERO,
    max: Duration::from_secs(60),
};

/// `doctor --bundle-seconds`: 1 second to 1 minute, one frame a second: a bug report's
/// attachment stays small (docs/testing.md, "Sending a recording").
pub const DOCTOR_BUNDLE_SECONDS: DurationBounds = DurationBounds {
    min: Duration::from_secs(1),
    max: Duration::from_secs(60),
};

/// `info --gpm-window`: 0 (one GPM sample) to 5 seconds.
pub const INFO_GPM_WINDOW: DurationBounds = DurationBounds {
    min: Duration::ZERO,
    max: Duration::from_secs(5),
};

/// `doctor --repeat`: 1 to 100 calls of each query on each device.
pub const DOCTOR_REPEAT: (u64, u64) = (1, 100);

/// The largest memory size an option accepts: 1 PiB, far above any GPU's memory.
pub const MAX_SIZE: u64 = 1 << 50;

/// `record --width`, pixels: 200 to 7680 (8K; a PNG of 7680×4320 takes about 100 MB to
/// draw), gpu-metrics' plot bounds.
pub const PLOT_WIDTH: (u64, u64) = (
    gpu_metrics::PLOT_MIN_SIZE.0 as u64,
    gpu_metrics::PLOT_MAX_SIZE.0 as u64,
);

/// `record --height`, pixels: 150 to 4320, gpu-metrics' plot bounds.
pub const PLOT_HEIGHT: (u64, u64) = (
    gpu_metrics::PLOT_MIN_SIZE.1 as u64,
    gpu_metrics::PLOT_MAX_SIZE.1 as u64,
);

/// Device counts (`select -c/-C/-n`): 0 to 1024.
pub const COUNT: (u64, u64) = (0, 1024);

/// Percents (`select -G/-M/--tolerance`): 0 to 100.
pub const PERCENT: (u64, u64) = (0, 100);

/// The examples every duration error shows.
const DURATION_SYNTAX: &str = "write seconds (2, 0.5) or a number with a unit (500ms, 2s, 1m, 1h)";

/// A clap value parser of a duration within `bounds`.
pub fn duration(
    bounds: DurationBounds,
) -> impl Fn(&str) -> Result<Duration, String> + Clone + Send + Sync + 'static {
    move |text| parse_duration(text, bounds)
}

/// Parses `text` as a duration within `bounds`; the error says what is wrong and what is
/// accepted (clap adds the option and the value).
pub fn parse_duration(text: &str, bounds: DurationBounds) -> Result<Duration, String> {
    let t = text.trim();
    let range = || {
        format!(
            "must be between {} and {}",
            show_duration(bounds.min),
            show_duration(bounds.max)
        )
    };
    let value = if t.is_empty() {
        return Err(format!("expected a duration: {DURATION_SYNTAX}"));
    } else if t.starts_with(|c: char| c.is_ascii_digit() || c == '.' || c == '-' || c == '+')
        && t.parse::<f64>().is_ok()
    {
        // Bare seconds. Checked as a float first: `Duration::from_secs_f64` panics on values it
        // cannot hold.
        let secs = t.parse::<f64>().map_err(|_| range())?;
        if !secs.is_finite() || secs < bounds.min.as_secs_f64() || secs > bounds.max.as_secs_f64() {
            return Err(range());
        }
        Duration::try_from_secs_f64(secs).map_err(|_| range())?
    } else if t.starts_with('-') {
        return Err(range());
    } else {
        match humantime::parse_duration(t) {
            Ok(d) => d,
            Err(humantime::DurationError::NumberOverflow) => return Err(range()),
            Err(e) => return Err(format!("{e}: {DURATION_SYNTAX}")),
        }
    };
    if value < bounds.min || value > bounds.max {
        return Err(range());
    }
    Ok(value)
}

/// A bound for people: `10ms`, `1h`, `30days`.
pub fn show_duration(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// A clap value parser of a size in bytes, at most [`MAX_SIZE`].
pub fn size() -> impl Fn(&str) -> Result<u64, String> + Clone + Send + Sync + 'static {
    parse_size
}

/// Parses `text` as a size in bytes, at most [`MAX_SIZE`]; the error quotes the text.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let too_big = || format!("{text:?} is too large: at most 1PiB ({MAX_SIZE} bytes)");
    match gpu_devices::units::human2bytes(text) {
        Ok(bytes) if bytes <= MAX_SIZE => Ok(bytes),
        Ok(_) => Err(too_big()),
        Err(e) => Err(format!("{e} (examples: 4GiB, 5000M, 1073741824)")),
    }
}

/// A clap value parser of a whole number from `range.0` to `range.1`, both included.
pub fn whole<T>(range: (u64, u64)) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync
where
    T: TryFrom<u64> + Clone + Send + Sync + 'static,
{
    move |text| parse_whole(text, range)
}

/// Parses `text` as a whole number in `range` (both ends included).
pub fn parse_whole<T: TryFrom<u64>>(text: &str, range: (u64, u64)) -> Result<T, String> {
    let (min, max) = range;
    let bounds = || format!("must be a whole number from {min} to {max}");
    let t = text.trim();
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{text:?} is not a whole number: {}", bounds()));
    }
    let value: u64 = t.parse().map_err(|_| bounds())?;
    if !(min..=max).contains(&value) {
        return Err(bounds());
    }
    T::try_from(value).map_err(|_| bounds())
}

/// What `--listen` takes, for its errors.
const LISTEN_FORMS: &str = "expected ADDRESS:PORT (127.0.0.1:9445, [::]:9445), :PORT (every IPv4 \
     address) or HOST:PORT (localhost:9445)";

/// Parses an address to listen on: `ADDRESS:PORT` (`127.0.0.1:9445`, `[::1]:9445`), `:PORT`
/// (every IPv4 address, `0.0.0.0:PORT`), or `HOST:PORT` with the host name resolved (its first
/// IPv4 address, else its first). The error quotes the text and says what was expected.
pub fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    if let Ok(address) = text.parse::<SocketAddr>() {
        return Ok(address);
    }
    let Some((host, port)) = text.rsplit_once(':') else {
        return Err(format!("{text:?} has no port; {LISTEN_FORMS}"));
    };
    let port: u16 = port
        .parse()
        .map_err(|_| format!("{text:?}: {port:?} is not a port (0 to 65535); {LISTEN_FORMS}"))?;
    if host.is_empty() {
        return Ok(SocketAddr::from(([0, 0, 0, 0], port)));
    }
    // A host name: letters, digits, `-` and `.` (RFC 1123), at most 253 characters; anything
    // else (an IPv6 address without brackets, a typo) is refused before any lookup.
    let name_like = host.len() <= 253
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
    if !name_like {
        return Err(format!(
            "{text:?}: {host:?} is neither an IP address nor a host name (an IPv6 address goes \
             in brackets: [::1]:9445); {LISTEN_FORMS}"
        ));
    }
    let addresses: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("{text:?}: cannot resolve {host:?}: {e}"))?
        .collect();
    addresses
        .iter()
        .find(|a| a.is_ipv4())
        .or(addresses.first())
        .copied()
        .ok_or_else(|| format!("{text:?}: {host:?} resolves to no address"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const B: DurationBounds = DurationBounds {
        min: Duration::from_millis(10),
        max: Duration::from_secs(3600),
    };

    #[test]
    fn durations_take_bare_seconds_and_units() {
        for (text, want) in [
            ("2", Duration::from_secs(2)),
            ("0.25", Duration::from_millis(250)),
            ("500ms", Duration::from_millis(500)),
            ("2s", Duration::from_secs(2)),
            ("1m", Duration::from_secs(60)),
            ("1h", Duration::from_secs(3600)),
            ("1m30s", Duration::from_secs(90)),
            (" 10ms ", Duration::from_millis(10)),
        ] {
            assert_eq!(parse_duration(text, B), Ok(want), "{text}");
        }
    }

    /// `record --interval 18446744073709551615s` panicked (an `Instant` overflow).
    #[test]
    fn record_interval_of_u64_max_seconds_is_refused() {
        for text in [
            "18446744073709551615s",
            "18446744073709551615",
            "184467440737095516150000s",
            "1e300",
            "99999999999999999999h",
        ] {
            let e = parse_duration(text, RECORD_INTERVAL).unwrap_err();
            assert!(e.contains("between 10ms and 1h"), "{text}: {e}");
        }
    }

    #[test]
    fn durations_out_of_bounds_or_malformed_are_refused() {
        for text in ["0", "0s", "-1", "-1s", "-inf", "9ms", "1h1s", "3601"] {
            let e = parse_duration(text, B).unwrap_err();
            assert!(e.contains("between 10ms and 1h"), "{text}: {e}");
        }
        for text in ["", " ", "NaN", "inf", "fast", "1 parsec", "1.5.2", "1x"] {
            let e = parse_duration(text, B).unwrap_err();
            assert!(e.contains("500ms, 2s, 1m, 1h"), "{text:?}: {e}");
        }
    }

    #[test]
    fn sizes_are_bounded_by_one_pebibyte() {
        assert_eq!(parse_size("1PiB"), Ok(MAX_SIZE));
        assert_eq!(parse_size("4GiB"), Ok(4 << 30));
        for text in [
            "1025TiB",
            "18446744073709551615",
            "99999999999999999999999",
            "2PiB",
        ] {
            let e = parse_size(text).unwrap_err();
            assert!(
                e.contains("at most 1PiB") || e.contains("too large for 64 bits"),
                "{text}: {e}"
            );
        }
    }

    #[test]
    fn whole_numbers_are_bounded() {
        assert_eq!(parse_whole::<u32>("100", PERCENT), Ok(100));
        assert_eq!(parse_whole::<usize>("0", COUNT), Ok(0));
        for text in ["101", "18446744073709551616", "-1", "", "1.5", "NaN", "+1 "] {
            let e = parse_whole::<u32>(text, PERCENT).unwrap_err();
            assert!(e.contains("from 0 to 100"), "{text:?}: {e}");
        }
    }

    #[test]
    fn listen_takes_addresses_bare_ports_and_host_names() {
        for (text, want) in [
            ("127.0.0.1:9445", "127.0.0.1:9445"),
            ("[::1]:0", "[::1]:0"),
            (":9445", "0.0.0.0:9445"),
        ] {
            assert_eq!(parse_listen(text).unwrap().to_string(), want, "{text}");
        }
        let local = parse_listen("localhost:9445").unwrap();
        assert!(local.ip().is_loopback() && local.port() == 9445, "{local}");
        for (text, why) in [
            ("localhost", "has no port"),
            (":99999", "is not a port"),
            (":", "is not a port"),
            ("::1:9445", "an IPv6 address goes in brackets"),
            ("bad host:1", "neither an IP address nor a host name"),
            ("no-such-host.invalid:9445", "cannot resolve"),
        ] {
            let e = parse_listen(text).unwrap_err();
            assert!(
                e.contains(why) && e.contains(&format!("{text:?}")),
                "{text}: {e}"
            );
        }
    }

    proptest! {
        /// `:PORT` is every IPv4 address on that port; `ADDRESS:PORT` that address.
        #[test]
        fn listen_ports_and_addresses(port: u16, ip: [u8; 4]) {
            prop_assert_eq!(parse_listen(&format!(":{port}")), Ok(SocketAddr::from(([0, 0, 0, 0], port))));
            let ip = std::net::Ipv4Addr::from(ip);
            prop_assert_eq!(parse_listen(&format!("{ip}:{port}")), Ok(SocketAddr::from((ip, port))));
        }

        /// Numeric text (no name to look up) parses or is refused with a message that quotes it.
        #[test]
        fn listen_text_parses_or_is_refused_by_name(text in "[0-9:.\\[\\] ]{0,14}") {
            if let Err(message) = parse_listen(&text) {
                prop_assert!(message.contains(&format!("{text:?}")), "{}", message);
            }
        }

        /// Any text is a duration within the bounds or refused with a message; never a panic.
        #[test]
        fn any_text_is_a_bounded_duration_or_refused(text in "\\PC{0,16}") {
            if let Ok(d) = parse_duration(&text, B) {
                prop_assert!(B.min <= d && d <= B.max);
            }
        }

        /// Any number of any unit: within the bounds exactly when its value is.
        #[test]
        fn seconds_with_units_are_checked_against_the_bounds(
            n in 0u64..100_000_000, unit in prop::sample::select(vec![("ms", 1e-3), ("s", 1.0), ("m", 60.0), ("h", 3600.0)])
        ) {
            let secs = n as f64 * unit.1;
            let got = parse_duration(&format!("{n}{}", unit.0), B);
            prop_assert_eq!(got.is_ok(), (0.01..=3600.0).contains(&secs), "{:?}", got);
        }

        /// Any text either parses to the bytes human2bytes gives (at most 1PiB), or is refused
        /// with a message that quotes it.
        #[test]
        fn sizes_parse_or_name_the_bad_text(text in "\\PC{0,12}") {
            match parse_size(&text) {
                Ok(bytes) => {
                    prop_assert_eq!(Some(bytes), gpu_devices::units::human2bytes(&text).ok());
                    prop_assert!(bytes <= MAX_SIZE);
                }
                Err(message) => prop_assert!(message.contains(&format!("{text:?}")), "{}", message),
            }
        }
    }
}
