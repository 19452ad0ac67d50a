//! `gpuscope export` as an operator of a fleet expects: gzip, `/health`, a dead sampler turning
//! `/health` and `/metrics` to 503, and TLS and basic auth from `--web.config.file` (with a
//! certificate the test makes and a rustls client that trusts only it).

use crate::support::export_support;

use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use export_support::{basic, connect_from, parse, request, Exporter, RawResponse};
use tokio_rustls::rustls;

fn get(exp: &Exporter, path: &str, headers: &[(&str, &str)]) -> RawResponse {
    request(&mut connect_from("127.0.0.1", &exp.addr), path, headers)
}

#[test]
fn the_gzip_answer_is_the_plain_one_compressed() {
    let exp = Exporter::start(&["--demo", "--frame", "2", "--processes"]);
    for accept in [None, Some("application/openmetrics-text;version=1.0.0")] {
        let mut s = connect_from("127.0.0.1", &exp.addr);
        let mut h = Vec::new();
        if let Some(a) = accept {
            h.push(("Accept", a));
        }
        let plain = request(&mut s, "/metrics", &h);
        h.push(("Accept-Encoding", "gzip"));
        let gzipped = request(&mut s, "/metrics", &h);
        assert_eq!(plain.status, 200);
        assert_eq!(gzipped.status, 200);
        assert!(!plain.headers.contains_key("content-encoding"));
        assert_eq!(gzipped.headers["content-encoding"], "gzip");
        assert_eq!(gzipped.headers["vary"], "Accept-Encoding");
        assert_eq!(
            plain.headers["content-type"],
            gzipped.headers["content-type"]
        );
        // The frame is pinned and both answers come from the same sample or from two samples
        // of the same frame: only the exporter's own timing lines may differ.
        let strip = |t: String| -> Vec<String> {
            t.lines()
                .filter(|l| !l.starts_with("gpuscope_exporter_"))
                .map(str::to_string)
                .collect()
        };
        let unzipped = gzipped.text();
        assert_eq!(strip(plain.text()), strip(unzipped));
        assert!(
            gzipped.body.len() * 5 < plain.body.len(),
            "gzip: {} bytes, plain: {} bytes",
            gzipped.body.len(),
            plain.body.len()
        );
    }
    // Asking for gzip with quality 0 is asking for none.
    let r = get(&exp, "/metrics", &[("Accept-Encoding", "gzip;q=0")]);
    assert!(!r.headers.contains_key("content-encoding"));
}

#[test]
fn health_is_ok_while_the_sampler_runs() {
    // A 1 s interval: stale only after 3 s, which a slow debug-build sample on a loaded machine
    // does not reach.
    let exp = Exporter::start(&["--demo", "--interval", "1s"]);
    for _ in 0..3 {
        let r = get(&exp, "/health", &[]);
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.text(), "ok\n");
        std::thread::sleep(Duration::from_millis(150));
    }
}

#[test]
fn a_stopped_sampler_turns_health_and_metrics_to_503_within_three_intervals() {
    // Regression: a dead sampler thread left /metrics answering 200 with its last sample for
    // ever. The hidden flag makes the sampler thread panic after its 3rd sample.
    let exp = Exporter::start(&[
        "--demo",
        "--interval",
        "500ms",
        "--test-stop-sampler-after",
        "3",
    ]);
    assert_eq!(get(&exp, "/metrics", &[]).status, 200);
    // Samples 2 and 3 come at 500 and 1000 ms; the thread dies after the 3rd. (On a loaded
    // machine a slow sample may make the exporter stale, 503 too, before that: wait for the
    // sampler's death itself.)
    let started = Instant::now();
    let health = loop {
        let r = get(&exp, "/health", &[]);
        if r.text().contains("the sampler thread panicked")
            || started.elapsed() > Duration::from_secs(10)
        {
            break r;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(health.status, 503, "{}", health.text());
    assert!(
        health.text().contains("the sampler thread panicked"),
        "{}",
        health.text()
    );
    // Caught when the thread dies, not three intervals later: well within 3 intervals of the
    // last sample (the bound is loose for a loaded machine).
    let took = started.elapsed();
    assert!(took < Duration::from_millis(1000 + 1500 + 2000), "{took:?}");
    let metrics = get(&exp, "/metrics", &[]);
    assert_eq!(metrics.status, 503);
    assert_eq!(metrics.text(), health.text());
    // And the exporter said so on stderr, once.
    let mut said = Vec::new();
    while let Ok(line) = exp.stderr.recv_timeout(Duration::from_millis(1500)) {
        if line.contains("unhealthy") && line.contains("panicked") {
            said.push(line);
        }
    }
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(said[0].contains("503"), "{said:?}");
}

/// A temporary directory removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "gpuscope-{name}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A self-signed certificate for `localhost` and 127.0.0.1 in `dir`: (cert PEM, key PEM).
fn make_certificate() -> (String, String) {
    let key = rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
        .expect("a certificate");
    (key.cert.pem(), key.signing_key.serialize_pem())
}

fn tls_client(cert_pem: &str) -> Arc<rustls::ClientConfig> {
    use rustls::pki_types::pem::PemObject as _;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(cert_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

fn tls_connect(
    config: &Arc<rustls::ClientConfig>,
    addr: &str,
) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(config.clone(), name).unwrap();
    rustls::StreamOwned::new(conn, connect_from("127.0.0.1", addr))
}

#[test]
fn tls_with_basic_auth_serves_the_right_password_and_refuses_a_wrong_one() {
    let dir = TempDir::new("tls");
    let (cert, key) = make_certificate();
    dir.write("server.crt", &cert);
    dir.write("server.key", &key);
    // Cost 4, the least bcrypt allows, keeps the test quick; the server checks any cost.
    let hash = bcrypt::hash("s3cret", 4).unwrap();
    // Relative paths are relative to the file's directory, as in the exporter-toolkit.
    let config = dir.write(
        "web.yml",
        &format!(
            "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n\
             basic_auth_users:\n  prometheus: {hash}\n"
        ),
    );
    let exp = Exporter::start(&[
        "--demo",
        "--frame",
        "1",
        "--web.config.file",
        config.to_str().unwrap(),
    ]);
    let client = tls_client(&cert);
    let mut s = tls_connect(&client, &exp.addr);
    let right = basic("prometheus", "s3cret");
    let wrong = basic("prometheus", "guess");
    let stranger = basic("mallory", "s3cret");

    let r = request(&mut s, "/metrics", &[]);
    assert_eq!(r.status, 401);
    assert!(r.headers["www-authenticate"].starts_with("Basic"));
    for bad in [&wrong, &stranger] {
        let r = request(&mut s, "/metrics", &[("Authorization", bad)]);
        assert_eq!(r.status, 401, "{bad}");
    }
    let r = request(
        &mut s,
        "/metrics",
        &[("Authorization", &right), ("Accept-Encoding", "gzip")],
    );
    assert_eq!(r.status, 200);
    let m = parse(&r.text());
    assert_eq!(m.find("gpuscope_device_up", &[]).len(), 8);
    // The second time the credentials are remembered; a wrong password still is not.
    assert_eq!(
        request(&mut s, "/health", &[("Authorization", &right)]).status,
        200
    );
    assert_eq!(
        request(&mut s, "/health", &[("Authorization", &wrong)]).status,
        401
    );

    // Plain HTTP on the TLS port gets no metrics.
    let mut plain = connect_from("127.0.0.1", &exp.addr);
    let _ = std::io::Write::write_all(
        &mut plain,
        format!("GET /metrics HTTP/1.1\r\nAuthorization: {right}\r\n\r\n").as_bytes(),
    );
    let mut raw = Vec::new();
    let _ = std::io::Read::read_to_end(&mut plain, &mut raw);
    assert!(!raw.starts_with(b"HTTP/1.1 200"));

    // A client that trusts another certificate refuses the server.
    let (other, _) = make_certificate();
    let mut s = tls_connect(&tls_client(&other), &exp.addr);
    let refused = std::io::Write::write_all(&mut s, b"GET / HTTP/1.1\r\n\r\n")
        .and_then(|()| std::io::Write::flush(&mut s));
    assert!(refused.is_err());
}

#[test]
fn a_bad_web_config_is_refused_at_start_naming_the_file_and_the_key() {
    let dir = TempDir::new("badweb");
    let (cert, key) = make_certificate();
    let cert_path = dir.write("server.crt", &cert);
    dir.write("server.key", &key);
    let cases = [
        (
            "unknown.yml",
            "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_ca_file: ca.crt\n".to_string(),
            "client_ca_file",
        ),
        (
            "missing.yml",
            "tls_server_config:\n  cert_file: server.crt\n".to_string(),
            "key_file",
        ),
        (
            "nofile.yml",
            "tls_server_config:\n  cert_file: nowhere.crt\n  key_file: server.key\n".to_string(),
            "tls_server_config.cert_file",
        ),
        (
            "badkey.yml",
            format!(
                "tls_server_config:\n  cert_file: server.crt\n  key_file: {}\n",
                cert_path.display()
            ),
            "tls_server_config.key_file",
        ),
        (
            "badhash.yml",
            "basic_auth_users:\n  alice: plaintext\n".to_string(),
            "basic_auth_users.alice",
        ),
        ("notyaml.yml", "tls_server_config: [".to_string(), "notyaml.yml"),
    ];
    for (name, text, key) in cases {
        let path = dir.write(name, &text);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_gpuscope"))
            .args(["export", "--demo", "--listen", "127.0.0.1:0"])
            .arg("--web.config.file")
            .arg(&path)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert!(
            stderr.contains(&*path.to_string_lossy()),
            "{name}: {stderr}"
        );
        assert!(stderr.contains(key), "{name}: {stderr}");
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gpuscope"))
        .args([
            "export",
            "--demo",
            "--web.config.file",
            "/nonexistent/web.yml",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
