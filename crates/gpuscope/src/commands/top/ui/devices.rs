//! The devices panel: one line per device (compact), or two or three with bars (full).

use gpu_backend::BackendError;
use gpu_devices::text::Escaped;
use gpu_devices::units::bytes2human;
use gpu_devices::{DeviceId, DeviceSnapshot};
use ratatui::text::{Line, Span};

use super::text::{clip, fit};
use super::theme::{spans, IntoSpans, Theme, HOST_THRESH};
use crate::present::value::{na, whole};

/// Percent of `used` in `total`.
pub(super) fn pct(used: u64, total: u64) -> Option<f64> {
    (total > 0).then(|| used as f64 * 100.0 / total as f64)
}

pub(super) fn is_lost(d: &DeviceSnapshot) -> bool {
    d.errors.iter().any(|e| e.error == BackendError::GpuLost)
}

pub(super) fn label(id: DeviceId) -> String {
    match id {
        DeviceId::Gpu(_) => id.to_string(),
        DeviceId::Mig { .. } => format!(" {id}"),
    }
}

/// The device's label with `!` after it when it needs attention
/// (`DeviceSnapshot::attention`).
pub(super) fn marked_label(d: &DeviceSnapshot) -> String {
    if d.attention().is_empty() {
        label(d.id)
    } else {
        format!("{}!", label(d.id))
    }
}

/// The newest XID error since start, with its time and meaning: `"  XID 79 at ...: GPU has
/// fallen off the bus"`.
pub(super) fn last_xid(d: &DeviceSnapshot) -> Option<String> {
    let e = d
        .events
        .value()?
        .iter()
        .rev()
        .find(|e| e.kind == gpu_backend::EventKind::Xid)?;
    let meaning =
        gpu_backend::xid_description(e.data).map_or_else(String::new, |m| format!(": {m}"));
    Some(format!(
        "  XID {} at {}{meaning}",
        e.data,
        crate::present::time::event_time(e.timestamp_us)
    ))
}

/// Milliwatts as whole watts (`612W`), or N/A.
pub(super) fn watts(mw: Option<&u32>) -> String {
    na(mw.and_then(|&mw| whole(f64::from(mw) / 1000.0, "W")))
}

pub(super) fn pstate(d: &DeviceSnapshot) -> String {
    na(d.performance_state
        .value()
        .and_then(|&p| gpu_backend::PerformanceState::known(p))
        .map(|p| p.to_string()))
}

pub(super) fn mig_mode(d: &DeviceSnapshot) -> String {
    match (d.id, d.mig_mode.value()) {
        (DeviceId::Mig { .. }, _) => format!(
            "GI {} CI {}",
            na(d.gpu_instance_id.value()),
            na(d.compute_instance_id.value())
        ),
        (_, Some(m)) if m.current => "On".into(),
        (_, Some(_)) => "Off".into(),
        (_, None) => "N/A".into(),
    }
}

pub(super) fn device_compact(d: &DeviceSnapshot, theme: &Theme, width: u16) -> Line<'static> {
    let w = width as usize;
    let name_w = (w / 5).clamp(8, 28);
    let name = fit(d.name.value().map_or("N/A", String::as_str), name_w);
    let label = Span::styled(format!("{:<5}", marked_label(d)), theme.device_load(d));
    let head = format!("{:<name_w$} ", name);
    if is_lost(d) {
        return Line::from(vec![
            Span::raw(format!("{:<5}{head}", marked_label(d))),
            Span::styled("GPU is lost (fell off the bus)", theme.level(Some(100.0))),
        ]);
    }
    let temp = na(d.temperature.value().map(|t| format!("{t}C")));
    let power = format!(
        "{}/{}",
        watts(d.power_usage.value()),
        watts(d.enforced_power_limit.value())
    );
    let mem = d.memory.value().and_then(|m| pct(m.used, m.total));
    let util = d.utilization.value().map(|u| f64::from(u.gpu));
    let fixed = 5 + head.chars().count() + 5 + 4 + 12 + 5 + 5 + 6 + 5;
    let bar_w = w.saturating_sub(fixed) / 2;
    let bar_w = bar_w.max(3);
    let spans = spans![
        label,
        Span::raw(head),
        Span::raw(format!("{temp:>4} {:<3} {power:>11} ", pstate(d))),
        mem_and_util(theme, mem, format!(" {:>4} ", percent(mem)), util, bar_w, 4),
    ];
    clip(spans, w)
}

/// A device line's two bars, `bar_w` wide each: `MEM`, the memory bar and `mem_tail` (what
/// follows it), then `UTIL`, the utilization bar and its percentage in `pct_w` columns.
pub(super) fn mem_and_util(
    theme: &Theme,
    mem: Option<f64>,
    mem_tail: String,
    util: Option<f64>,
    bar_w: usize,
    pct_w: usize,
) -> Vec<Span<'static>> {
    spans![
        Span::raw("MEM "),
        theme.bar_spans(mem, bar_w, theme.mem_thresh),
        Span::raw(mem_tail),
        Span::raw("UTIL "),
        theme.bar_spans(util, bar_w, theme.gpu_thresh),
        Span::raw(format!(" {:>pct_w$}", percent(util))),
    ]
}

pub(super) fn percent(p: Option<f64>) -> String {
    na(p.map(|p| format!("{}%", p.round() as u64)))
}

pub(super) fn device_full(d: &DeviceSnapshot, theme: &Theme, width: u16) -> Vec<Line<'static>> {
    let w = width as usize;
    let name = Escaped(d.name.value().map_or("N/A", String::as_str));
    let bus = Escaped(d.pci.value().map_or("N/A", |p| p.bus_id.as_str()));
    let first = if is_lost(d) {
        Line::from(vec![
            Span::raw(format!("{:<5}{name}  Bus {bus}  ", label(d.id))),
            Span::styled("GPU is lost (fell off the bus)", theme.level(Some(100.0))),
        ])
    } else {
        let mut spans = vec![
            Span::styled(format!("{:<5}", marked_label(d)), theme.device_load(d)),
            Span::raw(format!(
                "{name}  Bus {bus}  Fan {}  Temp {}  {}  Pwr {} / {}  MIG {}",
                na(d.fan_speed.value().map(|f| format!("{f}%"))),
                na(d.temperature.value().map(|t| format!("{t}C"))),
                pstate(d),
                watts(d.power_usage.value()),
                watts(d.enforced_power_limit.value()),
                mig_mode(d),
            )),
        ];
        let attention = d.attention();
        if !attention.is_empty() {
            spans.push(Span::styled(
                format!("  ! {}", attention.join(", ")),
                theme.warn(),
            ));
        }
        if let Some(xid) = last_xid(d) {
            spans.push(Span::styled(xid, theme.warn()));
        }
        Line::from(spans)
    };
    let mem = d.memory.value();
    let mem_pct = mem.and_then(|m| pct(m.used, m.total));
    let util = d.utilization.value().map(|u| f64::from(u.gpu));
    let mem_text = mem.map_or_else(
        || "N/A".to_string(),
        |m| format!("{} / {}", bytes2human(m.used), bytes2human(m.total)),
    );
    let fixed = 5 + 4 + 1 + 19 + 1 + 5 + 2 + 5 + 1 + 5;
    let bar_w = (w.saturating_sub(fixed) / 2).max(3);
    let second = clip(
        spans![
            Span::raw("     "),
            mem_and_util(
                theme,
                mem_pct,
                format!(" {mem_text:>19} {:>5}  ", percent(mem_pct)),
                util,
                bar_w,
                5
            ),
        ],
        w,
    );
    if is_lost(d) {
        return vec![
            clip(first.spans, w),
            Line::raw("     no readings: NVML answers gpu_lost for this device"),
        ];
    }
    let mut lines = vec![clip(first.spans, w), second];
    if let Some(m) = d.gpm.value().filter(|_| has_activity(d)) {
        // What the SMs and tensor cores really did (GPM), beside UTIL's "a kernel ran".
        let sm = m.sm_activity;
        let tensor = m.tensor_activity;
        let fixed = 5 + 4 + 1 + 19 + 1 + 5 + 2 + 5 + 1 + 5;
        let bar_w = (w.saturating_sub(fixed) / 2).max(3);
        let occupancy = format!("occ {}", percent(m.sm_occupancy));
        lines.push(clip(
            spans![
                Span::raw("     SM  "),
                theme.bar_spans(sm, bar_w, HOST_THRESH),
                Span::raw(format!(" {occupancy:>19} {:>5}  ", percent(sm))),
                Span::raw("TENS "),
                theme.bar_spans(tensor, bar_w, HOST_THRESH),
                Span::raw(format!(" {:>5}", percent(tensor))),
            ],
            w,
        ));
    }
    lines
}

/// Whether the device's GPM answered with SM activity (Hopper and newer, after the first
/// refresh): then the full layout shows its activity bars.
pub(crate) fn has_activity(d: &DeviceSnapshot) -> bool {
    !is_lost(d) && d.gpm.value().is_some_and(|m| m.sm_activity.is_some())
}
