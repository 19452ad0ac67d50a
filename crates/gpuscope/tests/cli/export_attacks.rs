//! `gpuscope export` under attack (issue 32, items 11 to 13), by hostile clients on loopback:
//! a wrong-password flood from 8 addresses does not keep a correct login out; bcrypt costs
//! outside 4 to 14 are refused at start; sockets from 20 addresses that never finish their
//! request heads do not keep scrapes from a 21st address out. Linux routes all of 127.0.0.0/8
//! to the loopback interface, so each 127.0.0.N is a client address of its own. Every wait is
//! bounded, so that a regression fails instead of hanging.

use crate::support::export_support;

use std::io::Read;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use export_support::{basic, cli, Exporter};
use test_support::loopback::{self, connect, get_status, Flood};

/// Writes `web.yml` with `users` (name, hash) into `dir`; its path.
fn web_config(dir: &Path, users: &[(&str, &str)]) -> String {
    loopback::web_config(dir, "web.yml", users).expect("writes web.yml")
}

#[test]
fn item_11_a_correct_login_succeeds_during_a_wrong_password_flood() {
    // Regression: every bcrypt check waited on one semaphore, so 8 addresses x 32 connections
    // sending wrong passwords kept the first correct login waiting 14.7 s, past Prometheus's
    // 10 s scrape timeout. At cost 7 the flood's 256 queued checks hold a login for over 10 s
    // in a debug build, and a fair share (one check per address ahead) for well under one.
    let dir = tempfile::tempdir().expect("a temporary directory");
    let hash = bcrypt::hash("s3cret", 7).expect("a hash");
    let config = web_config(dir.path(), &[("prometheus", &hash)]);
    let exp = Exporter::start(&["--demo", "--frame", "1", "--web.config.file", &config]);

    let flood = Flood::wrong_passwords(&exp.addr, "prometheus", Duration::from_secs(10));
    // The flood is under way when its wrong passwords are being checked and refused.
    let started = Instant::now();
    while flood.count() < 16 && started.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let before = flood.count();
    assert!(
        before >= 16,
        "the flood had {before} wrong passwords refused"
    );

    // A correct login from a 10th address, answered within 5 s (the target is 1 s; the bound
    // is loose for a loaded two-core machine, and makes the test fail instead of hanging).
    let asked = Instant::now();
    let login = connect("127.0.0.10", &exp.addr, Duration::from_secs(5))
        .and_then(|mut s| get_status(&mut s, &[("Authorization", &basic("prometheus", "s3cret"))]));
    let took = asked.elapsed();
    let during = flood.count() - before;
    eprintln!(
        "correct login during the flood: {:?} after {took:?}; {during} wrong passwords refused meanwhile",
        login
    );
    assert_eq!(
        login.ok(),
        Some(200),
        "the correct login was not answered 200 within 5 s"
    );
    assert!(during > 0, "the flood stopped while the login waited");
    drop(exp);
    flood
        .stop()
        .expect("the flood's threads end without a panic");
}

/// A child process killed when dropped, so that a failed assertion leaves none running.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits for `child` to end, until `deadline` at most; kills it if it has not. Its exit code
/// (None when it had to be killed), and its stderr.
fn wait_until(child: &mut Reaped, deadline: Instant) -> (Option<i32>, String) {
    let child = &mut child.0;
    let code = loop {
        match child.try_wait().expect("waits for gpuscope") {
            Some(status) => break status.code(),
            None if Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut stderr);
    }
    (code, stderr)
}

#[test]
fn item_12_a_bcrypt_cost_outside_4_to_14_is_refused_at_start() {
    // Regression: cost 31 made the exporter spin a core before it ever listened (it hashed its
    // dummy password at that cost), 16 took seconds to start, and 99 and 03 were accepted.
    let dir = tempfile::tempdir().expect("a temporary directory");
    // A well-formed salt and digest; only the cost changes.
    let real = bcrypt::hash("pw", 4).expect("a hash");
    let tail = &real[7..];
    let cases = [
        ("31", "bcrypt cost 31 is outside"),
        ("16", "bcrypt cost 16 is outside"),
        ("15", "bcrypt cost 15 is outside"),
        ("99", "bcrypt cost 99 is outside"),
        ("03", "bcrypt cost 03 is outside"),
        ("00", "bcrypt cost 00 is outside"),
        ("4", "bcrypt cost \"4\" is not two digits"),
    ];
    // All started at once, then each waited for: a case that does not stop costs its bound
    // once, not once per case.
    let mut children: Vec<_> = cases
        .iter()
        .map(|(cost, _)| {
            let case = dir.path().join(format!("cost-{cost}"));
            std::fs::create_dir(&case).expect("a directory per case");
            let config = web_config(&case, &[("alice", &format!("$2y${cost}${tail}"))]);
            Reaped(
                cli::command(&["export", "--demo", "--listen", "127.0.0.1:0"])
                    .args(["--web.config.file", &config])
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("gpuscope starts"),
            )
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    for ((cost, says), child) in cases.iter().zip(children.iter_mut()) {
        let (code, stderr) = wait_until(child, deadline);
        assert_eq!(code, Some(2), "cost {cost}: {stderr}");
        let lines: Vec<&str> = stderr.trim_end().lines().collect();
        assert_eq!(lines.len(), 1, "cost {cost}: one line: {stderr}");
        assert!(
            lines[0].contains("basic_auth_users.alice")
                && lines[0].contains(says)
                && lines[0].contains("04 to 14"),
            "cost {cost}: {stderr}"
        );
    }
    // The ends of the range are taken, and start at once (nothing is hashed at start).
    for cost in ["04", "14"] {
        let case = dir.path().join(format!("ok-{cost}"));
        std::fs::create_dir(&case).expect("a directory per case");
        let config = web_config(&case, &[("alice", &format!("$2y${cost}${tail}"))]);
        let exp = Exporter::start(&["--demo", "--web.config.file", &config]);
        let mut s = connect("127.0.0.1", &exp.addr, Duration::from_secs(10)).expect("connects");
        assert_eq!(get_status(&mut s, &[]).expect("an answer"), 401);
    }
}

#[test]
fn item_13_scrapes_from_another_address_are_answered_during_a_slot_flood_from_20_addresses() {
    // Regression: 20 addresses x 32 sockets that never finish their request heads held every
    // one of the 512 connection slots (each address within its own limit of 32), and 5 of 71
    // scrapes from another address were answered.
    let exp = Exporter::start(&["--demo", "--frame", "1"]);
    // Each socket the server closed (after the header deadline, or at once with a 503) is
    // opened again.
    let flood = Flood::half_open_sockets(&exp.addr, Duration::from_millis(100));
    std::thread::sleep(Duration::from_millis(500));

    // Scrapes from 127.0.0.22 for 8 s (four header deadlines), one after another, each on a
    // new connection as Prometheus makes after a failure, each given Prometheus's 10 s.
    let (asked, times) = loopback::scrapes(&exp.addr, "127.0.0.22", Duration::from_secs(8));
    let answered = times.len();
    let slowest = times.iter().max().copied().unwrap_or_default();
    let refused = flood.count();
    eprintln!(
        "{answered} of {asked} scrapes answered during the flood (slowest {slowest:?}); \
         the flooders were told 503 {refused} times"
    );
    flood
        .stop()
        .expect("the flood's threads end without a panic");
    // The flood did fill what it could: its own addresses were refused.
    assert!(refused > 0, "the flood was never refused a connection");
    assert!(asked >= 20, "only {asked} scrapes in 8 s");
    assert!(
        answered * 10 >= asked * 9,
        "{answered} of {asked} scrapes answered during the flood"
    );
}

/// Resumes a stopped process when dropped, so that a failed assertion leaves none stopped.
struct Resume(u32);

impl Drop for Resume {
    fn drop(&mut self) {
        // SAFETY: kill(2) with a pid of this test's own child and a signal number.
        unsafe { libc::kill(self.0 as libc::pid_t, libc::SIGCONT) };
    }
}

#[test]
fn item_13_connections_waiting_to_be_accepted_are_queued_beyond_128() {
    // Regression: the exporter listened with std's backlog of 128, so during a flood of
    // clients reconnecting as fast as they were refused, a scrape's connection request now
    // and then found the queue full, was dropped, and waited for the kernel's retry a second
    // later. The exporter is stopped (SIGSTOP) so that nothing is accepted: the kernel
    // completes connections into the queue until it is full, and a connection beyond it
    // never completes.
    let somaxconn: usize = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    const WAITING: usize = 300;
    if somaxconn < WAITING {
        eprintln!("net.core.somaxconn is {somaxconn}: no backlog can hold {WAITING}; skipping");
        return;
    }
    let exp = Exporter::start(&["--demo", "--frame", "1"]);
    // SAFETY: kill(2) with the pid of this test's own child and a signal number.
    assert_eq!(
        unsafe { libc::kill(exp.pid() as libc::pid_t, libc::SIGSTOP) },
        0
    );
    let resume = Resume(exp.pid());
    let mut held = Vec::with_capacity(WAITING);
    for i in 0..WAITING {
        // Spread over 10 addresses, as a flood's are; 500 ms is far beyond a loopback
        // handshake and far below the kernel's 1 s retry.
        let from = format!("127.0.0.{}", 30 + i % 10);
        match connect(&from, &exp.addr, Duration::from_millis(500)) {
            Ok(s) => held.push(s),
            Err(e) => panic!("connection {} of {WAITING} not queued: {e}", i + 1),
        }
    }
    drop(resume);
    // Running again, it still answers a scrape.
    drop(held);
    let mut s = connect("127.0.0.22", &exp.addr, Duration::from_secs(10)).expect("connects");
    assert_eq!(get_status(&mut s, &[]).expect("an answer"), 200);
}
