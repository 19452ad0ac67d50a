//! igpu's unit-carrying views: memory in MiB floats with `.unit`, power in watts, so that code
//! ported from igpu is not off by 2^20 or 1000. The seed's examples, on a replayed fixture.

use crate::common;

use gpu_devices::units::MIB;
use gpu_devices::Na;

#[test]
fn igpus_quick_start_reads_mib_and_watts() {
    let (ctx, _replay) = common::open("h100-sxm-8gpu");
    let gpu = ctx.device(0).unwrap();
    let bytes = gpu.memory_info().into_option().unwrap();
    let mib = gpu.memory_mib().into_option().unwrap();
    // `print(f'The first gpu is a {gpu.name} with {gpu.memory.total:.0f}{gpu.memory.unit}.')`
    let line = format!(
        "The first gpu is a {} with {:.0}{}.",
        gpu.name().into_option().unwrap(),
        mib.total,
        mib.unit
    );
    assert_eq!(
        line,
        format!(
            "The first gpu is a NVIDIA H100 80GB HBM3 with {}MiB.",
            bytes.total / MIB
        )
    );
    assert_eq!(mib.used, bytes.used as f64 / MIB as f64);
    assert_eq!(mib.free, bytes.free as f64 / MIB as f64);

    // Watts where the rest of the API has milliwatts.
    let power = gpu.power_watts();
    assert_eq!(power.unit, "W");
    let mw = gpu.power_usage().into_option().unwrap();
    assert_eq!(power.draw, Na::Value(f64::from(mw) / 1000.0));
    let limits = gpu.power_limit_constraints().into_option().unwrap();
    assert_eq!(
        power.min_limit,
        Na::Value(f64::from(limits.min_mw) / 1000.0)
    );
    assert_eq!(
        power.max_limit,
        Na::Value(f64::from(limits.max_mw) / 1000.0)
    );
    assert_eq!(power.max_limit, Na::Value(700.0), "the H100 SXM's 700 W");

    // The snapshot answers the same.
    let snap = gpu.snapshot();
    assert_eq!(snap.memory_mib(), gpu.memory_mib());
    assert_eq!(snap.power_watts().max_limit, power.max_limit);
}

#[test]
fn unknown_memory_and_power_stay_unknown() {
    // Whatever a fixture lacks (a lost GPU, an old driver) is N/A in the views too, never 0.
    for stem in common::all_stems() {
        let (ctx, _replay) = common::open(&stem);
        for gpu in ctx.all_devices() {
            let power = gpu.power_watts();
            assert_eq!(
                power.draw.is_value(),
                gpu.power_usage().is_value(),
                "{stem}"
            );
            assert_eq!(
                gpu.memory_mib().is_value(),
                gpu.memory_info().is_value(),
                "{stem}"
            );
        }
    }
}
