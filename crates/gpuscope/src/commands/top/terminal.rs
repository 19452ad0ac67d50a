//! The viewer's terminal: its modes are left on every way out, and its size is bounded.
//!
//! Entering sets raw mode, the alternate screen and mouse capture (ratatui hides the cursor
//! while drawing). Leaving undoes all four, and the same [`leave`] runs on every exit path: `q`,
//! the drop of [`Screen`] (an error or a panic unwinding), the panic hook, and the signal
//! thread's fallback when the UI does not get round to it within a second. Ctrl+Z and SIGTSTP
//! leave, stop the process, and SIGCONT enters again and redraws.
//!
//! The screen drawn into is at most [`MAX_WIDTH`] x [`MAX_HEIGHT`] cells, whatever size the
//! terminal reports: ratatui keeps two buffers of that area, so memory stays small (a
//! 10000x10000 terminal would otherwise cost gigabytes).

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::OnceLock;
use std::time::Duration;

use ratatui::backend::{Backend, CrosstermBackend};
use ratatui::crossterm::cursor::Show;
use ratatui::crossterm::event::{DisableMouseCapture, EnableMouseCapture};
use ratatui::crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use ratatui::crossterm::Command;
use ratatui::layout::{Rect, Size};
use ratatui::{Terminal, TerminalOptions, Viewport};

/// The widest screen drawn, in columns; a wider terminal shows it at the left.
pub const MAX_WIDTH: u16 = 1000;
/// The tallest screen drawn, in lines; a taller terminal shows it at the top.
pub const MAX_HEIGHT: u16 = 500;

/// The area drawn into on a terminal of `size`: at most [`MAX_WIDTH`] x [`MAX_HEIGHT`].
pub fn bounded(size: Size) -> Rect {
    Rect::new(0, 0, size.width.min(MAX_WIDTH), size.height.min(MAX_HEIGHT))
}

/// Resizes `terminal`'s (fixed) viewport to the bounded size of the terminal, when it changed,
/// and returns it.
pub fn fit<B: Backend>(terminal: &mut Terminal<B>) -> Result<Rect, B::Error> {
    let area = bounded(terminal.size()?);
    if terminal.get_frame().area() != area {
        terminal.resize(area)?;
    }
    Ok(area)
}

/// What leaving writes: mouse capture off, the cursor shown, the alternate screen left.
fn leave_sequence() -> &'static str {
    static SEQ: OnceLock<String> = OnceLock::new();
    SEQ.get_or_init(|| {
        let mut s = String::new();
        let _ = DisableMouseCapture.write_ansi(&mut s);
        let _ = Show.write_ansi(&mut s);
        let _ = LeaveAlternateScreen.write_ansi(&mut s);
        s
    })
}

/// Writes all of `bytes` to `fd`, straight to the descriptor: not through `Stdout`, whose lock a
/// stuck UI thread may hold.
fn write_fd(fd: libc::c_int, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: writes from a valid slice of `bytes.len()` bytes.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        let n = usize::try_from(n).unwrap_or(bytes.len()).min(bytes.len());
        if n == 0 {
            return;
        }
        bytes = &bytes[n..];
    }
}

/// Whether the viewer's modes are on: [`leave`] acts once however many paths call it.
static ENTERED: AtomicBool = AtomicBool::new(false);

/// Leaves every mode the viewer entered: mouse capture, hidden cursor, alternate screen, raw
/// mode; nothing when they are not on. Each step is tried whatever the others gave. `flush`:
/// first write out what the UI thread has buffered (not from the fallback, where the UI thread
/// may hold the lock).
pub fn leave(flush: bool) {
    if !ENTERED.swap(false, Ordering::SeqCst) {
        return;
    }
    if flush {
        let _ = std::io::stdout().flush();
    }
    write_fd(libc::STDOUT_FILENO, leave_sequence().as_bytes());
    let _ = disable_raw_mode();
}

fn enter() -> std::io::Result<()> {
    ENTERED.store(true, Ordering::SeqCst);
    enable_raw_mode()?;
    let mut out = std::io::stdout();
    ratatui::crossterm::execute!(out, EnterAlternateScreen, EnableMouseCapture)
}

/// The viewer's screen on the terminal; dropping it leaves the terminal as it was.
pub struct Screen {
    /// The terminal, drawn into a viewport of at most [`MAX_WIDTH`] x [`MAX_HEIGHT`].
    pub terminal: Terminal<CrosstermBackend<std::io::Stdout>>,
    suspended: bool,
}

impl Screen {
    /// Enters the viewer's modes, with a panic hook that leaves them before the message is
    /// printed.
    pub fn enter() -> std::io::Result<Screen> {
        // Built before anything can fail, so the fallback and the hook never allocate it late.
        let _ = leave_sequence();
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            leave(true);
            previous(info);
        }));
        let backend = CrosstermBackend::new(std::io::stdout());
        let area = bounded(backend.size()?);
        let mut screen = Screen {
            terminal: Terminal::with_options(
                backend,
                TerminalOptions {
                    viewport: Viewport::Fixed(area),
                },
            )?,
            suspended: false,
        };
        enter()?;
        screen.repaint()?;
        Ok(screen)
    }

    /// Clears the screen and forgets what was drawn, so the next draw paints everything. Not
    /// `Terminal::clear`, which asks the terminal where its cursor is and waits for the answer.
    fn repaint(&mut self) -> std::io::Result<()> {
        let area = bounded(self.terminal.size()?);
        self.terminal.resize(area)
    }

    /// True between [`Screen::suspend`] and [`Screen::reenter`].
    pub fn suspended(&self) -> bool {
        self.suspended
    }

    /// True when the modes were left by someone else (the panic hook, for a panic on another
    /// thread): the viewer must stop drawing.
    pub fn left_elsewhere(&self) -> bool {
        !self.suspended && !ENTERED.load(Ordering::SeqCst)
    }

    /// Ctrl+Z or SIGTSTP: leaves the terminal as it was and stops the process, as the shell
    /// expects; SIGCONT then arrives as [`Signal::Continue`] and [`Screen::reenter`] redraws.
    pub fn suspend(&mut self) {
        leave(true);
        self.suspended = true;
        // SIGTSTP's default action: stop (by SIGSTOP, as the handler replaced SIGTSTP's).
        let _ = signal_hook::low_level::emulate_default_handler(libc::SIGTSTP);
    }

    /// After SIGCONT: enters the modes again (the shell may have changed them while the process
    /// was stopped) and clears, so the next draw repaints everything.
    pub fn reenter(&mut self) -> std::io::Result<()> {
        leave(true);
        enter()?;
        self.suspended = false;
        self.repaint()
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        leave(true);
    }
}

/// A signal the viewer acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGINT, SIGTERM, SIGHUP or SIGQUIT: quit.
    Quit(libc::c_int),
    /// SIGTSTP: suspend.
    Stop,
    /// SIGCONT: the process was continued; redraw.
    Continue,
    /// SIGWINCH: the terminal changed size; the loop looks at its size again.
    Resize,
}

/// How long the UI has to leave after a quitting signal before the signal thread does it.
pub const FALLBACK: Duration = Duration::from_secs(1);

/// Starts the thread that receives SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP, SIGCONT and
/// SIGWINCH and passes them on, waking the event loop with `waker`. On a quitting signal, should the process still be running [`FALLBACK`]
/// later (the UI is stuck), the thread leaves the terminal's modes itself and ends the process
/// with status 128 + the signal.
pub(crate) fn watch_signals(waker: super::wake::Waker) -> std::io::Result<Receiver<Signal>> {
    use signal_hook::consts::{SIGCONT, SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGTSTP, SIGWINCH};
    let mut signals = signal_hook::iterator::Signals::new([
        SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP, SIGCONT, SIGWINCH,
    ])?;
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("gpuscope-signals".into())
        .spawn(move || {
            for sig in signals.forever() {
                let event = match sig {
                    SIGTSTP => Signal::Stop,
                    SIGCONT => Signal::Continue,
                    SIGWINCH => Signal::Resize,
                    other => Signal::Quit(other),
                };
                if tx.send(event).is_err() {
                    return;
                }
                waker.wake();
                if let Signal::Quit(sig) = event {
                    std::thread::sleep(FALLBACK);
                    leave(false);
                    // SAFETY: _exit ends the process at once; nothing here is left half-done
                    // that a normal exit would finish (the UI thread is stuck).
                    unsafe { libc::_exit(128 + sig) };
                }
            }
        })?;
    Ok(rx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::backend::{ClearType, WindowSize};
    use ratatui::buffer::Cell;
    use ratatui::layout::Position;

    #[test]
    fn leaving_undoes_every_mode() {
        let s = leave_sequence();
        // Mouse reporting off (every mode EnableMouseCapture turns on), cursor shown, main
        // screen back.
        for mode in [
            "?1000l", "?1002l", "?1003l", "?1006l", "?1015l", "?25h", "?1049l",
        ] {
            assert!(s.contains(&format!("\x1b[{mode}")), "{mode} missing: {s:?}");
        }
        // The alternate screen is left last, after the other modes it may keep per screen.
        assert!(s.ends_with("\x1b[?1049l"), "{s:?}");
    }

    /// A terminal that says it is 10000x10000 and keeps nothing drawn.
    struct Huge;

    impl Backend for Huge {
        type Error = std::io::Error;
        fn draw<'a, I>(&mut self, _content: I) -> std::io::Result<()>
        where
            I: Iterator<Item = (u16, u16, &'a Cell)>,
        {
            Ok(())
        }
        fn hide_cursor(&mut self) -> std::io::Result<()> {
            Ok(())
        }
        fn show_cursor(&mut self) -> std::io::Result<()> {
            Ok(())
        }
        fn get_cursor_position(&mut self) -> std::io::Result<Position> {
            Ok(Position::ORIGIN)
        }
        fn set_cursor_position<P: Into<Position>>(&mut self, _p: P) -> std::io::Result<()> {
            Ok(())
        }
        fn clear(&mut self) -> std::io::Result<()> {
            Ok(())
        }
        fn clear_region(&mut self, _c: ClearType) -> std::io::Result<()> {
            Ok(())
        }
        fn size(&self) -> std::io::Result<Size> {
            Ok(Size::new(10_000, 10_000))
        }
        fn window_size(&mut self) -> std::io::Result<WindowSize> {
            Ok(WindowSize {
                columns_rows: Size::new(10_000, 10_000),
                pixels: Size::new(0, 0),
            })
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    // Regression: a 10000x10000 terminal drove `top` past 5 GB (two buffers of 10^8 cells).
    #[test]
    fn a_huge_terminal_is_drawn_into_a_bounded_area() {
        let area = bounded(Size::new(10_000, 10_000));
        assert_eq!(area, Rect::new(0, 0, MAX_WIDTH, MAX_HEIGHT));
        assert_eq!(bounded(Size::new(80, 24)), Rect::new(0, 0, 80, 24));
        let mut terminal = Terminal::with_options(
            Huge,
            TerminalOptions {
                viewport: Viewport::Fixed(Rect::new(0, 0, 10, 10)),
            },
        )
        .unwrap();
        assert_eq!(fit(&mut terminal).unwrap(), area);
        let frame = terminal
            .draw(|f| {
                assert_eq!(f.area(), area);
                f.render_widget(ratatui::widgets::Paragraph::new("gpuscope"), f.area());
            })
            .unwrap();
        assert_eq!(frame.buffer.area, area);
        // Two buffers of at most 500,000 cells: tens of megabytes, not gigabytes.
        let bytes = 2 * area.area() as usize * std::mem::size_of::<Cell>();
        assert!(bytes < 100 << 20, "{bytes} bytes");
    }
}
