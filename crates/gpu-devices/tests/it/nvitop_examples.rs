//! nvitop's API reference, example by example, for this crate (docs/nvitop-api.md is the
//! table): `NaType` and each of its operator examples, `Device`, `Device.__getattr__`,
//! `Device.oneshot` and `CudaDevice`, over the scenario fixtures. Each test is named after the
//! example it shows; the values come from the fixture files, read here as plain JSON.
//!
//! nvitop's `NA` is a `str` that turns into `nan` in arithmetic. Our [`Na`] is a value with no
//! operators: text comes from `Display` (`N/A`), a number from [`Na::to_f64`] (NaN) or
//! [`Na::unwrap_or_default`] (0), explicitly, and IEEE arithmetic on NaN does the rest. So each
//! operator example reads `na.to_f64() <op> x` here, and Python's `ZeroDivisionError` is NaN.

use crate::common;

use std::sync::OnceLock;

use std::sync::Arc;

use gpu_backend::{DeviceId, ReplayBackend};
use gpu_devices::{Context, CudaDeviceOrder, DeviceKind, Na};
use serde_json::Value;

use common::*;

const MIB: f64 = 1024.0 * 1024.0;

/// A fixture file as plain JSON, to take expectations from independently of the code.
fn json(stem: &str) -> Value {
    let text = std::fs::read_to_string(fixtures_dir().join(format!("{stem}.json"))).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The 8-GPU box at `frame`: its JSON (read once), a context and the replay backend.
fn h100_at(frame: usize) -> (&'static Value, Context, Arc<ReplayBackend>) {
    static JSON: OnceLock<Value> = OnceLock::new();
    let j = JSON.get_or_init(|| json("h100-sxm-8gpu"));
    let (ctx, backend) = open("h100-sxm-8gpu");
    backend.set_frame(frame);
    (j, ctx, backend)
}

/// A field of a device's `memory_info` at a frame (`total`, `used`, `free`), bytes.
fn memory(j: &Value, frame: usize, device: &str, field: &str) -> u64 {
    j["frames"][frame]["devices"][device]["memory_info"]["ok"][field]
        .as_u64()
        .unwrap()
}

/// Memory for people as nvitop prints it below 100 GiB: whole MiB.
fn human_mib(bytes: u64) -> String {
    format!("{}MiB", (bytes as f64 / MIB).round())
}

/// nvitop's `NA` as our crate gives it: the fan speed of an H100 SXM board, which has no fan
/// (the fixture records `not_supported`). Read once for all the tests of this file, since debug
/// builds parse the large fixture slowly.
fn na() -> Na<u32> {
    static NA: OnceLock<Na<u32>> = OnceLock::new();
    NA.get_or_init(|| {
        let (j, ctx, _) = h100_at(0);
        assert_eq!(
            j["frames"][0]["devices"]["0"]["fan_speed"]["err"],
            "not_supported"
        );
        let fan = ctx.device(0).unwrap().fan_speed();
        assert!(fan.is_na());
        fan
    })
    .clone()
}

/// NaType's first block: NA as text, and as a float in arithmetic.
#[test]
fn natype_examples() {
    let na = na();
    assert_eq!(na.to_string(), "N/A"); // >>> NA
    assert_eq!(format!("memory usage: {na}"), "memory usage: N/A");
    assert_eq!(na.to_string().to_lowercase(), "n/a"); // NA.lower()
    assert_eq!(format!("{na:<5}"), "N/A  "); // NA.ljust(5)
    assert_eq!(format!("{na} str"), "N/A str"); // NA + ' str'
    assert!(na.to_f64().is_nan()); // float(NA)
    assert!((na.to_f64() + 1.0).is_nan()); // NA + 1
    assert!((na.to_f64() * 1024.0).is_nan()); // NA * 1024
    assert!((na.to_f64() / (1024.0 * 1024.0)).is_nan()); // NA / (1024 * 1024)
}

/// `bool(NA)` is False: a missing value is not a value.
#[test]
fn natype_bool() {
    let na = na();
    assert!(!na.is_value());
    assert!(na.value().is_none());
}

/// `int(NA)` is 0.
#[test]
fn natype_int() {
    assert_eq!(na().unwrap_or_default(), 0);
}

/// `float(NA)` is nan (`float(NA) is math.nan`: every NA gives a NaN).
#[test]
fn natype_float() {
    assert!(na().to_f64().is_nan());
}

/// `NA + ' str'`, `NA + NA`, `NA + 1`, `NA + 1.0`.
#[test]
fn natype_add() {
    let na = na();
    assert_eq!(format!("{na} str"), "N/A str");
    assert!((na.to_f64() + na.to_f64()).is_nan());
    assert!((na.to_f64() + 1.0).is_nan());
}

/// `'str' + NA`, `1 + NA`, `1.0 + NA`.
#[test]
fn natype_radd() {
    let na = na();
    assert_eq!(format!("str{na}"), "strN/A");
    assert!((1.0 + na.to_f64()).is_nan());
}

/// `NA - NA`, `NA + 1` (the block repeats `+`); `NA - 'str'` is a type error in both languages
/// (here it does not compile: see `Na`'s documentation).
#[test]
fn natype_sub() {
    let na = na();
    assert!((na.to_f64() - na.to_f64()).is_nan());
    assert!((na.to_f64() - 1.0).is_nan());
}

/// `1 - NA`, `1.0 - NA`.
#[test]
fn natype_rsub() {
    assert!((1.0 - na().to_f64()).is_nan());
}

/// `NA * 1024`, `NA * 1024.0`, `NA * NA`.
#[test]
fn natype_mul() {
    let na = na();
    assert!((na.to_f64() * 1024.0).is_nan());
    assert!((na.to_f64() * na.to_f64()).is_nan());
}

/// `1024 * NA`, `1024.0 * NA`.
#[test]
fn natype_rmul() {
    assert!((1024.0 * na().to_f64()).is_nan());
}

/// `NA / 1024`, `NA / NA`; `NA / 0` raises ZeroDivisionError in Python and is NaN here.
#[test]
fn natype_truediv() {
    let na = na();
    assert!((na.to_f64() / 1024.0).is_nan());
    assert!((na.to_f64() / na.to_f64()).is_nan());
    assert!((na.to_f64() / 0.0).is_nan());
}

/// `1024 / NA`, `1024.0 / NA`.
#[test]
fn natype_rtruediv() {
    assert!((1024.0 / na().to_f64()).is_nan());
}

/// `NA // 1024`, `NA // NA`.
#[test]
fn natype_floordiv() {
    let na = na();
    assert!((na.to_f64() / 1024.0).floor().is_nan());
    assert!(na.to_f64().div_euclid(na.to_f64()).is_nan());
    assert!(na.to_f64().div_euclid(0.0).is_nan());
}

/// `1024 // NA`, `1024.0 // NA`.
#[test]
fn natype_rfloordiv() {
    assert!(1024.0_f64.div_euclid(na().to_f64()).is_nan());
}

/// `NA % 1024`; `NA % 0` raises in Python and is NaN here.
#[test]
fn natype_mod() {
    let na = na();
    assert!((na.to_f64() % 1024.0).is_nan());
    assert!((na.to_f64() % 0.0).is_nan());
}

/// `1024 % NA`, `1024.0 % NA`.
#[test]
fn natype_rmod() {
    assert!((1024.0 % na().to_f64()).is_nan());
}

/// `divmod(NA, 1024)` is `(nan, nan)`.
#[test]
fn natype_divmod() {
    let x = na().to_f64();
    let (q, r) = (x.div_euclid(1024.0), x.rem_euclid(1024.0));
    assert!(q.is_nan() && r.is_nan());
}

/// `divmod(1024, NA)` is `(nan, nan)`.
#[test]
fn natype_rdivmod() {
    let x = na().to_f64();
    let (q, r) = (1024.0_f64.div_euclid(x), 1024.0_f64.rem_euclid(x));
    assert!(q.is_nan() && r.is_nan());
}

/// `+NA` is nan.
#[test]
fn natype_pos() {
    let x = na().to_f64();
    assert!(x.is_nan());
}

/// `-NA` is nan.
#[test]
fn natype_neg() {
    assert!((-na().to_f64()).is_nan());
}

/// `abs(NA)` is nan.
#[test]
fn natype_abs() {
    assert!(na().to_f64().abs().is_nan());
}

/// `round(NA)` is 0 (an int); `round(NA, 0)` and `round(NA, 1)` are nan.
#[test]
fn natype_round() {
    let na = na();
    assert_eq!(na.clone().unwrap_or_default(), 0);
    assert!(na.to_f64().round().is_nan());
    assert!(((na.to_f64() * 10.0).round() / 10.0).is_nan());
}

/// `Device`'s examples: the driver version, the count, every device, a device by index, a MIG
/// device by (GPU, MIG index), by GPU and MIG UUID, free memory in bytes and for people, and a
/// snapshot.
#[test]
fn device_examples() {
    let frame = 7;
    let (j, ctx, _) = h100_at(frame);

    // Device.driver_version(), Device.count(), Device.all()
    assert_eq!(
        ctx.driver_version().to_string(),
        j["system"]["driver_version"]["ok"].as_str().unwrap()
    );
    let count = j["system"]["device_count"]["ok"].as_u64().unwrap();
    assert_eq!(u64::from(ctx.device_count()), count);
    let all = ctx.devices();
    assert_eq!(all.len() as u64, count);
    for (i, d) in all.iter().enumerate() {
        assert_eq!(d.id(), DeviceId::Gpu(i as u32));
        assert_eq!(d.kind(), DeviceKind::Physical);
    }

    // nvidia0 = Device(index=0); nvidia2 = Device(uuid='GPU-xxxxxx')
    let nvidia0 = ctx.device(0).unwrap();
    let uuid2 = j["devices"]["2"]["uuid"]["ok"].as_str().unwrap();
    let nvidia2 = ctx.device_by_uuid(uuid2).unwrap();
    assert_eq!(nvidia2, ctx.device(2).unwrap());
    // An abbreviated UUID names it too, as in the seed's `GPU-xxxxxx`.
    assert_eq!(ctx.device_by_uuid(&uuid2[..12]).unwrap(), nvidia2);

    // nvidia0.memory_free(), nvidia0.memory_free_human()
    let free = memory(j, frame, "0", "free");
    assert_eq!(nvidia0.memory_free(), Na::Value(free));
    assert_eq!(nvidia0.memory_free_human().to_string(), human_mib(free));

    // nvidia2.as_snapshot(): every metric at once, for device 2.
    let snap = nvidia2.snapshot();
    assert_eq!(snap.id, DeviceId::Gpu(2));
    assert_eq!(snap.uuid().to_string(), uuid2);
    let used2 = memory(j, frame, "2", "used");
    assert_eq!(snap.memory_used(), Na::Value(used2));

    // mig10 = Device(index=(1, 0)); mig30 = Device(uuid='MIG-xxxxxx'), on the MIG box (its
    // GPU 0 is in MIG mode).
    let mj = json("h100-mig");
    let (mctx, _) = open("h100-mig");
    let mig00 = mctx.mig_device(0, 0).unwrap();
    assert_eq!(mig00.kind(), DeviceKind::Mig);
    assert_eq!(mig00.parent(), Some(mctx.device(0).unwrap()));
    let mig_uuid = mj["devices"]["0:1"]["uuid"]["ok"].as_str().unwrap();
    assert!(mig_uuid.starts_with("MIG-"));
    let by_uuid = mctx.device_by_uuid(mig_uuid).unwrap();
    assert_eq!(by_uuid.kind(), DeviceKind::Mig);
    assert_eq!(by_uuid, mctx.mig_device(0, 1).unwrap());
    // A MIG index the GPU does not have is an error saying which it has.
    let err = mctx.mig_device(0, 99).unwrap_err().to_string();
    assert!(err.contains("its MIG devices are"), "{err}");
}

/// `Device.__getattr__`: nvitop makes a method for any pynvml query on first use
/// (`device.cuda_compute_capability()` is `(8, 6)`). Here every query is a typed method
/// already, on the device and on the backend (the query table declares it once).
#[test]
fn device_getattr_examples() {
    let (j, ctx, _) = h100_at(0);
    let device = ctx.device(0).unwrap();
    let cc = &j["devices"]["0"]["cuda_compute_capability"]["ok"];
    let want = (
        cc["major"].as_u64().unwrap() as u32,
        cc["minor"].as_u64().unwrap() as u32,
    );
    let got = device.cuda_compute_capability().into_option().unwrap();
    assert_eq!((got.major, got.minor), want);
    // The raw query, as nvitop's dynamic method would call pynvml.
    let raw = ctx
        .backend()
        .cuda_compute_capability(DeviceId::Gpu(0))
        .unwrap();
    assert_eq!((raw.major, raw.minor), want);
}

/// `Device.oneshot`: several memory facts from one query. A snapshot asks `memory_info` once,
/// and its accessors (the same names as the device's getters) ask nothing more.
#[test]
fn device_oneshot_examples() {
    let frame = 4;
    let (j, ctx, backend) = h100_at(frame);
    let device = ctx.device(0).unwrap();
    backend.count_calls(true);
    let snap = device.snapshot(); // with device.oneshot():
    let asked = backend.take_call_counts();
    let memory_info_calls: u64 = asked
        .by_query
        .iter()
        .filter(|(k, _)| k.query.as_str() == "memory_info")
        .map(|(_, n)| n)
        .sum();
    assert_eq!(memory_info_calls, 1);

    let [total, used, free] = ["total", "used", "free"].map(|f| memory(j, frame, "0", f));
    let info = snap.memory_info().into_option().unwrap(); // device.memory_info()
    assert_eq!((info.total, info.used, info.free), (total, used, free));
    assert_eq!(snap.memory_used(), Na::Value(used)); // device.memory_used()
                                                     // device.memory_free_human()
    assert_eq!(snap.memory_free_human().to_string(), human_mib(free));
    let percent = snap.memory_percent().into_option().unwrap(); // device.memory_percent()
    assert!(
        (percent - used as f64 * 100.0 / total as f64).abs() < 0.051,
        "{percent}"
    );
    assert_eq!(
        backend.take_call_counts().total(),
        0,
        "all from the snapshot"
    );
}

/// `CudaDevice`'s examples under `CUDA_DEVICE_ORDER=PCI_BUS_ID` and
/// `CUDA_VISIBLE_DEVICES=3,2,1,0` (given explicitly: tests do not change the environment).
#[test]
fn cuda_device_examples() {
    use CudaDeviceOrder::PciBusId;
    let frame = 2;
    let (j, ctx, _) = h100_at(frame);
    let visible = Some("3,2,1,0");

    // CudaDevice.count(), CudaDevice.all()
    let all = ctx.cuda_devices_for(visible, PciBusId);
    assert_eq!(all.len(), 4);
    for (cuda_index, nvml_index) in [(0, 3), (1, 2), (2, 1), (3, 0)] {
        assert_eq!(all[cuda_index].cuda_index(), cuda_index as u32);
        assert_eq!(all[cuda_index].id(), DeviceId::Gpu(nvml_index));
    }

    // cuda0 = CudaDevice(cuda_index=0); cuda1 = CudaDevice(nvml_index=2);
    // cuda2 = CudaDevice(uuid='GPU-xxxxxx')
    let cuda0 = all[0].clone();
    let cuda1 = ctx
        .cuda_device_of_for(&ctx.device(2).unwrap(), visible, PciBusId)
        .unwrap();
    assert_eq!((cuda1.cuda_index(), cuda1.physical_index()), (1, 2));
    let uuid1 = j["devices"]["1"]["uuid"]["ok"].as_str().unwrap();
    let cuda2 = ctx
        .cuda_device_of_for(&ctx.device_by_uuid(uuid1).unwrap(), visible, PciBusId)
        .unwrap();
    assert_eq!((cuda2.cuda_index(), cuda2.physical_index()), (2, 1));
    // A GPU CUDA does not show has no CUDA device.
    let hidden = ctx
        .cuda_device_of_for(&ctx.device(5).unwrap(), visible, PciBusId)
        .unwrap_err();
    assert_eq!(
        hidden.to_string(),
        "device 5 is not visible to CUDA: CUDA shows 4 devices (0-3)"
    );

    // cuda0.memory_free(), cuda0.memory_free_human(): CUDA device 0 is GPU 3.
    let free = memory(j, frame, "3", "free");
    assert_eq!(cuda0.memory_free(), Na::Value(free));
    assert_eq!(cuda0.memory_free_human().to_string(), human_mib(free));

    // cuda1.as_snapshot(): it carries its CUDA ordinal.
    let snap = cuda1.snapshot();
    assert_eq!(snap.id, DeviceId::Gpu(2));
    assert_eq!(snap.cuda_index, Some(1));
}
