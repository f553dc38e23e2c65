"""A task's budget: how many experiments, how much wall time and how many LLM tokens."""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, model_validator

from rsilab.records import Model

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h)?\s*$")
_COUNT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgG])?\s*$")
_SCALE = {"k": 1e3, "m": 1e6, "g": 1e9}
_SECONDS = {"s": 1.0, "m": 60.0, "h": 3600.0}
_KEYS = {"experiments": "experiments", "wall": "wall_s", "wall_s": "wall_s", "tokens": "tokens"}


def parse_duration(text: str) -> float:
    """Seconds in ``'90'``, ``'90s'``, ``'20m'`` or ``'1.5h'``; ValueError otherwise."""
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a duration; use e.g. 90s, 20m, 1.5h")
    return float(match.group(1)) * _SECONDS[match.group(2) or "s"]


def parse_count(text: str) -> int:
    """An integer in ``'40'``, ``'2k'``, ``'2M'`` or ``'1G'``; ValueError otherwise."""
    match = _COUNT.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a count; use e.g. 40, 500k, 2M")
    return round(float(match.group(1)) * _SCALE.get((match.group(2) or "").lower(), 1.0))


def parse_budget(text: str) -> dict[str, Any]:
    """The fields of ``'experiments=40,wall=20m,tokens=2M'`` (any subset, any order).

    Raises ValueError naming every bad part.
    """
    fields: dict[str, Any] = {}
    problems: list[str] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        name = _KEYS.get(key.strip())
        if not sep or name is None:
            problems.append(f"{part!r}: expected experiments=N, wall=DURATION or tokens=N")
            continue
        if name in fields:  # which one was meant cannot be known: say so, never pick one
            problems.append(f"{key.strip()}: given twice; give it once")
            continue
        try:
            fields[name] = parse_duration(value) if name == "wall_s" else parse_count(value)
        except ValueError as exc:
            problems.append(f"{key.strip()}: {exc}")
    if problems:
        raise ValueError("; ".join(problems))
    return fields


class Budget(Model):
    """Resources a campaign on the task may spend; every figure is positive.

    Accepts a mapping or a string such as ``'experiments=40,wall=20m,tokens=2M'``.
    """

    experiments: int = Field(default=40, gt=0, description="Experiments (sandbox jobs) allowed.")
    wall_s: float = Field(
        default=1200.0,
        ge=0.001,  # at least a millisecond: its text form (six decimals) reads back the same
        allow_inf_nan=False,
        description="Wall-clock seconds for the campaign.",
    )
    tokens: int = Field(default=2_000_000, gt=0, description="LLM tokens (prompt + completion).")

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, value: Any) -> Any:
        if isinstance(value, str):
            return parse_budget(value)
        if isinstance(value, dict) and isinstance(value.get("wall"), str | int | float):
            value = {**value}
            wall = value.pop("wall")
            value["wall_s"] = parse_duration(str(wall))
        return value

    def __str__(self) -> str:
        """The text form, which :func:`parse_budget` reads back to the same budget."""
        wall = f"{self.wall_s:.6f}".rstrip("0").rstrip(".")  # never an exponent
        return f"experiments={self.experiments},wall={wall}s,tokens={self.tokens}"
