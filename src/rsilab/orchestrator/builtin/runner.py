"""The built-in (no-LLM) policy: Main, parallel Workers, a Reviewer.

:class:`BuiltinPolicy` runs a campaign through the lifecycle
(:mod:`rsilab.orchestrator.campaign`) with the loop (:mod:`rsilab.orchestrator.builtin._loop`) until
the budget is spent or it is asked to stop. Every action goes through the Experiment OS tools
with its role (:mod:`rsilab.orchestrator.door`): Main with no workspace, each Worker in its
own folder under ``<lab>/workspaces/<campaign>/<worker>``, the Reviewer. The parts, one job
each:

- :mod:`~rsilab.orchestrator.builtin.main._agent`: Main's next step, from the records (reviews
  decide when they speak; UCB over directions otherwise);
- :mod:`~rsilab.orchestrator.builtin.main._moves`: Main's changes to the research DAG;
- :mod:`~rsilab.orchestrator.builtin.reviewer._agent` and
  :mod:`~rsilab.orchestrator.builtin.reviewer._conclude`: the Reviewer, and the verdict on a
  verification (proposal to the Host Controller);
- :mod:`~rsilab.orchestrator.builtin.worker._agent`: one experiment in a Worker's workspace;
- :mod:`~rsilab.orchestrator.builtin._state`: the campaign as the records hold it.

Each experiment is an intent ``exp:<n>``, each conclusion ``conclude:<direction>``: a resumed
campaign repeats nothing done and loses nothing begun (a pending experiment runs again as a new
attempt). A finished campaign is final.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from rsilab.executors.local import available_cores
from rsilab.expos.services import LabServices
from rsilab.memory import ensure_builtin_skills, fresh_seeds
from rsilab.orchestrator.builtin._context import VERIFY_SEEDS, RunContext, Voice
from rsilab.orchestrator.builtin._loop import CampaignLoop
from rsilab.orchestrator.builtin.ablation import Ablation, ablations_from, ablations_setting
from rsilab.orchestrator.builtin.worker._agent import check_config_file, kept_for_resume
from rsilab.orchestrator.campaign import (
    ACTOR,
    AcceptedVersion,
    CampaignPolicy,
    CampaignResult,
    CampaignSession,
    Ending,
    Progress,
    ProgressFn,
    StopRequest,
    run_policy,
    task_of,
)
from rsilab.orchestrator.door import Door, RunnerError
from rsilab.records import CampaignState, EndReason, Experiment
from rsilab.store import Lab, Store
from rsilab.tasks import Budget, Task

__all__ = [
    "Ablation",
    "AcceptedVersion",
    "BuiltinPolicy",
    "CampaignResult",
    "Progress",
    "ProgressFn",
    "RunnerError",
    "StopRequest",
    "run_campaign",
    "stopped_ending",
    "task_of",
]


class BuiltinPolicy(CampaignPolicy):
    """Main, up to ``workers`` Workers at once and a Reviewer, deciding without an LLM.

    A resumed campaign keeps the seed and ablations it started with; ``workers`` is this
    run's. Without Workers (an ablation) Main runs each experiment itself, one at a time.
    """

    def __init__(
        self,
        *,
        budget: Budget,
        workers: int = 1,
        seed: int = 0,
        on_progress: ProgressFn | None = None,
        ablate: Collection[Ablation] = (),
        extra_settings: Mapping[str, Any] | None = None,
    ) -> None:
        self.budget, self.seed, self.on_progress = budget, seed, on_progress
        self.ablate = frozenset(ablate)
        self.workers = 1 if Ablation.WORKERS in self.ablate else workers
        self.extra = dict(extra_settings or {})
        self.slots = min(max(2, workers), max(2, available_cores()))
        self.verify_seeds = VERIFY_SEEDS

    def settings(self) -> dict[str, Any]:
        own: dict[str, Any] = {
            "agents": "builtin",
            "budget": str(self.budget),
            "workers": self.workers,
            "seed": self.seed,
        }
        if self.ablate:
            own["ablate"] = ablations_setting(self.ablate)
        return {**self.extra, **own}

    def preflight(self, lab: Lab, services: LabServices, task: Task) -> None:
        """A config file the policy cannot read is refused before anything is written."""
        check_config_file(task)

    def prepare(self, lab: Lab, services: LabServices) -> None:
        """The lab's built-in skills (seeded once); their fresh-seed count is this run's."""
        self.verify_seeds = fresh_seeds(ensure_builtin_skills(lab.store, actor=ACTOR))

    def keep_open(self, store: Store, campaign_id: str) -> Callable[[Experiment], bool]:
        return kept_for_resume(store, campaign_id)

    def run(self, session: CampaignSession) -> Ending:
        lab, campaign = session.lab, session.campaign
        seed = int(campaign.settings.get("seed", self.seed))
        ablations = ablations_from(campaign.settings.get("ablate"))
        workers = 1 if Ablation.WORKERS in ablations else self.workers  # and so on resume
        door = Door(lab, session.services, campaign.id, lab.path / "workspaces" / campaign.id)
        voice = Voice(self.on_progress, session.budget)
        ctx = RunContext(
            lab, session.task, campaign.id, session.budget, seed, door, voice,
            session.intents, ablations, self.verify_seeds,
        )  # fmt: skip
        loop = CampaignLoop(ctx, workers, session.stop)
        state = loop.run(session.check)
        return stopped_ending(state, session.stop, loop.done_detail)


def stopped_ending(
    state: CampaignState, stop: StopRequest, done_detail: str | None = None
) -> Ending:
    """The ending of a built-in loop that returned ``state``: finished when its experiment
    budget is spent, or with reason ``agents_done`` and ``done_detail`` when the loop finished
    early for that reason; stopped by a person's request, or else by its wall budget."""
    if state is CampaignState.FINISHED and done_detail is not None:
        return Ending(state, EndReason.AGENTS_DONE, done_detail)
    if state is CampaignState.FINISHED:
        return Ending(state, EndReason.BUDGET_SPENT, "experiment budget spent")
    if stop.requested:
        return Ending(state, EndReason.STOPPED_BY_USER, "stopped by a person; resume to continue")
    return Ending(state, EndReason.WALL_BUDGET, "wall budget spent; resume to continue")


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
    """Run a new campaign of the built-in policy on ``task`` (or resume ``campaign_id``).

    :class:`BuiltinPolicy` through :func:`~rsilab.orchestrator.campaign.run_policy`: the
    baseline when missing, the lease, recovery, the budget, the stop request (or
    KeyboardInterrupt on this thread: ``stopped``, resumable), the ending recorded.
    ``on_progress`` is called on this thread only; ``extra_settings`` are recorded in a new
    campaign's settings besides the policy's own (an evolution's round, for one).

    Raises LeaseHeld when another process runs the campaign, UserError for an unknown
    campaign, and RunnerError when a tool the policy needed failed (the campaign is ended
    ``stopped`` with reason ``error``, resumable).
    """
    policy = BuiltinPolicy(
        budget=budget,
        workers=workers,
        seed=seed,
        on_progress=on_progress,
        ablate=ablate,
        extra_settings=extra_settings,
    )
    return run_policy(
        lab, task, policy, budget=budget, campaign_id=campaign_id, services=services, stop=stop
    )
