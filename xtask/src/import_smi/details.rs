//! The answers of the query table's "beyond the everyday" rows, read from the elements
//! nvidia-smi 575 and newer print them in (`platformInfo`, `gpu_memory_power_readings`,
//! `clocks_event_reasons_counters`, `fabric`, ...). What `-q -x` never prints (the inforom's
//! checksum, the GSP firmware mode, vGPU capabilities, the host name set on a device) is
//! `not_recorded`: the driver may well answer it.

use gpu_backend::error::optional_parts;
use gpu_backend::fixture::{DeviceDynamic, DeviceStatic};
use gpu_backend::{
    AddressingMode, Answer, BackendError, BbxFlush, BridgeChip, CurrentDefault, DeviceAttributes,
    FabricInfo, GpuRecoveryAction, HostVgpuMode, InactiveRemappedRows, PciClass, PerClock,
    PlatformInfo, ProtectedMemory, RepairStatus, RowRemapperHistogram, ScopedPowerLimits,
    SessionStats, SramEccStatus,
};

use super::xml::Element;
use super::{
    at, boolean, bytes, celsius, codec, first, integer, milliwatts, number, pair, per_clock,
    signed_celsius, string, text, to_u64, unreadable, R,
};

/// Not printed by `nvidia-smi -q -x`.
fn not_recorded<T>() -> Answer<T> {
    Answer::Err(BackendError::NotRecorded)
}

/// A label of a code table, or an error naming what was expected.
fn label<T: Copy>(e: Option<&Element>, table: &[(&str, T)], what: &str) -> R<T> {
    let t = text(e)?;
    table
        .iter()
        .find(|(l, _)| l.eq_ignore_ascii_case(t))
        .map(|&(_, v)| v)
        .ok_or_else(|| unreadable(t, what))
}

/// A number in hex, with or without `0x`, as 64 bits.
fn hex64(e: Option<&Element>) -> R<u64> {
    super::hex_as(e, u64::from_str_radix)
}

fn hex32(e: Option<&Element>) -> R<u32> {
    let v = hex64(e)?;
    u32::try_from(v).map_err(|_| unreadable(&v.to_string(), "a 32-bit number"))
}

/// `N us` as nanoseconds (NVML counts the clock-event times in ns; nvidia-smi prints µs).
fn nanoseconds_from_us(e: Option<&Element>) -> R<u64> {
    to_u64(
        number(e, &[("us", 1000.0), ("", 1000.0)], "a time in us")?,
        "ns",
    )
}

fn signed(e: Option<&Element>) -> R<i32> {
    let v = signed_celsius(e)?;
    i32::try_from(v).map_err(|_| unreadable(&v.to_string(), "a temperature"))
}

fn count32(e: Option<&Element>) -> R<u32> {
    integer(e)
}

fn count64(e: Option<&Element>) -> R<u64> {
    super::count(e)
}

/// `3072 bank(s)`.
fn banks(e: Option<&Element>) -> R<u32> {
    let v = number(e, &[("bank(s)", 1.0), ("", 1.0)], "a count of banks")?;
    super::to_u32(v, "banks")
}

/// The platform's place, only when nvidia-smi printed every part: it prints `N/A` for the
/// parts of a GPU outside a chassis although NVML answers them (`--query-gpu` shows what),
/// so a partly printed platform is `not_recorded`.
fn platform_info(g: &Element) -> Answer<PlatformInfo> {
    let p = g.child("platformInfo");
    let parts = (
        string(first(p, &["chassis_serial_number"])),
        count32(first(p, &["slot_number"])),
        count32(first(p, &["tray_index"])),
        count32(first(p, &["host_id"])),
        label(
            first(p, &["peer_type"]),
            &[("Direct Connected", 0)],
            "a peer type",
        ),
        count32(first(p, &["module_id"])),
        hex64(first(p, &["gpu_fabric_guid"])),
    );
    match parts {
        (Ok(serial), Ok(slot), Ok(tray), Ok(host), Ok(peer), Ok(module), Ok(guid)) => {
            let mut bytes = [0u8; 16];
            bytes[..8].copy_from_slice(&guid.to_be_bytes());
            Answer::Ok(PlatformInfo {
                ib_guid: gpu_backend::hex_digits(&bytes),
                chassis_serial_number: serial,
                slot_number: slot,
                tray_index: tray,
                host_id: host,
                peer_type: peer,
                module_id: module,
            })
        }
        (Err(e), Err(_), Err(_), Err(_), Err(_), Err(_), Err(_)) => Answer::Err(e),
        _ => not_recorded(),
    }
}

fn bridge_chips(g: &Element) -> Answer<Vec<BridgeChip>> {
    let b = at(g, &["pci", "pci_bridge_chip"]);
    let kind = label(
        first(b, &["bridge_chip_type"]),
        &[("PLX", 0), ("BR04", 1)],
        "PLX or BR04",
    );
    kind.and_then(|kind| {
        hex32(first(b, &["bridge_chip_fw"])).map(|firmware| vec![BridgeChip { kind, firmware }])
    })
    .into()
}

fn module_power_limits(g: &Element) -> Answer<ScopedPowerLimits> {
    let m = g.child("module_power_readings");
    optional_parts([
        milliwatts(first(m, &["current_power_limit"])),
        milliwatts(first(m, &["requested_power_limit"])),
        milliwatts(first(m, &["default_power_limit"])),
        milliwatts(first(m, &["min_power_limit"])),
        milliwatts(first(m, &["max_power_limit"])),
    ])
    .map(ScopedPowerLimits::from_values)
    .into()
}

/// `N/A` is "not supported"; a printed section's layout is not known, so it is `not_recorded`.
fn power_smoothing(g: &Element) -> Answer<gpu_backend::PowerSmoothing> {
    match g.child("power_smoothing") {
        Some(e) if e.children.is_empty() => match text(Some(e)) {
            Err(err) => Answer::Err(err),
            Ok(_) => not_recorded(),
        },
        Some(_) => not_recorded(),
        None => Answer::Err(BackendError::NotSupported),
    }
}

/// The static answers of the details, over `base` (the everyday ones).
pub(super) fn physical_static(g: &Element, base: DeviceStatic) -> DeviceStatic {
    let temp = g.child("temperature");
    let target = g.child("supported_gpu_target_temp");
    let link = at(g, &["pci", "pci_gpu_link_info", "pcie_gen"]);
    let virt = g.child("gpu_virtualization_mode");
    let policy = g.child("clock_policy");
    let pci = g.child("pci");
    DeviceStatic {
        addressing_mode: label(
            g.child("addressing_mode"),
            &[
                ("None", AddressingMode::None),
                ("HMM", AddressingMode::Hmm),
                ("ATS", AddressingMode::Ats),
            ],
            "None, HMM or ATS",
        )
        .into(),
        accounting_buffer_size: count32(g.child("accounting_mode_buffer_size")).into(),
        inforom_oem_version: string(at(g, &["inforom_version", "oem_object"])).into(),
        inforom_ecc_version: string(at(g, &["inforom_version", "ecc_object"])).into(),
        inforom_power_version: string(at(g, &["inforom_version", "pwr_object"])).into(),
        inforom_valid: not_recorded(),
        pdi: hex64(g.child("pdi")).into(),
        platform_info: platform_info(g),
        c2c_mode: boolean(g.child("c2c_mode")).into(),
        host_vgpu_mode: label(
            first(virt, &["host_vgpu_mode"]),
            &[
                ("Non SR-IOV", HostVgpuMode::NonSriov),
                ("SR-IOV", HostVgpuMode::Sriov),
            ],
            "Non SR-IOV or SR-IOV",
        )
        .into(),
        vgpu_heterogeneous_mode: boolean(first(virt, &["vgpu_heterogeneous_mode"])).into(),
        vgpu_fractional_multi_vgpu: not_recorded(),
        vgpu_heterogeneous_timeslice_profiles: not_recorded(),
        vgpu_heterogeneous_timeslice_sizes: not_recorded(),
        vgpu_homogeneous_placements: not_recorded(),
        vgpu_mig_timeslicing_supported: not_recorded(),
        vgpu_mig_timeslicing_enabled: not_recorded(),
        gsp_firmware_version: string(g.child("gsp_firmware_version")).into(),
        gsp_firmware_mode: not_recorded(),
        pci_class: hex32(first(pci, &["pci_base_class"]))
            .and_then(|base_class| {
                hex32(first(pci, &["pci_sub_class"])).map(|sub_class| PciClass {
                    base_class,
                    sub_class,
                })
            })
            .into(),
        gpu_max_pcie_link_generation: count32(first(link, &["max_device_link_gen"])).into(),
        pcie_atomics_outbound: hex32(first(pci, &["atomic_caps_outbound"])).into(),
        pcie_atomics_inbound: hex32(first(pci, &["atomic_caps_inbound"])).into(),
        bridge_chips: bridge_chips(g),
        // nvidia-smi prints the graphics clock only.
        max_customer_boost_clocks: PerClock {
            sm: not_recorded(),
            memory: not_recorded(),
            video: not_recorded(),
            ..per_clock(g.child("max_customer_boost_clocks"))
        },
        auto_boosted_clocks: boolean(first(policy, &["auto_boost"]))
            .and_then(|current| {
                boolean(first(policy, &["auto_boost_default"]))
                    .map(|default| CurrentDefault { current, default })
            })
            .into(),
        temperature_target_min: celsius(first(target, &["gpu_target_temp_min"])).into(),
        temperature_target: celsius(first(temp, &["gpu_target_temperature"])).into(),
        temperature_target_max: celsius(first(target, &["gpu_target_temp_max"])).into(),
        tlimit_shutdown: signed(first(temp, &["gpu_temp_max_tlimit_threshold"])).into(),
        tlimit_slowdown: signed(first(temp, &["gpu_temp_slow_tlimit_threshold"])).into(),
        tlimit_gpu_max: signed(first(temp, &["gpu_temp_max_gpu_tlimit_threshold"])).into(),
        tlimit_memory_max: signed(first(temp, &["gpu_temp_max_mem_tlimit_threshold"])).into(),
        module_power_limits: module_power_limits(g),
        power_smoothing: power_smoothing(g),
        dram_encryption_mode: pair(
            boolean(at(g, &["dram_encryption_mode", "current_dram_encryption"])),
            boolean(at(g, &["dram_encryption_mode", "pending_dram_encryption"])),
        ),
        capabilities: boolean(at(g, &["capabilities", "egm"]))
            .map(u32::from)
            .into(),
        hostname: not_recorded(),
        device_attributes: not_recorded(),
        ..base
    }
}

/// A MIG device's attributes as nvidia-smi prints them (`device_attributes/shared`); the
/// slices and memory size it does not print are `None`.
pub(super) fn mig_attributes(m: &Element) -> Answer<DeviceAttributes> {
    let s = at(m, &["device_attributes", "shared"]);
    let get = |name: &str| count32(first(s, &[name]));
    (|| {
        Ok(DeviceAttributes {
            multiprocessor_count: get("multiprocessor_count")?,
            shared_copy_engine_count: get("copy_engine_count")?,
            shared_decoder_count: get("decoder_count")?,
            shared_encoder_count: get("encoder_count")?,
            shared_jpeg_count: get("jpg_count")?,
            shared_ofa_count: get("ofa_count")?,
            gpu_instance_slice_count: None,
            compute_instance_slice_count: None,
            memory_size_mib: None,
        })
    })()
    .into()
}

fn sram_ecc_status(e: Option<&Element>) -> R<SramEccStatus> {
    let v = first(e, &["volatile"]);
    let a = first(e, &["aggregate"]);
    let s = first(e, &["aggregate_uncorrectable_sram_sources"]);
    Ok(SramEccStatus {
        aggregate_uncorrectable_parity: count64(first(a, &["sram_uncorrectable_parity"]))?,
        aggregate_uncorrectable_sec_ded: count64(first(a, &["sram_uncorrectable_secded"]))?,
        aggregate_correctable: count64(first(a, &["sram_correctable"]))?,
        volatile_uncorrectable_parity: count64(first(v, &["sram_uncorrectable_parity"]))?,
        volatile_uncorrectable_sec_ded: count64(first(v, &["sram_uncorrectable_secded"]))?,
        volatile_correctable: count64(first(v, &["sram_correctable"]))?,
        aggregate_uncorrectable_l2: count64(first(s, &["sram_l2"]))?,
        aggregate_uncorrectable_sm: count64(first(s, &["sram_sm"]))?,
        aggregate_uncorrectable_pcie: count64(first(s, &["sram_pcie"]))?,
        aggregate_uncorrectable_mcu: count64(first(s, &["sram_microcontroller"]))?,
        aggregate_uncorrectable_other: count64(first(s, &["sram_other"]))?,
        threshold_exceeded: boolean(first(a, &["sram_threshold_exceeded"]))?,
    })
}

/// A fabric health part as nvidia-smi prints it: `N/A` 0 (not supported), `True` 1, `False` 2.
fn health_part(e: Option<&Element>) -> R<u32> {
    match text(e) {
        Err(err) if err.is_not_available() => Ok(0),
        Err(err) => Err(err),
        Ok(t) => match t.to_ascii_lowercase().as_str() {
            "true" | "yes" => Ok(1),
            "false" | "no" => Ok(2),
            _ => Err(unreadable(t, "True, False or N/A")),
        },
    }
}

fn fabric_info(g: &Element) -> Answer<FabricInfo> {
    let f = g.child("fabric");
    let state = label(
        first(f, &["state"]),
        &[("Not Started", 1), ("In Progress", 2), ("Completed", 3)],
        "a fabric state",
    );
    let state = match state {
        Ok(s) => s,
        Err(e) => return Answer::Err(e),
    };
    let h = first(f, &["health"]);
    let parsed = (|| -> R<FabricInfo> {
        let status = match text(first(f, &["status"])) {
            Ok(t) if t.eq_ignore_ascii_case("Success") => 0,
            Ok(t) => return Err(unreadable(t, "Success")),
            // Meaningful only once the registration completed.
            Err(_) => 0,
        };
        let clique_id = count32(first(f, &["cliqueId"])).unwrap_or(0);
        let cluster_uuid = match text(first(f, &["clusterUuid"])) {
            Ok(t) => t.replace('-', "").to_ascii_lowercase(),
            Err(_) => "0".repeat(32),
        };
        if gpu_backend::bytes_of_hex::<16>(&cluster_uuid).is_none() {
            return Err(unreadable(&cluster_uuid, "a UUID"));
        }
        let mask = health_part(first(h, &["bandwidth"]))?
            | health_part(first(h, &["route_recovery_in_progress"]))? << 2
            | health_part(first(h, &["route_unhealthy"]))? << 4
            | health_part(first(h, &["access_timeout_recovery"]))? << 6
            | health_part(first(h, &["partition_assigned"]))? << 12;
        let summary = match text(first(h, &["summary"])) {
            Err(e) if e.is_not_available() => 0,
            Err(e) => return Err(e),
            Ok(t) => label(
                first(h, &["summary"]),
                &[("Healthy", 1), ("Unhealthy", 2), ("Limited Capacity", 3)],
                "a fabric health summary",
            )
            .map_err(|_| unreadable(t, "a fabric health summary"))?,
        };
        Ok(FabricInfo {
            cluster_uuid,
            status,
            clique_id,
            state,
            health_mask: mask,
            health_summary: summary,
        })
    })();
    // A printed part this importer cannot read back into NVML's numbers (the configuration's
    // reasons) leaves the answer unrecorded rather than guessed.
    parsed.map_or_else(|_| not_recorded(), Answer::Ok)
}

/// The changing answers of the details, over `base` (the everyday ones).
pub(super) fn physical_dynamic(g: &Element, base: DeviceDynamic) -> DeviceDynamic {
    let util = g.child("utilization");
    let counters = g.child("clocks_event_reasons_counters");
    let ecc = g.child("ecc_errors");
    let remap = g.child("remapped_rows");
    let histogram = first(remap, &["row_remapper_histogram"]);
    let gpu_power = first(Some(g), &["gpu_power_readings", "power_readings"]);
    let memory_power = g.child("gpu_memory_power_readings");
    let module_power = g.child("module_power_readings");
    let protected = g.child("cc_protected_memory_usage");
    let sessions = |e: Option<&Element>| -> Answer<SessionStats> {
        (|| {
            Ok(SessionStats {
                sessions: count32(first(e, &["session_count"]))?,
                average_fps: count32(first(e, &["average_fps"]))?,
                average_latency_us: count32(first(e, &["average_latency"]))?,
            })
        })()
        .into()
    };
    let counter = |name: &str| nanoseconds_from_us(first(counters, &[name])).into();
    DeviceDynamic {
        gpu_recovery_action: label(
            g.child("gpu_recovery_action"),
            &[
                ("None", GpuRecoveryAction::None),
                ("Reset", GpuRecoveryAction::GpuReset),
                ("Reboot", GpuRecoveryAction::NodeReboot),
                ("Drain P2P", GpuRecoveryAction::DrainP2p),
                ("Drain and Reset", GpuRecoveryAction::DrainAndReset),
            ],
            "a recovery action",
        )
        .into(),
        pcie_replay_rollover_counter: count32(at(g, &["pci", "replay_rollover_counter"])).into(),
        clock_event_time_sw_power_cap: counter("clocks_event_reasons_counters_sw_power_cap"),
        clock_event_time_sync_boost: counter("clocks_event_reasons_counters_sync_boost"),
        clock_event_time_sw_thermal_slowdown: counter(
            "clocks_event_reasons_counters_sw_therm_slowdown",
        ),
        clock_event_time_hw_thermal_slowdown: counter(
            "clocks_event_reasons_counters_hw_therm_slowdown",
        ),
        clock_event_time_hw_power_brake: counter("clocks_event_reasons_counters_hw_power_brake"),
        jpeg_utilization: codec(util, "jpeg_util"),
        ofa_utilization: codec(util, "ofa_util"),
        encoder_stats: sessions(g.child("encoder_stats")),
        fbc_stats: sessions(g.child("fbc_stats")),
        sram_ecc_status: sram_ecc_status(ecc).into(),
        repair_status: boolean(first(ecc, &["channel_repair_pending"]))
            .and_then(|channel| {
                boolean(first(ecc, &["tpc_repair_pending"])).map(|tpc| RepairStatus {
                    channel_repair_pending: channel,
                    tpc_repair_pending: tpc,
                })
            })
            .into(),
        inactive_remapped_rows: count64(first(remap, &["remapped_row_corr_inactive"]))
            .and_then(|correctable| {
                count64(first(remap, &["remapped_row_unc_inactive"])).map(|uncorrectable| {
                    InactiveRemappedRows {
                        correctable,
                        uncorrectable,
                    }
                })
            })
            .into(),
        row_remapper_histogram: (|| {
            Ok(RowRemapperHistogram {
                max: banks(first(histogram, &["row_remapper_histogram_max"]))?,
                high: banks(first(histogram, &["row_remapper_histogram_high"]))?,
                partial: banks(first(histogram, &["row_remapper_histogram_partial"]))?,
                low: banks(first(histogram, &["row_remapper_histogram_low"]))?,
                none: banks(first(histogram, &["row_remapper_histogram_none"]))?,
            })
        })()
        .into(),
        margin_temperature: signed(at(g, &["temperature", "gpu_temp_tlimit"])).into(),
        protected_memory: (|| {
            Ok(ProtectedMemory {
                total: bytes(first(protected, &["total"]))?,
                used: bytes(first(protected, &["used"]))?,
                free: bytes(first(protected, &["free"]))?,
            })
        })()
        .into(),
        fabric_info: fabric_info(g),
        bbx_flush: match text(at(g, &["inforom_bbx_flush", "latest_timestamp"])) {
            Err(e) => Answer::Err(e),
            // Its printed form is not known: not read back.
            Ok(_) => not_recorded::<BbxFlush>(),
        },
        power_average_gpu: milliwatts(first(gpu_power, &["average_power_draw"])).into(),
        power_average_module: milliwatts(first(module_power, &["average_power_draw"])).into(),
        power_average_memory: milliwatts(first(memory_power, &["average_power_draw"])).into(),
        power_instant_gpu: milliwatts(first(gpu_power, &["instant_power_draw"])).into(),
        power_instant_module: milliwatts(first(module_power, &["instant_power_draw"])).into(),
        power_instant_memory: milliwatts(first(memory_power, &["instant_power_draw"])).into(),
        ..base
    }
}
