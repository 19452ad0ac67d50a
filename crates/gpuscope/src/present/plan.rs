//! What a one-shot asks NVML (issue 36): the device queries each printed form reads, as a
//! `gpu_devices::QueryPlan`, so that a command asks no static fact and no reading it does not
//! print. On a real GPU a static fact can cost the driver a millisecond or more a call (each
//! maximum clock, each application clock: docs/benchmarks.md, "Call counts per command").
//!
//! A device's identity (UUID, PCI address, MIG mode and layout) is known whatever the plan: the
//! context reads it when it is made. A field this module does not map asks everything, so that
//! it shows its value whatever its plan.

use gpu_devices::{Query, QueryPlan};

/// The device queries `field` (a `--query-gpu` field's canonical name) reads; `None` for a
/// field this table does not know yet.
pub fn field_queries(field: &str) -> Option<&'static [Query]> {
    use Query as Q;
    match field {
        // The snapshot's own facts: the time, the driver, the GPU's index.
        "timestamp" | "driver_version" | "count" | "index" => Some(&[]),
        // What gpuscope never asks: always [N/A] (docs/smi.md).
        "vgpu_driver_capability.heterogenous_multivGPU" | "pcie.link.gen.hostmax" => Some(&[]),
        // The host name NVML keeps on the device (vGPU hosts), not this machine's.
        "hostname" => Some(&[Q::hostname]),
        "name" => Some(&[Q::name]),
        "serial" => Some(&[Q::serial]),
        "uuid" => Some(&[Q::uuid]),
        "pcie.link.gen.current" | "pcie.link.gen.gpucurrent" => {
            Some(&[Q::current_pcie_link_generation])
        }
        "pcie.link.gen.gpumax" => Some(&[Q::gpu_max_pcie_link_generation]),
        "pcie.link.gen.max" => Some(&[Q::max_pcie_link_generation]),
        "pcie.link.width.current" => Some(&[Q::current_pcie_link_width]),
        "pcie.link.width.max" => Some(&[Q::max_pcie_link_width]),
        "display_mode" | "display_attached" => Some(&[Q::display_mode]),
        "display_active" => Some(&[Q::display_active]),
        "persistence_mode" => Some(&[Q::persistence_mode]),
        "accounting.mode" => Some(&[Q::accounting_mode]),
        "vbios_version" => Some(&[Q::vbios_version]),
        "inforom.img" => Some(&[Q::inforom_image_version]),
        "fan.speed" => Some(&[Q::fan_speed]),
        "pstate" => Some(&[Q::performance_state]),
        "clocks_event_reasons.supported" => Some(&[Q::supported_clock_event_reasons]),
        "compute_mode" => Some(&[Q::compute_mode]),
        "compute_cap" => Some(&[Q::cuda_compute_capability]),
        "utilization.gpu" | "utilization.memory" => Some(&[Q::utilization_rates]),
        "utilization.encoder" => Some(&[Q::encoder_utilization]),
        "utilization.decoder" => Some(&[Q::decoder_utilization]),
        "retired_pages.pending" => Some(&[Q::retired_pages_pending]),
        "temperature.gpu" => Some(&[Q::temperature]),
        "temperature.memory" => Some(&[Q::memory_temperature]),
        "power.management" => Some(&[Q::power_management_mode]),
        "power.draw" => Some(&[Q::power_usage]),
        "power.limit" => Some(&[Q::power_management_limit]),
        "enforced.power.limit" => Some(&[Q::enforced_power_limit]),
        "power.default_limit" => Some(&[Q::power_management_default_limit]),
        "power.min_limit" | "power.max_limit" => Some(&[Q::power_management_limit_constraints]),
        "pcie.replay_counter" => Some(&[Q::pcie_replay_counter]),
        // Families of fields, each named in full: a new field that shares a family's prefix
        // may read something else (nvidia-smi -q's details).
        "pci.bus_id" | "pci.domain" | "pci.bus" | "pci.device" | "pci.device_id"
        | "pci.sub_device_id" => Some(&[Q::pci_info]),
        "driver_model.current" | "driver_model.pending" => Some(&[Q::driver_model]),
        "gom.current" | "gom.pending" => Some(&[Q::gpu_operation_mode]),
        "clocks_event_reasons.active"
        | "clocks_event_reasons.gpu_idle"
        | "clocks_event_reasons.applications_clocks_setting"
        | "clocks_event_reasons.sw_power_cap"
        | "clocks_event_reasons.hw_slowdown"
        | "clocks_event_reasons.hw_thermal_slowdown"
        | "clocks_event_reasons.hw_power_brake_slowdown"
        | "clocks_event_reasons.sw_thermal_slowdown"
        | "clocks_event_reasons.sync_boost" => Some(&[Q::clock_event_reasons]),
        "memory.total" | "memory.reserved" | "memory.used" | "memory.free" => {
            Some(&[Q::memory_info])
        }
        "ecc.mode.current" | "ecc.mode.pending" => Some(&[Q::ecc_mode]),
        "ecc.errors.corrected.volatile.device_memory"
        | "ecc.errors.corrected.volatile.register_file"
        | "ecc.errors.corrected.volatile.l1_cache"
        | "ecc.errors.corrected.volatile.l2_cache"
        | "ecc.errors.corrected.volatile.texture_memory"
        | "ecc.errors.corrected.volatile.cbu"
        | "ecc.errors.corrected.volatile.sram"
        | "ecc.errors.corrected.aggregate.device_memory"
        | "ecc.errors.corrected.aggregate.sram"
        | "ecc.errors.uncorrected.volatile.device_memory"
        | "ecc.errors.uncorrected.volatile.sram"
        | "ecc.errors.uncorrected.aggregate.device_memory"
        | "ecc.errors.uncorrected.aggregate.sram" => Some(&[Q::memory_errors]),
        "ecc.errors.corrected.volatile.total"
        | "ecc.errors.corrected.aggregate.total"
        | "ecc.errors.uncorrected.volatile.total"
        | "ecc.errors.uncorrected.aggregate.total" => Some(&[Q::ecc_errors]),
        "retired_pages.single_bit_ecc.count" | "retired_pages.double_bit.count" => {
            Some(&[Q::retired_pages])
        }
        "remapped_rows.correctable"
        | "remapped_rows.uncorrectable"
        | "remapped_rows.pending"
        | "remapped_rows.failure" => Some(&[Q::remapped_rows]),
        "clocks.current.graphics"
        | "clocks.current.sm"
        | "clocks.current.memory"
        | "clocks.current.video" => Some(&[Q::clock]),
        "clocks.applications.graphics" | "clocks.applications.memory" => {
            Some(&[Q::applications_clock])
        }
        "clocks.default_applications.graphics" | "clocks.default_applications.memory" => {
            Some(&[Q::default_applications_clock])
        }
        "clocks.max.graphics" | "clocks.max.sm" | "clocks.max.memory" => Some(&[Q::max_clock]),
        "mig.mode.current" | "mig.mode.pending" => Some(&[Q::mig_mode]),
        _ => detail_field_queries(field),
    }
}

/// [`field_queries`] of the fields issue 34 added: nvidia-smi -q's details, each a query of
/// its own.
fn detail_field_queries(field: &str) -> Option<&'static [Query]> {
    use Query as Q;
    match field {
        "pci.baseClass" | "pci.subClass" => Some(&[Q::pci_class]),
        "vgpu_device_capability.fractional_multiVgpu"
        | "vgpu_device_capability.heterogeneous_timeSlice_profile"
        | "vgpu_device_capability.heterogeneous_timeSlice_sizes"
        | "vgpu_device_capability.homogeneous_placements"
        | "vgpu_device_capability.mig_timeSlicing"
        | "vgpu_device_capability.mig_timeSlicing_mode" => Some(&[Q::vgpu_capability]),
        "addressing_mode" => Some(&[Q::addressing_mode]),
        "accounting.buffer_size" => Some(&[Q::accounting_buffer_size]),
        "inforom.oem" | "inforom.ecc" | "inforom.pwr" => Some(&[Q::inforom_version]),
        "inforom.checksum_validation" => Some(&[Q::inforom_valid]),
        "gpu_recovery_action" => Some(&[Q::gpu_recovery_action]),
        "clocks_event_reasons_counters.sw_power_cap"
        | "clocks_event_reasons_counters.sync_boost"
        | "clocks_event_reasons_counters.sw_thermal_slowdown"
        | "clocks_event_reasons_counters.hw_thermal_slowdown"
        | "clocks_event_reasons_counters.hw_power_brake_slowdown" => Some(&[Q::clock_event_time]),
        "utilization.jpeg" => Some(&[Q::jpeg_utilization]),
        "utilization.ofa" => Some(&[Q::ofa_utilization]),
        "encoder.stats.sessionCount"
        | "encoder.stats.averageFps"
        | "encoder.stats.averageLatency" => Some(&[Q::encoder_stats]),
        "dramEncryption.mode.current" | "dramEncryption.mode.pending" => {
            Some(&[Q::dram_encryption_mode])
        }
        "ecc.errors.corrected.volatile.dram"
        | "ecc.errors.corrected.aggregate.dram"
        | "ecc.errors.corrected.aggregate.register_file"
        | "ecc.errors.corrected.aggregate.l1_cache"
        | "ecc.errors.corrected.aggregate.l2_cache"
        | "ecc.errors.corrected.aggregate.texture_memory"
        | "ecc.errors.corrected.aggregate.cbu"
        | "ecc.errors.uncorrected.volatile.dram"
        | "ecc.errors.uncorrected.volatile.register_file"
        | "ecc.errors.uncorrected.volatile.l1_cache"
        | "ecc.errors.uncorrected.volatile.l2_cache"
        | "ecc.errors.uncorrected.volatile.texture_memory"
        | "ecc.errors.uncorrected.volatile.cbu"
        | "ecc.errors.uncorrected.aggregate.dram"
        | "ecc.errors.uncorrected.aggregate.register_file"
        | "ecc.errors.uncorrected.aggregate.l1_cache"
        | "ecc.errors.uncorrected.aggregate.l2_cache"
        | "ecc.errors.uncorrected.aggregate.texture_memory"
        | "ecc.errors.uncorrected.aggregate.cbu" => Some(&[Q::memory_errors]),
        "ecc.errors.uncorrected.volatile.sram.parity"
        | "ecc.errors.uncorrected.volatile.sram.secded"
        | "ecc.errors.uncorrected.aggregate.sram.parity"
        | "ecc.errors.uncorrected.aggregate.sram.secded"
        | "ecc.errors.uncorrected.aggregate.sram.thresholdExceeded"
        | "ecc.errors.uncorrected.aggregate.sram.l2"
        | "ecc.errors.uncorrected.aggregate.sram.sm"
        | "ecc.errors.uncorrected.aggregate.sram.mcu"
        | "ecc.errors.uncorrected.aggregate.sram.pcie"
        | "ecc.errors.uncorrected.aggregate.sram.other" => Some(&[Q::sram_ecc_status]),
        "remapped_rows.correctable_inactive" | "remapped_rows.uncorrectable_inactive" => {
            Some(&[Q::inactive_remapped_rows])
        }
        "remapped_rows.histogram.max"
        | "remapped_rows.histogram.high"
        | "remapped_rows.histogram.partial"
        | "remapped_rows.histogram.low"
        | "remapped_rows.histogram.none" => Some(&[Q::row_remapper_histogram]),
        "temperature.gpu.tlimit" => Some(&[Q::margin_temperature]),
        "power.draw.average" | "module.power.draw.average" => Some(&[Q::power_average]),
        "power.draw.instant" | "module.power.draw.instant" => Some(&[Q::power_instant]),
        "module.power.limit"
        | "module.enforced.power.limit"
        | "module.power.default_limit"
        | "module.power.min_limit"
        | "module.power.max_limit" => Some(&[Q::module_power_limits]),
        "power_smoothing.delayed_power_smoothing_supported"
        | "power_smoothing.primary_power_floor"
        | "power_smoothing.secondary_power_floor"
        | "power_smoothing.min_primary_floor_activation_offset"
        | "power_smoothing.min_primary_floor_activation_point"
        | "power_smoothing.window_multiplier"
        | "power_smoothing.curr_profile.secondary_power_floor"
        | "power_smoothing.curr_profile.primary_floor_act_window_multiplier"
        | "power_smoothing.curr_profile.primary_floor_tar_window_multiplier"
        | "power_smoothing.curr_profile.primary_floor_act_offset"
        | "power_smoothing.admin_override.secondary_power_floor"
        | "power_smoothing.admin_override.primary_floor_act_window_multiplier"
        | "power_smoothing.admin_override.primary_floor_tar_window_multiplier"
        | "power_smoothing.admin_override.primary_floor_act_offset" => Some(&[Q::power_smoothing]),
        "gsp.mode.current" | "gsp.mode.default" => Some(&[Q::gsp_firmware_mode]),
        "c2c.mode" => Some(&[Q::c2c_mode]),
        "protected_memory.total" | "protected_memory.used" | "protected_memory.free" => {
            Some(&[Q::protected_memory])
        }
        "fabric.state"
        | "fabric.status"
        | "fabric.cliqueId"
        | "fabric.clusterUuid"
        | "fabric.health.summary"
        | "fabric.health.bandwidth"
        | "fabric.health.route_recovery_in_progress"
        | "fabric.health.route_unhealthy"
        | "fabric.health.access_timeout_recovery"
        | "fabric.health.incorrect_configuration"
        | "fabric.health.partition_assigned" => Some(&[Q::fabric_info]),
        "platform.chassis_serial_number"
        | "platform.slot_number"
        | "platform.tray_index"
        | "platform.host_id"
        | "platform.peer_type"
        | "platform.module_id"
        | "platform.gpu_fabric_guid" => Some(&[Q::platform_info]),
        _ => None,
    }
}

/// What `--query-gpu=FIELDS` (and `snapshot --query FIELDS`) asks: the fields' queries and no
/// other; everything where a name is not a field (the usage error comes from the printing) or a
/// field's queries are not known.
pub fn for_gpu_fields(query: &str) -> QueryPlan {
    let Ok(names) = crate::present::query::gpu_field_names(query) else {
        return QueryPlan::everything();
    };
    let mut asked: Vec<Query> = Vec::new();
    for name in names {
        match field_queries(name) {
            Some(qs) => asked.extend_from_slice(qs),
            None => return QueryPlan::everything(),
        }
    }
    QueryPlan::only(&asked)
}

/// `-L`, `--list-gpus`: each GPU's (and MIG device's) name and UUID.
pub fn list() -> QueryPlan {
    QueryPlan::only(&[Query::name, Query::uuid])
}

/// The static facts no form of `snapshot` shows (its table, `--json`, `--compact`): its JSON
/// document has the identity, the limits, the application clocks (current and default), the
/// modes and the board's
/// facts, not these (`info` and `smi -q` show them).
pub const SNAPSHOT_UNSHOWN_STATICS: &[Query] = &[
    Query::minor_number,
    Query::architecture,
    Query::brand,
    Query::max_clock,
    Query::power_management_mode,
    Query::power_management_limit,
    Query::max_pcie_link_generation,
    Query::max_pcie_link_width,
    Query::pcie_link_max_speed,
    Query::display_mode,
    Query::compute_mode,
    Query::cuda_compute_capability,
    Query::num_gpu_cores,
    Query::driver_model,
    Query::max_mig_device_count,
];

/// The readings the JSON document does not show: NVML's PCIe throughput (its `activity` has
/// GPM's PCIe and NVLink traffic, a different measure), BAR1 and NVLink throughput. PCIe
/// throughput also waits 20 ms in the driver each way.
pub const JSON_UNSHOWN_READINGS: &[Query] = &[
    Query::pcie_throughput,
    Query::bar1_memory_info,
    Query::nvlink_throughput,
];

/// `snapshot --json`: every changing reading the document shows, and the static facts it
/// shows, not the others, nor nvidia-smi -q's details (`gpu_devices::detail_queries`), which
/// it does not show (docs/snapshot.md, "What a snapshot asks").
pub fn snapshot_json() -> QueryPlan {
    QueryPlan::everything()
        .without(SNAPSHOT_UNSHOWN_STATICS)
        .without(&gpu_devices::detail_queries())
        .without(JSON_UNSHOWN_READINGS)
}

/// The readings the table and `--compact` do not show beyond [`JSON_UNSHOWN_READINGS`]: the
/// JSON document's energy and `activity` (GPM).
pub const TABLE_UNSHOWN_READINGS: &[Query] = &[Query::total_energy_consumption, Query::gpm_metrics];

/// `snapshot`'s table and `--compact`: [`snapshot_json`] less [`TABLE_UNSHOWN_READINGS`].
pub fn snapshot_table() -> QueryPlan {
    snapshot_json().without(TABLE_UNSHOWN_READINGS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::present::json::take_with_raw;
    use crate::present::query::{render_as, Format, FIELDS};

    /// Recordings of every kind; frame 24 of the real H200 is the one with nvidia-smi -q's
    /// changing details answered (SRAM ECC, the row-remapper histogram, power averages, ...),
    /// so that their fields' plans are held to their values, not to two `[N/A]`s.
    const FIXTURES: &[(&str, usize)] = &[
        ("h100-real", 30),
        ("h200-real", 0),
        ("h200-real", 24),
        ("h100-mig", 0),
        ("geforce-desktop", 0),
        ("windows-wddm", 0),
        ("old-driver", 0),
        ("gpu-lost", 0),
    ];

    fn collector(
        name: &str,
        frame: usize,
        plan: Option<QueryPlan>,
    ) -> gpu_processes::ProcessCollector {
        let path = format!("{}/../../fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
        let c = gpu_processes::ProcessCollector::from_fixture(path, Some(frame)).unwrap();
        if let Some(plan) = plan {
            c.context().set_query_plan(plan);
        }
        c
    }

    fn csv(name: &str, frame: usize, field: &str, plan: Option<QueryPlan>) -> String {
        render(&collector(name, frame, plan), field)
    }

    /// `field` as `--query-gpu` prints it (CSV) for every device `c` has.
    fn render(c: &gpu_processes::ProcessCollector, field: &str) -> String {
        let devices = c.context().all_devices();
        let (view, snaps) = take_with_raw(c, "test".into(), &devices);
        render_as(
            &view,
            &snaps.devices,
            field,
            Format::default(),
            "--query-gpu",
            "help",
        )
        .unwrap()
    }

    /// Each field asked alone under its plan prints what it prints when everything is asked,
    /// over every kind of recording (MIG, a lost GPU, Windows, an old driver).
    #[test]
    fn a_field_asked_alone_prints_what_it_prints_when_everything_is_asked() {
        for &(fixture, frame) in FIXTURES {
            for f in FIELDS {
                let name = f.canonical();
                if name == "timestamp" {
                    continue;
                }
                // Everything, the queries asked only on request (the inforom's checksum) too.
                let every = gpu_devices::ON_REQUEST_QUERIES
                    .iter()
                    .fold(QueryPlan::everything(), |plan, &q| {
                        plan.with(q, gpu_devices::Cadence::EveryRefresh)
                    });
                let all = csv(fixture, frame, name, Some(every));
                let planned = csv(fixture, frame, name, Some(for_gpu_fields(name)));
                assert_eq!(planned, all, "{fixture}: {name}");
            }
        }
    }

    /// `hostname` is the host name NVML keeps on the device (vGPU hosts), which no recording
    /// has: its plan asked nothing, and so printed `[N/A]` where a device answers one.
    #[test]
    fn the_hostname_field_asks_the_devices_host_name_and_prints_it() {
        let path = format!(
            "{}/../../fixtures/h200-real.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let mut fixture = gpu_backend::Fixture::load(&path).unwrap();
        for device in fixture.devices.values_mut() {
            device.hostname = gpu_backend::Answer::Ok("vgpu-host-7".into());
        }
        let fixture = std::sync::Arc::new(fixture);
        let csv = |plan: Option<QueryPlan>| {
            let backend = gpu_backend::ReplayBackend::new(fixture.clone());
            let c =
                gpu_processes::ProcessCollector::from_replay(std::sync::Arc::new(backend)).unwrap();
            if let Some(plan) = plan {
                c.context().set_query_plan(plan);
            }
            render(&c, "hostname")
        };
        let planned = csv(Some(for_gpu_fields("hostname")));
        assert!(planned.contains("vgpu-host-7"), "{planned}");
        assert_eq!(planned, csv(None));
    }

    /// `snapshot --json` under its plan is the document it is when everything is asked.
    #[test]
    fn the_snapshot_plan_leaves_out_nothing_the_snapshot_shows() {
        for &(fixture, frame) in FIXTURES {
            let json = |plan| {
                let c = collector(fixture, frame, plan);
                let devices = c.context().all_devices();
                let (mut view, _) = take_with_raw(&c, "test".into(), &devices);
                view.time = String::new();
                view.time_unix_ms = 0;
                crate::output::json(&view, true).unwrap()
            };
            assert_eq!(json(Some(snapshot_json())), json(None), "{fixture}");
        }
    }
}
