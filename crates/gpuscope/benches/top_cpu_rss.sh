#!/usr/bin/env bash
# CPU and memory of `gpuscope top` beside nvitop's viewer, both in tmux, over the same fixture.
#
# Runs, side by side in separate tmux sessions (160x50) for DURATION seconds (default 60):
#   gpuscope top --demo            at 1 s and 0.25 s refresh (the demo fixture, replayed)
#   gpuscope top over fake-nvml    at 1 s and 0.25 s (the NVML backend, live host look-ups)
#   the same over a one-frame copy of the fixture ("1frame": the fake library then holds one
#   frame, not 30, so RSS is close to what the viewer costs against a real driver)
#   nvitop over fake-nvml          at 1 s and 0.25 s (the same fixture: fixtures/h100-sxm-8gpu.json)
# and reports each one's CPU (utime + stime from /proc/PID/stat over the wall time, percent of
# one core, after a 5 s warm-up) and RSS (VmRSS at the end, VmHWM peak).
#
# The GPU processes fake-nvml serves are live: one `sleep` per GPU PID of the fixture is started
# and its PID put in the fixture in place of the recorded one, so the viewers' host look-ups
# find real processes and do real work (replayed --demo rows use the recorded host facts).
# Then, where strace is installed, each viewer at 1 s over fake-nvml is traced for 10 s
# (strace -f -y -p) and its system calls are counted per refresh and per GPU process: all of
# them, and those on the live processes' /proc/PID files.
#
# Usage: bash crates/gpuscope/benches/top_cpu_rss.sh [DURATION]
# Needs tmux and python3 with venv; installs the pinned nvitop into a throwaway virtualenv.
set -euo pipefail
cd "$(dirname "$0")/../../.."

duration=${1:-60}
target=${CARGO_TARGET_DIR:-target}
case $target in /*) ;; *) target=$PWD/$target ;; esac
work=$(mktemp -d)
socket="gpuscope-bench-$$"
live=()
trap 'tmux -L "$socket" kill-server 2>/dev/null || true; kill "${live[@]}" 2>/dev/null || true; rm -rf "$work" "${TMUX_TMPDIR:-/tmp}/tmux-$(id -u)/$socket"' EXIT

cargo build --quiet --release -p gpuscope
cargo build --quiet --release -p fake-nvml
"$target/release/fake-nvml-install" "$work/lib" > /dev/null
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check nvitop==1.7.2

gpuscope="$target/release/gpuscope"
recorded="$PWD/fixtures/h100-sxm-8gpu.json"
fixture="$work/live.json"
# One live process per GPU PID of the recording.
n=$(python3 - "$recorded" <<'PY'
import json, sys
f = json.load(open(sys.argv[1]))
pids = {p["pid"] for fr in f["frames"] for d in fr["devices"].values()
        for k in ("compute_processes", "graphics_processes")
        for p in (d.get(k) or {}).get("ok", [])}
print(len(pids))
PY
)
for _ in $(seq "$n"); do sleep 3600 & live+=($!); done
# The recording with the live PIDs in place of the recorded ones, everywhere they appear.
python3 - "$recorded" "$fixture" "${live[@]}" <<'PY'
import json, sys
f = json.load(open(sys.argv[1]))
order = []
for fr in f["frames"]:
    for d in fr["devices"].values():
        for k in ("compute_processes", "graphics_processes"):
            for p in (d.get(k) or {}).get("ok", []):
                if p["pid"] not in order:
                    order.append(p["pid"])
new = dict(zip(order, map(int, sys.argv[3:])))
def re(pid): return new.get(pid, pid)
for fr in f["frames"]:
    for d in fr["devices"].values():
        for k in ("compute_processes", "graphics_processes", "process_utilization"):
            for p in (d.get(k) or {}).get("ok", []):
                p["pid"] = re(p["pid"])
    fr["host"]["processes"] = {str(re(int(k))): v for k, v in fr["host"]["processes"].items()}
f["host"]["processes"] = {str(re(int(k))): v for k, v in f["host"]["processes"].items()}
json.dump(f, open(sys.argv[2], "w"))
PY
fake="env GPUSCOPE_FAKE_NVML_FIXTURE=$fixture LD_LIBRARY_PATH=$work/lib"
# Frame 5 alone, with the host facts of the processes alive in it (fixture rule 8).
python3 - "$fixture" "$work/one-frame.json" <<'PY'
import json, sys
f = json.load(open(sys.argv[1]))
frame = f["frames"][5]
frame["t_ms"] = 0
f["frames"] = [frame]
alive = set(frame["host"]["processes"])
f["host"]["processes"] = {k: v for k, v in f["host"]["processes"].items() if k in alive}
json.dump(f, open(sys.argv[2], "w"))
PY
fake1="env GPUSCOPE_FAKE_NVML_FIXTURE=$work/one-frame.json LD_LIBRARY_PATH=$work/lib"

# Session names hold no dots (tmux reads a dot in a target as "window.pane").
declare -A cmds=(
  [gpuscope-demo-1000ms]="$gpuscope top --demo --interval 1"
  [gpuscope-demo-250ms]="$gpuscope top --demo --interval 0.25"
  [gpuscope-nvml-1000ms]="$fake $gpuscope top --interval 1"
  [gpuscope-nvml-250ms]="$fake $gpuscope top --interval 0.25"
  [gpuscope-nvml-1frame-1000ms]="$fake1 $gpuscope top --interval 1"
  [gpuscope-nvml-1frame-250ms]="$fake1 $gpuscope top --interval 0.25"
  [nvitop-1000ms]="$fake $work/venv/bin/nvitop --interval 1"
  [nvitop-250ms]="$fake $work/venv/bin/nvitop --interval 0.25"
)
names=(gpuscope-demo-1000ms gpuscope-demo-250ms gpuscope-nvml-1000ms gpuscope-nvml-250ms
       gpuscope-nvml-1frame-1000ms gpuscope-nvml-1frame-250ms nvitop-1000ms nvitop-250ms)

for n in "${names[@]}"; do
  # exec: the pane's process is the viewer itself.
  tmux -L "$socket" -f /dev/null new-session -d -s "$n" -x 160 -y 50 "exec ${cmds[$n]}"
done
sleep 5

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
declare -A pid start
for n in "${names[@]}"; do
  pid[$n]=$(tmux -L "$socket" display-message -p -t "$n" '#{pane_pid}')
  start[$n]=$(ticks "${pid[$n]}")
done
t0=$(date +%s.%N)
sleep "$duration"
t1=$(date +%s.%N)
hz=$(getconf CLK_TCK)

echo "| viewer | refresh | CPU (% of one core) | RSS at end | peak RSS |"
echo "| --- | --- | --- | --- | --- |"
for n in "${names[@]}"; do
  p=${pid[$n]}
  end=$(ticks "$p")
  rss=$(awk '/VmRSS/ {print $2}' "/proc/$p/status")
  hwm=$(awk '/VmHWM/ {print $2}' "/proc/$p/status")
  awk -v n="$n" -v d=$((end - ${start[$n]})) -v hz="$hz" -v t0="$t0" -v t1="$t1" \
      -v rss="$rss" -v hwm="$hwm" 'BEGIN {
    split(n, a, "-"); refresh = a[length(a)]; viewer = n; sub("-" refresh "$", "", viewer)
    printf "| %s | %s | %.2f%% | %.1f MB | %.1f MB |\n", viewer, refresh, 100 * d / hz / (t1 - t0), rss / 1024, hwm / 1024
  }'
done
# System calls per refresh, per GPU process, of the viewers at 1 s over fake-nvml.
if command -v strace > /dev/null; then
  pidre=$(IFS='|'; echo "${live[*]}")
  echo
  echo "| viewer (1 s, fake-nvml) | calls in 10 s | per refresh per GPU process | on /proc/PID of the GPU processes, per refresh per GPU process |"
  echo "| --- | --- | --- | --- |"
  for n in gpuscope-nvml-1000ms nvitop-1000ms; do
    timeout -s INT 10 strace -f -y -qq -o "$work/strace-$n.log" -p "${pid[$n]}" 2> /dev/null || true
    all=$(grep -v -c -e 'resumed>' -e '+++ exited' -e '^[0-9]* --- SIG' "$work/strace-$n.log" || true)
    onp=$(grep -v -e 'resumed>' "$work/strace-$n.log" | grep -c -E "/proc/($pidre)/" || true)
    awk -v n="$n" -v a="$all" -v o="$onp" -v g="${#live[@]}" 'BEGIN {
      printf "| %s | %d | %.1f | %.1f |\n", n, a, a / 10 / g, o / 10 / g }'
  done
else
  echo "(strace not installed: system calls not counted)"
fi
# Each viewer still shows its screen (a crash would have ended its session).
for n in "${names[@]}"; do
  tmux -L "$socket" capture-pane -p -t "$n" | head -3 | sed "s/^/$n: /"
done
