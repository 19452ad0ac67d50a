//! Plots rendered from a recorded fixture: PNG and SVG files of the asked size, naming every
//! device.
#![cfg(feature = "plot")]

use std::sync::Arc;
use std::time::Duration;

use gpu_backend::ReplayBackend;
use gpu_devices::Context;
use gpu_metrics::{plot, ManualClock, PlotOptions, Recorder};

use crate::common;

use common::fixture;

fn records() -> Vec<gpu_metrics::Record> {
    records_of(&[gpu_metrics::DeviceMetric::MemoryUsed])
}

/// 30 frames of every metric asked for, one recorder each.
fn records_of(metrics: &[gpu_metrics::DeviceMetric]) -> Vec<gpu_metrics::Record> {
    let backend = Arc::new(ReplayBackend::new(fixture()));
    let ctx = Context::from_backend(backend.clone()).unwrap();
    let clock = ManualClock::new(1_700_000_000.0);
    let mut recorders: Vec<Recorder> = metrics
        .iter()
        .map(|&m| Recorder::new(ctx.devices(), m).with_clock(Arc::new(clock.clone())))
        .collect();
    for f in 0..30 {
        clock.set(Duration::from_secs(f as u64));
        backend.set_frame(f);
        for r in &mut recorders {
            r.record(true).unwrap();
        }
    }
    recorders.iter().flat_map(Recorder::records).collect()
}

/// gpulink draws one metric a run; several metrics in one run are one panel each, stacked,
/// each with its own caption, axis and legend.
#[test]
fn several_metrics_are_one_panel_each() {
    use gpu_metrics::DeviceMetric;
    let records = records_of(&[
        DeviceMetric::MemoryUsed,
        DeviceMetric::GpuUtilization,
        DeviceMetric::PowerUsage,
    ]);
    let dir = out_dir("panels");
    let svg = dir.join("panels.svg");
    plot(&records, &svg, &PlotOptions::default()).unwrap();
    let text = std::fs::read_to_string(&svg).unwrap();
    for caption in ["Memory used", "GPU utilization", "Power draw"] {
        assert!(text.contains(&format!("\n{caption}\n</text>")), "{caption}");
    }
    assert!(text.contains("GPU utilization (%)") && text.contains("Power draw (W)"));
    // Each panel names every device in its legend.
    let legend = format!("GPU 0: {}", records[0].device.name);
    assert_eq!(
        text.matches(&legend).count(),
        3,
        "one legend entry per panel"
    );
    // The panels are stacked: each caption lower than the one before.
    let y_of = |caption: &str| -> f64 {
        let at = text.find(&format!("\n{caption}\n</text>")).unwrap();
        let tag = &text[text[..at].rfind("<text").unwrap()..at];
        let y = tag.split("y=\"").nth(1).unwrap().split('"').next().unwrap();
        y.parse().unwrap()
    };
    assert!(y_of("Memory used") < y_of("GPU utilization"));
    assert!(y_of("GPU utilization") < y_of("Power draw"));
    std::fs::remove_dir_all(&dir).ok();
}

fn out_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("gpu-metrics-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Width and height from a PNG's IHDR chunk.
fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "a PNG signature");
    assert_eq!(&bytes[12..16], b"IHDR");
    let w = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
    let h = u32::from_be_bytes(bytes[20..24].try_into().unwrap());
    (w, h)
}

#[test]
fn png_and_svg_plots_have_the_size_asked_and_name_every_device() {
    let records = records();
    let dir = out_dir("plot");
    let opts = PlotOptions {
        width: 900,
        height: 500,
        title: None,
    };
    let png = dir.join("memory.png");
    plot(&records, &png, &opts).unwrap();
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(png_size(&bytes), (900, 500));
    assert!(bytes.len() > 10_000, "a drawn chart, not a blank image");

    let svg = dir.join("memory.SVG");
    plot(&records, &svg, &opts).unwrap();
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("width=\"900\"") && text.contains("height=\"500\""));
    for r in &records {
        let label = format!("GPU {}: {}", r.device.id, r.device.name);
        assert!(text.contains(&label), "the legend names {label}");
    }
    // The title names the metric once (it said "GPU gpu utilization" for utilization).
    assert!(text.contains("\nMemory used\n</text>"), "{text}");
    // Human units: on the value axis the unit of the summary (MiB below 100 GiB), and the
    // total as a reference line, named as the summary names it; whole-number ticks on an axis
    // that spans 80 GiB.
    assert!(text.contains("Memory used (MiB)"));
    assert!(!text.contains("(GiB)"));
    assert!(
        text.contains("\n40000\n</text>") && !text.contains("\n40000.0\n</text>"),
        "{text}"
    );
    assert!(text.contains("time (s)"));
    // 85520809984 bytes is 81559 MiB.
    assert!(text.contains("total 81559MiB"), "the H100's memory total");
    for line in gpu_metrics::human_summaries(&records) {
        assert!(line.ends_with("(of 81559MiB)"), "{line}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn an_unknown_extension_is_refused_with_the_file_named() {
    let err = plot(&records(), "/tmp/memory.jpg", &PlotOptions::default()).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("/tmp/memory.jpg") && msg.contains(".png or .svg"),
        "{msg}"
    );
}

/// Plots were written in place, so a failure left a truncated PNG: now a plot goes to a
/// temporary file beside it, renamed into place when whole. A plot that cannot be put in place
/// leaves what was there and no temporary file; one that can replaces the earlier plot and is
/// readable by others as `File::create` would make it (0666 less the umask, not 0600).
#[test]
fn plots_are_renamed_into_place_whole_or_not_at_all() {
    use std::os::unix::fs::PermissionsExt;
    let records = records();
    let dir = out_dir("atomic");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let opts = PlotOptions::default();

    // The destination is a folder holding a file: the rename fails.
    let blocked = dir.join("blocked.png");
    std::fs::create_dir_all(&blocked).unwrap();
    std::fs::write(blocked.join("keep"), b"kept").unwrap();
    let err = plot(&records, &blocked, &opts).unwrap_err().to_string();
    assert!(err.contains("blocked.png"), "{err}");
    assert_eq!(std::fs::read(blocked.join("keep")).unwrap(), b"kept");

    let png = dir.join("memory.png");
    std::fs::write(&png, b"an earlier plot").unwrap();
    plot(&records, &png, &opts).unwrap();
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(png_size(&bytes), (1280, 720));
    let mode = std::fs::metadata(&png).unwrap().permissions().mode();
    let umask_allows_others = {
        let probe = dir.join("probe");
        std::fs::write(&probe, b"").unwrap();
        let m = std::fs::metadata(&probe).unwrap().permissions().mode();
        std::fs::remove_file(&probe).unwrap();
        m & 0o777
    };
    assert_eq!(mode & 0o777, umask_allows_others, "{mode:o}");

    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["blocked.png", "memory.png"],
        "no temporary file left"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// A plot of 65535×65535 pixels took 12.9 GB: sizes are clamped to 8K by the library too (shown
/// on an SVG, cheap to draw at any size).
#[test]
fn plot_sizes_are_clamped_to_8k() {
    let dir = out_dir("clamp");
    let svg = dir.join("huge.svg");
    let opts = PlotOptions {
        width: 65535,
        height: 65535,
        title: None,
    };
    plot(&records(), &svg, &opts).unwrap();
    let text = std::fs::read_to_string(&svg).unwrap();
    let (w, h) = gpu_metrics::PLOT_MAX_SIZE;
    assert!(
        text.contains(&format!("width=\"{w}\"")) && text.contains(&format!("height=\"{h}\"")),
        "{}",
        &text[..200.min(text.len())]
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// Issue 32, item 15: a plot or a sample file is never written through a symbolic link. A link
/// at the path, dangling or to a file, is refused; the link stays a link and its target is
/// neither created nor changed.
#[test]
fn plots_and_sample_files_are_never_written_through_a_symbolic_link() {
    let dir = out_dir("links");
    let records = records();
    for precious in [false, true] {
        let target = dir.join(format!("target-{precious}"));
        if precious {
            std::fs::write(&target, "precious").unwrap();
        }
        for name in ["plot.png", "plot.svg", "samples.csv", "samples.ndjson"] {
            let link = dir.join(format!("{precious}-{name}"));
            std::os::unix::fs::symlink(&target, &link).unwrap();
            let err = if name.starts_with("plot") {
                plot(&records, &link, &PlotOptions::default())
                    .unwrap_err()
                    .to_string()
            } else if name.ends_with(".csv") {
                gpu_metrics::CsvSink::create(&link).unwrap_err().to_string()
            } else {
                gpu_metrics::NdjsonSink::create(&link)
                    .unwrap_err()
                    .to_string()
            };
            assert!(err.contains("symbolic link"), "{name}: {err}");
            assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
            assert_eq!(
                std::fs::read_to_string(&target).ok().as_deref(),
                precious.then_some("precious"),
                "{name}"
            );
        }
    }
    // Only the links and the target: no temporary file left behind.
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 9);
    let _ = std::fs::remove_dir_all(&dir);
}
