"""Where a task came from, as a :class:`~rsilab.records.TaskRef` spells it.

A ref's ``source`` is one of:

- ``builtin``: a built-in task, found again by its name;
- an absolute ``.../task.toml`` path (older labs: the path as it was typed, maybe relative);
- an absolute ``.../file.py:NAME`` (older labs: ``file.py`` as typed, without ``:NAME``);
- anything else (a module name, ``cli``, empty): a task registered in this process by a
  module's ``@task``, found again by its name.

:func:`anchored_source` and :func:`anchored` give a task's source and spec with every relative
path made absolute against the current directory, so a task loaded from a relative path and
the same file loaded later from its absolute path have one source and one digest.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from rsilab.tasks._samples import FileSplits, PoolSplits, SampleSource

if TYPE_CHECKING:
    from rsilab.tasks._spec import Task

BUILTIN = "builtin"

_Anchor = Callable[[Path], Path]


class OriginKind(StrEnum):
    """The kinds of ``TaskRef.source`` (see the module docstring)."""

    BUILTIN = "builtin"
    TOML = "toml"
    PYTHON = "python"
    REGISTERED = "registered"


@dataclass(frozen=True)
class Origin:
    """A parsed ``TaskRef.source``: its kind, and for a file its path (as written) and the
    ``@task`` name after ``:`` (None when the source names none)."""

    kind: OriginKind
    path: Path | None = None
    name: str | None = None


def parse_source(source: str) -> Origin:
    """The origin ``source`` names; never raises (an unrecognised text is ``registered``)."""
    if source == BUILTIN:
        return Origin(OriginKind.BUILTIN)
    file_part, _, name = source.rpartition(":") if ".py:" in source else (source, "", "")
    if file_part.endswith(".py"):
        return Origin(OriginKind.PYTHON, Path(file_part), name or None)
    if source.endswith(".toml"):
        return Origin(OriginKind.TOML, Path(source))
    return Origin(OriginKind.REGISTERED)


def anchored_source(source: str, name: str) -> str:
    """``source`` loadable from any directory: a file's path resolved now, and a Python file
    given ``:name`` (a ``@task`` function's name is its task's name); other sources as they
    are."""
    origin = parse_source(source)
    if origin.kind is OriginKind.TOML and origin.path is not None:
        return str(origin.path.resolve())
    if origin.kind is OriginKind.PYTHON and origin.path is not None:
        return f"{origin.path.resolve()}:{origin.name or name}"
    return source


def command_argument(source: str, name: str) -> str:
    """What names the task on a command line (``rsilab task check ARG``): its file, absolute
    and quoted for a shell, for a task loaded from a file; its name otherwise."""
    origin = parse_source(source)
    if origin.kind in (OriginKind.TOML, OriginKind.PYTHON) and origin.path is not None:
        return shlex.quote(anchored_source(source, name))
    return name


def anchored(task: Task) -> Task:
    """``task`` with its relative paths (harness, data sources, sample files) made absolute
    against the current directory; the task itself when every path already is."""
    here = Path.cwd()

    def anchor(path: Path) -> Path:
        return path if path.is_absolute() else here / path

    benchmarks = [
        b.model_copy(update={"samples": _anchored_samples(b.samples, anchor)})
        for b in task.benchmarks
    ]
    return task.model_copy(
        update={
            "harness": anchor(task.harness),
            "data_sources": [anchor(p) for p in task.data_sources],
            "benchmarks": benchmarks,
        }
    )


def _anchored_samples(samples: SampleSource, anchor: _Anchor) -> SampleSource:
    if isinstance(samples, FileSplits):
        files = {tier: anchor(path) for tier, path in samples.files.items()}
        return samples.model_copy(update={"files": files})
    if isinstance(samples, PoolSplits) and samples.pool is not None:
        return samples.model_copy(update={"pool": anchor(samples.pool)})
    return samples
