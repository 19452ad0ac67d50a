//! The multi-section text view of a device, as igpu prints one: identity, GPU MEMORY,
//! GPU UTILIZATION (with bars), PCI INFO, GPU CLOCK, POWER INFO, PROCESSES.
//!
//! Text that comes from the backend (names, serials, UUIDs, versions, bus ids) is shown with
//! its control characters escaped ([`crate::text::escape_control`]), so the view is safe to
//! print on a terminal whatever the driver or a fixture says.

use std::fmt::{self, Display, Formatter};

use gpu_backend::ComputeMode;

use crate::na::{Na, NA_TEXT};
use crate::snapshot::DeviceSnapshot;
use crate::text::escape_control;
use crate::units::MIB;

/// One section of the view; [`DeviceSnapshot::section`] shows one alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// Index, name, serial, UUID, BIOS version.
    Identity,
    /// Total, used and free memory with percents.
    Memory,
    /// P-state, temperature, and bars for GPU, memory and fan.
    Utilization,
    /// Bus, bus id, device ids, link generation and width.
    Pci,
    /// Current and maximum clocks.
    Clocks,
    /// Power management, draw and limits.
    Power,
    /// The processes table.
    Processes,
}

impl Section {
    /// Every section, in the order the full view shows them.
    pub const ALL: [Section; 7] = [
        Section::Identity,
        Section::Memory,
        Section::Utilization,
        Section::Pci,
        Section::Clocks,
        Section::Power,
        Section::Processes,
    ];
}

/// Width of a utilization bar, in characters between the brackets.
const BAR_WIDTH: usize = 25;

/// `[|||||||||||              ] 44.00%` for 44%, as igpu prints it: one bar per whole 4%
/// (`int(x / 4)`, so 35% is 8 bars), one space, two decimals; N/A for a missing value.
pub fn utilization_bar(percent: Option<f64>) -> String {
    match percent {
        Some(p) => {
            let filled = ((p.clamp(0.0, 100.0) / 4.0).floor() as usize).min(BAR_WIDTH);
            format!(
                "[{}{}] {p:.2}%",
                "|".repeat(filled),
                " ".repeat(BAR_WIDTH - filled)
            )
        }
        None => format!("[{}] {NA_TEXT}", " ".repeat(BAR_WIDTH)),
    }
}

/// The name nvidia-smi gives a compute mode.
pub fn compute_mode_name(mode: ComputeMode) -> &'static str {
    match mode {
        ComputeMode::Default => "Default",
        ComputeMode::ExclusiveThread => "Exclusive Thread",
        ComputeMode::Prohibited => "Prohibited",
        ComputeMode::ExclusiveProcess => "Exclusive Process",
    }
}

/// `Enabled` / `Disabled` / `N/A`, as nvitop shows on/off settings.
pub fn enabled_text(v: &Na<bool>) -> &'static str {
    match v {
        Na::Value(true) => "Enabled",
        Na::Value(false) => "Disabled",
        _ => NA_TEXT,
    }
}

/// Outside text as the view shows it: N/A, or the value with control characters escaped.
fn outside(v: &Na<String>) -> String {
    escape_control(&v.to_string()).into_owned()
}

fn mib(bytes: u64) -> String {
    format!("{:10.2} MiB", bytes as f64 / MIB as f64)
}

fn watts(mw: &Na<u32>) -> String {
    match mw {
        Na::Value(v) => format!("{:.2} W", f64::from(*v) / 1000.0),
        _ => NA_TEXT.to_string(),
    }
}

impl DeviceSnapshot {
    /// One section of the multi-section view.
    pub fn section(&self, section: Section) -> impl Display + '_ {
        SectionView {
            snapshot: self,
            section,
        }
    }

    fn write_section(&self, f: &mut Formatter<'_>, section: Section) -> fmt::Result {
        match section {
            Section::Identity => self.write_identity(f),
            Section::Memory => self.write_memory(f),
            Section::Utilization => self.write_utilization(f),
            Section::Pci => self.write_pci(f),
            Section::Clocks => self.write_clocks(f),
            Section::Power => self.write_power(f),
            Section::Processes => self.write_processes(f),
        }
    }

    /// INDEX, CUDA INDEX, BOARD NAME, SERIAL, UUID and BIOS VERSION.
    fn write_identity(&self, f: &mut Formatter<'_>) -> fmt::Result {
        writeln!(f, "INDEX        : {}", self.id)?;
        if let Some(c) = self.cuda_index {
            writeln!(f, "CUDA INDEX   : {c}")?;
        }
        writeln!(f, "BOARD NAME   : {}", outside(&self.name))?;
        writeln!(f, "SERIAL       : {}", outside(&self.serial))?;
        writeln!(f, "UUID         : {}", outside(&self.uuid))?;
        writeln!(f, "BIOS VERSION : {}", outside(&self.vbios_version))
    }

    /// GPU MEMORY: total, used, free and reserved, with their share of the total.
    fn write_memory(&self, f: &mut Formatter<'_>) -> fmt::Result {
        writeln!(f, "GPU MEMORY:")?;
        match self.memory.value() {
            Some(m) if m.total > 0 => {
                let pct = |v: u64| 100.0 * v as f64 / m.total as f64;
                writeln!(f, "    Total : {} ({:6.2}%)", mib(m.total), 100.0)?;
                writeln!(f, "    Used  : {} ({:6.2}%)", mib(m.used), pct(m.used))?;
                writeln!(f, "    Free  : {} ({:6.2}%)", mib(m.free), pct(m.free))?;
                match m.reserved {
                    Some(r) => writeln!(f, "    Reserved : {} ({:6.2}%)", mib(r), pct(r)),
                    None => writeln!(f, "    Reserved : {NA_TEXT}"),
                }
            }
            _ => {
                writeln!(f, "    Total : {NA_TEXT}")?;
                writeln!(f, "    Used  : {NA_TEXT}")?;
                writeln!(f, "    Free  : {NA_TEXT}")?;
                writeln!(f, "    Reserved : {NA_TEXT}")
            }
        }
    }

    /// GPU UTILIZATION: P-state, temperature, and bars for graphics, memory bandwidth and fan.
    fn write_utilization(&self, f: &mut Formatter<'_>) -> fmt::Result {
        writeln!(f, "GPU UTILIZATION:")?;
        let pstate = self.performance_state.clone().and_then(|p| {
            gpu_backend::PerformanceState::known(p).map_or(Na::NotAvailable, Na::Value)
        });
        writeln!(f, "    Performance : {pstate}")?;
        writeln!(
            f,
            "    Temperature : {}",
            self.temperature.clone().map(|t| format!("{t}C"))
        )?;
        let bar = |v: Na<u32>| utilization_bar(v.into_option().map(f64::from));
        writeln!(f, "    Graphics    : {}", bar(self.gpu_utilization()))?;
        // Memory bandwidth (time memory was read or written), not memory used, which
        // the MEMORY section shows: named apart (issue 25).
        writeln!(f, "    Memory BW   : {}", bar(self.memory_utilization()))?;
        writeln!(f, "    Fan         : {}", bar(self.fan_speed.clone()))
    }

    /// PCI INFO: bus, bus id, device, ids, generation and link width.
    fn write_pci(&self, f: &mut Formatter<'_>) -> fmt::Result {
        writeln!(f, "PCI INFO:")?;
        let p = self.pci.value();
        let hex2 = |v: u32| format!("{v:02X}");
        let hex8 = |v: u32| format!("{v:08X}");
        let or_na = |v: Option<String>| v.unwrap_or_else(|| NA_TEXT.to_string());
        writeln!(f, "    Bus           : {}", or_na(p.map(|p| hex2(p.bus))))?;
        writeln!(
            f,
            "    Bus ID        : {}",
            or_na(p.map(|p| escape_control(&p.bus_id).into_owned()))
        )?;
        writeln!(
            f,
            "    Device        : {}",
            or_na(p.map(|p| hex2(p.device)))
        )?;
        writeln!(
            f,
            "    Device ID     : {}",
            or_na(p.map(|p| hex8(p.pci_device_id)))
        )?;
        writeln!(
            f,
            "    Sub-System ID : {}",
            or_na(p.map(|p| hex8(p.pci_subsystem_id)))
        )?;
        writeln!(
            f,
            "    Generation    : {} (Max: {})",
            self.pcie_link_generation, self.max_pcie_link_generation
        )?;
        let x = |v: &Na<u32>| v.clone().map(|w| format!("{w}x"));
        writeln!(
            f,
            "    Link Width    : {} (Max: {})",
            x(&self.pcie_link_width),
            x(&self.max_pcie_link_width)
        )
    }

    /// GPU CLOCK: each domain's clock and its maximum.
    fn write_clocks(&self, f: &mut Formatter<'_>) -> fmt::Result {
        writeln!(f, "GPU CLOCK:")?;
        // igpu's form: `1911.0 MHz (Max: 1911.0)`, the unit written once.
        let now = |v: &Na<u32>| v.clone().map(|c| format!("{c}.0 MHz"));
        let max = |v: &Na<u32>| v.clone().map(|c| format!("{c}.0"));
        let (c, m) = (&self.clocks, &self.max_clocks);
        for (domain, clock, max_clock) in [
            ("Graphics", &c.graphics, &m.graphics),
            ("SM", &c.sm, &m.sm),
            ("Memory", &c.memory, &m.memory),
            ("Video", &c.video, &m.video),
        ] {
            writeln!(
                f,
                "    {domain:<8} : {} (Max: {})",
                now(clock),
                max(max_clock)
            )?;
        }
        Ok(())
    }

    /// POWER INFO: management, draw and the limits.
    fn write_power(&self, f: &mut Formatter<'_>) -> fmt::Result {
        writeln!(f, "POWER INFO:")?;
        // igpu's two words: "Supported" when power management is on, else "N/A".
        let management = match &self.power_management_mode {
            Na::Value(true) => "Supported",
            _ => NA_TEXT,
        };
        let limits = self.power_limit_constraints.value();
        writeln!(f, "    Management : {management}")?;
        writeln!(f, "    Draw       : {}", watts(&self.power_usage))?;
        writeln!(f, "    Limit      : {}", watts(&self.power_limit))?;
        writeln!(f, "    Default    : {}", watts(&self.power_default_limit))?;
        writeln!(
            f,
            "    Min Limit  : {}",
            watts(&limits.map(|l| l.min_mw).into())
        )?;
        writeln!(
            f,
            "    Max Limit  : {}",
            watts(&limits.map(|l| l.max_mw).into())
        )
    }

    /// PROCESSES: the processes on the device, or why a list could not be read.
    fn write_processes(&self, f: &mut Formatter<'_>) -> fmt::Result {
        writeln!(f, "PROCESSES:")?;
        // A list that could not be read is said so, never shown as no processes.
        let (read, failed) = self.process_list_outcome();
        match self.processes() {
            Na::Value(list) if read && list.is_empty() && failed.is_empty() => {
                writeln!(f, "    No running processes")?;
            }
            Na::Value(list) if read => {
                writeln!(
                    f,
                    "    {:<8} | {:<4} | {:>10} | {:>3} | {:>3}",
                    "PID", "TYPE", "GPU MEM", "GI", "CI"
                )?;
                for p in list {
                    let mem = match p.used_gpu_memory {
                        Na::Value(b) => crate::units::bytes2human(b),
                        _ => NA_TEXT.to_string(),
                    };
                    writeln!(
                        f,
                        "    {:<8} | {:<4} | {:>10} | {:>3} | {:>3}",
                        p.pid,
                        p.kind.as_str(),
                        mem,
                        p.gpu_instance_id,
                        p.compute_instance_id
                    )?;
                }
            }
            _ => {}
        }
        for e in &failed {
            let list = e.field.strip_suffix("_processes").unwrap_or(&e.field);
            writeln!(
                f,
                "    {list} processes: {NA_TEXT} ({})",
                crate::text::Escaped(&e.error.to_string())
            )?;
        }
        Ok(())
    }
}

struct SectionView<'a> {
    snapshot: &'a DeviceSnapshot,
    section: Section,
}

impl Display for SectionView<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        self.snapshot.write_section(f, self.section)
    }
}

/// The full multi-section view, sections separated by a blank line.
impl Display for DeviceSnapshot {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        for (i, s) in Section::ALL.into_iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            self.write_section(f, s)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// igpu's README prints these three lines for 44%, 35% and 36%.
    #[test]
    fn bars_are_igpus() {
        assert_eq!(
            utilization_bar(Some(44.0)),
            "[|||||||||||              ] 44.00%"
        );
        assert_eq!(
            utilization_bar(Some(35.0)),
            "[||||||||                 ] 35.00%"
        );
        assert_eq!(
            utilization_bar(Some(36.0)),
            "[|||||||||                ] 36.00%"
        );
        assert_eq!(
            utilization_bar(Some(100.0)),
            format!("[{}] 100.00%", "|".repeat(25))
        );
        assert_eq!(utilization_bar(None), format!("[{}] N/A", " ".repeat(25)));
    }

    /// Regression: the igpu-style view printed a state NVML cannot tell (32) as `Unknown`
    /// where every other view prints N/A; one rule now (`PerformanceState::known`).
    #[test]
    fn a_performance_state_nvml_cannot_tell_is_na() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/h100-sxm-8gpu.json"
        );
        let mut d = crate::Context::from_fixture(path)
            .unwrap()
            .device(0)
            .unwrap()
            .snapshot();
        let performance = |d: &DeviceSnapshot| {
            d.section(Section::Utilization)
                .to_string()
                .lines()
                .find(|l| l.contains("Performance"))
                .map(str::to_string)
        };
        assert_eq!(performance(&d).as_deref(), Some("    Performance : P0"));
        for code in [32, 16, u32::MAX] {
            d.performance_state = Na::Value(code);
            assert_eq!(performance(&d).as_deref(), Some("    Performance : N/A"));
        }
    }

    /// Regression: bars were rounded (35% drew 9 bars where igpu draws `int(35 / 4)` = 8), and
    /// the percentage was padded to six characters (`]  44.00%`). Any value gives igpu's bar.
    #[test]
    fn bars_truncate_to_whole_four_percents() {
        for tenths in 0..=1000u32 {
            let p = f64::from(tenths) / 10.0;
            let bar = utilization_bar(Some(p));
            let filled = bar.chars().filter(|&c| c == '|').count();
            assert_eq!(filled, (p / 4.0) as usize, "{p}: {bar}");
            assert!(bar.ends_with(&format!("] {p:.2}%")), "{bar}");
        }
    }
}
