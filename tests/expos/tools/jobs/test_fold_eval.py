"""run_job(kind="fold_eval"): cross-validation on the train tier, in every setting, end to end
on the synthetic task with a real lab and a LocalExecutor (process sandbox)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rsilab.expos.services import LabServices
from rsilab.expos.tools.jobs._foldwork import discard
from rsilab.records import (
    Campaign,
    DataTier,
    Evaluation,
    Experiment,
    Job,
    JobKind,
    JobStatus,
    MetricSource,
)
from rsilab.store import verify_store
from rsilab.tasks import Setting, Task, get_task
from tests.expos.tools.jobs.test_jobs import SLEEPER, Door, wait_until

PROBE_TRAIN = """
import argparse, json, pathlib
parser = argparse.ArgumentParser()
for flag in ("--data", "--model-in", "--model-out", "--seed", "--config"):
    parser.add_argument(flag)
args = parser.parse_args()
data = pathlib.Path(args.data)
rows = [json.loads(line) for line in (data / "train.jsonl").read_text().splitlines()]
dev = [json.loads(line) for line in (data / "dev.jsonl").read_text().splitlines()]
model = {
    "quality": {"quality": 0.6, "robustness": 0.8},
    "seen": [row["id"] for row in rows],
    "files": sorted(str(p.relative_to(data)) for p in data.rglob("*")),
    "dev_labels": sum(1 for row in dev if row.get("target") is not None),
    "dev_rows": len(dev),
}
pathlib.Path(args.model_out).write_text(json.dumps(model))
"""

ECHO_PREDICT = """
import json, sys
for line in sys.stdin:
    item = json.loads(line)
    print(json.dumps({"id": item["id"], "output": item["input"]["x"]}))
"""


class _OpenGeneral(LabServices):
    """Services that see the synthetic task in the open-general setting."""

    def task_of(self, campaign: Campaign) -> Task:
        return get_task("synthetic").model_copy(update={"setting": Setting.OPEN_GENERAL})


@pytest.fixture
def guided(tmp_path: Path) -> Iterator[Door]:
    made = Door(tmp_path)
    yield made
    made.close()


@pytest.fixture
def open_general(tmp_path: Path) -> Iterator[Door]:
    made = Door(tmp_path, _OpenGeneral)
    yield made
    made.close()


def fold_eval(door: Door, exp: str, **args: Any) -> dict[str, Any]:
    return door.ok("run_job", experiment_id=exp, kind="fold_eval", **args)


def tier_ids(door: Door, tier: DataTier) -> set[str]:
    task = door.services.task_of(door.campaign)
    splits = door.services.controller(task).evaluator.splits
    return {s.id for bench in splits.values() for s in bench[tier]}


def held_out_ids(door: Door, job_id: str) -> list[str]:
    """The ids a fold-eval job answered, read from its stored stdout."""
    job = door.lab.store.get_as(job_id, Job)
    assert job.stdout_sha256 is not None
    lines = door.lab.artifacts.read_bytes(job.stdout_sha256).decode().splitlines()
    return [json.loads(line)["id"] for line in lines]


def test_fold_eval_in_benchmark_guided_scores_every_train_sample_once(guided: Door) -> None:
    door = guided
    exp = door.experiment()
    out = fold_eval(door, exp, seed=3)
    assert out["status"] == "succeeded" and out["error"] == "" and out["folds"] == 3, out
    scores = out["fold_scores"]
    assert set(scores["scores"]) == {"quality", "robustness"}
    assert scores["samples"] == {"quality": 200, "robustness": 200}
    assert all(0.2 < v < 0.95 for v in scores["scores"].values())
    kinds = [(j["kind"], j["fold"]) for j in out["jobs"]]
    assert kinds == [(kind, f"{i}/3") for i in (1, 2, 3) for kind in ("fold-train", "fold-eval")]
    assert out["job_id"] == out["jobs"][-1]["job_id"]

    train_ids = tier_ids(door, DataTier.TRAIN)
    for bench, evaluation_id in scores["evaluation_ids"].items():
        evaluation = door.lab.store.get_as(evaluation_id, Evaluation)
        assert evaluation.tier is DataTier.TRAIN and evaluation.subject_id == exp
        ids = [s.sample_id for s in evaluation.samples]
        assert len(ids) == len(set(ids)) == 200 and set(ids) <= train_ids
        assert {s.epoch for s in evaluation.samples} == {0}
        assert evaluation.aggregates["avg@1"].value == pytest.approx(scores["scores"][bench])
    assert not door.lab.store.query_as(Evaluation, fields={"tier": DataTier.DEV.value})

    jobs = [door.lab.store.get_as(j["job_id"], Job) for j in out["jobs"]]
    for train, predict in zip(jobs[::2], jobs[1::2], strict=True):
        assert set(train.inputs.data_sha256) == {"train.jsonl", "dev.jsonl"}
        assert predict.inputs.model_in_sha256 == train.model_out_sha256 is not None
        assert not (door.workspace / "runs" / train.id / "data-in").exists()
    assert not (door.workspace / "data-in").exists()  # the workspace's data-in/ is not used

    record = door.lab.store.get_as(exp, Experiment)
    assert record.resources.wall_s == pytest.approx(sum(j.resources.wall_s for j in jobs))
    controller = [m for m in record.metrics if m.source is MetricSource.CONTROLLER]
    assert [(m.name, m.split) for m in controller] == [
        ("quality", "train"),
        ("robustness", "train"),
    ]
    synced = door.ok("state_sync_results", experiment_id=exp)
    assert synced["updated"] is False and synced["dev_scores"] == {}
    assert synced["fold_scores"]["quality"]["mean"] == scores["scores"]["quality"]
    report = verify_store(door.lab.store, artifacts=door.lab.artifacts)
    assert report.ok, report.problems


def test_open_general_folds_hold_out_what_their_train_job_never_saw(open_general: Door) -> None:
    door = open_general
    (door.workspace / "train.py").write_text(PROBE_TRAIN)
    exp = door.experiment()
    out = fold_eval(door, exp, seed=5, folds=4)
    assert out["status"] == "succeeded" and out["folds"] == 4, out
    train_ids, dev_ids = tier_ids(door, DataTier.TRAIN), tier_ids(door, DataTier.DEV)
    private = tier_ids(door, DataTier.ACCEPT) | tier_ids(door, DataTier.FINAL)
    held: list[set[str]] = []
    for train, predict in zip(out["jobs"][::2], out["jobs"][1::2], strict=True):
        model = json.loads((door.workspace / "runs" / train["job_id"] / "model.json").read_text())
        seen, answered = set(model["seen"]), held_out_ids(door, predict["job_id"])
        assert model["files"] == ["dev.jsonl", "train.jsonl"]  # no dev labels, no extras
        assert model["dev_rows"] == len(dev_ids) and model["dev_labels"] == 0
        assert not seen & set(answered) and seen | set(answered) == train_ids
        assert not (seen | set(answered)) & private
        held.append(set(answered))
    assert sorted(len(h) for h in held) == [100, 100, 100, 100]  # 2 x 200 samples in 4 folds
    assert set.union(*held) == train_ids and sum(len(h) for h in held) == len(train_ids)

    # The same seed deals the same folds: two experiments' fold scores pair sample by sample.
    (door.workspace / "train.py").write_text(
        (get_task("synthetic").harness / "train.py").read_text()
    )
    other = door.experiment("the original train.py")
    again = fold_eval(door, other, seed=5, folds=4)
    assert [set(held_out_ids(door, j["job_id"])) for j in again["jobs"][1::2]] == held
    pair = {"experiment_a": other, "experiment_b": exp}
    compared = door.ok("compare_eval_samples", **pair, tier="train")
    quality = compared["benchmarks"][0]
    assert compared["tier"] == "train" and quality["samples"] == 200
    assert "fold evaluation" in quality["note"]
    door.refused("compare_eval_samples", "guard_refused", **pair)  # dev: not in this setting
    for evaluation in door.lab.store.query_as(Evaluation):
        assert {s.sample_id for s in evaluation.samples} <= train_ids

    trained = door.train(exp)
    error = door.refused(
        "run_job", "guard_refused", experiment_id=exp, kind="dev_eval", model=trained["model"]
    )
    assert "kind='fold_eval'" in error.message


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"kind": "fold_eval", "folds": 1}, "folds"),
        ({"kind": "fold_eval", "folds": 11}, "folds"),
        ({"kind": "cross_val"}, "kind"),
        ({"kind": "train", "folds": 3}, "folds"),
        ({"kind": "fold_eval", "model": "config.json"}, "model"),
    ],
)
def test_bad_fold_arguments_are_clear_tool_errors(
    guided: Door, args: dict[str, Any], field: str
) -> None:
    exp = guided.experiment()
    error = guided.refused("run_job", "invalid_arguments", experiment_id=exp, **args)
    assert error.field == field, error
    assert not guided.lab.store.query_as(Job)


def test_wait_false_follows_the_last_job(guided: Door) -> None:
    door = guided
    exp = door.experiment()
    started = fold_eval(door, exp, wait=False, folds=2)
    assert started["status"] == "queued" and len(started["job_ids"]) == 4
    assert started["job_id"] == started["job_ids"][-1]
    queued = [door.lab.store.get_as(i, Job) for i in started["job_ids"]]
    assert [j.kind for j in queued] == [JobKind.FOLD_TRAIN, JobKind.FOLD_EVAL] * 2
    wait_until(lambda: "fold_scores" in door.ok("job_status", job_id=started["job_id"]))
    status = door.ok("job_status", job_id=started["job_id"])
    assert status["status"] == "succeeded" and status["kind"] == "fold-eval"
    assert status["fold_scores"]["samples"] == {"quality": 200, "robustness": 200}
    statuses = {door.lab.store.get_as(i, Job).status for i in started["job_ids"]}
    assert statuses == {JobStatus.SUCCEEDED}


def test_a_failing_fold_ends_the_evaluation_and_closes_the_queued_jobs(guided: Door) -> None:
    door = guided
    (door.workspace / "train.py").write_text("raise SystemExit('no data for you')\n")
    exp = door.experiment()
    failed = fold_eval(door, exp)
    assert failed["status"] == "failed" and len(failed["jobs"]) == 1
    assert "fold 1/3's train job" in failed["error"] and "no data for you" in failed["error"]
    assert "fold_scores" not in failed

    started = fold_eval(door, exp, wait=False)
    wait_until(lambda: door.lab.store.get_as(started["job_id"], Job).is_finished())
    jobs = [door.lab.store.get_as(i, Job) for i in started["job_ids"]]
    assert [j.status for j in jobs] == [JobStatus.FAILED] * 6
    assert all(j.error.startswith("not run: fold 1/3's train job") for j in jobs[1:])
    assert not door.lab.store.query_as(Evaluation)
    runs = door.workspace / "runs"
    assert not [p for p in runs.rglob("data-in")]  # no fold's data is left behind


def test_cancelling_a_fold_job_cancels_the_rest(guided: Door) -> None:
    door = guided
    (door.workspace / "train.py").write_text(SLEEPER)
    started = fold_eval(door, door.experiment(), wait=False, folds=2)
    wait_until(lambda: (door.workspace / "started").exists())
    first = started["job_ids"][0]
    assert door.ok("cancel_job", job_id=first)["status"] == "cancelled"
    wait_until(lambda: door.lab.store.get_as(started["job_id"], Job).is_finished())
    jobs = [door.lab.store.get_as(i, Job) for i in started["job_ids"]]
    assert [j.status for j in jobs] == [JobStatus.CANCELLED] * 4
    assert jobs[0].kill_reason == "cancelled"
    assert all(j.error.startswith(f"not run: fold 1/2's train job {first}") for j in jobs[1:])


def test_a_harness_without_train_is_scored_on_the_whole_train_tier(open_general: Door) -> None:
    door = open_general
    (door.workspace / "harness.toml").write_text(
        '[harness]\npredict = "python echo.py"\nmodel = "none"\n'
    )
    (door.workspace / "echo.py").write_text(ECHO_PREDICT)
    out = fold_eval(door, door.experiment())
    assert out["status"] == "succeeded" and out["folds"] == 1, out
    assert [(j["kind"], j["fold"]) for j in out["jobs"]] == [("fold-eval", None)]
    assert out["fold_scores"]["scores"] == {"quality": 1.0, "robustness": 1.0}
    assert out["fold_scores"]["samples"] == {"quality": 200, "robustness": 200}


def test_a_fold_folder_swapped_for_a_link_is_not_followed(tmp_path: Path) -> None:
    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    (outside / "data-in").mkdir(parents=True)
    (outside / "data-in" / "keep.txt").write_text("mine")
    (workspace / "runs").mkdir(parents=True)
    (workspace / "runs" / "job-1").symlink_to(outside)
    discard(workspace, workspace / "runs" / "job-1" / "data-in")
    assert (outside / "data-in" / "keep.txt").read_text() == "mine"
    (workspace / "runs" / "job-2").mkdir()
    (workspace / "runs" / "job-2" / "data-in").symlink_to(outside / "data-in")
    discard(workspace, workspace / "runs" / "job-2" / "data-in")
    assert not (workspace / "runs" / "job-2" / "data-in").exists()
    assert (outside / "data-in" / "keep.txt").is_file()
