#!/usr/bin/env bash
# Validates the deployment files offline: the Kubernetes manifests against the Kubernetes
# schemas (kubernetes-validate, from PyPI, in a throw-away virtualenv; --strict refuses unknown
# fields), the ServiceMonitor against the schema in deploy/schemas/ (jsonschema), and the
# systemd unit with `systemd-analyze verify` (Debian's systemd), with ExecStart pointed at a
# built gpuscope since verify requires the program to exist.
# Usage: deploy/check.sh [PATH-TO-GPUSCOPE]   (default: target/debug/gpuscope)
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$(realpath "${1:-${CARGO_TARGET_DIR:-target}/debug/gpuscope}")"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

python3 -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install --quiet --disable-pip-version-check \
  "kubernetes-validate==1.37.0" "jsonschema>=4.18" "PyYAML>=6"
"$tmp/venv/bin/kubernetes-validate" --strict --kubernetes-version 1.34.0 \
  deploy/kubernetes/daemonset.yaml deploy/kubernetes/service.yaml
"$tmp/venv/bin/python" - <<'PY'
import json, sys, yaml, jsonschema
schema = json.load(open("deploy/schemas/servicemonitor-v1.json"))
jsonschema.Draft202012Validator.check_schema(schema)
for doc in yaml.safe_load_all(open("deploy/kubernetes/servicemonitor.yaml")):
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(doc), key=str)
    for e in errors:
        print(f"servicemonitor.yaml: {'/'.join(map(str, e.absolute_path))}: {e.message}")
    if errors:
        sys.exit(1)
print("deploy/kubernetes/servicemonitor.yaml: VALID (deploy/schemas/servicemonitor-v1.json)")
PY

if ! command -v systemd-analyze > /dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd > /dev/null
fi
unit="$tmp/gpuscope-exporter.service"
sed "s|^ExecStart=gpuscope |ExecStart=$bin |" deploy/systemd/gpuscope-exporter.service > "$unit"
grep -q "^ExecStart=$bin " "$unit" || { echo "no ExecStart=gpuscope in the unit"; exit 1; }
# verify prints problems and exits non-zero on errors; warnings must fail too.
out="$(SYSTEMD_LOG_LEVEL=warning systemd-analyze verify --man=no "$unit" 2>&1)" || { echo "$out"; exit 1; }
if [ -n "$out" ]; then echo "$out"; echo "systemd-analyze verify printed warnings"; exit 1; fi
echo "deploy/systemd/gpuscope-exporter.service: systemd-analyze verify: no problems"
echo "deploy: 4 files valid"
