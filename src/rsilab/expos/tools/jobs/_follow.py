"""Following the agents' jobs: ``job_status``, ``job_logs`` and ``cancel_job``.

``job_status`` is a long poll: with ``wait`` it answers when the job's status changes or the
wait ends, so a caller need not poll in a loop. Quick polls are limited per caller (its
campaign and actor, in this process): a token bucket of :data:`POLL_BURST` calls refilled at
:data:`POLL_RATE_PER_S` a second; a call beyond it is refused (``rate_limited``), and, like
every call, recorded in the ledger.
"""

from __future__ import annotations

import threading
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

MAX_WAIT_S = 60.0
"""The longest ``job_status`` waits for a change."""
WAIT_POLL_S = 0.05
"""How often a waiting ``job_status`` reads the job's record."""
POLL_BURST = 120
"""``job_status`` calls a caller may make at once before the rate limit applies."""
POLL_RATE_PER_S = 4.0
"""``job_status`` calls a second a caller may make, sustained."""

TailBytes = Annotated[int, Field(ge=1, le=MAX_TAIL_BYTES)]
WaitSeconds = Annotated[float, Field(ge=0, le=MAX_WAIT_S)]


class _PollLimiter:
    """A token bucket per caller key; thread-safe. Keys of callers idle long enough to have
    a full bucket again are dropped, so the table stays small."""

    def __init__(self, burst: int, rate_per_s: float) -> None:
        self.burst, self.rate = float(burst), rate_per_s
        self.lock = threading.Lock()
        self.buckets: dict[tuple[str, ...], tuple[float, float]] = {}

    def take(self, key: tuple[str, ...]) -> float | None:
        """Spend one call of ``key``; None when allowed, else seconds until one is."""
        now = time.monotonic()
        with self.lock:
            tokens, at = self.buckets.get(key, (self.burst, now))
            tokens = min(self.burst, tokens + (now - at) * self.rate)
            if tokens < 1.0:
                self.buckets[key] = (tokens, now)
                return (1.0 - tokens) / self.rate
            self.buckets[key] = (tokens - 1.0, now)
            if len(self.buckets) > 1024:  # forget the callers whose bucket is full again
                full_after = self.burst / self.rate
                self.buckets = {k: v for k, v in self.buckets.items() if now - v[1] < full_after}
            return None


_POLLS = _PollLimiter(POLL_BURST, POLL_RATE_PER_S)


@tool(Category.EXECUTION)
def job_status(env: ToolEnv, job_id: RecordId, wait: WaitSeconds = 0) -> dict[str, Any]:
    """A job's state, kind, timings, resources, model path and error text.

    Prefer waiting to polling: with ``wait`` the call returns as soon as the job's status
    changes (queued -> running -> an end), or when the wait is over. Quick polls are
    limited per caller (refused with 'rate_limited' beyond about 4 a second).

    Args:
        job_id: a job of this campaign (run_job's job_id).
        wait: seconds (0 to 60) to wait for the job's status to change; 0 answers at once.
            Only a job this process runs is waited for; another answers at once.
    """
    _limit_polls(env)
    job = env.read(job_id, Job, field_name="job_id")
    services = env.lab_services
    future = services.future(job.id) if services is not None else None
    if wait > 0 and future is not None and not job.is_finished():
        job = _wait_changed(env, job, wait)
    out = jobrec.job_view(job)
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


def _limit_polls(env: ToolEnv) -> None:
    """Refuse (``rate_limited``) a caller past its share of ``job_status`` calls."""
    key = (env.call.campaign_id or "", env.call.actor, str(env.call.role))
    retry_in = _POLLS.take(key)
    if retry_in is not None:
        raise ToolError(
            "rate_limited",
            f"too many job_status calls from {env.call.actor} (about {POLL_RATE_PER_S:g} a "
            f"second are allowed); call again in {retry_in:.1f}s, and pass wait=SECONDS to "
            "wait for the job to change instead of polling",
            field="wait",
            expected=f"a wait of up to {MAX_WAIT_S:g} seconds instead of quick polls",
        )


def _wait_changed(env: ToolEnv, job: Job, wait_s: float) -> Job:
    """The job's record once its status differs from ``job``'s, or after ``wait_s``."""
    deadline = time.monotonic() + wait_s
    current = job
    while current.status is job.status and time.monotonic() < deadline:
        time.sleep(min(WAIT_POLL_S, max(0.0, deadline - time.monotonic())))
        current = env.store.get_as(job.id, Job)
    return current


def _wait_finished(env: ToolEnv, job_id: str, timeout_s: float) -> Job:
    deadline = time.monotonic() + timeout_s
    job = env.store.get_as(job_id, Job)
    while not job.is_finished() and time.monotonic() < deadline:
        time.sleep(0.05)
        job = env.store.get_as(job_id, Job)
    return job
