//! `cargo xtask import-smi`: turns `nvidia-smi -q -x` output into a one-frame fixture.
//!
//! A bug reporter's `nvidia-smi -q -x > dump.xml` becomes a fixture that every gpuscope layer
//! (and, through fake-nvml, any NVML client) can replay. The dump is read into a small element
//! tree ([`xml`]) and each NVML answer is taken from the element nvidia-smi printed it in,
//! converted to NVML's units (MiB to bytes, W to mW). What nvidia-smi printed as `N/A`,
//! `[Not Supported]` and the like, and what the dump does not hold at all, becomes the matching
//! error answer (`not_supported` unless the text names another error). See docs/testing.md for
//! what an import cannot know.

mod details;
mod xml;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use gpu_backend::fixture::{
    DeviceDynamic, DeviceStatic, EccCounts, Frame, HostFrame, HostProcessFacts, HostProcessSample,
    HostStatic, Meta, SystemAnswers, SCHEMA_VERSION,
};
use gpu_backend::{
    Answer, Architecture, BackendError, Bar1MemoryInfo, Brand, ClockEventReasons, CodecUtilization,
    ComputeMode, CurrentPending, DeviceId, DriverModel, EccCounter, EccErrorKind, Fixture,
    GpuOperationMode, LocationEccCounts, MemoryInfo, PciInfo, PerClock, PerformanceState,
    PowerLimits, ProcessInfo, RemappedRows, Utilization, VirtualizationMode,
};

use xml::{Element, XmlError};

/// Command-line arguments.
#[derive(clap::Args)]
pub struct Args {
    /// The output of `nvidia-smi -q -x` to import.
    #[arg(value_name = "DUMP.xml")]
    pub dump: PathBuf,
    /// The fixture file to write.
    #[arg(long, value_name = "FIXTURE.json")]
    pub out: PathBuf,
    /// Scenario name kept in the fixture (default: the dump's file stem).
    #[arg(long)]
    pub name: Option<String>,
}

/// Runs the import.
pub fn run(args: Args) -> Result<()> {
    let origin = args.dump.display().to_string();
    let bytes = std::fs::read(&args.dump).with_context(|| format!("cannot read {origin}"))?;
    let text = String::from_utf8_lossy(&bytes);
    let file_name = args
        .dump
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| origin.clone());
    let name = args.name.clone().unwrap_or_else(|| stem_of(&args.dump));
    let fixture = import_str(&text, &origin, &file_name, &name)?;
    if let Err(gpu_backend::fixture::InvalidFixture { path, message }) = fixture.validate() {
        bail!(
            "{origin}: the imported fixture does not validate at `{path}`: {message} \
             (this is a bug in import-smi; please report it with the dump)"
        );
    }
    // Replaces a file at --out, never writes through a symbolic link there.
    gpu_backend::files::create(&args.out, gpu_backend::files::IfExists::Truncate)
        .map_err(std::io::Error::from)
        .and_then(|mut f| {
            std::io::Write::write_all(&mut f, (fixture.to_json_pretty() + "\n").as_bytes())
        })
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    let gpus = fixture.physical_ids().count();
    let migs = fixture.devices.len() - gpus;
    println!(
        "wrote {} ({gpus} GPU(s), {migs} MIG device(s), one frame)",
        args.out.display()
    );
    Ok(())
}

fn stem_of(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "imported".into())
}

/// Imports the text of an `nvidia-smi -q -x` dump. `origin` names the dump in errors,
/// `file_name` is kept in `meta.source`, `name` becomes `meta.name`.
///
/// Fails, naming `origin`, on text that is not XML or whose root element is not
/// `<nvidia_smi_log>`. Never panics.
pub fn import_str(text: &str, origin: &str, file_name: &str, name: &str) -> Result<Fixture> {
    const EXPECTED: &str = "expected the XML output of `nvidia-smi -q -x` (root element \
                            <nvidia_smi_log>)";
    let doc = match xml::parse(text, "nvidia_smi_log") {
        Ok(d) => d,
        Err(e @ (XmlError::WrongRoot { .. } | XmlError::NotXml { .. } | XmlError::Empty)) => {
            bail!("{origin}: not nvidia-smi XML: {e}; {EXPECTED}")
        }
        Err(e @ XmlError::Malformed { .. }) => {
            bail!("{origin}: cannot read the nvidia-smi XML: {e}; {EXPECTED}")
        }
    };
    Ok(build(&doc, file_name, name))
}

// ---- Values as nvidia-smi prints them ----

/// The error that a placeholder nvidia-smi prints instead of a value stands for.
fn placeholder(text: &str) -> Option<BackendError> {
    let t = text.trim();
    let inner = t
        .strip_prefix('[')
        .and_then(|x| x.strip_suffix(']'))
        .unwrap_or(t)
        .trim()
        .to_ascii_lowercase();
    let e = match inner.as_str() {
        "n/a" | "na" | "not supported" | "unsupported" | "not available" => {
            BackendError::NotSupported
        }
        "insufficient permissions" | "insufficient permission" | "no permission" => {
            BackendError::NoPermission
        }
        "unknown error" => BackendError::Unknown(gpu_backend::error::nvml_codes::UNKNOWN),
        "gpu is lost" | "gpu lost" => BackendError::GpuLost,
        "not found" => BackendError::NotFound,
        "function not found" => BackendError::FunctionNotFound,
        "timeout" | "timed out" => BackendError::Timeout,
        "uninitialized" => BackendError::Uninitialized,
        "driver not loaded" => BackendError::DriverNotLoaded,
        s if s.contains("deprecated") => BackendError::Deprecated,
        s if s.starts_with("not available in wddm") => BackendError::NotSupported,
        _ => return None,
    };
    Some(e)
}

type R<T> = Result<T, BackendError>;

/// The trimmed text of an element: missing elements and placeholders are errors.
fn text(e: Option<&Element>) -> R<&str> {
    let e = e.ok_or(BackendError::NotSupported)?;
    match placeholder(e.value()) {
        Some(err) => Err(err),
        None => Ok(e.value()),
    }
}

fn unreadable(t: &str, what: &str) -> BackendError {
    BackendError::Other(format!("nvidia-smi printed {t:?}, expected {what}"))
}

/// A number followed by one of `units` (case-insensitive), scaled by the unit's factor.
fn number(e: Option<&Element>, units: &[(&str, f64)], what: &str) -> R<f64> {
    let t = text(e)?;
    if t.is_empty() {
        return Err(BackendError::NotSupported);
    }
    let split = t
        .char_indices()
        .find(|&(_, c)| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .map(|(i, _)| i)
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let unit = unit.trim();
    let value: f64 = num.parse().map_err(|_| unreadable(t, what))?;
    let factor = units
        .iter()
        .find(|(u, _)| u.eq_ignore_ascii_case(unit))
        .map(|&(_, f)| f)
        .ok_or_else(|| unreadable(t, what))?;
    let v = value * factor;
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(unreadable(t, what))
    }
}

fn to_u32(v: f64, what: &str) -> R<u32> {
    let r = v.round();
    if (0.0..=f64::from(u32::MAX)).contains(&r) {
        Ok(r as u32)
    } else {
        Err(BackendError::Other(format!(
            "{v} is out of range for {what}"
        )))
    }
}

fn to_u64(v: f64, what: &str) -> R<u64> {
    let r = v.round();
    // 2^64 as f64; anything at or above it does not fit.
    if (0.0..18_446_744_073_709_551_616.0).contains(&r) {
        Ok(r as u64)
    } else {
        Err(BackendError::Other(format!(
            "{v} is out of range for {what}"
        )))
    }
}

const MIB_F: f64 = 1024.0 * 1024.0;

/// Memory: bytes from `N MiB`.
fn bytes(e: Option<&Element>) -> R<u64> {
    let units = [
        ("MiB", MIB_F),
        ("GiB", 1024.0 * MIB_F),
        ("KiB", 1024.0),
        ("B", 1.0),
    ];
    to_u64(number(e, &units, "a size in MiB")?, "bytes")
}

fn mhz(e: Option<&Element>) -> R<u32> {
    to_u32(
        number(e, &[("MHz", 1.0), ("GHz", 1000.0)], "a clock in MHz")?,
        "MHz",
    )
}

fn percent(e: Option<&Element>) -> R<u32> {
    to_u32(
        number(e, &[("%", 1.0), ("", 1.0)], "a percentage")?,
        "percent",
    )
}

fn milliwatts(e: Option<&Element>) -> R<u32> {
    to_u32(
        number(e, &[("W", 1000.0), ("mW", 1.0)], "a power in W")?,
        "mW",
    )
}

fn celsius(e: Option<&Element>) -> R<u32> {
    to_u32(number(e, &[("C", 1.0)], "a temperature in C")?, "degrees C")
}

fn kb_per_s(e: Option<&Element>) -> R<u32> {
    to_u32(
        number(
            e,
            &[("KB/s", 1.0), ("MB/s", 1000.0)],
            "a throughput in KB/s",
        )?,
        "KB/s",
    )
}

fn integer(e: Option<&Element>) -> R<u32> {
    let v = number(e, &[("", 1.0), ("x", 1.0)], "an integer")?;
    if v.fract() != 0.0 {
        return Err(unreadable(text(e).unwrap_or(""), "an integer"));
    }
    to_u32(v, "an integer")
}

fn count(e: Option<&Element>) -> R<u64> {
    let v = number(e, &[("", 1.0)], "a count")?;
    to_u64(v, "a count")
}

fn string(e: Option<&Element>) -> R<String> {
    text(e).map(str::to_string)
}

fn boolean(e: Option<&Element>) -> R<bool> {
    let t = text(e)?;
    match t.to_ascii_lowercase().as_str() {
        "enabled" | "yes" | "supported" | "active" | "on" => Ok(true),
        "disabled" | "no" | "not active" | "off" => Ok(false),
        "" => Err(BackendError::NotSupported),
        _ => Err(unreadable(t, "Enabled or Disabled")),
    }
}

fn pair<T>(current: R<T>, pending: R<T>) -> Answer<CurrentPending<T>> {
    Answer::from(
        current.and_then(|current| pending.map(|pending| CurrentPending { current, pending })),
    )
}

/// The first of `names` that `parent` has, so that a renamed element is read from whichever
/// name this version of nvidia-smi used.
fn first<'a>(parent: Option<&'a Element>, names: &[&str]) -> Option<&'a Element> {
    let p = parent?;
    names.iter().find_map(|n| p.child(n))
}

fn at<'a>(e: &'a Element, path: &[&str]) -> Option<&'a Element> {
    e.at(path)
}

/// `0000:00:03.0` (old nvidia-smi) becomes NVML's `00000000:00:03.0`.
fn normalise_bus_id(id: &str) -> String {
    let id = id.trim();
    match id.split_once(':') {
        Some((domain, rest))
            if domain.len() < 8 && domain.bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            format!("{domain:0>8}:{rest}")
        }
        _ => id.to_string(),
    }
}

fn hex(e: Option<&Element>) -> R<u32> {
    hex_as(e, u32::from_str_radix)
}

/// A number in hex, with or without `0x`, read by `from_str_radix` of the width wanted.
fn hex_as<T>(
    e: Option<&Element>,
    from_str_radix: fn(&str, u32) -> Result<T, std::num::ParseIntError>,
) -> R<T> {
    let t = text(e)?;
    let digits = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    from_str_radix(digits, 16).map_err(|_| unreadable(t, "a hexadecimal number"))
}

/// The page addresses of one retirement cause (`multiple_single_bit_retirement` or
/// `double_bit_retirement`): `retired_count` must agree with the addresses listed.
fn retired_pages(cause: Option<&Element>) -> R<Vec<u64>> {
    let cause = cause.ok_or(BackendError::NotSupported)?;
    let n = count(cause.child("retired_count"))?;
    let list = cause.child("retired_pagelist");
    let addresses = list
        .into_iter()
        .flat_map(|l| l.children_named("retired_page"))
        .map(|p| {
            let t = text(p.child("retired_page_address"))?;
            let digits = t
                .strip_prefix("0x")
                .or_else(|| t.strip_prefix("0X"))
                .unwrap_or(t);
            u64::from_str_radix(digits, 16).map_err(|_| unreadable(t, "a page address"))
        })
        .collect::<R<Vec<u64>>>()?;
    if addresses.len() as u64 != n {
        return Err(BackendError::Other(format!(
            "nvidia-smi printed {n} retired pages but listed {} addresses",
            addresses.len()
        )));
    }
    Ok(addresses)
}

/// Remapped rows, from `remapped_rows` (N/A before Ampere).
fn remapped_rows(e: Option<&Element>) -> R<RemappedRows> {
    let e = e.ok_or(BackendError::NotSupported)?;
    if e.child("remapped_row_corr").is_none() {
        // `<remapped_rows>N/A</remapped_rows>`, or a placeholder.
        text(Some(e))?;
        return Err(BackendError::NotSupported);
    }
    Ok(RemappedRows {
        correctable: integer(e.child("remapped_row_corr"))?,
        uncorrectable: integer(e.child("remapped_row_unc"))?,
        pending: boolean(e.child("remapped_row_pending"))?,
        failure: boolean(e.child("remapped_row_failure"))?,
    })
}

fn pci_info(g: &Element) -> R<PciInfo> {
    let pci = g.child("pci");
    let bus_id = match pci.and_then(|p| p.child("pci_bus_id")) {
        Some(e) => text(Some(e))?.to_string(),
        None => g
            .attr("id")
            .map(str::to_string)
            .ok_or(BackendError::NotSupported)?,
    };
    let bus_id = normalise_bus_id(&bus_id);
    let parsed = gpu_backend::PciAddress::parse(&bus_id);
    let part = |name: &str, from_id: Option<u32>| -> R<u32> {
        match pci.and_then(|p| p.child(name)) {
            Some(e) => hex(Some(e)),
            None => from_id.ok_or_else(|| unreadable(&bus_id, "a PCI bus id")),
        }
    };
    Ok(PciInfo {
        domain: part("pci_domain", parsed.map(|p| p.domain))?,
        bus: part("pci_bus", parsed.map(|p| p.bus))?,
        device: part("pci_device", parsed.map(|p| p.device))?,
        pci_device_id: hex(first(pci, &["pci_device_id"]))?,
        pci_subsystem_id: hex(first(pci, &["pci_sub_system_id", "pci_subsystem_id"]))?,
        bus_id,
    })
}

fn architecture(e: Option<&Element>) -> R<Architecture> {
    let t = text(e)?;
    let lower = t.to_ascii_lowercase();
    Ok(match lower.as_str() {
        "kepler" => Architecture::Kepler,
        "maxwell" => Architecture::Maxwell,
        "pascal" => Architecture::Pascal,
        "volta" => Architecture::Volta,
        "turing" => Architecture::Turing,
        "ampere" => Architecture::Ampere,
        "ada" | "ada lovelace" => Architecture::Ada,
        "hopper" => Architecture::Hopper,
        "blackwell" => Architecture::Blackwell,
        _ => return Err(unreadable(t, "an architecture name")),
    })
}

fn brand(e: Option<&Element>) -> R<Brand> {
    let t = text(e)?;
    let lower = t.to_ascii_lowercase();
    Ok(match lower.as_str() {
        "unknown" => Brand::Unknown,
        "quadro" => Brand::Quadro,
        "tesla" => Brand::Tesla,
        "nvs" => Brand::Nvs,
        "grid" => Brand::Grid,
        "geforce" => Brand::GeForce,
        "titan" => Brand::Titan,
        "nvidia virtual applications" => Brand::Other(7),
        "nvidia virtual pc" => Brand::Other(8),
        "nvidia rtx virtual workstation" => Brand::Other(9),
        "nvidia virtual compute server" => Brand::Other(10),
        "nvidia cloud gaming" => Brand::Other(11),
        "quadro rtx" => Brand::QuadroRtx,
        "nvidia rtx" => Brand::NvidiaRtx,
        "nvidia" => Brand::Nvidia,
        "geforce rtx" => Brand::GeForceRtx,
        "titan rtx" => Brand::TitanRtx,
        _ => return Err(unreadable(t, "a product brand")),
    })
}

fn compute_mode(e: Option<&Element>) -> R<ComputeMode> {
    let t = text(e)?;
    Ok(match t.to_ascii_lowercase().replace(' ', "_").as_str() {
        "default" => ComputeMode::Default,
        "exclusive_thread" => ComputeMode::ExclusiveThread,
        "prohibited" => ComputeMode::Prohibited,
        "exclusive_process" => ComputeMode::ExclusiveProcess,
        _ => return Err(unreadable(t, "a compute mode")),
    })
}

fn driver_model(e: Option<&Element>) -> R<DriverModel> {
    let t = text(e)?;
    Ok(match t.to_ascii_lowercase().as_str() {
        "wddm" => DriverModel::Wddm,
        "wdm" | "tcc" => DriverModel::Wdm,
        "mcdm" => DriverModel::Mcdm,
        _ => return Err(unreadable(t, "WDDM, TCC or MCDM")),
    })
}

fn virtualization_mode(e: Option<&Element>) -> R<VirtualizationMode> {
    let t = text(e)?;
    Ok(
        match t.to_ascii_lowercase().replace(['-', '_'], " ").as_str() {
            "none" => VirtualizationMode::None,
            "pass through" | "passthrough" => VirtualizationMode::PassThrough,
            "vgpu" => VirtualizationMode::Vgpu,
            "host vgpu" => VirtualizationMode::HostVgpu,
            "host vsga" => VirtualizationMode::HostVsga,
            _ => return Err(unreadable(t, "a virtualization mode")),
        },
    )
}

fn gpu_operation_mode(e: Option<&Element>) -> R<GpuOperationMode> {
    let t = text(e)?;
    Ok(match t.to_ascii_lowercase().replace('_', " ").as_str() {
        "all on" => GpuOperationMode::AllOn,
        "compute" => GpuOperationMode::Compute,
        "low double precision" | "low dp" => GpuOperationMode::LowDoublePrecision,
        _ => return Err(unreadable(t, "a GPU operation mode")),
    })
}

/// A temperature that may be negative (nvidia-smi 575 and newer print thresholds relative to
/// T.Limit: `-8 C`), in whole degrees, bounded to what a sensor can read.
fn signed_celsius(e: Option<&Element>) -> R<i64> {
    let t = text(e)?;
    let digits = t
        .strip_suffix('C')
        .or_else(|| t.strip_suffix('c'))
        .ok_or_else(|| unreadable(t, "a temperature in C"))?
        .trim();
    let value: i64 = digits
        .parse()
        .map_err(|_| unreadable(t, "a whole temperature in C"))?;
    if (-1000..=1000).contains(&value) {
        Ok(value)
    } else {
        Err(unreadable(t, "a temperature between -1000 and 1000 C"))
    }
}

/// An absolute temperature threshold, °C, as NVML answers it (`nvmlDeviceGetTemperatureThreshold`).
///
/// Up to driver 570 nvidia-smi prints each threshold as it is (`old`, e.g.
/// `gpu_temp_slow_threshold`). From 575 on it prints them relative to T.Limit, the GPU's own
/// temperature limit (`relative`, e.g. `gpu_temp_slow_tlimit_threshold`): `gpu_temp_tlimit` is
/// how far the GPU is below T.Limit, so T.Limit = `gpu_temp` + `gpu_temp_tlimit`, and each
/// relative threshold is how far T.Limit lies above it: threshold = T.Limit - relative. On the
/// real H100 of `fixtures/h100-real/` (driver 580) that gives shutdown 95, slowdown 89 and GPU
/// max 87, what NVML answered there.
///
/// The memory maximum's relative value is not relative to the GPU's T.Limit (on that H100 the
/// formula gives 87 where NVML answered 95, and nvidia-smi prints no memory T.Limit), so it is
/// not `convertible`: a number there leaves the threshold `not_recorded`; a placeholder (`N/A`)
/// is its error, as for any value.
fn temperature_threshold(
    temp: Option<&Element>,
    old: &str,
    relative: &str,
    convertible: bool,
) -> R<u32> {
    if let Some(e) = first(temp, &[old]) {
        return celsius(Some(e));
    }
    let (Some(temp), Some(rel)) = (temp, first(temp, &[relative])) else {
        return Err(BackendError::NotSupported);
    };
    let offset = signed_celsius(Some(rel))?;
    if !convertible {
        return Err(BackendError::NotRecorded);
    }
    let now = i64::from(celsius(temp.child("gpu_temp"))?);
    let t_limit = now + signed_celsius(temp.child("gpu_temp_tlimit"))?;
    u32::try_from(t_limit - offset).map_err(|_| {
        BackendError::Other(format!(
            "T.Limit {t_limit} C less the {relative} of {offset} C is below 0 C"
        ))
    })
}

fn pstate(e: Option<&Element>) -> R<u32> {
    let t = text(e)?;
    if t.eq_ignore_ascii_case("unknown") {
        return Ok(PerformanceState::Unknown.nvml_code());
    }
    t.strip_prefix('P')
        .and_then(|n| n.parse::<u32>().ok())
        .and_then(PerformanceState::known)
        .map(PerformanceState::nvml_code)
        .ok_or_else(|| unreadable(t, "a performance state P0..P15"))
}

/// `"12.2"` as CUDA's integer encoding 12020.
fn cuda_version(e: Option<&Element>) -> R<i32> {
    let t = text(e)?;
    let (major, minor) = t.split_once('.').unwrap_or((t, "0"));
    let major: i32 = major
        .trim()
        .parse()
        .map_err(|_| unreadable(t, "a CUDA version"))?;
    let minor: i32 = minor
        .trim()
        .parse()
        .map_err(|_| unreadable(t, "a CUDA version"))?;
    if !(0..=100_000).contains(&major) || !(0..=99).contains(&minor) {
        return Err(unreadable(t, "a CUDA version"));
    }
    Ok(major * 1000 + minor * 10)
}

fn per_clock(parent: Option<&Element>) -> PerClock<Answer<u32>> {
    PerClock {
        graphics: mhz(first(parent, &["graphics_clock"])).into(),
        sm: mhz(first(parent, &["sm_clock"])).into(),
        memory: mhz(first(parent, &["mem_clock", "memory_clock"])).into(),
        video: mhz(first(parent, &["video_clock"])).into(),
    }
}

/// NVML clock event reasons, by the name nvidia-smi gives the reason.
const REASONS: &[(&str, ClockEventReasons)] = &[
    ("gpu_idle", ClockEventReasons::GPU_IDLE),
    (
        "applications_clocks_setting",
        ClockEventReasons::APPLICATIONS_CLOCKS_SETTING,
    ),
    ("sw_power_cap", ClockEventReasons::SW_POWER_CAP),
    ("hw_slowdown", ClockEventReasons::HW_SLOWDOWN),
    ("sync_boost", ClockEventReasons::SYNC_BOOST),
    (
        "sw_thermal_slowdown",
        ClockEventReasons::SW_THERMAL_SLOWDOWN,
    ),
    (
        "hw_thermal_slowdown",
        ClockEventReasons::HW_THERMAL_SLOWDOWN,
    ),
    (
        "hw_power_brake_slowdown",
        ClockEventReasons::HW_POWER_BRAKE_SLOWDOWN,
    ),
    (
        "display_clocks_setting",
        ClockEventReasons::DISPLAY_CLOCK_SETTING,
    ),
    ("unknown", ClockEventReasons::UNKNOWN),
];

fn clock_event_reasons(g: &Element) -> R<u64> {
    let Some(list) = first(
        Some(g),
        &["clocks_event_reasons", "clocks_throttle_reasons"],
    ) else {
        return Err(BackendError::NotSupported);
    };
    let mut mask = 0u64;
    let mut known = false;
    let mut error = None;
    for c in &list.children {
        let reason = c
            .name
            .strip_prefix("clocks_event_reason_")
            .or_else(|| c.name.strip_prefix("clocks_throttle_reason_"));
        let Some(bit) = reason.and_then(|r| REASONS.iter().find(|(n, _)| *n == r)) else {
            continue;
        };
        match text(Some(c)).map(|t| t.to_ascii_lowercase()) {
            Ok(t) if t == "active" => {
                mask |= bit.1.bits();
                known = true;
            }
            Ok(t) if t == "not active" => known = true,
            Ok(_) => {}
            Err(e) => error = error.or(Some(e)),
        }
    }
    if known {
        Ok(mask)
    } else {
        Err(error.unwrap_or(BackendError::NotSupported))
    }
}

/// The total of one ECC counter group: `single_bit/total` and `double_bit/total` in old dumps,
/// the sum of the `sram_*`/`dram_*` counters in new ones.
fn ecc_total(group: Option<&Element>, corrected: bool) -> R<u64> {
    let group = group.ok_or(BackendError::NotSupported)?;
    let old = if corrected {
        "single_bit"
    } else {
        "double_bit"
    };
    if let Some(total) = group.child(old).and_then(|b| b.child("total")) {
        return count(Some(total));
    }
    let mut sum: Option<u64> = None;
    let mut error = None;
    for c in &group.children {
        let uncorrectable = c.name.contains("uncorrectable");
        let correctable = !uncorrectable && c.name.ends_with("_correctable");
        if corrected != correctable || (!corrected && !uncorrectable) {
            continue;
        }
        match count(Some(c)) {
            Ok(n) => sum = Some(sum.unwrap_or(0).saturating_add(n)),
            Err(e) => error = error.or(Some(e)),
        }
    }
    sum.ok_or(error.unwrap_or(BackendError::NotSupported))
}

fn ecc_counts(errors: Option<&Element>, volatile: &[&str], aggregate: &[&str]) -> EccCounts {
    let v = first(errors, volatile);
    let a = first(errors, aggregate);
    EccCounts {
        volatile_corrected: ecc_total(v, true).into(),
        volatile_uncorrected: ecc_total(v, false).into(),
        aggregate_corrected: ecc_total(a, true).into(),
        aggregate_uncorrected: ecc_total(a, false).into(),
    }
}

/// One counter of one memory location in a counter group (`volatile` or `aggregate`):
/// `single_bit/<location>` or `double_bit/<location>` in old dumps, `<prefix>_correctable` or
/// `<prefix>_uncorrectable` in new ones (Blackwell's split `sram_uncorrectable_*` summed).
fn ecc_location_count(group: &Element, old: &str, new: Option<&str>, corrected: bool) -> R<u64> {
    let bits = if corrected {
        "single_bit"
    } else {
        "double_bit"
    };
    if let Some(e) = group.child(bits).and_then(|b| b.child(old)) {
        return count(Some(e));
    }
    let prefix = new.ok_or(BackendError::NotSupported)?;
    let name = if corrected {
        format!("{prefix}_correctable")
    } else {
        format!("{prefix}_uncorrectable")
    };
    if let Some(e) = group.child(&name) {
        return count(Some(e));
    }
    let parts: Vec<&Element> = group
        .children
        .iter()
        .filter(|c| c.name.starts_with(&format!("{name}_")))
        .collect();
    if parts.is_empty() {
        return Err(BackendError::NotSupported);
    }
    parts
        .iter()
        .try_fold(0u64, |sum, c| Ok(sum.saturating_add(count(Some(c))?)))
}

/// The ECC counts of one memory location: `old` names it in old dumps, `new` is its prefix in
/// new ones (`sram`, `dram`), if they carry it.
fn ecc_location(errors: Option<&Element>, old: &str, new: Option<&str>) -> R<LocationEccCounts> {
    let mut counts = LocationEccCounts::default();
    let mut first_error = None;
    let mut any = false;
    for counter in [EccCounter::Volatile, EccCounter::Aggregate] {
        let group_name = match counter {
            EccCounter::Volatile => "volatile",
            EccCounter::Aggregate => "aggregate",
        };
        let Some(group) = errors.and_then(|e| e.child(group_name)) else {
            continue;
        };
        for kind in [EccErrorKind::Corrected, EccErrorKind::Uncorrected] {
            match ecc_location_count(group, old, new, kind == EccErrorKind::Corrected) {
                Ok(n) => {
                    *counts.get_mut(kind, counter) = Some(n);
                    any = true;
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
    }
    if any {
        Ok(counts)
    } else {
        Err(first_error.unwrap_or(BackendError::NotSupported))
    }
}

fn memory_info(fb: Option<&Element>) -> R<MemoryInfo> {
    let fb = fb.ok_or(BackendError::NotSupported)?;
    Ok(MemoryInfo {
        total: bytes(fb.child("total"))?,
        free: bytes(fb.child("free"))?,
        used: bytes(fb.child("used"))?,
        reserved: bytes(fb.child("reserved")).ok(),
    })
}

fn bar1_info(bar1: Option<&Element>) -> R<Bar1MemoryInfo> {
    let bar1 = bar1.ok_or(BackendError::NotSupported)?;
    Ok(Bar1MemoryInfo {
        total: bytes(bar1.child("total"))?,
        free: bytes(bar1.child("free"))?,
        used: bytes(bar1.child("used"))?,
    })
}

// ---- Processes ----

/// One `<process_info>`.
#[derive(Debug, Clone)]
struct SmiProcess {
    pid: u32,
    compute: bool,
    graphics: bool,
    name: String,
    used: Option<u64>,
    gpu_instance_id: Option<u32>,
    compute_instance_id: Option<u32>,
}

impl SmiProcess {
    fn info(&self) -> ProcessInfo {
        ProcessInfo {
            pid: self.pid,
            used_gpu_memory: self.used,
            gpu_instance_id: self.gpu_instance_id,
            compute_instance_id: self.compute_instance_id,
        }
    }
}

/// The processes of a GPU, or the error its process list stands for (no `<processes>`).
fn processes(g: &Element, notes: &mut Vec<String>) -> R<Vec<SmiProcess>> {
    let list = g.child("processes").ok_or(BackendError::NotSupported)?;
    if list.children.is_empty() {
        // Empty, "None" or "No running processes found".
        return match placeholder(list.value()) {
            Some(e) => Err(e),
            None => Ok(Vec::new()),
        };
    }
    let mut out = Vec::new();
    for p in list.children_named("process_info") {
        let Ok(pid) = integer(p.child("pid")) else {
            notes.push(format!(
                "a process without a readable pid ({:?}) was left out",
                p.child("pid").map(Element::value).unwrap_or("missing")
            ));
            continue;
        };
        let kind = p
            .child("type")
            .map(|t| t.value().to_ascii_uppercase())
            .unwrap_or_default();
        let graphics = kind.contains('G');
        // "C", "C+G", "M", "M+C": anything that is not graphics-only is a compute context.
        let compute = kind.contains('C') || kind.contains('M') || !graphics;
        let used = bytes(p.child("used_memory")).ok();
        out.push(SmiProcess {
            pid,
            compute,
            graphics,
            name: p
                .child("process_name")
                .map(|n| n.value().to_string())
                .unwrap_or_default(),
            used,
            gpu_instance_id: integer(p.child("gpu_instance_id")).ok(),
            compute_instance_id: integer(p.child("compute_instance_id")).ok(),
        });
    }
    Ok(out)
}

type Lists = (Answer<Vec<ProcessInfo>>, Answer<Vec<ProcessInfo>>);

fn lists<'a>(procs: &R<Vec<SmiProcess>>, keep: impl Fn(&SmiProcess) -> bool + 'a) -> Lists {
    match procs {
        Ok(ps) => (
            Answer::Ok(
                ps.iter()
                    .filter(|p| p.compute && keep(p))
                    .map(SmiProcess::info)
                    .collect(),
            ),
            Answer::Ok(
                ps.iter()
                    .filter(|p| p.graphics && keep(p))
                    .map(SmiProcess::info)
                    .collect(),
            ),
        ),
        Err(e) => (Answer::Err(e.clone()), Answer::Err(e.clone())),
    }
}

/// The executable name in what nvidia-smi printed as the process name (a path, often with
/// arguments on Linux).
fn executable_name(printed: &str) -> String {
    let printed = printed.trim();
    let program = if printed.contains('\\') {
        printed
    } else {
        printed.split_whitespace().next().unwrap_or("")
    };
    program
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or(program)
        .to_string()
}

// ---- Devices ----

/// A MIG device of a dump.
struct SmiMig {
    index: u32,
    gi: R<u32>,
    ci: R<u32>,
    element: Element,
}

fn mig_devices(g: &Element) -> Vec<SmiMig> {
    let Some(list) = g.child("mig_devices") else {
        return Vec::new();
    };
    let mut out: Vec<SmiMig> = Vec::new();
    for (position, m) in list.children_named("mig_device").enumerate() {
        let mut index = integer(m.child("index")).unwrap_or(position as u32);
        // Slots must be distinct; a dump that repeats one gets the next free slot.
        while out.iter().any(|o| o.index == index) {
            index = index.saturating_add(1);
        }
        out.push(SmiMig {
            index,
            gi: integer(m.child("gpu_instance_id")),
            ci: integer(m.child("compute_instance_id")),
            element: m.clone(),
        });
    }
    out.sort_by_key(|m| m.index);
    out
}

fn unsupported_static() -> DeviceStatic {
    DeviceStatic::all_failing(&BackendError::NotSupported)
}

fn unsupported_dynamic() -> DeviceDynamic {
    DeviceDynamic::all_failing(&BackendError::NotSupported)
}

/// The MIG slots NVML would report: `MIG_SLOTS` covers every MIG-capable GPU so far (A100,
/// H100, B200 have 7 slots).
const MIG_SLOTS: u32 = 7;

fn physical_static(g: &Element, migs: &[SmiMig]) -> DeviceStatic {
    let power = first(Some(g), &["gpu_power_readings", "power_readings"]);
    let temp = g.child("temperature");
    let link = at(g, &["pci", "pci_gpu_link_info"]);
    let mig_mode = pair(
        boolean(at(g, &["mig_mode", "current_mig"])),
        boolean(at(g, &["mig_mode", "pending_mig"])),
    );
    let highest = migs
        .iter()
        .map(|m| m.index.saturating_add(1))
        .max()
        .unwrap_or(0);
    let (max_mig, indices) = match (&mig_mode, migs.is_empty()) {
        (_, false) => (
            Answer::Ok(MIG_SLOTS.max(highest)),
            Answer::Ok(migs.iter().map(|m| m.index).collect()),
        ),
        // MIG on with no instance: a MIG-capable GPU with no slot in use.
        (Answer::Ok(mode), true) if mode.current => (Answer::Ok(MIG_SLOTS), Answer::Ok(Vec::new())),
        // MIG off: NVML counts no MIG slot ("zero if MIG is not supported or enabled"; the real
        // H100 of fixtures/h100-real.json answered 0).
        (Answer::Ok(_), true) => (Answer::Ok(0), Answer::Ok(Vec::new())),
        (Answer::Err(e), true) => (Answer::Err(e.clone()), Answer::Err(e.clone())),
    };
    // A MIG-capable GPU's own handle is not a MIG device's: NVML answers its GPU and compute
    // instance id queries with INVALID_ARGUMENT (the real H100 of fixtures/h100-real.json, MIG
    // off). A GPU without MIG (no MIG mode printed) is left not supported.
    let instance_id_error = match &mig_mode {
        Answer::Ok(_) => BackendError::InvalidArgument,
        Answer::Err(_) => BackendError::NotSupported,
    };
    let fan = percent(g.child("fan_speed"));
    let everyday = DeviceStatic {
        name: string(g.child("product_name")).into(),
        uuid: string(g.child("uuid")).into(),
        serial: string(g.child("serial")).into(),
        pci_info: pci_info(g).into(),
        minor_number: integer(g.child("minor_number")).into(),
        vbios_version: string(g.child("vbios_version")).into(),
        board_part_number: string(g.child("board_part_number")).into(),
        inforom_image_version: string(at(g, &["inforom_version", "img_version"])).into(),
        // nvidia-smi prints neither.
        memory_bus_width: Answer::Err(BackendError::NotSupported),
        supported_clock_event_reasons: Answer::Err(BackendError::NotSupported),
        architecture: architecture(g.child("product_architecture")).into(),
        brand: brand(g.child("product_brand")).into(),
        max_clocks: per_clock(g.child("max_clocks")),
        num_fans: fan.map(|_| 1).into(),
        temperature_slowdown: temperature_threshold(
            temp,
            "gpu_temp_slow_threshold",
            "gpu_temp_slow_tlimit_threshold",
            true,
        )
        .into(),
        temperature_shutdown: temperature_threshold(
            temp,
            "gpu_temp_max_threshold",
            "gpu_temp_max_tlimit_threshold",
            true,
        )
        .into(),
        temperature_gpu_max: temperature_threshold(
            temp,
            "gpu_temp_max_gpu_threshold",
            "gpu_temp_max_gpu_tlimit_threshold",
            true,
        )
        .into(),
        temperature_memory_max: temperature_threshold(
            temp,
            "gpu_temp_max_mem_threshold",
            "gpu_temp_max_mem_tlimit_threshold",
            false,
        )
        .into(),
        power_management_mode: boolean(first(power, &["power_management"])).into(),
        power_management_limit: milliwatts(first(power, &["requested_power_limit", "power_limit"]))
            .into(),
        power_management_default_limit: milliwatts(first(power, &["default_power_limit"])).into(),
        power_management_limit_constraints: milliwatts(first(power, &["min_power_limit"]))
            .and_then(|min_mw| {
                milliwatts(first(power, &["max_power_limit"]))
                    .map(|max_mw| PowerLimits { min_mw, max_mw })
            })
            .into(),
        enforced_power_limit: milliwatts(first(
            power,
            &["current_power_limit", "enforced_power_limit"],
        ))
        .into(),
        max_pcie_link_generation: integer(link.and_then(|l| l.at(&["pcie_gen", "max_link_gen"])))
            .into(),
        max_pcie_link_width: integer(link.and_then(|l| l.at(&["link_widths", "max_link_width"])))
            .into(),
        nvlink_state: Vec::new(),
        display_mode: boolean(g.child("display_mode")).into(),
        display_active: boolean(g.child("display_active")).into(),
        persistence_mode: boolean(g.child("persistence_mode")).into(),
        ecc_mode: pair(
            boolean(at(g, &["ecc_mode", "current_ecc"])),
            boolean(at(g, &["ecc_mode", "pending_ecc"])),
        ),
        compute_mode: compute_mode(g.child("compute_mode")).into(),
        cuda_compute_capability: Answer::Err(BackendError::NotSupported),
        driver_model: pair(
            driver_model(at(g, &["driver_model", "current_dm"])),
            driver_model(at(g, &["driver_model", "pending_dm"])),
        ),
        mig_mode,
        max_mig_device_count: max_mig,
        mig_device_indices: indices,
        gpu_instance_id: Answer::Err(instance_id_error.clone()),
        compute_instance_id: Answer::Err(instance_id_error),
        applications_clocks: printed_clocks(g.child("applications_clocks")),
        default_applications_clocks: printed_clocks(g.child("default_applications_clocks")),
        // nvidia-smi prints neither.
        pcie_link_max_speed: Answer::Err(BackendError::NotRecorded),
        num_gpu_cores: Answer::Err(BackendError::NotRecorded),
        board_id: hex(g.child("board_id")).into(),
        multi_gpu_board: boolean(g.child("multigpu_board")).into(),
        virtualization_mode: virtualization_mode(at(
            g,
            &["gpu_virtualization_mode", "virtualization_mode"],
        ))
        .into(),
        accounting_mode: boolean(g.child("accounting_mode")).into(),
        gpu_operation_mode: pair(
            gpu_operation_mode(at(g, &["gpu_operation_mode", "current_gom"])),
            gpu_operation_mode(at(g, &["gpu_operation_mode", "pending_gom"])),
        ),
        // The details (details.rs) set the rest.
        ..unsupported_static()
    };
    details::physical_static(g, everyday)
}

/// Applications clocks as nvidia-smi prints them: graphics and memory only. The SM and video
/// clocks it never prints are `not_recorded` (NVML may well answer them: the real H100 gave an
/// SM applications clock and NOT_SUPPORTED for video).
fn printed_clocks(parent: Option<&Element>) -> PerClock<Answer<u32>> {
    PerClock {
        sm: Answer::Err(BackendError::NotRecorded),
        video: Answer::Err(BackendError::NotRecorded),
        ..per_clock(parent)
    }
}

/// An engine's utilization (`encoder_util`, `jpeg_util`, ...) under `<utilization>`.
fn codec(util: Option<&Element>, name: &str) -> Answer<CodecUtilization> {
    percent(first(util, &[name]))
        .map(|utilization| CodecUtilization {
            utilization,
            // nvidia-smi does not print the sampling period.
            sampling_period_us: 0,
        })
        .into()
}

fn physical_dynamic(g: &Element, st: &DeviceStatic, procs: &R<Vec<SmiProcess>>) -> DeviceDynamic {
    let power = first(Some(g), &["gpu_power_readings", "power_readings"]);
    let util = g.child("utilization");
    let pci = g.child("pci");
    let link = pci.and_then(|p| p.child("pci_gpu_link_info"));
    let fan = percent(g.child("fan_speed"));
    let (compute, graphics) = lists(procs, |_| true);
    let everyday = DeviceDynamic {
        memory_info: memory_info(g.child("fb_memory_usage")).into(),
        bar1_memory_info: bar1_info(g.child("bar1_memory_usage")).into(),
        utilization_rates: percent(first(util, &["gpu_util"]))
            .and_then(|gpu| {
                percent(first(util, &["memory_util"])).map(|memory| Utilization { gpu, memory })
            })
            .into(),
        encoder_utilization: codec(util, "encoder_util"),
        decoder_utilization: codec(util, "decoder_util"),
        clocks: per_clock(g.child("clocks")),
        fan_speed: fan.clone().into(),
        fan_speeds: match st.num_fans {
            Answer::Ok(_) => vec![fan.into()],
            Answer::Err(_) => Vec::new(),
        },
        // nvidia-smi does not print a fan's target speed.
        fan_target_speeds: match st.num_fans {
            Answer::Ok(_) => vec![Answer::Err(BackendError::NotSupported)],
            Answer::Err(_) => Vec::new(),
        },
        temperature: celsius(at(g, &["temperature", "gpu_temp"])).into(),
        memory_temperature: celsius(at(g, &["temperature", "memory_temp"])).into(),
        power_usage: milliwatts(first(
            power,
            &["power_draw", "average_power_draw", "instant_power_draw"],
        ))
        .into(),
        total_energy_consumption: Answer::Err(BackendError::NotSupported),
        performance_state: pstate(g.child("performance_state")).into(),
        current_pcie_link_generation: integer(
            link.and_then(|l| l.at(&["pcie_gen", "current_link_gen"])),
        )
        .into(),
        current_pcie_link_width: integer(
            link.and_then(|l| l.at(&["link_widths", "current_link_width"])),
        )
        .into(),
        pcie_tx_throughput: kb_per_s(first(pci, &["tx_util"])).into(),
        pcie_rx_throughput: kb_per_s(first(pci, &["rx_util"])).into(),
        nvlink_throughput: Vec::new(),
        // nvidia-smi -q -x does not print NVLink error counters.
        nvlink_error_counters: Vec::new(),
        ecc_errors: ecc_counts(g.child("ecc_errors"), &["volatile"], &["aggregate"]),
        ecc_l1_cache: ecc_location(g.child("ecc_errors"), "l1_cache", None).into(),
        ecc_l2_cache: ecc_location(g.child("ecc_errors"), "l2_cache", None).into(),
        ecc_device_memory: ecc_location(g.child("ecc_errors"), "device_memory", Some("dram"))
            .into(),
        ecc_register_file: ecc_location(g.child("ecc_errors"), "register_file", None).into(),
        ecc_texture_memory: ecc_location(g.child("ecc_errors"), "texture_memory", None).into(),
        ecc_texture_shm: ecc_location(g.child("ecc_errors"), "texture_shm", None).into(),
        ecc_cbu: ecc_location(g.child("ecc_errors"), "cbu", None).into(),
        ecc_sram: ecc_location(g.child("ecc_errors"), "sram", Some("sram")).into(),
        clock_event_reasons: clock_event_reasons(g).into(),
        pcie_replay_counter: integer(first(pci, &["replay_counter"])).into(),
        retired_pages_single_bit: retired_pages(at(
            g,
            &["retired_pages", "multiple_single_bit_retirement"],
        ))
        .into(),
        retired_pages_double_bit: retired_pages(at(g, &["retired_pages", "double_bit_retirement"]))
            .into(),
        retired_pages_pending: boolean(at(g, &["retired_pages", "pending_retirement"])).into(),
        remapped_rows: remapped_rows(g.child("remapped_rows")).into(),
        compute_processes: compute,
        graphics_processes: graphics,
        process_utilization: Answer::Err(BackendError::NotSupported),
        // nvidia-smi -q -x does not print GPM metrics.
        gpm_metrics: Answer::Err(BackendError::NotSupported),
        // A dump is one moment: it holds no events (XIDs are in the kernel log, not in it).
        events: Answer::Err(BackendError::NotRecorded),
        // The details (details.rs) set the rest.
        ..unsupported_dynamic()
    };
    details::physical_dynamic(g, everyday)
}

fn mig_static(m: &SmiMig) -> DeviceStatic {
    let mut s = unsupported_static();
    // Newer nvidia-smi versions may print these for a MIG device; older ones do not.
    s.name = string(m.element.child("product_name").or(m.element.child("name"))).into();
    s.uuid = string(m.element.child("uuid")).into();
    s.gpu_instance_id = m.gi.clone().into();
    s.compute_instance_id = m.ci.clone().into();
    s.device_attributes = details::mig_attributes(&m.element);
    s
}

fn mig_dynamic(m: &SmiMig, procs: &R<Vec<SmiProcess>>) -> DeviceDynamic {
    let mut d = unsupported_dynamic();
    d.memory_info = memory_info(m.element.child("fb_memory_usage")).into();
    d.bar1_memory_info = bar1_info(m.element.child("bar1_memory_usage")).into();
    d.ecc_errors = ecc_counts(
        m.element.child("ecc_error_count"),
        &["volatile_count", "volatile"],
        &["aggregate_count", "aggregate"],
    );
    let (gi, ci) = (m.gi.clone().ok(), m.ci.clone().ok());
    let (compute, graphics) = lists(procs, |p| {
        gi.is_some() && p.gpu_instance_id == gi && p.compute_instance_id == ci
    });
    d.compute_processes = compute;
    d.graphics_processes = graphics;
    d
}

fn dtd_name(doctype: Option<&str>) -> String {
    let Some(d) = doctype else {
        return "no DOCTYPE".into();
    };
    let inline = d.contains('[');
    let version = d.find("nvsmi_device_v").map(|i| {
        d[i..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect::<String>()
    });
    match (version, inline) {
        (Some(v), true) => format!("inline DTD {v}"),
        (Some(v), false) => format!("DTD {v}"),
        (None, true) => "inline DTD".into(),
        (None, false) => "DOCTYPE without a DTD version".into(),
    }
}

fn build(doc: &xml::Document, file_name: &str, name: &str) -> Fixture {
    let log = &doc.root;
    let gpus: Vec<&Element> = log.children_named("gpu").collect();
    let mut notes = Vec::new();
    let mut devices = BTreeMap::new();
    let mut dynamics = BTreeMap::new();
    let mut host_procs: BTreeMap<u32, HostProcessFacts> = BTreeMap::new();
    let mut gpu_names = Vec::new();
    for (i, g) in gpus.iter().enumerate() {
        let index = i as u32;
        let migs = mig_devices(g);
        let procs = processes(g, &mut notes);
        if let Ok(ps) = &procs {
            for p in ps {
                host_procs.entry(p.pid).or_insert_with(|| HostProcessFacts {
                    name: Some(executable_name(&p.name)).filter(|n| !n.is_empty()),
                    cmdline: if p.name.is_empty() {
                        Vec::new()
                    } else {
                        vec![p.name.clone()]
                    },
                    user: None,
                    ppid: None,
                    start_time_s: None,
                    container: None,
                });
            }
        }
        let st = physical_static(g, &migs);
        let dy = physical_dynamic(g, &st, &procs);
        gpu_names.push(
            st.name
                .ok()
                .cloned()
                .unwrap_or_else(|| "unnamed GPU".into()),
        );
        devices.insert(DeviceId::Gpu(index), st);
        dynamics.insert(DeviceId::Gpu(index), dy);
        for m in &migs {
            let id = DeviceId::Mig {
                parent: index,
                index: m.index,
            };
            devices.insert(id, mig_static(m));
            dynamics.insert(id, mig_dynamic(m, &procs));
        }
    }
    let host_frame = HostFrame {
        processes: host_procs
            .keys()
            .map(|&pid| {
                (
                    pid,
                    // nvidia-smi tells nothing about the host side of a process: its CPU,
                    // memory and state are unknown, not zero.
                    HostProcessSample {
                        cpu_percent: None,
                        rss: None,
                        status: None,
                    },
                )
            })
            .collect(),
        ..HostFrame::default()
    };
    let uuids: Vec<String> = devices
        .iter()
        .filter(|(id, _)| !id.is_mig())
        .filter_map(|(_, st)| st.uuid.ok().cloned())
        .collect();
    let cuda_device_order = if uuids.len() == gpus.len() && !gpus.is_empty() {
        Answer::Ok(uuids)
    } else {
        Answer::Err(BackendError::NotSupported)
    };

    let driver = string(log.child("driver_version"));
    let mut description = format!(
        "Imported by `cargo xtask import-smi` from `nvidia-smi -q -x` output: {} GPU(s){}",
        gpus.len(),
        if gpu_names.is_empty() {
            String::new()
        } else {
            format!(" ({})", gpu_names.join(", "))
        }
    );
    if let Ok(d) = &driver {
        description.push_str(&format!(", driver {d}"));
    }
    if let Ok(t) = text(log.child("timestamp")) {
        description.push_str(&format!(
            ", taken {}",
            t.split_whitespace().collect::<Vec<_>>().join(" ")
        ));
    }
    description.push_str(
        ". One frame; what nvidia-smi printed as N/A or did not print answers not_supported; \
         no host facts beyond process names.",
    );
    if let Ok(attached) = integer(log.child("attached_gpus")) {
        if attached as usize != gpus.len() {
            description.push_str(&format!(
                " The dump says attached_gpus = {attached} but holds {} <gpu> element(s) \
                 (trimmed), so device_count is {}.",
                gpus.len(),
                gpus.len()
            ));
        }
    }
    // Without `<reserved>` the dump comes from a driver whose NVML has only the v1 memory call
    // (nvidia-smi printed v1's `used`, which includes the reserved memory).
    let mut missing = Vec::new();
    let memory: Vec<&MemoryInfo> = dynamics
        .values()
        .filter_map(|d| d.memory_info.ok())
        .collect();
    if !memory.is_empty() && memory.iter().all(|m| m.reserved.is_none()) {
        missing.push("nvmlDeviceGetMemoryInfo_v2".to_string());
    }
    for n in &notes {
        description.push_str(&format!(" Note: {n}."));
    }

    Fixture {
        schema_version: SCHEMA_VERSION,
        meta: Meta {
            name: name.to_string(),
            description,
            source: format!(
                "nvidia-smi -q -x dump {file_name} ({})",
                dtd_name(doc.doctype.as_deref())
            ),
            recorded_at: None,
        },
        system: SystemAnswers {
            driver_version: driver.into(),
            nvml_version: string(log.child("nvml_version")).into(),
            cuda_driver_version: cuda_version(log.child("cuda_version")).into(),
            device_count: Answer::Ok(gpus.len() as u32),
            cuda_device_order,
            // nvidia-smi does not show the CUDA runtime libcudart would give.
            cuda_runtime_version: Answer::Err(BackendError::NotRecorded),
            // Nor the vGPU driver's capabilities.
            vgpu_heterogeneous_multi_vgpu: Answer::Err(BackendError::NotRecorded),
        },
        nvml_missing_functions: missing,
        devices,
        host: HostStatic {
            processes: host_procs,
            ..HostStatic::default()
        },
        frames: vec![Frame {
            t_ms: 0,
            devices: dynamics,
            host: host_frame,
        }],
        nvml_costs: None,
    }
}
