"""Opening and naming campaigns: the principal-side actions that are not agent tools."""

from __future__ import annotations

from typing import Any

from rsilab.errors import NotFoundError, UserError
from rsilab.records import Campaign, EventDraft, Role, TaskRef
from rsilab.store.base import Store


def open_campaign(
    store: Store,
    task: TaskRef,
    *,
    actor: str = "cli",
    role: Role = Role.HUMAN,
    settings: dict[str, Any] | None = None,
    notes: str = "",
) -> Campaign:
    """Create a running campaign on ``task`` and record it in the ledger."""
    campaign = Campaign(task=task, settings=settings or {}, notes=notes)
    store.commit(
        EventDraft(
            actor=actor,
            role=str(role),
            action="campaign_created",
            campaign_id=campaign.id,
            detail=f"task {task.name}",
        ),
        [campaign],
    )
    return campaign


def find_campaign(store: Store, ref: str) -> Campaign:
    """A campaign by id or ``latest``; UserError with a hint when there is none."""
    try:
        return store.resolve_campaign(ref)
    except NotFoundError:
        if ref == "latest":
            raise UserError(
                "this lab has no campaign yet", "start one with `rsilab run TASK`"
            ) from None
        raise UserError(
            f"no campaign {ref!r} in this lab", "list campaigns with `rsilab campaign list`"
        ) from None
