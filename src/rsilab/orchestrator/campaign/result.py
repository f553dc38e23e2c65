"""What a campaign run says while it runs and what it returns: progress lines and the result.

Every kind of run (built-in, LLM, team, a round of an evolution) reports through these, so a
caller reads one shape whoever decided.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from rsilab.orchestrator.research.measures import LockInMeasures, lock_in_measures
from rsilab.records import (
    Campaign,
    Candidate,
    CandidateState,
    EndReason,
    Experiment,
    SystemVersion,
)
from rsilab.store import Lab
from rsilab.tasks import Task, load_ref


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
    """running, stopped (resumable), finished or failed (final)."""
    experiments: int
    accepted: list[AcceptedVersion] = field(default_factory=list)
    measures: LockInMeasures | None = None
    message: str = ""
    end_reason: EndReason | None = None
    """Why the last run ended (:class:`~rsilab.records.EndReason`), as the campaign records it."""


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
        end_reason=campaign.end_reason,
    )


def task_of(campaign: Campaign) -> Task:
    """The task a campaign works on, loaded from where it recorded
    (:func:`rsilab.tasks.load_ref`).

    Raises:
        UserError: one line: its file is gone or changed since the campaign started, or its
            name is not known here.
    """
    return load_ref(campaign.task, campaign_id=campaign.id)
