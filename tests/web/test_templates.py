"""The dashboard's templates and value formats: everything given as text is escaped, a
misspelt name is an error, and marks follow the benchmark's direction."""

from __future__ import annotations

import math

import jinja2
import pytest
from markupsafe import Markup

from rsilab.records import Interval
from rsilab.web._format import DASH, better_class, num, signed_interval
from rsilab.web._templates import ENV, page, render

HOSTILE = '<script>alert("x")</script>&'


def test_text_is_escaped_everywhere_it_goes() -> None:
    shown = render("message.html", heading=HOSTILE, lines=[HOSTILE], back='/"><script>')
    assert "<script>" not in shown and "&lt;script&gt;" in shown
    assert 'href="/&#34;&gt;&lt;script&gt;"' in shown
    whole = page(HOSTILE, Markup("<p>body</p>"), nav=[("/", HOSTILE)])
    assert whole.count("<script>") == 0  # no live script without a ledger position
    assert "<p>body</p>" in whole  # markup handed in stays markup
    assert page("t", Markup(""), head_seq=3).count("<script>") == 1


def test_a_misspelt_or_missing_name_is_an_error_not_an_empty_cell() -> None:
    with pytest.raises(jinja2.UndefinedError):
        render("message.html", heading="x", lines=[])  # 'back' is missing


def test_every_packaged_template_compiles() -> None:
    names = ENV.list_templates()
    assert {"page.html", "overview.html", "compare.html", "report.html"} <= set(names)
    for name in names:
        ENV.get_template(name)


def test_numbers_and_missing_values() -> None:
    assert num(None) == DASH and num(math.nan) == DASH and num(math.inf) == DASH
    assert num(1234) == "1,234" and num(0.12345) == "0.123"


def test_differences_are_marked_in_the_benchmarks_direction() -> None:
    assert better_class(0.1, 0.3) == "pos" and better_class(-0.3, -0.1) == "neg"
    assert better_class(-0.1, 0.2) == "ns"
    assert better_class(-0.3, -0.1, higher=False) == "pos"  # lower is better: a drop is good
    assert better_class(0.1, 0.3, higher=False) == "neg"
    shown = signed_interval(Interval(value=-0.2, low=-0.3, high=-0.1), higher=False)
    assert shown == '<span class="pos">-0.200 [-0.300, -0.100]</span>'
