//! The detail screen (Enter): one process's facts, graphs and environment, or a tree-view
//! parent's host facts and GPU children.

use gpu_devices::units::bytes2human;
use gpu_processes::GpuProcess;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::super::app::{App, Column, Ring};
use super::processes::{cell, sample_age};
use super::text::fit;
use super::theme::Theme;
use crate::present::value::na;

pub(super) fn draw_detail(frame: &mut Frame, app: &App, theme: &Theme, area: Rect, pid: u32) {
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
pub(super) fn parent_detail(
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
