//! [`DeviceDetails`]: the answers `nvidia-smi -q` and `--query-gpu` show beyond the everyday
//! ones, kept in a snapshot beside them (one field per fixture field of the query table's
//! "beyond the everyday" rows, named as the fixture names it).

use std::mem;

use gpu_backend::fixture::{DeviceDynamic, DeviceStatic};
use gpu_backend::{
    AddressingMode, Answer, BackendError, BbxFlush, BridgeChip, CodecUtilization, CurrentDefault,
    CurrentPending, DeviceAttributes, FabricInfo, GpuRecoveryAction, HostVgpuMode,
    InactiveRemappedRows, PciClass, PlatformInfo, PowerSmoothing, ProtectedMemory, RepairStatus,
    RowRemapperHistogram, ScopedPowerLimits, SessionStats, SramEccStatus,
};
use serde::{Deserialize, Serialize};

use super::{ClockInfos, Collect};
use crate::na::Na;

/// The changing queries whose answers only [`DeviceDetails`] holds (nvidia-smi's `-q` and
/// `--query-gpu` show them; no other view does): what a refresh of such a view leaves out of
/// its [`crate::QueryPlan`] (`plan.without(&detail_queries())`).
pub fn detail_queries() -> Vec<gpu_backend::Query> {
    let mut out: Vec<gpu_backend::Query> = DeviceDynamic::FIELDS
        .iter()
        .filter(|(field, _)| DETAIL_DYNAMIC_FIELDS.contains(field))
        .map(|(_, q)| *q)
        .collect();
    out.dedup();
    out
}

/// Takes an answer out of an answer struct, leaving "not recorded" in its place.
fn take<T>(answer: &mut Answer<T>) -> Answer<T> {
    mem::replace(answer, Answer::Err(BackendError::NotRecorded))
}

macro_rules! device_details {
    (
        static { $($sf:ident: $sty:ty => $sdoc:literal;)* }
        dynamic { $($df:ident: $dty:ty => $ddoc:literal;)* }
    ) => {
        /// The answers of a device that `nvidia-smi -q` and `--query-gpu` show beyond the
        /// everyday ones, N/A where the device, the driver or the recording has none.
        #[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
        #[serde(default)]
        pub struct DeviceDetails {
            /// Highest clocks the board maker allows, MHz.
            pub max_customer_boost_clocks: ClockInfos,
            $(
                #[doc = $sdoc]
                pub $sf: Na<$sty>,
            )*
            $(
                #[doc = $ddoc]
                pub $df: Na<$dty>,
            )*
        }

        /// The changing fields of [`DeviceDetails`] (fixture field names): what only
        /// nvidia-smi's detailed views show, which a view that does not show them need not ask
        /// ([`detail_queries`]).
        pub const DETAIL_DYNAMIC_FIELDS: &[&str] = &[$(stringify!($df)),*];

        /// The details of a device's static and changing answers, each answer taken out of its
        /// struct (unexpected failures noted as `details.FIELD`).
        pub(super) fn take_details(
            c: &mut Collect,
            st: &mut DeviceStatic,
            dy: &mut DeviceDynamic,
        ) -> DeviceDetails {
            DeviceDetails {
                max_customer_boost_clocks: c.clocks(
                    "details.max_customer_boost_clocks",
                    mem::replace(
                        &mut st.max_customer_boost_clocks,
                        gpu_backend::PerClock::from_fn(|_| Answer::Err(BackendError::NotRecorded)),
                    ),
                ),
                $($sf: c.take(concat!("details.", stringify!($sf)), take(&mut st.$sf)),)*
                $($df: c.take(concat!("details.", stringify!($df)), take(&mut dy.$df)),)*
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_detail_field_is_a_changing_answer_of_a_detail_query() {
        let queries = detail_queries();
        for field in DETAIL_DYNAMIC_FIELDS {
            let (_, q) = DeviceDynamic::FIELDS
                .iter()
                .find(|(f, _)| f == field)
                .unwrap_or_else(|| panic!("{field} is no changing answer"));
            assert!(queries.contains(q), "{field}");
        }
        assert!(queries.contains(&gpu_backend::Query::power_instant));
        assert!(!queries.contains(&gpu_backend::Query::power_usage));
    }
}

device_details! {
    static {
        addressing_mode: AddressingMode => "How the GPU shares addresses with the CPU.";
        accounting_buffer_size: u32 => "How many processes' accounting statistics the driver keeps.";
        inforom_oem_version: String => "Version of the inforom's OEM object.";
        inforom_ecc_version: String => "Version of the inforom's ECC object.";
        inforom_power_version: String => "Version of the inforom's power-management object.";
        inforom_valid: bool => "Whether the inforom's checksum is valid.";
        pdi: u64 => "The GPU's per-device identifier.";
        platform_info: PlatformInfo => "Where the GPU sits in its platform.";
        c2c_mode: bool => "Whether the chip-to-chip link is enabled.";
        host_vgpu_mode: HostVgpuMode => "The host's vGPU mode.";
        vgpu_heterogeneous_mode: bool => "Whether vGPU profiles of different types may share the GPU.";
        vgpu_fractional_multi_vgpu: u32 => "vGPU capability: fractional profiles in multi-vGPU configurations.";
        vgpu_heterogeneous_timeslice_profiles: u32 => "vGPU capability: timesliced profiles of differing types.";
        vgpu_heterogeneous_timeslice_sizes: u32 => "vGPU capability: timesliced profiles of differing sizes.";
        vgpu_homogeneous_placements: u32 => "vGPU capability: placements of identical timesliced profiles reported.";
        vgpu_mig_timeslicing_supported: u32 => "vGPU capability: timesliced vGPU on MIG supported.";
        vgpu_mig_timeslicing_enabled: u32 => "vGPU capability: timesliced vGPU on MIG enabled.";
        gsp_firmware_version: String => "Version of the GSP firmware.";
        gsp_firmware_mode: CurrentDefault<bool> => "Whether the driver runs on the GSP, now and by default.";
        pci_class: PciClass => "PCI base and sub class.";
        gpu_max_pcie_link_generation: u32 => "Highest PCIe generation the GPU supports.";
        pcie_atomics_outbound: u32 => "PCIe atomic operations the GPU issues (`NVML_PCIE_ATOMICS_CAP_*`).";
        pcie_atomics_inbound: u32 => "PCIe atomic operations the GPU completes.";
        bridge_chips: Vec<BridgeChip> => "Bridge chips between the GPU and the host.";
        auto_boosted_clocks: CurrentDefault<bool> => "Whether clocks boost on their own, now and by default.";
        temperature_target_min: u32 => "Lowest target temperature that may be set, °C.";
        temperature_target: u32 => "Target temperature, °C.";
        temperature_target_max: u32 => "Highest target temperature that may be set, °C.";
        tlimit_shutdown: i32 => "Shutdown threshold against T.Limit, °C.";
        tlimit_slowdown: i32 => "Slowdown threshold against T.Limit, °C.";
        tlimit_gpu_max: i32 => "Highest operating GPU temperature against T.Limit, °C.";
        tlimit_memory_max: i32 => "Highest operating memory temperature against T.Limit, °C.";
        module_power_limits: ScopedPowerLimits => "The module's power limits, mW.";
        power_smoothing: PowerSmoothing => "Power-smoothing settings.";
        dram_encryption_mode: CurrentPending<bool> => "DRAM encryption, current and pending.";
        capabilities: u32 => "Capabilities, `NVML_DEV_CAP_*` bits.";
        hostname: String => "The host name set on the device (vGPU hosts).";
        device_attributes: DeviceAttributes => "What the device is made of (SMs, engines, slices).";
    }
    dynamic {
        gpu_recovery_action: GpuRecoveryAction => "What should be done for the GPU to work again.";
        pcie_replay_rollover_counter: u32 => "PCIe replay counter rollovers.";
        clock_event_time_sw_power_cap: u64 => "Time held under the software power cap, ns.";
        clock_event_time_sync_boost: u64 => "Time held to the sync-boost group's clock, ns.";
        clock_event_time_sw_thermal_slowdown: u64 => "Time held down by the driver for temperature, ns.";
        clock_event_time_hw_thermal_slowdown: u64 => "Time held down by the hardware for temperature, ns.";
        clock_event_time_hw_power_brake: u64 => "Time held down by the power brake, ns.";
        jpeg_utilization: CodecUtilization => "JPEG decoder utilization.";
        ofa_utilization: CodecUtilization => "Optical-flow accelerator utilization.";
        encoder_stats: SessionStats => "Encoder sessions.";
        fbc_stats: SessionStats => "Frame-buffer capture sessions.";
        sram_ecc_status: SramEccStatus => "SRAM ECC detail.";
        repair_status: RepairStatus => "Repairs pending.";
        inactive_remapped_rows: InactiveRemappedRows => "Row remappings not in force yet.";
        row_remapper_histogram: RowRemapperHistogram => "Memory banks by spare rows left.";
        margin_temperature: i32 => "How far the GPU is below T.Limit, °C.";
        protected_memory: ProtectedMemory => "Confidential-computing protected memory, bytes.";
        fabric_info: FabricInfo => "NVLink fabric registration and health.";
        bbx_flush: BbxFlush => "The inforom black box's last flush.";
        power_average_gpu: u32 => "GPU power averaged over a second, mW.";
        power_average_module: u32 => "Module power averaged over a second, mW.";
        power_average_memory: u32 => "Memory power averaged over a second, mW.";
        power_instant_gpu: u32 => "GPU power now, mW.";
        power_instant_module: u32 => "Module power now, mW.";
        power_instant_memory: u32 => "Memory power now, mW.";
    }
}
