"""A team's researcher: its next step, decided from the records by its orientation.

:meth:`Researcher.step` runs on the loop's thread and returns an experiment to run (an
:class:`~rsilab.orchestrator.builtin.worker._agent.Order`), other :class:`Work` for the researcher's
own thread (concluding a verification, which may wait on the Host Controller), :data:`ACTED` (it
changed the records: decide again) or :data:`IDLE` (nothing to do now). In order:

1. before the Leader's first assignment: the reference runs, the lineage head's config on
   as many seeds as the team has researchers, two at most (their spread is the first noise
   estimate);
2. tidying up after a redirect: its verifications whose re-runs are done are concluded, those
   not done are closed when it is no longer a verifier, and its directions of an earlier
   assignment are closed;
3. its orientation's behaviour (:mod:`rsilab.orchestrator.builtin.team._moves`,
   :mod:`rsilab.orchestrator.builtin.team._analyst`,
   :mod:`rsilab.orchestrator.builtin.team._verify`):
   explorer, exploiter, verifier and analyst; an orientation the built-in policy has no
   behaviour for (one a person added) is carried out as an explorer's.

Every experiment goes to the researcher's working direction for its assignment (made on first
use, its plan naming the assignment), or to its verification; it runs in the researcher's own
workspace as the Worker ``researcher-<k>``, and an exploiter's move that followed a finding
records its adoption once the run is done.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Literal

from pydantic import JsonValue

from rsilab.orchestrator.builtin._context import RunContext
from rsilab.orchestrator.builtin._state import Run, knobs_plan
from rsilab.orchestrator.builtin.main._moves import Moves
from rsilab.orchestrator.builtin.reviewer._agent import Reviewer
from rsilab.orchestrator.builtin.reviewer._conclude import Concluder
from rsilab.orchestrator.builtin.team._analyst import due, publish, settled_knobs
from rsilab.orchestrator.builtin.team._moves import Move, contrast, effects_from, exploit, explore
from rsilab.orchestrator.builtin.team._state import REFERENCE_TITLE, TeamView, plan_mark
from rsilab.orchestrator.builtin.team._verify import conclude_verification, open_verification
from rsilab.orchestrator.builtin.worker._agent import Order, Worker
from rsilab.orchestrator.campaign import StopRequest
from rsilab.records import Assignment, Direction, Intent

ACTED: Literal["acted"] = "acted"
IDLE: Literal["idle"] = "idle"
EXPLORER, EXPLOITER, VERIFIER, ANALYST = "explorer", "exploiter", "verifier", "analyst"

HYPOTHESES = {
    EXPLORER: "wide moves on the knobs the team tried least find a region it has not seen",
    EXPLOITER: "small moves around the team's best config, along supported findings, raise it",
    ANALYST: "contrasts on one knob at a time settle which knobs matter and which way",
}


@dataclass(frozen=True)
class Work:
    """Something other than an experiment for the researcher's thread."""

    label: str
    fn: Callable[[], None]


Step = Order | Work | Literal["acted", "idle"]


class Researcher:
    """One persistent researcher of a team (see the module docstring)."""

    def __init__(
        self,
        name: str,
        ctx: RunContext,
        stop: StopRequest,
        reference_runs: int,
        share_memory: bool = True,
    ):
        self.name, self.ctx, self.share_memory = name, ctx, share_memory
        self.reviewer = Reviewer(ctx)
        self.moves = Moves(ctx)
        self.concluder = Concluder(ctx, self.reviewer, self.moves, proposer=name)
        self.worker = Worker(ctx, stop)
        self.reference_runs = reference_runs

    # -- the step -------------------------------------------------------------------------------

    def step(self, tv: TeamView, inflight: list[Order], can_run: bool) -> Step:
        """The researcher's next step (see the module docstring)."""
        if not self.share_memory:
            tv = tv.private(self.name, self.ctx)
        assignment = tv.assignments.get(self.name)
        if assignment is None:
            return self._reference(tv, inflight, can_run)
        tidied = self._tidy(tv, assignment)
        if tidied is not None:
            return tidied
        behaviour = {
            EXPLOITER: self._exploiter,
            VERIFIER: self._verifier,
            ANALYST: self._analyst,
        }.get(assignment.orientation, self._explorer)
        return behaviour(tv, assignment, inflight, can_run)

    def _reference(self, tv: TeamView, inflight: list[Order], can_run: bool) -> Step:
        d = tv.reference_direction()
        done = len(tv.view.runs_in(d.id)) if d is not None else 0
        begun = done + sum(1 for o in inflight if o.why.startswith("reference"))
        if not can_run or begun >= self.reference_runs:
            return IDLE
        if d is None:
            made = self.ctx.door.main(
                "create_direction",
                title=REFERENCE_TITLE,
                hypothesis="the current version's dev score, and how much it moves by seed",
                plan=knobs_plan([], "run the lineage head's config unchanged, once per seed"),
            )
            direction_id = str(made["id"])
        else:
            direction_id = d.id
        why = "reference: the current version" if begun == 0 else "reference re-run: a new seed"
        return self._order(tv, inflight, direction_id, {}, why, None)

    def _tidy(self, tv: TeamView, assignment: Assignment) -> Step | None:
        for d in tv.own_directions(self.name):
            if tv.view.is_verify(d):
                if len(tv.view.runs_in(d.id)) >= self.ctx.verify_seeds:
                    return Work(f"conclude {d.id}", partial(self.conclude, d.id))
                if assignment.orientation != VERIFIER:
                    return self._close(d, "its verifier was redirected before the re-runs")
            elif d.title == REFERENCE_TITLE:
                return self._close(d, "the reference runs are done")
            elif plan_mark(d, "assignment") != assignment.id:
                return self._close(d, f"redirected: now {assignment.orientation}, {assignment.id}")
        return None

    def _close(self, d: Direction, why: str) -> Step:
        self.moves.close(d, why)
        return ACTED

    # -- the orientations -----------------------------------------------------------------------

    def _explorer(self, tv: TeamView, a: Assignment, inflight: list[Order], can_run: bool) -> Step:
        if not can_run:
            return IDLE
        return self._move(tv, a, inflight, explore(self.ctx, tv, inflight, self._rng(tv, inflight)))

    def _exploiter(self, tv: TeamView, a: Assignment, inflight: list[Order], can_run: bool) -> Step:
        if not can_run:
            return IDLE
        found = self.ctx.door.main(
            "query_findings", status="supported", metric=self.ctx.target, limit=50
        )["findings"]
        if not self.share_memory:
            found = [f for f in found if f.get("author") == self.name]
        effects = effects_from(found, self.ctx.space)
        move = exploit(self.ctx, tv, inflight, self._rng(tv, inflight), effects)
        return self._move(tv, a, inflight, move)

    def _analyst(self, tv: TeamView, a: Assignment, inflight: list[Order], can_run: bool) -> Step:
        publications = due(self.ctx, tv)
        for pub in publications:
            out = publish(self.ctx, tv, pub)
            self.ctx.say("finding", f"finding {out['id']} on {pub.groups.knob}: {out['status']}")
        if publications:
            return ACTED
        if not can_run:
            return IDLE
        settled = settled_knobs(self.ctx, tv)
        move = contrast(self.ctx, tv, inflight, self._rng(tv, inflight), settled)
        return self._move(tv, a, inflight, move)

    def _verifier(self, tv: TeamView, a: Assignment, inflight: list[Order], can_run: bool) -> Step:
        if not can_run:
            return IDLE
        marks = tv.verifications()
        for d in tv.own_directions(self.name):
            if d.id in marks:  # its open verification: the next re-run
                source = _run(tv, marks[d.id])
                why = f"verify: re-run {source.experiment_id} on a fresh seed"
                return self._order(tv, inflight, d.id, dict(source.config), why, a)
        left = self.ctx.budget.experiments - len(tv.view.runs) - len(inflight)
        candidates = tv.unverified(self.ctx.space, inflight)
        if left < self.ctx.verify_seeds or not candidates:
            return IDLE
        source = candidates[0]
        title = tv.view.dag.directions[source.direction_id].title
        verify_id = open_verification(self.ctx, source, title)
        why = f"verify: re-run {source.experiment_id} on a fresh seed"
        return self._order(tv, inflight, verify_id, dict(source.config), why, a)

    # -- helpers --------------------------------------------------------------------------------

    def _move(self, tv: TeamView, a: Assignment, inflight: list[Order], move: Move | None) -> Step:
        if move is None:
            return IDLE
        direction_id = self._working(tv, a)
        return self._order(tv, inflight, direction_id, move.config, move.why, a, move)

    def _working(self, tv: TeamView, a: Assignment) -> str:
        """The researcher's open direction for ``a`` (made on first use)."""
        for d in tv.own_directions(self.name):
            if plan_mark(d, "assignment") == a.id and not tv.view.is_verify(d):
                return d.id
        made = self.ctx.door.main(
            "create_direction",
            title=f"{self.name} {a.orientation}",
            hypothesis=HYPOTHESES.get(a.orientation, HYPOTHESES[EXPLORER]),
            plan=knobs_plan(
                [k.name for k in self.ctx.space],
                f"orientation: {a.orientation}\nassignment: {a.id}",
            ),
        )
        self.ctx.say("direction", f"direction {self.name} {a.orientation}")
        return str(made["id"])

    def _order(
        self,
        tv: TeamView,
        inflight: list[Order],
        direction_id: str,
        config: dict[str, JsonValue],
        why: str,
        a: Assignment | None,
        move: Move | None = None,
    ) -> Order:
        n = max([tv.view.last_index, *(o.n for o in inflight)]) + 1
        payload = {
            "direction_id": direction_id,
            "config": config,
            "why": why,
            "researcher": self.name,
            "assignment": a.id if a is not None else None,
        }
        if move is not None and move.finding_id is not None:
            payload |= {"finding_id": move.finding_id, "tag": move.tag}
        return Order(n, direction_id, config, why, payload)

    def _rng(self, tv: TeamView, inflight: list[Order]) -> random.Random:
        n = max([tv.view.last_index, *(o.n for o in inflight)]) + 1
        return random.Random(f"{self.ctx.seed}:{self.name}:{n}")

    # -- on the researcher's thread -------------------------------------------------------------

    def run_order(self, order: Order, intent: Intent) -> Run | None:
        """Run ``order`` in the researcher's workspace; then record the adoption of the finding
        it followed, if it followed one. The run, or None when it was cancelled."""
        run = self.worker.run(order, intent, self.name, threading.Event())
        finding = order.intent_payload().get("finding_id")
        if run is not None and isinstance(finding, str):
            self.ctx.door.worker(
                self.name,
                "adopt_finding",
                finding_id=finding,
                mode="adopted",
                note=f"an exploiter's move followed its effect tag "
                f"{order.intent_payload().get('tag', '')!r}",
                experiment_ids=[run.experiment_id],
                direction_id=order.direction_id,
            )
        return run

    def conclude(self, verify_id: str) -> None:
        """Conclude the researcher's verification ``verify_id`` (see ``_team_verify``)."""
        conclude_verification(self.ctx, self.reviewer, self.concluder, verify_id)


def _run(tv: TeamView, experiment_id: str) -> Run:
    return next(r for r in tv.view.runs if r.experiment_id == experiment_id)
