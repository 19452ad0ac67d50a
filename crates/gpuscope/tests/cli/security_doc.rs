//! docs/security.md is true to the code: each bound its tables give is the constant the code
//! applies (a bound changed in one place and not the other fails here), and every test a
//! table's "test" column names exists. The table of value ranges has its own test, gpu-fleet's
//! `values_doc.rs`.

use std::collections::HashSet;
use std::path::Path;

use gpu_backend::files::{MAX_CERTIFICATE_BYTES, MAX_CONFIG_BYTES, MAX_PASSWD_BYTES};
use gpu_backend::fixture::limits::MAX_FILE_BYTES;
use gpu_export::{BCRYPT_COSTS, LIMITS, LISTEN_BACKLOG, PASSED_KEPT, SUSPECTS_KEPT, SUSPECT_FOR};
use gpu_fleet::lookup::MAX_LOOKUPS;
use gpu_fleet::model::{CLOCK_SKEW_SECONDS, MAX_HOSTS, MAX_MODEL_BYTES};
use gpu_fleet::prom::{MAX_ANSWER_BYTES, MAX_LABELS, MAX_MESSAGE_CHARS, MAX_SERIES, MAX_WARNINGS};
use gpu_fleet::remote::{MAX_EXPOSITION_BYTES, MAX_READERS};
use gpu_fleet::values::{MAX_NOTES_PER_DEVICE, MAX_VALUE_CHARS};

/// The workspace's root.
fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn page() -> String {
    std::fs::read_to_string(root().join("docs/security.md")).expect("docs/security.md")
}

/// The cells of a table line (`| a | b |`).
fn cells(line: &str) -> Vec<String> {
    line.trim()
        .trim_matches('|')
        .split(" | ")
        .map(|c| c.trim().to_string())
        .collect()
}

/// Every table of the page: its lines of cells, the header first (the `|---|` line left out).
fn tables(page: &str) -> Vec<Vec<Vec<String>>> {
    let mut out: Vec<Vec<Vec<String>>> = Vec::new();
    let mut current: Vec<Vec<String>> = Vec::new();
    for line in page.lines().chain(std::iter::once("")) {
        if line.starts_with('|') {
            if !line.starts_with("|---") {
                current.push(cells(line));
            }
        } else if !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
    }
    out
}

/// The one row, of any table, whose first cell is `first`, or else begins with it.
fn row(page: &str, first: &str) -> Vec<String> {
    let all: Vec<Vec<String>> = tables(page)
        .into_iter()
        .flat_map(|t| t.into_iter().skip(1))
        .collect();
    let mut rows: Vec<Vec<String>> = all.iter().filter(|r| r[0] == first).cloned().collect();
    if rows.is_empty() {
        rows = all
            .into_iter()
            .filter(|r| r[0].starts_with(first))
            .collect();
    }
    assert_eq!(rows.len(), 1, "one row beginning {first:?}: {rows:?}");
    rows.into_iter().next().unwrap_or_default()
}

/// `n` with a comma between thousands, as the page writes numbers.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn mib(bytes: u64) -> String {
    format!("{} MiB", bytes >> 20)
}

#[test]
fn the_bounds_the_page_gives_are_the_codes() {
    let page = page();
    let checks: Vec<(&str, String)> = vec![
        // The fleet readers.
        ("name lookups", format!("at most {MAX_LOOKUPS} at once")),
        ("the fleet's model", mib(MAX_MODEL_BYTES as u64)),
        ("hosts", thousands(MAX_HOSTS)),
        (
            "a host's sample time",
            format!("at most {CLOCK_SKEW_SECONDS} s after"),
        ),
        ("size of one answer", mib(MAX_ANSWER_BYTES)),
        (
            "warnings and infos of one answer",
            format!("{MAX_WARNINGS} kept"),
        ),
        (
            "a message from Prometheus",
            format!("{MAX_MESSAGE_CHARS} characters"),
        ),
        ("series of one answer", thousands(MAX_SERIES)),
        (
            "labels of one series",
            format!("{MAX_LABELS} (`MAX_LABELS`)"),
        ),
        ("size of an answer", mib(MAX_EXPOSITION_BYTES)),
        ("reader threads", format!("{MAX_READERS} at once")),
        // The exporter.
        (
            "connections waiting to be accepted",
            LISTEN_BACKLOG.to_string(),
        ),
        ("connections from one client", LIMITS.per_client.to_string()),
        ("connections in all", LIMITS.total.to_string()),
        ("the reserve", LIMITS.reserve.to_string()),
        (
            "a whole request head",
            format!("{} s", LIMITS.header_timeout.as_secs()),
        ),
        (
            "request head size",
            format!("{} KiB", LIMITS.max_head >> 10),
        ),
        ("header lines", LIMITS.max_headers.to_string()),
        (
            "a connection's life",
            format!("{} min", LIMITS.max_age.as_secs() / 60),
        ),
        (
            "bcrypt cost of a user's hash",
            format!("{:02} to {:02}", BCRYPT_COSTS.start(), BCRYPT_COSTS.end()),
        ),
        (
            "bcrypt checks running at once",
            LIMITS.auth_workers.to_string(),
        ),
        (
            "bcrypt checks one client has waiting or running",
            LIMITS.auth_per_client.to_string(),
        ),
        ("passed checks remembered", PASSED_KEPT.to_string()),
        (
            "clients remembered as failing",
            format!("{SUSPECTS_KEPT}, each for {} s", SUSPECT_FOR.as_secs()),
        ),
        // Files.
        ("`export --web.config.file`", mib(MAX_CONFIG_BYTES)),
        (
            "its `tls_server_config.cert_file`",
            mib(MAX_CERTIFICATE_BYTES),
        ),
        ("its `tls_server_config.key_file`", mib(MAX_CONFIG_BYTES)),
        ("`--prometheus-password-file`", mib(MAX_CONFIG_BYTES)),
        (
            "`--prometheus-ca`, `--prometheus-cert`",
            mib(MAX_CERTIFICATE_BYTES),
        ),
        ("`--prometheus-key`", mib(MAX_CONFIG_BYTES)),
        ("`--fixture`", mib(MAX_FILE_BYTES)),
        ("`/etc/passwd`", mib(MAX_PASSWD_BYTES)),
    ];
    let mut wrong = Vec::new();
    for (first, value) in &checks {
        let r = row(&page, first);
        let cell = r.get(1).cloned().unwrap_or_default();
        // The value cell begins with the bound, or says it in so many words ("at most 16 at
        // once") where it follows an explanation.
        let said =
            cell.starts_with(value.as_str()) || (value.contains(' ') && cell.contains(value));
        if !said {
            wrong.push(format!(
                "{first}: the page says {cell:?}, the code {value:?}"
            ));
        }
    }
    // The reserve's own row names the connections a client may hold to be given one.
    let reserve = row(&page, "the reserve");
    if !reserve[0].contains(&format!("fewer than {}", LIMITS.reserve_per_client)) {
        wrong.push(format!("the reserve: {:?}", reserve[0]));
    }
    // What a device keeps of its values out of range, in the prose of "Values".
    for said in [
        format!("cut to {MAX_VALUE_CHARS} characters"),
        format!("at most {MAX_NOTES_PER_DEVICE} a device"),
    ] {
        if !page.contains(&said) {
            wrong.push(format!("\"Values\" does not say {said:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The names of the functions of every Rust file under `dir`.
fn functions(dir: &Path, out: &mut HashSet<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            functions(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            for (i, _) in text.match_indices("fn ") {
                let name: String = text[i + 3..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    out.insert(name);
                }
            }
        }
    }
}

#[test]
fn every_test_the_page_names_exists() {
    let mut known = HashSet::new();
    functions(&root().join("crates"), &mut known);
    functions(&root().join("xtask"), &mut known);
    let page = page();
    let mut named = 0;
    let mut missing = Vec::new();
    for table in tables(&page) {
        let Some(col) = table[0].iter().position(|h| h == "test" || h == "tests") else {
            continue;
        };
        for r in table.iter().skip(1) {
            let cell = r.get(col).cloned().unwrap_or_default();
            // What is between backticks, the last `::` part of it: a name of snake_case
            // words (file names, paths and types are left aside).
            for quoted in cell.split('`').skip(1).step_by(2) {
                let name = quoted.rsplit("::").next().unwrap_or_default();
                let is_name = name.matches('_').count() >= 2
                    && name
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
                if is_name {
                    named += 1;
                    if !known.contains(name) {
                        missing.push(name.to_string());
                    }
                }
            }
        }
    }
    assert!(
        named > 50,
        "only {named} tests named: is the page's layout still read?"
    );
    assert!(
        missing.is_empty(),
        "tests the page names that do not exist: {missing:?}"
    );
}
