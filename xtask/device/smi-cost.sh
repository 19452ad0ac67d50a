#!/usr/bin/env bash
# On a lent GPU, from the repository root with a release gpuscope in devkit/bin/: gpuscope smi and
# nvidia-smi, each command once a round for 15 rounds, median and fastest (docs/benchmarks.md).
set -u
B=$PWD/devkit/bin/gpuscope; chmod +x $B
nvidia-smi -L
python3 - "$B" <<'PY'
import subprocess, sys, time, statistics
q = ["--query-gpu=index,memory.used,utilization.gpu", "--format=csv"]
cases = [("nvidia-smi --query-gpu", ["nvidia-smi"] + q), ("gpuscope smi --query-gpu", [sys.argv[1], "smi"] + q),
         ("nvidia-smi -L", ["nvidia-smi", "-L"]), ("gpuscope smi -L", [sys.argv[1], "smi", "-L"]),
         ("nvidia-smi -q", ["nvidia-smi", "-q"]), ("gpuscope smi -q", [sys.argv[1], "smi", "-q"]),
         ("gpuscope snapshot --json", [sys.argv[1], "snapshot", "--json"])]
ts = {n: [] for n, _ in cases}
for _ in range(15):
    for n, c in cases:
        t = time.perf_counter(); subprocess.run(c, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); ts[n].append(time.perf_counter() - t)
for n, v in ts.items():
    print(f"{n}: median {statistics.median(v)*1000:.1f} ms, min {min(v)*1000:.1f} ms")
PY
