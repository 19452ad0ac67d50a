#!/usr/bin/env python3
"""gpustat against `gpuscope stat --json`, over the same fake NVML: the front door must print
the document real gpustat prints for the same GPUs.

Run by crates/fake-nvml/tests/real_clients.sh (a virtualenv with the pinned gpustat, and
fake-nvml installed as libnvidia-ml.so.1 in LIB_DIR). By hand:

    gpustat_stat.py --lib-dir DIR --gpustat VENV/bin/gpustat --gpuscope BIN FIXTURE.json...

For each fixture and a few frames (first, middle, last), gpustat --json reads the fixture
through fake-nvml (frame pinned with GPUSCOPE_FAKE_NVML_FRAME) and `gpuscope stat --json
--fixture F --frame N` replays it; every GPU's fields (index, uuid, name, temperature.gpu,
fan.speed, utilization.gpu/.enc/.dec, power.draw, enforced.power.limit, memory.used,
memory.total) must be equal, and the top-level keys and each GPU's keys the same set.

Not compared, each for a stated reason: `hostname` and `query_time` (gpustat's are this
machine's and now; gpuscope's the recording's), and processes: gpustat looks each PID up with
psutil and drops those not running here, which the recorded PIDs are not (gpuscope reports
them from the recording's host facts); the keys of a process are compared where gpustat lists
one. Prints one line per fixture and `gpustat-stat: F fixtures, N values checked, M mismatches`;
exit status 1 on any mismatch.
"""

import argparse
import json
import os
import subprocess
import sys

from fake_nvml_env import fake_nvml_env

FIELDS = [
    "index", "uuid", "name", "temperature.gpu", "fan.speed", "utilization.gpu",
    "utilization.enc", "utilization.dec", "power.draw", "enforced.power.limit",
    "memory.used", "memory.total",
]


def run_json(cmd, env):
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {out.returncode}: {out.stderr.strip()}")
    return json.loads(out.stdout)


def frames_of(path):
    with open(path) as f:
        n = len(json.load(f)["frames"])
    return sorted({0, n // 2, n - 1})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib-dir", required=True)
    ap.add_argument("--gpustat", required=True)
    ap.add_argument("--gpuscope", required=True)
    ap.add_argument("fixtures", nargs="+")
    a = ap.parse_args()
    checked = mismatches = 0
    for fixture in a.fixtures:
        name = os.path.basename(fixture)
        bad_before = mismatches
        for frame in frames_of(fixture):
            try:
                theirs = run_json([a.gpustat, "--json"], fake_nvml_env(a.lib_dir, fixture, frame))
            except RuntimeError as e:
                if "pyNVML version does not match" not in str(e):
                    raise
                # gpustat calls nvmlDeviceGetComputeRunningProcesses unversioned, and pynvml 13
                # refuses that against an older driver: gpustat cannot read this machine at all.
                print(f"  documented exception: {name} frame {frame}: gpustat cannot read a "
                      "driver older than its pynvml (it calls an unversioned process list); "
                      "not compared")
                break
            ours = run_json(
                [a.gpuscope, "stat", "--json", "--fixture", fixture, "--frame", str(frame)],
                dict(os.environ),
            )
            at = f"{name} frame {frame}"
            if set(theirs) != set(ours):
                print(f"  {at}: top-level keys {sorted(ours)}, gpustat's {sorted(theirs)}")
                mismatches += 1
            tg, og = theirs.get("gpus", []), ours.get("gpus", [])
            if len(tg) != len(og):
                print(f"  {at}: {len(og)} GPUs, gpustat {len(tg)}")
                mismatches += 1
                continue
            for t, o in zip(tg, og):
                if set(t) != set(o):
                    print(f"  {at} GPU {t.get('index')}: keys {sorted(o)}, gpustat's {sorted(t)}")
                    mismatches += 1
                for field in FIELDS:
                    checked += 1
                    if t.get(field) != o.get(field):
                        print(f"  {at} GPU {t.get('index')}: {field} {o.get(field)!r}, "
                              f"gpustat {t.get(field)!r}")
                        mismatches += 1
                for tp in t.get("processes") or []:
                    op = next((p for p in o.get("processes") or [] if p["pid"] == tp["pid"]), None)
                    if op is not None and set(op) != set(tp):
                        print(f"  {at} PID {tp['pid']}: keys {sorted(op)}, gpustat's {sorted(tp)}")
                        mismatches += 1
        print(f"{name}: {'ok' if mismatches == bad_before else 'MISMATCH'}")
    print(f"gpustat-stat: {len(a.fixtures)} fixtures, {checked} values checked, "
          f"{mismatches} mismatches")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
