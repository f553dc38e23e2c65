"""Group-sequential boundaries for the paired comparison of a candidate with its head.

A proposal is judged in *looks*: after ``looks[0]`` controller seeds, then ``looks[1]``, and so
on up to ``looks[-1]`` (the cap). At each look the paired statistic ``t = (gain + margin) / se``
of one benchmark (gain: the mean over seeds of candidate minus head, each seed index trained
for both; ``margin``: 0 for a target, the tolerance for a non-target) is compared with

- an **efficacy boundary** ``c_l``: the benchmark passes when ``t > c_l`` (its one-sided null
  is rejected). The error rate ``alpha`` is spent across the looks with the Lan-DeMets
  O'Brien-Fleming function ``alpha(s) = 2 - 2 Phi(z_{1 - alpha/2} / sqrt(s))`` of the
  information fraction ``s = seeds / cap``: almost nothing early, nearly all of it at the cap,
  so the last boundary is close to a single look's and power is not given away;
- a **futility boundary** :data:`FUTILITY` (non-binding): below it the comparison stops and the
  candidate is rejected. The efficacy boundaries are computed as if futility never stopped
  anything, so stopping early only lowers the error rate.

Why not the normal or a fixed t quantile: with 3 to 36 seeds the paired t statistic has 2 to
35 degrees of freedom and its tails are far heavier than the normal's, and successive looks
share seeds, so they are correlated. :func:`efficacy_bounds` calibrates the boundaries by
simulating :data:`CALIBRATION_PATHS` null paths of i.i.d. normal per-seed differences with a
fixed RNG seed (deterministic, cached per ``(alpha, looks)``): each boundary is set so that the
simulated count of paths first crossing there is two binomial sds *below* the count the
spending function allows (Monte Carlo error errs strict), and never above the look's own
marginal t quantile at that increment (a Bonferroni bound, valid without any simulation, used
alone where the increment is too small to simulate: fewer than :data:`MIN_SIMULATED` paths).

Always-valid tests (mixture sequential probability ratio tests, e-values) were not used: they
hold at every sample size, but at n <= 36 they need gains several times larger than a
group-sequential test with five fixed looks to reach the same power.
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache

import numpy as np
import numpy.typing as npt

__all__ = [
    "CALIBRATION_PATHS",
    "FUTILITY",
    "LOOKS",
    "MIN_SIMULATED",
    "MULTIPLES",
    "efficacy_bounds",
    "futility_bound",
    "looks_from",
    "obf_spent",
]

MULTIPLES: tuple[int, ...] = (1, 2, 4, 8, 12)
"""Each look's seeds as a multiple of the first look's: doubling, then one more half step."""

LOOKS: tuple[int, ...] = (3, 6, 12, 24, 36)
"""The default schedule: seeds trained (for candidate and head alike) at each look; the last is
the cap (information fractions 1/12, 1/6, 1/3, 2/3, 1). The cap of 36 rather than 24 is what a
gain of one per-seed sd needs for 80% power at the third proposal's alpha (0.0042) when the two
arms share nothing but the seed index (simulated: 0.69 with a cap of 24, 0.86 with 36); a null
candidate pays nothing for it, since futility stops it by the second look in half the cases."""

FUTILITY: tuple[float, ...] = (-0.5, 0.0, 0.5, 1.0)
"""Non-binding futility boundaries on the t scale for every look but the last: a benchmark not
yet passed whose statistic is at or below it stops the comparison (reject). At 3 seeds the paired
t has 2 degrees of freedom, so a boundary of 0 there stopped one true gain of one sd in seven;
-0.5 stops one in eleven while still ending a third of null candidates at the first look. Chosen
on the simulation of ``benchmarks/bench_power.py`` (power at one sd, median trainings of a null
candidate <= 12), which measures both."""

CALIBRATION_PATHS = 400_000
"""Null paths simulated per schedule to calibrate the efficacy boundaries."""

MIN_SIMULATED = 100
"""Below this many expected crossings a look's boundary is its marginal t quantile."""

_CALIBRATION_SEED = 20231223


def looks_from(first: int) -> tuple[int, ...]:
    """The default schedule scaled to a first look of ``first`` seeds: ``first`` times each of
    :data:`MULTIPLES` (``3`` gives :data:`LOOKS`). ``ValueError`` when ``first < 1``."""
    if first < 1:
        raise ValueError(f"a schedule needs a first look of at least one seed, got {first}")
    return tuple(first * k for k in MULTIPLES)


def obf_spent(alpha: float, fraction: float) -> float:
    """Error rate spent by information ``fraction`` (0 < fraction <= 1) under the Lan-DeMets
    O'Brien-Fleming function: ``2 - 2 Phi(z_{1 - alpha / 2} / sqrt(fraction))``; ``alpha`` at 1."""
    from scipy.stats import norm

    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"information fraction must be in (0, 1], got {fraction!r}")
    return float(2.0 * norm.sf(norm.isf(alpha / 2.0) / math.sqrt(fraction)))


def futility_bound(look: int, looks: tuple[int, ...]) -> float:
    """The futility boundary of look ``look`` (0-based): ``-inf`` at the last look (the
    efficacy boundary decides there) and where the schedule has more looks than
    :data:`FUTILITY` names."""
    if look >= len(looks) - 1 or look >= len(FUTILITY):
        return -math.inf
    return FUTILITY[look]


@lru_cache(maxsize=8)
def _null_paths(looks: tuple[int, ...]) -> npt.NDArray[np.float64]:
    """Paired t statistics at each look of :data:`CALIBRATION_PATHS` null paths (NaN where a
    look has fewer than two seeds)."""
    rng = np.random.default_rng(_CALIBRATION_SEED)
    total = np.zeros(CALIBRATION_PATHS)
    squares = np.zeros(CALIBRATION_PATHS)
    out = np.full((CALIBRATION_PATHS, len(looks)), np.nan)
    done = 0
    for i, m in enumerate(looks):
        chunk = rng.standard_normal((CALIBRATION_PATHS, m - done))
        total += chunk.sum(axis=1)
        squares += (chunk**2).sum(axis=1)
        done = m
        if m >= 2:
            var = np.maximum(squares - total**2 / m, 0.0) / (m - 1)
            out[:, i] = (total / m) / np.sqrt(var / m)
    return out


@lru_cache(maxsize=256)
def efficacy_bounds(alpha: float, looks: tuple[int, ...] = LOOKS) -> tuple[float, ...]:
    """Efficacy boundaries on the paired-t scale, one per look (see the module docstring).

    A look with fewer than two seeds gets ``inf`` (no spread, no test). ``ValueError`` for an
    ``alpha`` outside (0, 0.5) or a schedule that is not strictly increasing from 1.
    """
    from scipy.stats import t as student

    if not 0.0 < alpha < 0.5:
        raise ValueError(f"alpha must be strictly between 0 and 0.5, got {alpha!r}")
    if not looks or looks[0] < 1 or any(b <= a for a, b in itertools.pairwise(looks)):
        raise ValueError(f"looks must be strictly increasing seed counts >= 1, got {looks!r}")
    paths = _null_paths(looks)
    alive = np.ones(paths.shape[0], bool)
    bounds: list[float] = []
    spent = 0.0
    for i, m in enumerate(looks):
        total = obf_spent(alpha, m / looks[-1])
        step, spent = total - spent, total
        if m < 2 or step <= 0.0:
            bounds.append(math.inf)
            continue
        marginal = float(student.isf(step, m - 1))
        expected = step * paths.shape[0]
        bound = marginal
        if expected >= MIN_SIMULATED:
            allowed = int(expected - 2.0 * math.sqrt(expected))
            column = np.where(alive, paths[:, i], -np.inf)
            ordered = np.sort(column)[::-1]
            # the boundary sits at the allowed-th largest surviving statistic: at most
            # ``allowed`` paths lie strictly above it
            bound = min(marginal, float(ordered[allowed]))
        bounds.append(bound)
        alive &= ~(paths[:, i] > bound)
    return tuple(bounds)
