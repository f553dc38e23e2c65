"""Private items with their entity changed: evidence only beyond chance, counted per benchmark.

A generated item with its entity (the one token no public item has, a private bucket's name)
replaced is the template, another name and the private item's other slots: an item the public
generator draws by itself at some rate. One such *neighbour* proves nothing. Many of them,
more than honest data makes, do.

:class:`NeighbourIndex` keeps, for each text of each tier item (a text field of three tokens
or more), its *skeleton*: the token sequence with its entity slot (every position holding its
private-only, or for a public item its public-only, tokens) replaced by a wildcard. A run of
data with the same skeleton, whose slot positions hold one token throughout and which is not
a tier item verbatim, is a neighbour of that item. The question per benchmark is then: of the
distinct runs in the data that are neighbours of *some* tier item, how many are neighbours of
a private one? For an honest item that happens to be a tier item's neighbour, that tier item
is private with probability ``q``, taken on the high side from the tiers themselves
(:attr:`NeighbourIndex.rates`). With ``m`` of ``n`` such runs private, the data is a leak
when ``P(Binomial(n, q) >= m)`` is below :data:`ALPHA` (and ``m >= 3``): honest data, however
much of it, passes but one time in ten thousand per benchmark and scan.

What it cannot see: a handful of planted items among many honest coincidences (the test has
no power there), and benchmarks whose skeletons are shared by every item (a fact question,
``q`` = 1: asking about another person is no evidence of anything).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from rsilab.controller.chance import MULTIPLIER, member, window_hashes

__all__ = [
    "ALPHA",
    "MIN_NEIGHBOURS",
    "NeighbourIndex",
    "Sequences",
    "binomial_tail",
    "excess",
    "is_leak",
]

ALPHA = 1e-4
"""The chance, per benchmark and scan, that honest data is called a leak by this test."""
MIN_NEIGHBOURS = 3
_WILDCARD = np.uint64(0xA5A5_5A5A_C3C3_3C3C)

_Hashes = npt.NDArray[np.uint64]
_Group = tuple[int, tuple[int, ...]]
"""(length, slot positions) of a skeleton."""


def binomial_tail(m: int, n: int, q: float) -> float:
    """P(X >= m) for X ~ Binomial(n, q), summed in log space (n up to millions)."""
    if m <= 0:
        return 1.0
    if q <= 0.0 or m > n:
        return 0.0
    if q >= 1.0:
        return 1.0
    logs = [
        math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
        + k * math.log(q) + (n - k) * math.log1p(-q)
        for k in range(m, n + 1)
    ]  # fmt: skip
    top = max(logs)
    return min(1.0, math.exp(top) * sum(math.exp(v - top) for v in logs))


@dataclass
class Sequences:
    """Tier texts as token hashes, each with its slot mask (which positions hold its entity)."""

    hashes: list[_Hashes] = field(default_factory=list)
    slots: list[npt.NDArray[np.bool_]] = field(default_factory=list)
    benches: list[str] = field(default_factory=list)

    def add(self, bench: str, hashes: _Hashes, slots: npt.NDArray[np.bool_]) -> None:
        self.hashes.append(hashes)
        self.slots.append(slots)
        self.benches.append(bench)


def _skeleton(hashes: _Hashes, slots: npt.NDArray[np.bool_]) -> tuple[_Group, int]:
    masked = np.where(slots, _WILDCARD, hashes).astype(np.uint64)
    group = (len(hashes), tuple(np.flatnonzero(slots).tolist()))
    return group, int(window_hashes(masked, len(masked))[0])


class NeighbourIndex:
    """Skeletons of the tier items of some benchmarks; see the module docstring."""

    def __init__(self, private: Sequences, public: Sequences) -> None:
        self._private: dict[_Group, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
        self._public: dict[_Group, dict[int, list[str]]] = defaultdict(lambda: defaultdict(list))
        self._verbatim: set[int] = set()
        self._cache: dict[frozenset[str], dict[_Group, _Hashes]] = {}
        for side, table in ((private, self._private), (public, self._public)):
            for hashes, slots, bench in zip(side.hashes, side.slots, side.benches, strict=True):
                if len(hashes):
                    self._verbatim.add(int(window_hashes(hashes, len(hashes))[0]))
                if slots.any():
                    group, key = _skeleton(hashes, slots)
                    _put(table, group, key, bench)
        self.rates = self._leave_one_out(private, public)
        """Per benchmark: (share of public texts with a private neighbour - the rate at which
        honest items coincide with private ones -, ``q``: the chance that an honest text's
        tier neighbour is private, taken high: the larger of the private share of the tier
        texts with an entity and the upper bound (z = 2) of the share measured by leaving
        each public text out)."""

    def _leave_one_out(
        self, private: Sequences, public: Sequences
    ) -> dict[str, tuple[float, float]]:
        texts: defaultdict[str, int] = defaultdict(int)
        mine: defaultdict[str, int] = defaultdict(int)
        either: defaultdict[str, int] = defaultdict(int)
        slotted: defaultdict[str, list[int]] = defaultdict(lambda: [0, 0])
        for bench, slots in zip(private.benches, private.slots, strict=True):
            slotted[bench][0] += bool(slots.any())
        for hashes, slots, bench in zip(public.hashes, public.slots, public.benches, strict=True):
            texts[bench] += 1
            if not slots.any():
                continue
            slotted[bench][1] += 1
            group, key = _skeleton(hashes, slots)
            found = bench in self._private[group].get(key, ())
            mine[bench] += found
            either[bench] += found or self._public[group].get(key, []).count(bench) > 1
        rates = {}
        for bench, count in texts.items():
            held, others = slotted[bench]
            share = held / max(held + others - 1, 1)  # tiers drawn alike: a neighbour's odds
            rates[bench] = (mine[bench] / count, max(share, _upper(mine[bench], either[bench])))
        return rates

    def observe(self, hashes: _Hashes, benches: frozenset[str]) -> dict[str, dict[int, bool]]:
        """The neighbours of ``benches``' tier items in a token stream: per benchmark, each
        distinct run's hash -> whether it neighbours a private item."""
        seen: dict[str, dict[int, bool]] = defaultdict(dict)
        wholes: dict[int, _Hashes] = {}
        for group, wanted in self._wanted(benches).items():
            length, slots = group
            if len(hashes) < length:
                continue
            if length not in wholes:
                wholes[length] = window_hashes(hashes, length)
            whole = wholes[length]
            masked = whole.copy()
            for position in slots:
                weight = np.uint64(pow(int(MULTIPLIER), length - 1 - position, 1 << 64))
                masked += (_WILDCARD - hashes[position : position + len(whole)]) * weight
            for at in np.flatnonzero(member(masked, wanted)).tolist():
                self._record(seen, group, int(masked[at]), hashes, at, int(whole[at]))
        return {bench: runs for bench, runs in seen.items() if bench in benches}

    def _wanted(self, benches: frozenset[str]) -> dict[_Group, _Hashes]:
        """Per skeleton group, the sorted skeleton hashes of ``benches``' items (cached)."""
        if benches not in self._cache:
            made = {}
            for group in set(self._private) | set(self._public):
                keys = _keys(self._private.get(group, {}), self._public.get(group, {}), benches)
                if keys:
                    made[group] = np.array(sorted(keys), dtype=np.uint64)
            self._cache[benches] = made
        return self._cache[benches]

    def _record(
        self,
        seen: dict[str, dict[int, bool]],
        group: _Group,
        key: int,
        hashes: _Hashes,
        at: int,
        whole: int,
    ) -> None:
        _, slots = group
        if len({int(hashes[at + p]) for p in slots}) != 1 or whole in self._verbatim:
            return  # another item, not one with its entity changed; or a tier item itself
        for bench in self._private.get(group, {}).get(key, ()):
            seen[bench][whole] = True
        for bench in self._public.get(group, {}).get(key, ()):
            seen[bench].setdefault(whole, False)


def _upper(hits: int, trials: int, z: float = 2.0) -> float:
    """Wilson's upper confidence bound of a share (1 without trials)."""
    if trials == 0:
        return 1.0
    p = hits / trials
    centre = p + z * z / (2 * trials)
    spread = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials))
    return min(1.0, (centre + spread) / (1 + z * z / trials))


def _put(table: dict[_Group, dict[int, set[str]]] | dict[_Group, dict[int, list[str]]],
         group: _Group, key: int, bench: str) -> None:  # fmt: skip
    held = table[group][key]
    if isinstance(held, set):
        held.add(bench)
    else:
        held.append(bench)


def _keys(
    private: Mapping[int, set[str]], public: Mapping[int, list[str]], benches: frozenset[str]
) -> set[int]:
    return {k for k, b in private.items() if not benches.isdisjoint(b)} | {
        k for k, b in public.items() if not benches.isdisjoint(b)
    }


def excess(runs: Mapping[int, bool], q: float) -> tuple[int, int, float]:
    """(private neighbours m, all neighbours n, P(Binomial(n, q) >= m)) of one benchmark."""
    n = len(runs)
    m = sum(runs.values())
    return m, n, binomial_tail(m, n, q)


def is_leak(m: int, p_value: float) -> bool:
    """Whether ``m`` private neighbours with this tail probability are a leak."""
    return m >= MIN_NEIGHBOURS and p_value < ALPHA
