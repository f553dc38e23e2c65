"""The campaign runner with the built-in policy, end to end on the synthetic task."""

from __future__ import annotations

import pytest

from rsilab.expos.services import LabServices
from rsilab.orchestrator.builtin.ablation import Ablation
from rsilab.orchestrator.builtin.runner import Progress, StopRequest, run_campaign
from rsilab.orchestrator.research.dag import ResearchDag
from rsilab.records import Campaign, DataTier, Evaluation, Experiment, Review
from rsilab.store import Lab, verify_store
from rsilab.tasks import Budget, Setting, Task, get_task
from rsilab.tasks._secret import SECRET_FILE
from tests.orchestrator.runner_checks import check_campaign


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


def test_parallel_workers_share_the_budget_without_overshooting_it(lab: Lab) -> None:
    seen: list[Progress] = []
    result = run_campaign(
        lab, get_task("synthetic"), budget=Budget(experiments=9), workers=3, on_progress=seen.append
    )
    assert result.state == "finished" and result.experiments == 9
    check_campaign(lab.store, result.campaign_id, 9)
    assert max(p.running for p in seen) >= 2  # experiments did run side by side
    assert all(p.experiments + p.running <= 9 for p in seen)
    assert {e.created_by for e in lab.store.query_as(Experiment)} >= {"worker-1", "worker-2"}
    done = [p.experiments for p in seen if p.kind == "experiment"]
    assert done == list(range(1, 10))


@pytest.mark.parametrize("secret", ["5e", "a7"])
def test_reviews_decide_the_main_agents_next_move(lab: Lab, secret: str) -> None:
    # without tempering: its bisection steps are Main's own (no review steers them) and take
    # budget from the search directions whose reviews this measures. The lab's secret is
    # fixed: it draws synthetic's data and so every score and review, and a random one made
    # this one campaign's measure differ from lab to lab (0.4 in one clean-clone run)
    (lab.path / SECRET_FILE).write_text(secret * 32)
    result = run_campaign(
        lab, get_task("synthetic"), budget=Budget(experiments=14), ablate={Ablation.TEMPERING}
    )
    m = result.measures
    assert m is not None and m.reviews_acted_on >= 3
    # a held or made proposal is not a DAG move, so the final prediction is often not "followed"
    assert m.review_influence is not None and m.review_influence >= 0.5
    assert m.verifications >= 1  # the race verifies the best direction's gain


def test_a_stopped_campaign_resumes_with_a_larger_budget(lab: Lab) -> None:
    stop = StopRequest()

    def ctrl_c(progress: Progress) -> None:
        if progress.kind == "experiment" and progress.experiments == 2:
            stop.request()  # the running experiments finish, no new one starts

    task = get_task("synthetic")
    first = run_campaign(
        lab, task, budget=Budget(experiments=6), workers=2, on_progress=ctrl_c, stop=stop
    )
    assert first.state == "stopped" and 2 <= first.experiments < 6
    assert all(e.is_finished() for e in lab.store.query_as(Experiment))
    resumed = run_campaign(lab, task, budget=Budget(experiments=7), campaign_id=first.campaign_id)
    assert resumed.state == "finished"
    check_campaign(lab.store, first.campaign_id, 7)
    campaign = lab.store.get_as(first.campaign_id, Campaign)
    assert Budget.model_validate(campaign.settings["budget"]).experiments == 7  # recorded


class _OpenGeneral(LabServices):
    """Services that see the synthetic task in the open-general setting (no dev scores)."""

    def task_of(self, campaign: Campaign) -> Task:
        return open_general_synthetic()


def open_general_synthetic() -> Task:
    return get_task("synthetic").model_copy(update={"setting": Setting.OPEN_GENERAL})


def test_without_dev_scores_the_policy_validates_on_folds_of_the_train_tier(lab: Lab) -> None:
    services = _OpenGeneral(lab, judge_in_background=False)
    try:
        result = run_campaign(
            lab, open_general_synthetic(), budget=Budget(experiments=10), services=services
        )
    finally:
        services.close()
    assert result.state == "finished" and result.experiments == 10, result.message
    exps = lab.store.query_as(Experiment, campaign_id=result.campaign_id)
    assert all(e.state == "succeeded" for e in exps)
    tiers = {
        ev.tier for e in exps for ev in lab.store.query_as(Evaluation, fields={"subject_id": e.id})
    }
    assert tiers == {DataTier.TRAIN}
    reviews = lab.store.query_as(Review, campaign_id=result.campaign_id)
    assert reviews and all("Out-of-fold train" in r.rationale for r in reviews)
    assert verify_store(lab.store, None).problems == []


def test_guidance_opens_a_direction_on_the_knobs_it_names(lab: Lab) -> None:
    from rsilab.orchestrator.research.guidance import give_guidance
    from rsilab.records import Guidance

    def interrupt(progress: Progress) -> None:
        if progress.kind == "experiment" and progress.experiments == 2:
            raise KeyboardInterrupt

    task = get_task("synthetic")
    first = run_campaign(lab, task, budget=Budget(experiments=8), on_progress=interrupt)
    assert first.state == "stopped"
    named = give_guidance(lab.store, first.campaign_id, "Try a lower LR with more epochs.", "ann")
    vague = give_guidance(lab.store, first.campaign_id, "Think harder.", "ann")
    said: list[Progress] = []
    resumed = run_campaign(
        lab,
        task,
        budget=Budget(experiments=8),
        campaign_id=first.campaign_id,
        on_progress=said.append,
    )
    assert resumed.state == "finished"
    for g in (named, vague):
        assert lab.store.get_as(g.id, Guidance).read_by == "main"
    dag = ResearchDag.load(lab.store, first.campaign_id)
    (guided,) = [d for d in dag.directions.values() if d.title.startswith("guidance:")]
    assert guided.title == "guidance: tune lr, epochs"
    assert "Try a lower LR" in guided.hypothesis and dag.experiments[guided.id]
    assert any(vague.id in p.message and "names no knob" in p.message for p in said)


def test_the_best_unproposed_run_is_proposed_once_when_the_budget_is_spent(lab: Lab) -> None:
    from rsilab.orchestrator.builtin.reviewer._conclude import FINAL_PROPOSAL
    from rsilab.records import Candidate, Intent, intent_id

    result = run_campaign(lab, get_task("synthetic"), budget=Budget(experiments=5))
    final = lab.store.get_as(intent_id(result.campaign_id, FINAL_PROPOSAL), Intent)
    assert final.state == "done" and final.result is not None
    candidates = lab.store.query_as(Candidate, campaign_id=result.campaign_id)
    if "experiment_id" in final.result:  # a run beat the reference: it was judged
        assert final.result["experiment_id"] in {c.experiment_id for c in candidates}
    else:  # nothing beat the reference, or the Reviewer held the winner below the floor (0.1)
        assert not candidates
        held = "held" in final.result and final.result["probability"] < 0.1
        assert final.result == {"accepted": False} or held, final.result
