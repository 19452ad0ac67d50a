//! [`Context`]: an open backend and the devices it reports: what it keeps (the devices'
//! identity, their static answers, the answers a [`QueryPlan`] keeps between refreshes) and the
//! refresh itself. Looking devices up (`Context::device`, `device_by_uuid`, ...) is in
//! `device.rs`, beside [`crate::Device`]; CUDA's numbering (`Context::cuda_devices`, ...) in
//! `cuda.rs`: each file imports only the ones below it.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Instant;

use gpu_backend::fixture::{DeviceDynamic, DeviceStatic};
use gpu_backend::{
    recorder, Answer, BackendError, DeviceId, Fixture, GpuBackend, Query, ReplayBackend, MAX_FANS,
};

use crate::cuda::order::{self as cuda_order, CudaDeviceOrder, CudaOrder, CudaOrderSource};
use crate::error::{Error, Result};
use crate::inventory::{Inventory, StaticAnswers};
use crate::na::Na;
use crate::plan::{Cadence, QueryPlan};
use crate::snapshot::{DeviceSnapshot, NvLinkReading, SystemSnapshot};
use crate::units::cuda_version_text;

/// The environment variable that makes [`Context::open`] serve a fixture instead of NVML.
pub const FIXTURE_ENV_VAR: &str = "GPUSCOPE_FIXTURE";

/// An open backend and the devices it reports. Cheap to clone (one `Arc`); every [`crate::Device`]
/// holds one.
///
/// The identity of the devices (count, UUIDs, PCI bus ids, MIG layout) is read once when the
/// context is made and used to find devices; every metric is asked of the backend when it is
/// read.
///
/// ```
/// use gpu_devices::Context;
///
/// let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/h100-mig.json");
/// let ctx = Context::from_fixture(path)?;
/// assert_eq!(ctx.device_count(), 1);
/// assert_eq!(ctx.mig_device_count(), 4);
/// let gpu = ctx.device(0)?;
/// assert!(gpu.is_mig_mode_enabled());
/// assert_eq!(ctx.leaf_devices().len(), 4);
/// assert!(ctx.device(1).is_err());
/// # Ok::<(), gpu_devices::Error>(())
/// ```
#[derive(Clone)]
pub struct Context {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) backend: Arc<dyn GpuBackend>,
    pub(crate) inventory: Inventory,
    pub(crate) cuda_source: CudaOrderSource,
    pub(crate) cuda_order: OnceLock<CudaOrder>,
    /// Each device's answers that do not change (the query table's static rows: name, UUID,
    /// limits, max clocks, modes, ...), each asked at the first snapshot whose plan asks it and
    /// kept for the life of the context (the identity the inventory read, from the start), so
    /// a refresh asks only the changing queries.
    pub(crate) statics: Mutex<HashMap<DeviceId, StaticAnswers>>,
    /// Each device's last NVLink counter reading and when it was taken, for throughput
    /// measured since the previous call (`Device::nvlink_throughput(None)`).
    pub(crate) nvlink_last: Mutex<HashMap<DeviceId, NvLinkReading>>,
    /// What a refresh asks ([`Context::set_query_plan`]).
    pub(crate) plan: Mutex<Arc<QueryPlan>>,
    /// Each device's changing answers as last asked, and when each query was last asked: what
    /// a refresh shows of a query whose cadence has not come round.
    pub(crate) kept: Mutex<HashMap<DeviceId, Kept>>,
}

/// A device's changing answers as last asked, and when each query was.
#[derive(Debug, Clone)]
pub(crate) struct Kept {
    pub(crate) answers: DeviceDynamic,
    pub(crate) asked_at: HashMap<Query, Instant>,
    /// The fields that answered that the device or driver does not have them (not
    /// supported, no such function): not asked again ([`DeviceDynamic::settled_fields`]).
    pub(crate) settled: Vec<&'static str>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("devices", &self.inner.inventory.gpus.len())
            .field("cuda_source", &self.inner.cuda_source)
            .finish_non_exhaustive()
    }
}

/// Builds a [`Context`] with options: [`Context::builder`].
#[derive(Clone)]
pub struct ContextBuilder {
    backend: Arc<dyn GpuBackend>,
    cuda_source: CudaOrderSource,
}

impl ContextBuilder {
    /// Where CUDA's default (FASTEST_FIRST) order comes from. The default for a builder is
    /// [`CudaOrderSource::Backend`].
    pub fn cuda_order_source(mut self, source: CudaOrderSource) -> ContextBuilder {
        self.cuda_source = source;
        self
    }

    /// Reads the devices' identity and makes the context.
    ///
    /// # Errors
    ///
    /// [`Error::Backend`] when the backend cannot say how many GPUs there are.
    pub fn build(self) -> Result<Context> {
        let (inventory, identity) = Inventory::read(&*self.backend)?;
        Ok(Context {
            inner: Arc::new(Inner {
                backend: self.backend,
                inventory,
                cuda_source: self.cuda_source,
                cuda_order: OnceLock::new(),
                statics: Mutex::new(identity.into_iter().collect()),
                nvlink_last: Mutex::new(HashMap::new()),
                plan: Mutex::new(Arc::new(QueryPlan::everything())),
                kept: Mutex::new(HashMap::new()),
            }),
        })
    }
}

impl Context {
    /// The real GPUs, or the fixture named by the environment variable `GPUSCOPE_FIXTURE`.
    ///
    /// * With `GPUSCOPE_FIXTURE` set (and not empty): that fixture, replayed on the wall clock and
    ///   looping; CUDA's order is the fixture's.
    /// * Otherwise: NVML (`gpu_backend::NvmlBackend::from_env`, which honours
    ///   `GPUSCOPE_NVML_LIB`); CUDA's order is the NVML backend's, which asks libcuda in a child
    ///   process (honouring `GPUSCOPE_CUDA_LIB`).
    ///
    /// # Errors
    ///
    /// [`Error::Fixture`] for a fixture that cannot be read, [`Error::Backend`] when NVML cannot
    /// be loaded or initialised, [`Error::NoNvml`] in a build without the `nvml` feature.
    pub fn open() -> Result<Context> {
        Context::open_source(&gpu_backend::Source::from_env())
    }

    /// A context on `source`, by [`gpu_backend::Source`]'s rules (a frame out of range is an
    /// error). The source's host facts are not kept: a context has none.
    ///
    /// # Errors
    ///
    /// As [`Context::open`], and [`Error::Source`] for a frame out of range.
    pub fn open_source(source: &gpu_backend::Source) -> Result<Context> {
        let opened = source.open().map_err(Error::from_source)?;
        Context::from_backend(opened.backend)
    }

    /// A context on any backend. CUDA's order is the backend's answer to `cuda_device_order`,
    /// else PCI bus order ([`CudaOrderSource::Backend`]).
    ///
    /// # Errors
    ///
    /// [`Error::Backend`] when the backend cannot say how many GPUs there are.
    pub fn from_backend(backend: Arc<dyn GpuBackend>) -> Result<Context> {
        Context::builder(backend).build()
    }

    /// A context on a fixture file, replayed from frame 0 on a manual clock (use
    /// [`Context::from_backend`] with your own `Arc<ReplayBackend>` to move the frame).
    ///
    /// # Errors
    ///
    /// [`Error::Fixture`] when the file cannot be read, or [`Error::Backend`] as for
    /// [`Context::from_backend`].
    pub fn from_fixture(path: impl AsRef<Path>) -> Result<Context> {
        let fixture = Fixture::load(path)?;
        Context::from_backend(Arc::new(ReplayBackend::new(fixture)))
    }

    /// A builder, to choose options such as [`ContextBuilder::cuda_order_source`].
    pub fn builder(backend: Arc<dyn GpuBackend>) -> ContextBuilder {
        ContextBuilder {
            backend,
            cuda_source: CudaOrderSource::Backend,
        }
    }

    /// The backend.
    pub fn backend(&self) -> &Arc<dyn GpuBackend> {
        &self.inner.backend
    }

    // ---- System ----

    /// Version of the installed NVIDIA display driver, e.g. `"535.54.03"`.
    pub fn driver_version(&self) -> Na<String> {
        self.inner.backend.driver_version().into()
    }

    /// Version of the NVML library, e.g. `"12.535.54.03"`.
    pub fn nvml_version(&self) -> Na<String> {
        self.inner.backend.nvml_version().into()
    }

    /// The highest CUDA version the driver supports, as text: `"12.2"` (`"12.2.1"` with a
    /// revision).
    pub fn cuda_driver_version(&self) -> Na<String> {
        Na::from(self.inner.backend.cuda_driver_version()).map(cuda_version_text)
    }

    /// The version of the CUDA runtime (libcudart) this machine would load, as text: the
    /// backend's `cuda_runtime_version` (N/A when none is found, or a fixture did not record
    /// one).
    pub fn cuda_runtime_version(&self) -> Na<String> {
        Na::from(self.inner.backend.cuda_runtime_version()).map(cuda_version_text)
    }

    /// Whether the driver lets one virtual machine mix vGPU profiles of different types
    /// (`--query-gpu`'s `vgpu_driver_capability.heterogenous_multivGPU`).
    pub fn vgpu_heterogeneous_multi_vgpu(&self) -> Na<bool> {
        self.inner.backend.vgpu_heterogeneous_multi_vgpu().into()
    }

    // ---- Physical devices ----

    /// Number of physical GPUs.
    pub fn device_count(&self) -> u32 {
        self.inner.inventory.gpus.len() as u32
    }

    /// True when there is at least one GPU.
    pub fn is_available(&self) -> bool {
        self.device_count() > 0
    }

    // ---- MIG devices ----

    /// Number of MIG devices over all GPUs.
    pub fn mig_device_count(&self) -> u32 {
        self.inner
            .inventory
            .gpus
            .iter()
            .map(|g| g.migs.len() as u32)
            .sum()
    }

    // ---- CUDA ----

    /// Physical GPUs (NVML indices) in CUDA's order of the given kind.
    pub fn cuda_order(&self, order: CudaDeviceOrder) -> Vec<u32> {
        match order {
            CudaDeviceOrder::FastestFirst => self.fastest_first().physical.clone(),
            CudaDeviceOrder::PciBusId => self.inner.inventory.pci_order(),
        }
    }

    /// Where the FASTEST_FIRST order came from, and why earlier sources were passed over.
    pub fn cuda_order_origin(&self) -> &CudaOrder {
        self.fastest_first()
    }

    /// `CUDA_VISIBLE_DEVICES` (`None`: unset) as the devices CUDA would show, in CUDA ordinal
    /// order, with CUDA's order from `CUDA_DEVICE_ORDER` in the environment. See
    /// [`Context::parse_cuda_visible_devices_with`].
    pub fn parse_cuda_visible_devices(&self, value: Option<&str>) -> Vec<DeviceId> {
        self.parse_cuda_visible_devices_with(value, CudaDeviceOrder::from_env())
    }

    /// `CUDA_VISIBLE_DEVICES` (`None`: unset) as the devices CUDA would show, in CUDA ordinal
    /// order, following CUDA's rules (as nvitop's `parse_cuda_visible_devices`):
    ///
    /// * entries are ordinals into CUDA's `order`, GPU UUIDs (`GPU-...`, full or a unique
    ///   prefix), MIG UUIDs (`MIG-...`) or `MIG-GPU-<uuid>/<gpu instance>/<compute instance>`;
    /// * the list stops at the first entry that is invalid, out of range, ambiguous, or of
    ///   another kind than the first (ordinals and UUIDs do not mix);
    /// * a repeated entry makes the whole value invalid (no devices);
    /// * unset means every GPU; the empty string means none;
    /// * CUDA shows at most one MIG device: the first MIG device named, or else the first MIG
    ///   device of the first named GPU in MIG mode (GPUs in MIG mode without MIG devices are
    ///   skipped).
    ///
    /// ```
    /// use gpu_backend::DeviceId;
    /// use gpu_devices::{Context, CudaDeviceOrder::PciBusId};
    ///
    /// let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/h100-sxm-8gpu.json");
    /// let ctx = Context::from_fixture(path)?;
    /// assert_eq!(ctx.parse_cuda_visible_devices_with(Some("6,5"), PciBusId), [DeviceId::Gpu(6), DeviceId::Gpu(5)]);
    /// assert_eq!(ctx.parse_cuda_visible_devices_with(Some("0,0"), PciBusId), []);
    /// assert_eq!(ctx.parse_cuda_visible_devices_with(Some("0,abc,1"), PciBusId), [DeviceId::Gpu(0)]);
    /// assert_eq!(ctx.parse_cuda_visible_devices_with(None, PciBusId).len(), 8);
    /// # Ok::<(), gpu_devices::Error>(())
    /// ```
    pub fn parse_cuda_visible_devices_with(
        &self,
        value: Option<&str>,
        order: CudaDeviceOrder,
    ) -> Vec<DeviceId> {
        cuda_order::parse(&self.inner.inventory, &self.cuda_order(order), value)
    }

    /// [`Context::parse_cuda_visible_devices`] as a comma-separated list of UUIDs, with
    /// `CUDA_DEVICE_ORDER` from the environment.
    pub fn normalize_cuda_visible_devices(&self, value: Option<&str>) -> String {
        self.normalize_cuda_visible_devices_with(value, CudaDeviceOrder::from_env())
    }

    /// [`Context::parse_cuda_visible_devices_with`] as a comma-separated list of UUIDs (a
    /// device whose UUID cannot be read is left out).
    pub fn normalize_cuda_visible_devices_with(
        &self,
        value: Option<&str>,
        order: CudaDeviceOrder,
    ) -> String {
        let ids = self.parse_cuda_visible_devices_with(value, order);
        cuda_order::normalize(&self.inner.inventory, &ids)
    }

    // ---- Snapshots ----

    /// Everything about the system and every device (physical, then its MIG devices), each
    /// backend query asked once per device (nvitop's `oneshot` over all devices).
    ///
    /// ```
    /// let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/h100-sxm-8gpu.json");
    /// let snap = gpu_devices::Context::from_fixture(path)?.snapshot_all();
    /// assert_eq!(snap.devices.len(), 8);
    /// assert!(snap.errors().next().is_none());
    /// let json = serde_json::to_value(&snap).unwrap();
    /// assert!(json["devices"][0]["fan_speed"].is_null());
    /// # Ok::<(), gpu_devices::Error>(())
    /// ```
    pub fn snapshot_all(&self) -> SystemSnapshot {
        // The recorder's calls in the recorder's order (the system; every device's static
        // answers, each GPU followed by the MIG devices they name; every device's changing
        // answers), converting each device as soon as its answers are in rather than through the
        // recorder's maps.
        let b = &*self.inner.backend;
        let system = recorder::capture_system(b);
        let devices = recorder::capture_statics_in_order(b, &system.device_count)
            .into_iter()
            .map(|(id, st)| {
                let dy = recorder::capture_dynamic(b, id, &st.num_fans);
                DeviceSnapshot::from_answers(id, st, dy)
            })
            .collect();
        SystemSnapshot::from_parts(system, devices)
    }

    // ---- Internal ----

    /// Device `id`'s static answers: those the plan asks that were not asked yet are asked
    /// now and kept (see [`Inner::statics`]); those never asked read "not recorded" (N/A).
    pub(crate) fn statics_of(&self, id: DeviceId, plan: &QueryPlan) -> DeviceStatic {
        let kept = lock(&self.inner.statics).get(&id).cloned();
        let mut kept = kept.unwrap_or_else(StaticAnswers::none);
        let per_fan_asked = DeviceDynamic::FIELDS
            .iter()
            .any(|&(_, q)| q.info().shape == "per_fan" && plan.asks(q));
        let wanted: Vec<&'static str> = DeviceStatic::FIELDS
            .iter()
            .filter(|&&(f, q)| {
                // The fans' count says how many fans a per-fan reading asks about.
                let needed = plan.asks(q) || (q == Query::num_fans && per_fan_asked);
                needed && !kept.asked.contains(&f)
            })
            .map(|&(f, _)| f)
            .collect();
        if wanted.is_empty() {
            return kept.answers;
        }
        // Asked without the lock held, so that devices refreshed in parallel ask theirs at
        // the same time: the driver spends milliseconds on some static queries (each max
        // clock; docs/benchmarks.md, "Real costs").
        kept.answers
            .refresh_where(&*self.inner.backend, id, &|_, f| wanted.contains(&f));
        let mut all = lock(&self.inner.statics);
        let entry = all.entry(id).or_insert_with(StaticAnswers::none);
        entry
            .answers
            .merge_where(kept.answers, &|_, f| wanted.contains(&f));
        for f in wanted {
            if !entry.asked.contains(&f) {
                entry.asked.push(f);
            }
        }
        entry.answers.clone()
    }

    /// Sets what each refresh of this context's devices asks ([`QueryPlan`]): every
    /// changing query at every refresh unless set. Answers kept for a cadence stay kept.
    pub fn set_query_plan(&self, plan: QueryPlan) {
        *lock(&self.inner.plan) = Arc::new(plan);
    }

    /// What each refresh asks.
    pub fn query_plan(&self) -> Arc<QueryPlan> {
        lock(&self.inner.plan).clone()
    }

    /// Device `id`'s static answers ([`Context::statics_of`]) and changing answers for a
    /// refresh, asked as the [`QueryPlan`] says: the queries due now, the apart ones last, each
    /// on a thread of its own (they wait in the driver: their waits overlap each other, and
    /// none overlaps this device's other queries, whose traffic a PCIe sample would count),
    /// `process_utilization` at the first refresh and then only where a process list is not
    /// empty, the rest as kept from their last asking; a field that answered that the device or
    /// driver does not have it (not supported) is not asked again.
    pub(crate) fn refresh(&self, id: DeviceId) -> (DeviceStatic, DeviceDynamic) {
        let plan = self.query_plan();
        let b: &dyn GpuBackend = &*self.inner.backend;
        let mut kept = lock(&self.inner.kept).remove(&id).unwrap_or_else(|| Kept {
            answers: DeviceDynamic::all_failing(&BackendError::NotRecorded),
            asked_at: HashMap::new(),
            settled: Vec::new(),
        });
        let now = Instant::now();
        let due = |query: Query| match plan.cadence(query) {
            Cadence::EveryRefresh => true,
            Cadence::Never => false,
            Cadence::Every(period) => kept
                .asked_at
                .get(&query)
                .is_none_or(|at| now.saturating_duration_since(*at) >= period),
        };
        let due_now: Vec<Query> = DeviceDynamic::FIELDS
            .iter()
            .map(|&(_, q)| q)
            .filter(|&q| due(q))
            .collect();
        let is_due = |q: Query| due_now.contains(&q);
        let settled = std::mem::take(&mut kept.settled);
        let is_settled = |f: &str| settled.contains(&f);
        let apart_fields: Vec<(&'static str, Query)> = DeviceDynamic::FIELDS
            .iter()
            .copied()
            .filter(|&(f, q)| {
                is_due(q) && plan.is_apart(q) && q != Query::process_utilization && !is_settled(f)
            })
            .collect();
        let apart_one = |field: &'static str, fans: u32| {
            let mut one = DeviceDynamic::all_failing(&BackendError::NotRecorded);
            one.refresh_where(b, id, fans, &|_, f| f == field);
            (field, one)
        };
        let answers = &mut kept.answers;
        let (statics, fans) = std::thread::scope(|scope| {
            let statics = self.statics_of(id, &plan);
            let fans = match &statics.num_fans {
                Answer::Ok(n) => (*n).min(MAX_FANS),
                Answer::Err(_) => 0,
            };
            answers.refresh_where(b, id, fans, &|q, f| {
                is_due(q) && !plan.is_apart(q) && q != Query::process_utilization && !is_settled(f)
            });
            if is_due(Query::process_utilization) && !is_settled("process_utilization") {
                let none = |a: &Answer<Vec<gpu_backend::ProcessInfo>>| matches!(a, Answer::Ok(list) if list.is_empty());
                let asked_before = kept.asked_at.contains_key(&Query::process_utilization);
                if asked_before
                    && none(&answers.compute_processes)
                    && none(&answers.graphics_processes)
                {
                    // No process, no sample to show: an N/A answer (not supported here) stays,
                    // any other reads as no samples.
                    if !matches!(&answers.process_utilization, Answer::Err(e) if e.is_not_available())
                    {
                        answers.process_utilization = Answer::Ok(Vec::new());
                    }
                } else {
                    answers.refresh_where(b, id, fans, &|q, _| q == Query::process_utilization);
                }
            }
            // The apart queries last, each on a thread of its own beside the others: a PCIe
            // throughput sample counts the link's bytes over 20 ms, and this process's own
            // queries of the same GPU cross that link; asked beside them, a live H100's idle
            // link read about 50 MB/s each way where nvidia-smi read 1 (docs/benchmarks.md,
            // "PCIe throughput counts the asking").
            let threads: Vec<_> = apart_fields
                .iter()
                .map(|&(field, _)| scope.spawn(move || apart_one(field, fans)))
                .collect();
            for t in threads {
                match t.join() {
                    Ok((field, one)) => answers.merge_where(one, &|_, f| f == field),
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
            (statics, fans)
        });
        // A device that fails where it answered before (lost, fallen off the bus) is asked
        // again what it said it does not have: its answers now are those failures.
        let troubled = !settled.is_empty()
            && kept
                .answers
                .hard_failures()
                .iter()
                .any(|&(f, q)| is_due(q) && !is_settled(f));
        if troubled {
            kept.answers.refresh_where(b, id, fans, &|q, f| {
                is_settled(f) && plan.cadence(q) != Cadence::Never
            });
        }
        for &q in &due_now {
            kept.asked_at.insert(q, now);
        }
        // Settled: what answered now, or before, that the device does not have it; a field not
        // asked (never, or not yet due) keeps no claim on being settled.
        let asked = |f: &str| {
            DeviceDynamic::FIELDS
                .iter()
                .any(|&(field, q)| field == f && is_due(q))
        };
        kept.settled = kept
            .answers
            .settled_fields()
            .into_iter()
            .filter(|f| is_settled(f) || asked(f))
            .collect();
        let out = kept.answers.clone();
        lock(&self.inner.kept).insert(id, kept);
        (statics, out)
    }

    fn fastest_first(&self) -> &CudaOrder {
        self.inner.cuda_order.get_or_init(|| {
            cuda_order::resolve_fastest_first(
                &self.inner.inventory,
                &*self.inner.backend,
                &self.inner.cuda_source,
            )
        })
    }
}

/// A mutex's guard, poisoned or not: what the context keeps stays usable after a panic on
/// another thread (each entry is written whole).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
