"""GPU device nodes: discovery, the preflight refusal, and what a bubblewrap job sees.

No GPU is needed: stand-in nodes are made with mknod as copies of /dev/null (character
device 1:3) in a temporary "dev root" that ``$RSILAB_GPU_DEV_ROOT`` points the sandbox to.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from rsilab.errors import UserError
from rsilab.sandbox import BwrapSandbox, ProcessSandbox
from rsilab.sandbox import _gpu as gpu
from rsilab.sandbox._gpu import (
    device_args,
    gpu_numbers,
    gpu_uuids,
    require_cuda_torch,
    require_gpus,
)
from tests.sandbox.gpu_nodes import make_dev_root
from tests.sandbox.helpers import QUICK, bwrap_problem, py


@pytest.fixture
def dev_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Three GPUs and two control nodes, plus a plain file named like a GPU node."""
    root = make_dev_root(tmp_path, ("nvidia0", "nvidia1", "nvidia2", "nvidiactl", "nvidia-uvm"))
    (root / "nvidia7").write_text("not a device")
    monkeypatch.setenv("RSILAB_GPU_DEV_ROOT", str(root))
    return root


def test_gpu_numbers_are_the_character_devices_only(dev_root: Path) -> None:
    assert gpu_numbers(dev_root) == [0, 1, 2]
    assert gpu_numbers(dev_root / "missing") == []


def test_device_args_refuse_a_job_given_fewer_gpus_than_it_needs(dev_root: Path) -> None:
    with pytest.raises(ValueError, match="needs 1 GPU"):
        device_args(1, ())
    with pytest.raises(ValueError, match="needs 2 GPU"):
        device_args(2, (1, 1))
    with pytest.raises(ValueError, match="not a character device"):
        device_args(1, (7,))
    assert device_args(0, ()) == []


def test_preflight_refuses_a_gpu_task_on_this_machine_without_one() -> None:
    # This machine has no GPU: the real /dev holds no nvidiaN node and no nvidia-smi.
    assert not [p for p in os.listdir("/dev") if p.startswith("nvidia")]
    assert shutil.which("nvidia-smi") is None
    with pytest.raises(UserError) as caught:
        require_gpus(1, "lm", Path("/dev"))
    message = str(caught.value)
    assert "task 'lm' needs 1 GPU(s)" in message
    assert "nvidia-smi missing, 0 nvidia device node(s) under /dev" in message
    assert "\n" not in message
    require_gpus(0, "cpu-task", Path("/dev"))  # no GPUs wanted: nothing to check


def test_preflight_counts_device_nodes(dev_root: Path) -> None:
    require_gpus(3, "lm", dev_root)
    with pytest.raises(UserError, match="has 3: nvidia-smi missing, 3 nvidia device"):
        require_gpus(4, "lm", dev_root)


def test_gpu_uuids_read_the_driver_information(tmp_path: Path) -> None:
    for bus, minor, uuid in (("0000:01:00.0", 1, "GPU-aa"), ("0000:02:00.0", 0, "GPU-bb")):
        (tmp_path / bus).mkdir()
        (tmp_path / bus / "information").write_text(
            f"Model: \t\t NVIDIA H200\nGPU UUID: \t {uuid}\nDevice Minor: \t {minor}\n"
        )
    assert gpu_uuids(tmp_path) == {0: "GPU-bb", 1: "GPU-aa"}
    assert gpu_uuids(tmp_path / "missing") == {}


_LIST = (
    "import json, os\n"
    "nodes = sorted(n for n in os.listdir('/dev') if n.startswith('nvidia'))\n"
    "opened = []\n"
    "for n in nodes:\n"
    "    with open('/dev/' + n, 'wb') as f:\n"
    "        opened.append(n)\n"
    "print(json.dumps({'nodes': nodes, 'opened': opened,\n"
    "                  'visible': os.environ.get('CUDA_VISIBLE_DEVICES')}))\n"
)


@pytest.fixture(scope="module")
def bwrap() -> Iterator[BwrapSandbox]:
    if bwrap_problem() is not None:
        pytest.skip(f"bubblewrap is unusable here ({bwrap_problem()})")
    with BwrapSandbox() as sandbox:
        assert isinstance(sandbox, BwrapSandbox)
        yield sandbox


def _seen(bwrap: BwrapSandbox, gpus: int, devices: tuple[int, ...]) -> dict[str, object]:
    with bwrap.scratch(QUICK.disk_mb, kind="test") as workspace:
        result = bwrap.run(py(workspace, _LIST, gpus=gpus, gpu_devices=devices))
    assert result.ok, result.stderr.decode()
    seen: dict[str, object] = json.loads(result.stdout)
    return seen


def test_a_bwrap_job_sees_only_its_assigned_gpu(bwrap: BwrapSandbox, dev_root: Path) -> None:
    seen = _seen(bwrap, 1, (1,))
    # nvidia0 and nvidia2 exist on the host (dev_root) but not in the job.
    assert seen == {
        "nodes": ["nvidia-uvm", "nvidia1", "nvidiactl"],
        "opened": ["nvidia-uvm", "nvidia1", "nvidiactl"],  # bound as devices, not nodev
        "visible": "0",
    }


def test_a_bwrap_job_with_two_gpus_sees_both_numbered_from_zero(
    bwrap: BwrapSandbox, dev_root: Path
) -> None:
    seen = _seen(bwrap, 2, (2, 0))
    assert seen["nodes"] == ["nvidia-uvm", "nvidia0", "nvidia2", "nvidiactl"]
    assert seen["visible"] == "0,1"


def test_a_bwrap_job_without_gpus_sees_no_nvidia_node(bwrap: BwrapSandbox, dev_root: Path) -> None:
    assert _seen(bwrap, 0, ()) == {"nodes": [], "opened": [], "visible": None}


def test_a_bwrap_job_short_of_gpus_is_refused(bwrap: BwrapSandbox, dev_root: Path) -> None:
    with (
        bwrap.scratch(QUICK.disk_mb, kind="test") as workspace,
        pytest.raises(ValueError, match="needs 1 GPU"),
    ):
        bwrap.run(py(workspace, "print(1)", gpus=1))


def test_a_plain_process_job_is_steered_by_cuda_visible_devices_only(tmp_path: Path) -> None:
    # ProcessSandbox isolates nothing: the job gets its GPU's number (no driver files here to
    # give UUIDs) and bus order, the numbering the driver gives the nodes.
    box = ProcessSandbox()
    code = "import os; print(os.getenv('CUDA_VISIBLE_DEVICES'), os.getenv('CUDA_DEVICE_ORDER'))"
    result = box.run(py(tmp_path, code, gpus=1, gpu_devices=(3,)))
    assert result.stdout.decode().split() == ["3", "PCI_BUS_ID"]
    assert box.run(py(tmp_path, code)).stdout.decode().split() == ["None", "None"]
    with pytest.raises(ValueError, match="needs 1 GPU"):
        box.run(py(tmp_path, code, gpus=1))


def test_gpu_jobs_find_a_containers_driver_libraries(
    dev_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In GPU containers libcuda lives in /usr/local/nvidia/lib64, outside the loader's cache.
    lib = tmp_path / "nvidia" / "lib64"
    lib.mkdir(parents=True)
    monkeypatch.setattr(gpu, "DRIVER_LIBS", (str(lib), str(tmp_path / "absent")))
    args = device_args(1, (0,))
    assert args[-3:] == ["--setenv", "LD_LIBRARY_PATH", str(lib)]
    monkeypatch.setattr(gpu, "DRIVER_LIBS", (str(tmp_path / "absent"),))
    assert "LD_LIBRARY_PATH" not in device_args(1, (0,))


def _python_with_torch(folder: Path, source: str | None) -> Path:
    """A real venv whose ``torch`` package is ``source`` (None: no torch at all)."""
    import subprocess
    import sys

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    if source is not None:
        (site,) = folder.glob("lib/python*/site-packages")
        (site / "torch").mkdir()
        (site / "torch" / "__init__.py").write_text(source)
    return folder / "bin" / "python"


_TORCH = "__version__ = {version!r}\nclass version:\n    cuda = {cuda!r}\n"


def test_the_jobs_torch_must_be_a_cuda_build_when_the_harness_asks_for_gpus(
    tmp_path: Path,
) -> None:
    cpu = _python_with_torch(tmp_path / "cpu", _TORCH.format(version="2.9.1+cpu", cuda=None))
    cuda = _python_with_torch(tmp_path / "cuda", _TORCH.format(version="2.9.1+cu128", cuda="12.8"))
    broken = _python_with_torch(tmp_path / "broken", "raise ImportError('libcudart.so.12')")
    none = _python_with_torch(tmp_path / "none", None)

    require_cuda_torch(1, "lm", cuda)
    require_cuda_torch(0, "lm", cpu)  # no GPUs wanted: nothing to check
    require_cuda_torch(0, "lm", tmp_path / "missing" / "python")
    with pytest.raises(UserError) as caught:
        require_cuda_torch(2, "lm", cpu)
    assert caught.value.message == (
        f"task 'lm' needs 2 GPU(s) (gpus = 2 in harness.toml) but its jobs' torch 2.9.1+cpu "
        f"({cpu}) is a CPU build: its jobs could not use a GPU"
    )
    assert "`rsilab runtime adopt PYTHON --task lm`" in str(caught.value.hint)
    with pytest.raises(
        UserError, match=r"cannot import torch: ImportError: libcudart\.so\.12 \(hint"
    ):
        require_cuda_torch(1, "lm", broken)
    with pytest.raises(UserError, match="cannot import torch: ModuleNotFoundError: No module"):
        require_cuda_torch(1, "lm", none)
    with pytest.raises(UserError, match="could not be asked"):
        require_cuda_torch(1, "lm", tmp_path / "missing" / "python")
    liar = tmp_path / "liar"  # a wrapper that runs, exits 0 and prints something else
    liar.write_text("#!/bin/sh\necho hello\n")
    liar.chmod(0o755)
    with pytest.raises(UserError) as said:
        require_cuda_torch(1, "lm", liar)
    assert said.value.message.endswith(
        f"its jobs' Python {liar} did not answer what its torch is: hello"
    )


def test_the_pinned_cpu_torch_is_refused_for_a_gpu_job() -> None:
    """The real thing: this venv's torch, the CPU build the project pins."""
    import sys

    import torch

    assert torch.version.cuda is None
    with pytest.raises(UserError, match=f"its jobs' torch {re.escape(torch.__version__)} "):
        require_cuda_torch(1, "lm", Path(sys.executable))
