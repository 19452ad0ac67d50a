"""How the client scripts beside this file aim a program at fake-nvml: the environment in which
libnvidia-ml.so.1 (and libcuda.so.1) load from the folder where real_clients.sh installed
fake-nvml, serving a fixture. Imported by gpustat_stat.py, gpustat_text.py, nvisel_door.py,
nvitop_sm.py, real_clients.py and real_hardware.py (Python puts a script's own folder first on
sys.path)."""

import os


def fake_nvml_env(lib_dir, fixture, frame=None, base=None, **more):
    """`base` (this process's environment unless given) with fake-nvml's folder `lib_dir` first
    on LD_LIBRARY_PATH, serving `fixture` (GPUSCOPE_FAKE_NVML_FIXTURE, made absolute) pinned at
    `frame` (GPUSCOPE_FAKE_NVML_FRAME; with None an inherited pin is dropped and fake-nvml
    steps its own replay clock), and the variables of `more`. FAKE_NVML_LIB, with which
    pynvml_check.py loads a library by its path, is dropped: the search path decides."""
    env = dict(os.environ if base is None else base)
    env.pop("FAKE_NVML_LIB", None)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        x for x in (lib_dir, env.get("LD_LIBRARY_PATH")) if x)
    env["GPUSCOPE_FAKE_NVML_FIXTURE"] = os.path.abspath(fixture)
    if frame is None:
        env.pop("GPUSCOPE_FAKE_NVML_FRAME", None)
    else:
        env["GPUSCOPE_FAKE_NVML_FRAME"] = str(frame)
    env.update(more)
    return env
