"""The built-in policy with a part removed: without Reviewers, without Workers."""

from __future__ import annotations

import pytest

from rsilab.errors import UserError
from rsilab.orchestrator.builtin._state import knobs_of
from rsilab.orchestrator.builtin.ablation import Ablation, ablations_from, ablations_setting
from rsilab.orchestrator.builtin.runner import Progress, run_campaign
from rsilab.orchestrator.research.dag import ResearchDag
from rsilab.orchestrator.research.measures import stated_default
from rsilab.records import Campaign, EdgeRelation, Review
from rsilab.store import Lab, verify_store
from rsilab.tasks import Budget, get_task
from tests.orchestrator.runner_checks import check_campaign


@pytest.fixture(autouse=True)
def _process_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")


def test_ablations_are_named_in_the_settings() -> None:
    assert ablations_from(None) == frozenset() and ablations_from("") == frozenset()
    both = ablations_from(" workers,reviewers ")
    assert both == {Ablation.REVIEWERS, Ablation.WORKERS}
    assert ablations_setting(both) == "reviewers,workers"
    with pytest.raises(UserError, match="unknown ablation experiment-os: use any of reviewers"):
        ablations_from("reviewers,experiment-os")


def test_without_reviewers_main_verifies_and_proposes_on_its_own_rule(lab: Lab) -> None:
    task = get_task("synthetic")
    result = run_campaign(lab, task, budget=Budget(experiments=14), ablate={Ablation.REVIEWERS})
    assert result.state == "finished" and result.experiments == 14
    campaign = lab.store.get_as(result.campaign_id, Campaign)
    assert campaign.settings["ablate"] == "reviewers"
    assert lab.store.query_as(Review, campaign_id=result.campaign_id) == []
    dag = ResearchDag.load(lab.store, result.campaign_id)
    # the synthetic task's first knobs (lr, width) gain far more than the noise floor
    assert dag.relation_counts()[EdgeRelation.VERIFY] >= 1
    assert result.measures is not None and result.measures.reviews == 0
    check_campaign(lab.store, result.campaign_id, 14)
    assert verify_store(lab.store, None).problems == []


def test_without_workers_main_runs_one_line_of_work_one_experiment_at_a_time(lab: Lab) -> None:
    task = get_task("synthetic")
    seen: list[Progress] = []
    result = run_campaign(
        lab,
        task,
        budget=Budget(experiments=10),
        workers=3,
        ablate={Ablation.WORKERS},
        on_progress=seen.append,
    )
    assert result.state == "finished" and result.experiments == 10
    settings = lab.store.get_as(result.campaign_id, Campaign).settings
    assert settings["ablate"] == "workers" and settings["workers"] == 1
    assert max(p.running for p in seen) <= 1  # never two at once
    dag = ResearchDag.load(lab.store, result.campaign_id)
    every = {k.name for k in task.search_space}
    # the race re-runs and tempering bisects toward the reference: neither opens a knob group
    searched = [
        d
        for d in dag.directions.values()
        if d.title != "race the best configs" and not d.title.startswith("temper ")
    ]
    assert all(set(knobs_of(d)) == every for d in searched)
    check_campaign(lab.store, result.campaign_id, 10)


def test_every_builtin_review_states_mains_own_rule(lab: Lab) -> None:
    result = run_campaign(lab, get_task("synthetic"), budget=Budget(experiments=12))
    reviews = lab.store.query_as(Review, campaign_id=result.campaign_id)
    assert reviews
    rules = {stated_default(r.rationale) for r in reviews}
    assert None not in rules and rules <= {"continue", "verify", "revise", "branch", "stop"}
    m = result.measures
    assert m is not None and m.reviews_stating_default == m.reviews_followed
    assert 0 <= m.reviews_changing_action <= m.reviews_stating_default
