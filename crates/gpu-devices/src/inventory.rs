//! What a context knows of its devices' identity (count, UUIDs, PCI addresses, MIG layout),
//! read once when it is made, and the look-ups over it: below the context, CUDA's rules and
//! the devices, which all find devices through it.

use gpu_backend::fixture::DeviceStatic;
use gpu_backend::{BackendError, DeviceId, GpuBackend, PciAddress, Query};

use crate::error::{Error, Result};

/// What the context knows of the devices' identity, read once.
#[derive(Debug, Clone, Default)]
pub(crate) struct Inventory {
    pub(crate) gpus: Vec<GpuEntry>,
}

/// A device's static answers as asked so far, and which fields were asked: what a context
/// keeps of each device, starting with the identity the inventory read.
#[derive(Debug, Clone)]
pub(crate) struct StaticAnswers {
    pub(crate) answers: DeviceStatic,
    /// The fields of [`DeviceStatic::FIELDS`] asked (the others read "not recorded", N/A).
    pub(crate) asked: Vec<&'static str>,
}

impl StaticAnswers {
    /// Nothing asked yet.
    pub(crate) fn none() -> StaticAnswers {
        StaticAnswers {
            answers: DeviceStatic::all_failing(&BackendError::NotRecorded),
            asked: Vec::new(),
        }
    }

    /// Asks the fields of the queries `queries` names that are not asked yet, and keeps them.
    fn ask(&mut self, b: &dyn GpuBackend, id: DeviceId, queries: &[Query]) {
        let wanted: Vec<&'static str> = DeviceStatic::FIELDS
            .iter()
            .filter(|&&(f, q)| queries.contains(&q) && !self.asked.contains(&f))
            .map(|&(f, _)| f)
            .collect();
        self.answers
            .refresh_where(b, id, &|_, f| wanted.contains(&f));
        self.asked.extend(wanted);
    }
}

/// What the inventory asks of a physical GPU: its identity and MIG layout.
const GPU_IDENTITY: &[Query] = &[
    Query::mig_mode,
    Query::mig_device_indices,
    Query::uuid,
    Query::pci_info,
];

/// What the inventory asks of a MIG device: its identity.
const MIG_IDENTITY: &[Query] = &[
    Query::uuid,
    Query::gpu_instance_id,
    Query::compute_instance_id,
];

impl Inventory {
    /// Asks the backend for the identity of every GPU and MIG device; the answers, as static
    /// answers of each device, are kept by the context so that no snapshot asks them again.
    pub(crate) fn read(b: &dyn GpuBackend) -> Result<(Inventory, Vec<(DeviceId, StaticAnswers)>)> {
        let count = b.device_count().map_err(|source| Error::Backend {
            doing: "counting GPUs",
            source,
        })?;
        let mut gpus = Vec::with_capacity(count.min(gpu_backend::MAX_DEVICE_COUNT) as usize);
        let mut statics = Vec::with_capacity(gpus.capacity());
        for index in 0..count {
            let id = DeviceId::Gpu(index);
            let _step = gpu_backend::timeline::device_step(gpu_backend::timeline::DEVICE_OPEN, id);
            let mut st = StaticAnswers::none();
            st.ask(b, id, GPU_IDENTITY);
            let gpu = &st.answers;
            let mig_enabled = gpu.mig_mode.ok().is_some_and(|m| m.current);
            let mut migs = Vec::new();
            for &mi in gpu
                .mig_device_indices
                .ok()
                .map_or(&[][..], |v| v.as_slice())
            {
                let mid = DeviceId::Mig {
                    parent: index,
                    index: mi,
                };
                let mut mst = StaticAnswers::none();
                mst.ask(b, mid, MIG_IDENTITY);
                let mig = &mst.answers;
                migs.push(MigEntry {
                    id: mid,
                    uuid: mig.uuid.ok().cloned(),
                    gpu_instance_id: mig.gpu_instance_id.ok().copied(),
                    compute_instance_id: mig.compute_instance_id.ok().copied(),
                });
                statics.push((mid, mst));
            }
            gpus.push(GpuEntry {
                index,
                uuid: gpu.uuid.ok().cloned(),
                pci_key: gpu.pci_info.ok().and_then(|p| PciAddress::parse(&p.bus_id)),
                mig_enabled,
                migs,
            });
            statics.push((id, st));
        }
        Ok((Inventory { gpus }, statics))
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
