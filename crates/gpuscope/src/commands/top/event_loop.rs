//! The event loop of both viewers (this machine's and the fleet's): it takes what the sampler
//! thread sent, redraws when something changed, waits for the terminal, and hands keys and
//! clicks to the viewer. What the loop owns is the same for both: the terminal's modes (left on
//! every way out), the quitting signals, suspend and resume (SIGTSTP, Ctrl+Z, SIGCONT), the
//! terminal hanging up, and the sampler's channel.

use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::Duration;

use anyhow::{Context as _, Result};
use ratatui::crossterm::event::{self, Event, KeyEvent, MouseEvent};
use ratatui::layout::Rect;
use ratatui::Frame;

use super::wake::{self, Waker};
use super::{input_ready, terminal, Input, InputTty};

/// The longest the loop sleeps with nothing to do.
const IDLE_TIMEOUT_MS: i32 = 1000;
use crate::error::UsageError;

/// What a viewer does: the state behind the screen. The loop asks nothing else of it.
pub(crate) trait Viewer {
    /// What its sampler thread sends.
    type Sample;

    /// Whether it asked to end (`q`).
    fn quitting(&self) -> bool;

    /// A quitting signal arrived: end.
    fn quit(&mut self);

    /// Takes a sample from the sampler thread.
    fn push(&mut self, sample: Self::Sample);

    /// Draws the screen: a pure function of the state and the frame's size.
    fn draw(&self, frame: &mut Frame);

    /// Handles a key on a screen of `area`.
    fn key(&mut self, key: KeyEvent, area: Rect) -> After;

    /// Handles a click or a wheel turn on a screen of `area`.
    fn mouse(&mut self, mouse: MouseEvent, area: Rect);
}

/// What the loop does after a key, beyond the viewer's own change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum After {
    /// Nothing more (the screen is redrawn).
    Redraw,
    /// Ctrl+Z: leave the terminal as it was and stop, as the shell expects.
    Suspend,
    /// Ask the sampler for a sample now.
    RefreshNow,
}

/// The handle of a running sampler thread. Dropping it stops the thread without waiting for it
/// (it may be stuck in a driver call or a query).
pub(crate) trait SamplerHandle {
    /// Asks for a sample now, after the one in progress.
    fn refresh_now(&self);
}

/// Runs `app` on this terminal until it quits, a quitting signal arrives or the terminal hangs
/// up. `start_sampler` starts the sampler thread once the signal handlers are in place; the
/// loop fails when that thread stops. An error when stdout is not a terminal (a usage error:
/// `--once` prints the screen instead).
pub(crate) fn run<V: Viewer, S: SamplerHandle>(
    app: &mut V,
    start_sampler: impl FnOnce(Waker) -> std::io::Result<(S, Receiver<V::Sample>)>,
) -> Result<()> {
    use std::io::IsTerminal as _;
    if !std::io::stdout().is_terminal() {
        return Err(UsageError(
            "gpuscope top needs a terminal; use `gpuscope top --once` to print the screen once"
                .into(),
        )
        .into());
    }
    // SIGINT, SIGTERM, SIGHUP (the terminal closing) and SIGQUIT end the viewer cleanly;
    // SIGTSTP suspends it and SIGCONT resumes it. Should the UI not get round to a quitting
    // signal within a second, the signal thread leaves the terminal's modes and ends the process.
    let (wake, waker) = wake::pipe().context("cannot make the event loop's wake-up pipe")?;
    let signals =
        terminal::watch_signals(waker.clone()).context("cannot install the signal handlers")?;
    // Detached: quitting never waits for a sample in progress (a hung driver call).
    let (sampler, samples) = start_sampler(waker).context("cannot start the sampler thread")?;
    let tty = InputTty::open()?;
    let mut screen = terminal::Screen::enter().context("cannot set up the terminal")?;
    let mut dirty = true;
    let mut area = terminal::fit(&mut screen.terminal)?;
    while !app.quitting() {
        for sig in signals.try_iter() {
            match sig {
                terminal::Signal::Quit(_) => app.quit(),
                terminal::Signal::Stop => screen.suspend(),
                terminal::Signal::Continue => {
                    screen
                        .reenter()
                        .context("cannot set up the terminal again")?;
                    dirty = true;
                }
                // The size is looked at below.
                terminal::Signal::Resize => {}
            }
        }
        if app.quitting() || screen.left_elsewhere() {
            break;
        }
        loop {
            match samples.try_recv() {
                Ok(sample) => {
                    app.push(sample);
                    dirty = true;
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => anyhow::bail!("the sampler thread stopped"),
            }
        }
        // After a suspend, nothing is written until SIGCONT's event has entered the modes again.
        if !screen.suspended() {
            let now = terminal::fit(&mut screen.terminal)?;
            if now != area {
                area = now;
                dirty = true;
            }
            if dirty {
                screen.terminal.draw(|f| app.draw(f))?;
                dirty = false;
                // A test hook, in debug builds only: the panic exit path, tested in a terminal.
                #[cfg(debug_assertions)]
                if std::env::var_os("GPUSCOPE_TOP_TEST_PANIC").is_some() {
                    panic!(
                        "GPUSCOPE_TOP_TEST_PANIC is set: a panic, to test the terminal's restore"
                    );
                }
            }
        }
        // Asleep until a key, a sample or a signal (each wakes the pipe); the timeout only
        // bounds what a missed wake-up could cost.
        match input_ready(&tty, &wake, IDLE_TIMEOUT_MS) {
            Input::HungUp => break,
            Input::Timeout | Input::Ready => {}
        }
        // Only what is already there: crossterm is never left waiting on the terminal, whose
        // end it does not notice (it would read end-of-file forever).
        while event::poll(Duration::ZERO)? {
            match event::read()? {
                Event::Key(k) => match app.key(k, area) {
                    After::Redraw => {}
                    After::Suspend => screen.suspend(),
                    After::RefreshNow => sampler.refresh_now(),
                },
                Event::Mouse(m) => app.mouse(m, area),
                _ => {}
            }
            dirty = true;
        }
    }
    drop(screen);
    Ok(())
}
