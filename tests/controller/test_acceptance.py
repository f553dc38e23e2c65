"""The acceptance rule on hand-made accept-tier matrices."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from rsilab.controller.acceptance import decide
from rsilab.records import DataTier
from rsilab.tasks import Task

A = DataTier.ACCEPT


def _matrix(rate: float, seed_shift: list[float], n: int = 400, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    u = rng.random(n)
    return np.array([(u < rate + s).astype(float) for s in seed_shift])


def test_a_clear_gain_without_regression_is_accepted(synthetic: Task) -> None:
    # 12 paired seeds, the third look: at the first (3 seeds) the O'Brien-Fleming boundary
    # spends almost nothing, so seeds that vary decide nothing there (updated for issue 23)
    shifts = [0, 0.01, -0.01] * 4
    base = {
        ("quality", A): _matrix(0.4, shifts),
        ("robustness", A): _matrix(0.7, [0] * 12),
    }
    cand = {
        ("quality", A): _matrix(0.6, shifts),
        ("robustness", A): _matrix(0.7, [0] * 12),
    }
    early = decide(synthetic, {k: v[:3] for k, v in cand.items()},
                   {k: v[:3] for k, v in base.items()}, proposal_index=1)  # fmt: skip
    assert not early.accepted and not early.final and "undecided" in early.reason
    decision = decide(synthetic, cand, base, proposal_index=1)
    assert decision.accepted and decision.final and decision.look == 3, decision.reason
    target = decision.decisions[0]
    assert target.benchmark == "quality" and target.passed and target.low > 0
    assert decision.alpha == pytest.approx(0.025)


def test_a_gain_inside_the_seed_spread_is_rejected(synthetic: Task) -> None:
    # the baseline's own seeds differ by 0.1: a 0.05 gain is re-training noise
    base = {
        ("quality", A): _matrix(0.4, [-0.1, 0.0, 0.1]),
        ("robustness", A): _matrix(0.7, [0] * 3),
    }
    cand = {
        ("quality", A): _matrix(0.45, [-0.1, 0.0, 0.1]),
        ("robustness", A): _matrix(0.7, [0] * 3),
    }
    decision = decide(synthetic, cand, base, proposal_index=1)
    assert not decision.accepted
    assert decision.decisions[0].threshold > 0.05


def test_a_non_target_regression_beyond_tolerance_rejects(synthetic: Task) -> None:
    base = {("quality", A): _matrix(0.4, [0] * 3), ("robustness", A): _matrix(0.7, [0] * 3, seed=1)}
    cand = {("quality", A): _matrix(0.7, [0] * 3), ("robustness", A): _matrix(0.6, [0] * 3, seed=1)}
    decision = decide(synthetic, cand, base, proposal_index=1)
    assert not decision.accepted
    assert [d.passed for d in decision.decisions] == [True, False]
    assert "robustness (non-target)" in decision.reason and "fail" in decision.reason


def test_later_proposals_need_stronger_evidence(synthetic: Task) -> None:
    base = {("quality", A): _matrix(0.40, [0] * 3), ("robustness", A): _matrix(0.7, [0] * 3)}
    # unpaired sample noise (another draw): the same gain clears alpha_1 but not alpha_40
    cand = {("quality", A): _matrix(0.5, [0] * 3, seed=3), ("robustness", A): _matrix(0.7, [0] * 3)}
    first = decide(synthetic, cand, base, proposal_index=1)
    late = decide(synthetic, cand, base, proposal_index=40)
    assert late.alpha < first.alpha
    assert late.decisions[0].low < first.decisions[0].low
    assert first.accepted and not late.accepted


def test_lower_is_better_is_oriented(synthetic: Task) -> None:
    task = synthetic.model_copy(
        update={
            "benchmarks": [
                synthetic.benchmarks[0].model_copy(
                    update={"scorer": "squared_error", "higher_is_better": False}
                ),
                synthetic.benchmarks[1],
            ]
        }
    )
    robust = _matrix(0.7, [0] * 3)
    base = {("quality", A): np.full((3, 50), 2.0), ("robustness", A): robust}
    cand = {("quality", A): np.full((3, 50), 1.0), ("robustness", A): robust}
    decision = decide(task, cand, base, proposal_index=1)
    assert decision.accepted and decision.decisions[0].gain == pytest.approx(1.0)


def test_missing_scores_are_an_error(synthetic: Task) -> None:
    with pytest.raises(ValueError, match="robustness"):
        decide(
            synthetic,
            {("quality", A): np.ones((3, 5))},
            {("quality", A): np.ones((3, 5))},
            proposal_index=1,
        )


# Each clause of the rule alone, on matrices whose bounds a textbook formula gives: with every
# seed of an arm alike, the paired gain's interval is the paired t interval over samples.

N = 40
_D = np.linspace(-0.25, 0.45, N)  # per-sample gains: mean 0.1, a known spread


def _task(
    synthetic: Task,
    *,
    target_higher: bool = True,
    other_higher: bool = True,
    tolerance: float = 0.02,
) -> Task:
    quality, robustness = synthetic.benchmarks
    return synthetic.model_copy(
        update={
            "benchmarks": [
                quality.model_copy(update={"higher_is_better": target_higher}),
                robustness.model_copy(
                    update={"higher_is_better": other_higher, "tolerance": tolerance}
                ),
            ]
        }
    )


def _seeds(row: np.ndarray, k: int = 3) -> np.ndarray:
    return np.tile(row, (k, 1))


def _t_low(d: np.ndarray, one_sided_alpha: float) -> float:
    """Lower end of the paired t interval whose one-sided error is ``one_sided_alpha``."""
    half = stats.t.ppf(1 - one_sided_alpha, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d))
    return float(d.mean() - half)


def _arms(
    target_gain: np.ndarray, other_gain: np.ndarray
) -> tuple[dict[tuple[str, DataTier], np.ndarray], dict[tuple[str, DataTier], np.ndarray]]:
    base = np.full(N, 0.5)
    cand = {
        ("quality", A): _seeds(base + target_gain),
        ("robustness", A): _seeds(base + other_gain),
    }
    return cand, {("quality", A): _seeds(base), ("robustness", A): _seeds(base)}


@pytest.mark.parametrize(("index", "alpha"), [(1, 0.05), (3, 0.05), (1, 0.2)])
def test_the_target_bound_spends_alpha_over_j_j_plus_1(
    synthetic: Task, index: int, alpha: float
) -> None:
    cand, base = _arms(_D, np.zeros(N))
    decision = decide(synthetic, cand, base, proposal_index=index, alpha=alpha)
    alpha_j = alpha / (index * (index + 1))
    assert decision.alpha == pytest.approx(alpha_j)
    target = decision.decisions[0]
    assert target.low == pytest.approx(_t_low(_D, alpha_j))
    assert target.level == pytest.approx(1 - 2 * alpha_j)
    assert target.passed == (target.low > 0)


def test_non_targets_are_bounded_at_a_fixed_five_percent(synthetic: Task) -> None:
    # whatever the proposal, a non-target's bound is one-sided at 0.05
    for index in (1, 5):
        cand, base = _arms(np.full(N, 1.0), _D - 0.1)
        other = decide(synthetic, cand, base, proposal_index=index).decisions[1]
        assert other.low == pytest.approx(_t_low(_D - 0.1, 0.05))
        assert other.threshold == pytest.approx(-0.02)
        assert other.passed == (other.low >= -0.02)
        assert other.level == pytest.approx(0.90)  # a two-sided 90% interval: one-sided 0.05


def test_a_copy_is_not_a_gain(synthetic: Task) -> None:
    # a lower bound of exactly zero, with no seed spread: not above zero, so rejected
    cand, base = _arms(np.zeros(N), np.zeros(N))
    decision = decide(synthetic, cand, base, proposal_index=1)
    target, other = decision.decisions
    assert (target.low, target.threshold, target.passed) == (0.0, 0.0, False)
    assert other.passed  # the non-target alone passes: one failing target rejects
    assert not decision.accepted


def test_a_non_target_exactly_at_its_tolerance_passes(synthetic: Task) -> None:
    # 0.25 - 0.5 is exact in binary: the bound equals -tolerance, which is allowed
    task = _task(synthetic, tolerance=0.25)
    cand, base = _arms(np.full(N, 1.0), np.full(N, -0.25))
    other = decide(task, cand, base, proposal_index=1).decisions[1]
    assert (other.low, other.threshold, other.passed) == (-0.25, -0.25, True)
    beyond = decide(_task(synthetic, tolerance=0.125), cand, base, proposal_index=1)
    assert not beyond.decisions[1].passed and not beyond.accepted


def test_the_seed_spread_threshold_is_the_spread_of_the_mean(synthetic: Task) -> None:
    shifts = np.array([-0.1, 0.0, 0.1])
    base = np.full(N, 0.5) + shifts[:, None]
    robust = _seeds(np.full(N, 0.5))
    cand = {("quality", A): base + 0.5, ("robustness", A): robust}
    current = {("quality", A): base, ("robustness", A): robust}
    decision = decide(synthetic, cand, current, proposal_index=1)
    spread_of_mean = np.std(base.mean(axis=1), ddof=1) / math.sqrt(3)
    assert decision.decisions[0].threshold == pytest.approx(spread_of_mean)
    assert decision.decisions[0].threshold == pytest.approx(0.1 / math.sqrt(3))


def test_a_target_that_worsens_under_lower_is_better_is_rejected(synthetic: Task) -> None:
    task = _task(synthetic, target_higher=False)
    cand, base = _arms(np.full(N, 1.0), np.zeros(N))  # error grew by 1.0: worse
    decision = decide(task, cand, base, proposal_index=1)
    assert decision.decisions[0].gain == pytest.approx(-1.0)
    assert not decision.accepted
    better, base = _arms(np.full(N, -0.25), np.zeros(N))
    assert decide(task, better, base, proposal_index=1).accepted


def test_a_non_target_that_rises_under_lower_is_better_regresses(synthetic: Task) -> None:
    task = _task(synthetic, target_higher=True, other_higher=False, tolerance=0.1)
    rises, base = _arms(np.full(N, 1.0), np.full(N, 0.25))  # the error rose: a regression
    decision = decide(task, rises, base, proposal_index=1)
    assert decision.decisions[1].gain == pytest.approx(-0.25)
    assert not decision.decisions[1].passed and not decision.accepted
    falls, base = _arms(np.full(N, 1.0), np.full(N, -0.25))
    decision = decide(task, falls, base, proposal_index=1)
    assert decision.decisions[1].gain == pytest.approx(0.25) and decision.accepted


def test_unsigned_counts_are_oriented_without_wrapping(synthetic: Task) -> None:
    # error counts stored as small unsigned integers: negating them must not wrap around
    task = _task(synthetic, target_higher=False, other_higher=False)
    one, two = np.ones((3, N), np.uint8), np.full((3, N), 2, np.uint8)
    base = {("quality", A): two, ("robustness", A): one}
    cand = {("quality", A): one, ("robustness", A): one}
    decision = decide(task, cand, base, proposal_index=1)
    assert decision.decisions[0].gain == pytest.approx(1.0)
    assert decision.accepted


@pytest.mark.parametrize("side", ["candidate", "current"])
def test_scores_missing_on_either_side_are_an_error(synthetic: Task, side: str) -> None:
    cand, base = _arms(np.zeros(N), np.zeros(N))
    del (cand if side == "candidate" else base)[("robustness", A)]
    with pytest.raises(ValueError, match="accept-tier scores of 'robustness' are missing"):
        decide(synthetic, cand, base, proposal_index=1)


def test_the_reason_states_each_bound_and_verdict(synthetic: Task) -> None:
    cand, base = _arms(np.full(N, 0.5), np.zeros(N))
    accepted = decide(synthetic, cand, base, proposal_index=1).reason
    assert accepted.startswith(
        "accepted (alpha_j=0.025, look 1, 3 paired seeds): quality (target): gain +0.5000 "
        "[+0.5000, +0.5000] at 0.9500; lower bound +0.5000 > 0, gain +0.5000 > head spread "
        "0.0000: pass; robustness (non-target): gain +0.0000 "
        "[+0.0000, +0.0000] at "
    )
    assert accepted.endswith("; lower bound +0.0000 >= -0.0200: pass")
    cand, base = _arms(np.zeros(N), np.full(N, -0.25))
    rejected = decide(synthetic, cand, base, proposal_index=1).reason
    assert rejected.startswith(
        "rejected (alpha_j=0.025, look 1, 3 paired seeds): quality (target): gain +0.0000 "
        "[+0.0000, +0.0000] at 0.9500; lower bound +0.0000 <= 0, gain +0.0000 <= head spread "
        "0.0000: fail; robustness (non-target): gain -0.2500 "
    )
    assert rejected.endswith("; lower bound -0.2500 < -0.0200: fail")
