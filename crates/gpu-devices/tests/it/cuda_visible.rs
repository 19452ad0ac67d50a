//! `CUDA_VISIBLE_DEVICES` and `CUDA_DEVICE_ORDER`: every example of nvitop's
//! `parse_cuda_visible_devices` / `normalize_cuda_visible_devices`, mapped onto the fixtures'
//! devices, and CUDA's other rules, as a table.
//!
//! The seed's examples name a 10-GPU machine (`GPU-18ef14e9` is its GPU 5, `GPU-849d5a8d` its
//! GPU 6) and a MIG machine (`MIG-d184f67c...` is slot 0, GPU instance 13 is slot 1). Here they
//! name the same positions on `h100-sxm-8gpu` (GPU 5 is `GPU-6e25de40...`, GPU 6 is
//! `GPU-caa42fd6...`) and `h100-mig` (slot 0 is `MIG-32879490...`, GPU instance 3 is slot 1).

use crate::common;

use gpu_backend::{Answer, DeviceId};
use gpu_devices::{CudaDeviceOrder, CudaOrderOrigin};

use common::*;
use CudaDeviceOrder::{FastestFirst, PciBusId};

const H100_UUIDS: [&str; 8] = [
    "GPU-d7e97d99-d3fa-bb12-9045-c105fedb45bd",
    "GPU-1bf97a1f-f0bc-567b-8e55-28347ecfa894",
    "GPU-6fbdf76f-8f4c-32b9-db2c-36950d6a1d76",
    "GPU-a7217cd1-3d2a-ec21-8054-fbe505bb6865",
    "GPU-b23b9980-b727-67bd-e92d-dd3920965d65",
    "GPU-6e25de40-99f7-b9d9-53f2-987de88cc764",
    "GPU-caa42fd6-9100-f7c8-260d-53121812a244",
    "GPU-bbc6a32e-c945-fd0f-d671-503642e1487d",
];

const MIG_GPU: &str = "GPU-89c882b3-91ca-0826-53ab-6b16f546a714";
const MIG_0: &str = "MIG-32879490-46d1-257b-7416-95cd3fb0f995";
const MIG_1: &str = "MIG-3a738fd6-11ba-8c40-80c6-0fa659b9682a";

fn gpus(list: &[u32]) -> Vec<DeviceId> {
    list.iter().map(|&i| DeviceId::Gpu(i)).collect()
}

fn mig(index: u32) -> DeviceId {
    DeviceId::Mig { parent: 0, index }
}

fn uuids(list: &[u32]) -> String {
    list.iter()
        .map(|&i| H100_UUIDS[i as usize])
        .collect::<Vec<_>>()
        .join(",")
}

/// One case: the value (`None`: unset), the devices CUDA shows, the normalised value.
struct Case {
    value: Option<&'static str>,
    expect: Vec<DeviceId>,
    normalized: String,
    why: &'static str,
}

fn case(value: Option<&'static str>, expect: &[u32], why: &'static str) -> Case {
    Case {
        value,
        expect: gpus(expect),
        normalized: uuids(expect),
        why,
    }
}

fn check(stem: &str, ctx: &gpu_devices::Context, order: CudaDeviceOrder, cases: Vec<Case>) {
    for c in cases {
        let got = ctx.parse_cuda_visible_devices_with(c.value, order);
        assert_eq!(got, c.expect, "{stem} {order:?} {:?}: {}", c.value, c.why);
        let norm = ctx.normalize_cuda_visible_devices_with(c.value, order);
        assert_eq!(
            norm, c.normalized,
            "{stem} {order:?} {:?}: {}",
            c.value, c.why
        );
        // Normalising is stable, and names the same devices.
        assert_eq!(
            ctx.normalize_cuda_visible_devices_with(Some(&norm), order),
            norm,
            "{:?}",
            c.value
        );
        assert_eq!(
            ctx.parse_cuda_visible_devices_with(Some(&norm), order),
            c.expect,
            "{:?}",
            c.value
        );
    }
}

#[test]
fn the_seed_examples_on_eight_gpus_in_pci_bus_order() {
    let (ctx, _b) = open("h100-sxm-8gpu");
    check(
        "h100-sxm-8gpu",
        &ctx,
        PciBusId,
        vec![
            case(Some("6,5"), &[6, 5], "seed: the environment's value"),
            case(Some("0,4"), &[0, 4], "seed: an explicit value"),
            case(Some("4"), &[4], "seed: normalize('4')"),
            case(
                Some("GPU-6e25de40,GPU-caa42fd6"),
                &[5, 6],
                "seed: abbreviated UUIDs",
            ),
            case(None, &[0, 1, 2, 3, 4, 5, 6, 7], "seed: unset is every GPU"),
            case(Some(""), &[], "seed: the empty string"),
            case(Some("0,0"), &[], "seed: a repeated ordinal"),
            case(Some("16"), &[], "seed: an ordinal out of range"),
        ],
    );
}

#[test]
fn cudas_other_rules_on_eight_gpus() {
    let (ctx, _b) = open("h100-sxm-8gpu");
    let full_2 = H100_UUIDS[2];
    let cases = vec![
        case(Some("0,1"), &[0, 1], "ordinals"),
        case(Some("1,0"), &[1, 0], "order is kept"),
        case(Some("0,9"), &[0], "stops at the out-of-range entry"),
        case(Some("0,abc,1"), &[0], "stops at the first invalid entry"),
        case(Some("0,1,"), &[0, 1], "a trailing comma ends the list"),
        case(Some(" 1 , 2 "), &[1, 2], "spaces around entries"),
        case(
            Some("1abc,2"),
            &[1, 2],
            "an entry that starts with digits is that number",
        ),
        case(Some("-1"), &[], "a negative ordinal is invalid"),
        case(
            Some("2,-1,3"),
            &[2],
            "CUDA's documented example: stops at -1",
        ),
        case(Some("+1"), &[], "a sign is invalid"),
        case(
            Some("3,1,3"),
            &[],
            "a repeat anywhere invalidates the value",
        ),
        case(
            Some("0,GPU-1bf97a1f"),
            &[0],
            "ordinals and UUIDs do not mix",
        ),
        case(
            Some("GPU-1bf97a1f,0"),
            &[1],
            "UUIDs and ordinals do not mix",
        ),
        case(Some("GPU-6"), &[], "an ambiguous prefix is invalid"),
        case(Some("GPU-"), &[], "an empty prefix is invalid"),
        case(Some("GPU-ffffffff"), &[], "an unknown UUID"),
        case(Some("MIG-ffffffff"), &[], "no MIG devices here"),
        case(Some("gpu-1bf97a1f"), &[], "the prefix is upper case"),
        case(Some("GPU-1BF97A1F"), &[1], "the hex part is any case"),
        case(
            Some("99999999999999999999"),
            &[],
            "an ordinal too large for any GPU",
        ),
        case(Some(","), &[], "an empty first entry"),
    ];
    check("h100-sxm-8gpu", &ctx, PciBusId, cases);
    // A full UUID and its prefix name the same device: a repeat.
    let value = format!("{full_2},GPU-6fbdf76f");
    assert_eq!(
        ctx.parse_cuda_visible_devices_with(Some(&value), PciBusId),
        []
    );
    assert_eq!(
        ctx.parse_cuda_visible_devices_with(Some(full_2), PciBusId),
        gpus(&[2])
    );
}

#[test]
fn the_seed_mig_examples() {
    let (ctx, _b) = open("h100-mig");
    // The value, the MIG device CUDA shows (its index under GPU 0; none: CUDA shows nothing),
    // and why.
    let table: &[(&str, Option<u32>, &str)] = &[
        (MIG_0, Some(0), "seed: a MIG UUID"),
        (
            "MIG-GPU-89c882b3-91ca-0826-53ab-6b16f546a714/3/0",
            Some(1),
            "seed: MIG-GPU-<uuid>/<gi>/<ci>",
        ),
        (
            "MIG-GPU-89c882b3/3/0",
            Some(1),
            "seed: MIG-GPU-<abbreviated uuid>/<gi>/<ci>",
        ),
        ("MIG-3a738fd6", Some(1), "an abbreviated MIG UUID"),
        (
            "MIG-3a738fd6,MIG-32879490",
            Some(1),
            "CUDA shows one MIG device: the first named",
        ),
        (
            "0",
            Some(0),
            "a GPU in MIG mode stands for its first MIG device",
        ),
        (MIG_GPU, Some(0), "so does its UUID"),
        ("MIG-GPU-89c882b3/3/1", None, "no such compute instance"),
        ("MIG-GPU-89c882b3/3", None, "the old form needs both ids"),
        ("MIG-GPU-89c882b3/x/0", None, "ids are numbers"),
        ("1", None, "one GPU only"),
        ("", None, "the empty string"),
    ];
    for &(value, shown, why) in table {
        let expect: Vec<DeviceId> = shown.into_iter().map(mig).collect();
        // Normalized, a MIG device is its UUID.
        let normalized = shown.map_or("", |i| [MIG_0, MIG_1][i as usize]);
        for order in [PciBusId, FastestFirst] {
            assert_eq!(
                ctx.parse_cuda_visible_devices_with(Some(value), order),
                expect,
                "{value:?}: {why}"
            );
            assert_eq!(
                ctx.normalize_cuda_visible_devices_with(Some(value), order),
                normalized,
                "{value:?}: {why}"
            );
        }
    }
    assert_eq!(
        ctx.parse_cuda_visible_devices_with(None, FastestFirst),
        [mig(0)],
        "unset: the first MIG device"
    );
}

/// The 8-GPU fixture with CUDA's FASTEST_FIRST order reversed, and GPUs 0 and 1 swapped on the
/// PCI bus, so that NVML, PCI and FASTEST_FIRST orders all differ.
fn reordered() -> gpu_backend::Fixture {
    let mut f = fixture("h100-sxm-8gpu");
    let mut order: Vec<String> = H100_UUIDS.iter().map(|s| s.to_string()).collect();
    order.reverse();
    f.system.cuda_device_order = Answer::Ok(order);
    let bus = |f: &gpu_backend::Fixture, i: u32| match &f.devices[&DeviceId::Gpu(i)].pci_info {
        Answer::Ok(p) => p.clone(),
        Answer::Err(e) => panic!("{e}"),
    };
    let (p0, p1) = (bus(&f, 0), bus(&f, 1));
    if let Some(d) = f.devices.get_mut(&DeviceId::Gpu(0)) {
        d.pci_info = Answer::Ok(p1);
    }
    if let Some(d) = f.devices.get_mut(&DeviceId::Gpu(1)) {
        d.pci_info = Answer::Ok(p0);
    }
    f
}

#[test]
fn ordinals_follow_cuda_device_order() {
    let (ctx, _b) = open_fixture(reordered());
    // Every GPU, in each order.
    let (fastest_first, pci_bus) = ([7, 6, 5, 4, 3, 2, 1, 0], [1, 0, 2, 3, 4, 5, 6, 7]);
    assert_eq!(ctx.cuda_order(FastestFirst), fastest_first);
    assert_eq!(ctx.cuda_order(PciBusId), pci_bus);
    assert_eq!(ctx.cuda_order_origin().origin, CudaOrderOrigin::Backend);

    let fastest = vec![
        case(Some("0,1"), &[7, 6], "FASTEST_FIRST ordinals"),
        case(None, &fastest_first, "unset: every GPU in CUDA order"),
        case(
            Some("GPU-d7e97d99,7"),
            &[0],
            "UUIDs do not depend on the order",
        ),
    ];
    check("reordered", &ctx, FastestFirst, fastest);
    let pci = vec![
        case(Some("0,1"), &[1, 0], "PCI_BUS_ID ordinals"),
        case(None, &pci_bus, "unset: every GPU in bus order"),
    ];
    check("reordered", &ctx, PciBusId, pci);

    let cuda = ctx.cuda_devices_for(Some("2,0"), FastestFirst);
    assert_eq!(cuda.len(), 2);
    assert_eq!(cuda[0].cuda_index(), 0);
    assert_eq!(cuda[0].id(), DeviceId::Gpu(5));
    assert_eq!(cuda[1].cuda_index(), 1);
    assert_eq!(cuda[1].device().id(), DeviceId::Gpu(7));
    assert_eq!(cuda[1].snapshot().cuda_index, Some(1));
    assert_eq!(cuda[1].uuid().to_string(), H100_UUIDS[7]);
}

#[test]
fn an_order_that_does_not_name_every_gpu_falls_back_to_the_pci_bus() {
    let mut f = fixture("h100-sxm-8gpu");
    f.system.cuda_device_order = Answer::Ok(vec![H100_UUIDS[3].to_string()]);
    let (ctx, _b) = open_fixture(f);
    let order = ctx.cuda_order_origin();
    assert_eq!(order.origin, CudaOrderOrigin::PciBusId);
    assert_eq!(order.physical, [0, 1, 2, 3, 4, 5, 6, 7]);
    assert!(order.passed_over[0].contains("does not name every GPU"));
}
