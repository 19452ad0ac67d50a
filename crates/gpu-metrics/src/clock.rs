//! Time, injectable: the system clock in production, a clock stepped by hand in tests.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Where the collector and the recorder read the time.
///
/// Two readings: a monotonic one for durations and a wall-clock one for timestamps. Waiting
/// between samples always happens on real time; only what is *measured* comes from the clock,
/// so a test can step a [`ManualClock`] and know every duration exactly.
pub trait Clock: Send + Sync {
    /// Monotonic time since some fixed origin of this clock.
    fn elapsed(&self) -> Duration;
    /// Seconds since the Unix epoch.
    fn unix_time(&self) -> f64;
}

/// The real clock: [`Instant`] for durations, [`SystemTime`] for timestamps.
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    origin: Instant,
}

impl SystemClock {
    /// A clock whose origin is now.
    pub fn new() -> SystemClock {
        SystemClock {
            origin: Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock::new()
    }
}

impl Clock for SystemClock {
    fn elapsed(&self) -> Duration {
        self.origin.elapsed()
    }

    fn unix_time(&self) -> f64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64())
    }
}

/// A clock that moves only when told to. Clones share the same time.
#[derive(Debug, Clone)]
pub struct ManualClock {
    /// Nanoseconds since the origin.
    nanos: Arc<AtomicU64>,
    /// Unix time of the origin, seconds.
    unix_origin: f64,
}

impl ManualClock {
    /// A clock at its origin, which is `unix_origin` seconds after the Unix epoch.
    pub fn new(unix_origin: f64) -> ManualClock {
        ManualClock {
            nanos: Arc::new(AtomicU64::new(0)),
            unix_origin,
        }
    }

    /// Moves the clock on by `by`.
    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        self.nanos.fetch_add(by, Ordering::SeqCst);
    }

    /// Sets the time since the origin.
    pub fn set(&self, since_origin: Duration) {
        let t = u64::try_from(since_origin.as_nanos()).unwrap_or(u64::MAX);
        self.nanos.store(t, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::SeqCst))
    }

    fn unix_time(&self) -> f64 {
        self.unix_origin + self.elapsed().as_secs_f64()
    }
}
