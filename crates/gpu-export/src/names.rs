//! Every metric family name the exporter publishes, one `pub const` each: the one place a
//! name is spelled (docs/exporter.md lists them with their labels). A counter's samples are
//! named with `_total` appended to its family name; the constants hold the family name.
//!
//! A program that reads gpuscope's metrics (from Prometheus or from an exporter) names them
//! through these constants, so that a renamed family is a compile error, not an empty graph.

/// `gpuscope_host_cpus`: Logical CPUs of the host.
pub const HOST_CPUS: &str = "gpuscope_host_cpus";
/// `gpuscope_host_cpu_utilization_ratio`: Whole-host CPU use, as a ratio of all CPUs (1 is every CPU busy).
pub const HOST_CPU_UTILIZATION_RATIO: &str = "gpuscope_host_cpu_utilization_ratio";
/// `gpuscope_host_memory_total_bytes`: Physical memory of the host.
pub const HOST_MEMORY_TOTAL_BYTES: &str = "gpuscope_host_memory_total_bytes";
/// `gpuscope_host_memory_used_bytes`: Physical memory in use on the host.
pub const HOST_MEMORY_USED_BYTES: &str = "gpuscope_host_memory_used_bytes";
/// `gpuscope_host_swap_total_bytes`: Swap space of the host.
pub const HOST_SWAP_TOTAL_BYTES: &str = "gpuscope_host_swap_total_bytes";
/// `gpuscope_host_swap_used_bytes`: Swap space in use on the host.
pub const HOST_SWAP_USED_BYTES: &str = "gpuscope_host_swap_used_bytes";
/// `gpuscope_host_load1`: Load average over 1 minute.
pub const HOST_LOAD1: &str = "gpuscope_host_load1";
/// `gpuscope_host_load5`: Load average over 5 minutes.
pub const HOST_LOAD5: &str = "gpuscope_host_load5";
/// `gpuscope_host_load15`: Load average over 15 minutes.
pub const HOST_LOAD15: &str = "gpuscope_host_load15";
/// `gpuscope_exporter_sample_duration_seconds`: How long the exporter took to take the sample served now.
pub const EXPORTER_SAMPLE_DURATION_SECONDS: &str = "gpuscope_exporter_sample_duration_seconds";
/// `gpuscope_exporter_sample_timestamp_seconds`: When the sample served now was taken, seconds since the Unix epoch.
pub const EXPORTER_SAMPLE_TIMESTAMP_SECONDS: &str = "gpuscope_exporter_sample_timestamp_seconds";
/// `gpuscope_device_up`: 1 when the device answered its last sample, 0 when it is lost or its memory query failed.
pub const DEVICE_UP: &str = "gpuscope_device_up";
/// `gpuscope_device_failed_fields`: Fields of the last sample whose query failed unexpectedly (not the N/A answers).
pub const DEVICE_FAILED_FIELDS: &str = "gpuscope_device_failed_fields";
/// `gpuscope_device_utilization_ratio`: Fraction of the last sample period a kernel was running on the device.
pub const DEVICE_UTILIZATION_RATIO: &str = "gpuscope_device_utilization_ratio";
/// `gpuscope_device_memory_bandwidth_utilization_ratio`: Fraction of the last sample period device memory was read or written.
pub const DEVICE_MEMORY_BANDWIDTH_UTILIZATION_RATIO: &str =
    "gpuscope_device_memory_bandwidth_utilization_ratio";
/// `gpuscope_device_encoder_utilization_ratio`: Video encoder utilization.
pub const DEVICE_ENCODER_UTILIZATION_RATIO: &str = "gpuscope_device_encoder_utilization_ratio";
/// `gpuscope_device_decoder_utilization_ratio`: Video decoder utilization.
pub const DEVICE_DECODER_UTILIZATION_RATIO: &str = "gpuscope_device_decoder_utilization_ratio";
/// `gpuscope_device_memory_total_bytes`: Frame-buffer memory of the device.
pub const DEVICE_MEMORY_TOTAL_BYTES: &str = "gpuscope_device_memory_total_bytes";
/// `gpuscope_device_memory_used_bytes`: Frame-buffer memory in use.
pub const DEVICE_MEMORY_USED_BYTES: &str = "gpuscope_device_memory_used_bytes";
/// `gpuscope_device_memory_free_bytes`: Frame-buffer memory free.
pub const DEVICE_MEMORY_FREE_BYTES: &str = "gpuscope_device_memory_free_bytes";
/// `gpuscope_device_memory_used_ratio`: Frame-buffer memory in use, as a ratio of the total.
pub const DEVICE_MEMORY_USED_RATIO: &str = "gpuscope_device_memory_used_ratio";
/// `gpuscope_device_clock_hertz`: Current clock of each domain (graphics, sm, memory, video).
pub const DEVICE_CLOCK_HERTZ: &str = "gpuscope_device_clock_hertz";
/// `gpuscope_device_clock_max_hertz`: Maximum clock of each domain (graphics, sm, memory, video).
pub const DEVICE_CLOCK_MAX_HERTZ: &str = "gpuscope_device_clock_max_hertz";
/// `gpuscope_device_fan_speed_ratio`: Intended fan speed, as a ratio of the maximum.
pub const DEVICE_FAN_SPEED_RATIO: &str = "gpuscope_device_fan_speed_ratio";
/// `gpuscope_device_fan_speed_per_fan_ratio`: Intended speed of each fan, as a ratio of its maximum.
pub const DEVICE_FAN_SPEED_PER_FAN_RATIO: &str = "gpuscope_device_fan_speed_per_fan_ratio";
/// `gpuscope_device_performance_state`: Performance state: 0 (P0, highest performance) to 15 (P15, lowest).
pub const DEVICE_PERFORMANCE_STATE: &str = "gpuscope_device_performance_state";
/// `gpuscope_device_temperature_celsius`: Core temperature.
pub const DEVICE_TEMPERATURE_CELSIUS: &str = "gpuscope_device_temperature_celsius";
/// `gpuscope_device_power_usage_watts`: Power draw.
pub const DEVICE_POWER_USAGE_WATTS: &str = "gpuscope_device_power_usage_watts";
/// `gpuscope_device_power_limit_watts`: Power-management limit.
pub const DEVICE_POWER_LIMIT_WATTS: &str = "gpuscope_device_power_limit_watts";
/// `gpuscope_device_energy_consumption_joules`: Energy used since the driver was loaded.
pub const DEVICE_ENERGY_CONSUMPTION_JOULES: &str = "gpuscope_device_energy_consumption_joules";
/// `gpuscope_device_needs_attention`: How many reasons the device needs attention for (0: none); the reasons are gpuscope_device_attention_reason.
pub const DEVICE_NEEDS_ATTENTION: &str = "gpuscope_device_needs_attention";
/// `gpuscope_device_attention_reason`: Always 1, one series per reason the device needs attention for (label reason).
pub const DEVICE_ATTENTION_REASON: &str = "gpuscope_device_attention_reason";
/// `gpuscope_device_last_xid`: The code of the newest XID error since the exporter started (0: none); absent where events cannot be known.
pub const DEVICE_LAST_XID: &str = "gpuscope_device_last_xid";
/// `gpuscope_device_xid_errors`: XID errors since the exporter started, per code (label xid), among the newest 256 events kept.
pub const DEVICE_XID_ERRORS: &str = "gpuscope_device_xid_errors";
/// `gpuscope_device_ecc_errors`: ECC errors, per error (corrected, uncorrected) and counter (volatile: since the driver loaded; aggregate: the device's life).
pub const DEVICE_ECC_ERRORS: &str = "gpuscope_device_ecc_errors";
/// `gpuscope_device_retired_pages`: Memory pages retired, per cause (single_bit: multiple single-bit ECC errors; double_bit: a double-bit error). Kepler to Turing.
pub const DEVICE_RETIRED_PAGES: &str = "gpuscope_device_retired_pages";
/// `gpuscope_device_retired_pages_pending`: 1 when a page retirement waits for the next reset.
pub const DEVICE_RETIRED_PAGES_PENDING: &str = "gpuscope_device_retired_pages_pending";
/// `gpuscope_device_remapped_rows`: Memory rows remapped, per cause (correctable, uncorrectable errors). Ampere and newer.
pub const DEVICE_REMAPPED_ROWS: &str = "gpuscope_device_remapped_rows";
/// `gpuscope_device_row_remap_pending`: 1 when a row remap waits for the next reset.
pub const DEVICE_ROW_REMAP_PENDING: &str = "gpuscope_device_row_remap_pending";
/// `gpuscope_device_row_remap_failure`: 1 when a row remap failed.
pub const DEVICE_ROW_REMAP_FAILURE: &str = "gpuscope_device_row_remap_failure";
/// `gpuscope_device_pcie_replays`: PCIe replays (retries) since the driver loaded.
pub const DEVICE_PCIE_REPLAYS: &str = "gpuscope_device_pcie_replays";
/// `gpuscope_device_clock_event_reason`: 1 when a clock event (throttle) reason holds the clocks down now, 0 when not, per reason.
pub const DEVICE_CLOCK_EVENT_REASON: &str = "gpuscope_device_clock_event_reason";
/// `gpuscope_device_temperature_threshold_celsius`: Temperature thresholds (shutdown, slowdown, gpu_max, memory_max).
pub const DEVICE_TEMPERATURE_THRESHOLD_CELSIUS: &str =
    "gpuscope_device_temperature_threshold_celsius";
/// `gpuscope_device_power_enforced_limit_watts`: The power limit in force (the lowest of all limits).
pub const DEVICE_POWER_ENFORCED_LIMIT_WATTS: &str = "gpuscope_device_power_enforced_limit_watts";
/// `gpuscope_device_power_default_limit_watts`: The power-management limit the board starts with.
pub const DEVICE_POWER_DEFAULT_LIMIT_WATTS: &str = "gpuscope_device_power_default_limit_watts";
/// `gpuscope_device_power_min_limit_watts`: The lowest the power-management limit may be set to.
pub const DEVICE_POWER_MIN_LIMIT_WATTS: &str = "gpuscope_device_power_min_limit_watts";
/// `gpuscope_device_power_max_limit_watts`: The highest the power-management limit may be set to.
pub const DEVICE_POWER_MAX_LIMIT_WATTS: &str = "gpuscope_device_power_max_limit_watts";
/// `gpuscope_device_pcie_transmit_bytes_per_second`: PCIe transmit throughput over the last 20 ms the driver measured.
pub const DEVICE_PCIE_TRANSMIT_BYTES_PER_SECOND: &str =
    "gpuscope_device_pcie_transmit_bytes_per_second";
/// `gpuscope_device_pcie_receive_bytes_per_second`: PCIe receive throughput over the last 20 ms the driver measured.
pub const DEVICE_PCIE_RECEIVE_BYTES_PER_SECOND: &str =
    "gpuscope_device_pcie_receive_bytes_per_second";
/// `gpuscope_device_nvlink_transmit_bytes`: Data transmitted over NVLink, per device or per link with --nvlink-per-link (use rate() for throughput).
pub const DEVICE_NVLINK_TRANSMIT_BYTES: &str = "gpuscope_device_nvlink_transmit_bytes";
/// `gpuscope_device_nvlink_receive_bytes`: Data received over NVLink, per device or per link with --nvlink-per-link (use rate() for throughput).
pub const DEVICE_NVLINK_RECEIVE_BYTES: &str = "gpuscope_device_nvlink_receive_bytes";
/// `gpuscope_device_memory_temperature_celsius`: Memory (HBM) temperature.
pub const DEVICE_MEMORY_TEMPERATURE_CELSIUS: &str = "gpuscope_device_memory_temperature_celsius";
/// `gpuscope_device_fan_target_speed_ratio`: The speed each fan is driven towards, as a ratio of its maximum.
pub const DEVICE_FAN_TARGET_SPEED_RATIO: &str = "gpuscope_device_fan_target_speed_ratio";
/// `gpuscope_device_nvlink_errors`: NVLink errors per counter (replay, recovery, crc_flit, crc_data), per device or per link with --nvlink-per-link.
pub const DEVICE_NVLINK_ERRORS: &str = "gpuscope_device_nvlink_errors";
/// `gpuscope_device_ecc_errors_by_location`: ECC errors per memory location (location), kind (corrected, uncorrected) and counter (volatile: since the driver loaded, aggregate: over the device's life).
pub const DEVICE_ECC_ERRORS_BY_LOCATION: &str = "gpuscope_device_ecc_errors_by_location";
/// `gpuscope_device_gpm_graphics_engine_active_ratio`: GPM: time the graphics engine was active (DCGM_FI_PROF_GR_ENGINE_ACTIVE).
pub const DEVICE_GPM_GRAPHICS_ENGINE_ACTIVE_RATIO: &str =
    "gpuscope_device_gpm_graphics_engine_active_ratio";
/// `gpuscope_device_gpm_sm_active_ratio`: GPM: SMs with at least one warp resident, averaged over the SMs (DCGM_FI_PROF_SM_ACTIVE).
pub const DEVICE_GPM_SM_ACTIVE_RATIO: &str = "gpuscope_device_gpm_sm_active_ratio";
/// `gpuscope_device_gpm_sm_occupancy_ratio`: GPM: resident warps over the most the SMs hold (DCGM_FI_PROF_SM_OCCUPANCY).
pub const DEVICE_GPM_SM_OCCUPANCY_RATIO: &str = "gpuscope_device_gpm_sm_occupancy_ratio";
/// `gpuscope_device_gpm_dram_active_ratio`: GPM: DRAM bandwidth used, of the peak (DCGM_FI_PROF_DRAM_ACTIVE).
pub const DEVICE_GPM_DRAM_ACTIVE_RATIO: &str = "gpuscope_device_gpm_dram_active_ratio";
/// `gpuscope_device_gpm_pipe_active_ratio`: GPM: time each pipe was active (pipe: tensor, tensor_dfma, tensor_hmma, tensor_imma, fp64, fp32, fp16, integer; DCGM_FI_PROF_PIPE_*_ACTIVE).
pub const DEVICE_GPM_PIPE_ACTIVE_RATIO: &str = "gpuscope_device_gpm_pipe_active_ratio";
/// `gpuscope_device_gpm_pcie_transmit_bytes_per_second`: GPM: PCIe transmit (DCGM_FI_PROF_PCIE_TX_BYTES).
pub const DEVICE_GPM_PCIE_TRANSMIT_BYTES_PER_SECOND: &str =
    "gpuscope_device_gpm_pcie_transmit_bytes_per_second";
/// `gpuscope_device_gpm_pcie_receive_bytes_per_second`: GPM: PCIe receive (DCGM_FI_PROF_PCIE_RX_BYTES).
pub const DEVICE_GPM_PCIE_RECEIVE_BYTES_PER_SECOND: &str =
    "gpuscope_device_gpm_pcie_receive_bytes_per_second";
/// `gpuscope_device_gpm_nvlink_transmit_bytes_per_second`: GPM: NVLink transmit over all links (DCGM_FI_PROF_NVLINK_TX_BYTES).
pub const DEVICE_GPM_NVLINK_TRANSMIT_BYTES_PER_SECOND: &str =
    "gpuscope_device_gpm_nvlink_transmit_bytes_per_second";
/// `gpuscope_device_gpm_nvlink_receive_bytes_per_second`: GPM: NVLink receive over all links (DCGM_FI_PROF_NVLINK_RX_BYTES).
pub const DEVICE_GPM_NVLINK_RECEIVE_BYTES_PER_SECOND: &str =
    "gpuscope_device_gpm_nvlink_receive_bytes_per_second";
/// `gpuscope_device_gpm_engine_active_ratio`: GPM: time each media engine was active (engine: nvdec, nvjpg, nvofa; engine_index; DCGM_FI_PROF_NVDEC*_ACTIVE, NVJPG*, NVOFA*).
pub const DEVICE_GPM_ENGINE_ACTIVE_RATIO: &str = "gpuscope_device_gpm_engine_active_ratio";
/// `gpuscope_device_info`: Always 1; the labels say what the device is (bus id, serial, VBIOS, driver).
pub const DEVICE_INFO: &str = "gpuscope_device_info";
/// `gpuscope_pod_gpu_memory_bytes`: GPU memory the pod's processes use on the device (absent when one of them is N/A).
pub const POD_GPU_MEMORY_BYTES: &str = "gpuscope_pod_gpu_memory_bytes";
/// `gpuscope_pod_gpu_sm_utilization_ratio`: The pod's share of the device's SMs, summed over its processes' newest per-process samples.
pub const POD_GPU_SM_UTILIZATION_RATIO: &str = "gpuscope_pod_gpu_sm_utilization_ratio";
/// `gpuscope_pod_processes`: Processes of the pod with a context on the device.
pub const POD_PROCESSES: &str = "gpuscope_pod_processes";
/// `gpuscope_process_gpu_memory_bytes`: GPU memory the process uses on the device.
pub const PROCESS_GPU_MEMORY_BYTES: &str = "gpuscope_process_gpu_memory_bytes";
/// `gpuscope_process_gpu_sm_utilization_ratio`: The process's share of the device's SMs in its newest per-process sample (absent once that sample is over 15 s old).
pub const PROCESS_GPU_SM_UTILIZATION_RATIO: &str = "gpuscope_process_gpu_sm_utilization_ratio";
/// `gpuscope_process_gpu_memory_bandwidth_utilization_ratio`: The process's share of device memory bandwidth in its newest per-process sample.
pub const PROCESS_GPU_MEMORY_BANDWIDTH_UTILIZATION_RATIO: &str =
    "gpuscope_process_gpu_memory_bandwidth_utilization_ratio";
/// `gpuscope_process_gpu_encoder_utilization_ratio`: The process's share of the video encoder in its newest per-process sample.
pub const PROCESS_GPU_ENCODER_UTILIZATION_RATIO: &str =
    "gpuscope_process_gpu_encoder_utilization_ratio";
/// `gpuscope_process_gpu_decoder_utilization_ratio`: The process's share of the video decoder in its newest per-process sample.
pub const PROCESS_GPU_DECODER_UTILIZATION_RATIO: &str =
    "gpuscope_process_gpu_decoder_utilization_ratio";
/// `gpuscope_process_gpu_utilization_sample_age_seconds`: How old the process's newest per-process utilization sample is.
pub const PROCESS_GPU_UTILIZATION_SAMPLE_AGE_SECONDS: &str =
    "gpuscope_process_gpu_utilization_sample_age_seconds";
/// `gpuscope_process_cpu_utilization_ratio`: CPU use of the process, as a ratio of one CPU (2 is two CPUs busy).
pub const PROCESS_CPU_UTILIZATION_RATIO: &str = "gpuscope_process_cpu_utilization_ratio";
/// `gpuscope_process_resident_memory_bytes`: Resident host memory of the process.
pub const PROCESS_RESIDENT_MEMORY_BYTES: &str = "gpuscope_process_resident_memory_bytes";
/// `gpuscope_process_running_time_seconds`: How long the process has been running.
pub const PROCESS_RUNNING_TIME_SECONDS: &str = "gpuscope_process_running_time_seconds";

/// Every family name above, in the order the exporter declares them.
pub const ALL: &[&str] = &[
    HOST_CPUS,
    HOST_CPU_UTILIZATION_RATIO,
    HOST_MEMORY_TOTAL_BYTES,
    HOST_MEMORY_USED_BYTES,
    HOST_SWAP_TOTAL_BYTES,
    HOST_SWAP_USED_BYTES,
    HOST_LOAD1,
    HOST_LOAD5,
    HOST_LOAD15,
    EXPORTER_SAMPLE_DURATION_SECONDS,
    EXPORTER_SAMPLE_TIMESTAMP_SECONDS,
    DEVICE_UP,
    DEVICE_FAILED_FIELDS,
    DEVICE_UTILIZATION_RATIO,
    DEVICE_MEMORY_BANDWIDTH_UTILIZATION_RATIO,
    DEVICE_ENCODER_UTILIZATION_RATIO,
    DEVICE_DECODER_UTILIZATION_RATIO,
    DEVICE_GPM_GRAPHICS_ENGINE_ACTIVE_RATIO,
    DEVICE_GPM_SM_ACTIVE_RATIO,
    DEVICE_GPM_SM_OCCUPANCY_RATIO,
    DEVICE_GPM_DRAM_ACTIVE_RATIO,
    DEVICE_GPM_PIPE_ACTIVE_RATIO,
    DEVICE_GPM_PCIE_TRANSMIT_BYTES_PER_SECOND,
    DEVICE_GPM_PCIE_RECEIVE_BYTES_PER_SECOND,
    DEVICE_GPM_NVLINK_TRANSMIT_BYTES_PER_SECOND,
    DEVICE_GPM_NVLINK_RECEIVE_BYTES_PER_SECOND,
    DEVICE_GPM_ENGINE_ACTIVE_RATIO,
    DEVICE_MEMORY_TOTAL_BYTES,
    DEVICE_MEMORY_USED_BYTES,
    DEVICE_MEMORY_FREE_BYTES,
    DEVICE_MEMORY_USED_RATIO,
    DEVICE_CLOCK_HERTZ,
    DEVICE_CLOCK_MAX_HERTZ,
    DEVICE_CLOCK_EVENT_REASON,
    DEVICE_TEMPERATURE_CELSIUS,
    DEVICE_MEMORY_TEMPERATURE_CELSIUS,
    DEVICE_TEMPERATURE_THRESHOLD_CELSIUS,
    DEVICE_FAN_SPEED_RATIO,
    DEVICE_FAN_SPEED_PER_FAN_RATIO,
    DEVICE_FAN_TARGET_SPEED_RATIO,
    DEVICE_PERFORMANCE_STATE,
    DEVICE_POWER_USAGE_WATTS,
    DEVICE_POWER_LIMIT_WATTS,
    DEVICE_ENERGY_CONSUMPTION_JOULES,
    DEVICE_POWER_ENFORCED_LIMIT_WATTS,
    DEVICE_POWER_DEFAULT_LIMIT_WATTS,
    DEVICE_POWER_MIN_LIMIT_WATTS,
    DEVICE_POWER_MAX_LIMIT_WATTS,
    DEVICE_PCIE_TRANSMIT_BYTES_PER_SECOND,
    DEVICE_PCIE_RECEIVE_BYTES_PER_SECOND,
    DEVICE_PCIE_REPLAYS,
    DEVICE_NVLINK_TRANSMIT_BYTES,
    DEVICE_NVLINK_RECEIVE_BYTES,
    DEVICE_NVLINK_ERRORS,
    DEVICE_NEEDS_ATTENTION,
    DEVICE_ATTENTION_REASON,
    DEVICE_LAST_XID,
    DEVICE_XID_ERRORS,
    DEVICE_ECC_ERRORS,
    DEVICE_ECC_ERRORS_BY_LOCATION,
    DEVICE_RETIRED_PAGES,
    DEVICE_RETIRED_PAGES_PENDING,
    DEVICE_REMAPPED_ROWS,
    DEVICE_ROW_REMAP_PENDING,
    DEVICE_ROW_REMAP_FAILURE,
    DEVICE_INFO,
    POD_GPU_MEMORY_BYTES,
    POD_GPU_SM_UTILIZATION_RATIO,
    POD_PROCESSES,
    PROCESS_GPU_MEMORY_BYTES,
    PROCESS_GPU_SM_UTILIZATION_RATIO,
    PROCESS_GPU_MEMORY_BANDWIDTH_UTILIZATION_RATIO,
    PROCESS_GPU_ENCODER_UTILIZATION_RATIO,
    PROCESS_GPU_DECODER_UTILIZATION_RATIO,
    PROCESS_GPU_UTILIZATION_SAMPLE_AGE_SECONDS,
    PROCESS_CPU_UTILIZATION_RATIO,
    PROCESS_RESIDENT_MEMORY_BYTES,
    PROCESS_RUNNING_TIME_SECONDS,
];
