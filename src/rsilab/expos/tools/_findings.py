"""How ``publish_finding`` checks a claim against the records, and how findings are shown."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from rsilab.errors import NotFoundError, ToolError
from rsilab.expos import policy
from rsilab.expos.context import ToolEnv
from rsilab.expos.tools._numbers import recorded_numbers
from rsilab.expos.tools.review import compute_comparison
from rsilab.memory import RankedFinding
from rsilab.records import (
    Comparison,
    Evaluation,
    Experiment,
    FindingClaim,
    FindingStatus,
    Interval,
    Record,
    Review,
)

SHOWN_AS = {
    FindingStatus.SUPPORTED: "result: the records support it",
    FindingStatus.REFUTED: "result: the records refute the claim",
    FindingStatus.UNRESOLVED: "open problem, not a result",
}
"""How a finding of each status is to be read; an unresolved one is never a result."""


@dataclass(frozen=True)
class ClaimGroups:
    """A structured claim with the experiments of its two groups (none when there is no claim)."""

    claim: FindingClaim | None = None
    a: list[Experiment] = field(default_factory=list)
    b: list[Experiment] = field(default_factory=list)

    def ids(self) -> list[str]:
        return [e.id for e in (*self.a, *self.b)]


def structured_claim(
    env: ToolEnv,
    status: FindingStatus,
    metric: str | None,
    a_ids: list[str],
    b_ids: list[str],
    direction: Literal["higher", "lower"] | None,
) -> ClaimGroups:
    """The claim's parts, read and checked; ToolError naming the first missing or bad one.

    "supported" needs all four parts; any other status needs all four or none.
    """
    given = {"metric": metric, "a_ids": a_ids, "b_ids": b_ids, "direction": direction}
    if status is not FindingStatus.SUPPORTED and not any(given.values()):
        return ClaimGroups()
    for name, value in given.items():
        if not value:
            why = (
                'status "supported" needs a structured claim'
                if status is FindingStatus.SUPPORTED
                else "a structured claim needs all of metric, a_ids, b_ids and direction"
            )
            raise ToolError(
                "invalid_arguments",
                f"{why}: {name} is missing",
                field=name,
                expected=_EXPECTED[name],
            )
    assert metric is not None and direction is not None
    a = _group(env, a_ids, "a_ids")
    b = _group(env, b_ids, "b_ids")
    both = sorted(set(a_ids) & set(b_ids))
    if both:
        raise ToolError(
            "invalid_arguments",
            f"{', '.join(both)} is in both groups; a and b must be different experiments",
            field="b_ids",
        )
    claim = FindingClaim(metric=metric, a_ids=a_ids, b_ids=b_ids, direction=direction)
    return ClaimGroups(claim, a, b)


_EXPECTED = {
    "metric": "the dev metric the claim is about",
    "a_ids": "experiment ids of group a (at least 2 with a dev value)",
    "b_ids": "experiment ids of group b (at least 2 with a dev value)",
    "direction": '"higher" or "lower" (a\'s mean compared with b\'s)',
}


def _group(env: ToolEnv, ids: list[str], name: str) -> list[Experiment]:
    if len(set(ids)) != len(ids):
        raise ToolError("invalid_arguments", f"{name} names an experiment twice", field=name)
    return [env.read(e, Experiment, field_name=f"{name}.{i}") for i, e in enumerate(ids)]


def checked_status(
    asked: FindingStatus, claimed: ClaimGroups
) -> tuple[FindingStatus, str, Comparison | None]:
    """The status the records allow for a claim, why in words, and the comparison computed."""
    if claimed.claim is None:
        if asked is FindingStatus.REFUTED:
            why = (
                "a refutation must be shown by the records (give metric, a_ids, b_ids and "
                "direction); kept as an open problem"
            )
            return FindingStatus.UNRESOLVED, why, None
        return FindingStatus.UNRESOLVED, "published as an open problem", None
    comparison = compute_comparison(claimed.claim.metric, claimed.a, claimed.b)
    reading = _reading(claimed.claim.direction, comparison.effect)
    allowed = {"for": FindingStatus.SUPPORTED, "against": FindingStatus.REFUTED}.get(reading)
    stored = asked if asked is allowed else FindingStatus.UNRESOLVED
    words = {
        "for": "excludes 0 on the claimed side",
        "against": "excludes 0 on the other side (the records show the opposite)",
        "neither": "includes 0 (the records cannot tell)",
    }[reading]
    check = f"{_shown(comparison)}, which {words}; stored as {stored}"
    if stored is not asked:
        check += f", not {asked}"
    return stored, check, comparison


def _reading(direction: str, effect: Interval) -> Literal["for", "against", "neither"]:
    """Whether the interval of a - b is clear of 0 on the side the claim names, the other, or
    neither."""
    low, high = (effect.low, effect.high) if direction == "higher" else (-effect.high, -effect.low)
    if low > 0:
        return "for"
    if high < 0:
        return "against"
    return "neither"


def _shown(c: Comparison) -> str:
    e = c.effect
    return (
        f"{c.metric}: mean of a - mean of b = {e.value:+.4g}, {e.level:.0%} interval "
        f"[{e.low:+.4g}, {e.high:+.4g}] over {c.n_a} and {c.n_b} experiments"
    )


def recorded_numbers_of(
    env: ToolEnv, sources: list[Record], claimed: ClaimGroups, comparison: Comparison | None
) -> list[float]:
    """Numbers the finding's sources and its claim's records hold (see ``recorded_numbers``).

    A source review contributes its experiments and comparisons; a source evaluation its
    aggregates. Other findings contribute nothing: their effects may rest on agent-logged
    metrics, which never reconcile a number.
    """
    exps = {e.id: e for e in (*claimed.a, *claimed.b)}
    exps |= {s.id: s for s in sources if isinstance(s, Experiment)}
    comparisons = [comparison] if comparison is not None else []
    for review in (s for s in sources if isinstance(s, Review)):
        read = [_readable_experiment(env, i) for i in review.experiment_ids]
        found = [e for e in read if e is not None]
        exps |= {e.id: e for e in found}
        if len(found) == len(read):
            comparisons += review.comparisons
    evaluations = [s for s in sources if isinstance(s, Evaluation)]
    return recorded_numbers(env, list(exps.values()), comparisons, evaluations)


def _readable_experiment(env: ToolEnv, record_id: str) -> Experiment | None:
    try:
        record = env.store.get(record_id)
    except NotFoundError:
        return None
    if not isinstance(record, Experiment):
        return None
    if policy.read_refusal(env.call.role, env.call.campaign_id, record) is not None:
        return None
    return record


def finding_view(ranked: RankedFinding, adoptions: int) -> dict[str, Any]:
    """A finding as ``query_findings`` shows it: its status and how to read it come first."""
    f = ranked.finding
    return {
        "status": str(f.status),
        "shown_as": SHOWN_AS[f.status],
        "id": f.id,
        "claim": f.claim,
        "conditions": f.conditions,
        "uncertainty": f.uncertainty,
        "structured": f.structured.model_dump(mode="json") if f.structured else None,
        "effect": f.effect.model_dump(mode="json") if f.effect else None,
        "check": f.check,
        "claimed_status": str(f.claimed_status) if f.claimed_status else None,
        "tags": f.tags,
        "sources": f.sources,
        "author": f.author,
        "origin_campaign_id": f.origin_campaign_id,
        "supersedes": f.supersedes,
        "superseded_by": list(ranked.superseded_by),
        "adoptions": adoptions,
        "relevance": ranked.relevance,
        "created_at": f.created_at,
    }
