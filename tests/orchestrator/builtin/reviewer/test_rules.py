"""The built-in Reviewer: paired verdicts on constructed score matrices."""

from __future__ import annotations

import numpy as np
import pytest

from rsilab.orchestrator.builtin.reviewer._rules import clearly_better, review_pair
from rsilab.records import Recommendation, Verdict

N = 400


def _runs(quality: float, seeds: int, *, spread: float = 0.0, seed: int = 0) -> np.ndarray:
    """0/1 scores: seed ``s`` passes sample ``i`` when ``u_i < quality + shift_s`` (paired)."""
    rng = np.random.default_rng(seed)
    u = np.random.default_rng(99).random(N)  # the same samples for every arm
    shifts = rng.normal(0.0, spread, size=seeds)
    return (u[None, :] < quality + shifts[:, None]).astype(float)


def test_a_clear_gain_supports_and_asks_for_verification() -> None:
    finding = review_pair(_runs(0.70, 3), _runs(0.50, 3), noise_floor=0.03)
    assert finding.verdict is Verdict.SUPPORTS
    assert finding.recommendation is Recommendation.VERIFY
    assert not finding.within_noise
    assert finding.effect.low > 0.0
    assert "+0.2" in finding.text
    verified = review_pair(_runs(0.70, 3), _runs(0.50, 3), noise_floor=0.03, verified=True)
    assert verified.recommendation is Recommendation.CONTINUE


def test_a_clear_loss_refutes_and_asks_for_revision() -> None:
    finding = review_pair(_runs(0.40, 2), _runs(0.60, 2), noise_floor=0.03)
    assert finding.verdict is Verdict.REFUTES
    assert finding.recommendation is Recommendation.REVISE
    assert finding.effect.high < 0.0


def test_a_gain_inside_the_noise_floor_is_inconclusive() -> None:
    """Paired one-seed runs: the sample interval clears zero, but the gain is below the floor."""
    a, b = _runs(0.53, 1), _runs(0.50, 1)
    finding = review_pair(a, b, noise_floor=0.05)
    assert finding.effect.low > 0.0  # the interval alone would call it a gain
    assert finding.verdict is Verdict.INCONCLUSIVE
    assert finding.recommendation is Recommendation.CONTINUE  # below the floor: keep searching
    assert finding.within_noise
    assert review_pair(a, b, noise_floor=0.01).verdict is Verdict.SUPPORTS
    verified = review_pair(a, b, noise_floor=0.05, verified=True)
    assert verified.recommendation is Recommendation.STOP  # the gain did not hold


def test_an_uncertain_gain_above_the_floor_asks_for_verification() -> None:
    """Two seeds that disagree: a wide interval around a gain that exceeds the floor."""
    a, b = _runs(0.56, 2, spread=0.05, seed=1), _runs(0.50, 2, spread=0.05, seed=11)
    finding = review_pair(a, b, noise_floor=0.03)
    assert finding.within_noise and finding.effect.value > 0.03
    assert finding.verdict is Verdict.INCONCLUSIVE
    assert finding.recommendation is Recommendation.VERIFY


def test_a_gain_inside_its_own_interval_is_inconclusive() -> None:
    a, b = _runs(0.51, 2, spread=0.05, seed=1), _runs(0.50, 2, spread=0.05, seed=2)
    finding = review_pair(a, b, noise_floor=0.0)
    assert finding.verdict is Verdict.INCONCLUSIVE
    assert finding.within_noise
    with pytest.raises(ValueError, match="noise_floor"):
        review_pair(a, b, noise_floor=-0.1)


def _items(correct: list[int], n: int = 100) -> list[list[float]]:
    """One run's 0/1 scores on ``n`` dev items: 1 on the items in ``correct``."""
    right = set(correct)
    return [[1.0 if i in right else 0.0 for i in range(n)]]


def test_a_gain_of_a_few_dev_items_is_not_clearly_better_and_a_large_one_is() -> None:
    reference = _items(list(range(12)))  # 12 of 100 right
    # 16 of 100, ten items won and six of the reference's lost: a 0.04 gain clears a 0.02
    # noise floor but not the paired interval over the items (sd of the differences 0.4,
    # half-width 0.08)
    few = _items(list(range(6, 22)))
    assert not clearly_better(few, reference, noise_floor=0.02)
    # 30 of 100, the reference's 12 among them: +0.18, well beyond both
    many = _items(list(range(30)))
    assert clearly_better(many, reference, noise_floor=0.02)
    # the same +0.18 under a noise floor above it (seed spread measured by re-runs): not clear
    assert not clearly_better(many, reference, noise_floor=0.25)
    # a loss is never clearly better
    assert not clearly_better(reference, many, noise_floor=0.02)


def test_runs_that_cannot_be_compared_item_by_item_leave_the_decision_to_the_caller() -> None:
    assert clearly_better([[0.5]], [[0.4]], noise_floor=0.02)  # one sample each
    assert clearly_better(_items([1, 2], n=10), _items([1], n=12), noise_floor=0.02)
    assert clearly_better([], _items([1]), noise_floor=0.02)
