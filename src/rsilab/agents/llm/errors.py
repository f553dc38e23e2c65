"""Errors of LLM calls, one class per thing a caller does differently.

Transient errors (:class:`LLMRateLimited`, :class:`LLMTimeout`, :class:`LLMUnavailable`) are
retried by :class:`~rsilab.agents.llm.base.ChatModel` before they reach a caller; the rest are
raised at once. None of them is a :class:`~rsilab.errors.ToolError`: the agent does not see
them, the loop that drives the agent does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from rsilab.errors import RsilabError

if TYPE_CHECKING:
    from rsilab.agents.llm.base import ChatReply


class LLMError(RsilabError):
    """A call to an LLM failed.

    Attributes:
        status: the HTTP status, when the provider answered with one.
        retry_after_s: how long the provider asked us to wait, when it said.
        attempts: attempts made before this error was raised (set by ``ChatModel``).
    """

    retryable = False

    def __init__(
        self, message: str, *, status: int | None = None, retry_after_s: float | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after_s = retry_after_s
        self.attempts = 1

    def __str__(self) -> str:
        text = super().__str__()
        return f"{text} (after {self.attempts} attempts)" if self.attempts > 1 else text


class LLMRateLimited(LLMError):
    """HTTP 429: too many requests or tokens for now."""

    retryable = True


class LLMTimeout(LLMError):
    """No answer within the client's timeout."""

    retryable = True


class LLMUnavailable(LLMError):
    """The service failed (5xx), could not be reached, or answered with something unusable."""

    retryable = True


class LLMBadRequest(LLMError):
    """The provider refused the request (4xx other than 429: bad input, key, model or access)."""


class LLMBudgetExceeded(LLMError):
    """The token or USD budget is spent.

    Attributes:
        reply: the reply of the call that overspent, when one did (its usage is already
            charged and should still be recorded); None when the call was refused up front.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.reply: ChatReply | None = None


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """The wait a response asked for: ``retry-after-ms``, else ``retry-after`` in seconds.

    The HTTP-date form of ``retry-after`` is ignored; the backoff covers it.
    """
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        try:
            return max(0.0, float(headers.get(name, "")) * scale)
        except ValueError:
            continue
    return None


def error_for_status(status: int, message: str, headers: Mapping[str, str]) -> LLMError:
    """The error class an HTTP error status belongs to (429 and 5xx are transient)."""
    if status == 429:
        return LLMRateLimited(message, status=status, retry_after_s=retry_after_s(headers))
    if status == 408:
        return LLMTimeout(message, status=status)
    if status >= 500:
        return LLMUnavailable(message, status=status, retry_after_s=retry_after_s(headers))
    return LLMBadRequest(message, status=status)
