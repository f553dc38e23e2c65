"""``rsilab campaign new TASK``: a name, a task.toml (or its folder) or file.py[:NAME]; the
campaign records where its task came from and that its improvers run on the host."""

from __future__ import annotations

from pathlib import Path

import pytest

from rsilab.records import Campaign
from rsilab.store import Lab
from tests.cli.helpers import explain, rsilab
from tests.tasks.task_files import write_python_task, write_toml_task


def _recorded(lab: Path, campaign_id: str) -> Campaign:
    with Lab.open(lab) as opened:
        return opened.store.get_as(campaign_id, Campaign)


def test_a_relative_task_toml_is_recorded_by_its_absolute_path(
    lab: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_toml_task(tmp_path / "thr", "clithr")
    monkeypatch.chdir(tmp_path)
    for given in ("thr/task.toml", "thr"):
        result = rsilab("campaign", "new", given, "--lab", lab)
        assert result.exit_code == 0, explain(result)
        campaign = _recorded(lab, result.stdout.strip())
        assert campaign.task.name == "clithr"
        assert campaign.task.source == str(tmp_path.resolve() / "thr" / "task.toml")
        assert campaign.task.digest is not None
        assert campaign.settings == {"improvers": "host"}


def test_a_python_file_is_recorded_with_its_task_name(lab: Path, tmp_path: Path) -> None:
    path = write_python_task(tmp_path / "py", "clipy")
    result = rsilab("campaign", "new", f"{path}:clipy", "--lab", lab)
    assert result.exit_code == 0, explain(result)
    campaign = _recorded(lab, result.stdout.strip())
    assert campaign.task.source == f"{path.resolve()}:clipy"


def test_a_builtin_is_recorded_as_builtin(lab: Path) -> None:
    result = rsilab("campaign", "new", "synthetic", "--lab", lab)
    assert result.exit_code == 0, explain(result)
    task = _recorded(lab, result.stdout.strip()).task
    assert (task.name, task.source) == ("synthetic", "builtin")


def test_an_unknown_task_exits_2_with_one_line(lab: Path) -> None:
    result = rsilab("campaign", "new", "no-such-task", "--lab", lab)
    assert result.exit_code == 2, explain(result)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        "error: 'no-such-task' is neither a task name, a task.toml, nor a .py file with a @task"
    ]
    assert "digits" in result.stderr  # the hint lists the known names
    with Lab.open(lab) as opened:
        assert opened.store.query_as(Campaign) == []
