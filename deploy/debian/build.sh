#!/usr/bin/env bash
# Builds the Debian package with cargo-deb ([package.metadata.deb] in crates/gpuscope/Cargo.toml):
# the release binary, its man pages and bash, zsh and fish completions (written here by the
# binary itself into target/release/deb-assets), the gpuscope-exporter systemd unit (installed, not
# enabled) and the licences. Prints the path of the .deb.
#
# Usage: deploy/debian/build.sh [--no-build]
#   --no-build  package the release binary already built (cargo build --release --locked -p
#               gpuscope), as CI does after building it once for the image and the package
# cargo-deb is installed if missing: a pinned version, with `cargo install --locked`, into
# $GPUSCOPE_TOOLS_DIR (default: the target directory's tools/); cargo builds it in a temporary
# directory that it removes.
set -euo pipefail
cd "$(dirname "$0")/../.."

CARGO_DEB_VERSION=3.8.0
build=1
case "${1:-}" in
  --no-build) build=0 ;;
  "") ;;
  *) echo "deploy/debian/build.sh: unknown argument $1" >&2; exit 2 ;;
esac
target="${CARGO_TARGET_DIR:-target}"
tools="$(realpath -m "${GPUSCOPE_TOOLS_DIR:-$target/tools}")"
cargo_deb="$tools/bin/cargo-deb"
if ! "$cargo_deb" --version 2> /dev/null | grep -q " $CARGO_DEB_VERSION\$"; then
  # No lzma feature: xz comes from the system's xz (--compress-system), so no C library to
  # build; no debug-id feature: the package carries no separate debug symbols.
  cargo install --quiet --locked --no-default-features "cargo-deb@$CARGO_DEB_VERSION" \
    --root "$tools"
fi

if [ "$build" = 1 ]; then
  cargo build --release --locked -p gpuscope
fi
bin="$target/release/gpuscope"

# What the binary writes about itself: its man pages and completion scripts, beside it, where
# the package metadata names them (cargo-deb reads `target/release/` as the target directory).
assets="$target/release/deb-assets"
rm -rf "$assets"
mkdir -p "$assets/completions"
"$bin" __man "$assets/man" > /dev/null
# Compressed as Debian's policy asks (cargo-deb compresses only the assets it did not build).
gzip -9n "$assets"/man/*.1
"$bin" completions bash > "$assets/completions/gpuscope.bash"
"$bin" completions zsh > "$assets/completions/_gpuscope"
"$bin" completions fish > "$assets/completions/gpuscope.fish"

compress=(-Z gz)
if command -v xz > /dev/null; then compress=(-Z xz); fi
mkdir -p "$target/debian"
"$cargo_deb" --package gpuscope --no-build --locked --compress-system "${compress[@]}" \
  --output "$target/debian/"
