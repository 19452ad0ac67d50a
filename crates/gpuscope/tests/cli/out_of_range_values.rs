//! Values out of range (issue 32, item 7): what a broken or hostile exporter sends, or a
//! recording says, that no GPU can have is N/A with a warning naming host, device and family,
//! never clamped into a plausible number and never shown as another state: in the fleet's
//! table, `top`'s fleet view, `--json` (`null`, and the device's `out_of_range` list) and
//! `select` (a GPU whose memory is unknown never qualifies). Each test is named after the class
//! of value it sends; the ranges are gpu-fleet's `values::RANGES` (docs/security.md, "Values").

use crate::support::{cli, edited_fixture, fleet_support};

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::Output;

use fleet_support::{hosts, start, vector, Reply, Stub};
use serde_json::{json, Value};

const T: f64 = 1000.0;
const GIB: u64 = 1 << 30;

/// A value every device of the stub's host sends for each device family, unless a test says
/// otherwise: an H100 that is up, 10 GiB of its 80 used, half busy.
const PLAIN: &[(&str, &str)] = &[
    ("gpuscope_device_up", "1"),
    ("gpuscope_device_memory_total_bytes", "85899345920"),
    ("gpuscope_device_memory_used_bytes", "10737418240"),
    ("gpuscope_device_memory_free_bytes", "75161927680"),
    ("gpuscope_device_utilization_ratio", "0.5"),
    ("gpuscope_device_memory_bandwidth_utilization_ratio", "0.25"),
    ("gpuscope_device_temperature_celsius", "40"),
    ("gpuscope_device_fan_speed_ratio", "0.3"),
    ("gpuscope_device_power_usage_watts", "100"),
    ("gpuscope_device_power_limit_watts", "700"),
];

fn device_labels(index: usize) -> Value {
    json!({
        "instance": "10.0.0.1:9445", "job": "gpu", "hostname": "node-a",
        "index": index.to_string(), "uuid": format!("GPU-a-{index}"),
        "name": "NVIDIA H100 80GB HBM3",
    })
}

/// A stub Prometheus with one host, node-a, up, whose GPUs `0..devices` send [`PLAIN`] values
/// except those in `sent`: (GPU index, family, value as sent).
fn stub(devices: usize, sent: &[(usize, &str, &str)]) -> Stub {
    stub_with(devices, sent, HashMap::new())
}

fn stub_with(
    devices: usize,
    sent: &[(usize, &str, &str)],
    mut replies: HashMap<String, Reply>,
) -> Stub {
    hosts(
        &mut replies,
        T,
        &[("node-a", "10.0.0.1:9445", "999.5", "1")],
        &[],
    );
    for &(family, plain) in PLAIN {
        let series: Vec<(Value, String)> = (0..devices)
            .map(|i| {
                let v = sent
                    .iter()
                    .find(|(d, f, _)| *d == i && *f == family)
                    .map_or(plain, |(_, _, v)| v);
                (device_labels(i), v.to_string())
            })
            .collect();
        replies.insert(family.into(), Reply::Body(vector(T, &series)));
    }
    start(replies, None)
}

fn gpuscope(args: &[&str]) -> Output {
    cli::command(args)
        .env("NO_COLOR", "1")
        .env("COLUMNS", "200")
        .output()
        .expect("gpuscope runs")
}

fn stdout(out: &Output) -> String {
    cli::exited(0, out)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `snapshot --prometheus --json` of `stub`: the document and the stderr.
fn fleet_json(stub: &Stub) -> (Value, String) {
    let out = gpuscope(&["snapshot", "--prometheus", &stub.url, "--json"]);
    let doc = serde_json::from_str(&stdout(&out)).expect("JSON");
    (doc, stderr(&out))
}

fn devices(doc: &Value) -> &Vec<Value> {
    doc["hosts"][0]["devices"].as_array().expect("devices")
}

/// The table's line of GPU `index` of node-a.
fn table_row(table: &str, index: usize) -> String {
    table
        .lines()
        .find(|l| {
            l.split_whitespace()
                .take(2)
                .eq(["node-a", &index.to_string()])
        })
        .unwrap_or_else(|| panic!("no row for node-a {index}:\n{table}"))
        .to_string()
}

/// A device's memory figures in the JSON: all unknown when one of them is out of range.
const MEMORY_FIELDS: [&str; 3] = [
    "memory_total_bytes",
    "memory_used_bytes",
    "memory_free_bytes",
];

/// The notes of a device in the JSON: (family, value).
fn notes(d: &Value) -> Vec<(String, String)> {
    d["out_of_range"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|n| {
                    (
                        n["family"].as_str().unwrap_or("").to_string(),
                        n["value"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `gpuscope_device_up` of 2, -1, NaN or 0.5 showed the GPU `LOST` (anything but 1 read as 0).
#[test]
fn garbage_in_device_up_makes_the_gpu_state_unknown_not_lost() {
    let garbage = ["2", "-1", "NaN", "0.5"];
    let mut sent: Vec<(usize, &str, &str)> = garbage
        .iter()
        .enumerate()
        .map(|(i, v)| (i, "gpuscope_device_up", *v))
        .collect();
    // GPU 4 is really lost.
    sent.push((4, "gpuscope_device_up", "0"));
    let stub = stub(5, &sent);
    let (doc, err) = fleet_json(&stub);
    let d = devices(&doc);
    for (i, v) in garbage.iter().enumerate() {
        assert_eq!(d[i]["up"], Value::Null, "GPU {i}: {v}");
        assert_eq!(
            notes(&d[i]),
            [("gpuscope_device_up".to_string(), v.to_string())]
        );
        assert!(
            err.contains(&format!(
                "warning: node-a:{i}: gpuscope_device_up {v} is out of range (0 or 1)"
            )),
            "{err}"
        );
    }
    assert_eq!(d[4]["up"], false);
    assert!(d[4].get("out_of_range").is_none(), "{:#}", d[4]);

    let table = stdout(&gpuscope(&["snapshot", "--prometheus", &stub.url]));
    for i in 0..4 {
        let row = table_row(&table, i);
        assert!(!row.contains("LOST") && row.contains(" N/A "), "{row}");
    }
    assert!(table_row(&table, 4).contains("LOST"), "{table}");
    assert!(
        table.contains(
            "warning: node-a:1: gpuscope_device_up -1 is out of range (0 or 1): shown as N/A"
        ),
        "{table}"
    );
}

/// A power draw of -5 W showed `0W` in the table and the viewer, 1e308 W
/// `18446744073709551615W` in the table and `1000000000W` in the viewer.
#[test]
fn power_out_of_range_is_na_with_a_warning_never_0w_or_a_clamped_number() {
    let stub = stub(
        2,
        &[
            (0, "gpuscope_device_power_usage_watts", "-5"),
            (1, "gpuscope_device_power_usage_watts", "1e308"),
        ],
    );
    let (doc, err) = fleet_json(&stub);
    for (i, v) in ["-5", "1e308"].iter().enumerate() {
        let d = &devices(&doc)[i];
        assert_eq!(d["power_usage_watts"], Value::Null, "{v}");
        assert_eq!(d["power_limit_watts"], 700.0);
        assert!(
            err.contains(&format!(
                "node-a:{i}: gpuscope_device_power_usage_watts {v} is out of range (0 to 10000 W)"
            )),
            "{err}"
        );
    }
    let table = stdout(&gpuscope(&["snapshot", "--prometheus", &stub.url]));
    let viewer = stdout(&gpuscope(&["top", "--once", "--prometheus", &stub.url]));
    for (what, screen) in [("table", &table), ("top", &viewer)] {
        for bad in ["0W /", "18446744073709551615W", "1000000000W"] {
            assert!(!screen.contains(bad), "{what} shows {bad}:\n{screen}");
        }
        assert_eq!(screen.matches("N/A / 700W").count(), 2, "{what}:\n{screen}");
    }
    // The viewer counts them in its title (and tells the first on its status line).
    assert!(viewer.contains("2 values out of range"), "{viewer}");
}

/// Temperature -300 and 1e9, utilization 250 %, fan 300 %, negative bytes: shown as numbers
/// (or clamped) before.
#[test]
fn temperature_utilization_fan_and_bytes_out_of_range_are_na_with_a_warning() {
    let sent = [
        (0, "gpuscope_device_temperature_celsius", "-300"),
        (1, "gpuscope_device_temperature_celsius", "1e9"),
        (2, "gpuscope_device_utilization_ratio", "2.5"),
        (3, "gpuscope_device_fan_speed_ratio", "3"),
        (4, "gpuscope_device_memory_free_bytes", "-1"),
        (
            5,
            "gpuscope_device_memory_bandwidth_utilization_ratio",
            "NaN",
        ),
    ];
    let stub = stub(6, &sent);
    let (doc, err) = fleet_json(&stub);
    let fields = [
        "temperature_celsius",
        "temperature_celsius",
        "gpu_utilization_percent",
        "fan_speed_percent",
        "memory_free_bytes",
        "memory_utilization_percent",
    ];
    for ((i, family, v), field) in sent.iter().zip(fields) {
        let d = &devices(&doc)[*i];
        assert_eq!(d[field], Value::Null, "{family} {v}: {d:#}");
        assert_eq!(notes(d), [(family.to_string(), v.to_string())]);
        assert!(
            err.contains(&format!("node-a:{i}: {family} {v} is out of range")),
            "{err}"
        );
    }
    // The rest of each device is as sent.
    assert_eq!(devices(&doc)[0]["gpu_utilization_percent"], 50);
    let table = stdout(&gpuscope(&["snapshot", "--prometheus", &stub.url]));
    assert!(
        !table.contains("250%") && !table.contains("300%"),
        "{table}"
    );
    assert!(
        table.contains("warning: node-a:2: gpuscope_device_utilization_ratio 2.5"),
        "{table}"
    );
}

/// Memory used beyond the total was shown as it came, and `select` picked such a GPU for its
/// free memory; free memory of -1 byte was N/A silently.
#[test]
fn memory_used_beyond_the_total_is_na_with_a_warning_and_never_selected() {
    let sent = [
        // The most "free" memory of the host, but more used than it has.
        (0, "gpuscope_device_memory_used_bytes", "200000000000"),
        (0, "gpuscope_device_memory_free_bytes", "85000000000"),
        (1, "gpuscope_device_memory_free_bytes", "-1"),
    ];
    let stub = stub(3, &sent);
    let (doc, _) = fleet_json(&stub);
    let d0 = &devices(&doc)[0];
    cli::assert_null(d0, &MEMORY_FIELDS);
    assert_eq!(
        notes(d0),
        [(
            "gpuscope_device_memory_used_bytes".to_string(),
            "200000000000".to_string()
        )]
    );
    let out = gpuscope(&[
        "select",
        "--prometheus",
        &stub.url,
        "-n",
        "1",
        "-f",
        "1GiB",
        "--explain",
    ]);
    assert_eq!(stdout(&out), "node-a:2\n");
    let err = stderr(&out);
    assert!(
        err.contains("gpuscope: warning: node-a:0: gpuscope_device_memory_used_bytes 200000000000 is out of range"),
        "{err}"
    );
    let line = |dev: &str| {
        err.lines()
            .find(|l| l.starts_with(dev))
            .unwrap_or_else(|| panic!("{dev} in {err}"))
            .to_string()
    };
    assert!(
        line("node-a:0 ").contains(
            "refused: memory: N/A (gpuscope_device_memory_used_bytes 200000000000 is out of range"
        ),
        "{err}"
    );
    assert!(line("node-a:1 ").contains("refused"), "{err}");
}

/// A process series with PID 0 was listed as process 0; -3 or `abc` vanished without a word.
#[test]
fn a_pid_that_is_not_a_positive_integer_is_left_out_with_a_warning() {
    let process = |pid: &str, bytes: &str| {
        let mut l = device_labels(0);
        l["pid"] = json!(pid);
        l["username"] = json!("alice");
        (l, bytes.to_string())
    };
    let mut r = HashMap::new();
    r.insert(
        "gpuscope_process_gpu_memory_bytes".into(),
        Reply::Body(vector(
            T,
            &[
                process("0", "1024"),
                process("-3", "1024"),
                process("abc", "1024"),
                process("4242", "1e300"),
                process("4243", "2048"),
            ],
        )),
    );
    let stub = stub_with(1, &[], r);
    let (doc, err) = fleet_json(&stub);
    let d = &devices(&doc)[0];
    let pids: Vec<u64> = d["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pid"].as_u64().unwrap())
        .collect();
    assert_eq!(pids, [4242, 4243]);
    assert_eq!(d["processes"][0]["used_memory_bytes"], Value::Null);
    assert_eq!(d["processes"][1]["used_memory_bytes"], 2048);
    let refused: Vec<(Value, Value, Value)> = d["out_of_range"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["label"].clone(), n["pid"].clone(), n["value"].clone()))
        .collect();
    assert_eq!(
        refused,
        [
            (json!("pid"), Value::Null, json!("0")),
            (json!("pid"), Value::Null, json!("-3")),
            (json!("pid"), Value::Null, json!("abc")),
            (Value::Null, json!(4242), json!("1e300")),
        ]
    );
    assert!(
        err.contains("node-a:0: gpuscope_process_gpu_memory_bytes label pid -3 is out of range (1 to 4294967295, digits only): its series is left out"),
        "{err}"
    );
    assert!(
        err.contains("node-a:0: gpuscope_process_gpu_memory_bytes of PID 4242 1e300 is out of range (0 to 16 TiB): shown as N/A"),
        "{err}"
    );
}

/// One exporter's `/metrics`, served once per connection on 127.0.0.1 for as long as the test
/// process lives.
fn stub_exporter(text: &'static str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(5)));
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
                text.len()
            );
        }
    });
    url
}

/// The same ranges hold for an exporter read directly (`--remote`).
#[test]
fn values_out_of_range_from_an_exporter_read_directly_are_na_with_a_warning() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64();
    let text: &'static str = Box::leak(
        format!(
            "gpuscope_exporter_sample_timestamp_seconds{{hostname=\"lab-a\"}} {now}\n\
             gpuscope_device_up{{hostname=\"lab-a\",index=\"0\"}} 2\n\
             gpuscope_device_power_usage_watts{{hostname=\"lab-a\",index=\"0\"}} -5\n\
             gpuscope_device_temperature_celsius{{hostname=\"lab-a\",index=\"0\"}} 1e9\n\
             gpuscope_device_memory_free_bytes{{hostname=\"lab-a\",index=\"0\"}} 1000\n"
        )
        .into_boxed_str(),
    );
    let url = stub_exporter(text);
    let out = gpuscope(&["snapshot", "--remote", &url, "--json"]);
    let doc: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    let d = &devices(&doc)[0];
    assert_eq!(d["up"], Value::Null);
    assert_eq!(d["power_usage_watts"], Value::Null);
    assert_eq!(d["temperature_celsius"], Value::Null);
    assert_eq!(d["memory_free_bytes"], 1000);
    assert_eq!(notes(d).len(), 3, "{d:#}");
    let err = stderr(&out);
    assert!(
        err.contains("lab-a:0: gpuscope_device_up 2 is out of range"),
        "{err}"
    );
}

/// A recording whose GPU said it used more memory than it has showed `11032MiB / 5912MiB`,
/// and `select` chose that GPU.
#[test]
fn memory_used_beyond_the_total_in_a_fixture_is_na_with_a_warning_and_never_selected() {
    let fx = edited_fixture::EditedFixture::new("old-driver", "used-over-total", |fx| {
        for frame in fx["frames"].as_array_mut().expect("frames") {
            let m = &mut frame["devices"]["0"]["memory_info"]["ok"];
            let total = m["total"].as_u64().expect("total");
            m["used"] = json!(total + 5 * GIB);
        }
    });
    let source = ["--fixture", &fx.path(), "--frame", "0"];
    let table = stdout(&gpuscope(&[&["snapshot"][..], &source].concat()));
    let row = table.lines().find(|l| l.starts_with("0 ")).expect("GPU 0");
    assert!(row.contains("N/A / N/A"), "{table}");
    assert!(
        table.contains("error: inconsistent memory answer: used"),
        "the warning under the device:\n{table}"
    );
    let json: Value = serde_json::from_str(&stdout(&gpuscope(
        &[&["snapshot", "--json"][..], &source].concat(),
    )))
    .expect("JSON");
    let d = &json["devices"][0];
    cli::assert_null(d, &MEMORY_FIELDS);
    assert!(
        d["errors"]
            .as_array()
            .expect("errors")
            .iter()
            .any(|e| e["field"] == "memory"),
        "{d:#}"
    );
    let info = stdout(&gpuscope(&[&["info", "0"][..], &source].concat()));
    assert!(!info.contains("11032"), "{info}");
    let out = gpuscope(&[&["select", "-n", "1", "--explain"][..], &source].concat());
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    assert!(
        stderr(&out).contains("refused: memory: N/A (inconsistent memory answer: used"),
        "{}",
        stderr(&out)
    );
}
