"""Tempering: configs on the segment from the reference to an infeasible gain, bisected by
feasibility; which run is tempered; and a campaign on the constrained tuning family (not a
benchmark task) that turns an infeasible gain into a feasible one."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest
from pydantic import JsonValue

from rsilab.orchestrator.builtin._context import RunContext
from rsilab.orchestrator.builtin._state import Run
from rsilab.orchestrator.builtin.ablation import Ablation
from rsilab.orchestrator.builtin.main._moves import Moves
from rsilab.orchestrator.builtin.main._temper import (
    blend,
    falsified,
    hold,
    holding_knobs,
    next_fraction,
    next_temper_config,
    temper_source,
)
from rsilab.orchestrator.builtin.runner import Progress, run_campaign
from rsilab.orchestrator.builtin.worker._rules import config_key
from rsilab.orchestrator.research.dag import ResearchDag
from rsilab.records import Campaign, Candidate, CandidateState, Experiment, Intent
from rsilab.store import Lab
from rsilab.tasks import Budget, Knob, KnobCondition, KnobType
from tests.orchestrator.builtin import tuning_mixture as mixture
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
    assert next_fraction([]) == 0.5
    assert next_fraction([False]) == 0.25
    assert next_fraction([True]) == 0.75
    assert next_fraction([False, True]) == 0.375
    assert next_fraction([True, False]) == 0.625
    assert next_fraction([False, False, False]) is None
    assert next_fraction([True], steps=1) is None


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
    assert falsified([_run(5, 0.3, shortfall=0.03)], 0.04)
    assert next_temper_config(SPACE, REF, source, [_run(5, 0.3, shortfall=0.03)], set()) is None
    # a quarter of the way, after a break at a half: the bar is a quarter of the source's
    assert falsified([_run(5, 0.3, 0.01), _run(6, 0.2, 0.02)], 0.04)
    assert not falsified([_run(5, 0.3, 0.01), _run(6, 0.2, 0.009)], 0.04)
    # a feasible step never falsifies; a failed one does (nothing learned from it)
    assert not falsified([_run(5, 0.3)], 0.04)
    assert falsified([_run(5, 0.0, failed=True)], 0.04)


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


def test_a_knob_that_does_not_matter_in_the_reference_stays_at_the_source_value() -> None:
    """The reference trains nothing (epochs 0), so its learning rate says nothing: tempering
    shortens the training and keeps the source's rate, where a plain blend would raise it
    toward the reference's inert 1e-2."""
    gated = [
        Knob(name="epochs", type=KnobType.INT, low=0, high=20, default=0),
        Knob(
            name="lr",
            type=KnobType.FLOAT,
            low=1e-4,
            high=1.0,
            log=True,
            default=0.01,
            when=KnobCondition(knob="epochs", at_least=1),
        ),
    ]
    reference: dict[str, JsonValue] = {"epochs": 0, "lr": 1e-2}
    source: dict[str, JsonValue] = {"epochs": 16, "lr": 1e-4}
    assert blend(gated, reference, source, 0.5) == {"epochs": 8, "lr": 1e-4}
    trained: dict[str, JsonValue] = {"epochs": 4, "lr": 1e-2}  # a reference that trains: it moves
    assert blend(gated, trained, source, 0.5)["lr"] == pytest.approx(1e-3)


TRAINS = KnobCondition(knob="epochs", at_least=1)
HELD = [
    Knob(name="epochs", type=KnobType.INT, low=0, high=10, default=0),
    Knob(name="mix_a", type=KnobType.FLOAT, low=0.0, high=3.0, default=1.0, when=TRAINS,
         holds=["a"]),
    Knob(name="mix_b", type=KnobType.FLOAT, low=0.0, high=3.0, default=1.0, when=TRAINS,
         holds=["b"]),
    Knob(name="replay", type=KnobType.FLOAT, low=0.01, high=1.0, log=True, default=0.01,
         when=TRAINS, holds=["a", "b"]),
    Knob(name="shots", type=KnobType.INT, low=0, high=4, default=2),
]  # fmt: skip
BROKE: dict[str, JsonValue] = {"epochs": 8, "mix_a": 0.0, "mix_b": 1.5, "replay": 0.1, "shots": 1}


def _broken(config: dict[str, JsonValue], *benchmarks: str) -> Run:
    return Run(7, "exp-7", "d", dict(config), 0.1, False, {}, 0.03, broken=benchmarks)


def test_the_knobs_that_hold_what_a_run_breaks_are_the_ones_raised() -> None:
    assert holding_knobs(HELD, _broken(BROKE, "a")) == ["mix_a", "replay"]
    assert holding_knobs(HELD, _broken(BROKE, "b")) == ["mix_b", "replay"]
    assert holding_knobs(HELD, _broken(BROKE, "a", "b")) == ["mix_a", "mix_b", "replay"]
    # a knob at the top of its range has nothing left to give
    assert holding_knobs(HELD, _broken({**BROKE, "replay": 1.0}, "a")) == ["mix_a"]
    # a knob that does not matter in the run (nothing trains) cannot hold anything there
    assert holding_knobs(HELD, _broken({**BROKE, "epochs": 0}, "a")) == []
    # nothing broken, or a task that declares no holding knob: no holding path
    assert holding_knobs(HELD, _broken(BROKE)) == []
    assert holding_knobs(SPACE, _broken(FAR, "a")) == []


def test_a_break_that_no_knob_left_can_hold_takes_the_path_toward_the_reference() -> None:
    """Raising what holds one broken benchmark cannot repair another that nothing holds (or
    whose holding knobs are at their tops): such a source retreats toward the reference,
    which can repair both, rather than spend its one tempering on a path that cannot."""
    assert holding_knobs(HELD, _broken(BROKE, "a", "c")) == []  # nothing holds c
    tops = {**BROKE, "mix_b": 3.0, "replay": 1.0}  # what holds b has nothing left to give
    assert holding_knobs(HELD, _broken(tops, "a", "b")) == []
    assert holding_knobs(HELD, _broken(tops, "a")) == ["mix_a"]


def test_a_holding_title_names_whole_knobs_and_counts_those_that_do_not_fit() -> None:
    """A direction's title is cut at 100 characters; a knob's name cut short there could read
    as another knob's (``mix_c`` of ``mix_choice``), so the title names whole knobs and counts
    the rest (its plan lists every one)."""
    created: list[dict[str, object]] = []
    ctx = SimpleNamespace(
        target="quality",
        door=SimpleNamespace(main=lambda tool, **args: created.append(args)),
        say=lambda *_: None,
    )
    names = ["mix_fncall_targets", "mix_facts_targets", "mix_reverse_item", "mix_choice", "r"]
    source = Run(7, "exp-3fa9c2d1b07e", "d", dict(BROKE), 0.1, False, {}, 0.03, broken=("a",))
    Moves(cast(RunContext, ctx)).temper(source, names, holding=True)
    title = str(created[0]["title"])
    assert len(title) <= 100
    assert (
        title
        == "temper exp-3fa9c2d1b07e by raising mix_fncall_targets, mix_facts_targets and 3 more"
    )
    assert str(created[0]["plan"]).endswith(f"knobs: {', '.join(names)}\nfrom: exp-3fa9c2d1b07e")


def test_holding_moves_the_holding_knobs_toward_the_top_and_leaves_the_rest() -> None:
    names = ["mix_a", "replay"]
    half = hold(HELD, BROKE, names, 0.5)
    assert half["mix_a"] == pytest.approx(1.5)  # half way from 0 to 3
    assert half["replay"] == pytest.approx(10 ** ((-1 + 0) / 2))  # log: half way from 0.1 to 1
    assert {k: half[k] for k in ("epochs", "mix_b", "shots")} == {
        "epochs": 8, "mix_b": 1.5, "shots": 1,
    }  # fmt: skip
    assert hold(HELD, BROKE, names, 1.0) == BROKE
    full = hold(HELD, BROKE, names, 0.0)
    assert (full["mix_a"], full["replay"]) == (3.0, 1.0)
    with pytest.raises(ValueError, match="t must lie"):
        hold(HELD, BROKE, names, -0.1)


def test_a_holding_tempering_bisects_between_full_hold_and_the_source() -> None:
    source = _broken(BROKE, "a")
    names = ["mix_a"]
    first = next_temper_config(HELD, {"epochs": 0}, source, [], set(), names)
    assert first is not None and first["mix_a"] == pytest.approx(1.5)
    assert first["epochs"] == 8  # how far it trains stays; what it trains on changes
    still = Run(8, "exp-8", "d", first, 0.1, False, {}, 0.01, broken=("a",))
    second = next_temper_config(HELD, {"epochs": 0}, source, [still], set(), names)
    assert second is not None and second["mix_a"] == pytest.approx(2.25)  # t = 1/4: more hold
    kept = Run(8, "exp-8", "d", first, 0.3, False, {}, 0.0)
    third = next_temper_config(HELD, {"epochs": 0}, source, [kept], set(), names)
    assert third is not None and third["mix_a"] == pytest.approx(0.75)  # t = 3/4: less hold


@pytest.mark.parametrize("seed", [6, 16])
def test_a_campaign_holds_a_broken_non_target_by_raising_its_own_data(
    lab: Lab, tmp_path: Path, seed: int
) -> None:
    """Mixture family seeds 6 and 16 (not a benchmark task): training on the target breaks a
    non-target, and without the declarations the built-in policy accepted nothing in 12
    experiments (nor does it here, the same campaign seed). Declared, the tempering raises the
    knobs that hold what its source broke, its steps keep the source's training (a second
    computation here), and the campaign's accepted version is within every tolerance by the
    family's true damage and better than the start by its true quality."""
    spec = mixture.spec_for(seed)
    task = mixture.mixture_task(tmp_path / "task", seed=seed)
    result = run_campaign(lab, task, budget=Budget(experiments=12), seed=seed)
    dag = ResearchDag.load(lab.store, result.campaign_id)
    held = [d for d in dag.directions.values() if " by raising " in d.title]
    assert len(held) == 1
    runs = _runs_of(lab, result.campaign_id)
    source = {str(r["experiment_id"]): r for r in runs}[held[0].title.split()[1]]["config"]
    assert isinstance(source, dict)
    raised = held[0].title.split(" by raising ")[1].split(", ")
    assert raised and all(k == "replay" or k.startswith("mix_") for k in raised)
    assert mixture.worst_damage(source, spec) > mixture.TOLERANCE / 2
    for step in (r["config"] for r in runs if r["direction_id"] == held[0].id):
        assert isinstance(step, dict)
        assert {k: step[k] for k in ("epochs", "lr", "mix_target")} == {
            k: source[k] for k in ("epochs", "lr", "mix_target")
        }
        assert all(float(step[k]) >= float(source[k]) for k in raised)  # type: ignore[arg-type]
    assert len(result.accepted) == 1
    (won,) = [
        c
        for c in lab.store.query_as(Candidate, campaign_id=result.campaign_id)
        if c.state == CandidateState.ACCEPTED
    ]
    assert won.experiment_id is not None
    head = lab.store.get_as(won.experiment_id, Experiment).config
    assert mixture.worst_damage(head, spec) <= mixture.TOLERANCE
    start = {k.name: k.default for k in mixture.space()}
    assert mixture.quality(head, spec) > mixture.quality(start, spec) + 0.05

    blind = Lab.init(tmp_path / "blind")
    try:
        plain = mixture.mixture_task(tmp_path / "plain", seed=seed, holds=False)
        before = run_campaign(blind, plain, budget=Budget(experiments=12), seed=seed)
        assert before.accepted == []
    finally:
        blind.close()


def test_a_campaign_stopped_mid_holding_resumes_to_the_same_configs(
    lab: Lab, tmp_path: Path
) -> None:
    """A holding tempering is read from the records as the retreat is (its knobs from its
    plan): a campaign stopped after its first step proposes, once resumed, exactly what an
    unbroken campaign does."""
    task = mixture.mixture_task(tmp_path / "task", seed=6)
    other = Lab.init(tmp_path / "other")
    try:
        whole = run_campaign(other, task, budget=Budget(experiments=12), seed=6)
        unbroken = [r["config"] for r in _runs_of(other, whole.campaign_id)]
    finally:
        other.close()
    stopped_at: list[int] = []

    def interrupt(progress: Progress) -> None:
        if progress.kind != "experiment" or stopped_at:
            return
        campaign = lab.store.query_as(Campaign)[0].id
        dag = ResearchDag.load(lab.store, campaign)
        held = [d for d in dag.directions.values() if " by raising " in d.title]
        runs = _runs_of(lab, campaign)
        if held and any(r["direction_id"] == held[0].id for r in runs):
            stopped_at.append(len(runs))
            raise KeyboardInterrupt

    first = run_campaign(lab, task, budget=Budget(experiments=12), seed=6, on_progress=interrupt)
    assert first.state == "stopped" and stopped_at and stopped_at[0] < 12
    resumed = run_campaign(
        lab, task, budget=Budget(experiments=12), seed=6, campaign_id=first.campaign_id
    )
    assert resumed.state == "finished"
    assert [r["config"] for r in _runs_of(lab, first.campaign_id)] == unbroken
