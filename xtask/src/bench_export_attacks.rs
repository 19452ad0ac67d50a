//! `cargo xtask bench-export-attacks`: issue 32's attacks on `gpuscope export` (items 11 to 13),
//! timed, for each gpuscope binary given (main's build beside this one's, say), all on
//! loopback (each 127.0.0.N is a client address of its own):
//!
//! 1. **a correct login during a wrong-password flood**: basic auth with one user at bcrypt
//!    cost 10 (htpasswd's and the exporter-toolkit's usual choice); 8 addresses x 32
//!    connections send wrong passwords back to back; once they are being refused, a correct
//!    login from a 10th address, timed, then a second from an 11th (which a remembered check
//!    answers). Each try on a freshly started exporter, so that nothing is remembered before.
//! 2. **known against unknown users**: users of cost 4 and 12 (as in the issue); the time of a
//!    wrong password for each, and of an unknown user, one request at a time, no flood.
//! 3. **start with a costly hash**: the time until a web config with a user of cost 14, then 16,
//!    is listening, or refused.
//! 4. **a slot flood**: 20 addresses x 32 sockets that send half a request head and never finish
//!    it, each reopened as soon as the server closes it (checked every 50 ms); scrapes of
//!    `/metrics` from a 21st address, one every 100 ms, each on a new connection with
//!    Prometheus's 10 s timeout: how many are answered (200), and how fast.
//!
//! Prints a markdown table per measure, a column per binary. The commands and the figures:
//! docs/security.md, "Figures".

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use test_support::loopback::{self, basic, connect, get_status, Flood};

use crate::bench_setup;

/// Command-line arguments.
#[derive(clap::Args)]
pub struct Args {
    /// A gpuscope binary to attack; give it more than once to compare (e.g. main's release
    /// build, then this workspace's). Default: this workspace's, built in release mode.
    #[arg(long = "gpuscope-bin", value_name = "PATH")]
    bins: Vec<PathBuf>,
    /// Correct logins timed during the password flood (each on a fresh exporter).
    #[arg(long, default_value_t = 5)]
    logins: usize,
    /// Checks timed per user in the known/unknown comparison.
    #[arg(long, default_value_t = 9)]
    checks: usize,
    /// How long scrapes are sent during the slot flood.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    slot_flood: Duration,
}

/// What one binary measured.
#[derive(Default)]
struct Figures {
    /// The first correct login during the flood: each try's time, or why it failed.
    first_logins: Vec<std::result::Result<Duration, String>>,
    /// The second, remembered, login during the flood.
    second_logins: Vec<std::result::Result<Duration, String>>,
    /// Median time of a wrong password for the cost-4 user, the cost-12 user, an unknown user.
    checks: [Duration; 3],
    /// What starting with a cost-14 and a cost-16 user did, and after how long.
    starts: [String; 2],
    /// Scrapes answered and asked during the slot flood; the answered ones' p50 and max.
    scrapes: (usize, usize, Duration, Duration),
}

/// Runs the measures and prints the tables.
pub fn run(args: Args) -> Result<()> {
    let bins = if args.bins.is_empty() {
        bench_setup::cargo_release(&["-p", "gpuscope"])?;
        vec![bench_setup::target_dir().join("release/gpuscope")]
    } else {
        args.bins.clone()
    };
    for b in &bins {
        if !b.is_file() {
            bail!("--gpuscope-bin {}: no such file", b.display());
        }
    }
    let dir = bench_setup::target_dir().join("bench-export-attacks");
    std::fs::create_dir_all(&dir)?;
    let mut all = Vec::new();
    for bin in &bins {
        eprintln!("{}:", bin.display());
        all.push(measure(&args, bin, &dir)?);
    }
    print(&bins, &all);
    Ok(())
}

fn measure(args: &Args, bin: &Path, dir: &Path) -> Result<Figures> {
    let mut f = Figures::default();

    // 1. A correct login during a wrong-password flood.
    let flood_config = web_config(
        dir,
        "flood.yml",
        &[("prometheus", &bcrypt::hash("s3cret", 10)?)],
    )?;
    let right = basic("prometheus", "s3cret");
    for i in 0..args.logins {
        let (exp, _) = start(bin, &["--web.config.file", &flood_config])?;
        let exp = exp.context("the exporter refused the flood's web config")?;
        let flood = Flood::wrong_passwords(&exp.addr, "prometheus", Duration::from_secs(60));
        let started = Instant::now();
        while flood.count() < 16 {
            if started.elapsed() > Duration::from_secs(60) {
                bail!("the flood had no wrong password refused in 60 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let first = timed_login(&exp.addr, "127.0.0.10", &right);
        let second = timed_login(&exp.addr, "127.0.0.11", &right);
        eprintln!("  login {}: first {first:?}, second {second:?}", i + 1);
        f.first_logins.push(first);
        f.second_logins.push(second);
        drop(exp);
        // A flood thread's panic would be loopback's bug, not the exporter's.
        let _ = flood.stop();
    }

    // 2. Known against unknown users.
    let users_config = web_config(
        dir,
        "users.yml",
        &[
            ("alice", &bcrypt::hash("alice-pw", 4)?),
            ("bob", &bcrypt::hash("bob-pw", 12)?),
        ],
    )?;
    let (exp, _) = start(bin, &["--web.config.file", &users_config])?;
    let exp = exp.context("the exporter refused the users' web config")?;
    for (k, user) in ["alice", "bob", "mallory"].into_iter().enumerate() {
        let wrong = basic(user, "wrong");
        let mut times = Vec::new();
        for _ in 0..args.checks {
            let t = Instant::now();
            let status = connect("127.0.0.2", &exp.addr, Duration::from_secs(60))
                .and_then(|mut s| get_status(&mut s, &[("Authorization", &wrong)]))
                .with_context(|| format!("a check of {user}"))?;
            if status != 401 {
                bail!("a wrong password for {user} was answered {status}");
            }
            times.push(t.elapsed());
        }
        f.checks[k] = median(&mut times);
        eprintln!("  {user}: {:?}", f.checks[k]);
    }
    drop(exp);

    // 3. Start with a costly hash: a well-formed salt and digest, only the cost changed.
    let tail = bcrypt::hash("pw", 4)?[7..].to_string();
    for (k, cost) in ["14", "16"].into_iter().enumerate() {
        let config = web_config(
            dir,
            &format!("cost-{cost}.yml"),
            &[("alice", &format!("$2y${cost}${tail}"))],
        )?;
        let (exp, took) = start(bin, &["--web.config.file", &config])?;
        f.starts[k] = match exp {
            Some(_) => format!("listens after {}", ms(took)),
            None => format!("refused after {}", ms(took)),
        };
        eprintln!("  cost {cost}: {}", f.starts[k]);
    }

    // 4. A slot flood from 20 addresses, scrapes from a 21st.
    let (exp, _) = start(bin, &[])?;
    let exp = exp.context("the exporter did not start")?;
    let flood = Flood::half_open_sockets(&exp.addr, Duration::from_millis(50));
    std::thread::sleep(Duration::from_millis(500));
    let (asked, mut answered) = loopback::scrapes(&exp.addr, "127.0.0.22", args.slot_flood);
    let _ = flood.stop();
    let n = answered.len();
    let max = answered.iter().copied().max().unwrap_or_default();
    f.scrapes = (n, asked, median(&mut answered), max);
    eprintln!("  slot flood: {n} of {asked} scrapes answered");
    Ok(f)
}

fn print(bins: &[PathBuf], all: &[Figures]) {
    let head = |what: &str| {
        let mut h = format!("| {what} |");
        let mut rule = String::from("|---|");
        for b in bins {
            h.push_str(&format!(" `{}` |", b.display()));
            rule.push_str("---|");
        }
        println!("\n{h}\n{rule}");
    };
    let row = |name: &str, cells: Vec<String>| println!("| {name} | {} |", cells.join(" | "));
    let logins = |l: &[std::result::Result<Duration, String>]| {
        let mut ok: Vec<Duration> = l.iter().filter_map(|r| r.as_ref().ok().copied()).collect();
        let failed = l.len() - ok.len();
        let max = ok.iter().copied().max().unwrap_or_default();
        let mut s = if ok.is_empty() {
            "none answered".to_string()
        } else {
            format!("median {}, max {}", ms(median(&mut ok)), ms(max))
        };
        if failed > 0 {
            s.push_str(&format!(
                ", {failed} of {} not answered 200 in 60 s",
                l.len()
            ));
        }
        s
    };
    head("a correct login during a wrong-password flood (8 addresses x 32 connections, cost 10)");
    row(
        "first login (bcrypt check)",
        all.iter().map(|f| logins(&f.first_logins)).collect(),
    );
    row(
        "second login (remembered)",
        all.iter().map(|f| logins(&f.second_logins)).collect(),
    );
    head("a wrong password, median, one request at a time (users of cost 4 and 12)");
    for (k, who) in ["known user, cost 4", "known user, cost 12", "unknown user"]
        .into_iter()
        .enumerate()
    {
        row(who, all.iter().map(|f| ms(f.checks[k])).collect());
    }
    head("start with a user's hash of cost");
    for (k, cost) in ["14", "16"].into_iter().enumerate() {
        row(cost, all.iter().map(|f| f.starts[k].clone()).collect());
    }
    head("scrapes from a 21st address during a slot flood (20 addresses x 32 half-open sockets)");
    row(
        "answered (200 within 10 s)",
        all.iter()
            .map(|f| {
                let (n, asked, _, _) = f.scrapes;
                format!(
                    "{n} of {asked} ({:.0} %)",
                    100.0 * n as f64 / asked.max(1) as f64
                )
            })
            .collect(),
    );
    row(
        "time of the answered: median, max",
        all.iter()
            .map(|f| format!("{}, {}", ms(f.scrapes.2), ms(f.scrapes.3)))
            .collect(),
    );
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

/// A running exporter, killed when dropped.
struct Exporter {
    child: Child,
    addr: String,
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `bin export --demo --frame 1 --listen 127.0.0.1:0 ARGS`: the exporter once it says
/// where it listens, or none if it exits first; and the time either took.
fn start(bin: &Path, args: &[&str]) -> Result<(Option<Exporter>, Duration)> {
    let started = Instant::now();
    let mut command = Command::new(bin);
    command
        .args([
            "export",
            "--demo",
            "--frame",
            "1",
            "--listen",
            "127.0.0.1:0",
        ])
        .args(args);
    let (mut child, listening) =
        bench_setup::start_listening(&mut command, Duration::from_secs(60))?;
    match listening {
        bench_setup::Listening::On(addr) => Ok((Some(Exporter { child, addr }), started.elapsed())),
        bench_setup::Listening::Exited => {
            let took = started.elapsed();
            let _ = child.wait();
            Ok((None, took))
        }
        bench_setup::Listening::Silent => {
            let _ = child.kill();
            let _ = child.wait();
            bail!("{} neither listened nor exited in 60 s", bin.display());
        }
    }
}

/// Writes a web config with basic auth `users` (name, hash) as `dir/name`; its path.
fn web_config(dir: &Path, name: &str, users: &[(&str, &str)]) -> Result<String> {
    loopback::web_config(dir, name, users)
        .with_context(|| format!("cannot write {}", dir.join(name).display()))
}

/// The time of a login from `from` answered 200 within 60 s, or what it got instead.
fn timed_login(addr: &str, from: &str, auth: &str) -> std::result::Result<Duration, String> {
    let t = Instant::now();
    match connect(from, addr, Duration::from_secs(60))
        .and_then(|mut s| get_status(&mut s, &[("Authorization", auth)]))
    {
        Ok(200) => Ok(t.elapsed()),
        Ok(status) => Err(format!("answered {status} after {}", ms(t.elapsed()))),
        Err(e) => Err(format!("{e} after {}", ms(t.elapsed()))),
    }
}
