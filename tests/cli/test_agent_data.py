"""``rsilab agent`` refuses a workspace or ``--bind-ro`` folder that would show the agent the
campaign task's data files (every tier, the private ones too), before the folder is lent to
the sandbox user and before anything runs or is recorded."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rsilab.store import Lab
from tests.cli.helpers import explain, rsilab


@pytest.fixture
def task_folder(tmp_path: Path) -> Path:
    made = rsilab("task", "init", tmp_path / "mytask")
    assert made.exit_code == 0, explain(made)
    folder = tmp_path / "mytask"
    assert any((folder / "data").iterdir())  # the task's samples live there
    return folder


@pytest.fixture
def on_task(lab: Path, task_folder: Path) -> str:
    made = rsilab("campaign", "new", task_folder / "task.toml", "--lab", lab)
    assert made.exit_code == 0, explain(made)
    return made.stdout.strip()


def _agent(lab: Path, campaign: str, *options: str | Path) -> tuple[int, str]:
    args: list[str | Path] = ["agent", "--lab", lab, "--campaign", campaign, *options]
    result = rsilab(*args, "--", "python", "-c", "print('ran')")
    assert "ran" not in result.stdout
    return result.exit_code, result.stderr


@pytest.mark.parametrize(
    ("where", "relation"), [(".", "holds"), ("data", "is"), ("data/inner", "lies in")]
)
def test_a_workspace_showing_the_tasks_data_is_refused(
    lab: Path, task_folder: Path, on_task: str, where: str, relation: str
) -> None:
    folder = (task_folder / where).resolve()
    folder.mkdir(exist_ok=True)
    owner = os.stat(folder).st_uid
    with Lab.open(lab) as opened:
        head = opened.store.head()
    code, stderr = _agent(lab, on_task, "--workspace", folder)
    assert code == 2, stderr
    error, hint = stderr.strip().splitlines()
    data = (task_folder / "data").resolve()
    assert error == (
        f"error: workspace {folder} {relation} {data}, which holds the task's data files, "
        "private tiers included: the agent would see them"
    )
    assert hint.startswith("hint: leave --workspace out")
    assert os.stat(folder).st_uid == owner  # never lent to the sandbox user
    with Lab.open(lab) as opened:
        assert opened.store.head() == head  # nothing ran, nothing recorded


def test_a_bind_showing_the_tasks_data_is_refused(
    lab: Path, task_folder: Path, on_task: str
) -> None:
    code, stderr = _agent(lab, on_task, "--bind-ro", task_folder)
    assert code == 2, stderr
    error, hint = stderr.strip().splitlines()
    assert error.startswith(f"error: --bind-ro {task_folder}: {task_folder.resolve()} holds ")
    assert "which holds the task's data files" in error
    assert hint.startswith("hint: install the agent outside the task's folders")


def test_a_builtin_tasks_declared_source_folder_is_refused(lab: Path, campaign_id: str) -> None:
    import sklearn.datasets

    source = (Path(sklearn.datasets.__file__).parent / "data").resolve()
    code, stderr = _agent(lab, campaign_id, "--bind-ro", source)
    assert code == 2, stderr
    assert f"{source} is {source}, which holds the task's data files" in stderr
