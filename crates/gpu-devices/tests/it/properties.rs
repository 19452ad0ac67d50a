//! Properties: no `CUDA_VISIBLE_DEVICES` value panics and normalising is stable; sizes survive
//! `bytes2human` then `human2bytes` within the rounding of the printed unit; no size text panics.

use crate::common;

use std::sync::OnceLock;

use gpu_devices::units::{bytes2human, human2bytes, GIB, KIB, MIB, PIB, TIB};
use gpu_devices::{Context, CudaDeviceOrder};
use proptest::prelude::*;

fn contexts() -> &'static [Context] {
    static CTX: OnceLock<Vec<Context>> = OnceLock::new();
    CTX.get_or_init(|| {
        ["h100-sxm-8gpu", "h100-mig", "geforce-desktop", "old-driver"]
            .iter()
            .map(|s| common::open(s).0)
            .collect()
    })
}

/// Entries that look like what people write: ordinals, UUID prefixes of the fixtures' devices,
/// the old MIG form, junk, spaces.
fn entry() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u32..12).prop_map(|n| n.to_string()),
        "[ ]{0,2}[0-9]{1,3}[a-z]{0,2}[ ]{0,2}",
        Just("-1".to_string()),
        Just(String::new()),
        prop::sample::select(vec![
            "GPU-d7e97d99",
            "GPU-6",
            "GPU-6e25de40-99f7-b9d9-53f2-987de88cc764",
            "GPU-89c882b3",
            "MIG-32879490",
            "MIG-3a738fd6-11ba-8c40-80c6-0fa659b9682a",
            "MIG-GPU-89c882b3/3/0",
            "MIG-GPU-89c882b3/9/0",
            "MIG-GPU-89c882b3/99/0",
            "GPU-683c6e09",
            "GPU-90e3",
            "GPU-",
            "MIG-",
            "abc",
        ])
        .prop_map(str::to_string),
        "[A-Za-z0-9/ +-]{0,12}",
    ]
}

fn value() -> impl Strategy<Value = String> {
    prop::collection::vec(entry(), 0..6).prop_map(|v| v.join(","))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn normalising_cuda_visible_devices_is_stable(v in value(), pci in any::<bool>()) {
        let order = if pci { CudaDeviceOrder::PciBusId } else { CudaDeviceOrder::FastestFirst };
        for ctx in contexts() {
            let parsed = ctx.parse_cuda_visible_devices_with(Some(&v), order);
            let n = ctx.normalize_cuda_visible_devices_with(Some(&v), order);
            prop_assert_eq!(&ctx.normalize_cuda_visible_devices_with(Some(&n), order), &n);
            prop_assert_eq!(ctx.parse_cuda_visible_devices_with(Some(&n), order), parsed.clone());
            // Never more devices than exist, never one twice, at most one MIG device.
            let mut seen = parsed.clone();
            seen.sort();
            seen.dedup();
            prop_assert_eq!(seen.len(), parsed.len());
            prop_assert!(parsed.iter().filter(|d| d.is_mig()).count() <= 1);
            prop_assert!(parsed.len() as u32 <= ctx.device_count() + ctx.mig_device_count());
        }
    }

    #[test]
    fn no_cuda_visible_devices_value_panics(v in any::<String>()) {
        for ctx in contexts() {
            let _ = ctx.parse_cuda_visible_devices_with(Some(&v), CudaDeviceOrder::FastestFirst);
            let _ = ctx.normalize_cuda_visible_devices_with(Some(&v), CudaDeviceOrder::PciBusId);
            let _ = ctx.device_by_uuid(&v);
            let _ = ctx.device_by_bus_id(&v);
        }
    }

    #[test]
    fn sizes_survive_the_trip_through_text(n in prop_oneof![
        0u64..4096,
        0u64..(4 * MIB),
        0u64..(200 * GIB),
        0u64..(200 * TIB),
        0u64..(u64::MAX / 2),
    ]) {
        let text = bytes2human(n);
        let back = human2bytes(&text);
        prop_assert!(back.is_ok(), "{} -> {:?}", text, back);
        let back = back.unwrap_or_default();
        // Half a step of the printed unit, plus one byte for truncation.
        let half_step = if text.ends_with("PiB") {
            PIB / 200
        } else if text.ends_with("TiB") {
            TIB / 200
        } else if text.ends_with("GiB") {
            GIB / 200
        } else if text.ends_with("MiB") {
            MIB / 2
        } else if text.ends_with("KiB") {
            KIB / 2
        } else {
            0
        };
        prop_assert!(n.abs_diff(back) <= half_step + 1, "{} -> {} -> {}", n, text, back);
    }

    #[test]
    fn no_size_text_panics(s in any::<String>()) {
        if let Err(e) = human2bytes(&s) {
            prop_assert_eq!(e.text, s);
        }
    }

    #[test]
    fn size_like_text_reads_or_names_itself(s in "[ +]{0,2}[0-9]{0,25}(\\.[0-9]{0,25})?[ ]?[kKmMgGtTpPeEiIbB]{0,4}") {
        match human2bytes(&s) {
            Ok(_) => {}
            Err(e) => prop_assert_eq!(e.text, s),
        }
    }
}
