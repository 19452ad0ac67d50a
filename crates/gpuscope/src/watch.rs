//! A view of this machine printed once, or again every interval (`-i`) until Ctrl+C: shared by
//! `snapshot` and `stat`.

use crate::present::json::{take_with_raw, SnapshotView};

/// Prints what `render` makes of a fresh snapshot: once (then ends the one-shot source), or,
/// with `every`, again each interval until Ctrl+C (nothing to restore: the terminal is never
/// put in raw mode), clearing a terminal's screen first when `clear`. `keep` narrows each
/// snapshot first (`--only`).
pub fn print_each(
    src: crate::source::Source,
    every: Option<std::time::Duration>,
    clear: bool,
    keep: impl Fn(&mut SnapshotView) -> Result<(), crate::error::UsageError>,
    render: impl Fn(&SnapshotView, &[gpu_devices::DeviceSnapshot]) -> anyhow::Result<String>,
) -> anyhow::Result<()> {
    let take = || {
        take_with_raw(
            &src.collector,
            src.label.clone(),
            &src.collector.context().all_devices(),
        )
    };
    let Some(every) = every else {
        let (mut view, raw) = take();
        keep(&mut view)?;
        let step = gpu_backend::timeline::step(gpu_backend::timeline::PRINT);
        let written =
            render(&view, &raw.devices).and_then(|text| crate::output::write_stdout(&text));
        drop(step);
        src.end_one_shot();
        return written;
    };
    loop {
        let started = std::time::Instant::now();
        let (mut view, raw) = take();
        keep(&mut view)?;
        let text = render(&view, &raw.devices)?;
        crate::output::write_stdout(&if clear {
            format!("\x1b[H\x1b[2J{text}")
        } else {
            text
        })?;
        std::thread::sleep(every.saturating_sub(started.elapsed()));
    }
}
