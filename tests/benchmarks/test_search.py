"""The search-efficiency benchmark: policies, the Optuna mapping, the protocol, the report."""

from __future__ import annotations

import random
from pathlib import Path

import optuna
import pytest
from benchmarks.bench_search import POLICIES, Plan, run_task, task_rows
from benchmarks.search.policies import (
    ASK_TELL_POLICIES,
    CONSTRAINT,
    HillClimb,
    OptunaTPE,
    RandomSearch,
    from_optuna,
    mutate_value,
    optuna_distribution,
    starting_config,
    to_optuna,
)
from benchmarks.search.protocol import Feasibility, RunResult
from benchmarks.search.report import experiments_to_reach, mean_ci, paired, plot_curves

from rsilab.orchestrator.builtin.worker._rules import is_valid
from rsilab.tasks import Knob, KnobCondition, KnobType, get_task

SPACE = [
    Knob(name="lr", type=KnobType.FLOAT, low=1e-4, high=1.0, log=True, default=0.1),
    Knob(name="wd", type=KnobType.FLOAT, low=0.0, high=0.1, default=0.0),
    Knob(name="width", type=KnobType.INT, low=4, high=512, log=True, default=8),
    Knob(name="epochs", type=KnobType.INT, low=1, high=3, default=2),
    Knob(name="opt", type=KnobType.CHOICE, choices=["sgd", "adam"], default="sgd"),
    Knob(name="shape", type=KnobType.CHOICE, choices=[[1, 2], {"a": 1}, 3], default=3),
    Knob(name="norm", type=KnobType.BOOL, default=False),
]


def test_optuna_distribution_of_every_knob_type() -> None:
    d = {k.name: optuna_distribution(k) for k in SPACE}
    assert d["lr"] == optuna.distributions.FloatDistribution(1e-4, 1.0, log=True)
    assert d["wd"] == optuna.distributions.FloatDistribution(0.0, 0.1)
    assert d["width"] == optuna.distributions.IntDistribution(4, 512, log=True)
    assert d["epochs"] == optuna.distributions.IntDistribution(1, 3)
    assert d["opt"] == optuna.distributions.CategoricalDistribution(["sgd", "adam"])
    # non-scalar choices go by index
    assert d["shape"] == optuna.distributions.CategoricalDistribution([0, 1, 2])
    assert d["norm"] == optuna.distributions.CategoricalDistribution([False, True])
    for knob in SPACE:
        for value in knob.choices or [knob.default]:
            assert from_optuna(knob, to_optuna(knob, value)) == value


def test_optuna_tpe_starts_from_the_defaults_and_stays_in_the_space() -> None:
    tpe = OptunaTPE(SPACE, seed=3, budget=8)
    ticket, first = tpe.ask()
    assert first == starting_config(SPACE)
    tpe.tell(ticket, 0.5)
    for i in range(7):
        ticket, config = tpe.ask()
        assert is_valid(config, SPACE), config
        tpe.tell(ticket, None if i == 2 else random.random())
    states = [t.state for t in tpe.study.trials]
    assert states.count(optuna.trial.TrialState.FAIL) == 1
    assert states.count(optuna.trial.TrialState.COMPLETE) == 7


def test_optuna_tpe_suggests_a_gated_knob_only_where_it_acts() -> None:
    # steps and rate act only when the model trains (mode "tune"); the rate only from 2 steps
    gated = [
        Knob(
            name="rate",
            type=KnobType.FLOAT,
            low=1e-4,
            high=1.0,
            log=True,
            default=0.01,
            when=KnobCondition(knob="steps", at_least=2),
        ),
        Knob(
            name="steps",
            type=KnobType.INT,
            low=0,
            high=8,
            default=0,
            when=KnobCondition(knob="mode", one_of=["tune"]),
        ),
        Knob(name="mode", type=KnobType.CHOICE, choices=["frozen", "tune"], default="frozen"),
    ]
    tpe = OptunaTPE(gated, seed=4, budget=30)
    configs = []
    for _ in range(30):
        ticket, config = tpe.ask()
        assert is_valid(config, gated), config
        configs.append(config)
        tpe.tell(ticket, float(config["rate"]) if config["mode"] == "tune" else 0.0)  # type: ignore[arg-type]
    for config, trial in zip(configs, tpe.study.trials, strict=True):
        trains = config["mode"] == "tune"
        rated = trains and config["steps"] in range(2, 9)
        assert ("steps" in trial.params) == trains and ("rate" in trial.params) == rated
        if not rated:
            assert config["rate"] == 0.01  # not drawn: the default, as the harness would run
    assert any(c["mode"] == "frozen" for c in configs) and any(c["rate"] != 0.01 for c in configs)


def test_optuna_tpe_configuration() -> None:
    tpe = OptunaTPE(SPACE, seed=1, budget=40, workers=2)
    sampler = tpe.study.sampler
    assert isinstance(sampler, optuna.samplers.TPESampler)
    assert tpe.startup == 10
    assert OptunaTPE(SPACE, seed=1, budget=6).startup == 3


def test_optuna_tpe_is_told_which_trials_break_the_constraint() -> None:
    tpe = OptunaTPE(SPACE, seed=2, budget=6)
    for feasible in (True, False, True):
        ticket, _ = tpe.ask()
        tpe.tell(ticket, 0.5, feasible)
    constraints = [t.constraints for t in tpe.study.trials]  # what constrained TPE reads
    assert constraints == [{CONSTRAINT: 0.0}, {CONSTRAINT: 1.0}, {CONSTRAINT: 0.0}]


def test_feasibility_is_measured_from_the_first_result() -> None:
    task = get_task("synthetic")
    feasible = Feasibility(task)
    tolerance = next(b.tolerance for b in task.benchmarks if b.name == "robustness")
    assert feasible({"quality": 0.5, "robustness": 0.70})  # the reference
    assert feasible({"quality": 0.9, "robustness": 0.70 - tolerance + 0.001})
    assert not feasible({"quality": 0.9, "robustness": 0.70 - tolerance - 0.001})
    assert not feasible({"quality": 0.9})  # a non-target not measured is not kept


def test_random_search_is_uniform_valid_and_never_repeats() -> None:
    policy = RandomSearch(SPACE, seed=0)
    ticket, first = policy.ask()
    assert first == starting_config(SPACE)  # the reference, as every policy starts
    policy.tell(ticket, 0.0)
    seen = {repr(sorted(first.items(), key=str))}
    for _ in range(50):
        ticket, config = policy.ask()
        assert is_valid(config, SPACE)
        seen.add(repr(sorted(config.items(), key=str)))
        policy.tell(ticket, 0.0)
    assert len(seen) == 51
    again, twin = RandomSearch(SPACE, seed=0), RandomSearch(SPACE, seed=0)
    assert [again.ask()[1] for _ in range(3)] == [twin.ask()[1] for _ in range(3)]


def test_hill_climb_keeps_only_strict_improvements() -> None:
    policy = HillClimb(SPACE, seed=0)
    ticket, config = policy.ask()
    assert config == starting_config(SPACE)
    policy.tell(ticket, 0.5)
    ticket, worse = policy.ask()
    changed = [k for k in worse if worse[k] != config[k]]
    assert len(changed) == 1 and is_valid(worse, SPACE)
    policy.tell(ticket, 0.5)  # a tie is not kept
    assert policy.best == config
    ticket, better = policy.ask()
    policy.tell(ticket, 0.6)
    assert policy.best == better and policy.best_score == 0.6
    ticket, _ = policy.ask()
    policy.tell(ticket, None)
    assert policy.best == better
    ticket, _ = policy.ask()
    policy.tell(ticket, 0.9, feasible=False)  # better on the target, but breaks a constraint
    assert policy.best == better and policy.best_score == 0.6


def test_mutate_value_moves_and_stays_in_bounds() -> None:
    rng = random.Random(0)
    knobs = {k.name: k for k in SPACE}
    for _ in range(200):
        value = mutate_value(knobs["epochs"], 1, rng, 0.01)
        assert value == 2  # the smallest step still moves an int, inward at a bound
        assert 1e-4 <= float(mutate_value(knobs["lr"], 1.0, rng, 0.5)) <= 1.0  # type: ignore[arg-type]
    assert mutate_value(knobs["opt"], "sgd", rng, 0.1) == "adam"
    assert mutate_value(knobs["norm"], False, rng, 0.1) is True


def _result(policy: str, seed: int, scores: list[float | None], final: float) -> RunResult:
    return RunResult(policy, "t", seed, 4, scores, final, 0.5, 0, 1, 1.0)


def test_report_curves_paired_test_and_reach() -> None:
    run = _result("x", 1, [None, 0.3, 0.2, 0.5], 0.6)
    assert run.curve() == [None, 0.3, 0.3, 0.5]
    run.feasible = [False, True, True, False]  # an infeasible best is not the best
    assert run.curve() == [None, 0.3, 0.3, 0.3] and run.best_dev == 0.3
    run.feasible = []
    assert _result("x", 1, [0.1], 0.5).curve() == [0.1, 0.1, 0.1, 0.1]
    assert experiments_to_reach(run, 0.3) == 2
    assert experiments_to_reach(run, 0.9) is None
    assert experiments_to_reach(run, None) is None
    ci = mean_ci([1.0, 2.0, 3.0])
    assert ci.mean == 2.0 and ci.low < 2.0 < ci.high
    assert mean_ci([1.0]).low == 1.0
    assert str(mean_ci([1.0])) == "1.000 [1 value: no interval]"  # not a zero-width interval
    assert mean_ci([-0.1]).signed() == "-0.100 [1 value: no interval]"
    result = paired({1: 0.6, 2: 0.7, 3: 0.5}, {1: 0.5, 2: 0.7, 3: 0.4})
    assert result is not None
    assert (result.wins, result.ties, result.losses) == (2, 1, 0)
    assert result.sign_p == pytest.approx(0.5)
    assert paired({1: 0.1}, {2: 0.1}) is None


@pytest.mark.timeout(600)
def test_every_policy_runs_through_the_protocol(tmp_path: Path) -> None:
    """One seed, 3 experiments each, on synthetic: within budget, a curve and a final score."""
    plan = Plan(seeds=1, budget=3)
    runs, baseline_s = run_task("synthetic", plan)
    assert baseline_s > 0
    assert sorted(r.policy for r in runs) == sorted(POLICIES)
    for r in runs:
        assert 1 <= r.experiments <= plan.budget, r
        assert len(r.curve()) == plan.budget
        assert r.curve()[-1] is not None
        assert 0.0 <= r.final <= 1.0
        if r.policy in ASK_TELL_POLICIES:
            assert r.proposals <= 1 and r.experiments == plan.budget
            assert r.feasible[0] and len(r.feasible) == r.experiments  # the reference first
        if not r.accepted:
            assert r.final == r.baseline_final
        # compute: every job of the campaign, at least one train and one dev_eval each
        assert r.cpu_s > 0 and r.final_by_cpu[0] == [0.0, r.baseline_final]
        assert len(r.final_by_cpu) == 1 + r.accepted
        assert set(r.head_config) == {k.name for k in get_task("synthetic").search_space}
        # rsilab's best config is the one it proposed last (every knob), none without a proposal
        if r.policy == "rsilab":
            assert set(r.best_config) == (set(r.head_config) if r.proposals else set()), r
        if r.accepted == r.proposals == 1 and r.best_config:
            assert r.best_config == r.head_config
    rows = task_rows("synthetic", "quality", runs, plan)
    assert [row["policy"] for row in rows] == list(POLICIES)
    by_policy = {r.policy: [r] for r in runs}
    png = plot_curves("synthetic", "quality", by_policy, plan.budget, tmp_path / "s.png")
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert get_task("synthetic").search_space
