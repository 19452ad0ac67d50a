//! CUDA's order asked of a libcuda through the NVML backend: fake-nvml's shared library,
//! installed as `libnvidia-ml.so.1` with `libcuda.so.1` beside it, serving a fixture whose
//! FASTEST_FIRST order differs from NVML's. The test runs in a process of its own, started
//! with the environment that names the fixture: the library reads it there, and so does the
//! libcuda child, which inherits it.

#![cfg(target_os = "linux")]

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use gpu_backend::nvml::libcuda;
use gpu_backend::{Answer, DeviceId, GpuBackend, NvmlBackend};
use gpu_devices::{Context, CudaDeviceOrder, CudaOrderOrigin};

#[test]
fn libcuda_is_asked_in_a_child_and_its_order_wins() {
    let dir = std::env::temp_dir().join(format!("gpu-devices-libcuda-{}", std::process::id()));
    let fixture = dir.join("reversed.json");
    let env = [
        (fake_nvml::FIXTURE_ENV, fixture.as_os_str()),
        // The libcuda child unsets this before cuInit, so libcuda lists every GPU.
        ("CUDA_VISIBLE_DEVICES", "1".as_ref()),
    ];
    common::own_process!(libcuda_is_asked_in_a_child_and_its_order_wins, &env);
    // In the test's own process: the file and directory that its first run named.
    let path = std::path::PathBuf::from(
        std::env::var_os(fake_nvml::FIXTURE_ENV).expect("the fixture's path, in the environment"),
    );
    let dir = path
        .parent()
        .expect("the fixture's directory")
        .to_path_buf();
    let exe = std::env::current_exe().expect("test exe");
    let Some(lib) = fake_nvml::find_cdylib(&exe) else {
        panic!(
            "no {} near {}: cargo builds it as a dev-dependency",
            fake_nvml::CDYLIB_FILE_NAME,
            exe.display()
        );
    };
    let installed = fake_nvml::install(&lib, &dir).expect("install the fake library");

    // The 8-GPU fixture, with CUDA's order reversed.
    let mut f = common::fixture("h100-sxm-8gpu");
    let uuids: Vec<String> = f
        .physical_ids()
        .map(|id| match &f.devices[&id].uuid {
            Answer::Ok(u) => u.clone(),
            Answer::Err(e) => panic!("{e}"),
        })
        .collect();
    let mut reversed = uuids.clone();
    reversed.reverse();
    f.system.cuda_device_order = Answer::Ok(reversed);
    std::fs::write(&path, f.to_json_pretty()).expect("write the fixture");

    let report = libcuda::query(Some(&installed.cuda), Duration::from_secs(20)).expect("query");
    let got: Vec<String> = report
        .devices
        .iter()
        .map(|d| format!("GPU-{}", d.uuid.as_deref().unwrap_or("?")))
        .collect();
    let mut expect = uuids.clone();
    expect.reverse();
    assert_eq!(got, expect);
    assert_eq!(report.driver_version, Some(13010));
    assert!(report.devices.iter().all(|d| d.bus_id.is_some()));
    // This process has no CUDA state and its environment is as it was.
    assert_eq!(std::env::var("CUDA_VISIBLE_DEVICES").as_deref(), Ok("1"));
    assert_eq!(std::env::var_os("CUDA_DEVICE_ORDER"), None);

    // The NVML backend finds the libcuda beside its library and answers with libcuda's order;
    // a context takes it from the backend.
    let backend =
        NvmlBackend::with_library(&installed.nvml).expect("the NVML backend over fake-nvml");
    assert_eq!(backend.cuda_device_order(), Ok(expect.clone()));
    let ctx = Context::from_backend(Arc::new(backend)).unwrap();
    assert_eq!(ctx.cuda_order_origin().origin, CudaOrderOrigin::Backend);
    assert_eq!(
        ctx.cuda_order(CudaDeviceOrder::FastestFirst),
        [7, 6, 5, 4, 3, 2, 1, 0]
    );
    assert_eq!(
        ctx.parse_cuda_visible_devices_with(Some("0"), CudaDeviceOrder::FastestFirst),
        [DeviceId::Gpu(7)]
    );
    let _ = std::fs::remove_dir_all(&dir);
}
