#!/usr/bin/env bash
# Issue 36, items 1, 3 and 5, on a lent GPU machine, in one command and about 5 minutes:
#   bash xtask/device/h36.sh
# from the repository root, with a git-ignored devkit/ (or $DEVKIT) carried there holding
#   bin/gpuscope-new   the release build to measure (bin/gpuscope-main too, to compare)
#   bin/oneshot-floor  cargo build --release -p xtask --bin oneshot-floor
#   bin/xtask          cargo build --release -p xtask (record-fixture: the cost profile with
#                      the driver's concurrency)
#   wheels/            as device.sh says (nvitop, nvitop-exporter, nvidia-ml-py, gpustat)
# It measures:
#   1. doctor's cost profile (set-up calls included) and the one-shot timeline of `smi -L` and
#      `snapshot --json`;
#   3. the driver's concurrency: concurrency.py (ctypes: the same query on N threads of one GPU
#      and on one thread per GPU at once, against one thread), and record-fixture's cost
#      profile, whose `concurrency` field fake-nvml emulates;
#   5. where the continuous commands' CPU goes: `perf record` of `top -i 1` and of the one-shots
#      (when perf is installed), then measure.py (per-thread CPU of top and export against
#      nvitop and nvitop-exporter, idle and under load; the one-shots against the floor) and
#      smi-cost.sh (the one-shots against nvidia-smi's).
# It never changes the GPU's settings. Results under $OUT (default /tmp/out) in one file.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lent.sh" h36
echo "== machine"; date -u; uname -a; nproc; nvidia-smi -L; uptime
nvidia-smi --query-gpu=name,driver_version,pstate,power.draw --format=csv

echo "== 3. the driver's concurrency (ctypes)"
timeout 60 python3 "$HERE/concurrency.py" --calls 200 --threads 4 | tee "$W/concurrency.jsonl"
if [ -x "$B/xtask" ]; then
  echo "== 3. record-fixture's cost profile"
  timeout 60 "$B/xtask" record-fixture --frames 3 --interval 200ms --out "$W/record.json" 2>&1 | tail -3
  python3 -c 'import json,sys; c=json.load(open(sys.argv[1])).get("nvml_costs") or {}; print(json.dumps({k: c.get(k) for k in ("concurrency", "concurrency_probe")}, indent=1))' "$W/record.json"
fi

echo "== 1. doctor: every call's cost (set-up calls too) and one one-shot's timeline"
# doctor.json is the cost profile to put in fixtures/costs/ (it now holds the set-up calls,
# the concurrency and the timeline of `snapshot --json`); the two texts time `smi -L` and
# `snapshot --json` step by step on the real driver.
timeout 120 "$B/gpuscope-new" doctor --json > "$W/doctor.json" 2> "$W/doctor.err"
echo "doctor --json exit $? ($(wc -c < "$W/doctor.json") bytes)"
for what in "smi -L" "snapshot --json"; do
  timeout 120 "$B/gpuscope-new" doctor --repeat 1 --events-for 0 --timeline-of "$what" \
    > "$W/doctor-timeline-${what// /_}.txt" 2>&1
  sed -n '/One-shot timeline/,/^$/p' "$W/doctor-timeline-${what// /_}.txt"
done

echo "== 5. perf"
if command -v perf >/dev/null && perf stat -e instructions true >/dev/null 2>&1; then
  timeout 60 perf record -q -F 2999 -g -o "$W/perf-oneshots.data" -- bash -c \
    "for i in \$(seq 10); do '$B/gpuscope-new' smi -L; '$B/gpuscope-new' snapshot --json; done" >/dev/null 2>&1
  perf report -i "$W/perf-oneshots.data" --stdio --no-children --sort dso,sym 2>/dev/null | head -80 > "$W/perf-oneshots.txt"
  # top on a pseudo-terminal of 200x60, profiled for 15 s after 3 s of warm-up.
  timeout 30 script -qfc "stty cols 200 rows 60; exec '$B/gpuscope-new' top -i 1" /dev/null >/dev/null 2>&1 &
  S=$!; sleep 3
  P=$(pgrep -n -f "gpuscope-new top -i 1$" || true)
  if [ -n "$P" ]; then
    timeout 25 perf record -q -F 999 -g -p "$P" -o "$W/perf-top.data" -- sleep 15 >/dev/null 2>&1
    perf report -i "$W/perf-top.data" --stdio --no-children --sort comm,dso,sym 2>/dev/null | head -80 > "$W/perf-top.txt"
  fi
  kill "$S" 2>/dev/null; wait "$S" 2>/dev/null
  head -30 "$W/perf-oneshots.txt" "$W/perf-top.txt" 2>/dev/null
else
  echo "perf: not available here"
fi

echo "== 5. per-thread CPU, one-shots, viewers and exporters beside the peers"
peers_venv
measure 300
echo "== the one-shots against nvidia-smi"
timeout 120 bash "$HERE/smi-cost.sh" "new=$B/gpuscope-new" $([ -x "$B/gpuscope-main" ] && echo "main=$B/gpuscope-main")
date -u
pack h36
