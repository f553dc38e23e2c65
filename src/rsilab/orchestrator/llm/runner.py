"""The campaign runner with LLM agents: a Main, Workers and a Reviewer, each an agent step.

:func:`run_llm_campaign` has :func:`~rsilab.orchestrator.builtin.runner.run_campaign`'s contract
(baseline if missing, lease, recovery, resume, final finished campaigns); what differs is who
decides: each role is a chat model driven by :func:`~rsilab.agents.loop.run_agent_step`
through the Experiment OS tools its role may call. A campaign runs in rounds:

1. the Main agent plans (its prompt holds the budget left, the DAG, recent reviews, candidate
   verdicts and any unread guidance, which is marked read once the step has run) and ends by
   naming the directions to work on;
2. one Worker step per direction it named (then other open ones), up to ``workers``, each
   in its own workspace ``<lab>/workspaces/<campaign>/worker-<i>``, all at once;
3. a Reviewer step when some finished experiments have no review yet.

Each step is an intent keyed ``step:<round>:<actor>``: a resumed campaign re-enters its last
round, skips the steps done and runs again, from a fresh conversation with the state in its
prompt, a step that was interrupted. Conversations are kept in memory only, per actor.

Budgets: experiments are the campaign's Experiment records (no Worker step starts once they
reach ``budget.experiments``; a step's footer shows what is left, and ``create_experiment``
refuses once the campaign's budget is spent); tokens are the sum over the campaign's
``llm_call`` events (spent: the campaign ends, finished); wall time is checked before each
step and bounds each step (passed: stopped, resumable). An LLM error that outlasts the
client's retries stops the campaign (state stopped; ``llm_unavailable`` when the endpoint was
out of reach) with the step left to be run again; the open experiments of that step are kept
open by recovery and named in its prompt on resume, so it continues them (their finished jobs
are not run again, nor are they counted twice: see :mod:`rsilab.orchestrator.llm._resume`).

A Main step that answers without any tool call while no direction is open is asked again, up
to :data:`MAIN_NUDGES` times; still silent, the campaign stops (``agent_silent``, resumable)
instead of finishing with nothing done.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import Any

from rsilab.agents.llm import ChatModel, resolve_chat_model
from rsilab.agents.roles import ensure_role_orientations
from rsilab.errors import UserError
from rsilab.expos.services import LabServices
from rsilab.orchestrator.campaign import (
    ACTOR,
    CampaignPolicy,
    CampaignResult,
    CampaignSession,
    DoneIntent,
    Ending,
    ProgressFn,
    StopRequest,
    run_policy,
)
from rsilab.orchestrator.llm._nudge import MAIN_NUDGES, converse_main
from rsilab.orchestrator.llm._prompts import Left, main_prompt, reviewer_prompt, worker_prompt
from rsilab.orchestrator.llm._resume import (
    continuing,
    kept_for_resume,
    open_experiments,
    unfinished_note,
)
from rsilab.orchestrator.llm._state import (
    assign_workers,
    last_round,
    step_key,
    unreviewed,
)
from rsilab.orchestrator.llm._step import MAX_TURNS, Halt, StepRunner
from rsilab.orchestrator.research.dag import ResearchDag
from rsilab.orchestrator.research.guidance import mark_guidance_read, unread_guidance
from rsilab.records import CampaignState, Candidate, Direction, EndReason, Experiment, Intent, Role
from rsilab.store import Lab, Store
from rsilab.tasks import Budget, Task

__all__ = ["MAIN_NUDGES", "MAX_IDLE_ROUNDS", "MAX_TURNS", "LlmPolicy", "run_llm_campaign"]

MAIN, REVIEWER = "main", "reviewer"
MAX_IDLE_ROUNDS = 3
"""Rounds in a row without a new experiment after which the campaign stops (resumable)."""
TICK_S = 0.2
"""How often the round's thread looks at the stop request while its steps run."""


class LlmPolicy(CampaignPolicy):
    """LLM agents in Main, Worker and Reviewer steps (see the module).

    ``agents`` is ``openai:MODEL`` or ``anthropic:MODEL`` ("" takes the lab's ``[llm]``
    table); the model is built from it, the table and the environment (see
    :func:`resolve_chat_model`) unless ``model`` is given, in which case ``agents`` is only
    recorded and the caller closes the model. All roles share one model, so a
    ``TokenBudget`` on it caps the whole run. The settings record the spec, budget, workers
    and seed (which the LLM runner does not otherwise use: model sampling is not seeded).

    Raises:
        UserError: ``agents`` is ``builtin`` or malformed, or its API key is missing
            (checked here, before anything is written).
    """

    slots: int | None = None  # the machine's

    def __init__(
        self,
        lab: Lab,
        *,
        agents: str,
        budget: Budget,
        workers: int = 1,
        seed: int = 0,
        on_progress: ProgressFn | None = None,
        model: ChatModel | None = None,
        extra_settings: Mapping[str, Any] | None = None,
    ) -> None:
        self.chat = model or _model_for(agents, lab)
        self.own_model = model is None
        self.spec = agents.strip() or self.chat.name  # "" defers to the [llm] table
        self.budget, self.workers, self.seed = budget, workers, seed
        self.on_progress = on_progress
        self.extra = dict(extra_settings or {})

    def settings(self) -> dict[str, Any]:
        own = {"agents": self.spec, "budget": str(self.budget), "workers": self.workers}
        return {**self.extra, **own, "seed": self.seed}

    def preflight(self, lab: Lab, services: LabServices, task: Task) -> None:
        """The model's endpoint answers (a connection, no tokens spent)."""
        self.chat.check_reachable()

    def prepare(self, lab: Lab, services: LabServices) -> None:
        """The roles' orientations, the agents' system prompts (seeded once)."""
        ensure_role_orientations(lab.store, actor=ACTOR)

    def keep_open(self, store: Store, campaign_id: str) -> Callable[[Experiment], bool]:
        """The open experiments of steps a resume runs again (see the module)."""
        return kept_for_resume(store, campaign_id)

    def rounds(self, session: CampaignSession) -> _Rounds:
        """The round loop of this run."""
        return _Rounds(session, self.workers, self.chat, self.on_progress)

    def run(self, session: CampaignSession) -> Ending:
        return self.rounds(session).loop(session.check)

    def close(self) -> None:
        if self.own_model:
            self.chat.close()


def run_llm_campaign(
    lab: Lab,
    task: Task,
    *,
    agents: str,
    budget: Budget,
    workers: int = 1,
    seed: int = 0,
    on_progress: ProgressFn | None = None,
    campaign_id: str | None = None,
    services: LabServices | None = None,
    model: ChatModel | None = None,
    extra_settings: Mapping[str, Any] | None = None,
    stop: StopRequest | None = None,
) -> CampaignResult:
    """Run a new campaign on ``task`` with LLM agents (or resume ``campaign_id``):
    :class:`LlmPolicy` through :func:`~rsilab.orchestrator.campaign.run_policy`.

    ``stop`` drains: no step starts after a request, the running ones finish, and the
    campaign ends ``stopped`` (``stopped_by_user``).

    Raises:
        UserError: ``agents`` is ``builtin`` or malformed, its API key is missing (checked
            before anything is written), or ``campaign_id`` names no campaign.
        LeaseHeld: another process runs the campaign.
    """
    policy = LlmPolicy(
        lab,
        agents=agents,
        budget=budget,
        workers=workers,
        seed=seed,
        on_progress=on_progress,
        model=model,
        extra_settings=extra_settings,
    )
    return run_policy(
        lab, task, policy, budget=budget, campaign_id=campaign_id, services=services, stop=stop
    )


def _model_for(agents: str, lab: Lab) -> ChatModel:
    model = resolve_chat_model(agents, lab_path=lab.path)
    if model is None:
        raise UserError(
            f"--agents {agents} is the built-in policy, not an LLM",
            "run it with `rsilab run TASK --agents builtin`, or name openai:MODEL or "
            "anthropic:MODEL",
        )
    return model


def run_at_once(
    steps: Sequence[Callable[[], None]],
    thread_prefix: str,
    *,
    stop: StopRequest | None = None,
    on_cancel: Callable[[], None] | None = None,
) -> None:
    """Run ``steps`` at once, each on its own thread; the first failure is raised once every
    step has ended, so none is abandoned half-way. While they run, this thread watches
    ``stop``: once it cancels, ``on_cancel`` runs once (it kills the steps' running jobs, so a
    tool call waiting on one returns)."""
    if not steps:
        return
    interrupted = False
    with ThreadPoolExecutor(len(steps), thread_name_prefix=thread_prefix) as pool:
        futures = [pool.submit(step) for step in steps]
        cancelled = False
        while not all(f.done() for f in futures):
            try:
                wait(futures, timeout=TICK_S, return_when=FIRST_COMPLETED)
            except KeyboardInterrupt:  # no handler turned it into a request: cancel, then end
                interrupted = True
                if stop is not None:
                    stop.cancel()
            if stop is not None and stop.cancelling and not cancelled and on_cancel is not None:
                cancelled = True
                on_cancel()
    if interrupted:
        raise KeyboardInterrupt
    for future in futures:
        future.result()  # the first failure, now that all have ended


class _Rounds:
    """One run of the round loop; see the module docstring."""

    def __init__(
        self,
        session: CampaignSession,
        workers: int,
        model: ChatModel,
        on_progress: ProgressFn | None,
    ) -> None:
        self.store, self.task, self.budget = session.lab.store, session.task, session.budget
        self.workers = max(1, workers)
        self.campaign_id = session.campaign_id
        self.steps = StepRunner(
            session.lab, session.services, self.campaign_id, self.budget, model, on_progress,
            session.intents, session.stop,
        )  # fmt: skip

    def loop(self, check: Callable[[], None]) -> Ending:
        """Run rounds until a budget, a stop request or the agents end the campaign."""
        self.steps.check = check
        round_no, idle = max(1, last_round(self.store, self.campaign_id)), 0
        try:
            while True:
                before = self.steps.experiments()
                self._round(round_no)
                after = self.steps.experiments()
                if after >= self.budget.experiments:
                    raise Halt(
                        CampaignState.FINISHED, EndReason.BUDGET_SPENT, "experiment budget spent"
                    )
                idle = 0 if after > before else idle + 1
                if idle >= MAX_IDLE_ROUNDS:
                    raise Halt(
                        CampaignState.STOPPED,
                        EndReason.IDLE,
                        f"{idle} rounds without a new experiment; give guidance with "
                        f"`rsilab guide {self.campaign_id} TEXT` and resume",
                    )
                round_no += 1
        except Halt as halt:
            self.steps.say("campaign", halt.ending.message)
            return halt.ending
        except KeyboardInterrupt:
            self.steps.say("campaign", "interrupted; resume to continue")
            return Ending(
                CampaignState.STOPPED, EndReason.STOPPED_BY_USER, "interrupted; resume to continue"
            )

    def has_budget(self) -> bool:
        """Whether Workers may run: experiments are left, or a step cut short has open
        experiments to finish (counted already)."""
        spent = self.steps.experiments() >= self.budget.experiments
        return not spent or continuing(self.store, self.campaign_id)

    def _round(self, round_no: int) -> None:
        if self.has_budget():
            assignments = self._main(round_no)
            if not ResearchDag.load(self.store, self.campaign_id).frontier():
                self.steps.gate()  # a spent budget explains an empty plan better
                raise Halt(
                    CampaignState.FINISHED,
                    EndReason.AGENTS_DONE,
                    "the Main agent left no open direction",
                )
            self._workers(round_no, assignments)
        self._reviewer(round_no)

    def _workers(self, round_no: int, assignments: list[str]) -> None:
        """The round's Worker steps, at once when there are several (each in its own thread
        and workspace; the experiments run as sandboxed jobs, so threads suffice).

        A Halt or error of one step is raised once every step of the round has ended, so no
        step is abandoned half-way; Ctrl-C likewise waits for the running steps (each is
        bounded by the wall budget) before the campaign is marked stopped.
        """
        steps = [(f"worker-{i}", d) for i, d in enumerate(assignments, start=1)]
        if len(steps) == 1 and not self.has_budget():
            return
        run_at_once(
            [functools.partial(self._worker, round_no, a, d) for a, d in steps],
            "rsilab-worker",
            stop=self.steps.stop,
            on_cancel=lambda: self.steps.door.cancel_running_jobs("worker-1"),
        )

    # -- the roles ---------------------------------------------------------------------------

    def _main(self, round_no: int) -> list[str]:
        """The planning step; the directions its Workers take (stored, so a resume agrees)."""
        begun = self.steps.begin(step_key(round_no, MAIN), "main_step", {})
        if isinstance(begun, DoneIntent):
            return [str(i) for i in begun.result.get("assignments", [])]
        guidance = unread_guidance(self.store, self.campaign_id)
        prompt = main_prompt(
            self.store,
            self.campaign_id,
            self.task,
            round_no=round_no,
            left=self.steps.left(),
            workers=self.workers,
            guidance=guidance,
        )
        outcome = converse_main(self.steps, self.store, self.campaign_id, prompt)
        for g in guidance:  # only after the step ran: a failed one shows it again on resume
            mark_guidance_read(self.store, g, MAIN)
        dag = ResearchDag.load(self.store, self.campaign_id)
        counts = {d: len(exps) for d, exps in dag.experiments.items()}
        assignments = assign_workers(outcome.final_text, dag.frontier(), counts, self.workers)
        extra = {"assignments": assignments, "guidance_read": [g.id for g in guidance]}
        self.steps.complete(begun, outcome, extra)
        return assignments

    def _worker(self, round_no: int, actor: str, direction_id: str) -> None:
        payload = {"direction_id": direction_id}
        begun = self.steps.begin(step_key(round_no, actor), "worker_step", payload)
        if isinstance(begun, DoneIntent):
            return
        direction = self.store.get_as(direction_id, Direction)
        if direction.is_finished():  # closed since a Main step assigned it
            self.steps.skip(begun, f"direction {direction_id} is {direction.state}")
            return
        self._work(
            begun,
            actor,
            direction,
            lambda left: worker_prompt(
                self.store, self.campaign_id, self.task, direction, left=left
            ),
        )

    def _work(
        self,
        begun: Intent,
        actor: str,
        direction: Direction,
        prompt_for: Callable[[Left], str],
    ) -> None:
        """A Worker step of ``actor`` on ``direction``: the prompt ``prompt_for`` writes from
        what is left of the budget, the conversation, the step's experiments recorded with its
        intent, and progress lines for them and its candidates."""
        known = {e.id for e in self.store.query_as(Experiment, campaign_id=self.campaign_id)}
        proposed = {c.id for c in self.store.query_as(Candidate, campaign_id=self.campaign_id)}
        unfinished = open_experiments(self.store, self.campaign_id, actor)
        note = unfinished_note(self.store, self.campaign_id, unfinished)
        prompt = prompt_for(self.steps.left()) + (f"\n\n{note}" if note else "")
        outcome = self.steps.converse(actor, Role.WORKER, prompt)
        continued = {e.id for e in unfinished}
        made = [  # its own: Workers of the same round run at once
            e
            for e in self.store.query_as(Experiment, campaign_id=self.campaign_id)
            if (e.id not in known and e.created_by == actor) or e.id in continued
        ]
        self.steps.complete(begun, outcome, {"experiments": [e.id for e in made]})
        self._report(made, direction, actor, proposed)

    def _reviewer(self, round_no: int) -> None:
        """Review the finished experiments no review has read, if there are any."""
        key = step_key(round_no, REVIEWER)
        todo = unreviewed(self.store, self.campaign_id)
        stored = self.steps.stored(key)
        if stored is not None:  # begun before a resume: its directions, what is left of them
            payload = stored.payload
            todo = {d: ids for d, ids in todo.items() if d in payload.get("direction_ids", [])}
        elif not todo:
            return
        else:
            payload = {"direction_ids": sorted(todo)}
        begun = self.steps.begin(key, "reviewer_step", payload)
        if isinstance(begun, DoneIntent):
            return
        if not todo:
            self.steps.skip(begun, "everything was reviewed")
            return
        left = self.steps.left()
        prompt = reviewer_prompt(self.store, self.campaign_id, self.task, todo, left=left)
        outcome = self.steps.converse(REVIEWER, Role.REVIEWER, prompt)
        self.steps.complete(begun, outcome, {})
        filed = [c for c in outcome.tool_calls if c.name == "submit_review" and c.ok]
        self.steps.say("review", f"reviewer filed {len(filed)} review(s)")

    def _report(
        self, made: list[Experiment], direction: Direction, actor: str, proposed: set[str]
    ) -> None:
        """Progress lines for a Worker step's new experiments and candidates (``proposed``:
        the campaign's candidates before the step)."""
        target = self.task.targets[0].name
        exps = self.store.query_as(Experiment, campaign_id=self.campaign_id)
        best = max(
            (dev.value for e in exps if (dev := e.last_metric(target)) is not None), default=None
        )
        for exp in (e for e in exps if e.id in {m.id for m in made}):
            score = dev.value if (dev := exp.last_metric(target)) is not None else None
            shown = f"dev {target} {score:.4f}" if score is not None else "no dev score"
            message = f"experiment {exp.id} [{direction.title}] {exp.state}: {shown}"
            self.steps.say("experiment", message, score, best)
        for c in self.store.query_as(Candidate, campaign_id=self.campaign_id):
            if c.proposer == actor and c.id not in proposed:
                self.steps.say("candidate", f"candidate {c.id}: {c.state}")
