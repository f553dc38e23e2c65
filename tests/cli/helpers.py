"""Running the CLI in-process from tests."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner, Result

from rsilab.cli import app
from rsilab.records import Campaign
from rsilab.store import Lab


def rsilab(*args: str | Path) -> Result:
    """Run ``rsilab ARGS`` in-process and return the captured result."""
    return CliRunner().invoke(app, [str(a) for a in args])


def explain(result: Result) -> str:
    """What a failed assertion should show: exit code and both streams."""
    return f"exit {result.exit_code}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"


def run_refused(task: Path, lab: Path) -> tuple[Result, list[str]]:
    """``rsilab run TASK`` on a new lab at ``lab``, which must be refused (exit 2) before
    anything is written: the store's head unchanged, no campaign. The result and its
    ``error:`` lines."""
    assert rsilab("init", "--lab", lab).exit_code == 0
    with Lab.open(lab) as opened:
        head = opened.store.head()
    ran = rsilab("run", task, "--budget", "experiments=1", "--lab", lab)
    assert ran.exit_code == 2, explain(ran)
    with Lab.open(lab) as opened:
        assert opened.store.head() == head
        assert opened.store.query_as(Campaign) == []
    return ran, [line for line in ran.stderr.splitlines() if line.startswith("error:")]
