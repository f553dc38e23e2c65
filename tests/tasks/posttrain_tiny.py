"""posttrain on its tiny base, for tests: the same task (benchmarks, scorers, runtime, build
step) with a harness copy that carries the tiny base model (``build_base(..., "tiny")``: d 32,
one layer, built in seconds) and names it in ``config.json`` (``base_model``, the harness's own
knob for a model file), so a campaign, the conformance suite and the trap tests run in
seconds where the full base would take minutes per job. The runtime's full base model is
still checked against its stamp by a campaign's preflight; jobs of this variant read the tiny
one instead."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from rsilab.tasks import Task, get_task
from rsilab.tasks.builtin.posttrain._base import build_base

NAME = "posttrain_tiny"
TINY_FILE = "base.safetensors"
TASK_FILE = f'''\
from pathlib import Path

import rsilab
from rsilab.tasks import get_task


@rsilab.task
def posttrain_tiny():
    harness = Path(__file__).parent / "harness"
    return get_task("posttrain").model_copy(update={{"name": "{NAME}", "harness": harness}})
'''


def tiny_harness(folder: Path, tiny: Path) -> Path:
    """A copy of posttrain's harness at ``folder`` that reads the tiny base model ``tiny``."""
    shutil.copytree(get_task("posttrain").harness, folder)
    shutil.copy(tiny, folder / TINY_FILE)
    config = json.loads((folder / "config.json").read_text())
    config.update(base_model=TINY_FILE)
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return folder


def build_tiny(out: Path) -> Path:
    """The tiny base model, built into the file ``out``."""
    build_base(out, "tiny", log=lambda _: None)
    return out


def tiny_task(root: Path, tiny: Path) -> tuple[Task, str]:
    """posttrain on the tiny base under ``root``: the task, and the reference that loads it
    again (``root/task.py:posttrain_tiny``, for campaigns, which record where a task came
    from)."""
    tiny_harness(root / "harness", tiny)
    (root / "task.py").write_text(TASK_FILE)
    task = get_task("posttrain").model_copy(update={"name": NAME, "harness": root / "harness"})
    return task, f"{root / 'task.py'}:posttrain_tiny"
