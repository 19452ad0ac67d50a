//! `--remote URL...`: a small lab without Prometheus reads its gpuscope exporters directly.
//!
//! Each exporter's `/metrics` (the Prometheus text format it serves to every client that does
//! not ask for OpenMetrics) is read and its samples folded into the same fleet model as
//! Prometheus's answers: the same families, the same labels, one host per exporter.
//!
//! Nothing in an answer is trusted:
//!
//! - **A host is the URL asked for.** Its answer's `hostname` label names it for people, but
//!   which host a sample belongs to is decided by the URL it was read from: an exporter whose
//!   series carry another's `instance` or `hostname` cannot overwrite that host or hide itself,
//!   and two exporters that give one hostname are two hosts.
//! - **Every URL asked for is a host.** One that cannot be read (refused, timed out, an HTTP
//!   error, too large, not UTF-8 text) or whose answer holds no gpuscope sample (an HTML page,
//!   an empty body, another exporter's metrics) is a host that is down, with the reason in
//!   [`Fleet::errors`](crate::Fleet::errors) under its URL.
//! - **Bounded threads, memory and time.** A pool of at most [`MAX_READERS`] threads (the
//!   calling one among them) reads the URLs; a thread that cannot start is one reader less,
//!   never a panic. Names are looked up on threads of their own, at most [`MAX_LOOKUPS`] at
//!   once; an IP address needs no lookup. Each answer is folded as it arrives and dropped, so
//!   at most one answer per reader ([`MAX_EXPOSITION_BYTES`] each) is held at once. The whole
//!   read has one deadline, the timeout of [`ClientOptions`]. Each exporter is given an equal
//!   share of the time left among the rounds the readers still have to make, so exporters
//!   that never answer cost their share and cannot keep the others from being read; those
//!   that ran out of their share are tried again with what is left, until the deadline. One
//!   still unanswered then is down, "no whole answer in time" (or "not read", when no reader
//!   came to it at all).

use std::borrow::Cow;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::model::{Fleet, FleetBuilder, ModelLimits, DEVICE_FAMILIES, PROCESS_FAMILIES};
use crate::prom::{parse_value, ClientOptions, Connection, Series, SetupError};
use gpu_export::names::EXPORTER_SAMPLE_TIMESTAMP_SECONDS;

/// The largest exposition read from one exporter, bytes: about 70 times what an 8-GPU host
/// serves with `--processes --process-command` and a few dozen processes. At most
/// [`MAX_READERS`] of them are held at once.
pub const MAX_EXPOSITION_BYTES: u64 = 16 << 20;

/// At most this many exporters are read at once (threads, the calling one included): a
/// refresh stays far under a `pids.max` of 30, and at most this many answers are held at once.
/// Exporters that never answer hold a reader for their share of the deadline only, so a few
/// dozen of them among a lab's exporters leave the rest readable.
pub const MAX_READERS: usize = 16;

pub use crate::lookup::MAX_LOOKUPS;

/// Exporters read directly.
#[derive(Clone)]
pub struct Remote {
    connection: Connection,
    targets: Vec<Target>,
    /// The whole read's deadline, from its start.
    timeout: Duration,
    /// The bounds of each refresh's fleet model (the defaults, smaller in tests).
    limits: ModelLimits,
}

/// One exporter: the URL read, and the host it is.
#[derive(Clone)]
struct Target {
    /// The URL as given (`/metrics` added), credentials (`user:password@`) included: the read
    /// sends them.
    url: String,
    /// The same URL without its credentials: the host's identity, its instance and its name
    /// for people, in the fleet's errors, its source and the log.
    host: String,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hosts: Vec<&str> = self.targets.iter().map(|t| t.host.as_str()).collect();
        f.debug_struct("Remote").field("urls", &hosts).finish()
    }
}

/// Why the exporters cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// A URL that is not http(s).
    #[error("{0:?} is not an http:// or https:// URL")]
    Url(String),
    /// A TLS file that cannot be used.
    #[error(transparent)]
    Setup(#[from] SetupError),
}

/// The least time one exporter is given in a pass, however many wait: less would fail
/// exporters that answer at once but sit a few network round trips away.
const MIN_SHARE: Duration = Duration::from_millis(100);

/// At most this many passes: the first over every exporter, each next one over those that ran
/// out of their share of the time, while time is left.
const MAX_PASSES: usize = 4;

/// How one URL's read ended.
#[derive(Debug)]
enum Outcome {
    /// Folded into the fleet; with a note when some of its lines were skipped.
    Read(Option<String>),
    /// Down, for this reason.
    Down(String),
    /// No whole answer within the time it was given.
    TimedOut,
    /// Not read: the deadline had passed when a reader came to it.
    NotRead,
}

/// Why an exporter's answer was not read.
#[derive(Debug)]
enum ReadError {
    /// No whole answer within the time given.
    TimedOut,
    /// Anything else, for people.
    Failed(String),
}

/// The time one exporter is given when `left` remains before the deadline and `queued`
/// exporters of the pass (this one included) are still to be read, `readers` at a time: an
/// equal share of what is left among the rounds still to make, at least [`MIN_SHARE`], never
/// beyond the deadline. So exporters that never answer cost their share, not the whole
/// deadline, and cannot keep the others from being read.
fn share(left: Duration, queued: usize, readers: usize) -> Duration {
    let rounds = queued.div_ceil(readers.max(1)).max(1);
    (left / u32::try_from(rounds).unwrap_or(u32::MAX))
        .max(MIN_SHARE)
        .min(left)
}

/// How a pool's threads started.
#[derive(Debug)]
struct Started {
    /// Threads started besides the calling one.
    threads: usize,
    /// Threads wanted besides the calling one.
    wanted: usize,
    /// Why the first one that could not start did not (no more were tried).
    failed: Option<io::Error>,
}

/// A reader thread of the pool.
fn reader_thread(k: usize) -> thread::Builder {
    thread::Builder::new().name(format!("gpuscope-remote-{k}"))
}

impl Remote {
    /// A reader of these exporters (`http://node1:9445`; `/metrics` is added when the URL has
    /// no path; a URL given twice is read once), with the TLS settings, basic auth and timeout
    /// of `options` (its `url` is not used). The timeout bounds each refresh as a whole. A
    /// URL's credentials (`http://user:password@node1:9445`) are sent when it is read, and
    /// never shown: the host is the URL without them (two URLs that differ only in them are
    /// one host, read with the first one's).
    ///
    /// # Errors
    ///
    /// A URL that is not http(s), a TLS file that cannot be used.
    pub fn new(urls: &[String], options: &ClientOptions) -> Result<Remote, RemoteError> {
        Remote::with_lookups(urls, options, crate::lookup::lookup_thread)
    }

    /// [`Remote::new`], with name lookups on threads made by `lookup`.
    fn with_lookups(
        urls: &[String],
        options: &ClientOptions,
        lookup: fn() -> thread::Builder,
    ) -> Result<Remote, RemoteError> {
        let mut targets: Vec<Target> = Vec::new();
        for url in urls {
            let rest = url
                .strip_prefix("http://")
                .or_else(|| url.strip_prefix("https://"))
                .ok_or_else(|| RemoteError::Url(url.clone()))?;
            if rest.is_empty() {
                return Err(RemoteError::Url(url.clone()));
            }
            let url = with_metrics_path(url, rest);
            let host = without_userinfo(&url).into_owned();
            if !targets.iter().any(|t| t.host == host) {
                targets.push(Target { url, host });
            }
        }
        let connection = Connection::with_lookup_threads(options, lookup)?;
        Ok(Remote {
            connection,
            targets,
            timeout: options.timeout,
            limits: ModelLimits::default(),
        })
    }

    /// Reads every exporter (at most [`MAX_READERS`] at once, all within the timeout) and
    /// builds the fleet: one host per URL, in any case; one that cannot be read, or whose
    /// answer has no gpuscope sample, is down with the reason in `errors`.
    pub fn refresh(&self, stale_after: f64) -> Fleet {
        self.refresh_with(stale_after, &reader_thread)
    }

    /// [`Remote::refresh`], with reader threads made by `reader`.
    fn refresh_with(&self, stale_after: f64, reader: &dyn Fn(usize) -> thread::Builder) -> Fleet {
        let started = Instant::now();
        let deadline = started + self.timeout;
        let builder = Mutex::new(FleetBuilder::within(self.limits));
        let outcomes: Mutex<Vec<Option<Outcome>>> =
            Mutex::new(self.targets.iter().map(|_| None).collect());
        let lock = |m| -> std::sync::MutexGuard<'_, Vec<Option<Outcome>>> {
            Mutex::lock(m).unwrap_or_else(PoisonError::into_inner)
        };
        let mut pending: Vec<usize> = (0..self.targets.len()).collect();
        let mut report: Option<Started> = None;
        for _ in 0..MAX_PASSES {
            if pending.is_empty() || Instant::now() >= deadline {
                break;
            }
            let readers = MAX_READERS.min(pending.len());
            let read_one = |k: usize| {
                let i = pending[k];
                let left = deadline.saturating_duration_since(Instant::now());
                let outcome = if left.is_zero() {
                    Outcome::NotRead
                } else {
                    let time = share(left, pending.len() - k, readers);
                    self.read_and_fold(&self.targets[i], time, &builder)
                };
                let mut outcomes = lock(&outcomes);
                // A second pass that comes too late leaves the first one's "timed out".
                if !(matches!(outcome, Outcome::NotRead) && outcomes[i].is_some()) {
                    outcomes[i] = Some(outcome);
                }
            };
            let pass = run_pool(pending.len(), MAX_READERS, reader, &read_one);
            if let Some(e) = &pass.failed {
                tracing::debug!(
                    started = pass.threads,
                    wanted = pass.wanted,
                    error = %e,
                    "fewer exporter readers than wanted"
                );
            }
            if report.as_ref().is_none_or(|r| r.failed.is_none()) {
                report = Some(pass);
            }
            pending = lock(&outcomes)
                .iter()
                .enumerate()
                .filter(|(_, o)| matches!(o, Some(Outcome::TimedOut)))
                .map(|(i, _)| i)
                .collect();
        }
        let mut b = builder.into_inner().unwrap_or_else(PoisonError::into_inner);
        b.evaluated_at(Some(unix_now() - started.elapsed().as_secs_f64()));
        let outcomes = outcomes
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        for (target, outcome) in self.targets.iter().zip(outcomes) {
            let url = &target.host;
            let reason = match outcome {
                Some(Outcome::Read(note)) => {
                    if let Some(note) = note {
                        b.error(url, note);
                    }
                    continue;
                }
                Some(Outcome::Down(reason)) => reason,
                Some(Outcome::TimedOut) => format!(
                    "no whole answer in time (the read of every exporter has {:?} together)",
                    self.timeout
                ),
                Some(Outcome::NotRead) => not_read(self.timeout, report.as_ref()),
                None => "its reader failed".to_string(),
            };
            b.error(url, reason);
            b.unreachable(url);
        }
        let source: Vec<&str> = self.targets.iter().map(|t| t.host.as_str()).collect();
        b.finish(source.join(" "), stale_after, true)
    }

    /// Reads `target` within `time` and folds its answer into `builder`, as its host.
    fn read_and_fold(
        &self,
        target: &Target,
        time: Duration,
        builder: &Mutex<FleetBuilder>,
    ) -> Outcome {
        let answer = match self.read(target, time) {
            Ok(answer) => answer,
            Err(ReadError::TimedOut) => return Outcome::TimedOut,
            Err(ReadError::Failed(reason)) => return Outcome::Down(reason),
        };
        let url = target.host.as_str();
        let mut b = builder.lock().unwrap_or_else(PoisonError::into_inner);
        let refused = b.refused();
        let folded = fold_exposition(&mut b, url, &answer.text, unix_now());
        if b.has_host(url) {
            Outcome::Read(folded.note())
        } else if let Some(bound) = b.bound_reached_since(refused) {
            // Its samples were there; the fleet's model had no room left for a new host.
            Outcome::Down(format!(
                "not kept: {bound} ({} gpuscope samples in the answer)",
                folded.samples
            ))
        } else {
            Outcome::Down(format!(
                "no gpuscope samples in the answer ({}, {} bytes)",
                answer.content_type,
                answer.text.len()
            ))
        }
    }

    /// One exporter's exposition, or why not, within `time`; logged at `debug` with its time
    /// (and its URL without credentials).
    fn read(&self, target: &Target, time: Duration) -> Result<Answer, ReadError> {
        let started = Instant::now();
        let answer = self.read_untimed(&target.url, time);
        let took_ms = started.elapsed().as_micros() as f64 / 1000.0;
        let url = gpu_devices::text::Escaped(&target.host);
        match &answer {
            Ok(a) => tracing::debug!(%url, bytes = a.text.len(), took_ms, "exporter read"),
            Err(e) => {
                let error = match e {
                    ReadError::TimedOut => format!("no whole answer within {time:?}"),
                    ReadError::Failed(reason) => reason.clone(),
                };
                let error = gpu_devices::text::Escaped(&error);
                tracing::debug!(%url, %error, took_ms, "exporter read failed")
            }
        }
        answer
    }

    fn read_untimed(&self, url: &str, time: Duration) -> Result<Answer, ReadError> {
        let why = |e: ureq::Error| match e {
            ureq::Error::Timeout(_) => ReadError::TimedOut,
            ureq::Error::BodyExceedsLimit(_) => ReadError::Failed(format!(
                "the answer is larger than {} MiB",
                MAX_EXPOSITION_BYTES >> 20
            )),
            e => ReadError::Failed(e.to_string()),
        };
        let request = self
            .connection
            .get(url)
            .header("Accept", "text/plain;version=0.0.4");
        let mut response = Connection::call_within(request, time).map_err(why)?;
        let status = response.status().as_u16();
        if status != 200 {
            return Err(ReadError::Failed(format!(
                "the exporter answered HTTP {status}"
            )));
        }
        let content_type = response
            .headers()
            .get("content-type")
            .map(|v| printable(v.as_bytes()))
            .unwrap_or_else(|| "no content type".into());
        let bytes = response
            .body_mut()
            .with_config()
            .limit(MAX_EXPOSITION_BYTES)
            .read_to_vec()
            .map_err(why)?;
        String::from_utf8(bytes)
            .map(|text| Answer {
                text,
                content_type: content_type.clone(),
            })
            .map_err(|e| {
                ReadError::Failed(format!(
                    "the answer is not UTF-8 text ({content_type}, {} bytes)",
                    e.as_bytes().len()
                ))
            })
    }
}

/// An exporter's answer.
struct Answer {
    text: String,
    /// Its `Content-Type`, printable ASCII only, for people.
    content_type: String,
}

/// A header's value for people: its printable ASCII only (no control character, no escape
/// sequence, no bidi override can reach a terminal through it), 64 characters at most.
fn printable(value: &[u8]) -> String {
    value
        .iter()
        .filter(|b| b.is_ascii_graphic() || **b == b' ')
        .take(64)
        .map(|&b| char::from(b))
        .collect()
}

/// Unix time now, seconds.
fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Why an exporter was not read: the deadline passed before a reader came to it.
fn not_read(timeout: Duration, pool: Option<&Started>) -> String {
    let mut why = format!(
        "not read: the read of every exporter has {timeout:?} together, and it ran out before \
         a reader came to this one"
    );
    if let Some(Started {
        threads,
        wanted,
        failed: Some(e),
    }) = pool
    {
        why.push_str(&format!(
            " (only {} of {} reader threads could start: {e})",
            threads + 1,
            wanted + 1
        ));
    }
    why
}

/// Runs `work(i)` for every `i` in `0..n`, on the calling thread and up to `readers - 1` more
/// made by `thread` (given their number from 1); each takes the next `i` until none is left.
/// A thread that cannot start is one reader less, its share taken by the others (the calling
/// thread always reads); the first one that cannot start ends the starting, since the next
/// would meet the same limit.
fn run_pool(
    n: usize,
    readers: usize,
    thread: &dyn Fn(usize) -> thread::Builder,
    work: &(dyn Fn(usize) + Sync),
) -> Started {
    let next = AtomicUsize::new(0);
    let run = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= n {
            break;
        }
        work(i);
    };
    let wanted = readers.min(n).saturating_sub(1);
    thread::scope(|scope| {
        let mut handles = Vec::with_capacity(wanted);
        let mut failed = None;
        for k in 1..=wanted {
            match thread(k).spawn_scoped(scope, run) {
                Ok(h) => handles.push(h),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        run();
        let threads = handles.len();
        // A reader that panicked leaves its URL without an outcome ("its reader failed");
        // the others took the rest.
        for h in handles {
            let _ = h.join();
        }
        Started {
            threads,
            wanted,
            failed,
        }
    })
}

/// What folding an exposition handed to the fleet and what it skipped.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Folded {
    /// Samples of the families the fleet reads (the sample time, a device or process family),
    /// handed to the model (which keeps them within its bounds).
    pub samples: usize,
    /// Lines that are neither a sample, a comment nor blank.
    pub malformed: usize,
    /// The first of them (1 for the first line).
    pub first_malformed: Option<usize>,
}

impl Folded {
    /// A note for the fleet's errors when lines were skipped.
    fn note(&self) -> Option<String> {
        let first = self.first_malformed?;
        Some(format!(
            "{} {} of the answer not in the text format, skipped (the first is line {first})",
            self.malformed,
            if self.malformed == 1 { "line" } else { "lines" },
        ))
    }
}

/// Folds one exporter's text exposition into the fleet, as host `url` whatever the labels of
/// its samples say (`hostname` names the host; `instance` is not read). Says what it skipped.
pub fn fold_exposition(b: &mut FleetBuilder, url: &str, text: &str, now: f64) -> Folded {
    let mut folded = Folded::default();
    for (n, line) in text.lines().enumerate() {
        let Some((name, labels, value)) = parse_line(line) else {
            let line = line.trim();
            if !line.is_empty() && !line.starts_with('#') {
                folded.malformed += 1;
                folded.first_malformed.get_or_insert(n + 1);
            }
            continue;
        };
        let series = Series {
            metric: labels,
            value: (now, Cow::Borrowed(value)),
        };
        if name == EXPORTER_SAMPLE_TIMESTAMP_SECONDS {
            b.sample_time(&series, Some(url));
        } else if let Some(&(_, f)) = DEVICE_FAMILIES.iter().find(|(n, _)| *n == name) {
            b.device(f, &series, Some(url));
        } else if let Some(&(_, f)) = PROCESS_FAMILIES.iter().find(|(n, _)| *n == name) {
            b.process(f, &series, Some(url));
        } else {
            continue;
        }
        folded.samples += 1;
    }
    if folded.samples == 0 {
        fold_door_exposition(b, url, text, now, &mut folded);
    }
    folded
}

/// An exposition with no gpuscope samples: read through the first door whose names it holds
/// (dcgm-exporter's, else nvidia_gpu_exporter's), as the host at `url` read `now`; its
/// samples of that door counted in `folded`. nvidia_gpu_exporter's info is read first, in a
/// pass of its own (its labels name the GPUs of the other series, wherever it is in the text).
fn fold_door_exposition(
    b: &mut FleetBuilder,
    url: &str,
    text: &str,
    now: f64,
    folded: &mut Folded,
) {
    let samples = || text.lines().filter_map(parse_line);
    let Some(door) = crate::doors::DOORS.into_iter().find(|&door| {
        samples().any(|(name, _, _)| crate::doors::field(name).is_some_and(|f| f.door == door))
    }) else {
        return;
    };
    if !b.door_host(url, door, now) {
        return;
    }
    let info = crate::doors::labels(door).and_then(|l| l.info);
    for infos in [true, false] {
        if infos && info.is_none() {
            continue;
        }
        for (name, labels, value) in samples() {
            let Some(f) = crate::doors::field(name).filter(|f| f.door == door) else {
                continue;
            };
            if (Some(f.name) == info) != infos {
                continue;
            }
            let series = Series {
                metric: labels,
                value: (now, Cow::Borrowed(value)),
            };
            b.door_device(&series, Some(name), Some(url));
            folded.samples += 1;
        }
    }
}

/// `url` with any `user:password@` left out: how a host read directly is named, in the fleet
/// and the log. The authority ends at the first `/`, `?` or `#`, so an `@` in a path, query or
/// fragment is not taken for the end of credentials.
pub fn without_userinfo(url: &str) -> Cow<'_, str> {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (&url[..scheme.len() + 3], rest),
        None => ("", url),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}{}", &rest[at + 1..]).into(),
        None => url.into(),
    }
}

/// A sample's labels, borrowed from the text where no escape had to be undone.
pub type Labels<'a> = crate::prom::LabelSet<'a>;

/// One sample line of the text format: `name{label="value",...} value [timestamp]`; `None`
/// for comments, blank lines and anything malformed.
pub fn parse_line(line: &str) -> Option<(&str, Labels<'_>, &str)> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let name_end = line
        .find(|c: char| c == '{' || c.is_whitespace())
        .unwrap_or(line.len());
    let name = &line[..name_end];
    if name.is_empty() {
        return None;
    }
    let mut labels = Labels::default();
    let mut rest = &line[name_end..];
    if let Some(after) = rest.strip_prefix('{') {
        rest = after;
        loop {
            rest = rest.trim_start_matches([' ', ',']);
            if let Some(after) = rest.strip_prefix('}') {
                rest = after;
                break;
            }
            let eq = rest.find('=')?;
            let key = rest[..eq].trim();
            rest = rest[eq + 1..].strip_prefix('"')?;
            let (value, after) = quoted(rest)?;
            labels.insert(Cow::Borrowed(key), value);
            rest = after;
        }
    }
    let value = rest.split_whitespace().next()?;
    parse_value(value)?;
    Some((name, labels, value))
}

/// A label value up to its closing quote, unescaped (`\\`, `\"`, `\n`), and what follows.
fn quoted(text: &str) -> Option<(Cow<'_, str>, &str)> {
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        match (escaped, c) {
            (false, '\\') => escaped = true,
            (false, '"') => {
                let raw = &text[..i];
                let value = if raw.contains('\\') {
                    let mut out = String::with_capacity(raw.len());
                    let mut chars = raw.chars();
                    while let Some(c) = chars.next() {
                        if c == '\\' {
                            match chars.next() {
                                Some('n') => out.push('\n'),
                                Some(other) => out.push(other),
                                None => {}
                            }
                        } else {
                            out.push(c);
                        }
                    }
                    Cow::Owned(out)
                } else {
                    Cow::Borrowed(raw)
                };
                return Some((value, &text[i + 1..]));
            }
            _ => escaped = false,
        }
    }
    None
}

/// `url` with `/metrics` as its path when it has none: put before a query or a fragment
/// (`http://node1:9445?x` reads `http://node1:9445/metrics?x`, not `...?x/metrics`). `rest` is
/// `url` after its scheme.
fn with_metrics_path(url: &str, rest: &str) -> String {
    let authority_end = rest.find(['/', '?', '#']);
    match authority_end {
        Some(at) if rest[at..].starts_with('/') => url.to_string(),
        Some(at) => {
            let split = url.len() - rest.len() + at;
            format!("{}/metrics{}", &url[..split], &url[split..])
        }
        None => format!("{url}/metrics"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lookup::{lookup_thread, Lookups};
    use crate::model::HostState;
    use crate::stub_exporter::{exposition, Answer, StubExporter};
    use std::sync::Arc;
    use ureq::unversioned::transport::NextTimeout;

    #[test]
    fn urls_are_logged_without_their_credentials() {
        // (URL, as logged)
        for (url, logged) in [
            (
                "http://ops:s3cret@node1:9445/metrics",
                "http://node1:9445/metrics",
            ),
            ("https://node1:9445/a@b", "https://node1:9445/a@b"),
            ("http://node1:9445", "http://node1:9445"),
            ("http://a@b@node1", "http://node1"),
            ("ops@node1/x", "node1/x"),
            // An @ after the authority is not the end of credentials.
            ("http://node1:9445?u=a@b", "http://node1:9445?u=a@b"),
            ("http://node1#a@b", "http://node1#a@b"),
            ("http://ops:pw@node1?u=a@b", "http://node1?u=a@b"),
        ] {
            assert_eq!(without_userinfo(url), logged, "{url}");
        }
    }

    /// `http://h:9445?x` was read as `http://h:9445?x/metrics`: the path went after the
    /// query.
    #[test]
    fn metrics_is_the_path_of_a_url_without_one_before_its_query_or_fragment() {
        for (url, read) in [
            ("http://node1:9445", "http://node1:9445/metrics"),
            ("http://node1:9445/", "http://node1:9445/"),
            ("http://node1:9445/x/metrics", "http://node1:9445/x/metrics"),
            ("http://node1:9445?a=1", "http://node1:9445/metrics?a=1"),
            ("https://node1#top", "https://node1/metrics#top"),
            (
                "http://ops:pw@node1?u=a/b",
                "http://ops:pw@node1/metrics?u=a/b",
            ),
        ] {
            let remote = Remote::new(&[url.to_string()], &ClientOptions::default()).unwrap();
            assert_eq!(remote.targets[0].url, read, "{url}");
        }
    }

    #[test]
    fn sample_lines_with_labels_escapes_and_timestamps() {
        let (name, labels, value) =
            parse_line(r#"gpuscope_device_up{hostname="a \"b\"\\c",index="0:1"} 1 1700000000"#)
                .unwrap();
        assert_eq!(name, "gpuscope_device_up");
        assert_eq!(labels.get("hostname").unwrap(), "a \"b\"\\c");
        assert_eq!(labels.get("index").unwrap(), "0:1");
        assert_eq!(value, "1");
        let (name, labels, value) = parse_line("gpuscope_host_cpus 64").unwrap();
        assert_eq!(
            (name, labels, value),
            ("gpuscope_host_cpus", Labels::default(), "64")
        );
        for bad in [
            "# HELP x y",
            "",
            "x{a=\"1} 2",
            "x{a=1} 2",
            "x{a=\"1\"}",
            "x{a=\"1\"} y",
        ] {
            assert!(parse_line(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn an_exposition_becomes_one_host_named_by_its_hostname_label() {
        let text = "# TYPE gpuscope_device_up gauge\n\
            gpuscope_device_up{hostname=\"lab1\",index=\"0\",uuid=\"GPU-1\",name=\"T4\"} 1\n\
            gpuscope_device_memory_free_bytes{hostname=\"lab1\",index=\"0\",uuid=\"GPU-1\",name=\"T4\"} 1024\n\
            gpuscope_exporter_sample_timestamp_seconds{hostname=\"lab1\"} 99.5\n\
            gpuscope_process_gpu_memory_bytes{hostname=\"lab1\",index=\"0\",pid=\"7\",username=\"u\"} 5\n";
        let mut b = FleetBuilder::new();
        fold_exposition(&mut b, "http://lab1:9445/metrics", text, 100.0);
        let f = b.finish("x".into(), 30.0, true);
        assert_eq!(f.hosts.len(), 1);
        let h = &f.hosts[0];
        assert_eq!(h.host, "lab1");
        assert_eq!(h.instance.as_deref(), Some("http://lab1:9445/metrics"));
        assert_eq!(h.state, crate::model::HostState::Up);
        assert_eq!(h.sample_age_seconds, Some(0.5));
        assert_eq!(h.devices[0].memory_free_bytes, Some(1024));
        assert_eq!(h.devices[0].processes[0].pid, 7);
    }

    /// Issue 32 item 4, in the model: exporter B's samples carrying A's URL as `instance` and
    /// A's `hostname` stay B's; two exporters giving one hostname stay two hosts.
    #[test]
    fn spoofed_instance_and_hostname_labels_cannot_take_over_another_host() {
        use crate::stub_exporter::exposition;
        let (a, b, c) = (
            "http://a:9445/metrics",
            "http://b:9445/metrics",
            "http://c/metrics",
        );
        let mut builder = FleetBuilder::new();
        let now = crate::stub_exporter::unix_now();
        fold_exposition(&mut builder, a, &exposition("node-a", "a", 10, &[]), now);
        let spoof = [("instance", a)];
        fold_exposition(&mut builder, b, &exposition("node-a", "b", 70, &spoof), now);
        fold_exposition(&mut builder, c, &exposition("node-a", "c", 20, &[]), now);
        let f = builder.finish("x".into(), 30.0, true);
        let hosts: Vec<(&str, &str, Option<&str>, Option<u64>)> = f
            .hosts
            .iter()
            .map(|h| {
                (
                    h.host.as_str(),
                    h.instance.as_deref().unwrap_or(""),
                    h.devices[0].identity.uuid.as_deref(),
                    h.devices[0].memory_free_bytes,
                )
            })
            .collect();
        assert_eq!(
            hosts,
            [
                ("node-a", a, Some("GPU-a"), Some(10)),
                ("node-a", b, Some("GPU-b"), Some(70)),
                ("node-a", c, Some("GPU-c"), Some(20)),
            ]
        );
    }

    #[test]
    fn an_exporter_of_dcgm_or_nvidia_smi_names_is_read_through_them() {
        let dcgm = "# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n\
            DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"GPU-a\",Hostname=\"spoof\",instance=\"x\"} 45\n\
            DCGM_FI_DEV_FB_USED{gpu=\"0\",UUID=\"GPU-a\"} 1024\n\
            DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-a\"} 250\n\
            DCGM_FI_DEV_SM_CLOCK{gpu=\"0\",UUID=\"GPU-a\"} 1980\n";
        // nvidia_gpu_exporter's info after the values it names.
        let smi = "nvidia_smi_temperature_gpu{uuid=\"5eed\"} 61\n\
            nvidia_smi_memory_total_bytes{uuid=\"5eed\"} 16106127360\n\
            nvidia_smi_gpu_info{uuid=\"5eed\",index=\"2\",name=\"Tesla T4\"} 1\n";
        let mut b = FleetBuilder::new();
        let folded = fold_exposition(&mut b, "http://d:9400/metrics", dcgm, 100.0);
        assert_eq!(folded.samples, 3, "the three names the fleet reads");
        fold_exposition(&mut b, "http://s:9835/metrics", smi, 100.0);
        let f = b.finish("x".into(), 30.0, true);
        let hosts: Vec<(&str, HostState, Option<&str>)> = f
            .hosts
            .iter()
            .map(|h| (h.host.as_str(), h.state, h.names))
            .collect();
        assert_eq!(
            hosts,
            [
                ("http://d:9400/metrics", HostState::Up, Some("dcgm")),
                ("http://s:9835/metrics", HostState::Up, Some("nvidia-smi"))
            ]
        );
        let d = &f.hosts[0].devices[0];
        assert_eq!(
            (
                d.temperature_celsius,
                d.memory_used_bytes,
                d.gpu_utilization_percent
            ),
            (Some(45), Some(1 << 30), None)
        );
        assert_eq!(d.out_of_range[0].family, "DCGM_FI_DEV_GPU_UTIL");
        let d = &f.hosts[1].devices[0];
        assert_eq!(
            (
                d.identity.id.as_str(),
                d.temperature_celsius,
                d.memory_total_bytes
            ),
            ("2", Some(61), Some(15 << 30))
        );
    }

    #[test]
    fn lines_not_in_the_text_format_are_counted_and_skipped() {
        let text = "# HELP x y\n\ngpuscope_exporter_sample_timestamp_seconds{hostname=\"h\"} 99\n\
            <html>\nx{a=\"1} 2\n";
        let mut b = FleetBuilder::new();
        let folded = fold_exposition(&mut b, "http://h/metrics", text, 100.0);
        assert_eq!(
            folded,
            Folded {
                samples: 1,
                malformed: 2,
                first_malformed: Some(4)
            }
        );
        assert_eq!(
            folded.note().unwrap(),
            "2 lines of the answer not in the text format, skipped (the first is line 4)"
        );
        assert!(b.has_host("http://h/metrics"));
    }

    /// Loose end of issue 32: a URL's credentials (`http://user:password@host`) were the
    /// host's instance and name, and the fleet's source, in every output. The host is the URL
    /// without them (which also keys its errors); a URL given again with other credentials is
    /// the same host.
    #[test]
    fn credentials_in_a_url_never_name_its_host() {
        let stub = StubExporter::start().unwrap();
        let up = stub.add("up", Answer::Exposition(exposition("twin", "up", 1, &[])));
        let html = stub.add("html", Answer::Html);
        let with = |url: &str, who: &str| url.replace("http://", &format!("http://{who}@"));
        let asked = [
            with(&up, "ops:s3cret"),
            with(&html, "ops:s3cret"),
            with(&up, "other:pw"),
        ];
        let f = remote_of(&asked, lookup_thread).refresh(30.0);
        let shown = format!("{f:?}");
        assert!(
            !shown.contains("s3cret") && !shown.contains("ops"),
            "{shown}"
        );
        assert_eq!(f.source, format!("{up} {html}"));
        let urls = [up.clone(), html.clone()];
        let got = states(&f, &urls);
        assert_eq!(got[0], (HostState::Up, vec![]));
        assert_eq!(got[1].0, HostState::Down);
        let name = |url: &str| {
            let h = f.hosts.iter().find(|h| h.instance.as_deref() == Some(url));
            h.map(|h| h.host.clone())
        };
        assert_eq!(name(&up).as_deref(), Some("twin"));
        assert_eq!(name(&html), Some(html.clone()));
        let remote = remote_of(&asked, lookup_thread);
        assert!(!format!("{remote:?}").contains("s3cret"));
    }

    /// Loose end of issue 32: with `--remote`, an exporter whose host the fleet's model could
    /// not keep (its hosts or its bytes all taken) was reported "no gpuscope samples in the
    /// answer". Its reason is the model's bound.
    #[test]
    fn an_exporter_the_full_model_cannot_keep_is_down_for_the_models_bound() {
        let stub = StubExporter::start().unwrap();
        let urls = healthy_exporters(&stub, 3);
        // Room for two hosts.
        let mut remote = remote_of(&urls, lookup_thread);
        remote.limits.hosts = 2;
        let f = remote.refresh(30.0);
        let got = states(&f, &urls);
        let up = got.iter().filter(|(s, _)| *s == HostState::Up).count();
        assert_eq!(up, 2, "{got:?}");
        let (state, errors) = got.iter().find(|(s, _)| *s != HostState::Up).unwrap();
        assert_eq!(*state, HostState::Down);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].starts_with("not kept: the fleet's model holds 2 hosts, its most (")
                && errors[0].ends_with(" gpuscope samples in the answer)"),
            "{errors:?}"
        );
        // Room for no host at all: the bytes are the bound.
        let mut remote = remote_of(&urls[..1], lookup_thread);
        remote.limits.bytes = 0;
        let f = remote.refresh(30.0);
        let (state, errors) = &states(&f, &urls[..1])[0];
        assert_eq!(*state, HostState::Down);
        assert!(
            errors[0].starts_with("not kept: the fleet's model reached its 0 MiB ("),
            "{errors:?}"
        );
    }

    /// The URLs of `n` exporters on `stub`, `e0`, `e1`, ..., each serving one GPU with its own
    /// name as host name and UUID.
    fn healthy_exporters(stub: &StubExporter, n: usize) -> Vec<String> {
        (0..n)
            .map(|i| {
                let name = format!("e{i}");
                stub.add(&name, Answer::Exposition(exposition(&name, &name, 1, &[])))
            })
            .collect()
    }

    /// A reader of `urls` with the default timeout (5 s), name lookups on threads made by
    /// `lookup`.
    fn remote_of(urls: &[String], lookup: fn() -> thread::Builder) -> Remote {
        Remote::with_lookups(urls, &ClientOptions::default(), lookup).unwrap()
    }

    /// A thread that cannot start: its stack is larger than any address space.
    fn impossible_thread() -> thread::Builder {
        thread::Builder::new().stack_size(1 << (usize::BITS - 2))
    }

    /// (state, errors) of each host, by URL.
    fn states(f: &Fleet, urls: &[String]) -> Vec<(HostState, Vec<String>)> {
        urls.iter()
            .map(|u| {
                let hosts: Vec<&crate::Host> = f
                    .hosts
                    .iter()
                    .filter(|h| h.instance.as_deref() == Some(u))
                    .collect();
                assert_eq!(hosts.len(), 1, "one host at {u}: {f:#?}");
                let errors = f
                    .errors
                    .iter()
                    .filter(|e| e.query == *u)
                    .map(|e| e.error.clone())
                    .collect();
                (hosts[0].state, errors)
            })
            .collect()
    }

    /// Issue 32 item 3, in the library: answers with no gpuscope sample are hosts, down, with
    /// the reason; a URL given twice is one host.
    #[test]
    fn an_answer_without_gpuscope_samples_is_a_host_down_with_the_reason() {
        let stub = StubExporter::start().unwrap();
        let urls = vec![
            stub.add("ok", Answer::Exposition(exposition("h", "ok", 1, &[]))),
            stub.add("html", Answer::Html),
            stub.add("empty", Answer::Empty),
            stub.add("node", Answer::NodeExporter),
            stub.add("binary", Answer::Binary),
            stub.add("teapot", Answer::Status(418)),
        ];
        let mut asked = urls.clone();
        asked.push(urls[1].clone());
        let f = remote_of(&asked, lookup_thread).refresh(30.0);
        assert_eq!(f.hosts.len(), urls.len());
        let got = states(&f, &urls);
        assert_eq!(got[0], (HostState::Up, vec![]));
        let html = format!(
            "no gpuscope samples in the answer (text/html; charset=utf-8, {} bytes)",
            crate::stub_exporter::HTML.len()
        );
        assert_eq!(got[1], (HostState::Down, vec![html]));
        let empty = "no gpuscope samples in the answer (text/plain, 0 bytes)";
        assert_eq!(got[2], (HostState::Down, vec![empty.to_string()]));
        assert_eq!(got[3].0, HostState::Down);
        assert!(got[3].1[0].starts_with("no gpuscope samples in the answer"));
        let binary = "the answer is not UTF-8 text (application/octet-stream, 7 bytes)";
        assert_eq!(got[4], (HostState::Down, vec![binary.to_string()]));
        let teapot = "the exporter answered HTTP 418";
        assert_eq!(got[5], (HostState::Down, vec![teapot.to_string()]));
    }

    /// An answer over [`MAX_EXPOSITION_BYTES`] is not read whole: its host is down, saying so.
    #[test]
    fn an_answer_over_the_size_cap_is_a_host_down() {
        let stub = StubExporter::start().unwrap();
        let mut text = exposition("big", "big", 1, &[]);
        let over = usize::try_from(MAX_EXPOSITION_BYTES).unwrap() + 1 - text.len();
        text.push_str(&"#".repeat(over));
        let urls = [stub.add("big", Answer::Exposition(text))];
        let f = remote_of(&urls, lookup_thread).refresh(30.0);
        assert_eq!(
            states(&f, &urls)[0],
            (
                HostState::Down,
                vec!["the answer is larger than 16 MiB".to_string()]
            )
        );
    }

    /// Issue 32 item 9, in the library: when no reader thread can start, the calling thread
    /// reads every exporter itself; none is lost and nothing panics.
    #[test]
    fn a_reader_thread_that_cannot_start_costs_no_host() {
        let stub = StubExporter::start().unwrap();
        let urls = healthy_exporters(&stub, 40);
        let f = remote_of(&urls, lookup_thread).refresh_with(30.0, &|_| impossible_thread());
        for (url, (state, errors)) in urls.iter().zip(states(&f, &urls)) {
            assert_eq!((state, errors), (HostState::Up, vec![]), "{url}");
        }
        // The pool itself: every item done, by the calling thread, the failure kept.
        let done = Mutex::new(Vec::new());
        let pool = run_pool(5, MAX_READERS, &|_| impossible_thread(), &|i| {
            done.lock().unwrap().push((i, thread::current().id()))
        });
        let done = done.into_inner().unwrap();
        assert_eq!(
            done.iter().map(|d| d.0).collect::<Vec<_>>(),
            [0, 1, 2, 3, 4]
        );
        assert!(done.iter().all(|d| d.1 == thread::current().id()));
        assert_eq!((pool.threads, pool.wanted), (0, 4));
        assert!(pool.failed.is_some());
    }

    #[test]
    fn a_content_type_is_shown_as_printable_ascii_cut_at_64() {
        assert_eq!(
            printable(b"text/html; charset=utf-8"),
            "text/html; charset=utf-8"
        );
        assert_eq!(
            printable("text/\x1b[31mhtml\u{202e}\n\u{9b}x".as_bytes()),
            "text/[31mhtmlx"
        );
        assert_eq!(printable(&[b'a'; 100]).len(), 64);
    }

    #[test]
    fn each_exporter_gets_an_equal_share_of_the_time_left() {
        let s = Duration::from_secs;
        // 101 exporters, 16 at a time: 7 rounds share the 2 s.
        assert_eq!(share(s(2), 101, 16), s(2) / 7);
        // As many as the readers: the whole time left.
        assert_eq!(share(s(2), 16, 16), s(2));
        assert_eq!(share(s(2), 1, 16), s(2));
        // Never under the floor, never beyond the deadline.
        assert_eq!(share(s(1), 10_000, 16), MIN_SHARE);
        assert_eq!(
            share(Duration::from_millis(30), 10_000, 16),
            Duration::from_millis(30)
        );
        // No reader counts as one.
        assert_eq!(share(s(1), 5, 0), s(1) / 5);
    }

    /// Issue 32 item 9, name lookups: an IP address needs no thread; a name whose lookup
    /// thread cannot start is that host's error, never a panic; and so is a lookup beyond
    /// the bound.
    #[test]
    fn a_name_lookup_that_cannot_get_a_thread_is_that_hosts_error() {
        let stub = StubExporter::start().unwrap();
        let ip = stub.add("ip", Answer::Exposition(exposition("ip", "ip", 1, &[])));
        let name = stub
            .add("name", Answer::Exposition(exposition("n", "n", 1, &[])))
            .replace("127.0.0.1", "localhost");
        let urls = [ip, name];
        let f = remote_of(&urls, impossible_thread).refresh(30.0);
        let got = states(&f, &urls);
        assert_eq!(got[0], (HostState::Up, vec![]));
        assert_eq!(got[1].0, HostState::Down);
        assert!(
            got[1].1[0].contains("cannot look up localhost: no thread could start"),
            "{:?}",
            got[1].1
        );
        // With threads, the name is looked up.
        let f = remote_of(&urls, lookup_thread).refresh(30.0);
        assert_eq!(states(&f, &urls)[1], (HostState::Up, vec![]));
        // Beyond the bound of lookups running at once.
        let full = Lookups {
            running: Arc::new(AtomicUsize::new(MAX_LOOKUPS)),
            limit: MAX_LOOKUPS,
            thread: lookup_thread,
        };
        let e = full
            .look_up("localhost", 80, &NextTimeout::default())
            .unwrap_err();
        assert!(
            e.to_string().contains("16 name lookups are still running"),
            "{e}"
        );
    }

    proptest::proptest! {
        #[test]
        fn any_line_parses_or_is_skipped_without_panicking(line in "\\PC{0,120}") {
            let _ = parse_line(&line);
        }

        #[test]
        fn label_values_round_trip_through_the_escapes(v in "\\PC{0,40}") {
            let escaped = v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
            let line = format!("m{{l=\"{escaped}\"}} 1");
            let (_, labels, _) = parse_line(&line).unwrap();
            proptest::prop_assert_eq!(labels.get("l").unwrap().as_ref(), v.as_str());
        }
    }
}
