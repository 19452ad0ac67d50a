//! `gpuscope top`: the interactive process viewer.
//!
//! A sampler thread owns the collector and sends a sample every interval; the UI thread keeps
//! the newest one, draws it (a pure function of state and terminal size, in `top/ui.rs`) and
//! handles keys and clicks. The UI never calls the backend, so a slow driver cannot freeze it.

mod app;
mod event_loop;
pub mod fleet;
mod keys;
mod sampler;
mod signals;
mod terminal;
mod ui;
mod wake;

#[cfg(test)]
mod tests;

use std::time::Duration;

use anyhow::{Context as _, Result};
use gpu_devices::{Device, DeviceId};
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyEvent, MouseEvent};
use ratatui::layout::Rect;
use ratatui::Terminal;

use crate::error::UsageError;
use crate::source::SourceArgs;
use app::{App, LayoutMode, Options, Screen, REPLAY_NO_SIGNALS};
use keys::Effect;

/// Command-line arguments.
#[derive(Debug, clap::Args)]
#[command(after_help = keys_help())]
pub struct Args {
    #[command(flatten)]
    source: SourceArgs,

    /// The fleet instead of this machine: every host's GPUs from Prometheus (--prometheus URL)
    /// or from exporters read directly (--remote URL...); docs/fleet.md.
    #[command(flatten)]
    fleet: crate::fleet::FleetArgs,

    /// With --prometheus or --remote: the first order (the `s` key changes it): host, gpu,
    /// free-memory (most first) or utilization (least first).
    #[arg(long, value_enum)]
    sort: Option<crate::fleet::view::SortArg>,

    /// With --prometheus or --remote: the first filter (the `/` key changes it): host:NAME
    /// (host:gpu-* for a prefix), gpu:ID, user:NAME, pid:N, state:up|down|stale, and words.
    #[arg(long, value_name = "TERMS")]
    filter: Option<String>,

    /// Refresh interval: seconds (`1`, `0.25`) or with a unit (`250ms`, `2s`); 50ms to 1h.
    /// Default 1s, and 2s with --prometheus or --remote.
    #[arg(long, short = 'i', value_name = "DURATION", env = "GPUSCOPE_TOP_INTERVAL",
          value_parser = crate::cli::args::duration(crate::cli::args::INTERVAL))]
    interval: Option<Duration>,

    /// Show only these devices: ids separated by commas or spaces (`--only 0 1`), `2` for GPU 2 (with its MIG devices),
    /// `0:1` for one MIG device.
    #[arg(short = 'o', long, visible_alias = "id", value_name = "IDS", value_delimiter = ',', num_args = 1..)]
    only: Vec<String>,

    /// Show only the devices CUDA sees under CUDA_VISIBLE_DEVICES (and CUDA_DEVICE_ORDER);
    /// nvitop's `-ov` is taken too.
    #[arg(long, env = "GPUSCOPE_TOP_ONLY_VISIBLE",
          value_parser = clap::builder::FalseyValueParser::new())]
    only_visible: bool,

    /// Only this user's processes (nvitop's --user); without a name, the current user's.
    #[arg(short = 'u', long, value_name = "USER", num_args = 0..=1, default_missing_value = "")]
    user: Option<String>,

    /// Only these processes (nvitop's --pid), e.g. --pid 4242 4243.
    #[arg(short = 'p', long, value_name = "PID", num_args = 1..)]
    pid: Vec<u32>,

    /// Only processes with a compute context (C or C+G).
    #[arg(long, short = 'c', conflicts_with = "graphics")]
    compute: bool,

    /// Only processes with a graphics context (G or C+G).
    #[arg(long, short = 'g')]
    graphics: bool,

    /// Only processes with a compute context and no graphics one (C).
    #[arg(long, short = 'C', conflicts_with_all = ["compute", "graphics", "only_graphics"])]
    only_compute: bool,

    /// Only processes with a graphics context and no compute one (G).
    #[arg(long, short = 'G', conflicts_with_all = ["compute", "graphics"])]
    only_graphics: bool,

    /// Run as a monitor (nvitop's --monitor, which is top's default), with this layout:
    /// auto, full or compact (the same as --layout).
    #[arg(long, short = 'm', value_enum, value_name = "MODE", num_args = 0..=1,
          default_missing_value = "auto", conflicts_with = "once")]
    monitor: Option<LayoutArg>,

    /// GPU utilization colours as nvitop's: green under TH1 percent, yellow from it, red from
    /// TH2 (default 10 75).
    #[arg(long, num_args = 2, value_names = ["TH1", "TH2"],
          value_parser = crate::cli::args::whole::<u8>((0, 100)))]
    gpu_util_thresh: Vec<u8>,

    /// GPU memory colours as nvitop's: green under TH1 percent, yellow from it, red from TH2
    /// (default 10 80).
    #[arg(long, num_args = 2, value_names = ["TH1", "TH2"],
          value_parser = crate::cli::args::whole::<u8>((0, 100)))]
    mem_util_thresh: Vec<u8>,

    /// Read-only: sending signals is turned off.
    #[arg(long, env = "GPUSCOPE_TOP_READONLY",
          value_parser = clap::builder::FalseyValueParser::new())]
    readonly: bool,

    /// `--color WHEN` (auto: unless NO_COLOR is set), `--no-color`, `--force-color`.
    #[command(flatten)]
    color: crate::cli::args::ColorArgs,

    /// Colours for a light terminal background (nvitop's --light): dark yellow, green and blue
    /// where the default theme uses yellow, green and cyan, which a white background washes out.
    #[arg(long, env = "GPUSCOPE_TOP_LIGHT", value_parser = clap::builder::FalseyValueParser::new())]
    light: bool,

    /// Spectrum bars (nvitop's --colorful): each filled cell in the colour of the share it
    /// stands for (green, yellow from the first threshold, red from the second), instead of the
    /// whole bar in the colour of its value.
    #[arg(long, env = "GPUSCOPE_TOP_COLORFUL", value_parser = clap::builder::FalseyValueParser::new())]
    colorful: bool,

    /// ASCII only: no block, line-drawing or other non-ASCII characters.
    #[arg(
        long,
        short = 'U',
        visible_alias = "no-unicode",
        env = "GPUSCOPE_TOP_ASCII",
        value_parser = clap::builder::FalseyValueParser::new()
    )]
    ascii: bool,

    /// Device panel layout; the `f` key switches it while running.
    #[arg(long, value_enum, default_value = "auto", env = "GPUSCOPE_TOP_LAYOUT")]
    layout: LayoutArg,

    /// Print the screen once and exit, in its colours on a terminal or with --force-color, as
    /// nvitop -1 (width: the terminal's, else COLUMNS,
    /// else 120, when the terminal reports none or 0; at most 1000 columns and 500,000 cells: a longer process list is cut, and the
    /// last line says how many processes were left out).
    #[arg(long, short = '1')]
    once: bool,
}

/// The `--layout` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LayoutArg {
    /// Full when the terminal has room, compact otherwise.
    Auto,
    /// One line per device.
    Compact,
    /// Two lines per device and history graphs.
    Full,
}

fn keys_help() -> String {
    let mut s = String::from("Keys:\n");
    for (keys, what) in keys::KEYS {
        s.push_str(&format!("  {keys:<22} {what}\n"));
    }
    s.push_str("\nKeys of the fleet view (--prometheus, --remote):\n");
    for (keys, what) in fleet::KEYS {
        s.push_str(&format!("  {keys:<22} {what}\n"));
    }
    s.push_str(
        "\nSignals go to the tagged processes (or the selected one) after a y/n confirmation, and \
         only to a process whose start time and owner are still the ones shown. A replay \
         (--fixture, --demo) never sends one: its processes are not this machine's.\n\n",
    );
    s.push_str(crate::error::EXIT_CODES_HELP);
    s
}

/// The devices named by `--only` (all when empty), in the context's order.
fn choose_devices(all: Vec<Device>, only: &[String]) -> Result<Vec<Device>> {
    if only.is_empty() {
        return Ok(all);
    }
    let mut wanted = Vec::new();
    for text in only {
        let id: DeviceId = text
            .trim()
            .parse()
            .map_err(|e| UsageError(format!("--only: {e}")))?;
        let known = all.iter().any(|d| d.id() == id);
        if !known {
            let ids: Vec<String> = all.iter().map(|d| d.id().to_string()).collect();
            return Err(UsageError(format!(
                "--only: there is no device {id}; the devices are {}",
                ids.join(", ")
            ))
            .into());
        }
        wanted.push(id);
    }
    Ok(all
        .into_iter()
        .filter(|d| {
            let id = d.id();
            wanted.iter().any(|&w| {
                w == id
                    || (matches!(w, DeviceId::Gpu(_)) && id.physical_index() == w.physical_index())
            })
        })
        .collect())
}

/// The refresh intervals unless --interval says otherwise: the same as snapshot's -i.
use crate::cli::args::{FLEET_INTERVAL, LOCAL_INTERVAL};

/// `top --prometheus URL` / `top --remote URL...`.
fn run_fleet(args: Args) -> Result<()> {
    if !args.only.is_empty() {
        return Err(UsageError(
            "--only names this machine's devices; with --prometheus or --remote use --filter gpu:ID"
                .into(),
        )
        .into());
    }
    if args.user.is_some()
        || !args.pid.is_empty()
        || args.compute
        || args.graphics
        || args.only_compute
        || args.only_graphics
        || args.only_visible
    {
        return Err(UsageError(
            "--user, --pid, -c, -g, -C, -G and --only-visible are for this machine; with --prometheus or \
             --remote use --filter user:NAME or pid:N"
                .into(),
        )
        .into());
    }
    let source = args.fleet.open()?;
    // The title names the URLs without their credentials, as the fleet names its hosts.
    let shown = |url: &String| gpu_fleet::remote::without_userinfo(url).into_owned();
    let label = match (&args.fleet.prometheus, &args.fleet.remote) {
        (Some(url), _) => shown(url),
        (None, urls) => urls.iter().map(shown).collect::<Vec<_>>().join(" "),
    };
    let mut app = fleet::FleetApp::new(
        label,
        args.interval.unwrap_or(FLEET_INTERVAL),
        colors_on(&args),
        args.ascii,
    );
    app.sort = args.sort.unwrap_or_default().into();
    app.light = args.light;
    if let Some(text) = &args.filter {
        app.set_filter(text)
            .map_err(|e| UsageError(format!("--filter: {e}")))?;
    }
    fleet::run(app, source, args.once)
}

/// Whether to draw in colour: `--color` (or its spellings), `auto` unless NO_COLOR is set.
/// `--once` prints rather than draws: `auto` colours it only on a terminal, as nvitop `-1`.
fn colors_on(args: &Args) -> bool {
    use std::io::IsTerminal as _;
    args.color
        .colour(!args.once || std::io::stdout().is_terminal())
}

/// The name of the user running gpuscope: $LOGNAME, $USER or the user database's entry of the
/// effective uid (as Python's getpass.getuser, which nvitop uses).
fn current_user() -> Option<String> {
    for var in ["LOGNAME", "USER", "LNAME", "USERNAME"] {
        if let Some(v) = std::env::var(var).ok().filter(|v| !v.is_empty()) {
            return Some(v);
        }
    }
    // SAFETY: a zeroed passwd is a valid out-parameter (plain pointers and integers).
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf: Vec<libc::c_char> = vec![0; 16 * 1024];
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call, `buf` for `buf.len()` bytes.
    let rc = unsafe {
        libc::getpwuid_r(
            libc::geteuid(),
            &mut pwd,
            buf.as_mut_ptr(),
            buf.len(),
            &mut result,
        )
    };
    if rc != 0 || result.is_null() || pwd.pw_name.is_null() {
        return None;
    }
    // SAFETY: getpwuid_r succeeded, so pw_name is a NUL-terminated string inside `buf`.
    let name = unsafe { std::ffi::CStr::from_ptr(pwd.pw_name) };
    Some(name.to_string_lossy().into_owned()).filter(|n| !n.is_empty())
}

/// The process filter that nvitop's startup options ask for (`--user`, `--pid`, `-c`, `-g`),
/// in the filter syntax of the `/` key, or `None` when none is given.
fn startup_filter(args: &Args) -> Result<Option<String>> {
    let mut terms = Vec::new();
    match args.user.as_deref() {
        None => {}
        Some("") => {
            let me = current_user().ok_or_else(|| {
                UsageError("--user: cannot tell who the current user is; name one".into())
            })?;
            terms.push(format!("user:{me}"));
        }
        Some(u) if u.chars().any(char::is_whitespace) => {
            return Err(UsageError(format!("--user {u:?}: a user name has no spaces")).into())
        }
        Some(u) => terms.push(format!("user:{u}")),
    }
    if !args.pid.is_empty() {
        let pids: Vec<String> = args.pid.iter().map(u32::to_string).collect();
        terms.push(format!("pid:{}", pids.join(",")));
    }
    if args.compute {
        terms.push("type:compute".into());
    }
    if args.graphics {
        terms.push("type:graphics".into());
    }
    if args.only_compute {
        terms.push("type:C".into());
    }
    if args.only_graphics {
        terms.push("type:G".into());
    }
    Ok((!terms.is_empty()).then(|| terms.join(" ")))
}

/// Two thresholds given on the command line (or `default`), the first below the second.
fn thresholds(option: &str, given: &[u8], default: (u8, u8)) -> Result<(u8, u8)> {
    match given {
        [] => Ok(default),
        [low, high] if low < high => Ok((*low, *high)),
        [low, high] => Err(UsageError(format!(
            "{option} {low} {high}: the first threshold must be below the second"
        ))
        .into()),
        _ => Err(UsageError(format!("{option} takes two percents")).into()),
    }
}

/// Runs the command.
pub fn run(args: Args) -> Result<()> {
    if !args.once && crate::log::writes_to_terminal() {
        return Err(UsageError(
            "the log (-v, GPUSCOPE_LOG or RUST_LOG) would write over the viewer on this \
             terminal: send it to a file (2> gpuscope.log), or turn it off (GPUSCOPE_LOG=off)"
                .into(),
        )
        .into());
    }
    if args.fleet.is_set() {
        return run_fleet(args);
    }
    if args.sort.is_some() || args.filter.is_some() {
        return Err(
            UsageError("--sort and --filter go with --prometheus or --remote".into()).into(),
        );
    }
    let src = args.source.open()?;
    let ctx = src.collector.context();
    ctx.set_query_plan(query_plan());
    let mut devices = choose_devices(ctx.all_devices(), &args.only)?;
    if args.only_visible {
        let visible: Vec<DeviceId> = ctx.cuda_devices().iter().map(|c| c.device().id()).collect();
        devices.retain(|d| {
            let id = d.id();
            visible.iter().any(|&v| {
                v == id
                    || (matches!(v, DeviceId::Gpu(_)) && v.physical_index() == id.physical_index())
            })
        });
    }
    let opts = Options {
        live: src.kind.is_live(),
        source_label: src.label.clone(),
        readonly: args.readonly,
        color: colors_on(&args),
        ascii: args.ascii,
        interval: args.interval.unwrap_or(LOCAL_INTERVAL),
        driver_version: ctx.driver_version().into_option(),
        cuda_version: ctx.cuda_driver_version().into_option(),
        local_time: true,
        gpu_util_thresh: thresholds("--gpu-util-thresh", &args.gpu_util_thresh, (10, 75))?,
        mem_util_thresh: thresholds("--mem-util-thresh", &args.mem_util_thresh, (10, 80))?,
        light: args.light,
        colorful: args.colorful,
    };
    let filter = startup_filter(&args)?;
    let mut app = App::new(opts);
    if let Some(text) = filter {
        app.filter = app::Filter::parse(&text).map_err(UsageError)?;
    }
    app.layout = match args.monitor.unwrap_or(args.layout) {
        LayoutArg::Auto => LayoutMode::Auto,
        LayoutArg::Compact => LayoutMode::Compact,
        LayoutArg::Full => LayoutMode::Full,
    };
    if args.once {
        app.push_sample(sampler::sample(&src.collector, &devices, app.opts.live));
        let width = once_width();
        let written = crate::output::write_stdout(&render_once(&mut app, width));
        src.end_one_shot();
        return written;
    }
    interactive(app, src.collector, devices)
}

/// What a refresh of the viewer asks: what its screens show. Not asked, as no screen shows
/// them and the driver spends milliseconds on some (PCIe throughput waits 20 ms in the driver,
/// each way): PCIe throughput, energy, BAR1 memory, the PCIe replay counter and current link,
/// NVLink counters, encoder and decoder utilization. GPM activity, which the driver computes
/// from two samples, every [`GPM_EVERY`], so that it is the activity over that time;
/// `process_utilization` every [`PROCESS_UTILIZATION_EVERY`] while a GPU has processes: it is
/// most of a loaded viewer's CPU at 1 s (docs/benchmarks.md, "Where top's CPU goes"), and the
/// samples it returns cover the whole time since it was last asked, so a process's SM% is its
/// average over that time. Each call's cost is in docs/benchmarks.md ("Real costs").
pub(crate) fn query_plan() -> gpu_devices::QueryPlan {
    use gpu_devices::Query;
    gpu_devices::QueryPlan::everything()
        .without(&[
            Query::pcie_throughput,
            Query::total_energy_consumption,
            Query::bar1_memory_info,
            Query::pcie_replay_counter,
            Query::current_pcie_link_generation,
            Query::current_pcie_link_width,
            Query::nvlink_throughput,
            Query::nvlink_error_counters,
            Query::encoder_utilization,
            Query::decoder_utilization,
        ])
        .with(Query::gpm_metrics, gpu_devices::Cadence::Every(GPM_EVERY))
        .with(
            Query::process_utilization,
            gpu_devices::Cadence::Every(PROCESS_UTILIZATION_EVERY),
        )
}

/// How often the viewer asks the processes' utilization samples (1.4 ms of the driver's CPU a
/// call on an H200, fixtures/costs/h200-doctor-load.json): every other refresh at 1 s.
pub(crate) const PROCESS_UTILIZATION_EVERY: Duration = Duration::from_secs(2);

/// How often the viewer asks GPM activity: its figures are the activity over this time.
pub(crate) const GPM_EVERY: Duration = Duration::from_secs(5);

pub(crate) fn once_width() -> u16 {
    use std::io::IsTerminal as _;
    let terminal = if std::io::stdout().is_terminal() {
        ratatui::crossterm::terminal::size().ok().map(|(w, _)| w)
    } else {
        None
    };
    choose_once_width(terminal, std::env::var("COLUMNS").ok().as_deref())
}

/// `--once`'s width: the terminal's when it reports one, else COLUMNS, else 120; at least 40.
/// A terminal that reports a width of 0 (a serial console, some CI runners) knows none: that
/// falls through to COLUMNS and 120 like no terminal, rather than cutting lines at 40.
fn choose_once_width(terminal: Option<u16>, columns: Option<&str>) -> u16 {
    const NARROWEST: u16 = 40;
    if let Some(w) = terminal.filter(|&w| w > 0) {
        return w.max(NARROWEST);
    }
    columns
        .and_then(|c| c.trim().parse::<u16>().ok())
        .filter(|&w| w >= NARROWEST)
        .unwrap_or(120)
}

/// The most cells `--once` draws (its width times its height): the screen is drawn into
/// buffers of that size, so a huge width or process list must not make them huge.
pub(crate) const ONCE_MAX_CELLS: usize =
    terminal::MAX_WIDTH as usize * terminal::MAX_HEIGHT as usize;

/// The screen as plain text, as tall as it needs to be: every device and every process, up to
/// [`ONCE_MAX_CELLS`] (then a last line says how many processes were left out). At most
/// [`terminal::MAX_WIDTH`] columns.
fn render_once(app: &mut App, width: u16) -> String {
    let width = width.clamp(1, terminal::MAX_WIDTH);
    if app.layout == LayoutMode::Auto {
        app.layout = if width >= 100 {
            LayoutMode::Full
        } else {
            LayoutMode::Compact
        };
    }
    let n = app.sample.as_ref().map_or(0, |s| s.snap.devices.len());
    let dev_h = if app.layout == LayoutMode::Full {
        let activity = app.sample.as_ref().map_or(0, |s| {
            s.snap
                .devices
                .iter()
                .filter(|d| ui::devices::has_activity(d))
                .count()
        });
        3 * n + 3 + activity
    } else {
        n + 1
    };
    let rows = app.rows().len();
    let wanted = 1 + dev_h + 1 + rows.max(1) + 1;
    let most = ONCE_MAX_CELLS / usize::from(width);
    let height = u16::try_from(wanted.min(most)).unwrap_or(u16::MAX);
    let text = if app.opts.color {
        render_styled(app, width, height)
    } else {
        render_text(app, width, height)
    };
    // The last line is the key hints, which mean nothing on paper.
    let mut lines: Vec<&str> = text.lines().collect();
    lines.pop();
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    let mut out = lines.join("\n");
    out.push('\n');
    if wanted > usize::from(height) {
        let left_out = wanted - usize::from(height);
        out.push_str(&format!(
            "... and {left_out} more processes, not shown: the printout is limited to \
             {height} lines at this width\n"
        ));
    }
    out
}

/// Draws `app` on a `width` x `height` screen and returns its text, trailing spaces trimmed.
fn render_text(app: &App, width: u16, height: u16) -> String {
    buffer_text(&drawn(width, height, |f| ui::draw(f, app)))
}

/// [`render_text`] with the screen's colours and attributes as ANSI sequences (`--once` in
/// colour).
fn render_styled(app: &App, width: u16, height: u16) -> String {
    buffer_ansi(&drawn(width, height, |f| ui::draw(f, app)))
}

/// What `draw` draws on a `width` x `height` screen held in memory (the test backend cannot
/// fail).
fn drawn(
    width: u16,
    height: u16,
    draw: impl FnOnce(&mut ratatui::Frame),
) -> ratatui::buffer::Buffer {
    let mut terminal = match Terminal::new(TestBackend::new(width, height)) {
        Ok(t) => t,
        Err(e) => match e {},
    };
    if let Err(e) = terminal.draw(draw) {
        match e {}
    }
    terminal.backend().buffer().clone()
}

/// A ratatui colour as an ANSI one; `None` for the terminal's own.
fn ansi_colour(c: ratatui::style::Color) -> Option<anstyle::Color> {
    use anstyle::AnsiColor as A;
    use ratatui::style::Color as C;
    Some(match c {
        C::Reset => return None,
        C::Black => A::Black.into(),
        C::Red => A::Red.into(),
        C::Green => A::Green.into(),
        C::Yellow => A::Yellow.into(),
        C::Blue => A::Blue.into(),
        C::Magenta => A::Magenta.into(),
        C::Cyan => A::Cyan.into(),
        C::Gray => A::White.into(),
        C::DarkGray => A::BrightBlack.into(),
        C::LightRed => A::BrightRed.into(),
        C::LightGreen => A::BrightGreen.into(),
        C::LightYellow => A::BrightYellow.into(),
        C::LightBlue => A::BrightBlue.into(),
        C::LightMagenta => A::BrightMagenta.into(),
        C::LightCyan => A::BrightCyan.into(),
        C::White => A::BrightWhite.into(),
        C::Indexed(i) => anstyle::Ansi256Color(i).into(),
        C::Rgb(r, g, b) => anstyle::RgbColor(r, g, b).into(),
    })
}

/// A cell's style as an ANSI one.
fn ansi_style(cell: &ratatui::buffer::Cell) -> anstyle::Style {
    use ratatui::style::Modifier as M;
    let m = cell.modifier;
    let mut effects = anstyle::Effects::new();
    for (on, effect) in [
        (M::BOLD, anstyle::Effects::BOLD),
        (M::DIM, anstyle::Effects::DIMMED),
        (M::ITALIC, anstyle::Effects::ITALIC),
        (M::UNDERLINED, anstyle::Effects::UNDERLINE),
        (M::REVERSED, anstyle::Effects::INVERT),
        (M::CROSSED_OUT, anstyle::Effects::STRIKETHROUGH),
    ] {
        if m.contains(on) {
            effects |= effect;
        }
    }
    anstyle::Style::new()
        .fg_color(ansi_colour(cell.fg))
        .bg_color(ansi_colour(cell.bg))
        .effects(effects)
}

/// [`buffer_text`] with each run of cells of one style in that style's ANSI sequence, reset at
/// its end; trailing blanks trimmed as there.
pub(crate) fn buffer_ansi(buf: &ratatui::buffer::Buffer) -> String {
    let area = buf.area;
    let mut out = String::new();
    for y in area.y..area.y + area.height {
        let cells: Vec<&ratatui::buffer::Cell> = (area.x..area.x + area.width)
            .filter_map(|x| buf.cell((x, y)))
            .collect();
        let used = cells
            .iter()
            .rposition(|c| !c.symbol().trim().is_empty())
            .map_or(0, |i| i + 1);
        let mut current = anstyle::Style::new();
        for cell in &cells[..used] {
            let style = ansi_style(cell);
            if style != current {
                out += &format!("{}{}", current.render_reset(), style.render());
                current = style;
            }
            out.push_str(cell.symbol());
        }
        out += &current.render_reset().to_string();
        out.push('\n');
    }
    out
}

pub(crate) fn buffer_text(buf: &ratatui::buffer::Buffer) -> String {
    let area = buf.area;
    let mut out = String::new();
    for y in area.y..area.y + area.height {
        let mut line = String::new();
        for x in area.x..area.x + area.width {
            if let Some(c) = buf.cell((x, y)) {
                line.push_str(c.symbol());
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn interactive(
    mut app: App,
    collector: gpu_processes::ProcessCollector,
    devices: Vec<Device>,
) -> Result<()> {
    let (interval, live) = (app.opts.interval, app.opts.live);
    event_loop::run(&mut app, |waker| {
        sampler::Sampler::start(collector, devices, interval, live, waker)
    })
}

impl event_loop::Viewer for App {
    type Sample = app::Refresh;

    fn quitting(&self) -> bool {
        self.quit
    }

    fn quit(&mut self) {
        self.quit = true;
    }

    fn push(&mut self, sample: app::Refresh) {
        self.push_sample(sample);
    }

    fn draw(&self, frame: &mut ratatui::Frame) {
        ui::draw(frame, self);
    }

    fn key(&mut self, key: KeyEvent, area: Rect) -> event_loop::After {
        match keys::key(self, key, area) {
            Effect::Suspend => event_loop::After::Suspend,
            effect => {
                apply(self, effect);
                event_loop::After::Redraw
            }
        }
    }

    fn mouse(&mut self, mouse: MouseEvent, area: Rect) {
        keys::mouse(self, mouse, area);
    }
}

/// This machine's sampler samples on its interval only.
impl event_loop::SamplerHandle for sampler::Sampler {
    fn refresh_now(&self) {}
}

/// The terminal the keys come from (as crossterm chooses it: stdin when it is a terminal, else
/// /dev/tty).
pub(crate) enum InputTty {
    Stdin,
    DevTty(std::fs::File),
}

impl InputTty {
    pub(crate) fn open() -> Result<InputTty> {
        use std::io::IsTerminal as _;
        if std::io::stdin().is_terminal() {
            return Ok(InputTty::Stdin);
        }
        let f = std::fs::File::open("/dev/tty").context("cannot open /dev/tty for the keys")?;
        Ok(InputTty::DevTty(f))
    }

    fn fd(&self) -> libc::c_int {
        use std::os::fd::AsRawFd as _;
        match self {
            InputTty::Stdin => libc::STDIN_FILENO,
            InputTty::DevTty(f) => f.as_raw_fd(),
        }
    }
}

/// What waiting for the terminal gave.
pub(crate) enum Input {
    /// Something to read (or a signal such as a resize interrupted the wait).
    Ready,
    /// Nothing within the time.
    Timeout,
    /// The terminal is gone (hung up or closed).
    HungUp,
}

/// Waits up to `timeout_ms` for input on the terminal.
pub(crate) fn input_ready(tty: &InputTty, wake: &wake::Wake, timeout_ms: i32) -> Input {
    let mut fds = [
        libc::pollfd {
            fd: tty.fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: wake.fd(),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    // SAFETY: two valid pollfds, for the duration of the call.
    let rc = unsafe { libc::poll(fds.as_mut_ptr(), 2, timeout_ms) };
    if rc < 0 {
        return Input::Ready;
    }
    if fds[1].revents & libc::POLLIN != 0 {
        wake.drain();
    }
    if fds[0].revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
        return Input::HungUp;
    }
    if rc == 0 {
        Input::Timeout
    } else {
        Input::Ready
    }
}

/// Carries out what an input asked for beyond the state change: signals and reading an
/// environment, both only for live processes.
fn apply(app: &mut App, effect: Effect) {
    match effect {
        Effect::None => {}
        Effect::OpenedDetail(pid) => {
            app.detail_env = if app.opts.live {
                signals::environment(pid)
            } else {
                Err("N/A (not recorded: this is a replay)".into())
            };
        }
        // The key handler asks the terminal to suspend; it never gets here.
        Effect::Suspend => {}
        Effect::Send(pending) => {
            let messages: Vec<String> = if app.opts.live {
                pending
                    .pids
                    .iter()
                    .map(|&pid| signals::send(pid, pending.sig, pending.shown.get(&pid)))
                    .collect()
            } else {
                // A replay's PIDs are another machine's: nothing is ever sent.
                vec![format!(
                    "{REPLAY_NO_SIGNALS}; {} not sent",
                    pending.sig.name()
                )]
            };
            app.tagged.clear();
            if matches!(app.screen, Screen::Detail(_)) {
                app.screen = Screen::Main;
            }
            app.status = Some(messages.join("; "));
        }
    }
}
