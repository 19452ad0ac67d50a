#!/usr/bin/env python3
"""nvisel (nvitop 1.7.2) against gpuscope's `nvisel` front door, over the same fake NVML: for
each scenario (a fixture at a frame, with or without CUDA_VISIBLE_DEVICES) and each option set,
both must print the same stdout and exit with the same code.

Run by crates/fake-nvml/tests/real_clients.sh (a virtualenv with the pinned nvitop, and
fake-nvml installed as libnvidia-ml.so.1 and libcuda.so.1 in LIB_DIR). By hand:

    nvisel_door.py --lib-dir DIR --gpuscope BIN

nvisel runs in one Python process per scenario (`--worker`), which calls nvitop's own
`nvitop.select.main()` once per option set with that set as its command line: a process per
case would spend most of a minute importing nvitop. Its environment is restored between cases
(nvisel's `-i VALUE` sets CUDA_VISIBLE_DEVICES), and an uncaught exception is exit code 1, as
the Python interpreter would make it. gpuscope runs as `gpuscope nvisel --fixture F --frame N
OPTIONS`, one process per case, several at a time.

stderr is not compared: gpuscope says its own words there (docs/cli.md). A difference that
docs/cli.md names ("Where a door differs from its tool") is counted as documented, each in its
class; any other difference fails. Prints each unexplained difference (every one with
--verbose), then
    nvisel-door: M of N cases matched (S scenarios x O option sets); D documented differences
    (...); U unexplained
and exits 1 when U is not 0.
"""

import argparse
import concurrent.futures
import contextlib
import io
import json
import os
import re
import subprocess
import sys

from fake_nvml_env import fake_nvml_env

# gpu-lost.json's GPU 2, lost from frame 15 on (its memory N/A), by index and by UUID.
LOST = ("2", "GPU-0ef181f3-26da-5f79-dc3b-845c3cd31154")

# (name, fixture, frame, CUDA_VISIBLE_DEVICES or None, the names of a GPU whose memory is N/A)
SCENARIOS = [
    ("8gpu-f5", "h100-sxm-8gpu", 5, None, ()),
    ("8gpu-f20-cvd", "h100-sxm-8gpu", 20, "3,1,0,6", ()),
    ("mig-f20", "h100-mig", 20, None, ()),
    ("mig-f5-cvd", "h100-mig", 5, "0", ()),
    ("lost-f0", "gpu-lost", 0, None, ()),
    ("lost-f20", "gpu-lost", 20, None, LOST),
    ("lost-f20-cvd", "gpu-lost", 20, "2,3", LOST),
    ("lost-f10-cvd", "gpu-lost", 10, "3,0,1", ()),
    ("wddm-f10", "windows-wddm", 10, None, ()),
    ("k8s-f10", "k8s-time-slicing", 10, None, ()),
    ("k8s-f20-cvd", "k8s-time-slicing", 20, "1,0", ()),
    ("h200-real-f30", "h200-real", 30, None, ()),
    ("h100-real-f30", "h100-real", 30, None, ()),
]
# Not among them: geforce-desktop and old-driver, recorded from drivers without
# nvmlDeviceGetMemoryInfo_v2. fake-nvml exports every symbol and answers that one
# FUNCTION_NOT_FOUND, where such a driver has no symbol and nvitop would fall back to the
# first version; over fake-nvml nvitop reads their memory as N/A, which no real driver makes it.

OPTION_SETS = [
    [],
    ["-c", "1"],
    ["-c", "2"],
    ["-c", "4"],
    ["-c", "9"],
    ["-C", "1"],
    ["-C", "0"],
    ["-n", "2"],
    ["-n", "3"],
    ["-f", "10GiB"],
    ["-f", "40GiB"],
    ["-f", "1TiB", "-c", "1"],
    ["-c", "6", "-f", "40GiB"],
    ["-t", "20GiB"],
    ["-t", "100GiB"],
    ["-G", "30"],
    ["-G", "0"],
    ["-M", "20"],
    ["--tolerance", "20", "-f", "50GiB"],
    ["-f", "50GiB", "-c", "2", "--tol", "50"],
    ["-O", "uuid"],
    ["-O", "uuid", "-C", "2"],
    ["-S"],
    ["-S", "-C", "3"],
    ["--newline"],
    ["-0"],
    ["-s", ":"],
    ["-i"],
    ["-i", "0"],
    ["-i", "1,0"],
    ["-i", "0", "-O", "uuid"],
    ["-i", "-S"],
    ["-i", "1,0", "-c", "3"],
    ["-c", "3", "-C", "2"],
    ["-c", "-1"],
    ["-G", "abc"],
    ["-O", "serial"],
    ["--newline", "-0"],
    ["-G", "150"],
]


def documented(scenario, options, ours, theirs):
    """The class of a difference docs/cli.md names, or None."""
    if options == ["-c", "3", "-C", "2"] and (theirs["code"], ours["code"]) == (1, 2):
        return "-c above -C: nvisel's traceback (1), the door's usage error (2)"
    if options == ["-G", "150"] and ours["code"] == 2:
        return "a value above gpuscope's bound: exit 2"
    printed = set(re.split(r"[,:\n\0]", theirs["stdout"]))
    if printed & set(scenario[4]):
        return "a GPU whose memory is N/A: nvisel chooses it first, gpuscope never"
    return None


def worker(option_sets):
    """Runs nvisel's main() once per option set in this process; prints the results as JSON."""
    import warnings

    from nvitop import select as nvisel

    warnings.simplefilter("ignore")
    environ = dict(os.environ)
    results = []
    for options in option_sets:
        out, err = io.StringIO(), io.StringIO()
        sys.argv = ["nvisel", *options]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = nvisel.main()
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            except Exception as e:  # what the interpreter does with an uncaught exception
                print(f"{type(e).__name__}: {e}", file=err)
                code = 1
        os.environ.clear()
        os.environ.update(environ)
        results.append({"stdout": out.getvalue(), "code": code, "stderr": err.getvalue()})
    json.dump(results, sys.stdout)


def scenario_env(lib_dir, root, scenario):
    env = dict(os.environ)
    env.pop("CUDA_VISIBLE_DEVICES", None)
    env.pop("CUDA_DEVICE_ORDER", None)
    for name in [k for k in env if k.startswith("GPUSCOPE_")]:
        env.pop(name)
    if scenario[3] is not None:
        env["CUDA_VISIBLE_DEVICES"] = scenario[3]
    fixture = os.path.join(root, "fixtures", scenario[1] + ".json")
    return env, fake_nvml_env(lib_dir, fixture, scenario[2], base=env)


def run_nvisel(lib_dir, root, scenario):
    _, env = scenario_env(lib_dir, root, scenario)
    out = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--worker"],
        input=json.dumps(OPTION_SETS), env=env, capture_output=True, text=True, timeout=120,
    )
    if out.returncode != 0:
        raise RuntimeError(f"nvisel worker for {scenario[0]} failed: {out.stderr.strip()}")
    return json.loads(out.stdout)


def run_door(gpuscope, root, lib_dir, scenario, options):
    env, _ = scenario_env(lib_dir, root, scenario)
    fixture = os.path.join(root, "fixtures", scenario[1] + ".json")
    cmd = [gpuscope, "nvisel", "--fixture", fixture, "--frame", str(scenario[2]), *options]
    out = subprocess.run(cmd, env=env, capture_output=True, timeout=120)
    return {
        "stdout": out.stdout.decode("utf-8", "replace"),
        "code": out.returncode,
        "stderr": out.stderr.decode("utf-8", "replace"),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--lib-dir")
    ap.add_argument("--gpuscope")
    ap.add_argument("--verbose", action="store_true", help="print the documented differences too")
    a = ap.parse_args()
    if a.worker:
        worker(json.load(sys.stdin))
        return 0
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
    jobs = max(2, os.cpu_count() or 2)
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        theirs = {s[0]: pool.submit(run_nvisel, a.lib_dir, root, s) for s in SCENARIOS}
        ours = {
            (s[0], i): pool.submit(run_door, a.gpuscope, root, a.lib_dir, s, o)
            for s in SCENARIOS
            for i, o in enumerate(OPTION_SETS)
        }
        theirs = {k: f.result() for k, f in theirs.items()}
        ours = {k: f.result() for k, f in ours.items()}
    matched, classes, unexplained = 0, {}, 0
    for s in SCENARIOS:
        for i, options in enumerate(OPTION_SETS):
            t, o = theirs[s[0]][i], ours[(s[0], i)]
            if (t["stdout"], t["code"]) == (o["stdout"], o["code"]):
                matched += 1
                continue
            why = documented(s, options, o, t)
            if a.verbose or not why:
                label = "documented" if why else "UNEXPLAINED"
                print(f"  {label}: {s[0]} nvisel {' '.join(options)}: nvisel {t['stdout']!r} "
                      f"exit {t['code']}, door {o['stdout']!r} exit {o['code']}"
                      + (f" ({why})" if why else ""))
                print(f"    nvisel stderr: {t['stderr'].strip()[-300:]!r}")
                print(f"    door stderr: {o['stderr'].strip()[-300:]!r}")
            if why:
                classes[why] = classes.get(why, 0) + 1
            else:
                unexplained += 1
    total = len(SCENARIOS) * len(OPTION_SETS)
    summary = "; ".join(f"{n} {why}" for why, n in sorted(classes.items()))
    print(f"nvisel-door: {matched} of {total} cases matched ({len(SCENARIOS)} scenarios x "
          f"{len(OPTION_SETS)} option sets); {sum(classes.values())} documented differences "
          f"({summary or 'none'}); {unexplained} unexplained")
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
