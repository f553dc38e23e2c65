"""HTML building blocks of the dashboard: escaping, tables, badges and the page frame.

Every page is plain server-rendered HTML with its CSS inline, so the dashboard and the
one-file report work with no network: nothing is fetched from a CDN. Every helper that takes
text escapes it; helpers that take ``Html`` take markup that was built by these helpers.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Iterable, Sequence
from typing import Any, NewType

from rsilab.records import Interval

DASH = "\u2013"
"""Shown where a value is missing."""

Html = NewType("Html", str)
"""Markup that is safe to put in a page as is (built by the helpers of this module)."""


def esc(value: object) -> Html:
    """``value`` as text, escaped for HTML content and attribute values."""
    return Html(html.escape(str(value), quote=True))


def join(parts: Iterable[str]) -> Html:
    """Markup parts put one after another."""
    return Html("".join(parts))


def tag(name: str, content: str = "", **attrs: object) -> Html:
    """``<name attrs>content</name>``; ``content`` must already be markup. Attribute names
    take ``_`` for ``-`` and a trailing ``_`` is dropped (``class_``); None values are left out."""
    rendered = "".join(
        f' {key.rstrip("_").replace("_", "-")}="{esc(value)}"'
        for key, value in attrs.items()
        if value is not None
    )
    return Html(f"<{name}{rendered}>{content}</{name}>")


def link(href: str, text: object, **attrs: object) -> Html:
    """A link with escaped text."""
    return tag("a", esc(text), href=href, **attrs)


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[str]],
    *,
    cls: str = "",
    empty: str = "none",
    numeric: Sequence[int] = (),
) -> Html:
    """A table; header texts are escaped, cells are markup. ``numeric`` columns align right.
    No rows gives a line saying ``empty`` instead of an empty table."""
    body = []
    for row in rows:
        cells = "".join(
            f'<td class="num">{c}</td>' if i in numeric else f"<td>{c}</td>"
            for i, c in enumerate(row)
        )
        body.append(f"<tr>{cells}</tr>")
    if not body:
        return tag("p", esc(empty), class_="empty")
    head = "".join(
        f'<th class="num">{esc(h)}</th>' if i in numeric else f"<th>{esc(h)}</th>"
        for i, h in enumerate(headers)
    )
    return Html(
        f'<table class="{esc(cls)}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )


def section(title: str, content: str, *, ident: str | None = None) -> Html:
    """A titled section of a page."""
    return tag("section", tag("h2", esc(title)) + content, id=ident)


def badge(state: object) -> Html:
    """A coloured label for a state (campaign, direction, experiment, candidate, job)."""
    text = str(state)
    return tag("span", esc(text), class_=f"badge s-{text.replace('_', '-')}")


def num(value: float | int | None, digits: int = 3) -> Html:
    """A number for a table cell (a dash for None or a non-finite value)."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return Html(DASH)
    if isinstance(value, int):
        return esc(f"{value:,}")
    return esc(f"{value:.{digits}f}")


def interval(value: Interval | None, digits: int = 3) -> Html:
    """``value [low, high]``, or a dash."""
    if value is None:
        return Html(DASH)
    return esc(f"{value.value:.{digits}f} [{value.low:.{digits}f}, {value.high:.{digits}f}]")


def signed_interval(value: Interval | None, digits: int = 3, *, higher: bool = True) -> Html:
    """A difference with its interval, signed, marked good or bad when the interval excludes
    zero (``higher``: whether a positive difference is the better one)."""
    if value is None:
        return Html(DASH)
    text = f"{value.value:+.{digits}f} [{value.low:+.{digits}f}, {value.high:+.{digits}f}]"
    return tag("span", esc(text), class_=better_class(value.low, value.high, higher))


def better_class(low: float, high: float, higher: bool = True) -> str:
    """The mark of a difference whose range is [low, high]: 'pos' when it is surely the
    better way, 'neg' when surely the worse, else 'ns'."""
    if low > 0 or high < 0:
        return "pos" if (low > 0) == higher else "neg"
    return "ns"


def seconds(value: float) -> Html:
    """A duration for people: '42 s', '12.5 min', '3.2 h'."""
    if value < 120:
        return esc(f"{value:.1f} s")
    if value < 7200:
        return esc(f"{value / 60:.1f} min")
    return esc(f"{value / 3600:.2f} h")


def pre(text: str, *, cls: str = "") -> Html:
    """Preformatted text, escaped."""
    return tag("pre", esc(text), class_=cls or None)


def json_block(value: Any) -> Html:
    """A value as indented JSON."""
    return pre(json.dumps(value, indent=2, sort_keys=True, default=str), cls="json")


def details(summary: str, content: str, *, open_: bool = False) -> Html:
    """A collapsible block; ``summary`` is text."""
    flag = " open" if open_ else ""
    return Html(f"<details{flag}><summary>{esc(summary)}</summary>{content}</details>")


CSS = """
:root{--fg:#1d2330;--muted:#5d6675;--line:#d8dde6;--bg:#f6f7f9;--card:#fff;--accent:#2356c4}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);
background:var(--bg)}
header.top{background:#1d2330;color:#fff;padding:.6rem 1.2rem;display:flex;gap:1.2rem;
align-items:baseline;flex-wrap:wrap}
header.top a{color:#cfe0ff;text-decoration:none}header.top a:hover{text-decoration:underline}
header.top .brand{font-weight:700;color:#fff;margin-right:.6rem}
header.top .live{margin-left:auto;font-size:12px;color:#9fb0c8}
main{padding:1rem 1.2rem 3rem;max-width:1400px}
h1{font-size:1.35rem;margin:.2rem 0 .8rem}h2{font-size:1.1rem;margin:0 0 .6rem}
section{background:var(--card);border:1px solid var(--line);border-radius:6px;padding:.9rem 1rem;
margin:0 0 1rem;overflow-x:auto}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{text-align:left;padding:.28rem .5rem;border-bottom:1px solid var(--line);vertical-align:top}
th{background:#eef1f6;font-weight:600}td.num,th.num{text-align:right;
font-variant-numeric:tabular-nums}
a{color:var(--accent)}
.badge{display:inline-block;padding:0 .45rem;border-radius:9px;font-size:12px;background:#e4e7ec}
.s-running,.s-open,.s-created,.s-queued,.s-proposed,.s-evaluating{background:#dbe8ff}
.s-finished,.s-supported,.s-succeeded,.s-accepted{background:#d4f2dc}
.s-promising,.s-stopped,.s-pending,.s-stale{background:#fdebc8}
.s-failed,.s-refuted,.s-rejected,.s-invalid,.s-cancelled,.s-killed{background:#fbd5d5}
.s-exhausted{background:#e1e3e8}
.pos{color:#157a2c;font-weight:600}.neg{color:#b3261e;font-weight:600}.ns{color:var(--muted)}
.muted,.empty{color:var(--muted)}
pre{background:#f3f4f7;border:1px solid var(--line);padding:.5rem;overflow:auto;max-height:28rem;
font-size:12px;margin:.3rem 0}
pre.diff .add{color:#157a2c}pre.diff .del{color:#b3261e}pre.diff .hunk{color:#6c4bb4}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem;margin:0}
dl.facts dt{color:var(--muted)}dl.facts dd{margin:0}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:1rem}
.cards{display:flex;gap:.8rem;flex-wrap:wrap;margin-bottom:1rem}
.card{background:var(--card);border:1px solid var(--line);border-radius:6px;padding:.5rem .8rem;
min-width:9rem}.card b{display:block;font-size:1.2rem}
svg text{font-family:system-ui,sans-serif}
svg.chart{max-width:100%;height:auto}.dag-wrap{overflow-x:auto}
form.guide textarea{width:100%;min-height:4rem;font:inherit}
form.guide button,form.pick button{margin-top:.4rem}
nav.sub{margin:-.3rem 0 1rem;display:flex;gap:1rem;flex-wrap:wrap}
"""

_LIVE_SCRIPT = """
(function(){
  var head = document.body.getAttribute('data-head');
  var note = document.getElementById('live-note');
  function say(text){ if (note) note.textContent = text; }
  function writing(main){
    // A redraw would throw away what the reader is typing or choosing: wait until the
    // form is sent or emptied.
    var a = document.activeElement;
    if (a && main.contains(a) && /^(TEXTAREA|INPUT|SELECT)$/.test(a.tagName)) return true;
    return Array.prototype.some.call(main.querySelectorAll('textarea, input[type=text]'),
      function(f){ return f.value !== ''; });
  }
  function swap(text){
    var doc = new DOMParser().parseFromString(text, 'text/html');
    var fresh = doc.querySelector('main'), now = document.querySelector('main');
    if (!fresh || !now) return;
    var open = Array.prototype.map.call(now.querySelectorAll('details[open]'),
      function(d){ return d.id; });
    now.innerHTML = fresh.innerHTML;
    open.forEach(function(id){ var d = id && document.getElementById(id); if (d) d.open = true; });
  }
  function poll(){
    fetch('/api/head', {cache: 'no-store'}).then(function(r){ return r.json(); })
    .then(function(h){
      if (String(h.seq) === head) return;
      if (writing(document.querySelector('main'))) {
        say('live · paused while you write (ledger event ' + h.seq + ')');
        return;
      }
      return fetch(location.href, {cache: 'no-store'}).then(function(r){ return r.text(); })
        .then(function(t){ swap(t); head = String(h.seq); say('live · ledger event ' + head); });
    }).catch(function(){ say('live · server not reachable'); })
    .then(function(){ setTimeout(poll, 2000); });
  }
  setTimeout(poll, 2000);
})();
"""


def page(
    title: str,
    body: str,
    *,
    nav: Sequence[tuple[str, str]] = (),
    head_seq: int | None = None,
) -> Html:
    """A whole HTML document: the top bar with ``nav`` links, then ``body`` in ``<main>``.

    With ``head_seq`` (the ledger sequence the page was read at) the page polls the server
    every 2 s and redraws its ``<main>`` when the ledger has moved on, so it follows a running
    campaign; without it (the one-file report) the page has no script at all.
    """
    links = join(link(href, text) for href, text in nav)
    live = (
        tag("span", esc(f"live · ledger event {head_seq}"), class_="live", id="live-note")
        if head_seq is not None
        else ""
    )
    script = f"<script>{_LIVE_SCRIPT}</script>" if head_seq is not None else ""
    data_head = f' data-head="{head_seq}"' if head_seq is not None else ""
    return Html(
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)} · rsilab</title><style>{CSS}</style></head>"
        f"<body{data_head}>"
        f'<header class="top"><span class="brand">rsilab</span>{links}{live}</header>'
        f"<main>{body}</main>{script}</body></html>\n"
    )


def facts(pairs: Iterable[tuple[str, str]]) -> Html:
    """A definition list of (label, markup) pairs."""
    return Html(
        '<dl class="facts">' + "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in pairs) + "</dl>"
    )


def cards(pairs: Iterable[tuple[str, str]]) -> Html:
    """Big-number cards: (label, markup)."""
    return Html(
        '<div class="cards">'
        + "".join(f'<div class="card"><b>{v}</b>{esc(k)}</div>' for k, v in pairs)
        + "</div>"
    )
