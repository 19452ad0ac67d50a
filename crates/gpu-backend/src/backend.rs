//! The hardware-abstraction trait.

use crate::error::{BackendError, Result};
use crate::types::*;

macro_rules! declare_backend_traits {
    ($({
        $section:ident $shape:ident $method:ident ($($arg:ident : $argty:ident),*) ($($ty:tt)+) $store:tt
        $nvml:ident [$($note:literal)?] $unit:literal $mig:ident $abi:ident $doc:literal
    })*) => {
        /// Everything the layers above can ask of the GPUs, shaped like NVML's query surface: one
        /// method per thing NVML can tell.
        ///
        /// * Object safe and `Send + Sync`: the CLI chooses NVML or a fixture at run time and
        ///   holds an `Arc<dyn GpuBackend>`.
        /// * Devices are addressed by [`DeviceId`], never by driver handles.
        /// * Every answer is a `Result` whose error keeps what NVML said; "cannot tell" answers
        ///   ([`BackendError::is_not_available`]) are data, not failure. Units are NVML's
        ///   (bytes, mW, mJ, MHz, %, KB/s, °C).
        /// * Every method is declared once, in the query table ([`crate::for_each_query!`]),
        ///   and none has a default body: a backend that forgets a query does not compile. A
        ///   backend that can only answer some queries implements [`NotSupportedBase`] instead,
        ///   and says `NotSupported` for the rest explicitly by not overriding them.
        ///
        /// Which answers are "static" (asked once, like the name) and which change over time
        /// (like memory used) is the table's `section` column: see
        /// [`crate::fixture::DeviceStatic`] and [`crate::fixture::DeviceDynamic`].
        #[cfg_attr(feature = "mock", mockall::automock)]
        pub trait GpuBackend: Send + Sync {
            $(
                #[doc = $doc]
                #[doc = ""]
                #[doc = concat!("NVML: `", stringify!($nvml), "`", $(" (", $note, ")",)? ".")]
                fn $method(&self $(, $arg: $argty)*) -> Result<$($ty)+>;
            )*
        }

        /// A base for backends that answer only some queries: every method defaults to
        /// `Err(BackendError::NotSupported)`, the honest answer of a backend that has no way to
        /// tell. Every type that implements it is a [`GpuBackend`].
        ///
        /// The project's own backends (NVML, replay) implement [`GpuBackend`] directly, where
        /// a forgotten query is a compile error; this is the opt-in for third-party backends.
        ///
        /// ```
        /// use gpu_backend::{GpuBackend, NotSupportedBase, Result};
        ///
        /// struct OneGpu;
        /// impl NotSupportedBase for OneGpu {
        ///     fn device_count(&self) -> Result<u32> {
        ///         Ok(1)
        ///     }
        /// }
        ///
        /// // Used as any backend is: through the trait.
        /// let b: &dyn GpuBackend = &OneGpu;
        /// assert_eq!(b.device_count(), Ok(1));
        /// assert!(b.name(gpu_backend::DeviceId::Gpu(0)).is_err());
        /// ```
        pub trait NotSupportedBase: Send + Sync {
            $(
                #[doc = $doc]
                fn $method(&self $(, $arg: $argty)*) -> Result<$($ty)+> {
                    $(let _ = $arg;)*
                    Err(BackendError::NotSupported)
                }
            )*
        }

        impl<T: NotSupportedBase> GpuBackend for T {
            $(
                fn $method(&self $(, $arg: $argty)*) -> Result<$($ty)+> {
                    NotSupportedBase::$method(self $(, $arg)*)
                }
            )*
        }
    };
}

crate::for_each_query_row!(@table declare_backend_traits);

/// Writes the delegation of one query of the table from a shared backend to the backend it
/// shares (a row as [`crate::for_each_query_row!`] hands it).
macro_rules! shared_query {
    ($section:ident $shape:ident $method:ident ($($arg:ident : $argty:ident),*) ($($ty:tt)+) $($row:tt)*) => {
        fn $method(&self $(, $arg: $argty)*) -> Result<$($ty)+> {
            (**self).$method($($arg),*)
        }
    };
}

/// A shared backend answers as the backend it shares, so that an `Arc<dyn GpuBackend>` can be
/// wrapped by a decorator such as [`crate::cost::TimedBackend`].
impl<B: GpuBackend + ?Sized> GpuBackend for std::sync::Arc<B> {
    crate::for_each_query_row!(shared_query);
}

/// Every physical and MIG device a backend reports, physical devices each followed by their MIG
/// children. A GPU whose MIG children cannot be listed is still included.
pub fn all_device_ids(backend: &dyn GpuBackend) -> Result<Vec<DeviceId>> {
    let count = backend.device_count()?;
    // Bounded: a backend could report any count; the NVML backend refuses absurd ones.
    let mut ids = Vec::with_capacity(count.min(crate::types::MAX_DEVICE_COUNT) as usize);
    for parent in 0..count {
        ids.push(DeviceId::Gpu(parent));
        if let Ok(children) = backend.mig_device_indices(DeviceId::Gpu(parent)) {
            ids.extend(
                children
                    .into_iter()
                    .map(|index| DeviceId::Mig { parent, index }),
            );
        }
    }
    Ok(ids)
}

#[cfg(all(test, feature = "mock"))]
mod tests {
    use super::*;
    use mockall::predicate::eq;

    #[test]
    fn all_device_ids_lists_mig_children_after_their_parent_and_asks_each_gpu_once() {
        let mut mock = MockGpuBackend::new();
        mock.expect_device_count().times(1).returning(|| Ok(3));
        mock.expect_mig_device_indices()
            .with(eq(DeviceId::Gpu(0)))
            .times(1)
            .returning(|_| Ok(vec![0, 2]));
        // A GPU that cannot list MIG children (MIG unsupported) is still listed.
        mock.expect_mig_device_indices()
            .with(eq(DeviceId::Gpu(1)))
            .times(1)
            .returning(|_| Err(BackendError::NotSupported));
        mock.expect_mig_device_indices()
            .with(eq(DeviceId::Gpu(2)))
            .times(1)
            .returning(|_| Ok(vec![]));
        let ids = all_device_ids(&mock).unwrap();
        assert_eq!(
            ids,
            vec![
                DeviceId::Gpu(0),
                DeviceId::Mig {
                    parent: 0,
                    index: 0
                },
                DeviceId::Mig {
                    parent: 0,
                    index: 2
                },
                DeviceId::Gpu(1),
                DeviceId::Gpu(2),
            ]
        );
    }

    #[test]
    fn all_device_ids_passes_on_a_failed_count() {
        let mut mock = MockGpuBackend::new();
        mock.expect_device_count()
            .returning(|| Err(BackendError::DriverNotLoaded));
        assert_eq!(all_device_ids(&mock), Err(BackendError::DriverNotLoaded));
    }
}
