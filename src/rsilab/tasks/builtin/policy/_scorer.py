"""The ``search_quality`` scorer: the true quality of the config a search chose.

The scorer regenerates the sample's problem from the pristine packaged ``problems.py`` (never
the candidate's copy) and scores predict's output, the chosen config, by its noise-free
objective: ``(f(chosen) - f(start)) / (f(optimum) - f(start))`` clipped to [0, 1]. Only the
config counts: a number, or a score printed beside the config, earns nothing.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any, cast

from pydantic import JsonValue

from rsilab.tasks import Sample, Scored, register_scorer

PROBLEMS = Path(__file__).parent / "harness/problems.py"
SCORER = "search_quality"


@cache
def problems() -> ModuleType:
    """The packaged ``problems.py`` (the ground truth), loaded once."""
    spec = importlib.util.spec_from_file_location("rsilab_policy_problems", PROBLEMS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_problem(family: str, seed: int) -> dict[str, Any]:
    """The problem of ``family`` drawn with ``seed`` (KeyError for an unknown family)."""
    return cast(dict[str, Any], problems().make_problem(family, seed))


def true_quality(problem: Mapping[str, Any], config: JsonValue) -> float:
    """The normalised quality of ``config`` on ``problem`` (ValueError for an invalid one)."""
    fn = cast(Callable[[Mapping[str, Any], JsonValue], float], problems().quality)
    return fn(problem, config)


def _problem_of(sample: Sample) -> dict[str, Any]:
    data = sample.input
    if not isinstance(data, dict):
        raise ValueError("not a policy sample")
    family, seed = data.get("family"), data.get("seed")
    if family not in problems().FAMILIES or not isinstance(seed, int):
        raise ValueError("not a policy sample")
    return make_problem(str(family), seed)


@register_scorer(
    SCORER,
    description="True quality of the chosen config: 0 at the problem's start, 1 at its optimum.",
)
def search_quality(sample: Sample, output: JsonValue) -> Scored:
    """Score one chosen config; a malformed one (a missing knob, a value out of range or of
    the wrong type, not an object) is invalid and scores 0. Keys that are not knobs are
    ignored."""
    try:
        problem = _problem_of(sample)
    except ValueError as exc:
        return Scored(sample.id, 0.0, False, str(exc))
    try:
        return Scored(sample.id, true_quality(problem, output))
    except ValueError as exc:
        return Scored(sample.id, 0.0, False, str(exc))
