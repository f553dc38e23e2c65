"""Server-side SVG line charts for the lab dashboard: score curves over time or experiments.

`line_chart_svg` draws score curves over time or experiment count, with light scatter dots
and marked accepted versions. It is a pure function of its input: no JavaScript, no external
assets, the same input gives the same string, and every piece of text is XML-escaped (the
direction DAG is drawn the same way, by :mod:`rsilab.web._dag_svg`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")
SVG_NS = 'xmlns="http://www.w3.org/2000/svg"'
"""The namespace attribute of every chart's root element."""


def esc(text: str) -> str:
    """``text`` escaped for SVG content and attribute values."""
    return escape(text, quote=True)


def coord(v: float) -> str:
    """A coordinate with one decimal: short and deterministic."""
    s = f"{v:.1f}"
    return s[:-2] if s.endswith(".0") else s


def message_svg(cls: str, text: str) -> str:
    """A small SVG of class ``cls`` saying ``text`` (escaped), drawn where there is no data."""
    return (
        f'<svg {SVG_NS} class="{cls}" role="img" width="240" height="40" viewBox="0 0 240 40">'
        f'<text x="120" y="24" text-anchor="middle" font-family="sans-serif" font-size="13" '
        f'fill="#666">{esc(text)}</text></svg>'
    )


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


def _nice_step(span: float, target: int, seconds: bool, integer: bool = False) -> float:
    raw = span / target
    if seconds and raw <= _TIME_STEPS[-1]:
        return float(next(s for s in _TIME_STEPS if s >= raw))
    unit = 86400.0 if seconds else 1.0
    mag = 10.0 ** math.floor(math.log10(raw / unit))
    step = next(m * mag for m in (1.0, 2.0, 5.0, 10.0) if m * mag * unit >= raw) * unit
    return max(step, 1.0) if integer else step


def _ticks(
    lo: float, hi: float, target: int, seconds: bool = False, integer: bool = False
) -> tuple[list[float], float]:
    """Tick values inside [lo, hi] and their step, 1, 2 or 5 times a power of ten (a whole
    number, at least 1, when ``integer``: an axis of counts)."""
    step = _nice_step(hi - lo, target, seconds, integer)
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


_TIME_UNITS = (("d", 86400.0), ("h", 3600.0), ("min", 60.0))


def _time_unit(step: float) -> tuple[str, float]:
    """The one unit an axis of durations is labelled in: the largest its tick step fills."""
    for unit, size in _TIME_UNITS:
        if step >= size:
            return unit, size
    return "s", 1.0


def _duration(v: float, unit: tuple[str, float]) -> str:
    name, size = unit
    return f"{coord(v / size)} {name}"


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
            f'<path d="M{coord(x)} {y} h18" stroke="{esc(colour)}" stroke-width="2"/>'
            f'<text x="{coord(x + 22)}" y="{y + 4}" font-size="11">{esc(s.name)}</text>'
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


def _axes(to_xy: _ToXY, x_is_seconds: bool, x_integer: bool, x_label: str, y_label: str) -> str:
    left, top, w, h = to_xy.left, to_xy.top, to_xy.w, to_xy.h
    bottom = top + h
    out = ['<g class="axes" font-size="11" fill="#333">']
    yt, ystep = _ticks(*to_xy.ry, max(2, int(h // 40)))
    for v in yt:
        y = to_xy(to_xy.rx[0], v)[1]
        label = _num(v, ystep)
        out.append(
            f'<path d="M{coord(left)} {coord(y)} H{coord(left + w)}" stroke="#e6e6e6"/>'
            f'<text class="y-tick" x="{coord(left - 6)}" y="{coord(y + 4)}" text-anchor="end">'
            f"{label}</text>"
        )
    xt, xstep = _ticks(*to_xy.rx, max(2, int(w // 90)), x_is_seconds, x_integer)
    unit = _time_unit(xstep)
    for v in xt:
        x = to_xy(v, to_xy.ry[0])[0]
        label = _duration(v, unit) if x_is_seconds else _num(v, xstep)
        out.append(
            f'<path d="M{coord(x)} {coord(bottom)} v4" stroke="#333"/>'
            f'<text class="x-tick" x="{coord(x)}" y="{coord(bottom + 16)}" text-anchor="middle">'
            f"{label}</text>"
        )
    out.append(
        f'<path d="M{coord(left)} {coord(top)} V{coord(bottom)} H{coord(left + w)}" fill="none" '
        f'stroke="#333"/><text x="{coord(left + w / 2)}" y="{coord(bottom + 32)}" '
        f'text-anchor="middle">{esc(x_label)}</text><text transform="rotate(-90)" '
        f'x="{coord(-(top + h / 2))}" y="14" text-anchor="middle">{esc(y_label)}</text></g>'
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
    x_integer: bool = False,
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
    Ticks fall on 1, 2 or 5 times a power of ten (whole numbers when `x_integer`, for counts;
    time-friendly steps when `x_is_seconds`, every label of the axis in one unit, the largest
    its step fills: "0 min", "10 min", "20 min"); the y range is padded and never of zero
    height. Points with a nan or infinite coordinate are skipped; with none left the SVG reads
    "no scores yet".
    """
    curves = [(i, s, _finite(s.points)) for i, s in enumerate(series)]
    curves = [c for c in curves if c[2]]
    dots = _finite(scatter)
    pins = [m for m in marks if math.isfinite(m.x) and math.isfinite(m.y)]
    every = [p for _, _, pts in curves for p in pts] + dots + [(m.x, m.y) for m in pins]
    if not every:
        return message_svg("chart", "no scores yet")
    xs, ys = [p[0] for p in every], [p[1] for p in every]
    colours = [s.colour or _PALETTE[i % len(_PALETTE)] for i, s, _ in curves]
    legend, rows = _legend([s for _, s, _ in curves], colours, width)
    top = 12.0 + 16 * rows
    box = (56.0, top, max(width - 72.0, 10.0), max(height - top - 44.0, 10.0))
    to_xy = _ToXY(box, _span(min(xs), max(xs), 0.0), _span(min(ys), max(ys), 0.05))
    body = [_axes(to_xy, x_is_seconds, x_integer, x_label, y_label), legend]
    if dots:
        d = to_xy.path(dots, "M%.1f %.1fh0")
        body.append(
            f'<path class="scatter" d="{d}" stroke="#9db4cc" stroke-opacity="0.6" '
            'stroke-width="4" stroke-linecap="round" fill="none"/>'
        )
    for (_, s, pts), colour in zip(curves, colours, strict=True):
        body.append(
            f'<path class="series" data-name="{esc(s.name)}" d="{_series_path(pts, step, to_xy)}"'
            f' stroke="{esc(colour)}" stroke-width="2" stroke-linecap="round" fill="none"/>'
        )
    for m in pins:
        cx, cy = to_xy(m.x, m.y)
        dot = (
            f'<circle class="mark" cx="{coord(cx)}" cy="{coord(cy)}" r="4.5" fill="#fff" '
            f'stroke="#222" stroke-width="2"><title>{esc(m.label)}</title></circle>'
        )
        body.append(f'<a href="{esc(m.href)}">{dot}</a>' if m.href else dot)
    label = esc(f"{y_label} by {x_label}")
    return (
        f'<svg {SVG_NS} class="chart" role="img" aria-label="{label}" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif">'
        + "".join(body)
        + "</svg>"
    )
