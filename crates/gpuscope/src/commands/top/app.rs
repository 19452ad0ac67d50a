//! The viewer's state: the latest sample, bounded histories, sorting, filtering, the tree view,
//! selection and tags, and which screen is shown. Nothing here talks to a backend.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::time::Duration;

use gpu_backend::fixture::HostFrame;
use gpu_backend::host::HostMachine;
use gpu_devices::DeviceId;
use gpu_processes::{GpuProcess, Snapshots};

/// Why a replay sends no signal, for the status line.
pub const REPLAY_NO_SIGNALS: &str =
    "signals are off: this is a replay of a recording, not this machine's processes";

/// How many samples each history keeps.
pub const HISTORY_LEN: usize = 240;

/// One refresh, as the sampler thread sends it.
#[derive(Debug, Clone)]
pub struct Refresh {
    /// Devices and their processes.
    pub snap: Snapshots,
    /// Machine-wide host readings.
    pub host: HostFrame,
    /// Machine facts that do not change.
    pub machine: HostMachine,
    /// The host's "now" (the recorded time of the frame for a replay), ms since the epoch.
    pub now_ms: u64,
    /// Who each GPU process on the screen is, read from this machine when the sample was taken:
    /// what a signal's target is checked against. Live only; a replay's is empty (its PIDs
    /// belong to another machine).
    pub identities: HashMap<u32, ProcIdentity>,
    /// The host facts (name, user, command line) of the parents of GPU processes that are not
    /// on a GPU themselves, for the tree view: read from this machine when live, from the
    /// fixture when it recorded them (else absent).
    pub parents: HashMap<u32, gpu_backend::fixture::HostProcessFacts>,
}

/// What tells a process from a later one that reuses its PID: its start time, in clock ticks
/// since boot (`/proc/PID/stat` field 22), and the owner of `/proc/PID`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcIdentity {
    /// Start time, clock ticks after boot.
    pub start_ticks: u64,
    /// The owner's user id.
    pub uid: u32,
}

/// A bounded ring of readings, oldest first; `None` is a reading that was N/A.
#[derive(Debug, Clone, Default)]
pub struct Ring {
    values: VecDeque<Option<f64>>,
}

impl Ring {
    /// Appends a reading, dropping the oldest past [`HISTORY_LEN`].
    pub fn push(&mut self, v: Option<f64>) {
        if self.values.len() == HISTORY_LEN {
            self.values.pop_front();
        }
        self.values.push_back(v);
    }

    /// The newest `n` readings, oldest first.
    pub fn last(&self, n: usize) -> impl Iterator<Item = Option<f64>> + '_ {
        self.values
            .iter()
            .skip(self.values.len().saturating_sub(n))
            .copied()
    }

    /// How many readings are kept.
    pub fn len(&self) -> usize {
        self.values.len()
    }
}

/// Histories of one device.
#[derive(Debug, Clone, Default)]
pub struct DeviceHistory {
    /// GPU utilization, percent.
    pub gpu: Ring,
    /// Memory used, percent of total.
    pub memory: Ring,
}

/// Histories of one process (by PID).
#[derive(Debug, Clone, Default)]
pub struct ProcessHistory {
    /// GPU memory, bytes (summed over its devices).
    pub gpu_memory: Ring,
    /// SM utilization, percent (summed over its devices).
    pub sm: Ring,
    /// CPU, percent of one core.
    pub cpu: Ring,
    /// Resident host memory, bytes.
    pub rss: Ring,
    /// The sample number at which it was last seen.
    seen: u64,
}

/// The process table's columns, in screen order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Column {
    /// Device id.
    Device,
    /// PID.
    Pid,
    /// User name.
    User,
    /// C, G or C+G.
    Type,
    /// GPU memory.
    GpuMem,
    /// SM utilization.
    Sm,
    /// CPU percent.
    Cpu,
    /// Host memory (RSS).
    HostMem,
    /// Running time.
    Time,
    /// Container or Kubernetes pod; shown only when some process runs in one.
    Pod,
    /// Command line.
    Command,
}

impl Column {
    /// Every column, in screen order.
    pub const ALL: [Column; 11] = [
        Column::Device,
        Column::Pid,
        Column::User,
        Column::Type,
        Column::GpuMem,
        Column::Sm,
        Column::Cpu,
        Column::HostMem,
        Column::Time,
        Column::Pod,
        Column::Command,
    ];

    /// The header text.
    pub fn title(self) -> &'static str {
        match self {
            Column::Device => "GPU",
            Column::Pid => "PID",
            Column::User => "USER",
            Column::Type => "TYPE",
            Column::GpuMem => "GPU-MEM",
            Column::Sm => "SM%",
            Column::Cpu => "CPU%",
            Column::HostMem => "HOST-MEM",
            Column::Time => "TIME",
            Column::Pod => "POD",
            Column::Command => "COMMAND",
        }
    }

    /// Whether a new sort by this column starts with the largest first.
    fn descending_first(self) -> bool {
        matches!(
            self,
            Column::GpuMem | Column::Sm | Column::Cpu | Column::HostMem | Column::Time
        )
    }
}

/// Which layout of the device panel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayoutMode {
    /// Full when the terminal has room, compact otherwise.
    Auto,
    /// One line per device.
    Compact,
    /// Two lines per device, with history graphs.
    Full,
}

/// The screen shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Screen {
    /// Devices and the process table.
    Main,
    /// The key list.
    Help,
    /// One process.
    Detail(u32),
}

/// A signal the viewer can send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sig {
    /// SIGINT (as Ctrl+C would).
    Int,
    /// SIGTERM (ask to end).
    Term,
    /// SIGKILL (end at once).
    Kill,
}

impl Sig {
    /// The signal's name.
    pub fn name(self) -> &'static str {
        match self {
            Sig::Int => "SIGINT",
            Sig::Term => "SIGTERM",
            Sig::Kill => "SIGKILL",
        }
    }
}

/// A signal waiting for the user's yes or no.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingSignal {
    /// Which signal.
    pub sig: Sig,
    /// To which processes.
    pub pids: Vec<u32>,
    /// Who those processes were on the screen the user acted on (from its sample); a PID
    /// missing here could not be identified and is never signalled.
    pub shown: BTreeMap<u32, ProcIdentity>,
}

/// A parsed filter: every term must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// The text as typed.
    pub text: String,
    terms: Vec<Term>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Term {
    User(String),
    /// Any of these PIDs.
    Pid(Vec<u32>),
    Type(String),
    Device(String),
    Pod(String),
    Namespace(String),
    Container(String),
    Text(String),
}

impl Filter {
    /// Parses `user:NAME`, `pid:N` (`pid:N,M` for any of several), `type:C|G|C+G` (and
    /// `type:compute`, `type:graphics`: C or C+G, G or C+G), `gpu:ID`, `pod:NAME`,
    /// `ns:NAMESPACE`, `container:NAME` (Kubernetes names; a process outside any pod matches
    /// none) and plain words (matched, ignoring case, against the command, user, name and PID),
    /// separated by spaces.
    ///
    /// # Errors
    ///
    /// A `pid:` term that is not a number.
    pub fn parse(text: &str) -> Result<Filter, String> {
        let mut terms = Vec::new();
        for word in text.split_whitespace() {
            let term = match word.split_once(':') {
                Some(("user", v)) => Term::User(v.to_string()),
                Some(("pid", v)) => Term::Pid(
                    v.split(',')
                        .map(|p| {
                            p.parse()
                                .map_err(|_| format!("pid:{v}: a PID is a whole number"))
                        })
                        .collect::<Result<_, _>>()?,
                ),
                Some(("type", v)) => Term::Type(v.to_ascii_uppercase()),
                Some(("gpu", v)) => Term::Device(v.to_string()),
                Some(("pod", v)) => Term::Pod(v.to_string()),
                Some(("ns", v)) => Term::Namespace(v.to_string()),
                Some(("container", v)) => Term::Container(v.to_string()),
                _ => Term::Text(word.to_lowercase()),
            };
            terms.push(term);
        }
        Ok(Filter {
            text: text.trim().to_string(),
            terms,
        })
    }

    /// True when the filter keeps everything.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Whether `p` passes.
    pub fn matches(&self, p: &GpuProcess) -> bool {
        self.terms.iter().all(|t| match t {
            Term::User(u) => p.host.user.as_deref() == Some(u.as_str()),
            Term::Pid(pids) => pids.contains(&p.pid),
            Term::Type(k) => match k.as_str() {
                "COMPUTE" => matches!(p.kind_str(), "C" | "C+G"),
                "GRAPHICS" => matches!(p.kind_str(), "G" | "C+G"),
                k => p.kind_str() == k,
            },
            Term::Device(d) => p.device.to_string() == *d,
            Term::Pod(v) => container_is(p, |c| &c.pod, v),
            Term::Namespace(v) => container_is(p, |c| &c.namespace, v),
            Term::Container(v) => container_is(p, |c| &c.container, v),
            Term::Text(w) => {
                let hay = [
                    p.host.command.as_deref(),
                    p.host.user.as_deref(),
                    p.host.name.as_deref(),
                ];
                p.pid.to_string().contains(w.as_str())
                    || hay
                        .iter()
                        .flatten()
                        .any(|s| s.to_lowercase().contains(w.as_str()))
            }
        })
    }
}

/// Whether a container fact of `p` is `value`; never for a process outside any container or
/// one whose fact is not known.
fn container_is(
    p: &GpuProcess,
    field: impl Fn(&gpu_backend::ContainerFacts) -> &Option<String>,
    value: &str,
) -> bool {
    p.host
        .container
        .as_ref()
        .is_some_and(|c| field(c).as_deref() == Some(value))
}

/// One row of the process table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    /// Index into the sample's processes, or `None` for a parent that is not on a GPU.
    pub process: Option<usize>,
    /// The row's PID.
    pub pid: u32,
    /// Nesting depth in the tree view (0 outside it).
    pub depth: usize,
    /// Tree view: bit `L - 1` is set when the row's ancestor at depth `L` (the row itself for
    /// `L == depth`) has a sibling further down, so its branch goes on (`├─`, `│`) rather
    /// than ending (`└─`, nothing). Depths past 64 draw as ended.
    pub more: u64,
}

/// What the viewer was started with.
#[derive(Debug, Clone)]
pub struct Options {
    /// Where the answers come from, for people.
    pub source_label: String,
    /// The processes are this machine's (NVML), not a recording's. Only then are signals sent
    /// and environments read: a replay's PIDs belong to the machine it was recorded on.
    pub live: bool,
    /// Signals are off.
    pub readonly: bool,
    /// Colours on.
    pub color: bool,
    /// ASCII only (no block or line-drawing characters).
    pub ascii: bool,
    /// Refresh interval.
    pub interval: Duration,
    /// Driver version, for the header.
    pub driver_version: Option<String>,
    /// CUDA driver version, for the header.
    pub cuda_version: Option<String>,
    /// The header's time in the local time zone (`TZ`), else in UTC.
    pub local_time: bool,
    /// GPU utilization colours: yellow from the first percent, red from the second.
    pub gpu_util_thresh: (u8, u8),
    /// GPU memory use colours: yellow from the first percent, red from the second.
    pub mem_util_thresh: (u8, u8),
    /// Colours for a light terminal background (`--light`): darker yellow, green and cyan.
    pub light: bool,
    /// Bars in spectrum colours, cell by cell (`--colorful`).
    pub colorful: bool,
}

/// The whole state of the viewer.
#[derive(Debug)]
pub struct App {
    /// Options.
    pub opts: Options,
    /// The newest sample.
    pub sample: Option<Refresh>,
    samples_seen: u64,
    /// Per-device histories.
    pub device_history: HashMap<DeviceId, DeviceHistory>,
    /// Host CPU percent history.
    pub host_cpu: Ring,
    /// Host memory percent history.
    pub host_mem: Ring,
    /// Per-PID histories (for the detail screen), dropped some time after a PID leaves.
    pub process_history: HashMap<u32, ProcessHistory>,
    /// The sort column.
    pub sort: Column,
    /// Largest first.
    pub descending: bool,
    /// The applied filter.
    pub filter: Filter,
    /// The filter being typed, when the filter prompt is open.
    pub filter_input: Option<String>,
    /// Tree view of parent processes.
    pub tree: bool,
    /// The process table grouped by Kubernetes pod, per device.
    pub by_pod: bool,
    /// Device panel layout.
    pub layout: LayoutMode,
    /// The screen shown.
    pub screen: Screen,
    /// The selected row's (PID, device), kept across refreshes.
    pub selected: Option<(u32, Option<DeviceId>)>,
    /// Tagged PIDs.
    pub tagged: BTreeSet<u32>,
    /// A signal waiting for confirmation.
    pub confirm: Option<PendingSignal>,
    /// A one-line message for the status line.
    pub status: Option<String>,
    /// The environment of the process on the detail screen: its `KEY=VALUE` lines, or why not.
    pub detail_env: Result<Vec<String>, String>,
    /// The user asked to quit.
    pub quit: bool,
}

impl App {
    /// A viewer with nothing sampled yet.
    pub fn new(opts: Options) -> App {
        App {
            opts,
            sample: None,
            samples_seen: 0,
            device_history: HashMap::new(),
            host_cpu: Ring::default(),
            host_mem: Ring::default(),
            process_history: HashMap::new(),
            sort: Column::GpuMem,
            descending: true,
            filter: Filter::default(),
            filter_input: None,
            tree: false,
            by_pod: false,
            layout: LayoutMode::Auto,
            screen: Screen::Main,
            selected: None,
            tagged: BTreeSet::new(),
            confirm: None,
            status: None,
            detail_env: Err("N/A".into()),
            quit: false,
        }
    }

    /// Takes a new sample: histories grow by one reading.
    pub fn push_sample(&mut self, sample: Refresh) {
        self.samples_seen += 1;
        for d in &sample.snap.devices {
            let h = self.device_history.entry(d.id).or_default();
            h.gpu.push(d.utilization.value().map(|u| f64::from(u.gpu)));
            h.memory.push(
                d.memory
                    .value()
                    .and_then(|m| (m.total > 0).then(|| m.used as f64 * 100.0 / m.total as f64)),
            );
        }
        self.host_cpu.push(sample.host.cpu_percent);
        self.host_mem.push(
            match (sample.host.memory_used, sample.machine.memory_total) {
                (Some(u), Some(t)) if t > 0 => Some(u as f64 * 100.0 / t as f64),
                _ => None,
            },
        );
        let mut per_pid: HashMap<u32, (Option<u64>, Option<u32>, &GpuProcess)> = HashMap::new();
        for p in &sample.snap.processes {
            let e = per_pid.entry(p.pid).or_insert((None, None, p));
            if let Some(m) = p.gpu_memory {
                e.0 = Some(e.0.unwrap_or(0) + m);
            }
            if let Some(sm) = p.utilization.sm {
                e.1 = Some(e.1.unwrap_or(0) + sm);
            }
        }
        for (pid, (mem, sm, p)) in per_pid {
            let h = self.process_history.entry(pid).or_default();
            h.gpu_memory.push(mem.map(|m| m as f64));
            h.sm.push(sm.map(f64::from));
            h.cpu.push(p.host.cpu_percent);
            h.rss.push(p.host.rss.map(|r| r as f64));
            h.seen = self.samples_seen;
        }
        let now = self.samples_seen;
        self.process_history
            .retain(|_, h| now - h.seen < HISTORY_LEN as u64);
        self.sample = Some(sample);
    }

    /// Whether any process of the newest sample runs in a container (the POD column is shown
    /// then only, so a machine without containers keeps its columns).
    pub fn shows_pods(&self) -> bool {
        self.sample
            .as_ref()
            .is_some_and(|s| s.snap.processes.iter().any(|p| p.host.container.is_some()))
    }

    /// The view grouped by pod: one entry per (device, Kubernetes pod) over the processes that
    /// pass the filter, in device order, then most GPU memory first; and how many of those
    /// processes run in no pod.
    pub fn pod_groups(&self) -> (Vec<PodGroup>, usize) {
        let Some(sample) = &self.sample else {
            return (Vec::new(), 0);
        };
        let mut groups: Vec<(String, PodGroup)> = Vec::new();
        let mut outside = 0;
        for p in sample
            .snap
            .processes
            .iter()
            .filter(|p| self.filter.matches(p))
        {
            let Some(uid) = p.host.container.as_ref().and_then(|c| c.pod_uid.clone()) else {
                outside += 1;
                continue;
            };
            let i = match groups
                .iter()
                .position(|(u, g)| *u == uid && g.device == p.device)
            {
                Some(i) => i,
                None => {
                    let label = pod_label(p).unwrap_or_else(|| format!("pod {uid}"));
                    groups.push((
                        uid,
                        PodGroup {
                            device: p.device,
                            label,
                            processes: 0,
                            gpu_memory: Some(0),
                            sm: None,
                        },
                    ));
                    groups.len() - 1
                }
            };
            let g = &mut groups[i].1;
            g.processes += 1;
            g.gpu_memory = match (g.gpu_memory, p.gpu_memory) {
                (Some(sum), Some(m)) => Some(sum.saturating_add(m)),
                _ => None,
            };
            if let Some(sm) = p.utilization.sm {
                g.sm = Some(g.sm.unwrap_or(0).saturating_add(sm));
            }
        }
        let mut groups: Vec<PodGroup> = groups.into_iter().map(|(_, g)| g).collect();
        groups.sort_by(|a, b| {
            a.device
                .cmp(&b.device)
                .then(b.gpu_memory.cmp(&a.gpu_memory))
                .then(a.label.cmp(&b.label))
        });
        (groups, outside)
    }

    /// The rows of the process table: filtered, sorted, and nested in the tree view.
    pub fn rows(&self) -> Vec<Row> {
        let Some(sample) = &self.sample else {
            return Vec::new();
        };
        let procs = &sample.snap.processes;
        let mut idx: Vec<usize> = (0..procs.len())
            .filter(|&i| self.filter.matches(&procs[i]))
            .collect();
        idx.sort_by(|&a, &b| {
            let o = compare(self.sort, &procs[a], &procs[b]);
            let o = if self.descending { o.reverse() } else { o };
            o.then_with(|| procs[a].pid.cmp(&procs[b].pid))
                .then_with(|| procs[a].device.cmp(&procs[b].device))
        });
        if !self.tree {
            return idx
                .into_iter()
                .map(|i| Row {
                    process: Some(i),
                    pid: procs[i].pid,
                    depth: 0,
                    more: 0,
                })
                .collect();
        }
        tree_rows(procs, &idx)
    }

    /// The index of the selected row in `rows` (the first row when nothing is selected).
    pub fn cursor(&self, rows: &[Row]) -> usize {
        let Some((pid, dev)) = self.selected else {
            return 0;
        };
        let procs = self.sample.as_ref().map(|s| &s.snap.processes);
        let device_of = |r: &Row| r.process.and_then(|i| procs.map(|p| p[i].device));
        rows.iter()
            .position(|r| r.pid == pid && device_of(r) == dev)
            .or_else(|| rows.iter().position(|r| r.pid == pid))
            .unwrap_or(0)
    }

    /// Selects row `i` of `rows` (clamped).
    pub fn select_index(&mut self, rows: &[Row], i: usize) {
        let Some(r) = rows.get(i.min(rows.len().saturating_sub(1))) else {
            self.selected = None;
            return;
        };
        let device = r
            .process
            .and_then(|i| self.sample.as_ref().map(|s| s.snap.processes[i].device));
        self.selected = Some((r.pid, device));
    }

    /// The selected row's PID, if any row is shown.
    pub fn selected_pid(&self) -> Option<u32> {
        let rows = self.rows();
        rows.get(self.cursor(&rows)).map(|r| r.pid)
    }

    /// Sorts by `col`; the same column again reverses the order.
    pub fn sort_by(&mut self, col: Column) {
        if self.sort == col {
            self.descending = !self.descending;
        } else {
            self.sort = col;
            self.descending = col.descending_first();
        }
    }

    /// The processes a signal would go to: the tagged ones, or else the selected one.
    pub fn signal_targets(&self) -> Vec<u32> {
        if self.tagged.is_empty() {
            self.selected_pid().into_iter().collect()
        } else {
            self.tagged.iter().copied().collect()
        }
    }

    /// Whether the signal keys do anything: live NVML and not `--readonly`.
    pub fn signals_on(&self) -> bool {
        self.opts.live && !self.opts.readonly
    }
}

/// Compares two processes by one column; N/A sorts below every value.
fn compare(col: Column, a: &GpuProcess, b: &GpuProcess) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    fn opt<T: PartialOrd>(a: Option<T>, b: Option<T>) -> Ordering {
        match (a, b) {
            (Some(a), Some(b)) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
            (Some(_), None) => Ordering::Greater,
            (None, Some(_)) => Ordering::Less,
            (None, None) => Ordering::Equal,
        }
    }
    match col {
        Column::Device => a.device.cmp(&b.device),
        Column::Pid => a.pid.cmp(&b.pid),
        Column::User => opt(a.host.user.as_deref(), b.host.user.as_deref()),
        Column::Type => a.kind_str().cmp(b.kind_str()),
        Column::GpuMem => opt(a.gpu_memory, b.gpu_memory),
        Column::Sm => opt(a.utilization.sm, b.utilization.sm),
        Column::Cpu => opt(a.host.cpu_percent, b.host.cpu_percent),
        Column::HostMem => opt(a.host.rss, b.host.rss),
        Column::Time => opt(a.host.running_time_s, b.host.running_time_s),
        Column::Pod => opt(pod_label(a), pod_label(b)),
        Column::Command => opt(a.host.command.as_deref(), b.host.command.as_deref()),
    }
}

/// What the POD column shows: `NAMESPACE/POD` for a Kubernetes pod whose names are known, else
/// `pod UID`, else the container's runtime and short id; `None` (N/A) outside any container.
pub fn pod_label(p: &GpuProcess) -> Option<String> {
    let c = p.host.container.as_ref()?;
    let short = |id: &str| id.chars().take(12).collect::<String>();
    Some(match (&c.namespace, &c.pod, &c.pod_uid, &c.id) {
        (Some(ns), Some(pod), _, _) => format!("{ns}/{pod}"),
        (None, Some(pod), _, _) => pod.clone(),
        (_, None, Some(uid), _) => format!("pod {uid}"),
        (_, None, None, Some(id)) => match &c.runtime {
            Some(rt) => format!("{rt}:{}", short(id)),
            None => short(id),
        },
        _ => return None,
    })
}

/// One Kubernetes pod on one device, for the view grouped by pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodGroup {
    /// The device.
    pub device: DeviceId,
    /// `NAMESPACE/POD`, or `pod UID` when the names are not known.
    pub label: String,
    /// The pod's processes on the device that pass the filter.
    pub processes: usize,
    /// Their GPU memory, summed; `None` when one of them is N/A.
    pub gpu_memory: Option<u64>,
    /// Their SM shares, summed over those with a sample; `None` when none has.
    pub sm: Option<u32>,
}

/// Nests the rows `idx` (already sorted) under their parents: a parent on a GPU holds its
/// children; children of a parent that is not on a GPU are grouped under a plain row for it.
fn tree_rows(procs: &[GpuProcess], idx: &[usize]) -> Vec<Row> {
    let pids: HashSet<u32> = idx.iter().map(|&i| procs[i].pid).collect();
    // The first row of each PID stands for it as a parent.
    let mut children: HashMap<u32, Vec<usize>> = HashMap::new();
    let mut roots: Vec<usize> = Vec::new();
    let mut outside: Vec<(u32, Vec<usize>)> = Vec::new();
    for &i in idx {
        let p = &procs[i];
        match p.host.ppid {
            Some(pp) if pp != p.pid && pids.contains(&pp) => {
                children.entry(pp).or_default().push(i);
            }
            Some(pp) if pp > 1 => match outside.iter_mut().find(|(q, _)| *q == pp) {
                Some((_, v)) => v.push(i),
                None => outside.push((pp, vec![i])),
            },
            _ => roots.push(i),
        }
    }
    let mut out = Vec::new();
    let mut shown: HashSet<u32> = HashSet::new();
    fn walk(
        procs: &[GpuProcess],
        i: usize,
        depth: usize,
        children: &HashMap<u32, Vec<usize>>,
        shown: &mut HashSet<u32>,
        out: &mut Vec<Row>,
    ) {
        let pid = procs[i].pid;
        out.push(Row {
            process: Some(i),
            pid,
            depth,
            more: 0,
        });
        // A PID on several devices shows its children once, under its first row.
        if shown.insert(pid) {
            for &c in children.get(&pid).map_or(&[][..], Vec::as_slice) {
                walk(procs, c, depth + 1, children, shown, out);
            }
        }
    }
    for &i in &roots {
        walk(procs, i, 0, &children, &mut shown, &mut out);
    }
    for (pp, kids) in &outside {
        out.push(Row {
            process: None,
            pid: *pp,
            depth: 0,
            more: 0,
        });
        for &i in kids {
            walk(procs, i, 1, &children, &mut shown, &mut out);
        }
    }
    // Rows in a parent cycle (impossible on a real host) still show, at the top level.
    let placed: HashSet<usize> = out.iter().filter_map(|r| r.process).collect();
    for &i in idx {
        if !placed.contains(&i) {
            out.push(Row {
                process: Some(i),
                pid: procs[i].pid,
                depth: 0,
                more: 0,
            });
        }
    }
    mark_branches(&mut out);
    out
}

/// Sets each row's [`Row::more`]: from the bottom up, a level goes on at a row when a row of
/// that depth comes later before any shallower one.
pub fn mark_branches(rows: &mut [Row]) {
    // later[L - 1]: a row of depth L follows, with no shallower row in between.
    let mut later: u64 = 0;
    for row in rows.iter_mut().rev() {
        let d = row.depth.min(64);
        let mask = if d == 64 { u64::MAX } else { (1u64 << d) - 1 };
        row.more = later & mask;
        // This row ends the groups deeper than it, and is a later row of its own depth.
        later &= mask;
        if d > 0 {
            later |= 1 << (d - 1);
        }
    }
}
