#!/usr/bin/env bash
# Real NVML clients against every fixture: installs the fake libnvidia-ml.so.1 in a temporary
# directory, makes a throwaway virtualenv with pinned pynvml (nvidia-ml-py) and nvitop, and runs
# real_clients.py, which checks that both report what each fixtures/*.json holds; then
# gpustat_stat.py, which checks that `gpuscope stat --json` (the gpustat front door, the debug
# build in the target directory or $GPUSCOPE_BIN) prints what pinned gpustat prints, and
# gpustat_text.py, which checks its lines byte for byte; then nvisel_door.py (without fixture arguments), which checks that gpuscope's `nvisel` front door
# prints what pinned nvitop's nvisel prints and exits as it does, over 13 scenarios and 39
# option sets; then
# nvitop_sm.py, which checks nvitop's %SM over the real H100 recording (fake-nvml's replay
# clock). Without fixture arguments it also runs the real-hardware differential
# (real_hardware.py): pynvml over the real H100 recording must answer as the real driver did.
#
#   bash crates/fake-nvml/tests/real_clients.sh [--prebuilt] [FIXTURE.json...]
#
# Uses the debug build of fake-nvml in cargo's target directory: built (`cargo build -p
# fake-nvml`) unless --prebuilt says that the last cargo command built it already (as
# `cargo test --workspace` does; .ci/run uses this to avoid a second build with other features).
# Environment:
#   REAL_CLIENTS_VENV  reuse (or create) the virtualenv at this path instead of a temporary one.
# Needs python3 with venv and pip access to PyPI; as root on Debian, installs python3-venv with
# apt-get when `python3 -m venv` does not work.
# Exits non-zero on any mismatch; the real-clients line is
#   real-clients: F fixtures, N values checked, M mismatches
# and the differential's (twice: the recording as committed, and recorded again)
#   real-hardware: FIXTURE frame N: S of 113 answered as the real driver did (K not recorded); X misses
set -euo pipefail

# The client versions this check was written and tested against.
PINS=(nvidia-ml-py==13.615.71 nvitop==1.7.2 gpustat==1.1.1)

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
cd "$root"

work="$(mktemp -d "${TMPDIR:-/tmp}/real-clients.XXXXXX")"
trap 'rm -rf "$work"' EXIT

prebuilt=0
if [ "${1:-}" = --prebuilt ]; then
    prebuilt=1
    shift
fi
if [ $prebuilt = 0 ]; then
    echo "== building fake-nvml (debug)"
    cargo build --quiet --locked -p fake-nvml --lib
fi
target_dir="$(cargo metadata --format-version 1 --no-deps --locked |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
lib="$target_dir/debug/libfake_nvml.so"
if [ $prebuilt = 1 ]; then
    # `cargo test` leaves the cdylib in deps/ (where fake-nvml's own tests find it).
    if [ -f "$target_dir/debug/deps/libfake_nvml.so" ]; then
        lib="$target_dir/debug/deps/libfake_nvml.so"
    elif [ ! -f "$lib" ]; then
        echo "== no prebuilt fake-nvml in $target_dir/debug: building it (debug)"
        cargo build --quiet --locked -p fake-nvml --lib
    fi
fi
[ -f "$lib" ] || { echo "real-clients: no $lib after the build" >&2; exit 1; }
mkdir -p "$work/lib"
cp "$lib" "$work/lib/libnvidia-ml.so.1"
for name in libnvidia-ml.so libcuda.so.1 libcuda.so; do
    ln -s libnvidia-ml.so.1 "$work/lib/$name"
done

venv="${REAL_CLIENTS_VENV:-$work/venv}"
make_venv() {
    [ -x "$venv/bin/python" ] && return 0
    rm -rf "$venv"
    python3 -m venv "$venv" 2>/dev/null && return 0
    rm -rf "$venv"
    # Debian ships venv (and ensurepip) separately.
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "== python3 -m venv does not work: installing python3-venv"
        apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
        /usr/bin/python3 -m venv "$venv" && return 0
    fi
    echo "real-clients: cannot make a virtualenv (install python3-venv)" >&2
    return 1
}
echo "== virtualenv with ${PINS[*]}"
make_venv
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${PINS[@]}"

differential=0
if [ $# -eq 0 ]; then
    set -- fixtures/*.json
    differential=1
fi
echo "== pynvml and nvitop over $# fixtures"
"$venv/bin/python" "$here/real_clients.py" --lib-dir "$work/lib" "$@"
echo "== gpustat --json against gpuscope stat --json (the gpustat front door) over $# fixtures"
gpuscope_bin="${GPUSCOPE_BIN:-$target_dir/debug/gpuscope}"
if [ ! -x "$gpuscope_bin" ]; then
    cargo build --quiet --locked -p gpuscope
fi
"$venv/bin/python" "$here/gpustat_stat.py" --lib-dir "$work/lib" --gpustat "$venv/bin/gpustat" \
    --gpuscope "$gpuscope_bin" "$@"
echo "== gpustat's lines against gpuscope stat's (the gpustat front door) over $# fixtures"
"$venv/bin/python" "$here/gpustat_text.py" --lib-dir "$work/lib" --python "$venv/bin/python" \
    --gpuscope "$gpuscope_bin" --self-check "$@"
if [ $differential = 1 ]; then
    echo "== nvisel (nvitop ${PINS[1]#nvitop==}) against gpuscope's nvisel door: 13 scenarios x 39 option sets"
    # Its own scenarios, so not with fixture arguments. Prints "nvisel-door: M of N cases
    # matched ...; D documented differences (...); U unexplained" and fails on any unexplained
    # difference (docs/cli.md names the documented ones).
    "$venv/bin/python" "$here/nvisel_door.py" --lib-dir "$work/lib" --gpuscope "$gpuscope_bin"
fi
echo "== nvitop's %SM over the real H100 recording, at frame 30"
"$venv/bin/python" "$here/nvitop_sm.py" --lib-dir "$work/lib"

if [ $differential = 1 ]; then
    # The real-hardware differential (real_hardware.py): pynvml over fake-nvml replaying the
    # real H100 recording at frame 50, the last frame recorded before pynvml's answers were
    # taken on the real driver (checked by the energy counter), must answer as the driver did.
    echo "== real-hardware differential: pynvml over the real H100 recording"
    answers=fixtures/h100-real/pynvml-answers.load.json
    "$venv/bin/python" "$here/real_hardware.py" --lib-dir "$work/lib" \
        --fixture fixtures/h100-real.json --answers "$answers" --frame 50 --check-frame
    # A recording made after the queries it lacks were added: record-fixture over fake-nvml
    # serving it with those answers filled in (see ADDED_ANSWERS), which must then answer all.
    "$venv/bin/python" "$here/real_hardware.py" --lib-dir "$work/lib" \
        --fixture fixtures/h100-real.json --answers "$answers" \
        --write-with-added-answers "$work/h100-real-added.json"
    if ! GPUSCOPE_FAKE_NVML_FIXTURE="$work/h100-real-added.json" GPUSCOPE_FAKE_NVML_FRAME=50 \
        cargo run --quiet --locked -p xtask -- record-fixture \
        --nvml-lib "$work/lib/libnvidia-ml.so.1" --frames 1 --interval 10ms \
        --out "$work/h100-real-rerecorded.json" > "$work/record.log" 2>&1; then
        cat "$work/record.log" >&2
        exit 1
    fi
    "$venv/bin/python" "$here/real_hardware.py" --lib-dir "$work/lib" \
        --fixture "$work/h100-real-rerecorded.json" --answers "$answers" --frame 0 \
        --expect-complete --label "h100-real recorded again after issue 22"
fi
