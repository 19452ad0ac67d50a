//! gpulink's `MemoryPlotter`: a recording drawn over time, one line per device with its total as
//! a dashed reference line, as PNG or SVG (feature `plot`).
//!
//! Text is drawn with a font embedded in the binary (Ubuntu Light, shipped by the
//! `epaint_default_fonts` crate), so plots render the same on a headless machine with no fonts
//! installed. A PNG is the SVG that plotters draws, rasterised by resvg with that font: plotters'
//! own bitmap text places each glyph without its left side bearing, which spaced a legend as
//! "NVIDIAH1 00 80GB".

use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::{Error, Result};
use crate::recorder::{MemoryUnit, Record};
use crate::sample::DeviceMetric;

/// The image formats a plot can be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlotFormat {
    /// A PNG bitmap.
    Png,
    /// An SVG drawing.
    Svg,
}

impl PlotFormat {
    /// The format a file name asks for by its extension (`.png` or `.svg`, any case).
    pub fn from_path(path: &Path) -> Option<PlotFormat> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "png" => Some(PlotFormat::Png),
            "svg" => Some(PlotFormat::Svg),
            _ => None,
        }
    }
}

/// How a plot looks.
#[derive(Debug, Clone, PartialEq)]
pub struct PlotOptions {
    /// Width in pixels, within [`PLOT_MIN_SIZE`] and [`PLOT_MAX_SIZE`] (values outside are clamped).
    pub width: u32,
    /// Height in pixels, within [`PLOT_MIN_SIZE`] and [`PLOT_MAX_SIZE`] (values outside are clamped).
    pub height: u32,
    /// The caption; default: the metric's name (`GPU utilization`, `Memory used`, ...).
    pub title: Option<String>,
}

impl Default for PlotOptions {
    fn default() -> Self {
        PlotOptions {
            width: 1280,
            height: 720,
            title: None,
        }
    }
}

const FONT: &str = "sans-serif";

fn register_font() -> Result<(), String> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            plotters::style::register_font(
                FONT,
                FontStyle::Normal,
                epaint_default_fonts::UBUNTU_LIGHT,
            )
            .map_err(|_| "the embedded font could not be loaded".to_string())
        })
        .clone()
}

/// Draws `records` (as [`crate::Recorder`]s give them) into `path`, PNG or SVG by its
/// extension: the metric over elapsed time, one coloured line per device, named in the legend,
/// and for memory each distinct total as a dashed line. Records of several metrics (from one
/// recorder per metric) are drawn as one panel per metric, stacked. Axes are in human units: memory
/// in the [`crate::MemoryUnit`] of the records (MiB below 100 GiB, GiB from there), the unit of
/// [`crate::human_summaries`]; time in seconds, minutes or hours.
///
/// # Errors
///
/// [`Error::Plot`]: the extension is neither `.png` nor `.svg`, `path` is a symbolic link
/// (never written through), or drawing or writing failed; `path` is then left as it was.
pub fn plot(records: &[Record], path: impl AsRef<Path>, options: &PlotOptions) -> Result<()> {
    let path = path.as_ref();
    let fail = |message: String| Error::Plot {
        path: path.to_path_buf(),
        message,
    };
    let format = PlotFormat::from_path(path)
        .ok_or_else(|| fail("the file name must end in .png or .svg".into()))?;
    register_font().map_err(fail)?;
    let size = (
        options.width.clamp(PLOT_MIN_SIZE.0, PLOT_MAX_SIZE.0),
        options.height.clamp(PLOT_MIN_SIZE.1, PLOT_MAX_SIZE.1),
    );
    // A symbolic link at `path` is refused, never followed or replaced (gpu_backend::files).
    // The rename below replaces the name itself, so a link planted after this check is
    // replaced, never written through.
    gpu_backend::files::refuse_link(path).map_err(|e| fail(e.to_string()))?;
    // Drawn into a temporary file in the same folder (a new file of a random name, O_EXCL),
    // written through its own handle, never reopened by name, and renamed into place once
    // whole: a failure never leaves a truncated plot, and an earlier plot at `path` stays until
    // the new one is complete. The temporary file is removed when anything fails.
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let ext = path
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    let mut builder = tempfile::Builder::new();
    builder.prefix(".gpuscope-plot-").suffix(&ext);
    // The permissions `File::create` gives (0666 less the umask), not tempfile's private 0600:
    // the plot is an ordinary output file.
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
    let mut temp = builder.tempfile_in(dir).map_err(|e| {
        fail(format!(
            "cannot create a temporary file in {}: {e}",
            dir.display()
        ))
    })?;
    let mut svg = String::new();
    let drawn = {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        draw(&root, records, options).and_then(|()| root.present().map_err(|e| e.to_string()))
    };
    let bytes = drawn.and_then(|()| match format {
        PlotFormat::Png => rasterise(&svg, size),
        PlotFormat::Svg => Ok(svg.into_bytes()),
    });
    bytes
        .and_then(|bytes| {
            use std::io::Write as _;
            temp.as_file_mut()
                .write_all(&bytes)
                .map_err(|e| format!("cannot write the plot: {e}"))
        })
        .map_err(fail)?;
    temp.persist(path).map_err(|e| {
        fail(format!(
            "cannot move the finished plot into place: {}",
            e.error
        ))
    })?;
    Ok(())
}

/// The PNG of an SVG drawing of `size` pixels, text set in the embedded font.
fn rasterise(svg: &str, size: (u32, u32)) -> Result<Vec<u8>, String> {
    use resvg::{tiny_skia, usvg};
    let mut opt = usvg::Options::default();
    let db = opt.fontdb_mut();
    db.load_font_data(epaint_default_fonts::UBUNTU_LIGHT.to_vec());
    let family = db
        .faces()
        .next()
        .and_then(|f| f.families.first())
        .map(|(name, _)| name.clone())
        .ok_or("the embedded font could not be loaded")?;
    // plotters names the family "sans-serif" (FONT); every generic family is the embedded one.
    db.set_sans_serif_family(family.clone());
    db.set_serif_family(family.clone());
    db.set_monospace_family(family.clone());
    opt.font_family = family;
    let tree =
        usvg::Tree::from_str(svg, &opt).map_err(|e| format!("cannot read the drawing: {e}"))?;
    let mut pixmap = tiny_skia::Pixmap::new(size.0, size.1).ok_or("the plot size is zero")?;
    resvg::render(&tree, tiny_skia::Transform::default(), &mut pixmap.as_mut());
    pixmap
        .encode_png()
        .map_err(|e| format!("cannot encode the PNG: {e}"))
}

/// The smallest plot drawn, in pixels (width, height); smaller sizes are raised to it.
pub const PLOT_MIN_SIZE: (u32, u32) = (200, 150);

/// The largest plot drawn, in pixels (width, height), 8K; larger sizes are lowered to it. A PNG
/// that size takes about 100 MB while it is drawn.
pub const PLOT_MAX_SIZE: (u32, u32) = (7680, 4320);

/// Picks a unit for `records` of `metric`: (divisor, unit name); memory in the unit the summary
/// uses ([`MemoryUnit::for_records`]).
fn value_unit(metric: DeviceMetric, records: &[Record]) -> (f64, &'static str) {
    match metric {
        DeviceMetric::MemoryUsed => {
            let unit = MemoryUnit::for_records(records);
            (unit.bytes(), unit.name())
        }
        DeviceMetric::GpuUtilization | DeviceMetric::MemoryUtilization => (1.0, "%"),
        DeviceMetric::Temperature => (1.0, "°C"),
        DeviceMetric::PowerUsage => (1.0, "W"),
    }
}

/// Picks a unit for durations up to `max` seconds: (divisor, unit name).
fn time_unit(max: f64) -> (f64, &'static str) {
    if max >= 3.0 * 3600.0 {
        (3600.0, "h")
    } else if max >= 3.0 * 60.0 {
        (60.0, "min")
    } else {
        (1.0, "s")
    }
}

/// Draws the records, one panel per metric (in the order the metrics first appear), stacked
/// top to bottom; the caption, when given, names the whole plot.
fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    records: &[Record],
    options: &PlotOptions,
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(err)?;
    let mut metrics: Vec<DeviceMetric> = Vec::new();
    for r in records {
        if !metrics.contains(&r.metric) {
            metrics.push(r.metric);
        }
    }
    if metrics.len() <= 1 {
        return draw_panel(root, records, options.title.clone());
    }
    let root = match &options.title {
        Some(title) => root.titled(title, (FONT, 28)).map_err(err)?,
        None => root.clone(),
    };
    let panels = root.split_evenly((metrics.len(), 1));
    for (metric, area) in metrics.iter().zip(&panels) {
        let mine: Vec<Record> = records
            .iter()
            .filter(|r| r.metric == *metric)
            .cloned()
            .collect();
        draw_panel(area, &mine, None)?;
    }
    Ok(())
}

/// One chart: the records of one metric over time, captioned `title` or the metric's name.
fn draw_panel<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    records: &[Record],
    title: Option<String>,
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let metric = records
        .first()
        .map_or(DeviceMetric::MemoryUsed, |r| r.metric);
    let t_max = records
        .iter()
        .flat_map(|r| r.samples.iter().map(|p| p.0))
        .fold(0.0f64, f64::max);
    let v_max = records
        .iter()
        .flat_map(|r| r.samples.iter().map(|p| p.1).chain(r.reference))
        .fold(0.0f64, f64::max);
    let (vdiv, vunit) = value_unit(metric, records);
    let (tdiv, tunit) = time_unit(t_max);
    let x_end = (t_max / tdiv).max(1e-3);
    let y_end = (v_max / vdiv * 1.05).max(1.0);
    let title = title.unwrap_or_else(|| metric.label().to_string());

    let mut chart = ChartBuilder::on(root)
        .caption(title, (FONT, 28))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(0.0..x_end, 0.0..y_end)
        .map_err(err)?;
    // Whole numbers on an axis whose ticks are whole (a range of 5 units or more), one
    // decimal otherwise.
    let ticks = |end: f64| {
        move |v: &f64| {
            if end >= 5.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.1}")
            }
        }
    };
    let (x_ticks, y_ticks) = (ticks(x_end), ticks(y_end));
    chart
        .configure_mesh()
        .x_desc(format!("time ({tunit})"))
        .y_desc(format!("{} ({vunit})", metric.label()))
        .x_label_formatter(&x_ticks)
        .y_label_formatter(&y_ticks)
        .label_style((FONT, 16))
        .axis_desc_style((FONT, 18))
        // A light grid: the data is what the eye should find.
        .bold_line_style(RGBColor(215, 215, 215))
        .light_line_style(RGBColor(243, 243, 243))
        .draw()
        .map_err(err)?;

    let mut totals: Vec<f64> = Vec::new();
    for r in records {
        if let Some(t) = r.reference {
            if metric == DeviceMetric::MemoryUsed && !totals.contains(&t) {
                totals.push(t);
            }
        }
    }
    for total in &totals {
        let y = total / vdiv;
        let label = format!("total {}", MemoryUnit::for_records(records).format(*total));
        chart
            .draw_series(DashedLineSeries::new(
                [(0.0, y), (x_end, y)],
                10,
                6,
                BLACK.stroke_width(2),
            ))
            .map_err(err)?
            .label(label)
            .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLACK.stroke_width(2)));
    }
    for (i, r) in records.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let points = r.samples.iter().map(|&(t, v)| (t / tdiv, v / vdiv));
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))
            .map_err(err)?
            .label(r.device.legend())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .label_font((FONT, 16))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Columns of `png` (RGBA rows of `width`) holding any dark pixel.
    fn inked_columns(pixmap: &resvg::tiny_skia::Pixmap) -> Vec<bool> {
        let w = pixmap.width() as usize;
        let mut cols = vec![false; w];
        for (i, px) in pixmap.pixels().iter().enumerate() {
            if px.red() < 128 && px.alpha() > 0 {
                cols[i % w] = true;
            }
        }
        cols
    }

    /// The widest run of blank columns between the first and the last inked column.
    fn widest_gap(cols: &[bool]) -> usize {
        let first = cols.iter().position(|&c| c).unwrap_or(0);
        let last = cols.iter().rposition(|&c| c).unwrap_or(0);
        let (mut widest, mut run) = (0, 0);
        for &c in &cols[first..=last] {
            run = if c { 0 } else { run + 1 };
            widest = widest.max(run);
        }
        widest
    }

    fn render_text(text: &str) -> resvg::tiny_skia::Pixmap {
        let svg = format!(
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="400" height="80"><rect width="400" height="80" fill="white"/><text x="10" y="60" font-family="sans-serif" font-size="48">{text}</text></svg>"#
        );
        let png = rasterise(&svg, (400, 80)).unwrap();
        resvg::tiny_skia::Pixmap::decode_png(&png).unwrap()
    }

    /// Regression: plotters' bitmap text drew "NVIDIA H100" as "NVIDIAH1 00": the space had
    /// almost no width and a narrow glyph ("1") a wide one. In a PNG, a space now separates
    /// words by more than any gap between the glyphs of a word.
    #[test]
    fn png_text_is_spaced_by_the_font() {
        // The same two glyphs, without and with a space between them.
        let word = widest_gap(&inked_columns(&render_text("AH")));
        let words = widest_gap(&inked_columns(&render_text("A H")));
        assert!(
            words >= word + 8,
            "a space separates words: {words} px vs {word} px"
        );
    }
}
