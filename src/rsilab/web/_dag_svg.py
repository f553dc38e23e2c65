"""The research DAG as server-side SVG: one box per direction, coloured by state, linked to
its page, with arrows from parent to child styled by relation, and the legend's content.

`dag_svg` is a pure function of its input: no JavaScript, no external assets, the same input
gives the same string, and every piece of text is XML-escaped.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from rsilab.web._svg import SVG_NS as _SVG_NS
from rsilab.web._svg import coord as _f
from rsilab.web._svg import esc as _esc
from rsilab.web._svg import message_svg as _message_svg

STATE_COLOURS: dict[str, str] = {
    "start": "#ffffff",
    "open": "#cfe6fb",
    "promising": "#ffd27a",
    "supported": "#a6dfa0",
    "refuted": "#f2a3a3",
    "exhausted": "#c4c4c4",
}
_UNKNOWN_STATE_COLOUR = "#e4e4e4"
_EDGE_COLOUR = "#666"
_LINK_COLOUR = "#2356c4"


@dataclass(frozen=True)
class EdgeStyle:
    """How one relation between directions is drawn, and what it means."""

    relation: str
    width: float
    dash: str
    colour: str
    meaning: str


EDGE_STYLES: dict[str, EdgeStyle] = {
    s.relation: s
    for s in (
        EdgeStyle("continue", 1.6, "", _EDGE_COLOUR, "continues"),
        EdgeStyle("verify", 1.4, "6 4", _EDGE_COLOUR, "verifies (fresh seeds)"),
        EdgeStyle("branch", 1.0, "", _EDGE_COLOUR, "branches from"),
        EdgeStyle("revise", 1.4, "2 3", _EDGE_COLOUR, "revises"),
        EdgeStyle("builds-on", 1.2, "1 3", _LINK_COLOUR, "an experiment builds on one of"),
        EdgeStyle("start", 1.0, "", "#aaa", "starts from the campaign's start version"),
    )
}
"""Edge styles by relation: the research DAG's own (continue, verify, branch, revise), one
drawn from experiments whose parent ran in another direction, and one from the start."""
_OTHER_EDGE = EdgeStyle("other", 1.2, "", _EDGE_COLOUR, "related")


@dataclass(frozen=True)
class DagLegend:
    """What the DAG's colours and lines mean, for a legend beside it."""

    states: tuple[tuple[str, str], ...]
    edges: tuple[EdgeStyle, ...]


_LINE_CHARS = 28
_TITLE_LINES = 3
_NODE_W, _GAP_X, _GAP_Y, _PAD = 200, 24, 56, 16


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


def wrap_title(title: str, width: int = _LINE_CHARS, lines: int = _TITLE_LINES) -> list[str]:
    """``title`` broken at spaces into at most ``lines`` lines of about ``width`` characters;
    only text beyond the last line is cut (with an ellipsis), and a word longer than a line
    is split."""
    out: list[str] = []
    line = ""
    for word in title.split():
        while len(word) > width:
            if line:
                out.append(line)
                line = ""
            out.append(word[:width])
            word = word[width:]
        if line and len(line) + 1 + len(word) > width:
            out.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    if line:
        out.append(line)
    if len(out) > lines:
        out = [*out[: lines - 1], out[lines - 1][: width - 1] + "\u2026"]
    return out or [""]


def _node_height(lines: int) -> int:
    return 22 + 14 * lines


def _node_svg(node: DagNode, x: float, y: float, height: int) -> str:
    fill = STATE_COLOURS.get(node.state, _UNKNOWN_STATE_COLOUR)
    count = (
        "start"
        if node.state == "start"
        else f"{node.experiments} experiment{'' if node.experiments == 1 else 's'}"
    )
    tip = f"{node.title} ({node.id}, {node.state})"
    cls = "dag-start" if node.state == "start" else "dag-node"
    cx = x + _NODE_W / 2
    lines = wrap_title(node.title)
    top = y + (height - 14 * (len(lines) + 1)) / 2 + 10
    spans = "".join(
        f'<tspan x="{_f(cx)}" y="{_f(top + 14 * i)}">{_esc(line)}</tspan>'
        for i, line in enumerate(lines)
    )
    return (
        f'<a href="{_esc(node.href)}" class="{cls}" data-direction-id="{_esc(node.id)}" '
        f'data-state="{_esc(node.state)}" data-title="{_esc(node.title)}">'
        f"<title>{_esc(tip)}</title>"
        f'<rect x="{_f(x)}" y="{_f(y)}" width="{_NODE_W}" height="{height}" rx="8" '
        f'fill="{fill}" stroke="#555" stroke-width="1"/>'
        f'<text class="dag-title" text-anchor="middle" font-size="12" fill="#1a1a1a">{spans}'
        f'</text><text x="{_f(cx)}" y="{_f(top + 14 * len(lines))}" text-anchor="middle" '
        f'font-size="11" fill="#444">{count}</text></a>'
    )


def _edge_svg(
    ends: tuple[str, str], x1: float, y1: float, x2: float, y2: float, relation: str
) -> str:
    mid = (y1 + y2) / 2
    style = EDGE_STYLES.get(relation, _OTHER_EDGE)
    dash = f' stroke-dasharray="{style.dash}"' if style.dash else ""
    return (
        f'<path class="dag-edge" data-relation="{_esc(relation)}" data-from="{_esc(ends[0])}" '
        f'data-to="{_esc(ends[1])}" d="M{_f(x1)} {_f(y1)} C{_f(x1)} {_f(mid)} '
        f'{_f(x2)} {_f(mid)} {_f(x2)} {_f(y2)}" '
        f'fill="none" stroke="{style.colour}" stroke-width="{style.width}"{dash} '
        'marker-end="url(#dag-arrow)"/>'
    )


def dag_legend(nodes: Sequence[DagNode]) -> DagLegend:
    """The legend of a DAG of ``nodes``: every state colour, and the styles of the relations
    its nodes have (the DAG's four are always listed, so a reader knows what is absent)."""
    used = {rel for n in nodes for _, rel in n.parents}
    edges = [s for s in EDGE_STYLES.values() if s.relation in used or s.relation in _CORE]
    states = [(k, v) for k, v in STATE_COLOURS.items() if k != "start"]
    return DagLegend(tuple(states), tuple(edges))


_CORE = frozenset({"continue", "verify", "branch", "revise"})


def dag_svg(nodes: Sequence[DagNode]) -> str:
    """Draw directions as a layered DAG, roots at the top; return one `<svg class="dag">`.

    A node's layer is its longest path from a root; a parent id not among `nodes` is ignored,
    and a cyclic link is broken rather than followed, so any input terminates (500 nodes take
    a few milliseconds). A repeated id keeps its first node. Each node is an
    `<a class="dag-node" data-direction-id=...>` holding a rounded box filled by
    `STATE_COLOURS` (grey for an unknown state), its title wrapped on up to three lines (the
    full text is in a `<title>` tooltip and `data-title`) and an experiment count; a node in
    state ``start`` (the campaign's start version) is an `<a class="dag-start">` reading
    "start" instead. Each link is a
    `<path class="dag-edge" data-relation=... data-from=... data-to=...>` from parent bottom
    to child top with an arrowhead, styled by `EDGE_STYLES`. No nodes gives a small SVG
    reading "no directions yet".
    """
    unique: dict[str, DagNode] = {}
    for n in nodes:
        unique.setdefault(n.id, n)
    if not unique:
        return _message_svg("dag", "no directions yet")
    order = list(unique)
    parents = _known_parents(list(unique.values()))
    rows = _order_rows(order, _layers(order, parents), parents)
    node_h = _node_height(max(len(wrap_title(n.title)) for n in unique.values()))
    widest = max(len(r) for r in rows)
    width = 2 * _PAD + widest * _NODE_W + (widest - 1) * _GAP_X
    height = 2 * _PAD + len(rows) * node_h + (len(rows) - 1) * _GAP_Y
    xy: dict[str, tuple[float, float]] = {}
    for li, row in enumerate(rows):
        left = (width - (len(row) * _NODE_W + (len(row) - 1) * _GAP_X)) / 2
        for i, nid in enumerate(row):
            xy[nid] = (left + i * (_NODE_W + _GAP_X), _PAD + li * (node_h + _GAP_Y))
    edges = [
        _edge_svg(
            (pid, nid),
            xy[pid][0] + _NODE_W / 2,
            xy[pid][1] + node_h,
            xy[nid][0] + _NODE_W / 2,
            xy[nid][1],
            rel,
        )
        for nid in order
        for pid, rel in parents[nid]
    ]
    boxes = [_node_svg(unique[nid], *xy[nid], node_h) for nid in order]
    return (
        f'<svg {_SVG_NS} class="dag" role="img" aria-label="direction graph" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif">'
        '<defs><marker id="dag-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M0 0 L10 5 L0 10 z" fill="#666"/>'
        "</marker></defs>" + "".join(edges) + "".join(boxes) + "</svg>"
    )
