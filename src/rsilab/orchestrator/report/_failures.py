"""Why a campaign's experiments failed: each distinct reason once, with its count and an
example, read from the records (the failed job's error, else what the experiment's worker
said when it closed it)."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field

from rsilab.records import Experiment, ExperimentState, Job, JobStatus, Model
from rsilab.store import StoreReader

REASON_CHARS = 200
"""A reason is cut to this many characters: one line in a table."""

_FAILED = {ExperimentState.FAILED, ExperimentState.CANCELLED}
_NOT_FAILED = {JobStatus.QUEUED, JobStatus.RUNNING, JobStatus.SUCCEEDED}
_STDERR = "; stderr ends:"
NO_REASON = "no failed job and no reason recorded"


class FailureGroup(Model):
    """Experiments that failed for one reason."""

    reason: str = Field(description="Why, on one line (a job's error, or the worker's words).")
    count: int = Field(description="How many experiments failed for it.")
    example_experiment_id: str = Field(description="The first of them.")


def failure_groups(store: StoreReader, experiments: Sequence[Experiment]) -> list[FailureGroup]:
    """The failed and cancelled ones of ``experiments`` grouped by reason, most frequent first
    (ties: the reason seen first in ``experiments``' order)."""
    failed = [e for e in experiments if e.state in _FAILED]
    if not failed:
        return []
    jobs: dict[str, list[Job]] = {}
    for campaign_id in {e.campaign_id for e in failed}:
        for job in store.query_as(Job, campaign_id=campaign_id):
            if job.experiment_id is not None:
                jobs.setdefault(job.experiment_id, []).append(job)
    groups: dict[str, FailureGroup] = {}
    for exp in failed:
        reason = failure_reason(exp, jobs.get(exp.id, []))
        seen = groups.get(reason)
        groups[reason] = (
            FailureGroup(reason=reason, count=1, example_experiment_id=exp.id)
            if seen is None
            else seen.model_copy(update={"count": seen.count + 1})
        )
    order = list(groups)
    return sorted(groups.values(), key=lambda g: (-g.count, order.index(g.reason)))


def failure_reason(exp: Experiment, jobs: Sequence[Job]) -> str:
    """Why ``exp`` failed, on one line: its last failed job's error (kind, then the error;
    for a job that exited, the last line of its stderr, where the exception is), else the
    summary its worker closed it with, else :data:`NO_REASON`."""
    bad = [j for j in jobs if j.status not in _NOT_FAILED and j.error]
    if bad:
        last = max(bad, key=lambda j: j.created_at)
        return _one_line(f"{last.kind} job {_job_error(last.error)}")
    if exp.summary_text.strip():
        return _one_line(exp.summary_text)
    return "cancelled" if exp.state is ExperimentState.CANCELLED else NO_REASON


def _job_error(error: str) -> str:
    """A job's error without what differs between runs of one fault: a limit's kill and a
    cancellation keep their own words; an exit keeps the last line of stderr (the exception,
    or the harness's own message)."""
    head, _, tail = error.partition(_STDERR)
    if not tail or head.startswith(("killed:", "cancelled")):
        return head.strip()
    lines = [line for line in tail.splitlines() if line.strip()]
    return f"{head.strip()}: {lines[-1].strip()}" if lines else head.strip()


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= REASON_CHARS else flat[: REASON_CHARS - 1] + "…"
