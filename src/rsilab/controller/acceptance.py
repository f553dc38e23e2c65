"""The acceptance rule: accept only a real gain on the target without regressions elsewhere.

For proposal ``j`` of a campaign the rule spends ``alpha_j = alpha / (j (j + 1))`` of the error
rate (so a campaign's chance of accepting any change that is not better stays below ``alpha``
however many proposals it makes; a cap on proposals bounds the cost on top). On the *accept*
tier, with the controller's training seeds:

- every target benchmark: the paired gain of candidate over current version has a one-sided
  lower bound at ``alpha_j`` (interval level ``1 - 2 alpha_j``) above zero *and* above the
  current version's own seed spread, taken as the spread of its mean over its ``k`` seeds
  (``sd of per-seed means / sqrt(k)``): a gain the size of re-training noise is never enough;
- every other benchmark: non-inferiority: the gain's one-sided lower bound at
  :data:`NON_TARGET_ALPHA` is not below ``-tolerance``. A point-estimate check let true
  regressions just past the tolerance through about half the time (measured on ``synthetic``:
  2 of 14 acceptances were such regressions); a bound at ``alpha_j`` would reject most
  candidates on noise alone, so non-targets get a fixed, looser level. At 0.1 that level
  still let 2 of 89 accepted versions of 150 whole campaigns through with a robustness loss
  beyond tolerance (``benchmarks.bench_campaigns``), so it is 0.05: the level of a one-sided
  bound of a 90% interval, looser than any target bound (``alpha_1 = 0.025``).

Scores of benchmarks where lower is better are negated first, so "gain" is always "better".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from rsilab.records import BenchmarkDecision, DataTier
from rsilab.stats import alpha_for_proposal, interval_level_for, paired_gain, seed_spread
from rsilab.tasks import Task

NON_TARGET_ALPHA = 0.05
"""One-sided error rate of the non-inferiority check on non-target benchmarks."""


@dataclass(frozen=True)
class Decision:
    """The rule's outcome: ``accepted`` and per-benchmark details; ``reason`` in words."""

    accepted: bool
    decisions: list[BenchmarkDecision]
    reason: str
    alpha: float


def _oriented(matrix: np.ndarray, higher_is_better: bool) -> np.ndarray:
    return matrix if higher_is_better else -matrix


def decide(
    task: Task,
    candidate: Mapping[tuple[str, DataTier], np.ndarray],
    current: Mapping[tuple[str, DataTier], np.ndarray],
    *,
    proposal_index: int,
    alpha: float = 0.05,
) -> Decision:
    """Apply the rule (see the module docstring) to accept-tier score matrices.

    ``candidate`` and ``current`` map ``(benchmark, tier)`` to ``scores[seed][sample]`` with
    the same sample columns.

    Raises:
        ValueError: a benchmark's matrices are missing or their sample counts differ.
    """
    alpha_j = alpha_for_proposal(proposal_index, alpha)
    level = interval_level_for(alpha_j)
    decisions: list[BenchmarkDecision] = []
    for bench in task.benchmarks:
        key = (bench.name, DataTier.ACCEPT)
        if key not in candidate or key not in current:
            raise ValueError(f"accept-tier scores of {bench.name!r} are missing")
        cand = _oriented(np.asarray(candidate[key], float), bench.higher_is_better)
        base = _oriented(np.asarray(current[key], float), bench.higher_is_better)
        if bench.target:
            gain = paired_gain(cand, base, level=level)
            threshold = max(0.0, seed_spread(base) / math.sqrt(base.shape[0]))
            passed = gain.low > threshold
        else:
            gain = paired_gain(cand, base, level=interval_level_for(NON_TARGET_ALPHA))
            threshold = -bench.tolerance
            passed = gain.low >= threshold
        decisions.append(
            BenchmarkDecision(
                benchmark=bench.name,
                target=bench.target,
                gain=gain.value,
                low=gain.low,
                high=gain.high,
                level=gain.level,  # the level this benchmark was judged at
                threshold=threshold,
                passed=passed,
            )
        )
    accepted = all(d.passed for d in decisions)
    return Decision(accepted, decisions, _reason(decisions, accepted, alpha_j), alpha_j)


def _reason(decisions: list[BenchmarkDecision], accepted: bool, alpha_j: float) -> str:
    parts = []
    for d in decisions:
        if d.target:
            rule = f"lower bound {d.low:+.4f} {'>' if d.passed else '<='} {d.threshold:.4f}"
        else:
            rule = f"lower bound {d.low:+.4f} {'>=' if d.passed else '<'} {d.threshold:+.4f}"
        kind = "target" if d.target else "non-target"
        parts.append(
            f"{d.benchmark} ({kind}): gain {d.gain:+.4f} [{d.low:+.4f}, {d.high:+.4f}] at "
            f"{d.level:.4f}; {rule}: {'pass' if d.passed else 'fail'}"
        )
    head = "accepted" if accepted else "rejected"
    return f"{head} (alpha_j={alpha_j:.4g}): " + "; ".join(parts)
