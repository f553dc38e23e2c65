"""Recovery of a campaign whose runner stopped without finishing (killed, crashed, rebooted).

Run it once after taking the campaign's lease and before doing anything else: jobs the dead
runner left queued or running can no longer report, so they are marked ``interrupted`` (final;
the work is re-run as a new job, a new attempt); experiments it left open are closed as
``cancelled`` with the reason in their summary, so none stays "running" forever, except those
the caller will continue (``keep_open``: the built-in runner runs a pending experiment's new
attempt under the same record); intents it left pending are listed for the runner to carry out
again under the same keys (see :mod:`rsilab.orchestrator.campaign._intents`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from pydantic import Field

from rsilab.orchestrator.writer import ACTOR, write
from rsilab.records import (
    Experiment,
    ExperimentState,
    Intent,
    IntentState,
    Job,
    Model,
    Record,
    utc_now,
)
from rsilab.store import Store

INTERRUPTED_ERROR = "the campaign runner stopped while this job was queued or running"
INTERRUPTED_SUMMARY = (
    "interrupted: the campaign runner stopped while this experiment was open; its work is "
    "re-run as a new attempt"
)


class Renewable(Protocol):
    """What recovery needs of a lease: the campaign it holds, and a renewal that raises
    when another process has taken it."""

    @property
    def campaign_id(self) -> str: ...

    def heartbeat(self) -> None: ...


class RecoveryReport(Model):
    """What :func:`recover_campaign` found and changed."""

    campaign_id: str = Field(description="The campaign recovered.")
    interrupted_job_ids: list[str] = Field(
        default_factory=list, description="Jobs marked interrupted, oldest first."
    )
    closed_experiment_ids: list[str] = Field(
        default_factory=list, description="Open experiments closed as cancelled, oldest first."
    )
    pending: list[Intent] = Field(
        default_factory=list, description="Intents to carry out again, oldest first."
    )
    done_intents: int = Field(default=0, description="Intents already done (not repeated).")

    def summary(self) -> str:
        """One line for people."""
        return (
            f"campaign {self.campaign_id}: {len(self.interrupted_job_ids)} job(s) interrupted, "
            f"{len(self.closed_experiment_ids)} experiment(s) closed, "
            f"{len(self.pending)} intent(s) to re-run, {self.done_intents} done"
        )


def recover_campaign(
    store: Store,
    lease: Renewable,
    *,
    pending: Sequence[Intent] = (),
    actor: str = ACTOR,
    keep_open: Callable[[Experiment], bool] | None = None,
) -> RecoveryReport:
    """Mark the unfinished jobs of ``lease``'s campaign interrupted, close its open
    experiments, and report them with the ``pending`` intents (the caller's listing).

    ``lease`` proves this process runs the campaign: it is renewed first (raising
    :class:`~rsilab.orchestrator.campaign.LeaseLost` if taken), so a live runner's jobs are never
    marked. All jobs change in one commit with one ``jobs_interrupted`` event, all experiments
    (but those ``keep_open`` accepts) in one with one ``experiments_interrupted`` event (none
    when there is nothing to change). Running it again changes nothing.
    """
    lease.heartbeat()
    campaign_id = lease.campaign_id
    jobs = [j for j in store.query_as(Job, campaign_id=campaign_id) if not j.is_finished()]
    stamp = utc_now()
    marked = [j.interrupted(INTERRUPTED_ERROR, stamp) for j in jobs]
    _commit_all(store, actor, campaign_id, "jobs_interrupted", marked)
    closed = _close_open_experiments(store, campaign_id, actor, stamp, keep_open)
    done = store.query_as(Intent, campaign_id=campaign_id, fields={"state": str(IntentState.DONE)})
    return RecoveryReport(
        campaign_id=campaign_id,
        interrupted_job_ids=[j.id for j in marked],
        closed_experiment_ids=closed,
        pending=list(pending),
        done_intents=len(done),
    )


def _close_open_experiments(
    store: Store,
    campaign_id: str,
    actor: str,
    stamp: str,
    keep_open: Callable[[Experiment], bool] | None,
) -> list[str]:
    """Close the campaign's created or running experiments as cancelled; their ids."""
    open_ = [
        e
        for e in store.query_as(Experiment, campaign_id=campaign_id)
        if not e.is_finished() and not (keep_open is not None and keep_open(e))
    ]
    closed = [
        e.model_copy(
            update={
                "state": ExperimentState.CANCELLED,
                "summary_text": INTERRUPTED_SUMMARY,
                "finished_at": stamp,
            }
        )
        for e in open_
    ]
    _commit_all(store, actor, campaign_id, "experiments_interrupted", closed)
    return [e.id for e in closed]


def _commit_all(
    store: Store, actor: str, campaign_id: str, action: str, records: Sequence[Record]
) -> None:
    """Commit ``records`` in one event ``action`` naming them (nothing when there are none)."""
    if records:
        detail = ", ".join(r.id for r in records)
        write(store, action, records, campaign_id=campaign_id, detail=detail, actor=actor)
