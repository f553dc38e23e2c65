"""How often an honest item matches a private one by chance: the near guard's calibration.

The near guard (:mod:`rsilab.controller.overlap`) calls a private sample found when enough of
its *private-specific* windows (token windows no public sample has) occur in the data. For
prose that is strong evidence. For *generated* benchmarks it is not: their tiers share
templates and draw numbers and objects from small pools, so a fresh item drawn from the public
generator (an honest improver's augmentation of the train tier) repeats a private item's
template-plus-numbers windows often; only the entity (a name of a private tier's bucket) tells
a private item apart.

This module measures that, per benchmark, from the public tiers alone, by leaving one out:
each public item is treated as if it were new data - its windows that no *other* public item
has count as private-specific - and it is a *chance hit* when it is then a near hit of some
private item. The share of chance hits is the benchmark's :func:`chance_rates` entry. A
benchmark above :data:`CHANCE_RATE_MAX` (in either of the content guard's layers) is
*templated*: there a near hit counts only when the windows found include an *entity window* -
one holding a token that occurs in private inputs and in no public input
(:func:`private_only_tokens`: a private bucket's names) - or are all of a private sequence's
specific windows (the private text verbatim) - unless held-out public items hold all of a
private sequence's windows that often too (a request to set a timer for 12 minutes is drawn
again and again: its item space is small). Template words,
numbers and objects alone never flag it; a private item with its numbers changed keeps its
names and is found; one with its entities changed is indistinguishable, item by item, from the
chance hits of honest data, and is not.

:class:`EntityIndex` finds the other half, on every benchmark: a run of data that holds a
private-only token of a private item and, aligned on it, reproduces the item but for its
numbers - a private item with its numbers changed - is an *entity* hit.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

__all__ = [
    "ALIGNED_SHARE",
    "CHANCE_RATE_MAX",
    "EntityIndex",
    "chance_rates",
    "entity_mask",
    "member",
    "private_only_tokens",
    "window_hashes",
]

CHANCE_RATE_MAX = 0.005
"""A benchmark whose held-out public items are near hits more often than this is templated
(one in 200: the built-in prose and numeric benchmarks measure 0, posttrain's word problems
a few percent)."""

_Hashes = npt.NDArray[np.uint64]
MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)  # odd, so each Horner step is a bijection mod 2**64


def member(values: _Hashes, keys: _Hashes) -> npt.NDArray[np.bool_]:
    """``np.isin(values, keys)`` for sorted ``keys``: binary search, no sort of ``values``."""
    if not len(keys):
        return np.zeros(len(values), dtype=np.bool_)
    at = np.minimum(np.searchsorted(keys, values), len(keys) - 1)
    found: npt.NDArray[np.bool_] = keys[at] == values
    return found


def window_hashes(hashes: _Hashes, width: int) -> _Hashes:
    """Hash of every run of ``width`` consecutive tokens (Horner's rule, wrapping mod 2**64)."""
    count = len(hashes) - width + 1
    if count <= 0:
        return np.empty(0, dtype=np.uint64)
    out = hashes[:count].copy()
    for k in range(1, width):
        out *= MULTIPLIER
        out += hashes[k : k + count]
    return out


def private_only_tokens(
    private: Iterable[Sequence[str]], public: Iterable[Sequence[str]]
) -> frozenset[str]:
    """Tokens holding a letter that occur in some private sequence and in no public one."""
    seen = {token for tokens in public for token in tokens}
    return frozenset(
        token
        for tokens in private
        for token in tokens
        if token not in seen and any(c.isalpha() for c in token)
    )


def entity_mask(is_entity: npt.NDArray[np.bool_], width: int) -> npt.NDArray[np.bool_]:
    """For each window of ``width`` tokens (in :func:`~overlap._window_hashes`' order), whether
    it holds a token flagged in ``is_entity``."""
    count = len(is_entity) - width + 1
    if count <= 0:
        return np.zeros(0, dtype=np.bool_)
    running = np.concatenate([[0], np.cumsum(is_entity, dtype=np.int64)])
    held: npt.NDArray[np.bool_] = running[width : width + count] - running[:count] > 0
    return held


def chance_rates(
    public: Mapping[str, Sequence[Mapping[int, _Hashes]]],
    private_windows: Mapping[int, Mapping[int, list[int]]],
    totals: Sequence[int],
    share: float,
) -> dict[str, tuple[float, float]]:
    """Per benchmark, the share of its public items that are near hits of a private sequence
    when left out of the public tiers (see the module docstring), and the share that hold
    *all* of a private sequence's windows so (the private text itself, drawn again).

    Args:
        public: per benchmark, each public item's unique window hashes by width.
        private_windows: by width, each window hash of a private sequence (every window, not
            only the private-specific ones) -> the sequence numbers holding it.
        totals: each private sequence's count of private-specific windows.
        share: the near guard's share.
    """
    everyone = [item for items in public.values() for item in items]
    counts = {width: _counts(everyone, width) for width in private_windows}
    rates: dict[str, tuple[float, float]] = {}
    for bench, items in public.items():
        near = full = 0
        for item in items:
            hit = _chance_hit(item, counts, private_windows, totals, share)
            near, full = near + (hit is not None), full + (hit is True)
        size = max(len(items), 1)
        rates[bench] = (near / size, full / size)
    return rates


def _counts(items: Sequence[Mapping[int, _Hashes]], width: int) -> tuple[_Hashes, _Hashes]:
    """(sorted unique window hashes, how many public items hold each) at ``width``."""
    stacked = [item[width] for item in items if width in item]
    if not stacked:
        return np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.uint64)
    keys, counts = np.unique(np.concatenate(stacked), return_counts=True)
    return keys, counts.astype(np.uint64)


def _chance_hit(
    item: Mapping[int, _Hashes],
    counts: Mapping[int, tuple[_Hashes, _Hashes]],
    private_windows: Mapping[int, Mapping[int, list[int]]],
    totals: Sequence[int],
    share: float,
) -> bool | None:
    """Whether ``item``, left out, is a near hit (its windows no other public item has become
    private-specific): None when not, True when it holds all of a private sequence's
    windows, False when only enough of them."""
    found: defaultdict[int, int] = defaultdict(int)
    for width, table in private_windows.items():
        windows = item.get(width)
        if windows is None or not len(windows):
            continue
        keys, held = counts[width]
        only_here = windows[held[np.searchsorted(keys, windows)] == 1]
        for window in only_here.tolist():
            for number in table.get(window, ()):
                found[number] += 1
    hit: bool | None = None
    for number, shared in found.items():
        total = totals[number] + shared
        if shared >= share * total and shared >= min(3, total):
            hit = hit or shared == total
    return hit


ALIGNED_SHARE = 0.5
"""Share of a private sequence's positions an entity hit must reproduce exactly."""


class EntityIndex:
    """Private sequences that hold a private-only token, found by it.

    An *entity* hit is a run of the data as long as a private sequence, aligned on an
    occurrence of one of its private-only tokens, that agrees with it at every position but
    those holding a number (and at ``share`` of its positions at least): the private item in
    its own words with its numbers changed. Honest data built from the public tiers holds no
    private-only token, so it never makes one; a text that mentions the entity in other words
    (a corpus sentence stating its facts) does not either.
    """

    def __init__(
        self,
        sequences: Sequence[_Hashes],
        numbers: Sequence[npt.NDArray[np.bool_]],
        entity: frozenset[int],
        share: float = ALIGNED_SHARE,
    ) -> None:
        """``numbers``: for each sequence, which of its positions hold a number."""
        self._share = share
        self._sequences = list(sequences)
        self._numbers = list(numbers)
        wanted = np.array(sorted(entity), dtype=np.uint64)
        where: defaultdict[int, list[tuple[int, int]]] = defaultdict(list)
        for number, hashes in enumerate(self._sequences):
            for position in np.flatnonzero(np.isin(hashes, wanted)).tolist():
                where[int(hashes[position])].append((number, position))
        self._where = dict(where)
        self._keys = np.array(sorted(where), dtype=np.uint64)

    def find(self, hashes: _Hashes, line_of: npt.NDArray[np.int64]) -> dict[int, tuple[int, float]]:
        """Sequence number -> (line, share of its positions reproduced) of each entity hit in
        a token stream (``line_of``: each token's line)."""
        found: dict[int, tuple[int, float]] = {}
        if not len(self._keys) or not len(hashes):
            return found
        for at in np.flatnonzero(member(hashes, self._keys)).tolist():
            for number, position in self._where[int(hashes[at])]:
                sequence = self._sequences[number]
                start, end = at - position, at - position + len(sequence)
                if number in found or start < 0 or end > len(hashes):
                    continue
                agree = hashes[start:end] == sequence
                same = int(np.count_nonzero(agree))
                if (agree | self._numbers[number]).all() and same >= self._share * len(sequence):
                    found[number] = (int(line_of[at]), same / len(sequence))
        return found
