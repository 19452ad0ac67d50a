//! Where each part of the screen goes: the main screen's areas and the process table's columns.

use ratatui::layout::Rect;

use super::super::app::{App, Column, LayoutMode};
use super::devices::has_activity;

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
