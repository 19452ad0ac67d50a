//! A background thread that can be told to stop at once, and is joined when it stops.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::clock::Waiter;
use crate::error::{Error, Result};
use crate::stop::StopSignal;

/// A running background thread: stopped (promptly) and joined by [`Worker::stop`] or on drop.
#[derive(Debug)]
pub(crate) struct Worker {
    signal: Arc<StopSignal>,
    handle: Option<JoinHandle<()>>,
}

impl Worker {
    /// Runs `body` on a new thread; it sleeps with `waiter`, which [`Worker::stop`] stops.
    pub(crate) fn spawn(
        name: &str,
        waiter: Waiter,
        body: impl FnOnce(Waiter) + Send + 'static,
    ) -> Result<Worker> {
        let signal = waiter.stop_signal();
        let handle = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || body(waiter))
            .map_err(Error::Spawn)?;
        Ok(Worker {
            signal,
            handle: Some(handle),
        })
    }

    pub(crate) fn is_finished(&self) -> bool {
        self.handle.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Stops the thread and joins it, unless this is the thread itself (then it only asks it
    /// to stop: it ends when it next sleeps).
    pub(crate) fn stop(&mut self) -> Result<()> {
        self.signal.stop();
        match self.handle.take() {
            Some(h) if h.thread().id() == std::thread::current().id() => Ok(()),
            Some(h) => h.join().map_err(|_| Error::ThreadPanicked),
            None => Ok(()),
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // A panic in the thread was already reported by the panic hook; drop cannot return it.
        let _ = self.stop();
    }
}

/// The next tick after `last` that is not in the past (ticks missed while busy are skipped).
pub(crate) fn next_tick(last: Duration, every: Duration, now: Duration) -> Duration {
    let next = last + every;
    if next < now {
        now
    } else {
        next
    }
}
