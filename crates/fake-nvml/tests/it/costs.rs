//! `GPUSCOPE_FAKE_NVML_COSTS`: the library spends real hardware's call costs when asked. A
//! profiled call takes at least its wall time and uses at least its CPU time on the calling
//! thread; calls the profile does not name stay cheap. The bounds are generous and one way only
//! (at least the cost, well under it when free): behaviour, not timing. Each test sets the
//! variable the library reads at init under [`common::lock`], whose guard unsets it again.

#![cfg(target_os = "linux")]

use crate::common;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::ptr::null_mut;
use std::time::Duration;

use fake_nvml::abi::*;
use fake_nvml::nvml::*;
use gpu_backend::concurrency::Concurrency;
use gpu_backend::cost::{time, CallCost, CostProfile, Timing};
use nvml_wrapper::enum_wrappers::device::TemperatureSensor;
use nvml_wrapper::Nvml;

use common::*;

const OK: nvmlReturn_t = ret::SUCCESS;

/// The CPU a profiled call must spend, and that a free call stays well under.
const CPU: Duration = Duration::from_millis(5);

fn profile(entries: &[(&str, f64, f64)]) -> CostProfile {
    entries
        .iter()
        .map(|&(name, wall_us, cpu_us)| (name.to_string(), CallCost { wall_us, cpu_us }))
        .collect()
}

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fake-nvml-costs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Writes `profile` to a file and points the library at it.
fn use_profile(profile: &CostProfile, name: &str) -> PathBuf {
    let path = temp(name);
    std::fs::write(&path, serde_json::to_string(profile).unwrap()).unwrap();
    std::env::set_var(fake_nvml::COSTS_ENV, &path);
    path
}

/// A profile that charges each of `names` [`CPU`] of CPU time and as much wall time.
fn charging(names: &[&str]) -> CostProfile {
    let us = CPU.as_micros() as f64;
    let entries: Vec<(&str, f64, f64)> = names.iter().map(|&name| (name, us, us)).collect();
    profile(&entries)
}

/// Points the library at the stock fixture and at `profile`, in files named after `name`.
fn set_up(name: &str, profile: &CostProfile) {
    set_env(Some(&write_temp(&fixture(), name)), Some(0));
    use_profile(profile, &format!("{name}.json"));
}

fn cpu(t: Timing) -> Duration {
    t.cpu.expect("Linux has a thread CPU clock")
}

/// Asserts that a call spent at least the profiled CPU time.
fn spent(what: &str, t: Timing) {
    assert!(
        cpu(t) >= CPU,
        "{what} used {:?} of CPU, less than its cost",
        t.cpu
    );
    assert!(
        t.wall >= CPU,
        "{what} took {:?}, less than its cost",
        t.wall
    );
}

/// Asserts that a call spent well under the profiled CPU time (it was not charged).
fn free(what: &str, t: Timing) {
    assert!(
        cpu(t) < CPU,
        "{what} used {:?} of CPU: charged a cost",
        t.cpu
    );
}

fn handle(index: u32) -> nvmlDevice_t {
    let mut h = null_mut();
    assert_eq!(unsafe { nvmlDeviceGetHandleByIndex_v2(index, &mut h) }, OK);
    h
}

fn installed() -> PathBuf {
    let exe = std::env::current_exe().expect("test exe");
    let lib = fake_nvml::find_cdylib(&exe).expect("the built cdylib");
    fake_nvml::install_per_process(&lib, &std::env::temp_dir(), "fake-nvml-lib")
        .expect("install")
        .nvml
}

#[test]
fn an_nvml_client_pays_a_profiled_calls_cost_and_no_other() {
    let _guard = lock();
    set_up(
        "client",
        &profile(&[("nvmlDeviceGetPowerUsage", 20_000.0, 5_000.0)]),
    );
    let so = installed();
    let nvml = Nvml::builder()
        .lib_path(OsStr::new(&so))
        .init()
        .expect("nvml-wrapper inits over the fake library");
    let gpu0 = nvml.device_by_index(0).unwrap();
    let (power, t) = time(|| gpu0.power_usage());
    assert_eq!(power.unwrap(), 60_000, "the answer is the fixture's");
    assert!(t.wall >= Duration::from_millis(20), "wall {:?}", t.wall);
    spent("nvmlDeviceGetPowerUsage", t);
    let (temperature, t) = time(|| gpu0.temperature(TemperatureSensor::Gpu));
    assert!(temperature.is_ok());
    free("nvmlDeviceGetTemperature (not in the profile)", t);
    drop(nvml);
    std::env::remove_var(fake_nvml::COSTS_ENV);
}

#[test]
fn a_name_without_a_suffix_covers_its_versions_and_one_with_a_suffix_only_itself() {
    let _guard = lock();
    set_up(
        "suffix",
        &charging(&["nvmlDeviceGetMemoryInfo", "nvmlDeviceGetPciInfo_v3"]),
    );
    assert_eq!(nvmlInit_v2(), OK, "{:?}", fake_nvml::last_init_error());
    let h = handle(0);
    unsafe {
        let mut mem = std::mem::zeroed::<nvmlMemory_t>();
        let (code, t) = time(|| nvmlDeviceGetMemoryInfo(h, &mut mem));
        assert_eq!(code, OK);
        spent("nvmlDeviceGetMemoryInfo", t);
        let mut mem2 = std::mem::zeroed::<nvmlMemory_v2_t>();
        mem2.version = NVML_MEMORY_V2;
        let (code, t) = time(|| nvmlDeviceGetMemoryInfo_v2(h, &mut mem2));
        assert_eq!(code, OK);
        spent(
            "nvmlDeviceGetMemoryInfo_v2 (covered by its unsuffixed name)",
            t,
        );
        let mut pci = std::mem::zeroed::<nvmlPciInfo_t>();
        let (code, t) = time(|| nvmlDeviceGetPciInfo_v3(h, &mut pci));
        assert_eq!(code, OK);
        spent("nvmlDeviceGetPciInfo_v3", t);
        let (code, t) = time(|| nvmlDeviceGetPciInfo_v2(h, &mut pci));
        assert_eq!(code, OK);
        free("nvmlDeviceGetPciInfo_v2 (the profile names only _v3)", t);
    }
    assert_eq!(nvmlShutdown(), OK);
    std::env::remove_var(fake_nvml::COSTS_ENV);
}

#[test]
fn init_and_shutdown_cost_when_they_start_and_end_nvml_not_when_they_count() {
    let _guard = lock();
    set_up("init", &charging(&["nvmlInit", "nvmlShutdown"]));
    let (code, t) = time(|| nvmlInit_v2());
    assert_eq!(code, OK, "{:?}", fake_nvml::last_init_error());
    spent("the first nvmlInit_v2 (covered by nvmlInit)", t);
    let (code, t) = time(|| nvmlInit());
    assert_eq!(code, OK);
    free("a nested nvmlInit", t);
    let (code, t) = time(|| nvmlShutdown());
    assert_eq!(code, OK);
    free("a shutdown that leaves NVML initialised", t);
    let (code, t) = time(|| nvmlShutdown());
    assert_eq!(code, OK);
    spent("the last nvmlShutdown", t);
    let (code, t) = time(|| nvmlShutdown());
    assert_eq!(code, ret::UNINITIALIZED);
    free("a shutdown with nothing to end", t);
    std::env::remove_var(fake_nvml::COSTS_ENV);
}

#[test]
fn recorded_takes_the_fixtures_own_costs_and_fails_init_without_them() {
    let _guard = lock();
    let mut f = fixture();
    f.nvml_costs = Some(profile(&[("nvmlDeviceGetPowerUsage", 5_000.0, 5_000.0)]));
    set_env(Some(&write_temp(&f, "recorded")), Some(0));
    std::env::set_var(fake_nvml::COSTS_ENV, fake_nvml::RECORDED);
    assert_eq!(nvmlInit_v2(), OK, "{:?}", fake_nvml::last_init_error());
    let mut mw = 0;
    let (code, t) = time(|| unsafe { nvmlDeviceGetPowerUsage(handle(0), &mut mw) });
    assert_eq!((code, mw), (OK, 60_000));
    spent("nvmlDeviceGetPowerUsage (the fixture's nvml_costs)", t);
    assert_eq!(nvmlShutdown(), OK);

    // The plain fixture records no costs.
    let plain = write_temp(&fixture(), "no-costs");
    set_env(Some(&plain), Some(0));
    assert_eq!(nvmlInit_v2(), ret::DRIVER_NOT_LOADED);
    let message = fake_nvml::last_init_error().expect("a message");
    assert!(
        message.contains("GPUSCOPE_FAKE_NVML_COSTS=recorded")
            && message.contains("nvml_costs")
            && message.contains(&plain.display().to_string())
            && !message.contains('\n'),
        "{message}"
    );
    let mut n = 0;
    assert_eq!(unsafe { nvmlDeviceGetCount_v2(&mut n) }, ret::UNINITIALIZED);
    std::env::remove_var(fake_nvml::COSTS_ENV);
}

#[test]
fn a_bad_cost_file_fails_init_with_one_line_naming_the_variable_and_the_file() {
    let _guard = lock();
    set_env(Some(&write_temp(&fixture(), "bad")), Some(0));
    let cases: &[(&str, Option<&str>, &str)] = &[
        ("missing.json", None, "cannot read"),
        ("text.json", Some("wall_us=5"), "not a cost profile"),
        ("array.json", Some("[1, 2]"), "not a cost profile"),
        (
            "fields.json",
            Some(r#"{"nvmlShutdown": {"wall": 5}}"#),
            "not a cost profile",
        ),
        (
            "negative.json",
            Some(r#"{"nvmlShutdown": {"wall_us": -1, "cpu_us": 0}}"#),
            "nvmlShutdown's wall_us is -1",
        ),
        (
            "huge.json",
            Some(r#"{"nvmlDeviceGetPowerUsage": {"wall_us": 5, "cpu_us": 3.6e9}}"#),
            "nvmlDeviceGetPowerUsage's cpu_us",
        ),
        (
            "overflow.json",
            Some(r#"{"nvmlShutdown": {"wall_us": 1e999, "cpu_us": 0}}"#),
            "not a cost profile",
        ),
    ];
    for &(name, content, why) in cases {
        let path = temp(name);
        match content {
            Some(c) => std::fs::write(&path, c).unwrap(),
            None => {
                let _ = std::fs::remove_file(&path);
            }
        }
        std::env::set_var(fake_nvml::COSTS_ENV, &path);
        assert_eq!(nvmlInit_v2(), ret::DRIVER_NOT_LOADED, "{name}");
        let message = fake_nvml::last_init_error().expect("a message");
        assert!(
            message.contains(&format!("GPUSCOPE_FAKE_NVML_COSTS={}", path.display()))
                && message.contains(why)
                && !message.contains('\n'),
            "{name}: {message}"
        );
    }
    // A good file afterwards: init works again.
    let good = use_profile(&profile(&[]), "empty.json");
    assert!(Path::new(&good).is_file());
    assert_eq!(nvmlInit_v2(), OK, "{:?}", fake_nvml::last_init_error());
    assert_eq!(nvmlShutdown(), OK);
    std::env::remove_var(fake_nvml::COSTS_ENV);
}

/// The wall time of one `nvmlDeviceGetPowerUsage` call on each of `gpus`, each on its own
/// thread, all started together.
fn power_at_once(gpus: &[u32]) -> Duration {
    let barrier = std::sync::Barrier::new(gpus.len());
    let start = std::time::Instant::now();
    std::thread::scope(|s| {
        for &gpu in gpus {
            let barrier = &barrier;
            s.spawn(move || {
                let h = handle(gpu);
                barrier.wait();
                let mut mw = 0;
                assert_eq!(unsafe { nvmlDeviceGetPowerUsage(h, &mut mw) }, OK);
            });
        }
    });
    start.elapsed()
}

#[test]
fn a_profile_that_says_the_driver_serialises_makes_calls_from_two_threads_wait_for_each_other() {
    let _guard = lock();
    for (concurrency, gpus) in [
        (Concurrency::Serial, [0, 1]),
        (Concurrency::PerDevice, [0, 0]),
    ] {
        let mut p = charging(&["nvmlDeviceGetPowerUsage"]);
        p.concurrency = Some(concurrency);
        set_up(&format!("concurrency-{concurrency}"), &p);
        assert_eq!(nvmlInit_v2(), OK, "{:?}", fake_nvml::last_init_error());
        // Each call spends its CPU under the lock: two of them, one after the other, take at
        // least twice one's CPU, however many cores run the threads.
        let wall = power_at_once(&gpus);
        assert!(
            wall >= 2 * CPU,
            "{concurrency}: two calls on GPUs {gpus:?} at once took {wall:?}, less than two \
             calls' CPU one after the other"
        );
        assert_eq!(nvmlShutdown(), OK);
    }
    std::env::remove_var(fake_nvml::COSTS_ENV);
}
