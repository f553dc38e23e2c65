"""The built-in policy on a lower-is-better target: it searches down, not up.

The task is a one-knob regressor scored by squared error (:mod:`tests.orchestrator.builtin.
tiny_tasks`): its error at a knob value is computed here from the data's formula, so each fact
below is checked against a second computation, not against the policy's own numbers.
"""

from __future__ import annotations

import re
from itertools import pairwise
from pathlib import Path
from statistics import fmean

import pytest

from rsilab.orchestrator.builtin.runner import Progress, run_campaign
from rsilab.orchestrator.builtin.team import run_team_campaign
from rsilab.orchestrator.campaign import CampaignResult
from rsilab.records import Candidate, DataTier, Direction, Evaluation, Experiment, Review, Verdict
from rsilab.store import Lab
from rsilab.tasks import Budget, Task
from tests.orchestrator.builtin.tiny_tasks import START_W, regression_task, squared_error_of


@pytest.fixture(autouse=True)
def _process_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")


def _dev_error(lab: Lab, experiment_id: str) -> float | None:
    """The experiment's mean dev squared error, from its evaluation record."""
    for e in lab.store.query_as(Evaluation, fields={"subject_id": experiment_id}):
        if e.tier is DataTier.DEV and e.benchmark == "err" and e.samples:
            return sum(s.score for s in e.samples) / len(e.samples)
    return None


def _groups(review: Review, errors: dict[str, float | None]) -> tuple[list[float], list[float]]:
    """The dev errors of the runs a review judged and of the reference runs it read (listed
    after them, from the one its rationale names)."""
    named = re.search(r"for the reference (\S+);", review.rationale)
    assert named is not None, review.rationale
    cut = review.experiment_ids.index(named.group(1))
    ids = review.experiment_ids
    treated = [e for i in ids[:cut] if (e := errors[i]) is not None]
    reference = [e for i in ids[cut:] if (e := errors[i]) is not None]
    assert treated and reference
    return treated, reference


def _check_direction(lab: Lab, result: CampaignResult, seen: list[Progress]) -> None:
    """The facts a lower-is-better campaign must show (see the module docstring)."""
    assert result.state == "finished"
    exps = lab.store.query_as(Experiment, campaign_id=result.campaign_id)
    errors = {e.id: _dev_error(lab, e.id) for e in exps}
    for e in exps:  # the harness does what the formula says
        if errors[e.id] is not None:
            assert errors[e.id] == pytest.approx(squared_error_of(float(e.config["w"])))
    start = squared_error_of(START_W)
    # the best the policy reports only ever moves down, and ends below the start
    bests = [p.best for p in seen if p.kind == "experiment" and p.best is not None]
    assert bests and all(b <= a for a, b in pairwise(bests))
    assert bests[0] == pytest.approx(start) and bests[-1] < start
    measured = [v for v in errors.values() if v is not None]
    assert bests[-1] == pytest.approx(min(measured))
    # a review supports only a lower error than the reference's, refutes only a higher one
    reviews = lab.store.query_as(Review, campaign_id=result.campaign_id)
    assert any(r.verdict is Verdict.SUPPORTS for r in reviews)
    for r in reviews:
        treated, reference = _groups(r, errors)
        if r.verdict is Verdict.SUPPORTS:
            assert fmean(treated) < fmean(reference)
        elif r.verdict is Verdict.REFUTES:
            assert fmean(treated) > fmean(reference)
    # every proposal carries a config with a lower error than the start
    candidates = lab.store.query_as(Candidate, campaign_id=result.campaign_id)
    assert candidates
    for c in candidates:
        assert c.experiment_id is not None
        proposed = lab.store.get_as(c.experiment_id, Experiment)
        assert squared_error_of(float(proposed.config["w"])) < start


def test_a_single_campaign_searches_down_on_a_lower_is_better_target(
    lab: Lab, tmp_path: Path
) -> None:
    task = regression_task(tmp_path / "task")
    seen: list[Progress] = []
    result = run_campaign(lab, task, budget=Budget(experiments=10), on_progress=seen.append)
    _check_direction(lab, result, seen)
    assert any(c.state == "accepted" for c in lab.store.query_as(Candidate))
    # the hypotheses say which way a gain goes
    hypotheses = [
        d.hypothesis for d in lab.store.query_as(Direction, campaign_id=result.campaign_id)
    ]
    assert any("lowers the dev" in h for h in hypotheses), hypotheses
    assert not any("raises the dev" in h for h in hypotheses), hypotheses


def test_a_mixed_direction_task_lowers_the_target_and_keeps_the_other(
    lab: Lab, tmp_path: Path
) -> None:
    task: Task = regression_task(tmp_path / "task", mixed=True)
    assert [b.higher_is_better for b in task.benchmarks] == [False, True]
    seen: list[Progress] = []
    result = run_campaign(lab, task, budget=Budget(experiments=10), on_progress=seen.append)
    _check_direction(lab, result, seen)
    # the non-target scores 1.0 whatever w is: the policy must not read it as a shortfall
    assert not any("beyond its tolerance" in p.message for p in seen)


def test_a_team_campaign_searches_down_on_a_lower_is_better_target(
    lab: Lab, tmp_path: Path
) -> None:
    task = regression_task(tmp_path / "task")
    seen: list[Progress] = []
    result = run_team_campaign(
        lab, task, team=2, budget=Budget(experiments=12), on_progress=seen.append
    )
    _check_direction(lab, result, seen)
