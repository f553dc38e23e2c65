"""A bearer token that lets a remote agent act in one role on one campaign over MCP/HTTP."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from rsilab.errors import ConflictError
from rsilab.records._base import Record, Role


class AgentToken(Record):
    """One bearer token: who holds it (actor), in which role, on which campaign, until when.

    The token itself is never stored, only the sha256 of its text; whoever holds the text is
    the actor in the role on the campaign (``campaign_id``), until ``expires_at`` or until it
    is revoked. Contract: only the revocation may be written after issue (``revoked_at`` and
    ``revoked_by``, once); a revoked token is finished and never changes again.
    """

    KIND: ClassVar[str] = "agent_token"
    PREFIX: ClassVar[str] = "tok"

    role: Role = Field(description="Role the holder acts in; an agent role.")
    actor: str = Field(description="Name recorded as the caller of every tool call it makes.")
    token_sha256: str = Field(description="sha256 (hex) of the token's text; the text is not kept.")
    expires_at: str = Field(description="When it stops being accepted, ISO-8601 UTC.")
    issued_by: str = Field(default="", description="Who issued it (a person's name or 'cli').")
    revoked_at: str | None = Field(default=None, description="When it was revoked, if it was.")
    revoked_by: str = Field(default="", description="Who revoked it.")

    _FIXED: ClassVar[tuple[str, ...]] = (
        "role",
        "actor",
        "token_sha256",
        "expires_at",
        "issued_by",
    )

    def is_finished(self) -> bool:
        """A revoked token is finished: it can never be accepted or changed again."""
        return self.revoked_at is not None

    def check_update(self, previous: Record) -> None:
        super().check_update(previous)
        assert isinstance(previous, AgentToken)
        for name in self._FIXED:
            if getattr(previous, name) != getattr(self, name):
                raise ConflictError(f"agent_token {self.id}: field {name!r} cannot change")

    def summary(self) -> str:
        state = "revoked" if self.revoked_at else f"until {self.expires_at}"
        return f"{self.id} {self.role} {self.actor} ({state})"
