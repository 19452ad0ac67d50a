# What device.sh, h36.sh and oneshots.sh share on a lent GPU machine. Sourced, with the run's
# name:
#   HERE=$(cd "$(dirname "$0")" && pwd); . "$HERE/lent.sh" NAME
# It sets OUT (default /tmp/out: where the packed results go), W (a scratch folder), K (the
# carried devkit: $DEVKIT, default devkit/) and B (its bin/), copies all that follows to
# $W/NAME.log, and defines peers_venv, measure and pack.
OUT=${OUT:-/tmp/out}; W=$(mktemp -d); mkdir -p "$OUT"
K=${DEVKIT:-$PWD/devkit}; B=$K/bin
chmod +x "$B"/* 2>/dev/null
exec > >(tee "$W/$1.log") 2>&1

# The peers (nvitop, nvitop-exporter, gpustat) in a virtualenv at $W/venv, from the devkit's
# wheels: the machine reaches no package index.
peers_venv() {
  python3 -m venv "$W/venv" && "$W/venv/bin/pip" install -q --no-index --find-links "$K/wheels" nvitop nvitop-exporter gpustat 2>&1 | tail -2
}

# measure.py over bin/gpuscope-new (and bin/gpuscope-main when carried) beside the peers, idle
# and under load, for at most $MEASURE_TIMEOUT seconds (default $1).
measure() {
  local builds=(--gpuscope "new=$B/gpuscope-new")
  [ -x "$B/gpuscope-main" ] && builds+=(--gpuscope "main=$B/gpuscope-main")
  timeout "${MEASURE_TIMEOUT:-$1}" python3 "$HERE/measure.py" "${builds[@]}" --floor "$B/oneshot-floor" \
    --venv "$W/venv" --out "$W/measure" --runs "${RUNS:-10}" --window "${WINDOW:-15}" --warmup 3 --load
  echo "measure exit $?"
}

# Everything under $W but the virtualenv, packed into $OUT/$1.tgz.
pack() {
  cd "$W" && tar czf "$OUT/$1.tgz" --exclude venv . && ls -la "$OUT"
}
