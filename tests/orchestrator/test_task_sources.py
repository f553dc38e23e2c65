"""A campaign on a task.toml or a Python file's @task runs, stops and resumes from another
working directory, and its ledger verifies; an edited task.toml stops a resume, writing nothing.

Each run stops after its first experiment (a stop request from the progress callback), so the
resume has work left and runs its tools against the task loaded from the recorded source.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import rsilab
from rsilab.orchestrator.campaign import Progress
from rsilab.records import Campaign
from rsilab.store import Lab
from tests.cli.helpers import explain
from tests.cli.helpers import rsilab as cli
from tests.tasks.task_files import write_python_task, write_toml_task


@pytest.fixture(autouse=True)
def plain_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Jobs as plain processes: what is tested is where the task is loaded from, and this
    halves the time."""
    monkeypatch.setenv("RSILAB_SANDBOX", "process")


def _run_until_first_experiment(task: str, lab: Path) -> rsilab.CampaignResult:
    stop = rsilab.StopRequest()

    def progress(step: Progress) -> None:
        if step.kind == "experiment" and not stop.requested:
            stop.request()

    result = rsilab.run(task, budget={"experiments": 2}, lab=lab, on_progress=progress, stop=stop)
    assert (result.state, result.experiments) == ("stopped", 1), result.message
    return result


def _resume_elsewhere_and_verify(
    campaign_id: str, lab: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    monkeypatch.chdir(elsewhere)
    resumed = rsilab.resume(campaign_id, lab=lab)
    assert (resumed.state, resumed.experiments) == ("finished", 2), resumed.message
    verified = cli("verify", "--lab", lab)
    assert verified.exit_code == 0, explain(verified)


def test_a_toml_task_resumes_elsewhere_and_refuses_an_edit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_toml_task(tmp_path / "thr", "e2ethr")
    lab = tmp_path / "lab"
    monkeypatch.chdir(path.parent)
    first = _run_until_first_experiment("task.toml", lab)
    with Lab.open(lab) as opened:
        recorded = opened.store.get_as(first.campaign_id, Campaign).task
        head = opened.store.head()
    assert recorded.source == str(tmp_path.resolve() / "thr" / "task.toml")

    original = path.read_text()
    path.write_text(original.replace("default = 0.3", "default = 0.5"))
    with pytest.raises(rsilab.UserError) as refused:
        rsilab.resume(first.campaign_id, lab=lab)
    assert "\n" not in refused.value.message
    assert refused.value.message.startswith(
        f"task.toml changed since campaign {first.campaign_id} started (digest "
        f"{(recorded.digest or '')[:8]}… → "
    )
    with Lab.open(lab) as opened:
        assert opened.store.head() == head  # nothing written

    path.write_text(original)
    _resume_elsewhere_and_verify(first.campaign_id, lab, tmp_path, monkeypatch)


def test_a_python_file_task_resumes_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_python_task(tmp_path / "py", "e2epy")
    lab = tmp_path / "lab"
    monkeypatch.chdir(path.parent)
    first = _run_until_first_experiment(f"{path.name}:e2epy", lab)
    with Lab.open(lab) as opened:
        recorded = opened.store.get_as(first.campaign_id, Campaign).task
    assert recorded.source == f"{tmp_path.resolve() / 'py' / 'e2epy_task.py'}:e2epy"
    _resume_elsewhere_and_verify(first.campaign_id, lab, tmp_path, monkeypatch)
