"""Values as the pages show them: numbers, intervals, durations and times.

These are the templates' filters (registered in :mod:`rsilab.web._templates`). A function that
returns plain ``str`` is escaped by the template; one that returns ``Markup`` builds its markup
from escaped parts only.
"""

from __future__ import annotations

import math

from markupsafe import Markup

from rsilab.records import Interval

DASH = "\u2013"
"""Shown where a value is missing."""


def num(value: float | int | None, digits: int = 3) -> str:
    """A number for a table cell (a dash for None or a non-finite value)."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return DASH
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:.{digits}f}"


def interval(value: Interval | None, digits: int = 3) -> str:
    """``value [low, high]``, or a dash."""
    if value is None:
        return DASH
    return f"{value.value:.{digits}f} [{value.low:.{digits}f}, {value.high:.{digits}f}]"


def better_class(low: float, high: float, higher: bool = True) -> str:
    """The mark of a difference whose range is [low, high]: 'pos' when it is surely the
    better way, 'neg' when surely the worse, else 'ns'."""
    if low > 0 or high < 0:
        return "pos" if (low > 0) == higher else "neg"
    return "ns"


def signed_interval(value: Interval | None, digits: int = 3, *, higher: bool = True) -> Markup:
    """A difference with its interval, signed, in a span marked good or bad when the interval
    excludes zero (``higher``: whether a positive difference is the better one)."""
    if value is None:
        return Markup.escape(DASH)
    text = f"{value.value:+.{digits}f} [{value.low:+.{digits}f}, {value.high:+.{digits}f}]"
    cls = better_class(value.low, value.high, higher)
    return Markup('<span class="{}">{}</span>').format(cls, text)


def seconds(value: float) -> str:
    """A duration for people: '42.0 s', '12.5 min', '3.20 h'."""
    if value < 120:
        return f"{value:.1f} s"
    if value < 7200:
        return f"{value / 60:.1f} min"
    return f"{value / 3600:.2f} h"


def when(iso: str | None) -> str:
    """An ISO-8601 time to the second, with a space for the 'T' (a dash for none)."""
    return iso[:19].replace("T", " ") if iso else DASH
