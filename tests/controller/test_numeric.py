"""Numeric near-duplicates on generated data: every disguise of private rows is found, honest
preprocessing of public rows is not (the thresholds were set on this data)."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import numpy as np
import pytest

from rsilab.controller import numeric
from rsilab.controller.content import MIN_HITS
from rsilab.controller.numeric import CONCENTRATION, MIN_COLUMNS, RATIO, NumericReference
from tests.controller.synthetic_data import Floats, mixture, split, strokes, writers

Transform = Callable[[Floats, np.random.Generator], Floats]


@cache
def _reference(kind: str) -> tuple[Floats, np.ndarray, NumericReference]:
    x = strokes() if kind == "strokes" else mixture()
    private = split(len(x))
    return x, private, NumericReference(x, private)


def _affine(rows: Floats, rng: np.random.Generator) -> Floats:
    width = rows.shape[1]
    return rows * rng.uniform(0.5, 2, width) + rng.uniform(-5, 5, width)


def _noise(rows: Floats, rng: np.random.Generator, sd: float = 0.05) -> Floats:
    return rows + rng.normal(0, sd, rows.shape) * _reference_sd(rows)


def _reference_sd(rows: Floats) -> Floats:
    sd = rows.std(axis=0)
    return np.where(sd > 0, sd, 1.0)


ATTACKS: dict[str, Transform] = {
    "exact": lambda p, rng: p,
    "scale in [0.5, 2] and shift": _affine,
    "noise 0.05 sd": _noise,
    "columns permuted": lambda p, rng: p[:, rng.permutation(p.shape[1])],
    "all three": lambda p, rng: _noise(_affine(p, rng), rng)[:, rng.permutation(p.shape[1])],
    "standardised": lambda p, rng: (p - p.mean(0)) / _reference_sd(p),
    "half the columns, in order": lambda p, rng: p[:, np.sort(rng.permutation(p.shape[1]))[
        : p.shape[1] // 2]],
    "a label column added": lambda p, rng: np.hstack([p, rng.integers(0, 10, (len(p), 1))]),
    "a 10% subset": lambda p, rng: p[rng.permutation(len(p))[: len(p) // 10]],
}  # fmt: skip


@pytest.mark.parametrize("kind", ["strokes", "mixture"])
@pytest.mark.parametrize("attack", list(ATTACKS))
def test_private_rows_under_each_disguise_are_found(kind: str, attack: str) -> None:
    x, private, reference = _reference(kind)
    rng = np.random.default_rng(7)
    rows = x[private]
    table = ATTACKS[attack](rows, rng)
    hits = reference.match(table)
    assert len(hits) >= min(len(table) * 0.9, MIN_HITS * 5), (attack, len(hits), len(table))
    assert all(private[h.item] for h in hits)
    assert all(h.ratio < RATIO for h in hits)


@pytest.mark.parametrize("kind", ["strokes", "mixture"])
def test_private_rows_mixed_into_ten_times_as_many_public_rows_are_found(kind: str) -> None:
    x, private, reference = _reference(kind)
    rng = np.random.default_rng(3)
    leaked = x[private][:27]
    public = x[~private][rng.integers((~private).sum(), size=270)]
    table = _noise(_affine(np.vstack([public, leaked]), rng), rng)
    hits = reference.match(table)
    assert {h.row for h in hits} == set(range(270, 297))


HONEST: dict[str, Transform] = {
    "as they are": lambda q, rng: q,
    "standardised": lambda q, rng: (q - q.mean(0)) / _reference_sd(q),
    "noised (0.2 sd)": lambda q, rng: _noise(q, rng, 0.2),
    "mixed up in pairs": lambda q, rng: 0.5 * q + 0.5 * q[rng.permutation(len(q))],
    "rows rescaled": lambda q, rng: q * rng.uniform(0.8, 1.2, (len(q), 1)),
    "random rows": lambda q, rng: rng.normal(q.mean(0), _reference_sd(q), q.shape),
}


@pytest.mark.parametrize("kind", ["strokes", "mixture"])
@pytest.mark.parametrize("honest", list(HONEST))
def test_public_rows_honestly_transformed_give_fewer_hits_than_a_flag_needs(
    kind: str, honest: str
) -> None:
    x, private, reference = _reference(kind)
    rng = np.random.default_rng(11)
    hits = reference.match(HONEST[honest](x[~private], rng))
    assert len(hits) < MIN_HITS, (honest, len(hits))


def test_public_images_shifted_by_a_pixel_give_fewer_hits_than_a_flag_needs() -> None:
    x, private, reference = _reference("strokes")
    images = x[~private].reshape(-1, 8, 8)
    shifted = np.vstack(
        [np.roll(images, k, axis=a).reshape(len(images), -1) for k in (-1, 1) for a in (1, 2)]
    )
    assert len(reference.match(shifted)) < MIN_HITS


def test_the_ratio_test_decides_a_row_between_a_private_and_a_public_item() -> None:
    """Rows on the segment from a private item to its nearest public one: a hit only while
    the private one is under RATIO times as far as the public one."""
    x, private, reference = _reference("mixture")
    pairs = []
    for item in np.flatnonzero(private)[:40]:
        public = np.flatnonzero(~private)
        nearest = public[np.argmin(((x[public] - x[item]) ** 2).sum(1))]
        pairs.append((x[item], x[nearest]))
    for t, hit in ((0.2, True), (0.45, False)):  # distance ratio t / (1 - t): 0.25, 0.82
        rows = np.array([p + t * (q - p) for p, q in pairs])
        found = reference.match(np.vstack([rows, x[~private][:200]]))
        assert (len([h for h in found if h.row < 40]) >= 35) is hit, t


def test_tables_too_narrow_or_too_short_are_not_judged() -> None:
    x, private, reference = _reference("strokes")
    rows = x[private]
    assert reference.match(rows[:, : MIN_COLUMNS - 1]) == []
    assert reference.match(rows[:7]) == []
    assert len(reference.match(rows[:8])) == 8


def test_a_reference_needs_private_and_public_items_and_enough_columns() -> None:
    x, private, _ = _reference("mixture")
    assert not NumericReference(x, np.ones(len(x), dtype=bool)).usable
    assert not NumericReference(x[:, : MIN_COLUMNS - 1], private).usable
    with pytest.raises(ValueError, match="finite"):
        NumericReference(np.full((3, 9), np.nan), np.ones(3, dtype=bool))


def test_scattered_look_alikes_among_many_augmented_rows_are_no_copy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Handwriting has near twins across tiers: public images shifted by a pixel, eight ways,
    bring a private twin within the ratio now and then. Those hits are a sliver of the rows
    nearer a private item than a public one, and the concentration rule drops them; a copy's
    rows are nearly all hits."""
    x = writers()
    private = split(len(x))
    reference = NumericReference(x, private)
    images = x[~private].reshape(-1, 8, 8)
    shifts = [(dx, dy) for dx in (-1, 0, 1) for dy in (-1, 0, 1) if dx or dy]
    shifted = np.vstack(
        [np.roll(np.roll(images, dx, 2), dy, 1).reshape(len(images), -1) for dx, dy in shifts]
    )
    assert reference.match(shifted) == []
    monkeypatch.setattr(numeric, "CONCENTRATION", 0.0)
    assert len(reference.match(shifted)) >= MIN_HITS  # what the rule keeps from being a flag
    # a copy among as many rows that are no item at all: its hits stand
    rng = np.random.default_rng(0)
    junk = rng.normal(x.mean(0), x.std(0) + 1e-9, (600, 64))
    monkeypatch.setattr(numeric, "CONCENTRATION", CONCENTRATION)
    assert {h.row for h in reference.match(np.vstack([x[private][:60], junk]))} == set(range(60))
