//! `gpuscope doctor`: what this machine's NVML costs and tells, and what stands in the way of
//! a full view (docs/doctor.md).
//!
//! Every query of the query table is asked `--repeat` times on each device through
//! `gpu_backend::cost::TimedBackend`, whose observer here keeps each NVML function's median
//! cost (`CostCollector`), what each query answered when it failed, and, when calls are logged
//! (`-vv`), logs each call as `CallLog` does: the log and the report come from the same calls.
//! `nvmlInit_v2` and `nvmlShutdown` are the NVML backend's own timings. Then events are counted
//! by kind over `--events-for`, and the host is checked for what hides processes (`hidepid` on
//! /proc, a PID namespace). Each finding gets a verdict (ok, warn, fail) and, where there is a
//! fix, a hint. `--json` prints the cost profile alone, in `gpu_backend::cost::CostProfile`'s
//! form, so that it loads as fake-nvml's `GPUSCOPE_FAKE_NVML_COSTS` or a fixture's
//! `nvml_costs`. `--bundle FILE` records a short, scrubbed recording for a bug report
//! (`bundle.rs`).

mod bundle;
mod timeline;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::Result;
use gpu_backend::cost::{
    CallLog, CallObserver, CallRecord, CostCollector, CostProfile, OutsideCall, OutsideCalls,
    Timing,
};
use gpu_backend::host::HostSource;
use gpu_backend::query::{Query, QUERIES};
use gpu_backend::recorder::{self, Snapshot};
use gpu_backend::{Answer, BackendError, DeviceId, EventKind, Fixture, GpuBackend, SourceBackend};
use gpu_devices::text::Escaped;

use crate::cli::args;
use crate::source::SourceArgs;

mod driver;

/// A call slower than this (wall, median) is a finding of its own.
const SLOW_CALL: Duration = Duration::from_millis(1);

/// Clock and P-state events faster than this (per second, one GPU) are a finding: each wakes
/// a listener registered for them.
const EVENT_FLOOD_PER_S: f64 = 10.0;

/// How often the events are read during the window.
const EVENT_POLL: Duration = Duration::from_millis(100);

/// The most GPU processes named in the finding about PIDs missing from /proc.
const PIDS_SHOWN: usize = 8;

/// Check what NVML costs and tells on this machine, and what hides processes.
#[derive(Debug, clap::Args)]
#[command(after_help = crate::error::EXIT_CODES_HELP)]
pub struct Args {
    #[command(flatten)]
    source: SourceArgs,
    /// Ask every query this many times on each device; each NVML function's cost is the median
    /// of its calls. 1 to 100.
    #[arg(long, value_name = "N", default_value = "5", value_parser = args::whole::<u32>(args::DOCTOR_REPEAT))]
    repeat: u32,
    /// Count the events that arrive, by kind, for this long (0 skips). At most 1m.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = args::duration(args::DOCTOR_EVENTS_FOR))]
    events_for: Duration,
    /// Print only the cost profile, as JSON: each NVML function's median wall and CPU
    /// microseconds per call, `{"nvmlDeviceGetPowerUsage": {"wall_us": 3.4, "cpu_us": 2.7}}`, the
    /// form of a fixture's `nvml_costs` and of fake-nvml's GPUSCOPE_FAKE_NVML_COSTS file. The
    /// exit status still tells the findings; failed ones are written to stderr. When NVML cannot
    /// be opened: the verdicts on the driver's pieces, as JSON (docs/doctor.md).
    #[arg(long)]
    json: bool,
    /// Also record FILE for a bug report: a short recording of this machine (one frame a
    /// second for --bundle-seconds) with each NVML function's cost, host names, user names,
    /// command lines, container names and GPU UUIDs, serials and board part numbers replaced
    /// by pseudonyms. Name it `.json.zst` to compress it; a maintainer replays it with
    /// `--fixture FILE`. Ctrl+C stops early and keeps what was recorded; never written
    /// through a symbolic link.
    #[arg(long, value_name = "FILE")]
    bundle: Option<PathBuf>,
    /// How long `--bundle` records. 1s to 1m.
    #[arg(long, value_name = "DURATION", default_value = "10s", requires = "bundle", value_parser = args::duration(args::DOCTOR_BUNDLE_SECONDS))]
    bundle_seconds: Duration,
    /// Time one one-shot, step by step, by running it as a child: this gpuscope command (its
    /// words after `gpuscope`: snapshot, info, select, stat or smi, e.g. `smi -L`), over the
    /// same source; `none` times nothing. The "One-shot timeline" section, and `oneshot_timeline` in --json.
    #[arg(long, value_name = "COMMAND", default_value = timeline::DEFAULT_COMMAND)]
    timeline_of: String,
    /// For tests: read the driver's files (/proc, /dev, /etc/ld.so.cache, the library folders)
    /// under this directory instead of `/`, and load the NVML library found there.
    #[arg(long, value_name = "DIR", env = "GPUSCOPE_DOCTOR_ROOT", hide = true)]
    host_root: Option<std::path::PathBuf>,
}

/// A finding's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    /// Nothing to do.
    Ok,
    /// Works, with less than it could: the hint says how to get the rest.
    Warn,
    /// Something is broken.
    Fail,
}

impl Verdict {
    fn word(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Warn => "warn",
            Verdict::Fail => "FAIL",
        }
    }
}

/// One line of the verdicts: what was checked, what was found, and how to fix it.
#[derive(Debug, Clone)]
pub struct Finding {
    verdict: Verdict,
    /// What was checked (`versions`, `hidepid`).
    topic: &'static str,
    /// What was found, one line; outside text already escaped.
    summary: String,
    /// How to fix it, where there is a fix.
    hint: Option<String>,
}

/// One line per finding (its verdict, topic and summary) and its hint below it: the
/// "Verdicts" section of both reports, with NVML and without (driver.rs).
fn write_verdicts(out: &mut String, findings: &[Finding]) {
    for f in findings {
        let _ = writeln!(
            out,
            "  {:<5} {:<14} {}",
            f.verdict.word(),
            f.topic,
            f.summary
        );
        if let Some(h) = &f.hint {
            let _ = writeln!(out, "  {:<5} {:<14} hint: {h}", "", "");
        }
    }
}

impl Finding {
    fn new(verdict: Verdict, topic: &'static str, summary: impl Into<String>) -> Finding {
        Finding {
            verdict,
            topic,
            summary: summary.into(),
            hint: None,
        }
    }

    fn hint(mut self, hint: impl Into<String>) -> Finding {
        self.hint = Some(hint.into());
        self
    }
}

/// Runs `gpuscope doctor`.
pub fn run(args: Args) -> Result<()> {
    if let Some(path) = &args.bundle {
        bundle::check_path(path).map_err(crate::error::UsageError)?;
    }
    timeline::check_command(&args.timeline_of).map_err(crate::error::UsageError)?;
    // First, while this process holds no NVML session: the one-shot meets the driver as a
    // user's command does when nothing else has it open.
    // (Not with --host-root: the tests' prepared machine is not where the child would look.)
    let oneshot = match args.host_root {
        Some(_) => Ok(None),
        None => timeline::measure(&args.timeline_of, &args.source),
    };
    // From before the library is loaded: every call the NVML backend makes outside a query.
    let outside = OutsideCalls::start();
    let opened = Instant::now();
    // Without NVML, the driver's pieces are checked instead, and doctor ends there (exit 4).
    let source = driver::open(
        &args.source,
        args.host_root.as_deref(),
        &EventKind::ALL,
        args.json,
    )?;
    let plan = match &args.bundle {
        Some(path) => Some(bundle::Plan::new(path.clone(), args.bundle_seconds)?),
        None => None,
    };
    // With the real GPUs, the bundle records this machine's host facts.
    let host = source.proc_root.as_ref().map(|proc| {
        gpu_backend::host::LiveHost::with_roots(gpu_backend::HostRoots {
            proc: proc.clone(),
            ..args.source.host_roots()
        })
    });
    let host = host.as_ref().map(|h| h as &dyn HostSource);
    let (mut report, recording) = examine(
        source.backend,
        &args,
        source.proc_root.as_deref(),
        host,
        plan.as_ref(),
        (outside, opened),
    )?;
    report.findings.push(match &oneshot {
        Ok(Some(t)) => Finding::new(Verdict::Ok, "one-shot", timeline::summary(t)),
        Ok(None) => Finding::new(
            Verdict::Ok,
            "one-shot",
            "not timed (--timeline-of none, or a replay of --demo)",
        ),
        Err(e) => Finding::new(
            Verdict::Warn,
            "one-shot",
            format!("not timed: {}", Escaped(e)),
        ),
    });
    report.profile.oneshot_timeline = oneshot.as_ref().ok().cloned().flatten();
    report.oneshot = oneshot;
    if let (Some(plan), Some(recording)) = (&plan, recording) {
        plan.write(recording, report.profile.clone())?;
    }
    let fails = report
        .findings
        .iter()
        .filter(|f| f.verdict == Verdict::Fail)
        .count();
    if args.json {
        crate::output::write_stdout(&crate::output::json(&report.profile, true)?)?;
        for f in report
            .findings
            .iter()
            .filter(|f| f.verdict == Verdict::Fail)
        {
            eprintln!("gpuscope doctor: FAIL {}: {}", f.topic, f.summary);
        }
    } else {
        crate::output::write_stdout(&render(&report, &Escaped(&source.label).to_string(), &args))?;
    }
    if fails > 0 {
        anyhow::bail!(
            "doctor found {fails} failure{}",
            if fails == 1 { "" } else { "s" }
        );
    }
    Ok(())
}

/// What doctor found.
#[derive(Debug)]
pub struct Report {
    /// The NVML backend's calls outside a query, in the order made, each with when it started
    /// after the source began opening.
    setup: Vec<(Duration, OutsideCall)>,
    /// Each NVML function's median cost.
    profile: CostProfile,
    /// How many calls each function's cost is the median of.
    calls: BTreeMap<String, u64>,
    /// Queries that did not answer: by error, the query and the devices.
    unanswered: BTreeMap<ErrorGroup, BTreeMap<&'static str, BTreeSet<Device>>>,
    /// Per GPU: the event kinds listened for (or why not, or unknown for a replay) and the
    /// events counted by kind.
    events: Vec<GpuEvents>,
    /// The verdicts.
    findings: Vec<Finding>,
    /// Devices: GPUs and MIG devices.
    devices: (u32, usize),
    /// The timeline of one one-shot, if one was timed, or why it could not be.
    oneshot: std::result::Result<Option<gpu_backend::cost::OneshotTimeline>, String>,
}

/// A device, or the system, as the report names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Device {
    System,
    Id(DeviceId),
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Device::System => f.write_str("system"),
            Device::Id(id) => write!(f, "{id}"),
        }
    }
}

/// One GPU's events over the window.
#[derive(Debug)]
struct GpuEvents {
    index: u32,
    /// The kinds listened for; `None` where the source cannot tell (a replay).
    kinds: Option<std::result::Result<Vec<EventKind>, BackendError>>,
    /// Events counted by kind over the window; an error when the events could not be read.
    counted: std::result::Result<BTreeMap<EventKind, u64>, BackendError>,
}

/// The observer of every call doctor makes: the costs, the failed answers, and the log.
struct Observer {
    costs: CostCollector,
    /// The first failure of each (query, device).
    failed: Mutex<HashMap<(Query, Device), BackendError>>,
    /// Whether calls are logged (`-vv`), as `gpu_backend::Source::open` would log them.
    log: bool,
}

impl CallObserver for Observer {
    fn observe(&self, call: &CallRecord<'_>) {
        self.costs.observe(call);
        if self.log {
            CallLog.observe(call);
        }
        if let Err(e) = call.outcome {
            let device = call.device.map_or(Device::System, Device::Id);
            self.failed
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry((call.query, device))
                .or_insert_with(|| e.clone());
        }
    }
}

/// Asks everything, counts events, records the bundle of `plan` if there is one, checks the
/// host, and says what it found (with the bundle's recording). `proc_root`: the /proc the live
/// host facts are read from, and `host` those facts; `None` for a replay, whose host is not
/// this one (a bundle of a replay records the replay's host facts).
fn examine(
    backend: SourceBackend,
    args: &Args,
    proc_root: Option<&Path>,
    host: Option<&dyn HostSource>,
    plan: Option<&bundle::Plan>,
    (outside, opened): (OutsideCalls, Instant),
) -> Result<(Report, Option<Fixture>)> {
    let observer = Observer {
        costs: CostCollector::new(),
        failed: Mutex::default(),
        log: gpu_backend::cost::calls_logged(),
    };
    let stop = plan.map(|p| &*p.stop);
    let mut findings = Vec::new();
    let mut init = None;
    let mut shutdown = None;
    let (snapshot, events, recording) = match backend {
        SourceBackend::Nvml(nvml) => {
            init = Some(nvml.init_timing());
            observer.costs.add("nvmlInit_v2", nvml.init_timing());
            let timed = gpu_backend::cost::TimedBackend::new(*nvml, &observer);
            let snapshot = ask_everything(&timed, args.repeat);
            let events = count_events(&timed, &snapshot, args.events_for, stop, |i| {
                Some(timed.inner().event_kinds(i))
            });
            let recording = match (plan, host) {
                (Some(plan), Some(host)) => Some(plan.record(&timed, host)),
                _ => None,
            };
            let (nvml, _) = timed.into_parts();
            shutdown = nvml.shutdown_timed();
            if let Some(t) = shutdown {
                observer.costs.add("nvmlShutdown", t);
            }
            (snapshot, events, recording)
        }
        SourceBackend::Replay(replay) => {
            let replay_host = gpu_backend::host::ReplayHost::new(replay.clone());
            let timed = gpu_backend::cost::TimedBackend::new(replay, &observer);
            let snapshot = ask_everything(&timed, args.repeat);
            let events = count_events(&timed, &snapshot, args.events_for, stop, |_| None);
            let recording = plan.map(|plan| plan.record(&timed, &replay_host));
            (snapshot, events, recording)
        }
        _ => anyhow::bail!("this kind of source cannot be examined"),
    };
    let setup = outside.finish();
    for call in &setup {
        // `nvmlShutdown` is timed above, with the listener's end.
        if call.nvml != "nvmlShutdown" {
            observer.costs.add(call.nvml, call.timing);
        }
    }
    let setup = setup
        .into_iter()
        .map(|c| (c.started.saturating_duration_since(opened), c))
        .collect();
    let profile = observer.costs.profile();
    let calls = profile
        .keys()
        .map(|f| (f.clone(), observer.costs.calls(f)))
        .collect();
    let failed = observer
        .failed
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    let unanswered = unanswered(failed);
    let gpus = snapshot
        .statics
        .keys()
        .filter(|id| matches!(id, DeviceId::Gpu(_)))
        .count() as u32;
    let migs = snapshot.statics.len() - gpus as usize;

    findings.push(open_finding(init, shutdown));
    findings.push(versions_finding(&snapshot));
    findings.push(devices_finding(&snapshot, gpus, migs));
    findings.push(slow_finding(&profile));
    findings.extend(unanswered_findings(&unanswered));
    if !args.events_for.is_zero() {
        findings.extend(event_findings(&events, args.events_for));
    }
    match proc_root {
        Some(root) => findings.extend(host_findings(root, &snapshot)),
        None => findings.push(Finding::new(
            Verdict::Ok,
            "host",
            "not checked: a recording is replayed, and its processes are not this machine's",
        )),
    }
    let report = Report {
        setup,
        profile,
        calls,
        unanswered,
        events,
        findings,
        devices: (gpus, migs),
        oneshot: Ok(None),
    };
    Ok((report, recording))
}

/// Asks every query on every device `repeat` times; the first reading is kept.
fn ask_everything(backend: &dyn GpuBackend, repeat: u32) -> Snapshot {
    let first = recorder::snapshot(backend);
    for _ in 1..repeat {
        recorder::snapshot(backend);
    }
    first
}

/// Counts each GPU's events by kind for `window`, reading them every [`EVENT_POLL`]; the
/// kinds listened for come from `kinds`. `stop` (Ctrl+C) ends the window early.
fn count_events(
    backend: &dyn GpuBackend,
    snapshot: &Snapshot,
    window: Duration,
    stop: Option<&AtomicBool>,
    kinds: impl Fn(u32) -> Option<gpu_backend::Result<Vec<EventKind>>>,
) -> Vec<GpuEvents> {
    let gpus: Vec<u32> = snapshot
        .statics
        .keys()
        .filter_map(|id| match id {
            DeviceId::Gpu(i) => Some(*i),
            DeviceId::Mig { .. } => None,
        })
        .collect();
    let mut out: Vec<GpuEvents> = gpus
        .iter()
        .map(|&index| GpuEvents {
            index,
            kinds: kinds(index),
            counted: Ok(BTreeMap::new()),
        })
        .collect();
    if window.is_zero() {
        return out;
    }
    // What has arrived so far is not counted: only what comes during the window.
    let mut newest: Vec<u64> = gpus
        .iter()
        .map(|&i| {
            backend
                .events(DeviceId::Gpu(i), 0)
                .ok()
                .and_then(|list| list.last().map(|e| e.timestamp_us))
                .unwrap_or(0)
        })
        .collect();
    let start = Instant::now();
    loop {
        let elapsed = start.elapsed();
        std::thread::sleep(EVENT_POLL.min(window.saturating_sub(elapsed)));
        for (slot, gpu) in out.iter_mut().enumerate() {
            let Ok(counted) = &mut gpu.counted else {
                continue;
            };
            match backend.events(DeviceId::Gpu(gpu.index), newest[slot]) {
                Ok(list) => {
                    for e in &list {
                        *counted.entry(e.kind).or_default() += 1;
                        newest[slot] = newest[slot].max(e.timestamp_us);
                    }
                }
                Err(e) => gpu.counted = Err(e),
            }
        }
        // Ctrl+C while a bundle is asked for ends the window early: the bundle is next.
        if start.elapsed() >= window || stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
            return out;
        }
    }
}

/// The failures by error, then query, with the devices; a physical GPU's instance ids
/// answering INVALID_ARGUMENT is N/A, as everywhere (`gpu_devices::instance_id_answer`).
fn unanswered(
    failed: HashMap<(Query, Device), BackendError>,
) -> BTreeMap<ErrorGroup, BTreeMap<&'static str, BTreeSet<Device>>> {
    let mut out: BTreeMap<ErrorGroup, BTreeMap<&'static str, BTreeSet<Device>>> = BTreeMap::new();
    for ((query, device), error) in failed {
        let error = match (query, device) {
            (Query::gpu_instance_id | Query::compute_instance_id, Device::Id(id)) => {
                gpu_devices::instance_id_answer(id, Err(error)).err()
            }
            _ => Some(error),
        };
        let Some(error) = error else { continue };
        out.entry(ErrorGroup(error))
            .or_default()
            .entry(query.as_str())
            .or_default()
            .insert(device);
    }
    out
}

/// An error as the report groups it: its kind, without the driver's text, except `other`.
fn error_name(e: &BackendError) -> String {
    match e {
        BackendError::Other(text) => format!("other: {}", Escaped(text)),
        e => Escaped(&e.to_string()).to_string(),
    }
}

/// Whether an error means "cannot tell" (N/A), needs privileges, or is a failure.
fn verdict_of(error: &BackendError) -> Verdict {
    match error {
        BackendError::NoPermission => Verdict::Warn,
        e if e.is_not_available() => Verdict::Ok,
        _ => Verdict::Fail,
    }
}

/// The failures of one kind, as the report lists them: the worst verdict first, then by NVML
/// return code (a fixture's "not recorded" after "not supported", whose code it shares), then
/// an `other` failure by its text; never by the wording of the message.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ErrorGroup(BackendError);

impl ErrorGroup {
    fn verdict(&self) -> Verdict {
        verdict_of(&self.0)
    }
}

impl Ord for ErrorGroup {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        let text = |g: &ErrorGroup| match &g.0 {
            BackendError::Other(text) => Some(text.clone()),
            _ => None,
        };
        let recorded = |g: &ErrorGroup| g.0 == BackendError::NotRecorded;
        other
            .verdict()
            .cmp(&self.verdict())
            .then_with(|| self.0.nvml_code().cmp(&other.0.nvml_code()))
            .then_with(|| recorded(self).cmp(&recorded(other)))
            .then_with(|| text(self).cmp(&text(other)))
    }
}

impl PartialOrd for ErrorGroup {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl std::fmt::Display for ErrorGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&error_name(&self.0))
    }
}

/// `1 GPU`, `2 GPUs`.
fn plural(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

fn ms(t: Duration) -> String {
    format!("{:.1} ms", t.as_secs_f64() * 1000.0)
}

fn timing(t: Timing) -> String {
    match t.cpu {
        Some(cpu) => format!("{} (CPU {})", ms(t.wall), ms(cpu)),
        None => ms(t.wall),
    }
}

fn open_finding(init: Option<Timing>, shutdown: Option<Timing>) -> Finding {
    let Some(init) = init else {
        return Finding::new(Verdict::Ok, "NVML", "a recording is replayed: no NVML here");
    };
    let shutdown = shutdown.map_or_else(|| "not timed".to_string(), timing);
    Finding::new(
        Verdict::Ok,
        "NVML",
        format!(
            "loading and nvmlInit_v2 took {}, nvmlShutdown {shutdown}",
            timing(init)
        ),
    )
}

fn answer<T>(
    a: &Answer<T>,
    show: impl Fn(&T) -> String,
) -> std::result::Result<String, &BackendError> {
    match a {
        Answer::Ok(v) => Ok(show(v)),
        Answer::Err(e) => Err(e),
    }
}

fn versions_finding(s: &Snapshot) -> Finding {
    let driver = answer(&s.system.driver_version, |v| Escaped(v).to_string());
    let nvml = answer(&s.system.nvml_version, |v| Escaped(v).to_string());
    let cuda = answer(&s.system.cuda_driver_version, |v| {
        format!("{}.{}", v / 1000, (v % 1000) / 10)
    });
    let show = |r: &std::result::Result<String, &BackendError>| match r {
        Ok(v) => v.clone(),
        Err(e) => format!("unknown ({})", error_name(e)),
    };
    let summary = format!(
        "driver {}, NVML {}, CUDA {}",
        show(&driver),
        show(&nvml),
        show(&cuda)
    );
    let verdict = [&driver, &nvml, &cuda]
        .iter()
        .filter_map(|r| r.as_ref().err())
        .map(|&e| verdict_of(e).max(Verdict::Warn))
        .max()
        .unwrap_or(Verdict::Ok);
    let f = Finding::new(verdict, "versions", summary);
    if verdict == Verdict::Ok {
        f
    } else {
        f.hint("an old driver lacks the newer version queries; `nvidia-smi` shows the driver's")
    }
}

fn devices_finding(s: &Snapshot, gpus: u32, migs: usize) -> Finding {
    match &s.system.device_count {
        Answer::Err(e) => Finding::new(
            Verdict::Fail,
            "devices",
            format!("the GPUs cannot be counted: {}", error_name(e)),
        )
        .hint("`nvidia-smi` says whether the driver sees them; a lost GPU needs a reset or reboot"),
        Answer::Ok(0) => Finding::new(Verdict::Warn, "devices", "NVML lists no GPU").hint(
            "in a container, the GPUs must be handed in (`--gpus all`, the NVIDIA device plugin)",
        ),
        Answer::Ok(_) => Finding::new(
            Verdict::Ok,
            "devices",
            format!(
                "{}, {}",
                plural(gpus as usize, "GPU"),
                plural(migs, "MIG device")
            ),
        ),
    }
}

/// The NVML functions slower than [`SLOW_CALL`], with the commands that avoid them.
fn slow_finding(profile: &CostProfile) -> Finding {
    let slow_us = SLOW_CALL.as_secs_f64() * 1e6;
    let section = |function: &str| {
        QUERIES
            .iter()
            .find(|q| q.nvml == function)
            .map(|q| q.section)
    };
    let mut slow: Vec<(&String, f64)> = profile
        .iter()
        .filter(|(f, c)| {
            c.wall_us >= slow_us && !matches!(f.as_str(), "nvmlInit_v2" | "nvmlShutdown")
        })
        .map(|(f, c)| (f, c.wall_us))
        .collect();
    slow.sort_by(|a, b| b.1.total_cmp(&a.1));
    if slow.is_empty() {
        return Finding::new(
            Verdict::Ok,
            "call costs",
            format!("no NVML function takes {} or more a call", ms(SLOW_CALL)),
        );
    }
    let list: Vec<String> = slow
        .iter()
        .map(|(f, us)| format!("{f} {}", ms(Duration::from_secs_f64(us / 1e6))))
        .collect();
    let (changing, once): (Vec<&str>, Vec<&str>) = slow
        .iter()
        .map(|(f, _)| f.as_str())
        .partition(|f| section(f) == Some("dynamic"));
    let mut hints = Vec::new();
    if !changing.is_empty() {
        hints.push(format!(
            "{} asked at every refresh: a one-shot `snapshot`, `info` or `select` pays {} once, \
             `top` and `export` once per --interval (a longer one pays less)",
            changing.join(", "),
            if changing.len() == 1 { "it" } else { "them" }
        ));
    }
    if !once.is_empty() {
        hints.push(format!(
            "{} asked once per session: `top` and `export` pay {} at start only, a one-shot \
             command at each run",
            once.join(", "),
            if once.len() == 1 { "it" } else { "them" }
        ));
    }
    Finding::new(
        Verdict::Warn,
        "call costs",
        format!("over {} a call: {}", ms(SLOW_CALL), list.join(", ")),
    )
    .hint(hints.join("; "))
}

fn unanswered_findings(
    unanswered: &BTreeMap<ErrorGroup, BTreeMap<&'static str, BTreeSet<Device>>>,
) -> Vec<Finding> {
    if unanswered.is_empty() {
        return vec![Finding::new(
            Verdict::Ok,
            "answers",
            "every query answered on every device",
        )];
    }
    unanswered
        .iter()
        .map(|(error, queries)| {
            let verdict = error.verdict();
            let f = Finding::new(
                verdict,
                "answers",
                format!(
                    "{error}: {} quer{} (listed below)",
                    queries.len(),
                    if queries.len() == 1 { "y" } else { "ies" }
                ),
            );
            match verdict {
                Verdict::Ok => f,
                Verdict::Warn => f.hint(
                    "some queries need root (or CAP_SYS_ADMIN): run gpuscope as root, or accept \
                     N/A for these",
                ),
                Verdict::Fail => f.hint(
                    "`nvidia-smi -q` shows whether the driver answers these; a lost GPU needs a \
                     reset; run with -vv to see each call",
                ),
            }
        })
        .collect()
}

fn event_findings(events: &[GpuEvents], window: Duration) -> Vec<Finding> {
    let secs = window.as_secs_f64().max(1e-3);
    let mut out = Vec::new();
    let failed: Vec<String> = events
        .iter()
        .filter_map(|g| g.counted.as_ref().err().map(|e| (g.index, e)))
        .filter(|(_, e)| !e.is_not_available())
        .map(|(i, e)| format!("GPU {i}: {}", error_name(e)))
        .collect();
    if !failed.is_empty() {
        out.push(
            Finding::new(
                Verdict::Warn,
                "events",
                format!("events cannot be read: {}", failed.join(", ")),
            )
            .hint("XID and ECC errors then show only through the counters a refresh reads"),
        );
    }
    let flood: Vec<String> = events
        .iter()
        .filter_map(|g| {
            let counted = g.counted.as_ref().ok()?;
            let n: u64 = [EventKind::Clock, EventKind::Pstate]
                .iter()
                .filter_map(|k| counted.get(k))
                .sum();
            let rate = n as f64 / secs;
            (rate > EVENT_FLOOD_PER_S).then(|| format!("GPU {} {rate:.1}/s", g.index))
        })
        .collect();
    if flood.is_empty() {
        let total: u64 = events
            .iter()
            .filter_map(|g| g.counted.as_ref().ok())
            .flat_map(|c| c.values())
            .sum();
        out.push(Finding::new(
            Verdict::Ok,
            "events",
            format!(
                "{} in {} on {}",
                plural(total as usize, "event"),
                args::show_duration(window),
                plural(events.len(), "GPU")
            ),
        ));
    } else {
        out.push(
            Finding::new(
                Verdict::Warn,
                "events",
                format!("clock and P-state events flood: {}", flood.join(", ")),
            )
            .hint(
                "a power-capped GPU changes clocks dozens of times a second; gpuscope listens \
                 only for health events (XID, ECC, ...) and reads clocks at each refresh; \
                 other tools registered for every event kind wake that often",
            ),
        );
    }
    out
}

/// `hidepid` and the PID namespace, and whether the GPU processes NVML lists are in /proc.
fn host_findings(proc_root: &Path, s: &Snapshot) -> Vec<Finding> {
    let mut out = Vec::new();
    // Bounded as every read of a host file (docs/security.md): a node with thousands of mounts
    // writes a few hundred kilobytes; beyond the cap the finding is unknown.
    let mountinfo = gpu_backend::files::read_regular_to_string(
        Path::new("/proc/self/mountinfo"),
        driver::MAX_MOUNTINFO,
    )
    .ok();
    let mount_point = std::fs::canonicalize(proc_root).unwrap_or_else(|_| proc_root.into());
    let mount_point = mount_point.to_string_lossy();
    out.push(
        match mountinfo
            .as_deref()
            .and_then(|m| proc_mount(m, &mount_point))
        {
            None => Finding::new(
                Verdict::Warn,
                "hidepid",
                format!(
                    "no proc file system is mounted at {}",
                    Escaped(&mount_point)
                ),
            )
            .hint("--proc-root names the directory where the host's /proc is mounted"),
            Some(m) => hidepid_finding(&m, &Credentials::current()),
        },
    );
    let nspid = gpu_backend::host::own_pid_namespace_depth();
    let missing = pids_missing(proc_root, s);
    out.push(namespace_finding(
        nspid,
        proc_root != Path::new("/proc"),
        &missing,
    ));
    out
}

/// Who this process is, for `hidepid`.
struct Credentials {
    root: bool,
    groups: Vec<u32>,
}

impl Credentials {
    fn current() -> Credentials {
        // SAFETY: plain system calls without pointers, or with a buffer of the size given.
        let (euid, egid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let mut groups = vec![egid];
        let mut buf = vec![0 as libc::gid_t; 256];
        // SAFETY: `buf` holds 256 gids.
        let n = unsafe { libc::getgroups(256, buf.as_mut_ptr()) };
        if let Ok(n) = usize::try_from(n) {
            groups.extend(&buf[..n.min(buf.len())]);
        }
        Credentials {
            root: euid == 0,
            groups,
        }
    }
}

/// The options of the proc mount at /proc that hide processes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcMount {
    /// `hidepid=` as written (`2`, `invisible`); `None` when not set.
    pub hidepid: Option<String>,
    /// `gid=`: the group exempt from `hidepid`.
    pub gid: Option<u32>,
}

/// The last proc file system mounted at `at` (`/proc`) in `/proc/self/mountinfo`'s text
/// (mountinfo(5): `ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE
/// SUPEROPTIONS`); the later mount hides the earlier. `None` when there is none.
pub fn proc_mount(mountinfo: &str, at: &str) -> Option<ProcMount> {
    mountinfo.lines().rev().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let mount_point = left.split(' ').nth(4)?;
        let mut right = right.split(' ');
        let fstype = right.next()?;
        let _source = right.next()?;
        let options = right.next().unwrap_or("");
        (mount_point == at && fstype == "proc").then(|| {
            let option = |name: &str| {
                options
                    .split(',')
                    .find_map(|o| o.strip_prefix(name)?.strip_prefix('='))
            };
            ProcMount {
                hidepid: option("hidepid").map(str::to_string),
                gid: option("gid").and_then(|g| g.parse().ok()),
            }
        })
    })
}

fn hidepid_finding(m: &ProcMount, who: &Credentials) -> Finding {
    let hidden = match m.hidepid.as_deref() {
        None | Some("0") | Some("off") => None,
        Some(v) => Some(Escaped(v).to_string()),
    };
    let Some(value) = hidden else {
        return Finding::new(Verdict::Ok, "hidepid", "/proc shows every user's processes");
    };
    let exempt = m.gid.is_some_and(|g| who.groups.contains(&g));
    if who.root || exempt {
        return Finding::new(
            Verdict::Ok,
            "hidepid",
            format!(
                "/proc is mounted with hidepid={value}, which does not hide processes from {}",
                if who.root {
                    "root"
                } else {
                    "this user (in the gid= group)"
                }
            ),
        );
    }
    let gid = m.gid.map_or_else(
        || "a gid= group on the mount".to_string(),
        |g| format!("group {g}"),
    );
    Finding::new(
        Verdict::Warn,
        "hidepid",
        format!(
            "/proc is mounted with hidepid={value}: other users' processes show without user \
             and command"
        ),
    )
    .hint(format!("run gpuscope as root, or add this user to {gid}"))
}

/// The GPU processes NVML lists (host PIDs) that `proc_root` has no directory for.
fn pids_missing(proc_root: &Path, s: &Snapshot) -> (usize, Vec<u32>) {
    let mut pids = BTreeSet::new();
    for d in s.dynamics.values() {
        for list in [&d.compute_processes, &d.graphics_processes] {
            if let Answer::Ok(list) = list {
                pids.extend(list.iter().map(|p| p.pid));
            }
        }
    }
    let missing = pids
        .iter()
        .copied()
        .filter(|pid| !proc_root.join(pid.to_string()).exists())
        .collect();
    (pids.len(), missing)
}

fn namespace_finding(
    depth: Option<usize>,
    own_root: bool,
    (listed, missing): &(usize, Vec<u32>),
) -> Finding {
    let nested = depth.is_some_and(|d| d > 1);
    let shown: Vec<String> = missing
        .iter()
        .take(PIDS_SHOWN)
        .map(u32::to_string)
        .collect();
    let more = if missing.len() > PIDS_SHOWN {
        ", ..."
    } else {
        ""
    };
    let hint = "in Kubernetes set `hostPID: true` on the DaemonSet (deploy/); in a container, \
                `--pid=host`, or mount the host's /proc and pass --proc-root";
    if !missing.is_empty() {
        let why = if nested {
            "this process is in a PID namespace, and NVML names host PIDs"
        } else {
            "they may have just exited, or /proc is another PID namespace's"
        };
        return Finding::new(
            Verdict::Warn,
            "PID namespace",
            format!(
                "{} of the {listed} GPU processes NVML lists are not in /proc ({}{more}): {why}",
                missing.len(),
                shown.join(", ")
            ),
        )
        .hint(hint);
    }
    if nested && !own_root {
        return Finding::new(
            Verdict::Warn,
            "PID namespace",
            format!(
                "this process is {} PID namespaces deep: /proc shows the container's processes, \
                 NVML the host's",
                depth.unwrap_or(0)
            ),
        )
        .hint(hint);
    }
    Finding::new(
        Verdict::Ok,
        "PID namespace",
        match (nested, listed) {
            (true, _) => format!(
                "in a PID namespace, reading the host's /proc; {listed} GPU processes found"
            ),
            (false, 0) => "the host's PID namespace; no GPU process runs now to cross-check".into(),
            (false, n) => format!("the host's PID namespace; all {n} GPU processes are in /proc"),
        },
    )
}

/// The report for people.
fn render(r: &Report, label: &str, args: &Args) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "gpuscope doctor: {label}, {} and {}, every query asked {} on each",
        plural(r.devices.0 as usize, "GPU"),
        plural(r.devices.1, "MIG device"),
        plural(args.repeat as usize, "time")
    );
    out.push_str("\nVerdicts\n");
    write_verdicts(&mut out, &r.findings);
    out.push_str("\nNVML call costs (median per call, microseconds)\n");
    let _ = writeln!(
        out,
        "  {:<48} {:>10} {:>10} {:>6}",
        "FUNCTION", "WALL us", "CPU us", "CALLS"
    );
    let mut rows: Vec<_> = r.profile.iter().collect();
    rows.sort_by(|a, b| b.1.wall_us.total_cmp(&a.1.wall_us).then(a.0.cmp(b.0)));
    for (f, c) in rows {
        let _ = writeln!(
            out,
            "  {:<48} {:>10.1} {:>10.1} {:>6}",
            Escaped(f).to_string(),
            c.wall_us,
            c.cpu_us,
            r.calls.get(f).copied().unwrap_or(0)
        );
    }
    render_setup(&mut out, &r.setup);
    timeline::render(&mut out, &r.oneshot);
    out.push_str("\nNot answered (by error: query on devices)\n");
    if r.unanswered.is_empty() {
        out.push_str("  none\n");
    }
    for (error, queries) in &r.unanswered {
        let _ = writeln!(out, "  {error}:");
        for (query, devices) in queries {
            let devices: Vec<String> = devices.iter().map(Device::to_string).collect();
            let _ = writeln!(out, "    {query} ({})", devices.join(", "));
        }
    }
    if args.events_for.is_zero() {
        out.push_str("\nEvents: not counted (--events-for 0)\n");
    } else {
        let secs = args.events_for.as_secs_f64().max(1e-3);
        let _ = writeln!(
            out,
            "\nEvents (counted for {})",
            args::show_duration(args.events_for)
        );
        for g in &r.events {
            let kinds = match &g.kinds {
                None => "kinds sent: unknown (a replay)".to_string(),
                Some(Ok(k)) if k.is_empty() => "sends no kind".to_string(),
                Some(Ok(k)) => format!(
                    "sends {}",
                    k.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
                ),
                Some(Err(e)) => format!("not listened to: {}", error_name(e)),
            };
            let rate = match &g.counted {
                Err(e) => format!("cannot be read: {}", error_name(e)),
                Ok(c) => {
                    let total: u64 = c.values().sum();
                    let by_kind: Vec<String> = c
                        .iter()
                        .map(|(k, n)| format!("{} {:.1}/s", k.name(), *n as f64 / secs))
                        .collect();
                    if by_kind.is_empty() {
                        "0/s".to_string()
                    } else {
                        format!("{:.1}/s: {}", total as f64 / secs, by_kind.join(", "))
                    }
                }
            };
            let _ = writeln!(out, "  GPU {}: {kinds}; {rate}", g.index);
        }
    }
    let count = |verdict: Verdict| r.findings.iter().filter(|f| f.verdict == verdict).count();
    let (fails, warns) = (count(Verdict::Fail), count(Verdict::Warn));
    let _ = writeln!(out, "\n{} failed, {}", fails, plural(warns, "warning"));
    out
}

/// The most set-up calls listed one by one (all are costed).
const SETUP_SHOWN: usize = 40;

/// The NVML backend's calls outside a query, in the order made.
fn render_setup(out: &mut String, setup: &[(Duration, OutsideCall)]) {
    out.push_str("\nCalls outside the queries (in the order made; ms after opening began)\n");
    if setup.is_empty() {
        out.push_str("  none (a recording is replayed)\n");
        return;
    }
    let _ = writeln!(
        out,
        "  {:>9}  {:<40} {:<8} {:>10} {:>10}  THREAD",
        "AT ms", "FUNCTION", "DEVICE", "WALL us", "CPU us"
    );
    for (at, c) in setup.iter().take(SETUP_SHOWN) {
        let _ = writeln!(
            out,
            "  {:>9.3}  {:<40} {:<8} {:>10.1} {:>10.1}  {}{}",
            at.as_secs_f64() * 1e3,
            c.nvml,
            c.device.map_or_else(|| "-".to_string(), |d| d.to_string()),
            c.timing.wall.as_secs_f64() * 1e6,
            c.timing.cpu.map_or(0.0, |t| t.as_secs_f64() * 1e6),
            Escaped(c.thread.as_deref().unwrap_or("-")),
            if c.ok { "" } else { " (failed)" }
        );
    }
    if setup.len() > SETUP_SHOWN {
        let _ = writeln!(out, "  ... {} more", setup.len() - SETUP_SHOWN);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The report's error groups in the order a reader meets them: the failures first, then
    /// what needs privileges, then what cannot tell, each kind by its NVML code; "other"
    /// failures by their text. Their wording (which sorts "the GPU is lost" after "not
    /// supported") plays no part.
    #[test]
    fn errors_are_listed_worst_first_then_by_nvml_code_not_by_their_wording() {
        let gpu = Device::Id(DeviceId::Gpu(0));
        let failed: HashMap<(Query, Device), BackendError> = [
            (Query::fan_speed, BackendError::NotRecorded),
            (Query::power_usage, BackendError::NotSupported),
            (Query::temperature, BackendError::NoPermission),
            (Query::name, BackendError::Other("b".into())),
            (Query::uuid, BackendError::GpuLost),
            (Query::serial, BackendError::Other("a".into())),
            (Query::pci_info, BackendError::InvalidArgument),
        ]
        .into_iter()
        .map(|(q, e)| ((q, gpu), e))
        .collect();
        let order: Vec<String> = unanswered(failed).keys().map(|g| g.to_string()).collect();
        assert_eq!(
            order,
            [
                BackendError::InvalidArgument.to_string(),
                BackendError::GpuLost.to_string(),
                "other: a".into(),
                "other: b".into(),
                BackendError::NoPermission.to_string(),
                BackendError::NotSupported.to_string(),
                BackendError::NotRecorded.to_string(),
            ]
        );
    }

    const MOUNTINFO: &str = "\
22 1 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
25 22 0:23 / /proc/sys/fs/binfmt_misc rw,relatime shared:13 - autofs systemd-1 rw,fd=29
40 22 0:40 / /proc rw,relatime - proc proc rw,hidepid=invisible,gid=27
";

    #[test]
    fn the_last_proc_mount_at_proc_is_the_one_seen() {
        assert_eq!(
            proc_mount(MOUNTINFO, "/proc"),
            Some(ProcMount {
                hidepid: Some("invisible".into()),
                gid: Some(27)
            })
        );
        let first_only = MOUNTINFO.lines().next().unwrap();
        assert_eq!(
            proc_mount(first_only, "/proc"),
            Some(ProcMount {
                hidepid: None,
                gid: None
            })
        );
        assert_eq!(proc_mount("not a mountinfo line\n", "/proc"), None);
        // `--proc-root /host/proc`: the mount there, not /proc's.
        assert_eq!(proc_mount(MOUNTINFO, "/host/proc"), None);
    }

    #[test]
    fn hidepid_warns_unless_root_or_in_the_gid_group() {
        let m = proc_mount(MOUNTINFO, "/proc").unwrap();
        let user = Credentials {
            root: false,
            groups: vec![1000],
        };
        let f = hidepid_finding(&m, &user);
        assert_eq!(f.verdict, Verdict::Warn);
        assert!(f.hint.unwrap().contains("group 27"));
        let member = Credentials {
            root: false,
            groups: vec![1000, 27],
        };
        assert_eq!(hidepid_finding(&m, &member).verdict, Verdict::Ok);
        let root = Credentials {
            root: true,
            groups: vec![0],
        };
        assert_eq!(hidepid_finding(&m, &root).verdict, Verdict::Ok);
        let off = ProcMount {
            hidepid: Some("0".into()),
            gid: None,
        };
        assert_eq!(hidepid_finding(&off, &user).verdict, Verdict::Ok);
    }

    #[test]
    fn a_nested_namespace_or_missing_pids_warn_with_the_host_pid_hint() {
        let f = namespace_finding(Some(2), false, &(0, vec![]));
        assert_eq!(f.verdict, Verdict::Warn);
        assert!(f.hint.unwrap().contains("hostPID: true"));
        assert_eq!(
            namespace_finding(Some(2), true, &(3, vec![])).verdict,
            Verdict::Ok
        );
        let f = namespace_finding(Some(1), false, &(3, vec![77]));
        assert_eq!(f.verdict, Verdict::Warn);
        assert!(f.summary.contains("1 of the 3"), "{}", f.summary);
        assert_eq!(
            namespace_finding(Some(1), false, &(3, vec![])).verdict,
            Verdict::Ok
        );
    }

    proptest! {
        #[test]
        fn the_parsers_never_panic(text in ".{0,400}") {
            let _ = proc_mount(&text, "/proc");
        }

        #[test]
        fn a_proc_mount_line_is_read_whatever_its_options(
            id in 1u32..1000, hide in "[a-z0-9]{1,10}", gid in any::<u32>(),
        ) {
            let line = format!("{id} 1 0:5 / /proc rw shared:1 - proc proc rw,hidepid={hide},gid={gid}\n");
            prop_assert_eq!(
                proc_mount(&line, "/proc"),
                Some(ProcMount { hidepid: Some(hide), gid: Some(gid) })
            );
        }
    }
}
