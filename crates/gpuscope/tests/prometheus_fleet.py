#!/usr/bin/env python3
"""A real Prometheus scrapes a fleet of five `gpuscope export` hosts.

Starts five exporters on loopback ports, each replaying a fixture pinned to one frame (five
"hosts" with distinct --hostname: one a Kubernetes node whose pods time-slice a GPU, two the
8-GPU recording before and after its XIDs), starts a private Prometheus (own config, own
temporary TSDB, own loopback port; never the Debian service) scraping them every second, and
checks through Prometheus's HTTP query API that every device of every host is there with the
values of its fixture file. Also runs `promtool check metrics` on each exporter's text
exposition and requires no warnings.

The exporters serve TLS with basic auth from one `--web.config.file` (a certificate made here
with openssl, a bcrypt hash made with htpasswd), and Prometheus scrapes them over TLS with the
password, asking for gzip as it always does. The script's own requests ask for gzip too and
check that the answer is gzipped, and that a request without the password is refused (401).

Usage: python3 crates/gpuscope/tests/prometheus_fleet.py [--bin PATH]

Installs the Debian packages `prometheus`, `apache2-utils` (htpasswd) and `openssl` when they are
missing and we are root.
When they are still missing, fails under CI (env CI set) and skips otherwise, saying why.
Prints one summary line: `prometheus-fleet: 5 hosts, N devices, N checks, N failures`.
"""

import argparse
import base64
import gzip
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))

# (fixture stem, pinned frame, hostname label, exporter interval)
HOSTS = [
    ("h100-sxm-8gpu", 5, "fleet-a", "1s"),
    ("h100-mig", 3, "fleet-b", "1s"),
    # Pods time-slicing a GPU. One sample only: a pinned frame's per-process SM samples count in
    # the first sample and, being no newer, in none after it.
    ("k8s-time-slicing", 4, "fleet-d", "1h"),
    # The 8-GPU box later: after GPU 2's XID 79 (frame 14) and GPU 5's XID 63 with its pending
    # row remap (frame 18).
    ("h100-sxm-8gpu", 20, "fleet-e", "1s"),
    ("geforce-desktop", 7, "fleet-c", "1s"),
]

children = []
checks = 0
failures = []


def check(ok, what):
    global checks
    checks += 1
    if not ok:
        failures.append(what)
        print(f"FAIL: {what}", file=sys.stderr)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Set by main() once the certificate and password exist: how the script reaches exporters.
EXPORTER_TLS = None
AUTH_HEADER = None
USER = "prometheus"
PASSWORD = "fleet-secret"


def http_get(url, timeout=5, accept=None):
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.read().decode()


def exporter_get(addr, path="/metrics", auth=True):
    """GET https://addr/path with the password and `Accept-Encoding: gzip`: (status, headers,
    body text, bytes on the wire)."""
    headers = {"Accept-Encoding": "gzip"}
    if auth:
        headers["Authorization"] = AUTH_HEADER
    req = urllib.request.Request(f"https://{addr}{path}", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=5, context=EXPORTER_TLS) as r:
            raw = r.read()
            status, hdrs = r.status, dict((k.lower(), v) for k, v in r.headers.items())
    except urllib.error.HTTPError as e:
        raw = e.read()
        status, hdrs = e.code, dict((k.lower(), v) for k, v in e.headers.items())
    body = gzip.decompress(raw) if hdrs.get("content-encoding") == "gzip" else raw
    return status, hdrs, body.decode(), len(raw)


def make_web_config(tmp):
    """A self-signed certificate for 127.0.0.1, a bcrypt hash of PASSWORD and the web
    configuration file that names them; returns (config path, certificate path)."""
    cert = os.path.join(tmp, "server.crt")
    key = os.path.join(tmp, "server.key")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "1", "-subj", "/CN=gpuscope-fleet",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
         "-keyout", key, "-out", cert],
        check=True, capture_output=True,
    )
    out = subprocess.run(["htpasswd", "-nbBC", "10", USER, PASSWORD],
                         check=True, capture_output=True, text=True).stdout
    hashed = out.strip().split(":", 1)[1]
    config = os.path.join(tmp, "web.yml")
    with open(config, "w") as f:
        f.write(f"tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
                f"basic_auth_users:\n  {USER}: '{hashed}'\n")
    return config, cert


def query(prom, expr):
    url = f"http://{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    answer = json.loads(http_get(url))
    if answer.get("status") != "success":
        raise RuntimeError(f"query {expr!r}: {answer}")
    return answer["data"]["result"]


def values(prom, expr):
    """The result of an instant query as {frozenset(labels): float}."""
    return {
        frozenset((k, v) for k, v in r["metric"].items() if k != "__name__"): float(r["value"][1])
        for r in query(prom, expr)
    }


def scalar(prom, expr):
    result = query(prom, expr)
    return float(result[0]["value"][1]) if result else None


TOOLS = ["prometheus", "promtool", "htpasswd", "openssl"]


def ensure_prometheus():
    if all(shutil.which(t) for t in TOOLS):
        return True
    if os.geteuid() == 0 and shutil.which("apt-get"):
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "update", "-qq"], check=False, env=env)
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "prometheus",
             "apache2-utils", "openssl"],
            check=False,
            env=env,
        )
    return all(shutil.which(t) for t in TOOLS)


def cleanup(*_):
    for p in children:
        if p.poll() is None:
            p.terminate()
    for p in children:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()


def on_signal(signum, _frame):
    cleanup()
    sys.exit(128 + signum)


def start_exporter(binary, stem, frame, hostname, interval, log, web_config):
    port = free_port()
    p = subprocess.Popen(
        [
            binary, "export",
            "--fixture", os.path.join(ROOT, "fixtures", f"{stem}.json"),
            "--frame", str(frame),
            "--hostname", hostname,
            "--processes",
            "--listen", f"127.0.0.1:{port}",
            "--interval", interval,
            "--web.config.file", web_config,
        ],
        stdout=log, stderr=log,
    )
    children.append(p)
    return f"127.0.0.1:{port}"


def wait_for(what, fn, timeout=60):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = fn()
            if last:
                return last
        except Exception as e:  # The server is not up yet.
            last = e
        time.sleep(0.25)
    raise RuntimeError(f"timed out waiting for {what}: {last}")


def ok(answer):
    return answer.get("ok") if isinstance(answer, dict) else None


GIB = 1 << 30


def fleet_view(binary, prom, fixtures):
    """`snapshot --prometheus --json` and `select --prometheus` over the live fleet (issue 17);
    returns the fleet as `snapshot --prometheus --json` printed it."""

    def gpuscope(*argv):
        r = subprocess.run([binary, *argv], capture_output=True, text=True, timeout=60)
        check(r.returncode == 0, f"gpuscope {' '.join(argv)}: exit {r.returncode}: {r.stderr}")
        return r.stdout

    # fleet-d samples once (see HOSTS): its sample ages as the test runs.
    fleet = json.loads(gpuscope("snapshot", "--prometheus", f"http://{prom}", "--json",
                                "--stale-after", "10m"))
    hosts = {h["host"]: h for h in fleet["hosts"]}
    check(sorted(hosts) == sorted(fixtures), f"fleet view hosts: {sorted(hosts)}")
    check(fleet["errors"] == [], f"fleet view errors: {fleet['errors']}")
    for hostname, (fx, frame) in fixtures.items():
        h = hosts.get(hostname, {"devices": [], "state": None})
        check(h["state"] == "up", f"fleet view {hostname}: state {h['state']}")
        got = {d["id"]: d for d in h["devices"]}
        check(sorted(got) == sorted(fx["devices"]), f"fleet view {hostname}: devices {sorted(got)}")
        dyn = fx["frames"][frame]["devices"]
        for index, st in fx["devices"].items():
            d, f = got.get(index, {}), dyn[index]
            mem = ok(f["memory_info"]) or {}
            util = ok(f.get("utilization_rates")) or {}
            power = ok(f.get("power_usage"))
            want = {
                "uuid": ok(st["uuid"]),
                "name": ok(st["name"]),
                "memory_total_bytes": mem.get("total"),
                "memory_used_bytes": mem.get("used"),
                "memory_free_bytes": mem.get("free"),
                "gpu_utilization_percent": util.get("gpu"),
                "temperature_celsius": ok(f.get("temperature")),
                "fan_speed_percent": ok(f.get("fan_speed")),
                "power_usage_watts": None if power is None else power / 1000,
            }
            for key, value in want.items():
                check(d.get(key) == value,
                      f"fleet view {hostname} {index}: {key} {d.get(key)!r} != {value!r}")
            # Processes: those the exporter publishes for the device (a MIG-mode GPU's are on
            # its MIG devices, a desktop's graphics processes too).
            series = query(prom, f'gpuscope_process_gpu_memory_bytes{{hostname="{hostname}",index="{index}"}}')
            want_pids = sorted(int(r["metric"]["pid"]) for r in series)
            got_pids = [p["pid"] for p in d.get("processes", [])]
            check(got_pids == want_pids, f"fleet view {hostname} {index}: pids {got_pids} != {want_pids}")
            # Each process's pod, as the host recorded it; none outside containers.
            for p in d.get("processes", []):
                c = fx["host"]["processes"].get(str(p["pid"]), {}).get("container") or {}
                for key in ("pod", "namespace", "container"):
                    check(p.get(key) == c.get(key),
                          f"fleet view {hostname} {index} PID {p['pid']}: {key} {p.get(key)!r}")

    # select -n 2 -f 20GiB: the two whole GPUs of the fleet with the most free memory.
    picked = gpuscope("select", "--prometheus", f"http://{prom}", "-n", "2", "-f", "20GiB").split()
    picked = picked[0].split(",") if picked else []
    whole = []
    for hostname, (fx, frame) in fixtures.items():
        mig_parents = {i.split(":")[0] for i in fx["devices"] if ":" in i}
        for index in fx["devices"]:
            if ":" in index or index in mig_parents:
                continue
            free = (ok(fx["frames"][frame]["devices"][index]["memory_info"]) or {}).get("free")
            if free is not None and free >= 20 * GIB:
                whole.append((free, f"{hostname}:{index}"))
    whole.sort(reverse=True)
    check(len(picked) == 2, f"select --prometheus -n 2 -f 20GiB: {picked}")
    frees = {name: free for free, name in whole}
    check(all(p in frees for p in picked), f"select picked a device below 20GiB: {picked}")
    if len(picked) == 2 and all(p in frees for p in picked):
        least = min(frees[p] for p in picked)
        better = [n for f, n in whole if f > least and n not in picked]
        check(not better, f"select left out devices with more free memory: {better} (picked {picked})")
    return fleet


def pods_through_prometheus(prom, fixture):
    """fleet-d, the time-slicing node: each pod's series on each device sum its processes; the
    pods sharing GPU 0 sum to the device's memory use and utilization; the pod in a MIG device
    is on that MIG device; process series carry their pod."""
    fx, frame = fixture
    h = 'hostname="fleet-d"'
    facts = fx["host"]["processes"]
    # A MIG-mode GPU's list holds its MIG devices' processes, which count on the MIG devices.
    mig_parents = {i.split(":")[0] for i in fx["devices"] if ":" in i}
    for index, d in fx["frames"][frame]["devices"].items():
        if index in mig_parents:
            check(scalar(prom, f'count(gpuscope_pod_processes{{{h},index="{index}"}})') is None,
                  f"fleet-d {index}: no pod on a MIG-mode GPU itself")
            continue
        samples = {s["pid"]: s["sm"] for s in ok(d.get("process_utilization")) or []}
        pods = {}
        for p in ok(d["compute_processes"]) or []:
            c = facts[str(p["pid"])].get("container")
            series = values(prom, f'gpuscope_process_gpu_memory_bytes{{{h},pid="{p["pid"]}"}}')
            labels = dict(next(iter(series))) if series else {}
            for key in ("pod", "namespace", "container"):
                check(labels.get(key) == (c or {}).get(key),
                      f"fleet-d PID {p['pid']}: label {key} {labels.get(key)!r}")
            if c is None:
                continue
            e = pods.setdefault(c["pod_uid"], [c, 0, 0, None])
            e[1] += 1
            e[2] += p["used_gpu_memory"]
            if p["pid"] in samples:
                e[3] = (e[3] or 0) + samples[p["pid"]]
        got = values(prom, f'gpuscope_pod_processes{{{h},index="{index}"}}')
        check(len(got) == len(pods), f"fleet-d {index}: {len(got)} pods, want {len(pods)}")
        for uid, (c, n, mem, sm) in pods.items():
            sel = f'{h},index="{index}",pod_uid="{uid}",pod="{c["pod"]}",namespace="{c["namespace"]}"'
            got_n = scalar(prom, f"gpuscope_pod_processes{{{sel}}}")
            check(got_n == n, f"fleet-d {index} {c['pod']}: processes {got_n} != {n}")
            got_mem = scalar(prom, f"gpuscope_pod_gpu_memory_bytes{{{sel}}}")
            check(got_mem == mem, f"fleet-d {index} {c['pod']}: memory {got_mem} != {mem}")
            got_sm = scalar(prom, f"gpuscope_pod_gpu_sm_utilization_ratio{{{sel}}}")
            want_sm = None if sm is None else sm / 100
            check(got_sm is not None and want_sm is not None and abs(got_sm - want_sm) < 1e-9
                  or got_sm is None and want_sm is None,
                  f"fleet-d {index} {c['pod']}: SM {got_sm} != {want_sm}")
    # Time-slicing: the three pods on GPU 0 add up to the device, not each to the whole of it.
    d0 = fx["frames"][frame]["devices"]["0"]
    sel = f'{h},index="0"'
    check(scalar(prom, f"count(gpuscope_pod_processes{{{sel}}})") == 3, "fleet-d: 3 pods on GPU 0")
    got = scalar(prom, f"sum(gpuscope_pod_gpu_memory_bytes{{{sel}}})")
    want = ok(d0["memory_info"])["used"]
    check(got == want, f"fleet-d GPU 0: pods' memory {got} != the device's {want}")
    got = scalar(prom, f"sum(gpuscope_pod_gpu_sm_utilization_ratio{{{sel}}})")
    want = ok(d0["utilization_rates"])["gpu"] / 100
    check(got is not None and abs(got - want) < 1e-9,
          f"fleet-d GPU 0: pods' SM share {got} != the device's {want}")
    got = scalar(prom, f"gpuscope_device_utilization_ratio{{{sel}}}")
    check(got is not None and abs(got - want) < 1e-9, f"fleet-d GPU 0: utilization {got}")


def top_in_tmux(binary, prom, fleet):
    """`top --prometheus` in a real terminal (tmux) shows every host with its devices."""
    if shutil.which("tmux") is None:
        check(not os.environ.get("CI"), "tmux is required in CI (.ci/run installs it)")
        print("prometheus-fleet: tmux is not installed; top --prometheus not checked")
        return
    sock = f"gpuscope-fleet-{os.getpid()}"

    def tmux(*argv):
        return subprocess.run(["tmux", "-L", sock, "-f", "/dev/null", *argv],
                              capture_output=True, text=True, timeout=10).stdout

    hosts = sorted(h["host"] for h in fleet["hosts"])
    devices = sum(len(h["devices"]) for h in fleet["hosts"])
    want = f"{len(hosts)} hosts  {devices} devices  {len(hosts)} up  0 down"
    try:
        tmux("new-session", "-d", "-s", "t", "-x", "200", "-y", "80",
             f"{binary} top --prometheus http://{prom} -i 0.5s --stale-after 10m; "
             "echo exit=$?; sleep 60")
        screen = ""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and want not in screen:
            screen = tmux("capture-pane", "-p", "-t", "t")
            time.sleep(0.2)
        check(want in screen, f"top --prometheus title: want {want!r}, screen:\n{screen}")
        # The processes hidden (p), every host and device fits on the screen.
        tmux("send-keys", "-t", "t", "p")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            screen = tmux("capture-pane", "-p", "-t", "t")
            shown = sorted(line.split()[0] for line in screen.splitlines()
                           if line.split() and line.split()[0] in hosts)
            if shown == hosts:
                break
            time.sleep(0.2)
        lines = screen.splitlines()
        for h in hosts:
            line = next((x for x in lines if x.startswith(h + " ")), "")
            check(" up " in line, f"top --prometheus: host {h} listed up: {line!r}")
        # Every physical GPU of every host has its line beneath its host.
        for h in fleet["hosts"]:
            if h["devices"]:
                name = h["devices"][0]["name"][:28]
                check(name in screen, f"top --prometheus: {h['host']}'s {name} shown")
        tmux("send-keys", "-t", "t", "q")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and "exit=" not in screen:
            screen = tmux("capture-pane", "-p", "-t", "t")
            time.sleep(0.1)
        check("exit=0" in screen, f"top --prometheus quits with q: {screen[-300:]}")
        print(f"prometheus-fleet: top --prometheus in tmux shows {len(hosts)} hosts, "
              f"{devices} devices")
    finally:
        tmux("kill-server")


def down_within(binary, prom, exporter, hostname, interval):
    """Stops one exporter; the fleet view marks its host down within two scrape intervals."""
    exporter.terminate()
    exporter.wait(timeout=10)
    stopped = time.monotonic()
    state = None
    while time.monotonic() - stopped < 10 * interval:
        r = subprocess.run([binary, "snapshot", "--prometheus", f"http://{prom}", "--json"],
                           capture_output=True, text=True, timeout=60)
        # 0 while every host is up, 3 (partial) once one is down (docs/exit-codes.md).
        if r.returncode in (0, 3):
            state = {h["host"]: h["state"] for h in json.loads(r.stdout)["hosts"]}.get(hostname)
            if state == "down":
                check(r.returncode == 3, f"fleet view: {hostname} down, exit {r.returncode}")
                break
        time.sleep(0.1)
    took = time.monotonic() - stopped
    check(state == "down", f"fleet view: {hostname} stopped, state {state} after {took:.1f}s")
    check(took <= 2 * interval, f"fleet view: {hostname} marked down after {took:.1f}s, "
                                f"more than two scrape intervals ({2 * interval}s)")
    print(f"prometheus-fleet: {hostname} stopped, marked down by the fleet view after {took:.2f}s")


def gpuscope_binary(given):
    """The gpuscope binary: `given`, or this workspace's debug build, built first."""
    if given is not None:
        return given
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    subprocess.run(["cargo", "build", "--quiet", "-p", "gpuscope"], cwd=ROOT, check=True)
    return os.path.join(target, "debug", "gpuscope")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=None, help="the gpuscope binary (default: target/debug)")
    args = ap.parse_args()

    if not ensure_prometheus():
        msg = ("prometheus-fleet: prometheus, promtool, htpasswd or openssl is not installed "
               "(Debian packages prometheus, apache2-utils, openssl)")
        if os.environ.get("CI"):
            print(msg, file=sys.stderr)
            return 1
        print(msg + "; skipped (CI is unset)")
        return 0

    binary = gpuscope_binary(args.bin)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    tmp = tempfile.mkdtemp(prefix="gpuscope-fleet-")
    log = open(os.path.join(tmp, "processes.log"), "w")
    global EXPORTER_TLS, AUTH_HEADER
    try:
        web_config, cert = make_web_config(tmp)
        EXPORTER_TLS = ssl.create_default_context(cafile=cert)
        AUTH_HEADER = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        fixtures = {}
        targets = {}
        for stem, frame, hostname, interval in HOSTS:
            with open(os.path.join(ROOT, "fixtures", f"{stem}.json")) as f:
                fixtures[hostname] = (json.load(f), frame)
            targets[hostname] = start_exporter(
                binary, stem, frame, hostname, interval, log, web_config)
        for hostname, addr in targets.items():
            wait_for(f"exporter {hostname}", lambda a=addr: exporter_get(a)[0] == 200)
            status, hdrs, body, wire = exporter_get(addr)
            check(hdrs.get("content-encoding") == "gzip",
                  f"{hostname}: gzip answer ({hdrs.get('content-encoding')})")
            check(wire * 5 < len(body), f"{hostname}: {wire} bytes on the wire for {len(body)}")
            check(exporter_get(addr, auth=False)[0] == 401, f"{hostname}: 401 without a password")
            check(exporter_get(addr, "/health")[0] == 200, f"{hostname}: /health")

        prom = f"127.0.0.1:{free_port()}"
        config = os.path.join(tmp, "prometheus.yml")
        with open(config, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                    "  evaluation_interval: 1s\n"
                    "scrape_configs:\n  - job_name: gpuscope\n    scheme: https\n"
                    f"    tls_config:\n      ca_file: {cert}\n"
                    f"    basic_auth:\n      username: {USER}\n      password: {PASSWORD}\n"
                    "    static_configs:\n"
                    "      - targets: [" + ", ".join(f"'{a}'" for a in targets.values()) + "]\n")
        children.append(subprocess.Popen(
            [
                "prometheus",
                f"--config.file={config}",
                f"--storage.tsdb.path={os.path.join(tmp, 'tsdb')}",
                f"--web.listen-address={prom}",
                "--log.level=warn",
            ],
            stdout=log, stderr=log,
        ))

        def all_up():
            t = json.loads(http_get(f"http://{prom}/api/v1/targets"))["data"]["activeTargets"]
            return len(t) == len(targets) and all(x["health"] == "up" for x in t)

        wait_for("Prometheus to scrape every exporter", all_up)
        expected_devices = sum(len(fx["devices"]) for fx, _ in fixtures.values())
        wait_for(
            "every device in Prometheus",
            lambda: scalar(prom, "count(gpuscope_device_up)") == expected_devices,
        )

        # Prometheus's own view of the scrapes.
        ups = values(prom, 'up{job="gpuscope"}')
        check(len(ups) == len(HOSTS) and all(v == 1.0 for v in ups.values()),
              f"up of the targets: {ups}")

        fleet_used = 0
        for hostname, (fx, frame) in fixtures.items():
            h = f'hostname="{hostname}"'
            check(
                scalar(prom, f"count(gpuscope_device_up{{{h}}})") == len(fx["devices"]),
                f"{hostname}: device count",
            )
            dyn = fx["frames"][frame]["devices"]
            for index, st in fx["devices"].items():
                sel = f'{h},index="{index}"'
                d = dyn[index]
                up = values(prom, f"gpuscope_device_up{{{sel}}}")
                check(list(up.values()) == [1.0], f"{hostname} {index}: up {up}")
                labels = dict(next(iter(up))) if up else {}
                check(labels.get("uuid") == ok(st["uuid"]), f"{hostname} {index}: uuid")
                info = values(prom, f"gpuscope_device_info{{{sel}}}")
                info_labels = dict(next(iter(info))) if info else {}
                check(
                    info_labels.get("driver_version") == ok(fx["system"]["driver_version"])
                    and info_labels.get("vbios_version") == ok(st["vbios_version"]),
                    f"{hostname} {index}: info labels {info_labels}",
                )
                check(labels.get("name") == ok(st["name"]), f"{hostname} {index}: name")
                if ":" in index:
                    parent = index.split(":")[0]
                    check(labels.get("parent_index") == parent, f"{hostname} {index}: parent")
                    check(
                        labels.get("gpu_instance_id") == str(ok(st["gpu_instance_id"])),
                        f"{hostname} {index}: GPU instance id",
                    )
                mem = ok(d["memory_info"])
                used = scalar(prom, f"gpuscope_device_memory_used_bytes{{{sel}}}")
                check(used == mem["used"], f"{hostname} {index}: memory used {used} != {mem['used']}")
                total = scalar(prom, f"gpuscope_device_memory_total_bytes{{{sel}}}")
                check(total == mem["total"], f"{hostname} {index}: memory total")
                if ":" not in index:
                    fleet_used += mem["used"]
                for metric, answer, scale in [
                    ("gpuscope_device_temperature_celsius", d.get("temperature"), 1),
                    ("gpuscope_device_power_usage_watts", d.get("power_usage"), 1000),
                    ("gpuscope_device_fan_speed_ratio", d.get("fan_speed"), 100),
                    ("gpuscope_device_performance_state", d.get("performance_state"), 1),
                ]:
                    got = scalar(prom, f"{metric}{{{sel}}}")
                    want = ok(answer) if answer is not None else None
                    want = None if want is None else want / scale
                    # N/A is absent in Prometheus, not 0.
                    check(got == want, f"{hostname} {index}: {metric} {got} != {want}")

        # The fleet's memory: physical GPUs only (a MIG device's memory is part of its GPU's).
        got = scalar(prom, "sum(gpuscope_device_memory_used_bytes{parent_index=''})")
        check(got == fleet_used, f"fleet memory used {got} != {fleet_used}")

        # Processes of the 8-GPU host: one series each, GPU memory summing to the fixture's.
        fx, frame = fixtures["fleet-a"]
        procs = [p for d in fx["frames"][frame]["devices"].values()
                 for p in ok(d["compute_processes"]) or []]
        got = scalar(prom, 'count(gpuscope_process_gpu_memory_bytes{hostname="fleet-a"})')
        check(got == len(procs), f"fleet-a process count {got} != {len(procs)}")
        got = scalar(prom, 'sum(gpuscope_process_gpu_memory_bytes{hostname="fleet-a"})')
        want = sum(p["used_gpu_memory"] for p in procs)
        check(got == want, f"fleet-a process memory {got} != {want}")
        got = scalar(prom, 'count(gpuscope_process_gpu_memory_bytes{command!=""})')
        check(got is None, "no command label without --process-command")

        pods_through_prometheus(prom, fixtures["fleet-d"])

        # Health through Prometheus: each GPU of the 8-GPU hosts has the last XID its recording
        # holds at the frame (0 for none), and one waiting for a row remap says so; only
        # fleet-e, pinned after the XIDs, has any.
        for hostname in ["fleet-a", "fleet-e"]:
            fx, frame = fixtures[hostname]
            for index, d in fx["frames"][frame]["devices"].items():
                # Events are a log (schema version 2): each in the frame it arrived in, as
                # [timestamp_us, kind, data] ([timestamp_us, kind] when data is 0); the XIDs so
                # far are those of this frame and the frames before.
                logged = [e for f in fx["frames"][: frame + 1]
                          for e in ok(f["devices"][index]["events"]) or []]
                xids = [e[2] if len(e) > 2 else 0 for e in logged if e[1] == "xid"]
                sel = f'hostname="{hostname}",index="{index}"'
                got = scalar(prom, f"gpuscope_device_last_xid{{{sel}}}")
                want = xids[-1] if xids else 0
                check(got == want, f"{hostname} {index}: last XID {got} != {want}")
                rows = ok(d["remapped_rows"])
                got = scalar(prom, f"gpuscope_device_row_remap_pending{{{sel}}}")
                check(got == float(rows["pending"]), f"{hostname} {index}: remap pending {got}")
        got = values(prom, "gpuscope_device_last_xid == 79")
        where = sorted((dict(k)["hostname"], dict(k)["index"]) for k in got)
        check(where == [("fleet-e", "2")], f"XID 79 on fleet-e GPU 2 only, not {where}")

        # promtool reads each text exposition without a warning.
        for hostname, addr in targets.items():
            text = exporter_get(addr)[2]
            r = subprocess.run(["promtool", "check", "metrics"], input=text,
                               capture_output=True, text=True)
            out = (r.stdout + r.stderr).strip()
            check(r.returncode == 0 and out == "", f"promtool check metrics on {hostname}: {out}")

        # The fleet view over this Prometheus; then one exporter stops (the last one started).
        fleet = fleet_view(binary, prom, fixtures)
        top_in_tmux(binary, prom, fleet)
        down_within(binary, prom, children[len(HOSTS) - 1], HOSTS[-1][2], 1.0)
    finally:
        cleanup()
        log.close()
        if failures:
            with open(os.path.join(tmp, "processes.log")) as f:
                sys.stderr.write(f.read()[-4000:])
        shutil.rmtree(tmp, ignore_errors=True)

    devices = sum(len(fx["devices"]) for fx, _ in fixtures.values())
    print(f"prometheus-fleet: {len(HOSTS)} hosts, {devices} devices, {checks} checks, "
          f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
