"""Benches for the Experiment OS tests: real stores, a campaign on 'digits', a workspace."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rsilab.expos import ExperimentOS, default_registry, open_campaign
from rsilab.records import TaskRef
from rsilab.store import ArtifactStore, Lab, MemoryStore
from tests.expos.helpers import Bench


def _workspace(tmp_path: Path) -> Path:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    return workspace


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    """A fresh SQLite lab under the test's temporary folder."""
    opened = Lab.init(tmp_path / "lab")
    yield opened
    opened.close()


@pytest.fixture
def bench(lab: Lab, tmp_path: Path) -> Bench:
    """An ExperimentOS over a SQLite lab, with one campaign and a workspace."""
    campaign = open_campaign(lab.store, TaskRef(name="digits"))
    expos = ExperimentOS(lab.store, lab.artifacts, default_registry())
    return Bench(expos, lab.store, lab.artifacts, campaign, _workspace(tmp_path))


@pytest.fixture(params=["sqlite", "memory"])
def any_bench(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Bench]:
    """The same bench over each store backend."""
    if request.param == "sqlite":
        lab = Lab.init(tmp_path / "lab")
        store, artifacts = lab.store, lab.artifacts
    else:
        store, artifacts = MemoryStore(key=bytes(range(32))), ArtifactStore(tmp_path / "blobs")
        artifacts.ensure()
    campaign = open_campaign(store, TaskRef(name="digits"))
    expos = ExperimentOS(store, artifacts, default_registry())
    yield Bench(expos, store, artifacts, campaign, _workspace(tmp_path))
    store.close()
