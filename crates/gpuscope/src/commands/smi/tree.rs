//! `gpuscope smi -q`: each GPU's answers as nvidia-smi's `-q` lays them out, one tree that is
//! written as nvidia-smi's text (`Label   : value`, four spaces a level) or its XML (`-x`).
//!
//! The tree follows nvidia-smi 580's sections and keys in its order; a value the GPU, the driver
//! or a recording cannot give is `N/A`, as nvidia-smi writes it. A line nvidia-smi prints from
//! a query gpuscope does not make (part numbers, IBMNPU, workload power profiles, ...) is left
//! out rather than shown as a made-up N/A (docs/smi.md lists them).

use std::fmt::Write as _;

use gpu_backend::{Architecture, Brand, ClockEventReasons, VirtualizationMode};
use gpu_devices::{DeviceSnapshot, Na};

use crate::present::query::{compute_mode, enabled, gom, watts, yes_no};

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

/// Clock event reasons, nvidia-smi's order: (label, tag, reason).
const REASONS: &[(&str, &str, ClockEventReasons)] = &[
    (
        "Idle",
        "clocks_event_reason_gpu_idle",
        ClockEventReasons::GPU_IDLE,
    ),
    (
        "Applications Clocks Setting",
        "clocks_event_reason_applications_clocks_setting",
        ClockEventReasons::APPLICATIONS_CLOCKS_SETTING,
    ),
    (
        "SW Power Cap",
        "clocks_event_reason_sw_power_cap",
        ClockEventReasons::SW_POWER_CAP,
    ),
    (
        "HW Slowdown",
        "clocks_event_reason_hw_slowdown",
        ClockEventReasons::HW_SLOWDOWN,
    ),
    (
        "Sync Boost",
        "clocks_event_reason_sync_boost",
        ClockEventReasons::SYNC_BOOST,
    ),
    (
        "SW Thermal Slowdown",
        "clocks_event_reason_sw_thermal_slowdown",
        ClockEventReasons::SW_THERMAL_SLOWDOWN,
    ),
    (
        "Display Clock Setting",
        "clocks_event_reason_display_clocks_setting",
        ClockEventReasons::DISPLAY_CLOCK_SETTING,
    ),
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

/// `Current` and `Pending` of a mode, `Enabled` or `Disabled` (MIG, ECC).
fn current_pending(
    v: &Na<gpu_backend::CurrentPending<bool>>,
    label: &str,
    tag: &'static str,
    current_tag: &'static str,
    pending_tag: &'static str,
) -> Node {
    group(
        label,
        tag,
        vec![
            leaf(
                "Current",
                current_tag,
                na(v.clone().map(|m| enabled(m.current))),
            ),
            leaf(
                "Pending",
                pending_tag,
                na(v.clone().map(|m| enabled(m.pending))),
            ),
        ],
    )
}

/// Frame-buffer memory (`FB Memory Usage`, a MIG device's `Shared FB Memory Usage`).
fn fb_memory(label: &str, memory: &Na<gpu_backend::MemoryInfo>) -> Node {
    group(
        label,
        "fb_memory_usage",
        vec![
            leaf("Total", "total", fb_mib(memory.clone().map(|m| m.total))),
            leaf(
                "Reserved",
                "reserved",
                fb_mib(
                    memory
                        .clone()
                        .and_then(|m| m.reserved.map_or(Na::NotAvailable, Na::Value)),
                ),
            ),
            leaf("Used", "used", fb_mib(memory.clone().map(|m| m.used))),
            leaf("Free", "free", fb_mib(memory.clone().map(|m| m.free))),
        ],
    )
}

/// BAR1 memory (`BAR1 Memory Usage`, a MIG device's `Shared BAR1 Memory`).
fn bar1_memory(label: &str, bar1: &Na<gpu_backend::Bar1MemoryInfo>) -> Node {
    group(
        label,
        "bar1_memory_usage",
        vec![
            leaf("Total", "total", mib(bar1.clone().map(|m| m.total))),
            leaf("Used", "used", mib(bar1.clone().map(|m| m.used))),
            leaf("Free", "free", mib(bar1.clone().map(|m| m.free))),
        ],
    )
}

/// A MIG device's lines, as `-q` lists them under its GPU.
fn mig_device(m: &DeviceSnapshot) -> Node {
    let index = match m.id {
        gpu_backend::DeviceId::Mig { index, .. } => index.to_string(),
        gpu_backend::DeviceId::Gpu(_) => "N/A".into(),
    };
    group(
        "MIG Device",
        "mig_device",
        vec![
            leaf("Index", "index", index),
            leaf(
                "GPU Instance ID",
                "gpu_instance_id",
                na(m.gpu_instance_id.clone().map(|v| v.to_string())),
            ),
            leaf(
                "Compute Instance ID",
                "compute_instance_id",
                na(m.compute_instance_id.clone().map(|v| v.to_string())),
            ),
            fb_memory("Shared FB Memory Usage", &m.memory),
            bar1_memory("Shared BAR1 Memory", &m.bar1_memory),
        ],
    )
}

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
    nodes.push(utilization(d));
    nodes.push(
        sessions("Encoder Stats", "encoder_stats", &d.details.encoder_stats)
            .in_section("ENCODER_STATS"),
    );
    nodes.push(sessions("FBC Stats", "fbc_stats", &d.details.fbc_stats).in_section("FBC_STATS"));
    nodes.push(group(
        "DRAM Encryption Mode",
        "dram_encryption_mode",
        vec![
            leaf(
                "Current",
                "current_dram_encryption",
                na(d.details
                    .dram_encryption_mode
                    .clone()
                    .map(|m| enabled(m.current))),
            ),
            leaf(
                "Pending",
                "pending_dram_encryption",
                na(d.details
                    .dram_encryption_mode
                    .clone()
                    .map(|m| enabled(m.pending))),
            ),
        ],
    ));
    nodes.extend(ecc(d));
    nodes.push(temperature(d));
    nodes.push(power(d));
    nodes.push(memory_power(d).in_section("POWER"));
    nodes.push(module_power(d).in_section("POWER"));
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
    nodes.extend(clocks(d));
    nodes.push(customer_boost(d).in_section("CLOCK"));
    nodes.push(clock_policy(d).in_section("CLOCK"));
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
    let driver_model = |pick: fn(
        &gpu_backend::CurrentPending<gpu_backend::DriverModel>,
    ) -> gpu_backend::DriverModel| {
        na(d.driver_model
            .clone()
            .map(|m| format!("{:?}", pick(&m)).to_uppercase()))
    };
    vec![
        leaf("Product Name", "product_name", na(d.name.clone())),
        leaf(
            "Product Brand",
            "product_brand",
            na(d.brand.clone().map(brand)),
        ),
        leaf(
            "Product Architecture",
            "product_architecture",
            na(d.architecture.clone().map(architecture)),
        ),
        leaf("Display Mode", "display_mode", display_mode),
        leaf(
            "Display Attached",
            "display_attached",
            na(d.display_mode.clone().map(yes_no)),
        ),
        leaf("Display Active", "display_active", mode(&d.display_active)),
        leaf(
            "Persistence Mode",
            "persistence_mode",
            mode(&d.persistence_mode),
        ),
        leaf(
            "Addressing Mode",
            "addressing_mode",
            na(d.details.addressing_mode.clone().map(|m| m.label())),
        ),
        current_pending(
            &d.mig_mode,
            "MIG Mode",
            "mig_mode",
            "current_mig",
            "pending_mig",
        ),
        Node {
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
        },
        leaf(
            "Accounting Mode",
            "accounting_mode",
            mode(&d.accounting_mode),
        )
        .in_section("ACCOUNTING"),
        leaf(
            "Accounting Mode Buffer Size",
            "accounting_mode_buffer_size",
            shown(&d.details.accounting_buffer_size),
        )
        .in_section("ACCOUNTING"),
        group(
            "Driver Model",
            "driver_model",
            vec![
                leaf("Current", "current_dm", driver_model(|m| m.current)),
                leaf("Pending", "pending_dm", driver_model(|m| m.pending)),
            ],
        ),
    ]
}

/// The board: serial, UUID, minor number, VBIOS, board ids, inforom, operation and
/// virtualization modes.
fn board(d: &DeviceSnapshot) -> Vec<Node> {
    vec![
        leaf("Serial Number", "serial", na(d.serial.clone())),
        leaf("GPU UUID", "uuid", na(d.uuid.clone())),
        leaf(
            "GPU PDI",
            "pdi",
            na(d.details.pdi.clone().map(|p| format!("{p:#x}"))),
        ),
        leaf(
            "Minor Number",
            "minor_number",
            with_unit(&d.minor_number, "").trim_end().to_string(),
        ),
        leaf(
            "VBIOS Version",
            "vbios_version",
            na(d.vbios_version.clone()),
        ),
        leaf(
            "MultiGPU Board",
            "multigpu_board",
            na(d.multi_gpu_board.clone().map(yes_no)),
        ),
        leaf(
            "Board ID",
            "board_id",
            na(d.board_id.clone().map(|b| format!("0x{b:x}"))),
        ),
        leaf(
            "Board Part Number",
            "board_part_number",
            na(d.board_part_number.clone()),
        ),
        platform(d),
        group(
            "Inforom Version",
            "inforom_version",
            vec![
                leaf(
                    "Image Version",
                    "img_version",
                    na(d.inforom_image_version.clone()),
                ),
                leaf(
                    "OEM Object",
                    "oem_object",
                    na(d.details.inforom_oem_version.clone()),
                ),
                leaf(
                    "ECC Object",
                    "ecc_object",
                    na(d.details.inforom_ecc_version.clone()),
                ),
                leaf(
                    "Power Management Object",
                    "pwr_object",
                    na(d.details.inforom_power_version.clone()),
                ),
            ],
        ),
        bbx_flush(d),
        group(
            "GPU Operation Mode",
            "gpu_operation_mode",
            vec![
                leaf(
                    "Current",
                    "current_gom",
                    na(d.gpu_operation_mode.clone().map(|m| gom(m.current))),
                ),
                leaf(
                    "Pending",
                    "pending_gom",
                    na(d.gpu_operation_mode.clone().map(|m| gom(m.pending))),
                ),
            ],
        ),
        leaf("GPU C2C Mode", "c2c_mode", mode(&d.details.c2c_mode)),
        group(
            "GPU Virtualization Mode",
            "gpu_virtualization_mode",
            vec![
                leaf(
                    "Virtualization Mode",
                    "virtualization_mode",
                    na(d.virtualization_mode.clone().map(virtualization)),
                ),
                leaf(
                    "Host VGPU Mode",
                    "host_vgpu_mode",
                    na(d.details.host_vgpu_mode.clone().map(|m| m.label())),
                ),
                leaf(
                    "vGPU Heterogeneous Mode",
                    "vgpu_heterogeneous_mode",
                    mode(&d.details.vgpu_heterogeneous_mode),
                ),
            ],
        ),
        leaf(
            "GPU Recovery Action",
            "gpu_recovery_action",
            na(d.details.gpu_recovery_action.clone().map(|a| a.label())),
        ),
        leaf(
            "GSP Firmware Version",
            "gsp_firmware_version",
            na(d.details.gsp_firmware_version.clone()),
        )
        .in_section("GSP_FIRMWARE_VERSION"),
    ]
}

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
    let number = |v: &Na<u32>, unit: &str| na(v.clone().map(|v| format!("{v}{unit}")));
    group(
        "PCI",
        "pci",
        vec![
            hex("Bus", "pci_bus", 2, |p| p.bus),
            hex("Device", "pci_device", 2, |p| p.device),
            hex("Domain", "pci_domain", 4, |p| p.domain),
            class(
                "Base Classcode",
                "pci_base_class",
                &d.details.pci_class,
                |c| c.base_class,
            ),
            class(
                "Sub Classcode",
                "pci_sub_class",
                &d.details.pci_class,
                |c| c.sub_class,
            ),
            hex("Device Id", "pci_device_id", 8, |p| p.pci_device_id),
            leaf("Bus Id", "pci_bus_id", na(d.pci.clone().map(|p| p.bus_id))),
            hex("Sub System Id", "pci_sub_system_id", 8, |p| {
                p.pci_subsystem_id
            }),
            group(
                "GPU Link Info",
                "pci_gpu_link_info",
                vec![
                    group(
                        "PCIe Generation",
                        "pcie_gen",
                        vec![
                            leaf(
                                "Max",
                                "max_link_gen",
                                number(&d.max_pcie_link_generation, ""),
                            ),
                            leaf(
                                "Current",
                                "current_link_gen",
                                number(&d.pcie_link_generation, ""),
                            ),
                            leaf(
                                "Device Current",
                                "device_current_link_gen",
                                number(&d.pcie_link_generation, ""),
                            ),
                            leaf(
                                "Device Max",
                                "max_device_link_gen",
                                number(&d.details.gpu_max_pcie_link_generation, ""),
                            ),
                        ],
                    ),
                    group(
                        "Link Width",
                        "link_widths",
                        vec![
                            leaf("Max", "max_link_width", number(&d.max_pcie_link_width, "x")),
                            leaf(
                                "Current",
                                "current_link_width",
                                number(&d.pcie_link_width, "x"),
                            ),
                        ],
                    ),
                ],
            ),
            bridge_chip(d),
            leaf(
                "Replays Since Reset",
                "replay_counter",
                number(&d.pcie_replay_counter, ""),
            ),
            leaf(
                "Replay Number Rollovers",
                "replay_rollover_counter",
                number(&d.details.pcie_replay_rollover_counter, ""),
            ),
            leaf(
                "Tx Throughput",
                "tx_util",
                with_unit(&d.pcie_tx_throughput, "KB/s"),
            ),
            leaf(
                "Rx Throughput",
                "rx_util",
                with_unit(&d.pcie_rx_throughput, "KB/s"),
            ),
            leaf(
                "Atomic Caps Outbound",
                "atomic_caps_outbound",
                na(d.details
                    .pcie_atomics_outbound
                    .clone()
                    .map(|c| format!("{c:#x}"))),
            ),
            leaf(
                "Atomic Caps Inbound",
                "atomic_caps_inbound",
                na(d.details
                    .pcie_atomics_inbound
                    .clone()
                    .map(|c| format!("{c:#x}"))),
            ),
        ],
    )
}

/// The fan, the performance state and the clock event reasons.
fn performance(d: &DeviceSnapshot) -> Vec<Node> {
    vec![
        leaf("Fan Speed", "fan_speed", with_unit(&d.fan_speed, "%")),
        leaf(
            "Performance State",
            "performance_state",
            na(d.performance_state.clone().and_then(|p| {
                gpu_backend::PerformanceState::known(p)
                    .map_or(Na::NotAvailable, |p| Na::Value(p.to_string()))
            })),
        )
        .in_section("PERFORMANCE"),
        group(
            "Clocks Event Reasons",
            "clocks_event_reasons",
            REASONS
                .iter()
                .map(|&(label, tag, bit)| {
                    let mut line = leaf(label, tag, reason(d, bit));
                    if bit == ClockEventReasons::HW_SLOWDOWN {
                        // The two kinds of hardware slowdown, under it (flat in the XML).
                        line.children = vec![
                            leaf(
                                "HW Thermal Slowdown",
                                "clocks_event_reason_hw_thermal_slowdown",
                                reason(d, ClockEventReasons::HW_THERMAL_SLOWDOWN),
                            ),
                            leaf(
                                "HW Power Brake Slowdown",
                                "clocks_event_reason_hw_power_brake_slowdown",
                                reason(d, ClockEventReasons::HW_POWER_BRAKE_SLOWDOWN),
                            ),
                        ];
                    }
                    line
                })
                .collect(),
        )
        .in_section("PERFORMANCE"),
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

/// GPU, memory, encoder and decoder utilization.
fn utilization(d: &DeviceSnapshot) -> Node {
    group(
        "Utilization",
        "utilization",
        vec![
            leaf(
                "GPU",
                "gpu_util",
                with_unit(&d.utilization.clone().map(|u| u.gpu), "%"),
            ),
            leaf(
                "Memory",
                "memory_util",
                with_unit(&d.utilization.clone().map(|u| u.memory), "%"),
            ),
            leaf(
                "Encoder",
                "encoder_util",
                with_unit(&d.encoder.clone().map(|c| c.utilization), "%"),
            ),
            leaf(
                "Decoder",
                "decoder_util",
                with_unit(&d.decoder.clone().map(|c| c.utilization), "%"),
            ),
            leaf(
                "JPEG",
                "jpeg_util",
                with_unit(
                    &d.details.jpeg_utilization.clone().map(|c| c.utilization),
                    "%",
                ),
            ),
            leaf(
                "OFA",
                "ofa_util",
                with_unit(
                    &d.details.ofa_utilization.clone().map(|c| c.utilization),
                    "%",
                ),
            ),
        ],
    )
    .in_section("UTILIZATION")
}

/// ECC: the mode, the error counts, retired pages and remapped rows.
fn ecc(d: &DeviceSnapshot) -> Vec<Node> {
    let rows = &d.remapped_rows;
    let inactive = &d.details.inactive_remapped_rows;
    vec![
        current_pending(
            &d.ecc_mode,
            "ECC Mode",
            "ecc_mode",
            "current_ecc",
            "pending_ecc",
        )
        .in_section("ECC"),
        ecc_errors(d).in_section("ECC"),
        group(
            "Retired Pages",
            "retired_pages",
            vec![
                leaf(
                    "Single Bit ECC",
                    "retired_count",
                    na(d.retired_pages_single_bit
                        .clone()
                        .map(|p| p.len().to_string())),
                )
                .wrapped("multiple_single_bit_retirement"),
                leaf(
                    "Double Bit ECC",
                    "retired_count",
                    na(d.retired_pages_double_bit
                        .clone()
                        .map(|p| p.len().to_string())),
                )
                .wrapped("double_bit_retirement"),
                leaf(
                    "Pending Page Blacklist",
                    "pending_blacklist",
                    na(d.retired_pages_pending.clone().map(yes_no)),
                ),
            ],
        )
        .in_section("PAGE_RETIREMENT"),
        group(
            "Remapped Rows",
            "remapped_rows",
            vec![
                leaf(
                    "Correctable Error",
                    "remapped_row_corr",
                    na(rows.clone().map(|r| r.correctable.to_string())),
                ),
                leaf(
                    "Inactive Correctable Error",
                    "remapped_row_corr_inactive",
                    na(inactive.clone().map(|r| r.correctable.to_string())),
                ),
                leaf(
                    "Uncorrectable Error",
                    "remapped_row_unc",
                    na(rows.clone().map(|r| r.uncorrectable.to_string())),
                ),
                leaf(
                    "Inactive Uncorrectable Error",
                    "remapped_row_unc_inactive",
                    na(inactive.clone().map(|r| r.uncorrectable.to_string())),
                ),
                leaf(
                    "Pending",
                    "remapped_row_pending",
                    na(rows.clone().map(|r| yes_no(r.pending))),
                ),
                leaf(
                    "Remapping Failure Occurred",
                    "remapped_row_failure",
                    na(rows.clone().map(|r| yes_no(r.failure))),
                ),
                histogram(d),
            ],
        )
        .in_section("ROW_REMAPPER"),
    ]
}

/// The GPU's and the memory's temperatures and thresholds: against T.Limit, as nvidia-smi 580
/// prints them, where NVML answers those; else the absolute thresholds older nvidia-smi printed
/// (a driver, or a recording, without the T.Limit answers).
fn temperature(d: &DeviceSnapshot) -> Node {
    let c = |label: &str, tag: &'static str, v: &Na<u32>| leaf(label, tag, with_unit(v, "C"));
    let t = |label: &str, tag: &'static str, v: &Na<i32>| leaf(label, tag, with_unit(v, "C"));
    let x = &d.details;
    let tlimit = [
        &x.tlimit_shutdown,
        &x.tlimit_slowdown,
        &x.tlimit_gpu_max,
        &x.tlimit_memory_max,
    ]
    .iter()
    .any(|v| v.value().is_some());
    let lines = if tlimit {
        vec![
            c("GPU Current Temp", "gpu_temp", &d.temperature),
            t("GPU T.Limit Temp", "gpu_temp_tlimit", &x.margin_temperature),
            t(
                "GPU Shutdown T.Limit Temp",
                "gpu_temp_max_tlimit_threshold",
                &x.tlimit_shutdown,
            ),
            t(
                "GPU Slowdown T.Limit Temp",
                "gpu_temp_slow_tlimit_threshold",
                &x.tlimit_slowdown,
            ),
            t(
                "GPU Max Operating T.Limit Temp",
                "gpu_temp_max_gpu_tlimit_threshold",
                &x.tlimit_gpu_max,
            ),
            c(
                "GPU Target Temperature",
                "gpu_target_temperature",
                &x.temperature_target,
            ),
            c("Memory Current Temp", "memory_temp", &d.memory_temperature),
            t(
                "Memory Max Operating T.Limit Temp",
                "gpu_temp_max_mem_tlimit_threshold",
                &x.tlimit_memory_max,
            ),
        ]
    } else {
        vec![
            c("GPU Current Temp", "gpu_temp", &d.temperature),
            c(
                "GPU Shutdown Temp",
                "gpu_temp_max_threshold",
                &d.temperature_shutdown,
            ),
            c(
                "GPU Slowdown Temp",
                "gpu_temp_slow_threshold",
                &d.temperature_slowdown,
            ),
            c(
                "GPU Max Operating Temp",
                "gpu_temp_max_gpu_threshold",
                &d.temperature_gpu_max,
            ),
            c("Memory Current Temp", "memory_temp", &d.memory_temperature),
            c(
                "Memory Max Operating Temp",
                "gpu_temp_max_mem_threshold",
                &d.temperature_memory_max,
            ),
        ]
    };
    group("Temperature", "temperature", lines).in_section("TEMPERATURE")
}

/// The power draw and limits.
fn power(d: &DeviceSnapshot) -> Node {
    let w = |v: &Na<u32>| na(v.clone().map(|mw| format!("{} W", watts(mw))));
    let limits = d.power_limit_constraints.clone();
    group(
        "GPU Power Readings",
        "gpu_power_readings",
        vec![
            leaf(
                "Average Power Draw",
                "average_power_draw",
                w(&d.power_usage),
            ),
            leaf(
                "Instantaneous Power Draw",
                "instant_power_draw",
                w(&d.details.power_instant_gpu),
            ),
            leaf(
                "Current Power Limit",
                "current_power_limit",
                w(&d.enforced_power_limit),
            ),
            leaf(
                "Requested Power Limit",
                "requested_power_limit",
                w(&d.power_limit),
            ),
            leaf(
                "Default Power Limit",
                "default_power_limit",
                w(&d.power_default_limit),
            ),
            leaf(
                "Min Power Limit",
                "min_power_limit",
                w(&limits.clone().map(|l| l.min_mw)),
            ),
            leaf(
                "Max Power Limit",
                "max_power_limit",
                w(&limits.map(|l| l.max_mw)),
            ),
        ],
    )
    .in_section("POWER")
}

/// The clocks now, the applications clocks (set and default) and the highest.
fn clocks(d: &DeviceSnapshot) -> Vec<Node> {
    let clocks = |label: &str, tag, c: &gpu_devices::snapshot::ClockInfos, sm_video: bool| {
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
        group(label, tag, v).in_section("CLOCK")
    };
    vec![
        clocks("Clocks", "clocks", &d.clocks, true),
        clocks(
            "Applications Clocks",
            "applications_clocks",
            &d.applications_clocks,
            false,
        ),
        clocks(
            "Default Applications Clocks",
            "default_applications_clocks",
            &d.default_applications_clocks,
            false,
        ),
        clocks("Max Clocks", "max_clocks", &d.max_clocks, true),
    ]
}

/// A number NVML answered, or N/A.
fn shown<T: ToString + Clone>(v: &Na<T>) -> String {
    na(v.clone().map(|v| v.to_string()))
}

/// Where the GPU sits in its platform.
fn platform(d: &DeviceSnapshot) -> Node {
    let p = &d.details.platform_info;
    let part = |label: &str, tag: &'static str, f: fn(&gpu_backend::PlatformInfo) -> String| {
        leaf(label, tag, na(p.clone().map(|p| f(&p))))
    };
    group(
        "Platform Info",
        "platformInfo",
        vec![
            part("Chassis Serial Number", "chassis_serial_number", |p| {
                p.chassis_serial_number.clone()
            }),
            part("Slot Number", "slot_number", |p| p.slot_number.to_string()),
            part("Tray Index", "tray_index", |p| p.tray_index.to_string()),
            part("Host ID", "host_id", |p| p.host_id.to_string()),
            part("Peer Type", "peer_type", |p| {
                gpu_backend::peer_type_label(p.peer_type)
            }),
            part("Module Id", "module_id", |p| p.module_id.to_string()),
            part("GPU Fabric GUID", "gpu_fabric_guid", |p| {
                format!("0x{}", p.ib_guid.get(..16).unwrap_or(&p.ib_guid))
            }),
        ],
    )
}

/// The inforom black box's last flush.
fn bbx_flush(d: &DeviceSnapshot) -> Node {
    let f = &d.details.bbx_flush;
    group(
        "Inforom BBX Object Flush",
        "inforom_bbx_flush",
        vec![
            leaf(
                "Latest Timestamp",
                "latest_timestamp",
                na(f.clone().map(|f| f.timestamp_us.to_string())),
            ),
            leaf(
                "Latest Duration",
                "latest_duration",
                na(f.clone().map(|f| format!("{} us", f.duration_us))),
            ),
        ],
    )
}

/// A PCI class code: `0x3` in the text, `3` in the XML.
fn class(
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
    let x = &d.details;
    let us = |label: &str, tag: &'static str, v: &Na<u64>| {
        leaf(
            label,
            tag,
            na(v.clone().map(|ns| format!("{} us", ns / 1000))),
        )
    };
    group(
        "Clocks Event Reasons Counters",
        "clocks_event_reasons_counters",
        vec![
            us(
                "SW Power Capping",
                "clocks_event_reasons_counters_sw_power_cap",
                &x.clock_event_time_sw_power_cap,
            ),
            us(
                "Sync Boost",
                "clocks_event_reasons_counters_sync_boost",
                &x.clock_event_time_sync_boost,
            ),
            us(
                "SW Thermal Slowdown",
                "clocks_event_reasons_counters_sw_therm_slowdown",
                &x.clock_event_time_sw_thermal_slowdown,
            ),
            us(
                "HW Thermal Slowdown",
                "clocks_event_reasons_counters_hw_therm_slowdown",
                &x.clock_event_time_hw_thermal_slowdown,
            ),
            us(
                "HW Power Braking",
                "clocks_event_reasons_counters_hw_power_brake",
                &x.clock_event_time_hw_power_brake,
            ),
        ],
    )
}

/// Confidential-computing protected memory.
fn protected_memory(d: &DeviceSnapshot) -> Node {
    let m = &d.details.protected_memory;
    group(
        "Conf Compute Protected Memory Usage",
        "cc_protected_memory_usage",
        vec![
            leaf("Total", "total", fb_mib(m.clone().map(|m| m.total))),
            leaf("Used", "used", fb_mib(m.clone().map(|m| m.used))),
            leaf("Free", "free", fb_mib(m.clone().map(|m| m.free))),
        ],
    )
}

/// Encoder or FBC sessions.
fn sessions(label: &str, tag: &'static str, v: &Na<gpu_backend::SessionStats>) -> Node {
    group(
        label,
        tag,
        vec![
            leaf(
                "Active Sessions",
                "session_count",
                shown(&v.clone().map(|s| s.sessions)),
            ),
            leaf(
                "Average FPS",
                "average_fps",
                shown(&v.clone().map(|s| s.average_fps)),
            ),
            leaf(
                "Average Latency",
                "average_latency",
                shown(&v.clone().map(|s| s.average_latency_us)),
            ),
        ],
    )
}

/// The ECC error counts, since the driver loaded (volatile) and over the board's life
/// (aggregate): SRAM corrected (by location) and uncorrected by kind (SRAM ECC detail), DRAM
/// (by location); where the SRAM's uncorrected errors were; repairs pending.
fn ecc_errors(d: &DeviceSnapshot) -> Node {
    let loc = &d.ecc_by_location;
    let sram = &d.details.sram_ecc_status;
    let count = |v: &Na<gpu_backend::LocationEccCounts>,
                 pick: fn(&gpu_backend::LocationEccCounts) -> Option<u64>| {
        na(v.clone()
            .and_then(|c| pick(&c).map_or(Na::NotAvailable, |n| Na::Value(n.to_string()))))
    };
    let detail =
        |pick: fn(&gpu_backend::SramEccStatus) -> u64| shown(&sram.clone().map(|s| pick(&s)));
    let volatile = group(
        "Volatile",
        "volatile",
        vec![
            leaf(
                "SRAM Correctable",
                "sram_correctable",
                count(&loc.sram, |c| c.volatile_corrected),
            ),
            leaf(
                "SRAM Uncorrectable Parity",
                "sram_uncorrectable_parity",
                detail(|s| s.volatile_uncorrectable_parity),
            ),
            leaf(
                "SRAM Uncorrectable SEC-DED",
                "sram_uncorrectable_secded",
                detail(|s| s.volatile_uncorrectable_sec_ded),
            ),
            leaf(
                "DRAM Correctable",
                "dram_correctable",
                count(&loc.device_memory, |c| c.volatile_corrected),
            ),
            leaf(
                "DRAM Uncorrectable",
                "dram_uncorrectable",
                count(&loc.device_memory, |c| c.volatile_uncorrected),
            ),
        ],
    );
    let aggregate = group(
        "Aggregate",
        "aggregate",
        vec![
            leaf(
                "SRAM Correctable",
                "sram_correctable",
                count(&loc.sram, |c| c.aggregate_corrected),
            ),
            leaf(
                "SRAM Uncorrectable Parity",
                "sram_uncorrectable_parity",
                detail(|s| s.aggregate_uncorrectable_parity),
            ),
            leaf(
                "SRAM Uncorrectable SEC-DED",
                "sram_uncorrectable_secded",
                detail(|s| s.aggregate_uncorrectable_sec_ded),
            ),
            leaf(
                "DRAM Correctable",
                "dram_correctable",
                count(&loc.device_memory, |c| c.aggregate_corrected),
            ),
            leaf(
                "DRAM Uncorrectable",
                "dram_uncorrectable",
                count(&loc.device_memory, |c| c.aggregate_uncorrected),
            ),
            leaf(
                "SRAM Threshold Exceeded",
                "sram_threshold_exceeded",
                na(sram.clone().map(|s| yes_no(s.threshold_exceeded))),
            ),
        ],
    );
    let sources = group(
        "Aggregate Uncorrectable SRAM Sources",
        "aggregate_uncorrectable_sram_sources",
        vec![
            leaf(
                "SRAM L2",
                "sram_l2",
                detail(|s| s.aggregate_uncorrectable_l2),
            ),
            leaf(
                "SRAM SM",
                "sram_sm",
                detail(|s| s.aggregate_uncorrectable_sm),
            ),
            leaf(
                "SRAM Microcontroller",
                "sram_microcontroller",
                detail(|s| s.aggregate_uncorrectable_mcu),
            ),
            leaf(
                "SRAM PCIE",
                "sram_pcie",
                detail(|s| s.aggregate_uncorrectable_pcie),
            ),
            leaf(
                "SRAM Other",
                "sram_other",
                detail(|s| s.aggregate_uncorrectable_other),
            ),
        ],
    );
    let repair = &d.details.repair_status;
    group(
        "ECC Errors",
        "ecc_errors",
        vec![
            volatile,
            aggregate,
            sources,
            leaf(
                "Channel Repair Pending",
                "channel_repair_pending",
                na(repair.clone().map(|r| yes_no(r.channel_repair_pending))),
            ),
            leaf(
                "TPC Repair Pending",
                "tpc_repair_pending",
                na(repair.clone().map(|r| yes_no(r.tpc_repair_pending))),
            ),
        ],
    )
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

/// The GPU memory's power.
fn memory_power(d: &DeviceSnapshot) -> Node {
    let w = |v: &Na<u32>| na(v.clone().map(|mw| format!("{} W", watts(mw))));
    group(
        // nvidia-smi 580 writes this heading with a space at its end.
        "GPU Memory Power Readings ",
        "gpu_memory_power_readings",
        vec![
            leaf(
                "Average Power Draw",
                "average_power_draw",
                w(&d.details.power_average_memory),
            ),
            leaf(
                "Instantaneous Power Draw",
                "instant_power_draw",
                w(&d.details.power_instant_memory),
            ),
        ],
    )
}

/// The module's power (GPU and CPU of a Grace Hopper or Blackwell module).
fn module_power(d: &DeviceSnapshot) -> Node {
    let w = |v: &Na<u32>| na(v.clone().map(|mw| format!("{} W", watts(mw))));
    let limits = &d.details.module_power_limits;
    let limit = |pick: fn(&gpu_backend::ScopedPowerLimits) -> Option<u32>| {
        w(&limits
            .clone()
            .and_then(|l| pick(&l).map_or(Na::NotAvailable, Na::Value)))
    };
    group(
        "Module Power Readings",
        "module_power_readings",
        vec![
            leaf(
                "Average Power Draw",
                "average_power_draw",
                w(&d.details.power_average_module),
            ),
            leaf(
                "Instantaneous Power Draw",
                "instant_power_draw",
                w(&d.details.power_instant_module),
            ),
            leaf(
                "Current Power Limit",
                "current_power_limit",
                limit(|l| l.current),
            ),
            leaf(
                "Requested Power Limit",
                "requested_power_limit",
                limit(|l| l.requested),
            ),
            leaf(
                "Default Power Limit",
                "default_power_limit",
                limit(|l| l.default),
            ),
            leaf("Min Power Limit", "min_power_limit", limit(|l| l.min)),
            leaf("Max Power Limit", "max_power_limit", limit(|l| l.max)),
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
fn clock_policy(d: &DeviceSnapshot) -> Node {
    let on = |v: bool| if v { "On" } else { "Off" }.to_string();
    let a = &d.details.auto_boosted_clocks;
    group(
        "Clock Policy",
        "clock_policy",
        vec![
            leaf(
                "Auto Boost",
                "auto_boost",
                na(a.clone().map(|a| on(a.current))),
            ),
            leaf(
                "Auto Boost Default",
                "auto_boost_default",
                na(a.clone().map(|a| on(a.default))),
            ),
        ],
    )
}

/// The NVLink fabric: registration and health, N/A without one (as nvidia-smi prints it).
fn fabric(d: &DeviceSnapshot) -> Node {
    use crate::present::query as q;
    let f = &d.details.fabric_info;
    let part =
        |label: &str, tag: &'static str, p: fn(&gpu_backend::FabricInfo) -> Option<String>| {
            leaf(label, tag, na(q::fabric_part(f, p)))
        };
    let health = |label: &str, tag: &'static str, h: gpu_backend::FabricHealthPart| {
        leaf(label, tag, na(q::fabric_health(f, h)))
    };
    use gpu_backend::FabricHealthPart as H;
    group(
        "Fabric",
        "fabric",
        vec![
            part("State", "state", q::fabric_state),
            part("Status", "status", q::fabric_status),
            part("CliqueId", "cliqueId", |f| Some(f.clique_id.to_string())),
            part("ClusterUUID", "clusterUuid", |f| {
                Some(f.cluster_uuid.clone())
            }),
            group(
                "Health",
                "health",
                vec![
                    part("Summary", "summary", |f| {
                        q::health_summary(f.health_summary)
                    }),
                    health("Bandwidth", "bandwidth", H::DegradedBandwidth),
                    health(
                        "Route Recovery in progress",
                        "route_recovery_in_progress",
                        H::RouteRecovery,
                    ),
                    health("Route Unhealthy", "route_unhealthy", H::RouteUnhealthy),
                    health(
                        "Access Timeout Recovery",
                        "access_timeout_recovery",
                        H::AccessTimeoutRecovery,
                    ),
                    part(
                        "Incorrect Configuration",
                        "incorrect_configuration",
                        q::incorrect_configuration,
                    ),
                    health(
                        "Partition Assigned",
                        "partition_assigned",
                        H::PartitionAssigned,
                    ),
                ],
            ),
        ],
    )
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
