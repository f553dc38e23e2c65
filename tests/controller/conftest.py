"""A lab with a Host Controller on the built-in ``synthetic`` task (milliseconds per job)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rsilab.controller.host import HostController
from rsilab.executors.local import LocalExecutor
from rsilab.sandbox.select import default_sandbox
from rsilab.store import Lab
from rsilab.tasks import Task, get_task


@pytest.fixture
def synthetic() -> Task:
    return get_task("synthetic")


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    opened = Lab.init(tmp_path / "lab")
    yield opened
    opened.close()


@pytest.fixture
def executor(lab: Lab) -> Iterator[LocalExecutor]:
    pool = LocalExecutor(default_sandbox(), lab.artifacts, slots=2)
    yield pool
    pool.shutdown()


@pytest.fixture
def controller(lab: Lab, synthetic: Task, executor: LocalExecutor) -> HostController:
    return HostController(lab, synthetic, executor)


@pytest.fixture
def make_harness(tmp_path: Path, synthetic: Task) -> Callable[..., Path]:
    """A copy of synthetic's harness with config overrides and files replaced."""
    counter = iter(range(1000))

    def make(config: dict[str, object] | None = None, **files: str) -> Path:
        folder = tmp_path / f"harness-{next(counter)}"
        shutil.copytree(synthetic.harness, folder)
        if config:
            current = json.loads((folder / "config.json").read_text())
            current.update(config)
            (folder / "config.json").write_text(json.dumps(current))
        for name, text in files.items():
            path = folder / name.replace("__", "/")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        return folder

    return make
