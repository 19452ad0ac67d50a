//! What the sampler thread publishes and the HTTP server reads: the latest sample (encoded, and
//! gzipped, at most once per sample and form, on the first scrape that asks), when it was taken,
//! and whether the sampler is still alive. Health is judged from these alone, so a dead or stuck sampler turns
//! `/health` and `/metrics` to 503 instead of serving an old sample as if it were fresh.

use std::io::Write as _;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use flate2::write::GzEncoder;
use flate2::Compression;

use super::exposition::{encode_openmetrics, encode_text};
use super::families::{build, Family, Inputs, Options};

/// A sample older than this many intervals is stale.
pub const STALE_AFTER_INTERVALS: u32 = 3;

/// One sample, turned into families and encoded on demand: each format (and its gzipped form)
/// is made on the first scrape that asks for it and kept for the scrapes after, so a sample no
/// scrape asks for costs neither (Prometheus scrapes every 15 s or more; the exporter samples
/// every second).
#[derive(Debug)]
pub struct Exposition {
    inputs: Inputs,
    options: Arc<Options>,
    families: OnceLock<Arc<[Family]>>,
    /// When the sample was taken.
    pub taken: Instant,
    text: OnceLock<Bytes>,
    openmetrics: OnceLock<Result<Bytes, String>>,
    text_gzip: OnceLock<Bytes>,
    openmetrics_gzip: OnceLock<Result<Bytes, String>>,
}

impl Exposition {
    /// A sample of `inputs` taken at `taken`, published with `options`.
    pub fn new(inputs: Inputs, options: Arc<Options>, taken: Instant) -> Exposition {
        Exposition {
            inputs,
            options,
            families: OnceLock::new(),
            taken,
            text: OnceLock::new(),
            openmetrics: OnceLock::new(),
            text_gzip: OnceLock::new(),
            openmetrics_gzip: OnceLock::new(),
        }
    }

    /// The sample's families (built on the first call for this sample only).
    pub fn families(&self) -> &Arc<[Family]> {
        self.families
            .get_or_init(|| build(&self.inputs, &self.options).into())
    }

    /// The Prometheus text format 0.0.4 (encoded on the first call for this sample only).
    pub fn text(&self) -> Bytes {
        self.text
            .get_or_init(|| encode_text(self.families()).into_bytes().into())
            .clone()
    }

    /// OpenMetrics 1.0 (encoded on the first call for this sample only).
    ///
    /// # Errors
    ///
    /// Why prometheus-client could not encode the families.
    pub fn openmetrics(&self) -> Result<Bytes, String> {
        self.openmetrics
            .get_or_init(|| {
                encode_openmetrics(Arc::clone(self.families()))
                    .map(|t| t.into_bytes().into())
                    .map_err(|e| format!("cannot encode OpenMetrics text: {e}"))
            })
            .clone()
    }

    /// The text format, gzipped (compressed on the first call for this sample only).
    pub fn text_gzip(&self) -> Bytes {
        self.text_gzip.get_or_init(|| gzip(&self.text())).clone()
    }

    /// OpenMetrics, gzipped (compressed on the first call for this sample only).
    ///
    /// # Errors
    ///
    /// As [`Exposition::openmetrics`].
    pub fn openmetrics_gzip(&self) -> Result<Bytes, String> {
        self.openmetrics_gzip
            .get_or_init(|| self.openmetrics().map(|b| gzip(&b)))
            .clone()
    }
}

/// gzip at the default level: an 8-GPU exposition with 64 processes goes from about 160 KB to
/// under 10 KB.
pub fn gzip(data: &[u8]) -> Bytes {
    let mut e = GzEncoder::new(
        Vec::with_capacity(data.len() / 8 + 64),
        Compression::default(),
    );
    // Writing to a Vec cannot fail.
    let _ = e.write_all(data);
    e.finish().map(Bytes::from).unwrap_or_default()
}

/// Whether the served sample can be trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// The last sample is recent.
    Fresh,
    /// The last sample is older than [`STALE_AFTER_INTERVALS`] intervals.
    Stale(String),
    /// The sampler thread is gone.
    Stopped(String),
}

impl Health {
    /// The reason when not fresh.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Health::Fresh => None,
            Health::Stale(r) | Health::Stopped(r) => Some(r),
        }
    }

    /// Whether two states are the same kind (for logging once per change, not once per tick).
    pub fn same_kind(&self, other: &Health) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
    }
}

/// Judges a sample taken at `taken`, at time `now`, for a sampler that should sample every
/// `interval` and that has stopped with reason `stopped` (if it has).
pub fn judge(now: Instant, taken: Instant, interval: Duration, stopped: Option<&str>) -> Health {
    if let Some(why) = stopped {
        return Health::Stopped(format!("the sampler has stopped: {why}"));
    }
    let age = now.saturating_duration_since(taken);
    let limit = interval.saturating_mul(STALE_AFTER_INTERVALS);
    if age > limit {
        return Health::Stale(format!(
            "the last sample is {:.1} s old, more than {STALE_AFTER_INTERVALS} intervals of {}",
            age.as_secs_f64(),
            humantime::format_duration(interval)
        ));
    }
    Health::Fresh
}

/// Shared between the sampler thread and the server.
#[derive(Debug)]
pub struct Shared {
    latest: Mutex<Arc<Exposition>>,
    stopped: Mutex<Option<String>>,
    interval: Duration,
}

impl Shared {
    /// State with a first sample already taken.
    pub fn new(first: Exposition, interval: Duration) -> Shared {
        Shared {
            latest: Mutex::new(Arc::new(first)),
            stopped: Mutex::new(None),
            interval,
        }
    }

    /// Replaces the served sample.
    pub fn publish(&self, exposition: Exposition) {
        let next = Arc::new(exposition);
        *self.latest.lock().unwrap_or_else(|p| p.into_inner()) = next;
    }

    /// The served sample.
    pub fn latest(&self) -> Arc<Exposition> {
        self.latest
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Records that the sampler has stopped, and why.
    pub fn set_stopped(&self, why: String) {
        *self.stopped.lock().unwrap_or_else(|p| p.into_inner()) = Some(why);
    }

    /// The health of the served sample now.
    pub fn health(&self) -> Health {
        let taken = self.latest().taken;
        let stopped = self
            .stopped
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        judge(Instant::now(), taken, self.interval, stopped.as_deref())
    }

    /// The sampling interval.
    pub fn interval(&self) -> Duration {
        self.interval
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read as _;

    #[test]
    fn a_sample_within_three_intervals_is_fresh_and_older_is_stale() {
        let t0 = Instant::now();
        let i = Duration::from_secs(1);
        assert_eq!(
            judge(t0 + Duration::from_millis(2999), t0, i, None),
            Health::Fresh
        );
        assert_eq!(
            judge(t0 + Duration::from_secs(3), t0, i, None),
            Health::Fresh
        );
        let stale = judge(t0 + Duration::from_millis(3100), t0, i, None);
        assert!(matches!(stale, Health::Stale(_)), "{stale:?}");
        assert!(
            stale.reason().unwrap_or("").contains("3.1 s old"),
            "{stale:?}"
        );
    }

    #[test]
    fn a_stopped_sampler_is_unhealthy_even_with_a_fresh_sample() {
        let t0 = Instant::now();
        let h = judge(t0, t0, Duration::from_secs(1), Some("it panicked"));
        assert_eq!(
            h,
            Health::Stopped("the sampler has stopped: it panicked".into())
        );
    }

    /// A sample of the 8-GPU recording at frame 0, as the exporter's sampler takes it.
    fn sample() -> Exposition {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/h100-sxm-8gpu.json"
        );
        let collector = gpu_processes::ProcessCollector::from_fixture(path, Some(0)).unwrap();
        let inputs = Inputs {
            snapshots: collector.take_all(),
            machine: collector.host().machine(),
            host: collector.host().sample(),
            sample_duration_s: 0.001,
            sample_time_s: 1.0,
        };
        let options = Options {
            hostname: "box".into(),
            processes: true,
            process_command: false,
            nvlink_per_link: false,
            driver_version: None,
            cuda_driver_version: None,
        };
        Exposition::new(inputs, Arc::new(options), Instant::now())
    }

    #[test]
    fn each_form_is_encoded_once_and_gzip_decompresses_to_the_text() {
        let e = sample();
        let text = e.text();
        let text_str = std::str::from_utf8(&text).unwrap();
        // Every device of the recording, and its processes.
        for i in 0..8 {
            assert!(
                text_str.contains(&format!(
                    "gpuscope_device_up{{hostname=\"box\",index=\"{i}\""
                )),
                "GPU {i}"
            );
        }
        assert!(text_str.contains("gpuscope_process_gpu_memory_bytes{"));
        let gz = e.text_gzip();
        assert!(gz.len() < text.len() / 10, "{} bytes", gz.len());
        let mut back = Vec::new();
        flate2::read::GzDecoder::new(&gz[..])
            .read_to_end(&mut back)
            .unwrap();
        assert_eq!(back, text);
        // Later calls hand out the same buffers, not new encodings.
        assert_eq!(e.text().as_ptr(), text.as_ptr());
        assert_eq!(e.text_gzip().as_ptr(), gz.as_ptr());
        let om = e.openmetrics().unwrap();
        assert!(om.ends_with(b"# EOF\n"));
        assert_eq!(e.openmetrics().unwrap().as_ptr(), om.as_ptr());
        // Both formats carry the same samples.
        let count = |b: &[u8]| {
            b.split(|&c| c == b'\n')
                .filter(|l| !l.is_empty() && l[0] != b'#')
                .count()
        };
        assert_eq!(count(&text), count(&om));
    }
}
