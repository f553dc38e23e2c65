"""A baseline caught halfway: the job records the Host Controller writes while it evaluates
a lineage's baseline (one ``controller-train`` job per seed, started together, with no
campaign, candidate or experiment), written through the controller's own recorder."""

from __future__ import annotations

from rsilab.controller.jobs import CONTROLLER_ACTOR, JobRecorder, new_job
from rsilab.records import JobInputs, JobKind, JobStatus, Role
from rsilab.store import Store


def record_baseline_jobs(store: Store, *, started: int, finished: int) -> None:
    """``started`` baseline training jobs recorded as running, the first ``finished`` of them
    then recorded as succeeded."""
    recorder = JobRecorder(store, CONTROLLER_ACTOR, Role.CONTROLLER)
    running = [
        recorder.started(
            new_job(
                JobKind.CONTROLLER_TRAIN,
                JobInputs(workspace_sha256="0" * 64, seed=seed),
                campaign_id=None,
                actor=CONTROLLER_ACTOR,
            ).model_copy(update={"status": JobStatus.RUNNING})
        )
        for seed in range(started)
    ]
    for job in running[:finished]:
        recorder.finished(
            job.model_copy(update={"status": JobStatus.SUCCEEDED, "finished_at": job.created_at})
        )
