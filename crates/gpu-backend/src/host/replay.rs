//! [`ReplayHost`]: the host facts a fixture kept, on a replay's clock.

use std::sync::Arc;

use super::{HostMachine, HostSource};
use crate::fixture::{HostFrame, HostProcessFacts, HostProcessSample, HostStatic};
use crate::replay::ReplayBackend;

/// Serves a fixture's host facts, following the frame of a [`ReplayBackend`].
#[derive(Debug, Clone)]
pub struct ReplayHost {
    backend: Arc<ReplayBackend>,
}

impl ReplayHost {
    /// Host facts of `backend`'s fixture, at `backend`'s current frame.
    pub fn new(backend: Arc<ReplayBackend>) -> ReplayHost {
        ReplayHost { backend }
    }

    fn statics(&self) -> &HostStatic {
        &self.backend.fixture().host
    }
}

impl HostSource for ReplayHost {
    fn machine(&self) -> HostMachine {
        let h = self.statics();
        HostMachine {
            hostname: h.hostname.clone(),
            cpu_count: h.cpu_count,
            memory_total: h.memory_total,
            swap_total: h.swap_total,
        }
    }

    fn sample(&self) -> HostFrame {
        let f = &self.backend.frame().host;
        HostFrame {
            processes: Default::default(),
            ..f.clone()
        }
    }

    fn process(&self, pid: u32) -> Option<HostProcessFacts> {
        // A process is visible only while it is alive in the current frame.
        self.backend.frame().host.processes.get(&pid)?;
        self.statics().processes.get(&pid).cloned()
    }

    fn process_sample(&self, pid: u32) -> Option<HostProcessSample> {
        self.backend.frame().host.processes.get(&pid).cloned()
    }

    fn pids(&self) -> Vec<u32> {
        // A BTreeMap: already ascending.
        self.backend
            .frame()
            .host
            .processes
            .keys()
            .copied()
            .collect()
    }

    /// `meta.recorded_at` plus the current frame's `t_ms` and, in a looping replay, one loop's
    /// length per loop made ([`ReplayBackend::recording_time_ms`]), as the replay's sample and
    /// event times are moved on; the wall clock when the fixture does not say when it was
    /// recorded.
    fn now_unix_ms(&self) -> u64 {
        let recorded = self
            .backend
            .fixture()
            .meta
            .recorded_at
            .as_deref()
            .and_then(|t| humantime::parse_rfc3339_weak(t).ok())
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
        match recorded {
            Some(start) => u64::try_from(start.as_millis())
                .unwrap_or(u64::MAX)
                .saturating_add(self.backend.recording_time_ms()),
            None => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_now_is_the_recording_time_of_the_current_frame() {
        let path = format!(
            "{}/../../fixtures/old-driver.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let fixture = crate::Fixture::load(path).unwrap();
        let backend = Arc::new(ReplayBackend::new(fixture));
        let host = ReplayHost::new(backend.clone());
        // The scenario says it was recorded at 2026-11-01T10:00:00Z.
        assert_eq!(host.now_unix_ms(), 1_793_527_200_000);
        backend.set_frame(3);
        assert_eq!(host.now_unix_ms(), 1_793_527_200_000 + backend.frame().t_ms);
    }
}
