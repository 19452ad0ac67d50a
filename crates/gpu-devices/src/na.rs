//! [`Na`], the value of a metric that a GPU or driver may not be able to give.

use std::fmt;

use gpu_backend::BackendError;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A metric's value, or why there is none.
///
/// This is nvitop's `NA` in Rust terms. A backend answer becomes an `Na` with
/// [`Na::from`]`(Result<T, BackendError>)`:
///
/// * a value is [`Na::Value`];
/// * an answer that means "this GPU or driver cannot tell" (not supported, no permission,
///   function not found: [`BackendError::is_not_available`]) is [`Na::NotAvailable`];
/// * any other error (GPU lost, timeout, unknown code, ...) is [`Na::Failed`], which keeps the
///   error so that it is not silently lost.
///
/// On screen both kinds of missing value print as `N/A`; in JSON both are `null` (snapshots keep
/// the failures in their `errors` list). Use [`Na::value`], [`Na::into_option`] or
/// [`Na::into_result`] to get at the value.
///
/// ```
/// use gpu_backend::BackendError;
/// use gpu_devices::Na;
///
/// let temperature: Na<u32> = Ok(61).into();
/// assert_eq!(temperature.to_string(), "61");
/// let fan: Na<u32> = Err(BackendError::NotSupported).into();
/// assert_eq!(fan.to_string(), "N/A");
/// assert!(fan.error().is_none());
/// let power: Na<u32> = Err(BackendError::GpuLost).into();
/// assert_eq!(power.to_string(), "N/A");
/// assert_eq!(power.error(), Some(&BackendError::GpuLost));
/// assert_eq!(serde_json::to_string(&power).unwrap(), "null");
/// ```
///
/// # nvitop's `NA` in Rust
///
/// nvitop's `NA` is a `str` (`'N/A'`) that becomes `nan` in arithmetic (`NA + 1`, `NA / 1024`)
/// and `0` through `int(NA)`. `Na` has no arithmetic operators: the conversion is said out
/// loud, `to_string()` or `{}` for the text, [`Na::to_f64`] for nvitop's float (NaN, which
/// IEEE arithmetic carries through), [`Na::unwrap_or_default`] for `int(NA)`, and
/// [`Na::map`] to compute on a value while keeping the reason it is missing.
/// Dividing by zero gives NaN or infinity instead of Python's `ZeroDivisionError`.
///
/// ```
/// use gpu_devices::Na;
///
/// let fan: Na<u32> = Na::NotAvailable;
/// assert_eq!(format!("fan: {fan:<5}|"), "fan: N/A  |"); // 'fan: ' + NA.ljust(5)
/// assert!((fan.to_f64() / 1024.0).is_nan()); // NA / 1024
/// assert_eq!(fan.clone().unwrap_or_default(), 0); // int(NA)
/// assert_eq!(fan.map(|v| v * 2), Na::NotAvailable);
/// ```
///
/// Arithmetic straight on an `Na` does not compile, whatever the other operand (Python's
/// `NA - 'str'` is a `TypeError` at run time):
///
/// ```compile_fail
/// let fan: gpu_devices::Na<u32> = gpu_devices::Na::NotAvailable;
/// let _ = fan + 1;
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum Na<T> {
    /// The value.
    Value(T),
    /// The GPU or driver cannot tell (not supported, no permission, driver too old).
    #[default]
    NotAvailable,
    /// The backend failed unexpectedly; the value is missing and this is why.
    Failed(BackendError),
}

impl<T> Na<T> {
    /// The value, if there is one.
    pub fn value(&self) -> Option<&T> {
        match self {
            Na::Value(v) => Some(v),
            _ => None,
        }
    }

    /// The value, if there is one, by value.
    pub fn into_option(self) -> Option<T> {
        match self {
            Na::Value(v) => Some(v),
            _ => None,
        }
    }

    /// `Ok(Some(value))`, `Ok(None)` when not available, or the unexpected error.
    pub fn into_result(self) -> Result<Option<T>, BackendError> {
        match self {
            Na::Value(v) => Ok(Some(v)),
            Na::NotAvailable => Ok(None),
            Na::Failed(e) => Err(e),
        }
    }

    /// True when there is a value.
    pub fn is_value(&self) -> bool {
        matches!(self, Na::Value(_))
    }

    /// True when there is no value, for whatever reason.
    pub fn is_na(&self) -> bool {
        !self.is_value()
    }

    /// The unexpected error, if the value is missing because of one.
    pub fn error(&self) -> Option<&BackendError> {
        match self {
            Na::Failed(e) => Some(e),
            _ => None,
        }
    }

    /// Maps the value, keeping a missing value's reason.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Na<U> {
        match self {
            Na::Value(v) => Na::Value(f(v)),
            Na::NotAvailable => Na::NotAvailable,
            Na::Failed(e) => Na::Failed(e),
        }
    }

    /// Maps the value to another `Na`, keeping a missing value's reason.
    pub fn and_then<U>(self, f: impl FnOnce(T) -> Na<U>) -> Na<U> {
        match self {
            Na::Value(v) => f(v),
            Na::NotAvailable => Na::NotAvailable,
            Na::Failed(e) => Na::Failed(e),
        }
    }

    /// Both values, or the first missing one's reason.
    pub fn zip<U>(self, other: Na<U>) -> Na<(T, U)> {
        match (self, other) {
            (Na::Value(a), Na::Value(b)) => Na::Value((a, b)),
            (Na::Failed(e), _) | (_, Na::Failed(e)) => Na::Failed(e),
            _ => Na::NotAvailable,
        }
    }

    /// The value, or `default`.
    pub fn unwrap_or(self, default: T) -> T {
        self.into_option().unwrap_or(default)
    }

    /// The value, or `T::default()`: nvitop's `int(NA)`, which is 0.
    pub fn unwrap_or_default(self) -> T
    where
        T: Default,
    {
        self.into_option().unwrap_or_default()
    }

    /// The value as a float, NaN when missing: nvitop's `float(NA)`, for arithmetic that
    /// should carry "unknown" through instead of stopping (NaN stays NaN through `+`, `*`,
    /// `/`, and compares false).
    ///
    /// ```
    /// use gpu_backend::BackendError;
    /// use gpu_devices::Na;
    ///
    /// let cpu: Na<f64> = Ok(12.5).into();
    /// assert_eq!(cpu.to_f64(), 12.5);
    /// // nvitop's failsafe example: `float(p.cpu_percent())` of a process that ended is nan,
    /// // `int(...)` is 0.
    /// let gone: Na<f64> = Err(BackendError::NotFound).into();
    /// assert!(gone.to_f64().is_nan());
    /// assert!((gone.to_f64() * 100.0 / 8.0).is_nan());
    /// assert_eq!(gone.clone().unwrap_or_default(), 0.0);
    /// let memory: Na<u64> = Ok(1 << 30).into();
    /// assert_eq!(memory.to_f64() / 1024.0, 1_048_576.0);
    /// ```
    pub fn to_f64(&self) -> f64
    where
        T: Copy + IntoF64,
    {
        self.value().map_or(f64::NAN, |&v| v.into_f64())
    }
}

/// A number that [`Na::to_f64`] can give as a float (large integers to the nearest float).
pub trait IntoF64 {
    /// The number as a float.
    fn into_f64(self) -> f64;
}

macro_rules! into_f64 {
    ($($t:ty),*) => {$(
        impl IntoF64 for $t {
            fn into_f64(self) -> f64 {
                self as f64
            }
        }
    )*};
}
into_f64!(u8, u16, u32, u64, usize, i32, i64, f32, f64);

impl<T> From<Result<T, BackendError>> for Na<T> {
    fn from(r: Result<T, BackendError>) -> Self {
        match r {
            Ok(v) => Na::Value(v),
            Err(e) if e.is_not_available() => Na::NotAvailable,
            Err(e) => Na::Failed(e),
        }
    }
}

impl<T> From<Option<T>> for Na<T> {
    fn from(o: Option<T>) -> Self {
        match o {
            Some(v) => Na::Value(v),
            None => Na::NotAvailable,
        }
    }
}

impl<T> From<Na<T>> for Option<T> {
    fn from(n: Na<T>) -> Self {
        n.into_option()
    }
}

impl<T> From<gpu_backend::Answer<T>> for Na<T> {
    #[inline(always)]
    fn from(a: gpu_backend::Answer<T>) -> Self {
        match a {
            gpu_backend::Answer::Ok(v) => Na::Value(v),
            gpu_backend::Answer::Err(e) if e.is_not_available() => Na::NotAvailable,
            gpu_backend::Answer::Err(e) => Na::Failed(e),
        }
    }
}

/// The text shown for a missing value.
pub const NA_TEXT: &str = "N/A";

impl<T: fmt::Display> fmt::Display for Na<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Na::Value(v) => v.fmt(f),
            _ => f.pad(NA_TEXT),
        }
    }
}

impl<T: Serialize> Serialize for Na<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Na::Value(v) => s.serialize_some(v),
            _ => s.serialize_none(),
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Na<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Option::<T>::deserialize(d)?.into())
    }
}

/// Shows an `Option` as its value or `N/A`: `format!("{}", na(&x))`.
pub fn na<T: fmt::Display>(value: &Option<T>) -> impl fmt::Display + '_ {
    struct Shown<'a, T>(&'a Option<T>);
    impl<T: fmt::Display> fmt::Display for Shown<'_, T> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match self.0 {
                Some(v) => v.fmt(f),
                None => f.pad(NA_TEXT),
            }
        }
    }
    Shown(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_na_kinds_become_not_available_and_the_rest_failed() {
        for e in [
            BackendError::NotSupported,
            BackendError::NoPermission,
            BackendError::FunctionNotFound,
        ] {
            assert_eq!(Na::<u32>::from(Err(e)), Na::NotAvailable);
        }
        for e in [
            BackendError::GpuLost,
            BackendError::Unknown(999),
            BackendError::Timeout,
        ] {
            assert_eq!(Na::<u32>::from(Err(e.clone())), Na::Failed(e));
        }
    }

    #[test]
    fn missing_values_pad_like_text_and_serialise_as_null() {
        let n: Na<u32> = Na::NotAvailable;
        assert_eq!(format!("[{n:>5}]"), "[  N/A]");
        assert_eq!(serde_json::to_string(&Na::Value(3u32)).unwrap(), "3");
        let back: Na<u32> = serde_json::from_str("null").unwrap();
        assert_eq!(back, Na::NotAvailable);
        assert_eq!(na(&None::<u8>).to_string(), "N/A");
    }

    #[test]
    fn zip_keeps_the_failure() {
        let a: Na<u8> = Na::Value(1);
        let b: Na<u8> = Na::Failed(BackendError::GpuLost);
        assert_eq!(a.clone().zip(b), Na::Failed(BackendError::GpuLost));
        assert_eq!(a.zip(Na::<u8>::NotAvailable), Na::NotAvailable);
    }
}
