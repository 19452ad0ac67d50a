//! Clients of `gpuscope export` on loopback, some of them hostile. Linux routes all of
//! 127.0.0.0/8 to the loopback interface, so each 127.0.0.N is a client address of its own, and
//! an exporter's limits per address can be tried from one machine. Every read, write and
//! connect is bounded by a timeout, so that a stuck exporter fails a test or a benchmark
//! instead of hanging it.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use base64::Engine as _;

/// The longest answer head [`get_status`] reads before it gives up on the answer.
const MAX_HEAD: usize = 16 * 1024;

/// A connection from local address `from` (any port) to `addr`; the connect, and then each
/// read and write, bounded by `timeout`.
pub fn connect(from: &str, addr: &str, timeout: Duration) -> std::io::Result<TcpStream> {
    use socket2::{Domain, Socket, Type};
    let bad = |e: std::net::AddrParseError| std::io::Error::new(ErrorKind::InvalidInput, e);
    let local: SocketAddr = format!("{from}:0").parse().map_err(bad)?;
    let remote: SocketAddr = addr.parse().map_err(bad)?;
    let s = Socket::new(Domain::IPV4, Type::STREAM, None)?;
    s.bind(&local.into())?;
    s.connect_timeout(&remote.into(), timeout)?;
    let s: TcpStream = s.into();
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    Ok(s)
}

/// Sends `GET /metrics` with `headers` on `s` (kept alive) and reads the answer, its body
/// included (by its `Content-Length`), so that the next request can follow on `s`: its status.
pub fn get_status(s: &mut TcpStream, headers: &[(&str, &str)]) -> std::io::Result<u16> {
    let mut req = String::from("GET /metrics HTTP/1.1\r\nHost: gpuscope\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes())?;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut byte)?;
        head.push(byte[0]);
        if head.len() > MAX_HEAD {
            return Err(std::io::Error::other("an endless answer head"));
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let bad = || std::io::Error::other(format!("a malformed answer head: {head:?}"));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(bad)?;
    let len: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .ok_or_else(bad)?;
    let mut body = vec![0u8; len];
    s.read_exact(&mut body)?;
    Ok(status)
}

/// Prometheus's scrape timeout, which [`scrapes`] gives each scrape.
pub const SCRAPE_TIMEOUT: Duration = Duration::from_secs(10);

/// Scrapes `/metrics` on `addr` from `from` for `how_long`, one after another and 100 ms apart,
/// each on a new connection (as Prometheus makes after a failure) and given
/// [`SCRAPE_TIMEOUT`]: how many were asked, and the time of each that was answered 200 within
/// it.
pub fn scrapes(addr: &str, from: &str, how_long: Duration) -> (usize, Vec<Duration>) {
    let mut asked = 0;
    let mut answered = Vec::new();
    let started = Instant::now();
    while started.elapsed() < how_long {
        asked += 1;
        let t = Instant::now();
        let status = connect(from, addr, SCRAPE_TIMEOUT).and_then(|mut s| get_status(&mut s, &[]));
        let took = t.elapsed();
        if status.ok() == Some(200) && took < SCRAPE_TIMEOUT {
            answered.push(took);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    (asked, answered)
}

/// The `Authorization` header value of HTTP basic auth for `user` and `password`.
pub fn basic(user: &str, password: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    )
}

/// Writes a web config (`--web.config.file`) with basic auth `users` (name, bcrypt hash) as
/// `dir/name`: its path.
pub fn web_config(dir: &Path, name: &str, users: &[(&str, &str)]) -> std::io::Result<String> {
    let mut text = String::from("basic_auth_users:\n");
    for (user, hash) in users {
        text.push_str(&format!("  {user}: \"{hash}\"\n"));
    }
    let path = dir.join(name);
    std::fs::write(&path, text)?;
    Ok(path.display().to_string())
}

/// Threads that attack an exporter until stopped, counting what the attack is after. Dropping
/// it tells them to stop (without waiting for them), so that a failed assertion does not
/// leave a flood running.
pub struct Flood {
    stop: Arc<AtomicBool>,
    count: Arc<AtomicUsize>,
    threads: Vec<JoinHandle<()>>,
}

impl Flood {
    /// 8 addresses (127.0.0.2 to .9) x 32 connections, each sending `GET /metrics` with a wrong
    /// password for `user` as soon as the previous answer came, and connecting again (each
    /// connect bounded by `connect_timeout`) when the exporter closed it. It counts the 401
    /// answers.
    pub fn wrong_passwords(addr: &str, user: &str, connect_timeout: Duration) -> Flood {
        let stop = Arc::new(AtomicBool::new(false));
        let count = Arc::new(AtomicUsize::new(0));
        let mut threads = Vec::new();
        for a in 2..=9 {
            for _ in 0..32 {
                let (addr, stop, refused) = (addr.to_string(), stop.clone(), count.clone());
                let wrong = basic(user, "guess");
                threads.push(std::thread::spawn(move || {
                    let from = format!("127.0.0.{a}");
                    while !stop.load(Ordering::Relaxed) {
                        let Ok(mut s) = connect(&from, &addr, connect_timeout) else {
                            std::thread::sleep(Duration::from_millis(50));
                            continue;
                        };
                        while !stop.load(Ordering::Relaxed) {
                            match get_status(&mut s, &[("Authorization", &wrong)]) {
                                Ok(401) => {
                                    refused.fetch_add(1, Ordering::Relaxed);
                                }
                                Ok(_) => {}
                                Err(_) => break,
                            }
                        }
                    }
                }));
            }
        }
        Flood {
            stop,
            count,
            threads,
        }
    }

    /// 20 addresses (127.0.0.2 to .21) x 32 sockets that send half a request head and never
    /// finish it; every `period` each socket the exporter has closed (after its header
    /// deadline, or at once with a 503) is opened again. It counts the answers that begin
    /// `HTTP/1.1 503`.
    pub fn half_open_sockets(addr: &str, period: Duration) -> Flood {
        let stop = Arc::new(AtomicBool::new(false));
        let count = Arc::new(AtomicUsize::new(0));
        let threads = (2..=21)
            .map(|a| {
                let (addr, stop, told_503) = (addr.to_string(), stop.clone(), count.clone());
                std::thread::spawn(move || {
                    let from = format!("127.0.0.{a}");
                    let mut socks: Vec<Option<TcpStream>> = (0..32).map(|_| None).collect();
                    while !stop.load(Ordering::Relaxed) {
                        for slot in socks.iter_mut() {
                            let open = match slot {
                                Some(s) => {
                                    let mut buf = [0u8; 64];
                                    match s.read(&mut buf) {
                                        Err(e) if e.kind() == ErrorKind::WouldBlock => true,
                                        Ok(n) if n > 0 => {
                                            if buf.starts_with(b"HTTP/1.1 503") {
                                                told_503.fetch_add(1, Ordering::Relaxed);
                                            }
                                            false
                                        }
                                        _ => false,
                                    }
                                }
                                None => false,
                            };
                            if !open {
                                *slot = half_open(&from, &addr);
                            }
                        }
                        std::thread::sleep(period);
                    }
                })
            })
            .collect();
        Flood {
            stop,
            count,
            threads,
        }
    }

    /// How many times so far the flood got what it counts (see the constructors).
    pub fn count(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// Stops the flood and waits for its threads: the first panic of one of them, if any.
    pub fn stop(mut self) -> std::thread::Result<()> {
        self.stop.store(true, Ordering::Relaxed);
        let mut result = Ok(());
        for t in std::mem::take(&mut self.threads) {
            let joined = t.join();
            if result.is_ok() {
                result = joined;
            }
        }
        result
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A socket from `from` that has sent the start of a request head and will never finish it,
/// non-blocking.
fn half_open(from: &str, addr: &str) -> Option<TcpStream> {
    let mut s = connect(from, addr, Duration::from_secs(1)).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n").ok()?;
    s.set_nonblocking(true).ok()?;
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A server on 127.0.0.1 that reads one request head from one client and sends `answer`;
    /// its address, and the head it read.
    fn serve_once(answer: &'static [u8]) -> (String, JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binds");
        let addr = listener.local_addr().expect("an address").to_string();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().expect("accepts");
            s.set_read_timeout(Some(Duration::from_secs(10)))
                .expect("a timeout");
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                s.read_exact(&mut byte).expect("a request head");
                head.push(byte[0]);
            }
            s.write_all(answer).expect("answers");
            String::from_utf8(head).expect("a UTF-8 head")
        });
        (addr, server)
    }

    #[test]
    fn get_status_sends_the_headers_and_reads_the_status_and_body() {
        let (addr, server) =
            serve_once(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 5\r\n\r\nnope!");
        let mut s = connect("127.0.0.2", &addr, Duration::from_secs(10)).expect("connects");
        let status = get_status(&mut s, &[("Authorization", &basic("prometheus", "s3cret"))]);
        assert_eq!(status.expect("an answer"), 401);
        // cHJvbWV0aGV1czpzM2NyZXQ= is base64("prometheus:s3cret").
        assert_eq!(
            server.join().expect("the server"),
            "GET /metrics HTTP/1.1\r\nHost: gpuscope\r\n\
             Authorization: Basic cHJvbWV0aGV1czpzM2NyZXQ=\r\n\r\n"
        );
    }

    #[test]
    fn an_answer_without_a_length_is_an_error_not_a_status() {
        let (addr, server) = serve_once(b"HTTP/1.1 200 OK\r\n\r\n");
        let mut s = connect("127.0.0.1", &addr, Duration::from_secs(10)).expect("connects");
        let err = get_status(&mut s, &[]).expect_err("no Content-Length");
        assert!(err.to_string().contains("malformed answer head"), "{err}");
        server.join().expect("the server");
    }

    #[test]
    fn web_config_lists_the_users_under_basic_auth_users() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = web_config(
            dir.path(),
            "web.yml",
            &[("alice", "$2y$04$x"), ("bob", "$2y$10$y")],
        )
        .expect("writes");
        let text = std::fs::read_to_string(&path).expect("reads");
        assert_eq!(
            text,
            "basic_auth_users:\n  alice: \"$2y$04$x\"\n  bob: \"$2y$10$y\"\n"
        );
    }
}
