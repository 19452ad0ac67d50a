//! The processes panel: the process table, its rows and cells, and the confirmation asked
//! before a signal is sent to the processes tagged.

use gpu_devices::text::escape_control;
use gpu_processes::GpuProcess;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};
use ratatui::Frame;

use super::super::app::{App, Column, Row};
use super::layout::columns;
use super::text::{align, fit, pad_to};
use super::theme::Theme;
use crate::present::value::na;

pub(super) fn cell(p: &GpuProcess, col: Column) -> String {
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
        Column::Pod => na(super::super::app::pod_label(p)),
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
pub(super) fn sample_age(u: &gpu_processes::ProcessUtilization) -> String {
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
pub(super) fn short_bytes(b: u64) -> String {
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

pub(super) fn right_aligned(col: Column) -> bool {
    matches!(
        col,
        Column::Pid | Column::GpuMem | Column::Sm | Column::Cpu | Column::HostMem | Column::Time
    )
}

pub(super) fn draw_table(frame: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    if area.height == 0 {
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

/// The devices whose process lists could not be read, grouped by the (escaped) reason, in
/// device order.
pub(super) fn unknown_process_lists(snap: &gpu_processes::Snapshots) -> Vec<(String, Vec<String>)> {
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

pub(super) fn table_row(
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
    let tagged = app.tagged.contains(&row.pid) && theme.color;
    if tagged {
        style = style.fg(Color::Magenta);
    }
    let text = fit(&s, width as usize);
    // The GPU index in its device's colour of load, as nvitop colours it.
    let device = row
        .process
        .and_then(|i| procs.get(i))
        .and_then(|p| {
            let sample = app.sample.as_ref()?;
            sample.snap.devices.iter().find(|d| d.id == p.device)
        })
        .filter(|_| theme.color && !tagged);
    let cell = cols
        .iter()
        .find(|(c, ..)| *c == Column::Device)
        .map(|&(_, x, w)| (usize::from(x), usize::from(x) + usize::from(w)));
    match (device, cell) {
        (Some(d), Some((from, to))) => {
            let part = |a: usize, b: usize| {
                text.chars()
                    .skip(a)
                    .take(b.saturating_sub(a))
                    .collect::<String>()
            };
            let n = text.chars().count();
            Line::from(vec![
                Span::styled(part(0, from), style),
                Span::styled(part(from, to), style.patch(theme.device_load(d))),
                Span::styled(part(to, n), style),
            ])
        }
        _ => Line::styled(text, style),
    }
}

pub(super) fn draw_confirm(
    frame: &mut Frame,
    app: &App,
    theme: &Theme,
    area: Rect,
    pending: &super::super::app::PendingSignal,
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
