#![doc = include_str!("../README.md")]

mod clock;
mod collector;
mod error;
#[cfg(feature = "plot")]
mod plot;
mod recorder;
mod sample;
mod sink;
mod stats;
mod stop;
mod worker;

pub use clock::{Clock, ManualClock, SystemClock, Waiter};
pub use collector::{
    collect_in_background, CollectorBuilder, Daemon, DaemonOptions, DeviceMetricSpec, Metrics,
    ProcessMetricSpec, ResourceMetricCollector, TagGuard,
};
pub use error::{Error, Result};
#[cfg(feature = "plot")]
pub use plot::{plot, PlotFormat, PlotOptions, PLOT_MAX_SIZE, PLOT_MIN_SIZE};
pub use recorder::{human_summaries, Keep, MemoryUnit, Record, Recorder};
pub use sample::{DeviceLabel, DeviceMetric, Sample};
pub use sink::{CsvSink, IfExists, NdjsonSink, SampleSink};
pub use stats::Stats;
