#!/usr/bin/env python3
"""Peak memory of `gpuscope top --demo` on terminals of several sizes.

Runs the viewer on a pseudo-terminal whose size is set to COLSxROWS (80x24, 1000x500 and
10000x10000 by default), lets it draw for 4 seconds at 0.25 s refresh, reads VmHWM (peak RSS)
from /proc, then presses q and checks that it exited 0. The viewer draws into at most
1000x500 cells whatever the terminal reports, so the last two rows should match.

Usage: python3 crates/gpuscope/benches/top_terminal_size_rss.py PATH/TO/gpuscope [COLSxROWS...]
"""
import fcntl
import os
import pty
import select
import signal
import struct
import sys
import termios
import time


def drain(fd, seconds):
    """Reads what the viewer writes for `seconds`; returns the byte count."""
    n = 0
    end = time.time() + seconds
    while time.time() < end:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                data = os.read(fd, 1 << 20)
            except OSError:
                break
            if not data:
                break
            n += len(data)
    return n


def run(exe, cols, rows):
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(exe, [exe, "top", "--demo", "--interval", "0.25s"])
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    os.kill(pid, signal.SIGWINCH)
    written = drain(fd, 4)
    with open(f"/proc/{pid}/status") as f:
        hwm = next(l.split()[1] for l in f if l.startswith("VmHWM"))
    os.write(fd, b"q")
    drain(fd, 5)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    print(f"{cols}x{rows}: peak RSS {int(hwm) / 1024:.1f} MB, {written} bytes drawn, exit {code}")


def main():
    exe = sys.argv[1]
    sizes = sys.argv[2:] or ["80x24", "1000x500", "10000x10000"]
    for size in sizes:
        cols, rows = (int(v) for v in size.split("x"))
        run(exe, cols, rows)


if __name__ == "__main__":
    main()
