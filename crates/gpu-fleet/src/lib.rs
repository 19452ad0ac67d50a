#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub mod doors;
pub mod filter;
pub mod lookup;
pub mod model;
pub mod names;
pub mod prom;
pub mod remote;
pub mod select;
pub mod values;

/// Hosts, devices and processes with plausible values, for tests that build fleets by hand
/// (this crate's, and with the `testkit` feature those of a program that shows fleets).
#[cfg(any(test, feature = "testkit"))]
pub mod testkit;

/// A hostile gpuscope exporter on 127.0.0.1 (many exporters under one port, each answering
/// as a test says), for the tests of `--remote`: this crate's, and with the `testkit` feature
/// gpuscope's.
#[cfg(any(test, feature = "testkit"))]
pub mod stub_exporter;

use std::collections::HashMap;
use std::time::Duration;

pub use filter::{sort, FilterError, FleetFilter, SortKey};
pub use gpu_select::Criteria;
pub use model::{
    FamilyError, Fleet, FleetDevice, FleetProcess, Host, HostState, ModelLimits, JSON_SCHEMA,
};
pub use prom::{CertFile, ClientOptions, QueryError, SetupError};
pub use remote::RemoteError;
pub use select::{select, FleetSelection};
pub use values::OutOfRange;

use model::{FleetBuilder, DEVICE_FAMILIES, PROCESS_FAMILIES};
use prom::Client;

/// How far back a host's last sample time is looked for: a host whose exporter stopped is
/// listed, down, for this long.
pub const LOOKBACK: &str = "15m";

/// Why a refresh gave no fleet at all.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Prometheus answered none of the refresh's queries (unreachable, or refusing them all).
    #[error("Prometheus at {url} answered no query: {first_error}")]
    NoAnswer {
        /// The Prometheus URL.
        url: String,
        /// Why the first query failed.
        first_error: String,
    },
}

/// Where a fleet is read from: a Prometheus server that scrapes gpuscope exporters, or the
/// exporters themselves.
#[derive(Debug, Clone)]
pub enum FleetSource {
    /// A Prometheus server.
    Prometheus {
        /// Its client.
        client: Client,
        /// Its URL, for people: without credentials (`user:password@`), which the client sends
        /// and nothing shows.
        url: String,
        /// Seconds after which a sample is stale.
        stale_after: f64,
    },
    /// Exporters read directly (`gpuscope --remote`).
    Remote {
        /// Their reader.
        remote: remote::Remote,
        /// Seconds after which a sample is stale.
        stale_after: f64,
    },
}

impl FleetSource {
    /// The Prometheus server at `options.url` (`http://prometheus:9090`, a path prefix kept;
    /// credentials in it, `http://user:password@prometheus:9090`, are sent as basic auth and
    /// never shown: the fleet's source and errors name the URL without them); a host whose
    /// exporter's sample is older than `stale_after` is stale. The CA and client
    /// certificate files, when given, are read now; nothing is asked yet.
    ///
    /// # Errors
    ///
    /// A URL that is not http(s), an unreadable CA file or one with no certificate, an
    /// unreadable client certificate or key.
    pub fn prometheus(
        options: &ClientOptions,
        stale_after: Duration,
    ) -> Result<FleetSource, SetupError> {
        Ok(FleetSource::Prometheus {
            client: Client::new(options)?,
            url: remote::without_userinfo(&options.url).into_owned(),
            stale_after: stale_after.as_secs_f64(),
        })
    }

    /// The exporters at `urls` read directly (`http://node1:9445`; `/metrics` is added when a
    /// URL has no path), with the TLS settings and basic auth of `options` (its `url` is not
    /// used); its timeout bounds each refresh as a whole. Every URL is a host, named by the
    /// URL whatever its answer's labels say (docs/fleet.md).
    ///
    /// # Errors
    ///
    /// A URL that is not http(s), a TLS file that cannot be used.
    pub fn remote(
        urls: &[String],
        options: &ClientOptions,
        stale_after: Duration,
    ) -> Result<FleetSource, RemoteError> {
        Ok(FleetSource::Remote {
            remote: remote::Remote::new(urls, options)?,
            stale_after: stale_after.as_secs_f64(),
        })
    }

    /// Reads the whole fleet once. From Prometheus the whole refresh (all its queries) is
    /// bounded by [`ClientOptions::timeout`]: the queries not answered by then are left out and
    /// listed in the fleet's errors.
    ///
    /// # Errors
    ///
    /// When no query at all could be answered (Prometheus unreachable, refusing every
    /// query); a partial answer is a fleet with `errors`.
    pub fn refresh(&self) -> Result<Fleet, Error> {
        self.refresh_after(None)
    }

    /// Reads the fleet again after `previous` (the last fleet this source gave, unsorted
    /// and unfiltered, or `None`). From Prometheus, a host whose data did not change since
    /// (scraped now, up then, the same sample time) keeps its devices from `previous`, and the
    /// device and process families are asked only for the hosts that changed (still one query
    /// per family, `instance=~"..."`), or not at all when none did. `--remote` reads every
    /// exporter each time.
    ///
    /// # Errors
    ///
    /// As [`FleetSource::refresh`].
    ///
    /// Each refresh logs its total at `debug`: hosts, devices, failed queries and time (each
    /// query or exporter read logs its own).
    pub fn refresh_after(&self, previous: Option<&Fleet>) -> Result<Fleet, Error> {
        let started = std::time::Instant::now();
        let fleet = match self {
            FleetSource::Prometheus {
                client,
                url,
                stale_after,
            } => refresh_prometheus(client, url, *stale_after, previous),
            FleetSource::Remote {
                remote,
                stale_after,
            } => Ok(remote.refresh(*stale_after)),
        }?;
        tracing::debug!(
            hosts = fleet.hosts.len(),
            devices = fleet.hosts.iter().map(|h| h.devices.len()).sum::<usize>(),
            errors = fleet.errors.len(),
            total_ms = started.elapsed().as_micros() as f64 / 1000.0,
            "fleet refresh"
        );
        Ok(fleet)
    }
}

/// The queries of one refresh, in the order asked: the exporters' sample times over the
/// lookback (and which hosts serve dcgm-exporter's or nvidia_gpu_exporter's names instead,
/// [`doors::sample_time_query`]), `up`, every device family, every process family. When a
/// host serves only another exporter's names, one or two more follow: nvidia_gpu_exporter's
/// `nvidia_smi_gpu_info` of its hosts, then the doors' device series of their hosts
/// ([`doors::device_query`]); a fleet of gpuscope exporters asks these alone.
pub fn queries() -> Vec<String> {
    let mut q = vec![doors::sample_time_query(LOOKBACK), names::UP.to_string()];
    q.extend(DEVICE_FAMILIES.iter().map(|(f, _)| f.to_string()));
    q.extend(PROCESS_FAMILIES.iter().map(|(f, _)| f.to_string()));
    q
}

/// The hosts to ask again, and the hosts that keep their devices, after the sample-time and
/// `up` answers.
enum Plan<'p> {
    /// Ask every family for every host.
    Full,
    /// Ask every family for the hosts matching this regular expression (of their instances);
    /// the others keep their devices from the previous fleet.
    Some(String, Vec<(String, &'p Host)>),
    /// Nothing changed: every host keeps its devices; the families are not asked.
    None(Vec<(String, &'p Host)>),
}

/// `text` as a literal in an RE2 regular expression.
fn regex_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `text` inside a PromQL double-quoted string.
fn promql_string(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"")
}

fn plan<'p>(b: &FleetBuilder, previous: Option<&'p Fleet>) -> Plan<'p> {
    // After a refresh with failed families, ask everything again rather than keep holes. The
    // two host queries are asked every time, so what they lacked left no hole in a kept host
    // (a host without a usable sample time is never kept).
    let host_queries = &queries()[..2];
    let holes = |p: &Fleet| p.errors.iter().any(|e| !host_queries.contains(&e.query));
    let Some(prev) = previous.filter(|p| !holes(p)) else {
        return Plan::Full;
    };
    if !b.all_have_instances() {
        return Plan::Full;
    }
    let before: HashMap<&str, &Host> = prev
        .hosts
        .iter()
        .filter(|h| h.state == model::HostState::Up && h.sample_time.is_some())
        .filter_map(|h| Some((h.instance.as_deref()?, h)))
        .collect();
    let mut kept = Vec::new();
    let mut changed = Vec::new();
    for (instance, t) in b.scraped_hosts() {
        match before.get(instance.as_str()) {
            Some(h) if h.sample_time == t => kept.push((instance, *h)),
            _ => changed.push(instance),
        }
    }
    // Nearly every host changed: one plain query per family is shorter than a selector
    // naming them all.
    if kept.is_empty() || changed.len() * 4 > (kept.len() + changed.len()) * 3 {
        return Plan::Full;
    }
    if changed.is_empty() {
        return Plan::None(kept);
    }
    let alternatives: Vec<String> = changed.iter().map(|i| regex_escape(i)).collect();
    Plan::Some(promql_string(&alternatives.join("|")), kept)
}

/// One refresh from Prometheus: [`queries`], each answer folded into the fleet as it is
/// parsed; after `previous`, only what changed (see [`FleetSource::refresh_after`]). One
/// deadline, the client's timeout from now, bounds them all: a query still unanswered then
/// fails, and those after it are not asked (each listed in the errors).
fn refresh_prometheus(
    client: &Client,
    url: &str,
    stale_after: f64,
    previous: Option<&Fleet>,
) -> Result<Fleet, Error> {
    let deadline = std::time::Instant::now() + client.timeout();
    let mut b = FleetBuilder::new();
    let mut answered = 0;
    let mut first_error = None;
    let mut planned = Plan::Full;
    for (i, query) in queries().iter().enumerate() {
        if i == 2 {
            planned = plan(&b, previous);
        }
        let asked = match (&planned, i) {
            (_, 0 | 1) | (Plan::Full, _) => query.clone(),
            (Plan::Some(selector, _), _) => format!("{query}{{instance=~\"{selector}\"}}"),
            (Plan::None(_), _) => break,
        };
        let text = match client.query_text_until(&asked, deadline) {
            Ok(text) => text,
            Err(e) => {
                first_error.get_or_insert_with(|| e.to_string());
                b.error(query, e.to_string());
                continue;
            }
        };
        let device = i
            .checked_sub(2)
            .and_then(|k| DEVICE_FAMILIES.get(k))
            .map(|&(_, f)| f);
        let process = i
            .checked_sub(2 + DEVICE_FAMILIES.len())
            .and_then(|k| PROCESS_FAMILIES.get(k))
            .map(|&(_, f)| f);
        let mut fold = |s: &prom::Series<'_>| match (i, device, process) {
            (0, _, _) => b.sample_time(s, None),
            (1, _, _) => b.up(s),
            (_, Some(f), _) => b.device(f, s, None),
            (_, _, Some(f)) => b.process(f, s, None),
            _ => {}
        };
        match prom::parse_answer(&text, &mut fold) {
            Ok(info) => {
                answered += 1;
                b.evaluated_at(info.evaluated_at);
                for w in &info.warnings {
                    b.error(query, format!("partial answer: {w}"));
                }
                for note in info.notes() {
                    b.error(query, format!("partial answer: {note}"));
                }
            }
            Err(e) => {
                first_error.get_or_insert_with(|| e.to_string());
                b.error(query, e.to_string());
            }
        }
        // What the model could not keep of this answer.
        b.take_notes(query);
    }
    if answered == 0 {
        return Err(Error::NoAnswer {
            url: url.to_string(),
            first_error: first_error.unwrap_or_default(),
        });
    }
    let kept: &[(String, &Host)] = match &planned {
        Plan::Some(_, kept) | Plan::None(kept) => kept,
        Plan::Full => &[],
    };
    ask_doors(
        client,
        deadline,
        &mut b,
        kept,
        &mut answered,
        &mut first_error,
    );
    for (instance, host) in kept {
        b.keep_devices(instance, host);
    }
    Ok(b.finish(url.to_string(), stale_after, false))
}

/// Asks the doors' device series of the hosts read through another exporter's names, those
/// not `kept` (nvidia_gpu_exporter's info first: its labels join the others to their GPUs),
/// within the refresh's `deadline`; each answer folded into `b` as it is parsed.
fn ask_doors(
    client: &Client,
    deadline: std::time::Instant,
    b: &mut FleetBuilder,
    kept: &[(String, &Host)],
    answered: &mut usize,
    first_error: &mut Option<String>,
) {
    let hosts: Vec<(String, gpu_export::Door)> = b
        .door_hosts()
        .into_iter()
        .filter(|(i, _)| !kept.iter().any(|(k, _)| k == i))
        .collect();
    if hosts.is_empty() {
        return;
    }
    let mut used: Vec<gpu_export::Door> = hosts.iter().map(|&(_, d)| d).collect();
    used.sort();
    used.dedup();
    // The instances of the hosts read through `door` (any door: `None`), as a selector.
    let selector = |door: Option<gpu_export::Door>| {
        let alternatives: Vec<String> = hosts
            .iter()
            .filter(|(_, d)| door.is_none_or(|door| *d == door))
            .map(|(i, _)| regex_escape(i))
            .collect();
        promql_string(&alternatives.join("|"))
    };
    let smi = gpu_export::Door::NvidiaSmi;
    let mut asked = Vec::new();
    if used.contains(&smi) {
        asked.push((
            doors::device_query(&[smi], true, ".+"),
            doors::device_query(&[smi], true, &selector(Some(smi))),
        ));
    }
    asked.push((
        doors::device_query(&used, false, ".+"),
        doors::device_query(&used, false, &selector(None)),
    ));
    for (named, query) in asked {
        let text = match client.query_text_until(&query, deadline) {
            Ok(text) => text,
            Err(e) => {
                first_error.get_or_insert_with(|| e.to_string());
                b.error(&named, e.to_string());
                continue;
            }
        };
        match prom::parse_answer(&text, &mut |s: &prom::Series<'_>| {
            b.door_device(s, None, None)
        }) {
            Ok(info) => {
                *answered += 1;
                b.evaluated_at(info.evaluated_at);
                for w in &info.warnings {
                    b.error(&named, format!("partial answer: {w}"));
                }
                for note in info.notes() {
                    b.error(&named, format!("partial answer: {note}"));
                }
            }
            Err(e) => {
                first_error.get_or_insert_with(|| e.to_string());
                b.error(&named, e.to_string());
            }
        }
        b.take_notes(&named);
    }
}

#[cfg(test)]
mod tests {
    use super::{promql_string, regex_escape};

    /// What Prometheus reads back from `promql_string(regex_escape(..))` joined by `|`: the
    /// PromQL string's escapes undone, then the alternatives split and their escapes undone.
    fn read_back(text: &str) -> Vec<String> {
        let mut unquoted = String::new();
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            unquoted.push(if c == '\\' { chars.next().unwrap() } else { c });
        }
        let mut out = vec![String::new()];
        let mut chars = unquoted.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => out.last_mut().unwrap().push(chars.next().unwrap()),
                '|' => out.push(String::new()),
                c => out.last_mut().unwrap().push(c),
            }
        }
        out
    }

    #[test]
    fn an_instance_is_matched_literally() {
        assert_eq!(regex_escape("10.0.0.1:9445"), "10\\.0\\.0\\.1:9445");
        assert_eq!(promql_string(&regex_escape("a.b")), "a\\\\.b");
    }

    proptest::proptest! {
        #[test]
        fn any_instances_survive_the_selector(instances in proptest::collection::vec("\\PC{1,20}", 1..5)) {
            let joined: Vec<String> = instances.iter().map(|i| regex_escape(i)).collect();
            let text = promql_string(&joined.join("|"));
            // Nothing unescaped can end the string early.
            let mut escaped = false;
            for c in text.chars() {
                proptest::prop_assert!(escaped || c != '"', "{text}");
                escaped = !escaped && c == '\\';
            }
            proptest::prop_assert_eq!(read_back(&text), instances);
        }
    }
}
