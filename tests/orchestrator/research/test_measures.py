"""Lock-in and review measures, over campaigns built through the tools."""

from __future__ import annotations

from typing import Any

from rsilab.orchestrator import lock_in_measures
from rsilab.orchestrator.research.measures import DEFAULT_RULE_NOTE, stated_default
from rsilab.records import Candidate, CandidateState, Role, utc_now
from tests.expos.helpers import Bench


def _review(bench: Bench, exps: list[str], advice: str, **extra: Any) -> str:
    args = {"experiment_ids": exps, "recommendation": advice, **extra}
    return str(bench.ok(Role.REVIEWER, "submit_review", args)["id"])


def _child(bench: Bench, parent: str, relation: str, title: str = "child") -> str:
    return bench.direction(title, parents=[{"parent_id": parent, "relation": relation}])


def _accept(bench: Bench) -> str:
    finished = utc_now()
    bench.put(
        Candidate(
            campaign_id=bench.campaign.id,
            task="digits",
            parent_version_id="ver-000000000000",
            harness_sha256="0" * 64,
            state=CandidateState.ACCEPTED,
            finished_at=finished,
        )
    )
    return finished


def test_an_empty_campaign(any_bench: Bench) -> None:
    m = lock_in_measures(any_bench.store, any_bench.campaign.id)
    assert (m.directions, m.experiments, m.reviews) == (0, 0, 0)
    assert m.top_direction_id is None and m.top_direction_share is None
    assert m.review_influence is None and m.last_improvement_at is None


def test_breadth_edges_and_experiments_since_improvement(any_bench: Bench) -> None:
    bench = any_bench
    a = bench.direction("a")
    b = _child(bench, a, "branch", "b")
    _child(bench, a, "revise", "c")
    _child(bench, b, "branch", "d")
    _child(bench, a, "verify", "e")
    for _ in range(3):
        bench.experiment(a)
    bench.experiment(b)
    _accept(bench)
    _accept(bench)  # the newest acceptance counts
    last = _accept(bench)
    bench.experiment(a)
    bench.experiment(b)
    # A rejected candidate is no improvement.
    bench.put(
        Candidate(
            campaign_id=bench.campaign.id,
            task="digits",
            parent_version_id="ver-000000000000",
            harness_sha256="0" * 64,
            state=CandidateState.REJECTED,
            finished_at=utc_now(),
        )
    )
    m = lock_in_measures(bench.store, bench.campaign.id)
    assert (m.directions, m.directions_explored, m.experiments) == (5, 2, 6)
    assert m.top_direction_id == a and m.top_direction_share == 4 / 6
    assert (m.branches, m.revisions, m.verifications) == (2, 1, 1)
    assert m.last_improvement_at == last and m.experiments_since_improvement == 2


def test_without_an_improvement_every_experiment_counts(any_bench: Bench) -> None:
    bench = any_bench
    d = bench.direction()
    bench.experiment(d)
    bench.experiment(d)
    m = lock_in_measures(bench.store, bench.campaign.id)
    assert m.experiments_since_improvement == 2 and m.top_direction_share == 1.0


def test_review_influence(any_bench: Bench) -> None:
    bench = any_bench
    a = bench.direction("a")
    ea = bench.experiment(a)
    # verify -> a verify child: followed.
    _review(bench, [ea], "verify")
    _child(bench, a, "verify")
    # branch -> a revise child: not followed.
    _review(bench, [ea], "branch")
    _child(bench, a, "revise")
    # continue -> a worker's new experiment in the same direction: followed.
    _review(bench, [ea], "continue")
    bench.experiment(a)
    # stop -> direction exhausted: followed (another direction's experiment is ignored).
    b = bench.direction("b")
    eb = bench.experiment(b)
    _review(bench, [eb], "stop")
    bench.experiment(a)
    bench.ok(Role.MAIN, "update_direction", {"direction_id": b, "status": "exhausted"})
    # stop -> direction set promising: not followed.
    c = bench.direction("c")
    ec = bench.experiment(c)
    _review(bench, [ec], "stop")
    bench.ok(Role.MAIN, "update_direction", {"direction_id": c, "status": "promising"})
    # revise, over two directions at once: left out; then one with no action yet.
    _review(bench, [ea, ec], "revise")
    _review(bench, [ec], "revise", direction_id=c)
    m = lock_in_measures(bench.store, bench.campaign.id)
    assert m.reviews == 7
    assert (m.reviews_acted_on, m.reviews_followed) == (5, 3)
    assert m.review_influence == 3 / 5


def test_a_review_changes_the_action_when_its_advice_is_not_mains_own_rule(
    any_bench: Bench,
) -> None:
    bench = any_bench
    a = bench.direction("a")
    ea = bench.experiment(a)
    said = "Dev quality: better. " + DEFAULT_RULE_NOTE.format("{}")
    # followed, and Main alone would have continued: the review changed the next action
    _review(bench, [ea], "verify", rationale=said.format("continue"))
    _child(bench, a, "verify")
    # followed, and Main alone would have branched too: no change
    _review(bench, [ea], "branch", rationale=said.format("branch"))
    _child(bench, a, "branch")
    # not followed: counts in neither
    _review(bench, [ea], "revise", rationale=said.format("continue"))
    _child(bench, a, "branch", "other")
    # followed, but states no rule (an LLM reviewer's): counts in neither
    _review(bench, [ea], "branch", rationale="a plateau")
    _child(bench, a, "branch", "third")
    m = lock_in_measures(bench.store, bench.campaign.id)
    assert (m.reviews_acted_on, m.reviews_followed) == (4, 3)
    assert (m.reviews_stating_default, m.reviews_changing_action) == (2, 1)
    assert stated_default("x. " + DEFAULT_RULE_NOTE.format("stop")) == "stop"
    assert stated_default(DEFAULT_RULE_NOTE.format("stop") + " and more") is None


def test_a_later_update_reads_its_own_status(any_bench: Bench) -> None:
    """The second update of a direction is matched to the second history entry."""
    bench = any_bench
    d = bench.direction()
    e = bench.experiment(d)
    bench.ok(Role.MAIN, "update_direction", {"direction_id": d, "status": "promising"})
    _review(bench, [e], "stop")
    bench.ok(Role.MAIN, "update_direction", {"direction_id": d, "status": "refuted"})
    m = lock_in_measures(bench.store, bench.campaign.id)
    assert (m.reviews_acted_on, m.reviews_followed) == (1, 1)


def test_only_the_main_agents_successful_actions_count(any_bench: Bench) -> None:
    bench = any_bench
    d = bench.direction()
    e = bench.experiment(d)
    _review(bench, [e], "stop")
    supported = {"direction_id": d, "status": "supported"}
    bench.fail(Role.MAIN, "update_direction", supported, code="conflict")
    refuted = {"direction_id": d, "status": "refuted"}
    bench.fail(Role.WORKER, "update_direction", refuted, code="permission_denied")
    assert lock_in_measures(bench.store, bench.campaign.id).reviews_acted_on == 0
    _child(bench, d, "branch")
    m = lock_in_measures(bench.store, bench.campaign.id)
    assert (m.reviews_acted_on, m.reviews_followed) == (1, 0)
