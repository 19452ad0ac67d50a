//! What the exporter asks the GPUs, and how often.

use std::time::Duration;

use gpu_devices::{Cadence, Query, QueryPlan};

/// How often the exporter asks the queries that cost most of a call on a real GPU (an H100:
/// PCIe throughput 20.8 ms asleep each way, energy 2.5-3.2 ms, GPM metrics 1.2-2.1 ms, BAR1
/// 0.2-0.7 ms, the PCIe replay counter 0.2-0.4 ms, the current PCIe link 0.1 ms): every 10 s,
/// whatever the interval. Energy and the replay counter are counters, so Prometheus' `rate()`
/// over them is as good; GPM figures are then the activity over 10 s; PCIe throughput is
/// NVML's 20 ms sample, taken every 10 s.
pub const COSTLY_EVERY: Duration = Duration::from_secs(10);

/// How often the exporter asks per-process utilization (1.4-2.2 ms a call on an H100) while a
/// GPU has processes: each process's SM share is then at most this old (under the 15 s after
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
}
