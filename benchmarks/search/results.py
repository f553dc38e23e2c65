"""The finished runs of full search tables, kept so that a run of hours can be resumed.

A full search table needs hundreds of experiments (textcls: many hours on 2 cores), more than
one sitting. Each finished run is appended to ``search/<task>.jsonl`` under
:data:`benchmarks.kept.RESULTS` (with the commit it was measured at), and a later ``python -m
benchmarks --only search_<task>`` runs only the (policy, seed) pairs of the plan that are not
there yet. Runs of another budget or another data split (a lab secret other than
:func:`~benchmarks.search.protocol.split_secret`'s) are ignored, never mixed in: their
baseline and final scores are on other private items.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from benchmarks.kept import RESULTS, JsonLines, KeptResultsError
from benchmarks.search.protocol import RunResult

__all__ = ["KeptResultsError", "RunLog", "log_for"]


class RunLog:
    """The kept runs of one task's search table."""

    def __init__(self, lines: JsonLines) -> None:
        self.lines = lines

    @property
    def path(self) -> Path:
        """The file the runs are kept in."""
        return self.lines.path

    def load(self, budget: int, split: str) -> dict[tuple[str, int], RunResult]:
        """The runs kept with ``budget`` experiments on split ``split``, by (policy, seed);
        the last line of a pair wins. Raises KeptResultsError on a line that is not a run."""
        return {
            (run.policy, run.seed): run
            for run in self.lines.read_as(RunResult)
            if run.budget == budget and run.split == split
        }

    def append(self, run: RunResult) -> None:
        """Keep ``run`` (flushed at once)."""
        self.lines.append(dataclasses.asdict(run))


def log_for(task: str, table: str = "") -> RunLog:
    """The :class:`RunLog` of ``task``: ``benchmarks/results/search/<task>.jsonl``, or
    ``<task>-<table>.jsonl`` for another table of the same task."""
    name = f"{task}-{table}" if table else task
    return RunLog(JsonLines(RESULTS / "search" / f"{name}.jsonl"))
