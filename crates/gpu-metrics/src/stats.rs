//! Running aggregates: count, mean, min and max in constant memory.

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
}
