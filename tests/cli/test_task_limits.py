"""``[limits]`` of a user's own task.toml: ``task check`` shows them, and an experiment's job
that passes one is killed naming it, which the report groups as its failure reason; the
controller's baseline runs under its own, larger limits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.helpers import explain, rsilab
from tests.cli.user_tasks import edit, harness_task


def _chatty(folder: Path, mib: int) -> None:
    """predict writes ``mib`` MiB to stderr when ``lowercase`` is on."""
    edit(
        folder / "harness" / "predict.py",
        "for line in sys.stdin:",
        f'if config.get("lowercase"):\n    sys.stderr.write("x" * {mib} * 1024 * 1024)\n'
        "for line in sys.stdin:",
    )


def test_task_check_shows_the_limits_its_jobs_get(tmp_path: Path) -> None:
    task = harness_task(tmp_path)
    (task / "task.toml").write_text((task / "task.toml").read_text() + "\n[limits]\nwall = 90\n")
    checked = rsilab("task", "check", "--no-probe", task)
    assert checked.exit_code == 0, explain(checked)
    assert "limits of an experiment's jobs: wall 90 s, cpu 1,200 CPU s, memory 2,048 MiB" in (
        checked.stderr
    )
    assert "limits of the controller's jobs: wall 900 s, cpu 3,600 CPU s" in checked.stderr


def test_an_experiment_past_the_tasks_output_limit_fails_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")
    task = harness_task(tmp_path)
    _chatty(task, 2)
    (task / "task.toml").write_text((task / "task.toml").read_text() + "\n[limits]\noutput = 1\n")
    lab = tmp_path / "lab"
    assert rsilab("init", "--lab", lab).exit_code == 0
    ran = rsilab("run", task, "--budget", "experiments=6", "--seed", "3", "--lab", lab)
    assert ran.exit_code in (0, 1), explain(ran)
    data = json.loads(rsilab("report", "latest", "--json", "--lab", lab).stdout)
    reasons = [g["reason"] for g in data["failures"]]
    assert reasons == [
        "dev-eval job killed: it printed more than 1 MiB on stdout or stderr: print less, or "
        "write the log to a file"
    ], reasons
    assert data["baseline"] is not None


def test_without_the_limit_the_same_output_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")
    task = harness_task(tmp_path)
    _chatty(task, 2)
    lab = tmp_path / "lab"
    assert rsilab("init", "--lab", lab).exit_code == 0
    ran = rsilab("run", task, "--budget", "experiments=6", "--seed", "3", "--lab", lab)
    assert ran.exit_code == 0, explain(ran)
    data = json.loads(rsilab("report", "latest", "--json", "--lab", lab).stdout)
    assert data["failures"] == []
