"""Review management tools: reviewers compare evidence and advise the Main agent."""

from __future__ import annotations

import math
import statistics
from typing import Any

from pydantic import Field

from rsilab.errors import ToolError
from rsilab.expos.context import ToolEnv
from rsilab.expos.registry import Category
from rsilab.expos.tools._base import Name, RecordId, Text, brief, tool
from rsilab.expos.tools._numbers import COMPARED_SOURCES, stage_reporting_flag, unreconciled
from rsilab.records import (
    Comparison,
    Direction,
    Experiment,
    Recommendation,
    Review,
    Verdict,
)
from rsilab.stats import welch_interval


def _values(exps: list[Experiment], metric: str) -> list[float]:
    """The dev value of ``metric`` in each experiment that has one (the controller's where it
    logged one, else the worker's own: :data:`COMPARED_SOURCES`)."""
    used = (e.last_metric(metric, sources=COMPARED_SOURCES) for e in exps)
    return [m.value for m in used if m is not None]


def compute_comparison(
    metric: str, group_a: list[Experiment], group_b: list[Experiment]
) -> Comparison:
    """The effect of group a over group b on ``metric``, computed from the records alone."""
    a, b = _values(group_a, metric), _values(group_b, metric)
    if len(a) < 2 or len(b) < 2:
        raise ToolError(
            "invalid_arguments",
            f"metric {metric!r}: need at least 2 experiments with a dev value in each group "
            f"(found {len(a)} and {len(b)}) to compute an interval",
            field="metric",
        )
    try:
        a_mean, b_mean, effect = statistics.fmean(a), statistics.fmean(b), welch_interval(a, b)
        finite = all(math.isfinite(x) for x in (a_mean, b_mean, effect.low, effect.high))
    except OverflowError:
        finite = False
    if not finite:  # a non-finite number would be stored as null and break the review record
        raise ToolError(
            "invalid_arguments",
            f"metric {metric!r}: the recorded values are too large to compare",
            field="metric",
        )
    return Comparison(
        metric=metric,
        a_ids=[e.id for e in group_a],
        b_ids=[e.id for e in group_b],
        a_mean=a_mean,
        b_mean=b_mean,
        effect=effect,
        n_a=len(a),
        n_b=len(b),
    )


@tool(Category.REVIEW)
def submit_review(
    env: ToolEnv,
    experiment_ids: list[RecordId] = Field(min_length=1, max_length=50),  # noqa: B008
    verdict: Verdict = Verdict.INCONCLUSIVE,
    recommendation: Recommendation = Recommendation.CONTINUE,
    rationale: Text = "",
    direction_id: RecordId | None = None,
    metric: Name | None = None,
    baseline_ids: list[RecordId] = Field(default_factory=list, max_length=50),  # noqa: B008
) -> dict[str, Any]:
    """File a review of experiments. With ``metric`` and ``baseline_ids`` the effect is computed.

    The comparison (difference of means with a Welch interval) is computed from the recorded
    metrics, never taken from the reviewer, so a review cannot claim an effect the records do
    not show.

    Args:
        experiment_ids: experiments the review read (the treatment group).
        verdict: supports, refutes or inconclusive.
        recommendation: continue, verify, branch, revise or stop.
        rationale: the reasoning, in words.
        direction_id: the direction under review.
        metric: a dev metric to compare between experiment_ids and baseline_ids.
        baseline_ids: experiments to compare against (the control group).
    """
    campaign = env.campaign(writable=True)
    exps = [
        env.read(e, Experiment, field_name=f"experiment_ids.{i}")
        for i, e in enumerate(experiment_ids)
    ]
    base = [
        env.read(e, Experiment, field_name=f"baseline_ids.{i}") for i, e in enumerate(baseline_ids)
    ]
    if direction_id is not None:
        env.read(direction_id, Direction, field_name="direction_id")
    comparisons = []
    if metric is not None:
        if not base:
            raise ToolError("invalid_arguments", "metric needs baseline_ids", field="baseline_ids")
        comparisons.append(compute_comparison(metric, exps, base))
    unmatched = unreconciled(env, rationale, exps + base, comparisons)
    review = env.stage(
        Review(
            campaign_id=campaign.id,
            direction_id=direction_id,
            experiment_ids=[e.id for e in exps + base],
            comparisons=comparisons,
            verdict=verdict,
            recommendation=recommendation,
            rationale=rationale,
            reviewer=env.call.actor,
        )
    )
    out: dict[str, Any] = {
        "id": review.id,
        "comparisons": [c.model_dump(mode="json") for c in comparisons],
    }
    if unmatched:
        stage_reporting_flag(
            env,
            campaign.id,
            rule="unreconciled_number",
            detail=f"review {review.id} states numbers no record holds: "
            + ", ".join(n.text for n in unmatched[:10]),
            tool="submit_review",
        )
        out["flagged_numbers"] = [n.text for n in unmatched]
        out["note"] = (
            "these numbers match nothing in the records of the experiments reviewed; the review "
            "is kept and flagged (cite numbers the records hold, or compute them with metric)"
        )
    return out


@tool(Category.REVIEW)
def inspect_review(env: ToolEnv, review_id: RecordId) -> dict[str, Any]:
    """Return a review in full: verdict, recommendation, rationale and computed comparisons.

    Args:
        review_id: the review.
    """
    return {"review": env.read(review_id, Review, field_name="review_id").model_dump(mode="json")}


@tool(Category.REVIEW)
def list_reviews(
    env: ToolEnv, direction_id: RecordId | None = None, experiment_id: RecordId | None = None
) -> dict[str, Any]:
    """List the campaign's reviews, optionally of one direction or one experiment.

    Args:
        direction_id: only reviews of this direction.
        experiment_id: only reviews that read this experiment.
    """
    campaign = env.campaign()
    reviews = env.readable_as(Review, fields={"campaign_id": campaign.id})
    if direction_id is not None:
        reviews = [r for r in reviews if r.direction_id == direction_id]
    if experiment_id is not None:
        reviews = [r for r in reviews if experiment_id in r.experiment_ids]
    return {
        "reviews": [
            {**brief(r), "verdict": str(r.verdict), "recommendation": str(r.recommendation)}
            for r in reviews
        ]
    }
