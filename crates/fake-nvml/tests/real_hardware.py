#!/usr/bin/env python3
"""The real-hardware differential: pynvml over fake-nvml replaying a real recording answers every
query that the real driver answered, as the real driver answered it.

`fixtures/h100-real/pynvml-answers.load.json` is what pynvml (nvidia-ml-py) read from the real
NVIDIA driver (H100 80GB HBM3, driver 580.159.04) during the session that recorded
`fixtures/h100-real.json`: 113 queries, each a value `v` or an NVML error code `e`. This script
asks pynvml the same 113 queries over fake-nvml serving the recording at the frame the answers
were taken, and compares:

* a query whose answer does not change while a program runs (name, limits, modes, maximum
  clocks, ...: the `system` and `static` queries of gpuscope's query table) must give the same
  value, or the same NVML error code;
* a query whose answer changes (memory used, clocks, power, processes, ...) must give the same
  kind of answer: a value, or the same NVML error code.

A query whose fixture field is absent ("not recorded": the recording was made before the query
was added to the table) is counted apart, and only the queries of ADDED_AFTER_H100_REAL may be
so: any other not-recorded answer is a miss. With `--expect-complete`, none may be.

The frame: the answers were taken between two frames of the recording. `--frame` names the frame
to pin (GPUSCOPE_FAKE_NVML_FRAME); `--check-frame` also checks that it is the last frame recorded
before the answers, by the one answer that only grows, the GPU's total energy counter
(nvmlDeviceGetTotalEnergyConsumption): the recording's counter at that frame is at or below the
answers', and at the next frame above it.

Usage (real_clients.sh runs it in its virtualenv, with fake-nvml installed in LIB_DIR):

    real_hardware.py --lib-dir LIB_DIR --fixture fixtures/h100-real.json \\
        --answers fixtures/h100-real/pynvml-answers.load.json --frame 50 --check-frame

and, for a recording made after the queries were added (`--expect-complete`: none may be "not
recorded"), the same over what `cargo xtask record-fixture` records from fake-nvml serving the
recording with ADDED_ANSWERS filled in (`--write-with-added-answers`): real_clients.sh does both.

Prints one line per miss and a last line
`real-hardware: N of M answered as the real driver did (K not recorded); X misses`.
Exit status 1 on any miss, an unexpected not-recorded answer, or a wrong frame.
"""

import argparse
import ast
import json
import os
import subprocess
import sys

from fake_nvml_env import fake_nvml_env

# The queries the table gained after fixtures/h100-real.json was recorded (issue 22): a
# recording made before answers them "not recorded".
ADDED_AFTER_H100_REAL = {
    "DeviceGetApplicationsClock(GR)",
    "DeviceGetApplicationsClock(SM)",
    "DeviceGetApplicationsClock(MEM)",
    "DeviceGetApplicationsClock(VIDEO)",
    "DeviceGetDefaultApplicationsClock(GR)",
    "DeviceGetDefaultApplicationsClock(SM)",
    "DeviceGetDefaultApplicationsClock(MEM)",
    "DeviceGetDefaultApplicationsClock(VIDEO)",
    "DeviceGetNumGpuCores",
    "DeviceGetPcieLinkMaxSpeed",
    "DeviceGetBoardId",
    "DeviceGetMultiGpuBoard",
    "DeviceGetVirtualizationMode",
    "DeviceGetAccountingMode",
    "DeviceGetGpuOperationMode",
}

# What those queries hold in a recording of the same machine made after issue 22, in the
# fixture's form, to stand for one where no GPU is at hand (`--write-with-added-answers`).
# From the session's `nvidia-smi -q -x` (fixtures/h100-real/nvidia-smi-q-x.load.xml) where it
# prints them; the three it does not print (the SM applications clocks, the core count and the
# PCIe max speed) from what NVML answered there, in the fixture's units: NVML's PCIe code 5 is
# NVML_PCIE_LINK_MAX_SPEED_32000MBPS. The comparison then proves that fake-nvml serves these
# fields as NVML encodes them, and (through record-fixture) that the NVML backend records them.
ADDED_ANSWERS = {
    # <applications_clocks>: graphics 1980 MHz, mem 2619 MHz; SM: NVML; video: NVML's 3.
    "applications_clocks": {"graphics": {"ok": 1980}, "sm": {"ok": 1980},
                            "memory": {"ok": 2619}, "video": {"err": "not_supported"}},
    # <default_applications_clocks>: the same.
    "default_applications_clocks": {"graphics": {"ok": 1980}, "sm": {"ok": 1980},
                                    "memory": {"ok": 2619}, "video": {"err": "not_supported"}},
    "pcie_link_max_speed": {"ok": 32000},
    "num_gpu_cores": {"ok": 16896},
    "board_id": {"ok": 6},  # <board_id>0x6</board_id>
    "multi_gpu_board": {"ok": False},  # <multigpu_board>No</multigpu_board>
    "virtualization_mode": {"ok": "pass_through"},  # <virtualization_mode>Pass-Through
    "accounting_mode": {"ok": False},  # <accounting_mode>Disabled</accounting_mode>
    "gpu_operation_mode": {"err": "not_supported"},  # <current_gom>N/A</current_gom>
}

CLOCKS = {"GR": ("NVML_CLOCK_GRAPHICS", "graphics"), "SM": ("NVML_CLOCK_SM", "sm"),
          "MEM": ("NVML_CLOCK_MEM", "memory"), "VIDEO": ("NVML_CLOCK_VIDEO", "video")}
# nvmlTemperatureThresholds_t 0-3 and the fixture fields that hold them; 4-7 (acoustic and GPS
# thresholds) are not in the query table: fake-nvml answers them NOT_SUPPORTED, as the real
# driver did here.
THRESHOLDS = {0: "temperature_shutdown", 1: "temperature_slowdown",
              2: "temperature_memory_max", 3: "temperature_gpu_max"}
ECC = {(0, 0): "volatile_corrected", (0, 1): "aggregate_corrected",
       (1, 0): "volatile_uncorrected", (1, 1): "aggregate_uncorrected"}


def query_table(pynvml):
    """Every query of the answers file, by name: (how pynvml asks it, where the fixture holds
    it, whether it changes).

    Where: ("system", field), ("static", field[, key]), ("dynamic", field[, key]) with key an
    entry of a per-clock or per-ECC answer or a link index; None for what is not a fixture field
    (the handle's index, thresholds outside the table)."""
    n = pynvml
    t = {}

    def dev(name, fn, where, changes):
        t[name] = (lambda h, fn=fn: fn(h), where, changes)

    t["DeviceGetCount"] = (lambda h: n.nvmlDeviceGetCount(), ("system", "device_count"), False)
    t["SystemGetCudaDriverVersion"] = (
        lambda h: n.nvmlSystemGetCudaDriverVersion(), ("system", "cuda_driver_version"), False)
    t["SystemGetCudaDriverVersion_v2"] = (
        lambda h: n.nvmlSystemGetCudaDriverVersion_v2(), ("system", "cuda_driver_version"), False)
    t["SystemGetDriverVersion"] = (
        lambda h: n.nvmlSystemGetDriverVersion(), ("system", "driver_version"), False)
    t["SystemGetNVMLVersion"] = (
        lambda h: n.nvmlSystemGetNVMLVersion(), ("system", "nvml_version"), False)

    for short, (const, key) in CLOCKS.items():
        c = getattr(n, const)
        dev(f"DeviceGetApplicationsClock({short})",
            lambda h, c=c: n.nvmlDeviceGetApplicationsClock(h, c),
            ("static", "applications_clocks", key), False)
        dev(f"DeviceGetDefaultApplicationsClock({short})",
            lambda h, c=c: n.nvmlDeviceGetDefaultApplicationsClock(h, c),
            ("static", "default_applications_clocks", key), False)
        dev(f"DeviceGetMaxClockInfo({short})", lambda h, c=c: n.nvmlDeviceGetMaxClockInfo(h, c),
            ("static", "max_clocks", key), False)
        dev(f"DeviceGetClockInfo({short})", lambda h, c=c: n.nvmlDeviceGetClockInfo(h, c),
            ("dynamic", "clocks", key), True)

    # The queries pynvml asks as nvml<query>(handle), by the fixture field that holds the
    # answer: those whose answer does not change while a program runs, and those whose does.
    static_plain = {
        "DeviceGetAccountingMode": "accounting_mode",
        "DeviceGetArchitecture": "architecture",
        "DeviceGetBoardId": "board_id",
        "DeviceGetBoardPartNumber": "board_part_number",
        "DeviceGetBrand": "brand",
        "DeviceGetComputeMode": "compute_mode",
        "DeviceGetCudaComputeCapability": "cuda_compute_capability",
        "DeviceGetDisplayActive": "display_active",
        "DeviceGetDisplayMode": "display_mode",
        "DeviceGetDriverModel": "driver_model",
        "DeviceGetEccMode": "ecc_mode",
        "DeviceGetEnforcedPowerLimit": "enforced_power_limit",
        "DeviceGetGpuOperationMode": "gpu_operation_mode",
        "DeviceGetInforomImageVersion": "inforom_image_version",
        "DeviceGetMaxPcieLinkGeneration": "max_pcie_link_generation",
        "DeviceGetMaxPcieLinkWidth": "max_pcie_link_width",
        "DeviceGetMemoryBusWidth": "memory_bus_width",
        "DeviceGetMigMode": "mig_mode",
        "DeviceGetMinorNumber": "minor_number",
        "DeviceGetMultiGpuBoard": "multi_gpu_board",
        "DeviceGetName": "name",
        "DeviceGetNumFans": "num_fans",
        "DeviceGetNumGpuCores": "num_gpu_cores",
        "DeviceGetPciInfo": "pci_info",
        "DeviceGetPcieLinkMaxSpeed": "pcie_link_max_speed",
        "DeviceGetPersistenceMode": "persistence_mode",
        "DeviceGetPowerManagementDefaultLimit": "power_management_default_limit",
        "DeviceGetPowerManagementLimit": "power_management_limit",
        "DeviceGetPowerManagementLimitConstraints": "power_management_limit_constraints",
        "DeviceGetPowerManagementMode": "power_management_mode",
        "DeviceGetSerial": "serial",
        "DeviceGetSupportedClocksEventReasons": "supported_clock_event_reasons",
        "DeviceGetUUID": "uuid",
        "DeviceGetVbiosVersion": "vbios_version",
        "DeviceGetVirtualizationMode": "virtualization_mode",
    }
    dynamic_plain = {
        "DeviceGetBAR1MemoryInfo": "bar1_memory_info",
        "DeviceGetComputeRunningProcesses": "compute_processes",
        "DeviceGetGraphicsRunningProcesses": "graphics_processes",
        "DeviceGetCurrPcieLinkGeneration": "current_pcie_link_generation",
        "DeviceGetCurrPcieLinkWidth": "current_pcie_link_width",
        "DeviceGetCurrentClocksEventReasons": "clock_event_reasons",
        "DeviceGetDecoderUtilization": "decoder_utilization",
        "DeviceGetEncoderUtilization": "encoder_utilization",
        "DeviceGetFanSpeed": "fan_speed",
        "DeviceGetMemoryInfo": "memory_info",
        "DeviceGetPcieReplayCounter": "pcie_replay_counter",
        "DeviceGetPerformanceState": "performance_state",
        "DeviceGetPowerState": "performance_state",
        "DeviceGetPowerUsage": "power_usage",
        "DeviceGetRemappedRows": "remapped_rows",
        "DeviceGetRetiredPagesPendingStatus": "retired_pages_pending",
        "DeviceGetTotalEnergyConsumption": "total_energy_consumption",
        "DeviceGetUtilizationRates": "utilization_rates",
    }
    for section, queries, changes in (("static", static_plain, False),
                                      ("dynamic", dynamic_plain, True)):
        for name, field in queries.items():
            dev(name, getattr(n, "nvml" + name), (section, field), changes)
    dev("DeviceGetIndex", n.nvmlDeviceGetIndex, None, False)
    # Support is a property of the device, which fake-nvml derives from the recorded GPM answers.
    dev("GpmQueryDeviceSupport", n.nvmlGpmQueryDeviceSupport, ("dynamic", "gpm_metrics"), False)
    for link in range(18):
        dev(f"DeviceGetNvLinkState({link})", lambda h, l=link: n.nvmlDeviceGetNvLinkState(h, l),
            ("static", "nvlink_state", link), False)
    for i in range(8):
        dev(f"DeviceGetTemperatureThreshold({i})",
            lambda h, i=i: n.nvmlDeviceGetTemperatureThreshold(h, i),
            ("static", THRESHOLDS[i]) if i in THRESHOLDS else None, False)
    dev("DeviceGetMemoryInfo_v2", lambda h: n.nvmlDeviceGetMemoryInfo(h, version=n.nvmlMemory_v2),
        ("dynamic", "memory_info"), True)
    dev("DeviceGetProcessUtilization", lambda h: n.nvmlDeviceGetProcessUtilization(h, 0),
        ("dynamic", "process_utilization"), True)
    dev("DeviceGetTemperature(GPU)", lambda h: n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU),
        ("dynamic", "temperature"), True)
    for short, counter in (("TX", n.NVML_PCIE_UTIL_TX_BYTES), ("RX", n.NVML_PCIE_UTIL_RX_BYTES)):
        dev(f"DeviceGetPcieThroughput({short})",
            lambda h, c=counter: n.nvmlDeviceGetPcieThroughput(h, c),
            ("dynamic", f"pcie_{short.lower()}_throughput"), True)
    for cause, field in ((0, "retired_pages_single_bit"), (1, "retired_pages_double_bit")):
        dev(f"DeviceGetRetiredPages({cause})",
            lambda h, c=cause: n.nvmlDeviceGetRetiredPages(h, c), ("dynamic", field), True)
    for (kind, counter), key in ECC.items():
        dev(f"DeviceGetTotalEccErrors({kind},{counter})",
            lambda h, k=kind, c=counter: n.nvmlDeviceGetTotalEccErrors(h, k, c),
            ("dynamic", "ecc_errors", key), True)
    return t


def plain(v):
    """A pynvml answer in the form the answers file holds it: structures as objects of their
    fields, tuples as lists, bytes as text, process objects as their text."""
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if hasattr(v, "_fields_"):
        return {name: plain(getattr(v, name)) for name, *_ in v._fields_}
    if type(v).__name__ == "nvmlFriendlyObject":
        return str(v)
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    return v


def same_value(got, want):
    """Equal as the answers file holds them; process objects compared as the dicts they print."""
    def norm(x):
        if isinstance(x, str) and x.startswith("{"):
            try:
                return ast.literal_eval(x)
            except (ValueError, SyntaxError):
                return x
        if isinstance(x, list):
            return [norm(y) for y in x]
        if isinstance(x, dict):
            return {k: norm(y) for k, y in sorted(x.items())}
        return x
    return norm(got) == norm(want)


def recorded(fixture, where):
    """Whether the fixture holds the field the query is served from (absent: "not recorded")."""
    if where is None:
        return True
    section, field = where[0], where[1]
    if section == "system":
        return field in fixture["system"]
    if section == "static":
        return field in fixture["devices"]["0"]
    return all(field in f["devices"]["0"] for f in fixture["frames"])


def energy_frame(fixture, answers):
    """The last frame whose energy counter is at or below the answers' (None if none is)."""
    want = answers["devices"][0].get("DeviceGetTotalEnergyConsumption", {}).get("v")
    if want is None:
        return None
    last = None
    for i, f in enumerate(fixture["frames"]):
        e = f["devices"]["0"].get("total_energy_consumption", {})
        if "ok" in e and e["ok"] <= want:
            last = i
    return last


def ask_all():
    """In the child: asks every query of the answers file, prints {name: {"v"|"e": ...}}."""
    import pynvml

    with open(os.environ["REAL_HARDWARE_ANSWERS"]) as f:
        answers = json.load(f)
    table = query_table(pynvml)
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    out = {}
    for name in list(answers["system"]) + list(answers["devices"][0]):
        if name not in table:
            out[name] = {"missing": "no such query in real_hardware.py's table"}
            continue
        call = table[name][0]
        try:
            out[name] = {"v": plain(call(handle))}
        except pynvml.NVMLError as e:
            out[name] = {"e": e.value}
    pynvml.nvmlShutdown()
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib-dir", required=True)
    ap.add_argument("--fixture", required=True)
    ap.add_argument("--answers", required=True)
    ap.add_argument("--frame", type=int, default=0)
    ap.add_argument("--check-frame", action="store_true")
    ap.add_argument("--expect-complete", action="store_true",
                    help="every query must be recorded (a recording made after issue 22)")
    ap.add_argument("--label", default=None, help="what to call the fixture in the report")
    ap.add_argument("--write-with-added-answers", metavar="OUT",
                    help="write the fixture with ADDED_ANSWERS filled in to OUT, and stop")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        ask_all()
        return 0
    if a.write_with_added_answers:
        with open(a.fixture) as f:
            fixture = json.load(f)
        for key, st in fixture["devices"].items():
            if ":" in key:
                continue  # MIG devices answer none of these
            for field, answer in ADDED_ANSWERS.items():
                st.setdefault(field, answer)
        with open(a.write_with_added_answers, "w") as f:
            json.dump(fixture, f)
        return 0

    with open(a.fixture) as f:
        fixture = json.load(f)
    with open(a.answers) as f:
        answers = json.load(f)
    label = a.label or os.path.basename(a.fixture)
    problems = []
    if a.check_frame:
        fit = energy_frame(fixture, answers)
        if fit != a.frame:
            problems.append(
                f"frame: the answers' energy counter fits frame {fit}, not the pinned {a.frame}")

    env = fake_nvml_env(a.lib_dir, a.fixture, a.frame,
                        REAL_HARDWARE_ANSWERS=os.path.abspath(a.answers))
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", "--lib-dir",
                        a.lib_dir, "--fixture", a.fixture, "--answers", a.answers],
                       env=env, capture_output=True, text=True, timeout=300)
    try:
        got = json.loads(r.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        print(f"real-hardware: pynvml over fake-nvml did not finish ({r.returncode}):\n"
              f"{r.stdout}{r.stderr}", file=sys.stderr)
        return 1

    import pynvml  # only for the table's shape (which queries change), not to ask anything

    table = query_table(pynvml)
    want_all = dict(answers["system"])
    want_all.update(answers["devices"][0])
    same = 0
    not_recorded = []
    for name, want in want_all.items():
        g = got.get(name, {"missing": "not asked"})
        if "missing" in g:
            problems.append(f"{name}: {g['missing']}")
            continue
        _, where, changes = table[name]
        if not recorded(fixture, where):
            if a.expect_complete or name not in ADDED_AFTER_H100_REAL:
                problems.append(f"{name}: not recorded in {label} (the driver gave {want})")
            elif g != {"e": 3}:
                problems.append(f"{name}: not recorded, so NOT_SUPPORTED (3) expected, got {g}")
            else:
                not_recorded.append(name)
            continue
        if "e" in want:
            ok = g == want
        elif changes:
            ok = "v" in g
        else:
            ok = "v" in g and same_value(g["v"], want["v"])
        if ok:
            same += 1
        else:
            kind = "the same kind of answer" if changes else "the same answer"
            problems.append(f"{name}: fake-nvml gave {g}, the real driver {want} ({kind} expected)")
    if not a.expect_complete and sorted(not_recorded) != sorted(ADDED_AFTER_H100_REAL):
        missing = sorted(ADDED_AFTER_H100_REAL - set(not_recorded))
        if missing and all(recorded(fixture, table[m][1]) for m in missing):
            pass  # a recording that holds them (made after issue 22) is complete, not wrong
        else:
            problems.append(f"not recorded: expected exactly {sorted(ADDED_AFTER_H100_REAL)}, "
                            f"got {sorted(not_recorded)}")
    for p in problems:
        print(f"  MISS {p}")
    print(f"real-hardware: {label} frame {a.frame}: {same} of {len(want_all)} answered as the "
          f"real driver did ({len(not_recorded)} not recorded); {len(problems)} misses")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
