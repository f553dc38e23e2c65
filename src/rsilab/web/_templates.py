"""The Jinja2 environment every page is rendered with, loaded once.

Templates live in ``rsilab/web/templates`` (package data). Autoescaping is on, so any value a
template prints is escaped unless it is ``Markup``; the only ``Markup`` handed in is the SVG
charts (built by :mod:`rsilab.web._svg`, which escapes every text it draws) and what
:mod:`rsilab.web._format` builds from escaped parts. ``StrictUndefined`` makes a misspelt
name an error instead of an empty cell.
"""

from __future__ import annotations

from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from rsilab.web import _format

ENV = Environment(
    loader=PackageLoader("rsilab.web", "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    auto_reload=False,
)
ENV.filters.update(
    num=_format.num,
    interval=_format.interval,
    signed=_format.signed_interval,
    seconds=_format.seconds,
    when=_format.when,
)
ENV.globals.update(DASH=_format.DASH, better_class=_format.better_class)


def render(name: str, **context: Any) -> Markup:
    """The template ``name`` rendered with ``context``, as markup to put in a page."""
    return Markup(ENV.get_template(name).render(**context))


def page(
    title: str,
    body: Markup,
    *,
    nav: list[tuple[str, str]] | tuple[()] = (),
    head_seq: int | None = None,
) -> str:
    """A whole HTML document: the top bar with ``nav`` links, then ``body`` (markup) in
    ``<main>``.

    With ``head_seq`` (the ledger sequence the page was read at) the page polls the server
    every 2 s and redraws its ``<main>`` when the ledger has moved on, so it follows a running
    campaign; without it (the one-file report) the page has no script at all.
    """
    return ENV.get_template("page.html").render(
        title=title, body=body, nav=list(nav), head_seq=head_seq
    )
