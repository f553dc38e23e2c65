"""A built-in research team: a Leader and N researchers (see :mod:`.policy`)."""

from rsilab.orchestrator.builtin.team.policy import (
    MAX_REFERENCE_RUNS,
    TeamPolicy,
    TeamSettings,
    run_team_campaign,
)

__all__ = ["MAX_REFERENCE_RUNS", "TeamPolicy", "TeamSettings", "run_team_campaign"]
