//! The errors of this crate.

use std::path::PathBuf;

/// What can go wrong while collecting, recording or plotting.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `collect()` was called with no tag active.
    #[error("no metric collection is active: call activate(tag) (or scope(tag)) first")]
    NotStarted,
    /// A tag that is already active was activated again.
    #[error("the tag {0:?} is already active; nested tags must be unique")]
    TagActive(String),
    /// A tag was named that is not active.
    #[error("the tag {0:?} is not active")]
    NoSuchTag(String),
    /// A tag was empty or held a `/`.
    #[error("invalid tag {0:?}: a tag is a non-empty name without '/'")]
    InvalidTag(String),
    /// Writing samples to a file failed. The message says what the system said (like the other
    /// variants, the reason is in the message, not a separate `source`, so that reporters that
    /// print the chain do not print it twice).
    #[error("cannot write {}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        error: std::io::Error,
    },
    /// The GPUs could not be opened (for a default collector).
    #[error("cannot open the GPUs: {0}")]
    Open(gpu_devices::Error),
    /// The background thread could not be started.
    #[error("cannot start the background thread: {0}")]
    Spawn(std::io::Error),
    /// The background thread panicked (in a callback).
    #[error("the background thread panicked")]
    ThreadPanicked,
    /// A plot could not be drawn or written.
    #[error("cannot draw the plot {}: {message}", path.display())]
    Plot {
        /// The output file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
}

/// This crate's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
