//! The examples of igpu's README (github.com/acnazarejr/igpu, its Quick Start and Examples),
//! written with gpu-devices over a replayed fixture at a fixed frame: what each prints is kept
//! as an insta snapshot, so a change to igpu's layout shows up in review.

use crate::common;

use std::fmt::Write as _;

use gpu_devices::Section;

/// "List the utilization stats of all devices".
#[test]
fn utilization_stats_of_all_devices() {
    let (ctx, replay) = common::open("h100-sxm-8gpu");
    replay.set_frame(5);
    let mut out = String::new();
    for gpu in ctx.devices() {
        let _ = writeln!(out, "GPU board {}: {}", gpu.physical_index(), gpu.name());
        let _ = writeln!(
            out,
            "Utilization: GPU {}% | Memory {}%",
            gpu.gpu_utilization(),
            gpu.memory_utilization()
        );
        let _ = writeln!(
            out,
            "Temperature: {}C (Fan - {}%)",
            gpu.temperature(),
            gpu.fan_speed()
        );
        let _ = writeln!(out);
    }
    insta::assert_snapshot!(out);
}

/// "List the memory and power summary of a specific device": `print(gpu_info.memory)`,
/// `print(gpu_info.power)`; and every other section igpu prints.
#[test]
fn sections_of_one_device() {
    for stem in ["h100-sxm-8gpu", "geforce-desktop", "h100-mig"] {
        let (ctx, replay) = common::open(stem);
        replay.set_frame(5);
        let snap = ctx.device(0).unwrap().snapshot();
        let mut out = String::new();
        for section in Section::ALL {
            let _ = writeln!(out, "{}", snap.section(section));
        }
        insta::assert_snapshot!(stem, out);
    }
}
