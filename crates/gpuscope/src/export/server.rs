//! A small HTTP/1.1 server for `/metrics`: a thread per connection (at most
//! [`MAX_CONNECTIONS`] at once), deadlines on reading a request and on writing an answer, and
//! keep-alive. A scrape copies the bytes encoded by the sampler; it never waits on the GPUs.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::exposition::{OPENMETRICS_CONTENT_TYPE, TEXT_CONTENT_TYPE};

/// Most connections served at once; more are answered 503 and closed.
pub const MAX_CONNECTIONS: usize = 256;
/// Time a client has to send a whole request head, from its first byte or from the end of the
/// previous answer on a kept-alive connection.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(10);
/// Time an answer may take to write.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest request head read; a longer one is answered 431.
pub const MAX_HEAD: usize = 16 * 1024;

/// The latest encoded sample, in both formats.
#[derive(Debug, Default)]
pub struct Exposition {
    /// Prometheus text format 0.0.4.
    pub text: Vec<u8>,
    /// OpenMetrics 1.0.
    pub openmetrics: Vec<u8>,
}

/// What the sampler publishes and the connections read.
#[derive(Debug, Default)]
pub struct Shared {
    latest: Mutex<Arc<Exposition>>,
}

impl Shared {
    /// Replaces the served sample.
    pub fn publish(&self, exposition: Exposition) {
        let next = Arc::new(exposition);
        *self.latest.lock().unwrap_or_else(|p| p.into_inner()) = next;
    }

    /// The served sample.
    pub fn latest(&self) -> Arc<Exposition> {
        self.latest
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// Accepts connections for ever, each on its own thread.
pub fn serve(listener: TcpListener, shared: Arc<Shared>) -> io::Result<()> {
    let active = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming() {
        let stream = match stream {
            Ok(s) => s,
            // A connection that failed before it was accepted (reset, out of descriptors): wait
            // a little so that a persistent error does not spin, and go on.
            Err(_) => {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        if active.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
            active.fetch_sub(1, Ordering::AcqRel);
            let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
            let _ = respond(
                &stream,
                "503 Service Unavailable",
                "text/plain",
                b"too many connections\n",
                false,
                false,
            );
            continue;
        }
        let shared = shared.clone();
        let guard = ActiveGuard(active.clone());
        let spawned = std::thread::Builder::new()
            .name("gpuscope-http".into())
            .stack_size(64 * 1024)
            .spawn(move || {
                let _guard = guard;
                let _ = handle(stream, &shared);
            });
        if spawned.is_err() {
            // The guard moved into the closure that was dropped, which gave the slot back.
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    Ok(())
}

struct ActiveGuard(Arc<AtomicUsize>);

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A parsed request head: what the server needs of it.
#[derive(Debug, PartialEq, Eq)]
struct Request {
    method: String,
    path: String,
    keep_alive: bool,
    wants_openmetrics: bool,
    has_body: bool,
}

enum Head {
    Request(Request),
    Closed,
    Bad(&'static str),
    TooLarge,
}

fn handle(stream: TcpStream, shared: &Shared) -> io::Result<()> {
    stream.set_nodelay(true)?;
    stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
    let mut buf: Vec<u8> = Vec::with_capacity(1024);
    loop {
        let head = read_head(&stream, &mut buf)?;
        let req = match head {
            Head::Closed => return Ok(()),
            Head::TooLarge => {
                let body = b"request head too large\n";
                let status = "431 Request Header Fields Too Large";
                respond(&stream, status, "text/plain", body, false, false)?;
                return linger_close(&stream);
            }
            Head::Bad(why) => {
                let body = format!("bad request: {why}\n");
                let status = "400 Bad Request";
                respond(&stream, status, "text/plain", body.as_bytes(), false, false)?;
                return linger_close(&stream);
            }
            Head::Request(r) => r,
        };
        // Requests with a body are not expected; close after answering rather than read it.
        let keep_alive = req.keep_alive && !req.has_body;
        let head_only = req.method == "HEAD";
        if req.method != "GET" && !head_only {
            respond(
                &stream,
                "405 Method Not Allowed",
                "text/plain",
                b"only GET and HEAD\n",
                false,
                false,
            )?;
            return linger_close(&stream);
        }
        let path = req.path.split('?').next().unwrap_or("");
        match path {
            "/metrics" => {
                let latest = shared.latest();
                let (body, ctype) = if req.wants_openmetrics {
                    (&latest.openmetrics, OPENMETRICS_CONTENT_TYPE)
                } else {
                    (&latest.text, TEXT_CONTENT_TYPE)
                };
                respond(&stream, "200 OK", ctype, body, keep_alive, head_only)?;
            }
            "/" => respond(
                &stream,
                "200 OK",
                "text/html; charset=utf-8",
                INDEX.as_bytes(),
                keep_alive,
                head_only,
            )?,
            _ => respond(
                &stream,
                "404 Not Found",
                "text/plain",
                b"not found: try /metrics\n",
                keep_alive,
                head_only,
            )?,
        }
        if !keep_alive {
            return if req.has_body {
                linger_close(&stream)
            } else {
                Ok(())
            };
        }
    }
}

const INDEX: &str = "<!DOCTYPE html>\n<html><head><title>gpuscope exporter</title></head>\
<body><h1>gpuscope exporter</h1><p><a href=\"/metrics\">Metrics</a></p></body></html>\n";

/// Reads one request head into `buf` (which keeps bytes read past it, for pipelining), within
/// [`REQUEST_DEADLINE`].
fn read_head(mut stream: &TcpStream, buf: &mut Vec<u8>) -> io::Result<Head> {
    let deadline = Instant::now() + REQUEST_DEADLINE;
    let mut chunk = [0u8; 2048];
    loop {
        if let Some(end) = find_head_end(buf) {
            let head = parse_head(&buf[..end]);
            buf.drain(..end);
            return Ok(head);
        }
        if buf.len() > MAX_HEAD {
            return Ok(Head::TooLarge);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(Head::Closed);
        }
        stream.set_read_timeout(Some(left))?;
        match stream.read(&mut chunk) {
            Ok(0) => return Ok(Head::Closed),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Ok(Head::Closed)
            }
            Err(e) => return Err(e),
        }
    }
}

/// The length of the head including its blank line, once it is complete.
fn find_head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| i + 4)
        .or_else(|| buf.windows(2).position(|w| w == b"\n\n").map(|i| i + 2))
}

fn parse_head(head: &[u8]) -> Head {
    let Ok(text) = std::str::from_utf8(head) else {
        return Head::Bad("the request head is not UTF-8");
    };
    let mut lines = text.lines();
    let Some(request_line) = lines.next() else {
        return Head::Bad("empty request");
    };
    let mut parts = request_line.split(' ');
    let (Some(method), Some(path), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Head::Bad("the request line is not `METHOD PATH HTTP/1.x`");
    };
    let keep_alive_default = match version {
        "HTTP/1.1" => true,
        "HTTP/1.0" => false,
        _ => return Head::Bad("unsupported HTTP version"),
    };
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Head::Bad("bad method");
    }
    let mut req = Request {
        method: method.to_string(),
        path: path.to_string(),
        keep_alive: keep_alive_default,
        wants_openmetrics: false,
        has_body: false,
    };
    for line in lines {
        if line.is_empty() {
            break;
        }
        let Some((name, value)) = line.split_once(':') else {
            return Head::Bad("a header line has no colon");
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("connection") {
            let v = value.to_ascii_lowercase();
            if v.contains("close") {
                req.keep_alive = false;
            } else if v.contains("keep-alive") {
                req.keep_alive = true;
            }
        } else if name.eq_ignore_ascii_case("accept") {
            req.wants_openmetrics = value.contains("application/openmetrics-text");
        } else if name.eq_ignore_ascii_case("content-length") {
            req.has_body = value != "0";
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            req.has_body = true;
        }
    }
    Head::Request(req)
}

/// Closes after an answer sent before the whole request was read: stops writing, then reads and
/// drops what the client still sends (for at most a second and 256 KiB), so that the kernel
/// does not reset the connection and lose the answer before the client has read it.
fn linger_close(mut stream: &TcpStream) -> io::Result<()> {
    stream.shutdown(std::net::Shutdown::Write)?;
    let deadline = Instant::now() + Duration::from_secs(1);
    let mut drained = 0usize;
    let mut chunk = [0u8; 4096];
    while drained < 256 * 1024 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        stream.set_read_timeout(Some(left))?;
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => drained += n,
        }
    }
    Ok(())
}

fn respond(
    mut stream: &TcpStream,
    status: &str,
    content_type: &str,
    body: &[u8],
    keep_alive: bool,
    head_only: bool,
) -> io::Result<()> {
    let connection = if keep_alive { "keep-alive" } else { "close" };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Connection: {connection}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    if !head_only {
        stream.write_all(body)?;
    }
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(text: &str) -> Request {
        match parse_head(text.as_bytes()) {
            Head::Request(r) => r,
            _ => panic!("not a request: {text:?}"),
        }
    }

    #[test]
    fn prometheus_accept_header_asks_for_openmetrics() {
        let r = request(
            "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: application/openmetrics-text;\
             version=1.0.0,text/plain;version=0.0.4;q=0.5\r\n\r\n",
        );
        assert!(r.wants_openmetrics && r.keep_alive);
        assert_eq!(r.path, "/metrics");
    }

    #[test]
    fn http10_and_connection_close_close() {
        assert!(!request("GET / HTTP/1.0\r\n\r\n").keep_alive);
        assert!(!request("GET / HTTP/1.1\r\nConnection: close\r\n\r\n").keep_alive);
        assert!(request("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").keep_alive);
    }

    #[test]
    fn garbage_is_a_bad_request() {
        for text in [
            "\u{1}\u{2}\r\n\r\n",
            "GET\r\n\r\n",
            "GET / HTTP/9\r\n\r\n",
            "get / HTTP/1.1\r\n\r\n",
        ] {
            assert!(
                matches!(parse_head(text.as_bytes()), Head::Bad(_)),
                "{text:?}"
            );
        }
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_parse_without_panicking(bytes in proptest::collection::vec(0u8..=255, 0..300)) {
            let _ = parse_head(&bytes);
            let _ = find_head_end(&bytes);
        }
    }

    #[test]
    fn head_end_is_found_with_crlf_or_lf() {
        assert_eq!(find_head_end(b"GET / HTTP/1.1\r\n\r\nrest"), Some(18));
        assert_eq!(find_head_end(b"GET / HTTP/1.1\n\n"), Some(16));
        assert_eq!(find_head_end(b"GET / HTTP/1.1\r\n"), None);
    }
}
