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
