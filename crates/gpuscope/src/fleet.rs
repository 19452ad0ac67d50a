//! The fleet view: every host's GPUs read from a Prometheus server that scrapes gpuscope
//! exporters (`--prometheus URL`), or from the exporters themselves (`--remote URL...`).
//!
//! A refresh asks one query per metric family, whatever the number of hosts
//! ([`model::DEVICE_FAMILIES`], [`model::PROCESS_FAMILIES`], `up` and the exporters' sample
//! times). A query that fails leaves its values out and is listed in the fleet's `errors`; the
//! other families still show (docs/fleet.md).

pub mod model;
pub mod prom;
pub mod remote;
pub mod select;
pub mod view;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;

use crate::args::{self, DurationBounds};
use crate::source::UsageError;
use model::{Fleet, FleetBuilder, Host, DEVICE_FAMILIES, PROCESS_FAMILIES, SAMPLE_TIME_FAMILY};
use prom::{Client, ClientOptions};
use view::{FleetFilter, SortKey};

/// Environment variable holding the Prometheus basic-auth password.
pub const PASSWORD_ENV: &str = "GPUSCOPE_PROMETHEUS_PASSWORD";

/// How far back a host's last sample time is looked for: a host whose exporter stopped is
/// listed, down, for this long.
pub const LOOKBACK: &str = "15m";

/// `--prometheus-timeout` and `--stale-after`: 100 ms to 10 minutes.
pub const TIMEOUT: DurationBounds = DurationBounds {
    min: Duration::from_millis(100),
    max: Duration::from_secs(600),
};

/// Where the fleet is read from, and how.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct FleetArgs {
    /// Read every host's GPUs from this Prometheus server (which scrapes `gpuscope export` on
    /// each host) instead of this machine's GPUs, e.g. http://prometheus:9090.
    #[arg(long, value_name = "URL", conflicts_with = "remote")]
    pub prometheus: Option<String>,

    /// Read these gpuscope exporters directly (their /metrics), for a lab without Prometheus,
    /// e.g. --remote http://node1:9445 http://node2:9445.
    #[arg(long, value_name = "URL", num_args = 1..)]
    pub remote: Vec<String>,

    /// Basic-auth user for the Prometheus server (or, with --remote, the exporters); the
    /// password comes from --prometheus-password-file or $GPUSCOPE_PROMETHEUS_PASSWORD, never
    /// from the command line.
    #[arg(long, value_name = "USER")]
    pub prometheus_user: Option<String>,

    /// File holding the basic-auth password (its first line).
    #[arg(long, value_name = "FILE", requires = "prometheus_user")]
    pub prometheus_password_file: Option<PathBuf>,

    /// PEM file of the CA certificates to trust for an https:// server (Prometheus, or the
    /// exporters with --remote), instead of the built-in web roots.
    #[arg(long, value_name = "FILE")]
    pub prometheus_ca: Option<PathBuf>,

    /// PEM file of a client certificate (and its chain) to present to a server that asks for
    /// one (mutual TLS); needs --prometheus-key.
    #[arg(long, value_name = "FILE", requires = "prometheus_key")]
    pub prometheus_cert: Option<PathBuf>,

    /// PEM file of the client certificate's private key.
    #[arg(long, value_name = "FILE", requires = "prometheus_cert")]
    pub prometheus_key: Option<PathBuf>,

    /// Give up on one query (or one exporter with --remote) after this long.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = args::duration(TIMEOUT))]
    pub prometheus_timeout: Duration,

    /// A host whose exporter's sample is older than this is shown stale.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = args::duration(TIMEOUT))]
    pub stale_after: Duration,
}

/// Options of the fleet's table.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ViewArgs {
    /// With --prometheus or --remote: order by host, gpu (index), free-memory (most first)
    /// or utilization (least first).
    #[arg(long, value_enum, default_value_t = SortKey::Host)]
    pub sort: SortKey,

    /// With --prometheus or --remote: keep what matches: host:NAME (host:gpu-* for a prefix),
    /// gpu:ID, user:NAME, pid:N, state:up|down|stale, and words.
    #[arg(long, value_name = "TERMS", value_parser = FleetFilter::parse)]
    pub filter: Option<FleetFilter>,

    /// Print again every DURATION (default 2s) until Ctrl+C: this machine's snapshot (table,
    /// --compact, --json or --query) or the fleet's.
    #[arg(long = "interval", short = 'i', visible_alias = "watch", value_name = "DURATION", num_args = 0..=1, default_missing_value = "2s", value_parser = args::duration(args::INTERVAL))]
    pub watch: Option<Duration>,
}

impl FleetArgs {
    /// Whether a fleet source was asked for.
    pub fn is_set(&self) -> bool {
        self.prometheus.is_some() || !self.remote.is_empty()
    }

    /// Opens the fleet source.
    ///
    /// # Errors
    ///
    /// A usage error for a bad URL, an unreadable password or CA file, or a user without a
    /// password.
    pub fn open(&self) -> anyhow::Result<FleetSource> {
        let basic_auth = match &self.prometheus_user {
            None => None,
            Some(user) => Some((user.clone(), self.password()?)),
        };
        let options = ClientOptions {
            url: self.prometheus.clone().unwrap_or_default(),
            basic_auth,
            ca_file: self.prometheus_ca.clone(),
            client_cert: self
                .prometheus_cert
                .clone()
                .zip(self.prometheus_key.clone()),
            timeout: self.prometheus_timeout,
        };
        let Some(url) = &self.prometheus else {
            let remote = remote::Remote::new(&self.remote, &options)
                .map_err(|e| UsageError(e.to_string()))?;
            return Ok(FleetSource::Remote {
                remote,
                stale_after: self.stale_after.as_secs_f64(),
            });
        };
        let client = Client::new(&options).map_err(|e| UsageError(e.to_string()))?;
        Ok(FleetSource::Prometheus {
            client,
            url: url.clone(),
            stale_after: self.stale_after.as_secs_f64(),
        })
    }

    fn password(&self) -> anyhow::Result<String> {
        if let Some(path) = &self.prometheus_password_file {
            let text = std::fs::read_to_string(path).map_err(|e| {
                UsageError(format!(
                    "--prometheus-password-file {}: {e}",
                    path.display()
                ))
            })?;
            return Ok(text.lines().next().unwrap_or("").to_string());
        }
        std::env::var(PASSWORD_ENV).map_err(|_| {
            UsageError(format!(
                "--prometheus-user needs a password: --prometheus-password-file FILE or ${PASSWORD_ENV}"
            ))
            .into()
        })
    }
}

/// An opened fleet source.
#[derive(Debug, Clone)]
pub enum FleetSource {
    /// A Prometheus server.
    Prometheus {
        /// Its client.
        client: Client,
        /// Its URL, for people.
        url: String,
        /// Seconds after which a sample is stale.
        stale_after: f64,
    },
    /// Exporters read directly (`--remote`).
    Remote {
        /// Their reader.
        remote: remote::Remote,
        /// Seconds after which a sample is stale.
        stale_after: f64,
    },
}

impl FleetSource {
    /// Reads the whole fleet once.
    ///
    /// # Errors
    ///
    /// When no query at all could be answered (Prometheus unreachable, refusing every
    /// query); a partial answer is a fleet with `errors`.
    pub fn refresh(&self) -> anyhow::Result<Fleet> {
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
    pub fn refresh_after(&self, previous: Option<&Fleet>) -> anyhow::Result<Fleet> {
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

/// Makes every large allocation (1 MiB and more: an answer's text, the fleet's vectors) a
/// mapping of its own, given back to the system when freed. glibc otherwise raises its
/// threshold to the largest block freed so far, after which each refresh's 25 MB answers come
/// from the heap of the thread that read them and stay there, fragmented: the viewer peaked at
/// 87 MB instead of 63 MB (docs/benchmarks.md). For the commands that refresh again and again.
pub fn release_large_blocks() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a tunable of the allocator; called before the threads start.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

/// The queries of one refresh, in the order asked: the exporters' sample times over the
/// lookback, `up`, every device family, every process family.
pub fn queries() -> Vec<String> {
    let mut q = vec![
        format!("last_over_time({SAMPLE_TIME_FAMILY}[{LOOKBACK}])"),
        "up".to_string(),
    ];
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
    // After a refresh with failed families, ask everything again rather than keep holes.
    let Some(prev) = previous.filter(|p| p.errors.is_empty()) else {
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
/// parsed; after `previous`, only what changed (see [`FleetSource::refresh_after`]).
fn refresh_prometheus(
    client: &Client,
    url: &str,
    stale_after: f64,
    previous: Option<&Fleet>,
) -> anyhow::Result<Fleet> {
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
        let text = match client.query_text(&asked) {
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
                for w in info.warnings {
                    b.error(query, format!("partial answer: {w}"));
                }
            }
            Err(e) => {
                first_error.get_or_insert_with(|| e.to_string());
                b.error(query, e.to_string());
            }
        }
    }
    if answered == 0 {
        anyhow::bail!(
            "Prometheus at {url} answered no query: {}",
            first_error.unwrap_or_default()
        );
    }
    if let Plan::Some(_, kept) | Plan::None(kept) = &planned {
        for (instance, host) in kept {
            b.keep_devices(instance, host);
        }
    }
    Ok(b.finish(url.to_string(), stale_after, false))
}

/// Writes the fleet's JSON (docs/fleet.md) to stdout as it is encoded (a fleet's document is
/// tens of MB: it is never held whole); a closed pipe is not an error. `line`: on one line
/// (JSON Lines, for `--watch`) instead of indented.
pub fn write_json(fleet: &Fleet, line: bool) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let encoded = if line {
        serde_json::to_writer(&mut out, fleet)
    } else {
        serde_json::to_writer_pretty(&mut out, fleet)
    };
    let written = encoded
        .map_err(std::io::Error::from)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
    match written {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other.context("cannot write the fleet as JSON")?),
    }
}

/// `gpuscope snapshot --prometheus URL` / `--remote URL...`: the fleet once, or every
/// `--watch` interval.
pub fn snapshot(fleet: &FleetArgs, view: &ViewArgs, json: bool) -> anyhow::Result<()> {
    let source = fleet.open()?;
    let one = |source: &FleetSource, previous: &mut Option<Fleet>| -> anyhow::Result<Fleet> {
        let mut f = source.refresh_after(previous.as_ref())?;
        if view.watch.is_some() {
            *previous = Some(f.clone());
        }
        if let Some(filter) = &view.filter {
            filter.apply(&mut f);
        }
        view::sort(&mut f, view.sort);
        Ok(f)
    };
    let mut previous = None;
    let Some(every) = view.watch else {
        // Whether the whole fleet could be shown (docs/exit-codes.md), judged on every host
        // asked for, before --filter: no fleet at all, or no host up, is nothing to show.
        let mut f = source
            .refresh_after(None)
            .map_err(|e| crate::source::Shortfall::nothing(format!("{e:#}")))?;
        let short = shortfall(&f);
        if let Some(filter) = &view.filter {
            filter.apply(&mut f);
        }
        view::sort(&mut f, view.sort);
        if json {
            write_json(&f, false)?;
        } else {
            crate::write_stdout(&view::render_text(&f, view.sort))?;
        }
        return short.map_or(Ok(()), |s| Err(s.into()));
    };
    release_large_blocks();
    loop {
        let started = std::time::Instant::now();
        match one(&source, &mut previous) {
            Ok(f) if json => write_json(&f, true)?,
            Ok(f) => crate::write_stdout(&format!(
                "\x1b[H\x1b[2J{}",
                view::render_text(&f, view.sort)
            ))?,
            // A refresh that fails is shown, and the next one tried; with --json on stderr, so
            // that stdout stays JSON Lines.
            Err(e) if json => eprintln!("gpuscope: {}", crate::escape_lines(&format!("{e:#}"))),
            Err(e) => crate::write_stdout(&format!(
                "gpuscope: {}\n",
                crate::escape_lines(&format!("{e:#}"))
            ))?,
        }
        std::thread::sleep(every.saturating_sub(started.elapsed()));
    }
}

/// How much of `fleet` is missing: `None` when every host is up; partial when some are down or
/// stale; nothing when none is up (or there is no host).
fn shortfall(fleet: &Fleet) -> Option<crate::source::Shortfall> {
    use crate::source::Shortfall;
    let missing: Vec<String> = fleet
        .hosts
        .iter()
        .filter(|h| h.state != model::HostState::Up)
        .map(|h| format!("{} ({})", h.host, h.state.as_str()))
        .collect();
    let total = fleet.hosts.len();
    if total == 0 {
        return Some(Shortfall::nothing("no host to show".into()));
    }
    if missing.is_empty() {
        return None;
    }
    let what = format!(
        "{} of {} {} not up: {}",
        missing.len(),
        total,
        if total == 1 { "host" } else { "hosts" },
        crate::escape_lines(&missing.join(", "))
    );
    Some(if missing.len() == total {
        Shortfall::nothing(what)
    } else {
        Shortfall::partial(what)
    })
}

/// Hosts, devices and processes for the fleet modules' unit tests.
#[cfg(test)]
pub(crate) mod testkit;

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
