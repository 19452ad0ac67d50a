//! What the sampler thread publishes and the HTTP server reads: the latest encoded sample (and
//! its gzipped forms, made at most once per sample), when it was taken, and whether the sampler
//! is still alive. Health is judged from these alone, so a dead or stuck sampler turns
//! `/health` and `/metrics` to 503 instead of serving an old sample as if it were fresh.

use std::io::Write as _;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use flate2::write::GzEncoder;
use flate2::Compression;

/// A sample older than this many intervals is stale.
pub const STALE_AFTER_INTERVALS: u32 = 3;

/// One encoded sample, in both formats; gzipped forms are made on first demand and kept.
#[derive(Debug)]
pub struct Exposition {
    /// Prometheus text format 0.0.4.
    pub text: Bytes,
    /// OpenMetrics 1.0.
    pub openmetrics: Bytes,
    /// When the sample was taken.
    pub taken: Instant,
    text_gzip: OnceLock<Bytes>,
    openmetrics_gzip: OnceLock<Bytes>,
}

impl Exposition {
    /// A sample taken at `taken`.
    pub fn new(text: Vec<u8>, openmetrics: Vec<u8>, taken: Instant) -> Exposition {
        Exposition {
            text: text.into(),
            openmetrics: openmetrics.into(),
            taken,
            text_gzip: OnceLock::new(),
            openmetrics_gzip: OnceLock::new(),
        }
    }

    /// The text format, gzipped (compressed on the first call for this sample only).
    pub fn text_gzip(&self) -> Bytes {
        self.text_gzip.get_or_init(|| gzip(&self.text)).clone()
    }

    /// OpenMetrics, gzipped (compressed on the first call for this sample only).
    pub fn openmetrics_gzip(&self) -> Bytes {
        self.openmetrics_gzip
            .get_or_init(|| gzip(&self.openmetrics))
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

    #[test]
    fn gzip_decompresses_to_the_same_bytes_and_is_made_once() {
        let text = "gpuscope_host_cpus{hostname=\"a\"} 8\n".repeat(1000);
        let e = Exposition::new(text.clone().into_bytes(), Vec::new(), Instant::now());
        let gz = e.text_gzip();
        assert!(gz.len() < text.len() / 10, "{} bytes", gz.len());
        let mut back = String::new();
        flate2::read::GzDecoder::new(&gz[..])
            .read_to_string(&mut back)
            .unwrap();
        assert_eq!(back, text);
        // The second call hands out the same buffer, not a new compression.
        assert_eq!(e.text_gzip().as_ptr(), gz.as_ptr());
    }
}
