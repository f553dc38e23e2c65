"""What a campaign runner keeps so that it can be resumed: its lease and its intents.

Both records have ids derived from their keys (like :func:`~rsilab.records.lineage_id`), so
two processes creating the same one conflict in the store instead of making two.
"""

from __future__ import annotations

import hashlib
from enum import StrEnum
from typing import Any, ClassVar

from pydantic import Field

from rsilab.errors import ConflictError
from rsilab.records._base import Model, Record


def _derived_id(prefix: str, *parts: str) -> str:
    digest = hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:12]
    return f"{prefix}-{digest}"


# --- Lease ------------------------------------------------------------------------------------


def lease_id(campaign_id: str) -> str:
    """The id of a campaign's lease: one per campaign, the same for every process."""
    return _derived_id(CampaignLease.PREFIX, campaign_id)


class LeaseHolder(Model):
    """The process that holds (or last held) a lease."""

    host: str = Field(description="Host name of the holder.")
    pid: int = Field(description="Process id on that host.")
    boot_id: str = Field(
        default="",
        description="Kernel boot id of the host ('' where unknown): a pid from "
        "another boot is certainly dead.",
    )
    token: str = Field(description="Random token of this acquisition; changes on every one.")


class CampaignLease(Record):
    """Who runs a campaign now. Taking it over is a compare-and-swap on ``rev``.

    A lease is free when ``released_at`` is set, when ``heartbeat_at`` is older than
    ``ttl_s`` (the holder stopped renewing), or when the holder is a process of this host
    that no longer exists. It never finishes: it is reused by the next holder.
    """

    KIND: ClassVar[str] = "lease"
    PREFIX: ClassVar[str] = "lease"

    holder: LeaseHolder = Field(description="Current (or last) holder.")
    acquired_at: str = Field(description="When the holder acquired it, ISO-8601 UTC.")
    heartbeat_at: str = Field(description="Last renewal by the holder, ISO-8601 UTC.")
    ttl_s: float = Field(gt=0, description="Seconds without a heartbeat after which it is free.")
    released_at: str | None = Field(default=None, description="When the holder let it go.")
    takeover: str = Field(
        default="", description="Why it was taken from a previous holder ('' if it was free)."
    )

    def model_post_init(self, __context: Any) -> None:
        if not self.id and self.campaign_id:
            self.id = lease_id(self.campaign_id)
        super().model_post_init(__context)

    def summary(self) -> str:
        state = "released" if self.released_at else f"held by {self.holder.host}:{self.holder.pid}"
        return f"{self.id} {self.campaign_id} [{state}]"


# --- Intents ----------------------------------------------------------------------------------


def intent_id(campaign_id: str, key: str) -> str:
    """The id of the intent keyed by (campaign, idempotency key)."""
    return _derived_id(Intent.PREFIX, campaign_id, key)


class IntentState(StrEnum):
    """Lifecycle of an intent; done and abandoned are final."""

    PENDING = "pending"
    DONE = "done"
    ABANDONED = "abandoned"

    def is_finished(self) -> bool:
        return self is not IntentState.PENDING


class Intent(Record):
    """A side effect a campaign runner is about to perform, written before it performs it.

    A pending intent found after a crash is work that may or may not have happened; a done
    one is work that must not be repeated (its ``result`` says what came of it).
    """

    KIND: ClassVar[str] = "intent"
    PREFIX: ClassVar[str] = "intent"

    key: str = Field(min_length=1, description="Idempotency key, unique in its campaign.")
    action: str = Field(description="What the side effect is, e.g. 'create_experiment'.")
    payload: dict[str, Any] = Field(default_factory=dict, description="Its arguments (JSON).")
    state: IntentState = Field(default=IntentState.PENDING, description="Lifecycle state.")
    result: dict[str, Any] | None = Field(
        default=None, description="What the side effect produced (JSON), once done."
    )
    attempts: int = Field(default=1, ge=1, description="Times the side effect was started.")
    reason: str = Field(default="", description="Why it was abandoned, if it was.")
    finished_at: str | None = Field(default=None, description="When it became final.")

    def model_post_init(self, __context: Any) -> None:
        if not self.id and self.campaign_id:
            self.id = intent_id(self.campaign_id, self.key)
        super().model_post_init(__context)

    def is_finished(self) -> bool:
        return self.state.is_finished()

    def check_update(self, previous: Record) -> None:
        super().check_update(previous)
        assert isinstance(previous, Intent)
        for name in ("key", "action", "payload"):
            if getattr(previous, name) != getattr(self, name):
                raise ConflictError(f"intent {self.id}: field {name!r} cannot change")
        if self.attempts < previous.attempts:
            raise ConflictError(f"intent {self.id}: attempts cannot go down")

    def summary(self) -> str:
        return f"{self.id} {self.key} {self.action} [{self.state}] attempt {self.attempts}"
