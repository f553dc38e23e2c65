"""Scorers: a registry by name of functions that score one output against one sample.

A scorer returns a :class:`Scored` per sample: the score, whether the output was valid, and a
note. An invalid output scores ``invalid_score`` of its scorer (0 for accuracy and speedup).
Register more with :func:`register_scorer`; the task spec refuses names not registered.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pydantic import JsonValue

from rsilab.tasks._samples import Sample


@dataclass(frozen=True)
class Scored:
    """One sample's score. ``valid`` is False for a missing or malformed output."""

    sample_id: str
    score: float
    valid: bool = True
    note: str = ""


ScoreFn = Callable[[Sample, JsonValue], Scored]


@dataclass(frozen=True)
class ScorerInfo:
    """A registered scorer."""

    name: str
    fn: ScoreFn
    higher_is_better: bool
    invalid_score: float
    description: str


_SCORERS: dict[str, ScorerInfo] = {}


def register_scorer(
    name: str, *, higher_is_better: bool = True, invalid_score: float = 0.0, description: str = ""
) -> Callable[[ScoreFn], ScoreFn]:
    """Decorator: register ``fn(sample, output) -> Scored`` under ``name`` (unique)."""

    def decorate(fn: ScoreFn) -> ScoreFn:
        if name in _SCORERS and _SCORERS[name].fn is not fn:
            raise ValueError(f"scorer {name!r} is already registered")
        doc = description or (fn.__doc__ or "").strip().splitlines()[0]
        _SCORERS[name] = ScorerInfo(name, fn, higher_is_better, invalid_score, doc)
        return fn

    return decorate


def scorer_names() -> list[str]:
    """Every registered scorer name, sorted."""
    return sorted(_SCORERS)


def get_scorer(name: str) -> ScorerInfo:
    """The scorer registered as ``name``; KeyError listing the known names."""
    try:
        return _SCORERS[name]
    except KeyError:
        raise KeyError(f"unknown scorer {name!r}; known: {', '.join(scorer_names())}") from None


def score_outputs(
    scorer: str, samples: Sequence[Sample], outputs: Mapping[str, JsonValue]
) -> list[Scored]:
    """Score every sample; a sample without an output is invalid. Never raises on bad outputs."""
    info = get_scorer(scorer)
    results: list[Scored] = []
    for sample in samples:
        if sample.id not in outputs:
            results.append(Scored(sample.id, info.invalid_score, False, "no output"))
            continue
        try:
            results.append(info.fn(sample, outputs[sample.id]))
        except Exception as exc:  # a scorer crash on odd output is data, not a crash
            note = f"scorer failed: {type(exc).__name__}: {exc}"
            results.append(Scored(sample.id, info.invalid_score, False, note))
    return results


@register_scorer("accuracy", description="1 when the output equals the target, else 0.")
def accuracy(sample: Sample, output: JsonValue) -> Scored:
    """1 when the output equals the target (JSON equality), else 0."""
    return Scored(sample.id, 1.0 if output == sample.target else 0.0)


@register_scorer("exact_match", description="1 when the output text equals the target text.")
def exact_match(sample: Sample, output: JsonValue) -> Scored:
    """1 when ``str(output).strip()`` equals ``str(target).strip()``, else 0."""
    return Scored(sample.id, 1.0 if str(output).strip() == str(sample.target).strip() else 0.0)


@register_scorer(
    "speedup",
    description="t_reference / t_candidate from the task's timing driver; 0 when incorrect.",
)
def speedup(sample: Sample, output: JsonValue) -> Scored:
    """Speedup reported by a task-owned timing driver (see ``rsilab.tasks.builtin.kernel``).

    The output must be ``{"valid": bool, "t_reference": s, "t_candidate": s, "note": str}``.
    An incorrect candidate (``valid`` false) scores 0 and is invalid.
    """
    if not isinstance(output, dict):
        return Scored(sample.id, 0.0, False, "output is not an object")
    note = str(output.get("note", ""))
    t_ref, t_cand = output.get("t_reference"), output.get("t_candidate")
    if output.get("valid") is not True:
        return Scored(sample.id, 0.0, False, note or "candidate incorrect")
    if not isinstance(t_ref, int | float) or not isinstance(t_cand, int | float):
        return Scored(sample.id, 0.0, False, "timings missing")
    if not (math.isfinite(t_ref) and math.isfinite(t_cand)) or t_ref <= 0 or t_cand <= 0:
        return Scored(sample.id, 0.0, False, "timings not positive")
    return Scored(sample.id, float(t_ref) / float(t_cand), True, note)


@register_scorer(
    "squared_error",
    higher_is_better=False,
    invalid_score=math.inf,
    description="(output - target)^2 for numbers; lower is better.",
)
def squared_error(sample: Sample, output: JsonValue) -> Scored:
    """Squared difference of numeric output and target; a non-number is invalid."""
    if not isinstance(output, int | float) or isinstance(output, bool):
        return Scored(sample.id, math.inf, False, "output is not a number")
    if not isinstance(sample.target, int | float):
        return Scored(sample.id, math.inf, False, "target is not a number")
    return Scored(sample.id, (float(output) - float(sample.target)) ** 2)
