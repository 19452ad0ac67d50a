//! `windows-wddm`: a Windows 11 desktop with a GeForce RTX 2080 SUPER under the WDDM driver model,
//! where per-process GPU memory is not available and two ffmpeg NVENC encodes start.

use std::collections::BTreeMap;

use gpu_backend::{
    Architecture, Brand, CurrentPending, DeviceId, DriverModel, Fixture, Utilization,
    VirtualizationMode,
};

use super::common::*;

pub const STEM: &str = "windows-wddm";
const FRAMES: usize = 36;

/// The C+G desktop apps of the dump: PID, full image path.
const DESKTOP_APPS: [(u32, &str); 10] = [
    (2056, r"C:\Windows\System32\dwm.exe"),
    (
        4680,
        r"C:\Program Files\NVIDIA Corporation\NVIDIA GeForce Experience\NVIDIA Share.exe",
    ),
    (12332, r"C:\Windows\explorer.exe"),
    (
        12444,
        r"C:\Windows\SystemApps\MicrosoftWindows.Client.CBS_cw5n1h2txyewy\TextInputHost.exe",
    ),
    (
        14160,
        r"C:\Windows\SystemApps\MicrosoftWindows.Client.CBS_cw5n1h2txyewy\SearchHost.exe",
    ),
    (
        14184,
        r"C:\Windows\SystemApps\Microsoft.Windows.StartMenuExperienceHost_cw5n1h2txyewy\StartMenuExperienceHost.exe",
    ),
    (
        15076,
        r"C:\Windows\SystemApps\ShellExperienceHost_cw5n1h2txyewy\ShellExperienceHost.exe",
    ),
    (
        16280,
        r"C:\Program Files\Controller Companion\ControllerCompanion.exe",
    ),
    (20372, r"C:\Program Files\NZXT CAM\NZXT CAM.exe"),
    (
        24804,
        r"C:\Windows\ImmersiveControlPanel\SystemSettings.exe",
    ),
];
const FFMPEG: &str = r"C:\Users\utku\AppData\Local\Microsoft\WinGet\Packages\Gyan.FFmpeg_Microsoft.Winget.Source_8wekyb3d8bbwe\ffmpeg-8.1.1-full_build\bin\ffmpeg.exe";
/// The two ffmpeg encodes (compute only) and the frames they start at.
const ENCODES: [(u32, usize); 2] = [(25704, 5), (26660, 7)];
const USER: &str = r"DESKTOP-7K2M9QF\utku";

/// The card's figures in one state: used memory (MiB), GPU, memory and encoder utilization
/// (%), power (W), the temperature it heads for (°C), fan (%), P-state, and graphics, memory
/// and video clocks (MHz).
type Figures = (u64, u32, u32, u64, f64, f64, u32, u32, u32, u32, u32);

/// The card's figures with 0, 1 and 2 encodes running.
const BY_ENCODES: [Figures; 3] = [
    (702, 0, 0, 0, 38.9, 40.0, 38, 8, 300, 405, 540),
    (999, 4, 2, 50, 74.0, 43.0, 37, 2, 2055, 7500, 1905),
    (1296, 7, 3, 100, 97.5, 45.0, 38, 2, 2055, 7500, 1905),
];

/// The PCIe throughput (transmitted, received; KB/s) ranges with 0, 1 and 2 encodes running.
const PCIE_BY_ENCODES: [((u64, u64), (u64, u64)); 3] = [
    ((2_500, 3_200), (30, 90)),
    ((55_000, 68_000), (560_000, 640_000)),
    ((110_000, 130_000), (1_150_000, 1_260_000)),
];

pub fn build() -> Fixture {
    let mut rng = Rng::new(0x2080_5910);
    let uuid = rng.uuid("GPU");
    let mut s = static_unsupported();
    s.name = ok("NVIDIA GeForce RTX 2080 SUPER".to_string());
    s.uuid = ok(uuid.clone());
    s.pci_info = ok(pci(0x0C, 0x00, 0x1E81_10DE, 0x4005_1458));
    s.vbios_version = ok("90.04.7a.40.73".to_string());
    s.architecture = ok(Architecture::Turing);
    s.brand = ok(Brand::GeForce);
    s.max_clocks = clocks(2145, 2145, 7751, 1950);
    s.num_fans = ok(1);
    board_limits(&mut s, (97, 100), (250_000, 105_000, 350_000), (3, 16));
    // "Display Attached: Yes", "Display Active: Disabled" as nvidia-smi 591.86 reported them.
    board_modes(&mut s, (true, false), None, false, (7, 5));
    s.driver_model = ok(CurrentPending {
        current: DriverModel::Wddm,
        pending: DriverModel::Wddm,
    });
    // The dump: board 0xc00, virtualization None, and applications clocks "Requested
    // functionality has been deprecated" (driver 591).
    board_config(&mut s, (0x0C, 0x00), VirtualizationMode::None);
    applications_clocks_deprecated(&mut s);
    let mut devices = BTreeMap::new();
    devices.insert(DeviceId::Gpu(0), s);

    let st = START_S;
    let mut host_procs = BTreeMap::new();
    for (i, &(pid, path)) in DESKTOP_APPS.iter().enumerate() {
        let name = path.rsplit('\\').next().unwrap_or(path);
        let (user, ppid, started) = match pid {
            2056 => (r"Window Manager\DWM-1", 1024, st - 93_400),
            12332 => (USER, 11904, st - 93_350),
            _ => (USER, 1188, st - 93_300 + 40 * i as u64),
        };
        host_procs.insert(pid, host_proc(name, &[path], user, ppid, started));
    }
    for &(pid, start) in &ENCODES {
        host_procs.insert(
            pid,
            host_proc(
                "ffmpeg.exe",
                &[
                    FFMPEG,
                    "-hide_banner",
                    "-f",
                    "lavfi",
                    "-i",
                    "testsrc2=size=1920x1080:rate=120",
                    "-c:v",
                    "h264_nvenc",
                    "-preset",
                    "p4",
                    "-f",
                    "null",
                    "-",
                ],
                USER,
                21044,
                st + start as u64,
            ),
        );
    }

    let mut temp: f64 = 40.0;
    let mut energy: u64 = 4_112_900_000;
    // Windows has no load average.
    let mut machine = Host::new("DESKTOP-7K2M9QF", 16, (32 * GIB, 4 * GIB + 768 * MIB));
    let mut frames = Vec::new();
    for f in 0..FRAMES {
        let running: Vec<u32> = ENCODES
            .iter()
            .filter(|(_, s)| f >= *s)
            .map(|(p, _)| *p)
            .collect();
        let n = running.len();
        // Idle figures from the dump's idle state, load figures from its load state.
        let (used_mib, gpu_u, mem_u, enc_u, power_w, target_t, fan, pstate, gclk, mclk, vclk) =
            BY_ENCODES[n.min(2)];
        // One encode alone takes half the encoder, give or take a few percent.
        let enc_u = if n == 1 {
            enc_u + rng.range(0, 4)
        } else {
            enc_u
        };
        let ((tx_lo, tx_hi), (rx_lo, rx_hi)) = PCIE_BY_ENCODES[n.min(2)];
        let (tx, rx) = (rng.range(tx_lo, tx_hi), rng.range(rx_lo, rx_hi));
        let power = rng.jitter(power_w, 1.5, 10.0, 250.0);
        temp += (target_t - temp) * 0.35;
        let power_mw = (power * 1000.0) as u32;
        energy += u64::from(power_mw);
        let desktop: Vec<_> = DESKTOP_APPS
            .iter()
            .map(|&(pid, _)| proc_info(pid, None))
            .collect();
        let mut compute = desktop.clone();
        compute.extend(running.iter().map(|&pid| proc_info(pid, None)));
        compute.sort_by_key(|p| p.pid);
        let samples: Vec<_> = running
            .iter()
            .map(|&pid| {
                util_sample(
                    pid,
                    f,
                    rng.range(60_000, 700_000),
                    rng.range(3, 7) as u32,
                    rng.range(1, 2) as u32,
                    if n == 1 { 99 } else { rng.range(45, 99) as u32 },
                    0,
                )
            })
            .collect();
        let mut dy = dynamic_unsupported();
        dy.memory_info = ok(memory(
            8192 * MIB,
            Some(205 * MIB),
            used_mib * MIB + rng.range(0, 3) * MIB,
        ));
        dy.bar1_memory_info = ok(bar1(256 * MIB, 229 * MIB));
        dy.utilization_rates = ok(Utilization {
            gpu: gpu_u,
            memory: mem_u,
        });
        codecs(&mut dy, (enc_u as u32, 0), 167_000);
        dy.clocks = clocks(gclk, gclk, mclk, vclk);
        dy.fan_speed = ok(fan);
        dy.fan_speeds = vec![ok(fan)];
        dy.fan_target_speeds = vec![ok(fan)];
        gpu_state(&mut dy, temp.round() as u32, power_mw, pstate);
        dy.total_energy_consumption = ok(energy);
        pcie_link(&mut dy, (3, 16), (tx as u32, rx as u32));
        dy.ecc_errors = ecc_all(ns());
        dy.clock_event_reasons = ok(if n == 0 { reasons::GPU_IDLE } else { 0 });
        gpu_processes(&mut dy, compute, desktop, samples);
        let mut devs = BTreeMap::new();
        devs.insert(DeviceId::Gpu(0), dy);

        let mut host = BTreeMap::new();
        for &(pid, _) in &DESKTOP_APPS {
            let (cpu, rss) = match pid {
                2056 => (rng.rangef(0.5, 4.0), 182 * MIB),
                12332 => (rng.rangef(0.0, 1.5), 246 * MIB),
                20372 => (rng.rangef(0.5, 2.5), 311 * MIB),
                _ => (rng.rangef(0.0, 0.4), (40 + u64::from(pid % 97)) * MIB),
            };
            host.insert(pid, host_sample(cpu, rss, "running"));
        }
        for &pid in &running {
            host.insert(
                pid,
                host_sample(rng.rangef(160.0, 240.0), 268 * MIB, "running"),
            );
        }
        frames.push(machine.frame_of_processes(f, devs, (0.0, 9 * GIB, 1_350 * MIB), host));
    }

    fixture(
        meta(
            STEM,
            "A Windows 11 desktop with a GeForce RTX 2080 SUPER in the WDDM driver \
                          model: ten C+G desktop apps whose GPU memory is not available, then two \
                          ffmpeg NVENC encodes (compute) start and drive the encoder to 100 %.",
            "Values (name, PCI ids, bus id, VBIOS, memory total/reserved, BAR1, clocks \
                     and max clocks, power 250 W and 105-350 W, thresholds 100/97 °C, fan 38 %, \
                     idle and load figures, process PIDs and image paths, driver 591.86 / \
                     CUDA 13.1) from shared/reference-dumps/\
                     utku__windows-x86_64__nvidia-geforce-rtx-2080-super__591.86.txt; the UUID, \
                     host facts and the frames are synthesised.",
        ),
        system(("591.86", "13.591.86", 13010), 1, ok(vec![uuid])),
        devices,
        machine.facts(host_procs),
        frames,
    )
}
