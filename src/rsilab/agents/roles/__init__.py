"""The roles of the research loop (RSI-Master): Main, Worker and Reviewer.

Each role has a built-in text (its system prompt) that seeds a versioned
:class:`~rsilab.records.Orientation` named ``role:<role>``; :func:`ensure_role_orientations`
stores the seeds once and returns the latest revision of each, which is what an agent runs on.
Researchers of a team (AReaL-RSI) get orientations the same way: :data:`TEAM_ORIENTATIONS`
seed ``orientation:<name>`` through :func:`ensure_team_orientations`.
"""

from rsilab.agents.roles._base import TOOL_RULES, RoleDefinition
from rsilab.agents.roles._orientations import ROLES, ensure_role_orientations
from rsilab.agents.roles._team import TEAM_ORIENTATIONS, ensure_team_orientations
from rsilab.agents.roles.leader import LEADER
from rsilab.agents.roles.main import MAIN
from rsilab.agents.roles.reviewer import REVIEWER
from rsilab.agents.roles.worker import WORKER
from rsilab.memory.revisions import latest_orientation

__all__ = [
    "LEADER",
    "MAIN",
    "REVIEWER",
    "ROLES",
    "TEAM_ORIENTATIONS",
    "TOOL_RULES",
    "WORKER",
    "RoleDefinition",
    "ensure_role_orientations",
    "ensure_team_orientations",
    "latest_orientation",
]
