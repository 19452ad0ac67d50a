//! Every getter on every device kind over every fixture, the N/A paths (WDDM, an old driver, a
//! lost GPU), finding devices, and snapshots.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use gpu_backend::{
    BackendError, ComputeCapability, ComputeMode, DeviceId, DriverModel, GpuBackend,
};
use gpu_devices::{Context, Device, DeviceKind, Error, Na, ProcessKind};

use common::*;

#[test]
fn every_device_of_every_fixture_lists_and_prints_every_section() {
    // That a getter and the snapshot agree is by construction now (gpu-devices' model.rs
    // declares each once, and checks its two readings); what is left is the device list and
    // the printed view.
    for stem in all_stems() {
        let (ctx, backend) = open(&stem);
        let last = backend.fixture().frames.len() - 1;
        for frame in [0, last] {
            backend.set_frame(frame);
            let all = ctx.all_devices();
            assert_eq!(
                all.len() as u32,
                ctx.device_count() + ctx.mig_device_count(),
                "{stem}"
            );
            for d in &all {
                let text = d.to_string();
                for section in [
                    "GPU MEMORY:",
                    "GPU UTILIZATION:",
                    "PCI INFO:",
                    "POWER INFO:",
                    "PROCESSES:",
                ] {
                    assert!(
                        text.contains(section),
                        "{stem} {}: {section} in\n{text}",
                        d.id()
                    );
                }
            }
        }
    }
}

#[test]
fn h100_sxm_reads_as_nvitop_would_show_it() {
    let (ctx, backend) = open("h100-sxm-8gpu");
    backend.set_frame(10);
    assert_eq!(ctx.device_count(), 8);
    assert_eq!(ctx.driver_version(), Na::Value("590.48.01".to_string()));
    assert_eq!(ctx.nvml_version(), Na::Value("13.590.48.01".to_string()));
    assert_eq!(ctx.cuda_driver_version(), Na::Value("13.1".to_string()));
    assert_eq!(
        ctx.cuda_runtime_version(),
        Na::NotAvailable,
        "a fixture has none"
    );
    let d = ctx.device(0).unwrap();
    assert_eq!(d.kind(), DeviceKind::Physical);
    assert_eq!(d.name().to_string(), "NVIDIA H100 80GB HBM3");
    assert_eq!(d.memory_total_human().to_string(), "81559MiB");
    assert_eq!(d.memory_percent(), Na::Value(81.3));
    assert_eq!(d.memory_usage(), "66317MiB / 81559MiB");
    assert_eq!(d.bar1_memory_total_human().to_string(), "128.00GiB");
    assert_eq!(d.gpu_utilization(), Na::Value(100));
    assert_eq!(d.memory_utilization(), Na::Value(53));
    assert_eq!(d.encoder_utilization(), Na::Value(0));
    assert_eq!(d.sm_clock(), Na::Value(1830));
    assert_eq!(d.max_sm_clock(), Na::Value(1980));
    assert_eq!(d.fan_speed(), Na::NotAvailable);
    assert_eq!(d.fan_speed().to_string(), "N/A");
    assert_eq!(d.temperature(), Na::Value(62));
    assert_eq!(d.power_status(), "681W / 700W");
    assert_eq!(d.pcie_tx_throughput(), Na::Value(2790));
    assert_eq!(d.pcie_tx_throughput_human().to_string(), "3MiB/s");
    assert_eq!(d.nvlink_link_count(), 18);
    assert_eq!(d.display_active(), Na::Value(false));
    assert_eq!(d.persistence_mode(), Na::Value(true));
    assert_eq!(d.current_driver_model(), Na::NotAvailable, "Linux");
    assert_eq!(d.performance_state(), Na::Value(0));
    assert_eq!(d.total_volatile_uncorrected_ecc_errors(), Na::Value(0));
    assert_eq!(d.compute_mode(), Na::Value(ComputeMode::Default));
    assert_eq!(
        d.cuda_compute_capability(),
        Na::Value(ComputeCapability { major: 9, minor: 0 })
    );
    assert!(!d.is_mig_mode_enabled());
    // MIG off: no MIG slot, as the real H100 answered (fixtures/h100-real.json).
    assert_eq!(d.max_mig_device_count(), 0);
    assert!(d.mig_devices().is_empty());
    assert!(d.is_leaf_device());
    assert_eq!(d.to_leaf_devices(), vec![d.clone()]);
    assert_eq!(d.parent(), None);
    assert_eq!(d.gpu_instance_id(), Na::NotAvailable);
    let procs = d.processes().into_option().unwrap();
    assert_eq!(procs.len(), 9);
    assert!(procs.windows(2).all(|w| w[0].pid < w[1].pid));
    assert!(procs.iter().all(|p| p.kind == ProcessKind::Compute));
    assert_eq!(ctx.leaf_devices().len(), 8);
    assert_eq!(ctx.mig_device_count(), 0);
}

#[test]
fn mig_devices_know_their_parent_and_instances() {
    let (ctx, backend) = open("h100-mig");
    backend.set_frame(20);
    let gpu = ctx.device(0).unwrap();
    assert!(gpu.is_mig_mode_enabled());
    assert!(!gpu.is_leaf_device());
    assert_eq!(gpu.mig_devices().len(), 4);
    assert_eq!(gpu.to_leaf_devices(), ctx.mig_devices());
    assert_eq!(ctx.leaf_devices(), ctx.mig_devices());
    assert_eq!(ctx.mig_device_count(), 4);
    assert_eq!(
        ctx.all_devices().iter().map(Device::id).collect::<Vec<_>>()[..2],
        [
            DeviceId::Gpu(0),
            DeviceId::Mig {
                parent: 0,
                index: 0
            }
        ]
    );
    let mig = ctx.mig_device(0, 1).unwrap();
    assert_eq!(mig.kind(), DeviceKind::Mig);
    assert_eq!(mig.mig_index(), Some(1));
    assert_eq!(mig.physical_index(), 0);
    assert_eq!(mig.parent(), Some(gpu.clone()));
    assert_eq!(gpu.mig_device(1).unwrap(), mig);
    assert_eq!(mig.gpu_instance_id(), Na::Value(3));
    assert_eq!(mig.compute_instance_id(), Na::Value(0));
    assert_eq!(mig.name().to_string(), "NVIDIA H100 80GB HBM3 MIG 2g.20gb");
    assert!(mig.is_leaf_device());
    assert!(mig.mig_devices().is_empty());
    // A MIG device has memory but not the GPU's utilization.
    assert!(mig.memory_total().is_value());
    assert_eq!(mig.gpu_utilization(), Na::NotAvailable);
    match ctx.mig_device(0, 7) {
        Err(Error::NoSuchMigDevice { available, .. }) => assert_eq!(available, [0, 1, 2, 3]),
        other => panic!("{other:?}"),
    }
    assert!(gpu.mig_device(9).is_err());
    // The parent lists the processes of its instances with their GI and CI ids.
    let procs = gpu.processes().into_option().unwrap();
    assert!(!procs.is_empty());
    assert!(procs.iter().all(|p| p.gpu_instance_id.is_value()));
}

#[test]
fn finding_devices_by_index_uuid_and_bus_id() {
    let (ctx, _backend) = open("h100-sxm-8gpu");
    let e = ctx.device(9).unwrap_err();
    assert_eq!(
        e.to_string(),
        "no GPU with index 9: this machine has 8 GPUs (0-7)"
    );
    let full = "GPU-6fbdf76f-8f4c-32b9-db2c-36950d6a1d76";
    assert_eq!(ctx.device_by_uuid(full).unwrap().id(), DeviceId::Gpu(2));
    assert_eq!(
        ctx.device_by_uuid("GPU-6fbdf76f").unwrap().id(),
        DeviceId::Gpu(2)
    );
    assert_eq!(
        ctx.device_by_uuid("6FBDF76F").unwrap().id(),
        DeviceId::Gpu(2)
    );
    // "GPU-6" starts two UUIDs (6fbdf76f and 6e25de40).
    match ctx.device_by_uuid("GPU-6") {
        Err(Error::AmbiguousUuid { matches, .. }) => assert_eq!(matches.len(), 2),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        ctx.device_by_uuid("GPU-ffff"),
        Err(Error::UuidNotFound(_))
    ));
    assert!(ctx.device_by_uuid("").is_err());
    for bus in ["00000000:3A:00.0", "0000:3a:00.0", "3A:00.0"] {
        assert_eq!(
            ctx.device_by_bus_id(bus).unwrap().id(),
            DeviceId::Gpu(2),
            "{bus}"
        );
    }
    assert!(matches!(
        ctx.device_by_bus_id("0000:3B:00.0"),
        Err(Error::BusIdNotFound(_))
    ));
    assert_eq!(
        ctx.devices_from_ids([DeviceId::Gpu(3), DeviceId::Gpu(1)])
            .unwrap()
            .iter()
            .map(Device::id)
            .collect::<Vec<_>>(),
        [DeviceId::Gpu(3), DeviceId::Gpu(1)]
    );
    assert!(ctx
        .device_by_id(DeviceId::Mig {
            parent: 0,
            index: 0
        })
        .is_err());

    let (mig_ctx, _b) = open("h100-mig");
    let by_mig = mig_ctx.device_by_uuid("MIG-3a738fd6").unwrap();
    assert_eq!(
        by_mig.id(),
        DeviceId::Mig {
            parent: 0,
            index: 1
        }
    );
    assert_eq!(
        mig_ctx.device_by_uuid("MIG-GPU-89c882b3/9/0").unwrap().id(),
        DeviceId::Mig {
            parent: 0,
            index: 2
        }
    );
    assert!(mig_ctx.device_by_uuid("MIG-GPU-89c882b3/9/1").is_err());
}

#[test]
fn windows_wddm_process_memory_is_na_and_the_rest_still_comes() {
    let (ctx, _backend) = open("windows-wddm");
    let d = ctx.device(0).unwrap();
    assert_eq!(
        d.driver_model().map(|m| m.current),
        Na::Value(DriverModel::Wddm)
    );
    let procs = d.processes().into_option().unwrap();
    assert!(!procs.is_empty());
    assert!(procs.iter().all(|p| p.used_gpu_memory == Na::NotAvailable));
    assert!(procs.iter().any(|p| p.kind == ProcessKind::ComputeGraphics));
    assert!(d.memory_used().is_value());
    let text = d.to_string();
    assert!(text.contains("| C+G  |        N/A |"), "{text}");
    assert!(d.snapshot().errors.is_empty());
}

#[test]
fn an_old_driver_shows_missing_functions_as_na_not_errors() {
    let (ctx, _backend) = open("old-driver");
    let d = ctx.device(0).unwrap();
    assert_eq!(d.architecture(), Na::NotAvailable);
    assert_eq!(d.mig_mode(), Na::NotAvailable);
    assert_eq!(d.num_fans(), Na::NotAvailable);
    assert!(d.fan_speeds().is_empty());
    assert_eq!(d.max_mig_device_count(), 0);
    assert!(d.is_leaf_device());
    assert_eq!(d.total_energy_consumption(), Na::NotAvailable);
    assert!(d.name().is_value());
    assert!(d.memory_info().is_value());
    assert!(d.processes().is_value());
    let snap = ctx.snapshot_all();
    assert_eq!(
        snap.errors().count(),
        0,
        "{:?}",
        snap.errors().collect::<Vec<_>>()
    );
    // The fixture records no CUDA order: PCI bus order, and why.
    let order = ctx.cuda_order_origin();
    assert_eq!(order.origin, gpu_devices::CudaOrderOrigin::PciBusId);
    assert_eq!(order.passed_over.len(), 1);
}

#[test]
fn a_lost_gpu_fails_while_the_others_still_answer() {
    let (ctx, backend) = open("gpu-lost");
    backend.set_frame(14);
    let lost = ctx.device(2).unwrap();
    assert_eq!(lost.temperature(), Na::Value(53));
    assert!(ctx.snapshot_all().errors().next().is_none());

    for frame in [15, backend.fixture().frames.len() - 1] {
        backend.set_frame(frame);
        assert_eq!(lost.temperature(), Na::Failed(BackendError::GpuLost));
        assert_eq!(lost.temperature().to_string(), "N/A");
        assert_eq!(lost.memory_used().error(), Some(&BackendError::GpuLost));
        assert_eq!(lost.memory_usage(), "N/A / N/A");
        assert_eq!(lost.power_status(), "N/A / 70W");
        assert_eq!(lost.processes(), Na::Failed(BackendError::GpuLost));
        // What does not change was read before the loss.
        assert_eq!(lost.name().to_string(), "Tesla T4");
        for other in [0, 1, 3] {
            let d = ctx.device(other).unwrap();
            assert!(d.temperature().is_value(), "GPU {other} at frame {frame}");
            assert!(d.memory_used().is_value());
            assert!(d.snapshot().errors.is_empty());
        }
        let snap = ctx.snapshot_all();
        assert_eq!(snap.devices.len(), 4);
        let failed: Vec<_> = snap.errors().collect();
        assert!(!failed.is_empty());
        assert!(failed
            .iter()
            .all(|(id, e)| *id == Some(DeviceId::Gpu(2)) && e.error == BackendError::GpuLost));
        assert!(failed.iter().any(|(_, e)| e.field == "memory"));
        assert!(failed.iter().any(|(_, e)| e.field == "clocks.sm"));
        // In JSON the values are null and the failures are listed.
        let json = serde_json::to_value(&snap).unwrap();
        assert!(json["devices"][2]["temperature"].is_null());
        assert_eq!(json["devices"][2]["errors"][0]["error"], "gpu_lost");
        assert!(json["devices"][1]["temperature"].is_u64());
        let text = lost.to_string();
        assert!(text.contains("Temperature : N/A"), "{text}");
    }
}

#[test]
fn a_desktop_geforce_has_fans_a_display_and_graphics_processes() {
    let (ctx, _backend) = open("geforce-desktop");
    let d = ctx.device(0).unwrap();
    assert_eq!(d.num_fans(), Na::Value(1));
    assert_eq!(d.fan_speeds(), [Na::Value(53)]);
    assert_eq!(d.fan_speed().to_string(), "53");
    assert_eq!(d.display_active(), Na::Value(true));
    assert_eq!(d.nvlink_link_count(), 0);
    assert!(d.nvlink_throughput(Duration::ZERO).is_empty());
    let procs = d.processes().into_option().unwrap();
    assert_eq!(
        procs.iter().map(|p| (p.pid, p.kind)).collect::<Vec<_>>(),
        [
            (450, ProcessKind::Graphics),
            (1312, ProcessKind::Graphics),
            (8991, ProcessKind::Compute)
        ]
    );
    let text = d.to_string();
    assert!(
        text.contains("Fan         : [|||||||||||||            ] 53.00%"),
        "{text}"
    );
    assert!(text.contains("BOARD NAME   : GeForce GTX 1080"));
    assert!(
        text.contains("8991     | C    |    2883MiB | N/A | N/A"),
        "{text}"
    );
}

#[test]
fn a_snapshot_asks_each_query_once_per_device() {
    for stem in all_stems() {
        let (ctx, backend) = open(&stem);
        backend.set_frame(3);
        backend.count_calls(true);
        let snap = ctx.snapshot_all();
        let ours = backend.take_call_counts();
        let _ = gpu_backend::recorder::snapshot(&**ctx.backend());
        let raw = backend.take_call_counts();
        assert!(ours.repeated().is_empty(), "{stem}: {:?}", ours.repeated());
        assert_eq!(ours.total(), raw.total(), "{stem}");
        assert_eq!(snap.devices.len(), ctx.all_devices().len(), "{stem}");

        for d in ctx.all_devices() {
            let _ = d.snapshot();
            let counts = backend.take_call_counts();
            assert!(counts.repeated().is_empty(), "{stem} {}", d.id());
            assert!(counts.by_query.keys().all(|k| k.device == Some(d.id())));
        }
    }
}

/// Issue 13: the new health queries and GPM add one question each per device per refresh.
/// GPM's two samples are this refresh's and the previous refresh's, so consecutive refreshes
/// of every device (MIG instances included) each ask `gpm_metrics` once and get the frame's
/// recorded activity; each memory location's ECC counts are asked once.
#[test]
fn health_and_gpm_are_asked_once_per_device_per_refresh() {
    let (ctx, backend) = open("h100-mig");
    backend.count_calls(true);
    let devices = ctx.all_devices();
    assert_eq!(devices.len(), 5);
    for frame in [3, 4, 5] {
        backend.set_frame(frame);
        let snap = ctx.snapshot_all();
        let counts = backend.take_call_counts();
        assert!(counts.repeated().is_empty(), "{:?}", counts.repeated());
        for d in &snap.devices {
            let asked = |query: &str| -> u64 {
                counts
                    .by_query
                    .iter()
                    .filter(|(k, _)| k.query.as_str() == query && k.device == Some(d.id))
                    .map(|(_, n)| n)
                    .sum()
            };
            assert_eq!(asked("gpm_metrics"), 1, "frame {frame} device {}", d.id);
            assert_eq!(asked("memory_temperature"), 1, "frame {frame}");
            assert_eq!(asked("memory_errors"), 8, "one per memory location");
            let recorded = backend.fixture().frames[frame].devices[&d.id]
                .gpm_metrics
                .ok()
                .copied();
            assert!(recorded.is_some());
            assert_eq!(d.gpm.value().copied(), recorded, "frame {frame} {}", d.id);
        }
    }
}

#[test]
fn snapshots_round_trip_through_json() {
    for stem in all_stems() {
        let (ctx, backend) = open(&stem);
        backend.set_frame(backend.fixture().frames.len() - 1);
        let snap = ctx.snapshot_all();
        let json = serde_json::to_string(&snap).unwrap();
        let back: gpu_devices::SystemSnapshot = serde_json::from_str(&json).unwrap();
        // Failures come back as plain N/A values, with the errors list intact.
        assert_eq!(back.devices.len(), snap.devices.len(), "{stem}");
        assert_eq!(back.errors().count(), snap.errors().count(), "{stem}");
        assert_eq!(serde_json::to_string(&back).unwrap(), json, "{stem}");
    }
}

#[test]
fn nvlink_throughput_comes_from_two_frames() {
    let (ctx, backend) = open("h100-sxm-8gpu");
    let d = ctx.device(0).unwrap();
    backend.set_frame(10);
    let before = d.snapshot();
    backend.set_frame(11);
    let after = d.snapshot();
    let dt = Duration::from_millis(
        backend.fixture().frames[11].t_ms - backend.fixture().frames[10].t_ms,
    );
    let rates = after.nvlink_throughput_since(&before, dt);
    assert_eq!(rates.len(), 18);
    // Link 0: 3221048610 - 3210991746 KiB over one second.
    assert_eq!(rates[0].tx, Na::Value(10_056_864));
    assert_eq!(rates[0].rx, Na::Value(3_221_720_257 - 3_211_862_689));
    assert!(rates.iter().all(|r| r.tx.is_value() && r.rx.is_value()));
    let mean = gpu_devices::snapshot::mean_throughput(&rates);
    assert!(mean.tx.is_value());
    assert_eq!(rates[0].tx_human().to_string(), "9821MiB/s");
    // The blocking form over a replay that does not move: every link at 0 KiB/s.
    let still = d.nvlink_throughput(Duration::from_millis(2));
    assert_eq!(still.len(), 18);
    assert!(still.iter().all(|r| r.tx == Na::Value(0)));
    assert_eq!(
        d.nvlink_mean_throughput(Duration::from_millis(1)).rx,
        Na::Value(0)
    );
}

/// nvitop's `nvlink_throughput(interval=None)`: no sleep, measured since the previous call;
/// per direction, mean and human forms of the same measurement.
#[test]
fn nvlink_throughput_without_an_interval_is_measured_since_the_previous_call() {
    let (ctx, backend) = open("h100-sxm-8gpu");
    let d = ctx.device(0).unwrap();
    backend.set_frame(10);
    // The first call has nothing to measure from.
    let first = d.nvlink_throughput(None);
    assert_eq!(first.len(), 18);
    assert!(
        first.iter().all(|r| r.tx.is_na() && r.rx.is_na()),
        "{first:?}"
    );
    let after_first = std::time::Instant::now();
    std::thread::sleep(Duration::from_millis(50));
    backend.set_frame(11);
    let before_second = std::time::Instant::now();
    // Another handle on the same device shares the reading.
    let rates = ctx.device(0).unwrap().nvlink_throughput(None);
    let after_second = std::time::Instant::now();
    // Link 0 sent 10,056,864 KiB between the frames, over an elapsed time that the two calls
    // bracket: at least from the end of the first to the start of the second.
    let delta = 3_221_048_610u64 - 3_210_991_746;
    let shortest = before_second.duration_since(after_first).as_secs_f64();
    let longest = after_second
        .duration_since(after_first - Duration::from_millis(50))
        .as_secs_f64();
    let tx = *rates[0].tx.value().unwrap() as f64;
    assert!(
        tx <= delta as f64 / shortest + 1.0 && tx >= delta as f64 / longest - 1.0,
        "{tx} KiB/s for {delta} KiB in {shortest}..{longest} s"
    );
    // Nothing moves between two calls on the same frame: 0 on every link, and the per-direction,
    // mean and human forms agree.
    assert!(d
        .nvlink_tx_throughput(None)
        .iter()
        .all(|v| *v == Na::Value(0)));
    assert!(d
        .nvlink_rx_throughput(None)
        .iter()
        .all(|v| *v == Na::Value(0)));
    assert_eq!(d.nvlink_mean_tx_throughput(None), Na::Value(0));
    assert_eq!(d.nvlink_mean_rx_throughput(None), Na::Value(0));
    assert_eq!(
        d.nvlink_mean_tx_throughput_human(None),
        Na::Value("0B/s".to_string())
    );
    assert_eq!(d.nvlink_tx_throughput_human(None).len(), 18);
    // A device without NVLink has no links to measure.
    let (ctx, _) = open("geforce-desktop");
    assert!(ctx.device(0).unwrap().nvlink_throughput(None).is_empty());
}

#[test]
fn contexts_open_from_a_fixture_path_and_refuse_a_broken_one() {
    let path = fixtures_dir().join("h100-mig.json");
    let ctx = Context::from_fixture(&path).unwrap();
    assert_eq!(ctx.device_count(), 1);
    assert!(ctx.is_available());
    let e = Context::from_fixture(fixtures_dir().join("no-such-fixture.json")).unwrap_err();
    assert!(matches!(e, Error::Fixture(_)), "{e}");
    assert!(e.to_string().contains("no-such-fixture.json"), "{e}");
}

#[test]
fn a_backend_that_cannot_count_gpus_is_an_error_with_context() {
    let mut mock = gpu_backend::MockGpuBackend::new();
    mock.expect_device_count()
        .returning(|| Err(BackendError::DriverNotLoaded));
    let e = Context::from_backend(Arc::new(mock)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "counting GPUs: the NVIDIA driver is not loaded"
    );
}

#[test]
fn a_mock_backend_shows_na_for_cannot_tell_and_keeps_unexpected_errors() {
    let mut mock = gpu_backend::MockGpuBackend::new();
    mock.expect_device_count().returning(|| Ok(1));
    mock.expect_uuid()
        .returning(|_| Ok("GPU-00000000-0000-0000-0000-000000000001".into()));
    mock.expect_pci_info()
        .returning(|_| Err(BackendError::NotSupported));
    mock.expect_mig_mode()
        .returning(|_| Err(BackendError::NotSupported));
    mock.expect_mig_device_indices()
        .returning(|_| Err(BackendError::NotSupported));
    mock.expect_temperature()
        .times(2)
        .returning(|_| Err(BackendError::Unknown(999)));
    mock.expect_fan_speed()
        .times(1)
        .returning(|_| Err(BackendError::NoPermission));
    mock.expect_power_usage().times(1).returning(|_| Ok(42_500));
    let backend: Arc<dyn GpuBackend> = Arc::new(mock);
    let ctx = Context::from_backend(backend).unwrap();
    let d = ctx.device(0).unwrap();
    assert_eq!(d.temperature(), Na::Failed(BackendError::Unknown(999)));
    assert_eq!(
        d.temperature().into_result(),
        Err(BackendError::Unknown(999))
    );
    assert_eq!(d.fan_speed(), Na::NotAvailable);
    assert_eq!(d.power_usage(), Na::Value(42_500));
    // No PCI info: PCI order puts the GPU last, which is first of one.
    assert_eq!(ctx.cuda_order(gpu_devices::CudaDeviceOrder::PciBusId), [0]);
    assert_eq!(
        ctx.device_by_uuid("GPU-0000").unwrap().id(),
        DeviceId::Gpu(0)
    );
}

/// igpu's power management reads "Supported" or "N/A". Regression: a GPU with power management
/// off read "Disabled", a word igpu never prints.
#[test]
fn power_management_reads_supported_or_na_as_igpu() {
    let mut f = fixture("h100-mig");
    if let Some(d) = f.devices.get_mut(&DeviceId::Gpu(0)) {
        d.power_management_mode = gpu_backend::fixture::Answer::Ok(false);
    }
    let (off, _b) = open_fixture(f);
    let (on, _b2) = open("h100-mig");
    let power = |ctx: &Context, id: DeviceId| {
        ctx.device_by_id(id)
            .unwrap()
            .snapshot()
            .section(gpu_devices::Section::Power)
            .to_string()
    };
    let gpu = power(&on, DeviceId::Gpu(0));
    assert!(gpu.contains("    Management : Supported\n"), "{gpu}");
    let mig = power(
        &on,
        DeviceId::Mig {
            parent: 0,
            index: 1,
        },
    );
    assert!(mig.contains("    Management : N/A\n"), "{mig}");
    let disabled = power(&off, DeviceId::Gpu(0));
    assert!(disabled.contains("    Management : N/A\n"), "{disabled}");
}

/// igpu's PROCESSES section over a device whose compute list cannot be read (no permission)
/// while its graphics list is read and empty. Regression: it said "No running processes".
#[test]
fn a_process_list_that_cannot_be_read_is_na_in_the_processes_section_not_none() {
    let mut f = fixture("geforce-desktop");
    let frame = &mut f.frames[0];
    let d = frame.devices.get_mut(&DeviceId::Gpu(0)).unwrap();
    d.compute_processes = gpu_backend::fixture::Answer::Err(BackendError::NoPermission);
    d.graphics_processes = gpu_backend::fixture::Answer::Ok(Vec::new());
    let (ctx, _b) = open_fixture(f);
    let snap = ctx.device(0).unwrap().snapshot();
    let text = snap.section(gpu_devices::Section::Processes).to_string();
    assert!(!text.contains("No running processes"), "{text}");
    assert!(
        text.contains(&format!(
            "    compute processes: N/A ({})",
            BackendError::NoPermission
        )),
        "{text}"
    );
    let (read, failed) = snap.process_list_outcome();
    assert!(read, "the graphics list was read");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].field, "compute_processes");

    // The same device with both lists read and empty has no running processes.
    let mut f = fixture("geforce-desktop");
    let d = f.frames[0].devices.get_mut(&DeviceId::Gpu(0)).unwrap();
    d.compute_processes = gpu_backend::fixture::Answer::Ok(Vec::new());
    d.graphics_processes = gpu_backend::fixture::Answer::Ok(Vec::new());
    let (ctx, _b) = open_fixture(f);
    let text = ctx
        .device(0)
        .unwrap()
        .snapshot()
        .section(gpu_devices::Section::Processes)
        .to_string();
    assert_eq!(text, "PROCESSES:\n    No running processes\n");
}
