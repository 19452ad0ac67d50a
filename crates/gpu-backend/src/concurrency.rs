//! Whether the driver runs NVML calls from several threads at once: measured on a backend
//! ([`measure`]), kept in a cost profile ([`crate::cost::CostProfile::concurrency`]), and
//! emulated by fake-nvml, so that a benchmark over the fake predicts what a GPU does with
//! gpuscope's parallel refresh.
//!
//! Nearly all of an NVML call's time is CPU of the calling thread, spent in the driver's
//! resource manager. What a single-threaded measurement cannot tell is whether two calls made
//! at the same time overlap or wait for each other. [`measure`] asks the same query
//! ([`PROBE_QUERY`]) on one thread, then on several threads of one device at once, then on one
//! thread per device at once, and [`ConcurrencyProbe::concurrency`] reads the three walls as
//! one of three behaviours ([`Concurrency`]).
//!
//! ```
//! use gpu_backend::concurrency::{Concurrency, ConcurrencyProbe};
//!
//! // Four threads of 8 calls on one GPU took four times one thread's 8 calls: they waited
//! // for each other; one thread per GPU on two GPUs took one thread's time: they did not.
//! let probe = ConcurrencyProbe {
//!     query: "max_clock".into(),
//!     calls: 8,
//!     threads: 4,
//!     one_thread_us: 8_000.0,
//!     threads_on_one_device_us: 32_100.0,
//!     devices: 2,
//!     one_thread_per_device_us: Some(8_300.0),
//! };
//! assert_eq!(probe.concurrency(), Some(Concurrency::PerDevice));
//! ```

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::backend::GpuBackend;
use crate::types::{ClockType, DeviceId};

/// How the driver runs NVML calls made at the same time from several threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Concurrency {
    /// Calls overlap, on one device and across devices: each thread pays its own call's cost.
    Parallel,
    /// Calls on one device wait for each other; calls on different devices overlap (a lock per
    /// GPU in the driver). Also what a one-GPU machine that serialises reads as, since it
    /// cannot tell a lock per GPU from one for all.
    PerDevice,
    /// Every call waits for the one in progress, whatever its device (one lock in the driver).
    Serial,
}

impl Concurrency {
    /// The name written in a cost profile: `parallel`, `per-device` or `serial`.
    pub fn as_str(self) -> &'static str {
        match self {
            Concurrency::Parallel => "parallel",
            Concurrency::PerDevice => "per-device",
            Concurrency::Serial => "serial",
        }
    }
}

impl std::fmt::Display for Concurrency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The query [`measure`] asks: a GPU's maximum graphics clock (`nvmlDeviceGetMaxClockInfo`),
/// which costs the driver about a millisecond of CPU a call on a Hopper GPU (long enough to
/// tell overlap from thread start-up) and changes nothing.
pub const PROBE_QUERY: &str = "max_clock";

/// What [`measure`] found: the walls of the same calls made one thread at a time and several
/// at once. Written into a cost profile as `concurrency_probe`, beside the verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConcurrencyProbe {
    /// The query asked ([`PROBE_QUERY`]).
    pub query: String,
    /// Calls each thread made.
    pub calls: u32,
    /// Threads asking device 0 at once in the second measure.
    pub threads: u32,
    /// Wall of `calls` calls on one thread, device 0, microseconds.
    pub one_thread_us: f64,
    /// Wall of `threads` threads making `calls` calls each on device 0 at once, microseconds.
    pub threads_on_one_device_us: f64,
    /// Devices asked at once in the third measure, one thread each (1: not measured, the
    /// machine has one GPU).
    pub devices: u32,
    /// Wall of one thread per device making `calls` calls each at once, microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_thread_per_device_us: Option<f64>,
}

/// A call shorter than this (microseconds) is too short to tell overlap from the cost of
/// starting threads: the probe then says nothing.
const SHORTEST_CALL_US: f64 = 20.0;

/// How much of the ideal overlap `n` workers of `one` microseconds each got when they took
/// `all` together: 1 when they took as long as one (fully parallel), 0 when they took `n`
/// times as long (one after another); clamped to 0..=1.
fn overlap(one: f64, all: f64, n: u32) -> f64 {
    if n < 2 || one.is_nan() || one <= 0.0 || !all.is_finite() {
        return 0.0;
    }
    let n = f64::from(n);
    ((n * one - all) / ((n - 1.0) * one)).clamp(0.0, 1.0)
}

impl ConcurrencyProbe {
    /// The behaviour the walls show, or `None` when they cannot tell (one thread, a call too
    /// cheap to measure, a wall that is not a number). Calls on one device that overlap at
    /// least half as much as they could are [`Concurrency::Parallel`]; otherwise calls on
    /// different devices that do are [`Concurrency::PerDevice`], and those that do not
    /// [`Concurrency::Serial`]. With one GPU, a serialising driver reads as
    /// [`Concurrency::PerDevice`].
    pub fn concurrency(&self) -> Option<Concurrency> {
        let calls = f64::from(self.calls.max(1));
        if self.threads < 2
            || !self.one_thread_us.is_finite()
            || self.one_thread_us / calls < SHORTEST_CALL_US
        {
            return None;
        }
        if overlap(
            self.one_thread_us,
            self.threads_on_one_device_us,
            self.threads,
        ) >= 0.5
        {
            return Some(Concurrency::Parallel);
        }
        match self.one_thread_per_device_us {
            Some(across) if self.devices >= 2 => {
                if overlap(self.one_thread_us, across, self.devices) >= 0.5 {
                    Some(Concurrency::PerDevice)
                } else {
                    Some(Concurrency::Serial)
                }
            }
            _ => Some(Concurrency::PerDevice),
        }
    }
}

/// Calls each thread makes in [`measure`].
const CALLS: u32 = 8;
/// Rounds of the three measures; the median of each is kept.
const ROUNDS: usize = 3;
/// The most threads (and devices) asked at once.
const MOST_THREADS: u32 = 8;

/// Measures whether `backend` runs calls from several threads at once (see [the
/// module](self)): [`PROBE_QUERY`] `CALLS` times on one thread, then on several threads of
/// GPU 0 at once (at most as many as this machine has CPUs, at most 4), then on one thread per
/// GPU at once (at most 8 GPUs, and as many CPUs), each three times (the medians are kept),
/// after one call on each GPU (a driver's first call of a function costs more than the
/// next). About 30 calls per thread: some 100 ms on a GPU whose call costs a millisecond.
/// `None` when there is no GPU or GPU 0 does not answer the query.
pub fn measure(backend: &dyn GpuBackend) -> Option<ConcurrencyProbe> {
    let gpus = backend.device_count().ok()?;
    if gpus == 0 {
        return None;
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cpus = u32::try_from(cpus).unwrap_or(u32::MAX);
    let threads = cpus.clamp(1, 4);
    let devices = gpus.min(cpus).min(MOST_THREADS);
    let ask = |index: u32| {
        backend
            .max_clock(DeviceId::Gpu(index), ClockType::Graphics)
            .is_ok()
    };
    // The first call of each device, untimed; GPU 0 must answer.
    if !ask(0) {
        return None;
    }
    (1..devices).for_each(|i| {
        ask(i);
    });
    let mut one = Vec::with_capacity(ROUNDS);
    let mut same = Vec::with_capacity(ROUNDS);
    let mut across = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        one.push(at_once(&[0], &ask));
        let zeros = vec![0; threads as usize];
        same.push(at_once(&zeros, &ask));
        if devices >= 2 {
            let each: Vec<u32> = (0..devices).collect();
            across.push(at_once(&each, &ask));
        }
    }
    Some(ConcurrencyProbe {
        query: PROBE_QUERY.into(),
        calls: CALLS,
        threads,
        one_thread_us: median_us(&mut one),
        threads_on_one_device_us: median_us(&mut same),
        devices: if devices >= 2 { devices } else { 1 },
        one_thread_per_device_us: (devices >= 2).then(|| median_us(&mut across)),
    })
}

/// The wall time of one thread per entry of `devices`, started together, each making
/// `CALLS` calls of `ask` on its device.
fn at_once(devices: &[u32], ask: &(dyn Fn(u32) -> bool + Sync)) -> Duration {
    let barrier = std::sync::Barrier::new(devices.len() + 1);
    std::thread::scope(|scope| {
        for &index in devices {
            let barrier = &barrier;
            scope.spawn(move || {
                barrier.wait();
                for _ in 0..CALLS {
                    ask(index);
                }
            });
        }
        // Started once every thread is ready to call; ended when the scope has joined them.
        barrier.wait();
        Instant::now()
    })
    .elapsed()
}

fn median_us(walls: &mut [Duration]) -> f64 {
    walls.sort();
    walls
        .get(walls.len() / 2)
        .map_or(f64::NAN, |d| d.as_secs_f64() * 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(one: f64, same: f64, devices: u32, across: Option<f64>) -> ConcurrencyProbe {
        ConcurrencyProbe {
            query: PROBE_QUERY.into(),
            calls: 8,
            threads: 4,
            one_thread_us: one,
            threads_on_one_device_us: same,
            devices,
            one_thread_per_device_us: across,
        }
    }

    #[test]
    fn the_walls_read_as_the_behaviour_that_makes_them() {
        use Concurrency::*;
        // Four threads on one GPU in one thread's time, or a little more.
        assert_eq!(probe(8000.0, 8500.0, 1, None).concurrency(), Some(Parallel));
        assert_eq!(
            probe(8000.0, 15000.0, 1, None).concurrency(),
            Some(Parallel)
        );
        // Four times one thread's time on one GPU: serialised; across GPUs it tells which.
        assert_eq!(
            probe(8000.0, 32000.0, 8, Some(9000.0)).concurrency(),
            Some(PerDevice)
        );
        assert_eq!(
            probe(8000.0, 32000.0, 8, Some(64000.0)).concurrency(),
            Some(Serial)
        );
        // One GPU cannot tell one lock per GPU from one for all.
        assert_eq!(
            probe(8000.0, 31000.0, 1, None).concurrency(),
            Some(PerDevice)
        );
        // Too cheap a call, or one thread, tells nothing.
        assert_eq!(probe(80.0, 320.0, 1, None).concurrency(), None);
        let mut one_thread = probe(8000.0, 8000.0, 1, None);
        one_thread.threads = 1;
        assert_eq!(one_thread.concurrency(), None);
        assert_eq!(probe(f64::NAN, 8000.0, 1, None).concurrency(), None);
    }

    #[test]
    fn overlap_is_one_for_parallel_and_zero_for_serial() {
        assert_eq!(overlap(10.0, 10.0, 4), 1.0);
        assert_eq!(overlap(10.0, 40.0, 4), 0.0);
        assert_eq!(overlap(10.0, 80.0, 4), 0.0, "clamped");
        assert!((overlap(10.0, 25.0, 4) - 0.5).abs() < 1e-9);
        assert_eq!(overlap(10.0, 10.0, 1), 0.0);
    }

    #[test]
    fn the_names_are_the_profile_s() {
        for c in [
            Concurrency::Parallel,
            Concurrency::PerDevice,
            Concurrency::Serial,
        ] {
            let json = serde_json::to_string(&c).unwrap();
            assert_eq!(json, format!("\"{c}\""));
            assert_eq!(serde_json::from_str::<Concurrency>(&json).unwrap(), c);
        }
    }
}
