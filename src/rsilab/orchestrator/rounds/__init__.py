"""Recursive improvement across rounds (``rsilab evolve``): see :mod:`.evolution`."""

from rsilab.orchestrator.rounds.evolution import (
    IMPROVER_ACTOR,
    EvolutionResult,
    EvolutionStop,
    ImproverEnd,
    ImproverJob,
    ImproverRunner,
    ImproverSpec,
    agent_tool_calls,
    parse_improver,
    round_campaigns,
    run_rounds,
)

__all__ = [
    "IMPROVER_ACTOR",
    "EvolutionResult",
    "EvolutionStop",
    "ImproverEnd",
    "ImproverJob",
    "ImproverRunner",
    "ImproverSpec",
    "agent_tool_calls",
    "parse_improver",
    "round_campaigns",
    "run_rounds",
]
