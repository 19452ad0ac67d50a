//! Units and text helpers, as nvitop has them: bytes to human text and back, durations and
//! utilization rates.

use std::time::Duration;

use crate::na::{Na, NA_TEXT};

/// 1024 bytes.
pub const KIB: u64 = 1 << 10;
/// 1024 KiB.
pub const MIB: u64 = 1 << 20;
/// 1024 MiB.
pub const GIB: u64 = 1 << 30;
/// 1024 GiB.
pub const TIB: u64 = 1 << 40;
/// 1024 TiB.
pub const PIB: u64 = 1 << 50;

/// Bytes as nvitop prints them: `512B`, `12KiB`, `81559MiB` (below 100 GiB), `97.66GiB`
/// (below 100 TiB), `1.50TiB`. Rounding is to the nearest, ties to even, as Python's `round`.
///
/// ```
/// use gpu_devices::units::bytes2human;
/// assert_eq!(bytes2human(500), "500B");
/// assert_eq!(bytes2human(85_520_809_984), "81559MiB");
/// assert_eq!(bytes2human(200 * (1 << 30)), "200.00GiB");
/// ```
pub fn bytes2human(b: u64) -> String {
    bytes2human_min_unit(b, 1)
}

/// [`bytes2human`] that never uses a unit smaller than `min_unit` bytes (nvitop's `min_unit`):
/// `bytes2human_min_unit(500, MIB)` is `"0MiB"`.
pub fn bytes2human_min_unit(b: u64, min_unit: u64) -> String {
    let ratio = |unit: u64| b as f64 / unit as f64;
    if b < KIB && min_unit < KIB {
        format!("{b}B")
    } else if b < MIB && min_unit <= KIB {
        format!("{}KiB", ratio(KIB).round_ties_even() as u64)
    } else if b < 100 * GIB && min_unit <= MIB {
        format!("{}MiB", ratio(MIB).round_ties_even() as u64)
    } else if b < 100 * TIB && min_unit <= GIB {
        format!("{:.2}GiB", round2(ratio(GIB)))
    } else if b < 100 * PIB && min_unit <= TIB {
        format!("{:.2}TiB", round2(ratio(TIB)))
    } else {
        format!("{:.2}PiB", round2(ratio(PIB)))
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round_ties_even() / 100.0
}

/// [`bytes2human`] of a value that may be N/A.
pub fn na_bytes2human(b: &Na<u64>) -> Na<String> {
    b.clone().map(bytes2human)
}

/// A size text that [`human2bytes`] could not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot convert {text:?} to bytes: {reason}")]
pub struct ParseSizeError {
    /// The text as given.
    pub text: String,
    /// What was wrong with it.
    pub reason: &'static str,
}

/// A human size text to bytes, case-insensitively, as nvitop's `human2bytes`: a number with an
/// optional fraction, then an optional unit: `B`, decimal `K`/`KB` (1000) up to `P`/`PB`, binary
/// `Ki`/`KiB` (1024) up to `Pi`/`PiB`. Spaces around the number and unit, and a leading `+`, are
/// allowed. A fraction is truncated to whole bytes. The arithmetic is exact (no floating point).
///
/// ```
/// use gpu_devices::units::human2bytes;
/// assert_eq!(human2bytes("500B").unwrap(), 500);
/// assert_eq!(human2bytes("10k").unwrap(), 10_000);
/// assert_eq!(human2bytes("10ki").unwrap(), 10_240);
/// assert_eq!(human2bytes("1M").unwrap(), 1_000_000);
/// assert_eq!(human2bytes("1MiB").unwrap(), 1_048_576);
/// assert_eq!(human2bytes("1.5GiB").unwrap(), 1_610_612_736);
/// assert!(human2bytes("lots").is_err());
/// ```
///
/// # Errors
///
/// [`ParseSizeError`], naming the text, when it is not of that form or does not fit in a `u64`.
pub fn human2bytes(text: &str) -> Result<u64, ParseSizeError> {
    let fail = |reason| ParseSizeError {
        text: text.to_string(),
        reason,
    };
    let mut rest = text.trim();
    if let Some(r) = rest.strip_prefix('+') {
        rest = r.trim_start();
    }
    let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
    if int_len == 0 {
        return Err(fail("expected a number"));
    }
    let (int_part, mut rest) = rest.split_at(int_len);
    let mut frac_part = "";
    if let Some(r) = rest.strip_prefix('.') {
        let frac_len = r.bytes().take_while(u8::is_ascii_digit).count();
        if frac_len == 0 {
            return Err(fail("expected digits after the decimal point"));
        }
        frac_part = &r[..frac_len];
        rest = &r[frac_len..];
    }
    let unit = unit_bytes(rest.trim()).ok_or_else(|| fail("unknown unit"))?;

    let too_big = || fail("too large for 64 bits");
    let int: u128 = int_part.parse().map_err(|_| too_big())?;
    let mut total = int.checked_mul(unit as u128).ok_or_else(too_big)?;
    // Digits beyond the 20th cannot change a whole number of bytes below 2^64 * 1000^5.
    let frac = &frac_part[..frac_part.len().min(20)];
    if !frac.is_empty() {
        let numerator: u128 = frac.parse().map_err(|_| too_big())?;
        let denominator = 10u128.pow(frac.len() as u32);
        total += numerator * unit as u128 / denominator;
    }
    u64::try_from(total).map_err(|_| too_big())
}

/// The number of bytes a unit stands for; `None` if it is not one.
fn unit_bytes(unit: &str) -> Option<u64> {
    let u = unit.to_ascii_uppercase();
    let u = u.strip_suffix('B').unwrap_or(&u);
    let (prefix, binary) = match u.strip_suffix('I') {
        Some(p) => (p, true),
        None => (u, false),
    };
    let power = match prefix {
        "" if !binary => 0,
        "K" => 1,
        "M" => 2,
        "G" => 3,
        "T" => 4,
        "P" => 5,
        _ => return None,
    };
    Some(if binary {
        1u64 << (10 * power)
    } else {
        1000u64.pow(power)
    })
}

/// A duration as nvitop prints running times: `m:ss` below an hour, `h:mm:ss` below four days,
/// `N.N days` from four days on.
///
/// ```
/// use std::time::Duration;
/// use gpu_devices::units::timedelta2human;
/// assert_eq!(timedelta2human(Duration::from_secs(65)), "1:05");
/// assert_eq!(timedelta2human(Duration::from_secs(3 * 3600 + 7)), "3:00:07");
/// assert_eq!(timedelta2human(Duration::from_secs(5 * 86400 + 43200)), "5.5 days");
/// ```
pub fn timedelta2human(d: Duration) -> String {
    timedelta2human_with(d, false)
}

/// [`timedelta2human`] that, with `round`, prints days from one day on (nvitop's `round=True`).
pub fn timedelta2human_with(d: Duration, round: bool) -> String {
    let secs = d.as_secs();
    let days = secs / 86400;
    if days >= 4 || (round && days >= 1) {
        return format!("{:.1} days", days as f64 + (secs % 86400) as f64 / 86400.0);
    }
    let (hours, seconds) = (secs / 3600, secs % 3600);
    if hours > 0 {
        format!("{hours}:{:02}:{:02}", seconds / 60, seconds % 60)
    } else {
        format!("{}:{:02}", seconds / 60, seconds % 60)
    }
}

/// A utilization rate as text: whole numbers as `44%`, fractions as `44.5%`, N/A as `N/A`
/// (nvitop's `utilization2string`).
///
/// ```
/// use gpu_devices::{units::utilization2string, Na};
/// assert_eq!(utilization2string(44u32), "44%");
/// assert_eq!(utilization2string(44.25f64), "44.2%");
/// assert_eq!(utilization2string(Na::<u32>::NotAvailable), "N/A");
/// ```
pub fn utilization2string(utilization: impl UtilizationText) -> String {
    utilization.utilization_text()
}

/// Values [`utilization2string`] accepts.
pub trait UtilizationText {
    /// The text.
    fn utilization_text(&self) -> String;
}

macro_rules! whole_utilization {
    ($($t:ty),*) => {$(
        impl UtilizationText for $t {
            fn utilization_text(&self) -> String {
                format!("{self}%")
            }
        }
    )*};
}
whole_utilization!(u8, u16, u32, u64, i32, i64);

impl UtilizationText for f64 {
    fn utilization_text(&self) -> String {
        if self.is_finite() {
            format!("{self:.1}%")
        } else {
            NA_TEXT.to_string()
        }
    }
}

impl UtilizationText for f32 {
    fn utilization_text(&self) -> String {
        f64::from(*self).utilization_text()
    }
}

impl<T: UtilizationText> UtilizationText for Option<T> {
    fn utilization_text(&self) -> String {
        match self {
            Some(v) => v.utilization_text(),
            None => NA_TEXT.to_string(),
        }
    }
}

impl<T: UtilizationText> UtilizationText for Na<T> {
    fn utilization_text(&self) -> String {
        match self {
            Na::Value(v) => v.utilization_text(),
            _ => NA_TEXT.to_string(),
        }
    }
}

impl<T: UtilizationText + ?Sized> UtilizationText for &T {
    fn utilization_text(&self) -> String {
        (**self).utilization_text()
    }
}

/// "12.2" for 12020, "12.2.1" for 12021.
pub(crate) fn cuda_version_text(v: i32) -> String {
    let (major, minor, rev) = (v / 1000, (v % 1000) / 10, v % 10);
    if rev == 0 {
        format!("{major}.{minor}")
    } else {
        format!("{major}.{minor}.{rev}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuda_versions_print_like_nvitop() {
        assert_eq!(cuda_version_text(12020), "12.2");
        assert_eq!(cuda_version_text(12021), "12.2.1");
        assert_eq!(cuda_version_text(13010), "13.1");
    }

    #[test]
    fn human2bytes_reads_every_example_of_nvitop() {
        for (text, bytes) in [
            ("500B", 500),
            ("10k", 10_000),
            ("10ki", 10_240),
            ("1M", 1_000_000),
            ("1MiB", 1_048_576),
            ("1.5GiB", 1_610_612_736),
        ] {
            assert_eq!(human2bytes(text), Ok(bytes), "{text}");
        }
    }

    #[test]
    fn human2bytes_reads_other_forms() {
        for (text, bytes) in [
            ("0", 0),
            ("  +  7 kb ", 7000),
            ("3 GIB", 3 * GIB),
            ("2pi", 2 * PIB),
            ("1.9999B", 1),
            ("8GiB", 8 * GIB),
            ("18446744073709551615", u64::MAX),
        ] {
            assert_eq!(human2bytes(text), Ok(bytes), "{text}");
        }
    }

    #[test]
    fn human2bytes_names_the_text_it_cannot_read() {
        for text in [
            "",
            "lots",
            "1.",
            ".5G",
            "-1",
            "1 2",
            "5XB",
            "1iB",
            "1 KiBB",
            "99999999999999999999999",
            "20000P",
        ] {
            let err = human2bytes(text).unwrap_err();
            assert_eq!(err.text, text);
            assert!(err.to_string().contains(&format!("{text:?}")), "{err}");
        }
    }

    #[test]
    fn bytes2human_uses_nvitops_units() {
        for (b, text) in [
            (0, "0B"),
            (1023, "1023B"),
            (1024, "1KiB"),
            (1536, "2KiB"),
            (MIB, "1MiB"),
            // The seed: memory_free() 11550654464 is memory_free_human() "11016MiB".
            (11_550_654_464, "11016MiB"),
            (100 * GIB - 1, "102400MiB"),
            (100 * GIB, "100.00GiB"),
            (100 * TIB, "100.00TiB"),
            (100 * PIB, "100.00PiB"),
        ] {
            assert_eq!(bytes2human(b), text, "{b}");
        }
        assert_eq!(bytes2human_min_unit(500, MIB), "0MiB");
        assert_eq!(bytes2human_min_unit(GIB, GIB), "1.00GiB");
    }

    #[test]
    fn timedelta2human_switches_to_days() {
        assert_eq!(timedelta2human(Duration::from_secs(0)), "0:00");
        assert_eq!(timedelta2human(Duration::from_secs(3599)), "59:59");
        assert_eq!(timedelta2human(Duration::from_secs(3600)), "1:00:00");
        assert_eq!(
            timedelta2human(Duration::from_secs(4 * 86400 - 1)),
            "95:59:59"
        );
        assert_eq!(timedelta2human(Duration::from_secs(4 * 86400)), "4.0 days");
        assert_eq!(
            timedelta2human_with(Duration::from_secs(86400 + 8640), true),
            "1.1 days"
        );
    }
}

/// igpu's memory view (`gpu.memory.total`, `.used`, `.free`, `.unit`): mebibytes as floats,
/// with the unit they are in, beside the bytes every other accessor gives; code ported from
/// igpu keeps its arithmetic and its unit. From [`crate::Device::memory_mib`] (or a
/// snapshot's).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct MemoryMib {
    /// Total memory, MiB.
    pub total: f64,
    /// Used memory, MiB.
    pub used: f64,
    /// Free memory, MiB.
    pub free: f64,
    /// `"MiB"`.
    pub unit: &'static str,
}

impl MemoryMib {
    /// The view of these byte counts.
    pub fn from_bytes(total: u64, used: u64, free: u64) -> MemoryMib {
        let mib = |b: u64| b as f64 / MIB as f64;
        MemoryMib {
            total: mib(total),
            used: mib(used),
            free: mib(free),
            unit: "MiB",
        }
    }
}

/// igpu's power view (`gpu.power.draw`, `.limit`, `.min_limit`, `.max_limit`): watts as
/// floats with their unit, beside the milliwatts every other accessor gives (`power_usage`,
/// `power_limit`). From [`crate::Device::power_watts`] (or a snapshot's).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PowerWatts {
    /// Whether power management is on: igpu's `management` ("Supported" when on).
    pub management: Na<bool>,
    /// Power draw, W.
    pub draw: Na<f64>,
    /// The power-management limit, W.
    pub limit: Na<f64>,
    /// The lowest the limit may be set to, W.
    pub min_limit: Na<f64>,
    /// The highest the limit may be set to, W.
    pub max_limit: Na<f64>,
    /// `"W"`.
    pub unit: &'static str,
}

/// Milliwatts as watts.
pub(crate) fn watts(mw: Na<u32>) -> Na<f64> {
    mw.map(|mw| f64::from(mw) / 1000.0)
}
