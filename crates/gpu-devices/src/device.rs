//! [`Device`]: a physical GPU or a MIG device, with every metric of nvitop's `Device`.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gpu_backend::{
    ClockType, DeviceId, GpuBackend, NvLinkCounters, PciAddress, ProcessUtilizationSample,
};

use crate::context::Context;
use crate::cuda::order as cuda_order;
use crate::error::{Error, Result};
use crate::na::Na;
use crate::snapshot::{mean_throughput, DeviceSnapshot, NvLinkReading, ThroughputInfo};

/// Whether a device is a physical GPU or a MIG device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeviceKind {
    /// A physical GPU.
    Physical,
    /// A MIG device (a GPU instance's compute instance).
    Mig,
}

/// A physical GPU or a MIG device of a [`Context`]: nvitop's `PhysicalDevice` and `MigDevice`.
///
/// Cheap to clone (a context handle and a [`DeviceId`]). Each getter asks the backend when
/// called and answers an [`Na`]; [`Device::snapshot`] asks everything once. `Display` prints
/// the multi-section view of [`DeviceSnapshot`].
///
/// ```
/// let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/h100-sxm-8gpu.json");
/// let ctx = gpu_devices::Context::from_fixture(path)?;
/// let gpu = ctx.device(0)?;
/// assert_eq!(gpu.name().to_string(), "NVIDIA H100 80GB HBM3");
/// assert_eq!(gpu.memory_total_human().to_string(), "81559MiB");
/// assert_eq!(gpu.fan_speed().to_string(), "N/A"); // SXM boards have no fans
/// assert_eq!(gpu.performance_state().map(|p| format!("P{p}")).to_string(), "P0");
/// # Ok::<(), gpu_devices::Error>(())
/// ```
#[derive(Clone)]
pub struct Device {
    ctx: Context,
    id: DeviceId,
}

impl PartialEq for Device {
    fn eq(&self, other: &Device) -> bool {
        self.id == other.id && Arc::ptr_eq(&self.ctx.inner, &other.ctx.inner)
    }
}

impl Eq for Device {}

impl std::hash::Hash for Device {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.id.hash(state);
    }
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Device")
            .field("id", &self.id)
            .field("kind", &self.kind())
            .finish()
    }
}

/// The multi-section view of a fresh [`Device::snapshot`] (as igpu prints a device).
impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.snapshot().fmt(f)
    }
}

macro_rules! clocks {
    ($($(#[$doc:meta])* $name:ident = $call:ident($clock:expr);)*) => {$(
        $(#[$doc])*
        pub fn $name(&self) -> Na<u32> {
            self.backend().$call(self.id, $clock).into()
        }
    )*};
}

/// Declares each NVLink direction's getters: KiB/s of each link and their mean over links,
/// and both as text (`9821MiB/s`); each is one measurement of [`Device::nvlink_throughput`]
/// (whose `interval` it takes) read in that direction, so one table row names the direction's
/// field and text form once for all four.
macro_rules! nvlink_directions {
    ($(
        $direction:literal: $kib:ident, $human:ident => $per_link:ident, $mean:ident,
            $per_link_human:ident, $mean_human:ident;
    )*) => {$(
        #[doc = concat!($direction, " KiB/s of each link (one measurement; to have both \
            directions of the same measurement, use [`Device::nvlink_throughput`]).")]
        pub fn $per_link(&self, interval: impl Into<Option<Duration>>) -> Vec<Na<u64>> {
            self.nvlink_throughput(interval)
                .into_iter()
                .map(|t| t.$kib)
                .collect()
        }

        #[doc = concat!($direction, " KiB/s, mean over links.")]
        pub fn $mean(&self, interval: impl Into<Option<Duration>>) -> Na<u64> {
            self.nvlink_mean_throughput(interval).$kib
        }

        #[doc = concat!("[`Device::", stringify!($per_link), "`] as text, `9821MiB/s`.")]
        pub fn $per_link_human(
            &self,
            interval: impl Into<Option<Duration>>,
        ) -> Vec<Na<String>> {
            self.nvlink_throughput(interval)
                .iter()
                .map(ThroughputInfo::$human)
                .collect()
        }

        #[doc = concat!("[`Device::", stringify!($mean), "`] as text.")]
        pub fn $mean_human(&self, interval: impl Into<Option<Duration>>) -> Na<String> {
            self.nvlink_mean_throughput(interval).$human()
        }
    )*};
}

impl Device {
    pub(crate) fn new(ctx: Context, id: DeviceId) -> Device {
        Device { ctx, id }
    }

    pub(crate) fn backend(&self) -> &dyn GpuBackend {
        &*self.ctx.inner.backend
    }

    // ---- Identity ----

    /// The device's id: `Gpu(i)` or `Mig { parent, index }` (nvitop's `index` / `nvml_index`).
    pub fn id(&self) -> DeviceId {
        self.id
    }

    /// Physical or MIG.
    pub fn kind(&self) -> DeviceKind {
        if self.id.is_mig() {
            DeviceKind::Mig
        } else {
            DeviceKind::Physical
        }
    }

    /// The index of the physical GPU this device is or lives on.
    pub fn physical_index(&self) -> u32 {
        self.id.physical_index()
    }

    /// The MIG index under the parent, for a MIG device.
    pub fn mig_index(&self) -> Option<u32> {
        match self.id {
            DeviceId::Mig { index, .. } => Some(index),
            DeviceId::Gpu(_) => None,
        }
    }

    /// The context the device belongs to.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The parent GPU of a MIG device.
    pub fn parent(&self) -> Option<Device> {
        match self.id {
            DeviceId::Mig { parent, .. } => Some(self.ctx.make(DeviceId::Gpu(parent))),
            DeviceId::Gpu(_) => None,
        }
    }

    /// The position of the device in CUDA's ordinals under the environment's
    /// `CUDA_VISIBLE_DEVICES` and `CUDA_DEVICE_ORDER`; `None` when CUDA does not show it.
    pub fn cuda_index(&self) -> Option<u32> {
        self.ctx
            .parse_cuda_visible_devices(cuda_order::visible_devices_from_env().as_deref())
            .iter()
            .position(|&id| id == self.id)
            .map(|p| p as u32)
    }

    // ---- Memory ----

    // ---- Utilization ----

    /// GPU utilization, percent (nvitop's alias of [`Device::gpu_utilization`]).
    pub fn gpu_percent(&self) -> Na<u32> {
        self.gpu_utilization()
    }

    // ---- Clocks ----

    clocks! {
        /// Current graphics clock, MHz.
        graphics_clock = clock(ClockType::Graphics);
        /// Current SM clock, MHz.
        sm_clock = clock(ClockType::Sm);
        /// Current memory clock, MHz.
        memory_clock = clock(ClockType::Memory);
        /// Current video clock, MHz.
        video_clock = clock(ClockType::Video);
        /// Maximum graphics clock, MHz.
        max_graphics_clock = max_clock(ClockType::Graphics);
        /// Maximum SM clock, MHz.
        max_sm_clock = max_clock(ClockType::Sm);
        /// Maximum memory clock, MHz.
        max_memory_clock = max_clock(ClockType::Memory);
        /// Maximum video clock, MHz.
        max_video_clock = max_clock(ClockType::Video);
    }

    // ---- Fans, temperature, power ----

    /// Power draw, mW (nvitop's alias of [`Device::power_usage`]).
    pub fn power_draw(&self) -> Na<u32> {
        self.power_usage()
    }

    // ---- PCIe ----

    // ---- NVLink ----

    fn nvlink_counters_of(&self, links: u32) -> Vec<Na<NvLinkCounters>> {
        (0..links)
            .map(|l| self.backend().nvlink_throughput(self.id, l).into())
            .collect()
    }
    /// NVLink throughput of each link, KiB/s (nvitop's `nvlink_throughput(interval)`):
    ///
    /// - `Some(interval)` (or a bare `Duration`): reads the counters, sleeps `interval`, reads
    ///   them again;
    /// - `None`: does not sleep: measures since the previous call on this device (through any
    ///   `Device` of the same context), and answers N/A for every link on the first call.
    ///
    /// Either way the reading is kept for the next `None` call. See
    /// [`DeviceSnapshot::nvlink_throughput_since`] for rates between snapshots of your own.
    pub fn nvlink_throughput(&self, interval: impl Into<Option<Duration>>) -> Vec<ThroughputInfo> {
        let links = self.nvlink_states().len() as u32;
        let previous = match interval.into() {
            Some(interval) => {
                let before = NvLinkReading {
                    at: Instant::now(),
                    counters: self.nvlink_counters_of(links),
                };
                std::thread::sleep(interval);
                Some(before)
            }
            None => self.last_nvlink_reading(),
        };
        let now = NvLinkReading {
            at: Instant::now(),
            counters: self.nvlink_counters_of(links),
        };
        let rates = match &previous {
            Some(before) => now.throughput_since(before),
            None => vec![ThroughputInfo::default(); now.counters.len()],
        };
        self.ctx
            .inner
            .nvlink_last
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(self.id, now);
        rates
    }

    fn last_nvlink_reading(&self) -> Option<NvLinkReading> {
        self.ctx
            .inner
            .nvlink_last
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&self.id)
            .cloned()
    }

    /// The mean NVLink throughput over all links, KiB/s; `interval` as for
    /// [`Device::nvlink_throughput`].
    pub fn nvlink_mean_throughput(&self, interval: impl Into<Option<Duration>>) -> ThroughputInfo {
        mean_throughput(&self.nvlink_throughput(interval))
    }

    nvlink_directions! {
        "Transmitted": tx, tx_human => nvlink_tx_throughput, nvlink_mean_tx_throughput,
            nvlink_tx_throughput_human, nvlink_mean_tx_throughput_human;
        "Received": rx, rx_human => nvlink_rx_throughput, nvlink_mean_rx_throughput,
            nvlink_rx_throughput_human, nvlink_mean_rx_throughput_human;
    }

    // ---- Modes and states ----

    // ---- MIG ----

    /// Most MIG devices the GPU can hold; 0 when MIG is unsupported.
    pub fn max_mig_device_count(&self) -> u32 {
        Na::from(self.backend().max_mig_device_count(self.id)).unwrap_or(0)
    }
    /// The MIG devices of a physical GPU, asked now; empty when MIG is off or unsupported.
    pub fn mig_devices(&self) -> Vec<Device> {
        let DeviceId::Gpu(parent) = self.id else {
            return Vec::new();
        };
        self.backend()
            .mig_device_indices(self.id)
            .unwrap_or_default()
            .into_iter()
            .map(|index| self.ctx.make(DeviceId::Mig { parent, index }))
            .collect()
    }
    /// The MIG device at `index` under this GPU.
    ///
    /// # Errors
    ///
    /// [`Error::NoSuchMigDevice`] when there is none (or this is a MIG device itself).
    pub fn mig_device(&self, index: u32) -> Result<Device> {
        let found = self
            .mig_devices()
            .into_iter()
            .find(|d| d.mig_index() == Some(index));
        found.ok_or_else(|| Error::NoSuchMigDevice {
            parent: self.physical_index(),
            index,
            available: self
                .mig_devices()
                .iter()
                .filter_map(Device::mig_index)
                .collect(),
        })
    }
    /// True for a MIG device or a GPU not in MIG mode: a device work runs on.
    pub fn is_leaf_device(&self) -> bool {
        self.is_mig_device() || !self.is_mig_mode_enabled()
    }
    /// The leaf devices of this device: itself if it is one, else its MIG devices.
    pub fn to_leaf_devices(&self) -> Vec<Device> {
        if self.is_leaf_device() {
            vec![self.clone()]
        } else {
            self.mig_devices()
        }
    }

    // ---- Processes ----

    /// Per-process utilization samples newer than `since_us` (µs since the Unix epoch; 0 for
    /// all). NVML's "not found" (no samples) is an empty list.
    pub fn process_utilization(&self, since_us: u64) -> Na<Vec<ProcessUtilizationSample>> {
        match self.backend().process_utilization(self.id, since_us) {
            Err(gpu_backend::BackendError::NotFound) => Na::Value(Vec::new()),
            other => other.into(),
        }
    }

    // ---- Snapshot ----

    /// Every metric at once (nvitop's `as_snapshot` and `oneshot`): each changing query asked
    /// once, and the answers that do not change (name, UUID, limits, max clocks, modes: the
    /// query table's static rows) asked on the first snapshot that asks them and kept by the
    /// [`Context`] for the rest of the session. Both are asked as the context's
    /// [`crate::QueryPlan`] says (by default every one, `pcie_throughput` on threads of its
    /// own started first, `process_utilization` only where there are processes); what the plan
    /// does not ask reads N/A.
    #[doc(alias = "as_snapshot")]
    #[doc(alias = "oneshot")]
    pub fn snapshot(&self) -> DeviceSnapshot {
        let (st, dy) = self.ctx.refresh(self.id);
        DeviceSnapshot::from_answers(self.id, st, dy)
    }
}

/// A context's devices: looked up by index, id, UUID or PCI bus id; the MIG devices.
impl Context {
    /// Every physical GPU, by NVML index.
    pub fn devices(&self) -> Vec<Device> {
        (0..self.device_count())
            .map(|i| self.make(DeviceId::Gpu(i)))
            .collect()
    }

    /// The physical GPU of an NVML index.
    ///
    /// # Errors
    ///
    /// [`Error::NoSuchGpu`]: "no GPU with index 9: this machine has 8 GPUs (0-7)".
    pub fn device(&self, index: u32) -> Result<Device> {
        if index < self.device_count() {
            Ok(self.make(DeviceId::Gpu(index)))
        } else {
            Err(Error::NoSuchGpu {
                index,
                count: self.device_count(),
            })
        }
    }

    /// The devices of these ids (physical or MIG), in order (nvitop's `from_indices`).
    ///
    /// # Errors
    ///
    /// As [`Context::device_by_id`], for the first id that names no device.
    pub fn devices_from_ids(&self, ids: impl IntoIterator<Item = DeviceId>) -> Result<Vec<Device>> {
        ids.into_iter().map(|id| self.device_by_id(id)).collect()
    }

    /// The device of an id, physical or MIG.
    ///
    /// # Errors
    ///
    /// [`Error::NoSuchGpu`] or [`Error::NoSuchMigDevice`].
    pub fn device_by_id(&self, id: DeviceId) -> Result<Device> {
        match id {
            DeviceId::Gpu(i) => self.device(i),
            DeviceId::Mig { parent, index } => self.mig_device(parent, index),
        }
    }

    /// The device (physical or MIG) whose UUID is `uuid`, or starts with it: `GPU-18ef14e9`,
    /// `MIG-d184f67c-...`, or the hex part alone. The old MIG form
    /// `MIG-GPU-<uuid>/<gpu instance>/<compute instance>` is understood too.
    ///
    /// # Errors
    ///
    /// [`Error::UuidNotFound`], or [`Error::AmbiguousUuid`] for a prefix of several UUIDs.
    pub fn device_by_uuid(&self, uuid: &str) -> Result<Device> {
        let inv = &self.inner.inventory;
        if let Some(rest) = uuid.strip_prefix("MIG-GPU-") {
            return cuda_order::resolve_old_mig_form(inv, rest)
                .map(|id| self.make(id))
                .ok_or_else(|| Error::UuidNotFound(uuid.to_string()));
        }
        inv.find_uuid(uuid).map(|id| self.make(id))
    }

    /// The physical GPU at a PCI bus id, in NVML's form (`00000000:18:00.0`) or a shorter one
    /// (`0000:18:00.0`, `18:00.0`), case-insensitively.
    ///
    /// # Errors
    ///
    /// [`Error::BusIdNotFound`].
    pub fn device_by_bus_id(&self, bus_id: &str) -> Result<Device> {
        let wanted = PciAddress::parse(bus_id);
        self.inner
            .inventory
            .gpus
            .iter()
            .find(|g| wanted.is_some() && g.pci_key == wanted)
            .map(|g| self.make(DeviceId::Gpu(g.index)))
            .ok_or_else(|| Error::BusIdNotFound(bus_id.to_string()))
    }

    /// Every MIG device, GPU by GPU.
    pub fn mig_devices(&self) -> Vec<Device> {
        self.inner
            .inventory
            .gpus
            .iter()
            .flat_map(|g| g.migs.iter().map(|m| m.id))
            .map(|id| self.make(id))
            .collect()
    }

    /// The MIG device at MIG index `index` of GPU `parent`.
    ///
    /// # Errors
    ///
    /// [`Error::NoSuchGpu`] or [`Error::NoSuchMigDevice`].
    pub fn mig_device(&self, parent: u32, index: u32) -> Result<Device> {
        let gpu = self
            .inner
            .inventory
            .gpus
            .get(parent as usize)
            .ok_or(Error::NoSuchGpu {
                index: parent,
                count: self.device_count(),
            })?;
        let id = DeviceId::Mig { parent, index };
        if gpu.migs.iter().any(|m| m.id == id) {
            Ok(self.make(id))
        } else {
            Err(Error::NoSuchMigDevice {
                parent,
                index,
                available: gpu.migs.iter().map(|m| mig_index(m.id)).collect(),
            })
        }
    }

    /// Every physical GPU and, after each, its MIG devices.
    pub fn all_devices(&self) -> Vec<Device> {
        let mut out = Vec::new();
        for g in &self.inner.inventory.gpus {
            out.push(self.make(DeviceId::Gpu(g.index)));
            out.extend(g.migs.iter().map(|m| self.make(m.id)));
        }
        out
    }

    /// The devices work runs on: the MIG devices of a GPU in MIG mode, the GPU itself otherwise
    /// (nvitop's leaf devices).
    pub fn leaf_devices(&self) -> Vec<Device> {
        let mut out = Vec::new();
        for g in &self.inner.inventory.gpus {
            if g.mig_enabled {
                out.extend(g.migs.iter().map(|m| self.make(m.id)));
            } else {
                out.push(self.make(DeviceId::Gpu(g.index)));
            }
        }
        out
    }

    pub(crate) fn make(&self, id: DeviceId) -> Device {
        Device::new(self.clone(), id)
    }
}

fn mig_index(id: DeviceId) -> u32 {
    match id {
        DeviceId::Mig { index, .. } => index,
        DeviceId::Gpu(i) => i,
    }
}
