#!/usr/bin/env python3
"""Checks that pynvml (nvidia-ml-py), a real NVML client, reads a gpuscope fixture through the
fake libnvidia-ml.so.1 exactly as the fixture records it.

For every frame (stepped with the fake library's fakeNvmlSetFrame) and every device (physical
and MIG), it compares: device count, driver version, name, UUID, memory (v1 and v2), utilization,
temperature, power, compute/graphics processes, the health queries (memory temperature, fans'
target speeds, NVLink error counters, ECC counts per memory location, ...), what nvidia-smi
-q shows beyond the everyday answers that pynvml wraps (issue 34: addressing mode, inforom
objects, PDI, GSP firmware, JPEG/OFA utilization, encoder and FBC stats, T.Limit margin, the
row-remapper histogram, ...) and GPM metrics
(a sample per device per frame, measured against the previous frame's sample as a monitoring
client does), including recorded errors (which pynvml raises as NVMLError with the same code)
and functions the fixture lists as missing; and the
events: one event set registered at frame 0 for every device that records events, drained after
each frame, must deliver exactly the events that frame adds (device, type bit, XID code).

Usage (see crates/fake-nvml/README.md):

    cargo build -p fake-nvml
    cargo run -p fake-nvml --bin fake-nvml-install -- /tmp/fake-nvml-lib
    python3 -m venv /tmp/venv-nvml && /tmp/venv-nvml/bin/pip install nvidia-ml-py
    GPUSCOPE_FAKE_NVML_FIXTURE=fixture.json LD_LIBRARY_PATH=/tmp/fake-nvml-lib \\
        /tmp/venv-nvml/bin/python crates/fake-nvml/tests/pynvml_check.py

Exit status 0 when everything matches; 1 with a list of mismatches otherwise.
"""

import ctypes
import json
import os
import sys

import pynvml

ERROR_CODES = {
    "uninitialized": 1,
    "invalid_argument": 2,
    "not_supported": 3,
    "not_recorded": 3,
    "no_permission": 4,
    "not_found": 6,
    "insufficient_size": 7,
    "driver_not_loaded": 9,
    "timeout": 10,
    "library_not_found": 12,
    "function_not_found": 13,
    "gpu_lost": 15,
    "deprecated": 26,
    "no_data": 21,
}
# The "cannot tell" errors (gpu_backend's is_not_available): GPM support answers "no" for them.
NOT_AVAILABLE_ERRORS = {
    "not_supported", "no_permission", "function_not_found", "not_recorded", "deprecated",
}
NOT_AVAILABLE = 0xFFFFFFFFFFFFFFFF
NO_ID = 0xFFFFFFFF


def error_code(err):
    """The NVML code of a fixture error (`"not_supported"`, `{"unknown": 17}`, `{"other": ..}`)."""
    if isinstance(err, str):
        return ERROR_CODES[err]
    if "unknown" in err:
        return err["unknown"]
    return 999


class Checker:
    def __init__(self, fixture, client="pynvml"):
        self.fixture = fixture
        self.client = client
        self.missing = set(fixture["nvml_missing_functions"])
        self.checks = 0
        self.failures = []

    def answer(self, what, answer, call, convert=lambda v: v):
        """Compares what `call()` gives with a fixture answer ({"ok": v} or {"err": e})."""
        self.checks += 1
        try:
            got = ("ok", call())
        except pynvml.NVMLError as e:
            got = ("err", e.value)
        if "ok" in answer:
            want = ("ok", convert(answer["ok"]))
        else:
            want = ("err", error_code(answer["err"]))
        if got != want:
            self.failures.append(f"{what}: {self.client} gave {got!r}, the fixture says {want!r}")

    def equal(self, what, got, want):
        self.checks += 1
        if got != want:
            self.failures.append(f"{what}: {self.client} gave {got!r}, the fixture says {want!r}")


def text(v):
    return v.decode() if isinstance(v, bytes) else v


class ProcessInfoV1(ctypes.Structure):
    """nvmlProcessInfo_v1_t, of the unversioned calls (pynvml no longer wraps them)."""

    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong)]


def processes_v1(symbol, handle):
    """A process list from an unversioned (v1) call, with NVML's count protocol."""
    fn = getattr(pynvml.nvmlLib, symbol)
    count = ctypes.c_uint(0)
    ret = fn(handle, ctypes.byref(count), None)
    if ret == pynvml.NVML_SUCCESS:
        return []
    if ret != pynvml.NVML_ERROR_INSUFFICIENT_SIZE:
        raise pynvml.NVMLError(ret)
    count.value += 5
    infos = (ProcessInfoV1 * count.value)()
    ret = fn(handle, ctypes.byref(count), infos)
    if ret != pynvml.NVML_SUCCESS:
        raise pynvml.NVMLError(ret)
    return [
        (
            p.pid,
            None if p.usedGpuMemory == NOT_AVAILABLE else p.usedGpuMemory,
            NO_ID,
            NO_ID,
        )
        for p in infos[: count.value]
    ]


def processes(kind, handle, missing):
    """A process list as clients fetch it: _v3, then _v2, then v1 when the driver lacks the newer
    call (as nvitop, gpustat and gpuscope's NVML backend do)."""
    name = f"nvmlDeviceGet{kind}RunningProcesses"
    for version in ("_v3", "_v2"):
        try:
            procs = getattr(pynvml, name + version)(handle)
        except pynvml.NVMLError_FunctionNotFound:
            if name + version not in missing:
                raise
            continue
        return [(p.pid, p.usedGpuMemory, p.gpuInstanceId, p.computeInstanceId) for p in procs]
    return processes_v1(name, handle)


def want_processes(answer_list):
    return [
        (
            p["pid"],
            p["used_gpu_memory"],  # pynvml turns NVML_VALUE_NOT_AVAILABLE into None
            NO_ID if p["gpu_instance_id"] is None else p["gpu_instance_id"],
            NO_ID if p["compute_instance_id"] is None else p["compute_instance_id"],
        )
        for p in answer_list
    ]


def device_handles(fixture):
    """Handles of every device of the fixture: physical by index, MIG by slot under the parent."""
    handles = {}
    for key in fixture["devices"]:
        if ":" in key:
            parent, slot = (int(x) for x in key.split(":"))
            handles[key] = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(
                pynvml.nvmlDeviceGetHandleByIndex(parent), slot
            )
        else:
            handles[key] = pynvml.nvmlDeviceGetHandleByIndex(int(key))
    return handles


def check_system(c, fixture, handles):
    """The system answers and every device's name and UUID."""
    system = fixture["system"]
    c.answer("device count", system["device_count"], pynvml.nvmlDeviceGetCount)
    c.answer(
        "driver version",
        system["driver_version"],
        lambda: text(pynvml.nvmlSystemGetDriverVersion()),
    )
    c.answer(
        "CUDA driver version",
        system["cuda_driver_version"],
        pynvml.nvmlSystemGetCudaDriverVersion,
    )
    for key, st in fixture["devices"].items():
        h = handles[key]
        c.answer(f"device {key} name", st["name"], lambda: text(pynvml.nvmlDeviceGetName(h)))
        c.answer(f"device {key} uuid", st["uuid"], lambda: text(pynvml.nvmlDeviceGetUUID(h)))
        # Exported from the query table's row; a fixture recorded before it answers
        # not_recorded, which the library serves as NOT_SUPPORTED.
        c.answer(
            f"device {key} default power limit",
            st.get("power_management_default_limit", {"err": "not_recorded"}),
            lambda: pynvml.nvmlDeviceGetPowerManagementDefaultLimit(h),
        )
        check_health_static(c, key, st, h)
        check_config_static(c, key, st, h)
        check_details_static(c, key, st, h)


def recorded(answers, field):
    """A fixture answer, or the not-recorded error of a fixture written before the query."""
    return answers.get(field, {"err": "not_recorded"})


def answer_rows(c, where, answers, rows):
    """Checks each (label, field, call[, convert]) of `rows`: the recorded answer of `field`
    against what `call()` gives (see `Checker.answer`)."""
    for label, field, *call in rows:
        c.answer(f"{where} {label}", recorded(answers, field), *call)


def clock_event_reasons(c, h, which):
    """The clock event reasons (`which`: "Current" or "Supported") as a client reads them from
    this driver: through the older "throttle reasons" call where the driver lacks R535's name,
    which answers NVML_ERROR_FUNCTION_NOT_FOUND there (checked here too)."""
    if f"nvmlDeviceGet{which}ClocksEventReasons" in c.missing:
        c.answer(
            f"{which} clock event reasons under R535's name",
            {"err": "function_not_found"},
            lambda: getattr(pynvml, f"nvmlDeviceGet{which}ClocksEventReasons")(h),
        )
        return getattr(pynvml, f"nvmlDeviceGet{which}ClocksThrottleReasons")(h)
    return getattr(pynvml, f"nvmlDeviceGet{which}ClocksEventReasons")(h)


def check_health_static(c, key, st, h):
    """The health queries asked once: versions, bus width, thresholds, supported events."""
    answer_rows(c, f"device {key}", st, [
        ("inforom image version", "inforom_image_version",
         lambda: text(pynvml.nvmlDeviceGetInforomImageVersion(h))),
        ("memory bus width", "memory_bus_width", lambda: pynvml.nvmlDeviceGetMemoryBusWidth(h)),
        ("supported clock event reasons", "supported_clock_event_reasons",
         lambda: clock_event_reasons(c, h, "Supported")),
    ] + [
        (field, field, lambda t=threshold: pynvml.nvmlDeviceGetTemperatureThreshold(h, t))
        for field, threshold in [
            ("temperature_shutdown", pynvml.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN),
            ("temperature_slowdown", pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN),
            ("temperature_gpu_max", pynvml.NVML_TEMPERATURE_THRESHOLD_GPU_MAX),
            ("temperature_memory_max", pynvml.NVML_TEMPERATURE_THRESHOLD_MEM_MAX),
        ]
    ])


PCIE_SPEED_CODES = {2500: 1, 5000: 2, 8000: 3, 16000: 4, 32000: 5, 64000: 6}
VIRTUALIZATION_CODES = {"none": 0, "pass_through": 1, "vgpu": 2, "host_vgpu": 3, "host_vsga": 4}
GOM_CODES = {"all_on": 0, "compute": 1, "low_double_precision": 2}


def enum_code(names):
    """NVML's number of a fixture enum: a known name, or `{"other": N}`."""
    return lambda v: names[v] if isinstance(v, str) else v["other"]


def check_config_static(c, key, st, h):
    """The configuration queries asked once: applications clocks, cores, PCIe max speed, board,
    virtualization, accounting and operation modes."""
    where = f"device {key}"
    for field, fn in [
        ("applications_clocks", pynvml.nvmlDeviceGetApplicationsClock),
        ("default_applications_clocks", pynvml.nvmlDeviceGetDefaultApplicationsClock),
    ]:
        clocks = st.get(field, {})
        for name, clock in [
            ("graphics", pynvml.NVML_CLOCK_GRAPHICS),
            ("sm", pynvml.NVML_CLOCK_SM),
            ("memory", pynvml.NVML_CLOCK_MEM),
            ("video", pynvml.NVML_CLOCK_VIDEO),
        ]:
            c.answer(f"{where} {field}.{name}", recorded(clocks, name), lambda: fn(h, clock))
    c.answer(
        f"{where} PCIe link max speed",
        recorded(st, "pcie_link_max_speed"),
        lambda: pynvml.nvmlDeviceGetPcieLinkMaxSpeed(h),
        lambda mbps: PCIE_SPEED_CODES[mbps],
    )
    c.answer(
        f"{where} GPU cores",
        recorded(st, "num_gpu_cores"),
        lambda: pynvml.nvmlDeviceGetNumGpuCores(h),
    )
    c.answer(f"{where} board id", recorded(st, "board_id"), lambda: pynvml.nvmlDeviceGetBoardId(h))
    c.answer(
        f"{where} multi-GPU board",
        recorded(st, "multi_gpu_board"),
        lambda: pynvml.nvmlDeviceGetMultiGpuBoard(h),
        int,
    )
    c.answer(
        f"{where} virtualization mode",
        recorded(st, "virtualization_mode"),
        lambda: pynvml.nvmlDeviceGetVirtualizationMode(h),
        enum_code(VIRTUALIZATION_CODES),
    )
    c.answer(
        f"{where} accounting mode",
        recorded(st, "accounting_mode"),
        lambda: pynvml.nvmlDeviceGetAccountingMode(h),
        int,
    )
    c.answer(
        f"{where} GPU operation mode",
        recorded(st, "gpu_operation_mode"),
        lambda: list(pynvml.nvmlDeviceGetGpuOperationMode(h)),
        lambda m: [enum_code(GOM_CODES)(m["current"]), enum_code(GOM_CODES)(m["pending"])],
    )


ADDRESSING_MODE_CODES = {"none": 0, "hmm": 1, "ats": 2}


def check_details_static(c, key, st, h):
    """Issue 34's static rows (what nvidia-smi -q shows beyond the everyday answers) that pynvml
    wraps: addressing mode, accounting buffer, inforom objects, PDI, GSP firmware, the GPU's own
    PCIe maximum."""
    answer_rows(c, f"device {key}", st, [
        ("addressing mode", "addressing_mode", lambda: pynvml.nvmlDeviceGetAddressingMode(h),
         enum_code(ADDRESSING_MODE_CODES)),
        ("accounting buffer size", "accounting_buffer_size",
         lambda: pynvml.nvmlDeviceGetAccountingBufferSize(h)),
        ("inforom OEM object", "inforom_oem_version",
         lambda: text(pynvml.nvmlDeviceGetInforomVersion(h, pynvml.NVML_INFOROM_OEM))),
        ("inforom ECC object", "inforom_ecc_version",
         lambda: text(pynvml.nvmlDeviceGetInforomVersion(h, pynvml.NVML_INFOROM_ECC))),
        ("inforom power object", "inforom_power_version",
         lambda: text(pynvml.nvmlDeviceGetInforomVersion(h, pynvml.NVML_INFOROM_POWER))),
        ("PDI", "pdi", lambda: pynvml.nvmlDeviceGetPdi(h)),
        ("GSP firmware version", "gsp_firmware_version",
         lambda: text(pynvml.nvmlDeviceGetGspFirmwareVersion(h))),
        ("GSP firmware mode", "gsp_firmware_mode",
         lambda: [bool(v) for v in pynvml.nvmlDeviceGetGspFirmwareMode(h)],
         lambda m: [m["current"], m["default"]]),
        ("GPU max PCIe generation", "gpu_max_pcie_link_generation",
         lambda: pynvml.nvmlDeviceGetGpuMaxPcieLinkGeneration(h)),
    ])


def check_details_frame(c, where, dy, h):
    """Issue 34's changing rows that pynvml wraps: JPEG and OFA utilization, encoder and FBC
    sessions, the T.Limit margin, the row-remapper histogram."""
    answer_rows(c, where, dy, [
        ("JPEG utilization", "jpeg_utilization", lambda: pynvml.nvmlDeviceGetJpgUtilization(h),
         lambda u: [u["utilization"], u["sampling_period_us"]]),
        ("OFA utilization", "ofa_utilization", lambda: pynvml.nvmlDeviceGetOfaUtilization(h),
         lambda u: [u["utilization"], u["sampling_period_us"]]),
        ("encoder stats", "encoder_stats", lambda: pynvml.nvmlDeviceGetEncoderStats(h),
         lambda s: (s["sessions"], s["average_fps"], s["average_latency_us"])),
        ("FBC stats", "fbc_stats",
         lambda: (lambda s: (s.sessionsCount, s.averageFPS, s.averageLatency))(
             pynvml.nvmlDeviceGetFBCStats(h)),
         lambda s: (s["sessions"], s["average_fps"], s["average_latency_us"])),
        ("margin temperature", "margin_temperature",
         lambda: pynvml.nvmlDeviceGetMarginTemperature(h)),
        ("row remapper histogram", "row_remapper_histogram",
         lambda: (lambda v: (v.max, v.high, v.partial, v.low, v.none))(
             pynvml.nvmlDeviceGetRowRemapperHistogram(h)),
         lambda v: (v["max"], v["high"], v["partial"], v["low"], v["none"])),
    ])


def check_health_frame(c, where, dy, h):
    """The health queries asked at every frame: replays, retired pages, remapped rows, events."""
    answer_rows(c, where, dy, [
        ("PCIe replay counter", "pcie_replay_counter",
         lambda: pynvml.nvmlDeviceGetPcieReplayCounter(h)),
    ] + [
        (field, field, lambda cause=cause: list(pynvml.nvmlDeviceGetRetiredPages(h, cause)))
        for field, cause in [
            ("retired_pages_single_bit",
             pynvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS),
            ("retired_pages_double_bit", pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR),
        ]
    ] + [
        ("retired pages pending", "retired_pages_pending",
         lambda: bool(pynvml.nvmlDeviceGetRetiredPagesPendingStatus(h))),
        ("remapped rows", "remapped_rows",
         lambda: (lambda r: (r[0], r[1], bool(r[2]), bool(r[3])))(pynvml.nvmlDeviceGetRemappedRows(h)),
         lambda r: (r["correctable"], r["uncorrectable"], r["pending"], r["failure"])),
        ("clock event reasons", "clock_event_reasons",
         lambda: clock_event_reasons(c, h, "Current")),
    ])


# The GPM metrics of gpuscope's fixtures: field name -> NVML_GPM_METRIC_* id.
GPM_METRICS = {
    "graphics_activity": 1, "sm_activity": 2, "sm_occupancy": 3, "integer_activity": 4,
    "tensor_activity": 5, "tensor_dfma_activity": 6, "tensor_hmma_activity": 7,
    "tensor_imma_activity": 9, "dram_activity": 10, "fp64_activity": 11, "fp32_activity": 12,
    "fp16_activity": 13, "pcie_tx": 20, "pcie_rx": 21,
    **{f"nvdec{i}_activity": 30 + i for i in range(8)},
    **{f"nvjpg{i}_activity": 40 + i for i in range(8)},
    "nvofa0_activity": 50, "nvofa1_activity": 51, "nvlink_rx": 60, "nvlink_tx": 61,
}
MEMORY_LOCATIONS = [
    ("ecc_l1_cache", 0), ("ecc_l2_cache", 1), ("ecc_device_memory", 2),
    ("ecc_register_file", 3), ("ecc_texture_memory", 4), ("ecc_texture_shm", 5),
    ("ecc_cbu", 6), ("ecc_sram", 7),
]
NVLINK_MAX_LINKS = 18


def link_answer(answers, link):
    """The answer of one link in a trimmed per-link list (see docs/fixture-format.md)."""
    if link < len(answers):
        return answers[link]
    if answers:
        return answers[-1]
    return {"err": "not_supported"}


def field_value(h, field_id):
    """One field of nvmlDeviceGetFieldValues; its own return code raised as NVMLError."""
    v = pynvml.nvmlDeviceGetFieldValues(h, [field_id])[0]
    if v.nvmlReturn != pynvml.NVML_SUCCESS:
        raise pynvml.NVMLError(v.nvmlReturn)
    return v.value.ullVal


def check_more_health(c, where, st, dy, h):
    """Issue 13's remaining health queries: memory temperature, fans' target speeds, NVLink
    error counters per link, ECC counts per memory location."""
    c.answer(
        f"{where} memory temperature",
        recorded(dy, "memory_temperature"),
        lambda: field_value(h, pynvml.NVML_FI_DEV_MEMORY_TEMP),
    )
    fans = st["num_fans"]["ok"] if "ok" in st["num_fans"] else 0
    targets = dy.get("fan_target_speeds") or [{"err": "not_recorded"}] * fans
    for fan, answer in enumerate(targets):
        c.answer(
            f"{where} fan {fan} target speed",
            answer,
            lambda: pynvml.nvmlDeviceGetTargetFanSpeed(h, fan),
        )
    links = dy.get("nvlink_error_counters", [{"err": "not_recorded"}])
    for link in range(min(len(links) + 1, NVLINK_MAX_LINKS)):
        answer = link_answer(links, link)
        for counter, name in enumerate(["replay", "recovery", "crc_flit", "crc_data"]):
            c.answer(
                f"{where} NVLink {link} {name} errors",
                answer,
                lambda: pynvml.nvmlDeviceGetNvLinkErrorCounter(h, link, counter),
                lambda v: v[name],
            )
    for field, location in MEMORY_LOCATIONS:
        answer = recorded(dy, field)
        for error_type, kind in [(0, "corrected"), (1, "uncorrected")]:
            for counter_type, counter in [(0, "volatile"), (1, "aggregate")]:
                key = f"{counter}_{kind}"
                if "ok" in answer and answer["ok"][key] is None:
                    want = {"err": "not_supported"}
                elif "ok" in answer:
                    want = {"ok": answer["ok"][key]}
                else:
                    want = answer
                c.answer(
                    f"{where} {field} {key}",
                    want,
                    lambda: pynvml.nvmlDeviceGetMemoryErrorCounter(
                        h, error_type, counter_type, location
                    ),
                )


class Gpm:
    """GPM as a monitoring client reads it: one sample per device per frame, measured against
    the device's sample of the previous frame (the first frame against itself)."""

    def __init__(self, fixture, handles):
        self.fixture = fixture
        self.handles = handles
        self.previous = {}

    def sample(self, key):
        st = self.fixture["devices"][key]
        sample = pynvml.nvmlGpmSampleAlloc()
        try:
            if ":" in key:
                parent = self.handles[key.split(":")[0]]
                pynvml.nvmlGpmMigSampleGet(parent, st["gpu_instance_id"]["ok"], sample)
            else:
                pynvml.nvmlGpmSampleGet(self.handles[key], sample)
        except pynvml.NVMLError:
            pynvml.nvmlGpmSampleFree(sample)
            raise
        return sample

    def metrics(self, key):
        sample = self.sample(key)
        earlier = self.previous.pop(key, None)
        request = pynvml.c_nvmlGpmMetricsGet_t()
        request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(GPM_METRICS)
        request.sample1 = earlier if earlier is not None else sample
        request.sample2 = sample
        for i, metric in enumerate(GPM_METRICS.values()):
            request.metrics[i].metricId = metric
        try:
            pynvml.nvmlGpmMetricsGet(request)
        finally:
            if earlier is not None:
                pynvml.nvmlGpmSampleFree(earlier)
            self.previous[key] = sample
        out = {}
        for i, name in enumerate(GPM_METRICS):
            m = request.metrics[i]
            if m.nvmlReturn == pynvml.NVML_SUCCESS:
                out[name] = m.value
        return out

    def support(self, key):
        return pynvml.nvmlGpmQueryDeviceSupport(self.handles[key]).isSupportedDevice


def want_gpm_support(c, fixture, index, key):
    """What nvmlGpmQueryDeviceSupport must say of physical GPU `key` at frame `index`."""
    if "nvmlGpmQueryDeviceSupport" in c.missing:
        return {"err": "function_not_found"}
    frame = fixture["frames"][index]["devices"]
    family = [k for k in frame if k == key or k.split(":")[0] == key]
    supported = 0
    for k in family:
        a = recorded(frame[k], "gpm_metrics")
        if "ok" in a or a["err"] == "no_data":
            supported = 1
        elif a["err"] not in NOT_AVAILABLE_ERRORS:
            return a
    return {"ok": supported}


def check_gpm(c, fixture, gpm, index):
    for key, dy in fixture["frames"][index]["devices"].items():
        where = f"frame {index} device {key}"
        if ":" not in key:
            c.answer(f"{where} GPM support", want_gpm_support(c, fixture, index, key),
                     lambda: gpm.support(key))
        c.answer(f"{where} GPM metrics", recorded(dy, "gpm_metrics"), lambda: gpm.metrics(key))


EVENT_BITS = {
    "single_bit_ecc": 0x1,
    "double_bit_ecc": 0x2,
    "pstate": 0x4,
    "xid": 0x8,
    "clock": 0x10,
    "power_source": 0x80,
    "mig_config_change": 0x100,
    "single_bit_ecc_storm": 0x200,
    "dram_retirement": 0x400,
    "dram_retirement_failure": 0x800,
    "non_fatal_poison": 0x1000,
    "fatal_poison": 0x2000,
    "gpu_unavailable": 0x4000,
    "gpu_recovery_action": 0x8000,
}
ALL_EVENT_BITS = sum(EVENT_BITS.values())


def event_fields(e):
    """(timestamp_us, kind, data) of a fixture's event: `[t, kind, data]`, or `[t, kind]` when
    data is 0 (schema version 2, a log: each event in the frame it arrived in), or an object
    (version 1, every frame repeating the events so far)."""
    if isinstance(e, list):
        return e[0], e[1], e[2] if len(e) > 2 else 0
    return e["timestamp_us"], e["kind"], e["data"]


class Events:
    """One event set with every device that records events registered for every kind, drained
    after each frame: what pynvml receives must be exactly the events the frame adds, in order of
    their times, with the XID code as the event's data."""

    def __init__(self, c, fixture, handles):
        self.c = c
        self.handles = handles
        self.set = pynvml.nvmlEventSetCreate()
        self.registered = []
        first = fixture["frames"][0]["devices"]
        for key, dy in first.items():
            answer = recorded(dy, "events")
            c.answer(
                f"device {key} supported event types",
                answer,
                lambda: pynvml.nvmlDeviceGetSupportedEventTypes(handles[key]),
                lambda _events: ALL_EVENT_BITS,
            )
            if "ok" in answer:
                pynvml.nvmlDeviceRegisterEvents(handles[key], ALL_EVENT_BITS, self.set)
                self.registered.append(key)
        self.seen = {key: set() for key in self.registered}
        self.delivered = 0

    def check_frame(self, fixture, index):
        frame = fixture["frames"][index]["devices"]
        want = []
        for key in self.registered:
            answer = recorded(frame[key], "events")
            for e in answer.get("ok", []):
                t, kind, data = event_fields(e)
                if t not in self.seen[key]:
                    self.seen[key].add(t)
                    want.append((t, key, EVENT_BITS[kind], data))
        want = [w[1:] for w in sorted(want)]
        by_handle = {ctypes.cast(self.handles[k], ctypes.c_void_p).value: k for k in self.registered}
        got = []
        while True:
            try:
                data = pynvml.nvmlEventSetWait(self.set, 0)
            except pynvml.NVMLError as e:
                if e.value != pynvml.NVML_ERROR_TIMEOUT:
                    got.append(("error", e.value))
                break
            device = by_handle.get(ctypes.cast(data.device, ctypes.c_void_p).value, "?")
            got.append((device, data.eventType, data.eventData))
            if len(got) > 1000:
                break
        self.delivered += len(got)
        self.c.equal(f"frame {index} events delivered", got, want)

    def free(self):
        pynvml.nvmlEventSetFree(self.set)


def check_frame(c, fixture, handles, index):
    """Every changing answer of every device in frame `index`, which the library must serve now."""
    for key, dy in fixture["frames"][index]["devices"].items():
        h = handles[key]
        where = f"frame {index} device {key}"
        mem = dy["memory_info"]
        if "nvmlDeviceGetMemoryInfo_v2" in c.missing:
            c.answer(
                f"{where} memory v2",
                {"err": "function_not_found"},
                lambda: pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2),
            )
        else:
            c.answer(
                f"{where} memory v2",
                mem,
                lambda: (lambda m: (m.total, m.free, m.used, m.reserved))(
                    pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
                ),
                lambda m: (m["total"], m["free"], m["used"], m["reserved"] or 0),
            )
        c.answer(
            f"{where} memory v1",
            mem,
            lambda: (lambda m: (m.total, m.free, m.used))(pynvml.nvmlDeviceGetMemoryInfo(h)),
            lambda m: (m["total"], m["free"], m["used"] + (m["reserved"] or 0)),
        )
        c.answer(
            f"{where} utilization",
            dy["utilization_rates"],
            lambda: (lambda u: (u.gpu, u.memory))(pynvml.nvmlDeviceGetUtilizationRates(h)),
            lambda u: (u["gpu"], u["memory"]),
        )
        c.answer(
            f"{where} temperature",
            dy["temperature"],
            lambda: pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
        )
        c.answer(f"{where} power", dy["power_usage"], lambda: pynvml.nvmlDeviceGetPowerUsage(h))
        check_health_frame(c, where, dy, h)
        check_more_health(c, where, fixture["devices"][key], dy, h)
        check_details_frame(c, where, dy, h)
        c.answer(
            f"{where} compute processes",
            dy["compute_processes"],
            lambda: processes("Compute", h, c.missing),
            want_processes,
        )
        c.answer(
            f"{where} graphics processes",
            dy["graphics_processes"],
            lambda: processes("Graphics", h, c.missing),
            want_processes,
        )


def load_fixture():
    """The fixture that GPUSCOPE_FAKE_NVML_FIXTURE names; with FAKE_NVML_LIB set, pynvml loads
    the library from that path instead of searching LD_LIBRARY_PATH."""
    path = os.environ.get("GPUSCOPE_FAKE_NVML_FIXTURE")
    if not path:
        sys.exit("set GPUSCOPE_FAKE_NVML_FIXTURE to the fixture JSON file")
    with open(path) as f:
        fixture = json.load(f)
    lib = os.environ.get("FAKE_NVML_LIB")
    if lib:
        pynvml.nvmlLib = ctypes.CDLL(lib)
    return fixture


def fake_library():
    """The loaded libnvidia-ml.so.1 (after nvmlInit), which must be fake-nvml."""
    fake = pynvml.nvmlLib
    if not hasattr(fake, "fakeNvmlSetFrame"):
        sys.exit("the loaded libnvidia-ml.so.1 is not fake-nvml (no fakeNvmlSetFrame)")
    return fake


def main():
    fixture = load_fixture()
    c = Checker(fixture)
    pynvml.nvmlInit()
    fake = fake_library()
    handles = device_handles(fixture)
    check_system(c, fixture, handles)
    gpm = Gpm(fixture, handles)
    if fake.fakeNvmlSetFrame(ctypes.c_uint(0)) != 0:
        sys.exit("fakeNvmlSetFrame(0) failed")
    events = Events(c, fixture, handles)
    for index in range(len(fixture["frames"])):
        if fake.fakeNvmlSetFrame(ctypes.c_uint(index)) != 0:
            sys.exit(f"fakeNvmlSetFrame({index}) failed")
        check_frame(c, fixture, handles, index)
        check_gpm(c, fixture, gpm, index)
        events.check_frame(fixture, index)
    events.free()

    pynvml.nvmlShutdown()
    name = fixture["meta"]["name"]
    if c.failures:
        print(f"pynvml check of {name}: {len(c.failures)} of {c.checks} comparisons FAILED:")
        for f in c.failures:
            print("  " + f)
        return 1
    print(
        f"pynvml check of {name}: all {c.checks} comparisons match over "
        f"{len(fixture['frames'])} frames and {len(fixture['devices'])} devices "
        f"({events.delivered} events delivered)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
