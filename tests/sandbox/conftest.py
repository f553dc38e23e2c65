"""Fixtures: one sandbox of each kind per session, and a fresh workspace of it per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rsilab.sandbox import Sandbox
from tests.sandbox.helpers import QUICK, SANDBOX_KINDS, make_sandbox

_made: dict[str, Sandbox] = {}


@pytest.fixture(params=SANDBOX_KINDS)
def sandbox(request: pytest.FixtureRequest) -> Sandbox:
    """Each sandbox kind in turn, made once per session (preparing bwrap runs a probe job)."""
    kind = str(request.param)
    if kind not in _made:
        _made[kind] = make_sandbox(kind)
    return _made[kind]


@pytest.fixture(scope="session", autouse=True)
def _close_sandboxes() -> Iterator[None]:
    yield
    for made in _made.values():
        made.close()


@pytest.fixture
def workspace(sandbox: Sandbox) -> Iterator[Path]:
    """A scratch workspace of the test's sandbox: the sandbox user's, and as root under
    bwrap its own filesystem of QUICK.disk_mb MiB."""
    with sandbox.scratch(QUICK.disk_mb, kind="test") as folder:
        yield folder
