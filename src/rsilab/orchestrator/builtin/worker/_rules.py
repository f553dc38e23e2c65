"""The built-in Worker's proposals: new configs and code variants from a task's search space.

Pure functions; every random choice comes from the ``random.Random`` the caller passes, so the
same inputs and the same generator state give the same proposals.

Numeric knobs are searched in a normalised coordinate ``u`` in [0, 1] (``log10`` of the value
where the knob is ``log``), so one step size fits every knob. Three operators make a proposal:

- *mutate*: copy a good parent and change one or two knobs: a gaussian step in ``u`` whose size
  shrinks as the direction matures (``step * 0.5 ** (maturity / half_life)``, never below
  ``min_step``); a choice knob takes another choice, a bool flips;
- *recombine*: uniform crossover of two good parents (each knob from either, even odds);
- *explore*: a fresh uniform sample of the whole space (log-uniform on log knobs).

"Good parents" are the ``elite`` best-scoring configs seen; the better a parent ranks, the more
often it is picked. A proposal never repeats a config already tried (parents, ``tried`` keys, or
earlier proposals of the same call); see :func:`config_key`.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pydantic import JsonValue

from rsilab.tasks import Knob, KnobType, active_names

Config = dict[str, JsonValue]
"""Knob name -> value; a proposal holds exactly the space's knobs."""

_SIGNIFICANT = 6
"""Proposed floats keep this many significant digits: readable configs, stable keys."""


@dataclass(frozen=True)
class SearchSettings:
    """Tunable defaults of :func:`propose_configs`.

    Tuned on the synthetic task only (40 experiments from its defaults, 100 seeds): a wide,
    slowly shrinking step and a small elite beat narrower or greedier settings there.
    """

    elite: int = 2
    """How many of the best parents count as good parents."""
    explore: float = 0.1
    """Chance that a proposal is a fresh random sample."""
    recombine: float = 0.2
    """Chance that a proposal is a crossover (when two good parents exist)."""
    two_knobs: float = 0.5
    """Chance that a mutation changes two knobs rather than one."""
    step: float = 0.4
    """Initial gaussian step sd in normalised units."""
    min_step: float = 0.04
    """The step never shrinks below this."""
    half_life: float = 60.0
    """Experiments in the direction after which the step has halved."""
    max_tries: int = 200
    """Attempts per proposal before concluding the reachable space is exhausted."""


DEFAULT_SETTINGS = SearchSettings()


def config_key(config: Mapping[str, JsonValue], space: Sequence[Knob]) -> str:
    """Canonical key of ``config`` restricted to the knobs of ``space`` that matter in it
    (sorted JSON; see :func:`rsilab.tasks.active_names`).

    Two configs with equal values of the knobs that matter have equal keys whatever their
    key order, extra keys, or values of knobs that do not matter (a learning rate when nothing
    trains): they run the same system. A knob missing from ``config`` keys as null.
    """
    active = set(active_names(config, space))
    projected = {k.name: config.get(k.name) for k in space if k.name in active}
    return json.dumps(projected, sort_keys=True, separators=(",", ":"))


def is_valid(config: Mapping[str, JsonValue], space: Sequence[Knob]) -> bool:
    """True when every knob of ``space`` is in ``config`` with a value of its type within bounds.

    float: a finite int or float (not bool) in ``[low, high]``; int: an int (not bool) in
    ``[low, high]``; choice: one of ``choices`` (same JSON type); bool: ``True`` or ``False``.
    Keys outside ``space`` are ignored (the harness config may hold more than the search space).
    """
    return all(k.name in config and _value_ok(k, config[k.name]) for k in space)


def _value_ok(knob: Knob, value: JsonValue) -> bool:
    if knob.type is KnobType.BOOL:
        return isinstance(value, bool)
    if knob.type is KnobType.CHOICE:
        return any(type(c) is type(value) and c == value for c in knob.choices)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if knob.type is KnobType.INT and not isinstance(value, int):
        return False
    assert knob.low is not None and knob.high is not None  # the Knob validator ensures it
    return math.isfinite(value) and knob.low <= value <= knob.high


def step_size(maturity: int, settings: SearchSettings = DEFAULT_SETTINGS) -> float:
    """The mutation sd (normalised units) after ``maturity`` experiments in the direction."""
    return max(settings.min_step, settings.step * math.pow(0.5, maturity / settings.half_life))


def propose_configs(
    space: Sequence[Knob],
    parents: Sequence[tuple[Mapping[str, JsonValue], float]],
    rng: random.Random,
    n: int,
    *,
    tried: Iterable[str] = (),
    maturity: int | None = None,
    settings: SearchSettings = DEFAULT_SETTINGS,
) -> list[Config]:
    """Up to ``n`` new valid configs of ``space``, none already tried; higher score is better.

    ``parents`` are ``(config, score)`` pairs already run, the score oriented so that higher
    is better (:func:`rsilab.stats.oriented`; the built-in view's scores are) (each must satisfy
    :func:`is_valid`, else ``ValueError``); ``tried`` holds further :func:`config_key` keys not
    to repeat. With no parents the first proposal is the space's defaults (when untried) and
    the rest are random samples. ``maturity`` (default: ``len(parents)``) sets the step size.
    Fewer than ``n`` come back only when ``max_tries`` attempts in a row found nothing new (a
    small discrete space ran out). An empty ``space`` gives ``[]``.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if not space:
        return []
    for config, _ in parents:
        if not is_valid(config, space):
            raise ValueError(f"parent config is not valid in the search space: {dict(config)}")
    seen = {config_key(c, space) for c, _ in parents} | set(tried)
    elite = _elite(space, parents, settings.elite)
    step = step_size(len(parents) if maturity is None else maturity, settings)
    proposals: list[Config] = []
    for _ in range(n):
        found = _one_new(space, elite, rng, step, seen, settings, first=not parents)
        if found is None:
            break
        seen.add(config_key(found, space))
        proposals.append(found)
    return proposals


def _elite(
    space: Sequence[Knob], parents: Sequence[tuple[Mapping[str, JsonValue], float]], size: int
) -> list[Config]:
    """The ``size`` best distinct parents, best first (ties broken by key: deterministic)."""
    ranked = sorted(parents, key=lambda p: (-p[1], config_key(p[0], space)))
    elite: dict[str, Config] = {}
    for config, _ in ranked:
        elite.setdefault(config_key(config, space), {k.name: config[k.name] for k in space})
        if len(elite) == size:
            break
    return list(elite.values())


def _one_new(
    space: Sequence[Knob],
    elite: list[Config],
    rng: random.Random,
    step: float,
    seen: set[str],
    settings: SearchSettings,
    *,
    first: bool,
) -> Config | None:
    if first:
        default = {k.name: k.default for k in space}
        if config_key(default, space) not in seen:
            return default
    for attempt in range(settings.max_tries):
        # Repeated collisions mean the neighbourhood is used up: widen the step.
        candidate = _attempt(space, elite, rng, step * (1.0 + attempt / 10.0), settings)
        if config_key(candidate, space) not in seen:
            return candidate
    return None


def _attempt(
    space: Sequence[Knob],
    elite: list[Config],
    rng: random.Random,
    step: float,
    settings: SearchSettings,
) -> Config:
    roll = rng.random()
    if not elite or roll < settings.explore:
        return {k.name: _random_value(k, rng) for k in space}
    if len(elite) >= 2 and roll < settings.explore + settings.recombine:
        a, b = rng.sample(elite, 2)
        return {k.name: (a if rng.random() < 0.5 else b)[k.name] for k in space}
    parent = _pick_parent(elite, rng)
    return _mutate(space, parent, rng, step, settings)


def _pick_parent(elite: list[Config], rng: random.Random) -> Config:
    """A parent by linear rank weight: the best is ``len(elite)`` times as likely as the last."""
    weights = [len(elite) - i for i in range(len(elite))]
    return rng.choices(elite, weights=weights)[0]


def _mutate(
    space: Sequence[Knob], parent: Config, rng: random.Random, step: float, s: SearchSettings
) -> Config:
    count = 2 if len(space) >= 2 and rng.random() < s.two_knobs else 1
    child = dict(parent)
    for knob in rng.sample(list(space), count):
        child[knob.name] = _mutate_value(knob, parent[knob.name], rng, step)
    return child


def _mutate_value(knob: Knob, value: JsonValue, rng: random.Random, step: float) -> JsonValue:
    if knob.type is KnobType.BOOL:
        return not value
    if knob.type is KnobType.CHOICE:
        others = [c for c in knob.choices if not (type(c) is type(value) and c == value)]
        return rng.choice(others) if others else value
    assert isinstance(value, int | float)
    u = _reflect(to_unit(knob, float(value)) + rng.gauss(0.0, step))
    new = from_unit(knob, u)
    if knob.type is KnobType.INT and new == value:
        # Rounding swallowed a small step; move one unit the way the step pointed.
        assert knob.low is not None and knob.high is not None
        direction = 1 if u >= to_unit(knob, float(value)) else -1
        new = int(min(knob.high, max(knob.low, int(value) + direction)))
    return new


def _random_value(knob: Knob, rng: random.Random) -> JsonValue:
    if knob.type is KnobType.BOOL:
        return rng.random() < 0.5
    if knob.type is KnobType.CHOICE:
        return rng.choice(knob.choices)
    return from_unit(knob, rng.random())


def _reflect(u: float) -> float:
    """``u`` folded back into [0, 1] (reflection keeps steps near a bound from sticking to it)."""
    u = abs(u) % 2.0
    return 2.0 - u if u > 1.0 else u


def to_unit(knob: Knob, value: float) -> float:
    """The normalised coordinate of a numeric knob's ``value`` in [0, 1] (``log10`` of the
    value where the knob is ``log``), clipped to the knob's bounds."""
    assert knob.low is not None and knob.high is not None
    if knob.log:
        lo, hi, x = math.log10(knob.low), math.log10(knob.high), math.log10(value)
    else:
        lo, hi, x = knob.low, knob.high, value
    return min(1.0, max(0.0, (x - lo) / (hi - lo)))


def from_unit(knob: Knob, u: float) -> int | float:
    """The knob's value at ``u``, rounded to its type and clipped to its bounds."""
    assert knob.low is not None and knob.high is not None
    if knob.log:
        lo, hi = math.log10(knob.low), math.log10(knob.high)
        x = 10.0 ** (lo + u * (hi - lo))
    else:
        x = knob.low + u * (knob.high - knob.low)
    if knob.type is KnobType.INT:
        return int(min(math.floor(knob.high), max(math.ceil(knob.low), round(x))))
    x = float(f"{x:.{_SIGNIFICANT}g}")
    return min(knob.high, max(knob.low, x))
