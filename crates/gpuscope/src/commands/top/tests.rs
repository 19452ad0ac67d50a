//! Tests of the viewer over fixtures: insta snapshots of its screens drawn on ratatui's
//! TestBackend, and checks of sorting, filtering, the tree, tags, clicks and signals against
//! what the fixtures hold.

use std::sync::Arc;

use gpu_backend::{DeviceId, Fixture, ReplayBackend, ReplayClock};
use gpu_processes::ProcessCollector;
use ratatui::crossterm::event::{
    KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};
use ratatui::layout::Rect;

use super::app::{
    pod_label, App, Column, LayoutMode, Options, PendingSignal, PodGroup, ProcIdentity, Ring,
    Screen, Sig, HISTORY_LEN,
};
use super::keys::{self, Effect};
use super::{render_text, sampler, signals};

fn fixture_path(name: &str) -> String {
    format!("{}/../../fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"))
}

/// A viewer that has seen `frames` of the fixture `name`, one sample per frame.
fn app_over(name: &str, frames: std::ops::RangeInclusive<usize>) -> App {
    let (mut app, backend, collector) = viewer(name);
    let devices = collector.context().all_devices();
    for f in frames {
        backend.set_frame(f);
        app.push_sample(sampler::sample(&collector, &devices, false));
    }
    app
}

/// A viewer of the fixture `name` that has seen nothing yet, with the replay (on a manual
/// clock) and the collector that feed it.
fn viewer(name: &str) -> (App, Arc<ReplayBackend>, ProcessCollector) {
    let fixture = Fixture::load(fixture_path(name)).unwrap();
    let backend = Arc::new(ReplayBackend::with_clock(
        fixture,
        ReplayClock::Manual(0.into()),
    ));
    let collector = ProcessCollector::from_replay(backend.clone()).unwrap();
    let ctx = collector.context();
    let app = App::new(Options {
        source_label: format!("fixture {name}"),
        live: false,
        readonly: false,
        color: false,
        ascii: false,
        interval: std::time::Duration::from_secs(1),
        driver_version: ctx.driver_version().into_option(),
        cuda_version: ctx.cuda_driver_version().into_option(),
        local_time: false,
        gpu_util_thresh: (10, 75),
        mem_util_thresh: (10, 80),
        light: false,
        colorful: false,
    });
    (app, backend, collector)
}

fn press(app: &mut App, code: KeyCode) -> Effect {
    keys::key(
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

/// The main screen of a scenario over some frames at a terminal size, each its own snapshot.
#[test]
fn screens() {
    for (name, stem, frames, width, height) in [
        ("screen_8gpu_wide", "h100-sxm-8gpu", 0..=9, 160, 50),
        ("screen_8gpu_narrow_80x24", "h100-sxm-8gpu", 0..=9, 80, 24),
        ("screen_mig", "h100-mig", 0..=20, 120, 36),
        ("screen_wddm_na", "windows-wddm", 0..=20, 120, 36),
    ] {
        let app = app_over(stem, frames);
        insta::assert_snapshot!(name, render_text(&app, width, height));
    }
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

/// The SM% cell of `pid` in a rendered main screen, read under the header's `SM%`.
fn sm_cell(screen: &str, pid: u32) -> Option<String> {
    let lines: Vec<Vec<char>> = screen.lines().map(|l| l.chars().collect()).collect();
    let header = lines
        .iter()
        .find(|l| String::from_iter(l.iter()).contains(" SM%"))?;
    let end = String::from_iter(header.iter())
        .split("SM%")
        .next()
        .map(|before| before.chars().count() + 3)?;
    // A row: the selection and tag marks, then GPU and PID.
    let row = lines.iter().find(|l| {
        let text = String::from_iter(l.iter().skip(2));
        text.split_whitespace().nth(1) == Some(&pid.to_string()) && !text.contains("SM%")
    })?;
    Some(String::from_iter(&row[end - 4..end]).trim().to_string())
}

/// Regression: on real H100s `gpuscope top` showed SM% `N/A` for a process whose samples come
/// less often than another's. Over the real recording, refreshed once a frame (1 s), PID 541
/// shows its own newest sample in every frame from its first (20) to its last (55), PID 512 in
/// every frame it runs, and the detail view gives the age of the sample behind the figure.
#[test]
fn sm_column_shows_each_process_newest_sample_over_the_real_recording() {
    let (mut app, backend, collector) = viewer("h100-real");
    let devices = collector.context().all_devices();
    let fixture = backend.fixture().clone();
    // The newest sample of `pid` recorded up to frame `f`, by its own timestamp.
    let newest = |f: usize, pid: u32| {
        fixture.frames[..=f]
            .iter()
            .filter_map(
                |fr| match &fr.devices[&DeviceId::Gpu(0)].process_utilization {
                    gpu_backend::fixture::Answer::Ok(s) => Some(s.clone()),
                    gpu_backend::fixture::Answer::Err(_) => None,
                },
            )
            .flatten()
            .filter(|s| s.pid == pid)
            .fold(
                None,
                |best: Option<gpu_backend::ProcessUtilizationSample>, s| match best {
                    Some(b) if b.timestamp_us > s.timestamp_us => Some(b),
                    _ => Some(s),
                },
            )
    };
    let mut hog_cells = Vec::new();
    for f in 0..=55 {
        backend.set_frame(f);
        app.push_sample(sampler::sample(&collector, &devices, false));
        let screen = render_text(&app, 120, 30);
        for (pid, running) in [(512, 12..=40), (541, 19..=55)] {
            let cell = sm_cell(&screen, pid);
            if !running.contains(&f) {
                assert_eq!(cell, None, "frame {f}: {pid} is not running\n{screen}");
                continue;
            }
            let want = newest(f, pid).map_or("N/A".to_string(), |s| s.sm.to_string());
            assert_eq!(
                cell.as_deref(),
                Some(&*want),
                "frame {f} pid {pid}\n{screen}"
            );
            if pid == 541 {
                hog_cells.push(want);
            }
        }
        if f == 26 {
            // PID 541's sample has stood still since frame 20: the detail view says how long.
            app.screen = Screen::Detail(541);
            let detail = render_text(&app, 120, 30);
            let sample = newest(f, 541).unwrap();
            let now_ms = gpu_backend::host::HostSource::now_unix_ms(
                &gpu_backend::host::ReplayHost::new(backend.clone()),
            );
            let age = (now_ms - sample.timestamp_us / 1000) as f64 / 1000.0;
            assert!(age > 5.0, "{age}");
            let want = format!("SM {}%", sample.sm);
            let line = line_with(&detail, &want);
            assert!(
                line.contains(&format!("(sample {age:.1}s old)")),
                "{detail}"
            );
            app.screen = Screen::Main;
        }
    }
    // N/A only in its first frame, before the driver had sampled it.
    assert_eq!(hog_cells[0], "N/A");
    assert!(hog_cells[1..].iter().all(|c| c != "N/A"), "{hog_cells:?}");
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
        keys::mouse(
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
    assert_eq!(app.rows().len(), count(&|p| p.kind_str() == "G"));
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
    let (app, rows, launcher) = tree_with_the_launcher();
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

/// The 8-GPU box in the tree view: the viewer, its rows, and the row of the ranks' launcher
/// (PID 31000), a plain row since it is not on a GPU.
fn tree_with_the_launcher() -> (App, Vec<super::app::Row>, usize) {
    let mut app = app_over("h100-sxm-8gpu", 0..=3);
    press(&mut app, KeyCode::Char('t'));
    let rows = app.rows();
    let launcher = rows
        .iter()
        .position(|r| r.process.is_none() && r.pid == 31000)
        .unwrap();
    (app, rows, launcher)
}

/// Issue 25: Enter on a tree-view parent that is not on a GPU (the 8-GPU box's launcher, PID
/// 31000) opened a detail screen that said "no longer on a GPU". It opens the parent's detail:
/// that it is not on a GPU, what the host told of it, and each of its GPU children; a process
/// that left the GPUs still says so.
#[test]
fn enter_on_a_tree_parent_shows_it_is_a_parent_with_its_gpu_children() {
    let (mut app, rows, launcher) = tree_with_the_launcher();
    app.select_index(&rows, launcher);
    assert_eq!(press(&mut app, KeyCode::Enter), Effect::OpenedDetail(31000));
    assert_eq!(app.screen, Screen::Detail(31000));
    app.detail_env = Err("N/A (not recorded: this is a replay)".into());
    let kids: Vec<u32> = {
        let procs = &app.sample.as_ref().unwrap().snap.processes;
        procs
            .iter()
            .filter(|p| p.host.ppid == Some(31000))
            .map(|p| p.pid)
            .collect()
    };
    assert!(kids.len() >= 2, "{kids:?}");
    let text = render_text(&app, 160, 50);
    assert!(!text.contains("no longer on a GPU"), "{text}");
    assert!(
        text.contains(&format!(
            "PID 31000 is not on a GPU: it is the parent of {} GPU processes",
            kids.len()
        )),
        "{text}"
    );
    for kid in &kids {
        assert!(text.contains(&format!("Child {kid} ")), "{kid}: {text}");
    }
    assert!(
        text.contains("none: this process is not on a GPU"),
        "no GPU history: {text}"
    );
    // The fixture did not record the launcher's own facts; when the host tells them, they show.
    assert!(text.contains("N/A (the host did not tell)"), "{text}");
    app.sample.as_mut().unwrap().parents.insert(
        31000,
        gpu_backend::fixture::HostProcessFacts {
            name: Some("torchrun".into()),
            cmdline: vec!["torchrun".into(), "--nproc-per-node=8".into()],
            user: Some("alice".into()),
            ppid: Some(2999),
            start_time_s: None,
            container: None,
        },
    );
    let text = render_text(&app, 160, 50);
    assert!(
        line_with(&text, "Command").contains("torchrun --nproc-per-node=8"),
        "{text}"
    );
    assert!(line_with(&text, "User").contains("alice"), "{text}");
    press(&mut app, KeyCode::Esc);
    assert_eq!(app.screen, Screen::Main);

    // A PID with no process on a GPU and no GPU child is one that left.
    app.screen = Screen::Detail(4_000_000);
    let text = render_text(&app, 160, 50);
    assert!(text.contains("PID 4000000 is no longer on a GPU"), "{text}");
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
    keys::key(
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

#[path = "../../../tests/sleeping_child/mod.rs"]
mod sleeping_child;
use sleeping_child::Child;

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
    let effect = keys::key(
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

#[test]
fn once_width_falls_back_when_the_terminal_reports_no_width() {
    use super::choose_once_width;
    // A terminal's own width wins, at least 40.
    assert_eq!(choose_once_width(Some(200), Some("80")), 200);
    assert_eq!(choose_once_width(Some(20), None), 40);
    // Regression: a terminal reporting 0 columns cut every line at 40.
    assert_eq!(choose_once_width(Some(0), None), 120);
    assert_eq!(choose_once_width(Some(0), Some("150")), 150);
    // No terminal: COLUMNS when sensible, else 120.
    assert_eq!(choose_once_width(None, Some(" 90 ")), 90);
    assert_eq!(choose_once_width(None, Some("10")), 120);
    assert_eq!(choose_once_width(None, Some("wide")), 120);
    assert_eq!(choose_once_width(None, None), 120);
}

/// Issue 13: the SM-active and tensor-active bars are drawn only where GPM answers: not on a
/// GPU without GPM, nor on the first frame of a recording (no earlier sample yet); on the H100s
/// they show the recorded values.
#[test]
fn activity_bars_only_where_gpm_answers() {
    for (stem, frames) in [
        ("geforce-desktop", 0..=5),
        ("old-driver", 0..=5),
        ("h100-sxm-8gpu", 0..=0),
    ] {
        let mut app = app_over(stem, frames);
        app.layout = LayoutMode::Full;
        let text = render_text(&app, 160, 60);
        assert!(!text.contains("TENS"), "{stem}: {text}");
    }
    let mut app = app_over("h100-sxm-8gpu", 0..=5);
    app.layout = LayoutMode::Full;
    let text = render_text(&app, 160, 60);
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("     SM  "))
        .collect();
    assert_eq!(rows.len(), 8, "{text}");
    let d0 = &app.sample.as_ref().unwrap().snap.devices[0];
    let sm = d0.gpm.value().and_then(|m| m.sm_activity).unwrap();
    assert!(
        rows[0].contains(&format!("{}%  TENS", sm.round() as u64)),
        "{}",
        rows[0]
    );
}

#[test]
fn pod_namespace_and_container_filters_keep_that_pods_processes_only() {
    let mut app = app_over("k8s-time-slicing", 0..=4);
    let filter = |app: &mut App, text: &str| {
        press(app, KeyCode::Char('/'));
        for _ in 0..60 {
            press(app, KeyCode::Backspace);
        }
        type_text(app, text);
        press(app, KeyCode::Enter);
        let mut pids = shown_pids(app);
        pids.sort_unstable();
        pids
    };
    // The recording: two notebook kernels in data-science, two trainers in ml-research, one
    // Triton server in serving, and gpu_burn outside any container.
    assert_eq!(filter(&mut app, "pod:notebook-7f9c"), vec![40303, 40304]);
    assert_eq!(filter(&mut app, "ns:ml-research"), vec![40101, 40202]);
    assert_eq!(filter(&mut app, "container:server"), vec![40404]);
    assert_eq!(
        filter(
            &mut app,
            "ns:ml-research container:trainer pod:finetune-b-0"
        ),
        vec![40202]
    );
    assert!(filter(&mut app, "pod:gpu_burn").is_empty());
    assert!(
        filter(&mut app, "ns:").is_empty(),
        "no process has an empty namespace"
    );
}

/// The screen's line holding `needle`.
fn line_with<'a>(screen: &'a str, needle: &str) -> &'a str {
    screen
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle}:\n{screen}"))
}

#[test]
fn the_pod_column_names_each_process_pod_and_na_outside_containers() {
    let app = app_over("k8s-time-slicing", 0..=4);
    let screen = render_text(&app, 200, 50);
    assert!(line_with(&screen, "COMMAND").contains("POD"), "{screen}");
    let procs = &app.sample.as_ref().unwrap().snap.processes;
    for p in procs {
        let row = line_with(&screen, &format!(" {} ", p.pid));
        match &p.host.container {
            Some(c) => {
                let want = format!(
                    "{}/{}",
                    c.namespace.as_ref().unwrap(),
                    c.pod.as_ref().unwrap()
                );
                assert!(row.contains(&want), "{row}");
            }
            None => assert!(row.contains("N/A"), "{row}"),
        }
    }
    // A machine without containers keeps its columns.
    let plain = render_text(&app_over("h100-sxm-8gpu", 0..=2), 200, 50);
    assert!(!line_with(&plain, "COMMAND").contains("POD"));
}

#[test]
fn the_view_grouped_by_pod_sums_each_pods_processes_per_device() {
    let mut app = app_over("k8s-time-slicing", 0..=4);
    press(&mut app, KeyCode::Char('p'));
    assert!(app.by_pod);
    let (groups, outside) = app.pod_groups();
    let snap = app.sample.as_ref().unwrap().snap.clone();
    assert_eq!(
        outside,
        snap.processes
            .iter()
            .filter(|p| p.host.container.is_none())
            .count()
    );
    assert_eq!(outside, 1, "gpu_burn runs outside any container");
    // Worked out from the processes themselves: (device, label) -> (count, memory, SM).
    let mut want: std::collections::BTreeMap<(DeviceId, String), (usize, u64, u32)> =
        Default::default();
    for p in &snap.processes {
        if p.host
            .container
            .as_ref()
            .and_then(|c| c.pod_uid.as_ref())
            .is_none()
        {
            continue;
        }
        let e = want.entry((p.device, pod_label(p).unwrap())).or_default();
        e.0 += 1;
        e.1 += p.gpu_memory.unwrap();
        e.2 += p.utilization.sm.unwrap_or(0);
    }
    assert_eq!(groups.len(), want.len());
    let screen = render_text(&app, 160, 50);
    for g in &groups {
        let (n, mem, sm) = want[&(g.device, g.label.clone())];
        assert_eq!((g.processes, g.gpu_memory), (n, Some(mem)), "{}", g.label);
        if g.device == DeviceId::Gpu(0) {
            assert_eq!(g.sm, Some(sm), "{}", g.label);
        } else {
            assert_eq!(g.sm, None, "MIG devices give no per-process samples");
        }
        let row = line_with(&screen, &g.label);
        assert!(row.trim_start().starts_with(&g.device.to_string()), "{row}");
    }
    // The three time-sliced pods' figures add up to GPU 0's own.
    let on0: Vec<&PodGroup> = groups
        .iter()
        .filter(|g| g.device == DeviceId::Gpu(0))
        .collect();
    assert_eq!(on0.len(), 3);
    let gpu0 = snap
        .devices
        .iter()
        .find(|d| d.id == DeviceId::Gpu(0))
        .unwrap();
    assert_eq!(
        on0.iter().map(|g| g.gpu_memory.unwrap()).sum::<u64>(),
        gpu0.memory.value().unwrap().used
    );
    assert_eq!(
        on0.iter().map(|g| g.sm.unwrap()).sum::<u32>(),
        gpu0.utilization.value().unwrap().gpu
    );
    // The pod inside a MIG device is on that MIG device.
    assert!(groups.iter().any(|g| g.device
        == DeviceId::Mig {
            parent: 1,
            index: 0
        }
        && g.label == "serving/triton-0"));
    assert!(screen.contains("1 process(es) outside any pod"), "{screen}");
    // A filter applies before grouping.
    press(&mut app, KeyCode::Char('/'));
    type_text(&mut app, "ns:ml-research");
    press(&mut app, KeyCode::Enter);
    let (groups, outside) = app.pod_groups();
    assert_eq!((groups.len(), outside), (2, 0));
    press(&mut app, KeyCode::Char('p'));
    assert!(!app.by_pod);
}

/// The tree's branches as nvitop draws them, for rows of these depths: `├─` while a sibling
/// follows, `└─` for the last, `│` under an ancestor whose siblings go on.
#[test]
fn tree_branches_continue_under_ancestors_with_siblings_below() {
    let depths = [0, 1, 2, 2, 1, 2, 0, 1];
    let mut rows: Vec<super::app::Row> = depths
        .iter()
        .enumerate()
        .map(|(i, &depth)| super::app::Row {
            process: None,
            pid: i as u32,
            depth,
            more: 0,
        })
        .collect();
    super::app::mark_branches(&mut rows);
    let drawn: Vec<String> = rows
        .iter()
        .map(|r| {
            (1..=r.depth)
                .map(|level| {
                    let on = r.more & (1 << (level - 1)) != 0;
                    match (level == r.depth, on) {
                        (true, true) => "├─",
                        (true, false) => "└─",
                        (false, true) => "│ ",
                        (false, false) => "  ",
                    }
                })
                .collect()
        })
        .collect();
    assert_eq!(
        drawn,
        ["", "├─", "│ ├─", "│ └─", "└─", "  └─", "", "└─"],
        "{rows:?}"
    );
}

/// The colour of the first filled cell of the bar after `label` (`MEM`, `UTIL`) on the first
/// device's line; `None` when the bar has none.
fn bar_colour(app: &App, label: &str) -> Option<ratatui::style::Color> {
    bar_colours(app, label).first().copied()
}

#[test]
fn utilization_thresholds_choose_the_bar_colours_as_nvitop_does() {
    use ratatui::style::Color;
    // GeForce GPU 0: memory 52% used, GPU utilization 100%.
    let mut app = app_over("geforce-desktop", 0..=20);
    app.opts.color = true;
    app.opts.mem_util_thresh = (10, 80);
    app.opts.gpu_util_thresh = (10, 75);
    assert_eq!(bar_colour(&app, "MEM"), Some(Color::Yellow));
    assert_eq!(bar_colour(&app, "UTIL"), Some(Color::Red));
    app.opts.mem_util_thresh = (60, 90);
    assert_eq!(bar_colour(&app, "MEM"), Some(Color::Green));
    app.opts.mem_util_thresh = (10, 50);
    assert_eq!(bar_colour(&app, "MEM"), Some(Color::Red));
    app.opts.gpu_util_thresh = (10, 100);
    assert_eq!(
        bar_colour(&app, "UTIL"),
        Some(Color::Red),
        "100% reaches 100"
    );
}

/// `--light` (nvitop's option of that name): the yellow and green a white background washes
/// out are drawn in darker shades; red stays red.
#[test]
fn light_theme_darkens_the_colours_a_white_background_washes_out() {
    use ratatui::style::Color;
    let mut app = app_over("geforce-desktop", 0..=20);
    app.opts.color = true;
    app.opts.light = true;
    app.opts.mem_util_thresh = (10, 80);
    assert_eq!(
        bar_colour(&app, "MEM"),
        Some(Color::Indexed(136)),
        "dark yellow"
    );
    app.opts.mem_util_thresh = (60, 90);
    assert_eq!(
        bar_colour(&app, "MEM"),
        Some(Color::Indexed(28)),
        "dark green"
    );
    app.opts.gpu_util_thresh = (10, 75);
    assert_eq!(bar_colour(&app, "UTIL"), Some(Color::Red));
    assert_eq!(
        super::ui::theme::light_shade(Color::Cyan, true),
        Color::Blue
    );
    assert_eq!(
        super::ui::theme::light_shade(Color::Cyan, false),
        Color::Cyan
    );
}

/// The colours of a bar's filled cells, left to right, each colour once per run.
fn bar_colours(app: &App, label: &str) -> Vec<ratatui::style::Color> {
    let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(160, 40)).unwrap();
    t.draw(|f| super::ui::draw(f, app)).unwrap();
    let buf = t.backend().buffer();
    for y in 0..buf.area.height {
        let line: String = (0..buf.area.width)
            .map(|x| buf[(x, y)].symbol().to_string())
            .collect();
        if let Some(at) = line.find(label) {
            let start = (line[..at].chars().count() + label.len()) as u16;
            let mut runs = Vec::new();
            let mut in_bar = false;
            for x in start..buf.area.width {
                match buf[(x, y)].symbol() {
                    "█" => {
                        in_bar = true;
                        let c = buf[(x, y)].fg;
                        if runs.last() != Some(&c) {
                            runs.push(c);
                        }
                    }
                    "░" => in_bar = true,
                    _ if in_bar => break,
                    _ => {}
                }
            }
            return runs;
        }
    }
    Vec::new()
}

/// `--colorful` (nvitop's spectrum bars): each filled cell takes the colour of the share it
/// stands for, so a full bar runs green, yellow, red; without it, the whole bar is one colour.
#[test]
fn colorful_bars_run_through_the_thresholds_colours() {
    use ratatui::style::Color;
    // GeForce GPU 0: GPU utilization 100%.
    let mut app = app_over("geforce-desktop", 0..=20);
    app.opts.color = true;
    app.opts.gpu_util_thresh = (10, 75);
    assert_eq!(bar_colours(&app, "UTIL"), vec![Color::Red]);
    app.opts.colorful = true;
    assert_eq!(
        bar_colours(&app, "UTIL"),
        vec![Color::Green, Color::Yellow, Color::Red]
    );
    // Memory at 52% with thresholds 10 and 80: green, then yellow, and no red cell.
    app.opts.mem_util_thresh = (10, 80);
    assert_eq!(bar_colours(&app, "MEM"), vec![Color::Green, Color::Yellow]);
    // No colour at all: plain, whatever --colorful says.
    app.opts.color = false;
    assert_eq!(bar_colours(&app, "UTIL"), vec![Color::Reset]);
}
