#!/usr/bin/env bash
# On a lent GPU (run from the repository root with a release gpuscope in devkit/bin/): `gpuscope smi` beside the real nvidia-smi, live, idle and under load,
# and what each costs. Never changes the GPU's settings.
set -u
OUT=${OUT:-/tmp/out}; W=/tmp/smi; mkdir -p "$W" "$OUT"
B=$PWD/devkit/bin/gpuscope; chmod +x "$PWD"/devkit/bin/*
exec > >(tee "$W/run.log") 2>&1
date -u; nvidia-smi -L
ALL=$(nvidia-smi --help-query-gpu | grep -oE '^"[a-z_.]+"' | tr -d '"')
OK=""; NO=""
for f in $ALL; do
  if "$B" smi --query-gpu="$f" --format=csv >/dev/null 2>&1; then OK="$OK,$f"; else NO="$NO $f"; fi
done
OK=${OK#,}
echo "fields gpuscope smi answers: $(echo "$OK" | tr , '\n' | wc -l) of $(echo "$ALL" | wc -w)"
echo "refused: $NO" > "$W/fields-refused.txt"
compare() { # name, args...
  local name=$1; shift
  nvidia-smi "$@" > "$W/$name.nvidia-smi" 2>&1; echo "nvidia-smi $name exit $?"
  "$B" smi "$@" > "$W/$name.gpuscope" 2>&1; echo "gpuscope smi $name exit $?"
  diff "$W/$name.nvidia-smi" "$W/$name.gpuscope" > "$W/$name.diff"; echo "$name: $(grep -c '^<' "$W/$name.diff") lines differ"
}
for phase in idle load; do
  if [ $phase = load ]; then python3 xtask/device/spin.py 60 6 > "$W/spin.log" 2>&1 & SPIN=$!; sleep 8; fi
  compare L.$phase -L
  compare q.$phase -q
  compare qx.$phase -q -x
  compare qd.$phase -q -d MEMORY,UTILIZATION,TEMPERATURE,POWER,CLOCK,PERFORMANCE,PIDS
  compare csv.$phase --query-gpu="$OK" --format=csv
  compare csvnn.$phase --query-gpu="$OK" --format=csv,noheader,nounits
  compare apps.$phase --query-compute-apps=pid,process_name,gpu_uuid,gpu_bus_id,used_gpu_memory --format=csv
  compare alias.$phase --query-gpu=clocks.sm,clocks.mem,memory.used,utilization.gpu,temperature.gpu,power.draw --format=csv
  compare id.$phase -i 0 --query-gpu=index,name,uuid --format=csv,noheader
done
echo "== cost: 10 runs each of --query-gpu=index,memory.used,utilization.gpu --format=csv"
python3 - "$B" <<'PY' | tee "$W/cost.txt"
import subprocess, sys, time, statistics
q = ["--query-gpu=index,memory.used,utilization.gpu", "--format=csv"]
for name, cmd in [("nvidia-smi", ["nvidia-smi"] + q), ("gpuscope smi", [sys.argv[1], "smi"] + q), ("nvidia-smi -q", ["nvidia-smi", "-q"]), ("gpuscope smi -q", [sys.argv[1], "smi", "-q"])]:
    ts = []
    for _ in range(10):
        t = time.perf_counter(); subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); ts.append(time.perf_counter() - t)
    print(f"{name}: median {statistics.median(ts)*1000:.1f} ms, min {min(ts)*1000:.1f} ms")
PY
[ -n "${SPIN:-}" ] && kill $SPIN 2>/dev/null
date -u
cd "$W" && tar czf "$OUT/smi.tgz" . && ls -la "$OUT"
