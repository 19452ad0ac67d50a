//! `gpuscope snapshot --prometheus` and `select --prometheus` end to end, against a stub
//! Prometheus (a std TcpListener replaying recorded query answers): values, hosts that are
//! down or stale, one query per family, partial answers, timeouts, auth.

use crate::support::cli::exited;
use crate::support::fleet_support;

use std::collections::HashMap;
use std::process::{Command, Output};
use std::time::Duration;

use fleet_support::{hosts, start, vector, Reply, Stub, SAMPLE_TIME_QUERY};
use serde_json::{json, Value};

const T: f64 = 1000.0;
const GIB: u64 = 1 << 30;

fn labels(host: &str, instance: &str, index: &str, extra: Value) -> Value {
    let mut l = json!({
        "instance": instance, "job": "gpu", "hostname": host, "index": index,
        "uuid": format!("GPU-{host}-{index}"), "name": "NVIDIA H100 80GB HBM3",
    });
    if let (Some(l), Some(e)) = (l.as_object_mut(), extra.as_object()) {
        l.extend(e.clone());
    }
    l
}

/// (host, instance, device index, free GiB, utilization ratio)
type Dev = (&'static str, &'static str, &'static str, u64, &'static str);

const DEVICES: &[Dev] = &[
    ("node-a", "10.0.0.1:9445", "0", 10, "0.9"),
    ("node-a", "10.0.0.1:9445", "1", 60, "0.05"),
    ("node-b", "10.0.0.2:9445", "0", 70, "0"),
    ("node-b", "10.0.0.2:9445", "1", 30, "0.5"),
    // A host whose exporter serves an old sample (its sampler stopped).
    ("node-d", "10.0.0.4:9445", "0", 79, "0"),
];

/// The answers of the two host queries at [`T`], node-a's exporter's latest sample at
/// `node_a`: node-b's 1 s old, node-c's 100 s (and down), node-d's 60 s.
fn host_answers(r: &mut HashMap<String, Reply>, node_a: &str) {
    hosts(
        r,
        T,
        &[
            ("node-a", "10.0.0.1:9445", node_a, "1"),
            ("node-b", "10.0.0.2:9445", "999", "1"),
            ("node-c", "10.0.0.3:9445", "900", "0"),
            ("node-d", "10.0.0.4:9445", "940", "1"),
        ],
        &[
            // Another job's target: not a gpuscope host.
            ("localhost:9090", "prometheus", "1"),
            // A target of the gpuscope job that never served a sample: listed, down.
            ("10.0.0.5:9445", "gpu", "0"),
        ],
    );
}

/// The recorded answers of a fleet of four hosts: node-a and node-b up, node-c down, node-d
/// stale (its last sample is 60 s old).
fn replies() -> HashMap<String, Reply> {
    let mut r = HashMap::new();
    host_answers(&mut r, "999.5");
    let family = |f: &dyn Fn(&Dev) -> String| {
        let series: Vec<(Value, String)> = DEVICES
            .iter()
            .map(|d| (labels(d.0, d.1, d.2, json!({})), f(d)))
            .collect();
        Reply::Body(vector(T, &series))
    };
    r.insert(
        "gpuscope_device_memory_total_bytes".into(),
        family(&|_| (80 * GIB).to_string()),
    );
    r.insert(
        "gpuscope_device_memory_free_bytes".into(),
        family(&|d| (d.3 * GIB).to_string()),
    );
    r.insert(
        "gpuscope_device_memory_used_bytes".into(),
        family(&|d| ((80 - d.3) * GIB).to_string()),
    );
    r.insert(
        "gpuscope_device_utilization_ratio".into(),
        family(&|d| d.4.to_string()),
    );
    r.insert("gpuscope_device_up".into(), family(&|_| "1".into()));
    r.insert(
        "gpuscope_device_temperature_celsius".into(),
        family(&|_| "41".into()),
    );
    r.insert(
        "gpuscope_device_power_usage_watts".into(),
        family(&|_| "123.456".into()),
    );
    r.insert(
        "gpuscope_process_gpu_memory_bytes".into(),
        Reply::Body(vector(
            T,
            &[
                (
                    labels(
                        "node-a",
                        "10.0.0.1:9445",
                        "0",
                        json!({"pid": "4242", "username": "alice", "command": "python train.py"}),
                    ),
                    (20 * GIB).to_string(),
                ),
                (
                    labels(
                        "node-b",
                        "10.0.0.2:9445",
                        "1",
                        json!({"pid": "77", "username": "bob"}),
                    ),
                    (50 * GIB).to_string(),
                ),
            ],
        )),
    );
    r
}

fn gpuscope(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpuscope"));
    cmd.args(args)
        .env_remove("GPUSCOPE_FIXTURE")
        .env_remove("GPUSCOPE_PROMETHEUS_PASSWORD")
        .env("NO_COLOR", "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("gpuscope runs")
}

fn ok(out: &Output) -> String {
    exited(0, out)
}

/// Stdout of a fleet snapshot that showed something: exit 0 when every host is up, 3 when
/// some are down or stale (docs/exit-codes.md).
fn shown(out: &Output) -> String {
    assert!(
        matches!(out.status.code(), Some(0 | 3)),
        "exit {:?}, stderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// `gpuscope COMMAND --prometheus <the stub's URL>` with `extra` arguments and environment.
fn on_stub(stub: &Stub, command: &str, extra: &[&str], env: &[(&str, &str)]) -> Output {
    let mut args = vec![command, "--prometheus", &stub.url];
    args.extend_from_slice(extra);
    gpuscope(&args, env)
}

/// Prometheus refuses the temperature family's query: 503, "too many queries".
fn fail_temperatures(r: &mut HashMap<String, Reply>) {
    r.insert(
        "gpuscope_device_temperature_celsius".into(),
        Reply::Status(
            503,
            r#"{"status":"error","errorType":"unavailable","error":"too many queries"}"#.into(),
        ),
    );
}

fn fleet_json(stub: &Stub, extra: &[&str]) -> Value {
    let args = [&["--json"], extra].concat();
    serde_json::from_str(&shown(&on_stub(stub, "snapshot", &args, &[]))).unwrap()
}

fn host<'a>(fleet: &'a Value, name: &str) -> &'a Value {
    fleet["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["host"] == name)
        .unwrap_or_else(|| panic!("host {name} in {fleet:#}"))
}

#[test]
fn snapshot_lists_every_device_of_every_host_with_its_values() {
    let stub = start(replies(), None);
    let fleet = fleet_json(&stub, &[]);
    assert_eq!(fleet["schema"], "gpuscope.fleet/1");
    let a = host(&fleet, "node-a");
    assert_eq!(a["state"], "up");
    assert_eq!(a["instance"], "10.0.0.1:9445");
    assert_eq!(a["sample_age_seconds"], 0.5);
    let d0 = &a["devices"][0];
    assert_eq!(d0["id"], "0");
    assert_eq!(d0["uuid"], "GPU-node-a-0");
    assert_eq!(d0["memory_free_bytes"], 10 * GIB);
    assert_eq!(d0["memory_used_bytes"], 70 * GIB);
    assert_eq!(d0["memory_total_bytes"], 80 * GIB);
    assert_eq!(d0["gpu_utilization_percent"], 90);
    assert_eq!(d0["temperature_celsius"], 41);
    assert_eq!(d0["power_usage_watts"], 123.456);
    assert_eq!(d0["fan_speed_percent"], Value::Null);
    assert_eq!(d0["up"], true);
    assert_eq!(
        d0["processes"],
        json!([{"pid": 4242, "user": "alice", "command": "python train.py",
                "pod": null, "namespace": null, "container": null,
                "used_memory_bytes": 20 * GIB, "sm_utilization_percent": null}])
    );
    assert_eq!(
        host(&fleet, "node-b")["devices"].as_array().unwrap().len(),
        2
    );
    // The other job's target is not a host.
    assert!(fleet["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .all(|h| h["instance"] != "localhost:9090"));
}

#[test]
fn down_and_stale_hosts_are_shown_as_such_never_dropped() {
    let stub = start(replies(), None);
    let fleet = fleet_json(&stub, &[]);
    let c = host(&fleet, "node-c");
    assert_eq!(c["state"], "down");
    assert_eq!(c["devices"], json!([]));
    assert_eq!(c["sample_age_seconds"], 100.0);
    // Never served a sample, down: named by its instance.
    assert_eq!(host(&fleet, "10.0.0.5:9445")["state"], "down");
    let d = host(&fleet, "node-d");
    assert_eq!(d["state"], "stale");
    assert_eq!(d["sample_age_seconds"], 60.0);
    // With a longer limit the same host is up.
    let fleet = fleet_json(&stub, &["--stale-after", "2m"]);
    assert_eq!(host(&fleet, "node-d")["state"], "up");

    let text = exited(3, &on_stub(&stub, "snapshot", &[], &[]));
    assert!(
        text.contains("5 hosts  5 devices  2 down  1 stale"),
        "{text}"
    );
    let line = text.lines().find(|l| l.starts_with("node-c ")).unwrap();
    assert!(line.contains("DOWN"), "{line}");
    let line = text.lines().find(|l| l.starts_with("node-d ")).unwrap();
    assert!(line.contains("STALE 60s"), "{line}");
}

#[test]
fn one_query_per_family_per_refresh_whatever_the_number_of_hosts() {
    let stub = start(replies(), None);
    fleet_json(&stub, &[]);
    let asked = stub.asked.lock().unwrap().clone();
    // 2 host queries, 11 device families, 2 process families.
    assert_eq!(asked.len(), 15, "{asked:#?}");
    let distinct: std::collections::BTreeSet<&String> = asked.iter().collect();
    assert_eq!(
        distinct.len(),
        asked.len(),
        "a query asked twice: {asked:#?}"
    );
    assert!(
        asked.iter().all(|q| !q.contains("node-")),
        "no per-host query: {asked:#?}"
    );
}

/// The fleet (`snapshot --json` with `extra`) over a stub answering `r`: node-a's first device
/// has no `field` but still its free memory, and there are `count` errors, returned.
fn errors_of_a_missing_family(
    r: HashMap<String, Reply>,
    extra: &[&str],
    field: &str,
    count: usize,
) -> Vec<Value> {
    let stub = start(r, None);
    let fleet = fleet_json(&stub, extra);
    let d0 = &host(&fleet, "node-a")["devices"][0];
    assert_eq!(d0[field], Value::Null);
    assert_eq!(d0["memory_free_bytes"], 10 * GIB);
    let errors = fleet["errors"].as_array().unwrap();
    assert_eq!(errors.len(), count, "{errors:#?}");
    errors.clone()
}

#[test]
fn a_failing_family_leaves_its_values_out_and_says_so_the_rest_still_shows() {
    let mut r = replies();
    fail_temperatures(&mut r);
    r.insert(
        "gpuscope_device_utilization_ratio".into(),
        Reply::Body(
            r#"{"status":"success","warnings":["remote storage is slow"],"data":{"resultType":"vector","result":[]}}"#
                .into(),
        ),
    );
    let errors = errors_of_a_missing_family(r, &[], "temperature_celsius", 2);
    assert_eq!(errors[0]["query"], "gpuscope_device_utilization_ratio");
    assert_eq!(errors[0]["error"], "partial answer: remote storage is slow");
    assert_eq!(errors[1]["query"], "gpuscope_device_temperature_celsius");
    assert!(errors[1]["error"]
        .as_str()
        .unwrap()
        .contains("too many queries"));
}

#[test]
fn a_slow_family_spends_the_refresh_time_and_what_came_before_still_shows() {
    // --prometheus-timeout bounds the whole refresh: the slow family is cut at the deadline,
    // the families before it show, the four after it are not asked.
    let mut r = replies();
    r.insert(
        "gpuscope_device_power_usage_watts".into(),
        Reply::Slow(Duration::from_secs(30)),
    );
    let args = ["--prometheus-timeout", "4s"];
    let errors = errors_of_a_missing_family(r, &args, "power_usage_watts", 5);
    assert_eq!(errors[0]["query"], "gpuscope_device_power_usage_watts");
    let error = errors[0]["error"].as_str().unwrap();
    assert!(error.contains("no answer within"), "{error}");
    let not_asked: Vec<&str> = errors[1..]
        .iter()
        .map(|e| e["query"].as_str().unwrap())
        .collect();
    assert_eq!(
        not_asked,
        [
            "gpuscope_device_power_limit_watts",
            "gpuscope_device_info",
            "gpuscope_process_gpu_memory_bytes",
            "gpuscope_process_gpu_sm_utilization_ratio"
        ]
    );
    for e in &errors[1..] {
        let error = e["error"].as_str().unwrap();
        assert!(
            error.starts_with("not asked: the refresh's time limit"),
            "{error}"
        );
    }
}

#[test]
fn prometheus_unreachable_is_an_error_not_an_empty_fleet() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let out = gpuscope(&["snapshot", "--prometheus", &url], &[]);
    assert_eq!(out.status.code(), Some(4));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("answered no query"), "{err}");
    let out = gpuscope(&["snapshot", "--prometheus", "ftp://x"], &[]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn sort_and_filter() {
    let stub = start(replies(), None);
    let text = exited(
        3,
        &on_stub(
            &stub,
            "snapshot",
            &["--sort", "free-memory", "--filter", "state:up"],
            &[],
        ),
    );
    let rows: Vec<String> = text
        .lines()
        .skip(2)
        .take_while(|l| !l.is_empty())
        .map(|l| {
            let mut w = l.split_whitespace();
            format!("{}:{}", w.next().unwrap(), w.next().unwrap())
        })
        .collect();
    assert_eq!(
        rows,
        ["node-b:0", "node-a:1", "node-b:1", "node-a:0"],
        "{text}"
    );
    let fleet = fleet_json(&stub, &["--filter", "host:node-b"]);
    let names = export_support::cli::each(&fleet["hosts"], "host");
    assert_eq!(names, [&json!("node-b")]);
    let fleet = fleet_json(&stub, &["--filter", "user:alice"]);
    assert_eq!(
        fleet["hosts"].as_array().unwrap().len(),
        4,
        "node-a, the two down hosts and the stale one"
    );
    assert_eq!(
        host(&fleet, "node-a")["devices"].as_array().unwrap().len(),
        1
    );
    let out = on_stub(&stub, "snapshot", &["--filter", "pid:x"], &[]);
    assert_eq!(out.status.code(), Some(2));
    let out = gpuscope(&["snapshot", "--demo", "--sort", "gpu"], &[]);
    assert_eq!(out.status.code(), Some(2), "--sort needs --prometheus");
}

#[test]
fn select_picks_by_free_memory_across_the_hosts_that_are_up() {
    let stub = start(replies(), None);
    let out = on_stub(
        &stub,
        "select",
        &["-n", "2", "-f", "20GiB", "--explain"],
        &[],
    );
    assert_eq!(ok(&out), "node-b:0,node-a:1\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("node-c: left out, its exporter is down"),
        "{err}"
    );
    assert!(
        err.contains("node-d: left out, its exporter is stale"),
        "{err}"
    );
    let line = err.lines().find(|l| l.starts_with("node-a:0")).unwrap();
    assert!(line.contains("rejected: min-free-memory"), "{line}");
    let out = on_stub(
        &stub,
        "select",
        &["-n", "2", "-f", "20GiB", "-O", "uuid"],
        &[],
    );
    assert_eq!(ok(&out), "GPU-node-b-0,GPU-node-a-1\n");
    // bob's 50 GiB on node-b:1 counted as free: 80 GiB free, the best device.
    let out = on_stub(
        &stub,
        "select",
        &["-n", "1", "--account-as-free", "bob"],
        &[],
    );
    assert_eq!(ok(&out), "node-b:1\n");
    let out = on_stub(&stub, "select", &["--min-count", "9"], &[]);
    assert_eq!(out.status.code(), Some(4), "fewer than --min-count");
}

#[test]
fn basic_auth_from_a_password_file_or_the_environment() {
    // "ops:s3cret" in base64.
    let stub = start(replies(), Some("Basic b3BzOnMzY3JldA==".into()));
    let dir = std::env::temp_dir().join(format!("gpuscope-fleet-auth-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("password");
    std::fs::write(&file, "s3cret\n").unwrap();
    let out = on_stub(
        &stub,
        "snapshot",
        &[
            "--json",
            "--prometheus-user",
            "ops",
            "--prometheus-password-file",
            file.to_str().unwrap(),
        ],
        &[],
    );
    assert!(exited(3, &out).contains("node-a"));
    // The user `ops` with the password in the environment, or none.
    let as_ops = |password: Option<&str>| {
        let env: Vec<(&str, &str)> = password
            .map(|p| ("GPUSCOPE_PROMETHEUS_PASSWORD", p))
            .into_iter()
            .collect();
        on_stub(&stub, "snapshot", &["--prometheus-user", "ops"], &env)
    };
    assert!(exited(3, &as_ops(Some("s3cret"))).contains("node-a"));
    let out = as_ops(Some("wrong"));
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stderr).contains("HTTP 401"));
    let out = as_ops(None);
    assert_eq!(out.status.code(), Some(2), "a user without a password");
    let out = on_stub(
        &stub,
        "snapshot",
        &["--prometheus-ca", file.to_str().unwrap()],
        &[],
    );
    assert_eq!(out.status.code(), Some(2), "a CA file with no certificate");
    let _ = std::fs::remove_dir_all(&dir);
}

use crate::support::export_support;

fn fixture(stem: &str) -> String {
    format!("{}/../../fixtures/{stem}.json", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn remote_reads_exporters_directly_and_an_unreachable_one_is_down() {
    let a = export_support::Exporter::start(&[
        "--fixture",
        &fixture("h100-sxm-8gpu"),
        "--frame",
        "5",
        "--hostname",
        "lab-a",
        "--processes",
    ]);
    let b = export_support::Exporter::start(&[
        "--fixture",
        &fixture("h100-mig"),
        "--frame",
        "3",
        "--hostname",
        "lab-b",
    ]);
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let urls = [
        format!("http://{}", a.addr),
        format!("http://{}", b.addr),
        format!("http://{dead}"),
    ];
    let out = gpuscope(
        &[
            "snapshot", "--json", "--remote", &urls[0], &urls[1], &urls[2],
        ],
        &[],
    );
    let fleet: Value = serde_json::from_str(&exited(3, &out)).unwrap();
    let fx: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("h100-sxm-8gpu")).unwrap()).unwrap();
    let lab_a = host(&fleet, "lab-a");
    assert_eq!(lab_a["state"], "up");
    let devices = lab_a["devices"].as_array().unwrap();
    assert_eq!(devices.len(), fx["devices"].as_object().unwrap().len());
    for d in devices {
        let id = d["id"].as_str().unwrap();
        assert_eq!(d["uuid"], fx["devices"][id]["uuid"]["ok"], "{id}");
        let mem = &fx["frames"][5]["devices"][id]["memory_info"]["ok"];
        assert_eq!(d["memory_used_bytes"], mem["used"], "{id}");
        assert_eq!(d["memory_free_bytes"], mem["free"], "{id}");
    }
    assert!(devices
        .iter()
        .any(|d| !d["processes"].as_array().unwrap().is_empty()));
    let lab_b = host(&fleet, "lab-b");
    assert!(lab_b["devices"]
        .as_array()
        .unwrap()
        .iter()
        .any(|d| d["mig_index"] == 1));
    let down = host(&fleet, &format!("{}/metrics", urls[2]));
    assert_eq!(down["state"], "down");
    assert_eq!(fleet["errors"].as_array().unwrap().len(), 1);
    // Partial (exit 3), and stderr names the host that is missing.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("1 of 3 hosts not up: {}/metrics (down)", urls[2])),
        "{err}"
    );

    // Every host up: 0. Every host down: 4, as a Prometheus that does not answer.
    let out = gpuscope(&["snapshot", "--remote", &urls[0], &urls[1]], &[]);
    assert!(exited(0, &out).contains("lab-a"));
    for only_dead in [
        &["snapshot", "--remote", &urls[2]][..],
        &["snapshot", "--prometheus", &urls[2]][..],
        &["select", "--prometheus", &urls[2]][..],
    ] {
        let out = gpuscope(only_dead, &[]);
        assert_eq!(
            out.status.code(),
            Some(4),
            "{only_dead:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    let out = gpuscope(
        &["select", "--remote", &urls[0], "-n", "1", "-O", "uuid"],
        &[],
    );
    let uuid = ok(&out);
    assert!(uuid.starts_with("GPU-"), "{uuid}");
}

/// A private CA and what it signed: a server certificate for 127.0.0.1 and a client
/// certificate, in `dir` as `ca.pem`, `server.pem`/`server.key`, `client.pem`/`client.key`.
fn make_pki(dir: &std::path::Path) -> Pki {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "gpuscope test CA");
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let leaf = |name: &str| {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec![name.to_string()])
            .unwrap()
            .signed_by(&key, &ca)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    };
    let (server, server_key) = leaf("127.0.0.1");
    let (client, client_key) = leaf("gpuscope-client");
    std::fs::create_dir_all(dir).unwrap();
    for (name, text) in [
        ("ca.pem", ca.pem()),
        ("server.pem", server.clone()),
        ("server.key", server_key.clone()),
        ("client.pem", client),
        ("client.key", client_key),
    ] {
        std::fs::write(dir.join(name), text).unwrap();
    }
    Pki {
        ca: ca.pem(),
        server,
        server_key,
    }
}

struct Pki {
    ca: String,
    server: String,
    server_key: String,
}

/// A TLS server configuration that presents the server certificate and requires a client
/// certificate signed by the CA.
fn mutual_tls(pki: &Pki) -> std::sync::Arc<tokio_rustls::rustls::ServerConfig> {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use std::sync::Arc;
    use tokio_rustls::rustls;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(pki.ca.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .unwrap();
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pki.server.as_bytes())
        .map(|c| c.unwrap())
        .collect();
    let key = PrivateKeyDer::from_pem_slice(pki.server_key.as_bytes()).unwrap();
    Arc::new(
        rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, key)
            .unwrap(),
    )
}

#[test]
fn prometheus_over_mutual_tls_with_basic_auth() {
    let dir = std::env::temp_dir().join(format!("gpuscope-fleet-mtls-{}", std::process::id()));
    let pki = make_pki(&dir);
    std::fs::write(dir.join("pass"), "s3cret\n").unwrap();
    let stub = fleet_support::start_tls(
        replies(),
        Some(export_support::basic("ops", "s3cret")),
        mutual_tls(&pki),
    );
    let p = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let (ca, cert, key, pass) = (p("ca.pem"), p("client.pem"), p("client.key"), p("pass"));
    let tls = [
        "--prometheus-ca",
        ca.as_str(),
        "--prometheus-cert",
        cert.as_str(),
        "--prometheus-key",
        key.as_str(),
        "--prometheus-user",
        "ops",
        "--prometheus-password-file",
        pass.as_str(),
    ];
    // Everything right: the fleet's values.
    let fleet = fleet_json(&stub, &tls);
    let a = host(&fleet, "node-a");
    assert_eq!(a["state"], "up");
    assert_eq!(a["devices"][1]["memory_free_bytes"], 60 * GIB);
    // The viewer reads the same way: every host on its screen.
    let mut args = vec!["top", "--once", "--prometheus", &stub.url];
    args.extend_from_slice(&tls);
    let screen = ok(&gpuscope(&args, &[("COLUMNS", "160")]));
    for h in ["node-a", "node-b", "node-c", "node-d"] {
        assert!(
            screen.lines().any(|l| l.starts_with(h)),
            "{h} missing:\n{screen}"
        );
    }
    // The password from the environment instead of a file.
    let out = on_stub(
        &stub,
        "snapshot",
        &[
            "--prometheus-ca",
            &ca,
            "--prometheus-cert",
            &cert,
            "--prometheus-key",
            &key,
            "--prometheus-user",
            "ops",
        ],
        &[("GPUSCOPE_PROMETHEUS_PASSWORD", "s3cret")],
    );
    assert!(exited(3, &out).contains("node-a"));

    // Each missing piece is refused: no client certificate (the handshake fails), no CA (the
    // server's certificate is not trusted), a wrong password (401).
    let without = |skip: &[&str], env: &[(&str, &str)]| {
        let mut args = vec!["snapshot", "--prometheus", stub.url.as_str()];
        let mut i = 0;
        while i < tls.len() {
            if !skip.contains(&tls[i]) {
                args.extend_from_slice(&tls[i..i + 2]);
            }
            i += 2;
        }
        gpuscope(&args, env)
    };
    for (skip, why) in [
        (
            &["--prometheus-cert", "--prometheus-key"][..],
            "no client certificate",
        ),
        (&["--prometheus-ca"][..], "an untrusted server"),
    ] {
        let out = without(skip, &[]);
        assert_eq!(out.status.code(), Some(4), "{why}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("answered no query"), "{why}: {err}");
    }
    std::fs::write(dir.join("pass"), "guess\n").unwrap();
    let out = without(&[], &[]);
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stderr).contains("401"));
    // A key without a certificate, or a certificate file with no certificate, is a usage error.
    let out = on_stub(&stub, "snapshot", &["--prometheus-key", &key], &[]);
    assert_eq!(out.status.code(), Some(2));
    let out = on_stub(
        &stub,
        "snapshot",
        &["--prometheus-cert", &pass, "--prometheus-key", &key],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--prometheus-cert") && err.contains("pass"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn remote_exporters_over_tls_with_basic_auth() {
    let dir = std::env::temp_dir().join(format!("gpuscope-fleet-rtls-{}", std::process::id()));
    make_pki(&dir);
    // Cost 4, the least bcrypt allows, keeps the test quick.
    let hash = bcrypt::hash("s3cret", 4).unwrap();
    std::fs::write(
        dir.join("web.yml"),
        format!(
            "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n\
             basic_auth_users:\n  prometheus: {hash}\n"
        ),
    )
    .unwrap();
    std::fs::write(dir.join("pass"), "s3cret\n").unwrap();
    let p = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let exporter = export_support::Exporter::start(&[
        "--fixture",
        &fixture("h100-sxm-8gpu"),
        "--frame",
        "5",
        "--hostname",
        "lab-tls",
        "--web.config.file",
        &p("web.yml"),
    ]);
    let url = format!("https://{}", exporter.addr);
    let (ca, pass) = (p("ca.pem"), p("pass"));
    let auth = [
        "--prometheus-ca",
        &ca,
        "--prometheus-user",
        "prometheus",
        "--prometheus-password-file",
        &pass,
    ];
    let out = gpuscope(
        &[&["snapshot", "--json", "--remote", &url][..], &auth].concat(),
        &[],
    );
    let fleet: Value = serde_json::from_str(&ok(&out)).unwrap();
    let h = host(&fleet, "lab-tls");
    assert_eq!(h["state"], "up");
    assert_eq!(h["devices"].as_array().unwrap().len(), 8);
    // The viewer over the same exporter.
    let screen = ok(&gpuscope(
        &[&["top", "--once", "--remote", &url][..], &auth].concat(),
        &[("COLUMNS", "160")],
    ));
    assert!(screen.contains("1 host  8 devices  1 up"), "{screen}");
    // Without the password the exporter is down, and why is said.
    let out = gpuscope(
        &[
            "snapshot",
            "--json",
            "--remote",
            &url,
            "--prometheus-ca",
            &ca,
        ],
        &[],
    );
    let fleet: Value = serde_json::from_str(&exited(4, &out)).unwrap();
    assert_eq!(fleet["hosts"][0]["state"], "down");
    assert!(
        fleet["errors"][0]["error"]
            .as_str()
            .unwrap()
            .contains("401"),
        "{fleet}"
    );
    // Without the CA the exporter's certificate is not trusted.
    let out = gpuscope(
        &[
            "snapshot",
            "--json",
            "--remote",
            &url,
            "--prometheus-user",
            "prometheus",
            "--prometheus-password-file",
            &pass,
        ],
        &[],
    );
    let fleet: Value = serde_json::from_str(&exited(4, &out)).unwrap();
    assert_eq!(fleet["hosts"][0]["state"], "down");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `snapshot --prometheus --watch 0.3s --json`, its documents as they come: JSON Lines, each
/// line one whole document.
struct Watch {
    child: std::process::Child,
    docs: std::sync::mpsc::Receiver<Value>,
}

impl Watch {
    fn start(stub: &Stub) -> Watch {
        let mut child = Command::new(env!("CARGO_BIN_EXE_gpuscope"))
            .args([
                "snapshot",
                "--prometheus",
                &stub.url,
                "--json",
                "--watch",
                "0.3s",
            ])
            .env_remove("GPUSCOPE_PROMETHEUS_PASSWORD")
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, docs) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead as _;
            for line in std::io::BufReader::new(out).lines() {
                let Ok(line) = line else { return };
                let doc: Value = serde_json::from_str(&line).expect("each line is a JSON document");
                if tx.send(doc).is_err() {
                    return;
                }
            }
        });
        Watch { child, docs }
    }

    fn next(&self) -> Value {
        self.docs
            .recv_timeout(Duration::from_secs(15))
            .expect("a refresh within 15 s")
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_of(fleet: &Value, host_name: &str, index: usize) -> Value {
    host(fleet, host_name)["devices"][index]["memory_free_bytes"].clone()
}

#[test]
fn refreshes_ask_again_only_for_the_hosts_whose_sample_changed() {
    let stub = start(replies(), None);
    let watch = Watch::start(&stub);
    let first = watch.next();
    // The first refresh asks every family once. (By the time its document is read, the next
    // refresh, 0.3 s later, may have sent its first query: only the first 15 are the first's.)
    let asked_first: Vec<String> = stub.asked.lock().unwrap()[..15].to_vec();
    let distinct: std::collections::BTreeSet<&String> = asked_first.iter().collect();
    assert_eq!(
        distinct.len(),
        15,
        "the first refresh asks every family: {asked_first:?}"
    );
    // Nothing changed on node-a and node-b: the next refresh asks the sample times and `up`,
    // then every family for node-d only (stale: it is asked each time), and shows the same
    // values for all.
    let second = watch.next();
    let asked: Vec<String> = stub.asked.lock().unwrap()[15..30].to_vec();
    assert_eq!(asked[0], first_query());
    assert_eq!(asked[1], "up");
    for q in &asked[2..] {
        let (_, instances) =
            fleet_support::split_selector(q).unwrap_or_else(|| panic!("no selector: {q}"));
        assert_eq!(instances, ["10.0.0.4:9445"], "{q}");
    }
    assert_eq!(first["hosts"], second["hosts"]);

    // node-a's exporter serves a new sample with less free memory on GPU 0.
    {
        let mut r = stub.replies.lock().unwrap();
        host_answers(&mut r, "999.9");
        let series: Vec<(Value, String)> = DEVICES
            .iter()
            .map(|d| {
                let free = if (d.0, d.2) == ("node-a", "0") {
                    5
                } else {
                    d.3
                };
                (labels(d.0, d.1, d.2, json!({})), (free * GIB).to_string())
            })
            .collect();
        r.insert(
            "gpuscope_device_memory_free_bytes".into(),
            Reply::Body(vector(T, &series)),
        );
    }
    let changed = loop {
        let doc = watch.next();
        if free_of(&doc, "node-a", 0) == json!(5 * GIB) {
            break doc;
        }
    };
    // node-a's new values; node-b's kept; one selector naming node-a (and stale node-d).
    assert_eq!(free_of(&changed, "node-b", 1), free_of(&first, "node-b", 1));
    assert_eq!(free_of(&changed, "node-a", 1), free_of(&first, "node-a", 1));
    assert_eq!(
        host(&changed, "node-a")["devices"][0]["processes"][0]["pid"],
        4242
    );
    let asked = stub.asked.lock().unwrap().clone();
    let with_a = asked
        .iter()
        .filter_map(|q| fleet_support::split_selector(q))
        .find(|(_, i)| i.iter().any(|x| x == "10.0.0.1:9445"))
        .expect("a selector naming node-a");
    assert_eq!(with_a.1, ["10.0.0.1:9445", "10.0.0.4:9445"]);
}

fn first_query() -> String {
    SAMPLE_TIME_QUERY.to_string()
}

/// Issue 32, item 1: a Prometheus answering every query with tens of thousands of warnings
/// (a million made gpuscope use 2.16 GB; the figures are in docs/security.md). Each answer
/// keeps its first 16 warnings and says how many more there were; the values still show.
#[test]
fn warnings_bomb_is_truncated_with_a_note() {
    const WARNINGS: usize = 50_000;
    let mut r = replies();
    for q in fleet_queries() {
        let body = match r.get(&q) {
            Some(Reply::Body(b)) => b.clone(),
            _ => vector(T, &[]),
        };
        r.insert(
            q,
            Reply::Body(fleet_support::with_warnings(&body, WARNINGS)),
        );
    }
    let stub = start(r, None);
    let fleet = fleet_json(&stub, &[]);
    assert_eq!(
        host(&fleet, "node-a")["devices"][0]["memory_free_bytes"],
        10 * GIB
    );
    let errors = fleet["errors"].as_array().unwrap();
    for q in fleet_queries() {
        let of_q: Vec<&str> = errors
            .iter()
            .filter(|e| e["query"] == q.as_str())
            .map(|e| e["error"].as_str().unwrap())
            .collect();
        assert_eq!(of_q.len(), 17, "{q}: {:?}...", &of_q[..of_q.len().min(3)]);
        assert_eq!(
            of_q[16],
            format!(
                "partial answer: {} more warnings not kept (at most 16 an answer)",
                WARNINGS - 16
            ),
            "{q}"
        );
    }
    // The table says the same, in as many lines.
    let text = shown(&on_stub(&stub, "snapshot", &[], &[]));
    assert_eq!(
        text.lines().filter(|l| l.starts_with("error: ")).count(),
        15 * 17
    );
}

/// The 15 queries of a first refresh.
fn fleet_queries() -> Vec<String> {
    let stub = start(replies(), None);
    fleet_json(&stub, &[]);
    let asked = stub.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 15);
    asked
}

/// `gpuscope args...`, failing the test when it has not ended within `bound` (it is killed).
fn within(bound: Duration, args: &[&str]) -> (Output, Duration) {
    let started = std::time::Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_gpuscope"))
        .args(args)
        .env_remove("GPUSCOPE_FIXTURE")
        .env_remove("GPUSCOPE_PROMETHEUS_PASSWORD")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > bound {
            let _ = child.kill();
            let _ = child.wait();
            panic!("gpuscope {args:?} still running after {bound:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    (child.wait_with_output().unwrap(), started.elapsed())
}

/// Issue 32, item 2: a Prometheus that accepts and never answers. `--prometheus-timeout 1s`
/// bounds the whole read (it took 15 queries one after another, 15.4 s); the time it takes is
/// measured in docs/security.md, this test only bounds it generously.
#[test]
fn silent_prometheus_fails_within_one_timeout() {
    let mut r = HashMap::new();
    for q in fleet_queries() {
        r.insert(q, Reply::Silent);
    }
    let stub = start(r, None);
    let url = stub.url.clone();
    let args = ["select", "--prometheus", &url, "--prometheus-timeout", "1s"];
    let (out, _) = within(Duration::from_secs(10), &args);
    assert_eq!(out.status.code(), Some(4), "nothing to choose from");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("answered no query"), "{err}");
    assert!(err.contains("no answer within"), "{err}");
    let asked = stub.asked.lock().unwrap().len();
    assert!(
        asked <= 2,
        "no query is asked once the time is spent: {asked} asked"
    );
}

/// Two exporters (one GPU each) that report the same hostname, one of them with 1 byte free,
/// and a third host.
fn twins() -> HashMap<String, Reply> {
    let mut r = HashMap::new();
    hosts(
        &mut r,
        T,
        &[
            ("node-a", "10.0.0.1:9445", "999.5", "1"),
            ("node-a", "10.0.0.2:9445", "999.5", "1"),
            ("node-b", "10.0.0.3:9445", "999.5", "1"),
        ],
        &[],
    );
    let free = [
        ("node-a", "10.0.0.1:9445", 70 * GIB),
        ("node-a", "10.0.0.2:9445", 1),
        ("node-b", "10.0.0.3:9445", 30 * GIB),
    ];
    let family = |v: &dyn Fn(u64) -> u64| {
        let series: Vec<(Value, String)> = free
            .iter()
            .map(|&(h, i, f)| (labels(h, i, "0", json!({})), v(f).to_string()))
            .collect();
        Reply::Body(vector(T, &series))
    };
    r.insert("gpuscope_device_memory_free_bytes".into(), family(&|f| f));
    r.insert(
        "gpuscope_device_memory_total_bytes".into(),
        family(&|_| 80 * GIB),
    );
    r.insert("gpuscope_device_up".into(), family(&|_| 1));
    r
}

/// Issue 32, item 5: `select -n 2` printed `node-a:0,node-a:0` for two hosts reporting one
/// hostname. Hosts are told apart by instance, and named by it when their hostname is shared.
#[test]
fn hosts_sharing_a_hostname_are_told_apart_by_instance() {
    let stub = start(twins(), None);
    let out = on_stub(&stub, "select", &["-n", "3"], &[]);
    assert_eq!(
        ok(&out),
        "10.0.0.1:9445:0,node-b:0,10.0.0.2:9445:0\n",
        "each GPU spelled once"
    );
    let fleet = fleet_json(&stub, &[]);
    let hosts: Vec<(&str, &str)> = fleet["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["host"].as_str().unwrap(), h["instance"].as_str().unwrap()))
        .collect();
    assert_eq!(
        hosts,
        [
            ("node-a", "10.0.0.1:9445"),
            ("node-a", "10.0.0.2:9445"),
            ("node-b", "10.0.0.3:9445")
        ],
        "the JSON keeps each host's hostname and instance"
    );
    let text = ok(&on_stub(&stub, "snapshot", &[], &[]));
    let first_words: Vec<&str> = text
        .lines()
        .skip(2)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        first_words,
        ["10.0.0.1:9445", "10.0.0.2:9445", "node-b"],
        "{text}"
    );
}

/// Issue 32, item 6: a host whose exporter's sample time is in the future (beyond the clock-
/// skew allowance), not a number, infinite or missing was shown up. It is stale now, never
/// chosen, and the fleet's errors say why; a sample 2 s ahead is within the allowance.
#[test]
fn future_nan_or_missing_sample_times_are_never_up() {
    let mut r = HashMap::new();
    let named = [
        ("ok", "10.0.0.1:9445", "999"),
        ("skewed", "10.0.0.2:9445", "1002"),
        ("future", "10.0.0.3:9445", "4600"),
        ("nan", "10.0.0.4:9445", "NaN"),
        ("inf", "10.0.0.5:9445", "+Inf"),
    ];
    let sampled: Vec<(&str, &str, &str, &str)> =
        named.iter().map(|&(h, i, t)| (h, i, t, "1")).collect();
    hosts(&mut r, T, &sampled, &[("10.0.0.6:9445", "gpu", "1")]);
    // "missing" is scraped (up) and serves devices, but no sample time.
    let all = named
        .iter()
        .map(|&(h, i, _)| (h, i))
        .chain([("missing", "10.0.0.6:9445")]);
    let series: Vec<(Value, String)> = all
        .map(|(h, i)| (labels(h, i, "0", json!({})), (40 * GIB).to_string()))
        .collect();
    r.insert(
        "gpuscope_device_memory_free_bytes".into(),
        Reply::Body(vector(T, &series)),
    );
    let stub = start(r, None);
    let fleet = fleet_json(&stub, &[]);
    for (name, state) in [
        ("ok", "up"),
        ("skewed", "up"),
        ("future", "stale"),
        ("nan", "stale"),
        ("inf", "stale"),
        ("missing", "stale"),
    ] {
        assert_eq!(host(&fleet, name)["state"], state, "{name}");
    }
    assert_eq!(host(&fleet, "future")["sample_age_seconds"], Value::Null);
    let errors = fleet["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert_eq!(errors[0]["query"], SAMPLE_TIME_QUERY.as_str());
    let error = errors[0]["error"].as_str().unwrap();
    for why in ["future (3600 s ahead)", "nan (\"NaN\")", "inf (\"+Inf\")"] {
        assert!(error.contains(why), "{why}: {error}");
    }
    let out = on_stub(&stub, "select", &["--max-count", "6"], &[]);
    let chosen = exited(3, &out);
    assert_eq!(chosen, "ok:0,skewed:0\n");
}

/// Issue 32, item 10: every host up but one family failed: the fleet shown lacks that
/// family's values, so `snapshot` exits 3 (it exited 0), and `select` prints its choice and
/// exits 3.
#[test]
fn a_failing_family_makes_the_fleet_partial_though_every_host_is_up() {
    let mut r = twins();
    fail_temperatures(&mut r);
    let stub = start(r, None);
    let out = on_stub(&stub, "snapshot", &[], &[]);
    let text = exited(3, &out);
    assert!(
        text.contains("3 hosts  3 devices  0 down  0 stale"),
        "{text}"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err,
        "gpuscope: 1 query failed or answered in part: gpuscope_device_temperature_celsius\n"
    );
    let out = on_stub(&stub, "select", &["-n", "1"], &[]);
    assert_eq!(exited(3, &out), "10.0.0.1:9445:0\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("chosen from part of the fleet's data"),
        "{err}"
    );
    // With every family answered, both exit 0.
    let stub = start(twins(), None);
    ok(&on_stub(&stub, "snapshot", &[], &[]));
    ok(&on_stub(&stub, "select", &["-n", "1"], &[]));
}

/// Text a command wrote, stdout and stderr together.
fn all_text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// Loose end of issue 32: `--remote http://user:pass@host:9445` showed the credentials as the
/// host's instance and (hosts sharing a hostname are named by it) its name, in the table,
/// `--json`, `select`, `top` and the fleet's source; only the log left them out. They are sent
/// (exporters behind basic auth are read with them) and never shown: a host is its URL without
/// them.
#[test]
fn credentials_in_a_remote_url_are_sent_but_never_shown() {
    let dir = tempfile::tempdir().unwrap();
    let hash = bcrypt::hash("s3cret", 4).unwrap();
    let web = dir.path().join("web.yml");
    std::fs::write(&web, format!("basic_auth_users:\n  ops: {hash}\n")).unwrap();
    let web = web.to_str().unwrap();
    // Two demo exporters: one hostname, so each host is named by its URL.
    let start =
        || export_support::Exporter::start(&["--demo", "--frame", "1", "--web.config.file", web]);
    let (a, b) = (start(), start());
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let addrs = [a.addr.clone(), b.addr.clone(), dead.to_string()];
    let asked: Vec<String> = addrs
        .iter()
        .map(|addr| format!("http://ops:s3cret@{addr}"))
        .collect();
    let hosts: Vec<String> = addrs
        .iter()
        .map(|addr| format!("http://{addr}/metrics"))
        .collect();
    let with = |args: &[&str]| -> Vec<String> {
        let mut all: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        all.push("--remote".into());
        all.extend(asked.iter().cloned());
        all
    };
    let run = |args: &[&str]| {
        let args = with(args);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = gpuscope(&args, &[("COLUMNS", "200")]);
        let text = all_text(&out);
        assert!(
            !text.contains("s3cret") && !text.contains("ops:"),
            "{args:?} shows the credentials: {text}"
        );
        out
    };

    let fleet: Value = serde_json::from_str(&exited(3, &run(&["snapshot", "--json"]))).unwrap();
    assert_eq!(fleet["source"], hosts.join(" "));
    let mut got: Vec<(&str, &str)> = fleet["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["instance"].as_str().unwrap(),
                h["state"].as_str().unwrap(),
            )
        })
        .collect();
    let mut want: Vec<(&str, &str)> = hosts
        .iter()
        .map(String::as_str)
        .zip(["up", "up", "down"])
        .collect();
    got.sort();
    want.sort();
    assert_eq!(got, want, "read with the credentials, named without them");
    assert!(
        fleet["errors"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["query"] == hosts[2].as_str()),
        "{fleet}"
    );
    let table = exited(3, &run(&["snapshot"]));
    assert!(
        table.contains(&hosts[0]) && table.contains(&hosts[1]),
        "{table}"
    );
    let chosen = shown(&run(&["select", "-n", "2"]));
    assert!(chosen.starts_with("http://127.0.0.1:"), "{chosen}");
    let screen = shown(&run(&["top", "--once"]));
    assert!(screen.contains("3 hosts"), "{screen}");

    // A wrong password is refused by the exporter, and not shown either.
    let out = gpuscope(
        &[
            "snapshot",
            "--json",
            "--remote",
            &format!("http://ops:wrong@{}", a.addr),
        ],
        &[],
    );
    let text = all_text(&out);
    assert!(!text.contains("wrong@"), "{text}");
    let fleet: Value = serde_json::from_str(&exited(4, &out)).unwrap();
    assert_eq!(fleet["hosts"][0]["instance"], hosts[0].as_str());
    assert!(text.contains("HTTP 401"), "{text}");
}

/// The same for `--prometheus http://user:pass@prometheus:9090`: the credentials are sent as
/// basic auth, and neither the fleet's source nor the error of a refresh that failed shows
/// them.
#[test]
fn credentials_in_a_prometheus_url_are_sent_but_never_shown() {
    // "ops:s3cret" in base64.
    let stub = start(replies(), Some("Basic b3BzOnMzY3JldA==".into()));
    let with = |who: &str| stub.url.replace("http://", &format!("http://{who}@"));
    let out = gpuscope(
        &["snapshot", "--json", "--prometheus", &with("ops:s3cret")],
        &[],
    );
    let text = all_text(&out);
    assert!(!text.contains("s3cret") && !text.contains("ops:"), "{text}");
    let fleet: Value = serde_json::from_str(&exited(3, &out)).unwrap();
    assert_eq!(fleet["source"], stub.url.as_str());
    assert_eq!(host(&fleet, "node-a")["state"], "up");
    let out = gpuscope(&["snapshot", "--prometheus", &with("ops:wrong")], &[]);
    assert_eq!(out.status.code(), Some(4));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("Prometheus at {} answered no query", stub.url))
            && err.contains("HTTP 401")
            && !err.contains("wrong@"),
        "{err}"
    );
}

use crate::support::task_limit;

/// Loose end of issue 32: the Prometheus reader looked names up with ureq's own resolver,
/// which starts a thread per lookup and panics (exit 101) when one cannot start, as under a
/// container's `pids.max`. Both fleet readers share gpuscope's bounded resolver: a lookup
/// whose thread cannot start fails its query, saying so (no query answered: exit 4); with a
/// few tasks to spare the name is looked up and the fleet read. Runs as root (as CI does).
#[test]
fn a_prometheus_name_lookup_under_a_task_limit_fails_its_query_never_panics() {
    let stub = start(replies(), None);
    let url = stub.url.replace("127.0.0.1", "localhost");
    let args = ["snapshot", "--json", "--prometheus", url.as_str()];
    for tasks in [1, 4] {
        let Some(limit) = task_limit::TaskLimit::new(tasks) else {
            eprintln!("no task limit can be set here (not root); skipping");
            return;
        };
        let out = limit.command(&args).output().expect("gpuscope runs");
        drop(limit);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{tasks} tasks: {err}");
        if tasks == 1 {
            assert_eq!(out.status.code(), Some(4), "{err}");
            assert!(
                err.contains("answered no query")
                    && err.contains("cannot look up localhost: no thread could start"),
                "{err}"
            );
        } else {
            let fleet: Value = serde_json::from_str(&exited(3, &out)).unwrap();
            assert_eq!(host(&fleet, "node-a")["state"], "up");
        }
    }
}

/// Issue 35, item 4: a Prometheus that scrapes dcgm-exporter on one host (its GPU 1 at
/// `dcgm_temp` °C) and nvidia_gpu_exporter on another, and no gpuscope exporter.
fn door_replies(dcgm_temp: &str) -> HashMap<String, Reply> {
    use gpu_export::Door;
    let mut r = HashMap::new();
    let dcgm_host = json!({"instance": "gpu-dcgm:9400", "job": "dcgm", "Hostname": "dcgm-node"});
    let smi_host = json!({"instance": "gpu-smi:9835", "job": "smi"});
    let named = |mut l: Value, door: &str| {
        l["gpuscope_names"] = json!(door);
        l
    };
    let times = [
        (named(dcgm_host.clone(), "dcgm"), "998".to_string()),
        (named(smi_host.clone(), "nvidia-smi"), "999".to_string()),
    ];
    r.insert(SAMPLE_TIME_QUERY.clone(), Reply::Body(vector(T, &times)));
    let up = [
        (
            json!({"instance": "gpu-dcgm:9400", "job": "dcgm"}),
            "1".to_string(),
        ),
        (
            json!({"instance": "gpu-smi:9835", "job": "smi"}),
            "1".to_string(),
        ),
    ];
    r.insert("up".into(), Reply::Body(vector(T, &up)));
    let info = json!({
        "__name__": "nvidia_smi_gpu_info", "instance": "gpu-smi:9835", "job": "smi",
        "uuid": "5eed", "index": "3", "name": "Tesla T4", "pci_bus_id": "00000000:3B:00.0",
    });
    r.insert(
        gpu_fleet::doors::device_query(&[Door::NvidiaSmi], true, "gpu-smi:9835"),
        Reply::Body(vector(T, &[(info, "1".into())])),
    );
    let mut series = Vec::new();
    for gpu in ["0", "1"] {
        for (name, v) in [
            ("DCGM_FI_DEV_FB_USED", "1024"),
            ("DCGM_FI_DEV_FB_FREE", "40960"),
            ("DCGM_FI_DEV_GPU_UTIL", "37"),
            (
                "DCGM_FI_DEV_GPU_TEMP",
                if gpu == "1" { dcgm_temp } else { "45" },
            ),
            ("DCGM_FI_DEV_POWER_USAGE", "312.5"),
        ] {
            let mut l = dcgm_host.clone();
            l["__name__"] = json!(name);
            l["gpu"] = json!(gpu);
            l["UUID"] = json!(format!("GPU-d{gpu}"));
            l["modelName"] = json!("NVIDIA H100 80GB HBM3");
            series.push((l, v.to_string()));
        }
    }
    for (name, v) in [
        ("nvidia_smi_memory_total_bytes", "16106127360"),
        ("nvidia_smi_memory_used_bytes", "1073741824"),
        ("nvidia_smi_memory_free_bytes", "15032385536"),
        ("nvidia_smi_utilization_gpu_ratio", "0.5"),
        ("nvidia_smi_temperature_gpu", "61"),
        ("nvidia_smi_power_draw_watts", "70.25"),
    ] {
        let mut l = smi_host.clone();
        l["__name__"] = json!(name);
        l["uuid"] = json!("5eed");
        series.push((l, v.to_string()));
    }
    let query = gpu_fleet::doors::device_query(
        &[Door::Dcgm, Door::NvidiaSmi],
        false,
        "gpu-dcgm:9400|gpu-smi:9835",
    );
    r.insert(query, Reply::Body(vector(T, &series)));
    r
}

/// The device fields the issue's Show names: memory, utilization, temperature, power.
fn shown_values(d: &Value) -> [Value; 6] {
    [
        d["memory_total_bytes"].clone(),
        d["memory_used_bytes"].clone(),
        d["memory_free_bytes"].clone(),
        d["gpu_utilization_percent"].clone(),
        d["temperature_celsius"].clone(),
        d["power_usage_watts"].clone(),
    ]
}

#[test]
fn a_prometheus_of_dcgm_and_nvidia_smi_names_shows_every_gpu() {
    let stub = start(door_replies("46"), None);
    let out = on_stub(&stub, "snapshot", &["--json"], &[]);
    let fleet: Value = serde_json::from_str(&ok(&out)).unwrap();
    assert_eq!(fleet["errors"], json!([]));
    let dcgm = host(&fleet, "dcgm-node");
    assert_eq!(
        (&dcgm["state"], &dcgm["names"], &dcgm["instance"]),
        (&json!("up"), &json!("dcgm"), &json!("gpu-dcgm:9400"))
    );
    let devices = dcgm["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 2);
    for (d, temp) in devices.iter().zip([45, 46]) {
        assert_eq!(
            shown_values(d),
            [
                // dcgm-exporter's default counters have no total.
                Value::Null,
                json!(1024u64 << 20),
                json!(40u64 * GIB),
                json!(37),
                json!(temp),
                json!(312.5)
            ]
        );
        assert_eq!(d["name"], "NVIDIA H100 80GB HBM3");
        assert_eq!(
            d["up"],
            Value::Null,
            "dcgm-exporter cannot say a GPU is lost"
        );
        assert_eq!(d["processes"], json!([]));
    }
    let smi = host(&fleet, "gpu-smi:9835");
    assert_eq!(smi["names"], "nvidia-smi");
    let d = &smi["devices"][0];
    assert_eq!((&d["id"], &d["uuid"]), (&json!("3"), &json!("GPU-5eed")));
    assert_eq!(
        shown_values(d),
        [
            json!(15 * GIB),
            json!(GIB),
            json!(14 * GIB),
            json!(50),
            json!(61),
            json!(70.25)
        ]
    );
    // The 15 queries of any fleet, then nvidia_gpu_exporter's info and the doors' values.
    let asked = stub.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 17, "{asked:#?}");
    assert!(asked[15].contains("nvidia_smi_gpu_info") && asked[16].contains("DCGM_FI_DEV_FB_USED"));
    // select chooses among them as among gpuscope's hosts.
    let picked = ok(&on_stub(&stub, "select", &["-n", "2", "-f", "20GiB"], &[]));
    let mut picked: Vec<&str> = picked.trim().split(',').collect();
    picked.sort();
    assert_eq!(
        picked,
        ["dcgm-node:0", "dcgm-node:1"],
        "the two GPUs with 40 GiB free"
    );
}

#[test]
fn a_dcgm_value_out_of_range_is_na_with_a_warning_naming_its_metric() {
    let stub = start(door_replies("1e9"), None);
    let out = on_stub(&stub, "snapshot", &["--json"], &[]);
    let fleet: Value = serde_json::from_str(&ok(&out)).unwrap();
    let d = &host(&fleet, "dcgm-node")["devices"][1];
    assert_eq!(d["temperature_celsius"], Value::Null);
    assert_eq!(
        d["memory_used_bytes"],
        json!(1024u64 << 20),
        "the rest still shows"
    );
    assert_eq!(
        d["out_of_range"],
        json!([{"family": "DCGM_FI_DEV_GPU_TEMP", "value": "1e9", "expected": "0 to 200 °C"}])
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("DCGM_FI_DEV_GPU_TEMP 1e9 is out of range (0 to 200 °C)"),
        "{err}"
    );
}

/// Issue 35, item 4: a later refresh keeps a door host's GPUs while its latest scrape is the
/// same, asking the two host queries only, as for a gpuscope host.
#[test]
fn an_unchanged_door_host_keeps_its_gpus_without_asking_again() {
    let stub = start(door_replies("46"), None);
    let watch = Watch::start(&stub);
    let first = watch.next();
    let second = watch.next();
    assert_eq!(first["hosts"], second["hosts"]);
    assert_eq!(
        host(&second, "dcgm-node")["devices"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    // The first refresh asked 17; every later one (the next may have begun since) the two
    // host queries alone.
    let asked = stub.asked.lock().unwrap().clone();
    assert!(asked.len() >= 19, "{asked:#?}");
    assert!(
        asked[17..].iter().all(|q| *q == first_query() || q == "up"),
        "{:#?}",
        &asked[17..]
    );
}
