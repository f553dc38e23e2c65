"""Effect tags: how a finding about a knob names its better side.

A built-in analyst publishes findings tagged ``raise lr``, ``lower lr``, ``change optimizer`` or
``keep optimizer``; a built-in exploiter, and a team's campaign review, read them back. The tag is
part of the shared memory's vocabulary, so it lives with the memory, below everything that
writes or reads it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from rsilab.tasks import Knob

Verb = Literal["raise", "lower", "change", "keep"]
VERBS: tuple[Verb, ...] = ("raise", "lower", "change", "keep")


def effect_tag(knob: str, verb: Verb) -> str:
    """The tag a finding about ``knob``'s better side carries, e.g. ``raise lr``."""
    return f"{verb} {knob}"


def parse_effect_tag(tag: str, space: Sequence[Knob]) -> tuple[Knob, Verb] | None:
    """The knob of ``space`` and the verb an effect tag names; None for any other tag."""
    verb, _, name = tag.strip().partition(" ")
    for knob in space:
        if knob.name == name:
            for v in VERBS:
                if v == verb:
                    return knob, v
    return None
