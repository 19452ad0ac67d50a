#!/usr/bin/env python3
"""Time of `gpuscope snapshot --remote` over 100 exporters of which some never answer.

Starts a stub on 127.0.0.1 that serves 100 exporters, each under a path of its own
(http://127.0.0.1:PORT/eN/metrics): a small gpuscope exposition, except every K-th, which
reads the request and never answers (it holds the connection until the client leaves, 30 s at
most). Runs `gpuscope snapshot --json --remote URL... --prometheus-timeout 1s` for each share
of silent exporters (10, 50 and 100 of 100 by default) and prints the wall time, the exit code
and how many hosts were up and down. With --pids-max N (root only) gpuscope runs in a pids
cgroup (v1 or v2) with that many tasks at most.

Usage: python3 crates/gpuscope/benches/remote_silent_exporters.py [--pids-max N] GPUSCOPE...
(one or more binaries, e.g. main's and a branch's, measured in turn)
"""
import http.server
import json
import os
import select
import socket
import socketserver
import subprocess
import sys
import threading
import time

EXPORTERS = 100
SILENT_SHARES = [10, 50, 100]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        name = self.path.strip("/").split("/")[0]
        if name in self.server.silent:
            end = time.time() + 30
            while time.time() < end:
                ready, _, _ = select.select([self.connection], [], [], 0.2)
                if ready and not self.connection.recv(1, socket.MSG_PEEK):
                    return
            return
        body = (
            f'gpuscope_exporter_sample_timestamp_seconds{{hostname="{name}"}} {time.time()}\n'
            f'gpuscope_device_memory_free_bytes{{hostname="{name}",index="0",'
            f'uuid="GPU-{name}"}} 1024\n'
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    request_queue_size = 512


def pids_cgroup(tasks):
    """A new pids cgroup limited to `tasks`, or None."""
    name = f"gpuscope-bench-{os.getpid()}"
    for parent in ["/sys/fs/cgroup", "/sys/fs/cgroup/pids"]:
        if not os.path.isfile(os.path.join(parent, "cgroup.procs")):
            continue
        path = os.path.join(parent, name)
        try:
            os.mkdir(path)
        except OSError:
            continue
        if os.path.isfile(os.path.join(path, "pids.max")):
            with open(os.path.join(path, "pids.max"), "w") as f:
                f.write(str(tasks))
            return path
        os.rmdir(path)
    return None


def main():
    args = sys.argv[1:]
    pids_max = None
    if args[:1] == ["--pids-max"]:
        pids_max = int(args[1])
        args = args[2:]
    if not args:
        sys.exit(__doc__)
    server = Server(("127.0.0.1", 0), Handler)
    server.silent = set()
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    urls = [f"http://127.0.0.1:{port}/e{i}/metrics" for i in range(EXPORTERS)]
    cgroup = pids_cgroup(pids_max) if pids_max else None
    if pids_max and not cgroup:
        sys.exit("no pids cgroup can be made here (root, and a writable cgroup hierarchy)")
    print(f"{'binary':<40} {'silent':>6} {'seconds':>8} {'exit':>4} {'up':>4} {'down':>4}")
    try:
        for exe in args:
            for silent in SILENT_SHARES:
                step = EXPORTERS // silent
                server.silent = {f"e{i}" for i in range(0, EXPORTERS, step)}
                cmd = [exe, "snapshot", "--json", "--prometheus-timeout", "1s", "--remote"]
                cmd += urls
                if cgroup:
                    procs = os.path.join(cgroup, "cgroup.procs")
                    cmd = ["sh", "-c", 'echo $$ > "$0" && exec "$@"', procs] + cmd
                started = time.monotonic()
                out = subprocess.run(cmd, capture_output=True, timeout=600)
                took = time.monotonic() - started
                try:
                    hosts = json.loads(out.stdout)["hosts"]
                    up = sum(h["state"] == "up" for h in hosts)
                    down = len(hosts) - up
                except ValueError:
                    up = down = "-"
                print(f"{exe[-40:]:<40} {silent:>6} {took:>8.2f} {out.returncode:>4} {up:>4} {down:>4}")
                time.sleep(1)
    finally:
        if cgroup:
            for _ in range(50):
                try:
                    os.rmdir(cgroup)
                    break
                except OSError:
                    time.sleep(0.1)
        server.shutdown()


if __name__ == "__main__":
    main()
