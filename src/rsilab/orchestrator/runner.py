"""The campaign runner with the built-in (no-LLM) policy: Main, parallel Workers, a Reviewer.

:func:`run_campaign` opens (or resumes) a campaign, takes its lease, recovers what a dead
runner left behind (:mod:`rsilab.orchestrator.recovery`) and runs the loop
(:mod:`rsilab.orchestrator._loop`) until the budget is spent or it is asked to stop. Every
action goes through the Experiment OS tools with its role (:mod:`rsilab.orchestrator._door`):
Main with no workspace, each Worker in its own folder under
``<lab>/workspaces/<campaign>/<worker>``, the Reviewer. The parts, one job each:

- :mod:`~rsilab.orchestrator._main`: Main's next step, from the records (reviews decide when
  they speak; UCB over directions otherwise);
- :mod:`~rsilab.orchestrator._moves`: Main's changes to the research DAG;
- :mod:`~rsilab.orchestrator._review` and :mod:`~rsilab.orchestrator._conclude`: the Reviewer,
  and the verdict on a verification (proposal to the Host Controller);
- :mod:`~rsilab.orchestrator._workers`: one experiment in a Worker's workspace;
- :mod:`~rsilab.orchestrator._state`: the campaign as the records hold it.

Each experiment is an intent ``exp:<n>``, each conclusion ``conclude:<direction>``: a resumed
campaign repeats nothing done and loses nothing begun (a pending experiment runs again as a new
attempt). A finished campaign is final.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from rsilab.controller.lineage import find_lineage
from rsilab.executors.local import available_cores
from rsilab.expos.services import LabServices
from rsilab.memory import ensure_builtin_skills, fresh_seeds
from rsilab.orchestrator._context import RunContext, Voice
from rsilab.orchestrator._door import Door, RunnerError
from rsilab.orchestrator._loop import CampaignLoop
from rsilab.orchestrator._stop import StopRequest
from rsilab.orchestrator._workers import kept_for_resume
from rsilab.orchestrator.ablation import Ablation, ablations_from, ablations_setting
from rsilab.orchestrator.campaign_run import (
    ACTOR,
    AcceptedVersion,
    CampaignResult,
    Progress,
    ProgressFn,
    campaign_result,
    record_budget,
    set_campaign_state,
    start_or_find_campaign,
    task_of,
)
from rsilab.orchestrator.lease import acquire_lease
from rsilab.orchestrator.recovery import recover_campaign
from rsilab.store import Lab
from rsilab.tasks import Budget, Task

__all__ = [
    "Ablation",
    "AcceptedVersion",
    "CampaignResult",
    "Progress",
    "ProgressFn",
    "RunnerError",
    "StopRequest",
    "run_campaign",
    "task_of",
]

FINISHED_MESSAGE = (
    "nothing to do: the campaign is finished (records of a finished campaign are final; "
    "start a new one with `rsilab run`)"
)


def run_campaign(
    lab: Lab,
    task: Task,
    *,
    budget: Budget,
    workers: int = 1,
    seed: int = 0,
    on_progress: ProgressFn | None = None,
    campaign_id: str | None = None,
    services: LabServices | None = None,
    stop: StopRequest | None = None,
    ablate: Collection[Ablation] = (),
    extra_settings: Mapping[str, Any] | None = None,
) -> CampaignResult:
    """Run a new campaign on ``task`` (or resume ``campaign_id``) until its budget is spent.

    Makes the lineage's baseline when it has none. Up to ``workers`` experiments run at once
    (a resumed campaign keeps the seed it started with; ``workers`` and ``budget`` are this
    run's, and a budget that differs from the recorded one is recorded). ``on_progress`` is
    called on this thread only. ``stop`` (or KeyboardInterrupt on this thread) stops the
    campaign cleanly: ``stopped``, lease released, resumable. A finished campaign is final:
    resuming it changes nothing (its result says so). ``ablate`` runs the policy without
    some of its parts (:mod:`rsilab.orchestrator.ablation`; recorded in the settings, kept on
    resume; without Workers one experiment runs at a time). ``extra_settings`` are recorded in
    a new campaign's settings besides the runner's own (an evolution's round, for one).
    Raises LeaseHeld when another process runs the campaign, UserError for an unknown
    campaign, and RunnerError when a tool the policy needed failed (the campaign is left
    resumable).
    """
    own = services is None
    if services is None:
        slots = min(max(2, workers), max(2, available_cores()))
        services = LabServices(lab, judge_in_background=False, slots=slots)
    try:
        if find_lineage(lab.store, task.name, services.lineage) is None:
            services.controller(task).baseline(actor=ACTOR)
        if Ablation.WORKERS in ablate:
            workers = 1  # Main runs each experiment itself
        settings: dict[str, Any] = {
            "agents": "builtin",
            "budget": str(budget),
            "workers": workers,
            "seed": seed,
        }
        if ablate:
            settings["ablate"] = ablations_setting(ablate)
        settings = {**(extra_settings or {}), **settings}
        campaign = start_or_find_campaign(lab, task, settings, campaign_id)
        if campaign is None:
            assert campaign_id is not None
            return campaign_result(lab, campaign_id, FINISHED_MESSAGE)
        seed = int(campaign.settings.get("seed", seed))
        ablations = ablations_from(campaign.settings.get("ablate"))
        if Ablation.WORKERS in ablations:
            workers = 1  # and so on resume
        with acquire_lease(lab.store, campaign.id) as lease, lease.keep_alive():
            recover_campaign(lab.store, lease, keep_open=kept_for_resume(lab.store, campaign.id))
            record_budget(lab, campaign, budget)
            door = Door(lab, services, campaign.id, lab.path / "workspaces" / campaign.id)
            voice = Voice(on_progress, budget)
            seeds = fresh_seeds(ensure_builtin_skills(lab.store, actor=ACTOR))
            ctx = RunContext(lab, task, campaign.id, budget, seed, door, voice, ablations, seeds)
            state = CampaignLoop(ctx, workers, stop or StopRequest()).run(lease.check)
            set_campaign_state(lab, campaign.id, state)
        return campaign_result(lab, campaign.id, f"campaign {state}")
    finally:
        if own:
            services.close()
