"""The built-in team's search behaviours: pure functions over a search space and its runs.

Each researcher orientation of a team (:mod:`rsilab.orchestrator.builtin.team`) is a different use
of these moves; every random choice comes from the ``random.Random`` the caller passes.

- explorer: :func:`least_explored` knobs (those the team changed least from the reference)
  get fresh values anywhere in their range (:func:`wide_move`);
- exploiter: :func:`local_move` around the best config, one or two knobs by a small gaussian
  step, or one knob in the direction a finding names (``sign``);
- analyst: :func:`knob_groups` splits the runs by each knob (above against below the
  reference's value; changed against kept for a choice or a bool) so the effect can be
  tested, and :func:`contrast_value` gives the value of a one-knob contrast experiment.

Findings a built-in analyst publishes carry an *effect tag*
(:func:`~rsilab.memory.effect_tags.effect_tag`): ``raise
lr``, ``lower lr``, ``change optimizer`` or ``keep optimizer``, the better side of the knob,
which a built-in exploiter reads back with
:func:`~rsilab.memory.effect_tags.parse_effect_tag`.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic import JsonValue

from rsilab.memory.effect_tags import Verb
from rsilab.orchestrator.builtin.worker._rules import (
    Config,
    _mutate_value,
    _random_value,
    from_unit,
    to_unit,
)
from rsilab.tasks import Knob, KnobType


def _same(a: JsonValue, b: JsonValue) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        return not isinstance(b, bool) and math.isclose(float(a), float(b), rel_tol=1e-9)
    return type(a) is type(b) and a == b


def is_numeric(knob: Knob) -> bool:
    """True for a float or int knob (it has a range, so "above" and "below" mean something)."""
    return knob.type in (KnobType.FLOAT, KnobType.INT)


def exploration_counts(
    space: Sequence[Knob], ref: Mapping[str, JsonValue], configs: Sequence[Mapping[str, JsonValue]]
) -> dict[str, int]:
    """Per knob, how many of ``configs`` set it to another value than ``ref``'s."""
    return {
        k.name: sum(1 for c in configs if k.name in c and not _same(c[k.name], ref.get(k.name)))
        for k in space
    }


def least_explored(
    space: Sequence[Knob],
    ref: Mapping[str, JsonValue],
    configs: Sequence[Mapping[str, JsonValue]],
    rng: random.Random,
    count: int = 2,
) -> list[Knob]:
    """The ``count`` knobs the configs changed least from ``ref`` (ties in random order)."""
    counts = exploration_counts(space, ref, configs)
    ranked = sorted(space, key=lambda k: (counts[k.name], rng.random()))
    return ranked[: max(1, min(count, len(ranked)))]


def wide_move(
    space: Sequence[Knob], base: Mapping[str, JsonValue], knobs: Sequence[Knob], rng: random.Random
) -> Config:
    """``base`` (over ``space``) with each of ``knobs`` at a fresh value anywhere in its range
    (log-uniform on a log knob), another than ``base``'s where the knob has another."""
    out: Config = {k.name: base[k.name] for k in space if k.name in base}
    for knob in knobs:
        value = _random_value(knob, rng)
        for _ in range(20):
            if not _same(value, base.get(knob.name)):
                break
            value = _random_value(knob, rng)
        out[knob.name] = value
    return out


def local_move(
    space: Sequence[Knob],
    base: Mapping[str, JsonValue],
    rng: random.Random,
    step: float,
    knobs: Sequence[Knob],
    sign: int = 0,
) -> Config:
    """``base`` with each of ``knobs`` moved by a gaussian step of sd ``step`` (normalised
    units). ``sign`` +1 or -1 moves a numeric knob only up or down (by at least one unit of
    an int knob, clipped at its bounds); a choice takes another value, a bool flips."""
    out: Config = {k.name: base[k.name] for k in space if k.name in base}
    for knob in knobs:
        value = base[knob.name]
        if sign == 0 or not is_numeric(knob):
            out[knob.name] = _mutate_value(knob, value, rng, step)
            continue
        assert isinstance(value, int | float) and knob.low is not None and knob.high is not None
        u = to_unit(knob, float(value))
        moved = from_unit(knob, min(1.0, max(0.0, u + sign * abs(rng.gauss(0.0, step)))))
        if knob.type is KnobType.INT and moved == value:
            moved = int(min(knob.high, max(knob.low, int(value) + sign)))
        out[knob.name] = moved
    return out


def contrast_value(knob: Knob, ref: JsonValue, side: int, rng: random.Random) -> JsonValue:
    """A value of ``knob`` for a one-knob contrast with the reference value ``ref``: above it
    (``side`` +1) or below it (-1) by a moderate distance (0.15 to 0.35 of the range in
    normalised units, clipped); another choice, or the other bool, for a categorical knob.
    ``ref`` itself when the range has no room on that side."""
    if not is_numeric(knob):
        return _mutate_value(knob, ref, rng, 0.0)
    assert isinstance(ref, int | float) and knob.low is not None and knob.high is not None
    u = to_unit(knob, float(ref))
    value = from_unit(knob, min(1.0, max(0.0, u + side * rng.uniform(0.15, 0.35))))
    if knob.type is KnobType.INT and value == ref:
        value = int(min(knob.high, max(knob.low, int(ref) + side)))
    return value


@dataclass(frozen=True)
class KnobGroups:
    """The runs split by one knob: ``a`` above the reference's value (or changed from it for
    a categorical knob), ``b`` below it (or kept); runs with the reference's value of a
    numeric knob are in neither."""

    knob: str
    numeric: bool
    a: list[str]
    b: list[str]

    def testable(self, least: int = 2) -> bool:
        """True when each group holds at least ``least`` runs."""
        return len(self.a) >= least and len(self.b) >= least

    def verb(self, a_better: bool) -> Verb:
        """The better side as an effect tag's verb."""
        if self.numeric:
            return "raise" if a_better else "lower"
        return "change" if a_better else "keep"


def knob_groups(
    space: Sequence[Knob],
    ref: Mapping[str, JsonValue],
    runs: Sequence[tuple[str, Mapping[str, JsonValue]]],
) -> list[KnobGroups]:
    """For each knob of ``space`` that ``ref`` sets, the ids of ``runs`` ((id, config) pairs)
    on either side of the reference's value (see :class:`KnobGroups`)."""
    out = []
    for knob in space:
        if knob.name not in ref:
            continue
        r = ref[knob.name]
        a: list[str] = []
        b: list[str] = []
        for run_id, config in runs:
            value = config.get(knob.name)
            if value is None:
                continue
            if is_numeric(knob):
                assert isinstance(value, int | float) and isinstance(r, int | float)
                if _same(value, r):
                    continue
                (a if value > r else b).append(run_id)
            else:
                (b if _same(value, r) else a).append(run_id)
        out.append(KnobGroups(knob.name, is_numeric(knob), a, b))
    return out
