//! The host panel: the host's line under the devices, and the history graphs.

use ratatui::text::{Line, Span};

use super::super::app::{App, Refresh};
use super::devices::{label, pct, percent};
use super::text::clip;
use super::theme::{spans, IntoSpans, Theme, HOST_THRESH};

pub(super) fn host_line(sample: &Refresh, theme: &Theme, width: u16) -> Line<'static> {
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

pub(super) fn history_lines(app: &App, theme: &Theme, width: u16) -> Vec<Line<'static>> {
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
