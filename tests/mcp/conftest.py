"""A real lab with one campaign, and the asyncio backend for anyio's pytest plugin."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rsilab.expos import ExperimentOS, default_registry, open_campaign
from rsilab.records import Campaign, TaskRef
from rsilab.store import Lab


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    with Lab.init(tmp_path / "lab") as opened:
        yield opened


@pytest.fixture
def campaign(lab: Lab) -> Campaign:
    return open_campaign(lab.store, TaskRef(name="digits"))


@pytest.fixture
def expos(lab: Lab) -> ExperimentOS:
    return ExperimentOS(lab.store, lab.artifacts, default_registry())


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "workspace"
    folder.mkdir()
    return folder
