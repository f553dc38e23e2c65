"""The ledger's event shapes."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field

from rsilab.records._base import Model
from rsilab.records._research import Resources

# --- Ledger -----------------------------------------------------------------------------------


class RecordRef(Model):
    """A record written in the same transaction as an event, with the digest of its text."""

    kind: str = Field(description="Record kind.")
    id: str = Field(description="Record id.")
    rev: int = Field(description="Revision written.")
    digest: str = Field(description="sha256 of the record's canonical JSON text.")


class Outcome(StrEnum):
    """How a call or change ended."""

    OK = "ok"
    ERROR = "error"
    DENIED = "denied"


class EventDraft(Model):
    """What a caller says about a change; the ledger adds sequence, time and hashes."""

    actor: str = Field(description="Who acted (agent name, 'cli', 'controller').")
    role: str = Field(description="Role the actor held.")
    action: str = Field(description="'tool_call', 'campaign_created', 'lab_created', ...")
    campaign_id: str | None = Field(default=None, description="Campaign concerned.")
    tool: str | None = Field(default=None, description="Tool called, for tool calls.")
    args_digest: str | None = Field(default=None, description="sha256 of the canonical args.")
    outcome: Outcome = Field(default=Outcome.OK, description="ok, error or denied.")
    error: dict[str, Any] | None = Field(default=None, description="ToolError payload if any.")
    detail: str = Field(default="", description="Short human-readable note.")
    cost: Resources | None = Field(default=None, description="Resources the action used.")


class Event(EventDraft):
    """One line of the append-only, hash-chained ledger."""

    seq: int = Field(description="Gap-free sequence number, from 1.")
    at: str = Field(description="When it was appended, ISO-8601 UTC.")
    records: list[RecordRef] = Field(default_factory=list, description="Records written with it.")
    prev_hash: str = Field(description="Hash of the previous event ('0'*64 for the first).")
