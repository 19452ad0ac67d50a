#!/usr/bin/env python3
"""A real Prometheus scrapes `gpuscope export --names dcgm` and `--names nvidia-smi`, and every
panel query of dcgm-exporter's and nvidia_gpu_exporter's dashboards returns data (issue 35).

The dashboards' PromQL (panels and template variables, not the dashboards) is test data in
crates/gpuscope/tests/data/dashboards/, each file naming the repository, path and commit it was
taken from. Four exporters on loopback, each a fixture pinned to one frame:

- dcgm: the 8-GPU H100 box after its XIDs (the demo, frame 20), `--names dcgm`;
- nvidia-smi: the same, `--names nvidia-smi --processes`;
- mig: the H100 in MIG mode (frame 5, GPM measured), `--names dcgm,nvidia-smi`: the MIG panels;
- desktop: the GeForce desktop (fans), `--names gpuscope,nvidia-smi`: a fan speed to show, and
  gpuscope's names beside a door's.

A private Prometheus (own config and temporary TSDB on a loopback port; never the Debian
service) scrapes them every second, asking for OpenMetrics as it always does. Then:

1. `promtool check metrics` reads each exporter's text exposition without an error, and its
   only lint findings are those the real exporters' own names draw (listed below, each with
   why): gpuscope's own names draw none.
2. Each template variable's query returns values; a variable that can select all is set to all
   (its "All" value, or the alternation of every value as Grafana writes it), the others are
   tried with each of their values.
3. Every panel query returns data for some choice of the single-valued variables; a MIG panel
   on the MIG host. A query whose only metrics are ones the doors do not publish (below) must
   return none, or only the dashboard's own "no data" value (-1), and is counted apart (two:
   nvidia_gpu_exporter's recovery action, in its table and its history).
4. Every metric a dashboard names has series, but for the ones docs/exporter.md says are not
   published (each listed below with why), which must have none; so a panel that falls back to
   its "no data" value elsewhere does not pass by its fallback.
5. A few values through Prometheus against the fixture file: each door's GPU utilization and
   memory in use, the MIG instances' memory.
6. The fleet reader over the same Prometheus (issue 35, item 4): `snapshot --prometheus --json`
   shows the host that serves only dcgm-exporter's names and the one that serves only
   nvidia_gpu_exporter's, each read through those names, with every GPU's memory,
   utilization, temperature and power as the fixture has them in those names' units; the MIG
   host (both doors) through dcgm-exporter's, one device per GPU instance; the desktop (gpuscope's
   names beside nvidia_gpu_exporter's) through gpuscope's own.

Usage: python3 crates/gpuscope/tests/prometheus_dashboards.py [--bin PATH]

Installs the Debian package `prometheus` when missing and we are root; when it is still
missing, fails under CI (env CI set) and skips otherwise, saying why. Prints one summary line:
`prometheus-dashboards: 2 dashboards, N panel queries, N checks, N failures`.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse

# prometheus_fleet.py beside this file has the helpers; no __pycache__ left in the tree.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import prometheus_fleet  # noqa: E402
from prometheus_fleet import ROOT, free_port, http_get, wait_for  # noqa: E402

DATA = os.path.join(ROOT, "crates", "gpuscope", "tests", "data", "dashboards")

# (job, fixture stem, frame, --names, extra flags)
EXPORTERS = [
    ("dcgm", "h100-sxm-8gpu", 20, "dcgm", []),
    ("nvidia-smi", "h100-sxm-8gpu", 20, "nvidia-smi", ["--processes"]),
    ("mig", "h100-mig", 5, "dcgm,nvidia-smi", ["--processes"]),
    ("desktop", "geforce-desktop", 7, "gpuscope,nvidia-smi", []),
]

# What `promtool check metrics` says of the real exporters' own names, which the doors keep
# (its lints want snake_case labels and `_total` on counters only): (finding, metric pattern).
EXPECTED_LINTS = [
    # dcgm-exporter's counters are named without `_total`.
    ('counter metrics should have "_total" suffix',
     r"DCGM_FI_DEV_(TOTAL_ENERGY_CONSUMPTION|PCIE_REPLAY_COUNTER|NVLINK_BANDWIDTH_TOTAL"
     r"|(UN)?CORRECTABLE_REMAPPED_ROWS)"),
    # dcgm-exporter's `modelName` label.
    ("label names should be written in 'snake_case' not 'camelCase'", r"DCGM_FI_.*"),
    # Its field is named PCIE_REPLAY_COUNTER.
    ("metric name should not include type 'counter'", r"DCGM_FI_DEV_PCIE_REPLAY_COUNTER"),
    # nvidia-smi's ECC totals (`ecc.errors.corrected.volatile.total`) are gauges.
    ('non-counter metrics should not have "_total" suffix', r"nvidia_smi_ecc_errors_.*_total"),
]

# Metrics a dashboard names that the doors do not publish (docs/exporter.md says why).
NOT_PUBLISHED = {
    # gpuscope reads NVML's recovery action as events only: the panels show their "no data".
    "nvidia_smi_gpu_recovery_action": "not read as a value",
    # nvidia-smi's names before driver 535 (`clocks_throttle_reasons.*`); the dashboard asks for
    # them beside today's `clocks_event_reasons.*`, which the door publishes.
    "nvidia_smi_clocks_throttle_reasons_sw_power_cap": "pre-535 name",
    "nvidia_smi_clocks_throttle_reasons_sw_thermal_slowdown": "pre-535 name",
    "nvidia_smi_clocks_throttle_reasons_hw_thermal_slowdown": "pre-535 name",
    "nvidia_smi_clocks_throttle_reasons_hw_power_brake_slowdown": "pre-535 name",
}

# The processes this script starts, stopped by prometheus_fleet's cleanup.
children = prometheus_fleet.children
# Each check counted, and its failure kept, by prometheus_fleet's `check`.
check = prometheus_fleet.check
failures = prometheus_fleet.failures


def query(prom, expr):
    url = f"http://{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    answer = json.loads(http_get(url, timeout=10))
    if answer.get("status") != "success":
        raise RuntimeError(f"query {expr!r}: {answer}")
    return answer["data"]["result"]


def series_count(prom, name):
    url = f"http://{prom}/api/v1/series?" + urllib.parse.urlencode({"match[]": name})
    return len(json.loads(http_get(url, timeout=10))["data"])


def ensure_prometheus():
    if shutil.which("prometheus") and shutil.which("promtool"):
        return True
    if os.geteuid() == 0 and shutil.which("apt-get"):
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "update", "-qq"], check=False, env=env)
        subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends",
                        "prometheus"], check=False, env=env)
    return bool(shutil.which("prometheus") and shutil.which("promtool"))


def start_exporter(binary, stem, frame, names, extra, log):
    port = free_port()
    children.append(subprocess.Popen(
        [binary, "export", "--fixture", os.path.join(ROOT, "fixtures", f"{stem}.json"),
         "--frame", str(frame), "--names", names, "--listen", f"127.0.0.1:{port}", *extra],
        stdout=log, stderr=log))
    return f"127.0.0.1:{port}"


def promtool_findings(text):
    """`promtool check metrics` on `text`: (exit code, [(metric, finding)])."""
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=60)
    findings = []
    for line in (r.stdout + r.stderr).splitlines():
        if line.strip():
            metric, _, finding = line.strip().partition(" ")
            findings.append((metric, finding))
    return r.returncode, findings


def regex_alternation(values):
    """Grafana's "All" of a multi-value variable without an all value, in a regex matcher."""
    return "(" + "|".join(re.escape(v).replace("\\", "\\\\") for v in sorted(values)) + ")"


def label_values(prom, expr, label):
    """Grafana's `label_values(EXPR, LABEL)`: the label's values over EXPR's series."""
    url = f"http://{prom}/api/v1/series?" + urllib.parse.urlencode({"match[]": expr})
    return sorted({s[label] for s in json.loads(http_get(url, timeout=10))["data"]
                   if label in s})


def variable_values(prom, var, chosen):
    """The values the variable's query offers, the choices made so far substituted."""
    q = substitute(var["query"], chosen)
    m = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\s*\)\s*", q, re.S)
    if m:
        return label_values(prom, m.group(1), m.group(2))
    m = re.fullmatch(r"\s*query_result\((.*)\)\s*", q, re.S)
    if m:
        # Grafana writes each result as `{labels} value ts` and takes the variable's regex's
        # `value` group from it (JavaScript's `(?<value>...)`, written `/.../g`).
        pattern = var["regex"].strip("/g").replace("(?<", "(?P<") if var["regex"] else "(?P<value>.*)"
        values = []
        for r in query(prom, m.group(1)):
            text = "{" + ",".join(f'{k}="{v}"' for k, v in r["metric"].items()) + "}"
            values += [f.group("value") for f in re.finditer(pattern, text) if f.group("value")]
        return sorted(set(values))
    raise RuntimeError(f"unknown variable query {q!r}")


def substitute(expr, chosen):
    for name in sorted(chosen, key=len, reverse=True):
        expr = expr.replace(f"${name}", chosen[name])
    return expr.replace("$__rate_interval", "1m")


def metric_names(expr):
    # Not a name's prefix in a regex matcher (`{__name__=~"nvidia_smi_ecc_errors_.+"}`).
    return set(re.findall(r"\b((?:DCGM_FI_|nvidia_smi_)[A-Za-z0-9_]+)\b(?!\.)", expr))


def dashboard(prom, file, mig_instance):
    """Checks one dashboard's variables and panels; returns how many panel queries."""
    with open(os.path.join(DATA, file)) as f:
        board = json.load(f)
    src = board["source"]
    name = f"{src['repository']} {src['path']}"
    # Every way to choose the single-valued variables, the multi-valued ones set to all.
    choices = [{}]
    for var in board["variables"]:
        nxt = []
        for chosen in choices:
            values = variable_values(prom, var, chosen)
            check(values, f"{name}: variable {var['name']} ({var['query']}) has values")
            if var["include_all"]:
                all_value = var["all_value"] or regex_alternation(values)
                nxt.append({**chosen, var["name"]: all_value})
            else:
                nxt.extend({**chosen, var["name"]: v} for v in values)
        choices = nxt or choices
    gaps = 0
    for panel in board["panels"]:
        hits = [c for c in choices if query(prom, substitute(panel["expr"], c))]
        # A panel of metrics the doors do not publish (joined to the info series at most) has
        # no data, as it has none over nvidia_gpu_exporter on a GPU without those fields.
        data = metric_names(panel["expr"]) - {"nvidia_smi_gpu_info"}
        if data and data <= set(NOT_PUBLISHED):
            gaps += 1
            # Or only the dashboard's own "no data" value, -1, where it falls back to one.
            values = {float(r["value"][1]) for c in hits
                      for r in query(prom, substitute(panel["expr"], c))}
            check(values <= {-1.0}, f"{name}: panel {panel['panel']!r} of unpublished "
                                    f"{sorted(data)} has data {sorted(values)[:5]}")
            continue
        check(hits, f"{name}: panel {panel['panel']!r} returns no data: {panel['expr']}")
        if "MIG" in panel["panel"]:
            on_mig = [c for c in hits if mig_instance in c.values()]
            check(on_mig, f"{name}: MIG panel {panel['panel']!r} has no data on the MIG host")
    used = set().union(*(metric_names(p["expr"]) for p in board["panels"]))
    used |= set().union(*(metric_names(v["query"]) for v in board["variables"]))
    for metric in sorted(used):
        n = series_count(prom, metric)
        if metric in NOT_PUBLISHED:
            check(n == 0, f"{name}: {metric} is said not to be published but has {n} series")
        else:
            check(n > 0, f"{name}: no series of {metric}")
    return len(board["panels"]), gaps


def fixture_values(prom, fixtures):
    """A few values through Prometheus, against the fixture files."""
    fx, frame = fixtures["dcgm"]
    for i in range(8):
        d = fx["frames"][frame]["devices"][str(i)]
        util = d["utilization_rates"]["ok"]["gpu"]
        used = d["memory_info"]["ok"]["used"]
        got = query(prom, f'DCGM_FI_DEV_GPU_UTIL{{job="dcgm",gpu="{i}"}}')
        check([float(r["value"][1]) for r in got] == [util], f"dcgm GPU {i}: utilization {got}")
        got = query(prom, f'DCGM_FI_DEV_FB_USED{{job="dcgm",gpu="{i}"}}')
        check([float(r["value"][1]) for r in got] == [used // (1 << 20)],
              f"dcgm GPU {i}: memory used {got}")
        uuid = fx["devices"][str(i)]["uuid"]["ok"][4:].lower()
        got = query(prom, f'nvidia_smi_memory_used_bytes{{job="nvidia-smi",uuid="{uuid}"}}')
        want = -(-used // (1 << 20)) * (1 << 20)
        check([float(r["value"][1]) for r in got] == [want], f"nvidia-smi GPU {i}: memory {got}")
    fx, frame = fixtures["mig"]
    for slot, dev in fx["devices"].items():
        if ":" not in slot:
            continue
        gi = dev["gpu_instance_id"]["ok"]
        used = fx["frames"][frame]["devices"][slot]["memory_info"]["ok"]["used"]
        got = query(prom, f'nvidia_smi_mig_memory_used_bytes{{job="mig",gpu_instance_id="{gi}"}}')
        check([float(r["value"][1]) for r in got] == [used], f"MIG {slot}: memory {got}")
        got = query(prom, f'DCGM_FI_DEV_FB_USED{{job="mig",GPU_I_ID="{gi}"}}')
        check([float(r["value"][1]) for r in got] == [used // (1 << 20)],
              f"MIG {slot}: dcgm memory {got}")


def fleet_through_doors(binary, prom, fixtures, targets):
    """`snapshot --prometheus --json` over hosts that serve other exporters' names (item 6)."""
    out = subprocess.run([binary, "snapshot", "--prometheus", f"http://{prom}", "--json",
                          "--stale-after", "10m"], capture_output=True, text=True, timeout=60)
    check(out.returncode == 0, f"snapshot --prometheus: exit {out.returncode}: {out.stderr[-500:]}")
    fleet = json.loads(out.stdout)
    check(not fleet["errors"], f"snapshot --prometheus: errors {fleet['errors']}")
    hosts = {h["instance"]: h for h in fleet["hosts"]}
    mib = 1 << 20
    fx, frame = fixtures["dcgm"]
    for job, names in [("dcgm", "dcgm"), ("nvidia-smi", "nvidia-smi")]:
        h = hosts.get(targets[job], {})
        check(h.get("state") == "up" and h.get("names") == names,
              f"fleet: the {job} host is up, read through {names}'s names: {h}")
        devices = {d["index"]: d for d in h.get("devices", [])}
        check(sorted(devices) == list(range(8)), f"fleet: {job}: 8 GPUs: {sorted(devices)}")
        for i, d in devices.items():
            f = fx["frames"][frame]["devices"][str(i)]
            mem = f["memory_info"]["ok"]
            mw = f["power_usage"]["ok"]
            if job == "dcgm":
                # Whole MiB, as dcgm-exporter publishes them; watts as NVML gives them.
                want = {"memory_used_bytes": mem["used"] // mib * mib,
                        "memory_free_bytes": mem["free"] // mib * mib,
                        "memory_total_bytes": None,
                        "power_usage_watts": mw / 1000}
            else:
                # MiB as nvidia-smi prints them (a part counts whole); watts to two decimals.
                want = {"memory_used_bytes": -(-mem["used"] // mib) * mib,
                        "memory_total_bytes": -(-mem["total"] // mib) * mib,
                        "power_usage_watts": round(mw / 10) / 100}
            want |= {"gpu_utilization_percent": f["utilization_rates"]["ok"]["gpu"],
                     "temperature_celsius": f["temperature"]["ok"],
                     "uuid": fx["devices"][str(i)]["uuid"]["ok"]}
            got = {k: d.get(k) for k in want}
            check(got == want, f"fleet: {job} GPU {i}: {got} != {want}")
    h = hosts.get(targets["mig"], {})
    check(h.get("names") == "dcgm", f"fleet: the MIG host is read through dcgm's names: {h}")
    fx, frame = fixtures["mig"]
    instances = {dev["gpu_instance_id"]["ok"] for slot, dev in fx["devices"].items() if ":" in slot}
    got = {d.get("gpu_instance_id") for d in h.get("devices", [])}
    check(got == instances, f"fleet: the MIG host's devices are its GPU instances: {got}")
    h = hosts.get(targets["desktop"], {})
    check("names" not in h and h.get("devices") and all(
          d.get("fan_speed_percent") is not None for d in h["devices"] if d["mig_index"] is None),
          f"fleet: the desktop is read through gpuscope's own names: {h}")
    return len(hosts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=None, help="the gpuscope binary (default: target/debug)")
    args = ap.parse_args()
    if not ensure_prometheus():
        msg = "prometheus-dashboards: prometheus or promtool is not installed (Debian: prometheus)"
        if os.environ.get("CI"):
            print(msg, file=sys.stderr)
            return 1
        print(msg + "; skipped (CI is unset)")
        return 0
    binary = prometheus_fleet.gpuscope_binary(args.bin)

    signal.signal(signal.SIGTERM, prometheus_fleet.on_signal)
    signal.signal(signal.SIGINT, prometheus_fleet.on_signal)
    started = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="gpuscope-dashboards-")
    log = open(os.path.join(tmp, "processes.log"), "w")
    panels = gaps = 0
    try:
        targets, fixtures = {}, {}
        for job, stem, frame, names, extra in EXPORTERS:
            with open(os.path.join(ROOT, "fixtures", f"{stem}.json")) as f:
                fixtures[job] = (json.load(f), frame)
            targets[job] = start_exporter(binary, stem, frame, names, extra, log)
        for job, addr in targets.items():
            text = wait_for(f"exporter {job}", lambda a=addr: http_get(f"http://{a}/metrics"))
            code, findings = promtool_findings(text)
            check(code in (0, 3), f"promtool check metrics on {job}: exit {code}: {findings[:5]}")
            unexpected = [(m, f) for m, f in findings
                          if not any(f == want and re.fullmatch(pattern, m)
                                     for want, pattern in EXPECTED_LINTS)]
            check(not unexpected, f"promtool check metrics on {job}: {unexpected[:10]}")

        prom = f"127.0.0.1:{free_port()}"
        config = os.path.join(tmp, "prometheus.yml")
        with open(config, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                    "  evaluation_interval: 1s\nscrape_configs:\n")
            for job, addr in targets.items():
                f.write(f"  - job_name: {job}\n    static_configs:\n"
                        f"      - targets: ['{addr}']\n")
        children.append(subprocess.Popen(
            ["prometheus", f"--config.file={config}",
             f"--storage.tsdb.path={os.path.join(tmp, 'tsdb')}",
             f"--web.listen-address={prom}", "--log.level=warn"],
            stdout=log, stderr=log))

        def scraped_twice():
            # rate() over the energy counters needs two samples of each target.
            r = query(prom, "count_over_time(up[1m]) >= 2 and up == 1")
            return len(r) == len(targets)

        wait_for("two scrapes of every exporter", scraped_twice)
        for file in ["dcgm-exporter.json", "nvidia_gpu_exporter.json"]:
            n, no_data = dashboard(prom, file, targets["mig"])
            panels += n
            gaps += no_data
        fixture_values(prom, fixtures)
        fleet_through_doors(binary, prom, fixtures, targets)
    finally:
        prometheus_fleet.cleanup()
        log.close()
        if failures:
            with open(os.path.join(tmp, "processes.log")) as f:
                sys.stderr.write(f.read()[-4000:])
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"prometheus-dashboards: 2 dashboards, {panels} panel queries ({panels - gaps} with "
          f"data, {gaps} of unpublished metrics without), {prometheus_fleet.checks} checks, "
          f"{len(failures)} "
          f"failures ({time.monotonic() - started:.1f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
