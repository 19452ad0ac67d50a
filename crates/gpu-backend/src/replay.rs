//! The replay backend: serves a [`Fixture`] through [`GpuBackend`].
//!
//! Replay is a pure function of (fixture, frame). A [`ReplayClock`] chooses the frame: stepped by
//! hand in tests ([`ReplayClock::Manual`]), or by wall time, looping, in the CLI's demo
//! ([`ReplayClock::wall`]). It can also count the calls made to it, per query and device, which
//! the performance work uses to prove that one refresh asks each query at most once per device.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::backend::GpuBackend;
use crate::error::{BackendError, Result};
use crate::fixture::{link_answer, DeviceDynamic, DeviceStatic, Fixture, Frame};
use crate::types::*;

/// Chooses which frame of a fixture is served.
#[derive(Debug)]
pub enum ReplayClock {
    /// The frame is set by hand ([`ReplayBackend::set_frame`], [`ReplayBackend::step`]).
    Manual(AtomicUsize),
    /// The frame follows wall time from `start`, using the frames' `t_ms`; with `looping`, the
    /// recording starts over after its last frame, else the last frame stays.
    Wall {
        /// When replay started.
        start: Instant,
        /// Start over after the last frame.
        looping: bool,
    },
}

impl ReplayClock {
    /// A manual clock at frame 0.
    pub fn manual() -> ReplayClock {
        ReplayClock::Manual(AtomicUsize::new(0))
    }

    /// A wall clock starting now.
    pub fn wall(looping: bool) -> ReplayClock {
        ReplayClock::Wall {
            start: Instant::now(),
            looping,
        }
    }
}

/// One query as asked: the trait method, its extra argument if any (clock domain, link, fan,
/// direction, ... as a number), and the device (none for system queries).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CallKey {
    /// The trait method's name.
    pub query: &'static str,
    /// The method's extra argument, as a number, if it has one.
    pub arg: Option<u32>,
    /// The device asked about.
    pub device: Option<DeviceId>,
}

/// How many times each query was asked since counting was last reset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallCounts {
    /// Calls per query.
    pub by_query: HashMap<CallKey, u64>,
}

impl CallCounts {
    /// Total number of calls.
    pub fn total(&self) -> u64 {
        self.by_query.values().sum()
    }

    /// The queries that were asked more than once (same method, argument and device), with
    /// their counts, sorted.
    pub fn repeated(&self) -> Vec<(CallKey, u64)> {
        let mut v: Vec<_> = self
            .by_query
            .iter()
            .filter(|(_, &n)| n > 1)
            .map(|(k, &n)| (*k, n))
            .collect();
        v.sort();
        v
    }
}

/// A backend that serves a fixture. Cheap to share: wrap it in an `Arc`.
#[derive(Debug)]
pub struct ReplayBackend {
    fixture: Arc<Fixture>,
    clock: ReplayClock,
    counting: AtomicBool,
    counts: Mutex<CallCounts>,
}

impl ReplayBackend {
    /// Serves `fixture` from frame 0 with a manual clock.
    pub fn new(fixture: impl Into<Arc<Fixture>>) -> ReplayBackend {
        ReplayBackend::with_clock(fixture, ReplayClock::manual())
    }

    /// Serves `fixture` with the given clock.
    pub fn with_clock(fixture: impl Into<Arc<Fixture>>, clock: ReplayClock) -> ReplayBackend {
        ReplayBackend {
            fixture: fixture.into(),
            clock,
            counting: AtomicBool::new(false),
            counts: Mutex::new(CallCounts::default()),
        }
    }

    /// The fixture served.
    pub fn fixture(&self) -> &Arc<Fixture> {
        &self.fixture
    }

    /// The index of the frame served now.
    pub fn frame_index(&self) -> usize {
        let frames = &self.fixture.frames;
        match &self.clock {
            ReplayClock::Manual(i) => i.load(Ordering::Relaxed).min(frames.len() - 1),
            ReplayClock::Wall { start, looping } => frame_at(frames, start.elapsed(), *looping),
        }
    }

    /// The frame served now.
    pub fn frame(&self) -> &Frame {
        &self.fixture.frames[self.frame_index()]
    }

    /// Serves frame `index` (clamped to the last frame). Has no effect on a wall clock.
    pub fn set_frame(&self, index: usize) {
        if let ReplayClock::Manual(i) = &self.clock {
            i.store(index.min(self.fixture.frames.len() - 1), Ordering::Relaxed);
        }
    }

    /// Moves a manual clock one frame on, wrapping after the last. Returns the new index.
    pub fn step(&self) -> usize {
        let next = (self.frame_index() + 1) % self.fixture.frames.len();
        self.set_frame(next);
        next
    }

    /// Starts (or stops) counting calls. Counting costs a lock per call; it is off by default.
    pub fn count_calls(&self, on: bool) {
        self.counting.store(on, Ordering::Relaxed);
    }

    /// The calls counted so far, and resets the count.
    pub fn take_call_counts(&self) -> CallCounts {
        match self.counts.lock() {
            Ok(mut c) => std::mem::take(&mut *c),
            Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
        }
    }

    fn note(&self, query: &'static str, id: Option<DeviceId>) {
        self.note_arg(query, None, id);
    }

    fn note_arg(&self, query: &'static str, arg: Option<u32>, device: Option<DeviceId>) {
        if self.counting.load(Ordering::Relaxed) {
            let mut c = match self.counts.lock() {
                Ok(c) => c,
                Err(poisoned) => poisoned.into_inner(),
            };
            *c.by_query
                .entry(CallKey { query, arg, device })
                .or_default() += 1;
        }
    }

    fn stat(&self, query: &'static str, id: DeviceId) -> Result<&DeviceStatic> {
        self.stat_arg(query, None, id)
    }

    fn stat_arg(
        &self,
        query: &'static str,
        arg: Option<u32>,
        id: DeviceId,
    ) -> Result<&DeviceStatic> {
        self.note_arg(query, arg, Some(id));
        self.fixture.devices.get(&id).ok_or(BackendError::NotFound)
    }

    fn dynamic(&self, query: &'static str, id: DeviceId) -> Result<&DeviceDynamic> {
        self.dynamic_arg(query, None, id)
    }

    fn dynamic_arg(
        &self,
        query: &'static str,
        arg: Option<u32>,
        id: DeviceId,
    ) -> Result<&DeviceDynamic> {
        self.note_arg(query, arg, Some(id));
        self.frame().devices.get(&id).ok_or(BackendError::NotFound)
    }
}

/// The frame shown `elapsed` after the start of replay.
fn frame_at(frames: &[Frame], elapsed: Duration, looping: bool) -> usize {
    let last = frames.len() - 1;
    let mut t = elapsed.as_millis() as u64;
    if looping {
        // One loop lasts until the last frame plus one typical interval.
        let step = if last > 0 {
            (frames[last].t_ms / last as u64).max(1)
        } else {
            1000
        };
        let period = frames[last].t_ms + step;
        t %= period;
    }
    // The last frame whose time has come.
    frames
        .partition_point(|f| f.t_ms <= t)
        .saturating_sub(1)
        .min(last)
}

macro_rules! static_answers {
    ($($method:ident -> $ty:ty;)*) => {
        $(
            fn $method(&self, id: DeviceId) -> Result<$ty> {
                self.stat(stringify!($method), id)?.$method.get()
            }
        )*
    };
}

macro_rules! dynamic_answers {
    ($($method:ident -> $ty:ty;)*) => {
        $(
            fn $method(&self, id: DeviceId) -> Result<$ty> {
                self.dynamic(stringify!($method), id)?.$method.get()
            }
        )*
    };
}

impl GpuBackend for ReplayBackend {
    fn driver_version(&self) -> Result<String> {
        self.note("driver_version", None);
        self.fixture.system.driver_version.get()
    }
    fn nvml_version(&self) -> Result<String> {
        self.note("nvml_version", None);
        self.fixture.system.nvml_version.get()
    }
    fn cuda_driver_version(&self) -> Result<i32> {
        self.note("cuda_driver_version", None);
        self.fixture.system.cuda_driver_version.get()
    }
    fn device_count(&self) -> Result<u32> {
        self.note("device_count", None);
        self.fixture.system.device_count.get()
    }
    fn cuda_device_order(&self) -> Result<Vec<String>> {
        self.note("cuda_device_order", None);
        self.fixture.system.cuda_device_order.get()
    }

    static_answers! {
        name -> String;
        uuid -> String;
        serial -> String;
        pci_info -> PciInfo;
        minor_number -> u32;
        vbios_version -> String;
        board_part_number -> String;
        architecture -> Architecture;
        brand -> Brand;
        num_fans -> u32;
        power_management_mode -> bool;
        power_management_limit -> u32;
        power_management_limit_constraints -> PowerLimits;
        enforced_power_limit -> u32;
        max_pcie_link_generation -> u32;
        max_pcie_link_width -> u32;
        display_mode -> bool;
        display_active -> bool;
        persistence_mode -> bool;
        ecc_mode -> CurrentPending<bool>;
        compute_mode -> ComputeMode;
        cuda_compute_capability -> ComputeCapability;
        driver_model -> CurrentPending<DriverModel>;
        mig_mode -> CurrentPending<bool>;
        max_mig_device_count -> u32;
        mig_device_indices -> Vec<u32>;
        gpu_instance_id -> u32;
        compute_instance_id -> u32;
    }

    fn max_clock(&self, id: DeviceId, clock: ClockType) -> Result<u32> {
        self.stat_arg("max_clock", Some(clock as u32), id)?
            .max_clocks
            .get(clock)
            .get()
    }
    fn temperature_threshold(&self, id: DeviceId, threshold: TemperatureThreshold) -> Result<u32> {
        let st = self.stat_arg("temperature_threshold", Some(threshold as u32), id)?;
        match threshold {
            TemperatureThreshold::Slowdown => st.temperature_slowdown.get(),
            TemperatureThreshold::Shutdown => st.temperature_shutdown.get(),
        }
    }
    fn nvlink_state(&self, id: DeviceId, link: u32) -> Result<bool> {
        link_answer(
            &self.stat_arg("nvlink_state", Some(link), id)?.nvlink_state,
            link,
        )
    }

    dynamic_answers! {
        memory_info -> MemoryInfo;
        bar1_memory_info -> Bar1MemoryInfo;
        utilization_rates -> Utilization;
        encoder_utilization -> CodecUtilization;
        decoder_utilization -> CodecUtilization;
        fan_speed -> u32;
        temperature -> u32;
        power_usage -> u32;
        total_energy_consumption -> u64;
        performance_state -> u32;
        current_pcie_link_generation -> u32;
        current_pcie_link_width -> u32;
        clock_event_reasons -> u64;
        compute_processes -> Vec<ProcessInfo>;
        graphics_processes -> Vec<ProcessInfo>;
    }

    fn clock(&self, id: DeviceId, clock: ClockType) -> Result<u32> {
        self.dynamic_arg("clock", Some(clock as u32), id)?
            .clocks
            .get(clock)
            .get()
    }
    fn fan_speed_of(&self, id: DeviceId, fan: u32) -> Result<u32> {
        let dy = self.dynamic_arg("fan_speed_of", Some(fan), id)?;
        match dy.fan_speeds.get(fan as usize) {
            Some(a) => a.get(),
            None => Err(BackendError::InvalidArgument),
        }
    }
    fn pcie_throughput(&self, id: DeviceId, direction: PcieDirection) -> Result<u32> {
        let dy = self.dynamic_arg("pcie_throughput", Some(direction as u32), id)?;
        match direction {
            PcieDirection::Tx => dy.pcie_tx_throughput.get(),
            PcieDirection::Rx => dy.pcie_rx_throughput.get(),
        }
    }
    fn nvlink_throughput(&self, id: DeviceId, link: u32) -> Result<NvLinkCounters> {
        link_answer(
            &self
                .dynamic_arg("nvlink_throughput", Some(link), id)?
                .nvlink_throughput,
            link,
        )
    }
    fn ecc_errors(&self, id: DeviceId, kind: EccErrorKind, counter: EccCounter) -> Result<u64> {
        self.dynamic_arg("ecc_errors", Some(kind as u32 * 2 + counter as u32), id)?
            .ecc_errors
            .get(kind, counter)
            .get()
    }
    fn process_utilization(
        &self,
        id: DeviceId,
        since_us: u64,
    ) -> Result<Vec<ProcessUtilizationSample>> {
        match &self.dynamic("process_utilization", id)?.process_utilization {
            crate::fixture::Answer::Ok(samples) => Ok(samples
                .iter()
                .filter(|s| s.timestamp_us > since_us)
                .copied()
                .collect()),
            crate::fixture::Answer::Err(e) => Err(e.clone()),
        }
    }
}
