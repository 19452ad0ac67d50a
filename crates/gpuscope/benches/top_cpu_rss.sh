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
# Usage: bash crates/gpuscope/benches/top_cpu_rss.sh [DURATION]
# Needs tmux and python3 with venv; installs the pinned nvitop into a throwaway virtualenv.
set -euo pipefail
cd "$(dirname "$0")/../../.."

duration=${1:-60}
target=${CARGO_TARGET_DIR:-target}
case $target in /*) ;; *) target=$PWD/$target ;; esac
work=$(mktemp -d)
socket="gpuscope-bench-$$"
trap 'tmux -L "$socket" kill-server 2>/dev/null || true; rm -rf "$work" "${TMUX_TMPDIR:-/tmp}/tmux-$(id -u)/$socket"' EXIT

cargo build --quiet --release -p gpuscope
cargo build --quiet --release -p fake-nvml
"$target/release/fake-nvml-install" "$work/lib" > /dev/null
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check nvitop==1.7.2

gpuscope="$target/release/gpuscope"
fixture="$PWD/fixtures/h100-sxm-8gpu.json"
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
# Each viewer still shows its screen (a crash would have ended its session).
for n in "${names[@]}"; do
  tmux -L "$socket" capture-pane -p -t "$n" | head -3 | sed "s/^/$n: /"
done
