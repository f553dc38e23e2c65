"""The raw results of full search runs, kept so that a run of several hours can be resumed.

A full search table needs hundreds of experiments (textcls: many hours on 2 cores), more than
one sitting. Each finished run is appended as one JSON line to ``<task>.jsonl`` under
:data:`RESULTS` (with the commit it was measured at), and a later ``python -m benchmarks
--only search_<task>`` runs only the (policy, seed) pairs of the plan that are not there yet.
The files are committed beside the tables they produce, so anyone can recompute a table or
check a number. Delete a task's file to measure it afresh (after changing the policies or the
controller, for example); runs of another budget are ignored, never mixed in.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path
from typing import Any

from benchmarks.search.protocol import RunResult

RESULTS = Path(__file__).parent.parent / "results" / "search"
"""Where the JSONL files live: ``benchmarks/results/search``."""


class ResultsError(Exception):
    """A results file cannot be read; the message names the file, the line and the fix."""


class RunLog:
    """The finished runs of one task: read once, appended to as runs finish (thread-safe)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def load(self, budget: int) -> dict[tuple[str, int], RunResult]:
        """The runs recorded with ``budget`` experiments, by (policy, seed); the last line of
        a pair wins. Raises :class:`ResultsError` on a line that is not a run."""
        runs: dict[tuple[str, int], RunResult] = {}
        if not self.path.exists():
            return runs
        names = {f.name for f in dataclasses.fields(RunResult)}
        for number, line in enumerate(self.path.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            try:
                data: dict[str, Any] = json.loads(line)
                run = RunResult(**{k: v for k, v in data.items() if k in names})
            except (json.JSONDecodeError, TypeError) as exc:
                raise ResultsError(
                    f"{self.path}:{number} is not a recorded search run ({exc}); remove that "
                    "line (or the file, to measure the task afresh) and run the suite again"
                ) from exc
            if run.budget == budget:
                runs[(run.policy, run.seed)] = run
        return runs

    def append(self, run: RunResult) -> None:
        """Record ``run`` as one line (flushed, so a killed benchmark keeps what finished)."""
        line = json.dumps(dataclasses.asdict(run), sort_keys=True)
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a") as out:
                out.write(line + "\n")
                out.flush()


def log_for(task: str) -> RunLog:
    """The :class:`RunLog` of ``task`` under :data:`RESULTS`."""
    return RunLog(RESULTS / f"{task}.jsonl")
