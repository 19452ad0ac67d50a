//! `gpuscope smi` with no option: nvidia-smi's summary table, cell for cell as nvidia-smi 590
//! draws it (91 columns; a GPU's three lines in cells of 41, 24 and 22; the processes beneath).
//! The widths were measured on real tables (docs/smi.md). MIG devices get nvidia-smi's MIG
//! devices table between the GPUs and the processes (its layout as nvidia-smi 580 and 590 draw
//! it, not checked byte for byte against a capture).

use std::fmt::Write as _;

use gpu_backend::ComputeMode;
use gpu_devices::text::escape_control;
use gpu_devices::{DeviceSnapshot, Na};

use crate::present::value::{fb_mib, nearest_mib};

const RULE: &str =
    "+-----------------------------------------------------------------------------------------+";
const CELLS: &str =
    "+-----------------------------------------+------------------------+----------------------+";

/// One process line of the table: the process as `-q` lists it, and its GPU's index.
pub struct ProcessRow {
    /// The GPU's index.
    pub gpu: u32,
    /// The process.
    pub process: super::tree::ProcessLine,
}

fn na<T: ToString + Clone>(v: &Na<T>) -> String {
    v.value()
        .map_or_else(|| "N/A".to_string(), |v| v.to_string())
}

/// `text` cut to `width` characters as nvidia-smi cuts a name: its start and ` ...`.
fn cut_end(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let keep: String = text.chars().take(width.saturating_sub(4)).collect();
    format!("{} ...", keep.trim_end())
}

/// `text` cut to `width` characters as nvidia-smi cuts a process name: `...` and its end.
fn cut_start(text: &str, width: usize) -> String {
    let n = text.chars().count();
    if n <= width {
        return text.to_string();
    }
    let tail: String = text.chars().skip(n - (width - 3)).collect();
    format!("...{tail}")
}

/// nvidia-smi's short name of a compute mode in the table.
fn compute_mode(m: ComputeMode) -> &'static str {
    match m {
        ComputeMode::Default => "Default",
        ComputeMode::ExclusiveThread => "E. Thread",
        ComputeMode::Prohibited => "Prohibited",
        ComputeMode::ExclusiveProcess => "E. Process",
    }
}

/// The three lines of one GPU.
fn gpu(out: &mut String, d: &DeviceSnapshot) {
    // The mode column: the driver model on Windows, else persistence.
    let mode = match d.driver_model.value() {
        Some(m) => match m.current {
            gpu_backend::DriverModel::Wddm => "WDDM",
            gpu_backend::DriverModel::Wdm => "TCC",
            gpu_backend::DriverModel::Mcdm => "MCDM",
        },
        None => match d.persistence_mode.value() {
            Some(true) => "On",
            Some(false) => "Off",
            None => "N/A",
        },
    };
    let name_width = 33 - 2 - mode.len();
    let name = cut_end(&escape_control(&na(&d.name)), name_width);
    let bus =
        escape_control(&d.pci.value().map_or("N/A".into(), |p| p.bus_id.clone())).into_owned();
    let disp = match d.display_active.value() {
        Some(true) => "On",
        Some(false) => "Off",
        None => "N/A",
    };
    let ecc = match d.ecc_mode.value() {
        Some(m) if m.current => na(&d.ecc_errors.volatile_uncorrected),
        _ => "N/A".into(),
    };
    let _ = writeln!(
        out,
        "|{:>4}  {name:<name_width$}{mode:>w$}  |{bus:>19} {disp:>3} |{ecc:>21} |",
        d.id.physical_index(),
        w = 33 - name_width
    );
    let fan = d
        .fan_speed
        .value()
        .map_or("N/A".into(), |f| format!("{f}%"));
    let temp = d
        .temperature
        .value()
        .map_or("N/A".into(), |t| format!("{t}C"));
    let perf = d
        .performance_state
        .value()
        .and_then(|&p| gpu_backend::PerformanceState::known(p))
        .map_or("N/A".into(), |p| p.to_string());
    // Rounded to the nearest watt (in u64: a driver's or fixture's u32::MAX does not overflow).
    let watts = |v: &Na<u32>| {
        v.value().map_or("N/A".into(), |&mw| {
            format!("{}W", (u64::from(mw) + 500) / 1000)
        })
    };
    let usage = watts(&d.power_usage);
    let cap = watts(&d.enforced_power_limit);
    let memory = d.memory.value();
    let used = memory.map_or("N/A".into(), |m| format!("{}MiB", fb_mib(m.used)));
    let total = memory.map_or("N/A".into(), |m| format!("{}MiB", fb_mib(m.total)));
    let util = d
        .utilization
        .value()
        .map_or("N/A".into(), |u| format!("{}%", u.gpu));
    let compute = d.compute_mode.value().map_or("N/A", |&m| compute_mode(m));
    let _ = writeln!(
        out,
        "|{fan:>4}{temp:>6}{perf:>6}{usage:>16} / {cap:>5} |{used:>11} / {total:>9} |{util:>8}{compute:>13} |"
    );
    let mig = match d.mig_mode.value() {
        Some(m) if m.current => "Enabled",
        Some(_) => "Disabled",
        None => "N/A",
    };
    let _ = writeln!(out, "|{:41}|{:24}|{mig:>21} |", "", "");
    out.push_str(CELLS);
    out.push('\n');
}

const MIG_CELLS: &str =
    "+------------------+----------------------------------+-----------+-----------------------+";

/// The MIG devices table: a MIG device's two lines (GPU, GPU and compute instance, its index;
/// memory and BAR1 used of its share; SMs and volatile uncorrected ECC errors; the engines it
/// shares), nothing when `migs` is empty.
fn mig_devices(out: &mut String, migs: &[&DeviceSnapshot]) {
    if migs.is_empty() {
        return;
    }
    out.push('\n');
    out.push_str(RULE);
    out.push('\n');
    out.push_str("| MIG devices:                                                                            |\n");
    out.push_str(MIG_CELLS);
    out.push('\n');
    out.push_str("| GPU  GI  CI  MIG |                     Memory-Usage |        Vol|        Shared         |\n");
    out.push_str("|      ID  ID  Dev |                       BAR1-Usage | SM     Unc| CE ENC  DEC  OFA  JPG |\n");
    out.push_str("|                  |                                  |        ECC|                       |\n");
    out.push_str("|==================+==================================+===========+=======================|\n");
    for m in migs {
        let (gpu, index) = match m.id {
            gpu_backend::DeviceId::Mig { parent, index } => (parent.to_string(), index.to_string()),
            gpu_backend::DeviceId::Gpu(i) => (i.to_string(), "N/A".into()),
        };
        let used_total = |used: Option<u64>, total: Option<u64>, mib: fn(u64) -> u64| {
            let cell = |v: Option<u64>| v.map_or("N/A".to_string(), |b| format!("{}MiB", mib(b)));
            format!("{} / {}", cell(used), cell(total))
        };
        let memory = m.memory.value();
        let memory = used_total(memory.map(|m| m.used), memory.map(|m| m.total), fb_mib);
        let bar1 = m.bar1_memory.value();
        let bar1 = used_total(bar1.map(|b| b.used), bar1.map(|b| b.total), nearest_mib);
        let attributes = m.details.device_attributes.value();
        let count = |f: fn(&gpu_backend::DeviceAttributes) -> u32| {
            attributes.map_or("N/A".to_string(), |a| f(a).to_string())
        };
        let _ = writeln!(
            out,
            "|{gpu:>3}{:>5}{:>4}{index:>4}  |{memory:>30}    |{:>3}{:>7} |{:>3}{:>4}{:>5}{:>5}{:>5} |",
            na(&m.gpu_instance_id),
            na(&m.compute_instance_id),
            count(|a| a.multiprocessor_count),
            na(&m.ecc_errors.volatile_uncorrected),
            count(|a| a.shared_copy_engine_count),
            count(|a| a.shared_encoder_count),
            count(|a| a.shared_decoder_count),
            count(|a| a.shared_ofa_count),
            count(|a| a.shared_jpeg_count),
        );
        let _ = writeln!(
            out,
            "|                  |{bar1:>32}  |           |                       |"
        );
        out.push_str(MIG_CELLS);
        out.push('\n');
    }
}

/// The table: `when` (nvidia-smi's ctime), the versions, every GPU of `gpus`, the MIG devices
/// of `migs` (their table only when there are some), then `processes` (`None`: they could not
/// be read).
pub fn render(
    when: &str,
    driver: &str,
    cuda: &str,
    gpus: &[&DeviceSnapshot],
    migs: &[&DeviceSnapshot],
    processes: Option<&[ProcessRow]>,
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{when}       ");
    out += RULE;
    out.push('\n');
    let driver = escape_control(driver);
    let cuda = escape_control(cuda);
    let _ = writeln!(
        out,
        "| NVIDIA-SMI {driver:<23}Driver Version: {driver:<15}CUDA Version: {cuda:<9}|"
    );
    out += CELLS;
    out.push('\n');
    let windows = gpus.iter().any(|d| d.driver_model.is_value());
    let mode = if windows {
        " Driver-Model"
    } else {
        "Persistence-M"
    };
    let _ = writeln!(
        out,
        "| GPU  Name                 {mode} | Bus-Id          Disp.A | Volatile Uncorr. ECC |"
    );
    out += "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |\n";
    out += "|                                         |                        |               MIG M. |\n";
    out += "|=========================================+========================+======================|\n";
    for d in gpus {
        gpu(&mut out, d);
    }
    mig_devices(&mut out, migs);
    out.push('\n');
    out += RULE;
    out.push('\n');
    out += "| Processes:                                                                              |\n";
    out += "|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |\n";
    out += "|        ID   ID                                                               Usage      |\n";
    out += "|=========================================================================================|\n";
    match processes {
        None => {
            let _ = writeln!(out, "|  {:<87}|", "N/A: the process list could not be read");
        }
        Some([]) => {
            let _ = writeln!(out, "|  {:<87}|", "No running processes found");
        }
        Some(list) => {
            for ProcessRow { gpu, process: p } in list {
                let id = |v: Option<u32>| v.map_or("N/A".to_string(), |v| v.to_string());
                let name = p.name.value().map_or("N/A", String::as_str);
                let name = cut_start(&escape_control(name), 32);
                let memory = match p.used_memory {
                    Some(b) => format!("{:>11}MiB", nearest_mib(b)),
                    None => format!("{:>9}     ", "N/A"),
                };
                let _ = writeln!(
                    out,
                    "|{:>5}{:>6}{:>5}{:>16}{:>7}   {name:<32}{memory} |",
                    gpu,
                    id(p.gpu_instance_id),
                    id(p.compute_instance_id),
                    p.pid,
                    p.kind
                );
            }
        }
    }
    out += RULE;
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_cut_as_nvidia_smi_cuts_them() {
        // A GeForce RTX 2080 SUPER under WDDM, and a process of it, as nvidia-smi 591.86 drew
        // them (utkuozdemir/nvidia_gpu_exporter's windows-x86_64 capture).
        assert_eq!(
            cut_end("NVIDIA GeForce RTX 2080 SUPER", 27),
            "NVIDIA GeForce RTX 2080 ..."
        );
        assert_eq!(
            cut_end("NVIDIA H100 80GB HBM3", 29),
            "NVIDIA H100 80GB HBM3"
        );
        assert_eq!(
            cut_start(
                "C:\\Program Files\\NVIDIA Corporation\\NVIDIA GeForce Experience\\NVIDIA Share.exe",
                32
            ),
            "...e Experience\\NVIDIA Share.exe"
        );
        assert_eq!(cut_start("./gpu_burn", 32), "./gpu_burn");
    }

    #[test]
    fn extreme_answers_draw_without_overflow() {
        let none = gpu_backend::BackendError::NotSupported;
        let mut d = DeviceSnapshot::from_answers(
            gpu_backend::DeviceId::Gpu(0),
            gpu_backend::fixture::DeviceStatic::all_failing(&none),
            gpu_backend::fixture::DeviceDynamic::all_failing(&none),
        );
        d.power_usage = Na::Value(u32::MAX);
        d.enforced_power_limit = Na::Value(u32::MAX);
        d.performance_state = Na::Value(u32::MAX);
        let mut out = String::new();
        gpu(&mut out, &d);
        assert!(out.contains("4294967W / 4294967W"), "{out}");
        assert!(out.contains("N/A"), "a P-state past P15 is N/A: {out}");
    }
}
