"""Guidance: a person's advice to a campaign's Main agent, and when the agent read it."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from rsilab.errors import ConflictError
from rsilab.records._base import Record


class Guidance(Record):
    """Expert guidance handed to a campaign; shown to the Main agent at its next planning step.

    Written once by a person (``read_at`` None), then once more when a planning step has read
    it; after that it never changes, so the ledger says exactly when which step saw it.
    """

    KIND: ClassVar[str] = "guidance"
    PREFIX: ClassVar[str] = "guide"

    text: str = Field(min_length=1, description="The guidance, as the person wrote it.")
    given_by: str = Field(default="", description="Who gave it (a person's name, 'cli').")
    read_at: str | None = Field(
        default=None, description="When a planning step read it, ISO-8601 UTC; None while unread."
    )
    read_by: str = Field(default="", description="The agent that read it ('' while unread).")

    def is_finished(self) -> bool:
        return self.read_at is not None

    def check_update(self, previous: Record) -> None:
        super().check_update(previous)
        assert isinstance(previous, Guidance)
        for name in ("text", "given_by"):
            if getattr(previous, name) != getattr(self, name):
                raise ConflictError(f"guidance {self.id}: field {name!r} cannot change")

    def summary(self) -> str:
        state = f"read by {self.read_by}" if self.read_at else "unread"
        return f"{self.id} {self.text[:50]!r} [{state}]"
