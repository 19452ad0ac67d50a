//! The fleet view's command line: every host's GPUs read from a Prometheus server that scrapes
//! gpuscope exporters (`--prometheus URL`), or from the exporters themselves (`--remote
//! URL...`). The arguments are parsed here, the fleet is read, filtered, sorted and chosen from
//! by the gpu-fleet crate, and drawn by the commands (`snapshot`'s table, `top`'s viewer,
//! `select`) with what [`view`] holds for them: docs/fleet.md.

pub mod view;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use gpu_fleet::{
    CertFile, ClientOptions, Fleet, FleetFilter, FleetSource, HostState, RemoteError, SetupError,
};

use crate::cli::args::{self, DurationBounds};
use crate::error::{Shortfall, UsageError};
use gpu_devices::text::escape_control;
use view::SortArg;

/// Environment variable holding the Prometheus basic-auth password.
pub const PASSWORD_ENV: &str = "GPUSCOPE_PROMETHEUS_PASSWORD";

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

    /// Give up after this long: on a whole refresh (from Prometheus, all its queries: those not
    /// answered by then are left out and listed as errors; with --remote, the read of every
    /// exporter together).
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
    #[arg(long, value_enum, default_value_t = SortArg::Host)]
    pub sort: SortArg,

    /// With --prometheus or --remote: keep what matches: host:NAME (host:gpu-* for a prefix),
    /// gpu:ID, user:NAME, pid:N, state:up|down|stale, and words.
    #[arg(long, value_name = "TERMS", value_parser = FleetFilter::parse)]
    pub filter: Option<FleetFilter>,

    /// Print again every DURATION until Ctrl+C: this machine's snapshot (table, --compact,
    /// --json or --query; 1s when no value is given, as top) or the fleet's (2s, as top's fleet
    /// view).
    #[arg(long = "interval", short = 'i', visible_alias = "watch", value_name = "DURATION", num_args = 0..=1, value_parser = args::duration(args::INTERVAL))]
    watch: Option<Option<Duration>>,
}

impl ViewArgs {
    /// How often to print again, if at all: the interval given, else this machine's or the
    /// fleet's default when `-i` came without a value.
    pub fn every(&self, fleet: bool) -> Option<Duration> {
        self.watch.map(|given| {
            given.unwrap_or(if fleet {
                args::FLEET_INTERVAL
            } else {
                args::LOCAL_INTERVAL
            })
        })
    }
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
        if self.prometheus.is_none() {
            return FleetSource::remote(&self.remote, &options, self.stale_after).map_err(|e| {
                UsageError(match e {
                    RemoteError::Url(url) => {
                        format!("--remote {url:?} is not an http:// or https:// URL")
                    }
                    RemoteError::Setup(e) => setup_error(e),
                })
                .into()
            });
        }
        FleetSource::prometheus(&options, self.stale_after)
            .map_err(|e| UsageError(setup_error(e)).into())
    }

    fn password(&self) -> anyhow::Result<String> {
        if let Some(path) = &self.prometheus_password_file {
            // A regular file of at most 1 MiB (gpu_backend::files): a FIFO, a device or a huge
            // file is refused before it is read.
            let text = gpu_backend::files::read_regular_to_string(
                path,
                gpu_backend::files::MAX_CONFIG_BYTES,
            )
            .map_err(|e| {
                UsageError(format!(
                    "--prometheus-password-file {}: {e}",
                    escape_control(&path.display().to_string())
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

/// Why a fleet source cannot be set up, in the options' words.
fn setup_error(e: SetupError) -> String {
    match e {
        SetupError::Ca { path, reason } => {
            format!("--prometheus-ca {}: {reason}", escape_control(&path))
        }
        SetupError::ClientCert { file, path, reason } => {
            let option = match file {
                CertFile::Certificate => "--prometheus-cert",
                CertFile::Key => "--prometheus-key",
            };
            format!("{option} {}: {reason}", escape_control(&path))
        }
        other => other.to_string(),
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

/// Writes the fleet's JSON (docs/fleet.md) to stdout as it is encoded (a fleet's document is
/// tens of MB: it is never held whole), C1 and bidirectional controls as `\uXXXX`
/// ([`gpu_devices::text::SafeJson`]); a closed pipe is not an error. `line`: on one line (JSON
/// Lines, for `--watch`) instead of indented.
pub fn write_json(fleet: &Fleet, line: bool) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let encoded = gpu_devices::text::SafeJson::to_writer(&mut out, fleet, !line);
    let written = encoded
        .map_err(std::io::Error::from)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
    match written {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other.context("cannot write the fleet as JSON")?),
    }
}

/// Why a refresh gave no fleet, on one line: gpu-fleet's errors are one line of their own, so
/// a line break in them came from a peer (Prometheus's error text) and is escaped with the rest.
pub fn one_line(e: &impl std::fmt::Display) -> String {
    gpu_devices::text::escape_control(&format!("{e:#}")).into_owned()
}

/// Says on stderr which values the hosts sent out of range (each N/A in the document), for
/// `--json`, whose stdout is the document alone; the table says it in its own lines.
pub fn warn_out_of_range(fleet: &Fleet) {
    for line in view::out_of_range_lines(fleet, view::MAX_WARNINGS) {
        eprintln!("gpuscope: warning: {line}");
    }
}

/// How much of `fleet` is missing: `None` when every host is up and every query answered in
/// full; partial when some hosts are down or stale, or some queries failed or answered in part
/// (the hosts shown lack what those would have given); nothing when no host is up (or there is
/// no host).
pub fn shortfall(fleet: &Fleet) -> Option<Shortfall> {
    // A fleet can have thousands of hosts: the message names the first few.
    const NAMED: usize = 10;
    let names = fleet.host_names();
    let not_up = || {
        fleet
            .hosts
            .iter()
            .zip(&names)
            .filter(|(h, _)| h.state != HostState::Up)
    };
    let mut missing: Vec<String> = not_up()
        .take(NAMED)
        .map(|(h, name)| format!("{} ({})", escape_control(name), h.state.as_str()))
        .collect();
    let count = not_up().count();
    if count > NAMED {
        missing.push(format!("and {} more", count - NAMED));
    }
    let total = fleet.hosts.len();
    if total == 0 {
        return Some(Shortfall::nothing("no host to show".into()));
    }
    let failed = failed_queries(fleet);
    if missing.is_empty() {
        return failed.map(Shortfall::partial);
    }
    let mut what = format!(
        "{} of {} {} not up: {}",
        count,
        total,
        if total == 1 { "host" } else { "hosts" },
        missing.join(", ")
    );
    if let Some(failed) = failed {
        what = format!("{what}; {failed}");
    }
    Some(if count == total {
        Shortfall::nothing(what)
    } else {
        Shortfall::partial(what)
    })
}

/// The queries of `fleet` that failed or answered in part, for a one-line message (the first
/// few named, each once): `None` when every query answered in full. With `--remote` an error
/// is an exporter's, under its URL: that of a host that is not up is said by the host's state
/// already, and is not counted again; that of a host that is up (lines of its answer skipped)
/// is.
pub fn failed_queries(fleet: &Fleet) -> Option<String> {
    const NAMED: usize = 3;
    let not_up: std::collections::HashSet<&str> = fleet
        .hosts
        .iter()
        .filter(|h| h.state != HostState::Up)
        .filter_map(|h| h.instance.as_deref())
        .collect();
    let mut queries: Vec<&str> = Vec::new();
    for e in &fleet.errors {
        if !queries.contains(&e.query.as_str()) && !not_up.contains(e.query.as_str()) {
            queries.push(&e.query);
        }
    }
    if queries.is_empty() {
        return None;
    }
    let more = match queries.len().saturating_sub(NAMED) {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    Some(format!(
        "{} {} failed or answered in part: {}{more}",
        queries.len(),
        if queries.len() == 1 {
            "query"
        } else {
            "queries"
        },
        escape_control(&queries[..queries.len().min(NAMED)].join(", "))
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_fleet::testkit::{fleet, host};

    #[test]
    fn a_shortfall_names_the_first_hosts_not_up_and_counts_the_rest() {
        let mut hosts = vec![host("up", HostState::Up, vec![])];
        hosts.extend((0..25).map(|i| host(&format!("n{i:02}"), HostState::Down, vec![])));
        let short = shortfall(&fleet(hosts)).expect("partial");
        assert_eq!(short.code, Shortfall::PARTIAL);
        let named: Vec<String> = (0..10).map(|i| format!("n{i:02} (down)")).collect();
        assert_eq!(
            short.to_string(),
            format!("25 of 26 hosts not up: {}, and 15 more", named.join(", "))
        );
    }

    #[test]
    fn failed_queries_are_named_once_each_the_first_few() {
        let mut f = fleet(vec![host("a", HostState::Up, vec![])]);
        assert!(shortfall(&f).is_none());
        for q in ["q1", "q1", "q2", "q3", "q4", "q5"] {
            f.errors.push(gpu_fleet::FamilyError {
                query: q.into(),
                error: "x".into(),
            });
        }
        let short = shortfall(&f).expect("partial");
        assert_eq!(short.code, Shortfall::PARTIAL);
        assert_eq!(
            short.to_string(),
            "5 queries failed or answered in part: q1, q2, q3 and 2 more"
        );
    }

    #[test]
    fn an_exporters_error_counts_once_as_its_host_down_not_again_as_a_failed_query() {
        // --remote: each exporter's error is under its URL, its host's instance.
        let mut f = fleet(vec![
            host("a", HostState::Up, vec![]),
            host("b", HostState::Down, vec![]),
        ]);
        f.errors.push(gpu_fleet::FamilyError {
            query: "b:9445".into(),
            error: "connection refused".into(),
        });
        assert_eq!(failed_queries(&f), None);
        assert_eq!(
            shortfall(&f).expect("partial").to_string(),
            "1 of 2 hosts not up: b (down)"
        );
        // An error of a host that is up (lines of its answer skipped) makes the fleet partial.
        f.errors.push(gpu_fleet::FamilyError {
            query: "a:9445".into(),
            error: "2 lines of the answer not in the text format, skipped".into(),
        });
        assert_eq!(
            failed_queries(&f).as_deref(),
            Some("1 query failed or answered in part: a:9445")
        );
    }
}
