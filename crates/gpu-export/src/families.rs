//! The metric families of the exporter, computed from one sample of devices, processes and host
//! facts. Names follow Prometheus conventions (base units, `_total` for counters); every name and
//! label is listed in docs/exporter.md; every name is a constant of [`crate::names`].

use gpu_backend::host::HostMachine;
use std::collections::HashMap;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use gpu_backend::fixture::HostFrame;
use gpu_backend::{BackendError, DeviceId, NvLinkCounters, NvLinkErrorCounters};
use gpu_devices::DeviceSnapshot;
use gpu_processes::{GpuProcess, ProcessCollector, Snapshots};

use crate::names;

/// Whether a family is a gauge or a counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A value that goes up and down.
    Gauge,
    /// A cumulative value; its samples are named `<name>_total`.
    Counter,
    /// A cumulative value whose samples are named as the family, without `_total`, as
    /// exporters older than OpenMetrics name theirs (dcgm-exporter's
    /// `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`): `counter` in the text format, `unknown` in
    /// OpenMetrics (whose counter samples must end in `_total`), so that Prometheus stores it
    /// under the name dashboards query either way.
    LegacyCounter,
}

/// One metric family: its name, help, unit and samples.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    /// The name, unit suffix included, without the `_total` of a counter.
    pub name: &'static str,
    /// One sentence for `# HELP`.
    pub help: &'static str,
    /// The unit suffix of `name` (`bytes`, `ratio`, ...), for OpenMetrics' `# UNIT` line.
    pub unit: Option<&'static str>,
    /// Gauge or counter.
    pub kind: Kind,
    /// The labelled values; a value that is N/A has no sample.
    pub samples: Vec<LabelledValue>,
}

/// One labelled value of a family.
#[derive(Debug, Clone, PartialEq)]
pub struct LabelledValue {
    /// Label names and values, in output order.
    pub labels: Labels,
    /// The value.
    pub value: f64,
}

/// Label names and values.
pub type Labels = Vec<(&'static str, String)>;

/// What the exporter publishes besides the devices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The `hostname` label of every sample.
    pub hostname: String,
    /// Publish per-process families.
    pub processes: bool,
    /// Give process samples a `command` label (command lines can hold secrets).
    pub process_command: bool,
    /// Publish NVLink traffic and error counters per link (a `link` label); by default they
    /// are summed over each device's links.
    pub nvlink_per_link: bool,
    /// The driver version, for the info family (read once at start: it cannot change while
    /// the driver is loaded).
    pub driver_version: Option<String>,
    /// The highest CUDA version the driver supports, for the info family.
    pub cuda_driver_version: Option<String>,
    /// The names to publish under: gpuscope's, dcgm-exporter's, nvidia_gpu_exporter's, or
    /// several (`crate::doors`).
    pub names: crate::doors::set::Doors,
}

impl Options {
    /// What a program publishing `collector`'s devices starts from: the host's name (as the
    /// host facts tell it, `unknown` when they cannot), the driver and CUDA versions, no
    /// per-process families, NVLink counters summed per device, gpuscope's names only.
    pub fn of(collector: &ProcessCollector) -> Options {
        let context = collector.context();
        Options {
            hostname: collector
                .host()
                .machine()
                .hostname
                .unwrap_or_else(|| "unknown".to_string()),
            processes: false,
            process_command: false,
            nvlink_per_link: false,
            driver_version: context.driver_version().value().cloned(),
            cuda_driver_version: context.cuda_driver_version().value().cloned(),
            names: crate::doors::set::Doors::GPUSCOPE,
        }
    }
}

/// Everything one sample publishes.
#[derive(Debug)]
pub struct Inputs {
    /// Devices and processes.
    pub snapshots: Snapshots,
    /// Host totals.
    pub machine: HostMachine,
    /// Host readings.
    pub host: HostFrame,
    /// How long taking the sample took, seconds.
    pub sample_duration_s: f64,
    /// When the sample was taken, seconds since the Unix epoch.
    pub sample_time_s: f64,
}

impl Inputs {
    /// One sample of `collector`: every device and MIG device with its processes, and the
    /// host's facts; timed, and stamped with the wall-clock time.
    pub fn take(collector: &ProcessCollector) -> Inputs {
        let started = Instant::now();
        let snapshots = collector.take_all();
        let host = collector.host();
        let machine = host.machine();
        let frame = host.sample();
        let sample_duration_s = started.elapsed().as_secs_f64();
        let sample_time_s = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        Inputs {
            snapshots,
            machine,
            host: frame,
            sample_duration_s,
            sample_time_s,
        }
    }
}

/// A family as [`names::for_each_family!`]'s table declares it: all but its samples.
#[derive(Debug, Clone, Copy)]
struct Declared {
    name: &'static str,
    unit: Option<&'static str>,
    kind: Kind,
    help: &'static str,
}

/// [`declared`], from [`names::for_each_family!`]'s rows.
macro_rules! declarations {
    ($($constant:ident = $name:literal [$unit:ident, $kind:ident] $help:literal;)*) => {
        /// Each family's declaration, under the name of its constant in [`crate::names`].
        mod declared {
            use super::{Declared, Kind};
            $(
                pub(super) const $constant: Declared = Declared {
                    name: crate::names::$constant,
                    unit: crate::names::unit!($unit),
                    kind: Kind::$kind,
                    help: $help,
                };
            )*
        }
    };
}

names::for_each_family!(declarations);

/// Builds families in a fixed order, skipping N/A values.
struct Builder {
    families: Vec<Family>,
    by_name: HashMap<&'static str, usize>,
}

impl Builder {
    /// The index of the family `declared` declares, added on first use.
    fn family(&mut self, declared: Declared) -> usize {
        if let Some(&i) = self.by_name.get(declared.name) {
            return i;
        }
        self.by_name.insert(declared.name, self.families.len());
        self.families.push(Family {
            name: declared.name,
            help: declared.help,
            unit: declared.unit,
            kind: declared.kind,
            samples: Vec::new(),
        });
        self.families.len() - 1
    }

    fn put(&mut self, family: usize, labels: &Labels, value: Option<f64>) {
        if let Some(value) = value {
            self.families[family].samples.push(LabelledValue {
                labels: labels.clone(),
                value,
            });
        }
    }
}

fn ratio(percent: Option<u32>) -> Option<f64> {
    percent.map(|p| f64::from(p) / 100.0)
}

/// The families of one sample. Families with no sample are still listed (with their help), so
/// that the set of families does not depend on the hardware; the encoders skip empty ones.
pub fn build(inputs: &Inputs, options: &Options) -> Vec<Family> {
    let mut b = Builder {
        families: Vec::new(),
        by_name: HashMap::new(),
    };
    let host_labels: Labels = vec![("hostname", options.hostname.clone())];
    host_families(&mut b, inputs, &host_labels);
    for d in &inputs.snapshots.devices {
        let labels = device_labels(d, &options.hostname);
        device_families(&mut b, d, &labels, options);
        let f = b.family(declared::DEVICE_INFO);
        b.put(f, &info_labels(d, &labels, options), Some(1.0));
    }
    pod_families(&mut b, &inputs.snapshots, &options.hostname);
    if options.processes {
        let start = b.families.len();
        process_descriptors(&mut b);
        for p in &inputs.snapshots.processes {
            let labels = process_labels(p, &inputs.snapshots.devices, options);
            process_samples(&mut b, start, p, &labels);
        }
    }
    b.families
}

fn host_families(b: &mut Builder, inputs: &Inputs, labels: &Labels) {
    let m = &inputs.machine;
    let h = &inputs.host;
    let f = b.family(declared::HOST_CPUS);
    b.put(f, labels, m.cpu_count.map(f64::from));
    let f = b.family(declared::HOST_CPU_UTILIZATION_RATIO);
    b.put(f, labels, h.cpu_percent.map(|p| p / 100.0));
    let f = b.family(declared::HOST_MEMORY_TOTAL_BYTES);
    b.put(f, labels, m.memory_total.map(|v| v as f64));
    let f = b.family(declared::HOST_MEMORY_USED_BYTES);
    b.put(f, labels, h.memory_used.map(|v| v as f64));
    let f = b.family(declared::HOST_SWAP_TOTAL_BYTES);
    b.put(f, labels, m.swap_total.map(|v| v as f64));
    let f = b.family(declared::HOST_SWAP_USED_BYTES);
    b.put(f, labels, h.swap_used.map(|v| v as f64));
    for (i, load) in [
        declared::HOST_LOAD1,
        declared::HOST_LOAD5,
        declared::HOST_LOAD15,
    ]
    .into_iter()
    .enumerate()
    {
        let f = b.family(load);
        b.put(f, labels, h.load_average.map(|l| l[i]));
    }
    let f = b.family(declared::EXPORTER_SAMPLE_DURATION_SECONDS);
    b.put(f, labels, Some(inputs.sample_duration_s));
    let f = b.family(declared::EXPORTER_SAMPLE_TIMESTAMP_SECONDS);
    b.put(f, labels, Some(inputs.sample_time_s));
}

/// `hostname`, `index`, `uuid`, `name`, and for a MIG device `parent_index`,
/// `gpu_instance_id` and `compute_instance_id`.
fn device_labels(d: &DeviceSnapshot, hostname: &str) -> Labels {
    let mut labels: Labels = vec![
        ("hostname", hostname.to_string()),
        ("index", d.id.to_string()),
    ];
    if let Some(uuid) = d.uuid.value() {
        labels.push(("uuid", uuid.clone()));
    }
    if let Some(name) = d.name.value() {
        labels.push(("name", name.clone()));
    }
    if let DeviceId::Mig { parent, .. } = d.id {
        labels.push(("parent_index", parent.to_string()));
        if let Some(gi) = d.gpu_instance_id.value() {
            labels.push(("gpu_instance_id", gi.to_string()));
        }
        if let Some(ci) = d.compute_instance_id.value() {
            labels.push(("compute_instance_id", ci.to_string()));
        }
    }
    labels
}

/// The device's labels and its identity: `bus_id`, `serial`, `vbios_version`,
/// `board_part_number`, `driver_version`, `cuda_driver_version`; an N/A one is left out.
fn info_labels(d: &DeviceSnapshot, labels: &Labels, options: &Options) -> Labels {
    let mut l = labels.clone();
    let pairs = [
        ("bus_id", d.pci.value().map(|p| p.bus_id.clone())),
        ("serial", d.serial.value().cloned()),
        ("vbios_version", d.vbios_version.value().cloned()),
        ("board_part_number", d.board_part_number.value().cloned()),
        ("driver_version", options.driver_version.clone()),
        ("cuda_driver_version", options.cuda_driver_version.clone()),
    ];
    for (name, value) in pairs {
        if let Some(v) = value {
            l.push((name, v));
        }
    }
    l
}

/// A device is down when it answered "GPU is lost", or when its memory query failed.
pub fn device_up(d: &DeviceSnapshot) -> bool {
    let lost = d
        .errors
        .iter()
        .any(|e| matches!(e.error, BackendError::GpuLost));
    !lost && !matches!(d.memory, gpu_devices::Na::Failed(_))
}

fn with(labels: &Labels, name: &'static str, value: String) -> Labels {
    let mut l = labels.clone();
    l.push((name, value));
    l
}

/// The families of one device, by subject.
fn device_families(b: &mut Builder, d: &DeviceSnapshot, labels: &Labels, options: &Options) {
    status_families(b, d, labels);
    activity_families(b, d, labels);
    memory_families(b, d, labels);
    clock_families(b, d, labels);
    thermal_families(b, d, labels);
    power_families(b, d, labels);
    interconnect_families(b, d, labels, options);
    health_families(b, d, labels);
}

/// 1 or 0 for a flag.
fn flag(v: bool) -> f64 {
    if v {
        1.0
    } else {
        0.0
    }
}

/// Whether the device answers, and how many of its fields failed.
fn status_families(b: &mut Builder, d: &DeviceSnapshot, labels: &Labels) {
    let f = b.family(declared::DEVICE_UP);
    b.put(f, labels, Some(if device_up(d) { 1.0 } else { 0.0 }));
    let f = b.family(declared::DEVICE_FAILED_FIELDS);
    b.put(f, labels, Some(d.errors.len() as f64));
}

/// What the device is doing: utilization, the codecs, and GPM activity (Hopper and newer;
/// named after the dcgm-exporter fields they stand for, docs/exporter.md maps them).
fn activity_families(b: &mut Builder, d: &DeviceSnapshot, labels: &Labels) {
    let util = d.utilization.value();
    let f = b.family(declared::DEVICE_UTILIZATION_RATIO);
    b.put(f, labels, ratio(util.map(|u| u.gpu)));
    let f = b.family(declared::DEVICE_MEMORY_BANDWIDTH_UTILIZATION_RATIO);
    b.put(f, labels, ratio(util.map(|u| u.memory)));
    let f = b.family(declared::DEVICE_ENCODER_UTILIZATION_RATIO);
    b.put(f, labels, ratio(d.encoder.value().map(|c| c.utilization)));
    let f = b.family(declared::DEVICE_DECODER_UTILIZATION_RATIO);
    b.put(f, labels, ratio(d.decoder.value().map(|c| c.utilization)));
    gpm_families(b, d, labels);
}

/// MiB/s (GPM's unit) to bytes per second.
const MIB: f64 = 1024.0 * 1024.0;

/// GPM activity: engines, SMs, DRAM, pipes, PCIe and NVLink traffic, media engines.
fn gpm_families(b: &mut Builder, d: &DeviceSnapshot, labels: &Labels) {
    let gpm = d.gpm.value();
    let pct = |v: Option<f64>| v.map(|p| p / 100.0);
    for (family, pick) in [
        (
            declared::DEVICE_GPM_GRAPHICS_ENGINE_ACTIVE_RATIO,
            (|m: &gpu_backend::GpmMetrics| m.graphics_activity)
                as fn(&gpu_backend::GpmMetrics) -> Option<f64>,
        ),
        (declared::DEVICE_GPM_SM_ACTIVE_RATIO, |m| m.sm_activity),
        (declared::DEVICE_GPM_SM_OCCUPANCY_RATIO, |m| m.sm_occupancy),
        (declared::DEVICE_GPM_DRAM_ACTIVE_RATIO, |m| m.dram_activity),
    ] {
        let f = b.family(family);
        b.put(f, labels, pct(gpm.and_then(pick)));
    }
    let f = b.family(declared::DEVICE_GPM_PIPE_ACTIVE_RATIO);
    if let Some(m) = gpm {
        for (pipe, v) in [
            ("tensor", m.tensor_activity),
            ("tensor_dfma", m.tensor_dfma_activity),
            ("tensor_hmma", m.tensor_hmma_activity),
            ("tensor_imma", m.tensor_imma_activity),
            ("fp64", m.fp64_activity),
            ("fp32", m.fp32_activity),
            ("fp16", m.fp16_activity),
            ("integer", m.integer_activity),
        ] {
            b.put(f, &with(labels, "pipe", pipe.into()), pct(v));
        }
    }
    let bytes = |mib_s: Option<f64>| mib_s.map(|r| r * MIB);
    let f = b.family(declared::DEVICE_GPM_PCIE_TRANSMIT_BYTES_PER_SECOND);
    b.put(f, labels, bytes(gpm.and_then(|m| m.pcie_tx)));
    let f = b.family(declared::DEVICE_GPM_PCIE_RECEIVE_BYTES_PER_SECOND);
    b.put(f, labels, bytes(gpm.and_then(|m| m.pcie_rx)));
    let f = b.family(declared::DEVICE_GPM_NVLINK_TRANSMIT_BYTES_PER_SECOND);
    b.put(f, labels, bytes(gpm.and_then(|m| m.nvlink_tx)));
    let f = b.family(declared::DEVICE_GPM_NVLINK_RECEIVE_BYTES_PER_SECOND);
    b.put(f, labels, bytes(gpm.and_then(|m| m.nvlink_rx)));
    let f = b.family(declared::DEVICE_GPM_ENGINE_ACTIVE_RATIO);
    if let Some(m) = gpm {
        for (field, v) in m.fields() {
            for engine in ["nvdec", "nvjpg", "nvofa"] {
                let Some(rest) = field.strip_prefix(engine) else {
                    continue;
                };
                let index: String = rest.chars().take_while(char::is_ascii_digit).collect();
                let l = with(
                    &with(labels, "engine", engine.into()),
                    "engine_index",
                    index,
                );
                b.put(f, &l, pct(v));
            }
        }
    }
}

/// Frame-buffer memory.
fn memory_families(b: &mut Builder, d: &DeviceSnapshot, labels: &Labels) {
    let mem = d.memory.value();
    let f = b.family(declared::DEVICE_MEMORY_TOTAL_BYTES);
    b.put(f, labels, mem.map(|m| m.total as f64));
    let f = b.family(declared::DEVICE_MEMORY_USED_BYTES);
    b.put(f, labels, mem.map(|m| m.used as f64));
    let f = b.family(declared::DEVICE_MEMORY_FREE_BYTES);
    b.put(f, labels, mem.map(|m| m.free as f64));
    let f = b.family(declared::DEVICE_MEMORY_USED_RATIO);
    b.put(
        f,
        labels,
        mem.filter(|m| m.total > 0)
            .map(|m| m.used as f64 / m.total as f64),
    );
}

/// Clocks, their maxima, and the reasons they are held down.
fn clock_families(b: &mut Builder, d: &DeviceSnapshot, labels: &Labels) {
    let f = b.family(declared::DEVICE_CLOCK_HERTZ);
    for (domain, v) in clock_domains(&d.clocks) {
        b.put(f, &with(labels, "clock", domain.into()), v);
    }
    let f = b.family(declared::DEVICE_CLOCK_MAX_HERTZ);
    for (domain, v) in clock_domains(&d.max_clocks) {
        b.put(f, &with(labels, "clock", domain.into()), v);
    }
    let f = b.family(declared::DEVICE_CLOCK_EVENT_REASON);
    if let Some(&mask) = d.clock_event_reasons.value() {
        let set = gpu_backend::ClockEventReasons::from_bits_retain(mask);
        for (name, reason) in gpu_backend::ClockEventReasons::all().iter_names() {
            b.put(
                f,
                &with(labels, "reason", name.to_ascii_lowercase()),
                Some(flag(set.contains(reason))),
            );
        }
    }
}

/// Temperatures, their thresholds, and the fans.
fn thermal_families(b: &mut Builder, d: &DeviceSnapshot, labels: &Labels) {
    let f = b.family(declared::DEVICE_TEMPERATURE_CELSIUS);
    b.put(f, labels, d.temperature.value().map(|&t| f64::from(t)));
    let f = b.family(declared::DEVICE_MEMORY_TEMPERATURE_CELSIUS);
    b.put(
        f,
        labels,
        d.memory_temperature.value().map(|&t| f64::from(t)),
    );
    let f = b.family(declared::DEVICE_TEMPERATURE_THRESHOLD_CELSIUS);
    for (threshold, v) in [
        ("shutdown", &d.temperature_shutdown),
        ("slowdown", &d.temperature_slowdown),
        ("gpu_max", &d.temperature_gpu_max),
        ("memory_max", &d.temperature_memory_max),
    ] {
        b.put(
            f,
            &with(labels, "threshold", threshold.into()),
            v.value().map(|&c| f64::from(c)),
        );
    }
    let f = b.family(declared::DEVICE_FAN_SPEED_RATIO);
    b.put(f, labels, ratio(d.fan_speed.value().copied()));
    let f = b.family(declared::DEVICE_FAN_SPEED_PER_FAN_RATIO);
    for (fan, v) in d.fan_speeds.iter().enumerate() {
        b.put(
            f,
            &with(labels, "fan", fan.to_string()),
            ratio(v.value().copied()),
        );
    }
    let f = b.family(declared::DEVICE_FAN_TARGET_SPEED_RATIO);
    for (fan, v) in d.fan_target_speeds.iter().enumerate() {
        b.put(
            f,
            &with(labels, "fan", fan.to_string()),
            ratio(v.value().copied()),
        );
    }
}

/// The performance state, power draw, limits and energy.
fn power_families(b: &mut Builder, d: &DeviceSnapshot, labels: &Labels) {
    let f = b.family(declared::DEVICE_PERFORMANCE_STATE);
    b.put(
        f,
        labels,
        d.performance_state
            .value()
            .and_then(|&p| gpu_backend::PerformanceState::known(p))
            .map(|p| f64::from(p.nvml_code())),
    );
    let watts = |mw: Option<u32>| mw.map(|mw| f64::from(mw) / 1000.0);
    let f = b.family(declared::DEVICE_POWER_USAGE_WATTS);
    b.put(f, labels, watts(d.power_usage.value().copied()));
    let f = b.family(declared::DEVICE_POWER_LIMIT_WATTS);
    b.put(f, labels, watts(d.power_limit.value().copied()));
    let f = b.family(declared::DEVICE_ENERGY_CONSUMPTION_JOULES);
    b.put(
        f,
        labels,
        d.total_energy_consumption
            .value()
            .map(|&mj| mj as f64 / 1000.0),
    );
    let limits = d.power_limit_constraints.value();
    let f = b.family(declared::DEVICE_POWER_ENFORCED_LIMIT_WATTS);
    b.put(f, labels, watts(d.enforced_power_limit.value().copied()));
    let f = b.family(declared::DEVICE_POWER_DEFAULT_LIMIT_WATTS);
    b.put(f, labels, watts(d.power_default_limit.value().copied()));
    let f = b.family(declared::DEVICE_POWER_MIN_LIMIT_WATTS);
    b.put(f, labels, watts(limits.map(|l| l.min_mw)));
    let f = b.family(declared::DEVICE_POWER_MAX_LIMIT_WATTS);
    b.put(f, labels, watts(limits.map(|l| l.max_mw)));
}

/// PCIe and NVLink: throughput, traffic counters, replays and errors.
fn interconnect_families(b: &mut Builder, d: &DeviceSnapshot, labels: &Labels, options: &Options) {
    let kib_s = |v: Option<&u32>| v.map(|&k| f64::from(k) * 1024.0);
    let f = b.family(declared::DEVICE_PCIE_TRANSMIT_BYTES_PER_SECOND);
    b.put(f, labels, kib_s(d.pcie_tx_throughput.value()));
    let f = b.family(declared::DEVICE_PCIE_RECEIVE_BYTES_PER_SECOND);
    b.put(f, labels, kib_s(d.pcie_rx_throughput.value()));
    let f = b.family(declared::DEVICE_PCIE_REPLAYS);
    b.put(
        f,
        labels,
        d.pcie_replay_counter.value().map(|&n| f64::from(n)),
    );
    for (family, kib) in [
        (
            declared::DEVICE_NVLINK_TRANSMIT_BYTES,
            (|c: &NvLinkCounters| c.tx_kib) as fn(&NvLinkCounters) -> u64,
        ),
        (
            declared::DEVICE_NVLINK_RECEIVE_BYTES,
            |c: &NvLinkCounters| c.rx_kib,
        ),
    ] {
        let f = b.family(family);
        let per_link = d.nvlink_counters.iter().map(|c| c.value().map(kib));
        for (l, kib) in per_link_or_total(labels, per_link, options.nvlink_per_link) {
            b.put(f, &l, Some(kib as f64 * 1024.0));
        }
    }
    let f = b.family(declared::DEVICE_NVLINK_ERRORS);
    for (counter, get) in [
        (
            "replay",
            (|c: &NvLinkErrorCounters| c.replay) as fn(&NvLinkErrorCounters) -> u64,
        ),
        ("recovery", |c: &NvLinkErrorCounters| c.recovery),
        ("crc_flit", |c: &NvLinkErrorCounters| c.crc_flit),
        ("crc_data", |c: &NvLinkErrorCounters| c.crc_data),
    ] {
        let counter_labels = with(labels, "counter", counter.into());
        let per_link = d.nvlink_errors.iter().map(|c| c.value().map(get));
        for (l, v) in per_link_or_total(&counter_labels, per_link, options.nvlink_per_link) {
            b.put(f, &l, Some(v as f64));
        }
    }
}

/// The samples of a per-link counter: one per link that answered, with a `link` label, when
/// `per_link`; else one for the device, the sum over the links that answered (none when no
/// link did).
fn per_link_or_total(
    labels: &Labels,
    values: impl Iterator<Item = Option<u64>>,
    per_link: bool,
) -> Vec<(Labels, u64)> {
    let answered = values.enumerate().filter_map(|(link, v)| Some((link, v?)));
    if per_link {
        answered
            .map(|(link, v)| (with(labels, "link", link.to_string()), v))
            .collect()
    } else {
        answered
            .map(|(_, v)| v)
            .reduce(u64::saturating_add)
            .map(|total| (labels.clone(), total))
            .into_iter()
            .collect()
    }
}

/// Health: what needs attention, XIDs, ECC (by counter and by location), retired pages and
/// remapped rows (dcgm-exporter's default fields and more; docs/exporter.md maps them).
fn health_families(b: &mut Builder, d: &DeviceSnapshot, labels: &Labels) {
    let attention = d.attention();
    let f = b.family(declared::DEVICE_NEEDS_ATTENTION);
    b.put(f, labels, Some(attention.len() as f64));
    let f = b.family(declared::DEVICE_ATTENTION_REASON);
    for reason in attention {
        b.put(f, &with(labels, "reason", reason), Some(1.0));
    }
    let f = b.family(declared::DEVICE_LAST_XID);
    b.put(
        f,
        labels,
        d.events.value().map(|_| {
            d.xid_codes()
                .last()
                .map_or(0.0, |&c| c.min(u64::from(u32::MAX)) as f64)
        }),
    );
    let f = b.family(declared::DEVICE_XID_ERRORS);
    if let Some(events) = d.events.value() {
        for code in d.xid_codes() {
            let n = events
                .iter()
                .filter(|e| e.kind == gpu_backend::EventKind::Xid && e.data == code)
                .count();
            b.put(f, &with(labels, "xid", code.to_string()), Some(n as f64));
        }
    }
    let f = b.family(declared::DEVICE_ECC_ERRORS);
    let e = &d.ecc_errors;
    for (error, counter, v) in [
        ("corrected", "volatile", &e.volatile_corrected),
        ("uncorrected", "volatile", &e.volatile_uncorrected),
        ("corrected", "aggregate", &e.aggregate_corrected),
        ("uncorrected", "aggregate", &e.aggregate_uncorrected),
    ] {
        let mut l = with(labels, "error", error.into());
        l.push(("counter", counter.into()));
        b.put(f, &l, v.value().map(|&n| n as f64));
    }
    let f = b.family(declared::DEVICE_ECC_ERRORS_BY_LOCATION);
    for location in gpu_backend::MemoryLocation::ALL {
        let Some(c) = d.ecc_by_location.get(location).value() else {
            continue;
        };
        let l = with(labels, "location", location.name().into());
        for (counter, kind, v) in [
            ("volatile", "corrected", c.volatile_corrected),
            ("volatile", "uncorrected", c.volatile_uncorrected),
            ("aggregate", "corrected", c.aggregate_corrected),
            ("aggregate", "uncorrected", c.aggregate_uncorrected),
        ] {
            let l = with(&with(&l, "counter", counter.into()), "kind", kind.into());
            b.put(f, &l, v.map(|n| n as f64));
        }
    }
    let f = b.family(declared::DEVICE_RETIRED_PAGES);
    for (cause, v) in [
        ("single_bit", &d.retired_pages_single_bit),
        ("double_bit", &d.retired_pages_double_bit),
    ] {
        b.put(
            f,
            &with(labels, "cause", cause.into()),
            v.value().map(|l| l.len() as f64),
        );
    }
    let f = b.family(declared::DEVICE_RETIRED_PAGES_PENDING);
    b.put(f, labels, d.retired_pages_pending.value().map(|&p| flag(p)));
    let rows = d.remapped_rows.value();
    let f = b.family(declared::DEVICE_REMAPPED_ROWS);
    for (cause, v) in [
        ("correctable", rows.map(|r| r.correctable)),
        ("uncorrectable", rows.map(|r| r.uncorrectable)),
    ] {
        b.put(f, &with(labels, "cause", cause.into()), v.map(f64::from));
    }
    let f = b.family(declared::DEVICE_ROW_REMAP_PENDING);
    b.put(f, labels, rows.map(|r| flag(r.pending)));
    let f = b.family(declared::DEVICE_ROW_REMAP_FAILURE);
    b.put(f, labels, rows.map(|r| flag(r.failure)));
}

fn clock_domains(c: &gpu_devices::ClockInfos) -> [(&'static str, Option<f64>); 4] {
    let hz = |v: &gpu_devices::Na<u32>| v.value().map(|&mhz| f64::from(mhz) * 1e6);
    [
        ("graphics", hz(&c.graphics)),
        ("sm", hz(&c.sm)),
        ("memory", hz(&c.memory)),
        ("video", hz(&c.video)),
    ]
}

/// Process families, in the order `process_samples` fills them.
const PROCESS_FAMILIES: [Declared; 9] = [
    declared::PROCESS_GPU_MEMORY_BYTES,
    declared::PROCESS_GPU_SM_UTILIZATION_RATIO,
    declared::PROCESS_GPU_MEMORY_BANDWIDTH_UTILIZATION_RATIO,
    declared::PROCESS_GPU_ENCODER_UTILIZATION_RATIO,
    declared::PROCESS_GPU_DECODER_UTILIZATION_RATIO,
    declared::PROCESS_GPU_UTILIZATION_SAMPLE_AGE_SECONDS,
    declared::PROCESS_CPU_UTILIZATION_RATIO,
    declared::PROCESS_RESIDENT_MEMORY_BYTES,
    declared::PROCESS_RUNNING_TIME_SECONDS,
];

fn process_descriptors(b: &mut Builder) {
    for family in PROCESS_FAMILIES {
        b.family(family);
    }
}

/// `hostname`, the device's `index` and `uuid`, `pid`, `username` when known, and `command`
/// only when asked for.
fn process_labels(p: &GpuProcess, devices: &[DeviceSnapshot], options: &Options) -> Labels {
    let mut labels: Labels = vec![
        ("hostname", options.hostname.clone()),
        ("index", p.device.to_string()),
    ];
    let uuid = devices
        .iter()
        .find(|d| d.id == p.device)
        .and_then(|d| d.uuid.value());
    if let Some(uuid) = uuid {
        labels.push(("uuid", uuid.clone()));
    }
    labels.push(("pid", p.pid.to_string()));
    if let Some(user) = &p.host.user {
        labels.push(("username", user.clone()));
    }
    // The container and pod, each only where known: a process outside any container has none.
    if let Some(c) = &p.host.container {
        for (name, value) in [
            ("container", &c.container),
            ("pod", &c.pod),
            ("namespace", &c.namespace),
        ] {
            if let Some(v) = value {
                labels.push((name, v.clone()));
            }
        }
    }
    if options.process_command {
        if let Some(command) = &p.host.command {
            labels.push(("command", command.clone()));
        }
    }
    labels
}

fn process_samples(b: &mut Builder, start: usize, p: &GpuProcess, labels: &Labels) {
    let u = &p.utilization;
    let values = [
        p.gpu_memory.map(|v| v as f64),
        ratio(u.sm),
        ratio(u.memory),
        ratio(u.encoder),
        ratio(u.decoder),
        u.sample_age_ms.map(|ms| ms as f64 / 1000.0),
        p.host.cpu_percent.map(|c| c / 100.0),
        p.host.rss.map(|v| v as f64),
        p.host.running_time_s.map(|s| s as f64),
    ];
    for (i, v) in values.into_iter().enumerate() {
        b.put(start + i, labels, v);
    }
}

/// What one pod uses on one device: the sums over its processes there.
#[derive(Default)]
struct PodUse<'a> {
    pod: Option<&'a str>,
    namespace: Option<&'a str>,
    processes: u32,
    /// `None` once a process's memory is N/A: the sum is then not known.
    memory: Option<u64>,
    /// The sum over the processes that have a sample; `None` when none has.
    sm_percent: Option<u32>,
}

/// Per (device, pod) families: GPU memory, SM share and process count summed over the pod's
/// processes on the device, for every process in a Kubernetes pod (one whose pod UID is known).
/// Labels: `hostname`, the device's `index` and `uuid`, `pod_uid`, and `pod` and `namespace`
/// where known. With time-slicing, each pod sharing a GPU gets its own figures.
fn pod_families(b: &mut Builder, snapshots: &Snapshots, hostname: &str) {
    let memory = b.family(declared::POD_GPU_MEMORY_BYTES);
    let sm = b.family(declared::POD_GPU_SM_UTILIZATION_RATIO);
    let count = b.family(declared::POD_PROCESSES);
    let mut pods: std::collections::BTreeMap<(DeviceId, &str), PodUse<'_>> = Default::default();
    for p in &snapshots.processes {
        let Some(c) = &p.host.container else { continue };
        let Some(uid) = c.pod_uid.as_deref() else {
            continue;
        };
        let first = !pods.contains_key(&(p.device, uid));
        let e = pods.entry((p.device, uid)).or_default();
        if first {
            e.memory = Some(0);
        }
        e.pod = e.pod.or(c.pod.as_deref());
        e.namespace = e.namespace.or(c.namespace.as_deref());
        e.processes = e.processes.saturating_add(1);
        e.memory = match (e.memory, p.gpu_memory) {
            (Some(sum), Some(m)) => Some(sum.saturating_add(m)),
            _ => None,
        };
        if let Some(u) = p.utilization.sm {
            e.sm_percent = Some(e.sm_percent.unwrap_or(0).saturating_add(u));
        }
    }
    for ((device, uid), u) in pods {
        let mut labels: Labels = vec![
            ("hostname", hostname.to_string()),
            ("index", device.to_string()),
        ];
        let uuid = snapshots
            .devices
            .iter()
            .find(|d| d.id == device)
            .and_then(|d| d.uuid.value());
        if let Some(uuid) = uuid {
            labels.push(("uuid", uuid.clone()));
        }
        labels.push(("pod_uid", uid.to_string()));
        if let Some(pod) = u.pod {
            labels.push(("pod", pod.to_string()));
        }
        if let Some(ns) = u.namespace {
            labels.push(("namespace", ns.to_string()));
        }
        b.put(memory, &labels, u.memory.map(|m| m as f64));
        b.put(sm, &labels, ratio(u.sm_percent));
        b.put(count, &labels, Some(f64::from(u.processes)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_names_module_holds_every_family_the_exporter_declares_and_no_other() {
        let collector = crate::test_support::h100_box();
        let families = build(
            &Inputs::take(&collector),
            &crate::test_support::options(&collector),
        );
        let declared: Vec<&str> = families.iter().map(|f| f.name).collect();
        assert_eq!(declared, names::ALL);
    }

    /// One vocabulary: each metric's exporter family (`gpu_devices::vocabulary`) is one the
    /// exporter declares, so docs/cli.md's table of names points at families that exist.
    #[test]
    fn every_family_the_vocabulary_names_is_declared() {
        for m in gpu_devices::vocabulary::METRICS {
            if let Some(family) = m.exporter {
                assert!(names::ALL.contains(&family), "{}: {family}", m.name);
            }
        }
    }

    #[test]
    fn every_name_is_documented_in_the_exporter_reference() {
        let docs = include_str!("../../../docs/exporter.md");
        for name in names::ALL {
            assert!(docs.contains(name), "{name} is not in docs/exporter.md");
        }
    }
}
