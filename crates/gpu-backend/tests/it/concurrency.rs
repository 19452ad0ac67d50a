//! `concurrency::measure` tells a driver that runs calls from several threads at once from one
//! that makes them wait, per GPU or for all: over backends whose calls sleep (so that the
//! machine's own load and core count do not blur the walls) with no lock, one lock per GPU,
//! or one lock for all.

use std::sync::Mutex;
use std::time::Duration;

use gpu_backend::concurrency::{measure, Concurrency};
use gpu_backend::{ClockType, DeviceId, NotSupportedBase, Result};

/// How the test driver makes calls meet.
enum Locks {
    None,
    PerGpu([Mutex<()>; 2]),
    One(Mutex<()>),
}

/// Two GPUs whose maximum clock takes 6 ms, under `locks`: long beside what a busy machine
/// adds to each sleep (up to a millisecond when every core is taken), which with 2 ms calls
/// swelled the one-thread wall enough to read a per-GPU lock as no lock at all.
struct Driver(Locks);

impl NotSupportedBase for Driver {
    fn device_count(&self) -> Result<u32> {
        Ok(2)
    }

    fn max_clock(&self, id: DeviceId, _: ClockType) -> Result<u32> {
        let _held = match &self.0 {
            Locks::None => None,
            Locks::PerGpu(locks) => Some(locks[id.physical_index() as usize].lock().unwrap()),
            Locks::One(lock) => Some(lock.lock().unwrap()),
        };
        std::thread::sleep(Duration::from_millis(6));
        Ok(1980)
    }
}

fn found(locks: Locks) -> Option<Concurrency> {
    let probe = measure(&Driver(locks)).expect("GPU 0 answers");
    assert_eq!(probe.query, "max_clock");
    probe.concurrency()
}

#[test]
fn the_probe_reads_each_driver_s_locks() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        // One thread at a time cannot tell.
        assert_eq!(found(Locks::None), None);
        return;
    }
    assert_eq!(found(Locks::None), Some(Concurrency::Parallel));
    assert_eq!(
        found(Locks::PerGpu([Mutex::new(()), Mutex::new(())])),
        Some(Concurrency::PerDevice)
    );
    assert_eq!(found(Locks::One(Mutex::new(()))), Some(Concurrency::Serial));
}

/// A GPU that does not answer the probe's query: nothing to measure.
struct Silent;

impl NotSupportedBase for Silent {
    fn device_count(&self) -> Result<u32> {
        Ok(1)
    }
}

#[test]
fn a_gpu_that_does_not_answer_the_probe_gives_no_finding() {
    assert!(measure(&Silent).is_none());
}
