//! A small fixture built with gpu-backend's types, and the lock that serialises tests that use
//! the library's process-wide state (NVML init and the environment).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use gpu_backend::fixture::{
    Answer, DeviceDynamic, DeviceStatic, EccCounts, Frame, HostFrame, HostStatic, Meta,
    SystemAnswers, SCHEMA_VERSION,
};
use gpu_backend::*;

static LOCK: Mutex<()> = Mutex::new(());

/// The library's settings that tests set in the environment, each under the lock.
const SETTINGS: [&str; 4] = [
    fake_nvml::FIXTURE_ENV,
    fake_nvml::FRAME_ENV,
    fake_nvml::COSTS_ENV,
    fake_nvml::HANG_ENV,
];

/// [`lock`]'s guard. Letting it go unsets the library's settings ([`SETTINGS`]), so that a test
/// that failed half-way leaves none of them to the next.
pub struct Locked(MutexGuard<'static, ()>);

impl Drop for Locked {
    fn drop(&mut self) {
        // Still under the lock: the guard is let go after this.
        for name in SETTINGS {
            std::env::remove_var(name);
        }
    }
}

/// Serialises the tests of this binary that use the library: they share NVML's global state
/// and the environment.
pub fn lock() -> Locked {
    Locked(LOCK.lock().unwrap_or_else(|p| p.into_inner()))
}

pub const UUID0: &str = "GPU-11111111-2222-3333-4444-555555555555";
pub const UUID1: &str = "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";
pub const MIG00: &str = "MIG-00000000-0000-0000-0000-000000000000";
pub const MIG02: &str = "MIG-22222222-0000-0000-0000-000000000000";
/// The MIG devices of GPU 0 whose UUIDs are [`MIG00`] and [`MIG02`].
const MIG00_ID: DeviceId = DeviceId::Mig {
    parent: 0,
    index: 0,
};
const MIG02_ID: DeviceId = DeviceId::Mig {
    parent: 0,
    index: 2,
};

fn ok<T>(v: T) -> Answer<T> {
    Answer::Ok(v)
}

fn ns<T>() -> Answer<T> {
    Answer::Err(BackendError::NotSupported)
}

fn statics(name: &str, uuid: &str, bus: u32) -> DeviceStatic {
    DeviceStatic {
        name: ok(name.into()),
        uuid: ok(uuid.into()),
        serial: ok(format!("13230{bus:05}")),
        pci_info: ok(PciInfo {
            bus_id: format!("00000000:{bus:02X}:00.0"),
            domain: 0,
            bus,
            device: 0,
            pci_device_id: 0x20B0_10DE,
            pci_subsystem_id: 0x1450_10DE,
        }),
        minor_number: ok(bus),
        vbios_version: ok("92.00.36.00.01".into()),
        board_part_number: ok("692-2G506-0200-002".into()),
        inforom_image_version: ok("G506.0200.00.04".into()),
        memory_bus_width: ok(5120),
        supported_clock_event_reasons: ok(0x1ff),
        architecture: ok(Architecture::Ampere),
        brand: ok(Brand::Tesla),
        max_clocks: PerClock::from_fn(|c| ok(1000 + c as u32)),
        num_fans: ok(0),
        temperature_slowdown: ok(89),
        temperature_shutdown: ok(92),
        temperature_gpu_max: ok(87),
        // As nvidia-smi's "Requested functionality has been deprecated".
        temperature_memory_max: Answer::Err(BackendError::Deprecated),
        power_management_mode: ok(true),
        power_management_limit: ok(400_000),
        power_management_default_limit: ok(350_000),
        power_management_limit_constraints: ok(PowerLimits {
            min_mw: 100_000,
            max_mw: 400_000,
        }),
        enforced_power_limit: ok(400_000),
        max_pcie_link_generation: ok(4),
        max_pcie_link_width: ok(16),
        nvlink_state: vec![ok(true), ok(true), Answer::Err(BackendError::NotSupported)],
        display_mode: ok(false),
        display_active: ok(false),
        persistence_mode: ok(true),
        ecc_mode: ok(CurrentPending {
            current: true,
            pending: true,
        }),
        compute_mode: ok(ComputeMode::Default),
        cuda_compute_capability: ok(ComputeCapability { major: 8, minor: 0 }),
        driver_model: ns(),
        mig_mode: ok(CurrentPending {
            current: false,
            pending: false,
        }),
        max_mig_device_count: ok(7),
        mig_device_indices: ok(vec![]),
        gpu_instance_id: Answer::Err(BackendError::InvalidArgument),
        compute_instance_id: Answer::Err(BackendError::InvalidArgument),
        applications_clocks: PerClock::from_fn(|c| match c {
            ClockType::Video => ns(),
            c => ok(900 + c as u32),
        }),
        default_applications_clocks: PerClock::from_fn(|c| match c {
            ClockType::Video => ns(),
            c => ok(800 + c as u32),
        }),
        pcie_link_max_speed: ok(16_000),
        num_gpu_cores: ok(6912),
        board_id: ok(bus << 8),
        multi_gpu_board: ok(false),
        virtualization_mode: ok(VirtualizationMode::PassThrough),
        accounting_mode: ok(true),
        gpu_operation_mode: ok(CurrentPending {
            current: GpuOperationMode::AllOn,
            pending: GpuOperationMode::Compute,
        }),
        temperature_target_min: ok(65),
        temperature_target: ok(83),
        temperature_target_max: Answer::Err(BackendError::NoPermission),
        addressing_mode: ok(AddressingMode::Hmm),
        accounting_buffer_size: ok(4000),
        inforom_oem_version: ok("2.1".into()),
        inforom_ecc_version: ok("6.16".into()),
        inforom_power_version: ns(),
        inforom_valid: ok(bus != 0x3B),
        pdi: ok(0x5e3e_8105_99bc_f001 + u64::from(bus)),
        platform_info: ok(PlatformInfo {
            ib_guid: "00112233445566778899aabbccddeeff".into(),
            chassis_serial_number: "1821923000123".into(),
            slot_number: 3,
            tray_index: 1,
            host_id: 1,
            peer_type: 0,
            module_id: 2,
        }),
        c2c_mode: ok(false),
        host_vgpu_mode: ok(HostVgpuMode::Sriov),
        vgpu_heterogeneous_mode: ok(true),
        vgpu_fractional_multi_vgpu: ok(1),
        vgpu_heterogeneous_timeslice_profiles: ok(0),
        vgpu_heterogeneous_timeslice_sizes: ns(),
        vgpu_homogeneous_placements: ok(1),
        vgpu_mig_timeslicing_supported: ok(0),
        vgpu_mig_timeslicing_enabled: ns(),
        gsp_firmware_version: ok("535.54.03".into()),
        gsp_firmware_mode: ok(CurrentDefault {
            current: true,
            default: false,
        }),
        pci_class: ok(PciClass {
            base_class: 3,
            sub_class: 2,
        }),
        gpu_max_pcie_link_generation: ok(5),
        pcie_atomics_outbound: ok(0x7f),
        pcie_atomics_inbound: ns(),
        bridge_chips: ok(vec![BridgeChip {
            kind: 0,
            firmware: 0x0102_0304,
        }]),
        max_customer_boost_clocks: PerClock::from_fn(|c| match c {
            ClockType::Graphics => ok(1410),
            _ => ns(),
        }),
        auto_boosted_clocks: ok(CurrentDefault {
            current: true,
            default: true,
        }),
        tlimit_shutdown: ok(-8),
        tlimit_slowdown: ok(-2),
        tlimit_gpu_max: ok(0),
        tlimit_memory_max: ns(),
        module_power_limits: ok(ScopedPowerLimits {
            current: Some(900_000),
            requested: Some(900_000),
            default: Some(1_000_000),
            min: None,
            max: Some(1_000_000),
        }),
        power_smoothing: ok(PowerSmoothing {
            delayed_power_smoothing_supported: Some(1),
            primary_power_floor: Some(300),
            window_multiplier: Some(10),
            admin_primary_floor_act_offset: Some(25),
            ..PowerSmoothing::default()
        }),
        dram_encryption_mode: ok(CurrentPending {
            current: false,
            pending: true,
        }),
        capabilities: ok(1),
        hostname: ok(format!("host-{bus}")),
        device_attributes: ok(DeviceAttributes {
            multiprocessor_count: 108,
            shared_copy_engine_count: 7,
            shared_decoder_count: 5,
            shared_encoder_count: 0,
            shared_jpeg_count: 1,
            shared_ofa_count: 1,
            gpu_instance_slice_count: Some(7),
            compute_instance_slice_count: Some(7),
            memory_size_mib: Some(40_536),
        }),
    }
}

fn dynamic(frame: u64, used_gib: u64) -> DeviceDynamic {
    let gib = 1u64 << 30;
    DeviceDynamic {
        memory_info: ok(MemoryInfo {
            total: 40 * gib,
            free: 40 * gib - used_gib * gib - gib / 2,
            used: used_gib * gib,
            reserved: Some(gib / 2),
        }),
        bar1_memory_info: ok(Bar1MemoryInfo {
            total: 64 << 30,
            free: (64 << 30) - (2 << 20),
            used: 2 << 20,
        }),
        utilization_rates: ok(Utilization {
            gpu: 10 + frame as u32 * 40,
            memory: 5 + frame as u32,
        }),
        encoder_utilization: ok(CodecUtilization {
            utilization: 0,
            sampling_period_us: 167_000,
        }),
        decoder_utilization: ok(CodecUtilization {
            utilization: 3,
            sampling_period_us: 167_000,
        }),
        clocks: PerClock::from_fn(|c| ok(500 + c as u32)),
        fan_speed: ns(),
        fan_speeds: vec![],
        fan_target_speeds: vec![],
        temperature: ok(40 + frame as u32),
        memory_temperature: ok(50 + frame as u32),
        power_usage: ok(60_000 + frame as u32 * 100_000),
        total_energy_consumption: ok(1_000_000 + frame * 5_000),
        performance_state: ok(0),
        current_pcie_link_generation: ok(4),
        current_pcie_link_width: ok(16),
        pcie_tx_throughput: ok(1000),
        pcie_rx_throughput: ok(2000),
        nvlink_throughput: vec![
            ok(NvLinkCounters {
                tx_kib: 100 + frame,
                rx_kib: 200 + frame,
            }),
            Answer::Err(BackendError::NotSupported),
        ],
        nvlink_error_counters: vec![
            ok(NvLinkErrorCounters {
                replay: frame,
                recovery: 1,
                crc_flit: 7 + frame,
                crc_data: 0,
            }),
            Answer::Err(BackendError::NotSupported),
        ],
        ecc_errors: EccCounts {
            volatile_corrected: ok(0),
            volatile_uncorrected: ok(0),
            aggregate_corrected: ok(3),
            aggregate_uncorrected: ns(),
        },
        ecc_l1_cache: ns(),
        ecc_l2_cache: ok(LocationEccCounts {
            volatile_corrected: Some(frame),
            volatile_uncorrected: Some(0),
            aggregate_corrected: Some(2),
            aggregate_uncorrected: None,
        }),
        ecc_device_memory: ok(LocationEccCounts {
            volatile_corrected: Some(0),
            volatile_uncorrected: Some(0),
            aggregate_corrected: Some(1),
            aggregate_uncorrected: Some(0),
        }),
        ecc_register_file: ns(),
        ecc_texture_memory: ns(),
        ecc_texture_shm: ns(),
        ecc_cbu: ns(),
        ecc_sram: ok(LocationEccCounts {
            volatile_corrected: Some(3),
            volatile_uncorrected: Some(0),
            aggregate_corrected: Some(3),
            aggregate_uncorrected: Some(0),
        }),
        clock_event_reasons: ok(0x1),
        pcie_replay_counter: ok(2 + frame as u32),
        retired_pages_single_bit: ok(vec![0x1234_5000, 0x0abc_d000]),
        retired_pages_double_bit: ok(vec![]),
        retired_pages_pending: ok(frame == 1),
        remapped_rows: ok(RemappedRows {
            correctable: 1,
            uncorrectable: frame as u32,
            pending: frame == 1,
            failure: false,
        }),
        compute_processes: ok(vec![]),
        graphics_processes: ok(vec![]),
        process_utilization: ok(vec![]),
        // A recording's first refresh has no earlier GPM sample to measure from.
        gpm_metrics: if frame == 0 {
            Answer::Err(BackendError::NoData)
        } else {
            ok(GpmMetrics {
                sm_activity: Some(41.25 + frame as f64),
                sm_occupancy: Some(20.5),
                tensor_activity: Some(12.0),
                tensor_hmma_activity: Some(11.5),
                dram_activity: Some(33.0),
                fp32_activity: Some(7.75),
                pcie_tx: Some(1024.5),
                nvlink_rx: Some(0.0),
                ..GpmMetrics::default()
            })
        },
        events: ns(),
        gpu_recovery_action: ok(if frame == 0 {
            GpuRecoveryAction::None
        } else {
            GpuRecoveryAction::GpuReset
        }),
        pcie_replay_rollover_counter: ok(frame as u32),
        clock_event_time_sw_power_cap: ok(1_500_000 * frame),
        clock_event_time_sync_boost: ok(0),
        clock_event_time_sw_thermal_slowdown: ns(),
        clock_event_time_hw_thermal_slowdown: ok(7),
        clock_event_time_hw_power_brake: ok(0),
        jpeg_utilization: ok(CodecUtilization {
            utilization: 4 + frame as u32,
            sampling_period_us: 100_000,
        }),
        ofa_utilization: ns(),
        encoder_stats: ok(SessionStats {
            sessions: 1,
            average_fps: 30,
            average_latency_us: 1200 + frame as u32,
        }),
        fbc_stats: ok(SessionStats {
            sessions: 0,
            average_fps: 0,
            average_latency_us: 0,
        }),
        sram_ecc_status: ok(SramEccStatus {
            aggregate_uncorrectable_parity: 1,
            aggregate_uncorrectable_sec_ded: 2,
            aggregate_correctable: 3 + frame,
            volatile_uncorrectable_parity: 4,
            volatile_uncorrectable_sec_ded: 5,
            volatile_correctable: 6,
            aggregate_uncorrectable_l2: 7,
            aggregate_uncorrectable_sm: 8,
            aggregate_uncorrectable_pcie: 9,
            aggregate_uncorrectable_mcu: 10,
            aggregate_uncorrectable_other: 11,
            threshold_exceeded: frame == 1,
        }),
        repair_status: ok(RepairStatus {
            channel_repair_pending: false,
            tpc_repair_pending: frame == 1,
        }),
        inactive_remapped_rows: ok(InactiveRemappedRows {
            correctable: 2,
            uncorrectable: frame,
        }),
        row_remapper_histogram: ok(RowRemapperHistogram {
            max: 3072 - frame as u32,
            high: frame as u32,
            partial: 0,
            low: 0,
            none: 0,
        }),
        margin_temperature: ok(37 - frame as i32),
        protected_memory: ok(ProtectedMemory {
            total: 1 << 30,
            used: 1 << 20,
            free: (1 << 30) - (1 << 20),
        }),
        fabric_info: ok(FabricInfo {
            cluster_uuid: "0123456789abcdef0123456789abcdef".into(),
            status: 0,
            clique_id: 32766,
            state: 3,
            health_mask: (2 << 12) | (1 << 8) | (2 << 4),
            health_summary: 1,
        }),
        bbx_flush: ok(BbxFlush {
            timestamp_us: 1_700_000_000_000_000,
            duration_us: 350,
        }),
        power_average_gpu: ok(60_000 + frame as u32 * 100_000),
        power_average_module: ns(),
        power_average_memory: ok(39_040),
        power_instant_gpu: ok(61_000 + frame as u32 * 100_000),
        power_instant_module: ns(),
        power_instant_memory: Answer::Err(BackendError::NotFound),
    }
}

/// Two physical GPUs in two frames (t = 0 and 1000 ms):
///
/// * GPU 0 (A100, bus 0x18) has MIG on, with MIG devices in slots 0 and 2, and a compute
///   process (pid 1000, 1 GiB) on GPU 0 itself plus pid 2000 inside MIG slot 0 (memory N/A).
/// * GPU 1 (RTX 4090, bus 0x3B) has two fans, a graphics process, no serial (not supported),
///   process utilization samples, and is lost in frame 1 (power usage `gpu_lost`).
/// * GPU 0 reports a clock change in frame 0, then XID 79 and a double-bit ECC error in frame 1;
///   GPU 1 reports none; the MIG devices have no events (not supported).
/// * CUDA order is GPU 1 first.
pub fn fixture() -> Fixture {
    let mut devices = BTreeMap::new();
    let mut g0 = statics("NVIDIA A100-SXM4-40GB", UUID0, 0x18);
    g0.mig_mode = ok(CurrentPending {
        current: true,
        pending: true,
    });
    g0.mig_device_indices = ok(vec![0, 2]);
    let mut g1 = statics("NVIDIA GeForce RTX 4090", UUID1, 0x3B);
    g1.serial = ns();
    g1.brand = ok(Brand::GeForceRtx);
    g1.num_fans = ok(2);
    g1.display_active = ok(true);
    let mut m0 = statics("NVIDIA A100-SXM4-40GB MIG 3g.20gb", MIG00, 0x18);
    m0.gpu_instance_id = ok(1);
    m0.compute_instance_id = ok(0);
    let mut m2 = statics("NVIDIA A100-SXM4-40GB MIG 1g.5gb", MIG02, 0x18);
    m2.gpu_instance_id = ok(9);
    m2.compute_instance_id = ok(0);
    devices.insert(DeviceId::Gpu(0), g0);
    devices.insert(DeviceId::Gpu(1), g1);
    devices.insert(MIG00_ID, m0);
    devices.insert(MIG02_ID, m2);

    let frames = (0..2u64)
        .map(|f| {
            let mut d = BTreeMap::new();
            let mut d0 = dynamic(f, 2 + f * 10);
            d0.compute_processes = ok(vec![
                ProcessInfo {
                    pid: 1000,
                    used_gpu_memory: Some(1 << 30),
                    gpu_instance_id: None,
                    compute_instance_id: None,
                },
                ProcessInfo {
                    pid: 2000,
                    used_gpu_memory: None,
                    gpu_instance_id: Some(1),
                    compute_instance_id: Some(0),
                },
            ]);
            let mut d1 = dynamic(f, 1 + f);
            d1.fan_speed = ok(30 + f as u32);
            d1.fan_speeds = vec![ok(30 + f as u32), ok(31 + f as u32)];
            d1.fan_target_speeds = vec![ok(35), ok(40 + f as u32)];
            d1.gpm_metrics = ns();
            d1.graphics_processes = ok(vec![ProcessInfo {
                pid: 3000,
                used_gpu_memory: Some(256 << 20),
                gpu_instance_id: None,
                compute_instance_id: None,
            }]);
            d1.process_utilization = ok(vec![
                ProcessUtilizationSample {
                    pid: 3000,
                    timestamp_us: 1_700_000_000_000_000,
                    sm: 10,
                    memory: 5,
                    encoder: 0,
                    decoder: 0,
                },
                ProcessUtilizationSample {
                    pid: 3000,
                    timestamp_us: 1_700_000_001_000_000,
                    sm: 20 + f as u32,
                    memory: 6,
                    encoder: 1,
                    decoder: 2,
                },
            ]);
            if f == 1 {
                d1.power_usage = Answer::Err(BackendError::GpuLost);
            }
            // GPU 0 reports a clock change in frame 0, and an XID 79 and a double-bit ECC
            // error in frame 1 (each event in the frame it arrived in); GPU 1 has no events.
            d0.events = ok(if f == 0 {
                vec![GpuEvent {
                    timestamp_us: 1_700_000_000_500_000,
                    kind: EventKind::Clock,
                    data: 0,
                }]
            } else {
                vec![
                    GpuEvent {
                        timestamp_us: 1_700_000_001_200_000,
                        kind: EventKind::Xid,
                        data: 79,
                    },
                    GpuEvent {
                        timestamp_us: 1_700_000_001_300_000,
                        kind: EventKind::DoubleBitEcc,
                        data: 0,
                    },
                ]
            });
            d1.events = ok(vec![]);
            let mut dm0 = dynamic(f, 1);
            dm0.compute_processes = ok(vec![ProcessInfo {
                pid: 2000,
                used_gpu_memory: None,
                gpu_instance_id: Some(1),
                compute_instance_id: Some(0),
            }]);
            d.insert(DeviceId::Gpu(0), d0);
            d.insert(DeviceId::Gpu(1), d1);
            d.insert(MIG00_ID, dm0);
            d.insert(MIG02_ID, dynamic(f, 0));
            Frame {
                t_ms: f * 1000,
                devices: d,
                host: HostFrame::default(),
            }
        })
        .collect();

    let fixture = Fixture {
        schema_version: SCHEMA_VERSION,
        meta: Meta {
            name: "fake-nvml-test".into(),
            description: "Two GPUs, MIG on GPU 0, fans and a lost GPU on GPU 1".into(),
            source: "built by crates/fake-nvml/tests/it/common.rs".into(),
            recorded_at: None,
        },
        system: SystemAnswers {
            driver_version: ok("535.54.03".into()),
            nvml_version: ok("12.535.54.03".into()),
            cuda_driver_version: ok(12020),
            device_count: ok(2),
            cuda_device_order: ok(vec![UUID1.into(), UUID0.into()]),
            cuda_runtime_version: Answer::Err(gpu_backend::BackendError::NotRecorded),
            vgpu_heterogeneous_multi_vgpu: ok(false),
        },
        nvml_missing_functions: vec![],
        devices,
        host: HostStatic::default(),
        frames,
        nvml_costs: None,
    };
    fixture
        .validate()
        .unwrap_or_else(|e| panic!("test fixture invalid {e}"));
    fixture
}

/// Writes a fixture to a fresh temporary file and returns its path.
pub fn write_temp(fixture: &Fixture, tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fake-nvml-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create temp dir");
    let path = dir.join(format!("{tag}.json"));
    std::fs::write(&path, fixture.to_json_pretty()).expect("write fixture");
    path
}

/// Points the library at `path` with the frame pinned (or not). Call with the lock held.
pub fn set_env(path: Option<&std::path::Path>, frame: Option<usize>) {
    // The lock serialises every test of this binary that reads the environment.
    match path {
        Some(p) => std::env::set_var(gpu_backend_env::FIXTURE, p),
        None => std::env::remove_var(gpu_backend_env::FIXTURE),
    }
    match frame {
        Some(f) => std::env::set_var(gpu_backend_env::FRAME, f.to_string()),
        None => std::env::remove_var(gpu_backend_env::FRAME),
    }
}

mod gpu_backend_env {
    pub const FIXTURE: &str = "GPUSCOPE_FAKE_NVML_FIXTURE";
    pub const FRAME: &str = "GPUSCOPE_FAKE_NVML_FRAME";
}

/// Fails the test with the first JSON path at which `got` (recorded) differs from `want`.
pub fn assert_same(name: &str, got: &Fixture, want: &Fixture) {
    if let Some(at) = got.first_difference(want) {
        panic!("{name}: recording differs from the fixture at {at}");
    }
}
