//! Every metric name this crate reads, in one place.
//!
//! These are the names `gpuscope export` serves (docs/exporter.md). The exporter's own crate,
//! `gpu-export`, is being made at the same time as this one with its `gpu_export::names`
//! constants; once it lands, these are to point at those, so that only gpu-export knows
//! metric names and this crate only reads what it writes.

/// Whether the GPU answers (`0` when it is lost or its memory cannot be read).
pub const DEVICE_UP: &str = "gpuscope_device_up";
/// Total memory, bytes.
pub const DEVICE_MEMORY_TOTAL: &str = "gpuscope_device_memory_total_bytes";
/// Used memory, bytes.
pub const DEVICE_MEMORY_USED: &str = "gpuscope_device_memory_used_bytes";
/// Free memory, bytes.
pub const DEVICE_MEMORY_FREE: &str = "gpuscope_device_memory_free_bytes";
/// GPU utilization, 0 to 1.
pub const DEVICE_UTILIZATION: &str = "gpuscope_device_utilization_ratio";
/// Memory-bandwidth utilization, 0 to 1.
pub const DEVICE_MEMORY_UTILIZATION: &str = "gpuscope_device_memory_bandwidth_utilization_ratio";
/// Temperature, °C.
pub const DEVICE_TEMPERATURE: &str = "gpuscope_device_temperature_celsius";
/// Fan speed, 0 to 1.
pub const DEVICE_FAN_SPEED: &str = "gpuscope_device_fan_speed_ratio";
/// Power draw, watts.
pub const DEVICE_POWER_USAGE: &str = "gpuscope_device_power_usage_watts";
/// Power limit, watts.
pub const DEVICE_POWER_LIMIT: &str = "gpuscope_device_power_limit_watts";
/// A device's identity labels (name, UUID, bus id, driver version); its value is 1.
pub const DEVICE_INFO: &str = "gpuscope_device_info";

/// A process's GPU memory, bytes.
pub const PROCESS_GPU_MEMORY: &str = "gpuscope_process_gpu_memory_bytes";
/// A process's SM utilization, 0 to 1.
pub const PROCESS_SM_UTILIZATION: &str = "gpuscope_process_gpu_sm_utilization_ratio";

/// The exporter's latest sample time (Unix seconds, its clock): its latest value over the
/// lookback tells each host's sample time, and lists hosts whose exporter is down too.
pub const SAMPLE_TIME_FAMILY: &str = "gpuscope_exporter_sample_timestamp_seconds";

/// Prometheus's own `up` series: whether it could scrape a target.
pub const UP: &str = "up";
