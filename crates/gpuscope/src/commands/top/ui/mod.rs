//! Rendering: a pure function of the viewer's state and the terminal's size.
//!
//! Text from outside (device and process names, command lines, users, host names, error text,
//! environments) is shown with its control characters escaped (`\x1b`), never raw: [`fit`],
//! which every line of such text goes through, escapes first.

use gpu_backend::BackendError;
use gpu_devices::text::{escape_control, Escaped};
use gpu_devices::units::bytes2human;
use gpu_devices::{DeviceId, DeviceSnapshot};
use gpu_processes::GpuProcess;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};
use ratatui::Frame;

use super::app::{App, Column, LayoutMode, Refresh, Ring, Row, Screen};

/// The keys, for the help screen and `--help`.
pub const KEYS: &[(&str, &str)] = &[
    ("q, Ctrl+C", "quit"),
    ("Ctrl+Z", "suspend (fg resumes)"),
    ("?", "this help (any key closes it)"),
    ("Up/Down, j/k", "move the selection"),
    (
        "PgUp/PgDn, Home/End",
        "move by a page, to the first or last row",
    ),
    (
        "Enter",
        "details of the selected process (graphs, environment); on a tree-view parent that \
         is not on a GPU, its host facts, environment and GPU children; Esc goes back",
    ),
    ("Space", "tag or untag the selected process"),
    ("U", "untag every process"),
    ("< >  (or , .)", "sort by the previous / next column"),
    ("r", "reverse the sort order"),
    ("click a header", "sort by that column (again: reverse)"),
    (
        "/",
        "filter: user: pid: type: gpu: pod: ns: container: or any text; Esc clears",
    ),
    ("t", "tree view of parent processes"),
    (
        "p",
        "group by pod: each pod's GPU memory and SM share per device",
    ),
    ("f", "device panel layout: auto, compact, full"),
    (
        "I  T  K",
        "send SIGINT / SIGTERM / SIGKILL to the tagged (or selected) processes, after y/n",
    ),
];

/// The parts of the main screen.
#[derive(Debug, Clone, Copy)]
pub struct Areas {
    /// The title line.
    pub header: Rect,
    /// Devices (and the host line).
    pub devices: Rect,
    /// History graphs (empty in the compact layout).
    pub history: Rect,
    /// The process table, its header row first.
    pub table: Rect,
    /// The status line.
    pub status: Rect,
}

/// Whether the device panel is drawn in full in `area`.
pub fn is_full(app: &App, area: Rect) -> bool {
    match app.layout {
        LayoutMode::Full => true,
        LayoutMode::Compact => false,
        LayoutMode::Auto => {
            let n = app.sample.as_ref().map_or(0, |s| s.snap.devices.len()) as u16;
            area.width >= 100 && area.height >= 3 * n + 12
        }
    }
}

/// Splits `area` into the main screen's parts.
pub fn areas(app: &App, area: Rect) -> Areas {
    let n = app.sample.as_ref().map_or(0, |s| s.snap.devices.len()) as u16;
    let full = is_full(app, area);
    // In full, a device whose GPM answers has a third line of activity bars.
    let gpm_lines = app.sample.as_ref().map_or(0, |s| {
        s.snap.devices.iter().filter(|d| has_activity(d)).count()
    }) as u16;
    let dev_h = if full { 2 * n + gpm_lines } else { n } + 1;
    // History graphs need two samples to say anything.
    let hist_h = if full && app.host_cpu.len() >= 2 {
        n + 2
    } else {
        0
    };
    let bottom = area.y + area.height;
    let mut y = area.y;
    let mut take = |h: u16| {
        let h = h.min(bottom - y);
        let r = Rect::new(area.x, y, area.width, h);
        y += h;
        r
    };
    let header = take(1);
    let devices = take(dev_h);
    let history = take(hist_h);
    let above = area.y.saturating_add(dev_h).saturating_add(hist_h);
    let table = take(bottom.saturating_sub(above.saturating_add(2)));
    let status = take(1);
    Areas {
        header,
        devices,
        history,
        table,
        status,
    }
}

/// The process table's columns at `width`: (column, x offset, width). The first two cells of a
/// row hold the selection and tag marks.
/// The POD column is there only when `pods` (some process runs in a container).
pub fn columns(width: u16, pods: bool) -> Vec<(Column, u16, u16)> {
    let narrow = width < 110;
    let mut out = Vec::new();
    let mut x = 2u16;
    for col in Column::ALL {
        let w = match col {
            Column::Device => 4,
            Column::Pid => 8,
            Column::User => {
                if narrow {
                    8
                } else {
                    12
                }
            }
            Column::Type if narrow => continue,
            Column::Type => 4,
            Column::GpuMem => 8,
            Column::Sm => 4,
            Column::Cpu => 6,
            Column::HostMem if narrow => continue,
            Column::HostMem => 9,
            Column::Time => 9,
            Column::Pod if !pods => continue,
            Column::Pod => {
                if narrow {
                    16
                } else {
                    28
                }
            }
            Column::Command => width.saturating_sub(x).max(1),
        };
        out.push((col, x, w));
        x = x.saturating_add(w + 1);
    }
    out
}

struct Theme {
    color: bool,
    light: bool,
    colorful: bool,
    ascii: bool,
    gpu_thresh: (u8, u8),
    mem_thresh: (u8, u8),
}

/// A span, or several, to go into a line: what `spans!` takes.
trait IntoSpans {
    fn push_into(self, spans: &mut Vec<Span<'static>>);
}

impl IntoSpans for Span<'static> {
    fn push_into(self, spans: &mut Vec<Span<'static>>) {
        spans.push(self);
    }
}

impl IntoSpans for Vec<Span<'static>> {
    fn push_into(self, spans: &mut Vec<Span<'static>>) {
        spans.extend(self);
    }
}

/// `vec![...]` of spans where an item may also be several spans (a bar in `--colorful`).
macro_rules! spans {
    ($($item:expr),* $(,)?) => {{
        let mut spans: Vec<Span<'static>> = Vec::new();
        $( IntoSpans::push_into($item, &mut spans); )*
        spans
    }};
}

/// The host's and GPM's bars: yellow from 50%, red from 80%.
const HOST_THRESH: (u8, u8) = (50, 80);

/// `c` as the light theme shows it (or as it is, when `light` is off).
pub(crate) fn light_shade(c: Color, light: bool) -> Color {
    match (light, c) {
        (true, Color::Yellow) => Color::Indexed(136),
        (true, Color::Green) => Color::Indexed(28),
        (true, Color::Cyan) => Color::Blue,
        (_, c) => c,
    }
}

impl Theme {
    fn of(app: &App) -> Theme {
        Theme {
            color: app.opts.color,
            light: app.opts.light,
            colorful: app.opts.colorful,
            ascii: app.opts.ascii,
            gpu_thresh: app.opts.gpu_util_thresh,
            mem_thresh: app.opts.mem_util_thresh,
        }
    }

    /// Green under the first threshold, yellow from it, red from the second (nvitop's light,
    /// moderate and heavy load).
    fn level_with(&self, pct: Option<f64>, (low, high): (u8, u8)) -> Style {
        match (self.color, pct) {
            (false, _) | (true, None) => Style::default(),
            (true, Some(p)) if p >= f64::from(high) => Style::default().fg(Color::Red),
            (true, Some(p)) if p >= f64::from(low) => self.fg(Color::Yellow),
            (true, Some(_)) => self.fg(Color::Green),
        }
    }

    /// A host reading's colour: 50% and 80%.
    fn level(&self, pct: Option<f64>) -> Style {
        self.level_with(pct, HOST_THRESH)
    }

    /// A bar of `width` cells for `pct`, coloured by the thresholds `(low, high)`: all in the
    /// colour of the value, or with `--colorful` each filled cell in the colour of the share it
    /// stands for (green, then yellow from `low`, red from `high`: nvitop's spectrum bars).
    fn bar_spans(&self, pct: Option<f64>, width: usize, thresh: (u8, u8)) -> Vec<Span<'static>> {
        let text = self.bar(pct, width);
        if !(self.color && self.colorful) || pct.is_none() || width == 0 {
            return vec![Span::styled(text, self.level_with(pct, thresh))];
        }
        let mut spans: Vec<Span<'static>> = Vec::new();
        let mut run = String::new();
        let mut run_style: Option<Style> = None;
        for (i, c) in text.chars().enumerate() {
            let filled = !(c == '░' || c == '.');
            let style = if filled {
                // The share of 100% at the middle of this cell.
                let at = (i as f64 + 0.5) * 100.0 / width as f64;
                self.level_with(Some(at), thresh)
            } else {
                Style::default()
            };
            if run_style != Some(style) && !run.is_empty() {
                spans.push(Span::styled(
                    std::mem::take(&mut run),
                    run_style.unwrap_or_default(),
                ));
            }
            run_style = Some(style);
            run.push(c);
        }
        if !run.is_empty() {
            spans.push(Span::styled(run, run_style.unwrap_or_default()));
        }
        spans
    }

    /// A GPU utilization's colour (--gpu-util-thresh).
    fn gpu_level(&self, pct: Option<f64>) -> Style {
        self.level_with(pct, self.gpu_thresh)
    }

    /// A GPU memory use's colour (--mem-util-thresh).
    fn mem_level(&self, pct: Option<f64>) -> Style {
        self.level_with(pct, self.mem_thresh)
    }

    /// A foreground colour of the theme: on a light background (`--light`), yellow, green and
    /// cyan become darker shades (256-colour indices 136, 28 and blue) that stay readable.
    fn fg(&self, c: Color) -> Style {
        Style::default().fg(light_shade(c, self.light))
    }

    fn accent(&self) -> Style {
        if self.color {
            self.fg(Color::Cyan)
        } else {
            Style::default()
        }
    }

    fn warn(&self) -> Style {
        if self.color {
            self.fg(Color::Yellow)
        } else {
            Style::default()
        }
    }

    fn title(&self) -> Style {
        Style::default().add_modifier(Modifier::REVERSED)
    }

    fn bar(&self, pct: Option<f64>, width: usize) -> String {
        let Some(p) = pct else {
            return format!("{:<width$}", "N/A");
        };
        let filled = ((p.clamp(0.0, 100.0) / 100.0) * width as f64).round() as usize;
        let (on, off) = if self.ascii {
            ('#', '.')
        } else {
            ('█', '░')
        };
        let mut s = String::with_capacity(width * 3);
        s.extend(std::iter::repeat_n(on, filled));
        s.extend(std::iter::repeat_n(off, width - filled.min(width)));
        s
    }

    /// One line of history: the newest `width` readings of `ring`, scaled to `max`.
    fn spark(&self, ring: &Ring, width: usize, max: f64) -> String {
        const UNICODE: [char; 9] = [' ', '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
        const ASCII: [char; 9] = [' ', '.', ':', '-', '=', '+', '*', '#', '@'];
        let levels = if self.ascii { &ASCII } else { &UNICODE };
        let n = ring.len().min(width);
        let mut s: String = std::iter::repeat_n(' ', width - n).collect();
        for v in ring.last(n) {
            let c = match v {
                None => ' ',
                Some(v) if max > 0.0 => {
                    let l = ((v / max).clamp(0.0, 1.0) * 8.0).round() as usize;
                    levels[l.max(usize::from(v > 0.0))]
                }
                Some(_) => levels[0],
            };
            s.push(c);
        }
        s
    }

    fn rule(&self, width: u16, title: &str) -> Line<'static> {
        let ch = if self.ascii { "-" } else { "─" };
        let mut s = format!("{ch}{ch} {title} ");
        let len = s.chars().count();
        s.push_str(&ch.repeat((width as usize).saturating_sub(len)));
        Line::styled(s, self.accent())
    }

    fn border(&self) -> ratatui::symbols::border::Set<'static> {
        if self.ascii {
            ratatui::symbols::border::Set {
                top_left: "+",
                top_right: "+",
                bottom_left: "+",
                bottom_right: "+",
                vertical_left: "|",
                vertical_right: "|",
                horizontal_top: "-",
                horizontal_bottom: "-",
            }
        } else {
            ratatui::symbols::border::PLAIN
        }
    }
}

/// Draws the whole screen.
pub fn draw(frame: &mut Frame, app: &App) {
    let area = frame.area();
    let theme = Theme::of(app);
    match &app.screen {
        Screen::Help => draw_help(frame, app, &theme, area),
        Screen::Detail(pid) => draw_detail(frame, app, &theme, area, *pid),
        Screen::Main => draw_main(frame, app, &theme, area),
    }
    if let Some(pending) = &app.confirm {
        draw_confirm(frame, app, &theme, area, pending);
    }
    if theme.ascii {
        // Names, commands and cut marks may hold other characters: nothing non-ASCII is drawn.
        for cell in frame.buffer_mut().content.iter_mut() {
            if !cell.symbol().is_ascii() {
                cell.set_symbol("~");
            }
        }
    }
}

fn header_line(app: &App, theme: &Theme, width: u16) -> Line<'static> {
    let mut parts = vec![format!("gpuscope top ({})", app.opts.source_label)];
    parts.push(format!(
        "driver {}",
        app.opts.driver_version.as_deref().unwrap_or("N/A")
    ));
    parts.push(format!(
        "CUDA {}",
        app.opts.cuda_version.as_deref().unwrap_or("N/A")
    ));
    if let Some(s) = &app.sample {
        if let Some(h) = &s.machine.hostname {
            parts.push(h.clone());
        }
        let secs = s.now_ms / 1000;
        let local = if app.opts.local_time {
            crate::present::time::local_clock(secs)
        } else {
            None
        };
        parts.push(local.unwrap_or_else(|| {
            format!(
                "{:02}:{:02}:{:02} UTC",
                secs / 3600 % 24,
                secs / 60 % 60,
                secs % 60
            )
        }));
    } else {
        parts.push("waiting for the first sample".into());
    }
    if app.opts.readonly {
        parts.push("read-only".into());
    }
    let text = fit(&parts.join("  "), width as usize);
    Line::styled(text, theme.title())
}

fn draw_main(frame: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    let a = areas(app, area);
    frame.render_widget(
        Paragraph::new(header_line(app, theme, area.width)),
        a.header,
    );
    let Some(sample) = &app.sample else {
        draw_status(frame, app, theme, a.status);
        return;
    };
    let full = is_full(app, area);
    let mut lines = Vec::new();
    for d in &sample.snap.devices {
        if full {
            lines.extend(device_full(d, theme, area.width));
        } else {
            lines.push(device_compact(d, theme, area.width));
        }
    }
    lines.push(host_line(sample, theme, area.width));
    frame.render_widget(Paragraph::new(lines), a.devices);
    if a.history.height > 0 {
        frame.render_widget(
            Paragraph::new(history_lines(app, theme, area.width)),
            a.history,
        );
    }
    draw_table(frame, app, theme, a.table);
    draw_status(frame, app, theme, a.status);
}

/// Percent of `used` in `total`.
fn pct(used: u64, total: u64) -> Option<f64> {
    (total > 0).then(|| used as f64 * 100.0 / total as f64)
}

fn is_lost(d: &DeviceSnapshot) -> bool {
    d.errors.iter().any(|e| e.error == BackendError::GpuLost)
}

fn label(id: DeviceId) -> String {
    match id {
        DeviceId::Gpu(_) => id.to_string(),
        DeviceId::Mig { .. } => format!(" {id}"),
    }
}

/// The device's label with `!` after it when it needs attention
/// (`DeviceSnapshot::attention`).
fn marked_label(d: &DeviceSnapshot) -> String {
    if d.attention().is_empty() {
        label(d.id)
    } else {
        format!("{}!", label(d.id))
    }
}

/// The newest XID error since start, with its time and meaning: `"  XID 79 at ...: GPU has
/// fallen off the bus"`.
fn last_xid(d: &DeviceSnapshot) -> Option<String> {
    let e = d
        .events
        .value()?
        .iter()
        .rev()
        .find(|e| e.kind == gpu_backend::EventKind::Xid)?;
    let meaning =
        gpu_backend::xid_description(e.data).map_or_else(String::new, |m| format!(": {m}"));
    Some(format!(
        "  XID {} at {}{meaning}",
        e.data,
        crate::present::time::event_time(e.timestamp_us)
    ))
}

fn na<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "N/A".into(), |v| v.to_string())
}

fn watts(mw: Option<&u32>) -> String {
    na(mw.map(|&mw| format!("{}W", (f64::from(mw) / 1000.0).round() as u64)))
}

fn pstate(d: &DeviceSnapshot) -> String {
    na(d.performance_state
        .value()
        .and_then(|&p| gpu_backend::PerformanceState::known(p))
        .map(|p| p.to_string()))
}

fn mig_mode(d: &DeviceSnapshot) -> String {
    match (d.id, d.mig_mode.value()) {
        (DeviceId::Mig { .. }, _) => format!(
            "GI {} CI {}",
            na(d.gpu_instance_id.value()),
            na(d.compute_instance_id.value())
        ),
        (_, Some(m)) if m.current => "On".into(),
        (_, Some(_)) => "Off".into(),
        (_, None) => "N/A".into(),
    }
}

fn device_compact(d: &DeviceSnapshot, theme: &Theme, width: u16) -> Line<'static> {
    let w = width as usize;
    let name_w = (w / 5).clamp(8, 28);
    let name = fit(d.name.value().map_or("N/A", String::as_str), name_w);
    let head = format!("{:<5}{:<name_w$} ", marked_label(d), name);
    if is_lost(d) {
        return Line::from(vec![
            Span::raw(head),
            Span::styled("GPU is lost (fell off the bus)", theme.level(Some(100.0))),
        ]);
    }
    let temp = na(d.temperature.value().map(|t| format!("{t}C")));
    let power = format!(
        "{}/{}",
        watts(d.power_usage.value()),
        watts(d.enforced_power_limit.value())
    );
    let mem = d.memory.value().and_then(|m| pct(m.used, m.total));
    let util = d.utilization.value().map(|u| f64::from(u.gpu));
    let fixed = head.chars().count() + 5 + 4 + 12 + 5 + 5 + 6 + 5;
    let bar_w = w.saturating_sub(fixed) / 2;
    let bar_w = bar_w.max(3);
    let spans = spans![
        Span::raw(head),
        Span::raw(format!("{temp:>4} {:<3} {power:>11} ", pstate(d))),
        mem_and_util(theme, mem, format!(" {:>4} ", percent(mem)), util, bar_w, 4),
    ];
    clip(spans, w)
}

/// A device line's two bars, `bar_w` wide each: `MEM`, the memory bar and `mem_tail` (what
/// follows it), then `UTIL`, the utilization bar and its percentage in `pct_w` columns.
fn mem_and_util(
    theme: &Theme,
    mem: Option<f64>,
    mem_tail: String,
    util: Option<f64>,
    bar_w: usize,
    pct_w: usize,
) -> Vec<Span<'static>> {
    spans![
        Span::raw("MEM "),
        theme.bar_spans(mem, bar_w, theme.mem_thresh),
        Span::raw(mem_tail),
        Span::raw("UTIL "),
        theme.bar_spans(util, bar_w, theme.gpu_thresh),
        Span::raw(format!(" {:>pct_w$}", percent(util))),
    ]
}

fn percent(p: Option<f64>) -> String {
    na(p.map(|p| format!("{}%", p.round() as u64)))
}

fn device_full(d: &DeviceSnapshot, theme: &Theme, width: u16) -> Vec<Line<'static>> {
    let w = width as usize;
    let name = Escaped(d.name.value().map_or("N/A", String::as_str));
    let bus = Escaped(d.pci.value().map_or("N/A", |p| p.bus_id.as_str()));
    let first = if is_lost(d) {
        Line::from(vec![
            Span::raw(format!("{:<5}{name}  Bus {bus}  ", label(d.id))),
            Span::styled("GPU is lost (fell off the bus)", theme.level(Some(100.0))),
        ])
    } else {
        let mut spans = vec![Span::raw(format!(
            "{:<5}{name}  Bus {bus}  Fan {}  Temp {}  {}  Pwr {} / {}  MIG {}",
            marked_label(d),
            na(d.fan_speed.value().map(|f| format!("{f}%"))),
            na(d.temperature.value().map(|t| format!("{t}C"))),
            pstate(d),
            watts(d.power_usage.value()),
            watts(d.enforced_power_limit.value()),
            mig_mode(d),
        ))];
        let attention = d.attention();
        if !attention.is_empty() {
            spans.push(Span::styled(
                format!("  ! {}", attention.join(", ")),
                theme.warn(),
            ));
        }
        if let Some(xid) = last_xid(d) {
            spans.push(Span::styled(xid, theme.warn()));
        }
        Line::from(spans)
    };
    let mem = d.memory.value();
    let mem_pct = mem.and_then(|m| pct(m.used, m.total));
    let util = d.utilization.value().map(|u| f64::from(u.gpu));
    let mem_text = mem.map_or_else(
        || "N/A".to_string(),
        |m| format!("{} / {}", bytes2human(m.used), bytes2human(m.total)),
    );
    let fixed = 5 + 4 + 1 + 19 + 1 + 5 + 2 + 5 + 1 + 5;
    let bar_w = (w.saturating_sub(fixed) / 2).max(3);
    let second = clip(
        spans![
            Span::raw("     "),
            mem_and_util(
                theme,
                mem_pct,
                format!(" {mem_text:>19} {:>5}  ", percent(mem_pct)),
                util,
                bar_w,
                5
            ),
        ],
        w,
    );
    if is_lost(d) {
        return vec![
            clip(first.spans, w),
            Line::raw("     no readings: NVML answers gpu_lost for this device"),
        ];
    }
    let mut lines = vec![clip(first.spans, w), second];
    if let Some(m) = d.gpm.value().filter(|_| has_activity(d)) {
        // What the SMs and tensor cores really did (GPM), beside UTIL's "a kernel ran".
        let sm = m.sm_activity;
        let tensor = m.tensor_activity;
        let fixed = 5 + 4 + 1 + 19 + 1 + 5 + 2 + 5 + 1 + 5;
        let bar_w = (w.saturating_sub(fixed) / 2).max(3);
        let occupancy = format!("occ {}", percent(m.sm_occupancy));
        lines.push(clip(
            spans![
                Span::raw("     SM  "),
                theme.bar_spans(sm, bar_w, HOST_THRESH),
                Span::raw(format!(" {occupancy:>19} {:>5}  ", percent(sm))),
                Span::raw("TENS "),
                theme.bar_spans(tensor, bar_w, HOST_THRESH),
                Span::raw(format!(" {:>5}", percent(tensor))),
            ],
            w,
        ));
    }
    lines
}

/// Whether the device's GPM answered with SM activity (Hopper and newer, after the first
/// refresh): then the full layout shows its activity bars.
pub(crate) fn has_activity(d: &DeviceSnapshot) -> bool {
    !is_lost(d) && d.gpm.value().is_some_and(|m| m.sm_activity.is_some())
}

fn host_line(sample: &Refresh, theme: &Theme, width: u16) -> Line<'static> {
    let w = width as usize;
    let cpu = sample.host.cpu_percent;
    let mem = match (sample.host.memory_used, sample.machine.memory_total) {
        (Some(u), Some(t)) => pct(u, t),
        _ => None,
    };
    let load = sample.host.load_average.map_or_else(
        || "N/A".to_string(),
        |l| format!("{:.2} {:.2} {:.2}", l[0], l[1], l[2]),
    );
    let bar_w = (w.saturating_sub(5 + 4 + 6 + 5 + 6 + 24) / 2).max(3);
    clip(
        spans![
            Span::raw("Host CPU "),
            theme.bar_spans(cpu, bar_w, HOST_THRESH),
            Span::raw(format!(" {:>5} MEM ", percent(cpu))),
            theme.bar_spans(mem, bar_w, HOST_THRESH),
            Span::raw(format!(" {:>5} Load {load}", percent(mem))),
        ],
        w,
    )
}

fn history_lines(app: &App, theme: &Theme, width: u16) -> Vec<Line<'static>> {
    let w = width as usize;
    let mut lines = vec![theme.rule(width, "history: GPU utilization | memory used")];
    let graph_w = (w.saturating_sub(6 + 2 * 6 + 3)) / 2;
    let Some(sample) = &app.sample else {
        return lines;
    };
    let empty = Default::default();
    for d in &sample.snap.devices {
        let h = app.device_history.get(&d.id).unwrap_or(&empty);
        let util = h.gpu.last(1).next().flatten();
        let mem = h.memory.last(1).next().flatten();
        lines.push(clip(
            vec![
                Span::raw(format!("{:<6}", label(d.id))),
                Span::styled(theme.spark(&h.gpu, graph_w, 100.0), theme.gpu_level(util)),
                Span::raw(format!(" {:>5} | ", percent(util))),
                Span::styled(theme.spark(&h.memory, graph_w, 100.0), theme.mem_level(mem)),
                Span::raw(format!(" {:>5}", percent(mem))),
            ],
            w,
        ));
    }
    let cpu = app.host_cpu.last(1).next().flatten();
    let mem = app.host_mem.last(1).next().flatten();
    lines.push(clip(
        vec![
            Span::raw(format!("{:<6}", "host")),
            Span::styled(theme.spark(&app.host_cpu, graph_w, 100.0), theme.level(cpu)),
            Span::raw(format!(" {:>5} | ", percent(cpu))),
            Span::styled(theme.spark(&app.host_mem, graph_w, 100.0), theme.level(mem)),
            Span::raw(format!(" {:>5}", percent(mem))),
        ],
        w,
    ));
    lines
}

fn cell(p: &GpuProcess, col: Column) -> String {
    match col {
        Column::Device => p.device.to_string(),
        Column::Pid => p.pid.to_string(),
        Column::User => na(p.host.user.as_deref()),
        Column::Type => p.kind_str().to_string(),
        Column::GpuMem => na(p.gpu_memory.map(short_bytes)),
        Column::Sm => na(p.utilization.sm),
        Column::Cpu => na(p.host.cpu_percent.map(|c| format!("{c:.1}"))),
        Column::HostMem => na(p.host.rss.map(short_bytes)),
        Column::Time => na(p.host.running_time_human.as_deref()),
        Column::Pod => na(super::app::pod_label(p)),
        Column::Command => p
            .host
            .command
            .clone()
            .filter(|c| !c.is_empty())
            .or_else(|| p.host.name.clone())
            .unwrap_or_else(|| "N/A (the process cannot be read)".into()),
    }
}

/// How old the per-process sample behind a process's utilization is, for the detail view:
/// `  (sample 2.4s old)`, or why the figures are N/A when it is too old; nothing when the
/// process has no sample.
fn sample_age(u: &gpu_processes::ProcessUtilization) -> String {
    let Some(age_ms) = u.sample_age_ms else {
        return String::new();
    };
    let secs = age_ms as f64 / 1000.0;
    if u.sm.is_some() {
        format!("  (sample {secs:.1}s old)")
    } else {
        format!(
            "  (newest sample {secs:.0}s old: N/A after {}s)",
            gpu_processes::SAMPLE_MAX_AGE.as_secs()
        )
    }
}

/// Bytes in at most 8 characters: `812MiB`, `21.3GiB`.
fn short_bytes(b: u64) -> String {
    const MIB: f64 = 1024.0 * 1024.0;
    let mib = b as f64 / MIB;
    if mib < 1024.0 {
        format!("{}MiB", mib.round() as u64)
    } else if mib < 1024.0 * 100.0 {
        format!("{:.1}GiB", mib / 1024.0)
    } else {
        format!("{}GiB", (mib / 1024.0).round() as u64)
    }
}

fn right_aligned(col: Column) -> bool {
    matches!(
        col,
        Column::Pid | Column::GpuMem | Column::Sm | Column::Cpu | Column::HostMem | Column::Time
    )
}

fn draw_table(frame: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    if area.height == 0 {
        return;
    }
    if app.by_pod {
        draw_pod_table(frame, app, area);
        return;
    }
    let cols = columns(area.width, app.shows_pods());
    let rows = app.rows();
    let cursor = app.cursor(&rows);
    let body_h = area.height.saturating_sub(1) as usize;
    let offset = (cursor + 1).saturating_sub(body_h);
    let Some(sample) = &app.sample else {
        return;
    };
    let procs = &sample.snap.processes;

    let mut header = String::from("  ");
    for &(col, x, w) in &cols {
        pad_to(&mut header, x as usize);
        let arrow = match (app.sort == col, app.descending) {
            (false, _) => "",
            (true, true) => {
                if theme.ascii {
                    "v"
                } else {
                    "▼"
                }
            }
            (true, false) => {
                if theme.ascii {
                    "^"
                } else {
                    "▲"
                }
            }
        };
        let mut title = format!("{}{arrow}", col.title());
        if col == Column::Command {
            let mut notes = Vec::new();
            if app.tree {
                notes.push("tree".to_string());
            }
            if !app.filter.is_empty() {
                notes.push(format!("filter: {}", app.filter.text));
            }
            if !app.tagged.is_empty() {
                notes.push(format!("{} tagged", app.tagged.len()));
            }
            let n = rows.iter().filter(|r| r.process.is_some()).count();
            notes.push(format!("{n} of {} shown", procs.len()));
            title = format!("{title}  ({})", notes.join(", "));
        }
        header.push_str(&align(&title, w as usize, right_aligned(col)));
    }
    let mut lines = vec![Line::styled(
        fit(&header, area.width as usize),
        Style::default().add_modifier(Modifier::BOLD | Modifier::REVERSED),
    )];
    // A process list that could not be read is N/A with its reason, never "no processes".
    let unknown = unknown_process_lists(&sample.snap);
    for (reason, ids) in &unknown {
        lines.push(Line::styled(
            fit(
                &format!("  Processes of GPU {}: N/A ({})", ids.join(", "), reason),
                area.width as usize,
            ),
            theme.warn(),
        ));
    }
    if rows.is_empty() {
        let msg = if !procs.is_empty() {
            "  No process matches the filter (/ to change it, Esc in the prompt to clear)."
        } else if unknown.is_empty() {
            "  No running GPU processes."
        } else if unknown.iter().map(|(_, ids)| ids.len()).sum::<usize>()
            < sample.snap.devices.len()
        {
            "  No running GPU processes on the other devices."
        } else {
            ""
        };
        if !msg.is_empty() {
            lines.push(Line::raw(msg));
        }
    }
    for (i, row) in rows.iter().enumerate().skip(offset).take(body_h) {
        lines.push(table_row(
            app,
            theme,
            &cols,
            procs,
            row,
            i == cursor,
            area.width,
        ));
    }
    frame.render_widget(Paragraph::new(lines), area);
}

/// The view grouped by Kubernetes pod: per device, each pod's process count, GPU memory and SM
/// share summed over its processes (those that pass the filter).
fn draw_pod_table(frame: &mut Frame, app: &App, area: Rect) {
    let (groups, outside) = app.pod_groups();
    let width = area.width as usize;
    let header = format!(
        "  {:<5} {:<40} {:>5} {:>8} {:>4}  (by pod{})",
        "GPU",
        "NAMESPACE/POD",
        "PROCS",
        "GPU-MEM",
        "SM%",
        if app.filter.is_empty() {
            String::new()
        } else {
            format!(", filter: {}", app.filter.text)
        }
    );
    let mut lines = vec![Line::styled(
        fit(&header, width),
        Style::default().add_modifier(Modifier::BOLD | Modifier::REVERSED),
    )];
    if groups.is_empty() {
        lines.push(Line::raw(
            "  No process runs in a Kubernetes pod (p: back to processes).",
        ));
    }
    for g in groups.iter().take(area.height.saturating_sub(2) as usize) {
        let row = format!(
            "  {:<5} {:<40} {:>5} {:>8} {:>4}",
            g.device.to_string(),
            fit(&g.label, 40),
            g.processes,
            na(g.gpu_memory.map(short_bytes)),
            na(g.sm),
        );
        lines.push(Line::raw(fit(&row, width)));
    }
    if outside > 0 {
        lines.push(Line::raw(fit(
            &format!("  {outside} process(es) outside any pod"),
            width,
        )));
    }
    frame.render_widget(Paragraph::new(lines), area);
}

/// The devices whose process lists could not be read, grouped by the (escaped) reason, in
/// device order.
fn unknown_process_lists(snap: &gpu_processes::Snapshots) -> Vec<(String, Vec<String>)> {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for id in &snap.unknown_processes {
        let reason = snap
            .errors_of(*id)
            .next()
            .map_or_else(|| "unknown reason".to_string(), |e| e.error.to_string());
        let reason = escape_control(&reason).into_owned();
        match groups.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, ids)) => ids.push(id.to_string()),
            None => groups.push((reason, vec![id.to_string()])),
        }
    }
    groups
}

fn table_row(
    app: &App,
    theme: &Theme,
    cols: &[(Column, u16, u16)],
    procs: &[GpuProcess],
    row: &Row,
    selected: bool,
    width: u16,
) -> Line<'static> {
    let mut s = String::new();
    s.push(if selected { '>' } else { ' ' });
    s.push(if app.tagged.contains(&row.pid) {
        '*'
    } else {
        ' '
    });
    // nvitop's branches: `├─` for a child with a sibling below, `└─` for the last one, and
    // `│` below an ancestor whose siblings go on.
    let (tee, end, bar) = if theme.ascii {
        ("|- ", "`- ", "|  ")
    } else {
        ("├─ ", "└─ ", "│  ")
    };
    let indent = |depth: usize| {
        let mut s = String::new();
        for level in 1..=depth {
            let goes_on = level <= 64 && row.more & (1 << (level - 1)) != 0;
            s.push_str(match (level == depth, goes_on) {
                (true, true) => tee,
                (true, false) => end,
                (false, true) => bar,
                (false, false) => "   ",
            });
        }
        s
    };
    for &(col, x, w) in cols {
        pad_to(&mut s, x as usize);
        let text = match row.process {
            Some(i) => {
                let t = cell(&procs[i], col);
                if col == Column::Command {
                    format!("{}{t}", indent(row.depth))
                } else {
                    t
                }
            }
            // A parent that is not on a GPU: its name, user and command when the host told them
            // (nvitop shows them too).
            None => {
                let facts = app.sample.as_ref().and_then(|s| s.parents.get(&row.pid));
                match (col, facts) {
                    (Column::Pid, _) => row.pid.to_string(),
                    (Column::User, Some(f)) => {
                        escape_control(f.user.as_deref().unwrap_or("N/A")).into_owned()
                    }
                    (Column::Command, Some(f)) => {
                        let command = if f.cmdline.is_empty() {
                            f.name.clone().unwrap_or_else(|| "N/A".into())
                        } else {
                            gpu_processes::shell_join(&f.cmdline)
                        };
                        format!(
                            "{}{}  (not on a GPU)",
                            indent(row.depth),
                            escape_control(&command)
                        )
                    }
                    (Column::Command, None) => {
                        format!("{}(parent process, not on a GPU)", indent(row.depth))
                    }
                    _ => "-".into(),
                }
            }
        };
        s.push_str(&align(&text, w as usize, right_aligned(col)));
    }
    let mut style = Style::default();
    if selected {
        style = style.add_modifier(Modifier::REVERSED);
    }
    if app.tagged.contains(&row.pid) && theme.color {
        style = style.fg(Color::Magenta);
    }
    Line::styled(fit(&s, width as usize), style)
}

fn draw_status(frame: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    let text = if let Some(input) = &app.filter_input {
        format!(
            "Filter: {input}_   (Enter apply, Esc clear; user:NAME pid:N type:C|G|C+G gpu:ID pod: ns: container: text)"
        )
    } else if let Some(msg) = &app.status {
        msg.clone()
    } else {
        let mut hints = "q quit  ? help  / filter  </> sort  r reverse  t tree  Enter details  Space tag  f layout".to_string();
        if app.signals_on() {
            hints.push_str("  I/T/K signal");
        } else if !app.opts.live {
            hints.push_str("  (signals off: a replay)");
        }
        hints
    };
    frame.render_widget(
        Paragraph::new(Line::styled(
            fit(&text, area.width as usize),
            theme.accent(),
        )),
        area,
    );
}

fn draw_help(frame: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    let mut lines = vec![
        Line::styled(
            fit(
                "gpuscope top: keys (any key closes this)",
                area.width as usize,
            ),
            theme.title(),
        ),
        Line::raw(""),
    ];
    for (keys, what) in KEYS {
        if !app.opts.live && keys.starts_with("I ") {
            lines.push(Line::raw(format!(
                "  {keys:<22} off: this is a replay of a recording, not this machine's processes"
            )));
            continue;
        }
        if app.opts.readonly && keys.starts_with("I ") {
            lines.push(Line::raw(format!(
                "  {keys:<22} off: started with --readonly"
            )));
            continue;
        }
        lines.push(Line::raw(format!("  {keys:<22} {what}")));
    }
    lines.push(Line::raw(""));
    lines.push(Line::raw(format!(
        "  Columns: GPU, PID, USER, TYPE (C compute, G graphics), GPU-MEM, SM% (the process's \
         newest per-process sample, kept up to {}s; Enter shows its age), CPU% (of one core), \
         HOST-MEM (RSS), TIME (running), COMMAND.",
        gpu_processes::SAMPLE_MAX_AGE.as_secs()
    )));
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), area);
}

fn draw_detail(frame: &mut Frame, app: &App, theme: &Theme, area: Rect, pid: u32) {
    let w = area.width as usize;
    let procs: Vec<&GpuProcess> = app
        .sample
        .as_ref()
        .map(|s| s.snap.processes.iter().filter(|p| p.pid == pid).collect())
        .unwrap_or_default();
    let mut lines = vec![Line::styled(
        fit(&format!("Process {pid}   (Esc back, q quit)"), w),
        theme.title(),
    )];
    let mut parent = false;
    match procs.first() {
        None => {
            let children: Vec<&GpuProcess> = app
                .sample
                .as_ref()
                .map(|s| {
                    s.snap
                        .processes
                        .iter()
                        .filter(|p| p.host.ppid == Some(pid) && p.pid != pid)
                        .collect()
                })
                .unwrap_or_default();
            if children.is_empty() {
                lines.push(Line::raw(format!(
                    "PID {pid} is no longer on a GPU; its history is kept below."
                )));
            } else {
                parent = true;
                parent_detail(&mut lines, app, pid, &children, w);
            }
        }
        Some(p) => {
            let h = &p.host;
            let kv = |k: &str, v: String| Line::raw(fit(&format!("{k:<14}{v}"), w));
            lines.push(kv("Command", cell(p, Column::Command)));
            lines.push(kv("User", na(h.user.as_deref())));
            lines.push(kv(
                "Name / status",
                format!("{} / {}", na(h.name.as_deref()), na(h.status.as_deref())),
            ));
            lines.push(kv(
                "Parent PID",
                format!(
                    "{}{}",
                    na(h.ppid),
                    h.ns_pid
                        .map(|n| format!("   (PID {n} in its container)"))
                        .unwrap_or_default()
                ),
            ));
            lines.push(kv("Running", na(h.running_time_human.as_deref())));
            lines.push(kv(
                "Host",
                format!(
                    "CPU {}%  RSS {}  ({} of memory)",
                    na(h.cpu_percent.map(|c| format!("{c:.1}"))),
                    na(h.rss.map(bytes2human)),
                    na(h.memory_percent.map(|m| format!("{m:.1}%")))
                ),
            ));
            for p in &procs {
                lines.push(kv(
                    &format!("GPU {}", p.device),
                    format!(
                        "type {}  memory {} ({})  SM {}%  mem {}%  enc {}%  dec {}%{}",
                        p.kind_str(),
                        na(p.gpu_memory_human.as_deref()),
                        na(p.gpu_memory_percent.map(|m| format!("{m:.1}%"))),
                        na(p.utilization.sm),
                        na(p.utilization.memory),
                        na(p.utilization.encoder),
                        na(p.utilization.decoder),
                        sample_age(&p.utilization)
                    ),
                ));
            }
        }
    }
    lines.push(theme.rule(area.width, "history"));
    let graph_w = w.saturating_sub(16 + 12);
    if let Some(h) = app.process_history.get(&pid) {
        let max_of = |r: &Ring| r.last(usize::MAX).flatten().fold(0.0f64, f64::max);
        let now = |r: &Ring| r.last(1).next().flatten();
        let graphs: [(&str, &Ring, f64, String); 4] = [
            (
                "GPU memory",
                &h.gpu_memory,
                max_of(&h.gpu_memory),
                na(now(&h.gpu_memory).map(|b| bytes2human(b as u64))),
            ),
            (
                "SM %",
                &h.sm,
                100.0,
                na(now(&h.sm).map(|v| format!("{v:.0}%"))),
            ),
            (
                "CPU %",
                &h.cpu,
                max_of(&h.cpu).max(100.0),
                na(now(&h.cpu).map(|v| format!("{v:.1}%"))),
            ),
            (
                "Host memory",
                &h.rss,
                max_of(&h.rss),
                na(now(&h.rss).map(|b| bytes2human(b as u64))),
            ),
        ];
        for (name, ring, max, current) in graphs {
            lines.push(Line::from(vec![
                Span::raw(format!("{name:<14}")),
                Span::styled(theme.spark(ring, graph_w, max), theme.accent()),
                Span::raw(format!("  {current}")),
            ]));
        }
    } else if parent {
        lines.push(Line::raw(
            "none: this process is not on a GPU (open a child for its graphs)",
        ));
    } else {
        lines.push(Line::raw("no samples yet"));
    }
    lines.push(theme.rule(area.width, "environment"));
    match &app.detail_env {
        Ok(env) if env.is_empty() => lines.push(Line::raw("(empty)")),
        Ok(env) => lines.extend(env.iter().map(|e| Line::raw(fit(e, w)))),
        Err(why) => lines.push(Line::raw(why.clone())),
    }
    frame.render_widget(Paragraph::new(lines), area);
}

/// The detail of a tree-view parent that is not on a GPU itself: what the host told of it,
/// and its GPU children, one line per child and device.
fn parent_detail(
    lines: &mut Vec<Line<'static>>,
    app: &App,
    pid: u32,
    children: &[&GpuProcess],
    w: usize,
) {
    let kv = |k: &str, v: String| Line::raw(fit(&format!("{k:<14}{v}"), w));
    let n = children
        .iter()
        .map(|p| p.pid)
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    lines.push(Line::raw(fit(
        &format!(
            "PID {pid} is not on a GPU: it is the parent of {n} GPU process{} (below).",
            if n == 1 { "" } else { "es" }
        ),
        w,
    )));
    match app.sample.as_ref().and_then(|s| s.parents.get(&pid)) {
        Some(f) => {
            let command = if f.cmdline.is_empty() {
                na(f.name.as_deref())
            } else {
                gpu_processes::shell_join(&f.cmdline)
            };
            // `fit` escapes control characters.
            lines.push(kv("Command", command));
            lines.push(kv("User", na(f.user.as_deref())));
            lines.push(kv("Name", na(f.name.as_deref())));
            lines.push(kv("Parent PID", na(f.ppid)));
        }
        None => lines.push(kv("Command", "N/A (the host did not tell)".into())),
    }
    for p in children {
        lines.push(kv(
            &format!("Child {}", p.pid),
            format!(
                "GPU {}  type {}  memory {}  SM {}%  {}",
                p.device,
                p.kind_str(),
                na(p.gpu_memory_human.as_deref()),
                na(p.utilization.sm),
                cell(p, Column::Command)
            ),
        ));
    }
}

fn draw_confirm(
    frame: &mut Frame,
    app: &App,
    theme: &Theme,
    area: Rect,
    pending: &super::app::PendingSignal,
) {
    let what: Vec<String> = pending
        .pids
        .iter()
        .take(6)
        .map(|&pid| {
            let name = app
                .sample
                .as_ref()
                .and_then(|s| s.snap.processes.iter().find(|p| p.pid == pid))
                .and_then(|p| p.host.name.as_deref())
                .map_or_else(|| "?".into(), escape_control);
            format!("{pid} ({name})")
        })
        .collect();
    let more = pending.pids.len().saturating_sub(6);
    let n = pending.pids.len();
    let text = vec![
        Line::raw(format!(
            "Send {} to {n} process{}?",
            pending.sig.name(),
            if n == 1 { "" } else { "es" }
        )),
        Line::raw(format!(
            "PID {}{}",
            what.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        )),
        Line::raw(""),
        Line::raw("y: send    n or Esc: cancel"),
    ];
    let w = area.width.min(70);
    let h = 6u16.min(area.height);
    let r = Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    );
    frame.render_widget(Clear, r);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_set(theme.border())
        .title(" confirm ");
    frame.render_widget(
        Paragraph::new(text).block(block).wrap(Wrap { trim: false }),
        r,
    );
}

/// `s` with its control characters escaped, cut to `width` characters, with `…` (or `~` in
/// ASCII) when cut.
fn fit(s: &str, width: usize) -> String {
    let s = escape_control(s);
    if s.chars().count() <= width {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(width.saturating_sub(1)).collect();
        if width > 0 {
            t.push('…');
        }
        t
    }
}

fn align(s: &str, width: usize, right: bool) -> String {
    let s = fit(s, width);
    if right {
        format!("{s:>width$}")
    } else {
        format!("{s:<width$}")
    }
}

fn pad_to(s: &mut String, x: usize) {
    let n = s.chars().count();
    if n < x {
        s.extend(std::iter::repeat_n(' ', x - n));
    }
}

/// Spans cut to `width` characters in all.
fn clip(spans: Vec<Span<'static>>, width: usize) -> Line<'static> {
    let mut left = width;
    let mut out = Vec::with_capacity(spans.len());
    for s in spans {
        if left == 0 {
            break;
        }
        let n = s.content.chars().count();
        if n <= left {
            left -= n;
            out.push(s);
        } else {
            let t: String = s.content.chars().take(left).collect();
            out.push(Span::styled(t, s.style));
            left = 0;
        }
    }
    Line::from(out)
}
