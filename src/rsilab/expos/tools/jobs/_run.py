"""``run_job``: run train, dev-eval and fold-eval jobs of an experiment in the sandbox.

``run_job`` runs the caller's workspace (a harness copy) as recorded jobs through the lab's
executor: ``train`` on the data the setting allows (written afresh into ``data-in/``, never
through a link the agent planted) with the model written to ``runs/<job-id>/``; ``dev_eval``
runs predict on the dev tier of every benchmark and scores it with the task's scorers, where
the setting returns dev scores at all; ``fold_eval`` cross-validates on the train tier in
every setting (see :mod:`._foldwork`). A model passed in must be one a recorded job produced.

Write path: unlike the other tools, whose writes are staged and committed with the call's
event, the records a job writes (its :class:`~rsilab.records.Job` as it is queued, starts and
ends, dev and fold :class:`~rsilab.records.Evaluation` records, the experiment as it starts
and is synced with its jobs' resources, logs and controller metrics) are written by the
controller's :class:`~rsilab.controller.jobs.JobRecorder`, each with its own ledger event, as
they happen. A job started with ``wait=False`` outlives the call that started it, and a
finished job must stay recorded even when the call's own event cannot be written; so a call
that fails after its job ran still leaves the job's records behind. ``state_sync_results``
recomputes an experiment's view from those records and can always repair it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

from rsilab.expos.context import ToolEnv
from rsilab.expos.registry import Category
from rsilab.expos.tools._base import RecordId, WorkspacePath, tool
from rsilab.expos.tools.execution import _open_experiment
from rsilab.expos.tools.jobs import _args as args
from rsilab.expos.tools.jobs import _foldwork as foldwork
from rsilab.expos.tools.jobs import _records as jobrec
from rsilab.expos.tools.jobs import _work as work
from rsilab.expos.tools.jobs._folds import DEFAULT_FOLDS, MAX_FOLDS, MIN_FOLDS
from rsilab.records import FlagStage

Seed = Annotated[int, Field(ge=0, le=2**31 - 1)]
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
    caller.recorder(env.store).experiment_started(exp)
    if wait:
        return work.execute(run)
    # Written as queued first, so job_status finds it and cancel_job can stop it before it
    # starts (the run then fails its compare-and-swap to running and ends quietly).
    caller.recorder(env.store).queued(run.job)
    services.background(run.job.id, lambda: work.execute_in_background(run))
    return {**jobrec.job_view(run.job), "message": "queued; follow it with job_status"}


def _run_folds(env: ToolEnv, plan: work.Plan, k: int, wait: bool) -> dict[str, Any]:
    run = foldwork.plan_fold_eval(plan, k)
    plan.caller.recorder(env.store).experiment_started(plan.exp)
    if wait:
        return foldwork.execute(run)
    foldwork.queue(run)
    services = plan.services
    services.background(run.jobs[-1].id, lambda: foldwork.execute_in_background(run))
    return foldwork.queued_view(run)
