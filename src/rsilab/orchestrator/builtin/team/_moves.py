"""The configs a team's researchers try next: one function per search behaviour.

Each returns a :class:`Move` (the full config over the task's search space, why in words, and
the finding it follows, if any) or None when it finds nothing untried. A config is never one
the team ran or runs now (:func:`tried_keys`); the moves themselves are the built-in policy's
(:mod:`rsilab.orchestrator.builtin.team._rules`).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import JsonValue

from rsilab.memory.effect_tags import Verb, parse_effect_tag
from rsilab.orchestrator.builtin._context import RunContext
from rsilab.orchestrator.builtin.team._rules import (
    KnobGroups,
    contrast_value,
    knob_groups,
    least_explored,
    local_move,
    wide_move,
)
from rsilab.orchestrator.builtin.team._state import TeamView
from rsilab.orchestrator.builtin.worker._agent import Order
from rsilab.orchestrator.builtin.worker._rules import config_key, step_size
from rsilab.tasks import Knob

TRIES = 40
"""Proposals a behaviour tries before it gives up on finding an untried config."""
FOLLOW = 0.7
"""Chance that an exploiter with a supported finding to follow moves along it."""
LOCAL_MATURITY = 60
"""Experiments added to the team's count for the exploiter's step (a local, smaller step)."""


@dataclass(frozen=True)
class Move:
    """A config to run and why."""

    config: dict[str, JsonValue]
    why: str
    finding_id: str | None = None
    """The finding the move follows (its adoption is recorded after the run)."""
    tag: str = ""
    """The finding's effect tag the move followed."""


@dataclass(frozen=True)
class Effect:
    """A supported finding that names a knob's better side (its effect tag)."""

    finding_id: str
    knob: Knob
    verb: Verb
    tag: str


def tried_keys(ctx: RunContext, tv: TeamView, inflight: Iterable[Order]) -> set[str]:
    """Config keys the team ran or runs now (an order's config over the reference's)."""
    space, base = ctx.space, tv.view.ref_config()
    keys = {config_key(r.config, space) for r in tv.view.runs}
    return keys | {config_key({**base, **o.config}, space) for o in inflight}


def _configs(tv: TeamView, inflight: Iterable[Order]) -> list[Mapping[str, JsonValue]]:
    base = tv.view.ref_config()
    return [*(r.config for r in tv.view.runs), *({**base, **o.config} for o in inflight)]


def explore(
    ctx: RunContext, tv: TeamView, inflight: list[Order], rng: random.Random
) -> Move | None:
    """A wide move from the reference on the one or two knobs the team changed least."""
    space, ref = ctx.space, tv.view.ref_config()
    if not space or not ref:
        return None
    tried = tried_keys(ctx, tv, inflight)
    configs = _configs(tv, inflight)
    for _ in range(TRIES):
        knobs = least_explored(space, ref, configs, rng, count=rng.choice((1, 2)))
        config = wide_move(space, ref, knobs, rng)
        if config_key(config, space) not in tried:
            names = ", ".join(k.name for k in knobs)
            return Move(config, f"explore: wide move on {names}, the least explored")
    return None


def exploit(
    ctx: RunContext,
    tv: TeamView,
    inflight: list[Order],
    rng: random.Random,
    effects: list[Effect],
) -> Move | None:
    """A local move around the team's best config (the reference until a run beats it):
    along a supported finding's better side when there is one to follow (with chance
    :data:`FOLLOW`), else one or two knobs by a small gaussian step."""
    space, ref = ctx.space, tv.view.ref_config()
    best = tv.best()
    ref_score = tv.view.ref_score
    if best is not None and ref_score is not None and best.score > ref_score:
        base, source = dict(best.config), best.experiment_id
    else:
        base, source = ref, "the reference"
    if not space or not base:
        return None
    tried = tried_keys(ctx, tv, inflight)
    step = step_size(len(tv.view.runs) + LOCAL_MATURITY)
    follow = [e for e in effects if e.verb != "keep"]
    kept = {e.knob.name for e in effects if e.verb == "keep"}
    free = [k for k in space if k.name not in kept] or list(space)
    for _ in range(TRIES):
        if follow and rng.random() < FOLLOW:
            effect = rng.choice(follow)
            sign = {"raise": 1, "lower": -1}.get(effect.verb, 0)
            config = local_move(space, base, rng, step, [effect.knob], sign)
            if config_key(config, space) not in tried:
                why = f"exploit: {effect.tag} from {source}, as finding {effect.finding_id} says"
                return Move(config, why, effect.finding_id, effect.tag)
            continue
        knobs = rng.sample(free, min(len(free), rng.choice((1, 2))))
        config = local_move(space, base, rng, step, knobs)
        if config_key(config, space) not in tried:
            names = ", ".join(k.name for k in knobs)
            return Move(config, f"exploit: local move on {names} from {source}")
    return None


def contrast(
    ctx: RunContext,
    tv: TeamView,
    inflight: list[Order],
    rng: random.Random,
    settled: set[str],
) -> Move | None:
    """A one-knob contrast with the reference for the analyst, on the side (above or below
    the reference's value) of an unsettled knob (not in ``settled``) that has fewer runs:
    first the knob closest to testable (fewest runs missing for two on each side), then,
    once all are testable, the one whose smaller side is smallest; the reference's other
    knobs unchanged."""
    space, ref = ctx.space, tv.view.ref_config()
    if not space or not ref:
        return None
    runs = [(r.experiment_id, r.config) for r in tv.view.runs if not r.failed]
    runs += [(f"order-{o.n}", {**ref, **o.config}) for o in inflight]
    groups = {g.knob: g for g in knob_groups(space, ref, runs) if g.knob not in settled}
    tried = tried_keys(ctx, tv, inflight)
    order = sorted(groups.values(), key=lambda g: (*_missing(g), rng.random()))
    for g in order:
        knob = next(k for k in space if k.name == g.knob)
        side = 1 if not g.numeric or len(g.a) <= len(g.b) else -1  # "kept" is the reference
        for _ in range(TRIES // 4):
            config = {**ref, g.knob: contrast_value(knob, ref[g.knob], side, rng)}
            if config_key(config, space) not in tried:
                where = "above" if side > 0 else "below"
                where = where if g.numeric else "changed from"
                return Move(config, f"analyse: contrast {g.knob} {where} the reference's value")
    return None


def _missing(g: KnobGroups) -> tuple[int, int]:
    """(0 while runs are missing, else 1; how many are missing, else the smaller group's
    size: a run there narrows the interval most)."""
    missing = max(0, 2 - len(g.a)) + max(0, 2 - len(g.b))
    return (0, missing) if missing else (1, min(len(g.a), len(g.b)))


def effects_from(found: list[dict[str, Any]], space: list[Knob]) -> list[Effect]:
    """The supported, not superseded findings of a ``query_findings`` answer that carry an
    effect tag, newest first, one per knob."""
    out: dict[str, Effect] = {}
    for f in sorted(found, key=lambda f: str(f.get("created_at", "")), reverse=True):
        if f.get("status") != "supported" or f.get("superseded_by"):
            continue
        for tag in f.get("tags", []):
            parsed = parse_effect_tag(str(tag), space)
            if parsed is not None and parsed[0].name not in out:
                knob, verb = parsed
                out[knob.name] = Effect(str(f["id"]), knob, verb, str(tag))
    return list(out.values())
