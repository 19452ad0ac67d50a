//! Encoding families as exposition text: the Prometheus text format 0.0.4 (what `curl`,
//! `promtool check metrics` and older scrapers read) and OpenMetrics 1.0 (what Prometheus asks
//! for), the latter through the prometheus-client crate's encoder; gzip; and [`Exposition`],
//! one sample turned into families and encoded on demand.

use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use bytes::Bytes;
use flate2::write::GzEncoder;
use flate2::Compression;

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

use crate::doors::build;
use crate::families::{Family, Inputs, Kind, LabelledValue, Options};

/// The content type of the Prometheus text format.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
/// The content type of OpenMetrics text.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Families in the Prometheus text format 0.0.4. Families without samples are left out.
pub fn encode_text(families: &[Family]) -> String {
    let mut out = String::with_capacity(64 * 1024);
    for f in families.iter().filter(|f| !f.samples.is_empty()) {
        let suffix = if f.kind == Kind::Counter {
            "_total"
        } else {
            ""
        };
        let kind = match f.kind {
            Kind::Gauge => "gauge",
            Kind::Counter | Kind::LegacyCounter => "counter",
        };
        out.push_str("# HELP ");
        out.push_str(f.name);
        out.push_str(suffix);
        out.push(' ');
        escape_help(&mut out, f.help);
        out.push_str("\n# TYPE ");
        out.push_str(f.name);
        out.push_str(suffix);
        out.push(' ');
        out.push_str(kind);
        out.push('\n');
        for s in &f.samples {
            out.push_str(f.name);
            out.push_str(suffix);
            write_labels(&mut out, s);
            out.push(' ');
            write_value(&mut out, s.value);
            out.push('\n');
        }
    }
    out
}

fn escape_help(out: &mut String, help: &str) {
    for c in help.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

fn write_labels(out: &mut String, s: &LabelledValue) {
    if s.labels.is_empty() {
        return;
    }
    out.push('{');
    for (i, (name, value)) in s.labels.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(name);
        out.push_str("=\"");
        for c in value.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '"' => out.push_str("\\\""),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
        out.push('"');
    }
    out.push('}');
}

/// A value as Go's `strconv.FormatFloat(v, 'g', -1, 64)` would write it for Prometheus:
/// integers without a fraction, others in the shortest form that reads back exactly.
fn write_value(out: &mut String, v: f64) {
    if v.is_nan() {
        out.push_str("NaN");
    } else if v.is_infinite() {
        out.push_str(if v > 0.0 { "+Inf" } else { "-Inf" });
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        let _ = write!(out, "{}", v as i64);
    } else {
        let _ = write!(out, "{v}");
    }
}

/// Families in OpenMetrics 1.0 text, ending with `# EOF`. Families without samples are left out.
/// Takes the families shared: prometheus-client's collectors own what they encode.
pub fn encode_openmetrics(families: Arc<[Family]>) -> Result<String, std::fmt::Error> {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Collected(families)));
    let mut out = String::with_capacity(64 * 1024);
    prometheus_client::encoding::text::encode(&mut out, &registry)?;
    Ok(out)
}

/// Families handed to prometheus-client's encoder.
#[derive(Debug)]
struct Collected(Arc<[Family]>);

impl prometheus_client::collector::Collector for Collected {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        encode_families(&self.0, &mut encoder)
    }
}

/// Hands `families` to a prometheus-client encoder, as a [`Collector`] does: each family with
/// samples as a descriptor (its unit apart, as OpenMetrics wants) and its labelled values.
/// Families without samples are left out.
///
/// [`Collector`]: prometheus_client::collector::Collector
///
/// # Errors
///
/// What the encoder answers (writing to its output failed).
pub fn encode_families(
    families: &[Family],
    encoder: &mut DescriptorEncoder,
) -> Result<(), std::fmt::Error> {
    for f in families.iter().filter(|f| !f.samples.is_empty()) {
        // prometheus-client appends the unit to the name itself.
        let (base, unit) = match f.unit {
            Some(u) => (
                f.name
                    .strip_suffix(u)
                    .and_then(|b| b.strip_suffix('_'))
                    .unwrap_or(f.name),
                Some(unit_of(u)),
            ),
            None => (f.name, None),
        };
        let kind = match f.kind {
            Kind::Gauge => MetricType::Gauge,
            Kind::Counter => MetricType::Counter,
            Kind::LegacyCounter => MetricType::Unknown,
        };
        let mut family = encoder.encode_descriptor(base, f.help, unit.as_ref(), kind)?;
        for s in &f.samples {
            let labels: Vec<(&str, &str)> =
                s.labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let metric = family.encode_family(&labels)?;
            Value(f.kind, s.value).encode(metric)?;
        }
    }
    Ok(())
}

fn unit_of(unit: &str) -> Unit {
    match unit {
        "bytes" => Unit::Bytes,
        "seconds" => Unit::Seconds,
        "celsius" => Unit::Celsius,
        "joules" => Unit::Joules,
        other => Unit::Other(other.to_string()),
    }
}

/// One value, encoded as its family's kind.
#[derive(Debug)]
struct Value(Kind, f64);

impl EncodeMetric for Value {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        match self.0 {
            // An `unknown` sample is written as a gauge's is: the name and the value.
            Kind::Gauge | Kind::LegacyCounter => encoder.encode_gauge(&self.1),
            Kind::Counter => encoder
                .encode_counter::<prometheus_client::encoding::NoLabelSet, f64, f64>(&self.1, None),
        }
    }

    fn metric_type(&self) -> MetricType {
        match self.0 {
            Kind::Gauge => MetricType::Gauge,
            Kind::Counter => MetricType::Counter,
            Kind::LegacyCounter => MetricType::Unknown,
        }
    }
}

/// One sample, turned into families and encoded on demand: each format (and its gzipped form)
/// is made on the first scrape that asks for it and kept for the scrapes after, so a sample no
/// scrape asks for costs neither (Prometheus scrapes every 15 s or more; the exporter samples
/// every second).
#[derive(Debug)]
pub struct Exposition {
    inputs: Inputs,
    options: Arc<Options>,
    families: OnceLock<Arc<[Family]>>,
    /// When the sample was taken.
    pub taken: Instant,
    text: OnceLock<Bytes>,
    openmetrics: OnceLock<Result<Bytes, String>>,
    text_gzip: OnceLock<Bytes>,
    openmetrics_gzip: OnceLock<Result<Bytes, String>>,
}

impl Exposition {
    /// A sample of `inputs` taken at `taken`, published with `options`.
    pub fn new(inputs: Inputs, options: Arc<Options>, taken: Instant) -> Exposition {
        Exposition {
            inputs,
            options,
            families: OnceLock::new(),
            taken,
            text: OnceLock::new(),
            openmetrics: OnceLock::new(),
            text_gzip: OnceLock::new(),
            openmetrics_gzip: OnceLock::new(),
        }
    }

    /// The sample's families (built on the first call for this sample only).
    pub fn families(&self) -> &Arc<[Family]> {
        self.families
            .get_or_init(|| build(&self.inputs, &self.options).into())
    }

    /// The Prometheus text format 0.0.4 (encoded on the first call for this sample only).
    pub fn text(&self) -> Bytes {
        self.text
            .get_or_init(|| encode_text(self.families()).into_bytes().into())
            .clone()
    }

    /// OpenMetrics 1.0 (encoded on the first call for this sample only).
    ///
    /// # Errors
    ///
    /// Why prometheus-client could not encode the families.
    pub fn openmetrics(&self) -> Result<Bytes, String> {
        self.openmetrics
            .get_or_init(|| {
                encode_openmetrics(Arc::clone(self.families()))
                    .map(|t| t.into_bytes().into())
                    .map_err(|e| format!("cannot encode OpenMetrics text: {e}"))
            })
            .clone()
    }

    /// The text format, gzipped (compressed on the first call for this sample only).
    pub fn text_gzip(&self) -> Bytes {
        self.text_gzip.get_or_init(|| gzip(&self.text())).clone()
    }

    /// OpenMetrics, gzipped (compressed on the first call for this sample only).
    ///
    /// # Errors
    ///
    /// As [`Exposition::openmetrics`].
    pub fn openmetrics_gzip(&self) -> Result<Bytes, String> {
        self.openmetrics_gzip
            .get_or_init(|| self.openmetrics().map(|b| gzip(&b)))
            .clone()
    }
}

/// gzip at the default level: an 8-GPU exposition with 64 processes goes from about 160 KB to
/// under 10 KB.
pub fn gzip(data: &[u8]) -> Bytes {
    let mut e = GzEncoder::new(
        Vec::with_capacity(data.len() / 8 + 64),
        Compression::default(),
    );
    // Writing to a Vec cannot fail.
    let _ = e.write_all(data);
    e.finish().map(Bytes::from).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read as _;

    fn family(kind: Kind, labels: Vec<(&'static str, String)>, value: f64) -> Family {
        Family {
            name: "gpuscope_test_bytes",
            help: "A test \\ family.",
            unit: Some("bytes"),
            kind,
            samples: vec![LabelledValue { labels, value }],
        }
    }

    #[test]
    fn text_names_counters_total_and_escapes_labels() {
        let text = encode_text(&[family(
            Kind::Counter,
            vec![("command", "a \"b\"\\c\nd".into())],
            1.5,
        )]);
        assert_eq!(
            text,
            "# HELP gpuscope_test_bytes_total A test \\\\ family.\n\
             # TYPE gpuscope_test_bytes_total counter\n\
             gpuscope_test_bytes_total{command=\"a \\\"b\\\"\\\\c\\nd\"} 1.5\n"
        );
    }

    #[test]
    fn text_writes_integers_without_fraction() {
        let text = encode_text(&[family(Kind::Gauge, vec![], 85899345920.0)]);
        assert!(
            text.ends_with("gpuscope_test_bytes 85899345920\n"),
            "{text}"
        );
    }

    #[test]
    fn openmetrics_has_unit_and_eof() {
        let text = encode_openmetrics(Arc::from(vec![family(
            Kind::Counter,
            vec![("index", "0".into())],
            2.0,
        )]))
        .expect("encodes");
        assert!(
            text.contains("# TYPE gpuscope_test_bytes counter\n"),
            "{text}"
        );
        assert!(
            text.contains("# UNIT gpuscope_test_bytes bytes\n"),
            "{text}"
        );
        assert!(
            text.contains("gpuscope_test_bytes_total{index=\"0\"} 2.0\n"),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    /// Reads back the value of the one label of a one-sample text exposition.
    fn label_value_of(text: &str) -> String {
        let line = text
            .lines()
            .find(|l| !l.starts_with('#'))
            .expect("a sample");
        let quoted = &line[line.find("=\"").expect("a label") + 2..line.rfind("\"}").expect("end")];
        let mut out = String::new();
        let mut chars = quoted.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some('n') => out.push('\n'),
                    Some(c @ ('\\' | '"')) => out.push(c),
                    other => panic!("bad escape {other:?} in {line}"),
                },
                '"' | '\n' => panic!("unescaped {c:?} in {line}"),
                c => out.push(c),
            }
        }
        out
    }

    proptest::proptest! {
        #[test]
        fn any_label_value_reads_back(value in "(?s).*", v in proptest::num::f64::NORMAL) {
            let text = encode_text(&[family(Kind::Gauge, vec![("command", value.clone())], v)]);
            proptest::prop_assert_eq!(text.lines().count(), 3);
            proptest::prop_assert_eq!(label_value_of(&text), value);
            let written = text.lines().last().and_then(|l| l.rsplit(' ').next()).unwrap_or("");
            proptest::prop_assert_eq!(written.parse::<f64>().ok(), Some(v));
        }
    }

    #[test]
    fn empty_families_are_left_out() {
        let mut f = family(Kind::Gauge, vec![], 1.0);
        f.samples.clear();
        assert_eq!(encode_text(&[f.clone()]), "");
        assert_eq!(
            encode_openmetrics(Arc::from(vec![f])).expect("encodes"),
            "# EOF\n"
        );
    }

    #[test]
    fn each_form_is_encoded_once_and_gzip_decompresses_to_the_text() {
        let e = crate::test_support::exposition();
        let text = e.text();
        let text_str = std::str::from_utf8(&text).unwrap();
        crate::test_support::assert_every_device_and_process(text_str);
        let gz = e.text_gzip();
        assert!(gz.len() < text.len() / 10, "{} bytes", gz.len());
        let mut back = Vec::new();
        flate2::read::GzDecoder::new(&gz[..])
            .read_to_end(&mut back)
            .unwrap();
        assert_eq!(back, text);
        // Later calls hand out the same buffers, not new encodings.
        assert_eq!(e.text().as_ptr(), text.as_ptr());
        assert_eq!(e.text_gzip().as_ptr(), gz.as_ptr());
        let om = e.openmetrics().unwrap();
        assert!(om.ends_with(b"# EOF\n"));
        assert_eq!(e.openmetrics().unwrap().as_ptr(), om.as_ptr());
        // Both formats carry the same samples.
        let count = |b: &[u8]| {
            b.split(|&c| c == b'\n')
                .filter(|l| !l.is_empty() && l[0] != b'#')
                .count()
        };
        assert_eq!(count(&text), count(&om));
    }
}
