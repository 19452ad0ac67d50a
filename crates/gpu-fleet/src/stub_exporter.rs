//! A hostile gpuscope exporter on 127.0.0.1, for the tests of `--remote` (this crate's, and with
//! the `testkit` feature gpuscope's): one listener that serves many exporters, each under a
//! path of its own (`http://127.0.0.1:PORT/NAME/metrics`), each answering as a test says: a
//! gpuscope exposition, an HTML page, an empty body, node_exporter's text, bytes that are not
//! text, an HTTP error, nothing at all, or a body that never ends.
//!
//! Every wait is bounded: a request head is read within 5 s, a silent answer is held for
//! 60 s at most (less when the client leaves or the stub is dropped), a dribbled body sends
//! its last byte within 60 s. Dropping the stub stops it.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The longest any answer is held open.
const LONGEST: Duration = Duration::from_secs(60);

/// How one exporter of the stub answers.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// 200, `text/plain; version=0.0.4`, this text (see [`exposition`]).
    Exposition(String),
    /// 200, `text/html`, a login page.
    Html,
    /// 200, `text/plain`, an empty body.
    Empty,
    /// 200, `text/plain; version=0.0.4`, node_exporter's kind of text: the format right, no
    /// gpuscope family in it.
    NodeExporter,
    /// 200, `application/octet-stream`, bytes that are not UTF-8.
    Binary,
    /// This status, with a short text body.
    Status(u16),
    /// Reads the request and never answers (until the client leaves, the stub is dropped or
    /// `LONGEST` passes).
    Silent,
    /// Sends a head announcing a large body, then one byte of it per this interval.
    Dribble(Duration),
}

/// A running stub: every exporter added answers under its own URL. Stopped when dropped.
pub struct StubExporter {
    /// `127.0.0.1:PORT`.
    pub addr: String,
    routes: Arc<Mutex<HashMap<String, Answer>>>,
    stop: Arc<AtomicBool>,
    requests: Arc<AtomicUsize>,
    accepter: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for StubExporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StubExporter")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl StubExporter {
    /// Starts a stub with no exporter yet, on a free port of 127.0.0.1.
    ///
    /// # Errors
    ///
    /// The listener cannot be bound, or its thread cannot start.
    pub fn start() -> std::io::Result<StubExporter> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?.to_string();
        let routes = Arc::new(Mutex::new(HashMap::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(AtomicUsize::new(0));
        let accepter = {
            let (routes, stop, requests) = (routes.clone(), stop.clone(), requests.clone());
            std::thread::Builder::new()
                .name("stub-exporter".into())
                .spawn(move || {
                    for stream in listener.incoming() {
                        if stop.load(Ordering::SeqCst) {
                            return;
                        }
                        let Ok(stream) = stream else { continue };
                        let (routes, stop, requests) =
                            (routes.clone(), stop.clone(), requests.clone());
                        // A connection whose thread cannot start is closed unanswered: the
                        // client sees a reset, which is one more way for an exporter to fail.
                        let _ = std::thread::Builder::new()
                            .name("stub-exporter-conn".into())
                            .spawn(move || serve(stream, &routes, &stop, &requests));
                    }
                })?
        };
        Ok(StubExporter {
            addr,
            routes,
            stop,
            requests,
            accepter: Some(accepter),
        })
    }

    /// Adds (or changes) the exporter `name` and returns its URL,
    /// `http://127.0.0.1:PORT/NAME/metrics`.
    pub fn add(&self, name: &str, answer: Answer) -> String {
        self.routes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_string(), answer);
        self.url(name)
    }

    /// The URL of the exporter `name` (added or not: one never added answers 404).
    pub fn url(&self, name: &str) -> String {
        format!("http://{}/{name}/metrics", self.addr)
    }

    /// How many requests the stub has read so far, over all its exporters.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

impl Drop for StubExporter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accepting thread, which then sees the flag.
        let _ = TcpStream::connect_timeout(
            &self
                .addr
                .parse()
                .unwrap_or_else(|_| ([127, 0, 0, 1], 0).into()),
            Duration::from_secs(1),
        );
        if let Some(t) = self.accepter.take() {
            let _ = t.join();
        }
    }
}

/// Unix time now, seconds.
pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// A gpuscope exporter's exposition, as `gpuscope export` writes it: the sample time (now)
/// and one GPU (`index` 0, UUID `GPU-<uuid>`) with `free` bytes of 80 GiB free. Every sample
/// carries `hostname` and the labels of `extra` (such as a spoofed `instance`).
pub fn exposition(hostname: &str, uuid: &str, free: u64, extra: &[(&str, &str)]) -> String {
    let mut common = format!("hostname=\"{}\"", escape(hostname));
    for (k, v) in extra {
        common.push_str(&format!(",{k}=\"{}\"", escape(v)));
    }
    let device = format!(
        "{common},index=\"0\",uuid=\"GPU-{}\",name=\"NVIDIA H100 80GB HBM3\"",
        escape(uuid)
    );
    let total: u64 = 80 << 30;
    format!(
        "# HELP gpuscope_exporter_sample_timestamp_seconds When the sample served now was taken.\n\
         # TYPE gpuscope_exporter_sample_timestamp_seconds gauge\n\
         gpuscope_exporter_sample_timestamp_seconds{{{common}}} {now}\n\
         # TYPE gpuscope_device_up gauge\n\
         gpuscope_device_up{{{device}}} 1\n\
         # TYPE gpuscope_device_memory_total_bytes gauge\n\
         gpuscope_device_memory_total_bytes{{{device}}} {total}\n\
         # TYPE gpuscope_device_memory_free_bytes gauge\n\
         gpuscope_device_memory_free_bytes{{{device}}} {free}\n\
         # TYPE gpuscope_device_memory_used_bytes gauge\n\
         gpuscope_device_memory_used_bytes{{{device}}} {used}\n",
        now = unix_now(),
        used = total.saturating_sub(free),
    )
}

/// `text` inside a label value of the text format.
fn escape(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The page [`Answer::Html`] serves.
pub const HTML: &str = "<!DOCTYPE html>\n<html><head><title>Sign in</title></head>\n\
    <body><form method=\"post\"><input name=\"user\"> <input name=\"password\" type=\"password\">\
    </form></body></html>\n";

const NODE_EXPORTER: &str = "# HELP node_load1 1m load average.\n# TYPE node_load1 gauge\n\
    node_load1 0.42\n# HELP node_memory_MemFree_bytes Memory information field MemFree_bytes.\n\
    # TYPE node_memory_MemFree_bytes gauge\nnode_memory_MemFree_bytes 1.2345e+10\n\
    node_cpu_seconds_total{cpu=\"0\",mode=\"idle\"} 12345.67\n";

/// Serves the requests of one connection (keep-alive) until the client leaves, an answer
/// holds it, or the stub stops.
fn serve(
    stream: TcpStream,
    routes: &Mutex<HashMap<String, Answer>>,
    stop: &AtomicBool,
    requests: &AtomicUsize,
) {
    if stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .is_err()
    {
        return;
    }
    let Ok(write_half) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    let mut out = write_half;
    loop {
        let Some(path) = read_head(&mut reader) else {
            return;
        };
        requests.fetch_add(1, Ordering::SeqCst);
        let name = path
            .trim_start_matches('/')
            .split('/')
            .next()
            .unwrap_or("")
            .to_string();
        let answer = routes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&name)
            .cloned();
        let (status, content_type, body): (u16, &str, Vec<u8>) = match answer {
            None => (404, "text/plain", b"404 page not found\n".to_vec()),
            Some(Answer::Exposition(text)) => (200, "text/plain; version=0.0.4", text.into()),
            Some(Answer::Html) => (200, "text/html; charset=utf-8", HTML.into()),
            Some(Answer::Empty) => (200, "text/plain", Vec::new()),
            Some(Answer::NodeExporter) => (200, "text/plain; version=0.0.4", NODE_EXPORTER.into()),
            Some(Answer::Binary) => (
                200,
                "application/octet-stream",
                vec![0xff, 0xfe, 0x00, 0x80, b'\n', 0xc3, 0x28],
            ),
            Some(Answer::Status(s)) => (s, "text/plain", format!("status {s}\n").into()),
            Some(Answer::Silent) => {
                hold(reader.get_mut(), stop);
                return;
            }
            Some(Answer::Dribble(every)) => {
                dribble(&mut out, every, stop);
                return;
            }
        };
        let head = format!(
            "HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        if out.write_all(head.as_bytes()).is_err()
            || out.write_all(&body).is_err()
            || out.flush().is_err()
        {
            return;
        }
    }
}

/// A request's target, its head read and dropped (64 lines of 8 KiB at most); `None` when
/// the client left, stalled or sent something else.
fn read_head(reader: &mut BufReader<TcpStream>) -> Option<String> {
    let mut first = String::new();
    (&mut *reader).take(8192).read_line(&mut first).ok()?;
    let target = first.split_whitespace().nth(1)?.to_string();
    for _ in 0..64 {
        let mut line = String::new();
        if (&mut *reader).take(8192).read_line(&mut line).ok()? == 0 {
            return None;
        }
        if line.trim_end().is_empty() {
            return Some(target);
        }
    }
    None
}

/// Keeps the connection open without answering, until the client closes it, the stub stops
/// or [`LONGEST`] passes.
fn hold(stream: &mut TcpStream, stop: &AtomicBool) {
    let started = Instant::now();
    let _ = stream.set_read_timeout(Some(Duration::from_millis(100)));
    let mut buf = [0u8; 512];
    while !stop.load(Ordering::SeqCst) && started.elapsed() < LONGEST {
        match stream.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return,
        }
    }
}

/// A head that announces 1 MB of body, then a byte of it every `every`, until the client
/// leaves, the stub stops or [`LONGEST`] passes.
fn dribble(out: &mut TcpStream, every: Duration, stop: &AtomicBool) {
    let started = Instant::now();
    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n\
        Content-Length: 1000000\r\n\r\n# ";
    if out.write_all(head.as_bytes()).is_err() || out.flush().is_err() {
        return;
    }
    while !stop.load(Ordering::SeqCst) && started.elapsed() < LONGEST {
        std::thread::sleep(every);
        if out.write_all(b"x").is_err() || out.flush().is_err() {
            return;
        }
    }
}
