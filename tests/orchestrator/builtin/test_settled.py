"""A config whose runs on two seeds measured the same scores is settled: the race never
re-runs it, and a config whose runs differ is raced as before."""

from __future__ import annotations

from pydantic import JsonValue

from rsilab.orchestrator.builtin._seeds import settled
from rsilab.orchestrator.builtin._state import Run
from rsilab.orchestrator.builtin.main._race import next_race_config, winner

REF: dict[str, JsonValue] = {"x": 0}
A: dict[str, JsonValue] = {"x": 1}
B: dict[str, JsonValue] = {"x": 2}


def _run(n: int, config: dict[str, JsonValue], score: float, seed: int | None) -> Run:
    return Run(n, f"exp-{n}", "dir-1", config, score, scores={"t": score, "u": 0.5}, seed=seed)


def test_two_seeds_with_one_outcome_settle_a_config() -> None:
    assert settled([_run(1, A, 0.7, 11), _run(2, A, 0.7, 12)], A)
    assert not settled([_run(1, A, 0.7, 11)], A)  # one run says nothing
    assert not settled([_run(1, A, 0.7, 11), _run(2, A, 0.7, 11)], A)  # the same seed twice
    assert not settled([_run(1, A, 0.7, None), _run(2, A, 0.7, None)], A)  # seeds unknown
    assert not settled([_run(1, A, 0.7, 11), _run(2, A, 0.71, 12)], A)
    moved = Run(3, "exp-3", "dir-1", A, 0.7, scores={"t": 0.7, "u": 0.4}, seed=13)
    assert not settled([_run(1, A, 0.7, 11), _run(2, A, 0.7, 12), moved], A)  # a non-target


def test_the_race_skips_settled_configs_and_still_races_noisy_ones() -> None:
    runs = [_run(1, REF, 0.5, 11), _run(2, A, 0.8, 11), _run(3, B, 0.7, 11)]
    runs += [_run(4, REF, 0.5, 12)]  # the reference's re-run: the same score, settled
    # rung of 2: A and B each get a re-run
    assert next_race_config(runs, REF, [], 1, 4, []) == A
    runs += [_run(5, A, 0.8, 12)]  # A is settled now: B, still in doubt, is re-run
    assert next_race_config(runs, REF, [], 2, 4, []) == B
    noisy = [*runs, _run(6, B, 0.95, 12)]  # B moved between seeds, to the lead: it races on
    assert next_race_config(noisy, REF, [], 3, 4, []) == B
    exact = [*runs, _run(6, B, 0.7, 12)]  # both settled: no run of the leader is worth it
    assert next_race_config(exact, REF, [], 3, 4, []) is None
    found = winner(exact, REF, [])
    assert found is not None and found.config == A


def test_a_settled_leader_wins_over_a_noisier_config_with_more_runs() -> None:
    runs = [_run(1, REF, 0.5, 11), _run(2, REF, 0.5, 12)]
    runs += [_run(3, A, 0.9, 11), _run(4, A, 0.9, 12)]  # settled, the best
    runs += [_run(5, B, 0.6, 11), _run(6, B, 0.7, 12), _run(7, B, 0.65, 13)]
    found = winner(runs, REF, [])
    assert found is not None and found.config == A
