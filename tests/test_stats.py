"""The pure statistics: closed forms, table values, error control and power."""

from __future__ import annotations

import itertools
import math
import statistics

import numpy as np
import numpy.typing as npt
import pytest

from rsilab.stats import (
    alpha_for_proposal,
    avg_at_k,
    interval_level_for,
    noise_floor_from,
    paired_gain,
    pass_at_k,
    seed_spread,
    t_quantile,
    welch_interval,
)

# --- t quantiles against printed tables ------------------------------------------------------


@pytest.mark.parametrize(
    ("p", "df", "expected"),
    [
        (0.975, 1, 12.706),
        (0.975, 2, 4.303),
        (0.975, 10, 2.228),
        (0.975, 30, 2.042),
        (0.95, 5, 2.015),
        (0.995, 4, 4.604),
        (0.975, 1e9, 1.960),
        (0.975, math.inf, 1.960),
    ],
)
def test_t_quantile_matches_tables(p: float, df: float, expected: float) -> None:
    assert t_quantile(p, df) == pytest.approx(expected, abs=5e-4)


def test_t_quantile_fractional_df_lies_between_neighbours() -> None:
    assert t_quantile(0.975, 3.0) > t_quantile(0.975, 3.5) > t_quantile(0.975, 4.0)


@pytest.mark.parametrize(("p", "df"), [(0.0, 3), (1.0, 3), (0.5, 0), (0.5, -1), (0.5, math.nan)])
def test_t_quantile_rejects_bad_arguments(p: float, df: float) -> None:
    with pytest.raises(ValueError):
        t_quantile(p, df)


# --- avg@k -----------------------------------------------------------------------------------


def test_avg_at_k_constant_matrix_has_zero_width() -> None:
    got = avg_at_k([[0.7] * 5] * 3)
    assert got.value == pytest.approx(0.7)
    assert got.high - got.low == pytest.approx(0.0, abs=1e-12)
    assert got.level == 0.95


def test_avg_at_k_one_seed_is_a_one_sample_t_interval() -> None:
    # k = 1: sample term only, df = n - 1 = 2; sd of (0, 1, 2) is 1.
    got = avg_at_k([[0.0, 1.0, 2.0]])
    half = 4.302652729749462 / math.sqrt(3)
    assert (got.value, got.low, got.high) == pytest.approx((1.0, 1.0 - half, 1.0 + half))


def test_avg_at_k_seed_only_noise_uses_the_seed_term() -> None:
    # Rows are constant: per-seed means (0, 1, 2), every column averages to 1, so the sample
    # term is 0 and the df is k - 1 = 2.
    got = avg_at_k([[0.0] * 4, [1.0] * 4, [2.0] * 4])
    half = 4.302652729749462 * 1.0 / math.sqrt(3)
    assert (got.value, got.low, got.high) == pytest.approx((1.0, 1.0 - half, 1.0 + half))


def test_avg_at_k_hand_example_with_both_terms() -> None:
    scores = [[1.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0]]
    # Per-seed means 0.75, 0.5: s_seed^2 = 0.03125, term 0.015625 (df 1).
    # Per-sample means 0.5, 0, 1, 1: s_sample^2 = 0.22916..., term 0.0572916... (df 3).
    a, b = 0.03125 / 2, (11 / 48) / 4
    df = (a + b) ** 2 / (a**2 / 1 + b**2 / 3)
    half = t_quantile(0.975, df) * math.sqrt(a + b)
    got = avg_at_k(scores)
    assert (got.value, got.low, got.high) == pytest.approx((0.625, 0.625 - half, 0.625 + half))


def test_avg_at_k_accepts_numpy_and_respects_level() -> None:
    rng = np.random.default_rng(1)
    scores = rng.random((3, 50))
    wide, narrow = avg_at_k(scores, level=0.99), avg_at_k(scores, level=0.8)
    assert wide.value == narrow.value == pytest.approx(scores.mean())
    assert wide.low < narrow.low < narrow.high < wide.high
    assert wide.level == 0.99


# --- pass@k and seed spread ------------------------------------------------------------------


def test_pass_at_k_counts_a_sample_passed_by_any_seed() -> None:
    scores = [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.5, 0.0, 0.0]]
    got = pass_at_k(scores)
    assert got.value == 0.5
    assert 0.0 <= got.low <= got.value <= got.high <= 1.0


def test_pass_at_k_is_deterministic_and_near_the_normal_width() -> None:
    rng = np.random.default_rng(2)
    scores = (rng.random((2, 400)) < 0.4).astype(float)
    first, second = pass_at_k(scores), pass_at_k(scores)
    assert first == second
    p = first.value
    normal_half = 1.96 * math.sqrt(p * (1 - p) / 400)
    assert (first.high - first.low) / 2 == pytest.approx(normal_half, rel=0.1)


def test_pass_at_k_all_pass_gives_a_degenerate_interval() -> None:
    got = pass_at_k([[1.0, 1.0, 1.0]])
    assert (got.value, got.low, got.high) == (1.0, 1.0, 1.0)


def test_seed_spread() -> None:
    assert seed_spread([[0.1, 0.9]]) == 0.0
    assert seed_spread([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]]) == pytest.approx(1.0)


# --- paired gain -----------------------------------------------------------------------------


def test_paired_gain_of_identical_constant_arms_is_zero_width() -> None:
    got = paired_gain([[0.5] * 6] * 2, [[0.5] * 6] * 3)
    assert got.value == pytest.approx(0.0)
    assert got.high - got.low == pytest.approx(0.0, abs=1e-12)


def test_paired_gain_one_seed_each_is_a_paired_t_interval() -> None:
    # d = (1, 2, 3): mean 2, sd 1, df 2; no seed terms with one seed per arm.
    got = paired_gain([[1.0, 2.0, 3.0]], [[0.0, 0.0, 0.0]])
    half = 4.302652729749462 / math.sqrt(3)
    assert (got.value, got.low, got.high) == pytest.approx((2.0, 2.0 - half, 2.0 + half))


def test_paired_gain_hand_example_with_unequal_seeds() -> None:
    candidate = [[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]]
    baseline = [[0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [1.0, 0.0, 0.0]]
    # Candidate per-seed means 2/3, 1/3: s_c^2 = 1/18, term 1/36 (df 1).
    # Baseline per-seed means 1/3, 0, 1/3: s_b^2 = 1/27, term 1/81 (df 2).
    # d = (1 - 1/3, 1/2 - 1/3, 0) = (2/3, 1/6, 0): s_d^2 = 13/108, term 13/324 (df 2).
    terms = [(1 / 36, 1), (1 / 81, 2), (13 / 324, 2)]
    var = sum(v for v, _ in terms)
    df = var**2 / sum(v**2 / d for v, d in terms)
    half = t_quantile(0.975, df) * math.sqrt(var)
    got = paired_gain(candidate, baseline)
    value = 0.5 - 2 / 9
    assert (got.value, got.low, got.high) == pytest.approx((value, value - half, value + half))


def test_paired_gain_pairing_removes_shared_sample_difficulty() -> None:
    # The baseline is the candidate minus 0.1 on every sample: a sure gain despite wide spread.
    rng = np.random.default_rng(3)
    candidate = np.tile(rng.random(200), (2, 1))
    got = paired_gain(candidate, candidate - 0.1)
    assert got.low == pytest.approx(0.1) and got.high == pytest.approx(0.1)


def test_paired_gain_rejects_mismatched_and_empty_input() -> None:
    with pytest.raises(ValueError, match="same samples: candidate has 3 samples, baseline 2"):
        paired_gain([[1.0, 2.0, 3.0]], [[1.0, 2.0]])
    with pytest.raises(ValueError, match="baseline: empty"):
        paired_gain([[1.0, 2.0]], [[]])
    with pytest.raises(ValueError, match="candidate: empty"):
        paired_gain(np.empty((0, 2)), [[1.0, 2.0]])


# --- Welch interval of two groups and the noise floor ----------------------------------------


def test_welch_interval_hand_example() -> None:
    # means 2.5 and 1.5; variances of the means 5/12 and 1/12; df = 0.25 / (26 / 432) = 4.1538
    effect = welch_interval([1.0, 2.0, 3.0, 4.0], [1.0, 1.0, 2.0, 2.0])
    assert (effect.value, effect.level) == (1.0, 0.95)
    assert effect.low == pytest.approx(-0.934897, abs=1e-6)
    assert effect.high == pytest.approx(2.934897, abs=1e-6)
    narrower = welch_interval([1.0, 2.0, 3.0, 4.0], [1.0, 1.0, 2.0, 2.0], level=0.9)
    assert narrower.high == pytest.approx(2.491544, abs=1e-6)


def test_welch_interval_of_constant_groups_has_zero_width() -> None:
    effect = welch_interval([0.7, 0.7], [0.5, 0.5, 0.5])
    assert (effect.low, effect.high) == (effect.value, effect.value)
    assert effect.value == pytest.approx(0.2)


def test_welch_interval_needs_two_values_a_group() -> None:
    with pytest.raises(statistics.StatisticsError):
        welch_interval([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="level"):
        welch_interval([1.0, 2.0], [1.0, 2.0], level=1.0)


def test_noise_floor_pools_seed_variances_weighted_by_k_minus_1() -> None:
    # seed-mean variances 0.02 (k=2) and 0.03 (k=3): pooled (1 * 0.02 + 2 * 0.03) / 3
    two = [[0.4, 0.4], [0.6, 0.6]]
    three = [[0.1, 0.1], [0.1, 0.1], [0.4, 0.4]]
    assert noise_floor_from([two]) == pytest.approx(0.391993, abs=1e-6)
    assert noise_floor_from([two, three, [[0.9, 0.0]]]) == pytest.approx(0.452634, abs=1e-6)


def test_noise_floor_from_repeated_runs_of_one_config() -> None:
    rng = np.random.default_rng(0)
    sd = 0.02
    matrices = [0.5 + rng.normal(0.0, sd, size=(8, 1)) + np.zeros((8, 50)) for _ in range(20)]
    floor = noise_floor_from(matrices)
    assert floor == pytest.approx(1.96 * np.sqrt(2.0) * sd, rel=0.15)
    assert noise_floor_from([np.full((3, 10), 0.5)]) == 0.0
    with pytest.raises(ValueError, match="two or more seeds"):
        noise_floor_from([np.zeros((1, 10))])


# --- input checks shared by all ------------------------------------------------------------


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize(
    "call",
    [avg_at_k, pass_at_k, seed_spread, lambda s: paired_gain(s, [[0.0, 0.0, 0.0]] * 2)],
)
def test_non_finite_scores_are_refused(bad: float, call: object) -> None:
    scores = [[0.0, 1.0, 0.0], [1.0, bad, 0.0]]
    with pytest.raises(ValueError, match=r"non-finite .* at seed 1, sample 1"):
        call(scores)  # type: ignore[operator]


@pytest.mark.parametrize(
    ("scores", "message"),
    [
        ([0.1, 0.2], "2-D matrix"),
        ([[0.1, 0.2], [0.3]], "rectangular"),
        ([["a", "b"]], "rectangular"),
        ([[0.5]], "at least 2 samples"),
    ],
)
def test_bad_shapes_are_refused(scores: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        avg_at_k(scores)  # type: ignore[arg-type]


@pytest.mark.parametrize("level", [0.0, 1.0, -0.5, math.nan])
def test_bad_levels_are_refused(level: float) -> None:
    with pytest.raises(ValueError, match="level"):
        avg_at_k([[0.0, 1.0]], level=level)


# --- error spending --------------------------------------------------------------------------


def test_alpha_spending_sums_below_alpha() -> None:
    alphas = [alpha_for_proposal(j, 0.05) for j in range(1, 1001)]
    assert alphas[0] == pytest.approx(0.025)
    assert alphas[1] == pytest.approx(0.05 / 6)
    assert all(a > b for a, b in itertools.pairwise(alphas))
    assert sum(alphas) == pytest.approx(0.05 * (1 - 1 / 1001))
    assert sum(alphas) < 0.05


@pytest.mark.parametrize("j", [0, -1, 1.5, True])
def test_alpha_for_proposal_rejects_bad_index(j: object) -> None:
    with pytest.raises(ValueError, match="j must be an integer >= 1"):
        alpha_for_proposal(j)  # type: ignore[arg-type]


def test_interval_level_for() -> None:
    assert interval_level_for(0.025) == pytest.approx(0.95)
    assert interval_level_for(alpha_for_proposal(1)) == pytest.approx(0.95)
    for bad in (0.0, 0.5, math.nan):
        with pytest.raises(ValueError):
            interval_level_for(bad)


# --- error control and power by simulation ---------------------------------------------------

SIMS, SEEDS, SAMPLES, SEED_SD, ALPHA = 2000, 3, 400, 0.02, 0.05


def _simulate_arm(
    rng: np.random.Generator, difficulty: npt.NDArray[np.float64], shift: float
) -> npt.NDArray[np.float64]:
    """SIMS score matrices: per-sample pass rates, a per-seed offset, Bernoulli outcomes."""
    offsets = rng.normal(0.0, SEED_SD, size=(SIMS, SEEDS, 1))
    rates = np.clip(difficulty[:, None, :] + shift + offsets, 0.0, 1.0)
    return (rng.random(rates.shape) < rates).astype(np.float64)


def _rejection_rate(true_gain: float, seed: int) -> float:
    """Share of SIMS simulated pairs where the one-sided test at ALPHA accepts the candidate."""
    rng = np.random.default_rng(seed)
    # Each pair draws its own private samples; both arms score the same ones.
    difficulty = rng.uniform(0.2, 0.7, size=(SIMS, SAMPLES))
    candidate = _simulate_arm(rng, difficulty, true_gain)
    baseline = _simulate_arm(rng, difficulty, 0.0)
    level = interval_level_for(ALPHA)
    accepted = sum(
        paired_gain(c, b, level=level).low > 0.0 for c, b in zip(candidate, baseline, strict=True)
    )
    return accepted / SIMS


def test_paired_gain_false_acceptance_stays_below_alpha() -> None:
    # Binomial sd of the rate over 2000 pairs at 0.05 is about 0.005: allow three of them.
    assert _rejection_rate(0.0, seed=11) <= ALPHA + 0.015


def test_paired_gain_has_power_against_a_real_gain() -> None:
    assert _rejection_rate(0.08, seed=12) >= 0.6
