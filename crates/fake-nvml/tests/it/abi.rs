//! The NVML and CUDA entry points, called directly through the rlib over a fixture built here.

use crate::common;

use std::ffi::{c_char, c_int, c_uint, c_ulonglong, CStr};
use std::ptr::{null, null_mut};

use fake_nvml::abi::cuda::*;
use fake_nvml::abi::*;
use fake_nvml::cuda::*;
use fake_nvml::nvml::*;
use gpu_backend::{BackendError, Fixture};

use common::*;

const OK: nvmlReturn_t = ret::SUCCESS;

/// Inits NVML over `fixture` (frame pinned to `frame`), runs `f`, and shuts down.
fn with_nvml(fixture: &Fixture, frame: Option<usize>, f: impl FnOnce()) {
    let _guard = lock();
    let path = write_temp(fixture, &format!("f{}", fixture_tag()));
    set_env(Some(&path), frame);
    assert_eq!(nvmlInit_v2(), OK, "{:?}", fake_nvml::last_init_error());
    f();
    assert_eq!(nvmlShutdown(), OK);
}

fn fixture_tag() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

fn handle(index: u32) -> nvmlDevice_t {
    let mut h = null_mut();
    assert_eq!(unsafe { nvmlDeviceGetHandleByIndex_v2(index, &mut h) }, OK);
    assert!(!h.is_null());
    h
}

/// The return code of a getter with two out-parameters, and the two values it wrote.
fn two_outs<A: Default, B: Default>(
    get: impl FnOnce(&mut A, &mut B) -> nvmlReturn_t,
) -> (nvmlReturn_t, A, B) {
    let (mut a, mut b) = (A::default(), B::default());
    let code = get(&mut a, &mut b);
    (code, a, b)
}

/// The string that `get` writes into a buffer of 96 bytes (it must succeed).
fn string_from(get: impl FnOnce(*mut c_char, c_uint) -> nvmlReturn_t) -> String {
    let mut buf = [0 as c_char; 96];
    assert_eq!(get(buf.as_mut_ptr(), 96), OK);
    unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

fn name_of(h: nvmlDevice_t) -> String {
    string_from(|buf, len| unsafe { nvmlDeviceGetName(h, buf, len) })
}

fn uuid_of(h: nvmlDevice_t) -> String {
    string_from(|buf, len| unsafe { nvmlDeviceGetUUID(h, buf, len) })
}

#[test]
fn init_is_reference_counted_and_calls_before_init_are_refused() {
    let _guard = lock();
    let path = write_temp(&fixture(), "refcount");
    set_env(Some(&path), None);
    let mut n: c_uint = 0;
    assert_eq!(unsafe { nvmlDeviceGetCount_v2(&mut n) }, ret::UNINITIALIZED);
    assert_eq!(nvmlShutdown(), ret::UNINITIALIZED);
    assert_eq!(nvmlInit(), OK);
    assert_eq!(nvmlInitWithFlags(0), OK);
    assert_eq!(unsafe { nvmlDeviceGetCount_v2(&mut n) }, OK);
    assert_eq!(n, 2);
    assert_eq!(nvmlShutdown(), OK);
    // Still initialised once.
    assert_eq!(unsafe { nvmlDeviceGetCount(&mut n) }, OK);
    assert_eq!(nvmlShutdown(), OK);
    assert_eq!(unsafe { nvmlDeviceGetCount_v2(&mut n) }, ret::UNINITIALIZED);
    assert_eq!(nvmlShutdown(), ret::UNINITIALIZED);
}

#[test]
fn a_missing_or_broken_fixture_fails_init_without_a_crash() {
    let _guard = lock();
    set_env(None, None);
    assert_eq!(nvmlInit_v2(), ret::DRIVER_NOT_LOADED);
    let msg = fake_nvml::last_init_error().expect("a message");
    assert!(msg.contains("GPUSCOPE_FAKE_NVML_FIXTURE"), "{msg}");
    let mut n: c_uint = 0;
    assert_eq!(unsafe { nvmlDeviceGetCount_v2(&mut n) }, ret::UNINITIALIZED);

    let missing = std::env::temp_dir().join("fake-nvml-no-such-fixture.json");
    set_env(Some(&missing), None);
    assert_eq!(nvmlInit_v2(), ret::DRIVER_NOT_LOADED);
    let msg = fake_nvml::last_init_error().expect("a message");
    assert!(msg.contains("fake-nvml-no-such-fixture.json"), "{msg}");

    let broken = std::env::temp_dir().join(format!("fake-nvml-broken-{}.json", std::process::id()));
    std::fs::write(&broken, "{\"schema_version\": 1, \"meta\": 3}").unwrap();
    set_env(Some(&broken), None);
    assert_eq!(nvmlInit_v2(), ret::DRIVER_NOT_LOADED);
    let msg = fake_nvml::last_init_error().expect("a message");
    let _ = std::fs::remove_file(&broken);
    assert!(msg.contains("meta"), "{msg}");

    let good = write_temp(&fixture(), "after-broken");
    set_env(Some(&good), Some(0));
    std::env::set_var(fake_nvml::FRAME_ENV, "last");
    assert_eq!(nvmlInit_v2(), ret::DRIVER_NOT_LOADED);
    assert!(fake_nvml::last_init_error()
        .unwrap()
        .contains("GPUSCOPE_FAKE_NVML_FRAME"));

    // And a good fixture after all that works.
    set_env(Some(&good), None);
    assert_eq!(nvmlInit_v2(), OK);
    assert_eq!(fake_nvml::last_init_error(), None);
    assert_eq!(nvmlShutdown(), OK);
}

#[test]
fn system_strings_and_versions() {
    with_nvml(&fixture(), Some(0), || unsafe {
        let mut buf = [0 as c_char; 80];
        assert_eq!(nvmlSystemGetDriverVersion(buf.as_mut_ptr(), 80), OK);
        assert_eq!(CStr::from_ptr(buf.as_ptr()).to_str().unwrap(), "535.54.03");
        assert_eq!(nvmlSystemGetNVMLVersion(buf.as_mut_ptr(), 80), OK);
        assert_eq!(
            CStr::from_ptr(buf.as_ptr()).to_str().unwrap(),
            "12.535.54.03"
        );
        let mut v: c_int = 0;
        assert_eq!(nvmlSystemGetCudaDriverVersion_v2(&mut v), OK);
        assert_eq!(v, 12020);
        assert_eq!(
            nvmlSystemGetCudaDriverVersion(null_mut()),
            ret::INVALID_ARGUMENT
        );
        assert_eq!(
            CStr::from_ptr(nvmlErrorString(ret::INSUFFICIENT_SIZE))
                .to_str()
                .unwrap(),
            "Insufficient Size"
        );
        assert_eq!(
            CStr::from_ptr(nvmlErrorString(12345)).to_str().unwrap(),
            "Unknown Error"
        );
    });
}

#[test]
fn string_getters_honour_the_length() {
    with_nvml(&fixture(), Some(0), || unsafe {
        let h = handle(0);
        let name = "NVIDIA A100-SXM4-40GB";
        let mut buf = [0x55 as c_char; 64];
        // Exactly enough room for the text and its NUL.
        assert_eq!(
            nvmlDeviceGetName(h, buf.as_mut_ptr(), name.len() as c_uint + 1),
            OK
        );
        assert_eq!(CStr::from_ptr(buf.as_ptr()).to_str().unwrap(), name);
        // One byte short: INSUFFICIENT_SIZE, and the buffer still holds a C string.
        let mut buf = [0x55 as c_char; 64];
        assert_eq!(
            nvmlDeviceGetName(h, buf.as_mut_ptr(), name.len() as c_uint),
            ret::INSUFFICIENT_SIZE
        );
        assert_eq!(buf[0], 0);
        assert_eq!(
            nvmlDeviceGetName(h, buf.as_mut_ptr(), 0),
            ret::INSUFFICIENT_SIZE
        );
        assert_eq!(nvmlDeviceGetName(h, null_mut(), 64), ret::INVALID_ARGUMENT);
        let mut small = [0 as c_char; 8];
        assert_eq!(
            nvmlSystemGetDriverVersion(small.as_mut_ptr(), 8),
            ret::INSUFFICIENT_SIZE
        );
        assert_eq!(uuid_of(h), UUID0);
        assert_eq!(name_of(handle(1)), "NVIDIA GeForce RTX 4090");
    });
}

#[test]
fn handles_are_stable_and_unknown_ones_are_refused() {
    with_nvml(&fixture(), Some(0), || unsafe {
        let h0 = handle(0);
        assert_eq!(handle(0), h0);
        let mut h = null_mut();
        assert_eq!(
            nvmlDeviceGetHandleByIndex_v2(2, &mut h),
            ret::INVALID_ARGUMENT
        );
        assert_eq!(
            nvmlDeviceGetHandleByIndex_v2(0, null_mut()),
            ret::INVALID_ARGUMENT
        );
        let mut idx: c_uint = 9;
        assert_eq!(nvmlDeviceGetIndex(handle(1), &mut idx), OK);
        assert_eq!(idx, 1);
        assert_eq!(
            nvmlDeviceGetIndex(null_mut(), &mut idx),
            ret::INVALID_ARGUMENT
        );
        assert_eq!(
            nvmlDeviceGetIndex(0x1234 as nvmlDevice_t, &mut idx),
            ret::INVALID_ARGUMENT
        );
        // By UUID, physical and MIG.
        let uuid = std::ffi::CString::new(UUID1).unwrap();
        assert_eq!(nvmlDeviceGetHandleByUUID(uuid.as_ptr(), &mut h), OK);
        assert_eq!(h, handle(1));
        let mig = std::ffi::CString::new(MIG02).unwrap();
        assert_eq!(nvmlDeviceGetHandleByUUID(mig.as_ptr(), &mut h), OK);
        assert_eq!(name_of(h), "NVIDIA A100-SXM4-40GB MIG 1g.5gb");
        let nope = std::ffi::CString::new("GPU-nope").unwrap();
        assert_eq!(
            nvmlDeviceGetHandleByUUID(nope.as_ptr(), &mut h),
            ret::NOT_FOUND
        );
        assert_eq!(
            nvmlDeviceGetHandleByUUID(null(), &mut h),
            ret::INVALID_ARGUMENT
        );
        // By PCI bus id, in long and short forms.
        for text in ["00000000:3B:00.0", "0000:3b:00.0", "3b:00.0"] {
            let bus = std::ffi::CString::new(text).unwrap();
            h = null_mut();
            assert_eq!(
                nvmlDeviceGetHandleByPciBusId_v2(bus.as_ptr(), &mut h),
                OK,
                "{text}"
            );
            assert_eq!(h, handle(1), "{text}");
        }
        let bus = std::ffi::CString::new("0000:99:00.0").unwrap();
        assert_eq!(
            nvmlDeviceGetHandleByPciBusId_v2(bus.as_ptr(), &mut h),
            ret::NOT_FOUND
        );
    });
}

#[test]
fn pci_info_layout() {
    with_nvml(&fixture(), Some(0), || unsafe {
        let mut pci = nvmlPciInfo_t::default();
        assert_eq!(nvmlDeviceGetPciInfo_v3(handle(1), &mut pci), OK);
        assert_eq!(
            CStr::from_ptr(pci.busId.as_ptr()).to_str().unwrap(),
            "00000000:3B:00.0"
        );
        assert_eq!(
            CStr::from_ptr(pci.busIdLegacy.as_ptr()).to_str().unwrap(),
            "0000:3B:00.0"
        );
        assert_eq!((pci.domain, pci.bus, pci.device), (0, 0x3B, 0));
        assert_eq!(pci.pciDeviceId, 0x20B0_10DE);
        assert_eq!(pci.pciSubSystemId, 0x1450_10DE);
        assert_eq!(
            nvmlDeviceGetPciInfo_v2(handle(1), null_mut()),
            ret::INVALID_ARGUMENT
        );
    });
}

#[test]
fn memory_v1_and_v2_with_the_version_check() {
    with_nvml(&fixture(), Some(0), || unsafe {
        let gib = 1u64 << 30;
        let h = handle(0);
        let mut m2 = nvmlMemory_v2_t {
            version: NVML_MEMORY_V2,
            ..Default::default()
        };
        assert_eq!(nvmlDeviceGetMemoryInfo_v2(h, &mut m2), OK);
        assert_eq!(m2.version, 0x0200_0028);
        assert_eq!(m2.total, 40 * gib);
        assert_eq!(m2.used, 2 * gib);
        assert_eq!(m2.reserved, gib / 2);
        assert_eq!(m2.total, m2.free + m2.used + m2.reserved);
        let mut bad = nvmlMemory_v2_t {
            version: 1,
            ..Default::default()
        };
        assert_eq!(
            nvmlDeviceGetMemoryInfo_v2(h, &mut bad),
            ret::ARGUMENT_VERSION_MISMATCH
        );
        assert_eq!(bad.total, 0);
        let mut m1 = nvmlMemory_t::default();
        assert_eq!(nvmlDeviceGetMemoryInfo(h, &mut m1), OK);
        // v1 "used" includes the reserved memory, as the real v1 call does.
        assert_eq!(m1.total, m1.free + m1.used);
        let mut bar1 = nvmlBAR1Memory_t::default();
        assert_eq!(nvmlDeviceGetBAR1MemoryInfo(h, &mut bar1), OK);
        assert_eq!(bar1.bar1Used, 2 << 20);
    });
}

#[test]
fn process_lists_in_v1_and_v3_layouts_with_the_count_protocol() {
    with_nvml(&fixture(), Some(0), || unsafe {
        let h = handle(0);
        // The v3 compute list into `buf` of room for `room`: the return code and the count.
        let compute_v3 = |room: c_uint, buf: *mut nvmlProcessInfo_t| {
            let mut count = room;
            let code = nvmlDeviceGetComputeRunningProcesses_v3(h, &mut count, buf);
            (code, count)
        };
        // Count query: NULL buffer.
        assert_eq!(compute_v3(0, null_mut()), (ret::INSUFFICIENT_SIZE, 2));
        // Too small.
        let mut one = [nvmlProcessInfo_t::default(); 1];
        assert_eq!(compute_v3(1, one.as_mut_ptr()), (ret::INSUFFICIENT_SIZE, 2));
        // Room to spare, as nvml-wrapper and pynvml ask.
        let mut v3 = [nvmlProcessInfo_t::default(); 7];
        assert_eq!(compute_v3(7, v3.as_mut_ptr()), (OK, 2));
        let mut count: c_uint;
        assert_eq!(
            v3[0],
            nvmlProcessInfo_t {
                pid: 1000,
                usedGpuMemory: 1 << 30,
                gpuInstanceId: 0xFFFF_FFFF,
                computeInstanceId: 0xFFFF_FFFF,
            }
        );
        assert_eq!(
            v3[1],
            nvmlProcessInfo_t {
                pid: 2000,
                usedGpuMemory: u64::MAX,
                gpuInstanceId: 1,
                computeInstanceId: 0,
            }
        );
        // v1: 16-byte entries.
        let mut v1 = [nvmlProcessInfo_v1_t::default(); 4];
        count = 4;
        assert_eq!(
            nvmlDeviceGetComputeRunningProcesses(h, &mut count, v1.as_mut_ptr()),
            OK
        );
        assert_eq!(count, 2);
        assert_eq!(v1[0].pid, 1000);
        assert_eq!(v1[1].pid, 2000);
        assert_eq!(v1[1].usedGpuMemory, NVML_VALUE_NOT_AVAILABLE_ULL);
        // An empty list: success with a count of 0, even with no buffer.
        count = 0;
        assert_eq!(
            nvmlDeviceGetGraphicsRunningProcesses_v3(h, &mut count, null_mut()),
            OK
        );
        assert_eq!(count, 0);
        // Graphics on GPU 1, via _v2.
        let mut v2 = [nvmlProcessInfo_t::default(); 2];
        count = 2;
        assert_eq!(
            nvmlDeviceGetGraphicsRunningProcesses_v2(handle(1), &mut count, v2.as_mut_ptr()),
            OK
        );
        assert_eq!(
            (count, v2[0].pid, v2[0].usedGpuMemory),
            (1, 3000, 256 << 20)
        );
        assert_eq!(
            nvmlDeviceGetComputeRunningProcesses_v3(h, null_mut(), null_mut()),
            ret::INVALID_ARGUMENT
        );
    });
}

#[test]
fn process_utilization_filters_by_timestamp() {
    with_nvml(&fixture(), Some(0), || unsafe {
        let h = handle(1);
        let mut count: c_uint = 0;
        assert_eq!(
            nvmlDeviceGetProcessUtilization(h, null_mut(), &mut count, 0),
            ret::INSUFFICIENT_SIZE
        );
        assert_eq!(count, 2);
        let mut samples = [nvmlProcessUtilizationSample_t::default(); 2];
        assert_eq!(
            nvmlDeviceGetProcessUtilization(h, samples.as_mut_ptr(), &mut count, 0),
            OK
        );
        assert_eq!(samples[1].smUtil, 20);
        assert_eq!(samples[1].decUtil, 2);
        // The timestamps are on the replay's clock, a second apart as recorded: asking for
        // those newer than the first gives the second.
        let (first, second) = (samples[0].timeStamp, samples[1].timeStamp);
        assert_eq!(second - first, 1_000_000);
        count = 2;
        assert_eq!(
            nvmlDeviceGetProcessUtilization(h, samples.as_mut_ptr(), &mut count, first),
            OK
        );
        assert_eq!(count, 1);
        assert_eq!(samples[0].timeStamp, second);
        assert_eq!(
            nvmlDeviceGetProcessUtilization(h, null_mut(), &mut count, u64::MAX - 1),
            ret::NOT_FOUND
        );
        // GPU 0 has no samples at all.
        assert_eq!(
            nvmlDeviceGetProcessUtilization(handle(0), null_mut(), &mut count, 0),
            ret::NOT_FOUND
        );
    });
}

#[test]
fn recorded_errors_come_back_as_their_codes() {
    let mut f = fixture();
    f.devices
        .get_mut(&gpu_backend::DeviceId::Gpu(0))
        .unwrap()
        .vbios_version = gpu_backend::Answer::Err(BackendError::NoPermission);
    f.devices
        .get_mut(&gpu_backend::DeviceId::Gpu(0))
        .unwrap()
        .board_part_number = gpu_backend::Answer::Err(BackendError::Unknown(17));
    with_nvml(&f, Some(1), || unsafe {
        let mut buf = [0 as c_char; 64];
        assert_eq!(
            nvmlDeviceGetSerial(handle(1), buf.as_mut_ptr(), 64),
            ret::NOT_SUPPORTED
        );
        assert_eq!(
            nvmlDeviceGetVbiosVersion(handle(0), buf.as_mut_ptr(), 64),
            ret::NO_PERMISSION
        );
        assert_eq!(
            nvmlDeviceGetBoardPartNumber(handle(0), buf.as_mut_ptr(), 64),
            17
        );
        let mut mw: c_uint = 0;
        assert_eq!(
            nvmlDeviceGetPowerUsage(handle(1), &mut mw),
            ret::GPU_IS_LOST
        );
        assert_eq!(nvmlDeviceGetPowerUsage(handle(0), &mut mw), OK);
        assert_eq!(mw, 160_000);
        let mut fan: c_uint = 0;
        assert_eq!(
            nvmlDeviceGetFanSpeed(handle(0), &mut fan),
            ret::NOT_SUPPORTED
        );
        assert_eq!(nvmlDeviceGetFanSpeed_v2(handle(1), 1, &mut fan), OK);
        assert_eq!(fan, 32);
        assert_eq!(
            nvmlDeviceGetFanSpeed_v2(handle(1), 2, &mut fan),
            ret::INVALID_ARGUMENT
        );
        let mut ecc: c_ulonglong = 0;
        assert_eq!(nvmlDeviceGetTotalEccErrors(handle(0), 0, 1, &mut ecc), OK);
        assert_eq!(ecc, 3);
        assert_eq!(
            nvmlDeviceGetTotalEccErrors(handle(0), 1, 1, &mut ecc),
            ret::NOT_SUPPORTED
        );
        let (mut cur, mut pend) = (9, 9);
        assert_eq!(
            nvmlDeviceGetDriverModel(handle(0), &mut cur, &mut pend),
            ret::NOT_SUPPORTED
        );
    });
}

#[test]
fn missing_functions_answer_function_not_found() {
    let mut f = fixture();
    f.nvml_missing_functions = vec![
        "nvmlDeviceGetComputeRunningProcesses_v3".into(),
        "nvmlDeviceGetMemoryInfo_v2".into(),
    ];
    with_nvml(&f, Some(0), || unsafe {
        let h = handle(0);
        let mut count: c_uint = 0;
        assert_eq!(
            nvmlDeviceGetComputeRunningProcesses_v3(h, &mut count, null_mut()),
            ret::FUNCTION_NOT_FOUND
        );
        assert_eq!(
            nvmlDeviceGetComputeRunningProcesses_v2(h, &mut count, null_mut()),
            ret::INSUFFICIENT_SIZE
        );
        let mut m2 = nvmlMemory_v2_t {
            version: NVML_MEMORY_V2,
            ..Default::default()
        };
        assert_eq!(
            nvmlDeviceGetMemoryInfo_v2(h, &mut m2),
            ret::FUNCTION_NOT_FOUND
        );
        let mut m1 = nvmlMemory_t::default();
        assert_eq!(nvmlDeviceGetMemoryInfo(h, &mut m1), OK);
    });
}

#[test]
fn mig_handles_round_trip() {
    with_nvml(&fixture(), Some(0), || unsafe {
        let g0 = handle(0);
        // Each of these: NVML's return code for a handle, and what it wrote (9, a null handle
        // or 0 where it wrote nothing: never the value expected).
        let is_mig = |h| {
            let mut is_mig: c_uint = 9;
            (nvmlDeviceIsMigDeviceHandle(h, &mut is_mig), is_mig)
        };
        let parent_of = |h| {
            let mut parent = null_mut();
            (
                nvmlDeviceGetDeviceHandleFromMigDeviceHandle(h, &mut parent),
                parent,
            )
        };
        let gpu_instance = |h| {
            let mut gi: c_uint = 0;
            (nvmlDeviceGetGpuInstanceId(h, &mut gi), gi)
        };
        let (mut cur, mut pend) = (9, 9);
        assert_eq!(nvmlDeviceGetMigMode(g0, &mut cur, &mut pend), OK);
        assert_eq!((cur, pend), (1, 1));
        let mut max: c_uint = 0;
        assert_eq!(nvmlDeviceGetMaxMigDeviceCount(g0, &mut max), OK);
        assert_eq!(max, 7);
        let mut found = vec![];
        for i in 0..max {
            let mut m = null_mut();
            match nvmlDeviceGetMigDeviceHandleByIndex(g0, i, &mut m) {
                OK => found.push((i, m)),
                code => assert_eq!(code, ret::NOT_FOUND, "slot {i}"),
            }
        }
        assert_eq!(
            found.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
            vec![0, 2]
        );
        let mut m = null_mut();
        assert_eq!(
            nvmlDeviceGetMigDeviceHandleByIndex(g0, 7, &mut m),
            ret::INVALID_ARGUMENT
        );
        for (slot, mig) in found {
            assert!(!mig.is_null() && mig != g0);
            assert_eq!(is_mig(mig), (OK, 1));
            assert_eq!(parent_of(mig), (OK, g0));
            assert_eq!(gpu_instance(mig), (OK, if slot == 0 { 1 } else { 9 }));
            // The same handle comes back by UUID.
            let uuid = std::ffi::CString::new(uuid_of(mig)).unwrap();
            let mut again = null_mut();
            assert_eq!(nvmlDeviceGetHandleByUUID(uuid.as_ptr(), &mut again), OK);
            assert_eq!(again, mig);
            // A MIG device cannot hold MIG devices.
            assert_eq!(
                nvmlDeviceGetMigDeviceHandleByIndex(mig, 0, &mut m),
                ret::INVALID_ARGUMENT
            );
        }
        assert_eq!(is_mig(g0), (OK, 0));
        assert_eq!(parent_of(g0).0, ret::INVALID_ARGUMENT);
        // As the fixture records it, and as a real H100 answers for its own handle.
        assert_eq!(gpu_instance(g0).0, ret::INVALID_ARGUMENT);
        // GPU 1 has MIG off and no slots.
        assert_eq!(
            nvmlDeviceGetMigDeviceHandleByIndex(handle(1), 0, &mut m),
            ret::NOT_FOUND
        );
    });
}

#[test]
fn set_frame_changes_dynamic_values_only() {
    with_nvml(&fixture(), None, || unsafe {
        let h = handle(0);
        let mut frames: c_uint = 0;
        assert_eq!(fakeNvmlGetFrameCount(&mut frames), OK);
        assert_eq!(frames, 2);
        assert_eq!(fakeNvmlSetFrame(0), OK);
        let mut u = nvmlUtilization_t::default();
        assert_eq!(nvmlDeviceGetUtilizationRates(h, &mut u), OK);
        assert_eq!(u, nvmlUtilization_t { gpu: 10, memory: 5 });
        let mut t: c_uint = 0;
        assert_eq!(nvmlDeviceGetTemperature(h, 0, &mut t), OK);
        assert_eq!(t, 40);
        assert_eq!(fakeNvmlSetFrame(1), OK);
        let mut now: c_uint = 9;
        assert_eq!(fakeNvmlGetFrame(&mut now), OK);
        assert_eq!(now, 1);
        assert_eq!(nvmlDeviceGetUtilizationRates(h, &mut u), OK);
        assert_eq!(u, nvmlUtilization_t { gpu: 50, memory: 6 });
        assert_eq!(nvmlDeviceGetTemperature(h, 0, &mut t), OK);
        assert_eq!(t, 41);
        assert_eq!(
            nvmlDeviceGetTemperature(h, 1, &mut t),
            ret::INVALID_ARGUMENT
        );
        assert_eq!(name_of(h), "NVIDIA A100-SXM4-40GB");
        // Past the end: clamped to the last frame.
        assert_eq!(fakeNvmlSetFrame(99), OK);
        assert_eq!(fakeNvmlGetFrame(&mut now), OK);
        assert_eq!(now, 1);
    });
    // The frame pinned by the environment.
    with_nvml(&fixture(), Some(1), || unsafe {
        let mut now: c_uint = 9;
        assert_eq!(fakeNvmlGetFrame(&mut now), OK);
        assert_eq!(now, 1);
    });
}

#[test]
fn the_other_readings() {
    with_nvml(&fixture(), Some(0), || unsafe {
        let h = handle(0);
        let mut v: c_uint = 0;
        assert_eq!(nvmlDeviceGetClockInfo(h, 2, &mut v), OK);
        assert_eq!(v, 502);
        assert_eq!(nvmlDeviceGetMaxClockInfo(h, 3, &mut v), OK);
        assert_eq!(v, 1003);
        assert_eq!(
            nvmlDeviceGetMaxClockInfo(h, 4, &mut v),
            ret::INVALID_ARGUMENT
        );
        assert_eq!(nvmlDeviceGetTemperatureThreshold(h, 1, &mut v), OK);
        assert_eq!(v, 89);
        assert_eq!(nvmlDeviceGetTemperatureThreshold(h, 0, &mut v), OK);
        assert_eq!(v, 92);
        assert_eq!(nvmlDeviceGetArchitecture(h, &mut v), OK);
        assert_eq!(v, 7);
        assert_eq!(nvmlDeviceGetBrand(handle(1), &mut v), OK);
        assert_eq!(v, 15);
        assert_eq!(nvmlDeviceGetPcieThroughput(h, 1, &mut v), OK);
        assert_eq!(v, 2000);
        assert_eq!(nvmlDeviceGetDisplayActive(handle(1), &mut v), OK);
        assert_eq!(v, 1);
        assert_eq!(
            two_outs(|lo, hi| nvmlDeviceGetPowerManagementLimitConstraints(h, lo, hi)),
            (OK, 100_000, 400_000)
        );
        // Exported from the query table's row, as every plain value is.
        assert_eq!(nvmlDeviceGetPowerManagementDefaultLimit(h, &mut v), OK);
        assert_eq!(v, 350_000);
        assert_eq!(
            two_outs(|major, minor| nvmlDeviceGetCudaComputeCapability(h, major, minor)),
            (OK, 8, 0)
        );
        let mut reasons: c_ulonglong = 0;
        assert_eq!(nvmlDeviceGetCurrentClocksEventReasons(h, &mut reasons), OK);
        assert_eq!(reasons, 1);
        assert_eq!(
            nvmlDeviceGetCurrentClocksThrottleReasons(h, &mut reasons),
            OK
        );
        let mut energy: c_ulonglong = 0;
        assert_eq!(nvmlDeviceGetTotalEnergyConsumption(h, &mut energy), OK);
        assert_eq!(energy, 1_000_000);
        assert_eq!(
            two_outs(|util, period| nvmlDeviceGetDecoderUtilization(h, util, period)),
            (OK, 3, 167_000)
        );
        // NVLink: links 0 and 1 active, every later one not supported.
        for (link, want) in [
            (0, OK),
            (1, OK),
            (2, ret::NOT_SUPPORTED),
            (17, ret::NOT_SUPPORTED),
        ] {
            assert_eq!(
                nvmlDeviceGetNvLinkState(h, link, &mut v),
                want,
                "link {link}"
            );
        }
        assert_eq!(
            nvmlDeviceGetNvLinkState(h, 18, &mut v),
            ret::INVALID_ARGUMENT
        );
        let mut fields = [nvmlFieldValue_t::default(); 4];
        fields[0].fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX;
        fields[0].scopeId = 0;
        fields[1].fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX;
        fields[1].scopeId = 0;
        fields[2].fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX;
        fields[2].scopeId = 5;
        fields[3].fieldId = 1; // NVML_FI_DEV_ECC_CURRENT
        assert_eq!(nvmlDeviceGetFieldValues(h, 4, fields.as_mut_ptr()), OK);
        assert_eq!(fields[0].nvmlReturn, OK);
        assert_eq!(fields[0].valueType, NVML_VALUE_TYPE_UNSIGNED_LONG_LONG);
        assert_eq!(fields[0].value.ullVal, 100);
        assert_eq!(fields[1].value.ullVal, 200);
        assert_eq!(fields[2].nvmlReturn, ret::NOT_SUPPORTED);
        assert_eq!(fields[3].nvmlReturn, ret::NOT_SUPPORTED);
        assert_eq!(
            nvmlDeviceGetFieldValues(h, -1, fields.as_mut_ptr()),
            ret::INVALID_ARGUMENT
        );
    });
}

#[test]
fn cuda_calls_follow_the_cuda_order_and_visible_devices() {
    let _guard = lock();
    let path = write_temp(&fixture(), "cuda");
    set_env(Some(&path), None);
    // Ordering of CUDA state is process-wide and fixed at the first cuInit; this is the only
    // test of this binary that checks it (another one only checks that cuInit succeeds).
    std::env::remove_var("CUDA_VISIBLE_DEVICES");
    unsafe {
        let mut v: c_int = 0;
        assert_eq!(cuDriverGetVersion(&mut v), CUDA_SUCCESS);
        assert_eq!(v, 12020);
        assert_eq!(cuInit(1), CUDA_ERROR_INVALID_VALUE);
        assert_eq!(cuInit(0), CUDA_SUCCESS);
        let mut n: c_int = 0;
        assert_eq!(cuDeviceGetCount(&mut n), CUDA_SUCCESS);
        assert_eq!(n, 2);
        let mut d: CUdevice = -1;
        assert_eq!(cuDeviceGet(&mut d, 0), CUDA_SUCCESS);
        assert_eq!(d, 0);
        assert_eq!(cuDeviceGet(&mut d, 2), CUDA_ERROR_INVALID_DEVICE);
        let mut uuid = CUuuid::default();
        assert_eq!(cuDeviceGetUuid_v2(&mut uuid, 0), CUDA_SUCCESS);
        // CUDA ordinal 0 is GPU 1 (UUID1).
        assert_eq!(uuid.bytes.map(|b| b as u8), uuid_bytes(UUID1).unwrap());
        assert_eq!(uuid.bytes[0] as u8, 0xAA);
        let mut bus = [0 as c_char; 32];
        assert_eq!(cuDeviceGetPCIBusId(bus.as_mut_ptr(), 32, 0), CUDA_SUCCESS);
        assert_eq!(
            CStr::from_ptr(bus.as_ptr()).to_str().unwrap(),
            "0000:3b:00.0"
        );
        assert_eq!(cuDeviceGetPCIBusId(bus.as_mut_ptr(), 32, 1), CUDA_SUCCESS);
        assert_eq!(
            CStr::from_ptr(bus.as_ptr()).to_str().unwrap(),
            "0000:18:00.0"
        );
        let mut name = [0 as c_char; 8];
        assert_eq!(cuDeviceGetName(name.as_mut_ptr(), 8, 0), CUDA_SUCCESS);
        assert_eq!(CStr::from_ptr(name.as_ptr()).to_str().unwrap(), "NVIDIA ");
    }
}

#[test]
fn no_panic_crosses_the_abi_on_hostile_arguments() {
    with_nvml(&fixture(), Some(0), || unsafe {
        let h = handle(0);
        let mut count: c_uint = u32::MAX;
        // A huge claimed room with a null buffer: refused, not written through.
        assert_eq!(
            nvmlDeviceGetComputeRunningProcesses_v3(h, &mut count, null_mut()),
            ret::INSUFFICIENT_SIZE
        );
        assert_eq!(count, 2);
        assert_eq!(
            nvmlDeviceGetFieldValues(h, 3, null_mut()),
            ret::INVALID_ARGUMENT
        );
        let mut u = nvmlUtilization_t::default();
        assert_eq!(
            nvmlDeviceGetUtilizationRates(usize::MAX as nvmlDevice_t, &mut u),
            ret::INVALID_ARGUMENT
        );
    });
}

#[test]
fn uuid_bytes_parse() {
    assert_eq!(
        uuid_bytes("GPU-00112233-4455-6677-8899-aabbccddeeff").unwrap()[15],
        0xFF
    );
    assert_eq!(uuid_bytes("GPU-0011"), None);
}

#[test]
fn without_a_pinned_frame_frames_follow_wall_time() {
    with_nvml(&fixture(), None, || unsafe {
        let mut now: c_uint = 9;
        assert_eq!(fakeNvmlGetFrame(&mut now), OK);
        assert_eq!(now, 0, "the first frame at init");
        // Frame 1 is at t = 1000 ms; a loop lasts 2000 ms.
        let start = std::time::Instant::now();
        while now != 1 && start.elapsed() < std::time::Duration::from_secs(10) {
            std::thread::sleep(std::time::Duration::from_millis(50));
            assert_eq!(fakeNvmlGetFrame(&mut now), OK);
        }
        assert_eq!(now, 1, "frame 1 comes with time");
        let mut u = nvmlUtilization_t::default();
        assert_eq!(nvmlDeviceGetUtilizationRates(handle(0), &mut u), OK);
        assert_eq!(u.gpu, 50);
    });
}

#[test]
fn calls_from_many_threads_agree() {
    with_nvml(&fixture(), Some(0), || {
        let h0 = handle(0) as usize;
        let threads: Vec<_> = (0..8)
            .map(|_| {
                std::thread::spawn(move || {
                    for _ in 0..500 {
                        let mut m = nvmlMemory_t::default();
                        let r = unsafe { nvmlDeviceGetMemoryInfo(h0 as nvmlDevice_t, &mut m) };
                        assert_eq!(r, OK);
                        assert_eq!(m.total, 40 << 30);
                        let mut h = null_mut();
                        assert_eq!(unsafe { nvmlDeviceGetHandleByIndex(1, &mut h) }, OK);
                        // Init and shutdown from other threads only count.
                        assert_eq!(nvmlInit(), OK);
                        assert_eq!(nvmlShutdown(), OK);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("no thread panicked");
        }
    });
}

/// The event calls serve the fixture's events through the C ABI: a set delivers each
/// registered event once, from the frame that records it on, with `nvmlEventData_t` laid out as
/// `nvml.h` lays it out; an unregistered kind is not delivered, and a wait with nothing to
/// deliver times out.
#[test]
fn events_are_delivered_once_from_their_frame() {
    with_nvml(&fixture(), Some(0), || unsafe {
        let g0 = handle(0);
        let mut kinds: c_ulonglong = 0;
        assert_eq!(nvmlDeviceGetSupportedEventTypes(g0, &mut kinds), OK);
        assert_eq!(
            kinds,
            gpu_backend::EventKind::all_bits(),
            "nvmlEventTypeAll"
        );
        let mut mig = null_mut();
        assert_eq!(nvmlDeviceGetMigDeviceHandleByIndex(g0, 0, &mut mig), OK);
        assert_eq!(
            nvmlDeviceGetSupportedEventTypes(mig, &mut kinds),
            ret::NOT_SUPPORTED,
            "the fixture's MIG devices have no events"
        );

        let mut set: nvmlEventSet_t = null_mut();
        assert_eq!(nvmlEventSetCreate(&mut set), OK);
        assert!(!set.is_null());
        // XID and double-bit ECC only: frame 0's clock change is not for this set.
        assert_eq!(nvmlDeviceRegisterEvents(g0, 0x8 | 0x2, set), OK);
        assert_eq!(nvmlDeviceRegisterEvents(mig, 0x8, set), ret::NOT_SUPPORTED);
        assert_eq!(
            nvmlDeviceRegisterEvents(g0, 0x8 | 0x4000_0000, set),
            ret::NOT_SUPPORTED,
            "a kind the device does not support"
        );
        let mut data = std::mem::zeroed::<nvmlEventData_t>();
        assert_eq!(nvmlEventSetWait_v2(set, &mut data, 20), ret::TIMEOUT);

        assert_eq!(fakeNvmlSetFrame(1), OK);
        assert_eq!(nvmlEventSetWait_v2(set, &mut data, 20), OK);
        assert_eq!(data.device, g0);
        assert_eq!((data.eventType, data.eventData), (0x8, 79));
        assert_eq!(nvmlEventSetWait(set, &mut data, 20), OK);
        assert_eq!((data.device, data.eventType), (g0, 0x2));
        assert_eq!(nvmlEventSetWait_v2(set, &mut data, 20), ret::TIMEOUT);
        assert_eq!(
            nvmlEventSetWait_v2(set, null_mut(), 20),
            ret::INVALID_ARGUMENT
        );

        assert_eq!(nvmlEventSetFree(set), OK);
        assert_eq!(nvmlEventSetFree(set), ret::INVALID_ARGUMENT);
        assert_eq!(
            nvmlEventSetWait_v2(set, &mut data, 0),
            ret::INVALID_ARGUMENT
        );
    });
}

fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

/// Issue 22 (3d): nvitop showed 0 %SM for every process of the real H100 recording over
/// fake-nvml, because the samples were served with the timestamps they were recorded with
/// (hours or days ago) and nvitop asks for the samples of the last second by wall clock. The
/// samples are now moved onto the replay's clock: at frame 30, PID 512's sample (95 %SM, taken
/// 16 ms before the frame) is among those of the last second.
#[test]
fn process_samples_are_on_the_replay_clock_so_a_client_asking_for_the_last_second_sees_them() {
    let real = Fixture::load(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/h100-real.json"),
    )
    .unwrap();
    with_nvml(&real, Some(30), || unsafe {
        let h = handle(0);
        // What nvitop asks: the samples newer than one second ago.
        let since = now_us() - 1_000_000;
        let mut samples = [nvmlProcessUtilizationSample_t::default(); 8];
        let mut count: c_uint = 8;
        assert_eq!(
            nvmlDeviceGetProcessUtilization(h, samples.as_mut_ptr(), &mut count, since),
            OK
        );
        let got = &samples[..count as usize];
        let pid512 = got.iter().find(|s| s.pid == 512).expect("PID 512's sample");
        assert_eq!(pid512.smUtil, 95);
        assert!(pid512.timeStamp > since && pid512.timeStamp <= now_us());
        // PID 541's newest sample was 2.4 s old at frame 30: not among the last second's.
        assert!(got.iter().all(|s| s.pid != 541), "{got:?}");
    });
}

/// Issue 22 (3d): on a wall-clock replay an event comes at the time it was recorded, not when
/// the replay reaches the frame that logs it (a burst each second): the fixture's XID was
/// received 200 ms into the recording, a frame before the frame that logs it (at 1 s).
#[test]
fn events_come_at_their_recorded_time_on_a_wall_clock_replay() {
    // GPU 0's XID 79 is logged in frame 1 (at 1 s) and was received 200 ms after the
    // recording's start (its newest sample of frame 0 was taken at the start).
    with_nvml(&fixture(), None, || unsafe {
        let started = std::time::Instant::now();
        let g0 = handle(0);
        let mut set: nvmlEventSet_t = null_mut();
        assert_eq!(nvmlEventSetCreate(&mut set), OK);
        assert_eq!(nvmlDeviceRegisterEvents(g0, 0x8, set), OK);
        let mut data = std::mem::zeroed::<nvmlEventData_t>();
        assert_eq!(nvmlEventSetWait_v2(set, &mut data, 5_000), OK);
        let at = started.elapsed();
        let mut frame: c_uint = 9;
        assert_eq!(fakeNvmlGetFrame(&mut frame), OK);
        assert_eq!((data.eventType, data.eventData), (0x8, 79));
        assert!(
            at >= std::time::Duration::from_millis(150),
            "not before its time: {at:?}"
        );
        assert_eq!(frame, 0, "delivered at {at:?}, before its frame");
        assert_eq!(nvmlEventSetFree(set), OK);
    });
}
