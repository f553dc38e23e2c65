"""A team campaign's members and their assignments, read from the records.

A team campaign records ``{"team": N}`` in its settings; its researchers are the actors
``researcher-1`` to ``researcher-N``. Each researcher's orientation is its latest
:class:`~rsilab.records.Assignment`; the orientation texts are versioned Orientation records
named ``orientation:<name>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rsilab.errors import UserError
from rsilab.memory.revisions import latest_orientation, latest_orientations
from rsilab.records import Assignment, Orientation
from rsilab.store.base import Store, StoreReader

RESEARCHER_PREFIX = "researcher-"
ORIENTATION_PREFIX = "orientation:"
"""Orientation records of researchers are named ``orientation:<name>`` (role texts ``role:``)."""


def team_size(settings: Mapping[str, Any]) -> int:
    """The number of researchers a campaign's settings record (0: not a team campaign)."""
    value = settings.get("team")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def require_team(team: int) -> None:
    """Raise UserError unless a team of ``team`` researchers can be started (one or more)."""
    if team < 1:
        raise UserError(f"a team needs at least one researcher, not {team}", "use --team 1 or more")


def team_members(settings: Mapping[str, Any]) -> list[str]:
    """The researchers' actor names of a team campaign (empty for any other campaign)."""
    return [f"{RESEARCHER_PREFIX}{k}" for k in range(1, team_size(settings) + 1)]


def assignments_of(store: StoreReader, campaign_id: str) -> list[Assignment]:
    """Every assignment of the campaign, oldest first."""
    found = store.query_as(Assignment, campaign_id=campaign_id)
    return sorted(found, key=lambda a: (a.created_at, a.id))


def current_assignments(store: Store, campaign_id: str) -> dict[str, Assignment]:
    """Each researcher's latest assignment, by researcher."""
    return {a.researcher: a for a in assignments_of(store, campaign_id)}


def orientation_named(store: Store, name: str) -> Orientation | None:
    """The latest revision of the researcher orientation ``name`` (``explorer`` or
    ``orientation:explorer``); None when there is none."""
    full = name if name.startswith(ORIENTATION_PREFIX) else f"{ORIENTATION_PREFIX}{name}"
    return latest_orientation(store, full)


def researcher_orientations(store: Store) -> list[str]:
    """Names (without the prefix) of every researcher orientation the lab holds."""
    return [
        o.name.removeprefix(ORIENTATION_PREFIX)
        for o in latest_orientations(store)
        if o.name.startswith(ORIENTATION_PREFIX)
    ]
