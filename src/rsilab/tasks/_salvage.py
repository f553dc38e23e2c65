"""The checkable parts of a task file whose spec is invalid, so one check reports everything.

``rsilab task check`` reports every problem in one pass: a spec error (a misspelt scorer, a
missing goal) must not hide a missing split file or a broken harness.toml. :func:`salvage`
keeps what validates on its own — the harness path, each benchmark's samples, data sources,
traps — and builds an unvalidated :class:`Task` from them for the later stages only; it is
never run or recorded.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rsilab.tasks._spec import _NAME_PATTERN, Benchmark, Knob, Setting, Task, Trap

PLACEHOLDER_SCORER = "accuracy"
"""Stands in for a benchmark's invalid scorer, so that its samples can still be checked."""


def salvage(data: dict[str, Any]) -> tuple[Task, bool]:
    """An unvalidated task from the valid parts of ``data`` (resolved task.toml data), and
    whether its harness path is usable (False: skip the harness and sandbox stages)."""
    name = data.get("name")
    harness = data.get("harness")
    tables = data.get("benchmarks")
    sources = data.get("data_sources")
    traps = data.get("traps")
    driver = data.get("predict_driver")
    goal, setting, knobs = data.get("goal"), data.get("setting"), data.get("search_space")
    task = Task.model_construct(
        name=name if isinstance(name, str) and re.match(_NAME_PATTERN, name) else "task",
        goal=goal if isinstance(goal, str) else "",
        setting=Setting(setting) if setting in set(Setting) else Setting.BENCHMARK_GUIDED,
        search_space=[k for k in (_knob(x) for x in knobs) if k] if isinstance(knobs, list) else [],
        harness=Path(harness) if isinstance(harness, str) else Path("/nonexistent"),
        benchmarks=[
            b
            for i, table in enumerate(tables if isinstance(tables, list) else [])
            if (b := _benchmark(i, table)) is not None
        ],
        data_sources=[Path(s) for s in sources if isinstance(s, str)]
        if isinstance(sources, list)
        else [],
        traps=[t for t in (_trap(x) for x in traps) if t] if isinstance(traps, list) else [],
        predict_driver=driver if isinstance(driver, str) else None,
    )
    return task, isinstance(harness, str)


def _benchmark(index: int, table: object) -> Benchmark | None:
    """The benchmark, or one that keeps only its samples (None when they are invalid too)."""
    if not isinstance(table, dict):
        return None
    try:
        return Benchmark.model_validate(table)
    except ValidationError:
        pass
    name = table.get("name")
    keep = {
        "name": name
        if isinstance(name, str) and re.match(_NAME_PATTERN, name)
        else f"benchmarks.{index}",
        "scorer": PLACEHOLDER_SCORER,
        "target": table.get("target") is True,
        "samples": table.get("samples"),
    }
    try:
        return Benchmark.model_validate(keep)
    except ValidationError:
        return None  # its samples are invalid: the spec's problems already say how


def partial_benchmarks(data: dict[str, Any]) -> set[str]:
    """The names :func:`salvage` gives the benchmarks of ``data`` whose table is invalid, of
    which it keeps only the samples: nothing else of theirs (a tolerance) can be judged."""
    tables = data.get("benchmarks")
    names = set()
    for i, table in enumerate(tables if isinstance(tables, list) else []):
        if isinstance(table, dict):
            try:
                Benchmark.model_validate(table)
            except ValidationError:
                bench = _benchmark(i, table)
                if bench is not None:
                    names.add(bench.name)
    return names


def consistency_problem(data: dict[str, Any]) -> str | None:
    """The task-level fault of ``data`` (no goal, no target, repeated names) that pydantic does
    not report while a field is invalid; None when there is none."""
    try:
        Task.model_validate(salvage(data)[0].model_dump())
    except ValidationError as exc:
        top = [str(e["msg"]).removeprefix("Value error, ") for e in exc.errors() if not e["loc"]]
        return top[0] if top else None
    return None


def _knob(value: object) -> Knob | None:
    try:
        return Knob.model_validate(value)
    except ValidationError:
        return None


def _trap(value: object) -> Trap | None:
    try:
        return Trap.model_validate(value)
    except ValidationError:
        return None
