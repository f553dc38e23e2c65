"""Numeric near-duplicates: rows of a table that are private items under a disguise.

:class:`NumericReference` holds one benchmark's numeric inputs (every sample whose input is a
vector of numbers, private and public alike). :meth:`NumericReference.match` takes a table
found in a candidate's data and says which of its rows are private items, robustly to what a
copy can do to them without losing them as training data:

- **a per-feature affine map** (every value of a column scaled and shifted alike), including
  standardising and rescaling: a column is mapped back by a least-squares fit on rows matched
  with confidence;
- **small noise** on every value: distances, not equality, decide;
- **column order and column subsets** (and extra columns, a label among them): candidate
  columns are assigned to reference columns by the Hungarian method, first on the shape of
  their standardised distributions, then on their correlation over confidently matched rows;
  a column whose best correlation stays under :data:`MIN_CORRELATION` is left out;
- **rows mixed with public rows, or only a subset of the private ones**: every row is judged
  alone.

A row is a hit only by the **ratio test**: its nearest private item is closer than
:data:`RATIO` times its nearest public one. A public row, honestly transformed (standardised,
noised, augmented), has its own source among the public items and fails the test; a row
that is no item at all is about as far from both. The caller decides how many hits make a
flag. Out of reach: a random rotation of the feature space, non-linear per-row maps, and
noise of the order of the items' spacing (such data no longer identifies the private items).

Thresholds were set on synthetic data (tests/controller/test_numeric.py generates it: images
drawn from random stroke prototypes and correlated Gaussian mixtures), never on a built-in
task's tiers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.optimize import linear_sum_assignment

__all__ = ["MIN_COLUMNS", "NumericHit", "NumericReference"]

_Floats = npt.NDArray[np.float64]
_Ints = npt.NDArray[np.intp]

MIN_COLUMNS = 8
"""Fewer matched informative columns than this identify no item: the table is not judged."""
MIN_ROWS = 8
"""A table needs this many rows to estimate its columns' statistics (smaller tables of the
same width are pooled by the caller)."""
RATIO = 0.5
"""A row is a private hit when its nearest private item is under this share of the distance
to its nearest public item."""
MIN_CORRELATION = 0.8
"""A candidate column is kept when it correlates at least this much with its reference column
over the confidently matched rows."""
_ANCHOR_RATIO = 0.8  # Lowe's test: a row's nearest item clearly nearer than the second
_ROUNDS = 4
_FIXED_ROUNDS = 3
_ENOUGH = 0.9
_MAX_WIDTH = 4  # a table this many times wider than the items holds no item per row
_QAP_ROUNDS = 8
_FIT_ROWS = 600  # rows used to fit the column map (all rows are judged at the end)
_QUANTILES = np.linspace(0.02, 0.98, 25)
_CHUNK = 1 << 22  # floats per distance block


@dataclass(frozen=True)
class NumericHit:
    """One row of a table found to be a private item."""

    row: int
    """The row's index in the table given to :meth:`NumericReference.match`."""
    item: int
    """The private item's index in the reference."""
    ratio: float
    """Distance to the nearest private item over distance to the nearest public one."""


@dataclass
class _Map:
    """Candidate columns ``cols`` mapped to reference columns ``refs`` as ``z = a x + b``."""

    cols: _Ints
    refs: _Ints
    slope: _Floats
    offset: _Floats
    anchors: int = 0
    """Rows matched with confidence under this map (set once refined)."""

    def apply(self, table: _Floats) -> _Floats:
        return table[:, self.cols] * self.slope + self.offset

    def key(self) -> tuple[tuple[int, int], ...]:
        return tuple(zip(self.cols.tolist(), self.refs.tolist(), strict=True))


class NumericReference:
    """One benchmark's numeric items, ``vectors[i]`` private when ``private[i]``."""

    def __init__(self, vectors: _Floats, private: npt.NDArray[np.bool_]) -> None:
        """Raises ValueError when the shapes disagree or a value is not finite."""
        if vectors.ndim != 2 or len(vectors) != len(private) or not np.isfinite(vectors).all():
            raise ValueError("vectors must be a finite 2-D array with one flag per row")
        self.width = vectors.shape[1]
        sd = vectors.std(axis=0)
        self.live: _Ints = np.flatnonzero(sd > 0)
        self.z: _Floats = (vectors[:, self.live] - vectors[:, self.live].mean(0)) / sd[self.live]
        self.private = private.astype(bool)
        self._signatures = _signatures(self.z)
        self._corr = _correlations(self.z)
        self._profiles = _profiles(self._corr)

    @property
    def usable(self) -> bool:
        """Whether the reference has private and public items and enough columns to judge."""
        both = bool(self.private.any()) and bool((~self.private).any())
        return len(self.live) >= MIN_COLUMNS and both

    def match(self, table: _Floats) -> list[NumericHit]:
        """The rows of ``table`` (rows x columns, any width) that pass the ratio test.

        Rows with a value that is not finite are left out; a table with fewer than
        :data:`MIN_ROWS` rows or :data:`MIN_COLUMNS` varying columns, or more than four
        times as many columns as the items have, gives no hits.
        """
        if not self.usable or table.ndim != 2 or table.shape[1] > _MAX_WIDTH * self.width:
            return []
        rows = np.flatnonzero(np.isfinite(table).all(axis=1))
        x = table[rows].astype(np.float64)
        if len(x) < MIN_ROWS:
            return []
        sd = x.std(axis=0)
        varying = np.flatnonzero(sd > 1e-12 * (1 + np.abs(x).max(axis=0)))
        if len(varying) < MIN_COLUMNS:
            return []
        sample = x if len(x) <= _FIT_ROWS else x[np.linspace(0, len(x) - 1, _FIT_ROWS, dtype=int)]
        fitted: list[_Map] = []
        tried: set[tuple[tuple[int, int], ...]] = set()
        for start in self._starts(x, varying):
            if start.key() in tried:
                continue
            tried.add(start.key())
            refined = self._refine(sample, start)
            if refined is not None:
                fitted.append(refined)
                if refined.anchors >= _ENOUGH * len(sample):
                    break  # nearly every row is explained: no other map can do better
        if not fitted:
            return []
        # The map most rows agree with, whatever they match: choosing by hits would favour
        # flags; choosing by confident rows favours the map that explains the table.
        best = max(fitted, key=lambda f: (f.anchors, len(f.cols)))
        return [NumericHit(int(rows[h.row]), h.item, h.ratio) for h in self._judge(x, best)]

    def _starts(self, x: _Floats, varying: _Ints) -> list[_Map]:
        """First guesses at the column map, each with the candidate columns standardised:
        same positions (a table as wide as the reference), columns in the same order with
        some left out (a monotone alignment of distribution shapes), and any order (the
        Hungarian assignment of distribution shapes and correlation profiles, improved by
        aligning the correlation matrices)."""
        mean, sd = x[:, varying].mean(0), x[:, varying].std(0)
        z = (x[:, varying] - mean) / sd
        shapes = _signatures(z)
        cost = np.abs(shapes[:, None, :] - self._signatures[None, :, :]).mean(axis=2)
        mirrored = np.abs(-shapes[:, None, ::-1] - self._signatures[None, :, :]).mean(axis=2)
        sign = np.where(mirrored < cost, -1.0, 1.0)
        shape_cost = np.minimum(cost, mirrored)
        guesses: list[tuple[_Ints, _Ints]] = []
        if x.shape[1] == self.width:
            where = np.searchsorted(self.live, varying)
            same = (where < len(self.live)) & (
                self.live[np.minimum(where, len(self.live) - 1)] == varying
            )
            guesses.append((np.flatnonzero(same), where[same]))
        guesses.append(_monotone(shape_cost))
        corr = _correlations(z)
        profile = _profiles(corr)
        k = min(profile.shape[1], self._profiles.shape[1])
        profile_cost = np.abs(profile[:, None, :k] - self._profiles[None, :, :k]).mean(axis=2)
        total = _scaled(shape_cost) + _scaled(profile_cost)
        picked, refs = linear_sum_assignment(total)
        for _ in range(_QAP_ROUNDS):
            score = corr[:, picked] @ self._corr[:, refs].T
            picked, refs = linear_sum_assignment(0.5 * total - np.abs(score))
        guesses.append((picked, refs))
        guesses.append(linear_sum_assignment(shape_cost))
        starts = []
        for picked, refs in guesses:
            if len(picked) >= MIN_COLUMNS:
                s = sign[picked, refs]
                starts.append(
                    _Map(varying[picked], refs, s / sd[picked], -s * mean[picked] / sd[picked])
                )
        return starts

    def _refine(self, sample: _Floats, start: _Map) -> _Map | None:
        """Improve ``start`` by alternating row matches and column fits on the rows matched
        with confidence: first its column pairs kept (only their scale and shift re-fit),
        then re-assigned by correlation; None when fewer than :data:`MIN_ROWS` rows match
        with confidence or fewer than :data:`MIN_COLUMNS` columns keep a fit."""
        current = start
        for round_ in range(_FIXED_ROUNDS + _ROUNDS):
            nearest, ratio = _two_nearest(current.apply(sample), self.z[:, current.refs])
            order = np.argsort(ratio, kind="stable")
            count = max(MIN_ROWS, len(sample) // 2, int((ratio < _ANCHOR_RATIO).sum()))
            confident = order[:count]
            matched = self.z[nearest[confident]]
            if round_ < _FIXED_ROUNDS:
                current = _refit(current, sample[confident], matched)
                continue
            fitted = _fit(sample[confident], matched, 0.0)
            if fitted.key() == current.key():
                break
            current = fitted
        nearest, ratio = _two_nearest(current.apply(sample), self.z[:, current.refs])
        confident = np.flatnonzero(ratio < _ANCHOR_RATIO)
        if len(confident) < MIN_ROWS:
            return None
        final = _fit(sample[confident], self.z[nearest[confident]], MIN_CORRELATION)
        final.anchors = len(confident)
        return final if len(final.cols) >= MIN_COLUMNS else None

    def _judge(self, x: _Floats, fitted: _Map) -> list[NumericHit]:
        mapped = fitted.apply(x)
        reference = self.z[:, fitted.refs]
        private_d, item = _nearest(mapped, reference[self.private])
        public_d, _ = _nearest(mapped, reference[~self.private])
        items = np.flatnonzero(self.private)[item]
        hits = np.flatnonzero(private_d < RATIO * public_d)
        return [NumericHit(int(r), int(items[r]), float(private_d[r] / public_d[r])) for r in hits]


def _scaled(cost: _Floats) -> _Floats:
    return cost / max(float(cost.mean()), 1e-12)


def _monotone(cost: _Floats) -> tuple[_Ints, _Ints]:
    """The cheapest matching of candidate columns to reference columns that keeps their
    order; a reference column may go unmatched for free, a candidate column at the cost of
    an average pair (a label or an extra column)."""
    rows, cols = cost.shape
    skip = float(np.median(cost))
    total = np.zeros((rows + 1, cols + 1))
    total[1:, 0] = skip * np.arange(1, rows + 1)
    paired = np.zeros((rows + 1, cols + 1), dtype=bool)  # reached by pairing j-1 with k-1
    for j in range(1, rows + 1):
        pair = total[j - 1, :-1] + cost[j - 1]
        drop = total[j - 1, 1:] + skip
        best = np.minimum(pair, drop)
        # total[j, k] = min(best[k-1], total[j, k-1]): a running minimum along the row
        total[j, 1:] = np.minimum.accumulate(np.minimum(best, total[j, 0]))
        paired[j, 1:] = (pair <= drop) & (total[j, 1:] == pair)
    picked: list[int] = []
    refs: list[int] = []
    j, k = rows, cols
    while j > 0 and k > 0:
        if paired[j, k]:
            picked.append(j - 1)
            refs.append(k - 1)
            j, k = j - 1, k - 1
        elif total[j, k] == total[j, k - 1]:
            k -= 1
        else:
            j -= 1
    return np.array(picked[::-1], dtype=np.intp), np.array(refs[::-1], dtype=np.intp)


def _correlations(z: _Floats) -> _Floats:
    """Column correlations of standardised columns, diagonal zeroed."""
    corr = (z.T @ z) / len(z)
    np.fill_diagonal(corr, 0.0)
    return np.nan_to_num(corr)


def _profiles(corr: _Floats) -> _Floats:
    """Each column's correlations with the others, sorted: blind to column order."""
    return -np.sort(-np.abs(corr), axis=1)[:, :-1]


def _signatures(z: _Floats) -> _Floats:
    """Each column's standardised quantiles (columns x quantiles)."""
    return np.quantile(z, _QUANTILES, axis=0).T


def _refit(current: _Map, x: _Floats, z: _Floats) -> _Map:
    """``current``'s column pairs with scale and shift fit by least squares on matched rows
    (a pair whose candidate column is constant there keeps its old fit)."""
    xs, zs = x[:, current.cols], z[:, current.refs]
    xc = xs - xs.mean(0)
    var = (xc**2).sum(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = np.where(var > 0, (xc * (zs - zs.mean(0))).sum(0) / var, current.slope)
    offset = np.where(var > 0, zs.mean(0) - slope * xs.mean(0), current.offset)
    return _Map(current.cols, current.refs, slope, offset)


def _fit(x: _Floats, z: _Floats, floor: float) -> _Map:
    """Assign candidate columns to reference columns by correlation over matched rows and fit
    ``z = a x + b`` for each pair correlated at least ``floor``."""
    xc, zc = x - x.mean(0), z - z.mean(0)
    xs, zs = np.sqrt((xc**2).sum(0)), np.sqrt((zc**2).sum(0))
    with np.errstate(divide="ignore", invalid="ignore"):
        corr = np.nan_to_num((xc.T @ zc) / np.outer(xs, zs))
    cols, refs = linear_sum_assignment(-np.abs(corr))
    keep = (np.abs(corr[cols, refs]) >= floor) & (xs[cols] > 0)
    cols, refs = cols[keep], refs[keep]
    slope = (xc[:, cols] * zc[:, refs]).sum(0) / (xs[cols] ** 2)
    offset = z[:, refs].mean(0) - slope * x[:, cols].mean(0)
    return _Map(cols, refs, slope, offset)


def _blocks(rows: int, width: int) -> Sequence[slice]:
    step = max(1, _CHUNK // max(1, width))
    return [slice(i, min(rows, i + step)) for i in range(0, rows, step)]


def _squared(a: _Floats, b: _Floats, b_norm: _Floats) -> _Floats:
    # float32 halves the cost; the ratio test does not need more digits
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    out = (a32**2).sum(1)[:, None] + b_norm[None, :].astype(np.float32) - 2 * a32 @ b32.T
    return np.asarray(np.maximum(out, 0.0), dtype=np.float64)


def _nearest(a: _Floats, b: _Floats) -> tuple[_Floats, _Ints]:
    """Distance from each row of ``a`` to its nearest row of ``b``, and that row."""
    b_norm = (b**2).sum(1)
    dist = np.empty(len(a))
    which = np.empty(len(a), dtype=np.intp)
    for block in _blocks(len(a), len(b)):
        d = _squared(a[block], b, b_norm)
        which[block] = d.argmin(axis=1)
        dist[block] = d[np.arange(len(d)), which[block]]
    return np.sqrt(dist), which


def _two_nearest(a: _Floats, b: _Floats) -> tuple[_Ints, _Floats]:
    """Each row's nearest row of ``b`` and the ratio of its distance to the second nearest's."""
    b_norm = (b**2).sum(1)
    which = np.empty(len(a), dtype=np.intp)
    ratio = np.empty(len(a))
    for block in _blocks(len(a), len(b)):
        d = _squared(a[block], b, b_norm)
        two = np.argpartition(d, 1, axis=1)[:, :2]
        first, second = np.take_along_axis(d, two, axis=1).T
        swap = second < first
        first, second = np.where(swap, second, first), np.where(swap, first, second)
        which[block] = np.where(swap, two[:, 1], two[:, 0])
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio[block] = np.nan_to_num(np.sqrt(first / second), nan=1.0)
    return which, ratio
