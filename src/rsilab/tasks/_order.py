"""The order in which a task's metrics are shown: its targets first, then the rest.

Every table a person reads (the campaign report, ``rsilab versions`` and ``baseline``,
``task check --run``, the live view, the dashboard's columns and charts) orders a task's
benchmarks by this one rule, so the number a campaign is about is always the first one read.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, TypeVar


class Declared(Protocol):
    """What the order needs of a benchmark: its name and whether it is a target."""

    @property
    def name(self) -> str: ...

    @property
    def target(self) -> bool: ...


B = TypeVar("B", bound=Declared)


def shown_order(benchmarks: Iterable[B]) -> list[B]:
    """``benchmarks`` with the targets first, each group in its declared order."""
    listed = list(benchmarks)
    return [b for b in listed if b.target] + [b for b in listed if not b.target]


def metric_order(names: Iterable[str], benchmarks: Sequence[Declared] = ()) -> list[str]:
    """``names`` (each once) in the order they are shown: the task's targets, then its other
    benchmarks (each group as declared), then names the task does not declare, sorted (all of
    them sorted when the task is not known here, ``benchmarks`` empty)."""
    wanted = set(names)
    known = [b.name for b in shown_order(benchmarks) if b.name in wanted]
    return known + sorted(wanted - set(known))
