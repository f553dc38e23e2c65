"""Lock-in and review measures of a campaign, computed from its records and its ledger.

A search that keeps digging one direction, never branches and ignores its reviewers shows it
here. Everything is counted from what the store holds; nothing is taken from an agent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import Field

from rsilab.orchestrator.research.dag import ResearchDag, review_directions
from rsilab.records import (
    Candidate,
    CandidateState,
    Direction,
    DirectionState,
    EdgeRelation,
    Event,
    Model,
    Outcome,
    Recommendation,
    Review,
    Role,
)
from rsilab.store import Store

DIRECTION_ACTIONS = frozenset({"create_direction", "update_direction"})
"""Tools whose successful call by a Main agent is a "direction action"."""

STOPPED = frozenset({DirectionState.REFUTED, DirectionState.EXHAUSTED})


class LockInMeasures(Model):
    """How broadly a campaign searched, and whether reviews steered it."""

    campaign_id: str = Field(description="The campaign measured.")
    directions: int = Field(description="Directions created.")
    directions_explored: int = Field(description="Directions with at least one experiment.")
    experiments: int = Field(description="Experiments created.")
    top_direction_id: str | None = Field(description="Direction with the most experiments.")
    top_direction_share: float | None = Field(
        description="Its share of all experiments; None without experiments."
    )
    branches: int = Field(description="Edges with the relation branch.")
    revisions: int = Field(description="Edges with the relation revise.")
    verifications: int = Field(description="Edges with the relation verify.")
    last_improvement_at: str | None = Field(
        description="finished_at of the newest accepted candidate; None if none was accepted."
    )
    experiments_since_improvement: int = Field(
        description="Experiments created after it (all of them when nothing was accepted)."
    )
    reviews: int = Field(description="Reviews filed.")
    reviews_acted_on: int = Field(
        description="Reviews of one direction followed by a next action (see review_influence)."
    )
    reviews_followed: int = Field(description="Of those, reviews whose advice the action took.")
    review_influence: float | None = Field(
        description="reviews_followed / reviews_acted_on; None when no review was acted on."
    )
    reviews_stating_default: int = Field(
        default=0,
        description="Followed reviews whose rationale states Main's own rule without a review "
        "(the built-in Reviewer's do).",
    )
    reviews_changing_action: int = Field(
        default=0,
        description="Of those, reviews whose advice differs from that rule: the review changed "
        "the next action.",
    )


def lock_in_measures(store: Store, campaign_id: str) -> LockInMeasures:
    """The measures of one campaign.

    Review influence is counted over the ledger, in order. For each successful
    ``submit_review`` whose review concerns exactly one direction D (the direction it names,
    else the single direction of the experiments it read; others are left out), the *next
    action* is the first later event that is either a successful ``create_direction`` or
    ``update_direction`` by a Main agent, or (for the advice ``continue`` only) a successful
    ``create_experiment`` under D. The review is *followed* when that action is:

    - continue: a new experiment under D, or a new direction with a continue edge from D;
    - verify, branch, revise: a new direction with an edge of that relation from D;
    - stop: D set to refuted or exhausted.

    A followed review *changed the next action* when its rationale states Main's own rule
    without a review (the built-in Reviewer ends each rationale so,
    :data:`DEFAULT_RULE_NOTE`) and that rule differs from its
    advice. A review with no next action yet is not acted on and counts in no number. The
    status an ``update_direction`` set is read from the direction's history (the k-th
    successful update of a direction wrote its k-th history entry).
    """
    dag = ResearchDag.load(store, campaign_id)
    exps = [e for runs in dag.experiments.values() for e in runs]
    counts = {d: len(runs) for d, runs in dag.experiments.items() if runs}
    top = max(counts, key=lambda d: counts[d]) if counts else None
    relations = dag.relation_counts()
    accepted = [
        c.finished_at
        for c in store.query_as(Candidate, campaign_id=campaign_id)
        if c.state == CandidateState.ACCEPTED and c.finished_at is not None
    ]
    last = max(accepted, default=None)
    influence = _review_influence(dag, store.events(campaign_id=campaign_id))
    acted, followed = influence.acted, influence.followed
    return LockInMeasures(
        campaign_id=campaign_id,
        directions=len(dag.directions),
        directions_explored=len(counts),
        experiments=len(exps),
        top_direction_id=top,
        top_direction_share=counts[top] / len(exps) if top is not None else None,
        branches=relations[EdgeRelation.BRANCH],
        revisions=relations[EdgeRelation.REVISE],
        verifications=relations[EdgeRelation.VERIFY],
        last_improvement_at=last,
        experiments_since_improvement=sum(1 for e in exps if last is None or e.created_at > last),
        reviews=len({r.id for rs in dag.reviews.values() for r in rs}),
        reviews_acted_on=acted,
        reviews_followed=followed,
        review_influence=followed / acted if acted else None,
        reviews_stating_default=influence.stating_default,
        reviews_changing_action=influence.changing,
    )


DEFAULT_RULE_NOTE = "Without a review, Main's own rule: {}."
"""The last sentence of a built-in review's rationale: Main's move had no review spoken
(:mod:`rsilab.orchestrator.builtin.reviewer._agent`)."""
_DEFAULT_RULE = re.compile(r"Without a review, Main's own rule: ([a-z]+)\.$")


def stated_default(rationale: str) -> str | None:
    """The default rule a review's rationale states (None when it states none)."""
    found = _DEFAULT_RULE.search(rationale.strip())
    return found.group(1) if found else None


@dataclass
class _Influence:
    acted: int = 0
    followed: int = 0
    stating_default: int = 0
    changing: int = 0


class _Action:
    """A ledger event read as a step of the search: what it did to which direction."""

    def __init__(self, kind: str, direction: Direction, status: DirectionState | None) -> None:
        self.kind, self.direction, self.status = kind, direction, status

    def follows(self, advice: Recommendation, target: str) -> bool:
        if self.kind == "create_experiment":
            return advice == Recommendation.CONTINUE and self.direction.id == target
        if self.kind == "update_direction":
            return (
                advice == Recommendation.STOP
                and self.direction.id == target
                and self.status in STOPPED
            )
        return advice != Recommendation.STOP and any(
            e.parent_id == target and str(e.relation) == str(advice) for e in self.direction.parents
        )


def _review_influence(dag: ResearchDag, events: list[Event]) -> _Influence:
    """Reviews acted on, followed and changing the action, as :func:`lock_in_measures`
    defines them."""
    steps = _steps(dag, events)
    reviews = {r.id: r for rs in dag.reviews.values() for r in rs}
    by_exp = {e.id: e for runs in dag.experiments.values() for e in runs}
    counts = _Influence()
    for i, step in enumerate(steps):
        if not isinstance(step, Review) or step.id not in reviews:
            continue
        targets = review_directions(step, by_exp)
        if len(targets) != 1:
            continue
        advice, target = step.recommendation, targets[0]
        for later in steps[i + 1 :]:
            if not isinstance(later, _Action):
                continue
            if later.kind == "create_experiment" and not (
                advice == Recommendation.CONTINUE and later.direction.id == target
            ):
                continue  # a worker's experiment is not the Main agent's answer
            counts.acted += 1
            if later.follows(advice, target):
                counts.followed += 1
                default = stated_default(step.rationale)
                if default is not None:
                    counts.stating_default += 1
                    counts.changing += default != str(advice)
            break
    return counts


def _steps(dag: ResearchDag, events: list[Event]) -> list[Review | _Action]:
    """Reviews filed and direction-level actions taken, in ledger order."""
    reviews = {r.id: r for rs in dag.reviews.values() for r in rs}
    by_exp = {e.id: e for runs in dag.experiments.values() for e in runs}
    updates: dict[str, int] = {}
    out: list[Review | _Action] = []
    for event in events:
        if event.outcome != Outcome.OK or event.tool is None:
            continue
        ids = [ref.id for ref in event.records]
        if event.tool == "submit_review":
            out += [reviews[i] for i in ids if i in reviews]
        elif event.tool == "create_experiment":
            for i in ids:
                if i in by_exp and by_exp[i].direction_id in dag.directions:
                    out.append(_Action(event.tool, dag.directions[by_exp[i].direction_id], None))
        elif event.tool in DIRECTION_ACTIONS and event.role == Role.MAIN:
            out += [
                _direction_action(dag, event.tool, i, updates) for i in ids if i in dag.directions
            ]
    return out


def _direction_action(
    dag: ResearchDag, tool: str, direction_id: str, updates: dict[str, int]
) -> _Action:
    direction = dag.directions[direction_id]
    if tool == "create_direction":
        return _Action(tool, direction, None)
    k = updates.get(direction_id, 0)
    updates[direction_id] = k + 1
    status = direction.history[k].status if k < len(direction.history) else None
    return _Action(tool, direction, status)
