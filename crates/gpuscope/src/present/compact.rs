//! `gpuscope snapshot --compact`: gpustat's view. One line per device with its temperature,
//! utilization and memory, its processes beneath (user and GPU memory, and on request PID and
//! command), fitted to the terminal's width, in colour on a terminal; with `--watch`, redrawn
//! every interval.
//!
//! Every string from outside (names, users, commands) has its control characters escaped
//! before it is written.

use std::io::IsTerminal as _;

use anstyle::{AnsiColor, Style};
use gpu_devices::text::escape_control;

use crate::present::json::{DeviceView, ProcessView, SnapshotView};
use crate::present::text::text;
use crate::present::value::na;

/// The options of the compact view (gpustat's names where it has them).
#[derive(Debug, Clone, clap::Args)]
pub struct CompactArgs {
    /// gpustat-style: one line per device with its processes beneath, fitted to the terminal.
    #[arg(long, visible_alias = "gpustat", conflicts_with_all = ["json", "query"])]
    pub compact: bool,

    /// With --compact: show each process's command line (gpustat's -c: `gpuscope stat -c`).
    #[arg(long, requires = "compact")]
    pub show_cmd: bool,

    /// With --compact: show each process's PID (gpustat's -p: `gpuscope stat -p`).
    #[arg(long, requires = "compact")]
    pub show_pid: bool,

    /// With --compact: leave out each process's user.
    #[arg(long, requires = "compact")]
    pub no_user: bool,

    /// With --compact: show power draw and limit.
    #[arg(short = 'P', long, requires = "compact")]
    pub show_power: bool,

    /// With --compact: show fan speed.
    #[arg(short = 'F', long, requires = "compact")]
    pub show_fan: bool,

    /// With --compact: leave out the header line (host, time, driver).
    #[arg(long, requires = "compact")]
    pub no_header: bool,

    /// Only these devices, in every form (table, --compact, --json, --query): `0`, `3` (a GPU
    /// with its MIG devices), `0:1` (one MIG device), space- or comma-separated. An id that
    /// names no device is a usage error.
    #[arg(short = 'o', long, visible_alias = "id", value_name = "ID", num_args = 1.., value_delimiter = ',')]
    pub only: Vec<String>,

    /// `--color WHEN`, `--no-color`, `--force-color`.
    #[command(flatten)]
    pub color: crate::cli::args::ColorArgs,

    /// With --compact: no processes, one line per device.
    #[arg(long, requires = "compact")]
    pub no_processes: bool,

    /// Encoder utilization beside the GPU's (`gpuscope stat -e`).
    #[arg(skip)]
    pub show_encoder: bool,

    /// Decoder utilization beside the GPU's (`gpuscope stat -e`).
    #[arg(skip)]
    pub show_decoder: bool,

    /// With power shown: the limit too (`gpuscope stat -P draw` leaves it out).
    #[arg(skip = true)]
    pub power_limit: bool,

    /// Names cut or padded to this many characters, 0 leaving them out (`gpuscope stat
    /// --gpuname-width`); the longest name's width when unset.
    #[arg(skip)]
    pub name_width: Option<usize>,
}

impl CompactArgs {
    /// Whether to colour, given where the output goes.
    pub fn colour(&self) -> bool {
        self.color.colour(std::io::stdout().is_terminal())
    }

    /// The width to fit: the terminal's on a terminal, else none (lines are not cut).
    pub fn width(&self) -> Option<usize> {
        if !std::io::stdout().is_terminal() {
            return None;
        }
        ratatui::crossterm::terminal::size()
            .ok()
            .map(|(w, _)| usize::from(w))
            .filter(|&w| w > 0)
    }

    /// Keeps the devices `--only` names (all when it names none): a GPU with its MIG devices,
    /// or one MIG device. An id that names no device is a usage error that lists the devices.
    pub fn keep_only(&self, view: &mut SnapshotView) -> Result<(), crate::error::UsageError> {
        let devices = std::mem::take(&mut view.devices);
        view.devices = crate::cli::args::keep_only(&self.only, devices, |d| d.device)?;
        Ok(())
    }
}

/// Styles for the parts of a line (gpustat's colours); plain when colour is off.
struct Paint {
    on: bool,
}

impl Paint {
    fn paint(&self, style: Style, text: &str) -> String {
        if self.on {
            format!("{}{text}{}", style.render(), style.render_reset())
        } else {
            text.to_string()
        }
    }
}

fn fg(c: AnsiColor) -> Style {
    Style::new().fg_color(Some(c.into()))
}

/// A piece of a line: its text and its style. Fitting to a width counts the text only.
type Piece = (String, Style);

/// Joins pieces into a line no wider than `width` characters (the last piece cut, with `…`).
fn line(pieces: &[Piece], width: Option<usize>, paint: &Paint) -> String {
    let mut out = String::new();
    let mut used = 0usize;
    for (text, style) in pieces {
        let n = text.chars().count();
        match width {
            Some(w) if used + n > w => {
                let room = w.saturating_sub(used);
                if room > 0 {
                    let cut: String = text.chars().take(room - 1).collect();
                    out += &paint.paint(*style, &(cut + "…"));
                }
                break;
            }
            _ => {
                out += &paint.paint(*style, text);
                used += n;
            }
        }
    }
    out
}

/// Bytes in whole MiB as gpustat counts them ([`super::value::gpustat_mib`]), without the
/// unit; N/A when unknown.
fn mib(b: Option<u64>) -> String {
    na(b.map(super::value::gpustat_mib))
}

/// The compact view of a snapshot.
pub fn render(
    view: &SnapshotView,
    args: &CompactArgs,
    width: Option<usize>,
    colour: bool,
) -> String {
    let paint = Paint { on: colour };
    let plain = Style::new();
    let mut out = String::new();
    if !args.no_header {
        let header = vec![
            (text(view.hostname.as_deref()), Style::new().bold()),
            (
                format!("  {}", crate::present::time::human_utc(&view.time)),
                plain,
            ),
            (
                format!("  {}", text(view.driver_version.as_deref())),
                Style::new().bold(),
            ),
        ];
        out += &line(&header, width, &paint);
        out.push('\n');
    }
    let name_width = args.name_width.unwrap_or_else(|| {
        view.devices
            .iter()
            .map(|d| text(d.identity.name.as_deref()).chars().count())
            .max()
            .unwrap_or(0)
    });
    let id_width = view
        .devices
        .iter()
        .map(|d| d.identity.id.chars().count() + 2)
        .max()
        .unwrap_or(0);
    for d in &view.devices {
        out += &line(&device_pieces(d, args, id_width, name_width), width, &paint);
        out.push('\n');
        if args.no_processes {
            continue;
        }
        match &d.processes {
            None => {
                out += &line(
                    &[("  └ processes: N/A".to_string(), fg(AnsiColor::BrightBlack))],
                    width,
                    &paint,
                );
                out.push('\n');
            }
            Some(list) => {
                for p in list {
                    out += &line(&process_pieces(p, args), width, &paint);
                    out.push('\n');
                }
            }
        }
    }
    out
}

fn device_pieces(
    d: &DeviceView,
    args: &CompactArgs,
    id_width: usize,
    name_width: usize,
) -> Vec<Piece> {
    let plain = Style::new();
    let hot = |v: Option<u32>, limit: u32| v.is_some_and(|v| v >= limit);
    let temp_style = if hot(d.temperature_celsius, 50) {
        fg(AnsiColor::Red).bold()
    } else {
        fg(AnsiColor::Red)
    };
    let util_style = if hot(d.gpu_utilization_percent, 50) {
        fg(AnsiColor::Green).bold()
    } else {
        fg(AnsiColor::Green)
    };
    let mut pieces: Vec<Piece> = vec![
        (
            format!("{:<id_width$}", format!("[{}]", d.identity.id)),
            fg(AnsiColor::Cyan),
        ),
        (" ".into(), plain),
        (
            fit_name(&text(d.identity.name.as_deref()), name_width),
            fg(AnsiColor::Blue),
        ),
        (if name_width == 0 { "| " } else { " | " }.into(), plain),
        (
            format!(
                "{:>5}",
                d.temperature_celsius
                    .map_or_else(|| "N/A".into(), |t| format!("{t}°C"))
            ),
            temp_style,
        ),
        (", ".into(), plain),
        (
            format!(
                "{:>5}",
                d.gpu_utilization_percent
                    .map_or_else(|| "N/A".into(), |u| format!("{u} %"))
            ),
            util_style,
        ),
    ];
    for (on, label, value) in [
        (args.show_encoder, "E:", d.encoder_utilization_percent),
        (args.show_decoder, "D:", d.decoder_utilization_percent),
    ] {
        if on {
            pieces.push((format!(" {label}"), plain.bold()));
            pieces.push((
                format!(
                    "{:>5}",
                    value.map_or_else(|| "N/A".into(), |u| format!("{u} %"))
                ),
                fg(AnsiColor::Green),
            ));
        }
    }
    if args.show_fan {
        pieces.push((", fan ".into(), plain));
        pieces.push((
            format!(
                "{:>5}",
                d.fan_speed_percent
                    .map_or_else(|| "N/A".into(), |f| format!("{f} %"))
            ),
            fg(AnsiColor::Cyan),
        ));
    }
    if args.show_power {
        let w = |v: Option<f64>| v.map_or_else(|| "N/A".into(), |w| format!("{:.0}", w.round()));
        pieces.push((", ".into(), plain));
        let text = if args.power_limit {
            format!(
                "{:>4} / {:>4} W",
                w(d.power_usage_watts),
                w(d.power_limit_watts)
            )
        } else {
            format!("{:>4} W", w(d.power_usage_watts))
        };
        pieces.push((text, fg(AnsiColor::Magenta)));
    }
    pieces.push((" | ".into(), plain));
    pieces.push((
        format!(
            "{:>6} / {:>6} MiB",
            mib(d.memory_used_bytes),
            mib(d.memory_total_bytes)
        ),
        fg(AnsiColor::Yellow),
    ));
    let attention = &d.health.needs_attention;
    if !attention.is_empty() {
        pieces.push((" | ".into(), plain));
        pieces.push((
            format!(
                "! {}",
                attention
                    .iter()
                    .map(|a| escape_control(a).into_owned())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            fg(AnsiColor::Red).bold(),
        ));
    }
    pieces
}

/// A name cut (with `…`) or padded to `width` characters; empty for 0.
fn fit_name(name: &str, width: usize) -> String {
    let n = name.chars().count();
    if n <= width {
        format!("{name:<width$}")
    } else if width == 0 {
        String::new()
    } else {
        let kept: String = name.chars().take(width - 1).collect();
        format!("{kept}…")
    }
}

fn process_pieces(p: &ProcessView, args: &CompactArgs) -> Vec<Piece> {
    let plain = Style::new();
    let mut pieces: Vec<Piece> = vec![("  └ ".into(), plain)];
    if !args.no_user {
        pieces.push((text(p.user.as_deref()), fg(AnsiColor::BrightBlack)));
    }
    if args.show_pid {
        let sep = if args.no_user { "" } else { "/" };
        pieces.push((format!("{sep}{}", p.pid), plain));
    }
    let mem = p.used_memory_bytes.map_or_else(
        || "N/A".into(),
        |b| format!("{}M", super::value::gpustat_mib(b)),
    );
    pieces.push((format!("({mem})"), fg(AnsiColor::Yellow)));
    if args.show_cmd {
        pieces.push((" ".into(), plain));
        pieces.push((
            text(p.command.as_deref().or(p.name.as_deref())),
            fg(AnsiColor::Blue),
        ));
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_cut_to_the_width_with_an_ellipsis() {
        let paint = Paint { on: false };
        let pieces: Vec<Piece> = vec![
            ("abcdef".into(), Style::new()),
            ("ghij".into(), Style::new()),
        ];
        assert_eq!(line(&pieces, None, &paint), "abcdefghij");
        assert_eq!(line(&pieces, Some(10), &paint), "abcdefghij");
        assert_eq!(line(&pieces, Some(8), &paint), "abcdefg…");
        assert_eq!(line(&pieces, Some(6), &paint), "abcdef");
        assert_eq!(line(&pieces, Some(3), &paint), "ab…");
        assert_eq!(line(&pieces, Some(0), &paint), "");
    }

    #[test]
    fn colour_wraps_each_piece_and_resets() {
        let paint = Paint { on: true };
        let text = line(&[("x".into(), fg(AnsiColor::Red))], None, &paint);
        assert_eq!(text, "\x1b[31mx\x1b[0m");
    }
}
