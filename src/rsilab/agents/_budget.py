"""The limits of one agent step, and the footer that tells the agent what is left of them.

Agents are never stopped without warning: every tool result carries a short JSON footer with
what is left of each known limit, and once any of them is down to :data:`WRAP_UP_FRACTION`
the footer also tells the agent to wrap up and record its state.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rsilab.agents.llm import TokenBudget, Usage

WRAP_UP_FRACTION = 0.10
"""At or below this fraction of any limit left, the footer asks the agent to wrap up."""

FOOTER_KEY = "budget_left"
"""Top-level key of the footer's JSON object (the footer is the last line of a tool result)."""

ExperimentCount = Callable[[], tuple[int, int]]
"""Returns (experiments left, experiments allowed in all) for the agent's campaign."""


@dataclass(frozen=True)
class StepBudget:
    """Limits of one agent step; None means no limit of that kind.

    Attributes:
        wall_s: seconds the step may run, counted from its start. Checked before each LLM
            call; a tool call already running is not interrupted.
        tokens: tokens (in + out) this step's own LLM calls may use. The model's
            :class:`TokenBudget`, when it has one, is a separate (usually campaign-wide) cap;
            the footer reports whichever leaves less.
        experiments: asked at each footer for (left, allowed) experiments; the orchestrator
            knows them, the loop does not. Running out does not end the step (the agent can
            still read, review and record), it only shows in the footer.
        clock: monotonic seconds; tests pass their own.
        cancelled: asked before each LLM call; True ends the step at once (a person's
            second Ctrl-C), without waiting for its other limits.
    """

    wall_s: float | None = None
    tokens: int | None = None
    experiments: ExperimentCount | None = None
    clock: Callable[[], float] = field(default=time.monotonic, compare=False)
    cancelled: Callable[[], bool] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if (self.wall_s is not None and self.wall_s < 0) or (
            self.tokens is not None and self.tokens < 0
        ):
            raise ValueError("wall_s and tokens must be >= 0")


class Meter:
    """What one step has used so far, against its :class:`StepBudget` and ``max_turns``."""

    def __init__(
        self, budget: StepBudget, max_turns: int, model_budget: TokenBudget | None
    ) -> None:
        self.budget = budget
        self.max_turns = max_turns
        self.model_budget = model_budget
        self.started = budget.clock()
        self.turns = 0
        self.tokens_in = 0
        self.tokens_out = 0
        self.cost_usd = 0.0

    def charge(self, usage: Usage) -> None:
        """Count one LLM call's usage against the step."""
        self.tokens_in += usage.tokens_in
        self.tokens_out += usage.tokens_out
        self.cost_usd += usage.cost_usd or 0.0

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out

    def elapsed_s(self) -> float:
        return self.budget.clock() - self.started

    def out_of(self) -> str | None:
        """Which hard limit of the step is spent ('cancelled', 'wall_time', 'budget',
        'max_turns'), if any.

        The model's own TokenBudget is not checked here: the model refuses the call itself.
        """
        if self.budget.cancelled is not None and self.budget.cancelled():
            return "cancelled"
        if self.budget.wall_s is not None and self.elapsed_s() >= self.budget.wall_s:
            return "wall_time"
        if self.budget.tokens is not None and self.tokens >= self.budget.tokens:
            return "budget"
        if self.turns >= self.max_turns:
            return "max_turns"
        return None

    def _left(self) -> dict[str, tuple[float, float]]:
        """Each known limit as (left, allowed)."""
        left: dict[str, tuple[float, float]] = {}
        if self.budget.wall_s is not None:
            left["wall_s"] = (max(0.0, self.budget.wall_s - self.elapsed_s()), self.budget.wall_s)
        tokens: list[tuple[float, float]] = []
        if self.budget.tokens is not None:
            tokens.append((max(0, self.budget.tokens - self.tokens), self.budget.tokens))
        shared = self.model_budget
        if shared is not None:
            tokens.append((max(0, shared.max_tokens - shared.tokens_used), shared.max_tokens))
            if shared.max_usd is not None:
                left["usd"] = (max(0.0, shared.max_usd - shared.usd_used), shared.max_usd)
        if tokens:
            left["tokens"] = min(tokens, key=_fraction)
        left["turns"] = (max(0, self.max_turns - self.turns), self.max_turns)
        if self.budget.experiments is not None:
            remaining, allowed = self.budget.experiments()
            left["experiments"] = (remaining, allowed)
        return left

    def footer(self) -> str:
        """The one-line JSON footer of a tool result: what is left, and a wrap-up note if due."""
        left = self._left()
        shown: dict[str, Any] = {
            name: round(value, 1) if name == "wall_s" else _number(value)
            for name, (value, _allowed) in left.items()
        }
        payload: dict[str, Any] = {FOOTER_KEY: shown}
        low = [name for name, pair in left.items() if _fraction(pair) <= WRAP_UP_FRACTION]
        if low:
            payload["wrap_up"] = (
                f"10% or less of your {', '.join(low)} is left: wrap up now. Record your state "
                "(log metrics, finish or describe open experiments), then end your step with a "
                "plain answer saying what you did and what should come next."
            )
        return json.dumps(payload, ensure_ascii=False)


def _fraction(pair: tuple[float, float]) -> float:
    left, allowed = pair
    return left / allowed if allowed > 0 else 0.0


def _number(value: float) -> float | int:
    return int(value) if float(value).is_integer() else round(value, 4)
