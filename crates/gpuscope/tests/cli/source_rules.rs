//! One set of source rules: a frame out of range is the same error through the library entry
//! points (`gpu_backend::Source`, `Context::open_source`, `ProcessCollector::from_fixture`) and
//! the CLI (`--frame`), never a clamp to the last frame.

use std::path::PathBuf;
use std::process::Command;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/old-driver.json")
}

#[test]
fn a_frame_out_of_range_is_the_same_error_in_the_library_and_the_cli() {
    // ProcessCollector::from_fixture clamped a bad frame silently while the CLI refused it.
    let frames = gpu_backend::Fixture::load(fixture())
        .unwrap_or_else(|e| panic!("{e}"))
        .frames
        .len();
    let source = gpu_backend::Source::FixtureFile {
        path: fixture(),
        frame: Some(frames),
    };
    let want = format!(
        "frame {frames} is out of range: the recording has frames 0 to {}",
        frames - 1
    );
    let err = |r: Result<(), String>| r.err().unwrap_or_default();
    assert_eq!(
        err(source.open().map(drop).map_err(|e| e.to_string())),
        want
    );
    assert_eq!(
        err(gpu_devices::Context::open_source(&source)
            .map(drop)
            .map_err(|e| e.to_string())),
        want
    );
    assert_eq!(
        err(
            gpu_processes::ProcessCollector::from_fixture(fixture(), Some(frames))
                .map(drop)
                .map_err(|e| e.to_string())
        ),
        want
    );
    for command in ["snapshot", "info", "select"] {
        let out = Command::new(env!("CARGO_BIN_EXE_gpuscope"))
            .args([command, "--fixture"])
            .arg(fixture())
            .args(["--frame", &frames.to_string()])
            .env_remove("GPUSCOPE_FIXTURE")
            .output()
            .expect("gpuscope runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command}: {stderr}");
        assert!(stderr.contains(&format!("--{want}")), "{command}: {stderr}");
    }
}
