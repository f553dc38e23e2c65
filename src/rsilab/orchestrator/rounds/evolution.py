"""Recursive improvement across rounds (RSI-Env's *Self* and *Teacher*): ``rsilab evolve``.

:func:`run_rounds` runs one campaign per round on a task's lineage, each under the same
budget. The Host Controller accepts a round's proposals or keeps the old version; the next
round starts from the lineage head as the round left it, with the research state (records,
findings, skills) carried over because every round works in the same lab. Who improves is
the ``improver`` spec (:mod:`rsilab.orchestrator.rounds._improvers`): under ``self`` the head each
round starts from acts as its own improver (its harness's ``improve`` command, run in the
sandbox by the :class:`ImproverRunner` the caller passes: that mechanism lives in a layer
above this one); under ``teacher`` the starting system's harness does, frozen, every round;
``teacher:builtin`` and ``teacher:openai:MODEL`` / ``teacher:anthropic:MODEL`` are rsilab's
own runners.

The evolution is an :class:`~rsilab.records.Evolution` record, written with a ledger event
when it starts, after each round and when it ends; each round's campaign carries
``{"evolution_id", "round", "improver"}`` in its settings. A round whose campaign stopped on
its own (its wall budget spent) is over: its campaign is closed as finished and the next round
starts. A person's stop (:class:`EvolutionStop`, or KeyboardInterrupt) leaves the round's
campaign and the evolution ``stopped``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from rsilab.agents.llm import resolve_chat_model
from rsilab.controller.lineage import find_lineage
from rsilab.errors import RsilabError, UserError
from rsilab.expos.services import LabServices
from rsilab.orchestrator.builtin.runner import BuiltinPolicy
from rsilab.orchestrator.campaign import (
    ACTOR,
    CampaignPolicy,
    EvolutionStop,
    Progress,
    ProgressFn,
    run_policy,
)
from rsilab.orchestrator.llm.runner import LlmPolicy
from rsilab.orchestrator.rounds._harness import (
    IMPROVER_ACTOR,
    HarnessRoundPolicy,
    ImproverEnd,
    ImproverJob,
    ImproverRunner,
)
from rsilab.orchestrator.rounds._improvers import (
    ImproverKind,
    ImproverSpec,
    parse_improver,
    require_improve,
    starting_manifest,
    version_manifest,
)
from rsilab.orchestrator.rounds._log import (
    RoundPolicy,
    agent_tool_calls,
    append_round,
    commit_evolution,
    end_evolution,
    round_campaigns,
)
from rsilab.records import (
    EndReason,
    Evolution,
    EvolutionRound,
    EvolutionState,
    Experiment,
    SystemVersion,
)
from rsilab.store import Lab
from rsilab.tasks import Budget, ManifestError, Task

__all__ = [
    "IMPROVER_ACTOR",
    "EvolutionResult",
    "EvolutionStop",
    "ImproverEnd",
    "ImproverJob",
    "ImproverRunner",
    "ImproverSpec",
    "agent_tool_calls",
    "parse_improver",
    "round_campaigns",
    "run_rounds",
]

LINEAGE = "main"


@dataclass
class EvolutionResult:
    """What :func:`run_rounds` did, as the Evolution record holds it at the end."""

    evolution_id: str
    state: str
    start_id: str
    head_id: str
    rounds: list[EvolutionRound] = field(default_factory=list)
    message: str = ""


def run_rounds(
    lab: Lab,
    task: Task,
    *,
    rounds: int,
    improver: str,
    budget: Budget,
    seed: int = 0,
    run_improver: ImproverRunner | None = None,
    on_progress: ProgressFn | None = None,
    stop: EvolutionStop | None = None,
) -> EvolutionResult:
    """Run ``rounds`` rounds of improvement on ``task``'s main lineage; see the module.

    Makes the lineage's baseline first when it has none. ``run_improver`` runs a harness's
    improve command (needed by ``self`` and ``teacher``). Round ``r`` uses seed ``seed + r - 1``.

    Raises:
        UserError: a bad spec or round count; ``self`` or ``teacher`` where the starting
            harness declares no ``improve`` command, or without ``run_improver``; an LLM
            teacher without its API key. All before anything is written.
    """
    spec = parse_improver(improver)
    if rounds < 1:
        raise UserError(f"--rounds {rounds}: at least one round is needed", "e.g. --rounds 3")
    _check_runnable(lab, task, spec, run_improver)
    evolving = _Evolving(lab, task, spec, budget, seed, run_improver, on_progress, stop)
    return evolving.run(rounds)


def _check_runnable(
    lab: Lab, task: Task, spec: ImproverSpec, run_improver: ImproverRunner | None
) -> None:
    if spec.kind.is_harness:
        lineage = find_lineage(lab.store, task.name, LINEAGE)
        head = None if lineage is None else lab.store.get_as(lineage.head_id, SystemVersion)
        whose = "the lineage head's" if spec.kind is ImproverKind.SELF else "the starting system's"
        require_improve(starting_manifest(lab, task, head), spec, whose)
        if run_improver is None:
            raise UserError(
                f"--improver {spec.text} runs a harness's improve command in the sandbox, "
                "and no runner for it was given",
                "run it with `rsilab evolve`",
            )
    if spec.kind is ImproverKind.LLM:
        model = resolve_chat_model(spec.agents, lab_path=lab.path)  # a missing key fails here
        if model is not None:
            model.close()


class _Evolving:
    """One run of :func:`run_rounds`."""

    def __init__(
        self,
        lab: Lab,
        task: Task,
        spec: ImproverSpec,
        budget: Budget,
        seed: int,
        run_improver: ImproverRunner | None,
        on_progress: ProgressFn | None,
        stop: EvolutionStop | None,
    ) -> None:
        self.lab, self.task, self.spec, self.budget, self.seed = lab, task, spec, budget, seed
        self.run_improver = run_improver
        self.on_progress = on_progress
        self.stop = stop or EvolutionStop()
        self.evolution_id = ""

    def run(self, rounds: int) -> EvolutionResult:
        start = self._head() or self._baseline()
        teacher = start.id if self.spec.kind is ImproverKind.TEACHER else None
        record = Evolution(
            task=self.task.name,
            lineage=LINEAGE,
            improver=self.spec.text,
            rounds_planned=rounds,
            budget=str(self.budget),
            seed=self.seed,
            start_version_id=start.id,
            teacher_version_id=teacher,
        )
        self.evolution_id = record.id
        detail = (
            f"{self.task.name}/{LINEAGE}: {rounds} rounds by {self.spec.text} from {start.label}"
        )
        commit_evolution(self.lab, record, "evolution_started", detail)
        self._say(f"evolution {record.id}: {detail}")
        try:
            message = self._rounds(rounds)
        except KeyboardInterrupt:
            message = "stopped by a person"
        except RsilabError as exc:  # the round's campaign ended on it; the caller hears of it
            self._end(EvolutionState.STOPPED, f"ended by an error: {exc}")
            raise
        state = EvolutionState.STOPPED if message else EvolutionState.FINISHED
        return self._end(state, message or f"{rounds} rounds run")

    def _rounds(self, rounds: int) -> str:
        """Run the rounds; why the evolution stopped early ('' when every round ran)."""
        for number in range(1, rounds + 1):
            if self.stop.asked:
                return "stopped by a person"
            try:
                ended = self._round(number)
            except _EndEvolution as end:
                return end.message
            if ended is not None:
                return ended
        return ""

    # -- a round ---------------------------------------------------------------------------

    def _round(self, number: int) -> str | None:
        """Run round ``number`` and record it; why the evolution stops after it, else None."""
        before = self._require_head()
        version = self._improver_version(before)
        described = self.spec.describe(version)
        self._say(f"round {number}: {described} improves {before.label} {before.id}")
        settings = {"evolution_id": self.evolution_id, "round": number, "improver": described}
        started = time.monotonic()
        interrupted = False
        try:
            note = self._campaign(number, version, settings)
        except KeyboardInterrupt:  # before its campaign's run began (its baseline, say)
            interrupted, note = True, "interrupted"
        campaign = round_campaigns(self.lab, self.evolution_id).get(number)
        if campaign is None:  # stopped before its campaign was opened
            return "stopped by a person" if interrupted or self.stop.asked else note
        person = interrupted or self.stop.asked or campaign.end_reason is EndReason.STOPPED_BY_USER
        state = campaign.state
        after = self._require_head()
        entry = EvolutionRound(
            round=number,
            campaign_id=campaign.id,
            improver=described,
            improver_version_id=None if version is None else version.id,
            head_before=before.id,
            head_after=after.id,
            accepted=after.id != before.id,
            state=str(state),
            wall_s=round(time.monotonic() - started, 3),
            tool_calls=agent_tool_calls(self.lab.store.events(campaign_id=campaign.id)),
            note=note,
        )
        append_round(self.lab, self.evolution_id, entry)
        verdict = f"accepted {after.label} {after.id}" if entry.accepted else "kept the head"
        self._say(
            f"round {number} {state}: {verdict}; {self._experiments(campaign.id)} experiments, "
            f"{entry.tool_calls} tool calls, {entry.wall_s:.1f} s ({note})"
        )
        return "stopped by a person" if person else None

    def _campaign(
        self, number: int, version: SystemVersion | None, settings: dict[str, object]
    ) -> str:
        """Run the round's campaign (one call into the lifecycle); how it ended, in words."""
        policy = RoundPolicy(self._policy(number, version, settings))
        result = run_policy(
            self.lab, self.task, policy, budget=self.budget, stop=self.stop.for_round()
        )
        return result.message

    def _policy(
        self, number: int, version: SystemVersion | None, settings: dict[str, object]
    ) -> CampaignPolicy:
        """Who decides in round ``number``: rsilab's runners, or a harness's improve command."""
        seed = self.seed + number - 1
        if self.spec.kind is ImproverKind.BUILTIN:
            return BuiltinPolicy(
                budget=self.budget, seed=seed, on_progress=self.on_progress,
                extra_settings=settings,
            )  # fmt: skip
        if self.spec.kind is ImproverKind.LLM:
            return LlmPolicy(
                self.lab, agents=self.spec.agents, budget=self.budget, seed=seed,
                on_progress=self.on_progress, extra_settings=settings,
            )  # fmt: skip
        assert version is not None and self.run_improver is not None
        return HarnessRoundPolicy(
            version, budget=self.budget, run_improver=self.run_improver,
            title=f"round {number}: {settings['improver']}", seed=seed, extra_settings=settings,
        )  # fmt: skip

    def _improver_version(self, head: SystemVersion) -> SystemVersion | None:
        """The version whose harness improves this round (None for rsilab's runners)."""
        if self.spec.kind is ImproverKind.SELF:
            try:
                manifest = version_manifest(self.lab, head)
            except ManifestError:
                manifest = None
            try:
                require_improve(manifest, self.spec, f"the head {head.label} {head.id}'s")
            except UserError as exc:
                raise _EndEvolution(exc.message) from None
            return head
        if self.spec.kind is ImproverKind.TEACHER:
            evolution = self.lab.store.get_as(self.evolution_id, Evolution)
            assert evolution.teacher_version_id is not None
            return self.lab.store.get_as(evolution.teacher_version_id, SystemVersion)
        return None

    # -- the lineage and the record --------------------------------------------------------

    def _head(self) -> SystemVersion | None:
        lineage = find_lineage(self.lab.store, self.task.name, LINEAGE)
        return None if lineage is None else self.lab.store.get_as(lineage.head_id, SystemVersion)

    def _require_head(self) -> SystemVersion:
        head = self._head()
        if head is None:
            raise RsilabError(f"lineage {self.task.name}/{LINEAGE} has no head")
        return head

    def _baseline(self) -> SystemVersion:
        self._say(f"evaluating the baseline of {self.task.name} (the lineage has none)")
        services = LabServices(self.lab, judge_in_background=False)
        try:
            return services.controller(self.task).baseline(actor=ACTOR)
        finally:
            services.close()

    def _experiments(self, campaign_id: str) -> int:
        return len(self.lab.store.query_as(Experiment, campaign_id=campaign_id))

    def _end(self, state: EvolutionState, message: str) -> EvolutionResult:
        ended = end_evolution(self.lab, self.evolution_id, state, message)
        head = self._require_head()
        self._say(f"evolution {self.evolution_id} {state}: {message}; head {head.label} {head.id}")
        return EvolutionResult(
            evolution_id=ended.id,
            state=str(state),
            start_id=ended.start_version_id,
            head_id=head.id,
            rounds=list(ended.rounds),
            message=message,
        )

    def _say(self, message: str) -> None:
        if self.on_progress is not None:
            self.on_progress(Progress("round", message, 0, self.budget.experiments))


class _EndEvolution(Exception):
    """The evolution cannot go on (``message`` says why); it ends stopped."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
