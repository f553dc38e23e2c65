"""Research teams with LLM agents: a Leader and N researchers, each an agent step.

:func:`run_llm_team_campaign` is :func:`~rsilab.orchestrator.builtin.team.run_team_campaign` with
chat
models deciding (``rsilab run TASK --team N --agents openai:MODEL``). A campaign runs in rounds,
on the LLM runner's machinery (:mod:`rsilab.orchestrator.llm.runner`: intents per step, token,
experiment and wall budgets, resume):

1. the **Leader** (actor ``leader``, role leader) reads the team roster, the orientations the
   lab holds and the shared memory, and gives each researcher an orientation with
   ``assign_orientation`` (at the start all; later, redirects the records call for);
2. each oriented **researcher** (``researcher-1`` ... ``researcher-N``, role worker, at once,
   each in its own workspace) works on its own line of work, a direction opened under its name
   on first need: its prompt starts with its orientation's stored text, then what a Worker
   sees, then the shared memory; it runs experiments, proposes verified gains, and publishes
   and adopts findings through the tools;
3. a **Reviewer** step reviews the finished experiments no review has read.

When the experiment budget is spent the campaign review
(:mod:`~rsilab.orchestrator.research.campaign_review`) runs on the records, as for a built-in team.
A researcher the Leader has not oriented yet waits for the next round.
"""

from __future__ import annotations

import functools
from typing import Any

from rsilab.agents.llm import ChatModel
from rsilab.agents.roles import ensure_team_orientations
from rsilab.expos.services import LabServices
from rsilab.memory import current_assignments, ensure_builtin_skills, require_team, team_members
from rsilab.memory.assignments import ORIENTATION_PREFIX
from rsilab.orchestrator.campaign import (
    ACTOR,
    CampaignResult,
    CampaignSession,
    DoneIntent,
    ProgressFn,
    StopRequest,
    run_policy,
)
from rsilab.orchestrator.llm._state import step_key
from rsilab.orchestrator.llm._team_prompts import leader_prompt, researcher_prompt
from rsilab.orchestrator.llm.runner import LlmPolicy, _Rounds, run_at_once
from rsilab.orchestrator.research.campaign_review import review_team_campaign
from rsilab.records import Direction, Orientation, Role
from rsilab.store import Lab
from rsilab.tasks import Budget, Task

__all__ = ["LEADER", "LlmTeamPolicy", "run_llm_team_campaign"]

LEADER = "leader"
LINE_TITLE = "line of work"
"""A researcher's own direction is titled ``<researcher>: line of work``."""


class LlmTeamPolicy(LlmPolicy):
    """An LLM research team: a Leader step, researcher steps, a Reviewer step per round.

    ``agents`` and ``model`` are :class:`~rsilab.orchestrator.llm.runner.LlmPolicy`'s (all
    agents share one model). A resumed campaign keeps its team.

    Raises:
        UserError: ``team`` below 1, ``agents`` is ``builtin`` or its API key is missing
            (before anything is written).
    """

    def __init__(
        self,
        lab: Lab,
        *,
        agents: str,
        team: int,
        budget: Budget,
        seed: int = 0,
        on_progress: ProgressFn | None = None,
        model: ChatModel | None = None,
    ) -> None:
        require_team(team)
        super().__init__(
            lab, agents=agents, budget=budget, workers=team, seed=seed,
            on_progress=on_progress, model=model,
        )  # fmt: skip
        self.team = team
        self.slots = max(2, team)
        self.last: _TeamRounds | None = None

    def settings(self) -> dict[str, Any]:
        return {
            "agents": self.spec,
            "budget": str(self.budget),
            "team": self.team,
            "seed": self.seed,
        }

    def prepare(self, lab: Lab, services: LabServices) -> None:
        """The roles' and the team's orientations, and the lab's skills (researchers see
        them), each seeded once."""
        super().prepare(lab, services)
        ensure_team_orientations(lab.store, actor=ACTOR)
        ensure_builtin_skills(lab.store, actor=ACTOR)

    def rounds(self, session: CampaignSession) -> _Rounds:
        names = team_members(session.campaign.settings)  # a resumed campaign keeps its team
        self.last = _TeamRounds(session, names, self.chat, self.on_progress)
        return self.last

    def conclude(self, session: CampaignSession) -> None:
        """The campaign review, as for a built-in team."""
        assert self.last is not None
        steps = self.last.steps
        made = review_team_campaign(
            session.lab.store, session.task, session.campaign_id, steps.door
        )
        steps.say("review", f"campaign review {made.id}: {made.conclusion}")


def run_llm_team_campaign(
    lab: Lab,
    task: Task,
    *,
    agents: str,
    team: int,
    budget: Budget,
    seed: int = 0,
    on_progress: ProgressFn | None = None,
    campaign_id: str | None = None,
    services: LabServices | None = None,
    model: ChatModel | None = None,
    stop: StopRequest | None = None,
) -> CampaignResult:
    """Run a new LLM team campaign on ``task`` (or resume ``campaign_id``):
    :class:`LlmTeamPolicy` through :func:`~rsilab.orchestrator.campaign.run_policy`.

    Raises:
        UserError: ``team`` below 1, ``agents`` is ``builtin`` or its API key is missing
            (before anything is written), or ``campaign_id`` names no campaign.
        LeaseHeld: another process runs the campaign.
    """
    policy = LlmTeamPolicy(
        lab, agents=agents, team=team, budget=budget, seed=seed, on_progress=on_progress,
        model=model,
    )  # fmt: skip
    return run_policy(
        lab, task, policy, budget=budget, campaign_id=campaign_id, services=services, stop=stop
    )


class _TeamRounds(_Rounds):
    """The LLM runner's round loop with a Leader step and researcher steps (see the module)."""

    def __init__(
        self,
        session: CampaignSession,
        names: list[str],
        model: ChatModel,
        on_progress: ProgressFn | None,
    ) -> None:
        super().__init__(session, len(names), model, on_progress)
        self.names = names

    def _round(self, round_no: int) -> None:
        if self.has_budget():
            self._leader(round_no)
            self._researchers(round_no)
        self._reviewer(round_no)

    def _leader(self, round_no: int) -> None:
        begun = self.steps.begin(step_key(round_no, LEADER), "leader_step", {})
        if isinstance(begun, DoneIntent):
            return
        prompt = leader_prompt(
            self.store,
            self.campaign_id,
            self.task,
            self.names,
            round_no=round_no,
            left=self.steps.left(),
        )
        outcome = self.steps.converse(LEADER, Role.LEADER, prompt)
        assigned = [c for c in outcome.tool_calls if c.name == "assign_orientation" and c.ok]
        self.steps.complete(begun, outcome, {"assignments": len(assigned)})
        self.steps.say("team", f"leader made {len(assigned)} assignment(s)")

    def _researchers(self, round_no: int) -> None:
        """The oriented researchers' steps, at once (each in its own thread and workspace);
        a failure is raised once every step of the round has ended."""
        oriented = current_assignments(self.store, self.campaign_id)
        waiting = [n for n in self.names if n not in oriented]
        if waiting:
            self.steps.say("team", f"not oriented yet: {', '.join(waiting)}")
        steps = [
            functools.partial(self._researcher, round_no, n) for n in self.names if n in oriented
        ]
        run_at_once(
            steps,
            "rsilab-researcher",
            stop=self.steps.stop,
            on_cancel=lambda: self.steps.door.cancel_running_jobs(self.names[0]),
        )

    def _researcher(self, round_no: int, name: str) -> None:
        if not self.has_budget():
            return
        begun = self.steps.begin(step_key(round_no, name), "researcher_step", {})
        if isinstance(begun, DoneIntent):
            return
        assignment = current_assignments(self.store, self.campaign_id)[name]
        orientation = self.store.get_as(assignment.orientation_id, Orientation)
        direction = self._line_of_work(name, orientation)
        self._work(
            begun,
            name,
            direction,
            lambda left: researcher_prompt(
                self.store,
                self.campaign_id,
                self.task,
                direction,
                orientation,
                name=name,
                left=left,
            ),
        )

    def _line_of_work(self, name: str, orientation: Orientation) -> Direction:
        """The researcher's open direction, opened under its name when it has none."""
        title = f"{name}: {LINE_TITLE}"
        for d in self.store.query_as(Direction, campaign_id=self.campaign_id):
            if d.title == title and d.created_by == name and not d.is_finished():
                return d
        short = orientation.name.removeprefix(ORIENTATION_PREFIX)
        made = self.steps.door.for_actor(name).main(
            "create_direction",
            title=title,
            hypothesis=f"{name}'s work on the whole task, oriented as {short}",
            plan="the researcher chooses its experiments as its orientation says",
        )
        return self.store.get_as(str(made["id"]), Direction)
