"""Running the CLI in-process from tests."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner, Result

from rsilab.cli import app


def rsilab(*args: str | Path) -> Result:
    """Run ``rsilab ARGS`` in-process and return the captured result."""
    return CliRunner().invoke(app, [str(a) for a in args])


def explain(result: Result) -> str:
    """What a failed assertion should show: exit code and both streams."""
    return f"exit {result.exit_code}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
