#!/usr/bin/env bash
# Builds the exporter's container image (Containerfile) with buildah, without a registry or a
# daemon: the release binary (built here unless --binary names one), stripped, and the shared
# libraries `ldd` says it links, each at the path the loader looks for it, are staged into a
# root file system that the Containerfile copies into an image FROM scratch.
#
# Usage: deploy/image/build.sh [--tag NAME] [--binary PATH]
#   --tag     the image's name (default gpuscope:VERSION, VERSION from `gpuscope --version`)
#   --binary  a gpuscope built with `cargo build --release --locked -p gpuscope` (default:
#             target/release/gpuscope, built first)
# BUILDAH_OPTS adds global buildah options (default `--storage-driver vfs`, which works in an
# unprivileged container or CI machine with no overlay support; `--root DIR --runroot DIR` for
# a throw-away store). The image is left in buildah's store: `buildah push NAME REGISTRY/NAME`.
set -euo pipefail
cd "$(dirname "$0")/../.."

tag=""
bin=""
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) tag="$2"; shift 2 ;;
    --binary) bin="$2"; shift 2 ;;
    *) echo "deploy/image/build.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ -z "$bin" ]; then
  cargo build --release --locked -p gpuscope
  bin="${CARGO_TARGET_DIR:-target}/release/gpuscope"
fi
version="$("$bin" --version | awk '{print $2}')"
tag="${tag:-gpuscope:$version}"
source_url="$(cargo metadata --no-deps --format-version 1 --locked |
  python3 -c 'import json,sys; print(next(p["repository"] for p in json.load(sys.stdin)["packages"] if p["name"] == "gpuscope") or "unknown")')"
revision="$(git rev-parse HEAD 2> /dev/null || echo unknown)"

if ! command -v buildah > /dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq buildah > /dev/null
fi

context="$(mktemp -d)"
trap 'rm -rf "$context"' EXIT
rootfs="$context/rootfs"
mkdir -p "$rootfs/usr/bin" "$rootfs/etc" "$rootfs/usr/share/doc/gpuscope"
strip --strip-all -o "$rootfs/usr/bin/gpuscope" "$bin"
chmod 0755 "$rootfs/usr/bin/gpuscope"

# Every library the binary links, and the loader, at the paths ldd names (libgcc_s, libm,
# libc, ld-linux on glibc). NVML is dlopened at run time from the node, never copied.
libs="$(ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | sort -u)"
for lib in $libs; do
  mkdir -p "$rootfs$(dirname "$lib")"
  cp -L "$lib" "$rootfs$lib"
  # Their licences, for a Debian build machine (glibc's LGPL asks for its notice).
  if command -v dpkg > /dev/null; then
    pkg="$( (dpkg -S "$lib" || dpkg -S "$(realpath "$lib")") 2> /dev/null | head -1 | cut -d: -f1 || true)"
    if [ -n "$pkg" ] && [ -f "/usr/share/doc/$pkg/copyright" ]; then
      mkdir -p "$rootfs/usr/share/doc/$pkg"
      cp "/usr/share/doc/$pkg/copyright" "$rootfs/usr/share/doc/$pkg/copyright"
    fi
  fi
done
# Where the NVIDIA container toolkit mounts libnvidia-ml.so.1 in an image with
# /etc/debian_version; the loader's default search path.
if [ -f /etc/debian_version ]; then
  cp /etc/debian_version "$rootfs/etc/debian_version"
  mkdir -p "$rootfs/usr/lib/x86_64-linux-gnu"
fi
cp LICENSE LICENSE-MIT LICENSE-APACHE "$rootfs/usr/share/doc/gpuscope/"
printf 'root:x:0:0:root:/:/nonexistent\nnobody:x:65534:65534:nobody:/:/nonexistent\n' > "$rootfs/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' > "$rootfs/etc/group"

# shellcheck disable=SC2086 # BUILDAH_OPTS is a list of options
buildah ${BUILDAH_OPTS:---storage-driver vfs} bud --isolation chroot --quiet \
  --file "$PWD/Containerfile" \
  --build-arg "VERSION=$version" \
  --build-arg "REVISION=$revision" \
  --build-arg "SOURCE=$source_url" \
  --tag "$tag" \
  "$context" > /dev/null
echo "built $tag ($(du -sb "$rootfs" | cut -f1) bytes of files: $(cd "$rootfs" && find . -type f | sort | tr '\n' ' '))"
