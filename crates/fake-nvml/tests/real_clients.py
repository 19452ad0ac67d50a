#!/usr/bin/env python3
"""Real NVML clients against every fixture: pynvml (nvidia-ml-py) and nvitop's Python API read
the fake libnvidia-ml.so.1 and must report what the fixture JSON holds.

Run by crates/fake-nvml/tests/real_clients.sh, which builds and installs the library and makes a
virtualenv with the pinned clients. By hand:

    real_clients.py --lib-dir DIR FIXTURE.json...

For each fixture it runs, each in its own Python process with DIR on LD_LIBRARY_PATH:

* pynvml over every frame, stepped with the library's fakeNvmlSetFrame (pynvml_check.py);
* for a few frames (first, second, middle, last, and each frame where some device's memory
  answer turns from a value to an error or back, such as a GPU falling off the bus), pinned with
  GPUSCOPE_FAKE_NVML_FRAME: pynvml again, and nvitop's API (`Device.all()`, `name()`, `uuid()`,
  `memory_used()`, `gpu_utilization()`, `temperature()`, `power_usage()`, `processes()` with
  each process's `gpu_memory()`, `gpu_instance_id()` and `compute_instance_id()`, and
  `mig_devices()` with each MIG device's `gpu_instance_id()`, `compute_instance_id()` and the
  same per-device values).

Where a client cannot show a fixture's answer, the check expects what the client does instead
and says so (see EXCEPTIONS below); nothing is skipped silently.

Prints one line per fixture, the documented exceptions that applied, and a last line
`real-clients: F fixtures, N values checked, M mismatches`. Exit status 1 on any mismatch or
failed run.
"""

import argparse
import ctypes
import json
import os
import subprocess
import sys

from fake_nvml_env import fake_nvml_env

HERE = os.path.dirname(os.path.abspath(__file__))

# What nvitop cannot show as the fixture records it, and what it shows instead. Keys are used in
# the per-fixture report.
EXCEPTIONS = {
    "memory-v2-missing": (
        "the fixture lists nvmlDeviceGetMemoryInfo_v2 as missing: nvitop chooses the v2 call by "
        "the symbol's presence, fake-nvml exports every symbol and answers "
        "NVML_ERROR_FUNCTION_NOT_FOUND, so nvitop shows memory as N/A (on a real old driver the "
        "symbol is absent and nvitop falls back to v1); expected N/A"
    ),
    "processes-v3-missing": (
        "the fixture lists the _v3 process calls as missing: nvitop chooses _v3 by the symbol's "
        "presence and gets NVML_ERROR_FUNCTION_NOT_FOUND, so it lists no processes (a real old "
        "driver lacks the symbol and nvitop falls back to _v2 or v1); expected no processes. "
        "pynvml_check.py covers these lists with the fallback"
    ),
    "memory-unified": (
        "memory info answers not supported or a total of 0: nvitop shows the host's memory "
        "instead (its unified-memory path); not compared"
    ),
}


def expected_frames(fixture):
    """The frames pinned with GPUSCOPE_FAKE_NVML_FRAME."""
    frames = fixture["frames"]
    n = len(frames)
    chosen = {0, min(1, n - 1), n // 2, n - 1}

    def status(i):
        return {k: "ok" in d["memory_info"] for k, d in frames[i]["devices"].items()}

    for i in range(1, n):
        if status(i) != status(i - 1):
            chosen.update({i - 1, i})
    return sorted(chosen)


# ----------------------------------------------------------------------------------------------
# One pinned frame, in a child process.


def check_pinned_frame(frame):
    import pynvml

    sys.path.insert(0, HERE)
    import pynvml_check

    fixture = pynvml_check.load_fixture()
    exceptions = set()

    # pynvml: the system, names and UUIDs, and this frame's changing answers.
    c = pynvml_check.Checker(fixture)
    pynvml.nvmlInit()
    fake = pynvml_check.fake_library()
    served = ctypes.c_uint(0)
    fake.fakeNvmlGetFrame(ctypes.byref(served))
    c.equal("frame served under GPUSCOPE_FAKE_NVML_FRAME", served.value, frame)
    handles = pynvml_check.device_handles(fixture)
    pynvml_check.check_system(c, fixture, handles)
    pynvml_check.check_frame(c, fixture, handles, frame)

    # nvitop, over the same library (pynvml is already loaded and initialised; nvitop's own
    # nvmlInit only takes another reference).
    import logging

    from nvitop import NA, Device
    from nvitop.api import libnvml

    libnvml.LOGGER.setLevel(logging.CRITICAL)  # FunctionNotFound is expected in some fixtures
    n = pynvml_check.Checker(fixture, client="nvitop")
    NvitopChecker(fixture, frame, n, exceptions).run(Device, NA)

    pynvml.nvmlShutdown()
    print(
        json.dumps(
            {
                "checks": c.checks + n.checks,
                "failures": c.failures + n.failures,
                "exceptions": sorted(exceptions),
            }
        )
    )


def ok(answer):
    return "ok" in answer


class NvitopChecker:
    def __init__(self, fixture, frame, c, exceptions):
        self.fixture = fixture
        self.frame = fixture["frames"][frame]
        self.index = frame
        self.c = c
        self.missing = set(fixture["nvml_missing_functions"])
        self.exceptions = exceptions

    def eq(self, what, got, want):
        self.c.equal(f"frame {self.index} {what}", self.plain(got), want)

    def plain(self, v):
        if v is self.NA or (isinstance(v, str) and v == "N/A"):
            return None
        return v

    def run(self, Device, NA):
        self.NA = NA
        system = self.fixture["system"]
        devices = Device.all()
        want_count = system["device_count"]["ok"] if ok(system["device_count"]) else 0
        self.eq("device count", len(devices), want_count)
        for dev in devices:
            key = str(dev.index)
            self.device(key, dev)
            st = self.fixture["devices"][key]
            migs = dev.mig_devices()
            self.eq(
                f"device {key} MIG children", [m.mig_index for m in migs], self.mig_slots(key, st)
            )
            for m in migs:
                mkey = f"{key}:{m.mig_index}"
                mst = self.fixture["devices"][mkey]
                self.eq(f"device {mkey} GPU instance id", m.gpu_instance_id(), self.value(mst["gpu_instance_id"]))
                self.eq(
                    f"device {mkey} compute instance id",
                    m.compute_instance_id(),
                    self.value(mst["compute_instance_id"]),
                )
                self.device(mkey, m)

    def value(self, answer, f=lambda v: v):
        """nvitop shows an error as N/A."""
        return f(answer["ok"]) if ok(answer) else None

    def mig_slots(self, key, st):
        """What `mig_devices()` lists: nothing unless MIG mode is on; then the slots from 0 up to
        the first empty one (nvitop stops at the first slot that fails)."""
        if "nvmlDeviceGetMigMode" in self.missing:
            return []
        mode = st["mig_mode"]
        if not ok(mode) or not mode["ok"]["current"]:
            return []
        slots = set(st["mig_device_indices"]["ok"]) if ok(st["mig_device_indices"]) else set()
        top = st["max_mig_device_count"]["ok"] if ok(st["max_mig_device_count"]) else 0
        listed = []
        for i in range(top):
            if i not in slots or f"{key}:{i}" not in self.fixture["devices"]:
                break
            listed.append(i)
        return listed

    def device(self, key, dev):
        st = self.fixture["devices"][key]
        dy = self.frame["devices"][key]
        self.eq(f"device {key} name", dev.name(), self.value(st["name"]))
        self.eq(f"device {key} uuid", dev.uuid(), self.value(st["uuid"]))
        mem = dy["memory_info"]
        if "nvmlDeviceGetMemoryInfo_v2" in self.missing:
            self.exceptions.add("memory-v2-missing")
            self.eq(f"device {key} memory used", dev.memory_used(), None)
        elif (ok(mem) and mem["ok"]["total"] == 0) or mem.get("err") == "not_supported":
            self.exceptions.add("memory-unified")
        else:
            self.eq(f"device {key} memory used", dev.memory_used(), self.value(mem, lambda m: m["used"]))
        self.eq(
            f"device {key} GPU utilization",
            dev.gpu_utilization(),
            self.value(dy["utilization_rates"], lambda u: u["gpu"]),
        )
        self.eq(f"device {key} temperature", dev.temperature(), self.value(dy["temperature"]))
        self.eq(f"device {key} power usage", dev.power_usage(), self.value(dy["power_usage"]))

        # nvitop reads compute then graphics processes; a PID in both keeps the graphics entry.
        want = {}
        for kind, field in (("Compute", "compute_processes"), ("Graphics", "graphics_processes")):
            if f"nvmlDeviceGet{kind}RunningProcesses_v3" in self.missing:
                self.exceptions.add("processes-v3-missing")
                continue
            for p in dy[field].get("ok", []):
                want[p["pid"]] = (
                    p["used_gpu_memory"],
                    p["gpu_instance_id"],
                    p["compute_instance_id"],
                )
        procs = dev.processes()
        self.eq(f"device {key} process PIDs", sorted(procs), sorted(want))
        for pid, (memory, gi, ci) in want.items():
            p = procs.get(pid)
            if p is None:
                continue
            self.eq(f"device {key} PID {pid} GPU memory", p.gpu_memory(), memory)
            self.eq(f"device {key} PID {pid} GPU instance id", p.gpu_instance_id(), gi)
            self.eq(f"device {key} PID {pid} compute instance id", p.compute_instance_id(), ci)


# ----------------------------------------------------------------------------------------------
# The driver.


def run_child(args, env):
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    return proc


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib-dir", help="directory holding the installed libnvidia-ml.so.1")
    ap.add_argument("--pinned-frame", type=int, help=argparse.SUPPRESS)
    ap.add_argument("fixtures", nargs="*")
    a = ap.parse_args()
    if a.pinned_frame is not None:
        check_pinned_frame(a.pinned_frame)
        return 0
    if not a.lib_dir or not a.fixtures:
        ap.error("give --lib-dir and at least one fixture")

    total_checks = 0
    total_failures = 0
    broken_runs = 0
    for path in a.fixtures:
        with open(path) as f:
            fixture = json.load(f)
        name = fixture["meta"]["name"]
        base = fake_nvml_env(a.lib_dir, path)
        checks = 0
        failures = []
        exceptions = set()

        # pynvml over every frame, stepped by hand.
        r = run_child([sys.executable, os.path.join(HERE, "pynvml_check.py")], base)
        last = r.stdout.strip().splitlines()[-1:] or [""]
        if r.returncode != 0 or "all " not in last[0]:
            broken_runs += 1
            failures.append(f"pynvml_check.py failed ({r.returncode}):\n{r.stdout}{r.stderr}")
        else:
            checks += int(last[0].split("all ")[1].split()[0])

        frames = expected_frames(fixture)
        for frame in frames:
            env = dict(base, GPUSCOPE_FAKE_NVML_FRAME=str(frame))
            r = run_child([sys.executable, __file__, "--pinned-frame", str(frame)], env)
            try:
                out = json.loads(r.stdout.strip().splitlines()[-1])
            except (IndexError, ValueError):
                broken_runs += 1
                failures.append(
                    f"frame {frame}: the check did not finish ({r.returncode}):\n"
                    f"{r.stdout}{r.stderr}"
                )
                continue
            checks += out["checks"]
            failures += out["failures"]
            exceptions.update(out["exceptions"])

        status = "ok" if not failures else f"{len(failures)} MISMATCHES"
        print(
            f"{name}: {checks} values checked (pynvml: all {len(fixture['frames'])} frames; "
            f"pynvml and nvitop: frames {', '.join(map(str, frames))} pinned): {status}"
        )
        for e in sorted(exceptions):
            print(f"  documented exception: {EXCEPTIONS[e]}")
        for f in failures[:40]:
            print("  MISMATCH " + f)
        if len(failures) > 40:
            print(f"  ... and {len(failures) - 40} more")
        total_checks += checks
        total_failures += len(failures)

    print(
        f"real-clients: {len(a.fixtures)} fixtures, {total_checks} values checked, "
        f"{total_failures} mismatches"
    )
    return 1 if total_failures or broken_runs else 0


if __name__ == "__main__":
    sys.exit(main())
