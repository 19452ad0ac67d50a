//! What a context knows of its devices' identity (count, UUIDs, PCI addresses, MIG layout),
//! read once when it is made, and the look-ups over it: below the context, CUDA's rules and
//! the devices, which all find devices through it.

use gpu_backend::{DeviceId, GpuBackend, PciAddress};

use crate::error::{Error, Result};

/// What the context knows of the devices' identity, read once.
#[derive(Debug, Clone, Default)]
pub(crate) struct Inventory {
    pub(crate) gpus: Vec<GpuEntry>,
}

impl Inventory {
    /// Asks the backend for the identity of every GPU and MIG device.
    pub(crate) fn read(b: &dyn GpuBackend) -> Result<Inventory> {
        let count = b.device_count().map_err(|source| Error::Backend {
            doing: "counting GPUs",
            source,
        })?;
        let mut gpus = Vec::with_capacity(count.min(gpu_backend::MAX_DEVICE_COUNT) as usize);
        for index in 0..count {
            let id = DeviceId::Gpu(index);
            let mig_enabled = b.mig_mode(id).is_ok_and(|m| m.current);
            let migs = b
                .mig_device_indices(id)
                .unwrap_or_default()
                .into_iter()
                .map(|mi| {
                    let mid = DeviceId::Mig {
                        parent: index,
                        index: mi,
                    };
                    MigEntry {
                        id: mid,
                        uuid: b.uuid(mid).ok(),
                        gpu_instance_id: b.gpu_instance_id(mid).ok(),
                        compute_instance_id: b.compute_instance_id(mid).ok(),
                    }
                })
                .collect();
            gpus.push(GpuEntry {
                index,
                uuid: b.uuid(id).ok(),
                pci_key: b
                    .pci_info(id)
                    .ok()
                    .and_then(|p| PciAddress::parse(&p.bus_id)),
                mig_enabled,
                migs,
            });
        }
        Ok(Inventory { gpus })
    }

    /// Every (id, UUID) pair known.
    pub(crate) fn uuids(&self) -> impl Iterator<Item = (DeviceId, &str)> {
        self.gpus.iter().flat_map(|g| {
            g.uuid
                .as_deref()
                .map(|u| (DeviceId::Gpu(g.index), u))
                .into_iter()
                .chain(
                    g.migs
                        .iter()
                        .filter_map(|m| m.uuid.as_deref().map(|u| (m.id, u))),
                )
        })
    }

    /// The UUID of a device, if known.
    pub(crate) fn uuid_of(&self, id: DeviceId) -> Option<&str> {
        let g = self.gpus.get(id.physical_index() as usize)?;
        match id {
            DeviceId::Gpu(_) => g.uuid.as_deref(),
            DeviceId::Mig { .. } => g.migs.iter().find(|m| m.id == id)?.uuid.as_deref(),
        }
    }

    /// The device whose UUID is, or starts with, `text` (with or without its `GPU-`/`MIG-`
    /// prefix); an exact match wins over prefixes.
    pub(crate) fn find_uuid(&self, text: &str) -> Result<DeviceId> {
        let wanted = text.trim().to_ascii_lowercase();
        if wanted.is_empty() || wanted == "gpu-" || wanted == "mig-" {
            return Err(Error::UuidNotFound(text.to_string()));
        }
        let has_prefix = wanted.starts_with("gpu-") || wanted.starts_with("mig-");
        let mut matches = Vec::new();
        for (id, uuid) in self.uuids() {
            let lower = uuid.to_ascii_lowercase();
            let candidate = if has_prefix {
                lower.as_str()
            } else {
                strip_uuid_prefix(&lower)
            };
            if candidate == wanted {
                return Ok(id);
            }
            if candidate.starts_with(&wanted) {
                matches.push((id, uuid.to_string()));
            }
        }
        match matches.len() {
            0 => Err(Error::UuidNotFound(text.to_string())),
            1 => Ok(matches[0].0),
            _ => Err(Error::AmbiguousUuid {
                prefix: text.to_string(),
                matches: matches.into_iter().map(|(_, u)| u).collect(),
            }),
        }
    }

    /// Physical GPUs in PCI bus order; GPUs whose bus id is unknown come last, by NVML index.
    pub(crate) fn pci_order(&self) -> Vec<u32> {
        let mut v: Vec<(Option<PciAddress>, u32)> =
            self.gpus.iter().map(|g| (g.pci_key, g.index)).collect();
        v.sort_by_key(|&(key, index)| (key.is_none(), key, index));
        v.into_iter().map(|(_, i)| i).collect()
    }
}

/// A physical GPU's identity: its NVML index, UUID and PCI address where it answered them,
/// and its MIG layout.
#[derive(Debug, Clone)]
pub(crate) struct GpuEntry {
    pub(crate) index: u32,
    pub(crate) uuid: Option<String>,
    /// Its PCI address: PCI bus order, and a look-up by bus id.
    pub(crate) pci_key: Option<PciAddress>,
    /// Whether MIG mode is on now (its MIG devices are where work runs).
    pub(crate) mig_enabled: bool,
    pub(crate) migs: Vec<MigEntry>,
}

/// A MIG device's identity, each part where it answered (`MIG-GPU-<uuid>/<gi>/<ci>` names it).
#[derive(Debug, Clone)]
pub(crate) struct MigEntry {
    pub(crate) id: DeviceId,
    pub(crate) uuid: Option<String>,
    pub(crate) gpu_instance_id: Option<u32>,
    pub(crate) compute_instance_id: Option<u32>,
}

/// `GPU-abc` and `MIG-abc` without their prefix.
pub(crate) fn strip_uuid_prefix(uuid: &str) -> &str {
    for p in ["GPU-", "MIG-", "gpu-", "mig-"] {
        if let Some(rest) = uuid.strip_prefix(p) {
            return rest;
        }
    }
    uuid
}
