"""policy: a research policy on generated problems, scored by the true quality of its choice."""

from __future__ import annotations

import json
import random
import shutil
import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rsilab.controller.host import HostController
from rsilab.executors.local import LocalExecutor
from rsilab.records import CandidateState, DataTier
from rsilab.sandbox.base import Sandbox
from rsilab.sandbox.select import default_sandbox
from rsilab.store import Lab
from rsilab.tasks import (
    TIERS,
    Sample,
    check_task,
    get_scorer,
    get_task,
    load_manifest,
    make_splits,
    run_experiment,
)
from rsilab.tasks.builtin import policy as pol
from tests.tasks.builtin.policy_helpers import BAD, BETTER, harness_module

SCORER = get_scorer("search_quality").fn


@pytest.fixture(scope="module")
def box() -> Iterator[Sandbox]:
    """The default sandbox (bubblewrap where it works here)."""
    sandbox = default_sandbox()
    yield sandbox
    sandbox.close()


def _sample(family: str, seed: int, budget: int = 60) -> Sample:
    return Sample(id=f"s-{family}-{seed}", input={"family": family, "seed": seed, "budget": budget})


def _workspace(tmp_path: Path, config: dict[str, Any] | None = None) -> Path:
    folder = tmp_path / "ws"
    shutil.copytree(pol.HERE / "harness", folder)
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config))
    return folder


# --- the task --------------------------------------------------------------------------------


def test_the_task_loads_and_its_config_mirrors_the_search_space(secret: bytes) -> None:
    task = get_task("policy")
    assert task.source == "builtin" and [b.name for b in task.benchmarks] == [
        "search-quality",
        "transfer",
    ]
    assert [b.name for b in task.targets] == ["search-quality"]
    assert task.benchmark("transfer").tolerance == 0.05
    config = json.loads((task.harness / "config.json").read_text())
    assert task.default_config() == config == harness_module("policy").DEFAULTS
    declared = json.loads((task.harness / "space.json").read_text())["knobs"]
    assert [k.name for k in task.search_space] == [k["name"] for k in declared] == list(config)
    assert all(k.default == config[k.name] for k in task.search_space)
    assert len(task.search_space) == 8
    manifest = load_manifest(task.harness)
    assert manifest.improve == ["python", "improve.py"] and manifest.improves
    assert manifest.model == "json" and manifest.config == "config.json"
    assert [p for p in check_task(task, None, secret) if p.severity == "error"] == []


def test_a_missing_improve_script_is_a_task_problem(tmp_path: Path, secret: bytes) -> None:
    folder = _workspace(tmp_path)
    (folder / "improve.py").unlink()
    task = get_task("policy").model_copy(update={"harness": folder})
    errors = [p.message for p in check_task(task, None, secret) if p.severity == "error"]
    assert errors == ["entry script improve.py not found"]


# --- splits -----------------------------------------------------------------------------------


def test_splits_are_deterministic_per_secret(secret: bytes) -> None:
    task = get_task("policy")
    for bench in task.benchmarks:
        first = make_splits(task, bench, secret)
        assert first == make_splits(task, bench, secret)
        other = make_splits(task, bench, b"another secret")
        for tier in TIERS:
            assert first[tier] and [s.input for s in first[tier]] != [s.input for s in other[tier]]


def test_public_and_private_problem_seeds_are_disjoint(secret: bytes) -> None:
    task = get_task("policy")
    public, private = set(), set()
    for bench in task.benchmarks:
        for tier, samples in make_splits(task, bench, secret).items():
            seeds = {s.input["seed"] for s in samples}  # type: ignore[call-overload, index]
            (private if tier.is_private else public).update(seeds)
    low, high = pol.PUBLIC_SEEDS
    assert all(low <= s < high for s in public)
    low, high = pol.PRIVATE_SEEDS
    assert all(low <= s < high for s in private)
    assert len(public) == 140 and len(private) == 360  # no seed repeats, within or across


def test_held_out_families_appear_only_in_private_tiers(secret: bytes) -> None:
    task = get_task("policy")
    held_out, seen = set(pol.held_out_families()), set(pol.seen_families())
    assert held_out == {"plateau", "mixed"} and not held_out & seen
    found: dict[tuple[str, DataTier], set[str]] = {}
    for bench in task.benchmarks:
        for tier, samples in make_splits(task, bench, secret).items():
            found[bench.name, tier] = {s.input["family"] for s in samples}  # type: ignore[call-overload, index]
    for (bench, tier), families in found.items():
        if bench == "transfer" and tier.is_private:
            assert families == held_out, (bench, tier)
        else:
            assert families == seen, (bench, tier)
    for tier in TIERS:  # one predict job scores every benchmark of a tier: ids must not repeat
        ids = [s.id for b in task.benchmarks for s in make_splits(task, b, secret)[tier]]
        assert len(set(ids)) == len(ids)


# --- the scorer -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "family", ["bowl", "ridge", "multimodal", "categorical", "noisy", "plateau", "mixed"]
)
def test_the_start_scores_zero_and_the_optimum_one(family: str) -> None:
    truth = pol.problems()
    for seed in (0, 1, 2**40 + 7):
        sample = _sample(family, seed)
        problem = pol.make_problem(family, seed)
        start = SCORER(sample, problem["start"])
        assert start.valid and start.score == 0.0
        best = SCORER(sample, truth.optimum_config(problem))
        assert best.valid and best.score == pytest.approx(1.0, abs=1e-9)
        assert truth.value(problem, truth.optimum_config(problem)) == pytest.approx(
            truth.optimum(problem), abs=1e-9
        )


def test_a_printed_score_counts_for_nothing() -> None:
    sample = _sample("bowl", 3)
    start = pol.make_problem("bowl", 3)["start"]
    assert SCORER(sample, {**start, "score": 1.0, "quality": 1.0}).score == 0.0
    for output in (1.0, "1.0", {"score": 1.0}, [start], None):
        scored = SCORER(sample, output)  # type: ignore[arg-type]
        assert scored.score == 0.0 and not scored.valid, output


def test_malformed_configs_are_invalid() -> None:
    problem = pol.make_problem("mixed", 5)
    sample = _sample("mixed", 5)
    start = problem["start"]
    knob = problem["knobs"][0]
    cases = {
        "missing": {k: v for k, v in start.items() if k != knob["name"]},
        "outside": {**start, knob["name"]: knob["high"] + 1},
        "not a number": {**start, knob["name"]: "1"},
        "not an integer": {**start, "n0": 2.5},
        "not a choice": {**start, "mode": "z"},
    }
    for why, config in cases.items():
        scored = SCORER(sample, config)
        assert not scored.valid and scored.score == 0.0, why
    alien = Sample(id="x", input={"family": "nonesuch", "seed": 1, "budget": 10})
    assert not SCORER(alien, start).valid


# --- room for improvement -----------------------------------------------------------------------


def _true_scores(config: dict[str, Any], samples: list[Sample], noise_seed: int = 0) -> float:
    solve = harness_module("predict").solve
    scores = []
    for sample in samples:
        data: dict[str, Any] = sample.input  # type: ignore[assignment]
        problem = pol.make_problem(data["family"], data["seed"])
        rng = random.Random(f"{noise_seed}/{sample.id}")
        scores.append(pol.true_quality(problem, solve(problem, config, data["budget"], rng)))
    return statistics.fmean(scores)


def test_the_start_leaves_room_and_worse_settings_exist(secret: bytes) -> None:
    """True quality on the dev tier (seen families) and on transfer's accept tier (held out)."""
    task = get_task("policy")
    dev = make_splits(task, task.benchmark("search-quality"), secret)[DataTier.DEV]
    held = make_splits(task, task.benchmark("transfer"), secret)[DataTier.ACCEPT]
    start = task.default_config()
    # averaged over the solver's noise draws, so the margins hold for the settings, not for
    # one draw (the draws follow the sample ids, which the secret re-keys)
    on_dev = {
        name: statistics.fmean(_true_scores(c, dev, noise) for noise in range(3))
        for name, c in [("start", start), ("better", BETTER), ("bad", BAD)]
    }
    assert on_dev["better"] > on_dev["start"] + 0.1, on_dev
    assert on_dev["bad"] < on_dev["start"] - 0.1, on_dev
    assert _true_scores(BETTER, held) > _true_scores(start, held), "the gain transfers"


# --- the job path and the controller --------------------------------------------------------------


def test_train_and_predict_run_in_the_default_sandbox(
    tmp_path: Path, box: Sandbox, secret: bytes
) -> None:
    task = get_task("policy")
    start = run_experiment(task, box, secret, seed=1)
    workspace = box.workspace(_workspace(tmp_path, BETTER))  # the sandbox user's, to train in
    better = run_experiment(task, box, secret, seed=1, workspace=workspace)
    assert better.model is not None
    assert json.loads(better.model.read_text()) == {"config": BETTER}
    for outcome in (start, better):
        assert set(outcome.scores) == {"search-quality", "transfer"}
        assert all(s.valid for scored in outcome.samples.values() for s in scored)
    assert 0.3 < start.scores["search-quality"] < 0.55
    assert better.scores["search-quality"] > start.scores["search-quality"] + 0.08


def test_the_controller_accepts_a_clearly_better_policy(tmp_path: Path) -> None:
    task = get_task("policy")
    with Lab.init(tmp_path / "lab") as lab:
        executor = LocalExecutor(default_sandbox(), lab.artifacts, slots=2)
        try:
            controller = HostController(lab, task, executor)
            baseline = controller.baseline()
            assert 0.3 < baseline.scores["search-quality"].value < 0.55
            sha = lab.artifacts.put_tree(_workspace(tmp_path, BETTER)).sha256
            candidate = controller.propose(sha, campaign_id=None, proposer="tester")
            judged = controller.judge(candidate.id)
        finally:
            executor.shutdown()
    assert judged.state is CandidateState.ACCEPTED, judged.reason
    gains = {d.benchmark: d.gain for d in judged.decisions}
    assert gains["search-quality"] > 0.08 and gains["transfer"] > -0.05
