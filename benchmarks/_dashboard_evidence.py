"""The evidence about a direction in the dashboard's synthetic lab: reviews, status, findings.

:class:`_Node` is a direction with the config its experiments start from and what it has
done. :func:`submit_review` writes the Reviewer's ``submit_review`` of a direction's newest
experiments against its reference (its first parent's experiments, or a root's own
reference runs), with the comparison computed from the records as the tool computes it;
:func:`conclude` writes Main's ``update_direction`` calls on the last review's verdict and,
once the direction is settled, the finding published from it.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field
from typing import Any

from benchmarks._dashboard_writer import _Writer
from rsilab.expos.tools.review import compute_comparison
from rsilab.orchestrator.research.measures import DEFAULT_RULE_NOTE
from rsilab.records import (
    Direction,
    DirectionChange,
    DirectionState,
    EdgeRelation,
    Experiment,
    Finding,
    FindingClaim,
    FindingStatus,
    Recommendation,
    Review,
    Role,
    Verdict,
)

REVIEW_GROUP = 25
"""A review compares at most this many experiments on each side (the tool takes 50 in all)."""


@dataclass
class _Node:
    """A direction, the config its experiments start from, and what it has done."""

    direction: Direction
    number: int
    knobs: tuple[str, ...]
    base: dict[str, Any]
    relation: EdgeRelation | None = None
    exps: list[Experiment] = field(default_factory=list)
    reviews: list[Review] = field(default_factory=list)
    reviewed: int = 0


def _reference(node: _Node, nodes: list[_Node], scored: Container[str]) -> list[Experiment]:
    """What a review compares a direction with: its first parent's experiments, or a
    root's own reference runs."""
    pool = [e for e in node.exps if "reference:" in e.description]
    if node.direction.parents:
        first = node.direction.parents[0].parent_id
        pool = next(n for n in nodes if n.direction.id == first).exps
    return [e for e in pool if e.id in scored][:REVIEW_GROUP]


def submit_review(w: _Writer, node: _Node, nodes: list[_Node], scored: Container[str]) -> None:
    """``submit_review`` by the Reviewer: the experiments since the last review against
    the reference, with the comparison computed from the records. ``nodes`` are the
    directions so far; ``scored`` holds the ids of experiments with dev evaluations."""
    reference = _reference(node, nodes, scored)
    skip = {e.id for e in reference}
    group = [e for e in node.exps[node.reviewed :] if e.id in scored and e.id not in skip]
    node.reviewed = len(node.exps)
    group = group[-REVIEW_GROUP:]
    if len(group) < 2 or len(reference) < 2:
        return
    comparison = compute_comparison("quality", group, reference)
    if comparison.effect.low > 0:
        verdict = Verdict.SUPPORTS
        verified = node.relation is EdgeRelation.VERIFY
        advice = Recommendation.CONTINUE if verified else Recommendation.VERIFY
    elif comparison.effect.high < 0:
        verdict, advice = Verdict.REFUTES, Recommendation.STOP
    else:
        verdict, advice = Verdict.INCONCLUSIVE, Recommendation.BRANCH
    review = Review(
        campaign_id=w.campaign_id,
        direction_id=node.direction.id,
        experiment_ids=[e.id for e in group + reference],
        comparisons=[comparison],
        verdict=verdict,
        recommendation=advice,
        rationale="Dev quality of the newest experiments against the reference, computed "
        "from the records. " + DEFAULT_RULE_NOTE.format("continue"),
        reviewer="reviewer",
    )
    args = {
        "experiment_ids": [e.id for e in group],
        "metric": "quality",
        "baseline_ids": sorted(skip),
        "direction_id": node.direction.id,
    }
    w.tool_call("reviewer", Role.REVIEWER, "submit_review", args, [review])
    node.reviews.append(review)


def conclude(w: _Writer, node: _Node, *, open_ended: bool) -> None:
    """Main's ``update_direction`` calls on the last review's verdict (the newest
    directions go no further than promising), and a finding once it is settled."""
    last = node.reviews[-1] if node.reviews else None
    cited = [last.id] if last is not None else []
    steps = [(DirectionState.EXHAUSTED, cited, "no effect either way")]
    if last is not None and last.verdict is Verdict.SUPPORTS:
        steps = [
            (DirectionState.PROMISING, [], "a review supports it"),
            (DirectionState.SUPPORTED, cited, "the reviewed runs hold the gain"),
        ]
    elif last is not None and last.verdict is Verdict.REFUTES:
        steps = [(DirectionState.REFUTED, cited, "the review refutes it")]
    if open_ended:
        steps = steps[:1] if steps[0][0] is DirectionState.PROMISING else []
    for status, review_ids, conclusion in steps:
        d = node.direction
        change = DirectionChange(
            status=status,
            previous=d.state,
            by="main",
            review_ids=review_ids,
            conclusion=conclusion,
        )
        node.direction = d.model_copy(
            update={"state": status, "conclusion": conclusion, "history": [*d.history, change]}
        )
        args = {"direction_id": d.id, "status": str(status), "review_ids": review_ids}
        w.tool_call("main", Role.MAIN, "update_direction", args, [node.direction])
    if last is not None and node.direction.state in (
        DirectionState.SUPPORTED,
        DirectionState.REFUTED,
    ):
        _publish(w, node, last)


def _publish(w: _Writer, node: _Node, review: Review) -> None:
    """``publish_finding`` of the review's claim: lab-wide, for later campaigns."""
    comparison, supported = review.comparisons[0], review.verdict is Verdict.SUPPORTS
    author = node.exps[0].created_by
    claim = FindingClaim(
        metric="quality", a_ids=comparison.a_ids, b_ids=comparison.b_ids, direction="higher"
    )
    finding = Finding(
        claim=f"{node.direction.title}: raises dev quality over its reference",
        status=FindingStatus.SUPPORTED if supported else FindingStatus.REFUTED,
        conditions=f"synthetic, from the start config of direction #{node.number}",
        uncertainty="a Welch interval of the dev means, recomputed from the records",
        sources=[review.id],
        author=author,
        task=w.task.name,
        origin_campaign_id=w.campaign_id,
        structured=claim,
        effect=comparison.effect,
        check="the recomputed interval excludes zero on the "
        + ("claimed side" if supported else "other side"),
        tags=list(node.knobs),
    )
    args = {"claim": finding.claim, "status": str(finding.status), "sources": [review.id]}
    w.tool_call(author, Role.WORKER, "publish_finding", args, [finding])
