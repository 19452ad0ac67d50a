//! Chooses GPUs across a fleet and prints them, `host:index` a line, best first.
//!
//! ```text
//! cargo run -p gpu-fleet --example choose -- [PROMETHEUS_URL [COUNT [MIN_FREE_GIB]]]
//! ```
//!
//! COUNT defaults to 2 and MIN_FREE_GIB to 20. With no URL (or `-` for it) it starts a stub
//! Prometheus on 127.0.0.1 that answers as one scraping three hosts would (two with two H100s
//! each, one whose exporter is down), so that it runs anywhere, CI included. Exit 1 when the
//! fleet cannot be read or not enough GPUs qualify, 2 for bad arguments.

use std::process::ExitCode;
use std::time::Duration;

use gpu_fleet::{ClientOptions, Criteria, FleetSource};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (url, count, min_free_gib) = match parse(&args) {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("choose: {e}\nusage: choose [PROMETHEUS_URL [COUNT [MIN_FREE_GIB]]]");
            return ExitCode::from(2);
        }
    };
    let url = url.unwrap_or_else(stub::start);
    match choose(&url, count, min_free_gib) {
        Ok(names) => {
            println!("{}", names.join("\n"));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("choose: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The URL (`None`: the stub), how many GPUs (1 to 1024) and the GiB each must have free (at
/// most 1 TiB).
fn parse(args: &[String]) -> Result<(Option<String>, usize, u64), String> {
    if args.len() > 3 {
        return Err(format!("{} arguments, at most 3", args.len()));
    }
    let url = args.first().filter(|u| *u != "-").cloned();
    let count = match args.get(1) {
        None => 2,
        Some(text) => text
            .parse()
            .ok()
            .filter(|n| (1..=1024).contains(n))
            .ok_or_else(|| format!("COUNT {text:?}: a whole number from 1 to 1024"))?,
    };
    let min_free_gib = match args.get(2) {
        None => 20,
        Some(text) => text
            .parse()
            .ok()
            .filter(|g| *g <= 1024)
            .ok_or_else(|| format!("MIN_FREE_GIB {text:?}: a whole number from 0 to 1024"))?,
    };
    Ok((url, count, min_free_gib))
}

/// The names of `count` GPUs with `min_free_gib` GiB free across the fleet behind `url`.
fn choose(
    url: &str,
    count: usize,
    min_free_gib: u64,
) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let source = FleetSource::prometheus(&ClientOptions::new(url), Duration::from_secs(30))?;
    let fleet = source.refresh()?;
    for e in &fleet.errors {
        eprintln!("query {}: {}", e.query, e.error);
    }
    let criteria = Criteria::new()
        .count(count)
        .min_free_memory(min_free_gib << 30);
    let chosen = gpu_fleet::select(&fleet, &criteria)?;
    for (host, state) in &chosen.skipped {
        eprintln!("{host}: left out, its exporter is {}", state.as_str());
    }
    let names = chosen.identifiers(false);
    if chosen.selection.is_short() {
        return Err(format!(
            "{} of {count} GPUs with {min_free_gib} GiB free: {}",
            names.len(),
            names.join(" ")
        )
        .into());
    }
    Ok(names)
}

/// A stub Prometheus on 127.0.0.1 for the fleet of the module's documentation.
mod stub {
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;

    /// The time of every answer (Unix seconds).
    const NOW: u64 = 1_700_000_000;
    /// (host, GPU index, GiB free, utilization) of the hosts that are up; `node-c` is down.
    const DEVICES: [(&str, u32, u64, f64); 4] = [
        ("node-a", 0, 10, 0.9),
        ("node-a", 1, 60, 0.05),
        ("node-b", 0, 70, 0.0),
        ("node-b", 1, 30, 0.5),
    ];

    /// Starts the stub on a thread; its URL.
    pub fn start() -> String {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a port on 127.0.0.1");
        let url = format!("http://{}", listener.local_addr().expect("its address"));
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let mut reader = BufReader::new(stream);
                let mut request_line = String::new();
                let mut header = String::new();
                let _ = reader.read_line(&mut request_line);
                while reader.read_line(&mut header).unwrap_or(0) > 2 {
                    header.clear();
                }
                let target = request_line.split(' ').nth(1).unwrap_or("");
                let body = answer(target);
                let _ = write!(
                    reader.get_mut(),
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
                     Connection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        url
    }

    /// The answer to the query in `target` (`/api/v1/query?query=...`).
    fn answer(target: &str) -> String {
        let series = |labels: &str, value: String| {
            format!(r#"{{"metric":{{"job":"gpu",{labels}}},"value":[{NOW},"{value}"]}}"#)
        };
        let host = |h: &str| format!(r#""instance":"{h}:9445","hostname":"{h}""#);
        let result: Vec<String> = if target.ends_with("query=up") {
            [("node-a", 1), ("node-b", 1), ("node-c", 0)]
                .iter()
                .map(|(h, up)| series(&host(h), up.to_string()))
                .collect()
        } else if target.contains("sample_timestamp") {
            // node-c's exporter last answered ten minutes ago.
            [
                ("node-a", NOW - 1),
                ("node-b", NOW - 2),
                ("node-c", NOW - 600),
            ]
            .iter()
            .map(|(h, t)| series(&host(h), t.to_string()))
            .collect()
        } else if target.contains("gpuscope_device_") {
            DEVICES
                .iter()
                .map(|&(h, index, free_gib, utilization)| {
                    let value = if target.contains("memory_free") {
                        (free_gib << 30).to_string()
                    } else if target.contains("memory_total") {
                        (80u64 << 30).to_string()
                    } else if target.contains("memory_used") {
                        ((80 - free_gib) << 30).to_string()
                    } else if target.contains("device_utilization") {
                        utilization.to_string()
                    } else if target.contains("utilization") {
                        "0.2".into()
                    } else {
                        "1".into()
                    };
                    let labels =
                        format!(r#"{},"index":"{index}","uuid":"GPU-{h}-{index}""#, host(h));
                    series(&labels, value)
                })
                .collect()
        } else {
            Vec::new()
        };
        format!(
            r#"{{"status":"success","data":{{"resultType":"vector","result":[{}]}}}}"#,
            result.join(",")
        )
    }
}
