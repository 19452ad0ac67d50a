//! The help screen (`?`): the keys.

use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Wrap};
use ratatui::Frame;

use super::super::app::App;
use super::super::keys::KEYS;
use super::text::fit;
use super::theme::Theme;

pub(super) fn draw_help(frame: &mut Frame, app: &App, theme: &Theme, area: Rect) {
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
