#!/usr/bin/env python3
"""Does the NVIDIA driver run NVML calls from several threads at once? (issue 36, item 3)

On a GPU machine, through ctypes and libnvidia-ml.so.1 alone (no gpuscope, no pip package):
for each of a few queries (a maximum clock, the memory, the utilization, the power), the wall
of CALLS calls on one thread, of THREADS threads making CALLS calls each on GPU 0 at once, and,
with several GPUs, of one thread per GPU at once; and each call's CPU on its own thread
(CLOCK_THREAD_CPUTIME_ID), which says whether a call's time is the calling thread's work or a
wait. Prints one JSON object a query and a verdict: "parallel" (N threads take about as long
as one), "serial" (N times as long), or, across GPUs, "per-device" (threads on one GPU wait for
each other, threads on different GPUs do not). fake-nvml's cost profile takes the same words
(`concurrency`).

    python3 xtask/device/concurrency.py [--calls 200] [--threads 4]
"""

import argparse
import ctypes
import json
import sys
import threading
import time

NVML = ctypes.CDLL("libnvidia-ml.so.1")


def check(rc, what):
    if rc != 0:
        raise SystemExit(f"{what}: NVML error {rc}")


class Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class Util(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


def queries(handle):
    """name -> a function making one call on `handle`."""
    clock = ctypes.c_uint()
    mem = Memory()
    util = Util()
    power = ctypes.c_uint()
    return {
        "nvmlDeviceGetMaxClockInfo": lambda: NVML.nvmlDeviceGetMaxClockInfo(handle, 0, ctypes.byref(clock)),
        "nvmlDeviceGetMemoryInfo": lambda: NVML.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(mem)),
        "nvmlDeviceGetUtilizationRates": lambda: NVML.nvmlDeviceGetUtilizationRates(handle, ctypes.byref(util)),
        "nvmlDeviceGetPowerUsage": lambda: NVML.nvmlDeviceGetPowerUsage(handle, ctypes.byref(power)),
    }


def run_threads(fns, calls):
    """Wall (s) of one thread per function in `fns`, each making `calls` calls, started
    together; and each thread's CPU (s)."""
    barrier = threading.Barrier(len(fns) + 1)
    cpu = [0.0] * len(fns)

    def work(i, fn):
        barrier.wait()
        c = time.clock_gettime(time.CLOCK_THREAD_CPUTIME_ID)
        for _ in range(calls):
            fn()
        cpu[i] = time.clock_gettime(time.CLOCK_THREAD_CPUTIME_ID) - c

    ts = [threading.Thread(target=work, args=(i, f)) for i, f in enumerate(fns)]
    for t in ts:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in ts:
        t.join()
    return time.perf_counter() - t0, cpu


def verdict(one, many, n):
    """Where `n` workers that took `many` together sit between parallel (`one`) and serial
    (`n * one`): 1 parallel, 0 serial."""
    if n <= 1 or one <= 0:
        return None
    return max(0.0, min(1.0, (n * one - many) / ((n - 1) * one)))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--threads", type=int, default=4)
    a = p.parse_args()
    check(NVML.nvmlInit_v2(), "nvmlInit_v2")
    count = ctypes.c_uint()
    check(NVML.nvmlDeviceGetCount_v2(ctypes.byref(count)), "nvmlDeviceGetCount_v2")
    handles = []
    for i in range(count.value):
        h = ctypes.c_void_p()
        check(NVML.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h)), f"handle {i}")
        handles.append(h)
    # Python holds its lock between calls, not in them (ctypes lets it go around a foreign
    # call), so threads overlap where the driver lets them.
    results = []
    for name in queries(handles[0]):
        per_gpu = [queries(h)[name] for h in handles]
        per_gpu[0]()  # the first call, untimed
        one, cpu1 = run_threads([per_gpu[0]], a.calls)
        many, cpus = run_threads([per_gpu[0]] * a.threads, a.calls)
        r = {
            "query": name,
            "calls": a.calls,
            "one_thread_ms": round(one * 1e3, 2),
            "cpu_share_of_wall_one_thread": round(cpu1[0] / one, 2) if one else None,
            "threads": a.threads,
            "threads_on_gpu0_ms": round(many * 1e3, 2),
            "overlap_on_one_gpu": verdict(one, many, a.threads),
        }
        if len(handles) > 1:
            for f in per_gpu[1:]:
                f()
            across, _ = run_threads(per_gpu, a.calls)
            r["gpus"] = len(handles)
            r["one_thread_per_gpu_ms"] = round(across * 1e3, 2)
            r["overlap_across_gpus"] = verdict(one, across, len(handles))
        same, across = r["overlap_on_one_gpu"], r.get("overlap_across_gpus")
        if same is None:
            r["verdict"] = None
        elif same > 0.7:
            r["verdict"] = "parallel"
        elif across is not None and across > 0.7:
            r["verdict"] = "per-device"
        elif across is None:
            r["verdict"] = "serial or per-device (one GPU cannot tell)"
        else:
            r["verdict"] = "serial"
        results.append(r)
        print(json.dumps(r), flush=True)
    NVML.nvmlShutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
