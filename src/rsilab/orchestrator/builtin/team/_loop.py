"""The team loop: researchers decide on the loop's thread, each works on a thread of its own.

Each turn: collect what ended, reload the team's view from the records, let the Leader act
(the first assignments once the reference runs are done; a checkpoint every few experiments),
then ask each free researcher (none of its work in flight) for its next step, in turn
(:meth:`~rsilab.orchestrator.builtin.team._researcher.Researcher.step`). An experiment gets its
intent
``exp:<n>`` begun here, so numbers are unique and every order is in the records before it
runs, and goes to the researcher's own thread; other work (a conclusion) goes there too. A
researcher runs one thing at a time; decisions stay sequential and read only the records and
the orders in flight.

Budget: an experiment starts only while done plus running stays under ``budget.experiments``,
so the team never overshoots it. A researcher with nothing to do while the budget allows
more is redirected by the Leader. When the budget is spent and nothing runs, the remaining
verifications are concluded and the best unproposed run is put to the controller once
(as the single runner does), and the campaign is ``finished``.

Stopping is the single loop's (:mod:`rsilab.orchestrator.builtin._loop`): the wall budget or a first
request drains (nothing new starts; running work finishes; ``stopped``), a second cancels
the running jobs (their intents stay pending for the resume). Pending ``exp:<n>`` intents a
dead or stopped run left are run first, each by the researcher that began it.
"""

from __future__ import annotations

import queue
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from rsilab.orchestrator.builtin._context import RunContext
from rsilab.orchestrator.builtin._state import Run
from rsilab.orchestrator.builtin._threaded import ThreadedLoop
from rsilab.orchestrator.builtin.team._leader import Leader, TeamSettings
from rsilab.orchestrator.builtin.team._researcher import ACTED, VERIFIER, Researcher, Work
from rsilab.orchestrator.builtin.team._state import TeamView
from rsilab.orchestrator.builtin.team._voice import QueuedVoice
from rsilab.orchestrator.builtin.worker._agent import ACTION, Order, adopt
from rsilab.orchestrator.campaign import DoneIntent, StopRequest
from rsilab.orchestrator.door import RunnerError
from rsilab.records import CampaignState, DirectionState


@dataclass(frozen=True)
class Task:
    """What a researcher's thread is doing: an experiment (``order``) or other work."""

    researcher: str
    order: Order | None = None
    label: str = ""


class TeamLoop(ThreadedLoop):
    """One run of a team campaign until its budget is spent or it is asked to stop."""

    def __init__(
        self,
        ctx: RunContext,
        researchers: list[Researcher],
        leader: Leader,
        stop: StopRequest,
        settings: TeamSettings,
        lines: queue.SimpleQueue[tuple[str, str, float | None, float | None]],
    ) -> None:
        super().__init__(ctx, stop)
        self.leader, self.settings = leader, settings
        self.researchers = {r.name: r for r in researchers}
        self.lines = lines
        self.inflight: dict[Future[Run | None], Task] = {}
        self.backlog: list[Order] = []
        """Pending ``exp:<n>`` intents a stopped or dead run left, to run again first."""
        self.pools: dict[str, ThreadPoolExecutor] = {}
        self.checkpoint_at = 0
        self.redirected: dict[str, int] = {}
        """Researcher -> experiments done when the Leader last redirected it for idling."""

    # -- the loop -------------------------------------------------------------------------------

    def run(self, check: Callable[[], None]) -> CampaignState:
        """Run the loop; ``check`` (the lease's) is called each turn and may raise."""
        self.check = check
        self.pools = {
            name: ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"rsilab-{name}")
            for name in self.researchers
        }
        try:
            return self._turns()
        except BaseException:
            self.stop.cancel()
            self._settle()
            raise
        finally:
            for pool in self.pools.values():
                pool.shutdown(wait=True)
            self._flush()

    def _turns(self) -> CampaignState:
        start = TeamView.load(self.ctx)
        self.backlog = [Order.from_intent(i) for i in start.view.pending]
        self.checkpoint_at = len(start.view.runs)
        while True:
            try:
                self.check()
                self._harvest()
                tv = TeamView.load(self.ctx)
                self.ctx.say.done = tv.view.settled(self._in_flight())
                state = self._turn(tv)
                self._flush()
                if state is not None:
                    return state
            except KeyboardInterrupt:
                self.stop.request()

    def _turn(self, tv: TeamView) -> CampaignState | None:
        budget, done = self.ctx.budget.experiments, len(tv.view.runs)
        stopped = self._stopping()
        if self.stop.draining:
            return stopped
        if self.backlog and done + self._running() >= budget:  # a smaller budget than before
            for order in self.backlog:
                pending = next(i for i in tv.view.pending if i.key == order.key)
                self.ctx.intents.abandon(pending, "the budget was spent")
            self.backlog.clear()
        if not self.backlog and self._nothing_left(tv.view):
            return CampaignState.FINISHED
        if self._lead(tv):
            return None
        if self._steps(tv):
            return None
        if done >= budget and not self.inflight:
            self._finish()
            return CampaignState.FINISHED
        if not self.inflight:
            raise RunnerError("the built-in team has nothing to do and nothing runs")
        self._wait()
        return None

    def _lead(self, tv: TeamView) -> bool:
        """The Leader's turn; True when it changed the records."""
        if self.backlog:
            return False
        if not tv.assignments:
            if self.inflight or not tv.view.runs:
                return False  # the reference runs first
            for leader, seen, _ in self._leads(tv):
                leader.initial(seen)
            return True
        if len(tv.view.runs) >= self.checkpoint_at + self.settings.checkpoint_every:
            self.checkpoint_at = len(tv.view.runs)
            for leader, seen, orders in self._leads(tv):
                leader.checkpoint(seen, orders)
            return True
        return False

    def _leads(
        self, tv: TeamView, only: str | None = None
    ) -> list[tuple[Leader, TeamView, list[Order]]]:
        """Who leads whom, on which view: the Leader, the whole team; without orientations
        (:attr:`TeamSettings.orientations`), each researcher (or ``only``) as a team of one
        on its own records."""
        if self.settings.orientations:
            return [(self.leader, tv, self._orders())]
        return [
            (
                Leader(self.ctx, [name], self.settings),
                tv.private(name, self.ctx),
                [o for o in self._orders() if o.intent_payload().get("researcher") == name],
            )
            for name in self.researchers
            if only is None or name == only
        ]

    def _steps(self, tv: TeamView) -> bool:
        """The first free researcher's step that does something; True when one did (the
        next decides on the records as they are then)."""
        idle = []
        for name, researcher in self.researchers.items():
            if self._busy(name):
                continue
            mine = [o for o in self.backlog if o.intent_payload().get("researcher", name) == name]
            if mine and len(tv.view.runs) + self._running() < self.ctx.budget.experiments:
                self.backlog.remove(mine[0])
                self._resume(researcher, mine[0])
                return True
            step = researcher.step(tv, self._orders(), self._can_run(tv))
            if step == ACTED:
                return True
            if isinstance(step, Work):
                self._submit(Task(name, label=step.label), step.fn)
                return True
            if isinstance(step, Order):
                self._dispatch(researcher, step)
                return True
            idle.append(name)
        return self._redirect_idle(tv, idle)

    def _redirect_idle(self, tv: TeamView, idle: list[str]) -> bool:
        """Have the Leader redirect the first idle researcher while the budget allows more
        experiments (each at most once per experiment done, so no orientation ping-pongs)."""
        done = len(tv.view.runs)
        for name in idle:
            if self._can_run(tv) and self.redirected.get(name) != done:
                self.redirected[name] = done
                [(leader, seen, orders)] = self._leads(tv, only=name)
                if leader.on_idle(seen, name, orders):
                    return True
        return False

    # -- work on the researchers' threads -------------------------------------------------------

    def _dispatch(self, researcher: Researcher, order: Order) -> None:
        step = self.ctx.intents.begin(order.key, ACTION, order.intent_payload())
        assert not isinstance(step, DoneIntent), f"{order.key} was done already"
        self._submit(Task(researcher.name, order), lambda: researcher.run_order(order, step))

    def _resume(self, researcher: Researcher, order: Order) -> None:
        """Run a pending order again as a new attempt (or adopt the run it already finished)."""
        step = self.ctx.intents.begin(order.key, ACTION, order.intent_payload())
        if isinstance(step, DoneIntent):
            return
        run = adopt(researcher.ctx, order, step)
        if run is not None:
            self._said_run(researcher.name, run)
            return
        self._submit(Task(researcher.name, order), lambda: researcher.run_order(order, step))

    def _submit(self, task: Task, fn: Callable[[], Run | None]) -> None:
        future = self.pools[task.researcher].submit(fn)
        self.inflight[future] = task
        self.ctx.say.running = self._running()

    def _harvest(self) -> None:
        """Collect ended work (a researcher's error is raised here)."""
        ended = [f for f in self.inflight if f.done()]
        for future in sorted(ended, key=lambda f: self.inflight[f].order is None):
            task = self.inflight.pop(future)
            self.ctx.say.running = self._running()
            result = future.result()
            if task.order is None:
                continue
            if result is None:
                self.ctx.say("experiment", f"{task.order.key} cancelled; a resume runs it again")
            else:
                self._said_run(task.researcher, result)

    def _said_run(self, name: str, run: Run) -> None:
        self._flush()
        tv = TeamView.load(self.ctx)
        self.ctx.say.done = tv.view.settled(self._in_flight())
        best = tv.best()
        raw, shown = tv.view.raw, tv.view.raw(best.score) if best else None  # target's units
        title = tv.view.dag.directions[run.direction_id].title
        score = "failed" if run.failed else f"{raw(run.score):.4f}"
        weighed = next((r for r in tv.view.runs if r.experiment_id == run.experiment_id), run)
        if weighed.score < run.score:
            score += " (a non-target benchmark falls beyond its tolerance)"
        a = tv.assignment_of(run)
        who = f"{name} ({a.orientation})" if a is not None else name
        self.ctx.say(
            "experiment",
            f"experiment {self.ctx.say.done}/{self.ctx.budget.experiments} {who} [{title}] "
            f"dev {self.ctx.target} {score} (best {shown if shown is not None else 0.0:.4f})",
            raw(run.score),
            shown,
        )

    # -- the end --------------------------------------------------------------------------------

    def _finish(self) -> None:
        """Conclude the verifications whose re-runs are done, close the others, then propose
        the best unproposed run once."""
        self.ctx.say("campaign", "experiment budget spent")
        tv = TeamView.load(self.ctx)
        for verify_id in tv.verifications():
            d = tv.view.dag.directions[verify_id]
            if d.state.is_finished():
                continue
            owner = self.researchers.get(d.created_by) or next(iter(self.researchers.values()))
            if len(tv.view.runs_in(verify_id)) >= self.ctx.verify_seeds:
                owner.conclude(verify_id)
            else:
                owner.moves.close(
                    d, "the budget ran out before its re-runs", DirectionState.EXHAUSTED
                )
        verifiers = [n for n, a in tv.assignments.items() if a.orientation == VERIFIER]
        proposer = (
            self.researchers[verifiers[0]] if verifiers else next(iter(self.researchers.values()))
        )
        proposer.concluder.propose_best(self.ctx.view())
        self._flush()

    # -- waiting and stopping -------------------------------------------------------------------

    fallback_actor = "researcher-1"

    def _running_experiments(self) -> int:
        return self._running()

    def _draining_message(self) -> str:
        return f"the researchers' running work ({len(self.inflight)}) finishes first"

    def _after_tick(self) -> None:
        self._flush()

    # -- helpers --------------------------------------------------------------------------------

    def _busy(self, name: str) -> bool:
        return any(t.researcher == name for t in self.inflight.values())

    def _orders(self) -> list[Order]:
        """The experiments running, and those a resume is yet to run again."""
        running = [t.order for t in self.inflight.values() if t.order is not None]
        return [*running, *self.backlog]

    def _in_flight(self) -> set[int]:
        return {t.order.n for t in self.inflight.values() if t.order is not None}

    def _running(self) -> int:
        return len(self._in_flight())

    def _can_run(self, tv: TeamView) -> bool:
        """True while a new experiment fits the budget (pending ones counted)."""
        return len(tv.view.runs) + len(self._orders()) < self.ctx.budget.experiments

    def _flush(self) -> None:
        QueuedVoice.flush(self.lines, self.ctx.say)
