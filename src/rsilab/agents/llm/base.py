"""The one interface every LLM client implements: messages in, one reply out.

:class:`ChatModel` owns what is the same for every provider (retries with backoff, pricing, the
token budget), so a provider client only translates messages and errors for one attempt
(:meth:`ChatModel._send`). Messages use one provider-neutral form, close to OpenAI's chat format:
tool calls ride on assistant messages and each tool result is a ``tool`` message naming the call.
"""

from __future__ import annotations

import json
import logging
import random
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Self

from pydantic import Field, model_validator

from rsilab.agents.llm.errors import LLMBudgetExceeded, LLMError
from rsilab.agents.llm.pricing import PriceTable, TokenBudget, Usage
from rsilab.errors import UserError
from rsilab.records import Model

_log = logging.getLogger(__name__)

Role = Literal["system", "user", "assistant", "tool"]


class ToolCall(Model):
    """One tool call as the model made it."""

    id: str = Field(description="The provider's id for the call; the tool result names it.")
    name: str = Field(description="The tool the model asked for (not checked against the specs).")
    arguments: str = Field(
        description="The arguments as raw JSON text, as the model sent it; may be malformed."
    )

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as a JSON object.

        Raises:
            ValueError: they are not valid JSON, or not an object; the message says which and
                can go back to the model as the tool result.
        """
        try:
            value = json.loads(self.arguments)
        except json.JSONDecodeError as exc:
            raise ValueError(f"arguments of {self.name!r} are not valid JSON: {exc}") from exc
        if not isinstance(value, dict):
            raise ValueError(f"arguments of {self.name!r} must be a JSON object")
        return value


class Message(Model):
    """One turn of a conversation, in the provider-neutral form.

    ``tool_calls`` is only for ``assistant`` messages; ``tool_call_id`` (required) and
    ``is_error`` only for ``tool`` messages, which carry one tool result each.
    """

    role: Role = Field(description="Who speaks: system, user, assistant, or a tool result.")
    content: str = Field(default="", description="The text; may be empty beside tool calls.")
    tool_calls: list[ToolCall] = Field(
        default_factory=list, description="Tool calls the assistant made in this turn."
    )
    tool_call_id: str | None = Field(
        default=None, description="For a tool result: the id of the call it answers."
    )
    is_error: bool = Field(
        default=False, description="For a tool result: the call failed (Anthropic marks it)."
    )

    @model_validator(mode="after")
    def _fits_role(self) -> Self:
        if self.tool_calls and self.role != "assistant":
            raise ValueError("only assistant messages carry tool_calls")
        if (self.role == "tool") != (self.tool_call_id is not None):
            raise ValueError("tool messages, and only they, need tool_call_id")
        return self


class ToolSpec(Model):
    """A tool offered to the model."""

    name: str = Field(description="The tool's name, as the model will call it.")
    description: str = Field(default="", description="What the tool does, for the model.")
    parameters: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}},
        description="JSON schema of the arguments object.",
    )


class ChatReply(Model):
    """What one :meth:`ChatModel.complete` call returned."""

    message: Message = Field(description="The assistant's message (role 'assistant').")
    usage: Usage = Field(description="Tokens of this call and their cost, where priced.")
    model: str = Field(description="The model that answered, as the provider named it.")
    finish_reason: str = Field(
        description="Why it stopped: 'stop', 'length', 'tool_calls', 'content_filter', "
        "or the provider's own word for anything else."
    )


@dataclass(frozen=True)
class RetryPolicy:
    """How transient failures (429, timeouts, 5xx, lost connections) are retried.

    Attempt ``n`` (1-based) that fails transiently is followed by a wait of
    ``min(max_delay_s, base_delay_s * 2 ** (n - 1))`` scaled by a random factor in
    ``[0.5, 1]`` (jitter, so many agents do not retry in step), but never less than a
    ``retry-after`` the server sent, up to ``max_delay_s``.
    """

    max_attempts: int = 4
    base_delay_s: float = 1.0
    max_delay_s: float = 60.0
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False)
    """How to wait; tests pass a recorder."""

    def __post_init__(self) -> None:
        if self.max_attempts < 1 or self.base_delay_s < 0 or self.max_delay_s < 0:
            raise ValueError("max_attempts must be >= 1 and delays >= 0")

    def delay_s(self, attempt: int, retry_after_s: float | None) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based)."""
        backoff = min(self.max_delay_s, self.base_delay_s * 2.0 ** (attempt - 1))
        backoff *= random.uniform(0.5, 1.0)
        if retry_after_s is not None:
            backoff = max(backoff, min(retry_after_s, self.max_delay_s))
        return backoff


@dataclass(frozen=True)
class FailedAttempt:
    """One attempt of :meth:`ChatModel.complete` that failed, as its ``on_failure`` hears it."""

    error: LLMError
    """What failed (its ``status`` is the HTTP status, when the provider answered)."""
    attempt: int
    """Which attempt of the call failed, from 1."""
    retry_in_s: float | None
    """The wait before the next attempt; None when there is none (the error is raised)."""


FailureHook = Callable[[FailedAttempt], None]
"""Told of every failed attempt, before the wait that follows it; runs on the calling thread."""


class ChatModel(ABC):
    """A chat model behind one provider's API.

    Contract:
        - :meth:`complete` sends the whole conversation and returns one assistant message.
        - Transient failures (rate limits, timeouts, 5xx, connection errors) are retried with
          exponential backoff and jitter (:class:`RetryPolicy`) up to ``max_attempts`` attempts
          in all; then the last error is raised, with ``attempts`` set. Other errors are raised
          at once. The SDKs' own retries are off, so both providers behave alike. Each failed
          attempt, the last one included, is told to the call's ``on_failure`` (with the wait
          before the retry), so a caller can record it.
        - Tool-call arguments come back as raw text, malformed or not; checking them is the
          agent loop's job, so a bad call can go back to the model as an error.
        - Every successful call is priced (:class:`PriceTable`; cost None when the model is
          unknown) and charged to the budget, if one is set. A budget may be shared by many
          models and threads; concurrent calls can overshoot it by the calls in flight.
        - ``complete`` may be called from several threads at once.
    """

    provider: str = "?"
    """Short provider name, the prefix of :attr:`name`."""

    def __init__(
        self,
        model: str,
        *,
        retry: RetryPolicy | None = None,
        prices: PriceTable | None = None,
        budget: TokenBudget | None = None,
    ) -> None:
        self.model = model
        self.retry = retry or RetryPolicy()
        self.prices = prices or PriceTable()
        self.budget = budget

    @property
    def name(self) -> str:
        """``provider:model``, the spec string that selects this model."""
        return f"{self.provider}:{self.model}"

    def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        *,
        max_tokens: int | None = None,
        on_failure: FailureHook | None = None,
    ) -> ChatReply:
        """The model's next message after ``messages``, offered ``tools``.

        Args:
            messages: the conversation so far; system messages anywhere are allowed.
            tools: the tools the model may call (none: a plain reply).
            max_tokens: cap on output tokens; None leaves the provider's (or client's) default.
            on_failure: told of each failed attempt (not of a spent budget); what it raises
                ends the call.

        Raises:
            LLMRateLimited: still rate limited after the last attempt.
            LLMTimeout: the last attempt timed out.
            LLMUnavailable: 5xx or no connection on the last attempt.
            LLMBadRequest: the provider refused the request (4xx other than 429); not retried.
            LLMBudgetExceeded: the budget was spent before the call, or this call overspent it
                (the reply is then on the error's ``reply``).
        """
        if self.budget is not None:
            self.budget.check()
        reply = self._with_retries(list(messages), list(tools), max_tokens, on_failure)
        usage = reply.usage.model_copy(
            update={"cost_usd": self.prices.cost(self.model, reply.usage, reply.model)}
        )
        reply = reply.model_copy(update={"usage": usage})
        if self.budget is not None:
            try:
                self.budget.charge(usage)
            except LLMBudgetExceeded as exc:
                exc.reply = reply
                raise
        return reply

    def _with_retries(
        self,
        messages: list[Message],
        tools: list[ToolSpec],
        max_tokens: int | None,
        on_failure: FailureHook | None,
    ) -> ChatReply:
        attempt = 0
        while True:
            attempt += 1
            try:
                return self._send(messages, tools, max_tokens)
            except LLMError as exc:
                exc.attempts = attempt
                final = not exc.retryable or attempt >= self.retry.max_attempts
                wait = None if final else self.retry.delay_s(attempt, exc.retry_after_s)
                if on_failure is not None:
                    on_failure(FailedAttempt(exc, attempt, wait))
                if wait is None:
                    raise
                _log.warning("%s: %s; retry %d in %.2fs", self.name, exc, attempt, wait)
                self.retry.sleep(wait)

    @abstractmethod
    def _send(
        self, messages: list[Message], tools: list[ToolSpec], max_tokens: int | None
    ) -> ChatReply:
        """One attempt, no retries; the reply's ``cost_usd`` is left None.

        Raises:
            LLMError: a subclass that says whether the failure is transient; SDK exceptions
                never escape.
        """

    @property
    def endpoint(self) -> str | None:
        """The URL the model is reached at (None: no network, e.g. a scripted model)."""
        return None

    def check_reachable(self, timeout_s: float = 5.0) -> None:
        """Raise UserError, saying what to do, when :attr:`endpoint` answers nothing at all;
        any HTTP answer (even 401 or 404) counts as reachable. Costs no tokens."""
        url = self.endpoint
        if url is None:
            return
        import urllib.error
        import urllib.request

        try:
            with urllib.request.urlopen(url, timeout=timeout_s):
                pass
        except urllib.error.HTTPError:
            return  # it answered
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise UserError(
                f"the LLM endpoint {url} of {self.name} cannot be reached: "
                f"{type(exc).__name__}: {exc}",
                "start the server, or fix base_url in the lab's [llm] table (or the "
                "provider's *_BASE_URL variable)",
            ) from None

    def close(self) -> None:  # noqa: B027 - optional hook; clients without resources skip it
        """Release connections; the model is unusable afterwards."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
