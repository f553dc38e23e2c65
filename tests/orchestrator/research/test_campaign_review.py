"""The campaign review: its revisions, and the next team campaign starting from them."""

from __future__ import annotations

from typing import Any

import pytest

from rsilab.errors import UserError
from rsilab.memory import (
    VERIFY_SKILL,
    ensure_builtin_skills,
    fresh_seeds,
    latest_orientation,
    revise_orientation,
    revise_skill,
    seeds_revision,
    verify_code,
)
from rsilab.memory.builtin_skills import MAX_FRESH_SEEDS, MIN_FRESH_SEEDS
from rsilab.memory.effect_tags import effect_tag
from rsilab.orchestrator.builtin._state import CONCLUDE_PREFIX
from rsilab.orchestrator.builtin.team import run_team_campaign
from rsilab.orchestrator.builtin.team._leader import TeamSettings, initial_plan
from rsilab.orchestrator.research.campaign_review import (
    MIN_ADOPTIONS,
    _knowledge_revisions,
    campaign_review_of,
)
from rsilab.orchestrator.research.dag import ResearchDag
from rsilab.records import (
    Assignment,
    EventDraft,
    Finding,
    FindingOutcome,
    FindingStatus,
    Intent,
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
    no_door: Any = None  # proposals only: nothing is made, so nothing is published
    pending = _knowledge_revisions(lab.store, task, "cmp-now", [ours], outcomes, no_door)
    proposals = [p.proposal for p in pending]
    by_id = {p.from_id: p for p in proposals}
    assert set(by_id) == {unpaid.id, conflicting.id}  # the paid one and ours stand
    assert by_id[unpaid.id].change == "supported -> unresolved"
    assert by_id[unpaid.id].evidence == outcomes[0].adopting_experiments
    assert "conflicting" in by_id[conflicting.id].change
    assert by_id[conflicting.id].evidence == [conflicting.id, ours.id]
    assert all(p.accepted and p.kind == "knowledge" for p in proposals)
    # too few experiments followed it: no judgement on it
    fewer = _knowledge_revisions(
        lab.store, task, "cmp-now", [ours], [_outcome(unpaid, MIN_ADOPTIONS - 1, 0)], no_door
    )
    assert [p.proposal.from_id for p in fewer] == [conflicting.id]


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


def test_verification_seeds_follow_the_controllers_verdicts_within_their_bounds() -> None:
    more = seeds_revision(2, accepted=1, rejected=1)
    assert more is not None and more[0] == 3 and "rejected 1 of 2" in more[1]
    assert seeds_revision(2, accepted=2, rejected=1) is None  # more true gains than false
    assert seeds_revision(MAX_FRESH_SEEDS, accepted=0, rejected=3) is None  # at the bound
    fewer = seeds_revision(3, accepted=3, rejected=0)
    assert fewer is not None and fewer[0] == 2
    assert seeds_revision(MIN_FRESH_SEEDS, accepted=5, rejected=0) is None
    assert seeds_revision(3, accepted=2, rejected=0) is None  # too little evidence


def test_the_verify_skill_is_seeded_once_and_bad_code_is_named(lab: Lab) -> None:
    first = ensure_builtin_skills(lab.store)
    assert (first.name, first.version, fresh_seeds(first)) == (VERIFY_SKILL, 1, 2)
    assert ensure_builtin_skills(lab.store).id == first.id
    who: dict[str, Any] = {"actor": "campaign-review", "role": Role.CONTROLLER}
    for bad, why in (("{}", "fresh_seeds"), ('{"fresh_seeds": 9}', "outside"), ("x", "code")):
        broken = revise_skill(lab.store, VERIFY_SKILL, first.text, bad, **who)
        with pytest.raises(UserError, match=rf"{VERIFY_SKILL} v\d .*{why}"):
            fresh_seeds(broken)


def test_a_campaign_verifies_on_the_seeds_the_skill_says(lab: Lab) -> None:
    """The team verifies a gain on fresh seeds, as many as the skill says. (A single built-in
    campaign no longer verifies mid-run: it races its best configs at the end instead.)"""
    skill = ensure_builtin_skills(lab.store)
    who: dict[str, Any] = {"actor": "campaign-review", "role": Role.CONTROLLER}
    revise_skill(lab.store, VERIFY_SKILL, skill.text, verify_code(3), **who)
    result = run_team_campaign(lab, get_task("synthetic"), team=1, budget=Budget(experiments=14))
    concluded = [
        i.key.removeprefix(CONCLUDE_PREFIX)
        for i in lab.store.query_as(Intent, campaign_id=result.campaign_id)
        if i.key.startswith(CONCLUDE_PREFIX) and i.state == "done"
    ]
    assert concluded, "no verification concluded: raise the budget"
    dag = ResearchDag.load(lab.store, result.campaign_id)
    for verify_id in concluded:
        assert len(dag.experiments.get(verify_id, [])) == 3
