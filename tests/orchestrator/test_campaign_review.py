"""The campaign review: its revisions, and the next team campaign starting from them."""

from __future__ import annotations

from typing import Any

import pytest

from rsilab.agents.builtin.team import effect_tag
from rsilab.memory import latest_orientation, revise_orientation
from rsilab.orchestrator._team_leader import TeamSettings, initial_plan
from rsilab.orchestrator.campaign_review import (
    MIN_ADOPTIONS,
    _knowledge_revisions,
    campaign_review_of,
)
from rsilab.orchestrator.team import run_team_campaign
from rsilab.records import (
    Assignment,
    EventDraft,
    Finding,
    FindingOutcome,
    FindingStatus,
    Role,
)
from rsilab.store import Lab
from rsilab.tasks import Budget, get_task


@pytest.fixture(autouse=True)
def _process_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")


def test_weights_reorder_the_start_plan_and_equal_weights_keep_the_rules() -> None:
    rules = initial_plan(4, 5, 0.01, True, TeamSettings())
    assert rules == ["explorer", "exploiter", "analyst", "verifier"]
    assert initial_plan(4, 5, 0.01, True, TeamSettings(), dict.fromkeys(rules, 2.0)) == rules
    weighted = {"explorer": 0.5, "exploiter": 3.0, "analyst": 1.0, "verifier": 1.0}
    assert initial_plan(2, 5, 0.01, True, TeamSettings(), weighted) == ["exploiter", "analyst"]
    # extra researchers take the heavier of explorer and exploiter
    assert initial_plan(6, 5, 0.01, True, TeamSettings(), weighted)[4:] == ["exploiter"] * 2


def _finding(lab: Lab, verb: str, campaign: str | None) -> Finding:
    finding = Finding(
        claim=f"{verb} width helps",
        status=FindingStatus.SUPPORTED,
        task="synthetic",
        tags=["width", effect_tag("width", verb)],  # type: ignore[arg-type]
        origin_campaign_id=campaign,
    )
    lab.store.commit(EventDraft(actor="test", role="human", action="setup"), [finding])
    return finding


def _outcome(f: Finding, followed: int, paid: int) -> FindingOutcome:
    exps = [f"exp-{i}" for i in range(followed)]
    return FindingOutcome(
        finding_id=f.id, status=str(f.status), adopting_experiments=exps, paid=paid
    )


def test_knowledge_is_opened_again_when_following_it_never_paid_or_the_campaign_found_otherwise(
    lab: Lab,
) -> None:
    task = get_task("synthetic")
    unpaid = _finding(lab, "raise", "cmp-earlier")
    paid = _finding(lab, "raise", "cmp-earlier")
    conflicting = _finding(lab, "lower", "cmp-earlier")
    ours = _finding(lab, "raise", "cmp-now")  # this campaign's analyst: raise width
    outcomes = [_outcome(unpaid, MIN_ADOPTIONS, 0), _outcome(paid, MIN_ADOPTIONS, 1)]
    proposals = _knowledge_revisions(lab.store, task, "cmp-now", [ours], outcomes)
    by_id = {p.from_id: p for p in proposals}
    assert set(by_id) == {unpaid.id, conflicting.id}  # the paid one and ours stand
    assert by_id[unpaid.id].change == "supported -> unresolved"
    assert by_id[unpaid.id].evidence == outcomes[0].adopting_experiments
    assert "conflicting" in by_id[conflicting.id].change
    assert by_id[conflicting.id].evidence == [conflicting.id, ours.id]
    assert all(p.accepted and p.kind == "knowledge" for p in proposals)
    # too few experiments followed it: no judgement on it
    fewer = _knowledge_revisions(
        lab.store, task, "cmp-now", [ours], [_outcome(unpaid, MIN_ADOPTIONS - 1, 0)]
    )
    assert [p.from_id for p in fewer] == [conflicting.id]


def test_the_next_team_starts_from_the_revised_orientations(lab: Lab) -> None:
    """A review that raised the exploiter's weight and lowered the explorer's (made here by
    hand, as the review makes it) changes how the next team is oriented at the start."""
    store = lab.store
    who: dict[str, Any] = {"actor": "campaign-review", "role": Role.CONTROLLER}
    task = get_task("synthetic")
    first = run_team_campaign(lab, task, team=2, budget=Budget(experiments=6))
    assert campaign_review_of(store, first.campaign_id) is not None
    weights = {"exploiter": 3.7, "analyst": 2.1, "verifier": 1.3, "explorer": 0.3}
    for name, weight in weights.items():
        latest = latest_orientation(store, f"orientation:{name}")
        assert latest is not None
        if latest.weight != weight:
            revise_orientation(store, latest.name, latest.text, weight=weight, **who)
    second = run_team_campaign(lab, task, team=2, budget=Budget(experiments=4))
    start = sorted(
        (a for a in store.query_as(Assignment, campaign_id=second.campaign_id) if not a.supersedes),
        key=lambda a: a.researcher,
    )
    assert [a.orientation for a in start] == ["exploiter", "analyst"]
    assert "orientation weights from campaign reviews" in start[0].reason
    assert {a.orientation_id for a in start} == {
        latest_orientation(store, f"orientation:{a.orientation}").id  # type: ignore[union-attr]
        for a in start
    }
