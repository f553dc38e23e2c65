"""Fixtures for the CLI tests: a runner over the Typer app and a fresh lab."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from rsilab.cli import app


def rsilab(*args: str | Path) -> Result:
    """Run ``rsilab ARGS`` in-process and return the captured result."""
    return CliRunner().invoke(app, [str(a) for a in args])


def explain(result: Result) -> str:
    """What a failed assertion should show: exit code and both streams."""
    return f"exit {result.exit_code}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"


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
