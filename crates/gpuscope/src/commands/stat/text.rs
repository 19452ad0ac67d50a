//! `gpuscope stat`'s lines, as gpustat 1.1.1 prints them: a header (host, local time in the C
//! locale's `%c`, driver), one line per GPU with its processes on it (`user(6754M)`), memory
//! in `MB` as gpustat writes MiB, power in whole watts rounded down, `??` for a value not
//! known, gpustat's column widths, and with `-f` a line per process (PID, CPU%, RSS, command
//! line). In colour, gpustat's colours with xterm's sequences. MIG devices have no line of
//! their own, as in gpustat (docs/cli.md names the remaining differences).
//!
//! Every string from outside (names, users, commands) has its control characters escaped
//! before it is written.

use gpu_backend::DeviceId;
use gpu_devices::text::escape_control;
use gpu_devices::DeviceSnapshot;

use crate::present::json::{DeviceView, ProcessView, SnapshotView};

/// gpustat's width for GPU names when every name is empty.
const DEFAULT_NAME_WIDTH: usize = 16;

/// What to show: gpustat's options, `-a` already spread into the others.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `-c`: each process's program name.
    pub show_cmd: bool,
    /// `-f`: a line per process with PID, CPU%, resident memory and command line.
    pub show_full_cmd: bool,
    /// `-u`: each process's user (shown anyway unless `-c` is given alone).
    pub show_user: bool,
    /// `-p`: each process's PID.
    pub show_pid: bool,
    /// `-F`: the fan speed.
    pub show_fan: bool,
    /// `-e`: the encoder's utilization.
    pub show_enc: bool,
    /// `-e`: the decoder's utilization.
    pub show_dec: bool,
    /// `-P`: the power draw.
    pub show_power: bool,
    /// `-P` with `limit`: the enforced limit beside the draw.
    pub power_limit: bool,
    /// `--no-processes`.
    pub no_processes: bool,
    /// `--gpuname-width`: names shortened from the left (`…` first) to this width; the longest
    /// name's when unset.
    pub name_width: Option<usize>,
    /// Not `--no-header`.
    pub header: bool,
}

/// How colour is written: off, forced (gpustat's `--force-color`, which resets with
/// `ESC[0;10m`) or on a terminal (terminfo's `sgr0`, `ESC(B ESC[m`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Colour {
    /// Plain text.
    Off,
    /// Forced: `--force-color`, `--color always`.
    Forced,
    /// Chosen because the output is a terminal.
    Terminal,
}

/// gpustat's palette (blessed's names), each empty when colour is off.
struct Palette {
    on: bool,
    normal: &'static str,
}

impl Palette {
    fn new(colour: Colour) -> Self {
        Palette {
            on: colour != Colour::Off,
            normal: if colour == Colour::Forced {
                "\x1b[0;10m"
            } else {
                "\x1b(B\x1b[m"
            },
        }
    }

    fn c(&self, seq: &'static str) -> &'static str {
        if self.on {
            seq
        } else {
            ""
        }
    }

    fn normal(&self) -> &'static str {
        self.c(self.normal)
    }

    /// `good` when the test holds, `bad` when it does not, bold black when it cannot be told
    /// (gpustat's colour for a value it could not compare).
    fn pick(&self, test: Option<bool>, good: &'static str, bad: &'static str) -> &'static str {
        self.c(match test {
            Some(true) => good,
            Some(false) => bad,
            None => BOLD_BLACK,
        })
    }
}

const BOLD: &str = "\x1b[1m";
const BOLD_BLACK: &str = "\x1b[1m\x1b[30m";
const BOLD_WHITE: &str = "\x1b[1m\x1b[37m";
const RED: &str = "\x1b[31m";
const BOLD_RED: &str = "\x1b[1m\x1b[31m";
const GREEN: &str = "\x1b[32m";
const BOLD_GREEN: &str = "\x1b[1m\x1b[32m";
const YELLOW: &str = "\x1b[33m";
const BOLD_YELLOW: &str = "\x1b[1m\x1b[33m";
const BLUE: &str = "\x1b[34m";
const MAGENTA: &str = "\x1b[35m";
const BOLD_MAGENTA: &str = "\x1b[1m\x1b[35m";
const CYAN: &str = "\x1b[36m";
const BOLD_CYAN: &str = "\x1b[1m\x1b[36m";
/// gpustat's command colour, xterm's colour 24 ("a bit dark").
const COMMAND: &str = "\x1b[38;5;24m";

/// A value as gpustat writes one it may not have: `??` when unknown.
fn or_unknown<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "??".to_string(), |v| v.to_string())
}

/// Bytes in whole MiB, rounded down (gpustat's `// MB`).
fn mib(b: Option<u64>) -> Option<u64> {
    b.map(|b| b / (1024 * 1024))
}

/// Watts as gpustat computes them from NVML's milliwatts: rounded down.
fn watts(w: Option<f64>) -> Option<u64> {
    w.filter(|w| w.is_finite() && *w >= 0.0)
        .map(|w| (w * 1000.0).round() as u64 / 1000)
}

/// gpustat's `shorten_left`: a name longer than `width` keeps its right end after `…`.
fn shorten_left(name: &str, width: usize) -> String {
    let n = name.chars().count();
    if n <= width {
        name.to_string()
    } else if width == 0 {
        String::new()
    } else {
        let kept: String = name.chars().skip(n - (width - 1)).collect();
        format!("…{kept}")
    }
}

/// The PIDs of a GPU in gpustat's order: NVML's compute list, then its graphics list, each PID
/// once.
fn nvml_order(raw: &[DeviceSnapshot], device: DeviceId) -> Vec<u32> {
    let mut pids = Vec::new();
    if let Some(d) = raw.iter().find(|d| d.id == device) {
        for list in [&d.compute_processes, &d.graphics_processes] {
            for p in list.value().into_iter().flatten() {
                if !pids.contains(&p.pid) {
                    pids.push(p.pid);
                }
            }
        }
    }
    pids
}

/// The lines of a snapshot, each ending in a newline; `raw`, the device snapshots it was made
/// from, gives the order NVML listed the processes in.
pub fn render(
    view: &SnapshotView,
    raw: &[DeviceSnapshot],
    opts: &Options,
    colour: Colour,
) -> String {
    let p = Palette::new(colour);
    let gpus: Vec<&DeviceView> = view
        .devices
        .iter()
        .filter(|d| d.identity.mig_index.is_none())
        .collect();
    let names: Vec<String> = gpus
        .iter()
        .map(|d| escape_control(d.identity.name.as_deref().unwrap_or("??")).into_owned())
        .collect();
    let name_width = opts
        .name_width
        .unwrap_or_else(|| names.iter().map(|n| n.chars().count()).max().unwrap_or(0));
    let mut out = String::new();
    if opts.header {
        let width = if name_width == 0 {
            DEFAULT_NAME_WIDTH
        } else {
            name_width
        } + 3;
        let host = escape_control(view.hostname.as_deref().unwrap_or("None")).into_owned();
        let time = crate::present::time::local_c_datetime(view.time_unix_ms / 1000)
            .unwrap_or_else(|| crate::present::time::human_utc(&view.time));
        let driver = escape_control(view.driver_version.as_deref().unwrap_or("None"));
        let header = format!(
            "{}{host:<width$}{}  {time}  {}{driver}{}",
            p.c(BOLD_WHITE),
            p.normal(),
            p.c(BOLD_BLACK),
            p.normal()
        );
        out += header.trim();
        out.push('\n');
    }
    for (d, name) in gpus.iter().zip(&names) {
        // NVML lists a MIG device's processes on its GPU too, and gpustat shows them there.
        let procs = d.processes.as_ref().map(|own| {
            let mig = view
                .devices
                .iter()
                .filter(|m| m.identity.mig_index.is_some() && m.identity.index == d.identity.index)
                .filter_map(|m| m.processes.as_ref())
                .flatten();
            let mut all: Vec<&ProcessView> = Vec::new();
            for proc in own.iter().chain(mig) {
                if !all.iter().any(|q| q.pid == proc.pid) {
                    all.push(proc);
                }
            }
            let order = nvml_order(raw, d.device);
            all.sort_by_key(|proc| {
                order
                    .iter()
                    .position(|&pid| pid == proc.pid)
                    .unwrap_or(usize::MAX)
            });
            all
        });
        out += &gpu_line(d, procs.as_deref(), name, name_width, opts, &p);
        out.push('\n');
    }
    if gpus.is_empty() {
        out += &format!("{}(No GPUs are available){}\n", p.c(YELLOW), p.normal());
    }
    out
}

/// One GPU's line with `procs`, its processes in NVML's order (and with `-f` their lines),
/// without the last newline.
fn gpu_line(
    d: &DeviceView,
    procs: Option<&[&ProcessView]>,
    name: &str,
    name_width: usize,
    o: &Options,
    p: &Palette,
) -> String {
    let n = p.normal();
    let below = |v: Option<u32>, limit: u32| v.map(|v| v < limit);
    let mut s = format!("{}[{}]{n} ", p.c(CYAN), d.identity.index);
    if name_width != 0 {
        let name = shorten_left(name, name_width);
        s += &format!("{}{name:<name_width$}{n} |", p.c(BLUE));
    }
    s += &format!(
        "{}{:>3}°C{n}, ",
        p.pick(below(d.temperature_celsius, 50), RED, BOLD_RED),
        or_unknown(d.temperature_celsius)
    );
    if o.show_fan {
        s += &format!(
            "{}{:>3} %{n}, ",
            p.pick(below(d.fan_speed_percent, 30), CYAN, BOLD_CYAN),
            or_unknown(d.fan_speed_percent)
        );
    }
    s += &format!(
        "{}{:>3} %{n}",
        p.pick(below(d.gpu_utilization_percent, 30), GREEN, BOLD_GREEN),
        or_unknown(d.gpu_utilization_percent)
    );
    let mut codec = Vec::new();
    for (on, label, v) in [
        (o.show_enc, "E", d.encoder_utilization_percent),
        (o.show_dec, "D", d.decoder_utilization_percent),
    ] {
        if on {
            codec.push(format!(
                "{}{label}: {n}{}{:>3} %{n}",
                p.c(BOLD),
                p.pick(below(v, 50), GREEN, BOLD_GREEN),
                or_unknown(v)
            ));
        }
    }
    if !codec.is_empty() {
        s += &format!(" ({})", codec.join("  "));
    }
    if o.show_power {
        let (draw, limit) = (watts(d.power_usage_watts), watts(d.power_limit_watts));
        // gpustat: bold once the draw reaches 40 % of the limit; a draw not known against a
        // known limit (or a zero limit) cannot be compared; no limit, bold.
        let low = match (draw, limit) {
            (_, None) => Some(false),
            (_, Some(0)) | (None, _) => None,
            (Some(w), Some(l)) => Some((w as f64) / (l as f64) < 0.4),
        };
        let draw_colour = p.pick(low, MAGENTA, BOLD_MAGENTA);
        s += &format!(",  {draw_colour}{:>3}{n} ", or_unknown(draw));
        if o.power_limit {
            s += &format!("/ {m}{:>3}{n} {m}W{n}", or_unknown(limit), m = p.c(MAGENTA));
        } else {
            s += &format!("{draw_colour}W{n}");
        }
    }
    s += &format!(
        " | {}{}{:>5}{n} / {}{:>5}{n} MB",
        p.c(CYAN),
        p.c(BOLD_YELLOW),
        or_unknown(mib(d.memory_used_bytes)),
        p.c(YELLOW),
        or_unknown(mib(d.memory_total_bytes)),
    );
    if o.no_processes {
        return s;
    }
    s += " |";
    let Some(list) = procs else {
        s += " (Not Supported)";
        return s;
    };
    let mut full = Vec::new();
    for proc in list {
        s.push(' ');
        s += &process(proc, o, p);
        if o.show_full_cmd {
            full.push(format!("\n{}", full_process(proc, p)));
        }
    }
    if let Some(last) = full.last_mut() {
        *last = last.replacen('├', "└", 1);
    }
    s + &full.concat()
}

/// A process as gpustat places it on its GPU's line: `user:command/pid(6754M)`, each part as
/// asked.
fn process(proc: &ProcessView, o: &Options, p: &Palette) -> String {
    let n = p.normal();
    let mut r = String::new();
    if !o.show_cmd || o.show_user {
        // gpustat writes `?` for a user it may not read.
        let user = escape_control(proc.user.as_deref().unwrap_or("?"));
        r += &format!("{}{user}{n}", p.c(BOLD_BLACK));
    }
    if o.show_cmd {
        if !r.is_empty() {
            r.push(':');
        }
        r += &format!("{}{}{n}", p.c(CYAN), escape_control(&program(proc)));
    }
    if o.show_pid {
        r += &format!("/{}", proc.pid);
    }
    // gpustat takes a process's zero bytes for "not known".
    let mem = mib(proc.used_memory_bytes.filter(|&b| b > 0));
    r + &format!(
        "({}{}M{n})",
        p.c(YELLOW),
        mem.map_or_else(|| "?".to_string(), |m| m.to_string())
    )
}

/// The program's name: the last part of the command line's first word (`ps -o comm`'s), `?`
/// when the command line is not known or empty.
fn program(proc: &ProcessView) -> String {
    proc.argv
        .as_deref()
        .and_then(|a| a.first())
        .filter(|a| !a.is_empty())
        .map_or_else(
            || "?".to_string(),
            |a| a.rsplit('/').next().unwrap_or(a).to_string(),
        )
}

/// gpustat's `-f` line of a process: ` ├─   PID (  CPU%,    RSS): command line`.
fn full_process(proc: &ProcessView, p: &Palette) -> String {
    let n = p.normal();
    let cpu = proc.cpu_percent.filter(|c| c.is_finite()).unwrap_or(0.0);
    let rss = bytes_to_human(proc.host_memory_bytes.unwrap_or(0));
    let argv: Vec<String> = proc.argv.as_deref().filter(|a| !a.is_empty()).map_or_else(
        || vec!["?".to_string()],
        |a| a.iter().map(|w| escape_control(w).into_owned()).collect(),
    );
    // The program's name stands out: the folder in the command's colour, the name in cyan.
    let (dir, base) = match argv[0].rfind('/') {
        Some(i) => argv[0].split_at(i + 1),
        None => ("", argv[0].as_str()),
    };
    let mut command = format!("{}{dir}{}{base}{}", p.c(COMMAND), p.c(CYAN), p.c(COMMAND));
    if argv.len() > 1 {
        command.push(' ');
        command += &argv[1..].join(" ");
    }
    format!(
        "{n} ├─ {:>6} {n}({}{cpu:4.0}%{n}, {}{rss:>6}{n}){n}: {}{command}{n}",
        proc.pid,
        p.c(GREEN),
        p.c(YELLOW),
        p.c(COMMAND),
    )
}

/// gpustat's `bytes2human`: the number shifted down by 1024 until it has at most four digits,
/// with its unit (`B`, `KB`, ... as gpustat writes KiB, MiB, ...).
fn bytes_to_human(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KB", "MB", "GB", "TB", "PB"];
    let mut value = bytes;
    let mut unit = 0;
    while value > 9999 && unit < UNITS.len() {
        value >>= 10;
        unit += 1;
    }
    format!("{value}{}", UNITS[unit.min(UNITS.len() - 1)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_shortened_from_the_left_as_gpustat_does() {
        assert_eq!(shorten_left("NVIDIA H100 80GB HBM3", 10), "…80GB HBM3");
        assert_eq!(shorten_left("NVIDIA H100", 11), "NVIDIA H100");
        assert_eq!(shorten_left("NVIDIA H100", 1), "…");
        assert_eq!(shorten_left("NVIDIA H100", 0), "");
    }

    #[test]
    fn bytes_in_gpustats_units() {
        assert_eq!(bytes_to_human(0), "0B");
        assert_eq!(bytes_to_human(9999), "9999B");
        assert_eq!(bytes_to_human(10_000), "9KB");
        assert_eq!(bytes_to_human(2_542_796_800), "2425MB");
    }

    #[test]
    fn watts_are_rounded_down_from_milliwatts() {
        assert_eq!(watts(Some(162.999)), Some(162));
        assert_eq!(watts(Some(40.968)), Some(40));
        assert_eq!(watts(Some(70.0)), Some(70));
        assert_eq!(watts(None), None);
        assert_eq!(watts(Some(f64::NAN)), None);
    }
}
