//! `gpuscope top --prometheus URL` and `top --remote URL...`: the viewer over the fleet.
//!
//! A sampler thread owns the fleet source and reads the whole fleet every interval (one query
//! per metric family, docs/fleet.md); the UI thread keeps the newest answer, orders and filters
//! it, and draws only the rows on the screen. A slow or unreachable Prometheus delays the next
//! answer, never a key: the UI never waits on the network.
//!
//! Every host is listed, grouped with its devices and, beneath each device, its processes; a
//! host that is down or stale says so and stays listed. All text from Prometheus or the
//! exporters (host names, device names, users, commands, error messages) is escaped before it
//! is drawn.

use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Result;
use gpu_devices::text::escape_control;
use ratatui::crossterm::event::{self, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use crate::fleet::view::{device_state, out_of_range_count, out_of_range_lines, state_text};
use crate::present::text::truncate;
use crate::present::value::counted;
use crate::present::value::{device_cells, mib, na, power_cell, whole};
use gpu_fleet::filter as view;
use gpu_fleet::{
    Fleet, FleetDevice, FleetFilter, FleetProcess, FleetSource, Host, HostState, SortKey,
};

/// One answer of the sampler thread.
#[derive(Debug)]
pub struct FleetRefresh {
    /// The fleet, or why no query at all was answered.
    pub result: std::result::Result<Fleet, String>,
    /// How long the refresh took (all queries, parsing and folding).
    pub took: Duration,
    /// When it ended.
    pub at: SystemTime,
}

/// A running fleet sampler. Dropping it stops the thread at its next wait (a query in progress
/// is not waited for: its timeout ends it).
pub struct FleetSampler {
    control: Sender<()>,
}

impl FleetSampler {
    /// Reads the fleet from `source` now and then every `interval`, sending each answer on the
    /// returned channel (at most two wait there; newer ones are dropped while the UI is busy)
    /// and waking the event loop with `waker`.
    pub fn start(
        source: FleetSource,
        interval: Duration,
        waker: super::wake::Waker,
    ) -> std::io::Result<(FleetSampler, Receiver<FleetRefresh>)> {
        let (control, rx) =
            super::wake::spawn_reader("gpuscope-fleet-sampler", move |tx, control_rx| {
                // The last fleet read: the next refresh asks only for the hosts that changed.
                let mut previous: Option<Fleet> = None;
                loop {
                    let started = Instant::now();
                    let result = source
                        .refresh_after(previous.as_ref())
                        .map_err(|e| format!("{e:#}"));
                    if let Ok(fleet) = &result {
                        previous = Some(fleet.clone());
                    }
                    let refresh = FleetRefresh {
                        result,
                        took: started.elapsed(),
                        at: SystemTime::now(),
                    };
                    if !super::wake::offer(&tx, refresh, &waker) {
                        return;
                    }
                    let wait = interval.saturating_sub(started.elapsed());
                    match control_rx.recv_timeout(wait) {
                        // `r`: refresh now.
                        Ok(()) | Err(RecvTimeoutError::Timeout) => {}
                        Err(RecvTimeoutError::Disconnected) => return,
                    }
                }
            })?;
        Ok((FleetSampler { control }, rx))
    }

    /// Asks for a refresh now (after the one in progress, if any).
    pub fn refresh_now(&self) {
        let _ = self.control.send(());
    }
}

/// One row of the list: a host, one of its devices, or one of a device's processes (indices
/// into the fleet shown).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Row {
    Host(usize),
    Device(usize, usize),
    Process(usize, usize, usize),
}

/// The fleet viewer's state. Nothing here talks to the network.
pub struct FleetApp {
    /// Where the fleet comes from, for the header.
    pub source: String,
    /// The refresh interval, for the header.
    pub interval: Duration,
    /// Colours on.
    pub color: bool,
    /// ASCII only.
    pub ascii: bool,
    /// Colours for a light background (`--light`).
    pub light: bool,
    /// The order.
    pub sort: SortKey,
    /// One list of devices across hosts (`g`) instead of devices grouped under their host.
    pub flat: bool,
    /// Processes shown beneath their devices (`p`).
    pub processes: bool,
    /// The filter applied, and its text.
    filter: Option<(FleetFilter, String)>,
    /// The filter being typed after `/`.
    pub editing: Option<String>,
    /// The newest fleet as it came, ordered by `sort`.
    raw: Option<Fleet>,
    /// The filtered copy, when a filter is set.
    filtered: Option<Fleet>,
    rows: Vec<Row>,
    /// Each shown host's name (`Fleet::host_names`: the instance when a hostname is shared).
    names: Vec<String>,
    /// First row on the screen.
    pub scroll: usize,
    /// The last refresh's failure (the fleet shown is then the one before).
    pub error: Option<String>,
    /// When the shown fleet was read, and how long that took.
    pub refreshed: Option<(SystemTime, Duration)>,
    /// A message for the status line.
    pub status: Option<String>,
    /// Set by `q`.
    pub quit: bool,
}

impl FleetApp {
    /// A viewer with nothing read yet.
    pub fn new(source: String, interval: Duration, color: bool, ascii: bool) -> FleetApp {
        FleetApp {
            source,
            interval,
            color,
            ascii,
            light: false,
            sort: SortKey::Host,
            flat: false,
            processes: true,
            filter: None,
            editing: None,
            raw: None,
            filtered: None,
            rows: Vec::new(),
            names: Vec::new(),
            scroll: 0,
            error: None,
            refreshed: None,
            status: None,
            quit: false,
        }
    }

    /// Sets the filter (empty text: none).
    ///
    /// # Errors
    ///
    /// The filter's parse error.
    pub fn set_filter(&mut self, text: &str) -> std::result::Result<(), String> {
        self.filter = if text.trim().is_empty() {
            None
        } else {
            Some((
                FleetFilter::parse(text).map_err(|e| e.to_string())?,
                text.trim().to_string(),
            ))
        };
        self.rebuild();
        Ok(())
    }

    /// Takes a refresh: a fleet replaces the one shown; a failure is shown above the last
    /// fleet, which stays.
    pub fn push(&mut self, refresh: FleetRefresh) {
        match refresh.result {
            Ok(mut fleet) => {
                view::sort(&mut fleet, self.sort);
                self.raw = Some(fleet);
                self.error = None;
                self.refreshed = Some((refresh.at, refresh.took));
            }
            Err(e) => self.error = Some(e),
        }
        self.rebuild();
    }

    /// The fleet on the screen (filtered when a filter is set).
    pub fn shown(&self) -> Option<&Fleet> {
        self.filtered.as_ref().or(self.raw.as_ref())
    }

    /// Orders again and rebuilds the rows (after a new fleet, sort, filter or mode change).
    fn rebuild(&mut self) {
        if let Some(raw) = &mut self.raw {
            view::sort(raw, self.sort);
        }
        self.filtered = match (&self.raw, &self.filter) {
            (Some(raw), Some((f, _))) => {
                let mut copy = raw.clone();
                f.apply(&mut copy);
                view::sort(&mut copy, self.sort);
                Some(copy)
            }
            _ => None,
        };
        let mut rows = Vec::new();
        if let Some(fleet) = self.shown() {
            if self.flat {
                // Hosts with no device first (down, stale), then every device across the fleet.
                for (h, host) in fleet.hosts.iter().enumerate() {
                    if host.devices.is_empty() {
                        rows.push(Row::Host(h));
                    }
                }
                let mut devices: Vec<(usize, usize)> = fleet
                    .hosts
                    .iter()
                    .enumerate()
                    .flat_map(|(h, host)| (0..host.devices.len()).map(move |d| (h, d)))
                    .collect();
                devices.sort_by(|a, b| {
                    let (ha, hb) = (&fleet.hosts[a.0], &fleet.hosts[b.0]);
                    view::device_order(self.sort, &ha.devices[a.1], &hb.devices[b.1])
                        .then_with(|| ha.host.cmp(&hb.host))
                });
                for (h, d) in devices {
                    rows.push(Row::Device(h, d));
                    self.push_processes(&mut rows, fleet, h, d);
                }
            } else {
                for (h, host) in fleet.hosts.iter().enumerate() {
                    rows.push(Row::Host(h));
                    for d in 0..host.devices.len() {
                        rows.push(Row::Device(h, d));
                        self.push_processes(&mut rows, fleet, h, d);
                    }
                }
            }
        }
        self.rows = rows;
        self.names = self.shown().map_or_else(Vec::new, |fleet| {
            fleet.host_names().into_iter().map(str::to_string).collect()
        });
        self.scroll = self.scroll.min(self.rows.len().saturating_sub(1));
    }

    /// The name of host `h` of the fleet shown.
    fn name<'f>(&'f self, fleet: &'f Fleet, h: usize) -> &'f str {
        self.names
            .get(h)
            .map_or(fleet.hosts[h].host.as_str(), String::as_str)
    }

    fn push_processes(&self, rows: &mut Vec<Row>, fleet: &Fleet, h: usize, d: usize) {
        if self.processes {
            let n = fleet.hosts[h].devices[d].processes.len();
            rows.extend((0..n).map(|p| Row::Process(h, d, p)));
        }
    }

    /// How many rows the list has.
    pub fn row_count(&self) -> usize {
        self.rows.len()
    }

    /// Handles a key; `list_height` is the number of list rows on the screen (for paging).
    /// Returns true when a refresh is asked for now.
    pub fn key(&mut self, k: KeyEvent, list_height: usize) -> bool {
        if k.kind == KeyEventKind::Release {
            return false;
        }
        if let Some(text) = &mut self.editing {
            match k.code {
                KeyCode::Enter => {
                    let text = std::mem::take(text);
                    self.editing = None;
                    if let Err(e) = self.set_filter(&text) {
                        self.status = Some(format!("filter: {e}"));
                    } else {
                        self.status = None;
                        self.scroll = 0;
                    }
                }
                KeyCode::Esc => self.editing = None,
                KeyCode::Backspace => {
                    text.pop();
                }
                KeyCode::Char(c)
                    if !k.modifiers.contains(KeyModifiers::CONTROL)
                        && text.chars().count() < 200 =>
                {
                    text.push(c);
                }
                _ => {}
            }
            return false;
        }
        let last = self.rows.len().saturating_sub(1);
        let page = list_height.max(1);
        match k.code {
            KeyCode::Char('q') => self.quit = true,
            KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => self.quit = true,
            KeyCode::Char('s') | KeyCode::Char('>') => {
                self.sort = next_sort(self.sort, 1);
                self.rebuild();
            }
            KeyCode::Char('<') => {
                self.sort = next_sort(self.sort, 3);
                self.rebuild();
            }
            KeyCode::Char('g') => {
                self.flat = !self.flat;
                self.scroll = 0;
                self.rebuild();
            }
            KeyCode::Char('p') => {
                self.processes = !self.processes;
                self.scroll = 0;
                self.rebuild();
            }
            KeyCode::Char('/') => {
                self.editing = Some(
                    self.filter
                        .as_ref()
                        .map(|(_, t)| t.clone())
                        .unwrap_or_default(),
                );
            }
            KeyCode::Esc if self.filter.is_some() => {
                let _ = self.set_filter("");
            }
            KeyCode::Char('r') => return true,
            KeyCode::Down | KeyCode::Char('j') => self.scroll = (self.scroll + 1).min(last),
            KeyCode::Up | KeyCode::Char('k') => self.scroll = self.scroll.saturating_sub(1),
            KeyCode::PageDown | KeyCode::Char(' ') => self.scroll = (self.scroll + page).min(last),
            KeyCode::PageUp => self.scroll = self.scroll.saturating_sub(page),
            KeyCode::Home => self.scroll = 0,
            KeyCode::End => self.scroll = last,
            _ => {}
        }
        false
    }
}

/// The sort keys in the order `s` steps through them.
const SORTS: [SortKey; 4] = SortKey::ALL;

fn next_sort(key: SortKey, step: usize) -> SortKey {
    let i = SORTS.iter().position(|&k| k == key).unwrap_or(0);
    SORTS[(i + step) % SORTS.len()]
}

fn sort_name(key: SortKey) -> &'static str {
    key.as_str()
}

/// The keys, for the help text.
pub const KEYS: &[(&str, &str)] = &[
    ("s / > / <", "next / previous order: host, gpu, free-memory, utilization"),
    ("/", "filter: host:NAME (host:gpu-* for a prefix), gpu:ID, user:NAME, pid:N, state:up|down|stale, words"),
    ("Esc", "clear the filter"),
    ("g", "devices grouped under their host, or one list across hosts"),
    ("p", "processes beneath their devices, or not"),
    ("r", "refresh now"),
    ("Up Down PgUp PgDn Home End", "scroll"),
    ("q", "quit"),
];

/// Lines above the list: the title, the column header.
const HEAD_LINES: u16 = 2;
/// Lines below the list: the status line.
const FOOT_LINES: u16 = 1;

/// How many list rows fit in `area`.
pub fn list_height(area: Rect) -> usize {
    usize::from(area.height.saturating_sub(HEAD_LINES + FOOT_LINES))
}

/// Width of the host column.
const HOST_W: usize = 20;

/// Draws the viewer: a pure function of the state and the frame's size, drawing only the rows
/// on the screen.
pub fn draw(frame: &mut Frame, app: &FleetApp) {
    let area = frame.area();
    let height = list_height(area);
    let mut lines: Vec<Line> = Vec::with_capacity(usize::from(area.height));
    lines.push(title(app));
    lines.push(Line::styled(
        format!(
            "{:<hw$} {:<5} {:<8} {:<28} {:>5} {:>4} {:>15} {:>24} {:>10} {:>5}",
            "HOST",
            "GPU",
            "STATE",
            "NAME / PROCESS",
            "TEMP",
            "FAN",
            "POWER",
            "MEMORY",
            "FREE",
            "UTIL",
            hw = HOST_W
        ),
        Style::default().add_modifier(Modifier::REVERSED),
    ));
    if let Some(fleet) = app.shown() {
        for row in app.rows.iter().skip(app.scroll).take(height) {
            lines.push(row_line(app, fleet, *row));
        }
    } else {
        lines.push(Line::raw(match &app.error {
            Some(_) => "no answer yet (below)",
            None => "reading the fleet...",
        }));
    }
    while lines.len() < usize::from(area.height.saturating_sub(FOOT_LINES)) {
        lines.push(Line::raw(""));
    }
    lines.truncate(usize::from(area.height.saturating_sub(FOOT_LINES)));
    lines.push(status_line(app, height));
    frame.render_widget(Paragraph::new(lines), area);
}

fn title(app: &FleetApp) -> Line<'static> {
    let mut spans = vec![Span::styled(
        format!("gpuscope top (fleet: {})", escape_control(&app.source)),
        Style::default().add_modifier(Modifier::BOLD),
    )];
    if let Some(fleet) = app.shown() {
        let count = |s: HostState| fleet.hosts.iter().filter(|h| h.state == s).count();
        let devices: usize = fleet.hosts.iter().map(|h| h.devices.len()).sum();
        spans.push(Span::raw(format!(
            "  {}  {}  {} up  {} down  {} stale",
            counted(fleet.hosts.len() as u64, "host", "hosts"),
            counted(devices as u64, "device", "devices"),
            count(HostState::Up),
            count(HostState::Down),
            count(HostState::Stale)
        )));
        if !fleet.errors.is_empty() {
            spans.push(Span::styled(
                format!(
                    "  {} failed",
                    counted(fleet.errors.len() as u64, "query", "queries")
                ),
                app.style(Color::Yellow),
            ));
        }
        let refused = out_of_range_count(fleet);
        if refused > 0 {
            spans.push(Span::styled(
                format!("  {} out of range", counted(refused, "value", "values")),
                app.style(Color::Yellow),
            ));
        }
    }
    spans.push(Span::raw(format!(
        "  sort: {}{}",
        sort_name(app.sort),
        if app.flat { " (across hosts)" } else { "" }
    )));
    if let Some((at, took)) = app.refreshed {
        spans.push(Span::raw(format!(
            "  read {} in {} ms, every {}",
            clock(at),
            took.as_millis(),
            crate::cli::args::show_duration(app.interval)
        )));
    }
    Line::from(spans)
}

/// A time of day, local, as `HH:MM:SS ZONE`.
fn clock(t: SystemTime) -> String {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    crate::present::time::local_clock(secs).unwrap_or_else(|| "?".into())
}

impl FleetApp {
    fn style(&self, fg: Color) -> Style {
        if self.color {
            Style::default().fg(super::ui::theme::light_shade(fg, self.light))
        } else {
            Style::default()
        }
    }
}

/// A host's name (see [`FleetApp::names`]) in the host column.
fn host_cell(name: &str) -> String {
    format!(
        "{:<hw$}",
        truncate(&escape_control(name), HOST_W),
        hw = HOST_W
    )
}

fn row_line(app: &FleetApp, fleet: &Fleet, row: Row) -> Line<'static> {
    match row {
        Row::Host(h) => {
            let host = &fleet.hosts[h];
            let state_style = match host.state {
                HostState::Up => app.style(Color::Green),
                HostState::Down => app.style(Color::Red),
                HostState::Stale => app.style(Color::Yellow),
            };
            let age = match host.sample_age_seconds {
                Some(a) => format!("sample {} old", na(whole(a, "s"))),
                None => "never sampled".into(),
            };
            let what = match (host.state, host.devices.len()) {
                (HostState::Up, 0) => "no devices".to_string(),
                (_, 0) => "no current samples".to_string(),
                (_, n) => format!("{n} device{}", if n == 1 { "" } else { "s" }),
            };
            let mut rest = format!("  {what}  {age}");
            if let Some(i) = &host.instance {
                rest.push_str(&format!("  {}", escape_control(i)));
            }
            if let Some(v) = &host.driver_version {
                rest.push_str(&format!("  driver {}", escape_control(v)));
            }
            Line::from(vec![
                Span::styled(
                    host_cell(app.name(fleet, h)),
                    Style::default().add_modifier(Modifier::BOLD),
                ),
                Span::raw(" "),
                Span::raw(format!("{:<5} ", "")),
                Span::styled(format!("{:<8}", state_text(host)), state_style),
                Span::raw(rest),
            ])
        }
        Row::Device(h, d) => {
            let host = &fleet.hosts[h];
            let dev = &fleet.hosts[h].devices[d];
            device_line(app, host, app.name(fleet, h), dev)
        }
        Row::Process(h, d, p) => {
            let host = &fleet.hosts[h];
            let dev = &host.devices[d];
            let proc = &dev.processes[p];
            let last = p + 1 == dev.processes.len();
            process_line(app, dev, proc, last)
        }
    }
}

fn device_line(app: &FleetApp, host: &Host, host_name: &str, d: &FleetDevice) -> Line<'static> {
    let label = match d.identity.mig_index {
        None => escape_control(&d.identity.id).into_owned(),
        Some(_) => format!(" {}", escape_control(&d.identity.id)),
    };
    let (state, state_style) = match (host.state, device_state(host, d)) {
        (_, Some("LOST")) => ("LOST".to_string(), app.style(Color::Red)),
        (_, Some(unknown)) => (unknown.to_string(), app.style(Color::Yellow)),
        (HostState::Up, None) => (String::new(), Style::default()),
        (_, None) => (state_text(host), app.style(Color::Yellow)),
    };
    let power = power_cell(d.power_usage_watts, d.power_limit_watts);
    let util = d.gpu_utilization_percent;
    let util_style = match util {
        Some(u) if u >= 80 => app.style(Color::Red),
        Some(u) if u >= 50 => app.style(Color::Yellow),
        Some(_) => app.style(Color::Green),
        None => Style::default(),
    };
    let host_col = if app.flat {
        host_cell(host_name)
    } else {
        " ".repeat(HOST_W)
    };
    let name = truncate(
        &escape_control(d.identity.name.as_deref().unwrap_or("N/A")),
        28,
    );
    let [temperature, fan, memory] = device_cells(
        d.temperature_celsius,
        d.fan_speed_percent,
        d.memory_used_bytes,
        d.memory_total_bytes,
    );
    Line::from(vec![
        Span::raw(format!("{host_col} {label:<5} ")),
        Span::styled(format!("{state:<8}"), state_style),
        Span::raw(format!(
            " {:<28} {:>5} {:>4} {:>15} {:>24} {:>10} ",
            name,
            temperature,
            fan,
            power,
            memory,
            mib(d.memory_free_bytes),
        )),
        Span::styled(
            format!("{:>5}", na(util.map(|u| format!("{u}%")))),
            util_style,
        ),
    ])
}

fn process_line(app: &FleetApp, d: &FleetDevice, p: &FleetProcess, last: bool) -> Line<'static> {
    let branch = match (app.ascii, last) {
        (true, true) => "`-",
        (true, false) => "|-",
        (false, true) => "└─",
        (false, false) => "├─",
    };
    let user = truncate(&escape_control(p.user.as_deref().unwrap_or("N/A")), 12);
    let command = escape_control(p.command.as_deref().unwrap_or("N/A"));
    Line::from(vec![
        Span::raw(format!(
            "{:hw$} {:<5} {branch} ",
            "",
            escape_control(&d.identity.id),
            hw = HOST_W
        )),
        Span::raw(format!(
            "PID {:<8} {:<12} {:>10} SM {:>4}  ",
            p.pid,
            user,
            mib(p.used_memory_bytes),
            na(p.sm_utilization_percent.map(|u| format!("{u}%"))),
        )),
        Span::styled(truncate(&command, 200), app.style(Color::Cyan)),
    ])
}

fn status_line(app: &FleetApp, height: usize) -> Line<'static> {
    if let Some(text) = &app.editing {
        return Line::raw(format!("filter: {}_", escape_control(text)));
    }
    let mut spans = Vec::new();
    if let Some(e) = &app.error {
        spans.push(Span::styled(
            format!("refresh failed: {}  ", escape_control(e)),
            app.style(Color::Red),
        ));
    } else if let Some(s) = &app.status {
        spans.push(Span::raw(format!("{}  ", escape_control(s))));
    } else if let Some(fleet) = app.shown() {
        if let Some(e) = fleet.errors.first() {
            spans.push(Span::styled(
                format!(
                    "{}: {}  ",
                    escape_control(&e.query),
                    escape_control(&e.error)
                ),
                app.style(Color::Yellow),
            ));
        } else if let Some(line) = out_of_range_lines(fleet, 1).first() {
            spans.push(Span::styled(format!("{line}  "), app.style(Color::Yellow)));
        }
    }
    if let Some((_, t)) = &app.filter {
        spans.push(Span::raw(format!("filter: {}  ", escape_control(t))));
    }
    let total = app.rows.len();
    spans.push(Span::raw(format!(
        "rows {}-{} of {}  s sort  / filter  g group  p processes  r refresh  q quit",
        (app.scroll + 1).min(total),
        (app.scroll + height).min(total),
        total
    )));
    Line::from(spans)
}

/// Runs the fleet viewer until `q` or a quitting signal.
pub fn run(mut app: FleetApp, source: FleetSource, once: bool) -> Result<()> {
    crate::fleet::release_large_blocks();
    if once {
        let started = Instant::now();
        let result = source.refresh().map_err(|e| format!("{e:#}"));
        if let Err(e) = &result {
            anyhow::bail!("{e}");
        }
        app.push(FleetRefresh {
            result,
            took: started.elapsed(),
            at: SystemTime::now(),
        });
        let width = super::once_width();
        return crate::output::write_stdout(&render_once(&app, width));
    }
    interactive(app, source)
}

/// The screen as text with every row, for `--once` (in colour when the app draws in colour):
/// at most [`super::ONCE_MAX_CELLS`].
pub fn render_once(app: &FleetApp, width: u16) -> String {
    let width = width.clamp(1, super::terminal::MAX_WIDTH);
    let wanted = app.row_count() + usize::from(HEAD_LINES + FOOT_LINES);
    let most = super::ONCE_MAX_CELLS / usize::from(width);
    let height = u16::try_from(wanted.min(most)).unwrap_or(u16::MAX);
    let buffer = super::drawn(width, height, |f| draw(f, app));
    let text = if app.color {
        super::buffer_ansi(&buffer)
    } else {
        super::buffer_text(&buffer)
    };
    let mut lines: Vec<&str> = text.lines().collect();
    // The last line is the key hints.
    lines.pop();
    let mut out = lines.join("\n");
    out.push('\n');
    if wanted > usize::from(height) {
        out.push_str(&format!(
            "... and {} more rows, not shown: the printout is limited to {height} lines at this width\n",
            wanted - usize::from(height)
        ));
    }
    out
}

fn interactive(mut app: FleetApp, source: FleetSource) -> Result<()> {
    let interval = app.interval;
    super::event_loop::run(&mut app, |waker| {
        FleetSampler::start(source, interval, waker)
    })
}

impl super::event_loop::Viewer for FleetApp {
    type Sample = FleetRefresh;

    fn quitting(&self) -> bool {
        self.quit
    }

    fn quit(&mut self) {
        self.quit = true;
    }

    fn push(&mut self, refresh: FleetRefresh) {
        FleetApp::push(self, refresh);
    }

    fn draw(&self, frame: &mut Frame) {
        draw(frame, self);
    }

    fn key(&mut self, k: KeyEvent, area: Rect) -> super::event_loop::After {
        use super::event_loop::After;
        if k.code == KeyCode::Char('z') && k.modifiers.contains(KeyModifiers::CONTROL) {
            After::Suspend
        } else if FleetApp::key(self, k, list_height(area)) {
            After::RefreshNow
        } else {
            After::Redraw
        }
    }

    fn mouse(&mut self, m: event::MouseEvent, _area: Rect) {
        match m.kind {
            event::MouseEventKind::ScrollDown => {
                self.scroll = (self.scroll + 3).min(self.row_count().saturating_sub(1));
            }
            event::MouseEventKind::ScrollUp => self.scroll = self.scroll.saturating_sub(3),
            _ => {}
        }
    }
}

impl super::event_loop::SamplerHandle for FleetSampler {
    fn refresh_now(&self) {
        FleetSampler::refresh_now(self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_fleet::testkit::{self, host};

    /// GPU `id` with `free_gib` GiB free, `util` percent busy, and `procs` of alice's
    /// processes (PIDs from 1000, 10% of the SMs each), which the screens show as branches.
    fn device(id: u32, free_gib: u64, util: u32, procs: usize) -> FleetDevice {
        let mut d = testkit::device(&id.to_string(), Some(free_gib << 30), Some(util));
        d.processes = (1000..)
            .take(procs)
            .map(|pid| FleetProcess {
                sm_utilization_percent: Some(10),
                ..testkit::process(pid, "alice")
            })
            .collect();
        d
    }

    fn fleet() -> Fleet {
        Fleet {
            evaluated_at: Some(1000.0),
            ..testkit::fleet(vec![
                host(
                    "node-b",
                    HostState::Up,
                    vec![device(0, 10, 90, 2), device(1, 70, 5, 0)],
                ),
                host("node-c", HostState::Down, vec![]),
                host("node-a", HostState::Up, vec![device(0, 30, 50, 1)]),
            ])
        }
    }

    fn app() -> FleetApp {
        app_over("http://prom:9090", fleet(), Duration::from_millis(5))
    }

    /// The fleet view of `source` after one refresh that read `fleet` in `took`.
    fn app_over(source: &str, fleet: Fleet, took: Duration) -> FleetApp {
        let mut app = FleetApp::new(source.into(), Duration::from_secs(2), false, false);
        app.push(FleetRefresh {
            result: Ok(fleet),
            took,
            at: SystemTime::now(),
        });
        app
    }

    fn screen(app: &FleetApp) -> String {
        render_once(app, 160)
    }

    /// The test fleet with what Prometheus said of its first host's name, its first GPU's name
    /// and that GPU's first process's command line.
    fn fleet_from_outside(host: &str, gpu: &str, command: &str) -> Fleet {
        let mut f = fleet();
        f.hosts[0].host = host.into();
        let d = &mut std::sync::Arc::make_mut(&mut f.hosts[0].devices)[0];
        d.identity.name = Some(gpu.into());
        d.processes[0].command = Some(command.into());
        f
    }

    /// The whole 20-line screen at `width`, the status line and key hints included.
    fn whole_screen(app: &FleetApp, width: u16) -> String {
        super::super::buffer_text(&super::super::drawn(width, 20, |f| draw(f, app)))
    }

    fn key(app: &mut FleetApp, c: KeyCode) {
        app.key(KeyEvent::new(c, KeyModifiers::NONE), 20);
    }

    /// The first word of each host and device line, in order: `node-a`, `node-a:0`, ...
    fn order(text: &str) -> Vec<String> {
        let mut host = String::new();
        let mut out = Vec::new();
        for line in text.lines().skip(2) {
            if line.starts_with(' ') {
                let mut w = line.split_whitespace();
                if let (Some(gpu), Some(next)) = (w.next(), w.next()) {
                    if next != "├─" && next != "└─" && !host.is_empty() {
                        out.push(format!("{host}:{gpu}"));
                    }
                }
            } else if let Some(h) = line.split_whitespace().next() {
                host = h.to_string();
                if line.contains(" DOWN ") || line.contains(" up ") || line.contains("STALE") {
                    out.push(h.to_string());
                }
            }
        }
        out
    }

    #[test]
    fn every_host_is_listed_grouped_with_its_devices_and_processes() {
        let app = app();
        let s = screen(&app);
        assert!(
            s.contains("3 hosts  3 devices  2 up  1 down  0 stale"),
            "{s}"
        );
        assert_eq!(
            order(&s),
            ["node-a", "node-a:0", "node-b", "node-b:0", "node-b:1", "node-c"]
        );
        let down = s.lines().find(|l| l.starts_with("node-c")).unwrap();
        assert!(
            down.contains("DOWN") && down.contains("no current samples"),
            "{down}"
        );
        // node-b's GPU 0 has two processes, drawn as branches.
        assert!(s.contains("├─ PID 1000"), "{s}");
        assert!(s.contains("└─ PID 1001"), "{s}");
    }

    #[test]
    fn sort_keys_reorder_hosts_by_their_best_device_and_the_flat_list_across_hosts() {
        let mut app = app();
        key(&mut app, KeyCode::Char('s')); // gpu
        key(&mut app, KeyCode::Char('s')); // free-memory
        let s = screen(&app);
        assert!(s.contains("sort: free-memory"), "{s}");
        assert_eq!(
            order(&s),
            ["node-b", "node-b:1", "node-b:0", "node-a", "node-a:0", "node-c"]
        );
        key(&mut app, KeyCode::Char('g'));
        key(&mut app, KeyCode::Char('p'));
        let s = screen(&app);
        let devices: Vec<String> = s
            .lines()
            .skip(2)
            .filter(|l| l.starts_with("node-") && !l.contains("DOWN"))
            .map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                format!("{}:{}", w[0], w[1])
            })
            .collect();
        assert_eq!(devices, ["node-b:1", "node-a:0", "node-b:0"], "{s}");
        key(&mut app, KeyCode::Char('s')); // utilization: least first
        let s = screen(&app);
        let first = s.lines().nth(3).unwrap();
        assert!(first.starts_with("node-b") && first.contains("5%"), "{s}");
    }

    #[test]
    fn hosts_sharing_a_hostname_are_named_by_instance_in_both_views() {
        // node-a and node-b both report the hostname "node-a" (issue 32, item 5).
        let mut f = fleet();
        f.hosts[0].host = "node-a".into();
        let mut app = app_over("http://prom:9090", f, Duration::from_millis(5));
        let s = screen(&app);
        assert_eq!(
            order(&s),
            [
                "node-a:9445",
                "node-a:9445:0",
                "node-b:9445",
                "node-b:9445:0",
                "node-b:9445:1",
                "node-c"
            ]
        );
        key(&mut app, KeyCode::Char('g'));
        let s = screen(&app);
        let firsts: Vec<&str> = s
            .lines()
            .skip(2)
            .filter(|l| l.contains(" NVIDIA "))
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        assert_eq!(firsts, ["node-a:9445", "node-b:9445", "node-b:9445"], "{s}");
    }

    #[test]
    fn a_typed_filter_keeps_that_host_and_a_bad_one_says_why() {
        let mut app = app();
        key(&mut app, KeyCode::Char('/'));
        for c in "host:node-a".chars() {
            key(&mut app, KeyCode::Char(c));
        }
        key(&mut app, KeyCode::Enter);
        let s = screen(&app);
        assert_eq!(order(&s), ["node-a", "node-a:0"], "{s}");
        key(&mut app, KeyCode::Char('/'));
        key(&mut app, KeyCode::Backspace);
        for c in "x pid:abc".chars() {
            key(&mut app, KeyCode::Char(c));
        }
        key(&mut app, KeyCode::Enter);
        let status = app.status.clone().unwrap();
        assert!(status.contains("pid:abc"), "{status}");
        // The filter that was set stays.
        assert_eq!(order(&screen(&app)), ["node-a", "node-a:0"]);
        key(&mut app, KeyCode::Esc);
        assert_eq!(order(&screen(&app)).len(), 6);
    }

    #[test]
    fn a_failed_refresh_is_shown_and_the_last_fleet_stays() {
        let mut app = app();
        app.push(FleetRefresh {
            result: Err("Prometheus at http://prom:9090 answered no query: refused".into()),
            took: Duration::from_millis(1),
            at: SystemTime::now(),
        });
        let s = whole_screen(&app, 160);
        assert!(s.contains("refresh failed: Prometheus at"), "{s}");
        assert!(s.contains("node-a"), "{s}");
    }

    #[test]
    fn text_from_prometheus_is_escaped() {
        let mut f = fleet_from_outside("evil\u{1b}]0;pwned\u{7}", "GPU\u{1b}[2J", "rm\r\u{9b}x");
        std::sync::Arc::make_mut(&mut f.hosts[0].devices)[0].processes[0].user =
            Some("u\u{1b}".into());
        let app = app_over("http://p\u{1b}", f, Duration::ZERO);
        let s = screen(&app);
        assert!(!s.chars().any(|c| c.is_control() && c != '\n'), "{s:?}");
        assert!(s.contains("evil\\x1b]0;pwned\\x07"), "{s}");
    }

    /// The viewer showed a power of -5 W as `0W` and 1e308 W as `1000000000W`; a value out of
    /// range is N/A in its row, counted in the title and told on the status line.
    #[test]
    fn a_value_out_of_range_is_counted_in_the_title_and_told_on_the_status_line() {
        let mut f = fleet();
        let d = &mut std::sync::Arc::make_mut(&mut f.hosts[0].devices)[1];
        d.power_usage_watts = None;
        d.up = None;
        d.note_out_of_range(gpu_fleet::OutOfRange {
            family: "gpuscope_device_power_usage_watts",
            pid: None,
            label: None,
            value: "-5".into(),
            expected: "0 to 10000 W",
        });
        let app = app_over("http://prom:9090", f, Duration::ZERO);
        let s = whole_screen(&app, 200);
        assert!(s.contains("1 value out of range"), "{s}");
        assert!(
            s.contains("node-b:1: gpuscope_device_power_usage_watts -5 is out of range (0 to 10000 W): shown as N/A"),
            "{s}"
        );
        let row = s
            .lines()
            .find(|l| l.trim_start().starts_with("1 ") && l.contains("H100"))
            .unwrap();
        assert!(row.contains("N/A / 700W") && row.contains(" N/A "), "{row}");
    }

    #[test]
    fn bidi_controls_and_line_separators_from_prometheus_are_escaped() {
        let f = fleet_from_outside(
            "evil\u{202e}txt.exe\nnode-z",
            "GPU\u{2028}\u{9b}31m",
            "python\u{2066}x\u{85}",
        );
        let app = app_over("http://p\u{200f}", f, Duration::ZERO);
        let s = screen(&app);
        let raw: Vec<char> = s
            .chars()
            .filter(|&c| gpu_devices::text::is_control(c) && c != '\n')
            .collect();
        assert!(raw.is_empty(), "{raw:?} in {s}");
        assert!(s.contains("evil\\u{202e}txt.exe"), "{s}");
        assert!(s.contains("GPU\\u{2028}\\u{9b}31m"), "{s}");
        assert!(!s.lines().any(|l| l.starts_with("node-z")), "{s}");
    }

    #[test]
    fn scrolling_stays_within_the_rows() {
        let mut app = app();
        let n = app.row_count();
        key(&mut app, KeyCode::End);
        assert_eq!(app.scroll, n - 1);
        key(&mut app, KeyCode::PageDown);
        assert_eq!(app.scroll, n - 1);
        key(&mut app, KeyCode::Home);
        key(&mut app, KeyCode::Up);
        assert_eq!(app.scroll, 0);
    }
}
