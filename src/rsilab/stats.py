"""Pure statistics: estimates with intervals that count every source of noise, and the
campaign's alpha spending. The controller, the reviews and the findings all use these.

Functions over numbers only (no store; no record but :class:`~rsilab.records.Interval`), so every
layer above may import them. Most take a score matrix ``scores[seed_index][sample_index]`` (a
list of lists or a 2-D array, shape ``k x n``): one row per training seed the controller chose
(``k >= 1``), one column per private sample, the same samples in the same column order for
every system compared. Inputs are converted to float64; NaN, inf, ragged rows or a wrong shape
raise ``ValueError`` naming the problem.

An interval must cover two kinds of noise. Re-training with another seed moves the whole row
(*seed spread*); another draw of private samples moves the columns (*sample noise*). A
deterministic ``predict`` re-run measures neither, and a bootstrap over samples alone misses the
seed spread, so :func:`avg_at_k` and :func:`paired_gain` add a seed term and a sample term and
use Student's t with Welch-Satterthwaite degrees of freedom.

Direction: every function here treats higher scores as better. Callers negate the scores of a
lower-is-better metric before calling (and negate the interval back if they report it).
:func:`oriented`, :func:`better` and :func:`best_of` are the one place that says which of two
scores of a benchmark is better; everything that compares scores goes through them (or through
the :class:`~rsilab.tasks.Benchmark` methods built on them).

Campaign-wide error control: proposal ``j`` is tested at :func:`alpha_for_proposal` and accepted
when the lower bound of :func:`paired_gain` at level :func:`interval_level_for` clears zero.

Two functions take other shapes: :func:`welch_interval` compares two groups of single numbers
(one per experiment), and :func:`noise_floor_from` pools the seed spread of several matrices.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from rsilab.records import Interval

__all__ = [
    "ScoreMatrix",
    "alpha_for_proposal",
    "avg_at_k",
    "best_of",
    "better",
    "interval_level_for",
    "noise_floor_from",
    "oriented",
    "paired_gain",
    "pass_at_k",
    "seed_spread",
    "t_quantile",
    "welch_interval",
]

ScoreMatrix = Sequence[Sequence[float]] | npt.NDArray[np.floating]
"""``scores[seed_index][sample_index]``: k seeds by n samples."""

_Matrix = npt.NDArray[np.float64]

DEFAULT_BOOTSTRAP = 10_000
"""Bootstrap replicates :func:`pass_at_k` draws unless told otherwise."""


def oriented(value: float, higher_is_better: bool) -> float:
    """``value`` turned so that higher is better: itself, or negated for a lower-is-better
    metric. Applying it twice gives ``value`` back (so it also turns an oriented score back)."""
    return value if higher_is_better else -value


def better(a: float, b: float, *, higher_is_better: bool) -> bool:
    """True when score ``a`` is strictly better than ``b`` in the metric's direction (a tie is
    not better)."""
    return oriented(a, higher_is_better) > oriented(b, higher_is_better)


def best_of(values: Sequence[float], *, higher_is_better: bool) -> float:
    """The best of ``values`` in the metric's direction: the largest, or the smallest for a
    lower-is-better metric. ``ValueError`` when ``values`` is empty."""
    if not values:
        raise ValueError("best_of needs at least one score")
    return max(values) if higher_is_better else min(values)


def _as_matrix(scores: ScoreMatrix, name: str, *, min_samples: int = 1) -> _Matrix:
    """``scores`` as a finite float64 ``k x n`` array, or ``ValueError`` saying what is wrong."""
    try:
        matrix = np.asarray(scores, dtype=np.float64)
    except (ValueError, TypeError) as e:
        raise ValueError(f"{name}: not a rectangular matrix of numbers ({e})") from e
    if matrix.ndim != 2:
        raise ValueError(
            f"{name}: expected a 2-D matrix scores[seed][sample], got {matrix.ndim} dimension(s)"
        )
    k, n = matrix.shape
    if k == 0 or n == 0:
        raise ValueError(f"{name}: empty score matrix (shape {k} x {n})")
    if n < min_samples:
        raise ValueError(f"{name}: need at least {min_samples} samples for an interval, got {n}")
    bad = ~np.isfinite(matrix)
    if bad.any():
        seed, sample = (int(i) for i in np.argwhere(bad)[0])
        what = "NaN" if math.isnan(matrix[seed, sample]) else "inf"
        raise ValueError(
            f"{name}: {int(bad.sum())} non-finite score(s); first is {what} "
            f"at seed {seed}, sample {sample}"
        )
    return matrix


def _check_level(level: float) -> float:
    if not (isinstance(level, int | float) and 0.0 < level < 1.0):
        raise ValueError(f"level must be a number strictly between 0 and 1, got {level!r}")
    return float(level)


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (``df`` may be fractional).

    ``df = inf`` gives the normal quantile. ``ValueError`` unless ``0 < p < 1`` and ``df > 0``.
    """
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be strictly between 0 and 1, got {p!r}")
    if not df > 0.0:
        raise ValueError(f"degrees of freedom must be positive, got {df!r}")
    # Imported here: scipy.special costs about half a second, and the CLI imports this package.
    from scipy.special import stdtrit

    return float(stdtrit(df, p))


def _t_interval(value: float, terms: list[tuple[float, float]], level: float) -> Interval:
    """``value`` +- t * sqrt(sum of variance terms), each term ``(variance, its df)``.

    The df is Welch-Satterthwaite: ``(sum v)^2 / sum(v^2 / df)``. A zero total gives a
    zero-width interval: nothing measured varied.
    """
    var = sum(v for v, _ in terms)
    if var <= 0.0:
        return Interval(value=value, low=value, high=value, level=level)
    df = var**2 / sum(v**2 / d for v, d in terms if v > 0.0)
    half = t_quantile(0.5 + level / 2.0, df) * math.sqrt(var)
    return Interval(value=value, low=value - half, high=value + half, level=level)


def _seed_term(matrix: _Matrix) -> list[tuple[float, float]]:
    """The seed-spread variance term ``(s_seed^2 / k, k - 1)``; none when k == 1 (unknown)."""
    k = matrix.shape[0]
    if k < 2:
        return []
    return [(float(np.var(matrix.mean(axis=1), ddof=1)) / k, float(k - 1))]


def _sample_term(per_sample: npt.NDArray[np.float64]) -> tuple[float, float]:
    """The sample-noise variance term ``(s^2 / n, n - 1)`` of per-sample values."""
    n = per_sample.shape[0]
    return float(np.var(per_sample, ddof=1)) / n, float(n - 1)


def seed_spread(scores: ScoreMatrix) -> float:
    """Sample standard deviation (ddof 1) of the per-seed means; 0.0 when there is one seed."""
    matrix = _as_matrix(scores, "scores")
    if matrix.shape[0] < 2:
        return 0.0
    return float(np.std(matrix.mean(axis=1), ddof=1))


def avg_at_k(scores: ScoreMatrix, level: float = 0.95) -> Interval:
    """Mean score over seeds and samples, with a t interval holding seed and sample noise.

    ``var = s_seed^2 / k + s_sample^2 / n``, where ``s_seed`` is the sd of the k per-seed means
    and ``s_sample`` the sd of the n seed-averaged per-sample scores; the t quantile uses the
    Welch-Satterthwaite df of those two terms (``k - 1`` and ``n - 1``). Each term also carries
    the seed-by-sample interaction noise, so the interval errs wide, never narrow, on that count.

    With one seed (k == 1) the seed spread cannot be measured: the interval holds the sample
    term only (df ``n - 1``) and is too narrow by the unknown seed spread. Train k >= 2 seeds
    wherever the interval decides anything.

    Raises ``ValueError`` for fewer than two samples, bad shapes, non-finite scores or a level
    outside (0, 1).
    """
    level = _check_level(level)
    matrix = _as_matrix(scores, "scores", min_samples=2)
    terms = [*_seed_term(matrix), _sample_term(matrix.mean(axis=0))]
    return _t_interval(float(matrix.mean()), terms, level)


def pass_at_k(
    scores: ScoreMatrix,
    level: float = 0.95,
    *,
    n_boot: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
) -> Interval:
    """Share of samples that at least one seed passes (a score > 0 passes), with a bootstrap CI.

    The interval is the percentile bootstrap over samples: resample the n per-sample pass
    indicators with replacement ``n_boot`` times and take the ``(1 -+ level) / 2`` quantiles of
    the resampled shares. The resampled pass count of a 0/1 vector is exactly
    Binomial(n, observed share), so that is what is drawn. The RNG is seeded by ``seed``: the
    same inputs give the same interval.

    Seeds enter only through "any seed passes", so seed spread is not a separate term here.
    When every sample passes, or none does, the interval has zero width (a known limit of the
    percentile bootstrap); do not decide on it alone.

    Raises ``ValueError`` for empty or bad input, a level outside (0, 1) or ``n_boot < 1``.
    """
    level = _check_level(level)
    if n_boot < 1:
        raise ValueError(f"n_boot must be at least 1, got {n_boot}")
    matrix = _as_matrix(scores, "scores")
    n = matrix.shape[1]
    passed = int((matrix > 0.0).any(axis=0).sum())
    share = passed / n
    rng = np.random.default_rng(seed)
    shares = rng.binomial(n, share, size=n_boot) / n
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(shares, [tail, 1.0 - tail])
    return Interval(value=share, low=float(low), high=float(high), level=level)


def paired_gain(candidate: ScoreMatrix, baseline: ScoreMatrix, level: float = 0.95) -> Interval:
    """Mean(candidate) - mean(baseline) on the same samples, with a t interval.

    The columns are paired (sample i is the same private sample in both); the seed counts
    ``k_c`` and ``k_b`` may differ. ``var = s_c^2 / k_c + s_b^2 / k_b + s_d^2 / n``, where
    ``s_c``, ``s_b`` are the sds of each arm's per-seed means (Welch on per-seed means) and
    ``s_d`` the sd over samples of ``d_i = mean_s c[s, i] - mean_s b[s, i]``. The t quantile
    uses the Welch-Satterthwaite df of the three terms (``k_c - 1``, ``k_b - 1``, ``n - 1``).
    As in :func:`avg_at_k` the interaction noise is counted twice, so the interval errs wide.

    An arm with one seed contributes no seed term (its spread is unknown) and the interval is
    too narrow by that amount: give each arm k >= 2 seeds when the gain decides acceptance.

    Raises ``ValueError`` when the arms have different numbers of samples, either is empty or
    has fewer than two samples, a score is non-finite, or the level is outside (0, 1).
    """
    level = _check_level(level)
    cand = _as_matrix(candidate, "candidate", min_samples=2)
    base = _as_matrix(baseline, "baseline", min_samples=2)
    if cand.shape[1] != base.shape[1]:
        raise ValueError(
            f"candidate and baseline must score the same samples: candidate has "
            f"{cand.shape[1]} samples, baseline {base.shape[1]}"
        )
    diffs = cand.mean(axis=0) - base.mean(axis=0)
    terms = [*_seed_term(cand), *_seed_term(base), _sample_term(diffs)]
    return _t_interval(float(cand.mean() - base.mean()), terms, level)


def welch_interval(a: Sequence[float], b: Sequence[float], level: float = 0.95) -> Interval:
    """Difference of means ``mean(a) - mean(b)`` of two independent groups, with a Welch t
    interval: ``var = s_a^2 / n_a + s_b^2 / n_b`` and the Welch-Satterthwaite df of those terms.

    A zero total variance gives a zero-width interval. ``statistics.StatisticsError`` when a
    group has fewer than two values; ``OverflowError`` when the values are too large to square.
    """
    level = _check_level(level)
    diff = statistics.fmean(a) - statistics.fmean(b)
    terms = [
        (statistics.variance(a) / len(a), float(len(a) - 1)),
        (statistics.variance(b) / len(b), float(len(b) - 1)),
    ]
    return _t_interval(diff, terms, level)


def noise_floor_from(seed_matrices: Sequence[ScoreMatrix], level: float = 0.95) -> float:
    """The noise floor from repeated runs of unchanged configs: ``z * sqrt(2) * s_pooled``.

    How far two runs of the same config drift apart by training-seed chance alone. Each matrix
    holds ``k >= 2`` seeds of one config; ``s_pooled`` pools their :func:`seed_spread`
    (variances weighted by ``k - 1``), ``sqrt(2)`` makes it the sd of a difference of two
    single-seed runs, and ``z`` is the two-sided normal quantile at ``level`` (1.96 at 0.95).
    Matrices with one seed are skipped; ``ValueError`` when none has two. Errs high for
    comparisons of runs averaged over several seeds.
    """
    pooled, df = 0.0, 0
    for matrix in seed_matrices:
        k = len(matrix)
        if k >= 2:
            pooled += (k - 1) * seed_spread(matrix) ** 2
            df += k - 1
    if df == 0:
        raise ValueError("the noise floor needs at least one config run with two or more seeds")
    z = t_quantile(0.5 + level / 2.0, math.inf)
    return z * math.sqrt(2.0) * math.sqrt(pooled / df)


def alpha_for_proposal(j: int, alpha: float = 0.05) -> float:
    """Error rate spent on a campaign's proposal ``j`` (1-based): ``alpha / (j * (j + 1))``.

    Since ``sum_{j>=1} 1 / (j (j + 1)) = 1``, the campaign-wide chance of accepting any null
    proposal is at most ``alpha`` however many proposals come (a union bound; no independence
    assumed). Early proposals get most of the budget. ``ValueError`` for ``j < 1`` or an
    ``alpha`` outside (0, 1).
    """
    if isinstance(j, bool) or not isinstance(j, int) or j < 1:
        raise ValueError(f"proposal index j must be an integer >= 1, got {j!r}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be strictly between 0 and 1, got {alpha!r}")
    return alpha / (j * (j + 1))


def interval_level_for(alpha_j: float) -> float:
    """Two-sided level ``1 - 2 * alpha_j``: its lower bound > 0 is a one-sided test at alpha_j.

    ``ValueError`` unless ``0 < alpha_j < 0.5``.
    """
    if not 0.0 < alpha_j < 0.5:
        raise ValueError(f"alpha_j must be strictly between 0 and 0.5, got {alpha_j!r}")
    return 1.0 - 2.0 * alpha_j
