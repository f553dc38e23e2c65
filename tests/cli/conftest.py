"""Fixtures for the CLI tests: a fresh lab, a campaign in it, and the need for bubblewrap."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.helpers import explain, rsilab
from tests.sandbox.helpers import bwrap_problem


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    """A freshly initialised lab folder."""
    path = tmp_path / "lab"
    result = rsilab("init", "--lab", path)
    assert result.exit_code == 0, explain(result)
    return path


@pytest.fixture
def campaign_id(lab: Path) -> str:
    """The id of a campaign started in ``lab``."""
    result = rsilab("campaign", "new", "digits", "--lab", lab)
    assert result.exit_code == 0, explain(result)
    return result.stdout.strip()


@pytest.fixture
def needs_bwrap() -> None:
    """Skip a test that runs an agent in the sandbox where bubblewrap is unusable (there
    tests/sandbox/test_canary.py fails the suite with the reason)."""
    problem = bwrap_problem()
    if problem is not None:
        pytest.skip(f"bubblewrap is unusable here ({problem})")
