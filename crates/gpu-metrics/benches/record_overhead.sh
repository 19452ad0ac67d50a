#!/usr/bin/env bash
# Measures the CPU and memory cost of `gpuscope record` on the built-in 8-GPU demo fixture:
# one recording at 1 Hz and one at 10 Hz, run side by side, each streaming to a CSV file.
# CPU is (utime + stime) from /proc/<pid>/stat over wall time, from the first second on (so
# start-up is not counted); memory is VmRSS and VmHWM (peak RSS) from /proc/<pid>/status.
# The 10 Hz recording runs LONG seconds (default 180: as many samples as 30 minutes at 1 Hz) and
# its memory is read at SHORT seconds (default 60) and at the end, to show it stays flat.
#
# For comparison, in the same run: the peak RSS of a one-shot `gpuscope snapshot` on the same
# source (needs GNU time at /usr/bin/time), which holds the same replayed fixture in memory.
#
# Usage: crates/gpu-metrics/benches/record_overhead.sh
#   SHORT=60 LONG=180 SOURCE=--demo by default; e.g. SOURCE="--fixture fixtures/old-driver.json".
set -euo pipefail
cd "$(dirname "$0")/../../.."
SHORT=${SHORT:-60}
LONG=${LONG:-180}
SOURCE=${SOURCE:---demo}
cargo build --release -q -p gpuscope
BIN="${CARGO_TARGET_DIR:-target}/release/gpuscope"
TICK=$(getconf CLK_TCK)
OUT=$(mktemp -d)

ticks() { # utime + stime of a PID, in clock ticks
    sed 's/^.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'
}
kib() { # a field of /proc/<pid>/status, in KiB
    awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status"
}
report() { # LABEL PID TICKS_BEFORE TICKS_NOW TIME_BEFORE TIME_NOW CSV: CPU use between, memory now
    awk -v l="$1" -v c="$(($4 - $3))" -v t="$TICK" -v a="$5" -v b="$6" \
        'BEGIN { printf "  %s CPU %.3f%% of one core\n", l, 100 * c / t / (b - a) }'
    echo "         RSS $(kib "$2" VmRSS) KiB, peak $(kib "$2" VmHWM) KiB, $(($(wc -l <"$7") - 1)) samples"
}

"$BIN" record $SOURCE --interval 1s --csv "$OUT/1hz.csv" -o "$OUT/1hz.png" >"$OUT/1hz.out" 2>/dev/null &
P1=$!
"$BIN" record $SOURCE --interval 100ms --csv "$OUT/10hz.csv" -o "$OUT/10hz.png" >"$OUT/10hz.out" 2>/dev/null &
P10=$!
sleep 1
T0=$(date +%s.%N)
C1_0=$(ticks $P1)
C10_0=$(ticks $P10)
sleep $((SHORT - 1))
T1=$(date +%s.%N)
C1_1=$(ticks $P1)
C10_1=$(ticks $P10)
echo "after ${SHORT}s:"
report "1 Hz: " $P1 "$C1_0" "$C1_1" "$T0" "$T1" "$OUT/1hz.csv"
report "10 Hz:" $P10 "$C10_0" "$C10_1" "$T0" "$T1" "$OUT/10hz.csv"
kill -INT $P1
wait $P1
echo "  1 Hz exit $?, $(wc -l <"$OUT/1hz.out") summary lines"
sleep $((LONG - SHORT))
T2=$(date +%s.%N)
C10_2=$(ticks $P10)
echo "after ${LONG}s:"
report "10 Hz:" $P10 "$C10_0" "$C10_2" "$T0" "$T2" "$OUT/10hz.csv"
kill -INT $P10
wait $P10
echo "  10 Hz exit $?, $(wc -l <"$OUT/10hz.out") summary lines"
if [ -x /usr/bin/time ]; then
    # shellcheck disable=SC2086
    /usr/bin/time -f "one-shot snapshot, same source: peak RSS %M KiB" "$BIN" snapshot $SOURCE >/dev/null
fi
rm -rf "$OUT"
