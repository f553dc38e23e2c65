"""The agent loop: one role, one step, its tools, until it answers or a limit hits.

:func:`run_agent_step` drives a :class:`~rsilab.agents.llm.ChatModel` against the Experiment OS
tools its role may call. Every tool call goes through :meth:`ExperimentOS.call`, so role
checks, guards and the ledger apply exactly as for any other caller; the loop adds what only a
conversation needs: tool-result messages with a budget footer, a ledger event per LLM call,
history compaction, and a clean stop when time or tokens run out.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from rsilab.agents._budget import FOOTER_KEY, WRAP_UP_FRACTION, Meter, StepBudget
from rsilab.agents._compact import (
    SUMMARY_INSTRUCTION,
    SUMMARY_MAX_CHARS,
    estimate_tokens,
    fallback_summary,
    split_for_summary,
    summary_message,
)
from rsilab.agents.llm import (
    ChatModel,
    ChatReply,
    FailedAttempt,
    LLMBadRequest,
    LLMBudgetExceeded,
    LLMError,
    LLMRateLimited,
    LLMTimeout,
    LLMUnavailable,
    Message,
    ToolCall,
    ToolSpec,
)
from rsilab.expos import CallContext, ExperimentOS
from rsilab.records import EventDraft, Outcome, Resources, Role

log = logging.getLogger(__name__)

DEFAULT_COMPACT_AT_TOKENS = 60_000
"""Estimated history size (characters / 4) above which older turns are summarised."""


class StopReason(StrEnum):
    """Why a step ended."""

    DONE = "done"
    """The model answered without tool calls: its step is finished."""
    BUDGET = "budget"
    """Tokens or USD are spent (the step's own cap, or the model's :class:`TokenBudget`)."""
    WALL_TIME = "wall_time"
    """The step's wall-clock limit passed."""
    MAX_TURNS = "max_turns"
    """The model was called ``max_turns`` times and still wanted tools."""
    LLM_ERROR = "llm_error"
    """The model could not be reached or refused the request, after retries."""
    CANCELLED = "cancelled"
    """The step was cancelled (the budget's ``cancelled`` said so) before its next LLM call."""


@dataclass(frozen=True)
class ToolCallRecord:
    """One tool call of the step, as the dispatcher answered it."""

    name: str
    ok: bool
    error: str | None = None
    """The ToolError code when it failed ('unknown_tool', 'permission_denied', ...)."""
    seq: int | None = None
    """Sequence of the call's ledger event (None only when the lab could not record it)."""


@dataclass(frozen=True)
class StepOutcome:
    """What one step did and why it stopped.

    ``history`` is the conversation after the system prompt, ending in a consistent place
    (no tool call without its result); pass it as ``history`` to continue in a later step.
    """

    stop: StopReason
    detail: str
    turns: int
    tool_calls: tuple[ToolCallRecord, ...]
    final_text: str
    tokens_in: int
    tokens_out: int
    cost_usd: float
    history: list[Message]
    llm_error: LLMError | None = None
    """For ``llm_error``: the error the last attempt raised (``retryable`` says whether the
    endpoint was out of reach or overloaded rather than refusing the request)."""

    @property
    def tokens(self) -> int:
        """Tokens (in + out) of every LLM call of the step, summaries included."""
        return self.tokens_in + self.tokens_out


def tool_specs(expos: ExperimentOS, role: Role) -> list[ToolSpec]:
    """The tools ``role`` may call, as the model is offered them (schemas from the registry)."""
    return [
        ToolSpec(name=t.name, description=t.description, parameters=t.input_schema())
        for t in expos.tools_for(role)
    ]


def run_agent_step(
    model: ChatModel,
    expos: ExperimentOS,
    ctx: CallContext,
    *,
    system: str,
    task_prompt: str,
    budget: StepBudget | None = None,
    history: Sequence[Message] | None = None,
    max_turns: int = 30,
    compact_at_tokens: int = DEFAULT_COMPACT_AT_TOKENS,
) -> StepOutcome:
    """Run one step of the agent ``ctx.actor`` in ``ctx.role`` until it answers without tools.

    The model sees ``system`` (the role's stored orientation text), then ``history`` (a previous
    outcome's ``history``, if any), then ``task_prompt`` as a user turn, and is offered the tools
    its role may call (:func:`tool_specs`).

    Contract:
        - A turn is one LLM call; its tool calls are all run, in order, through
          ``expos.call`` (role check, validation, guards, one ``tool_call`` ledger event each).
          Failures of any kind -- malformed (non-JSON) arguments, unknown tools, tools the role
          may not call (the dispatcher also records a protocol flag), invalid arguments --
          go back to the model as error tool results holding the ToolError JSON; nothing here
          raises for what the model sends.
        - Every tool result ends with one line of JSON (key ``budget_left``): wall seconds,
          tokens (and USD) and turns left, and experiments left when ``budget.experiments``
          says; at 10% or less of any of them it adds ``wrap_up``, telling the agent to record
          its state and finish.
        - Every LLM call that returned is recorded as a ledger event: action ``llm_call``,
          the context's actor, role and campaign, ``cost`` = the call's tokens, USD and wall
          seconds, ``detail`` = model name, the name the provider answered with and the finish
          reason. An overspending call (LLMBudgetExceeded with a reply) is recorded too.
        - Every failed attempt of an LLM call (429, 5xx, timeout, no connection, a refused
          request), retried or not, is a ledger event too: action ``llm_attempt_failed``,
          outcome ``error``, ``error`` = {``error``: ``llm_rate_limited`` / ``llm_unavailable``
          / ``llm_timeout`` / ``llm_bad_request`` / ``llm_error``, ``message``, ``status``
          (the HTTP status or None), ``attempt`` (from 1), ``retry_in_s`` (the wait before
          the next attempt; None when the call gave up)}.
        - Before each turn, a history estimated (characters / 4) above ``compact_at_tokens``
          is compacted: one extra LLM call asks the model to summarise its progress, older
          turns are replaced by that summary (the task is restated after it), and the summary
          is kept as a ledger event, action ``agent_summary``, whose ``detail`` holds its first
          2,000 characters.
        - Limits end the step cleanly, never by an exception: the model's TokenBudget or
          ``budget.tokens`` spent -> ``budget``; ``budget.wall_s`` passed -> ``wall_time``
          (checked between turns); ``max_turns`` LLM calls -> ``max_turns``; any other
          LLMError (after the client's retries) -> ``llm_error``.

    Raises:
        RsilabError: the lab could not record an LLM call or a summary (the ledger must hold
            every call, so the step does not go on without it).
        ValueError: ``max_turns`` is below 1.
    """
    if max_turns < 1:
        raise ValueError("max_turns must be >= 1")
    step = _Step(
        model, expos, ctx, budget or StepBudget(), max_turns, compact_at_tokens, task_prompt
    )
    return step.run(system, list(history or ()))


@dataclass(frozen=True)
class _Stopped:
    """An LLM call that ends the step; ``reply`` is an overspending reply, already recorded."""

    reason: StopReason
    detail: str
    reply: ChatReply | None = None
    error: LLMError | None = None


class _Step:
    """The state of one running step; :func:`run_agent_step` is its only user."""

    def __init__(
        self,
        model: ChatModel,
        expos: ExperimentOS,
        ctx: CallContext,
        budget: StepBudget,
        max_turns: int,
        compact_at_tokens: int,
        task_prompt: str,
    ) -> None:
        self.model = model
        self.expos = expos
        self.ctx = ctx
        self.meter = Meter(budget, max_turns, model.budget)
        self.compact_at = compact_at_tokens
        self.task_prompt = task_prompt
        self.tools = tool_specs(expos, ctx.role)
        self.calls: list[ToolCallRecord] = []
        self.final_text = ""

    def run(self, system: str, history: list[Message]) -> StepOutcome:
        messages = [Message(role="system", content=system), *history]
        messages.append(Message(role="user", content=self.task_prompt))
        while True:
            spent = self.meter.out_of()
            if spent is not None:
                return self._outcome(messages, StopReason(spent), _LIMIT_WORDS[spent])
            if estimate_tokens(messages) > self.compact_at:
                compacted = self._compact(messages)
                if isinstance(compacted, _Stopped):
                    return self._outcome(
                        messages, compacted.reason, compacted.detail, compacted.error
                    )
                messages = compacted
            reply = self._call(messages, purpose="turn")
            if isinstance(reply, _Stopped):
                if reply.reply is not None:  # a turn that overspent: paid for, so it counts
                    self._answered(messages, reply.reply, keep=not reply.reply.message.tool_calls)
                return self._outcome(messages, reply.reason, reply.detail, reply.error)
            self._answered(messages, reply)
            if not reply.message.tool_calls:
                return self._outcome(messages, StopReason.DONE, "the model ended its step")
            messages.extend(self._run_tool(call) for call in reply.message.tool_calls)

    def _answered(self, messages: list[Message], reply: ChatReply, *, keep: bool = True) -> None:
        """Count a turn; ``keep`` it in the history (not a call whose tools will never run)."""
        self.meter.turns += 1
        if not keep:
            return
        messages.append(reply.message)
        if reply.message.content or not reply.message.tool_calls:
            self.final_text = reply.message.content

    # -- LLM calls -----------------------------------------------------------------------------

    def _call(self, messages: list[Message], *, purpose: str) -> ChatReply | _Stopped:
        """One LLM call, recorded in the ledger; a :class:`_Stopped` when it ends the step."""
        started = time.perf_counter()
        try:
            reply = self.model.complete(messages, self.tools, on_failure=self._record_failure)
        except LLMBudgetExceeded as exc:
            if exc.reply is not None:  # it was charged: the ledger must show it
                self._record_call(exc.reply, purpose, time.perf_counter() - started)
            return _Stopped(StopReason.BUDGET, str(exc), exc.reply)
        except LLMError as exc:
            log.warning("%s (%s): LLM call failed: %s", self.ctx.actor, self.ctx.role, exc)
            return _Stopped(StopReason.LLM_ERROR, str(exc), error=exc)
        self._record_call(reply, purpose, time.perf_counter() - started)
        return reply

    def _record_call(self, reply: ChatReply, purpose: str, wall_s: float) -> None:
        self.meter.charge(reply.usage)
        cost = reply.usage.to_resources().model_copy(update={"wall_s": round(wall_s, 6)})
        self._commit(
            "llm_call",
            f"{self.model.name} ({reply.model}): {reply.finish_reason}; {purpose}",
            cost,
        )

    def _record_failure(self, failed: FailedAttempt) -> None:
        """A failed attempt as an ``llm_attempt_failed`` event (see :func:`run_agent_step`)."""
        exc, wait = failed.error, failed.retry_in_s
        status = f"HTTP {exc.status}" if exc.status is not None else "no HTTP status"
        then = f"retry in {wait:.2f}s" if wait is not None else "no retry"
        payload: dict[str, Any] = {
            "error": _error_code(exc),
            "message": str(exc),
            "status": exc.status,
            "attempt": failed.attempt,
            "retry_in_s": None if wait is None else round(wait, 3),
        }
        detail = f"{self.model.name}: attempt {failed.attempt} failed ({status}); {then}"
        self._commit("llm_attempt_failed", detail, outcome=Outcome.ERROR, error=payload)

    def _commit(
        self,
        action: str,
        detail: str,
        cost: Resources | None = None,
        *,
        outcome: Outcome = Outcome.OK,
        error: dict[str, Any] | None = None,
    ) -> None:
        self.expos.store.commit(
            EventDraft(
                actor=self.ctx.actor,
                role=str(self.ctx.role),
                action=action,
                campaign_id=self.ctx.campaign_id,
                detail=detail,
                cost=cost,
                outcome=outcome,
                error=error,
            )
        )

    # -- tools ---------------------------------------------------------------------------------

    def _run_tool(self, call: ToolCall) -> Message:
        """Dispatch one tool call; its result message, with the budget footer."""
        # The raw text goes to the dispatcher, which parses it, so a malformed call is
        # recorded in the ledger like any other failed call.
        result = self.expos.call(self.ctx, call.name, call.arguments)
        payload = result.to_dict()
        if result.error is not None and result.error.code == "invalid_arguments":
            try:
                call.parsed_arguments()
            except ValueError as exc:  # the dispatcher's message does not say where it broke
                payload["detail"] = str(exc)
        error = result.error.code if result.error is not None else None
        self.calls.append(ToolCallRecord(result.tool, result.ok, error, result.seq))
        content = json.dumps(payload, ensure_ascii=False) + "\n" + self.meter.footer()
        return Message(role="tool", tool_call_id=call.id, content=content, is_error=not result.ok)

    # -- compaction ----------------------------------------------------------------------------

    def _compact(self, messages: list[Message]) -> list[Message] | _Stopped:
        """``messages`` with older turns replaced by the model's summary (or unchanged)."""
        body = messages[1:]
        cut = split_for_summary(body, self.compact_at // 2)
        if cut is None:
            return messages
        # The tools are still offered, though not wanted: Anthropic refuses a history that
        # holds tool calls when the request defines no tools.
        asking = [*messages, Message(role="user", content=SUMMARY_INSTRUCTION)]
        reply = self._call(asking, purpose="summary")
        if isinstance(reply, _Stopped):
            return reply
        summary = reply.message.content.strip() or fallback_summary(body[:cut])
        self._commit("agent_summary", summary[:SUMMARY_MAX_CHARS])
        return [messages[0], summary_message(summary, self.task_prompt), *body[cut:]]

    def _outcome(
        self,
        messages: list[Message],
        stop: StopReason,
        detail: str,
        error: LLMError | None = None,
    ) -> StepOutcome:
        return StepOutcome(
            stop=stop,
            detail=detail,
            turns=self.meter.turns,
            tool_calls=tuple(self.calls),
            final_text=self.final_text,
            tokens_in=self.meter.tokens_in,
            tokens_out=self.meter.tokens_out,
            cost_usd=self.meter.cost_usd,
            history=messages[1:],
            llm_error=error,
        )


def _error_code(exc: LLMError) -> str:
    """The stable code of a failed attempt's error, for its ledger event."""
    for kind, code in _ERROR_CODES:
        if isinstance(exc, kind):
            return code
    return "llm_error"


_ERROR_CODES: tuple[tuple[type[LLMError], str], ...] = (
    (LLMRateLimited, "llm_rate_limited"),
    (LLMTimeout, "llm_timeout"),
    (LLMUnavailable, "llm_unavailable"),
    (LLMBadRequest, "llm_bad_request"),
)


_LIMIT_WORDS = {
    "cancelled": "the step was cancelled",
    "wall_time": "the step's wall-clock time is spent",
    "budget": "the step's token budget is spent",
    "max_turns": "the step reached its turn limit",
}

__all__ = [
    "DEFAULT_COMPACT_AT_TOKENS",
    "FOOTER_KEY",
    "WRAP_UP_FRACTION",
    "StepBudget",
    "StepOutcome",
    "StopReason",
    "ToolCallRecord",
    "run_agent_step",
    "tool_specs",
]
