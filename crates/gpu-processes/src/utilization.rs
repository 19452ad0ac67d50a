//! Per-process utilization: each process's newest sample, counted by that process's own
//! timestamps, kept for [`SAMPLE_MAX_AGE`].

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use gpu_backend::{DeviceId, ProcessUtilizationSample};

use crate::process::ProcessUtilization;

/// How long a process shows the values of its newest utilization sample while no newer one
/// comes: 15 s. Past it the values are N/A (the sample's time and age are still given).
///
/// NVML samples each process at its own pace: a light process beside a busy job can keep the
/// same newest sample for seconds before the next one comes, while the job's advances every
/// second (up to 7.8 s in the real recording `fixtures/h100-real.json`, which
/// `tests/it/real_h100_utilization.rs` replays; docs/snapshot-json.md). 15 s is about twice that
/// stand-still, so a process that is still sampled keeps a value, while one
/// that stopped being sampled (NVML samples only processes that did something) turns N/A
/// after 15 s instead of showing old figures for ever.
pub const SAMPLE_MAX_AGE: Duration = Duration::from_secs(15);

/// A sample stamped this long before its process started (by the host's start time, whole
/// seconds, read from a clock that may differ from the driver's by a second) is not counted
/// for it: it belongs to an earlier process that had the same PID.
const START_SLACK_US: u64 = 2_000_000;

/// A process on a device, as [`UtilizationTracker::update`] needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrackedProcess {
    /// Its PID.
    pub pid: u32,
    /// When it started, seconds since the Unix epoch, as the host tells it; `None` when the
    /// host cannot tell. A PID whose start time changes is a new process.
    pub start_time_s: Option<u64>,
}

/// The newest sample kept for one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Kept {
    start_time_s: Option<u64>,
    timestamp_us: u64,
    values: [u32; 4],
}

/// Keeps, per device and process, the newest per-process utilization sample seen, so that a
/// process's figures come from its own samples, whatever the pace of the others.
///
/// The rule, per refresh of a device ([`UtilizationTracker::update`]):
///
/// - Samples are counted by their own process: a sample replaces the one kept for its PID
///   when its timestamp is at least as new (a sample of the same timestamp is the driver's
///   newer word on it). Samples of other processes, newer or older, change nothing. Samples
///   over 100 % are dropped, as are samples of PIDs not on the device's process list.
/// - A process shows the values of its kept sample while that sample is at most
///   [`SAMPLE_MAX_AGE`] old, with the sample's time and age
///   ([`ProcessUtilization::sample_age_ms`]); older, or with no sample yet, its values are N/A.
///   The age only grows while the sample stands still, so a process does not flip between a
///   value and N/A from one refresh to the next.
/// - A PID no longer on the device's list is forgotten, so memory does not grow with processes
///   that ended; a PID whose start time changed is a new process and starts with nothing; a
///   sample stamped (by more than 2 s) before its process started is an earlier process's.
///
/// The backend is asked for every sample the driver holds (the device snapshot asks with a
/// "last seen" timestamp of 0). Asking NVML for samples newer than the newest seen on the
/// device would hide, at the driver already, a slow process's sample stamped before a faster
/// process's newest.
#[derive(Debug, Default)]
pub struct UtilizationTracker {
    kept: Mutex<HashMap<DeviceId, HashMap<u32, Kept>>>,
}

impl UtilizationTracker {
    /// A tracker that has seen nothing.
    pub fn new() -> UtilizationTracker {
        UtilizationTracker::default()
    }

    /// The per-process utilization of `device`'s `processes` (its process list now), from
    /// `samples` (what the driver answered) and the samples kept from earlier refreshes, with
    /// ages measured to `now_unix_ms` (the host's "now", milliseconds since the Unix epoch).
    /// Every process listed is in the answer; one without a sample has every field `None`.
    /// Processes that are not listed are forgotten.
    pub fn update(
        &self,
        device: DeviceId,
        samples: &[ProcessUtilizationSample],
        processes: &[TrackedProcess],
        now_unix_ms: u64,
    ) -> HashMap<u32, ProcessUtilization> {
        let mut all = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        let kept = all.entry(device).or_default();
        let listed: HashMap<u32, Option<u64>> =
            processes.iter().map(|p| (p.pid, p.start_time_s)).collect();
        // Forget processes that ended, and a PID now held by a process started at another time.
        kept.retain(|pid, k| match listed.get(pid) {
            None => false,
            Some(&start) => match (start, k.start_time_s) {
                (Some(now), Some(then)) => now == then,
                _ => true,
            },
        });
        for s in samples {
            let values = [s.sm, s.memory, s.encoder, s.decoder];
            if values.iter().any(|&v| v > 100) {
                continue;
            }
            let Some(&start_time_s) = listed.get(&s.pid) else {
                continue;
            };
            let before_start = start_time_s.is_some_and(|start| {
                s.timestamp_us.saturating_add(START_SLACK_US) < start.saturating_mul(1_000_000)
            });
            if before_start {
                continue;
            }
            let newer = kept
                .get(&s.pid)
                .is_none_or(|k| k.timestamp_us <= s.timestamp_us);
            if newer {
                kept.insert(
                    s.pid,
                    Kept {
                        start_time_s,
                        timestamp_us: s.timestamp_us,
                        values,
                    },
                );
            }
        }
        let max_age_ms = u64::try_from(SAMPLE_MAX_AGE.as_millis()).unwrap_or(u64::MAX);
        processes
            .iter()
            .map(|p| {
                let util = kept
                    .get(&p.pid)
                    .map_or_else(ProcessUtilization::default, |k| {
                        let age_ms = now_unix_ms.saturating_sub(k.timestamp_us / 1000);
                        let value = |v: u32| Some(v).filter(|_| age_ms <= max_age_ms);
                        ProcessUtilization {
                            sm: value(k.values[0]),
                            memory: value(k.values[1]),
                            encoder: value(k.values[2]),
                            decoder: value(k.values[3]),
                            sample_time_us: Some(k.timestamp_us),
                            sample_age_ms: Some(age_ms),
                        }
                    });
                (p.pid, util)
            })
            .collect()
    }

    /// How many processes have a sample kept, over every device: what the tracker holds.
    pub fn kept(&self) -> usize {
        let all = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        all.values().map(HashMap::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GPU: DeviceId = DeviceId::Gpu(0);
    /// A refresh's "now": 2026-11-24T14:02:41Z, in ms.
    const NOW_MS: u64 = 1_795_528_961_000;

    fn sample(pid: u32, t_us: u64, sm: u32) -> ProcessUtilizationSample {
        ProcessUtilizationSample {
            pid,
            timestamp_us: t_us,
            sm,
            memory: 1,
            encoder: 0,
            decoder: 0,
        }
    }

    fn procs(pids: &[u32]) -> Vec<TrackedProcess> {
        pids.iter()
            .map(|&pid| TrackedProcess {
                pid,
                start_time_s: None,
            })
            .collect()
    }

    /// A sample taken `s` seconds before NOW_MS, in µs.
    fn ago(s: f64) -> u64 {
        NOW_MS * 1000 - (s * 1e6) as u64
    }

    #[test]
    fn the_newest_sample_of_each_process_counts_and_bad_samples_are_dropped() {
        let t = UtilizationTracker::new();
        let got = t.update(
            GPU,
            &[
                sample(10, ago(2.0), 40),
                sample(10, ago(1.0), 55), // the newest sample of pid 10 counts
                sample(11, ago(1.0), 101), // over 100%: dropped
                sample(12, ago(0.5), 7),
                sample(13, ago(0.5), 9), // not on the list: dropped
            ],
            &procs(&[10, 11, 12]),
            NOW_MS,
        );
        assert_eq!(got.len(), 3, "every listed process is answered");
        assert_eq!(got[&10].sm, Some(55));
        assert_eq!(got[&10].sample_age_ms, Some(1000));
        assert_eq!(got[&10].sample_time_us, Some(ago(1.0)));
        assert_eq!(got[&12].sm, Some(7));
        assert_eq!(got[&11], ProcessUtilization::default());
        assert_eq!(t.kept(), 2);
    }

    /// Regression: with one "newest seen" per device, a process whose samples come less often
    /// than another's always looked old and showed N/A.
    #[test]
    fn a_slow_process_keeps_its_value_beside_a_fast_one() {
        let t = UtilizationTracker::new();
        let both = procs(&[512, 541]);
        // The slow process's sample is older than the fast one's, at every refresh.
        let first = t.update(
            GPU,
            &[sample(541, ago(3.0), 3), sample(512, ago(0.5), 95)],
            &both,
            NOW_MS,
        );
        assert_eq!((first[&512].sm, first[&541].sm), (Some(95), Some(3)));
        for i in 1..=5u64 {
            let now = NOW_MS + i * 1000;
            let fast = (now - 500) * 1000;
            let got = t.update(
                GPU,
                &[sample(541, ago(3.0), 3), sample(512, fast, 96)],
                &both,
                now,
            );
            assert_eq!(got[&512].sm, Some(96));
            assert_eq!(got[&541].sm, Some(3), "refresh {i}");
            assert_eq!(got[&541].sample_age_ms, Some(3000 + i * 1000));
        }
    }

    #[test]
    fn a_sample_that_stands_still_keeps_its_value_until_it_is_too_old_then_a_new_one_counts() {
        let t = UtilizationTracker::new();
        let one = procs(&[7]);
        let stamp = ago(0.0);
        let max_s = SAMPLE_MAX_AGE.as_secs();
        let mut shown = Vec::new();
        // One refresh a second; the driver answers the same sample for max_s + 3 refreshes.
        for i in 0..=max_s + 3 {
            let got = t.update(GPU, &[sample(7, stamp, 60)], &one, NOW_MS + i * 1000);
            assert_eq!(got[&7].sample_age_ms, Some(i * 1000));
            assert_eq!(got[&7].sample_time_us, Some(stamp));
            shown.push(got[&7].sm);
        }
        // A value up to the stated age (inclusive), N/A after: one change, never back and forth.
        let valued = shown.iter().take_while(|v| v.is_some()).count() as u64;
        assert_eq!(valued, max_s + 1, "{shown:?}");
        assert!(shown[valued as usize..].iter().all(Option::is_none));
        assert!(shown[..valued as usize].iter().all(|v| *v == Some(60)));
        // Then the sample jumps: the new one counts at once.
        let now = NOW_MS + (max_s + 4) * 1000;
        let got = t.update(GPU, &[sample(7, now * 1000 - 200_000, 12)], &one, now);
        assert_eq!(got[&7].sm, Some(12));
        assert_eq!(got[&7].sample_age_ms, Some(200));
    }

    #[test]
    fn a_sample_not_newer_than_the_kept_one_does_not_replace_it_and_a_revision_does() {
        let t = UtilizationTracker::new();
        let one = procs(&[7]);
        t.update(GPU, &[sample(7, ago(1.0), 30)], &one, NOW_MS);
        // An older sample (a driver buffer can still hold one) changes nothing.
        let got = t.update(GPU, &[sample(7, ago(4.0), 90)], &one, NOW_MS);
        assert_eq!(got[&7].sm, Some(30));
        // No sample at all this refresh: the kept one stays.
        assert_eq!(t.update(GPU, &[], &one, NOW_MS)[&7].sm, Some(30));
        // The same timestamp with another value: the driver revises a sample it gave before.
        let got = t.update(GPU, &[sample(7, ago(1.0), 20)], &one, NOW_MS);
        assert_eq!(got[&7].sm, Some(20));
    }

    #[test]
    fn samples_in_the_future_of_the_host_clock_have_age_zero() {
        let t = UtilizationTracker::new();
        let got = t.update(
            GPU,
            &[sample(7, (NOW_MS + 700) * 1000, 5)],
            &procs(&[7]),
            NOW_MS,
        );
        assert_eq!((got[&7].sm, got[&7].sample_age_ms), (Some(5), Some(0)));
        // Extreme timestamps are bounded, not overflowed.
        let got = t.update(GPU, &[sample(8, u64::MAX, 5)], &procs(&[8]), 0);
        assert_eq!(got[&8].sample_age_ms, Some(0));
        let got = t.update(GPU, &[sample(9, 0, 5)], &procs(&[9]), u64::MAX);
        assert_eq!(got[&9].sm, None, "a sample from 1970 is too old");
    }

    #[test]
    fn an_ended_pid_is_forgotten_and_a_new_process_with_its_number_starts_with_nothing() {
        let t = UtilizationTracker::new();
        let old = [TrackedProcess {
            pid: 7,
            start_time_s: Some(NOW_MS / 1000 - 100),
        }];
        assert_eq!(
            t.update(GPU, &[sample(7, ago(1.0), 80)], &old, NOW_MS)[&7].sm,
            Some(80)
        );
        // PID 7 ended: not on the list any more, and nothing is kept for it.
        assert!(t.update(GPU, &[], &[], NOW_MS + 1000).is_empty());
        assert_eq!(t.kept(), 0);
        // A new process gets PID 7; the driver's buffer still holds the old one's sample.
        let new = [TrackedProcess {
            pid: 7,
            start_time_s: Some(NOW_MS / 1000 + 10),
        }];
        let got = t.update(GPU, &[sample(7, ago(1.0), 80)], &new, NOW_MS + 11_000);
        assert_eq!(got[&7], ProcessUtilization::default());
        // Its own first sample counts.
        let got = t.update(
            GPU,
            &[sample(7, (NOW_MS + 11_500) * 1000, 4)],
            &new,
            NOW_MS + 12_000,
        );
        assert_eq!(got[&7].sm, Some(4));
    }

    #[test]
    fn a_pid_reused_between_two_refreshes_is_told_apart_by_its_start_time() {
        let t = UtilizationTracker::new();
        let start = NOW_MS / 1000 - 100;
        let old = [TrackedProcess {
            pid: 7,
            start_time_s: Some(start),
        }];
        t.update(GPU, &[sample(7, ago(1.0), 80)], &old, NOW_MS);
        // By the next refresh PID 7 is another process (it started later), with no sample yet.
        let new = [TrackedProcess {
            pid: 7,
            start_time_s: Some(start + 50),
        }];
        let got = t.update(GPU, &[], &new, NOW_MS + 1000);
        assert_eq!(got[&7], ProcessUtilization::default());
        assert_eq!(t.kept(), 0);
        // A start time the host cannot tell keeps what was seen (nothing says it changed).
        t.update(GPU, &[sample(7, ago(0.5), 9)], &new, NOW_MS + 1000);
        let unknown = procs(&[7]);
        assert_eq!(t.update(GPU, &[], &unknown, NOW_MS + 2000)[&7].sm, Some(9));
    }

    #[test]
    fn memory_stays_bounded_by_the_processes_alive() {
        let t = UtilizationTracker::new();
        // A thousand short processes, ten at a time, each sampled once.
        for round in 0..100u32 {
            let pids: Vec<u32> = (round * 10..round * 10 + 10).collect();
            let samples: Vec<_> = pids.iter().map(|&p| sample(p, ago(0.5), 1)).collect();
            t.update(GPU, &samples, &procs(&pids), NOW_MS);
            assert_eq!(t.kept(), 10);
        }
    }

    #[test]
    fn each_device_keeps_its_own_processes() {
        let t = UtilizationTracker::new();
        t.update(GPU, &[sample(12, ago(1.0), 3)], &procs(&[12]), NOW_MS);
        let other = t.update(
            DeviceId::Gpu(1),
            &[sample(12, ago(5.0), 9)],
            &procs(&[12]),
            NOW_MS,
        );
        assert_eq!(other[&12].sm, Some(9));
        assert_eq!(t.update(GPU, &[], &procs(&[12]), NOW_MS)[&12].sm, Some(3));
    }
}
