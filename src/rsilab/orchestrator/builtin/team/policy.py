"""Research teams (AReaL-RSI) with the built-in policy: a Leader and N persistent researchers.

:func:`run_team_campaign` opens (or resumes) a campaign whose settings record ``{"team": N}``
and runs it with researchers ``researcher-1`` to ``researcher-N``, each on the whole task,
sharing the campaign and its experiment budget. Each researcher acts through the Experiment
OS under its own name: Main's tools for its own directions, a Worker's for its experiments
(one at a time, in its own workspace ``<lab>/workspaces/<campaign>/researcher-<k>``, on its
own thread), a Reviewer's for the reviews and findings it files. The Leader (actor
``leader``, role leader) gives each an *orientation* with ``assign_orientation`` and redirects
it when the records call for it; every decision is an Assignment record with its reason and
evidence. Researchers share memory through Findings (an analyst publishes, an exploiter
follows and records its adoption).

The built-in orientations are search behaviours (texts: Orientation records
``orientation:<name>``, seeded once per lab):

- explorer: wide moves from the reference on the knobs the team changed least;
- exploiter: local moves around the team's best feasible dev config, along supported findings;
- verifier: fresh-seed re-runs of the best unverified gain, a verified review, and a proposal
  to the Host Controller when the gain holds (the single runner's conclusion);
- analyst: each knob's effect from the team's runs, published as findings the tool checks,
  and one-knob contrast experiments where the evidence is thin.

The parts, one job each: :mod:`~rsilab.orchestrator.builtin.team._loop` (threads, budget, stop),
:mod:`~rsilab.orchestrator.builtin.team._leader` (orientations; with one researcher, the
alternation),
:mod:`~rsilab.orchestrator.builtin.team._researcher` (a researcher's next step),
:mod:`~rsilab.orchestrator.builtin.team._moves`, :mod:`~rsilab.orchestrator.builtin.team._analyst`,
:mod:`~rsilab.orchestrator.builtin.team._verify` (the behaviours), and
:mod:`~rsilab.orchestrator.builtin.team._state` (the team as the records hold it).

When the budget is spent, the campaign review (:mod:`~rsilab.orchestrator.research.campaign_review`)
weighs what each orientation and finding led to and revises orientation weights and findings;
the next team campaign on the lab starts from those revisions.

Resume continues from the records: assignments, directions, experiments (``exp:<n>`` intents
naming their researcher) and conclusions are all there, so a stopped or crashed team
campaign resumes with the same team and orientations, each pending experiment run again by
the researcher that began it. A finished campaign is final.
"""

from __future__ import annotations

import queue
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from rsilab.agents.roles import ensure_team_orientations
from rsilab.errors import UserError
from rsilab.executors.local import available_cores
from rsilab.expos.services import LabServices
from rsilab.memory import ensure_builtin_skills, fresh_seeds, require_team, team_members, team_size
from rsilab.orchestrator.builtin._context import RunContext, Voice
from rsilab.orchestrator.builtin.runner import stopped_ending
from rsilab.orchestrator.builtin.team._leader import Leader, TeamSettings
from rsilab.orchestrator.builtin.team._loop import TeamLoop
from rsilab.orchestrator.builtin.team._researcher import Researcher
from rsilab.orchestrator.builtin.team._voice import QueuedVoice
from rsilab.orchestrator.builtin.worker._agent import check_config_file, kept_for_resume
from rsilab.orchestrator.campaign import (
    ACTOR,
    CampaignPolicy,
    CampaignResult,
    CampaignSession,
    Ending,
    ProgressFn,
    StopRequest,
    run_policy,
)
from rsilab.orchestrator.door import Door
from rsilab.orchestrator.research.campaign_review import review_team_campaign
from rsilab.records import Campaign, Experiment
from rsilab.store import Lab, Store
from rsilab.tasks import Budget, Task

__all__ = ["TeamPolicy", "TeamSettings", "run_team_campaign"]

MAX_REFERENCE_RUNS = 2
"""The reference runs on this many seeds at most (one per researcher)."""


class TeamPolicy(CampaignPolicy):
    """A built-in research team: a Leader and ``team`` researchers (see the module).

    A resumed campaign keeps its team and seed; ``settings`` tune the Leader's rules.
    """

    def __init__(
        self,
        *,
        team: int,
        budget: Budget,
        seed: int = 0,
        on_progress: ProgressFn | None = None,
        settings: TeamSettings | None = None,
    ) -> None:
        require_team(team)
        self.team, self.budget, self.seed = team, budget, seed
        self.on_progress = on_progress
        self.leader_settings = settings or TeamSettings()
        self.slots = min(max(2, team), max(2, available_cores()))
        self.loop: TeamLoop | None = None
        self.verify_seeds = 0  # set by prepare

    def settings(self) -> dict[str, Any]:
        return {
            "agents": "builtin",
            "budget": str(self.budget),
            "team": self.team,
            "seed": self.seed,
        }

    def preflight(self, lab: Lab, services: LabServices, task: Task) -> None:
        """A config file the researchers cannot read is refused before anything is written."""
        check_config_file(task)

    def prepare(self, lab: Lab, services: LabServices) -> None:
        """The lab's team orientations and built-in skills (each seeded once)."""
        ensure_team_orientations(lab.store, actor=ACTOR)
        self.verify_seeds = fresh_seeds(ensure_builtin_skills(lab.store, actor=ACTOR))

    def admit(self, campaign: Campaign) -> None:
        if team_size(campaign.settings) < 1:
            raise UserError(
                f"campaign {campaign.id} is not a team campaign",
                f"resume it with `rsilab resume {campaign.id}`",
            )

    def keep_open(self, store: Store, campaign_id: str) -> Callable[[Experiment], bool]:
        return kept_for_resume(store, campaign_id)

    def run(self, session: CampaignSession) -> Ending:
        self.loop = _loop(session, self.on_progress, self.leader_settings, self.verify_seeds)
        state = self.loop.run(session.check)
        return stopped_ending(state, session.stop, self.loop.done_detail)

    def conclude(self, session: CampaignSession) -> None:
        """The campaign review, while its tools still answer."""
        assert self.loop is not None
        review = review_team_campaign(
            session.lab.store, session.task, session.campaign_id, self.loop.ctx.door
        )
        self.loop.ctx.say("review", f"campaign review {review.id}: {review.conclusion}")


def run_team_campaign(
    lab: Lab,
    task: Task,
    *,
    team: int,
    budget: Budget,
    seed: int = 0,
    services: LabServices | None = None,
    on_progress: ProgressFn | None = None,
    campaign_id: str | None = None,
    stop: StopRequest | None = None,
    settings: TeamSettings | None = None,
) -> CampaignResult:
    """Run a new team campaign on ``task`` (or resume ``campaign_id``) until its budget is spent.

    :class:`TeamPolicy` through :func:`~rsilab.orchestrator.campaign.run_policy`. ``team``
    researchers work at once (a resumed campaign keeps its team and seed; ``budget`` is this
    run's). ``on_progress`` is called on this thread only; ``stop`` (or KeyboardInterrupt on
    this thread) stops the campaign cleanly: ``stopped``, lease released, resumable.

    Raises:
        UserError: ``team`` is below 1, or ``campaign_id`` names no campaign or one that is
            not a team campaign.
        LeaseHeld: another process runs the campaign.
        RunnerError: a tool the policy needed failed (the campaign is left resumable).
    """
    policy = TeamPolicy(
        team=team, budget=budget, seed=seed, on_progress=on_progress, settings=settings
    )
    return run_policy(
        lab, task, policy, budget=budget, campaign_id=campaign_id, services=services, stop=stop
    )


def _loop(
    session: CampaignSession,
    on_progress: ProgressFn | None,
    settings: TeamSettings,
    verify_seeds: int,
) -> TeamLoop:
    """The loop, its Leader and its researchers, each with its own door and voice."""
    lab, campaign, budget = session.lab, session.campaign, session.budget
    seed = int(campaign.settings.get("seed", 0))
    names = team_members(campaign.settings)
    door = Door(lab, session.services, campaign.id, lab.path / "workspaces" / campaign.id)
    voice = Voice(on_progress, budget)
    ctx = RunContext(
        lab, session.task, campaign.id, budget, seed, door, voice, session.intents,
        verify_seeds=verify_seeds,
    )  # fmt: skip
    stop = session.stop
    lines: queue.SimpleQueue[tuple[str, str, float | None, float | None]] = queue.SimpleQueue()
    refs = min(MAX_REFERENCE_RUNS, len(names))
    researchers = [
        Researcher(
            name,
            replace(ctx, door=door.for_actor(name), say=QueuedVoice(voice, lines, name)),
            stop,
            refs,
            share_memory=settings.share_memory,
        )
        for name in names
    ]
    return TeamLoop(ctx, researchers, Leader(ctx, names, settings), stop, settings, lines)
