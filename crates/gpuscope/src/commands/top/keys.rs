//! Keys and mouse clicks: each changes the viewer's state, and may ask for a signal to be sent.

use ratatui::crossterm::event::{
    KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};
use ratatui::layout::Rect;

use super::app::{App, Column, Filter, LayoutMode, PendingSignal, Screen, Sig, REPLAY_NO_SIGNALS};
use super::ui;

/// The keys, for the help screen and `--help`.
pub const KEYS: &[(&str, &str)] = &[
    ("q, Ctrl+C", "quit"),
    ("Ctrl+Z", "suspend (fg resumes)"),
    ("?", "this help (any key closes it)"),
    ("Up/Down, j/k", "move the selection"),
    (
        "PgUp/PgDn, Home/End",
        "move by a page, to the first or last row",
    ),
    (
        "Enter",
        "details of the selected process (graphs, environment); on a tree-view parent that \
         is not on a GPU, its host facts, environment and GPU children; Esc goes back",
    ),
    ("Space", "tag or untag the selected process"),
    ("U", "untag every process"),
    ("< >  (or , .)", "sort by the previous / next column"),
    ("r", "reverse the sort order"),
    ("click a header", "sort by that column (again: reverse)"),
    (
        "/",
        "filter: user: pid: type: gpu: pod: ns: container: or any text; Esc clears",
    ),
    ("t", "tree view of parent processes"),
    (
        "p",
        "group by pod: each pod's GPU memory and SM share per device",
    ),
    ("f", "device panel layout: auto, compact, full"),
    (
        "I  T  K",
        "send SIGINT / SIGTERM / SIGKILL to the tagged (or selected) processes, after y/n",
    ),
];

/// What the event loop must do after an event, beyond redrawing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Nothing more.
    None,
    /// Send the confirmed signal.
    Send(PendingSignal),
    /// The detail screen of this PID opened: read its environment.
    OpenedDetail(u32),
    /// Ctrl+Z: suspend the viewer (leave the terminal as it was, stop until continued).
    Suspend,
}

/// Handles one key press on a terminal of size `area`.
pub fn key(app: &mut App, key: KeyEvent, area: Rect) -> Effect {
    if key.kind == KeyEventKind::Release {
        return Effect::None;
    }
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    if ctrl && matches!(key.code, KeyCode::Char('c') | KeyCode::Char('d')) {
        app.quit = true;
        return Effect::None;
    }
    // Raw mode turns Ctrl+Z into a key; it still suspends, as the shell's users expect.
    if ctrl && key.code == KeyCode::Char('z') {
        return Effect::Suspend;
    }
    if let Some(pending) = app.confirm.take() {
        return match key.code {
            KeyCode::Char('y') | KeyCode::Char('Y') => Effect::Send(pending),
            _ => {
                app.status = Some(format!("{} cancelled", pending.sig.name()));
                Effect::None
            }
        };
    }
    if let Some(input) = &mut app.filter_input {
        match key.code {
            KeyCode::Esc => {
                app.filter_input = None;
                app.filter = Filter::default();
                app.status = Some("filter cleared".into());
            }
            KeyCode::Enter => {
                let text = input.clone();
                app.filter_input = None;
                match Filter::parse(&text) {
                    Ok(f) => {
                        app.filter = f;
                        app.status = None;
                        let rows = app.rows();
                        app.select_index(&rows, 0);
                    }
                    Err(e) => app.status = Some(format!("filter not applied: {e}")),
                }
            }
            KeyCode::Backspace => {
                input.pop();
            }
            KeyCode::Char(c) => input.push(c),
            _ => {}
        }
        return Effect::None;
    }
    match app.screen {
        Screen::Help => {
            if key.code == KeyCode::Char('q') {
                app.quit = true;
            }
            app.screen = Screen::Main;
            return Effect::None;
        }
        Screen::Detail(_) => {
            match key.code {
                KeyCode::Char('q') => app.quit = true,
                KeyCode::Esc | KeyCode::Enter | KeyCode::Backspace | KeyCode::Left => {
                    app.screen = Screen::Main
                }
                KeyCode::Char(c @ ('I' | 'T' | 'K')) => ask_signal(app, c),
                _ => {}
            }
            return Effect::None;
        }
        Screen::Main => {}
    }
    app.status = None;
    let rows = app.rows();
    let cursor = app.cursor(&rows);
    let page = (ui::layout::areas(app, area).table.height as usize)
        .saturating_sub(1)
        .max(1);
    match key.code {
        KeyCode::Char('q') => app.quit = true,
        KeyCode::Esc if !app.filter.is_empty() => {
            app.filter = Filter::default();
            app.status = Some("filter cleared".into());
        }
        KeyCode::Char('?') | KeyCode::Char('h') | KeyCode::F(1) => app.screen = Screen::Help,
        KeyCode::Up | KeyCode::Char('k') => app.select_index(&rows, cursor.saturating_sub(1)),
        KeyCode::Down | KeyCode::Char('j') => app.select_index(&rows, cursor + 1),
        KeyCode::PageUp => app.select_index(&rows, cursor.saturating_sub(page)),
        KeyCode::PageDown => app.select_index(&rows, cursor + page),
        KeyCode::Home => app.select_index(&rows, 0),
        KeyCode::End => app.select_index(&rows, usize::MAX),
        KeyCode::Enter => {
            if let Some(r) = rows.get(cursor) {
                app.select_index(&rows, cursor);
                app.screen = Screen::Detail(r.pid);
                return Effect::OpenedDetail(r.pid);
            }
        }
        KeyCode::Char(' ') => {
            if let Some(r) = rows.get(cursor) {
                if !app.tagged.remove(&r.pid) {
                    app.tagged.insert(r.pid);
                }
                app.select_index(&rows, cursor + 1);
            }
        }
        KeyCode::Char('U') => app.tagged.clear(),
        KeyCode::Char('<') | KeyCode::Char(',') => shift_sort(app, -1),
        KeyCode::Char('>') | KeyCode::Char('.') => shift_sort(app, 1),
        KeyCode::Char('r') => app.descending = !app.descending,
        KeyCode::Char('/') => app.filter_input = Some(app.filter.text.clone()),
        KeyCode::Char('t') => app.tree = !app.tree,
        KeyCode::Char('p') => app.by_pod = !app.by_pod,
        KeyCode::Char('f') => {
            app.layout = match app.layout {
                LayoutMode::Auto => LayoutMode::Compact,
                LayoutMode::Compact => LayoutMode::Full,
                LayoutMode::Full => LayoutMode::Auto,
            };
            app.status = Some(format!("layout: {:?}", app.layout).to_lowercase());
        }
        KeyCode::Char(c @ ('I' | 'T' | 'K')) => ask_signal(app, c),
        _ => {}
    }
    Effect::None
}

fn shift_sort(app: &mut App, by: isize) {
    // The columns on screen: POD only when some process runs in a container.
    let shown: Vec<Column> = Column::ALL
        .into_iter()
        .filter(|&c| c != Column::Pod || app.shows_pods())
        .collect();
    let n = shown.len() as isize;
    let i = shown.iter().position(|&c| c == app.sort).unwrap_or(0) as isize;
    let col = shown[(i + by).rem_euclid(n) as usize];
    // Moving to a column starts its natural order; the same column again would reverse it.
    if col != app.sort {
        app.sort_by(col);
    }
}

fn ask_signal(app: &mut App, c: char) {
    let sig = match c {
        'I' => Sig::Int,
        'T' => Sig::Term,
        _ => Sig::Kill,
    };
    if !app.opts.live {
        app.status = Some(format!("{REPLAY_NO_SIGNALS}; {} not sent", sig.name()));
        return;
    }
    if app.opts.readonly {
        app.status = Some(format!(
            "read-only mode (--readonly): {} is off",
            sig.name()
        ));
        return;
    }
    let pids = match app.screen {
        Screen::Detail(pid) => vec![pid],
        _ => app.signal_targets(),
    };
    if pids.is_empty() {
        app.status = Some("no process selected".into());
        return;
    }
    // What the screen shows now is what the user chose: each target is checked against it
    // when the signal is sent.
    let shown = app
        .sample
        .as_ref()
        .map(|s| {
            pids.iter()
                .filter_map(|pid| s.identities.get(pid).map(|id| (*pid, *id)))
                .collect()
        })
        .unwrap_or_default();
    app.confirm = Some(PendingSignal { sig, pids, shown });
}

/// Handles a mouse event: a left click on a column header sorts by it; a click on a row selects
/// it.
pub fn mouse(app: &mut App, ev: MouseEvent, area: Rect) {
    if app.screen != Screen::Main || app.confirm.is_some() {
        return;
    }
    let MouseEventKind::Down(MouseButton::Left) = ev.kind else {
        return;
    };
    let table = ui::layout::areas(app, area).table;
    if table.height == 0 || ev.row < table.y || ev.row >= table.y + table.height {
        return;
    }
    if ev.row == table.y {
        let x = ev.column.saturating_sub(table.x);
        if let Some(&(col, _, _)) = ui::layout::columns(table.width, app.shows_pods())
            .iter()
            .find(|&&(_, cx, w)| x >= cx && x < cx.saturating_add(w))
        {
            app.sort_by(col);
        }
        return;
    }
    let rows = app.rows();
    let body_h = table.height.saturating_sub(1) as usize;
    let offset = (app.cursor(&rows) + 1).saturating_sub(body_h);
    let i = offset + (ev.row - table.y - 1) as usize;
    if i < rows.len() {
        app.select_index(&rows, i);
    }
}
