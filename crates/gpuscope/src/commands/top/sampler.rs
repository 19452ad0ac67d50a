//! The sampler thread: it owns the collector, takes a sample every interval and sends it to the
//! UI, so that the UI never waits on the backend.

use std::collections::hash_map::{Entry, HashMap};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use gpu_devices::Device;
use gpu_processes::ProcessCollector;

use super::app::{ProcIdentity, Refresh};
use super::signals;

/// Takes one sample of `devices` (and the host) from `collector`. `live`: the processes are
/// this machine's, and the identity of each is read too (what a signal is checked against);
/// a replay never reads this machine's processes.
pub fn sample(collector: &ProcessCollector, devices: &[Device], live: bool) -> Refresh {
    sample_with(collector, devices, live, &mut Identities::default())
}

/// The identities read on earlier samples, by PID and the start time the host facts gave
/// (seconds). A process keeps its identity while those stay the same, so a known process costs
/// no `/proc` reads of its own here: the host source already reads its `stat` each refresh.
///
/// Reusing one can only err on the safe side: if a PID were reused within the same second, the
/// screen would keep the first process's identity and a signal to the new one would be refused
/// at send time (its start time in ticks differs), never sent to the wrong process.
#[derive(Default)]
pub struct Identities {
    known: HashMap<u32, (u64, ProcIdentity)>,
}

impl Identities {
    /// The identity of `pid`, whose host facts say it started at `started` (seconds): the one
    /// kept from an earlier sample when that start time is the same, else `read(pid)`.
    fn get(
        &self,
        pid: u32,
        started: Option<u64>,
        read: impl FnOnce(u32) -> Option<ProcIdentity>,
    ) -> Option<ProcIdentity> {
        match self.known.get(&pid) {
            Some((s, id)) if Some(*s) == started => Some(*id),
            _ => read(pid),
        }
    }

    /// Keeps the identities of the processes of this sample (PID and start time) that have a
    /// start time, and forgets every other.
    fn keep(
        &mut self,
        seen: impl Iterator<Item = (u32, Option<u64>)>,
        identities: &HashMap<u32, ProcIdentity>,
    ) {
        self.known.clear();
        for (pid, started) in seen {
            if let (Some(s), Some(id)) = (started, identities.get(&pid)) {
                self.known.insert(pid, (s, *id));
            }
        }
    }
}

/// As [`sample`], keeping identities in `known` from one sample to the next.
pub fn sample_with(
    collector: &ProcessCollector,
    devices: &[Device],
    live: bool,
    known: &mut Identities,
) -> Refresh {
    let snap = collector.take_snapshots(devices);
    let host = collector.host();
    let mut identities = HashMap::new();
    if live {
        for p in &snap.processes {
            let Entry::Vacant(e) = identities.entry(p.pid) else {
                continue;
            };
            if let Some(id) = known.get(p.pid, p.host.create_time_s, signals::identity) {
                e.insert(id);
            }
        }
        known.keep(
            snap.processes.iter().map(|p| (p.pid, p.host.create_time_s)),
            &identities,
        );
    }
    // Parents not on a GPU: a few per refresh (a job's launcher, a shell), looked up once each.
    let on_gpu: std::collections::HashSet<u32> = snap.processes.iter().map(|p| p.pid).collect();
    let mut parents = HashMap::new();
    for p in &snap.processes {
        let Some(pp) = p.host.ppid.filter(|&pp| pp > 1 && !on_gpu.contains(&pp)) else {
            continue;
        };
        if let Entry::Vacant(e) = parents.entry(pp) {
            if let Some(facts) = host.process(pp) {
                e.insert(facts);
            }
        }
    }
    Refresh {
        snap,
        host: host.sample(),
        machine: host.machine(),
        now_ms: host.now_unix_ms(),
        identities,
        parents,
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
    /// on the returned channel and waking the event loop with `waker`. The channel holds at most two samples: when the UI has not
    /// taken them, newer samples are dropped rather than piling up. The thread ends when the
    /// [`Sampler`] is dropped or the receiver is gone.
    pub fn start(
        collector: ProcessCollector,
        devices: Vec<Device>,
        interval: Duration,
        live: bool,
        waker: super::wake::Waker,
    ) -> std::io::Result<(Sampler, Receiver<Refresh>)> {
        // Detached: see the type's documentation.
        let (stop_tx, rx) = super::wake::spawn_reader("gpuscope-sampler", move |tx, stop_rx| {
            let mut next = Instant::now();
            let mut known = Identities::default();
            loop {
                let sample = sample_with(&collector, &devices, live, &mut known);
                if !super::wake::offer(&tx, sample, &waker) {
                    return;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn id(start_ticks: u64) -> ProcIdentity {
        ProcIdentity {
            start_ticks,
            uid: 1000,
        }
    }

    #[test]
    fn a_known_process_is_not_read_again_until_its_start_time_changes() {
        let mut known = Identities::default();
        let reads = std::cell::Cell::new(0);
        let read = |_pid: u32| {
            reads.set(reads.get() + 1);
            Some(id(500 + reads.get()))
        };
        let first = known.get(42, Some(7), read).unwrap();
        known.keep([(42, Some(7))].into_iter(), &HashMap::from([(42, first)]));
        // The same PID and start time: the kept identity, no read.
        assert_eq!(known.get(42, Some(7), read), Some(first));
        assert_eq!(reads.get(), 1);
        // Another start time (the PID was reused): read again.
        assert_ne!(known.get(42, Some(8), read), Some(first));
        assert_eq!(reads.get(), 2);
        // No start time known: always read.
        known.get(42, None, read);
        assert_eq!(reads.get(), 3);
    }

    #[test]
    fn processes_that_left_are_forgotten() {
        let mut known = Identities::default();
        known.keep(
            [(1, Some(1)), (2, None)].into_iter(),
            &HashMap::from([(1, id(1)), (2, id(2))]),
        );
        assert_eq!(
            known.known.len(),
            1,
            "only a process with a start time is kept"
        );
        known.keep(std::iter::empty(), &HashMap::new());
        assert!(known.known.is_empty());
    }
}
