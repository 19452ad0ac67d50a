//! A small client of Prometheus's HTTP query API (`GET /api/v1/query`, instant vectors).
//!
//! Answers are parsed series by series straight into a callback, so that a fleet's answer
//! (64,000 process series for 1,000 hosts) never exists as a tree of maps in memory: only the
//! body's text and the model it is folded into do.

use std::borrow::Cow;
use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

/// The largest answer read, bytes: far above a fleet of 1,000 hosts with every process.
pub const MAX_ANSWER_BYTES: u64 = 512 << 20;

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
/// an answer, so reading a series allocates nothing for its labels).
struct LabelsInto<'s, 'a>(&'s mut LabelSet<'a>);

impl<'de: 'a, 'a> DeserializeSeed<'de> for LabelsInto<'_, 'a> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de: 'a, 'a> Visitor<'de> for LabelsInto<'_, 'a> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object of label names and values")
    }
    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<(), M::Error> {
        self.0 .0.clear();
        while let Some((k, v)) = map.next_entry::<Borrowed<'de>, Borrowed<'de>>()? {
            self.0.insert(k.0, v.0);
        }
        Ok(())
    }
}

/// Reads one series (`{"metric": {...}, "value": [t, "v"]}`) into `labels` (reused) and
/// gives it to `each`.
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
        let mut value: Option<(f64, Borrowed<'de>)> = None;
        while let Some(key) = map.next_key::<Borrowed<'de>>()? {
            match key.0.as_ref() {
                "metric" if metric => return Err(de::Error::duplicate_field("metric")),
                "metric" => {
                    map.next_value_seed(LabelsInto(&mut *self.labels))?;
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

/// What came back besides the series.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct AnswerInfo {
    /// How many series there were.
    pub series: usize,
    /// The evaluation time of the query (Unix seconds), from the first series.
    pub evaluated_at: Option<f64>,
    /// Prometheus's warnings (a partial answer: some of the data could not be read).
    pub warnings: Vec<String>,
}

/// Parses a query answer, calling `each` for every series of the instant vector (the series
/// is lent: its labels' storage serves the next one).
///
/// # Errors
///
/// [`QueryError::Refused`] for `"status": "error"`, [`QueryError::Malformed`] for anything
/// that is not an instant-vector answer.
pub fn parse_answer<'a>(
    text: &'a str,
    each: &mut dyn FnMut(&Series<'a>),
) -> Result<AnswerInfo, QueryError> {
    let mut info = AnswerInfo::default();
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
    info.warnings = envelope.warnings;
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

/// The fields of the answer other than the series.
#[derive(Default)]
struct Envelope {
    status: Option<String>,
    error_type: Option<String>,
    error: Option<String>,
    warnings: Vec<String>,
    result_type: Option<String>,
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
                "status" => env.status = Some(map.next_value()?),
                "errorType" => env.error_type = map.next_value()?,
                "error" => env.error = map.next_value()?,
                "warnings" | "infos" => {
                    let w: Option<Vec<String>> = map.next_value()?;
                    env.warnings.extend(w.unwrap_or_default());
                }
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
                "resultType" => result_type = Some(map.next_value()?),
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
        while let Some(()) = seq.next_element_seed(SeriesSeed {
            labels: &mut labels,
            each: &mut *self.each,
            info: &mut *self.info,
        })? {}
        Ok(())
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
    /// Whole-request timeout (connect, send, wait, read).
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

/// An HTTP agent with the TLS settings and the `Authorization` header of [`ClientOptions`].
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
        Ok(Connection {
            agent: config.into(),
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
}

/// A blocking client of one Prometheus server.
#[derive(Clone)]
pub struct Client {
    connection: Connection,
    query_url: String,
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
    #[error("CA file {path}: {reason}")]
    Ca {
        /// The file.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// The client certificate or key file cannot be read or holds nothing usable.
    #[error("{file} {path}: {reason}")]
    ClientCert {
        /// Which file: the certificate or the key.
        file: CertFile,
        /// The file.
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
        })
    }

    /// Runs an instant query and returns the answer's text, to be parsed with
    /// [`parse_answer`]. Prometheus's own errors (HTTP 400/422/503 with a JSON body) come back
    /// as text too, so that their message is read.
    ///
    /// # Errors
    ///
    /// [`QueryError::Transport`] or [`QueryError::Http`].
    pub fn query_text(&self, query: &str) -> Result<String, QueryError> {
        let started = std::time::Instant::now();
        let answer = self.ask(query);
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

    /// The status and body of the instant query `query`.
    fn ask(&self, query: &str) -> Result<(u16, String), QueryError> {
        let mut response = self
            .connection
            .get(&self.query_url)
            .query("query", query)
            .call()
            .map_err(|e| QueryError::Transport(e.to_string()))?;
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
        .map_err(|e| QueryError::Transport(e.to_string()))?;
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
