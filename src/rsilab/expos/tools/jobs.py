"""Job tools: run train and dev-eval jobs in the sandbox, follow them, compare dev scores.

``run_job`` runs the caller's workspace (a harness copy) as a recorded job through the lab's
executor: ``train`` on the data the setting allows (written afresh into ``data-in/``, never
through a link the agent planted) with the model written to ``runs/<job-id>/``; ``dev_eval``
runs predict on the dev tier of every benchmark and scores it with the task's scorers, where
the setting returns dev scores at all. A model passed in must be one a recorded job produced.

Write path: unlike the other tools, whose writes are staged and committed with the call's
event, the records a job writes (its :class:`~rsilab.records.Job` as it starts and ends, dev
:class:`~rsilab.records.Evaluation` records, the experiment's synced resources, logs and
controller metrics) are committed directly, each with its own ledger event, as they happen. A
job started with ``wait=False`` outlives the call that started it, and a finished job must
stay recorded even when the call's own event cannot be written; so a call that fails after
its job ran still leaves the job's records behind. ``state_sync_results`` recomputes an
experiment's view from those records and can always repair it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

from rsilab.controller.jobs import commit_job, executor_name, model_produced_by_job
from rsilab.controller.settings import rules_for
from rsilab.errors import ToolError
from rsilab.expos.context import ToolEnv
from rsilab.expos.guards import GuardRefusal
from rsilab.expos.registry import Category
from rsilab.expos.tools import _jobrecords as jobrec
from rsilab.expos.tools import _jobwork as work
from rsilab.expos.tools._base import Name, RecordId, WorkspacePath, require, tool
from rsilab.expos.tools.execution import _open_experiment
from rsilab.records import (
    Evaluation,
    Experiment,
    FlagStage,
    Job,
    JobStatus,
    utc_now,
)
from rsilab.store.artifacts import hash_file
from rsilab.tasks import ManifestError, Task, load_manifest

MAX_TAIL_BYTES = 65536
CANCEL_WAIT_S = 5.0
"""How long cancel_job waits for a killed job's record to say how it ended."""

Seed = Annotated[int, Field(ge=0, le=2**31 - 1)]
TailBytes = Annotated[int, Field(ge=1, le=MAX_TAIL_BYTES)]


def _workspace(env: ToolEnv) -> Path:
    if env.call.workspace is None or not Path(env.call.workspace).is_dir():
        raise ToolError(
            "no_workspace",
            "this call has no workspace folder; jobs run in the caller's workspace",
            expected="a workspace folder in the call context (prepare_workspace fills it)",
        )
    return Path(env.call.workspace).resolve()


def _require_dev_feedback(task: Task) -> None:
    if not rules_for(task.setting).dev_scores_returned:
        raise GuardRefusal(
            rule="dev_feedback_not_allowed",
            stage=FlagStage.ACCESS,
            message=f"the {task.setting.value} setting gives no benchmark feedback, so dev "
            "scores are not returned; validate your changes on folds of the train tier "
            "(data-in/train.jsonl) instead",
        )


def _recorded_model(env: ToolEnv, path: Path, stage: FlagStage) -> str:
    """The sha256 of a model a recorded job produced; a GuardRefusal for any other file."""
    require(path.is_file(), "invalid_arguments", "model must name a file", "model")
    sha = hash_file(path)
    if model_produced_by_job(env.store, sha) is None:
        raise GuardRefusal(
            rule="unrecorded_weights",
            stage=stage,
            message=f"{path.name} (sha256 {sha[:12]}) was not produced by a recorded job; "
            "only a model that a succeeded train job wrote may be used (its job_status "
            "names it, e.g. runs/<job-id>/model...)",
            field="model",
        )
    if not env.artifacts.has(sha):  # jobs give the stored bytes, never the workspace file
        raise ToolError(
            "tool_failed",
            f"the recorded model {sha[:12]} is missing from the lab's artifact store; the lab "
            "is damaged, ask a person to run `rsilab verify`",
            field="model",
        )
    return sha


@tool(Category.EXECUTION)
def run_job(
    env: ToolEnv,
    experiment_id: RecordId,
    kind: Literal["train", "dev_eval"],
    seed: Seed = 0,
    model: WorkspacePath | None = None,
    wait: bool = True,
) -> dict[str, Any]:
    """Run the workspace's harness as a sandboxed, recorded job of an open experiment.

    train: writes data-in/ afresh (train tier, dev tier with labels only where the setting
    gives them, and the experiment's datasets under data-in/extra/<name>) and trains into
    runs/<job-id>/model.<ext>. dev_eval (only in settings that return dev scores): runs
    predict on every benchmark's dev tier and returns the mean score per benchmark; the
    per-sample scores are stored as dev evaluations of the experiment. A failed or killed job
    is a normal result with its status and error text.

    Args:
        experiment_id: an open experiment of this campaign; the job's resources, logs and
            dev scores are added to it.
        kind: 'train' or 'dev_eval'.
        seed: the seed passed to the harness (0 to 2**31-1).
        model: a model file a recorded train job wrote (its job_status 'model'), to start
            training from (train) or to predict with (dev_eval; required when the harness
            trains).
        wait: False returns the job id at once; follow it with job_status.
    """
    campaign = env.campaign(writable=True)
    exp = _open_experiment(env, experiment_id)
    services = env.services()
    task = services.task_of(campaign)
    if kind == "dev_eval":
        _require_dev_feedback(task)
    workspace = _workspace(env)
    try:
        manifest = load_manifest(workspace)
    except ManifestError as exc:
        raise ToolError(
            "tool_failed",
            f"the workspace is not a harness: {exc}",
            expected="a harness.toml at the workspace root (prepare_workspace makes one)",
        ) from None
    if kind == "train":
        require(manifest.trains, "invalid_arguments", "this harness has no train step", "kind")
    elif manifest.trains:
        require(
            model is not None,
            "invalid_arguments",
            "this harness trains: pass the model a train job wrote (job_status 'model')",
            "model",
        )
    stage = FlagStage.TRAINING if kind == "train" else FlagStage.INFERENCE
    model_sha = _recorded_model(env, Path(model), stage) if model is not None else None
    caller = jobrec.Caller(env.call.actor, env.call.role)
    plan = work.Plan(
        services=services,
        store=env.store,
        artifacts=env.artifacts,
        caller=caller,
        exp=exp,
        task=task,
        workspace=workspace,
        manifest=manifest,
        seed=seed,
        model_sha256=model_sha,
    )
    run = work.plan_train(plan) if kind == "train" else work.plan_dev_eval(plan)
    jobrec.mark_running(env.store, exp, caller)
    if wait:
        return work.execute(run)
    # Written as queued first, so job_status finds it and cancel_job can stop it before it
    # starts (the run then fails its compare-and-swap to running and ends quietly).
    commit_job(env.store, run.job, actor=caller.actor, role=caller.role, action="job_queued")
    services.background(run.job.id, lambda: work.execute_in_background(run))
    return {**jobrec.job_view(run.job), "message": "queued; follow it with job_status"}


@tool(Category.EXECUTION)
def job_status(env: ToolEnv, job_id: RecordId) -> dict[str, Any]:
    """A job's state, kind, timings, resources, model path and error text.

    Args:
        job_id: a job of this campaign (run_job's job_id).
    """
    job = env.read(job_id, Job, field_name="job_id")
    out = jobrec.job_view(job)
    services = env.lab_services
    future = services.future(job.id) if services is not None else None
    if future is not None and future.done() and not future.cancelled():
        problem = future.exception()
        if problem is not None:
            out["error"] = out["error"] or f"the job's bookkeeping failed: {problem}"
        elif isinstance(future.result(), dict) and "dev" in future.result():
            out["dev"] = future.result()["dev"]
    return out


@tool(Category.EXECUTION)
def job_logs(
    env: ToolEnv,
    job_id: RecordId,
    stream: Literal["stdout", "stderr"] = "stderr",
    tail_bytes: TailBytes = 8000,
) -> dict[str, Any]:
    """The end of a finished job's stdout or stderr (logs are stored when a job ends).

    Args:
        job_id: a job of this campaign.
        stream: 'stdout' or 'stderr'.
        tail_bytes: how many bytes from the end (at most 65536).
    """
    job = env.read(job_id, Job, field_name="job_id")
    sha = job.stdout_sha256 if stream == "stdout" else job.stderr_sha256
    if sha is None:
        return {
            "job_id": job.id,
            "stream": stream,
            "status": str(job.status),
            "available": False,
            "message": "no log yet: logs are stored when the job ends"
            if not job.is_finished()
            else "this job never ran, so it has no log",
        }
    require(
        env.artifacts.has(sha),
        "tool_failed",
        f"the log blob {sha[:12]} is missing from the lab; ask a person to run `rsilab verify`",
    )
    path = env.artifacts.blob_path(sha)
    size = path.stat().st_size
    start = max(0, size - tail_bytes)
    with path.open("rb") as handle:
        handle.seek(start)
        chunk = handle.read(tail_bytes)
    if start > 0:  # drop a character cut in half at the start
        cut = 0
        while cut < min(3, len(chunk)) and chunk[cut] & 0xC0 == 0x80:
            cut += 1
        chunk = chunk[cut:]
    return {
        "job_id": job.id,
        "stream": stream,
        "status": str(job.status),
        "available": True,
        "size": size,
        "truncated": start > 0,
        "text": chunk.decode("utf-8", "replace"),
    }


@tool(Category.EXECUTION)
def cancel_job(env: ToolEnv, job_id: RecordId) -> dict[str, Any]:
    """Cancel a queued or running job; a running job's whole process tree is killed.

    The job's record ends as 'cancelled'. Cancelling a finished job changes nothing; a
    queued job that starts during the call gives a 'conflict' error: call again to kill it.

    Args:
        job_id: a job of this campaign.
    """
    job = env.read(job_id, Job, field_name="job_id")
    require(not job.kind.is_private, "conflict", "controller jobs cannot be cancelled", "job_id")
    if job.status is JobStatus.QUEUED:
        # Staged: should the job start meanwhile, the write conflicts and the call says so.
        cancelled = env.stage(
            job.model_copy(
                update={
                    "status": JobStatus.CANCELLED,
                    "error": f"cancelled by {env.call.actor} before it started",
                    "finished_at": utc_now(),
                }
            )
        )
        return {**jobrec.job_view(cancelled), "cancelled": True}
    if job.is_finished():
        return {**jobrec.job_view(job), "cancelled": False, "message": "it had already ended"}
    services = env.services()  # only a running job needs the executor that runs it
    deadline = time.monotonic() + 2.0
    # The record says running a moment before the executor has the job: retry briefly.
    while not services.executor.cancel(executor_name(job)):
        job = env.store.get_as(job.id, Job)
        if job.is_finished():
            return {**jobrec.job_view(job), "cancelled": False, "message": "it had already ended"}
        if time.monotonic() > deadline:
            raise ToolError(
                "unavailable",
                f"job {job.id} is not running in this process (another rsilab process runs "
                "it, or it was interrupted); it cannot be cancelled from here",
                field="job_id",
            )
        time.sleep(0.05)
    final = _wait_finished(env, job.id, CANCEL_WAIT_S)
    return {**jobrec.job_view(final), "cancelled": final.status is JobStatus.CANCELLED}


def _wait_finished(env: ToolEnv, job_id: str, timeout_s: float) -> Job:
    deadline = time.monotonic() + timeout_s
    job = env.store.get_as(job_id, Job)
    while not job.is_finished() and time.monotonic() < deadline:
        time.sleep(0.05)
        job = env.store.get_as(job_id, Job)
    return job


@tool(Category.EXECUTION)
def state_sync_results(env: ToolEnv, experiment_id: RecordId) -> dict[str, Any]:
    """Bring an experiment's record up to date with its finished jobs; list its jobs and its
    latest dev scores. Safe to call any number of times.

    Resources are summed over its finished jobs, their log blobs are added to its log
    artifacts, and each dev evaluation gives one controller-sourced dev metric.

    Args:
        experiment_id: an experiment of this campaign (a finished one is listed, not changed).
    """
    campaign = env.campaign()
    exp = env.read(experiment_id, Experiment, field_name="experiment_id")
    update = jobrec.synced(env.store, exp)
    changed = update != exp and not exp.is_finished() and not campaign.is_finished()
    if changed:
        env.stage(update)
    shown = update if changed else exp
    latest: dict[str, Any] = {}
    for evaluation in jobrec.dev_evaluations(env.store, exp.id):
        latest[evaluation.benchmark] = {
            "mean": jobrec.mean_score(evaluation),
            "evaluation_id": evaluation.id,
            "at": evaluation.created_at,
        }
    return {
        "experiment_id": exp.id,
        "state": str(shown.state),
        "updated": changed,
        "jobs": [
            {"job_id": j.id, "kind": str(j.kind), "status": str(j.status)}
            for j in jobrec.experiment_jobs(env.store, exp.id)
        ],
        "dev_scores": latest,
        "resources": shown.resources.model_dump(mode="json"),
        "log_artifacts": len(shown.log_artifacts),
    }


@tool(Category.EXECUTION)
def compare_eval_samples(
    env: ToolEnv,
    experiment_a: RecordId,
    experiment_b: RecordId,
    benchmark: Name | None = None,
) -> dict[str, Any]:
    """Compare two experiments' per-sample dev scores, paired by sample id.

    For each benchmark both were dev-evaluated on: the paired difference a - b with its 95%
    interval (rows are the experiments' dev evaluations), how many samples each wins, and the
    samples that differ most. Only in settings that return dev scores.

    Args:
        experiment_a: the experiment compared (a).
        experiment_b: the one it is compared with (b).
        benchmark: only this benchmark (default: every one both have).
    """
    services = env.services()
    task = services.task_of(env.campaign())
    _require_dev_feedback(task)
    a = env.read(experiment_a, Experiment, field_name="experiment_a")
    b = env.read(experiment_b, Experiment, field_name="experiment_b")
    evals_a = _readable_dev(env, a.id, "experiment_a")
    evals_b = _readable_dev(env, b.id, "experiment_b")
    names = sorted({e.benchmark for e in evals_a} & {e.benchmark for e in evals_b})
    if benchmark is not None:
        require(
            benchmark in names,
            "not_found",
            f"both experiments need a dev evaluation on {benchmark!r}; they share: "
            f"{', '.join(names) or 'none'}",
            "benchmark",
        )
        names = [benchmark]
    require(bool(names), "not_found", "the experiments share no dev-evaluated benchmark")
    return {
        "experiment_a": a.id,
        "experiment_b": b.id,
        "benchmarks": [
            jobrec.compare(
                name,
                [e for e in evals_a if e.benchmark == name],
                [e for e in evals_b if e.benchmark == name],
            )
            for name in names
        ],
    }


def _readable_dev(env: ToolEnv, experiment_id: str, field: str) -> list[Evaluation]:
    found = [e for e in jobrec.dev_evaluations(env.store, experiment_id) if _readable(env, e)]
    if not found:
        raise ToolError(
            "not_found",
            f"experiment {experiment_id} has no dev evaluation yet; run run_job with "
            "kind='dev_eval' on it first",
            field=field,
        )
    return found


def _readable(env: ToolEnv, record: Evaluation) -> bool:
    try:
        env.check_readable(record)
    except GuardRefusal:
        return False
    return True
