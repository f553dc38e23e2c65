"""Research team tools: the Leader orients researchers; everyone can see who is oriented how.

A team campaign records ``{"team": N}`` in its settings; its researchers are ``researcher-1``
to ``researcher-N``. An assignment names a researcher, an orientation that exists as an
Orientation record (``orientation:<name>``, the version in force is recorded) and the
reasons and evidence for it; a redirect is a new assignment that supersedes the last one.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from rsilab.errors import ToolError
from rsilab.expos.context import ToolEnv
from rsilab.expos.registry import Category
from rsilab.expos.tools._base import Name, RecordId, Text, tool
from rsilab.memory import (
    assignments_of,
    current_assignments,
    orientation_named,
    researcher_orientations,
    team_members,
)
from rsilab.records import Assignment, Record


@tool(Category.TEAM)
def assign_orientation(
    env: ToolEnv,
    researcher: Name,
    orientation: Name,
    reason: Text,
    evidence_ids: list[RecordId] = Field(default_factory=list, max_length=50),  # noqa: B008
) -> dict[str, Any]:
    """Give a researcher of this team campaign an orientation (or redirect it to another).

    Args:
        researcher: the researcher's name, e.g. "researcher-2" (one of the campaign's team).
        orientation: an orientation list_orientations shows as "orientation:<name>", e.g.
            "explorer", "exploiter", "verifier" or "analyst".
        reason: why, in words, citing the evidence.
        evidence_ids: ids of the records the decision rests on (experiments, findings, ...).
    """
    campaign = env.campaign(writable=True)
    team = team_members(campaign.settings)
    if researcher not in team:
        raise ToolError(
            "invalid_arguments",
            f"{researcher!r} is not a researcher of campaign {campaign.id}"
            + ("" if team else " (it is not a team campaign)"),
            field="researcher",
            expected=f"one of {team}" if team else "a team campaign (rsilab run --team N)",
        )
    chosen = orientation_named(env.store, orientation)
    if chosen is None:
        raise ToolError(
            "not_found",
            f"no orientation named {orientation!r}",
            field="orientation",
            expected=f"one of {researcher_orientations(env.store)}",
        )
    name = chosen.name.split(":", 1)[1]
    if not reason.strip():
        raise ToolError("invalid_arguments", "say why, citing the evidence", field="reason")
    evidence = [
        env.read(e, Record, field_name=f"evidence_ids.{i}") for i, e in enumerate(evidence_ids)
    ]
    previous = current_assignments(env.store, campaign.id).get(researcher)
    if previous is not None and (previous.orientation, previous.orientation_id) == (
        name,
        chosen.id,
    ):
        raise ToolError(
            "conflict",
            f"{researcher} is already oriented as {name} ({previous.id})",
            field="orientation",
            expected="another orientation, or a newer version of this one",
        )
    assignment = env.stage(
        Assignment(
            campaign_id=campaign.id,
            researcher=researcher,
            orientation=name,
            orientation_id=chosen.id,
            reason=reason,
            evidence=list(dict.fromkeys(r.id for r in evidence)),
            supersedes=previous.id if previous is not None else None,
            leader=env.call.actor,
        )
    )
    return {
        "id": assignment.id,
        "researcher": researcher,
        "orientation": name,
        "orientation_version": chosen.version,
        "supersedes": assignment.supersedes,
    }


@tool(Category.TEAM)
def list_assignments(env: ToolEnv) -> dict[str, Any]:
    """The team's assignments: each researcher's current orientation, and every one before."""
    campaign = env.campaign()
    history = assignments_of(env.store, campaign.id)
    current = {a.id for a in current_assignments(env.store, campaign.id).values()}
    return {
        "team": team_members(campaign.settings),
        "assignments": [
            {
                "id": a.id,
                "researcher": a.researcher,
                "orientation": a.orientation,
                "orientation_id": a.orientation_id,
                "reason": a.reason,
                "evidence": a.evidence,
                "supersedes": a.supersedes,
                "current": a.id in current,
                "leader": a.leader,
                "created_at": a.created_at,
            }
            for a in history
        ],
    }
