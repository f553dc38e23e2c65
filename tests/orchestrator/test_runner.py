"""The campaign runner with the built-in policy, end to end on the synthetic task."""

from __future__ import annotations

import pytest

from rsilab.orchestrator.dag import ResearchDag
from rsilab.orchestrator.runner import Progress, run_campaign
from rsilab.records import Campaign, Experiment, Review
from rsilab.store import Lab, verify_store
from rsilab.tasks import Budget, get_task


@pytest.fixture(autouse=True)
def _process_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")


def test_a_campaign_spends_its_budget_through_the_tools(lab: Lab) -> None:
    result = run_campaign(lab, get_task("synthetic"), budget=Budget(experiments=12))
    assert result.state == "finished" and result.experiments == 12
    assert len(lab.store.query_as(Experiment, campaign_id=result.campaign_id)) == 12
    assert lab.store.query_as(Review, campaign_id=result.campaign_id)
    dag = ResearchDag.load(lab.store, result.campaign_id)
    assert len(dag.directions) >= 3 and dag.edges
    assert result.measures is not None and result.measures.experiments == 12
    assert verify_store(lab.store, None).problems == []
    again = run_campaign(
        lab, get_task("synthetic"), budget=Budget(experiments=12), campaign_id=result.campaign_id
    )
    assert again.experiments == 12 and "nothing to do" in again.message


def test_an_interrupted_campaign_resumes_without_repeating(lab: Lab) -> None:
    def interrupt(progress: Progress) -> None:
        if progress.kind == "experiment" and progress.experiments == 3:
            raise KeyboardInterrupt

    task = get_task("synthetic")
    first = run_campaign(lab, task, budget=Budget(experiments=8), on_progress=interrupt)
    assert first.state == "stopped" and first.experiments == 3
    assert lab.store.get_as(first.campaign_id, Campaign).state == "stopped"
    resumed = run_campaign(lab, task, budget=Budget(experiments=8), campaign_id=first.campaign_id)
    assert resumed.state == "finished" and resumed.experiments == 8
    exps = lab.store.query_as(Experiment, campaign_id=first.campaign_id)
    assert len(exps) == 8
    assert verify_store(lab.store, None).problems == []
