"""What every campaign runner shares: opening or resuming a campaign, its state, its result.

The built-in runner (:mod:`rsilab.orchestrator.runner`) and the LLM runner
(:mod:`rsilab.orchestrator.llm_runner`) differ in who decides the next action; they open,
finish and report a campaign the same way, through this module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rsilab.errors import UserError
from rsilab.expos.campaigns import open_campaign
from rsilab.orchestrator.measures import LockInMeasures, lock_in_measures
from rsilab.records import (
    Campaign,
    CampaignState,
    Candidate,
    CandidateState,
    EventDraft,
    Experiment,
    Role,
    SystemVersion,
)
from rsilab.store import Lab
from rsilab.tasks import Budget, Task, get_task

ACTOR = "orchestrator"


@dataclass(frozen=True)
class Progress:
    """One step of the campaign, for a progress display."""

    kind: str
    """experiment, review, direction, candidate, agent, campaign, round (an evolution's),
    team or finding (a research team's)."""
    message: str
    experiments: int
    budget: int
    score: float | None = None
    best: float | None = None
    running: int = 0
    """Experiments in flight when this was said (parallel workers)."""


ProgressFn = Callable[[Progress], None]


@dataclass(frozen=True)
class AcceptedVersion:
    """A version the campaign's proposals added to the lineage."""

    version_id: str
    label: str
    scores: dict[str, float]


@dataclass
class CampaignResult:
    """What a campaign run did (this call and any before it on the same campaign)."""

    campaign_id: str
    state: str
    experiments: int
    accepted: list[AcceptedVersion] = field(default_factory=list)
    measures: LockInMeasures | None = None
    message: str = ""


def start_or_find_campaign(
    lab: Lab, task: Task, settings: dict[str, Any], campaign_id: str | None
) -> Campaign | None:
    """A new campaign with ``settings`` (``campaign_id`` None), or the one to resume.

    None when ``campaign_id`` names a finished campaign: its records are final. UserError
    when no such campaign exists.
    """
    if campaign_id is None:
        return open_campaign(lab.store, task.ref(), actor=ACTOR, settings=settings)
    try:
        campaign = lab.store.get_as(campaign_id, Campaign)
    except Exception as exc:
        raise UserError(f"no campaign {campaign_id!r} in this lab") from exc
    return None if campaign.is_finished() else campaign


def set_campaign_state(lab: Lab, campaign_id: str, state: CampaignState) -> None:
    """Record ``state`` for the campaign (nothing when it is already so)."""
    campaign = lab.store.get_as(campaign_id, Campaign)
    if campaign.state == state:
        return
    draft = EventDraft(
        actor=ACTOR,
        role=str(Role.CONTROLLER),
        action=f"campaign_{state}",
        campaign_id=campaign_id,
        detail=f"{campaign.state} -> {state}",
    )
    lab.store.commit(draft, [campaign.model_copy(update={"state": state})])


def campaign_result(lab: Lab, campaign_id: str, message: str) -> CampaignResult:
    """The campaign's result as its records hold it now."""
    accepted = []
    for c in lab.store.query_as(Candidate, campaign_id=campaign_id):
        if c.state == CandidateState.ACCEPTED and c.version_id is not None:
            v = lab.store.get_as(c.version_id, SystemVersion)
            accepted.append(
                AcceptedVersion(v.id, v.label, {k: s.value for k, s in sorted(v.scores.items())})
            )
    campaign = lab.store.get_as(campaign_id, Campaign)
    return CampaignResult(
        campaign_id=campaign_id,
        state=str(campaign.state),
        experiments=len(lab.store.query_as(Experiment, campaign_id=campaign_id)),
        accepted=accepted,
        measures=lock_in_measures(lab.store, campaign_id),
        message=message,
    )


def record_budget(lab: Lab, campaign: Campaign, budget: Budget) -> None:
    """Record a resumed campaign's new budget (a stopped campaign may be given more);
    nothing when it is the one recorded."""
    if budget_of(campaign, budget) == budget:
        return
    current = lab.store.get_as(campaign.id, Campaign)
    draft = EventDraft(
        actor=ACTOR,
        role=str(Role.CONTROLLER),
        action="campaign_budget_set",
        campaign_id=campaign.id,
        detail=f"{current.settings.get('budget')} -> {budget}",
    )
    settings = {**current.settings, "budget": str(budget)}
    lab.store.commit(draft, [current.model_copy(update={"settings": settings})])


def budget_of(campaign: Campaign, default: Budget) -> Budget:
    """The budget a campaign was started with (``default`` where it recorded none)."""
    stored = campaign.settings.get("budget")
    return default if stored is None else Budget.model_validate(stored)


def task_of(campaign: Campaign) -> Task:
    """The task a campaign works on (UserError when it cannot be loaded here)."""
    try:
        return get_task(campaign.task.name)
    except (KeyError, ValueError) as exc:
        raise UserError(f"task {campaign.task.name!r} cannot be loaded here: {exc}") from exc
