//! Name lookups for both fleet readers (`--prometheus` and `--remote`), bounded in threads and
//! time. ureq's own resolver starts an unbounded thread per lookup and panics when one cannot
//! start (a `pids.max`, an `RLIMIT_NPROC`); this one is given to every agent a
//! [`Connection`](crate::prom::Connection) makes.

use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::thread;

use ureq::unversioned::resolver::{ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::NextTimeout;

/// At most this many name lookups run at once, per reader. Each runs on a thread of its own so
/// that one that hangs (a DNS server that does not answer) is left behind at the deadline
/// instead of holding the refresh; one left behind still counts until it ends. A lookup beyond
/// the bound is that request's error (a host down with `--remote`, a failed query from
/// Prometheus).
pub const MAX_LOOKUPS: usize = 16;

/// A name-lookup thread.
pub(crate) fn lookup_thread() -> thread::Builder {
    thread::Builder::new().name("gpuscope-lookup".into())
}

/// ureq's name resolver, bounded: an IP address needs no lookup (and no thread); a name is
/// looked up on a thread of its own made by `thread`, waited for until the request's
/// deadline, at most `limit` at once (one left behind at a deadline counts until it ends). A
/// lookup over the bound, or whose thread cannot start, is that request's error.
#[derive(Debug)]
pub(crate) struct Lookups {
    pub(crate) running: Arc<AtomicUsize>,
    pub(crate) limit: usize,
    pub(crate) thread: fn() -> thread::Builder,
}

/// A lookup's place among the running ones, given back when its thread ends (or never starts).
struct LookupSlot(Arc<AtomicUsize>);

impl Drop for LookupSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// An I/O error with this message, as ureq carries it.
fn io_error(message: String) -> ureq::Error {
    ureq::Error::Io(io::Error::other(message))
}

impl Lookups {
    /// At most [`MAX_LOOKUPS`] at once, each on a thread made by `thread`.
    pub(crate) fn new(thread: fn() -> thread::Builder) -> Lookups {
        Lookups {
            running: Arc::default(),
            limit: MAX_LOOKUPS,
            thread,
        }
    }

    /// The addresses of `host`, or why not within `timeout`.
    pub(crate) fn look_up(
        &self,
        host: &str,
        port: u16,
        timeout: &NextTimeout,
    ) -> Result<Vec<SocketAddr>, ureq::Error> {
        let limit = self.limit;
        if self
            .running
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < limit).then_some(n + 1)
            })
            .is_err()
        {
            return Err(io_error(format!(
                "cannot look up {host}: {limit} name lookups are still running"
            )));
        }
        let slot = LookupSlot(Arc::clone(&self.running));
        let (tx, rx) = mpsc::sync_channel(1);
        let name = format!("{host}:{port}");
        (self.thread)()
            .spawn(move || {
                let _slot = slot;
                let _ = tx.send(name.to_socket_addrs().map(Iterator::collect::<Vec<_>>));
            })
            .map_err(|e| {
                io_error(format!(
                    "cannot look up {host}: no thread could start for the lookup ({e})"
                ))
            })?;
        match rx.recv_timeout(*timeout.after) {
            Ok(Ok(addrs)) => Ok(addrs),
            Ok(Err(e)) => Err(ureq::Error::Io(e)),
            Err(RecvTimeoutError::Timeout) => Err(ureq::Error::Timeout(timeout.reason)),
            Err(RecvTimeoutError::Disconnected) => Err(io_error(format!(
                "cannot look up {host}: the lookup ended without an answer"
            ))),
        }
    }
}

impl Resolver for Lookups {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        // The URI is not quoted: it may hold credentials.
        let authority = uri
            .authority()
            .ok_or_else(|| ureq::Error::BadUri("the URL names no host".into()))?;
        let port = authority
            .port_u16()
            .unwrap_or(if uri.scheme_str() == Some("https") {
                443
            } else {
                80
            });
        let host = authority.host();
        let bare = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        let found = match bare.parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, port)],
            Err(_) => self.look_up(bare, port, &timeout)?,
        };
        let mut out = self.empty();
        for addr in config.ip_family().keep_wanted(found.into_iter()) {
            if out.try_push(addr).is_err() {
                break;
            }
        }
        if out.is_empty() {
            return Err(ureq::Error::HostNotFound);
        }
        Ok(out)
    }
}
