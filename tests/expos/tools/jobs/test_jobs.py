"""run_job, job_status, job_logs, cancel_job, state_sync_results and compare_eval_samples,
end to end on the synthetic task with a real lab and a LocalExecutor (process sandbox)."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rsilab.executors.local import LocalExecutor
from rsilab.expos import CallContext, ExperimentOS, ToolResult, default_registry, open_campaign
from rsilab.expos.services import LabServices
from rsilab.records import (
    Campaign,
    DataTier,
    Evaluation,
    EventDraft,
    Experiment,
    ExperimentState,
    Job,
    JobInputs,
    JobKind,
    JobStatus,
    MetricSource,
    ProtocolFlag,
    Role,
)
from rsilab.sandbox import Limits, ProcessSandbox
from rsilab.store import Lab, verify_store
from rsilab.tasks import Setting, Task, get_task

SLEEPER = """
import pathlib, time
pathlib.Path('started').write_text('yes')
time.sleep(30)
"""


class _CapabilityDirected(LabServices):
    """Services that see the synthetic task in the capability-directed setting."""

    def task_of(self, campaign: Campaign) -> Task:
        return get_task("synthetic").model_copy(update={"setting": Setting.CAPABILITY_DIRECTED})


class Door:
    """An Experiment OS with job services over a lab and a synthetic harness workspace."""

    def __init__(self, root: Path, services_cls: type[LabServices] = LabServices) -> None:
        self.lab = Lab.init(root / "lab")
        self.executor = LocalExecutor(ProcessSandbox(), self.lab.artifacts, slots=2)
        self.services = services_cls(
            self.lab, self.executor, job_limits=Limits(wall_s=60.0, cpu_s=60.0)
        )
        self.expos = ExperimentOS(
            self.lab.store, self.lab.artifacts, default_registry(), self.services
        )
        self.campaign = open_campaign(self.lab.store, get_task("synthetic").ref())
        self.workspace = root / "ws"
        shutil.copytree(get_task("synthetic").harness, self.workspace)

    def ctx(self, role: Role = Role.WORKER, campaign: str | None = None) -> CallContext:
        return CallContext(f"{role}-1", role, campaign or self.campaign.id, self.workspace)

    def call(self, tool: str, ctx: CallContext | None = None, **args: Any) -> ToolResult:
        return self.expos.call(ctx or self.ctx(), tool, args)

    def ok(self, tool: str, ctx: CallContext | None = None, **args: Any) -> dict[str, Any]:
        result = self.call(tool, ctx, **args)
        assert result.ok, result.to_dict()
        assert result.value is not None
        return result.value

    def refused(self, tool: str, code: str, ctx: CallContext | None = None, **args: Any) -> Any:
        result = self.call(tool, ctx, **args)
        assert result.error is not None and result.error.code == code, result.to_dict()
        return result.error

    def experiment(self, description: str = "try it") -> str:
        main = self.ctx(Role.MAIN)
        direction = self.ok("create_direction", main, title="cfg", hypothesis="h")["id"]
        made = self.ok("create_experiment", direction_id=direction, description=description)
        return str(made["id"])

    def train(self, exp: str, **args: Any) -> dict[str, Any]:
        return self.ok("run_job", experiment_id=exp, kind="train", **args)

    def config(self, **changes: Any) -> None:
        path = self.workspace / "config.json"
        path.write_text(json.dumps(json.loads(path.read_text()) | changes))

    def flags(self, rule: str) -> list[ProtocolFlag]:
        return self.lab.store.query_as(ProtocolFlag, fields={"rule": rule})

    def close(self) -> None:
        self.services.close()
        self.executor.shutdown(cancel_pending=True)
        self.lab.close()


@pytest.fixture
def door(tmp_path: Path) -> Iterator[Door]:
    made = Door(tmp_path)
    yield made
    made.close()


@pytest.fixture
def guided_only(tmp_path: Path) -> Iterator[Door]:
    made = Door(tmp_path, _CapabilityDirected)
    yield made
    made.close()


def wait_until(condition: Callable[[], bool], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_train_then_dev_eval_end_to_end(door: Door) -> None:
    exp = door.experiment()
    trained = door.train(exp, seed=7)
    assert trained["status"] == "succeeded", trained
    model = trained["model"]
    assert model == f"runs/{trained['job_id']}/model.json"
    assert (door.workspace / model).is_file()
    dev_rows = (door.workspace / "data-in" / "dev.jsonl").read_text().splitlines()
    assert json.loads(dev_rows[0])["target"] is not None  # benchmark-guided: labels given
    job = door.lab.store.get_as(trained["job_id"], Job)
    assert set(job.inputs.data_sha256) == {"train.jsonl", "dev.jsonl"}
    assert job.inputs.seed == 7 and "--model-out" in job.inputs.argv

    first = door.ok("run_job", experiment_id=exp, kind="dev_eval", model=model)
    second = door.ok("run_job", experiment_id=exp, kind="dev_eval", model=model, seed=1)
    assert first["status"] == "succeeded", first
    scores = first["dev"]["scores"]
    assert set(scores) == {"quality", "robustness"}
    assert all(0.0 < v < 1.0 for v in scores.values())
    evaluation = door.lab.store.get_as(first["dev"]["evaluation_ids"]["quality"], Evaluation)
    assert evaluation.tier is DataTier.DEV and evaluation.subject_id == exp
    assert len(evaluation.samples) == 200 and {s.epoch for s in evaluation.samples} == {0}
    assert evaluation.aggregates["avg@1"].value == pytest.approx(scores["quality"])
    again = door.lab.store.get_as(second["dev"]["evaluation_ids"]["quality"], Evaluation)
    assert {s.epoch for s in again.samples} == {1}
    dev_job = door.lab.store.get_as(first["job_id"], Job)
    assert dev_job.inputs.model_in_sha256 == job.model_out_sha256

    record = door.lab.store.get_as(exp, Experiment)
    assert record.state is ExperimentState.RUNNING
    controller = [m for m in record.metrics if m.source is MetricSource.CONTROLLER]
    assert [(m.name, m.split, m.step) for m in controller] == [
        ("quality", "dev", 0),
        ("robustness", "dev", 0),
        ("quality", "dev", 1),
        ("robustness", "dev", 1),
    ]
    assert record.resources.wall_s > 0 and len(record.log_artifacts) >= 2
    synced = door.ok("state_sync_results", experiment_id=exp)
    assert synced["updated"] is False  # run_job already synced it; syncing again is a no-op
    assert [j["kind"] for j in synced["jobs"]] == ["train", "dev-eval", "dev-eval"]
    assert synced["dev_scores"]["quality"]["mean"] == second["dev"]["scores"]["quality"]
    report = verify_store(door.lab.store, artifacts=door.lab.artifacts)
    assert report.ok, report.problems


def test_state_sync_repairs_an_experiment_that_missed_its_update(door: Door) -> None:
    exp = door.experiment()
    door.train(exp)
    stale = door.lab.store.get_as(exp, Experiment)
    lost = {"log_artifacts": [], "resources": stale.resources.model_copy(update={"wall_s": 0.0})}
    reset = stale.model_copy(update=lost)
    door.lab.store.commit(EventDraft(actor="t", role="human", action="setup"), [reset])
    synced = door.ok("state_sync_results", experiment_id=exp)
    assert synced["updated"] is True and synced["log_artifacts"] >= 1
    assert door.ok("state_sync_results", experiment_id=exp)["updated"] is False


def test_dev_eval_is_refused_and_flagged_without_benchmark_feedback(guided_only: Door) -> None:
    door = guided_only
    exp = door.experiment()
    trained = door.train(exp)
    dev_rows = (door.workspace / "data-in" / "dev.jsonl").read_text().splitlines()
    assert dev_rows and all(json.loads(row).get("target") is None for row in dev_rows)
    train_rows = (door.workspace / "data-in" / "train.jsonl").read_text().splitlines()
    assert json.loads(train_rows[0])["target"] is not None
    error = door.refused(
        "run_job", "guard_refused", experiment_id=exp, kind="dev_eval", model=trained["model"]
    )
    assert "folds of the train tier" in error.message
    door.refused("compare_eval_samples", "guard_refused", experiment_a=exp, experiment_b=exp)
    assert len(door.flags("dev_feedback_not_allowed")) == 2


def test_a_model_the_agent_wrote_itself_is_refused(door: Door) -> None:
    exp = door.experiment()
    forged = door.workspace / "runs" / "mine" / "model.json"
    forged.parent.mkdir(parents=True)
    forged.write_text(json.dumps({"quality": {"quality": 1.0, "robustness": 1.0}}))
    error = door.refused(
        "run_job", "guard_refused", experiment_id=exp, kind="dev_eval", model=str(forged)
    )
    assert error.field == "model"
    door.refused(
        "run_job", "guard_refused", experiment_id=exp, kind="train", model="runs/mine/model.json"
    )
    assert [f.stage for f in door.flags("unrecorded_weights")] == ["inference", "training"]
    # A recorded model counts by its content, wherever it lies; the job gets the stored blob.
    trained = door.train(exp)
    shutil.copy(door.workspace / trained["model"], door.workspace / "copy.json")
    warm = door.train(exp, model="copy.json")
    assert warm["status"] == "succeeded"
    job = door.lab.store.get_as(warm["job_id"], Job)
    assert job.inputs.model_in_sha256 == trained["model_sha256"]
    assert (door.workspace / "runs" / warm["job_id"] / "model-in.json").is_file()


def test_planted_links_in_the_reserved_folders_are_not_followed(door: Door, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    (door.workspace / "data-in").symlink_to(outside)
    (door.workspace / "runs").symlink_to(outside)
    trained = door.train(door.experiment())
    assert trained["status"] == "succeeded", trained
    assert sorted(p.name for p in outside.iterdir()) == ["keep.txt"]
    for folder in ("data-in", "runs"):
        assert not (door.workspace / folder).is_symlink()


def test_a_crashing_train_is_a_failed_job_with_its_logs(door: Door) -> None:
    train = door.workspace / "train.py"
    train.write_text(
        "import sys\nprint('x' * 3000, file=sys.stderr)\n"
        "print('diverged at step 7', file=sys.stderr)\nraise SystemExit(3)\n"
    )
    exp = door.experiment()
    failed = door.train(exp)
    assert failed["status"] == "failed" and failed["exit_code"] == 3
    assert "exited with 3" in failed["error"] and "diverged at step 7" in failed["error"]
    assert failed["model"] is None
    logs = door.ok("job_logs", job_id=failed["job_id"], tail_bytes=100)
    assert logs["truncated"] is True and logs["text"].endswith("diverged at step 7\n")
    assert len(logs["text"].encode()) <= 100
    whole = door.ok("job_logs", job_id=failed["job_id"], stream="stdout")
    assert whole == {**whole, "available": True, "truncated": False, "text": ""}
    door.refused("job_logs", "invalid_arguments", job_id=failed["job_id"], tail_bytes=70_000)
    assert door.lab.store.get_as(exp, Experiment).resources.wall_s > 0


def test_wait_false_then_poll_job_status(door: Door) -> None:
    exp = door.experiment()
    started = door.train(exp, wait=False)
    assert started["status"] == "queued" and started["model"] is None
    wait_until(lambda: door.ok("job_status", job_id=started["job_id"])["status"] == "succeeded")
    status = door.ok("job_status", job_id=started["job_id"])
    assert status["model"] == f"runs/{started['job_id']}/model.json"
    assert status["resources"]["wall_s"] > 0 and status["finished_at"] is not None
    wait_until(lambda: door.lab.store.get_as(exp, Experiment).resources.wall_s > 0)
    for role in (Role.MAIN, Role.REVIEWER, Role.HUMAN):
        assert door.ok("job_status", door.ctx(role), job_id=started["job_id"])["kind"] == "train"


def test_cancel_a_running_job(door: Door) -> None:
    (door.workspace / "train.py").write_text(SLEEPER)
    exp = door.experiment()
    started = door.train(exp, wait=False)
    wait_until(lambda: (door.workspace / "started").exists())
    began = time.monotonic()
    cancelled = door.ok("cancel_job", job_id=started["job_id"])
    assert time.monotonic() - began < 3.0
    assert cancelled["cancelled"] is True and cancelled["status"] == "cancelled"
    job = door.lab.store.get_as(started["job_id"], Job)
    assert job.status is JobStatus.CANCELLED and job.kill_reason == "cancelled"
    assert "cancelled" in job.error
    again = door.ok("cancel_job", job_id=started["job_id"])
    assert again["cancelled"] is False


def test_cancel_a_queued_job(door: Door) -> None:
    exp = door.experiment()
    inputs = JobInputs(workspace_sha256="0" * 64, seed=0)
    queued = Job(campaign_id=door.campaign.id, kind=JobKind.TRAIN, inputs=inputs, experiment_id=exp)
    door.lab.store.commit(EventDraft(actor="t", role="human", action="setup"), [queued])
    cancelled = door.ok("cancel_job", job_id=queued.id)
    assert cancelled["cancelled"] is True
    assert door.lab.store.get_as(queued.id, Job).status is JobStatus.CANCELLED


def test_compare_eval_samples(door: Door) -> None:
    base = door.experiment("base")
    door.refused("compare_eval_samples", "not_found", experiment_a=base, experiment_b=base)
    for seed in (1, 2):
        model = door.train(base, seed=seed)["model"]
        door.ok("run_job", experiment_id=base, kind="dev_eval", model=model, seed=seed)
    door.config(width=64, epochs=32, optimizer="adam", lr=0.003)
    wide = door.experiment("wide")
    for seed in (1, 2):
        model = door.train(wide, seed=seed)["model"]
        door.ok("run_job", experiment_id=wide, kind="dev_eval", model=model, seed=seed)

    reviewer = door.ctx(Role.REVIEWER)
    out = door.ok("compare_eval_samples", reviewer, experiment_a=wide, experiment_b=base)
    assert [b["benchmark"] for b in out["benchmarks"]] == ["quality", "robustness"]
    quality = out["benchmarks"][0]
    assert quality["samples"] == 200 and quality["rows_a"] == quality["rows_b"] == 2
    diff = quality["difference"]
    assert diff["low"] <= diff["mean"] <= diff["high"] and diff["mean"] > 0.1
    assert diff["mean"] == pytest.approx(quality["mean_a"] - quality["mean_b"])
    assert quality["a_higher"] + quality["b_higher"] + quality["equal"] == 200
    largest = quality["largest_differences"]
    gaps = [abs(item["a"] - item["b"]) for item in largest]
    assert len(largest) == 10 and gaps == sorted(gaps, reverse=True)
    pair = {"experiment_a": wide, "experiment_b": base}
    only = door.ok("compare_eval_samples", **pair, benchmark="robustness")
    assert [b["benchmark"] for b in only["benchmarks"]] == ["robustness"]
    door.refused("compare_eval_samples", "not_found", **pair, benchmark="speed")


def test_jobs_of_other_campaigns_and_of_the_controller_are_not_readable(door: Door) -> None:
    job_id = door.train(door.experiment())["job_id"]
    other = open_campaign(door.lab.store, get_task("synthetic").ref())
    stranger = door.ctx(campaign=other.id)
    for tool in ("job_status", "job_logs", "cancel_job"):
        door.refused(tool, "guard_refused", stranger, job_id=job_id)
    private = Job(
        campaign_id=door.campaign.id,
        kind=JobKind.CONTROLLER_TRAIN,
        inputs=JobInputs(workspace_sha256="0" * 64, seed=1),
    )
    door.lab.store.commit(EventDraft(actor="t", role="human", action="setup"), [private])
    for role in (Role.WORKER, Role.REVIEWER, Role.MAIN):
        door.refused("job_status", "guard_refused", door.ctx(role), job_id=private.id)
    door.refused("job_logs", "guard_refused", job_id=private.id)
    human = door.ok("job_status", door.ctx(Role.HUMAN), job_id=private.id)
    assert human["kind"] == "controller-train"
    reviewer = door.ctx(Role.REVIEWER)
    door.refused("run_job", "permission_denied", reviewer, experiment_id=private.id, kind="train")


def test_without_services_or_a_harness_the_tools_say_so(door: Door, tmp_path: Path) -> None:
    exp = door.experiment()
    bare = ExperimentOS(door.lab.store, door.lab.artifacts, default_registry())
    result = bare.call(door.ctx(), "run_job", {"experiment_id": exp, "kind": "train"})
    assert result.error is not None and result.error.code == "unavailable"
    (door.workspace / "harness.toml").unlink()
    error = door.refused("run_job", "tool_failed", experiment_id=exp, kind="train")
    assert "not a harness" in error.message
    door.ok("finish_experiment", experiment_id=exp, status="succeeded")
    door.refused("run_job", "conflict", experiment_id=exp, kind="train")


def test_the_job_tools_are_listed_in_their_order() -> None:
    # The listing order is what agents see; the subpackage registers its modules in it.
    names = default_registry().names()
    start = names.index("run_job")
    assert names[start : start + 6] == [
        "run_job",
        "job_status",
        "job_logs",
        "cancel_job",
        "state_sync_results",
        "compare_eval_samples",
    ]


LINK_OUT = """
import os, sys
out = sys.argv[sys.argv.index("--model-out") + 1]
folder = os.path.dirname(out)
os.rename(folder, folder + ".moved")
os.symlink(VICTIM, folder)  # the host would read VICTIM/model.json as this job's model
"""


def test_a_model_reached_through_a_link_the_job_planted_is_not_read(
    door: Door, tmp_path: Path
) -> None:
    """A job that replaces its run folder by a link to a host folder holding a model.json
    does not get the host to store (and later hand back) that file."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "model.json").write_text('{"secret": "host file"}')
    train = door.workspace / "train.py"
    train.write_text(train.read_text() + LINK_OUT.replace("VICTIM", repr(str(victim))))
    exp = door.experiment()
    trained = door.ok("run_job", experiment_id=exp, kind="train", seed=3)
    assert trained["status"] == "failed", trained
    job = door.lab.store.get_as(trained["job_id"], Job)
    assert job.model_out_sha256 is None
    assert job.error is not None and "passes through a link" in job.error, job.error
    stored = door.lab.artifacts.root
    assert not any(
        p.is_file() and p.read_bytes() == b'{"secret": "host file"}' for p in stored.rglob("*")
    )
    assert (victim / "model.json").read_text() == '{"secret": "host file"}'
