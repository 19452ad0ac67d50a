//! How a command ends when it cannot show everything: a usage error (exit code 2), or a
//! shortfall (3, part shown; 4, nothing), and the line on exit codes every `--help` ends with
//! (docs/exit-codes.md). Anything else is exit code 1.

/// The line on exit codes at the end of every command's `--help` (docs/exit-codes.md).
pub const EXIT_CODES_HELP: &str = "Exit status: 0 all shown, 1 error, 2 usage error, 3 partial \
    (some hosts down or stale), 4 nothing to show or choose (no GPU, every host down, too few \
    GPUs); docs/exit-codes.md.";

/// A mistake in what the user asked for: reported with exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// The answer is not whole: exit code [`Shortfall::PARTIAL`] (3) when only part could be shown,
/// [`Shortfall::NOTHING`] (4) when nothing could (docs/exit-codes.md). The message says why.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Shortfall {
    /// The exit code.
    pub code: u8,
    /// Why, for stderr.
    pub message: String,
}

impl Shortfall {
    /// Some hosts down or stale, the others shown.
    pub const PARTIAL: u8 = 3;
    /// Nothing to show or choose: no GPU, every host down, too few GPUs.
    pub const NOTHING: u8 = 4;

    /// Only part could be shown.
    pub fn partial(message: String) -> Shortfall {
        Shortfall {
            code: Shortfall::PARTIAL,
            message,
        }
    }

    /// Nothing could be shown.
    pub fn nothing(message: String) -> Shortfall {
        Shortfall {
            code: Shortfall::NOTHING,
            message,
        }
    }
}

/// The real GPUs cannot be reached: no NVIDIA driver, or no NVML library. Nothing to show (exit
/// code [`Shortfall::NOTHING`], 4, in gpuscope's commands); a type of its own so that the
/// `nvidia-smi` door can fail as nvidia-smi fails ([`PeerExit`]).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct NoDriver {
    /// Whether the library itself was not found (else it was, and the driver did not answer).
    pub library_missing: bool,
    /// Why, for stderr: what failed and what to try.
    pub message: String,
}

/// A peer tool's door (`nvidia-smi`) ending as the tool ends: with its exit code, after its
/// own words were printed; the message says gpuscope's why on stderr.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct PeerExit {
    /// The tool's exit code.
    pub code: u8,
    /// Why, for stderr.
    pub message: String,
}
