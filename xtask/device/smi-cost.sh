#!/usr/bin/env bash
# On a lent GPU, from the repository root: gpuscope's one-shots beside nvidia-smi's, each
# command once a round for $ROUNDS rounds (default 15), median and fastest
# (docs/benchmarks.md). Builds to compare as NAME=PATH arguments; by default one, the release
# gpuscope in devkit/bin/:
#   bash xtask/device/smi-cost.sh new=devkit/bin/gpuscope-new main=devkit/bin/gpuscope-main
set -u
[ $# -gt 0 ] || set -- "gpuscope=$PWD/devkit/bin/gpuscope"
for b in "$@"; do chmod +x "${b#*=}"; done
nvidia-smi -L
python3 - "$@" <<'PY'
import os, subprocess, sys, time, statistics
builds = [a.split("=", 1) for a in sys.argv[1:]]
q = ["--query-gpu=index,memory.used,utilization.gpu", "--format=csv"]
forms = [("--query-gpu", q), ("-L", ["-L"]), ("(table)", []), ("-q", ["-q"]), ("-q -x", ["-q", "-x"])]
cases = []
for label, args in forms:
    cases.append((f"nvidia-smi {label}", ["nvidia-smi"] + args))
    for name, path in builds:
        cases.append((f"gpuscope smi {label} ({name})", [path, "smi"] + args))
for name, path in builds:
    cases.append((f"gpuscope snapshot --json ({name})", [path, "snapshot", "--json"]))
    cases.append((f"gpuscope snapshot ({name})", [path, "snapshot"]))
ts = {n: [] for n, _ in cases}
for _ in range(int(os.environ.get("ROUNDS", "15"))):
    for n, c in cases:
        t = time.perf_counter(); subprocess.run(c, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); ts[n].append(time.perf_counter() - t)
for n, v in ts.items():
    print(f"{n}: median {statistics.median(v)*1000:.1f} ms, min {min(v)*1000:.1f} ms")
PY
