"""Fixtures for the CLI tests: a fresh lab, and a campaign in it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.helpers import explain, rsilab


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
