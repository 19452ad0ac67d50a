//! Collecting GPU processes: devices and their processes in one pass, per-process utilization
//! (each process's newest sample, [`crate::UtilizationTracker`]), and the host join.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use gpu_backend::host::{HostSource, ReplayHost};
use gpu_backend::{timeline, BackendError, DeviceId, ReplayBackend};
use gpu_devices::units::{bytes2human, timedelta2human};
use gpu_devices::{Context, CudaDevice, Device, DeviceSnapshot};
use serde::Serialize;

use crate::process::{GpuProcess, HostProcess};
use crate::utilization::{TrackedProcess, UtilizationTracker};

/// A device's process list that could not be read, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessQueryError {
    /// The device.
    pub device: DeviceId,
    /// The list: `compute_processes` or `graphics_processes`.
    pub query: String,
    /// What the backend said (no permission, the usual answer inside a container; not
    /// supported; GPU lost; ...).
    pub error: BackendError,
}

/// Devices and their processes at one moment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Snapshots {
    /// The devices asked for, in the order asked.
    pub devices: Vec<DeviceSnapshot>,
    /// One entry per (PID, device), in device order, then by PID. With MIG on, a process is
    /// listed on the MIG device it runs in, not also on the GPU.
    pub processes: Vec<GpuProcess>,
    /// The process lists that could not be read, in device order. A device's processes are
    /// unknown (see [`Snapshots::unknown_processes`]) when none of its lists could be read;
    /// when one list was read and the other failed, the processes of the one read are listed
    /// and the other's failure is here. A list the device does not support while its other
    /// list was read (graphics on a MIG device) is not a failure and is left out.
    pub errors: Vec<ProcessQueryError>,
    /// The devices none of whose process lists could be read: their processes are N/A
    /// (unknown), not none. Why is in [`Snapshots::errors`].
    pub unknown_processes: Vec<DeviceId>,
    /// How many distinct PIDs were looked up on the host.
    pub host_lookups: usize,
}

impl Snapshots {
    /// Devices with no processes: nothing measured yet, or a caller that does not need them.
    pub fn without_processes(devices: Vec<DeviceSnapshot>) -> Snapshots {
        Snapshots {
            devices,
            processes: Vec::new(),
            errors: Vec::new(),
            unknown_processes: Vec::new(),
            host_lookups: 0,
        }
    }

    /// The processes of `device` (in PID order), or, when none of its process lists could be
    /// read, why: the first list's error. An empty list means the device runs no process.
    pub fn processes_of(&self, device: DeviceId) -> Result<Vec<&GpuProcess>, &ProcessQueryError> {
        if self.unknown_processes.contains(&device) {
            if let Some(e) = self.errors.iter().find(|e| e.device == device) {
                return Err(e);
            }
        }
        Ok(self
            .processes
            .iter()
            .filter(|p| p.device == device)
            .collect())
    }

    /// The process-list failures of `device`.
    pub fn errors_of(&self, device: DeviceId) -> impl Iterator<Item = &ProcessQueryError> {
        self.errors.iter().filter(move |e| e.device == device)
    }
}

/// Collects devices and their processes, joined with host facts.
pub struct ProcessCollector {
    context: Context,
    host: Arc<dyn HostSource>,
    tracker: UtilizationTracker,
}

impl std::fmt::Debug for ProcessCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessCollector").finish_non_exhaustive()
    }
}

impl ProcessCollector {
    /// A collector over the devices of `context`, with host facts from `host`.
    pub fn new(context: Context, host: Arc<dyn HostSource>) -> ProcessCollector {
        ProcessCollector {
            context,
            host,
            tracker: UtilizationTracker::new(),
        }
    }

    /// The real GPUs with this machine's host facts, or, when `GPUSCOPE_FIXTURE` names a fixture,
    /// that fixture with its recorded host facts (replayed on wall time, looping).
    ///
    /// # Errors
    ///
    /// As [`Context::open`], or a fixture that cannot be read.
    pub fn open() -> gpu_devices::Result<ProcessCollector> {
        ProcessCollector::open_source(&gpu_backend::Source::from_env())
    }

    /// A fixture, with its recorded host facts: on wall time, looping, or pinned to `frame`.
    ///
    /// # Errors
    ///
    /// The fixture cannot be read, or `frame` is not in it
    /// ([`gpu_backend::SourceError::FrameOutOfRange`]).
    pub fn from_fixture(
        path: impl AsRef<Path>,
        frame: Option<usize>,
    ) -> gpu_devices::Result<ProcessCollector> {
        ProcessCollector::open_source(&gpu_backend::Source::FixtureFile {
            path: path.as_ref().to_path_buf(),
            frame,
        })
    }

    /// The devices and host facts of `source`, by [`gpu_backend::Source`]'s rules.
    ///
    /// # Errors
    ///
    /// As [`Context::open_source`].
    pub fn open_source(source: &gpu_backend::Source) -> gpu_devices::Result<ProcessCollector> {
        let opened = source.open().map_err(gpu_devices::Error::from_source)?;
        Ok(ProcessCollector::new(
            Context::from_backend(opened.backend)?,
            opened.host,
        ))
    }

    /// A replayed fixture, with the host facts recorded in it.
    ///
    /// # Errors
    ///
    /// As [`Context::from_backend`]: the fixture cannot say how many GPUs there are.
    pub fn from_replay(backend: Arc<ReplayBackend>) -> gpu_devices::Result<ProcessCollector> {
        let host = Arc::new(ReplayHost::new(backend.clone()));
        let context = Context::from_backend(backend)?;
        Ok(ProcessCollector::new(context, host))
    }

    /// The devices' context.
    pub fn context(&self) -> &Context {
        &self.context
    }

    /// The host facts processes are joined with.
    pub fn host(&self) -> &Arc<dyn HostSource> {
        &self.host
    }

    /// Snapshots of `devices` and of their processes, in one pass: each device's queries asked
    /// once (its process lists and samples come with its snapshot), and each PID looked up on the
    /// host once however many devices it uses. Only the PIDs on the GPUs are read from the host,
    /// never the whole process table.
    ///
    /// Each refresh logs its total at `debug` (target `gpu_processes::collect`): the devices
    /// and processes it found, its time, and how much of that the devices' queries took.
    ///
    /// The devices are asked in parallel, one thread per device beyond the first: on a real
    /// GPU a device's queries take milliseconds of the driver's time, so eight GPUs cost about
    /// what one does (given the cores).
    pub fn take_snapshots(&self, devices: &[Device]) -> Snapshots {
        self.timed_join(|| {
            in_parallel(devices, |d| {
                let _step = timeline::device_step(timeline::DEVICE_REFRESH, d.id());
                d.snapshot()
            })
        })
    }

    /// [`ProcessCollector::take_snapshots`] of devices as CUDA numbers them (nvitop's
    /// `take_snapshots(Device.cuda.all())`): each device snapshot carries its CUDA ordinal
    /// (`DeviceSnapshot::cuda_index`).
    pub fn take_cuda_snapshots(&self, devices: &[CudaDevice]) -> Snapshots {
        self.timed_join(|| in_parallel(devices, CudaDevice::snapshot))
    }

    /// [`ProcessCollector::join`] of the device snapshots `take` takes, with the refresh's
    /// total logged.
    fn timed_join(&self, take: impl FnOnce() -> Vec<DeviceSnapshot>) -> Snapshots {
        let started = std::time::Instant::now();
        let step = timeline::step(timeline::REFRESH);
        let devices = take();
        drop(step);
        let devices_took = started.elapsed();
        let step = timeline::step(timeline::HOST_TABLE);
        let snapshots = self.join(devices);
        drop(step);
        tracing::debug!(
            devices = snapshots.devices.len(),
            processes = snapshots.processes.len(),
            host_lookups = snapshots.host_lookups,
            device_queries_ms = ms(devices_took),
            total_ms = ms(started.elapsed()),
            "refresh"
        );
        snapshots
    }

    /// [`ProcessCollector::take_snapshots`] of every physical and MIG device.
    pub fn take_all(&self) -> Snapshots {
        self.take_snapshots(&self.context.all_devices())
    }

    /// Snapshots of chosen GPU processes, each a (device, PID) pair, in the order given
    /// (nvitop's `GpuProcess.take_snapshots(processes, failsafe=...)`): each device involved is
    /// asked once, and each PID looked up on the host once.
    ///
    /// A process no longer on its device (it ended, or its device's process list cannot be
    /// read) is an error naming it; with `failsafe`, it comes back instead with every value
    /// N/A (`gpu_memory`, utilization and host facts `None`), so a monitoring loop never stops
    /// on a process that ended between two refreshes.
    ///
    /// # Errors
    ///
    /// [`ProcessGone`] for the first process that is not found, unless `failsafe`; also for a
    /// device that does not exist.
    pub fn take_process_snapshots(
        &self,
        wanted: &[(DeviceId, u32)],
        failsafe: bool,
    ) -> Result<Vec<GpuProcess>, ProcessGone> {
        let mut ids: Vec<DeviceId> = Vec::new();
        for &(id, pid) in wanted {
            if self.context.device_by_id(id).is_err() {
                return Err(ProcessGone { device: id, pid });
            }
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        let devices = self
            .context
            .devices_from_ids(ids)
            .map_err(|_| ProcessGone {
                device: wanted[0].0,
                pid: wanted[0].1,
            })?;
        let snaps = self.take_snapshots(&devices);
        wanted
            .iter()
            .map(|&(device, pid)| {
                match snaps
                    .processes
                    .iter()
                    .find(|p| p.device == device && p.pid == pid)
                {
                    Some(p) => Ok(p.clone()),
                    None if failsafe => Ok(GpuProcess {
                        pid,
                        device,
                        kind: None,
                        gpu_memory: None,
                        gpu_memory_percent: None,
                        gpu_memory_human: None,
                        gpu_instance_id: None,
                        compute_instance_id: None,
                        utilization: Default::default(),
                        host: HostProcess::default(),
                    }),
                    None => Err(ProcessGone { device, pid }),
                }
            })
            .collect()
    }

    /// The processes of device snapshots already taken, joined with host facts.
    pub fn join(&self, devices: Vec<DeviceSnapshot>) -> Snapshots {
        let mut errors = Vec::new();
        let mut unknown_processes = Vec::new();
        let mig_parents: Vec<u32> = devices
            .iter()
            .filter(|d| d.id.is_mig())
            .map(|d| d.id.physical_index())
            .collect();
        // Per device whose process lists were read: its processes shown (a process that runs in
        // a MIG instance is shown on that instance only) and its utilization samples.
        let mut read_devices = Vec::new();
        for dev in &devices {
            let (read, failed) = dev.process_list_outcome();
            errors.extend(failed.into_iter().map(|f| ProcessQueryError {
                device: dev.id,
                query: f.field,
                error: f.error,
            }));
            if !read {
                // Unknown, not empty: what the tracker keeps for this device stays.
                unknown_processes.push(dev.id);
                continue;
            }
            let list = dev.processes().into_option().unwrap_or_default();
            let on_instances = !dev.id.is_mig() && mig_parents.contains(&dev.id.physical_index());
            let shown: Vec<_> = list
                .into_iter()
                .filter(|p| !(on_instances && p.gpu_instance_id.is_value()))
                .collect();
            let samples = dev
                .process_utilization
                .value()
                .map_or(&[][..], Vec::as_slice);
            read_devices.push((dev, shown, samples));
        }

        let now_ms = self.host.now_unix_ms();
        let memory_total = self.host.machine().memory_total;
        let mut hosts: BTreeMap<u32, HostProcess> = BTreeMap::new();
        for p in read_devices.iter().flat_map(|(_, shown, _)| shown) {
            hosts
                .entry(p.pid)
                .or_insert_with(|| host_process(&*self.host, p.pid, now_ms, memory_total));
        }
        let host_lookups = hosts.len();
        let pids: Vec<u32> = hosts.keys().copied().collect();
        self.host.keep_only(&pids);

        let mut gpu_side = Vec::new();
        for (dev, shown, samples) in read_devices {
            let tracked: Vec<TrackedProcess> = shown
                .iter()
                .map(|p| TrackedProcess {
                    pid: p.pid,
                    start_time_s: hosts.get(&p.pid).and_then(|h| h.create_time_s),
                })
                .collect();
            // Every refresh of a device whose lists were read, even with no process: the
            // tracker forgets the processes that ended.
            let util = self.tracker.update(dev.id, samples, &tracked, now_ms);
            let total = dev.memory.value().map(|m| m.total);
            for p in shown {
                let u = util.get(&p.pid).copied().unwrap_or_default();
                gpu_side.push((dev.id, total, p, u));
            }
        }
        let processes = gpu_side
            .into_iter()
            .map(|(device, total, p, utilization)| {
                let gpu_memory = p.used_gpu_memory.value().copied();
                GpuProcess {
                    pid: p.pid,
                    device,
                    kind: Some(p.kind),
                    gpu_memory,
                    gpu_memory_percent: match (gpu_memory, total) {
                        (Some(used), Some(total)) if total > 0 => {
                            Some(used as f64 * 100.0 / total as f64)
                        }
                        _ => None,
                    },
                    gpu_memory_human: gpu_memory.map(bytes2human),
                    gpu_instance_id: p.gpu_instance_id.value().copied(),
                    compute_instance_id: p.compute_instance_id.value().copied(),
                    utilization,
                    host: hosts.get(&p.pid).cloned().unwrap_or_default(),
                }
            })
            .collect();
        Snapshots {
            devices,
            processes,
            errors,
            unknown_processes,
            host_lookups,
        }
    }
}

/// A process asked for by [`ProcessCollector::take_process_snapshots`] is not on its device.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "no process {pid} on device {device}: it ended, or the device's process list cannot be read"
)]
pub struct ProcessGone {
    /// The device asked about.
    pub device: DeviceId,
    /// The PID asked for.
    pub pid: u32,
}

/// Host facts of one PID, N/A where they cannot be read; running time measured to `now_ms`,
/// memory percent of `memory_total`.
pub(crate) fn host_process(
    host: &dyn HostSource,
    pid: u32,
    now_ms: u64,
    memory_total: Option<u64>,
) -> HostProcess {
    let Some(gpu_backend::host::ProcessLookup {
        facts,
        sample,
        ns_pid,
    }) = host.lookup(pid)
    else {
        return HostProcess::default();
    };
    let running_time_s = facts
        .start_time_s
        .map(|start| (now_ms / 1000).saturating_sub(start));
    let rss = sample.as_ref().and_then(|s| s.rss);
    // An unknown command line (an imported nvidia-smi dump names only the executable, if
    // that) is N/A, never "".
    let cmdline = Some(facts.cmdline).filter(|c| !c.is_empty());
    HostProcess {
        visible: true,
        command: cmdline.as_deref().map(command_join),
        user: facts.user.filter(|u| !u.is_empty()),
        name: facts.name.filter(|n| !n.is_empty()),
        cmdline,
        cpu_percent: sample.as_ref().and_then(|s| s.cpu_percent),
        rss,
        memory_percent: match (rss, memory_total) {
            (Some(r), Some(t)) if t > 0 => Some(r as f64 * 100.0 / t as f64),
            _ => None,
        },
        create_time_s: facts.start_time_s,
        running_time_s,
        running_time_human: running_time_s
            .map(|s| timedelta2human(std::time::Duration::from_secs(s))),
        status: sample.and_then(|s| s.status).filter(|s| !s.is_empty()),
        ppid: facts.ppid,
        ns_pid: ns_pid.filter(|&inner| inner != pid),
        container: facts.container,
    }
}

/// Joins a command line for people, as nvitop's `command_join` does (what nvitop shows as a
/// process's `command`): a command line of one element is shown as it is (Windows gives the
/// whole line as one), and of several, each argument as a person would type it:
///
/// - an empty argument as `""`;
/// - without `$`, `\` or a line break: as it is when it has no space, else in double quotes
///   when it has none;
/// - else in single quotes when it has no single quote or line break;
/// - else in double quotes with `\`, `"`, `$` and line breaks escaped (`\n`).
///
/// The result is for reading; [`shell_join`] gives a string a shell splits back into the same
/// arguments. Control characters are left for the caller to escape before a terminal.
pub fn command_join(args: &[String]) -> String {
    if let [only] = args {
        return only.clone();
    }
    args.iter()
        .map(|a| add_quotes(a))
        .collect::<Vec<_>>()
        .join(" ")
}

fn add_quotes(arg: &str) -> std::borrow::Cow<'_, str> {
    use std::borrow::Cow;
    if arg.is_empty() {
        return Cow::Borrowed("\"\"");
    }
    if !arg.contains(['$', '\\', '\n']) {
        if !arg.contains(' ') {
            return Cow::Borrowed(arg);
        }
        if !arg.contains('"') {
            return Cow::Owned(format!("\"{arg}\""));
        }
    }
    if !arg.contains(['\'', '\n']) {
        return Cow::Owned(format!("'{arg}'"));
    }
    let mut out = String::with_capacity(arg.len() + 2);
    out.push('"');
    for c in arg.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '$' => out.push_str("\\$"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    Cow::Owned(out)
}

/// Joins a command line into one shell-escaped string: an argument
/// of only safe characters (letters, digits and `@%+=:,./-_`) stays as it is, any other is put
/// in single quotes, as Python's `shlex.quote` does.
pub fn shell_join(args: &[String]) -> String {
    args.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ")
}

fn quote(arg: &str) -> std::borrow::Cow<'_, str> {
    let safe = |c: char| c.is_alphanumeric() || "@%+=:,./-_".contains(c);
    if !arg.is_empty() && arg.chars().all(safe) {
        std::borrow::Cow::Borrowed(arg)
    } else {
        std::borrow::Cow::Owned(format!("'{}'", arg.replace('\'', "'\"'\"'")))
    }
}

/// A duration in milliseconds, to the microsecond, for the log.
fn ms(d: std::time::Duration) -> f64 {
    d.as_micros() as f64 / 1000.0
}

/// `f` of each item, in order: the first on this thread, each other on a thread of its own.
fn in_parallel<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let Some((first, rest)) = items.split_first() else {
        return Vec::new();
    };
    std::thread::scope(|scope| {
        let f = &f;
        let others: Vec<_> = rest.iter().map(|t| scope.spawn(move || f(t))).collect();
        let mut out = Vec::with_capacity(items.len());
        out.push(f(first));
        for h in others {
            match h.join() {
                Ok(r) => out.push(r),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_shell_escaped() {
        let args: Vec<String> = [
            "python3",
            "-c",
            "import os; print(1)",
            "it's",
            "",
            "--model-repository=/srv/models",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let cmd = shell_join(&args);
        // A shell (here: an independent parser of shell words) gets the same arguments back.
        assert_eq!(shlex::split(&cmd).unwrap(), args);
        assert_eq!(
            cmd,
            "python3 -c 'import os; print(1)' 'it'\"'\"'s' '' --model-repository=/srv/models"
        );
    }

    /// nvitop's `command_join` (nvitop 1.x, `pip install nvitop`) gave the right-hand side for
    /// each command line on the left; the first is the seed's own example.
    #[test]
    fn commands_are_joined_as_nvitop_joins_them() {
        let cases: &[(&[&str], &str)] = &[
            (
                &[
                    "python3",
                    "-c",
                    "import IPython; IPython.terminal.ipapp.launch_new_instance()",
                ],
                r#"python3 -c "import IPython; IPython.terminal.ipapp.launch_new_instance()""#,
            ),
            (
                &[r"C:\Windows\System32\dwm.exe"],
                r"C:\Windows\System32\dwm.exe",
            ),
            (&["a b"], "a b"),
            (&["x", "a b"], r#"x "a b""#),
            (&["x", ""], r#"x """#),
            (&["", "x"], r#""" x"#),
            (&["x", "", "y", ""], r#"x "" y """#),
            (&["x", "a\"b"], r#"x a"b"#),
            (&["x", "a$b"], "x 'a$b'"),
            (&["x", "it's"], "x it's"),
            (&["x", "it's \"q\""], r#"x "it's \"q\"""#),
            (&["x", r"a\b"], r"x 'a\b'"),
            (&["x", "line\nbreak"], r#"x "line\nbreak""#),
            (&["x", "'$"], r#"x "'\$""#),
            (&["x", "it's $HOME"], r#"x "it's \$HOME""#),
            (&["x", r"a\b 'c'"], r#"x "a\\b 'c'""#),
            (&["x", "\"q\" w"], r#"x '"q" w'"#),
            (&["x", "`cmd` x"], r#"x "`cmd` x""#),
            (&["x", "a b\"c'd"], r#"x "a b\"c'd""#),
            (&["x", "a\tb"], "x a\tb"),
            (&["sleep", "1000"], "sleep 1000"),
            (&["x", "é"], "x é"),
        ];
        for (args, want) in cases {
            let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
            assert_eq!(command_join(&args), *want, "{args:?}");
        }
    }

    proptest::proptest! {
        /// Whatever the arguments (without NUL, which no command line can hold), a shell gets
        /// them back from the joined command.
        #[test]
        fn any_command_line_survives_the_round_trip(args in proptest::collection::vec("[^\\x00]{0,12}", 0..6)) {
            let cmd = shell_join(&args);
            proptest::prop_assert_eq!(shlex::split(&cmd), Some(args));
        }
    }
}
