//! `--remote URL...`: a small lab without Prometheus reads its gpuscope exporters directly.
//!
//! Each exporter's `/metrics` (the Prometheus text format it serves to every client that does
//! not ask for OpenMetrics) is read, at once for all exporters, and its samples folded into the
//! same fleet model as Prometheus's answers: the same families, the same labels, one host per
//! exporter. An exporter that cannot be read is a host that is down.

use std::borrow::Cow;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::model::{Fleet, FleetBuilder, DEVICE_FAMILIES, PROCESS_FAMILIES};
use crate::names::SAMPLE_TIME_FAMILY;
use crate::prom::{parse_value, ClientOptions, Connection, Series, SetupError};

/// The largest exposition read from one exporter, bytes.
const MAX_EXPOSITION_BYTES: u64 = 64 << 20;

/// Exporters read directly.
#[derive(Clone)]
pub struct Remote {
    connection: Connection,
    urls: Vec<String>,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote").field("urls", &self.urls).finish()
    }
}

/// Why the exporters cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// A URL that is not http(s).
    #[error("{0:?} is not an http:// or https:// URL")]
    Url(String),
    /// A TLS file that cannot be used.
    #[error(transparent)]
    Setup(#[from] SetupError),
}

impl Remote {
    /// A reader of these exporters (`http://node1:9445`; `/metrics` is added when the URL has
    /// no path), with the TLS settings and basic auth of `options` (its `url` is not used).
    ///
    /// # Errors
    ///
    /// A URL that is not http(s), a TLS file that cannot be used.
    pub fn new(urls: &[String], options: &ClientOptions) -> Result<Remote, RemoteError> {
        let mut out = Vec::new();
        for url in urls {
            let rest = url
                .strip_prefix("http://")
                .or_else(|| url.strip_prefix("https://"))
                .ok_or_else(|| RemoteError::Url(url.clone()))?;
            if rest.is_empty() {
                return Err(RemoteError::Url(url.clone()));
            }
            out.push(if rest.contains('/') {
                url.clone()
            } else {
                format!("{url}/metrics")
            });
        }
        Ok(Remote {
            connection: Connection::new(options)?,
            urls: out,
        })
    }

    /// Reads every exporter at once and builds the fleet; one that cannot be read is down.
    pub fn refresh(&self, stale_after: f64) -> Fleet {
        let texts: Vec<Result<String, String>> = std::thread::scope(|scope| {
            let handles: Vec<_> = self
                .urls
                .iter()
                .map(|url| scope.spawn(move || self.read(url)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err("reader failed".into())))
                .collect()
        });
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let mut b = FleetBuilder::new();
        b.evaluated_at(Some(now));
        for (url, text) in self.urls.iter().zip(texts) {
            match text {
                Ok(text) => fold_exposition(&mut b, url, &text, now),
                Err(e) => {
                    b.error(url, e);
                    b.unreachable(url);
                }
            }
        }
        b.finish(self.urls.join(" "), stale_after, true)
    }

    /// One exporter's exposition, or why not; logged at `debug` with its time.
    fn read(&self, url: &str) -> Result<String, String> {
        let started = std::time::Instant::now();
        let answer = self.read_untimed(url);
        let took_ms = started.elapsed().as_micros() as f64 / 1000.0;
        let url = without_userinfo(url);
        let url = gpu_devices::text::Escaped(&url);
        match &answer {
            Ok(text) => tracing::debug!(%url, bytes = text.len(), took_ms, "exporter read"),
            Err(e) => {
                let error = gpu_devices::text::Escaped(e);
                tracing::debug!(%url, %error, took_ms, "exporter read failed")
            }
        }
        answer
    }

    fn read_untimed(&self, url: &str) -> Result<String, String> {
        let mut response = self
            .connection
            .get(url)
            .header("Accept", "text/plain;version=0.0.4")
            .call()
            .map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        if status != 200 {
            return Err(format!("the exporter answered HTTP {status}"));
        }
        response
            .body_mut()
            .with_config()
            .limit(MAX_EXPOSITION_BYTES)
            .read_to_string()
            .map_err(|e| e.to_string())
    }
}

/// Folds one exporter's text exposition into the fleet, as host `url`.
pub fn fold_exposition(b: &mut FleetBuilder, url: &str, text: &str, now: f64) {
    for line in text.lines() {
        let Some((name, labels, value)) = parse_line(line) else {
            continue;
        };
        let series = Series {
            metric: labels,
            value: (now, Cow::Borrowed(value)),
        };
        if name == SAMPLE_TIME_FAMILY {
            b.sample_time(&series, Some(url));
        } else if let Some(&(_, f)) = DEVICE_FAMILIES.iter().find(|(n, _)| *n == name) {
            b.device(f, &series, Some(url));
        } else if let Some(&(_, f)) = PROCESS_FAMILIES.iter().find(|(n, _)| *n == name) {
            b.process(f, &series, Some(url));
        }
    }
}

/// `url` with any `user:password@` left out, for the log.
pub fn without_userinfo(url: &str) -> Cow<'_, str> {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (&url[..scheme.len() + 3], rest),
        None => ("", url),
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}{}", &rest[at + 1..]).into(),
        None => url.into(),
    }
}

/// A sample's labels, borrowed from the text where no escape had to be undone.
pub type Labels<'a> = crate::prom::LabelSet<'a>;

/// One sample line of the text format: `name{label="value",...} value [timestamp]`; `None`
/// for comments, blank lines and anything malformed.
pub fn parse_line(line: &str) -> Option<(&str, Labels<'_>, &str)> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let name_end = line
        .find(|c: char| c == '{' || c.is_whitespace())
        .unwrap_or(line.len());
    let name = &line[..name_end];
    if name.is_empty() {
        return None;
    }
    let mut labels = Labels::default();
    let mut rest = &line[name_end..];
    if let Some(after) = rest.strip_prefix('{') {
        rest = after;
        loop {
            rest = rest.trim_start_matches([' ', ',']);
            if let Some(after) = rest.strip_prefix('}') {
                rest = after;
                break;
            }
            let eq = rest.find('=')?;
            let key = rest[..eq].trim();
            rest = rest[eq + 1..].strip_prefix('"')?;
            let (value, after) = quoted(rest)?;
            labels.insert(Cow::Borrowed(key), value);
            rest = after;
        }
    }
    let value = rest.split_whitespace().next()?;
    parse_value(value)?;
    Some((name, labels, value))
}

/// A label value up to its closing quote, unescaped (`\\`, `\"`, `\n`), and what follows.
fn quoted(text: &str) -> Option<(Cow<'_, str>, &str)> {
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        match (escaped, c) {
            (false, '\\') => escaped = true,
            (false, '"') => {
                let raw = &text[..i];
                let value = if raw.contains('\\') {
                    let mut out = String::with_capacity(raw.len());
                    let mut chars = raw.chars();
                    while let Some(c) = chars.next() {
                        if c == '\\' {
                            match chars.next() {
                                Some('n') => out.push('\n'),
                                Some(other) => out.push(other),
                                None => {}
                            }
                        } else {
                            out.push(c);
                        }
                    }
                    Cow::Owned(out)
                } else {
                    Cow::Borrowed(raw)
                };
                return Some((value, &text[i + 1..]));
            }
            _ => escaped = false,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_logged_without_their_credentials() {
        use super::without_userinfo as w;
        assert_eq!(
            w("http://ops:s3cret@node1:9445/metrics"),
            "http://node1:9445/metrics"
        );
        assert_eq!(w("https://node1:9445/a@b"), "https://node1:9445/a@b");
        assert_eq!(w("http://node1:9445"), "http://node1:9445");
        assert_eq!(w("http://a@b@node1"), "http://node1");
        assert_eq!(w("ops@node1/x"), "node1/x");
    }

    #[test]
    fn sample_lines_with_labels_escapes_and_timestamps() {
        let (name, labels, value) =
            parse_line(r#"gpuscope_device_up{hostname="a \"b\"\\c",index="0:1"} 1 1700000000"#)
                .unwrap();
        assert_eq!(name, "gpuscope_device_up");
        assert_eq!(labels.get("hostname").unwrap(), "a \"b\"\\c");
        assert_eq!(labels.get("index").unwrap(), "0:1");
        assert_eq!(value, "1");
        let (name, labels, value) = parse_line("gpuscope_host_cpus 64").unwrap();
        assert_eq!(
            (name, labels, value),
            ("gpuscope_host_cpus", Labels::default(), "64")
        );
        for bad in [
            "# HELP x y",
            "",
            "x{a=\"1} 2",
            "x{a=1} 2",
            "x{a=\"1\"}",
            "x{a=\"1\"} y",
        ] {
            assert!(parse_line(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn an_exposition_becomes_one_host_named_by_its_hostname_label() {
        let text = "# TYPE gpuscope_device_up gauge\n\
            gpuscope_device_up{hostname=\"lab1\",index=\"0\",uuid=\"GPU-1\",name=\"T4\"} 1\n\
            gpuscope_device_memory_free_bytes{hostname=\"lab1\",index=\"0\",uuid=\"GPU-1\",name=\"T4\"} 1024\n\
            gpuscope_exporter_sample_timestamp_seconds{hostname=\"lab1\"} 99.5\n\
            gpuscope_process_gpu_memory_bytes{hostname=\"lab1\",index=\"0\",pid=\"7\",username=\"u\"} 5\n";
        let mut b = FleetBuilder::new();
        fold_exposition(&mut b, "http://lab1:9445/metrics", text, 100.0);
        let f = b.finish("x".into(), 30.0, true);
        assert_eq!(f.hosts.len(), 1);
        let h = &f.hosts[0];
        assert_eq!(h.host, "lab1");
        assert_eq!(h.instance.as_deref(), Some("http://lab1:9445/metrics"));
        assert_eq!(h.state, crate::model::HostState::Up);
        assert_eq!(h.sample_age_seconds, Some(0.5));
        assert_eq!(h.devices[0].memory_free_bytes, Some(1024));
        assert_eq!(h.devices[0].processes[0].pid, 7);
    }

    proptest::proptest! {
        #[test]
        fn any_line_parses_or_is_skipped_without_panicking(line in "\\PC{0,120}") {
            let _ = parse_line(&line);
        }

        #[test]
        fn label_values_round_trip_through_the_escapes(v in "\\PC{0,40}") {
            let escaped = v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
            let line = format!("m{{l=\"{escaped}\"}} 1");
            let (_, labels, _) = parse_line(&line).unwrap();
            proptest::prop_assert_eq!(labels.get("l").unwrap().as_ref(), v.as_str());
        }
    }
}
