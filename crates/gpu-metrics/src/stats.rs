//! Running aggregates in constant memory: count, mean, min and max ([`Stats`]), and the
//! time-weighted mean of a series sampled at uneven times ([`TimeWeighted`], nvitop's).

use serde::Serialize;

/// Count, sum, min and max of the values seen, in constant memory.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Stats {
    /// How many values were added.
    pub count: u64,
    /// Their sum.
    pub sum: f64,
    /// The smallest (`+inf` while empty).
    pub min: f64,
    /// The largest (`-inf` while empty).
    pub max: f64,
    /// The last value added (NaN while empty).
    pub last: f64,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            count: 0,
            sum: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            last: f64::NAN,
        }
    }
}

impl Stats {
    /// Adds one value. NaN is ignored.
    pub fn add(&mut self, value: f64) {
        if value.is_nan() {
            return;
        }
        self.count += 1;
        self.sum += value;
        self.min = self.min.min(value);
        self.max = self.max.max(value);
        self.last = value;
    }

    /// The arithmetic mean of the values, `None` when there are none.
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum / self.count as f64)
    }

    /// `(min, max)`, `None` when there are no values.
    pub fn range(&self) -> Option<(f64, f64)> {
        (self.count > 0).then_some((self.min, self.max))
    }
}

/// A metric sampled over time: the time-weighted mean (trapezoids between samples), min, max
/// and last value, in constant memory. This is how nvitop's collector aggregates.
///
/// The series starts at `start`. The first value counts from `start` to its own time (as if it
/// had held since then); each later one adds the trapezoid between it and the one before; at
/// [`TimeWeighted::mean`] the last value counts up to now. A sample *missing* the metric (a
/// gap, for instance N/A) stops that last extension: the mean then covers `start` to the last
/// value only, as nvitop's does. When that span is empty (every value taken at `start`), the
/// mean is the plain mean of the values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct TimeWeighted {
    start: f64,
    last_time: f64,
    integral: f64,
    plain: Stats,
    gap: bool,
}

impl TimeWeighted {
    /// An empty series starting at `start` (seconds on some monotonic clock).
    pub(crate) fn new(start: f64) -> TimeWeighted {
        TimeWeighted {
            start,
            last_time: start,
            integral: 0.0,
            plain: Stats::default(),
            gap: false,
        }
    }

    /// Adds `value` taken at time `at` (not before the previous one). NaN marks a gap.
    pub(crate) fn add(&mut self, value: f64, at: f64) {
        if value.is_nan() {
            self.gap = true;
            return;
        }
        if self.plain.count == 0 {
            self.integral = value * (at - self.start);
        } else {
            self.integral += (value + self.plain.last) * (at - self.last_time) / 2.0;
        }
        self.plain.add(value);
        self.last_time = at;
    }

    /// The time-weighted mean up to `now`, `None` before the first value.
    pub(crate) fn mean(&self, now: f64) -> Option<f64> {
        if self.plain.count == 0 {
            return None;
        }
        let (integral, span) = if self.gap {
            (self.integral, self.last_time - self.start)
        } else {
            let tail = (now - self.last_time).max(0.0);
            (
                self.integral + self.plain.last * tail,
                self.last_time + tail - self.start,
            )
        };
        if span > 0.0 {
            Some(integral / span)
        } else {
            self.plain.mean()
        }
    }

    /// Count, min, max and last value of the values added.
    pub(crate) fn plain(&self) -> &Stats {
        &self.plain
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The running aggregates equal what a plain pass over all the values gives.
        #[test]
        fn running_aggregates_match_a_full_pass(values in proptest::collection::vec(-1e9f64..1e9, 1..200)) {
            let mut s = Stats::default();
            for &v in &values {
                s.add(v);
            }
            let min = values.iter().copied().fold(f64::INFINITY, f64::min);
            let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let mean = values.iter().sum::<f64>() / values.len() as f64;
            proptest::prop_assert_eq!(s.range(), Some((min, max)));
            let got = s.mean().unwrap_or(f64::NAN);
            proptest::prop_assert!((got - mean).abs() <= 1e-6 * mean.abs().max(1.0));
            proptest::prop_assert_eq!(s.count as usize, values.len());
        }
    }
    /// nvitop's mean on a series sampled at uneven times: 2 at 0 s, 4 at 1 s, 10 at 4 s,
    /// collected at 5 s. Trapezoids: (2+4)/2*1 = 3, (4+10)/2*3 = 21, then 10 held for 1 s = 10;
    /// 34 over 5 s = 6.8 (the plain mean of the samples would be 5.33).
    #[test]
    fn time_weighted_mean_is_the_trapezoid_integral_over_the_span() {
        let mut s = TimeWeighted::new(0.0);
        for (v, t) in [(2.0, 0.0), (4.0, 1.0), (10.0, 4.0)] {
            s.add(v, t);
        }
        assert_eq!(s.mean(5.0), Some(6.8));
        assert_eq!(s.mean(4.0), Some(24.0 / 4.0));
        assert_eq!(
            (s.plain().min, s.plain().max, s.plain().last),
            (2.0, 10.0, 10.0)
        );
    }

    /// The first value holds from the start of the series; a gap stops the last value's
    /// extension to now.
    #[test]
    fn first_value_counts_from_the_start_and_a_gap_ends_the_series() {
        let mut s = TimeWeighted::new(10.0);
        s.add(6.0, 12.0);
        // 6 from 10 s to 12 s, then held to 14 s.
        assert_eq!(s.mean(14.0), Some(6.0));
        s.add(2.0, 13.0);
        // 6*2 + (6+2)/2*1 = 16 over 10..13, plus 2 held to 15: 20 over 5 s.
        assert_eq!(s.mean(15.0), Some(4.0));
        s.add(f64::NAN, 14.0);
        assert_eq!(s.mean(100.0), Some(16.0 / 3.0));
        assert_eq!(TimeWeighted::new(0.0).mean(1.0), None);
        // Every value at the start: an empty span, so the plain mean.
        let mut z = TimeWeighted::new(1.0);
        z.add(1.0, 1.0);
        z.add(3.0, 1.0);
        assert_eq!(z.mean(1.0), Some(2.0));
    }

    proptest::proptest! {
        /// The time-weighted mean of any series lies between its min and max, and a constant
        /// series has that constant as its mean.
        #[test]
        fn time_weighted_mean_lies_within_the_range(
            steps in proptest::collection::vec((0.0f64..10.0, -1e6f64..1e6), 1..50),
            tail in 0.0f64..10.0,
            constant in -1e6f64..1e6,
        ) {
            let mut s = TimeWeighted::new(0.0);
            let mut c = TimeWeighted::new(0.0);
            let mut t = 0.0;
            for &(dt, v) in &steps {
                t += dt;
                s.add(v, t);
                c.add(constant, t);
            }
            let mean = s.mean(t + tail).unwrap_or(f64::NAN);
            let slack = 1e-9 * s.plain().max.abs().max(s.plain().min.abs()).max(1.0);
            proptest::prop_assert!(mean >= s.plain().min - slack && mean <= s.plain().max + slack);
            let cm = c.mean(t + tail).unwrap_or(f64::NAN);
            proptest::prop_assert!((cm - constant).abs() <= 1e-9 * constant.abs().max(1.0));
        }
    }
}
