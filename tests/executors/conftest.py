"""Fixtures: an executor over each sandbox kind (bwrap skipped where unusable)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rsilab.executors import LocalExecutor
from rsilab.store.artifacts import ArtifactStore
from tests.sandbox.helpers import make_sandbox


@pytest.fixture
def artifacts(tmp_path: Path) -> ArtifactStore:
    store = ArtifactStore(tmp_path / "artifacts")
    store.ensure()
    return store


@pytest.fixture(params=["process", "bwrap"])
def executor(request: pytest.FixtureRequest, artifacts: ArtifactStore) -> Iterator[LocalExecutor]:
    sandbox = make_sandbox(str(request.param))
    with LocalExecutor(sandbox, artifacts, slots=2) as made:
        assert isinstance(made, LocalExecutor)
        yield made
    sandbox.close()
