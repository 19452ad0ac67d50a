//! `gpuscope smi -q`: each GPU's answers as nvidia-smi's `-q` lays them out, one tree that is
//! written as nvidia-smi's text (`Label   : value`, four spaces a level) or its XML (`-x`).
//!
//! The tree follows nvidia-smi 580's sections and keys in its order; a value the GPU, the driver
//! or a recording cannot give is `N/A`, as nvidia-smi writes it. A line nvidia-smi prints from
//! a query gpuscope does not make (part numbers, IBMNPU, workload power profiles, ...) is left
//! out rather than shown as a made-up N/A (docs/smi.md lists them).

use std::fmt::Write as _;

use gpu_backend::{Architecture, Brand, ClockEventReasons, FabricHealthPart, VirtualizationMode};
use gpu_devices::{DeviceSnapshot, Na};

use crate::present::query::{self as q, compute_mode, enabled, gom, watts, yes_no};

/// One line of `-q`, or a heading with lines under it.
#[derive(Debug, Clone)]
pub struct Node {
    /// The text label (`Product Name`).
    pub label: String,
    /// The XML element (`product_name`).
    pub tag: &'static str,
    /// The value as text, for a line; `None` for a heading.
    pub text: Option<String>,
    /// The value in XML, where it differs from the text (`0000` for `0x0000`).
    pub xml: Option<String>,
    /// The lines under a heading.
    pub children: Vec<Node>,
    /// The `-d` section this belongs to, for a top-level node; `None`: shown without `-d` only.
    pub section: Option<&'static str>,
    /// The width the label is padded to, indent included (55; 42 under Processes).
    pub width: usize,
    /// In the XML only, the element the line is wrapped in (`double_bit_retirement`).
    pub wrap: Option<&'static str>,
    /// In the text, a heading that is not written: its lines stand at its own depth
    /// (`mig_devices`, which is an element in the XML only).
    pub xml_only: bool,
    /// A heading with no lines that the text writes as `Label : None`.
    pub text_none: bool,
}

fn leaf(label: &str, tag: &'static str, text: impl Into<String>) -> Node {
    Node {
        label: label.into(),
        tag,
        text: Some(text.into()),
        xml: None,
        children: Vec::new(),
        section: None,
        width: 55,
        wrap: None,
        xml_only: false,
        text_none: false,
    }
}

fn group(label: &str, tag: &'static str, children: Vec<Node>) -> Node {
    Node {
        label: label.into(),
        tag,
        text: None,
        xml: None,
        children,
        section: None,
        width: 55,
        wrap: None,
        xml_only: false,
        text_none: false,
    }
}

impl Node {
    fn in_section(mut self, s: &'static str) -> Node {
        self.section = Some(s);
        self
    }

    /// A heading with no lines, written `Label : None` in the text (an empty element in the
    /// XML).
    fn none_in_text(mut self) -> Node {
        self.text_none = true;
        self
    }

    fn wrapped(mut self, tag: &'static str) -> Node {
        self.wrap = Some(tag);
        self
    }

    fn xml_value(mut self, v: String) -> Node {
        self.xml = Some(v);
        self
    }

    fn width(mut self, w: usize) -> Node {
        self.width = w;
        for c in &mut self.children {
            *c = c.clone().width(w);
        }
        self
    }
}

/// A value as `-q` writes it: the value, or `N/A` (a failure as nvidia-smi names it).
fn na(v: Na<String>) -> String {
    match v {
        Na::Value(v) => v,
        Na::NotAvailable => "N/A".into(),
        Na::Failed(gpu_backend::BackendError::GpuLost) => "GPU is lost".into(),
        Na::Failed(_) => "Unknown Error".into(),
    }
}

fn with_unit<T: ToString + Clone>(v: &Na<T>, unit: &str) -> String {
    na(v.clone().map(|v| format!("{} {unit}", v.to_string())))
}

/// BAR1 memory, rounded to the nearest MiB ([`crate::present::value::nearest_mib`]).
fn mib(v: Na<u64>) -> String {
    na(v.map(|b| format!("{} MiB", crate::present::value::nearest_mib(b))))
}

/// Frame-buffer memory: a part of a MiB is a whole one ([`crate::present::value::fb_mib`]).
fn fb_mib(v: Na<u64>) -> String {
    na(v.map(|b| format!("{} MiB", crate::present::value::fb_mib(b))))
}

fn mode(v: &Na<bool>) -> String {
    na(v.clone().map(enabled))
}

fn brand(b: Brand) -> String {
    match b {
        Brand::Nvidia => "NVIDIA".into(),
        Brand::GeForce => "GeForce".into(),
        Brand::GeForceRtx => "GeForce RTX".into(),
        Brand::Quadro => "Quadro".into(),
        Brand::Tesla => "Tesla".into(),
        Brand::Titan => "Titan".into(),
        Brand::TitanRtx => "Titan RTX".into(),
        Brand::NvidiaRtx => "NVIDIA RTX".into(),
        Brand::Nvs => "NVS".into(),
        Brand::Grid => "Grid".into(),
        other => format!("{other:?}"),
    }
}

fn architecture(a: Architecture) -> String {
    match a {
        Architecture::Unknown(n) => format!("Unknown ({n})"),
        other => format!("{other:?}"),
    }
}

fn virtualization(v: VirtualizationMode) -> String {
    match v {
        VirtualizationMode::None => "None".into(),
        VirtualizationMode::PassThrough => "Pass-Through".into(),
        VirtualizationMode::Vgpu => "VGPU".into(),
        VirtualizationMode::HostVgpu => "Host VGPU".into(),
        VirtualizationMode::HostVsga => "Host VSGA".into(),
        VirtualizationMode::Other(n) => n.to_string(),
    }
}

/// A line of a section whose lines read alike: its label, its XML element, and its value read
/// from what the section shows (the GPU's snapshot, unless said).
type Line<T = DeviceSnapshot> = (&'static str, &'static str, fn(&T) -> String);

/// The lines of `table`, their values read from `v`.
fn lines<T>(v: &T, table: &[Line<T>]) -> Vec<Node> {
    table
        .iter()
        .map(|&(label, tag, value)| leaf(label, tag, value(v)))
        .collect()
}

/// A clock event reason's line: its label, its XML element and its bit.
type Reason = (&'static str, &'static str, ClockEventReasons);

/// Clock event reasons, nvidia-smi's order, each with the kinds of it that stand under it in
/// the text (flat in the XML).
#[rustfmt::skip]
const REASONS: &[(Reason, &[Reason])] = &[
    (("Idle", "clocks_event_reason_gpu_idle", ClockEventReasons::GPU_IDLE), &[]),
    (("Applications Clocks Setting", "clocks_event_reason_applications_clocks_setting", ClockEventReasons::APPLICATIONS_CLOCKS_SETTING), &[]),
    (("SW Power Cap", "clocks_event_reason_sw_power_cap", ClockEventReasons::SW_POWER_CAP), &[]),
    (("HW Slowdown", "clocks_event_reason_hw_slowdown", ClockEventReasons::HW_SLOWDOWN), HW_SLOWDOWNS),
    (("Sync Boost", "clocks_event_reason_sync_boost", ClockEventReasons::SYNC_BOOST), &[]),
    (("SW Thermal Slowdown", "clocks_event_reason_sw_thermal_slowdown", ClockEventReasons::SW_THERMAL_SLOWDOWN), &[]),
    (("Display Clock Setting", "clocks_event_reason_display_clocks_setting", ClockEventReasons::DISPLAY_CLOCK_SETTING), &[]),
];

/// The two kinds of hardware slowdown.
#[rustfmt::skip]
const HW_SLOWDOWNS: &[Reason] = &[
    ("HW Thermal Slowdown", "clocks_event_reason_hw_thermal_slowdown", ClockEventReasons::HW_THERMAL_SLOWDOWN),
    ("HW Power Brake Slowdown", "clocks_event_reason_hw_power_brake_slowdown", ClockEventReasons::HW_POWER_BRAKE_SLOWDOWN),
];

fn reason(d: &DeviceSnapshot, reason: ClockEventReasons) -> String {
    na(d.clock_event_reasons.clone().map(|r| {
        if ClockEventReasons::from_bits_retain(r).contains(reason) {
            "Active"
        } else {
            "Not Active"
        }
        .to_string()
    }))
}

/// The clock event reasons' lines, each kind under its reason.
fn reasons(d: &DeviceSnapshot) -> Vec<Node> {
    let line = |&(label, tag, bit): &Reason| leaf(label, tag, reason(d, bit));
    REASONS
        .iter()
        .map(|(reason, kinds)| {
            let mut node = line(reason);
            node.children = kinds.iter().map(line).collect();
            node
        })
        .collect()
}

/// One process of a GPU, as `-q`'s Processes lists it.
pub struct ProcessLine {
    /// GPU-instance id (MIG).
    pub gpu_instance_id: Option<u32>,
    /// Compute-instance id (MIG).
    pub compute_instance_id: Option<u32>,
    /// Process id.
    pub pid: u32,
    /// `C`, `G` or `C+G`.
    pub kind: &'static str,
    /// The program, as nvidia-smi names it.
    pub name: Na<String>,
    /// GPU memory used, bytes.
    pub used_memory: Option<u64>,
}

/// The names of the modes `-q` shows as their `Current` and `Pending` values: the heading's
/// label and element, and the elements of its two lines.
#[rustfmt::skip]
mod modes {
    pub(super) type Names = (&'static str, &'static str, [&'static str; 2]);
    pub(super) const MIG: Names = ("MIG Mode", "mig_mode", ["current_mig", "pending_mig"]);
    pub(super) const DRIVER_MODEL: Names = ("Driver Model", "driver_model", ["current_dm", "pending_dm"]);
    pub(super) const GPU_OPERATION: Names = ("GPU Operation Mode", "gpu_operation_mode", ["current_gom", "pending_gom"]);
    pub(super) const DRAM_ENCRYPTION: Names = ("DRAM Encryption Mode", "dram_encryption_mode", ["current_dram_encryption", "pending_dram_encryption"]);
    pub(super) const ECC: Names = ("ECC Mode", "ecc_mode", ["current_ecc", "pending_ecc"]);
}

/// A mode's `Current` and `Pending` lines (MIG, ECC, the driver model, ...), each value as
/// `text` writes it.
fn current_pending<T: Clone>(
    v: &Na<gpu_backend::CurrentPending<T>>,
    text: fn(T) -> String,
    (label, tag, [current, pending]): modes::Names,
) -> Node {
    let line = |label, tag, pick: fn(gpu_backend::CurrentPending<T>) -> T| {
        leaf(label, tag, na(v.clone().map(|m| text(pick(m)))))
    };
    group(
        label,
        tag,
        vec![
            line("Current", current, |m| m.current),
            line("Pending", pending, |m| m.pending),
        ],
    )
}

/// The driver model as nvidia-smi writes it (`WDDM`).
fn driver_model(m: gpu_backend::DriverModel) -> String {
    format!("{m:?}").to_uppercase()
}

/// A memory's `Total`, `Used` and `Free` lines, in MiB as `in_mib` counts them.
fn total_used_free<M: Clone>(
    v: &Na<M>,
    parts: fn(&M) -> [u64; 3],
    in_mib: fn(Na<u64>) -> String,
) -> Vec<Node> {
    [("Total", "total"), ("Used", "used"), ("Free", "free")]
        .into_iter()
        .enumerate()
        .map(|(i, (label, tag))| leaf(label, tag, in_mib(v.clone().map(|m| parts(&m)[i]))))
        .collect()
}

/// Frame-buffer memory (`FB Memory Usage`, a MIG device's `Shared FB Memory Usage`): its
/// reserved part after its total.
fn fb_memory(label: &str, memory: &Na<gpu_backend::MemoryInfo>) -> Node {
    let mut rows = total_used_free(memory, |m| [m.total, m.used, m.free], fb_mib);
    let reserved = memory
        .clone()
        .and_then(|m| m.reserved.map_or(Na::NotAvailable, Na::Value));
    rows.insert(1, leaf("Reserved", "reserved", fb_mib(reserved)));
    group(label, "fb_memory_usage", rows)
}

/// BAR1 memory (`BAR1 Memory Usage`, a MIG device's `Shared BAR1 Memory`).
fn bar1_memory(label: &str, bar1: &Na<gpu_backend::Bar1MemoryInfo>) -> Node {
    let rows = total_used_free(bar1, |m| [m.total, m.used, m.free], mib);
    group(label, "bar1_memory_usage", rows)
}

/// A MIG device's lines, as `-q` lists them under its GPU.
fn mig_device(m: &DeviceSnapshot) -> Node {
    let index = match m.id {
        gpu_backend::DeviceId::Mig { index, .. } => index.to_string(),
        gpu_backend::DeviceId::Gpu(_) => "N/A".into(),
    };
    let mut nodes = vec![leaf("Index", "index", index)];
    nodes.extend(lines(m, MIG_INSTANCES));
    nodes.push(fb_memory("Shared FB Memory Usage", &m.memory));
    nodes.push(bar1_memory("Shared BAR1 Memory", &m.bar1_memory));
    group("MIG Device", "mig_device", nodes)
}

/// A MIG device's instances.
#[rustfmt::skip]
const MIG_INSTANCES: &[Line] = &[
    ("GPU Instance ID", "gpu_instance_id", |m| shown(&m.gpu_instance_id)),
    ("Compute Instance ID", "compute_instance_id", |m| shown(&m.compute_instance_id)),
];

/// `-q`'s tree of one GPU, its MIG devices and its processes given (`None`: they could not be
/// read): its sections in nvidia-smi's order.
pub fn gpu(
    d: &DeviceSnapshot,
    migs: &[&DeviceSnapshot],
    processes: Option<&[ProcessLine]>,
    driver_version: Option<&str>,
) -> Vec<Node> {
    let mut nodes = product(d, migs, driver_version);
    nodes.extend(board(d));
    nodes.push(pci(d));
    nodes.extend(performance(d));
    nodes.extend(memory(d));
    nodes.extend(activity(d));
    let dram_encryption = &d.details.dram_encryption_mode;
    nodes.push(current_pending(
        dram_encryption,
        enabled,
        modes::DRAM_ENCRYPTION,
    ));
    nodes.extend(ecc(d));
    nodes.push(temperature(d));
    nodes.extend(power(d));
    nodes.extend(clocks(d));
    nodes.push(fabric(d));
    nodes.push(self::processes(processes));
    nodes.push(capabilities(d));
    nodes
}

/// The product and its modes: name, brand, architecture, display, persistence, MIG (and the
/// MIG devices), accounting, driver model.
fn product(d: &DeviceSnapshot, migs: &[&DeviceSnapshot], driver: Option<&str>) -> Vec<Node> {
    // From driver 580 on nvidia-smi prints the display mode as deprecated (NVML still answers
    // it, and that answer is Display Attached); before, NVML's answer.
    let display_mode = if crate::present::query::display_mode_deprecated(driver) {
        crate::present::query::DISPLAY_MODE_DEPRECATED.to_string()
    } else {
        mode(&d.display_mode)
    };
    let mut nodes = lines(d, PRODUCT);
    nodes.push(leaf("Display Mode", "display_mode", display_mode));
    nodes.extend(lines(d, DISPLAY_AND_MODES));
    nodes.push(current_pending(&d.mig_mode, enabled, modes::MIG));
    nodes.push(Node {
        xml_only: true,
        ..if migs.is_empty() {
            leaf("MIG Devices", "mig_devices", "None")
        } else {
            group(
                "MIG Devices",
                "mig_devices",
                migs.iter().map(|m| mig_device(m)).collect(),
            )
        }
    });
    let accounting = lines(d, ACCOUNTING).into_iter();
    nodes.extend(accounting.map(|line| line.in_section("ACCOUNTING")));
    nodes.push(current_pending(
        &d.driver_model,
        driver_model,
        modes::DRIVER_MODEL,
    ));
    nodes
}

/// The product's name, brand and architecture.
#[rustfmt::skip]
const PRODUCT: &[Line] = &[
    ("Product Name", "product_name", |d| na(d.name.clone())),
    ("Product Brand", "product_brand", |d| na(d.brand.clone().map(brand))),
    ("Product Architecture", "product_architecture", |d| na(d.architecture.clone().map(architecture))),
];

/// The display (after its mode), persistence and addressing modes.
#[rustfmt::skip]
const DISPLAY_AND_MODES: &[Line] = &[
    ("Display Attached", "display_attached", |d| na(d.display_mode.clone().map(yes_no))),
    ("Display Active", "display_active", |d| mode(&d.display_active)),
    ("Persistence Mode", "persistence_mode", |d| mode(&d.persistence_mode)),
    ("Addressing Mode", "addressing_mode", |d| na(d.details.addressing_mode.clone().map(|m| m.label()))),
];

/// Accounting: its mode and its buffer.
#[rustfmt::skip]
const ACCOUNTING: &[Line] = &[
    ("Accounting Mode", "accounting_mode", |d| mode(&d.accounting_mode)),
    ("Accounting Mode Buffer Size", "accounting_mode_buffer_size", |d| shown(&d.details.accounting_buffer_size)),
];

/// The board: serial, UUID, minor number, VBIOS, board ids, inforom, operation and
/// virtualization modes.
fn board(d: &DeviceSnapshot) -> Vec<Node> {
    let mut nodes = lines(d, BOARD);
    nodes.extend([
        platform(d),
        group("Inforom Version", "inforom_version", lines(d, INFOROM)),
        group(
            "Inforom BBX Object Flush",
            "inforom_bbx_flush",
            lines(d, BBX_FLUSH),
        ),
        current_pending(&d.gpu_operation_mode, gom, modes::GPU_OPERATION),
        leaf("GPU C2C Mode", "c2c_mode", mode(&d.details.c2c_mode)),
        group(
            "GPU Virtualization Mode",
            "gpu_virtualization_mode",
            lines(d, VIRTUALIZATION),
        ),
    ]);
    let recovery = d.details.gpu_recovery_action.clone().map(|a| a.label());
    nodes.push(leaf(
        "GPU Recovery Action",
        "gpu_recovery_action",
        na(recovery),
    ));
    let version = na(d.details.gsp_firmware_version.clone());
    let gsp = leaf("GSP Firmware Version", "gsp_firmware_version", version);
    nodes.push(gsp.in_section("GSP_FIRMWARE_VERSION"));
    nodes
}

/// The board's ids and versions, before its platform.
#[rustfmt::skip]
const BOARD: &[Line] = &[
    ("Serial Number", "serial", |d| na(d.serial.clone())),
    ("GPU UUID", "uuid", |d| na(d.uuid.clone())),
    ("GPU PDI", "pdi", |d| na(d.details.pdi.clone().map(|p| format!("{p:#x}")))),
    ("Minor Number", "minor_number", |d| with_unit(&d.minor_number, "").trim_end().to_string()),
    ("VBIOS Version", "vbios_version", |d| na(d.vbios_version.clone())),
    ("MultiGPU Board", "multigpu_board", |d| na(d.multi_gpu_board.clone().map(yes_no))),
    ("Board ID", "board_id", |d| na(d.board_id.clone().map(|b| format!("0x{b:x}")))),
    ("Board Part Number", "board_part_number", |d| na(d.board_part_number.clone())),
];

/// The inforom's versions.
#[rustfmt::skip]
const INFOROM: &[Line] = &[
    ("Image Version", "img_version", |d| na(d.inforom_image_version.clone())),
    ("OEM Object", "oem_object", |d| na(d.details.inforom_oem_version.clone())),
    ("ECC Object", "ecc_object", |d| na(d.details.inforom_ecc_version.clone())),
    ("Power Management Object", "pwr_object", |d| na(d.details.inforom_power_version.clone())),
];

/// The inforom black box's last flush.
#[rustfmt::skip]
const BBX_FLUSH: &[Line] = &[
    ("Latest Timestamp", "latest_timestamp", |d| na(d.details.bbx_flush.clone().map(|f| f.timestamp_us.to_string()))),
    ("Latest Duration", "latest_duration", |d| na(d.details.bbx_flush.clone().map(|f| format!("{} us", f.duration_us)))),
];

/// The virtualization modes.
#[rustfmt::skip]
const VIRTUALIZATION: &[Line] = &[
    ("Virtualization Mode", "virtualization_mode", |d| na(d.virtualization_mode.clone().map(virtualization))),
    ("Host VGPU Mode", "host_vgpu_mode", |d| na(d.details.host_vgpu_mode.clone().map(|m| m.label()))),
    ("vGPU Heterogeneous Mode", "vgpu_heterogeneous_mode", |d| mode(&d.details.vgpu_heterogeneous_mode)),
];

/// PCI: the address (`0x`-prefixed in the text, bare hex in the XML), the link and its
/// throughput.
fn pci(d: &DeviceSnapshot) -> Node {
    let pci = d.pci.value();
    // A PCI number with `digits` hex digits: `0x09` in the text, `09` in the XML.
    let hex =
        |label: &str, tag: &'static str, digits: usize, f: fn(&gpu_backend::PciInfo) -> u32| {
            let (text, xml) = pci.map_or(("N/A".into(), "N/A".into()), |p| {
                (
                    format!("0x{:0digits$X}", f(p)),
                    format!("{:0digits$X}", f(p)),
                )
            });
            leaf(label, tag, text).xml_value(xml)
        };
    let class = |label: &str, tag: &'static str, f: fn(&gpu_backend::PciClass) -> u32| {
        class_code(label, tag, &d.details.pci_class, f)
    };
    let mut nodes = vec![
        hex("Bus", "pci_bus", 2, |p| p.bus),
        hex("Device", "pci_device", 2, |p| p.device),
        hex("Domain", "pci_domain", 4, |p| p.domain),
        class("Base Classcode", "pci_base_class", |c| c.base_class),
        class("Sub Classcode", "pci_sub_class", |c| c.sub_class),
        hex("Device Id", "pci_device_id", 8, |p| p.pci_device_id),
        leaf("Bus Id", "pci_bus_id", na(d.pci.clone().map(|p| p.bus_id))),
        hex("Sub System Id", "pci_sub_system_id", 8, |p| {
            p.pci_subsystem_id
        }),
        group(
            "GPU Link Info",
            "pci_gpu_link_info",
            vec![
                group("PCIe Generation", "pcie_gen", lines(d, PCIE_GENERATION)),
                group("Link Width", "link_widths", lines(d, LINK_WIDTH)),
            ],
        ),
        bridge_chip(d),
    ];
    nodes.extend(lines(d, PCIE_COUNTERS));
    group("PCI", "pci", nodes)
}

/// A PCIe link's width in lanes (`16x`), or N/A.
fn lanes(v: &Na<u32>) -> String {
    na(v.clone().map(|v| format!("{v}x")))
}

/// The PCIe generations, the GPU's link's and the device's.
#[rustfmt::skip]
const PCIE_GENERATION: &[Line] = &[
    ("Max", "max_link_gen", |d| shown(&d.max_pcie_link_generation)),
    ("Current", "current_link_gen", |d| shown(&d.pcie_link_generation)),
    ("Device Current", "device_current_link_gen", |d| shown(&d.pcie_link_generation)),
    ("Device Max", "max_device_link_gen", |d| shown(&d.details.gpu_max_pcie_link_generation)),
];

/// The PCIe link's widths.
#[rustfmt::skip]
const LINK_WIDTH: &[Line] = &[
    ("Max", "max_link_width", |d| lanes(&d.max_pcie_link_width)),
    ("Current", "current_link_width", |d| lanes(&d.pcie_link_width)),
];

/// PCIe atomic capabilities: NVML's bits in hexadecimal, N/A for none (nvidia-smi -q printed N/A
/// where NVML answered 0, on the H100 and the H200 captured).
fn atomic_caps(caps: &Na<u32>) -> String {
    na(caps.clone().and_then(|c| match c {
        0 => Na::NotAvailable,
        c => Na::Value(format!("{c:#x}")),
    }))
}

/// The PCIe link's replays, throughput and atomics.
#[rustfmt::skip]
const PCIE_COUNTERS: &[Line] = &[
    ("Replays Since Reset", "replay_counter", |d| shown(&d.pcie_replay_counter)),
    ("Replay Number Rollovers", "replay_rollover_counter", |d| shown(&d.details.pcie_replay_rollover_counter)),
    ("Tx Throughput", "tx_util", |d| with_unit(&d.pcie_tx_throughput, "KB/s")),
    ("Rx Throughput", "rx_util", |d| with_unit(&d.pcie_rx_throughput, "KB/s")),
    ("Atomic Caps Outbound", "atomic_caps_outbound", |d| atomic_caps(&d.details.pcie_atomics_outbound)),
    ("Atomic Caps Inbound", "atomic_caps_inbound", |d| atomic_caps(&d.details.pcie_atomics_inbound)),
];

/// The fan, the performance state and the clock event reasons.
fn performance(d: &DeviceSnapshot) -> Vec<Node> {
    let state = d.performance_state.clone().and_then(|p| {
        gpu_backend::PerformanceState::known(p)
            .map_or(Na::NotAvailable, |p| Na::Value(p.to_string()))
    });
    vec![
        leaf("Fan Speed", "fan_speed", with_unit(&d.fan_speed, "%")),
        leaf("Performance State", "performance_state", na(state)).in_section("PERFORMANCE"),
        group("Clocks Event Reasons", "clocks_event_reasons", reasons(d)).in_section("PERFORMANCE"),
        event_counters(d).in_section("PERFORMANCE"),
    ]
}

/// Frame-buffer and BAR1 memory, and the compute mode.
fn memory(d: &DeviceSnapshot) -> Vec<Node> {
    vec![
        fb_memory("FB Memory Usage", &d.memory).in_section("MEMORY"),
        bar1_memory("BAR1 Memory Usage", &d.bar1_memory).in_section("MEMORY"),
        protected_memory(d).in_section("MEMORY"),
        leaf(
            "Compute Mode",
            "compute_mode",
            na(d.compute_mode.clone().map(|m| compute_mode(m).to_string())),
        )
        .in_section("COMPUTE"),
    ]
}

/// Utilization, and the encoder's and FBC's sessions.
fn activity(d: &DeviceSnapshot) -> [Node; 3] {
    let sessions = |label, tag, v| group(label, tag, lines(v, SESSIONS));
    let encoder = sessions("Encoder Stats", "encoder_stats", &d.details.encoder_stats);
    let fbc = sessions("FBC Stats", "fbc_stats", &d.details.fbc_stats);
    [
        group("Utilization", "utilization", lines(d, UTILIZATION)).in_section("UTILIZATION"),
        encoder.in_section("ENCODER_STATS"),
        fbc.in_section("FBC_STATS"),
    ]
}

/// GPU, memory, encoder and decoder utilization.
#[rustfmt::skip]
const UTILIZATION: &[Line] = &[
    ("GPU", "gpu_util", |d| with_unit(&d.utilization.clone().map(|u| u.gpu), "%")),
    ("Memory", "memory_util", |d| with_unit(&d.utilization.clone().map(|u| u.memory), "%")),
    ("Encoder", "encoder_util", |d| with_unit(&d.encoder.clone().map(|c| c.utilization), "%")),
    ("Decoder", "decoder_util", |d| with_unit(&d.decoder.clone().map(|c| c.utilization), "%")),
    ("JPEG", "jpeg_util", |d| with_unit(&d.details.jpeg_utilization.clone().map(|c| c.utilization), "%")),
    ("OFA", "ofa_util", |d| with_unit(&d.details.ofa_utilization.clone().map(|c| c.utilization), "%")),
];

/// ECC: the mode, the error counts, retired pages and remapped rows.
fn ecc(d: &DeviceSnapshot) -> Vec<Node> {
    let mut retired: Vec<Node> = RETIRED_PAGES
        .iter()
        .map(|&(label, wrap, pages)| {
            let count = pages(d).clone().map(|p| p.len().to_string());
            leaf(label, "retired_count", na(count)).wrapped(wrap)
        })
        .collect();
    let pending = na(d.retired_pages_pending.clone().map(yes_no));
    retired.push(leaf("Pending Page Blacklist", "pending_blacklist", pending));
    let mut remapped = lines(d, REMAPPED_ROWS);
    remapped.push(histogram(d));
    vec![
        current_pending(&d.ecc_mode, enabled, modes::ECC).in_section("ECC"),
        ecc_errors(d).in_section("ECC"),
        group("Retired Pages", "retired_pages", retired).in_section("PAGE_RETIREMENT"),
        group("Remapped Rows", "remapped_rows", remapped).in_section("ROW_REMAPPER"),
    ]
}

/// The pages retired for a kind of error: its label, the XML element its count is wrapped in,
/// and the pages.
type RetiredPages = (
    &'static str,
    &'static str,
    fn(&DeviceSnapshot) -> &Na<Vec<u64>>,
);

/// The pages retired for each kind of error.
#[rustfmt::skip]
const RETIRED_PAGES: &[RetiredPages] = &[
    ("Single Bit ECC", "multiple_single_bit_retirement", |d| &d.retired_pages_single_bit),
    ("Double Bit ECC", "double_bit_retirement", |d| &d.retired_pages_double_bit),
];

/// The rows remapped (the active ones and the inactive), pending and failed.
#[rustfmt::skip]
const REMAPPED_ROWS: &[Line] = &[
    ("Correctable Error", "remapped_row_corr", |d| na(d.remapped_rows.clone().map(|r| r.correctable.to_string()))),
    ("Inactive Correctable Error", "remapped_row_corr_inactive", |d| na(d.details.inactive_remapped_rows.clone().map(|r| r.correctable.to_string()))),
    ("Uncorrectable Error", "remapped_row_unc", |d| na(d.remapped_rows.clone().map(|r| r.uncorrectable.to_string()))),
    ("Inactive Uncorrectable Error", "remapped_row_unc_inactive", |d| na(d.details.inactive_remapped_rows.clone().map(|r| r.uncorrectable.to_string()))),
    ("Pending", "remapped_row_pending", |d| na(d.remapped_rows.clone().map(|r| yes_no(r.pending)))),
    ("Remapping Failure Occurred", "remapped_row_failure", |d| na(d.remapped_rows.clone().map(|r| yes_no(r.failure)))),
];

/// The GPU's and the memory's temperatures and thresholds: against T.Limit, as nvidia-smi 580
/// prints them, where NVML answers those; else the absolute thresholds older nvidia-smi printed
/// (a driver, or a recording, without the T.Limit answers).
fn temperature(d: &DeviceSnapshot) -> Node {
    let x = &d.details;
    let tlimit = [
        &x.tlimit_shutdown,
        &x.tlimit_slowdown,
        &x.tlimit_gpu_max,
        &x.tlimit_memory_max,
    ]
    .iter()
    .any(|v| v.value().is_some());
    let table = if tlimit {
        TLIMIT_TEMPERATURES
    } else {
        TEMPERATURES
    };
    group("Temperature", "temperature", lines(d, table)).in_section("TEMPERATURE")
}

/// The temperatures against T.Limit (nvidia-smi 580).
#[rustfmt::skip]
const TLIMIT_TEMPERATURES: &[Line] = &[
    ("GPU Current Temp", "gpu_temp", |d| with_unit(&d.temperature, "C")),
    ("GPU T.Limit Temp", "gpu_temp_tlimit", |d| with_unit(&d.details.margin_temperature, "C")),
    ("GPU Shutdown T.Limit Temp", "gpu_temp_max_tlimit_threshold", |d| with_unit(&d.details.tlimit_shutdown, "C")),
    ("GPU Slowdown T.Limit Temp", "gpu_temp_slow_tlimit_threshold", |d| with_unit(&d.details.tlimit_slowdown, "C")),
    ("GPU Max Operating T.Limit Temp", "gpu_temp_max_gpu_tlimit_threshold", |d| with_unit(&d.details.tlimit_gpu_max, "C")),
    ("GPU Target Temperature", "gpu_target_temperature", |d| with_unit(&d.details.temperature_target, "C")),
    ("Memory Current Temp", "memory_temp", |d| with_unit(&d.memory_temperature, "C")),
    ("Memory Max Operating T.Limit Temp", "gpu_temp_max_mem_tlimit_threshold", |d| with_unit(&d.details.tlimit_memory_max, "C")),
];

/// The temperatures and absolute thresholds (older nvidia-smi).
#[rustfmt::skip]
const TEMPERATURES: &[Line] = &[
    ("GPU Current Temp", "gpu_temp", |d| with_unit(&d.temperature, "C")),
    ("GPU Shutdown Temp", "gpu_temp_max_threshold", |d| with_unit(&d.temperature_shutdown, "C")),
    ("GPU Slowdown Temp", "gpu_temp_slow_threshold", |d| with_unit(&d.temperature_slowdown, "C")),
    ("GPU Max Operating Temp", "gpu_temp_max_gpu_threshold", |d| with_unit(&d.temperature_gpu_max, "C")),
    ("Memory Current Temp", "memory_temp", |d| with_unit(&d.memory_temperature, "C")),
    ("Memory Max Operating Temp", "gpu_temp_max_mem_threshold", |d| with_unit(&d.temperature_memory_max, "C")),
];

/// The power readings (the GPU's, its memory's and its module's), and power smoothing.
fn power(d: &DeviceSnapshot) -> Vec<Node> {
    let mut nodes: Vec<Node> = POWER_READINGS
        .iter()
        .map(|&(label, tag, table)| group(label, tag, lines(d, table)).in_section("POWER"))
        .collect();
    // Power smoothing's settings are `--query-gpu`'s; `-q`'s own layout of them was not seen in
    // a capture, so the line is printed only as nvidia-smi prints it without them.
    if d.details.power_smoothing.value().is_none() {
        let line = leaf(
            "Power Smoothing",
            "power_smoothing",
            na(d.details.power_smoothing.clone().map(|_| String::new())),
        );
        nodes.push(line.in_section("POWER_SMOOTHING"));
    }
    nodes
}

/// The power readings' headings, elements and lines (nvidia-smi 580 writes the memory's
/// heading with a space at its end).
#[rustfmt::skip]
const POWER_READINGS: [(&str, &str, &[Line]); 3] = [
    ("GPU Power Readings", "gpu_power_readings", POWER),
    ("GPU Memory Power Readings ", "gpu_memory_power_readings", MEMORY_POWER),
    ("Module Power Readings", "module_power_readings", MODULE_POWER),
];

/// Milliwatts in watts as nvidia-smi writes them (`69.85 W`), or N/A.
fn power_watts(v: &Na<u32>) -> String {
    na(v.clone().map(|mw| format!("{} W", watts(mw))))
}

/// The power draw and limits.
#[rustfmt::skip]
const POWER: &[Line] = &[
    ("Average Power Draw", "average_power_draw", |d| power_watts(&d.power_usage)),
    ("Instantaneous Power Draw", "instant_power_draw", |d| power_watts(&d.details.power_instant_gpu)),
    ("Current Power Limit", "current_power_limit", |d| power_watts(&d.enforced_power_limit)),
    ("Requested Power Limit", "requested_power_limit", |d| power_watts(&d.power_limit)),
    ("Default Power Limit", "default_power_limit", |d| power_watts(&d.power_default_limit)),
    ("Min Power Limit", "min_power_limit", |d| power_watts(&d.power_limit_constraints.clone().map(|l| l.min_mw))),
    ("Max Power Limit", "max_power_limit", |d| power_watts(&d.power_limit_constraints.clone().map(|l| l.max_mw))),
];

/// The GPU memory's power.
#[rustfmt::skip]
const MEMORY_POWER: &[Line] = &[
    ("Average Power Draw", "average_power_draw", |d| power_watts(&d.details.power_average_memory)),
    ("Instantaneous Power Draw", "instant_power_draw", |d| power_watts(&d.details.power_instant_memory)),
];

/// The module's power (GPU and CPU of a Grace Hopper or Blackwell module).
#[rustfmt::skip]
const MODULE_POWER: &[Line] = &[
    ("Average Power Draw", "average_power_draw", |d| power_watts(&d.details.power_average_module)),
    ("Instantaneous Power Draw", "instant_power_draw", |d| power_watts(&d.details.power_instant_module)),
    ("Current Power Limit", "current_power_limit", |d| module_limit(d, |l| l.current)),
    ("Requested Power Limit", "requested_power_limit", |d| module_limit(d, |l| l.requested)),
    ("Default Power Limit", "default_power_limit", |d| module_limit(d, |l| l.default)),
    ("Min Power Limit", "min_power_limit", |d| module_limit(d, |l| l.min)),
    ("Max Power Limit", "max_power_limit", |d| module_limit(d, |l| l.max)),
];

/// One of the module's power limits.
fn module_limit(
    d: &DeviceSnapshot,
    pick: fn(&gpu_backend::ScopedPowerLimits) -> Option<u32>,
) -> String {
    let limits = &d.details.module_power_limits;
    power_watts(
        &limits
            .clone()
            .and_then(|l| pick(&l).map_or(Na::NotAvailable, Na::Value)),
    )
}

/// A set of clocks: its label, its element, the clocks, and whether SM and video are shown.
type Clocks = (
    &'static str,
    &'static str,
    fn(&DeviceSnapshot) -> &gpu_devices::snapshot::ClockInfos,
    bool,
);

/// The clocks now, the applications clocks (set and default) and the highest.
#[rustfmt::skip]
const CLOCKS: &[Clocks] = &[
    ("Clocks", "clocks", |d| &d.clocks, true),
    ("Applications Clocks", "applications_clocks", |d| &d.applications_clocks, false),
    ("Default Applications Clocks", "default_applications_clocks", |d| &d.default_applications_clocks, false),
    ("Max Clocks", "max_clocks", |d| &d.max_clocks, true),
];

/// The clocks now, the applications clocks (set and default), the highest, the highest the
/// board maker allows, and the clock policy.
fn clocks(d: &DeviceSnapshot) -> Vec<Node> {
    CLOCKS
        .iter()
        .map(|&(label, tag, clocks, sm_video)| {
            let c = clocks(d);
            let mut v = vec![leaf(
                "Graphics",
                "graphics_clock",
                with_unit(&c.graphics, "MHz"),
            )];
            if sm_video {
                v.push(leaf("SM", "sm_clock", with_unit(&c.sm, "MHz")));
            }
            v.push(leaf("Memory", "mem_clock", with_unit(&c.memory, "MHz")));
            if sm_video {
                v.push(leaf("Video", "video_clock", with_unit(&c.video, "MHz")));
            }
            group(label, tag, v)
        })
        .chain([
            customer_boost(d),
            group("Clock Policy", "clock_policy", lines(d, CLOCK_POLICY)),
        ])
        .map(|clocks| clocks.in_section("CLOCK"))
        .collect()
}

/// A number NVML answered, or N/A.
fn shown<T: ToString + Clone>(v: &Na<T>) -> String {
    na(v.clone().map(|v| v.to_string()))
}

/// Where the GPU sits in its platform. nvidia-smi -q prints N/A for the rack's coordinates and
/// the fabric GUID of a GPU before Blackwell outside a rack (NVML answering zeros, an empty
/// chassis serial and host 1: the H100s and H200 captured, on drivers 580 and 590, and a
/// GeForce), but prints those zeros for a Blackwell (an RTX PRO 6000 on 590); the module id
/// as answered on all. So does this. `--query-gpu`'s `platform.*` print NVML's numbers, as
/// nvidia-smi's do.
fn platform(d: &DeviceSnapshot) -> Node {
    let p = &d.details.platform_info;
    use gpu_backend::Architecture as A;
    let before_blackwell = matches!(
        d.architecture.value(),
        Some(
            A::Kepler
                | A::Maxwell
                | A::Pascal
                | A::Volta
                | A::Turing
                | A::Ampere
                | A::Ada
                | A::Hopper
        )
    );
    let outside_a_rack = before_blackwell
        && p.value()
            .is_some_and(|p| p.ib_guid.bytes().all(|c| c == b'0'));
    let rack = |label: &str, tag: &'static str, f: fn(&gpu_backend::PlatformInfo) -> String| {
        let v = if outside_a_rack {
            Na::NotAvailable
        } else {
            p.clone().map(|p| f(&p))
        };
        leaf(label, tag, na(v))
    };
    group(
        "Platform Info",
        "platformInfo",
        vec![
            rack("Chassis Serial Number", "chassis_serial_number", |p| {
                p.chassis_serial_number.clone()
            }),
            rack("Slot Number", "slot_number", |p| p.slot_number.to_string()),
            rack("Tray Index", "tray_index", |p| p.tray_index.to_string()),
            rack("Host ID", "host_id", |p| p.host_id.to_string()),
            rack("Peer Type", "peer_type", |p| {
                gpu_backend::peer_type_label(p.peer_type)
            }),
            leaf(
                "Module Id",
                "module_id",
                na(p.clone().map(|p| p.module_id.to_string())),
            ),
            rack("GPU Fabric GUID", "gpu_fabric_guid", |p| {
                format!("0x{}", p.ib_guid.get(..16).unwrap_or(&p.ib_guid))
            }),
        ],
    )
}

/// A PCI class code: `0x3` in the text, `3` in the XML.
fn class_code(
    label: &str,
    tag: &'static str,
    v: &Na<gpu_backend::PciClass>,
    f: fn(&gpu_backend::PciClass) -> u32,
) -> Node {
    let (text, xml) = v.value().map_or(("N/A".into(), "N/A".into()), |c| {
        (format!("0x{:X}", f(c)), format!("{:X}", f(c)))
    });
    leaf(label, tag, text).xml_value(xml)
}

/// The first bridge chip between the GPU and the host, N/A when there is none.
fn bridge_chip(d: &DeviceSnapshot) -> Node {
    let first = d
        .details
        .bridge_chips
        .clone()
        .and_then(|c| c.first().copied().map_or(Na::NotAvailable, Na::Value));
    group(
        "Bridge Chip",
        "pci_bridge_chip",
        vec![
            leaf(
                "Type",
                "bridge_chip_type",
                na(first.clone().map(|c| match c.kind {
                    0 => "PLX".to_string(),
                    1 => "BR04".to_string(),
                    other => other.to_string(),
                })),
            ),
            leaf(
                "Firmware",
                "bridge_chip_fw",
                na(first.map(|c| format!("{:#x}", c.firmware))),
            ),
        ],
    )
}

/// How long each clock-event reason held the clocks since the driver loaded.
fn event_counters(d: &DeviceSnapshot) -> Node {
    group(
        "Clocks Event Reasons Counters",
        "clocks_event_reasons_counters",
        lines(d, EVENT_COUNTERS),
    )
}

/// Nanoseconds in whole microseconds (`12 us`), or N/A.
fn micros(v: &Na<u64>) -> String {
    na(v.clone().map(|ns| format!("{} us", ns / 1000)))
}

/// The clock-event reasons' times.
#[rustfmt::skip]
const EVENT_COUNTERS: &[Line] = &[
    ("SW Power Capping", "clocks_event_reasons_counters_sw_power_cap", |d| micros(&d.details.clock_event_time_sw_power_cap)),
    ("Sync Boost", "clocks_event_reasons_counters_sync_boost", |d| micros(&d.details.clock_event_time_sync_boost)),
    ("SW Thermal Slowdown", "clocks_event_reasons_counters_sw_therm_slowdown", |d| micros(&d.details.clock_event_time_sw_thermal_slowdown)),
    ("HW Thermal Slowdown", "clocks_event_reasons_counters_hw_therm_slowdown", |d| micros(&d.details.clock_event_time_hw_thermal_slowdown)),
    ("HW Power Braking", "clocks_event_reasons_counters_hw_power_brake", |d| micros(&d.details.clock_event_time_hw_power_brake)),
];

/// Confidential-computing protected memory.
fn protected_memory(d: &DeviceSnapshot) -> Node {
    let m = &d.details.protected_memory;
    let rows = total_used_free(m, |m| [m.total, m.used, m.free], fb_mib);
    group(
        "Conf Compute Protected Memory Usage",
        "cc_protected_memory_usage",
        rows,
    )
}

/// Encoder or FBC sessions.
#[rustfmt::skip]
const SESSIONS: &[Line<Na<gpu_backend::SessionStats>>] = &[
    ("Active Sessions", "session_count", |v| shown(&v.clone().map(|s| s.sessions))),
    ("Average FPS", "average_fps", |v| shown(&v.clone().map(|s| s.average_fps))),
    ("Average Latency", "average_latency", |v| shown(&v.clone().map(|s| s.average_latency_us))),
];

/// Where one period's ECC error counts are: corrected and uncorrected (by location), and
/// SRAM's uncorrected parity and SEC-DED errors.
#[derive(Clone, Copy)]
struct EccPeriod {
    corrected: fn(&gpu_backend::LocationEccCounts) -> Option<u64>,
    uncorrected: fn(&gpu_backend::LocationEccCounts) -> Option<u64>,
    parity: fn(&gpu_backend::SramEccStatus) -> u64,
    sec_ded: fn(&gpu_backend::SramEccStatus) -> u64,
}

/// The two periods: since the driver loaded (volatile) and over the board's life (aggregate).
#[rustfmt::skip]
const ECC_PERIODS: [(&str, &str, EccPeriod); 2] = [
    ("Volatile", "volatile", EccPeriod { corrected: |c| c.volatile_corrected, uncorrected: |c| c.volatile_uncorrected, parity: |s| s.volatile_uncorrectable_parity, sec_ded: |s| s.volatile_uncorrectable_sec_ded }),
    ("Aggregate", "aggregate", EccPeriod { corrected: |c| c.aggregate_corrected, uncorrected: |c| c.aggregate_uncorrected, parity: |s| s.aggregate_uncorrectable_parity, sec_ded: |s| s.aggregate_uncorrectable_sec_ded }),
];

/// An ECC error count's line: its label, its element, and its value in a period.
type EccCount = (
    &'static str,
    &'static str,
    fn(&DeviceSnapshot, EccPeriod) -> String,
);

/// A period's ECC error counts: SRAM corrected (by location) and uncorrected by kind (SRAM ECC
/// detail), DRAM (by location).
#[rustfmt::skip]
const ECC_COUNTS: &[EccCount] = &[
    ("SRAM Correctable", "sram_correctable", |d, p| ecc_count(&d.ecc_by_location.sram, p.corrected)),
    ("SRAM Uncorrectable Parity", "sram_uncorrectable_parity", |d, p| sram_count(d, p.parity)),
    ("SRAM Uncorrectable SEC-DED", "sram_uncorrectable_secded", |d, p| sram_count(d, p.sec_ded)),
    ("DRAM Correctable", "dram_correctable", |d, p| ecc_count(&d.ecc_by_location.device_memory, p.corrected)),
    ("DRAM Uncorrectable", "dram_uncorrectable", |d, p| ecc_count(&d.ecc_by_location.device_memory, p.uncorrected)),
];

/// A count of ECC errors at a location, or N/A.
fn ecc_count(
    v: &Na<gpu_backend::LocationEccCounts>,
    pick: fn(&gpu_backend::LocationEccCounts) -> Option<u64>,
) -> String {
    na(v.clone()
        .and_then(|c| pick(&c).map_or(Na::NotAvailable, |n| Na::Value(n.to_string()))))
}

/// A count of SRAM's errors from its ECC detail, or N/A.
fn sram_count(d: &DeviceSnapshot, pick: fn(&gpu_backend::SramEccStatus) -> u64) -> String {
    shown(&d.details.sram_ecc_status.clone().map(|s| pick(&s)))
}

/// Where the SRAM's uncorrected errors were, over the board's life.
#[rustfmt::skip]
const SRAM_SOURCES: &[Line] = &[
    ("SRAM L2", "sram_l2", |d| sram_count(d, |s| s.aggregate_uncorrectable_l2)),
    ("SRAM SM", "sram_sm", |d| sram_count(d, |s| s.aggregate_uncorrectable_sm)),
    ("SRAM Microcontroller", "sram_microcontroller", |d| sram_count(d, |s| s.aggregate_uncorrectable_mcu)),
    ("SRAM PCIE", "sram_pcie", |d| sram_count(d, |s| s.aggregate_uncorrectable_pcie)),
    ("SRAM Other", "sram_other", |d| sram_count(d, |s| s.aggregate_uncorrectable_other)),
];

/// The repairs pending.
#[rustfmt::skip]
const REPAIRS: &[Line] = &[
    ("Channel Repair Pending", "channel_repair_pending", |d| na(d.details.repair_status.clone().map(|r| yes_no(r.channel_repair_pending)))),
    ("TPC Repair Pending", "tpc_repair_pending", |d| na(d.details.repair_status.clone().map(|r| yes_no(r.tpc_repair_pending)))),
];

/// The ECC error counts, since the driver loaded (volatile) and over the board's life
/// (aggregate); where the SRAM's uncorrected errors were; repairs pending.
fn ecc_errors(d: &DeviceSnapshot) -> Node {
    let [volatile, mut aggregate] = ECC_PERIODS.map(|(label, tag, period)| {
        let counts = ECC_COUNTS
            .iter()
            .map(|&(label, tag, count)| leaf(label, tag, count(d, period)));
        group(label, tag, counts.collect())
    });
    // Whether SRAM's errors passed the threshold is told with the board's life's counts.
    let exceeded = d
        .details
        .sram_ecc_status
        .clone()
        .map(|s| yes_no(s.threshold_exceeded));
    aggregate.children.push(leaf(
        "SRAM Threshold Exceeded",
        "sram_threshold_exceeded",
        na(exceeded),
    ));
    let sources = group(
        "Aggregate Uncorrectable SRAM Sources",
        "aggregate_uncorrectable_sram_sources",
        lines(d, SRAM_SOURCES),
    );
    let mut nodes = vec![volatile, aggregate, sources];
    nodes.extend(lines(d, REPAIRS));
    group("ECC Errors", "ecc_errors", nodes)
}

/// Memory banks by the spare rows they have left.
fn histogram(d: &DeviceSnapshot) -> Node {
    let h = &d.details.row_remapper_histogram;
    let banks =
        |label: &str, tag: &'static str, f: fn(&gpu_backend::RowRemapperHistogram) -> u32| {
            leaf(
                label,
                tag,
                na(h.clone().map(|h| format!("{} bank(s)", f(&h)))),
            )
        };
    group(
        "Bank Remap Availability Histogram",
        "row_remapper_histogram",
        vec![
            banks("Max", "row_remapper_histogram_max", |h| h.max),
            banks("High", "row_remapper_histogram_high", |h| h.high),
            banks("Partial", "row_remapper_histogram_partial", |h| h.partial),
            banks("Low", "row_remapper_histogram_low", |h| h.low),
            banks("None", "row_remapper_histogram_none", |h| h.none),
        ],
    )
}

/// The highest clocks the board maker allows.
fn customer_boost(d: &DeviceSnapshot) -> Node {
    group(
        "Max Customer Boost Clocks",
        "max_customer_boost_clocks",
        vec![leaf(
            "Graphics",
            "graphics_clock",
            with_unit(&d.details.max_customer_boost_clocks.graphics, "MHz"),
        )],
    )
}

/// Whether the clocks boost on their own, now and by default.
#[rustfmt::skip]
const CLOCK_POLICY: &[Line] = &[
    ("Auto Boost", "auto_boost", |d| na(d.details.auto_boosted_clocks.clone().map(|a| on_off(a.current)))),
    ("Auto Boost Default", "auto_boost_default", |d| na(d.details.auto_boosted_clocks.clone().map(|a| on_off(a.default)))),
];

fn on_off(v: bool) -> String {
    if v { "On" } else { "Off" }.to_string()
}

/// The NVLink fabric: registration and health, N/A without one (as nvidia-smi prints it).
fn fabric(d: &DeviceSnapshot) -> Node {
    let mut nodes = lines(d, FABRIC);
    nodes.push(group("Health", "health", lines(d, FABRIC_HEALTH)));
    group("Fabric", "fabric", nodes)
}

/// The fabric's registration.
#[rustfmt::skip]
const FABRIC: &[Line] = &[
    ("State", "state", |d| fabric_part(d, q::fabric_state)),
    ("Status", "status", |d| fabric_part(d, q::fabric_status)),
    ("CliqueId", "cliqueId", |d| fabric_part(d, |f| Some(f.clique_id.to_string()))),
    ("ClusterUUID", "clusterUuid", |d| fabric_part(d, |f| Some(f.cluster_uuid.clone()))),
];

/// The fabric's health.
#[rustfmt::skip]
const FABRIC_HEALTH: &[Line] = &[
    ("Summary", "summary", |d| fabric_part(d, |f| q::health_summary(f.health_summary))),
    ("Bandwidth", "bandwidth", |d| fabric_health(d, FabricHealthPart::DegradedBandwidth)),
    ("Route Recovery in progress", "route_recovery_in_progress", |d| fabric_health(d, FabricHealthPart::RouteRecovery)),
    ("Route Unhealthy", "route_unhealthy", |d| fabric_health(d, FabricHealthPart::RouteUnhealthy)),
    ("Access Timeout Recovery", "access_timeout_recovery", |d| fabric_health(d, FabricHealthPart::AccessTimeoutRecovery)),
    ("Incorrect Configuration", "incorrect_configuration", |d| fabric_part(d, q::incorrect_configuration)),
    ("Partition Assigned", "partition_assigned", |d| fabric_health(d, FabricHealthPart::PartitionAssigned)),
];

/// A part of the fabric's answer ([`q::fabric_part`]).
fn fabric_part(d: &DeviceSnapshot, part: fn(&gpu_backend::FabricInfo) -> Option<String>) -> String {
    na(q::fabric_part(&d.details.fabric_info, part))
}

/// A yes/no part of the fabric's health ([`q::fabric_health`]).
fn fabric_health(d: &DeviceSnapshot, part: FabricHealthPart) -> String {
    na(q::fabric_health(&d.details.fabric_info, part))
}

/// The device's capabilities: EGM (`NVML_DEV_CAP_EGM`, bit 0), `enabled` or `disabled`.
fn capabilities(d: &DeviceSnapshot) -> Node {
    group(
        "Capabilities",
        "capabilities",
        vec![leaf(
            "EGM",
            "egm",
            na(d.details
                .capabilities
                .clone()
                .map(|c| if c & 1 != 0 { "enabled" } else { "disabled" }.to_string())),
        )],
    )
}

/// The GPU's processes (`None`: they could not be read).
fn processes(processes: Option<&[ProcessLine]>) -> Node {
    let procs = match processes {
        None => leaf("Processes", "processes", "N/A"),
        // "Processes : None" in the text; an empty element in the XML.
        Some([]) => group("Processes", "processes", Vec::new()).none_in_text(),
        Some(list) => group("Processes", "processes", list.iter().map(process).collect()),
    };
    // nvidia-smi pads a process's lines to 42, the Processes line itself to 55.
    let mut procs = procs.in_section("PIDS");
    procs.children = procs.children.into_iter().map(|c| c.width(42)).collect();
    procs
}

/// One process's lines.
fn process(p: &ProcessLine) -> Node {
    let id = |v: Option<u32>| v.map_or("N/A".to_string(), |v| v.to_string());
    group(
        "",
        "process_info",
        vec![
            leaf("GPU instance ID", "gpu_instance_id", id(p.gpu_instance_id)),
            leaf(
                "Compute instance ID",
                "compute_instance_id",
                id(p.compute_instance_id),
            ),
            group(
                "Process ID",
                "",
                vec![
                    leaf("Type", "type", p.kind),
                    leaf("Name", "process_name", na(p.name.clone())),
                    leaf(
                        "Used GPU Memory",
                        "used_memory",
                        p.used_memory.map_or("N/A".into(), |b| {
                            format!("{} MiB", crate::present::value::nearest_mib(b))
                        }),
                    ),
                ],
            )
            .xml_value(p.pid.to_string()),
        ],
    )
}

/// `nodes` kept to the `-d` sections asked (all when none was).
pub fn keep_sections(nodes: Vec<Node>, sections: &[String]) -> Vec<Node> {
    if sections.is_empty() {
        return nodes;
    }
    nodes
        .into_iter()
        .filter(|n| n.section.is_some_and(|s| sections.iter().any(|x| x == s)))
        .collect()
}

/// Writes `nodes` as `-q`'s text at `depth` (four spaces a level).
pub fn text(out: &mut String, nodes: &[Node], depth: usize) {
    for n in nodes {
        let indent = "    ".repeat(depth);
        if n.xml_only {
            text(out, &n.children, depth);
            continue;
        }
        // A process's lines hang under its "Process ID : PID" line, which is written with the
        // process's first lines at the process's own depth (nvidia-smi's layout).
        if n.tag == "process_info" {
            text(out, &n.children, depth);
            continue;
        }
        if n.tag.is_empty() {
            // "Process ID : 541", then its lines one level down.
            let key = format!("{indent}{}", n.label);
            let _ = writeln!(
                out,
                "{key:<w$}: {}",
                n.xml.as_deref().unwrap_or(""),
                w = n.width
            );
            text(out, &n.children, depth + 1);
            continue;
        }
        match &n.text {
            Some(v) => {
                let key = format!("{indent}{}", n.label);
                let v = gpu_devices::text::escape_control(v);
                let _ = writeln!(out, "{key:<w$}: {v}", w = n.width);
                text(out, &n.children, depth + 1);
            }
            None if n.text_none => {
                let key = format!("{indent}{}", n.label);
                let _ = writeln!(out, "{key:<w$}: None", w = n.width);
            }
            None => {
                let _ = writeln!(out, "{indent}{}", n.label);
                text(out, &n.children, depth + 1);
            }
        }
    }
}

/// Writes `nodes` as `-x`'s XML at `depth` (a tab a level).
pub fn xml(out: &mut String, nodes: &[Node], depth: usize) {
    for n in nodes {
        let indent = "\t".repeat(depth);
        if n.tag.is_empty() {
            // The process id line: `<pid>` then its lines at the same level.
            let pid = n.xml.as_deref().unwrap_or("");
            let _ = writeln!(out, "{indent}<pid>{}</pid>", escape(pid));
            xml(out, &n.children, depth);
            continue;
        }
        match &n.text {
            Some(v) => {
                let v = n.xml.as_deref().unwrap_or(v);
                match n.wrap {
                    Some(w) => {
                        let _ = writeln!(
                            out,
                            "{indent}<{w}>\n{indent}\t<{0}>{1}</{0}>\n{indent}</{w}>",
                            n.tag,
                            escape(v)
                        );
                    }
                    None => {
                        let _ = writeln!(out, "{indent}<{0}>{1}</{0}>", n.tag, escape(v));
                    }
                }
                xml(out, &n.children, depth);
            }
            None => {
                let _ = writeln!(out, "{indent}<{}>", n.tag);
                xml(out, &n.children, depth + 1);
                let _ = writeln!(out, "{indent}</{}>", n.tag);
            }
        }
    }
}

/// Outside text for XML: markup characters as entities, control characters as visible escapes
/// (XML 1.0 cannot hold most of them, and a terminal must not receive them).
pub fn escape(text: &str) -> String {
    quick_xml::escape::escape(gpu_devices::text::escape_control(text).as_ref()).into_owned()
}
