"""Results kept as JSON lines, so that a benchmark of hours can stop and resume.

A long full suite appends each finished unit of work (a search run, a campaign) to a ``.jsonl``
file under :data:`RESULTS` as soon as it finishes, with the commit it was measured at; a later
run reads the file and does only what is missing. The files are committed beside the tables
they produce, so anyone can recompute a table or check a number. Delete a file to measure
afresh (after changing what it measures).
"""

from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

RESULTS = Path(__file__).parent / "results"
"""Where the kept results live: ``benchmarks/results``."""
RUN_NOTHING_NEW = False
"""Set by ``python -m benchmarks --from-kept``: suites with kept results make their tables from
what is kept and run nothing new (a table of a run cut short, marked as partial)."""


class KeptResultsError(Exception):
    """A kept-results file cannot be read; the message names the file, the line and the fix."""


class JsonLines:
    """One kept-results file: every line a JSON object; appends are thread-safe and flushed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def read(self) -> list[tuple[int, dict[str, Any]]]:
        """(line number, object) of every non-blank line; KeptResultsError on one that is
        not a JSON object."""
        if not self.path.exists():
            return []
        out = []
        for number, line in enumerate(self.path.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                raise self.bad_line(number, str(exc)) from exc
            if not isinstance(data, dict):
                raise self.bad_line(number, "not a JSON object")
            out.append((number, data))
        return out

    def read_as(self, cls: type[T]) -> list[T]:
        """Every line as an instance of the dataclass ``cls`` (keys it does not have are
        ignored, so an older line still reads); KeptResultsError on one that does not fit."""
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        out = []
        for number, data in self.read():
            try:
                out.append(cls(**{k: v for k, v in data.items() if k in names}))
            except TypeError as exc:
                raise self.bad_line(number, str(exc)) from exc
        return out

    def bad_line(self, number: int, why: str) -> KeptResultsError:
        """The error for line ``number``, saying ``why`` and what to do."""
        return KeptResultsError(
            f"{self.path}:{number} is not a kept result ({why}); remove that line (or the "
            "file, to measure afresh) and run the suite again"
        )

    def append(self, data: dict[str, Any]) -> None:
        """Add ``data`` as one line, flushed, so a killed benchmark keeps what finished."""
        line = json.dumps(data, sort_keys=True)
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a") as out:
                out.write(line + "\n")
                out.flush()
