"""The campaign loop: Main decides on the main thread, up to ``workers`` experiments run at once.

Each turn: collect the experiments that ended, reload the campaign from the records, then ask the
Main policy for its next step (:mod:`rsilab.orchestrator.builtin.main._agent`) and carry it out: a
DAG action is done there and then; an experiment gets its intent ``exp:<n>`` begun here (so numbers
are unique and in the records before anything runs), goes to a free Worker thread, and Main waits
until the experiment is recorded before deciding again (so its next move sees it). Main's decisions
and reviews stay sequential and depend only on the records and on the orders in flight, which are
the campaign's pending intents.

Budget: an experiment starts only while done plus running stays under ``budget.experiments``
(the race's re-runs count like any other), so parallel Workers never overshoot it. The
campaign is ``finished`` when that many are done, or earlier when the search space is exhausted
(:data:`SPACE_EXHAUSTED`); then the race's winner is proposed, once, if the Reviewer predicts
the controller accepts it. Intents a dead runner left pending are run first, as new attempts
of the same keys (or completed from the experiment that attempt had already closed).

Stopping: the wall budget, or a first stop request (Ctrl-C, or KeyboardInterrupt raised on
the main thread), drains: nothing new starts, running experiments finish, the campaign is
``stopped``. A second request cancels the running jobs (their experiments stay open and their
intents pending: the resume continues them as new attempts). A Worker's error cancels the others
and is raised once they have ended.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from rsilab.orchestrator.builtin._context import RunContext
from rsilab.orchestrator.builtin._state import CampaignView, Run
from rsilab.orchestrator.builtin._threaded import TICK_S, ThreadedLoop
from rsilab.orchestrator.builtin.main._agent import ACTED, EXHAUSTED, WAIT, MainAgent
from rsilab.orchestrator.builtin.main._race import race_budget
from rsilab.orchestrator.builtin.worker._agent import ACTION, Order, Worker, adopt
from rsilab.orchestrator.campaign import DoneIntent, StopRequest
from rsilab.orchestrator.door import RunnerError
from rsilab.records import CampaignState, Intent

TOO_SMALL = (
    "a budget of {budget} experiments keeps none to re-run the best config and the reference, "
    "which a proposal needs: this campaign searches but proposes nothing (give "
    "--budget experiments=6 or more for a chance of an accepted version)"
)
"""Said when a campaign starts with too small a budget to propose anything."""
SPACE_EXHAUSTED = (
    "the search space is exhausted: every direction the built-in policy could open was closed "
    "with no config left to try, so it proposed its best and stopped before the budget"
)
"""The end detail of a campaign whose search space ran out (recorded with ``agents_done``)."""


class CampaignLoop(ThreadedLoop):
    """One run of a campaign until its budget is spent or it is asked to stop."""

    def __init__(self, ctx: RunContext, workers: int, stop: StopRequest) -> None:
        super().__init__(ctx, stop)
        self.main = MainAgent(ctx)
        self.worker = Worker(ctx, stop)
        self.free = [f"worker-{i}" for i in range(1, max(1, workers) + 1)]
        self.slots = len(self.free)
        self.inflight: dict[Future[Run | None], tuple[Order, str]] = {}

    @property
    def running(self) -> int:
        return len(self.inflight)

    def _in_flight(self) -> set[int]:
        return {order.n for order, _ in self.inflight.values()}

    @property
    def done(self) -> int:
        """Experiments done, as last read from the records (:meth:`CampaignView.settled`)."""
        return self.ctx.say.done

    @done.setter
    def done(self, value: int) -> None:
        self.ctx.say.done = value

    def run(self, check: Callable[[], None]) -> CampaignState:
        """Run the loop; ``check`` (the lease's) is called each turn and may raise."""
        self.check = check
        pool = ThreadPoolExecutor(max_workers=self.slots, thread_name_prefix="rsilab-worker")
        try:
            return self._turns(pool)
        except BaseException:
            self.stop.cancel()
            self._settle()
            raise
        finally:
            pool.shutdown(wait=True)

    def _turns(self, pool: ThreadPoolExecutor) -> CampaignState:
        start = self.ctx.view()
        budget = self.ctx.budget.experiments
        if self.ctx.searchable and race_budget(budget) == 0:
            # a proposal needs re-runs of the reference and the winner, which only the race makes
            self.ctx.say("campaign", TOO_SMALL.format(budget=budget))
        backlog = [Order.from_intent(i) for i in start.pending]
        while True:
            try:
                self.check()
                self._harvest()
                view = self.ctx.view()
                self.done = view.settled(self._in_flight())
                state = self._turn(view, backlog, pool)
                if state is not None:
                    return state
            except KeyboardInterrupt:
                self.stop.request()

    def _turn(
        self, view: CampaignView, backlog: list[Order], pool: ThreadPoolExecutor
    ) -> CampaignState | None:
        """One turn; the final state when the loop is over."""
        budget = self.ctx.budget.experiments
        stopped = self._stopping()
        if self.stop.draining:
            return stopped
        if backlog and self.done + self.running >= budget:  # a smaller budget than before
            for order in backlog:
                self.ctx.intents.abandon(_pending(view, order), "the budget was spent")
            backlog.clear()
        if self.done >= budget and not self.inflight:
            self.ctx.say("campaign", "experiment budget spent")
            self.main.conclude_ready(view)
            return CampaignState.FINISHED
        if not backlog and self._nothing_left(view):
            return CampaignState.FINISHED
        can_dispatch = self.done + self.running < budget and self.running < self.slots
        if backlog and can_dispatch:
            self._resume(backlog.pop(0), pool)
            return None
        orders = [o for o, _ in self.inflight.values()]
        decision = self.main.step(view, orders, can_dispatch)
        if isinstance(decision, Order):
            self._dispatch(decision, pool)
        elif decision == EXHAUSTED and not self.inflight:
            self.done_detail = SPACE_EXHAUSTED
            self.ctx.say("campaign", SPACE_EXHAUSTED)
            self.main.conclude_ready(view)
            return CampaignState.FINISHED
        elif decision in (WAIT, EXHAUSTED):
            if not self.inflight:
                raise RunnerError("the built-in Main policy has nothing to do and nothing runs")
            self._wait()
        else:
            assert decision == ACTED
        return None

    # -- experiments -----------------------------------------------------------------------------

    def _resume(self, order: Order, pool: ThreadPoolExecutor) -> None:
        """Run a pending order again as a new attempt (or adopt the run it already finished)."""
        step = self.ctx.intents.begin(order.key, ACTION, order.intent_payload())
        if isinstance(step, DoneIntent):
            return
        run = adopt(self.ctx, order, step)
        if run is not None:
            self._said_run(run)
            return
        self._start(order, step, pool)

    def _dispatch(self, order: Order, pool: ThreadPoolExecutor) -> None:
        step = self.ctx.intents.begin(order.key, ACTION, order.intent_payload())
        assert not isinstance(step, DoneIntent), f"{order.key} was done already"
        self._start(order, step, pool)

    def _start(self, order: Order, step: Intent, pool: ThreadPoolExecutor) -> None:
        worker = self.free.pop(0)
        created = threading.Event()
        future = pool.submit(self.worker.run, order, step, worker, created)
        self.inflight[future] = (order, worker)
        self.ctx.say.running = self.running
        while not created.wait(TICK_S) and not future.done():
            pass  # Main's next move must see this experiment in the records

    def _harvest(self) -> None:
        """Collect ended experiments (a Worker's error is raised here)."""
        ended = sorted((f for f in self.inflight if f.done()), key=lambda f: self.inflight[f][0].n)
        for future in ended:
            order, worker = self.inflight.pop(future)
            self.free.append(worker)
            self.ctx.say.running = self.running
            run = future.result()
            if run is None:
                self.ctx.say("experiment", f"{order.key} cancelled; a resume runs it again")
            else:
                self._said_run(run)

    def _said_run(self, run: Run) -> None:
        view = self.ctx.view()
        self.done = view.settled(self._in_flight())
        target = self.ctx.target
        measured = [r.scores.get(target, view.raw(r.score)) for r in view.runs if not r.failed]
        best = self.ctx.target_benchmark.best(measured) if measured else 0.0
        title = view.dag.directions[run.direction_id].title
        score = "failed" if run.failed else f"{view.raw(run.score):.4f}"
        weighed = next((r for r in view.runs if r.experiment_id == run.experiment_id), run)
        if weighed.score < run.score:
            score += " (a non-target benchmark falls beyond its tolerance)"
        self.ctx.say(
            "experiment",
            f"experiment {self.done}/{self.ctx.budget.experiments} [{title}] "
            f"dev {target} {score} (best {best:.4f})",
            view.raw(run.score),
            best,
        )


def _pending(view: CampaignView, order: Order) -> Intent:
    return next(i for i in view.pending if i.key == order.key)
