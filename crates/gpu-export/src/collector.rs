//! gpuscope's families in a program's own prometheus-client registry.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Registry;

use gpu_processes::ProcessCollector;

use crate::doors::build;
use crate::exposition::encode_families;
use crate::families::{Inputs, Options};

/// gpuscope's metric families as a prometheus-client [`Collector`]: each time the registry is
/// encoded (each scrape of the program's `/metrics`), it takes one sample of every device, MIG
/// device and (with [`Options::processes`]) GPU process, and encodes its families. A scrape
/// thus waits for the GPUs; a program that must answer at once runs the whole exporter instead
/// (feature `server`: `Exporter`, which samples on its own thread).
///
/// Set the query plan first if the GPUs' costly queries should be asked less often than every
/// scrape: `collector.context().set_query_plan(gpu_export::query_plan())`.
pub struct GpuCollector {
    collector: ProcessCollector,
    options: Options,
}

impl GpuCollector {
    /// Families of `collector`'s devices, published with `options`.
    pub fn new(collector: ProcessCollector, options: Options) -> GpuCollector {
        GpuCollector { collector, options }
    }

    /// Registers the families in `registry` (its prefix and labels apply to them).
    pub fn register(self, registry: &mut Registry) {
        registry.register_collector(Box::new(self));
    }

    /// The devices it samples.
    pub fn collector(&self) -> &ProcessCollector {
        &self.collector
    }
}

impl std::fmt::Debug for GpuCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuCollector")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Collector for GpuCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let families = build(&Inputs::take(&self.collector), &self.options);
        encode_families(&families, &mut encoder)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registry_with_the_collector_encodes_every_device_beside_the_programs_own_metrics() {
        let collector = crate::test_support::h100_box();
        let options = crate::test_support::options(&collector);
        let mut registry = Registry::default();
        let requests = prometheus_client::metrics::counter::Counter::<u64>::default();
        registry.register("app_requests", "Requests served.", requests.clone());
        requests.inc();
        GpuCollector::new(collector, options).register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(text.contains("app_requests_total 1\n"), "{text}");
        crate::test_support::assert_every_device_and_process(&text);
        assert!(text.contains("# UNIT gpuscope_device_memory_used_bytes bytes\n"));
        assert!(text.ends_with("# EOF\n"));
    }
}
