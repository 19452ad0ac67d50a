//! What a recording is made of: the metric recorded ([`DeviceMetric`]), the devices as a
//! recording names them ([`DeviceLabel`]) and one reading of every device ([`Sample`]): what
//! the recorder writes and its sinks take, below both.

use std::fmt;

use gpu_backend::DeviceId;
use gpu_devices::{Device, Na};
use serde::Serialize;

/// What a [`crate::Recorder`] records of each device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceMetric {
    /// Frame-buffer memory used, bytes (with the total kept as a reference).
    MemoryUsed,
    /// GPU utilization, percent.
    GpuUtilization,
    /// Memory-bandwidth utilization, percent.
    MemoryUtilization,
    /// Core temperature, °C.
    Temperature,
    /// Power draw, watts.
    PowerUsage,
}

impl DeviceMetric {
    /// The metric's name in files: `memory_used`.
    pub fn name(self) -> &'static str {
        match self {
            DeviceMetric::MemoryUsed => "memory_used",
            DeviceMetric::GpuUtilization => "gpu_utilization",
            DeviceMetric::MemoryUtilization => "memory_utilization",
            DeviceMetric::Temperature => "temperature",
            DeviceMetric::PowerUsage => "power_usage",
        }
    }

    /// The metric for people: `memory used`.
    pub fn title(self) -> &'static str {
        match self {
            DeviceMetric::MemoryUsed => "memory used",
            DeviceMetric::GpuUtilization => "gpu utilization",
            DeviceMetric::MemoryUtilization => "memory bandwidth utilization",
            DeviceMetric::Temperature => "temperature",
            DeviceMetric::PowerUsage => "power usage",
        }
    }

    /// The name for a plot's title and axis: `Memory used`, `GPU utilization`, ...
    pub fn label(self) -> &'static str {
        match self {
            DeviceMetric::MemoryUsed => "Memory used",
            DeviceMetric::GpuUtilization => "GPU utilization",
            DeviceMetric::MemoryUtilization => "Memory bandwidth utilization",
            DeviceMetric::Temperature => "Temperature",
            DeviceMetric::PowerUsage => "Power draw",
        }
    }

    /// The unit values are recorded in: `B`, `%`, `C` or `W`.
    pub fn unit(self) -> &'static str {
        match self {
            DeviceMetric::MemoryUsed => "B",
            DeviceMetric::GpuUtilization | DeviceMetric::MemoryUtilization => "%",
            DeviceMetric::Temperature => "C",
            DeviceMetric::PowerUsage => "W",
        }
    }

    /// The value of `device` now, and the reference it is measured against (the total, for
    /// memory). Each call asks the backend one query.
    pub fn read(self, device: &Device) -> (Option<f64>, Option<f64>) {
        let f = |v: Na<u32>| v.into_option().map(f64::from);
        match self {
            DeviceMetric::MemoryUsed => match device.memory_info().into_option() {
                Some(m) => (Some(m.used as f64), Some(m.total as f64)),
                None => (None, None),
            },
            DeviceMetric::GpuUtilization => (f(device.gpu_utilization()), Some(100.0)),
            DeviceMetric::MemoryUtilization => (f(device.memory_utilization()), Some(100.0)),
            DeviceMetric::Temperature => (f(device.temperature()), None),
            DeviceMetric::PowerUsage => (
                device
                    .power_usage()
                    .into_option()
                    .map(|mw| f64::from(mw) / 1000.0),
                device
                    .power_limit()
                    .into_option()
                    .map(|mw| f64::from(mw) / 1000.0),
            ),
        }
    }
}

impl DeviceMetric {
    /// Every metric a recorder can record.
    pub const ALL: [DeviceMetric; 5] = [
        DeviceMetric::MemoryUsed,
        DeviceMetric::GpuUtilization,
        DeviceMetric::MemoryUtilization,
        DeviceMetric::Temperature,
        DeviceMetric::PowerUsage,
    ];

    /// The metric in gpuscope's one vocabulary ([`gpu_devices::vocabulary`]): its canonical
    /// name (`memory.used`) and the other names it goes by.
    pub fn vocabulary(self) -> &'static gpu_devices::vocabulary::Metric {
        use gpu_devices::vocabulary as v;
        match self {
            DeviceMetric::MemoryUsed => &v::MEMORY_USED,
            DeviceMetric::GpuUtilization => &v::UTILIZATION_GPU,
            DeviceMetric::MemoryUtilization => &v::UTILIZATION_MEMORY,
            DeviceMetric::Temperature => &v::TEMPERATURE_GPU,
            DeviceMetric::PowerUsage => &v::POWER_DRAW,
        }
    }
}

/// Any name of the metric in the vocabulary: canonical (`memory.used`, nvidia-smi's) or another
/// (`memory_used`, nvitop's and the files' name), ASCII case ignored.
impl std::str::FromStr for DeviceMetric {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        DeviceMetric::ALL
            .into_iter()
            .find(|m| m.vocabulary().is_named(s))
            .ok_or_else(|| {
                let names: Vec<_> = DeviceMetric::ALL
                    .iter()
                    .map(|m| format!("{} ({})", m.vocabulary().name, m.name()))
                    .collect();
                let known = gpu_devices::vocabulary::find(s)
                    .map(|m| format!(" ({} is a metric, but not one a recording samples)", m.name))
                    .unwrap_or_default();
                format!(
                    "unknown metric {s:?}{known}: expected one of {}",
                    names.join(", ")
                )
            })
    }
}

/// One reading of every device.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sample {
    /// Seconds since the first stored sample of the recording.
    pub elapsed_s: f64,
    /// Seconds since the Unix epoch.
    pub timestamp: f64,
    /// One value per device, in the recorder's device order; `None` where N/A.
    pub values: Vec<Option<f64>>,
}

/// A device as a recording names it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceLabel {
    /// The device.
    pub id: DeviceId,
    /// Its product name (`N/A` when unknown).
    pub name: String,
}

/// `NVIDIA H100 80GB HBM3[0]`: the name with its control characters escaped
/// (`gpu_devices::text::escape_control`), as the summary, the CSV header and the plot's legend
/// show it.
impl fmt::Display for DeviceLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[{}]", gpu_devices::text::Escaped(&self.name), self.id)
    }
}

impl DeviceLabel {
    /// `GPU 0: NVIDIA H100 80GB HBM3` (`GPU 0:1: ...` for a MIG device), as a plot's legend
    /// names a device; the name's control characters escaped.
    pub fn legend(&self) -> String {
        format!(
            "GPU {}: {}",
            self.id,
            gpu_devices::text::Escaped(&self.name)
        )
    }
}
