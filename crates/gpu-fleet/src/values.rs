//! What the fleet accepts from outside: for each metric family it reads, the values a real GPU
//! can have. A sample outside them (a negative power, a temperature of a billion degrees, a
//! utilization of 250 %, `gpuscope_device_up` of 2 or NaN, a PID of -3) is a broken or hostile
//! exporter's: the value is N/A, with an [`OutOfRange`] note on its device that every output
//! shows as a warning, never clamped into a plausible number and never read as another state.
//!
//! The bounds are generous (a future GPU should not trip them) but physical: each is a few
//! times what the largest GPU sold has, so that a value beyond it is certainly not a reading.
//! [`RANGES`] is the one table; docs/security.md ("Values") shows it, and a test holds the two
//! together.

use serde::Serialize;

use gpu_export::names;

/// The values one family accepts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Range {
    /// The metric family.
    pub family: &'static str,
    /// The least value accepted.
    pub min: f64,
    /// The greatest value accepted.
    pub max: f64,
    /// Only whole numbers (`gpuscope_device_up`: 0 or 1, nothing between).
    pub whole: bool,
    /// The accepted values for people, with their unit: `0 to 10000 W`.
    pub shown: &'static str,
    /// Why these bounds.
    pub why: &'static str,
}

impl Range {
    /// Whether `v` is in the range: a finite number between `min` and `max`, whole if it must
    /// be. NaN and the infinities never are.
    pub fn accepts(&self, v: f64) -> bool {
        v.is_finite() && v >= self.min && v <= self.max && (!self.whole || v.fract() == 0.0)
    }
}

/// The most memory a device or a process is believed to have: 16 TiB, about 55 times the
/// largest GPU sold (288 GB of HBM).
pub const MAX_MEMORY_BYTES: f64 = (1u64 << 44) as f64;

/// The range of a utilization family: a share of the sample period, 0 to 1.
const fn share_of_sample_period(family: &'static str) -> Range {
    Range {
        family,
        min: 0.0,
        max: 1.0,
        whole: false,
        shown: "0 to 1 (0 to 100 %)",
        why: "a share of the sample period",
    }
}

/// The range of every family of values the fleet reads (`gpuscope_device_info` carries labels
/// only, and the sample-time family is judged by the host's staleness rules).
pub const RANGES: &[Range] = &[
    Range {
        family: names::DEVICE_UP,
        min: 0.0,
        max: 1.0,
        whole: true,
        shown: "0 or 1",
        why: "the exporter writes 1 (the GPU answers) or 0 (lost); anything else is not a state",
    },
    Range {
        family: names::DEVICE_MEMORY_TOTAL_BYTES,
        min: 0.0,
        max: MAX_MEMORY_BYTES,
        whole: false,
        shown: "0 to 16 TiB",
        why: "about 55 times the largest GPU's memory (288 GB)",
    },
    Range {
        family: names::DEVICE_MEMORY_USED_BYTES,
        min: 0.0,
        max: MAX_MEMORY_BYTES,
        whole: false,
        shown: "0 to 16 TiB, and at most the total",
        why: "as the total; with used or free above the total, or both together, all three are N/A (which one is wrong cannot be told)",
    },
    Range {
        family: names::DEVICE_MEMORY_FREE_BYTES,
        min: 0.0,
        max: MAX_MEMORY_BYTES,
        whole: false,
        shown: "0 to 16 TiB, and at most the total",
        why: "as used memory",
    },
    share_of_sample_period(names::DEVICE_UTILIZATION_RATIO),
    share_of_sample_period(names::DEVICE_MEMORY_BANDWIDTH_UTILIZATION_RATIO),
    Range {
        family: names::DEVICE_TEMPERATURE_CELSIUS,
        min: 0.0,
        max: 200.0,
        whole: false,
        shown: "0 to 200 °C",
        why: "NVML's reading is unsigned; GPUs shut down near 100 °C",
    },
    Range {
        family: names::DEVICE_FAN_SPEED_RATIO,
        min: 0.0,
        max: 2.0,
        whole: false,
        shown: "0 to 2 (0 to 200 %)",
        why: "NVML's fan speed is a share of the fan's rated speed and may exceed 100 %",
    },
    Range {
        family: names::DEVICE_POWER_USAGE_WATTS,
        min: 0.0,
        max: 10_000.0,
        whole: false,
        shown: "0 to 10000 W",
        why: "about 4 times the largest GPU module's draw (a GB200's 2,700 W)",
    },
    Range {
        family: names::DEVICE_POWER_LIMIT_WATTS,
        min: 0.0,
        max: 10_000.0,
        whole: false,
        shown: "0 to 10000 W",
        why: "as power draw",
    },
    Range {
        family: names::PROCESS_GPU_MEMORY_BYTES,
        min: 0.0,
        max: MAX_MEMORY_BYTES,
        whole: false,
        shown: "0 to 16 TiB",
        why: "as a device's memory",
    },
    share_of_sample_period(names::PROCESS_GPU_SM_UTILIZATION_RATIO),
];

/// What a process series' `pid` label must be: a whole number from 1 to 4294967295 written
/// plainly (digits only, no sign, no leading zero). A series with any other PID is left out,
/// with a note: a process has no identity without one.
pub const PID_SHOWN: &str = "1 to 4294967295, digits only";

/// The range of `family`, if the fleet reads values of it.
pub fn range(family: &str) -> Option<&'static Range> {
    RANGES.iter().find(|r| r.family == family)
}

/// A process's PID from its `pid` label; `None` when it is not [`PID_SHOWN`].
pub fn pid(text: &str) -> Option<u32> {
    let plain =
        !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) && !text.starts_with('0');
    plain.then(|| text.parse().ok()).flatten()
}

/// The most characters of a refused value kept in its note: enough for any number, little for
/// a hostile string.
pub const MAX_VALUE_CHARS: usize = 32;

/// A value a host sent that is out of its family's range (or a `pid` label that is no PID),
/// shown as N/A. Kept on its device, so that it travels with it (a later refresh that keeps a
/// host's devices keeps their notes), and counted there: at most
/// [`MAX_NOTES_PER_DEVICE`] per device.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct OutOfRange {
    /// The metric family.
    pub family: &'static str,
    /// The process, for a process family's value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// The label refused, when it is a label rather than the sample's value (`pid`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<&'static str>,
    /// What was sent, as sent (its first [`MAX_VALUE_CHARS`] characters).
    pub value: String,
    /// What the family accepts ([`Range::shown`], or [`PID_SHOWN`]).
    pub expected: &'static str,
}

/// The most notes a device keeps; beyond, only their number
/// (`FleetDevice::out_of_range_not_kept`).
pub const MAX_NOTES_PER_DEVICE: usize = 16;

/// `text` cut to [`MAX_VALUE_CHARS`] characters, `…` marking the cut.
pub fn kept_text(text: &str) -> String {
    match text.char_indices().nth(MAX_VALUE_CHARS) {
        None => text.to_string(),
        Some((end, _)) => format!("{}…", &text[..end]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{DEVICE_FAMILIES, PROCESS_FAMILIES};

    #[test]
    fn every_family_read_for_its_value_has_a_range() {
        let device = DEVICE_FAMILIES.iter().map(|(f, _)| *f);
        let process = PROCESS_FAMILIES.iter().map(|(f, _)| *f);
        for family in device.chain(process) {
            if family != names::DEVICE_INFO {
                assert!(range(family).is_some(), "{family}");
            }
        }
    }

    #[test]
    fn up_is_zero_or_one_and_nothing_else() {
        let up = range(names::DEVICE_UP).unwrap();
        let accepted: Vec<f64> = [0.0, 1.0, 2.0, -1.0, 0.5, f64::NAN, f64::INFINITY]
            .into_iter()
            .filter(|&v| up.accepts(v))
            .collect();
        assert_eq!(accepted, [0.0, 1.0]);
    }

    #[test]
    fn a_pid_is_a_plain_positive_whole_number() {
        for (text, pid) in [
            ("1", Some(1)),
            ("4242", Some(4242)),
            ("4294967295", Some(u32::MAX)),
            ("0", None),
            ("-3", None),
            ("+3", None),
            ("007", None),
            ("4294967296", None),
            ("3.0", None),
            ("", None),
            (" 3", None),
        ] {
            assert_eq!(super::pid(text), pid, "{text:?}");
        }
    }

    #[test]
    fn a_long_value_is_cut() {
        let long = "9".repeat(400);
        let kept = kept_text(&long);
        assert_eq!(kept.chars().count(), MAX_VALUE_CHARS + 1);
        assert!(kept.ends_with('…'));
        assert_eq!(kept_text("-5"), "-5");
    }
}
