"""Shared memory tools: publish, query and adopt findings; read skills and orientations.

A finding is stored lab-wide, so later and parallel campaigns on the task read it. Its status
is never more than the records support: a "supported" (or "refuted") claim carries a metric,
two groups of experiments and a direction, the tool recomputes the effect from the recorded
dev metrics, and a claim the interval does not bear out is stored as unresolved, with the
attempt recorded as a protocol flag. Revising skills and orientations is not an agent tool.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from rsilab.errors import ToolError
from rsilab.expos import policy
from rsilab.expos.context import ToolEnv
from rsilab.expos.reconcile import unreconciled_numbers
from rsilab.expos.registry import Category
from rsilab.expos.tools._base import Limit, Name, RecordId, Text, tool
from rsilab.expos.tools._findings import (
    checked_status,
    finding_view,
    recorded_numbers_of,
    structured_claim,
)
from rsilab.expos.tools._numbers import stage_reporting_flag
from rsilab.memory import (
    ORIENTATION_PREFIX,
    adoption_counts,
    current_assignments,
    lab_findings,
    latest_orientations,
    latest_skills,
    orientation_history,
    relevant_findings,
    skill_history,
    superseded_by,
)
from rsilab.records import (
    Adoption,
    Direction,
    Experiment,
    Finding,
    FindingStatus,
    Record,
)

Claim = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=2000)]
"""A finding's claim: one non-empty statement."""

Tag = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=60)]
"""A knob name or topic, e.g. 'learning_rate'."""


@tool(Category.MEMORY)
def publish_finding(
    env: ToolEnv,
    claim: Claim,
    status: FindingStatus,
    conditions: Text = "",
    uncertainty: Text = "",
    sources: list[RecordId] = Field(default_factory=list, max_length=50),  # noqa: B008
    metric: Name | None = None,
    a_ids: list[RecordId] = Field(default_factory=list, max_length=50),  # noqa: B008
    b_ids: list[RecordId] = Field(default_factory=list, max_length=50),  # noqa: B008
    direction: Literal["higher", "lower"] | None = None,
    tags: list[Tag] = Field(default_factory=list, max_length=20),  # noqa: B008
    supersedes: RecordId | None = None,
) -> dict[str, Any]:
    """Publish a finding to the lab's shared memory, where later campaigns on the task read it.

    "supported" (and "refuted") needs a structured claim: metric, a_ids, b_ids and direction,
    meaning "the mean dev value of metric over a_ids is <direction> than over b_ids". The
    tool recomputes a - b with a Welch interval from the records: the finding is stored as
    supported only when the interval excludes zero on the claimed side (refuted: on the other
    side). Otherwise it is stored as "unresolved", an open problem, and the attempt is
    flagged. Numbers in the text that no source record holds are flagged too.

    Args:
        claim: what was found, in one statement.
        status: supported, unresolved (an open problem) or refuted.
        conditions: under which conditions it held (data, budget, settings).
        uncertainty: how sure, and why.
        sources: ids of records it rests on (experiments, reviews, evaluations, findings).
        metric: dev metric of the structured claim.
        a_ids: experiments of group a (at least 2 with a dev value of metric).
        b_ids: experiments of group b (at least 2 with a dev value of metric).
        direction: "higher" or "lower": the claim is that a's mean is higher/lower than b's.
        tags: knob names or topics it concerns, so others find it.
        supersedes: an earlier finding of this task that this one revises or refutes.
    """
    campaign = env.campaign(writable=True)
    read = [env.read(s, Record, field_name=f"sources.{i}") for i, s in enumerate(sources)]
    claimed = structured_claim(env, status, metric, a_ids, b_ids, direction)
    if supersedes is not None:
        _check_supersedes(env, supersedes, campaign.task.name)
    stored, check, comparison = checked_status(status, claimed)
    finding = env.stage(
        Finding(
            claim=claim,
            status=stored,
            conditions=conditions,
            uncertainty=uncertainty,
            sources=list(dict.fromkeys([*(r.id for r in read), *claimed.ids()])),
            author=env.call.actor,
            task=campaign.task.name,
            origin_campaign_id=campaign.id,
            structured=claimed.claim,
            effect=comparison.effect if comparison is not None else None,
            claimed_status=status if stored != status else None,
            check=check,
            tags=list(dict.fromkeys(tags)),
            orientation=_orientation_of(env, campaign.id),
            supersedes=supersedes,
        )
    )
    out: dict[str, Any] = {
        "id": finding.id,
        "status": str(stored),
        "check": check,
        "effect": finding.effect.model_dump(mode="json") if finding.effect else None,
    }
    if stored != status:
        out |= _flag_attempt(env, campaign.id, finding, status)
    known = recorded_numbers_of(env, read, claimed, comparison)
    unmatched = unreconciled_numbers(f"{claim}\n{conditions}\n{uncertainty}", known)
    if unmatched:
        stage_reporting_flag(
            env,
            campaign.id,
            rule="unreconciled_number",
            detail=f"finding {finding.id} states numbers no record holds: "
            + ", ".join(n.text for n in unmatched[:10]),
            tool="publish_finding",
        )
        out["flagged_numbers"] = [n.text for n in unmatched]
    return out


def _orientation_of(env: ToolEnv, campaign_id: str) -> str:
    """The author's orientation: its assignment in a team campaign, else its role's text."""
    if not env.call.role.is_agent:
        return ""
    assigned = current_assignments(env.store, campaign_id).get(env.call.actor)
    if assigned is not None:
        return f"{ORIENTATION_PREFIX}{assigned.orientation}"
    return f"role:{env.call.role}"


def _check_supersedes(env: ToolEnv, finding_id: str, task: str) -> None:
    earlier = env.read(finding_id, Finding, field_name="supersedes")
    if earlier.task != task:
        raise ToolError(
            "invalid_arguments",
            f"{finding_id} is a finding of task {earlier.task!r}, not {task!r}",
            field="supersedes",
            expected="a finding of this campaign's task",
        )


def _flag_attempt(
    env: ToolEnv, campaign_id: str, finding: Finding, asked: FindingStatus
) -> dict[str, Any]:
    """Record a claim stored as less than its author asked for; say so to the author."""
    stage_reporting_flag(
        env,
        campaign_id,
        rule="unsupported_finding",
        detail=f"finding {finding.id} was published as {asked} but stored as {finding.status}: "
        + finding.check,
        tool="publish_finding",
    )
    return {
        "claimed_status": str(asked),
        "note": f"the records do not show it as {asked}, so it is kept as an open problem, not "
        "a result; the attempt is recorded",
    }


@tool(Category.MEMORY)
def query_findings(
    env: ToolEnv,
    text: Text | None = None,
    tags: list[Tag] = Field(default_factory=list, max_length=20),  # noqa: B008
    metric: Name | None = None,
    status: FindingStatus | None = None,
    limit: Limit = 20,
) -> dict[str, Any]:
    """Findings of this campaign's task from every campaign, most relevant first.

    Each shows its status first; an unresolved one is an open problem, not a result.
    "superseded_by" names later findings that revise or refute it; "adoptions" counts the
    campaigns' recorded uses of it.

    Args:
        text: words describing your work; findings sharing them rank higher.
        tags: knob names or topics; shared tags rank highest.
        metric: a metric; findings whose structured claim is about it rank higher.
        status: only findings with this status.
        limit: how many to return.
    """
    campaign = env.campaign()
    ranked = relevant_findings(
        env.store,
        campaign.task.name,
        text=text,
        tags=tags,
        metric=metric,
        statuses=None if status is None else {status},
        limit=limit,
    )
    counts = adoption_counts(env.store)
    shown = [
        finding_view(r, counts[r.finding.id])
        for r in ranked
        if policy.read_refusal(env.call.role, env.call.campaign_id, r.finding) is None
    ]
    return {"task": campaign.task.name, "findings": shown}


@tool(Category.MEMORY)
def adopt_finding(
    env: ToolEnv,
    finding_id: RecordId,
    mode: Literal["adopted", "adapted"] = "adopted",
    note: Text = "",
    experiment_ids: list[RecordId] = Field(default_factory=list, max_length=50),  # noqa: B008
    direction_id: RecordId | None = None,
) -> dict[str, Any]:
    """Record that this campaign adopts a finding as is, or adapts it, and where it is used.

    Args:
        finding_id: the finding.
        mode: "adopted" (used as is) or "adapted" (changed; say how in note).
        note: how it is used, or what was changed.
        experiment_ids: experiments of this campaign that use it.
        direction_id: the direction that uses it.
    """
    campaign = env.campaign(writable=True)
    finding = env.read(finding_id, Finding, field_name="finding_id")
    exps = [
        env.read(e, Experiment, field_name=f"experiment_ids.{i}")
        for i, e in enumerate(experiment_ids)
    ]
    if direction_id is not None:
        env.read(direction_id, Direction, field_name="direction_id")
    adoption = env.stage(
        Adoption(
            campaign_id=campaign.id,
            finding_id=finding.id,
            mode=mode,
            note=note,
            experiment_ids=[e.id for e in exps],
            direction_id=direction_id,
            actor=env.call.actor,
        )
    )
    out: dict[str, Any] = {"id": adoption.id, "finding_id": finding.id, "mode": mode}
    out["finding_status"] = str(finding.status)
    if finding.status is FindingStatus.UNRESOLVED:
        out["note"] = "this finding is unresolved: an open problem, not a result"
    later = superseded_by(lab_findings(env.store, finding.task)).get(finding.id)
    if later:
        out["superseded_by"] = list(later)
    return out


@tool(Category.MEMORY)
def list_skills(env: ToolEnv) -> dict[str, Any]:
    """List the lab's skills (reusable procedures), latest version of each."""
    skills = [s for s in latest_skills(env.store) if _readable(env, s)]
    return {
        "skills": [
            {
                "name": s.name,
                "version": s.version,
                "id": s.id,
                "has_code": s.code is not None,
                "first_line": s.text.strip().splitlines()[0] if s.text.strip() else "",
            }
            for s in skills
        ]
    }


@tool(Category.MEMORY)
def read_skill(env: ToolEnv, name: Name, version: int | None = None) -> dict[str, Any]:
    """Read a skill's text and code: the latest version, or the one asked for.

    Args:
        name: the skill's name, as list_skills shows it.
        version: a version number; default the latest.
    """
    history = [s for s in skill_history(env.store, name) if _readable(env, s)]
    if not history:
        raise ToolError(
            "not_found",
            f"no skill named {name!r}",
            field="name",
            expected="a name list_skills shows",
        )
    chosen = [s for s in history if version is None or s.version == version]
    if not chosen:
        versions = sorted({s.version for s in history})
        raise ToolError(
            "not_found",
            f"skill {name!r} has no version {version}",
            field="version",
            expected=f"one of {versions}",
        )
    skill = chosen[-1]
    return {
        "id": skill.id,
        "name": skill.name,
        "version": skill.version,
        "text": skill.text,
        "code": skill.code,
        "parent_id": skill.parent_id,
        "versions": [s.version for s in history],
    }


@tool(Category.MEMORY)
def list_orientations(env: ToolEnv) -> dict[str, Any]:
    """List researcher orientations (role texts), latest version of each, with their texts."""
    latest = [o for o in latest_orientations(env.store) if _readable(env, o)]
    return {
        "orientations": [
            {
                "name": o.name,
                "version": o.version,
                "id": o.id,
                "versions": len(orientation_history(env.store, o.name)),
                "text": o.text,
            }
            for o in latest
        ]
    }


def _readable(env: ToolEnv, record: Record) -> bool:
    return policy.read_refusal(env.call.role, env.call.campaign_id, record) is None
