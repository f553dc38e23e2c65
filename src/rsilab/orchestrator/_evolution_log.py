"""An evolution's records: its :class:`~rsilab.records.Evolution` written with a ledger event
at each step, its rounds' campaigns and their states, and what a round is counted for."""

from __future__ import annotations

from collections.abc import Sequence

from rsilab.orchestrator.campaign_run import ACTOR, set_campaign_state
from rsilab.records import (
    Campaign,
    CampaignState,
    Event,
    EventDraft,
    Evolution,
    EvolutionRound,
    EvolutionState,
    Role,
    utc_now,
)
from rsilab.store import Lab


def commit_evolution(lab: Lab, record: Evolution, action: str, detail: str) -> None:
    """Write ``record`` with its ledger event, as the controller-side orchestrator."""
    draft = EventDraft(actor=ACTOR, role=str(Role.CONTROLLER), action=action, detail=detail)
    lab.store.commit(draft, [record])


def append_round(lab: Lab, evolution_id: str, entry: EvolutionRound) -> None:
    """Record a round that ended."""
    current = lab.store.get_as(evolution_id, Evolution)
    updated = current.model_copy(update={"rounds": [*current.rounds, entry]})
    verdict = "accepted" if entry.accepted else "kept"
    detail = (
        f"round {entry.round} ({entry.campaign_id}): {entry.head_before} -> "
        f"{entry.head_after}, {verdict}"
    )
    commit_evolution(lab, updated, "evolution_round", detail)


def end_evolution(lab: Lab, evolution_id: str, state: EvolutionState, message: str) -> Evolution:
    """Record how the evolution ended; the record as written."""
    current = lab.store.get_as(evolution_id, Evolution)
    ended = current.model_copy(
        update={"state": state, "message": message, "finished_at": utc_now()}
    )
    commit_evolution(lab, ended, f"evolution_{state}", message)
    return ended


def round_campaigns(lab: Lab, evolution_id: str) -> dict[int, Campaign]:
    """The campaigns of an evolution's rounds, by round number."""
    found = {}
    for campaign in lab.store.query_as(Campaign):
        if campaign.settings.get("evolution_id") == evolution_id:
            found[int(campaign.settings.get("round", 0))] = campaign
    return found


def settle_round(lab: Lab, campaign_id: str, person: bool) -> CampaignState:
    """The final state of a round's campaign: stopped where a person stopped it; else a
    campaign its runner stopped (its wall budget spent) is over, so finished."""
    current = lab.store.get_as(campaign_id, Campaign).state
    if person:
        wanted = CampaignState.STOPPED if current == CampaignState.RUNNING else current
    else:
        wanted = CampaignState.FINISHED if current != CampaignState.FAILED else current
    set_campaign_state(lab, campaign_id, wanted)
    return wanted


def stop_open_rounds(lab: Lab, evolution_id: str) -> None:
    """Mark the evolution's running round campaigns stopped (after an error)."""
    for campaign in round_campaigns(lab, evolution_id).values():
        if campaign.state == CampaignState.RUNNING:
            set_campaign_state(lab, campaign.id, CampaignState.STOPPED)


def agent_tool_calls(events: Sequence[Event]) -> int:
    """Tool calls made by agent roles (Main, Workers, Reviewers, Leader) among ``events``."""
    agents = {str(r) for r in Role if r.is_agent}
    return sum(1 for e in events if e.action == "tool_call" and e.role in agents)
