//! Every metric family the exporter publishes, declared once in `for_each_family!`'s table:
//! its name (a `pub const` below, the one place a name is spelled), unit, kind and help, the
//! declarations `families.rs` builds from. docs/exporter.md lists them with their labels. A
//! counter's samples are named with `_total` appended to its family name; the constants hold
//! the family name.
//!
//! A program that reads gpuscope's metrics (from Prometheus or from an exporter) names them
//! through these constants, so that a renamed family is a compile error, not an empty graph.

/// The table of every family, in the order the exporter declares them: one row each,
/// `CONSTANT = "name" [unit, kind] "help";`. The unit is the name's unit suffix, for
/// OpenMetrics' `# UNIT` line (`none` for a name without one); the kind is a [`crate::Kind`]
/// variant; the help is the `# HELP` sentence. It hands the rows to `$callback!`: the name
/// constants below and the declarations of `families.rs` are both made from it.
macro_rules! for_each_family {
    ($callback:path) => {
        $callback! {
            // ---- Host, and the exporter's own sample ----
            HOST_CPUS = "gpuscope_host_cpus" [none, Gauge]
                "Logical CPUs of the host.";
            HOST_CPU_UTILIZATION_RATIO = "gpuscope_host_cpu_utilization_ratio" [ratio, Gauge]
                "Whole-host CPU use, as a ratio of all CPUs (1 is every CPU busy).";
            HOST_MEMORY_TOTAL_BYTES = "gpuscope_host_memory_total_bytes" [bytes, Gauge]
                "Physical memory of the host.";
            HOST_MEMORY_USED_BYTES = "gpuscope_host_memory_used_bytes" [bytes, Gauge]
                "Physical memory in use on the host.";
            HOST_SWAP_TOTAL_BYTES = "gpuscope_host_swap_total_bytes" [bytes, Gauge]
                "Swap space of the host.";
            HOST_SWAP_USED_BYTES = "gpuscope_host_swap_used_bytes" [bytes, Gauge]
                "Swap space in use on the host.";
            HOST_LOAD1 = "gpuscope_host_load1" [none, Gauge]
                "Load average over 1 minute.";
            HOST_LOAD5 = "gpuscope_host_load5" [none, Gauge]
                "Load average over 5 minutes.";
            HOST_LOAD15 = "gpuscope_host_load15" [none, Gauge]
                "Load average over 15 minutes.";
            EXPORTER_SAMPLE_DURATION_SECONDS = "gpuscope_exporter_sample_duration_seconds" [seconds, Gauge]
                "How long the exporter took to take the sample served now.";
            EXPORTER_SAMPLE_TIMESTAMP_SECONDS = "gpuscope_exporter_sample_timestamp_seconds" [seconds, Gauge]
                "When the sample served now was taken, seconds since the Unix epoch.";
            // ---- Status ----
            DEVICE_UP = "gpuscope_device_up" [none, Gauge]
                "1 when the device answered its last sample, 0 when it is lost or its memory query failed.";
            DEVICE_FAILED_FIELDS = "gpuscope_device_failed_fields" [none, Gauge]
                "Fields of the last sample whose query failed unexpectedly (not the N/A answers).";
            // ---- Activity (the GPM families: Hopper and newer) ----
            DEVICE_UTILIZATION_RATIO = "gpuscope_device_utilization_ratio" [ratio, Gauge]
                "Fraction of the last sample period a kernel was running on the device.";
            DEVICE_MEMORY_BANDWIDTH_UTILIZATION_RATIO = "gpuscope_device_memory_bandwidth_utilization_ratio" [ratio, Gauge]
                "Fraction of the last sample period device memory was read or written.";
            DEVICE_ENCODER_UTILIZATION_RATIO = "gpuscope_device_encoder_utilization_ratio" [ratio, Gauge]
                "Video encoder utilization.";
            DEVICE_DECODER_UTILIZATION_RATIO = "gpuscope_device_decoder_utilization_ratio" [ratio, Gauge]
                "Video decoder utilization.";
            DEVICE_GPM_GRAPHICS_ENGINE_ACTIVE_RATIO = "gpuscope_device_gpm_graphics_engine_active_ratio" [ratio, Gauge]
                "GPM: time the graphics engine was active (DCGM_FI_PROF_GR_ENGINE_ACTIVE).";
            DEVICE_GPM_SM_ACTIVE_RATIO = "gpuscope_device_gpm_sm_active_ratio" [ratio, Gauge]
                "GPM: SMs with at least one warp resident, averaged over the SMs (DCGM_FI_PROF_SM_ACTIVE).";
            DEVICE_GPM_SM_OCCUPANCY_RATIO = "gpuscope_device_gpm_sm_occupancy_ratio" [ratio, Gauge]
                "GPM: resident warps over the most the SMs hold (DCGM_FI_PROF_SM_OCCUPANCY).";
            DEVICE_GPM_DRAM_ACTIVE_RATIO = "gpuscope_device_gpm_dram_active_ratio" [ratio, Gauge]
                "GPM: DRAM bandwidth used, of the peak (DCGM_FI_PROF_DRAM_ACTIVE).";
            DEVICE_GPM_PIPE_ACTIVE_RATIO = "gpuscope_device_gpm_pipe_active_ratio" [ratio, Gauge]
                "GPM: time each pipe was active (pipe: tensor, tensor_dfma, tensor_hmma, tensor_imma, fp64, fp32, fp16, integer; DCGM_FI_PROF_PIPE_*_ACTIVE).";
            DEVICE_GPM_PCIE_TRANSMIT_BYTES_PER_SECOND = "gpuscope_device_gpm_pcie_transmit_bytes_per_second" [bytes_per_second, Gauge]
                "GPM: PCIe transmit (DCGM_FI_PROF_PCIE_TX_BYTES).";
            DEVICE_GPM_PCIE_RECEIVE_BYTES_PER_SECOND = "gpuscope_device_gpm_pcie_receive_bytes_per_second" [bytes_per_second, Gauge]
                "GPM: PCIe receive (DCGM_FI_PROF_PCIE_RX_BYTES).";
            DEVICE_GPM_NVLINK_TRANSMIT_BYTES_PER_SECOND = "gpuscope_device_gpm_nvlink_transmit_bytes_per_second" [bytes_per_second, Gauge]
                "GPM: NVLink transmit over all links (DCGM_FI_PROF_NVLINK_TX_BYTES).";
            DEVICE_GPM_NVLINK_RECEIVE_BYTES_PER_SECOND = "gpuscope_device_gpm_nvlink_receive_bytes_per_second" [bytes_per_second, Gauge]
                "GPM: NVLink receive over all links (DCGM_FI_PROF_NVLINK_RX_BYTES).";
            DEVICE_GPM_ENGINE_ACTIVE_RATIO = "gpuscope_device_gpm_engine_active_ratio" [ratio, Gauge]
                "GPM: time each media engine was active (engine: nvdec, nvjpg, nvofa; engine_index; DCGM_FI_PROF_NVDEC*_ACTIVE, NVJPG*, NVOFA*).";
            // ---- Memory ----
            DEVICE_MEMORY_TOTAL_BYTES = "gpuscope_device_memory_total_bytes" [bytes, Gauge]
                "Frame-buffer memory of the device.";
            DEVICE_MEMORY_USED_BYTES = "gpuscope_device_memory_used_bytes" [bytes, Gauge]
                "Frame-buffer memory in use.";
            DEVICE_MEMORY_FREE_BYTES = "gpuscope_device_memory_free_bytes" [bytes, Gauge]
                "Frame-buffer memory free.";
            DEVICE_MEMORY_USED_RATIO = "gpuscope_device_memory_used_ratio" [ratio, Gauge]
                "Frame-buffer memory in use, as a ratio of the total.";
            // ---- Clocks ----
            DEVICE_CLOCK_HERTZ = "gpuscope_device_clock_hertz" [hertz, Gauge]
                "Current clock of each domain (graphics, sm, memory, video).";
            DEVICE_CLOCK_MAX_HERTZ = "gpuscope_device_clock_max_hertz" [hertz, Gauge]
                "Maximum clock of each domain (graphics, sm, memory, video).";
            DEVICE_CLOCK_EVENT_REASON = "gpuscope_device_clock_event_reason" [none, Gauge]
                "1 when a clock event (throttle) reason holds the clocks down now, 0 when not, per reason.";
            // ---- Thermal ----
            DEVICE_TEMPERATURE_CELSIUS = "gpuscope_device_temperature_celsius" [celsius, Gauge]
                "Core temperature.";
            DEVICE_MEMORY_TEMPERATURE_CELSIUS = "gpuscope_device_memory_temperature_celsius" [celsius, Gauge]
                "Memory (HBM) temperature.";
            DEVICE_TEMPERATURE_THRESHOLD_CELSIUS = "gpuscope_device_temperature_threshold_celsius" [celsius, Gauge]
                "Temperature thresholds (shutdown, slowdown, gpu_max, memory_max).";
            DEVICE_FAN_SPEED_RATIO = "gpuscope_device_fan_speed_ratio" [ratio, Gauge]
                "Intended fan speed, as a ratio of the maximum.";
            DEVICE_FAN_SPEED_PER_FAN_RATIO = "gpuscope_device_fan_speed_per_fan_ratio" [ratio, Gauge]
                "Intended speed of each fan, as a ratio of its maximum.";
            DEVICE_FAN_TARGET_SPEED_RATIO = "gpuscope_device_fan_target_speed_ratio" [ratio, Gauge]
                "The speed each fan is driven towards, as a ratio of its maximum.";
            // ---- Power ----
            DEVICE_PERFORMANCE_STATE = "gpuscope_device_performance_state" [none, Gauge]
                "Performance state: 0 (P0, highest performance) to 15 (P15, lowest).";
            DEVICE_POWER_USAGE_WATTS = "gpuscope_device_power_usage_watts" [watts, Gauge]
                "Power draw.";
            DEVICE_POWER_LIMIT_WATTS = "gpuscope_device_power_limit_watts" [watts, Gauge]
                "Power-management limit.";
            DEVICE_ENERGY_CONSUMPTION_JOULES = "gpuscope_device_energy_consumption_joules" [joules, Counter]
                "Energy used since the driver was loaded.";
            DEVICE_POWER_ENFORCED_LIMIT_WATTS = "gpuscope_device_power_enforced_limit_watts" [watts, Gauge]
                "The power limit in force (the lowest of all limits).";
            DEVICE_POWER_DEFAULT_LIMIT_WATTS = "gpuscope_device_power_default_limit_watts" [watts, Gauge]
                "The power-management limit the board starts with.";
            DEVICE_POWER_MIN_LIMIT_WATTS = "gpuscope_device_power_min_limit_watts" [watts, Gauge]
                "The lowest the power-management limit may be set to.";
            DEVICE_POWER_MAX_LIMIT_WATTS = "gpuscope_device_power_max_limit_watts" [watts, Gauge]
                "The highest the power-management limit may be set to.";
            // ---- Interconnect ----
            DEVICE_PCIE_TRANSMIT_BYTES_PER_SECOND = "gpuscope_device_pcie_transmit_bytes_per_second" [bytes_per_second, Gauge]
                "PCIe transmit throughput over the last 20 ms the driver measured.";
            DEVICE_PCIE_RECEIVE_BYTES_PER_SECOND = "gpuscope_device_pcie_receive_bytes_per_second" [bytes_per_second, Gauge]
                "PCIe receive throughput over the last 20 ms the driver measured.";
            DEVICE_PCIE_REPLAYS = "gpuscope_device_pcie_replays" [none, Counter]
                "PCIe replays (retries) since the driver loaded.";
            DEVICE_NVLINK_TRANSMIT_BYTES = "gpuscope_device_nvlink_transmit_bytes" [bytes, Counter]
                "Data transmitted over NVLink, per device or per link with --nvlink-per-link (use rate() for throughput).";
            DEVICE_NVLINK_RECEIVE_BYTES = "gpuscope_device_nvlink_receive_bytes" [bytes, Counter]
                "Data received over NVLink, per device or per link with --nvlink-per-link (use rate() for throughput).";
            DEVICE_NVLINK_ERRORS = "gpuscope_device_nvlink_errors" [none, Counter]
                "NVLink errors per counter (replay, recovery, crc_flit, crc_data), per device or per link with --nvlink-per-link.";
            // ---- Health ----
            DEVICE_NEEDS_ATTENTION = "gpuscope_device_needs_attention" [none, Gauge]
                "How many reasons the device needs attention for (0: none); the reasons are gpuscope_device_attention_reason.";
            DEVICE_ATTENTION_REASON = "gpuscope_device_attention_reason" [none, Gauge]
                "Always 1, one series per reason the device needs attention for (label reason).";
            DEVICE_LAST_XID = "gpuscope_device_last_xid" [none, Gauge]
                "The code of the newest XID error since the exporter started (0: none); absent where events cannot be known.";
            DEVICE_XID_ERRORS = "gpuscope_device_xid_errors" [none, Gauge]
                "XID errors since the exporter started, per code (label xid), among the newest 256 events kept.";
            DEVICE_ECC_ERRORS = "gpuscope_device_ecc_errors" [none, Counter]
                "ECC errors, per error (corrected, uncorrected) and counter (volatile: since the driver loaded; aggregate: the device's life).";
            DEVICE_ECC_ERRORS_BY_LOCATION = "gpuscope_device_ecc_errors_by_location" [none, Gauge]
                "ECC errors per memory location (location), kind (corrected, uncorrected) and counter (volatile: since the driver loaded, aggregate: over the device's life).";
            DEVICE_RETIRED_PAGES = "gpuscope_device_retired_pages" [none, Gauge]
                "Memory pages retired, per cause (single_bit: multiple single-bit ECC errors; double_bit: a double-bit error). Kepler to Turing.";
            DEVICE_RETIRED_PAGES_PENDING = "gpuscope_device_retired_pages_pending" [none, Gauge]
                "1 when a page retirement waits for the next reset.";
            DEVICE_REMAPPED_ROWS = "gpuscope_device_remapped_rows" [none, Gauge]
                "Memory rows remapped, per cause (correctable, uncorrectable errors). Ampere and newer.";
            DEVICE_ROW_REMAP_PENDING = "gpuscope_device_row_remap_pending" [none, Gauge]
                "1 when a row remap waits for the next reset.";
            DEVICE_ROW_REMAP_FAILURE = "gpuscope_device_row_remap_failure" [none, Gauge]
                "1 when a row remap failed.";
            // ---- Identity ----
            DEVICE_INFO = "gpuscope_device_info" [none, Gauge]
                "Always 1; the labels say what the device is (bus id, serial, VBIOS, driver).";
            // ---- Pods ----
            POD_GPU_MEMORY_BYTES = "gpuscope_pod_gpu_memory_bytes" [bytes, Gauge]
                "GPU memory the pod's processes use on the device (absent when one of them is N/A).";
            POD_GPU_SM_UTILIZATION_RATIO = "gpuscope_pod_gpu_sm_utilization_ratio" [ratio, Gauge]
                "The pod's share of the device's SMs, summed over its processes' newest per-process samples.";
            POD_PROCESSES = "gpuscope_pod_processes" [none, Gauge]
                "Processes of the pod with a context on the device.";
            // ---- Processes (published with `Options::processes`) ----
            PROCESS_GPU_MEMORY_BYTES = "gpuscope_process_gpu_memory_bytes" [bytes, Gauge]
                "GPU memory the process uses on the device.";
            PROCESS_GPU_SM_UTILIZATION_RATIO = "gpuscope_process_gpu_sm_utilization_ratio" [ratio, Gauge]
                "The process's share of the device's SMs in its newest per-process sample (absent once that sample is over 15 s old).";
            PROCESS_GPU_MEMORY_BANDWIDTH_UTILIZATION_RATIO = "gpuscope_process_gpu_memory_bandwidth_utilization_ratio" [ratio, Gauge]
                "The process's share of device memory bandwidth in its newest per-process sample.";
            PROCESS_GPU_ENCODER_UTILIZATION_RATIO = "gpuscope_process_gpu_encoder_utilization_ratio" [ratio, Gauge]
                "The process's share of the video encoder in its newest per-process sample.";
            PROCESS_GPU_DECODER_UTILIZATION_RATIO = "gpuscope_process_gpu_decoder_utilization_ratio" [ratio, Gauge]
                "The process's share of the video decoder in its newest per-process sample.";
            PROCESS_GPU_UTILIZATION_SAMPLE_AGE_SECONDS = "gpuscope_process_gpu_utilization_sample_age_seconds" [seconds, Gauge]
                "How old the process's newest per-process utilization sample is.";
            PROCESS_CPU_UTILIZATION_RATIO = "gpuscope_process_cpu_utilization_ratio" [ratio, Gauge]
                "CPU use of the process, as a ratio of one CPU (2 is two CPUs busy).";
            PROCESS_RESIDENT_MEMORY_BYTES = "gpuscope_process_resident_memory_bytes" [bytes, Gauge]
                "Resident host memory of the process.";
            PROCESS_RUNNING_TIME_SECONDS = "gpuscope_process_running_time_seconds" [seconds, Gauge]
                "How long the process has been running.";
        }
    };
}
pub(crate) use for_each_family;

/// A unit of [`for_each_family!`]'s table as a family's `unit`: `none` is `None`.
macro_rules! unit {
    (none) => {
        None
    };
    ($unit:ident) => {
        Some(stringify!($unit))
    };
}
pub(crate) use unit;

/// The name constants and [`ALL`], from [`for_each_family!`]'s rows.
macro_rules! name_constants {
    ($($constant:ident = $name:literal [$unit:ident, $kind:ident] $help:literal;)*) => {
        $(
            #[doc = concat!("`", $name, "`: ", $help)]
            pub const $constant: &str = $name;
        )*

        /// Every family name above, in the order the exporter declares them.
        pub const ALL: &[&str] = &[$($constant),*];
    };
}

for_each_family!(name_constants);
