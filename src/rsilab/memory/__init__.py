"""Shared research memory: findings, their adoptions, and versioned skills and orientations.

Store-level queries and revisions only; the agent-facing tools that check a finding against
the records live in ``rsilab.expos.tools.memory``. Modules: ``findings`` (relevance, adoptions,
supersession), ``revisions`` (skills and orientations, each revision a new record).
"""

from rsilab.memory.findings import (
    RankedFinding,
    adoption_counts,
    adoptions_of,
    lab_findings,
    relevant_findings,
    superseded_by,
)
from rsilab.memory.revisions import (
    latest_orientation,
    latest_orientations,
    latest_skill,
    latest_skills,
    orientation_history,
    revise_orientation,
    revise_skill,
    skill_history,
)

__all__ = [
    "RankedFinding",
    "adoption_counts",
    "adoptions_of",
    "lab_findings",
    "latest_orientation",
    "latest_orientations",
    "latest_skill",
    "latest_skills",
    "orientation_history",
    "relevant_findings",
    "revise_orientation",
    "revise_skill",
    "skill_history",
    "superseded_by",
]
