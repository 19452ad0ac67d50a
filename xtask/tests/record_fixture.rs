//! `cargo xtask record-fixture` end to end: the built xtask binary records from fake-nvml
//! (installed as `libnvidia-ml.so.1`, frame pinned with `GPUSCOPE_FAKE_NVML_FRAME`) and writes a
//! fixture whose every frame equals that frame of the scenario fixture it served. Left out of the
//! comparison, because NVML cannot know them: the CUDA device order (libcuda's), the host facts
//! (this machine's, read live), the frame times (wall time) and the description. Also: with no
//! driver it says so plainly and fails.

#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use gpu_backend::{Answer, EventKind, Fixture, GpuBackend, GpuEvent, ProcessUtilizationSample};

const XTASK: &str = env!("CARGO_BIN_EXE_xtask");

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// A scratch folder under cargo's per-target temporary directory (`target/tmp`), so that the
/// installed library copies do not pile up in the system's /tmp run after run.
fn temp_dir(tag: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("xtask-record-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// fake-nvml's cdylib (built as a dependency of xtask), installed once per test process.
fn fake_library() -> &'static Path {
    static LIB: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    LIB.get_or_init(|| {
        let exe = std::env::current_exe().expect("test exe");
        let lib = fake_nvml::find_cdylib(&exe)
            .expect("fake-nvml's cdylib next to the test (built as xtask's dependency)");
        fake_nvml::install(&lib, &temp_dir("lib"))
            .expect("install")
            .nvml
    })
}

fn record(args: &[&std::ffi::OsStr], fixture: Option<(&Path, usize)>) -> Output {
    let mut cmd = Command::new(XTASK);
    cmd.arg("record-fixture")
        .args(args)
        .env_remove("GPUSCOPE_NVML_LIB")
        .env_remove("GPUSCOPE_FAKE_NVML_FIXTURE")
        .env_remove("GPUSCOPE_FAKE_NVML_FRAME");
    if let Some((path, frame)) = fixture {
        cmd.env("GPUSCOPE_FAKE_NVML_FIXTURE", path)
            .env("GPUSCOPE_FAKE_NVML_FRAME", frame.to_string());
    }
    cmd.output().expect("run xtask")
}

/// `record-fixture --out OUT --frames 1 --nvml-lib NVML_LIB`.
fn record_one_frame(
    out: &Path,
    nvml_lib: &std::ffi::OsStr,
    fixture: Option<(&Path, usize)>,
) -> Output {
    let args = [
        "--out".as_ref(),
        out.as_os_str(),
        "--frames".as_ref(),
        "1".as_ref(),
        "--nvml-lib".as_ref(),
        nvml_lib,
    ];
    record(&args, fixture)
}

/// What a run wrote to its standard error.
fn stderr(run: &Output) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(&run.stderr)
}

/// The distinct differences between the timestamps of recorded samples and those of the
/// fixture they were recorded from, sample by sample.
fn shifts(
    got: &[ProcessUtilizationSample],
    want: &[ProcessUtilizationSample],
) -> std::collections::BTreeSet<i128> {
    got.iter()
        .zip(want)
        .map(|(g, w)| i128::from(g.timestamp_us) - i128::from(w.timestamp_us))
        .collect()
}

fn scenario_fixtures() -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(workspace().join("fixtures"))
        .expect("fixtures/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "no fixtures in fixtures/");
    paths
}

#[test]
fn record_fixture_over_fake_nvml_gives_the_pinned_frame_back() {
    let lib = fake_library();
    let out_dir = temp_dir("out");
    for path in scenario_fixtures() {
        let want = Fixture::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let stem = path
            .file_stem()
            .expect("stem")
            .to_string_lossy()
            .into_owned();
        // A frame from the middle: for gpu-lost, one where a GPU is already lost.
        let frame = want.frames.len() / 2;
        let out = out_dir.join(format!("{stem}.json"));
        let run = record(
            &[
                "--out".as_ref(),
                out.as_os_str(),
                "--frames".as_ref(),
                "3".as_ref(),
                "--interval".as_ref(),
                "10ms".as_ref(),
                "--nvml-lib".as_ref(),
                lib.as_os_str(),
            ],
            Some((&path, frame)),
        );
        assert!(
            run.status.success(),
            "{stem}: record-fixture failed: {}",
            stderr(&run)
        );
        let got = Fixture::load(&out).unwrap_or_else(|e| panic!("{e}"));

        assert_eq!(
            got.meta.name, stem,
            "{stem}: the name defaults to the file stem"
        );
        assert!(
            got.meta.source.contains(&*lib.to_string_lossy()),
            "{stem}: the source names the library: {}",
            got.meta.source
        );
        // The NVML backend asks libcuda (fake-nvml's, installed beside it) for CUDA's order.
        if let Answer::Ok(order) = &want.system.cuda_device_order {
            assert_eq!(
                got.system.cuda_device_order,
                Answer::Ok(order.clone()),
                "{stem}: libcuda's order"
            );
        }
        let mut system = got.system.clone();
        system.cuda_device_order = want.system.cuda_device_order.clone();
        // The CUDA runtime is this machine's libcudart, which fake-nvml does not stand in for.
        system.cuda_runtime_version = want.system.cuda_runtime_version.clone();
        // A query the fixture does not record is served, and so recorded, as not supported.
        let mut served = want.as_served_through_nvml().system;
        served.cuda_runtime_version = want.system.cuda_runtime_version.clone();
        served.cuda_device_order = want.system.cuda_device_order.clone();
        assert_eq!(system, served, "{stem}: system answers");
        assert_eq!(
            got.devices,
            want.as_served_through_nvml().devices,
            "{stem}: static answers"
        );
        // fake-nvml exports every probed symbol (a function the fixture lists as missing
        // answers NVML_ERROR_FUNCTION_NOT_FOUND instead), so the symbol probe finds none missing.
        assert_eq!(got.nvml_missing_functions, Vec::<String>::new(), "{stem}");
        assert_eq!(got.frames.len(), 3, "{stem}: frames");
        // What each NVML function called cost, nvmlInit's and nvmlShutdown's included.
        let costs = got.nvml_costs.as_ref().expect("nvml_costs recorded");
        for function in ["nvmlInit_v2", "nvmlShutdown", "nvmlDeviceGetCount_v2"] {
            let cost = costs
                .get(function)
                .unwrap_or_else(|| panic!("{stem}: no cost for {function}: {costs:?}"));
            assert!(cost.wall_us > 0.0, "{stem}: {function}: {cost:?}");
            // Two clocks of their own resolution: the CPU time is within the wall time, give or
            // take a few percent.
            assert!(
                cost.cpu_us <= cost.wall_us * 1.05 + 1.0,
                "{stem}: {function}: {cost:?}"
            );
        }
        if want.devices.values().any(|d| d.name.ok().is_some()) {
            assert!(costs.contains_key("nvmlDeviceGetName"), "{stem}: {costs:?}");
        }
        assert!(
            !costs.contains_key("nvmlEventSetWait_v2"),
            "reading the listener's buffer is no NVML call"
        );
        // How the driver runs calls from several threads: measured wherever GPU 0 answers the
        // probe's query (over the fake at its own speed a call is too cheap for a verdict).
        let answers_probe = want
            .devices
            .get(&gpu_backend::DeviceId::Gpu(0))
            .is_some_and(|d| d.max_clocks.graphics.ok().is_some());
        assert_eq!(
            costs.concurrency_probe.as_ref().map(|p| p.query.as_str()),
            answers_probe.then_some("max_clock"),
            "{stem}"
        );
        // What the pinned frame serves as every event so far (the newest 256).
        let replay = gpu_backend::ReplayBackend::new(want.clone());
        replay.set_frame(frame);
        // Each device's events recorded so far, over the frames.
        let mut logged: std::collections::BTreeMap<gpu_backend::DeviceId, Vec<GpuEvent>> =
            Default::default();
        no_frame_holds_anything_newer_than_its_time(&stem, &got);
        for (i, f) in got.frames.iter().enumerate() {
            let mut devices = f.devices.clone();
            // Events come through the listener thread (listening for every kind, as a
            // recording does), which started with the recording: by each frame it has received
            // some or all of the events the pinned frame holds, in order, stamped with the
            // time they arrived (NVML's events carry none); each frame logs the new ones.
            for (id, d) in devices.iter_mut() {
                let w = replay.events(*id, 0);
                if let (Answer::Ok(g), Ok(w)) = (&d.events, &w) {
                    let log = logged.entry(*id).or_default();
                    log.extend(g.iter().copied());
                    let kinds = |l: &[GpuEvent]| -> Vec<(EventKind, u64)> {
                        l.iter().map(|e| (e.kind, e.data)).collect()
                    };
                    assert!(
                        kinds(w).starts_with(&kinds(log)),
                        "{stem}: frame {i} device {id}: events {log:?} are not the first of {w:?}"
                    );
                } else {
                    assert_eq!(
                        d.events.get().map(|_| ()),
                        w.map(|_| ()),
                        "{stem}: frame {i} device {id}: events"
                    );
                }
                d.events = want.frames[frame].devices[id].events.clone();
                // Process samples are served on the replay's clock: the recorded timestamps
                // moved by one shift.
                if let (Answer::Ok(g), Answer::Ok(w)) = (
                    &mut d.process_utilization,
                    &want.frames[frame].devices[id].process_utilization,
                ) {
                    let shifts = shifts(g, w);
                    assert!(
                        shifts.len() <= 1,
                        "{stem}: frame {i} device {id}: {shifts:?}"
                    );
                    for (g, w) in g.iter_mut().zip(w) {
                        g.timestamp_us = w.timestamp_us;
                    }
                }
            }
            // A query the frame does not record is served, and so recorded, as not supported.
            let mut expected = want.as_served_through_nvml().frames[frame].devices.clone();
            for (id, dy) in expected.iter_mut() {
                dy.events = want.frames[frame].devices[id].events.clone();
                dy.process_utilization = want.frames[frame].devices[id].process_utilization.clone();
            }
            if i == 0 {
                // GPM measures between two samples: the first refresh has only one, so a
                // device with GPM answers `no_data` there, and the pinned values after.
                for dy in expected.values_mut() {
                    if dy.gpm_metrics.ok().is_some() {
                        dy.gpm_metrics = Answer::Err(gpu_backend::BackendError::NoData);
                    }
                }
            }
            assert!(
                devices == expected,
                "{stem}: recorded frame {i} differs from frame {frame} of the fixture"
            );
        }
    }
}

/// `meta.recorded_at` is written to the millisecond, and each frame's `t_ms` counts from that
/// instant up to when the frame's answers were in: no event or process sample a frame holds is
/// newer than `recorded_at + t_ms`, which a replay relies on to place them.
fn no_frame_holds_anything_newer_than_its_time(stem: &str, got: &Fixture) {
    let recorded_at = got.meta.recorded_at.as_deref().expect("recorded_at");
    let millis = recorded_at
        .strip_suffix('Z')
        .and_then(|t| t.rsplit_once('.'))
        .map(|(_, ms)| ms);
    assert!(
        millis.is_some_and(|ms| ms.len() == 3 && ms.bytes().all(|b| b.is_ascii_digit())),
        "{stem}: recorded_at {recorded_at} has milliseconds"
    );
    let start_us = humantime::parse_rfc3339(recorded_at)
        .expect("RFC 3339")
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_micros();
    for (i, f) in got.frames.iter().enumerate() {
        let frame_us = start_us + u128::from(f.t_ms) * 1000;
        for (id, d) in &f.devices {
            for t in d.sample_times_us() {
                assert!(
                    u128::from(t) <= frame_us,
                    "{stem}: frame {i} device {id}: a timestamp {t} newer than the frame's time \
                     {frame_us} ({recorded_at} + {} ms)",
                    f.t_ms
                );
            }
        }
    }
}

/// Over the real H100's recording replayed on the wall clock (its clock events arriving as they
/// did, dozens a second, each stamped when the listener received it), every frame's time is
/// no earlier than the events and samples it holds.
#[test]
fn record_fixture_frame_times_are_never_before_what_the_frame_holds() {
    let out_dir = temp_dir("times");
    let out = out_dir.join("times.json");
    let real = workspace().join("fixtures/h100-real.json");
    let run = Command::new(XTASK)
        .args([
            "record-fixture",
            "--frames",
            "40",
            "--interval",
            "20ms",
            "--out",
        ])
        .arg(&out)
        .arg("--nvml-lib")
        .arg(fake_library())
        .env_remove("GPUSCOPE_NVML_LIB")
        .env_remove("GPUSCOPE_FAKE_NVML_FRAME")
        .env("GPUSCOPE_FAKE_NVML_FIXTURE", &real)
        .output()
        .expect("run xtask");
    assert!(run.status.success(), "{}", stderr(&run));
    let got = Fixture::load(&out).unwrap_or_else(|e| panic!("{e}"));
    let events: usize = got
        .frames
        .iter()
        .flat_map(|f| f.devices.values())
        .filter_map(|d| d.events.ok().map(Vec::len))
        .sum();
    assert!(events > 0, "clock events came while recording");
    no_frame_holds_anything_newer_than_its_time("h100-real", &got);
    let _ = std::fs::remove_dir_all(&out_dir);
}

#[test]
fn record_fixture_without_a_driver_says_so_and_fails() {
    let out = temp_dir("nodriver").join("never.json");
    let run = record_one_frame(&out, "/nonexistent/libnvidia-ml.so.1".as_ref(), None);
    let stderr = stderr(&run);
    assert!(!run.status.success(), "it must fail: {stderr}");
    assert!(
        stderr.contains("no NVIDIA driver here"),
        "the message says there is no driver: {stderr}"
    );
    assert!(
        !stderr.contains("panicked"),
        "no panic, a plain message: {stderr}"
    );
    assert!(!out.exists(), "no fixture is written");
}

#[test]
fn record_fixture_with_a_broken_fake_fixture_says_no_driver() {
    // fake-nvml answers NVML_ERROR_DRIVER_NOT_LOADED when its fixture cannot be read: what a
    // machine with the library but no loaded driver looks like.
    let dir = temp_dir("broken");
    let broken = dir.join("broken.json");
    std::fs::write(&broken, "{ not json").expect("write");
    let out = dir.join("never.json");
    let run = record_one_frame(&out, fake_library().as_os_str(), Some((&broken, 0)));
    let stderr = stderr(&run);
    assert!(!run.status.success(), "it must fail: {stderr}");
    assert!(stderr.contains("no NVIDIA driver here"), "{stderr}");
    assert!(!out.exists(), "no fixture is written");
}

/// `record-fixture --duration 1h` streams frames to the file as it records them, and Ctrl+C
/// (SIGINT) ends the file properly: a valid fixture with the frames taken so far. (Plain JSON,
/// so that the frames reach the disk as they come; compressed, they reach it a block at a
/// time.)
#[test]
fn record_fixture_streams_a_long_recording_and_ctrl_c_keeps_a_valid_fixture() {
    let lib = fake_library();
    let dir = temp_dir("stream");
    let out = dir.join("long.json");
    let partial = dir.join("long.json.partial");
    let _ = std::fs::remove_file(&out);
    let real = workspace().join("fixtures/h100-real.json");
    let mut child = Command::new(XTASK)
        .args([
            "record-fixture",
            "--duration",
            "1h",
            "--interval",
            "20ms",
            "--out",
        ])
        .arg(&out)
        .arg("--nvml-lib")
        .arg(lib)
        .env_remove("GPUSCOPE_NVML_LIB")
        .env("GPUSCOPE_FAKE_NVML_FIXTURE", &real)
        .env("GPUSCOPE_FAKE_NVML_FRAME", "30")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run xtask");
    // The frames go to the partial file while recording; the fixture appears only at the end.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::fs::metadata(&partial).map_or(0, |m| m.len()) < 8192 {
        assert!(
            std::time::Instant::now() < deadline,
            "nothing streamed to {partial:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(!out.exists(), "not in place before it is whole");
    // SAFETY: signalling our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let status = child.wait().expect("wait");
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(status.success(), "{stderr}");
    assert!(stderr.contains("interrupted: keeping the"), "{stderr}");
    let got = Fixture::load(&out).unwrap_or_else(|e| panic!("{e}"));
    assert!(got.frames.len() > 1, "{} frames", got.frames.len());
    assert!(got.frames.len() < 180_000, "stopped early");
    assert!(got.nvml_costs.is_some());
    assert!(!partial.exists());
    let _ = std::fs::remove_dir_all(&dir);
}
