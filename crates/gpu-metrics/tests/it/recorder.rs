//! The recorder over a replayed fixture on a manual clock: records, aggregates, the summary
//! line, streaming to CSV and NDJSON, and bounded memory.

use std::sync::Arc;
use std::time::Duration;

use gpu_backend::ReplayBackend;
use gpu_devices::Context;
use gpu_metrics::{CsvSink, DeviceMetric, Keep, ManualClock, NdjsonSink, Recorder};
use serde_json::Value;

use crate::common;

use common::fixture;

fn setup() -> (Arc<ReplayBackend>, Context, ManualClock, Value) {
    let backend = Arc::new(ReplayBackend::new(fixture()));
    let ctx = Context::from_backend(backend.clone()).unwrap();
    let json = serde_json::from_str(&std::fs::read_to_string(common::FIXTURE).unwrap()).unwrap();
    (backend, ctx, ManualClock::new(1_700_000_000.0), json)
}

fn used(json: &Value, frame: usize, gpu: usize) -> u64 {
    json["frames"][frame]["devices"][gpu.to_string()]["memory_info"]["ok"]["used"]
        .as_u64()
        .unwrap()
}

/// Records frames 0..n, one per second of the manual clock.
fn record_frames(r: &mut Recorder, backend: &ReplayBackend, clock: &ManualClock, n: usize) {
    for f in 0..n {
        if f > 0 {
            clock.advance(Duration::from_secs(1));
        }
        backend.set_frame(f);
        r.record(true).unwrap();
    }
}

#[test]
fn records_have_rate_duration_length_and_exact_aggregates() {
    let (backend, ctx, clock, json) = setup();
    let mut r = Recorder::memory(&ctx).with_clock(Arc::new(clock.clone()));
    // Not stored: returned only (gpulink's record(store=False)).
    let probe = r.record(false).unwrap();
    assert_eq!(probe.values[2], Some(used(&json, 0, 2) as f64));
    assert!(r.is_empty());
    record_frames(&mut r, &backend, &clock, 5);

    let records = r.records();
    assert_eq!(records.len(), 8);
    let rec = &records[2];
    let values: Vec<u64> = (0..5).map(|f| used(&json, f, 2)).collect();
    assert_eq!(rec.len, 5);
    assert_eq!(rec.duration, 4.0);
    assert_eq!(rec.sampling_rate, 1.0);
    assert_eq!(rec.stats.min, *values.iter().min().unwrap() as f64);
    assert_eq!(rec.stats.max, *values.iter().max().unwrap() as f64);
    assert_eq!(
        rec.samples,
        values
            .iter()
            .enumerate()
            .map(|(i, &v)| (i as f64, v as f64))
            .collect::<Vec<_>>()
    );
    let total = json["frames"][0]["devices"]["2"]["memory_info"]["ok"]["total"]
        .as_f64()
        .unwrap();
    assert_eq!(rec.reference, Some(total));

    // gpulink's summary line: megabytes of 10^6 bytes.
    let name = json["devices"]["2"]["name"]["ok"].as_str().unwrap();
    let min_mb = *values.iter().min().unwrap() as f64 / 1e6;
    let max_mb = *values.iter().max().unwrap() as f64 / 1e6;
    assert_eq!(
        rec.summary(),
        format!("{name}[2] -> memory used: min={min_mb}[MB] / max={max_mb}[MB]")
    );
    let text = rec.to_string();
    assert!(
        text.starts_with(&format!("{name}[2] memory used\n")),
        "{text}"
    );
    assert!(
        text.contains("samples: 5 over 4.0s (1.00 per second)"),
        "{text}"
    );
}

#[test]
fn other_metrics_record_too() {
    let (backend, ctx, clock, json) = setup();
    let mut r = Recorder::new(ctx.devices(), DeviceMetric::GpuUtilization)
        .with_clock(Arc::new(clock.clone()));
    record_frames(&mut r, &backend, &clock, 3);
    let util: Vec<f64> = (0..3)
        .map(|f| {
            json["frames"][f]["devices"]["0"]["utilization_rates"]["ok"]["gpu"]
                .as_f64()
                .unwrap()
        })
        .collect();
    let rec = &r.records()[0];
    assert_eq!(
        rec.stats.mean(),
        Some(util.iter().sum::<f64>() / util.len() as f64)
    );
    assert!(rec.summary().ends_with("[%]"), "{}", rec.summary());
    assert_eq!("temperature".parse(), Ok(DeviceMetric::Temperature));
    assert!("memory".parse::<DeviceMetric>().is_err());
}

#[test]
fn samples_stream_to_csv_and_ndjson_as_they_come() {
    let dir = std::env::temp_dir().join(format!("gpu-metrics-sinks-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (backend, ctx, clock, json) = setup();
    let csv_path = dir.join("mem.csv");
    let nd_path = dir.join("mem.ndjson");
    let mut csv = Recorder::memory(&ctx)
        .with_clock(Arc::new(clock.clone()))
        .with_sink(Box::new(CsvSink::create(&csv_path).unwrap()))
        .unwrap();
    let mut nd = Recorder::memory(&ctx)
        .with_clock(Arc::new(clock.clone()))
        .with_sink(Box::new(NdjsonSink::create(&nd_path).unwrap()))
        .unwrap();
    for f in 0..3 {
        backend.set_frame(f);
        csv.record(true).unwrap();
        nd.record(true).unwrap();
        // Each sample is on disk as soon as record() returns: no buffer to lose.
        let lines = std::fs::read_to_string(&csv_path).unwrap().lines().count();
        assert_eq!(lines, 2 + f);
        clock.advance(Duration::from_millis(500));
    }

    let text = std::fs::read_to_string(&csv_path).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(header.len(), 2 + 8);
    assert_eq!(header[0], "elapsed_s");
    assert!(header[3].ends_with("[1] memory_used (B)"), "{}", header[3]);
    for (f, line) in lines.enumerate() {
        let cells: Vec<&str> = line.split(',').collect();
        assert_eq!(cells[0].parse::<f64>().unwrap(), f as f64 * 0.5);
        for gpu in 0..8 {
            assert_eq!(cells[2 + gpu].parse::<u64>().unwrap(), used(&json, f, gpu));
        }
    }

    let text = std::fs::read_to_string(&nd_path).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4);
    assert_eq!(lines[0]["metric"], "memory_used");
    assert_eq!(lines[0]["devices"].as_array().unwrap().len(), 8);
    assert_eq!(lines[3]["values"][7].as_u64(), Some(used(&json, 2, 7)));
    assert_eq!(lines[3]["elapsed_s"].as_f64(), Some(1.0));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_sink_that_cannot_be_created_says_which_file() {
    let err = CsvSink::create("/nonexistent-dir/x.csv").unwrap_err();
    assert!(err.to_string().contains("/nonexistent-dir/x.csv"), "{err}");
}

#[test]
fn bounded_keeping_stays_within_its_size_and_spans_the_whole_recording() {
    let (backend, ctx, clock, _) = setup();
    let mut r = Recorder::memory(&ctx)
        .with_clock(Arc::new(clock.clone()))
        .keep(Keep::Bounded(64));
    for i in 0..1000 {
        clock.set(Duration::from_secs(i));
        backend.set_frame(i as usize % 30);
        r.record(true).unwrap();
    }
    for rec in r.records() {
        assert!(rec.samples.len() <= 64, "{}", rec.samples.len());
        assert!(rec.samples.len() >= 32, "{}", rec.samples.len());
        assert_eq!(rec.samples[0].0, 0.0);
        assert!(rec.samples.last().unwrap().0 >= 900.0, "covers the end");
        // Aggregates still count every sample.
        assert_eq!(rec.len, 1000);
        assert!(rec.samples.windows(2).all(|w| w[0].0 < w[1].0));
    }
    let mut none = Recorder::memory(&ctx).keep(Keep::None);
    none.record(true).unwrap();
    assert!(none.records()[0].samples.is_empty());
    assert_eq!(none.records()[0].stats.count, 1);
}
