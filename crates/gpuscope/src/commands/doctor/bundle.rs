//! `gpuscope doctor --bundle FILE`: a short recording of this machine for a bug report, with
//! its cost profile, scrubbed of what identifies a person, a machine or a site
//! (`gpu_backend::fixture::scrub`), that a maintainer replays with `--fixture FILE`
//! (docs/testing.md, "Sending a recording").
//!
//! One frame a second for `--bundle-seconds` (at most a minute), through the same timed
//! backend as doctor's queries, so the calls it makes are costed with the rest. Progress goes
//! to stderr; Ctrl+C (or SIGTERM) stops early and keeps the frames taken so far. The file is
//! written through `FixtureWriter::create`: never through a symbolic link, renamed into place
//! once whole, compressed as its name says (`.json.zst`).

use std::io::{IsTerminal, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result};
use gpu_backend::cost::CostProfile;
use gpu_backend::fixture::{Meta, Style};
use gpu_backend::host::HostSource;
use gpu_backend::recorder::{self, RecordOptions, WallTimeline};
use gpu_backend::{Fixture, GpuBackend};
use gpu_devices::text::Escaped;

/// The most JSON a bundle holds (before compression): frames past it are left out, the first
/// always kept. Ten seconds of an 8-GPU machine with its processes is well under a megabyte.
pub const MAX_BUNDLE_BYTES: usize = 16 * 1024 * 1024;

/// The time between two frames of a bundle.
const FRAME_INTERVAL: Duration = Duration::from_secs(1);

/// A bundle to record: where, for how long, and the flag Ctrl+C sets.
pub struct Plan {
    /// The file to write.
    pub path: PathBuf,
    /// How long to record.
    pub seconds: Duration,
    /// Set by Ctrl+C or SIGTERM: stop and keep what was recorded.
    pub stop: Arc<AtomicBool>,
}

impl Plan {
    /// A plan for `path`, with Ctrl+C (and SIGTERM) caught from now on: they stop the
    /// recording early instead of ending the program with nothing written.
    pub fn new(path: PathBuf, seconds: Duration) -> Result<Plan> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed))
            .context("cannot install the Ctrl+C handler")?;
        Ok(Plan {
            path,
            seconds,
            stop,
        })
    }

    /// Whether Ctrl+C was pressed.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Records one frame a second from `backend` and `host` for the plan's duration (at least
    /// one frame, whenever Ctrl+C comes), showing the progress on stderr.
    pub fn record(&self, backend: &dyn GpuBackend, host: &dyn HostSource) -> Fixture {
        let frames = (self.seconds.as_secs() as usize).max(1) + 1;
        let (started_at, started) = whole_millisecond_now();
        let options = RecordOptions {
            frames,
            meta: Meta {
                name: "doctor-bundle".into(),
                description: String::new(),
                source: String::new(),
                recorded_at: Some(humantime::format_rfc3339_millis(started_at).to_string()),
            },
            nvml_missing_functions: Vec::new(),
        };
        let terminal = std::io::stderr().is_terminal();
        eprintln!(
            "gpuscope doctor: recording the bundle for {} (Ctrl+C stops early and keeps what \
             was recorded)",
            crate::cli::args::show_duration(self.seconds)
        );
        let mut timeline = WallTimeline::starting_at(started, FRAME_INTERVAL);
        let fixture = recorder::record(
            backend,
            host,
            &mut timeline,
            options,
            Some(&self.stop),
            &mut |done, total| {
                if terminal {
                    eprint!("\r  frame {done}/{total}");
                    let _ = std::io::stderr().flush();
                }
            },
        );
        if terminal {
            eprintln!();
        }
        if self.stopped() {
            eprintln!(
                "gpuscope doctor: interrupted: keeping the {} recorded so far",
                super::plural(fixture.frames.len(), "frame")
            );
        }
        fixture
    }

    /// Scrubs `recording`, adds `costs`, keeps it within [`MAX_BUNDLE_BYTES`], and writes it
    /// to the plan's file, saying on stderr what was written.
    pub fn write(&self, recording: Fixture, costs: CostProfile) -> Result<()> {
        let mut bundle = recording.scrubbed("doctor-bundle");
        bundle.meta.description = format!(
            "gpuscope doctor --bundle: {} a second apart, with the machine's NVML call \
             costs, scrubbed for a bug report",
            super::plural(bundle.frames.len(), "frame")
        );
        bundle.nvml_costs = Some(costs);
        let dropped = fit(&mut bundle, MAX_BUNDLE_BYTES);
        let shown = Escaped(&self.path.display().to_string()).to_string();
        bundle
            .save(&self.path, Style::Compact)
            .with_context(|| format!("nothing written: cannot write the bundle {shown}"))?;
        let size = std::fs::metadata(&self.path).map_or(0, |m| m.len());
        eprintln!(
            "gpuscope doctor: wrote {shown}: {}{}, {} bytes; replay it with --fixture {shown}",
            super::plural(bundle.frames.len(), "frame"),
            if dropped > 0 {
                format!(" ({dropped} more left out to stay under {MAX_BUNDLE_BYTES} bytes)")
            } else {
                String::new()
            },
            size,
        );
        Ok(())
    }
}

/// Leaves frames out of `bundle`, from the end, until its compact JSON is at most `max`
/// bytes; the first frame always stays. Returns how many were left out.
fn fit(bundle: &mut Fixture, max: usize) -> usize {
    let mut dropped = 0;
    while bundle.frames.len() > 1 && bundle.to_json(Style::Compact).len() > max {
        let keep = (bundle.frames.len() / 2).max(1);
        dropped += bundle.frames.len() - keep;
        bundle.frames.truncate(keep);
    }
    dropped
}

/// Now, on the wall clock to the millisecond and on the monotonic clock at the same instant:
/// the recording's `recorded_at` and the instant its frames' `t_ms` count from.
fn whole_millisecond_now() -> (SystemTime, Instant) {
    let (wall, mono) = (SystemTime::now(), Instant::now());
    let sub_ms = wall
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(Duration::ZERO, |d| {
            Duration::from_nanos(u64::from(d.subsec_nanos() % 1_000_000))
        });
    (wall - sub_ms, mono.checked_sub(sub_ms).unwrap_or(mono))
}

/// Whether `path` names a file a bundle may be written to, for the usage error before
/// anything is recorded: not a symbolic link (the writer refuses one too), in a directory
/// that exists.
pub fn check_path(path: &Path) -> Result<(), String> {
    if path
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink())
    {
        return Err(format!(
            "--bundle {}: is a symbolic link; gpuscope does not write through a link (name \
             the file itself, or remove the link)",
            Escaped(&path.display().to_string())
        ));
    }
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if dir.is_dir() {
        Ok(())
    } else {
        Err(format!(
            "--bundle {}: no directory {}",
            Escaped(&path.display().to_string()),
            Escaped(&dir.display().to_string())
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bundle_over_its_size_keeps_its_first_frames() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/h100-real.json");
        let mut fixture = Fixture::load(path).unwrap();
        let whole = fixture.to_json(Style::Compact).len();
        let frames = fixture.frames.len();
        let dropped = fit(&mut fixture, whole / 3);
        assert!(fixture.to_json(Style::Compact).len() <= whole / 3);
        assert_eq!(fixture.frames.len() + dropped, frames);
        assert!(!fixture.frames.is_empty());
        // Under the cap: nothing left out.
        let mut small = Fixture::load(path).unwrap();
        assert_eq!(fit(&mut small, whole), 0);
        // However small the cap, one frame stays.
        assert_eq!(fit(&mut small, 1), frames - 1);
        assert_eq!(small.frames.len(), 1);
    }
}
