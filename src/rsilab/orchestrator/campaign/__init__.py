"""A campaign's lifecycle, its records and its result: the ground every kind of run stands on.

:func:`run_policy` (:mod:`~rsilab.orchestrator.campaign.lifecycle`) is the one place a
campaign starts, resumes, stops and ends; a :class:`CampaignPolicy` says who decides.
"""

from rsilab.orchestrator.campaign.lifecycle import (
    CampaignPolicy,
    CampaignSession,
    DoneIntent,
    Ending,
    Intents,
    LeaseHeld,
    LeaseLost,
    budget_of,
    check_harness,
    run_policy,
    takeover_reason,
)
from rsilab.orchestrator.campaign.result import (
    AcceptedVersion,
    CampaignResult,
    Progress,
    ProgressFn,
    campaign_result,
    task_of,
)
from rsilab.orchestrator.campaign.stop import EvolutionStop, StopRequest
from rsilab.orchestrator.writer import ACTOR

__all__ = [
    "ACTOR",
    "AcceptedVersion",
    "CampaignPolicy",
    "CampaignResult",
    "CampaignSession",
    "DoneIntent",
    "Ending",
    "EvolutionStop",
    "Intents",
    "LeaseHeld",
    "LeaseLost",
    "Progress",
    "ProgressFn",
    "StopRequest",
    "budget_of",
    "campaign_result",
    "check_harness",
    "run_policy",
    "takeover_reason",
    "task_of",
]
