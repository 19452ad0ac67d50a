//! CUDA's rules over a context's devices: its ordinal order (FASTEST_FIRST from the backend,
//! or PCI bus order), `CUDA_VISIBLE_DEVICES` and `CUDA_DEVICE_ORDER`. Below the context, which
//! keeps the order, and the devices.

use std::collections::HashSet;

use gpu_backend::{DeviceId, GpuBackend};

use crate::inventory::{strip_uuid_prefix, Inventory};

/// The environment variable that names the devices CUDA shows.
pub const VISIBLE_DEVICES_ENV_VAR: &str = "CUDA_VISIBLE_DEVICES";
/// The environment variable that chooses CUDA's ordinal order.
pub const DEVICE_ORDER_ENV_VAR: &str = "CUDA_DEVICE_ORDER";

/// CUDA's ordinal order (`CUDA_DEVICE_ORDER`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CudaDeviceOrder {
    /// The fastest device first (CUDA's default), as libcuda reports it.
    #[default]
    FastestFirst,
    /// By PCI bus id, ascending (`CUDA_DEVICE_ORDER=PCI_BUS_ID`).
    PciBusId,
}

impl CudaDeviceOrder {
    /// The order a `CUDA_DEVICE_ORDER` value asks for: `PCI_BUS_ID`, else (unset, or any other
    /// value, as CUDA does) `FASTEST_FIRST`.
    pub fn from_value(value: Option<&str>) -> CudaDeviceOrder {
        match value.map(str::trim) {
            Some("PCI_BUS_ID") => CudaDeviceOrder::PciBusId,
            _ => CudaDeviceOrder::FastestFirst,
        }
    }

    /// The order `CUDA_DEVICE_ORDER` in the environment asks for.
    pub fn from_env() -> CudaDeviceOrder {
        let v = std::env::var_os(DEVICE_ORDER_ENV_VAR);
        CudaDeviceOrder::from_value(v.as_ref().map(|v| v.to_string_lossy()).as_deref())
    }
}

/// `CUDA_VISIBLE_DEVICES` from the environment; `None` when unset. A value that is not UTF-8 is
/// read lossily (it cannot name a device, so CUDA would show none either).
pub fn visible_devices_from_env() -> Option<String> {
    std::env::var_os(VISIBLE_DEVICES_ENV_VAR).map(|v| v.to_string_lossy().into_owned())
}

/// Where a context learns CUDA's default (FASTEST_FIRST) order. libcuda is asked by the
/// backend (gpu-backend's NVML backend, in a child process), never beside it, so that a replay
/// gives the order the recording had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CudaOrderSource {
    /// The backend's answer to `cuda_device_order` (a fixture's recorded order); if it has
    /// none, PCI bus order.
    Backend,
    /// PCI bus order, always.
    PciBusId,
}

/// Where the FASTEST_FIRST order of a context came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CudaOrderOrigin {
    /// The backend's `cuda_device_order` answer (libcuda's, through the NVML backend).
    Backend,
    /// PCI bus order (the last resort).
    PciBusId,
}

/// The FASTEST_FIRST order a context uses, where it came from, and why earlier sources were
/// passed over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaOrder {
    /// Physical GPUs (NVML indices) in CUDA's default order.
    pub physical: Vec<u32>,
    /// Where it came from.
    pub origin: CudaOrderOrigin,
    /// Why each earlier source was not used, in the order tried.
    pub passed_over: Vec<String>,
}

/// Works out the FASTEST_FIRST order by the fallback chain of `source`.
pub(crate) fn resolve_fastest_first(
    inv: &Inventory,
    backend: &dyn GpuBackend,
    source: &CudaOrderSource,
) -> CudaOrder {
    let mut passed_over = Vec::new();
    if !matches!(source, CudaOrderSource::PciBusId) {
        match backend.cuda_device_order() {
            Ok(uuids) => match order_from_uuids(inv, uuids.iter().map(|u| Some(u.as_str()))) {
                Some(physical) => {
                    return CudaOrder {
                        physical,
                        origin: CudaOrderOrigin::Backend,
                        passed_over,
                    }
                }
                None => passed_over
                    .push("backend: its CUDA order does not name every GPU once".to_string()),
            },
            Err(e) => passed_over.push(format!("backend: {e}")),
        }
    }
    CudaOrder {
        physical: inv.pci_order(),
        origin: CudaOrderOrigin::PciBusId,
        passed_over,
    }
}

/// Maps a list of UUIDs (GPU or MIG, with or without prefix) onto the GPUs; `None` unless every
/// GPU is named exactly once (MIG devices stand for their parent).
fn order_from_uuids<'a>(
    inv: &Inventory,
    uuids: impl Iterator<Item = Option<&'a str>>,
) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for u in uuids {
        let index = physical_of_uuid(inv, u?)?;
        if !out.contains(&index) {
            out.push(index);
        }
    }
    (out.len() == inv.gpus.len()).then_some(out)
}

fn physical_of_uuid(inv: &Inventory, uuid: &str) -> Option<u32> {
    let bare = strip_uuid_prefix(uuid).to_ascii_lowercase();
    inv.uuids()
        .find(|(_, u)| strip_uuid_prefix(u).eq_ignore_ascii_case(&bare))
        .map(|(id, _)| id.physical_index())
}

/// What one `CUDA_VISIBLE_DEVICES` entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Ordinal,
    Uuid,
}

/// The entry as CUDA reads it: trimmed, and for an entry that starts with a number, that
/// number alone (with its sign, which makes it invalid).
fn strip_entry(entry: &str) -> &str {
    let e = entry.trim();
    let b = e.as_bytes();
    let signed = b.len() > 1 && (b[0] == b'+' || b[0] == b'-') && b[1].is_ascii_digit();
    if b.first().is_some_and(u8::is_ascii_digit) || signed {
        let start = usize::from(signed);
        let digits = b[start..].iter().take_while(|c| c.is_ascii_digit()).count();
        &e[..start + digits]
    } else {
        e
    }
}

/// One entry as a device: its kind and id, or `None` if CUDA would stop here.
fn resolve_entry(inv: &Inventory, order: &[u32], entry: &str) -> Option<(Kind, DeviceId)> {
    if entry.bytes().next().is_some_and(|c| c.is_ascii_digit()) {
        let n: usize = entry.parse().ok()?;
        return order.get(n).map(|&i| (Kind::Ordinal, DeviceId::Gpu(i)));
    }
    if let Some(rest) = entry.strip_prefix("MIG-GPU-") {
        return resolve_old_mig_form(inv, rest).map(|id| (Kind::Uuid, id));
    }
    let (prefix, is_mig) = if let Some(rest) = entry.strip_prefix("GPU-") {
        (rest, false)
    } else if let Some(rest) = entry.strip_prefix("MIG-") {
        (rest, true)
    } else {
        return None;
    };
    unique_prefix(inv, prefix, is_mig).map(|id| (Kind::Uuid, id))
}

/// The one GPU (or MIG device) whose UUID's hex part starts with `prefix`.
fn unique_prefix(inv: &Inventory, prefix: &str, mig: bool) -> Option<DeviceId> {
    if prefix.is_empty() {
        return None;
    }
    let prefix = prefix.to_ascii_lowercase();
    let mut found = None;
    for (id, uuid) in inv.uuids() {
        if id.is_mig() != mig {
            continue;
        }
        if strip_uuid_prefix(uuid)
            .to_ascii_lowercase()
            .starts_with(&prefix)
        {
            if found.is_some() {
                return None;
            }
            found = Some(id);
        }
    }
    found
}

/// `<gpu uuid or prefix>/<gpu instance id>/<compute instance id>`, the part after `MIG-GPU-`.
pub(crate) fn resolve_old_mig_form(inv: &Inventory, rest: &str) -> Option<DeviceId> {
    let mut parts = rest.split('/');
    let (gpu, gi, ci) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let number = |s: &str| -> Option<u32> {
        if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        s.parse().ok()
    };
    let (gi, ci) = (number(gi)?, number(ci)?);
    let DeviceId::Gpu(parent) = unique_prefix(inv, gpu, false)? else {
        return None;
    };
    inv.gpus
        .get(parent as usize)?
        .migs
        .iter()
        .find(|m| m.gpu_instance_id == Some(gi) && m.compute_instance_id == Some(ci))
        .map(|m| m.id)
}

/// `CUDA_VISIBLE_DEVICES` as devices, by the rules of
/// [`crate::Context::parse_cuda_visible_devices_with`].
pub(crate) fn parse(inv: &Inventory, order: &[u32], value: Option<&str>) -> Vec<DeviceId> {
    let named: Vec<DeviceId> = match value {
        None => order.iter().map(|&i| DeviceId::Gpu(i)).collect(),
        Some(value) => {
            let mut named = Vec::new();
            let mut seen_entries = HashSet::new();
            let mut kind = None;
            for raw in value.split(',') {
                let entry = strip_entry(raw);
                if !seen_entries.insert(entry) {
                    return Vec::new();
                }
                let Some((k, id)) = resolve_entry(inv, order, entry) else {
                    break;
                };
                if *kind.get_or_insert(k) != k {
                    break;
                }
                if named.contains(&id) {
                    return Vec::new();
                }
                named.push(id);
            }
            named
        }
    };

    // CUDA shows at most one MIG device.
    if let Some(&mig) = named.iter().find(|id| id.is_mig()) {
        return vec![mig];
    }
    let mut out = Vec::with_capacity(named.len());
    for id in named {
        let Some(gpu) = inv.gpus.get(id.physical_index() as usize) else {
            continue;
        };
        if gpu.mig_enabled {
            match gpu.migs.first() {
                Some(first) => return vec![first.id],
                None => continue,
            }
        }
        out.push(id);
    }
    out
}

/// Devices as a comma-separated list of UUIDs; devices without a known UUID are left out.
pub(crate) fn normalize(inv: &Inventory, ids: &[DeviceId]) -> String {
    ids.iter()
        .filter_map(|&id| inv.uuid_of(id))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_keep_their_leading_number() {
        // (entry, what is kept of it)
        for (entry, kept) in [
            (" 1 ", "1"),
            ("1abc", "1"),
            ("-1", "-1"),
            ("+2x", "+2"),
            ("GPU-ab", "GPU-ab"),
            ("", ""),
        ] {
            assert_eq!(strip_entry(entry), kept, "{entry:?}");
        }
    }

    #[test]
    fn device_order_values() {
        assert_eq!(
            CudaDeviceOrder::from_value(Some("PCI_BUS_ID")),
            CudaDeviceOrder::PciBusId
        );
        assert_eq!(
            CudaDeviceOrder::from_value(Some("FASTEST_FIRST")),
            CudaDeviceOrder::FastestFirst
        );
        assert_eq!(
            CudaDeviceOrder::from_value(Some("bogus")),
            CudaDeviceOrder::FastestFirst
        );
        assert_eq!(
            CudaDeviceOrder::from_value(None),
            CudaDeviceOrder::FastestFirst
        );
    }
}
