//! A small client of Prometheus's HTTP query API (`GET /api/v1/query`, instant vectors).
//!
//! Answers are parsed series by series straight into a callback, so that a fleet's answer
//! (64,000 process series for 1,000 hosts) never exists as a tree of maps in memory: only the
//! body's text and the model it is folded into do.

use std::borrow::Cow;
use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

/// The largest answer read, bytes: more than twice the largest answer of a fleet of 1,000
/// hosts with every process and command line (about 28 MB). The answer's text is held whole
/// while it is parsed (its labels are borrowed from it), so this bounds the memory one answer
/// costs; the model it is folded into has bounds of its own ([`crate::model::ModelLimits`]).
pub const MAX_ANSWER_BYTES: u64 = 64 << 20;

/// Warnings (and infos) kept from one answer; the others are counted, not kept.
pub const MAX_WARNINGS: usize = 16;

/// Series read from one answer (fifteen times the process series of 1,000 hosts with 8 GPUs
/// and 8 processes each); the others are counted and skipped.
pub const MAX_SERIES: usize = 1_000_000;

/// Labels of one series (the exporter's have about a dozen, Prometheus adds a few); a series
/// with more is counted and skipped.
pub const MAX_LABELS: usize = 64;

/// Characters kept of one message from Prometheus (a warning, an error); the rest is cut and
/// counted.
pub const MAX_MESSAGE_CHARS: usize = 512;

/// How much of an answer's lists is read: what [`parse_answer`] uses, and smaller values for
/// tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnswerLimits {
    /// Warnings and infos kept ([`MAX_WARNINGS`]).
    pub warnings: usize,
    /// Series read ([`MAX_SERIES`]).
    pub series: usize,
    /// Labels of one series ([`MAX_LABELS`]).
    pub labels: usize,
}

impl Default for AnswerLimits {
    /// [`MAX_WARNINGS`], [`MAX_SERIES`], [`MAX_LABELS`].
    fn default() -> AnswerLimits {
        AnswerLimits {
            warnings: MAX_WARNINGS,
            series: MAX_SERIES,
            labels: MAX_LABELS,
        }
    }
}

/// `text` cut to [`MAX_MESSAGE_CHARS`] characters, saying how many more there were.
fn bounded(text: &str) -> String {
    match text.char_indices().nth(MAX_MESSAGE_CHARS) {
        None => text.to_string(),
        Some((end, _)) => format!(
            "{}... ({} more characters not kept)",
            &text[..end],
            text[end..].chars().count()
        ),
    }
}

/// Why a query has no answer.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// Connecting, TLS, a timeout, or reading the body failed.
    #[error("cannot reach Prometheus: {0}")]
    Transport(String),
    /// Prometheus answered with an HTTP error and no usable body.
    #[error("Prometheus answered HTTP {status}: {body}")]
    Http {
        /// The status code.
        status: u16,
        /// The start of the body.
        body: String,
    },
    /// Prometheus said the query failed (`"status": "error"`).
    #[error("Prometheus refused the query ({kind}): {message}")]
    Refused {
        /// `errorType`: `bad_data`, `timeout`, `execution`, ...
        kind: String,
        /// `error`.
        message: String,
    },
    /// The body is not a Prometheus answer, or not an instant vector.
    #[error("not a Prometheus instant-vector answer: {0}")]
    Malformed(String),
    /// The refresh's time ([`ClientOptions::timeout`]) was spent before this query could be
    /// asked.
    #[error("not asked: the refresh's time limit ({}) was spent", seconds(*.0))]
    NotAsked(Duration),
}

/// A duration for people: `1.5 s`, `300 ms`.
fn seconds(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{} ms", d.as_millis())
    } else {
        format!("{} s", (d.as_secs_f64() * 10.0).round() / 10.0)
    }
}

/// A series' labels, in the order given, borrowed from the text where no escape had to be
/// undone. A list, not a hash map: a series has about ten labels, which a linear look-up finds
/// faster than hashing each name (the hashing took a sixth of the fleet viewer's CPU). A name
/// given twice (a JSON object may repeat a key) keeps both entries and the later one is the
/// label's value, as when a map is filled in order; adding a label never searches the list.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSet<'a>(Vec<(Cow<'a, str>, Cow<'a, str>)>);

impl<'a> LabelSet<'a> {
    /// The value of label `name` (its last one), if set.
    pub fn get(&self, name: &str) -> Option<&Cow<'a, str>> {
        self.0.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v)
    }

    /// Sets label `name`; it hides an earlier value.
    pub fn insert(&mut self, name: Cow<'a, str>, value: Cow<'a, str>) {
        self.0.push((name, value));
    }
}

impl<'a> FromIterator<(Cow<'a, str>, Cow<'a, str>)> for LabelSet<'a> {
    fn from_iter<I: IntoIterator<Item = (Cow<'a, str>, Cow<'a, str>)>>(iter: I) -> Self {
        let mut set = LabelSet::default();
        for (k, v) in iter {
            set.insert(k, v);
        }
        set
    }
}

/// Reads a series' labels into a set that is emptied first (one set serves every series of
/// an answer, so reading a series allocates nothing for its labels), at most `limit` of them:
/// gives whether they all fitted.
struct LabelsInto<'s, 'a> {
    labels: &'s mut LabelSet<'a>,
    limit: usize,
}

impl<'de: 'a, 'a> DeserializeSeed<'de> for LabelsInto<'_, 'a> {
    type Value = bool;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de: 'a, 'a> Visitor<'de> for LabelsInto<'_, 'a> {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object of label names and values")
    }
    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<bool, M::Error> {
        self.labels.0.clear();
        let mut fitted = true;
        while let Some(k) = map.next_key::<Borrowed<'de>>()? {
            if self.labels.0.len() < self.limit {
                let v: Borrowed<'de> = map.next_value()?;
                self.labels.insert(k.0, v.0);
            } else {
                map.next_value::<IgnoredAny>()?;
                fitted = false;
            }
        }
        Ok(fitted)
    }
}

/// Reads one series (`{"metric": {...}, "value": [t, "v"]}`) into `labels` (reused) and
/// gives it to `each`, unless it has more labels than the limit (then it is counted).
struct SeriesSeed<'s, 'e, 'a> {
    labels: &'s mut LabelSet<'a>,
    each: &'e mut dyn FnMut(&Series<'a>),
    info: &'e mut AnswerInfo,
}

impl<'de: 'a, 'a> DeserializeSeed<'de> for SeriesSeed<'_, '_, 'a> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de: 'a, 'a> Visitor<'de> for SeriesSeed<'_, '_, 'a> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a series (an object with metric and value)")
    }
    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<(), M::Error> {
        let mut metric = false;
        let mut fitted = true;
        let mut value: Option<(f64, Borrowed<'de>)> = None;
        while let Some(key) = map.next_key::<Borrowed<'de>>()? {
            match key.0.as_ref() {
                "metric" if metric => return Err(de::Error::duplicate_field("metric")),
                "metric" => {
                    fitted = map.next_value_seed(LabelsInto {
                        labels: &mut *self.labels,
                        limit: self.info.limits.labels,
                    })?;
                    metric = true;
                }
                "value" if value.is_some() => return Err(de::Error::duplicate_field("value")),
                "value" => value = Some(map.next_value()?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if !metric {
            return Err(de::Error::missing_field("metric"));
        }
        let (t, v) = value.ok_or_else(|| de::Error::missing_field("value"))?;
        if !fitted {
            self.info.series_with_too_many_labels += 1;
            return Ok(());
        }
        let series = Series {
            metric: std::mem::take(self.labels),
            value: (t, v.0),
        };
        self.info.series += 1;
        if self.info.evaluated_at.is_none() {
            self.info.evaluated_at = Some(t);
        }
        (self.each)(&series);
        *self.labels = series.metric;
        Ok(())
    }
}

/// A string borrowed from the JSON text where it holds no escape, owned where it does.
struct Borrowed<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Borrowed<'a> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Text;
        impl<'de> Visitor<'de> for Text {
            type Value = Borrowed<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Borrowed<'de>, E> {
                Ok(Borrowed(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Borrowed<'de>, E> {
                Ok(Borrowed(Cow::Owned(v.to_string())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Borrowed<'de>, E> {
                Ok(Borrowed(Cow::Owned(v)))
            }
        }
        d.deserialize_str(Text)
    }
}

/// One series of an instant vector, borrowed from the answer's text.
#[derive(Debug)]
pub struct Series<'a> {
    /// Labels (with `__name__` when the query keeps it).
    pub metric: LabelSet<'a>,
    /// `[evaluation time, "value"]`.
    pub value: (f64, Cow<'a, str>),
}

impl Series<'_> {
    /// The label's value, if set and not empty (Prometheus treats empty as unset).
    pub fn label(&self, name: &str) -> Option<&str> {
        self.metric
            .get(name)
            .map(|v| v.as_ref())
            .filter(|v| !v.is_empty())
    }

    /// The sample's value; `NaN`, `+Inf` and `-Inf` as Prometheus writes them; `None` when
    /// the text is not a number.
    pub fn number(&self) -> Option<f64> {
        parse_value(&self.value.1)
    }
}

/// A sample value as Prometheus writes it.
pub fn parse_value(text: &str) -> Option<f64> {
    match text {
        "NaN" => Some(f64::NAN),
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        t => t.parse().ok(),
    }
}

/// What came back besides the series, and what of it was left out.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct AnswerInfo {
    /// How many series were given to the callback.
    pub series: usize,
    /// The evaluation time of the query (Unix seconds), from the first series.
    pub evaluated_at: Option<f64>,
    /// Prometheus's warnings and infos (a partial answer: some of the data could not be
    /// read), at most [`AnswerLimits::warnings`], each cut to [`MAX_MESSAGE_CHARS`].
    pub warnings: Vec<String>,
    /// Warnings and infos beyond the limit: counted, not kept.
    pub warnings_not_kept: usize,
    /// Series beyond [`AnswerLimits::series`]: counted, not read.
    pub series_not_read: usize,
    /// Series with more than [`AnswerLimits::labels`] labels: counted, not given to the
    /// callback.
    pub series_with_too_many_labels: usize,
    /// The limits the answer was read with.
    pub limits: AnswerLimits,
}

impl AnswerInfo {
    /// One sentence for each list that was cut: `"N more warnings not kept (at most 16 an
    /// answer)"`, and the same for series and for series with too many labels. Empty when
    /// nothing was left out.
    pub fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if self.warnings_not_kept > 0 {
            notes.push(format!(
                "{} more warnings not kept (at most {} an answer)",
                self.warnings_not_kept, self.limits.warnings
            ));
        }
        if self.series_not_read > 0 {
            notes.push(format!(
                "{} more series not read (at most {} an answer)",
                self.series_not_read, self.limits.series
            ));
        }
        if self.series_with_too_many_labels > 0 {
            notes.push(format!(
                "{} series with more than {} labels not read",
                self.series_with_too_many_labels, self.limits.labels
            ));
        }
        notes
    }
}

/// Parses a query answer, calling `each` for every series of the instant vector (the series
/// is lent: its labels' storage serves the next one), within the default [`AnswerLimits`].
///
/// # Errors
///
/// [`QueryError::Refused`] for `"status": "error"`, [`QueryError::Malformed`] for anything
/// that is not an instant-vector answer.
pub fn parse_answer<'a>(
    text: &'a str,
    each: &mut dyn FnMut(&Series<'a>),
) -> Result<AnswerInfo, QueryError> {
    parse_answer_within(text, AnswerLimits::default(), each)
}

/// [`parse_answer`] within `limits`: the warnings, series and labels beyond them are
/// counted in the [`AnswerInfo`] and left out.
///
/// # Errors
///
/// As [`parse_answer`].
pub fn parse_answer_within<'a>(
    text: &'a str,
    limits: AnswerLimits,
    each: &mut dyn FnMut(&Series<'a>),
) -> Result<AnswerInfo, QueryError> {
    let mut info = AnswerInfo {
        limits,
        ..AnswerInfo::default()
    };
    let envelope = {
        let mut de = serde_json::Deserializer::from_str(text);
        let seed = EnvelopeSeed {
            each,
            info: &mut info,
        };
        let envelope = seed
            .deserialize(&mut de)
            .map_err(|e| QueryError::Malformed(e.to_string()))?;
        de.end().map_err(|e| QueryError::Malformed(e.to_string()))?;
        envelope
    };
    match envelope.status.as_deref() {
        Some("success") => {}
        Some("error") => {
            return Err(QueryError::Refused {
                kind: envelope.error_type.unwrap_or_else(|| "unknown".into()),
                message: envelope.error.unwrap_or_default(),
            })
        }
        other => {
            return Err(QueryError::Malformed(format!(
                "status {:?}",
                other.unwrap_or("missing")
            )))
        }
    }
    match envelope.result_type.as_deref() {
        Some("vector") => Ok(info),
        Some(t) => Err(QueryError::Malformed(format!(
            "result type {t:?}, expected \"vector\""
        ))),
        None => Err(QueryError::Malformed("no data.result".into())),
    }
}

/// The fields of the answer other than the series (the warnings go to [`AnswerInfo`]),
/// each message cut to [`MAX_MESSAGE_CHARS`].
#[derive(Default)]
struct Envelope {
    status: Option<String>,
    error_type: Option<String>,
    error: Option<String>,
    result_type: Option<String>,
}

/// A message from Prometheus, or null, cut to [`MAX_MESSAGE_CHARS`] (it is borrowed from the
/// text while it is read, so a long one costs nothing).
fn message<'de, M: MapAccess<'de>>(map: &mut M) -> Result<Option<String>, M::Error> {
    let text: Option<Borrowed<'de>> = map.next_value()?;
    Ok(text.map(|t| bounded(&t.0)))
}

/// Reads a list of warnings (or infos), or null, into the answer's: the first ones up to the
/// limit are kept, the others counted.
struct WarningsSeed<'e> {
    info: &'e mut AnswerInfo,
}

impl<'de> DeserializeSeed<'de> for WarningsSeed<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for WarningsSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of messages")
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
    fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<(), S::Error> {
        loop {
            if self.info.warnings.len() < self.info.limits.warnings {
                match seq.next_element::<Borrowed<'de>>()? {
                    Some(w) => self.info.warnings.push(bounded(&w.0)),
                    None => return Ok(()),
                }
            } else {
                // Beyond the limit only the count is kept; each must still be a string.
                match seq.next_element::<Borrowed<'de>>()? {
                    Some(_) => self.info.warnings_not_kept += 1,
                    None => return Ok(()),
                }
            }
        }
    }
}

struct EnvelopeSeed<'e, 'a> {
    each: &'e mut dyn FnMut(&Series<'a>),
    info: &'e mut AnswerInfo,
}

impl<'a> DeserializeSeed<'a> for EnvelopeSeed<'_, 'a> {
    type Value = Envelope;
    fn deserialize<D: de::Deserializer<'a>>(self, d: D) -> Result<Envelope, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'a> Visitor<'a> for EnvelopeSeed<'_, 'a> {
    type Value = Envelope;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Prometheus API answer (an object)")
    }
    fn visit_map<M: MapAccess<'a>>(self, mut map: M) -> Result<Envelope, M::Error> {
        let mut env = Envelope::default();
        while let Some(key) = map.next_key::<Cow<'a, str>>()? {
            match key.as_ref() {
                "status" => {
                    let status: Borrowed<'a> = map.next_value()?;
                    env.status = Some(bounded(&status.0));
                }
                "errorType" => env.error_type = message(&mut map)?,
                "error" => env.error = message(&mut map)?,
                "warnings" | "infos" => map.next_value_seed(WarningsSeed {
                    info: &mut *self.info,
                })?,
                "data" => {
                    env.result_type = map.next_value_seed(DataSeed {
                        each: &mut *self.each,
                        info: &mut *self.info,
                    })?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(env)
    }
}

struct DataSeed<'e, 'a> {
    each: &'e mut dyn FnMut(&Series<'a>),
    info: &'e mut AnswerInfo,
}

impl<'a> DeserializeSeed<'a> for DataSeed<'_, 'a> {
    type Value = Option<String>;
    fn deserialize<D: de::Deserializer<'a>>(self, d: D) -> Result<Option<String>, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'a> Visitor<'a> for DataSeed<'_, 'a> {
    type Value = Option<String>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("the answer's data (an object)")
    }
    fn visit_map<M: MapAccess<'a>>(self, mut map: M) -> Result<Option<String>, M::Error> {
        let mut result_type: Option<String> = None;
        let mut seen_result = false;
        while let Some(key) = map.next_key::<Cow<'a, str>>()? {
            match key.as_ref() {
                "resultType" => {
                    let t: Borrowed<'a> = map.next_value()?;
                    result_type = Some(bounded(&t.0));
                }
                "result" => {
                    // A vector's series, or anything else when the type is not a vector (the
                    // type is checked after the whole answer is read).
                    if seen_result {
                        return Err(de::Error::duplicate_field("result"));
                    }
                    seen_result = true;
                    if matches!(result_type.as_deref(), None | Some("vector")) {
                        map.next_value_seed(ResultSeed {
                            each: &mut *self.each,
                            info: &mut *self.info,
                        })?;
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if !seen_result {
            return Ok(None);
        }
        Ok(Some(result_type.unwrap_or_else(|| "vector".into())))
    }
}

struct ResultSeed<'e, 'a> {
    each: &'e mut dyn FnMut(&Series<'a>),
    info: &'e mut AnswerInfo,
}

impl<'a> DeserializeSeed<'a> for ResultSeed<'_, 'a> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'a>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'a> Visitor<'a> for ResultSeed<'_, 'a> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of series")
    }
    fn visit_seq<S: SeqAccess<'a>>(self, mut seq: S) -> Result<(), S::Error> {
        let mut labels = LabelSet(Vec::with_capacity(16));
        loop {
            let read = self.info.series + self.info.series_with_too_many_labels;
            if read >= self.info.limits.series {
                // Beyond the limit the series are only counted (skipping one allocates
                // nothing).
                while let Some(IgnoredAny) = seq.next_element()? {
                    self.info.series_not_read += 1;
                }
                return Ok(());
            }
            let next = seq.next_element_seed(SeriesSeed {
                labels: &mut labels,
                each: &mut *self.each,
                info: &mut *self.info,
            })?;
            if next.is_none() {
                return Ok(());
            }
        }
    }
}

/// How to reach a Prometheus server (or, for `--remote`, the exporters): TLS and basic auth.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Base URL, e.g. `http://prometheus:9090` (a path prefix is kept).
    pub url: String,
    /// Basic auth user and password.
    pub basic_auth: Option<(String, String)>,
    /// PEM file of the CA certificates to trust instead of the built-in roots.
    pub ca_file: Option<std::path::PathBuf>,
    /// PEM files of a client certificate (with its chain) and its private key, for a server
    /// that asks for one (mutual TLS).
    pub client_cert: Option<(std::path::PathBuf, std::path::PathBuf)>,
    /// Time limit: from Prometheus, of a whole refresh (all its queries together, one
    /// deadline); of each request of a [`Client`]'s own (connect, send, wait, read); with
    /// `--remote`, of each exporter's read.
    pub timeout: Duration,
}

impl ClientOptions {
    /// `url` with no TLS settings of its own, no basic auth and a 5 s timeout.
    pub fn new(url: impl Into<String>) -> ClientOptions {
        ClientOptions {
            url: url.into(),
            ..ClientOptions::default()
        }
    }
}

impl Default for ClientOptions {
    /// No URL, no TLS settings of its own, no basic auth, a 5 s timeout.
    fn default() -> ClientOptions {
        ClientOptions {
            url: String::new(),
            basic_auth: None,
            ca_file: None,
            client_cert: None,
            timeout: Duration::from_secs(5),
        }
    }
}

/// An HTTP agent with the TLS settings and the `Authorization` header of [`ClientOptions`],
/// whose name lookups are bounded (at most [`MAX_LOOKUPS`](crate::lookup::MAX_LOOKUPS) at once,
/// each on a thread of its own; one whose thread cannot start is that request's error).
#[derive(Clone)]
pub struct Connection {
    /// The agent (timeout, TLS roots, client certificate).
    pub agent: ureq::Agent,
    /// `Basic ...`, when basic auth is set.
    pub authorization: Option<String>,
}

impl Connection {
    /// Sets up an agent. The CA and client certificate files, when given, are read now.
    ///
    /// # Errors
    ///
    /// An unreadable CA or client certificate file, or one with nothing usable in it.
    pub fn new(options: &ClientOptions) -> Result<Connection, SetupError> {
        Connection::with_lookup_threads(options, crate::lookup::lookup_thread)
    }

    /// [`Connection::new`], with name lookups on threads made by `lookup`.
    pub(crate) fn with_lookup_threads(
        options: &ClientOptions,
        lookup: fn() -> std::thread::Builder,
    ) -> Result<Connection, SetupError> {
        let mut tls = ureq::tls::TlsConfig::builder();
        if let Some(path) = &options.ca_file {
            tls = tls.root_certs(ureq::tls::RootCerts::Specific(Arc::new(read_ca(path)?)));
        }
        if let Some((cert, key)) = &options.client_cert {
            tls = tls.client_cert(Some(read_client_cert(cert, key)?));
        }
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(options.timeout))
            .http_status_as_error(false)
            .user_agent(concat!("gpuscope/", env!("CARGO_PKG_VERSION")))
            .tls_config(tls.build())
            .build();
        let authorization = options.basic_auth.as_ref().map(|(user, password)| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
            )
        });
        // Names are looked up by gpuscope's bounded resolver: ureq's own starts a thread per
        // lookup, unbounded, and panics when one cannot start.
        let agent = ureq::Agent::with_parts(
            config,
            ureq::unversioned::transport::DefaultConnector::new(),
            crate::lookup::Lookups::new(lookup),
        );
        Ok(Connection {
            agent,
            authorization,
        })
    }

    /// A GET of `url` with the `Authorization` header, when set.
    pub fn get(&self, url: &str) -> ureq::RequestBuilder<ureq::typestate::WithoutBody> {
        let request = self.agent.get(url);
        match &self.authorization {
            Some(auth) => request.header("Authorization", auth),
            None => request,
        }
    }

    /// Sends `request` (one of [`Connection::get`]'s), the whole exchange bounded by `time`.
    pub(crate) fn call_within(
        request: ureq::RequestBuilder<ureq::typestate::WithoutBody>,
        time: Duration,
    ) -> Result<ureq::http::Response<ureq::Body>, ureq::Error> {
        request.config().timeout_global(Some(time)).build().call()
    }
}

/// A blocking client of one Prometheus server.
#[derive(Clone)]
pub struct Client {
    connection: Connection,
    query_url: String,
    timeout: Duration,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("query_url", &self.query_url)
            .finish_non_exhaustive()
    }
}

/// Why a client cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The URL is not `http://` or `https://`.
    #[error("{0:?} is not an http:// or https:// URL")]
    Url(String),
    /// The CA file cannot be read or holds no certificate.
    #[error("CA file {}: {reason}", gpu_devices::text::Escaped(path))]
    Ca {
        /// The file, as given (shown escaped: a file name may hold a line break or a bidi
        /// control).
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// The client certificate or key file cannot be read or holds nothing usable.
    #[error("{file} {}: {reason}", gpu_devices::text::Escaped(path))]
    ClientCert {
        /// Which file: the certificate or the key.
        file: CertFile,
        /// The file, as given (shown escaped, as the CA file's).
        path: String,
        /// What went wrong.
        reason: String,
    },
}

/// The two files of a client certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CertFile {
    /// The certificate (with its chain).
    Certificate,
    /// Its private key.
    Key,
}

impl fmt::Display for CertFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CertFile::Certificate => "client certificate",
            CertFile::Key => "client key",
        })
    }
}

impl Client {
    /// A client with these options. The CA and client certificate files, when given, are
    /// read now.
    ///
    /// # Errors
    ///
    /// A URL that is not http(s), an unreadable CA file or one with no certificate, an
    /// unreadable client certificate or key.
    pub fn new(options: &ClientOptions) -> Result<Client, SetupError> {
        let url = options.url.trim_end_matches('/');
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(SetupError::Url(options.url.clone()));
        }
        Ok(Client {
            connection: Connection::new(options)?,
            query_url: format!("{url}/api/v1/query"),
            timeout: options.timeout,
        })
    }

    /// The time limit of [`ClientOptions::timeout`].
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Runs an instant query within the client's timeout and returns the answer's text, to be
    /// parsed with [`parse_answer`]. Prometheus's own errors (HTTP 400/422/503 with a JSON
    /// body) come back as text too, so that their message is read.
    ///
    /// # Errors
    ///
    /// [`QueryError::Transport`] or [`QueryError::Http`].
    pub fn query_text(&self, query: &str) -> Result<String, QueryError> {
        self.query_text_until(query, Instant::now() + self.timeout)
    }

    /// [`Client::query_text`] with its answer read whole by `deadline`: several queries can
    /// share one time limit.
    ///
    /// # Errors
    ///
    /// [`QueryError::NotAsked`] when the deadline has passed already, else as
    /// [`Client::query_text`] (a query still unanswered at the deadline is a transport
    /// error).
    pub fn query_text_until(&self, query: &str, deadline: Instant) -> Result<String, QueryError> {
        let started = Instant::now();
        let left = deadline.saturating_duration_since(started);
        if left.is_zero() {
            return Err(QueryError::NotAsked(self.timeout));
        }
        let answer = self.ask(query, left);
        let took_ms = started.elapsed().as_micros() as f64 / 1000.0;
        let query = gpu_devices::text::Escaped(query);
        match &answer {
            Ok((status, body)) => {
                tracing::debug!(%query, status, bytes = body.len(), took_ms, "prometheus query")
            }
            Err(e) => {
                let error = e.to_string();
                let error = gpu_devices::text::Escaped(&error);
                tracing::debug!(%query, %error, took_ms, "prometheus query failed")
            }
        }
        let (status, body) = answer?;
        let json = body.trim_start().starts_with('{');
        if status == 200 || (json && matches!(status, 400 | 422 | 503)) {
            Ok(body)
        } else {
            Err(QueryError::Http {
                status,
                body: body.chars().take(200).collect(),
            })
        }
    }

    /// The status and body of the instant query `query`, read whole within `left`.
    fn ask(&self, query: &str, left: Duration) -> Result<(u16, String), QueryError> {
        let out_of_time = || {
            QueryError::Transport(format!(
                "no answer within the refresh's time limit ({})",
                seconds(self.timeout)
            ))
        };
        let transport = |e: ureq::Error| match e {
            ureq::Error::Timeout(_) => out_of_time(),
            e => QueryError::Transport(e.to_string()),
        };
        let request = self.connection.get(&self.query_url).query("query", query);
        let mut response = Connection::call_within(request, left).map_err(transport)?;
        let status = response.status().as_u16();
        // Read into a buffer of the announced size: a fleet's answer is tens of MB, and a
        // growing buffer would briefly hold up to twice that.
        let announced = response.body().content_length().unwrap_or(0);
        let mut bytes =
            Vec::with_capacity(usize::try_from(announced.min(MAX_ANSWER_BYTES)).unwrap_or(0));
        std::io::Read::read_to_end(
            &mut response
                .body_mut()
                .with_config()
                .limit(MAX_ANSWER_BYTES)
                .reader(),
            &mut bytes,
        )
        .map_err(
            |e| match e.get_ref().and_then(|e| e.downcast_ref::<ureq::Error>()) {
                Some(ureq::Error::Timeout(_)) => out_of_time(),
                _ if e.kind() == std::io::ErrorKind::TimedOut => out_of_time(),
                Some(ureq::Error::BodyExceedsLimit(_)) => QueryError::Transport(format!(
                    "the answer is larger than {} MiB",
                    MAX_ANSWER_BYTES >> 20
                )),
                _ => QueryError::Transport(e.to_string()),
            },
        )?;
        let body = String::from_utf8(bytes)
            .map_err(|e| QueryError::Malformed(format!("the answer is not UTF-8: {e}")))?;
        Ok((status, body))
    }
}

fn read_ca(path: &Path) -> Result<Vec<ureq::tls::Certificate<'static>>, SetupError> {
    let fail = |reason: String| SetupError::Ca {
        path: path.display().to_string(),
        reason,
    };
    let pem = gpu_backend::files::read_regular(path, gpu_backend::files::MAX_CERTIFICATE_BYTES)
        .map_err(|e| fail(e.to_string()))?;
    let mut certs = Vec::new();
    for item in ureq::tls::parse_pem(&pem) {
        if let ureq::tls::PemItem::Certificate(c) = item.map_err(|e| fail(e.to_string()))? {
            certs.push(c);
        }
    }
    if certs.is_empty() {
        return Err(fail("no PEM certificate in the file".into()));
    }
    Ok(certs)
}

fn read_client_cert(cert: &Path, key: &Path) -> Result<ureq::tls::ClientCert, SetupError> {
    let fail = |file: CertFile, path: &Path, reason: String| SetupError::ClientCert {
        file,
        path: path.display().to_string(),
        reason,
    };
    let pem = gpu_backend::files::read_regular(cert, gpu_backend::files::MAX_CERTIFICATE_BYTES)
        .map_err(|e| fail(CertFile::Certificate, cert, e.to_string()))?;
    let mut chain = Vec::new();
    for item in ureq::tls::parse_pem(&pem) {
        if let ureq::tls::PemItem::Certificate(c) =
            item.map_err(|e| fail(CertFile::Certificate, cert, e.to_string()))?
        {
            chain.push(c);
        }
    }
    if chain.is_empty() {
        return Err(fail(
            CertFile::Certificate,
            cert,
            "no PEM certificate in the file".into(),
        ));
    }
    let pem = gpu_backend::files::read_regular(key, gpu_backend::files::MAX_CONFIG_BYTES)
        .map_err(|e| fail(CertFile::Key, key, e.to_string()))?;
    let key_item = ureq::tls::PrivateKey::from_pem(&pem)
        .map_err(|e| fail(CertFile::Key, key, format!("no PEM private key: {e}")))?;
    Ok(ureq::tls::ClientCert::new_with_certs(&chain, key_item))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(text: &str) -> Result<(AnswerInfo, Vec<(String, f64)>), QueryError> {
        let mut out = Vec::new();
        let info = parse_answer(text, &mut |s| {
            out.push((
                s.label("hostname").unwrap_or("").to_string(),
                s.number().unwrap_or(-1.0),
            ))
        })?;
        Ok((info, out))
    }

    #[test]
    fn a_vector_answer_gives_every_series_with_its_labels_and_value() {
        let text = r#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"__name__":"x","hostname":"a\u00e9"},"value":[1700000000.5,"42"]},
            {"metric":{"hostname":"b"},"value":[1700000000.5,"NaN"]}]}}"#;
        let (info, series) = collect(text).unwrap();
        assert_eq!(info.series, 2);
        assert_eq!(info.evaluated_at, Some(1_700_000_000.5));
        assert_eq!(series[0], ("a\u{e9}".to_string(), 42.0));
        assert_eq!(series[1].0, "b");
        assert!(series[1].1.is_nan());
    }

    #[test]
    fn a_label_given_twice_has_its_later_value() {
        let text = r#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"hostname":"a","job":"j","hostname":"b"},"value":[1,"1"]}]}}"#;
        let (_, series) = collect(text).unwrap();
        assert_eq!(series, [("b".to_string(), 1.0)]);
    }

    #[test]
    fn a_series_has_only_its_own_labels() {
        // The labels' storage serves one series after the other: nothing carries over.
        let text = r#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"hostname":"a","job":"j","pod":"p"},"value":[1,"1"]},
            {"metric":{},"value":[1,"2"]},
            {"metric":{"job":"k"},"value":[1,"3"]}]}}"#;
        let mut seen = Vec::new();
        parse_answer(text, &mut |s| {
            seen.push((
                s.label("hostname").map(str::to_string),
                s.label("job").map(str::to_string),
                s.label("pod").is_some(),
            ))
        })
        .unwrap();
        assert_eq!(
            seen,
            [
                (Some("a".into()), Some("j".into()), true),
                (None, None, false),
                (None, Some("k".into()), false)
            ]
        );
    }

    #[test]
    fn warnings_of_a_partial_answer_are_kept() {
        let text = r#"{"status":"success","warnings":["remote read failed"],
            "data":{"result":[],"resultType":"vector"}}"#;
        let (info, series) = collect(text).unwrap();
        assert!(series.is_empty());
        assert_eq!(info.warnings, vec!["remote read failed".to_string()]);
    }

    #[test]
    fn an_error_answer_says_what_prometheus_said() {
        let text = r#"{"status":"error","errorType":"timeout","error":"query timed out"}"#;
        let e = collect(text).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Prometheus refused the query (timeout): query timed out"
        );
    }

    #[test]
    fn a_matrix_or_garbage_is_malformed_not_a_panic() {
        let matrix = r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"1"]]}]}}"#;
        assert!(matches!(collect(matrix), Err(QueryError::Malformed(_))));
        for text in ["", "[]", "{", "{\"status\":\"success\"}", "<html>", "{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[{\"metric\":{},\"value\":[1]}]}}"] {
            assert!(
                matches!(collect(text), Err(QueryError::Malformed(_))),
                "{text:?}"
            );
        }
    }

    /// An answer with `series` series of `labels` labels each and `warnings` warnings.
    fn answer(series: usize, labels: usize, warnings: usize) -> String {
        let one = |i: usize| {
            let labels: Vec<String> = (0..labels).map(|l| format!(r#""l{l}":"v""#)).collect();
            format!(
                r#"{{"metric":{{"hostname":"h{i}"{}{}}},"value":[1,"{i}"]}}"#,
                if labels.is_empty() { "" } else { "," },
                labels.join(",")
            )
        };
        let series: Vec<String> = (0..series).map(one).collect();
        let warnings: Vec<String> = (0..warnings).map(|w| format!(r#""w{w}""#)).collect();
        format!(
            r#"{{"status":"success","warnings":[{}],"data":{{"resultType":"vector","result":[{}]}}}}"#,
            warnings.join(","),
            series.join(",")
        )
    }

    fn within(text: &str, limits: AnswerLimits) -> (AnswerInfo, Vec<String>) {
        let mut hosts = Vec::new();
        let info = parse_answer_within(text, limits, &mut |s| {
            hosts.push(s.label("hostname").unwrap_or("").to_string())
        })
        .unwrap();
        (info, hosts)
    }

    const SMALL: AnswerLimits = AnswerLimits {
        warnings: 2,
        series: 3,
        labels: 4,
    };

    #[test]
    fn warnings_beyond_the_limit_are_counted_not_kept() {
        let (info, hosts) = within(&answer(1, 0, 5), SMALL);
        assert_eq!(info.warnings, ["w0", "w1"]);
        assert_eq!(info.warnings_not_kept, 3);
        assert_eq!(hosts, ["h0"]);
        assert_eq!(
            info.notes(),
            ["3 more warnings not kept (at most 2 an answer)"]
        );
        // Infos count with the warnings.
        let text = r#"{"status":"success","warnings":["a"],"infos":["b","c"],
            "data":{"resultType":"vector","result":[]}}"#;
        let (info, _) = within(text, SMALL);
        assert_eq!((info.warnings.len(), info.warnings_not_kept), (2, 1));
        let (info, _) = within(&answer(1, 0, 2), SMALL);
        assert!(info.notes().is_empty(), "{:?}", info.notes());
    }

    #[test]
    fn series_beyond_the_limit_are_counted_and_skipped() {
        let (info, hosts) = within(&answer(5, 0, 0), SMALL);
        assert_eq!(hosts, ["h0", "h1", "h2"]);
        assert_eq!((info.series, info.series_not_read), (3, 2));
        assert_eq!(
            info.notes(),
            ["2 more series not read (at most 3 an answer)"]
        );
    }

    #[test]
    fn a_series_with_too_many_labels_is_counted_and_skipped() {
        // hostname and three more: four labels, the limit.
        let (info, hosts) = within(&answer(2, 3, 0), SMALL);
        assert_eq!(hosts.len(), 2);
        assert_eq!(info.series_with_too_many_labels, 0);
        let (info, hosts) = within(&answer(2, 4, 0), SMALL);
        assert!(hosts.is_empty(), "{hosts:?}");
        assert_eq!(info.series_with_too_many_labels, 2);
        assert_eq!(info.notes(), ["2 series with more than 4 labels not read"]);
        // They count as read: the series limit is not a way around the label limit.
        let (info, _) = within(&answer(5, 4, 0), SMALL);
        assert_eq!(
            (info.series_with_too_many_labels, info.series_not_read),
            (3, 2)
        );
    }

    #[test]
    fn long_messages_from_prometheus_are_cut() {
        let long = "x".repeat(MAX_MESSAGE_CHARS + 100);
        let text = format!(
            r#"{{"status":"error","errorType":"{long}","error":"{long}","warnings":["{long}"]}}"#
        );
        let QueryError::Refused { kind, message } = collect(&text).unwrap_err() else {
            panic!("refused");
        };
        for cut in [kind, message] {
            assert!(
                cut.ends_with("... (100 more characters not kept)"),
                "{}",
                &cut[cut.len() - 40..]
            );
            assert_eq!(cut.chars().filter(|&c| c == 'x').count(), MAX_MESSAGE_CHARS);
        }
        let text = format!(
            r#"{{"status":"success","warnings":["é{long}"],"data":{{"resultType":"vector","result":[]}}}}"#
        );
        let (info, _) = collect(&text).unwrap();
        assert!(info.warnings[0].starts_with('é'));
        assert!(info.warnings[0].ends_with("(101 more characters not kept)"));
    }

    /// A server on 127.0.0.1 that answers one request with `body` (announcing its length)
    /// and is gone; its URL.
    fn serve_once(body: Vec<u8>) -> String {
        use std::io::{BufRead, BufReader, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            let Ok((stream, _)) = listener.accept() else {
                return;
            };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
            let _ = stream.set_write_timeout(Some(Duration::from_secs(30)));
            let mut reader = BufReader::new(stream);
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 2 {
                line.clear();
            }
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            let w = reader.get_mut();
            let _ = w
                .write_all(head.as_bytes())
                .and_then(|()| w.write_all(&body));
        });
        url
    }

    #[test]
    fn an_answer_larger_than_the_bound_is_refused_not_read() {
        // Spaces are valid JSON around an answer: only its size is wrong.
        let mut body = answer(1, 0, 0).into_bytes();
        body.resize(usize::try_from(MAX_ANSWER_BYTES).unwrap() + 1, b' ');
        let client = Client::new(&ClientOptions {
            timeout: Duration::from_secs(30),
            ..ClientOptions::new(serve_once(body))
        })
        .unwrap();
        let e = client.query_text("up").unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "cannot reach Prometheus: the answer is larger than {} MiB",
                MAX_ANSWER_BYTES >> 20
            )
        );
        // One byte less is read.
        let mut body = answer(1, 0, 0).into_bytes();
        body.resize(usize::try_from(MAX_ANSWER_BYTES).unwrap(), b' ');
        let client = Client::new(&ClientOptions::new(serve_once(body))).unwrap();
        let text = client.query_text("up").unwrap();
        assert_eq!(collect(&text).unwrap().1, [("h0".to_string(), 0.0)]);
    }

    #[test]
    fn a_passed_deadline_asks_nothing() {
        let client = Client::new(&ClientOptions {
            timeout: Duration::from_millis(1500),
            // Nothing listens there: asking would fail otherwise.
            ..ClientOptions::new("http://127.0.0.1:1")
        })
        .unwrap();
        let e = client
            .query_text_until("up", Instant::now() - Duration::from_millis(1))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "not asked: the refresh's time limit (1.5 s) was spent"
        );
    }

    #[test]
    fn values_are_read_as_prometheus_writes_them() {
        assert_eq!(parse_value("+Inf"), Some(f64::INFINITY));
        assert_eq!(parse_value("-Inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_value("1e3"), Some(1000.0));
        assert_eq!(parse_value("85899345920"), Some(85_899_345_920.0));
        assert_eq!(parse_value("x"), None);
    }

    proptest::proptest! {
        #[test]
        fn any_text_parses_or_is_refused_without_panicking(text in ".{0,200}") {
            let _ = collect(&text);
        }

        #[test]
        fn label_values_round_trip_through_json(host in "\\PC{0,30}", value in proptest::num::f64::NORMAL) {
            let text = serde_json::json!({"status": "success", "data": {"resultType": "vector",
                "result": [{"metric": {"hostname": host}, "value": [1.0, value.to_string()]}]}})
                .to_string();
            let (_, series) = collect(&text).unwrap();
            proptest::prop_assert_eq!(&series, &vec![(host.clone(), value)]);
        }
    }
}
