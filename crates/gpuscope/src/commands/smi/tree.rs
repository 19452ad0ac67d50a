//! `gpuscope smi -q`: each GPU's answers as nvidia-smi's `-q` lays them out, one tree that is
//! written as nvidia-smi's text (`Label   : value`, four spaces a level) or its XML (`-x`).
//!
//! Only what gpuscope asks the GPU is in the tree: a line nvidia-smi prints from a query
//! gpuscope does not make (GPU PDI, platform info, fabric, ...) is left out rather than shown as
//! N/A; a value the GPU or driver cannot give is `N/A`, as nvidia-smi writes it.

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

fn mib(v: Na<u64>) -> String {
    na(v.map(|b| format!("{} MiB", crate::present::query::to_mib(b))))
}

/// Frame-buffer memory: a part of a MiB is a whole one, as nvidia-smi prints it
/// ([`crate::present::query::to_mib_up`]).
fn fb_mib(v: Na<u64>) -> String {
    na(v.map(|b| format!("{} MiB", crate::present::query::to_mib_up(b))))
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
) -> Vec<Node> {
    let mut nodes = product(d, migs);
    nodes.extend(board(d));
    nodes.push(pci(d));
    nodes.extend(performance(d));
    nodes.extend(memory(d));
    nodes.push(utilization(d));
    nodes.extend(ecc(d));
    nodes.push(temperature(d));
    nodes.push(power(d));
    nodes.extend(clocks(d));
    nodes.push(self::processes(processes));
    nodes
}

/// The product and its modes: name, brand, architecture, display, persistence, MIG (and the
/// MIG devices), accounting, driver model.
fn product(d: &DeviceSnapshot, migs: &[&DeviceSnapshot]) -> Vec<Node> {
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
        group(
            "Inforom Version",
            "inforom_version",
            vec![leaf(
                "Image Version",
                "img_version",
                na(d.inforom_image_version.clone()),
            )],
        ),
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
        group(
            "GPU Virtualization Mode",
            "gpu_virtualization_mode",
            vec![leaf(
                "Virtualization Mode",
                "virtualization_mode",
                na(d.virtualization_mode.clone().map(virtualization)),
            )],
        ),
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
            leaf(
                "Replays Since Reset",
                "replay_counter",
                number(&d.pcie_replay_counter, ""),
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
    ]
}

/// Frame-buffer and BAR1 memory, and the compute mode.
fn memory(d: &DeviceSnapshot) -> Vec<Node> {
    vec![
        fb_memory("FB Memory Usage", &d.memory).in_section("MEMORY"),
        bar1_memory("BAR1 Memory Usage", &d.bar1_memory).in_section("MEMORY"),
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
        ],
    )
    .in_section("UTILIZATION")
}

/// ECC: the mode, the error counts, retired pages and remapped rows.
fn ecc(d: &DeviceSnapshot) -> Vec<Node> {
    let loc = &d.ecc_by_location;
    let count = |v: &Na<gpu_backend::LocationEccCounts>,
                 pick: fn(&gpu_backend::LocationEccCounts) -> Option<u64>| {
        na(v.clone()
            .and_then(|c| pick(&c).map_or(Na::NotAvailable, |n| Na::Value(n.to_string()))))
    };
    type Pick = fn(&gpu_backend::LocationEccCounts) -> Option<u64>;
    // Since the driver loaded (volatile) or over the board's life (aggregate).
    let counts = |label: &str, tag: &'static str, corrected: Pick, uncorrected: Pick| {
        group(
            label,
            tag,
            vec![
                leaf(
                    "SRAM Correctable",
                    "sram_correctable",
                    count(&loc.sram, corrected),
                ),
                leaf(
                    "DRAM Correctable",
                    "dram_correctable",
                    count(&loc.device_memory, corrected),
                ),
                leaf(
                    "DRAM Uncorrectable",
                    "dram_uncorrectable",
                    count(&loc.device_memory, uncorrected),
                ),
            ],
        )
    };
    let rows = &d.remapped_rows;
    vec![
        current_pending(
            &d.ecc_mode,
            "ECC Mode",
            "ecc_mode",
            "current_ecc",
            "pending_ecc",
        )
        .in_section("ECC"),
        group(
            "ECC Errors",
            "ecc_errors",
            vec![
                counts(
                    "Volatile",
                    "volatile",
                    |c| c.volatile_corrected,
                    |c| c.volatile_uncorrected,
                ),
                counts(
                    "Aggregate",
                    "aggregate",
                    |c| c.aggregate_corrected,
                    |c| c.aggregate_uncorrected,
                ),
            ],
        )
        .in_section("ECC"),
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
                    "Uncorrectable Error",
                    "remapped_row_unc",
                    na(rows.clone().map(|r| r.uncorrectable.to_string())),
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
            ],
        )
        .in_section("ROW_REMAPPER"),
    ]
}

/// The GPU's and the memory's temperatures and thresholds.
fn temperature(d: &DeviceSnapshot) -> Node {
    let c = |label: &str, tag: &'static str, v: &Na<u32>| leaf(label, tag, with_unit(v, "C"));
    group(
        "Temperature",
        "temperature",
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
        ],
    )
    .in_section("TEMPERATURE")
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
                            format!("{} MiB", crate::present::query::to_mib(b))
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
