//! CUDA's view of the devices: [`CudaDevice`] and a context's devices as CUDA numbers them
//! (`Context::cuda_devices`, ...), over CUDA's rules (`order.rs`: its ordinal order,
//! `CUDA_VISIBLE_DEVICES` and `CUDA_DEVICE_ORDER`).

use std::ops::Deref;

use crate::context::Context;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::snapshot::DeviceSnapshot;

pub(crate) mod order;

pub use order::{
    visible_devices_from_env, CudaDeviceOrder, CudaOrder, CudaOrderOrigin, CudaOrderSource,
    DEVICE_ORDER_ENV_VAR, VISIBLE_DEVICES_ENV_VAR,
};

/// A device as CUDA numbers it: a [`Device`] with its CUDA ordinal under some
/// `CUDA_VISIBLE_DEVICES` (nvitop's `CudaDevice` / `CudaMigDevice`).
///
/// It dereferences to the [`Device`], so every getter of a device works on it.
#[derive(Debug, Clone)]
pub struct CudaDevice {
    cuda_index: u32,
    device: Device,
}

impl CudaDevice {
    pub(crate) fn new(cuda_index: u32, device: Device) -> CudaDevice {
        CudaDevice { cuda_index, device }
    }

    /// The CUDA ordinal.
    pub fn cuda_index(&self) -> u32 {
        self.cuda_index
    }

    /// The device.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The device, by value.
    pub fn into_device(self) -> Device {
        self.device
    }

    /// A snapshot of the device that carries its CUDA ordinal.
    pub fn snapshot(&self) -> DeviceSnapshot {
        let mut s = self.device.snapshot();
        s.cuda_index = Some(self.cuda_index);
        s
    }
}

impl Deref for CudaDevice {
    type Target = Device;
    fn deref(&self) -> &Device {
        &self.device
    }
}

/// A context's devices as CUDA numbers them.
impl Context {
    /// The devices CUDA shows under `CUDA_VISIBLE_DEVICES` and `CUDA_DEVICE_ORDER` of the
    /// environment, in CUDA ordinal order (nvitop's `Device.cuda.all()`).
    pub fn cuda_devices(&self) -> Vec<CudaDevice> {
        self.cuda_devices_for(
            visible_devices_from_env().as_deref(),
            CudaDeviceOrder::from_env(),
        )
    }

    /// The devices CUDA would show for this `CUDA_VISIBLE_DEVICES` value and order.
    pub fn cuda_devices_for(&self, value: Option<&str>, order: CudaDeviceOrder) -> Vec<CudaDevice> {
        self.parse_cuda_visible_devices_with(value, order)
            .into_iter()
            .enumerate()
            .map(|(i, id)| CudaDevice::new(i as u32, self.make(id)))
            .collect()
    }

    /// Number of devices CUDA shows under the environment's settings.
    pub fn cuda_device_count(&self) -> u32 {
        self.cuda_devices().len() as u32
    }

    /// The device of CUDA ordinal `index` under the environment's settings.
    ///
    /// # Errors
    ///
    /// [`Error::NoSuchCudaDevice`].
    pub fn cuda_device(&self, index: u32) -> Result<CudaDevice> {
        let all = self.cuda_devices();
        let count = all.len() as u32;
        all.into_iter()
            .nth(index as usize)
            .ok_or(Error::NoSuchCudaDevice { index, count })
    }

    /// The device as CUDA numbers it under the environment's `CUDA_VISIBLE_DEVICES` and
    /// `CUDA_DEVICE_ORDER`: nvitop's `CudaDevice(nvml_index=2)` is
    /// `ctx.cuda_device_of(&ctx.device(2)?)`, its `CudaDevice(uuid=...)` is
    /// `ctx.cuda_device_of(&ctx.device_by_uuid(...)?)`. See [`Context::cuda_device_of_for`].
    ///
    /// # Errors
    ///
    /// [`Error::NotVisibleToCuda`] when CUDA does not show the device.
    pub fn cuda_device_of(&self, device: &Device) -> Result<CudaDevice> {
        self.cuda_device_of_for(
            device,
            visible_devices_from_env().as_deref(),
            CudaDeviceOrder::from_env(),
        )
    }

    /// The device as CUDA numbers it for this `CUDA_VISIBLE_DEVICES` value and order.
    ///
    /// ```
    /// use gpu_devices::{Context, CudaDeviceOrder::PciBusId};
    ///
    /// let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/h100-sxm-8gpu.json");
    /// let ctx = Context::from_fixture(path)?;
    /// // CUDA_VISIBLE_DEVICES=3,2,1,0: GPU 2 is CUDA device 1.
    /// let cuda1 = ctx.cuda_device_of_for(&ctx.device(2)?, Some("3,2,1,0"), PciBusId)?;
    /// assert_eq!((cuda1.cuda_index(), cuda1.physical_index()), (1, 2));
    /// // GPU 5 is not shown.
    /// assert!(ctx.cuda_device_of_for(&ctx.device(5)?, Some("3,2,1,0"), PciBusId).is_err());
    /// # Ok::<(), gpu_devices::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::NotVisibleToCuda`] when CUDA does not show the device, or the device is of
    /// another context.
    pub fn cuda_device_of_for(
        &self,
        device: &Device,
        value: Option<&str>,
        order: CudaDeviceOrder,
    ) -> Result<CudaDevice> {
        let all = self.cuda_devices_for(value, order);
        let count = all.len() as u32;
        all.into_iter()
            .find(|c| c.device() == device)
            .ok_or(Error::NotVisibleToCuda {
                device: device.id(),
                count,
            })
    }
}
