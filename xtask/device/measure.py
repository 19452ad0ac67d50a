#!/usr/bin/env python3
"""Side-by-side costs of gpuscope and its peers on the machine it runs on (issue 23).

What a user meets, measured the same way for every tool, in one run:

* one-shot: `gpuscope snapshot --json`, the floor program (`oneshot-floor`: gpuscope's NVML
  backend asking every query once, /proc of each GPU process, nothing else), `nvidia-smi
  --query-gpu=...`, `nvitop -1`, `gpustat --json`: wall time from spawn to reap and the
  child's user+system CPU (wait4), runs interleaved, medians;
* viewers at 1 s: `gpuscope top -i 1` and `nvitop --interval 1`, each on a pseudo-terminal of
  200x60 (its output drained), CPU as a share of one core over a window, from
  /proc/PID/stat (and per thread, from /proc/PID/task/*/stat), after a warm-up;
* exporters at 1 s, idle (no scrapes after the first): `gpuscope export --interval 1s` and
  `nvitop-exporter --interval 1`, the same way.

With `--load`, the viewers and exporters are measured again while a PyTorch matrix-product
loop runs on GPU 0 (when torch with CUDA is importable; else spin.py, a PTX busy loop that the
driver compiles, launched through libcuda). Several gpuscope builds can be
compared in the same run (`--gpuscope NAME=PATH`, repeated).

It needs Python 3 and the peers in a virtualenv (`--venv`); nothing is fetched. It never
changes the GPU's settings. Results: `--out DIR`/results.json and results.md.

Used by hand on a lent GPU machine (docs/benchmarks.md says how); over fake-nvml the xtask
benches (`cargo xtask bench-oneshot`, `bench-export`, `bench-viewer`) do the same.
"""

import argparse
import fcntl
import json
import os
import pty
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import termios
import threading
import time
import urllib.request

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_ticks(pid):
    """utime + stime of a process, in clock ticks."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def thread_ticks(pid):
    """{thread name: ticks} of every thread of a process (names summed)."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                text = f.read()
        except OSError:
            continue
        name = text[text.index("(") + 1 : text.rindex(")")]
        fields = text.rsplit(")", 1)[1].split()
        out[name] = out.get(name, 0) + int(fields[11]) + int(fields[12])
    return out


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def oneshot(cmd, env):
    """(wall s, cpu s) of one run, spawn to reap."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise RuntimeError(f"{cmd} exited {p.returncode}")
    return wall, ru.ru_utime + ru.ru_stime


def on_pty(cmd, env, rows=60, cols=200):
    """Starts cmd on a pseudo-terminal of rows x cols; returns (pid, drain thread)."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execvpe(cmd[0], cmd, env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    os.kill(pid, signal.SIGWINCH)

    def drain():
        while True:
            try:
                if not os.read(fd, 65536):
                    break
            except OSError:
                break

    t = threading.Thread(target=drain, daemon=True)
    t.start()
    return pid, fd


def stop(pid):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        for _ in range(20):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                return
            if done:
                return
            time.sleep(0.1)


def cpu_share(pid, warmup, window):
    """Share of one core (percent) the process used over `window` s after `warmup` s, with
    per-thread shares."""
    time.sleep(warmup)
    t0, c0, th0 = time.perf_counter(), cpu_ticks(pid), thread_ticks(pid)
    time.sleep(window)
    t1, c1, th1 = time.perf_counter(), cpu_ticks(pid), thread_ticks(pid)
    secs = t1 - t0
    threads = {
        name: round(100.0 * (th1.get(name, 0) - th0.get(name, 0)) / CLK_TCK / secs, 2)
        for name in th1
        if th1.get(name, 0) - th0.get(name, 0) > 0
    }
    return round(100.0 * (c1 - c0) / CLK_TCK / secs, 2), threads, rss_kib(pid)


def wait_http(url, seconds=30):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                return len(r.read())
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"nothing answered at {url}")


LOAD = r"""
import torch, time, sys
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
print("load running", flush=True)
end = time.time() + float(sys.argv[1])
while time.time() < end:
    for _ in range(20):
        c = a @ b
    torch.cuda.synchronize()
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpuscope", action="append", required=True, help="NAME=PATH, repeated")
    ap.add_argument("--floor", help="the oneshot-floor binary")
    ap.add_argument("--venv", required=True, help="virtualenv with nvitop, nvitop-exporter, gpustat")
    ap.add_argument("--out", required=True)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--window", type=float, default=20.0)
    ap.add_argument("--warmup", type=float, default=4.0)
    ap.add_argument("--load", action="store_true", help="measure again under a torch matmul load")
    ap.add_argument("--python-with-torch", default="python3")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    env = dict(os.environ, TERM="xterm-256color", LC_ALL="C.UTF-8")
    venv_bin = os.path.join(a.venv, "bin")
    builds = [tuple(g.split("=", 1)) for g in a.gpuscope]
    results = {"machine": {}, "oneshot": {}, "viewer": {}, "exporter": {}}
    try:
        results["machine"]["nvidia-smi"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,power.draw,power.limit,pstate",
             "--format=csv"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as e:
        results["machine"]["nvidia-smi"] = str(e)
    results["machine"]["cpus"] = os.cpu_count()

    # ---- one-shots, interleaved ----
    tools = [(f"gpuscope snapshot --json ({n})", [p, "snapshot", "--json"]) for n, p in builds]
    if a.floor:
        tools.append(("oneshot-floor", [a.floor]))
    if shutil.which("nvidia-smi"):
        tools.append(("nvidia-smi --query-gpu", ["nvidia-smi",
                      "--query-gpu=index,name,memory.used,memory.total,utilization.gpu,"
                      "temperature.gpu,power.draw,clocks.sm", "--format=csv"]))
    tools.append(("nvitop -1", [os.path.join(venv_bin, "nvitop"), "-1"]))
    tools.append(("gpustat --json", [os.path.join(venv_bin, "gpustat"), "--json"]))
    runs = {name: [] for name, _ in tools}
    for name, cmd in tools:  # one warm-up each
        try:
            oneshot(cmd, env)
        except (OSError, RuntimeError) as e:
            runs[name] = str(e)
    for _ in range(a.runs):
        for name, cmd in tools:
            if isinstance(runs[name], list):
                try:
                    runs[name].append(oneshot(cmd, env))
                except (OSError, RuntimeError) as e:
                    runs[name] = str(e)
    for name, r in runs.items():
        if isinstance(r, str) or not r:
            results["oneshot"][name] = {"error": r}
            continue
        walls = [w * 1000 for w, _ in r]
        cpus = [c * 1000 for _, c in r]
        results["oneshot"][name] = {
            "wall_ms_median": round(statistics.median(walls), 1),
            "wall_ms_min": round(min(walls), 1), "wall_ms_max": round(max(walls), 1),
            "cpu_ms_median": round(statistics.median(cpus), 1), "runs": len(r)}
    print(json.dumps(results["oneshot"], indent=1), flush=True)

    def viewers_and_exporters(phase):
        views = [(f"gpuscope top -i 1 ({n})", [p, "top", "-i", "1"]) for n, p in builds]
        views.append(("nvitop --interval 1", [os.path.join(venv_bin, "nvitop"), "--interval", "1"]))
        for name, cmd in views:
            pid, fd = on_pty(cmd, env)
            try:
                share, threads, rss = cpu_share(pid, a.warmup, a.window)
                results["viewer"][f"{phase}: {name}"] = {
                    "cpu_pct": share, "threads": threads, "peak_rss_kib": rss}
            except OSError as e:
                results["viewer"][f"{phase}: {name}"] = {"error": str(e)}
            finally:
                stop(pid)
                os.close(fd)
            print(phase, name, results["viewer"][f"{phase}: {name}"], flush=True)
        port = 9600
        exps = []
        for n, p in builds:
            port += 1
            exps.append((f"gpuscope export --interval 1s ({n})",
                         [p, "export", "--listen", f"127.0.0.1:{port}", "--interval", "1s"], port))
        port += 1
        exps.append(("nvitop-exporter --interval 1",
                     [os.path.join(venv_bin, "nvitop-exporter"), "--bind-address", "127.0.0.1",
                      "--port", str(port), "--interval", "1"], port))
        for name, cmd, port in exps:
            p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
            try:
                size = wait_http(f"http://127.0.0.1:{port}/metrics")
                share, threads, rss = cpu_share(p.pid, a.warmup, a.window)
                results["exporter"][f"{phase}: {name}"] = {
                    "cpu_pct": share, "threads": threads, "peak_rss_kib": rss,
                    "scrape_bytes": size}
            except (OSError, RuntimeError) as e:
                results["exporter"][f"{phase}: {name}"] = {"error": str(e)}
            finally:
                stop(p.pid)
            print(phase, name, results["exporter"][f"{phase}: {name}"], flush=True)

    viewers_and_exporters("idle")
    if a.load:
        probe = subprocess.run([a.python_with_torch, "-c",
                                "import torch; assert torch.cuda.is_available()"],
                               capture_output=True, text=True)
        seconds = 4 * (a.warmup + a.window) * (len(builds) + 1) + 60
        if probe.returncode == 0:
            cmd = [a.python_with_torch, "-c", LOAD, str(seconds)]
            results["load"] = "bf16 8192^3 matmul loop on GPU 0 (torch)"
        else:
            # No torch: a PTX busy loop through libcuda, holding 6 GiB.
            spin = os.path.join(os.path.dirname(os.path.abspath(__file__)), "spin.py")
            cmd = [sys.executable, spin, str(seconds), "6"]
            results["load"] = "PTX FMA busy loop on GPU 0 holding 6 GiB (spin.py; no torch here)"
        load = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = load.stdout.readline()
        if "load running" not in line:
            load.wait()
            results["load"] = "the load did not start: " + load.stderr.read()[-300:]
        else:
            time.sleep(5)
            try:
                viewers_and_exporters("loaded")
            finally:
                stop(load.pid)

    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    lines = ["| work | tool | figure |", "|---|---|---|"]
    for name, r in results["oneshot"].items():
        fig = r.get("error") or f"{r['wall_ms_median']} ms wall ({r['wall_ms_min']}-{r['wall_ms_max']}), {r['cpu_ms_median']} ms CPU"
        lines.append(f"| one-shot | {name} | {fig} |")
    for kind in ("viewer", "exporter"):
        for name, r in results[kind].items():
            fig = r.get("error") or f"{r['cpu_pct']} % of a core; threads {r['threads']}"
            lines.append(f"| {kind} | {name} | {fig} |")
    with open(os.path.join(a.out, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
