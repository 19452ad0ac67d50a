//! What a selection asks for: counts, memory, utilization, tolerance, accounts whose memory
//! counts as free, and whether to sort.

use std::fmt;
use std::str::FromStr;

use gpu_devices::units::{bytes2human, human2bytes, ParseSizeError};
use serde::Serialize;

/// A memory size in bytes, given as a number or as a human string (`"8GiB"`, `"5000M"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Size(pub u64);

impl Size {
    /// The size in bytes.
    pub fn bytes(self) -> u64 {
        self.0
    }
}

impl From<u64> for Size {
    fn from(bytes: u64) -> Size {
        Size(bytes)
    }
}

impl FromStr for Size {
    type Err = ParseSizeError;

    /// Parses a human size with `gpu_devices::units::human2bytes` (`B`, `K`/`KB` = 1000 up to
    /// `P`, `Ki`/`KiB` = 1024 up to `Pi`; a bare number is bytes).
    fn from_str(text: &str) -> Result<Size, ParseSizeError> {
        human2bytes(text).map(Size)
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&bytes2human(self.0))
    }
}

/// A request that cannot be met by any machine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The maximum count is below the minimum count.
    #[error("the maximum count ({max}) is below the minimum count ({min})")]
    CountRange {
        /// The minimum count asked for.
        min: usize,
        /// The maximum count asked for.
        max: usize,
    },
}

/// The constraints of a selection, with nvitop's `select_devices` defaults: no constraint, no
/// tolerance, sorted.
///
/// Every field is public; the builder methods are a shorthand.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Criteria {
    /// The fewest devices wanted. It does not filter anything by itself: it decides whether
    /// MIG devices or whole GPUs are chosen when both qualify (see [`crate::select_devices`]),
    /// and [`crate::Selection::is_short`] tells whether it was met.
    pub min_count: usize,
    /// The most devices to choose; `None` for no limit.
    pub max_count: Option<usize>,
    /// Free memory a device must have, bytes (memory of [`Criteria::free_accounts`] counts as
    /// free).
    pub min_free_memory: Option<u64>,
    /// Total memory a device must have, bytes.
    pub min_total_memory: Option<u64>,
    /// Highest GPU utilization allowed, percent.
    pub max_gpu_utilization: Option<u32>,
    /// Highest memory-bandwidth utilization allowed, percent.
    pub max_memory_utilization: Option<u32>,
    /// How far, in percent, a constraint may be missed and the device still chosen: a minimum
    /// memory `m` accepts `m * (1 - tolerance / 100)`, a maximum utilization `u` accepts
    /// `u + tolerance`. Devices that needed the tolerance sort after those that did not.
    pub tolerance: u32,
    /// Users whose processes' GPU memory counts as free (and not used) on the devices they use;
    /// `pod:NAME` or `pod:NAMESPACE/NAME` names a Kubernetes pod's processes instead
    /// (docs/containers.md).
    pub free_accounts: Vec<String>,
    /// Sort the chosen devices best first (fewest loosened constraints, most free memory, most
    /// used memory, lowest GPU then memory utilization, highest physical index); otherwise keep
    /// the order the devices were given in.
    pub sort: bool,
    /// Skip devices that need attention (`DeviceSnapshot::attention`: a pending page
    /// retirement or row remap, a failed row remap, uncorrected ECC errors since the driver
    /// loaded, clocks held down by the hardware). The tolerance does not loosen it.
    pub healthy: bool,
}

impl Default for Criteria {
    fn default() -> Criteria {
        Criteria {
            min_count: 0,
            max_count: None,
            min_free_memory: None,
            min_total_memory: None,
            max_gpu_utilization: None,
            max_memory_utilization: None,
            tolerance: 0,
            free_accounts: Vec::new(),
            sort: true,
            healthy: false,
        }
    }
}

impl Criteria {
    /// No constraint, no tolerance, sorted.
    pub fn new() -> Criteria {
        Criteria::default()
    }

    /// Sets [`Criteria::min_count`].
    pub fn min_count(mut self, n: usize) -> Criteria {
        self.min_count = n;
        self
    }

    /// Sets [`Criteria::max_count`].
    pub fn max_count(mut self, n: usize) -> Criteria {
        self.max_count = Some(n);
        self
    }

    /// Sets both counts to `n` (nvisel's `--count`).
    pub fn count(self, n: usize) -> Criteria {
        self.min_count(n).max_count(n)
    }

    /// Sets [`Criteria::min_free_memory`]: bytes, or a [`Size`] parsed from a human string.
    pub fn min_free_memory(mut self, size: impl Into<Size>) -> Criteria {
        self.min_free_memory = Some(size.into().0);
        self
    }

    /// Sets [`Criteria::min_total_memory`]: bytes, or a [`Size`] parsed from a human string.
    pub fn min_total_memory(mut self, size: impl Into<Size>) -> Criteria {
        self.min_total_memory = Some(size.into().0);
        self
    }

    /// Sets [`Criteria::max_gpu_utilization`], percent.
    pub fn max_gpu_utilization(mut self, percent: u32) -> Criteria {
        self.max_gpu_utilization = Some(percent);
        self
    }

    /// Sets [`Criteria::max_memory_utilization`], percent.
    pub fn max_memory_utilization(mut self, percent: u32) -> Criteria {
        self.max_memory_utilization = Some(percent);
        self
    }

    /// Sets [`Criteria::tolerance`], percent.
    pub fn tolerance(mut self, percent: u32) -> Criteria {
        self.tolerance = percent;
        self
    }

    /// Sets [`Criteria::free_accounts`].
    pub fn free_accounts<S: Into<String>>(
        mut self,
        users: impl IntoIterator<Item = S>,
    ) -> Criteria {
        self.free_accounts = users.into_iter().map(Into::into).collect();
        self
    }

    /// Sets [`Criteria::healthy`].
    pub fn healthy(mut self, healthy: bool) -> Criteria {
        self.healthy = healthy;
        self
    }

    /// Sets [`Criteria::sort`].
    pub fn sort(mut self, sort: bool) -> Criteria {
        self.sort = sort;
        self
    }

    /// Checks that the request makes sense.
    ///
    /// # Errors
    ///
    /// [`Error::CountRange`] when the maximum count is below the minimum.
    pub fn validate(&self) -> Result<(), Error> {
        match self.max_count {
            Some(max) if max < self.min_count => Err(Error::CountRange {
                min: self.min_count,
                max,
            }),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_as_human2bytes_and_name_the_bad_text() {
        assert_eq!("8GiB".parse::<Size>(), Ok(Size(8 << 30)));
        assert_eq!("5000M".parse::<Size>(), Ok(Size(5_000_000_000)));
        assert_eq!("1024".parse::<Size>(), Ok(Size(1024)));
        let e = "8 gigs".parse::<Size>().unwrap_err();
        assert!(e.to_string().contains("8 gigs"), "{e}");
    }

    #[test]
    fn max_count_below_min_count_is_refused() {
        assert_eq!(
            Criteria::new().min_count(3).max_count(2).validate(),
            Err(Error::CountRange { min: 3, max: 2 })
        );
        assert_eq!(Criteria::new().count(2).validate(), Ok(()));
        assert_eq!(Criteria::new().min_count(2).validate(), Ok(()));
    }
}
