"""An evolution's records: its :class:`~rsilab.records.Evolution` written with a ledger event
at each step, its rounds' campaigns and their states, and what a round is counted for."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rsilab.expos.services import LabServices
from rsilab.orchestrator.campaign import CampaignPolicy, CampaignSession, Ending
from rsilab.orchestrator.writer import write
from rsilab.records import (
    Campaign,
    CampaignState,
    EndReason,
    Event,
    Evolution,
    EvolutionRound,
    EvolutionState,
    Experiment,
    Role,
    utc_now,
)
from rsilab.store import Lab, Store


def commit_evolution(lab: Lab, record: Evolution, action: str, detail: str) -> None:
    """Write ``record`` with its ledger event, as the controller-side orchestrator."""
    write(lab.store, action, [record], detail=detail)


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


class RoundPolicy(CampaignPolicy):
    """A round's policy: ``inner``'s, except that a run its runner stopped (its wall budget,
    say) ends the round, finished; a person's stop or an error leave it stopped."""

    def __init__(self, inner: CampaignPolicy) -> None:
        self.inner = inner
        self.slots = inner.slots

    def settings(self) -> dict[str, Any]:
        return self.inner.settings()

    def run(self, session: CampaignSession) -> Ending:
        return self.inner.run(session)

    def prepare(self, lab: Lab, services: LabServices) -> None:
        self.inner.prepare(lab, services)

    def admit(self, campaign: Campaign) -> None:
        self.inner.admit(campaign)

    def keep_open(self, store: Store, campaign_id: str) -> Callable[[Experiment], bool] | None:
        return self.inner.keep_open(store, campaign_id)

    def conclude(self, session: CampaignSession) -> None:
        self.inner.conclude(session)

    def settle(self, ending: Ending) -> Ending:
        ending = self.inner.settle(ending)
        if ending.state is not CampaignState.STOPPED or ending.reason in _PERSON_OR_ERROR:
            return ending
        message = f"{ending.message}; its runner stopped it ({ending.reason}), so the round is over"
        return Ending(CampaignState.FINISHED, EndReason.ROUND_OVER, message)

    def close(self) -> None:
        self.inner.close()


_PERSON_OR_ERROR = frozenset({EndReason.STOPPED_BY_USER, EndReason.ERROR})


def agent_tool_calls(events: Sequence[Event]) -> int:
    """Tool calls made by agent roles (Main, Workers, Reviewers, Leader) among ``events``."""
    agents = {str(r) for r in Role if r.is_agent}
    return sum(1 for e in events if e.action == "tool_call" and e.role in agents)
