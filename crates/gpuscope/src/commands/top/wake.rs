//! A pipe that wakes the viewers' event loop: the sampler thread writes to it when it has sent
//! a sample, the signal thread when a signal came (SIGWINCH included). The loop waits on the
//! terminal and this pipe together, so it sleeps until something happened instead of waking
//! every 100 ms to look (wake-ups that cost an idle viewer CPU for nothing;
//! docs/benchmarks.md, "Interactive viewer").
//!
//! The viewers' reader threads (the device sampler, the fleet sampler) start through
//! [`spawn_reader`] and hand each answer over through [`offer`].

use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd, RawFd};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender, TrySendError};
use std::sync::Arc;

/// The end the event loop waits on.
#[derive(Debug)]
pub(crate) struct Wake {
    read: OwnedFd,
}

/// The end that wakes the loop; cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct Waker {
    write: Arc<OwnedFd>,
}

/// A new pipe: both ends non-blocking and closed on exec.
pub(crate) fn pipe() -> std::io::Result<(Wake, Waker)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded: both are open descriptors that nothing else owns.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok((
        Wake { read },
        Waker {
            write: Arc::new(write),
        },
    ))
}

impl Waker {
    /// Wakes the loop. When the pipe is full the loop has wake-ups pending already, so a
    /// failed write loses nothing.
    pub(crate) fn wake(&self) {
        // SAFETY: writes one byte from a valid buffer to an open descriptor.
        let _ = unsafe { libc::write(self.write.as_raw_fd(), [1u8].as_ptr().cast(), 1) };
    }
}

/// Starts the thread `name` that reads for a viewer: `body` gets the sending end of a channel
/// that holds at most two answers ([`offer`] them) and the receiving end of a control channel;
/// the control channel's sending end and the answers' receiving end are returned.
pub(crate) fn spawn_reader<T: Send + 'static>(
    name: &str,
    body: impl FnOnce(SyncSender<T>, Receiver<()>) + Send + 'static,
) -> std::io::Result<(Sender<()>, Receiver<T>)> {
    let (tx, rx) = mpsc::sync_channel(2);
    let (control, control_rx) = mpsc::channel::<()>();
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || body(tx, control_rx))?;
    Ok((control, rx))
}

/// Offers `answer` to the viewer: sent, and the event loop woken, when the channel has room;
/// dropped when it is full (the viewer has not taken the last two yet). False when the viewer
/// is gone.
pub(crate) fn offer<T>(tx: &SyncSender<T>, answer: T, waker: &Waker) -> bool {
    match tx.try_send(answer) {
        Ok(()) => waker.wake(),
        Err(TrySendError::Full(_)) => {}
        Err(TrySendError::Disconnected(_)) => return false,
    }
    true
}

impl Wake {
    /// The descriptor to poll for reading.
    pub(crate) fn fd(&self) -> RawFd {
        self.read.as_raw_fd()
    }

    /// Empties the pipe (after it polled readable), so that the next poll sleeps.
    pub(crate) fn drain(&self) {
        let mut buf = [0u8; 64];
        loop {
            // SAFETY: reads into a valid buffer of `buf.len()` bytes from an open descriptor.
            let n =
                unsafe { libc::read(self.read.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n < buf.len() as isize {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn readable(wake: &Wake, timeout_ms: i32) -> bool {
        let mut fds = libc::pollfd {
            fd: wake.fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut fds, 1, timeout_ms) == 1 }
    }

    #[test]
    fn a_wake_from_another_thread_makes_the_pipe_readable_until_drained() {
        let (wake, waker) = pipe().unwrap();
        assert!(!readable(&wake, 0), "nothing written yet");
        let w = waker.clone();
        std::thread::spawn(move || {
            for _ in 0..1000 {
                w.wake();
            }
        })
        .join()
        .unwrap();
        // A full pipe loses no wake-up that matters, and never blocks the writer.
        assert!(readable(&wake, 0));
        wake.drain();
        assert!(!readable(&wake, 0), "drained");
        waker.wake();
        assert!(readable(&wake, 0));
    }
}
