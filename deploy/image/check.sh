#!/usr/bin/env bash
# Builds the container image in a throw-away buildah store and checks it as CI: at most 24 MB
# (the layers as a runtime unpacks them), its entry point `gpuscope export`, its user not root,
# no shell; run with `buildah run` (chroot isolation: no daemon, no namespaces to set up), the
# entry point with `--demo` serves /metrics (under the names GPUSCOPE_EXPORT_NAMES chooses) and
# /health, and without NVML in the image the
# real-GPU mode fails while `--demo=auto` falls back to the recording.
#
# Usage: deploy/image/check.sh PATH-TO-RELEASE-GPUSCOPE
# buildah is installed from Debian if missing (deploy/image/build.sh does it).
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="$(realpath "$1")"
# 24 MB: the binary grew from 13.6 to 19.5 MB stripped with nvidia-smi 580's fields and
# -q, the exporter's doors and doctor's driver checks and bundle (deploy/README.md).
max_bytes=$((24 * 1000 * 1000))

store="$(mktemp -d)"
ctr=""
pid=""
B() { buildah --storage-driver vfs --root "$store/root" --runroot "$store/run" "$@"; }
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2> /dev/null || true; fi
  if [ -n "$ctr" ]; then B rm "$ctr" > /dev/null 2>&1 || true; fi
  # vfs layers are plain directories, some read-only: make them removable first.
  chmod -R u+w "$store" 2> /dev/null || true
  rm -rf "$store"
}
trap cleanup EXIT
fail() { echo "image check: $*" >&2; exit 1; }

tag="localhost/gpuscope:check"
BUILDAH_OPTS="--storage-driver vfs --root $store/root --runroot $store/run" \
  deploy/image/build.sh --binary "$bin" --tag "$tag"

# Size: every layer, uncompressed (what a node unpacks), and as pushed (gzip).
B push --quiet "$tag" "dir:$store/pushed"
read -r unpacked pushed < <(python3 - "$store/pushed" <<'PY'
import gzip, json, os, sys
d = sys.argv[1]
layers = json.load(open(os.path.join(d, "manifest.json")))["layers"]
blob = lambda l: os.path.join(d, l["digest"].split(":")[1])
print(sum(len(gzip.open(blob(l)).read()) for l in layers), sum(l["size"] for l in layers))
PY
)
echo "image: $unpacked bytes unpacked, $pushed bytes pushed (gzip)"
[ "$unpacked" -le "$max_bytes" ] || fail "$unpacked bytes, more than $max_bytes"

B inspect --type image "$tag" > "$store/inspect.json"
config() {
  python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["OCIv1"]["config"]; print(eval(sys.argv[2]))' \
    "$store/inspect.json" "$1"
}
user="$(config 'c.get("User", "")')"
entrypoint="$(config 'json.dumps(c.get("Entrypoint"))')"
licences="$(config 'c["Labels"].get("org.opencontainers.image.licenses")')"
version="$(config 'c["Labels"].get("org.opencontainers.image.version")')"
[ "$entrypoint" = '["/usr/bin/gpuscope", "export"]' ] || fail "entry point $entrypoint"
case "$user" in "" | 0 | 0:* | root | root:*) fail "runs as root ('$user')" ;; esac
[ "$licences" = "MIT OR Apache-2.0" ] || fail "licence label '$licences'"
[ "$version" = "$("$bin" --version | awk '{print $2}')" ] || fail "version label '$version'"
echo "image: user $user, entry point $entrypoint, version $version, licences $licences"

ctr="$(B from --quiet "$tag")"
if B run --isolation chroot "$ctr" -- /bin/sh -c true > /dev/null 2>&1; then
  fail "has a shell"
fi
# No NVML in the image: the real-GPU mode fails, and --demo=auto falls back to the recording.
# Judged by exit status only: under load, `buildah run` can lose the last of a short-lived
# process's output (seen once in CI: the message missing, its exit status there).
if B run --isolation chroot "$ctr" -- /usr/bin/gpuscope snapshot > /dev/null 2>&1; then
  fail "snapshot without NVML succeeded"
fi
B run --isolation chroot "$ctr" -- /usr/bin/gpuscope snapshot --demo=auto > /dev/null 2>&1 ||
  fail "snapshot --demo=auto without NVML failed"

# The entry point as the image declares it, with --demo, on a free loopback port (chroot
# isolation shares the host's network), publishing gpuscope's names and dcgm-exporter's as the
# environment chooses (GPUSCOPE_EXPORT_NAMES, as a DaemonSet's env sets it).
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
mapfile -t argv < <(python3 -c 'import json,sys; print("\n".join(json.loads(sys.argv[1])))' "$entrypoint")
B run --isolation chroot --env GPUSCOPE_EXPORT_NAMES=gpuscope,dcgm "$ctr" -- \
  "${argv[@]}" --demo --listen "127.0.0.1:$port" \
  > "$store/exporter.log" 2>&1 &
runner=$!
for _ in $(seq 100); do
  if curl -fsS "http://127.0.0.1:$port/health" > "$store/health" 2> /dev/null; then break; fi
  kill -0 "$runner" 2> /dev/null || fail "the exporter ended: $(cat "$store/exporter.log")"
  sleep 0.1
done
pid="$(pgrep -f -- "^/usr/bin/gpuscope export --demo --listen 127.0.0.1:$port$" | head -1 || true)"
[ "$(cat "$store/health")" = "ok" ] || fail "/health: $(cat "$store/health")"
curl -fsS "http://127.0.0.1:$port/metrics" > "$store/metrics"
up="$(grep -c '^gpuscope_device_up{' "$store/metrics" || true)"
[ "$up" -eq 8 ] || fail "/metrics has $up gpuscope_device_up series, not the demo's 8"
dcgm="$(grep -c '^DCGM_FI_DEV_GPU_UTIL{' "$store/metrics" || true)"
[ "$dcgm" -eq 8 ] || fail "/metrics has $dcgm DCGM_FI_DEV_GPU_UTIL series, not the demo's 8"
[ -n "$pid" ] || fail "cannot find the exporter's process"
uid="$(awk '/^Uid:/ {print $2}' "/proc/$pid/status")"
[ "$uid" != 0 ] || fail "the exporter runs as root"
echo "image: gpuscope export --demo in the image (uid $uid) serves /health ok and /metrics ($(wc -c < "$store/metrics") bytes, $up devices under gpuscope's and dcgm-exporter's names)"
kill "$pid"
wait "$runner" 2> /dev/null || true
pid=""
echo "image: ok"
