//! What the exporter asks the GPUs, and how often.

use std::time::Duration;

use gpu_devices::{Cadence, Query, QueryPlan};

/// How often the exporter asks the queries that cost the driver most of a call (PCIe
/// throughput sleeps through a 20 ms sample each way; energy, GPM metrics, BAR1, the PCIe
/// replay counter and the current PCIe link work for a millisecond or a fraction of one;
/// docs/benchmarks.md, "On a real H100"): every 30 s, whatever the interval, as dcgm-exporter
/// collects by default (at 10 s they were a sixth to a third of an idle exporter's CPU;
/// docs/benchmarks.md, "The idle exporter over fake-nvml"). Energy and the replay counter are counters, so
/// Prometheus' `rate()` over them is as good; GPM figures are then the activity over 30 s;
/// PCIe throughput is NVML's 20 ms sample, taken every 30 s.
pub const COSTLY_EVERY: Duration = Duration::from_secs(30);

/// How often the exporter asks per-process utilization (milliseconds of the driver's CPU a
/// call) while a GPU has processes: each process's SM share is then at most this old (under the 15 s after
/// which a sample is dropped).
pub const PROCESS_UTILIZATION_EVERY: Duration = Duration::from_secs(5);

/// What a refresh of the exporter asks: every family it exports, the costly ones every
/// [`COSTLY_EVERY`], per-process utilization (for the process and pod families) every
/// [`PROCESS_UTILIZATION_EVERY`] while a GPU has processes. Set it on the collector's context
/// (`collector.context().set_query_plan(query_plan())`) before sampling.
pub fn query_plan() -> QueryPlan {
    let costly = Cadence::Every(COSTLY_EVERY);
    QueryPlan::everything()
        .with(Query::total_energy_consumption, costly)
        .with(Query::pcie_throughput, costly)
        .with(Query::gpm_metrics, costly)
        .with(Query::bar1_memory_info, costly)
        .with(Query::pcie_replay_counter, costly)
        .with(Query::current_pcie_link_generation, costly)
        .with(Query::current_pcie_link_width, costly)
        .with(
            Query::process_utilization,
            Cadence::Every(PROCESS_UTILIZATION_EVERY),
        )
        // What only nvidia-smi's detailed views show: no family exports it.
        .without(&gpu_devices::detail_queries())
}
