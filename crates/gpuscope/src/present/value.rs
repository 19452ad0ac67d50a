//! One formatter per value for gpuscope's own views (the snapshot table, the fleet's table and
//! viewer): N/A, counts, whole units, MiB, and the cells device tables share.
//!
//! MiB follow one rule, nvidia-smi 580's, since scripts compare gpuscope's numbers with its
//! (docs/snapshot.md, "How memory is counted"): frame-buffer memory (total, reserved, used,
//! free) counts a part of a MiB as a whole one ([`fb_mib`]); BAR1 memory and a process's
//! memory are rounded to the nearest, a half to the even one ([`nearest_mib`]). gpustat's own
//! view alone floors, as gpustat does ([`gpustat_mib`]).

/// `n` and the word for one or for several: `1 host`, `2 hosts`, `0 hosts`.
pub(crate) fn counted(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The cells every device table shares (this machine's and the fleet's): temperature (`41C`),
/// fan (`30%`) and memory (`used / total` MiB, [`fb_mib`]), N/A for what is unknown.
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

/// One mebibyte, in bytes.
pub(crate) const MIB: u64 = 1024 * 1024;

/// Frame-buffer memory (total, reserved, used, free) in MiB as nvidia-smi 580 counts it: a
/// part of a MiB is a whole one, where the nearest would print one less (docs/snapshot.md, "How
/// memory is counted", has the captures, with the memory standing still).
pub(crate) fn fb_mib(bytes: u64) -> u64 {
    bytes.div_ceil(MIB)
}

/// BAR1 memory and a process's memory in MiB, rounded to the nearest (a half to the even
/// one), as nvidia-smi prints them: it does not truncate (docs/snapshot.md has the captures).
pub(crate) fn nearest_mib(bytes: u64) -> u64 {
    let (q, r) = (bytes / MIB, bytes % MIB);
    if r > MIB / 2 || (r == MIB / 2 && q % 2 == 1) {
        q + 1
    } else {
        q
    }
}

/// MiB as gpustat 1.1.1 counts them (`bytes // MB`, a floor), for gpustat's own view and
/// document only: a script that reads gpustat's output compares it with gpustat's.
pub(crate) fn gpustat_mib(bytes: u64) -> u64 {
    bytes / MIB
}

/// Frame-buffer memory in whole MiB ([`fb_mib`]), `8721MiB`, or N/A.
pub(crate) fn mib(bytes: Option<u64>) -> String {
    bytes.map_or_else(|| "N/A".to_string(), |b| format!("{}MiB", fb_mib(b)))
}

/// A process's memory in whole MiB ([`nearest_mib`]), `3924MiB`, or N/A.
pub(crate) fn process_mib(bytes: Option<u64>) -> String {
    bytes.map_or_else(|| "N/A".to_string(), |b| format!("{}MiB", nearest_mib(b)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A power of -5 W showed `0W`, and 1e308 W `18446744073709551615W` (`as u64`).
    #[test]
    fn negative_or_huge_watts_are_shown_as_they_are_never_clamped() {
        assert_eq!(power_cell(Some(612.4), Some(700.0)), "612W / 700W");
        assert_eq!(power_cell(Some(-5.0), None), "-5W / N/A");
        assert_eq!(power_cell(Some(1e308), Some(f64::NAN)), "1.0e308W / N/A");
        assert_eq!(whole(-0.2, "W").as_deref(), Some("0W"));
        assert_eq!(whole(f64::INFINITY, "W"), None);
    }

    /// One moment, two numbers: at fixtures/h200-real.json's frame 24 the snapshot table said
    /// 8720 MiB used and `--query` 8721, nvidia-smi's.
    #[test]
    fn frame_buffer_memory_is_counted_as_nvidia_smi_counts_it_in_every_view() {
        assert_eq!(
            mib(Some(9_144_434_688)),
            "8721MiB",
            "H200 used, 8,720.81 MiB"
        );
        assert_eq!(
            fb_mib(140_965_445_632),
            134_436,
            "H200 free, 134,435.13 MiB"
        );
        assert_eq!(fb_mib(644_939_776), 616, "H200 reserved, 615.06 MiB");
        assert_eq!(fb_mib(77_926_170_624), 74_317, "H100 free, 74,316.19 MiB");
        assert_eq!(
            fb_mib(150_754_820_096),
            143_771,
            "a whole number of MiB stays"
        );
        assert_eq!(fb_mib(u64::MAX), u64::MAX / MIB + 1);
        assert_eq!(
            device_cells(None, None, Some(9_144_434_688), None)[2],
            "8721MiB / N/A"
        );
    }

    #[test]
    fn bar1_and_process_memory_are_rounded_to_the_nearest_as_nvidia_smi_does() {
        // Frame 47 of fixtures/h100-real.json, and what nvidia-smi -q printed then.
        assert_eq!(nearest_mib(85_520_809_984), 81559);
        assert_eq!(nearest_mib(503_316_480), 480);
        assert_eq!(nearest_mib(7_091_322_880), 6763);
        assert_eq!(nearest_mib(7_093_092_352), 6764, "a half goes to the even");
        assert_eq!(nearest_mib(MIB * 3 + MIB / 2), 4);
        assert_eq!(nearest_mib(MIB / 2 - 1), 0);
        assert_eq!(nearest_mib(u64::MAX), u64::MAX / MIB + 1);
        assert_eq!(process_mib(Some(MIB * 5 + MIB / 2 + 1)), "6MiB");
        assert_eq!(gpustat_mib(9_144_434_688), 8720, "gpustat floors");
    }
}
