"""The built-in policy (no LLM): Main, Workers and a Reviewer (:mod:`.runner`), and a
research team of a Leader and researchers (:mod:`.team`). Each role decides from the records
(:mod:`rsilab.agents.builtin` holds the pure rules) and acts through the Experiment OS."""

from rsilab.orchestrator.builtin.ablation import Ablation
from rsilab.orchestrator.builtin.runner import BuiltinPolicy, run_campaign
from rsilab.orchestrator.builtin.team import TeamPolicy, TeamSettings, run_team_campaign

__all__ = [
    "Ablation",
    "BuiltinPolicy",
    "TeamPolicy",
    "TeamSettings",
    "run_campaign",
    "run_team_campaign",
]
