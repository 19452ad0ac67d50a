//! Tests of the viewer over fixtures: insta snapshots of its screens drawn on ratatui's
//! TestBackend, and checks of sorting, filtering, the tree, tags, clicks and signals against
//! what the fixtures hold.

use std::sync::Arc;

use gpu_backend::{Fixture, ReplayBackend, ReplayClock};
use gpu_processes::ProcessCollector;
use ratatui::crossterm::event::{
    KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};
use ratatui::layout::Rect;

use super::app::{
    App, Column, LayoutMode, Options, PendingSignal, ProcIdentity, Ring, Screen, Sig, HISTORY_LEN,
};
use super::input::{self, Effect};
use super::{render_text, sampler, signals};

fn fixture_path(name: &str) -> String {
    format!("{}/../../fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"))
}

/// A viewer that has seen `frames` of the fixture `name`, one sample per frame.
fn app_over(name: &str, frames: std::ops::RangeInclusive<usize>) -> App {
    let fixture = Fixture::load(fixture_path(name)).unwrap();
    let backend = Arc::new(ReplayBackend::with_clock(
        fixture,
        ReplayClock::Manual(0.into()),
    ));
    let collector = ProcessCollector::from_replay(backend.clone()).unwrap();
    let ctx = collector.context();
    let devices = ctx.all_devices();
    let mut app = App::new(Options {
        source_label: format!("fixture {name}"),
        live: false,
        readonly: false,
        color: false,
        ascii: false,
        interval: std::time::Duration::from_secs(1),
        driver_version: ctx.driver_version().into_option(),
        cuda_version: ctx.cuda_driver_version().into_option(),
    });
    for f in frames {
        backend.set_frame(f);
        app.push_sample(sampler::sample(&collector, &devices, false));
    }
    app
}

fn press(app: &mut App, code: KeyCode) -> Effect {
    input::key(
        app,
        KeyEvent::new(code, KeyModifiers::NONE),
        Rect::new(0, 0, 120, 40),
    )
}

fn type_text(app: &mut App, text: &str) {
    for c in text.chars() {
        press(app, KeyCode::Char(c));
    }
}

fn shown_pids(app: &App) -> Vec<u32> {
    app.rows().iter().map(|r| r.pid).collect()
}

#[test]
fn screen_8gpu_wide() {
    let app = app_over("h100-sxm-8gpu", 0..=9);
    insta::assert_snapshot!(render_text(&app, 160, 50));
}

#[test]
fn screen_8gpu_narrow_80x24() {
    let app = app_over("h100-sxm-8gpu", 0..=9);
    insta::assert_snapshot!(render_text(&app, 80, 24));
}

#[test]
fn screen_8gpu_narrow_ascii() {
    let mut app = app_over("h100-sxm-8gpu", 0..=9);
    app.opts.ascii = true;
    let text = render_text(&app, 80, 24);
    assert!(text.is_ascii(), "{text}");
    insta::assert_snapshot!(text);
}

#[test]
fn screen_mig() {
    let app = app_over("h100-mig", 0..=20);
    insta::assert_snapshot!(render_text(&app, 120, 36));
}

#[test]
fn screen_wddm_na() {
    let app = app_over("windows-wddm", 0..=20);
    insta::assert_snapshot!(render_text(&app, 120, 36));
}

#[test]
fn screen_lost_gpu() {
    let app = app_over("gpu-lost", 10..=20);
    let text = render_text(&app, 120, 36);
    assert!(text.contains("2    Tesla T4"), "{text}");
    assert!(text.contains("GPU is lost"), "{text}");
    insta::assert_snapshot!(text);
}

/// The device row of GPU `gpu` in a rendered main screen (its first line, label first).
fn device_row(text: &str, gpu: u32) -> String {
    text.lines()
        .map(|l| l.trim_start_matches('│').trim_start())
        .find(|l| {
            l.contains("NVIDIA H100")
                && l.split_whitespace().next().map(|w| w.trim_end_matches('!'))
                    == Some(gpu.to_string().as_str())
        })
        .unwrap_or_else(|| panic!("no row for GPU {gpu}: {text}"))
        .to_string()
}

/// The 8-GPU recording at frame 25: GPU 2 (XID 79 at frame 14), GPU 3 (HW slowdown) and GPU 5
/// (waiting for a row remap after XID 63) are marked `!` with their reasons, GPU 2 with its XID's
/// time and meaning; the others are not. Before frame 14 GPU 2 is not marked.
#[test]
fn gpus_that_need_attention_are_marked_with_their_reasons() {
    let app = app_over("h100-sxm-8gpu", 10..=13);
    let text = render_text(&app, 220, 50);
    assert!(!device_row(&text, 2).contains('!'), "{text}");

    let app = app_over("h100-sxm-8gpu", 16..=25);
    let text = render_text(&app, 220, 50);
    let gpu2 = device_row(&text, 2);
    assert!(gpu2.starts_with("2!"), "{text}");
    assert!(gpu2.contains("! xid_79"), "{text}");
    assert!(
        gpu2.contains("XID 79 at 2026-11-01T10:00:13.588000Z: GPU has fallen off the bus"),
        "{text}"
    );
    assert!(device_row(&text, 3).contains("! hw_slowdown"), "{text}");
    assert!(
        device_row(&text, 5).contains("! row_remap_pending, xid_63"),
        "{text}"
    );
    for gpu in [0, 1, 4, 6, 7] {
        assert!(!device_row(&text, gpu).contains('!'), "GPU {gpu}: {text}");
    }
}

#[test]
fn screen_tree() {
    let mut app = app_over("geforce-desktop", 0..=20);
    press(&mut app, KeyCode::Char('t'));
    insta::assert_snapshot!(render_text(&app, 120, 30));
}

#[test]
fn screen_help() {
    let mut app = app_over("h100-sxm-8gpu", 0..=1);
    press(&mut app, KeyCode::Char('?'));
    assert_eq!(app.screen, Screen::Help);
    insta::assert_snapshot!(render_text(&app, 100, 24));
    press(&mut app, KeyCode::Char('x'));
    assert_eq!(app.screen, Screen::Main);
}

#[test]
fn screen_detail_of_a_process() {
    let mut app = app_over("h100-sxm-8gpu", 0..=12);
    press(&mut app, KeyCode::Char('/'));
    type_text(&mut app, "pid:40117");
    press(&mut app, KeyCode::Enter);
    let effect = press(&mut app, KeyCode::Enter);
    assert_eq!(effect, Effect::OpenedDetail(40117));
    assert_eq!(app.screen, Screen::Detail(40117));
    app.detail_env = Err("N/A (not recorded: this is a replay)".into());
    insta::assert_snapshot!(render_text(&app, 120, 30));
    press(&mut app, KeyCode::Esc);
    assert_eq!(app.screen, Screen::Main);
}

#[test]
fn screen_confirm_signal() {
    let mut app = app_over("h100-sxm-8gpu", 0..=3);
    // The fixture's processes stand for live ones: a replay asks nothing.
    app.opts.live = true;
    press(&mut app, KeyCode::Char(' '));
    press(&mut app, KeyCode::Char(' '));
    press(&mut app, KeyCode::Char('T'));
    insta::assert_snapshot!(render_text(&app, 100, 30));
}

#[test]
fn sorting_by_each_column_orders_the_rows() {
    let mut app = app_over("h100-sxm-8gpu", 0..=5);
    let procs = app.sample.as_ref().unwrap().snap.processes.clone();
    // By PID, ascending: the fixture's PIDs in order.
    app.sort = Column::Pid;
    app.descending = false;
    let mut pids: Vec<u32> = procs.iter().map(|p| p.pid).collect();
    pids.sort();
    assert_eq!(shown_pids(&app), pids);
    // The default: GPU memory, largest first.
    app.sort = Column::GpuMem;
    app.descending = true;
    let mem: Vec<u64> = app
        .rows()
        .iter()
        .map(|r| procs[r.process.unwrap()].gpu_memory.unwrap())
        .collect();
    assert!(mem.windows(2).all(|w| w[0] >= w[1]), "{mem:?}");
    assert_eq!(
        mem[0],
        procs.iter().filter_map(|p| p.gpu_memory).max().unwrap()
    );
    // `>` moves to the next column; `r` reverses.
    press(&mut app, KeyCode::Char('>'));
    assert_eq!(app.sort, Column::Sm);
    press(&mut app, KeyCode::Char('r'));
    let sm: Vec<u32> = app
        .rows()
        .iter()
        .map(|r| procs[r.process.unwrap()].utilization.sm.unwrap_or(0))
        .collect();
    assert!(sm.windows(2).all(|w| w[0] <= w[1]), "{sm:?}");
}

#[test]
fn clicking_a_header_sorts_by_it() {
    let mut app = app_over("h100-sxm-8gpu", 0..=5);
    let area = Rect::new(0, 0, 160, 50);
    let text = render_text(&app, 160, 50);
    let (row, line) = text
        .lines()
        .enumerate()
        .find(|(_, l)| l.contains("USER") && l.contains("COMMAND"))
        .unwrap();
    let col = line.find("USER").unwrap() as u16;
    let click = |app: &mut App| {
        input::mouse(
            app,
            MouseEvent {
                kind: MouseEventKind::Down(MouseButton::Left),
                column: col + 1,
                row: row as u16,
                modifiers: KeyModifiers::NONE,
            },
            area,
        )
    };
    click(&mut app);
    assert_eq!((app.sort, app.descending), (Column::User, false));
    let users: Vec<String> = app
        .rows()
        .iter()
        .map(|r| {
            let p = &app.sample.as_ref().unwrap().snap.processes[r.process.unwrap()];
            p.host.user.clone().unwrap()
        })
        .collect();
    assert!(users.windows(2).all(|w| w[0] <= w[1]), "{users:?}");
    assert!(render_text(&app, 160, 50).contains("USER▲"));
    click(&mut app);
    assert_eq!((app.sort, app.descending), (Column::User, true));
}

#[test]
fn filters_by_user_pid_type_and_text() {
    let mut app = app_over("geforce-desktop", 0..=20);
    let procs = app.sample.as_ref().unwrap().snap.processes.clone();
    let count = |pred: &dyn Fn(&gpu_processes::GpuProcess) -> bool| {
        procs.iter().filter(|p| pred(p)).count()
    };
    press(&mut app, KeyCode::Char('/'));
    type_text(&mut app, "type:G");
    press(&mut app, KeyCode::Enter);
    assert_eq!(app.rows().len(), count(&|p| p.kind.as_str() == "G"));
    assert!(!app.rows().is_empty());
    press(&mut app, KeyCode::Char('/'));
    press(&mut app, KeyCode::Esc);
    assert_eq!(app.rows().len(), procs.len());
    let blender = procs
        .iter()
        .find(|p| p.host.name.as_deref() == Some("blender"))
        .unwrap();
    for filter in [
        format!("pid:{}", blender.pid),
        "BLENDER".to_string(),
        format!("user:{}", blender.host.user.clone().unwrap()),
    ] {
        press(&mut app, KeyCode::Char('/'));
        // The prompt starts with the filter in force; clear it.
        for _ in 0..40 {
            press(&mut app, KeyCode::Backspace);
        }
        type_text(&mut app, &filter);
        press(&mut app, KeyCode::Enter);
        let want = procs.iter().filter(|p| app.filter.matches(p)).count();
        assert!(shown_pids(&app).contains(&blender.pid), "{filter}");
        assert_eq!(app.rows().len(), want, "{filter}");
    }
    // A bad PID is a message, and the filter in force stays.
    press(&mut app, KeyCode::Char('/'));
    type_text(&mut app, " pid:abc");
    press(&mut app, KeyCode::Enter);
    assert!(app.status.as_deref().unwrap().contains("pid:abc"));
}

#[test]
fn tree_puts_children_under_their_parents() {
    let mut app = app_over("geforce-desktop", 0..=20);
    press(&mut app, KeyCode::Char('t'));
    let rows = app.rows();
    let procs = &app.sample.as_ref().unwrap().snap.processes;
    let blender = rows
        .iter()
        .position(|r| {
            r.process
                .is_some_and(|i| procs[i].host.name.as_deref() == Some("blender"))
        })
        .unwrap();
    let parent_pid = procs[rows[blender].process.unwrap()].host.ppid.unwrap();
    let parent = rows[..blender]
        .iter()
        .rposition(|r| r.depth < rows[blender].depth)
        .unwrap();
    assert_eq!(rows[parent].pid, parent_pid);
    assert_eq!(rows[blender].depth, rows[parent].depth + 1);

    // On the 8-GPU box, ranks whose launcher is not on a GPU sit under a plain row for it.
    let mut app = app_over("h100-sxm-8gpu", 0..=3);
    press(&mut app, KeyCode::Char('t'));
    let rows = app.rows();
    let launcher = rows
        .iter()
        .position(|r| r.process.is_none() && r.pid == 31000)
        .unwrap();
    let kids = rows[launcher + 1..]
        .iter()
        .take_while(|r| r.depth > 0)
        .count();
    let procs = &app.sample.as_ref().unwrap().snap.processes;
    assert_eq!(
        kids,
        procs.iter().filter(|p| p.host.ppid == Some(31000)).count()
    );
}

#[test]
fn tags_choose_the_signal_targets_and_readonly_turns_signals_off() {
    let mut app = app_over("h100-sxm-8gpu", 0..=3);
    // The fixture's processes stand for live ones.
    app.opts.live = true;
    let first_two: Vec<u32> = shown_pids(&app)[..2].to_vec();
    press(&mut app, KeyCode::Char(' '));
    press(&mut app, KeyCode::Char(' '));
    press(&mut app, KeyCode::Char('K'));
    let pending = app.confirm.clone().unwrap();
    assert_eq!(pending.sig, Sig::Kill);
    let mut want = first_two.clone();
    want.sort();
    assert_eq!(pending.pids, want);
    // Anything but y cancels.
    assert_eq!(press(&mut app, KeyCode::Char('n')), Effect::None);
    assert!(app.confirm.is_none());
    press(&mut app, KeyCode::Char('T'));
    assert!(matches!(
        press(&mut app, KeyCode::Char('y')),
        Effect::Send(p) if p.sig == Sig::Term && p.pids == want
    ));
    // Untagged: the selected process.
    press(&mut app, KeyCode::Char('U'));
    press(&mut app, KeyCode::Home);
    press(&mut app, KeyCode::Char('I'));
    assert_eq!(app.confirm.clone().unwrap().pids, vec![shown_pids(&app)[0]]);
    press(&mut app, KeyCode::Esc);

    app.opts.readonly = true;
    press(&mut app, KeyCode::Char('K'));
    assert!(app.confirm.is_none());
    assert!(app.status.as_deref().unwrap().contains("read-only"));
}

#[test]
fn ctrl_c_and_q_quit() {
    let mut app = app_over("old-driver", 0..=0);
    input::key(
        &mut app,
        KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL),
        Rect::new(0, 0, 80, 24),
    );
    assert!(app.quit);
    let mut app = app_over("old-driver", 0..=0);
    press(&mut app, KeyCode::Char('q'));
    assert!(app.quit);
}

#[test]
fn histories_are_bounded() {
    let mut ring = Ring::default();
    for i in 0..HISTORY_LEN + 25 {
        ring.push(Some(i as f64));
    }
    assert_eq!(ring.len(), HISTORY_LEN);
    assert_eq!(ring.last(1).next(), Some(Some((HISTORY_LEN + 24) as f64)));
    // Device histories grow one reading per sample.
    let app = app_over("gpu-lost", 0..=20);
    let h = &app.device_history[&gpu_devices::DeviceId::Gpu(2)];
    assert_eq!(h.gpu.len(), 21);
    // After the GPU is lost (frame 15) its readings are N/A.
    assert_eq!(h.gpu.last(1).next(), Some(None));
}

/// A `sleep 1000` child, killed if the test ends early.
struct Child(std::process::Child);

impl Child {
    fn spawn() -> Child {
        let child = std::process::Command::new("sleep")
            .arg("1000")
            .spawn()
            .unwrap();
        let pid = child.id();
        // Right after exec the kernel may not have set the new command line yet.
        for _ in 0..200 {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            if cmdline.starts_with(b"sleep\0") {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        Child(child)
    }

    fn alive(&mut self) -> bool {
        self.0.try_wait().unwrap().is_none()
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

// Regression: `top --fixture crafted.json` listing a local PID with its command line, then K
// and y, killed the real process: a replay's guard compared only the command line.
#[test]
fn a_replay_never_signals_and_says_why() {
    let mut child = Child::spawn();
    let pid = child.0.id();
    let mut app = app_over("h100-sxm-8gpu", 0..=3);
    press(&mut app, KeyCode::Char('K'));
    assert!(app.confirm.is_none(), "no confirmation is even asked");
    let status = app.status.clone().unwrap();
    assert!(
        status.contains("signals are off: this is a replay"),
        "{status}"
    );
    assert!(status.contains("SIGKILL not sent"), "{status}");
    // The hints and the help screen say so too.
    press(&mut app, KeyCode::Down);
    let text = render_text(&app, 160, 50);
    assert!(text.contains("(signals off: a replay)"), "{text}");
    assert!(!text.contains("I/T/K signal"), "{text}");
    press(&mut app, KeyCode::Char('?'));
    let help = render_text(&app, 160, 40);
    assert!(
        help.contains("off: this is a replay of a recording"),
        "{help}"
    );
    press(&mut app, KeyCode::Char('x'));
    // Even a send that reached the event loop goes nowhere in a replay.
    let pending = PendingSignal {
        sig: Sig::Kill,
        pids: vec![pid],
        shown: [(pid, signals::identity(pid).unwrap())].into(),
    };
    super::apply(&mut app, Effect::Send(pending));
    assert!(child.alive(), "the local process survives");
    assert!(app.status.clone().unwrap().contains("this is a replay"));
    // A replay's samples never read this machine's processes.
    assert!(app.sample.as_ref().unwrap().identities.is_empty());
}

#[test]
fn live_signals_go_only_to_the_process_the_screen_showed() {
    let mut child = Child::spawn();
    let pid = child.0.id();
    let shown = signals::identity(pid).expect("the child can be read");
    assert_eq!(shown.uid, unsafe { libc::geteuid() });
    // A PID that now names a process started at another time (its PID reused) is refused.
    let other_start = ProcIdentity {
        start_ticks: shown.start_ticks + 1,
        ..shown
    };
    let msg = signals::send(pid, Sig::Term, Some(&other_start));
    assert!(msg.contains("is now another process"), "{msg}");
    assert!(child.alive());
    // So is one owned by another user than the one shown.
    let other_owner = ProcIdentity {
        uid: shown.uid.wrapping_add(1),
        ..shown
    };
    let msg = signals::send(pid, Sig::Term, Some(&other_owner));
    assert!(msg.contains("another user"), "{msg}");
    assert!(child.alive());
    // And one whose identity could not be read when it was shown.
    let msg = signals::send(pid, Sig::Term, None);
    assert!(msg.contains("SIGTERM not sent"), "{msg}");
    assert!(child.alive());
    // The process shown is signalled.
    let msg = signals::send(pid, Sig::Term, Some(&shown));
    assert_eq!(msg, format!("SIGTERM sent to PID {pid}"));
    let status = child.0.wait().unwrap();
    use std::os::unix::process::ExitStatusExt as _;
    assert_eq!(status.signal(), Some(libc::SIGTERM));
    // A PID above any kernel's pid_max does not exist: a message, not an error.
    let msg = signals::send(2_000_000_000, Sig::Kill, Some(&shown));
    assert!(msg.contains("no such process"), "{msg}");
}

#[test]
fn the_confirmation_keeps_who_the_screen_showed() {
    let mut child = Child::spawn();
    let pid = child.0.id();
    let mut app = app_over("h100-sxm-8gpu", 0..=0);
    app.opts.live = true;
    let id = signals::identity(pid).unwrap();
    let sample = app.sample.as_mut().unwrap();
    let mut p = sample.snap.processes[0].clone();
    p.pid = pid;
    sample.snap.processes = vec![p];
    sample.identities = [(pid, id)].into();
    press(&mut app, KeyCode::Home);
    press(&mut app, KeyCode::Char('T'));
    let pending = app.confirm.clone().unwrap();
    assert_eq!(pending.pids, vec![pid]);
    assert_eq!(pending.shown.get(&pid), Some(&id));
    // A newer sample in which the PID is someone else does not change what was confirmed.
    app.sample.as_mut().unwrap().identities = [(
        pid,
        ProcIdentity {
            start_ticks: id.start_ticks + 7,
            ..id
        },
    )]
    .into();
    let Effect::Send(pending) = press(&mut app, KeyCode::Char('y')) else {
        panic!("y sends");
    };
    assert_eq!(pending.shown.get(&pid), Some(&id));
    super::apply(&mut app, Effect::Send(pending));
    assert_eq!(
        app.status.as_deref(),
        Some(format!("SIGTERM sent to PID {pid}").as_str())
    );
    let status = child.0.wait().unwrap();
    use std::os::unix::process::ExitStatusExt as _;
    assert_eq!(status.signal(), Some(libc::SIGTERM));
}

#[test]
fn ctrl_z_asks_to_suspend() {
    let mut app = app_over("old-driver", 0..=0);
    let effect = input::key(
        &mut app,
        KeyEvent::new(KeyCode::Char('z'), KeyModifiers::CONTROL),
        Rect::new(0, 0, 80, 24),
    );
    assert_eq!(effect, Effect::Suspend);
    assert!(!app.quit);
}

/// No control character on any line of `text`.
fn no_control(text: &str) -> bool {
    text.lines()
        .all(|l| !l.chars().any(gpu_devices::text::is_control))
}

#[test]
fn outside_text_is_drawn_escaped() {
    let mut app = app_over("geforce-desktop", 0..=20);
    let hostile = "evil\u{1b}]0;TITLE\u{7}\u{1b}[2J\u{9b}";
    let sample = app.sample.as_mut().unwrap();
    for p in &mut sample.snap.processes {
        p.host.name = Some(hostile.into());
        p.host.command = Some(hostile.into());
        p.host.user = Some(hostile.into());
    }
    sample.machine.hostname = Some(hostile.into());
    for layout in [LayoutMode::Full, LayoutMode::Compact] {
        app.layout = layout;
        let text = render_text(&app, 200, 40);
        assert!(no_control(&text), "{text:?}");
        assert!(text.contains("evil\\x1b]0;TITLE\\x07\\x1b[2J"), "{text}");
    }
    // The confirmation names the process, escaped too.
    app.opts.live = true;
    press(&mut app, KeyCode::Char('K'));
    let text = render_text(&app, 200, 40);
    assert!(text.contains("(evil\\x1b]0;TITLE"), "{text}");
    // And the detail screen, with an environment.
    press(&mut app, KeyCode::Esc);
    press(&mut app, KeyCode::Enter);
    app.detail_env = Ok(vec![format!("X={hostile}")]);
    let text = render_text(&app, 200, 40);
    assert!(no_control(&text), "{text:?}");
    assert!(text.contains("X=evil\\x1b]0;TITLE"), "{text}");
}

// Regression: a huge terminal width made `--once` allocate its buffers to match.
#[test]
fn once_is_bounded_whatever_the_width() {
    let mut app = app_over("h100-sxm-8gpu", 0..=3);
    let text = super::render_once(&mut app, u16::MAX);
    assert!(text.lines().all(|l| l.chars().count() <= 1000));
    // Every process is there at this size.
    assert!(text.contains("64 of 64 shown"), "{text}");
    assert!(!text.contains("more processes, not shown"));
    // A process list taller than the bound is cut, and the printout says so.
    let sample = app.sample.as_mut().unwrap();
    let procs = sample.snap.processes.clone();
    for i in 1..10u32 {
        sample
            .snap
            .processes
            .extend(procs.iter().cloned().map(|mut p| {
                p.pid += 100_000 * i;
                p
            }));
    }
    let text = super::render_once(&mut app, u16::MAX);
    let lines = text.lines().count();
    assert!(lines <= 501, "{lines} lines");
    let last = text.lines().last().unwrap();
    assert!(last.starts_with("... and "), "{last}");
    // Every process is either shown or counted.
    let left_out: usize = last["... and ".len()..]
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let shown = text
        .lines()
        .filter(|l| {
            l.starts_with("> ")
                || l.starts_with("  ") && l[2..].starts_with(|c: char| c.is_ascii_digit())
        })
        .count();
    assert_eq!(shown + left_out, 640, "{text}");
}
