"""Recorded jobs: run one sandboxed job through an executor and keep a :class:`Job` for it.

Every job the Experiment OS or the controller runs goes through :func:`run_recorded_job`, so a
model file is traceable to the job that wrote it, the inputs it was made from (workspace tree,
data files, parent model, seed, command) and its logs. ``model_produced_by_job`` answers the
provenance question the controller asks before it trusts weights.

:class:`JobRecorder` is the one writer of what jobs produce outside a tool call's own event:
their records as they are queued, start and end, the dev and fold evaluations scored from
them, and the experiment they belong to as it starts and is synced with them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rsilab.executors.base import Executor, JobInterrupted, JobResult, JobSpec, JobState
from rsilab.faults import fault_point
from rsilab.records import (
    DataTier,
    Evaluation,
    EventDraft,
    Experiment,
    ExperimentState,
    Job,
    JobInputs,
    JobKind,
    JobStatus,
    Record,
    Resources,
    Role,
    utc_now,
)
from rsilab.sandbox.base import KillReason, Limits, RunSpec, why_killed
from rsilab.sandbox.nofollow import UnsafePath, open_written
from rsilab.store.artifacts import ArtifactStore, hash_file
from rsilab.store.base import Store

CONTROLLER_ACTOR = "controller"
NOT_RUN = "the sandbox could not run the job: "
"""How a recorded job's ``error`` starts when the sandbox or executor could not run it."""


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


_EVALUATED = {DataTier.DEV: "dev_evaluated", DataTier.TRAIN: "fold_evaluated"}
"""The action recorded for the evaluations of each tier a job scores (train: out of fold)."""


@dataclass(frozen=True)
class JobRecorder:
    """The one writer of what jobs produce; nothing else commits these records.

    A job runs while, or after, the tool call that asked for it (``run_job(wait=False)``
    returns at once), and its records must be visible as it goes (``job_status``,
    ``cancel_job``) and kept even when that call's own event cannot be written. So they are
    not staged with the call: each method here commits its records at once, with exactly one
    ledger event of its own. The event's actor and role are the recorder's, those of whoever
    asked for the work (an agent, or the controller for its own jobs); its action is one of
    ``job_queued``, ``job_started``, ``job_finished``, ``dev_evaluated``, ``fold_evaluated``,
    ``experiment_started`` and ``experiment_synced``. A recorder holds no state of its own:
    make one wherever work is done for someone, on any thread.

    Every method raises ``ConflictError`` when a record changed since it was read (a queued
    job cancelled meanwhile, an experiment updated by another writer, a finished record) and
    ``LabError`` when the lab cannot be written.
    """

    store: Store
    actor: str
    role: Role

    def queued(self, job: Job) -> Job:
        """Write a new job as queued, before it runs (so it can be followed and cancelled)."""
        return self._job(job, "job_queued")

    def started(self, job: Job) -> Job:
        """Write a job as running, just before the executor gets it."""
        return self._job(job, "job_started")

    def finished(self, job: Job) -> Job:
        """Write how a job ended (also a queued job closed without running); the event
        carries its resources as its cost."""
        return self._job(job, "job_finished")

    def evaluated(self, evaluations: Sequence[Evaluation], detail: str) -> None:
        """Write the dev or fold (train-tier) evaluations scored from jobs' outputs, one
        tier at a time; the event's detail is ``detail`` and the benchmarks' names.

        Raises:
            ValueError: no evaluations, more than one tier, or a tier no job of an agent
                scores (private tiers are the controller's, recorded with its decisions).
        """
        tiers = {e.tier for e in evaluations}
        action = _EVALUATED.get(evaluations[0].tier) if len(tiers) == 1 else None
        if action is None:
            raise ValueError(f"evaluations of one tier, dev or train, expected; got {tiers}")
        names = ", ".join(e.benchmark for e in evaluations)
        self._commit(action, evaluations[0].campaign_id, f"{detail}: {names}", evaluations)

    def experiment_started(self, exp: Experiment) -> Experiment:
        """Move a created experiment to running before its first job runs; an experiment
        past created is returned as it is, and nothing is written."""
        if exp.state is not ExperimentState.CREATED:
            return exp
        running = exp.model_copy(update={"state": ExperimentState.RUNNING})
        self._commit("experiment_started", exp.campaign_id, exp.summary(), [running])
        return running

    def experiment_synced(self, update: Experiment) -> Experiment:
        """Write an experiment brought up to date with its jobs and their evaluations."""
        self._commit("experiment_synced", update.campaign_id, update.summary(), [update])
        return update

    def _job(self, job: Job, action: str) -> Job:
        cost = job.resources if job.is_finished() else None
        self._commit(action, job.campaign_id, job.summary(), [job], cost)
        return job

    def _commit(
        self,
        action: str,
        campaign_id: str | None,
        detail: str,
        writes: Sequence[Record],
        cost: Resources | None = None,
    ) -> None:
        draft = EventDraft(
            actor=self.actor,
            role=str(self.role),
            action=action,
            campaign_id=campaign_id,
            detail=detail,
            cost=cost,
        )
        self.store.commit(draft, list(writes))


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
        gpus=spec.gpus,
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
    """Record ``job`` as running, run ``spec``, record how it ended; never raises for the job,
    except when the machine running it went away: then the job is recorded ``interrupted``
    and :class:`~rsilab.executors.JobInterrupted` goes up, for the caller to run the work again.

    When the job succeeds and ``job.model_out`` names a file in the workspace, that file is
    stored as a blob and its sha256 recorded in ``model_out_sha256``. A sandbox that cannot run
    the job at all gives a failed Job with the reason in ``error`` and no JobResult.

    Raises:
        JobInterrupted: the executor lost the job's machine (the job is ``interrupted``).
        LabError: the store or artifact folder could not be written.
    """
    recorder = JobRecorder(store, actor, role)
    running = recorder.started(job.model_copy(update={"status": JobStatus.RUNNING}))
    fault_point(job.kind.replace("-", "_"))
    if on_start is not None:
        on_start(running)
    try:
        result: JobResult | None = executor.run(job_spec(executor_name(job), spec))
        error = ""
    except JobInterrupted as exc:  # its machine went away: recovery's to re-run, not a failure
        recorder.finished(running.interrupted(str(exc), utc_now()))
        raise
    except ValueError as exc:  # the sandbox refuses the spec (more GPUs than it has, ...)
        result, error = None, f"the sandbox refused the job: {exc}"
    except Exception as exc:  # the sandbox or executor failed: recorded as the job's failure
        result, error = None, f"{NOT_RUN}{exc}"
    done = finish_job(running, result, error=error)
    if result is not None and result.ok and job.model_out is not None:
        stored, why = _store_model(artifacts, spec.workspace, job.model_out)
        if stored is not None:
            done.model_out_sha256 = stored
        else:
            done = done.model_copy(
                update={
                    "status": JobStatus.FAILED,
                    "error": f"train exited 0 but wrote no model at {job.model_out}{why}",
                }
            )
    elif result is not None and not result.ok and not error:
        done.error = _failure_text(artifacts, result, spec.limits)
    recorder.finished(done)
    return done, result


def _store_model(artifacts: ArtifactStore, workspace: Path, rel: str) -> tuple[str | None, str]:
    """The sha256 of the model a job wrote at ``rel``, stored; or None and why not. The job
    owned the workspace: the file is reached without following a link anywhere on its path
    (a folder on the way replaced by a link would hand the host a file outside it)."""
    try:
        fd = open_written(workspace, rel)
    except FileNotFoundError:
        return None, ""
    except UnsafePath as exc:
        return None, f" ({exc.strerror}: links are not followed out of a job's workspace)"
    except OSError as exc:
        return None, f" ({exc.strerror or exc})"
    with os.fdopen(fd, "rb") as handle:
        return artifacts.put_handle(handle).sha256, ""


def _failure_text(artifacts: ArtifactStore, result: JobResult, limits: Limits) -> str:
    tail = artifacts.read_bytes(result.stderr_sha256).decode("utf-8", "replace").strip()[-600:]
    if result.kill_reason is KillReason.CANCELLED:
        return f"cancelled before it finished; stderr ends: {tail}"
    if result.kill_reason is not None:
        return f"killed: {why_killed(result.kill_reason, limits)}; stderr ends: {tail}"
    code = result.exit_code if result.exit_code is not None else f"signal {result.signal}"
    return f"exited with {code}; stderr ends: {tail}"


def model_produced_by_job(store: Store, sha256: str) -> Job | None:
    """The succeeded recorded job that produced the model with ``sha256``, or None."""
    for record in store.query(Job.KIND, fields={"model_out_sha256": sha256}):
        if isinstance(record, Job) and record.status is JobStatus.SUCCEEDED:
            return record
    return None


def recorded_success(store: Store, artifacts: ArtifactStore, job: Job) -> Job | None:
    """The first controller job that succeeded with ``job``'s key and whose outputs are still
    stored, or None: what a resumed or retried evaluation reuses instead of running ``job``.

    The key is everything the job is made from: its kind, its inputs (harness tree, data
    files, model in, config, seed, command, and for predict the hash of its stdin), campaign,
    candidate and model path. The *first* success counts, so running a job again can never
    offer a second draw to choose from.
    """
    for found in store.query_as(Job, fields={"kind": str(job.kind), "status": "succeeded"}):
        if (
            found.actor == CONTROLLER_ACTOR
            and found.kind.is_private
            and (found.campaign_id, found.candidate_id) == (job.campaign_id, job.candidate_id)
            and found.experiment_id is None
            and found.model_out == job.model_out
            and found.inputs == job.inputs
        ):
            # a model or output since collected (gc) cannot be reused: the job runs again
            needed = [found.stdout_sha256] + ([found.model_out_sha256] if job.model_out else [])
            stored = all(sha is not None and artifacts.has(sha) for sha in needed)
            return found if stored else None
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
