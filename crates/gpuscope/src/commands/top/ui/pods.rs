//! The pods panel (`p`): each Kubernetes pod's GPU memory and SM share per device.

use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::super::app::App;
use super::processes::short_bytes;
use super::text::fit;
use crate::present::value::na;

/// The view grouped by Kubernetes pod: per device, each pod's process count, GPU memory and SM
/// share summed over its processes (those that pass the filter).
pub(super) fn draw_pod_table(frame: &mut Frame, app: &App, area: Rect) {
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
