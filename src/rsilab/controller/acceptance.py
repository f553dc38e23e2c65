"""The acceptance rule: accept only a real gain on the target without regressions elsewhere.

For proposal ``j`` of a campaign the rule spends ``alpha_j = alpha / (j (j + 1))`` of the error
rate (so a campaign's chance of accepting any change that is not better stays below ``alpha``
however many proposals it makes; a cap on proposals bounds the cost on top).

The candidate and the lineage's head are trained on the **same** controller seeds, seed index by
seed index, and compared in looks (:mod:`rsilab.controller.sequential`: 3, 6, 12, 24 then 36 seeds
by default). At a look with ``m`` paired seeds, per benchmark, with ``d_s`` the candidate's mean
accept-tier score under seed ``s`` minus the head's under the same seed:

- ``gain = mean(d)``; ``se^2 = sd(d)^2 / m + s_i^2 / n``: the paired seed term and the sample
  term (``s_i``: sd over the ``n`` samples of the seed-averaged per-sample differences), so
  another draw of private samples is covered as well as re-training;
- the bound is ``gain - c * se`` with ``c`` the look's calibrated efficacy boundary at the
  benchmark's level. The sample term does not shrink with more seeds; where it dominates the
  statistic is near-normal with ``n - 1`` df and the boundaries, calibrated for 2 to 23 df,
  are stricter than that statistic needs (the test suite's null simulation mixes both noises).

Clauses (each tested on its own in ``tests/controller/test_acceptance*.py``):

- **target**: the bound at ``alpha_j`` is above zero (*evidence*) **and** the gain itself is
  above the head's own seed spread of its mean over the ``m`` seeds, ``sd(head) / sqrt(m)``
  (*size*). The size clause is kept from the unpaired rule but moved from the bound to the
  point estimate: pairing puts the head's re-training noise into the bound already, so charging
  it again on the bound would count it twice (and cost a quarter of the power at 24 seeds); what
  it still says is that a gain smaller than one re-training of the head moves its mean is not
  worth a new version, which matters exactly when pairing makes such gains detectable;
- **every non-target**: non-inferiority: the bound at :data:`NON_TARGET_ALPHA` is not below
  ``-tolerance``. A point-estimate check let true regressions just past the tolerance through
  about half the time; a bound at ``alpha_j`` would reject most candidates on noise alone, so
  non-targets get a fixed one-sided 0.05 (the lower end of a 90% interval; recorded as level
  0.90), looser than any target bound (``alpha_1 = 0.025``);
- **acceptance** is an intersection-union test: every benchmark must have passed (at this look
  or an earlier one; a null rejected at some look stays rejected). Each benchmark's own error
  rate bounds the whole, so there is no correction across benchmarks;
- **futility** (non-binding): a target not yet passed whose statistic is at or below the
  look's futility boundary rejects the candidate before the cap (non-targets never stop a
  comparison early); at the cap, anything not passed rejects.

A system deterministic in its seed (at a look of two or more seeds every seed of both arms gave
the same per-sample scores) gains nothing from more seeds: it is decided at once, as a single
look at the benchmark's full level with the t quantile of the sample term (``n - 1`` df).

Scores of benchmarks where lower is better are negated first, so "gain" is always "better".
:func:`judge_look` is the same rule on per-seed score vectors (vectorised, for simulation);
:func:`decide` applies it to accept-tier score matrices.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Set
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from rsilab.controller.sequential import LOOKS, efficacy_bounds, futility_bound
from rsilab.records import BenchmarkDecision, DataTier
from rsilab.stats import alpha_for_proposal, interval_level_for, t_quantile
from rsilab.tasks import Benchmark, Task

NON_TARGET_ALPHA = 0.05
"""One-sided error rate of the non-inferiority check on non-target benchmarks."""

_Array = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Decision:
    """The rule's outcome at one look: ``accepted``, whether it is ``final`` (False: train the
    next look's seeds and decide again), per-benchmark details and ``reason`` in words."""

    accepted: bool
    decisions: list[BenchmarkDecision]
    reason: str
    alpha: float
    final: bool = True
    look: int = 1
    """1-based look of the schedule this decision was made at."""
    passed: frozenset[str] = field(default_factory=frozenset)
    """Benchmarks passed by now (carry them to the next look)."""


@dataclass(frozen=True)
class LookResult:
    """One benchmark at one look, elementwise over the leading axes of :func:`judge_look`."""

    gain: _Array
    low: _Array
    high: _Array
    passed: npt.NDArray[np.bool_]
    futile: npt.NDArray[np.bool_]


def judge_look(
    candidate: npt.ArrayLike,
    head: npt.ArrayLike,
    *,
    bound: float,
    futility: float,
    margin: float,
    target: bool,
    sample_var: npt.ArrayLike = 0.0,
) -> LookResult:
    """One benchmark's clause at one look, on per-seed mean scores ``candidate[..., s]`` and
    ``head[..., s]`` (oriented: higher is better; paired by seed index ``s``; ``m >= 2``).

    ``bound`` is the efficacy boundary and ``futility`` the futility boundary on the t scale;
    ``margin`` is 0 for a target and the tolerance for a non-target; ``sample_var`` the sample
    term ``s_i^2 / n`` (0 for seed-level simulation). A target passes when
    ``gain - bound * se > 0`` and ``gain > sd(head) / sqrt(m)``; a non-target when
    ``gain - bound * se >= -margin``. ``futile`` (targets only) when not passed and
    ``gain - futility * se <= 0``.
    """
    cand = np.asarray(candidate, dtype=np.float64)
    base = np.asarray(head, dtype=np.float64)
    m = cand.shape[-1]
    if base.shape != cand.shape or m < 2:
        raise ValueError(f"paired per-seed scores need equal shapes and >= 2 seeds: {cand.shape}")
    d = cand - base
    gain = d.mean(axis=-1)
    se = np.sqrt(d.var(axis=-1, ddof=1) / m + np.asarray(sample_var, dtype=np.float64))
    half = _scaled(bound, se)  # no spread: the bound is the gain itself
    low, high = gain - half, gain + half
    if target:
        spread = base.std(axis=-1, ddof=1) / math.sqrt(m)
        passed = (low > 0.0) & (gain > spread)
    else:
        passed = low >= -margin
    # non-targets never stop a comparison early: a futility stop there cost a sixth of the
    # pass rate at unchanged non-targets (tolerance one per-seed sd: 0.79 against 0.95)
    futile = ~passed & (gain + margin - _scaled(futility, se) <= 0.0) & target
    return LookResult(gain, low, high, passed, futile)


def _scaled(boundary: float, se: _Array) -> _Array:
    """``boundary * se``, 0 where ``se`` is 0 (also for an infinite boundary)."""
    out = np.zeros_like(se)
    np.multiply(boundary, se, out=out, where=se > 0.0)
    return out


def _oriented(matrix: npt.ArrayLike, higher_is_better: bool) -> _Array:
    # float first: negating unsigned counts would wrap around
    out = np.asarray(matrix, dtype=np.float64)
    return out if higher_is_better else -out


def _look_index(k: int, looks: tuple[int, ...]) -> int | None:
    """Index of the largest look with at most ``k`` seeds, or None below the first."""
    fitting = [i for i, m in enumerate(looks) if m <= k]
    return fitting[-1] if fitting else None


def decide(
    task: Task,
    candidate: Mapping[tuple[str, DataTier], npt.ArrayLike],
    current: Mapping[tuple[str, DataTier], npt.ArrayLike],
    *,
    proposal_index: int,
    alpha: float = 0.05,
    looks: tuple[int, ...] = LOOKS,
    passed_before: Set[str] = frozenset(),
) -> Decision:
    """Apply the rule (see the module docstring) at one look to accept-tier score matrices.

    ``candidate`` and ``current`` map ``(benchmark, tier)`` to ``scores[seed][sample]`` with the
    same sample columns; row ``s`` of both arms is trained with the same seed. The look is the
    largest of ``looks`` not above the row count ``k``; rows past it are left out (arms with
    different row counts are cut to the smaller one: rows of independent runs pair validly, only
    less tightly). Below the first look nothing is decided (``final`` False) unless the system
    is deterministic. ``passed_before``: benchmarks that passed at an earlier look.

    Raises:
        ValueError: a benchmark's matrices are missing or their sample counts differ.
    """
    alpha_j = alpha_for_proposal(proposal_index, alpha)
    arms = _arms(task, candidate, current)
    k = min(c.shape[0] for c, _ in arms.values())
    deterministic = k >= 2 and all(
        not np.ptp(c[:k], axis=0).any() and not np.ptp(b[:k], axis=0).any()
        for c, b in arms.values()
    )
    index = _look_index(k, looks)
    if not deterministic and (index is None or looks[index] < 2):
        return Decision(
            False, [], f"undecided (alpha_j={alpha_j:.4g}): {k} paired seed(s); a test "
            f"needs {max(2, looks[0])}", alpha_j, final=False, look=0,
        )  # fmt: skip
    m = k if deterministic else looks[index or 0]
    look = 1 if index is None else index + 1
    last = deterministic or look == len(looks)
    judged = [
        _benchmark(bench, *arms[bench.name], m, alpha_j, look, looks, deterministic)
        for bench in task.benchmarks
    ]
    passed = frozenset(d.benchmark for d, _ in judged if d.passed) | frozenset(passed_before)
    decisions = [d.model_copy(update={"passed": d.benchmark in passed}) for d, _ in judged]
    accepted = all(d.passed for d in decisions)
    futile = any(f and d.benchmark not in passed for d, f in judged)
    final = accepted or last or futile
    reason = _reason(decisions, accepted, final, alpha_j, look, m)
    return Decision(accepted, decisions, reason, alpha_j, final, look, passed)


def _arms(
    task: Task,
    candidate: Mapping[tuple[str, DataTier], npt.ArrayLike],
    current: Mapping[tuple[str, DataTier], npt.ArrayLike],
) -> dict[str, tuple[_Array, _Array]]:
    out = {}
    for bench in task.benchmarks:
        key = (bench.name, DataTier.ACCEPT)
        if key not in candidate or key not in current:
            raise ValueError(f"accept-tier scores of {bench.name!r} are missing")
        cand = _oriented(candidate[key], bench.higher_is_better)
        base = _oriented(current[key], bench.higher_is_better)
        if cand.ndim != 2 or base.ndim != 2 or cand.shape[1] != base.shape[1]:
            raise ValueError(
                f"{bench.name}: candidate and current must score the same samples "
                f"(shapes {cand.shape} and {base.shape})"
            )
        out[bench.name] = (cand, base)
    return out


def _level_alpha(bench: Benchmark, alpha_j: float) -> float:
    return alpha_j if bench.target else NON_TARGET_ALPHA


def _benchmark(
    bench: Benchmark,
    cand: _Array,
    base: _Array,
    m: int,
    alpha_j: float,
    look: int,
    looks: tuple[int, ...],
    deterministic: bool,
) -> tuple[BenchmarkDecision, bool]:
    """The benchmark's decision at this look and whether it is futile."""
    cand, base = cand[:m], base[:m]
    n = cand.shape[1]
    level_alpha = _level_alpha(bench, alpha_j)
    per_sample = cand.mean(axis=0) - base.mean(axis=0)
    sample_var = float(np.var(per_sample, ddof=1)) / n if n >= 2 else 0.0
    if deterministic:
        bound = t_quantile(1.0 - level_alpha, n - 1) if n >= 2 else math.inf
        futility = -math.inf
    else:
        bound = efficacy_bounds(level_alpha, looks)[look - 1]
        futility = futility_bound(look - 1, looks)
    margin = 0.0 if bench.target else bench.tolerance
    result = judge_look(
        cand.mean(axis=1), base.mean(axis=1), bound=bound, futility=futility,
        margin=margin, target=bench.target, sample_var=sample_var,
    )  # fmt: skip
    spread = float(base.mean(axis=1).std(ddof=1)) / math.sqrt(m)
    decision = BenchmarkDecision(
        benchmark=bench.name,
        target=bench.target,
        gain=float(result.gain),
        low=float(result.low),
        high=float(result.high),
        level=interval_level_for(level_alpha),  # the level this benchmark was judged at
        threshold=spread if bench.target else -bench.tolerance,
        passed=bool(result.passed),
        look=look,
        seeds=m,
        critical=bound,
    )
    return decision, bool(result.futile)


def _reason(
    decisions: list[BenchmarkDecision],
    accepted: bool,
    final: bool,
    alpha_j: float,
    look: int,
    m: int,
) -> str:
    parts = []
    for d in decisions:
        if d.target:
            rule = (
                f"lower bound {d.low:+.4f} {'>' if d.low > 0 else '<='} 0, gain "
                f"{d.gain:+.4f} {'>' if d.gain > d.threshold else '<='} head spread "
                f"{d.threshold:.4f}"
            )
        else:
            rule = f"lower bound {d.low:+.4f} {'>=' if d.low >= d.threshold else '<'} " \
                f"{d.threshold:+.4f}"  # fmt: skip
        kind = "target" if d.target else "non-target"
        parts.append(
            f"{d.benchmark} ({kind}): gain {d.gain:+.4f} [{d.low:+.4f}, {d.high:+.4f}] at "
            f"{d.level:.4f}; {rule}: {'pass' if d.passed else 'fail'}"
        )
    head = "accepted" if accepted else ("rejected" if final else "undecided")
    return f"{head} (alpha_j={alpha_j:.4g}, look {look}, {m} paired seeds): " + "; ".join(parts)
