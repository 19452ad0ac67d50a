//! Every metric name this crate reads, in one place: the names `gpuscope export` serves
//! (docs/exporter.md), taken from gpu-export's own constants, so that only gpu-export knows
//! metric names and this crate reads exactly what that one writes.

use gpu_export::names as export;

/// Whether the GPU answers (`0` when it is lost or its memory cannot be read).
pub const DEVICE_UP: &str = export::DEVICE_UP;
/// Total memory, bytes.
pub const DEVICE_MEMORY_TOTAL: &str = export::DEVICE_MEMORY_TOTAL_BYTES;
/// Used memory, bytes.
pub const DEVICE_MEMORY_USED: &str = export::DEVICE_MEMORY_USED_BYTES;
/// Free memory, bytes.
pub const DEVICE_MEMORY_FREE: &str = export::DEVICE_MEMORY_FREE_BYTES;
/// GPU utilization, 0 to 1.
pub const DEVICE_UTILIZATION: &str = export::DEVICE_UTILIZATION_RATIO;
/// Memory-bandwidth utilization, 0 to 1.
pub const DEVICE_MEMORY_UTILIZATION: &str = export::DEVICE_MEMORY_BANDWIDTH_UTILIZATION_RATIO;
/// Temperature, °C.
pub const DEVICE_TEMPERATURE: &str = export::DEVICE_TEMPERATURE_CELSIUS;
/// Fan speed, 0 to 1.
pub const DEVICE_FAN_SPEED: &str = export::DEVICE_FAN_SPEED_RATIO;
/// Power draw, watts.
pub const DEVICE_POWER_USAGE: &str = export::DEVICE_POWER_USAGE_WATTS;
/// Power limit, watts.
pub const DEVICE_POWER_LIMIT: &str = export::DEVICE_POWER_LIMIT_WATTS;
/// A device's identity labels (name, UUID, bus id, driver version); its value is 1.
pub const DEVICE_INFO: &str = export::DEVICE_INFO;

/// A process's GPU memory, bytes.
pub const PROCESS_GPU_MEMORY: &str = export::PROCESS_GPU_MEMORY_BYTES;
/// A process's SM utilization, 0 to 1.
pub const PROCESS_SM_UTILIZATION: &str = export::PROCESS_GPU_SM_UTILIZATION_RATIO;

/// The exporter's latest sample time (Unix seconds, its clock): its latest value over the
/// lookback tells each host's sample time, and lists hosts whose exporter is down too.
pub const SAMPLE_TIME_FAMILY: &str = export::EXPORTER_SAMPLE_TIMESTAMP_SECONDS;

/// Prometheus's own `up` series: whether it could scrape a target.
pub const UP: &str = "up";
