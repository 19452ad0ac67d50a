#!/usr/bin/env python3
"""Peak memory and time of gpuscope's Prometheus reader against a hostile Prometheus.

Starts a stub Prometheus on 127.0.0.1 that answers every query of a refresh the same hostile
way, runs gpuscope against it under `/usr/bin/time -v`, and prints the exit code, the wall
time, the peak RSS (time's "Maximum resident set size") and how many queries the stub was
asked. The figures of docs/security.md ("Fleet readers") come from it. Cases:

  warnings:N  every answer carries N warnings of 44 characters (47 bytes on the wire each,
              1,000,000 of them are 47 MB) and no series:
              `snapshot --prometheus URL --prometheus-timeout 600s`
  silent      the stub accepts each connection, reads the request and never answers:
              `select --prometheus URL --prometheus-timeout 1s`
  model       every answer is about 60 MB of distinct series (20,000 hosts, each series its
              own process with a 200-character command line and long names; every value 1, so
              every host is scraped and stale and keeps its devices): what the fleet's model
              keeps is bounded, whatever the answers hold:
              `snapshot --prometheus URL --prometheus-timeout 600s`

The memory cases give gpuscope 600 s for the refresh, so that it reads every answer (its
default 5 s for the whole refresh would stop a debug build early).

gpuscope runs with its address space capped (`--as-limit-gib`, 4 by default) so that a build
that does not bound its memory fails as it would in a small container, instead of taking the
shared machine's memory.

Usage: python3 crates/gpuscope/benches/fleet_hostile_prometheus.py [--as-limit-gib N]
           PATH/TO/gpuscope CASE...
"""
import http.server
import re
import resource
import socket
import socketserver
import subprocess
import sys
import threading
import time

# The evaluation time of every answer.
T = 1_763_800_000.0


def warnings_body(n):
    """An empty vector with `n` warnings."""
    parts = [b'{"status":"success","warnings":[']
    parts.append(
        b",".join(b'"remote read of store %07d failed: timeout"' % i for i in range(n))
    )
    parts.append(b'],"data":{"resultType":"vector","result":[]}}')
    return b"".join(parts)


def model_body(target_bytes=60_000_000):
    """A vector of distinct series with long labels, about `target_bytes` long."""
    series = []
    size = 0
    i = 0
    while size < target_bytes:
        h = i % 20_000
        labels = (
            f'"instance":"10.{h // 65536}.{h // 256 % 256}.{h % 256}:9445","job":"gpu",'
            f'"hostname":"gpu-node-{h:05d}-{"x" * 48}","index":"{i // 20_000 % 8}",'
            f'"pid":"{i}","username":"user{i % 7}","uuid":"GPU-{i:08x}-0000-0000-0000-000000000000",'
            f'"name":"NVIDIA H100 80GB HBM3 {"y" * 40}",'
            f'"command":"python train.py --run {i:010d} {"z" * 170}"'
        )
        s = f'{{"metric":{{{labels}}},"value":[{T},"1"]}}'
        series.append(s)
        size += len(s) + 1
        i += 1
    return (
        '{"status":"success","data":{"resultType":"vector","result":['
        + ",".join(series)
        + "]}}"
    ).encode()


class Stub(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

    def __init__(self, body):
        self.body = body
        self.asked = 0
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), Handler)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        with self.server.lock:
            self.server.asked += 1
        body = self.server.body
        if body is None:
            # Silent: hold the connection until the client goes, or a minute passes.
            self.connection.settimeout(60)
            try:
                while self.connection.recv(256):
                    pass
            except (socket.timeout, OSError):
                pass
            self.close_connection = True
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:
            self.close_connection = True


def run(exe, case, as_limit):
    # The cases that measure memory give gpuscope time to read every answer (its
    # --prometheus-timeout bounds the whole refresh, its default 5 s would end it early on a
    # slow debug build); the silent case measures the time limit itself.
    if case.startswith("warnings:"):
        body = warnings_body(int(case.split(":")[1]))
        args = ["snapshot", "--prometheus-timeout", "600s"]
    elif case == "silent":
        body = None
        args = ["select", "--prometheus-timeout", "1s"]
    elif case == "model":
        body = model_body()
        args = ["snapshot", "--prometheus-timeout", "600s"]
    else:
        sys.exit(f"unknown case {case!r}")
    stub = Stub(body)
    threading.Thread(target=stub.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{stub.server_address[1]}"
    cmd = ["/usr/bin/time", "-v", exe, args[0], "--prometheus", url, *args[1:]]

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (as_limit, as_limit))

    started = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, preexec_fn=cap, timeout=600)
    wall = time.monotonic() - started
    stub.shutdown()
    err = done.stderr.decode(errors="replace")
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", err).group(1))
    status = re.search(r"Exit status: (\d+)", err)
    signal = re.search(r"Command terminated by signal (\d+)", err)
    code = f"signal {signal.group(1)}" if signal else f"exit {status.group(1)}"
    body_mb = 0 if body is None else len(body) / 1e6
    first = next((l for l in err.splitlines() if l.startswith("gpuscope:")), "")
    print(
        f"{case}: {code}, {wall:.2f} s, peak RSS {rss / 1024:.1f} MiB, "
        f"{stub.asked} queries asked, answers of {body_mb:.1f} MB; {first[:160]}"
    )


def main():
    argv = sys.argv[1:]
    as_limit = 4 << 30
    if argv[:1] == ["--as-limit-gib"]:
        as_limit = int(argv[1]) << 30
        argv = argv[2:]
    if len(argv) < 2:
        sys.exit(__doc__)
    exe, cases = argv[0], argv[1:]
    for case in cases:
        run(exe, case, as_limit)


if __name__ == "__main__":
    main()
