#!/usr/bin/env bash
# The one-shots on a real driver, in one command and about 2 minutes of device time:
#   bash xtask/device/oneshots.sh
# from the repository root, with a git-ignored devkit/ carried there holding bin/gpuscope-new
# (the release build to measure), bin/gpuscope-main (the build to compare with) and bin/xtask.
# It writes under $OUT (default /tmp/out), in one archive:
#   nvidia-smi -q and -q -x beside gpuscope smi's, taken at the same minute (the differential's
#   reference for the statics a recording holds);
#   record.json: `xtask record-fixture`, 5 frames 500 ms apart, idle;
#   doctor.json: the cost profile of every call (set-up calls too), for fixtures/costs/;
#   the one-shot timelines of `snapshot --json`, `smi -q` and `smi`;
#   smi-cost.sh: the one-shots of both builds beside nvidia-smi's.
# It never changes the GPU's settings.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lent.sh" oneshots
echo "== machine"; date -u; nvidia-smi -L; uptime
nvidia-smi -q > "$W/nvidia-smi-q.txt"; nvidia-smi -q -x > "$W/nvidia-smi-q-x.xml"
"$B/gpuscope-new" smi -q > "$W/gpuscope-smi-q.txt" 2>&1
"$B/gpuscope-new" smi -q -x > "$W/gpuscope-smi-q-x.xml" 2>&1
echo "== record-fixture"
timeout 60 "$B/xtask" record-fixture --frames 5 --interval 500ms --out "$W/record.json" \
  --description "One NVIDIA H100 80GB HBM3, idle, recorded by cargo xtask record-fixture" 2>&1 | tail -2
echo "== doctor"
timeout 120 "$B/gpuscope-new" doctor --json > "$W/doctor.json" 2> "$W/doctor.err"
echo "doctor --json exit $?"; cat "$W/doctor.err"
for what in "snapshot --json" "smi -q" "smi"; do
  f="$W/doctor-timeline-${what// /_}.txt"
  timeout 120 "$B/gpuscope-new" doctor --repeat 1 --events-for 0 --timeline-of "$what" > "$f" 2>&1
  sed -n '/One-shot timeline/,/^$/p' "$f"
done
grep -n -A4 "^  FAIL\|^  warn" "$W/doctor-timeline-smi.txt" | head -20
echo "== the one-shots against nvidia-smi"
ROUNDS=${ROUNDS:-15} timeout 240 bash "$HERE/smi-cost.sh" "new=$B/gpuscope-new" "main=$B/gpuscope-main"
date -u
pack oneshots
