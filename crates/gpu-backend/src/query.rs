//! The query table: every question a backend can be asked, declared once.
//!
//! [`for_each_query!`](crate::for_each_query) holds one row per query of [`crate::GpuBackend`]
//! and hands the whole table to a macro of the caller's choosing. From it come the trait's
//! methods (and [`crate::NotSupportedBase`]), the fixture fields
//! ([`crate::fixture::SystemAnswers`], [`crate::fixture::DeviceStatic`],
//! [`crate::fixture::DeviceDynamic`]) with their "not recorded" defaults and all-failing
//! answers, the replay's methods, the recorder's capture, fake-nvml's exports for the regular
//! shapes, and the query table of `docs/fixture-format.md` ([`QUERIES`], checked by a test).
//!
//! A row reads
//!
//! ```text
//! SECTION SHAPE fn METHOD(ARGS) -> (TYPE) => FIELD [nvml: FUNCTION "note"?, unit: "mW", mig: yes, abi: plain, doc: "..."];
//! ```
//!
//! * SECTION: `system` (asked once, no device), `static` (asked once per device) or `dynamic`
//!   (asked at every frame).
//! * SHAPE: `value` (one answer), `per_clock` (one per [`crate::ClockType`]), `per_link` (one
//!   per NVLink link, trimmed), `per_fan` (one per fan of `num_fans`), `per_ecc` (one per ECC
//!   kind and counter), `split` (one per variant of the argument, each its own fixture field:
//!   FIELD is then `{ Enum::Variant => field, ... }`), `samples` (a list filtered by a
//!   timestamp; replay's body is written by hand).
//! * `nvml`: the NVML entry point (an identifier, so that fake-nvml can export it), with an
//!   optional note for the irregular ones.
//! * `mig`: whether a MIG device answers it (`yes`, `no`, or `na` for system queries).
//! * `abi`: how fake-nvml exports it: `plain` (the value through one out-pointer), `enable`
//!   (a bool as `nvmlEnableState_t`), `code` (an enum as NVML's number), `string` (a device
//!   string into a caller's buffer), or `custom` (written by hand in fake-nvml).
//!
//! The value type is in parentheses, so that a caller can take it as plain tokens (mockall
//! cannot read a type that a macro passed on as one piece); argument types are single names.
//! Types are written as plain names: the caller's macro expands where `gpu_backend::types::*`
//! is in scope.
//!
//! Callers take the rows in one plain form from
//! [`for_each_query_row!`](crate::for_each_query_row), the one reader of the row syntax: one
//! at a time (a method of a decorator, a fake-nvml export), or all at once with `@table` (the
//! trait, [`Query`], the fixture structs).
//!
//! Adding a query: add its row here, write its NVML body in `nvml/mod.rs` (the trait has no
//! default bodies, so a missing one does not compile), and map it in the nvidia-smi importer if
//! nvidia-smi shows it. Old fixtures keep loading: the new field reads as "not recorded".

/// Calls `$callback! { ROWS }` with every row of the query table (see [the module](self));
/// `for_each_query!(callback [TOKENS])` puts TOKENS before the rows.
#[macro_export]
macro_rules! for_each_query {
    ($callback:path $([$($pass:tt)*])?) => {
        $callback! {
            $($($pass)*)?
            // ---- System ----
            system value fn driver_version() -> (String) => driver_version
                [nvml: nvmlSystemGetDriverVersion, unit: "", mig: na, abi: custom,
                 doc: "Driver version, e.g. `\"535.54.03\"`."];
            system value fn nvml_version() -> (String) => nvml_version
                [nvml: nvmlSystemGetNVMLVersion, unit: "", mig: na, abi: custom,
                 doc: "NVML library version, e.g. `\"12.535.54.03\"`."];
            system value fn cuda_driver_version() -> (i32) => cuda_driver_version
                [nvml: nvmlSystemGetCudaDriverVersion_v2, unit: "CUDA encoding (12020 = 12.2)", mig: na, abi: custom,
                 doc: "The CUDA driver API version the driver supports, as CUDA encodes it (`12020` for 12.2)."];
            system value fn device_count() -> (u32) => device_count
                [nvml: nvmlDeviceGetCount_v2, unit: "", mig: na, abi: custom,
                 doc: "Number of physical GPUs."];
            system value fn cuda_device_order() -> (Vec<String>) => cuda_device_order
                [nvml: cuDeviceGetUuid "libcuda, not NVML", unit: "", mig: na, abi: custom,
                 doc: "UUIDs of the physical GPUs in CUDA's default ordinal order (FASTEST_FIRST), as libcuda reports it."];
            system value fn cuda_runtime_version() -> (i32) => cuda_runtime_version
                [nvml: cudaRuntimeGetVersion "libcudart, not NVML", unit: "CUDA encoding (12020 = 12.2)", mig: na, abi: custom,
                 doc: "The version of the CUDA runtime (libcudart) this machine would load, as CUDA encodes it (`12020` for 12.2)."];
            system value fn vgpu_heterogeneous_multi_vgpu() -> (bool) => vgpu_heterogeneous_multi_vgpu
                [nvml: nvmlGetVgpuDriverCapabilities "NVML_VGPU_DRIVER_CAP_HETEROGENEOUS_MULTI_VGPU", unit: "", mig: na, abi: custom,
                 doc: "Whether the driver lets one virtual machine mix vGPU profiles of different types."];

            // ---- Identity and configuration (static) ----
            static value fn name(id: DeviceId) -> (String) => name
                [nvml: nvmlDeviceGetName, unit: "", mig: yes, abi: string,
                 doc: "Product name."];
            static value fn uuid(id: DeviceId) -> (String) => uuid
                [nvml: nvmlDeviceGetUUID, unit: "", mig: yes, abi: string,
                 doc: "UUID: `GPU-...` for a physical GPU, `MIG-...` for a MIG device."];
            static value fn serial(id: DeviceId) -> (String) => serial
                [nvml: nvmlDeviceGetSerial, unit: "", mig: no, abi: string,
                 doc: "Board serial number."];
            static value fn pci_info(id: DeviceId) -> (PciInfo) => pci_info
                [nvml: nvmlDeviceGetPciInfo_v3, unit: "", mig: no, abi: custom,
                 doc: "PCI identity."];
            static value fn minor_number(id: DeviceId) -> (u32) => minor_number
                [nvml: nvmlDeviceGetMinorNumber, unit: "", mig: no, abi: plain,
                 doc: "Minor number of the device node (`/dev/nvidiaN`)."];
            static value fn vbios_version(id: DeviceId) -> (String) => vbios_version
                [nvml: nvmlDeviceGetVbiosVersion, unit: "", mig: no, abi: string,
                 doc: "VBIOS version."];
            static value fn board_part_number(id: DeviceId) -> (String) => board_part_number
                [nvml: nvmlDeviceGetBoardPartNumber, unit: "", mig: no, abi: string,
                 doc: "Board part number."];
            static value fn inforom_image_version(id: DeviceId) -> (String) => inforom_image_version
                [nvml: nvmlDeviceGetInforomImageVersion, unit: "", mig: no, abi: string,
                 doc: "Version of the inforom image."];
            static value fn memory_bus_width(id: DeviceId) -> (u32) => memory_bus_width
                [nvml: nvmlDeviceGetMemoryBusWidth, unit: "bits", mig: no, abi: plain,
                 doc: "Width of the memory bus, bits."];
            static value fn supported_clock_event_reasons(id: DeviceId) -> (u64) => supported_clock_event_reasons
                [nvml: nvmlDeviceGetSupportedClocksEventReasons, unit: "bit mask", mig: no, abi: plain,
                 doc: "The clock event (throttle) reasons the device can report, NVML's bit mask."];
            static value fn architecture(id: DeviceId) -> (Architecture) => architecture
                [nvml: nvmlDeviceGetArchitecture, unit: "", mig: no, abi: code,
                 doc: "Architecture."];
            static value fn brand(id: DeviceId) -> (Brand) => brand
                [nvml: nvmlDeviceGetBrand, unit: "", mig: no, abi: code,
                 doc: "Brand."];
            static per_clock fn max_clock(id: DeviceId, clock: ClockType) -> (u32) => max_clocks
                [nvml: nvmlDeviceGetMaxClockInfo, unit: "MHz", mig: no, abi: custom,
                 doc: "Maximum clock of a domain, MHz."];
            static per_clock fn applications_clock(id: DeviceId, clock: ClockType) -> (u32) => applications_clocks
                [nvml: nvmlDeviceGetApplicationsClock, unit: "MHz", mig: no, abi: custom,
                 doc: "Applications clock of a domain: the clock a compute or graphics application runs at unless a boost raises it (`nvidia-smi -ac`), MHz."];
            static per_clock fn default_applications_clock(id: DeviceId, clock: ClockType) -> (u32) => default_applications_clocks
                [nvml: nvmlDeviceGetDefaultApplicationsClock, unit: "MHz", mig: no, abi: custom,
                 doc: "Default applications clock of a domain (what `nvidia-smi -rac` restores), MHz."];
            static value fn num_fans(id: DeviceId) -> (u32) => num_fans
                [nvml: nvmlDeviceGetNumFans, unit: "", mig: no, abi: plain,
                 doc: "Number of fans."];
            static split fn temperature_threshold(id: DeviceId, threshold: TemperatureThreshold) -> (u32)
                => { TemperatureThreshold::Slowdown => temperature_slowdown,
                     TemperatureThreshold::Shutdown => temperature_shutdown,
                     TemperatureThreshold::GpuMax => temperature_gpu_max,
                     TemperatureThreshold::MemoryMax => temperature_memory_max,
                     TemperatureThreshold::TargetMin => temperature_target_min,
                     TemperatureThreshold::Target => temperature_target,
                     TemperatureThreshold::TargetMax => temperature_target_max }
                [nvml: nvmlDeviceGetTemperatureThreshold, unit: "°C", mig: no, abi: custom,
                 doc: "A temperature threshold, °C."];
            static value fn power_management_mode(id: DeviceId) -> (bool) => power_management_mode
                [nvml: nvmlDeviceGetPowerManagementMode, unit: "", mig: no, abi: enable,
                 doc: "Whether power management is enabled (power readings available)."];
            static value fn power_management_limit(id: DeviceId) -> (u32) => power_management_limit
                [nvml: nvmlDeviceGetPowerManagementLimit, unit: "mW", mig: no, abi: plain,
                 doc: "Power-management limit, mW."];
            static value fn power_management_default_limit(id: DeviceId) -> (u32) => power_management_default_limit
                [nvml: nvmlDeviceGetPowerManagementDefaultLimit, unit: "mW", mig: no, abi: plain,
                 doc: "Default power-management limit (the limit the board starts with), mW."];
            static value fn power_management_limit_constraints(id: DeviceId) -> (PowerLimits) => power_management_limit_constraints
                [nvml: nvmlDeviceGetPowerManagementLimitConstraints, unit: "mW", mig: no, abi: custom,
                 doc: "Range the power-management limit may be set in, mW."];
            static value fn enforced_power_limit(id: DeviceId) -> (u32) => enforced_power_limit
                [nvml: nvmlDeviceGetEnforcedPowerLimit, unit: "mW", mig: no, abi: plain,
                 doc: "The power limit actually enforced (the lower of all limits), mW."];
            static value fn max_pcie_link_generation(id: DeviceId) -> (u32) => max_pcie_link_generation
                [nvml: nvmlDeviceGetMaxPcieLinkGeneration, unit: "", mig: no, abi: plain,
                 doc: "Highest PCIe generation the device and system support."];
            static value fn max_pcie_link_width(id: DeviceId) -> (u32) => max_pcie_link_width
                [nvml: nvmlDeviceGetMaxPcieLinkWidth, unit: "lanes", mig: no, abi: plain,
                 doc: "Widest PCIe link the device and system support (lanes)."];
            static value fn pcie_link_max_speed(id: DeviceId) -> (u32) => pcie_link_max_speed
                [nvml: nvmlDeviceGetPcieLinkMaxSpeed "NVML answers a code, NVML_PCIE_LINK_MAX_SPEED_*MBPS", unit: "Mbps per lane (MT/s)", mig: no, abi: custom,
                 doc: "Highest PCIe transfer rate of the device, per lane (32000 for PCIe 5), as the rate NVML's code names."];
            static per_link fn nvlink_state(id: DeviceId, link: u32) -> (bool) => nvlink_state
                [nvml: nvmlDeviceGetNvLinkState, unit: "", mig: no, abi: custom,
                 doc: "Whether NVLink `link` (0..[`NVLINK_MAX_LINKS`]) is active."];
            static value fn display_mode(id: DeviceId) -> (bool) => display_mode
                [nvml: nvmlDeviceGetDisplayMode, unit: "", mig: no, abi: enable,
                 doc: "Whether a display is connected (display mode)."];
            static value fn display_active(id: DeviceId) -> (bool) => display_active
                [nvml: nvmlDeviceGetDisplayActive, unit: "", mig: no, abi: enable,
                 doc: "Whether a display is initialised on the device (display active)."];
            static value fn persistence_mode(id: DeviceId) -> (bool) => persistence_mode
                [nvml: nvmlDeviceGetPersistenceMode, unit: "", mig: no, abi: enable,
                 doc: "Persistence mode."];
            static value fn ecc_mode(id: DeviceId) -> (CurrentPending<bool>) => ecc_mode
                [nvml: nvmlDeviceGetEccMode, unit: "", mig: no, abi: custom,
                 doc: "ECC mode, current and pending."];
            static value fn compute_mode(id: DeviceId) -> (ComputeMode) => compute_mode
                [nvml: nvmlDeviceGetComputeMode, unit: "", mig: no, abi: custom,
                 doc: "Compute mode."];
            static value fn cuda_compute_capability(id: DeviceId) -> (ComputeCapability) => cuda_compute_capability
                [nvml: nvmlDeviceGetCudaComputeCapability, unit: "", mig: no, abi: custom,
                 doc: "CUDA compute capability."];
            static value fn num_gpu_cores(id: DeviceId) -> (u32) => num_gpu_cores
                [nvml: nvmlDeviceGetNumGpuCores, unit: "cores", mig: no, abi: plain,
                 doc: "Number of CUDA cores."];
            static value fn board_id(id: DeviceId) -> (u32) => board_id
                [nvml: nvmlDeviceGetBoardId, unit: "", mig: no, abi: plain,
                 doc: "Board id: GPUs on the same board share it (nvidia-smi prints it in hex, `0x1800`)."];
            static value fn multi_gpu_board(id: DeviceId) -> (bool) => multi_gpu_board
                [nvml: nvmlDeviceGetMultiGpuBoard, unit: "", mig: no, abi: enable,
                 doc: "Whether the device is on a board with more than one GPU."];
            static value fn virtualization_mode(id: DeviceId) -> (VirtualizationMode) => virtualization_mode
                [nvml: nvmlDeviceGetVirtualizationMode, unit: "", mig: no, abi: code,
                 doc: "Virtualization mode: bare metal, passed through to a virtual machine, vGPU, ..."];
            static value fn accounting_mode(id: DeviceId) -> (bool) => accounting_mode
                [nvml: nvmlDeviceGetAccountingMode, unit: "", mig: no, abi: enable,
                 doc: "Whether the driver keeps per-process accounting statistics (accounting mode)."];
            static value fn gpu_operation_mode(id: DeviceId) -> (CurrentPending<GpuOperationMode>) => gpu_operation_mode
                [nvml: nvmlDeviceGetGpuOperationMode, unit: "", mig: no, abi: custom,
                 doc: "GPU operation mode (GOM), current and pending (not supported on most GPUs)."];
            static value fn driver_model(id: DeviceId) -> (CurrentPending<DriverModel>) => driver_model
                [nvml: nvmlDeviceGetDriverModel_v2, unit: "", mig: no, abi: custom,
                 doc: "Windows driver model, current and pending (not supported on Linux)."];
            static value fn mig_mode(id: DeviceId) -> (CurrentPending<bool>) => mig_mode
                [nvml: nvmlDeviceGetMigMode, unit: "", mig: no, abi: custom,
                 doc: "MIG mode, current and pending."];
            static value fn max_mig_device_count(id: DeviceId) -> (u32) => max_mig_device_count
                [nvml: nvmlDeviceGetMaxMigDeviceCount, unit: "", mig: no, abi: plain,
                 doc: "How many MIG devices the GPU can hold at most."];
            static value fn mig_device_indices(id: DeviceId) -> (Vec<u32>) => mig_device_indices
                [nvml: nvmlDeviceGetMigDeviceHandleByIndex "over slots 0..max", unit: "", mig: no, abi: custom,
                 doc: "The MIG slot indices that hold a MIG device under a physical GPU, ascending. Each gives `DeviceId::Mig { parent, index }`."];
            static value fn gpu_instance_id(id: DeviceId) -> (u32) => gpu_instance_id
                [nvml: nvmlDeviceGetGpuInstanceId, unit: "", mig: yes, abi: plain,
                 doc: "GPU-instance id of a MIG device."];
            static value fn compute_instance_id(id: DeviceId) -> (u32) => compute_instance_id
                [nvml: nvmlDeviceGetComputeInstanceId, unit: "", mig: yes, abi: plain,
                 doc: "Compute-instance id of a MIG device."];

            // ---- What nvidia-smi -q shows beyond the everyday (static) ----
            static value fn addressing_mode(id: DeviceId) -> (AddressingMode) => addressing_mode
                [nvml: nvmlDeviceGetAddressingMode "nvmlDeviceAddressingMode_v1_t", unit: "", mig: no, abi: custom,
                 doc: "How the GPU shares addresses with the CPU: none, HMM or ATS."];
            static value fn accounting_buffer_size(id: DeviceId) -> (u32) => accounting_buffer_size
                [nvml: nvmlDeviceGetAccountingBufferSize, unit: "processes", mig: no, abi: plain,
                 doc: "How many processes' accounting statistics the driver keeps."];
            static split fn inforom_version(id: DeviceId, object: InforomObject) -> (String)
                => { InforomObject::Oem => inforom_oem_version,
                     InforomObject::Ecc => inforom_ecc_version,
                     InforomObject::Power => inforom_power_version }
                [nvml: nvmlDeviceGetInforomVersion, unit: "", mig: no, abi: custom,
                 doc: "Version of one inforom object."];
            static value fn inforom_valid(id: DeviceId) -> (bool) => inforom_valid
                [nvml: nvmlDeviceValidateInforom "NVML_ERROR_CORRUPTED_INFOROM is false", unit: "", mig: no, abi: custom,
                 doc: "Whether the inforom's checksum is valid."];
            static value fn pdi(id: DeviceId) -> (u64) => pdi
                [nvml: nvmlDeviceGetPdi "nvmlPdi_v1_t", unit: "", mig: no, abi: custom,
                 doc: "The GPU's per-device identifier (PDI), a 64-bit number."];
            static value fn platform_info(id: DeviceId) -> (PlatformInfo) => platform_info
                [nvml: nvmlDeviceGetPlatformInfo "nvmlPlatformInfo_v2_t", unit: "", mig: no, abi: custom,
                 doc: "Where the GPU sits in its platform: chassis, slot, tray, host, module, fabric GUID."];
            static value fn c2c_mode(id: DeviceId) -> (bool) => c2c_mode
                [nvml: nvmlDeviceGetC2cModeInfoV "nvmlC2cModeInfo_v1_t", unit: "", mig: no, abi: custom,
                 doc: "Whether the chip-to-chip (C2C) link to a CPU is enabled."];
            static value fn host_vgpu_mode(id: DeviceId) -> (HostVgpuMode) => host_vgpu_mode
                [nvml: nvmlDeviceGetHostVgpuMode, unit: "", mig: no, abi: code,
                 doc: "The host's vGPU mode: SR-IOV or not (vGPU hosts only)."];
            static value fn vgpu_heterogeneous_mode(id: DeviceId) -> (bool) => vgpu_heterogeneous_mode
                [nvml: nvmlDeviceGetVgpuHeterogeneousMode "nvmlVgpuHeterogeneousMode_v1_t", unit: "", mig: no, abi: custom,
                 doc: "Whether vGPU profiles of different types may share the GPU (vGPU hosts only)."];
            static split fn vgpu_capability(id: DeviceId, capability: VgpuCapability) -> (u32)
                => { VgpuCapability::FractionalMultiVgpu => vgpu_fractional_multi_vgpu,
                     VgpuCapability::HeterogeneousTimesliceProfiles => vgpu_heterogeneous_timeslice_profiles,
                     VgpuCapability::HeterogeneousTimesliceSizes => vgpu_heterogeneous_timeslice_sizes,
                     VgpuCapability::HomogeneousPlacements => vgpu_homogeneous_placements,
                     VgpuCapability::MigTimeslicingSupported => vgpu_mig_timeslicing_supported,
                     VgpuCapability::MigTimeslicingEnabled => vgpu_mig_timeslicing_enabled }
                [nvml: nvmlDeviceGetVgpuCapabilities, unit: "", mig: no, abi: custom,
                 doc: "One vGPU capability of the device, NVML's number (0 or 1 for the yes/no ones)."];
            static value fn gsp_firmware_version(id: DeviceId) -> (String) => gsp_firmware_version
                [nvml: nvmlDeviceGetGspFirmwareVersion, unit: "", mig: no, abi: custom,
                 doc: "Version of the GSP firmware the driver runs on the GPU."];
            static value fn gsp_firmware_mode(id: DeviceId) -> (CurrentDefault<bool>) => gsp_firmware_mode
                [nvml: nvmlDeviceGetGspFirmwareMode, unit: "", mig: no, abi: custom,
                 doc: "Whether the driver runs on the GPU's GSP, now and by default."];
            static value fn pci_class(id: DeviceId) -> (PciClass) => pci_class
                [nvml: nvmlDeviceGetPciInfoExt "nvmlPciInfoExt_v1_t", unit: "", mig: no, abi: custom,
                 doc: "PCI base and sub class."];
            static value fn gpu_max_pcie_link_generation(id: DeviceId) -> (u32) => gpu_max_pcie_link_generation
                [nvml: nvmlDeviceGetGpuMaxPcieLinkGeneration, unit: "", mig: no, abi: plain,
                 doc: "Highest PCIe generation the GPU supports, whatever the system's."];
            static split fn pcie_atomics(id: DeviceId, direction: PcieDirection) -> (u32)
                => { PcieDirection::Tx => pcie_atomics_outbound,
                     PcieDirection::Rx => pcie_atomics_inbound }
                [nvml: nvmlDeviceGetFieldValues "NVML_FI_DEV_PCIE_OUTBOUND/INBOUND_ATOMICS_MASK", unit: "bit mask", mig: no, abi: custom,
                 doc: "The PCIe atomic operations the GPU issues (Tx, outbound) or completes (Rx, inbound), `NVML_PCIE_ATOMICS_CAP_*` bits."];
            static value fn bridge_chips(id: DeviceId) -> (Vec<BridgeChip>) => bridge_chips
                [nvml: nvmlDeviceGetBridgeChipInfo, unit: "", mig: no, abi: custom,
                 doc: "The bridge chips between the GPU and the host, nearest first."];
            static per_clock fn max_customer_boost_clock(id: DeviceId, clock: ClockType) -> (u32) => max_customer_boost_clocks
                [nvml: nvmlDeviceGetMaxCustomerBoostClock, unit: "MHz", mig: no, abi: custom,
                 doc: "Highest clock of a domain the board maker allows, MHz."];
            static value fn auto_boosted_clocks(id: DeviceId) -> (CurrentDefault<bool>) => auto_boosted_clocks
                [nvml: nvmlDeviceGetAutoBoostedClocksEnabled, unit: "", mig: no, abi: custom,
                 doc: "Whether clocks boost on their own, now and by default."];
            static split fn temperature_tlimit(id: DeviceId, threshold: TemperatureThreshold) -> (i32)
                => { TemperatureThreshold::Shutdown => tlimit_shutdown,
                     TemperatureThreshold::Slowdown => tlimit_slowdown,
                     TemperatureThreshold::GpuMax => tlimit_gpu_max,
                     TemperatureThreshold::MemoryMax => tlimit_memory_max }
                [nvml: nvmlDeviceGetFieldValues "NVML_FI_DEV_TEMPERATURE_*_TLIMIT", unit: "°C from T.Limit", mig: no, abi: custom,
                 doc: "A temperature threshold measured against T.Limit, as nvidia-smi 580 prints it (`-8` is 8 °C above T.Limit)."];
            static value fn module_power_limits(id: DeviceId) -> (ScopedPowerLimits) => module_power_limits
                [nvml: nvmlDeviceGetFieldValues "NVML_FI_DEV_POWER_*_LIMIT, scope module", unit: "mW", mig: no, abi: custom,
                 doc: "The power limits of the whole module (GPU and CPU of a Grace module), mW; a limit not reported is `None`."];
            static value fn power_smoothing(id: DeviceId) -> (PowerSmoothing) => power_smoothing
                [nvml: nvmlDeviceGetFieldValues "NVML_FI_PWR_SMOOTHING_*", unit: "W, ms", mig: no, abi: custom,
                 doc: "The power-smoothing settings; a setting not reported is `None`."];
            static value fn dram_encryption_mode(id: DeviceId) -> (CurrentPending<bool>) => dram_encryption_mode
                [nvml: nvmlDeviceGetDramEncryptionMode "nvmlDramEncryptionInfo_v1_t", unit: "", mig: no, abi: custom,
                 doc: "DRAM encryption, current and pending."];
            static value fn capabilities(id: DeviceId) -> (u32) => capabilities
                [nvml: nvmlDeviceGetCapabilities "nvmlDeviceCapabilities_v1_t", unit: "bit mask", mig: no, abi: custom,
                 doc: "The device's capabilities, `NVML_DEV_CAP_*` bits (1: extended GPU memory, EGM)."];
            static value fn hostname(id: DeviceId) -> (String) => hostname
                [nvml: nvmlDeviceGetHostname_v1 "NVML API 13, looked up by name", unit: "", mig: no, abi: custom,
                 doc: "The host name set on the device (vGPU hosts), nvidia-smi's `hostname` field."];
            static value fn device_attributes(id: DeviceId) -> (DeviceAttributes) => device_attributes
                [nvml: nvmlDeviceGetAttributes_v2, unit: "", mig: yes, abi: custom,
                 doc: "What the device is made of: SMs, shared copy engines, decoders, encoders, JPEG and OFA engines, slices, memory."];

            // ---- Readings that change over time (dynamic) ----
            dynamic value fn memory_info(id: DeviceId) -> (MemoryInfo) => memory_info
                [nvml: nvmlDeviceGetMemoryInfo_v2 "falls back to v1", unit: "bytes", mig: yes, abi: custom,
                 doc: "Frame-buffer memory."];
            dynamic value fn bar1_memory_info(id: DeviceId) -> (Bar1MemoryInfo) => bar1_memory_info
                [nvml: nvmlDeviceGetBAR1MemoryInfo, unit: "bytes", mig: yes, abi: custom,
                 doc: "BAR1 memory."];
            dynamic value fn utilization_rates(id: DeviceId) -> (Utilization) => utilization_rates
                [nvml: nvmlDeviceGetUtilizationRates, unit: "%", mig: no, abi: custom,
                 doc: "GPU and memory utilization."];
            dynamic value fn encoder_utilization(id: DeviceId) -> (CodecUtilization) => encoder_utilization
                [nvml: nvmlDeviceGetEncoderUtilization, unit: "%", mig: no, abi: custom,
                 doc: "Encoder utilization."];
            dynamic value fn decoder_utilization(id: DeviceId) -> (CodecUtilization) => decoder_utilization
                [nvml: nvmlDeviceGetDecoderUtilization, unit: "%", mig: no, abi: custom,
                 doc: "Decoder utilization."];
            dynamic per_clock fn clock(id: DeviceId, clock: ClockType) -> (u32) => clocks
                [nvml: nvmlDeviceGetClockInfo, unit: "MHz", mig: no, abi: custom,
                 doc: "Current clock of a domain, MHz."];
            dynamic value fn fan_speed(id: DeviceId) -> (u32) => fan_speed
                [nvml: nvmlDeviceGetFanSpeed, unit: "%", mig: no, abi: plain,
                 doc: "Intended fan speed, percent (`nvmlDeviceGetFanSpeed`)."];
            dynamic per_fan fn fan_speed_of(id: DeviceId, fan: u32) -> (u32) => fan_speeds
                [nvml: nvmlDeviceGetFanSpeed_v2, unit: "%", mig: no, abi: custom,
                 doc: "Intended speed of one fan, percent (`nvmlDeviceGetFanSpeed_v2`)."];
            dynamic per_fan fn fan_target_speed_of(id: DeviceId, fan: u32) -> (u32) => fan_target_speeds
                [nvml: nvmlDeviceGetTargetFanSpeed, unit: "%", mig: no, abi: custom,
                 doc: "The speed one fan is driven towards, percent (`nvmlDeviceGetTargetFanSpeed`)."];
            dynamic value fn temperature(id: DeviceId) -> (u32) => temperature
                [nvml: nvmlDeviceGetTemperature "sensor GPU", unit: "°C", mig: no, abi: custom,
                 doc: "GPU core temperature, °C."];
            dynamic value fn memory_temperature(id: DeviceId) -> (u32) => memory_temperature
                [nvml: nvmlDeviceGetFieldValues "NVML_FI_DEV_MEMORY_TEMP", unit: "°C", mig: no, abi: custom,
                 doc: "Memory (HBM) temperature, °C."];
            dynamic value fn power_usage(id: DeviceId) -> (u32) => power_usage
                [nvml: nvmlDeviceGetPowerUsage, unit: "mW", mig: no, abi: plain,
                 doc: "Power draw, mW."];
            dynamic value fn total_energy_consumption(id: DeviceId) -> (u64) => total_energy_consumption
                [nvml: nvmlDeviceGetTotalEnergyConsumption, unit: "mJ", mig: no, abi: plain,
                 doc: "Energy consumed since the driver was loaded, mJ."];
            dynamic value fn performance_state(id: DeviceId) -> (u32) => performance_state
                [nvml: nvmlDeviceGetPerformanceState, unit: "P0..P15, 32 unknown", mig: no, abi: plain,
                 doc: "Performance state, 0 (P0, most) to 15 (P15, least); 32 is \"unknown\"."];
            dynamic value fn current_pcie_link_generation(id: DeviceId) -> (u32) => current_pcie_link_generation
                [nvml: nvmlDeviceGetCurrPcieLinkGeneration, unit: "", mig: no, abi: plain,
                 doc: "Current PCIe generation."];
            dynamic value fn current_pcie_link_width(id: DeviceId) -> (u32) => current_pcie_link_width
                [nvml: nvmlDeviceGetCurrPcieLinkWidth, unit: "lanes", mig: no, abi: plain,
                 doc: "Current PCIe link width (lanes)."];
            dynamic split fn pcie_throughput(id: DeviceId, direction: PcieDirection) -> (u32)
                => { PcieDirection::Tx => pcie_tx_throughput,
                     PcieDirection::Rx => pcie_rx_throughput }
                [nvml: nvmlDeviceGetPcieThroughput, unit: "KB/s", mig: no, abi: custom,
                 doc: "PCIe throughput over the last 20 ms, KB/s."];
            dynamic per_link fn nvlink_throughput(id: DeviceId, link: u32) -> (NvLinkCounters) => nvlink_throughput
                [nvml: nvmlDeviceGetFieldValues "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX/RX", unit: "KiB, cumulative", mig: no, abi: custom,
                 doc: "Cumulative NVLink data counters of one link."];
            dynamic per_link fn nvlink_error_counters(id: DeviceId, link: u32) -> (NvLinkErrorCounters) => nvlink_error_counters
                [nvml: nvmlDeviceGetNvLinkErrorCounter "replay, recovery, CRC flit, CRC data", unit: "errors", mig: no, abi: custom,
                 doc: "Error counters of one NVLink link: replays, recoveries, CRC flit and CRC data errors."];
            dynamic per_ecc fn ecc_errors(id: DeviceId, kind: EccErrorKind, counter: EccCounter) -> (u64) => ecc_errors
                [nvml: nvmlDeviceGetTotalEccErrors, unit: "errors", mig: no, abi: custom,
                 doc: "ECC error count."];
            dynamic split fn memory_errors(id: DeviceId, location: MemoryLocation) -> (LocationEccCounts)
                => { MemoryLocation::L1Cache => ecc_l1_cache,
                     MemoryLocation::L2Cache => ecc_l2_cache,
                     MemoryLocation::DeviceMemory => ecc_device_memory,
                     MemoryLocation::RegisterFile => ecc_register_file,
                     MemoryLocation::TextureMemory => ecc_texture_memory,
                     MemoryLocation::TextureShm => ecc_texture_shm,
                     MemoryLocation::Cbu => ecc_cbu,
                     MemoryLocation::Sram => ecc_sram }
                [nvml: nvmlDeviceGetMemoryErrorCounter "volatile/aggregate, corrected/uncorrected", unit: "errors", mig: no, abi: custom,
                 doc: "ECC error counts of one memory location; a count the device does not keep there is `None`, and a location with none is an error."];
            dynamic value fn clock_event_reasons(id: DeviceId) -> (u64) => clock_event_reasons
                [nvml: nvmlDeviceGetCurrentClocksEventReasons, unit: "bit mask", mig: no, abi: plain,
                 doc: "Clock event (throttle) reasons, NVML's bit mask."];
            dynamic value fn pcie_replay_counter(id: DeviceId) -> (u32) => pcie_replay_counter
                [nvml: nvmlDeviceGetPcieReplayCounter, unit: "replays", mig: no, abi: plain,
                 doc: "PCIe replays since the driver loaded."];
            dynamic split fn retired_pages(id: DeviceId, cause: RetirementCause) -> (Vec<u64>)
                => { RetirementCause::SingleBit => retired_pages_single_bit,
                     RetirementCause::DoubleBit => retired_pages_double_bit }
                [nvml: nvmlDeviceGetRetiredPages, unit: "addresses", mig: no, abi: custom,
                 doc: "Addresses of the memory pages retired for one cause (Kepler to Turing; Ampere and newer remap rows instead)."];
            dynamic value fn retired_pages_pending(id: DeviceId) -> (bool) => retired_pages_pending
                [nvml: nvmlDeviceGetRetiredPagesPendingStatus, unit: "", mig: no, abi: enable,
                 doc: "Whether a page retirement waits for the next reset."];
            dynamic value fn remapped_rows(id: DeviceId) -> (RemappedRows) => remapped_rows
                [nvml: nvmlDeviceGetRemappedRows, unit: "rows", mig: no, abi: custom,
                 doc: "Remapped memory rows: correctable, uncorrectable, pending, failure (Ampere and newer)."];
            dynamic samples fn events(id: DeviceId, since_us: u64) -> (Vec<GpuEvent>) => events
                [nvml: nvmlEventSetWait_v2 "on a listener thread, after nvmlEventSetCreate and nvmlDeviceRegisterEvents; by default for the health kinds only, EventKind::HEALTH, not clock or P-state changes", unit: "", mig: no, abi: custom,
                 doc: "The events of the kinds the backend listens for (by default [`EventKind::HEALTH`]: XID, ECC, power-source, MIG and DRAM-retirement events, not clock or P-state changes) delivered since the backend started, oldest first, the newest [`MAX_EVENTS`] at most, newer than `since_us` (microseconds since the Unix epoch; 0 for all). Reading them never waits."];
            dynamic value fn compute_processes(id: DeviceId) -> (Vec<ProcessInfo>) => compute_processes
                [nvml: nvmlDeviceGetComputeRunningProcesses_v3 "falls back to _v2 and v1", unit: "", mig: yes, abi: custom,
                 doc: "Processes with a compute context on the device."];
            dynamic value fn graphics_processes(id: DeviceId) -> (Vec<ProcessInfo>) => graphics_processes
                [nvml: nvmlDeviceGetGraphicsRunningProcesses_v3 "falls back to _v2 and v1", unit: "", mig: no, abi: custom,
                 doc: "Processes with a graphics context on the device."];
            dynamic samples fn process_utilization(id: DeviceId, since_us: u64) -> (Vec<ProcessUtilizationSample>) => process_utilization
                [nvml: nvmlDeviceGetProcessUtilization "recorded with timestamp 0", unit: "%", mig: no, abi: custom,
                 doc: "Per-process utilization samples newer than `since_us` (microseconds since the Unix epoch; 0 for every sample the driver holds)."];
            dynamic value fn gpm_metrics(id: DeviceId) -> (GpmMetrics) => gpm_metrics
                [nvml: nvmlGpmMetricsGet "between the previous call's sample and this call's; nvmlGpmSampleGet, nvmlGpmMigSampleGet for MIG", unit: "% and MiB/s", mig: yes, abi: custom,
                 doc: "GPM activity (Hopper and newer) since the previous call for this device: the first call takes the first sample and answers `no_data`. No sleep, one sample per call."];

            // ---- What nvidia-smi -q shows beyond the everyday (dynamic) ----
            dynamic value fn gpu_recovery_action(id: DeviceId) -> (GpuRecoveryAction) => gpu_recovery_action
                [nvml: nvmlDeviceGetFieldValues "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION", unit: "", mig: no, abi: custom,
                 doc: "What the driver says should be done for the GPU to work again (none, reset, reboot, drain)."];
            dynamic value fn pcie_replay_rollover_counter(id: DeviceId) -> (u32) => pcie_replay_rollover_counter
                [nvml: nvmlDeviceGetFieldValues "NVML_FI_DEV_PCIE_REPLAY_ROLLOVER_COUNTER", unit: "rollovers", mig: no, abi: custom,
                 doc: "How often the PCIe replay counter rolled over."];
            dynamic split fn clock_event_time(id: DeviceId, reason: ClockEventCounter) -> (u64)
                => { ClockEventCounter::SwPowerCap => clock_event_time_sw_power_cap,
                     ClockEventCounter::SyncBoost => clock_event_time_sync_boost,
                     ClockEventCounter::SwThermalSlowdown => clock_event_time_sw_thermal_slowdown,
                     ClockEventCounter::HwThermalSlowdown => clock_event_time_hw_thermal_slowdown,
                     ClockEventCounter::HwPowerBrake => clock_event_time_hw_power_brake }
                [nvml: nvmlDeviceGetFieldValues "NVML_FI_DEV_CLOCKS_EVENT_REASON_*", unit: "ns", mig: no, abi: custom,
                 doc: "How long clocks were held down for one reason since the driver loaded, ns."];
            dynamic value fn jpeg_utilization(id: DeviceId) -> (CodecUtilization) => jpeg_utilization
                [nvml: nvmlDeviceGetJpgUtilization, unit: "%", mig: no, abi: custom,
                 doc: "JPEG decoder utilization."];
            dynamic value fn ofa_utilization(id: DeviceId) -> (CodecUtilization) => ofa_utilization
                [nvml: nvmlDeviceGetOfaUtilization, unit: "%", mig: no, abi: custom,
                 doc: "Optical-flow accelerator utilization."];
            dynamic value fn encoder_stats(id: DeviceId) -> (SessionStats) => encoder_stats
                [nvml: nvmlDeviceGetEncoderStats, unit: "", mig: no, abi: custom,
                 doc: "Encoder sessions, their average frame rate and latency."];
            dynamic value fn fbc_stats(id: DeviceId) -> (SessionStats) => fbc_stats
                [nvml: nvmlDeviceGetFBCStats, unit: "", mig: no, abi: custom,
                 doc: "Frame-buffer capture sessions, their average frame rate and latency."];
            dynamic value fn sram_ecc_status(id: DeviceId) -> (SramEccStatus) => sram_ecc_status
                [nvml: nvmlDeviceGetSramEccErrorStatus "nvmlEccSramErrorStatus_v1_t", unit: "errors", mig: no, abi: custom,
                 doc: "SRAM ECC errors by kind (parity, SEC-DED) and source, and whether their threshold was exceeded."];
            dynamic value fn repair_status(id: DeviceId) -> (RepairStatus) => repair_status
                [nvml: nvmlDeviceGetRepairStatus "nvmlRepairStatus_v1_t", unit: "", mig: no, abi: custom,
                 doc: "Memory channel and TPC repairs waiting for the next reset."];
            dynamic value fn inactive_remapped_rows(id: DeviceId) -> (InactiveRemappedRows) => inactive_remapped_rows
                [nvml: nvmlDeviceGetFieldValues "NVML_FI_DEV_REMAPPED_ROWS_COR/UNC_INACTIVE", unit: "rows", mig: no, abi: custom,
                 doc: "Row remappings not in force yet, for correctable and uncorrectable errors."];
            dynamic value fn row_remapper_histogram(id: DeviceId) -> (RowRemapperHistogram) => row_remapper_histogram
                [nvml: nvmlDeviceGetRowRemapperHistogram, unit: "banks", mig: no, abi: custom,
                 doc: "How many memory banks have how many spare rows left."];
            dynamic value fn margin_temperature(id: DeviceId) -> (i32) => margin_temperature
                [nvml: nvmlDeviceGetMarginTemperature "nvmlMarginTemperature_v1_t", unit: "°C", mig: no, abi: custom,
                 doc: "How far the GPU is below its T.Limit temperature, °C (nvidia-smi's `GPU T.Limit Temp`)."];
            dynamic value fn protected_memory(id: DeviceId) -> (ProtectedMemory) => protected_memory
                [nvml: nvmlDeviceGetConfComputeProtectedMemoryUsage, unit: "bytes", mig: no, abi: custom,
                 doc: "Memory set aside for confidential computing."];
            dynamic value fn fabric_info(id: DeviceId) -> (FabricInfo) => fabric_info
                [nvml: nvmlDeviceGetGpuFabricInfoV "nvmlGpuFabricInfo_v3_t", unit: "", mig: no, abi: custom,
                 doc: "The GPU's registration in an NVLink fabric: state, status, clique, cluster, health."];
            dynamic value fn bbx_flush(id: DeviceId) -> (BbxFlush) => bbx_flush
                [nvml: nvmlDeviceGetLastBBXFlushTime, unit: "µs", mig: no, abi: custom,
                 doc: "When the inforom's black box was last flushed, and how long that took."];
            dynamic split fn power_average(id: DeviceId, scope: PowerScope) -> (u32)
                => { PowerScope::Gpu => power_average_gpu,
                     PowerScope::Module => power_average_module,
                     PowerScope::Memory => power_average_memory }
                [nvml: nvmlDeviceGetFieldValues "NVML_FI_DEV_POWER_AVERAGE, scope", unit: "mW", mig: no, abi: custom,
                 doc: "Power drawn by one scope, averaged over a second, mW."];
            dynamic split fn power_instant(id: DeviceId, scope: PowerScope) -> (u32)
                => { PowerScope::Gpu => power_instant_gpu,
                     PowerScope::Module => power_instant_module,
                     PowerScope::Memory => power_instant_memory }
                [nvml: nvmlDeviceGetFieldValues "NVML_FI_DEV_POWER_INSTANT, scope", unit: "mW", mig: no, abi: custom,
                 doc: "Power drawn by one scope now, mW."];
        }
    };
}

/// Calls `$each! { ROW }` once per row of the query table, for the callers that write one
/// item per query (a method, an export); or, as `for_each_query_row!(@table $callback)`,
/// `$callback! { {ROW} {ROW} ... }` once with every row, each in braces, for the callers that
/// write items from the whole table (the trait, the `Query` enum, the fixture structs). The row
/// comes in one form, each part one token tree:
///
/// ```text
/// SECTION SHAPE METHOD (ARGS) (TYPE) FIELD NVML [NOTE] UNIT MIG ABI DOC
/// ```
///
/// where `[NOTE]` is `[]` when the row has no note. This is the only place that reads the row
/// syntax of [`for_each_query!`](crate::for_each_query).
#[macro_export]
macro_rules! for_each_query_row {
    (@rows $mode:ident $target:path; $(
        $section:ident $shape:ident fn $method:ident ( $($arg:ident : $argty:ident),* ) -> ($($ty:tt)+)
            => $store:tt
            [nvml: $nvml:ident $($note:literal)?, unit: $unit:literal, mig: $mig:ident, abi: $abi:ident, doc: $doc:literal];
    )*) => {
        $crate::for_each_query_row!(@$mode $target; $({
            $section $shape $method ($($arg : $argty),*) ($($ty)+) $store
            $nvml [$($note)?] $unit $mig $abi $doc
        })*);
    };
    (@each $each:path; $({ $($row:tt)* })*) => {
        $( $each! { $($row)* } )*
    };
    (@table $callback:path; $($rows:tt)*) => {
        $callback! { $($rows)* }
    };
    (@table $callback:path) => {
        $crate::for_each_query!($crate::for_each_query_row [@rows table $callback;]);
    };
    ($each:path) => {
        $crate::for_each_query!($crate::for_each_query_row [@rows each $each;]);
    };
}

/// What the query table says about one query; [`QUERIES`] lists them all in table order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueryInfo {
    /// The query.
    pub query: Query,
    /// The [`crate::GpuBackend`] method.
    pub name: &'static str,
    /// `system`, `static` or `dynamic`.
    pub section: &'static str,
    /// The shape: `value`, `per_clock`, `per_link`, `per_fan`, `per_ecc`, `split`, `samples`.
    pub shape: &'static str,
    /// The fixture fields that hold its answers.
    pub fields: &'static [&'static str],
    /// The Rust value type of one answer.
    pub value: &'static str,
    /// The unit, or `""`.
    pub unit: &'static str,
    /// The NVML entry point.
    pub nvml: &'static str,
    /// A note on the NVML side, or `""`.
    pub nvml_note: &'static str,
    /// Whether a MIG device answers it: `yes`, `no`, or `na` (system queries).
    pub mig: &'static str,
    /// What it tells.
    pub doc: &'static str,
}

macro_rules! query_infos {
    ($({
        $section:ident $shape:ident $method:ident ($($arg:ident : $argty:ident),*) ($($ty:tt)+) $store:tt
        $nvml:ident [$($note:literal)?] $unit:literal $mig:ident $abi:ident $doc:literal
    })*) => {
        /// One query of the table, named by its [`crate::GpuBackend`] method, so that a
        /// misspelt query does not compile (see [the module](self)). The variants are the
        /// methods' own names, in table order: the table names each query once, and the
        /// name a fixture, a cost profile or a log writes is the variant's
        /// ([`Query::as_str`]), as rust-analyzer's generated `SyntaxKind` keeps its
        /// grammar's names.
        #[allow(non_camel_case_types)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Query {
            $(
                #[doc = concat!("The query [`GpuBackend::", stringify!($method), "`](crate::GpuBackend::", stringify!($method), ").")]
                $method,
            )*
        }

        impl Query {
            /// Every query, in table order.
            pub const ALL: &'static [Query] = &[$(Query::$method,)*];

            /// The [`crate::GpuBackend`] method's name: `"pcie_throughput"`.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Query::$method => stringify!($method),)*
                }
            }
        }

        /// Every query of the table, in table order.
        pub const QUERIES: &[QueryInfo] = &[$(
            QueryInfo {
                query: Query::$method,
                name: stringify!($method),
                section: stringify!($section),
                shape: stringify!($shape),
                fields: query_infos!(@fields $store),
                value: stringify!($($ty)+),
                unit: $unit,
                nvml: stringify!($nvml),
                nvml_note: concat!("" $(, $note)?),
                mig: stringify!($mig),
                doc: $doc,
            },
        )*];
    };
    (@fields $field:ident) => { &[stringify!($field)] };
    (@fields { $($variant:path => $field:ident),+ }) => { &[$(stringify!($field)),+] };
}

for_each_query_row!(@table query_infos);

impl Query {
    /// What the table says about the query: its section, shape, fixture fields, NVML entry
    /// point, ...
    pub fn info(self) -> &'static QueryInfo {
        // QUERIES and the variants are written from the same rows, in the same order.
        &QUERIES[self as usize]
    }

    /// Whether the query is one of the table's `dynamic` rows: asked at every frame, what a
    /// refresh (and a `gpu_devices::QueryPlan`) is about.
    pub fn is_dynamic(self) -> bool {
        self.info().section == "dynamic"
    }

    /// Whether the query is one of the table's `static` rows: a device's fact that does not
    /// change while the driver is loaded (name, UUID, limits, max clocks, modes), asked once
    /// per device.
    pub fn is_static(self) -> bool {
        self.info().section == "static"
    }
}

impl std::fmt::Display for Query {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is no query of the table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no query is named {0:?}")]
pub struct UnknownQuery(pub String);

/// The query of a [`crate::GpuBackend`] method's name (`"pcie_throughput"`).
impl std::str::FromStr for Query {
    type Err = UnknownQuery;

    fn from_str(name: &str) -> Result<Query, UnknownQuery> {
        Query::ALL
            .iter()
            .copied()
            .find(|q| q.as_str() == name)
            .ok_or_else(|| UnknownQuery(name.to_string()))
    }
}

/// The query table as the Markdown table kept in `docs/fixture-format.md` (a test checks that
/// the page holds exactly this).
pub fn markdown_table() -> String {
    let mut out = String::from(
        "| query | section | shape | fixture field(s) | value | unit | NVML | MIG |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for q in QUERIES {
        let fields: Vec<String> = q.fields.iter().map(|f| format!("`{f}`")).collect();
        let value: String = q.value.chars().filter(|c| !c.is_whitespace()).collect();
        let nvml = if q.nvml_note.is_empty() {
            format!("`{}`", q.nvml)
        } else {
            format!("`{}` ({})", q.nvml, q.nvml_note)
        };
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | `{}` | {} | {} | {} |\n",
            q.name,
            q.section,
            q.shape.replace('_', " "),
            fields.join(", "),
            value,
            q.unit,
            nvml,
            q.mig,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_query_and_fixture_field_is_named_once() {
        let mut names: Vec<_> = QUERIES.iter().map(|q| q.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), QUERIES.len(), "a query is declared twice");
        let mut fields: Vec<_> = QUERIES.iter().flat_map(|q| q.fields.iter()).collect();
        let n = fields.len();
        fields.sort_unstable();
        fields.dedup();
        assert_eq!(fields.len(), n, "a fixture field is used by two queries");
    }

    #[test]
    fn each_query_names_its_row_and_reads_back_from_its_name() {
        assert_eq!(Query::ALL.len(), QUERIES.len());
        for (q, info) in Query::ALL.iter().zip(QUERIES) {
            assert_eq!(q.info(), info);
            assert_eq!(info.query, *q);
            assert_eq!(q.as_str(), info.name);
            assert_eq!(q.to_string(), info.name);
            assert_eq!(info.name.parse::<Query>(), Ok(*q));
        }
        assert_eq!(
            "pcie_tx_throughput".parse::<Query>(),
            Err(UnknownQuery("pcie_tx_throughput".into())),
            "a fixture field, not a query"
        );
        assert!(Query::pcie_throughput.is_dynamic());
        assert!(!Query::name.is_dynamic());
        assert!(Query::name.is_static() && Query::max_clock.is_static());
        assert!(!Query::pcie_throughput.is_static() && !Query::driver_version.is_static());
    }
}
