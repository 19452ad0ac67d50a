//! The sampler thread: it owns the collector, takes a sample every interval and sends it to the
//! UI, so that the UI never waits on the backend.

use std::collections::hash_map::{Entry, HashMap};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TrySendError};
use std::time::{Duration, Instant};

use gpu_devices::Device;
use gpu_processes::ProcessCollector;

use super::app::Sample;
use super::signals;

/// Takes one sample of `devices` (and the host) from `collector`. `live`: the processes are
/// this machine's, and the identity of each is read too (what a signal is checked against);
/// a replay never reads this machine's processes.
pub fn sample(collector: &ProcessCollector, devices: &[Device], live: bool) -> Sample {
    let snap = collector.take_snapshots(devices);
    let host = collector.host();
    let mut identities = HashMap::new();
    if live {
        for p in &snap.processes {
            if let Entry::Vacant(e) = identities.entry(p.pid) {
                if let Some(id) = signals::identity(p.pid) {
                    e.insert(id);
                }
            }
        }
    }
    Sample {
        snap,
        host: host.sample(),
        machine: host.machine(),
        now_ms: host.now_unix_ms(),
        identities,
    }
}

/// A running sampler thread. Dropping it tells the thread to stop, and does not wait for it:
/// the thread may be blocked inside a driver call that never returns, and quitting must not
/// wait on that. The thread ends at its next wait, or with the process.
pub struct Sampler {
    _stop: Sender<()>,
}

impl Sampler {
    /// Starts sampling `devices` every `interval` (`live`: see [`sample`]), sending each sample
    /// on the returned channel. The channel holds at most two samples: when the UI has not
    /// taken them, newer samples are dropped rather than piling up. The thread ends when the
    /// [`Sampler`] is dropped or the receiver is gone.
    pub fn start(
        collector: ProcessCollector,
        devices: Vec<Device>,
        interval: Duration,
        live: bool,
    ) -> std::io::Result<(Sampler, Receiver<Sample>)> {
        let (tx, rx) = mpsc::sync_channel(2);
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        // Detached: see the type's documentation.
        std::thread::Builder::new()
            .name("gpuscope-sampler".into())
            .spawn(move || {
                let mut next = Instant::now();
                loop {
                    match tx.try_send(sample(&collector, &devices, live)) {
                        Ok(()) | Err(TrySendError::Full(_)) => {}
                        Err(TrySendError::Disconnected(_)) => return,
                    }
                    next += interval;
                    let now = Instant::now();
                    if next < now {
                        // A sample took longer than the interval: start again from now.
                        next = now;
                    }
                    match stop_rx.recv_timeout(next - now) {
                        Err(RecvTimeoutError::Timeout) => {}
                        Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
                    }
                }
            })?;
        Ok((Sampler { _stop: stop_tx }, rx))
    }
}
