//! The hardware-abstraction trait.

use crate::error::{BackendError, Result};
use crate::types::*;

/// Everything the layers above can ask of the GPUs, shaped like NVML's query surface: one method
/// per thing NVML can tell.
///
/// * Object safe and `Send + Sync`: the CLI chooses NVML or a fixture at run time and holds an
///   `Arc<dyn GpuBackend>`.
/// * Devices are addressed by [`DeviceId`], never by driver handles.
/// * Every answer is a `Result` whose error keeps what NVML said; "cannot tell" answers
///   ([`BackendError::is_not_available`]) are data, not failure.
/// * Only [`GpuBackend::device_count`] is required. Every other method defaults to
///   `Err(BackendError::NotSupported)`, which is the honest answer of a backend that has no way to
///   tell; units are NVML's (bytes, mW, mJ, MHz, %, KB/s, °C).
///
/// Which answers are "static" (asked once, like the name) and which change over time (like
/// memory used) is a property of the fixture format, not of this trait: see
/// [`crate::fixture::DeviceStatic`] and [`crate::fixture::DeviceDynamic`].
#[cfg_attr(feature = "mock", mockall::automock)]
pub trait GpuBackend: Send + Sync {
    // ---- System ----

    /// Driver version, e.g. `"535.54.03"`.
    fn driver_version(&self) -> Result<String> {
        Err(BackendError::NotSupported)
    }
    /// NVML library version, e.g. `"12.535.54.03"`.
    fn nvml_version(&self) -> Result<String> {
        Err(BackendError::NotSupported)
    }
    /// The CUDA driver API version the driver supports, as CUDA encodes it (`12020` for 12.2).
    fn cuda_driver_version(&self) -> Result<i32> {
        Err(BackendError::NotSupported)
    }
    /// Number of physical GPUs.
    fn device_count(&self) -> Result<u32>;
    /// UUIDs of the physical GPUs in CUDA's default ordinal order (FASTEST_FIRST), as libcuda
    /// reports it.
    fn cuda_device_order(&self) -> Result<Vec<String>> {
        Err(BackendError::NotSupported)
    }

    // ---- Identity and configuration (static in fixtures) ----

    /// Product name.
    fn name(&self, id: DeviceId) -> Result<String> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// UUID: `GPU-...` for a physical GPU, `MIG-...` for a MIG device.
    fn uuid(&self, id: DeviceId) -> Result<String> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// Board serial number.
    fn serial(&self, id: DeviceId) -> Result<String> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// PCI identity.
    fn pci_info(&self, id: DeviceId) -> Result<PciInfo> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// Minor number of the device node (`/dev/nvidiaN`).
    fn minor_number(&self, id: DeviceId) -> Result<u32> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// VBIOS version.
    fn vbios_version(&self, id: DeviceId) -> Result<String> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// Board part number.
    fn board_part_number(&self, id: DeviceId) -> Result<String> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// Architecture.
    fn architecture(&self, id: DeviceId) -> Result<Architecture> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// Brand.
    fn brand(&self, id: DeviceId) -> Result<Brand> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// Maximum clock of a domain, MHz.
    fn max_clock(&self, id: DeviceId, clock: ClockType) -> Result<u32> {
        let _ = (id, clock);
        Err(BackendError::NotSupported)
    }
    /// Number of fans.
    fn num_fans(&self, id: DeviceId) -> Result<u32> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// A temperature threshold, °C.
    fn temperature_threshold(&self, id: DeviceId, threshold: TemperatureThreshold) -> Result<u32> {
        let _ = (id, threshold);
        Err(BackendError::NotSupported)
    }
    /// Whether power management is enabled (power readings available).
    fn power_management_mode(&self, id: DeviceId) -> Result<bool> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// Power-management limit, mW.
    fn power_management_limit(&self, id: DeviceId) -> Result<u32> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// Range the power-management limit may be set in, mW.
    fn power_management_limit_constraints(&self, id: DeviceId) -> Result<PowerLimits> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// The power limit actually enforced (the lower of all limits), mW.
    fn enforced_power_limit(&self, id: DeviceId) -> Result<u32> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// Highest PCIe generation the device and system support.
    fn max_pcie_link_generation(&self, id: DeviceId) -> Result<u32> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// Widest PCIe link the device and system support (lanes).
    fn max_pcie_link_width(&self, id: DeviceId) -> Result<u32> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// Whether NVLink `link` (0..[`NVLINK_MAX_LINKS`]) is active.
    fn nvlink_state(&self, id: DeviceId, link: u32) -> Result<bool> {
        let _ = (id, link);
        Err(BackendError::NotSupported)
    }
    /// Whether a display is connected (display mode).
    fn display_mode(&self, id: DeviceId) -> Result<bool> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// Whether a display is initialised on the device (display active).
    fn display_active(&self, id: DeviceId) -> Result<bool> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// Persistence mode.
    fn persistence_mode(&self, id: DeviceId) -> Result<bool> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// ECC mode, current and pending.
    fn ecc_mode(&self, id: DeviceId) -> Result<CurrentPending<bool>> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// Compute mode.
    fn compute_mode(&self, id: DeviceId) -> Result<ComputeMode> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// CUDA compute capability.
    fn cuda_compute_capability(&self, id: DeviceId) -> Result<ComputeCapability> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// Windows driver model, current and pending (not supported on Linux).
    fn driver_model(&self, id: DeviceId) -> Result<CurrentPending<DriverModel>> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// MIG mode, current and pending.
    fn mig_mode(&self, id: DeviceId) -> Result<CurrentPending<bool>> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// How many MIG devices the GPU can hold at most.
    fn max_mig_device_count(&self, id: DeviceId) -> Result<u32> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// The MIG slot indices that hold a MIG device under a physical GPU, ascending. Each gives
    /// `DeviceId::Mig { parent, index }`.
    fn mig_device_indices(&self, id: DeviceId) -> Result<Vec<u32>> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// GPU-instance id of a MIG device.
    fn gpu_instance_id(&self, id: DeviceId) -> Result<u32> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// Compute-instance id of a MIG device.
    fn compute_instance_id(&self, id: DeviceId) -> Result<u32> {
        let _ = id;
        Err(BackendError::NotSupported)
    }

    // ---- Readings that change over time ----

    /// Frame-buffer memory.
    fn memory_info(&self, id: DeviceId) -> Result<MemoryInfo> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// BAR1 memory.
    fn bar1_memory_info(&self, id: DeviceId) -> Result<Bar1MemoryInfo> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// GPU and memory utilization.
    fn utilization_rates(&self, id: DeviceId) -> Result<Utilization> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// Encoder utilization.
    fn encoder_utilization(&self, id: DeviceId) -> Result<CodecUtilization> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// Decoder utilization.
    fn decoder_utilization(&self, id: DeviceId) -> Result<CodecUtilization> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// Current clock of a domain, MHz.
    fn clock(&self, id: DeviceId, clock: ClockType) -> Result<u32> {
        let _ = (id, clock);
        Err(BackendError::NotSupported)
    }
    /// Intended fan speed, percent (`nvmlDeviceGetFanSpeed`).
    fn fan_speed(&self, id: DeviceId) -> Result<u32> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// Intended speed of one fan, percent (`nvmlDeviceGetFanSpeed_v2`).
    fn fan_speed_of(&self, id: DeviceId, fan: u32) -> Result<u32> {
        let _ = (id, fan);
        Err(BackendError::NotSupported)
    }
    /// GPU core temperature, °C.
    fn temperature(&self, id: DeviceId) -> Result<u32> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// Power draw, mW.
    fn power_usage(&self, id: DeviceId) -> Result<u32> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// Energy consumed since the driver was loaded, mJ.
    fn total_energy_consumption(&self, id: DeviceId) -> Result<u64> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// Performance state, 0 (P0, most) to 15 (P15, least); 32 is "unknown".
    fn performance_state(&self, id: DeviceId) -> Result<u32> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// Current PCIe generation.
    fn current_pcie_link_generation(&self, id: DeviceId) -> Result<u32> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// Current PCIe link width (lanes).
    fn current_pcie_link_width(&self, id: DeviceId) -> Result<u32> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// PCIe throughput over the last 20 ms, KB/s.
    fn pcie_throughput(&self, id: DeviceId, direction: PcieDirection) -> Result<u32> {
        let _ = (id, direction);
        Err(BackendError::NotSupported)
    }
    /// Cumulative NVLink data counters of one link.
    fn nvlink_throughput(&self, id: DeviceId, link: u32) -> Result<NvLinkCounters> {
        let _ = (id, link);
        Err(BackendError::NotSupported)
    }
    /// ECC error count.
    fn ecc_errors(&self, id: DeviceId, kind: EccErrorKind, counter: EccCounter) -> Result<u64> {
        let _ = (id, kind, counter);
        Err(BackendError::NotSupported)
    }
    /// Clock event (throttle) reasons, NVML's bit mask.
    fn clock_event_reasons(&self, id: DeviceId) -> Result<u64> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// Processes with a compute context on the device.
    fn compute_processes(&self, id: DeviceId) -> Result<Vec<ProcessInfo>> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// Processes with a graphics context on the device.
    fn graphics_processes(&self, id: DeviceId) -> Result<Vec<ProcessInfo>> {
        let _ = id;
        Err(BackendError::NotSupported)
    }
    /// Per-process utilization samples newer than `since_us` (microseconds since the Unix
    /// epoch; 0 for every sample the driver holds).
    fn process_utilization(
        &self,
        id: DeviceId,
        since_us: u64,
    ) -> Result<Vec<ProcessUtilizationSample>> {
        let _ = (id, since_us);
        Err(BackendError::NotSupported)
    }
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
