"""The built-in policy on harnesses of other shapes than train + predict + ``config.json``.

A harness without a train step is searched through its predict (its experiments are dev
evaluations with no model); the config file is the one ``harness.toml`` names; a harness with
no config file and a task with no search space (the built-in ``kernel``) leave the policy nothing
to search, so it runs the current version once and finishes with reason ``agents_done``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rsilab.errors import UserError
from rsilab.orchestrator.builtin import runner
from rsilab.orchestrator.builtin.runner import RunnerError, run_campaign
from rsilab.orchestrator.builtin.team import run_team_campaign
from rsilab.records import Campaign, Experiment, Job, JobKind, SystemVersion
from rsilab.store import Lab
from rsilab.tasks import Budget, Task, get_task
from tests.orchestrator.builtin.tiny_tasks import START_W, regression_task, squared_error_of


@pytest.fixture(autouse=True)
def _process_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")


def _worker_files(lab: Lab, campaign_id: str, name: str) -> list[Path]:
    """``name`` in each workspace the campaign's agents used."""
    folder = lab.path / "workspaces" / campaign_id
    return [w / name for w in sorted(folder.iterdir()) if (w / name).exists()]


def test_a_predict_only_harness_is_searched_without_train_jobs(lab: Lab, tmp_path: Path) -> None:
    task = regression_task(tmp_path / "task", trains=False)
    result = run_campaign(lab, task, budget=Budget(experiments=6))
    assert result.state == "finished" and result.experiments == 6
    exps = lab.store.query_as(Experiment, campaign_id=result.campaign_id)
    assert len(exps) >= 2 and len({json.dumps(e.config) for e in exps}) >= 2
    ids = {e.id for e in exps}
    jobs = [j for j in lab.store.query_as(Job) if j.experiment_id in ids]
    assert jobs and {j.kind for j in jobs} == {JobKind.DEV_EVAL}
    assert all(j.status == "succeeded" for j in jobs)
    trains = {JobKind.TRAIN, JobKind.FOLD_TRAIN, JobKind.CONTROLLER_TRAIN}
    assert not [j for j in lab.store.query_as(Job) if j.kind in trains]
    # predict read the config the worker wrote: the errors differ as the formula says
    best = min(squared_error_of(float(e.config["w"])) for e in exps)
    assert best < squared_error_of(START_W)


@pytest.mark.parametrize("config", ["params.yaml", "settings.json"])
def test_the_worker_writes_the_config_file_the_harness_names(
    lab: Lab, tmp_path: Path, config: str
) -> None:
    task = regression_task(tmp_path / "task", config=config)
    result = run_campaign(lab, task, budget=Budget(experiments=4))
    assert result.state == "finished" and result.experiments == 4
    assert not _worker_files(lab, result.campaign_id, "config.json")
    written = _worker_files(lab, result.campaign_id, config)
    assert written
    exps = lab.store.query_as(Experiment, campaign_id=result.campaign_id)
    tried = {float(e.config["w"]) for e in exps}
    assert len(tried) >= 2  # the knob the worker wrote moved the runs
    assert {float(json.loads(f.read_text())["w"]) for f in written} <= tried


@pytest.mark.parametrize("team", [0, 2])
def test_a_config_file_that_is_no_json_object_is_refused_before_anything_is_written(
    lab: Lab, tmp_path: Path, team: int
) -> None:
    # Refused only once the baseline was recorded from it, the campaign could never go on:
    # its resume starts from that baseline, which holds the same file.
    task = regression_task(tmp_path / "task", config="params.yaml")
    (task.harness / "params.yaml").write_text("w: 0.2\n")  # YAML the policy cannot edit
    with pytest.raises(UserError, match=r"params\.yaml holds no JSON object") as caught:
        if team:
            run_team_campaign(lab, task, team=team, budget=Budget(experiments=4))
        else:
            run_campaign(lab, task, budget=Budget(experiments=4))
    assert str(task.harness / "params.yaml") in caught.value.hint
    assert not lab.store.query_as(Campaign) and not lab.store.query_as(SystemVersion)


def test_a_config_file_met_mid_run_that_is_no_json_object_stops_with_one_clear_line(
    lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a head another improver wrote (an LLM's YAML) is met only when a worker reads it
    monkeypatch.setattr(runner, "check_config_file", lambda task: None)
    task = regression_task(tmp_path / "task", config="params.yaml")
    (task.harness / "params.yaml").write_text("w: 0.2\n")
    with pytest.raises(RunnerError, match=r"params\.yaml holds no JSON object"):
        run_campaign(lab, task, budget=Budget(experiments=4))
    [campaign] = lab.store.query_as(Campaign)
    assert campaign.state == "stopped" and campaign.end_reason == "error"


def _plain_kernel() -> Task:
    """The kernel task without its code variants: no knobs, no config file, nothing to search."""
    return get_task("kernel").model_copy(update={"code_variants": []})


def test_the_kernel_task_runs_once_and_finishes_with_nothing_to_search(lab: Lab) -> None:
    result = run_campaign(lab, _plain_kernel(), budget=Budget(experiments=5))
    campaign = lab.store.get_as(result.campaign_id, Campaign)
    assert result.state == "finished" and campaign.end_reason == "agents_done"
    assert "nothing to search" in (campaign.end_detail or "")
    assert result.experiments == 1  # the current version, run as it is
    assert not _worker_files(lab, result.campaign_id, "config.json")


def test_a_team_on_the_kernel_task_finishes_with_nothing_to_search(lab: Lab) -> None:
    result = run_team_campaign(lab, _plain_kernel(), team=2, budget=Budget(experiments=5))
    campaign = lab.store.get_as(result.campaign_id, Campaign)
    assert result.state == "finished" and campaign.end_reason == "agents_done"
    assert 1 <= result.experiments <= 2  # the reference runs, nothing more


def test_a_budget_too_small_to_propose_is_said_at_the_start(lab: Lab, tmp_path: Path) -> None:
    said: list[str] = []
    task = regression_task(tmp_path / "task")
    result = run_campaign(
        lab, task, budget=Budget(experiments=3), on_progress=lambda p: said.append(p.message)
    )
    assert result.state == "finished" and not result.accepted
    assert "a budget of 3 experiments keeps none to re-run" in said[0]
    said.clear()
    run_campaign(
        lab, task, budget=Budget(experiments=6), on_progress=lambda p: said.append(p.message)
    )
    assert not [m for m in said if "keeps none to re-run" in m]
