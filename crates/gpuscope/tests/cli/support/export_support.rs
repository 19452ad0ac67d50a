//! Helpers for the `gpuscope export` tests: start the exporter on a free port, fetch over plain
//! TCP with timeouts, and a strict parser of the Prometheus text format.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The binary as every CLI test runs it (the tests that use these helpers reach it here).
pub use super::cli;
/// The `Authorization` header value of HTTP basic auth for a user and password.
pub use test_support::loopback::basic;

/// A running exporter, killed when dropped.
pub struct Exporter {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    /// Lines the exporter writes to stderr after the one that says where it listens.
    pub stderr: mpsc::Receiver<String>,
}

impl Exporter {
    /// Starts `gpuscope export --listen 127.0.0.1:0 ARGS` and waits for its address.
    pub fn start(args: &[&str]) -> Exporter {
        Exporter::start_with_env(args, &[])
    }

    /// [`Exporter::start`] with these environment variables set for the exporter.
    pub fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> Exporter {
        let mut child = cli::command(&["export", "--listen", "127.0.0.1:0"])
            .args(args)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("gpuscope starts");
        let stderr = child.stderr.take().expect("stderr is piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut seen = Vec::new();
        loop {
            match rx.recv_timeout(Duration::from_secs(30)) {
                Ok(line) => {
                    if let Some(rest) = line.split("listening on ").nth(1) {
                        let rest = rest.split_once("://").expect("a scheme").1;
                        let addr = rest.split('/').next().expect("an address").to_string();
                        return Exporter {
                            child,
                            addr,
                            stderr: rx,
                        };
                    }
                    seen.push(line);
                }
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("the exporter did not say where it listens; stderr: {seen:?}");
                }
            }
        }
    }

    /// The exporter's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `GET path` on a new connection; the whole answer.
    pub fn get(&self, path: &str) -> Response {
        get(&self.addr, path, None)
    }

    /// The text exposition, parsed.
    pub fn scrape(&self) -> Exposition {
        let r = self.get("/metrics");
        assert_eq!(r.status, 200, "{}", r.body);
        parse(&r.body)
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP answer.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: HashMap<String, String>,
    pub body: String,
}

/// `GET path` on a new connection with `Connection: close`, with a 10 s timeout.
pub fn get(addr: &str, path: &str, accept: Option<&str>) -> Response {
    let mut s = TcpStream::connect(addr).expect("connects");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    let accept = accept
        .map(|a| format!("Accept: {a}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{accept}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("reads the answer in time");
    parse_response(&raw)
}

/// A TCP connection to `addr` from the local address `from` (any port), with 10 s timeouts.
/// Linux routes all of 127.0.0.0/8 to the loopback interface, so `127.0.0.2` is a second
/// client address on any machine.
pub fn connect_from(from: &str, addr: &str) -> TcpStream {
    use socket2::{Domain, Socket, Type};
    let local: std::net::SocketAddr = format!("{from}:0").parse().expect("a local address");
    let remote: std::net::SocketAddr = addr.parse().expect("a remote address");
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).expect("a socket");
    s.bind(&local.into()).expect("binds the local address");
    s.connect(&remote.into()).expect("connects");
    let s: TcpStream = s.into();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// An HTTP answer with its body as bytes.
#[derive(Debug)]
pub struct RawResponse {
    pub status: u16,
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
}

impl RawResponse {
    /// The body, decompressed when the answer says `Content-Encoding: gzip`.
    pub fn text(&self) -> String {
        if self.headers.get("content-encoding").map(String::as_str) == Some("gzip") {
            let mut out = String::new();
            flate2::read::GzDecoder::new(&self.body[..])
                .read_to_string(&mut out)
                .expect("a gzip body");
            out
        } else {
            String::from_utf8(self.body.clone()).expect("a UTF-8 body")
        }
    }
}

/// Sends `GET path` with `headers` on `stream` (kept alive) and reads one answer: its head,
/// then `Content-Length` bytes of body.
pub fn request<S: Read + Write>(
    stream: &mut S,
    path: &str,
    headers: &[(&str, &str)],
) -> RawResponse {
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: gpuscope\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    stream.write_all(req.as_bytes()).expect("sends the request");
    stream.flush().expect("sends the request");
    read_response(stream)
}

/// Reads one answer with a `Content-Length` from `stream`.
pub fn read_response<S: Read>(stream: &mut S) -> RawResponse {
    let mut head = Vec::new();
    let mut buf = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut buf).expect("an answer head");
        head.push(buf[0]);
    }
    let head = String::from_utf8(head).expect("a UTF-8 head");
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    let headers: HashMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let len: usize = headers
        .get("content-length")
        .expect("Content-Length")
        .parse()
        .expect("a length");
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).expect("the whole body");
    RawResponse {
        status,
        headers,
        body,
    }
}

/// Splits a whole HTTP answer.
pub fn parse_response(raw: &[u8]) -> Response {
    let text = String::from_utf8(raw.to_vec()).expect("UTF-8 answer");
    let (head, body) = text.split_once("\r\n\r\n").expect("a head");
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap();
    let status = status_line.split(' ').nth(1).unwrap().parse().unwrap();
    let headers = lines
        .map(|l| {
            let (k, v) = l.split_once(':').unwrap();
            (k.to_ascii_lowercase(), v.trim().to_string())
        })
        .collect::<HashMap<_, _>>();
    if let Some(len) = headers.get("content-length") {
        assert_eq!(len.parse::<usize>().unwrap(), body.len(), "Content-Length");
    }
    Response {
        status,
        headers,
        body: body.to_string(),
    }
}

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// A parsed exposition: `# TYPE`s by family name, `# HELP`s, samples in order.
#[derive(Debug, Default)]
pub struct Exposition {
    pub types: HashMap<String, String>,
    pub helps: HashMap<String, String>,
    pub samples: Vec<Sample>,
}

impl Exposition {
    /// The samples of metric `name` whose labels include every pair of `with`.
    pub fn find(&self, name: &str, with: &[(&str, &str)]) -> Vec<&Sample> {
        self.samples
            .iter()
            .filter(|s| s.name == name)
            .filter(|s| {
                with.iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .collect()
    }

    /// The value of the one sample of `name` with labels `with`.
    pub fn value(&self, name: &str, with: &[(&str, &str)]) -> Option<f64> {
        let found = self.find(name, with);
        assert!(found.len() <= 1, "{name} {with:?} matches {found:?}");
        found.first().map(|s| s.value)
    }
}

/// Parses the Prometheus text format 0.0.4 strictly: panics, naming the line, on anything
/// malformed, on a sample without `# TYPE`, and on a repeated series.
pub fn parse(text: &str) -> Exposition {
    let mut e = Exposition::default();
    let mut seen = std::collections::HashSet::new();
    for (n, line) in text.lines().enumerate() {
        let n = n + 1;
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or_else(|| panic!("line {n}"));
            assert!(
                ["gauge", "counter", "untyped", "summary", "histogram"].contains(&kind),
                "line {n}: type {kind}"
            );
            assert!(
                e.types.insert(name.into(), kind.into()).is_none(),
                "line {n}: second TYPE of {name}"
            );
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or_else(|| panic!("line {n}"));
            e.helps.insert(name.into(), help.into());
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let (name, labels, rest) = match line.find('{') {
            Some(open) => {
                let (labels, after) = parse_labels(&line[open + 1..], n);
                (&line[..open], labels, after)
            }
            None => {
                let (name, rest) = line.split_once(' ').unwrap_or_else(|| panic!("line {n}"));
                (name, BTreeMap::new(), rest)
            }
        };
        assert!(valid_name(name), "line {n}: metric name {name:?}");
        let value_text = rest.trim_start_matches(' ');
        let value_text = value_text.split(' ').next().unwrap();
        let value: f64 = match value_text {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v
                .parse()
                .unwrap_or_else(|_| panic!("line {n}: value {v:?}")),
        };
        assert!(
            e.types.contains_key(name),
            "line {n}: sample of {name} without # TYPE"
        );
        assert!(
            seen.insert((name.to_string(), labels.clone())),
            "line {n}: repeated series {name} {labels:?}"
        );
        e.samples.push(Sample {
            name: name.into(),
            labels,
            value,
        });
    }
    e
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// Parses `a="x",b="y"}` and returns the labels and what follows the `}`.
fn parse_labels(text: &str, n: usize) -> (BTreeMap<String, String>, &str) {
    let mut labels = BTreeMap::new();
    let mut rest = text;
    loop {
        if let Some(after) = rest.strip_prefix('}') {
            return (labels, after);
        }
        let eq = rest.find('=').unwrap_or_else(|| panic!("line {n}: no ="));
        let key = &rest[..eq];
        assert!(valid_name(key), "line {n}: label name {key:?}");
        rest = rest[eq + 1..]
            .strip_prefix('"')
            .unwrap_or_else(|| panic!("line {n}: no opening quote"));
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next() {
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, '\\')) => value.push('\\'),
                    Some((_, '"')) => value.push('"'),
                    Some((_, 'n')) => value.push('\n'),
                    other => panic!("line {n}: bad escape {other:?}"),
                },
                Some((_, c)) => value.push(c),
                None => panic!("line {n}: unterminated label value"),
            }
        };
        assert!(
            labels.insert(key.to_string(), value).is_none(),
            "line {n}: repeated label {key}"
        );
        rest = &rest[end + 1..];
        if let Some(after) = rest.strip_prefix(',') {
            rest = after;
        }
    }
}

/// The path of a fixture of the repository.
pub fn fixture(stem: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(format!("../../fixtures/{stem}.json"))
        .display()
        .to_string()
}

/// A fixture's JSON.
pub fn fixture_json(stem: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(fixture(stem)).expect("fixture readable");
    serde_json::from_str(&text).expect("fixture is JSON")
}
