//! `cargo xtask gen-long-recording`: a long, many-GPU recording built from a real one (its GPU
//! repeated with distinct ids, its frames looped with their events and samples moved on by one
//! loop's length each time, so that the event rate is the recording's); and
//! `cargo xtask bench-fixture-load`: how big such a recording is on disk and how long it takes
//! to load, beside the same data in schema version 1's layout.

use std::collections::{BTreeMap, VecDeque};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use gpu_backend::fixture::{
    limits, Compression, DeviceStatic, Fixture, FixtureHead, FixtureWriter, Frame, HostFrame,
    HostStatic, Meta, Style, SystemAnswers,
};
use gpu_backend::{Answer, DeviceId, GpuEvent, MAX_EVENTS};

/// Which long recording to build.
#[derive(clap::Args)]
pub struct LongArgs {
    /// The recording to build from: one GPU, no MIG.
    #[arg(long, default_value = "fixtures/h100-real.json", value_name = "FILE")]
    pub from: PathBuf,
    /// How many GPUs: the recording's one, repeated.
    #[arg(long, default_value_t = 8)]
    pub gpus: u32,
    /// How long, at the recording's own interval between frames.
    #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
    pub duration: Duration,
}

/// What to build, and where.
#[derive(clap::Args)]
pub struct GenArgs {
    #[command(flatten)]
    pub long: LongArgs,
    /// The file to write; compressed as its name says (`.json.zst`, `.json.gz`).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
}

/// Writes the long recording.
pub fn gen(args: GenArgs) -> Result<()> {
    let source = Fixture::load(&args.long.from).map_err(|e| anyhow::anyhow!("{e}"))?;
    let long = Expander::new(&source, args.long.gpus, args.long.duration)?;
    let started = Instant::now();
    let sizes = long.write(&args.out, Layout::Current)?;
    eprintln!(
        "wrote {} in {:.1} s: {} GPUs, {} frames of {} ms, {} events; {} bytes of JSON, {} on disk",
        args.out.display(),
        started.elapsed().as_secs_f64(),
        args.long.gpus,
        long.frames,
        long.step_ms,
        sizes.events,
        sizes.text,
        sizes.disk
    );
    Ok(())
}

/// Which layout to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// The current one ([`gpu_backend::fixture::SCHEMA_VERSION`]), through [`FixtureWriter`].
    Current,
    /// Schema version 1's: each frame repeats the newest 256 events so far, each an object.
    V1,
}

/// How much was written.
#[derive(Debug, Clone, Copy, Default)]
struct Sizes {
    text: u64,
    disk: u64,
    events: u64,
}

/// Builds the long recording's parts from the source, one frame at a time.
struct Expander<'a> {
    src: &'a Fixture,
    gpus: u32,
    frames: usize,
    step_ms: u64,
    /// One loop of the source, in microseconds: what timestamps move on by per loop.
    period_us: u64,
    /// What the energy counter grows by in one loop, mJ.
    energy_per_loop: u64,
    /// What PIDs are moved on by, per GPU and per loop: above every PID of the source.
    pid_stride: u32,
}

impl<'a> Expander<'a> {
    fn new(src: &'a Fixture, gpus: u32, duration: Duration) -> Result<Expander<'a>> {
        if src.devices.keys().ne([DeviceId::Gpu(0)].iter()) {
            bail!("the source recording must have one GPU and no MIG device");
        }
        if gpus == 0 || gpus > limits::MAX_DEVICES {
            bail!("--gpus must be 1 to {}", limits::MAX_DEVICES);
        }
        let n = src.frames.len();
        let last = src.frames.last().map_or(0, |f| f.t_ms);
        let step_ms = if n > 1 {
            (last as f64 / (n - 1) as f64).round() as u64
        } else {
            1000
        }
        .max(1);
        let frames = usize::try_from(duration.as_millis() / u128::from(step_ms))
            .unwrap_or(usize::MAX)
            .clamp(1, limits::MAX_FRAMES);
        let period_us = n as u64 * step_ms * 1000;
        let gpu = DeviceId::Gpu(0);
        // The events and samples of one loop must fit in it, so that the next loop's come after.
        let times: Vec<u64> = src
            .frames
            .iter()
            .flat_map(|f| f.devices[&gpu].sample_times_us())
            .collect();
        if let (Some(lo), Some(hi)) = (times.iter().min(), times.iter().max()) {
            if hi - lo >= period_us {
                bail!("the source's events and samples span more than one loop of its frames");
            }
        }
        let energy = |f: &Frame| f.devices[&gpu].total_energy_consumption.ok().copied();
        let energy_per_loop = match (
            src.frames.first().and_then(energy),
            src.frames.last().and_then(energy),
        ) {
            (Some(a), Some(b)) if n > 1 => {
                let before_last = energy(&src.frames[n - 2]).unwrap_or(b);
                b.saturating_sub(a) + b.saturating_sub(before_last)
            }
            _ => 0,
        };
        let max_pid = src
            .frames
            .iter()
            .flat_map(|f| f.devices.values())
            .flat_map(|d| {
                let c = d.compute_processes.ok().into_iter().flatten();
                let g = d.graphics_processes.ok().into_iter().flatten();
                c.chain(g).map(|p| p.pid).collect::<Vec<_>>()
            })
            .chain(src.host.processes.keys().copied())
            .max()
            .unwrap_or(0);
        let loops = frames.div_ceil(n) as u64;
        let pid_stride = max_pid + 1;
        if u64::from(pid_stride) * u64::from(gpus) * loops > 4_194_304 {
            bail!("too many GPUs and loops to give each process its own PID under Linux's pid_max");
        }
        Ok(Expander {
            src,
            gpus,
            frames,
            step_ms,
            period_us,
            energy_per_loop,
            pid_stride,
        })
    }

    fn pid(&self, pid: u32, gpu: u32, lap: u64) -> u32 {
        // Bounded in `new`: the product is below pid_max.
        pid + self.pid_stride * (gpu + self.gpus * lap as u32)
    }

    fn head(&self) -> (Meta, SystemAnswers, BTreeMap<DeviceId, DeviceStatic>) {
        let src = &self.src.devices[&DeviceId::Gpu(0)];
        let mut devices = BTreeMap::new();
        let mut uuids = Vec::new();
        for g in 0..self.gpus {
            let mut st = src.clone();
            if let Answer::Ok(uuid) = &mut st.uuid {
                let keep = uuid.len().saturating_sub(4);
                *uuid = format!("{}{:04x}", &uuid[..keep], g);
                uuids.push(uuid.clone());
            }
            if let Answer::Ok(serial) = &mut st.serial {
                let keep = serial.len().saturating_sub(4);
                *serial = format!("{}{:04}", &serial[..keep], g);
            }
            if let Answer::Ok(pci) = &mut st.pci_info {
                pci.bus = pci.bus.saturating_add(g) % 256;
                pci.bus_id = format!("{:08X}:{:02X}:{:02X}.0", pci.domain, pci.bus, pci.device);
            }
            if let Answer::Ok(minor) = &mut st.minor_number {
                *minor = g;
            }
            devices.insert(DeviceId::Gpu(g), st);
        }
        let mut system = self.src.system.clone();
        system.device_count = Answer::Ok(self.gpus);
        if system.cuda_device_order.ok().is_some() {
            system.cuda_device_order = Answer::Ok(uuids);
        }
        let hours = (self.frames as u64 * self.step_ms) as f64 / 3_600_000.0;
        let meta = Meta {
            name: format!("{}-{}gpu-long", self.src.meta.name, self.gpus),
            description: format!(
                "Built by cargo xtask gen-long-recording from {}: its GPU repeated {} times \
                 (distinct UUIDs, serials, bus ids and minor numbers), its {} frames looped to \
                 {} frames ({hours:.2} h), each loop's events and process samples moved on by the \
                 loop's length (so the event rate is the recording's) and its processes given \
                 new PIDs.",
                self.src.meta.name,
                self.gpus,
                self.src.frames.len(),
                self.frames
            ),
            source: self.src.meta.source.clone(),
            recorded_at: self.src.meta.recorded_at.clone(),
        };
        (meta, system, devices)
    }

    fn frame(&self, k: usize) -> Frame {
        let n = self.src.frames.len();
        let lap = (k / n) as u64;
        let src = &self.src.frames[k % n];
        let shift = lap * self.period_us;
        let d0 = &src.devices[&DeviceId::Gpu(0)];
        let mut devices = BTreeMap::new();
        let mut host = HostFrame {
            processes: BTreeMap::new(),
            ..src.host.clone()
        };
        for g in 0..self.gpus {
            let mut d = d0.clone();
            if let Answer::Ok(e) = &mut d.total_energy_consumption {
                *e = e.saturating_add(lap * self.energy_per_loop);
            }
            if let Answer::Ok(events) = &mut d.events {
                for e in events.iter_mut() {
                    e.timestamp_us += shift;
                }
            }
            if let Answer::Ok(samples) = &mut d.process_utilization {
                for s in samples.iter_mut() {
                    s.timestamp_us += shift;
                    s.pid = self.pid(s.pid, g, lap);
                }
            }
            for list in [&mut d.compute_processes, &mut d.graphics_processes] {
                if let Answer::Ok(procs) = list {
                    for p in procs.iter_mut() {
                        p.pid = self.pid(p.pid, g, lap);
                    }
                }
            }
            for (&pid, sample) in &src.host.processes {
                host.processes.insert(self.pid(pid, g, lap), sample.clone());
            }
            devices.insert(DeviceId::Gpu(g), d);
        }
        Frame {
            t_ms: k as u64 * self.step_ms,
            devices,
            host,
        }
    }

    /// The host facts of every PID of the frames written so far (`frames` of them).
    fn host(&self, frames: usize) -> HostStatic {
        let n = self.src.frames.len();
        let laps = frames.div_ceil(n) as u64;
        let shift_s = self.period_us / 1_000_000;
        let mut host = HostStatic {
            processes: BTreeMap::new(),
            ..self.src.host.clone()
        };
        for lap in 0..laps {
            // Only the PIDs alive in a frame written.
            let written = (frames - (lap as usize * n)).min(n);
            let alive: std::collections::BTreeSet<u32> = self.src.frames[..written]
                .iter()
                .flat_map(|f| f.host.processes.keys().copied())
                .collect();
            for g in 0..self.gpus {
                for pid in &alive {
                    if let Some(facts) = self.src.host.processes.get(pid) {
                        let mut facts = facts.clone();
                        facts.start_time_s = facts.start_time_s.map(|t| t + lap * shift_s);
                        host.processes.insert(self.pid(*pid, g, lap), facts);
                    }
                }
            }
        }
        host
    }

    /// Writes the whole recording to `path` in `layout`, one frame at a time.
    fn write(&self, path: &Path, layout: Layout) -> Result<Sizes> {
        let (meta, system, devices) = self.head();
        let mut sizes = Sizes::default();
        match layout {
            Layout::Current => {
                let mut w = FixtureWriter::create(path, Style::Compact)
                    .with_context(|| format!("cannot write {}", path.display()))?;
                w.begin(&FixtureHead {
                    schema_version: gpu_backend::fixture::SCHEMA_VERSION,
                    meta: &meta,
                    system: &system,
                    nvml_missing_functions: &self.src.nvml_missing_functions,
                    devices: &devices,
                })?;
                for k in 0..self.frames {
                    let frame = self.frame(k);
                    sizes.events += frame
                        .devices
                        .values()
                        .filter_map(|d| d.events.ok())
                        .map(|e| e.len() as u64)
                        .sum::<u64>();
                    w.frame(&frame)?;
                }
                w.end(&self.host(self.frames), self.src.nvml_costs.as_ref())?;
                sizes.text = w.text_bytes();
                w.finish()?;
            }
            Layout::V1 => {
                sizes = self.write_v1(path, &meta, &system, &devices)?;
            }
        }
        sizes.disk = std::fs::metadata(path)?.len();
        Ok(sizes)
    }

    /// Schema version 1's layout of the same recording, compact, for comparison: each frame
    /// lists the newest 256 events so far of each device, each as an object.
    fn write_v1(
        &self,
        path: &Path,
        meta: &Meta,
        system: &SystemAnswers,
        devices: &BTreeMap<DeviceId, DeviceStatic>,
    ) -> Result<Sizes> {
        let file = std::fs::File::create(path)
            .with_context(|| format!("cannot write {}", path.display()))?;
        let file = std::io::BufWriter::new(file);
        let mut out = Counted {
            inner: match Compression::from_path(path) {
                Compression::Zstd => {
                    Box::new(zstd::stream::write::Encoder::new(file, 3)?.auto_finish())
                        as Box<dyn std::io::Write>
                }
                Compression::Gzip => Box::new(flate2::write::GzEncoder::new(
                    file,
                    flate2::Compression::default(),
                )),
                Compression::None => Box::new(file),
            },
            bytes: 0,
        };
        write!(
            out,
            "{{\"schema_version\":1,\n\"meta\":{},\n\"system\":{},\n\"nvml_missing_functions\":{},\n\"devices\":{},\n\"frames\":[",
            serde_json::to_string(meta)?,
            serde_json::to_string(system)?,
            serde_json::to_string(&self.src.nvml_missing_functions)?,
            serde_json::to_string(devices)?
        )?;
        let mut so_far: BTreeMap<DeviceId, VecDeque<GpuEvent>> = BTreeMap::new();
        let mut events = 0u64;
        for k in 0..self.frames {
            let frame = self.frame(k);
            let mut value = serde_json::to_value(&frame)?;
            for (id, d) in &frame.devices {
                if let Answer::Ok(new) = &d.events {
                    let list = so_far.entry(*id).or_default();
                    list.extend(new.iter().copied());
                    while list.len() > MAX_EVENTS {
                        list.pop_front();
                    }
                    events += list.len() as u64;
                    let objects: Vec<&GpuEvent> = list.iter().collect();
                    value["devices"][id.to_string()]["events"] =
                        serde_json::json!({ "ok": objects });
                }
            }
            out.write_all(if k == 0 { b"\n" } else { b",\n" })?;
            serde_json::to_writer(&mut out, &value)?;
        }
        write!(
            out,
            "\n],\n\"host\":{}}}\n",
            serde_json::to_string(&self.host(self.frames))?
        )?;
        out.flush()?;
        let text = out.bytes;
        drop(out);
        Ok(Sizes {
            text,
            disk: 0,
            events,
        })
    }
}

/// Counts the bytes written through it.
struct Counted {
    inner: Box<dyn std::io::Write>,
    bytes: u64,
}

impl std::io::Write for Counted {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// What to measure.
#[derive(clap::Args)]
pub struct BenchArgs {
    #[command(flatten)]
    pub long: LongArgs,
    /// How many times each file is loaded (the median is reported).
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Where the files go (removed at the end unless --keep).
    #[arg(long, default_value = "target/bench-fixture-load")]
    pub dir: PathBuf,
    /// Keep the files written.
    #[arg(long)]
    pub keep: bool,
}

/// Writes the long recording in both layouts, and times loading each file.
pub fn bench(args: BenchArgs) -> Result<()> {
    let source = Fixture::load(&args.long.from).map_err(|e| anyhow::anyhow!("{e}"))?;
    let long = Expander::new(&source, args.long.gpus, args.long.duration)?;
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("cannot create {}", args.dir.display()))?;
    let cases = [
        ("current (v2), .json.zst", "v2.json.zst", Layout::Current),
        ("current (v2), .json.gz", "v2.json.gz", Layout::Current),
        ("current (v2), .json", "v2.json", Layout::Current),
        ("schema 1 layout, .json.zst", "v1.json.zst", Layout::V1),
    ];
    println!(
        "{} GPUs, {} frames of {} ms, from {} ({} runs each, median)\n",
        args.long.gpus,
        long.frames,
        long.step_ms,
        args.long.from.display(),
        args.runs
    );
    println!("| layout, file | on disk | JSON text | events in the file | write | load (median) | loaded? |");
    println!("|---|---|---|---|---|---|---|");
    let mut texts = Vec::new();
    for (label, name, layout) in cases {
        let path = args.dir.join(format!("long-{}gpu-{name}", args.long.gpus));
        let t = Instant::now();
        let sizes = long.write(&path, layout)?;
        let write = t.elapsed();
        let mut times = Vec::new();
        let mut outcome = String::from("yes");
        for _ in 0..args.runs.max(1) {
            let t = Instant::now();
            let loaded = Fixture::load(&path);
            times.push(t.elapsed());
            match loaded {
                Ok(f) => {
                    if f.frames.len() != long.frames {
                        bail!("{} loaded with {} frames", path.display(), f.frames.len());
                    }
                    // Freed outside the timing of the next run.
                    drop(f);
                }
                Err(e) => {
                    outcome = format!("refused: {}", e.message);
                    break;
                }
            }
        }
        times.sort();
        let median = times[times.len() / 2];
        println!(
            "| {label} | {} | {} | {} | {:.1} s | {:.2} s | {outcome} |",
            mib(sizes.disk),
            mib(sizes.text),
            sizes.events,
            write.as_secs_f64(),
            median.as_secs_f64()
        );
        if layout == Layout::Current && name == "v2.json" {
            texts.push(path.clone());
        }
        if !args.keep && name != "v2.json" {
            let _ = std::fs::remove_file(&path);
        }
    }
    // Where the time goes: reading, and parsing with and without the JSON path kept.
    if let Some(path) = texts.first() {
        let text = std::fs::read_to_string(path)?;
        let time = |f: &dyn Fn() -> bool| -> Result<Duration> {
            let mut times = Vec::new();
            for _ in 0..args.runs.max(1) {
                let t = Instant::now();
                if !f() {
                    bail!("the text did not parse");
                }
                times.push(t.elapsed());
            }
            times.sort();
            Ok(times[times.len() / 2])
        };
        let whole = time(&|| Fixture::from_json_str(&text, "bench").is_ok())?;
        let fast = time(&|| serde_json::from_str::<Fixture>(&text).is_ok())?;
        let tracked = time(&|| {
            let mut de = serde_json::Deserializer::from_str(&text);
            serde_path_to_error::deserialize::<_, Fixture>(&mut de).is_ok()
        })?;
        println!(
            "\nParsing the {} of JSON text (median of {}): `Fixture::from_json_str` (parse, turn into \
             the current form, check every rule) {:.2} s; the typed parse alone {:.2} s; the same \
             parse keeping the JSON path (serde_path_to_error, the loader's way before this \
             change) {:.2} s.",
            mib(text.len() as u64),
            args.runs.max(1),
            whole.as_secs_f64(),
            fast.as_secs_f64(),
            tracked.as_secs_f64()
        );
        if !args.keep {
            let _ = std::fs::remove_file(path);
        }
    }
    if !args.keep {
        let _ = std::fs::remove_dir(&args.dir);
    }
    Ok(())
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn real() -> Fixture {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/h100-real.json");
        Fixture::load(path).unwrap()
    }

    #[test]
    fn a_long_recording_built_from_the_real_one_is_a_valid_fixture_with_its_event_rate() {
        let src = real();
        // Three loops and a bit, two GPUs.
        let long = Expander::new(&src, 2, Duration::from_secs(200)).unwrap();
        let (meta, system, devices) = long.head();
        let frames: Vec<Frame> = (0..long.frames).map(|k| long.frame(k)).collect();
        let fixture = Fixture {
            schema_version: gpu_backend::fixture::SCHEMA_VERSION,
            meta,
            system,
            nvml_missing_functions: src.nvml_missing_functions.clone(),
            devices,
            host: long.host(long.frames),
            frames,
            nvml_costs: None,
        };
        fixture.validate().unwrap();
        assert_eq!(fixture.frames.len(), 200);
        let uuids: std::collections::BTreeSet<_> = fixture
            .devices
            .values()
            .map(|d| d.uuid.ok().cloned())
            .collect();
        assert_eq!(uuids.len(), 2, "distinct UUIDs");
        let events = |f: &Fixture, id| -> usize {
            f.frames
                .iter()
                .filter_map(|fr| fr.devices[&id].events.ok())
                .map(Vec::len)
                .sum()
        };
        let per_second = |f: &Fixture, id| events(f, id) as f64 / f.frames.len() as f64;
        let src_rate = per_second(&src, DeviceId::Gpu(0));
        for g in 0..2 {
            let rate = per_second(&fixture, DeviceId::Gpu(g));
            assert!(
                (rate / src_rate - 1.0).abs() < 0.1,
                "{rate} vs {src_rate} events a frame"
            );
        }
        // Through a file and back: the same.
        let text = fixture.to_json(Style::Compact);
        assert_eq!(Fixture::from_json_str(&text, "long").unwrap(), fixture);
    }
}
