"""The order of a task's metrics in every table: targets first, then the rest as declared."""

from __future__ import annotations

from dataclasses import dataclass

from rsilab.tasks import metric_order, shown_order


@dataclass(frozen=True)
class _Bench:
    name: str
    target: bool


def test_targets_come_first_then_the_rest_as_declared_then_unknown_names_sorted() -> None:
    declared = [_Bench("b", False), _Bench("z", True), _Bench("a", False), _Bench("y", True)]
    assert [b.name for b in shown_order(declared)] == ["z", "y", "b", "a"]
    names = {"a", "b", "y", "z", "loss", "extra"}
    assert metric_order(names, declared) == ["z", "y", "b", "a", "extra", "loss"]
    assert metric_order(["a", "z"], declared) == ["z", "a"]  # only the names asked for


def test_without_a_known_task_the_names_are_sorted() -> None:
    assert metric_order(["zeta", "alpha", "alpha"]) == ["alpha", "zeta"]
