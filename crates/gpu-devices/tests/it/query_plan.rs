//! What a refresh asks under a `QueryPlan` (issue 23): only the queries due, the costly ones at
//! their cadence with their last answer shown in between, `process_utilization` only where
//! there are processes, and answers that are the same as a full refresh's wherever a query is
//! asked.

use std::sync::Arc;
use std::time::Duration;

use gpu_backend::{CallCounts, Fixture, ReplayBackend};
use gpu_devices::{Cadence, Context, Query, QueryPlan};

fn fixture(name: &str) -> Fixture {
    Fixture::load(format!(
        "{}/../../fixtures/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn calls_of(counts: &CallCounts, query: &str) -> u64 {
    counts
        .by_query
        .iter()
        .filter(|(k, _)| k.query.as_str() == query)
        .map(|(_, n)| n)
        .sum()
}

/// A context over `name` at frame 0 with `plan`, counting calls from now on.
fn counted(name: &str, plan: QueryPlan) -> (Arc<ReplayBackend>, Context) {
    let backend = Arc::new(ReplayBackend::new(fixture(name)));
    let ctx = Context::from_backend(backend.clone()).unwrap();
    ctx.set_query_plan(plan);
    backend.count_calls(true);
    backend.take_call_counts();
    (backend, ctx)
}

#[test]
fn a_query_never_asked_reads_not_available_and_is_no_error() {
    let plan =
        QueryPlan::everything().without(&[Query::pcie_throughput, Query::total_energy_consumption]);
    let (backend, ctx) = counted("h100-sxm-8gpu", plan);
    let d = ctx.device(0).unwrap().snapshot();
    let counts = backend.take_call_counts();
    assert_eq!(calls_of(&counts, "pcie_throughput"), 0);
    assert_eq!(calls_of(&counts, "total_energy_consumption"), 0);
    assert!(calls_of(&counts, "memory_info") == 1);
    assert!(!d.pcie_tx_throughput.is_value() && !d.total_energy_consumption.is_value());
    assert!(d.errors.is_empty(), "{:?}", d.errors);
    // Everything else as a full refresh shows it.
    let full = Context::from_fixture(format!(
        "{}/../../fixtures/h100-sxm-8gpu.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
    .device(0)
    .unwrap()
    .snapshot();
    assert_eq!(d.memory, full.memory);
    assert_eq!(d.utilization, full.utilization);
    assert!(full.total_energy_consumption.is_value());
}

#[test]
fn a_query_at_its_cadence_is_asked_once_and_its_answer_shown_until_it_is_due() {
    let plan = QueryPlan::everything().with(
        Query::total_energy_consumption,
        Cadence::Every(Duration::from_secs(3600)),
    );
    let (backend, ctx) = counted("h100-sxm-8gpu", plan);
    let dev = ctx.device(0).unwrap();
    let first = dev.snapshot();
    backend.set_frame(5);
    let later = dev.snapshot();
    let counts = backend.take_call_counts();
    assert_eq!(calls_of(&counts, "total_energy_consumption"), 1);
    assert_eq!(
        calls_of(&counts, "power_usage"),
        2,
        "the cheap ones every refresh"
    );
    // The energy kept from the first refresh, the rest from frame 5.
    assert_eq!(
        later.total_energy_consumption,
        first.total_energy_consumption
    );
    let at5 = Context::from_backend(backend.clone())
        .unwrap()
        .device(0)
        .unwrap()
        .snapshot();
    assert_ne!(
        at5.total_energy_consumption, first.total_energy_consumption,
        "the recording's energy counter moves between frames 0 and 5"
    );
    assert_eq!(later.power_usage, at5.power_usage);

    // A cadence of zero is every refresh.
    ctx.set_query_plan(QueryPlan::everything().with(
        Query::total_energy_consumption,
        Cadence::Every(Duration::ZERO),
    ));
    let now = dev.snapshot();
    assert_eq!(now.total_energy_consumption, at5.total_energy_consumption);
}

#[test]
fn process_utilization_is_asked_after_the_first_refresh_only_where_there_are_processes() {
    // The real H100 recording: idle at frame 0, two jobs on the GPU at frame 30.
    let (backend, ctx) = counted("h100-real", QueryPlan::everything());
    let dev = ctx.device(0).unwrap();
    let idle = dev.snapshot();
    assert_eq!(idle.processes().into_option().map(|p| p.len()), Some(0));
    let counts = backend.take_call_counts();
    assert_eq!(
        calls_of(&counts, "process_utilization"),
        1,
        "the first refresh asks"
    );
    dev.snapshot();
    dev.snapshot();
    let counts = backend.take_call_counts();
    assert_eq!(
        calls_of(&counts, "process_utilization"),
        0,
        "no process, no call"
    );
    assert_eq!(calls_of(&counts, "compute_processes"), 2);

    backend.set_frame(30);
    let busy = dev.snapshot();
    let counts = backend.take_call_counts();
    assert_eq!(calls_of(&counts, "process_utilization"), 1);
    let full = Context::from_backend(backend.clone())
        .unwrap()
        .device(0)
        .unwrap()
        .snapshot();
    assert!(busy
        .processes()
        .into_option()
        .is_some_and(|p| !p.is_empty()));
    assert!(busy
        .process_utilization
        .value()
        .is_some_and(|s| !s.is_empty()));
    assert_eq!(busy.process_utilization, full.process_utilization);
}

#[test]
fn apart_queries_and_parallel_devices_answer_as_a_plain_refresh() {
    // The default plan asks pcie_throughput on threads of its own; a full refresh through the
    // recorder asks everything in order on one thread. Same answers.
    let (_, ctx) = counted("h100-mig", QueryPlan::everything());
    let path = format!(
        "{}/../../fixtures/h100-mig.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let plain = Context::from_fixture(&path).unwrap().snapshot_all();
    for (d, p) in ctx.all_devices().iter().zip(&plain.devices) {
        let s = d.snapshot();
        assert_eq!(s.pcie_tx_throughput, p.pcie_tx_throughput, "{}", d.id());
        assert_eq!(s.pcie_rx_throughput, p.pcie_rx_throughput, "{}", d.id());
        assert_eq!(s.memory, p.memory, "{}", d.id());
    }
}

#[test]
fn what_the_device_does_not_have_is_asked_once_and_stays_not_available() {
    // The real H100 has no fans: NVML answers NOT_SUPPORTED, and on the GPU each such call
    // still cost 0.2-0.45 ms.
    let (backend, ctx) = counted("h100-real", QueryPlan::everything());
    let dev = ctx.device(0).unwrap();
    let first = dev.snapshot();
    assert!(!first.fan_speed.is_value());
    for frame in [10, 20, 30] {
        backend.set_frame(frame);
        let later = dev.snapshot();
        assert_eq!(later.fan_speed, first.fan_speed, "frame {frame}");
    }
    let counts = backend.take_call_counts();
    assert_eq!(calls_of(&counts, "fan_speed"), 1);
    assert_eq!(
        calls_of(&counts, "memory_info"),
        4,
        "what it has, every refresh"
    );
}

/// The answers a full refresh of every device gives, from a fresh context at frame 0.
fn full(name: &str) -> Vec<gpu_devices::DeviceSnapshot> {
    let ctx = Context::from_backend(Arc::new(ReplayBackend::new(fixture(name)))).unwrap();
    ctx.all_devices().iter().map(|d| d.snapshot()).collect()
}

#[test]
fn a_plan_asks_only_the_static_facts_it_names_and_the_rest_read_not_available() {
    let plan = QueryPlan::only(&[Query::name, Query::uuid]);
    let (backend, ctx) = counted("h100-sxm-8gpu", plan);
    let snaps: Vec<_> = ctx.all_devices().iter().map(|d| d.snapshot()).collect();
    let counts = backend.take_call_counts();
    assert_eq!(calls_of(&counts, "name"), 8, "each GPU's name once");
    assert_eq!(
        calls_of(&counts, "uuid"),
        0,
        "the UUIDs were read with the context"
    );
    for query in [
        "max_clock",
        "applications_clock",
        "default_applications_clock",
        "temperature_threshold",
        "power_management_limit",
        "memory_info",
        "pcie_throughput",
        "compute_processes",
    ] {
        assert_eq!(calls_of(&counts, query), 0, "{query}: {counts:?}");
    }
    let everything = full("h100-sxm-8gpu");
    for (d, f) in snaps.iter().zip(&everything) {
        assert_eq!((&d.name, &d.uuid), (&f.name, &f.uuid));
        assert!(f.max_clocks.graphics.is_value() && !d.max_clocks.graphics.is_value());
        assert!(!d.memory.is_value());
        assert!(d.errors.is_empty(), "not asked is no error: {:?}", d.errors);
    }
}

#[test]
fn a_static_fact_is_asked_once_whatever_the_plans_and_refreshes_after_it() {
    let (backend, ctx) = counted("h100-sxm-8gpu", QueryPlan::only(&[Query::name]));
    let dev = ctx.device(0).unwrap();
    dev.snapshot();
    ctx.set_query_plan(QueryPlan::everything());
    let first = dev.snapshot();
    backend.set_frame(5);
    let later = dev.snapshot();
    ctx.set_query_plan(QueryPlan::only(&[Query::name, Query::max_clock]));
    let narrow = dev.snapshot();
    let counts = backend.take_call_counts();
    assert_eq!(calls_of(&counts, "name"), 1);
    assert_eq!(calls_of(&counts, "max_clock"), 4, "once per clock domain");
    assert_eq!(calls_of(&counts, "power_management_limit"), 1);
    assert_eq!(
        calls_of(&counts, "memory_info"),
        2,
        "the everything refreshes"
    );
    // A fact asked once stays shown, whichever plan is in force.
    assert_eq!(later.max_clocks, first.max_clocks);
    assert_eq!(narrow.power_limit, first.power_limit);
    assert_eq!(first.max_clocks, full("h100-sxm-8gpu")[0].max_clocks);
}

#[test]
fn the_identity_read_with_the_context_is_not_asked_again_by_a_snapshot() {
    let backend = Arc::new(ReplayBackend::new(fixture("h100-mig")));
    backend.count_calls(true);
    let ctx = Context::from_backend(backend.clone()).unwrap();
    let snaps: Vec<_> = ctx.all_devices().iter().map(|d| d.snapshot()).collect();
    let counts = backend.take_call_counts();
    // One GPU and its four MIG devices: each identity query once per device it applies to.
    assert_eq!(calls_of(&counts, "uuid"), 5);
    assert_eq!(calls_of(&counts, "pci_info"), 5);
    assert_eq!(calls_of(&counts, "mig_mode"), 5);
    assert_eq!(calls_of(&counts, "mig_device_indices"), 5);
    assert_eq!(calls_of(&counts, "gpu_instance_id"), 5);
    let again: Vec<_> = full("h100-mig");
    assert_eq!(snaps.len(), again.len());
    for (d, f) in snaps.iter().zip(&again) {
        assert_eq!(
            (&d.uuid, &d.pci, &d.mig_mode, &d.gpu_instance_id),
            (&f.uuid, &f.pci, &f.mig_mode, &f.gpu_instance_id)
        );
    }
}

/// One GPU that records what was asked before its PCIe throughput: a PCIe sample counts the
/// link's bytes over 20 ms, and the device's other queries cross that link, so none may be
/// asked while it samples.
#[derive(Default)]
struct PcieLast {
    asked: std::sync::Mutex<Vec<&'static str>>,
    before_pcie: std::sync::Mutex<Vec<Vec<&'static str>>>,
}

impl gpu_backend::NotSupportedBase for PcieLast {
    fn device_count(&self) -> gpu_backend::Result<u32> {
        Ok(1)
    }

    fn name(&self, _: gpu_backend::DeviceId) -> gpu_backend::Result<String> {
        // Slow enough that a sample started beside it would start first.
        std::thread::sleep(Duration::from_millis(30));
        self.asked.lock().unwrap().push("name");
        Ok("gpu".into())
    }

    fn power_usage(&self, _: gpu_backend::DeviceId) -> gpu_backend::Result<u32> {
        std::thread::sleep(Duration::from_millis(30));
        self.asked.lock().unwrap().push("power_usage");
        Ok(70_000)
    }

    fn pcie_throughput(
        &self,
        _: gpu_backend::DeviceId,
        _: gpu_backend::PcieDirection,
    ) -> gpu_backend::Result<u32> {
        let asked = self.asked.lock().unwrap().clone();
        self.before_pcie.lock().unwrap().push(asked);
        Ok(1)
    }
}

#[test]
fn pcie_throughput_is_asked_after_the_devices_other_queries() {
    let backend = Arc::new(PcieLast::default());
    let ctx = Context::from_backend(backend.clone()).unwrap();
    let d = ctx.device(0).unwrap().snapshot();
    assert!(d.pcie_tx_throughput.is_value() && d.pcie_rx_throughput.is_value());
    assert_eq!(d.name.value().map(String::as_str), Some("gpu"));
    let before = backend.before_pcie.lock().unwrap().clone();
    assert_eq!(before.len(), 2, "TX and RX");
    for asked in before {
        assert!(
            asked.contains(&"name") && asked.contains(&"power_usage"),
            "a PCIe sample began before the device's other queries were done: {asked:?}"
        );
    }
}

#[test]
fn the_inforom_checksum_is_asked_only_by_a_plan_that_names_it() {
    // nvmlDeviceValidateInforom checksums the whole inforom (tens of milliseconds of the
    // driver's CPU): a view that shows everything must not pay it; `--query-gpu` naming
    // `inforom.checksum_validation` does. The real H200 recorded a valid inforom.
    let (backend, ctx) = counted("h200-real", QueryPlan::everything());
    let d = ctx.device(0).unwrap().snapshot();
    assert_eq!(
        calls_of(&backend.take_call_counts(), "inforom_valid"),
        0,
        "everything() leaves the on-request queries out"
    );
    assert!(!d.details.inforom_valid.is_value());
    assert!(
        d.errors.is_empty(),
        "never asked is no error: {:?}",
        d.errors
    );
    assert!(d.memory.is_value() && d.max_clocks.graphics.is_value());

    for plan in [
        QueryPlan::only(&[Query::inforom_valid]),
        QueryPlan::everything().with(Query::inforom_valid, Cadence::EveryRefresh),
    ] {
        let (backend, ctx) = counted("h200-real", plan.clone());
        let d = ctx.device(0).unwrap().snapshot();
        assert_eq!(
            calls_of(&backend.take_call_counts(), "inforom_valid"),
            1,
            "{plan:?}"
        );
        assert_eq!(d.details.inforom_valid.value(), Some(&true), "{plan:?}");
    }
}
