"""The built-in policy's search: the TPE study fed from the records, no reference repeats, the
race at the end, exhausted directions closing, and a search that beats random search on a
generated tuning family (not a benchmark task)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import JsonValue

from rsilab.orchestrator.builtin._search import build_study, suggest
from rsilab.orchestrator.builtin._state import Run, base_of, knobs_of
from rsilab.orchestrator.builtin.main._race import next_race_config, race_budget, rungs, winner
from rsilab.orchestrator.builtin.runner import Progress, run_campaign
from rsilab.orchestrator.builtin.worker._rules import config_key
from rsilab.orchestrator.research.dag import ResearchDag
from rsilab.records import Direction, Experiment, Intent
from rsilab.store import Lab
from rsilab.tasks import Budget, Knob, KnobCondition, KnobType
from tests.orchestrator.builtin.tuning_recipe import recipe_task
from tests.orchestrator.builtin.tuning_tasks import quality, random_search_best, space, spec_for
from tests.orchestrator.builtin.tuning_tasks import tuning_task as make_task


@pytest.fixture(autouse=True)
def _process_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")


def _run(n: int, config: dict[str, JsonValue], score: float, failed: bool = False) -> Run:
    return Run(n, f"exp-{n}", "dir-1", config, score, failed)


def _config(lr: float, mix: float, depth: int, kind: str) -> dict[str, JsonValue]:
    return {"lr": lr, "mix": mix, "depth": depth, "kind": kind}


RUNS = [
    _run(1, _config(0.5, 0.95, 2, "a"), -0.9),
    _run(2, _config(0.01, 0.5, 8, "b"), -0.4),
    _run(3, _config(0.01, 0.5, 8, "b"), -0.45),  # a re-run: one more trial of the same config
    _run(4, _config(0.1, 0.2, 30, "c"), 0.0, failed=True),
]


def test_the_study_holds_every_run_and_is_rebuilt_identically() -> None:
    study = build_study(space(), RUNS, seed=7)
    states = [t.state.name for t in study.trials]
    assert states == ["COMPLETE", "COMPLETE", "COMPLETE", "FAIL"]
    assert [t.value for t in study.trials[:3]] == [-0.9, -0.4, -0.45]
    again = build_study(space(), RUNS, seed=7)
    first = suggest(study, space(), {"lr", "mix", "depth", "kind"}, RUNS[0].config, set())
    second = suggest(again, space(), {"lr", "mix", "depth", "kind"}, RUNS[0].config, set())
    assert first == second and first is not None


def test_a_direction_draws_only_its_open_knobs_from_its_base() -> None:
    study = build_study(space(), RUNS, seed=3)
    base = RUNS[1].config
    for _ in range(5):
        found = suggest(study, space(), {"mix"}, base, set())
        assert found is not None
        assert {k: found[k] for k in ("lr", "depth", "kind")} == {
            "lr": 0.01,
            "depth": 8,
            "kind": "b",
        }


def test_a_knob_the_base_config_leaves_out_is_fixed_at_its_default() -> None:
    # a harness config file that omits a knob runs it at its default; a direction that leaves
    # the knob closed must do the same, not fail (posttrain's mix_<kind> once did: KeyError)
    study = build_study(space(), RUNS, seed=3)
    base = {"lr": 0.01, "kind": "b"}  # no mix, no depth
    found = suggest(study, space(), {"lr"}, base, set())
    assert found is not None
    assert {k: found[k] for k in ("mix", "depth", "kind")} == {"mix": 0.95, "depth": 2, "kind": "b"}


def test_a_space_with_nothing_new_gives_no_config() -> None:
    small = space(small=True)
    tried = {
        f'{{"depth":{d},"kind":"{k}"}}' for d in (1, 2) for k in ("a", "b", "c")
    }  # config_key's canonical form, written out here
    study = build_study(small, [], seed=1)
    assert suggest(study, small, {"depth", "kind"}, {"depth": 2, "kind": "a"}, tried) is None


def test_a_gated_study_holds_only_the_knobs_that_acted() -> None:
    # lr and mix act only when kind is not "a": a trial of a kind-"a" run holds depth and kind
    gated = space(gated=True)
    study = build_study(gated, RUNS, seed=5)
    held = [sorted(t.params) for t in study.trials]
    assert held == [
        ["depth", "kind"],
        ["depth", "kind", "lr", "mix"],
        ["depth", "kind", "lr", "mix"],
        ["depth", "kind", "lr", "mix"],
    ]
    # without conditions every trial holds every knob, as before
    assert {len(t.params) for t in build_study(space(), RUNS, seed=5).trials} == {4}


def test_a_gated_knob_is_drawn_only_where_it_acts() -> None:
    gated = space(gated=True)
    runs = [*RUNS, *(_run(5 + i, _config(0.02, 0.4, 3 + i, "c"), -0.3) for i in range(6))]
    study = build_study(gated, runs, seed=11)
    base = _config(0.5, 0.95, 2, "a")
    drawn = [suggest(study, gated, {"lr", "mix", "kind", "depth"}, base, set()) for _ in range(40)]
    configs = [c for c in drawn if c is not None]
    inert = [c for c in configs if c["kind"] == "a"]
    acting = [c for c in configs if c["kind"] != "a"]
    assert inert and acting  # both sides of the gate were drawn
    # where kind is "a" the rate and mixture keep the base's values: nothing was drawn for them
    assert {(c["lr"], c["mix"]) for c in inert} == {(0.5, 0.95)}
    assert len({c["lr"] for c in acting}) > len(acting) // 2  # drawn where they act
    # the study saw each draw with only its active knobs (left running so the next avoids it)
    asked = study.trials[len(runs) :]
    assert all(("lr" in t.params) == (t.params["kind"] != "a") for t in asked)


def test_a_chain_of_conditions_is_drawn_in_order() -> None:
    # rank matters when lora is on, lora when the model trains (steps >= 1); declared backwards
    chain = [
        Knob(
            name="rank",
            type=KnobType.INT,
            low=2,
            high=64,
            default=8,
            when=KnobCondition(knob="lora", one_of=[True]),
        ),
        Knob(
            name="lora",
            type=KnobType.BOOL,
            default=False,
            when=KnobCondition(knob="steps", at_least=1),
        ),
        Knob(name="steps", type=KnobType.INT, low=0, high=3, default=0),
    ]
    study = build_study(chain, [], seed=2)
    tried: set[str] = set()
    for _ in range(12):
        config = suggest(study, chain, {"rank", "lora", "steps"}, {}, tried)
        if config is None:
            break
        tried.add(config_key(config, chain))
        if config["steps"] == 0 or config["lora"] is False:
            assert config["rank"] == 8  # not drawn: the default, since the base lacks it
        if config["steps"] == 0:
            assert config["lora"] is False
    asked = study.trials
    assert all(("lora" in t.params) == (t.params["steps"] >= 1) for t in asked)
    assert all(("rank" in t.params) == (t.params.get("lora") is True) for t in asked)
    assert any("rank" in t.params for t in asked)


def test_the_race_reruns_the_reference_once_then_halves_the_field() -> None:
    assert race_budget(5) == 0 and race_budget(20) == 5 and race_budget(40) == 10
    assert rungs(4) == [2, 1, 1] and rungs(7) == [4, 2, 1]
    ref = RUNS[0].config
    good = [_run(i, _config(0.01 * i, 0.5, 8, "b"), -0.5 + 0.01 * i) for i in range(2, 6)]
    runs = [RUNS[0], *good]
    assert next_race_config(runs, ref, [], 0, 5, []) == ref
    runs.append(_run(9, dict(ref), -0.85))
    picked = next_race_config(runs, ref, [], 1, 5, [])  # first rung of rungs(4): top two
    assert picked == good[-1].config
    runs.append(_run(10, dict(good[-1].config), -0.44))
    assert next_race_config(runs, ref, [], 2, 5, []) == good[-2].config
    champion = winner(runs, ref, [])
    assert champion is not None and champion.config == good[-1].config
    assert len(champion.runs) == 2


def _configs(lab: Lab, campaign_id: str) -> list[tuple[int, dict[str, JsonValue]]]:
    intents = lab.store.query_as(Intent, campaign_id=campaign_id)
    return sorted(
        (int(i.key.removeprefix("exp:")), dict(i.result["config"]))
        for i in intents
        if i.key.startswith("exp:") and i.result
    )


def test_a_resumed_campaign_proposes_what_an_unbroken_one_does(lab: Lab, tmp_path: Path) -> None:
    task = make_task(tmp_path / "task", seed=3)
    other = Lab.init(tmp_path / "other")  # its own head: an acceptance here changes nothing there
    try:
        whole = run_campaign(other, task, budget=Budget(experiments=10), seed=5)
        unbroken = _configs(other, whole.campaign_id)
    finally:
        other.close()

    def interrupt(progress: Progress) -> None:
        if progress.kind == "experiment" and progress.experiments == 4:
            raise KeyboardInterrupt

    first = run_campaign(lab, task, budget=Budget(experiments=10), seed=5, on_progress=interrupt)
    assert first.state == "stopped"
    resumed = run_campaign(
        lab, task, budget=Budget(experiments=10), seed=5, campaign_id=first.campaign_id
    )
    assert resumed.state == "finished"
    assert _configs(lab, first.campaign_id) == unbroken


def test_the_reference_runs_twice_at_most_and_the_race_reruns_the_best(
    lab: Lab, tmp_path: Path
) -> None:
    task = make_task(tmp_path / "task", seed=4)
    result = run_campaign(lab, task, budget=Budget(experiments=16), seed=1)
    configs = [c for _, c in _configs(lab, result.campaign_id)]
    start = {k.name: k.default for k in space()}
    assert sum(1 for c in configs if c == start) <= 2
    distinct = {tuple(sorted(c.items())) for c in configs}
    assert len(distinct) >= 16 - 2 - 4  # only the race (4 of 16) and the reference repeat
    dag = ResearchDag.load(lab.store, result.campaign_id)
    assert any(d.title == "race the best configs" for d in dag.directions.values())


def test_an_exhausted_space_races_its_best_with_the_budget_left(lab: Lab, tmp_path: Path) -> None:
    task = make_task(tmp_path / "task", seed=2, small=True)
    result = run_campaign(lab, task, budget=Budget(experiments=12), seed=0)
    assert result.state == "finished"
    configs = [c for _, c in _configs(lab, result.campaign_id)]
    distinct = {json.dumps(c, sort_keys=True) for c in configs}
    assert len(distinct) < 12  # the small space ran out of new configs...
    assert len(configs) == 12  # ...and the race re-ran its best with what was left
    start = {"lr": 0.5, "mix": 0.95, "depth": 2, "kind": "a"}
    assert sum(1 for c in configs if c == start) <= 2  # the reference: its first run, one re-run
    again = [c for c in configs if c != start and configs.count(c) > 1]
    assert again  # re-runs of configs that beat the reference
    dag = ResearchDag.load(lab.store, result.campaign_id)
    assert all(d.state.is_finished() for d in dag.directions.values())


@pytest.mark.parametrize("seed", [1, 4, 5])
def test_the_policy_finds_a_better_config_than_random_search(
    lab: Lab, tmp_path: Path, seed: int
) -> None:
    """Equal budget (20 experiments): the best true quality among the configs the policy ran
    against random search's best of 20 configs (the same family seed). Measured on seeds 1-6 the
    policy won 4 (1, 4, 5, 6) and lost 2 (2, 3); the seeds here are fixed among the wins with a
    margin over 0.1, so the test checks that the search keeps that level, not that it always
    wins."""
    task = make_task(tmp_path / "task", seed=seed)
    result = run_campaign(lab, task, budget=Budget(experiments=20), seed=seed)
    spec = spec_for(seed)
    best = max(quality(c, spec) for _, c in _configs(lab, result.campaign_id))
    assert best > random_search_best(spec, 20, seed) + 0.05


def _described_configs(lab: Lab, campaign_id: str) -> list[tuple[str, dict[str, JsonValue]]]:
    """(description, config) of each experiment of the campaign, oldest first."""
    found = lab.store.query_as(Experiment, campaign_id=campaign_id)
    names = [k.name for k in space()]
    return [
        (e.description, {k: e.config[k] for k in names})
        for e in sorted(found, key=lambda e: e.created_at)
    ]


def _system(config: dict[str, JsonValue]) -> str:
    """The gated family's system, worked out here from its formula: with kind "a", lr and mix
    change nothing."""
    acting = {k: v for k, v in config.items() if config["kind"] != "a" or k not in ("lr", "mix")}
    return json.dumps(acting, sort_keys=True)


def _searched_twice(lab: Lab, campaign_id: str) -> int:
    """Search experiments that ran a system an earlier experiment ran (re-runs of the race and
    of the reference are meant to repeat one, and are not counted)."""
    seen: set[str] = set()
    again = 0
    for described, config in _described_configs(lab, campaign_id):
        system = _system(config)
        if "re-run" not in described and system in seen:
            again += 1
        seen.add(system)
    return again


@pytest.mark.parametrize("seed", [2, 7])
def test_knobs_that_do_not_matter_are_not_searched_again(
    lab: Lab, tmp_path: Path, seed: int
) -> None:
    """The gated family: lr and mix act only when kind is not "a" (the default). Declared with
    ``when``, no search experiment runs a system already run; the same task with the condition
    left out of its space spends search experiments on the reference's system under other
    learning rates. Measured on family seeds 1-8 at 16 experiments: declared, 0 repeats in
    each; left out, 5, 5, 5 and 8 repeats in seeds 2, 3, 4 and 7, none in the other four (the
    seeds here are two of those four)."""
    declared = make_task(tmp_path / "declared", seed=seed, gated=True)
    result = run_campaign(lab, declared, budget=Budget(experiments=16), seed=seed)
    assert _searched_twice(lab, result.campaign_id) == 0
    silent = make_task(tmp_path / "silent", seed=seed, gated=True, declared=False)
    other = Lab.init(tmp_path / "other")
    try:
        blind = run_campaign(other, silent, budget=Budget(experiments=16), seed=seed)
        assert _searched_twice(other, blind.campaign_id) >= 1
    finally:
        other.close()


@pytest.mark.parametrize("seed", [5, 9])
def test_a_direction_on_knobs_that_do_not_act_from_its_start_opens_their_gate(
    lab: Lab, tmp_path: Path, seed: int
) -> None:
    """The recipe family: the start does not train (``epochs`` 0) and lr, mix, rank and keep act
    only when it does. A direction that opens any of them from a config that does not train
    opens ``epochs`` too, or its draws could change only the few knobs that act untrained.
    Measured on family seeds 1-40 at 12 experiments, scored by the family's own formula:
    with the gate opened the best feasible quality run was higher in 5 seeds and equal in 35;
    before, the directions that missed it ran untrained configs. The seeds here are two of the
    five."""
    task = recipe_task(tmp_path / "task", seed=seed)
    result = run_campaign(lab, task, budget=Budget(experiments=12), seed=seed)
    experiments = {e.id: e for e in lab.store.query_as(Experiment, campaign_id=result.campaign_id)}
    first = min(experiments.values(), key=lambda e: e.created_at)
    gated = {"lr", "mix", "rank", "keep"}
    opened = 0
    for d in lab.store.query_as(Direction, campaign_id=result.campaign_id):
        knobs = set(knobs_of(d))
        base = experiments[b].config if (b := base_of(d)) else first.config
        if knobs & gated and int(str(base["epochs"])) < 1:
            opened += 1
            assert "epochs" in knobs, f"{d.title!r} opens {sorted(knobs)} from an untrained start"
    assert opened >= 2  # the first direction (every knob) and at least one of the later ones
