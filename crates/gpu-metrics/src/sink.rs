//! Where a recording's samples go as they are taken: CSV or NDJSON files, one line per sample,
//! written and flushed at once so that a crash loses at most the sample being written, and a
//! failed write (a full disk) leaves no partial line behind.

use std::fmt::Write as _;
use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};

pub use gpu_backend::files::IfExists;

use crate::error::{Error, Result};
use crate::sample::{DeviceLabel, DeviceMetric, Sample};

/// Receives a recording's samples as they come.
pub trait SampleSink: Send {
    /// Called once, before the first sample. The file sinks keep the header and write it with
    /// the first sample, in the same write.
    ///
    /// # Errors
    ///
    /// Writing failed.
    fn begin(&mut self, devices: &[DeviceLabel], metric: DeviceMetric) -> Result<()>;
    /// Called for every stored sample.
    ///
    /// # Errors
    ///
    /// Writing failed. The file sinks then leave the file as it was before the call: whole
    /// lines only.
    fn write(&mut self, sample: &Sample) -> Result<()>;
}

/// Where a [`LineFile`] writes: a file, or in tests a writer that fails on purpose.
trait LineTarget: std::io::Write + Send {
    /// Cuts what was written back to its first `len` bytes, and writes on from there.
    fn truncate_to(&mut self, len: u64) -> std::io::Result<()>;
}

impl LineTarget for File {
    fn truncate_to(&mut self, len: u64) -> std::io::Result<()> {
        use std::io::{Seek, SeekFrom};
        if !self.metadata()?.is_file() {
            // A device or a pipe (`/dev/full`, a FIFO) cannot be cut: nothing to undo.
            return Ok(());
        }
        self.set_len(len)?;
        self.seek(SeekFrom::Start(len)).map(|_| ())
    }
}

/// One line per `write` call, each handed to the operating system whole (one `write_all` of
/// the complete line, no user-space buffer), so that a killed process leaves only whole lines
/// behind, except at most the one being written. The header waits for the first sample and
/// goes out in the same write.
///
/// When a write fails (a full disk, a file size limit), the part of the line that was written
/// is cut off again, so the file still ends with a whole line; the error names the file.
struct LineFile {
    path: PathBuf,
    file: Box<dyn LineTarget>,
    /// Bytes of whole lines written so far.
    written: u64,
    /// The header, until the first line goes out with it.
    header: String,
    line: String,
}

impl LineFile {
    /// Opens `path` as `if_exists` says, never through a symbolic link
    /// ([`gpu_backend::files::create`]).
    fn create(path: &Path, if_exists: IfExists) -> Result<LineFile> {
        let file = gpu_backend::files::create(path, if_exists).map_err(|e| Error::Io {
            path: path.to_path_buf(),
            error: e.into(),
        })?;
        Ok(LineFile::new(path, Box::new(file)))
    }

    fn new(path: &Path, file: Box<dyn LineTarget>) -> LineFile {
        LineFile {
            path: path.to_path_buf(),
            file,
            written: 0,
            header: String::new(),
            line: String::new(),
        }
    }

    /// Adds `value` as JSON on one line to the line being built, with C1 and bidirectional
    /// controls (a device's name is the driver's or a fixture's text) written as `\uXXXX`
    /// (`gpu_devices::text::SafeJson`), as every JSON document gpuscope prints.
    fn push_json(&mut self, value: &serde_json::Value) -> Result<()> {
        let text = gpu_devices::text::SafeJson::to_string(value, false).map_err(|e| Error::Io {
            path: self.path.clone(),
            error: e.into(),
        })?;
        self.line.push_str(&text);
        Ok(())
    }

    /// Keeps the line built in `line` as the header, to go out with the first sample.
    fn keep_header(&mut self) {
        self.line.push('\n');
        self.header = std::mem::take(&mut self.line);
    }

    /// Writes the header (the first time) and the line built in `line`, whole or not at all.
    fn flush_line(&mut self) -> Result<()> {
        self.line.push('\n');
        let mut text = String::with_capacity(self.header.len() + self.line.len());
        text.push_str(&self.header);
        text.push_str(&self.line);
        self.line.clear();
        let r = self
            .file
            .write_all(text.as_bytes())
            .and_then(|()| self.file.flush());
        match r {
            Ok(()) => {
                self.header.clear();
                self.written += text.len() as u64;
                Ok(())
            }
            Err(error) => {
                // Back to the last whole line (the header, if not out yet, is kept for the next).
                let error = match self.file.truncate_to(self.written) {
                    Ok(()) => error,
                    Err(cut) => std::io::Error::new(
                        error.kind(),
                        format!("{error}; and the partial line could not be removed: {cut}"),
                    ),
                };
                Err(Error::Io {
                    path: self.path.clone(),
                    error,
                })
            }
        }
    }
}

/// Declares a sink that writes its lines to a file: the struct (with the docs given), its
/// `Debug` (the file's path) and `create`.
macro_rules! line_file_sink {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        pub struct $name {
            out: LineFile,
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($name))
                    .field("path", &self.out.path)
                    .finish()
            }
        }

        impl $name {
            /// Creates (or truncates) the file; a symbolic link at `path` is refused, never
            /// followed. [`Self::create_with`] with [`IfExists::Truncate`].
            ///
            /// # Errors
            ///
            /// [`Error::Io`] naming the file.
            pub fn create(path: impl AsRef<Path>) -> Result<$name> {
                Self::create_with(path, IfExists::Truncate)
            }

            /// Opens the file as `if_exists` says ([`IfExists::KeepFile`] refuses a file
            /// that exists); a symbolic link at `path` is refused whatever it says, never
            /// followed.
            ///
            /// # Errors
            ///
            /// [`Error::Io`] naming the file; its `error` carries the
            /// [`gpu_backend::files::FileError`] of a refusal (`get_ref`, `downcast_ref`).
            pub fn create_with(path: impl AsRef<Path>, if_exists: IfExists) -> Result<$name> {
                Ok($name {
                    out: LineFile::create(path.as_ref(), if_exists)?,
                })
            }
        }
    };
}

line_file_sink! {
    /// Writes samples as CSV: a header `elapsed_s,timestamp,<device> <metric> (<unit>),...` with
    /// one column per device (`NVIDIA H100 80GB HBM3[0] memory_used (B)`), then one line per
    /// sample; an N/A reading is an empty field. Memory is in whole bytes.
    CsvSink
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
        self.out.keep_header();
        Ok(())
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

line_file_sink! {
    /// Writes samples as newline-delimited JSON: a first line
    /// `{"metric":"memory_used","unit":"B","devices":[{"id":"0","name":"..."},...]}`, then one
    /// line per sample `{"elapsed_s":1.0,"timestamp":1700000000.5,"values":[123,null,...]}`.
    NdjsonSink
}

impl SampleSink for NdjsonSink {
    fn begin(&mut self, devices: &[DeviceLabel], metric: DeviceMetric) -> Result<()> {
        let header = serde_json::json!({
            "metric": metric.name(),
            "unit": metric.unit(),
            "devices": devices,
        });
        self.out.push_json(&header)?;
        self.out.keep_header();
        Ok(())
    }

    fn write(&mut self, sample: &Sample) -> Result<()> {
        let values: Vec<serde_json::Value> = sample.values.iter().map(|v| number(*v)).collect();
        let line = serde_json::json!({
            "elapsed_s": sample.elapsed_s,
            "timestamp": sample.timestamp,
            "values": values,
        });
        self.out.push_json(&line)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_backend::DeviceId;
    use proptest::prelude::*;
    use std::sync::{Arc, Mutex};

    /// An in-memory file that takes `room` bytes, then fails as a full disk does: a write that
    /// crosses the limit is written in part, the next one fails.
    struct FullAfter {
        data: Arc<Mutex<Vec<u8>>>,
        room: usize,
    }

    impl std::io::Write for FullAfter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let mut data = self
                .data
                .lock()
                .map_err(|_| std::io::Error::other("poisoned"))?;
            let left = self.room.saturating_sub(data.len());
            if left == 0 {
                return Err(std::io::Error::from_raw_os_error(28));
            }
            let n = left.min(buf.len());
            data.extend_from_slice(&buf[..n]);
            Ok(n)
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl LineTarget for FullAfter {
        fn truncate_to(&mut self, len: u64) -> std::io::Result<()> {
            let mut data = self
                .data
                .lock()
                .map_err(|_| std::io::Error::other("poisoned"))?;
            data.truncate(len as usize);
            Ok(())
        }
    }

    fn labels(n: u32) -> Vec<DeviceLabel> {
        (0..n)
            .map(|i| DeviceLabel {
                id: DeviceId::Gpu(i),
                name: "NVIDIA H100 80GB HBM3".into(),
            })
            .collect()
    }

    fn sample(i: u32, n: u32) -> Sample {
        Sample {
            elapsed_s: f64::from(i) * 0.5,
            timestamp: 1_700_000_000.0 + f64::from(i) * 0.5,
            values: (0..n)
                .map(|d| (d != 1).then_some(f64::from(i * 1000 + d) * 1048576.0))
                .collect(),
        }
    }

    /// What a sink wrote, shared with the test.
    type Written = Arc<Mutex<Vec<u8>>>;

    /// A CSV and an NDJSON sink, each on its own [`FullAfter`] with `room` bytes.
    fn sinks(room: usize) -> Vec<(Box<dyn SampleSink>, Written)> {
        let path = Path::new("/full/disk");
        let mut out: Vec<(Box<dyn SampleSink>, Written)> = Vec::new();
        for csv in [true, false] {
            let data = Arc::new(Mutex::new(Vec::new()));
            let file = LineFile::new(
                path,
                Box::new(FullAfter {
                    data: data.clone(),
                    room,
                }),
            );
            let sink: Box<dyn SampleSink> = if csv {
                Box::new(CsvSink { out: file })
            } else {
                Box::new(NdjsonSink { out: file })
            };
            out.push((sink, data));
        }
        out
    }

    proptest! {
        /// The CSV ended in a half-written line when the disk filled up: whatever the room
        /// left, the file holds whole lines only, exactly the samples whose write succeeded
        /// (after the header), and the error names the file.
        #[test]
        fn a_full_disk_leaves_no_torn_line(room in 0usize..1500, samples in 1u32..12) {
            for (mut sink, data) in sinks(room) {
                sink.begin(&labels(3), DeviceMetric::MemoryUsed).map_err(|e| TestCaseError::fail(e.to_string()))?;
                let mut ok = 0;
                for i in 0..samples {
                    match sink.write(&sample(i, 3)) {
                        Ok(()) => ok += 1,
                        Err(e) => {
                            prop_assert!(e.to_string().contains("/full/disk"), "{}", e);
                            break;
                        }
                    }
                }
                let bytes = data.lock().map_err(|_| TestCaseError::fail("poisoned"))?.clone();
                let text = String::from_utf8(bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert!(text.is_empty() || text.ends_with('\n'), "torn: {:?}", text);
                let lines = text.lines().count();
                prop_assert_eq!(lines, if ok == 0 { 0 } else { ok + 1 }, "{:?}", text);
            }
        }
    }

    #[test]
    fn the_header_goes_out_with_the_first_sample_after_a_failed_write() {
        let data = Arc::new(Mutex::new(Vec::new()));
        let room = Arc::new(Mutex::new(0usize));
        struct Grows(Arc<Mutex<Vec<u8>>>, Arc<Mutex<usize>>);
        impl std::io::Write for Grows {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                let room = *self
                    .1
                    .lock()
                    .map_err(|_| std::io::Error::other("poisoned"))?;
                let mut full = FullAfter {
                    data: self.0.clone(),
                    room,
                };
                full.write(buf)
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        impl LineTarget for Grows {
            fn truncate_to(&mut self, len: u64) -> std::io::Result<()> {
                self.0
                    .lock()
                    .map_err(|_| std::io::Error::other("poisoned"))?
                    .truncate(len as usize);
                Ok(())
            }
        }
        let mut sink = CsvSink {
            out: LineFile::new(
                Path::new("x.csv"),
                Box::new(Grows(data.clone(), room.clone())),
            ),
        };
        sink.begin(&labels(2), DeviceMetric::MemoryUsed).unwrap();
        *room.lock().unwrap() = 30;
        assert!(sink.write(&sample(0, 2)).is_err());
        assert!(data.lock().unwrap().is_empty());
        *room.lock().unwrap() = usize::MAX;
        sink.write(&sample(1, 2)).unwrap();
        let text = String::from_utf8(data.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines[0].starts_with("elapsed_s,timestamp,"), "{text}");
        assert!(lines[1].starts_with("0.500,"), "{text}");
    }
}
