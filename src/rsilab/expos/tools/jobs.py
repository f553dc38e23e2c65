"""Job tools: run train, dev-eval and fold-eval jobs in the sandbox, follow them, compare
their per-sample scores.

``run_job`` runs the caller's workspace (a harness copy) as recorded jobs through the lab's
executor: ``train`` on the data the setting allows (written afresh into ``data-in/``, never
through a link the agent planted) with the model written to ``runs/<job-id>/``; ``dev_eval``
runs predict on the dev tier of every benchmark and scores it with the task's scorers, where
the setting returns dev scores at all; ``fold_eval`` cross-validates on the train tier in
every setting (see :mod:`._foldwork`). A model passed in must be one a recorded job produced.

Write path: unlike the other tools, whose writes are staged and committed with the call's
event, the records a job writes (its :class:`~rsilab.records.Job` as it starts and ends, dev
and fold :class:`~rsilab.records.Evaluation` records, the experiment's synced resources, logs and
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

from rsilab.controller.jobs import commit_job, executor_name
from rsilab.errors import ToolError
from rsilab.expos.context import ToolEnv
from rsilab.expos.guards import GuardRefusal
from rsilab.expos.registry import Category
from rsilab.expos.tools import _foldwork as foldwork
from rsilab.expos.tools import _jobargs as args
from rsilab.expos.tools import _jobrecords as jobrec
from rsilab.expos.tools import _jobwork as work
from rsilab.expos.tools._base import Name, RecordId, WorkspacePath, require, tool
from rsilab.expos.tools._folds import DEFAULT_FOLDS, MAX_FOLDS, MIN_FOLDS
from rsilab.expos.tools.execution import _open_experiment
from rsilab.records import (
    DataTier,
    Evaluation,
    Experiment,
    FlagStage,
    Job,
    JobStatus,
    utc_now,
)

MAX_TAIL_BYTES = 65536
CANCEL_WAIT_S = 5.0
"""How long cancel_job waits for a killed job's record to say how it ended."""

Seed = Annotated[int, Field(ge=0, le=2**31 - 1)]
TailBytes = Annotated[int, Field(ge=1, le=MAX_TAIL_BYTES)]
FoldCount = Annotated[int, Field(ge=MIN_FOLDS, le=MAX_FOLDS)]


@tool(Category.EXECUTION)
def run_job(
    env: ToolEnv,
    experiment_id: RecordId,
    kind: Literal["train", "dev_eval", "fold_eval"],
    seed: Seed = 0,
    model: WorkspacePath | None = None,
    wait: bool = True,
    folds: FoldCount | None = None,
) -> dict[str, Any]:
    """Run the workspace's harness as sandboxed, recorded jobs of an open experiment.

    train: writes data-in/ afresh (train tier, dev tier with labels only where the setting
    gives them, and the experiment's datasets under data-in/extra/<name>) and trains into
    runs/<job-id>/model.<ext>.

    dev_eval (only in settings that return dev scores): runs predict on every benchmark's
    dev tier and returns the mean score per benchmark; the per-sample scores are stored as
    dev evaluations of the experiment.

    fold_eval (every setting): cross-validation on the train tier. Use it to judge a change
    where dev scores are not returned, or to check a dev gain on other data. Each
    benchmark's train tier is split into folds fixed by the seed; for each fold the harness
    trains from scratch on the other folds only (their train samples, dev inputs without
    labels, the experiment's datasets; never the held-out fold) and predicts the held-out
    fold, scored with the benchmark's scorer. Returns the out-of-fold mean score per
    benchmark with its sample count ('fold_scores'); the per-sample scores are stored as
    train-tier evaluations, so compare_eval_samples(tier='train') pairs two experiments
    (fold-evaluate both with the same seeds so they share folds). Costs a train and a
    predict job per fold.

    A failed or killed job is a normal result with its status and error text.

    Args:
        experiment_id: an open experiment of this campaign; the jobs' resources, logs and
            scores are added to it.
        kind: 'train', 'dev_eval' or 'fold_eval'.
        seed: the seed passed to the harness (0 to 2**31-1); for fold_eval it also fixes
            the folds.
        model: a model file a recorded train job wrote (its job_status 'model'), to start
            training from (train) or to predict with (dev_eval; required when the harness
            trains). Not for fold_eval, which trains every fold from scratch.
        wait: False returns the job id at once; follow it with job_status (fold_eval: the
            id of its last job, whose job_status shows 'fold_scores' once every fold is
            scored; job_ids lists all of them).
        folds: fold_eval only: the number of folds, 2 to 10 (default 3).
    """
    campaign = env.campaign(writable=True)
    exp = _open_experiment(env, experiment_id)
    services = env.services()
    task = services.task_of(campaign)
    if kind == "dev_eval":
        args.require_dev_feedback(task)
    workspace = args.workspace_of(env)
    manifest = args.manifest_of(workspace)
    args.check_arguments(kind, manifest, model, folds)
    stage = FlagStage.TRAINING if kind == "train" else FlagStage.INFERENCE
    model_sha = args.recorded_model(env, Path(model), stage) if model is not None else None
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
    if kind == "fold_eval":
        return _run_folds(env, plan, folds or DEFAULT_FOLDS, wait)
    run = work.plan_train(plan) if kind == "train" else work.plan_dev_eval(plan)
    jobrec.mark_running(env.store, exp, caller)
    if wait:
        return work.execute(run)
    # Written as queued first, so job_status finds it and cancel_job can stop it before it
    # starts (the run then fails its compare-and-swap to running and ends quietly).
    commit_job(env.store, run.job, actor=caller.actor, role=caller.role, action="job_queued")
    services.background(run.job.id, lambda: work.execute_in_background(run))
    return {**jobrec.job_view(run.job), "message": "queued; follow it with job_status"}


def _run_folds(env: ToolEnv, plan: work.Plan, k: int, wait: bool) -> dict[str, Any]:
    run = foldwork.plan_fold_eval(plan, k)
    jobrec.mark_running(env.store, plan.exp, plan.caller)
    if wait:
        return foldwork.execute(run)
    foldwork.queue(run)
    services = plan.services
    services.background(run.jobs[-1].id, lambda: foldwork.execute_in_background(run))
    return foldwork.queued_view(run)


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
        elif isinstance(future.result(), dict):
            # The scores of the call's work: a dev evaluation's, or a whole fold evaluation's
            # (remembered under its last job).
            for key in ("dev", "fold_scores"):
                if key in future.result():
                    out[key] = future.result()[key]
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
    latest dev and fold scores. Safe to call any number of times.

    Resources are summed over its finished jobs, their log blobs are added to its log
    artifacts, and each dev evaluation gives one controller-sourced dev metric (each fold
    evaluation one with split 'train').

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
    return {
        "experiment_id": exp.id,
        "state": str(shown.state),
        "updated": changed,
        "jobs": [
            {"job_id": j.id, "kind": str(j.kind), "status": str(j.status)}
            for j in jobrec.experiment_jobs(env.store, exp.id)
        ],
        "dev_scores": jobrec.latest_means(jobrec.dev_evaluations(env.store, exp.id)),
        "fold_scores": jobrec.latest_means(jobrec.fold_evaluations(env.store, exp.id)),
        "resources": shown.resources.model_dump(mode="json"),
        "log_artifacts": len(shown.log_artifacts),
    }


@tool(Category.EXECUTION)
def compare_eval_samples(
    env: ToolEnv,
    experiment_a: RecordId,
    experiment_b: RecordId,
    benchmark: Name | None = None,
    tier: Literal["dev", "train"] = "dev",
) -> dict[str, Any]:
    """Compare two experiments' per-sample scores, paired by sample id.

    For each benchmark both were evaluated on: the paired difference a - b with its 95%
    interval (rows are the experiments' evaluations), how many samples each wins, and the
    samples that differ most. tier 'dev' compares dev scores (only in settings that return
    them); tier 'train' compares the out-of-fold train-tier scores of run_job fold_eval (every
    setting; fold-evaluate both with the same seeds so their folds match).

    Args:
        experiment_a: the experiment compared (a).
        experiment_b: the one it is compared with (b).
        benchmark: only this benchmark (default: every one both have).
        tier: 'dev' (dev evaluations) or 'train' (fold evaluations).
    """
    services = env.services()
    task = services.task_of(env.campaign())
    if tier == "dev":
        args.require_dev_feedback(task)
    scored = DataTier(tier)
    a = env.read(experiment_a, Experiment, field_name="experiment_a")
    b = env.read(experiment_b, Experiment, field_name="experiment_b")
    evals_a = _readable_evaluations(env, a.id, scored, "experiment_a")
    evals_b = _readable_evaluations(env, b.id, scored, "experiment_b")
    what = _EVALUATED[scored]
    names = sorted({e.benchmark for e in evals_a} & {e.benchmark for e in evals_b})
    if benchmark is not None:
        require(
            benchmark in names,
            "not_found",
            f"both experiments need a {what} evaluation on {benchmark!r}; they share: "
            f"{', '.join(names) or 'none'}",
            "benchmark",
        )
        names = [benchmark]
    require(bool(names), "not_found", f"the experiments share no {what}-evaluated benchmark")
    return {
        "experiment_a": a.id,
        "experiment_b": b.id,
        "tier": tier,
        "benchmarks": [
            jobrec.compare(
                name,
                [e for e in evals_a if e.benchmark == name],
                [e for e in evals_b if e.benchmark == name],
            )
            for name in names
        ],
    }


_EVALUATED = {DataTier.DEV: "dev", DataTier.TRAIN: "fold"}
"""How the tools name the evaluations of each tier an agent can have scored."""


def _readable_evaluations(
    env: ToolEnv, experiment_id: str, tier: DataTier, field: str
) -> list[Evaluation]:
    found = [
        e for e in jobrec.tier_evaluations(env.store, experiment_id, tier) if _readable(env, e)
    ]
    if not found:
        what = _EVALUATED[tier]
        raise ToolError(
            "not_found",
            f"experiment {experiment_id} has no {what} evaluation yet; run run_job with "
            f"kind='{what}_eval' on it first",
            field=field,
        )
    return found


def _readable(env: ToolEnv, record: Evaluation) -> bool:
    try:
        env.check_readable(record)
    except GuardRefusal:
        return False
    return True
