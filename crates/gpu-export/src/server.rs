//! The HTTP side of the exporter, on hyper (HTTP/1.1) over a current-thread tokio runtime, with TLS
//! from rustls when configured. A scrape serves the latest sample, encoded in the form it asks for
//! by the first scrape of that sample that asks (see `Exposition`); it never waits on
//! the GPUs.
//!
//! Limits that hold under abuse: at most [`Limits::per_client`] connections from one address
//! and [`Limits::total`] in all (more are told 503 and closed at once), a deadline to send a
//! whole request head ([`Limits::header_timeout`], which also bounds a TLS handshake and an idle
//! kept-alive connection), a cap on the size of the request head ([`Limits::max_head`], 431
//! beyond it) and a longest life for a connection ([`Limits::max_age`], after which it is
//! closed once its current answer is sent). So idle sockets from one address cannot stop
//! scrapes from another.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::{Body as _, Incoming};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};

use crate::exposition::{OPENMETRICS_CONTENT_TYPE, TEXT_CONTENT_TYPE};
use crate::shared::{Health, Shared};
use crate::web_config::WebConfig;

/// The tracing target of the server's events (docs/logging.md): the one it had inside the
/// `gpuscope` CLI, kept so that `GPUSCOPE_LOG=gpuscope::export=debug` and `-v` (which turns on
/// the `gpuscope` targets) still select them.
pub const LOG_TARGET: &str = "gpuscope::export::server";

/// The server's limits.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Most connections open at once from one IP address.
    pub per_client: usize,
    /// Most connections open at once in all.
    pub total: usize,
    /// Time a client has to finish a TLS handshake, and to send a whole request head from the
    /// start of the connection or the end of the previous answer.
    pub header_timeout: Duration,
    /// Largest request head, bytes (431 beyond it).
    pub max_head: usize,
    /// Most header lines in a request (431 beyond it).
    pub max_headers: usize,
    /// Longest life of a connection: then it is closed after its current answer, and forcibly
    /// [`Limits::header_timeout`] later if that answer is not read.
    pub max_age: Duration,
}

/// The limits `gpuscope export` runs with (and `Config::new`'s).
pub const LIMITS: Limits = Limits {
    per_client: 32,
    total: 512,
    header_timeout: Duration::from_secs(2),
    max_head: 16 * 1024,
    max_headers: 64,
    max_age: Duration::from_secs(300),
};

/// Everything a connection needs.
pub struct Server {
    shared: Arc<Shared>,
    web: WebConfig,
    limits: Limits,
    slots: Arc<Slots>,
    auth: Option<Auth>,
}

impl Server {
    /// A server of `shared`'s samples with the TLS and users of `web`.
    pub fn new(shared: Arc<Shared>, web: WebConfig, limits: Limits) -> Server {
        let auth = web.users.clone().map(Auth::new);
        Server {
            shared,
            web,
            limits,
            slots: Arc::new(Slots::new(limits.per_client, limits.total)),
            auth,
        }
    }

    /// `https` with TLS, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.web.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }
}

/// Accepts connections for ever, each served by its own task.
pub async fn serve(listener: TcpListener, server: Arc<Server>) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(s) => s,
            // A connection that failed before it was accepted (reset, out of descriptors): wait
            // a little so that a persistent error does not spin, and go on.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let Some(slot) = server.slots.admit(peer.ip()) else {
            tracing::debug!(target: LOG_TARGET, %peer, status = 503, "connection refused: too many open");
            // A fresh socket's send buffer is empty: this cannot block.
            let _ = stream.try_write(TOO_MANY);
            continue;
        };
        let server = server.clone();
        tokio::spawn(async move {
            let _slot = slot;
            connection(server, stream, peer).await;
        });
    }
}

const TOO_MANY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n\
Content-Length: 21\r\nConnection: close\r\n\r\ntoo many connections\n";

async fn connection(server: Arc<Server>, stream: TcpStream, peer: SocketAddr) {
    let _ = stream.set_nodelay(true);
    match server.web.tls.clone() {
        Some(tls) => {
            let acceptor = tokio_rustls::TlsAcceptor::from(tls);
            let handshake =
                tokio::time::timeout(server.limits.header_timeout, acceptor.accept(stream)).await;
            if let Ok(Ok(stream)) = handshake {
                http(server, TokioIo::new(stream), peer).await;
            }
        }
        None => http(server, TokioIo::new(stream), peer).await,
    }
}

async fn http<I>(server: Arc<Server>, io: I, peer: SocketAddr)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let limits = server.limits;
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(limits.max_head.max(8192))
        .max_headers(limits.max_headers)
        .title_case_headers(true);
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let server = server.clone();
        async move {
            // What the log needs is read only when it is on.
            let asked = tracing::enabled!(target: LOG_TARGET, tracing::Level::DEBUG).then(|| {
                let path = req.uri().path().to_owned();
                (Instant::now(), req.method().clone(), path)
            });
            let r = answer(&server, req).await;
            if let Some((started, method, path)) = asked {
                log_request(peer, &method, &path, &r, started.elapsed());
            }
            Ok::<_, Infallible>(r)
        }
    });
    let mut conn = std::pin::pin!(builder.serve_connection(io, service));
    if tokio::time::timeout(limits.max_age, conn.as_mut())
        .await
        .is_err()
    {
        conn.as_mut().graceful_shutdown();
        let _ = tokio::time::timeout(limits.header_timeout, conn).await;
    }
}

/// One request, at `debug`: who asked, what, the status, the body's size before any HEAD
/// drops it, whether gzipped, and the time to answer (not to send).
fn log_request(
    peer: SocketAddr,
    method: &Method,
    path: &str,
    r: &Response<Full<Bytes>>,
    took: Duration,
) {
    tracing::debug!(
        target: LOG_TARGET,
        %peer,
        method = %method,
        path = %gpu_devices::text::Escaped(path),
        status = r.status().as_u16(),
        bytes = r.body().size_hint().exact().unwrap_or(0),
        gzip = r.headers().contains_key(header::CONTENT_ENCODING),
        took_ms = took.as_micros() as f64 / 1000.0,
        "request"
    );
}

const INDEX: &str = "<!DOCTYPE html>\n<html><head><title>gpuscope exporter</title></head>\
<body><h1>gpuscope exporter</h1><p><a href=\"/metrics\">Metrics</a></p>\
<p><a href=\"/health\">Health</a></p></body></html>\n";

fn plain(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

async fn answer(server: &Server, req: Request<Incoming>) -> Response<Full<Bytes>> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n");
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    if let Some(auth) = &server.auth {
        if !auth.check(req.headers().get(header::AUTHORIZATION)).await {
            let mut r = plain(StatusCode::UNAUTHORIZED, "unauthorized\n");
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"gpuscope\", charset=\"UTF-8\""),
            );
            return r;
        }
    }
    match req.uri().path() {
        "/metrics" => metrics(server, req.headers()),
        "/health" => match server.shared.health() {
            Health::Fresh => plain(StatusCode::OK, "ok\n"),
            h => plain(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("{}\n", h.reason().unwrap_or("unhealthy")),
            ),
        },
        "/" => {
            let mut r = plain(StatusCode::OK, INDEX);
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            );
            r
        }
        _ => plain(StatusCode::NOT_FOUND, "not found: try /metrics\n"),
    }
}

fn metrics(server: &Server, headers: &HeaderMap) -> Response<Full<Bytes>> {
    let health = server.shared.health();
    if let Some(why) = health.reason() {
        return plain(StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n"));
    }
    let latest = server.shared.latest();
    let openmetrics = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"));
    let gzip = accepts_gzip(
        headers
            .get_all(header::ACCEPT_ENCODING)
            .iter()
            .filter_map(|v| v.to_str().ok()),
    );
    let encoded = match (openmetrics, gzip) {
        (true, true) => latest.openmetrics_gzip(),
        (true, false) => latest.openmetrics(),
        (false, true) => Ok(latest.text_gzip()),
        (false, false) => Ok(latest.text()),
    };
    let body = match encoded {
        Ok(body) => body,
        Err(why) => {
            tracing::error!(target: LOG_TARGET, "{why}");
            return plain(StatusCode::INTERNAL_SERVER_ERROR, format!("{why}\n"));
        }
    };
    let content_type = if openmetrics {
        OPENMETRICS_CONTENT_TYPE
    } else {
        TEXT_CONTENT_TYPE
    };
    let mut r = Response::new(Full::new(body));
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    if gzip {
        h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    r
}

/// Whether `Accept-Encoding` values accept gzip: `gzip` (or `x-gzip`, or else `*`) with a
/// quality above 0.
pub fn accepts_gzip<'a>(values: impl Iterator<Item = &'a str>) -> bool {
    let mut gzip: Option<f32> = None;
    let mut star: Option<f32> = None;
    for item in values.flat_map(|v| v.split(',')) {
        let mut parts = item.split(';');
        let name = parts.next().unwrap_or("").trim();
        let mut q = 1.0f32;
        for p in parts {
            if let Some((k, v)) = p.split_once('=') {
                if k.trim().eq_ignore_ascii_case("q") {
                    q = v.trim().parse().unwrap_or(0.0);
                }
            }
        }
        if name.eq_ignore_ascii_case("gzip") || name.eq_ignore_ascii_case("x-gzip") {
            gzip = Some(q);
        } else if name == "*" {
            star = Some(q);
        }
    }
    gzip.or(star).is_some_and(|q| q > 0.0)
}

/// Open connections per address and in all.
#[derive(Debug)]
pub struct Slots {
    per_client: usize,
    total: usize,
    open: Mutex<(usize, HashMap<IpAddr, usize>)>,
}

/// One admitted connection; gives its slot back when dropped.
#[derive(Debug)]
pub struct Slot {
    slots: Arc<Slots>,
    ip: IpAddr,
}

impl Slots {
    /// At most `per_client` from one address, `total` in all.
    pub fn new(per_client: usize, total: usize) -> Slots {
        Slots {
            per_client,
            total,
            open: Mutex::new((0, HashMap::new())),
        }
    }

    /// A slot for a connection from `ip`, if one is free. An IPv4 address mapped into IPv6
    /// counts as the IPv4 address.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Option<Slot> {
        let ip = ip.to_canonical();
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if open.0 >= self.total {
            return None;
        }
        let n = open.1.entry(ip).or_insert(0);
        if *n >= self.per_client {
            return None;
        }
        *n += 1;
        open.0 += 1;
        Some(Slot {
            slots: self.clone(),
            ip,
        })
    }

    /// Open connections from `ip`, and in all.
    #[cfg(test)]
    pub fn open(&self, ip: IpAddr) -> (usize, usize) {
        let open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        (open.1.get(&ip.to_canonical()).copied().unwrap_or(0), open.0)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.slots.open.lock().unwrap_or_else(|p| p.into_inner());
        open.0 = open.0.saturating_sub(1);
        if let Some(n) = open.1.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.1.remove(&self.ip);
            }
        }
    }
}

/// Basic auth against bcrypt hashes. A bcrypt check costs tens of milliseconds by design, so
/// checks run one at a time off the runtime's threads, and the last few user/password pairs
/// that passed are remembered (compared in constant time), so that a scraper that sends the
/// same credentials every time costs one check, not one per scrape.
struct Auth {
    users: Arc<std::collections::BTreeMap<String, String>>,
    /// Checked against when the user is unknown, so that unknown users take as long as known
    /// ones.
    dummy: Option<String>,
    passed: Mutex<Vec<(String, String)>>,
    one_at_a_time: tokio::sync::Semaphore,
}

/// User/password pairs remembered as passed.
const PASSED_KEPT: usize = 16;

impl Auth {
    fn new(users: Arc<std::collections::BTreeMap<String, String>>) -> Auth {
        let cost = users
            .values()
            .filter_map(|h| h.parse::<bcrypt::HashParts>().ok())
            .map(|p| p.get_cost())
            .max()
            .unwrap_or(bcrypt::DEFAULT_COST);
        Auth {
            users,
            dummy: bcrypt::hash("gpuscope-dummy-password", cost).ok(),
            passed: Mutex::new(Vec::new()),
            one_at_a_time: tokio::sync::Semaphore::new(1),
        }
    }

    async fn check(&self, value: Option<&HeaderValue>) -> bool {
        let Some((user, password)) = value.and_then(|v| parse_basic(v.as_bytes())) else {
            return false;
        };
        if self.remembered(&user, &password) {
            return true;
        }
        let Ok(_permit) = self.one_at_a_time.acquire().await else {
            return false;
        };
        let hash = self.users.get(&user).cloned();
        let known = hash.is_some();
        let Some(hash) = hash.or_else(|| self.dummy.clone()) else {
            return false;
        };
        let pw = password.clone();
        let ok = tokio::task::spawn_blocking(move || bcrypt::verify(pw, &hash).unwrap_or(false))
            .await
            .unwrap_or(false)
            && known;
        if ok {
            let mut passed = self.passed.lock().unwrap_or_else(|p| p.into_inner());
            if passed.len() >= PASSED_KEPT {
                passed.remove(0);
            }
            passed.push((user, password));
        }
        ok
    }

    fn remembered(&self, user: &str, password: &str) -> bool {
        let passed = self.passed.lock().unwrap_or_else(|p| p.into_inner());
        passed.iter().fold(false, |found, (u, p)| {
            found
                | (constant_time_eq(u.as_bytes(), user.as_bytes())
                    & constant_time_eq(p.as_bytes(), password.as_bytes()))
        })
    }
}

/// Equality whose time depends on the lengths only.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `Basic base64(user:password)` → (user, password).
pub fn parse_basic(value: &[u8]) -> Option<(String, String)> {
    let text = std::str::from_utf8(value).ok()?.trim();
    let (scheme, encoded) = text.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (user, password) = decoded.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn gz(v: &str) -> bool {
        accepts_gzip(std::iter::once(v))
    }

    #[test]
    fn prometheus_and_curl_accept_encodings_ask_for_gzip() {
        assert!(gz("gzip"));
        assert!(gz("gzip, deflate, br"));
        assert!(gz("deflate;q=0.5, GZIP;q=0.8"));
        assert!(gz("*"));
        assert!(!gz("identity"));
        assert!(!gz("gzip;q=0"));
        assert!(!gz("gzip;q=0, *"));
        assert!(!gz(""));
        assert!(!accepts_gzip(std::iter::empty()));
    }

    #[test]
    fn basic_credentials_parse() {
        // "alice:open sesame:x"
        let v = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("alice:open sesame:x")
        );
        assert_eq!(
            parse_basic(v.as_bytes()),
            Some(("alice".into(), "open sesame:x".into()))
        );
        assert_eq!(parse_basic(b"Bearer abc"), None);
        assert_eq!(parse_basic(b"Basic !!!"), None);
        assert_eq!(parse_basic(b"Basic"), None);
    }

    proptest::proptest! {
        #[test]
        fn any_header_bytes_parse_without_panicking(bytes in proptest::collection::vec(0u8..=255, 0..200)) {
            let _ = parse_basic(&bytes);
            if let Ok(s) = std::str::from_utf8(&bytes) {
                let _ = accepts_gzip(std::iter::once(s));
            }
        }
    }

    #[test]
    fn one_address_cannot_take_the_slots_of_another() {
        let slots = Arc::new(Slots::new(2, 3));
        let a = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));
        let b = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
        let a1 = slots.admit(a).unwrap();
        let _a2 = slots.admit(a).unwrap();
        assert!(slots.admit(a).is_none(), "a third from a");
        let _b1 = slots.admit(b).unwrap();
        assert!(slots.admit(b).is_none(), "the total is reached");
        drop(a1);
        assert_eq!(slots.open(a), (1, 2));
        assert!(slots.admit(b).is_some());
        // An IPv4-mapped IPv6 address is the same client.
        let mapped: IpAddr = "::ffff:127.0.0.1".parse().unwrap();
        assert_eq!(slots.open(mapped).0, 1);
    }

    #[test]
    fn constant_time_eq_is_equality() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}
