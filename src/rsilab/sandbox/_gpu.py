"""NVIDIA GPUs on this host, and which of their device nodes a job may see.

The kernel driver makes one character device per GPU, ``/dev/nvidiaN``, and a few control
nodes every CUDA program opens (``nvidiactl``, ``nvidia-uvm``, ``nvidia-uvm-tools``,
``nvidia-modeset``). A GPU is named here by that N. ``CUDA_VISIBLE_DEVICES`` alone isolates
nothing (a job may unset it), so a sandbox that isolates binds only the assigned GPUs' nodes
and the control nodes (:func:`device_args`); CUDA in the job then finds those GPUs alone,
numbered from 0, which is what ``CUDA_VISIBLE_DEVICES`` is set to. The driver's user-space
libraries come with ``/usr`` (``/usr/lib/x86_64-linux-gnu``, or ``/usr/local/nvidia`` in
containers) and ``/proc/driver/nvidia`` with the job's own ``/proc``.

The folder the nodes are read from is ``/dev`` unless ``$RSILAB_GPU_DEV_ROOT`` names another:
for tests with stand-in nodes, and hosts whose nodes live elsewhere. It is the host's setting;
no job can change it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
from collections.abc import Sequence
from pathlib import Path

from rsilab.errors import UserError
from rsilab.sandbox.base import RunSpec

DEV_ROOT_VARIABLE = "RSILAB_GPU_DEV_ROOT"
"""Names the folder holding the ``nvidia*`` nodes, instead of ``/dev``."""
CONTROL_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")
"""Nodes every CUDA program may open, bound for every GPU job where present."""
DRIVER_INFO = Path("/proc/driver/nvidia/gpus")
"""One folder per GPU, with ``information`` (``Device Minor`` and ``GPU UUID`` lines)."""
_GPU_NODE = re.compile(r"nvidia(\d+)\Z")
DRIVER_LIBS = ("/usr/local/nvidia/lib64", "/usr/local/nvidia/lib")
"""Where GPU containers keep the driver's libraries (``libcuda``) outside the loader's cache,
found through ``LD_LIBRARY_PATH``: set to those present for GPU jobs (bound with ``/usr``)."""


def dev_root() -> Path:
    """Where the device nodes are read from: ``$RSILAB_GPU_DEV_ROOT`` or ``/dev``."""
    return Path(os.environ.get(DEV_ROOT_VARIABLE) or "/dev")


def _is_char_device(path: Path) -> bool:
    try:
        return stat.S_ISCHR(path.stat().st_mode)
    except OSError:
        return False


def gpu_numbers(root: Path | None = None) -> list[int]:
    """The N of every ``nvidiaN`` character device under ``root`` (default :func:`dev_root`),
    ascending; empty on a machine without NVIDIA GPUs."""
    root = root or dev_root()
    try:
        names = os.listdir(root)
    except OSError:
        return []
    found = (_GPU_NODE.match(name) for name in names)
    return sorted(int(m[1]) for m in found if m and _is_char_device(root / m[0]))


def _check_assigned(gpus: int, devices: Sequence[int]) -> None:
    if len(set(devices)) != gpus or len(devices) != gpus:
        raise ValueError(
            f"the job needs {gpus} GPU(s) but was assigned {list(devices)}: run it through "
            "an executor, which assigns each job its own GPUs"
        )


def device_args(gpus: int, devices: Sequence[int], root: Path | None = None) -> list[str]:
    """bwrap options showing a job exactly ``devices`` (after ``--dev /dev``): a
    ``--dev-bind`` per assigned ``nvidiaN`` and per control node present,
    ``CUDA_VISIBLE_DEVICES`` numbering them from 0, and ``LD_LIBRARY_PATH`` naming the
    :data:`DRIVER_LIBS` present. Empty for a job without GPUs.

    Raises:
        ValueError: ``devices`` is not ``gpus`` distinct numbers, or an assigned node is
            missing (a job is never started with fewer GPUs than it asked for).
    """
    _check_assigned(gpus, devices)
    if gpus == 0:
        return []
    root = root or dev_root()
    args: list[str] = []
    for number in sorted(devices):
        node = root / f"nvidia{number}"
        if not _is_char_device(node):
            raise ValueError(f"GPU {number} was assigned but {node} is not a character device")
        args += ["--dev-bind", str(node), f"/dev/nvidia{number}"]
    for name in CONTROL_NODES:
        if _is_char_device(root / name):
            args += ["--dev-bind", str(root / name), f"/dev/{name}"]
    visible = ",".join(str(i) for i in range(gpus))
    args += ["--setenv", "CUDA_VISIBLE_DEVICES", visible]
    libs = [d for d in DRIVER_LIBS if os.path.isdir(d)]
    return args + (["--setenv", "LD_LIBRARY_PATH", ":".join(libs)] if libs else [])


def visible_env(spec: RunSpec) -> dict[str, str]:
    """``CUDA_VISIBLE_DEVICES`` for a job that sees every GPU (a plain process): its assigned
    GPUs by UUID where the driver files give them, else by number with CUDA told to number
    GPUs in bus order, as the driver numbers its nodes. It only steers a cooperative job.

    Raises:
        ValueError: ``spec.gpu_devices`` is not ``spec.gpus`` distinct numbers.
    """
    _check_assigned(spec.gpus, spec.gpu_devices)
    if spec.gpus == 0:
        return {}
    known = gpu_uuids()
    if all(d in known for d in spec.gpu_devices):
        return {"CUDA_VISIBLE_DEVICES": ",".join(known[d] for d in sorted(spec.gpu_devices))}
    numbers = ",".join(str(d) for d in sorted(spec.gpu_devices))
    return {"CUDA_VISIBLE_DEVICES": numbers, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def gpu_uuids(info: Path = DRIVER_INFO) -> dict[int, str]:
    """GPU number -> UUID, from the driver's ``/proc`` files; empty where they are absent
    (then :mod:`rsilab.executors._gpu` can tell GPUs apart only on a one-GPU machine)."""
    found: dict[int, str] = {}
    try:
        folders = sorted(info.iterdir())
    except OSError:
        return found
    for folder in folders:
        try:
            text = (folder / "information").read_text()
        except OSError:
            continue
        minor = re.search(r"^Device Minor:\s*(\d+)", text, re.M)
        uuid = re.search(r"^GPU UUID:\s*(\S+)", text, re.M)
        if minor and uuid:
            found[int(minor[1])] = uuid[1]
    return found


def require_gpus(wanted: int, task: str, root: Path | None = None) -> None:
    """Preflight: nothing when this machine has ``wanted`` GPUs (device nodes) or more.

    Raises:
        UserError: fewer are found; the message names what was found (``nvidia-smi``
            missing, the number of device nodes) and the hint what to do.
    """
    if wanted <= 0:
        return
    root = root or dev_root()
    found = gpu_numbers(root)
    if len(found) >= wanted:
        return
    smi = "nvidia-smi found" if shutil.which("nvidia-smi") else "nvidia-smi missing"
    raise UserError(
        f"task {task!r} needs {wanted} GPU(s) (gpus = {wanted} in harness.toml) but this "
        f"machine has {len(found)}: {smi}, {len(found)} nvidia device node(s) under {root}",
        "run it on a machine with enough NVIDIA GPUs and their driver, or set gpus = 0 in "
        "the harness's harness.toml to run it on CPU",
    )


CUDA_PROBE = "import json, torch; print(json.dumps([torch.__version__, torch.version.cuda]))"
"""Asks an interpreter for its torch's version and CUDA version (None for a CPU build), without
starting CUDA."""


def require_cuda_torch(wanted: int, task: str, python: Path) -> None:
    """Preflight: nothing when ``wanted`` is 0 or the jobs' interpreter ``python`` has a torch
    built for CUDA. A CPU build would run a GPU task's jobs on the CPU (or fail in each job);
    refusing here says so once, before anything is written.

    Raises:
        UserError: ``python`` cannot be asked, cannot import torch, or its torch is a CPU
            build; the message names the interpreter and the torch version found.
    """
    if wanted <= 0:
        return
    what = f"task {task!r} needs {wanted} GPU(s) (gpus = {wanted} in harness.toml)"
    adopt = (
        f"adopt a Python whose torch is a CUDA build as the runtime: `rsilab runtime adopt "
        f"PYTHON --task {task}` (same major.minor as rsilab's), or set gpus = 0 in harness.toml"
    )
    try:
        ran = subprocess.run(
            [str(python), "-I", "-c", CUDA_PROBE], capture_output=True, text=True, timeout=300
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(
            f"{what} but its jobs' Python {python} could not be asked: {exc}", adopt
        ) from exc
    lines = (ran.stdout + ran.stderr).strip().splitlines()
    if ran.returncode != 0:
        last = lines[-1] if lines else f"exit {ran.returncode}"
        raise UserError(f"{what} but its jobs' Python {python} cannot import torch: {last}", adopt)
    try:
        version, cuda = json.loads(ran.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError, TypeError):
        raise UserError(
            f"{what} but its jobs' Python {python} did not answer what its torch is: "
            f"{lines[-1] if lines else 'no output'}",
            adopt,
        ) from None
    if not cuda:
        raise UserError(
            f"{what} but its jobs' torch {version} ({python}) is a CPU build: its jobs could "
            "not use a GPU",
            adopt,
        )
