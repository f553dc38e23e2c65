"""Resources a campaign used and the protocol flags it raised, counted from the store.

Job time comes from the :class:`~rsilab.records.Job` records (the executor measured it), not
from tool-call events, whose wall time includes the jobs they waited on and would count them
twice. LLM use comes from the ``llm_call`` events, which carry each call's tokens and cost.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime

from rsilab.orchestrator.report._model import (
    FlagItem,
    FlagsReport,
    JobUse,
    LlmUse,
    ResourcesReport,
    StageFlags,
)
from rsilab.records import Event, FlagStage, Job, ProtocolFlag

LLM_ACTION = "llm_call"
"""Action of the ledger event the agent loop writes for every LLM call."""
RUN_START_ACTION = "lease_acquired"
"""Action of the event that starts each run of a campaign (run or resume)."""


def resources_report(jobs: Sequence[Job], events: Sequence[Event]) -> ResourcesReport:
    """Job CPU and wall time by kind, active wall time, and LLM use."""
    by_kind: dict[str, list[Job]] = {}
    for job in jobs:
        by_kind.setdefault(str(job.kind), []).append(job)
    uses = {kind: _job_use(group) for kind, group in sorted(by_kind.items())}
    wall, runs = active_wall(events)
    return ResourcesReport(
        wall_s=wall,
        runs=runs,
        cpu_s=sum(u.cpu_s for u in uses.values()),
        jobs=uses,
        llm=llm_use(events),
    )


def _job_use(jobs: list[Job]) -> JobUse:
    return JobUse(
        count=len(jobs),
        cpu_s=sum(j.resources.cpu_s for j in jobs),
        wall_s=sum(j.resources.wall_s for j in jobs),
        peak_rss_mb=max((j.resources.peak_rss_mb for j in jobs), default=0.0),
    )


def active_wall(events: Sequence[Event]) -> tuple[float, int]:
    """(seconds, runs): each run of the campaign spans from one ``lease_acquired`` event to
    the last event before the next; their spans are summed. Events before the first lease
    (a campaign made with ``campaign new`` and driven by tools) form a span of their own, not
    counted as a run."""
    spans: list[list[Event]] = []
    runs = 0
    for event in events:
        if event.action == RUN_START_ACTION or not spans:
            spans.append([])
        runs += event.action == RUN_START_ACTION
        spans[-1].append(event)
    total = sum(_seconds(span[0].at, span[-1].at) for span in spans if span)
    return total, runs


def _seconds(start: str, end: str) -> float:
    return max(0.0, (_parse(end) - _parse(start)).total_seconds())


def _parse(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def llm_use(events: Sequence[Event]) -> LlmUse:
    """Totals over the ``llm_call`` events; a call with tokens but no cost had no price."""
    calls = [e.cost for e in events if e.action == LLM_ACTION and e.cost is not None]
    return LlmUse(
        calls=len(calls),
        tokens_in=sum(c.tokens_in for c in calls),
        tokens_out=sum(c.tokens_out for c in calls),
        cost_usd=sum(c.cost_usd for c in calls),
        unpriced_calls=sum(1 for c in calls if c.cost_usd == 0 and c.tokens_in + c.tokens_out),
    )


def flags_report(flags: Sequence[ProtocolFlag]) -> FlagsReport:
    """Flags counted per stage (every stage present) and listed oldest first."""
    by_stage: dict[str, StageFlags] = {}
    for stage in FlagStage:
        mine = [f for f in flags if f.stage == stage]
        by_stage[str(stage)] = StageFlags(
            count=len(mine),
            blocked=sum(1 for f in mine if f.blocked),
            detected=sum(1 for f in mine if not f.blocked),
            rules=dict(sorted(Counter(f.rule for f in mine).items())),
        )
    items = [
        FlagItem(
            id=f.id,
            stage=str(f.stage),
            rule=f.rule,
            detail=f.detail,
            actor=f.actor,
            blocked=f.blocked,
            at=f.created_at,
        )
        for f in sorted(flags, key=lambda f: f.created_at)
    ]
    return FlagsReport(total=len(flags), by_stage=by_stage, items=items)
