//! [`StopSignal`]: the flag a background thread sleeps on, below the clock that makes it sleep
//! and the worker that stops it.

use std::sync::{Condvar, Mutex};
use std::time::Instant;

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
