//! What the sampler thread publishes and the HTTP server reads: the latest sample (an
//! [`Exposition`], encoded, and gzipped, at most once per sample and form, on the first scrape
//! that asks), when it was taken, and whether the sampler is still alive. Health is judged from
//! these alone, so a dead or stuck sampler turns `/health` and `/metrics` to 503 instead of
//! serving an old sample as if it were fresh.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::exposition::Exposition;

/// A sample older than this many intervals is stale.
pub const STALE_AFTER_INTERVALS: u32 = 3;

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

/// How old a sample may grow before it is stale: [`STALE_AFTER_INTERVALS`] intervals.
fn stale_after(interval: Duration) -> Duration {
    interval.saturating_mul(STALE_AFTER_INTERVALS)
}

/// Judges a sample taken at `taken`, at time `now`, for a sampler that should sample every
/// `interval` and that has stopped with reason `stopped` (if it has).
pub fn judge(now: Instant, taken: Instant, interval: Duration, stopped: Option<&str>) -> Health {
    if let Some(why) = stopped {
        return Health::Stopped(format!("the sampler has stopped: {why}"));
    }
    let age = now.saturating_duration_since(taken);
    if age > stale_after(interval) {
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
    /// Woken when the sampler stops, so that a watcher sleeping until the sample turns stale
    /// hears of it at once.
    stopping: tokio::sync::Notify,
    interval: Duration,
}

impl Shared {
    /// State with a first sample already taken.
    pub fn new(first: Exposition, interval: Duration) -> Shared {
        Shared {
            latest: Mutex::new(Arc::new(first)),
            stopped: Mutex::new(None),
            stopping: tokio::sync::Notify::new(),
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
        // A permit is kept when nobody waits yet: the next wait returns at once.
        self.stopping.notify_one();
    }

    /// When the served sample turns stale unless a newer one replaces it first.
    pub fn stale_at(&self) -> Instant {
        let taken = self.latest().taken;
        taken
            .checked_add(stale_after(self.interval))
            .unwrap_or(taken)
    }

    /// Returns once the sampler has stopped (at once when it stopped since the last call).
    pub async fn stopped(&self) {
        self.stopping.notified().await;
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
}
