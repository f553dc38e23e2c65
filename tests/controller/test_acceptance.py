"""The acceptance rule on hand-made accept-tier matrices."""

from __future__ import annotations

import numpy as np
import pytest

from rsilab.controller.acceptance import decide
from rsilab.records import DataTier
from rsilab.tasks import Task

A = DataTier.ACCEPT


def _matrix(rate: float, seed_shift: list[float], n: int = 400, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    u = rng.random(n)
    return np.array([(u < rate + s).astype(float) for s in seed_shift])


def test_a_clear_gain_without_regression_is_accepted(synthetic: Task) -> None:
    base = {
        ("quality", A): _matrix(0.4, [0, 0.01, -0.01]),
        ("robustness", A): _matrix(0.7, [0, 0, 0]),
    }
    cand = {
        ("quality", A): _matrix(0.6, [0, 0.01, -0.01]),
        ("robustness", A): _matrix(0.7, [0, 0, 0]),
    }
    decision = decide(synthetic, cand, base, proposal_index=1)
    assert decision.accepted, decision.reason
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
