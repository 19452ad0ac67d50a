//! Time, injectable: the system clock in production, a clock stepped by hand in tests.
//!
//! Background threads (the collector's sampler, the collecting daemon) sleep *on the clock*
//! through a [`Waiter`]: on the system clock that is an ordinary timed sleep; on a
//! [`ManualClock`] a thread sleeps until the clock is moved past its deadline, and
//! [`ManualClock::advance`] wakes each thread due, one at a time in deadline order, and waits for
//! it to go back to sleep before moving on. A test that steps the clock therefore knows exactly
//! which samples were taken, and when.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::ThreadId;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::stop::StopSignal;

/// Where the collector and the recorder read the time.
///
/// Two readings: a monotonic one for durations and a wall-clock one for timestamps. Background
/// threads sleep on the clock through [`Clock::waiter`]; the default is a real-time sleep, which
/// is right for any clock that follows real time.
pub trait Clock: Send + Sync {
    /// Monotonic time since some fixed origin of this clock.
    fn elapsed(&self) -> Duration;
    /// Seconds since the Unix epoch.
    fn unix_time(&self) -> f64;
    /// A registration for one background thread that will sleep on this clock. It is made by the
    /// thread that spawns the sleeper, before spawning it, so that a [`ManualClock`] knows about
    /// the thread from the start.
    fn waiter(&self) -> Waiter {
        Waiter {
            manual: None,
            stop: Arc::new(StopSignal::default()),
        }
    }
}

/// The real clock: [`Instant`] for durations, [`SystemTime`] for timestamps.
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    origin: Instant,
}

impl SystemClock {
    /// A clock whose origin is now.
    pub fn new() -> SystemClock {
        SystemClock {
            origin: Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock::new()
    }
}

impl Clock for SystemClock {
    fn elapsed(&self) -> Duration {
        self.origin.elapsed()
    }

    fn unix_time(&self) -> f64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64())
    }
}

/// A clock that moves only when told to. Clones share the same time.
///
/// Threads sleeping on it ([`Clock::waiter`]) wake when it is moved past their deadline:
/// [`ManualClock::advance`] stops at each deadline on the way, wakes that thread, and waits
/// until it sleeps again (or ends) before going on, so when `advance` returns every sample due
/// by then has been taken. Do not hold a lock a sleeper needs while calling `advance`; a
/// sleeper may call `advance` itself (it is not waited for).
#[derive(Debug, Clone)]
pub struct ManualClock {
    /// Nanoseconds since the origin.
    nanos: Arc<AtomicU64>,
    /// Unix time of the origin, seconds.
    unix_origin: f64,
    sleepers: Arc<Sleepers>,
}

/// The threads sleeping on a manual clock.
#[derive(Debug, Default)]
struct Sleepers {
    table: Mutex<SleeperTable>,
    /// Signalled when a sleeper goes to sleep or ends.
    changed: Condvar,
}

#[derive(Debug, Default)]
struct SleeperTable {
    next_id: u64,
    entries: BTreeMap<u64, Sleeper>,
}

#[derive(Debug)]
struct Sleeper {
    /// `Some(deadline)` while asleep, `None` while running.
    deadline: Option<Duration>,
    /// The thread, once it has slept once.
    owner: Option<ThreadId>,
    stop: Arc<StopSignal>,
    /// Set by `advance` to wake this sleeper (and no other: the time alone does not wake it).
    woken: Arc<AtomicBool>,
}

impl Sleepers {
    fn lock(&self) -> MutexGuard<'_, SleeperTable> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl ManualClock {
    /// A clock at its origin, which is `unix_origin` seconds after the Unix epoch.
    pub fn new(unix_origin: f64) -> ManualClock {
        ManualClock {
            nanos: Arc::new(AtomicU64::new(0)),
            unix_origin,
            sleepers: Arc::default(),
        }
    }

    /// Moves the clock on by `by`, stopping at each sleeping thread's deadline on the way to
    /// wake it and wait for it to sleep again. Also waits, first, for the threads already
    /// running (for instance one just started) to go to sleep.
    pub fn advance(&self, by: Duration) {
        let target = self.elapsed().saturating_add(by);
        let me = std::thread::current().id();
        let mut table = self.sleepers.lock();
        loop {
            table = self.wait_idle(table, me);
            let due = table
                .entries
                .iter()
                .filter_map(|(&id, s)| s.deadline.filter(|&d| d <= target).map(|d| (d, id)))
                .min();
            let Some((deadline, id)) = due else {
                self.store(target.max(self.elapsed()));
                break;
            };
            self.store(deadline.max(self.elapsed()));
            if let Some(s) = table.entries.get_mut(&id) {
                s.deadline = None;
                s.woken.store(true, Ordering::SeqCst);
                s.stop.notify();
            }
        }
        drop(self.wait_idle(table, me));
    }

    /// Waits until every thread sleeping on this clock is asleep (one just started takes its
    /// first sample), without moving the clock.
    pub fn settle(&self) {
        self.advance(Duration::ZERO);
    }

    /// Sets the time since the origin: forward as [`ManualClock::advance`] does, waking the
    /// threads due; backward, at once.
    pub fn set(&self, since_origin: Duration) {
        let now = self.elapsed();
        if since_origin >= now {
            self.advance(since_origin - now);
        } else {
            self.store(since_origin);
        }
    }

    fn store(&self, t: Duration) {
        let t = u64::try_from(t.as_nanos()).unwrap_or(u64::MAX);
        self.nanos.store(t, Ordering::SeqCst);
    }

    fn wait_idle<'a>(
        &self,
        mut table: MutexGuard<'a, SleeperTable>,
        me: ThreadId,
    ) -> MutexGuard<'a, SleeperTable> {
        while table
            .entries
            .values()
            .any(|s| s.deadline.is_none() && s.owner != Some(me))
        {
            table = match self.sleepers.changed.wait(table) {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
        }
        table
    }
}

impl Clock for ManualClock {
    fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::SeqCst))
    }

    fn unix_time(&self) -> f64 {
        self.unix_origin + self.elapsed().as_secs_f64()
    }

    fn waiter(&self) -> Waiter {
        let stop = Arc::new(StopSignal::default());
        let woken = Arc::new(AtomicBool::new(false));
        let mut table = self.sleepers.lock();
        let id = table.next_id;
        table.next_id += 1;
        table.entries.insert(
            id,
            Sleeper {
                deadline: None,
                owner: None,
                stop: stop.clone(),
                woken: woken.clone(),
            },
        );
        Waiter {
            manual: Some((self.clone(), id, woken)),
            stop,
        }
    }
}

/// One background thread's way of sleeping on a [`Clock`] (see [`Clock::waiter`]). Dropping it
/// tells a [`ManualClock`] the thread has ended.
#[derive(Debug)]
pub struct Waiter {
    /// On a manual clock: the clock, this sleeper's entry, and its wake-up flag.
    manual: Option<(ManualClock, u64, Arc<AtomicBool>)>,
    stop: Arc<StopSignal>,
}

impl Waiter {
    /// The signal that stops the sleeper.
    pub(crate) fn stop_signal(&self) -> Arc<StopSignal> {
        self.stop.clone()
    }

    /// True when stopped.
    pub(crate) fn is_stopped(&self) -> bool {
        self.stop.is_stopped()
    }

    /// Sleeps until `clock` reads `deadline` or later, or until stopped; true when stopped.
    pub(crate) fn sleep_until(&self, clock: &dyn Clock, deadline: Duration) -> bool {
        let Some((manual, id, woken)) = &self.manual else {
            loop {
                let now = clock.elapsed();
                if now >= deadline {
                    return self.stop.is_stopped();
                }
                if self.stop.wait_until(Instant::now() + (deadline - now)) {
                    return true;
                }
            }
        };
        {
            let mut table = manual.sleepers.lock();
            if manual.elapsed() >= deadline {
                return self.stop.is_stopped();
            }
            if let Some(s) = table.entries.get_mut(id) {
                s.deadline = Some(deadline);
                s.owner = Some(std::thread::current().id());
            }
            woken.store(false, Ordering::SeqCst);
            manual.sleepers.changed.notify_all();
        }
        // Only `advance` wakes it, when its turn comes: the clock may pass the deadline while
        // another sleeper due at the same time runs.
        let stopped = self.stop.wait_while(|| !woken.load(Ordering::SeqCst));
        // Woken by the stop rather than by `advance`: running again all the same.
        let mut table = manual.sleepers.lock();
        if let Some(s) = table.entries.get_mut(id) {
            s.deadline = None;
        }
        stopped
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        if let Some((manual, id, _)) = &self.manual {
            manual.sleepers.lock().entries.remove(id);
            manual.sleepers.changed.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// A thread ticking every second on a manual clock ticks exactly once per second advanced,
    /// and `advance` returns only after the tick is done.
    #[test]
    fn advance_wakes_each_due_sleeper_and_waits_for_it() {
        let clock = ManualClock::new(0.0);
        let ticks = Arc::new(Mutex::new(Vec::new()));
        let waiter = clock.waiter();
        let stop = waiter.stop_signal();
        let (c, t) = (clock.clone(), ticks.clone());
        let handle = std::thread::spawn(move || {
            let mut next = Duration::ZERO;
            loop {
                if waiter.sleep_until(&c, next) {
                    break;
                }
                t.lock().unwrap().push(c.elapsed());
                next += Duration::from_secs(1);
            }
        });
        clock.settle();
        assert_eq!(*ticks.lock().unwrap(), [Duration::ZERO]);
        clock.advance(Duration::from_millis(2500));
        assert_eq!(
            *ticks.lock().unwrap(),
            [0, 1, 2].map(Duration::from_secs),
            "stopped at each deadline, in order"
        );
        assert_eq!(clock.elapsed(), Duration::from_millis(2500));
        clock.advance(Duration::from_millis(500));
        assert_eq!(ticks.lock().unwrap().len(), 4);
        stop.stop();
        handle.join().unwrap();
        // The ended thread is forgotten: advancing does not wait for it.
        clock.advance(Duration::from_secs(5));
        assert_eq!(ticks.lock().unwrap().len(), 4);
    }

    /// Two sleepers due at the same time are woken one after the other, never together.
    #[test]
    fn sleepers_due_together_run_one_at_a_time() {
        let clock = ManualClock::new(0.0);
        let running = Arc::new(AtomicUsize::new(0));
        let overlap = Arc::new(AtomicUsize::new(0));
        let mut handles = Vec::new();
        let mut stops = Vec::new();
        for _ in 0..2 {
            let waiter = clock.waiter();
            stops.push(waiter.stop_signal());
            let (c, r, o) = (clock.clone(), running.clone(), overlap.clone());
            handles.push(std::thread::spawn(move || {
                let mut next = Duration::from_secs(1);
                while !waiter.sleep_until(&c, next) {
                    if r.fetch_add(1, Ordering::SeqCst) > 0 {
                        o.fetch_add(1, Ordering::SeqCst);
                    }
                    std::thread::yield_now();
                    r.fetch_sub(1, Ordering::SeqCst);
                    next += Duration::from_secs(1);
                }
            }));
        }
        clock.advance(Duration::from_secs(20));
        for s in stops {
            s.stop();
        }
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(overlap.load(Ordering::SeqCst), 0);
    }
}
