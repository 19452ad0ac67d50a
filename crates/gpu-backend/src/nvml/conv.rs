//! Conversions between NVML's own values (return codes, enum numbers, C structs, nvml-wrapper's
//! types and errors) and this crate's types.
//!
//! Everything here is a pure function of its input, so all of it is unit tested without a GPU.

use std::os::raw::{c_char, c_uint};

use nvml_wrapper::enum_wrappers::device as wrapper;
use nvml_wrapper::enums::device::DeviceArchitecture;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper_sys::bindings as sys;

use crate::error::{nvml_codes, BackendError, Result};
use crate::types::{
    Architecture, Bar1MemoryInfo, Brand, ClockType, CodecUtilization, ComputeMode, DriverModel,
    EccCounter, EccErrorKind, MemoryInfo, PciInfo, PcieDirection, ProcessInfo,
    ProcessUtilizationSample, Utilization,
};

/// The value NVML writes into an unsigned 64-bit field it cannot fill
/// (`NVML_VALUE_NOT_AVAILABLE`, which is `-1` cast to `unsigned long long`).
pub const VALUE_NOT_AVAILABLE_U64: u64 = u64::MAX;

/// The id NVML writes into a process's GPU-instance or compute-instance field when the process
/// does not run inside a MIG instance (`0xFFFFFFFF`).
pub const INSTANCE_ID_NONE: u32 = u32::MAX;

/// The error for one of nvml-wrapper's errors.
///
/// Errors that stand for an NVML return code map to the matching [`BackendError`]; codes without
/// a variant of their own keep their number in [`BackendError::Unknown`]. A library that could
/// not be loaded is [`BackendError::LibraryNotFound`], a missing symbol is
/// [`BackendError::FunctionNotFound`], and failures of the wrapper itself (text that is not
/// UTF-8, bits it cannot interpret) become [`BackendError::Other`] with the wrapper's message.
///
/// `UnexpectedVariant` is ambiguous in nvml-wrapper: it carries either a return code the wrapper
/// does not name or an enum value it does not know. The backend only calls wrapper functions
/// whose results contain no enums, so here it is always a return code and keeps its number.
#[allow(deprecated)]
pub fn error_from_wrapper(error: NvmlError) -> BackendError {
    use nvml_codes as c;
    match error {
        NvmlError::Uninitialized => BackendError::Uninitialized,
        NvmlError::InvalidArg => BackendError::InvalidArgument,
        NvmlError::NotSupported => BackendError::NotSupported,
        NvmlError::NoPermission => BackendError::NoPermission,
        NvmlError::AlreadyInitialized => BackendError::Unknown(c::ALREADY_INITIALIZED),
        NvmlError::NotFound => BackendError::NotFound,
        NvmlError::InsufficientSize(_) => BackendError::InsufficientSize,
        NvmlError::InsufficientPower => BackendError::Unknown(c::INSUFFICIENT_POWER),
        NvmlError::DriverNotLoaded => BackendError::DriverNotLoaded,
        NvmlError::Timeout => BackendError::Timeout,
        NvmlError::IrqIssue => BackendError::Unknown(c::IRQ_ISSUE),
        NvmlError::LibraryNotFound => BackendError::LibraryNotFound,
        NvmlError::FunctionNotFound => BackendError::FunctionNotFound,
        NvmlError::CorruptedInfoROM => BackendError::Unknown(c::CORRUPTED_INFOROM),
        NvmlError::GpuLost => BackendError::GpuLost,
        NvmlError::ResetRequired => BackendError::Unknown(c::RESET_REQUIRED),
        NvmlError::OperatingSystem => BackendError::Unknown(c::OPERATING_SYSTEM),
        NvmlError::LibRmVersionMismatch => BackendError::Unknown(c::LIB_RM_VERSION_MISMATCH),
        NvmlError::InUse => BackendError::Unknown(c::IN_USE),
        NvmlError::InsufficientMemory => BackendError::Unknown(c::MEMORY),
        NvmlError::NoData => BackendError::NoData,
        NvmlError::VgpuEccNotSupported => {
            error_from_return(sys::nvmlReturn_enum_NVML_ERROR_VGPU_ECC_NOT_SUPPORTED)
        }
        NvmlError::Unknown => BackendError::Unknown(c::UNKNOWN),
        NvmlError::UnexpectedVariant(code) => error_from_return(code),
        NvmlError::LibloadingError(_) => BackendError::LibraryNotFound,
        NvmlError::FailedToLoadSymbol(_) => BackendError::FunctionNotFound,
        other @ (NvmlError::Utf8Error(_)
        | NvmlError::NulError(_)
        | NvmlError::StringTooLong { .. }
        | NvmlError::IncorrectBits(_)
        | NvmlError::SetReleaseFailed
        | NvmlError::GetPciInfoFailed
        | NvmlError::PciInfoToCFailed) => BackendError::Other(other.to_string()),
    }
}

/// The error for an NVML return code (`nvmlReturn_t`). Only call this for failures: success maps
/// to `Unknown(0)`.
pub fn error_from_return(code: sys::nvmlReturn_t) -> BackendError {
    match i32::try_from(code) {
        Ok(code) => BackendError::from_nvml_code(code),
        Err(_) => BackendError::Other(format!("NVML returned the out-of-range code {code}")),
    }
}

/// `Ok(())` for `NVML_SUCCESS`, the matching error for any other return code.
pub fn check(code: sys::nvmlReturn_t) -> Result<()> {
    if code == sys::nvmlReturn_enum_NVML_SUCCESS {
        Ok(())
    } else {
        Err(error_from_return(code))
    }
}

/// Calls `make`, an NVML entry point that makes a new object through an out-pointer (an event
/// set, a GPM sample), logged under `nvml`. A null object with success is an error saying
/// `null_object`.
pub fn make_object<T>(
    nvml: &'static str,
    null_object: &str,
    make: impl FnOnce(*mut *mut T) -> sys::nvmlReturn_t,
) -> Result<*mut T> {
    let mut object: *mut T = std::ptr::null_mut();
    crate::cost::logged(nvml, None, || check(make(&mut object)))?;
    if object.is_null() {
        return Err(BackendError::Other(null_object.into()));
    }
    Ok(object)
}

/// The function pointer of a symbol that nvml-wrapper-sys looked up when it loaded the library,
/// or [`BackendError::FunctionNotFound`] when the library lacks it.
pub fn symbol<F: Copy, E>(looked_up: &std::result::Result<F, E>) -> Result<F> {
    looked_up
        .as_ref()
        .copied()
        .map_err(|_| BackendError::FunctionNotFound)
}

/// `call` with the first of `versions` (newest first) that the library has: one whose symbol it
/// lacks, or whose call answers `NVML_ERROR_FUNCTION_NOT_FOUND` (what a stand-in library answers
/// for a function the recorded driver lacked), passes to the next; any other answer is final.
/// [`BackendError::FunctionNotFound`] when none is there.
pub fn first_found<F: Copy, E, T>(
    versions: &[&std::result::Result<F, E>],
    mut call: impl FnMut(F) -> Result<T>,
) -> Result<T> {
    for looked_up in versions {
        match symbol(looked_up).and_then(&mut call) {
            Err(BackendError::FunctionNotFound) => continue,
            answer => return answer,
        }
    }
    Err(BackendError::FunctionNotFound)
}

/// The text in a C character buffer that NVML filled: everything before the first NUL, or the
/// whole buffer when NVML left no NUL in it. Text that is not UTF-8 is
/// [`BackendError::Other`].
pub fn string_from_c(buffer: &[c_char]) -> Result<String> {
    // `c_char` is `i8` or `u8` depending on the platform; either way each element is one byte.
    let bytes: Vec<u8> = buffer
        .iter()
        .map(|&c| c as u8)
        .take_while(|&b| b != 0)
        .collect();
    String::from_utf8(bytes)
        .map_err(|e| BackendError::Other(format!("NVML returned text that is not UTF-8: {e}")))
}

/// An `nvmlEnableState_t` (or MIG mode) as a bool: `0` is off, `1` is on, anything else is an
/// answer NVML does not give and is reported as [`BackendError::Other`].
pub fn enable_state(value: c_uint) -> Result<bool> {
    match value {
        0 => Ok(false),
        1 => Ok(true),
        other => Err(BackendError::Other(format!(
            "NVML returned the unknown enable state {other}"
        ))),
    }
}

/// Our compute mode for an `nvmlComputeMode_t` ([`ComputeMode::from_nvml`]).
pub fn compute_mode_from_nvml(value: sys::nvmlComputeMode_t) -> Result<ComputeMode> {
    ComputeMode::from_nvml(value).ok_or_else(|| {
        BackendError::Other(format!("NVML returned the unknown compute mode {value}"))
    })
}

/// Our driver model for an `nvmlDriverModel_t` ([`DriverModel::from_nvml`]).
pub fn driver_model_from_nvml(value: sys::nvmlDriverModel_t) -> Result<DriverModel> {
    DriverModel::from_nvml(value).ok_or_else(|| {
        BackendError::Other(format!("NVML returned the unknown driver model {value}"))
    })
}

/// Our architecture for nvml-wrapper's, through NVML's numeric code. nvml-wrapper folds every
/// code it does not know into one `Unknown`, so that becomes NVML's own "unknown" code
/// (`0xFFFFFFFF`); the backend reads the raw code instead to keep newer codes.
pub fn architecture_from_wrapper(arch: &DeviceArchitecture) -> Architecture {
    Architecture::from_nvml(arch.as_c())
}

/// Our brand for nvml-wrapper's, through NVML's numeric code.
pub fn brand_from_wrapper(brand: &wrapper::Brand) -> Brand {
    Brand::from_nvml(brand.as_c())
}

/// nvml-wrapper's clock domain for ours.
pub fn clock_to_wrapper(clock: ClockType) -> wrapper::Clock {
    match clock {
        ClockType::Graphics => wrapper::Clock::Graphics,
        ClockType::Sm => wrapper::Clock::SM,
        ClockType::Memory => wrapper::Clock::Memory,
        ClockType::Video => wrapper::Clock::Video,
    }
}

/// nvml-wrapper's PCIe counter for our direction.
pub fn pcie_to_wrapper(direction: PcieDirection) -> wrapper::PcieUtilCounter {
    match direction {
        PcieDirection::Tx => wrapper::PcieUtilCounter::Send,
        PcieDirection::Rx => wrapper::PcieUtilCounter::Receive,
    }
}

/// nvml-wrapper's memory-error type for our ECC error kind.
pub fn ecc_kind_to_wrapper(kind: EccErrorKind) -> wrapper::MemoryError {
    match kind {
        EccErrorKind::Corrected => wrapper::MemoryError::Corrected,
        EccErrorKind::Uncorrected => wrapper::MemoryError::Uncorrected,
    }
}

/// nvml-wrapper's ECC counter for ours.
pub fn ecc_counter_to_wrapper(counter: EccCounter) -> wrapper::EccCounter {
    match counter {
        EccCounter::Volatile => wrapper::EccCounter::Volatile,
        EccCounter::Aggregate => wrapper::EccCounter::Aggregate,
    }
}

/// Our memory info for an `nvmlMemory_v2_t`.
pub fn memory_from_v2(memory: &sys::nvmlMemory_v2_t) -> MemoryInfo {
    MemoryInfo {
        total: memory.total,
        free: memory.free,
        used: memory.used,
        reserved: Some(memory.reserved),
    }
}

/// Our memory info for an `nvmlMemory_t` (v1, which has no `reserved`).
pub fn memory_from_v1(memory: &sys::nvmlMemory_t) -> MemoryInfo {
    MemoryInfo {
        total: memory.total,
        free: memory.free,
        used: memory.used,
        reserved: None,
    }
}

/// Our BAR1 memory info for nvml-wrapper's.
pub fn bar1_from_wrapper(
    info: &nvml_wrapper::struct_wrappers::device::BAR1MemoryInfo,
) -> Bar1MemoryInfo {
    Bar1MemoryInfo {
        total: info.total,
        free: info.free,
        used: info.used,
    }
}

/// Our utilization for nvml-wrapper's.
pub fn utilization_from_wrapper(
    util: &nvml_wrapper::struct_wrappers::device::Utilization,
) -> Utilization {
    Utilization {
        gpu: util.gpu,
        memory: util.memory,
    }
}

/// Our encoder or decoder utilization for nvml-wrapper's.
pub fn codec_from_wrapper(
    util: &nvml_wrapper::structs::device::UtilizationInfo,
) -> CodecUtilization {
    CodecUtilization {
        utilization: util.utilization,
        sampling_period_us: util.sampling_period,
    }
}

/// Our PCI info for an `nvmlPciInfo_t`. The bus id is the v2/v3 `busId` field, or the legacy
/// 16-character field when a v1 call left `busId` empty.
pub fn pci_from_nvml(pci: &sys::nvmlPciInfo_t) -> Result<PciInfo> {
    let mut bus_id = string_from_c(&pci.busId)?;
    if bus_id.is_empty() {
        bus_id = string_from_c(&pci.busIdLegacy)?;
    }
    Ok(PciInfo {
        bus_id,
        domain: pci.domain,
        bus: pci.bus,
        device: pci.device,
        pci_device_id: pci.pciDeviceId,
        pci_subsystem_id: pci.pciSubSystemId,
    })
}

/// GPU memory of a process: `None` for `NVML_VALUE_NOT_AVAILABLE`.
pub fn used_memory(value: u64) -> Option<u64> {
    (value != VALUE_NOT_AVAILABLE_U64).then_some(value)
}

/// A GPU- or compute-instance id: `None` for `0xFFFFFFFF` (not in a MIG instance).
pub fn instance_id(value: u32) -> Option<u32> {
    (value != INSTANCE_ID_NONE).then_some(value)
}

/// Our process info for an `nvmlProcessInfo_v2_t`, the struct both the `_v2` and `_v3`
/// process-list calls fill.
pub fn process_from_v2(info: &sys::nvmlProcessInfo_v2_t) -> ProcessInfo {
    ProcessInfo {
        pid: info.pid,
        used_gpu_memory: used_memory(info.usedGpuMemory),
        gpu_instance_id: instance_id(info.gpuInstanceId),
        compute_instance_id: instance_id(info.computeInstanceId),
    }
}

/// Our process info for an `nvmlProcessInfo_v1_t`, which has no instance ids.
pub fn process_from_v1(info: &sys::nvmlProcessInfo_v1_t) -> ProcessInfo {
    ProcessInfo {
        pid: info.pid,
        used_gpu_memory: used_memory(info.usedGpuMemory),
        gpu_instance_id: None,
        compute_instance_id: None,
    }
}

/// Our utilization sample for an `nvmlProcessUtilizationSample_t`.
pub fn process_sample_from_nvml(
    sample: &sys::nvmlProcessUtilizationSample_t,
) -> ProcessUtilizationSample {
    ProcessUtilizationSample {
        pid: sample.pid,
        timestamp_us: sample.timeStamp,
        sm: sample.smUtil,
        memory: sample.memUtil,
        encoder: sample.encUtil,
        decoder: sample.decUtil,
    }
}

/// The value of one entry that `nvmlDeviceGetFieldValues` filled, as an unsigned 64-bit number.
///
/// The entry's own return code comes first: a failed entry is its error. Otherwise the union is
/// read as the member its `valueType` names; negative, out-of-range and non-finite values
/// are [`BackendError::Other`].
pub fn field_value_u64(value: &sys::nvmlFieldValue_t) -> Result<u64> {
    check(value.nvmlReturn)?;
    let out_of_range = |shown: String| {
        BackendError::Other(format!(
            "NVML field {} (scope {}) has the value {shown}, which is not a counter",
            value.fieldId, value.scopeId
        ))
    };
    // SAFETY: `nvmlValue_t` is a C union of plain integers and a double. Every member is valid
    // for any bit pattern, and the struct was zero-initialised before NVML wrote into it, so
    // reading any member is defined; `valueType` says which one NVML meant.
    unsafe {
        match value.valueType {
            sys::nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_INT => {
                Ok(u64::from(value.value.uiVal))
            }
            #[allow(clippy::useless_conversion)]
            sys::nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG => {
                Ok(u64::from(value.value.ulVal))
            }
            sys::nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG_LONG => Ok(value.value.ullVal),
            sys::nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_SHORT => {
                Ok(u64::from(value.value.usVal))
            }
            sys::nvmlValueType_enum_NVML_VALUE_TYPE_SIGNED_LONG_LONG => {
                let v = value.value.sllVal;
                u64::try_from(v).map_err(|_| out_of_range(v.to_string()))
            }
            sys::nvmlValueType_enum_NVML_VALUE_TYPE_SIGNED_INT => {
                let v = value.value.siVal;
                u64::try_from(v).map_err(|_| out_of_range(v.to_string()))
            }
            sys::nvmlValueType_enum_NVML_VALUE_TYPE_DOUBLE => {
                let v = value.value.dVal;
                // 2^64 as a double; anything at or above it does not fit.
                if (0.0..18_446_744_073_709_551_616.0).contains(&v) {
                    Ok(v as u64)
                } else {
                    Err(out_of_range(v.to_string()))
                }
            }
            other => Err(BackendError::Other(format!(
                "NVML field {} has the unknown value type {other}",
                value.fieldId
            ))),
        }
    }
}

/// A field value NVML answered, as a signed number (a temperature against T.Limit may be
/// below zero); its own return code is its error.
pub fn field_value_i64(value: &sys::nvmlFieldValue_t) -> Result<i64> {
    check(value.nvmlReturn)?;
    let out_of_range = |shown: String| {
        BackendError::Other(format!(
            "NVML field {} has the value {shown}, which is out of range",
            value.fieldId
        ))
    };
    // SAFETY: as in `field_value_u64`: a union of plain numbers, zeroed before NVML wrote it.
    unsafe {
        match value.valueType {
            sys::nvmlValueType_enum_NVML_VALUE_TYPE_SIGNED_INT => Ok(i64::from(value.value.siVal)),
            sys::nvmlValueType_enum_NVML_VALUE_TYPE_SIGNED_LONG_LONG => Ok(value.value.sllVal),
            sys::nvmlValueType_enum_NVML_VALUE_TYPE_DOUBLE => {
                let v = value.value.dVal;
                if v.is_finite() && v.abs() < 9.0e15 {
                    Ok(v as i64)
                } else {
                    Err(out_of_range(v.to_string()))
                }
            }
            _ => {
                let v = field_value_u64(value)?;
                i64::try_from(v).map_err(|_| out_of_range(v.to_string()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::TemperatureThreshold;

    #[test]
    fn every_return_code_error_maps_to_its_variant() {
        let cases = [
            (NvmlError::Uninitialized, BackendError::Uninitialized),
            (NvmlError::InvalidArg, BackendError::InvalidArgument),
            (NvmlError::NotSupported, BackendError::NotSupported),
            (NvmlError::NoPermission, BackendError::NoPermission),
            (NvmlError::NotFound, BackendError::NotFound),
            (
                NvmlError::InsufficientSize(Some(4)),
                BackendError::InsufficientSize,
            ),
            (
                NvmlError::InsufficientSize(None),
                BackendError::InsufficientSize,
            ),
            (NvmlError::DriverNotLoaded, BackendError::DriverNotLoaded),
            (NvmlError::Timeout, BackendError::Timeout),
            (NvmlError::LibraryNotFound, BackendError::LibraryNotFound),
            (NvmlError::FunctionNotFound, BackendError::FunctionNotFound),
            (NvmlError::GpuLost, BackendError::GpuLost),
            (NvmlError::Unknown, BackendError::Unknown(999)),
            (NvmlError::InsufficientPower, BackendError::Unknown(8)),
            (NvmlError::IrqIssue, BackendError::Unknown(11)),
            (NvmlError::CorruptedInfoROM, BackendError::Unknown(14)),
            (NvmlError::ResetRequired, BackendError::Unknown(16)),
            (NvmlError::OperatingSystem, BackendError::Unknown(17)),
            (NvmlError::LibRmVersionMismatch, BackendError::Unknown(18)),
            (NvmlError::InUse, BackendError::Unknown(19)),
            (NvmlError::InsufficientMemory, BackendError::Unknown(20)),
            (NvmlError::NoData, BackendError::NoData),
            (NvmlError::VgpuEccNotSupported, BackendError::Unknown(22)),
            (NvmlError::UnexpectedVariant(25), BackendError::Unknown(25)),
            (NvmlError::UnexpectedVariant(3), BackendError::NotSupported),
        ];
        for (wrapper_error, expected) in cases {
            let shown = format!("{wrapper_error:?}");
            assert_eq!(error_from_wrapper(wrapper_error), expected, "{shown}");
        }
    }

    #[test]
    #[allow(deprecated)]
    fn already_initialized_keeps_its_code() {
        assert_eq!(
            error_from_wrapper(NvmlError::AlreadyInitialized),
            BackendError::Unknown(5)
        );
    }

    #[test]
    fn wrapper_return_codes_agree_with_ours() {
        // nvml-wrapper's own code-to-error mapping followed by ours must equal ours directly.
        for code in 0..=30u32 {
            let via_wrapper = error_from_wrapper(NvmlError::from(code));
            if code == 0 {
                continue;
            }
            assert_eq!(via_wrapper, error_from_return(code), "code {code}");
        }
        assert_eq!(
            error_from_wrapper(NvmlError::from(999)),
            BackendError::Unknown(999)
        );
    }

    #[test]
    fn wrapper_failures_become_other_with_text() {
        let bytes = std::hint::black_box(vec![0xff_u8, 0xfe]);
        let err = std::str::from_utf8(&bytes).unwrap_err();
        match error_from_wrapper(NvmlError::Utf8Error(err)) {
            BackendError::Other(text) => assert!(text.contains("utf-8"), "{text}"),
            other => panic!("expected Other, got {other:?}"),
        }
        assert!(matches!(
            error_from_wrapper(NvmlError::StringTooLong {
                max_len: 1,
                actual_len: 2
            }),
            BackendError::Other(_)
        ));
        assert_eq!(
            error_from_wrapper(NvmlError::FailedToLoadSymbol("nvmlFoo".into())),
            BackendError::FunctionNotFound
        );
    }

    #[test]
    fn return_codes_map_through_the_crate_table() {
        assert_eq!(check(0), Ok(()));
        assert_eq!(check(3), Err(BackendError::NotSupported));
        assert_eq!(check(13), Err(BackendError::FunctionNotFound));
        assert_eq!(check(15), Err(BackendError::GpuLost));
        assert_eq!(check(7), Err(BackendError::InsufficientSize));
        assert_eq!(check(999), Err(BackendError::Unknown(999)));
        assert!(matches!(check(u32::MAX), Err(BackendError::Other(_))));
    }

    #[test]
    fn missing_symbols_are_function_not_found() {
        let missing: std::result::Result<fn() -> u32, String> = Err("no such symbol".into());
        assert_eq!(symbol(&missing).err(), Some(BackendError::FunctionNotFound));
        fn seven() -> u32 {
            7
        }
        let present: std::result::Result<fn() -> u32, String> = Ok(seven);
        assert_eq!(symbol(&present).map(|f| f()), Ok(7));
    }

    #[test]
    fn the_first_version_there_answers_and_a_not_found_answer_passes_to_the_next() {
        let missing: std::result::Result<i32, ()> = Err(());
        let (answers_13, answers_3, answers_ok) = (Ok(13), Ok(3), Ok(0));
        let call = |code: i32| check(code as sys::nvmlReturn_t).map(|()| "answered");
        assert_eq!(
            first_found(&[&missing, &answers_13, &answers_ok], call),
            Ok("answered")
        );
        assert_eq!(
            first_found(&[&answers_3, &answers_ok], call),
            Err(BackendError::NotSupported),
            "any other answer is final"
        );
        assert_eq!(
            first_found(&[&missing, &answers_13], call),
            Err(BackendError::FunctionNotFound)
        );
    }

    fn c_buf(text: &[u8], len: usize) -> Vec<c_char> {
        let mut buf = vec![0 as c_char; len];
        for (slot, &b) in buf.iter_mut().zip(text) {
            *slot = b as c_char;
        }
        buf
    }

    #[test]
    fn c_strings_stop_at_nul_and_tolerate_a_missing_one() {
        assert_eq!(
            string_from_c(&c_buf(b"NVIDIA H100", 96)).as_deref(),
            Ok("NVIDIA H100")
        );
        assert_eq!(string_from_c(&c_buf(b"ABCD", 4)).as_deref(), Ok("ABCD"));
        assert_eq!(string_from_c(&c_buf(b"", 8)).as_deref(), Ok(""));
        assert!(matches!(
            string_from_c(&c_buf(&[0xc3, 0x28], 8)),
            Err(BackendError::Other(_))
        ));
    }

    #[test]
    fn enums_map_by_nvml_number() {
        assert_eq!(enable_state(0), Ok(false));
        assert_eq!(enable_state(1), Ok(true));
        assert!(enable_state(2).is_err());
        assert_eq!(compute_mode_from_nvml(0), Ok(ComputeMode::Default));
        assert_eq!(compute_mode_from_nvml(1), Ok(ComputeMode::ExclusiveThread));
        assert_eq!(compute_mode_from_nvml(2), Ok(ComputeMode::Prohibited));
        assert_eq!(compute_mode_from_nvml(3), Ok(ComputeMode::ExclusiveProcess));
        assert!(compute_mode_from_nvml(4).is_err());
        assert_eq!(driver_model_from_nvml(0), Ok(DriverModel::Wddm));
        assert_eq!(driver_model_from_nvml(1), Ok(DriverModel::Wdm));
        assert_eq!(driver_model_from_nvml(2), Ok(DriverModel::Mcdm));
        assert!(driver_model_from_nvml(3).is_err());
    }

    /// nvml-wrapper's enums are NVML's numbers under other names: each of ours maps to the
    /// wrapper's variant of the same number, the one the code table gives.
    #[test]
    fn wrapper_variants_have_the_code_tables_numbers() {
        for c in ClockType::ALL {
            assert_eq!(clock_to_wrapper(c).as_c(), c.nvml_code());
        }
        for (t, code) in [
            (
                TemperatureThreshold::Shutdown,
                sys::nvmlTemperatureThresholds_enum_NVML_TEMPERATURE_THRESHOLD_SHUTDOWN,
            ),
            (
                TemperatureThreshold::Slowdown,
                sys::nvmlTemperatureThresholds_enum_NVML_TEMPERATURE_THRESHOLD_SLOWDOWN,
            ),
            (
                TemperatureThreshold::MemoryMax,
                sys::nvmlTemperatureThresholds_enum_NVML_TEMPERATURE_THRESHOLD_MEM_MAX,
            ),
            (
                TemperatureThreshold::GpuMax,
                sys::nvmlTemperatureThresholds_enum_NVML_TEMPERATURE_THRESHOLD_GPU_MAX,
            ),
            (
                TemperatureThreshold::TargetMin,
                sys::nvmlTemperatureThresholds_enum_NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MIN,
            ),
            (
                TemperatureThreshold::Target,
                sys::nvmlTemperatureThresholds_enum_NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_CURR,
            ),
            (
                TemperatureThreshold::TargetMax,
                sys::nvmlTemperatureThresholds_enum_NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MAX,
            ),
        ] {
            assert_eq!(t.nvml_code(), code);
        }
        for d in [PcieDirection::Tx, PcieDirection::Rx] {
            assert_eq!(pcie_to_wrapper(d).as_c(), d.nvml_code());
        }
        for k in [EccErrorKind::Corrected, EccErrorKind::Uncorrected] {
            assert_eq!(ecc_kind_to_wrapper(k).as_c(), k.nvml_code());
        }
        for c in [EccCounter::Volatile, EccCounter::Aggregate] {
            assert_eq!(ecc_counter_to_wrapper(c).as_c(), c.nvml_code());
        }
        assert_eq!(
            sys::nvmlComputeMode_enum_NVML_COMPUTEMODE_EXCLUSIVE_PROCESS,
            ComputeMode::ExclusiveProcess.nvml_code()
        );
        assert_eq!(
            sys::nvmlDriverModel_enum_NVML_DRIVER_MCDM,
            DriverModel::Mcdm.nvml_code()
        );
    }

    #[test]
    fn wrapper_enums_map_by_nvml_number() {
        assert_eq!(
            architecture_from_wrapper(&DeviceArchitecture::Hopper),
            Architecture::Hopper
        );
        assert_eq!(
            architecture_from_wrapper(&DeviceArchitecture::Kepler),
            Architecture::Kepler
        );
        assert_eq!(
            architecture_from_wrapper(&DeviceArchitecture::Unknown),
            Architecture::Unknown(0xFFFF_FFFF)
        );
        assert_eq!(brand_from_wrapper(&wrapper::Brand::Tesla), Brand::Tesla);
        assert_eq!(
            brand_from_wrapper(&wrapper::Brand::GeForceRTX),
            Brand::GeForceRtx
        );
        assert_eq!(
            brand_from_wrapper(&wrapper::Brand::VWS),
            Brand::Other(sys::nvmlBrandType_enum_NVML_BRAND_NVIDIA_VWS)
        );
        assert_eq!(
            clock_to_wrapper(ClockType::Memory).as_c(),
            sys::nvmlClockType_enum_NVML_CLOCK_MEM
        );
        assert_eq!(
            clock_to_wrapper(ClockType::Sm).as_c(),
            sys::nvmlClockType_enum_NVML_CLOCK_SM
        );
        assert_eq!(
            pcie_to_wrapper(PcieDirection::Rx).as_c(),
            sys::nvmlPcieUtilCounter_enum_NVML_PCIE_UTIL_RX_BYTES
        );
        assert_eq!(
            ecc_kind_to_wrapper(EccErrorKind::Uncorrected).as_c(),
            sys::nvmlMemoryErrorType_enum_NVML_MEMORY_ERROR_TYPE_UNCORRECTED
        );
        assert_eq!(
            ecc_counter_to_wrapper(EccCounter::Aggregate).as_c(),
            sys::nvmlEccCounterType_enum_NVML_AGGREGATE_ECC
        );
    }

    #[test]
    fn process_structs_mark_unavailable_memory_and_instances() {
        let v2 = sys::nvmlProcessInfo_v2_t {
            pid: 42,
            usedGpuMemory: u64::MAX,
            gpuInstanceId: u32::MAX,
            computeInstanceId: u32::MAX,
        };
        assert_eq!(
            process_from_v2(&v2),
            ProcessInfo {
                pid: 42,
                used_gpu_memory: None,
                gpu_instance_id: None,
                compute_instance_id: None,
            }
        );
        let mig = sys::nvmlProcessInfo_v2_t {
            pid: 7,
            usedGpuMemory: 1 << 30,
            gpuInstanceId: 1,
            computeInstanceId: 0,
        };
        assert_eq!(
            process_from_v2(&mig),
            ProcessInfo {
                pid: 7,
                used_gpu_memory: Some(1 << 30),
                gpu_instance_id: Some(1),
                compute_instance_id: Some(0),
            }
        );
        let v1 = sys::nvmlProcessInfo_v1_t {
            pid: 9,
            usedGpuMemory: 123,
        };
        assert_eq!(
            process_from_v1(&v1),
            ProcessInfo {
                pid: 9,
                used_gpu_memory: Some(123),
                gpu_instance_id: None,
                compute_instance_id: None,
            }
        );
    }

    #[test]
    fn memory_structs_keep_reserved_only_from_v2() {
        let v2 = sys::nvmlMemory_v2_t {
            version: 0,
            total: 100,
            reserved: 5,
            free: 60,
            used: 35,
        };
        assert_eq!(
            memory_from_v2(&v2),
            MemoryInfo {
                total: 100,
                free: 60,
                used: 35,
                reserved: Some(5)
            }
        );
        let v1 = sys::nvmlMemory_t {
            total: 100,
            free: 60,
            used: 40,
        };
        assert_eq!(memory_from_v1(&v1).reserved, None);
    }

    fn pci(bus_id: &[u8], legacy: &[u8]) -> sys::nvmlPciInfo_t {
        let mut busid = [0 as c_char; 32];
        for (slot, &b) in busid.iter_mut().zip(bus_id) {
            *slot = b as c_char;
        }
        let mut busid_legacy = [0 as c_char; 16];
        for (slot, &b) in busid_legacy.iter_mut().zip(legacy) {
            *slot = b as c_char;
        }
        sys::nvmlPciInfo_t {
            busIdLegacy: busid_legacy,
            domain: 0,
            bus: 0x18,
            device: 0,
            pciDeviceId: 0x2330_10DE,
            pciSubSystemId: 0x16C1_10DE,
            busId: busid,
        }
    }

    #[test]
    fn pci_info_prefers_the_long_bus_id() {
        let info = pci_from_nvml(&pci(b"00000000:18:00.0", b"0000:18:00.0")).unwrap();
        assert_eq!(info.bus_id, "00000000:18:00.0");
        assert_eq!(info.bus, 0x18);
        assert_eq!(info.pci_device_id, 0x2330_10DE);
        let legacy = pci_from_nvml(&pci(b"", b"0000:18:00.0")).unwrap();
        assert_eq!(legacy.bus_id, "0000:18:00.0");
    }

    fn field(
        value_type: u32,
        ret: u32,
        set: impl FnOnce(&mut sys::nvmlValue_t),
    ) -> sys::nvmlFieldValue_t {
        // SAFETY: `nvmlFieldValue_t` is plain old data; all zeroes is a valid value.
        let mut f: sys::nvmlFieldValue_t = unsafe { std::mem::zeroed() };
        f.fieldId = 138;
        f.valueType = value_type;
        f.nvmlReturn = ret;
        set(&mut f.value);
        f
    }

    #[test]
    fn field_values_honour_their_type_and_return_code() {
        let ull = field(3, 0, |v| v.ullVal = 1 << 40);
        assert_eq!(field_value_u64(&ull), Ok(1 << 40));
        let ui = field(1, 0, |v| v.uiVal = 77);
        assert_eq!(field_value_u64(&ui), Ok(77));
        let neg = field(4, 0, |v| v.sllVal = -1);
        assert!(matches!(field_value_u64(&neg), Err(BackendError::Other(_))));
        let dbl = field(0, 0, |v| v.dVal = 12.0);
        assert_eq!(field_value_u64(&dbl), Ok(12));
        let nan = field(0, 0, |v| v.dVal = f64::NAN);
        assert!(field_value_u64(&nan).is_err());
        let failed = field(3, 3, |v| v.ullVal = 5);
        assert_eq!(field_value_u64(&failed), Err(BackendError::NotSupported));
        let unknown_type = field(42, 0, |_| {});
        assert!(matches!(
            field_value_u64(&unknown_type),
            Err(BackendError::Other(_))
        ));
    }

    #[test]
    fn process_samples_copy_every_field() {
        let s = sys::nvmlProcessUtilizationSample_t {
            pid: 5,
            timeStamp: 1_700_000_000_000_000,
            smUtil: 90,
            memUtil: 40,
            encUtil: 1,
            decUtil: 2,
        };
        assert_eq!(
            process_sample_from_nvml(&s),
            ProcessUtilizationSample {
                pid: 5,
                timestamp_us: 1_700_000_000_000_000,
                sm: 90,
                memory: 40,
                encoder: 1,
                decoder: 2,
            }
        );
    }
}
