//! The built shared library, installed as `libnvidia-ml.so.1` and loaded the way real clients
//! load it: with libloading by hand, and through nvml-wrapper (a real NVML client).

#![cfg(target_os = "linux")]

use crate::common;

use std::ffi::{c_char, c_uint, CStr, OsStr};
use std::path::PathBuf;

use libloading::{Library, Symbol};
use nvml_wrapper::Nvml;

use common::*;

fn installed() -> PathBuf {
    let exe = std::env::current_exe().expect("test exe");
    let lib = fake_nvml::find_cdylib(&exe)
        .unwrap_or_else(|| panic!("no {} near {}", fake_nvml::CDYLIB_FILE_NAME, exe.display()));
    let installed = fake_nvml::install_per_process(&lib, &std::env::temp_dir(), "fake-nvml-lib")
        .expect("install");
    assert!(installed.cuda.is_file());
    installed.nvml
}

#[test]
fn the_shared_library_has_the_nvml_soname_and_serves_by_hand() {
    let _guard = lock();
    let so = installed();
    let bytes = std::fs::read(&so).unwrap();
    assert!(
        bytes.windows(17).any(|w| w == b"libnvidia-ml.so.1"),
        "the soname libnvidia-ml.so.1 is recorded in the library"
    );
    let path = write_temp(&fixture(), "by-hand");
    set_env(Some(&path), Some(1));
    unsafe {
        let lib = Library::new(&so).expect("dlopen the installed copy");
        let init: Symbol<unsafe extern "C" fn() -> c_uint> = lib.get(b"nvmlInit_v2").unwrap();
        let shutdown: Symbol<unsafe extern "C" fn() -> c_uint> = lib.get(b"nvmlShutdown").unwrap();
        let count: Symbol<unsafe extern "C" fn(*mut c_uint) -> c_uint> =
            lib.get(b"nvmlDeviceGetCount_v2").unwrap();
        let err: Symbol<unsafe extern "C" fn(c_uint) -> *const c_char> =
            lib.get(b"nvmlErrorString").unwrap();
        let mut n = 0;
        assert_eq!(count(&mut n), 1, "uninitialised before init");
        assert_eq!(init(), 0);
        assert_eq!(count(&mut n), 0);
        assert_eq!(n, 2);
        assert_eq!(
            CStr::from_ptr(err(13)).to_str().unwrap(),
            "Function Not Found"
        );
        assert_eq!(shutdown(), 0);
        // A missing fixture: init fails with a code, the process goes on.
        set_env(None, None);
        assert_eq!(init(), 9);
        assert_eq!(count(&mut n), 1);
    }
}

#[test]
fn nvml_wrapper_reads_the_fixture() {
    let _guard = lock();
    let so = installed();
    let mut f = fixture();
    f.nvml_missing_functions = vec!["nvmlDeviceGetGraphicsRunningProcesses_v3".into()];
    let path = write_temp(&f, "nvml-wrapper");
    set_env(Some(&path), Some(0));
    let nvml = Nvml::builder()
        .lib_path(OsStr::new(&so))
        .init()
        .expect("nvml-wrapper inits over the fake library");
    assert_eq!(nvml.sys_driver_version().unwrap(), "535.54.03");
    assert_eq!(nvml.sys_cuda_driver_version().unwrap(), 12020);
    assert_eq!(nvml.device_count().unwrap(), 2);
    let gpu0 = nvml.device_by_index(0).unwrap();
    assert_eq!(gpu0.name().unwrap(), "NVIDIA A100-SXM4-40GB");
    assert_eq!(gpu0.uuid().unwrap(), UUID0);
    assert_eq!(gpu0.pci_info().unwrap().bus_id, "00000000:18:00.0");
    let mem = gpu0.memory_info().unwrap();
    assert_eq!(mem.used, 2 << 30);
    assert_eq!(mem.reserved, 1 << 29);
    let procs = gpu0.running_compute_processes().unwrap();
    assert_eq!(procs.len(), 2);
    assert_eq!(procs[0].pid, 1000);
    assert_eq!(
        procs[0].used_gpu_memory,
        nvml_wrapper::enums::device::UsedGpuMemory::Used(1 << 30)
    );
    assert_eq!(
        procs[1].used_gpu_memory,
        nvml_wrapper::enums::device::UsedGpuMemory::Unavailable
    );
    assert_eq!(procs[1].gpu_instance_id, Some(1));
    // MIG.
    assert!(gpu0.mig_mode().unwrap().current == 1);
    let mig = gpu0.mig_device_by_index(2).unwrap();
    assert!(mig.mig_is_mig_device_handle().unwrap());
    assert_eq!(mig.uuid().unwrap(), MIG02);
    assert!(matches!(
        gpu0.mig_device_by_index(1),
        Err(nvml_wrapper::error::NvmlError::NotFound)
    ));
    // GPU 1: errors and a missing function.
    let gpu1 = nvml.device_by_index(1).unwrap();
    assert!(matches!(
        gpu1.serial(),
        Err(nvml_wrapper::error::NvmlError::NotSupported)
    ));
    assert!(matches!(
        gpu1.running_graphics_processes(),
        Err(nvml_wrapper::error::NvmlError::FunctionNotFound)
    ));
    assert_eq!(gpu1.fan_speed(1).unwrap(), 31);
    let samples = gpu1.process_utilization_stats(0).unwrap();
    assert_eq!(samples.len(), 2);
    assert_eq!(samples[1].sm_util, 20);
    assert_eq!(gpu1.utilization_rates().unwrap().gpu, 10);
    drop(nvml);
}
