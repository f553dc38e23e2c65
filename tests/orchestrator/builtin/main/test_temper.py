"""Tempering: configs on the segment from the reference to an infeasible gain, bisected by
feasibility; which run is tempered; and a campaign on the constrained tuning family (not a
benchmark task) that turns an infeasible gain into a feasible one."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from pydantic import JsonValue

from rsilab.orchestrator.builtin._state import Run
from rsilab.orchestrator.builtin.ablation import Ablation
from rsilab.orchestrator.builtin.main._temper import (
    blend,
    conclusion,
    falsified,
    has_weak_line,
    next_temper_config,
    step_fractions,
    temper_source,
)
from rsilab.orchestrator.builtin.runner import Progress, run_campaign
from rsilab.orchestrator.builtin.worker._rules import config_key
from rsilab.orchestrator.research.dag import ResearchDag
from rsilab.records import Campaign, Intent
from rsilab.store import Lab
from rsilab.tasks import Budget, Knob, KnobCondition, KnobType
from tests.orchestrator.builtin.tuning_tasks import damage, space, spec_for, tuning_task

SPACE = [
    Knob(name="lr", type=KnobType.FLOAT, low=1e-4, high=1.0, log=True, default=0.01),
    Knob(name="epochs", type=KnobType.INT, low=0, high=20, default=0),
    Knob(name="template", type=KnobType.CHOICE, choices=["qa", "chat"], default="qa"),
    Knob(name="tools", type=KnobType.BOOL, default=False),
]
REF: dict[str, JsonValue] = {"lr": 1e-4, "epochs": 0, "template": "qa", "tools": False}
FAR: dict[str, JsonValue] = {"lr": 1e-2, "epochs": 16, "template": "chat", "tools": True}


@pytest.fixture(autouse=True)
def _process_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")


def test_a_blend_moves_numeric_knobs_part_way_and_keeps_the_source_kind() -> None:
    half = blend(SPACE, REF, FAR, 0.5)
    assert half["lr"] == pytest.approx(math.sqrt(1e-4 * 1e-2))  # a log knob: geometric mean
    assert half["epochs"] == 8
    assert (half["template"], half["tools"]) == ("chat", True)
    assert blend(SPACE, REF, FAR, 0.25)["epochs"] == 4
    assert blend(SPACE, REF, FAR, 1.0) == FAR
    start = blend(SPACE, REF, FAR, 0.0)
    assert (start["lr"], start["epochs"]) == (1e-4, 0)
    # a knob the reference leaves out starts at its default
    assert blend(SPACE, {"epochs": 0}, FAR, 0.5)["lr"] == pytest.approx(1e-2)
    with pytest.raises(ValueError, match="t must lie"):
        blend(SPACE, REF, FAR, 1.5)


def test_bisection_moves_toward_the_reference_after_a_break_and_away_after_a_keep() -> None:
    assert step_fractions([]) == [0.5]
    assert step_fractions([False])[-1] == 0.25
    assert step_fractions([True])[-1] == 0.75
    assert step_fractions([False, True]) == [0.5, 0.25, 0.375]
    assert step_fractions([True, False])[-1] == 0.625


def _run(n: int, score: float, shortfall: float = 0.0, failed: bool = False) -> Run:
    # a Run's score is its target less the penalty of its shortfall (10 per unit)
    return Run(n, f"exp-{n}", "d", dict(FAR), score - 10.0 * shortfall, failed, {}, shortfall)


def test_the_largest_infeasible_gain_over_every_feasible_run_is_tempered_once() -> None:
    ref = _run(1, 0.10)
    runs = [ref, _run(2, 0.30, shortfall=0.02), _run(3, 0.50, shortfall=0.01), _run(4, 0.20)]
    found = temper_source(runs, ["exp-1"], 0.10, 0.05, set())
    assert found is not None and found.experiment_id == "exp-3"
    again = temper_source(runs, ["exp-1"], 0.10, 0.05, {"exp-3"})
    assert again is not None and again.experiment_id == "exp-2"
    # a feasible run as good as the infeasible one (within the noise floor): nothing to temper
    assert (
        temper_source([ref, _run(2, 0.30, 0.02), _run(5, 0.27)], ["exp-1"], 0.1, 0.05, ()) is None
    )
    # a failed run or a gain inside the noise floor is never a source
    assert temper_source([ref, _run(2, 0.3, 0.02, failed=True)], ["exp-1"], 0.1, 0.05, ()) is None
    assert temper_source([ref, _run(2, 0.12, 0.02)], ["exp-1"], 0.1, 0.05, ()) is None


def test_a_source_whose_gain_the_dev_samples_do_not_support_is_passed_over() -> None:
    ref = _run(1, 0.10)
    runs = [ref, _run(2, 0.30, shortfall=0.02), _run(3, 0.50, shortfall=0.01), _run(4, 0.20)]
    asked: list[str] = []

    def only_exp_2(run: Run) -> bool:
        asked.append(run.experiment_id)
        return run.experiment_id == "exp-2"

    found = temper_source(runs, ["exp-1"], 0.10, 0.05, set(), only_exp_2)
    assert found is not None and found.experiment_id == "exp-2"
    assert asked == ["exp-3", "exp-2"]  # best first; the feasible exp-4 is never asked about
    assert temper_source(runs, ["exp-1"], 0.10, 0.05, set(), lambda run: False) is None


def test_a_tempering_step_is_never_a_source_of_its_own() -> None:
    ref = _run(1, 0.10)
    source, step = _run(2, 0.50, shortfall=0.01), _run(3, 0.50, shortfall=0.01)
    # the step changed nothing (the same scores as its source): without being named a step
    # it would be the next source, once its source was tempered
    found = temper_source([ref, source, step], ["exp-1"], 0.10, 0.05, {"exp-2"})
    assert found is not None and found.experiment_id == "exp-3"
    assert (
        temper_source([ref, source, step], ["exp-1"], 0.10, 0.05, {"exp-2"}, steps={"exp-3"})
        is None
    )
    other = _run(4, 0.40, shortfall=0.02)
    again = temper_source(
        [ref, source, step, other], ["exp-1"], 0.1, 0.05, {"exp-2"}, steps={"exp-3"}
    )
    assert again is not None and again.experiment_id == "exp-4"


def test_a_feasible_tempering_step_still_raises_the_bar_for_other_sources() -> None:
    ref, kept = _run(1, 0.10), _run(2, 0.60)  # exp-2: a feasible step, better than exp-3
    runs = [ref, kept, _run(3, 0.50, shortfall=0.01)]
    assert temper_source(runs, ["exp-1"], 0.10, 0.05, set(), steps={"exp-2"}) is None


def test_the_next_step_follows_the_outcomes_and_stops_on_a_config_already_tried() -> None:
    source = _run(2, 0.5, shortfall=0.04)
    broke = _run(5, 0.2, shortfall=0.01)  # at t = 1/2: 0.01 <= 0.5 * 0.04, it shrank
    first = next_temper_config(SPACE, REF, source, [], set())
    assert first is not None and first["epochs"] == 8
    second = next_temper_config(SPACE, REF, source, [broke], set())
    assert second is not None and second["epochs"] == 4
    third = next_temper_config(SPACE, REF, source, [broke, _run(6, 0.15, 0.004)], set())
    assert third is not None and third["epochs"] == 2  # 0.004 <= 0.25 * 0.04
    assert next_temper_config(SPACE, REF, source, [broke, broke, broke], set()) is None
    assert next_temper_config(SPACE, REF, source, [], {config_key(first, SPACE)}) is None


def test_a_regression_that_does_not_shrink_toward_the_reference_ends_the_tempering() -> None:
    source = _run(2, 0.5, shortfall=0.04)
    # half way back, yet more than half the source's shortfall: not a matter of distance
    assert falsified([_run(5, 0.3, shortfall=0.03)], source)
    assert next_temper_config(SPACE, REF, source, [_run(5, 0.3, shortfall=0.03)], set()) is None
    # a quarter of the way, after a break at a half: the bar is a quarter of the source's
    assert falsified([_run(5, 0.3, 0.01), _run(6, 0.2, 0.02)], source)
    assert not falsified([_run(5, 0.3, 0.01), _run(6, 0.2, 0.009)], source)
    # a feasible step never falsifies; a failed one does (nothing learned from it)
    assert not falsified([_run(5, 0.3)], source)
    assert falsified([_run(5, 0.0, failed=True)], source)


def _scored(n: int, scores: dict[str, float], shortfall: float) -> Run:
    """A run with dev scores per benchmark (``arith`` the target)."""
    return Run(
        n, f"exp-{n}", "d", dict(FAR), scores["arith"] - 10 * shortfall, False, scores, shortfall
    )


def test_a_step_that_scores_as_its_source_falsifies_nothing_and_costs_no_step() -> None:
    scores = {"arith": 0.35, "fncall": 0.78, "facts": 0.87}
    source = _scored(2, scores, shortfall=0.02)
    inert = _scored(5, dict(scores), shortfall=0.02)  # at t = 1/2, yet as far short as at 1
    assert not falsified([inert], source)
    # the same shortfall with any dev score differing is a step that did not shrink it
    assert falsified([_scored(5, {**scores, "facts": 0.86}, shortfall=0.02)], source)
    second = next_temper_config(SPACE, REF, source, [inert], set())
    assert second is not None and second["epochs"] == 4  # on toward the reference
    broke = _scored(6, {"arith": 0.3, "fncall": 0.8, "facts": 0.87}, shortfall=0.002)
    fourth = next_temper_config(SPACE, REF, source, [inert, broke, broke], set())
    assert fourth is not None and fourth["epochs"] == 1  # a fourth step: the inert one is free
    assert next_temper_config(SPACE, REF, source, [inert, broke, broke, broke], set()) is None
    # only one inert step is free: two inert and two more make four, the most
    assert next_temper_config(SPACE, REF, source, [inert, inert, broke, broke], set()) is None


def test_a_tempering_whose_every_step_scored_as_its_source_says_so() -> None:
    scores = {"arith": 0.35, "fncall": 0.78}
    source = _scored(2, scores, shortfall=0.02)
    said = conclusion([_scored(5, dict(scores), 0.02)], source, lambda r: r.experiment_id)
    assert said.startswith("tempered: every step scored as its source")
    kept = _scored(6, {"arith": 0.3, "fncall": 0.84}, 0.0)
    assert conclusion([_scored(5, dict(scores), 0.02), kept], source, str) == f"tempered: {kept}"


def _runs_of(lab: Lab, campaign_id: str) -> list[dict[str, JsonValue]]:
    done = [
        i
        for i in lab.store.query_as(Intent, campaign_id=campaign_id)
        if i.key.startswith("exp:") and i.result
    ]
    return [dict(i.result or {}) for i in sorted(done, key=lambda i: int(i.key[4:]))]


def test_a_campaign_tempers_an_infeasible_gain_into_a_feasible_one(
    lab: Lab, tmp_path: Path
) -> None:
    """Constrained tuning family seed 3: the search's early draws improve the target but move
    far from the defaults, which the non-target ``keep`` does not allow. Tempering's steps lie
    on the segment from the reference to the source (checked here against the defaults with a
    second computation), and one of them is feasible by the family's true damage."""
    seed = 3
    task = tuning_task(tmp_path / "task", seed=seed, constrained=True)
    result = run_campaign(lab, task, budget=Budget(experiments=14), seed=seed)
    dag = ResearchDag.load(lab.store, result.campaign_id)
    tempering = [d for d in dag.directions.values() if d.title.startswith("temper ")]
    assert len(tempering) >= 1
    d = tempering[0]
    runs = _runs_of(lab, result.campaign_id)
    by_id = {str(r["experiment_id"]): r for r in runs}
    source_id = d.title.split()[1]
    source = by_id[source_id]["config"]
    assert isinstance(source, dict)
    home = {k.name: k.default for k in space()}
    steps = [r for r in runs if r["direction_id"] == d.id]
    assert 1 <= len(steps) <= 3
    spec = spec_for(seed)
    assert damage(source, spec) > 0.025  # the source broke keep beyond the policy's margin
    for step in steps:
        config = step["config"]
        assert isinstance(config, dict) and config["kind"] == source["kind"]
        # on the segment: the same fraction of the way for lr (in log10) and mix
        t_lr = (math.log10(config["lr"]) - math.log10(home["lr"])) / (
            math.log10(source["lr"]) - math.log10(home["lr"])
        )
        t_mix = (config["mix"] - home["mix"]) / (source["mix"] - home["mix"])
        assert t_lr == pytest.approx(t_mix, abs=1e-3) and 0.0 < t_lr < 1.0
    assert min(damage(s["config"], spec) for s in steps) < 0.025  # type: ignore[arg-type]
    assert d.state.is_finished()


def test_without_tempering_no_tempering_direction_opens(lab: Lab, tmp_path: Path) -> None:
    task = tuning_task(tmp_path / "task", seed=3, constrained=True)
    result = run_campaign(
        lab, task, budget=Budget(experiments=14), seed=3, ablate={Ablation.TEMPERING}
    )
    dag = ResearchDag.load(lab.store, result.campaign_id)
    assert not [d for d in dag.directions.values() if d.title.startswith("temper ")]


def test_a_campaign_stopped_mid_bisection_resumes_to_the_same_configs(
    lab: Lab, tmp_path: Path
) -> None:
    """The bisection is read from the records: a campaign stopped after tempering's first step
    proposes, once resumed, exactly what an unbroken campaign does."""
    task = tuning_task(tmp_path / "task", seed=3, constrained=True)
    other = Lab.init(tmp_path / "other")
    try:
        whole = run_campaign(other, task, budget=Budget(experiments=14), seed=3)
        unbroken = [r["config"] for r in _runs_of(other, whole.campaign_id)]
    finally:
        other.close()
    stopped_at: list[int] = []

    def interrupt(progress: Progress) -> None:
        if progress.kind != "experiment" or stopped_at:
            return
        campaign = lab.store.query_as(Campaign)[0].id
        dag = ResearchDag.load(lab.store, campaign)
        temper = [d for d in dag.directions.values() if d.title.startswith("temper ")]
        runs = _runs_of(lab, campaign)
        if temper and any(r["direction_id"] == temper[0].id for r in runs):
            stopped_at.append(len(runs))
            raise KeyboardInterrupt

    first = run_campaign(lab, task, budget=Budget(experiments=14), seed=3, on_progress=interrupt)
    assert first.state == "stopped" and stopped_at and stopped_at[0] < 14
    resumed = run_campaign(
        lab, task, budget=Budget(experiments=14), seed=3, campaign_id=first.campaign_id
    )
    assert resumed.state == "finished"
    assert [r["config"] for r in _runs_of(lab, first.campaign_id)] == unbroken


GATED = [
    Knob(name="epochs", type=KnobType.INT, low=0, high=20, default=0),
    Knob(
        name="lr",
        type=KnobType.FLOAT,
        low=1e-4,
        high=1.0,
        log=True,
        default=0.01,
        when=KnobCondition(knob="epochs", at_least=1),
        weakest=1e-4,
    ),
    Knob(
        name="rank",
        type=KnobType.CHOICE,
        choices=[0, 8],
        default=8,
        when=KnobCondition(knob="epochs", at_least=1),
    ),
]
UNTRAINED: dict[str, JsonValue] = {"epochs": 0, "lr": 1e-2, "rank": 8}
FULL: dict[str, JsonValue] = {"epochs": 16, "lr": 1.0, "rank": 0}


def test_a_knob_that_does_not_matter_in_the_reference_stays_at_the_source_value() -> None:
    """The reference trains nothing (epochs 0), so its learning rate says nothing: tempering
    shortens the training and keeps the source's rate, where a plain blend would raise it
    toward the reference's inert 1e-2."""
    reference: dict[str, JsonValue] = {"epochs": 0, "lr": 1e-2, "rank": 8}
    source: dict[str, JsonValue] = {"epochs": 16, "lr": 1e-4, "rank": 0}
    assert blend(GATED, reference, source, 0.5) == {"epochs": 8, "lr": 1e-4, "rank": 0}
    trained: dict[str, JsonValue] = {"epochs": 4, "lr": 1e-2, "rank": 8}  # it trains: it moves
    assert blend(GATED, trained, source, 0.5)["lr"] == pytest.approx(1e-3)


def test_weaken_moves_a_knob_inert_in_the_reference_toward_its_weak_end() -> None:
    """Declared ``weakest``: on the weak line, tempering from a reference that trains nothing
    lowers the rate in step with the epochs (log scale: a quarter of the way from 1e-4 to 1e0
    is 1e-3) and leaves a choice knob as in the source; off it, the rate stays; a reference
    that trains blends toward its own rate either way."""
    half = blend(GATED, UNTRAINED, FULL, 0.5, weaken=True)
    assert half["epochs"] == 8 and half["rank"] == 0
    assert half["lr"] == pytest.approx(1e-2)
    assert blend(GATED, UNTRAINED, FULL, 0.25, weaken=True)["lr"] == pytest.approx(1e-3)
    assert blend(GATED, UNTRAINED, FULL, 1.0, weaken=True)["lr"] == pytest.approx(1.0)
    assert blend(GATED, UNTRAINED, FULL, 0.25)["lr"] == 1.0
    trained: dict[str, JsonValue] = {"epochs": 4, "lr": 1e-2, "rank": 8}
    assert blend(GATED, trained, FULL, 0.5, weaken=True)["lr"] == pytest.approx(1e-1)
    assert has_weak_line(GATED, UNTRAINED, FULL)
    assert not has_weak_line(GATED, trained, FULL)  # the rate acts in the reference
    assert not has_weak_line(GATED, UNTRAINED, {**FULL, "lr": 1e-4})  # at its weak end already
    assert not has_weak_line(SPACE, REF, FAR)  # nothing declares a weak end


def _gated_run(n: int, config: dict[str, JsonValue], scores: dict[str, float], short: float) -> Run:
    return Run(n, f"exp-{n}", "d", config, scores["arith"] - 10 * short, False, scores, short)


def test_after_a_step_that_changed_nothing_the_bisection_restarts_on_the_weak_line() -> None:
    """Halving the epochs changed nothing (a capped training), so the next step halves them
    again *and* lowers the rate halfway to its weak end, from t = 1/2; the steps after it
    bisect that line (the inert step is free: four steps in all)."""
    scores = {"arith": 0.35, "fncall": 0.6}
    source = _gated_run(2, FULL, scores, 0.2)
    first = next_temper_config(GATED, UNTRAINED, source, [], set())
    assert first == {"epochs": 8, "lr": 1.0, "rank": 0}  # the first step holds the rate
    inert = _gated_run(3, first, dict(scores), 0.2)
    second = next_temper_config(GATED, UNTRAINED, source, [inert], set())
    assert second is not None
    assert (second["epochs"], second["rank"]) == (8, 0)
    assert second["lr"] == pytest.approx(1e-2)
    kept = _gated_run(4, second, {"arith": 0.3, "fncall": 0.8}, 0.0)
    third = next_temper_config(GATED, UNTRAINED, source, [inert, kept], set())
    assert third is not None and third["epochs"] == 12  # t = 3/4 of the weak line
    assert third["lr"] == pytest.approx(10**-1)
    # a step on the weak line is judged at its own fraction: short by 0.09 at t = 1/2 of 0.2
    # stands, short by 0.11 falsifies
    fair = _gated_run(4, second, {"arith": 0.3, "fncall": 0.7}, 0.09)
    assert not falsified([inert, fair], source, weak_line=True)
    assert falsified([inert, _gated_run(4, second, {"arith": 0.3}, 0.11)], source, True)
    broke = _gated_run(5, third, {"arith": 0.33, "fncall": 0.7}, 0.05)
    fourth = next_temper_config(GATED, UNTRAINED, source, [inert, kept, broke], set())
    assert fourth is not None and fourth["epochs"] == 10  # t = 5/8
    assert next_temper_config(GATED, UNTRAINED, source, [inert, kept, broke, broke], set()) is None
