//! Where a recording's samples go as they are taken: CSV or NDJSON files, one line per sample,
//! written and flushed at once so that a crash loses at most the sample being written.

use std::fmt::Write as _;
use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::recorder::{DeviceLabel, DeviceMetric, Sample};

/// Receives a recording's samples as they come.
pub trait SampleSink: Send {
    /// Called once, before the first sample.
    ///
    /// # Errors
    ///
    /// Writing failed.
    fn begin(&mut self, devices: &[DeviceLabel], metric: DeviceMetric) -> Result<()>;
    /// Called for every stored sample.
    ///
    /// # Errors
    ///
    /// Writing failed.
    fn write(&mut self, sample: &Sample) -> Result<()>;
}

/// One line per `write` call, each handed to the operating system whole (one `write(2)` of the
/// complete line, no user-space buffer), so that a killed process leaves only whole lines
/// behind, except at most the one being written.
struct LineFile {
    path: PathBuf,
    file: File,
    line: String,
}

impl LineFile {
    fn create(path: &Path) -> Result<LineFile> {
        let file = File::create(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(LineFile {
            path: path.to_path_buf(),
            file,
            line: String::new(),
        })
    }

    fn flush_line(&mut self) -> Result<()> {
        self.line.push('\n');
        let r = self
            .file
            .write_all(self.line.as_bytes())
            .and_then(|()| self.file.flush());
        self.line.clear();
        r.map_err(|source| Error::Io {
            path: self.path.clone(),
            source,
        })
    }
}

/// Writes samples as CSV: a header `elapsed_s,timestamp,<device> <metric> (<unit>),...` with
/// one column per device (`NVIDIA H100 80GB HBM3[0] memory_used (B)`), then one line per
/// sample; an N/A reading is an empty field. Memory is in whole bytes.
pub struct CsvSink {
    out: LineFile,
}

impl std::fmt::Debug for CsvSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CsvSink")
            .field("path", &self.out.path)
            .finish()
    }
}

impl CsvSink {
    /// Creates (or truncates) the file.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] naming the file.
    pub fn create(path: impl AsRef<Path>) -> Result<CsvSink> {
        Ok(CsvSink {
            out: LineFile::create(path.as_ref())?,
        })
    }
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

impl SampleSink for CsvSink {
    fn begin(&mut self, devices: &[DeviceLabel], metric: DeviceMetric) -> Result<()> {
        self.out.line.push_str("elapsed_s,timestamp");
        for d in devices {
            let col = format!("{d} {} ({})", metric.name(), metric.unit());
            self.out.line.push(',');
            self.out.line.push_str(&csv_field(&col));
        }
        self.out.flush_line()
    }

    fn write(&mut self, sample: &Sample) -> Result<()> {
        let line = &mut self.out.line;
        let _ = write!(line, "{:.3},{:.3}", sample.elapsed_s, sample.timestamp);
        for v in &sample.values {
            line.push(',');
            if let Some(v) = v {
                let _ = write!(line, "{v}");
            }
        }
        self.out.flush_line()
    }
}

/// Writes samples as newline-delimited JSON: a first line
/// `{"metric":"memory_used","unit":"B","devices":[{"id":"0","name":"..."},...]}`, then one
/// line per sample `{"elapsed_s":1.0,"timestamp":1700000000.5,"values":[123,null,...]}`.
pub struct NdjsonSink {
    out: LineFile,
}

impl std::fmt::Debug for NdjsonSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NdjsonSink")
            .field("path", &self.out.path)
            .finish()
    }
}

impl NdjsonSink {
    /// Creates (or truncates) the file.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] naming the file.
    pub fn create(path: impl AsRef<Path>) -> Result<NdjsonSink> {
        Ok(NdjsonSink {
            out: LineFile::create(path.as_ref())?,
        })
    }
}

impl SampleSink for NdjsonSink {
    fn begin(&mut self, devices: &[DeviceLabel], metric: DeviceMetric) -> Result<()> {
        let header = serde_json::json!({
            "metric": metric.name(),
            "unit": metric.unit(),
            "devices": devices,
        });
        self.out.line.push_str(&header.to_string());
        self.out.flush_line()
    }

    fn write(&mut self, sample: &Sample) -> Result<()> {
        let values: Vec<serde_json::Value> = sample.values.iter().map(|v| number(*v)).collect();
        let line = serde_json::json!({
            "elapsed_s": sample.elapsed_s,
            "timestamp": sample.timestamp,
            "values": values,
        });
        self.out.line.push_str(&line.to_string());
        self.out.flush_line()
    }
}

/// A value as JSON: whole numbers (bytes) as integers, others as floats, N/A as `null`.
fn number(v: Option<f64>) -> serde_json::Value {
    match v {
        Some(v) if v.fract() == 0.0 && v.abs() < 9.0e15 => serde_json::Value::from(v as i64),
        Some(v) => serde_json::Value::from(v),
        None => serde_json::Value::Null,
    }
}
