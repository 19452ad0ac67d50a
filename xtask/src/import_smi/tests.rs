//! Tests of `import-smi` against real `nvidia-smi -q -x` dumps, kept in the repository under
//! xtask/tests/data/reference-dumps (SOURCES.md there names where each comes from).
//!
//! The expected values are read from the XML text by small string helpers (`test_support::
//! smi_xml`'s and those below), which share no code with the importer (no XML parser, no unit
//! conversion of the importer's), or were transcribed by hand from the dumps.

use std::path::PathBuf;

use gpu_backend::{Answer, BackendError, DeviceId, DriverModel, Fixture, MemoryInfo};
use proptest::prelude::*;
use test_support::smi_xml::{blocks, is_placeholder, value, without};

use super::import_str;

const MIB: u64 = 1024 * 1024;

fn dumps_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/reference-dumps")
}

/// Every `.xml` file of the reference dumps, as (file name, text). Fails if there are none.
fn xml_dumps() -> Vec<(String, String)> {
    let dir = dumps_dir();
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; the reference dumps (xtask/tests/data/reference-dumps) are needed by \
             these tests",
            dir.display()
        )
    });
    let mut out: Vec<(String, String)> = entries
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "xml"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let text =
                std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (name, text)
        })
        .collect();
    out.sort();
    assert!(
        out.len() >= 11,
        "expected the 11 XML dumps in {}, found {}",
        dir.display(),
        out.len()
    );
    out
}

fn import(name: &str, text: &str) -> Fixture {
    let f = import_str(text, name, name, "test").unwrap_or_else(|e| panic!("{name}: {e:#}"));
    f.validate()
        .unwrap_or_else(|e| panic!("{name}: invalid {e}"));
    f
}

fn dump(name: &str) -> Fixture {
    let (_, text) = xml_dumps()
        .into_iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no dump {name}"));
    import(name, &text)
}

// ---- Independent readers of the XML text (no XML parser), beside test_support::smi_xml's ----

/// The `id` attribute of each `<gpu id="...">`.
fn gpu_ids(s: &str) -> Vec<String> {
    s.split("<gpu id=\"")
        .skip(1)
        .map(|rest| rest.split('"').next().unwrap_or("").to_string())
        .collect()
}

/// A temperature threshold as the XML gives it, absolute (`old`), or relative to T.Limit
/// (nvidia-smi 575 and newer: `relative`), worked out here as `gpu_temp + gpu_temp_tlimit -
/// relative`, in the `"N C"` form nvidia-smi prints; the relative text itself when it is a
/// placeholder.
fn threshold(temp: &str, old: &str, relative: &str) -> Option<String> {
    if let Some(v) = value(temp, old) {
        return Some(v);
    }
    let rel = value(temp, relative)?;
    let number = |v: &str| v.trim_end_matches(" C").parse::<i64>().ok();
    match (
        value(temp, "gpu_temp").as_deref().and_then(number),
        value(temp, "gpu_temp_tlimit").as_deref().and_then(number),
        number(&rel),
    ) {
        (Some(now), Some(margin), Some(offset)) => Some(format!("{} C", now + margin - offset)),
        _ => Some(rel),
    }
}

/// The number before the unit in `"123 MiB"`, `"67.03 W"`, `"53 %"`.
fn leading_number(v: &str) -> f64 {
    v.split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not a number with a unit: {v:?}"))
}

/// Checks an answer against a value printed in the XML, scaled by `factor`.
fn check_num<T>(what: &str, got: &Answer<T>, printed: Option<String>, factor: f64)
where
    T: Copy + Into<f64> + std::fmt::Debug,
{
    match printed {
        Some(v) if !is_placeholder(&v) => {
            let want = (leading_number(&v) * factor).round();
            match got {
                Answer::Ok(n) => assert_eq!((*n).into(), want, "{what}: XML says {v:?}"),
                Answer::Err(e) => panic!("{what}: XML says {v:?} but the fixture has {e:?}"),
            }
        }
        other => assert!(got.is_err(), "{what}: XML says {other:?}, fixture {got:?}"),
    }
}

/// Checks the frame-buffer memory total and used against the first `<fb_memory_usage>` of
/// `xml` (MiB).
fn check_fb_memory(what: &str, mem: Option<&MemoryInfo>, xml: &str) {
    let fb = blocks(xml, "fb_memory_usage");
    let fb = fb.first().copied().unwrap_or("");
    let total = mem.map(|m| m.total);
    check_u64(
        &format!("{what} total"),
        total,
        value(fb, "total"),
        MIB as f64,
    );
    let used = mem.map(|m| m.used);
    check_u64(&format!("{what} used"), used, value(fb, "used"), MIB as f64);
}

fn check_u64(what: &str, got: Option<u64>, printed: Option<String>, factor: f64) {
    let answer = match got {
        Some(n) => Answer::Ok(n as f64),
        None => Answer::Err(BackendError::NotSupported),
    };
    check_num(what, &answer, printed, factor);
}

fn pad_bus_id(id: &str) -> String {
    let (domain, rest) = id.split_once(':').expect("bus id with a domain");
    format!(
        "{}{domain}:{rest}",
        "0".repeat(8usize.saturating_sub(domain.len()))
    )
}

/// For every GPU of every dump that carries them: the health values (retired pages with their
/// addresses, remapped rows, PCIe replays, temperature thresholds, inforom version) in the
/// imported fixture equal what the XML text says, read here without the importer's parser.
#[test]
fn health_values_of_every_dump_match_its_xml() {
    let mut pages_seen = 0;
    let mut rows_seen = 0;
    for (file, text) in xml_dumps() {
        let f = import(&file, &text);
        for (i, g) in blocks(&text, "gpu").iter().enumerate() {
            let at = |what: &str| format!("{file} GPU {i} {what}");
            let id = DeviceId::Gpu(i as u32);
            let st = &f.devices[&id];
            let dy = &f.frames[0].devices[&id];
            let top = without(&without(g, "mig_devices"), "processes");
            let pci = blocks(&top, "pci").first().copied().unwrap_or("");
            check_num(
                &at("replay"),
                &dy.pcie_replay_counter,
                value(pci, "replay_counter"),
                1.0,
            );
            let temp = blocks(&top, "temperature").first().copied().unwrap_or("");
            check_num(
                &at("gpu max"),
                &st.temperature_gpu_max,
                threshold(
                    temp,
                    "gpu_temp_max_gpu_threshold",
                    "gpu_temp_max_gpu_tlimit_threshold",
                ),
                1.0,
            );
            check_num(
                &at("mem max"),
                &st.temperature_memory_max,
                value(temp, "gpu_temp_max_mem_threshold"),
                1.0,
            );
            let inforom = blocks(&top, "inforom_version")
                .first()
                .copied()
                .unwrap_or("");
            match value(inforom, "img_version").filter(|v| !is_placeholder(v)) {
                Some(v) => assert_eq!(st.inforom_image_version.ok(), Some(&v), "{}", at("inforom")),
                None => assert!(st.inforom_image_version.is_err(), "{}", at("inforom")),
            }
            let retired = blocks(&top, "retired_pages").first().copied().unwrap_or("");
            for (tag, got) in [
                (
                    "multiple_single_bit_retirement",
                    &dy.retired_pages_single_bit,
                ),
                ("double_bit_retirement", &dy.retired_pages_double_bit),
            ] {
                let cause = blocks(retired, tag).first().copied().unwrap_or("");
                match value(cause, "retired_count").filter(|v| !is_placeholder(v)) {
                    Some(n) => {
                        let want: Vec<u64> = blocks(cause, "retired_page_address")
                            .iter()
                            .map(|a| {
                                u64::from_str_radix(a.trim().trim_start_matches("0x"), 16).unwrap()
                            })
                            .collect();
                        assert_eq!(want.len(), n.parse::<usize>().unwrap(), "{}", at(tag));
                        assert_eq!(got.ok(), Some(&want), "{}", at(tag));
                        pages_seen += want.len();
                    }
                    None => assert!(got.is_err(), "{}", at(tag)),
                }
            }
            match value(retired, "pending_retirement").filter(|v| !is_placeholder(v)) {
                Some(v) => assert_eq!(
                    dy.retired_pages_pending.ok(),
                    Some(&(v == "Yes")),
                    "{}",
                    at("pending")
                ),
                None => assert!(dy.retired_pages_pending.is_err(), "{}", at("pending")),
            }
            let rows = blocks(&top, "remapped_rows").first().copied().unwrap_or("");
            match value(rows, "remapped_row_corr") {
                Some(corr) => {
                    let r = dy
                        .remapped_rows
                        .ok()
                        .unwrap_or_else(|| panic!("{}", at("rows")));
                    assert_eq!(r.correctable.to_string(), corr, "{}", at("rows"));
                    assert_eq!(
                        Some(r.uncorrectable.to_string()),
                        value(rows, "remapped_row_unc")
                    );
                    assert_eq!(
                        Some(r.pending),
                        value(rows, "remapped_row_pending").map(|v| v == "Yes")
                    );
                    assert_eq!(
                        Some(r.failure),
                        value(rows, "remapped_row_failure").map(|v| v == "Yes")
                    );
                    rows_seen += 1;
                }
                None => assert!(dy.remapped_rows.is_err(), "{}", at("rows")),
            }
        }
    }
    assert!(
        pages_seen >= 2,
        "no dump with retired page addresses was checked"
    );
    assert!(rows_seen >= 1, "no dump with remapped rows was checked");
}

/// Regression: nvidia-smi's "Requested functionality has been deprecated" was imported as
/// not supported; it is NVML_ERROR_DEPRECATED.
#[test]
fn deprecated_placeholder_imports_as_deprecated() {
    let f = dump("telegraf__pro-6000-maxq-blackwell-v13.xml");
    assert_eq!(
        f.devices[&DeviceId::Gpu(0)].display_mode,
        Answer::Err(BackendError::Deprecated)
    );
}

/// For every GPU of every dump: the fixture's answers equal what the XML text says.
#[test]
fn every_gpu_of_every_dump_matches_its_xml() {
    for (file, text) in xml_dumps() {
        let f = import(&file, &text);
        let gpus = blocks(&text, "gpu");
        assert_eq!(f.physical_ids().count(), gpus.len(), "{file}: GPU count");
        assert_eq!(
            f.system.device_count,
            Answer::Ok(gpus.len() as u32),
            "{file}"
        );
        let driver = value(&text, "driver_version");
        assert_eq!(f.system.driver_version.ok(), driver.as_ref(), "{file}");
        match value(&text, "cuda_version") {
            Some(v) => {
                let (major, minor) = v.split_once('.').unwrap();
                let want =
                    major.parse::<i32>().unwrap() * 1000 + minor.parse::<i32>().unwrap() * 10;
                assert_eq!(f.system.cuda_driver_version, Answer::Ok(want), "{file}");
            }
            None => assert!(f.system.cuda_driver_version.is_err(), "{file}"),
        }
        let ids = gpu_ids(&text);
        for (i, g) in gpus.iter().enumerate() {
            let at = |what: &str| format!("{file} GPU {i} {what}");
            let id = DeviceId::Gpu(i as u32);
            let st = &f.devices[&id];
            let dy = &f.frames[0].devices[&id];
            let top = without(&without(g, "mig_devices"), "processes");

            assert_eq!(
                st.name.ok(),
                value(&top, "product_name").as_ref(),
                "{}",
                at("name")
            );
            assert_eq!(st.uuid.ok(), value(&top, "uuid").as_ref(), "{}", at("uuid"));
            match (value(&top, "pci_bus_id"), &st.pci_info) {
                (Some(bus), Answer::Ok(pci)) => {
                    assert_eq!(pci.bus_id, pad_bus_id(&bus), "{}", at("bus id"));
                    assert_eq!(pci.bus_id, pad_bus_id(&ids[i]), "{}", at("gpu id"));
                    assert_eq!(pci.bus_id.len(), 16, "{}", at("bus id form"));
                }
                (None, answer) => assert!(answer.is_err(), "{}", at("no <pci>")),
                (Some(bus), answer) => panic!("{}: XML {bus}, fixture {answer:?}", at("bus id")),
            }

            check_fb_memory(&at("memory"), dy.memory_info.ok(), &top);

            let util = blocks(&top, "utilization");
            let util = util.first().copied().unwrap_or("");
            let u = &dy.utilization_rates;
            let gpu_util = value(util, "gpu_util");
            let mem_util = value(util, "memory_util");
            if gpu_util.as_deref().is_some_and(|v| !is_placeholder(v)) {
                check_num(
                    &at("gpu util"),
                    &Answer::Ok(u.ok().map(|u| u.gpu).unwrap_or(999)),
                    gpu_util,
                    1.0,
                );
                check_num(
                    &at("mem util"),
                    &Answer::Ok(u.ok().map(|u| u.memory).unwrap_or(999)),
                    mem_util,
                    1.0,
                );
            } else {
                assert!(u.is_err(), "{}", at("utilization"));
            }
            check_num(
                &at("encoder util"),
                &dy.encoder_utilization
                    .clone()
                    .get()
                    .map(|c| c.utilization)
                    .into(),
                value(util, "encoder_util"),
                1.0,
            );

            check_num(
                &at("temperature"),
                &dy.temperature,
                value(&top, "gpu_temp"),
                1.0,
            );
            let temp = blocks(&top, "temperature").first().copied().unwrap_or("");
            check_num(
                &at("slowdown"),
                &st.temperature_slowdown,
                threshold(
                    temp,
                    "gpu_temp_slow_threshold",
                    "gpu_temp_slow_tlimit_threshold",
                ),
                1.0,
            );
            check_num(
                &at("shutdown"),
                &st.temperature_shutdown,
                threshold(
                    temp,
                    "gpu_temp_max_threshold",
                    "gpu_temp_max_tlimit_threshold",
                ),
                1.0,
            );

            let power = blocks(&top, "gpu_power_readings")
                .into_iter()
                .chain(blocks(&top, "power_readings"))
                .next()
                .unwrap_or("");
            let draw = value(power, "power_draw").or_else(|| value(power, "average_power_draw"));
            check_num(&at("power draw"), &dy.power_usage, draw, 1000.0);
            let limit =
                value(power, "requested_power_limit").or_else(|| value(power, "power_limit"));
            check_num(
                &at("power limit"),
                &st.power_management_limit,
                limit,
                1000.0,
            );
            let enforced = value(power, "current_power_limit")
                .or_else(|| value(power, "enforced_power_limit"));
            check_num(
                &at("enforced limit"),
                &st.enforced_power_limit,
                enforced,
                1000.0,
            );

            let fan = value(&top, "fan_speed");
            check_num(&at("fan"), &dy.fan_speed, fan.clone(), 1.0);
            match fan.as_deref() {
                Some(v) if !is_placeholder(v) => {
                    assert_eq!(st.num_fans, Answer::Ok(1), "{}", at("num fans"));
                    assert_eq!(dy.fan_speeds, vec![dy.fan_speed.clone()], "{}", at("fans"));
                }
                _ => assert!(dy.fan_speeds.is_empty(), "{}", at("fans")),
            }

            let clocks = blocks(&top, "clocks");
            let clocks = clocks.first().copied().unwrap_or("");
            for (what, got, tag) in [
                ("graphics clock", &dy.clocks.graphics, "graphics_clock"),
                ("sm clock", &dy.clocks.sm, "sm_clock"),
                ("mem clock", &dy.clocks.memory, "mem_clock"),
                ("video clock", &dy.clocks.video, "video_clock"),
            ] {
                check_num(&at(what), got, value(clocks, tag), 1.0);
            }
            let max = blocks(&top, "max_clocks");
            let max = max.first().copied().unwrap_or("");
            for (what, got, tag) in [
                ("max graphics", &st.max_clocks.graphics, "graphics_clock"),
                ("max memory", &st.max_clocks.memory, "mem_clock"),
            ] {
                check_num(&at(what), got, value(max, tag), 1.0);
            }

            // MIG children.
            let migs = blocks(g, "mig_device");
            let children: Vec<DeviceId> = f
                .devices
                .keys()
                .copied()
                .filter(|d| d.is_mig() && d.physical_index() == i as u32)
                .collect();
            assert_eq!(children.len(), migs.len(), "{}", at("MIG count"));
            for (m, child) in migs.iter().zip(&children) {
                let cst = &f.devices[child];
                let cdy = &f.frames[0].devices[child];
                check_num(
                    &at("GI"),
                    &cst.gpu_instance_id,
                    value(m, "gpu_instance_id"),
                    1.0,
                );
                check_num(
                    &at("CI"),
                    &cst.compute_instance_id,
                    value(m, "compute_instance_id"),
                    1.0,
                );
                check_fb_memory(&at("MIG"), cdy.memory_info.ok(), m);
                let bar1 = blocks(m, "bar1_memory_usage");
                let bar1 = bar1.first().copied().unwrap_or("");
                let b = cdy.bar1_memory_info.ok();
                check_u64(
                    &at("MIG bar1"),
                    b.map(|b| b.total),
                    value(bar1, "total"),
                    MIB as f64,
                );
            }
            match st.mig_device_indices.ok() {
                Some(slots) => assert_eq!(slots.len(), migs.len(), "{}", at("slots")),
                None => assert!(migs.is_empty(), "{}", at("slots")),
            }

            // Processes.
            let procs = blocks(g, "process_info");
            if !g.contains("<processes") {
                assert!(dy.compute_processes.is_err() && dy.graphics_processes.is_err());
                continue;
            }
            let compute = dy.compute_processes.ok().expect("compute list");
            let graphics = dy.graphics_processes.ok().expect("graphics list");
            let mut want_c = 0;
            let mut want_g = 0;
            for p in &procs {
                let pid: u32 = value(p, "pid").unwrap().parse().unwrap();
                let kind = value(p, "type").unwrap();
                let printed = value(p, "used_memory");
                for (list, is_in, count) in [
                    (&compute, kind.contains('C'), &mut want_c),
                    (&graphics, kind.contains('G'), &mut want_g),
                ] {
                    if !is_in {
                        continue;
                    }
                    *count += 1;
                    let entry = list
                        .iter()
                        .find(|e| e.pid == pid)
                        .unwrap_or_else(|| panic!("{}: pid {pid} ({kind}) missing", at("process")));
                    check_u64(
                        &at(&format!("pid {pid} memory")),
                        entry.used_gpu_memory,
                        printed.clone(),
                        MIB as f64,
                    );
                }
                let host = &f.host.processes[&pid];
                let printed_name = value(p, "process_name").filter(|n| !n.is_empty());
                assert_eq!(host.cmdline.first(), printed_name.as_ref());
                // A process nvidia-smi did not name has an unknown name, not "".
                assert_eq!(
                    host.name.is_some(),
                    printed_name.is_some(),
                    "{}",
                    at("name")
                );
                assert!(f.frames[0].host.processes.contains_key(&pid));
            }
            assert_eq!(compute.len(), want_c, "{}", at("compute count"));
            assert_eq!(graphics.len(), want_g, "{}", at("graphics count"));
        }
    }
}

/// Values transcribed by hand from the dumps (not from the importer).
#[test]
fn transcribed_values_of_some_dumps() {
    let a100 = dump("telegraf__a100-sxm4-v12.xml");
    let g = &a100.devices[&DeviceId::Gpu(0)];
    assert_eq!(g.name, Answer::Ok("NVIDIA A100-SXM4-80GB".into()));
    assert_eq!(g.mig_device_indices, Answer::Ok(vec![0, 1, 2, 3]));
    assert_eq!(g.power_management_limit, Answer::Ok(500_000));
    assert_eq!(
        g.power_management_limit_constraints
            .ok()
            .map(|c| (c.min_mw, c.max_mw)),
        Some((100_000, 500_000))
    );
    assert_eq!(a100.system.cuda_driver_version, Answer::Ok(12020));
    assert_eq!(a100.system.device_count, Answer::Ok(1));
    assert!(a100.meta.description.contains("attached_gpus = 4"));
    for (slot, gi) in [(0, 3), (1, 4), (2, 5), (3, 6)] {
        let id = DeviceId::Mig {
            parent: 0,
            index: slot,
        };
        assert_eq!(a100.devices[&id].gpu_instance_id, Answer::Ok(gi));
        assert_eq!(a100.devices[&id].compute_instance_id, Answer::Ok(0));
        let m = a100.frames[0].devices[&id]
            .memory_info
            .ok()
            .copied()
            .unwrap();
        assert_eq!((m.total, m.used), (19968 * MIB, 12 * MIB));
    }
    let d = &a100.frames[0].devices[&DeviceId::Gpu(0)];
    assert_eq!(d.power_usage, Answer::Ok(67_030));
    assert_eq!(d.temperature, Answer::Ok(27));
    assert_eq!(d.pcie_tx_throughput, Answer::Ok(4000));
    assert_eq!(
        d.memory_info.ok().map(|m| m.reserved),
        Some(Some(869 * MIB))
    );

    let pro = dump("telegraf__pro-6000-maxq-blackwell-v13.xml");
    let d = &pro.frames[0].devices[&DeviceId::Gpu(0)];
    assert_eq!(d.power_usage, Answer::Ok(3_970));
    assert_eq!(d.fan_speed, Answer::Ok(30));
    assert_eq!(d.performance_state, Answer::Ok(8));
    let c = d.compute_processes.ok().unwrap();
    assert_eq!(
        (c[0].pid, c[0].used_gpu_memory),
        (116_860, Some(65_710 * MIB))
    );
    assert_eq!(
        pro.host.processes[&116_860].name.as_deref(),
        Some("llama-server")
    );
    let s = &pro.devices[&DeviceId::Gpu(0)];
    assert_eq!(s.display_mode, Answer::Err(BackendError::Deprecated));
    // Relative to T.Limit (24 C + 68 C = 92 C): slowdown -2 C, shutdown -5 C, GPU max 0 C; the
    // memory maximum N/A.
    assert_eq!(s.temperature_slowdown, Answer::Ok(94));
    assert_eq!(s.temperature_shutdown, Answer::Ok(97));
    assert_eq!(s.temperature_gpu_max, Answer::Ok(92));
    assert_eq!(
        s.temperature_memory_max,
        Answer::Err(BackendError::NotSupported)
    );
    assert_eq!(pro.system.cuda_driver_version, Answer::Ok(13010));

    let grid = dump("rai-nvidia-smi__example2.xml");
    let s = &grid.devices[&DeviceId::Gpu(0)];
    assert_eq!(s.pci_info.ok().unwrap().bus_id, "00000000:00:03.0");
    assert_eq!(s.name, Answer::Ok("GRID K520".into()));
    assert!(grid.system.cuda_driver_version.is_err());
    assert!(grid.meta.source.contains("inline DTD nvsmi_device_v7"));
    let d = &grid.frames[0].devices[&DeviceId::Gpu(0)];
    assert_eq!(d.clocks.video, Answer::Err(BackendError::NotSupported));
    assert_eq!(d.clock_event_reasons, Answer::Ok(0x1));

    let t4 = dump("telegraf__tesla_t4.xml");
    let s = &t4.devices[&DeviceId::Gpu(0)];
    assert_eq!(
        s.driver_model.ok().map(|m| (m.current, m.pending)),
        Some((DriverModel::Wddm, DriverModel::Wddm))
    );
    let d = &t4.frames[0].devices[&DeviceId::Gpu(0)];
    let (c, g) = (
        d.compute_processes.ok().unwrap(),
        d.graphics_processes.ok().unwrap(),
    );
    assert_eq!((c.len(), g.len()), (15, 15));
    assert!(c.iter().chain(g).all(|p| p.used_gpu_memory.is_none()));

    let v100 = dump("pai__nvidia_smi_retired_pages.xml");
    let e = &v100.frames[0].devices[&DeviceId::Gpu(0)].ecc_errors;
    assert_eq!(
        (
            &e.volatile_corrected,
            &e.volatile_uncorrected,
            &e.aggregate_corrected,
            &e.aggregate_uncorrected
        ),
        (
            &Answer::Ok(1),
            &Answer::Ok(1),
            &Answer::Ok(291),
            &Answer::Ok(7627)
        )
    );

    // Dumps without `<reserved>` memory come from drivers with only the v1 memory call.
    assert!(a100.nvml_missing_functions.is_empty());
    assert_eq!(v100.nvml_missing_functions, ["nvmlDeviceGetMemoryInfo_v2"]);
    let v100_mem = v100.frames[0].devices[&DeviceId::Gpu(0)]
        .memory_info
        .ok()
        .copied()
        .unwrap();
    assert_eq!((v100_mem.total, v100_mem.reserved), (32480 * MIB, None));

    let sample = dump("pai__nvidia_smi_sample.xml");
    assert_eq!(sample.system.device_count, Answer::Ok(2));
    assert!(sample.meta.description.contains("attached_gpus = 6"));

    let old = dump("telegraf__gtx-1660-ti.xml");
    assert!(old.meta.source.contains("no DOCTYPE"));
    assert_eq!(
        old.devices[&DeviceId::Gpu(0)].name,
        Answer::Ok("Graphics Device".into())
    );

    let gt730 = dump("pai__nvidia_smi_outdated_gpu.xml");
    let d = &gt730.frames[0].devices[&DeviceId::Gpu(0)];
    assert!(d.memory_info.is_err() && d.utilization_rates.is_err() && d.compute_processes.is_err());
}

fn record_replay(fixture: &Fixture) -> Fixture {
    gpu_backend::recorder::rerecord(fixture)
}

#[test]
fn every_dump_imports_validates_and_round_trips_through_replay_and_recording() {
    for (file, text) in xml_dumps() {
        let f = import(&file, &text);
        let back = Fixture::from_json_str(&f.to_json_pretty(), &file)
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(back, f, "{file}: JSON round trip");
        assert_eq!(record_replay(&f), f, "{file}: recording its replay differs");
    }
}

/// A MIG GPU with processes inside instances, C+G processes, WDDM memory and every placeholder.
const SYNTHETIC: &str = r#"<?xml version="1.0" ?>
<nvidia_smi_log>
  <driver_version>590.48.01</driver_version>
  <cuda_version>13.1</cuda_version>
  <attached_gpus>1</attached_gpus>
  <gpu id="0000:00:09.0">
    <product_name>NVIDIA H100 80GB HBM3</product_name>
    <uuid>GPU-00000000-0000-0000-0000-000000000000</uuid>
    <serial>[Insufficient Permissions]</serial>
    <vbios_version>[Unknown Error]</vbios_version>
    <board_part_number>[GPU is lost]</board_part_number>
    <minor_number>[Not Supported]</minor_number>
    <mig_mode><current_mig>Enabled</current_mig><pending_mig>Enabled</pending_mig></mig_mode>
    <mig_devices>
      <mig_device><index>0</index><gpu_instance_id>2</gpu_instance_id><compute_instance_id>0</compute_instance_id>
        <fb_memory_usage><total>40448 MiB</total><reserved>0 MiB</reserved><used>39 MiB</used><free>40409 MiB</free></fb_memory_usage>
        <bar1_memory_usage><total>24739 MiB</total><used>0 MiB</used><free>24739 MiB</free></bar1_memory_usage>
      </mig_device>
      <mig_device><index>1</index><gpu_instance_id>3</gpu_instance_id><compute_instance_id>0</compute_instance_id>
        <fb_memory_usage><total>20096 MiB</total><used>17 MiB</used><free>20079 MiB</free></fb_memory_usage>
      </mig_device>
    </mig_devices>
    <pci><pci_bus>00</pci_bus><pci_device>09</pci_device><pci_domain>0000</pci_domain>
      <pci_device_id>233010DE</pci_device_id><pci_bus_id>0000:00:09.0</pci_bus_id><pci_sub_system_id>16C110DE</pci_sub_system_id></pci>
    <fan_speed>N/A</fan_speed>
    <processes>
      <process_info><gpu_instance_id>2</gpu_instance_id><compute_instance_id>0</compute_instance_id>
        <pid>21198</pid><type>C</type><process_name>./gpu_burn -m 20%</process_name><used_memory>7484 MiB</used_memory></process_info>
      <process_info><gpu_instance_id>3</gpu_instance_id><compute_instance_id>0</compute_instance_id>
        <pid>21230</pid><type>C+G</type><process_name>C:\Program Files\App\app.exe</process_name><used_memory>Not available in WDDM driver model</used_memory></process_info>
      <process_info><pid>oops</pid><type>C</type></process_info>
    </processes>
  </gpu>
</nvidia_smi_log>"#;

#[test]
fn mig_processes_go_to_their_instance_and_to_the_parent() {
    let f = import("synthetic.xml", SYNTHETIC);
    let frame = &f.frames[0];
    let parent = &frame.devices[&DeviceId::Gpu(0)];
    let pids = |a: &Answer<Vec<gpu_backend::ProcessInfo>>| -> Vec<u32> {
        a.ok().unwrap().iter().map(|p| p.pid).collect()
    };
    assert_eq!(pids(&parent.compute_processes), [21198, 21230]);
    assert_eq!(pids(&parent.graphics_processes), [21230]);
    let m0 = &frame.devices[&DeviceId::Mig {
        parent: 0,
        index: 0,
    }];
    let m1 = &frame.devices[&DeviceId::Mig {
        parent: 0,
        index: 1,
    }];
    assert_eq!(pids(&m0.compute_processes), [21198]);
    assert_eq!(pids(&m0.graphics_processes), Vec::<u32>::new());
    assert_eq!(pids(&m1.compute_processes), [21230]);
    assert_eq!(pids(&m1.graphics_processes), [21230]);
    let burn = m0.compute_processes.ok().unwrap()[0];
    assert_eq!(burn.used_gpu_memory, Some(7484 * MIB));
    assert_eq!(
        (burn.gpu_instance_id, burn.compute_instance_id),
        (Some(2), Some(0))
    );
    let app = m1.compute_processes.ok().unwrap()[0];
    assert_eq!(app.used_gpu_memory, None);
    assert_eq!(f.host.processes[&21198].name.as_deref(), Some("gpu_burn"));
    assert_eq!(f.host.processes[&21198].cmdline, ["./gpu_burn -m 20%"]);
    assert_eq!(f.host.processes[&21230].name.as_deref(), Some("app.exe"));
    // Regression: the import wrote cpu_percent 0.0, rss 0 and status "unknown" for every
    // process, which read as measured values; nvidia-smi tells none of them.
    let sample = &frame.host.processes[&21230];
    assert_eq!(
        (sample.cpu_percent, sample.rss, sample.status.as_deref()),
        (None, None, None)
    );
    assert!(f.meta.description.contains("without a readable pid"));
    assert_eq!(m1.memory_info.ok().unwrap().reserved, None);
    assert!(m1.bar1_memory_info.is_err());

    let s = &f.devices[&DeviceId::Gpu(0)];
    assert_eq!(s.serial, Answer::Err(BackendError::NoPermission));
    assert_eq!(s.vbios_version, Answer::Err(BackendError::Unknown(999)));
    assert_eq!(s.board_part_number, Answer::Err(BackendError::GpuLost));
    assert_eq!(s.minor_number, Answer::Err(BackendError::NotSupported));
    assert_eq!(s.pci_info.ok().unwrap().bus_id, "00000000:00:09.0");
    assert_eq!(s.pci_info.ok().unwrap().pci_device_id, 0x2330_10DE);
    assert_eq!(s.mig_device_indices, Answer::Ok(vec![0, 1]));
    assert_eq!(
        f.devices[&DeviceId::Mig {
            parent: 0,
            index: 1
        }]
            .gpu_instance_id,
        Answer::Ok(3)
    );
    assert_eq!(
        f.system.nvml_version,
        Answer::Err(BackendError::NotSupported)
    );
    assert_eq!(f.system.cuda_driver_version, Answer::Ok(13010));
    assert_eq!(record_replay(&f), f);
}

#[test]
fn what_is_not_nvidia_smi_xml_is_refused_naming_the_file() {
    let cases = [
        ("empty.xml", ""),
        ("text.xml", "nvidia-smi says hello"),
        (
            "other-root.xml",
            "<?xml version=\"1.0\"?><config><a/></config>",
        ),
        ("broken.xml", "<nvidia_smi_log><gpu></nvidia_smi_log>"),
        ("cut.xml", "<nvidia_smi_log><gpu id=\"1\">"),
        ("json.xml", "{\"gpu\": 1}"),
    ];
    for (name, text) in cases {
        let e = import_str(text, name, name, "x")
            .expect_err(name)
            .to_string();
        assert!(e.starts_with(name), "{e}");
        assert!(
            e.contains("nvidia-smi -q -x") && e.contains("<nvidia_smi_log>"),
            "{e}"
        );
    }
    let e = import_str("<config/>", "f.xml", "f.xml", "x")
        .unwrap_err()
        .to_string();
    assert!(e.contains("root element is <config>"), "{e}");
    // The text captures next to the XML dumps are not XML.
    for entry in std::fs::read_dir(dumps_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|x| x == "txt") {
            let text = std::fs::read_to_string(&path).unwrap();
            let origin = path.display().to_string();
            let e = import_str(&text, &origin, "t", "x")
                .unwrap_err()
                .to_string();
            assert!(e.contains(&origin) && e.contains("not XML"), "{e}");
        }
    }
}

#[test]
fn the_command_writes_a_loadable_fixture_and_fails_on_bad_input() {
    let dir = std::env::temp_dir().join(format!("import-smi-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("a100.json");
    super::run(super::Args {
        dump: dumps_dir().join("telegraf__a100-sxm4-v12.xml"),
        out: out.clone(),
        name: None,
    })
    .unwrap();
    let f = Fixture::load(&out).unwrap();
    assert_eq!(f.meta.name, "telegraf__a100-sxm4-v12");
    assert_eq!(f.devices.len(), 5);
    let bad = dir.join("bad.xml");
    std::fs::write(&bad, "<html></html>").unwrap();
    let e = super::run(super::Args {
        dump: bad.clone(),
        out: dir.join("bad.json"),
        name: Some("bad".into()),
    })
    .unwrap_err();
    assert!(format!("{e:#}").contains(&bad.display().to_string()));
    assert!(!dir.join("bad.json").exists());
    let missing = super::run(super::Args {
        dump: dir.join("missing.xml"),
        out: dir.join("m.json"),
        name: None,
    });
    assert!(missing.is_err());
    std::fs::remove_dir_all(&dir).ok();
}

// ---- Property tests: nothing panics, and whatever imports validates ----

fn check_never_panics(text: &str) {
    if let Ok(f) = import_str(text, "prop.xml", "prop.xml", "prop") {
        if let Err(gpu_backend::fixture::InvalidFixture {
            path: p,
            message: m,
        }) = f.validate()
        {
            panic!("imported but invalid at {p}: {m}\n{text}");
        }
    }
}

const TAGS: &[&str] = &[
    "nvidia_smi_log",
    "gpu",
    "driver_version",
    "cuda_version",
    "attached_gpus",
    "product_name",
    "product_brand",
    "product_architecture",
    "uuid",
    "pci",
    "pci_bus_id",
    "pci_device_id",
    "pci_sub_system_id",
    "pci_domain",
    "fb_memory_usage",
    "total",
    "used",
    "free",
    "reserved",
    "utilization",
    "gpu_util",
    "memory_util",
    "fan_speed",
    "temperature",
    "gpu_temp",
    "clocks",
    "max_clocks",
    "graphics_clock",
    "power_readings",
    "power_draw",
    "mig_mode",
    "current_mig",
    "mig_devices",
    "mig_device",
    "index",
    "gpu_instance_id",
    "compute_instance_id",
    "processes",
    "process_info",
    "pid",
    "type",
    "used_memory",
    "process_name",
    "ecc_errors",
    "volatile",
    "single_bit",
    "performance_state",
    "clocks_event_reasons",
    "clocks_event_reason_gpu_idle",
];

const VALUES: &[&str] = &[
    "N/A",
    "[Not Supported]",
    "[Insufficient Permissions]",
    "[Unknown Error]",
    "[GPU is lost]",
    "12 MiB",
    "-5 C",
    "67.03 W",
    "1e309 W",
    "99999999999999999999 MiB",
    "P8",
    "Unknown",
    "16x",
    "C+G",
    "G",
    "Enabled",
    "Disabled",
    "Active",
    "0000:00:03.0",
    "ZZ",
    "3",
    "0",
    "4294967296",
    "12.2",
    "Not available in WDDM driver model",
    "&amp;",
    "",
    "None",
    "-1",
];

fn element() -> impl Strategy<Value = String> {
    let leaf = (prop::sample::select(TAGS), prop::sample::select(VALUES))
        .prop_map(|(t, v)| format!("<{t}>{v}</{t}>"));
    leaf.prop_recursive(5, 64, 6, |inner| {
        (
            prop::sample::select(TAGS),
            prop::collection::vec(inner, 0..6),
        )
            .prop_map(|(t, kids)| format!("<{t}>{}</{t}>", kids.concat()))
    })
}

fn real_dump_texts() -> &'static [(String, String)] {
    static ALL: std::sync::OnceLock<Vec<(String, String)>> = std::sync::OnceLock::new();
    ALL.get_or_init(xml_dumps)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        check_never_panics(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn arbitrary_strings_never_panic(s in ".{0,256}") {
        check_never_panics(&s);
        check_never_panics(&format!("<nvidia_smi_log>{s}</nvidia_smi_log>"));
    }

    #[test]
    fn xml_ish_documents_never_panic(kids in prop::collection::vec(element(), 0..4)) {
        check_never_panics(&format!("<nvidia_smi_log>{}</nvidia_smi_log>", kids.concat()));
        check_never_panics(&format!("<nvidia_smi_log><gpu id=\"x\">{}</gpu></nvidia_smi_log>", kids.concat()));
    }

    #[test]
    fn mangled_real_dumps_never_panic(
        which in any::<prop::sample::Index>(),
        at in any::<prop::sample::Index>(),
        cut in any::<bool>(),
        junk in prop::sample::select(VALUES),
    ) {
        let dumps = real_dump_texts();
        let (_, text) = &dumps[which.index(dumps.len())];
        let mut pos = at.index(text.len().max(1));
        while !text.is_char_boundary(pos) {
            pos -= 1;
        }
        if cut {
            check_never_panics(&text[..pos]);
        } else {
            check_never_panics(&format!("{}{junk}{}", &text[..pos], &text[pos..]));
        }
    }

    /// Replacing any value of a real dump with any placeholder or odd value still imports into
    /// a valid fixture (a value never breaks the document).
    #[test]
    fn any_value_of_a_real_dump_may_be_anything(
        which in any::<prop::sample::Index>(),
        at in any::<prop::sample::Index>(),
        junk in prop::sample::select(VALUES),
    ) {
        let dumps = real_dump_texts();
        let (name, text) = &dumps[which.index(dumps.len())];
        // The n-th `>value<` of the document.
        let spots: Vec<(usize, usize)> = text
            .match_indices('>')
            .filter_map(|(i, _)| {
                let rest = &text[i + 1..];
                let end = rest.find('<')?;
                let v = &rest[..end];
                (!v.trim().is_empty() && !v.contains('\n')).then_some((i + 1, i + 1 + end))
            })
            .collect();
        prop_assume!(!spots.is_empty());
        let (s, e) = spots[at.index(spots.len())];
        let junk = junk.replace('&', "&amp;");
        let mangled = format!("{}{junk}{}", &text[..s], &text[e..]);
        let f = import_str(&mangled, name, name, "prop");
        prop_assert!(f.is_ok(), "{name}: {:?}", f.err());
        let f = f.unwrap();
        prop_assert!(f.validate().is_ok());
    }
}

/// The reference dumps imported, one fixture per dump in xtask/tests/data/imported/, are what
/// the importer makes of them now: gpuscope's reference-dump test
/// (crates/gpuscope/tests/cli/reference_dumps.rs) reads them with `gpuscope info --json`. Run
/// with `UPDATE_IMPORTED=1` to write them.
#[test]
fn imported_reference_dumps_are_up_to_date() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/imported");
    let update = std::env::var_os("UPDATE_IMPORTED").is_some();
    for (file, text) in xml_dumps() {
        let stem = file.trim_end_matches(".xml");
        let fixture = import_str(&text, &file, &file, stem).unwrap();
        fixture.validate().unwrap();
        let want = fixture.to_json_pretty() + "\n";
        let path = dir.join(format!("{stem}.json"));
        if update {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &want).unwrap();
            continue;
        }
        let got = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; run `UPDATE_IMPORTED=1 cargo test -p xtask imported_reference_dumps`",
                path.display()
            )
        });
        assert!(
            got == want,
            "{} is out of date; run `UPDATE_IMPORTED=1 cargo test -p xtask imported_reference_dumps`",
            path.display()
        );
    }
}

// ---- The real H100 of fixtures/h100-real/: nvidia-smi against what NVML answered ----

/// A file of the real H100 session (fixtures/h100-real/).
fn real_h100_file(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/h100-real")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// What pynvml read from the real driver in the same session, by query
/// (`pynvml-answers.load.json`): `Ok(value)` or `Err(NVML error code)`.
fn real_h100_nvml(query: &str) -> Result<serde_json::Value, i64> {
    let all: serde_json::Value =
        serde_json::from_str(&real_h100_file("pynvml-answers.load.json")).unwrap();
    let a = &all["devices"][0][query];
    match (a.get("v"), a.get("e")) {
        (Some(v), _) => Ok(v.clone()),
        (_, Some(e)) => Err(e.as_i64().unwrap()),
        _ => panic!("pynvml-answers.load.json has no {query}"),
    }
}

/// Regression (issue 22): nvidia-smi 575 and newer print the temperature thresholds relative to
/// T.Limit (`gpu_temp_tlimit`, `gpu_temp_*_tlimit_threshold`), and the importer read none of
/// them, so an imported dump of a current driver had no thresholds. T.Limit = `gpu_temp` +
/// `gpu_temp_tlimit`, each threshold = T.Limit - its relative value: the real H100's dumps
/// (idle, T.Limit 52 + 35, and under load, 61 + 26: both 87 C) give what NVML answered on the
/// same machine. The memory maximum cannot be worked out (nvidia-smi prints no memory T.Limit:
/// the formula gives 87 C where NVML answered 95 C), so it is left `not_recorded`.
#[test]
fn t_limit_thresholds_of_the_real_h100_are_what_nvml_answered() {
    // nvmlTemperatureThresholds_t: 0 shutdown, 1 slowdown, 2 memory max, 3 GPU max.
    let nvml = |t: u32| {
        real_h100_nvml(&format!("DeviceGetTemperatureThreshold({t})"))
            .ok()
            .and_then(|v| v.as_u64())
            .map(|c| c as u32)
    };
    assert_eq!(
        (nvml(0), nvml(1), nvml(3), nvml(2)),
        (Some(95), Some(89), Some(87), Some(95))
    );
    for dump in ["nvidia-smi-q-x.idle.xml", "nvidia-smi-q-x.load.xml"] {
        let f = import(dump, &real_h100_file(dump));
        let s = &f.devices[&DeviceId::Gpu(0)];
        assert_eq!(
            s.temperature_shutdown,
            Answer::Ok(nvml(0).unwrap()),
            "{dump}"
        );
        assert_eq!(
            s.temperature_slowdown,
            Answer::Ok(nvml(1).unwrap()),
            "{dump}"
        );
        assert_eq!(
            s.temperature_gpu_max,
            Answer::Ok(nvml(3).unwrap()),
            "{dump}"
        );
        assert_eq!(
            s.temperature_memory_max,
            Answer::Err(BackendError::NotRecorded),
            "{dump}"
        );
    }
}

/// The configuration the table gained in issue 22, imported from the real H100's
/// `nvidia-smi -q -x`, is what NVML answered there (pynvml, the same session): board id, multi-GPU
/// board, virtualization, accounting and operation modes, the graphics and memory applications
/// clocks and their defaults; what nvidia-smi does not print is `not_recorded`. And a GPU not
/// in MIG mode has no MIG slot and INVALID_ARGUMENT for its instance ids, as NVML answered.
#[test]
fn the_real_h100s_configuration_imports_as_nvml_answered() {
    let f = import("load", &real_h100_file("nvidia-smi-q-x.load.xml"));
    let s = &f.devices[&DeviceId::Gpu(0)];
    let value = |q: &str| real_h100_nvml(q).unwrap().as_u64().unwrap();
    assert_eq!(s.board_id, Answer::Ok(value("DeviceGetBoardId") as u32));
    assert_eq!(
        s.multi_gpu_board,
        Answer::Ok(value("DeviceGetMultiGpuBoard") == 1)
    );
    assert_eq!(
        s.virtualization_mode
            .clone()
            .get()
            .map(|m| u64::from(m.nvml_code())),
        Ok(value("DeviceGetVirtualizationMode"))
    );
    assert_eq!(
        s.accounting_mode,
        Answer::Ok(value("DeviceGetAccountingMode") == 1)
    );
    // NOT_SUPPORTED (3) from NVML; N/A in nvidia-smi.
    assert_eq!(real_h100_nvml("DeviceGetGpuOperationMode"), Err(3));
    assert_eq!(
        s.gpu_operation_mode,
        Answer::Err(BackendError::NotSupported)
    );
    for (clocks, query) in [
        (&s.applications_clocks, "DeviceGetApplicationsClock"),
        (
            &s.default_applications_clocks,
            "DeviceGetDefaultApplicationsClock",
        ),
    ] {
        assert_eq!(
            clocks.graphics,
            Answer::Ok(value(&format!("{query}(GR)")) as u32)
        );
        assert_eq!(
            clocks.memory,
            Answer::Ok(value(&format!("{query}(MEM)")) as u32)
        );
        assert_eq!(clocks.sm, Answer::Err(BackendError::NotRecorded));
        assert_eq!(clocks.video, Answer::Err(BackendError::NotRecorded));
    }
    assert_eq!(s.num_gpu_cores, Answer::Err(BackendError::NotRecorded));
    assert_eq!(
        s.pcie_link_max_speed,
        Answer::Err(BackendError::NotRecorded)
    );
    assert_eq!(s.max_mig_device_count, Answer::Ok(0));
    assert_eq!(
        s.gpu_instance_id,
        Answer::Err(BackendError::InvalidArgument)
    );
    assert_eq!(
        s.compute_instance_id,
        Answer::Err(BackendError::InvalidArgument)
    );
}

proptest! {
    /// Whatever T.Limit temperatures a dump prints, the import never panics, and a threshold
    /// is T.Limit less its relative value when that is a temperature at all (0 C or more), an
    /// error otherwise.
    #[test]
    fn t_limit_thresholds_are_t_limit_less_the_offset(
        now in 0i64..=200,
        margin in -300i64..=300,
        offset in -300i64..=300,
    ) {
        let xml = format!(
            "<nvidia_smi_log><gpu id=\"00000000:01:00.0\"><temperature>\
             <gpu_temp>{now} C</gpu_temp><gpu_temp_tlimit>{margin} C</gpu_temp_tlimit>\
             <gpu_temp_slow_tlimit_threshold>{offset} C</gpu_temp_slow_tlimit_threshold>\
             </temperature></gpu></nvidia_smi_log>"
        );
        let f = import_str(&xml, "t", "t", "t").unwrap();
        let got = &f.devices[&DeviceId::Gpu(0)].temperature_slowdown;
        let want = now + margin - offset;
        if want >= 0 {
            prop_assert_eq!(got, &Answer::Ok(want as u32));
        } else {
            prop_assert!(got.is_err());
        }
    }
}
