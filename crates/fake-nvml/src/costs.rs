//! What each NVML call costs on real hardware, spent on the calling thread when asked
//! ([`COSTS_ENV`]): so that a client over the fake library pays, in CPU and wall time, what it
//! would pay over a real driver.
//!
//! A profile is a [`gpu_backend::cost::CostProfile`]: an NVML function's exported name mapped
//! to `{"wall_us": N, "cpu_us": N}`. Each served call of a profiled function busy-spins until
//! the calling thread has used `cpu_us` of CPU (read on the thread's own CPU clock, so that
//! preemption on a loaded machine does not shorten it), then sleeps out the rest of `wall_us`.
//! A name without a version suffix also covers its `_v2`, `_v3`, ... forms
//! (`nvmlDeviceGetMemoryInfo` covers `nvmlDeviceGetMemoryInfo_v2`); a name with a suffix covers
//! that form only, and an exact entry wins over its unsuffixed one. Functions the profile does
//! not name cost nothing.
//!
//! The profile's `concurrency` says how calls made at the same time from several threads meet
//! in the driver, and the CPU part of each call is spent under as many locks as that says:
//! `parallel` (or no `concurrency`), none, each thread spends its own; `per-device`, one lock
//! per GPU (a MIG device's is its parent's; calls that name no device share one more), so calls
//! on one GPU wait for each other and calls on two overlap; `serial`, one lock for every call.
//! The rest of a call's wall time (PCIe throughput's 20 ms sample) is slept with no lock held:
//! on a real driver the two directions of PCIe throughput overlap each other and the rest.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use gpu_backend::concurrency::Concurrency;
use gpu_backend::cost::{thread_cpu_time, CostProfile};
use gpu_backend::{DeviceId, Fixture};

/// The environment variable that asks for real hardware's call costs: the path of a cost
/// profile JSON file, or `recorded` for the served fixture's own `nvml_costs`. Unset or empty:
/// every call is as fast as the library can answer it.
pub const COSTS_ENV: &str = "GPUSCOPE_FAKE_NVML_COSTS";

/// The value of [`COSTS_ENV`] that takes the costs from the fixture (`nvml_costs`).
pub const RECORDED: &str = "recorded";

/// The most one call may cost, wall or CPU, in microseconds (10 s): a larger number in a
/// profile is a mistake, and fails init.
pub const MAX_COST_US: f64 = 10_000_000.0;

/// What one call spends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Spend {
    wall: Duration,
    cpu: Duration,
}

/// A checked profile, by exported name, with how the calls meet in the driver.
#[derive(Debug)]
pub(crate) struct CostTable {
    by_name: HashMap<String, Spend>,
    concurrency: Concurrency,
}

impl CostTable {
    /// Checks every cost of `profile` (finite, at least 0, at most [`MAX_COST_US`]); the error
    /// names the function and the field.
    fn new(profile: &CostProfile) -> Result<CostTable, String> {
        let mut by_name = HashMap::with_capacity(profile.len());
        for (name, cost) in profile {
            let check = |field: &str, us: f64| -> Result<Duration, String> {
                if us.is_finite() && (0.0..=MAX_COST_US).contains(&us) {
                    Ok(Duration::from_nanos((us * 1000.0).round() as u64))
                } else {
                    Err(format!(
                        "{}'s {field} is {us}; a cost is a number of microseconds from 0 to \
                         {MAX_COST_US} (10 s)",
                        gpu_backend::text::escape_control(name)
                    ))
                }
            };
            let spend = Spend {
                wall: check("wall_us", cost.wall_us)?,
                cpu: check("cpu_us", cost.cpu_us)?,
            };
            by_name.insert(name.clone(), spend);
        }
        Ok(CostTable {
            by_name,
            concurrency: profile.concurrency.unwrap_or(Concurrency::Parallel),
        })
    }

    /// What a call of `function` costs: its own entry, else (for a `_vN` form) the entry of
    /// its unsuffixed name.
    fn lookup(&self, function: &str) -> Option<Spend> {
        if let Some(s) = self.by_name.get(function) {
            return Some(*s);
        }
        let (base, version) = function.rsplit_once("_v")?;
        if version.is_empty() || !version.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        self.by_name.get(base).copied()
    }
}

/// The costs in force: set at the init that loads the fixture, kept past the last shutdown (so
/// that the shutdown itself is spent) until the next such init.
static COSTS: RwLock<Option<Arc<CostTable>>> = RwLock::new(None);

/// Reads [`COSTS_ENV`] for a fixture being loaded (`fixture_path`, for messages): `Ok(None)`
/// when unset or empty; an error in one line naming the variable and the file otherwise.
pub(crate) fn load(fixture: &Fixture, fixture_path: &str) -> Result<Option<CostTable>, String> {
    let Some(value) = std::env::var_os(COSTS_ENV).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    if value == RECORDED {
        let Some(profile) = fixture.nvml_costs.as_ref() else {
            return Err(format!(
                "fake-nvml: {COSTS_ENV}={RECORDED} asks for the fixture's own call costs, and \
                 the fixture {} has none (no `nvml_costs`); name a cost profile file instead",
                gpu_backend::text::escape_control(fixture_path)
            ));
        };
        return CostTable::new(profile).map(Some).map_err(|e| {
            format!(
                "fake-nvml: {COSTS_ENV}={RECORDED}: the fixture's `nvml_costs` is not usable: {e}"
            )
        });
    }
    let shown = gpu_backend::text::escape_control(&value.to_string_lossy()).into_owned();
    let text = gpu_backend::files::read_regular_to_string(
        std::path::Path::new(&value),
        gpu_backend::files::MAX_CONFIG_BYTES,
    )
    .map_err(|e| format!("fake-nvml: {COSTS_ENV}={shown}: cannot read the file: {e}"))?;
    let profile: CostProfile = serde_json::from_str(&text).map_err(|e| {
        format!(
            "fake-nvml: {COSTS_ENV}={shown}: not a cost profile (a JSON object mapping NVML \
             function names to {{\"wall_us\": N, \"cpu_us\": N}}): {e}"
        )
    })?;
    CostTable::new(&profile)
        .map(Some)
        .map_err(|e| format!("fake-nvml: {COSTS_ENV}={shown}: {e}"))
}

/// Puts `table` in force (none: every call free).
pub(crate) fn install(table: Option<CostTable>) {
    *COSTS.write().unwrap_or_else(PoisonError::into_inner) = table.map(Arc::new);
}

/// How many GPUs have a lock of their own under `per-device`; a GPU beyond shares one (by its
/// index modulo this).
const DEVICE_LOCKS: usize = 64;

/// The locks a call's CPU part is spent under (see the module).
static SERIAL: Mutex<()> = Mutex::new(());
static NO_DEVICE: Mutex<()> = Mutex::new(());
static BY_DEVICE: [Mutex<()>; DEVICE_LOCKS] = [const { Mutex::new(()) }; DEVICE_LOCKS];

/// The lock a call on `device` waits for under `concurrency`, if any.
fn lock_of(concurrency: Concurrency, device: Option<DeviceId>) -> Option<&'static Mutex<()>> {
    match (concurrency, device) {
        (Concurrency::Parallel, _) => None,
        (Concurrency::Serial, _) => Some(&SERIAL),
        (Concurrency::PerDevice, None) => Some(&NO_DEVICE),
        (Concurrency::PerDevice, Some(d)) => {
            Some(&BY_DEVICE[d.physical_index() as usize % DEVICE_LOCKS])
        }
    }
}

/// Spends what a call of `function` on `device` costs, on this thread: its CPU part under the
/// profile's lock for it (see the module), then the rest of its wall time asleep; nothing when
/// no profile is in force or it does not name the function.
pub(crate) fn spend(function: &str, device: Option<DeviceId>) {
    let (spend, concurrency) = {
        let costs = COSTS.read().unwrap_or_else(PoisonError::into_inner);
        match costs
            .as_ref()
            .and_then(|t| t.lookup(function).map(|s| (s, t.concurrency)))
        {
            Some(s) => s,
            None => return,
        }
    };
    // Waiting for the lock is not the call's own time: its wall time counts from when the
    // driver takes it up.
    let held = (!spend.cpu.is_zero())
        .then(|| lock_of(concurrency, device))
        .flatten()
        .map(|m| m.lock().unwrap_or_else(PoisonError::into_inner));
    let start = Instant::now();
    if !spend.cpu.is_zero() {
        match thread_cpu_time() {
            // The thread's CPU clock is a system call to read: spin on the wall clock (read
            // without one) for what is left, at most 50 us at a time, then ask it again.
            Some(cpu0) => {
                while let Some(left) = thread_cpu_time()
                    .and_then(|now| spend.cpu.checked_sub(now.saturating_sub(cpu0)))
                    .filter(|l| !l.is_zero())
                {
                    let chunk = Instant::now();
                    let step = left.min(Duration::from_micros(50));
                    while chunk.elapsed() < step {
                        std::hint::spin_loop();
                    }
                }
            }
            // No thread CPU clock: spin for that long on the wall clock.
            None => {
                while start.elapsed() < spend.cpu {
                    std::hint::spin_loop();
                }
            }
        }
    }
    drop(held);
    let left = spend.wall.saturating_sub(start.elapsed());
    if !left.is_zero() {
        std::thread::sleep(left);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_backend::cost::CallCost;

    fn profile(entries: &[(&str, f64, f64)]) -> CostProfile {
        entries
            .iter()
            .map(|&(n, wall_us, cpu_us)| (n.to_string(), CallCost { wall_us, cpu_us }))
            .collect()
    }

    #[test]
    fn an_unsuffixed_name_covers_its_versions_and_a_suffixed_one_only_itself() {
        let t = CostTable::new(&profile(&[
            ("nvmlDeviceGetMemoryInfo", 10.0, 5.0),
            ("nvmlInit_v2", 20.0, 20.0),
            ("nvmlDeviceGetPciInfo", 1.0, 1.0),
            ("nvmlDeviceGetPciInfo_v3", 3.0, 3.0),
        ]))
        .unwrap();
        let us = |n: &str| t.lookup(n).map(|s| s.wall.as_micros());
        assert_eq!(us("nvmlDeviceGetMemoryInfo"), Some(10));
        assert_eq!(us("nvmlDeviceGetMemoryInfo_v2"), Some(10));
        assert_eq!(us("nvmlDeviceGetMemoryInfo_v12"), Some(10));
        assert_eq!(us("nvmlDeviceGetMemoryInfo_vx"), None);
        assert_eq!(us("nvmlDeviceGetMemoryInfo_v"), None);
        assert_eq!(us("nvmlInit_v2"), Some(20));
        assert_eq!(us("nvmlInit"), None);
        assert_eq!(us("nvmlInit_v3"), None);
        assert_eq!(
            us("nvmlDeviceGetPciInfo_v3"),
            Some(3),
            "the exact entry wins"
        );
        assert_eq!(us("nvmlDeviceGetPciInfo_v2"), Some(1));
        assert_eq!(us("nvmlDeviceGetPowerUsage"), None);
    }

    #[test]
    fn each_concurrency_takes_the_lock_it_says() {
        use Concurrency::*;
        let gpu = |i| Some(DeviceId::Gpu(i));
        let same = |a: Option<&'static Mutex<()>>, b: Option<&'static Mutex<()>>| match (a, b) {
            (Some(a), Some(b)) => std::ptr::eq(a, b),
            _ => false,
        };
        assert!(lock_of(Parallel, gpu(0)).is_none() && lock_of(Parallel, None).is_none());
        assert!(same(lock_of(Serial, gpu(0)), lock_of(Serial, gpu(1))));
        assert!(same(lock_of(Serial, gpu(0)), lock_of(Serial, None)));
        assert!(!same(
            lock_of(PerDevice, gpu(0)),
            lock_of(PerDevice, gpu(1))
        ));
        assert!(same(lock_of(PerDevice, gpu(1)), lock_of(PerDevice, gpu(1))));
        let mig = Some(DeviceId::Mig {
            parent: 1,
            index: 2,
        });
        assert!(
            same(lock_of(PerDevice, mig), lock_of(PerDevice, gpu(1))),
            "a MIG device shares its GPU's"
        );
        assert!(!same(lock_of(PerDevice, None), lock_of(PerDevice, gpu(0))));
    }

    #[test]
    fn a_profile_without_a_concurrency_lets_calls_run_in_parallel() {
        let t = CostTable::new(&profile(&[("nvmlInit_v2", 1.0, 1.0)])).unwrap();
        assert_eq!(t.concurrency, Concurrency::Parallel);
        let mut p = profile(&[]);
        p.concurrency = Some(Concurrency::PerDevice);
        assert_eq!(
            CostTable::new(&p).unwrap().concurrency,
            Concurrency::PerDevice
        );
    }

    #[test]
    fn costs_out_of_bounds_are_refused_with_the_function_named() {
        for bad in [-1.0, f64::NAN, f64::INFINITY, MAX_COST_US * 1.01] {
            let e = CostTable::new(&profile(&[("nvmlDeviceGetPowerUsage", 5.0, bad)])).unwrap_err();
            assert!(e.contains("nvmlDeviceGetPowerUsage's cpu_us"), "{e}");
        }
        assert!(CostTable::new(&profile(&[("nvmlShutdown", MAX_COST_US, 0.0)])).is_ok());
    }
}
