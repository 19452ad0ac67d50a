//! One name for each metric, across every command and output.
//!
//! A metric that more than one place shows (a `--query` field, a `record --metric`, a key of the
//! snapshot JSON, a family of the Prometheus exporter, a column of a screen) is declared here
//! once: its canonical name, which is nvidia-smi's `--query-gpu` name where nvidia-smi has one
//! (`memory.used`, `utilization.gpu`, `clocks.current.sm`), the other names every command
//! accepts for it (nvidia-smi's short forms such as `clocks.sm`, nvitop's and gpulink's
//! attribute names such as `memory_used`), its unit as shown, what it means, its key in
//! `snapshot --json` and its family in `gpuscope export`. Consumers look names up with
//! [`find`], so `record --metric memory.used`, `--metric memory_used` and `--query memory.used`
//! name the same thing. The exporter's nvidia-smi door (`gpuscope export --names nvidia-smi`)
//! publishes a metric of this list under the name nvidia_gpu_exporter makes of its canonical
//! name and unit (`memory.used` in MiB is `nvidia_smi_memory_used_bytes`), so a metric it
//! publishes is declared here, not in a second table.
//!
//! "Memory" alone never names a utilization: nvidia-smi's `utilization.memory` is the memory
//! *bandwidth* utilization (how busy the memory controller was), and is shown as "memory
//! bandwidth" wherever gpuscope writes words; the memory *used* is `memory.used`.
//!
//! ```
//! use gpu_devices::vocabulary;
//!
//! let m = vocabulary::find("memory_used").unwrap();
//! assert_eq!(m.name, "memory.used");
//! assert_eq!(m.exporter, Some("gpuscope_device_memory_used_bytes"));
//! assert_eq!(vocabulary::find("CLOCKS.SM").unwrap().name, "clocks.current.sm");
//! assert!(vocabulary::find("memory").is_none(), "ambiguous: used or bandwidth?");
//! ```

/// One metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metric {
    /// The canonical name: nvidia-smi's `--query-gpu` name where it has one.
    pub name: &'static str,
    /// Other names accepted for it, by every command that takes a metric name.
    pub aliases: &'static [&'static str],
    /// The unit a person is shown (`MiB`, `%`, `W`, `°C`, `MHz`); empty for none.
    pub unit: &'static str,
    /// What it is, in a few words.
    pub help: &'static str,
    /// Its key in each device of `snapshot --json` (docs/snapshot-json.md), where it has one.
    pub json: Option<&'static str>,
    /// Its family in `gpuscope export` (docs/exporter.md), where it has one.
    pub exporter: Option<&'static str>,
}

impl Metric {
    /// Whether `name` names this metric: the canonical name or an alias, ASCII case ignored.
    pub fn is_named(&self, name: &str) -> bool {
        let name = name.trim();
        self.name.eq_ignore_ascii_case(name)
            || self.aliases.iter().any(|a| a.eq_ignore_ascii_case(name))
    }

    /// Every name of the metric, the canonical first.
    pub fn names(&self) -> impl Iterator<Item = &'static str> {
        std::iter::once(self.name).chain(self.aliases.iter().copied())
    }
}

const fn metric(
    name: &'static str,
    aliases: &'static [&'static str],
    unit: &'static str,
    help: &'static str,
    json: Option<&'static str>,
    exporter: Option<&'static str>,
) -> Metric {
    Metric {
        name,
        aliases,
        unit,
        help,
        json,
        exporter,
    }
}

/// `memory.used`.
pub const MEMORY_USED: Metric = metric(
    "memory.used",
    &["memory_used", "mem.used", "used_memory"],
    "MiB",
    "frame-buffer memory in use (reserved memory not counted, as nvidia-smi)",
    Some("memory_used_bytes"),
    Some("gpuscope_device_memory_used_bytes"),
);

/// `utilization.gpu`.
pub const UTILIZATION_GPU: Metric = metric(
    "utilization.gpu",
    &["gpu_utilization", "gpu_util", "util.gpu"],
    "%",
    "time a kernel ran, over the driver's last sample period",
    Some("gpu_utilization_percent"),
    Some("gpuscope_device_utilization_ratio"),
);

/// `utilization.memory`.
pub const UTILIZATION_MEMORY: Metric = metric(
    "utilization.memory",
    &[
        "memory_utilization",
        "memory_bandwidth_utilization",
        "mem-bw",
        "util.memory",
    ],
    "%",
    "memory bandwidth utilization: time the memory was read or written (not memory used)",
    Some("memory_utilization_percent"),
    Some("gpuscope_device_memory_bandwidth_utilization_ratio"),
);

/// `temperature.gpu`.
pub const TEMPERATURE_GPU: Metric = metric(
    "temperature.gpu",
    &["temperature", "gpu_temperature", "temp"],
    "°C",
    "GPU core temperature",
    Some("temperature_celsius"),
    Some("gpuscope_device_temperature_celsius"),
);

/// `power.draw`.
pub const POWER_DRAW: Metric = metric(
    "power.draw",
    &["power_usage", "power"],
    "W",
    "power drawn by the board",
    Some("power_usage_watts"),
    Some("gpuscope_device_power_usage_watts"),
);

/// Every metric, in the order docs/cli.md lists them.
pub const METRICS: &[Metric] = &[
    MEMORY_USED,
    metric(
        "memory.free",
        &["memory_free", "mem.free", "free_memory"],
        "MiB",
        "frame-buffer memory free",
        Some("memory_free_bytes"),
        Some("gpuscope_device_memory_free_bytes"),
    ),
    metric(
        "memory.total",
        &["memory_total", "mem.total", "total_memory"],
        "MiB",
        "frame-buffer memory in all",
        Some("memory_total_bytes"),
        Some("gpuscope_device_memory_total_bytes"),
    ),
    metric(
        "memory.reserved",
        &["memory_reserved"],
        "MiB",
        "frame-buffer memory the driver reserves",
        Some("memory_reserved_bytes"),
        None,
    ),
    UTILIZATION_GPU,
    UTILIZATION_MEMORY,
    metric(
        "utilization.encoder",
        &["encoder_utilization", "utilization.enc"],
        "%",
        "video encoder utilization",
        Some("encoder_utilization_percent"),
        Some("gpuscope_device_encoder_utilization_ratio"),
    ),
    metric(
        "utilization.decoder",
        &["decoder_utilization", "utilization.dec"],
        "%",
        "video decoder utilization",
        Some("decoder_utilization_percent"),
        Some("gpuscope_device_decoder_utilization_ratio"),
    ),
    TEMPERATURE_GPU,
    metric(
        "temperature.memory",
        &["memory_temperature"],
        "°C",
        "HBM temperature",
        None,
        Some("gpuscope_device_memory_temperature_celsius"),
    ),
    POWER_DRAW,
    metric(
        "power.limit",
        &["power_limit"],
        "W",
        "the power-management limit set (the enforced one can be lower)",
        None,
        Some("gpuscope_device_power_limit_watts"),
    ),
    metric(
        "enforced.power.limit",
        &["power.limit.enforced", "enforced_power_limit"],
        "W",
        "the power limit the driver enforces, the lowest of every limit (snapshot JSON's \
         power_limit_watts)",
        Some("power_limit_watts"),
        Some("gpuscope_device_power_enforced_limit_watts"),
    ),
    metric(
        "fan.speed",
        &["fan_speed"],
        "%",
        "intended fan speed, percent of the maximum",
        Some("fan_speed_percent"),
        Some("gpuscope_device_fan_speed_ratio"),
    ),
    metric(
        "clocks.current.sm",
        &["clocks.sm", "sm_clock"],
        "MHz",
        "streaming multiprocessor clock",
        Some("sm_clock_mhz"),
        Some("gpuscope_device_clock_hertz"),
    ),
    metric(
        "clocks.current.graphics",
        &["clocks.gr", "graphics_clock"],
        "MHz",
        "graphics clock",
        Some("graphics_clock_mhz"),
        Some("gpuscope_device_clock_hertz"),
    ),
    metric(
        "clocks.current.memory",
        &["clocks.mem", "memory_clock"],
        "MHz",
        "memory clock",
        Some("memory_clock_mhz"),
        Some("gpuscope_device_clock_hertz"),
    ),
    metric(
        "pstate",
        &["performance_state"],
        "",
        "performance state, P0 (fastest) to P15",
        Some("performance_state"),
        Some("gpuscope_device_performance_state"),
    ),
    metric(
        "clocks.current.video",
        &["clocks.video", "video_clock"],
        "MHz",
        "video clock",
        None,
        Some("gpuscope_device_clock_hertz"),
    ),
    metric(
        "clocks.max.graphics",
        &["clocks.max.gr", "max_graphics_clock"],
        "MHz",
        "highest graphics clock",
        None,
        Some("gpuscope_device_clock_max_hertz"),
    ),
    metric(
        "clocks.max.sm",
        &["max_sm_clock"],
        "MHz",
        "highest SM clock",
        None,
        Some("gpuscope_device_clock_max_hertz"),
    ),
    metric(
        "clocks.max.memory",
        &["clocks.max.mem", "max_memory_clock"],
        "MHz",
        "highest memory clock",
        None,
        Some("gpuscope_device_clock_max_hertz"),
    ),
    metric(
        "power.default_limit",
        &["gpu.power.default_limit"],
        "W",
        "the power-management limit the board starts with",
        Some("power_default_limit_watts"),
        Some("gpuscope_device_power_default_limit_watts"),
    ),
    metric(
        "power.min_limit",
        &["gpu.power.min_limit"],
        "W",
        "the lowest power-management limit that can be set",
        None,
        Some("gpuscope_device_power_min_limit_watts"),
    ),
    metric(
        "power.max_limit",
        &["gpu.power.max_limit"],
        "W",
        "the highest power-management limit that can be set",
        None,
        Some("gpuscope_device_power_max_limit_watts"),
    ),
    metric(
        "clocks_event_reasons.supported",
        &["clocks_throttle_reasons.supported"],
        "",
        "clock event reasons the GPU can report, NVML's bit mask",
        None,
        None,
    ),
    metric(
        "clocks_event_reasons.active",
        &["clocks_throttle_reasons.active"],
        "",
        "clock event reasons active now, NVML's bit mask",
        None,
        None,
    ),
    metric(
        "clocks_event_reasons.gpu_idle",
        &["clocks_throttle_reasons.gpu_idle"],
        "",
        "nothing runs and the clocks are low",
        None,
        Some("gpuscope_device_clock_event_reason"),
    ),
    metric(
        "clocks_event_reasons.applications_clocks_setting",
        &["clocks_throttle_reasons.applications_clocks_setting"],
        "",
        "clocks held by the applications clocks setting",
        None,
        Some("gpuscope_device_clock_event_reason"),
    ),
    metric(
        "clocks_event_reasons.sw_power_cap",
        &["clocks_throttle_reasons.sw_power_cap"],
        "",
        "clocks lowered by the software power cap",
        None,
        Some("gpuscope_device_clock_event_reason"),
    ),
    metric(
        "clocks_event_reasons.hw_slowdown",
        &["clocks_throttle_reasons.hw_slowdown"],
        "",
        "clocks lowered by hardware slowdown",
        None,
        Some("gpuscope_device_clock_event_reason"),
    ),
    metric(
        "clocks_event_reasons.hw_thermal_slowdown",
        &["clocks_throttle_reasons.hw_thermal_slowdown"],
        "",
        "clocks lowered by hardware thermal slowdown",
        None,
        Some("gpuscope_device_clock_event_reason"),
    ),
    metric(
        "clocks_event_reasons.hw_power_brake_slowdown",
        &["clocks_throttle_reasons.hw_power_brake_slowdown"],
        "",
        "clocks lowered by the external power brake",
        None,
        Some("gpuscope_device_clock_event_reason"),
    ),
    metric(
        "clocks_event_reasons.sw_thermal_slowdown",
        &["clocks_throttle_reasons.sw_thermal_slowdown"],
        "",
        "clocks lowered by software thermal slowdown",
        None,
        Some("gpuscope_device_clock_event_reason"),
    ),
    metric(
        "clocks_event_reasons.sync_boost",
        &["clocks_throttle_reasons.sync_boost"],
        "",
        "clocks lowered to match the GPUs of a sync-boost group",
        None,
        Some("gpuscope_device_clock_event_reason"),
    ),
    metric(
        "ecc.errors.corrected.volatile.total",
        &[],
        "",
        "corrected ECC errors since the driver loaded",
        None,
        Some("gpuscope_device_ecc_errors"),
    ),
    metric(
        "ecc.errors.corrected.volatile.device_memory",
        &[],
        "",
        "corrected ECC errors in device memory since the driver loaded",
        None,
        Some("gpuscope_device_ecc_errors_by_location"),
    ),
    metric(
        "ecc.errors.corrected.volatile.sram",
        &[],
        "",
        "corrected ECC errors in SRAM since the driver loaded",
        None,
        Some("gpuscope_device_ecc_errors_by_location"),
    ),
    metric(
        "ecc.errors.corrected.aggregate.total",
        &[],
        "",
        "corrected ECC errors over the GPU's life",
        None,
        Some("gpuscope_device_ecc_errors"),
    ),
    metric(
        "ecc.errors.corrected.aggregate.device_memory",
        &[],
        "",
        "corrected ECC errors in device memory over the GPU's life",
        None,
        Some("gpuscope_device_ecc_errors_by_location"),
    ),
    metric(
        "ecc.errors.corrected.aggregate.sram",
        &[],
        "",
        "corrected ECC errors in SRAM over the GPU's life",
        None,
        Some("gpuscope_device_ecc_errors_by_location"),
    ),
    metric(
        "ecc.errors.uncorrected.volatile.total",
        &[],
        "",
        "uncorrected ECC errors since the driver loaded",
        None,
        Some("gpuscope_device_ecc_errors"),
    ),
    metric(
        "ecc.errors.uncorrected.volatile.device_memory",
        &[],
        "",
        "uncorrected ECC errors in device memory since the driver loaded",
        None,
        Some("gpuscope_device_ecc_errors_by_location"),
    ),
    metric(
        "ecc.errors.uncorrected.volatile.sram",
        &[],
        "",
        "uncorrected ECC errors in SRAM since the driver loaded",
        None,
        Some("gpuscope_device_ecc_errors_by_location"),
    ),
    metric(
        "ecc.errors.uncorrected.aggregate.total",
        &[],
        "",
        "uncorrected ECC errors over the GPU's life",
        None,
        Some("gpuscope_device_ecc_errors"),
    ),
    metric(
        "ecc.errors.uncorrected.aggregate.device_memory",
        &[],
        "",
        "uncorrected ECC errors in device memory over the GPU's life",
        None,
        Some("gpuscope_device_ecc_errors_by_location"),
    ),
    metric(
        "ecc.errors.uncorrected.aggregate.sram",
        &[],
        "",
        "uncorrected ECC errors in SRAM over the GPU's life",
        None,
        Some("gpuscope_device_ecc_errors_by_location"),
    ),
    metric(
        "retired_pages.single_bit_ecc.count",
        &["retired_pages.sbe"],
        "",
        "pages retired for multiple single-bit ECC errors (Kepler to Turing)",
        None,
        Some("gpuscope_device_retired_pages"),
    ),
    metric(
        "retired_pages.double_bit.count",
        &["retired_pages.dbe"],
        "",
        "pages retired for a double-bit ECC error (Kepler to Turing)",
        None,
        Some("gpuscope_device_retired_pages"),
    ),
    metric(
        "retired_pages.pending",
        &[],
        "",
        "a page retirement waits for the next reset, Yes or No",
        None,
        Some("gpuscope_device_retired_pages_pending"),
    ),
    metric(
        "remapped_rows.correctable",
        &["remapped_rows.sbe"],
        "",
        "memory rows remapped for correctable errors (Ampere and newer)",
        None,
        Some("gpuscope_device_remapped_rows"),
    ),
    metric(
        "remapped_rows.uncorrectable",
        &["remapped_rows.dbe"],
        "",
        "memory rows remapped for uncorrectable errors (Ampere and newer)",
        None,
        Some("gpuscope_device_remapped_rows"),
    ),
    metric(
        "remapped_rows.pending",
        &[],
        "",
        "a row remap waits for the next reset, Yes or No",
        None,
        Some("gpuscope_device_row_remap_pending"),
    ),
    metric(
        "remapped_rows.failure",
        &[],
        "",
        "a row remap failed, Yes or No",
        None,
        Some("gpuscope_device_row_remap_failure"),
    ),
    metric(
        "index",
        &[],
        "",
        "NVML index of the GPU",
        Some("index"),
        None,
    ),
    metric(
        "pcie.link.gen.current",
        &[],
        "",
        "current PCIe link generation",
        None,
        None,
    ),
    metric(
        "pcie.link.gen.max",
        &[],
        "",
        "highest PCIe link generation of the GPU and system",
        None,
        None,
    ),
    metric(
        "pcie.link.width.current",
        &[],
        "",
        "current PCIe link width, lanes",
        None,
        None,
    ),
    metric(
        "pcie.link.width.max",
        &[],
        "",
        "highest PCIe link width, lanes",
        None,
        None,
    ),
    metric(
        "persistence_mode",
        &[],
        "",
        "persistence mode, Enabled or Disabled",
        Some("persistence_mode"),
        None,
    ),
    metric(
        "compute_mode",
        &[],
        "",
        "compute mode: Default, Exclusive_Thread, Prohibited or Exclusive_Process",
        None,
        None,
    ),
    metric(
        "ecc.mode.current",
        &[],
        "",
        "ECC mode now, Enabled or Disabled",
        None,
        None,
    ),
    metric(
        "mig.mode.current",
        &["mig_mode"],
        "",
        "MIG mode now, Enabled or Disabled",
        Some("mig_mode"),
        None,
    ),
];

/// The metric `name` names (canonical or alias, ASCII case ignored), if any.
pub fn find(name: &str) -> Option<&'static Metric> {
    METRICS.iter().find(|m| m.is_named(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_name_names_two_metrics() {
        let mut seen = std::collections::BTreeMap::new();
        for m in METRICS {
            for n in m.names() {
                if let Some(other) = seen.insert(n.to_ascii_lowercase(), m.name) {
                    panic!("{n} names both {other} and {}", m.name);
                }
            }
        }
    }

    #[test]
    fn memory_alone_names_nothing() {
        for n in ["memory", "mem", "Memory"] {
            assert!(find(n).is_none(), "{n}");
        }
    }
}
