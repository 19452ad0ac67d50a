//! Rendering: a pure function of the viewer's state and the terminal's size.
//!
//! Text from outside (device and process names, command lines, users, host names, error text,
//! environments) is shown with its control characters escaped (`\x1b`), never raw: [`fit`],
//! which every line of such text goes through, escapes first.
//!
//! The screen is made of panels, as nvitop's is: the devices, the host, the processes (or the
//! pods), a process's detail and the help, each in a file of its own; where each goes is
//! `layout.rs`, how it is coloured `theme.rs`, how text is fitted to a width `text.rs`.

mod detail;
pub(super) mod devices;
mod help;
mod host;
pub(super) mod layout;
mod pods;
mod processes;
mod text;
pub(super) mod theme;

use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::app::{App, Screen};
use detail::draw_detail;
use devices::{device_compact, device_full};
use help::draw_help;
use host::{history_lines, host_line};
use layout::{areas, is_full};
use pods::draw_pod_table;
use processes::{draw_confirm, draw_table};
use text::fit;
use theme::Theme;

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
    if !app.by_pod {
        draw_table(frame, app, theme, a.table);
    } else if a.table.height > 0 {
        draw_pod_table(frame, app, a.table);
    }
    draw_status(frame, app, theme, a.status);
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
