"""A Main step that says something but does nothing is asked again before the campaign gives up.

A model's first answer is sometimes only text ("I will start by exploring..."). With no
direction open, ending the step there would end the campaign for good with nothing run, so
:func:`converse_main` asks again, up to :data:`MAIN_NUDGES` times, then stops the campaign
(``agent_silent``, resumable) with the step left pending, to run again on resume.
"""

from __future__ import annotations

from rsilab.agents.loop import StepOutcome
from rsilab.orchestrator.llm._step import Halt, StepRunner
from rsilab.orchestrator.research.dag import ResearchDag
from rsilab.records import CampaignState, EndReason, Role
from rsilab.store import Store

MAIN = "main"
MAIN_NUDGES = 2
"""Times a Main step that made no tool call and left no open direction is asked again."""
NUDGE = (
    "You answered without calling any tool, and the campaign has no open direction, so "
    "nothing can run. Act through the tools: open a direction with create_direction (or "
    "reopen one), then name the directions to work on."
)


def converse_main(steps: StepRunner, store: Store, campaign_id: str, prompt: str) -> StepOutcome:
    """The Main step's conversation on ``prompt``, asked again with :data:`NUDGE` while it
    has made no tool call and no direction is open.

    Raises:
        Halt: stopped (``agent_silent``) when it is still silent after :data:`MAIN_NUDGES`
            more turns; or what :meth:`StepRunner.converse` and :meth:`StepRunner.gate` raise.
    """
    outcome = steps.converse(MAIN, Role.MAIN, prompt)
    calls = len(outcome.tool_calls)
    for _ in range(MAIN_NUDGES):
        if calls or _has_open_direction(store, campaign_id):
            return outcome
        steps.say("agent", "main: no tool call and no open direction; asking again")
        steps.gate()
        outcome = steps.converse(MAIN, Role.MAIN, NUDGE)
        calls += len(outcome.tool_calls)
    if calls or _has_open_direction(store, campaign_id):
        return outcome
    raise Halt(
        CampaignState.STOPPED,
        EndReason.AGENT_SILENT,
        f"the Main agent made no tool call, even when asked {MAIN_NUDGES} more times, and no "
        f"direction is open; give guidance with `rsilab guide {campaign_id} TEXT` and resume "
        "(its step runs again)",
    )


def _has_open_direction(store: Store, campaign_id: str) -> bool:
    return bool(ResearchDag.load(store, campaign_id).frontier())
