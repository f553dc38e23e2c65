"""Code variants in the built-in policy: searched like a choice knob, applied to the workspace."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from rsilab.orchestrator.builtin._state import CampaignView
from rsilab.orchestrator.builtin.runner import run_campaign
from rsilab.records import Candidate, DataTier, Evaluation, Experiment
from rsilab.store import Lab
from rsilab.tasks import Budget, get_task
from tests.orchestrator.builtin.tiny_tasks import (
    START_W,
    VARIANT_SCALES,
    regression_task,
    squared_error_of,
)


@pytest.fixture(autouse=True)
def _process_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")


def _dev_error(lab: Lab, experiment_id: str) -> float | None:
    found = [
        e
        for e in lab.store.query_as(Evaluation, fields={"subject_id": experiment_id})
        if e.tier == DataTier.DEV and e.benchmark == "err" and e.samples
    ]
    if not found:
        return None
    latest = max(found, key=lambda e: e.created_at)
    return sum(s.score for s in latest.samples) / len(latest.samples)


def test_the_policy_runs_the_task_s_code_variants_and_keeps_them_out_of_the_config(
    lab: Lab, tmp_path: Path
) -> None:
    task = regression_task(tmp_path / "task", variants=True)
    result = run_campaign(lab, task, budget=Budget(experiments=10))
    assert result.state == "finished" and result.experiments == 10
    runs = CampaignView.load(lab.store, result.campaign_id).runs
    tried = {str(r.config["code_variant"]) for r in runs}
    assert "head" in tried and tried - {"head"}, tried  # the head's code, and a variant
    scale = {"head": 1.0, **VARIANT_SCALES}
    checked = 0
    for run in runs:
        exp = lab.store.get_as(run.experiment_id, Experiment)
        assert "code_variant" not in exp.config  # the record holds the config file's content
        error = _dev_error(lab, exp.id)
        if error is None:
            continue
        # predict ran the variant's code: its error is that of w times the variant's scale
        w = float(run.config["w"]) * scale[str(run.config["code_variant"])]
        assert error == pytest.approx(squared_error_of(w), abs=1e-9), run.config
        checked += 1
    assert checked >= 8
    folder = lab.path / "workspaces" / result.campaign_id
    written = [json.loads(f.read_text()) for f in folder.glob("*/config.json")]
    assert written and all(set(c) == {"w"} for c in written)  # the choice is no config key


def test_the_reference_run_is_the_head_s_code() -> None:
    # the head's predict carries the unchanged line every variant replaces
    task = regression_task(Path(__import__("tempfile").mkdtemp()) / "task", variants=True)
    text = (task.harness / "predict.py").read_text()
    assert text.count("SCALE = 1.0\n") == 1
    assert squared_error_of(START_W) > 0.0


def test_the_kernel_task_is_searched_through_its_variants(lab: Lab) -> None:
    result = run_campaign(lab, get_task("kernel"), budget=Budget(experiments=6))
    assert result.state == "finished" and result.experiments == 6
    tried = {
        str(r.config["code_variant"]) for r in CampaignView.load(lab.store, result.campaign_id).runs
    }
    assert len(tried) >= 3, tried
    folder = lab.path / "workspaces" / result.campaign_id
    assert not list(folder.glob("*/config.json"))  # kernel's harness has no config file


def test_a_space_exhausted_early_races_its_best_with_the_budget_left(
    lab: Lab, tmp_path: Path
) -> None:
    # three choices in all (the head's code and two variants), ten experiments: once each is
    # tried the race begins, and the best variant (exact: no error) is proposed. The task's
    # scores do not depend on the seed, so a config whose two runs agree is never run again:
    # the race ends there and leaves the rest of the budget unspent
    task = regression_task(tmp_path / "task", variants=True, knobs=False)
    result = run_campaign(lab, task, budget=Budget(experiments=10))
    assert result.state == "finished" and 3 < result.experiments < 10
    runs = CampaignView.load(lab.store, result.campaign_id).runs
    assert {str(r.config["code_variant"]) for r in runs} == {"head", "exact", "negated"}
    per_config = Counter(str(r.config["code_variant"]) for r in runs)
    assert max(per_config.values()) == 2 and per_config["exact"] == 2
    candidates = lab.store.query_as(Candidate, campaign_id=result.campaign_id)
    assert len(candidates) == 1
    proposed = next(r for r in runs if r.experiment_id == candidates[0].experiment_id)
    assert proposed.config["code_variant"] == "exact"
