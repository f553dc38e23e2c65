"""Shared research memory: findings, their adoptions, and versioned skills and orientations.

Store-level queries and revisions only; the agent-facing tools that check a finding against
the records live in ``rsilab.expos.tools.memory``. Modules: ``findings`` (relevance, adoptions,
supersession), ``revisions`` (skills and orientations, each revision a new record),
``assignments`` (a team campaign's researchers and their orientations).
"""

from rsilab.memory.assignments import (
    ORIENTATION_PREFIX,
    RESEARCHER_PREFIX,
    assignments_of,
    current_assignments,
    orientation_named,
    require_team,
    researcher_orientations,
    team_members,
    team_size,
)
from rsilab.memory.builtin_skills import (
    VERIFY_SKILL,
    ensure_builtin_skills,
    fresh_seeds,
    seeds_revision,
    verify_code,
)
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
    "ORIENTATION_PREFIX",
    "RESEARCHER_PREFIX",
    "VERIFY_SKILL",
    "RankedFinding",
    "adoption_counts",
    "adoptions_of",
    "assignments_of",
    "current_assignments",
    "ensure_builtin_skills",
    "fresh_seeds",
    "lab_findings",
    "latest_orientation",
    "latest_orientations",
    "latest_skill",
    "latest_skills",
    "orientation_history",
    "orientation_named",
    "relevant_findings",
    "require_team",
    "researcher_orientations",
    "revise_orientation",
    "revise_skill",
    "seeds_revision",
    "skill_history",
    "superseded_by",
    "team_members",
    "team_size",
    "verify_code",
]
