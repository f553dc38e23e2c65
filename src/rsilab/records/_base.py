"""Base of every record: ids, timestamps, roles, revisions and update contracts."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from rsilab.errors import ConflictError

SCHEMA_VERSION = 3
"""Version of the record shapes and of the database layout; bumped with a migration."""


def utc_now() -> str:
    """The current time as an ISO-8601 UTC string with microseconds (what records store)."""
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def new_id(prefix: str) -> str:
    """A fresh record id: the kind's prefix and 12 random hex digits, e.g. ``exp-3fa9c2d1b07e``."""
    return f"{prefix}-{secrets.token_hex(6)}"


class Model(BaseModel):
    """Base of all models: unknown fields are refused so typos never pass silently."""

    model_config = ConfigDict(extra="forbid", validate_assignment=False)


class Role(StrEnum):
    """Who is calling. Agents: main, worker, reviewer, leader. Principals: controller, human."""

    MAIN = "main"
    WORKER = "worker"
    REVIEWER = "reviewer"
    LEADER = "leader"
    CONTROLLER = "controller"
    HUMAN = "human"

    @property
    def is_agent(self) -> bool:
        """Agents are untrusted and confined to their campaign; principals are not."""
        return self in {Role.MAIN, Role.WORKER, Role.REVIEWER, Role.LEADER}


class Record(Model):
    """Base of every stored record.

    Subclasses set ``KIND`` (the table key and id prefix source) and may override
    :meth:`check_update`.
    """

    KIND: ClassVar[str] = "record"
    PREFIX: ClassVar[str] = "rec"

    id: str = Field(default="", description="Unique id, assigned on creation: '<prefix>-<hex>'.")
    campaign_id: str | None = Field(
        default=None, description="Campaign the record belongs to; None for lab-wide records."
    )
    created_at: str = Field(default_factory=utc_now, description="Creation time, ISO-8601 UTC.")
    rev: int = Field(
        default=0,
        description="Revision: 0 before the first write; the store bumps it on every write.",
    )

    def model_post_init(self, __context: Any) -> None:
        if not self.id:
            self.id = new_id(self.PREFIX)

    def is_finished(self) -> bool:
        """True when the record may no longer change (records without a state never finish)."""
        return False

    def check_update(self, previous: Record) -> None:
        """Raise :class:`ConflictError` if replacing ``previous`` by ``self`` breaks a contract."""
        for name in ("id", "campaign_id", "created_at"):
            if getattr(previous, name) != getattr(self, name):
                raise ConflictError(f"{self.KIND} {self.id}: field {name!r} cannot change")
        if previous.is_finished():
            raise ConflictError(
                f"{self.KIND} {self.id} is finished and cannot be changed; "
                "create a new record instead"
            )

    def summary(self) -> str:
        """One line that names the record for listings."""
        return self.id
