//! The one metric name this crate reads that no gpuscope exporter serves: Prometheus's own
//! `up`. Every other name it reads is gpu-export's ([`gpu_export::names`]), used as that crate
//! spells it, so that only gpu-export knows metric names and this crate reads exactly what
//! that one writes.

/// Prometheus's own `up` series: whether it could scrape a target.
pub const UP: &str = "up";
