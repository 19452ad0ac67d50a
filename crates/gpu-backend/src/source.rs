//! Where the answers come from: one [`Source`] opens a backend and its host facts for every
//! command and library entry point, with one set of rules.
//!
//! * A fixture replays on wall time, looping, or serves one frame; a frame out of range is
//!   [`SourceError::FrameOutOfRange`], never clamped.
//! * The real GPUs are NVML ([`crate::NvmlBackend`], which also asks libcuda for CUDA's order)
//!   with this machine's host facts.
//! * [`Source::from_env`]: `GPUSCOPE_FIXTURE` names a fixture, else NVML from
//!   `GPUSCOPE_NVML_LIB` (or the default library).
//! * When the `tracing` subscriber takes `debug` events of `gpu_backend::calls`
//!   ([`crate::cost::calls_logged`]) as the source is opened, the backend is wrapped in a
//!   [`crate::cost::TimedBackend`] that logs every call ([`crate::cost::CallLog`]); otherwise
//!   it is handed out bare, and the log costs nothing.

use std::path::PathBuf;
use std::sync::Arc;

use crate::host::{HostSource, ReplayHost};
use crate::{Fixture, FixtureError, GpuBackend, ReplayBackend, ReplayClock};

/// The environment variable that names a fixture to replay instead of the real GPUs.
pub const FIXTURE_ENV_VAR: &str = "GPUSCOPE_FIXTURE";
/// The environment variable that names the NVML library to load.
pub const NVML_LIB_ENV_VAR: &str = "GPUSCOPE_NVML_LIB";

/// What to open.
#[derive(Debug, Clone)]
pub enum Source {
    /// The real GPUs through NVML; `library` overrides the library loaded.
    Nvml {
        /// The NVML library to load instead of the default.
        library: Option<PathBuf>,
    },
    /// A fixture file.
    FixtureFile {
        /// The file.
        path: PathBuf,
        /// Serve this frame only; `None`: replay on wall time, looping.
        frame: Option<usize>,
    },
    /// A fixture already read (the CLI's built-in demo).
    Recording {
        /// The recording.
        fixture: Box<Fixture>,
        /// Serve this frame only; `None`: replay on wall time, looping.
        frame: Option<usize>,
    },
}

/// An opened source: the backend, the host facts that go with it, and a name for people.
#[derive(Clone)]
pub struct OpenedSource {
    /// The GPU answers.
    pub backend: Arc<dyn GpuBackend>,
    /// The host facts processes are joined with: this machine's for NVML, the recording's for
    /// a fixture.
    pub host: Arc<dyn HostSource>,
    /// `nvml`, `fixture PATH` or `recording NAME`.
    pub label: String,
}

impl std::fmt::Debug for OpenedSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenedSource")
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

/// A source's backend as what it is, bare (no call log), for a caller that times or inspects it
/// itself (`gpuscope doctor`): [`Source::open_backend`].
#[non_exhaustive]
pub enum SourceBackend {
    /// The real GPUs.
    #[cfg(all(feature = "nvml", feature = "host-live"))]
    Nvml(Box<crate::NvmlBackend>),
    /// A fixture, replayed.
    Replay(Arc<ReplayBackend>),
}

impl SourceBackend {
    /// The backend, as any other.
    pub fn backend(&self) -> &dyn GpuBackend {
        match self {
            #[cfg(all(feature = "nvml", feature = "host-live"))]
            SourceBackend::Nvml(b) => &**b,
            SourceBackend::Replay(b) => &**b,
        }
    }
}

impl std::fmt::Debug for SourceBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            #[cfg(all(feature = "nvml", feature = "host-live"))]
            SourceBackend::Nvml(_) => f.write_str("SourceBackend::Nvml"),
            SourceBackend::Replay(_) => f.write_str("SourceBackend::Replay"),
        }
    }
}

/// Why a source could not be opened.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// The fixture could not be read.
    #[error(transparent)]
    Fixture(#[from] FixtureError),
    /// The frame asked for is not in the recording.
    #[error("frame {frame} is out of range: the recording has frames 0 to {}", .frames.saturating_sub(1))]
    FrameOutOfRange {
        /// The frame asked for.
        frame: usize,
        /// How many frames the recording has.
        frames: usize,
    },
    /// NVML could not be opened.
    #[cfg(feature = "nvml")]
    #[error(transparent)]
    Nvml(#[from] crate::nvml::OpenError),
    /// This build has no NVML backend (the `nvml` feature) or no live host facts
    /// (`host-live`).
    #[error("this build cannot read the real GPUs (built without the `nvml` or `host-live` feature); set GPUSCOPE_FIXTURE to replay a fixture")]
    NoNvml,
}

impl Source {
    /// `GPUSCOPE_FIXTURE` (when set and not empty), replayed on wall time; else NVML from
    /// `GPUSCOPE_NVML_LIB` (when set and not empty) or the default library.
    pub fn from_env() -> Source {
        let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
        match var(FIXTURE_ENV_VAR) {
            Some(path) => Source::FixtureFile {
                path: path.into(),
                frame: None,
            },
            None => Source::Nvml {
                library: var(NVML_LIB_ENV_VAR).map(PathBuf::from),
            },
        }
    }

    /// Opens the source; its backend logs each call when calls are logged (see [the
    /// module](self)).
    ///
    /// # Errors
    ///
    /// [`SourceError`]: a fixture that cannot be read, a frame out of range, NVML that cannot
    /// be opened.
    pub fn open(&self) -> Result<OpenedSource, SourceError> {
        self.open_with_events(&crate::EventKind::HEALTH)
    }

    /// [`Source::open`], with the NVML backend listening for the event kinds in `events`
    /// instead of the health kinds: none for a command that shows no events as they come (a
    /// one-shot), which spares the driver the event set's set-up calls (a replay serves its
    /// recorded events whatever this says).
    ///
    /// # Errors
    ///
    /// As [`Source::open`].
    pub fn open_with_events(
        &self,
        events: &[crate::EventKind],
    ) -> Result<OpenedSource, SourceError> {
        let mut opened = self.open_bare(events)?;
        if crate::cost::calls_logged() {
            opened.backend = Arc::new(crate::cost::TimedBackend::new(
                opened.backend,
                crate::cost::CallLog,
            ));
        }
        Ok(opened)
    }

    fn open_bare(&self, events: &[crate::EventKind]) -> Result<OpenedSource, SourceError> {
        let (backend, label) = self.open_backend(events)?;
        Ok(match backend {
            #[cfg(all(feature = "nvml", feature = "host-live"))]
            SourceBackend::Nvml(backend) => OpenedSource {
                backend: Arc::new(*backend),
                host: Arc::new(crate::host::LiveHost::new()),
                label,
            },
            SourceBackend::Replay(backend) => OpenedSource {
                host: Arc::new(ReplayHost::new(backend.clone())),
                backend,
                label,
            },
        })
    }

    /// Opens the source's backend by the same rules as [`Source::open`], bare (never wrapped
    /// in the call log) and as what it is, with its label; the NVML backend listens for the
    /// event kinds in `events` (those each GPU supports). For a caller that times the calls
    /// or asks the NVML backend what only it can tell (what opening and shutting down cost,
    /// which events each GPU sends): `gpuscope doctor`.
    ///
    /// # Errors
    ///
    /// As [`Source::open`].
    pub fn open_backend(
        &self,
        events: &[crate::EventKind],
    ) -> Result<(SourceBackend, String), SourceError> {
        match self {
            Source::FixtureFile { path, frame } => {
                let step = crate::timeline::step(crate::timeline::FIXTURE_LOAD);
                let fixture = Fixture::load(path)?;
                drop(step);
                let backend = replay(fixture, *frame)?;
                Ok((backend, format!("fixture {}", path.display())))
            }
            Source::Recording { fixture, frame } => {
                let label = format!("recording {}", fixture.meta.name);
                Ok((replay((**fixture).clone(), *frame)?, label))
            }
            Source::Nvml { library } => open_nvml(library.as_ref(), events),
        }
    }
}

/// A replay of `fixture`, on wall time or pinned to `frame` (which must exist).
fn replay(fixture: Fixture, frame: Option<usize>) -> Result<SourceBackend, SourceError> {
    let frames = fixture.frames.len();
    let clock = match frame {
        None => ReplayClock::wall(true),
        Some(n) if n < frames => ReplayClock::Manual(n.into()),
        Some(frame) => return Err(SourceError::FrameOutOfRange { frame, frames }),
    };
    Ok(SourceBackend::Replay(Arc::new(ReplayBackend::with_clock(
        fixture, clock,
    ))))
}

#[cfg(all(feature = "nvml", feature = "host-live"))]
fn open_nvml(
    library: Option<&PathBuf>,
    events: &[crate::EventKind],
) -> Result<(SourceBackend, String), SourceError> {
    let options = crate::nvml::NvmlOptions::default().events(events);
    let backend = crate::NvmlBackend::open_with(library.map(|p| p.as_os_str()), options)?;
    Ok((SourceBackend::Nvml(Box::new(backend)), "nvml".into()))
}

#[cfg(not(all(feature = "nvml", feature = "host-live")))]
fn open_nvml(
    _library: Option<&PathBuf>,
    _events: &[crate::EventKind],
) -> Result<(SourceBackend, String), SourceError> {
    Err(SourceError::NoNvml)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recording(frame: usize) -> Source {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/old-driver.json"
        );
        let fixture = Fixture::load(path).unwrap_or_else(|e| panic!("{e}"));
        Source::Recording {
            fixture: Box::new(fixture),
            frame: Some(frame),
        }
    }

    #[test]
    fn a_frame_past_the_end_is_an_error_not_the_last_frame() {
        // ProcessCollector::from_fixture clamped a bad frame silently.
        let frames = match &recording(0) {
            Source::Recording { fixture, .. } => fixture.frames.len(),
            _ => unreachable!(),
        };
        assert!(recording(frames - 1).open().is_ok());
        match recording(frames).open() {
            Err(SourceError::FrameOutOfRange { frame, frames: n }) => {
                assert_eq!((frame, n), (frames, frames))
            }
            other => panic!("expected FrameOutOfRange, got {other:?}"),
        }
    }
}
