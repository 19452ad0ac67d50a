#!/usr/bin/env python3
"""Does a PCIe throughput reading count the NVML traffic of the same process? (2026-11-28)

`nvmlDeviceGetPcieThroughput` samples the link's bytes over 20 ms. gpuscope asks it on a thread
of its own while the rest of the refresh asks the other queries; beside nvidia-smi -q on a live
H100 its reading was ~50 MB/s each way where nvidia-smi's was ~1 MB/s. Through ctypes alone, on
GPU 0: ROUNDS readings of TX and RX with nothing else asked, then ROUNDS with another thread
asking the static facts' kind of query (maximum and application clocks, power limits, PCI
info) all the while. Prints one JSON line each and the medians, KB/s as NVML gives them.

    python3 xtask/device/pcie-self.py [--rounds 9]
"""

import argparse
import ctypes
import json
import statistics
import threading

NVML = ctypes.CDLL("libnvidia-ml.so.1")


def check(rc, what):
    if rc != 0:
        raise SystemExit(f"{what}: NVML error {rc}")


def reading(handle, counter):
    v = ctypes.c_uint()
    check(NVML.nvmlDeviceGetPcieThroughput(handle, counter, ctypes.byref(v)), "PcieThroughput")
    return v.value


def busy(handle, stop):
    clock = ctypes.c_uint()
    limit = ctypes.c_uint()
    pci = ctypes.create_string_buffer(256)
    calls = 0
    while not stop.is_set():
        for c in range(4):
            NVML.nvmlDeviceGetMaxClockInfo(handle, c, ctypes.byref(clock))
            NVML.nvmlDeviceGetApplicationsClock(handle, c, ctypes.byref(clock))
        NVML.nvmlDeviceGetEnforcedPowerLimit(handle, ctypes.byref(limit))
        NVML.nvmlDeviceGetPciInfo_v3(handle, pci)
        calls += 10
    return calls


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=9)
    a = ap.parse_args()
    check(NVML.nvmlInit_v2(), "init")
    handle = ctypes.c_void_p()
    check(NVML.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(handle)), "handle")
    out = {}
    for label, with_busy in (("alone", False), ("beside other queries", True)):
        tx, rx = [], []
        for _ in range(a.rounds):
            stop = threading.Event()
            t = threading.Thread(target=busy, args=(handle, stop)) if with_busy else None
            if t:
                t.start()
            tx.append(reading(handle, 0))
            rx.append(reading(handle, 1))
            stop.set()
            if t:
                t.join()
        out[label] = {"tx_kbps": tx, "rx_kbps": rx,
                      "tx_median": statistics.median(tx), "rx_median": statistics.median(rx)}
        print(json.dumps({"case": label, **out[label]}))
    NVML.nvmlShutdown()


if __name__ == "__main__":
    main()
