//! dcgm-exporter's names (`gpuscope export --names dcgm`): the fields of its
//! `etc/default-counters.csv` that gpuscope can read without DCGM, and its profiling fields from
//! GPM, with its types (its counters keep their names, without `_total`), units (MiB, mJ, %,
//! MHz) and labels (`gpu`, `UUID`, `pci_bus_id`, `device`, `modelName`, `Hostname`,
//! `GPU_I_PROFILE` and `GPU_I_ID` on a GPU instance, `DCGM_FI_DRIVER_VERSION`, and `pod`,
//! `namespace` and `container` from gpuscope's own process attribution). As dcgm-exporter does
//! by default, a GPU in MIG mode is published through its GPU instances: each of its fields
//! once per GPU instance, a device-wide reading (temperature, power, clocks) the GPU's.

use std::sync::LazyLock;

use gpu_backend::GpmMetrics;
use gpu_devices::DeviceSnapshot;

use super::{
    empty_families, gpu_instance_profile, gpu_instances, metric, mig_profile, pods_on, put, same,
    same_where, with_pod, Door, DoorLabels, DoorMetric, DoorTable, SameAs, Scope, UuidForm,
};
use crate::families::{Family, Inputs, Kind, Labels, Options};
use crate::names as n;
use Kind::{Gauge, LegacyCounter};
use OnMig::{Own, Parent};

/// The table: every metric of the door, its labels, and what it leaves out.
pub fn table() -> &'static DoorTable {
    static TABLE: LazyLock<DoorTable> = LazyLock::new(|| DoorTable {
        door: Door::Dcgm,
        copies: "dcgm-exporter 4.5.3-4.8.2 (NVIDIA/dcgm-exporter, etc/default-counters.csv)",
        metrics: ROWS.iter().map(|r| r.metric).collect(),
        labels: LABELS,
        not_published: NOT_PUBLISHED,
    });
    &TABLE
}

/// What dcgm-exporter's default counters hold that this door does not publish, and why.
pub const NOT_PUBLISHED: &[(&str, &str)] = &[(
    "DCGM_FI_DEV_VGPU_LICENSE_STATUS",
    "vGPU licensing is outside what gpuscope reads (it runs on the host, not in vGPU guests)",
)];

/// dcgm-exporter's labels.
pub const LABELS: DoorLabels = DoorLabels {
    uuid: "UUID",
    uuid_form: UuidForm::Nvml,
    info: None,
    index: "gpu",
    name: "modelName",
    bus_id: "pci_bus_id",
    hostname: Some("Hostname"),
    gpu_instance_id: "GPU_I_ID",
    mig_profile: "GPU_I_PROFILE",
    pod: Some(["pod", "namespace", "container"]),
};

/// The label dcgm-exporter gives the driver version (its `DCGM_FI_DRIVER_VERSION` field is a
/// label on every series).
const DRIVER_VERSION_LABEL: &str = "DCGM_FI_DRIVER_VERSION";

/// What a GPU instance's series holds for a field.
#[derive(Clone, Copy)]
enum OnMig {
    /// The GPU instance's own reading (memory, utilization, GPM activity).
    Own,
    /// The GPU's: a reading of the whole device (temperature, power, clocks, health).
    Parent,
}

/// One metric and how its value is read.
struct Row {
    metric: DoorMetric,
    value: fn(&DeviceSnapshot) -> Option<f64>,
    on_mig: OnMig,
}

const MIB: f64 = 1024.0 * 1024.0;

fn mhz(v: &gpu_devices::Na<u32>) -> Option<f64> {
    v.value().map(|&m| f64::from(m))
}

fn percent(v: Option<u32>) -> Option<f64> {
    v.map(f64::from)
}

fn whole_mib(bytes: Option<u64>) -> Option<f64> {
    bytes.map(|b| (b / (1024 * 1024)) as f64)
}

fn gpm(d: &DeviceSnapshot, pick: fn(&GpmMetrics) -> Option<f64>) -> Option<f64> {
    d.gpm.value().and_then(pick)
}

/// The code of the newest XID since the exporter started (0 for none); N/A where events
/// cannot be known.
fn last_xid(d: &DeviceSnapshot) -> Option<f64> {
    d.events.value().map(|_| {
        d.xid_codes()
            .last()
            .map_or(0.0, |&c| c.min(u64::from(u32::MAX)) as f64)
    })
}

/// A gauge, counter or legacy counter of the table.
#[allow(clippy::too_many_arguments)]
const fn row(
    name: &'static str,
    kind: Kind,
    unit: &'static str,
    help: &'static str,
    source: &'static str,
    same_as: Option<SameAs>,
    on_mig: OnMig,
    value: fn(&DeviceSnapshot) -> Option<f64>,
) -> Row {
    Row {
        metric: metric(
            name,
            kind,
            unit,
            help,
            source,
            Scope::GpuOrGpuInstance,
            &[],
            same_as,
            "",
        ),
        value,
        on_mig,
    }
}

const fn differs(mut r: Row, text: &'static str) -> Row {
    r.metric.differs = text;
    r
}

/// Every field, in dcgm-exporter's order: its default counters, then the profiling fields.
#[rustfmt::skip]
const ROWS: &[Row] = &[
    row("DCGM_FI_DEV_SM_CLOCK", Gauge, "MHz", "SM clock frequency, MHz.", "clocks.current.sm", same_where(n::DEVICE_CLOCK_HERTZ, &[("clock", "sm")], 1e6), Parent, |d| mhz(&d.clocks.sm)),
    row("DCGM_FI_DEV_MEM_CLOCK", Gauge, "MHz", "Memory clock frequency, MHz.", "clocks.current.memory", same_where(n::DEVICE_CLOCK_HERTZ, &[("clock", "memory")], 1e6), Parent, |d| mhz(&d.clocks.memory)),
    row("DCGM_FI_DEV_MEMORY_TEMP", Gauge, "°C", "Memory temperature, degrees C.", "temperature.memory", same(n::DEVICE_MEMORY_TEMPERATURE_CELSIUS, 1.0), Parent, |d| d.memory_temperature.value().map(|&t| f64::from(t))),
    row("DCGM_FI_DEV_GPU_TEMP", Gauge, "°C", "GPU temperature, degrees C.", "temperature.gpu", same(n::DEVICE_TEMPERATURE_CELSIUS, 1.0), Parent, |d| d.temperature.value().map(|&t| f64::from(t))),
    row("DCGM_FI_DEV_POWER_USAGE", Gauge, "W", "Power draw, W.", "power.draw", same(n::DEVICE_POWER_USAGE_WATTS, 1.0), Parent, |d| d.power_usage.value().map(|&mw| f64::from(mw) / 1000.0)),
    differs(
        row("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", LegacyCounter, "mJ", "Energy used since the driver was loaded, mJ.", "total_energy_consumption (nvmlDeviceGetTotalEnergyConsumption)", same(n::DEVICE_ENERGY_CONSUMPTION_JOULES, 1e-3), Parent, |d| d.total_energy_consumption.value().map(|&mj| mj as f64)),
        "read every 30 s, as gpuscope reads its costly queries (docs/exporter.md, \"What each sample asks\"); `rate()` over it is unchanged",
    ),
    differs(
        row("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", LegacyCounter, "", "PCIe replays (retries) since the driver was loaded.", "pcie_replay_counter (nvmlDeviceGetPcieReplayCounter)", same(n::DEVICE_PCIE_REPLAYS, 1.0), Parent, |d| d.pcie_replay_counter.value().map(|&r| f64::from(r))),
        "read every 30 s, as gpuscope reads its costly queries",
    ),
    row("DCGM_FI_DEV_GPU_UTIL", Gauge, "%", "GPU utilization, percent.", "utilization.gpu", same(n::DEVICE_UTILIZATION_RATIO, 0.01), Own, |d| percent(d.utilization.value().map(|u| u.gpu))),
    row("DCGM_FI_DEV_MEM_COPY_UTIL", Gauge, "%", "Memory bandwidth utilization, percent.", "utilization.memory", same(n::DEVICE_MEMORY_BANDWIDTH_UTILIZATION_RATIO, 0.01), Own, |d| percent(d.utilization.value().map(|u| u.memory))),
    row("DCGM_FI_DEV_ENC_UTIL", Gauge, "%", "Encoder utilization, percent.", "utilization.encoder", same(n::DEVICE_ENCODER_UTILIZATION_RATIO, 0.01), Own, |d| percent(d.encoder.value().map(|c| c.utilization))),
    row("DCGM_FI_DEV_DEC_UTIL", Gauge, "%", "Decoder utilization, percent.", "utilization.decoder", same(n::DEVICE_DECODER_UTILIZATION_RATIO, 0.01), Own, |d| percent(d.decoder.value().map(|c| c.utilization))),
    Row {
        metric: DoorMetric {
            name: "DCGM_FI_DEV_XID_ERRORS",
            kind: Gauge,
            unit: "",
            help: "The code of the last XID error (0: none).",
            source: "events (NVML's event set, XID kind), since the exporter started",
            scope: Scope::GpuOrGpuInstance,
            extra_labels: &["err_code", "err_msg"],
            same_as: same(n::DEVICE_LAST_XID, 1.0),
            differs: "since the exporter started, among the newest 256 events kept per GPU (DCGM: since its host engine started); absent where events cannot be known; `err_msg` is gpuscope's description of the code (`No Error` for 0, `Unknown Error` for a code gpuscope does not describe), worded unlike dcgm-exporter's for some codes",
        },
        value: last_xid,
        on_mig: Parent,
    },
    row("DCGM_FI_DEV_FB_FREE", Gauge, "MiB", "Frame-buffer memory free, MiB.", "memory.free", same(n::DEVICE_MEMORY_FREE_BYTES, MIB), Own, |d| whole_mib(d.memory.value().map(|m| m.free))),
    row("DCGM_FI_DEV_FB_USED", Gauge, "MiB", "Frame-buffer memory used, MiB.", "memory.used", same(n::DEVICE_MEMORY_USED_BYTES, MIB), Own, |d| whole_mib(d.memory.value().map(|m| m.used))),
    row("DCGM_FI_DEV_FB_RESERVED", Gauge, "MiB", "Frame-buffer memory reserved by the driver and firmware, MiB.", "memory.reserved", None, Own, |d| whole_mib(d.memory.value().and_then(|m| m.reserved))),
    differs(
        row("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", LegacyCounter, "MB/s", "NVLink traffic over all links, both ways, MB/s.", "gpm_metrics: nvlink_tx + nvlink_rx (MiB/s)", None, Parent, |d| {
            let m = d.gpm.value()?;
            Some((m.nvlink_tx? + m.nvlink_rx?) * MIB / 1e6)
        }),
        "DCGM does not document the unit and dcgm-exporter types it a counter, but its values are a rate (users measured MB/s against `nvidia-smi nvlink`); gpuscope publishes GPM's NVLink traffic in MB/s, so it is there only where GPM is (Hopper and newer), every 30 s",
    ),
    row("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", LegacyCounter, "", "Memory rows remapped for uncorrectable errors.", "remapped_rows.uncorrectable", same_where(n::DEVICE_REMAPPED_ROWS, &[("cause", "uncorrectable")], 1.0), Parent, |d| d.remapped_rows.value().map(|r| f64::from(r.uncorrectable))),
    row("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", LegacyCounter, "", "Memory rows remapped for correctable errors.", "remapped_rows.correctable", same_where(n::DEVICE_REMAPPED_ROWS, &[("cause", "correctable")], 1.0), Parent, |d| d.remapped_rows.value().map(|r| f64::from(r.correctable))),
    row("DCGM_FI_DEV_ROW_REMAP_FAILURE", Gauge, "", "1 when a row remap failed.", "remapped_rows.failure", same(n::DEVICE_ROW_REMAP_FAILURE, 1.0), Parent, |d| d.remapped_rows.value().map(|r| if r.failure { 1.0 } else { 0.0 })),
    row("DCGM_FI_PROF_GR_ENGINE_ACTIVE", Gauge, "ratio", "Share of time the graphics engine was active, 0 to 1.", "gpm_metrics: graphics_activity", same(n::DEVICE_GPM_GRAPHICS_ENGINE_ACTIVE_RATIO, 1.0), Own, |d| gpm(d, |m| m.graphics_activity.map(|p| p / 100.0))),
    row("DCGM_FI_PROF_SM_ACTIVE", Gauge, "ratio", "Share of cycles an SM had at least one warp, 0 to 1.", "gpm_metrics: sm_activity", same(n::DEVICE_GPM_SM_ACTIVE_RATIO, 1.0), Own, |d| gpm(d, |m| m.sm_activity.map(|p| p / 100.0))),
    row("DCGM_FI_PROF_SM_OCCUPANCY", Gauge, "ratio", "Resident warps over the most the SMs hold, 0 to 1.", "gpm_metrics: sm_occupancy", same(n::DEVICE_GPM_SM_OCCUPANCY_RATIO, 1.0), Own, |d| gpm(d, |m| m.sm_occupancy.map(|p| p / 100.0))),
    differs(
        row("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", Gauge, "ratio", "Share of cycles a tensor pipe was active, 0 to 1.", "gpm_metrics: tensor_activity (any tensor pipe)", same_where(n::DEVICE_GPM_PIPE_ACTIVE_RATIO, &[("pipe", "tensor")], 1.0), Own, |d| gpm(d, |m| m.tensor_activity.map(|p| p / 100.0))),
        "GPM's any-tensor activity; DCGM's help says the HMMA pipe (gpuscope's `gpuscope_device_gpm_pipe_active_ratio{pipe=\"tensor_hmma\"}`)",
    ),
    row("DCGM_FI_PROF_DRAM_ACTIVE", Gauge, "ratio", "Share of cycles the memory interface was busy, 0 to 1.", "gpm_metrics: dram_activity", same(n::DEVICE_GPM_DRAM_ACTIVE_RATIO, 1.0), Own, |d| gpm(d, |m| m.dram_activity.map(|p| p / 100.0))),
    row("DCGM_FI_PROF_PCIE_TX_BYTES", Gauge, "bytes/s", "PCIe transmit, headers and payload, bytes per second.", "gpm_metrics: pcie_tx (MiB/s)", same(n::DEVICE_GPM_PCIE_TRANSMIT_BYTES_PER_SECOND, 1.0), Own, |d| gpm(d, |m| m.pcie_tx.map(|r| r * MIB))),
    row("DCGM_FI_PROF_PCIE_RX_BYTES", Gauge, "bytes/s", "PCIe receive, headers and payload, bytes per second.", "gpm_metrics: pcie_rx (MiB/s)", same(n::DEVICE_GPM_PCIE_RECEIVE_BYTES_PER_SECOND, 1.0), Own, |d| gpm(d, |m| m.pcie_rx.map(|r| r * MIB))),
];

/// The door's families of one sample.
pub(crate) fn families(inputs: &Inputs, options: &Options) -> Vec<Family> {
    let mut out = empty_families(&table().metrics);
    let devices = &inputs.snapshots.devices;
    let instances = gpu_instances(devices);
    for gpu in devices.iter().filter(|d| !d.id.is_mig()) {
        let base = gpu_labels(gpu);
        let mine: Vec<_> = instances
            .iter()
            .filter(|g| g.parent == gpu.id.physical_index())
            .collect();
        if mine.is_empty() {
            let pods = pods_on(&inputs.snapshots, &[gpu.id]);
            series(&mut out, gpu, gpu, &finish(base, options), &pods);
            continue;
        }
        for gi in mine {
            let mut labels = base.clone();
            if let Some(name) = gi.first.name.value() {
                let profile = gpu_instance_profile(mig_profile(name));
                labels.push((LABELS.mig_profile, profile.to_string()));
            }
            labels.push((LABELS.gpu_instance_id, gi.id.to_string()));
            let pods = pods_on(&inputs.snapshots, &gi.members);
            series(&mut out, gpu, gi.first, &finish(labels, options), &pods);
        }
    }
    out
}

/// Adds one sample of every field for `own` (a GPU, or a GPU instance's first MIG device) of
/// `gpu`, labelled `labels`, once per pod in `pods` (none: once, without pod labels).
fn series(
    out: &mut [Family],
    gpu: &DeviceSnapshot,
    own: &DeviceSnapshot,
    labels: &Labels,
    pods: &[[Option<String>; 3]],
) {
    let pod_names = LABELS.pod.unwrap_or(["pod", "namespace", "container"]);
    let label_sets: Vec<Labels> = if pods.is_empty() {
        vec![labels.clone()]
    } else {
        pods.iter()
            .map(|p| with_pod(labels, pod_names, p))
            .collect()
    };
    for (family, row) in out.iter_mut().zip(ROWS) {
        let from = match row.on_mig {
            OnMig::Own => own,
            OnMig::Parent => gpu,
        };
        let value = (row.value)(from);
        for l in &label_sets {
            let mut l = l.clone();
            if row.metric.extra_labels.contains(&"err_code") {
                if let Some(code) = value {
                    let code = code as u64;
                    let message = match code {
                        0 => "No Error",
                        c => gpu_backend::xid_description(c).unwrap_or("Unknown Error"),
                    };
                    l.push(("err_code", code.to_string()));
                    l.push(("err_msg", message.to_string()));
                }
            }
            put(family, l, value);
        }
    }
}

/// `gpu`, `UUID`, `pci_bus_id`, `device`, `modelName` of a physical GPU; a label whose value
/// is N/A is left out.
fn gpu_labels(gpu: &DeviceSnapshot) -> Labels {
    let index = gpu.id.physical_index();
    let mut labels: Labels = vec![(LABELS.index, index.to_string())];
    if let Some(uuid) = gpu.uuid.value() {
        labels.push((LABELS.uuid, uuid.clone()));
    }
    if let Some(pci) = gpu.pci.value() {
        labels.push((LABELS.bus_id, pci.bus_id.clone()));
    }
    labels.push(("device", format!("nvidia{index}")));
    if let Some(name) = gpu.name.value() {
        labels.push((LABELS.name, name.clone()));
    }
    labels
}

/// `Hostname` and `DCGM_FI_DRIVER_VERSION` after the device's labels.
fn finish(mut labels: Labels, options: &Options) -> Labels {
    if let Some(h) = LABELS.hostname {
        labels.push((h, options.hostname.clone()));
    }
    if let Some(v) = &options.driver_version {
        labels.push((DRIVER_VERSION_LABEL, v.clone()));
    }
    labels
}
