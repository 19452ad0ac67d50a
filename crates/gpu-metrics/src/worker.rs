//! A background thread that can be told to stop at once, and is joined when it stops.

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

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
    pub(crate) fn spawn(
        name: &str,
        body: impl FnOnce(Arc<StopSignal>) + Send + 'static,
    ) -> Result<Worker> {
        let signal = Arc::new(StopSignal::default());
        let s = signal.clone();
        let handle = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || body(s))
            .map_err(Error::Spawn)?;
        Ok(Worker {
            signal,
            handle: Some(handle),
        })
    }

    pub(crate) fn is_finished(&self) -> bool {
        self.handle.as_ref().is_none_or(JoinHandle::is_finished)
    }

    pub(crate) fn stop(&mut self) -> Result<()> {
        self.signal.stop();
        match self.handle.take() {
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
pub(crate) fn next_tick(last: Instant, every: Duration) -> Instant {
    let next = last + every;
    let now = Instant::now();
    if next < now {
        now
    } else {
        next
    }
}
