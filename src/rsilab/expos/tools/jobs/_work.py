"""The mechanics behind ``run_job``: prepare the workspace, plan the job, run it.

Nothing here is a tool. A :class:`JobRun` holds everything a job needs once the tool call
that planned it has returned (``run_job(wait=False)`` runs it on the services' background
pool), so it carries the store and the caller's name instead of a :class:`ToolEnv`. Every
write here goes through the caller's :class:`~rsilab.controller.jobs.JobRecorder`, with its
own ledger event (see :mod:`._run`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rsilab.controller.evaluation import public_data
from rsilab.controller.jobs import data_hashes, run_recorded_job
from rsilab.errors import ConflictError, ToolError
from rsilab.expos.services import LabServices, snapshot_workspace
from rsilab.expos.tools.jobs._records import (
    Caller,
    DevTiers,
    job_view,
    score_dev,
    sync_experiment,
)
from rsilab.records import (
    Dataset,
    DataTier,
    Experiment,
    Job,
    JobInputs,
    JobKind,
    JobStatus,
    new_id,
)
from rsilab.sandbox import hand_over, remove_tree
from rsilab.sandbox.base import RunSpec
from rsilab.store.artifacts import ArtifactStore
from rsilab.store.base import Store
from rsilab.tasks import (
    DATA_DIR,
    MODEL_SUFFIX,
    Manifest,
    Task,
    task_predict_spec,
    train_spec,
    write_data_dir,
)

log = logging.getLogger(__name__)

RUNS_DIR = "runs"
"""Workspace folder that holds one folder per job (its model, the model it was given)."""


@dataclass(frozen=True)
class JobRun:
    """A planned job: its record (not yet written), its sandbox spec, and what scores it."""

    store: Store
    artifacts: ArtifactStore
    services: LabServices
    caller: Caller
    job: Job
    spec: RunSpec
    dev: DevTiers = ()


# --- planning -----------------------------------------------------------------------------


def remove_planted(path: Path) -> None:
    """Delete ``path`` whatever it is, at any depth, never following a symlink out of the
    workspace and never opening anything but folders (:func:`rsilab.sandbox.remove_tree`)."""
    remove_tree(path)


def job_folder(workspace: Path, job_id: str) -> Path:
    """A fresh ``runs/<job-id>/`` (a planted ``runs`` link or file is removed first)."""
    runs = workspace / RUNS_DIR
    if runs.is_symlink() or (runs.exists() and not runs.is_dir()):
        runs.unlink()
    made = folder = runs / job_id
    if not runs.is_dir():
        made = runs
    folder.mkdir(parents=True)
    hand_over(workspace, made)  # the job writes its model there, as the sandbox user
    return folder


def place_model(
    artifacts: ArtifactStore, sha256: str | None, folder: Path, workspace: Path, suffix: str
) -> str | None:
    """Copy the recorded model blob into the job's folder; its workspace-relative path.

    The blob, not the workspace file, is what the job gets: the bytes whose provenance was
    checked, whatever happens to the file afterwards.
    """
    if sha256 is None:
        return None
    target = folder / f"model-in{suffix}"
    artifacts.materialize(sha256, target, "file")
    hand_over(workspace, target)
    return str(target.relative_to(workspace))


def _safe_component(name: str) -> bool:
    return bool(name) and name not in {".", ".."} and "/" not in name and "\x00" not in name


def write_job_data(
    store: Store,
    artifacts: ArtifactStore,
    task: Task,
    services: LabServices,
    exp: Experiment,
    workspace: Path,
) -> Path:
    """Write ``data-in/`` afresh: the public tiers, then each of the experiment's datasets
    under ``data-in/extra/<name>``; returns the folder."""
    data = workspace / DATA_DIR
    remove_planted(data)
    # The controller's own splits, so agents' jobs and its re-training see the same data.
    write_data_dir(data, public_data(task, services.controller(task).evaluator.splits))
    write_extras(store, artifacts, exp, data)
    hand_over(workspace, data)
    return data


def write_extras(store: Store, artifacts: ArtifactStore, exp: Experiment, data: Path) -> None:
    """Write each of the experiment's datasets under ``data/extra/<name>``.

    Raises:
        ToolError: a dataset is private or its name is not a plain file name.
    """
    for data_id in exp.data_ids:
        dataset = store.get_as(data_id, Dataset)
        if DataTier(dataset.tier).is_private or not _safe_component(dataset.name):
            raise ToolError(
                "conflict",
                f"dataset {dataset.id} ({dataset.name!r}) cannot be given to a job: it is "
                "private or its name is not a plain file name",
                field="experiment_id",
            )
        artifacts.materialize(
            dataset.artifact_sha256, data / "extra" / dataset.name, dataset.artifact_kind
        )


@dataclass(frozen=True)
class Plan:
    """What the tool resolved before planning: the experiment, task, harness and model."""

    services: LabServices
    store: Store
    artifacts: ArtifactStore
    caller: Caller
    exp: Experiment
    task: Task
    workspace: Path
    manifest: Manifest
    seed: int
    model_sha256: str | None


def plan_train(plan: Plan) -> JobRun:
    """Prepare ``data-in`` and ``runs/<job-id>/`` and build the train job."""
    job_id = new_id(Job.PREFIX)
    suffix = MODEL_SUFFIX[plan.manifest.model]
    folder = job_folder(plan.workspace, job_id)
    model_in = place_model(plan.artifacts, plan.model_sha256, folder, plan.workspace, suffix)
    data = write_job_data(
        plan.store, plan.artifacts, plan.task, plan.services, plan.exp, plan.workspace
    )
    model_out = f"{RUNS_DIR}/{job_id}/model{suffix}"
    spec = train_spec(
        plan.manifest,
        plan.workspace,
        data=DATA_DIR,
        model_out=model_out,
        seed=plan.seed,
        model_in=model_in,
        limits=plan.services.limits_for(plan.task),
    )
    spec = replace(spec, hidden=tuple(plan.task.data_sources))
    inputs = JobInputs(
        workspace_sha256=snapshot_workspace(plan.artifacts, plan.workspace),
        data_sha256=data_hashes(data),
        model_in_sha256=plan.model_sha256,
        config=plan.manifest.config,
        seed=plan.seed,
        argv=list(spec.argv),
    )
    job = new_agent_job(plan, job_id, JobKind.TRAIN, inputs, model_out)
    return JobRun(plan.store, plan.artifacts, plan.services, plan.caller, job, spec)


def plan_dev_eval(plan: Plan) -> JobRun:
    """Build one predict job over the dev tier of every benchmark, concatenated."""
    job_id = new_id(Job.PREFIX)
    model: str | None = None
    if plan.model_sha256 is not None:
        folder = job_folder(plan.workspace, job_id)
        suffix = MODEL_SUFFIX[plan.manifest.model]
        model = place_model(plan.artifacts, plan.model_sha256, folder, plan.workspace, suffix)
    splits = plan.services.controller(plan.task).evaluator.splits
    dev = tuple((bench, tuple(splits[bench.name][DataTier.DEV])) for bench in plan.task.benchmarks)
    spec = predict_job_spec(plan, dev, model, "dev")
    inputs = JobInputs(
        workspace_sha256=snapshot_workspace(plan.artifacts, plan.workspace),
        model_in_sha256=plan.model_sha256,
        seed=plan.seed,
        argv=recorded_argv(plan.task, spec),
    )
    job = new_agent_job(plan, job_id, JobKind.DEV_EVAL, inputs, None)
    return JobRun(plan.store, plan.artifacts, plan.services, plan.caller, job, spec, dev)


def predict_job_spec(
    plan: Plan,
    tiers: DevTiers,
    model: str | None,
    what: str,
    hidden: tuple[Path, ...] = (),
) -> RunSpec:
    """One predict job over the samples of ``tiers``, concatenated in order; the task's
    raw data files and ``hidden`` are hidden from it. ``what`` names the samples in errors.

    Raises:
        ToolError: sample ids repeat across benchmarks, or the harness cannot predict.
    """
    samples = [s for _, tier in tiers for s in tier]
    if len({s.id for s in samples}) != len(samples):
        raise ToolError(
            "tool_failed",
            f"task {plan.task.name!r} has {what} samples whose ids repeat across benchmarks, "
            "so one predict job cannot score them; this is a fault of the task, not the harness",
        )
    try:
        spec = task_predict_spec(
            plan.task,
            plan.workspace,
            samples,
            seed=plan.seed,
            model=model,
            manifest=plan.manifest,
            limits=plan.services.limits_for(plan.task),
        )
    except ValueError as exc:
        raise ToolError("tool_failed", f"the harness cannot predict: {exc}") from None
    return replace(spec, hidden=(*plan.task.data_sources, *hidden))


def recorded_argv(task: Task, spec: RunSpec) -> list[str]:
    """The command as a job record keeps it: a task driver's source is left out."""
    argv = list(spec.argv)
    if task.predict_driver is not None:
        argv[3] = f"<predict driver {task.predict_driver}>"
    return argv


def new_agent_job(
    plan: Plan,
    job_id: str,
    kind: JobKind,
    inputs: JobInputs,
    model_out: str | None,
    fold: str | None = None,
) -> Job:
    """A queued Job record of the planned experiment, started by the caller (not written)."""
    return Job(
        id=job_id,
        campaign_id=plan.exp.campaign_id,
        kind=kind,
        inputs=inputs,
        experiment_id=plan.exp.id,
        model_out=model_out,
        fold=fold,
        actor=plan.caller.actor,
    )


# --- running ------------------------------------------------------------------------------


def execute(run: JobRun) -> dict[str, Any]:
    """Run the job as a recorded job, score a dev evaluation, sync the experiment.

    A failed or killed job is a normal result. Raises ``ConflictError`` when the queued job
    was cancelled before it could start, and ``LabError`` when the lab cannot be written.
    """
    done, result = run_recorded_job(
        run.store,
        run.artifacts,
        run.services.executor,
        run.job,
        run.spec,
        actor=run.caller.actor,
        role=run.caller.role,
    )
    out = job_view(done)
    if run.job.kind is JobKind.DEV_EVAL and done.status is JobStatus.SUCCEEDED:
        assert result is not None  # a succeeded job has a result
        stdout = run.artifacts.read_bytes(result.stdout_sha256)
        out["dev"] = score_dev(run.store, run.caller, run.dev, done, stdout)
    if done.experiment_id is not None:
        sync_experiment(run.store, done.experiment_id, run.caller)
    return out


def execute_in_background(run: JobRun) -> dict[str, Any]:
    """:func:`execute` for the background pool: a cancelled queued job ends quietly, and an
    unexpected failure is logged (job_status reports it from the future) and re-raised."""
    try:
        return execute(run)
    except ConflictError:
        current = run.store.get_as(run.job.id, Job)
        if current.status is JobStatus.CANCELLED:
            return job_view(current)
        raise
    except Exception:
        log.exception("background job %s failed outside the sandbox", run.job.id)
        raise
