//! `select_devices` against the scenario fixtures, parameter by parameter.
//!
//! The expected answers are worked out here from the fixture files themselves (read as plain
//! JSON, not through gpu-devices), with a filter simple enough to check by eye; a few cases are
//! checked by hand against the numbers quoted in their comments.

use std::collections::BTreeSet;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use gpu_devices::{CudaDeviceOrder, DeviceId};
use gpu_processes::{ProcessCollector, Snapshots};
use gpu_select::{
    select_devices, select_from_snapshots, Constraint, Criteria, Error, Fate, Format, Outcome,
    Pool, Selection, Size, Unusable,
};
use proptest::prelude::*;
use serde_json::Value;

const GIB: u64 = 1 << 30;

fn path(stem: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../../fixtures/{stem}.json"))
}

/// A scenario at a pinned frame: its collector, and its truth read from the file; loaded once
/// per test binary, since debug builds parse the larger fixtures slowly.
fn scenario(stem: &str, frame: usize) -> &'static (ProcessCollector, Vec<Truth>) {
    type Cache = Mutex<HashMap<(String, usize), &'static (ProcessCollector, Vec<Truth>)>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let mut cache = CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    cache.entry((stem.to_string(), frame)).or_insert_with(|| {
        let col = ProcessCollector::from_fixture(path(stem), Some(frame)).expect("fixture loads");
        Box::leak(Box::new((col, read_truth(stem, frame))))
    })
}

fn collector(stem: &str, frame: usize) -> &'static ProcessCollector {
    &scenario(stem, frame).0
}

fn truth(stem: &str, frame: usize) -> Vec<Truth> {
    scenario(stem, frame).1.clone()
}

/// What the fixture file says about one leaf device at one frame.
#[derive(Debug, Clone)]
struct Truth {
    id: String,
    uuid: String,
    free: Option<u64>,
    total: Option<u64>,
    gpu: Option<u64>,
    mem: Option<u64>,
    /// (user, GPU memory) of each process on the device.
    processes: Vec<(Option<String>, Option<u64>)>,
    /// Some query of the frame answered `gpu_lost`.
    lost: bool,
}

impl Truth {
    fn is_mig(&self) -> bool {
        self.id.contains(':')
    }
}

fn ok(v: &Value) -> Option<&Value> {
    v.get("ok")
}

/// The leaf devices of a fixture at `frame`, from the JSON: a GPU whose MIG mode is on stands
/// for its MIG devices.
fn read_truth(stem: &str, frame: usize) -> Vec<Truth> {
    let text = std::fs::read_to_string(path(stem)).unwrap();
    let fx: Value = serde_json::from_str(&text).unwrap();
    let statics = fx["devices"].as_object().unwrap();
    let dynamics = &fx["frames"][frame]["devices"];
    let users = &fx["host"]["processes"];
    let mut ids: Vec<&String> = statics.keys().collect();
    ids.sort_by_key(|id| {
        let mut parts = id.split(':').map(|p| p.parse::<u32>().unwrap());
        (parts.next().unwrap(), parts.next().map_or(0, |m| m + 1))
    });
    let mig_on = |gpu: &str| {
        ok(&statics[gpu]["mig_mode"]).is_some_and(|m| m["current"] == Value::Bool(true))
    };
    let leaves = ids.into_iter().filter(|id| match id.split_once(':') {
        Some((gpu, _)) => mig_on(gpu),
        None => !mig_on(id),
    });
    leaves
        .map(|id| {
            let d = &dynamics[id.as_str()];
            let mem = ok(&d["memory_info"]);
            let util = ok(&d["utilization_rates"]);
            let mut processes = Vec::new();
            for list in ["compute_processes", "graphics_processes"] {
                for p in ok(&d[list]).and_then(Value::as_array).into_iter().flatten() {
                    let pid = p["pid"].as_u64().unwrap().to_string();
                    let user = users[&pid]["user"].as_str().map(str::to_string);
                    // A process on both lists is counted once.
                    if list == "graphics_processes"
                        && ok(&d["compute_processes"])
                            .and_then(Value::as_array)
                            .is_some_and(|c| c.iter().any(|q| q["pid"] == p["pid"]))
                    {
                        continue;
                    }
                    processes.push((user, p["used_gpu_memory"].as_u64()));
                }
            }
            Truth {
                id: id.clone(),
                uuid: ok(&statics[id]["uuid"]).unwrap().as_str().unwrap().into(),
                free: mem.map(|m| m["free"].as_u64().unwrap()),
                total: mem.map(|m| m["total"].as_u64().unwrap()),
                gpu: util.map(|u| u["gpu"].as_u64().unwrap()),
                mem: util.map(|u| u["memory"].as_u64().unwrap()),
                processes,
                lost: d
                    .as_object()
                    .unwrap()
                    .values()
                    .any(|a| a.get("err") == Some(&Value::from("gpu_lost"))),
            }
        })
        .collect()
}

/// The devices that meet `c`, strictly or within the tolerance, by the plain reading of the
/// documentation; N/A never qualifies, and a lost device or one whose memory cannot be read
/// never does either.
fn expected(devices: &[Truth], c: &Criteria) -> BTreeSet<String> {
    let tol = c.tolerance as f64 / 100.0;
    devices
        .iter()
        .filter(|d| !d.lost && d.free.is_some())
        .filter(|d| {
            let as_free: u64 = d
                .processes
                .iter()
                .filter(|(u, _)| u.as_ref().is_some_and(|u| c.free_accounts.contains(u)))
                .filter_map(|(_, m)| *m)
                .sum();
            let free = d.free.map(|f| f + as_free);
            let min_ok = |v: Option<u64>, min: Option<u64>| match min {
                None => true,
                Some(min) => v.is_some_and(|v| v as f64 >= min as f64 * (1.0 - tol)),
            };
            let max_ok = |v: Option<u64>, max: Option<u32>| match max {
                None => true,
                Some(max) => v.is_some_and(|v| v as f64 <= max as f64 + 100.0 * tol),
            };
            min_ok(free, c.min_free_memory)
                && min_ok(d.total, c.min_total_memory)
                && max_ok(d.gpu, c.max_gpu_utilization)
                && max_ok(d.mem, c.max_memory_utilization)
        })
        .map(|d| d.id.clone())
        .collect()
}

fn chosen(s: &Selection) -> Vec<String> {
    s.ids().iter().map(DeviceId::to_string).collect()
}

/// The criteria of the table, with limits taken from the devices' own values so that each one
/// splits the devices where it can.
fn table(devices: &[Truth]) -> Vec<(String, Criteria)> {
    let mut cases = vec![("nothing".to_string(), Criteria::new())];
    let mut frees: Vec<u64> = devices.iter().filter_map(|d| d.free).collect();
    frees.sort_unstable();
    frees.dedup();
    for &f in &frees {
        cases.push((format!("free >= {f}"), Criteria::new().min_free_memory(f)));
        cases.push((
            format!("free >= {}", f + 1),
            Criteria::new().min_free_memory(f + 1),
        ));
        cases.push((
            format!("free >= {} tol 10", f + f / 20),
            Criteria::new().min_free_memory(f + f / 20).tolerance(10),
        ));
    }
    for &t in devices.iter().filter_map(|d| d.total.as_ref()) {
        cases.push((format!("total >= {t}"), Criteria::new().min_total_memory(t)));
        cases.push((
            format!("total >= {}", t + 1),
            Criteria::new().min_total_memory(t + 1),
        ));
    }
    for d in devices {
        if let Some(g) = d.gpu {
            let g = g as u32;
            cases.push((
                format!("gpu <= {g}"),
                Criteria::new().max_gpu_utilization(g),
            ));
            if g > 0 {
                cases.push((
                    format!("gpu <= {}", g - 1),
                    Criteria::new().max_gpu_utilization(g - 1),
                ));
                cases.push((
                    format!("gpu <= {} tol 5", g.saturating_sub(5)),
                    Criteria::new()
                        .max_gpu_utilization(g.saturating_sub(5))
                        .tolerance(5),
                ));
            }
        }
        if let Some(m) = d.mem {
            let m = m as u32;
            cases.push((
                format!("mem <= {m}"),
                Criteria::new().max_memory_utilization(m),
            ));
            cases.push((
                format!("mem <= {}", m.saturating_sub(1)),
                Criteria::new().max_memory_utilization(m.saturating_sub(1)),
            ));
        }
    }
    let users: BTreeSet<String> = devices
        .iter()
        .flat_map(|d| d.processes.iter().filter_map(|(u, _)| u.clone()))
        .collect();
    for u in users {
        for &f in &frees {
            cases.push((
                format!("free >= {} as {u}", f + 1),
                Criteria::new()
                    .min_free_memory(f + 1)
                    .free_accounts([u.clone()]),
            ));
        }
    }
    cases.push((
        "everything at once".into(),
        Criteria::new()
            .min_free_memory(GIB)
            .min_total_memory(4 * GIB)
            .max_gpu_utilization(90)
            .max_memory_utilization(90),
    ));
    cases
}

const SCENARIOS: &[(&str, &[usize])] = &[
    ("h100-sxm-8gpu", &[0, 5, 29]),
    ("h100-mig", &[0, 5, 20]),
    ("geforce-desktop", &[0, 39]),
    ("windows-wddm", &[0, 35]),
    ("gpu-lost", &[0, 31]),
    ("old-driver", &[0, 35]),
];

/// Every parameter, on every fixture: the devices chosen are exactly the devices that qualify
/// (or, where MIG devices qualify on a GPU, the one MIG device with the most free memory).
#[test]
fn each_constraint_selects_exactly_the_devices_that_meet_it() {
    let mut cases_run = 0;
    for &(stem, frames) in SCENARIOS {
        for &frame in frames {
            let devices = truth(stem, frame);
            let col = collector(stem, frame);
            for (name, criteria) in table(&devices) {
                let s = select_devices(col, Pool::All, &criteria).unwrap();
                let want = expected(&devices, &criteria);
                let got = chosen(&s);
                let ctx = format!("{stem}@{frame}: {name}: chose {got:?}, qualifying {want:?}");
                if devices.iter().all(Truth::is_mig) && !want.is_empty() {
                    // Only MIG devices here: the best one alone.
                    assert_eq!(got.len(), 1, "{ctx}");
                    assert!(s.mig, "{ctx}");
                    assert!(want.contains(&got[0]), "{ctx}");
                } else {
                    let got_set: BTreeSet<String> = got.iter().cloned().collect();
                    assert_eq!(got_set, want, "{ctx}");
                    assert_eq!(got.len(), want.len(), "{ctx}: no device twice");
                }
                // Every device is accounted for, with the reason.
                assert_eq!(s.candidates.len(), devices.len(), "{ctx}");
                for c in &s.candidates {
                    let qualifies = want.contains(&c.id.to_string());
                    let refused = matches!(c.fate, Fate::Rejected | Fate::Unusable);
                    assert_eq!(refused, !qualifies, "{ctx}: {c:?}");
                    let why = c.failed().next().is_some() || c.unusable.is_some();
                    assert_eq!(why, !qualifies, "{ctx}: {c:?}");
                }
                cases_run += 1;
            }
        }
    }
    assert!(cases_run > 200, "the table is not empty: {cases_run}");
}

/// Sorted best first: fewest constraints loosened, then most free memory; N/A last.
#[test]
fn chosen_devices_come_most_free_memory_first() {
    for &(stem, frames) in SCENARIOS {
        for &frame in frames {
            let devices = truth(stem, frame);
            let s = select_devices(collector(stem, frame), Pool::All, &Criteria::new()).unwrap();
            let free_of = |id: &String| devices.iter().find(|d| &d.id == id).unwrap().free;
            let frees: Vec<Option<u64>> = chosen(&s).iter().map(free_of).collect();
            for pair in frees.windows(2) {
                match (pair[0], pair[1]) {
                    (Some(a), Some(b)) => assert!(a >= b, "{stem}@{frame}: {frees:?}"),
                    (None, Some(_)) => panic!("{stem}@{frame}: N/A before a value: {frees:?}"),
                    _ => {}
                }
            }
        }
    }
}

#[test]
fn no_sort_keeps_the_order_the_devices_were_given_in() {
    let col = collector("h100-sxm-8gpu", 5);
    let ctx = col.context();
    let pool: Vec<_> = [6, 2, 4].iter().map(|&i| ctx.device(i).unwrap()).collect();
    let s = select_devices(
        col,
        Pool::Devices(pool.clone()),
        &Criteria::new().sort(false),
    );
    assert_eq!(chosen(&s.unwrap()), ["6", "2", "4"]);
    // Sorted, by free memory at frame 5: GPU 4 45881491456, GPU 2 43724570624, GPU 6 43091230720.
    let s = select_devices(col, Pool::Devices(pool), &Criteria::new()).unwrap();
    assert_eq!(chosen(&s), ["4", "2", "6"]);
}

/// Checked by hand: the demo box at frame 5 has GPU 5 (47593816064 free) and GPU 4
/// (45881491456) as the two freest; 44 GiB (47244640256) leaves only GPU 5.
#[test]
fn counts_and_memory_by_hand_on_the_demo_box() {
    let col = collector("h100-sxm-8gpu", 5);
    let s = select_devices(col, Pool::All, &Criteria::new().count(2)).unwrap();
    assert_eq!(chosen(&s), ["5", "4"]);
    assert_eq!(s.identifiers(Format::Index, false), ["5", "4"]);
    assert!(!s.is_short());
    for c in &s.candidates {
        let over = !["5", "4"].contains(&c.id.to_string().as_str());
        assert_eq!(c.fate == Fate::OverMaxCount, over, "{c:?}");
    }

    let criteria = Criteria::new()
        .min_count(2)
        .min_free_memory("44GiB".parse::<Size>().unwrap());
    let s = select_devices(col, Pool::All, &criteria).unwrap();
    assert_eq!(chosen(&s), ["5"]);
    assert!(s.is_short(), "two were asked for, one qualifies");

    // 10% tolerance accepts 44 GiB * 0.9 = 39.6 GiB (42520176230 bytes): GPUs 0 (40297824256),
    // 1 (41813016576) and 3 (41692430336) miss it; 2 (43724570624), 4, 6 (43091230720) and 7
    // (44742737920) are within it; GPU 5 met 44 GiB strictly so it stays first.
    let s = select_devices(col, Pool::All, &criteria.clone().tolerance(10)).unwrap();
    let got = chosen(&s);
    assert_eq!(got[0], "5");
    assert_eq!(
        got.iter().cloned().collect::<BTreeSet<_>>(),
        ["2", "4", "5", "6", "7"].map(String::from).into()
    );
    let gpu4 = s
        .candidates
        .iter()
        .find(|c| c.id == DeviceId::Gpu(4))
        .unwrap();
    assert_eq!(gpu4.checks[0].constraint, Constraint::MinFreeMemory);
    assert_eq!(gpu4.checks[0].outcome, Outcome::Tolerated);
    for rejected in [0, 1, 3] {
        let c = s
            .candidates
            .iter()
            .find(|c| c.id == DeviceId::Gpu(rejected))
            .unwrap();
        assert_eq!(c.checks[0].outcome, Outcome::Failed, "{c:?}");
        assert_eq!(c.fate, Fate::Rejected);
    }

    // max_count 0 chooses nothing; max below min is refused.
    let s = select_devices(col, Pool::All, &Criteria::new().max_count(0)).unwrap();
    assert!(s.selected.is_empty());
    let e = select_devices(col, Pool::All, &Criteria::new().min_count(3).max_count(1));
    assert_eq!(e.unwrap_err(), Error::CountRange { min: 3, max: 1 });
}

#[test]
fn uuid_format_names_the_same_devices() {
    let col = collector("h100-sxm-8gpu", 5);
    let devices = truth("h100-sxm-8gpu", 5);
    let s = select_devices(col, Pool::All, &Criteria::new().count(3)).unwrap();
    let uuids = s.identifiers(Format::Uuid, false);
    let by_index: Vec<String> = chosen(&s)
        .iter()
        .map(|id| devices.iter().find(|d| &d.id == id).unwrap().uuid.clone())
        .collect();
    assert_eq!(uuids, by_index);
    let from_ctx: Vec<String> = s
        .devices(col.context())
        .iter()
        .map(|d| d.uuid().into_option().unwrap())
        .collect();
    assert_eq!(from_ctx, by_index, "Format::Device gives the same devices");
}

/// h100-mig at frame 20 (hand-checked): MIG 0:0 has 30783045632 bytes free (of which root's
/// processes use 2296 + 1272 + 7484 MiB), 0:1 17719885824, 0:2 and 0:3 10459545600 each.
#[test]
fn mig_devices_are_chosen_one_at_a_time_and_named_by_uuid() {
    let col = collector("h100-mig", 20);
    let s = select_devices(col, Pool::All, &Criteria::new()).unwrap();
    assert_eq!(chosen(&s), ["0:0"]);
    assert!(s.mig);
    assert_eq!(
        s.identifiers(Format::Index, false),
        [truth("h100-mig", 20)[0].uuid.clone()]
    );
    assert_eq!(s.format(Format::Index, false), Format::Uuid);
    assert_eq!(s.identifiers(Format::Index, true), ["0:0"], "force_index");
    for c in &s.candidates[1..] {
        assert_eq!(c.fate, Fate::MigRule, "{c:?}");
    }

    // 29 GiB (31138512896) is more than any MIG device has free.
    let big = Criteria::new().min_free_memory(29 * GIB);
    let s = select_devices(col, Pool::All, &big).unwrap();
    assert!(s.selected.is_empty());
    // With 10% tolerance, 0:0 is within 26.1 GiB.
    let s = select_devices(col, Pool::All, &big.clone().tolerance(10)).unwrap();
    assert_eq!(chosen(&s), ["0:0"]);
    // Counting root's memory as free, 0:0 has 30783045632 + 11588861952 free.
    let s = select_devices(col, Pool::All, &big.clone().free_accounts(["root"])).unwrap();
    assert_eq!(chosen(&s), ["0:0"]);
    assert_eq!(s.candidates[0].memory_as_free, (2296 + 1272 + 7484) << 20);
    assert_eq!(
        s.candidates[0].memory_free,
        Some(30783045632 + ((2296 + 1272 + 7484) << 20))
    );
    // svc-infer's process is on 0:1, not 0:0.
    let s = select_devices(col, Pool::All, &big.free_accounts(["svc-infer"])).unwrap();
    assert!(s.selected.is_empty());

    // MIG devices cannot tell their utilization: a utilization limit rules them all out.
    let s = select_devices(col, Pool::All, &Criteria::new().max_gpu_utilization(100)).unwrap();
    assert!(s.selected.is_empty());
    assert!(s
        .candidates
        .iter()
        .all(|c| c.checks[0].outcome == Outcome::Unknown));

    // min_count 2 cannot be met by MIG devices (one at most).
    let s = select_devices(col, Pool::All, &Criteria::new().min_count(2)).unwrap();
    assert_eq!(s.selected.len(), 1);
    assert!(s.is_short());
}

/// A machine with both: GPU 0 in MIG mode (h100-mig's MIG devices) and seven whole GPUs (GPUs
/// 1-7 of the demo box), as snapshots put together by hand.
fn mixed_machine() -> Snapshots {
    let mig = collector("h100-mig", 20).take_all();
    let whole = collector("h100-sxm-8gpu", 5).take_all();
    let mut devices: Vec<_> = mig.devices.into_iter().filter(|d| d.id.is_mig()).collect();
    devices.extend(
        whole
            .devices
            .into_iter()
            .filter(|d| d.id.physical_index() > 0),
    );
    Snapshots::without_processes(devices)
}

#[test]
fn mig_and_whole_gpus_are_never_mixed() {
    let snaps = mixed_machine();
    // Sorted: whole GPUs have more free memory, so the best is whole: whole GPUs only.
    let s = select_from_snapshots(&snaps, &Criteria::new()).unwrap();
    assert!(!s.mig);
    assert_eq!(s.selected.len(), 7);
    assert!(s.chosen().all(|c| !c.is_mig_device()));
    // Unsorted, the first given (a MIG device) is the best: that MIG device alone.
    let unsorted = Criteria::new().sort(false);
    let s = select_from_snapshots(&snaps, &unsorted).unwrap();
    assert_eq!(chosen(&s), ["0:0"]);
    // ... unless min_count whole GPUs qualify.
    let s = select_from_snapshots(&snaps, &unsorted.clone().min_count(7)).unwrap();
    assert_eq!(s.selected.len(), 7);
    assert!(s.chosen().all(|c| !c.is_mig_device()));
    let s = select_from_snapshots(&snaps, &unsorted.min_count(8)).unwrap();
    assert_eq!(chosen(&s), ["0:0"]);
    assert!(s.is_short());
    // More than the whole GPUs have free: only MIG... none has 46 GiB either.
    let s = select_from_snapshots(&snaps, &Criteria::new().min_free_memory(46 * GIB)).unwrap();
    assert!(s.selected.is_empty());
}

/// CUDA_VISIBLE_DEVICES=3,5 on the demo box: the two are CUDA devices 0 and 1.
#[test]
fn cuda_devices_are_named_by_cuda_ordinal() {
    let col = collector("h100-sxm-8gpu", 5);
    let pool = col
        .context()
        .cuda_devices_for(Some("3,5"), CudaDeviceOrder::PciBusId);
    let s = select_devices(col, Pool::Cuda(pool), &Criteria::new()).unwrap();
    // GPU 5 (47593816064 free) beats GPU 3 (41692430336).
    assert_eq!(chosen(&s), ["5", "3"]);
    assert_eq!(s.identifiers(Format::Index, false), ["1", "0"]);
    let devices = truth("h100-sxm-8gpu", 5);
    assert_eq!(
        s.identifiers(Format::Uuid, false),
        [devices[5].uuid.clone(), devices[3].uuid.clone()]
    );
}

/// Regression: gpu-lost at frame 31 (GPU 2 fell off the bus at frame 15) had GPU 2 chosen,
/// sorted last, whenever no memory constraint was asked. A lost GPU is never chosen, with or
/// without constraints, and the selection says why.
#[test]
fn a_lost_gpu_is_never_chosen_even_without_constraints() {
    let col = collector("gpu-lost", 31);
    for criteria in [
        Criteria::new(),
        Criteria::new().min_count(4),
        Criteria::new().sort(false),
        Criteria::new().min_free_memory(1u64),
    ] {
        let s = select_devices(col, Pool::All, &criteria).unwrap();
        let got: BTreeSet<String> = chosen(&s).into_iter().collect();
        assert_eq!(
            got,
            ["0", "1", "3"].map(String::from).into(),
            "{criteria:?}"
        );
        let lost = s
            .candidates
            .iter()
            .find(|c| c.id == DeviceId::Gpu(2))
            .unwrap();
        assert_eq!(lost.fate, Fate::Unusable);
        assert_eq!(lost.unusable, Some(Unusable::Lost));
        assert!(lost
            .unusable
            .as_ref()
            .unwrap()
            .to_string()
            .starts_with("lost"));
        if criteria.min_free_memory.is_some() {
            assert_eq!(lost.checks[0].outcome, Outcome::Unknown);
        }
        assert_eq!(s.is_short(), criteria.min_count == 4, "{criteria:?}");
    }
    // Before it was lost (frame 0), GPU 2 is an ordinary candidate.
    let s = select_devices(collector("gpu-lost", 0), Pool::All, &Criteria::new()).unwrap();
    assert_eq!(s.selected.len(), 4);
}

/// Regression: a device whose memory cannot be read (here: no permission) was chosen when no
/// memory constraint was asked. It is never chosen, and the selection says why.
#[test]
fn a_device_whose_memory_cannot_be_read_is_never_chosen() {
    let mut snaps = collector("h100-sxm-8gpu", 5).take_all();
    snaps.devices[0].memory = gpu_devices::Na::NotAvailable;
    snaps.devices[1].memory = gpu_devices::Na::Failed(gpu_backend::BackendError::Timeout);
    let s = select_from_snapshots(&snaps, &Criteria::new()).unwrap();
    let got = chosen(&s);
    assert_eq!(got.len(), 6, "{got:?}");
    assert!(
        !got.contains(&"0".to_string()) && !got.contains(&"1".to_string()),
        "{got:?}"
    );
    assert_eq!(s.candidates[0].fate, Fate::Unusable);
    assert_eq!(
        s.candidates[0].unusable,
        Some(Unusable::MemoryUnreadable(None))
    );
    assert_eq!(
        s.candidates[1].unusable,
        Some(Unusable::MemoryUnreadable(Some(
            gpu_backend::BackendError::Timeout
        )))
    );
    assert!(s.candidates[1]
        .unusable
        .as_ref()
        .unwrap()
        .to_string()
        .starts_with("memory: N/A ("));
}

/// `healthy` skips exactly the GPUs that need attention (a pending retirement, a pending row
/// remap, uncorrected ECC errors, HW slowdown), says why, and keeps the N/A ones.
#[test]
fn healthy_skips_the_gpus_that_need_attention_and_says_why() {
    use gpu_backend::RemappedRows;
    use gpu_devices::Na;
    let mut snaps = collector("h100-sxm-8gpu", 5).take_all();
    snaps.devices[1].retired_pages_pending = Na::Value(true);
    snaps.devices[2].remapped_rows = Na::Value(RemappedRows {
        correctable: 0,
        uncorrectable: 1,
        pending: true,
        failure: false,
    });
    snaps.devices[3].ecc_errors.volatile_uncorrected = Na::Value(2);
    snaps.devices[4].clock_event_reasons = Na::Value(0x8 | 0x4);
    // Not a reason: SW power cap alone, and values the device cannot tell.
    snaps.devices[5].clock_event_reasons = Na::Value(0x4);
    snaps.devices[6].retired_pages_pending = Na::NotAvailable;
    let all = chosen(&select_from_snapshots(&snaps, &Criteria::new()).unwrap());
    assert_eq!(all.len(), 8, "{all:?}");
    let s = select_from_snapshots(&snaps, &Criteria::new().healthy(true)).unwrap();
    let mut got = chosen(&s);
    got.sort();
    assert_eq!(got, ["0", "5", "6", "7"]);
    let why = |i: usize| {
        s.candidates
            .iter()
            .find(|c| c.id == DeviceId::Gpu(i as u32))
            .unwrap()
    };
    assert_eq!(why(1).fate, Fate::Rejected);
    assert_eq!(why(1).attention, ["retired_page_pending"]);
    assert_eq!(why(2).attention, ["row_remap_pending"]);
    assert_eq!(why(3).attention, ["uncorrected_ecc_errors"]);
    assert_eq!(why(4).attention, ["hw_slowdown"]);
    let check = why(4)
        .checks
        .iter()
        .find(|k| k.constraint == Constraint::Healthy);
    assert_eq!(check.map(|k| k.outcome), Some(Outcome::Failed));
}

/// Under WDDM the driver cannot tell a process's memory: counting its user's memory as free
/// adds nothing.
#[test]
fn free_accounts_add_nothing_where_process_memory_is_unknown() {
    let col = collector("windows-wddm", 0);
    let user = col.take_all().processes[0].host.user.clone().unwrap();
    let s = select_devices(col, Pool::All, &Criteria::new().free_accounts([user])).unwrap();
    assert_eq!(s.candidates[0].memory_as_free, 0);
    assert_eq!(
        s.candidates[0].memory_free,
        truth("windows-wddm", 0)[0].free
    );
}

/// geforce-desktop at frame 0: alex runs everything; GPU 0 has 5368709120 free plus alex's
/// 12 + 96 + 2883 MiB.
#[test]
fn free_accounts_count_their_memory_as_free_by_hand() {
    let col = collector("geforce-desktop", 0);
    let s = select_devices(col, Pool::All, &Criteria::new().free_accounts(["alex"])).unwrap();
    let gpu0 = &s.candidates[0];
    assert_eq!(
        gpu0.memory_free,
        Some(5368709120 + ((12 + 96 + 2883) << 20))
    );
    assert_eq!(
        gpu0.memory_used,
        Some(3141533696 - ((12 + 96 + 2883) << 20))
    );
    let s = select_devices(col, Pool::All, &Criteria::new().free_accounts(["bob"])).unwrap();
    assert_eq!(s.candidates[0].memory_free, Some(5368709120));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever is asked: the chosen devices meet every constraint (within the tolerance),
    /// the rejected ones fail one, none is chosen twice, the count is capped, and devices that
    /// needed the tolerance come after those that did not.
    #[test]
    fn selections_keep_their_promises(
        scenario in 0..SCENARIOS.len(),
        frame_pick in 0usize..3,
        free in proptest::option::of(0u64..100 * GIB),
        total in proptest::option::of(0u64..100 * GIB),
        gpu in proptest::option::of(0u32..110),
        mem in proptest::option::of(0u32..110),
        tolerance in 0u32..120,
        min_count in 0usize..4,
        extra in proptest::option::of(0usize..4),
        sort in any::<bool>(),
    ) {
        let (stem, frames) = SCENARIOS[scenario];
        let frame = frames[frame_pick % frames.len()];
        let criteria = Criteria {
            min_count,
            max_count: extra.map(|e| min_count + e),
            min_free_memory: free,
            min_total_memory: total,
            max_gpu_utilization: gpu,
            max_memory_utilization: mem,
            tolerance,
            free_accounts: Vec::new(),
            sort,
            healthy: false,
        };
        let col = collector(stem, frame);
        let devices = truth(stem, frame);
        let s = select_devices(col, Pool::All, &criteria).unwrap();
        let want = expected(&devices, &criteria);
        let got = chosen(&s);
        prop_assert!(got.iter().all(|id| want.contains(id)), "{got:?} {want:?}");
        prop_assert_eq!(got.iter().collect::<BTreeSet<_>>().len(), got.len());
        if let Some(max) = criteria.max_count {
            prop_assert!(got.len() <= max);
        }
        for c in &s.candidates {
            let refused = matches!(c.fate, Fate::Rejected | Fate::Unusable);
            prop_assert_eq!(refused, !want.contains(&c.id.to_string()));
        }
        if sort {
            let loosened: Vec<usize> = s.chosen().map(|c| c.loosened()).collect();
            prop_assert!(loosened.windows(2).all(|w| w[0] <= w[1]), "{loosened:?}");
        }
        if !devices.iter().any(Truth::is_mig) && criteria.max_count.is_none() {
            prop_assert_eq!(got.len(), want.len());
        }
    }

    /// A size in bytes, or in KiB / MiB / GiB, parses to the same number of bytes.
    #[test]
    fn sizes_parse_exactly(n in 0u64..(1 << 33), unit in 0usize..4) {
        let (suffix, factor) = [("", 1u64), ("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30)][unit];
        prop_assert_eq!(format!("{n}{suffix}").parse::<Size>().unwrap(), Size(n * factor));
    }
}
