"""Recorded jobs: run one sandboxed job through an executor and keep a :class:`Job` for it.

Every job the Experiment OS or the controller runs goes through :func:`run_recorded_job`, so a
model file is traceable to the job that wrote it, the inputs it was made from (workspace tree,
data files, parent model, seed, command) and its logs. ``model_produced_by_job`` answers the
provenance question the controller asks before it trusts weights.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rsilab.executors.base import Executor, JobResult, JobSpec, JobState
from rsilab.records import EventDraft, Job, JobInputs, JobKind, JobStatus, Role, utc_now
from rsilab.sandbox.base import KillReason, RunSpec
from rsilab.store.artifacts import ArtifactStore, hash_file
from rsilab.store.base import Store

CONTROLLER_ACTOR = "controller"


def data_hashes(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` by relative path (empty if it does not exist)."""
    if not folder.is_dir():
        return {}
    return {
        str(p.relative_to(folder)): hash_file(p)
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def executor_name(job: Job) -> str:
    """The name a recorded job runs under in the executor (what ``Executor.cancel`` takes)."""
    return f"{job.kind}-{job.id}"


def commit_job(store: Store, job: Job, *, actor: str, role: Role, action: str) -> Job:
    """Write ``job`` (new or updated) with one ledger event; returns it with its new rev."""
    draft = EventDraft(
        actor=actor,
        role=str(role),
        action=action,
        campaign_id=job.campaign_id,
        detail=job.summary(),
        cost=job.resources if job.is_finished() else None,
    )
    store.commit(draft, [job])
    return job


def finish_job(job: Job, result: JobResult | None, *, error: str = "") -> Job:
    """``job`` updated with how it ended (``result`` None: it could not be run at all)."""
    if result is None:
        return job.model_copy(
            update={"status": JobStatus.FAILED, "error": error, "finished_at": utc_now()}
        )
    status = {
        JobState.SUCCEEDED: JobStatus.SUCCEEDED,
        JobState.FAILED: JobStatus.FAILED,
        JobState.KILLED: JobStatus.KILLED,
    }[result.state]
    if result.kill_reason is KillReason.CANCELLED:  # asked to stop (cancel_job): not a limit
        status = JobStatus.CANCELLED
    return job.model_copy(
        update={
            "status": status,
            "exit_code": result.exit_code,
            "kill_reason": str(result.kill_reason) if result.kill_reason else None,
            "stdout_sha256": result.stdout_sha256,
            "stderr_sha256": result.stderr_sha256,
            "resources": result.resources,
            "error": error,
            "finished_at": utc_now(),
        }
    )


def job_spec(name: str, spec: RunSpec) -> JobSpec:
    """The executor's JSON form of a sandbox RunSpec (threads left to the executor)."""
    return JobSpec(
        name=name,
        argv=list(spec.argv),
        workspace=spec.workspace,
        limits=spec.limits,
        env=dict(spec.env),
        stdin=spec.stdin,
        mounts=list(spec.mounts),
        hidden=list(spec.hidden),
        read_only_workspace=spec.read_only_workspace,
    )


def run_recorded_job(
    store: Store,
    artifacts: ArtifactStore,
    executor: Executor,
    job: Job,
    spec: RunSpec,
    *,
    actor: str,
    role: Role,
    on_start: Callable[[Job], None] | None = None,
) -> tuple[Job, JobResult | None]:
    """Record ``job`` as running, run ``spec``, record how it ended; never raises for the job.

    When the job succeeds and ``job.model_out`` names a file in the workspace, that file is
    stored as a blob and its sha256 recorded in ``model_out_sha256``. A sandbox that cannot run
    the job at all gives a failed Job with the reason in ``error`` and no JobResult.

    Raises:
        LabError: the store or artifact folder could not be written.
    """
    running = job.model_copy(update={"status": JobStatus.RUNNING})
    commit_job(store, running, actor=actor, role=role, action="job_started")
    if on_start is not None:
        on_start(running)
    try:
        result: JobResult | None = executor.run(job_spec(executor_name(job), spec))
        error = ""
    except Exception as exc:  # a sandbox failure is the job's failure, recorded as such
        result, error = None, f"the sandbox could not run the job: {exc}"
    done = finish_job(running, result, error=error)
    if result is not None and result.ok and job.model_out is not None:
        model = spec.workspace / job.model_out
        if model.is_file() and not model.is_symlink():
            done.model_out_sha256 = artifacts.put_file(model).sha256
        else:
            done = done.model_copy(
                update={
                    "status": JobStatus.FAILED,
                    "error": f"train exited 0 but wrote no model at {job.model_out}",
                }
            )
    elif result is not None and not result.ok and not error:
        done.error = _failure_text(artifacts, result)
    commit_job(store, done, actor=actor, role=role, action="job_finished")
    return done, result


def _failure_text(artifacts: ArtifactStore, result: JobResult) -> str:
    tail = artifacts.read_bytes(result.stderr_sha256).decode("utf-8", "replace").strip()[-600:]
    if result.kill_reason is KillReason.CANCELLED:
        return f"cancelled before it finished; stderr ends: {tail}"
    if result.kill_reason is not None:
        return f"killed at its {result.kill_reason} limit; stderr ends: {tail}"
    code = result.exit_code if result.exit_code is not None else f"signal {result.signal}"
    return f"exited with {code}; stderr ends: {tail}"


def model_produced_by_job(store: Store, sha256: str) -> Job | None:
    """The succeeded recorded job that produced the model with ``sha256``, or None."""
    for record in store.query(Job.KIND, fields={"model_out_sha256": sha256}):
        if isinstance(record, Job) and record.status is JobStatus.SUCCEEDED:
            return record
    return None


def new_job(
    kind: JobKind,
    inputs: JobInputs,
    *,
    campaign_id: str | None,
    actor: str,
    experiment_id: str | None = None,
    candidate_id: str | None = None,
    model_out: str | None = None,
    benchmark: str | None = None,
) -> Job:
    """A queued Job record (not yet written)."""
    return Job(
        campaign_id=campaign_id,
        kind=kind,
        inputs=inputs,
        experiment_id=experiment_id,
        candidate_id=candidate_id,
        model_out=model_out,
        benchmark=benchmark,
        actor=actor,
    )
