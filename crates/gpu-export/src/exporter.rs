//! The whole exporter: a sampler thread that takes a sample at each interval and publishes it,
//! and the HTTP service that serves the latest one and never waits on the GPUs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use gpu_processes::ProcessCollector;

use crate::exposition::Exposition;
use crate::families::{Inputs, Options};
use crate::server::{self, Limits, Server, LIMITS};
use crate::shared::{Health, Shared};
use crate::web_config::WebConfig;

/// How the exporter samples and serves.
#[derive(Debug, Clone)]
pub struct Config {
    /// Time between samples.
    pub interval: Duration,
    /// TLS and basic auth.
    pub web: WebConfig,
    /// The server's limits.
    pub limits: Limits,
    /// For tests: the sampler thread panics after this many samples (the server then answers
    /// 503).
    pub stop_sampler_after: Option<u64>,
}

impl Config {
    /// Samples every `interval`, plain HTTP without auth, the limits `gpuscope export` runs with.
    pub fn new(interval: Duration) -> Config {
        Config {
            interval,
            web: WebConfig::none(),
            limits: LIMITS,
            stop_sampler_after: None,
        }
    }
}

/// Why the exporter could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The sampler thread could not be started.
    #[error("cannot start the sampler thread")]
    SamplerThread(#[source] std::io::Error),
    /// The HTTP runtime could not be started.
    #[error("cannot start the HTTP runtime")]
    Runtime(#[source] std::io::Error),
    /// The listening socket could not be used.
    #[error("cannot {doing}")]
    Listener {
        /// What failed (`hand the listening socket to the runtime`).
        doing: &'static str,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// A running sampler and the server of its samples. [`Exporter::start`] takes the first sample
/// (so that no scrape sees an empty exposition) and starts the sampler thread;
/// [`Exporter::serve`] (async, on the program's runtime) or [`Exporter::run`] (blocking, on a
/// runtime of its own) answers connections.
pub struct Exporter {
    shared: Arc<Shared>,
    server: Arc<Server>,
}

impl std::fmt::Debug for Exporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exporter")
            .field("scheme", &self.scheme())
            .field("interval", &self.shared.interval())
            .finish_non_exhaustive()
    }
}

impl Exporter {
    /// Takes a first sample of `collector` and starts sampling it every `config.interval` on a
    /// thread of its own.
    ///
    /// # Errors
    ///
    /// [`ServeError::SamplerThread`].
    pub fn start(
        collector: ProcessCollector,
        options: Options,
        config: Config,
    ) -> Result<Exporter, ServeError> {
        let interval = config.interval;
        let mut sampler = Sampler {
            collector,
            options: Arc::new(options),
            shared: None,
            stop_after: config.stop_sampler_after,
            taken: 0,
        };
        let first = sampler.sample();
        let shared = Arc::new(Shared::new(first, interval));
        sampler.shared = Some(shared.clone());
        let on_exit = shared.clone();
        std::thread::Builder::new()
            .name("gpuscope-sampler".into())
            .spawn(move || {
                // A panic (or a return) ends sampling: say so, so that /health and /metrics
                // turn to 503 at once instead of serving the last sample for ever.
                let why = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    sampler.run(interval)
                })) {
                    Ok(()) => "the sampler thread returned".to_string(),
                    Err(panic) => {
                        let message = panic
                            .downcast_ref::<&str>()
                            .map(|s| s.to_string())
                            .or_else(|| panic.downcast_ref::<String>().cloned())
                            .unwrap_or_else(|| "no message".into());
                        format!("the sampler thread panicked: {message}")
                    }
                };
                on_exit.set_stopped(why);
            })
            .map_err(ServeError::SamplerThread)?;
        let server = Arc::new(Server::new(shared.clone(), config.web, config.limits));
        Ok(Exporter { shared, server })
    }

    /// `https` with TLS, else `http`.
    pub fn scheme(&self) -> &'static str {
        self.server.scheme()
    }

    /// Whether the served sample can be trusted now (what `/health` answers).
    pub fn health(&self) -> Health {
        self.shared.health()
    }

    /// The latest sample.
    pub fn latest(&self) -> Arc<Exposition> {
        self.shared.latest()
    }

    /// Answers connections on `listener` for ever, each on its own task of the current tokio
    /// runtime (which needs its IO and time drivers).
    pub async fn serve(&self, listener: tokio::net::TcpListener) {
        server::serve(listener, self.server.clone()).await;
    }

    /// Calls `on_change` once per change of health (fresh, stale, stopped), for ever. It
    /// sleeps until the served sample would turn stale or the sampler stops, not on a tick.
    pub async fn watch_health(&self, on_change: impl FnMut(&Health)) {
        watch(&self.shared, on_change).await;
    }

    /// Serves `listener` for ever on a runtime of its own, calling `on_health_change` once per
    /// change of health.
    ///
    /// One thread serves every connection: with work-stealing workers, a scrape woken on one
    /// worker and run on another waits for a cross-thread wake-up, which measured a p99 of
    /// 2.4 to 4 ms at 200 scrapes/s against 0.34 ms for a current-thread runtime
    /// (docs/benchmarks.md). bcrypt checks still run off this thread, on the blocking pool.
    ///
    /// # Errors
    ///
    /// [`ServeError::Runtime`] or [`ServeError::Listener`]; once serving, it does not return.
    pub fn run(
        self,
        listener: std::net::TcpListener,
        on_health_change: impl FnMut(&Health) + Send + 'static,
    ) -> Result<(), ServeError> {
        listener
            .set_nonblocking(true)
            .map_err(|source| ServeError::Listener {
                doing: "make the listening socket non-blocking",
                source,
            })?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .max_blocking_threads(2)
            .thread_name("gpuscope-http")
            .enable_io()
            .enable_time()
            .build()
            .map_err(ServeError::Runtime)?;
        let exporter = Arc::new(self);
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).map_err(|source| {
                ServeError::Listener {
                    doing: "hand the listening socket to the runtime",
                    source,
                }
            })?;
            let watcher = exporter.clone();
            tokio::spawn(async move { watcher.watch_health(on_health_change).await });
            exporter.serve(listener).await;
            Ok(())
        })
    }
}

/// Calls `on_change` once per change of `shared`'s health, for ever; needs a tokio runtime
/// with its time driver.
///
/// While the sample is fresh, its health can change only when it grows older than
/// [`crate::STALE_AFTER_INTERVALS`] intervals or when the sampler stops (which wakes this at
/// once); so it sleeps until the served sample would turn stale instead of looking every
/// tick: one sleep of two to three intervals, which tokio's timer ends in two wake-ups, where
/// the tick took four a second at a 1 s interval (docs/benchmarks.md, "The idle exporter over
/// fake-nvml"). While
/// stale it looks every half interval (25 ms to 1 s), to say when it recovers; once stopped,
/// nothing changes any more.
async fn watch(shared: &Shared, mut on_change: impl FnMut(&Health)) {
    let tick = (shared.interval() / 2).clamp(Duration::from_millis(25), Duration::from_secs(1));
    let mut last = Health::Fresh;
    loop {
        let wake = match last {
            // Just past the limit: a sample exactly at it is still fresh.
            Health::Fresh => shared.stale_at() + Duration::from_millis(1),
            Health::Stale(_) => Instant::now() + tick,
            Health::Stopped(_) => return std::future::pending().await,
        };
        // Woken by the time or by the sampler's end: either way the health is judged afresh.
        let _ = tokio::time::timeout_at(wake.into(), shared.stopped()).await;
        let now = shared.health();
        if !now.same_kind(&last) {
            on_change(&now);
        }
        last = now;
    }
}

/// Takes samples and publishes their encodings.
struct Sampler {
    collector: ProcessCollector,
    options: Arc<Options>,
    shared: Option<Arc<Shared>>,
    stop_after: Option<u64>,
    taken: u64,
}

impl Sampler {
    fn run(mut self, interval: Duration) {
        let mut next = Instant::now() + interval;
        loop {
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
            let e = self.sample();
            if let Some(shared) = &self.shared {
                shared.publish(e);
            }
            if self.stop_after.is_some_and(|n| self.taken >= n) {
                panic!(
                    "stopped after {} samples, as --test-stop-sampler-after asked",
                    self.taken
                );
            }
            // After a stall (a suspended machine, a slow NVML) start afresh instead of catching
            // up with a burst of samples.
            let now = Instant::now();
            next = next.checked_add(interval).unwrap_or(now);
            if next < now {
                next = now + interval;
            }
        }
    }

    fn sample(&mut self) -> Exposition {
        let started = Instant::now();
        let inputs = Inputs::take(&self.collector);
        self.taken += 1;
        // Turned into families and encoded when a scrape asks (see `Exposition`).
        Exposition::new(inputs, Arc::clone(&self.options), started)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// The health changes `watch` reported, in order, as their kinds' names.
    fn kinds(seen: &Mutex<Vec<Health>>) -> Vec<&'static str> {
        seen.lock()
            .unwrap()
            .iter()
            .map(|h| match h {
                Health::Fresh => "fresh",
                Health::Stale(_) => "stale",
                Health::Stopped(_) => "stopped",
            })
            .collect()
    }

    /// Waits (generously, to fail rather than hang) until `seen` holds `n` changes.
    async fn until_reported(seen: &Mutex<Vec<Health>>, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while seen.lock().unwrap().len() < n && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Runs `check` on a current-thread runtime with a health watcher over a sample published
    /// at `interval`, and the changes it has reported so far; stops the watcher after.
    fn with_watcher<F, Fut>(interval: Duration, check: F)
    where
        F: FnOnce(Arc<Shared>, Arc<Mutex<Vec<Health>>>) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        runtime.block_on(async {
            let shared = Arc::new(Shared::new(crate::test_support::exposition(), interval));
            let seen = Arc::new(Mutex::new(Vec::new()));
            let watcher = {
                let (shared, seen) = (shared.clone(), seen.clone());
                tokio::spawn(async move {
                    watch(&shared, |h| seen.lock().unwrap().push(h.clone())).await;
                })
            };
            check(shared, seen).await;
            watcher.abort();
        });
    }

    #[test]
    fn the_health_watcher_that_sleeps_until_a_sample_turns_stale_still_reports_each_change() {
        // Long enough that a loaded machine sees the new sample below fresh.
        with_watcher(Duration::from_millis(500), |shared, seen| async move {
            // No sample after the first: stale after three intervals.
            until_reported(&seen, 1).await;
            assert_eq!(kinds(&seen), ["stale"]);
            // A new sample: fresh again.
            shared.publish(crate::test_support::exposition());
            until_reported(&seen, 2).await;
            assert_eq!(kinds(&seen), ["stale", "fresh"]);
        });
    }

    #[test]
    fn the_health_watcher_hears_of_a_stopped_sampler_at_once_not_when_the_sample_turns_stale() {
        // Stale only after three minutes: a watcher that slept until then would miss the ten
        // seconds `until_reported` waits.
        with_watcher(Duration::from_secs(60), |shared, seen| async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            shared.set_stopped("it panicked".into());
            until_reported(&seen, 1).await;
            assert_eq!(kinds(&seen), ["stopped"]);
        });
    }
}
