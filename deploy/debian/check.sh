#!/usr/bin/env bash
# Checks the Debian package as CI: installs it on this machine with `dpkg -i` (a throw-away CI
# machine; a root of its own would need a shell and dpkg's database in it for the maintainer
# scripts), checks that every file it promises is there, runs the installed `gpuscope
# --version` and its man page and completions, verifies the installed unit with
# `systemd-analyze verify` (warnings fail too), and removes the package again (also on failure).
#
# Usage: deploy/debian/check.sh PATH-TO-DEB
set -euo pipefail
cd "$(dirname "$0")/../.."
deb="$(realpath "$1")"
fail() { echo "deb check: $*" >&2; exit 1; }

if dpkg -s gpuscope > /dev/null 2>&1; then
  fail "gpuscope is already installed here; remove it first (dpkg --purge gpuscope)"
fi
if ! command -v systemd-analyze > /dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd > /dev/null
fi

echo "deb: $(dpkg-deb --field "$deb" Package Version Architecture Depends | tr '\n' ' ')"
trap 'dpkg --purge gpuscope > /dev/null 2>&1 || true' EXIT
dpkg -i "$deb" > /dev/null

unit=/usr/lib/systemd/system/gpuscope-exporter.service
for f in /usr/bin/gpuscope \
  /usr/share/man/man1/gpuscope.1.gz /usr/share/man/man1/gpuscope-export.1.gz \
  /usr/share/bash-completion/completions/gpuscope /usr/share/zsh/vendor-completions/_gpuscope \
  /usr/share/fish/vendor_completions.d/gpuscope.fish "$unit" \
  /usr/share/doc/gpuscope/copyright /usr/share/doc/gpuscope/LICENSE-MIT \
  /usr/share/doc/gpuscope/LICENSE-APACHE; do
  dpkg -S "$f" > /dev/null 2>&1 || fail "$f is not in the package: $(dpkg -L gpuscope | tr '\n' ' ')"
  [ -s "$f" ] || fail "$f is missing or empty"
done
[ -x /usr/bin/gpuscope ] || fail "/usr/bin/gpuscope is not executable"
if systemctl is-enabled gpuscope-exporter > /dev/null 2>&1; then
  fail "installing enabled gpuscope-exporter"
fi

version="$(/usr/bin/gpuscope --version)"
[ "$version" = "gpuscope $(dpkg-deb --field "$deb" Version | cut -d- -f1)" ] ||
  fail "the installed binary says '$version'"
zcat /usr/share/man/man1/gpuscope-export.1.gz | grep -q 'Address to listen on' ||
  fail "gpuscope-export.1 does not document --listen"
grep -q "gpuscope" /usr/share/bash-completion/completions/gpuscope || fail "bash completions"
grep -q "gpuscope" /usr/share/fish/vendor_completions.d/gpuscope.fish || fail "fish completions"
/usr/bin/gpuscope snapshot --demo --frame 0 --json > /dev/null || fail "snapshot --demo"

out="$(SYSTEMD_LOG_LEVEL=warning systemd-analyze verify --man=no "$unit" 2>&1)" ||
  fail "systemd-analyze verify $unit: $out"
[ -z "$out" ] || fail "systemd-analyze verify $unit printed warnings: $out"
echo "deb: installed; $version; $(dpkg -L gpuscope | grep -c '\.1\.gz$') man pages, 3 completions; systemd-analyze verify $unit: no problems"
dpkg --purge gpuscope > /dev/null
[ ! -e /usr/bin/gpuscope ] || fail "purging left /usr/bin/gpuscope"
echo "deb: removed again; ok"
