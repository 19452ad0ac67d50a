//! Who a device is, in the one form every view of a device opens with.

use gpu_backend::DeviceId;
use serde::{Deserialize, Serialize};

use crate::snapshot::DeviceSnapshot;

/// Who a device is: its id, its physical GPU and MIG slot, its name, UUID and PCI bus id. The
/// CLI's JSON view of a device (`snapshot --json`) and a fleet's device (gpu-fleet, read from
/// an exporter's labels) both hold it, so the identity is declared, documented and built once.
/// What is not known (a fleet's device before its `gpuscope_device_info` series, a device that
/// cannot tell its UUID) is `None`.
///
/// A view holds it with `#[serde(flatten)]`: its keys open the view's JSON object, in the
/// order of the fields here.
///
/// ```
/// use gpu_devices::{DeviceId, DeviceIdentity};
///
/// let mut mig = DeviceIdentity::of_id(DeviceId::Mig { parent: 3, index: 1 });
/// assert_eq!((mig.id.as_str(), mig.index, mig.mig_index), ("3:1", 3, Some(1)));
/// mig.uuid = Some("MIG-5b1ca5a0".into());
/// assert_eq!(
///     serde_json::to_string(&mig).unwrap(),
///     r#"{"id":"3:1","index":3,"mig_index":1,"name":null,"uuid":"MIG-5b1ca5a0","bus_id":null}"#
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DeviceIdentity {
    /// `"3"` for GPU 3, `"3:1"` for its MIG slot 1.
    pub id: String,
    /// Index of the physical GPU.
    pub index: u32,
    /// MIG slot, for a MIG device.
    pub mig_index: Option<u32>,
    /// The product name.
    pub name: Option<String>,
    /// `GPU-...` or `MIG-...`.
    pub uuid: Option<String>,
    /// The PCI bus id (`00000000:17:00.0`).
    pub bus_id: Option<String>,
}

impl DeviceIdentity {
    /// What the id alone tells: the id's text, the physical GPU and the MIG slot; the name,
    /// UUID and bus id unknown.
    pub fn of_id(id: DeviceId) -> DeviceIdentity {
        DeviceIdentity {
            id: id.to_string(),
            index: id.physical_index(),
            mig_index: match id {
                DeviceId::Mig { index, .. } => Some(index),
                DeviceId::Gpu(_) => None,
            },
            name: None,
            uuid: None,
            bus_id: None,
        }
    }

    /// A snapshot's device: what its id tells, with the name, UUID and bus id it answered
    /// (`None` where the answer was N/A or failed).
    pub fn of(d: &DeviceSnapshot) -> DeviceIdentity {
        DeviceIdentity {
            name: d.name.value().cloned(),
            uuid: d.uuid.value().cloned(),
            bus_id: d.pci.value().map(|p| p.bus_id.clone()),
            ..DeviceIdentity::of_id(d.id)
        }
    }
}
