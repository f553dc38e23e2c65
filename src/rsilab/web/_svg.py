"""Server-side SVG charts for the lab dashboard: the direction DAG and score line charts.

`dag_svg` draws research directions as a layered graph (one box per direction, coloured by
state, linked to its page; arrows from parent to child styled by relation). `line_chart_svg`
draws score curves over time or experiment count, with light scatter dots and marked accepted
versions. Both are pure functions of their input: no JavaScript, no external assets, the same
input gives the same string, and every piece of text is XML-escaped.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

STATE_COLOURS: dict[str, str] = {
    "open": "#cfe6fb",
    "promising": "#ffd27a",
    "supported": "#a6dfa0",
    "refuted": "#f2a3a3",
    "exhausted": "#c4c4c4",
}
_UNKNOWN_STATE_COLOUR = "#e4e4e4"
_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")
_EDGE_STYLES: dict[str, str] = {
    "continue": 'stroke-width="1.6"',
    "verify": 'stroke-width="1.4" stroke-dasharray="6 4"',
    "branch": 'stroke-width="0.9"',
    "revise": 'stroke-width="1.4" stroke-dasharray="2 3"',
}
_SVG_NS = 'xmlns="http://www.w3.org/2000/svg"'
_TITLE_MAX = 28
_NODE_W, _NODE_H, _GAP_X, _GAP_Y, _PAD = 200, 44, 24, 56, 16


def _esc(text: str) -> str:
    return escape(text, quote=True)


def _f(v: float) -> str:
    """A coordinate with one decimal: short and deterministic."""
    s = f"{v:.1f}"
    return s[:-2] if s.endswith(".0") else s


def _message_svg(cls: str, text: str) -> str:
    return (
        f'<svg {_SVG_NS} class="{cls}" role="img" width="240" height="40" viewBox="0 0 240 40">'
        f'<text x="120" y="24" text-anchor="middle" font-family="sans-serif" font-size="13" '
        f'fill="#666">{_esc(text)}</text></svg>'
    )


# ---------------------------------------------------------------- direction DAG


@dataclass(frozen=True)
class DagNode:
    """One research direction as drawn in the DAG."""

    id: str
    title: str
    state: str
    experiments: int
    parents: tuple[tuple[str, str], ...]
    href: str


def _known_parents(nodes: Sequence[DagNode]) -> dict[str, list[tuple[str, str]]]:
    """Parent links per node id, keeping only parents among the nodes (no self-loops)."""
    known = {n.id for n in nodes}
    out: dict[str, list[tuple[str, str]]] = {}
    for n in nodes:
        seen: set[str] = set()
        links = out.setdefault(n.id, [])
        for pid, rel in n.parents:
            if pid in known and pid != n.id and pid not in seen:
                seen.add(pid)
                links.append((pid, rel))
    return out


def _layers(order: list[str], parents: dict[str, list[tuple[str, str]]]) -> dict[str, int]:
    """Longest path from a root, by Kahn's algorithm; a cycle is broken at its earliest node.

    Every node is placed exactly once, so a cyclic parent link cannot make this loop.
    """
    children: dict[str, list[str]] = {i: [] for i in order}
    pending = {i: len(parents[i]) for i in order}
    for i in order:
        for pid, _ in parents[i]:
            children[pid].append(i)
    layer: dict[str, int] = {}
    ready = deque(i for i in order if pending[i] == 0)
    cursor = 0
    while len(layer) < len(order):
        if not ready:  # only cycles left: place the first unplaced node, ignoring unplaced parents
            while order[cursor] in layer:
                cursor += 1
            ready.append(order[cursor])
        nid = ready.popleft()
        placed = [layer[p] for p, _ in parents[nid] if p in layer]
        layer[nid] = max(placed) + 1 if placed else 0
        for c in children[nid]:
            pending[c] -= 1
            if pending[c] == 0 and c not in layer:
                ready.append(c)
    return layer


def _sweep(rows: list[list[str]], neighbours: dict[str, list[str]], pos: dict[str, float]) -> None:
    """Reorder each row by the barycentre of its neighbours' positions (in place).

    A node with no neighbours keeps its own position; ties keep the current order.
    """
    for row in rows:
        keyed = []
        for idx, nid in enumerate(row):
            near = [pos[m] for m in neighbours[nid]]
            keyed.append((sum(near) / len(near) if near else pos[nid], idx, nid))
        keyed.sort()
        row[:] = [nid for _, _, nid in keyed]
        _place_row(row, pos)


def _place_row(row: list[str], pos: dict[str, float]) -> None:
    half = (len(row) - 1) / 2
    for i, nid in enumerate(row):
        pos[nid] = i - half


def _order_rows(
    order: list[str], layer: dict[str, int], parents: dict[str, list[tuple[str, str]]]
) -> list[list[str]]:
    rows: list[list[str]] = [[] for _ in range(max(layer.values()) + 1)]
    for nid in order:
        rows[layer[nid]].append(nid)
    up: dict[str, list[str]] = {nid: [p for p, _ in parents[nid]] for nid in order}
    down: dict[str, list[str]] = {nid: [] for nid in order}
    for nid in order:
        for p in up[nid]:
            down[p].append(nid)
    pos: dict[str, float] = {}
    for row in rows:
        _place_row(row, pos)
    for _ in range(2):
        _sweep(rows[1:], up, pos)
        _sweep(rows[-2::-1], down, pos)
    return rows


def _node_svg(node: DagNode, x: float, y: float) -> str:
    title = node.title if len(node.title) <= _TITLE_MAX else node.title[: _TITLE_MAX - 1] + "…"
    fill = STATE_COLOURS.get(node.state, _UNKNOWN_STATE_COLOUR)
    count = f"{node.experiments} experiment{'' if node.experiments == 1 else 's'}"
    tip = f"{node.title} ({node.id}, {node.state})"
    cx = x + _NODE_W / 2
    return (
        f'<a href="{_esc(node.href)}" class="dag-node" data-direction-id="{_esc(node.id)}" '
        f'data-state="{_esc(node.state)}"><title>{_esc(tip)}</title>'
        f'<rect x="{_f(x)}" y="{_f(y)}" width="{_NODE_W}" height="{_NODE_H}" rx="8" '
        f'fill="{fill}" stroke="#555" stroke-width="1"/>'
        f'<text x="{_f(cx)}" y="{_f(y + 18)}" text-anchor="middle" font-size="12" '
        f'fill="#1a1a1a">{_esc(title)}</text>'
        f'<text x="{_f(cx)}" y="{_f(y + 35)}" text-anchor="middle" font-size="11" '
        f'fill="#444">{count}</text></a>'
    )


def _edge_svg(x1: float, y1: float, x2: float, y2: float, relation: str) -> str:
    mid = (y1 + y2) / 2
    style = _EDGE_STYLES.get(relation, 'stroke-width="1.2"')
    return (
        f'<path class="dag-edge" data-relation="{_esc(relation)}" '
        f'd="M{_f(x1)} {_f(y1)} C{_f(x1)} {_f(mid)} {_f(x2)} {_f(mid)} {_f(x2)} {_f(y2)}" '
        f'fill="none" stroke="#666" {style} marker-end="url(#dag-arrow)"/>'
    )


def dag_svg(nodes: Sequence[DagNode]) -> str:
    """Draw directions as a layered DAG, roots at the top; return one `<svg class="dag">`.

    A node's layer is its longest path from a root; a parent id not among `nodes` is ignored,
    and a cyclic link is broken rather than followed, so any input terminates (500 nodes take
    a few milliseconds). A repeated id keeps its first node. Each node is an
    `<a class="dag-node" data-direction-id=...>` holding a rounded box filled by
    `STATE_COLOURS` (grey for an unknown state), its title cut to 28 characters (the full text
    is in a `<title>` tooltip) and an experiment count. Each link is a
    `<path class="dag-edge" data-relation=...>` from parent bottom to child top with an
    arrowhead. No nodes gives a small SVG reading "no directions yet".
    """
    unique: dict[str, DagNode] = {}
    for n in nodes:
        unique.setdefault(n.id, n)
    if not unique:
        return _message_svg("dag", "no directions yet")
    order = list(unique)
    parents = _known_parents(list(unique.values()))
    rows = _order_rows(order, _layers(order, parents), parents)
    widest = max(len(r) for r in rows)
    width = 2 * _PAD + widest * _NODE_W + (widest - 1) * _GAP_X
    height = 2 * _PAD + len(rows) * _NODE_H + (len(rows) - 1) * _GAP_Y
    xy: dict[str, tuple[float, float]] = {}
    for li, row in enumerate(rows):
        left = (width - (len(row) * _NODE_W + (len(row) - 1) * _GAP_X)) / 2
        for i, nid in enumerate(row):
            xy[nid] = (left + i * (_NODE_W + _GAP_X), _PAD + li * (_NODE_H + _GAP_Y))
    edges = [
        _edge_svg(
            xy[pid][0] + _NODE_W / 2,
            xy[pid][1] + _NODE_H,
            xy[nid][0] + _NODE_W / 2,
            xy[nid][1],
            rel,
        )
        for nid in order
        for pid, rel in parents[nid]
    ]
    boxes = [_node_svg(unique[nid], *xy[nid]) for nid in order]
    return (
        f'<svg {_SVG_NS} class="dag" role="img" aria-label="direction graph" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif">'
        '<defs><marker id="dag-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M0 0 L10 5 L0 10 z" fill="#666"/>'
        "</marker></defs>" + "".join(edges) + "".join(boxes) + "</svg>"
    )


# ---------------------------------------------------------------- line chart


@dataclass(frozen=True)
class Series:
    """One named curve; `points` are (x, y) with x non-decreasing."""

    name: str
    points: tuple[tuple[float, float], ...]
    colour: str = ""


@dataclass(frozen=True)
class Mark:
    """A highlighted point (an accepted version), with tooltip text and an optional link."""

    x: float
    y: float
    label: str
    href: str = ""


_TIME_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200)


def downsample_steps(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Keep the first point, every point whose y differs from the one before, and the last.

    For a step-after (best-so-far) curve the result draws exactly the same staircase.
    """
    out: list[tuple[float, float]] = []
    for i, p in enumerate(points):
        if i == 0 or p[1] != points[i - 1][1] or i == len(points) - 1:
            out.append((p[0], p[1]))
    return out


def _finite(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    return [(x, y) for x, y in points if math.isfinite(x) and math.isfinite(y)]


def _nice_step(span: float, target: int, seconds: bool) -> float:
    raw = span / target
    if seconds and raw <= _TIME_STEPS[-1]:
        return float(next(s for s in _TIME_STEPS if s >= raw))
    unit = 86400.0 if seconds else 1.0
    mag = 10.0 ** math.floor(math.log10(raw / unit))
    return next(m * mag for m in (1.0, 2.0, 5.0, 10.0) if m * mag * unit >= raw) * unit


def _ticks(lo: float, hi: float, target: int, seconds: bool = False) -> tuple[list[float], float]:
    """Tick values inside [lo, hi] and their step, 1, 2 or 5 times a power of ten."""
    step = _nice_step(hi - lo, target, seconds)
    first, last = math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9)
    return [round(k * step, 12) for k in range(first, last + 1)], step


def _span(lo: float, hi: float, pad: float) -> tuple[float, float]:
    """Widen [lo, hi] by `pad` of its span on each side; an empty span gets a width."""
    if hi == lo:
        d = abs(lo) * 0.1 or 1.0
        return lo - d, hi + d
    d = (hi - lo) * pad
    return lo - d, hi + d


def _num(v: float, step: float) -> str:
    if abs(v) >= 1e6 or 0 < step < 1e-4:
        return f"{v:.3g}"
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    return f"{v:.{decimals}f}" if v != 0 else "0"


def _duration(v: float) -> str:
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if abs(v) >= size:
            return f"{_f(v / size)} {unit}"
    return f"{_f(v)} s"


def _legend(series: Sequence[Series], colours: list[str], width: int) -> tuple[str, int]:
    """Legend entries laid left to right, wrapping; returns the markup and rows used."""
    if len(series) < 2:
        return "", 0
    parts, x, row = [], 56.0, 0
    for s, colour in zip(series, colours, strict=True):
        w = 30 + 7 * len(s.name)
        if x + w > width and x > 56:
            x, row = 56.0, row + 1
        y = 12 + 16 * row
        parts.append(
            f'<path d="M{_f(x)} {y} h18" stroke="{_esc(colour)}" stroke-width="2"/>'
            f'<text x="{_f(x + 22)}" y="{y + 4}" font-size="11">{_esc(s.name)}</text>'
        )
        x += w
    return '<g class="legend">' + "".join(parts) + "</g>", row + 1


class _ToXY:
    """Maps data coordinates to the plot rectangle."""

    def __init__(
        self,
        box: tuple[float, float, float, float],
        rx: tuple[float, float],
        ry: tuple[float, float],
    ) -> None:
        self.left, self.top, self.w, self.h = box
        self.rx, self.ry = rx, ry
        self.kx = self.w / (rx[1] - rx[0])
        self.ox = self.left - rx[0] * self.kx
        self.ky = -self.h / (ry[1] - ry[0])
        self.oy = self.top + self.h - ry[0] * self.ky

    def __call__(self, x: float, y: float) -> tuple[float, float]:
        return self.ox + x * self.kx, self.oy + y * self.ky

    def path(self, points: list[tuple[float, float]], fmt: str) -> str:
        """`fmt % (x, y)` per point in plot coordinates: the hot loop for 10k points."""
        ox, kx, oy, ky = self.ox, self.kx, self.oy, self.ky
        return "".join([fmt % (ox + x * kx, oy + y * ky) for x, y in points])


def _series_path(points: list[tuple[float, float]], step: bool, to_xy: _ToXY) -> str:
    if step:
        points = downsample_steps(points)
    first = to_xy.path(points[:1], "M%.1f %.1f")
    rest = to_xy.path(points[1:], "H%.1fV%.1f" if step else "L%.1f %.1f")
    return first + (rest or "h0")


def _axes(to_xy: _ToXY, x_is_seconds: bool, x_label: str, y_label: str) -> str:
    left, top, w, h = to_xy.left, to_xy.top, to_xy.w, to_xy.h
    bottom = top + h
    out = ['<g class="axes" font-size="11" fill="#333">']
    yt, ystep = _ticks(*to_xy.ry, max(2, int(h // 40)))
    for v in yt:
        y = to_xy(to_xy.rx[0], v)[1]
        label = _num(v, ystep)
        out.append(
            f'<path d="M{_f(left)} {_f(y)} H{_f(left + w)}" stroke="#e6e6e6"/>'
            f'<text class="y-tick" x="{_f(left - 6)}" y="{_f(y + 4)}" text-anchor="end">'
            f"{label}</text>"
        )
    xt, xstep = _ticks(*to_xy.rx, max(2, int(w // 90)), x_is_seconds)
    for v in xt:
        x = to_xy(v, to_xy.ry[0])[0]
        label = _duration(v) if x_is_seconds else _num(v, xstep)
        out.append(
            f'<path d="M{_f(x)} {_f(bottom)} v4" stroke="#333"/>'
            f'<text class="x-tick" x="{_f(x)}" y="{_f(bottom + 16)}" text-anchor="middle">'
            f"{label}</text>"
        )
    out.append(
        f'<path d="M{_f(left)} {_f(top)} V{_f(bottom)} H{_f(left + w)}" fill="none" '
        f'stroke="#333"/><text x="{_f(left + w / 2)}" y="{_f(bottom + 32)}" '
        f'text-anchor="middle">{_esc(x_label)}</text><text transform="rotate(-90)" '
        f'x="{_f(-(top + h / 2))}" y="14" text-anchor="middle">{_esc(y_label)}</text></g>'
    )
    return "".join(out)


def line_chart_svg(
    series: Sequence[Series],
    *,
    marks: Sequence[Mark] = (),
    scatter: Sequence[tuple[float, float]] = (),
    x_label: str,
    y_label: str,
    x_is_seconds: bool = False,
    step: bool = True,
    width: int = 640,
    height: int = 280,
) -> str:
    """Draw score curves on shared axes; return one `<svg class="chart">` of the given size.

    Each series with a finite point is one `<path class="series" data-name=...>`: a step-after
    staircase when `step` (a best-so-far curve), else straight segments; its colour is
    `Series.colour` or the palette's by index. More than one series adds a legend. `scatter` is
    one `<path class="scatter">` of round dots, so ten thousand points stay cheap. Each mark is a
    `<circle class="mark">` with a `<title>` tooltip, inside an `<a>` when it has an href.
    Ticks fall on 1, 2 or 5 times a power of ten (time-friendly steps and labels such as
    "12 min" when `x_is_seconds`); the y range is padded and never of zero height. Points with
    a nan or infinite coordinate are skipped; with none left the SVG reads "no scores yet".
    """
    curves = [(i, s, _finite(s.points)) for i, s in enumerate(series)]
    curves = [c for c in curves if c[2]]
    dots = _finite(scatter)
    pins = [m for m in marks if math.isfinite(m.x) and math.isfinite(m.y)]
    every = [p for _, _, pts in curves for p in pts] + dots + [(m.x, m.y) for m in pins]
    if not every:
        return _message_svg("chart", "no scores yet")
    xs, ys = [p[0] for p in every], [p[1] for p in every]
    colours = [s.colour or _PALETTE[i % len(_PALETTE)] for i, s, _ in curves]
    legend, rows = _legend([s for _, s, _ in curves], colours, width)
    top = 12.0 + 16 * rows
    box = (56.0, top, max(width - 72.0, 10.0), max(height - top - 44.0, 10.0))
    to_xy = _ToXY(box, _span(min(xs), max(xs), 0.0), _span(min(ys), max(ys), 0.05))
    body = [_axes(to_xy, x_is_seconds, x_label, y_label), legend]
    if dots:
        d = to_xy.path(dots, "M%.1f %.1fh0")
        body.append(
            f'<path class="scatter" d="{d}" stroke="#9db4cc" stroke-opacity="0.6" '
            'stroke-width="4" stroke-linecap="round" fill="none"/>'
        )
    for (_, s, pts), colour in zip(curves, colours, strict=True):
        body.append(
            f'<path class="series" data-name="{_esc(s.name)}" d="{_series_path(pts, step, to_xy)}"'
            f' stroke="{_esc(colour)}" stroke-width="2" stroke-linecap="round" fill="none"/>'
        )
    for m in pins:
        cx, cy = to_xy(m.x, m.y)
        dot = (
            f'<circle class="mark" cx="{_f(cx)}" cy="{_f(cy)}" r="4.5" fill="#fff" '
            f'stroke="#222" stroke-width="2"><title>{_esc(m.label)}</title></circle>'
        )
        body.append(f'<a href="{_esc(m.href)}">{dot}</a>' if m.href else dot)
    label = _esc(f"{y_label} by {x_label}")
    return (
        f'<svg {_SVG_NS} class="chart" role="img" aria-label="{label}" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif">'
        + "".join(body)
        + "</svg>"
    )
