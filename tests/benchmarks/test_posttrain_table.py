"""The post-training table: per benchmark, base, each policy's head and the changes, by seed."""

from __future__ import annotations

from benchmarks.bench_posttrain import rows_for
from benchmarks.search.protocol import RunResult

BASE = {"arith": 0.2, "facts": 0.5}


def _run(policy: str, seed: int, arith: float, facts: float, accepted: int) -> RunResult:
    return RunResult(
        policy, "posttrain", seed, 12, [0.3], arith, BASE["arith"], accepted, 1, 1.0,
        cpu_s=100.0 * seed, final_scores={"arith": arith, "facts": facts},
        baseline_scores=dict(BASE),
    )  # fmt: skip


RUNS = [
    _run("rsilab", 1, 0.5, 0.4, 1),
    _run("rsilab", 2, 0.7, 0.5, 1),
    _run("optuna-tpe", 1, 0.3, 0.5, 1),
    _run("optuna-tpe", 2, 0.2, 0.5, 0),
]


def test_each_benchmark_gets_the_base_the_heads_and_the_change_from_the_base() -> None:
    rows = rows_for(RUNS, [("arith", True), ("facts", False)])
    arith, facts = rows[0], rows[1]
    assert arith["benchmark"] == "arith (target)" and facts["benchmark"] == "facts"
    assert arith["base"] == "0.200" and facts["base"] == "0.500"
    assert arith["rsilab"].startswith("0.600 [")  # mean of 0.5 and 0.7
    assert arith["rsilab - base"].startswith("+0.400 [")
    # a regression on a non-target is visible as a negative change: (0.4 - 0.5 + 0) / 2
    assert facts["rsilab - base"].startswith("-0.050 [")
    # paired by seed: (0.5 - 0.3 + 0.7 - 0.2) / 2
    assert arith["rsilab - optuna-tpe"].startswith("+0.350 [")


def test_the_table_says_how_many_seeds_had_a_version_accepted() -> None:
    rows = rows_for(RUNS, [("arith", True)])
    said = {r["benchmark"]: r for r in rows[1:]}
    assert said["rsilab: seeds with a version accepted"]["rsilab"] == "2 of 2 runs"
    assert said["optuna-tpe: seeds with a version accepted"]["optuna-tpe"] == "1 of 2 runs"


def test_runs_kept_before_every_benchmark_was_recorded_are_left_out() -> None:
    old = RunResult("rsilab", "posttrain", 3, 12, [0.3], 0.9, 0.2, 1, 1, 1.0)
    rows = rows_for([*RUNS, old], [("arith", True)])
    assert rows[0]["rsilab"].startswith("0.600 [")
