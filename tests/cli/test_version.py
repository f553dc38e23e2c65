"""``rsilab --version`` prints ``rsilab VERSION``, the version pyproject.toml declares."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from tests.cli.helpers import explain, rsilab

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _declared() -> str:
    """The version the project declares (what its installed metadata is built from)."""
    with PYPROJECT.open("rb") as f:
        version = tomllib.load(f)["project"]["version"]
    assert isinstance(version, str)
    return version


def test_version_prints_the_declared_version_and_exits_0() -> None:
    result = rsilab("--version")
    assert result.exit_code == 0, explain(result)
    assert result.stdout == f"rsilab {_declared()}\n"
    assert result.stderr == ""


def test_version_wins_over_a_command_after_it() -> None:
    """It is read first (as --help is): nothing else runs, no lab is needed."""
    result = rsilab("--version", "log", "--lab", "/nonexistent/lab")
    assert result.exit_code == 0, explain(result)
    assert result.stdout == f"rsilab {_declared()}\n"


def test_version_from_the_console_entry_point() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rsilab", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"rsilab {_declared()}\n"


def test_help_lists_version() -> None:
    result = rsilab("--help")
    assert result.exit_code == 0, explain(result)
    assert "--version" in result.stdout
