#!/usr/bin/env bash
# The side-by-side run on a lent GPU machine (docs/benchmarks.md, "On a real H100").
#
# Build here, carry there: a git-ignored folder (default devkit/, or $DEVKIT) holding
#   bin/gpuscope-new   the release build to measure (add bin/gpuscope-main to compare a second)
#   bin/oneshot-floor  cargo build --release -p xtask --bin oneshot-floor
#   wheels/            pip download -d wheels nvitop nvitop-exporter nvidia-ml-py; pip wheel gpustat
# then, from the repository root on the GPU machine: bash xtask/device/device.sh
# It records versions, runs `gpuscope doctor` idle and under load (spin.py), logs one snapshot's
# NVML calls (-vv), and runs measure.py: the one-shots, the viewers and the exporters beside
# nvitop, nvitop-exporter, gpustat and nvidia-smi, idle and under load. It never changes the
# GPU's settings. Results under $OUT (default /tmp/out), packed in one file.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lent.sh" device
echo "== machine"; date -u; uname -a; nproc; nvidia-smi -L
nvidia-smi --query-gpu=name,driver_version,pstate,power.draw,power.limit,clocks.sm,mig.mode.current --format=csv
python3 --version; python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.is_available())' 2>&1 | tail -1
echo "== peers"
peers_venv
echo "== doctor, idle then under load"
timeout 60 "$B/gpuscope-new" doctor --events-for 3s > "$W/doctor-idle.txt" 2>&1; echo "doctor exit $?"
python3 "$HERE/spin.py" 40 6 > "$W/spin.log" 2>&1 &
SPIN=$!
sleep 8; nvidia-smi --query-gpu=utilization.gpu,power.draw,memory.used --format=csv
timeout 60 "$B/gpuscope-new" doctor --events-for 3s > "$W/doctor-load.txt" 2>&1; echo "doctor (load) exit $?"
timeout 60 "$B/gpuscope-new" doctor --json --repeat 9 --events-for 0 > "$W/doctor-load.json" 2>/dev/null
kill $SPIN; wait $SPIN 2>/dev/null
echo "== one snapshot with its NVML calls"
timeout 60 "$B/gpuscope-new" -vv snapshot --json > "$W/snapshot.json" 2> "$W/snapshot-vv.log"; echo "exit $?"
echo "== side by side"
measure 420
date -u
pack device
