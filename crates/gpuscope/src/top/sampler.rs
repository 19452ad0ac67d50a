//! The sampler thread: it owns the collector, takes a sample every interval and sends it to the
//! UI, so that the UI never waits on the backend.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TrySendError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use gpu_devices::Device;
use gpu_processes::ProcessCollector;

use super::app::Sample;

/// Takes one sample of `devices` (and the host) from `collector`.
pub fn sample(collector: &ProcessCollector, devices: &[Device]) -> Sample {
    let snap = collector.take_snapshots(devices);
    let host = collector.host();
    Sample {
        snap,
        host: host.sample(),
        machine: host.machine(),
        now_ms: host.now_unix_ms(),
    }
}

/// A running sampler thread; dropping it stops the thread and waits for it.
pub struct Sampler {
    stop: Option<Sender<()>>,
    handle: Option<JoinHandle<()>>,
}

impl Sampler {
    /// Starts sampling `devices` every `interval`, sending each sample on the returned channel.
    /// The channel holds at most two samples: when the UI has not taken them, newer samples are
    /// dropped rather than piling up. The thread ends when the [`Sampler`] is dropped or the
    /// receiver is gone.
    pub fn start(
        collector: ProcessCollector,
        devices: Vec<Device>,
        interval: Duration,
    ) -> std::io::Result<(Sampler, Receiver<Sample>)> {
        let (tx, rx) = mpsc::sync_channel(2);
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let handle = std::thread::Builder::new()
            .name("gpuscope-sampler".into())
            .spawn(move || {
                let mut next = Instant::now();
                loop {
                    match tx.try_send(sample(&collector, &devices)) {
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
        Ok((
            Sampler {
                stop: Some(stop_tx),
                handle: Some(handle),
            },
            rx,
        ))
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
