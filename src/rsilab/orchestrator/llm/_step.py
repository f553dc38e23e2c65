"""One agent step of an LLM campaign: an intent, a conversation, the budgets around it.

:class:`StepRunner` is what the LLM runner's rounds (:mod:`rsilab.orchestrator.llm.runner`)
use to run a role: :meth:`~StepRunner.begin` checks the lease and the campaign's token and
wall budgets and writes the step's intent; :meth:`~StepRunner.converse` runs the agent loop
with the role's stored orientation as system prompt and the campaign's budgets as the step's
limits; :meth:`~StepRunner.complete` stores what the step did. A step that cannot go on ends
the campaign's loop by raising :class:`Halt` with the state to record.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rsilab.agents.llm import ChatModel, Message
from rsilab.agents.loop import StepBudget, StepOutcome, StopReason, run_agent_step
from rsilab.agents.roles import ROLES, ensure_role_orientations
from rsilab.errors import NotFoundError
from rsilab.expos import CallContext
from rsilab.expos.services import LabServices
from rsilab.orchestrator.campaign import (
    ACTOR,
    DoneIntent,
    Ending,
    Intents,
    Progress,
    ProgressFn,
    StopRequest,
)
from rsilab.orchestrator.door import Door
from rsilab.orchestrator.llm._prompts import Left
from rsilab.orchestrator.llm._state import TokenMeter, experiment_count
from rsilab.records import CampaignState, EndReason, Intent, Role, intent_id
from rsilab.store import Lab
from rsilab.tasks import Budget

MAX_TURNS = {Role.MAIN: 30, Role.WORKER: 40, Role.REVIEWER: 20, Role.LEADER: 20}
"""LLM calls one step of each role may make."""
RESULT_TEXT_CHARS = 2000
"""How much of a step's closing answer its intent's result keeps."""


class Halt(Exception):
    """Ends the campaign's loop: the state to record, why, and the reason in words."""

    def __init__(self, state: CampaignState, reason: EndReason, message: str) -> None:
        super().__init__(message)
        self.ending = Ending(state, reason, message)


class StepRunner:
    """Runs the agent steps of one campaign; holds each actor's conversation in memory.

    Not thread-safe: steps run one at a time.
    """

    def __init__(
        self,
        lab: Lab,
        services: LabServices,
        campaign_id: str,
        budget: Budget,
        model: ChatModel,
        on_progress: ProgressFn | None,
        intents: Intents,
        stop: StopRequest,
    ) -> None:
        self.intents, self.stop = intents, stop
        self.store, self.campaign_id, self.budget, self.model = (
            lab.store,
            campaign_id,
            budget,
            model,
        )
        self.door = Door(lab, services, campaign_id, lab.path / "workspaces" / campaign_id)
        self.tokens = TokenMeter(lab.store, campaign_id)
        self.deadline = time.monotonic() + budget.wall_s
        self.on_progress = on_progress
        self.check: Callable[[], None] = lambda: None
        """Raises when the lease is lost; the loop sets it."""
        self.histories: dict[str, list[Message]] = {}
        orientations = ensure_role_orientations(lab.store, actor=ACTOR)
        self.systems = {r: orientations[d.orientation_name].text for r, d in ROLES.items()}

    # -- budgets -----------------------------------------------------------------------------

    def experiments(self) -> int:
        """Experiments the campaign has created."""
        return experiment_count(self.store, self.campaign_id)

    def left(self) -> Left:
        """What is left of the campaign's budget now."""
        return Left(
            experiments=max(0, self.budget.experiments - self.experiments()),
            experiments_allowed=self.budget.experiments,
            tokens=max(0, self.budget.tokens - self.tokens.used()),
            tokens_allowed=self.budget.tokens,
            wall_s=max(0.0, self.deadline - time.monotonic()),
        )

    def gate(self) -> None:
        """Halt unless the lease is still ours, no stop was asked for, and tokens and wall
        time are left.

        Tokens spent finish the campaign (its budget is final); a stop request (a person's
        Ctrl-C: the steps running finish first) or wall time passed stops it (resumable; a
        resume gets the wall budget afresh).
        """
        self.check()
        if self.stop.draining:
            raise Halt(
                CampaignState.STOPPED, EndReason.STOPPED_BY_USER, "stopped; resume to continue"
            )
        used = self.tokens.used()
        if used >= self.budget.tokens:
            raise Halt(
                CampaignState.FINISHED,
                EndReason.BUDGET_SPENT,
                f"token budget spent ({used} of {self.budget.tokens})",
            )
        if time.monotonic() > self.deadline:
            raise Halt(
                CampaignState.STOPPED,
                EndReason.WALL_BUDGET,
                "wall budget spent; resume to continue",
            )

    # -- a step --------------------------------------------------------------------------------

    def begin(self, key: str, action: str, payload: dict[str, Any]) -> Intent | DoneIntent:
        """:meth:`gate`, then the step's intent: pending to run now, or done before."""
        self.gate()
        return self.intents.begin(key, action, payload)

    def stored(self, key: str) -> Intent | None:
        """The intent of ``key`` if one was begun (by this run or one before it)."""
        try:
            return self.store.get_as(intent_id(self.campaign_id, key), Intent)
        except NotFoundError:
            return None

    def converse(self, actor: str, role: Role, prompt: str) -> StepOutcome:
        """Run ``actor``'s step in ``role`` on ``prompt``; its outcome.

        Workers work in their own workspace. Halts (stopped) when the LLM failed after the
        client's retries (``llm_unavailable`` when its endpoint was out of reach or
        overloaded, ``error`` when it refused the request) or the wall time ran out: the
        step's intent stays pending, so a resume runs it again.
        """
        workspace = self.door.workspace(actor) if role is Role.WORKER else None
        outcome = run_agent_step(
            self.model,
            self.door.expos,
            CallContext(actor, role, self.campaign_id, workspace),
            system=self.systems[role],
            task_prompt=prompt,
            budget=self._step_budget(),
            history=self.histories.get(actor),
            max_turns=MAX_TURNS[role],
        )
        self.histories[actor] = outcome.history
        failed = sum(1 for c in outcome.tool_calls if not c.ok)
        self.say(
            "agent",
            f"{actor}: {outcome.stop} after {outcome.turns} LLM calls, "
            f"{len(outcome.tool_calls)} tool calls ({failed} failed), {outcome.tokens} tokens",
        )
        if outcome.stop is StopReason.LLM_ERROR:
            out_of_reach = outcome.llm_error is not None and outcome.llm_error.retryable
            raise Halt(
                CampaignState.STOPPED,
                EndReason.LLM_UNAVAILABLE if out_of_reach else EndReason.ERROR,
                f"LLMError: the LLM failed in {actor}'s step: {outcome.detail}. Nothing is lost: "
                f"`rsilab resume {self.campaign_id}` runs the step again",
            )
        if outcome.stop is StopReason.CANCELLED:
            raise Halt(
                CampaignState.STOPPED,
                EndReason.STOPPED_BY_USER,
                "cancelled; resume to continue (the step runs again)",
            )
        if outcome.stop is StopReason.WALL_TIME:
            raise Halt(
                CampaignState.STOPPED,
                EndReason.WALL_BUDGET,
                "wall budget spent; resume to continue",
            )
        return outcome

    def complete(self, begun: Intent, outcome: StepOutcome, extra: dict[str, Any]) -> None:
        """Store what the step did (with ``extra``); halts (finished) when it spent the tokens."""
        result = {
            "stop": str(outcome.stop),
            "detail": outcome.detail,
            "turns": outcome.turns,
            "tool_calls": len(outcome.tool_calls),
            "failed_tool_calls": sum(1 for c in outcome.tool_calls if not c.ok),
            "tokens": outcome.tokens,
            "final_text": outcome.final_text[:RESULT_TEXT_CHARS],
            **extra,
        }
        self.intents.complete(begun, result)
        if outcome.stop is StopReason.BUDGET:
            used = self.tokens.used()
            raise Halt(
                CampaignState.FINISHED,
                EndReason.BUDGET_SPENT,
                f"token budget spent ({used} of {self.budget.tokens}): {outcome.detail}",
            )

    def skip(self, begun: Intent, why: str) -> None:
        """Complete a step that had nothing to do, without an LLM call."""
        self.intents.complete(begun, {"stop": "skipped", "detail": why})

    def _step_budget(self) -> StepBudget:
        left = self.left()
        return StepBudget(
            wall_s=left.wall_s,
            tokens=left.tokens,
            cancelled=lambda: self.stop.cancelling,
            experiments=lambda: (
                max(0, self.budget.experiments - self.experiments()),
                self.budget.experiments,
            ),
        )

    # -- progress ------------------------------------------------------------------------------

    def say(
        self, kind: str, message: str, score: float | None = None, best: float | None = None
    ) -> None:
        """Tell the progress callback, if there is one."""
        if self.on_progress is not None:
            self.on_progress(
                Progress(kind, message, self.experiments(), self.budget.experiments, score, best)
            )
