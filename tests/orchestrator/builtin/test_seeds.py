"""Common random numbers: the k-th run of every config shares a seed, and runs on one seed pair."""

from __future__ import annotations

import pytest
from pydantic import JsonValue

from rsilab.orchestrator.builtin._seeds import (
    experiment_seed,
    next_seed,
    paired_gain,
    run_seed,
    shared_seeds,
)
from rsilab.orchestrator.builtin._state import Run
from rsilab.orchestrator.builtin.main._race import contenders, winner
from rsilab.orchestrator.builtin.worker._agent import Order
from rsilab.records import Intent


def _run(n: int, config: dict[str, JsonValue], score: float, seed: int | None, **kw: bool) -> Run:
    return Run(n, f"exp-{n}", "dir-1", config, score, kw.get("failed", False), seed=seed)


A: dict[str, JsonValue] = {"lr": 0.1, "depth": 2}
B: dict[str, JsonValue] = {"lr": 0.3, "depth": 2}


def test_the_kth_run_of_every_config_takes_the_kth_seed() -> None:
    assert run_seed(7, 1) == 7001 and run_seed(7, 3) == 7003
    assert experiment_seed(7, 12) == 7012
    with pytest.raises(ValueError, match="start at 1"):
        run_seed(7, 0)
    assert next_seed(7, A, [], []) == 7001
    runs = [_run(1, A, 0.5, 7001), _run(2, B, 0.6, 7001)]
    # key order does not make another config; B's runs do not count for A
    assert next_seed(7, {"depth": 2, "lr": 0.1}, runs, []) == 7002
    # a running run of A takes its seed too, and a failed run keeps its seed taken
    assert next_seed(7, A, runs, [(A, 7002)]) == 7003
    failed = [*runs, _run(3, A, 0.0, 7002, failed=True)]
    assert next_seed(7, A, failed, []) == 7003
    # the lowest seed not taken: a gap (a run recorded before seeds were) is filled first
    assert next_seed(7, B, [_run(4, B, 0.6, 7002), _run(5, B, 0.6, None)], []) == 7001


def test_runs_on_one_seed_pair_and_a_gain_is_their_mean_difference() -> None:
    ref = [_run(1, A, 0.50, 101), _run(9, A, 0.30, 102)]
    cand = [_run(2, B, 0.52, 101), _run(10, B, 0.33, 102), _run(11, B, 0.90, 103)]
    pairs = shared_seeds(cand, ref)
    assert [(a.index, b.index) for a, b in pairs] == [(2, 1), (10, 9)]
    assert paired_gain(cand, ref) == pytest.approx((0.02 + 0.03) / 2)
    # without a shared seed: the difference of the means
    old = [_run(3, B, 0.7, None), _run(4, B, 0.5, None)]
    assert paired_gain(old, ref) == pytest.approx(0.6 - 0.4)
    with pytest.raises(ValueError, match="finished run"):
        paired_gain([_run(5, B, 0.0, 101, failed=True)], ref)


def test_a_config_that_ties_the_reference_seed_by_seed_never_races() -> None:
    """The reference's second seed happened to score low; a config that changes nothing scored
    what the reference did on the first seed, so its mean beats the reference's mean, but it
    gains exactly 0 on the seed both ran, and only a real gain races."""
    ref = [_run(1, A, 0.60, 501), _run(5, A, 0.40, 502)]
    inert: dict[str, JsonValue] = {"lr": 0.1, "depth": 2, "cap": 64}
    real: dict[str, JsonValue] = {"lr": 0.2, "depth": 2}
    runs = [*ref, _run(2, inert, 0.60, 501), _run(3, real, 0.62, 501), _run(4, real, 0.41, 502)]
    field = contenders(runs, A, [])
    assert [c.config for c in field] == [real]
    assert field[0].gain == pytest.approx(0.015)
    found = winner(runs, A, [])
    assert found is not None and found.config == real


def test_an_order_keeps_its_seed_across_a_resume() -> None:
    order = Order(4, "dir-1", {"lr": 0.2}, "search", seed=9002)
    payload = order.intent_payload()
    assert payload["seed"] == 9002
    intent = Intent(campaign_id="c", key="exp:4", action="experiment", payload=payload)
    again = Order.from_intent(intent)
    assert again.seed == 9002 and again.job_seed(9) == 9002
    # an order from before seeds were chosen (or a policy that does not choose) runs its own
    legacy = Order.from_intent(
        Intent(campaign_id="c", key="exp:4", action="experiment", payload={"direction_id": "d"})
    )
    assert legacy.seed is None and legacy.job_seed(9) == 9004
