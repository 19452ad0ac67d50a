//! `gpuscope snapshot --remote URL...` against hostile exporters (`gpu_fleet::stub_exporter`:
//! many exporters on one loopback port, each answering as a test says). Issue 32's regressions
//! of the `--remote` reader: every URL asked for is a host (item 3), a host is the URL asked and
//! never the labels of its answer (item 4), a bounded pool of readers that a pids limit cannot
//! crash (item 9), and one deadline for the whole read.

use crate::support::{cli, task_limit};

use std::process::Output;
use std::time::{Duration, Instant};

use gpu_fleet::stub_exporter::{exposition, Answer, StubExporter};
use serde_json::Value;
use task_limit::TaskLimit;

const GIB: u64 = 1 << 30;

/// `gpuscope snapshot --json --remote URLS EXTRA`.
fn snapshot(urls: &[String], extra: &[&str]) -> Output {
    let mut args = vec!["snapshot", "--json", "--remote"];
    args.extend(urls.iter().map(String::as_str));
    args.extend_from_slice(extra);
    cli::run(&args)
}

/// The fleet document of a run that ended with `code`.
fn fleet(code: i32, out: &Output) -> Value {
    serde_json::from_str(&cli::exited(code, out)).expect("the fleet's JSON")
}

/// Adds the exporter `name` to `stub`, serving one GPU of `hostname` (UUID `GPU-<uuid>`) with
/// `free_gib` GiB free and the labels of `extra` on every sample: its URL.
fn up(
    stub: &StubExporter,
    name: &str,
    hostname: &str,
    uuid: &str,
    free_gib: u64,
    extra: &[(&str, &str)],
) -> String {
    let exposition = exposition(hostname, uuid, free_gib * GIB, extra);
    stub.add(name, Answer::Exposition(exposition))
}

/// The host whose instance is `url`; exactly one.
fn host_at<'a>(fleet: &'a Value, url: &str) -> &'a Value {
    let hosts: Vec<&Value> = fleet["hosts"]
        .as_array()
        .expect("hosts")
        .iter()
        .filter(|h| h["instance"] == url)
        .collect();
    assert_eq!(hosts.len(), 1, "one host at {url} in {fleet:#}");
    hosts[0]
}

/// The errors the fleet lists for `url`.
fn errors_of(fleet: &Value, url: &str) -> Vec<String> {
    fleet["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .filter(|e| e["query"] == url)
        .map(|e| e["error"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Issue 32 item 3: an exporter URL that answers 200 with no gpuscope samples (an HTML page,
/// an empty body, node_exporter's text), bytes that are not text or an HTTP error vanished
/// from the fleet, and the exit code said all was well. Each is a host, down, with the reason;
/// the exit code says partial (3), or nothing (4) when no host is up.
#[test]
fn every_remote_url_is_a_host_even_when_it_serves_no_gpuscope_samples() {
    let stub = StubExporter::start().expect("the stub starts");
    let good = up(&stub, "good", "lab-a", "a", 10, &[]);
    let bad = [
        ("html", Answer::Html, "no gpuscope samples in the answer"),
        ("empty", Answer::Empty, "no gpuscope samples in the answer"),
        (
            "node",
            Answer::NodeExporter,
            "no gpuscope samples in the answer",
        ),
        ("binary", Answer::Binary, "not UTF-8 text"),
        ("gone", Answer::Status(404), "HTTP 404"),
    ];
    let bad_urls: Vec<String> = bad.iter().map(|(n, a, _)| stub.add(n, a.clone())).collect();
    let all: Vec<String> = std::iter::once(good.clone())
        .chain(bad_urls.iter().cloned())
        .collect();

    let out = snapshot(&all, &[]);
    let f = fleet(3, &out);
    assert_eq!(f["hosts"].as_array().unwrap().len(), all.len(), "{f:#}");
    let a = host_at(&f, &good);
    assert_eq!((&a["host"], &a["state"]), (&"lab-a".into(), &"up".into()));
    assert_eq!(a["devices"][0]["memory_free_bytes"], 10 * GIB);
    for ((name, _, reason), url) in bad.iter().zip(&bad_urls) {
        let h = host_at(&f, url);
        assert_eq!(h["state"], "down", "{name}: {h:#}");
        assert_eq!(h["devices"].as_array().unwrap().len(), 0, "{name}");
        let errors = errors_of(&f, url);
        assert!(
            errors.len() == 1 && errors[0].contains(reason),
            "{name}: {errors:?}"
        );
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("5 of 6 hosts not up"), "{stderr}");

    // The table says it too: each URL on a line, and why.
    let out = cli::run(&[&["snapshot", "--remote"][..], &[&bad_urls[0]]].concat());
    assert_eq!(out.status.code(), Some(4), "nothing to show");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&bad_urls[0]), "{text}");
    assert!(text.contains("no gpuscope samples in the answer"), "{text}");

    // Every URL without samples: nothing to show (4), every host still listed.
    let f = fleet(4, &snapshot(&bad_urls, &[]));
    assert_eq!(f["hosts"].as_array().unwrap().len(), bad_urls.len());
}

/// Issue 32 item 4: exporter B's series carrying `instance="<A's URL>"` and `hostname="A"`
/// overwrote A's values and B disappeared. A host is the URL asked: B stays B with its own
/// values (the hostname label only names it), A keeps its own, and two exporters that give
/// one hostname are two hosts.
#[test]
fn a_remote_host_is_the_url_asked_never_the_labels_in_its_answer() {
    let stub = StubExporter::start().expect("the stub starts");
    let a = up(&stub, "a", "node-a", "a", 10, &[]);
    let spoofed = [("instance", a.as_str()), ("job", "gpu")];
    let b = up(&stub, "b", "node-a", "b", 70, &spoofed);
    let c = up(&stub, "c", "twin", "c", 20, &[]);
    let d = up(&stub, "d", "twin", "d", 30, &[]);
    let urls = [a.clone(), b.clone(), c.clone(), d.clone()];
    let f = fleet(0, &snapshot(&urls, &[]));
    assert_eq!(f["hosts"].as_array().unwrap().len(), 4, "{f:#}");
    for (url, name, uuid, free) in [
        (&a, "node-a", "GPU-a", 10),
        (&b, "node-a", "GPU-b", 70),
        (&c, "twin", "GPU-c", 20),
        (&d, "twin", "GPU-d", 30),
    ] {
        let h = host_at(&f, url);
        assert_eq!(h["host"], name, "{h:#}");
        assert_eq!(h["state"], "up");
        let devices = h["devices"].as_array().unwrap();
        assert_eq!(devices.len(), 1, "{url}: {h:#}");
        assert_eq!(devices[0]["uuid"], uuid, "{url}");
        assert_eq!(devices[0]["memory_free_bytes"], free * GIB, "{url}");
    }

    // B is a candidate of its own: the most free memory is B's GPU, not A's.
    let out = cli::run(&["select", "--remote", &a, &b, "-n", "1", "-O", "uuid"]);
    assert_eq!(cli::ok_stdout(out, "select").trim(), "GPU-b");
}

/// Issue 32 item 9: `snapshot --remote` with 100 URLs under a 30-task limit panicked (exit
/// 101): a thread per URL, and one more per name lookup. A bounded pool reads them; a thread
/// that cannot start costs a reader, never a host or a panic, even when almost none can
/// (a limit of 3 tasks); a name lookup that cannot get a thread is that host's error.
/// Runs as root (as CI does): a pids cgroup, else RLIMIT_NPROC as a user of its own.
#[test]
fn remote_reads_100_urls_under_a_30_task_pids_limit() {
    let stub = StubExporter::start().expect("the stub starts");
    let mut urls = Vec::new();
    for i in 0..100 {
        let name = format!("e{i}");
        let url = match i % 10 {
            // A name to look up (on a thread of its own, which may not start).
            3 => up(&stub, &name, &name, &name, 1, &[]).replace("127.0.0.1", "localhost"),
            // An exporter that serves something else.
            7 => stub.add(&name, Answer::Html),
            _ => up(&stub, &name, &name, &name, 1, &[]),
        };
        urls.push(url);
    }
    let mut args = vec!["snapshot", "--json", "--remote"];
    args.extend(urls.iter().map(String::as_str));
    for tasks in [30, 3] {
        let Some(limit) = TaskLimit::new(tasks) else {
            eprintln!("no task limit can be set here (not root); skipping");
            return;
        };
        let out = limit.command(&args).output().expect("gpuscope runs");
        drop(limit);
        let f = fleet(3, &out);
        let hosts = f["hosts"].as_array().unwrap();
        assert_eq!(hosts.len(), 100, "{tasks} tasks: every URL is a host");
        for (i, url) in urls.iter().enumerate() {
            let h = host_at(&f, url);
            let errors = errors_of(&f, url);
            match i % 10 {
                7 => assert_eq!(h["state"], "down", "{tasks} tasks, {url}"),
                // Looked up, or its error says the lookup could not start.
                3 if h["state"] != "up" => assert!(
                    errors.iter().any(|e| e.contains("look up")),
                    "{tasks} tasks, {url}: {h:#} {errors:?}"
                ),
                3 => {}
                _ => assert_eq!(h["state"], "up", "{tasks} tasks, {url}: {errors:?}"),
            }
            if h["state"] == "up" {
                assert_eq!(h["devices"][0]["uuid"], format!("GPU-e{i}"));
            }
        }
        if tasks == 30 {
            let looked_up = (0..100).filter(|i| i % 10 == 3);
            for i in looked_up {
                assert_eq!(host_at(&f, &urls[i])["state"], "up", "{}", urls[i]);
            }
        }
    }
}

/// The whole `--remote` read is bounded by about one `--prometheus-timeout`, not one per URL in
/// turn, and exporters that never answer cannot keep the others from being read: 89 that
/// never answer and one whose body never ends, with 10 good ones spread among them, read with
/// a 2 s timeout by a pool of 16, end well within 10 s (a whole timeout per silent exporter,
/// 16 at a time, would take over 10 s and read few of the good ones). Every URL is a host: the
/// good ones up, the others down with why.
#[test]
fn a_remote_read_of_many_silent_exporters_ends_within_one_timeout() {
    let stub = StubExporter::start().expect("the stub starts");
    let urls: Vec<String> = (0..100)
        .map(|i| {
            let name = format!("e{i}");
            let answer = match i {
                50 => Answer::Dribble(Duration::from_millis(100)),
                _ if i % 10 == 5 => Answer::Exposition(exposition(&name, &name, GIB, &[])),
                _ => Answer::Silent,
            };
            stub.add(&name, answer)
        })
        .collect();
    let started = Instant::now();
    let out = snapshot(&urls, &["--prometheus-timeout", "2s"]);
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(10),
        "took {took:?} with a 2 s timeout"
    );
    let f = fleet(3, &out);
    assert_eq!(f["hosts"].as_array().unwrap().len(), urls.len());
    for (i, url) in urls.iter().enumerate() {
        let h = host_at(&f, url);
        let errors = errors_of(&f, url);
        if i % 10 == 5 {
            assert_eq!(h["state"], "up", "{url}: {errors:?}");
        } else {
            assert_eq!(h["state"], "down", "{url}");
            assert!(
                errors.len() == 1 && errors[0].contains("no whole answer in time"),
                "{url}: {errors:?}"
            );
        }
    }
}

/// Issue 35, item 4: an exporter serving only dcgm-exporter's names, and one serving only
/// nvidia_gpu_exporter's (gpuscope's own in those modes over the demo's 8 GPUs), read directly:
/// each host read through those names, every GPU with its memory, utilization, temperature and
/// power.
#[test]
fn exporters_of_dcgm_or_nvidia_smi_names_are_read_through_them() {
    use crate::support::export_support::Exporter;
    let dcgm = Exporter::start(&["--demo", "--names", "dcgm"]);
    let smi = Exporter::start(&["--demo", "--names", "nvidia-smi"]);
    let urls = [
        format!("http://{}/metrics", dcgm.addr),
        format!("http://{}/metrics", smi.addr),
    ];
    let out = snapshot(&urls, &[]);
    let fleet = fleet(0, &out);
    for (url, names) in urls.iter().zip(["dcgm", "nvidia-smi"]) {
        let h = host_at(&fleet, url);
        assert_eq!(
            (&h["state"], &h["names"]),
            (&"up".into(), &names.into()),
            "{h:#}"
        );
        let devices = h["devices"].as_array().unwrap();
        assert_eq!(devices.len(), 8, "{names}: {h:#}");
        for d in devices {
            for field in [
                "uuid",
                "memory_used_bytes",
                "memory_free_bytes",
                "gpu_utilization_percent",
                "temperature_celsius",
                "power_usage_watts",
            ] {
                assert!(
                    !d[field].is_null(),
                    "{names} GPU {}: {field}: {d:#}",
                    d["id"]
                );
            }
            // dcgm-exporter's default counters have no total; nvidia_gpu_exporter's do.
            assert_eq!(d["memory_total_bytes"].is_null(), names == "dcgm", "{d:#}");
        }
    }
}
