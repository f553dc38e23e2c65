"""policy's improver: the search policy as pure functions, improve.py's research loop against a
scripted Experiment OS, and one real ``rsilab agent -- python improve.py`` run."""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from rsilab.records import Experiment, ExperimentState, Job, JobStatus
from rsilab.store import Lab, verify_store
from rsilab.tasks import get_task
from tests.cli.helpers import explain, rsilab
from tests.sandbox.helpers import bwrap_problem
from tests.tasks.builtin.policy_helpers import BETTER, HARNESS, harness_module

KNOBS = json.loads((HARNESS / "space.json").read_text())["knobs"]
START = json.loads((HARNESS / "config.json").read_text())


# --- the policy --------------------------------------------------------------------------------


def _bowl(config: dict[str, Any]) -> float:
    """A noise-free objective over the policy's own knobs, best at BETTER's epsilon and step."""
    return -abs(config["epsilon"] - 0.45) - abs(math.log10(config["step"] / 0.2))


def test_a_search_improves_on_its_start_and_keeps_fixed_keys() -> None:
    policy = harness_module("policy")
    space = policy.Space(KNOBS, {**START, "note": "kept"})
    best = policy.run(space, START, BETTER, 60, random.Random(0), _bowl)
    assert _bowl(best) > _bowl(START) + 0.5
    assert best["note"] == "kept" and set(best) == {*START, "note"}
    assert all(k["low"] <= best[k["name"]] <= k["high"] for k in KNOBS)


def test_a_better_looking_config_is_re_evaluated_before_it_is_trusted() -> None:
    policy = harness_module("policy")
    search = policy.Search(policy.Space(KNOBS), START, {**BETTER, "confirm": 2}, random.Random(1))
    asked = [search.ask() for _ in range(3)]
    assert asked == [START] * 3  # the start: once, then confirm times
    for config in asked:
        search.tell(config, 0.0)
    lucky = search.ask()
    search.tell(lucky, 1.0)  # looks better
    assert search.best == START
    again = [search.ask(), search.ask()]
    assert again == [lucky, lucky]
    search.tell(lucky, -1.0)
    search.tell(lucky, -1.0)  # mean -1/3: the luck did not hold
    assert search.best == START


def test_stagnation_shrinks_the_step_then_restarts_it() -> None:
    policy = harness_module("policy")
    settings = {**BETTER, "patience": 2, "shrink": 0.5, "step": 0.04, "epsilon": 0.0}
    search = policy.Search(policy.Space(KNOBS), START, settings, random.Random(2))
    search.tell(search.ask(), 0.0)
    steps = []
    for _ in range(8):
        search.tell(search.ask(), -1.0)  # never better
        steps.append(search.step)
    assert steps == [0.04, 0.02, 0.02, 0.01, 0.01, 0.04, 0.04, 0.02]  # 0.005 < MIN_STEP


def test_knobs_are_guessed_from_a_config_without_a_space() -> None:
    improve = harness_module("improve")
    guessed = improve.guess_space(
        {"lr": 0.03, "width": 16, "dropout": 0.0, "scale": 3.0, "adam": True, "opt": "sgd"}
    )
    assert {k["name"]: k["type"] for k in guessed} == {
        "lr": "float",
        "width": "int",
        "dropout": "float",
        "scale": "float",
        "adam": "bool",
    }
    lr = next(k for k in guessed if k["name"] == "lr")
    assert lr["log"] and lr["low"] == pytest.approx(3e-4) and lr["high"] == 1.0


# --- improve.py against a scripted Experiment OS ------------------------------------------------


class ScriptedOS:
    """Answers improve.py's tool calls the way the Experiment OS does, in process; a dev score
    is ``_bowl`` of the config in the workspace; ``budget`` experiments at most."""

    def __init__(self, workspace: Path, budget: int, dev_scores: bool = True) -> None:
        self.workspace, self.budget, self.dev_scores = workspace, budget, dev_scores
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.snapshots: dict[str, str] = {}
        self.scores: dict[str, float] = {}

    def start(self) -> set[str]:
        return {"prepare_workspace", "write_file", "create_experiment", "run_job"}

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((name, arguments))
        handler = getattr(self, f"_{name}")
        answer: dict[str, Any] = handler(**arguments)
        return answer

    def _config(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads((self.workspace / "config.json").read_text())
        return loaded

    def _prepare_workspace(self, overwrite: bool, from_experiment: str | None = None) -> Any:
        assert overwrite
        shutil.rmtree(self.workspace, ignore_errors=True)
        shutil.copytree(HARNESS, self.workspace)
        if from_experiment is not None:
            (self.workspace / "config.json").write_text(self.snapshots[from_experiment])
        return {
            "base_version_id": "ver-0",
            "benchmarks": [
                {"name": "search-quality", "target": True},
                {"name": "transfer", "target": False},
            ],
            "dev_scores_returned": self.dev_scores,
        }

    def _list_directions(self) -> Any:
        return {
            "directions": [{"id": "dir-1", "state": "refuted"}, {"id": "dir-2", "state": "open"}]
        }

    def _write_file(self, path: str, content: str) -> Any:
        (self.workspace / path).write_text(content)
        return {"path": path}

    def _create_experiment(self, direction_id: str, description: str, config: Any) -> Any:
        assert direction_id == "dir-2" and config == self._config()
        if len(self.snapshots) >= self.budget:
            raise harness_module("improve").ToolFailed('{"error": "budget_exhausted"}')
        experiment = f"exp-{len(self.snapshots)}"
        self.snapshots[experiment] = ""
        return {"id": experiment}

    def _run_job(self, experiment_id: str, kind: str, seed: int, model: str | None = None) -> Any:
        scores = {"scores": {"search-quality": _bowl(self._config()), "transfer": 0.0}}
        if kind == "train":
            return {"status": "succeeded", "model": f"runs/{experiment_id}/model.json"}
        if kind == "dev_eval":
            assert model == f"runs/{experiment_id}/model.json"
            return {"status": "succeeded", "dev": scores}
        return {"status": "succeeded", "fold_scores": scores}

    def _finish_experiment(self, experiment_id: str, status: str, summary: str) -> Any:
        assert status == "succeeded"
        self.snapshots[experiment_id] = (self.workspace / "config.json").read_text()
        self.scores[experiment_id] = _bowl(self._config())
        return {"id": experiment_id}

    def _propose_candidate(self, experiment_id: str, base_version_id: str) -> Any:
        return {"candidate_id": "cand-1", "verdict": "reject"}


def _args(**overrides: Any) -> argparse.Namespace:
    values = {"evaluations": 30, "direction": "", "seed": 0, "propose": True, "verdict_wait": 0.0}
    return argparse.Namespace(**{**values, **overrides})


def test_improve_runs_experiments_until_the_budget_and_proposes_its_best(tmp_path: Path) -> None:
    improve = harness_module("improve")
    scripted = ScriptedOS(tmp_path / "ws", budget=12)
    report = improve.improve(scripted, _args(), BETTER, scripted.workspace)

    names = [name for name, _ in scripted.calls]
    assert names[:7] == [
        "prepare_workspace",
        "list_directions",
        "write_file",
        "create_experiment",
        "run_job",
        "run_job",
        "finish_experiment",
    ]
    assert [a["kind"] for n, a in scripted.calls if n == "run_job"][:2] == ["train", "dev_eval"]
    assert report["knobs"] == "space.json"
    assert report["experiments"] == [f"exp-{i}" for i in range(12)]  # then the budget ran out
    best = max(scripted.scores, key=scripted.scores.__getitem__)
    assert report["best_score"] == scripted.scores[best] > scripted.scores["exp-0"]
    assert names[-2:] == ["prepare_workspace", "propose_candidate"]
    assert scripted.calls[-2][1] == {"from_experiment": best, "overwrite": True}
    assert scripted.calls[-1][1] == {"experiment_id": best, "base_version_id": "ver-0"}
    assert json.loads((scripted.workspace / "config.json").read_text()) == report["best"]
    assert report["verdict"] == "reject" and report["candidate_id"] == "cand-1"


def test_without_dev_scores_improve_cross_validates(tmp_path: Path) -> None:
    improve = harness_module("improve")
    scripted = ScriptedOS(tmp_path / "ws", budget=3, dev_scores=False)
    report = improve.improve(scripted, _args(propose=False), BETTER, scripted.workspace)
    kinds = [a["kind"] for n, a in scripted.calls if n == "run_job"]
    assert kinds == ["fold_eval"] * 3 and len(report["experiments"]) == 3
    assert report["verdict"] is None and "propose_candidate" not in [n for n, _ in scripted.calls]


# --- a real run inside the sandbox -----------------------------------------------------------


def test_improve_runs_as_an_external_agent(tmp_path: Path) -> None:
    """``rsilab agent -- python improve.py``: the bridge, the tools, the jobs, the ledger."""
    problem = bwrap_problem()
    if problem is not None:
        pytest.skip(f"bubblewrap is unusable here ({problem})")
    lab = tmp_path / "lab"
    # A baseline of two seeds (default six): the verdict on improve.py's proposal is not checked.
    for args in (("init",), ("baseline", "policy", "--seeds", "2"), ("campaign", "new", "policy")):
        result = rsilab(*args, "--lab", lab)
        assert result.exit_code == 0, explain(result)
    direction = {"title": "bolder search", "hypothesis": "larger steps find better configs"}
    result = rsilab(
        "call", "create_direction", "--role", "main", "--campaign", "latest",
        "--args", json.dumps(direction), "--lab", lab,
    )  # fmt: skip
    assert result.exit_code == 0, explain(result)
    workspace = tmp_path / "ws"
    shutil.copytree(get_task("policy").harness, workspace)
    (workspace / "config.json").write_text(json.dumps(BETTER))  # the improver's own knobs
    result = rsilab(
        "agent", "--lab", lab, "--campaign", "latest", "--workspace", workspace, "--actor",
        "policy-1", "--", "python", "improve.py", "--evaluations", "4",
    )  # fmt: skip
    assert result.exit_code == 0, explain(result)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["knobs"] == "space.json" and len(report["experiments"]) == 4
    assert report["start_score"] is not None and report["best_score"] is not None
    assert report["verdict"] in (None, "accepted", "rejected")  # None: nothing beat the start
    with Lab.open(lab) as opened:
        experiments = opened.store.query_as(Experiment)
        assert sorted(e.id for e in experiments) == sorted(report["experiments"])
        assert all(e.state is ExperimentState.SUCCEEDED for e in experiments)
        assert all(e.created_by == "policy-1" for e in experiments)
        jobs = [j for j in opened.store.query_as(Job) if j.actor == "policy-1"]
        assert len(jobs) == 8 and all(j.status is JobStatus.SUCCEEDED for j in jobs)
        verified = verify_store(opened.store)
        assert verified.ok, verified.problems
