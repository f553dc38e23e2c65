"""A campaign's budget as its records hold it: the one it started with, and a new one set on
resume (a stopped campaign may be given more)."""

from __future__ import annotations

from rsilab.orchestrator.writer import write
from rsilab.records import Campaign
from rsilab.store import Store
from rsilab.tasks import Budget


def budget_of(campaign: Campaign, default: Budget) -> Budget:
    """The budget a campaign records (``default`` where it records none)."""
    stored = campaign.settings.get("budget")
    return default if stored is None else Budget.model_validate(stored)


def record_budget(store: Store, campaign: Campaign, budget: Budget) -> None:
    """Record ``budget`` as the campaign's; nothing when it is the one recorded."""
    if budget_of(campaign, budget) == budget:
        return
    current = store.get_as(campaign.id, Campaign)
    settings = {**current.settings, "budget": str(budget)}
    write(
        store,
        "campaign_budget_set",
        [current.model_copy(update={"settings": settings})],
        campaign_id=campaign.id,
        detail=f"{current.settings.get('budget')} -> {budget}",
    )
