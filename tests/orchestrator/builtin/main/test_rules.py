"""The built-in Main agent: UCB over directions, stagnation and the next move."""

from __future__ import annotations

import random

import pytest

from rsilab.orchestrator.builtin.main._rules import (
    DirectionStats,
    choose_direction,
    gain_reward,
    next_move,
    stagnating,
)


def test_gain_reward_is_centred_monotone_and_bounded() -> None:
    assert gain_reward(0.0, 0.05) == pytest.approx(0.5)
    values = [gain_reward(g, 0.05) for g in (-1.0, -0.05, 0.0, 0.05, 1.0)]
    assert values == sorted(values)
    assert all(0.0 <= v <= 1.0 for v in values)
    with pytest.raises(ValueError, match="scale"):
        gain_reward(0.1, 0.0)


def test_a_direction_without_evidence_is_tried_first() -> None:
    stats = [
        DirectionStats("d1", rewards=[0.9, 0.9], experiments=2),
        DirectionStats("d2"),
        DirectionStats("d3"),
    ]
    assert choose_direction(stats, 2) == "d2"
    with pytest.raises(ValueError, match="no directions"):
        choose_direction([], 0)


def test_ucb_settles_on_the_better_direction() -> None:
    """Two directions with noisy gains; after evidence, UCB plays the better one most."""
    rng = random.Random(0)
    means = {"good": 0.03, "poor": -0.01}
    rewards: dict[str, list[float]] = {"good": [], "poor": []}
    total = 0
    for _ in range(200):
        stats = [DirectionStats(d, rewards=r, experiments=len(r)) for d, r in rewards.items()]
        pick = choose_direction(stats, total)
        rewards[pick].append(gain_reward(rng.gauss(means[pick], 0.02), 0.04))
        total += 1
    assert len(rewards["good"]) > 3 * len(rewards["poor"])
    stats = [DirectionStats(d, rewards=r, experiments=len(r)) for d, r in rewards.items()]
    assert choose_direction(stats, total, c=0.0) == "good"


def test_ucb_explores_an_under_sampled_direction() -> None:
    stats = [
        DirectionStats("many", rewards=[0.6] * 100, experiments=100),
        DirectionStats("few", rewards=[0.5], experiments=1),
    ]
    assert choose_direction(stats, 101) == "few"
    assert choose_direction(stats, 101, c=0.0) == "many"


def test_stagnation_counts_experiments_since_the_last_new_best() -> None:
    assert not stagnating(DirectionStats("d", experiments=10, last_improvement_at=5), patience=6)
    assert stagnating(DirectionStats("d", experiments=11, last_improvement_at=5), patience=6)
    assert stagnating(DirectionStats("d", experiments=3), patience=3)  # never improved
    with pytest.raises(ValueError, match="patience"):
        stagnating(DirectionStats("d"), patience=0)


def _move(
    experiments: int,
    last_improvement_at: int,
    best_gain: float = 0.0,
    *,
    verified: bool = False,
    refuted: bool = False,
) -> str:
    stats = DirectionStats(
        "d",
        experiments=experiments,
        last_improvement_at=last_improvement_at,
        best_gain=best_gain,
        verified=verified,
        refuted=refuted,
    )
    return next_move(stats, noise_floor=0.05, budget=20, patience=4)


def test_next_move_rules() -> None:
    assert _move(2, 2) == "continue"
    assert _move(3, 3, 0.08) == "verify"
    assert _move(3, 3, 0.08, verified=True) == "continue"
    assert _move(3, 3, 0.03) == "continue"  # the gain sits inside the noise floor
    assert _move(9, 3, 0.03) == "branch"  # a plateau
    assert _move(9, 3, refuted=True) == "revise"
    assert _move(20, 20, 0.08) == "stop"  # budget share spent, even with a gain to verify


def test_next_move_can_leave_verification_to_a_reviewer() -> None:
    stats = DirectionStats("d", experiments=3, last_improvement_at=3, best_gain=0.08)
    assert next_move(stats, noise_floor=0.05, budget=20, verify=False) == "continue"
    stale = DirectionStats("d", experiments=9, last_improvement_at=3, best_gain=0.08)
    assert next_move(stale, noise_floor=0.05, budget=20, patience=4, verify=False) == "branch"


def test_stagnation_triggers_a_branch_in_a_simulated_direction() -> None:
    """A direction that gains early and then plateaus is told to branch, not to go on."""
    moves = []
    best, last = 0.0, 0
    gains = [0.01, 0.02, 0.03, 0.03, 0.02, 0.01, 0.0, 0.02, 0.03, 0.01]
    for i, gain in enumerate(gains, start=1):
        if gain > best:
            best, last = gain, i
        stats = DirectionStats("d", experiments=i, last_improvement_at=last, best_gain=best)
        moves.append(next_move(stats, noise_floor=0.05, budget=30, patience=5))
    assert moves[:7] == ["continue"] * 7
    assert moves[7] == "branch"  # experiments 4-8 brought no new best
