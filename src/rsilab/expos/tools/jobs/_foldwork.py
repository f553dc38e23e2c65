"""The mechanics behind ``run_job(kind="fold_eval")``: k-fold cross-validation on the train tier.

For each fold (see :mod:`._folds`), a ``fold-train`` job trains the workspace's harness from
scratch on the other folds, then a ``fold-eval`` job predicts the held-out fold's inputs with
the model it wrote (the stored blob, placed in the predict job's own folder). Once every fold
is scored with each benchmark's scorer, the per-sample scores are recorded as one train-tier
:class:`~rsilab.records.Evaluation` per benchmark of the experiment: each train sample scored
once, by a model that never saw it. A harness without a train step gets one predict job over
the whole train tier.

Keeping the held-out fold out of training: a fold's train job reads its own data folder,
``runs/<job-id>/data-in`` (written when the call is planned, deleted once that job ends), and
the workspace's ``data-in/`` (the whole train tier) and the other folds' data folders are in
its ``hidden`` paths, as they are for the predict jobs; a sandbox that can hide paths (bwrap)
enforces that, the process sandbox only notes it. Registered datasets are given to every fold
as to a train job: one derived from the train tier brings held-out samples back in.

The jobs run one after another; the first that does not succeed ends the evaluation, and no
scores are stored. Started with ``wait=False``, every job is written as queued at once, so
each can be followed or cancelled; jobs left unrun when it ends are closed as ``cancelled``
(when a job was cancelled) or ``failed``, with the reason.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rsilab.controller.jobs import data_hashes, finish_job, run_recorded_job
from rsilab.errors import ConflictError
from rsilab.expos.services import LabServices, snapshot_workspace
from rsilab.expos.tools.jobs._folds import Fold, make_folds, whole_train_tier, write_fold_data
from rsilab.expos.tools.jobs._records import (
    Caller,
    ScoredTiers,
    Subject,
    record_scores,
    score_tiers,
    sync_experiment,
    total,
)
from rsilab.expos.tools.jobs._work import (
    RUNS_DIR,
    Plan,
    job_folder,
    new_agent_job,
    predict_job_spec,
    recorded_argv,
    remove_planted,
    write_extras,
)
from rsilab.records import DataTier, Job, JobInputs, JobKind, JobStatus, new_id
from rsilab.sandbox import hand_over
from rsilab.sandbox.base import RunSpec
from rsilab.store.artifacts import ArtifactStore
from rsilab.store.base import Store
from rsilab.tasks import DATA_DIR, MODEL_SUFFIX, HarnessOutputError, Scored, Splits, train_spec

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FoldStep:
    """One fold's jobs: its train job (None when the harness does not train) with the data
    folder it reads, and its predict job with where the fold's model is placed for it."""

    fold: Fold
    train: Job | None
    train_spec: RunSpec | None
    data: Path | None
    predict: Job
    predict_spec: RunSpec
    model_in: Path | None


@dataclass
class FoldRun:
    """A planned fold evaluation; ``queued`` once its jobs are written as queued."""

    store: Store
    artifacts: ArtifactStore
    services: LabServices
    caller: Caller
    subject: Subject
    workspace: Path
    steps: tuple[FoldStep, ...]
    queued: bool = False
    ran: list[Job] = field(default_factory=list)

    @property
    def jobs(self) -> list[Job]:
        """Every planned job, in the order they run."""
        return [j for s in self.steps for j in (s.train, s.predict) if j is not None]


# --- planning -----------------------------------------------------------------------------


def plan_fold_eval(plan: Plan, k: int) -> FoldRun:
    """Plan the jobs of a ``k``-fold evaluation; writes each fold's data folder.

    Raises:
        ToolError: a benchmark has too few train samples, or the harness cannot predict.
    """
    splits = plan.services.controller(plan.task).evaluator.splits
    trains = plan.manifest.trains
    folds = (
        make_folds(plan.task, splits, k, plan.seed)
        if trains
        else [whole_train_tier(plan.task, splits)]
    )
    # A planted link there would make "hide data-in/" hide whatever it points to instead.
    if (plan.workspace / DATA_DIR).is_symlink():
        (plan.workspace / DATA_DIR).unlink()
    workspace_sha = snapshot_workspace(plan.artifacts, plan.workspace)
    train_ids = [new_id(Job.PREFIX) for _ in folds] if trains else []
    datas = tuple(job_folder(plan.workspace, i) / DATA_DIR for i in train_ids)
    steps = []
    try:
        for n, fold in enumerate(folds):
            train, spec, data = None, None, None
            if trains:
                data, others = datas[n], datas[:n] + datas[n + 1 :]
                train, spec = _plan_train(
                    plan, fold, splits, train_ids[n], data, workspace_sha, others
                )
            steps.append(_plan_predict(plan, fold, train, spec, data, workspace_sha, datas))
    except BaseException:  # no job will read them: leave no copy of the folds behind
        for data in datas:
            discard(plan.workspace, data)
        raise
    subject = Subject(plan.exp.campaign_id, plan.exp.id, plan.seed)
    return FoldRun(
        plan.store,
        plan.artifacts,
        plan.services,
        plan.caller,
        subject,
        plan.workspace,
        tuple(steps),
    )


def _plan_train(
    plan: Plan,
    fold: Fold,
    splits: Mapping[str, Splits],
    job_id: str,
    data: Path,
    workspace_sha: str,
    others: tuple[Path, ...],
) -> tuple[Job, RunSpec]:
    write_fold_data(data, plan.task, splits, fold)
    write_extras(plan.store, plan.artifacts, plan.exp, data)
    hand_over(plan.workspace, data)
    model_out = f"{RUNS_DIR}/{job_id}/model{MODEL_SUFFIX[plan.manifest.model]}"
    spec = train_spec(
        plan.manifest,
        plan.workspace,
        data=str(data.relative_to(plan.workspace)),
        model_out=model_out,
        seed=plan.seed,
        limits=plan.services.limits_for(plan.task),
    )
    hidden = (*plan.task.data_sources, plan.workspace / DATA_DIR, *others)
    spec = replace(spec, hidden=hidden)
    inputs = JobInputs(
        workspace_sha256=workspace_sha,
        data_sha256=data_hashes(data),
        config=plan.manifest.config,
        seed=plan.seed,
        argv=list(spec.argv),
    )
    job = new_agent_job(plan, job_id, JobKind.FOLD_TRAIN, inputs, model_out, fold.label)
    return job, spec


def _plan_predict(
    plan: Plan,
    fold: Fold,
    train: Job | None,
    train_spec_: RunSpec | None,
    data: Path | None,
    workspace_sha: str,
    datas: tuple[Path, ...],
) -> FoldStep:
    job_id = new_id(Job.PREFIX)
    model_in: Path | None = None
    if train is not None:
        suffix = MODEL_SUFFIX[plan.manifest.model]
        model_in = job_folder(plan.workspace, job_id) / f"model-in{suffix}"
    model = str(model_in.relative_to(plan.workspace)) if model_in is not None else None
    hidden = (plan.workspace / DATA_DIR, *datas)
    spec = predict_job_spec(plan, fold.held_out, model, "train", hidden)
    inputs = JobInputs(
        workspace_sha256=workspace_sha, seed=plan.seed, argv=recorded_argv(plan.task, spec)
    )
    label = fold.label if train is not None else None
    job = new_agent_job(plan, job_id, JobKind.FOLD_EVAL, inputs, None, label)
    return FoldStep(fold, train, train_spec_, data, job, spec, model_in)


def queue(run: FoldRun) -> None:
    """Write every planned job as queued (for ``wait=False``: each can be followed and
    cancelled before it starts)."""
    recorder = run.caller.recorder(run.store)
    for job in run.jobs:
        recorder.queued(job)
    run.queued = True


# --- running ------------------------------------------------------------------------------


class _Stop(Exception):
    """The evaluation ends early: ``reason`` says why, ``cancelled`` whether by a cancel."""

    def __init__(self, reason: str, cancelled: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.cancelled = cancelled


def execute(run: FoldRun) -> dict[str, Any]:
    """Run the planned jobs fold by fold, score the held-out folds, record the scores.

    A job that fails, is killed or is cancelled ends the evaluation as a normal result (its
    status and error text, no scores). Raises ``LabError`` when the lab cannot be written.
    """
    scored: dict[str, list[Scored]] = {}
    stop: _Stop | None = None
    try:
        for step in run.steps:
            for bench, results in _run_step(run, step):
                scored.setdefault(bench.name, []).extend(results)
    except _Stop as exc:
        stop = exc
    except Exception as exc:  # the lab's fault, not a job's: the queued jobs still say why
        stop = _Stop(f"the fold evaluation broke off: {exc}")
        raise
    finally:
        for step in run.steps:
            if step.data is not None:
                discard(run.workspace, step.data)
        if run.queued:
            _close_unrun(run, stop)
    out = _summary(run, stop)
    if stop is None:
        tiers = tuple((bench, tuple(scored[bench.name])) for bench, _ in run.steps[0].fold.held_out)
        detail = f"{len(run.steps)} folds, jobs {run.ran[0].id}..{run.ran[-1].id}"
        scores = record_scores(run.store, run.caller, run.subject, DataTier.TRAIN, tiers, detail)
        out["fold_scores"] = scores
        out["error"] = scores.get("error", "")
    sync_experiment(run.store, run.subject.experiment_id, run.caller)
    return out


def _run_step(run: FoldRun, step: FoldStep) -> ScoredTiers:
    """Run one fold's jobs and score its held-out samples; _Stop if any of it failed."""
    predict = step.predict
    if step.train is not None and step.train_spec is not None:
        trained = _run(run, step.train, step.train_spec)
        if step.data is not None:
            discard(run.workspace, step.data)
        assert trained.model_out_sha256 is not None and step.model_in is not None
        # The stored blob, not the workspace file: the bytes the train job was recorded with.
        _clear(step.model_in)
        run.artifacts.materialize(trained.model_out_sha256, step.model_in, "file")
        hand_over(run.workspace, step.model_in.parent)
        inputs = predict.inputs.model_copy(update={"model_in_sha256": trained.model_out_sha256})
        predict = predict.model_copy(update={"inputs": inputs})
    done = _run(run, predict, step.predict_spec)
    assert done.stdout_sha256 is not None  # a succeeded job has its logs
    try:
        return score_tiers(step.fold.held_out, run.artifacts.read_bytes(done.stdout_sha256))
    except HarnessOutputError as exc:
        raise _Stop(f"fold {step.fold.label}: predict broke the output contract: {exc}") from None


def discard(workspace: Path, data: Path) -> None:
    """Delete a fold's data folder (``runs/<job-id>/data-in``) unless a link now stands on
    its way: a job may have swapped a folder above it for a link out of the workspace, and
    that is left alone, never followed. ``data`` itself may be a link (removed, not followed).
    """
    here = workspace
    for part in data.relative_to(workspace).parts[:-1]:
        here = here / part
        if here.is_symlink() or not here.is_dir():
            return
    remove_planted(data)


def _clear(path: Path) -> None:
    """Make ``runs/<job-id>/`` a real folder again and ``path`` in it absent, so a link the
    agent planted since planning is not written through."""
    for folder in (path.parent.parent, path.parent):
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            folder.unlink()
        folder.mkdir(exist_ok=True)
    remove_planted(path)


def _run(run: FoldRun, job: Job, spec: RunSpec) -> Job:
    """Run one recorded job; _Stop unless it succeeded."""
    try:
        done, _ = run_recorded_job(
            run.store,
            run.artifacts,
            run.services.executor,
            job,
            spec,
            actor=run.caller.actor,
            role=run.caller.role,
        )
    except ConflictError:
        current = run.store.get_as(job.id, Job)
        if current.status is not JobStatus.CANCELLED:
            raise
        run.ran.append(current)
        raise _Stop(f"job {job.id} was cancelled before it started", cancelled=True) from None
    run.ran.append(done)
    if done.status is not JobStatus.SUCCEEDED:
        what = f"fold {job.fold}'s" if job.fold else "the"
        step = "train" if job.kind is JobKind.FOLD_TRAIN else "predict"
        raise _Stop(
            f"{what} {step} job {job.id} {done.status}: {done.error}",
            cancelled=done.status is JobStatus.CANCELLED,
        )
    return done


def _close_unrun(run: FoldRun, stop: _Stop | None) -> None:
    """Close the queued jobs that never ran, saying why."""
    ran = {j.id for j in run.ran}
    reason = stop.reason if stop is not None else "the fold evaluation ended before it"
    for job in run.jobs:
        if job.id in ran:
            continue
        current = run.store.get_as(job.id, Job)
        if current.is_finished():
            continue
        closed = finish_job(current, None, error=f"not run: {reason}")
        if stop is not None and stop.cancelled:
            closed = closed.model_copy(update={"status": JobStatus.CANCELLED})
        try:
            run.caller.recorder(run.store).finished(closed)
        except ConflictError:  # cancelled meanwhile: it is closed either way
            continue


def _summary(run: FoldRun, stop: _Stop | None) -> dict[str, Any]:
    last = run.ran[-1] if run.ran else run.jobs[-1]
    status = JobStatus.SUCCEEDED
    if stop is not None:  # a job that succeeded but broke the output contract: failed
        status = last.status if last.status is not JobStatus.SUCCEEDED else JobStatus.FAILED
    used = total([j.resources for j in run.ran])
    return {
        "job_id": last.id,
        "kind": str(JobKind.FOLD_EVAL),
        "status": str(status),
        "experiment_id": run.subject.experiment_id,
        "seed": run.subject.seed,
        "folds": len(run.steps),
        "jobs": [
            {"job_id": j.id, "kind": str(j.kind), "fold": j.fold, "status": str(j.status)}
            for j in run.ran
        ],
        "resources": {"cpu_s": used.cpu_s, "wall_s": used.wall_s, "peak_rss_mb": used.peak_rss_mb},
        "error": stop.reason if stop is not None else "",
    }


def execute_in_background(run: FoldRun) -> dict[str, Any]:
    """:func:`execute` for the background pool: an unexpected failure is logged (job_status
    reports it from the future) and re-raised."""
    try:
        return execute(run)
    except Exception:
        log.exception("background fold evaluation of %s failed", run.subject.experiment_id)
        raise


def queued_view(run: FoldRun) -> dict[str, Any]:
    """What ``run_job(wait=False)`` returns for a queued fold evaluation."""
    jobs = run.jobs
    return {
        "job_id": jobs[-1].id,
        "kind": str(JobKind.FOLD_EVAL),
        "status": str(JobStatus.QUEUED),
        "experiment_id": run.subject.experiment_id,
        "seed": run.subject.seed,
        "folds": len(run.steps),
        "job_ids": [j.id for j in jobs],
        "message": f"queued: {len(jobs)} jobs, run one after another; follow the last, "
        "job_id, with job_status: its 'fold_scores' appear once every fold is scored",
    }
