//! gpuscope's own NVML backend (on nvml-wrapper), loaded over the installed library, records
//! back exactly what the fixture holds: system answers, every static answer of every device,
//! and every changing answer in every frame.

#![cfg(target_os = "linux")]

mod common;

use std::ffi::c_uint;

use gpu_backend::recorder::{capture_dynamic, capture_static, capture_system};
use gpu_backend::{all_device_ids, Fixture, GpuBackend, NvmlBackend};
use libloading::{Library, Symbol};

use common::*;

/// The built library, installed once per test process.
fn installed() -> &'static std::path::Path {
    static SO: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    SO.get_or_init(|| {
        let exe = std::env::current_exe().expect("test exe");
        let lib = fake_nvml::find_cdylib(&exe).expect("the built cdylib");
        let dir = std::env::temp_dir().join(format!("fake-nvml-rt-{}", std::process::id()));
        fake_nvml::install(&lib, &dir).expect("install").nvml
    })
}

fn check_round_trip(fixture: &Fixture, tag: &str) {
    let so = installed();
    let path = write_temp(fixture, tag);
    set_env(Some(&path), Some(0));

    let backend = NvmlBackend::with_library(so).expect("the NVML backend inits over fake-nvml");
    // The same file is the same loaded library: step its frames by hand.
    let handle = unsafe { Library::new(so) }.expect("dlopen");
    let set_frame: Symbol<unsafe extern "C" fn(c_uint) -> c_uint> =
        unsafe { handle.get(b"fakeNvmlSetFrame") }.expect("fakeNvmlSetFrame");

    let mut system = capture_system(&backend);
    // The CUDA order comes from libcuda, which the NVML backend does not ask (yet); the CUDA
    // side of this library is tested in abi.rs.
    system.cuda_device_order = fixture.system.cuda_device_order.clone();
    assert_eq!(system, fixture.system, "system answers");
    let mut ids = all_device_ids(&backend).expect("device ids");
    ids.sort();
    assert_eq!(ids, fixture.devices.keys().copied().collect::<Vec<_>>());
    for &id in &ids {
        assert_eq!(
            capture_static(&backend, id),
            fixture.devices[&id],
            "static answers of device {id}"
        );
    }
    for (i, frame) in fixture.frames.iter().enumerate() {
        assert_eq!(unsafe { set_frame(i as c_uint) }, 0);
        for &id in &ids {
            let num_fans = backend.num_fans(id).into();
            assert_eq!(
                capture_dynamic(&backend, id, &num_fans),
                frame.devices[&id],
                "changing answers of device {id} in frame {i}"
            );
        }
    }
    drop(backend);
}

#[test]
fn the_nvml_backend_reads_back_the_fixture() {
    let _guard = lock();
    check_round_trip(&fixture(), "plain");
}

#[test]
fn the_nvml_backend_falls_back_on_an_old_driver() {
    let _guard = lock();
    let mut f = fixture();
    f.nvml_missing_functions = vec![
        "nvmlDeviceGetComputeRunningProcesses_v3".into(),
        "nvmlDeviceGetGraphicsRunningProcesses_v3".into(),
        "nvmlDeviceGetMemoryInfo_v2".into(),
    ];
    // What a driver without the v2 memory call tells: no reserved memory figure.
    for frame in &mut f.frames {
        for dy in frame.devices.values_mut() {
            if let gpu_backend::Answer::Ok(m) = &mut dy.memory_info {
                m.used += m.reserved.take().unwrap_or(0);
            }
        }
    }
    check_round_trip(&f, "old-driver");
}

/// Every scenario in the workspace's fixtures/ (none yet is fine), or in the directory named by
/// `FAKE_NVML_FIXTURES_DIR`.
#[test]
fn the_nvml_backend_reads_back_every_scenario_fixture() {
    let _guard = lock();
    let dir = std::env::var_os("FAKE_NVML_FIXTURES_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures"));
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    let mut paths: Vec<_> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    for path in paths {
        let fixture = Fixture::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let stem = path
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        eprintln!("round trip of {}", path.display());
        check_round_trip(&fixture, &stem);
    }
}
