"""kernel end to end: the reference passes, a wrong kernel is invalid, numpy is faster.

Only relative, robust assertions: the speed targets belong in the benchmarks.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rsilab.records import DataTier
from rsilab.sandbox.base import Sandbox
from rsilab.tasks import Outcome, get_task, run_experiment

FAST = """\
import numpy as np
WINDOW = 16
def kernel(x):
    c = np.concatenate(([0.0], np.cumsum(x)))
    i = np.arange(len(x))
    lo = np.maximum(0, i - WINDOW + 1)
    return (c[i + 1] - c[lo]) / (i + 1 - lo)
"""

WRONG = "import numpy as np\ndef kernel(x):\n    return np.cumsum(x)\n"
BROKEN = "raise ImportError('no luck')\n"
CLOCK_PATCH = """\
import time
time.perf_counter = lambda: 0.0
from reference_copy import kernel
"""


def _run(tmp_path: Path, sandbox: Sandbox, secret: bytes, source: str | None) -> Outcome:
    task = get_task("kernel")
    workspace = tmp_path / "ws"
    shutil.copytree(task.harness, workspace)
    if source is not None:
        shutil.copy(workspace / "kernel.py", workspace / "reference_copy.py")
        (workspace / "kernel.py").write_text(source)
    return run_experiment(task, sandbox, secret, seed=3, workspace=workspace, tier=DataTier.TRAIN)


def test_the_reference_passes(tmp_path: Path, sandbox: Sandbox, secret: bytes) -> None:
    outcome = _run(tmp_path, sandbox, secret, None)
    assert [s.valid for s in outcome.samples["speedup"]] == [True, True, True]
    assert all(s.score > 0 for s in outcome.samples["speedup"])


@pytest.mark.parametrize(
    ("source", "note"), [(WRONG, "wrong output at n=512"), (BROKEN, "candidate: worker exited")]
)
def test_a_wrong_or_broken_kernel_is_invalid(
    tmp_path: Path, sandbox: Sandbox, secret: bytes, source: str, note: str
) -> None:
    scored = _run(tmp_path, sandbox, secret, source).samples["speedup"]
    assert [(s.valid, s.score) for s in scored] == [(False, 0.0)] * 3
    assert scored[0].note.startswith(note)


def test_a_numpy_kernel_is_faster(tmp_path: Path, sandbox: Sandbox, secret: bytes) -> None:
    outcome = _run(tmp_path, sandbox, secret, FAST)
    assert all(s.valid for s in outcome.samples["speedup"])
    assert outcome.scores["speedup"] > 1.0


def test_patching_the_clock_gains_nothing(tmp_path: Path, sandbox: Sandbox, secret: bytes) -> None:
    """The candidate's process is not the one holding the clock."""
    outcome = _run(tmp_path, sandbox, secret, CLOCK_PATCH)
    assert all(s.valid for s in outcome.samples["speedup"])
    assert outcome.scores["speedup"] < 3.0
