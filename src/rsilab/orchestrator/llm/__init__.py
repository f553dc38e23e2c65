"""LLM agents in a campaign: Main, Worker and Reviewer steps (:mod:`.runner`), and a team of
a Leader and researchers (:mod:`.team`), each role a chat model acting through the tools."""

from rsilab.orchestrator.llm.runner import MAX_IDLE_ROUNDS, LlmPolicy, run_llm_campaign
from rsilab.orchestrator.llm.team import LlmTeamPolicy, run_llm_team_campaign

__all__ = [
    "MAX_IDLE_ROUNDS",
    "LlmPolicy",
    "LlmTeamPolicy",
    "run_llm_campaign",
    "run_llm_team_campaign",
]
