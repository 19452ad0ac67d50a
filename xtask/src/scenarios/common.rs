//! Helpers shared by the scenario generators: a small deterministic PRNG, unit constants, and
//! builders for device answers that start from "not supported" and are filled in per scenario.

use std::collections::BTreeMap;

use gpu_backend::fixture::{
    trim_link_answers, DeviceDynamic, DeviceStatic, EccCounts, Frame, HostFrame, HostProcessFacts,
    HostProcessSample, HostStatic, Meta, SystemAnswers, SCHEMA_VERSION,
};
use gpu_backend::{
    Answer, BackendError, Bar1MemoryInfo, CodecUtilization, ComputeCapability, ComputeMode,
    CurrentPending, DeviceId, Fixture, GpmMetrics, LocationEccCounts, MemoryInfo, NvLinkCounters,
    NvLinkErrorCounters, PciInfo, PerClock, PowerLimits, ProcessInfo, ProcessUtilizationSample,
    VirtualizationMode,
};

/// Bytes in a MiB.
pub const MIB: u64 = 1024 * 1024;
/// Bytes in a GiB.
pub const GIB: u64 = 1024 * MIB;
/// Recording start of every scenario: 2026-11-01T10:00:00Z, seconds since the Unix epoch.
pub const START_S: u64 = 1_793_527_200;
/// The same instant in RFC 3339, kept as each scenario's `meta.recorded_at` (replay derives the
/// host's "now", and so process running times, from it).
pub const RECORDED_AT: &str = "2026-11-01T10:00:00Z";
/// Recording start in microseconds since the Unix epoch.
pub const START_US: u64 = START_S * 1_000_000;
/// Time between frames, ms.
pub const FRAME_MS: u64 = 1000;

/// NVML clock event reason bits (`gpu_backend::ClockEventReasons`), as a fixture stores them.
pub mod reasons {
    use gpu_backend::ClockEventReasons;

    /// The GPU is idle.
    pub const GPU_IDLE: u64 = ClockEventReasons::GPU_IDLE.bits();
    /// Software power cap.
    pub const SW_POWER_CAP: u64 = ClockEventReasons::SW_POWER_CAP.bits();
    /// Hardware slowdown (clocks cut by the hardware: overheating, a power brake, a bad supply).
    pub const HW_SLOWDOWN: u64 = ClockEventReasons::HW_SLOWDOWN.bits();
}

/// A small deterministic PRNG (SplitMix64); no dependency, same numbers on every machine.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `[lo, hi]` (integers).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        lo + self.next_u64() % (hi - lo + 1)
    }

    /// Uniform in `[lo, hi)` (floats).
    pub fn rangef(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }

    /// `value` plus or minus up to `spread`, clamped to `[lo, hi]`.
    pub fn jitter(&mut self, value: f64, spread: f64, lo: f64, hi: f64) -> f64 {
        (value + self.rangef(-spread, spread)).clamp(lo, hi)
    }

    /// A UUID-shaped string with the given prefix (`GPU` or `MIG`).
    pub fn uuid(&mut self, prefix: &str) -> String {
        let a = self.next_u64();
        let b = self.next_u64();
        format!(
            "{prefix}-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xffff,
            b >> 48,
            b & 0xffff_ffff_ffff
        )
    }
}

/// Shorthand for an `ok` answer.
pub fn ok<T>(v: T) -> Answer<T> {
    Answer::Ok(v)
}

/// Shorthand for a `not_supported` answer.
pub fn ns<T>() -> Answer<T> {
    Answer::Err(BackendError::NotSupported)
}

/// Shorthand for a `function_not_found` answer.
pub fn fnf<T>() -> Answer<T> {
    Answer::Err(BackendError::FunctionNotFound)
}

/// Clocks in MHz for graphics, SM, memory, video.
pub fn clocks(graphics: u32, sm: u32, memory: u32, video: u32) -> PerClock<Answer<u32>> {
    PerClock {
        graphics: ok(graphics),
        sm: ok(sm),
        memory: ok(memory),
        video: ok(video),
    }
}

/// A GPM reading of a Hopper GPU (or MIG device) whose SMs are busy `busy` percent of the
/// time, `tensor` of that on tensor cores; NVLink figures only with `nvlink`. A recording's
/// first frame has no earlier sample to measure from: `no_data`. Values come from `rng` (a
/// generator of their own, so that the scenario's other values stay as they were).
pub fn gpm_reading(
    frame: usize,
    busy: f64,
    tensor: f64,
    nvlink: bool,
    rng: &mut Rng,
) -> Answer<GpmMetrics> {
    if frame == 0 {
        return Answer::Err(BackendError::NoData);
    }
    let busy = busy.clamp(0.0, 100.0);
    let pct = |v: f64| Some(round2(v.clamp(0.0, 100.0)));
    let mut m = GpmMetrics {
        graphics_activity: pct(busy),
        sm_activity: pct(busy * rng.rangef(0.86, 0.96)),
        sm_occupancy: pct(busy * rng.rangef(0.30, 0.48)),
        integer_activity: pct(busy * rng.rangef(0.04, 0.09)),
        tensor_activity: pct(busy * tensor),
        tensor_dfma_activity: Some(0.0),
        tensor_hmma_activity: pct(busy * tensor * rng.rangef(0.95, 0.99)),
        tensor_imma_activity: Some(0.0),
        dram_activity: pct(busy * rng.rangef(0.35, 0.55)),
        fp64_activity: Some(0.0),
        fp32_activity: pct(busy * rng.rangef(0.08, 0.15)),
        fp16_activity: pct(busy * rng.rangef(0.02, 0.05)),
        pcie_tx: Some(round2(rng.rangef(20.0, 60.0) + busy * 2.5)),
        pcie_rx: Some(round2(rng.rangef(30.0, 90.0) + busy * 4.0)),
        nvofa0_activity: Some(0.0),
        ..GpmMetrics::default()
    };
    // H100 has 7 NVDEC and 7 NVJPG engines, idle here.
    for engine in 0..7 {
        for id in [30 + engine, 40 + engine] {
            if let Some(slot) = m.slot_by_id(id) {
                *slot = Some(0.0);
            }
        }
    }
    if nvlink {
        m.nvlink_tx = Some(round2(busy * rng.rangef(900.0, 1100.0)));
        m.nvlink_rx = Some(round2(busy * rng.rangef(900.0, 1100.0)));
    }
    ok(m)
}

/// NVLink error counters for `links` links, all zero but link `noisy` (if any), which has
/// taken `replays` replays and a CRC flit error per ten replays.
pub fn nvlink_errors(
    links: usize,
    noisy: Option<(usize, u64)>,
) -> Vec<Answer<NvLinkErrorCounters>> {
    (0..links)
        .map(|l| {
            let replays = match noisy {
                Some((n, r)) if n == l => r,
                _ => 0,
            };
            ok(NvLinkErrorCounters {
                replay: replays,
                recovery: 0,
                crc_flit: replays / 10,
                crc_data: 0,
            })
        })
        .collect()
}

/// ECC counts of one memory location, all zero.
pub fn location_ecc_zero() -> Answer<LocationEccCounts> {
    ok(LocationEccCounts {
        volatile_corrected: Some(0),
        volatile_uncorrected: Some(0),
        aggregate_corrected: Some(0),
        aggregate_uncorrected: Some(0),
    })
}

/// ECC counts that all answer the same.
pub fn ecc_all(a: Answer<u64>) -> EccCounts {
    EccCounts {
        volatile_corrected: a.clone(),
        volatile_uncorrected: a.clone(),
        aggregate_corrected: a.clone(),
        aggregate_uncorrected: a,
    }
}

/// PCI info from a bus id of the form `00000000:BB:DD.0`.
pub fn pci(bus: u32, device: u32, pci_device_id: u32, pci_subsystem_id: u32) -> PciInfo {
    PciInfo {
        bus_id: format!("00000000:{bus:02X}:{device:02X}.0"),
        domain: 0,
        bus,
        device,
        pci_device_id,
        pci_subsystem_id,
    }
}

/// A device whose every static query answers `not_supported`; scenarios fill in the rest.
pub fn static_unsupported() -> DeviceStatic {
    DeviceStatic::all_failing(&BackendError::NotSupported)
}

/// A scenario's description, recorded at [`RECORDED_AT`].
pub fn meta(stem: &str, description: &str, source: &str) -> Meta {
    Meta {
        name: stem.to_string(),
        description: description.to_string(),
        source: source.to_string(),
        recorded_at: Some(RECORDED_AT.to_string()),
    }
}

/// A scenario's system answers: driver, NVML and CUDA versions, the GPU count and CUDA's order.
/// Any other system query answers `not_supported`, so that a query added to the table needs no
/// change here.
pub fn system(
    (driver, nvml, cuda): (&str, &str, i32),
    device_count: u32,
    cuda_device_order: Answer<Vec<String>>,
) -> SystemAnswers {
    let mut s = SystemAnswers::all_failing(&BackendError::NotSupported);
    s.driver_version = ok(driver.to_string());
    s.nvml_version = ok(nvml.to_string());
    s.cuda_driver_version = ok(cuda);
    s.device_count = ok(device_count);
    s.cuda_device_order = cuda_device_order;
    s
}

/// A board's fixed limits as its dump gives them: temperature thresholds (slowdown, shutdown,
/// °C), power limits (the limit, which is also the one in force, and its range, mW), and the
/// widest PCIe link (generation, lanes). Power management is on.
pub fn board_limits(
    s: &mut DeviceStatic,
    (slowdown, shutdown): (u32, u32),
    (limit_mw, min_mw, max_mw): (u32, u32, u32),
    (pcie_gen, pcie_width): (u32, u32),
) {
    s.temperature_slowdown = ok(slowdown);
    s.temperature_shutdown = ok(shutdown);
    s.power_management_mode = ok(true);
    s.power_management_limit = ok(limit_mw);
    s.power_management_limit_constraints = ok(PowerLimits { min_mw, max_mw });
    s.enforced_power_limit = ok(limit_mw);
    s.max_pcie_link_generation = ok(pcie_gen);
    s.max_pcie_link_width = ok(pcie_width);
}

/// A board's modes as its dump shows them: display attached and active, persistence mode (`None`:
/// left `not_supported`), ECC on (current and pending) where `ecc` (else left `not_supported`),
/// compute mode Default, and the CUDA compute capability (major, minor).
pub fn board_modes(
    s: &mut DeviceStatic,
    (attached, active): (bool, bool),
    persistence: Option<bool>,
    ecc: bool,
    (major, minor): (u32, u32),
) {
    s.display_mode = ok(attached);
    s.display_active = ok(active);
    if let Some(on) = persistence {
        s.persistence_mode = ok(on);
    }
    if ecc {
        s.ecc_mode = ok(CurrentPending {
            current: true,
            pending: true,
        });
    }
    s.compute_mode = ok(ComputeMode::Default);
    s.cuda_compute_capability = ok(ComputeCapability { major, minor });
}

/// A board's configuration as its dump shows it (`nvidia-smi -q`): the board id, which is the
/// PCI bus and device (`0x1800` for 18:00.0; so in every reference dump, and `0x6` for 00:06.0 on
/// the real H100 of fixtures/h100-real/), not on a multi-GPU board, accounting off, no GPU
/// operation mode (`N/A`, NVML's NOT_SUPPORTED on the real H100), and the virtualization mode
/// given. The applications clocks are the caller's: dumps differ there.
pub fn board_config(
    s: &mut DeviceStatic,
    (bus, device): (u32, u32),
    virtualization: VirtualizationMode,
) {
    s.board_id = ok(bus << 8 | device);
    s.multi_gpu_board = ok(false);
    s.virtualization_mode = ok(virtualization);
    s.accounting_mode = ok(false);
    s.gpu_operation_mode = ns();
}

/// Applications clocks (graphics, memory) as a dump prints them; nvidia-smi prints no SM or
/// video applications clock, so those answer `missing`.
pub fn app_clocks(
    graphics_memory: Answer<(u32, u32)>,
    missing: Answer<u32>,
) -> PerClock<Answer<u32>> {
    let (graphics, memory) = match graphics_memory {
        Answer::Ok((g, m)) => (ok(g), ok(m)),
        Answer::Err(e) => (Answer::Err(e.clone()), Answer::Err(e)),
    };
    PerClock {
        graphics,
        sm: missing.clone(),
        memory,
        video: missing,
    }
}

/// Applications clocks and their defaults as drivers 590 and newer answer them: nvidia-smi
/// prints "Requested functionality has been deprecated" for the graphics and memory clocks
/// (the H100 and RTX 2080 SUPER dumps of 590.48.01 and 591.86), and so for the whole call.
pub fn applications_clocks_deprecated(s: &mut DeviceStatic) {
    let clocks = app_clocks(
        Answer::Err(BackendError::Deprecated),
        Answer::Err(BackendError::Deprecated),
    );
    s.applications_clocks = clocks.clone();
    s.default_applications_clocks = clocks;
}

/// A frame of a device whose every changing query answers `not_supported`.
pub fn dynamic_unsupported() -> DeviceDynamic {
    dynamic_all(BackendError::NotSupported)
}

/// A frame of a device whose every changing query answers `e` (e.g. a lost GPU).
pub fn dynamic_all(e: BackendError) -> DeviceDynamic {
    DeviceDynamic::all_failing(&e)
}

/// Encoder and decoder utilization, percent, over the sampling period the board answers.
pub fn codecs(dy: &mut DeviceDynamic, (encoder, decoder): (u32, u32), sampling_period_us: u32) {
    dy.encoder_utilization = ok(CodecUtilization {
        utilization: encoder,
        sampling_period_us,
    });
    dy.decoder_utilization = ok(CodecUtilization {
        utilization: decoder,
        sampling_period_us,
    });
}

/// The PCIe link in use (generation, width) and its throughput (transmitted, received), KB/s.
pub fn pcie_link(dy: &mut DeviceDynamic, (generation, width): (u32, u32), (tx, rx): (u32, u32)) {
    dy.current_pcie_link_generation = ok(generation);
    dy.current_pcie_link_width = ok(width);
    dy.pcie_tx_throughput = ok(tx);
    dy.pcie_rx_throughput = ok(rx);
}

/// The GPU's temperature (°C), power draw (mW) and performance state.
pub fn gpu_state(dy: &mut DeviceDynamic, temperature_c: u32, power_mw: u32, pstate: u32) {
    dy.temperature = ok(temperature_c);
    dy.power_usage = ok(power_mw);
    dy.performance_state = ok(pstate);
}

/// The processes of a frame: compute and graphics processes, and the utilization samples.
pub fn gpu_processes(
    dy: &mut DeviceDynamic,
    compute: Vec<ProcessInfo>,
    graphics: Vec<ProcessInfo>,
    samples: Vec<ProcessUtilizationSample>,
) {
    dy.compute_processes = ok(compute);
    dy.graphics_processes = ok(graphics);
    dy.process_utilization = ok(samples);
}

/// Frame-buffer memory with `used = used`, `free = total - used - reserved`.
pub fn memory(total: u64, reserved: Option<u64>, used: u64) -> MemoryInfo {
    let free = total
        .saturating_sub(used)
        .saturating_sub(reserved.unwrap_or(0));
    MemoryInfo {
        total,
        free,
        used,
        reserved,
    }
}

/// BAR1 memory.
pub fn bar1(total: u64, used: u64) -> Bar1MemoryInfo {
    Bar1MemoryInfo {
        total,
        free: total.saturating_sub(used),
        used,
    }
}

/// A process outside MIG.
pub fn proc_info(pid: u32, used: Option<u64>) -> ProcessInfo {
    ProcessInfo {
        pid,
        used_gpu_memory: used,
        gpu_instance_id: None,
        compute_instance_id: None,
    }
}

/// A process sample at frame `frame`: taken a little before the frame's time.
pub fn util_sample(
    pid: u32,
    frame: usize,
    offset_us: u64,
    sm: u32,
    memory: u32,
    encoder: u32,
    decoder: u32,
) -> ProcessUtilizationSample {
    ProcessUtilizationSample {
        pid,
        timestamp_us: frame_time_us(frame).saturating_sub(offset_us),
        sm,
        memory,
        encoder,
        decoder,
    }
}

/// Microseconds since the Unix epoch at frame `frame`.
pub fn frame_time_us(frame: usize) -> u64 {
    START_US + frame as u64 * FRAME_MS * 1000
}

/// NVLink counters for `n` active links (untrimmed lists of 18 values stay 18 long).
pub fn nvlink_counters(counters: &[(u64, u64)]) -> Vec<Answer<NvLinkCounters>> {
    let mut list: Vec<Answer<NvLinkCounters>> = counters
        .iter()
        .map(|&(tx_kib, rx_kib)| ok(NvLinkCounters { tx_kib, rx_kib }))
        .collect();
    trim_link_answers(&mut list);
    list
}

/// Host-process facts.
pub fn host_proc(
    name: &str,
    cmdline: &[&str],
    user: &str,
    ppid: u32,
    start_time_s: u64,
) -> HostProcessFacts {
    HostProcessFacts {
        name: Some(name.to_string()),
        cmdline: cmdline.iter().map(|s| s.to_string()).collect(),
        user: Some(user.to_string()),
        ppid: Some(ppid),
        start_time_s: Some(start_time_s),
        container: None,
    }
}

/// Xorg's host facts: `/usr/lib/xorg/Xorg` with `args` (separated by white space).
pub fn xorg(args: &str, user: &str, ppid: u32, start_time_s: u64) -> HostProcessFacts {
    let cmdline: Vec<&str> = std::iter::once("/usr/lib/xorg/Xorg")
        .chain(args.split_whitespace())
        .collect();
    host_proc("Xorg", &cmdline, user, ppid, start_time_s)
}

/// A changing host-process sample.
pub fn host_sample(cpu_percent: f64, rss: u64, status: &str) -> HostProcessSample {
    HostProcessSample {
        cpu_percent: Some(round1(cpu_percent)),
        rss: Some(rss),
        status: Some(status.to_string()),
    }
}

/// CPUs the sampled processes keep busy (their CPU percents summed, over 100).
pub fn processes_cpus(processes: &BTreeMap<u32, HostProcessSample>) -> f64 {
    processes
        .values()
        .filter_map(|h| h.cpu_percent)
        .sum::<f64>()
        / 100.0
}

/// Resident memory of the sampled processes, bytes.
pub fn processes_rss(processes: &BTreeMap<u32, HostProcessSample>) -> u64 {
    processes.values().filter_map(|h| h.rss).sum::<u64>()
}

/// The host a scenario runs on: its name, CPU count, memory and swap, and a load average (none
/// on Windows) that follows the busy CPUs from frame to frame.
#[derive(Debug, Clone)]
pub struct Host {
    hostname: &'static str,
    cpu_count: u32,
    memory_total: u64,
    swap_total: u64,
    load: Option<LoadAvg>,
}

impl Host {
    /// A host with `cpu_count` CPUs, `memory_total` and `swap_total` bytes, and no load average
    /// (see [`Host::with_load`]).
    pub fn new(
        hostname: &'static str,
        cpu_count: u32,
        (memory_total, swap_total): (u64, u64),
    ) -> Host {
        Host {
            hostname,
            cpu_count,
            memory_total,
            swap_total,
            load: None,
        }
    }

    /// The same host with a load average that starts at `start`.
    pub fn with_load(self, start: [f64; 3]) -> Host {
        Host {
            load: Some(LoadAvg::new(start)),
            ..self
        }
    }

    /// Frame `f`: the devices' answers, and the host with `busy_cpus` CPUs busy (its CPU percent
    /// rounded to a tenth; the load average steps toward them), `memory_used` and `swap_used`
    /// bytes in use, and the processes' samples.
    pub fn frame(
        &mut self,
        f: usize,
        devices: BTreeMap<DeviceId, DeviceDynamic>,
        busy_cpus: f64,
        (memory_used, swap_used): (u64, u64),
        processes: BTreeMap<u32, HostProcessSample>,
    ) -> Frame {
        Frame {
            t_ms: f as u64 * FRAME_MS,
            devices,
            host: HostFrame {
                cpu_percent: Some(round1(busy_cpus / f64::from(self.cpu_count) * 100.0)),
                memory_used: Some(memory_used),
                swap_used: Some(swap_used),
                load_average: self.load.as_mut().map(|l| l.step(busy_cpus)),
                processes,
            },
        }
    }

    /// Frame `f` of a host busy with its sampled processes plus `other_cpus` CPUs, using their
    /// resident memory plus `other_memory` bytes, and `swap_used` bytes of swap.
    pub fn frame_of_processes(
        &mut self,
        f: usize,
        devices: BTreeMap<DeviceId, DeviceDynamic>,
        (other_cpus, other_memory, swap_used): (f64, u64, u64),
        processes: BTreeMap<u32, HostProcessSample>,
    ) -> Frame {
        let busy = processes_cpus(&processes) + other_cpus;
        let memory_used = other_memory + processes_rss(&processes);
        self.frame(f, devices, busy, (memory_used, swap_used), processes)
    }

    /// The host's fixed facts, with those of the processes it runs.
    pub fn facts(&self, processes: BTreeMap<u32, HostProcessFacts>) -> HostStatic {
        HostStatic {
            hostname: Some(self.hostname.to_string()),
            cpu_count: Some(self.cpu_count),
            memory_total: Some(self.memory_total),
            swap_total: Some(self.swap_total),
            processes,
        }
    }
}

/// A scenario's fixture, in the current schema, with no NVML function missing and no costs.
pub fn fixture(
    meta: Meta,
    system: SystemAnswers,
    devices: BTreeMap<DeviceId, DeviceStatic>,
    host: HostStatic,
    frames: Vec<Frame>,
) -> Fixture {
    Fixture {
        schema_version: SCHEMA_VERSION,
        meta,
        system,
        nvml_missing_functions: Vec::new(),
        devices,
        host,
        frames,
        nvml_costs: None,
    }
}

/// Rounds to one decimal place, so the JSON stays short and round-trips exactly.
pub fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// Rounds to two decimal places.
pub fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// A load average that follows `target` (number of busy CPUs) with the kernel's decay factors.
#[derive(Debug, Clone, Copy)]
pub struct LoadAvg([f64; 3]);

impl LoadAvg {
    /// Starts at the given averages.
    pub fn new(start: [f64; 3]) -> LoadAvg {
        LoadAvg(start)
    }

    /// Advances one second toward `target` and returns the rounded averages.
    pub fn step(&mut self, target: f64) -> [f64; 3] {
        for (v, secs) in self.0.iter_mut().zip([60.0f64, 300.0, 900.0]) {
            let k = (-1.0 / secs).exp();
            *v = *v * k + target * (1.0 - k);
        }
        [round2(self.0[0]), round2(self.0[1]), round2(self.0[2])]
    }
}

/// Smooth warm-up from `from` to `to` over `frames` frames starting at `start` (linear ramp).
pub fn ramp(frame: usize, start: usize, frames: usize, from: f64, to: f64) -> f64 {
    if frame <= start {
        return from;
    }
    let done = (frame - start) as f64 / frames.max(1) as f64;
    if done >= 1.0 {
        to
    } else {
        from + (to - from) * done
    }
}
