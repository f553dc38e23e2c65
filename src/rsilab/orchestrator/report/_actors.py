"""Who used what: per-actor resources and outcomes, and a team's assignments, from the store.

Every campaign gets a row per actor (its Main, Workers and Reviewer; a team's researchers and
Leader; the controller's own jobs): experiments created, job CPU and wall time, LLM calls,
tokens and money, tool calls, findings published, adoptions, assignments received, and
candidates proposed and accepted. Each quantity is counted once, for the actor its record
names (a job's ``actor``, an event's, an experiment's ``created_by``...), so the rows add up to
the totals.
"""

from __future__ import annotations

from collections.abc import Sequence

from rsilab.memory import assignments_of
from rsilab.orchestrator.report._model import ActorUse, AssignmentItem
from rsilab.orchestrator.report._usage import LLM_ACTION
from rsilab.records import (
    Adoption,
    Candidate,
    CandidateState,
    Event,
    Experiment,
    Finding,
    Job,
    Orientation,
)
from rsilab.store import StoreReader

UNNAMED = "(unnamed)"
"""The row of records that name no actor (older jobs, for one)."""


def actor_uses(
    store: StoreReader, campaign_id: str, jobs: Sequence[Job], events: Sequence[Event]
) -> list[ActorUse]:
    """One row per actor of the campaign, sorted by name."""
    rows: dict[str, ActorUse] = {}
    for e in store.query_as(Experiment, campaign_id=campaign_id):
        _row(rows, e.created_by).experiments += 1
    for job in jobs:
        r = _row(rows, job.actor)
        r.jobs += 1
        r.job_cpu_s += job.resources.cpu_s
        r.job_wall_s += job.resources.wall_s
    for event in events:
        if event.action == LLM_ACTION and event.cost is not None:
            r = _row(rows, event.actor)
            r.llm_calls += 1
            r.tokens_in += event.cost.tokens_in
            r.tokens_out += event.cost.tokens_out
            r.cost_usd += event.cost.cost_usd
        elif event.tool is not None:
            _row(rows, event.actor).tool_calls += 1
    for f in store.query_as(Finding):
        if f.origin_campaign_id == campaign_id:
            _row(rows, f.author).findings += 1
    for a in store.query_as(Adoption, campaign_id=campaign_id):
        _row(rows, a.actor).adoptions += 1
    for s in assignments_of(store, campaign_id):
        r = _row(rows, s.researcher)
        r.assignments += 1
        r.orientation = s.orientation
    for c in store.query_as(Candidate, campaign_id=campaign_id):
        r = _row(rows, c.proposer)
        r.candidates += 1
        r.accepted += c.state is CandidateState.ACCEPTED
    return [rows[name] for name in sorted(rows)]


def _row(rows: dict[str, ActorUse], actor: str) -> ActorUse:
    name = actor or UNNAMED
    return rows.setdefault(name, ActorUse(actor=name))


def totals(rows: Sequence[ActorUse]) -> ActorUse:
    """The sum of ``rows`` (actor ``total``)."""
    total = ActorUse(actor="total")
    for r in rows:
        for name in ActorUse.SUMMED:
            setattr(total, name, getattr(total, name) + getattr(r, name))
    return total


def team_items(store: StoreReader, campaign_id: str) -> list[AssignmentItem]:
    """The campaign's assignments, oldest first, with the orientation version each used."""
    out = []
    for a in assignments_of(store, campaign_id):
        try:
            version = store.get_as(a.orientation_id, Orientation).version
        except Exception:  # an orientation a later gc removed: the id still says which
            version = None
        out.append(
            AssignmentItem(
                id=a.id,
                researcher=a.researcher,
                orientation=a.orientation,
                orientation_version=version,
                reason=a.reason,
                evidence=list(a.evidence),
                supersedes=a.supersedes,
                leader=a.leader,
                at=a.created_at,
            )
        )
    return out
