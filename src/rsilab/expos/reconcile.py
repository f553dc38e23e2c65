"""Reporting guard: numbers an agent writes in a review are reconciled with the records.

Agents never write counted scores, but a review's rationale is read by the Main agent and by
people, so a made-up number there can still steer a campaign. :func:`unreconciled_numbers`
finds the score-like numbers in a text (decimals such as ``0.873`` or ``+0.05``, and
percentages such as ``87.3%``) and returns those that match no number the records hold,
within the rounding the text shows. Plain integers (``3 seeds``, ``epoch 10``) are not
checked: they are counts, not measurements.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

# A number ends at a character that is neither a word character nor a dot, or at a sentence's
# full stop ("reached 0.991."); "2.1.3" and "v2.1x" are not numbers.
_NUMBER = re.compile(r"(?<![\w.])([+-]?\d+(?:\.(\d+))?%|[+-]?\d+\.(\d+))(?=\.?(?:[^\w.]|$))")


@dataclass(frozen=True)
class ReportedNumber:
    """A number found in a text: as written, its value and the rounding it was shown with."""

    text: str
    value: float
    half_ulp: float


def reported_numbers(text: str) -> list[ReportedNumber]:
    """Score-like numbers in ``text`` (decimals and percentages), in order."""
    found = []
    for match in _NUMBER.finditer(text):
        raw = match.group(1)
        if raw.endswith("%"):
            digits = len(match.group(2) or "")
            value = float(raw[:-1]) / 100
            half = 0.5 * 10.0 ** -(digits + 2)
        else:
            digits = len(match.group(3))
            value, half = float(raw), 0.5 * 10.0**-digits
        if math.isfinite(value):
            found.append(ReportedNumber(raw, value, half))
    return found


def unreconciled_numbers(text: str, known: Iterable[float]) -> list[ReportedNumber]:
    """Numbers in ``text`` that match no value in ``known`` (nor its negation), allowing for
    the rounding each number is written with (``0.87`` matches 0.8712)."""
    values = [v for v in known if math.isfinite(v)]
    out = []
    for number in reported_numbers(text):
        tolerance = number.half_ulp + 1e-12
        if not any(abs(abs(number.value) - abs(v)) <= tolerance for v in values):
            out.append(number)
    return out
