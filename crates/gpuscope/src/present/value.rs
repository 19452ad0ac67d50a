//! One formatter per value for gpuscope's own views (the snapshot table, the fleet's table and
//! viewer): N/A, counts, whole units, MiB, and the cells device tables share.

/// `n` and the word for one or for several: `1 host`, `2 hosts`, `0 hosts`.
pub(crate) fn counted(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The cells every device table shares (this machine's and the fleet's): temperature (`41C`),
/// fan (`30%`) and memory (`used / total` MiB), N/A for what is unknown.
pub(crate) fn device_cells(
    temperature: Option<u32>,
    fan: Option<u32>,
    used: Option<u64>,
    total: Option<u64>,
) -> [String; 3] {
    [
        na(temperature.map(|t| format!("{t}C"))),
        na(fan.map(|f| format!("{f}%"))),
        format!("{} / {}", mib(used), mib(total)),
    ]
}

/// A device's power cell, `draw / limit` in whole watts ([`whole`]); N/A when neither is known.
pub(crate) fn power_cell(usage: Option<f64>, limit: Option<f64>) -> String {
    match (usage, limit) {
        (None, None) => "N/A".to_string(),
        (u, l) => format!(
            "{} / {}",
            na(u.and_then(|w| whole(w, "W"))),
            na(l.and_then(|w| whole(w, "W")))
        ),
    }
}

/// A measure to the nearest whole unit, as it is: `612W`, `-5W`, and `1.0e308W` for one too
/// large to write out; `None` (N/A) for NaN and the infinities. Never clamped: a value the
/// readers let through is shown as what it is, not as `0W` or `18446744073709551615W`.
pub(crate) fn whole(v: f64, unit: &str) -> Option<String> {
    if !v.is_finite() {
        return None;
    }
    let v = v.round();
    Some(if v.abs() < 1e15 {
        // Rounded and below 2^53: the decimal text is the whole number, `-0` read as `0`.
        format!("{}{unit}", v + 0.0)
    } else {
        format!("{v:.1e}{unit}")
    })
}

/// A value for people, or N/A.
pub(crate) fn na<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "N/A".to_string(), |v| v.to_string())
}

/// Bytes in whole MiB, or N/A.
pub(crate) fn mib(bytes: Option<u64>) -> String {
    bytes.map_or_else(
        || "N/A".to_string(),
        |b| format!("{}MiB", b / (1024 * 1024)),
    )
}

#[cfg(test)]
mod tests {
    use super::{power_cell, whole};

    /// A power of -5 W showed `0W`, and 1e308 W `18446744073709551615W` (`as u64`).
    #[test]
    fn negative_or_huge_watts_are_shown_as_they_are_never_clamped() {
        assert_eq!(power_cell(Some(612.4), Some(700.0)), "612W / 700W");
        assert_eq!(power_cell(Some(-5.0), None), "-5W / N/A");
        assert_eq!(power_cell(Some(1e308), Some(f64::NAN)), "1.0e308W / N/A");
        assert_eq!(whole(-0.2, "W").as_deref(), Some("0W"));
        assert_eq!(whole(f64::INFINITY, "W"), None);
    }
}
