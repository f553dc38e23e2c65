"""Summaries of search runs: intervals across seeds, paired tests, experiments-to-reach, figures.

Pure functions of :class:`~benchmarks.search.protocol.RunResult` lists (plus matplotlib, on the
Agg backend, for :func:`plot_curves`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from scipy import stats

from benchmarks.search.protocol import RunResult

NO_INTERVAL = "1 value: no interval"


@dataclass(frozen=True)
class MeanCI:
    """A mean with a two-sided 95% t interval (equal to the mean for fewer than 2 values,
    where the text says there is no interval rather than print a zero-width one)."""

    mean: float
    low: float
    high: float
    n: int

    def __str__(self) -> str:
        if self.n < 2:
            return f"{self.mean:.3f} [{NO_INTERVAL}]"
        return f"{self.mean:.3f} [{self.low:.3f}, {self.high:.3f}]"

    def signed(self) -> str:
        if self.n < 2:
            return f"{self.mean:+.3f} [{NO_INTERVAL}]"
        return f"{self.mean:+.3f} [{self.low:+.3f}, {self.high:+.3f}]"


def mean_ci(values: Sequence[float], level: float = 0.95) -> MeanCI:
    """Mean and t interval of ``values`` (raises ValueError on an empty sequence)."""
    if not values:
        raise ValueError("no values")
    mean = statistics.fmean(values)
    if len(values) < 2:
        return MeanCI(mean, mean, mean, len(values))
    sd = statistics.stdev(values)
    half = float(stats.t.ppf(0.5 + level / 2, len(values) - 1)) * sd / math.sqrt(len(values))
    return MeanCI(mean, mean - half, mean + half, len(values))


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of ``pvalues`` (same order): the i-th smallest is multiplied
    by ``m - i`` (0-based ``i``), made non-decreasing in that order and capped at 1. Rejecting
    where the adjusted value is at most alpha controls the family-wise error rate at alpha."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


@dataclass(frozen=True)
class Paired:
    """``a - b`` paired by seed: the mean difference with its t interval, wins, ties and
    losses of ``a``, and the two-sided sign test's p-value (ties dropped; 1.0 when all tie)."""

    diff: MeanCI
    wins: int
    ties: int
    losses: int
    sign_p: float


def paired(a: dict[int, float], b: dict[int, float], tie: float = 1e-12) -> Paired | None:
    """Compare two policies' scores by seed (seeds both have); None when they share none."""
    seeds = sorted(set(a) & set(b))
    if not seeds:
        return None
    diffs = [a[s] - b[s] for s in seeds]
    wins = sum(1 for d in diffs if d > tie)
    losses = sum(1 for d in diffs if d < -tie)
    decided = wins + losses
    p = float(stats.binomtest(wins, decided, 0.5).pvalue) if decided else 1.0
    return Paired(mean_ci(diffs), wins, len(diffs) - decided, losses, p)


def experiments_to_reach(run: RunResult, target: float | None) -> int | None:
    """The first experiment (1-based) after which ``run``'s best dev score is at least
    ``target``; None when it never is (or ``target`` is None)."""
    if target is None:
        return None
    for i, best in enumerate(run.curve(run.experiments), 1):
        if best is not None and best >= target - 1e-12:
            return i
    return None


def mean_curve(runs: Sequence[RunResult], length: int) -> list[float | None]:
    """Mean over runs of the best-so-far dev score after each experiment (runs without a
    success yet are left out of that point; None when none has one)."""
    curves = [r.curve(length) for r in runs]
    out: list[float | None] = []
    for i in range(length):
        point = [c[i] for c in curves if c[i] is not None]
        out.append(statistics.fmean(v for v in point if v is not None) if point else None)
    return out


def plot_curves(
    task: str,
    target: str,
    by_policy: dict[str, list[RunResult]],
    budget: int,
    path: Path,
) -> Path:
    """Write the mean best-so-far dev curve of each policy to ``path`` (PNG); returns it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=110)
    xs = list(range(1, budget + 1))
    for policy, runs in by_policy.items():
        ys = mean_curve(runs, budget)
        points = [(x, y) for x, y in zip(xs, ys, strict=True) if y is not None]
        if points:
            ax.plot(*zip(*points, strict=True), marker=".", label=f"{policy} ({len(runs)} seeds)")
    ax.set_xlabel("experiments used")
    ax.set_ylabel(f"best dev {target} so far (mean over seeds)")
    ax.set_title(f"{task}: search efficiency")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
