//! The HTTP side of the exporter, on hyper (HTTP/1.1) over a current-thread tokio runtime, with TLS
//! from rustls when configured. A scrape serves the latest sample, encoded in the form it asks for
//! by the first scrape of that sample that asks (see `Exposition`); it never waits on
//! the GPUs.
//!
//! Limits that hold under abuse, so that clients that flood the exporter cannot stop scrapes
//! from another address: at most [`Limits::per_client`] connections from one client (an IPv4
//! address or an IPv6 /64) and [`Limits::total`] in all, the last [`Limits::reserve`] of them
//! only for clients holding fewer than [`Limits::reserve_per_client`] (more are told 503 and
//! closed at once; see `slots.rs`); a deadline to send a whole request head
//! ([`Limits::header_timeout`]: hyper's header read timeout, which also bounds an idle
//! kept-alive connection, and the same deadline for a TLS handshake); a cap on the size of the
//! request head ([`Limits::max_head`], 431 beyond it); a longest life for a connection
//! ([`Limits::max_age`], after which it is closed once its current answer is sent); and basic
//! auth's bcrypt checks shared out by client ([`Limits::auth_workers`],
//! [`Limits::auth_per_client`]; see `auth.rs`).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::{Body as _, Incoming};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};

use crate::auth::{Auth, Verdict};
use crate::exposition::{OPENMETRICS_CONTENT_TYPE, TEXT_CONTENT_TYPE};
pub use crate::limits::{Limits, LIMITS, LISTEN_BACKLOG, LOG_TARGET};
use crate::shared::{Health, Shared};
use crate::slots::Slots;
use crate::web_config::WebConfig;

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
        let auth = web
            .users
            .as_ref()
            .map(|users| Auth::new(users, limits.auth_workers, limits.auth_per_client));
        Server {
            shared,
            web,
            limits,
            slots: Arc::new(Slots::new(&limits)),
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
            let r = answer(&server, req, peer).await;
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

/// How long a request refused for too many password checks waits for its `429`, and the
/// `Retry-After` it gives.
const BUSY_DELAY: Duration = Duration::from_secs(1);

async fn answer(
    server: &Server,
    req: Request<Incoming>,
    peer: SocketAddr,
) -> Response<Full<Bytes>> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n");
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    if let Some(auth) = &server.auth {
        match auth
            .check(peer.ip(), req.headers().get(header::AUTHORIZATION))
            .await
        {
            Verdict::Pass => {}
            Verdict::Fail => {
                let mut r = plain(StatusCode::UNAUTHORIZED, "unauthorized\n");
                r.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Basic realm=\"gpuscope\", charset=\"UTF-8\""),
                );
                return r;
            }
            Verdict::Busy => {
                // Answered after the Retry-After it gives: a flooder that retries at once
                // would otherwise keep the one serving thread busy with 429s.
                tokio::time::sleep(BUSY_DELAY).await;
                let mut r = plain(
                    StatusCode::TOO_MANY_REQUESTS,
                    "too many password checks from this address\n",
                );
                r.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                return r;
            }
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

#[cfg(test)]
mod tests {
    use super::*;

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

    proptest::proptest! {
        #[test]
        fn any_header_bytes_parse_without_panicking(bytes in proptest::collection::vec(0u8..=255, 0..200)) {
            if let Ok(s) = std::str::from_utf8(&bytes) {
                let _ = accepts_gzip(std::iter::once(s));
            }
        }
    }
}
