"""The sequential paired rule at the score level: error rates by simulation, power, clauses.

The null simulation runs the rule's own per-look function (:func:`judge_look`, which
:func:`decide` is built on) over 100,000 simulated candidates per case, vectorised. Rates are
checked against their bound with a fixed Monte Carlo margin of three binomial sds (``_within``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from rsilab.controller.acceptance import decide, judge_look
from rsilab.controller.sequential import efficacy_bounds, futility_bound
from rsilab.records import DataTier
from rsilab.tasks import Task

A = DataTier.ACCEPT
LOOKS = (3, 6, 12, 24, 36)  # the documented default schedule, stated independently
CAP = 36
N = 100_000


def _within(hits: int, n: int, bound: float) -> bool:
    """The simulated rate is at most ``bound`` plus three binomial sds of ``bound`` at ``n``.

    A fixed Monte Carlo margin, not a Wilson upper bound: the boundaries are calibrated to
    spend exactly the level (less two sds of their own simulation), so a rate exactly at the
    level must pass, and no finite simulation puts a Wilson bound below it."""
    return hits / n <= bound + 3.0 * math.sqrt(bound * (1.0 - bound) / n)


def _run(
    cand: np.ndarray,
    head: np.ndarray,
    alpha: float,
    *,
    target: bool,
    margin: float = 0.0,
    sample_var: float | np.ndarray = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """(passed, seeds used) of one benchmark's sequential test on N paths."""
    bounds = efficacy_bounds(alpha, LOOKS)
    done = np.zeros(cand.shape[0], bool)
    passed = np.zeros(cand.shape[0], bool)
    used = np.zeros(cand.shape[0], int)
    for i, m in enumerate(LOOKS):
        r = judge_look(
            cand[:, :m], head[:, :m], bound=bounds[i], futility=futility_bound(i, LOOKS),
            margin=margin, target=target, sample_var=sample_var,
        )  # fmt: skip
        passed |= ~done & r.passed
        stop = ~done & (r.passed | r.futile | (i == len(LOOKS) - 1))
        used[stop] = m
        done |= stop
    return passed, used


def _paths(delta: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    head = rng.standard_normal((N, CAP))
    return head + 0.0, rng.standard_normal((N, CAP)) + delta


@pytest.mark.parametrize("j", [1, 2, 3])
def test_null_candidates_are_accepted_at_most_alpha_j(j: int) -> None:
    alpha_j = 0.05 / (j * (j + 1))
    head, cand = _paths(0.0, seed=j)
    passed, _ = _run(cand, head, alpha_j, target=True)
    assert _within(int(passed.sum()), N, alpha_j), passed.mean()


@pytest.mark.parametrize("share", [0.5, 0.9])
def test_null_candidates_with_sample_noise_stay_below_alpha(share: float) -> None:
    # a sample draw shared by every seed (it does not average out over looks): a share of the
    # per-seed difference's variance; its estimate enters as the sample term
    j, alpha_j, n = 1, 0.025, 200
    rng = np.random.default_rng(11)
    head, cand = _paths(0.0, seed=10)
    seed_sd = math.sqrt(1 - share)
    common = rng.standard_normal((N, 1)) * math.sqrt(share * 2)
    cand = head + seed_sd * (cand - head) + common
    sample_var = 2 * share * rng.chisquare(n - 1, N) / (n - 1)
    passed, _ = _run(cand, head, alpha_j, target=True, sample_var=sample_var)
    assert _within(int(passed.sum()), N, alpha_j), (j, passed.mean())


@pytest.mark.parametrize(("drop", "bound"), [(1.0, 0.05), (2.0, 0.01)])
def test_non_targets_at_or_past_their_tolerance_rarely_pass(drop: float, bound: float) -> None:
    tolerance = 0.5
    head, cand = _paths(-drop * tolerance, seed=20 + int(drop))
    passed, _ = _run(cand, head, 0.05, target=False, margin=tolerance)
    assert _within(int(passed.sum()), N, bound), passed.mean()


def test_unchanged_non_targets_pass_nine_times_in_ten() -> None:
    # tolerance one per-seed sd of the head; the candidate's non-target unchanged
    head, cand = _paths(0.0, seed=30)
    passed, used = _run(cand[:20_000], head[:20_000], 0.05, target=False, margin=1.0)
    assert passed.mean() >= 0.90
    assert used.min() >= 3 and (used < CAP).any()  # passes stop early; no futility stop


def test_power_for_a_gain_of_one_per_seed_sd() -> None:
    # The target: >= 80% at proposals 1-3 for a gain of one per-seed sd, with
    # independent arms (sd(d) = sqrt(2) per-seed sds: no help from common random numbers).
    head, cand = _paths(1.0, seed=40)
    rates = [
        _run(cand[:20_000], head[:20_000], 0.05 / (j * (j + 1)), target=True)[0].mean()
        for j in (1, 2, 3)
    ]
    assert min(rates) >= 0.80, rates
    assert rates[0] > rates[1] > rates[2]


def test_null_candidates_mostly_stop_early() -> None:
    head, cand = _paths(0.0, seed=50)
    _, used = _run(cand[:20_000], head[:20_000], 0.025, target=True)
    assert np.median(used) <= 6  # candidate seeds; the head trains as many: <= 12 in all


# --- each clause alone, through decide -------------------------------------------------------

K = 36
_SHIFT = np.tile([-0.1, 0.1], K // 2)  # the head's per-seed spread


def _two(synthetic: Task, tolerance: float = 0.05) -> Task:
    quality, robustness = synthetic.benchmarks
    return synthetic.model_copy(
        update={"benchmarks": [quality, robustness.model_copy(update={"tolerance": tolerance})]}
    )


def _arms(q_gain: np.ndarray, r_gain: np.ndarray, n: int = 4) -> tuple[dict, dict]:  # type: ignore[type-arg]
    head = 0.5 + _SHIFT[:, None] + np.zeros((K, n))
    cand = {("quality", A): head + q_gain[:, None], ("robustness", A): head + r_gain[:, None]}
    return cand, {("quality", A): head, ("robustness", A): head}


def test_a_target_above_zero_but_inside_the_head_spread_is_rejected(synthetic: Task) -> None:
    # paired gains of 0.01 with almost no spread: the bound clears 0, the size clause does not
    gains = 0.01 + np.tile([-1e-4, 1e-4], K // 2)
    cand, head = _arms(gains, np.zeros(K))
    decision = decide(_two(synthetic), cand, head, proposal_index=1)
    target = decision.decisions[0]
    assert target.low > 0 and target.threshold == pytest.approx(0.1 / math.sqrt(K), rel=0.05)
    assert not target.passed and not decision.accepted
    bigger, head = _arms(gains + 0.05, np.zeros(K))
    assert decide(_two(synthetic), bigger, head, proposal_index=1).accepted


def test_a_target_above_the_spread_but_with_its_bound_below_zero_is_rejected(
    synthetic: Task,
) -> None:
    gains = 0.1 + np.tile([-0.6, 0.6], K // 2)
    cand, head = _arms(gains, np.zeros(K))
    target = decide(_two(synthetic), cand, head, proposal_index=1).decisions[0]
    assert target.gain > target.threshold and target.low < 0 and not target.passed


def test_a_non_target_within_tolerance_by_estimate_but_not_by_bound_fails(
    synthetic: Task,
) -> None:
    # estimate -0.03 (tolerance 0.05), but noisy: its 0.05 bound falls below -0.05
    others = -0.03 + np.tile([-0.2, 0.2], K // 2)
    cand, head = _arms(np.full(K, 0.5), others)
    decision = decide(_two(synthetic), cand, head, proposal_index=1)
    other = decision.decisions[1]
    assert other.gain > -0.05 > other.low and not other.passed and not decision.accepted
    quiet, head = _arms(np.full(K, 0.5), np.full(K, -0.03))
    assert decide(_two(synthetic), quiet, head, proposal_index=1).accepted


def test_the_recorded_levels_and_boundaries_are_the_ones_used(synthetic: Task) -> None:
    others = np.tile([-0.2, 0.2], K // 2)
    cand, head = _arms(0.2 + np.tile([-0.2, 0.2], K // 2), others)
    for j in (1, 3):
        decision = decide(_two(synthetic), cand, head, proposal_index=j)
        target, other = decision.decisions
        alpha_j = 0.05 / (j * (j + 1))
        assert target.level == pytest.approx(1 - 2 * alpha_j)
        assert other.level == pytest.approx(0.90)  # one-sided 0.05, whatever j
        assert (target.look, target.seeds, other.look) == (5, 36, 5)
        # the last look's boundary lies between the single-look t quantile at the level
        # and the one at half of it (O'Brien-Fleming spends little before the cap)
        for d, a in ((target, alpha_j), (other, 0.05)):
            assert stats.t.ppf(1 - a, 35) < d.critical < stats.t.ppf(1 - a / 2, 35)
            se = (d.gain - d.low) / d.critical
            assert d.high - d.gain == pytest.approx(d.critical * se)


def test_acceptance_needs_every_benchmark_and_a_pass_carries_over(synthetic: Task) -> None:
    gains = 0.3 + np.tile([-0.05, 0.05], K // 2)
    cand, head = _arms(gains, np.full(K, -0.2))  # robustness lost 0.2: beyond 0.05
    rejected = decide(_two(synthetic), cand, head, proposal_index=1)
    assert rejected.decisions[0].passed and not rejected.accepted and rejected.final
    carried = decide(
        _two(synthetic), cand, head, proposal_index=1, passed_before=frozenset({"robustness"})
    )
    assert carried.accepted


def test_a_futile_look_rejects_before_the_cap(synthetic: Task) -> None:
    cut = {("quality", A): 0, ("robustness", A): 0}
    worse = -0.2 + np.tile([-0.05, 0.05], K // 2)
    cand, head = _arms(worse, np.zeros(K))
    first = decide(
        _two(synthetic),
        {k: v[:3] for k, v in cand.items() if k in cut},
        {k: v[:3] for k, v in head.items() if k in cut},
        proposal_index=1,
    )
    assert first.final and not first.accepted and first.look == 1
    better, head = _arms(-worse, np.zeros(K))
    going = decide(
        _two(synthetic),
        {k: v[:3] for k, v in better.items()},
        {k: v[:3] for k, v in head.items()},
        proposal_index=1,
    )
    assert not going.final and "undecided" in going.reason
