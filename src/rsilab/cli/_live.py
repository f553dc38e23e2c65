"""The live view of a running campaign, for ``rsilab run`` and ``rsilab resume`` on a terminal.

:class:`LiveView` is a Rich renderable: hand it to ``rich.live.Live`` and feed it the runner's
progress with :meth:`LiveView.update` (on the runner's thread). Each update reads what the
view shows from the records (directions with their status and runs, the lineage's accepted
versions, LLM tokens spent), so it shows the campaign as the ledger has it, not as the runner
remembers it; rendering (on Live's refresh thread) reads the last snapshot and the clock, and,
while the campaign is starting or its baseline is being evaluated (when the runner says
nothing), reads the records again at most once every :data:`IDLE_READ_S` seconds, so the
baseline's progress (seed k of n) shows as its jobs finish. Off a terminal the CLI prints the
progress lines instead.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from rsilab.controller.lineage import find_lineage, lineage_versions
from rsilab.orchestrator.campaign import Progress
from rsilab.orchestrator.research.dag import ResearchDag
from rsilab.records import Campaign, Candidate, CandidateState
from rsilab.store import Store
from rsilab.tasks import Budget, Task, shown_order
from rsilab.web.progress import BaselineProgress, baseline_progress

MESSAGES = 6
"""Progress messages kept on screen."""
DIRECTION_ROWS = 8
"""Directions shown; open ones first, then the most recent closed ones."""
IDLE_READ_S = 1.0
"""While the runner is silent (starting, baseline), how often rendering reads the records."""


@dataclass(frozen=True)
class DirectionRow:
    title: str
    state: str
    runs: int


@dataclass(frozen=True)
class BenchmarkRow:
    """A benchmark's baseline score and the best score of the lineage's versions (the
    baseline's own until a version beats it)."""

    name: str
    baseline: float | None
    best: float | None
    label: str


@dataclass(frozen=True)
class Snapshot:
    """What the view shows from the records, read at the last update."""

    campaign_id: str | None = None
    directions: tuple[DirectionRow, ...] = ()
    hidden_directions: int = 0
    benchmarks: tuple[BenchmarkRow, ...] = ()
    accepted: int = 0
    tokens: int | None = None
    baseline: BaselineProgress | None = None
    """The baseline's progress while the campaign waits for it (None otherwise)."""


class LiveView:
    """Experiments done and running, budget left, best accepted scores, directions, news."""

    def __init__(
        self,
        store: Store,
        task: Task,
        budget: Budget,
        *,
        campaign_id: str | None = None,
        agents: str = "builtin",
        workers: int = 1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store, self.task, self.budget = store, task, budget
        self.agents, self.workers, self.clock = agents, workers, clock
        self.started = clock()
        self.done = self.running = 0
        self.messages: deque[str] = deque(maxlen=MESSAGES)
        self.snapshot = Snapshot(campaign_id=campaign_id)
        self._tokens = 0
        self._seen_seq = 0
        self._reading = threading.Lock()
        self._read_at = clock()
        # a new run's campaign is the one that appears after this view was made
        self._older = set() if campaign_id else {c.id for c in store.query_as(Campaign)}

    # -- input (the runner's thread) ----------------------------------------------------------

    def update(self, progress: Progress) -> None:
        """Take one progress line and read the records again."""
        self.done, self.running = progress.experiments, progress.running
        self.messages.append(progress.message)
        self.refresh()

    def refresh(self) -> None:
        """Read the records the view shows (a new campaign is found on the first call)."""
        with self._reading:
            self._read_at = self.clock()
            self._read()

    def _read(self) -> None:
        campaign_id = self.snapshot.campaign_id or self._new_campaign()
        if campaign_id is None:
            return
        dag = ResearchDag.load(self.store, campaign_id)
        live = [d for d in dag.directions.values() if not d.state.is_finished()]
        ended = [d for d in dag.directions.values() if d.state.is_finished()]
        rows = live + sorted(ended, key=lambda d: d.created_at, reverse=True)
        shown = [DirectionRow(d.title, str(d.state), len(dag.experiments[d.id])) for d in rows]
        accepted = [
            c
            for c in self.store.query_as(Candidate, campaign_id=campaign_id)
            if c.state == CandidateState.ACCEPTED
        ]
        self.snapshot = Snapshot(
            campaign_id=campaign_id,
            directions=tuple(shown[:DIRECTION_ROWS]),
            hidden_directions=max(0, len(shown) - DIRECTION_ROWS),
            benchmarks=self._benchmarks(),
            accepted=len(accepted),
            tokens=None if self.agents == "builtin" else self._tokens_used(campaign_id),
            baseline=baseline_progress(self.store, self.store.get_as(campaign_id, Campaign)),
        )

    def _idle_read(self) -> None:
        """Read the records again while the runner is silent: before the campaign is found
        and while its baseline runs; never waits for a read the runner's thread is doing."""
        snap = self.snapshot
        waiting = snap.campaign_id is None or snap.baseline is not None
        if not waiting or self.clock() - self._read_at < IDLE_READ_S:
            return
        if self._reading.acquire(blocking=False):
            try:
                self._read_at = self.clock()
                self._read()
            finally:
                self._reading.release()

    def _new_campaign(self) -> str | None:
        """The campaign of the task opened since this view was made (this run's)."""
        found = [
            c
            for c in self.store.query_as(Campaign)
            if c.task.name == self.task.name and c.id not in self._older
        ]
        return max(found, key=lambda c: c.created_at).id if found else None

    def _benchmarks(self) -> tuple[BenchmarkRow, ...]:
        lineage = find_lineage(self.store, self.task.name)
        versions = lineage_versions(self.store, lineage) if lineage is not None else []
        rows = []
        for bench in shown_order(self.task.benchmarks):
            scored = [
                (v.scores[bench.name].value, v.label) for v in versions if bench.name in v.scores
            ]
            base = scored[0][0] if scored else None
            best = max(scored, key=lambda s: s[0], default=None)  # the baseline until a gain
            rows.append(
                BenchmarkRow(bench.name, base, best[0] if best else None, best[1] if best else "")
            )
        return tuple(rows)

    def _tokens_used(self, campaign_id: str) -> int:
        """LLM tokens (in + out) of the campaign's events with a cost, read incrementally."""
        for event in self.store.events(after=self._seen_seq, campaign_id=campaign_id):
            self._seen_seq = event.seq
            if event.cost is not None:
                self._tokens += event.cost.tokens_in + event.cost.tokens_out
        return self._tokens

    # -- output (any thread) ---------------------------------------------------------------------

    def __rich__(self) -> RenderableType:
        self._idle_read()
        snap = self.snapshot
        head = Text.assemble(
            ("rsilab ", "bold"),
            f"{self.task.name} · campaign {snap.campaign_id or '(starting)'} · ",
            f"{self.agents}, {self.workers} worker(s)",
        )
        return Group(head, self._budget(snap), self._scores(snap), self._dag(snap), self._news())

    def _budget(self, snap: Snapshot) -> Table:
        table = Table.grid(padding=(0, 2))
        left = max(0, self.budget.experiments - self.done - self.running)
        table.add_row(
            Text("experiments", style="bold"),
            f"{self.done} done, {self.running} running, {left} left of {self.budget.experiments}",
        )
        used = self.clock() - self.started
        table.add_row(
            Text("wall time", style="bold"),
            f"{_duration(used)} used, {_duration(max(0.0, self.budget.wall_s - used))} left",
        )
        if snap.baseline is not None:
            table.add_row(Text("baseline", style="bold"), snap.baseline.text())
        table.add_row(
            Text("accepted", style="bold"), f"{snap.accepted} candidate(s) in this campaign"
        )
        if snap.tokens is not None:
            table.add_row(
                Text("tokens", style="bold"),
                f"{snap.tokens:,} used, {max(0, self.budget.tokens - snap.tokens):,} left",
            )
        return table

    def _scores(self, snap: Snapshot) -> Table:
        table = Table(title="best accepted so far", title_justify="left", expand=False)
        for column in ("benchmark", "baseline", "best", "version"):
            table.add_column(column)
        for row in snap.benchmarks:
            table.add_row(row.name, _score(row.baseline), _score(row.best), row.label or "-")
        return table

    def _dag(self, snap: Snapshot) -> Table:
        table = Table(title="directions", title_justify="left", expand=False)
        for column in ("status", "runs", "title"):
            table.add_column(column)
        for row in snap.directions:
            table.add_row(row.state, str(row.runs), row.title)
        if snap.hidden_directions:
            table.add_row("", "", Text(f"... {snap.hidden_directions} more", style="dim"))
        return table

    def _news(self) -> Group:
        return Group(*(Text(m, style="dim") for m in self.messages))


def _score(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"
