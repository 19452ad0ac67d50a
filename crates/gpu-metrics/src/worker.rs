//! A background thread that can be told to stop at once, and is joined when it stops.

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::clock::Waiter;
use crate::error::{Error, Result};

/// A stop flag that a sleeping thread wakes up for.
#[derive(Debug, Default)]
pub(crate) struct StopSignal {
    stopped: Mutex<bool>,
    cv: Condvar,
}

impl StopSignal {
    pub(crate) fn stop(&self) {
        let mut s = self.stopped.lock().unwrap_or_else(|p| p.into_inner());
        *s = true;
        self.cv.notify_all();
    }

    pub(crate) fn is_stopped(&self) -> bool {
        *self.stopped.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wakes the sleeper so that it checks its condition again (a manual clock moved).
    pub(crate) fn notify(&self) {
        let _s = self.stopped.lock().unwrap_or_else(|p| p.into_inner());
        self.cv.notify_all();
    }

    /// Sleeps while `asleep()` holds and the signal is not stopped; true when stopped.
    /// `asleep` is checked with the signal's lock held, so a [`StopSignal::notify`] after the
    /// condition changed is never missed.
    pub(crate) fn wait_while(&self, asleep: impl Fn() -> bool) -> bool {
        let mut s = self.stopped.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if *s {
                return true;
            }
            if !asleep() {
                return false;
            }
            s = match self.cv.wait(s) {
                Ok(guard) => guard,
                Err(p) => p.into_inner(),
            };
        }
    }

    /// Sleeps until `deadline` or until stopped; true when stopped.
    pub(crate) fn wait_until(&self, deadline: Instant) -> bool {
        let mut s = self.stopped.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if *s {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            s = match self.cv.wait_timeout(s, deadline - now) {
                Ok((guard, _)) => guard,
                Err(p) => p.into_inner().0,
            };
        }
    }
}

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
