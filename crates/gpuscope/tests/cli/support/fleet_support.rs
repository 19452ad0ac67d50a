//! A stub Prometheus for the fleet tests: a std `TcpListener` on 127.0.0.1 that answers
//! `GET /api/v1/query?query=...` with recorded answers, and counts the queries asked. It can
//! also be hostile: answer slowly or never ([`Reply::Silent`]), with a bomb of warnings
//! ([`with_warnings`]), or with whatever labels and sample times a test gives it. Every wait
//! is bounded: a connection it never answers is dropped after [`SILENT_FOR`].

#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

/// How the stub answers one query.
#[derive(Clone, Debug)]
pub enum Reply {
    /// 200 with this body.
    Body(String),
    /// This HTTP status with this body.
    Status(u16, String),
    /// Wait this long, then answer with an empty vector.
    Slow(Duration),
    /// Read the request and never answer (until the client goes away, or [`SILENT_FOR`]).
    Silent,
}

/// How long a [`Reply::Silent`] connection is held at most.
pub const SILENT_FOR: Duration = Duration::from_secs(60);

/// `body` (an answer) with `n` warnings added, each about 45 bytes as a real Prometheus's
/// ("remote read of store 123 failed: ...").
pub fn with_warnings(body: &str, n: usize) -> String {
    let mut v: Value = serde_json::from_str(body).unwrap();
    let warnings: Vec<Value> = (0..n)
        .map(|i| Value::String(format!("remote read of store {i} failed: deadline")))
        .collect();
    v["warnings"] = Value::Array(warnings);
    v.to_string()
}

/// A running stub.
pub struct Stub {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// Every query asked, in order.
    pub asked: Arc<Mutex<Vec<String>>>,
    /// The answers, which a test may change while the stub runs.
    pub replies: Arc<Mutex<HashMap<String, Reply>>>,
}

/// A query with an `{instance=~"a|b"}` selector (as gpuscope's incremental refreshes ask):
/// the family and the instances named (regular-expression escapes undone).
pub fn split_selector(query: &str) -> Option<(&str, Vec<String>)> {
    let (family, rest) = query.split_once("{instance=~\"")?;
    let regex = rest.strip_suffix("\"}")?;
    // The PromQL string's escapes, then the regular expression's.
    let regex = regex.replace("\\\\", "\\");
    let mut instances = vec![String::new()];
    let mut chars = regex.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(n) = chars.next() {
                    instances.last_mut().unwrap().push(n);
                }
            }
            '|' => instances.push(String::new()),
            c => instances.last_mut().unwrap().push(c),
        }
    }
    Some((family, instances))
}

/// `body` (an instant-vector answer) with only the series of these instances.
fn only_instances(body: &str, instances: &[String]) -> String {
    let mut v: Value = serde_json::from_str(body).unwrap();
    if let Some(result) = v["data"]["result"].as_array_mut() {
        result.retain(|s| {
            s["metric"]["instance"]
                .as_str()
                .is_some_and(|i| instances.iter().any(|x| x == i))
        });
    }
    v.to_string()
}

/// An instant-vector answer with these (labels, value) series, evaluated at `t`.
pub fn vector(t: f64, series: &[(Value, String)]) -> String {
    let result: Vec<Value> = series
        .iter()
        .map(|(labels, v)| json!({"metric": labels, "value": [t, v]}))
        .collect();
    json!({"status": "success", "data": {"resultType": "vector", "result": result}}).to_string()
}

/// The query every refresh asks first: each exporter's latest sample time over the lookback,
/// and which hosts serve dcgm-exporter's or nvidia_gpu_exporter's names (gpu-fleet's own text).
pub static SAMPLE_TIME_QUERY: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| gpu_fleet::queries()[0].clone());

/// Sets the answers of the two queries about hosts at `t`: [`SAMPLE_TIME_QUERY`] and `up`.
/// `hosts`: (hostname, instance, its exporter's latest sample time, `1` when Prometheus scrapes
/// it or `0`) of the job `gpu`; `other_targets`: (instance, job, up) that only `up` lists.
pub fn hosts(
    replies: &mut HashMap<String, Reply>,
    t: f64,
    hosts: &[(&str, &str, &str, &str)],
    other_targets: &[(&str, &str, &str)],
) {
    let times: Vec<(Value, String)> = hosts
        .iter()
        .map(|&(host, instance, time, _)| {
            let labels = json!({"instance": instance, "job": "gpu", "hostname": host});
            (labels, time.to_string())
        })
        .collect();
    let up: Vec<(Value, String)> = hosts
        .iter()
        .map(|&(_, instance, _, up)| (instance, "gpu", up))
        .chain(other_targets.iter().copied())
        .map(|(instance, job, up)| (json!({"instance": instance, "job": job}), up.to_string()))
        .collect();
    replies.insert(SAMPLE_TIME_QUERY.clone(), Reply::Body(vector(t, &times)));
    replies.insert("up".into(), Reply::Body(vector(t, &up)));
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
                out.push(u8::from_str_radix(hex, 16).unwrap());
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).unwrap()
}

/// Starts a stub that answers each query from `replies` (an empty vector when not listed),
/// and requires `Authorization: <auth>` when `auth` is set (401 otherwise).
pub fn start(replies: HashMap<String, Reply>, auth: Option<String>) -> Stub {
    start_with(replies, auth, None)
}

/// As [`start`], over TLS with this server configuration (`https://127.0.0.1:PORT`).
pub fn start_tls(
    replies: HashMap<String, Reply>,
    auth: Option<String>,
    tls: Arc<tokio_rustls::rustls::ServerConfig>,
) -> Stub {
    start_with(replies, auth, Some(tls))
}

fn start_with(
    replies: HashMap<String, Reply>,
    auth: Option<String>,
    tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
) -> Stub {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let scheme = if tls.is_some() { "https" } else { "http" };
    let url = format!("{scheme}://{}", listener.local_addr().unwrap());
    let asked = Arc::new(Mutex::new(Vec::new()));
    let seen = asked.clone();
    let replies = Arc::new(Mutex::new(replies));
    let handle = replies.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            // No wait on a client is longer than this (a silent reply's included).
            let _ = stream.set_read_timeout(Some(SILENT_FOR));
            let replies = replies.clone();
            let seen = seen.clone();
            let auth = auth.clone();
            let tls = tls.clone();
            std::thread::spawn(move || match tls {
                None => serve(stream, &replies, &seen, auth.as_deref()),
                Some(config) => {
                    let Ok(conn) = tokio_rustls::rustls::ServerConnection::new(config) else {
                        return;
                    };
                    let tls = tokio_rustls::rustls::StreamOwned::new(conn, stream);
                    serve(tls, &replies, &seen, auth.as_deref())
                }
            });
        }
    });
    Stub {
        url,
        asked,
        replies: handle,
    }
}

/// Holds a connection without answering until the client closes it or [`SILENT_FOR`] passes.
fn hold<S: std::io::Read>(stream: &mut S) {
    let until = std::time::Instant::now() + SILENT_FOR;
    let mut buf = [0u8; 256];
    while std::time::Instant::now() < until {
        match stream.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            // A read timeout (set by the caller) or an error: look at the clock again, or stop.
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return,
        }
    }
}

fn serve<S: std::io::Read + Write>(
    stream: S,
    replies: &Mutex<HashMap<String, Reply>>,
    seen: &Mutex<Vec<String>>,
    auth: Option<&str>,
) {
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let target = line.split_whitespace().nth(1).unwrap_or("").to_string();
        let mut authorization = None;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                if k.eq_ignore_ascii_case("authorization") {
                    authorization = Some(v.trim().to_string());
                }
            }
        }
        let query = target
            .split_once('?')
            .and_then(|(_, q)| {
                q.split('&')
                    .find_map(|kv| kv.strip_prefix("query=").map(decode))
            })
            .unwrap_or_default();
        seen.lock().unwrap().push(query.clone());
        let reply = if auth.is_some() && authorization.as_deref() != auth {
            Reply::Status(401, "Unauthorized".into())
        } else {
            let replies = replies.lock().unwrap();
            match split_selector(&query) {
                Some((family, instances)) => match replies.get(family) {
                    Some(Reply::Body(b)) => Reply::Body(only_instances(b, &instances)),
                    Some(other) => other.clone(),
                    None => Reply::Body(vector(1000.0, &[])),
                },
                None => replies
                    .get(&query)
                    .cloned()
                    .unwrap_or_else(|| Reply::Body(vector(1000.0, &[]))),
            }
        };
        let (status, body) = match reply {
            Reply::Body(b) => (200, b),
            Reply::Status(s, b) => (s, b),
            Reply::Slow(d) => {
                std::thread::sleep(d);
                (200, vector(1000.0, &[]))
            }
            Reply::Silent => {
                hold(reader.get_mut());
                return;
            }
        };
        let w = reader.get_mut();
        let head = format!(
            "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        if w.write_all(head.as_bytes()).is_err()
            || w.write_all(body.as_bytes()).is_err()
            || w.flush().is_err()
        {
            return;
        }
    }
}
