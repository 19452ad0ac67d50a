//! The theme: colours by load (nvitop's light, moderate and heavy), the light-background
//! shades, bars, sparklines, rules and borders (ASCII with `--ascii`).

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use super::super::app::{App, Ring};

pub(super) struct Theme {
    pub(super) color: bool,
    pub(super) light: bool,
    pub(super) colorful: bool,
    pub(super) ascii: bool,
    pub(super) gpu_thresh: (u8, u8),
    pub(super) mem_thresh: (u8, u8),
}

/// A span, or several, to go into a line: what `spans!` takes.
pub(super) trait IntoSpans {
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
pub(super) use spans;

/// The host's and GPM's bars: yellow from 50%, red from 80%.
pub(super) const HOST_THRESH: (u8, u8) = (50, 80);

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
    pub(super) fn of(app: &App) -> Theme {
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
    pub(super) fn level_with(&self, pct: Option<f64>, (low, high): (u8, u8)) -> Style {
        match (self.color, pct) {
            (false, _) | (true, None) => Style::default(),
            (true, Some(p)) if p >= f64::from(high) => Style::default().fg(Color::Red),
            (true, Some(p)) if p >= f64::from(low) => self.fg(Color::Yellow),
            (true, Some(_)) => self.fg(Color::Green),
        }
    }

    /// A host reading's colour: 50% and 80%.
    pub(super) fn level(&self, pct: Option<f64>) -> Style {
        self.level_with(pct, HOST_THRESH)
    }

    /// A bar of `width` cells for `pct`, coloured by the thresholds `(low, high)`: all in the
    /// colour of the value, or with `--colorful` each filled cell in the colour of the share it
    /// stands for (green, then yellow from `low`, red from `high`: nvitop's spectrum bars).
    pub(super) fn bar_spans(
        &self,
        pct: Option<f64>,
        width: usize,
        thresh: (u8, u8),
    ) -> Vec<Span<'static>> {
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

    /// A device's colour of load, as nvitop colours a device's row and its processes' GPU
    /// index: the heavier of its GPU utilization and its memory use, by their thresholds; a
    /// value not known counts as moderate (yellow), as in nvitop.
    pub(super) fn load(&self, util: Option<f64>, mem: Option<f64>) -> Style {
        let level = |pct: Option<f64>, (low, high): (u8, u8)| match pct {
            None => 1,
            Some(p) if p >= f64::from(high) => 2,
            Some(p) if p >= f64::from(low) => 1,
            Some(_) => 0,
        };
        match (
            self.color,
            level(util, self.gpu_thresh).max(level(mem, self.mem_thresh)),
        ) {
            (false, _) => Style::default(),
            (true, 0) => self.fg(Color::Green),
            (true, 1) => self.fg(Color::Yellow),
            (true, _) => Style::default().fg(Color::Red),
        }
    }

    /// A device's [`Theme::load`] from its snapshot.
    pub(super) fn device_load(&self, d: &gpu_devices::DeviceSnapshot) -> Style {
        let util = d.utilization.value().map(|u| f64::from(u.gpu));
        let mem = d
            .memory
            .value()
            .and_then(|m| (m.total > 0).then(|| m.used as f64 * 100.0 / m.total as f64));
        self.load(util, mem)
    }

    /// A GPU utilization's colour (--gpu-util-thresh).
    pub(super) fn gpu_level(&self, pct: Option<f64>) -> Style {
        self.level_with(pct, self.gpu_thresh)
    }

    /// A GPU memory use's colour (--mem-util-thresh).
    pub(super) fn mem_level(&self, pct: Option<f64>) -> Style {
        self.level_with(pct, self.mem_thresh)
    }

    /// A foreground colour of the theme: on a light background (`--light`), yellow, green and
    /// cyan become darker shades (256-colour indices 136, 28 and blue) that stay readable.
    pub(super) fn fg(&self, c: Color) -> Style {
        Style::default().fg(light_shade(c, self.light))
    }

    pub(super) fn accent(&self) -> Style {
        if self.color {
            self.fg(Color::Cyan)
        } else {
            Style::default()
        }
    }

    pub(super) fn warn(&self) -> Style {
        if self.color {
            self.fg(Color::Yellow)
        } else {
            Style::default()
        }
    }

    pub(super) fn title(&self) -> Style {
        Style::default().add_modifier(Modifier::REVERSED)
    }

    pub(super) fn bar(&self, pct: Option<f64>, width: usize) -> String {
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
    pub(super) fn spark(&self, ring: &Ring, width: usize, max: f64) -> String {
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

    pub(super) fn rule(&self, width: u16, title: &str) -> Line<'static> {
        let ch = if self.ascii { "-" } else { "─" };
        let mut s = format!("{ch}{ch} {title} ");
        let len = s.chars().count();
        s.push_str(&ch.repeat((width as usize).saturating_sub(len)));
        Line::styled(s, self.accent())
    }

    pub(super) fn border(&self) -> ratatui::symbols::border::Set<'static> {
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
