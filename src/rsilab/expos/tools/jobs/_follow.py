"""Following the agents' jobs: ``job_status``, ``job_logs`` and ``cancel_job``."""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from pydantic import Field

from rsilab.controller.jobs import executor_name
from rsilab.errors import ToolError
from rsilab.expos.context import ToolEnv
from rsilab.expos.registry import Category
from rsilab.expos.tools._base import RecordId, require, tool
from rsilab.expos.tools.jobs import _records as jobrec
from rsilab.records import Job, JobStatus, utc_now

MAX_TAIL_BYTES = 65536
CANCEL_WAIT_S = 5.0
"""How long cancel_job waits for a killed job's record to say how it ended."""

TailBytes = Annotated[int, Field(ge=1, le=MAX_TAIL_BYTES)]


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
