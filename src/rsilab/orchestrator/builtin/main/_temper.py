"""Tempering: from a dev gain that breaks a non-target back toward the reference, by bisection.

A run whose dev target gain is large but which regresses a non-target beyond the policy's
margin is infeasible: the controller would refuse it. The sampler learns where the feasible
region ends only from the runs it is fed, and a budget of a dozen experiments leaves it a
handful of modelled draws. Yet many levers trade the target against the non-targets by how
far they move from the reference (how long or how hard a model trains, how much of one kind of
data it sees, how far a prompt departs from the one that works): part of the way back keeps
part of the gain and sheds the damage. Tempering looks for that point on the segment between
the reference and the infeasible config:

- :func:`blend` is the config at fraction ``t`` of the way from the reference (``t = 0``) to
  the source config (``t = 1``): each numeric knob at that fraction of the way in its
  normalised coordinate (``log10`` of the value for a ``log`` knob), rounded to its type; each
  choice or bool knob as in the source (tempering changes how far a config moves, not what kind
  of change it makes; the sampler explores kinds). A knob that does not matter in the
  reference (:func:`rsilab.tasks.is_active`: a learning rate where the reference trains
  nothing) is taken as in the source too: the reference's value of it says nothing about the
  reference, and blending toward it would move the knob for no reason (toward an inert
  learning rate of 1e-3 from a source's 1e-4 *raises* the rate as the training shortens).
  With ``weaken``, such a knob starts instead from the weak end its task declares
  (:attr:`rsilab.tasks.Knob.weakest`: the value at which it changes the system least, a
  learning rate's low end), so the way back lowers the rate as it shortens the training.
- :func:`step_fractions` bisects: the first step is ``t = 1/2``; each later one halves the
  interval between the largest fraction found feasible (the reference's 0 before any) and the
  smallest found infeasible (the source's 1 before any). A failed run counts as infeasible. The
  steps are read from the tempering direction's runs in order, so the rule keeps no state and a
  resumed campaign takes the same next step.
- :func:`falsified` ends a tempering early when a step falls short by more than its fraction
  of the source's shortfall: the regression does not shrink toward the reference, so the
  source is left to the sampler.
- A step that :func:`reproduces` its source (the same dev score on every benchmark) moved only
  knobs that do nothing over that stretch: fewer epochs where a training budget caps every
  training alike, a rate past a clamp. It says nothing about how the regression scales with
  the distance, so it falsifies nothing, and up to ``INERT_STEPS`` such steps are not counted
  among the ``TEMPER_STEPS``. What it does show is that the knobs tempering moves cannot reach
  the reference's side of the segment without the knobs it holds at the source's value: so
  where a held knob declares a weak end that the source is not at, the bisection starts again,
  from ``t = 1/2``, on the *weak line* (:func:`blend` with ``weaken``; a full fine-tune's
  rate, held while the epochs halve past a cap, keeps the damage and loses the gain, where a
  lower rate moves the model less). Only after such a step: on a segment where shortening the
  training works, lowering the rate as well would shed gain the source needs (measured on the
  recipe tuning family: blending every step toward the weak end lost gain in 5 of 40
  campaigns and won it in 1). Where no held knob has a weak end, the bisection goes on toward
  the reference past the step.
- :func:`temper_source` picks what to temper: the infeasible, not failed run whose dev target
  (before the non-target penalty) beats the reference and every feasible run by more than the
  noise floor, and whose gain over the reference the Reviewer's paired reading of the dev
  samples supports (a gain of a few items on a small dev set is noise), best first; one
  tempering per source, and never a tempering step (it lies on a segment bisected already).

Scores are the view's (oriented so higher is better). Pure functions; the Main agent
(:mod:`~rsilab.orchestrator.builtin.main._agent`) opens, runs and closes the tempering
directions.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TypeGuard

from pydantic import JsonValue

from rsilab.orchestrator.builtin._state import Run
from rsilab.orchestrator.builtin.worker._rules import config_key, from_unit, to_unit
from rsilab.tasks import Knob, KnobType, active_names

TEMPER_STEPS = 3
"""Bisection steps per source: fractions 1/2, then 1/4 or 3/4, then the eighth between."""
INERT_STEPS = 1
"""Steps that reproduce their source which are not counted among ``TEMPER_STEPS``."""
TEMPER_SHARE = 1 / 3
"""Share of the experiment budget all tempering together may use (the rest is search)."""

Config = dict[str, JsonValue]


def numeric(space: Sequence[Knob]) -> list[Knob]:
    """The knobs of ``space`` that tempering moves (float and int)."""
    return [k for k in space if k.type in (KnobType.FLOAT, KnobType.INT)]


def blend(
    space: Sequence[Knob],
    reference: Mapping[str, JsonValue],
    source: Mapping[str, JsonValue],
    t: float,
    weaken: bool = False,
) -> Config:
    """The config at fraction ``t`` (0 to 1) of the way from ``reference`` to ``source`` (see
    the module docstring). A numeric knob ``reference`` lacks starts at the knob's default;
    one that does not matter in ``reference`` is taken as in ``source``, or, with ``weaken``,
    starts at its ``weakest`` value where it declares one. ``ValueError`` unless
    ``0 <= t <= 1``."""
    if not 0.0 <= t <= 1.0:
        raise ValueError(f"t must lie in [0, 1], got {t!r}")
    out: Config = {}
    matters = set(active_names(reference, space))
    for knob in space:
        value = source[knob.name]
        start: JsonValue = None
        if knob.type in (KnobType.FLOAT, KnobType.INT):
            held = knob.weakest if weaken else None
            start = reference.get(knob.name, knob.default) if knob.name in matters else held
        if _is_number(value) and _is_number(start):
            a, b = to_unit(knob, float(start)), to_unit(knob, float(value))
            value = from_unit(knob, a + t * (b - a))
        out[knob.name] = value
    return out


def _is_number(value: JsonValue) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def step_fractions(feasible: Sequence[bool]) -> list[float]:
    """The fraction each bisection step ran at, given the outcomes ``feasible`` of the steps
    in order, then the fraction of the next step (``len(feasible) + 1`` values)."""
    low, high = 0.0, 1.0
    out = []
    for ok in feasible:
        t = (low + high) / 2.0
        out.append(t)
        low, high = (t, high) if ok else (low, t)
    return [*out, (low + high) / 2.0]


def is_feasible(run: Run) -> bool:
    """True when ``run`` ran and no non-target fell beyond the policy's margin."""
    return not run.failed and run.shortfall <= 0.0


def temper_source(
    runs: Sequence[Run],
    ref_ids: Collection[str],
    ref_score: float,
    noise_floor: float,
    tempered: Collection[str],
    clear: Callable[[Run], bool] = lambda run: True,
    steps: Collection[str] = (),
) -> Run | None:
    """The run to temper next (see the module docstring), or None: none is infeasible with a
    target gain beyond ``noise_floor`` over both ``ref_score`` and the best feasible run that
    ``clear`` also finds beyond the noise of the dev samples themselves, or each such run is in
    ``tempered`` (experiment ids) already. ``clear`` is asked of those runs only, best first,
    and the first it passes is the source: three experiments spent bisecting toward a gain of
    a few dev items would be spent on noise. A tempering step (``steps``: experiment ids of the
    tempering directions' runs) is never a source: it lies on its source's segment toward the
    reference, which that tempering bisected already (a step that changed nothing, such as
    fewer epochs where a training budget caps them all alike, would otherwise be tempered in
    turn, toward the same reference, for nothing)."""
    searched = [r for r in runs if r.experiment_id not in ref_ids and not r.failed]
    # a feasible step still raises the bar (it is a run like any other); it is no source
    best_feasible = max((r.score for r in searched if is_feasible(r)), default=ref_score)
    bar = max(ref_score, best_feasible) + noise_floor
    found = [
        r
        for r in searched
        if not is_feasible(r)
        and r.target > bar
        and r.experiment_id not in tempered
        and r.experiment_id not in steps
    ]
    for run in sorted(found, key=lambda r: (r.target, -r.index), reverse=True):
        if clear(run):
            return run
    return None


def reproduces(step: Run, source: Run) -> bool:
    """True when ``step`` ran and scored exactly what ``source`` scored on every dev benchmark:
    what it moved made no difference there."""
    return not step.failed and bool(step.scores) and step.scores == source.scores


def has_weak_line(
    space: Sequence[Knob], reference: Mapping[str, JsonValue], source: Mapping[str, JsonValue]
) -> bool:
    """True when :func:`blend` with ``weaken`` moves a knob that a plain blend holds: some
    knob acts in ``source`` but not in ``reference`` and declares a weak end ``source`` is not
    at."""
    held = set(active_names(source, space)) - set(active_names(reference, space))
    return any(
        knob.weakest is not None and knob.name in held and source[knob.name] != knob.weakest
        for knob in space
    )


def weak_from(steps: Sequence[Run], source: Run, weak_line: bool) -> int | None:
    """Where the bisection restarted on the weak line: the index in ``steps`` after the first
    step that :func:`reproduces` ``source``; None while it has not (or, without
    ``weak_line``, never does)."""
    if not weak_line:
        return None
    first = next((i for i, r in enumerate(steps) if reproduces(r, source)), None)
    return None if first is None else first + 1


def fractions(steps: Sequence[Run], source: Run, weak_line: bool = False) -> list[float]:
    """The fraction each step of ``steps`` ran at, then the next step's (``len(steps) + 1``
    values): one bisection, or two where it restarted on the weak line (:func:`weak_from`)."""
    start = weak_from(steps, source, weak_line)
    if start is None:
        return step_fractions([is_feasible(r) for r in steps])
    before = step_fractions([is_feasible(r) for r in steps[:start]])[:-1]
    return before + step_fractions([is_feasible(r) for r in steps[start:]])


def falsified(steps: Sequence[Run], source: Run, weak_line: bool = False) -> bool:
    """True when a step shows that the regression does not shrink toward the reference: an
    infeasible step at fraction ``t`` (:func:`fractions`) falls short by more than ``t`` times
    ``source``'s shortfall. A step that :func:`reproduces` the source shows nothing either
    way. Tempering assumes the regression grows with the distance from the reference at least
    in proportion (zero at the reference, convex along the way: then the shortfall at ``t`` is
    at most ``t`` times the source's); a step above that line says this source's regression
    comes from what kind of change it makes, not how far it goes (a knob whose reference value
    does nothing there, moved toward it, can make the regression worse), so the steps left
    would be spent for nothing."""
    at = fractions(steps, source, weak_line)
    return any(
        not is_feasible(run)
        and not reproduces(run, source)
        and (run.failed or run.shortfall > t * source.shortfall)
        for run, t in zip(steps, at, strict=False)
    )


def conclusion(
    steps: Sequence[Run], source: Run, say: Callable[[Run], str], weak_line: bool = False
) -> str:
    """How a finished tempering is closed: the best feasible step (``say`` words its score),
    or why none was kept (``weak_line``: as :func:`has_weak_line` for this source)."""
    kept = [r for r in steps if is_feasible(r)]
    if kept:
        return f"tempered: {say(max(kept, key=lambda r: (r.score, -r.index)))}"
    if steps and all(reproduces(r, source) for r in steps):
        return "tempered: every step scored as its source (the knobs it moves do nothing there)"
    if falsified(steps, source, weak_line):
        return (
            "tempered: no step kept the non-targets (the regression did not shrink toward "
            "the reference)"
        )
    return "tempered: no step kept the non-targets"


def next_temper_config(
    space: Sequence[Knob],
    reference: Mapping[str, JsonValue],
    source: Run,
    steps: Sequence[Run],
    tried: Collection[str],
) -> Config | None:
    """The config of the next bisection step between ``reference`` and ``source``'s config
    after the tempering runs ``steps`` (oldest first); None when the steps are done, when a
    step :func:`falsified` tempering for this source, or when the step's blend was tried
    already (:func:`~rsilab.orchestrator.builtin.worker._rules.config_key` keys in ``tried``:
    rounding of int knobs leaves nothing new in between). Up to ``INERT_STEPS`` steps that
    :func:`reproduces` the source are not counted among the ``TEMPER_STEPS``; after the first,
    the bisection restarts on the weak line where there is one (:func:`has_weak_line`)."""
    inert = sum(reproduces(r, source) for r in steps)
    weak_line = has_weak_line(space, reference, source.config)
    if len(steps) >= TEMPER_STEPS + min(inert, INERT_STEPS):
        return None
    if falsified(steps, source, weak_line):
        return None
    t = fractions(steps, source, weak_line)[-1]
    weaken = weak_from(steps, source, weak_line) is not None
    config = blend(space, reference, source.config, t, weaken)
    return None if config_key(config, space) in tried else config
