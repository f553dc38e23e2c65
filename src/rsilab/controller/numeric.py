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
that is no item at all is about as far from both. A table's hits stand only when they are
concentrated (:data:`CONCENTRATION`). The caller decides how many hits make a flag.

Out of reach: a random rotation of the feature space (or any mixing of columns), non-linear
per-row maps, noise of the order of the items' spacing (such data no longer identifies the
private items), and a few dozen rows under all of scale and shift, noise and a column
permutation at once (too few rows to fit the map; more rows, or any public rows beside
them, are enough).

Thresholds were set on generated data (``tests/controller/synthetic_data.py``: images drawn
from random stroke prototypes, with and without per-writer near twins, and correlated
Gaussian mixtures), never on a built-in task's tiers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.optimize import linear_sum_assignment

__all__ = ["CONCENTRATION", "MIN_COLUMNS", "RATIO", "NumericHit", "NumericReference"]

_Floats = npt.NDArray[np.float64]
_Floats32 = npt.NDArray[np.float32]
_Ints = npt.NDArray[np.intp]

MIN_COLUMNS = 8
"""Fewer matched informative columns than this identify no item: the table is not judged."""
MIN_ROWS = 8
"""A table needs this many rows to estimate its columns' statistics (smaller tables of the
same width are pooled by the caller)."""
RATIO = 0.5
"""A row is a private hit when its nearest private item is under this share of the distance
to its nearest public item."""
CONCENTRATION = 0.1
"""A table's hits stand only when they are at least this share of its rows that are nearer a
private item than a public one: public data augmented many times over (every image shifted
by a pixel) brings a private look-alike within the ratio now and then, always a small share
of those rows however many they are, while a copy's rows are nearly all hits."""
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
        self._mean = vectors[:, self.live].mean(0)
        self._sd = sd[self.live]
        self.z: _Floats = (vectors[:, self.live] - self._mean) / self._sd
        self._raw = np.quantile(vectors[:, self.live], _QUANTILES, axis=0).T
        self.private = private.astype(bool)
        self._signatures = _signatures(self.z)
        self._corr = _correlations(self.z)
        self._profiles = _profiles(self._corr)

    @property
    def usable(self) -> bool:
        """Whether the reference has private and public items and enough columns to judge."""
        both = bool(self.private.any()) and bool((~self.private).any())
        return len(self.live) >= MIN_COLUMNS and both

    def match(self, table: _Floats, *, explained: float = 0.0) -> list[NumericHit]:
        """The rows of ``table`` (rows x columns, any width) that pass the ratio test.

        Rows with a value that is not finite are left out; a table with fewer than
        :data:`MIN_ROWS` rows or :data:`MIN_COLUMNS` varying columns, or more than four
        times as many columns as the items have, gives no hits. ``explained``: the share
        of the rows the column map was fit on that must match an item (private or public)
        with confidence, else no hits: a guessed reading of bare bytes (the wrong item type
        or width) explains few rows, and its scattered coincidences are not a copy.
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
        tried: set[tuple[object, ...]] = set()
        for start in self._starts(x, varying):
            same = (start.key(), start.slope.round(9).tobytes(), start.offset.round(9).tobytes())
            if same in tried:
                continue
            tried.add(same)
            refined = self._refine(sample, start)
            if refined is not None:
                fitted.append(refined)
                if len(sample) >= _FIT_ROWS // 4 and refined.anchors >= _ENOUGH * len(sample):
                    break  # nearly every row is explained: no other map can do better
                # (a few rows can be fitted by a wrong map too: then every start is tried)
        if not fitted:
            return []
        # The map most rows agree with, whatever they match: choosing by hits would favour
        # flags; choosing by confident rows favours the map that explains the table.
        best = max(fitted, key=lambda f: (f.anchors, len(f.cols)))
        if best.anchors < explained * len(sample):
            return []
        return [NumericHit(int(rows[h.row]), h.item, h.ratio) for h in self._judge(x, best)]

    def _starts(self, x: _Floats, varying: _Ints) -> list[_Map]:
        """First guesses at the column map, each with the candidate columns standardised:
        same positions (also taken in the items' own units), columns in the same order with
        some left out (a monotone alignment of distribution shapes), and any order (the
        Hungarian assignment of distribution shapes and correlation profiles, improved by
        aligning the correlation matrices; and of the values' quantiles in the items' own
        units, for rows copied as they are)."""
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
        # any order, values left in the items' own units: a few rows copied as they are
        raw = np.quantile(x[:, varying], _QUANTILES, axis=0).T
        units = np.abs(raw[:, None, :] - self._raw[None, :, :]).mean(axis=2) / self._sd
        unit_guess = linear_sum_assignment(units)
        starts = []
        for number, (picked, refs) in enumerate(guesses):
            if len(picked) < MIN_COLUMNS:
                continue
            if number == 0:  # by position, also in the items' own units: a copy of a few
                # rows of one kind has statistics of its own, but its values are the items'
                cols = varying[picked]
                ref_sd, ref_mean = self._sd[refs], self._mean[refs]
                starts.append(_Map(cols, refs, 1 / ref_sd, -ref_mean / ref_sd))
            s = sign[picked, refs]
            starts.append(
                _Map(varying[picked], refs, s / sd[picked], -s * mean[picked] / sd[picked])
            )
        if len(unit_guess[0]) >= MIN_COLUMNS:
            cols, refs = varying[unit_guess[0]], unit_guess[1]
            starts.append(_Map(cols, refs, 1 / self._sd[refs], -self._mean[refs] / self._sd[refs]))
        return starts

    def _refine(self, sample: _Floats, start: _Map) -> _Map | None:
        """Improve ``start`` by alternating row matches and column fits on the rows matched
        with confidence: first its column pairs kept (only their scale and shift re-fit),
        then re-assigned by correlation. The map under which most distinct items are matched
        with confidence wins (a map that collapses the rows onto a few items does not); its
        columns correlated under :data:`MIN_CORRELATION` are dropped. None when fewer than
        :data:`MIN_ROWS` rows match with confidence or :data:`MIN_COLUMNS` columns remain."""
        current = start
        best: tuple[int, _Map, _Ints, _Ints] | None = None
        last = _FIXED_ROUNDS + _ROUNDS
        for round_ in range(last + 1):
            nearest, ratio = _two_nearest(current.apply(sample), self.z[:, current.refs])
            confident = np.flatnonzero(ratio < _ANCHOR_RATIO)
            score = len(np.unique(nearest[confident]))
            if best is None or score > best[0]:
                best = (score, current, nearest, confident)
            if round_ == last:
                break
            order = np.argsort(ratio, kind="stable")
            anchors = order[: max(MIN_ROWS, len(sample) // 2, len(confident))]
            matched = self.z[nearest[anchors]]
            if round_ < _FIXED_ROUNDS:
                current = _refit(current, sample[anchors], matched)
                continue
            fitted = _fit(sample[anchors], matched, 0.0)
            if fitted.key() == current.key() and round_ > _FIXED_ROUNDS:
                break
            current = fitted
        assert best is not None
        score, chosen, nearest, confident = best
        if score < MIN_ROWS:
            return None
        final = _refit(chosen, sample[confident], self.z[nearest[confident]], MIN_CORRELATION)
        final.anchors = score
        return final if len(final.cols) >= MIN_COLUMNS else None

    def _judge(self, x: _Floats, fitted: _Map) -> list[NumericHit]:
        mapped = fitted.apply(x)
        reference = self.z[:, fitted.refs]
        private_d, item = _nearest(mapped, reference[self.private])
        public_d, _ = _nearest(mapped, reference[~self.private])
        items = np.flatnonzero(self.private)[item]
        hits = np.flatnonzero(private_d < RATIO * public_d)
        if len(hits) < CONCENTRATION * np.count_nonzero(private_d < public_d):
            return []  # scattered coincidences among many rows, not a copy
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


def _refit(current: _Map, x: _Floats, z: _Floats, floor: float = 0.0) -> _Map:
    """``current``'s column pairs with scale and shift fit by least squares on matched rows;
    pairs correlated under ``floor`` there are dropped (a pair whose candidate column is
    constant there keeps its old fit when ``floor`` is 0)."""
    xs, zs = x[:, current.cols], z[:, current.refs]
    xc, zc = xs - xs.mean(0), zs - zs.mean(0)
    var, zvar = (xc**2).sum(0), (zc**2).sum(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = np.where(var > 0, (xc * zc).sum(0) / var, current.slope)
        corr = np.nan_to_num((xc * zc).sum(0) / np.sqrt(var * zvar))
    offset = np.where(var > 0, zs.mean(0) - slope * xs.mean(0), current.offset)
    keep = np.abs(corr) >= floor if floor > 0 else np.ones(len(slope), dtype=bool)
    return _Map(current.cols[keep], current.refs[keep], slope[keep], offset[keep])


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


def _squared(a: _Floats, b32: _Floats32, b_norm32: _Floats32) -> _Floats32:
    """Squared distances from each row of ``a`` to each row of ``b32`` (``b_norm32``: its
    rows' squared norms), in float32: it halves the cost and the memory a block moves, and
    the ratio test does not need more digits. Callers widen only the entries they pick, so
    the choices are those a float64 copy of this block would give."""
    a32 = a.astype(np.float32)
    out: _Floats32 = (a32**2).sum(1)[:, None] + b_norm32[None, :] - 2 * a32 @ b32.T
    np.maximum(out, np.float32(0.0), out=out)
    return out


def _as32(b: _Floats) -> tuple[_Floats32, _Floats32]:
    """``b`` in float32 and its rows' squared norms (from the float64 rows, then narrowed),
    converted once for every block that reads them."""
    return b.astype(np.float32), (b**2).sum(1).astype(np.float32)


def _nearest(a: _Floats, b: _Floats) -> tuple[_Floats, _Ints]:
    """Distance from each row of ``a`` to its nearest row of ``b``, and that row."""
    b32, b_norm32 = _as32(b)
    dist = np.empty(len(a))
    which = np.empty(len(a), dtype=np.intp)
    for block in _blocks(len(a), len(b)):
        d = _squared(a[block], b32, b_norm32)
        which[block] = d.argmin(axis=1)
        dist[block] = d[np.arange(len(d)), which[block]]
    return np.sqrt(dist), which


def _two_nearest(a: _Floats, b: _Floats) -> tuple[_Ints, _Floats]:
    """Each row's nearest row of ``b`` and the ratio of its distance to the second nearest's."""
    b32, b_norm32 = _as32(b)
    which = np.empty(len(a), dtype=np.intp)
    ratio = np.empty(len(a))
    for block in _blocks(len(a), len(b)):
        d = _squared(a[block], b32, b_norm32)
        two = np.argpartition(d, 1, axis=1)[:, :2]
        first, second = np.take_along_axis(d, two, axis=1).astype(np.float64).T
        swap = second < first
        first, second = np.where(swap, second, first), np.where(swap, first, second)
        which[block] = np.where(swap, two[:, 1], two[:, 0])
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio[block] = np.nan_to_num(np.sqrt(first / second), nan=1.0)
    return which, ratio
