"""Where a task's data lies on the host: the files every tier comes from, and their folders.

A task's data files are its split files (``FileSplits``), its pool file (``PoolSplits``) and
its declared ``data_sources``: together they hold every tier, the private ones included. No
folder shown to a job or an agent (a workspace, a bound folder, a task's local model) may be,
hold or lie in one of their folders (:func:`data_places`).
"""

from __future__ import annotations

from pathlib import Path

from rsilab.tasks._samples import FileSplits, PoolSplits
from rsilab.tasks._spec import Task


def data_files(task: Task) -> tuple[Path, ...]:
    """Every host file (or folder) the task's samples come from, resolved, in order, once."""
    found: list[Path] = []
    for bench in task.benchmarks:
        source = bench.samples
        if isinstance(source, FileSplits):
            found.extend(source.files.values())
        elif isinstance(source, PoolSplits) and source.pool is not None:
            found.append(source.pool)
    found.extend(task.data_sources)
    out: list[Path] = []
    for path in (Path(p).resolve() for p in found):
        if path not in out:
            out.append(path)
    return tuple(out)


def data_places(task: Task) -> tuple[Path, ...]:
    """The folders no agent-visible folder may hold or lie in: each data file's own folder
    (a data folder itself, when a source is one)."""
    out: list[Path] = []
    for path in data_files(task):
        place = path if path.is_dir() else path.parent
        if place not in out:
            out.append(place)
    return tuple(out)
