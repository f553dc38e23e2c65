"""What the built-in runners that run work on threads share: waiting, stopping, settling.

The single runner (:class:`~rsilab.orchestrator.builtin._loop.CampaignLoop`) and the team runner
(:class:`~rsilab.orchestrator.builtin.team._loop.TeamLoop`) both keep their running work as futures
in
``inflight`` and stop in two steps (a first request drains, a second cancels the running jobs);
:class:`ThreadedLoop` is that part, once.

Both also end early, ``finished``, when the policy has nothing to search (the harness declares no
config file, or the task no search space: :attr:`~rsilab.orchestrator.builtin._context.RunContext.
searchable`): once the reference runs of the head as it is are done, there is no other system the
built-in policy could try, so it says so (:data:`NOTHING_TO_SEARCH`, recorded as the campaign's
end detail with reason ``agents_done``) instead of re-running the same system to the budget.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import Any

from rsilab.orchestrator.builtin._context import RunContext
from rsilab.orchestrator.builtin._state import CampaignView
from rsilab.orchestrator.campaign import StopRequest
from rsilab.records import CampaignState

TICK_S = 0.25
"""How often a wait wakes to check the lease, the stop request and the wall budget."""
NOTHING_TO_SEARCH = (
    "nothing to search: the harness declares no config file or the task no search space, so "
    "the built-in policy ran the current version as it is and stopped; declare a config file "
    "(config = in harness.toml) and a search space, or use an LLM policy to change code"
)
"""The end detail of a campaign whose policy had nothing to search (see the module docstring)."""


class ThreadedLoop:
    """Waiting on running work, announcing a stop, cancelling jobs, settling after an error.

    A subclass fills ``inflight`` and says how it counts running experiments
    (:meth:`_running_experiments`), what the first stop request lets finish
    (:meth:`_draining_message`) and who cancels a job with no actor (:attr:`fallback_actor`).
    """

    fallback_actor = "worker-1"

    def __init__(self, ctx: RunContext, stop: StopRequest) -> None:
        self.ctx, self.stop = ctx, stop
        self.inflight: dict[Future[Any], Any] = {}
        self.deadline = time.monotonic() + ctx.budget.wall_s
        self.check: Callable[[], None] = lambda: None
        """Raises when the lease is lost; the run sets it."""
        self._cancelled_jobs: set[str] = set()
        self._stop_level = 0
        self.done_detail: str | None = None
        """Why the loop finished before its budget was spent (None: it was spent)."""

    def _nothing_left(self, view: CampaignView) -> bool:
        """True (and :attr:`done_detail` set) when the policy has nothing to search and the
        reference runs are done, with nothing running."""
        if self.ctx.searchable or not view.runs or self.inflight or view.pending:
            return False
        self.done_detail = NOTHING_TO_SEARCH
        self.ctx.say("campaign", NOTHING_TO_SEARCH)
        return True

    # -- for subclasses -------------------------------------------------------------------------

    def _running_experiments(self) -> int:
        return len(self.inflight)

    def _draining_message(self) -> str:
        return f"{self._running_experiments()} running experiment(s) finish first"

    def _after_tick(self) -> None:
        """Called after each tick of a wait (the team passes its researchers' lines on)."""

    # -- waiting and stopping -------------------------------------------------------------------

    def _wait(self, check: bool = True) -> None:
        """Until some work ends, the stop request escalates or the wall budget runs out; the
        lease is checked each tick unless ``check`` is False."""
        level, over = self.stop.cancelling, time.monotonic() > self.deadline
        while self.inflight:
            if self.stop.cancelling:
                self._cancel_jobs()
            ended, _ = wait(list(self.inflight), timeout=TICK_S, return_when=FIRST_COMPLETED)
            self._after_tick()
            if ended or self.stop.cancelling != level:
                return
            if over != (time.monotonic() > self.deadline) and not self.stop.draining:
                return
            if check:
                self.check()

    def _stopping(self) -> CampaignState | None:
        """A turn's stop step: once the wall budget has passed, the run drains; while it
        drains, this waits for the work in flight. STOPPED once nothing runs; None otherwise
        (the caller ends its turn when ``stop.draining``, and goes on when not)."""
        if not self.stop.draining and time.monotonic() > self.deadline:
            self.ctx.say("campaign", "wall budget spent; resume to continue")
            self.stop.drain()
        if not self.stop.draining:
            return None
        self._announce_stop()
        if not self.inflight:
            return CampaignState.STOPPED
        self._wait()
        return None

    def _announce_stop(self) -> None:
        level = 2 if self.stop.cancelling else 1
        if level == self._stop_level:
            return
        self._stop_level = level
        if not self.inflight:
            self.ctx.say("campaign", "stopping; resume to continue")
        elif level == 1:
            self.ctx.say(
                "campaign", f"stopping: {self._draining_message()} (Ctrl-C again to cancel)"
            )
        else:
            self.ctx.say(
                "campaign",
                f"stopping: cancelling {self._running_experiments()} running experiment(s)",
            )

    def _cancel_jobs(self) -> None:
        """Kill the campaign's running agent jobs (each once); their owners close up."""
        self.ctx.door.cancel_running_jobs(self.fallback_actor, self._cancelled_jobs)

    def _settle(self) -> None:
        """After an error: cancel what runs and wait for all work to end (its own errors are
        dropped: the first one is being raised)."""
        while self.inflight:
            try:
                self._wait(check=False)  # the lease may be what failed
                for future in [f for f in self.inflight if f.done()]:
                    self.inflight.pop(future)
            except KeyboardInterrupt:
                continue
