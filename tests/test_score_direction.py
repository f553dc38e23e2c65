"""The one place that says which of two scores is better: ``rsilab.stats`` and the
``Benchmark`` methods built on it, with literal scores."""

from __future__ import annotations

import pytest

from rsilab.stats import best_of, better, oriented
from rsilab.tasks import Benchmark, get_task


def test_oriented_negates_only_a_lower_is_better_score() -> None:
    assert oriented(0.25, True) == 0.25
    assert oriented(0.25, False) == -0.25
    assert oriented(oriented(0.25, False), False) == 0.25  # turns an oriented score back


def test_better_follows_the_direction_and_a_tie_is_not_better() -> None:
    assert better(0.9, 0.8, higher_is_better=True)
    assert not better(0.8, 0.9, higher_is_better=True)
    assert better(0.1, 0.3, higher_is_better=False)
    assert not better(0.3, 0.1, higher_is_better=False)
    assert not better(0.5, 0.5, higher_is_better=True)
    assert not better(0.5, 0.5, higher_is_better=False)


def test_best_of_is_the_largest_or_the_smallest() -> None:
    assert best_of([0.3, 0.9, 0.1], higher_is_better=True) == 0.9
    assert best_of([0.3, 0.9, 0.1], higher_is_better=False) == 0.1
    with pytest.raises(ValueError, match="at least one score"):
        best_of([], higher_is_better=True)


def test_a_benchmark_compares_in_its_own_direction() -> None:
    samples = get_task("synthetic").benchmarks[0].samples
    error = Benchmark(name="err", scorer="squared_error", higher_is_better=False, samples=samples)
    accuracy = Benchmark(name="acc", scorer="accuracy", samples=samples)
    assert error.better(0.02, 0.05) and not accuracy.better(0.02, 0.05)
    assert error.best([0.05, 0.02, 0.09]) == 0.02
    assert accuracy.best([0.05, 0.02, 0.09]) == 0.09
    assert error.oriented(0.02) == -0.02 and accuracy.oriented(0.02) == 0.02
