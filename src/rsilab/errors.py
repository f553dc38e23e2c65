"""The error hierarchy: one root, split by who reads the message.

- :class:`ToolError` goes back to the agent that made a tool call; the campaign goes on.
- :class:`UserError` is printed to a person, one line plus a hint, without a traceback.
- :class:`NotFoundError` and :class:`ConflictError` are raised by the store; the tool
  dispatcher turns them into :class:`ToolError` and the CLI into :class:`UserError`.
- Anything else that escapes is a bug.
"""

from __future__ import annotations

from typing import Any


class RsilabError(Exception):
    """Root of every error rsilab raises on purpose."""


class UserError(RsilabError):
    """A problem a person can fix: the message says what is wrong, the hint what to do."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} (hint: {self.hint})" if self.hint else self.message


class LabError(UserError):
    """The lab folder or its database cannot be used as it is (missing, corrupt, newer, full)."""


class LabDamaged(LabError):
    """The lab's database is damaged: pages SQLite cannot read, or a stored row that does not
    parse. ``table`` and ``row`` name where, when that is known; ``rsilab verify`` reports it
    as a verification failure, and the cure is a backup."""

    def __init__(
        self, message: str, hint: str = "", *, table: str | None = None, row: str | None = None
    ) -> None:
        super().__init__(message, hint)
        self.table = table
        self.row = row


class NotFoundError(RsilabError):
    """A record, artifact or event that was asked for does not exist."""

    def __init__(self, what: str, ident: str) -> None:
        super().__init__(f"{what} {ident!r} not found")
        self.what = what
        self.ident = ident


class ConflictError(RsilabError):
    """A write breaks a record contract (finished records are immutable, revisions must match)."""


class ToolError(RsilabError):
    """A tool call that failed; the agent sees :meth:`to_dict` and may try again.

    Attributes:
        code: a stable machine-readable reason: ``unknown_tool``, ``permission_denied``
            (the role may not call the tool), ``invalid_arguments``, ``not_found``,
            ``conflict``, ``guard_refused`` (a protocol guard refused), ``no_campaign``,
            ``tool_failed``, ``budget_exhausted`` (the campaign's budget is spent),
            ``lab_unavailable`` (the lab could not record the call), ``rate_limited`` (a
            caller polled too fast; the message says when to retry) and
            ``internal_error`` (a bug in rsilab).
        message: what went wrong, in words an LLM can act on.
        field: the argument at fault, as a dotted path, when there is one.
        expected: what that argument should have been.
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        field: str | None = None,
        expected: str | None = None,
        details: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field
        self.expected = expected
        self.details = details or []

    def to_dict(self) -> dict[str, Any]:
        """The JSON-safe form sent to agents and stored in the ledger."""
        out: dict[str, Any] = {"error": self.code, "message": self.message}
        if self.field is not None:
            out["field"] = self.field
        if self.expected is not None:
            out["expected"] = self.expected
        if self.details:
            out["details"] = self.details
        return out
