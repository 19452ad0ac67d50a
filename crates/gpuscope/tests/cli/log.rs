//! The log (`-v`, `GPUSCOPE_LOG`, `RUST_LOG`; docs/logging.md) as a user meets it: off unless
//! asked for, on stderr only, so `--json` and `/metrics` are the same with it on; what each
//! level tells; journald's format when stderr is the journal.

use crate::support::{export_support, fleet_support};

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt as _;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use export_support::cli;

/// The demo at a fixed frame, so two runs print the same.
const DEMO: [&str; 3] = ["--demo", "--frame", "7"];

fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    cli::command(args)
        .envs(env.iter().copied())
        .output()
        .expect("gpuscope runs")
}

/// Stdout and stderr of a command that exited with `code`.
fn exited(code: i32, out: &Output) -> (String, String) {
    let stderr = String::from_utf8(out.stderr.clone()).expect("UTF-8 stderr");
    assert_eq!(out.status.code(), Some(code), "{stderr}");
    (
        String::from_utf8(out.stdout.clone()).expect("UTF-8"),
        stderr,
    )
}

fn ok(out: &Output) -> (String, String) {
    let stderr = String::from_utf8(out.stderr.clone()).expect("UTF-8 stderr");
    assert!(
        out.status.success(),
        "exit {:?}: {stderr}",
        out.status.code()
    );
    (
        String::from_utf8(out.stdout.clone()).expect("UTF-8"),
        stderr,
    )
}

/// The events with this message in `log` (lines `TIME LEVEL TARGET: MESSAGE k=v ...`, or the
/// journal's `<N>TARGET: MESSAGE k=v ...`), each as its target and fields.
fn events(log: &str, message: &str) -> Vec<(String, HashMap<String, String>)> {
    log.lines()
        .filter_map(|line| {
            let (head, rest) = line.split_once(": ")?;
            let target = head.rsplit([' ', '>']).next()?.to_string();
            // The message is the words before the first `key=value` (a value may hold spaces:
            // only its first word is kept).
            let words: Vec<&str> = rest.split(' ').collect();
            let first_field = words.iter().position(|w| w.contains('='));
            let (said, fields) = words.split_at(first_field.unwrap_or(words.len()));
            if said.join(" ") != message {
                return None;
            }
            let fields = fields
                .iter()
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            Some((target, fields))
        })
        .collect()
}

fn number(fields: &HashMap<String, String>, name: &str) -> f64 {
    fields
        .get(name)
        .unwrap_or_else(|| panic!("no {name} in {fields:?}"))
        .parse()
        .unwrap_or_else(|_| panic!("{name} is not a number in {fields:?}"))
}

#[test]
fn json_output_is_the_same_with_the_log_on_and_the_log_goes_to_stderr_only() {
    for command in [&["snapshot", "--json"][..], &["info", "--json"]] {
        let args: Vec<&str> = command.iter().chain(&DEMO).copied().collect();
        let (quiet, quiet_err) = ok(&run(&args, &[]));
        assert_eq!(quiet_err, "", "{args:?} logs nothing unless asked");
        let mut verbose_args = args.clone();
        verbose_args.push("-vv");
        for env in [&[][..], &[("GPUSCOPE_LOG", "trace")]] {
            let (loud, loud_err) = ok(&run(&verbose_args, env));
            assert_eq!(loud, quiet, "{verbose_args:?} {env:?}: stdout changed");
            assert!(
                !events(&loud_err, "refresh").is_empty(),
                "{verbose_args:?} {env:?} logged no refresh: {loud_err}"
            );
            serde_json::from_str::<serde_json::Value>(&loud).expect("stdout is still JSON");
        }
    }
}

/// Runs `args` over the demo ([`DEMO`]): its stderr, which must log `message` once (one
/// snapshot, one of each), and that event's target and fields.
fn demo_with_one(args: &[&str], message: &str) -> (String, String, HashMap<String, String>) {
    let (_, log) = ok(&run(&[args, &DEMO].concat(), &[]));
    let mut found = events(&log, message);
    assert_eq!(found.len(), 1, "{message} once: {log}");
    let (target, fields) = found.pop().unwrap();
    (log, target, fields)
}

#[test]
fn v_logs_what_was_opened_and_vv_adds_each_refresh_with_its_time() {
    let (one, target, fields) = demo_with_one(&["snapshot", "-v"], "source opened");
    assert_eq!(target, "gpuscope::source");
    assert_eq!(fields["source"], "demo");
    assert_eq!(fields["gpus"], "8");
    assert!(one.contains(" INFO "), "{one}");
    assert!(events(&one, "refresh").is_empty(), "-v is not debug: {one}");

    // -v is global: it may come before the command too.
    let (_, target, fields) = demo_with_one(&["-vv", "snapshot"], "refresh");
    assert_eq!(target, "gpu_processes::collect");
    assert_eq!(fields["devices"], "8");
    assert!(number(&fields, "processes") > 0.0, "{fields:?}");
    let total = number(&fields, "total_ms");
    let devices = number(&fields, "device_queries_ms");
    assert!(total > 0.0 && devices <= total, "{fields:?}");
}

#[test]
fn gpuscope_log_chooses_what_is_logged_and_wins_over_rust_log() {
    let args = [&["snapshot", "--json"][..], &DEMO].concat();
    let (_, only_refresh) = ok(&run(&args, &[("GPUSCOPE_LOG", "gpu_processes=debug")]));
    assert_eq!(events(&only_refresh, "refresh").len(), 1, "{only_refresh}");
    assert!(events(&only_refresh, "source opened").is_empty());

    let (_, from_rust_log) = ok(&run(&args, &[("RUST_LOG", "gpuscope=info")]));
    assert_eq!(events(&from_rust_log, "source opened").len(), 1);
    assert!(events(&from_rust_log, "refresh").is_empty());

    let (_, both) = ok(&run(
        &args,
        &[
            ("RUST_LOG", "gpuscope=info"),
            ("GPUSCOPE_LOG", "gpu_processes=debug"),
        ],
    ));
    assert_eq!(events(&both, "refresh").len(), 1, "{both}");
    assert!(events(&both, "source opened").is_empty(), "{both}");

    // With -v, the variable refines: the exporter's module at debug, the rest at -v's info.
    let mut with_v = args.clone();
    with_v.push("-v");
    let (_, refined) = ok(&run(&with_v, &[("GPUSCOPE_LOG", "gpu_processes=debug")]));
    assert_eq!(events(&refined, "source opened").len(), 1, "{refined}");
    assert_eq!(events(&refined, "refresh").len(), 1, "{refined}");
}

#[test]
fn a_log_directive_that_does_not_parse_is_a_usage_error_naming_the_variable() {
    let out = run(
        &[&["snapshot"][..], &DEMO].concat(),
        &[("GPUSCOPE_LOG", "gpuscope=loudest")],
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("GPUSCOPE_LOG=\"gpuscope=loudest\""),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}

/// Lines the exporter writes to stderr until one has `message` and `field=value`, for at most
/// 20 seconds.
fn wait_for_event(
    exporter: &export_support::Exporter,
    message: &str,
    field: (&str, &str),
) -> HashMap<String, String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = Vec::new();
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        let Ok(line) = exporter.stderr.recv_timeout(left) else {
            break;
        };
        if let Some((_, fields)) = events(&line, message).pop() {
            if fields.get(field.0).map(String::as_str) == Some(field.1) {
                return fields;
            }
        }
        seen.push(line);
    }
    panic!("no {message} with {}={} in {seen:#?}", field.0, field.1);
}

#[test]
fn the_exporter_logs_each_request_with_path_status_bytes_and_time() {
    let exporter = export_support::Exporter::start(&["--demo", "-vv"]);
    let metrics = exporter.get("/metrics");
    assert_eq!(metrics.status, 200);
    // The exposition holds no log line: the strict parser reads every line of it.
    let parsed = export_support::parse(&metrics.body);
    assert!(!parsed.samples.is_empty());
    let fields = wait_for_event(&exporter, "request", ("path", "/metrics"));
    assert_eq!(fields["status"], "200");
    assert_eq!(fields["method"], "GET");
    assert_eq!(number(&fields, "bytes"), metrics.body.len() as f64);
    assert!(number(&fields, "took_ms") >= 0.0);

    assert_eq!(exporter.get("/nowhere").status, 404);
    let fields = wait_for_event(&exporter, "request", ("path", "/nowhere"));
    assert_eq!(fields["status"], "404");

    // Its sampler's refreshes are logged too, once per interval.
    wait_for_event(&exporter, "refresh", ("devices", "8"));
}

#[test]
fn fleet_queries_are_logged_with_status_bytes_and_time() {
    let stub = fleet_support::start(HashMap::new(), None);
    // A Prometheus with no host: nothing to show, exit 4 (docs/exit-codes.md).
    let (_, log) = exited(
        4,
        &run(
            &["snapshot", "--json", "--prometheus", &stub.url, "-vv"],
            &[],
        ),
    );
    let queries = events(&log, "prometheus query");
    let asked = stub.asked.lock().unwrap().clone();
    assert!(!asked.is_empty());
    assert_eq!(queries.len(), asked.len(), "one line per query: {log}");
    for (_, fields) in &queries {
        assert_eq!(fields["status"], "200", "{fields:?}");
        assert!(number(fields, "bytes") > 0.0 && number(fields, "took_ms") >= 0.0);
    }
    assert_eq!(events(&log, "fleet refresh").len(), 1, "{log}");

    // --remote: each exporter read, and one that cannot be read with its error.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let exporter = export_support::Exporter::start(&DEMO);
    let up = format!("http://{}", exporter.addr);
    let down = format!("http://{dead}");
    // One of two exporters down: partial, exit 3.
    let (_, log) = exited(
        3,
        &run(&["snapshot", "--json", "-vv", "--remote", &up, &down], &[]),
    );
    let read = events(&log, "exporter read");
    assert_eq!(read.len(), 1, "{log}");
    assert_eq!(read[0].1["url"], format!("{up}/metrics"));
    assert!(number(&read[0].1, "bytes") > 1000.0);
    let failed = events(&log, "exporter read failed");
    assert_eq!(failed.len(), 1, "{log}");
    assert_eq!(failed[0].1["url"], format!("{down}/metrics"));
}

/// Runs `snapshot -vv` on the demo with stderr in a file and `JOURNAL_STREAM` set to `stream`
/// (`None`: that file's own device and inode, as systemd sets it), and returns the file.
fn stderr_with_journal_stream(stream: Option<&str>) -> String {
    let file = tempfile::NamedTempFile::new().unwrap();
    let meta = file.as_file().metadata().unwrap();
    let own = format!("{}:{}", meta.dev(), meta.ino());
    let status = cli::command(&[&["snapshot", "-vv"][..], &DEMO].concat())
        .env("JOURNAL_STREAM", stream.unwrap_or(&own))
        .stdout(Stdio::null())
        .stderr(file.reopen().unwrap())
        .status()
        .expect("gpuscope runs");
    assert!(status.success());
    std::fs::read_to_string(file.path()).unwrap()
}

#[test]
fn under_systemd_lines_carry_the_journal_priority_and_no_time_of_their_own() {
    let journal = stderr_with_journal_stream(None);
    assert!(
        journal
            .lines()
            .any(|l| l.starts_with("<7>gpu_processes::collect: refresh devices=8")),
        "{journal}"
    );
    assert!(
        journal
            .lines()
            .any(|l| l.starts_with("<6>gpuscope::source: source opened")),
        "{journal}"
    );
    assert!(journal.lines().all(|l| l.starts_with('<')), "{journal}");

    // JOURNAL_STREAM inherited from a parent whose stderr was the journal, while this stderr
    // is something else: ordinary lines, with their time.
    let other = stderr_with_journal_stream(Some("1:1"));
    assert!(!other.contains("<7>"), "{other}");
    assert_eq!(events(&other, "refresh").len(), 1, "{other}");
    assert!(
        other.contains(" DEBUG gpu_processes::collect: refresh"),
        "{other}"
    );
}

#[cfg(target_os = "linux")]
#[test]
fn vv_logs_every_nvml_function_fake_nvml_served_with_its_time_and_result() {
    let (dir, nvml) = cli::install_fake_nvml();
    let nvml = nvml.to_str().expect("a UTF-8 path");
    let served_log = dir.path().join("served.log");
    for fixture in ["h100-mig", "old-driver", "h100-real"] {
        let _ = std::fs::remove_file(&served_log);
        let path = export_support::fixture(fixture);
        let run = |verbose: &[&str]| {
            let mut args = vec!["snapshot", "--json", "--nvml-lib", nvml];
            args.extend(verbose);
            cli::command(&args)
                .env(fake_nvml::FIXTURE_ENV, &path)
                .env(fake_nvml::CALL_LOG_ENV, &served_log)
                .output()
                .expect("gpuscope runs")
        };
        let (_, log) = ok(&run(&["-vv"]));
        let served =
            cli::served_calls(&std::fs::read_to_string(&served_log).expect("served calls"));
        let calls = events(&log, "call");
        // Each call's line: by function, how many, and how many answered.
        let mut logged: HashMap<String, (usize, usize)> = HashMap::new();
        for (target, fields) in &calls {
            assert_eq!(target, "gpu_backend::calls", "{fields:?}");
            let took = number(fields, "took_us");
            assert!((0.0..1e7).contains(&took), "{fields:?}");
            assert!(
                fields.contains_key("answer") != fields.contains_key("error"),
                "an answer or an error: {fields:?}"
            );
            if fields["nvml"] == "-" {
                // `events`, which reads the listener's buffer, not NVML.
                continue;
            }
            let entry = logged.entry(cli::unversioned(&fields["nvml"])).or_default();
            entry.0 += 1;
            entry.1 += usize::from(fields.contains_key("answer"));
        }
        // Every function gpuscope made NVML serve is in the log. A query's line stands for
        // one call or more of its function (a MIG handle is looked up again for each query of
        // a MIG device, a memory error counter is asked for each memory location, `_v3` falls
        // back to `_v2`), or for none (MIG slots are not probed with MIG off; GPM's first
        // sample cannot give metrics yet), so the counts are bounded, not equal.
        for (function, &(count, _)) in &served {
            assert!(
                logged.contains_key(function),
                "{fixture}: {function} served {count} times, never logged"
            );
        }
        for function in logged.keys() {
            assert!(function.starts_with("nvml"), "{fixture}: {function}");
        }
        // Without -vv, the same run is served the same calls, but logs none.
        let _ = std::fs::remove_file(&served_log);
        let (_, quiet) = ok(&run(&[]));
        assert_eq!(quiet, "", "{fixture}: nothing logged by default");
        let quiet_served =
            cli::served_calls(&std::fs::read_to_string(&served_log).expect("served calls"));
        // The logged run waits for the event listener to end (its last wait, freeing the set,
        // `nvmlShutdown`), which a quiet one-shot command leaves to the exit.
        for function in quiet_served.keys() {
            assert!(served.contains_key(function), "{fixture}: {function}");
        }
        let total =
            |calls: &HashMap<String, (usize, usize)>| calls.values().map(|c| c.0).sum::<usize>();
        let answered: usize = logged.values().map(|c| c.1).sum();
        assert!(
            answered <= total(&served),
            "{fixture}: {} lines ({answered} answered) for {} calls of {} functions",
            total(&logged),
            total(&served),
            served.len()
        );
    }
}
