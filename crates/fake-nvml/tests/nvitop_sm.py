#!/usr/bin/env python3
"""nvitop's %SM over fake-nvml replaying the real H100 recording (issue 22, 3d).

nvitop asks NVML for the process-utilization samples of the last second by wall clock; fake-nvml
serves them on its replay clock, so `nvitop -1` at frame 30 of fixtures/h100-real.json must
show PID 512's %SM as the recording holds it (95 at frame 30; 92 to 97 while the matrix product
ran), where it showed 0 while the samples kept their recorded timestamps.

nvitop reads the live /proc for a process's user and command, and this machine's PID 512 is some
other process or none. So that the check shows a real process, a live stand-in (`sleep`) is
started and the recording's PID 512 is given its PID in a copy of the fixture (in the process
lists, the samples and the host facts): the GPU side (memory, %SM) is the recording's.

Run by crates/fake-nvml/tests/real_clients.sh with the virtualenv's python:

    nvitop_sm.py --lib-dir DIR [--fixture fixtures/h100-real.json] [--frame 30]

Prints `nvitop-sm: PID 512 (stand-in PID P) at frame F: nvitop shows N %SM, the recording M`;
exit status 1 when nvitop's figure is not within 3 of the recording's (or is missing).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

from fake_nvml_env import fake_nvml_env

RECORDED_PID = 512
TOLERANCE = 3


def map_pid(doc, old, new):
    """The fixture with PID `old` renamed `new` everywhere a PID is kept."""
    for frame in doc["frames"]:
        for dev in frame["devices"].values():
            for field in ("compute_processes", "graphics_processes", "process_utilization"):
                answer = dev.get(field, {})
                for entry in answer.get("ok", []) or []:
                    if entry.get("pid") == old:
                        entry["pid"] = new
        procs = frame["host"]["processes"]
        if str(old) in procs:
            procs[str(new)] = procs.pop(str(old))
    procs = doc["host"]["processes"]
    if str(old) in procs:
        procs[str(new)] = procs.pop(str(old))
    return doc


def recorded_sm(doc, frame, pid):
    dev = doc["frames"][frame]["devices"]["0"]
    samples = [s for s in dev["process_utilization"].get("ok", []) if s["pid"] == pid]
    return max(samples, key=lambda s: s["timestamp_us"])["sm"] if samples else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib-dir", required=True)
    ap.add_argument("--fixture", default="fixtures/h100-real.json")
    ap.add_argument("--frame", type=int, default=30)
    ap.add_argument("--nvitop", default=os.path.join(os.path.dirname(sys.executable), "nvitop"))
    args = ap.parse_args()

    with open(args.fixture) as f:
        doc = json.load(f)
    want = recorded_sm(doc, args.frame, RECORDED_PID)
    if want is None:
        print(f"nvitop-sm: PID {RECORDED_PID} has no sample at frame {args.frame}")
        return 1
    stand_in = subprocess.Popen(["sleep", "600"])
    try:
        pid = stand_in.pid
        taken = {p for f in doc["frames"] for p in f["host"]["processes"]}
        if str(pid) in taken:
            print(f"nvitop-sm: the stand-in's PID {pid} is one of the recording's; run again")
            return 1
        map_pid(doc, RECORDED_PID, pid)
        with tempfile.TemporaryDirectory(prefix="nvitop-sm.") as tmp:
            path = os.path.join(tmp, "h100-real-stand-in.json")
            with open(path, "w") as f:
                json.dump(doc, f)
            env = fake_nvml_env(args.lib_dir, path, args.frame, COLUMNS="200", LINES="60")
            out = subprocess.run(
                [args.nvitop, "-1"], env=env, capture_output=True, text=True, timeout=120
            )
    finally:
        stand_in.kill()
        stand_in.wait()
    text = out.stdout + out.stderr
    # A process row: "│   0   PID C   USER  GPU-MEM  %SM  %GMBW ...".
    got = None
    for line in text.splitlines():
        m = re.match(r"^\W*\d+\s+(\d+)\s+[CG+]+\s+\S+\s+\S+\s+(\S+)", line)
        if m and int(m.group(1)) == pid:
            got = m.group(2)
    print(
        f"nvitop-sm: PID {RECORDED_PID} (stand-in PID {pid}) at frame {args.frame}: nvitop "
        f"shows {got} %SM, the recording {want}"
    )
    if out.returncode != 0 or got is None or not got.isdigit():
        print(text)
        return 1
    if abs(int(got) - want) > TOLERANCE:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
