//! What a refresh asks: which of a device's queries (its static facts and its changing
//! readings), how often, and which run apart.
//!
//! A few NVML calls cost the driver far more than the rest: `nvmlDeviceGetPcieThroughput`
//! sleeps through a 20 ms sample for each direction, `nvmlDeviceGetTotalEnergyConsumption` and
//! `nvmlDeviceGetProcessUtilization` work for milliseconds, most others for microseconds
//! ([`COSTLY_QUERIES`]; docs/benchmarks.md, "Real costs"). A [`QueryPlan`] lets each command
//! ask only what its output shows and ask the costly queries at their own [`Cadence`]: between
//! two askings a refresh shows the answer kept from the last one. Whatever the plan, a refresh:
//!
//! * asks the devices in parallel (one thread per device beyond the first), so eight GPUs cost
//!   about what one costs where the time is the driver's;
//! * asks the queries that mostly sleep in the driver ([`QueryPlan::apart`]; by default
//!   `pcie_throughput`) last, each on a thread of its own, so that their waits overlap each
//!   other but not the device's other queries (a PCIe throughput sample counts the link's
//!   bytes, and the other queries of the same GPU cross that link);
//! * does not ask again what answered that the device or driver does not have it (not
//!   supported, no such function, deprecated): the driver still does work to answer so, at
//!   every call (docs/benchmarks.md, "On a real H100", has what it costs), and the answer does
//!   not change while the driver is loaded;
//! * asks `process_utilization` (milliseconds of the driver's CPU a call) at a device's first
//!   refresh and then only while its process lists are not both empty (no process: no sample
//!   to show).
//!
//! A plan covers a device's static facts as it covers its readings (the `static` rows of the
//! query table: name, UUID, limits, maximum and application clocks, modes): each is asked once,
//! at the first refresh whose plan asks it, and kept for the context's life; one the plan
//! never asks is not asked at all. On a real GPU some cost the driver a millisecond or more a
//! call (each maximum clock, each application clock), so a command that prints a GPU's name
//! asks its name and UUID, not its clocks ([`QueryPlan::only`]).
//!
//! A plan names queries by [`Query`], the `static` and `dynamic` rows of the query table
//! ([`Query::is_static`], [`Query::is_dynamic`]; `gpu_backend::fixture::DeviceStatic::FIELDS`,
//! `gpu_backend::fixture::DeviceDynamic::FIELDS`). A context always knows each device's
//! identity (UUID, PCI address, MIG mode and MIG devices): it reads them when it is made, and
//! they are kept as the static answers they are.
//!
//! ```
//! use std::time::Duration;
//! use gpu_devices::{Cadence, Context, Query, QueryPlan};
//!
//! let ctx = Context::from_fixture(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/h100-sxm-8gpu.json"))?;
//! // A view that shows no PCIe or energy figures, with BAR1 every 10 s.
//! ctx.set_query_plan(
//!     QueryPlan::everything()
//!         .with(Query::pcie_throughput, Cadence::Never)
//!         .with(Query::total_energy_consumption, Cadence::Never)
//!         .with(Query::bar1_memory_info, Cadence::Every(Duration::from_secs(10))),
//! );
//! let d = ctx.device(0)?.snapshot();
//! assert!(d.memory.is_value());
//! assert!(!d.pcie_tx_throughput.is_value()); // never asked: N/A, not an error
//! assert!(d.errors.is_empty());
//!
//! // A list of GPUs: their names and UUIDs, nothing else.
//! ctx.set_query_plan(QueryPlan::only(&[Query::name, Query::uuid]));
//! let d = ctx.device(1)?.snapshot();
//! assert!(d.name.is_value() && d.uuid.is_value());
//! assert!(!d.memory.is_value() && !d.max_clocks.graphics.is_value());
//! # Ok::<(), gpu_devices::Error>(())
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use gpu_backend::Query;

/// How often a refresh asks one query. A static query (a fact that does not change) is asked
/// once whatever its cadence but [`Cadence::Never`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cadence {
    /// At every refresh (the default); a static query, once.
    EveryRefresh,
    /// At the first refresh, then once this much time has passed since it was last asked;
    /// refreshes in between show the answer kept from then. A static query, once.
    Every(Duration),
    /// Never: the answer reads as not available (N/A), not as an error.
    Never,
}

/// Which of a device's queries a refresh asks, and how often (see the [module](self)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryPlan {
    cadences: BTreeMap<Query, Cadence>,
    apart: Vec<Query>,
}

impl Default for QueryPlan {
    fn default() -> QueryPlan {
        QueryPlan::everything()
    }
}

/// The queries that cost 1 ms or more of one call, with the median cost of one call in the
/// profile of a real GPU under load (`fixtures/costs/h100-load.json`; docs/benchmarks.md, "Real
/// costs"): `(query, wall µs, CPU µs)`. Each command's plan says what it does with them.
pub const COSTLY_QUERIES: &[(Query, u32, u32)] = &[
    (Query::pcie_throughput, 20_800, 750),
    (Query::total_energy_consumption, 3_200, 3_200),
    (Query::process_utilization, 2_200, 2_200),
];

/// The queries a plan asks only where it names them ([`QueryPlan::only`], [`QueryPlan::with`]),
/// never as part of [`QueryPlan::everything`]: `inforom_valid` (`nvmlDeviceValidateInforom`)
/// has the driver read back and checksum the whole inforom, tens of milliseconds of its CPU at
/// each call where every other static fact costs microseconds (docs/benchmarks.md, "The
/// inforom's checksum"), and of all the views only nvidia-smi's
/// `--query-gpu=inforom.checksum_validation` shows it.
pub const ON_REQUEST_QUERIES: &[Query] = &[Query::inforom_valid];

/// Whether a plan can name `query`: a device's query, static or changing (a system query,
/// such as the driver's version, is not a refresh's).
fn of_a_device(query: Query) -> bool {
    query.is_dynamic() || query.is_static()
}

impl QueryPlan {
    /// Every static fact once and every changing query at every refresh, `pcie_throughput`
    /// apart, but the [`ON_REQUEST_QUERIES`]: what a one-shot that shows everything asks.
    pub fn everything() -> QueryPlan {
        QueryPlan {
            cadences: ON_REQUEST_QUERIES
                .iter()
                .map(|&q| (q, Cadence::Never))
                .collect(),
            apart: vec![Query::pcie_throughput],
        }
    }

    /// Only `queries` (static or changing, each at every refresh; a static one once), every
    /// other query of a device never: what a command that prints a few fields asks. A device's
    /// identity is known whatever the plan (see the [module](self)). `pcie_throughput`, when
    /// named, is apart as in [`QueryPlan::everything`].
    pub fn only(queries: &[Query]) -> QueryPlan {
        let cadences = Query::ALL
            .iter()
            .filter(|&&q| of_a_device(q) && !queries.contains(&q))
            .map(|&q| (q, Cadence::Never))
            .collect();
        QueryPlan {
            cadences,
            apart: vec![Query::pcie_throughput],
        }
    }

    /// Sets `query`'s cadence. `query` is a `static` or `dynamic` query of the table
    /// ([`Query::is_static`], [`Query::is_dynamic`]); a system query is a programming error,
    /// caught in debug builds and otherwise without effect (a refresh asks a device's
    /// queries). A static query is asked once unless its cadence is [`Cadence::Never`].
    pub fn with(mut self, query: Query, cadence: Cadence) -> QueryPlan {
        debug_assert!(of_a_device(query), "not a query of a device: {query}");
        self.cadences.insert(query, cadence);
        self
    }

    /// Each of `queries` never asked ([`Cadence::Never`]).
    pub fn without(self, queries: &[Query]) -> QueryPlan {
        queries
            .iter()
            .fold(self, |plan, &q| plan.with(q, Cadence::Never))
    }

    /// Asks `query` on a thread of its own (each of its fields on its own), after the device's
    /// other queries, for queries that wait in the driver rather than work.
    pub fn apart(mut self, query: Query) -> QueryPlan {
        debug_assert!(query.is_dynamic(), "not a dynamic query: {query}");
        if !self.apart.contains(&query) {
            self.apart.push(query);
        }
        self
    }

    /// `query`'s cadence.
    pub fn cadence(&self, query: Query) -> Cadence {
        self.cadences
            .get(&query)
            .copied()
            .unwrap_or(Cadence::EveryRefresh)
    }

    /// Whether a refresh asks `query` at all (its cadence is not [`Cadence::Never`]): for a
    /// static query, whether it is asked once.
    pub fn asks(&self, query: Query) -> bool {
        self.cadence(query) != Cadence::Never
    }

    /// Whether `query` is asked on a thread of its own.
    pub fn is_apart(&self, query: Query) -> bool {
        self.apart.contains(&query)
    }

    /// The queries whose cadence is not [`Cadence::EveryRefresh`], with it, in table order:
    /// for logs and docs.
    pub fn exceptions(&self) -> impl Iterator<Item = (Query, Cadence)> + '_ {
        self.cadences
            .iter()
            .filter(|(_, c)| **c != Cadence::EveryRefresh)
            .map(|(q, c)| (*q, *c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_asks_the_queries_it_names_and_everything_asks_all_but_the_on_request_ones() {
        let plan = QueryPlan::only(&[Query::name, Query::memory_info]);
        assert!(plan.asks(Query::name) && plan.asks(Query::memory_info));
        for q in [Query::uuid, Query::max_clock, Query::utilization_rates] {
            assert!(!plan.asks(q), "{q}");
        }
        for &q in Query::ALL {
            let on_request = ON_REQUEST_QUERIES.contains(&q);
            assert_eq!(QueryPlan::everything().asks(q), !on_request, "{q}");
        }
        for &q in ON_REQUEST_QUERIES {
            assert!(QueryPlan::only(&[q]).asks(q), "{q}");
            assert!(QueryPlan::everything()
                .with(q, Cadence::EveryRefresh)
                .asks(q));
        }
        // The system's queries are not a plan's.
        assert_eq!(plan.cadence(Query::driver_version), Cadence::EveryRefresh);
        assert!(plan.is_apart(Query::pcie_throughput));
    }

    #[test]
    fn the_costly_queries_and_the_default_apart_one_are_queries_of_the_table() {
        for (q, _, _) in COSTLY_QUERIES {
            assert!(q.is_dynamic(), "{q}");
        }
        for q in &QueryPlan::everything().apart {
            assert!(q.is_dynamic(), "{q}");
        }
    }
}
