//! Text fitted to a width: outside text is escaped first, as every line of it goes through
//! [`fit`] or [`clip`].

use gpu_devices::text::escape_control;
use ratatui::text::{Line, Span};

/// `s` with its control characters escaped, cut to `width` characters, with `…` (or `~` in
/// ASCII) when cut.
pub(super) fn fit(s: &str, width: usize) -> String {
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

pub(super) fn align(s: &str, width: usize, right: bool) -> String {
    let s = fit(s, width);
    if right {
        format!("{s:>width$}")
    } else {
        format!("{s:<width$}")
    }
}

pub(super) fn pad_to(s: &mut String, x: usize) {
    let n = s.chars().count();
    if n < x {
        s.extend(std::iter::repeat_n(' ', x - n));
    }
}

/// Spans cut to `width` characters in all.
pub(super) fn clip(spans: Vec<Span<'static>>, width: usize) -> Line<'static> {
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
