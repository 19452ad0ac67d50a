#!/usr/bin/env python3
"""gpustat's lines against `gpuscope stat`'s, over the same fake NVML: the front door must
print, byte for byte, the lines real gpustat prints for the same GPUs and processes, for the
options users type (default, -c, -u, -p, -P, -F, -e, -a, -f, --no-header and combinations).

Run by crates/fake-nvml/tests/real_clients.sh (a virtualenv with the pinned gpustat, and
fake-nvml installed as libnvidia-ml.so.1 in LIB_DIR). By hand:

    gpustat_text.py --lib-dir DIR --python VENV/bin/python --gpuscope BIN FIXTURE.json...

Processes: gpustat looks each PID up on this machine (psutil) and drops those not running, so
for each fixture the script starts one `sleep` per recorded PID, its first word the recorded
command's (`/opt/conda/bin/python3 600`), and replays a copy of the fixture with each PID
replaced by its sleeper's, the process's user, command line and resident memory those of the
sleeper, and its CPU% 0 (a sleeper's). Both tools then see the same processes.

gpustat runs in one Python process per fixture and frame (the frame pinned with
GPUSCOPE_FAKE_NVML_FRAME), which calls gpustat's own `main` once per option set; gpustat's
0.1 s pause per GPU to measure CPU% is skipped (the sleepers use none either way).
`gpuscope stat --fixture COPY --frame N OPTIONS` prints ours. Both run with the same TZ, a
zone east of UTC.

Compared: every line, byte for byte (colour sequences too, with --force-color), but the
header's host name and time: gpustat's are this machine's and now, gpuscope's the recording's.
For the header the check is that the host is padded to gpustat's width, the time is the
frame's recorded time in the local zone written as gpustat writes it (the C locale's %c), and
the driver is the same; its colours are not compared.

--self-check: also compares gpustat's first frame of the first fixture with gpuscope's last
frame, and fails unless that deliberately wrong pair is reported as a mismatch.

Prints one line per fixture and `gpustat-text: F fixtures, N outputs compared, M mismatches`;
exit status 1 on any mismatch.
"""

import argparse
import copy
import datetime
import json
import os
import pwd
import re
import subprocess
import sys
import tempfile
import time

from fake_nvml_env import fake_nvml_env

# The option sets compared on every frame, and those compared on the middle frame only (to
# keep the check to seconds).
EVERY_FRAME = [[], ["-a"], ["-af"]]
MIDDLE_FRAME = [
    ["-c"], ["-u"], ["-p"], ["-P"], ["-F"], ["-e"], ["--no-header"], ["-cpu"], ["-cupP"],
    ["-f"], ["-P", "draw"], ["-e", "dec"], ["--gpuname-width", "8"], ["--gpuname-width", "0"],
    ["--no-processes"], ["-F", "--id", "0"],
    # In colour (xterm-256color's sequences; gpustat's bare --color is --force-color).
    ["--force-color", "-a"], ["--force-color", "-f"], ["--color", "-cupP"],
]

# A zone east of UTC, written so that no time-zone files are needed.
TZ = "XST-5:30"

ANSI = re.compile(r"\x1b(\[[0-9;]*m|\(B)")

HEADER = re.compile(r"^(?P<host>\S+)(?P<pad> *)  (?P<time>\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4})"
                    r"  (?P<driver>.*)$")

# Run inside the virtualenv's Python: gpustat's main once per option set, its output for each
# as a JSON list on stdout.
GPUSTAT_RUNNER = r"""
import io, json, sys, types, time, contextlib
import gpustat.core, gpustat.cli
gpustat.core.time = types.SimpleNamespace(sleep=lambda s: None, time=time.time)
outs = []
for argv in json.loads(sys.argv[1]):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            gpustat.cli.main('gpustat', *argv)
        except SystemExit as e:
            if e.code:
                raise
    outs.append(buf.getvalue())
json.dump(outs, sys.stdout)
"""


def frames_of(doc):
    n = len(doc["frames"])
    return sorted({0, n // 2, n - 1})


def pids_in(node, found):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "pid" and isinstance(v, int):
                found.add(v)
            pids_in(v, found)
    elif isinstance(node, list):
        for v in node:
            pids_in(v, found)
    return found


def remap(node, pids):
    """The fixture's PIDs replaced by the sleepers': `pid` values, and the host tables' keys."""
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k == "pid" and isinstance(v, int) and v in pids:
                out[k] = pids[v]
            elif k == "processes" and isinstance(v, dict):
                out[k] = {str(pids.get(int(p), p)) if p.isdigit() else p: remap(e, pids)
                          for p, e in v.items()}
            else:
                out[k] = remap(v, pids)
        return out
    if isinstance(node, list):
        return [remap(v, pids) for v in node]
    return node


def rss_of(pid):
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def with_sleepers(doc, workdir, name):
    """A copy of the fixture whose processes are sleepers started here; the sleepers."""
    user = pwd.getpwuid(os.getuid()).pw_name
    recorded = doc.get("host", {}).get("processes", {})
    sleepers, pids = [], {}
    for pid in sorted(pids_in(doc["frames"], set())):
        first = ((recorded.get(str(pid)) or {}).get("cmdline") or ["sleep"])[0] or "sleep"
        proc = subprocess.Popen([first, "600"], executable="/bin/sleep")
        sleepers.append(proc)
        pids[pid] = proc.pid
    doc = remap(copy.deepcopy(doc), pids)
    table = doc.setdefault("host", {}).setdefault("processes", {})
    by_new = {new: old for old, new in pids.items()}
    for proc in sleepers:
        old = by_new[proc.pid]
        entry = table.get(str(proc.pid)) or {}
        first = (entry.get("cmdline") or ["sleep"])[0] or "sleep"
        entry.update({"cmdline": [first, "600"], "user": user,
                      "name": os.path.basename(first)[:15]})
        table[str(proc.pid)] = entry
    rss = {proc.pid: rss_of(proc.pid) for proc in sleepers}
    for frame in doc["frames"]:
        for pid, facts in (frame.get("host", {}).get("processes") or {}).items():
            if pid.isdigit() and int(pid) in rss:
                facts["cpu_percent"] = 0.0
                facts["rss"] = rss[int(pid)]
    path = os.path.join(workdir, name)
    with open(path, "w") as f:
        json.dump(doc, f)
    return path, sleepers


def gpustat_outputs(a, fixture, frame, option_sets):
    env = fake_nvml_env(a.lib_dir, fixture, frame, TZ=TZ, TERM="xterm-256color")
    out = subprocess.run([a.python, "-c", GPUSTAT_RUNNER, json.dumps(option_sets)], env=env,
                         capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip())
    return json.loads(out.stdout)


def gpuscope_output(a, fixture, frame, options):
    env = dict(os.environ, TZ=TZ)
    env.pop("NO_COLOR", None)
    out = subprocess.run([a.gpuscope, "stat", "--fixture", fixture, "--frame", str(frame),
                          *options], env=env, capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError(f"gpuscope stat {' '.join(options)} exited {out.returncode}: "
                           f"{out.stderr.strip()}")
    return out.stdout


def recorded_time(doc, frame):
    """The frame's recorded time, as gpustat writes a time in its header, in TZ."""
    start = datetime.datetime.fromisoformat(doc["meta"]["recorded_at"].replace("Z", "+00:00"))
    secs = int(start.timestamp() * 1000 + doc["frames"][frame]["t_ms"]) // 1000
    os.environ["TZ"] = TZ
    time.tzset()
    return time.strftime("%a %b %e %H:%M:%S %Y", time.localtime(secs))


def differences(theirs, ours, header, expected_time):
    """What differs between two outputs, as lines for people; empty when they agree."""
    t_lines, o_lines = theirs.split("\n"), ours.split("\n")
    found = []
    if header and t_lines and o_lines:
        t = HEADER.match(ANSI.sub("", t_lines[0]))
        o = HEADER.match(ANSI.sub("", o_lines[0]))
        if not t or not o:
            found.append(f"header: {o_lines[0]!r}, gpustat's {t_lines[0]!r}")
        else:
            width = len(t["host"]) + len(t["pad"])
            if len(o["host"]) < width and len(o["host"]) + len(o["pad"]) != width:
                found.append(f"header: host padded to {len(o['host']) + len(o['pad'])}, "
                             f"gpustat's to {width}")
            if o["time"] != expected_time:
                found.append(f"header: time {o['time']!r}, the frame's {expected_time!r}")
            if o["driver"] != t["driver"]:
                found.append(f"header: driver {o['driver']!r}, gpustat's {t['driver']!r}")
        t_lines, o_lines = t_lines[1:], o_lines[1:]
    if len(t_lines) != len(o_lines):
        found.append(f"{len(o_lines)} lines, gpustat {len(t_lines)}")
    for i, (t, o) in enumerate(zip(t_lines, o_lines)):
        if t != o:
            found.append(f"line {i + 1 + header}: {o!r}\n      gpustat's: {t!r}")
    return found


def compare(a, doc, copy_path, frame, option_sets, their_frame=None):
    """Compared outputs and mismatches of one frame (gpustat's of `their_frame` if given)."""
    theirs = gpustat_outputs(a, copy_path, frame if their_frame is None else their_frame,
                             option_sets)
    compared, bad = 0, []
    for options, their in zip(option_sets, theirs):
        ours = gpuscope_output(a, copy_path, frame, options)
        compared += 1
        diff = differences(their, ours, "--no-header" not in options,
                           recorded_time(doc, frame))
        if diff:
            bad.append((options, diff))
    return compared, bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib-dir", required=True)
    ap.add_argument("--python", required=True, help="the Python that has gpustat")
    ap.add_argument("--gpuscope", required=True)
    ap.add_argument("--self-check", action="store_true")
    ap.add_argument("fixtures", nargs="+")
    a = ap.parse_args()
    compared = mismatches = 0
    self_checked = None
    with tempfile.TemporaryDirectory(prefix="gpustat-text.") as work:
        for fixture in a.fixtures:
            name = os.path.basename(fixture)
            with open(fixture) as f:
                doc = json.load(f)
            copy_path, sleepers = with_sleepers(doc, work, name)
            try:
                frames = frames_of(doc)
                bad_here = 0
                for frame in frames:
                    sets = EVERY_FRAME + (MIDDLE_FRAME if frame == frames[len(frames) // 2]
                                          else [])
                    try:
                        n, bad = compare(a, doc, copy_path, frame, sets)
                    except RuntimeError as e:
                        if "pyNVML version does not match" not in str(e):
                            raise
                        # gpustat calls nvmlDeviceGetComputeRunningProcesses unversioned, and
                        # pynvml 13 refuses that against an older driver.
                        print(f"  documented exception: {name}: gpustat cannot read a driver "
                              "older than its pynvml (it calls an unversioned process list); "
                              "not compared")
                        break
                    compared += n
                    for options, diff in bad:
                        bad_here += 1
                        print(f"  {name} frame {frame} gpustat {' '.join(options)}:")
                        for d in diff[:6]:
                            print(f"    {d}")
                    if a.self_check and self_checked is None and frame == frames[-1] \
                            and frames[0] != frame:
                        _, wrong = compare(a, doc, copy_path, frame, [["-a"]],
                                           their_frame=frames[0])
                        self_checked = bool(wrong)
                        print(f"  self-check: gpustat's frame {frames[0]} against gpuscope's "
                              f"frame {frame} of {name}: "
                              f"{'told apart' if wrong else 'NOT told apart'}")
                mismatches += bad_here
                print(f"{name}: {'ok' if bad_here == 0 else 'MISMATCH'}")
            finally:
                for proc in sleepers:
                    proc.kill()
                    proc.wait()
    print(f"gpustat-text: {len(a.fixtures)} fixtures, {compared} outputs compared, "
          f"{mismatches} mismatches")
    if a.self_check and not self_checked:
        print("gpustat-text: the self-check's wrong frame was not reported", file=sys.stderr)
        return 1
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
