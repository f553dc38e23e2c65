"""The dashboard's HTML helpers: everything given as text is escaped; marks follow the
benchmark's direction."""

from __future__ import annotations

import math

from rsilab.records import Interval
from rsilab.web._html import (
    DASH,
    better_class,
    esc,
    num,
    page,
    signed_interval,
    table,
    tag,
)


def test_text_is_escaped_everywhere_it_goes() -> None:
    hostile = '<script>alert("x")</script>&'
    assert "<script>" not in esc(hostile)
    made = tag("p", esc(hostile), title=hostile, data_x='"')
    assert made.startswith('<p title="&lt;script&gt;') and 'data-x="&quot;"' in made
    assert "<script>" not in table([hostile], [[esc(hostile)]])
    whole = page(hostile, "", nav=[("/", hostile)])
    assert whole.count("<script>") == 0  # no live script without a ledger position
    assert page("t", "", head_seq=3).count("<script>") == 1


def test_an_empty_table_says_so() -> None:
    assert "nothing here" in table(["a"], [], empty="nothing here")
    assert "<table" not in table(["a"], [], empty="nothing here")


def test_numbers_and_missing_values() -> None:
    assert num(None) == DASH and num(math.nan) == DASH and num(math.inf) == DASH
    assert num(1234) == "1,234" and num(0.12345) == "0.123"


def test_differences_are_marked_in_the_benchmarks_direction() -> None:
    assert better_class(0.1, 0.3) == "pos" and better_class(-0.3, -0.1) == "neg"
    assert better_class(-0.1, 0.2) == "ns"
    assert better_class(-0.3, -0.1, higher=False) == "pos"  # lower is better: a drop is good
    assert better_class(0.1, 0.3, higher=False) == "neg"
    shown = signed_interval(Interval(value=-0.2, low=-0.3, high=-0.1), higher=False)
    assert 'class="pos"' in shown and "-0.200 [-0.300, -0.100]" in shown
