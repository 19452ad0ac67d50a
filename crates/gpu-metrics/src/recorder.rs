//! gpulink's `MemoryRecorder`, generalised: one metric of every device over time, running
//! aggregates in constant memory, samples streamed to a file as they come.

use std::fmt;
use std::sync::Arc;

use gpu_devices::Device;
use serde::Serialize;

use crate::clock::{Clock, SystemClock};
use crate::error::Result;
use crate::sample::{DeviceLabel, DeviceMetric, Sample};
use crate::sink::SampleSink;
use crate::stats::Stats;

/// Which samples a [`Recorder`] keeps in memory (for plots and [`Record::samples`]).
///
/// The aggregates (min, mean, max, count) are always kept, in constant memory; the file sink,
/// if any, always gets every sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Every sample: 16 bytes per device per sample, growing without bound (at 1 Hz, 8 GPUs:
    /// 4.6 MB a day).
    All,
    /// At most this many points per device: when full, every other point is dropped and from
    /// then on every other sample is kept, so the points stay evenly spread over the whole
    /// recording (16 bytes per device per point, fixed). The default, with 2048 points.
    Bounded(usize),
    /// No samples; aggregates only.
    None,
}

impl Default for Keep {
    fn default() -> Self {
        Keep::Bounded(2048)
    }
}

/// What was recorded of one device (gpulink's record).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Record {
    /// The device.
    pub device: DeviceLabel,
    /// The metric.
    pub metric: DeviceMetric,
    /// The samples kept, `(elapsed seconds, value)`: all, an evenly spread subset, or none,
    /// as [`Keep`] says.
    pub samples: Vec<(f64, f64)>,
    /// Aggregates over every sample recorded (N/A readings left out).
    pub stats: Stats,
    /// The reference the value is measured against (the memory total), as last read.
    pub reference: Option<f64>,
    /// Number of samples recorded.
    pub len: u64,
    /// Seconds from the first to the last sample.
    pub duration: f64,
    /// Samples per second over the recording (0 with fewer than two samples).
    pub sampling_rate: f64,
}

impl Record {
    /// gpulink's summary line: `NVIDIA TITAN RTX[0] -> memory used: min=1729.236992[MB] /
    /// max=2315.79648[MB]` (memory in megabytes of 10^6 bytes; other metrics in their unit),
    /// numbers written as Python writes floats (`0.0`, `1e+16`), so output compared with
    /// gpulink's matches.
    pub fn summary(&self) -> String {
        let (scale, unit) = match self.metric {
            DeviceMetric::MemoryUsed => (1e6, "MB"),
            m => (1.0, m.unit()),
        };
        match self.stats.range() {
            Some((min, max)) => format!(
                "{} -> {}: min={}[{unit}] / max={}[{unit}]",
                self.device,
                self.metric.title(),
                python_float(min / scale),
                python_float(max / scale)
            ),
            None => format!("{} -> {}: N/A", self.device, self.metric.title()),
        }
    }

    /// The summary line in gpuscope's units, memory in the [`MemoryUnit`] of this record alone
    /// (other metrics with one decimal): `NVIDIA H100 80GB HBM3[0] -> memory used: min
    /// 17943MiB / mean 20112MiB / max 27524MiB (of 81559MiB)`. For several devices,
    /// [`human_summaries`] writes every line in one unit, the plot's.
    pub fn human_summary(&self) -> String {
        self.human_summary_in(MemoryUnit::for_records(std::slice::from_ref(self)))
    }

    /// [`Record::human_summary`] with memory in `unit`.
    pub fn human_summary_in(&self, unit: MemoryUnit) -> String {
        let human = |v: f64| match self.metric {
            DeviceMetric::MemoryUsed => unit.format(v),
            m => format!("{v:.1}{}", m.unit()),
        };
        let mut line = format!("{} -> {}: ", self.device, self.metric.title());
        match (self.stats.range(), self.stats.mean()) {
            (Some((min, max)), Some(mean)) => {
                line += &format!(
                    "min {} / mean {} / max {}",
                    human(min),
                    human(mean),
                    human(max)
                );
                if let Some(r) = self.reference {
                    line += &format!(" (of {})", human(r));
                }
            }
            _ => line += "N/A",
        }
        line
    }
}

/// The summary lines of `records` ([`Record::human_summary_in`]), memory in one unit for all of
/// them, the one the plot's axis uses ([`MemoryUnit::for_records`]).
pub fn human_summaries(records: &[Record]) -> Vec<String> {
    let unit = MemoryUnit::for_records(records);
    records.iter().map(|r| r.human_summary_in(unit)).collect()
}

/// The unit people read a memory recording in, chosen once for the whole recording from its
/// largest value (the memory total, where it is known) as gpuscope prints memory everywhere
/// (`gpu_devices::units::bytes2human`): MiB below 100 GiB, GiB from there (an H200's 141 GiB).
/// The summary ([`human_summaries`]) and the plot's axis (`plot`) use it, so they agree; the
/// CSV and NDJSON files keep bytes, as their header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryUnit {
    /// Mebibytes (2^20 bytes), whole: `17943MiB`.
    MiB,
    /// Gibibytes (2^30 bytes), two decimals: `141.05GiB`.
    GiB,
}

impl MemoryUnit {
    /// From this many bytes on, memory is shown in GiB: 100 GiB, as `bytes2human` switches.
    pub const GIB_FROM: f64 = 100.0 * 1024.0 * 1024.0 * 1024.0;

    /// The unit for values up to `max_bytes`.
    pub fn for_max(max_bytes: f64) -> MemoryUnit {
        if max_bytes >= Self::GIB_FROM {
            MemoryUnit::GiB
        } else {
            MemoryUnit::MiB
        }
    }

    /// The unit for the memory records among `records`: from the largest of their values (every
    /// sample, kept or not) and memory totals.
    pub fn for_records(records: &[Record]) -> MemoryUnit {
        let max = records
            .iter()
            .filter(|r| r.metric == DeviceMetric::MemoryUsed)
            .flat_map(|r| {
                r.samples
                    .iter()
                    .map(|p| p.1)
                    .chain(r.stats.range().map(|(_, max)| max))
                    .chain(r.reference)
            })
            .fold(0.0f64, f64::max);
        MemoryUnit::for_max(max)
    }

    /// Bytes in one of the unit.
    pub fn bytes(self) -> f64 {
        match self {
            MemoryUnit::MiB => 1024.0 * 1024.0,
            MemoryUnit::GiB => 1024.0 * 1024.0 * 1024.0,
        }
    }

    /// The unit's name: `MiB`, `GiB`.
    pub fn name(self) -> &'static str {
        match self {
            MemoryUnit::MiB => "MiB",
            MemoryUnit::GiB => "GiB",
        }
    }

    /// `bytes` in the unit: `17943MiB` (whole, rounded half to even as `bytes2human`),
    /// `141.05GiB`; a negative value (impossible memory) as 0.
    pub fn format(self, bytes: f64) -> String {
        let v = bytes.max(0.0) / self.bytes();
        match self {
            MemoryUnit::MiB => format!("{}MiB", v.round_ties_even() as u64),
            MemoryUnit::GiB => format!("{:.2}GiB", (v * 100.0).round_ties_even() / 100.0),
        }
    }
}

/// A float as Python's `repr` writes it: the shortest text that reads back to the same value
/// (as Rust's `Display`), but always with a decimal point or an exponent (`0.0`, `12.0`), and
/// in exponent form (`1e+16`, `1.5e-05`) outside 1e-4 to 1e16.
pub(crate) fn python_float(v: f64) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.into();
    }
    let a = v.abs();
    if a != 0.0 && !(1e-4..1e16).contains(&a) {
        // Rust: "1.5e-5"; Python: "1.5e-05".
        let text = format!("{v:e}");
        let (mantissa, exp) = text.split_once('e').unwrap_or((&text, "0"));
        let (sign, digits) = match exp.strip_prefix('-') {
            Some(d) => ('-', d),
            None => ('+', exp),
        };
        return format!("{mantissa}e{sign}{digits:0>2}");
    }
    let text = v.to_string();
    if text.contains('.') {
        text
    } else {
        text + ".0"
    }
}

impl fmt::Display for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let human = |v: f64| match self.metric {
            DeviceMetric::MemoryUsed => gpu_devices::units::bytes2human(v.max(0.0) as u64),
            m => format!("{v:.1}{}", m.unit()),
        };
        writeln!(f, "{} {}", self.device, self.metric.title())?;
        writeln!(
            f,
            "  samples: {} over {:.1}s ({:.2} per second)",
            self.len, self.duration, self.sampling_rate
        )?;
        match (self.stats.range(), self.stats.mean()) {
            (Some((min, max)), Some(mean)) => write!(
                f,
                "  min {} / mean {} / max {}",
                human(min),
                human(mean),
                human(max)
            )?,
            _ => write!(f, "  no readings")?,
        }
        if let Some(r) = self.reference {
            write!(f, " (of {})", human(r))?;
        }
        Ok(())
    }
}

struct Track {
    label: DeviceLabel,
    stats: Stats,
    reference: Option<f64>,
    points: Vec<(f64, f64)>,
}

/// Records one metric of every device over time (gpulink's `MemoryRecorder`).
///
/// Memory stays flat however long it runs: aggregates are running ones, the samples kept in
/// memory are bounded by [`Keep`], and each stored sample goes to the [`SampleSink`] (CSV or
/// NDJSON) as it is taken.
pub struct Recorder {
    devices: Vec<Device>,
    metric: DeviceMetric,
    clock: Arc<dyn Clock>,
    keep: Keep,
    sinks: Vec<Box<dyn SampleSink>>,
    tracks: Vec<Track>,
    /// Clock reading of the first stored sample.
    start: Option<std::time::Duration>,
    last_elapsed: f64,
    len: u64,
    /// With [`Keep::Bounded`]: keep one sample in `stride`.
    stride: u64,
}

impl fmt::Debug for Recorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Recorder")
            .field("metric", &self.metric)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl Recorder {
    /// A recorder of `metric` on `devices`, on the system clock, keeping [`Keep::default`].
    pub fn new(devices: Vec<Device>, metric: DeviceMetric) -> Recorder {
        let tracks = devices
            .iter()
            .map(|d| Track {
                label: DeviceLabel {
                    id: d.id(),
                    name: d.name().into_option().unwrap_or_else(|| "N/A".into()),
                },
                stats: Stats::default(),
                reference: None,
                points: Vec::new(),
            })
            .collect();
        Recorder {
            devices,
            metric,
            clock: Arc::new(SystemClock::new()),
            keep: Keep::default(),
            sinks: Vec::new(),
            tracks,
            start: None,
            last_elapsed: 0.0,
            len: 0,
            stride: 1,
        }
    }

    /// gpulink's `MemoryRecorder`: memory used of every physical device of `context`.
    pub fn memory(context: &gpu_devices::Context) -> Recorder {
        Recorder::new(context.devices(), DeviceMetric::MemoryUsed)
    }

    /// Reads time from `clock`.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Recorder {
        self.clock = clock;
        self
    }

    /// Keeps these samples in memory.
    pub fn keep(mut self, keep: Keep) -> Recorder {
        self.keep = keep;
        self
    }

    /// Streams every stored sample to `sink` (as well as to any sink given before), which first
    /// gets the header.
    ///
    /// # Errors
    ///
    /// Writing the header failed.
    pub fn with_sink(mut self, mut sink: Box<dyn SampleSink>) -> Result<Recorder> {
        let labels: Vec<DeviceLabel> = self.tracks.iter().map(|t| t.label.clone()).collect();
        sink.begin(&labels, self.metric)?;
        self.sinks.push(sink);
        Ok(self)
    }

    /// The devices, as recordings name them.
    pub fn labels(&self) -> Vec<DeviceLabel> {
        self.tracks.iter().map(|t| t.label.clone()).collect()
    }

    /// Number of samples stored so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True before the first stored sample.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Reads every device once. With `store`, the sample is added to the records and written to
    /// the sink; without, it is only returned (gpulink's `record(store=False)`).
    ///
    /// # Errors
    ///
    /// Writing to a sink failed (the sample is still in the records and went to the other
    /// sinks; a file sink is left with whole lines only). The first failure is returned.
    pub fn record(&mut self, store: bool) -> Result<Sample> {
        let now = self.clock.elapsed();
        let timestamp = self.clock.unix_time();
        let mut values = Vec::with_capacity(self.devices.len());
        let mut refs = Vec::with_capacity(self.devices.len());
        for d in &self.devices {
            let (v, r) = self.metric.read(d);
            values.push(v);
            refs.push(r);
        }
        let start = if store {
            *self.start.get_or_insert(now)
        } else {
            self.start.unwrap_or(now)
        };
        let sample = Sample {
            elapsed_s: now.saturating_sub(start).as_secs_f64(),
            timestamp,
            values,
        };
        if !store {
            return Ok(sample);
        }
        let keep_point = self.keep_point();
        for ((track, v), r) in self.tracks.iter_mut().zip(&sample.values).zip(refs) {
            if let Some(v) = *v {
                track.stats.add(v);
                if keep_point {
                    track.points.push((sample.elapsed_s, v));
                }
            }
            if r.is_some() {
                track.reference = r;
            }
        }
        self.len += 1;
        self.last_elapsed = sample.elapsed_s;
        // Every sink gets the sample even when another fails; the first failure is returned.
        let mut failed = None;
        for sink in &mut self.sinks {
            if let Err(e) = sink.write(&sample) {
                failed.get_or_insert(e);
            }
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(sample),
        }
    }

    /// Whether the next stored sample is kept in memory, thinning the points when full.
    fn keep_point(&mut self) -> bool {
        match self.keep {
            Keep::All => true,
            Keep::None => false,
            Keep::Bounded(max) => {
                if !self.len.is_multiple_of(self.stride) {
                    return false;
                }
                let max = max.max(2);
                if self.tracks.iter().any(|t| t.points.len() >= max) {
                    for t in &mut self.tracks {
                        let mut i = 0;
                        t.points.retain(|_| {
                            i += 1;
                            i % 2 == 1
                        });
                    }
                    self.stride *= 2;
                    return self.len.is_multiple_of(self.stride);
                }
                true
            }
        }
    }

    /// The records, one per device (gpulink's `get_records`).
    pub fn records(&self) -> Vec<Record> {
        let rate = if self.len > 1 && self.last_elapsed > 0.0 {
            (self.len - 1) as f64 / self.last_elapsed
        } else {
            0.0
        };
        self.tracks
            .iter()
            .map(|t| Record {
                device: t.label.clone(),
                metric: self.metric,
                samples: t.points.clone(),
                stats: t.stats,
                reference: t.reference,
                len: self.len,
                duration: self.last_elapsed,
                sampling_rate: rate,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::{python_float, MemoryUnit};
    use proptest::prelude::*;

    #[test]
    fn memory_is_read_in_mib_below_100_gib_and_in_gib_from_there() {
        let gib = 1024.0 * 1024.0 * 1024.0;
        // An H100 80GB: MiB, as bytes2human writes its total.
        let h100 = 85_520_809_984.0;
        assert_eq!(MemoryUnit::for_max(h100), MemoryUnit::MiB);
        assert_eq!(
            MemoryUnit::MiB.format(h100),
            gpu_devices::units::bytes2human(h100 as u64)
        );
        assert_eq!(MemoryUnit::MiB.format(500.0), "0MiB");
        assert_eq!(MemoryUnit::MiB.format(-1.0), "0MiB");
        // An H200 (141 GiB): GiB, as bytes2human writes it.
        let h200 = 150_754_820_096.0;
        assert_eq!(MemoryUnit::for_max(h200), MemoryUnit::GiB);
        assert_eq!(
            MemoryUnit::GiB.format(h200),
            gpu_devices::units::bytes2human(h200 as u64)
        );
        assert_eq!(MemoryUnit::for_max(100.0 * gib - 1.0), MemoryUnit::MiB);
        assert_eq!(MemoryUnit::for_max(100.0 * gib), MemoryUnit::GiB);
    }

    #[test]
    fn floats_are_written_as_python_writes_them() {
        // Each pair: the value, and what `repr(float)` gives in CPython 3.
        for (v, python) in [
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (12.0, "12.0"),
            (1729.236992, "1729.236992"),
            (2315.79648, "2315.79648"),
            (0.1, "0.1"),
            (1e-4, "0.0001"),
            (1.5e-5, "1.5e-05"),
            (1e16, "1e+16"),
            (1.25e22, "1.25e+22"),
            (9999999999999998.0, "9999999999999998.0"),
            (-3e-7, "-3e-07"),
            (1e-310, "1e-310"),
            (f64::INFINITY, "inf"),
            (f64::NAN, "nan"),
        ] {
            assert_eq!(python_float(v), python, "{v:?}");
        }
    }

    proptest! {
        #[test]
        fn a_python_float_reads_back_to_the_same_value(v in any::<f64>().prop_filter("finite", |v| v.is_finite())) {
            let text = python_float(v);
            prop_assert_eq!(text.parse::<f64>().unwrap().to_bits(), v.to_bits(), "{}", text);
            prop_assert!(text.contains('.') || text.contains('e'), "{}", text);
        }
    }
}
